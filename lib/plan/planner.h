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
#include "contract/settings.h"
#include "plan/search.h"

/* The request (pt_plan_request, its pins, pt_plan_request_init/_set/_env,
 * pt_plan_limits_default) is the contract's: contract/settings.h, whose
 * table of settings every front end takes its plan options from. */

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
