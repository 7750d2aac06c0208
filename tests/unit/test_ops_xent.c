/* SPDX-License-Identifier: MIT */
/* Tests of the materialised cross-entropy kernels of the CPU tables
 * (lib/backend/ops.h, cpu_ops.inc: xent_max, xent_sumexp, xent_bwd,
 * xent_loss, the reference of the fused classifier, which is in
 * test_ops_fused) and of the float table's vectorised exp they use.
 *
 *  1. The backward of the double table (pt_cpu_ops_f64) against central
 *     finite differences of the cross-entropy loss, for every logit
 *     (padded ids included: their gradient is 0); dlogits are written, not
 *     accumulated (documented).  Loss and dlogits against an independent
 *     double softmax cross-entropy; xent_loss against its formula.
 *  2. Vocab-parallel composition (Megatron, Shoeybi et al. 2019 section 3):
 *     the cross-entropy split in 2 and 3 vocabulary shards, with padded
 *     ids, recombined as the model does, against the unsharded kernels.
 *  3. The float table's exp (a polynomial, not libm) over its whole input
 *     range and at the edges of float, and the cross-entropy at the GPT-2
 *     vocabulary (V = 50257), against double.
 *
 * Inputs are fresh random numbers every run; the seed is printed as a TAP
 * diagnostic and PTRAIN_TEST_SEED=<n> reproduces a run. */
#include "backend/ops.h"
#include "core/core.h"
#include "tests/tap.h"
#include "tests/unit/ops_util.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- cross-entropy --------------------------------------------------------------- */
/* Loss over vocabulary shards of width Vl (shard s holds ids s*Vl ..), combined
 * the way the model does across the tp group: rowmax by max, then
 * sumexp_s * exp(max_s - max) and tgt by sum.  Optionally writes dlogits [N, V]
 * (gradient of the mean loss).  logits is [N, V] with V = nshards * Vl. */
static double xent_sharded(const double *logits, const int32_t *targets, int N, int V, int vreal,
                           int nshards, double *dlogits)
{
    int Vl = V / nshards;
    double *mx = dalloc(N), *se = dalloc(N), *tg = dalloc(N);
    double *ls = dalloc((size_t)N * Vl), *ds = dalloc((size_t)N * Vl);
    double *mxs = dalloc((size_t)nshards * N), *ses = dalloc(N), *tgs = dalloc(N), *dloss = dalloc(N);
    for (int n = 0; n < N; n++) mx[n] = -INFINITY, dloss[n] = 1.0 / N;
    for (int s = 0; s < nshards; s++) {
        for (int n = 0; n < N; n++) memcpy(ls + (size_t)n * Vl, logits + (size_t)n * V + s * Vl, Vl * sizeof(double));
        D->xent_max(mxs + (size_t)s * N, ls, s * Vl, vreal, N, Vl);
        for (int n = 0; n < N; n++) mx[n] = fmax(mx[n], mxs[(size_t)s * N + n]);
    }
    for (int s = 0; s < nshards; s++) {
        for (int n = 0; n < N; n++) memcpy(ls + (size_t)n * Vl, logits + (size_t)n * V + s * Vl, Vl * sizeof(double));
        D->xent_sumexp(ses, tgs, ls, mxs + (size_t)s * N, targets, s * Vl, vreal, N, Vl);
        for (int n = 0; n < N; n++) {
            double m = mxs[(size_t)s * N + n];
            se[n] += m == -INFINITY ? 0 : ses[n] * exp(m - mx[n]); /* an all-padding shard adds 0 */
            tg[n] += tgs[n];
        }
    }
    double loss = 0;
    for (int n = 0; n < N; n++) loss += (log(se[n]) + mx[n] - tg[n]) / N;
    if (dlogits)
        for (int s = 0; s < nshards; s++) {
            for (int n = 0; n < N; n++) memcpy(ls + (size_t)n * Vl, logits + (size_t)n * V + s * Vl, Vl * sizeof(double));
            for (size_t i = 0; i < (size_t)N * Vl; i++) ds[i] = NAN; /* must be written */
            D->xent_bwd(ds, ls, mx, se, targets, dloss, s * Vl, vreal, N, Vl);
            for (int n = 0; n < N; n++) memcpy(dlogits + (size_t)n * V + s * Vl, ds + (size_t)n * Vl, Vl * sizeof(double));
        }
    free(mx), free(se), free(tg), free(ls), free(ds), free(mxs), free(ses), free(tgs), free(dloss);
    return loss;
}

