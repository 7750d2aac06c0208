/* SPDX-License-Identifier: MIT */
/* Tests of the LayerNorm kernels of the CPU tables (lib/backend/ops.h,
 * cpu_ops.inc): the whole-row layernorm_fwd / layernorm_bwd and the
 * tensor-parallel pieces (layernorm_rowsum, _rowvar, _apply, _bwd_rowsums,
 * _bwd_apply) over columns split in 1, 2 and 3 parts (the family of
 * tests/gpu/test_ops_norm.c).
 *
 *  1. Every backward of the double table (pt_cpu_ops_f64) against central
 *     finite differences of a scalar loss L = sum(out * R) (R fixed random),
 *     for every input and parameter element (a random subset of FD_SAMPLES
 *     for big tensors), and the "backward accumulates (+=)" contract (two
 *     calls on pre-filled random buffers) and the NULL skips.
 *  2. The forward against PyTorch's LayerNorm written here (biased variance,
 *     eps 1e-5), the saved mean and rstd; the pieces against the whole-row
 *     kernels.
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

/* ---- layernorm -------------------------------------------------------------- */
typedef struct {
    opcase c;
    int N, C;
    double *inp, *w, *b, *out, *mean, *rstd, *R;
} ln_case;

static double ln_loss(opcase *c)
{
    ln_case *l = (ln_case *)c;
    D->layernorm_fwd(l->out, l->mean, l->rstd, l->inp, l->w, l->b, l->N, l->C);
    return dot(l->out, l->R, (size_t)l->N * l->C);
}
static void ln_bwd(opcase *c, double **g)
{
    ln_case *l = (ln_case *)c;
    ln_loss(c);
    D->layernorm_bwd(g[0], g[1], g[2], l->R, l->inp, l->w, l->mean, l->rstd, l->N, l->C);
}

