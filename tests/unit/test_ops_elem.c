/* SPDX-License-Identifier: MIT */
/* Tests of the element-wise and memory kernels of the CPU tables
 * (lib/backend/ops.h, cpu_ops.inc): embedding, positional embedding, GELU,
 * residual add, bias, the generic memory and BLAS-1 style ops, AdamW (the
 * families of tests/gpu/test_ops_elem.c).
 *
 *  1. Every backward of the double table (pt_cpu_ops_f64) against central
 *     finite differences of a scalar loss L = sum(out * R) (R fixed random),
 *     for every input and parameter element (a random subset of FD_SAMPLES
 *     for big tensors).  Every forward against a naive reference written
 *     here.  The "backward accumulates (+=)" contract (two calls on
 *     pre-filled random buffers) and the NULL skips.
 *  2. Vocab-parallel embedding (Megatron, Shoeybi et al. 2019 section 3):
 *     the table split in 2 and 3 vocabulary shards, recombined as the model
 *     does, against the unsharded kernels.
 *  3. zero, fill, copy, axpy, scale, sum, sumsq, copy2d, add2d against plain
 *     loops; AdamW against the formulas.
 *  4. The float table's GELU over its whole input range against double.
 *
 * The other families: test_ops_norm, test_ops_gemm, test_ops_attention,
 * test_ops_xent; every op of every table against double and the OpenMP
 * thread comparison: test_ops_tables.  Inputs are fresh random numbers every
 * run; the seed is printed as a TAP diagnostic and PTRAIN_TEST_SEED=<n>
 * reproduces a run. */
#include "backend/ops.h"
#include "core/core.h"
#include "tests/tap.h"
#include "tests/unit/ops_util.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- embedding ------------------------------------------------------------- */
typedef struct {
    opcase c;
    int N, C, V;
    int32_t *tok;
    double *w, *out, *R;
} emb_case;

static double emb_loss(opcase *c)
{
    emb_case *e = (emb_case *)c;
    D->embedding_fwd(e->out, e->tok, e->w, 0, e->V, e->N, e->C);
    return dot(e->out, e->R, (size_t)e->N * e->C);
}
static void emb_bwd(opcase *c, double **g)
{
    emb_case *e = (emb_case *)c;
    emb_loss(c);
    D->embedding_bwd(g[0], e->R, e->tok, 0, e->V, e->N, e->C);
}

