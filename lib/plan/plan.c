/* The plan: parsing, validation, environment round trip, automatic
 * planning and rank placement.  See plan.h for the contract and
 * DESIGN.md ("Plan environment", "Process grid and placement").
 *
 * libc only: built once as the convenience library libptrain_plan, linked
 * into libptrain and the SPANK plugin (which runs inside slurmstepd).
 */
#include "plan/plan.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const mode_names[] = {"off", "auto", "1d", "2d", "2.5d", "3d"};
#define N_MODES ((int)(sizeof mode_names / sizeof mode_names[0]))

const char *pt_mode_name(pt_mode m)
{
    if ((int)m < 0 || (int)m >= N_MODES) return "?";
    return mode_names[m];
}

int pt_mode_parse(const char *s, pt_mode *m, pt_error *err)
{
    if (!s) return pt_errprintf(err, "missing mode (valid: off, auto, 1d, 2d, 2.5d, 3d)");
    for (int i = 0; i < N_MODES; i++) {
        if (strcmp(s, mode_names[i]) == 0) {
            if (m) *m = (pt_mode)i;
            return 0;
        }
    }
    return pt_errprintf(err, "invalid mode '%s' (valid: off, auto, 1d, 2d, 2.5d, 3d)", s);
}

static const char *const sched_names[] = {"1f1b", "gpipe", "interleaved"};
#define N_SCHEDS 3
static const char *const recompute_names[] = {"none", "block", "attention"};
#define N_RECOMPUTE 3

const char *pt_schedule_name(int s)
{
    return s >= 0 && s < N_SCHEDS ? sched_names[s] : "?";
}

int pt_schedule_parse(const char *what, const char *s, int *out, pt_error *err)
{
    for (int i = 0; s && i < N_SCHEDS; i++)
        if (strcmp(s, sched_names[i]) == 0) {
            if (out) *out = i;
            return 0;
        }
    return pt_errprintf(err, "invalid %s '%s' (valid: gpipe, 1f1b, interleaved)", what,
                        s ? s : "");
}

const char *pt_recompute_name(int r)
{
    return r >= 0 && r < N_RECOMPUTE ? recompute_names[r] : "?";
}

int pt_recompute_parse(const char *what, const char *s, int *out, pt_error *err)
{
    int v = -1;
    if (s && strcmp(s, "0") == 0) v = PT_RECOMPUTE_NONE; /* PTRAIN_CKPT_ACT of earlier versions */
    else if (s && strcmp(s, "1") == 0) v = PT_RECOMPUTE_BLOCK;
    for (int i = 0; s && v < 0 && i < N_RECOMPUTE; i++)
        if (strcmp(s, recompute_names[i]) == 0) v = i;
    if (v < 0)
        return pt_errprintf(err, "invalid %s '%s' (valid: none, block, attention; 0 = none, "
                            "1 = block)", what, s ? s : "");
    if (out) *out = v;
    return 0;
}

/* Most blocks one stage of an explicit split may name. */
#define SPLIT_ENTRY_MAX 4096

