/* SPDX-License-Identifier: MIT */
/* The planner: search over every plan for a job, stage partitioning,
 * rank placement and the explanation of the choice.  libc only (with
 * libm): the SPANK plugin and ptrain-plan link it; every node computes
 * the same plan from the same inputs.
 *
 * Sources: search over dp x pp x tp(mode, shape) x sp, ZeRO stage,
 * microbatches and recompute with a cost model (Alpa: Zheng et al. 2022,
 * sec. 4-5; Colossal-AI's layouts); uneven stage splits by Alpa's
 * inter-operator dynamic program (sec. 5.2) over per-layer costs;
 * placement after SageMaker's placement strategies (Karakus et al. 2021,
 * sec. 3.3) and LLNL mpibind (one device and a CPU set near it per task). */
#ifndef PTRAIN_PLAN_SEARCH_H
#define PTRAIN_PLAN_SEARCH_H
#include <stddef.h>

#include "core/core.h"
#include "plan/cost.h"
#include "contract/plan.h"

/* One kind of node of a cluster of mixed nodes (e.g. 8-GPU and 4-GPU
 * nodes, A100 and H100 nodes, the components of a Slurm heterogeneous
 * job): its rates and its islands. */
typedef struct pt_node_kind {
    const char *name;           /* for explanations: the node model's file or host names */
    pt_hw hw;                   /* rates of one rank on a node of this kind */
    int island_ranks;           /* as pt_cluster.island_ranks, on this kind's nodes */
} pt_node_kind;

/* The machine a job runs on, as the planner sees it: nnodes nodes with
 * tasks_per_node tasks each.  nkinds 0: every node alike, with hw and
 * island_ranks.  nkinds > 0: node i is kinds[kind_of[i]], and hw must be
 * the rates every synchronous group runs at, the slowest of the kinds
 * present (pt_cluster_slowest): the planner prices the groups that span
 * stages (sync, dp, pp) and, with pp = 1, every rank at them, gives each
 * pipeline stage the rates of its slowest node, and sizes stages of
 * different speeds by D'Hondt's method (pt_plan_split_dhondt). */
typedef struct pt_cluster {
    int nnodes;
    const int *tasks_per_node;  /* [nnodes] */
    int island_ranks;           /* tasks inside one fastest island (e.g. GPUs on one NVLink
                                   domain); 0 or >= tasks per node: the node is one island */
    pt_hw hw;                   /* rates of one rank and of each link class */
    int nkinds;                 /* node kinds (0: every node is hw, island_ranks) */
    const pt_node_kind *kinds;  /* [nkinds] */
    const int *kind_of;         /* [nnodes] each node's index into kinds */
} pt_cluster;

/* dst = the slower of dst and src, figure by figure: the least GEMM rate
 * (with its n_1/2; the least bf16 rate, where one is known, of each side's
 * gemm_gflops_bf16 or else gemm_gflops), memory and bandwidth of each link class and collective
 * kind (0 = unknown loses to a figure), the largest latency, ranks per
 * core and busy delay.  Inline (header only) so that libptrain_topo's
 * cluster builder shares it without linking lib/plan. */
static inline void pt_hw_take_slower(pt_hw *dst, const pt_hw *src)
{
#define PT_LOW_(x) (dst->x = (src->x > 0 && (dst->x <= 0 || src->x < dst->x)) ? src->x : dst->x)
#define PT_HIGH_(x) (dst->x = src->x > dst->x ? src->x : dst->x)
    if (src->gemm_gflops_bf16 > 0 || dst->gemm_gflops_bf16 > 0) { /* the bf16 rate, 0 = gemm_gflops' */
        const double a = dst->gemm_gflops_bf16 > 0 ? dst->gemm_gflops_bf16 : dst->gemm_gflops;
        const double b = src->gemm_gflops_bf16 > 0 ? src->gemm_gflops_bf16 : src->gemm_gflops;
        dst->gemm_gflops_bf16 = b > 0 && (a <= 0 || b < a) ? b : a;
    }
    if (src->gemm_gflops > 0 && (dst->gemm_gflops <= 0 || src->gemm_gflops < dst->gemm_gflops)) {
        dst->gemm_gflops = src->gemm_gflops;
        dst->gemm_n_half = src->gemm_n_half;
    }
    PT_LOW_(mem_bytes);
    for (int l = 0; l < PT_NET_N; l++) {
        PT_HIGH_(lat_s[l]);
        PT_LOW_(gbps[l]);
        for (int k = 0; k < PT_KIND_N; k++) {
            PT_HIGH_(coll_lat_s[k][l]);
            PT_LOW_(coll_gbps[k][l]);
        }
    }
    PT_HIGH_(ranks_per_core);
    PT_HIGH_(busy_delay_s);
#undef PT_LOW_
#undef PT_HIGH_
}