static void test_embedding(void)
{
    emb_case e = {{"embedding", emb_loss, emb_bwd, 0, 1, {"w"}, {0}, {0}}, 0, 0, 0, 0, 0, 0, 0};
    e.N = randint(16, 24), e.C = randint(3, 6), e.V = randint(5, 8);
    e.tok = xcalloc((size_t)e.N, sizeof(int32_t));
    for (int n = 0; n < e.N; n++) e.tok[n] = randint(0, e.V - 1);
    e.tok[1] = e.tok[0], e.tok[e.N - 1] = e.tok[0]; /* repeated tokens accumulate */
    e.w = dalloc((size_t)e.V * e.C), e.out = dalloc((size_t)e.N * e.C), e.R = dalloc((size_t)e.N * e.C);
    randn(e.w, (size_t)e.V * e.C, 1), randn(e.R, (size_t)e.N * e.C, 1);
    e.c.w[0] = e.w, e.c.wn[0] = (size_t)e.V * e.C;

    /* forward reference: a row gather */
    emb_loss(&e.c);
    int okf = 1;
    for (int n = 0; n < e.N; n++)
        for (int c = 0; c < e.C; c++)
            okf &= e.out[(size_t)n * e.C + c] == e.w[(size_t)e.tok[n] * e.C + c];
    tap_ok(okf, "embedding: forward gathers w[tok] (N=%d C=%d V=%d)", e.N, e.C, e.V);

    /* backward reference with the repeats summed by hand */
    double *g = dalloc((size_t)e.V * e.C), *ref = dalloc((size_t)e.V * e.C);
    D->embedding_bwd(g, e.R, e.tok, 0, e.V, e.N, e.C);
    for (int n = 0; n < e.N; n++)
        for (int c = 0; c < e.C; c++) ref[(size_t)e.tok[n] * e.C + c] += e.R[(size_t)n * e.C + c];
    tap_ok(relerr(g, ref, (size_t)e.V * e.C) <= 1e-14,
           "embedding: repeated tokens (tok[0] x3) accumulate into one row");
    run_case(&e.c);

    /* vocab shards: 2 and 3 shards of the same table */
    const int V = 11, N = 40, C = 4;
    int32_t *tok = xcalloc(N, sizeof(int32_t));
    for (int n = 0; n < N; n++) tok[n] = randint(0, V - 1);
    tok[3] = tok[2];
    double *w = dalloc((size_t)V * C), *R = dalloc((size_t)N * C);
    double *out = dalloc((size_t)N * C), *dw = dalloc((size_t)V * C);
    randn(w, (size_t)V * C, 1), randn(R, (size_t)N * C, 1);
    D->embedding_fwd(out, tok, w, 0, V, N, C);
    D->embedding_bwd(dw, R, tok, 0, V, N, C);
    for (int ns = 2; ns <= 3; ns++) {
        int width = (V + ns - 1) / ns;
        double *sum = dalloc((size_t)N * C), *os = dalloc((size_t)N * C);
        int okg = 1, okz = 1;
        for (int s = 0; s < ns; s++) {
            int v0 = s * width, Vl = v0 + width <= V ? width : V - v0;
            /* the shard's gradient lives between two guard rows */
            double *dws = dalloc((size_t)(Vl + 2) * C);
            for (size_t i = 0; i < (size_t)(Vl + 2) * C; i++) dws[i] = 4242.0;
            for (size_t i = C; i < (size_t)(Vl + 1) * C; i++) dws[i] = 0;
            D->embedding_fwd(os, tok, w + (size_t)v0 * C, v0, Vl, N, C);
            for (int n = 0; n < N; n++) {
                int in = tok[n] >= v0 && tok[n] < v0 + Vl;
                for (int c = 0; c < C; c++) {
                    if (!in) okz &= os[(size_t)n * C + c] == 0;
                    sum[(size_t)n * C + c] += os[(size_t)n * C + c];
                }
            }
            D->embedding_bwd(dws + C, R, tok, v0, Vl, N, C);
            for (int c = 0; c < C; c++) okg &= dws[c] == 4242.0 && dws[(size_t)(Vl + 1) * C + c] == 4242.0;
            okg &= relerr(dws + C, dw + (size_t)v0 * C, (size_t)Vl * C) <= 1e-14;
            free(dws);
        }
        tap_ok(okz && relerr(sum, out, (size_t)N * C) == 0,
               "embedding: %d vocab shards: rows outside a shard are 0, sum of shard outputs == unsharded", ns);
        tap_ok(okg, "embedding: %d vocab shards: each shard's dw == its rows of the unsharded dw, "
                    "nothing written outside the shard", ns);
        free(sum), free(os);
    }
    free(tok), free(w), free(R), free(out), free(dw);
    free(g), free(ref), free(e.tok), free(e.w), free(e.out), free(e.R);
}

/* ---- positional embedding -------------------------------------------------- */
typedef struct {
    opcase c;
    int B, T, Tmax, C;
    double *x0, *x, *wpe, *R;
} pos_case;

static double pos_loss(opcase *c)
{
    pos_case *p = (pos_case *)c;
    size_t n = (size_t)p->B * p->T * p->C;
    memcpy(p->x, p->x0, n * sizeof(double));
    D->posemb_fwd(p->x, p->wpe, p->B, p->T, p->C);
    return dot(p->x, p->R, n);
}
static void pos_bwd(opcase *c, double **g)
{
    pos_case *p = (pos_case *)c;
    pos_loss(c);
    D->posemb_bwd(g[0], p->R, p->B, p->T, p->C);
}