int pt_plan_split_parse(const char *what, const char *s, pt_plan *p, pt_error *err)
{
    if (!s || !p) return pt_errprintf(err, "no %s given", what);
    if (*s == '\0' || strcmp(s, "even") == 0) {
        p->pp_split_n = 0;
        return 0;
    }
    int v[PT_PP_SPLIT_MAX], n = 0;
    const char *q = s;
    for (;;) {
        if (n == PT_PP_SPLIT_MAX)
            return pt_errprintf(err, "invalid %s '%.40s...': more than %d stages (valid: at most "
                                "%d comma-separated block counts, or even)", what, s,
                                PT_PP_SPLIT_MAX, PT_PP_SPLIT_MAX);
        long x = 0;
        int digits = 0;
        while (isdigit((unsigned char)*q) && x <= SPLIT_ENTRY_MAX) {
            x = x * 10 + (*q++ - '0');
            digits++;
        }
        if (!digits || x < 1 || x > SPLIT_ENTRY_MAX || (*q && *q != ','))
            return pt_errprintf(err, "invalid %s '%s' (valid: comma-separated block counts "
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
    p->ckpt_act = PT_RECOMPUTE_NONE;
    p->schedule = PT_SCHED_1F1B;
    p->virtual_stages = 1;
    p->pp_split_n = 0;
    p->offload = 0;
    memcpy(p->rank_order, "DPT", 4);
}

/* 1 if s (exactly 3 chars) is a permutation of D, P, T. */
static int order_is_perm(const char *s)
{
    if (strlen(s) != 3) return 0;
    int seen = 0;
    for (int i = 0; i < 3; i++) {
        switch (s[i]) {
        case 'D': seen |= 1; break;
        case 'P': seen |= 2; break;
        case 'T': seen |= 4; break;
        default: return 0;
        }
    }
    return seen == 7;
}

/* Parse a placement: a permutation of D, P, T (any case), or the
 * SageMaker names "cluster" (= DPT) and "spread" (= TPD). */
int pt_plan_order_parse(const char *s, char out[4], pt_error *err)
{
    char up[4];
    if (strcmp(s, "cluster") == 0) s = "DPT";
    else if (strcmp(s, "spread") == 0) s = "TPD";
    size_t n = strlen(s);
    if (n == 3) {
        for (size_t i = 0; i < 3; i++) up[i] = (char)toupper((unsigned char)s[i]);
        up[3] = '\0';
        if (order_is_perm(up)) {
            memcpy(out, up, 4);
            return 0;
        }
    }
    return pt_errprintf(err,
                     "invalid rank order '%s' (valid: a permutation of D, P, T such as DPT, "
                     "or cluster, spread)", s);
}

/* Highest number that an int size may reach before products overflow. */
#define SIZE_MAX_VALUE (1 << 20)

int pt_isqrt_exact(int n)
{
    for (int q = 1; (long long)q * q <= n; q++)
        if (q * q == n) return q;
    return 0;
}

int pt_icbrt_exact(int n)
{
    for (int l = 1; (long long)l * l * l <= n; l++)
        if (l * l * l == n) return l;
    return 0;
}

int pt_pp_warmup(int schedule, int pp, int r, int m, int v)
{
    const int total = m * v;
    if (schedule == PT_SCHED_1F1B) return pp - r - 1 < m ? pp - r - 1 : m;
    if (schedule != PT_SCHED_INTERLEAVED || m == pp) return total;
    int warm = 2 * (pp - r - 1) + (v - 1) * pp;
    return warm > total ? total : warm;
}

/* 1 if tp has the grid shape of mode m: any size for off/1d, q*q for 2d,
 * depth*q*q for 2.5d (depth >= 1; 0 = any depth), l*l*l for 3d. */
static int tp_has_shape(pt_mode m, int depth, int tp)
{
    if (tp < 1) return 0;
    switch (m) {
    case PT_MODE_2D: return pt_isqrt_exact(tp) > 0;
    case PT_MODE_2P5D:
        if (depth <= 0) return 1; /* depth tp, q = 1 */
        return tp % depth == 0 && pt_isqrt_exact(tp / depth) > 0;
    case PT_MODE_3D: return pt_icbrt_exact(tp) > 0;
    default: return 1;
    }
}

/* A comma-separated list written into a fixed buffer; when it does not
 * fit it ends in "..." rather than in a cut number. */
typedef struct strlist {
    char *buf;
    size_t len, used;
    int count, full;
} strlist;

static void sl_init(strlist *s, char *buf, size_t len)
{
    s->buf = buf;
    s->len = len;
    s->used = 0;
    s->count = 0;
    s->full = 0;
    if (buf && len) buf[0] = '\0';
}

static void sl_add(strlist *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sl_add(strlist *s, const char *fmt, ...)
{
    s->count++;
    if (!s->buf || s->len < 8 || s->full) return;
    char item[64];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(item, sizeof item, fmt, ap);
    va_end(ap);
    const char *sep = s->used ? ", " : "";
    size_t need = strlen(sep) + strlen(item);
    if (s->used + need + 5 >= s->len) { /* keep room for ", ..." */
        snprintf(s->buf + s->used, s->len - s->used, "%s...", sep);
        s->full = 1;
        return;
    }
    s->used += (size_t)snprintf(s->buf + s->used, s->len - s->used, "%s%s", sep, item);
}

int pt_plan_list_tp(pt_mode m, int tp_depth, int n, int cap, char *buf, size_t len)
{
    strlist s;
    sl_init(&s, buf, len);
    if (n < 1 || cap < 1) return 0;
    if (m == PT_MODE_2P5D && tp_depth <= 0) {
        /* Every (depth, tp = depth*q*q) pair, depth-major. */
        for (int d = 1; d <= n && d <= cap; d++) {
            if (n % d) continue;
            for (int q = 1; (long long)d * q * q <= n && (long long)d * q * q <= cap; q++)
                if (n % (d * q * q) == 0) sl_add(&s, "(%d, %d)", d, d * q * q);
        }
        return s.count;
    }
    for (int t = 1; t <= n && t <= cap; t++)
        if (n % t == 0 && tp_has_shape(m, tp_depth, t)) sl_add(&s, "%d", t);
    return s.count;
}

/* Append "a, b, c" of the divisors of n that are <= cap to buf. */
static void list_divisors(int n, int cap, char *buf, size_t len)
{
    pt_plan_list_tp(PT_MODE_1D, 1, n, cap, buf, len);
}

/* "valid tp here: 1, 4" or, for 2.5d without a depth, "valid (tp_depth,
 * tp) here: (1, 1), (2, 2)" -- the tail of the fit errors. */
static void valid_tp_text(pt_mode m, int depth, int n, int cap, char *buf, size_t len)
{
    char list[200];
    int k = pt_plan_list_tp(m, depth, n, cap, list, sizeof list);
    if (m == PT_MODE_2P5D && depth <= 0)
        snprintf(buf, len, "valid (tp_depth, tp) here: %s", k ? list : "none");
    else if (m == PT_MODE_2P5D)
        snprintf(buf, len, "valid tp with tp_depth=%d here: %s", depth, k ? list : "none");
    else
        snprintf(buf, len, "valid tp here: %s", k ? list : "none");
}

/* What a tp of mode m must look like, for messages. */
static const char *shape_text(pt_mode m, int depth, char *buf, size_t len)
{
    switch (m) {
    case PT_MODE_2D: return "q*q";
    case PT_MODE_2P5D:
        if (depth <= 0) return "tp_depth*q*q";
        snprintf(buf, len, "%d*q*q", depth);
        return buf;
    case PT_MODE_3D: return "l*l*l";
    default: return "any size";
    }
}

int pt_plan_tp_dims(const pt_plan *p, int dims[3], pt_error *err)
{
    int d[3] = {1, 1, p->tp};
    if (p->tp_depth != 1 && p->mode != PT_MODE_2P5D)
        return pt_errprintf(err, "invalid tp_depth=%d for mode %s (valid: 1; depth is "
                         "for mode 2.5d)", p->tp_depth, pt_mode_name(p->mode));
    switch (p->mode) {
    case PT_MODE_2D:
    case PT_MODE_2P5D: {
        int depth = p->mode == PT_MODE_2D ? 1 : p->tp_depth;
        int q = p->tp % depth ? 0 : pt_isqrt_exact(p->tp / depth);
        if (!q) {
            if (depth == 1)
                return pt_errprintf(err, "tp=%d is not a square for mode 2d (valid tp: q*q "
                                 "such as 1, 4, 9, 16)", p->tp);
            return pt_errprintf(err, "tp=%d is not depth*q*q with tp_depth=%d for mode 2.5d "
                             "(valid tp: %d, %d, %d, %d)", p->tp, depth, depth, 4 * depth,
                             9 * depth, 16 * depth);
        }
        d[0] = depth;
        d[1] = d[2] = q;
        break;
    }
    case PT_MODE_3D: {
        int l = pt_icbrt_exact(p->tp);
        if (!l)
            return pt_errprintf(err, "tp=%d is not a cube for mode 3d (valid tp: l*l*l "
                             "such as 1, 8, 27, 64)", p->tp);
        d[0] = d[1] = d[2] = l;
        break;
    }
    default:
        break;
    }
    if (dims) memcpy(dims, d, sizeof d);
    return 0;
}

/* "m1, m2, m3" of the multiples of step nearest above and below m (for
 * interleaved microbatch counts). */
static void multiples_text(int m, int step, char *buf, size_t len)
{
    strlist s;
    sl_init(&s, buf, len);
    int lo = m / step * step;
    if (lo >= step) sl_add(&s, "%d", lo);
    for (int k = lo + step; s.count < 3; k += step) sl_add(&s, "%d", k);
}

/* The pipeline settings that need neither the world nor the model:
 * schedule, virtual stages, the number of split entries.  pp, v and m
 * are the plan's (a request passes 1 for "not given"). */
static int pipeline_check(const pt_plan *p, int pp, int v, int m, pt_error *err)
{
    if (p->schedule < 0 || p->schedule >= N_SCHEDS)
        return pt_errprintf(err, "invalid schedule value %d (valid: gpipe, 1f1b, interleaved)",
                            p->schedule);
    if (v < 1 || v > PT_VIRTUAL_STAGES_MAX)
        return pt_errprintf(err, "invalid virtual_stages=%d (valid: 1..%d model chunks per "
                            "pipeline rank)", v, PT_VIRTUAL_STAGES_MAX);
    if (p->schedule == PT_SCHED_INTERLEAVED) {
        if (pp < 2)
            return pt_errprintf(err, "schedule=interleaved with pp=%d: interleaving needs a "
                                "pipeline (valid: pp >= 2, or schedule gpipe or 1f1b)", pp);
        if (v < 2)
            return pt_errprintf(err, "schedule=interleaved with virtual_stages=%d: interleaving "
                                "needs at least 2 model chunks per rank (valid: virtual_stages "
                                "2..%d, or schedule 1f1b)", v, PT_VIRTUAL_STAGES_MAX);
        if (m % pp) {
            char list[64];
            multiples_text(m, pp, list, sizeof list);
            return pt_errprintf(err, "schedule=interleaved with pp=%d needs microbatches a "
                                "multiple of pp, microbatches=%d is not (Narayanan et al. 2021, "
                                "sec. 2.2; valid microbatches: %s, ...)", pp, m, list);
        }
    } else if (v != 1) {
        return pt_errprintf(err, "virtual_stages=%d with schedule=%s: virtual stages are for the "
                            "interleaved schedule (valid: schedule=interleaved, or "
                            "virtual_stages=1)", v, pt_schedule_name(p->schedule));
    }
    if (p->pp_split_n < 0 || p->pp_split_n > PT_PP_SPLIT_MAX)
        return pt_errprintf(err, "invalid pp_split_n=%d (valid: 0 for an even split, or "
                            "1..%d entries)", p->pp_split_n, PT_PP_SPLIT_MAX);
    if (p->pp_split_n) {
        long long need = (long long)pp * v;
        char txt[PT_PP_SPLIT_MAX * 6];
        pt_plan_split_format(p, txt, sizeof txt);
        if (p->pp_split_n != need)
            return pt_errprintf(err, "pp_split %s has %d entries, but pp=%d x virtual_stages=%d "
                                "makes %lld stages (valid: %lld comma-separated block counts, "
                                "or even)", txt, p->pp_split_n, pp, v, need, need);
        for (int i = 0; i < p->pp_split_n; i++)
            if (p->pp_split[i] < 1)
                return pt_errprintf(err, "pp_split %s: stage %d has %d blocks (valid: at least "
                                    "1 block per stage)", txt, i, p->pp_split[i]);
    }
    return 0;
}

int pt_plan_validate(const pt_plan *p, int world_size, pt_error *err)
{
    if (!p) return pt_errprintf(err, "no plan given");
    if ((int)p->mode < 0 || (int)p->mode >= N_MODES)
        return pt_errprintf(err, "invalid mode value %d (valid: off, 1d, 2d, 2.5d, 3d)", (int)p->mode);
    if (p->mode == PT_MODE_AUTO)
        return pt_errprintf(err,
                         "mode auto is a request, not a plan: resolve it first (concrete modes: "
                         "off, 1d, 2d, 2.5d, 3d)");
    struct { const char *name; int v; } sizes[] = {
        {"dp", p->dp}, {"pp", p->pp}, {"tp", p->tp}, {"tp_depth", p->tp_depth},
        {"sp", p->sp}, {"microbatches", p->microbatches},
    };
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        if (sizes[i].v < 1 || sizes[i].v > SIZE_MAX_VALUE)
            return pt_errprintf(err, "invalid %s=%d (valid: 1..%d)", sizes[i].name,
                             sizes[i].v, SIZE_MAX_VALUE);
    }
    if (p->zero < 0 || p->zero > 3)
        return pt_errprintf(err, "invalid zero=%d (valid ZeRO stages: 0, 1, 2, 3)", p->zero);
    if (p->ckpt_act < 0 || p->ckpt_act >= N_RECOMPUTE)
        return pt_errprintf(err, "invalid ckpt_act=%d (valid recompute modes: 0 none, 1 block, "
                            "2 attention)", p->ckpt_act);
    if (p->offload != 0 && p->offload != 1)
        return pt_errprintf(err, "invalid offload=%d (valid: 0, 1)", p->offload);
    if (memchr(p->rank_order, '\0', sizeof p->rank_order) == NULL || !order_is_perm(p->rank_order))
        return pt_errprintf(err,
                         "invalid rank order '%.4s' (valid: a permutation of D, P, T such as DPT)",
                         p->rank_order);
    if (pipeline_check(p, p->pp, p->virtual_stages, p->microbatches, err) < 0) return -1;

    /* What this build can run: an accepted setting must take effect. */
    if (p->offload != 0)
        return pt_errprintf(err, "optimizer offload=%d is not yet supported (supported: "
                         "offload=0)", p->offload);
    /* The ranks a tensor group must divide: the world less pp and sp
     * (the whole world when those do not divide it). */
    int tp_room = world_size;
    if (world_size > 0 && world_size % ((long long)p->pp * p->sp) == 0)
        tp_room = world_size / (p->pp * p->sp);
    char valid[256], shape[32];
    if (p->tp_depth != 1 && p->mode != PT_MODE_2P5D)
        return pt_plan_tp_dims(p, NULL, err); /* depth outside 2.5d */
    if (world_size > 0 && !tp_has_shape(p->mode, p->tp_depth, p->tp)) {
        valid_tp_text(p->mode, p->tp_depth, tp_room, INT_MAX, valid, sizeof valid);
        return pt_errprintf(err, "mode %s with %d ranks: tp=%d is not %s (%s)",
                            pt_mode_name(p->mode), world_size, p->tp,
                            shape_text(p->mode, p->tp_depth, shape, sizeof shape), valid);
    }
    if (pt_plan_tp_dims(p, NULL, err) < 0) return -1;
    if (p->sp != 1 && p->tp != 1)
        return pt_errprintf(err, "sp=%d with tp=%d: sequence parallelism composes with data "
                         "parallelism only (valid: tp=1 when sp>1, or sp=1)", p->sp, p->tp);

    if (world_size > 0) {
        long long prod = (long long)p->dp * p->pp * p->tp * p->sp;
        if (prod != world_size) {
            if (p->sp > 1) {
                char list[200];
                list_divisors(world_size % p->pp ? world_size : world_size / p->pp, INT_MAX, list,
                              sizeof list);
                snprintf(valid, sizeof valid, "valid sp here: %s", list);
            } else {
                valid_tp_text(p->mode, p->tp_depth, tp_room, INT_MAX, valid, sizeof valid);
            }
            return pt_errprintf(err,
                             "plan dp=%d pp=%d tp=%d sp=%d covers %lld ranks, but the world has "
                             "%d (valid: dp*pp*tp*sp = %d; mode %s, %s)",
                             p->dp, p->pp, p->tp, p->sp, prod, world_size, world_size,
                             pt_mode_name(p->mode), valid);
        }
    }
    if (p->zero > 0 && (long long)p->dp * p->sp == 1)
        return pt_errprintf(err, "zero=%d with dp=%d sp=%d: ZeRO shards the optimizer state over "
                            "the data-parallel ranks and this plan has one, so there is nothing "
                            "to shard (valid: zero=0, or dp*sp >= 2)", p->zero, p->dp, p->sp);
    return 0;
}

int pt_plan_check_model(const pt_plan *p, int n_layer, int batch_per_dp, pt_error *err)
{
    if (!p) return pt_errprintf(err, "no plan given");
    if (n_layer < 1) return pt_errprintf(err, "invalid layer count %d (valid: >= 1)", n_layer);
    long long stages = (long long)p->pp * p->virtual_stages;
    if (stages > n_layer) {
        if (p->virtual_stages == 1)
            return pt_errprintf(err, "pp=%d is larger than the layer count %d: every pipeline "
                                "stage holds at least one block (valid: pp 1..%d)", p->pp,
                                n_layer, n_layer);
        return pt_errprintf(err, "pp=%d x virtual_stages=%d = %lld stages, more than the %d "
                            "layers: every stage holds at least one block (valid: pp * "
                            "virtual_stages <= %d; pp <= %d with virtual_stages=%d)", p->pp,
                            p->virtual_stages, stages, n_layer, n_layer,
                            n_layer / p->virtual_stages, p->virtual_stages);
    }
    if (p->pp_split_n > 0 && p->pp_split_n <= PT_PP_SPLIT_MAX) {
        long long sum = 0;
        for (int i = 0; i < p->pp_split_n; i++) sum += p->pp_split[i];
        if (sum != n_layer) {
            char txt[PT_PP_SPLIT_MAX * 6];
            pt_plan_split_format(p, txt, sizeof txt);
            return pt_errprintf(err, "pp_split %s sums to %lld blocks, but the model has %d "
                                "layers (valid: %d block counts >= 1 that sum to %d, or even)",
                                txt, sum, n_layer, p->pp_split_n, n_layer);
        }
    }
    if (batch_per_dp > 0 && batch_per_dp % p->microbatches) {
        /* the microbatch counts that divide the batch (and, interleaved, are multiples of pp) */
        char list[200];
        strlist sl;
        sl_init(&sl, list, sizeof list);
        for (int k = 1; k <= batch_per_dp; k++)
            if (batch_per_dp % k == 0 && (p->schedule != PT_SCHED_INTERLEAVED || k % p->pp == 0))
                sl_add(&sl, "%d", k);
        return pt_errprintf(err, "microbatches=%d does not divide the %d sequences per "
                            "data-parallel rank (valid microbatches here: %s)", p->microbatches,
                            batch_per_dp, sl.count ? list : "none");
    }
    return 0;
}

/* Strict decimal int: the whole string, no sign games, within [lo, hi]. */
static int parse_int(const char *name, const char *s, int lo, int hi, int *out, pt_error *err)
{
    char *end;
    errno = 0;
    if (!*s || isspace((unsigned char)*s)) goto bad;
    long v = strtol(s, &end, 10);
    if (errno || *end != '\0' || v < lo || v > hi) goto bad;
    *out = (int)v;
    return 0;
bad:
    return pt_errprintf(err, "invalid %s='%s' (valid: an integer %d..%d)", name, s, lo, hi);
}

int pt_plan_from_env(pt_plan *p, pt_error *err)
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
        {"PTRAIN_OFFLOAD", offsetof(pt_plan, offload), 0, 1},
    };
    if (!p) return pt_errprintf(err, "no plan given");
    pt_plan tmp = *p; /* only commit when everything parsed */
    int found = 0;
    const char *s = getenv("PTRAIN_MODE");
    if (s) {
        found = 1;
        if (pt_mode_parse(s, &tmp.mode, err) < 0) {
            return pt_errprintf(err, "PTRAIN_MODE: %s", err ? err->text : "");
        }
    }
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        s = getenv(ints[i].var);
        if (!s) continue;
        found = 1;
        if (parse_int(ints[i].var, s, ints[i].lo, ints[i].hi,
                      (int *)((char *)&tmp + ints[i].off), err) < 0)
            return -1;
    }
    s = getenv("PTRAIN_SCHEDULE");
    if (s) {
        found = 1;
        if (pt_schedule_parse("PTRAIN_SCHEDULE", s, &tmp.schedule, err) < 0) return -1;
    }
    s = getenv("PTRAIN_CKPT_ACT");
    if (s) {
        found = 1;
        if (pt_recompute_parse("PTRAIN_CKPT_ACT", s, &tmp.ckpt_act, err) < 0) return -1;
    }
    s = getenv("PTRAIN_PP_SPLIT");
    if (s) {
        found = 1;
        if (pt_plan_split_parse("PTRAIN_PP_SPLIT", s, &tmp, err) < 0) return -1;
    }
    s = getenv("PTRAIN_RANK_ORDER");
    if (s) {
        found = 1;
        if (pt_plan_order_parse(s, tmp.rank_order, err) < 0) {
            return pt_errprintf(err, "PTRAIN_RANK_ORDER: %s", err ? err->text : "");
        }
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
    if ((rc = set("PTRAIN_CKPT_ACT", pt_recompute_name(p->ckpt_act), arg)) != 0) return rc;
    EXPORT_INT("PTRAIN_OFFLOAD", offload);
#undef EXPORT_INT
    char order[4];
    memcpy(order, p->rank_order, 3);
    order[3] = '\0';
    if ((rc = set("PTRAIN_RANK_ORDER", order, arg)) != 0) return rc;
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
    if (p->microbatches != 1) append(buf, n, &k, " microbatches=%d", p->microbatches);
    if (p->pp > 1 || p->schedule != PT_SCHED_1F1B)
        append(buf, n, &k, " schedule=%s", pt_schedule_name(p->schedule));
    if (p->virtual_stages != 1) append(buf, n, &k, " virtual_stages=%d", p->virtual_stages);
    if (p->pp_split_n) {
        char split[PT_PP_SPLIT_MAX * 6];
        pt_plan_split_format(p, split, sizeof split);
        append(buf, n, &k, " split=%s", split);
    }
    if (p->ckpt_act) append(buf, n, &k, " recompute=%s", pt_recompute_name(p->ckpt_act));
    if (p->offload) append(buf, n, &k, " offload=1");
}

