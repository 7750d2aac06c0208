/* SPDX-License-Identifier: MIT */
/* The plan environment: the contract between the SPANK plugin (which
 * exports a plan as PTRAIN_* variables) and ptrain-run (which reads them),
 * the text forms of its values (schedule, recompute, stage split, rank
 * order) and the one-line summary (PTRAIN_PLAN).  See plan.h and
 * ptrain-env(7).  libc only. */
#include "contract/plan_priv.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const sched_names[] = {"1f1b", "gpipe", "interleaved"};
static const char *const recompute_names[] = {"none", "block", "attention"};
static const char *const precision_names[] = {"fp32", "bf16"};

const char *pt_schedule_name(int s)
{
    return s >= 0 && s < N_SCHEDS ? sched_names[s] : "?";
}

int pt_schedule_parse(const char *what, const char *s, int *out)
{
    for (int i = 0; s && i < N_SCHEDS; i++)
        if (strcmp(s, sched_names[i]) == 0) {
            if (out) *out = i;
            return 0;
        }
    return pt_fail(PT_EINVAL, "invalid %s '%s' (valid: gpipe, 1f1b, interleaved)", what,
                   s ? s : "");
}

const char *pt_recompute_name(int r)
{
    return r >= 0 && r < N_RECOMPUTE ? recompute_names[r] : "?";
}

int pt_recompute_parse(const char *what, const char *s, int *out)
{
    int v = -1;
    if (s && strcmp(s, "0") == 0) v = PT_RECOMPUTE_NONE; /* PTRAIN_CKPT_ACT's values in earlier versions */
    else if (s && strcmp(s, "1") == 0) v = PT_RECOMPUTE_BLOCK;
    for (int i = 0; s && v < 0 && i < N_RECOMPUTE; i++)
        if (strcmp(s, recompute_names[i]) == 0) v = i;
    if (v < 0)
        return pt_fail(PT_EINVAL, "invalid %s '%s' (valid: none, block, attention; 0 = none, "
                       "1 = block)", what, s ? s : "");
    if (out) *out = v;
    return 0;
}

int pt_plan_recompute_var(const char *now, const char *old, const char **name, const char **text)
{
    *name = now ? "PTRAIN_RECOMPUTE" : old ? "PTRAIN_CKPT_ACT" : NULL;
    *text = now ? now : old;
    if (!now || !old) return 0;
    int a, b;
    if (pt_recompute_parse("PTRAIN_RECOMPUTE", now, &a) < 0 ||
        pt_recompute_parse("PTRAIN_CKPT_ACT", old, &b) < 0)
        return -1;
    if (a != b)
        return pt_fail(PT_EINVAL, "PTRAIN_RECOMPUTE=%s and PTRAIN_CKPT_ACT=%s differ (PTRAIN_CKPT_ACT is the old "
                       "name of PTRAIN_RECOMPUTE: set one, or both to the same mode)", now, old);
    return 0;
}

const char *pt_precision_name(int p)
{
    return p >= 0 && p < N_PRECISIONS ? precision_names[p] : "?";
}

int pt_precision_parse(const char *what, const char *s, int *out)
{
    for (int i = 0; s && i < N_PRECISIONS; i++)
        if (strcmp(s, precision_names[i]) == 0) {
            if (out) *out = i;
            return 0;
        }
    return pt_fail(PT_EINVAL, "invalid %s '%s' (valid: fp32, bf16)", what, s ? s : "");
}

/* Most blocks one stage of an explicit split may name. */
#define SPLIT_ENTRY_MAX 4096