static void test_posemb(void)
{
    pos_case p = {{"posemb", pos_loss, pos_bwd, 0, 1, {"wpe"}, {0}, {0}}, 0, 0, 0, 0, 0, 0, 0, 0};
    p.B = 2, p.T = randint(4, 7), p.Tmax = p.T + 2, p.C = randint(3, 5);
    size_t n = (size_t)p.B * p.T * p.C;
    p.x0 = dalloc(n), p.x = dalloc(n), p.R = dalloc(n), p.wpe = dalloc((size_t)p.Tmax * p.C);
    randn(p.x0, n, 1), randn(p.R, n, 1), randn(p.wpe, (size_t)p.Tmax * p.C, 1);
    p.c.w[0] = p.wpe, p.c.wn[0] = (size_t)p.Tmax * p.C; /* rows >= T must get 0 */
    pos_loss(&p.c);
    int ok = 1;
    for (int b = 0; b < p.B; b++)
        for (int t = 0; t < p.T; t++)
            for (int c = 0; c < p.C; c++) {
                size_t i = ((size_t)b * p.T + t) * p.C + c;
                ok &= p.x[i] == p.x0[i] + p.wpe[(size_t)t * p.C + c];
            }
    tap_ok(ok, "posemb: forward adds wpe[t] in place (B=%d T=%d C=%d, wpe has %d rows)", p.B, p.T,
           p.C, p.Tmax);
    run_case(&p.c);
    free(p.x0), free(p.x), free(p.R), free(p.wpe);
}

/* ---- gelu, add, bias ------------------------------------------------------------ */
typedef struct {
    opcase c;
    size_t n;
    int N, OC;
    double *x, *y, *out, *R;
} ew_case;

static double gelu_loss(opcase *c)
{
    ew_case *e = (ew_case *)c;
    D->gelu_fwd(e->out, e->x, e->n);
    return dot(e->out, e->R, e->n);
}
static void gelu_bwd(opcase *c, double **g)
{
    ew_case *e = (ew_case *)c;
    gelu_loss(c);
    D->gelu_bwd(g[0], e->x, e->R, e->n);
}
static double add_loss(opcase *c)
{
    ew_case *e = (ew_case *)c;
    D->add_fwd(e->out, e->x, e->y, e->n);
    return dot(e->out, e->R, e->n);
}
static void add_bwd(opcase *c, double **g)
{
    ew_case *e = (ew_case *)c;
    add_loss(c);
    D->add_bwd(g[0], g[1], e->R, e->n);
}
static double bias_loss(opcase *c) /* out = y + bias (in place on a copy of y) */
{
    ew_case *e = (ew_case *)c;
    memcpy(e->out, e->y, e->n * sizeof(double));
    D->bias_fwd(e->out, e->x, e->N, e->OC);
    return dot(e->out, e->R, e->n);
}
static void bias_bwd(opcase *c, double **g)
{
    ew_case *e = (ew_case *)c;
    bias_loss(c);
    D->bias_bwd(g[0], e->R, e->N, e->OC);
}