/* ---- automatic planning ------------------------------------------------ */

static int gcd(int a, int b)
{
    while (b) {
        int t = a % b;
        a = b;
        b = t;
    }
    return a;
}

static int geometry_check(const pt_job_geometry *g, pt_error *err)
{
    if (!g) return pt_errprintf(err, "no job geometry given");
    if (g->nnodes < 1 || g->nnodes > SIZE_MAX_VALUE)
        return pt_errprintf(err, "invalid node count %d (valid: 1..%d)", g->nnodes,
                         SIZE_MAX_VALUE);
    if (g->ntasks < 1 || g->ntasks > SIZE_MAX_VALUE)
        return pt_errprintf(err, "invalid task count %d (valid: 1..%d)", g->ntasks,
                         SIZE_MAX_VALUE);
    if (!g->tasks_per_node) return pt_errprintf(err, "no per-node task counts given");
    long long sum = 0;
    for (int i = 0; i < g->nnodes; i++) {
        if (g->tasks_per_node[i] < 1)
            return pt_errprintf(err, "node %d has %d tasks (valid: >= 1)", i,
                             g->tasks_per_node[i]);
        sum += g->tasks_per_node[i];
    }
    if (sum != g->ntasks)
        return pt_errprintf(err, "per-node task counts add up to %lld, but the step has %d "
                         "tasks", sum, g->ntasks);
    return 0;
}

