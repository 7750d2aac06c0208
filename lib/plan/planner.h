/* SPDX-License-Identifier: MIT */
/* One planning handle for every front end (the SPANK plugin, ptrain-run
 * --mode auto, ptrain-plan), in the style of LLNL mpibind's handle
 * (mpibind_init / mpibind_set_* / mpibind / mpibind_get_*): a request built
 * once from defaults, the environment and flags, with an explicit bit for
 * every setting the user pinned, planned on a cluster under the
 * administrator's limits, with one result and one explanation.
 *
 *   pt_plan_request r;
 *   pt_plan_request_init(&r, PT_MODE_AUTO);            defaults, nothing pinned
 *   pt_plan_request_set(&r, &lim, "tp", "--tp", "4");   a flag: pinned
 *   pt_plan_request_env(&r, &lim, getter, arg);   PTRAIN_* for the rest
 *   pt_planner *p = pt_planner_new(&cluster, &lim);
 *   pt_planner_set_request(p, &r);
 *   pt_planner_run(p);
 *   pt_planner_plan(p), pt_planner_result(p), pt_planner_explain(p, buf, n),
 *   pt_planner_notes(p);
 *   pt_planner_free(p);
 *
 * libc only, as the rest of lib/plan (the plugin links it into slurmstepd).
 * Errors (core/core.h's convention): -1 (PT_EINVAL; PT_ENOMEM when out of
 * memory) with one line in pt_errmsg() naming the value and what would be
 * valid; NULL from pt_planner_new. */
#ifndef PTRAIN_PLAN_PLANNER_H
#define PTRAIN_PLAN_PLANNER_H
#include <stddef.h>

#include "core/core.h"
#include "plan/cost.h"
#include "contract/plan.h"
#include "plan/search.h"

/* The settings a request can pin, one bit each. */
enum {
    PT_PIN_MODE = 1u << 0,
    PT_PIN_TP = 1u << 1,
    PT_PIN_TP_DEPTH = 1u << 2,
    PT_PIN_SP = 1u << 3,
    PT_PIN_PP = 1u << 4,
    PT_PIN_MICROBATCHES = 1u << 5,
    PT_PIN_SCHEDULE = 1u << 6,
    PT_PIN_VIRTUAL_STAGES = 1u << 7,
    PT_PIN_SPLIT = 1u << 8,
    PT_PIN_ZERO = 1u << 9,
    PT_PIN_RECOMPUTE = 1u << 10,
    PT_PIN_RANK_ORDER = 1u << 11,
    PT_PIN_TP_ORDER = 1u << 12,
    PT_PIN_MODEL = 1u << 13, /* the model and batch were given (not the defaults) */
    PT_PIN_BATCH = 1u << 14,
    PT_PIN_PRECISION = 1u << 15,
};

/* A request: what to plan, and for which model and batch.  plan holds the
 * values, pinned which of them the user gave; the others are the
 * defaults of pt_plan_request_init (mode: the administrator's default;
 * schedule and recompute: the administrator's defaults; sizes chosen by
 * the planner).  A caller may set a field directly and its bit. */
typedef struct pt_plan_request {
    pt_plan plan;
    unsigned pinned;       /* PT_PIN_* */
    char model_name[64];   /* as given: a preset name or L,H,C,T,V */
    pt_model_shape model;  /* its shape */
    int global_batch;      /* sequences per optimizer step */
} pt_plan_request;

/* The request's defaults: mode default_mode, schedule 1f1b, recompute
 * none, precision fp32, model "tiny", global batch 8 (ptrain-run's
 * defaults), nothing pinned. */
void pt_plan_request_init(pt_plan_request *r, pt_mode default_mode);

/* The keys of pt_plan_request_set and pt_plan_request_env, the settings'
 * names: the plugin's options are "--ptrain-" and the key, ptrain-run's
 * and ptrain-plan's flags "--" and the key, the variable is PTRAIN_ and
 * the key in upper case, '-' as '_':
 * mode, tp, tp-depth, sp, pp, microbatches, schedule, virtual-stages,
 * pp-split, zero, recompute, precision, rank-order, tp-order, model,
 * batch. */
const char *pt_plan_request_keys(void);

