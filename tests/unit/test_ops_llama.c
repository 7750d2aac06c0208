/* SPDX-License-Identifier: MIT */
/* Tests of Llama's ops in the CPU tables (lib/backend/ops.h, cpu_ops.inc):
 * RMSNorm (rmsnorm_fwd/bwd and the column-split pieces rmsnorm_rowsumsq,
 * _apply, _bwd_rowsums, _bwd_apply), RoPE in the rotate-half layout
 * (rope_fwd/bwd and the host table pt_rope_table with Llama 3.1's
 * frequency scaling) and SwiGLU (swiglu_fwd/bwd); the family of
 * tests/gpu/test_ops_llama.c.
 *
 *  1. References written here in double, with Hugging Face's
 *     LlamaForCausalLM semantics (LlamaRMSNorm, apply_rotary_pos_emb with
 *     rotate_half, LlamaMLP's silu(gate) * up, _compute_llama3_parameters),
 *     and each op of the f64, f32 and bf16 tables against them: f64 to
 *     1e-12, f32 to 1e-5 relative (max|f - ref| / max|ref|), bf16 ACT
 *     outputs to BF16_TOL (a few bf16 ulps; the inputs are rounded to each
 *     table's types first, so only the arithmetic differs).
 *  2. Every backward of the double table against central finite
 *     differences of a scalar loss L = sum(out * R), and the accumulate
 *     (RMSNorm) or write (RoPE, SwiGLU) contract.
 *  3. rope_bwd(rope_fwd(x)) = x; the columns of a row past nh*HS (ld > nh*HS)
 *     untouched; the table against a from-scratch computation (no scaling,
 *     factor 8 as Llama 3.1, factor 32 as Llama 3.2) and its refusals.
 *  4. The RMSNorm pieces over columns split in 1, 2 and 3 parts (the group
 *     sum done here) equal the whole-row ops.
 *  5. 1 vs 2 and 3 OpenMP threads: the same bytes (f32, bf16), as
 *     test_ops_tables holds the other ops.
 *
 * Inputs are fresh random numbers every run; the seed is printed as a TAP
 * diagnostic and PTRAIN_TEST_SEED=<n> reproduces a run. */
#include "backend/ops.h"
#include "core/core.h"
#include "tests/tap.h"
#include "tests/unit/ops_util.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define F32_TOL 1e-5
#define BF16_TOL 1e-2
#define F64_TOL 1e-12

/* ---- tables and typed buffers --------------------------------------------- */
typedef struct {
    const pt_ops *o;
    double tact, tacc; /* tolerances of ACT and ACC outputs */
} tab;

static const tab *tabs(int *n)
{
    static tab t[3];
    t[0] = (tab){&pt_cpu_ops_f64, F64_TOL, F64_TOL};
    t[1] = (tab){&pt_cpu_ops_f32, F32_TOL, F32_TOL};
    t[2] = (tab){&pt_cpu_ops_bf16, BF16_TOL, 1e-4};
    *n = 3;
    return t;
}

static size_t dsz(pt_dtype t) { return t == PT_F64 ? 8 : t == PT_F32 ? 4 : 2; }

/* x rounded to dt's precision, in place */
static void quant(pt_dtype dt, double *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = dt == PT_F64 ? x[i] : dt == PT_F32 ? (double)(float)x[i] : (double)pt_bf16_to_f32(pt_f32_to_bf16((float)x[i]));
}
/* a buffer of dt holding x */
static void *tbuf(pt_dtype dt, const double *x, size_t n)
{
    void *p = xcalloc(n, dsz(dt));
    for (size_t i = 0; i < n; i++) {
        if (dt == PT_F64) ((double *)p)[i] = x[i];
        else if (dt == PT_F32) ((float *)p)[i] = (float)x[i];
        else ((pt_bf16 *)p)[i] = pt_f32_to_bf16((float)x[i]);
    }
    return p;
}
static void tget(double *y, pt_dtype dt, const void *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] = dt == PT_F64 ? ((const double *)p)[i] : dt == PT_F32 ? ((const float *)p)[i] : pt_bf16_to_f32(((const pt_bf16 *)p)[i]);
}
/* max|p - ref| / max|ref| of a typed buffer */
static double terr(pt_dtype dt, const void *p, const double *ref, size_t n)
{
    double *y = dalloc(n);
    tget(y, dt, p, n);
    double e = relerr(y, ref, n);
    free(y);
    return e;
}

/* ---- references (double, Hugging Face's semantics) ------------------------- */
/* LlamaRMSNorm: x * rsqrt(mean(x^2) + eps) * w */
static void ref_rms_fwd(double *out, double *rstd, const double *x, const double *w, int N, int C, double eps)
{
    for (int n = 0; n < N; n++) {
        const double *r = x + (size_t)n * C;
        double ss = 0;
        for (int c = 0; c < C; c++) ss += r[c] * r[c];
        const double s = 1 / sqrt(ss / C + eps);
        rstd[n] = s;
        for (int c = 0; c < C; c++) out[(size_t)n * C + c] = r[c] * s * w[c];
    }
}
/* the gradients of sum(out * dy) written from the chain rule directly:
 * d out_c / d x_j = s w_c (delta_cj - x_c x_j s^2 / C) */