/* The 2.5D depth for a tensor group of tp ranks when the user gave none:
 * a true 2.5-D grid (depth >= 2 and q >= 2) when one exists, then the
 * largest q (the least replicated weights). */
static int pick_depth(int tp)
{
    int best = tp, best_score = -1;
    for (int d = 1; d <= tp; d++) {
        if (tp % d) continue;
        int q = pt_isqrt_exact(tp / d);
        if (!q) continue;
        int score = (d >= 2 && q >= 2) * (SIZE_MAX_VALUE + 1) + q;
        if (score > best_score) {
            best_score = score;
            best = d;
        }
    }
    return best;
}

/* pt_plan_request_check; shape = 0 leaves the tp shape to pt_plan_auto,
 * which names the sizes that fit the geometry. */
static int request_check(const pt_plan *req, const pt_plan_limits *lim, int shape_check,
                         pt_error *err)
{
    if (!req) return pt_errprintf(err, "no request given");
    unsigned modes = lim ? lim->modes : ~0u;
    if ((int)req->mode < 0 || (int)req->mode >= N_MODES)
        return pt_errprintf(err, "invalid mode value %d (valid: off, auto, 1d, 2d, 2.5d, "
                            "3d)", (int)req->mode);
    if (req->mode != PT_MODE_OFF && !(modes & (1u << req->mode)))
        return pt_errprintf(err, "--ptrain-mode=%s is not allowed by the administrator "
                         "(allowed_modes in ptrain.conf)", pt_mode_name(req->mode));
    if (req->tp < 0 || req->tp > SIZE_MAX_VALUE)
        return pt_errprintf(err, "invalid --ptrain-tp=%d (valid: 1..%d)", req->tp,
                            SIZE_MAX_VALUE);
    if (req->tp_depth < 0 || req->tp_depth > SIZE_MAX_VALUE)
        return pt_errprintf(err, "invalid --ptrain-tp-depth=%d (valid: 1..%d)",
                            req->tp_depth, SIZE_MAX_VALUE);
    if (req->sp < 0 || req->sp > SIZE_MAX_VALUE)
        return pt_errprintf(err, "invalid --ptrain-sp=%d (valid: 1..%d)", req->sp,
                            SIZE_MAX_VALUE);
    if (req->pp < 0 || req->pp > SIZE_MAX_VALUE)
        return pt_errprintf(err, "invalid --ptrain-pp=%d (valid: 1..%d)", req->pp, SIZE_MAX_VALUE);
    if (req->microbatches < 0 || req->microbatches > SIZE_MAX_VALUE)
        return pt_errprintf(err, "invalid --ptrain-microbatches=%d (valid: 1..%d)",
                            req->microbatches, SIZE_MAX_VALUE);
    if (req->zero < 0 || req->zero > 3)
        return pt_errprintf(err, "invalid --ptrain-zero=%d (valid ZeRO stages: 0, 1, 2, 3)",
                            req->zero);
    if (req->ckpt_act < 0 || req->ckpt_act >= N_RECOMPUTE)
        return pt_errprintf(err, "invalid --ptrain-recompute value %d (valid: none, block, "
                            "attention)", req->ckpt_act);
    if (req->mode == PT_MODE_OFF) return 0; /* nothing planned: sizes are ignored */
    int max_pp = lim ? lim->max_pp : SIZE_MAX_VALUE, max_zero = lim ? lim->max_zero : 3;
    unsigned scheds = lim ? lim->schedules : ~0u;
    int pp = req->pp > 0 ? req->pp : 1;
    if (pp > max_pp)
        return pt_errprintf(err, "--ptrain-pp=%d exceeds the administrator's max_pp=%d (valid: "
                            "1..%d; max_pp in ptrain.conf)", pp, max_pp, max_pp);
    if (req->zero > max_zero)
        return pt_errprintf(err, "--ptrain-zero=%d exceeds the administrator's max_zero=%d "
                            "(valid: 0..%d; max_zero in ptrain.conf)", req->zero, max_zero,
                            max_zero);
    if (req->schedule >= 0 && req->schedule < N_SCHEDS && !(scheds & (1u << req->schedule))) {
        strlist sl;
        char ok[64];
        sl_init(&sl, ok, sizeof ok);
        for (int i = 0; i < N_SCHEDS; i++)
            if (scheds & (1u << i)) sl_add(&sl, "%s", sched_names[i]);
        return pt_errprintf(err, "--ptrain-schedule=%s is not allowed by the administrator "
                            "(allowed_schedules in ptrain.conf: %s)",
                            pt_schedule_name(req->schedule), sl.count ? ok : "none");
    }
    if (pipeline_check(req, pp, req->virtual_stages > 0 ? req->virtual_stages : 1,
                       req->microbatches > 0 ? req->microbatches : 1, err) < 0)
        return -1;
    if (req->mode == PT_MODE_AUTO && !(modes & (1u << PT_MODE_1D)))
        return pt_errprintf(err, "--ptrain-mode=auto resolves to 1d, which the "
                         "administrator does not allow (allowed_modes in ptrain.conf)");
    if (req->tp_depth > 1 && req->mode != PT_MODE_2P5D)
        return pt_errprintf(err, "--ptrain-tp-depth=%d is for --ptrain-mode=2.5d, but the "
                            "mode is %s%s (valid: --ptrain-mode=2.5d, or no --ptrain-tp-depth)",
                            req->tp_depth, pt_mode_name(req->mode),
                            req->mode == PT_MODE_AUTO ? ", which plans 1d" : "");
    if (req->sp > 1 && req->tp > 1)
        return pt_errprintf(err, "--ptrain-sp=%d with --ptrain-tp=%d: sequence "
                            "parallelism composes with data parallelism only (valid: "
                            "--ptrain-tp=1, or --ptrain-sp=1)", req->sp, req->tp);
    if (req->sp > 1 && req->tp_depth > 1)
        return pt_errprintf(err, "--ptrain-sp=%d needs tp=1, which "
                            "--ptrain-tp-depth=%d does not allow (valid: --ptrain-tp-depth=1, "
                            "or --ptrain-sp=1)", req->sp, req->tp_depth);
    if (shape_check && req->tp > 0 && !tp_has_shape(req->mode, req->tp_depth, req->tp)) {
        strlist s;
        char valid[160], shape[32];
        sl_init(&s, valid, sizeof valid);
        for (int t = 1; s.count < 6 && t <= SIZE_MAX_VALUE; t++)
            if (tp_has_shape(req->mode, req->tp_depth, t)) sl_add(&s, "%d", t);
        return pt_errprintf(err, "--ptrain-tp=%d is not %s for --ptrain-mode=%s (valid "
                            "tp of that shape: %s, ...)", req->tp,
                            shape_text(req->mode, req->tp_depth, shape, sizeof shape),
                            pt_mode_name(req->mode), valid);
    }
    return 0;
}

