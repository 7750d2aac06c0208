/* SPDX-License-Identifier: MIT */
/* Tests of the fused kernels (lib/backend/ops.h, cpu_ops.inc): flash
 * attention, the fused classifier and the GEMM epilogues.
 *
 *  1. Flash attention (attention_fwd/bwd) of the double table against a
 *     naive attention written here from the formula (Vaswani et al. 2017,
 *     3.2.1; scores, softmax and its backward in full, in double) and the
 *     materialised attention_ref_fwd/bwd: whole sequences whose T is not a
 *     multiple of PT_FLASH_TILE, ring-step shapes (a query block against a
 *     key block at global offsets, rows that see no key), the exact merge
 *     of two key blocks in either order (Ring Attention, Liu et al. 2023),
 *     the backward of a split sequence from the final output and
 *     log-sum-exp, causality, finite differences and the accumulate
 *     contract.
 *  2. The fused classifier (classifier_fwd/bwd, xent_rescale) against the
 *     materialised head (logits by a naive product, then the softmax
 *     cross-entropy written here): vocabulary not a multiple of the block,
 *     padded ids, x and w in 1, 2 and 3 column pieces, three vocabulary
 *     shards merged as lib/parallel does (padded rows of dw untouched),
 *     finite differences.
 *  3. The GEMM epilogues (matmul_fwd GELU_AUX_BIAS with beta 0 and 1,
 *     matmul_bwd DGELU_BGRAD, epilogue_fwd/bwd alone) against a GEMM
 *     followed by the epilogue's formula, N not a multiple of the row
 *     block; finite differences through a two-layer MLP.
 *  4. The float table against the double table for each (~1e-5), at
 *     sizes with several tiles and blocks, and 1 vs 2 and 3 OpenMP
 *     threads (the double table, bit for bit).
 *
 * Inputs are fresh random numbers every run; the seed is printed as a TAP
 * diagnostic and PTRAIN_TEST_SEED=<n> reproduces a run. */
#include "tests/unit/ops_util.h"

#ifdef _OPENMP
#include <omp.h>
#endif

static const pt_ops *F = &pt_cpu_ops_f32;

/* float vs double: max|f - d| / max|d| */
#define MIXED_TOL 1e-5

static float *fdup(const double *x, size_t n)
{
    float *y = xcalloc(n, sizeof(float));
    for (size_t i = 0; i < n; i++) y[i] = (float)x[i];
    return y;
}
static double relerr_f(const float *a, const double *b, size_t n)
{
    double e = 0, s = maxabs(b, n);
    for (size_t i = 0; i < n; i++) e = fmax(e, fabs((double)a[i] - b[i]));
    if (e != e) return INFINITY;
    return s > 0 ? e / s : e;
}
static void round_to_float(double *x, size_t n)
{
    for (size_t i = 0; i < n; i++) x[i] = (float)x[i];
}

/* ---- flash attention ---------------------------------------------------------- */

/* One attention problem: queries, keys and values in their own row-major
 * buffers with the strides of pt_attn_dims (head h at column h*HS). */
typedef struct {
    pt_attn_dims d;
    double *q, *k, *v;    /* [B, Tq, ldq], [B, Tk, ldkv] x2 */
    double *out, *lse;    /* [B, Tq, C], [B, NH, Tq] */
    double *dout;         /* [B, Tq, C] */
} attn_prob;

static size_t nq_of(const pt_attn_dims *d) { return (size_t)d->B * d->Tq * d->ldq; }
static size_t nk_of(const pt_attn_dims *d) { return (size_t)d->B * d->Tk * d->ldkv; }
static size_t no_of(const pt_attn_dims *d) { return (size_t)d->B * d->Tq * d->NH * d->HS; }
static size_t nl_of(const pt_attn_dims *d) { return (size_t)d->B * d->NH * d->Tq; }

static void attn_new(attn_prob *a, pt_attn_dims d)
{
    a->d = d;
    a->q = dalloc(nq_of(&d)), a->k = dalloc(nk_of(&d)), a->v = dalloc(nk_of(&d));
    a->out = dalloc(no_of(&d)), a->lse = dalloc(nl_of(&d)), a->dout = dalloc(no_of(&d));
    randn(a->q, nq_of(&d), 1), randn(a->k, nk_of(&d), 1), randn(a->v, nk_of(&d), 1), randn(a->dout, no_of(&d), 1);
}
static void attn_free(attn_prob *a) { free(a->q), free(a->k), free(a->v), free(a->out), free(a->lse), free(a->dout); }

/* The formula in full: S = scale q k^T over the visible keys (k0 + j <=
 * q0 + i), P = softmax(S), out = P v, lse = log sum exp S (-inf, out 0 for
 * a row that sees nothing); backward dP = dout v^T, dS = P (dP - rowsum(P
 * dP)) scale, dq = dS k, dk = dS^T q, dv = P^T dout, ACCUMULATED. */
static void attn_naive(const pt_attn_dims *d, const double *q, const double *k, const double *v, double *out,
                       double *lse, const double *dout, double *dq, double *dk, double *dv)
{
    const int C = d->NH * d->HS;
    const double scale = 1 / sqrt((double)d->HS);
    double *s = dalloc((size_t)d->Tk), *dp = dalloc((size_t)d->Tk);
    for (int b = 0; b < d->B; b++)
        for (int h = 0; h < d->NH; h++)
            for (int i = 0; i < d->Tq; i++) {
                const double *qi = q + ((size_t)b * d->Tq + i) * d->ldq + h * d->HS;
                double mx = -INFINITY, z = 0;
                int nvis = 0;
                for (int j = 0; j < d->Tk; j++) {
                    s[j] = -INFINITY;
                    if (d->k0 + j > d->q0 + i) continue;
                    const double *kj = k + ((size_t)b * d->Tk + j) * d->ldkv + h * d->HS;
                    double t = 0;
                    for (int c = 0; c < d->HS; c++) t += qi[c] * kj[c];
                    s[j] = t * scale;
                    mx = fmax(mx, s[j]);
                    nvis++;
                }
                for (int j = 0; j < d->Tk; j++) s[j] = s[j] == -INFINITY ? 0 : exp(s[j] - mx), z += s[j];
                double *o = out + ((size_t)b * d->Tq + i) * C + h * d->HS;
                if (lse) lse[((size_t)b * d->NH + h) * d->Tq + i] = nvis ? mx + log(z) : -INFINITY;
                for (int j = 0; j < d->Tk; j++) s[j] = nvis ? s[j] / z : 0; /* P */
                for (int c = 0; c < d->HS; c++) {
                    double t = 0;
                    for (int j = 0; j < d->Tk; j++) t += s[j] * v[((size_t)b * d->Tk + j) * d->ldkv + h * d->HS + c];
                    o[c] = t;
                }
                if (!dout) continue;
                const double *g = dout + ((size_t)b * d->Tq + i) * C + h * d->HS;
                double rs = 0;
                for (int j = 0; j < d->Tk; j++) {
                    const double *vj = v + ((size_t)b * d->Tk + j) * d->ldkv + h * d->HS;
                    double t = 0;
                    for (int c = 0; c < d->HS; c++) t += g[c] * vj[c];
                    dp[j] = t;
                    rs += s[j] * t;
                }
                for (int j = 0; j < d->Tk; j++) {
                    if (s[j] == 0) continue;
                    const double ds = s[j] * (dp[j] - rs) * scale;
                    double *dqi = dq + ((size_t)b * d->Tq + i) * d->ldq + h * d->HS;
                    const double *kj = k + ((size_t)b * d->Tk + j) * d->ldkv + h * d->HS;
                    double *dkj = dk + ((size_t)b * d->Tk + j) * d->ldkv + h * d->HS;
                    double *dvj = dv + ((size_t)b * d->Tk + j) * d->ldkv + h * d->HS;
                    for (int c = 0; c < d->HS; c++) {
                        dqi[c] += ds * kj[c];
                        dkj[c] += ds * qi[c];
                        dvj[c] += s[j] * g[c];
                    }
                }
            }
    free(s), free(dp);
}