static void ref_rms_bwd(double *dx, double *dw, const double *dy, const double *x, const double *w, int N, int C,
                        double eps)
{
    for (int c = 0; c < C; c++) dw[c] = 0;
    for (int n = 0; n < N; n++) {
        const double *r = x + (size_t)n * C, *g = dy + (size_t)n * C;
        double ss = 0, a = 0;
        for (int c = 0; c < C; c++) ss += r[c] * r[c];
        const double s = 1 / sqrt(ss / C + eps);
        for (int c = 0; c < C; c++) a += g[c] * w[c] * r[c];
        for (int j = 0; j < C; j++) dx[(size_t)n * C + j] = s * g[j] * w[j] - a * r[j] * s * s * s / C;
        for (int c = 0; c < C; c++) dw[c] += g[c] * r[c] * s;
    }
}
/* apply_rotary_pos_emb: q * cos + rotate_half(q) * sin, with cos/sin of
 * the table's (cos, sin) pairs (emb = cat(freqs, freqs)); sgn -1: the
 * transpose */
static void ref_rope(double *x, const double *cs, int B, int T, int t0, int nh, int HS, int ld, double sgn)
{
    const int h2 = HS / 2;
    double *q = dalloc((size_t)HS);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int h = 0; h < nh; h++) {
                double *row = x + ((size_t)b * T + t) * ld + (size_t)h * HS;
                memcpy(q, row, sizeof(double) * HS);
                for (int j = 0; j < HS; j++) {
                    const int i = j % h2;
                    const double c = cs[((size_t)(t0 + t) * h2 + i) * 2], s = sgn * cs[((size_t)(t0 + t) * h2 + i) * 2 + 1];
                    const double rot = j < h2 ? -q[j + h2] : q[j - h2];
                    row[j] = q[j] * c + rot * s;
                }
            }
    free(q);
}
static double silu(double g) { return g / (1 + exp(-g)); }
static void ref_swiglu_fwd(double *out, const double *inp, int N, int F)
{
    for (int n = 0; n < N; n++)
        for (int i = 0; i < F; i++) out[(size_t)n * F + i] = silu(inp[(size_t)n * 2 * F + i]) * inp[(size_t)n * 2 * F + F + i];
}
static void ref_swiglu_bwd(double *dinp, const double *dout, const double *inp, int N, int F)
{
    for (int n = 0; n < N; n++)
        for (int i = 0; i < F; i++) {
            const double g = inp[(size_t)n * 2 * F + i], u = inp[(size_t)n * 2 * F + F + i], d = dout[(size_t)n * F + i];
            const double s = 1 / (1 + exp(-g));
            dinp[(size_t)n * 2 * F + i] = d * u * (s + g * s * (1 - s));
            dinp[(size_t)n * 2 * F + F + i] = d * silu(g);
        }
}

/* ---- RMSNorm: finite differences of the double table ---------------------- */
typedef struct {
    opcase c;
    int N, C;
    double eps;
    double *x, *w, *out, *rstd, *R;
} rms_case;

static double rms_loss(opcase *c)
{
    rms_case *r = (rms_case *)c;
    D->rmsnorm_fwd(r->out, r->rstd, r->x, r->w, r->N, r->C, r->eps);
    return dot(r->out, r->R, (size_t)r->N * r->C);
}
static void rms_bwd(opcase *c, double **g)
{
    rms_case *r = (rms_case *)c;
    rms_loss(c);
    D->rmsnorm_bwd(g[0], g[1], r->R, r->x, r->w, r->rstd, r->N, r->C);
}

static void test_rmsnorm_fd(void)
{
    rms_case r = {{"rmsnorm (f64)", rms_loss, rms_bwd, 0, 2, {"inp", "w"}, {0}, {0}}, 0, 0, 0, 0, 0, 0, 0, 0};
    r.N = randint(4, 8), r.C = randint(6, 12), r.eps = 1e-5;
    const size_t n = (size_t)r.N * r.C;
    r.x = dalloc(n), r.out = dalloc(n), r.R = dalloc(n), r.w = dalloc(r.C), r.rstd = dalloc(r.N);
    randn(r.x, n, 1.5), randn(r.R, n, 1), randu(r.w, r.C, 0.5, 1.5);
    r.c.w[0] = r.x, r.c.wn[0] = n, r.c.w[1] = r.w, r.c.wn[1] = r.C;
    run_case(&r.c);
    /* NULL dinp: dw alone, the same */
    double *dx = dalloc(n), *dw = dalloc(r.C), *dw2 = dalloc(r.C);
    rms_loss(&r.c);
    D->rmsnorm_bwd(dx, dw, r.R, r.x, r.w, r.rstd, r.N, r.C);
    D->rmsnorm_bwd(NULL, dw2, r.R, r.x, r.w, r.rstd, r.N, r.C);
    tap_ok(relerr(dw2, dw, r.C) == 0, "rmsnorm: backward with dinp NULL gives the same dw");
    free(dx), free(dw), free(dw2);
    free(r.x), free(r.out), free(r.R), free(r.w), free(r.rstd);
}

