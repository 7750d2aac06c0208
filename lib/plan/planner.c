/* SPDX-License-Identifier: MIT */
/* The planning handle and the request builder (see planner.h): the one
 * path from defaults, the environment and flags to a plan, for the SPANK
 * plugin, ptrain-run and ptrain-plan.  libc only. */
#include "plan/planner.h"
#include "plan/resolve.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_COUNT (1 << 20)

struct pt_planner {
    const pt_cluster *c;
    pt_plan_limits lim;
    pt_plan_request req;
    int have_req, have_result;
    pt_plan plan;
    pt_search_result res;
    char notes[1024];
};

pt_planner *pt_planner_new(const pt_cluster *c, const pt_plan_limits *lim)
{
    if (!c || c->nnodes < 1 || !c->tasks_per_node) {
        pt_fail(PT_EINVAL, "planner: no cluster given (valid: >= 1 node with its task counts)");
        return NULL;
    }
    pt_plan_limits l;
    if (lim) l = *lim;
    else pt_plan_limits_default(&l);
    if (l.max_tp < 1 || l.max_pp < 1 || l.max_zero < 0 || l.max_zero > 3 || l.default_zero < 0 ||
        l.default_zero > l.max_zero || (l.mixed != PT_MIXED_ADAPT && l.mixed != PT_MIXED_REFUSE)) {
        pt_fail(PT_EINVAL, "planner: invalid limits (max_tp %d, max_pp %d, max_zero %d, default_zero %d, mixed %d; "
                "valid: max_tp, max_pp >= 1, 0 <= default_zero <= max_zero <= 3, mixed adapt or refuse)",
                l.max_tp, l.max_pp, l.max_zero, l.default_zero, l.mixed);
        return NULL;
    }
    pt_planner *p = calloc(1, sizeof *p);
    if (!p) {
        pt_fail(PT_ENOMEM, "planner: out of memory");
        return NULL;
    }
    p->c = c;
    p->lim = l;
    return p;
}

int pt_planner_set_request(pt_planner *p, const pt_plan_request *r)
{
    if (!p || !r) return pt_fail(PT_EINVAL, "planner: no handle or request given");
    if (pt_model_shape_parse("model", r->model_name, NULL) < 0 && !(r->model.n_layer > 0))
        return PT_EINVAL;
    if (r->global_batch < 1 || r->global_batch > MAX_COUNT)
        return pt_fail(PT_EINVAL, "invalid global batch %d (valid: 1..%d sequences per step)", r->global_batch, MAX_COUNT);
    if (pt_plan_request_check(&r->plan, &p->lim) < 0) return -1;
    p->req = *r;
    p->have_req = 1;
    p->have_result = 0;
    return 0;
}

/* "4 x a.json, 2 x b.json" of the kinds present in c. */
static void kinds_text(const pt_cluster *c, char *buf, size_t n, int *present)
{
    size_t k = 0;
    buf[0] = '\0';
    *present = 0;
    for (int i = 0; i < c->nkinds; i++) {
        int count = 0;
        for (int j = 0; j < c->nnodes; j++) count += c->kind_of[j] == i;
        if (!count) continue;
        (*present)++;
        if (k < n)
            k += (size_t)snprintf(buf + k, n - k, "%s%d x %s (%.4g GFLOP/s per rank)", k ? ", " : "", count,
                                  c->kinds[i].name ? c->kinds[i].name : "?", c->kinds[i].hw.gemm_gflops);
    }
}

/* A bf16 the request did not pin (the administrator's default_precision)
 * gives way to fp32 where fp32 prices a faster step and fits: on a CPU
 * whose bf16 GEMM is fp32 sgemm on converted tiles (no AMX; the node
 * model's gemm_gflops_bf16, measured or estimated, is below its fp32 rate)
 * bf16 saves memory, not time, so auto takes it only where fp32 does not
 * fit.  p holds the bf16 result; replaced by the fp32 one, with a note. */