/* flash forward and backward of problem a against the naive formula */
static void check_flash(attn_prob *a, const char *what)
{
    const pt_attn_dims *d = &a->d;
    const int C = d->NH * d->HS;
    const size_t nq = nq_of(d), nk = nk_of(d), no = no_of(d), nl = nl_of(d);
    double *oref = dalloc(no), *lref = dalloc(nl), *dq = dalloc(nq), *dk = dalloc(nk), *dv = dalloc(nk);
    double *dqr = dalloc(nq), *dkr = dalloc(nk), *dvr = dalloc(nk);
    for (size_t i = 0; i < no; i++) a->out[i] = 1234.5; /* every entry must be written */
    D->attention_fwd(a->out, a->lse, a->q, a->k, a->v, d, 0);
    attn_naive(d, a->q, a->k, a->v, oref, lref, a->dout, dqr, dkr, dvr);
    double el = 0;
    int inf_ok = 1, zero_ok = 1;
    for (size_t i = 0; i < nl; i++) {
        if (lref[i] == -INFINITY) {
            inf_ok &= a->lse[i] == -INFINITY;
            const size_t b = i / ((size_t)d->NH * d->Tq), h = i / d->Tq % d->NH, t = i % d->Tq;
            for (int c = 0; c < d->HS; c++) zero_ok &= a->out[(b * d->Tq + t) * C + h * d->HS + c] == 0;
        } else {
            el = fmax(el, fabs(a->lse[i] - lref[i]) / fmax(1, fabs(lref[i])));
        }
    }
    const double eo = relerr(a->out, oref, no);
    tap_ok(eo <= 1e-12 && el <= 1e-12 && inf_ok && zero_ok,
           "flash attention %s: out and lse == the formula (B=%d NH=%d HS=%d Tq=%d Tk=%d q0=%d k0=%d, tile %d; err "
           "%.1e, %.1e; rows seeing no key: lse -inf, out 0)",
           what, d->B, d->NH, d->HS, d->Tq, d->Tk, d->q0, d->k0, PT_FLASH_TILE, eo, el);
    /* backward accumulates into pre-filled buffers; the stride padding stays */
    randn(dq, nq, 1), randn(dk, nk, 1), randn(dv, nk, 1);
    double *dq0 = ddup(dq, nq), *dk0 = ddup(dk, nk), *dv0 = ddup(dv, nk);
    for (size_t i = 0; i < nq; i++) dqr[i] += dq0[i];
    for (size_t i = 0; i < nk; i++) dkr[i] += dk0[i], dvr[i] += dv0[i];
    D->attention_bwd(dq, dk, dv, a->dout, a->q, a->k, a->v, a->out, a->lse, d);
    const double eq = relerr(dq, dqr, nq), ek = relerr(dk, dkr, nk), ev = relerr(dv, dvr, nk);
    tap_ok(eq <= 1e-12 && ek <= 1e-12 && ev <= 1e-12,
           "flash attention %s: backward accumulates dq, dk, dv == the formula (err %.1e, %.1e, %.1e)", what, eq, ek,
           ev);
    free(oref), free(lref), free(dq), free(dk), free(dv), free(dqr), free(dkr), free(dvr), free(dq0), free(dk0),
        free(dv0);
}

/* whole sequences: T past a tile and not a multiple of it; against the
 * formula and the materialised attention_ref_fwd/bwd */
static void test_flash_whole(void)
{
    const int B = 2, NH = randint(1, 3), HS = randint(3, 9), T = PT_FLASH_TILE * randint(1, 2) + randint(1, 63);
    const int C = NH * HS;
    attn_prob a;
    double *qkv = dalloc((size_t)B * T * 3 * C);
    randn(qkv, (size_t)B * T * 3 * C, 1);
    /* the model's form: q, k, v views into one qkv buffer */
    a.d = (pt_attn_dims){B, NH, HS, T, T, 0, 0, 3 * C, 3 * C, NH};
    a.q = qkv, a.k = qkv + C, a.v = qkv + 2 * C;
    a.out = dalloc(no_of(&a.d)), a.lse = dalloc(nl_of(&a.d)), a.dout = dalloc(no_of(&a.d));
    randn(a.dout, no_of(&a.d), 1);
    D->attention_fwd(a.out, a.lse, a.q, a.k, a.v, &a.d, 0);
    double *oref = dalloc(no_of(&a.d)), *att = dalloc((size_t)B * NH * T * T);
    D->attention_ref_fwd(oref, att, qkv, B, T, NH, HS);
    double *dqkv = dalloc((size_t)B * T * 3 * C), *dref = dalloc((size_t)B * T * 3 * C);
    D->attention_bwd(dqkv, dqkv + C, dqkv + 2 * C, a.dout, a.q, a.k, a.v, a.out, a.lse, &a.d);
    D->attention_ref_bwd(dref, a.dout, qkv, att, B, T, NH, HS);
    const double eo = relerr(a.out, oref, no_of(&a.d)), eg = relerr(dqkv, dref, (size_t)B * T * 3 * C);
    tap_ok(eo <= 1e-12 && eg <= 1e-12,
           "flash attention == materialised attention_ref on qkv (B=%d T=%d NH=%d HS=%d: out err %.1e, dqkv err %.1e)",
           B, T, NH, HS, eo, eg);
    free(oref), free(att), free(dqkv), free(dref), free(a.out), free(a.lse), free(a.dout), free(qkv);

    /* own buffers with strides wider than the heads (padding untouched) */
    pt_attn_dims d = {randint(1, 2), NH, HS, T, T, 0, 0, C + randint(0, 3), C + randint(0, 3), NH};
    attn_new(&a, d);
    check_flash(&a, "whole sequence, padded strides");
    attn_free(&a);
}

/* a query block against a key block at global offsets (a ring step) */
static void test_flash_blocks(void)
{
    const int NH = randint(1, 3), HS = randint(2, 7), C = NH * HS;
    const int Tq = randint(40, 150), Tk = randint(40, 150);
    /* keys wholly before the queries, overlapping the diagonal, and partly
     * after (some rows see no key at all) */
    const int shapes[3][2] = {{Tk + randint(0, 20), 0}, {randint(0, 30), randint(0, 30)}, {0, randint(10, 60)}};
    const char *names[3] = {"ring step, earlier keys", "ring step, across the diagonal", "ring step, keys ahead"};
    for (int k = 0; k < 3; k++) {
        attn_prob a;
        attn_new(&a, (pt_attn_dims){randint(1, 2), NH, HS, Tq, Tk, shapes[k][0], shapes[k][1], C, C, NH});
        check_flash(&a, names[k]);
        attn_free(&a);
    }

    /* the merge: keys [0, T) split at a random point into two blocks; the
     * first written, the second merged (and the other order) == all keys;
     * the backward of each block from the final out and lse sums to the
     * whole backward */
    const int B = randint(1, 2), T = randint(70, 160), split = randint(1, T - 1);
    const int q0 = randint(0, 40);
    attn_prob all;
    attn_new(&all, (pt_attn_dims){B, NH, HS, T - q0, T, q0, 0, C, C, NH}); /* the last T - q0 positions' queries */
    D->attention_fwd(all.out, all.lse, all.q, all.k, all.v, &all.d, 0);
    pt_attn_dims d1 = all.d, d2 = all.d;
    d1.Tk = split, d2.Tk = T - split, d2.k0 = split;
    double *k2 = all.k + (size_t)split * C, *v2 = all.v + (size_t)split * C;
    /* B sequences: block 2 of sequence b starts at b*T + split; lay each block out contiguously */
    double *k1b = dalloc((size_t)B * split * C), *v1b = dalloc((size_t)B * split * C);
    double *k2b = dalloc((size_t)B * (T - split) * C), *v2b = dalloc((size_t)B * (T - split) * C);
    for (int b = 0; b < B; b++) {
        memcpy(k1b + (size_t)b * split * C, all.k + (size_t)b * T * C, sizeof(double) * split * C);
        memcpy(v1b + (size_t)b * split * C, all.v + (size_t)b * T * C, sizeof(double) * split * C);
        memcpy(k2b + (size_t)b * (T - split) * C, k2 + (size_t)b * T * C, sizeof(double) * (T - split) * C);
        memcpy(v2b + (size_t)b * (T - split) * C, v2 + (size_t)b * T * C, sizeof(double) * (T - split) * C);
    }
    const size_t no = no_of(&all.d), nl = nl_of(&all.d);
    double worst = 0;
    for (int order = 0; order < 2; order++) {
        double *o = dalloc(no), *l = dalloc(nl);
        if (order == 0) {
            D->attention_fwd(o, l, all.q, k1b, v1b, &d1, 0);
            D->attention_fwd(o, l, all.q, k2b, v2b, &d2, 1);
        } else {
            D->attention_fwd(o, l, all.q, k2b, v2b, &d2, 0);
            D->attention_fwd(o, l, all.q, k1b, v1b, &d1, 1);
        }
        worst = fmax(worst, fmax(relerr(o, all.out, no), relerr(l, all.lse, nl)));
        free(o), free(l);
    }
    tap_ok(worst <= 1e-13, "flash attention merge: keys [0, %d) + [%d, %d) merged in either order == all keys at once "
           "(B=%d Tq=%d q0=%d, err %.1e)", split, split, T, B, all.d.Tq, q0, worst);
    double *dq = dalloc(nq_of(&all.d)), *dk = dalloc(nk_of(&all.d)), *dv = dalloc(nk_of(&all.d));
    double *dq2 = dalloc(nq_of(&all.d)), *dk1 = dalloc((size_t)B * split * C), *dv1 = dalloc((size_t)B * split * C);
    double *dk2 = dalloc((size_t)B * (T - split) * C), *dv2 = dalloc((size_t)B * (T - split) * C);
    D->attention_bwd(dq, dk, dv, all.dout, all.q, all.k, all.v, all.out, all.lse, &all.d);
    D->attention_bwd(dq2, dk1, dv1, all.dout, all.q, k1b, v1b, all.out, all.lse, &d1);
    D->attention_bwd(dq2, dk2, dv2, all.dout, all.q, k2b, v2b, all.out, all.lse, &d2);
    double *dkc = dalloc(nk_of(&all.d)), *dvc = dalloc(nk_of(&all.d));
    for (int b = 0; b < B; b++) {
        memcpy(dkc + (size_t)b * T * C, dk1 + (size_t)b * split * C, sizeof(double) * split * C);
        memcpy(dvc + (size_t)b * T * C, dv1 + (size_t)b * split * C, sizeof(double) * split * C);
        memcpy(dkc + ((size_t)b * T + split) * C, dk2 + (size_t)b * (T - split) * C, sizeof(double) * (T - split) * C);
        memcpy(dvc + ((size_t)b * T + split) * C, dv2 + (size_t)b * (T - split) * C, sizeof(double) * (T - split) * C);
    }
    const double eb = fmax(relerr(dq2, dq, nq_of(&all.d)), fmax(relerr(dkc, dk, nk_of(&all.d)), relerr(dvc, dv, nk_of(&all.d))));
    tap_ok(eb <= 1e-12, "flash attention backward per key block from the final out and lse sums to the whole "
           "backward (err %.1e)", eb);
    free(dq), free(dk), free(dv), free(dq2), free(dk1), free(dv1), free(dk2), free(dv2), free(dkc), free(dvc);
    free(k1b), free(v1b), free(k2b), free(v2b);
    attn_free(&all);
}