int pt_plan_request_check(const pt_plan *req, const pt_plan_limits *lim, pt_error *err)
{
    return request_check(req, lim, 1, err);
}

int pt_plan_auto(const pt_job_geometry *g, const pt_plan_limits *lim, const pt_plan *req,
                 pt_plan *out, pt_error *err)
{
    if (!req || !out) return pt_errprintf(err, "no request or output plan given");
    if (geometry_check(g, err) < 0) return -1;
    int max_tp = lim ? lim->max_tp : INT_MAX;
    if (max_tp < 1) return pt_errprintf(err, "invalid max_tp=%d (valid: >= 1)", max_tp);
    if (request_check(req, lim, 0, err) < 0) return -1;

    pt_plan p;
    pt_plan_default(&p);
    if (req->mode == PT_MODE_OFF) {
        p.mode = PT_MODE_OFF;
        p.dp = g->ntasks;
        *out = p;
        return 0;
    }
    /* auto: 1d tensor parallelism inside nodes (tp = 1 when --ptrain-sp
     * asks for sequence parallelism instead). */
    pt_mode mode = req->mode == PT_MODE_AUTO ? PT_MODE_1D : req->mode;
    int depth = req->tp_depth; /* 0: choose */
    int sp = req->sp > 1 ? req->sp : 1;
    int pp = req->pp > 1 ? req->pp : 1;

    /* Tensor and sequence groups must each sit inside one node: their
     * size divides every node's task count, i.e. the gcd of the counts. */
    int common = 0;
    for (int i = 0; i < g->nnodes; i++) common = gcd(common, g->tasks_per_node[i]);
    char valid[256], shape[32], where[160];
    if (g->ntasks % pp) {
        list_divisors(g->ntasks, INT_MAX, valid, sizeof valid);
        return pt_errprintf(err, "--ptrain-pp=%d does not divide the %d tasks of the step "
                            "(valid pp here: %s)", pp, g->ntasks, valid);
    }
    /* A pipeline stage holds ntasks / pp ranks: the tensor (or sequence)
     * group must also divide that. */
    int stage = g->ntasks / pp;
    int fit = gcd(common, stage);
    if (g->nnodes == 1)
        snprintf(where, sizeof where, "%d tasks on 1 node", g->ntasks);
    else
        snprintf(where, sizeof where, "%d tasks on %d nodes, gcd of tasks per node %d",
                 g->ntasks, g->nnodes, common);
    if (pp > 1) {
        size_t wl = strlen(where);
        snprintf(where + wl, sizeof where - wl, ", %d per pipeline stage with pp=%d", stage, pp);
    }
    int tp;
    if (sp > 1) {
        if (fit % sp) {
            list_divisors(fit, INT_MAX, valid, sizeof valid);
            return pt_errprintf(err, "--ptrain-sp=%d does not divide the tasks on every "
                                "node%s (%s; valid sp here: %s)", sp,
                                pp > 1 ? " and of every pipeline stage" : "", where, valid);
        }
        tp = 1;
        if (mode == PT_MODE_2P5D) depth = 1;
    } else if (req->tp > 0) {
        tp = req->tp;
        if (tp > max_tp || fit % tp || !tp_has_shape(mode, depth, tp)) {
            valid_tp_text(mode, depth, fit, max_tp, valid, sizeof valid);
            if (tp > max_tp)
                return pt_errprintf(err, "--ptrain-tp=%d exceeds the administrator's "
                                 "max_tp=%d (%s)", tp, max_tp, valid);
            if (common % tp)
                return pt_errprintf(err, "--ptrain-tp=%d does not divide the tasks on "
                                 "every node (%s; %s)", tp, where, valid);
            if (fit % tp)
                return pt_errprintf(err, "--ptrain-tp=%d does not divide the %d tasks of a "
                                    "pipeline stage (%s; %s)", tp, stage, where, valid);
            return pt_errprintf(err, "--ptrain-tp=%d is not %s for --ptrain-mode=%s "
                                "(%s; %s)", tp,
                                shape_text(mode, depth, shape, sizeof shape), pt_mode_name(mode),
                                where, valid);
        }
    } else {
        tp = 0;
        /* With a ZeRO stage asked for, the largest tp that leaves at
         * least 2 data-parallel ranks to shard over, when one exists. */
        int need_dp = req->zero > 0 ? 2 : 1;
        for (int pass = 0; pass < 2 && !tp; pass++, need_dp = 1)
            for (int t = 1; t <= fit && t <= max_tp; t++)
                if (fit % t == 0 && tp_has_shape(mode, depth, t) && stage / t >= need_dp) tp = t;
        if (!tp) { /* only a pinned 2.5d depth can leave nothing */
            list_divisors(fit, max_tp, valid, sizeof valid);
            return pt_errprintf(err, "--ptrain-tp-depth=%d does not fit: tp = %d*q*q must "
                                "divide the tasks on every node (%s) and be <= max_tp=%d "
                                "(valid tp_depth here: %s)", depth, depth, where, max_tp, valid);
        }
    }
    if (mode == PT_MODE_2P5D && depth <= 0) depth = pick_depth(tp);
    p.mode = mode;
    p.tp = tp;
    p.tp_depth = mode == PT_MODE_2P5D ? depth : 1;
    p.sp = sp;
    p.pp = pp;
    p.dp = g->ntasks / (pp * tp * sp);
    p.zero = req->zero;
    p.microbatches = req->microbatches > 0 ? req->microbatches : 1;
    p.schedule = req->schedule;
    p.virtual_stages = req->virtual_stages > 0 ? req->virtual_stages : 1;
    p.pp_split_n = req->pp_split_n;
    memcpy(p.pp_split, req->pp_split, sizeof p.pp_split);
    p.ckpt_act = req->ckpt_act;
    /* rank_order stays DPT ("cluster"): T varies fastest, so a group of
     * tp*sp consecutive ranks, which divides every node's count, sits in
     * one node. */
    if (pt_plan_validate(&p, g->ntasks, err) < 0) return -1;
    *out = p;
    return 0;
}

