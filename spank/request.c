/* SPDX-License-Identifier: MIT */
/* The user's --ptrain-* options and PTRAIN_* variables, each value read
 * through lib/plan's one request builder (pt_plan_request_set, which
 * ptrain-run and ptrain-plan share) against the administrator's limits;
 * see spank_util.h. */
#include "spank/spank_util.h"
#include "core/core.h"
#include "plan/planner.h"

#include <stdio.h>
#include <string.h>

pt_plan_limits pt_spank_conf_limits(const pt_spank_conf *c)
{
    pt_plan_limits lim;
    pt_plan_limits_default(&lim);
    lim.max_tp = c->max_tp;
    lim.modes = c->allowed_modes;
    lim.max_pp = c->max_pp;
    lim.max_zero = c->max_zero;
    lim.schedules = c->allowed_schedules;
    lim.precisions = c->allowed_precisions;
    lim.default_zero = c->default_zero;
    lim.mixed = c->mixed_nodes;
    lim.flag_prefix = "--ptrain-"; /* the planner's messages name srun's options */
    return lim;
}

/* One value through lib/plan's request builder (pt_plan_request_set, the
 * one the plugin, ptrain-run and ptrain-plan share), its message prefixed
 * "ptrain: ". */
static int request_value(const pt_spank_conf *c, const char *key, const char *what, const char *text,
                         pt_plan_request *r)
{
    pt_plan_limits lim;
    if (c) lim = pt_spank_conf_limits(c);
    if (pt_plan_request_set(r, c ? &lim : NULL, key, what, text ? text : "") < 0)
        return pt_fail(PT_EINVAL, "ptrain: %s", pt_errmsg());
    return 0;
}

int pt_spank_parse_setting(const pt_spank_conf *c, const char *key, const char *what, const char *text)
{
    pt_plan_request r;
    pt_plan_request_init(&r, PT_MODE_OFF);
    return request_value(c, key, what, text, &r);
}

int pt_spank_parse_model_opt(const char *what, const char *text)
{
    pt_plan_request r;
    pt_plan_request_init(&r, PT_MODE_OFF);
    return request_value(NULL, "model", what, text, &r);
}

int pt_spank_parse_batch_opt(const char *what, const char *text, int *out)
{
    pt_plan_request r;
    pt_plan_request_init(&r, PT_MODE_OFF);
    if (request_value(NULL, "batch", what, text, &r) < 0) return -1;
    *out = r.global_batch;
    return 0;
}

int pt_spank_parse_mode_opt(const pt_spank_conf *c, const char *what, const char *text,
                            pt_mode *out)
{
    pt_plan_request r;
    pt_plan_request_init(&r, PT_MODE_OFF);
    if (request_value(c, "mode", what, text, &r) < 0) return -1;
    *out = r.plan.mode;
    return 0;
}

int pt_spank_parse_size_opt(const pt_spank_conf *c, const char *what, const char *text, int is_tp,
                            int *out)
{
    pt_plan_request r;
    pt_plan_request_init(&r, PT_MODE_OFF);
    if (request_value(c, is_tp ? "tp" : "sp", what, text, &r) < 0) return -1;
    *out = is_tp ? r.plan.tp : r.plan.sp;
    return 0;
}

int pt_spank_parse_pipe_opt(const pt_spank_conf *c, const char *key, const char *what,
                            const char *text, pt_plan *req)
{
    static const char *keys[] = {"pp", "microbatches", "virtual-stages", "zero", "schedule", "recompute", "precision",
                                 "pp-split"};
    int known = 0;
    for (size_t i = 0; key && i < sizeof keys / sizeof keys[0]; i++) known |= strcmp(key, keys[i]) == 0;
    if (!known)
        return pt_fail(PT_EINVAL, "ptrain: unknown pipeline option '%s' (valid: pp, microbatches, "
                       "virtual-stages, zero, schedule, recompute, precision, pp-split)", key ? key : "");
    pt_plan_request r;
    pt_plan_request_init(&r, PT_MODE_OFF);
    r.plan = *req;
    if (request_value(c, key, what, text, &r) < 0) return -1;
    *req = r.plan;
    return 0;
}