static void test_elementwise(void)
{
    /* GELU, tanh form (Hendrycks & Gimpel 2016) */
    ew_case g = {{"gelu", gelu_loss, gelu_bwd, 0, 1, {"inp"}, {0}, {0}}, 0, 0, 0, 0, 0, 0, 0};
    g.n = (size_t)randint(60, 100);
    g.x = dalloc(g.n), g.out = dalloc(g.n), g.R = dalloc(g.n);
    randu(g.x, g.n, -5, 5), randn(g.R, g.n, 1);
    g.c.w[0] = g.x, g.c.wn[0] = g.n;
    gelu_loss(&g.c);
    double ef = 0, eerf = 0;
    for (size_t i = 0; i < g.n; i++) {
        double x = g.x[i];
        double ref = 0.5 * x * (1 + tanh(0.7978845608028654 /* sqrt(2/pi) */ * (x + 0.044715 * x * x * x)));
        ef = fmax(ef, fabs(g.out[i] - ref) / fmax(1, fabs(ref)));
        eerf = fmax(eerf, fabs(g.out[i] - 0.5 * x * (1 + erf(x / sqrt(2)))));
    }
    tap_ok(ef <= 1e-14 && eerf <= 1e-3,
           "gelu: forward == tanh form (err %.1e) and within %.1e of the exact erf GELU", ef, eerf);
    run_case(&g.c);

    ew_case a = {{"add", add_loss, add_bwd, 0, 2, {"a", "b"}, {0}, {0}}, 0, 0, 0, 0, 0, 0, 0};
    a.n = (size_t)randint(20, 40);
    a.x = dalloc(a.n), a.y = dalloc(a.n), a.out = dalloc(a.n), a.R = dalloc(a.n);
    randn(a.x, a.n, 1), randn(a.y, a.n, 1), randn(a.R, a.n, 1);
    a.c.w[0] = a.x, a.c.wn[0] = a.n, a.c.w[1] = a.y, a.c.wn[1] = a.n;
    add_loss(&a.c);
    int ok = 1;
    for (size_t i = 0; i < a.n; i++) ok &= a.out[i] == a.x[i] + a.y[i];
    tap_ok(ok, "add: forward == a + b (n=%zu)", a.n);
    run_case(&a.c);
    double *da = dalloc(a.n), *db = dalloc(a.n);
    D->add_bwd(da, NULL, a.R, a.n);
    D->add_bwd(NULL, db, a.R, a.n);
    tap_ok(relerr(da, a.R, a.n) == 0 && relerr(db, a.R, a.n) == 0,
           "add: backward with da or db NULL fills the other");
    free(da), free(db);

    ew_case b = {{"bias", bias_loss, bias_bwd, 0, 1, {"bias"}, {0}, {0}}, 0, 0, 0, 0, 0, 0, 0};
    b.N = randint(4, 8), b.OC = randint(3, 7), b.n = (size_t)b.N * b.OC;
    b.x = dalloc(b.OC), b.y = dalloc(b.n), b.out = dalloc(b.n), b.R = dalloc(b.n);
    randn(b.x, b.OC, 1), randn(b.y, b.n, 1), randn(b.R, b.n, 1);
    b.c.w[0] = b.x, b.c.wn[0] = b.OC;
    bias_loss(&b.c);
    ok = 1;
    for (size_t i = 0; i < b.n; i++) ok &= b.out[i] == b.y[i] + b.x[i % b.OC];
    tap_ok(ok, "bias: forward adds bias[o] to every row (N=%d OC=%d)", b.N, b.OC);
    run_case(&b.c);

    free(g.x), free(g.out), free(g.R);
    free(a.x), free(a.y), free(a.out), free(a.R);
    free(b.x), free(b.y), free(b.out), free(b.R);
}

