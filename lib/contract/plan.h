/* SPDX-License-Identifier: MIT */
/* The plan: which parallel layout a job runs, and the contract between the
 * SPANK plugin (which computes it and injects it as PTRAIN_* variables) and
 * libptrain / ptrain-run (which read it); the variables are listed in
 * ptrain-env(7).  Implemented in four files: plan_env.c (the PTRAIN_*
 * contract and the text forms of its values), plan_modes.c (the one table
 * of tensor-parallel modes: name, shape rule, grid dims, valid tp lists),
 * plan_validate.c (plans and requests) and plan_place.c (rank placement),
 * in lib/contract beside the model shape and its presets (contract/model.h).
 * A request is resolved into a plan by pt_plan_resolve (plan/resolve.h).
 *
 * This module is self-contained C (libc only): one convenience library
 * (libptrain_contract, which libptrain_plan carries) linked into libptrain
 * and into the SPANK plugin, which must not pull MPI, BLAS or
 * libptrain into slurmstepd.  Errors follow core/core.h's convention:
 * functions return 0 on success and a negative PT_E* code on error (-1,
 * PT_EINVAL, for a bad value; PT_ENOMEM when out of memory) with one line
 * in pt_errmsg() naming the bad value and what would be valid.
 */
#ifndef PTRAIN_PLAN_H
#define PTRAIN_PLAN_H
#include <stddef.h>

#include "core/core.h"

/* The one list of tensor-parallel modes (issue 35: no other file spells a
 * list of them).  X(enum suffix, name, what tp must be, tp_depth is an axis
 * of the grid, shape rule of lib/contract/plan_modes.c) per mode, in enum
 * order, SEP between rows: 1d Megatron-LM (Shoeybi et al. 2019), 2d SUMMA /
 * Optimus (Xu et al. 2021), 2.5d Tesseract (Wang et al. 2021), 3d (Bian et
 * al. 2021).  off: ptrain does not plan (nothing injected; a run is 1d);
 * auto: a request only, resolved to a layout by pt_plan_resolve. */
#define PT_LAYOUT_MODE_ROWS(X, SEP)                                                     \
    X(1D, "1d", "any size", 0, dims_line) SEP X(2D, "2d", "q*q", 0, dims_square) SEP \
    X(2P5D, "2.5d", "tp_depth*q*q", 1, dims_depth_square) SEP X(3D, "3d", "l*l*l", 0, dims_cube)
#define PT_MODE_ROWS(X, SEP) \
    X(OFF, "off", "any size", 0, dims_line) SEP X(AUTO, "auto", "any size", 0, dims_line) SEP PT_LAYOUT_MODE_ROWS(X, SEP)
#define PT_MODE_NAME_(e, name, shape, depth, dims) name
/* String literals of the lists, names joined by sep (a string literal):
 * PT_MODE_NAMES(", ") is "off, auto, 1d, 2d, 2.5d, 3d", PT_LAYOUT_MODE_NAMES("|")
 * "1d|2d|2.5d|3d". */
#define PT_MODE_NAMES(sep) PT_MODE_ROWS(PT_MODE_NAME_, sep)
#define PT_LAYOUT_MODE_NAMES(sep) PT_LAYOUT_MODE_ROWS(PT_MODE_NAME_, sep)
/* the modes a plan may hold (every mode but the request auto) */
#define PT_PLAN_MODE_NAMES(sep) "off" sep PT_LAYOUT_MODE_NAMES(sep)
/* the modes a search may be asked for (every mode but off) */
#define PT_SEARCH_MODE_NAMES(sep) "auto" sep PT_LAYOUT_MODE_NAMES(sep)
/* the modes built for the Llama family (lib/model: the 1d layout; 2d, 2.5d
 * and 3d not yet) */
#define PT_LLAMA_MODE_NAMES(sep) "off" sep "1d"
#define PT_MODE_ENUM_(e, name, shape, depth, dims) PT_MODE_##e,

typedef enum pt_mode { PT_MODE_ROWS(PT_MODE_ENUM_, ) } pt_mode;