/* gradient check of the whole-sequence op through run_case, and causality */
typedef struct {
    opcase c;
    pt_attn_dims d;
    double *qkv, *out, *lse, *R;
} fa_case;

static double fa_loss(opcase *c)
{
    fa_case *f = (fa_case *)c;
    const int C = f->d.NH * f->d.HS;
    D->attention_fwd(f->out, f->lse, f->qkv, f->qkv + C, f->qkv + 2 * C, &f->d, 0);
    return dot(f->out, f->R, no_of(&f->d));
}
static void fa_bwd(opcase *c, double **g)
{
    fa_case *f = (fa_case *)c;
    const int C = f->d.NH * f->d.HS;
    fa_loss(c);
    D->attention_bwd(g[0], g[0] + C, g[0] + 2 * C, f->R, f->qkv, f->qkv + C, f->qkv + 2 * C, f->out, f->lse, &f->d);
}

static void test_flash_fd(void)
{
    fa_case f = {{"flash attention", fa_loss, fa_bwd, 0, 1, {"qkv"}, {0}, {0}}, {0}, 0, 0, 0, 0};
    const int NH = 2, HS = randint(2, 4), C = NH * HS, T = PT_FLASH_TILE + randint(1, 20), B = 1;
    f.d = (pt_attn_dims){B, NH, HS, T, T, 0, 0, 3 * C, 3 * C, NH};
    const size_t nq = (size_t)B * T * 3 * C;
    f.qkv = dalloc(nq), f.out = dalloc(no_of(&f.d)), f.lse = dalloc(nl_of(&f.d)), f.R = dalloc(no_of(&f.d));
    randn(f.qkv, nq, 1), randn(f.R, no_of(&f.d), 1);
    f.c.w[0] = f.qkv, f.c.wn[0] = nq;
    run_case(&f.c);

    /* causality: changing k and v of token t0 leaves every earlier output alone */
    fa_loss(&f.c);
    const int t0 = randint(1, T - 1);
    double *q2 = ddup(f.qkv, nq), *o2 = dalloc(no_of(&f.d)), *l2 = dalloc(nl_of(&f.d));
    for (int i = C; i < 3 * C; i++) q2[(size_t)t0 * 3 * C + i] += 1.0 + pt_rng_uniform(&rng);
    D->attention_fwd(o2, l2, q2, q2 + C, q2 + 2 * C, &f.d, 0);
    int same_before = 1, changed_at = 0;
    for (int t = 0; t < T; t++)
        for (int i = 0; i < C; i++) {
            size_t j = (size_t)t * C + i;
            if (t < t0) same_before &= o2[j] == f.out[j];
            else if (t == t0) changed_at |= o2[j] != f.out[j];
        }
    tap_ok(same_before && changed_at, "flash attention: perturbing k,v of t=%d changes output t=%d but no earlier one "
           "(T=%d, tiles of %d)", t0, t0, T, PT_FLASH_TILE);
    free(q2), free(o2), free(l2), free(f.qkv), free(f.out), free(f.lse), free(f.R);
}

/* the float table against the double table: whole sequence and a ring step */
static void test_flash_float(void)
{
    for (int k = 0; k < 2; k++) {
        const int NH = 2, HS = 64, C = NH * HS;
        pt_attn_dims d = k == 0 ? (pt_attn_dims){2, NH, HS, 200 + randint(0, 20), 0, 0, 0, 3 * C, 3 * C, NH}
                                : (pt_attn_dims){1, NH, HS, 150, 170, 170 + randint(0, 50), randint(0, 60), C, C, NH};
        if (k == 0) d.Tk = d.Tq;
        attn_prob a;
        attn_new(&a, d);
        round_to_float(a.q, nq_of(&d)), round_to_float(a.k, nk_of(&d)), round_to_float(a.v, nk_of(&d));
        round_to_float(a.dout, no_of(&d));
        float *fq = fdup(a.q, nq_of(&d)), *fk = fdup(a.k, nk_of(&d)), *fv = fdup(a.v, nk_of(&d));
        float *fg = fdup(a.dout, no_of(&d)), *fo = xcalloc(no_of(&d), sizeof(float)), *fl = xcalloc(nl_of(&d), sizeof(float));
        float *fdq = xcalloc(nq_of(&d), sizeof(float)), *fdk = xcalloc(nk_of(&d), sizeof(float)),
              *fdv = xcalloc(nk_of(&d), sizeof(float));
        double *dq = dalloc(nq_of(&d)), *dk = dalloc(nk_of(&d)), *dv = dalloc(nk_of(&d));
        D->attention_fwd(a.out, a.lse, a.q, a.k, a.v, &d, 0);
        D->attention_bwd(dq, dk, dv, a.dout, a.q, a.k, a.v, a.out, a.lse, &d);
        F->attention_fwd(fo, fl, fq, fk, fv, &d, 0);
        F->attention_bwd(fdq, fdk, fdv, fg, fq, fk, fv, fo, fl, &d);
        const double eo = relerr_f(fo, a.out, no_of(&d)), el = relerr_f(fl, a.lse, nl_of(&d));
        const double eq = relerr_f(fdq, dq, nq_of(&d)), ek = relerr_f(fdk, dk, nk_of(&d)), ev = relerr_f(fdv, dv, nk_of(&d));
        tap_ok(eo <= MIXED_TOL && el <= MIXED_TOL && eq <= MIXED_TOL && ek <= MIXED_TOL && ev <= MIXED_TOL,
               "float flash attention (%s, Tq=%d Tk=%d HS=%d) against double: out %.1e, lse %.1e, dq %.1e, dk %.1e, "
               "dv %.1e (bound %.0e)", k ? "ring step" : "whole sequence", d.Tq, d.Tk, HS, eo, el, eq, ek, ev, MIXED_TOL);
        free(fq), free(fk), free(fv), free(fg), free(fo), free(fl), free(fdq), free(fdk), free(fdv), free(dq), free(dk),
            free(dv);
        attn_free(&a);
    }
}

/* ---- fused classifier -------------------------------------------------------- */

/* the materialised head: logits = x w^T [N, Vl] (w rows v0.. of a shard,
 * ids >= vreal excluded), then the row max, sum of exp, target logit, and
 * with dloss the dlogits, dx (+=) and dw (+=), all in double */
