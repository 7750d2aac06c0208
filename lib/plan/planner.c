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
#define DEFAULT_MODEL "tiny"
#define DEFAULT_BATCH 8

void pt_plan_request_init(pt_plan_request *r, pt_mode default_mode)
{
    memset(r, 0, sizeof *r);
    pt_plan_default(&r->plan);
    r->plan.mode = default_mode;
    r->plan.dp = r->plan.pp = r->plan.tp = r->plan.tp_depth = r->plan.sp = 0;
    r->plan.microbatches = r->plan.virtual_stages = 0;
    r->plan.rank_order[0] = '\0'; /* the search chooses the placement */
    r->plan.tp_order[0] = '\0';
    snprintf(r->model_name, sizeof r->model_name, "%s", DEFAULT_MODEL);
    pt_model_preset(DEFAULT_MODEL, &r->model);
    r->global_batch = DEFAULT_BATCH;
}

const char *pt_plan_request_keys(void)
{
    return "mode, tp, tp-depth, sp, pp, microbatches, schedule, virtual-stages, pp-split, zero, recompute, "
           "precision, rank-order, tp-order, model, batch";
}

void pt_plan_limits_default(pt_plan_limits *lim)
{
    memset(lim, 0, sizeof *lim);
    lim->max_tp = MAX_COUNT;
    lim->modes = ~0u;
    lim->max_pp = MAX_COUNT;
    lim->max_zero = 3;
    lim->schedules = ~0u;
    lim->precisions = ~0u;
    lim->default_zero = 0;
    lim->mixed = PT_MIXED_ADAPT;
}

/* A decimal integer 1..2^20 (no sign, no blanks), or -1. */
static long count_of(const char *text)
{
    char *end = NULL;
    long v = 0;
    if (text && *text >= '0' && *text <= '9') {
        errno = 0;
        v = strtol(text, &end, 10);
        if (errno || *end) v = 0;
    }
    return v >= 1 && v <= MAX_COUNT ? v : -1;
}

int pt_plan_request_set(pt_plan_request *r, const pt_plan_limits *lim, const char *key, const char *what,
                        const char *text)
{
    if (!r || !key) return pt_fail(PT_EINVAL, "no request or key given");
    if (!what) what = key;
    if (!text) text = "";
    pt_plan_request q = *r; /* committed only when the value parses */
    pt_plan *p = &q.plan;
    unsigned bit = 0;
    if (!strcmp(key, "mode")) {
        pt_mode m;
        if (pt_mode_parse(text, &m) < 0) return pt_fail(PT_EINVAL, "%s: %s", what, pt_errmsg());
        if (lim && m != PT_MODE_OFF && !(lim->modes & (1u << m)))
            return pt_fail(PT_EINVAL, "%s=%s is not allowed on this cluster (allowed_modes in ptrain.conf)", what, text);
        p->mode = m;
        bit = PT_PIN_MODE;
    } else if (!strcmp(key, "tp") || !strcmp(key, "tp-depth") || !strcmp(key, "sp") || !strcmp(key, "pp") ||
               !strcmp(key, "microbatches") || !strcmp(key, "virtual-stages")) {
        long v = count_of(text);
        if (v < 0)
            return pt_fail(PT_EINVAL, "%s='%s' is invalid (valid: an integer 1..%d that divides the tasks on every node)",
                           what, text, MAX_COUNT);
        if (!strcmp(key, "tp")) {
            if (lim && v > lim->max_tp) return pt_fail(PT_EINVAL, "%s=%ld exceeds this cluster's max_tp=%d", what, v, lim->max_tp);
            p->tp = (int)v, bit = PT_PIN_TP;
        } else if (!strcmp(key, "tp-depth")) {
            p->tp_depth = (int)v, bit = PT_PIN_TP_DEPTH;
        } else if (!strcmp(key, "sp")) {
            p->sp = (int)v, bit = PT_PIN_SP;
        } else if (!strcmp(key, "pp")) {
            if (lim && v > lim->max_pp)
                return pt_fail(PT_EINVAL, "%s=%ld exceeds this cluster's max_pp=%d (valid: 1..%d)", what, v, lim->max_pp,
                               lim->max_pp);
            p->pp = (int)v, bit = PT_PIN_PP;
        } else if (!strcmp(key, "microbatches")) {
            p->microbatches = (int)v, bit = PT_PIN_MICROBATCHES;
        } else {
            if (v > PT_VIRTUAL_STAGES_MAX)
                return pt_fail(PT_EINVAL, "%s=%ld is invalid (valid: 1..%d model chunks per pipeline rank)", what, v,
                               PT_VIRTUAL_STAGES_MAX);
            p->virtual_stages = (int)v, bit = PT_PIN_VIRTUAL_STAGES;
        }
    } else if (!strcmp(key, "zero")) {
        if (!(text[0] >= '0' && text[0] <= '3' && text[1] == '\0'))
            return pt_fail(PT_EINVAL, "%s='%s' is invalid (valid ZeRO stages: 0, 1, 2, 3)", what, text);
        int z = text[0] - '0';
        if (lim && z > lim->max_zero)
            return pt_fail(PT_EINVAL, "%s=%d exceeds this cluster's max_zero=%d (valid: 0..%d)", what, z, lim->max_zero,
                           lim->max_zero);
        p->zero = z, bit = PT_PIN_ZERO;
    } else if (!strcmp(key, "schedule")) {
        int sc;
        if (pt_schedule_parse(what, text, &sc) < 0) return -1;
        if (lim && !(lim->schedules & (1u << sc)))
            return pt_fail(PT_EINVAL, "%s=%s is not allowed on this cluster (allowed_schedules in ptrain.conf)", what,
                           text);
        p->schedule = sc, bit = PT_PIN_SCHEDULE;
    } else if (!strcmp(key, "recompute")) {
        if (pt_recompute_parse(what, text, &p->recompute) < 0) return -1;
        bit = PT_PIN_RECOMPUTE;
    } else if (!strcmp(key, "precision")) {
        int pr;
        if (pt_precision_parse(what, text, &pr) < 0) return -1;
        if (lim && lim->precisions && !(lim->precisions & (1u << pr)))
            return pt_fail(PT_EINVAL, "%s=%s is not allowed on this cluster (allowed_precisions in ptrain.conf)", what,
                           text);
        p->precision = pr, bit = PT_PIN_PRECISION;
    } else if (!strcmp(key, "pp-split")) {
        if (pt_plan_split_parse(what, text, p) < 0) return -1;
        bit = PT_PIN_SPLIT;
    } else if (!strcmp(key, "rank-order")) {
        if (pt_plan_order_parse(text, p->rank_order) < 0) return pt_fail(PT_EINVAL, "%s: %s", what, pt_errmsg());
        bit = PT_PIN_RANK_ORDER;
    } else if (!strcmp(key, "tp-order")) {
        if (pt_plan_tp_order_parse(what, text, p->tp_order) < 0) return -1;
        bit = PT_PIN_TP_ORDER;
    } else if (!strcmp(key, "model")) {
        if (strlen(text) > 63)
            return pt_fail(PT_EINVAL, "%s is longer than 63 bytes (valid: a preset %s or L,H,C,T,V)", what,
                           pt_model_preset_names());
        if (pt_model_shape_parse(what, text, &q.model) < 0) return -1;
        snprintf(q.model_name, sizeof q.model_name, "%s", text);
        bit = PT_PIN_MODEL;
    } else if (!strcmp(key, "batch")) {
        long v = count_of(text);
        if (v < 0)
            return pt_fail(PT_EINVAL, "%s='%s' is invalid (valid: the global batch in sequences per step, an integer "
                           "1..%d)", what, text, MAX_COUNT);
        q.global_batch = (int)v, bit = PT_PIN_BATCH;
    } else {
        return pt_fail(PT_EINVAL, "unknown request key '%s' (valid: %s)", key, pt_plan_request_keys());
    }
    q.pinned |= bit;
    *r = q;
    return 0;
}

