/* SPDX-License-Identifier: MIT */
/* From a node model to what the planner needs: the rates of one rank
 * (pt_hw of lib/plan/cost.h) and the size of the fastest island in ranks.
 * Part of libptrain_topo (hwloc, no MPI, no BLAS), so the SPANK plugin
 * can call it in slurmstepd; lib/plan stays libc-only and never sees a
 * pt_topo. */
#ifndef PTRAIN_TOPO_PLAN_H
#define PTRAIN_TOPO_PLAN_H
#include <stddef.h>

#include "plan/cost.h"
#include "plan/search.h"
#include "topo/topo.h"

/* The bf16 GEMM rate over the fp32 rate the node model assumes for a CPU
 * whose bf16 GEMM is fp32 sgemm on converted tiles (no AMX-BF16) and was not
 * measured: lib/backend/gemm_bf16.c's measurements put it at 0.85 to 0.95
 * (bench-gemm-bf16) */
#define PT_BF16_SGEMM_RATIO 0.9

/* What the user or the admin gives instead of the model's numbers; 0 in
 * a field means "from the model". */
typedef struct pt_topo_hw_override {
    double inter_gbps;   /* network bandwidth of one node (GB/s), shared by its tasks */
    double mem_gb;       /* memory one rank may use (GB, 1e9 bytes) */
    double gemm_gflops;  /* fp32 GEMM rate of one rank (GFLOP/s) */
    double gemm_gflops_bf16; /* bf16 GEMM rate of one rank (GFLOP/s) */
} pt_topo_hw_override;

