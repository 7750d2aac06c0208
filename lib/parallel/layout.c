/* Pieces every layout shares: block slicing of full tensors, LayerNorm
 * and cross-entropy over a group, scratch buffers, the mode -> layout
 * table.  See layout.h. */
#include "parallel/layout.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

const pt_layout *pt_layout_for(pt_mode mode)
{
    switch (mode) {
    case PT_MODE_OFF:
    case PT_MODE_1D: return &pt_layout_1d;
    case PT_MODE_2D:
    case PT_MODE_2P5D: return &pt_layout_2d;
    case PT_MODE_3D: return &pt_layout_3d;
    default: break;
    }
    pt_fail(PT_EUNSUPP, "tensor-parallel mode '%s' has no layout (valid: off, 1d, 2d, 2.5d, 3d)", pt_mode_name(mode));
    return NULL;
}

static void list_values(char *buf, size_t len, int from, int to, int step, int divides)
{
    size_t off = 0;
    buf[0] = '\0';
    for (int v = from; v <= to && off + 12 < len; v += step)
        if (!divides || divides % v == 0) off += (size_t)snprintf(buf + off, len - off, "%s%d", off ? " " : "", v);
}

void pt_list_divisors(char *buf, size_t len, int n) { list_values(buf, len, 1, n, 1, n); }

void pt_list_multiples(char *buf, size_t len, int m, int count) { list_values(buf, len, m, m * count, m, 0); }

int pt_check_batch_split(const char *mode, const char *how, int ways, int B)
{
    if (B % ways == 0) return PT_OK;
    char valid[96];
    pt_list_multiples(valid, sizeof valid, ways, 4);
    return pt_fail(PT_EINVAL, "mode %s splits the batch %d ways (%s): B=%d sequences per data-parallel group "
                   "does not divide (valid B: %s ...)", mode, ways, how, B, valid);
}

float *pt_scratch(pt_arena *a, size_t n, const char *what)
{
    float *p = pt_arena_alloc(a, (n ? n : 1) * sizeof(float));
    if (!p) pt_fail(PT_ENOMEM, "out of memory for %zu floats of %s scratch (%s)", n, what, pt_errmsg());
    return p;
}

int64_t pt_block_row(int64_t rows, int parts, int blk, int qkv, int64_t r)
{
    if (!qkv) return (int64_t)blk * (rows / parts) + r;
    int64_t third = rows / 3, piece = third / parts;
    int64_t t = r / piece, o = r % piece;
    return t * third + (int64_t)blk * piece + o;
}

void pt_block_copy(const float *full, float *local, int64_t rows, int64_t cols, int rparts, int rblk, int qkv,
                   int rsubparts, int rsub, int cparts, int cblk)
{
    int64_t nblk = rows / rparts, nsub = nblk / rsubparts, cl = cols / cparts;
    for (int64_t r = 0; r < nsub; r++) {
        int64_t fr = pt_block_row(rows, rparts, rblk, qkv, (int64_t)rsub * nsub + r);
        memcpy(local + r * cl, full + fr * cols + (int64_t)cblk * cl, sizeof(float) * (size_t)cl);
    }
}