/* ---- RMSNorm: every table against the reference ---------------------------- */
static void test_rmsnorm_tables(int N, int C, double eps)
{
    int nt;
    const tab *ts = tabs(&nt);
    const size_t n = (size_t)N * C;
    double *x0 = dalloc(n), *w0 = dalloc(C), *g0 = dalloc(n), *dx0 = dalloc(n), *dw0 = dalloc(C);
    randn(x0, n, 1.5), randu(w0, C, 0.5, 1.5), randn(g0, n, 1), randn(dx0, n, 1), randn(dw0, C, 1);
    for (int r = 0; r < N; r++) x0[(size_t)r * C] += 8.0 * (r % 3); /* an outlier channel in some rows */
    for (int k = 0; k < nt; k++) {
        const tab *t = &ts[k];
        const pt_dtype A = t->o->act, Z = t->o->acc;
        double *x = ddup(x0, n), *w = ddup(w0, C), *g = ddup(g0, n), *dxp = ddup(dx0, n), *dwp = ddup(dw0, C);
        quant(A, x, n), quant(A, w, C), quant(A, g, n), quant(A, dxp, n), quant(Z, dwp, C);
        double *out = dalloc(n), *rstd = dalloc(N), *dx = dalloc(n), *dw = dalloc(C);
        ref_rms_fwd(out, rstd, x, w, N, C, eps);
        ref_rms_bwd(dx, dw, g, x, w, N, C, eps);
        for (size_t i = 0; i < n; i++) dx[i] += dxp[i];
        for (int c = 0; c < C; c++) dw[c] += dwp[c];
        void *tx = tbuf(A, x, n), *tw = tbuf(A, w, C), *tg = tbuf(A, g, n), *tdx = tbuf(A, dxp, n),
             *tdw = tbuf(Z, dwp, C), *tout = tbuf(A, out, n), *trs = tbuf(Z, rstd, N);
        memset(tout, 0, n * dsz(A)), memset(trs, 0, N * dsz(Z));
        t->o->rmsnorm_fwd(tout, trs, tx, tw, N, C, eps);
        const double eo = terr(A, tout, out, n), er = terr(Z, trs, rstd, N);
        tap_ok(eo <= t->tact && er <= t->tacc,
               "rmsnorm_fwd %s N=%d C=%d eps %g: out err %.1e (tol %.0e), rstd err %.1e (tol %.0e)", t->o->name, N, C,
               eps, eo, t->tact, er, t->tacc);
        t->o->rmsnorm_bwd(tdx, tdw, tg, tx, tw, trs, N, C);
        const double ed = terr(A, tdx, dx, n), ew = terr(Z, tdw, dw, C);
        tap_ok(ed <= t->tact && ew <= t->tacc,
               "rmsnorm_bwd %s N=%d C=%d: dinp (+=) err %.1e (tol %.0e), dw (+=) err %.1e (tol %.0e)", t->o->name, N, C,
               ed, t->tact, ew, t->tacc);
        free(tx), free(tw), free(tg), free(tdx), free(tdw), free(tout), free(trs);
        free(x), free(w), free(g), free(dxp), free(dwp), free(out), free(rstd), free(dx), free(dw);
    }
    free(x0), free(w0), free(g0), free(dx0), free(dw0);
}

/* ---- RMSNorm pieces -------------------------------------------------------- */
/* The pieces over columns split in `parts` on table o (buffers of its
 * types; the group sums here, in the ACC type, as an allreduce would):
 * out, rstd forward; then dx, dw += backward from dy. */
static void rmsp_run(const pt_ops *o, int parts, void *out, void *rstd, void *dx, void *dw, const void *dy, const void *x,
                     const void *w, int N, int C, double eps, int *alias_ok)
{
    const int Cl = C / parts;
    const size_t ea = dsz(o->act), ez = dsz(o->acc);
    char *xs = xcalloc((size_t)N * Cl, ea), *os = xcalloc((size_t)N * Cl, ea), *dys = xcalloc((size_t)N * Cl, ea),
         *dxs = xcalloc((size_t)N * Cl, ea);
    void *s = xcalloc(N, ez);
    double *tot = dalloc(N), *v = dalloc(N);
#define PIECE(dst, src, k) o->copy2d(dst, ea * Cl, (const char *)(src) + (size_t)(k) * Cl * ea, ea * C, ea * Cl, (size_t)N)
#define UNPIECE(dst, src, k) o->copy2d((char *)(dst) + (size_t)(k) * Cl * ea, ea * C, src, ea * Cl, ea * Cl, (size_t)N)
    for (int k = 0; k < parts; k++) {
        PIECE(xs, x, k);
        o->rmsnorm_rowsumsq(s, xs, N, Cl);
        tget(v, o->acc, s, N);
        for (int n = 0; n < N; n++) tot[n] = (k ? tot[n] : 0) + v[n];
    }
    void *ts = tbuf(o->acc, tot, N);
    for (int k = 0; k < parts; k++) {
        PIECE(xs, x, k);
        o->rmsnorm_apply(os, rstd, xs, ts, (const char *)w + (size_t)k * Cl * ea, N, Cl, C, eps);
        UNPIECE(out, os, k);
    }
    /* and with rstd in the sums' buffer (ops.h allows it): the same rstd */
    if (alias_ok) {
        o->copy(s, ts, (size_t)N, o->acc);
        o->rmsnorm_apply(os, s, x, s, w, N, C, C, eps);
        o->axpy(s, -1, rstd, (size_t)N, o->acc);
        *alias_ok = parts == 1 && o->sumsq(s, (size_t)N, o->acc) == 0;
    }
    for (int k = 0; k < parts; k++) {
        PIECE(xs, x, k), PIECE(dys, dy, k);
        o->rmsnorm_bwd_rowsums(s, dys, xs, (const char *)w + (size_t)k * Cl * ea, rstd, N, Cl);
        tget(v, o->acc, s, N);
        for (int n = 0; n < N; n++) tot[n] = (k ? tot[n] : 0) + v[n];
    }
    free(ts);
    ts = tbuf(o->acc, tot, N);
    for (int k = 0; k < parts; k++) {
        PIECE(xs, x, k), PIECE(dys, dy, k), PIECE(dxs, dx, k);
        o->rmsnorm_bwd_apply(dxs, (char *)dw + (size_t)k * Cl * ez, dys, xs, (const char *)w + (size_t)k * Cl * ea,
                             rstd, ts, N, Cl, C);
        UNPIECE(dx, dxs, k);
    }
#undef PIECE
#undef UNPIECE
    free(xs), free(os), free(dys), free(dxs), free(s), free(tot), free(v), free(ts);
}