typedef struct {
    opcase c;
    int N, V, vreal;
    int32_t *targets;
    double *logits;
} xent_case;

static double xent_loss(opcase *c)
{
    xent_case *x = (xent_case *)c;
    return xent_sharded(x->logits, x->targets, x->N, x->V, x->vreal, 1, NULL);
}
static void xent_bwd_case(opcase *c, double **g)
{
    xent_case *x = (xent_case *)c;
    xent_sharded(x->logits, x->targets, x->N, x->V, x->vreal, 1, g[0]);
}

static void test_xent(void)
{
    xent_case x = {{"cross-entropy", xent_loss, xent_bwd_case, 1, 1, {"logits"}, {0}, {0}}, 0, 0, 0, 0, 0};
    x.N = randint(5, 8), x.V = 12, x.vreal = randint(9, 11);
    size_t nl = (size_t)x.N * x.V;
    x.targets = xcalloc(x.N, sizeof(int32_t)), x.logits = dalloc(nl);
    for (int n = 0; n < x.N; n++) x.targets[n] = randint(0, x.vreal - 1);
    x.targets[0] = x.vreal - 1; /* a target in the last shard */
    randn(x.logits, nl, 2);
    x.c.w[0] = x.logits, x.c.wn[0] = nl; /* includes padded columns: d/dpad = 0 */

    /* independent reference: softmax over the vreal real ids, no max shift */
    double *dref = dalloc(nl), lref = 0;
    for (int n = 0; n < x.N; n++) {
        const double *l = x.logits + (size_t)n * x.V;
        double z = 0;
        for (int v = 0; v < x.vreal; v++) z += exp(l[v]);
        lref += (log(z) - l[x.targets[n]]) / x.N;
        for (int v = 0; v < x.vreal; v++) dref[(size_t)n * x.V + v] = (exp(l[v]) / z - (v == x.targets[n])) / x.N;
    }
    double *d1 = dalloc(nl);
    double l1 = xent_sharded(x.logits, x.targets, x.N, x.V, x.vreal, 1, d1);
    double el = fabs(l1 - lref) / fabs(lref), ed = relerr(d1, dref, nl);
    tap_ok(el <= 1e-13 && ed <= 1e-13,
           "cross-entropy: loss and dlogits match a direct softmax cross-entropy (N=%d V=%d vreal=%d, "
           "err %.1e, %.1e)", x.N, x.V, x.vreal, el, ed);
    run_case(&x.c);

    /* shards: 2 of 6 and 3 of 4 columns, with vreal leaving one shard all padding too */
    for (int vr = 0; vr < 2; vr++) {
        int vreal = vr == 0 ? x.vreal : 7; /* 7: the last of 3 shards is all padding */
        if (vr == 1)
            for (int n = 0; n < x.N; n++) x.targets[n] = randint(0, vreal - 1);
        double *du = dalloc(nl), *ds = dalloc(nl);
        double lu = xent_sharded(x.logits, x.targets, x.N, x.V, vreal, 1, du);
        for (int ns = 2; ns <= 3; ns++) {
            double lsh = xent_sharded(x.logits, x.targets, x.N, x.V, vreal, ns, ds);
            int pad0 = 1;
            for (int n = 0; n < x.N; n++)
                for (int v = vreal; v < x.V; v++) pad0 &= ds[(size_t)n * x.V + v] == 0;
            double e1 = fabs(lsh - lu) / fabs(lu), e2 = relerr(ds, du, nl);
            double e3 = relerr(ds, vr == 0 ? dref : du, nl);
            tap_ok(e1 <= 1e-13 && e2 <= 1e-13 && e3 <= 1e-13 && pad0,
                   "cross-entropy: %d vocab shards (vreal=%d of %d) give the unsharded loss and dlogits "
                   "(err %.1e, %.1e), padded ids exactly 0", ns, vreal, x.V, e1, e2);
        }
        free(du), free(ds);
    }
    free(dref), free(d1), free(x.targets), free(x.logits);
}

