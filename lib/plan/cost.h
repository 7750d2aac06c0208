/* SPDX-License-Identifier: MIT */
/* The cost model of a plan: FLOPs, bytes per group, memory per rank, the
 * pipeline bubble and a predicted step time, for a model shape of either
 * family (lib/contract/model.h: GPT-2, Llama) and a global batch.  libc
 * only (with libm), so the SPANK plugin links it.
 *
 * Llama (this round: the off and 1d layouts; 2d/2.5d/3d are refused in one
 * line): the block's linears are q [C, C] and kv [2 KV HS, C] (two column
 * linears on the RMSNorm output, each allreducing its dX [N, C] in the 1d
 * backward, as lib/model runs them: 1d sends 2 allreduces of [N, C] per
 * block forward, after proj and fcproj, and 3 backward, after q, kv and
 * fc), o
 * [C, C], fc = gate | up [2I, C] and fcproj = down [C, I]; no position
 * embedding; an untied head is its own [Vp, C] parameter sharded as wte
 * (on the last stage; wte on the first, with no gradient sum between
 * them).  Parameters, buckets and ZeRO units walk pt_model_param_info's
 * list.
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
 * full bytes send (p-1)/p b; send = its bytes; integer division per call
 * as comm_mpi.c), maximum over ranks, grouped as ptrain-run's metrics
 * group them ("sent_bytes" of ptrain-run(1)).  Memory is what the arena
 * holds at its peak.  tests/plan/test_cost_metrics.sh holds both against
 * real ptrain-run steps (bytes to the byte, peak within 2%).
 *
 * Element sizes (the plan's precision): activations, their gradients and
 * the weight copies move in e bytes (4 fp32, 2 bf16): every Sx, Sw, Sy,
 * [N, C] and K/V block below, the pipeline's boundary tensors and ZeRO's
 * parameter allgathers; the LayerNorm and cross-entropy statistics and
 * every gradient of a parameter (dW partials, bucket allreduces, ZeRO's
 * reduce-scatters, the tied wte sum) move in fp32.
 *
 * Bytes per microbatch and rank, N = Bl*Tl local rows, Sx/Sw/Sy in bytes
 * (the layouts' geometry, lib/parallel/layout.h):
 *   tp 1d      (4 L_stage + 2) allreduces of [N, C] (2 per block forward,
 *              2 backward (Llama 3: q and kv each), embedding, head dX) +
 *              the cross-entropy's [N]
 *              and [2N] allreduces; block recompute adds 2 per block.
 *   tp 2d/2.5d per linear 3(q-1)(Sx+Sw) (q broadcasts of X and W forward,
 *              twice that backward); LayerNorm 2 allreduces of [N] forward,
 *              one of [2N] backward, over the row; embedding 2q
 *              broadcast/reduce of the [Vp/q, C/q] block; head: 3 sends
 *              of that block (transpose, off-diagonal ranks), 3 allgathers
 *              or reduce-scatters of the rows' [q N, C/q] and of the
 *              vocabulary block's [q Vp/q, C/q] (the fused classifier's
 *              full width), the cross-entropy's [N] and [2N] allreduces.
 *   tp 3d      per linear (l-1)/l (3Sx + 3Sw + 2Sy) with the gathered
 *              blocks (tp3d.c); embedding 2(l-1)/l (Se + Swte); head: 3
 *              gathers/scatters of [l N, C/l] over K, 3(l-1) sends of
 *              [N, C/l] over J, 3 of [Vp/l, C/l] over I and of [l Vp/l, C/l]
 *              over J, and the cross-entropy's allreduces.
 *   sp         ring attention (seq.c): forward 2(sp-1), backward
 *              2(2(sp-1)+1) sends of [Bl, Tl, KV_local] per block (a K or
 *              a V block: C_local for GPT-2, NKV/tp KV heads for Llama,
 *              so grouped-query attention sends n_head/n_kv_head less);
 *              recompute (block or attention) adds a forward.
 *   pp         one send of [N, Cr] per boundary crossing and direction:
 *              m ([vs < S-1] + [vs > 0]) per chunk at virtual stage vs
 *              (S = pp*v), plus the tied embedding's gradient allreduce
 *              over the first and last stage (the embed group; none for
 *              an untied head: wte lives on the first stage only, lm_head
 *              on the last).
 *   sync       per step, per bucket (parameters of one sync group: dp x
 *              sp x the tp axes a shard is replicated on) of n floats over
 *              N ranks: ZeRO 0 one allreduce 2(N-1)/N 4n; per ZeRO unit
 *              (a piece's parameters in a bucket, padded to npad, a
 *              multiple of N): ZeRO 1 reduce-scatter + allgather, ZeRO 2
 *              m reduce-scatters (one per microbatch's backward) +
 *              allgather, ZeRO 3 m reduce-scatters + 2m allgathers
 *              (before each piece's forward and backward); the tied wte
 *              unit is reduced once per step.  (p-1)/p 4 npad each.
 *   dp         0: no collective runs on ctx->dp (ZeRO's traffic is on the
 *              sync groups).
 * FLOPs (PaLM, Chowdhery et al. 2022, appendix B): per token and block
 * 3 (2 P_blk + 4 T C) forward + backward, P_blk the block's matmul weights
 * (pt_cost_block_matmul_params: GPT-2 12 C^2, so 24 C^2 + 4 T C forward;
 * Llama 2 C^2 + 2 C KV HS + 3 C I), plus 2 T C for flash attention's
 * backward (the scores again), the head 8 C V (the fused classifier's
 * backward computes the logits again), divided over tp x sp; block
 * recompute adds a block forward, attention recompute 2 T C; the busiest
 * pipeline rank's share.
 * Time (alpha-beta, Hockney 1994; ring steps as Thakur et al. 2005,
 * sec. 4), per communicator of the process grid (lib/parallel/context.h:
 * the 1d tp group, each tp axis sub-group -- 2d/2.5d rows, columns and
 * the slice, 3d's I, J and K --, each sync group, sp, pp, embed, dp) on
 * the slowest link class *that* communicator spans under the plan's rank
 * order (pt_cost_where), and per collective kind k (pt_cost_kind) with
 * its own alpha and bus bandwidth (pt_hw.coll_lat_s / coll_gbps, the
 * node model's per-kind fit, else the link class's figures):
 *   t_call(k, p, b) = steps_k(p) alpha_k + b busfactor_k(p) / busbw_k
 *               b the call's full buffer (bytes), p the communicator's
 *               size; busfactor as nccl-tests' busbw (doc/PERFORMANCE.md):
 *               allreduce 2(p-1)/p, allgather and reduce-scatter (p-1)/p,
 *               broadcast, reduce and p2p 1; steps_k(p): allreduce 2(p-1),
 *               allgather, reduce-scatter, broadcast, reduce p-1, p2p 1.
 *               A pipeline rank's sends to the next and to the previous
 *               stage each take the link between those two stages;
 *   t_compute = flops / (rate(n) 1e9), rate(n) = gemm_gflops n / (n + gemm_n_half)
 *               (gemm_gflops_bf16 in gemm_gflops' place for a bf16 plan
 *               when it is known)
 *               (Hockney's (r_inf, n_1/2) model of a pipelined
 *               operation's rate over its length: Hockney and Jesshope,
 *               "Parallel Computers 2", 1988; for messages Hockney 1994,
 *               "The communication challenge for MPP", Parallel
 *               Computing 20(3); applied here to GEMMs, whose rate falls
 *               with their size: n = the rows of one GEMM
 *               call on a rank: Bl Tl of its microbatch under its layout,
 *               l Bl Tl for 3d, whose GEMMs run on the gathered input),
 *               times ranks_per_core when cores are shared (see pt_hw)
 *   t_comm[g] = the sum of t_call over the calls of g's communicators
 *   t_bubble  = bubble (t_compute + t_comm[tp] + t_comm[sp] + t_comm[pp])
 *   t_step    = t_compute + t_comm[tp] + t_comm[sp] + t_comm[pp] + t_bubble
 *               + t_comm[dp] + t_comm[sync]
 * (no overlap: lib/comm's calls block the rank).  Each term is the
 * maximum over pipeline ranks. */