/* The slowest rates of the kinds present in c (every node's when nkinds
 * is 0: c->hw), pt_hw_take_slower over them.  *limiting (may be NULL)
 * gets the index of the kind with the least GEMM rate (-1 without
 * kinds).  Inline, as pt_hw_take_slower. */
static inline void pt_cluster_slowest(const pt_cluster *c, pt_hw *out, int *limiting)
{
    if (limiting) *limiting = -1;
    if (!c || !out) return;
    if (c->nkinds <= 0 || !c->kinds) {
        *out = c->hw;
        return;
    }
    int first = 1;
    for (int k = 0; k < c->nkinds; k++) {
        int present = !c->kind_of;
        for (int i = 0; !present && i < c->nnodes; i++) present = c->kind_of[i] == k;
        if (!present) continue;
        if (first) *out = c->kinds[k].hw;
        else pt_hw_take_slower(out, &c->kinds[k].hw);
        if (limiting && (*limiting < 0 || c->kinds[k].hw.gemm_gflops < c->kinds[*limiting].hw.gemm_gflops))
            *limiting = k;
        first = 0;
    }
    if (first) *out = c->hw;
}

/* One evaluated plan. */
typedef struct pt_candidate {
    pt_plan plan;
    pt_cost cost;
    int link[PT_GRP_N];         /* link class each group spans (PT_NET_*) */
} pt_candidate;

#define PT_SEARCH_RUNNERS 8
typedef struct pt_search_result {
    pt_candidate best;
    pt_candidate runner[PT_SEARCH_RUNNERS]; /* next best, by t_step (ties: fewer bytes) */
    int nrunners;
    long nconsidered;           /* plans evaluated */
    long nfit;                  /* of which fit memory and the model */
    char why[256];              /* one line: why the winner wins over the runner-up */
    char limit[800];            /* mixed nodes: one line on which node kind limits the step
                                 * (and the winner's D'Hondt stage sizes); "" otherwise */
} pt_search_result;