/* xent_loss against the formula. */
static void test_xent_loss(void)
{
    const int N = randint(5, 20);
    double *mx = dalloc((size_t)N), *se = dalloc((size_t)N), *tg = dalloc((size_t)N), *l = dalloc((size_t)N);
    randn(mx, (size_t)N, 2), randu(se, (size_t)N, 0.5, 50), randn(tg, (size_t)N, 2);
    D->xent_loss(l, mx, se, tg, N);
    double e = 0;
    for (int n = 0; n < N; n++) e = fmax(e, fabs(l[n] - (log(se[n]) + mx[n] - tg[n])));
    tap_ok(e <= 1e-14, "xent_loss: log(sumexp) + rowmax - target logit (N=%d, err %.1e)", N, e);
    free(mx), free(se), free(tg), free(l);
}

/* ---- the float table's exp ------------------------------------------------------ */
/* The float table's vectorised exp (a polynomial, not libm) over the whole
 * input range, element by element against libm in double: xent_sumexp with
 * one logit per row and rowmax as the shift gives exp(l - m) for any l - m. */
static void test_float_exp_range(void)
{
    const pt_ops *F = &pt_cpu_ops_f32;
    enum { NX = 4001 };
    float *l = xcalloc(NX, sizeof(float)), *m = xcalloc(NX, sizeof(float)), *se = xcalloc(NX, sizeof(float));
    float *tg = xcalloc(NX, sizeof(float));
    int32_t *t = xcalloc(NX, sizeof(int32_t));
    double worst = 0, wx = 0;
    int under_ok = 1;
    for (int i = 0; i < NX; i++) {
        double x = -88.0 + 176.2 * i / (NX - 1) + 1e-3 * pt_rng_uniform(&rng); /* [-88, 88.2] */
        l[i] = (float)x, m[i] = 0, t[i] = -1;
    }
    F->xent_sumexp(se, tg, l, m, t, 0, 1, NX, 1);
    for (int i = 0; i < NX; i++) {
        double ref = exp((double)l[i]);
        if (l[i] < -87.3f) { under_ok &= se[i] >= 0 && se[i] <= 1e-37f; continue; }
        double e = fabs(se[i] - ref) / ref;
        if (!(e <= worst)) worst = e, wx = l[i];
    }
    tap_ok(worst <= 1e-6 && under_ok,
           "float exp (xent_sumexp, one logit per row) over [-87.3, 88.2]: max rel err %.2e at x=%.2f (bound 1e-6); "
           "below -87.3 it gives 0 or a denormal", worst, wx);
    free(l), free(m), free(se), free(tg), free(t);
}

/* A wide row set through the float cross-entropy, against double: V =
 * 50257, the GPT-2 vocabulary, unpadded width 50250. */
static void test_float_xent_wide(void)
{
    const pt_ops *F = &pt_cpu_ops_f32;
    const int N = 3, V = 50257, VR = 50250;
    size_t nl = (size_t)N * V;
    float *lf = xcalloc(nl, sizeof(float)), *df = xcalloc(nl, sizeof(float));
    double *ld = dalloc(nl), *dd = dalloc(nl);
    float mf[3], sf[3], tf[3], gf[3];
    double md[3], sd[3], td[3], gdl[3];
    int32_t tgt[3] = {0, 777, VR - 1};
    for (size_t i = 0; i < nl; i++) ld[i] = lf[i] = (float)(4 * pt_rng_normal(&rng));
    for (int n = 0; n < N; n++) gf[n] = (float)(gdl[n] = 1.0 / N);
    F->xent_max(mf, lf, 0, VR, N, V);
    F->xent_sumexp(sf, tf, lf, mf, tgt, 0, VR, N, V);
    F->xent_bwd(df, lf, mf, sf, tgt, gf, 0, VR, N, V);
    D->xent_max(md, ld, 0, VR, N, V);
    D->xent_sumexp(sd, td, ld, md, tgt, 0, VR, N, V);
    D->xent_bwd(dd, ld, md, sd, tgt, gdl, 0, VR, N, V);
    /* a float sum of 50250 positive terms: (n-1) u = 3e-3 at worst, ~1e-5 with
     * the vector partial sums, ~1e-4 summed in order (unvectorised builds) */
    double es = 0, ed = 0, sdd = 0;
    int max_same = 1;
    for (int n = 0; n < N; n++) es = fmax(es, fabs(sf[n] - sd[n]) / sd[n]), max_same &= mf[n] == md[n];
    for (size_t i = 0; i < nl; i++) ed = fmax(ed, fabs(df[i] - dd[i])), sdd = fmax(sdd, fabs(dd[i]));
    tap_ok(max_same && es <= 5e-4 && ed <= 5e-4 * sdd,
           "float cross-entropy on %d rows of V=%d (vreal %d): rowmax exact, sumexp rel err %.1e, "
           "dlogits err %.1e of max %.1e (bound 5e-4: float summation of 50250 terms)", N, V, VR, es, ed, sdd);
    free(lf), free(df), free(ld), free(dd);
}