typedef struct {
    opcase c;
    int N, C, parts;
    double eps;
    double *x, *w, *out, *rstd, *R;
} rmsp_case;

static double rmsp_loss(opcase *c)
{
    rmsp_case *e = (rmsp_case *)c;
    const size_t n = (size_t)e->N * e->C;
    double *dx = dalloc(n), *dw = dalloc(e->C);
    rmsp_run(D, e->parts, e->out, e->rstd, dx, dw, e->R, e->x, e->w, e->N, e->C, e->eps, NULL);
    free(dx), free(dw);
    return dot(e->out, e->R, n);
}
static void rmsp_bwd(opcase *c, double **g)
{
    rmsp_case *e = (rmsp_case *)c;
    rmsp_run(D, e->parts, e->out, e->rstd, g[0], g[1], e->R, e->x, e->w, e->N, e->C, e->eps, NULL);
}

static void test_rmsnorm_pieces(void)
{
    for (int parts = 1; parts <= 3; parts++) {
        char name[48];
        snprintf(name, sizeof name, "rmsnorm in %d column pieces (f64)", parts);
        rmsp_case e = {{name, rmsp_loss, rmsp_bwd, 0, 2, {"inp", "w"}, {0}, {0}}, 0, 0, 0, 0, 0, 0, 0, 0, 0};
        e.parts = parts, e.N = randint(3, 7), e.C = parts * randint(2, 5), e.eps = 1e-6;
        const size_t n = (size_t)e.N * e.C;
        e.x = dalloc(n), e.w = dalloc(e.C), e.out = dalloc(n), e.rstd = dalloc(e.N), e.R = dalloc(n);
        randn(e.x, n, 2), randn(e.w, e.C, 1), randn(e.R, n, 1);
        e.c.w[0] = e.x, e.c.wn[0] = n, e.c.w[1] = e.w, e.c.wn[1] = e.C;
        /* against the whole-row kernels */
        double *o = dalloc(n), *r = dalloc(e.N), *g1[2] = {dalloc(n), dalloc(e.C)}, *g2[2] = {dalloc(n), dalloc(e.C)};
        D->rmsnorm_fwd(o, r, e.x, e.w, e.N, e.C, e.eps);
        D->rmsnorm_bwd(g1[0], g1[1], e.R, e.x, e.w, r, e.N, e.C);
        rmsp_bwd(&e.c, g2);
        const double ef = fmax(relerr(e.out, o, n), relerr(e.rstd, r, e.N));
        const double eb = fmax(relerr(g2[0], g1[0], n), relerr(g2[1], g1[1], e.C));
        tap_ok(ef <= 1e-14 && eb <= 1e-13, "%s: == rmsnorm_fwd/bwd on whole rows (N=%d C=%d, err fwd %.1e, bwd %.1e)",
               name, e.N, e.C, ef, eb);
        run_case(&e.c);
        free(o), free(r), free(g1[0]), free(g1[1]), free(g2[0]), free(g2[1]);
        free(e.x), free(e.w), free(e.out), free(e.rstd), free(e.R);
    }
    /* the f32 and bf16 tables: two pieces against their whole-row ops */
    int nt;
    const tab *ts = tabs(&nt);
    const int N = 37, C = 96;
    const size_t n = (size_t)N * C;
    double *x = dalloc(n), *w = dalloc(C), *dy = dalloc(n);
    randn(x, n, 1.5), randu(w, C, 0.5, 1.5), randn(dy, n, 1);
    for (int k = 1; k < nt; k++) {
        const pt_ops *o = ts[k].o;
        const pt_dtype A = o->act, Z = o->acc;
        double *zero = dalloc(n);
        void *tx = tbuf(A, x, n), *tw = tbuf(A, w, C), *tdy = tbuf(A, dy, n);
        void *o1 = tbuf(A, zero, n), *r1 = tbuf(Z, zero, N), *dx1 = tbuf(A, zero, n), *dw1 = tbuf(Z, zero, C);
        void *o2 = tbuf(A, zero, n), *r2 = tbuf(Z, zero, N), *dx2 = tbuf(A, zero, n), *dw2 = tbuf(Z, zero, C);
        o->rmsnorm_fwd(o1, r1, tx, tw, N, C, 1e-5);
        o->rmsnorm_bwd(dx1, dw1, tdy, tx, tw, r1, N, C);
        rmsp_run(o, 2, o2, r2, dx2, dw2, tdy, tx, tw, N, C, 1e-5, NULL);
        double *a = dalloc(n), *b = dalloc(n);
        double e = 0;
        tget(a, A, o1, n), tget(b, A, o2, n), e = fmax(e, relerr(b, a, n) / ts[k].tact);
        tget(a, Z, r1, N), tget(b, Z, r2, N), e = fmax(e, relerr(b, a, N) / ts[k].tacc);
        tget(a, A, dx1, n), tget(b, A, dx2, n), e = fmax(e, relerr(b, a, n) / ts[k].tact);
        tget(a, Z, dw1, C), tget(b, Z, dw2, C), e = fmax(e, relerr(b, a, C) / ts[k].tacc);
        tap_ok(e <= 1, "rmsnorm in 2 column pieces %s N=%d C=%d: == the whole-row ops (worst err / tol %.2f)", o->name,
               N, C, e);
        /* one piece, and rstd written over the sums' buffer */
        int alias = 0;
        rmsp_run(o, 1, o2, r2, dx2, dw2, tdy, tx, tw, N, C, 1e-5, &alias);
        tap_ok(alias, "rmsnorm_apply %s: rstd written over the group sums' buffer is the same rstd", o->name);
        free(a), free(b), free(zero), free(tx), free(tw), free(tdy), free(o1), free(r1), free(dx1), free(dw1), free(o2),
            free(r2), free(dx2), free(dw2);
    }
    free(x), free(w), free(dy);
}

