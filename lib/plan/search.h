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

#include "core/error.h"
#include "plan/cost.h"
#include "plan/plan.h"

/* The machine a job runs on, as the planner sees it: every node alike
 * (one node model), tasks_per_node may differ. */
typedef struct pt_cluster {
    int nnodes;
    const int *tasks_per_node;  /* [nnodes] */
    int island_ranks;           /* tasks inside one fastest island (e.g. GPUs on one NVLink
                                   domain); 0 or >= tasks per node: the node is one island */
    pt_hw hw;                   /* rates of one rank and of each link class */
} pt_cluster;

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
 * pinned and what would fit, e.g. "--ptrain-mode=3d: no tensor-parallel
 * group of shape l*l*l > 1 divides 6 ranks (3 nodes x 2 tasks) (valid tp
 * here: 1; or pin --ptrain-tp=1)", "--ptrain-mode=auto: no plan fits 1 GB
 * per rank on 1 node x 4 tasks; the least memory any plan needs is 28.6 GB
 * (<that plan>)", or the cost model's last refusal ("tp=8 does not divide
 * n_head=12 ...").  4096 ranks: well under a second (tests/unit/
 * test_search prints the time of a GPT-3 175B search on 512 x 8).
 *
 * What is searched: every tp shape of the allowed modes (1d any divisor,
 * 2d q*q, 2.5d d*q*q with d >= 2 and q >= 2 unless the mode or depth is
 * pinned, 3d l*l*l; tp = 1 once, as 1d, or as the first allowed mode
 * when lim->modes leaves 1d out), sp > 1 only with tp = 1 and
 * T % sp == 0, pp <= min(max_pp, n_layer), dp dividing global_batch;
 * rank orders DPT and, with dp > 1 and pp > 1, PDT (a pinned
 * req->rank_order, non-empty, is the only one; "" lets the search choose); ZeRO 0..max_zero
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
 * schedule; req->ckpt_act other than none fixes recompute; pp_split_n > 0
 * fixes the split; req->precision is every candidate's (never searched: it
 * sets the bytes of every memory and traffic term).  The runners-up are the best plan of each other layout
 * (mode, tp shape, dp, pp, sp, ZeRO stage). */
int pt_plan_search(const pt_cluster *c, const pt_model_shape *m, int global_batch, const pt_plan_limits *lim,
                   const pt_plan *req, pt_search_result *out, pt_error *err);

/* The slowest link class each group of plan p spans when its ranks are
 * numbered node by node (pt_plan_rank) in p's rank order on cluster c:
 * island when every member sits on one island (island_ranks consecutive
 * ranks of a node), node when on one node, else network.  Groups: dp, tp,
 * pp (the ranks of one pipeline, stage to stage), sp, and sync (the ranks
 * of one stage: the gradient sum over dp x sp and over the tp axes a
 * parameter is replicated on, as ptrain-run's "sync" counter).  A plan
 * that is not a grid of c's ranks gets network for every group > 1. */
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
int pt_plan_split_layers(const double *cost, int n, int k, int *split, pt_error *err);

/* The relative cost of each of m->n_layer layers for the stage split
 * (cost: [n_layer]): the forward FLOPs of one sequence through one block,
 * 24*T*C^2 + 4*T^2*C (Narayanan et al. 2021, sec. 3.5, per layer and
 * sequence), with the vocabulary head's 2*T*C*V added to the last layer
 * (the embedding lookup has no GEMM).  Backward and recompute scale every
 * layer alike, and so does tensor/sequence parallelism, so the ratios are
 * what the split needs; the times themselves are pt_cost_eval's. */
void pt_plan_layer_costs(const pt_model_shape *m, double *cost);

/* The explanation: the chosen plan and the runners-up, each with its
 * predicted step time split into compute, each group's communication and
 * bubble, its memory per rank, and the "why" line.  Written into buf
 * (NUL terminated, "..." when cut); returns the length needed (as
 * snprintf: the text's length without the NUL).  Times in ms per step,
 * memory in GB (1e9 bytes) per rank; each group's time is followed by the
 * link class it spans ("isl", "node", "net"). */
size_t pt_plan_explain(const pt_search_result *r, const pt_model_shape *m, int global_batch, char *buf,
                       size_t n);

#endif