static void cls_naive(const double *x, const double *w, const int32_t *tgt, int v0, int vreal, int N, int C, int Vl,
                      double *stats, const double *dloss, double *dx, double *dw)
{
    const int W = vreal - v0 < 0 ? 0 : vreal - v0 > Vl ? Vl : vreal - v0;
    double *l = dalloc((size_t)(Vl ? Vl : 1));
    for (int n = 0; n < N; n++) {
        double mx = -INFINITY, se = 0, tg = 0;
        for (int v = 0; v < W; v++) {
            double s = 0;
            for (int c = 0; c < C; c++) s += x[(size_t)n * C + c] * w[(size_t)v * C + c];
            l[v] = s;
            mx = fmax(mx, s);
        }
        for (int v = 0; v < W; v++) se += exp(l[v] - mx);
        if (tgt[n] - v0 >= 0 && tgt[n] - v0 < W) tg = l[tgt[n] - v0];
        if (stats) stats[n] = mx, stats[N + n] = se, stats[2 * N + n] = tg;
        if (!dloss) continue;
        /* dloss with the GLOBAL statistics in stats */
        for (int v = 0; v < W; v++) {
            const double p = exp(l[v] - stats[n]) / stats[N + n];
            const double g = (p - (tgt[n] - v0 == v)) * dloss[n];
            for (int c = 0; c < C; c++) {
                dx[(size_t)n * C + c] += g * w[(size_t)v * C + c];
                dw[(size_t)v * C + c] += g * x[(size_t)n * C + c];
            }
        }
    }
    free(l);
}

/* row-major [R, C] <-> ks column pieces [ks][R][C/ks] */
static void to_pieces(double *dst, const double *src, int R, int C, int ks)
{
    const int Ck = C / ks;
    for (int s = 0; s < ks; s++)
        for (int r = 0; r < R; r++)
            for (int c = 0; c < Ck; c++) dst[((size_t)s * R + r) * Ck + c] = src[(size_t)r * C + s * Ck + c];
}
static void from_pieces(double *dst, const double *src, int R, int C, int ks)
{
    const int Ck = C / ks;
    for (int s = 0; s < ks; s++)
        for (int r = 0; r < R; r++)
            for (int c = 0; c < Ck; c++) dst[(size_t)r * C + s * Ck + c] = src[((size_t)s * R + r) * Ck + c];
}

static void test_classifier_ref(void)
{
    /* N past the kernel's row block of 256: two row blocks */
    const int vb = randint(3, 7), N = 256 + randint(1, 40), C = 6 * randint(1, 2), Vl = 3 * vb + randint(1, vb - 1);
    const int vreal = Vl - randint(1, 3); /* padded ids at the end */
    double *x = dalloc((size_t)N * C), *w = dalloc((size_t)Vl * C), *st = dalloc(3 * (size_t)N), *sr = dalloc(3 * (size_t)N);
    double *dl = dalloc((size_t)N), *work = dalloc((size_t)N * vb);
    int32_t *tgt = xcalloc((size_t)N, sizeof(int32_t));
    randn(x, (size_t)N * C, 1), randn(w, (size_t)Vl * C, 1), randu(dl, (size_t)N, 0.1, 1);
    for (int n = 0; n < N; n++) tgt[n] = randint(0, vreal - 1);
    cls_naive(x, w, tgt, 0, vreal, N, C, Vl, sr, NULL, NULL, NULL);
    double *dxr = dalloc((size_t)N * C), *dwr = dalloc((size_t)Vl * C);
    cls_naive(x, w, tgt, 0, vreal, N, C, Vl, sr, dl, dxr, dwr);
    for (int ks = 1; ks <= 3; ks++) {
        double *xp = dalloc((size_t)N * C), *wp = dalloc((size_t)Vl * C), *dx = dalloc((size_t)N * C), *dw = dalloc((size_t)Vl * C);
        double *dxp = dalloc((size_t)N * C), *dwp = dalloc((size_t)Vl * C);
        to_pieces(xp, x, N, C, ks), to_pieces(wp, w, Vl, C, ks);
        D->classifier_fwd(st, xp, wp, tgt, work, vb, 0, vreal, N, C, Vl, ks);
        double es = 0;
        for (int n = 0; n < N; n++) /* the sum relative to the same max: compare log-sum-exp and the rest */
            es = fmax(es, fmax(fabs(st[n] - sr[n]) + fabs(log(st[N + n]) - log(sr[N + n])), fabs(st[2 * N + n] - sr[2 * N + n])));
        /* the backward accumulates: pre-filled pieces; padded rows of dw untouched */
        randn(dxp, (size_t)N * C, 1), randn(dwp, (size_t)Vl * C, 1);
        double *dx0 = ddup(dxp, (size_t)N * C), *dw0 = ddup(dwp, (size_t)Vl * C);
        D->classifier_bwd(dxp, dwp, xp, wp, st, tgt, dl, work, vb, 0, vreal, N, C, Vl, ks);
        for (size_t i = 0; i < (size_t)N * C; i++) dxp[i] -= dx0[i];
        for (size_t i = 0; i < (size_t)Vl * C; i++) dwp[i] -= dw0[i];
        from_pieces(dx, dxp, N, C, ks), from_pieces(dw, dwp, Vl, C, ks);
        int pad_ok = 1;
        for (int v = vreal; v < Vl; v++)
            for (int c = 0; c < C; c++) pad_ok &= dw[(size_t)v * C + c] == 0;
        const double ex = relerr(dx, dxr, (size_t)N * C), ew = relerr(dw, dwr, (size_t)Vl * C);
        tap_ok(es <= 1e-12 && ex <= 1e-12 && ew <= 1e-12 && pad_ok,
               "classifier in %d column piece%s == the materialised head (N=%d C=%d Vl=%d vreal=%d, blocks of %d: "
               "stats err %.1e, dx %.1e, dw %.1e; padded rows of dw untouched)", ks, ks > 1 ? "s" : "", N, C, Vl, vreal,
               vb, es, ex, ew);
        free(xp), free(wp), free(dx), free(dw), free(dxp), free(dwp), free(dx0), free(dw0);
    }

    /* three vocabulary shards (the last all padding or partly), merged as
     * lib/parallel's pt_classifier_fwd does: max of the maxima, each sum moved
     * to it (xent_rescale), sums added */
    const int V = 3 * Vl, vr = 2 * Vl + randint(-2, 2) + (randint(0, 1) ? 0 : -Vl / 2);
    double *wv = dalloc((size_t)V * C), *sref = dalloc(3 * (size_t)N), *sg = dalloc(3 * (size_t)N);
    double *dxs = dalloc((size_t)N * C), *dws = dalloc((size_t)V * C), *dxu = dalloc((size_t)N * C), *dwu = dalloc((size_t)V * C);
    randn(wv, (size_t)V * C, 1);
    for (int n = 0; n < N; n++) tgt[n] = randint(0, vr - 1);
    D->classifier_fwd(sref, x, wv, tgt, work, vb, 0, vr, N, C, V, 1);
    for (int n = 0; n < N; n++) sg[n] = -INFINITY, sg[N + n] = 0, sg[2 * N + n] = 0;
    double *loc[3];
    for (int s = 0; s < 3; s++) {
        loc[s] = dalloc(3 * (size_t)N);
        D->classifier_fwd(loc[s], x, wv + (size_t)s * Vl * C, tgt, work, vb, s * Vl, vr, N, C, Vl, 1);
        for (int n = 0; n < N; n++) sg[n] = fmax(sg[n], loc[s][n]);
    }
    for (int s = 0; s < 3; s++) {
        D->xent_rescale(loc[s] + N, loc[s], sg, N);
        for (int n = 0; n < N; n++) sg[N + n] += loc[s][N + n], sg[2 * N + n] += loc[s][2 * N + n];
        free(loc[s]);
    }
    double em = 0;
    for (int n = 0; n < N; n++)
        em = fmax(em, fabs(sg[n] - sref[n]) + fabs(sg[N + n] - sref[N + n]) / sref[N + n] + fabs(sg[2 * N + n] - sref[2 * N + n]));
    D->classifier_bwd(dxu, dwu, x, wv, sref, tgt, dl, work, vb, 0, vr, N, C, V, 1);
    for (size_t i = 0; i < (size_t)V * C; i++) dws[i] = 4242.0; /* shards' dw between guard values */
    for (int s = 0; s < 3; s++) {
        const int W = vr - s * Vl < 0 ? 0 : vr - s * Vl > Vl ? Vl : vr - s * Vl;
        for (size_t i = (size_t)s * Vl * C; i < ((size_t)s * Vl + W) * C; i++) dws[i] = 0;
        D->classifier_bwd(dxs, dws + (size_t)s * Vl * C, x, wv + (size_t)s * Vl * C, sg, tgt, dl, work, vb, s * Vl, vr,
                          N, C, Vl, 1);
    }
    int guard = 1;
    for (size_t i = (size_t)vr * C; i < (size_t)V * C; i++) guard &= dws[i] == 4242.0, dws[i] = 0;
    const double exs = relerr(dxs, dxu, (size_t)N * C), ews = relerr(dws, dwu, (size_t)V * C);
    tap_ok(em <= 1e-12 && exs <= 1e-12 && ews <= 1e-12 && guard,
           "classifier over 3 vocabulary shards of %d (vreal %d of %d), merged with xent_rescale == one shard "
           "(stats err %.1e, dx %.1e, dw %.1e; padded rows untouched)", Vl, vr, V, em, exs, ews);
    free(wv), free(sref), free(sg), free(dxs), free(dws), free(dxu), free(dwu);
    free(x), free(w), free(st), free(sr), free(dl), free(work), free(tgt), free(dxr), free(dwr);
}