/* ---- generic ops (train-step refactor) ------------------------------------------- */
/* Memory and BLAS-1 style ops against plain loops written here. */
static void test_generic(void)
{
    const size_t n = (size_t)randint(50, 300);
    double *x = dalloc(n), *y = dalloc(n), *y0 = dalloc(n), *z = dalloc(n);
    randn(x, n, 1), randn(y0, n, 1);
    const double a = pt_rng_normal(&rng);

    memcpy(y, y0, n * sizeof(double));
    D->zero(y, n, PT_F64);
    tap_ok(maxabs(y, n) == 0, "zero: n=%zu elements set to 0", n);
    D->fill(y, a, n, PT_F64);
    int ok = 1;
    for (size_t i = 0; i < n; i++) ok &= y[i] == a;
    tap_ok(ok, "fill: every element == %.3f (n=%zu)", a, n);
    D->copy(y, x, n, PT_F64);
    tap_ok(relerr(y, x, n) == 0, "copy: dst == src (n=%zu)", n);

    memcpy(y, y0, n * sizeof(double));
    D->axpy(y, a, x, n, PT_F64);
    for (size_t i = 0; i < n; i++) z[i] = y0[i] + a * x[i];
    tap_ok(relerr(y, z, n) <= 1e-15, "axpy: y += a x (a=%.3f, err %.1e)", a, relerr(y, z, n));
    memcpy(y, y0, n * sizeof(double));
    D->scale(y, a, n, PT_F64);
    for (size_t i = 0; i < n; i++) z[i] = y0[i] * a;
    tap_ok(relerr(y, z, n) == 0, "scale: x *= a (a=%.3f)", a);

    double s = 0, sq = 0;
    for (size_t i = 0; i < n; i++) s += x[i], sq += x[i] * x[i];
    double gs = D->sum(x, n, PT_F64), gsq = D->sumsq(x, n, PT_F64);
    tap_ok(fabs(gs - s) <= 1e-12 * fmax(1, fabs(s)) && fabs(gsq - sq) <= 1e-12 * sq,
           "sum, sumsq: %.6f, %.6f == loop %.6f, %.6f (n=%zu)", gs, gsq, s, sq, n);

    /* 2-D: the columns [c0, c0+w) of a [R, Cs] block into a [R, Cd] block at column d0 */
    const int R = randint(3, 9), Cs = randint(6, 12), Cd = randint(6, 12);
    const int w = randint(1, (Cs < Cd ? Cs : Cd) - 1), c0 = randint(0, Cs - w), d0 = randint(0, Cd - w);
    double *src = dalloc((size_t)R * Cs), *dst = dalloc((size_t)R * Cd), *dst0 = dalloc((size_t)R * Cd),
           *ref = dalloc((size_t)R * Cd);
    randn(src, (size_t)R * Cs, 1), randn(dst0, (size_t)R * Cd, 1);
    memcpy(dst, dst0, sizeof(double) * (size_t)R * Cd);
    D->copy2d(dst + d0, sizeof(double) * (size_t)Cd, src + c0, sizeof(double) * (size_t)Cs, sizeof(double) * (size_t)w,
              (size_t)R);
    memcpy(ref, dst0, sizeof(double) * (size_t)R * Cd);
    for (int r = 0; r < R; r++)
        for (int c = 0; c < w; c++) ref[r * Cd + d0 + c] = src[r * Cs + c0 + c];
    tap_ok(relerr(dst, ref, (size_t)R * Cd) == 0,
           "copy2d: %d rows of %d columns between pitches %d and %d, nothing else written", R, w, Cs, Cd);
    int32_t itok[12], otok[8];
    for (int i = 0; i < 12; i++) itok[i] = randint(0, 1000);
    D->copy2d(otok, 2 * sizeof(int32_t), itok + 1, 3 * sizeof(int32_t), 2 * sizeof(int32_t), 4);
    ok = 1;
    for (int r = 0; r < 4; r++) ok &= otok[2 * r] == itok[3 * r + 1] && otok[2 * r + 1] == itok[3 * r + 2];
    tap_ok(ok, "copy2d: int32 token rows (bytes, any element type)");
    memcpy(dst, dst0, sizeof(double) * (size_t)R * Cd);
    D->add2d(dst + d0, (size_t)Cd, src + c0, (size_t)Cs, (size_t)R, (size_t)w, PT_F64);
    memcpy(ref, dst0, sizeof(double) * (size_t)R * Cd);
    for (int r = 0; r < R; r++)
        for (int c = 0; c < w; c++) ref[r * Cd + d0 + c] += src[r * Cs + c0 + c];
    tap_ok(relerr(dst, ref, (size_t)R * Cd) == 0, "add2d: dst block += src block (%d x %d), nothing else written", R, w);
    free(src), free(dst), free(dst0), free(ref);
    free(x), free(y), free(y0), free(z);
}

