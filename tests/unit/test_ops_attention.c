/* SPDX-License-Identifier: MIT */
/* Tests of the materialised attention kernels of the CPU tables
 * (lib/backend/ops.h, cpu_ops.inc): attention_ref_fwd / attention_ref_bwd
 * and the ring's pieces, softmax_causal_fwd / softmax_causal_bwd composed
 * with gemm_batched (the family of tests/gpu/test_attention.c; flash
 * attention is in test_ops_fused).
 *
 *  1. Every backward of the double table (pt_cpu_ops_f64) against central
 *     finite differences of a scalar loss L = sum(out * R) (R fixed random),
 *     for every input element (a random subset of FD_SAMPLES for big
 *     tensors), and the "backward accumulates (+=)" contract (two calls on
 *     pre-filled random buffers).
 *  2. The forwards against a naive causal attention and softmax written
 *     here (Vaswani et al. 2017, 3.2.1); causality and the shape of the
 *     saved softmax matrix; the ring's composition against
 *     attention_ref_fwd.
 *  3. The float table at T = 128 against the double table.
 *
 * Inputs are fresh random numbers every run; the seed is printed as a TAP
 * diagnostic and PTRAIN_TEST_SEED=<n> reproduces a run. */
#include "backend/ops.h"
#include "core/core.h"
#include "tests/tap.h"
#include "tests/unit/ops_util.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- attention ----------------------------------------------------------------- */
typedef struct {
    opcase c;
    int B, T, NH, HS;
    double *qkv, *out, *att, *R;
} att_case;

static double att_loss(opcase *c)
{
    att_case *a = (att_case *)c;
    D->attention_ref_fwd(a->out, a->att, a->qkv, a->B, a->T, a->NH, a->HS);
    return dot(a->out, a->R, (size_t)a->B * a->T * a->NH * a->HS);
}
static void att_bwd(opcase *c, double **g)
{
    att_case *a = (att_case *)c;
    att_loss(c);
    D->attention_ref_bwd(g[0], a->R, a->qkv, a->att, a->B, a->T, a->NH, a->HS);
}

/* naive causal attention, written from the formula (Vaswani et al. 3.2.1) */
static void att_reference(double *out, double *att, const double *qkv, int B, int T, int NH, int HS)
{
    int C = NH * HS;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++) {
                double *a = att + (((size_t)b * NH + h) * T + t) * T, z = 0;
                const double *q = qkv + ((size_t)b * T + t) * 3 * C + h * HS;
                for (int t2 = 0; t2 < T; t2++) {
                    a[t2] = 0;
                    if (t2 > t) continue;
                    const double *k = qkv + ((size_t)b * T + t2) * 3 * C + C + h * HS;
                    double s = 0;
                    for (int i = 0; i < HS; i++) s += q[i] * k[i];
                    a[t2] = exp(s / sqrt((double)HS));
                    z += a[t2];
                }
                for (int t2 = 0; t2 <= t; t2++) a[t2] /= z;
                for (int i = 0; i < HS; i++) {
                    double s = 0;
                    for (int t2 = 0; t2 <= t; t2++)
                        s += a[t2] * qkv[((size_t)b * T + t2) * 3 * C + 2 * C + h * HS + i];
                    out[((size_t)b * T + t) * C + h * HS + i] = s;
                }
            }
}