/* Search every plan for cluster c, model m and global_batch sequences per
 * step that the request allows: req pins what the user gave (the same
 * convention as pt_plan_request_check: 0 in a size means "choose"; mode auto
 * chooses the mode, a named mode fixes it and never falls back to tp = 1
 * unless the request pins tp = 1, nor a named 2.5d to q = 1, depth = tp,
 * unless that depth is pinned), lim is the admin's limits.  Fits:
 * the model's geometry (pt_cost_eval accepts it) and hw.mem_bytes (the
 * cost's mem_peak, the arena's high-water mark, <= mem_bytes).
 * Result ordered by predicted t_step; ties broken deterministically
 * (fewer bytes on slower links, then smaller pp, then smaller tp, then
 * plan summary text).  Returns 0, or -1 with one line naming what was
 * pinned (as lim's front end spells it, pt_plan_flag; here with the
 * plugin's prefix "--ptrain-") and what would fit, e.g. "--ptrain-mode=3d: no tensor-parallel
 * group of shape l*l*l > 1 divides 6 ranks (3 nodes x 2 tasks) (valid tp
 * here: 1; or pin --ptrain-tp=1)", "--ptrain-mode=auto: no plan fits 1 GB
 * per rank on 1 node x 4 tasks; the least memory any plan needs is 28.6 GB
 * (<that plan>)", or the cost model's last refusal ("tp=8 does not divide
 * n_head=12 ...").  4096 ranks: a few seconds (tests/unit/test_search
 * prints the time of a GPT-3 175B search on 512 x 8: 2.4 s for 167003
 * plans on a 2-core machine, 82% of them sp x tp grids; nothing prunes
 * a grid before its plans are priced).
 *
 * What is searched: every tp shape of the allowed modes (1d any divisor,
 * 2d q*q, 2.5d d*q*q with d >= 2 and q >= 2 unless the mode or depth is
 * pinned, 3d l*l*l; tp = 1 once, as 1d, or as the first allowed mode
 * when lim->modes leaves 1d out), each with every sp dividing the
 * ranks it leaves and T (sp x tp: ring attention on the rank's heads),
 * pp <= min(max_pp, n_layer), dp dividing global_batch;
 * rank orders DPT and, with dp > 1 and pp > 1, PDT (a pinned
 * req->rank_order, non-empty, is the only one; "" lets the search choose);
 * inside the T block every order of the tp grid's axes of size > 1
 * (tp_order: 2d rows or columns on consecutive ranks, 2.5d and 3d any of
 * six), each placement priced once, every communicator on its own link
 * (pt_place_where; a pinned req->tp_order is the only one, "" lets the
 * search choose); ZeRO 0..max_zero
 * (> 0 needs dp*sp > 1); schedules of lim->schedules (pp > 1; GPipe only
 * when pinned or 1F1B is not allowed: it has 1F1B's bubble and more
 * activations in flight, Narayanan et al. 2021, sec. 2.1), interleaved
 * with v = 2 and every larger v (<= PT_VIRTUAL_STAGES_MAX) that splits the
 * layers evenly, in ascending order until a v is no faster than the one
 * before (the bubble shrinks as 1/v, the sends grow as v); the even split when pp*v divides n_layer and the min-max
 * split of pt_plan_layer_costs (pt_plan_split_layers) when it differs;
 * microbatches 1 (pp = 1) and the smallest divisors of the per-dp batch at
 * or above pp, 2pp, 4pp, 8pp, and the per-dp batch (with pp = 1 only up to
 * the first count that fits without recompute: more only add messages);
 * recompute none, and attention then block only when the plan does not
 * fit without.  A grid (and ZeRO stage) is skipped when its most frugal
 * variant (most microbatches the model accepts, 1F1B, block recompute)
 * does not fit memory.
 * Pins: a size > 0 in req fixes it; req->zero > 0 fixes the ZeRO stage
 * (0 lets the search choose 0..max_zero: set lim->max_zero = 0 to forbid
 * ZeRO); a schedule other than 1f1b and virtual_stages > 1 fix the
 * schedule; req->recompute other than none fixes recompute; pp_split_n > 0
 * fixes the split; req->precision is every candidate's (never searched: it
 * sets the bytes of every memory and traffic term).  The runners-up are the best plan of each other layout
 * (mode, tp shape, dp, pp, sp, ZeRO stage). */
int pt_plan_search(const pt_cluster *c, const pt_model_shape *m, int global_batch, const pt_plan_limits *lim,
                   const pt_plan *req, pt_search_result *out);

/* Where plan p's communicators run on cluster c, ranks numbered node by
 * node (pt_plan_rank) in p's rank order and, inside the T block, its
 * tp_order: w->sub_link[s] the slowest link class any group of
 * communicator s spans (island when every member sits on one island,
 * node when on one node, else network; a communicator of one rank:
 * island); with pp_next ([p->pp], may be NULL) the slowest link between
 * the ranks of pp rank r and those of pp rank (r + 1) mod pp, and
 * w->pp_next = pp_next.  flags PT_PLACE_ALL: every communicator, else
 * only those p's layout sends on (the others stay island).  w->stage_hw
 * is left NULL.  Returns 0; 1 when p is not a grid of c's ranks (every
 * communicator then crosses the network); -1 on bad input (p's tp not of
 * its mode's shape, a bad tp_order, or no memory).  O(world) time. */
enum { PT_PLACE_ALL = 1 };
int pt_place_where(const pt_cluster *c, const pt_plan *p, pt_cost_where *w, int *pp_next, unsigned flags);