int pt_plan_split_parse(const char *what, const char *s, pt_plan *p)
{
    if (!s || !p) return pt_fail(PT_EINVAL, "no %s given", what);
    if (*s == '\0' || strcmp(s, "even") == 0) {
        p->pp_split_n = 0;
        return 0;
    }
    int v[PT_PP_SPLIT_MAX], n = 0;
    const char *q = s;
    for (;;) {
        if (n == PT_PP_SPLIT_MAX)
            return pt_fail(PT_EINVAL, "invalid %s '%.40s...': more than %d stages (valid: at most "
                           "%d comma-separated block counts, or even)", what, s,
                           PT_PP_SPLIT_MAX, PT_PP_SPLIT_MAX);
        long x = 0;
        int digits = 0;
        while (isdigit((unsigned char)*q) && x <= SPLIT_ENTRY_MAX) {
            x = x * 10 + (*q++ - '0');
            digits++;
        }
        if (!digits || x < 1 || x > SPLIT_ENTRY_MAX || (*q && *q != ','))
            return pt_fail(PT_EINVAL, "invalid %s '%s' (valid: comma-separated block counts "
                           "1..%d per stage such as 3,3,2,2, or even)", what, s,
                           SPLIT_ENTRY_MAX);
        v[n++] = (int)x;
        if (!*q) break;
        q++;
    }
    memcpy(p->pp_split, v, sizeof(int) * (size_t)n);
    p->pp_split_n = n;
    return 0;
}

void pt_plan_split_format(const pt_plan *p, char *buf, size_t n)
{
    if (!buf || !n) return;
    if (p->pp_split_n <= 0 || p->pp_split_n > PT_PP_SPLIT_MAX) {
        snprintf(buf, n, "even");
        return;
    }
    size_t off = 0;
    buf[0] = '\0';
    for (int i = 0; i < p->pp_split_n; i++) {
        char item[16];
        snprintf(item, sizeof item, "%s%d", i ? "," : "", p->pp_split[i]);
        if (off + strlen(item) + 4 >= n) {
            if (off + 4 <= n) snprintf(buf + off, n - off, "...");
            return;
        }
        off += (size_t)snprintf(buf + off, n - off, "%s", item);
    }
}

void pt_plan_default(pt_plan *p)
{
    memset(p, 0, sizeof *p);
    p->mode = PT_MODE_1D;
    p->dp = p->pp = p->tp = p->tp_depth = p->sp = 1;
    p->zero = 0;
    p->microbatches = 1;
    p->recompute = PT_RECOMPUTE_NONE;
    p->schedule = PT_SCHED_1F1B;
    p->virtual_stages = 1;
    p->pp_split_n = 0;
    p->precision = PT_PREC_FP32;
    memcpy(p->rank_order, "DPT", 4);
    memcpy(p->tp_order, "012", 4);
}

int pt_plan_tp_order_parse(const char *what, const char *s, char out[4])
{
    if (s && strlen(s) == 3 && pt_plan_i_tp_order_is_perm(s)) {
        memcpy(out, s, 4);
        return 0;
    }
    return pt_fail(PT_EINVAL, "invalid %s '%s' (valid: a permutation of 0, 1, 2 such as 012 or 021)", what,
                   s ? s : "");
}

/* Parse a placement: a permutation of D, P, T (any case), or the
 * SageMaker names "cluster" (= DPT) and "spread" (= TPD). */
int pt_plan_order_parse(const char *s, char out[4])
{
    char up[4];
    if (strcmp(s, "cluster") == 0) s = "DPT";
    else if (strcmp(s, "spread") == 0) s = "TPD";
    size_t n = strlen(s);
    if (n == 3) {
        for (size_t i = 0; i < 3; i++) up[i] = (char)toupper((unsigned char)s[i]);
        up[3] = '\0';
        if (pt_plan_i_order_is_perm(up)) {
            memcpy(out, up, 4);
            return 0;
        }
    }
    return pt_fail(PT_EINVAL,
                     "invalid rank order '%s' (valid: a permutation of D, P, T such as DPT, "
                     "or cluster, spread)", s);
}