static void test_layernorm(void)
{
    ln_case l = {{"layernorm", ln_loss, ln_bwd, 0, 3, {"inp", "w", "b"}, {0}, {0}}, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    l.N = randint(4, 8), l.C = randint(6, 12);
    size_t n = (size_t)l.N * l.C;
    l.inp = dalloc(n), l.out = dalloc(n), l.R = dalloc(n);
    l.w = dalloc(l.C), l.b = dalloc(l.C), l.mean = dalloc(l.N), l.rstd = dalloc(l.N);
    randn(l.inp, n, 1.5), randn(l.R, n, 1), randu(l.w, l.C, 0.5, 1.5), randn(l.b, l.C, 0.5);
    for (int r = 0; r < l.N; r++) /* rows with a non-zero mean */
        for (int c = 0; c < l.C; c++) l.inp[(size_t)r * l.C + c] += r - 2.0;
    l.c.w[0] = l.inp, l.c.wn[0] = n, l.c.w[1] = l.w, l.c.wn[1] = l.C, l.c.w[2] = l.b, l.c.wn[2] = l.C;

    /* forward reference: PyTorch LayerNorm, biased variance, eps 1e-5 */
    ln_loss(&l.c);
    double *ref = dalloc(n), ems = 0;
    for (int r = 0; r < l.N; r++) {
        const double *x = l.inp + (size_t)r * l.C;
        double m = 0, v = 0;
        for (int c = 0; c < l.C; c++) m += x[c] / l.C;
        for (int c = 0; c < l.C; c++) v += (x[c] - m) * (x[c] - m) / l.C;
        for (int c = 0; c < l.C; c++)
            ref[(size_t)r * l.C + c] = (x[c] - m) / sqrt(v + 1e-5) * l.w[c] + l.b[c];
        ems = fmax(ems, fabs(l.mean[r] - m) + fabs(l.rstd[r] - 1 / sqrt(v + 1e-5)) / l.rstd[r]);
    }
    double ef = relerr(l.out, ref, n);
    tap_ok(ef <= 1e-13 && ems <= 1e-13,
           "layernorm: forward and saved mean/rstd match the reference (N=%d C=%d, err %.1e, %.1e)",
           l.N, l.C, ef, ems);
    run_case(&l.c);

    /* NULL dinp: the parameter gradients are unchanged */
    double *dx = dalloc(n), *dw = dalloc(l.C), *db = dalloc(l.C), *dw2 = dalloc(l.C), *db2 = dalloc(l.C);
    D->layernorm_bwd(dx, dw, db, l.R, l.inp, l.w, l.mean, l.rstd, l.N, l.C);
    D->layernorm_bwd(NULL, dw2, db2, l.R, l.inp, l.w, l.mean, l.rstd, l.N, l.C);
    tap_ok(relerr(dw2, dw, l.C) == 0 && relerr(db2, db, l.C) == 0,
           "layernorm: backward with dinp NULL gives the same dw, db");
    free(dx), free(dw), free(db), free(dw2), free(db2), free(ref);
    free(l.inp), free(l.out), free(l.R), free(l.w), free(l.b), free(l.mean), free(l.rstd);
}

/* LayerNorm pieces over columns split in `parts` (the group sums done here
 * by adding the pieces' row statistics, as an allreduce would). */
typedef struct {
    opcase c;
    int N, C, parts;
    double *x, *w, *b, *out, *mean, *rstd, *R;
} lnp_case;

static void lnp_forward(lnp_case *e)
{
    const int N = e->N, C = e->C, Cl = C / e->parts;
    double *xs = dalloc((size_t)N * Cl), *os = dalloc((size_t)N * Cl), *s = dalloc((size_t)N), *tot = dalloc((size_t)N);
    for (int k = 0; k < e->parts; k++) { /* sums */
        D->copy2d(xs, sizeof(double) * Cl, e->x + k * Cl, sizeof(double) * C, sizeof(double) * Cl, (size_t)N);
        D->layernorm_rowsum(s, xs, N, Cl);
        for (int n = 0; n < N; n++) tot[n] = (k ? tot[n] : 0) + s[n];
    }
    double *sq = dalloc((size_t)N);
    for (int k = 0; k < e->parts; k++) { /* squared deviations */
        D->copy2d(xs, sizeof(double) * Cl, e->x + k * Cl, sizeof(double) * C, sizeof(double) * Cl, (size_t)N);
        D->layernorm_rowvar(e->mean, s, xs, tot, N, Cl, C);
        for (int n = 0; n < N; n++) sq[n] = (k ? sq[n] : 0) + s[n];
    }
    for (int k = 0; k < e->parts; k++) {
        D->copy2d(xs, sizeof(double) * Cl, e->x + k * Cl, sizeof(double) * C, sizeof(double) * Cl, (size_t)N);
        D->layernorm_apply(os, e->rstd, xs, e->mean, sq, e->w + k * Cl, e->b + k * Cl, N, Cl, C);
        D->copy2d(e->out + k * Cl, sizeof(double) * C, os, sizeof(double) * Cl, sizeof(double) * Cl, (size_t)N);
    }
    free(xs), free(os), free(s), free(tot), free(sq);
}

static double lnp_loss(opcase *c)
{
    lnp_case *e = (lnp_case *)c;
    lnp_forward(e);
    return dot(e->out, e->R, (size_t)e->N * e->C);
}

static void lnp_bwd(opcase *c, double **g)
{
    lnp_case *e = (lnp_case *)c;
    lnp_forward(e);
    const int N = e->N, C = e->C, Cl = C / e->parts;
    double *xs = dalloc((size_t)N * Cl), *dys = dalloc((size_t)N * Cl), *dxs = dalloc((size_t)N * Cl);
    double *s = dalloc(2 * (size_t)N), *tot = dalloc(2 * (size_t)N);
    for (int k = 0; k < e->parts; k++) {
        D->copy2d(xs, sizeof(double) * Cl, e->x + k * Cl, sizeof(double) * C, sizeof(double) * Cl, (size_t)N);
        D->copy2d(dys, sizeof(double) * Cl, e->R + k * Cl, sizeof(double) * C, sizeof(double) * Cl, (size_t)N);
        D->layernorm_bwd_rowsums(s, dys, xs, e->w + k * Cl, e->mean, e->rstd, N, Cl);
        for (int n = 0; n < 2 * N; n++) tot[n] = (k ? tot[n] : 0) + s[n];
    }
    for (int k = 0; k < e->parts; k++) {
        D->copy2d(xs, sizeof(double) * Cl, e->x + k * Cl, sizeof(double) * C, sizeof(double) * Cl, (size_t)N);
        D->copy2d(dys, sizeof(double) * Cl, e->R + k * Cl, sizeof(double) * C, sizeof(double) * Cl, (size_t)N);
        D->copy2d(dxs, sizeof(double) * Cl, g[0] + k * Cl, sizeof(double) * C, sizeof(double) * Cl, (size_t)N);
        D->layernorm_bwd_apply(dxs, g[1] + k * Cl, g[2] + k * Cl, dys, xs, e->w + k * Cl, e->mean, e->rstd, tot, N, Cl,
                               C);
        D->copy2d(g[0] + k * Cl, sizeof(double) * C, dxs, sizeof(double) * Cl, sizeof(double) * Cl, (size_t)N);
    }
    free(xs), free(dys), free(dxs), free(s), free(tot);
}

static void test_layernorm_pieces(void)
{
    for (int parts = 1; parts <= 3; parts++) {
        lnp_case e = {{"layernorm pieces", lnp_loss, lnp_bwd, 0, 3, {"inp", "w", "b"}, {0}, {0}},
                      0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
        char name[48];
        snprintf(name, sizeof name, "layernorm in %d column pieces", parts);
        e.c.name = name;
        e.parts = parts, e.N = randint(3, 7), e.C = parts * randint(2, 4);
        const size_t nx = (size_t)e.N * e.C;
        e.x = dalloc(nx), e.w = dalloc((size_t)e.C), e.b = dalloc((size_t)e.C), e.out = dalloc(nx),
        e.mean = dalloc((size_t)e.N), e.rstd = dalloc((size_t)e.N), e.R = dalloc(nx);
        randn(e.x, nx, 2), randn(e.w, (size_t)e.C, 1), randn(e.b, (size_t)e.C, 1), randn(e.R, nx, 1);
        for (size_t i = 0; i < nx; i++) e.x[i] += 0.5;
        e.c.w[0] = e.x, e.c.wn[0] = nx, e.c.w[1] = e.w, e.c.wn[1] = (size_t)e.C, e.c.w[2] = e.b, e.c.wn[2] = (size_t)e.C;
        /* against the whole-row kernels */
        double *o = dalloc(nx), *m = dalloc((size_t)e.N), *r = dalloc((size_t)e.N);
        D->layernorm_fwd(o, m, r, e.x, e.w, e.b, e.N, e.C);
        lnp_forward(&e);
        double ef = fmax(relerr(e.out, o, nx), fmax(relerr(e.mean, m, (size_t)e.N), relerr(e.rstd, r, (size_t)e.N)));
        double *g1[3] = {dalloc(nx), dalloc((size_t)e.C), dalloc((size_t)e.C)}, *g2[3] = {dalloc(nx), dalloc((size_t)e.C), dalloc((size_t)e.C)};
        D->layernorm_bwd(g1[0], g1[1], g1[2], e.R, e.x, e.w, m, r, e.N, e.C);
        lnp_bwd(&e.c, g2);
        double eb = fmax(relerr(g2[0], g1[0], nx), fmax(relerr(g2[1], g1[1], (size_t)e.C), relerr(g2[2], g1[2], (size_t)e.C)));
        tap_ok(ef <= 1e-14 && eb <= 1e-13, "%s: == layernorm_fwd/bwd on whole rows (N=%d C=%d, err fwd %.1e, bwd %.1e)",
               name, e.N, e.C, ef, eb);
        run_case(&e.c);
        for (int i = 0; i < 3; i++) free(g1[i]), free(g2[i]);
        free(o), free(m), free(r);
        free(e.x), free(e.w), free(e.b), free(e.out), free(e.mean), free(e.rstd), free(e.R);
    }
}

int main(void)
{
    const uint64_t seed = test_seed();
    pt_rng_seed(&rng, seed, 0);

    test_layernorm();
    test_layernorm_pieces();
    tap_diag("worst finite-difference error over these ops: %.2e (bound %.0e)", g_worst_fd, FD_TOL);
    return tap_done();
}