int pt_plan_getenv(void *arg, const char *name, char *buf, int len)
{
    (void)arg;
    const char *v = getenv(name);
    if (!v || !*v) return 0;
    if (strlen(v) >= (size_t)len) return -1;
    snprintf(buf, (size_t)len, "%s", v);
    return 1;
}

int pt_plan_request_env(pt_plan_request *r, const pt_plan_limits *lim, pt_plan_getenv_fn get, void *arg)
{
    static const struct {
        const char *key, *var;
        unsigned bit;
    } vars[] = {
        {"mode", "PTRAIN_MODE", PT_PIN_MODE},
        {"tp", "PTRAIN_TP", PT_PIN_TP},
        {"tp-depth", "PTRAIN_TP_DEPTH", PT_PIN_TP_DEPTH},
        {"sp", "PTRAIN_SP", PT_PIN_SP},
        {"model", "PTRAIN_MODEL", PT_PIN_MODEL},
        {"batch", "PTRAIN_BATCH", PT_PIN_BATCH},
        {"pp", "PTRAIN_PP", PT_PIN_PP},
        {"microbatches", "PTRAIN_MICROBATCHES", PT_PIN_MICROBATCHES},
        {"schedule", "PTRAIN_SCHEDULE", PT_PIN_SCHEDULE},
        {"virtual-stages", "PTRAIN_VIRTUAL_STAGES", PT_PIN_VIRTUAL_STAGES},
        {"pp-split", "PTRAIN_PP_SPLIT", PT_PIN_SPLIT},
        {"zero", "PTRAIN_ZERO", PT_PIN_ZERO},
        {"recompute", "PTRAIN_RECOMPUTE", PT_PIN_RECOMPUTE}, /* or its old name, PTRAIN_CKPT_ACT */
        {"precision", "PTRAIN_PRECISION", PT_PIN_PRECISION},
        {"rank-order", "PTRAIN_RANK_ORDER", PT_PIN_RANK_ORDER},
        {"tp-order", "PTRAIN_TP_ORDER", PT_PIN_TP_ORDER},
    };
    if (!r || !get) return pt_fail(PT_EINVAL, "no request or environment given");
    pt_plan_request q = *r;
    char buf[256], old[256];
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        if (q.pinned & vars[i].bit) continue; /* a flag or option given before wins */
        const char *var = vars[i].var, *text = buf;
        int g = get(arg, var, buf, (int)sizeof buf), go = 0;
        if (vars[i].bit == PT_PIN_RECOMPUTE && g >= 0) {
            go = get(arg, "PTRAIN_CKPT_ACT", old, (int)sizeof old);
            if (go < 0) var = "PTRAIN_CKPT_ACT", g = -1;
        }
        if (g < 0)
            return pt_fail(PT_EINVAL, "%s in the job environment is longer than %d bytes; it is not a valid value "
                           "(valid: see ptrain-env(7))", var, (int)sizeof buf - 1);
        if (go > 0 && pt_plan_recompute_var(g ? buf : NULL, old, &var, &text) < 0) return -1;
        if (g == 0 && go == 0) continue;
        if (pt_plan_request_set(&q, lim, vars[i].key, var, text) < 0) return -1;
    }
    *r = q;
    return 0;
}

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