/* Strict decimal int: the whole string, no sign games, within [lo, hi]. */
static int parse_int(const char *name, const char *s, int lo, int hi, int *out)
{
    char *end;
    errno = 0;
    if (!*s || isspace((unsigned char)*s)) goto bad;
    long v = strtol(s, &end, 10);
    if (errno || *end != '\0' || v < lo || v > hi) goto bad;
    *out = (int)v;
    return 0;
bad:
    return pt_fail(PT_EINVAL, "invalid %s='%s' (valid: an integer %d..%d)", name, s, lo, hi);
}

int pt_plan_from_env(pt_plan *p)
{
    static const struct { const char *var; size_t off; int lo, hi; } ints[] = {
        {"PTRAIN_DP", offsetof(pt_plan, dp), 1, SIZE_MAX_VALUE},
        {"PTRAIN_PP", offsetof(pt_plan, pp), 1, SIZE_MAX_VALUE},
        {"PTRAIN_TP", offsetof(pt_plan, tp), 1, SIZE_MAX_VALUE},
        {"PTRAIN_TP_DEPTH", offsetof(pt_plan, tp_depth), 1, SIZE_MAX_VALUE},
        {"PTRAIN_SP", offsetof(pt_plan, sp), 1, SIZE_MAX_VALUE},
        {"PTRAIN_ZERO", offsetof(pt_plan, zero), 0, 3},
        {"PTRAIN_MICROBATCHES", offsetof(pt_plan, microbatches), 1, SIZE_MAX_VALUE},
        {"PTRAIN_VIRTUAL_STAGES", offsetof(pt_plan, virtual_stages), 1, PT_VIRTUAL_STAGES_MAX},
    };
    if (!p) return pt_fail(PT_EINVAL, "no plan given");
    pt_plan tmp = *p; /* only commit when everything parsed */
    int found = 0;
    const char *s = getenv("PTRAIN_MODE");
    if (s) {
        found = 1;
        if (pt_mode_parse(s, &tmp.mode) < 0) {
            return pt_fail(PT_EINVAL, "PTRAIN_MODE: %s", pt_errmsg());
        }
    }
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        s = getenv(ints[i].var);
        if (!s) continue;
        found = 1;
        if (parse_int(ints[i].var, s, ints[i].lo, ints[i].hi,
                      (int *)((char *)&tmp + ints[i].off)) < 0)
            return -1;
    }
    s = getenv("PTRAIN_SCHEDULE");
    if (s) {
        found = 1;
        if (pt_schedule_parse("PTRAIN_SCHEDULE", s, &tmp.schedule) < 0) return -1;
    }
    const char *rc_name;
    if (pt_plan_recompute_var(getenv("PTRAIN_RECOMPUTE"), getenv("PTRAIN_CKPT_ACT"), &rc_name, &s) < 0)
        return -1;
    if (s) {
        found = 1;
        if (pt_recompute_parse(rc_name, s, &tmp.recompute) < 0) return -1;
    }
    s = getenv("PTRAIN_PRECISION");
    if (s) {
        found = 1;
        if (pt_precision_parse("PTRAIN_PRECISION", s, &tmp.precision) < 0) return -1;
    }
    s = getenv("PTRAIN_PP_SPLIT");
    if (s) {
        found = 1;
        if (pt_plan_split_parse("PTRAIN_PP_SPLIT", s, &tmp) < 0) return -1;
    }
    s = getenv("PTRAIN_RANK_ORDER");
    if (s) {
        found = 1;
        if (pt_plan_order_parse(s, tmp.rank_order) < 0) {
            return pt_fail(PT_EINVAL, "PTRAIN_RANK_ORDER: %s", pt_errmsg());
        }
    }
    s = getenv("PTRAIN_TP_ORDER");
    if (s) {
        found = 1;
        if (pt_plan_tp_order_parse("PTRAIN_TP_ORDER", s, tmp.tp_order) < 0) return -1;
    }
    *p = tmp;
    return found;
}