/* Fill hw and *island_ranks for tasks_per_node ranks on every node of
 * model t, with ov (may be NULL) overriding; t NULL (no node model: the
 * plugin and ptrain-run without a cached or hwloc model) plans for one
 * NUMA node of one core and no GPU, every figure an estimate.  Ranks are
 * numbered node by
 * node and, inside a node, spread over the devices in island order
 * (pt_topo_device_order: the devices of one island together, as the
 * plugin binds tasks; GPUs when the node has any, else NUMA nodes):
 * tasks_per_node / ndev consecutive ranks per device (ranks beyond a
 * multiple share the last).
 *
 * island_ranks: the ranks on one island of pt_topo_islands_find when the
 * islands are of one size, else 0 (the node counts as one island).
 * gbps/lat_s, each link class (GB/s, seconds):
 *   island  the slowest link between two devices of one island
 *           (pt_topo_link_gbps: measured or recorded, else its estimate
 *           from the link class); ranks that share one device, or CPU
 *           nodes: the measured intra-node MPI bandwidth of the net probe,
 *           else the node's measured STREAM copy bandwidth divided by the
 *           tasks of one NUMA node, else 10 GB/s (estimate); a CPU node
 *           with several NUMA nodes that form one island takes the node
 *           figure (its slowest link);
 *   node    the slowest link between any two devices of the node (CPU
 *           nodes: the net probe's intra-node figure, else the slowest
 *           measured cross-NUMA copy bandwidth / tasks, else 5 GB/s, an
 *           estimate; one NUMA node: the island figure);
 *   network ov->inter_gbps, else the net probe's inter-node bandwidth,
 *           else 12.5 GB/s (100 Gb/s) per InfiniBand/RoCE adapter, else
 *           1.25 GB/s (10 Gb/s Ethernet) -- an estimate -- divided by
 *           tasks_per_node (the tasks of a node share its network);
 *   ring    with the net probe's alpha-beta fit (ring_gbps), each class
 *           above is at most its ring-step bandwidth on the links the
 *           probe's ring spanned: the network when it spanned several
 *           nodes (unless ov->inter_gbps is given), else the CPU ranks'
 *           island and node classes (what one rank gets while every rank
 *           sends, which ranks sharing cores or one memory bus make far
 *           less than a ping-pong's);
 *   latency the net probe's ring-step latency (ring_lat_us, from its
 *           allreduce over all the probe's ranks: what one step of lib/comm's
 *           collectives costs, contention included) for the links inside a
 *           node when the probe ran on one node, for the network when it
 *           spanned several (the ring's slowest step crosses it), each at
 *           least the ping-pong latency of that link; a model without it
 *           (older files) takes the ping-pong latencies; not measured:
 *           2 us (island), 3 us (node), 5 us (network), estimates.
 * coll_gbps, coll_lat_s (each collective kind's bus bandwidth and alpha
 *   per step, lib/plan/cost.h): the probe's per-kind fit of each link
 *   class: net.coll_class[PT_TOPO_CLASS_NODE] (the ranks of one node) on
 *   the CPU ranks' island and node classes (not a GPU node's links, which
 *   the host-memory probe does not use), net.coll_class[NETWORK] (one rank
 *   per node) on the network (its bandwidth not when ov->inter_gbps is
 *   given); a class the probe did not fit on its own (files from before)
 *   takes the all-ranks fit (net.coll_busbw, coll_lat_us) where the
 *   probe's ranks spanned it, as for the ring above (the network when
 *   they spanned several nodes, else the node); a kind not fitted and
 *   every other class 0 (the class's gbps and lat_s, an estimate; the
 *   note says which figure is measured).
 * busy_delay_s: with more tasks than cores (ranks_per_core > 1) and the
 *   net probe's pair allreduces, pair_busy_us - pair_us (s) within
 *   [0, 0.1] (what one pipeline send waits while other ranks compute);
 *   else 0 (none).
 * mem_bytes: ov->mem_gb, else the GPU's memory read from its model name
 *   ("... 80GB ...") divided by the ranks sharing the GPU, else the node's
 *   memory (sum of NUMA nodes, or what the OS reports) / tasks_per_node.
 * gemm_n_half: on CPU nodes without ov->gemm_gflops, the model's Hockney
 *   fit (gemm_fit, rows): then gemm_gflops starts from its r_inf instead
 *   of the one-size gemm_gflops; else 0 (one rate for every size).
 * gemm_gflops: ov->gemm_gflops, else the model's measured gemm_gflops
 *   (ptrain-topo --probe: one core's sgemm rate) times the cores per
 *   rank on CPU nodes, else an estimate: CPU nodes 32 GFLOP/s
 *   per core (AVX2: 2 FMA units x 8 fp32 lanes x 2 flops at 2 GHz, at
 *   half of peak as OpenBLAS sgemm reaches on a loaded node) times the
 *   cores per rank; GPU nodes the fp32 peak of the GPU's data sheet
 *   (H100 SXM, H200 and GH200 67000, H100 and H200 NVL 60000, H100 PCIe
 *   and other H100s 51200, L40S 91600, A100 19500, V100 15700 GFLOP/s;
 *   others 19500: NVIDIA's H100, H200, A100, L40S and V100 data sheets)
 *   shared by the ranks of a GPU (the measured per-core figure is for
 *   CPU nodes only).  A CPU node with more tasks than cores gets one
 *   core's rate and ranks_per_core = tasks / cores (the cost model shares
 *   the core among them).
 * gemm_gflops_bf16: ov->gemm_gflops_bf16, else on GPU nodes the dense bf16
 *   tensor-core peak of the same board's data sheet (H100 SXM, H200 and
 *   GH200 989000, H100 and H200 NVL 835000, H100 PCIe and other H100s
 *   756000, L40S 362000, A100 312000 GFLOP/s; V100 and GPUs not in the
 *   table 0: the board is the fp32 rate's, an H100 named with SXM or HBM3
 *   the SXM one) shared by the ranks of a GPU, else
 *   on CPU nodes the model's measured gemm_gflops_bf16 (ptrain-topo
 *   --probe: one core's pt_gemm_bf16 rate) times the cores per rank (one
 *   core with more tasks than cores), scaled by gemm_rinf_gflops /
 *   gemm_gflops when gemm_n_half comes from the Hockney fit; else 0 (bf16
 *   plans compute at gemm_gflops).  Its note line begins "gemm bf16:"
 *   (ptrain-plan shows it for bf16 plans only).
 * note (may be NULL): one line per figure saying where it came from
 * ("measured", "recorded", "estimate", "override").
 * Returns 0, or -1 with one line in pt_errmsg() (tasks_per_node < 1, a model
 * without NUMA nodes). */
int pt_topo_plan_hw(const pt_topo *t, int tasks_per_node, const pt_topo_hw_override *ov, pt_hw *hw,
                    int *island_ranks, char *note, size_t note_len);

/* ---- the one node-model loader and cluster builder of the front ends ----
 * (the SPANK plugin, ptrain-run --mode auto, ptrain-plan: each plans on
 * what these two build, through lib/plan/planner.h). */

/* One node-model argument FILE[:COUNT] (ptrain-plan's and ptrain-run's
 * --topology, `what` naming it in messages): the file into path [path_len]
 * and its node count into *count (0: none given).  The count is the
 * digits after the last ':'; a path with a ':' of its own keeps it when
 * what follows is not a number.  Returns 0, or -1 with one line in pt_errmsg()
 * ("invalid <what> '<s>' (valid: FILE or FILE:COUNT, COUNT nodes
 * 1..1048576)", or a path of path_len bytes or more); path and *count are
 * then unspecified. */
int pt_topo_plan_arg_parse(const char *what, const char *s, char *path, size_t path_len, int *count);

