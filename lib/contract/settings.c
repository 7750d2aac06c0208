/* SPDX-License-Identifier: MIT */
/* The plan settings' table and the request built over it (settings.h). */
#include "contract/settings.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_COUNT (1 << 20)

void pt_plan_request_init(pt_plan_request *r, pt_mode default_mode)
{
    memset(r, 0, sizeof *r);
    pt_plan_default(&r->plan);
    r->plan.mode = default_mode;
    r->plan.dp = r->plan.pp = r->plan.tp = r->plan.tp_depth = r->plan.sp = 0;
    r->plan.microbatches = r->plan.virtual_stages = 0;
    r->plan.rank_order[0] = '\0'; /* the search chooses the placement */
    r->plan.tp_order[0] = '\0';
    snprintf(r->model_name, sizeof r->model_name, "%s", PT_DEFAULT_MODEL);
    pt_model_preset(PT_DEFAULT_MODEL, &r->model);
    r->global_batch = PT_DEFAULT_BATCH;
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

/* ---- the parsers, one per kind of row ---------------------------------- */

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

/* a group size or count: 1..2^20 */
static int count_arg(const char *what, const char *text, long *v)
{
    *v = count_of(text);
    if (*v < 0)
        return pt_fail(PT_EINVAL, "%s='%s' is invalid (valid: an integer 1..%d that divides the tasks on every node)",
                       what, text, MAX_COUNT);
    return 0;
}

static int set_mode(const pt_setting *s, pt_plan_request *q, const pt_plan_limits *lim, const char *what,
                    const char *text)
{
    (void)s;
    pt_mode m;
    if (pt_mode_parse(text, &m) < 0) return pt_fail(PT_EINVAL, "%s: %s", what, pt_errmsg());
    if (lim && m != PT_MODE_OFF && !(lim->modes & (1u << m)))
        return pt_fail(PT_EINVAL, "%s=%s is not allowed on this cluster (allowed_modes in ptrain.conf)", what, text);
    q->plan.mode = m;
    return 0;
}

static int set_tp(const pt_setting *s, pt_plan_request *q, const pt_plan_limits *lim, const char *what,
                  const char *text)
{
    (void)s;
    long v;
    if (count_arg(what, text, &v) < 0) return -1;
    if (lim && v > lim->max_tp) return pt_fail(PT_EINVAL, "%s=%ld exceeds this cluster's max_tp=%d", what, v, lim->max_tp);
    q->plan.tp = (int)v;
    return 0;
}

static int set_pp(const pt_setting *s, pt_plan_request *q, const pt_plan_limits *lim, const char *what,
                  const char *text)
{
    (void)s;
    long v;
    if (count_arg(what, text, &v) < 0) return -1;
    if (lim && v > lim->max_pp)
        return pt_fail(PT_EINVAL, "%s=%ld exceeds this cluster's max_pp=%d (valid: 1..%d)", what, v, lim->max_pp,
                       lim->max_pp);
    q->plan.pp = (int)v;
    return 0;
}

static int set_virtual_stages(const pt_setting *s, pt_plan_request *q, const pt_plan_limits *lim, const char *what,
                              const char *text)
{
    (void)s, (void)lim;
    long v;
    if (count_arg(what, text, &v) < 0) return -1;
    if (v > PT_VIRTUAL_STAGES_MAX)
        return pt_fail(PT_EINVAL, "%s=%ld is invalid (valid: 1..%d model chunks per pipeline rank)", what, v,
                       PT_VIRTUAL_STAGES_MAX);
    q->plan.virtual_stages = (int)v;
    return 0;
}

/* tp-depth, sp, microbatches: a count into the pt_plan field the row's pin names */
static int set_count(const pt_setting *s, pt_plan_request *q, const pt_plan_limits *lim, const char *what,
                     const char *text)
{
    (void)lim;
    long v;
    if (count_arg(what, text, &v) < 0) return -1;
    int *f = s->pin == PT_PIN_TP_DEPTH ? &q->plan.tp_depth : s->pin == PT_PIN_SP ? &q->plan.sp : &q->plan.microbatches;
    *f = (int)v;
    return 0;
}

static int set_zero(const pt_setting *s, pt_plan_request *q, const pt_plan_limits *lim, const char *what,
                    const char *text)
{
    (void)s;
    if (!(text[0] >= '0' && text[0] <= '3' && text[1] == '\0'))
        return pt_fail(PT_EINVAL, "%s='%s' is invalid (valid ZeRO stages: 0, 1, 2, 3)", what, text);
    int z = text[0] - '0';
    if (lim && z > lim->max_zero)
        return pt_fail(PT_EINVAL, "%s=%d exceeds this cluster's max_zero=%d (valid: 0..%d)", what, z, lim->max_zero,
                       lim->max_zero);
    q->plan.zero = z;
    return 0;
}

static int set_schedule(const pt_setting *s, pt_plan_request *q, const pt_plan_limits *lim, const char *what,
                        const char *text)
{
    (void)s;
    int sc;
    if (pt_schedule_parse(what, text, &sc) < 0) return -1;
    if (lim && !(lim->schedules & (1u << sc)))
        return pt_fail(PT_EINVAL, "%s=%s is not allowed on this cluster (allowed_schedules in ptrain.conf)", what, text);
    q->plan.schedule = sc;
    return 0;
}

static int set_recompute(const pt_setting *s, pt_plan_request *q, const pt_plan_limits *lim, const char *what,
                         const char *text)
{
    (void)s, (void)lim;
    return pt_recompute_parse(what, text, &q->plan.recompute);
}

static int set_precision(const pt_setting *s, pt_plan_request *q, const pt_plan_limits *lim, const char *what,
                         const char *text)
{
    (void)s;
    int pr;
    if (pt_precision_parse(what, text, &pr) < 0) return -1;
    if (lim && lim->precisions && !(lim->precisions & (1u << pr)))
        return pt_fail(PT_EINVAL, "%s=%s is not allowed on this cluster (allowed_precisions in ptrain.conf)", what,
                       text);
    q->plan.precision = pr;
    return 0;
}

static int set_split(const pt_setting *s, pt_plan_request *q, const pt_plan_limits *lim, const char *what,
                     const char *text)
{
    (void)s, (void)lim;
    return pt_plan_split_parse(what, text, &q->plan);
}

static int set_rank_order(const pt_setting *s, pt_plan_request *q, const pt_plan_limits *lim, const char *what,
                          const char *text)
{
    (void)s, (void)lim;
    if (pt_plan_order_parse(text, q->plan.rank_order) < 0) return pt_fail(PT_EINVAL, "%s: %s", what, pt_errmsg());
    return 0;
}

static int set_tp_order(const pt_setting *s, pt_plan_request *q, const pt_plan_limits *lim, const char *what,
                        const char *text)
{
    (void)s, (void)lim;
    return pt_plan_tp_order_parse(what, text, q->plan.tp_order);
}

static int set_model(const pt_setting *s, pt_plan_request *q, const pt_plan_limits *lim, const char *what,
                     const char *text)
{
    (void)s, (void)lim;
    if (strlen(text) > 63)
        return pt_fail(PT_EINVAL, "%s is longer than 63 bytes (valid: a preset %s or L,H,C,T,V)", what,
                       pt_model_preset_names());
    if (pt_model_shape_parse(what, text, &q->model) < 0) return -1;
    snprintf(q->model_name, sizeof q->model_name, "%s", text);
    return 0;
}

static int set_batch(const pt_setting *s, pt_plan_request *q, const pt_plan_limits *lim, const char *what,
                     const char *text)
{
    (void)s, (void)lim;
    long v = count_of(text);
    if (v < 0)
        return pt_fail(PT_EINVAL, "%s='%s' is invalid (valid: the global batch in sequences per step, an integer "
                       "1..%d)", what, text, MAX_COUNT);
    q->global_batch = (int)v;
    return 0;
}

/* ---- the table ---------------------------------------------------------- */

#define ALL (PT_SETTING_PLUGIN | PT_SETTING_RUN | PT_SETTING_PLAN)
#define TOOLS (PT_SETTING_RUN | PT_SETTING_PLAN)
static const pt_setting rows[] = {
    {"mode", "PTRAIN_MODE", PT_PIN_MODE, ALL, PT_MODE_NAMES(", "), "1d",
     "MODE",
     "ptrain: parallel layout to plan: auto, " PT_LAYOUT_MODE_NAMES(", ") ", off. "
     "Default: $PTRAIN_MODE, else the cluster's default_mode.",
     set_mode,
     "  --mode " PT_SEARCH_MODE_NAMES("|") "|off  tensor-parallel layout (off: as 1d; default 1d);\n"
     "                       auto plans every size not given from the job's nodes, the\n"
     "                       node model, --model and --batch (as ptrain-plan)\n",
     0, 0},
    {"tp", "PTRAIN_TP", PT_PIN_TP, ALL, "the tensor-parallel group size, an integer 1..1048576", "4",
     "N",
     "ptrain: pin the tensor-parallel size (must divide the tasks on every node; "
     "2d: q*q, 2.5d: depth*q*q, 3d: l*l*l). Default: $PTRAIN_TP, else chosen by the planner.",
     set_tp,
     "  --dp N --tp N --tp-depth D --sp N --pp N   the plan's group sizes\n"
     "                       (dp = world / (pp * tp * sp) when not given)\n",
     1, MAX_COUNT},
    {"tp-depth", "PTRAIN_TP_DEPTH", PT_PIN_TP_DEPTH, ALL, "2.5d's depth d (tp = d q^2), an integer 1..1048576", "2",
     "D",
     "ptrain: 2.5d only: pin the depth d of the d x q x q tensor grid. "
     "Default: $PTRAIN_TP_DEPTH, else chosen by the planner.",
     set_count,
     "",
     1, MAX_COUNT},
    {"sp", "PTRAIN_SP", PT_PIN_SP, ALL, "the sequence-parallel group size, an integer 1..1048576", "2",
     "N",
     "ptrain: sequence-parallel size (must divide the tasks on every node; implies tp=1). "
     "Default: $PTRAIN_SP, else 1.",
     set_count,
     "",
     1, MAX_COUNT},
    {"pp", "PTRAIN_PP", PT_PIN_PP, ALL, "the pipeline stages, an integer 1..1048576", "2",
     "N",
     "ptrain: pipeline-parallel size (divides the task count; <= the cluster's max_pp). "
     "Default: $PTRAIN_PP, else 1.",
     set_pp,
     "",
     1, MAX_COUNT},
    {"microbatches", "PTRAIN_MICROBATCHES", PT_PIN_MICROBATCHES, ALL, "microbatches per step, an integer 1..1048576",
     "8",
     "M",
     "ptrain: microbatches per step (divides each data-parallel rank's batch). "
     "Default: $PTRAIN_MICROBATCHES, else 1.",
     set_count,
     "  --microbatches M     microbatches per step: each dp rank's batch/dp sequences in M\n"
     "                       pieces (default PTRAIN_MICROBATCHES, else 1; --micro-batches M,\n"
     "                       the spelling of earlier versions, is the same)\n",
     1, MAX_COUNT},
    {"schedule", "PTRAIN_SCHEDULE", PT_PIN_SCHEDULE, ALL, "gpipe, 1f1b, interleaved", "interleaved",
     "S",
     "ptrain: pipeline schedule: gpipe, 1f1b, interleaved. "
     "Default: $PTRAIN_SCHEDULE, else the cluster's default_schedule.",
     set_schedule,
     "  --schedule gpipe|1f1b|interleaved   pipeline schedule (default 1f1b)\n",
     0, 0},
    {"virtual-stages", "PTRAIN_VIRTUAL_STAGES", PT_PIN_VIRTUAL_STAGES, ALL,
     "model chunks per pipeline rank (interleaved), an integer 1..16", "2",
     "V",
     "ptrain: model chunks per pipeline rank (interleaved only). "
     "Default: $PTRAIN_VIRTUAL_STAGES, else 1.",
     set_virtual_stages,
     "  --virtual-stages V   model chunks per pipeline rank, interleaved only (default 1)\n",
     1, PT_VIRTUAL_STAGES_MAX},
    {"pp-split", "PTRAIN_PP_SPLIT", PT_PIN_SPLIT, ALL, "blocks per stage, comma-separated, or even", "3,1",
     "N,N,...",
     "ptrain: blocks per pipeline stage, pp*virtual_stages entries, or even. "
     "Default: $PTRAIN_PP_SPLIT, else even.",
     set_split,
     "  --pp-split N,N,...|even  blocks per pipeline stage (default even)\n",
     0, 0},
    {"zero", "PTRAIN_ZERO", PT_PIN_ZERO, ALL, "the ZeRO stage, 0, 1, 2 or 3", "2",
     "K",
     "ptrain: ZeRO stage 0-3 over the data-parallel ranks. "
     "Default: $PTRAIN_ZERO, else the cluster's default_zero.",
     set_zero,
     "  --zero 0|1|2|3       ZeRO stage over the dp group (default PTRAIN_ZERO, else 0)\n",
     0, 3},
    {"recompute", "PTRAIN_RECOMPUTE", PT_PIN_RECOMPUTE, ALL, "none, block, attention", "block",
     "R",
     "ptrain: activation recomputation: none, block, attention. "
     "Default: $PTRAIN_RECOMPUTE, else the cluster's default_recompute.",
     set_recompute,
     "  --recompute none|block|attention   activation recomputation (default\n"
     "                       PTRAIN_RECOMPUTE, else none)\n",
     0, 0},
    {"precision", "PTRAIN_PRECISION", PT_PIN_PRECISION, ALL, "fp32, bf16", "bf16",
     "P",
     "ptrain: training precision: fp32, bf16 (bf16 activations and weight copies, fp32 master weights, "
     "gradients and AdamW). Default: $PTRAIN_PRECISION, else the cluster's default_precision.",
     set_precision,
     "  --precision fp32|bf16   bf16: bf16 activations and weight copies, fp32 master\n"
     "                       weights, gradients and AdamW (default PTRAIN_PRECISION, else fp32)\n",
     0, 0},
    {"rank-order", "PTRAIN_RANK_ORDER", PT_PIN_RANK_ORDER, TOOLS,
     "the grid's order of dp, pp, tp: a permutation of D, P, T such as DPT; cluster, spread", "TPD", NULL, NULL, set_rank_order,
     "  --rank-order DPT|cluster|spread   how grid ranks map to groups (a permutation\n"
     "                       of D, P, T, outermost first; default PTRAIN_RANK_ORDER)\n",
     0, 0},
    {"tp-order", "PTRAIN_TP_ORDER", PT_PIN_TP_ORDER, TOOLS,
     "the tp grid's axes slowest first: a permutation of 0, 1, 2 such as 012", "021", NULL, NULL, set_tp_order,
     "  --tp-order 012|021|...  the tp grid's axes inside the T block, outermost first\n"
     "                       (2d: 012 rows, 021 columns on consecutive ranks; default\n"
     "                       PTRAIN_TP_ORDER, else 012; --mode auto chooses it)\n",
     0, 0},
    {"model", "PTRAIN_MODEL", PT_PIN_MODEL, ALL, "a preset or L,H,C,T,V", "small",
     "NAME|L,H,C,T,V",
     "ptrain: the model the plan is made for: a ptrain-run preset (test, tiny, small, "
     "gpt2-124M, llama-test, llama-tiny, llama-small, smollm2-135m, tinyllama-1.1b, "
     "llama3.2-1b, llama3.2-3b, llama3.1-8b), L,H,C,T,V or "
     "llama:L,H,KV,C,I,T,V[,untied][,qkv-bias][,theta=X]; injected as PTRAIN_MODEL. "
     "Default: $PTRAIN_MODEL, else tiny.",
     set_model,
     NULL,
     0, 0},
    {"batch", "PTRAIN_BATCH", PT_PIN_BATCH, ALL, "the global batch in sequences per step, an integer 1..1048576", "16",
     "N",
     "ptrain: global batch in sequences per step the plan is made for; injected as "
     "PTRAIN_BATCH. Default: $PTRAIN_BATCH, else 8.",
     set_batch,
     NULL,
     1, MAX_COUNT},
};
#undef ALL
#undef TOOLS
enum { NROWS = sizeof rows / sizeof rows[0] };

const pt_setting *pt_settings(int *n)
{
    if (n) *n = NROWS;
    return rows;
}

const pt_setting *pt_setting_find(const char *key)
{
    for (int i = 0; key && i < NROWS; i++)
        if (!strcmp(rows[i].key, key)) return &rows[i];
    return NULL;
}

const char *pt_plan_request_keys(void)
{
    static char keys[NROWS * 18];
    if (!keys[0]) {
        size_t k = 0;
        for (int i = 0; i < NROWS && k < sizeof keys; i++)
            k += (size_t)snprintf(keys + k, sizeof keys - k, "%s%s", i ? ", " : "", rows[i].key);
    }
    return keys;
}

/* ---- the request over the table ---------------------------------------- */

int pt_plan_request_set(pt_plan_request *r, const pt_plan_limits *lim, const char *key, const char *what,
                        const char *text)
{
    if (!r || !key) return pt_fail(PT_EINVAL, "no request or key given");
    if (!what) what = key;
    if (!text) text = "";
    const pt_setting *s = pt_setting_find(key);
    if (!s) return pt_fail(PT_EINVAL, "unknown request key '%s' (valid: %s)", key, pt_plan_request_keys());
    pt_plan_request q = *r; /* committed only when the value parses */
    if (s->set(s, &q, lim, what, text) < 0) return -1;
    q.pinned |= s->pin;
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
    if (!r || !get) return pt_fail(PT_EINVAL, "no request or environment given");
    pt_plan_request q = *r;
    char buf[256], old[256];
    for (int i = 0; i < NROWS; i++) {
        if (q.pinned & rows[i].pin) continue; /* a flag or option given before wins */
        const char *var = rows[i].var, *text = buf;
        int g = get(arg, var, buf, (int)sizeof buf), go = 0;
        /* recompute: also its variable's old name, PTRAIN_CKPT_ACT */
        if (rows[i].pin == PT_PIN_RECOMPUTE && g >= 0) {
            go = get(arg, "PTRAIN_CKPT_ACT", old, (int)sizeof old);
            if (go < 0) var = "PTRAIN_CKPT_ACT", g = -1;
        }
        if (g < 0)
            return pt_fail(PT_EINVAL, "%s in the job environment is longer than %d bytes; it is not a valid value "
                           "(valid: see ptrain-env(7))", var, (int)sizeof buf - 1);
        if (go > 0 && pt_plan_recompute_var(g ? buf : NULL, old, &var, &text) < 0) return -1;
        if (g == 0 && go == 0) continue;
        if (pt_plan_request_set(&q, lim, rows[i].key, var, text) < 0) return -1;
    }
    *r = q;
    return 0;
}

void pt_plan_request_overlay(const pt_plan_request *r, pt_plan *p)
{
    const pt_plan *q = &r->plan;
    for (int i = 0; i < NROWS; i++) {
        if (!(r->pinned & rows[i].pin)) continue;
        switch (rows[i].pin) {
        case PT_PIN_MODE: p->mode = q->mode; break;
        case PT_PIN_TP: p->tp = q->tp; break;
        case PT_PIN_TP_DEPTH: p->tp_depth = q->tp_depth; break;
        case PT_PIN_SP: p->sp = q->sp; break;
        case PT_PIN_PP: p->pp = q->pp; break;
        case PT_PIN_MICROBATCHES: p->microbatches = q->microbatches; break;
        case PT_PIN_SCHEDULE: p->schedule = q->schedule; break;
        case PT_PIN_VIRTUAL_STAGES: p->virtual_stages = q->virtual_stages; break;
        case PT_PIN_SPLIT: /* its entries (as pt_plan_split_parse writes them) */
            p->pp_split_n = q->pp_split_n;
            if (q->pp_split_n > 0 && q->pp_split_n <= PT_PP_SPLIT_MAX)
                memcpy(p->pp_split, q->pp_split, sizeof(int) * (size_t)q->pp_split_n);
            break;
        case PT_PIN_ZERO: p->zero = q->zero; break;
        case PT_PIN_RECOMPUTE: p->recompute = q->recompute; break;
        case PT_PIN_PRECISION: p->precision = q->precision; break;
        case PT_PIN_RANK_ORDER: memcpy(p->rank_order, q->rank_order, sizeof p->rank_order); break;
        case PT_PIN_TP_ORDER: memcpy(p->tp_order, q->tp_order, sizeof p->tp_order); break;
        default: break; /* the model and batch: the request's own fields */
        }
    }
}