/* ---- RoPE ------------------------------------------------------------------ */
/* Llama 3.1's rope_scaling and base */
#define L31_THETA 500000.0
#define L31_LOW 1.0
#define L31_HIGH 4.0
#define L31_CTX 8192

/* a table of doubles (the f64 table's ACC) from pt_rope_table's floats */
static double *rope_table_d(int Tmax, int HS, double theta, double factor)
{
    float *f = xcalloc((size_t)Tmax * HS, sizeof(float));
    if (pt_rope_table(f, Tmax, HS, theta, factor, L31_LOW, L31_HIGH, L31_CTX) != PT_OK) {
        printf("Bail out! pt_rope_table: %s\n", pt_errmsg());
        exit(1);
    }
    double *d = dalloc((size_t)Tmax * HS);
    for (size_t i = 0; i < (size_t)Tmax * HS; i++) d[i] = f[i];
    free(f);
    return d;
}

typedef struct {
    opcase c;
    int B, T, t0, nh, HS, ld;
    double *x, *cs, *out, *R;
} rope_case;

static double rope_loss(opcase *c)
{
    rope_case *r = (rope_case *)c;
    const size_t n = (size_t)r->B * r->T * r->ld;
    memcpy(r->out, r->x, n * sizeof(double));
    D->rope_fwd(r->out, r->cs, r->B, r->T, r->t0, r->nh, r->HS, r->ld);
    return dot(r->out, r->R, n);
}
static void rope_bwd(opcase *c, double **g)
{
    rope_case *r = (rope_case *)c;
    memcpy(g[0], r->R, (size_t)r->B * r->T * r->ld * sizeof(double));
    D->rope_bwd(g[0], r->cs, r->B, r->T, r->t0, r->nh, r->HS, r->ld);
}