int pt_plan_export(const pt_plan *p, int (*set)(const char *name, const char *value, void *arg),
                   void *arg)
{
    char v[32];
    int rc;
#define EXPORT_INT(name, field)                                                                    \
    do {                                                                                           \
        snprintf(v, sizeof v, "%d", p->field);                                                     \
        if ((rc = set(name, v, arg)) != 0) return rc;                                              \
    } while (0)
    if ((rc = set("PTRAIN_MODE", pt_mode_name(p->mode), arg)) != 0) return rc;
    EXPORT_INT("PTRAIN_DP", dp);
    EXPORT_INT("PTRAIN_PP", pp);
    EXPORT_INT("PTRAIN_TP", tp);
    EXPORT_INT("PTRAIN_TP_DEPTH", tp_depth);
    EXPORT_INT("PTRAIN_SP", sp);
    EXPORT_INT("PTRAIN_ZERO", zero);
    EXPORT_INT("PTRAIN_MICROBATCHES", microbatches);
    if ((rc = set("PTRAIN_SCHEDULE", pt_schedule_name(p->schedule), arg)) != 0) return rc;
    EXPORT_INT("PTRAIN_VIRTUAL_STAGES", virtual_stages);
    char split[PT_PP_SPLIT_MAX * 6];
    pt_plan_split_format(p, split, sizeof split);
    if ((rc = set("PTRAIN_PP_SPLIT", split, arg)) != 0) return rc;
    if ((rc = set("PTRAIN_RECOMPUTE", pt_recompute_name(p->recompute), arg)) != 0) return rc;
    if ((rc = set("PTRAIN_PRECISION", pt_precision_name(p->precision), arg)) != 0) return rc;
#undef EXPORT_INT
    char order[4];
    memcpy(order, p->rank_order, 3);
    order[3] = '\0';
    if ((rc = set("PTRAIN_RANK_ORDER", order, arg)) != 0) return rc;
    memcpy(order, p->tp_order, 3);
    if ((rc = set("PTRAIN_TP_ORDER", order, arg)) != 0) return rc;
    char line[640];
    pt_plan_summary(p, line, sizeof line);
    return set("PTRAIN_PLAN", line, arg);
}

/* Append printf text to buf at *k, never past n. */
static void append(char *buf, size_t n, int *k, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void append(char *buf, size_t n, int *k, const char *fmt, ...)
{
    if (*k < 0 || (size_t)*k >= n) return;
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(buf + *k, n - (size_t)*k, fmt, ap);
    va_end(ap);
    *k = w < 0 ? -1 : *k + w;
}

void pt_plan_summary(const pt_plan *p, char *buf, size_t n)
{
    if (!buf || !n) return;
    char order[4];
    memcpy(order, p->rank_order, 3);
    order[3] = '\0';
    int k = 0;
    buf[0] = '\0';
    append(buf, n, &k, "mode=%s dp=%d tp=%d pp=%d sp=%d zero=%d order=%s", pt_mode_name(p->mode),
           p->dp, p->tp, p->pp, p->sp, p->zero, order);
    /* Non-default extras only, so the common line stays short. */
    if (p->tp_depth != 1) append(buf, n, &k, " tp_depth=%d", p->tp_depth);
    if (memcmp(p->tp_order, "012", 4) != 0) append(buf, n, &k, " tp_order=%.3s", p->tp_order);
    if (p->microbatches != 1) append(buf, n, &k, " microbatches=%d", p->microbatches);
    if (p->pp > 1 || p->schedule != PT_SCHED_1F1B)
        append(buf, n, &k, " schedule=%s", pt_schedule_name(p->schedule));
    if (p->virtual_stages != 1) append(buf, n, &k, " virtual_stages=%d", p->virtual_stages);
    if (p->pp_split_n) {
        char split[PT_PP_SPLIT_MAX * 6];
        pt_plan_split_format(p, split, sizeof split);
        append(buf, n, &k, " split=%s", split);
    }
    if (p->recompute) append(buf, n, &k, " recompute=%s", pt_recompute_name(p->recompute));
    if (p->precision != PT_PREC_FP32) append(buf, n, &k, " precision=%s", pt_precision_name(p->precision));
}