#ifndef PTRAIN_PLAN_COST_H
#define PTRAIN_PLAN_COST_H
#include <stddef.h>
#include <stdint.h>

#include "contract/model.h"
#include "contract/plan.h"
#include "core/core.h"

/* Groups of a step's traffic, as ptrain-run's metrics name them. */
enum { PT_GRP_DP, PT_GRP_TP, PT_GRP_PP, PT_GRP_SP, PT_GRP_SYNC, PT_GRP_N };
const char *pt_cost_group_name(int g); /* "dp", "tp", "pp", "sp", "sync" */

/* Link classes a group can span, fastest first. */
enum { PT_NET_ISLAND = 0, PT_NET_NODE, PT_NET_INTER, PT_NET_N };
const char *pt_cost_link_name(int l); /* "island", "node", "network" */

/* The communicators of the process grid (lib/parallel/context.h), the
 * units the cost model prices: the 1d tensor group ctx->tp, the tp axis
 * sub-groups ctx->tp_sub[mask] (mask 1..7, bit a = tp axis a of
 * pt_plan_tp_dims: 2d/2.5d depth 1, column index i 2, row index j 4, so
 * the row group -- ranks of one row, j varying -- is mask 4, the column
 * group mask 2, the depth group mask 1 and the slice 6; 3d I 1, J 2, K 4),
 * the gradient sync groups ctx->sync[mask] (mask 0..7), sp, pp, the
 * embed group (first and last stage) and dp.  Each counts in one group of
 * pt_cost_sub_group (tp: PT_SUB_TP and every tp_sub; sync: every sync;
 * pp: pp and embed). */