/* Pipeline schedules (lib/pipeline): 1F1B is PipeDream-Flush (Narayanan
 * et al. 2021, sec. 2.1), GPipe all-forward-all-backward (Huang et al.
 * 2019), interleaved 1F1B with virtual stages (Narayanan et al. 2021,
 * sec. 2.2). */
typedef enum pt_schedule { PT_SCHED_1F1B = 0, PT_SCHED_GPIPE, PT_SCHED_INTERLEAVED } pt_schedule;
/* Activation checkpointing: none; the whole block recomputed in the
 * backward; only the attention core ("selective", Korthikanti et al.
 * 2022, sec. 4.2). */
typedef enum pt_recompute { PT_RECOMPUTE_NONE = 0, PT_RECOMPUTE_BLOCK, PT_RECOMPUTE_ATTENTION } pt_recompute;
/* Training precision (lib/backend/ops.h's tables): fp32 throughout, or
 * bf16 activations and bf16 copies of the weights for the matmuls with
 * fp32 master weights, gradients, AdamW moments and statistics (mixed
 * precision: Micikevicius et al. 2018; bf16: Kalamkar et al. 2019). */
typedef enum pt_precision { PT_PREC_FP32 = 0, PT_PREC_BF16 } pt_precision;
/* most entries of an explicit stage split (pp * virtual_stages) */
#define PT_PP_SPLIT_MAX 64
/* most model chunks per pp rank (= PT_GPT_MAX_CHUNKS of lib/model) */
#define PT_VIRTUAL_STAGES_MAX 16

typedef struct pt_plan {
    pt_mode mode;
    int dp, pp, tp;      /* group sizes; world = dp * pp * tp * sp */
    int tp_depth;        /* 2.5D depth d (tp = d*q*q); 1 otherwise */
    int sp;              /* sequence-parallel size */
    int zero;            /* ZeRO stage 0..3 */
    int microbatches;    /* pipeline microbatches per step (>= 1) */
    int recompute;       /* activation recomputation (checkpointing): a pt_recompute */
    int schedule;        /* a pt_schedule (meaningful with pp > 1) */
    int virtual_stages;  /* v model chunks per pp rank (interleaved only; 1 otherwise) */
    int pp_split_n;      /* 0: even split; else pp * virtual_stages entries in pp_split */
    int pp_split[PT_PP_SPLIT_MAX]; /* blocks per (virtual) stage in pipeline order, sum = n_layer */
    int precision;       /* a pt_precision */
    char rank_order[4];  /* placement letters, a permutation of "DPT"; right-most varies fastest */
    char tp_order[4];    /* placement of the tp grid's axes inside the T block: a permutation of
                          * "012" (the axes of pt_plan_tp_dims), slowest first, the right-most
                          * varying fastest; "012" (canonical: 2d rows, 3d's K, on consecutive
                          * ranks); "021" puts 2d's columns there (pt_plan_coords) */
} pt_plan;


/* mode <-> text: "off", "auto", "1d", "2d", "2.5d", "3d" */
const char *pt_mode_name(pt_mode m);
int pt_mode_parse(const char *s, pt_mode *m);

/* Parse a placement into out (3 letters + NUL): a permutation of D, P, T
 * (any case), or SageMaker's names "cluster" (= DPT) and "spread" (= TPD).
 * Anything else, a longer string included, is refused. */
int pt_plan_order_parse(const char *s, char out[4]);

/* Parse a tp axis order into out (3 digits + NUL): a permutation of 0, 1,
 * 2, the axes of pt_plan_tp_dims slowest first ("012" canonical, "021":
 * axis 1 varies fastest).  Anything else is refused with "invalid <what>
 * '<s>' (valid: a permutation of 0, 1, 2 such as 012 or 021)". */
int pt_plan_tp_order_parse(const char *what, const char *s, char out[4]);

/* schedule <-> text: "1f1b", "gpipe", "interleaved".  parse: 0, or -1
 * with "invalid <what> '<s>' (valid: gpipe, 1f1b, interleaved)". */
const char *pt_schedule_name(int s);
int pt_schedule_parse(const char *what, const char *s, int *out);

/* recompute <-> text: "none", "block", "attention"; parse also takes "0"
 * (none) and "1" (block), the values of PTRAIN_CKPT_ACT (the old name of
 * PTRAIN_RECOMPUTE) in earlier versions. */