/* The float table's vectorised exp at the edges of float, through
 * xent_sumexp with one logit per row and a zero row maximum (so each sum is
 * exp of one value), against libm's expf: NaN gives NaN and +inf +inf (it
 * built the exponent bits from a NaN, a left shift of a negative number,
 * undefined behaviour that UBSan stops on, and gave exp(88.3) for +inf and
 * for everything above 88.3); -inf and values below -87.3 give 0 (expf: 0
 * or a denormal); the values up to the largest float whose exp is finite
 * are within 1e-6 relative, the ones past it +inf.  Random huge values of
 * both signs, fresh every run, join the fixed edges. */
static void test_float_exp_edges(void)
{
    const pt_ops *F = &pt_cpu_ops_f32;
    const float fixed[] = { NAN, -NAN, INFINITY, -INFINITY, FLT_MAX, -FLT_MAX, 1e30f, -1e30f, 88.3f, 88.5f,
                            88.7f, 88.72283f, nextafterf(88.72283f, INFINITY), 88.73f, 89.0f, 100.0f, -87.29f,
                            -87.31f, -100.0f, -103.9f, -104.0f, 0.0f, -0.0f, 1e-30f, -1e-30f };
    enum { NF = sizeof fixed / sizeof fixed[0], NR = 64, NX = NF + NR };
    float l[NX], m[NX], se[NX], tg[NX];
    int32_t t[NX];
    for (int i = 0; i < NX; i++) {
        if (i < NF) l[i] = fixed[i];
        else if (i < NF + NR / 2) l[i] = (float)((i % 2 ? 1 : -1) * exp(4.5 + 83.0 * pt_rng_uniform(&rng))); /* 90..1e38 */
        else l[i] = (float)(85.0 + 4.0 * pt_rng_uniform(&rng)) * (i % 2 ? 1 : -1); /* around the edges */
        m[i] = 0, t[i] = -1;
    }
    F->xent_sumexp(se, tg, l, m, t, 0, 1, NX, 1);
    int bad = 0;
    for (int i = 0; i < NX; i++) {
        float want = expf(l[i]);
        int ok;
        if (isnan(want)) ok = isnan(se[i]);
        else if (isinf(want)) ok = isinf(se[i]) && se[i] > 0;
        else if (l[i] < -87.3f) ok = se[i] >= 0 && se[i] <= 1e-37f;
        else ok = isfinite(se[i]) && fabs((double)se[i] - want) <= 1e-6 * want;
        if (!ok && bad++ < 5) tap_diag("exp(%.9g): got %.9g, expf gives %.9g", l[i], se[i], want);
    }
    tap_ok(bad == 0, "float exp at the edges against expf: NaN -> NaN, +-inf, huge values, around -87.3 and "
           "88.72 (%d values, %d wrong)", NX, bad);
}

int main(void)
{
    const uint64_t seed = test_seed();
    pt_rng_seed(&rng, seed, 0);

    test_xent();
    test_xent_loss();
    tap_diag("worst finite-difference error over these ops: %.2e (bound %.0e)", g_worst_fd, FD_TOL);
    test_float_exp_range();
    test_float_xent_wide();
    test_float_exp_edges();
    return tap_done();
}