enum {
    PT_SUB_TP = 0,       /* ctx->tp */
    PT_SUB_TP_AXES = 1,  /* PT_SUB_TP_AXES + mask - 1: ctx->tp_sub[mask], mask 1..7 */
    PT_SUB_SYNC = 8,     /* PT_SUB_SYNC + mask: ctx->sync[mask], mask 0..7 */
    PT_SUB_SP = 16,
    PT_SUB_PP = 17,
    PT_SUB_EMBED = 18,
    PT_SUB_DP = 19,
    PT_SUB_N = 20
};
#define PT_SUB_TP_MASK(m) (PT_SUB_TP_AXES + (m) - 1)
#define PT_SUB_SYNC_MASK(m) (PT_SUB_SYNC + (m))
/* The communicator's name as lib/parallel names it (and ptrain-run's
 * metrics "sent_bytes_comm" key it): "tp", "tpx--" .. "tpxxx" (x = the
 * axes in the mask, axis 0 first), "sync---" .. "syncxxx", "sp", "pp",
 * "embed", "dp"; "?" for another index. */
const char *pt_cost_sub_name(int s);
/* The PT_GRP_* group communicator s counts in (-1 for a bad index). */
int pt_cost_sub_group(int s);
/* What communicator s is under plan p's layout, for explanations: "1d tp
 * group", "2d rows", "2d columns", "2.5d depth", "2d slice", "3d I
 * (weights)", "3d J", "3d K", "sync over dp x depth", "sp ring", "pp
 * neighbours", "embed (first and last stage)", "dp"; written into buf
 * [n]. */
void pt_cost_sub_role(const pt_plan *p, int s, char *buf, size_t n);

/* Collective kinds the layouts call, each with its own alpha and bus
 * bandwidth (nccl-tests' busbw: a ring allreduce, allgather or
 * reduce-scatter, and a pipelined broadcast or reduce, move their buffer
 * at busbw whatever p; PERFORMANCE.md of nccl-tests). */