const char *pt_recompute_name(int r);
int pt_recompute_parse(const char *what, const char *s, int *out);

/* The recompute mode's variable under its two names: given the values of
 * PTRAIN_RECOMPUTE (now) and of its old name PTRAIN_CKPT_ACT (old), each
 * NULL when unset, set *name and *text to the one to read
 * (PTRAIN_RECOMPUTE when both are set), both NULL when neither is.
 * Returns 0, or -1 with "PTRAIN_RECOMPUTE=block and PTRAIN_CKPT_ACT=none
 * differ (...)" when both are set to different modes (a value that is no
 * mode is refused as pt_recompute_parse refuses it). */
int pt_plan_recompute_var(const char *now, const char *old, const char **name, const char **text);

/* precision <-> text: "fp32", "bf16".  parse: 0, or -1 with "invalid
 * <what> '<s>' (valid: fp32, bf16)". */
const char *pt_precision_name(int p);
int pt_precision_parse(const char *what, const char *s, int *out);

/* An explicit stage split "3,3,2,2" (blocks per stage in pipeline order,
 * each 1..4096, at most PT_PP_SPLIT_MAX entries) into p->pp_split and
 * p->pp_split_n; "even" or "" clears it (pp_split_n = 0).  How many
 * entries a plan needs (pp * virtual_stages) is pt_plan_validate's check,
 * their sum (n_layer) pt_plan_check_model's.  p is unchanged on error. */
int pt_plan_split_parse(const char *what, const char *s, pt_plan *p);

/* p's split as "3,3,2,2", or "even" when pp_split_n is 0 (n >= 8 bytes;
 * a split that does not fit ends in "..."). */
void pt_plan_split_format(const pt_plan *p, char *buf, size_t n);

/* Forward units pp rank r (0-based) runs before its first backward in a
 * 1F1B-family schedule of m microbatches and v chunks per rank: 1F1B
 * min(pp - r - 1, m) (PipeDream-Flush, Narayanan et al. 2021, sec. 2.1);
 * interleaved all m v when m == pp, else min(2 (pp - r - 1) + (v - 1) pp,
 * m v) (sec. 2.2, as Megatron-LM's interleaved schedule).  GPipe has no
 * warm-up phase of this kind (all forwards first): returns m v.  Shared by
 * lib/pipeline's action lists and the cost model's activation slots. */
int pt_pp_warmup(int schedule, int pp, int r, int m, int v);

/* q with q*q == n (l with l*l*l == n), or 0 when n is no square (cube):
 * the shapes of the 2d/2.5d and 3d grids. */
int pt_isqrt_exact(int n);
int pt_icbrt_exact(int n);

/* Defaults: mode 1d, every size 1, zero 0, microbatches 1, schedule 1f1b,
 * virtual_stages 1, even split, recompute none, precision fp32, order
 * "DPT", tp order "012". */
void pt_plan_default(pt_plan *p);

/* Check the plan is internally consistent and fits `world_size` ranks
 * (dp*pp*tp*sp == world_size, every size >= 1, rank_order a permutation
 * of DPT, tp_order one of 012, tp_depth consistent with the mode).  world_size <= 0 skips the
 * world check.  Pipeline, ZeRO and recompute settings (the ones that need
 * no model; see pt_plan_check_model for the rest):
 *   schedule one of pt_schedule; virtual_stages 1..PT_VIRTUAL_STAGES_MAX,
 *   > 1 only with interleaved, and interleaved needs virtual_stages >= 2,
 *   pp >= 2 and microbatches % pp == 0 (Narayanan et al. 2021, sec. 2.2:
 *   microbatches go round the pipeline in groups of pp);
 *   an explicit split has pp * virtual_stages entries, each >= 1;
 *   zero 0..3, and zero > 0 needs dp * sp > 1 (ZeRO shards the optimizer
 *   state over the data-parallel ranks: Rajbhandari et al. 2020, sec. 5);
 *   recompute a pt_recompute; precision a pt_precision. */
int pt_plan_validate(const pt_plan *p, int world_size);

