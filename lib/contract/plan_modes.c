/* SPDX-License-Identifier: MIT */
/* The table of tensor-parallel modes: name, shape rule, grid dims, and
 * the one list of valid tp sizes every message takes ("valid tp here").
 * See plan.h (pt_mode_parse, pt_plan_tp_dims, pt_plan_list_tp) and
 * ptrain-layouts(7): 1d Megatron-LM (Shoeybi et al.
 * 2019), 2d SUMMA / Optimus (Xu et al. 2021), 2.5d Tesseract (Wang et al.
 * 2021), 3d (Bian et al. 2021).  libc only. */
#include "contract/plan_priv.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

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

/* Shape rules: 1 and the grid {depth or i, rows, columns} (product tp)
 * when tp has the mode's shape, else 0.  depth: 2.5d's d (0 = any, as
 * d = tp, q = 1). */
static int dims_line(int tp, int depth, int d[3])
{
    (void)depth;
    d[0] = d[1] = 1, d[2] = tp;
    return 1;
}

static int dims_square(int tp, int depth, int d[3])
{
    (void)depth;
    int q = pt_isqrt_exact(tp);
    d[0] = 1, d[1] = d[2] = q;
    return q > 0;
}

static int dims_depth_square(int tp, int depth, int d[3])
{
    if (depth <= 0) depth = tp;
    int q = tp % depth ? 0 : pt_isqrt_exact(tp / depth);
    d[0] = depth, d[1] = d[2] = q;
    return q > 0;
}

static int dims_cube(int tp, int depth, int d[3])
{
    (void)depth;
    int l = pt_icbrt_exact(tp);
    d[0] = d[1] = d[2] = l;
    return l > 0;
}

/* One row per pt_mode, in enum order: plan.h's PT_MODE_ROWS. */
static const struct mode_row {
    const char *name;
    const char *shape;  /* what tp must be, for messages */
    int has_depth;      /* tp_depth is an axis of the grid (2.5d) */
    int (*dims)(int tp, int depth, int d[3]);
} modes[N_MODES] = {
#define ROW(e, name, shape, depth, dims) [PT_MODE_##e] = {name, shape, depth, dims},
    PT_MODE_ROWS(ROW, )
#undef ROW
};

const char *pt_mode_name(pt_mode m)
{
    if ((int)m < 0 || (int)m >= N_MODES) return "?";
    return modes[m].name;
}

int pt_mode_parse(const char *s, pt_mode *m)
{
    if (!s) return pt_fail(PT_EINVAL, "missing mode (valid: %s)", PT_MODE_NAMES(", "));
    for (int i = 0; i < N_MODES; i++) {
        if (strcmp(s, modes[i].name) == 0) {
            if (m) *m = (pt_mode)i;
            return 0;
        }
    }
    return pt_fail(PT_EINVAL, "invalid mode '%s' (valid: %s)", s, PT_MODE_NAMES(", "));
}

int pt_plan_i_tp_has_shape(pt_mode m, int depth, int tp)
{
    if (tp < 1) return 0;
    if ((int)m < 0 || (int)m >= N_MODES) return 0;
    if (m == PT_MODE_2P5D && depth <= 0) return 1; /* depth tp, q = 1 */
    int d[3];
    return modes[m].dims(tp, depth, d);
}

void pt_plan_i_sl_init(pt_plan_i_strlist *s, char *buf, size_t len)
{
    s->buf = buf;
    s->len = len;
    s->used = 0;
    s->count = 0;
    s->full = 0;
    if (buf && len) buf[0] = '\0';
}

void pt_plan_i_sl_add(pt_plan_i_strlist *s, const char *fmt, ...)
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
    pt_plan_i_strlist s;
    pt_plan_i_sl_init(&s, buf, len);
    if (n < 1 || cap < 1) return 0;
    if (m == PT_MODE_2P5D && tp_depth <= 0) {
        /* Every (depth, tp = depth*q*q) pair, depth-major. */
        for (int d = 1; d <= n && d <= cap; d++) {
            if (n % d) continue;
            for (int q = 1; (long long)d * q * q <= n && (long long)d * q * q <= cap; q++)
                if (n % (d * q * q) == 0) pt_plan_i_sl_add(&s, "(%d, %d)", d, d * q * q);
        }
        return s.count;
    }
    for (int t = 1; t <= n && t <= cap; t++)
        if (n % t == 0 && pt_plan_i_tp_has_shape(m, tp_depth, t)) pt_plan_i_sl_add(&s, "%d", t);
    return s.count;
}

void pt_plan_i_valid_tp_text(pt_mode m, int depth, int n, int cap, char *buf, size_t len)
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

const char *pt_plan_i_shape_text(pt_mode m, int depth, char *buf, size_t len)
{
    if ((int)m < 0 || (int)m >= N_MODES) return "?";
    if (modes[m].has_depth && depth > 0) {
        snprintf(buf, len, "%d*q*q", depth);
        return buf;
    }
    return modes[m].shape;
}

int pt_plan_tp_dims(const pt_plan *p, int dims[3])
{
    if ((int)p->mode < 0 || (int)p->mode >= N_MODES)
        return pt_fail(PT_EINVAL, "invalid mode value %d (valid: %s)", (int)p->mode,
                       PT_PLAN_MODE_NAMES(", "));
    const struct mode_row *row = &modes[p->mode];
    if (p->tp_depth != 1 && !row->has_depth)
        return pt_fail(PT_EINVAL, "invalid tp_depth=%d for mode %s (valid: 1; depth is "
                       "for mode 2.5d)", p->tp_depth, row->name);
    int d[3];
    if (p->tp < 1 || (row->has_depth && p->tp_depth < 1) || !row->dims(p->tp, p->tp_depth, d)) {
        /* the first four sizes of the shape, from the same rule */
        char shape[32], ex[64];
        pt_plan_i_strlist s;
        pt_plan_i_sl_init(&s, ex, sizeof ex);
        for (int t = 1; s.count < 4 && t <= SIZE_MAX_VALUE; t++)
            if (pt_plan_i_tp_has_shape(p->mode, p->tp_depth, t)) pt_plan_i_sl_add(&s, "%d", t);
        return pt_fail(PT_EINVAL, "tp=%d is not %s for mode %s (valid tp: %s such as %s)", p->tp,
                       pt_plan_i_shape_text(p->mode, p->tp_depth, shape, sizeof shape), row->name,
                       pt_plan_i_shape_text(p->mode, p->tp_depth, shape, sizeof shape), ex);
    }
    if (dims) memcpy(dims, d, sizeof d);
    return 0;
}