enum {
    PT_KIND_ALLREDUCE = 0,
    PT_KIND_REDUCE_SCATTER,
    PT_KIND_ALLGATHER,
    PT_KIND_BROADCAST,
    PT_KIND_REDUCE,
    PT_KIND_P2P,         /* a send (sendrecv, a pipeline boundary) */
    PT_KIND_N
};
/* "allreduce", "reduce_scatter", "allgather", "broadcast", "reduce", "p2p"
 * (the node model's keys); "?" for another index. */
const char *pt_cost_kind_name(int k);
/* nccl-tests' bus bandwidth factor of kind k over p ranks: the bytes one
 * rank moves per byte of the call's buffer, busbw = algbw x factor:
 * allreduce 2(p-1)/p, reduce-scatter and allgather (p-1)/p, broadcast,
 * reduce and p2p 1; 0 for p <= 1 (no call) or a bad kind. */
double pt_cost_busfactor(int k, int p);
/* Latency terms of one call of kind k over p ranks (Thakur et al. 2005,
 * sec. 4: ring allreduce 2(p-1), ring allgather / reduce-scatter and
 * pipelined broadcast / reduce p-1, a send 1); 0 for p <= 1. */
double pt_cost_kind_steps(int k, int p);

/* What the cost model knows of the machine. */
typedef struct pt_hw {
    double gemm_gflops;       /* fp32 GEMM rate of one rank (GFLOP/s); with gemm_n_half > 0
                               * the asymptotic rate r_inf of large GEMMs */
    double gemm_n_half;       /* Hockney's n_1/2 of the GEMM rate (rows): the rows per GEMM
                               * call (a rank's microbatch rows under its layout) at which
                               * the rate is half of gemm_gflops; rate(n) = gemm_gflops
                               * n / (n + gemm_n_half).  0: one rate for every size */
    double gemm_gflops_bf16;  /* bf16 GEMM rate of one rank (GFLOP/s; bf16 operands, fp32
                               * accumulation: lib/backend/gemm_bf16.h, a GPU's tensor cores),
                               * used for plans of precision bf16 in gemm_gflops' place (the
                               * same n_1/2 and ranks_per_core apply); 0 = unknown: bf16
                               * plans compute at gemm_gflops */
    double mem_bytes;         /* memory one rank may use (bytes); 0 = unlimited */
    double lat_s[PT_NET_N];   /* alpha: latency of one message, a collective's ring step, on
                               * each link class (s); pt_topo_plan_hw takes the probe's
                               * ring-step latency (from its allreduce: contention and the
                               * library's per-step work included), not the ping-pong's */
    double gbps[PT_NET_N];    /* 1/beta: bandwidth of one rank on each link class (GB/s) */
    double coll_lat_s[PT_KIND_N][PT_NET_N]; /* alpha of one step of collective kind k on link
                               * class l (s; pt_cost_kind_steps steps per call); 0: lat_s[l] */
    double coll_gbps[PT_KIND_N][PT_NET_N];  /* bus bandwidth of kind k on class l (GB/s,
                               * nccl-tests' busbw: pt_cost_busfactor); 0: gbps[l] */
    double ranks_per_core;    /* ranks time-sharing one core (an oversubscribed node, e.g. 4-8
                               * ranks on a 2-core CI machine); 0 or <= 1: each rank has its
                               * own.  Above 1, gemm_gflops is one core's rate, a rank gets
                               * 1/ranks_per_core of it, and a waiting pipeline rank gives
                               * back part of its share (Open MPI's idle loop yields when
                               * oversubscribed): t_compute is the pipeline ranks' mean
                               * work, not the busiest rank's, and t_bubble is
                               * 1/ranks_per_core of the dedicated bubble time (the more
                               * ranks share a core, the more of them take a waiting rank's
                               * turn).  That share is an empirical fit: bench/bench_plan.sh
                               * measured pipelines within 0.9-1.05x of it at 2 and 4 ranks
                               * per core, where the earlier (1 - 1/ranks_per_core) was
                               * 0.73-0.94x at 4. */
    double busy_delay_s;      /* delay (s) that one pipeline send pays beyond its alpha-beta
                               * time on time-shared cores: the receiving stage waited
                               * through the sender's compute and yielded its core to a rank
                               * that computes for a whole time slice, so the message waits
                               * for the receiver's turn.  0 = none.  Each send of W ranks
                               * pays busy_delay_s x min(1, 2(1 - 2/W)) (the probe's
                               * measure, with half the ranks outside the pair computing,
                               * from 4 ranks on).  An additive delay per send, not a factor
                               * on the time: at 4 and 8 ranks on 2 cores the probe's 32 KiB
                               * pair allreduce took 175 and 360 us longer busy than idle,
                               * at 128 KiB about as much more, so a pipeline of 16
                               * one-sequence microbatches pays 32 of them per stage.  tp
                               * and sp collectives do not pay it: their ranks reach each
                               * call together after the same compute, and so do the other
                               * dp replicas' and tp rows' (bench_plan.sh: charging them
                               * predicted 2d tp=4 at 106 ms, measured 58).
                               * pt_topo_plan_hw sets it on time-shared cores only
                               * (ranks_per_core > 1). */
} pt_hw;