/* The checks that need the model and the batch: pp * virtual_stages
 * stages of at least one block each fit n_layer blocks; an explicit split
 * sums to n_layer; batch_per_dp (sequences per data-parallel rank per
 * step) divides into microbatches.  batch_per_dp <= 0 skips the batch
 * check.  0, or -1 with one line naming the value and what would fit. */
int pt_plan_check_model(const pt_plan *p, int n_layer, int batch_per_dp);

/* Read PTRAIN_MODE, PTRAIN_DP, PTRAIN_PP, PTRAIN_TP, PTRAIN_TP_DEPTH,
 * PTRAIN_SP, PTRAIN_ZERO, PTRAIN_MICROBATCHES, PTRAIN_SCHEDULE,
 * PTRAIN_VIRTUAL_STAGES, PTRAIN_PP_SPLIT, PTRAIN_RECOMPUTE,
 * PTRAIN_PRECISION, PTRAIN_RANK_ORDER, PTRAIN_TP_ORDER from the environment over the values already in *p
 * (unset variables leave fields unchanged).  PTRAIN_CKPT_ACT, the old name
 * of PTRAIN_RECOMPUTE, is read as it; both set to different modes is an
 * error naming both (pt_plan_recompute_env).  Returns 1 if at least one
 * PTRAIN_* plan variable was present, 0 if none, -1 on a bad value (*p
 * unchanged). */
int pt_plan_from_env(pt_plan *p);

/* Call set(name, value, arg) once per plan variable, PTRAIN_PLAN included.
 * Returns the first non-zero value set() returns, else 0. */
int pt_plan_export(const pt_plan *p, int (*set)(const char *name, const char *value, void *arg),
                   void *arg);

/* One-line human summary, e.g. "mode=1d dp=2 tp=2 pp=1 sp=1 zero=0 order=DPT",
 * followed by the settings that differ from the defaults ("microbatches=8
 * schedule=interleaved virtual_stages=2 split=3,3,2,2 recompute=block
 * precision=bf16").
^ * n = 640 holds every plan. */
void pt_plan_summary(const pt_plan *p, char *buf, size_t n);

/* ---- requests (what a user pinned) and the job they are planned for ---- */
typedef struct pt_job_geometry {
    int nnodes;              /* nodes in the step */
    int ntasks;              /* tasks in the step */
    const int *tasks_per_node; /* [nnodes] tasks on each node, in node order */
} pt_job_geometry;

typedef struct pt_plan_limits {
    int max_tp;        /* largest tp the admin allows (>= 1) */
    unsigned modes;    /* bit (1u << pt_mode) set for each mode users may request */
    int max_pp;        /* largest pp the admin allows (>= 1) */
    int max_zero;      /* highest ZeRO stage the admin allows (0..3) */
    unsigned schedules; /* bit (1u << pt_schedule) per schedule users may request */
    int default_zero;  /* ZeRO stage of requests that pin none, where a plan can take it
                        * (0..max_zero; the planner handle, lib/plan/planner.h) */
    int mixed;         /* PT_MIXED_*: a step over nodes of several kinds is planned at
                        * the slowest node's rates (adapt, 0) or refused */
    unsigned precisions; /* bit (1u << pt_precision) per precision users may request;
                          * 0: every precision (so a limits value built without it limits none) */
    const char *flag_prefix; /* how the front end spells a setting in messages: the prefix
                              * before the setting's name (pt_plan_flag): "--ptrain-" (srun's
                              * --ptrain-tp), "--" (ptrain-run's and ptrain-plan's --tp);
                              * NULL: the name alone ("tp=3 does not divide ...") */
} pt_plan_limits;
enum { PT_MIXED_ADAPT = 0, PT_MIXED_REFUSE = 1 };

/* The setting `key` (a request key: "tp", "tp-depth", "microbatches",
 * "recompute", ...; planner.h's pt_plan_request_keys) as the front end
 * of lim spells it, lim->flag_prefix before it ("--ptrain-tp", "--tp";
 * lim NULL or no prefix: "tp"), written into buf [n] (cut to fit);
 * returns buf.  The library names settings in its messages only this
 * way, so each front end renders its own flags. */