static void test_rope_fd(void)
{
    /* writes: rope_bwd turns dy into dx in place.  The columns past nh*HS
     * carry dy through unchanged (their derivative is the identity). */
    rope_case r = {{"rope (f64)", rope_loss, rope_bwd, 1, 1, {"x"}, {0}, {0}}, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    r.B = 2, r.T = randint(2, 4), r.t0 = randint(0, 5), r.nh = 2, r.HS = 2 * randint(2, 4), r.ld = r.nh * r.HS + 3;
    const size_t n = (size_t)r.B * r.T * r.ld;
    r.cs = rope_table_d(r.t0 + r.T, r.HS, 10000.0, 0);
    r.x = dalloc(n), r.out = dalloc(n), r.R = dalloc(n);
    randn(r.x, n, 1), randn(r.R, n, 1);
    r.c.w[0] = r.x, r.c.wn[0] = n;
    run_case(&r.c);
    free(r.cs), free(r.x), free(r.out), free(r.R);
}

static void test_rope_tables(int B, int T, int t0, int nh, int HS, int ld, double factor)
{
    int nt;
    const tab *ts = tabs(&nt);
    const int Tmax = t0 + T + 3;
    double *cs = rope_table_d(Tmax, HS, L31_THETA, factor);
    const size_t n = (size_t)B * T * ld;
    double *x0 = dalloc(n);
    randn(x0, n, 1);
    for (int k = 0; k < nt; k++) {
        const tab *t = &ts[k];
        const pt_dtype A = t->o->act, Z = t->o->acc;
        double *x = ddup(x0, n), *ref = dalloc(n), *back = dalloc(n);
        quant(A, x, n);
        memcpy(ref, x, n * sizeof(double));
        ref_rope(ref, cs, B, T, t0, nh, HS, ld, 1);
        void *tx = tbuf(A, x, n), *tcs = tbuf(Z, cs, (size_t)Tmax * HS);
        t->o->rope_fwd(tx, tcs, B, T, t0, nh, HS, ld);
        const double ef = terr(A, tx, ref, n);
        /* the columns past nh*HS: the input's bits */
        double *y = dalloc(n);
        tget(y, A, tx, n);
        int kept = 1;
        for (int r = 0; r < B * T; r++)
            for (int c = nh * HS; c < ld; c++) kept &= y[(size_t)r * ld + c] == x[(size_t)r * ld + c];
        tap_ok(ef <= t->tact && kept,
               "rope_fwd %s B=%d T=%d t0=%d nh=%d HS=%d ld=%d factor %g: err %.1e (tol %.0e), columns past nh*HS %s",
               t->o->name, B, T, t0, nh, HS, ld, factor, ef, t->tact, kept ? "untouched" : "CHANGED");
        /* backward: the transpose rotation of a gradient, in place */
        double *dy = dalloc(n), *dref = dalloc(n);
        randn(dy, n, 1);
        quant(A, dy, n);
        memcpy(dref, dy, n * sizeof(double));
        ref_rope(dref, cs, B, T, t0, nh, HS, ld, -1);
        void *tdy = tbuf(A, dy, n);
        t->o->rope_bwd(tdy, tcs, B, T, t0, nh, HS, ld);
        const double eb = terr(A, tdy, dref, n);
        tap_ok(eb <= t->tact, "rope_bwd %s B=%d T=%d t0=%d HS=%d factor %g: err %.1e (tol %.0e)", t->o->name, B, T, t0,
               HS, factor, eb, t->tact);
        /* rope_bwd(rope_fwd(x)) = x: up to cos^2 + sin^2 of the float table
         * (1 within a few 2^-24) and the ACT roundings */
        t->o->rope_bwd(tx, tcs, B, T, t0, nh, HS, ld);
        tget(back, A, tx, n);
        const double tol = A == PT_BF16 ? BF16_TOL : 1e-6, ei = relerr(back, x, n);
        tap_ok(ei <= tol, "rope_bwd(rope_fwd(x)) = x %s: err %.1e (tol %.0e)", t->o->name, ei, tol);
        free(tx), free(tcs), free(tdy), free(x), free(ref), free(back), free(y), free(dy), free(dref);
    }
    free(cs), free(x0);
}

/* The table from scratch, as HF writes it: inv_freq = 1/(theta^(arange(0,
 * HS, 2)/HS)); llama3: torch.where over wavelen, the smooth factor for the
 * band in between. */
static void ref_inv_freq(double *inv, int HS, double theta, double factor, double lowf, double highf, int ctx)
{
    const double pi = acos(-1.0);
    for (int i = 0; i < HS / 2; i++) {
        double f = 1.0 / pow(theta, (double)(2 * i) / (double)HS);
        if (factor > 0) {
            const double low_wl = ctx / lowf, high_wl = ctx / highf, wl = 2 * pi / f;
            const double llama = wl > low_wl ? f / factor : f;
            const double smooth = (ctx / wl - lowf) / (highf - lowf);
            const double smoothed = (1 - smooth) * llama / factor + smooth * llama;
            const int medium = !(wl < high_wl) && !(wl > low_wl);
            f = medium ? smoothed : llama;
        }
        inv[i] = f;
    }
}

static void test_rope_table(void)
{
    const int HS = 128, Tmax = 4096, h2 = HS / 2;
    const double factors[3] = {0, 8, 32};
    float *cs = xcalloc((size_t)Tmax * HS, sizeof(float)), *cs0 = xcalloc((size_t)Tmax * HS, sizeof(float));
    double inv[64];
    pt_rope_table(cs0, Tmax, HS, L31_THETA, 0, L31_LOW, L31_HIGH, L31_CTX);
    for (int f = 0; f < 3; f++) {
        int rc = pt_rope_table(cs, Tmax, HS, L31_THETA, factors[f], L31_LOW, L31_HIGH, L31_CTX);
        ref_inv_freq(inv, HS, L31_THETA, factors[f], L31_LOW, L31_HIGH, L31_CTX);
        double e = 0;
        int bands[3] = {0, 0, 0}; /* unchanged, divided by factor, smoothed */
        for (int i = 0; i < h2; i++) {
            const double base = 1.0 / pow(L31_THETA, (double)(2 * i) / HS), q = inv[i] / base;
            bands[fabs(q - 1) < 1e-12 ? 0 : factors[f] > 0 && fabs(q * factors[f] - 1) < 1e-12 ? 1 : 2]++;
            for (int p = 0; p < Tmax; p++) {
                const double a = (double)p * inv[i];
                e = fmax(e, fabs(cs[((size_t)p * h2 + i) * 2] - cos(a)));
                e = fmax(e, fabs(cs[((size_t)p * h2 + i) * 2 + 1] - sin(a)));
            }
        }
        tap_ok(rc == PT_OK && e <= 1e-7,
               "pt_rope_table HS=%d theta %g factor %g (low %g high %g ctx %d), Tmax %d: max|cs - (cos, sin)| %.1e "
               "(tol 1e-7); pairs unchanged %d, divided by the factor %d, smoothed %d",
               HS, L31_THETA, factors[f], L31_LOW, L31_HIGH, L31_CTX, Tmax, e, bands[0], bands[1], bands[2]);
        if (factors[f] > 0) {
            /* Llama 3.1's bands with theta 500000, HS 128: the high
             * frequencies kept, the lowest divided, some in between */
            const int ok = bands[0] > 0 && bands[1] > 0 && bands[2] > 0 &&
                           !memcmp(cs, cs0, sizeof(float) * 2) && /* p 0 */
                           cs[((size_t)1 * h2 + 0) * 2 + 1] == cs0[((size_t)1 * h2 + 0) * 2 + 1] &&
                           cs[((size_t)1 * h2 + h2 - 1) * 2 + 1] != cs0[((size_t)1 * h2 + h2 - 1) * 2 + 1];
            tap_ok(ok, "pt_rope_table factor %g: the first pair's angles unchanged, the last pair's scaled",
                   factors[f]);
        }
    }
    /* p 0 is the identity rotation */
    int id = 1;
    for (int i = 0; i < h2; i++) id &= cs[2 * i] == 1.0f && cs[2 * i + 1] == 0.0f;
    tap_ok(id, "pt_rope_table: position 0 is (cos, sin) = (1, 0) in every pair");
    /* refusals */
    int r1 = pt_rope_table(cs, 4, 7, 10000, 0, 1, 4, 8192);
    tap_ok(r1 == PT_EINVAL && strstr(pt_errmsg(), "HS 7"), "pt_rope_table refuses an odd HS: %s", pt_errmsg());
    int r2 = pt_rope_table(cs, 4, 8, 10000, 8, 4, 1, 8192);
    tap_ok(r2 == PT_EINVAL && strstr(pt_errmsg(), "low_freq"), "pt_rope_table refuses low_freq >= high_freq: %s",
           pt_errmsg());
    int r3 = pt_rope_table(cs, 0, 8, 10000, 0, 1, 4, 8192);
    tap_ok(r3 == PT_EINVAL, "pt_rope_table refuses Tmax 0: %s", pt_errmsg());
    free(cs), free(cs0);
}

/* ---- SwiGLU ---------------------------------------------------------------- */
typedef struct {
    opcase c;
    int N, F;
    double *inp, *out, *R;
} sw_case;

static double sw_loss(opcase *c)
{
    sw_case *s = (sw_case *)c;
    D->swiglu_fwd(s->out, s->inp, s->N, s->F);
    return dot(s->out, s->R, (size_t)s->N * s->F);
}
static void sw_bwd(opcase *c, double **g)
{
    sw_case *s = (sw_case *)c;
    D->swiglu_bwd(g[0], s->R, s->inp, s->N, s->F);
}

static void test_swiglu_fd(void)
{
    sw_case s = {{"swiglu (f64)", sw_loss, sw_bwd, 1, 1, {"inp"}, {0}, {0}}, 0, 0, 0, 0, 0};
    s.N = randint(3, 6), s.F = randint(4, 9);
    const size_t n = (size_t)s.N * s.F;
    s.inp = dalloc(2 * n), s.out = dalloc(n), s.R = dalloc(n);
    randn(s.inp, 2 * n, 2), randn(s.R, n, 1);
    s.c.w[0] = s.inp, s.c.wn[0] = 2 * n;
    run_case(&s.c);
    free(s.inp), free(s.out), free(s.R);
}

static void test_swiglu_tables(int N, int F)
{
    int nt;
    const tab *ts = tabs(&nt);
    const size_t n = (size_t)N * F;
    double *in0 = dalloc(2 * n), *g0 = dalloc(n);
    randn(in0, 2 * n, 3), randn(g0, n, 1);
    in0[0] = 40, in0[1] = -40, in0[2] = -100, in0[3] = 100; /* saturated gates: silu -> g, 0 */
    for (int k = 0; k < nt; k++) {
        const tab *t = &ts[k];
        const pt_dtype A = t->o->act;
        double *in = ddup(in0, 2 * n), *g = ddup(g0, n), *out = dalloc(n), *din = dalloc(2 * n);
        quant(A, in, 2 * n), quant(A, g, n);
        ref_swiglu_fwd(out, in, N, F);
        ref_swiglu_bwd(din, g, in, N, F);
        double *pre = dalloc(2 * n);
        randn(pre, 2 * n, 1); /* the backward writes: what is there goes */
        void *tin = tbuf(A, in, 2 * n), *tg = tbuf(A, g, n), *tout = tbuf(A, g, n), *tdin = tbuf(A, pre, 2 * n);
        t->o->swiglu_fwd(tout, tin, N, F);
        t->o->swiglu_bwd(tdin, tg, tin, N, F);
        const double ef = terr(A, tout, out, n), eb = terr(A, tdin, din, 2 * n);
        double *y = dalloc(n);
        tget(y, A, tout, n);
        const int fin = all_finite(y, n);
        tap_ok(ef <= t->tact && eb <= t->tact && fin,
               "swiglu %s N=%d F=%d (gates to +-100): fwd err %.1e, bwd (writes) err %.1e (tol %.0e)%s", t->o->name,
               N, F, ef, eb, t->tact, fin ? "" : ", NOT FINITE");
        free(tin), free(tg), free(tout), free(tdin), free(in), free(g), free(out), free(din), free(pre), free(y);
    }
    free(in0), free(g0);
}

/* ---- threads --------------------------------------------------------------- */
/* Every op of table o once on fixed inputs, its outputs in out (bytes; the
 * caller compares runs): RMSNorm whole and in pieces (Cl == C), RoPE,
 * SwiGLU.  N spans several PT_RBLK row blocks. */
enum { TN = 97, TC = 160, TB = 2, TT = 20, TNH = 4, THS = 32, TF = 72 };
static size_t thr_run(const pt_ops *o, unsigned char *out, const double *x0, const double *w0, const double *g0,
                      const double *cs0)
{
    const pt_dtype A = o->act, Z = o->acc;
    const size_t n = (size_t)TN * TC, nr = (size_t)TB * TT * TNH * THS;
    void *x = tbuf(A, x0, n), *w = tbuf(A, w0, TC), *g = tbuf(A, g0, n), *cs = tbuf(Z, cs0, (size_t)TT * THS);
    void *o1 = tbuf(A, g0, n), *r1 = tbuf(Z, g0, TN), *dx = tbuf(A, g0, n), *dw = tbuf(Z, g0, TC), *s = tbuf(Z, g0, TN),
         *o2 = tbuf(A, g0, n), *dx2 = tbuf(A, g0, n), *dw2 = tbuf(Z, g0, TC), *q = tbuf(A, x0, nr),
         *sw = tbuf(A, g0, (size_t)TN * TF), *dsw = tbuf(A, g0, (size_t)TN * 2 * TF);
    o->rmsnorm_fwd(o1, r1, x, w, TN, TC, 1e-5);
    o->rmsnorm_bwd(dx, dw, g, x, w, r1, TN, TC);
    o->rmsnorm_rowsumsq(s, x, TN, TC);
    o->rmsnorm_apply(o2, s, x, s, w, TN, TC, TC, 1e-5);
    o->rmsnorm_bwd_rowsums(s, g, x, w, r1, TN, TC);
    o->rmsnorm_bwd_apply(dx2, dw2, g, x, w, r1, s, TN, TC, TC);
    o->rope_fwd(q, cs, TB, TT, 0, TNH, THS, TNH * THS);
    o->rope_bwd(q, cs, TB, TT, 0, TNH - 1, THS, TNH * THS);
    o->swiglu_fwd(sw, x, TN, TF);
    o->swiglu_bwd(dsw, g, x, TN, TF);
    const struct { void *p; size_t bytes; } parts[] = {
        {o1, n * dsz(A)}, {r1, TN * dsz(Z)}, {dx, n * dsz(A)}, {dw, TC * dsz(Z)}, {o2, n * dsz(A)},
        {s, TN * dsz(Z)}, {dx2, n * dsz(A)}, {dw2, TC * dsz(Z)}, {q, nr * dsz(A)},
        {sw, (size_t)TN * TF * dsz(A)}, {dsw, (size_t)TN * 2 * TF * dsz(A)},
    };
    size_t k = 0;
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        if (out) memcpy(out + k, parts[i].p, parts[i].bytes);
        k += parts[i].bytes;
        free(parts[i].p);
    }
    free(x), free(w), free(g), free(cs);
    return k;
}