int pt_layernorm_fwd(pt_comm *g, const pt_ops_f32 *ops, pt_arena *a, float *out, float *mean, float *rstd,
                     const float *x, const float *w, const float *b, int N, int Cl, int C)
{
    if (g->size == 1 && Cl == C) {
        ops->layernorm_fwd(out, mean, rstd, x, w, b, N, C);
        return PT_OK;
    }
    float *s = pt_scratch(a, (size_t)N, "layernorm");
    if (!s) return PT_ENOMEM;
    int rc;
#pragma omp parallel for
    for (int n = 0; n < N; n++) {
        const float *xr = x + (size_t)n * Cl;
        double m = 0;
        for (int c = 0; c < Cl; c++) m += xr[c];
        s[n] = (float)m;
    }
    if ((rc = pt_allreduce_sum(g, s, (size_t)N))) goto out;
    for (int n = 0; n < N; n++) mean[n] = s[n] / (float)C;
#pragma omp parallel for
    for (int n = 0; n < N; n++) {
        const float *xr = x + (size_t)n * Cl;
        double v = 0;
        for (int c = 0; c < Cl; c++) { double d = xr[c] - mean[n]; v += d * d; }
        s[n] = (float)v;
    }
    if ((rc = pt_allreduce_sum(g, s, (size_t)N))) goto out;
#pragma omp parallel for
    for (int n = 0; n < N; n++) {
        const float *xr = x + (size_t)n * Cl;
        float *o = out + (size_t)n * Cl;
        float r = 1.0f / sqrtf(s[n] / (float)C + 1e-5f);
        rstd[n] = r;
        for (int c = 0; c < Cl; c++) o[c] = (xr[c] - mean[n]) * r * w[c] + b[c];
    }
out:
    pt_arena_free(a, s);
    return rc;
}

int pt_layernorm_bwd(pt_comm *g, const pt_ops_f32 *ops, pt_arena *a, float *dx, float *dw, float *db,
                     const float *dy, const float *x, const float *w, const float *mean, const float *rstd,
                     int N, int Cl, int C)
{
    if (g->size == 1 && Cl == C) {
        ops->layernorm_bwd(dx, dw, db, dy, x, w, mean, rstd, N, C);
        return PT_OK;
    }
    /* s[2n] = sum_c dy*w, s[2n+1] = sum_c dy*w*xhat over the row's C columns */
    float *s = pt_scratch(a, 2 * (size_t)N, "layernorm");
    if (!s) return PT_ENOMEM;
#pragma omp parallel for
    for (int n = 0; n < N; n++) {
        const float *g_ = dy + (size_t)n * Cl, *xr = x + (size_t)n * Cl;
        double s1 = 0, s2 = 0;
        for (int c = 0; c < Cl; c++) {
            float xhat = (xr[c] - mean[n]) * rstd[n];
            float dn = g_[c] * w[c];
            s1 += dn;
            s2 += dn * xhat;
        }
        s[2 * n] = (float)s1;
        s[2 * n + 1] = (float)s2;
    }
    int rc = pt_allreduce_sum(g, s, 2 * (size_t)N);
    if (!rc) {
        for (int n = 0; n < N; n++) {
            const float *g_ = dy + (size_t)n * Cl, *xr = x + (size_t)n * Cl;
            const float m1 = s[2 * n] / (float)C, m2 = s[2 * n + 1] / (float)C;
            float *d = dx + (size_t)n * Cl;
            for (int c = 0; c < Cl; c++) {
                float xhat = (xr[c] - mean[n]) * rstd[n];
                db[c] += g_[c];
                dw[c] += g_[c] * xhat;
                d[c] += rstd[n] * (g_[c] * w[c] - m1 - xhat * m2);
            }
        }
    }
    pt_arena_free(a, s);
    return rc;
}

int pt_xent_fwd(pt_comm *g, const pt_ops_f32 *ops, float *losses, float *stats, const float *logits,
                const int32_t *tgt, int v0, int vreal, int N, int Vl)
{
    float *rowmax = stats, *sumexp = stats + N, *tl = stats + 2 * N;
    ops->xent_max(rowmax, logits, v0, vreal, N, Vl);
    int rc = pt_allreduce_max(g, rowmax, (size_t)N);
    if (rc) return rc;
    ops->xent_sumexp(sumexp, tl, logits, rowmax, tgt, v0, vreal, N, Vl);
    rc = pt_allreduce_sum(g, sumexp, 2 * (size_t)N); /* sumexp and target logit are adjacent */
    if (rc) return rc;
    for (int n = 0; n < N; n++) losses[n] = logf(sumexp[n]) + rowmax[n] - tl[n];
    return PT_OK;
}