/* finite differences of the mean cross-entropy through the classifier */
typedef struct {
    opcase c;
    int N, C, Vl, vreal, vb;
    int32_t *tgt;
    double *x, *w, *st, *work, *dl;
} cls_case;

static double cls_loss(opcase *c)
{
    cls_case *k = (cls_case *)c;
    D->classifier_fwd(k->st, k->x, k->w, k->tgt, k->work, k->vb, 0, k->vreal, k->N, k->C, k->Vl, 1);
    double *l = dalloc((size_t)k->N);
    D->xent_loss(l, k->st, k->st + k->N, k->st + 2 * k->N, k->N);
    double s = 0;
    for (int n = 0; n < k->N; n++) s += l[n] / k->N;
    free(l);
    return s;
}
static void cls_bwd(opcase *c, double **g)
{
    cls_case *k = (cls_case *)c;
    cls_loss(c);
    D->classifier_bwd(g[0], g[1], k->x, k->w, k->st, k->tgt, k->dl, k->work, k->vb, 0, k->vreal, k->N, k->C, k->Vl, 1);
}

static void test_classifier_fd(void)
{
    cls_case k = {{"classifier", cls_loss, cls_bwd, 0, 2, {"x", "w"}, {0}, {0}}, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    k.vb = randint(3, 6), k.N = randint(4, 9), k.C = randint(3, 7), k.Vl = 2 * k.vb + randint(1, k.vb - 1);
    k.vreal = k.Vl - 1;
    k.x = dalloc((size_t)k.N * k.C), k.w = dalloc((size_t)k.Vl * k.C), k.st = dalloc(3 * (size_t)k.N);
    k.work = dalloc((size_t)k.N * k.vb), k.dl = dalloc((size_t)k.N), k.tgt = xcalloc((size_t)k.N, sizeof(int32_t));
    randn(k.x, (size_t)k.N * k.C, 1), randn(k.w, (size_t)k.Vl * k.C, 1);
    for (int n = 0; n < k.N; n++) k.tgt[n] = randint(0, k.vreal - 1), k.dl[n] = 1.0 / k.N;
    k.c.w[0] = k.x, k.c.wn[0] = (size_t)k.N * k.C, k.c.w[1] = k.w, k.c.wn[1] = (size_t)k.Vl * k.C;
    run_case(&k.c);
    free(k.x), free(k.w), free(k.st), free(k.work), free(k.dl), free(k.tgt);
}

static void test_classifier_float(void)
{
    /* rows past two of the kernel's row blocks (256), vocabulary past two of its column blocks */
    const int N = 512 + randint(1, 200), C = 48, vb = PT_CLASSIFIER_VBLOCK, Vl = 2 * vb + randint(1, vb - 1),
              vreal = Vl - randint(1, 9);
    double *x = dalloc((size_t)N * C), *w = dalloc((size_t)Vl * C), *st = dalloc(3 * (size_t)N), *dl = dalloc((size_t)N);
    double *work = dalloc((size_t)N * vb), *dx = dalloc((size_t)N * C), *dw = dalloc((size_t)Vl * C);
    int32_t *tgt = xcalloc((size_t)N, sizeof(int32_t));
    randn(x, (size_t)N * C, 1), randn(w, (size_t)Vl * C, 1.0 / sqrt((double)C));
    round_to_float(x, (size_t)N * C), round_to_float(w, (size_t)Vl * C);
    for (int n = 0; n < N; n++) tgt[n] = randint(0, vreal - 1), dl[n] = 1.0 / N;
    float *fx = fdup(x, (size_t)N * C), *fw = fdup(w, (size_t)Vl * C), *fst = xcalloc(3 * (size_t)N, sizeof(float));
    float *fdl = fdup(dl, (size_t)N), *fwork = xcalloc((size_t)N * vb, sizeof(float));
    float *fdx = xcalloc((size_t)N * C, sizeof(float)), *fdw = xcalloc((size_t)Vl * C, sizeof(float));
    D->classifier_fwd(st, x, w, tgt, work, vb, 0, vreal, N, C, Vl, 1);
    D->classifier_bwd(dx, dw, x, w, st, tgt, dl, work, vb, 0, vreal, N, C, Vl, 1);
    F->classifier_fwd(fst, fx, fw, tgt, fwork, vb, 0, vreal, N, C, Vl, 1);
    F->classifier_bwd(fdx, fdw, fx, fw, fst, tgt, fdl, fwork, vb, 0, vreal, N, C, Vl, 1);
    const double es = relerr_f(fst, st, 3 * (size_t)N), ex = relerr_f(fdx, dx, (size_t)N * C),
                 ew = relerr_f(fdw, dw, (size_t)Vl * C);
    tap_ok(es <= MIXED_TOL && ex <= MIXED_TOL && ew <= MIXED_TOL,
           "float classifier (N=%d C=%d Vl=%d vreal=%d, blocks of %d) against double: stats %.1e, dx %.1e, dw %.1e "
           "(bound %.0e)", N, C, Vl, vreal, vb, es, ex, ew, MIXED_TOL);
    free(x), free(w), free(st), free(dl), free(work), free(dx), free(dw), free(tgt);
    free(fx), free(fw), free(fst), free(fdl), free(fwork), free(fdx), free(fdw);
}

/* ---- the chunked classifier (classifier_rows_fwd/bwd) ------------------------ */

/* a table's buffer of n elements of type t from doubles, and back */
static void *to_t(const double *d, size_t n, pt_dtype t)
{
    void *p = xcalloc(n ? n : 1, pt_dtype_size(t));
    D->convert(p, t, d, PT_F64, n);
    return p;
}
static double *from_t(const void *p, size_t n, pt_dtype t)
{
    double *d = dalloc(n);
    D->convert(d, PT_F64, p, t, n);
    return d;
}

typedef struct {
    int R, C, Vl, ns, vr; /* rows, width, shard width, shards, unpadded ids of the V = ns Vl */
    double *x, *w, *dl, *P;
    int32_t *tgt;
} rows_case;

static rows_case rows_new(int R, int C, int Vl, int ns, int bf16)
{
    rows_case k = {R, C, Vl, ns, ns * Vl - randint(1, Vl / 2), NULL, NULL, NULL, NULL, NULL};
    const size_t V = (size_t)ns * Vl;
    k.x = dalloc((size_t)R * C), k.w = dalloc(V * C), k.dl = dalloc((size_t)R), k.P = dalloc((size_t)R * C);
    k.tgt = xcalloc((size_t)R, sizeof(int32_t));
    randn(k.x, (size_t)R * C, 1), randn(k.w, V * C, 2.0 / sqrt((double)C)), randu(k.dl, (size_t)R, 0.1, 1);
    randn(k.P, (size_t)R * C, 1);
    if (bf16) { /* what the table can hold: the reference sees the same inputs */
        void *b = to_t(k.x, (size_t)R * C, PT_BF16);
        D->convert(k.x, PT_F64, b, PT_BF16, (size_t)R * C), free(b);
        b = to_t(k.w, V * C, PT_BF16);
        D->convert(k.w, PT_F64, b, PT_BF16, V * C), free(b);
        memset(k.P, 0, sizeof(double) * (size_t)R * C); /* a bf16 dx would round the prefill's sum */
    }
    for (int n = 0; n < R; n++) k.tgt[n] = randint(0, k.vr - 1);
    if (R > 2) k.tgt[0] = k.vr - 1; /* a target in the last, partly padded shard */
    return k;
}
static void rows_free(rows_case *k) { free(k->x), free(k->w), free(k->dl), free(k->P), free(k->tgt); }

/* table o over k's shards, the statistics merged between forward and
 * backward as pt_classifier_step merges them: global stats [3R], dx [R, C]
 * (minus the prefill), dw [V, C] (padded rows: 4242 if left untouched) */
static void rows_run(const pt_ops *o, const rows_case *k, double *st, double *dx, double *dw)
{
    const int R = k->R, C = k->C, Vl = k->Vl;
    const size_t V = (size_t)k->ns * Vl, ea = pt_dtype_size(o->act);
    void *x = to_t(k->x, (size_t)R * C, o->act), *w = to_t(k->w, V * C, o->act);
    void *dxo = to_t(k->P, (size_t)R * C, o->act), *dlo = to_t(k->dl, (size_t)R, o->acc);
    double *g = dalloc(3 * (size_t)R), *dwg = dalloc(V * C);
    for (size_t i = 0; i < V * C; i++) dwg[i] = i >= (size_t)k->vr * C ? 4242.0 : 0;
    void *dwo = to_t(dwg, V * C, o->acc);
    void *lg = xcalloc((size_t)R * Vl, pt_dtype_size(o->acc)), *cs = xcalloc(3 * (size_t)R, pt_dtype_size(o->acc));
    void *work = xcalloc(pt_classifier_rows_work_elems(R, C, Vl), pt_dtype_size(o->acc));
    double *loc = dalloc(3 * (size_t)k->ns * R);
    for (int n = 0; n < R; n++) g[n] = -INFINITY;
    for (int s = 0; s < k->ns; s++) {
        o->classifier_rows_fwd(cs, lg, x, (char *)w + (size_t)s * Vl * C * ea, k->tgt, work, s * Vl, k->vr, R, C, Vl);
        double *l = from_t(cs, 3 * (size_t)R, o->acc);
        memcpy(loc + (size_t)s * 3 * R, l, sizeof(double) * 3 * (size_t)R);
        for (int n = 0; n < R; n++) g[n] = fmax(g[n], l[n]);
        free(l);
    }
    for (int s = 0; s < k->ns; s++) { /* each shard's sum moved to the global max, then added */
        const double *l = loc + (size_t)s * 3 * R;
        for (int n = 0; n < R; n++)
            g[R + n] += l[n] == -INFINITY ? 0 : l[R + n] * exp(l[n] - g[n]), g[2 * R + n] += l[2 * R + n];
    }
    void *go = to_t(g, 3 * (size_t)R, o->acc);
    for (int s = 0; s < k->ns; s++) {
        const void *ws = (char *)w + (size_t)s * Vl * C * ea;
        o->classifier_rows_fwd(cs, lg, x, ws, k->tgt, work, s * Vl, k->vr, R, C, Vl); /* this shard's logits again */
        o->classifier_rows_bwd(dxo, (char *)dwo + (size_t)s * Vl * C * pt_dtype_size(o->acc), x, ws, lg, go, k->tgt,
                               dlo, work, s * Vl, k->vr, R, C, Vl);
    }
    double *dxd = from_t(dxo, (size_t)R * C, o->act), *dwd = from_t(dwo, V * C, o->acc);
    for (size_t i = 0; i < (size_t)R * C; i++) dx[i] = dxd[i] - k->P[i];
    memcpy(dw, dwd, sizeof(double) * V * C);
    memcpy(st, g, sizeof(double) * 3 * (size_t)R);
    free(x), free(w), free(dxo), free(dlo), free(g), free(dwg), free(dwo), free(lg), free(cs), free(work), free(loc);
    free(go), free(dxd), free(dwd);
}

/* each table's chunked classifier against the materialised head, over 3
 * vocabulary shards (the last partly padded) with the statistics merged
 * between the calls; dX's slices of PT_CLASSIFIER_XSLICE columns: shards
 * wider than two of them */
static void test_classifier_rows(void)
{
    static const struct { const pt_ops *o; const char *name; double tol; } tabs[] = {
        {&pt_cpu_ops_f64, "double", 1e-12}, {&pt_cpu_ops_f32, "float", MIXED_TOL}, {&pt_cpu_ops_bf16, "bf16", 1e-2}};
    for (int t = 0; t < 3; t++) {
        const int bf = tabs[t].o->act == PT_BF16;
        rows_case k = rows_new(randint(1, 70), randint(3, 9), 2 * PT_CLASSIFIER_XSLICE + randint(1, 900), 3, bf);
        const size_t V = (size_t)k.ns * k.Vl;
        double *sr = dalloc(3 * (size_t)k.R), *dxr = dalloc((size_t)k.R * k.C), *dwr = dalloc(V * k.C);
        cls_naive(k.x, k.w, k.tgt, 0, k.vr, k.R, k.C, (int)V, sr, NULL, NULL, NULL);
        cls_naive(k.x, k.w, k.tgt, 0, k.vr, k.R, k.C, (int)V, sr, k.dl, dxr, dwr);
        double *st = dalloc(3 * (size_t)k.R), *dx = dalloc((size_t)k.R * k.C), *dw = dalloc(V * k.C);
        rows_run(tabs[t].o, &k, st, dx, dw);
        double es = 0;
        for (int n = 0; n < k.R; n++) /* log-sum-exp, max and target logit */
            es = fmax(es, fmax(fabs(st[n] + log(st[k.R + n]) - sr[n] - log(sr[k.R + n])),
                               fabs(st[2 * k.R + n] - sr[2 * k.R + n])) / fmax(1, fabs(sr[n])));
        int guard = 1;
        for (size_t i = (size_t)k.vr * k.C; i < V * k.C; i++) guard &= dw[i] == 4242.0, dw[i] = 0;
        /* bf16: the norm of the error against the reference's (dlogits rounded to bf16) */
        const double ex = bf ? sqrt(fmax(0, dot(dx, dx, (size_t)k.R * k.C) - 2 * dot(dx, dxr, (size_t)k.R * k.C) +
                                             dot(dxr, dxr, (size_t)k.R * k.C)) / dot(dxr, dxr, (size_t)k.R * k.C))
                             : relerr(dx, dxr, (size_t)k.R * k.C);
        const double ew = bf ? sqrt(fmax(0, dot(dw, dw, V * k.C) - 2 * dot(dw, dwr, V * k.C) + dot(dwr, dwr, V * k.C)) /
                                    dot(dwr, dwr, V * k.C))
                             : relerr(dw, dwr, V * k.C);
        tap_ok(es <= tabs[t].tol && ex <= tabs[t].tol && ew <= tabs[t].tol && guard,
               "%s chunked classifier (classifier_rows_fwd/bwd, R=%d C=%d, 3 shards of %d, vreal %d) == the "
               "materialised head: stats %.1e, dx %.1e, dw %.1e (bound %.0e); padded rows of dw untouched",
               tabs[t].name, k.R, k.C, k.Vl, k.vr, es, ex, ew, tabs[t].tol);
        free(sr), free(dxr), free(dwr), free(st), free(dx), free(dw);
        rows_free(&k);
    }
}

/* the chunked classifier at 1, 2 and 3 threads: bit for bit (float, bf16) */
static void test_classifier_rows_threads(void)
{
#ifdef _OPENMP
    const pt_backend *be = pt_backend_get("cpu");
    for (int t = 0; t < 2; t++) {
        const pt_ops *o = t ? &pt_cpu_ops_bf16 : &pt_cpu_ops_f32;
        rows_case k = rows_new(200 + randint(0, 100), 16 + randint(0, 16), 2 * PT_CLASSIFIER_XSLICE + randint(1, 700),
                               2, t);
        const size_t V = (size_t)k.ns * k.Vl;
        double *st[3], *dx[3], *dw[3];
        int same = 1;
        for (int nt = 1; nt <= 3; nt++) {
            be->set_threads(nt);
            st[nt - 1] = dalloc(3 * (size_t)k.R), dx[nt - 1] = dalloc((size_t)k.R * k.C), dw[nt - 1] = dalloc(V * k.C);
            rows_run(o, &k, st[nt - 1], dx[nt - 1], dw[nt - 1]);
            if (nt > 1)
                same &= !memcmp(st[0], st[nt - 1], sizeof(double) * 3 * k.R) &&
                        !memcmp(dx[0], dx[nt - 1], sizeof(double) * (size_t)k.R * k.C) &&
                        !memcmp(dw[0], dw[nt - 1], sizeof(double) * V * k.C);
        }
        be->set_threads(1);
        tap_ok(same, "%s chunked classifier: 1, 2 and 3 threads give the same stats, dx and dw bit for bit (R=%d, "
               "2 shards of %d: %d dX slices each)", t ? "bf16" : "float", k.R, k.Vl,
               (k.Vl + PT_CLASSIFIER_XSLICE - 1) / PT_CLASSIFIER_XSLICE);
        for (int i = 0; i < 3; i++) free(st[i]), free(dx[i]), free(dw[i]);
        rows_free(&k);
    }
#endif
}

/* ---- GEMM epilogues -------------------------------------------------------- */

static double gelu_ref(double x) { return 0.5 * x * (1 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))); }
static double dgelu_ref(double x)
{
    const double u = 0.7978845608028654 * (x + 0.044715 * x * x * x), th = tanh(u);
    return 0.5 * (1 + th) + 0.5 * x * (1 - th * th) * 0.7978845608028654 * (1 + 3 * 0.044715 * x * x);
}