/* The GEMM rate (GFLOP/s, r_inf with gemm_n_half) h computes a plan of
 * precision prec (a pt_precision) at: gemm_gflops_bf16 for bf16 when known,
 * else gemm_gflops; 0 when unknown. */
static inline double pt_hw_gemm_gflops(const pt_hw *h, int prec)
{
    return prec == PT_PREC_BF16 && h->gemm_gflops_bf16 > 0 ? h->gemm_gflops_bf16 : h->gemm_gflops;
}

/* A plan's cost for one optimizer step of `global_batch` sequences of
 * m->seq_len tokens.  Bytes and memory are per rank (maximum over ranks);
 * times in seconds. */
typedef struct pt_cost {
    double flops;                 /* per rank (the busiest pp rank), forward + backward + recompute */
    double bytes[PT_GRP_N];       /* bytes sent per rank per step, by group */
    double msgs[PT_GRP_N];        /* collective calls per rank per step (as the counters' calls) */
    double lat_steps[PT_GRP_N];   /* latency terms per rank per step: a ring collective over p
                                   * ranks costs (p-1) alphas, an allreduce 2(p-1), a send 1
                                   * (Thakur et al. 2005, sec. 4) */
    /* bytes per rank (the pp rank with the largest peak): the parameter,
     * gradient and AdamW m+v buffers as lib/train lays them out (fp32; a
     * bf16 plan adds the 2-byte work copy to mem_params and keeps the fp32
     * master in own slices from ZeRO 1 on; ZeRO 1: m, v / N; 2: also
     * gradients; 3: also parameters, N the bucket's sync group, units padded
     * to N); activations (2 bytes per element in bf16, 4 per fp32
     * statistic) = the model's slots (pt_cost_block_act_bytes per block,
     * embedding output, token ids), head and backward buffers, recompute
     * scratch, pipeline boundary
     * buffers, the largest scratch of a piece (SUMMA / 3D gathers, ring
     * attention's K/V blocks, the fused classifier's logits block and
     * full-width operands) and ZeRO's units in flight.  Linear in the
     * sequence length: flash attention keeps [Bl, NH, Tl] log-sum-exps, not
     * [Tl, T] probabilities, and the head no [N, V] logits. */
    double mem_params, mem_grads, mem_optim, mem_act;
    double mem_total;             /* their sum: the arena during a step */
    double mem_peak;              /* the arena's high-water mark (what ptrain-run's peak_mib
                                   * reports): max(mem_total, the start-up peak, where ZeRO-2/3
                                   * initialise through full-size temporaries); compare this
                                   * with pt_hw.mem_bytes */
    double bubble;                /* idle fraction of the pipeline: (pp-1)/m, interleaved (pp-1)/(v m) */
    double t_compute;             /* flops / the GEMM rate at this plan's GEMM rows (rate(n)) */
    double t_comm[PT_GRP_N];      /* alpha * msgs + bytes / bandwidth of the group's link */
    double t_bubble;              /* bubble * (t_compute + pipelined comm) */
    double t_step;                /* predicted step time */
    /* per communicator (PT_SUB_*): bytes sent per rank per step and
     * calls (maximum over ranks, as the counters of that communicator),
     * the time of its calls (s, maximum over pipeline ranks) and the link
     * class it was priced on (for pp: the slowest neighbour link) */
    double sub_bytes[PT_SUB_N];
    double sub_msgs[PT_SUB_N];
    double sub_t[PT_SUB_N];
    int sub_link[PT_SUB_N];
} pt_cost;