/* adamw against the formulas. */
static void test_adamw(void)
{
    const size_t n = (size_t)randint(20, 200);
    double *p = dalloc(n), *g = dalloc(n), *m = dalloc(n), *v = dalloc(n), *rp = dalloc(n), *rm = dalloc(n), *rv = dalloc(n);
    randn(p, n, 1);
    memcpy(rp, p, n * sizeof(double));
    const double lr = 1e-2, b1 = 0.9, b2 = 0.95, eps = 1e-8, wd = 0.1;
    double worst = 0;
    for (int t = 1; t <= 3; t++) {
        randn(g, n, 1); /* fresh gradient each step */
        const double bc1 = 1 - pow(b1, t), bc2 = 1 - pow(b2, t);
        D->adamw(p, NULL, g, m, v, n, lr, b1, b2, eps, wd, bc1, bc2);
        for (size_t i = 0; i < n; i++) {
            rm[i] = b1 * rm[i] + (1 - b1) * g[i];
            rv[i] = b2 * rv[i] + (1 - b2) * g[i] * g[i];
            rp[i] -= lr * ((rm[i] / bc1) / (sqrt(rv[i] / bc2) + eps) + wd * rp[i]);
        }
        worst = fmax(worst, fmax(relerr(p, rp, n), fmax(relerr(m, rm, n), relerr(v, rv, n))));
    }
    tap_ok(worst <= 1e-14, "adamw: 3 steps with bias correction and decoupled decay == Algorithm 2 (n=%zu, err %.1e)",
           n, worst);
    free(p), free(g), free(m), free(v), free(rp), free(rm), free(rv);
}

/* The float table's GELU over the whole input range, element by element
 * against the double table: forward and backward on [-12, 12]. */
static void test_float_gelu(void)
{
    const pt_ops *F = &pt_cpu_ops_f32;
    enum { NX = 4001 };
    float *l = xcalloc(NX, sizeof(float));
    float *go = xcalloc(NX, sizeof(float)), *gd = xcalloc(NX, sizeof(float)), *dy = xcalloc(NX, sizeof(float));
    double *xd = dalloc(NX), *god = dalloc(NX), *gdd = dalloc(NX), *dyd = dalloc(NX);
    for (int i = 0; i < NX; i++) {
        l[i] = (float)(-12.0 + 24.0 * i / (NX - 1) + 1e-3 * pt_rng_normal(&rng));
        dy[i] = (float)pt_rng_normal(&rng);
        xd[i] = l[i], dyd[i] = dy[i];
    }
    F->gelu_fwd(go, l, NX);
    F->gelu_bwd(gd, l, dy, NX);
    D->gelu_fwd(god, xd, NX);
    D->gelu_bwd(gdd, xd, dyd, NX);
    double ef = 0, eb = 0;
    for (int i = 0; i < NX; i++) {
        ef = fmax(ef, fabs(go[i] - god[i]) / fmax(1, fabs(god[i])));
        eb = fmax(eb, fabs(gd[i] - gdd[i]) / fmax(1, fabs(dyd[i])));
    }
    /* backward: 0.5 x sech^2(u) u' grows like x^3 around |x| ~ 2-4, so a
     * float tanh's ~1e-7 absolute error shows there a few times larger */
    tap_ok(ef <= 1e-6 && eb <= 4e-6,
           "float GELU on [-12, 12] against double: forward err %.1e (bound 1e-6), backward err %.1e (bound 4e-6), "
           "relative to max(1,|y|) and |dy|", ef, eb);
    free(l), free(go), free(gd), free(dy);
    free(xd), free(god), free(gdd), free(dyd);
}

int main(void)
{
    const uint64_t seed = test_seed();
    pt_rng_seed(&rng, seed, 0);

    test_embedding();
    test_posemb();
    test_elementwise();
    test_generic();
    test_adamw();
    tap_diag("worst finite-difference error over these ops: %.2e (bound %.0e)", g_worst_fd, FD_TOL);
    test_float_gelu();
    return tap_done();
}