static void test_threads(void)
{
#ifdef _OPENMP
    const pt_backend *be = pt_backend_get("cpu");
    const size_t n = (size_t)TN * TC;
    double *x = dalloc(n), *w = dalloc(TC), *g = dalloc(n), *cs = rope_table_d(TT, THS, 10000.0, 0);
    randn(x, n, 2), randu(w, TC, 0.5, 1.5), randn(g, n, 1);
    int nt;
    const tab *ts = tabs(&nt);
    for (int k = 1; k < nt; k++) {
        const pt_ops *o = ts[k].o;
        const size_t bytes = thr_run(o, NULL, x, w, g, cs);
        unsigned char *one = xcalloc(bytes, 1), *many = xcalloc(bytes, 1);
        be->set_threads(1);
        thr_run(o, one, x, w, g, cs);
        int same = 1;
        for (int t = 2; t <= 3; t++) {
            be->set_threads(t);
            for (int rep = 0; rep < 3; rep++) { /* races show up intermittently */
                thr_run(o, many, x, w, g, cs);
                same &= !memcmp(one, many, bytes);
            }
        }
        be->set_threads(1);
        tap_ok(same, "%s: 2 and 3 OpenMP threads give the 1-thread bytes of every Llama op (3 runs each)", o->name);
        free(one), free(many);
    }
    free(x), free(w), free(g), free(cs);
#else
    tap_diag("built without OpenMP: thread comparison not run");
#endif
}

int main(void)
{
    const uint64_t seed = test_seed();
    pt_rng_seed(&rng, seed, 0);

    test_rmsnorm_fd();
    test_rmsnorm_tables(7, 37, 1e-5);
    test_rmsnorm_tables(67, 768, 1e-6); /* more than two PT_RBLK row blocks, a vector width */
    test_rmsnorm_pieces();

    test_rope_table();
    test_rope_fd();
    test_rope_tables(2, 5, 3, 3, 8, 3 * 8 + 5, 0);
    test_rope_tables(2, 7, 100, 4, 128, (4 + 2 * 2) * 128, 8);  /* q in a fused qkv row: ld (nh + 2 nkv) HS */
    test_rope_tables(1, 9, 8000, 2, 64, 2 * 64, 32);

    test_swiglu_fd();
    test_swiglu_tables(5, 37);
    test_swiglu_tables(33, 256);

    test_threads();

    tap_diag("worst finite-difference error over these ops: %.2e (bound %.0e)", g_worst_fd, FD_TOL);
    return tap_done();
}