/* Where a plan's communicators run (pt_place_where, lib/plan/search.h):
 * the slowest link class of each communicator under the plan's rank order
 * and, for pipelines, of each pair of neighbouring stages; for clusters of
 * mixed nodes, each pipeline rank's own rates. */
typedef struct pt_cost_where {
    int sub_link[PT_SUB_N];   /* PT_NET_* each communicator spans */
    const int *pp_next;       /* [pp] link class between pp ranks r and (r + 1) mod pp
                               * (the interleaved schedule's last stage sends to rank 0);
                               * NULL: sub_link[PT_SUB_PP] for every pair */
    const pt_hw *stage_hw;    /* [pp] the rates of pp rank r's slowest node (compute, and
                               * its tp and sp groups, which stay inside a stage); NULL:
                               * the hw of pt_cost_eval_at for every stage */
} pt_cost_where;

/* Evaluate plan p (a concrete plan: pt_plan_validate passes for its
 * world) for model m and global_batch sequences per step; link[g] is the
 * slowest link class group g spans under the plan's placement (from
 * pt_place_links, lib/plan/search.h); link NULL means PT_NET_NODE for
 * every group, hw NULL leaves the times 0 (bytes, FLOPs and memory do not
 * need the machine).  out may be NULL (a fit check).  Returns 0, or -1
 * with one line naming the value and what would fit when the plan does
 * not fit the model: pt_plan_validate's and pt_plan_check_model's checks
 * (pp * virtual_stages <= n_layer, the split, microbatches dividing the
 * global_batch / dp sequences), global_batch a multiple of dp, T a
 * multiple of sp, and the layout's geometry on a microbatch as lib/model's
 * pt_gpt_check_plan (1d: tp | heads; 2d/2.5d: q | heads, depth*q | the
 * microbatch; 3d: l | heads, l*l | C, l*l | the microbatch).  Cost:
 * O(pp (L + m v)) time, no allocation that outlives the call. */
int pt_cost_eval(const pt_model_shape *m, int global_batch, const pt_plan *p, const pt_hw *hw,
                 const int link[PT_GRP_N], pt_cost *out);

/* pt_cost_eval with each communicator priced on its own link (w; NULL:
 * PT_NET_NODE for every communicator), per-kind alpha-beta, per-neighbour
 * pipeline links and per-stage rates (pt_cost_where).  The same checks,
 * bytes, FLOPs and memory; hw (NULL: times 0) is the rates of the groups
 * that span stages (pp, embed, sync, dp) and of every stage without
 * w->stage_hw.  pt_cost_eval(link) is pt_cost_eval_at with every
 * communicator of group g on link[g]. */
int pt_cost_eval_at(const pt_model_shape *m, int global_batch, const pt_plan *p, const pt_hw *hw,
                    const pt_cost_where *w, pt_cost *out);

/* Vocabulary columns per block of the fused classifier: lib/backend/ops.h's
 * PT_CLASSIFIER_VBLOCK (this header is libc-only; lib/plan/cost.c asserts
 * the two are equal). */
#define PT_COST_CLASSIFIER_VBLOCK 512