/* The slowest link class each group of plan p spans when its ranks are
 * numbered node by node (pt_plan_rank) in p's rank order and tp order on
 * cluster c: island when every member sits on one island (island_ranks
 * consecutive ranks of a node), node when on one node, else network.  A
 * group's link is the slowest of the communicators p's layout sends on
 * (pt_place_where): dp; tp (1d's tp group, or the layout's axis groups:
 * 2d/2.5d rows, columns and slice, 3d I, J, K); pp (stage to stage, and
 * the embed group of the first and last stage); sp; sync (the gradient
 * sums over dp x sp and over the tp axes the layout's parameters are
 * replicated on: 1d dp x sp only, 2d/2.5d also depth and rows, 3d also
 * I with J or K).  A plan that is not a grid of c's ranks gets network
 * for every group > 1; a group of one rank, island. */
void pt_place_links(const pt_cluster *c, const pt_plan *p, int link[PT_GRP_N]);

/* Uneven stage split (Alpa sec. 5.2, a min-max dynamic program): given
 * the cost of each of n layers (cost[0] includes the embedding, cost[n-1]
 * the head), split them into k contiguous stages of >= 1 layer
 * minimising the largest stage cost; ties keep earlier stages larger.
 * Writes k counts into split.  Returns 0, or -1 when k < 1 or k > n.
 * SageMaker's tree partition (Karakus et al. 2021, sec. 3.2: the module
 * tree walked from the root, each node's devices given to its children by
 * D'Hondt's method in proportion to their cost, children that outnumber
 * their devices split into contiguous runs by a dynamic program) gives
 * this same split for a GPT: the tree is the embedding, n blocks and the
 * head under one root, lib/pipeline cuts only between blocks, and k <= n
 * stages never gives a block more than one device, so the walk ends in
 * that dynamic program at the root. */
int pt_plan_split_layers(const double *cost, int n, int k, int *split);

/* D'Hondt's highest-averages method (SageMaker's allocation of devices to
 * modules in proportion to their cost, Karakus et al. 2021, sec. 3.3),
 * turned to stages of different speeds (nodes of mixed kinds): n layers
 * (seats) to k contiguous stages (parties) in proportion to speed[k]
 * (any positive unit, e.g. GFLOP/s): every stage gets one layer, then each
 * next layer goes to the stage with the highest average speed[s] /
 * (layers_s + extra[s] + 1), ties to the earlier stage; extra[s] (may be
 * NULL: none) is the work a stage holds already, in layers (the head's on
 * the last stage).  Writes k counts into split.  Returns 0, or -1 when k <
 * 1, k > n or a speed is not positive and finite. */
int pt_plan_split_dhondt(const double *speed, const double *extra, int k, int n, int *split);

/* The relative cost of each of m->n_layer layers for the stage split
 * (cost: [n_layer]): the forward FLOPs of one sequence through one block,
 * 2*T*P_blk + 4*T^2*C, P_blk the block's matmul weights
 * (pt_cost_block_matmul_params: GPT-2 12 C^2, giving 24*T*C^2 + 4*T^2*C,
 * Narayanan et al. 2021, sec. 3.5, per layer and sequence; Llama
 * 2 C^2 + 2 C KV HS + 3 C I), with the vocabulary head's 2*T*C*V added to the last layer
 * (the embedding lookup has no GEMM).  Backward and recompute scale every
 * layer alike, and so does tensor/sequence parallelism, so the ratios are
 * what the split needs; the times themselves are pt_cost_eval's. */
void pt_plan_layer_costs(const pt_model_shape *m, double *cost);

/* The explanation: the chosen plan and the runners-up, each with its
 * predicted step time split into compute, each group's communication and
 * bubble, its memory per rank, the winner's communicators (each with its
 * time and link), on mixed nodes the node kind that limits the step
 * (r->limit), and the "why" line.  Written into buf
 * (NUL terminated, "..." when cut); returns the length needed (as
 * snprintf: the text's length without the NUL).  Times in ms per step,
 * memory in GB (1e9 bytes) per rank; each group's time is followed by the
 * link class it spans ("isl", "node", "net"). */
size_t pt_plan_explain(const pt_search_result *r, const pt_model_shape *m, int global_batch, char *buf,
                       size_t n);

#endif