static void test_attention(void)
{
    att_case a = {{"attention", att_loss, att_bwd, 0, 1, {"qkv"}, {0}, {0}}, 0, 0, 0, 0, 0, 0, 0, 0};
    a.B = 2, a.T = randint(5, 8), a.NH = randint(2, 3), a.HS = randint(3, 4);
    int C = a.NH * a.HS;
    size_t nq = (size_t)a.B * a.T * 3 * C, no = (size_t)a.B * a.T * C, na = (size_t)a.B * a.NH * a.T * a.T;
    a.qkv = dalloc(nq), a.out = dalloc(no), a.att = dalloc(na), a.R = dalloc(no);
    randn(a.qkv, nq, 1), randn(a.R, no, 1);
    a.c.w[0] = a.qkv, a.c.wn[0] = nq;
    for (size_t i = 0; i < na; i++) a.att[i] = 7.0; /* the kernel must write every entry */

    att_loss(&a.c);
    double *oref = dalloc(no), *aref = dalloc(na);
    att_reference(oref, aref, a.qkv, a.B, a.T, a.NH, a.HS);
    double eo = relerr(a.out, oref, no), ea = relerr(a.att, aref, na);
    tap_ok(eo <= 1e-13 && ea <= 1e-13,
           "attention: out and att match the naive reference (B=%d T=%d NH=%d HS=%d, err %.1e, %.1e)",
           a.B, a.T, a.NH, a.HS, eo, ea);
    double esum = 0;
    int zero_above = 1;
    for (int r = 0; r < a.B * a.NH; r++)
        for (int t = 0; t < a.T; t++) {
            const double *row = a.att + ((size_t)r * a.T + t) * a.T;
            double s = 0;
            for (int t2 = 0; t2 <= t; t2++) s += row[t2];
            for (int t2 = t + 1; t2 < a.T; t2++) zero_above &= row[t2] == 0;
            esum = fmax(esum, fabs(s - 1));
        }
    tap_ok(esum <= 1e-13, "attention: att rows sum to 1 over t2 <= t (max |sum-1| %.1e)", esum);
    tap_ok(zero_above, "attention: att is exactly 0 above the diagonal");

    /* causality: changing k and v of token t0 leaves every earlier output alone */
    int b0 = randint(0, a.B - 1), t0 = randint(1, a.T - 1);
    double *q2 = ddup(a.qkv, nq), *o2 = dalloc(no), *a2 = dalloc(na);
    for (int i = C; i < 3 * C; i++) q2[((size_t)b0 * a.T + t0) * 3 * C + i] += 1.0 + pt_rng_uniform(&rng);
    D->attention_ref_fwd(o2, a2, q2, a.B, a.T, a.NH, a.HS);
    int same_before = 1, changed_at = 0;
    for (int b = 0; b < a.B; b++)
        for (int t = 0; t < a.T; t++)
            for (int i = 0; i < C; i++) {
                size_t j = ((size_t)b * a.T + t) * C + i;
                if (b != b0 || t < t0) same_before &= o2[j] == a.out[j];
                else if (t == t0) changed_at |= o2[j] != a.out[j];
            }
    tap_ok(same_before && changed_at,
           "attention: perturbing k,v of (b=%d, t=%d) changes output t=%d but no earlier one", b0, t0, t0);
    run_case(&a.c);
    free(q2), free(o2), free(a2), free(oref), free(aref);
    free(a.qkv), free(a.out), free(a.att), free(a.R);
}

/* causal softmax rows: forward against a reference, backward against finite
 * differences of L = sum(R * softmax(S)); then the ring's composition
 * (batched GEMM scores, softmax, batched GEMM values) against attention_ref_fwd. */
typedef struct {
    opcase c;
    int BH, Tq, T, q0;
    double *S, *P, *R;
} sm_case;

static double sm_loss(opcase *c)
{
    sm_case *e = (sm_case *)c;
    size_t n = (size_t)e->BH * e->Tq * e->T;
    memcpy(e->P, e->S, n * sizeof(double));
    D->softmax_causal_fwd(e->P, e->BH, e->Tq, e->T, e->q0);
    return dot(e->P, e->R, n);
}

static void sm_bwd(opcase *c, double **g)
{
    sm_case *e = (sm_case *)c;
    sm_loss(c);
    memcpy(g[0], e->R, sizeof(double) * (size_t)e->BH * e->Tq * e->T); /* dP = R, dS written in place */
    D->softmax_causal_bwd(g[0], e->P, 1.0, e->BH, e->Tq, e->T, e->q0);
}