static void test_epilogues(void)
{
    const int N = PT_FLASH_TILE + randint(1, 100), C = randint(5, 40), OC = randint(5, 40);
    const size_t ni = (size_t)N * C, no = (size_t)N * OC, nw = (size_t)OC * C;
    double *x = dalloc(ni), *w = dalloc(nw), *b = dalloc((size_t)OC), *y0 = dalloc(no), *pre = dalloc(no);
    randn(x, ni, 1), randn(w, nw, 1.0 / sqrt((double)C)), randn(b, (size_t)OC, 1), randn(y0, no, 1);
    for (int beta = 0; beta <= 1; beta++) {
        for (int n = 0; n < N; n++)
            for (int o = 0; o < OC; o++) {
                double s = b[o] + (beta ? y0[(size_t)n * OC + o] : 0);
                for (int c = 0; c < C; c++) s += x[(size_t)n * C + c] * w[(size_t)o * C + c];
                pre[(size_t)n * OC + o] = s;
            }
        double *y = ddup(y0, no), *aux = dalloc(no), *y2 = ddup(y0, no), ey = 0, ea = 0;
        D->matmul_fwd(y, aux, x, w, b, beta, N, C, OC, PT_EPI_GELU);
        D->matmul_fwd(y2, NULL, x, w, b, beta, N, C, OC, PT_EPI_GELU);
        for (size_t i = 0; i < no; i++)
            ey = fmax(ey, fabs(y[i] - gelu_ref(pre[i]))), ea = fmax(ea, fabs(aux[i] - pre[i]));
        tap_ok(ey <= 1e-12 && ea <= 1e-12 && relerr(y2, y, no) == 0,
               "matmul_fwd GELU_AUX_BIAS, beta %d: out = gelu(x w^T%s + b), aux = the pre-GELU value (N=%d, row "
               "blocks; err %.1e, %.1e; aux NULL gives the same out)", beta, beta ? " + out" : "", N, ey, ea);
        /* the epilogue alone on a DEFAULT product */
        double *y3 = ddup(y0, no), *aux3 = dalloc(no);
        D->matmul_fwd(y3, NULL, x, w, NULL, beta, N, C, OC, PT_EPI_DEFAULT);
        D->epilogue_fwd(y3, aux3, b, N, OC, PT_EPI_GELU);
        tap_ok(relerr(y3, y, no) <= 1e-14 && relerr(aux3, aux, no) <= 1e-14,
               "epilogue_fwd GELU after a DEFAULT matmul == the fused epilogue (beta %d)", beta);
        free(y), free(aux), free(y2), free(y3), free(aux3);
    }
    /* DGELU_BGRAD: dinp = (dout w) * GELU'(aux), written; dbias_aux += column sums */
    double *dout = dalloc(no), *aux = dalloc(ni), *dx = dalloc(ni), *db = dalloc((size_t)C), *ref = dalloc(ni);
    double *dbr = dalloc((size_t)C), *db0 = dalloc((size_t)C);
    randn(dout, no, 1), randn(aux, ni, 2), randn(dx, ni, 5), randn(db0, (size_t)C, 1);
    memcpy(db, db0, sizeof(double) * C), memcpy(dbr, db0, sizeof(double) * C);
    for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++) {
            double s = 0;
            for (int o = 0; o < OC; o++) s += dout[(size_t)n * OC + o] * w[(size_t)o * C + c];
            ref[(size_t)n * C + c] = s * dgelu_ref(aux[(size_t)n * C + c]);
            dbr[c] += ref[(size_t)n * C + c];
        }
    D->matmul_bwd(dx, NULL, NULL, dout, x, w, N, C, OC, PT_EPI_DGELU, aux, db);
    const double ed = relerr(dx, ref, ni), eb = relerr(db, dbr, (size_t)C);
    tap_ok(ed <= 1e-12 && eb <= 1e-12, "matmul_bwd DGELU_BGRAD: dinp = (dout w) GELU'(aux) overwrites, dbias_aux += "
           "its column sums (N=%d C=%d OC=%d, err %.1e, %.1e)", N, C, OC, ed, eb);
    /* the epilogue alone after a DEFAULT dX product, bias partials as bias_bwd */
    double *dx2 = dalloc(ni), *db2 = ddup(db0, (size_t)C), *db3 = ddup(db0, (size_t)C);
    D->matmul_bwd(dx2, NULL, NULL, dout, x, w, N, C, OC, PT_EPI_DEFAULT, NULL, NULL);
    D->epilogue_bwd(dx2, db2, aux, N, C);
    D->bias_bwd(db3, dx2, N, C);
    tap_ok(relerr(dx2, dx, ni) <= 1e-14 && relerr(db2, db, (size_t)C) <= 1e-14 && relerr(db3, db2, (size_t)C) == 0,
           "epilogue_bwd after a DEFAULT dX GEMM == the fused DGELU_BGRAD; its dbias == bias_bwd of the result");
    free(dx2), free(db2), free(db3), free(dout), free(aux), free(dx), free(db), free(ref), free(dbr), free(db0);
    free(x), free(w), free(b), free(y0), free(pre);
}