const char *pt_plan_flag(const pt_plan_limits *lim, const char *key, char *buf, size_t n);

/* The checks of a request that need no geometry, for the plugin's
 * srun/sbatch side before an allocation exists and for pt_plan_search.
 * A request pins what the user gave; 0 in a size means "choose" (see
 * pt_plan_resolve, plan/resolve.h, for how it becomes a plan):
 *   mode      auto, off, 1d, 2d, 2.5d or 3d, allowed by lim->modes (off
 *             needs no permission);
 *   tp, tp_depth, sp, pp, microbatches  0..2^20 (0 = choose);
 *   zero 0..3 and <= lim->max_zero; pp <= lim->max_pp; the schedule in
 *   lim->schedules; recompute a pt_recompute; precision a pt_precision
 *   in lim->precisions (0: any);
 *   tp_depth > 1 only with 2.5d; sp with any tp and depth (ring
 *   self-attention, Li et al. 2021, "Sequence Parallelism", sec. 3, runs
 *   on the heads each tensor layout leaves a rank: Megatron-LM's context
 *   parallelism x tensor parallelism); a pinned tp of the mode's shape
 *   (pt_plan_list_tp); the pipeline settings pt_plan_validate checks
 *   without a world (schedule, virtual stages, split entries).
 * Off skips everything after the ranges.  lim NULL: no limits.  0, or -1
 * with a one-line error naming the setting as lim's front end spells it
 * (pt_plan_flag: "--ptrain-tp=4 is not l*l*l for --ptrain-mode=3d ...")
 * and what is valid. */
int pt_plan_request_check(const pt_plan *req, const pt_plan_limits *lim);

/* The tensor-parallel sizes of mode m that divide n ranks and are <= cap,
 * written into buf as "1, 4, 16" ("..." ends a list that does not fit):
 * the one "valid tp here" list of every message (plan_modes.c's table;
 * 1d, off and auto list every divisor, so it is also the list of valid dp,
 * pp and sp sizes).
 * For 2.5d, tp_depth >= 1 lists tp = tp_depth*q*q; tp_depth 0 lists every
 * (depth, tp) pair as "(1, 1), (1, 4), (2, 2)".  Returns the number of
 * sizes (or pairs) that fit, also those cut from buf; buf may be NULL. */
int pt_plan_list_tp(pt_mode m, int tp_depth, int n, int cap, char *buf, size_t len);

/* Placement: the rank a task gets in the plan's process grid, from its
 * node index and its task index on that node, so that tensor groups stay
 * inside a node whatever Slurm's task distribution was ("cluster"
 * placement: ranks numbered node by node).  Returns -1 on bad input. */
int pt_plan_rank(const pt_job_geometry *g, int node_index, int local_task);

/* Coordinates of `rank` in the grid of plan p: the letters of rank_order
 * name the axes, the right-most varying fastest (SageMaker placement
 * strategy).  The T letter covers the tp*sp ranks of a sequence- and
 * tensor-parallel block, tp varying fastest inside it; sp_rank is the
 * block's position along the sequence.  Inside the block's tp part the
 * axes of the tp grid (pt_plan_tp_dims) are laid out in tp_order, the
 * right-most fastest; *tp_rank is the canonical index (c0 dims[1] + c1)
 * dims[2] + c2 the layouts use, whatever the order.  Returns -1 if rank
 * is outside the grid or tp does not have the mode's shape. */
int pt_plan_coords(const pt_plan *p, int rank, int *dp_rank, int *pp_rank, int *tp_rank,
                   int *sp_rank);

/* The tensor-parallel grid of plan p, as three axis sizes whose product
 * is p->tp (tp ranks are numbered with dims[2] varying fastest):
 *   1d/off  {1, 1, tp}
 *   2d      {1, q, q}       tp = q*q          (depth, row i, column j)
 *   2.5d    {d, q, q}       tp = d*q*q, d = tp_depth
 *   3d      {l, l, l}       tp = l*l*l        (i, j, k)
 * Returns -1 with a one-line error (naming valid tp values) when tp does
 * not have the mode's shape or tp_depth is set for a mode without depth. */
int pt_plan_tp_dims(const pt_plan *p, int dims[3]);

#endif
