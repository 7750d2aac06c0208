/* From a node model to what the planner needs: the rates of one rank
 * (pt_hw of lib/plan/cost.h) and the size of the fastest island in ranks.
 * Part of libptrain_topo (hwloc, no MPI, no BLAS), so the SPANK plugin
 * can call it in slurmstepd; lib/plan stays libc-only and never sees a
 * pt_topo. */
#ifndef PTRAIN_TOPO_PLAN_H
#define PTRAIN_TOPO_PLAN_H
#include <stddef.h>

#include "plan/cost.h"
#include "topo/topo.h"

/* What the user or the admin gives instead of the model's numbers; 0 in
 * a field means "from the model". */
typedef struct pt_topo_hw_override {
    double inter_gbps;   /* network bandwidth of one node (GB/s), shared by its tasks */
    double mem_gb;       /* memory one rank may use (GB, 1e9 bytes) */
    double gemm_gflops;  /* fp32 GEMM rate of one rank (GFLOP/s) */
} pt_topo_hw_override;

/* Fill hw and *island_ranks for tasks_per_node ranks on every node of
 * model t, with ov (may be NULL) overriding.  Ranks are numbered node by
 * node and, inside a node, spread over the devices in index order
 * (GPUs when the node has any, else NUMA nodes): tasks_per_node / ndev
 * consecutive ranks per device (ranks beyond a multiple share the last).
 *
 * island_ranks: the ranks on one island of pt_topo_islands_find when the
 * islands are contiguous in device order and of one size, else 0 (the
 * node counts as one island).
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
 *   latency the net probe's intra/inter-node latencies when measured, else
 *           2 us (island), 3 us (node), 5 us (network), estimates.
 * mem_bytes: ov->mem_gb, else the GPU's memory read from its model name
 *   ("... 80GB ...") divided by the ranks sharing the GPU, else the node's
 *   memory (sum of NUMA nodes, or what the OS reports) / tasks_per_node.
 * gemm_gflops: ov->gemm_gflops, else the model's measured gemm_gflops
 *   (ptrain-topo --probe: one core's sgemm rate) times the cores per
 *   rank on CPU nodes, else an estimate: CPU nodes 32 GFLOP/s
 *   per core (AVX2: 2 FMA units x 8 fp32 lanes x 2 flops at 2 GHz, at
 *   half of peak as OpenBLAS sgemm reaches on a loaded node) times the
 *   cores per rank; GPU nodes the fp32 peak of the GPU's data sheet
 *   (H100/H200 51200, A100 19500, V100 15700 GFLOP/s; others 19500)
 *   shared by the ranks of a GPU (the measured per-core figure is for
 *   CPU nodes only).
 * note (may be NULL): one line per figure saying where it came from
 * ("measured", "recorded", "estimate", "override").
 * Returns 0, or -1 with one line in err (tasks_per_node < 1, a model
 * without NUMA nodes). */
int pt_topo_plan_hw(const pt_topo *t, int tasks_per_node, const pt_topo_hw_override *ov, pt_hw *hw,
                    int *island_ranks, char *note, size_t note_len, pt_error *err);

#endif