/* a two-layer MLP through the epilogues: h = gelu(x W1^T + b1) (GELU_AUX_BIAS),
 * y = h W2^T + b2; loss sum(y R); backward: layer 2's dX GEMM carries layer
 * 1's DGELU_BGRAD, layer 1's backward then has no bias */
typedef struct {
    opcase c;
    int N, C, F, O;
    double *x, *w1, *b1, *w2, *b2, *h, *pre, *y, *R, *dpre;
} mlp_case;

static double mlp_loss(opcase *c)
{
    mlp_case *m = (mlp_case *)c;
    D->matmul_fwd(m->h, m->pre, m->x, m->w1, m->b1, 0, m->N, m->C, m->F, PT_EPI_GELU);
    D->matmul_fwd(m->y, NULL, m->h, m->w2, m->b2, 0, m->N, m->F, m->O, PT_EPI_DEFAULT);
    return dot(m->y, m->R, (size_t)m->N * m->O);
}
static void mlp_bwd(opcase *c, double **g)
{
    mlp_case *m = (mlp_case *)c;
    mlp_loss(c);
    D->matmul_bwd(m->dpre, g[3], NULL, m->R, m->h, m->w2, m->N, m->F, m->O, PT_EPI_DGELU, m->pre, g[2]);
    D->matmul_bwd(g[0], g[1], NULL, m->dpre, m->x, m->w1, m->N, m->C, m->F, PT_EPI_DEFAULT, NULL, NULL);
}

