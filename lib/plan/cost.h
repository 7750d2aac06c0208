/* The cost model of a plan: FLOPs, bytes per group, memory per rank, the
 * pipeline bubble and a predicted step time, for a GPT model shape and a
 * global batch.  libc only (with libm), so the SPANK plugin links it.
 *
 * Sources: per-layer tensor-parallel volumes are Table 1 of the
 * Colossal-AI paper (Li et al. 2021, "Colossal-AI", sec. 3.2) as
 * lib/parallel implements them (1d Megatron, 2d SUMMA, 2.5d Tesseract, 3d);
 * ring self-attention (Li et al. 2021, "Sequence Parallelism", sec. 3);
 * gradient allreduce / ZeRO reduce-scatter + allgather (Rajbhandari et al.
 * 2020, sec. 5 and 7); pipeline bubble (Huang et al. 2019; Narayanan et al.
 * 2021, sec. 2.2); the alpha-beta collective model (Thakur et al. 2005,
 * "Optimization of Collective Communication Operations in MPICH").
 *
 * Every byte count is what lib/comm's counters report for the same step:
 * bytes sent per rank (ring model: an allreduce of b bytes over p ranks
 * sends 2(p-1)/p b; allgather, reduce-scatter, broadcast and reduce of b
 * full bytes send (p-1)/p b; send = its bytes), maximum over ranks,
 * grouped as ptrain-run's metrics group them ("sent_bytes" of
 * ptrain-run(1)).  Memory is what the arena holds at its peak. */
#ifndef PTRAIN_PLAN_COST_H
#define PTRAIN_PLAN_COST_H
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "plan/plan.h"

/* The model shape a plan is made for: the same fields and presets as
 * lib/model's pt_gpt_config (pt_gpt_preset delegates to this table). */
typedef struct pt_model_shape {
    int n_layer, n_head, n_embd; /* L, heads, C */
    int seq_len;                 /* T of every training sequence */
    int vocab;                   /* V (50257 for GPT-2's BPE) */
} pt_model_shape;

/* "test", "tiny", "small", "gpt2-124M", or "L,H,C,T,V" (five positive
 * integers, C % H == 0).  0, or -1 with "invalid <what> '<s>' (valid: a
 * preset test, tiny, small, gpt2-124M or L,H,C,T,V)". */
int pt_model_shape_parse(const char *what, const char *s, pt_model_shape *m, pt_error *err);
/* "test, tiny, small, gpt2-124M" */
const char *pt_model_preset_names(void);
/* The preset called name into *m (m may be NULL): 0, or -1 (no message)
 * when there is none; lib/model's pt_gpt_preset delegates to it. */
int pt_model_preset(const char *name, pt_model_shape *m);

/* Groups of a step's traffic, as ptrain-run's metrics name them. */
enum { PT_GRP_DP, PT_GRP_TP, PT_GRP_PP, PT_GRP_SP, PT_GRP_SYNC, PT_GRP_N };
const char *pt_cost_group_name(int g); /* "dp", "tp", "pp", "sp", "sync" */

/* Link classes a group can span, fastest first. */
enum { PT_NET_ISLAND = 0, PT_NET_NODE, PT_NET_INTER, PT_NET_N };
const char *pt_cost_link_name(int l); /* "island", "node", "network" */

/* What the cost model knows of the machine. */
typedef struct pt_hw {
    double gemm_gflops;       /* fp32 GEMM rate of one rank (GFLOP/s) */
    double mem_bytes;         /* memory one rank may use (bytes); 0 = unlimited */
    double lat_s[PT_NET_N];   /* alpha: latency of one message on each link class (s) */
    double gbps[PT_NET_N];    /* 1/beta: bandwidth of one rank on each link class (GB/s) */
} pt_hw;

/* A plan's cost for one optimizer step of `global_batch` sequences of
 * m->seq_len tokens.  Bytes and memory are per rank (maximum over ranks);
 * times in seconds. */
typedef struct pt_cost {
    double flops;                 /* per rank, forward + backward + recompute */
    double bytes[PT_GRP_N];       /* bytes sent per rank per step, by group */
    double msgs[PT_GRP_N];        /* collective calls per rank per step (as the counters' calls) */
    double lat_steps[PT_GRP_N];   /* latency terms per rank per step: a ring collective over p
                                   * ranks costs (p-1) alphas, an allreduce 2(p-1), a send 1
                                   * (Thakur et al. 2005, sec. 4) */
    double mem_params, mem_grads, mem_optim, mem_act; /* bytes per rank at the peak */
    double mem_total;             /* their sum: the arena during a step */
    double mem_peak;              /* the arena's high-water mark (what ptrain-run's peak_mib
                                   * reports): max(mem_total, the start-up peak, where ZeRO-2/3
                                   * initialise through full-size temporaries); compare this
                                   * with pt_hw.mem_bytes */
    double bubble;                /* idle fraction of the pipeline: (pp-1)/m, interleaved (pp-1)/(v m) */
    double t_compute;             /* flops / gemm rate */
    double t_comm[PT_GRP_N];      /* alpha * msgs + bytes / bandwidth of the group's link */
    double t_bubble;              /* bubble * (t_compute + pipelined comm) */
    double t_step;                /* predicted step time */
} pt_cost;

/* Evaluate plan p (a concrete plan: pt_plan_validate passes for its
 * world) for model m and global_batch sequences per step; link[g] is the
 * slowest link class group g spans under the plan's placement (from
 * pt_place_links, lib/plan/search.h).  Returns 0, or -1 with one line
 * when the plan does not fit the model (heads, width, layers, batch not
 * divisible as the layout needs). */
int pt_cost_eval(const pt_model_shape *m, int global_batch, const pt_plan *p, const pt_hw *hw,
                 const int link[PT_GRP_N], pt_cost *out, pt_error *err);

/* The activation floats one transformer block keeps per sequence-parallel,
 * tensor-parallel rank for a microbatch of b sequences under recompute
 * mode r (equal to lib/model's pt_gpt_block_act_floats for the same
 * layout; the tests hold them equal). */
double pt_cost_block_act_floats(const pt_model_shape *m, const pt_plan *p, int b, int r);

#endif