/* Where pt_topo_plan_load found the model. */
enum { PT_TOPO_FROM_NONE = 0, PT_TOPO_FROM_PATH = 1, PT_TOPO_FROM_HWLOC = 2 };
/* pt_topo_plan_load's flags. */
enum {
    PT_TOPO_LOAD_FALLBACK = 1,  /* a path that cannot be loaded: a warning, then hwloc */
    PT_TOPO_LOAD_ESTIMATES = 2, /* no hwloc model either: no model (pt_topo_plan_hw's estimates) */
    PT_TOPO_LOAD_WARN = 4,      /* ... and a warning saying so */
};

/* Load the node model the planner uses: `path` (a ptrain-topo --save JSON
 * or XML cache, or an hwloc XML; NULL or "" = none) when given, else this
 * node's hwloc model (pt_topo_load_hwloc(NULL): the running machine, or
 * $PTRAIN_TOPOLOGY).  *from gets PT_TOPO_FROM_*; t is loaded when *from is
 * not NONE (free it with pt_topo_free).  A path that cannot be loaded is
 * -1 with the loader's one line (pt_errmsg(): "FILE: ...") in err, unless
 * PT_TOPO_LOAD_FALLBACK: then notes get "ptrain: warning: cannot load the
 * node model <what>=<path> (<why>); planning from this node's hwloc model"
 * and hwloc is tried.  No hwloc model is -1 with its reason, unless
 * PT_TOPO_LOAD_ESTIMATES (with PT_TOPO_LOAD_WARN: notes get "ptrain:
 * warning: no node model (hwloc: <why>); planning from ptrain.conf's rates
 * and defaults").  notes (may be NULL) collects warnings, one per line. */
int pt_topo_plan_load(const char *path, const char *what, unsigned flags, pt_topo *t, int *from, char *notes,
                      size_t notes_len);

/* The cluster a step runs on, built from its node models: pt_cluster
 * (lib/plan/search.h) and the storage it points into. */
typedef struct pt_plan_machine {
    pt_cluster cluster;
    int *tasks;          /* [nnodes] tasks per node */
    int *kind_of;        /* [nnodes] each node's kind (NULL with one kind) */
    pt_node_kind *kinds; /* [nkinds] */
    char (*names)[128];  /* [nkinds] the kinds' names */
    int nkinds;
    int *island_of_kind; /* [nkinds] */
    char note[4096];     /* pt_topo_plan_hw's notes, per kind ("[name] " before each line with
                          * several kinds) */
} pt_plan_machine;

/* Build the cluster of nnodes nodes, node i running tasks_per_node[i]
 * tasks on a node of kind kind_of[i] (NULL: every node kind 0) whose model
 * is models[kind] (a NULL entry: no model, the estimates) named
 * names[kind] (NULL: "kind <k>").  Each kind's rates are pt_topo_plan_hw's
 * for the most tasks any of its nodes runs, with ov (may be NULL) and
 * inter_lat_us (> 0: the network's latency per message, us) over them.
 * One kind present: the cluster of identical nodes (nkinds 0, hw and
 * island_ranks that kind's), as before mixed nodes existed; several: the
 * kinds, and hw the slowest of them (pt_cluster_slowest).  Returns 0, or
 * -1 with one line (a bad count, a kind out of range, a model
 * pt_topo_plan_hw refuses, no memory).  Free with pt_plan_machine_free. */
int pt_plan_machine_build(pt_plan_machine *m, int nkinds, const pt_topo *const *models, const char *const *names,
                          const int *kind_of, const int *tasks_per_node, int nnodes, const pt_topo_hw_override *ov,
                          double inter_lat_us);
void pt_plan_machine_free(pt_plan_machine *m);

/* Hockney's (r_inf, n_1/2) model of a rate over a size (Hockney and
 * Jesshope, "Parallel Computers 2", 1988; Hockney 1994, "The
 * communication challenge for MPP: Intel Paragon and Meiko CS-2",
 * Parallel Computing 20(3)), fitted to k measured points: the
 * rate of GEMMs of rows[i] rows (any positive size unit) is gflops[i]
 * (GFLOP/s).  The model rate(n) = r_inf n / (n + n_half) is linear in
 * 1/n after inverting, 1/rate = 1/r_inf + (n_half/r_inf) (1/n), so the
 * fit is ordinary least squares of 1/gflops on 1/rows.  A fit whose slope
 * comes out negative (the large sizes slower: noise, caches) is the mean
 * rate with n_half = 0.  Writes *r_inf (GFLOP/s) and *n_half (rows).
 * Returns 0, or -1 with one line in pt_errmsg() when k < 2, a value is not
 * positive and finite, or every rows[i] is the same. */
int pt_topo_gemm_fit(const double *rows, const double *gflops, int k, double *r_inf, double *n_half);

#endif