static void test_softmax_causal(void)
{
    sm_case s = {{"softmax_causal", sm_loss, sm_bwd, 1, 1, {"scores"}, {0}, {0}}, 0, 0, 0, 0, 0, 0, 0};
    s.BH = randint(2, 4), s.Tq = randint(2, 5), s.q0 = randint(1, 6), s.T = s.q0 + s.Tq + randint(0, 3);
    size_t n = (size_t)s.BH * s.Tq * s.T;
    s.S = dalloc(n), s.P = dalloc(n), s.R = dalloc(n);
    randn(s.S, n, 2), randn(s.R, n, 1);
    s.c.w[0] = s.S, s.c.wn[0] = n;
    sm_loss(&s.c);
    double e = 0, masked = 0;
    for (int r = 0; r < s.BH * s.Tq; r++) {
        const int i = r % s.Tq, vis = s.q0 + i + 1;
        const double *x = s.S + (size_t)r * s.T, *p = s.P + (size_t)r * s.T;
        double mx = -INFINITY, z = 0;
        for (int t = 0; t < vis; t++) mx = fmax(mx, x[t]);
        for (int t = 0; t < vis; t++) z += exp(x[t] - mx);
        for (int t = 0; t < vis; t++) e = fmax(e, fabs(p[t] - exp(x[t] - mx) / z));
        for (int t = vis; t < s.T; t++) masked = fmax(masked, fabs(p[t]));
    }
    tap_ok(e <= 1e-15 && masked == 0, "softmax_causal: rows == softmax over keys <= q0+i, later keys 0 "
           "(BH=%d Tq=%d T=%d q0=%d, err %.1e)", s.BH, s.Tq, s.T, s.q0, e);
    run_case(&s.c);
    /* scale: dS is scale times the scale-1 result */
    double *d1 = ddup(s.R, n), *d2 = ddup(s.R, n);
    D->softmax_causal_bwd(d1, s.P, 1.0, s.BH, s.Tq, s.T, s.q0);
    D->softmax_causal_bwd(d2, s.P, 0.25, s.BH, s.Tq, s.T, s.q0);
    for (size_t i = 0; i < n; i++) d1[i] *= 0.25;
    tap_ok(relerr(d2, d1, n) <= 1e-15, "softmax_causal_bwd: scale multiplies dS");
    free(d1), free(d2), free(s.S), free(s.P), free(s.R);

    /* attention as the ring composes it (one block, q0 = 0) */
    const int B = randint(1, 3), T = randint(3, 7), NH = randint(1, 3), HS = randint(2, 5), C = NH * HS;
    double *qkv = dalloc((size_t)B * T * 3 * C), *out = dalloc((size_t)B * T * C), *att = dalloc((size_t)B * NH * T * T);
    double *out2 = dalloc((size_t)B * T * C), *att2 = dalloc((size_t)B * NH * T * T);
    randn(qkv, (size_t)B * T * 3 * C, 1);
    D->attention_ref_fwd(out, att, qkv, B, T, NH, HS);
    for (int b = 0; b < B; b++) {
        const double *q = qkv + (size_t)b * T * 3 * C;
        D->gemm_batched(0, 1, T, T, HS, 1 / sqrt((double)HS), q, 3 * C, HS, q + C, 3 * C, HS, 0.0,
                        att2 + (size_t)b * NH * T * T, T, (int64_t)T * T, NH);
        D->softmax_causal_fwd(att2 + (size_t)b * NH * T * T, NH, T, T, 0);
        D->gemm_batched(0, 0, T, HS, T, 1.0, att2 + (size_t)b * NH * T * T, T, (int64_t)T * T, q + 2 * C, 3 * C, HS,
                        0.0, out2 + (size_t)b * T * C, C, HS, NH);
    }
    double ea = relerr(att2, att, (size_t)B * NH * T * T), eo = relerr(out2, out, (size_t)B * T * C);
    tap_ok(ea <= 1e-14 && eo <= 1e-14, "gemm_batched + softmax_causal + gemm_batched == attention_ref_fwd "
           "(B=%d T=%d NH=%d HS=%d, err att %.1e, out %.1e)", B, T, NH, HS, ea, eo);
    free(qkv), free(out), free(att), free(out2), free(att2);
}

/* Causal rows of T = 128 through the float attention, against double. */
static void test_float_attention(void)
{
    const pt_ops *F = &pt_cpu_ops_f32;
    const int B = 1, T = 128, NH = 2, HS = 64, C = NH * HS;
    size_t nq = (size_t)B * T * 3 * C, no = (size_t)B * T * C, na = (size_t)B * NH * T * T;
    float *qf = xcalloc(nq, sizeof(float)), *of = xcalloc(no, sizeof(float)), *af = xcalloc(na, sizeof(float));
    float *rf = xcalloc(no, sizeof(float)), *dqf = xcalloc(nq, sizeof(float));
    double *qd = dalloc(nq), *od = dalloc(no), *ad = dalloc(na), *rd = dalloc(no), *dqd = dalloc(nq);
    for (size_t i = 0; i < nq; i++) qd[i] = qf[i] = (float)pt_rng_normal(&rng);
    for (size_t i = 0; i < no; i++) rd[i] = rf[i] = (float)pt_rng_normal(&rng);
    F->attention_ref_fwd(of, af, qf, B, T, NH, HS);
    F->attention_ref_bwd(dqf, rf, qf, af, B, T, NH, HS);
    D->attention_ref_fwd(od, ad, qd, B, T, NH, HS);
    D->attention_ref_bwd(dqd, rd, qd, ad, B, T, NH, HS);
    double eo = 0, so = 0, eq = 0, sq = 0;
    for (size_t i = 0; i < no; i++) eo = fmax(eo, fabs(of[i] - od[i])), so = fmax(so, fabs(od[i]));
    for (size_t i = 0; i < nq; i++) eq = fmax(eq, fabs(dqf[i] - dqd[i])), sq = fmax(sq, fabs(dqd[i]));
    tap_ok(eo <= 1e-5 * so && eq <= 1e-5 * sq,
           "float attention at T=%d HS=%d against double: out err %.1e of %.1e, dqkv err %.1e of %.1e", T, HS, eo, so, eq, sq);
    free(qf), free(of), free(af), free(rf), free(dqf), free(qd), free(od), free(ad), free(rd), free(dqd);
}

int main(void)
{
    const uint64_t seed = test_seed();
    pt_rng_seed(&rng, seed, 0);

    test_attention();
    test_softmax_causal();
    tap_diag("worst finite-difference error over these ops: %.2e (bound %.0e)", g_worst_fd, FD_TOL);
    test_float_attention();
    return tap_done();
}