/* The activation bytes one transformer block keeps per sequence-parallel,
 * tensor-parallel rank for a microbatch of b sequences under recompute
 * mode r and p->precision (e = 2 bytes per activation element in bf16, 4
 * in fp32; 4 per norm and attention statistic): equal to lib/model's
 * pt_gpt_block_act_bytes for the same layout (the tests hold them equal).
 * With N = Bl Tl rows, residual width Cr, Cl = NHl HS, KVl = NKVl HS, Fl the
 * MLP width held, lse = Bl NHl Tl:
 *   GPT-2  none e (4 N Cr + 3 N Cl + 2 N Fl) + 4 (4N) + e N Cl + 4 lse
 *   Llama  none e (4 N Cr + N Cl + 2 N KVl + 3 N Fl) + 4 (2N) + e N Cl + 4 lse
 *          (ln1, res2, ln2, res3; q; kv; gate|up and SwiGLU; two rstd;
 *          the attention output and its log-sum-exp)
 *   attention recompute: without the last two terms; block recompute
 *   e N Cr (the block's output).  0 for a plan the geometry refuses. */
double pt_cost_block_act_bytes(const pt_model_shape *m, const pt_plan *p, int b, int r);

/* The weights of one transformer block that every token multiplies (the
 * matmul parameters, biases and norms left out), whose forward costs 2 FLOPs
 * each per token (PaLM, Chowdhery et al. 2022, app. B): GPT-2 12 C^2 (qkv
 * 3C^2, proj C^2, fc and fcproj 4 C^2 each); Llama 2 C^2 + 2 C KV HS + 3 C I
 * (q and o C^2 each, k and v [KV HS, C] each with KV HS = n_kv_head C /
 * n_head, gate, up and down C I each).  0 for m NULL or n_head < 1.  The
 * block FLOPs of pt_cost_eval_at and the planner's layer costs
 * (pt_plan_layer_costs) take it, so that pt_cost.flops per token at tp = sp
 * = pp = 1 without recompute is pt_model_flops_per_token + 2 L T C (flash
 * attention's backward computes the scores again). */
double pt_cost_block_matmul_params(const pt_model_shape *m);

/* One virtual stage's instructions on one of its ranks: the forward and
 * the backward of one microbatch (Perseus's instructions, the energy
 * frontier's, lib/plan/energy.h), priced with pt_cost_eval_at's own
 * terms: index 0 the forward, 1 the backward. */
typedef struct pt_cost_stage {
    double flops[2];     /* FLOPs: the stage's blocks (24 C^2 + 4 T C per token forward; the
                          * backward twice that plus flash attention's 2 T C, plus the
                          * recompute mode's forward) and, on the last stage, the head (2 C V
                          * forward, 3 x that backward: the fused classifier computes the
                          * logits again), over tp x sp; pt_cost.flops is mb x the sum over a
                          * rank's stages of flops[0] + flops[1] */
    double compute_s[2]; /* flops at the stage's GEMM rate for p->precision (gemm_gflops_bf16
                          * for bf16 when known, Hockney's n_1/2, ranks_per_core), as
                          * pt_cost.t_compute; 0 without hw */
    double comm_s[2];    /* the stage's tp and sp calls (its blocks, the embedding on the first
                          * stage, the head on the last; activations in the precision's
                          * bytes) at their kind's alpha-beta, as pt_cost.t_comm[tp] and
                          * [sp]; 0 without hw */
} pt_cost_stage;

/* The instructions of plan p (the checks of pt_cost_eval_at, and the same
 * w and hw): st[s] for every virtual stage s = chunk * pp + rank (pp x
 * virtual_stages entries, the caller's array).  *p2p_bytes (may be NULL):
 * one pipeline boundary send of [N, Cr] activations (or their gradients)
 * in the precision's bytes (2 in bf16, 4 in fp32), 0 for pp = 1;
 * *p2p_s (may be NULL): its time on the slowest link between
 * neighbouring stages (p2p alpha-beta plus the busy delay, as
 * pt_cost.t_comm[pp] prices each send), 0 for pp = 1 or without hw.
 * Returns 0, or -1 with pt_cost_eval_at's one line (PT_ENOMEM: "out of
 * memory"). */
int pt_cost_stages(const pt_model_shape *m, int global_batch, const pt_plan *p, const pt_hw *hw,
                   const pt_cost_where *w, pt_cost_stage *st, double *p2p_bytes, double *p2p_s);

#endif