/* Parse `text` for key into r and pin it; `what` names the value in the
 * message ("--ptrain-tp", "PTRAIN_TP", "--tp").  lim (may be NULL: no
 * limits) is checked where a single value can exceed it: modes,
 * max_tp, max_pp, max_zero, schedules, precisions.  The messages (one line, no
 * prefix):
 *   "<what>='<text>' is invalid (valid: an integer 1..1048576 that divides
 *    the tasks on every node)", "<what>=<v> exceeds this cluster's
 *    max_tp=<n>", "<what>=<m> is not allowed on this cluster
 *    (allowed_modes in ptrain.conf)", "<what>='<text>' is invalid (valid
 *    ZeRO stages: 0, 1, 2, 3)", "<what>=<p> is not allowed on this cluster
 *    (allowed_precisions in ptrain.conf)", the batch's, the model's, the
 *    schedule's, recompute's, precision's, split's and orders' own ("invalid <what> '<text>'
 *    (valid: ...)").
 * 0, or -1 (r unchanged) with the message; an unknown key is -1 naming the
 * valid keys. */
int pt_plan_request_set(pt_plan_request *r, const pt_plan_limits *lim, const char *key, const char *what,
                        const char *text);

/* The environment a request is read from: 1 and the value in buf when
 * `name` is set and not empty, 0 when unset or empty, -1 when the value
 * does not fit buf [len] (never cut: a cut value could pass as another). */
typedef int (*pt_plan_getenv_fn)(void *arg, const char *name, char *buf, int len);
/* getenv(3) as a pt_plan_getenv_fn (arg unused). */
int pt_plan_getenv(void *arg, const char *name, char *buf, int len);

/* Read the PTRAIN_* variable of every key r does not pin yet (a flag or
 * option given before wins over the environment) through get, parsed and
 * pinned as pt_plan_request_set with what = the variable's name; the
 * recompute mode also from PTRAIN_CKPT_ACT, the old name of
 * PTRAIN_RECOMPUTE (pt_plan_recompute_var: both set to different modes is
 * an error naming both).  -1 with one line on the first bad value, or
 * "<NAME> in the job environment is longer than 255 bytes; it is not a
 * valid value (valid: see ptrain-env(7))". */
int pt_plan_request_env(pt_plan_request *r, const pt_plan_limits *lim, pt_plan_getenv_fn get, void *arg);

/* The administrator's limits with nothing limited: max_tp and max_pp
 * 1048576, every mode, schedule and precision, max_zero 3, default_zero
 * 0, mixed nodes adapted to. */
void pt_plan_limits_default(pt_plan_limits *lim);

typedef struct pt_planner pt_planner;

/* A handle planning on cluster c (the caller keeps c and what it points to
 * alive until pt_planner_free) under lim (copied; NULL:
 * pt_plan_limits_default).  NULL with one line in pt_errmsg() (no memory, no
 * cluster, a limit out of range). */
pt_planner *pt_planner_new(const pt_cluster *c, const pt_plan_limits *lim);

/* The request to plan (copied): what is pinned is a pin, the rest is
 * chosen (pt_plan_resolve's rules, lib/plan/resolve.h): mode auto or a
 * named mode; tp, tp_depth, sp, pp, microbatches, virtual stages, split,
 * rank order and tp order when pinned; the ZeRO stage when pinned (0
 * included: no ZeRO), else the limits' default_zero when a plan takes it;
 * a pinned schedule is the only one (1f1b too), an unpinned one is the
 * request's (the administrator's default: other than 1f1b, a pin as
 * before); recompute other than none.  -1 with one line when the request
 * breaks the limits or a rule that needs no cluster
 * (pt_plan_request_check, the model's shape, a batch < 1). */
int pt_planner_set_request(pt_planner *p, const pt_plan_request *r);

/* Plan: the pin checks that need the task count, the search and the
 * choice (pt_plan_resolve).  On a cluster of mixed nodes whose limits say
 * PT_MIXED_REFUSE, a step over nodes of several kinds is refused in one
 * line naming the kinds.  0, or -1 with one line (messages name srun's
 * options; pt_plan_error_options rewrites them). */
int pt_planner_run(pt_planner *p);

/* After a successful run: the chosen plan, the search result (winner,
 * runners-up, why), the warnings for the user ("" when none, '\n' between
 * lines), and the explanation (pt_plan_explain: the table, the plan, the
 * communicators, which node limits the step on mixed nodes, why) into buf
 * [n], returning the length it needs (as snprintf).  Before a run: NULL,
 * "", 0. */
const pt_plan *pt_planner_plan(const pt_planner *p);
const pt_search_result *pt_planner_result(const pt_planner *p);
const char *pt_planner_notes(const pt_planner *p);
size_t pt_planner_explain(const pt_planner *p, char *buf, size_t n);
/* The request planned (NULL before pt_planner_set_request). */
const pt_plan_request *pt_planner_request(const pt_planner *p);

void pt_planner_free(pt_planner *p);

#endif