static void fp32_instead(pt_planner *p, const pt_plan *q, const pt_plan_limits *l, unsigned pin)
{
    const pt_plan_request *r = &p->req;
    pt_plan q32 = *q, out;
    q32.precision = PT_PREC_FP32;
    pt_search_result *res = malloc(sizeof *res);
    char notes[sizeof p->notes];
    if (!res) return;
    pt_errsave es;
    pt_error_save(&es);
    const int rc = pt_plan_resolve(p->c, &r->model, r->global_batch, l, &q32, (pin & PT_PIN_ZERO) != 0,
                                   (pin & PT_PIN_ZERO) ? 0 : p->lim.default_zero, &out, res, notes, sizeof notes);
    pt_error_restore(&es);
    const double t16 = p->res.best.cost.t_step, t32 = rc == 0 ? res->best.cost.t_step : 0;
    if (rc == 0 && t32 < t16) {
        p->plan = out;
        p->res = *res;
        snprintf(p->notes, sizeof p->notes, "%s", notes);
        char flag[48];
        pt_notef(p->notes, sizeof p->notes,
                 "ptrain: precision fp32, not the default bf16: this node's bf16 GEMM (%.4g GFLOP/s per rank) is no "
                 "faster than its fp32 one (%.4g), so bf16 would save memory, not time (predicted step %.4g ms "
                 "against %.4g ms in bf16; %s=bf16 pins it)",
                 p->c->hw.gemm_gflops_bf16 > 0 ? p->c->hw.gemm_gflops_bf16 : p->c->hw.gemm_gflops,
                 p->c->hw.gemm_gflops, t32 * 1e3, t16 * 1e3, pt_plan_flag(&p->lim, "precision", flag, sizeof flag));
    }
    free(res);
}

int pt_planner_run(pt_planner *p)
{
    if (!p || !p->have_req) return pt_fail(PT_EINVAL, "planner: no request set (pt_planner_set_request)");
    const pt_cluster *c = p->c;
    if (c->nkinds > 1 && c->kinds && c->kind_of) {
        char kinds[600];
        int present;
        kinds_text(c, kinds, sizeof kinds, &present);
        if (present > 1 && p->lim.mixed == PT_MIXED_REFUSE)
            return pt_fail(PT_EINVAL, "the step's nodes are of %d kinds (%s) and mixed_nodes=refuse (valid: nodes of "
                           "one kind, or mixed_nodes=adapt: plan at the slowest node's rates)", present, kinds);
    }
    const pt_plan_request *r = &p->req;
    pt_plan q = r->plan;
    pt_plan_limits l = p->lim;
    const unsigned pin = r->pinned;
    /* what is not pinned is chosen: sizes 0, orders "" */
    if (!(pin & PT_PIN_TP)) q.tp = 0;
    if (!(pin & PT_PIN_TP_DEPTH)) q.tp_depth = 0;
    if (!(pin & PT_PIN_SP)) q.sp = 0;
    if (!(pin & PT_PIN_PP)) q.pp = 0;
    if (!(pin & PT_PIN_MICROBATCHES)) q.microbatches = 0;
    if (!(pin & PT_PIN_VIRTUAL_STAGES)) q.virtual_stages = 0;
    if (!(pin & PT_PIN_SPLIT)) q.pp_split_n = 0;
    if (!(pin & PT_PIN_RANK_ORDER)) q.rank_order[0] = '\0';
    if (!(pin & PT_PIN_TP_ORDER)) q.tp_order[0] = '\0';
    if (!(pin & PT_PIN_ZERO)) q.zero = 0;
    /* a pinned schedule is the only one, 1f1b too (the search reads an
     * unpinned 1f1b as "any"; another unpinned one is the administrator's
     * default, which the search keeps as before) */
    if (pin & PT_PIN_SCHEDULE) l.schedules = 1u << q.schedule;
    q.dp = 0;
    int rc = pt_plan_resolve(c, &r->model, r->global_batch, &l, &q, (pin & PT_PIN_ZERO) != 0,
                             (pin & PT_PIN_ZERO) ? 0 : p->lim.default_zero, &p->plan, &p->res, p->notes,
                             sizeof p->notes);
    if (rc == 0 && !(pin & PT_PIN_PRECISION) && q.precision == PT_PREC_BF16 &&
        (!l.precisions || (l.precisions & (1u << PT_PREC_FP32))))
        fp32_instead(p, &q, &l, pin);
    p->have_result = rc == 0;
    return rc;
}

const pt_plan *pt_planner_plan(const pt_planner *p) { return p && p->have_result ? &p->plan : NULL; }
const pt_search_result *pt_planner_result(const pt_planner *p) { return p && p->have_result ? &p->res : NULL; }
const char *pt_planner_notes(const pt_planner *p) { return p && p->have_result ? p->notes : ""; }
const pt_plan_request *pt_planner_request(const pt_planner *p) { return p && p->have_req ? &p->req : NULL; }

size_t pt_planner_explain(const pt_planner *p, char *buf, size_t n)
{
    if (buf && n) buf[0] = '\0';
    if (!p || !p->have_result) return 0;
    return pt_plan_explain(&p->res, &p->req.model, p->req.global_batch, buf, n);
}

void pt_planner_free(pt_planner *p) { free(p); }