int pt_plan_rank(const pt_job_geometry *g, int node_index, int local_task)
{
    if (!g || !g->tasks_per_node || node_index < 0 || node_index >= g->nnodes || local_task < 0)
        return -1;
    if (local_task >= g->tasks_per_node[node_index]) return -1;
    long long r = 0;
    for (int i = 0; i < node_index; i++) {
        if (g->tasks_per_node[i] < 0) return -1;
        r += g->tasks_per_node[i];
    }
    r += local_task;
    if (r >= g->ntasks || r > INT_MAX) return -1;
    return (int)r;
}

int pt_plan_coords(const pt_plan *p, int rank, int *dp_rank, int *pp_rank, int *tp_rank, int *sp_rank)
{
    if (!p || p->dp < 1 || p->pp < 1 || p->tp < 1 || p->sp < 1) return -1;
    if (memchr(p->rank_order, '\0', sizeof p->rank_order) == NULL || !order_is_perm(p->rank_order))
        return -1;
    long long world = (long long)p->dp * p->pp * p->tp * p->sp;
    if (rank < 0 || rank >= world) return -1;
    /* The T axis holds tp*sp ranks, tp varying fastest inside it. */
    long long rem = rank;
    int c[3] = {0, 0, 0}; /* D, P, T */
    for (int i = 2; i >= 0; i--) {
        char a = p->rank_order[i];
        long long size = a == 'D' ? p->dp : a == 'P' ? p->pp : (long long)p->tp * p->sp;
        int idx = a == 'D' ? 0 : a == 'P' ? 1 : 2;
        c[idx] = (int)(rem % size);
        rem /= size;
    }
    if (dp_rank) *dp_rank = c[0];
    if (pp_rank) *pp_rank = c[1];
    if (tp_rank) *tp_rank = c[2] % p->tp;
    if (sp_rank) *sp_rank = c[2] / p->tp;
    return 0;
}