static void test_mlp_fd(void)
{
    /* b2's gradient is a plain bias gradient (test_ops_elem); opcase holds four tensors */
    mlp_case m = {{"mlp through epilogues", mlp_loss, mlp_bwd, 0, 4, {"x", "w1", "b1", "w2"}, {0}, {0}},
                  0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    m.N = PT_FLASH_TILE + randint(1, 9), m.C = randint(3, 6), m.F = randint(4, 9), m.O = randint(2, 5);
    const size_t nx = (size_t)m.N * m.C, nw1 = (size_t)m.F * m.C, nh = (size_t)m.N * m.F, nw2 = (size_t)m.O * m.F,
                 ny = (size_t)m.N * m.O;
    m.x = dalloc(nx), m.w1 = dalloc(nw1), m.b1 = dalloc((size_t)m.F), m.w2 = dalloc(nw2), m.b2 = dalloc((size_t)m.O);
    m.h = dalloc(nh), m.pre = dalloc(nh), m.y = dalloc(ny), m.R = dalloc(ny), m.dpre = dalloc(nh);
    randn(m.x, nx, 1), randn(m.w1, nw1, 1), randn(m.b1, (size_t)m.F, 0.5), randn(m.w2, nw2, 1), randn(m.b2, (size_t)m.O, 1);
    randn(m.R, ny, 1);
    m.c.w[0] = m.x, m.c.wn[0] = nx, m.c.w[1] = m.w1, m.c.wn[1] = nw1, m.c.w[2] = m.b1, m.c.wn[2] = (size_t)m.F;
    m.c.w[3] = m.w2, m.c.wn[3] = nw2;
    run_case(&m.c);
    free(m.x), free(m.w1), free(m.b1), free(m.w2), free(m.b2), free(m.h), free(m.pre), free(m.y), free(m.R), free(m.dpre);
}

static void test_epilogue_float(void)
{
    const int N = 130 + randint(0, 30), C = 96, OC = 200;
    const size_t ni = (size_t)N * C, no = (size_t)N * OC, nw = (size_t)OC * C;
    double *x = dalloc(ni), *w = dalloc(nw), *b = dalloc((size_t)OC), *y = dalloc(no), *aux = dalloc(no), *dout = dalloc(ni);
    double *dx = dalloc(no), *db = dalloc((size_t)OC);
    randn(x, ni, 1), randn(w, nw, 1.0 / sqrt((double)C)), randn(b, (size_t)OC, 1), randn(dout, ni, 1);
    round_to_float(x, ni), round_to_float(w, nw), round_to_float(b, (size_t)OC), round_to_float(dout, ni);
    float *fx = fdup(x, ni), *fw = fdup(w, nw), *fb = fdup(b, (size_t)OC), *fy = xcalloc(no, sizeof(float));
    float *faux = xcalloc(no, sizeof(float)), *fdout = fdup(dout, ni), *fdx = xcalloc(no, sizeof(float));
    float *fdb = xcalloc((size_t)OC, sizeof(float));
    D->matmul_fwd(y, aux, x, w, b, 0, N, C, OC, PT_EPI_GELU);
    F->matmul_fwd(fy, faux, fx, fw, fb, 0, N, C, OC, PT_EPI_GELU);
    /* the backward of a layer [OC -> C] whose input was y: dX [N, OC] with DGELU on aux */
    D->matmul_bwd(dx, NULL, NULL, dout, y, w, N, OC, C, PT_EPI_DGELU, aux, db);
    double *wt = dalloc(nw);
    for (int o = 0; o < OC; o++)
        for (int c = 0; c < C; c++) wt[(size_t)c * OC + o] = w[(size_t)o * C + c];
    float *fwt = fdup(wt, nw);
    double *dx2 = dalloc(no), *db2 = dalloc((size_t)OC);
    D->matmul_bwd(dx2, NULL, NULL, dout, y, wt, N, OC, C, PT_EPI_DGELU, aux, db2);
    F->matmul_bwd(fdx, NULL, NULL, fdout, fy, fwt, N, OC, C, PT_EPI_DGELU, faux, fdb);
    const double ey = relerr_f(fy, y, no), ea = relerr_f(faux, aux, no), ed = relerr_f(fdx, dx2, no),
                 eb = relerr_f(fdb, db2, (size_t)OC);
    tap_ok(ey <= MIXED_TOL && ea <= MIXED_TOL && ed <= MIXED_TOL && eb <= MIXED_TOL,
           "float epilogues (N=%d C=%d OC=%d) against double: GELU_AUX_BIAS out %.1e, aux %.1e; DGELU_BGRAD dinp %.1e, "
           "dbias %.1e (bound %.0e)", N, C, OC, ey, ea, ed, eb, MIXED_TOL);
    free(x), free(w), free(b), free(y), free(aux), free(dout), free(dx), free(db), free(wt), free(dx2), free(db2);
    free(fx), free(fw), free(fb), free(fy), free(faux), free(fdout), free(fdx), free(fdb), free(fwt);
}

/* ---- threads ------------------------------------------------------------------- */

/* every fused op of the double table at 1 thread and at 2 and 3: bit for
 * bit (each tile, block and row partial is computed by one thread) */
static void fused_run(double **o, const double *qkv, const double *dout, const double *x, const double *w,
                      const double *b, const double *aux, const int32_t *tgt, const pt_attn_dims *d, int N, int C,
                      int Vl, int vb)
{
    const int Cq = d->NH * d->HS;
    D->attention_fwd(o[0], o[1], qkv, qkv + Cq, qkv + 2 * Cq, d, 0);
    D->attention_bwd(o[2], o[2] + Cq, o[2] + 2 * Cq, dout, qkv, qkv + Cq, qkv + 2 * Cq, o[0], o[1], d);
    double *dl = dalloc((size_t)N), *work = dalloc((size_t)N * vb);
    for (int n = 0; n < N; n++) dl[n] = 1.0 / N;
    D->classifier_fwd(o[3], x, w, tgt, work, vb, 0, Vl - 3, N, C, Vl, 1);
    D->classifier_bwd(o[4], o[5], x, w, o[3], tgt, dl, work, vb, 0, Vl - 3, N, C, Vl, 1);
    D->matmul_fwd(o[6], o[7], x, w, b, 0, N, C, Vl, PT_EPI_GELU);
    D->matmul_bwd(o[8], NULL, NULL, o[6], x, w, N, C, Vl, PT_EPI_DGELU, aux, o[9]);
    free(dl), free(work);
}

static void test_threads(void)
{
#ifdef _OPENMP
    const pt_backend *be = pt_backend_get("cpu");
    const int NH = 3, HS = 8, Cq = NH * HS, T = 2 * PT_FLASH_TILE + 17, B = 2;
    const int N = 600, C = 24, Vl = 300, vb = 64; /* rows: three of the classifier's row blocks */
    const pt_attn_dims d = {B, NH, HS, T, T, 0, 0, 3 * Cq, 3 * Cq, NH};
    const size_t nq = (size_t)B * T * 3 * Cq, no = (size_t)B * T * Cq;
    const size_t sz[10] = {no, (size_t)B * NH * T, nq, 3 * (size_t)N, (size_t)N * C, (size_t)Vl * C, (size_t)N * Vl,
                           (size_t)N * Vl, (size_t)N * C, (size_t)C};
    double *qkv = dalloc(nq), *dout = dalloc(no), *x = dalloc((size_t)N * C), *w = dalloc((size_t)Vl * C);
    double *b = dalloc((size_t)Vl), *aux = dalloc((size_t)N * C);
    int32_t *tgt = xcalloc((size_t)N, sizeof(int32_t));
    randn(qkv, nq, 1), randn(dout, no, 1), randn(x, (size_t)N * C, 1), randn(w, (size_t)Vl * C, 0.3), randn(b, (size_t)Vl, 1);
    randn(aux, (size_t)N * C, 1);
    for (int n = 0; n < N; n++) tgt[n] = randint(0, Vl - 4);
    double *one[10], *many[10];
    for (int i = 0; i < 10; i++) one[i] = dalloc(sz[i]), many[i] = dalloc(sz[i]);
    be->set_threads(1);
    fused_run(one, qkv, dout, x, w, b, aux, tgt, &d, N, C, Vl, vb);
    for (int nt = 2; nt <= 3; nt++) {
        be->set_threads(nt);
        int same = 1;
        for (int rep = 0; rep < 3; rep++) {
            for (int i = 0; i < 10; i++) memset(many[i], 0, sz[i] * sizeof(double));
            fused_run(many, qkv, dout, x, w, b, aux, tgt, &d, N, C, Vl, vb);
            for (int i = 0; i < 10; i++) {
                int eq = memcmp(many[i], one[i], sz[i] * sizeof(double)) == 0;
                if (!eq) tap_diag("threads %d: output %d differs (max rel %.1e)", nt, i, relerr(many[i], one[i], sz[i]));
                same &= eq;
            }
        }
        tap_ok(same, "%d OpenMP threads give the 1-thread results of flash attention, the classifier and the "
               "epilogues bit for bit (3 runs, T=%d, %d vocabulary blocks)", nt, T, (Vl + vb - 1) / vb);
    }
    be->set_threads(1);
    for (int i = 0; i < 10; i++) free(one[i]), free(many[i]);
    free(qkv), free(dout), free(x), free(w), free(b), free(aux), free(tgt);
#else
    tap_diag("built without OpenMP: thread comparison not run");
#endif
}

int main(void)
{
    pt_rng_seed(&rng, test_seed(), 0);
    test_flash_whole();
    test_flash_blocks();
    test_flash_fd();
    test_flash_float();
    test_classifier_ref();
    test_classifier_fd();
    test_classifier_float();
    test_classifier_rows();
    test_epilogues();
    test_mlp_fd();
    test_epilogue_float();
    tap_diag("worst finite-difference error: %.2e (bound %.0e)", g_worst_fd, FD_TOL);
    test_threads();
    test_classifier_rows_threads();
    return tap_done();
}
