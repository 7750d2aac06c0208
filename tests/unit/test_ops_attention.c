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
 *  4. Grouped-query flash attention (attention_fwd / attention_bwd with
 *     pt_attn_dims.NKV; Ainslie et al. 2023) of the fp32 and bf16 tables,
 *     NH = 8 and NKV in {1, 2, 4, 8}, random HS, T not a multiple of
 *     PT_FLASH_TILE: against a double reference of Hugging Face's semantics
 *     (repeat_kv, then causal softmax attention) written here, the whole
 *     sequence and a ring step (query and key offsets, two key blocks, the
 *     second merged); against the MHA kernel on explicitly repeated K and V
 *     (dK, dV summed over each group); 1 vs 2 threads bit for bit.
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

/* ---- grouped-query flash attention (attention_fwd / attention_bwd with NKV) ----------- */
/* GQA (Ainslie et al. 2023, "GQA: Training Generalized Multi-Query
 * Transformer Models from Multi-Head Checkpoints", section 2.2) as Hugging
 * Face's Llama computes it: repeat_kv (KV head g serves query heads g*rep ..
 * g*rep + rep-1, rep = NH/NKV), then causal softmax attention (Vaswani et
 * al. 2017, 3.2.1) per query head.  The reference below materialises the
 * repeated K, V in double and differentiates by hand: dV_rep = P^T dO, dP =
 * dO V_rep^T, dS = P (dP - rowsum(P dP)) scale, dQ = dS K_rep, dK_rep =
 * dS^T Q, and dK, dV of KV head g sum dK_rep, dV_rep over g's query heads
 * (the adjoint of the repeat).  q [B, Tq, ldq], k and v [B, Tk, ldkv] (NKV
 * heads), query i at global q0 + i, key j at k0 + j. */
typedef struct {
    int B, NH, NKV, HS, Tq, Tk, q0, k0, ldq, ldkv;
} gqa_shape;

static void gqa_ref(const gqa_shape *s, const double *q, const double *k, const double *v, const double *dout,
                    double *out, double *lse, double *dq, double *dk, double *dv)
{
    const int NH = s->NH, HS = s->HS, C = NH * HS, rep = NH / s->NKV, Tq = s->Tq, Tk = s->Tk;
    const double scale = 1 / sqrt((double)HS);
    double *kr = dalloc((size_t)Tk * HS), *vr = dalloc((size_t)Tk * HS), *p = dalloc((size_t)Tk);
    double *dkr = dalloc((size_t)Tk * HS), *dvr = dalloc((size_t)Tk * HS);
    for (int b = 0; b < s->B; b++)
        for (int h = 0; h < NH; h++) {
            const int g = h / rep; /* repeat_kv */
            for (int j = 0; j < Tk; j++)
                for (int c = 0; c < HS; c++) {
                    kr[(size_t)j * HS + c] = k[((size_t)b * Tk + j) * s->ldkv + (size_t)g * HS + c];
                    vr[(size_t)j * HS + c] = v[((size_t)b * Tk + j) * s->ldkv + (size_t)g * HS + c];
                }
            memset(dkr, 0, sizeof(double) * (size_t)Tk * HS);
            memset(dvr, 0, sizeof(double) * (size_t)Tk * HS);
            for (int i = 0; i < Tq; i++) {
                const double *qi = q + ((size_t)b * Tq + i) * s->ldq + (size_t)h * HS;
                double *oi = out + ((size_t)b * Tq + i) * C + (size_t)h * HS;
                int vis = s->q0 + i - s->k0 + 1; /* keys j with k0 + j <= q0 + i */
                vis = vis < 0 ? 0 : vis > Tk ? Tk : vis;
                double mx = -INFINITY, z = 0;
                for (int j = 0; j < vis; j++) {
                    double d = 0;
                    for (int c = 0; c < HS; c++) d += qi[c] * kr[(size_t)j * HS + c];
                    p[j] = d * scale;
                    mx = fmax(mx, p[j]);
                }
                for (int j = 0; j < vis; j++) z += p[j] = exp(p[j] - mx);
                for (int j = 0; j < vis; j++) p[j] /= z;
                lse[((size_t)b * NH + h) * Tq + i] = vis ? mx + log(z) : -INFINITY;
                for (int c = 0; c < HS; c++) {
                    double o = 0;
                    for (int j = 0; j < vis; j++) o += p[j] * vr[(size_t)j * HS + c];
                    oi[c] = o;
                }
                if (!dout) continue;
                const double *gi = dout + ((size_t)b * Tq + i) * C + (size_t)h * HS;
                double *dqi = dq + ((size_t)b * Tq + i) * s->ldq + (size_t)h * HS, pdp = 0;
                double *ds = dalloc((size_t)(vis ? vis : 1));
                for (int j = 0; j < vis; j++) {
                    double dp = 0;
                    for (int c = 0; c < HS; c++) dp += gi[c] * vr[(size_t)j * HS + c];
                    ds[j] = dp;
                    pdp += p[j] * dp;
                }
                for (int j = 0; j < vis; j++) {
                    ds[j] = p[j] * (ds[j] - pdp) * scale;
                    for (int c = 0; c < HS; c++) {
                        dvr[(size_t)j * HS + c] += p[j] * gi[c];
                        dqi[c] += ds[j] * kr[(size_t)j * HS + c];
                        dkr[(size_t)j * HS + c] += ds[j] * qi[c];
                    }
                }
                free(ds);
            }
            if (!dout) continue;
            for (int j = 0; j < Tk; j++) /* the repeat's adjoint: sum over the group */
                for (int c = 0; c < HS; c++) {
                    dk[((size_t)b * Tk + j) * s->ldkv + (size_t)g * HS + c] += dkr[(size_t)j * HS + c];
                    dv[((size_t)b * Tk + j) * s->ldkv + (size_t)g * HS + c] += dvr[(size_t)j * HS + c];
                }
        }
    free(kr), free(vr), free(p), free(dkr), free(dvr);
}

/* an ACT buffer of table t holding x (rounded to ACT; x is overwritten with
 * the rounded values, so the reference sees what the kernel sees) */
static void *act_load(const pt_ops *t, double *x, size_t n)
{
    if (t->act == PT_BF16) {
        pt_bf16 *b = xcalloc(n, sizeof *b);
        for (size_t i = 0; i < n; i++) x[i] = pt_bf16_to_f32(b[i] = pt_f32_to_bf16((float)x[i]));
        return b;
    }
    float *f = xcalloc(n, sizeof *f);
    for (size_t i = 0; i < n; i++) x[i] = f[i] = (float)x[i];
    return f;
}

static double *act_read(const pt_ops *t, const void *b, size_t n)
{
    double *x = dalloc(n);
    for (size_t i = 0; i < n; i++)
        x[i] = t->act == PT_BF16 ? pt_bf16_to_f32(((const pt_bf16 *)b)[i]) : ((const float *)b)[i];
    return x;
}

/* max |a - b| over max |b| (0 when b is 0 everywhere and a equals it) */
static double maxrel(const double *a, const double *b, size_t n)
{
    double e = 0, m = 0;
    for (size_t i = 0; i < n; i++) {
        if (isinf(b[i]) || isinf(a[i])) {
            if (a[i] != b[i]) return INFINITY;
            continue;
        }
        e = fmax(e, fabs(a[i] - b[i])), m = fmax(m, fabs(b[i]));
    }
    return m > 0 ? e / m : e;
}

/* One table, one NKV: (1) the whole sequence in the packed qkv layout
 * [B, T, (NH + 2 NKV) HS] against gqa_ref, forward and backward; (2) a ring
 * step's shape: queries at global offset q0 against two key blocks of a
 * contiguous [B, Tk, NKV HS] K and V (k0 = 0 then k0 = the first block's
 * length), the second merged (merge 1), and the backward of each block with
 * the final (out, lse), against gqa_ref over all keys. */
static void gqa_case(const pt_ops *t, int NKV, double tol_f, double tol_b)
{
    const int NH = 8, HS = randint(3, 40), B = randint(1, 2), T = PT_FLASH_TILE + randint(1, PT_FLASH_TILE - 1);
    const int C = NH * HS, KVC = NKV * HS, W = C + 2 * KVC;
    const size_t nqkv = (size_t)B * T * W, no = (size_t)B * T * C, nl = (size_t)B * NH * T;
    /* (1) the whole sequence */
    double *qkv = dalloc(nqkv), *dout = dalloc(no);
    randn(qkv, nqkv, 1), randn(dout, no, 1);
    void *bqkv = act_load(t, qkv, nqkv), *bdout = act_load(t, dout, no);
    void *bout = xcalloc(no, pt_dtype_size(t->act)), *bdqkv = xcalloc(nqkv, pt_dtype_size(t->act));
    float *lse = xcalloc(nl, sizeof(float));
    const size_t es = pt_dtype_size(t->act);
    const pt_attn_dims d = {B, NH, HS, T, T, 0, 0, W, W, NKV};
    t->attention_fwd(bout, lse, bqkv, (char *)bqkv + es * C, (char *)bqkv + es * (C + KVC), &d, 0);
    t->attention_bwd(bdqkv, (char *)bdqkv + es * C, (char *)bdqkv + es * (C + KVC), bdout, bqkv,
                     (char *)bqkv + es * C, (char *)bqkv + es * (C + KVC), bout, lse, &d);
    const gqa_shape s = {B, NH, NKV, HS, T, T, 0, 0, W, W};
    double *rout = dalloc(no), *rlse = dalloc(nl), *rdqkv = dalloc(nqkv);
    gqa_ref(&s, qkv, qkv + C, qkv + C + KVC, dout, rout, rlse, rdqkv, rdqkv + C, rdqkv + C + KVC);
    double *gout = act_read(t, bout, no), *gd = act_read(t, bdqkv, nqkv), *gl = dalloc(nl);
    for (size_t i = 0; i < nl; i++) gl[i] = lse[i];
    const double eo = maxrel(gout, rout, no), el = maxrel(gl, rlse, nl), eg = maxrel(gd, rdqkv, nqkv);
    tap_ok(eo <= tol_f && el <= tol_f && eg <= tol_b,
           "GQA %s NH=%d NKV=%d HS=%d B=%d T=%d whole sequence against repeat_kv + causal softmax in double: "
           "out %.1e, lse %.1e, dqkv %.1e (bounds %.0e, %.0e)",
           t->name, NH, NKV, HS, B, T, eo, el, eg, tol_f, tol_b);
    free(rout), free(rlse), free(rdqkv), free(gout), free(gd), free(gl), free(bout), free(bdqkv), free(lse);
    free(qkv), free(dout), free(bqkv), free(bdout);

    /* (2) a ring step: Tq queries at q0, keys [0, Tk) in blocks [0, k1) and [k1, Tk) */
    const int Tq = randint(1, PT_FLASH_TILE + 20), q0 = randint(0, 90);
    int Tk = q0 + Tq + randint(-10, 10); /* keys past the last query's position are seen by none */
    if (Tk < 2) Tk = 2;
    const int k1 = randint(1, Tk - 1), ldq = C + randint(0, 3);
    const size_t nq = (size_t)B * Tq * ldq, nkv = (size_t)B * Tk * KVC, no2 = (size_t)B * Tq * C,
                 nl2 = (size_t)B * NH * Tq;
    double *q = dalloc(nq), *k = dalloc(nkv), *v = dalloc(nkv), *g = dalloc(no2);
    randn(q, nq, 1), randn(k, nkv, 1), randn(v, nkv, 1), randn(g, no2, 1);
    void *bq = act_load(t, q, nq), *bk = act_load(t, k, nkv), *bv = act_load(t, v, nkv), *bg = act_load(t, g, no2);
    void *bo = xcalloc(no2, es), *bdq = xcalloc(nq, es), *bdk = xcalloc(nkv, es), *bdv = xcalloc(nkv, es);
    float *l2 = xcalloc(nl2, sizeof(float));
    /* per sequence: block 1 = keys [0, k1) of each sequence; the blocks are
     * separate [B, len, KVC] buffers, as seq.c packs them */
    void *bk1 = xcalloc((size_t)B * k1 * KVC, es), *bv1 = xcalloc((size_t)B * k1 * KVC, es);
    void *bk2 = xcalloc((size_t)B * (Tk - k1) * KVC, es), *bv2 = xcalloc((size_t)B * (Tk - k1) * KVC, es);
    for (int b = 0; b < B; b++) {
        const size_t r1 = (size_t)k1 * KVC * es, r2 = (size_t)(Tk - k1) * KVC * es, src = (size_t)b * Tk * KVC * es;
        memcpy((char *)bk1 + b * r1, (char *)bk + src, r1), memcpy((char *)bv1 + b * r1, (char *)bv + src, r1);
        memcpy((char *)bk2 + b * r2, (char *)bk + src + r1, r2);
        memcpy((char *)bv2 + b * r2, (char *)bv + src + r1, r2);
    }
    const pt_attn_dims d1 = {B, NH, HS, Tq, k1, q0, 0, ldq, KVC, NKV};
    const pt_attn_dims d2 = {B, NH, HS, Tq, Tk - k1, q0, k1, ldq, KVC, NKV};
    /* the later block first (writes), the earlier merged in, as the ring's order varies */
    t->attention_fwd(bo, l2, bq, bk2, bv2, &d2, 0);
    t->attention_fwd(bo, l2, bq, bk1, bv1, &d1, 1);
    void *bdk1 = xcalloc((size_t)B * k1 * KVC, es), *bdv1 = xcalloc((size_t)B * k1 * KVC, es);
    void *bdk2 = xcalloc((size_t)B * (Tk - k1) * KVC, es), *bdv2 = xcalloc((size_t)B * (Tk - k1) * KVC, es);
    t->attention_bwd(bdq, bdk1, bdv1, bg, bq, bk1, bv1, bo, l2, &d1);
    t->attention_bwd(bdq, bdk2, bdv2, bg, bq, bk2, bv2, bo, l2, &d2);
    for (int b = 0; b < B; b++) {
        const size_t r1 = (size_t)k1 * KVC * es, r2 = (size_t)(Tk - k1) * KVC * es, dst = (size_t)b * Tk * KVC * es;
        memcpy((char *)bdk + dst, (char *)bdk1 + b * r1, r1), memcpy((char *)bdv + dst, (char *)bdv1 + b * r1, r1);
        memcpy((char *)bdk + dst + r1, (char *)bdk2 + b * r2, r2);
        memcpy((char *)bdv + dst + r1, (char *)bdv2 + b * r2, r2);
    }
    const gqa_shape s2 = {B, NH, NKV, HS, Tq, Tk, q0, 0, ldq, KVC};
    double *ro = dalloc(no2), *rl = dalloc(nl2), *rdq = dalloc(nq), *rdk = dalloc(nkv), *rdv = dalloc(nkv);
    gqa_ref(&s2, q, k, v, g, ro, rl, rdq, rdk, rdv);
    double *go = act_read(t, bo, no2), *gdq = act_read(t, bdq, nq), *gdk = act_read(t, bdk, nkv);
    double *gdv = act_read(t, bdv, nkv), *gl2 = dalloc(nl2);
    for (size_t i = 0; i < nl2; i++) gl2[i] = l2[i];
    const double e1 = maxrel(go, ro, no2), e2 = maxrel(gl2, rl, nl2), e3 = maxrel(gdq, rdq, nq);
    const double e4 = maxrel(gdk, rdk, nkv), e5 = maxrel(gdv, rdv, nkv);
    tap_ok(e1 <= tol_f && e2 <= tol_f && e3 <= tol_b && e4 <= tol_b && e5 <= tol_b,
           "GQA %s NH=%d NKV=%d HS=%d: Tq=%d queries at q0=%d, keys in blocks [0,%d) + [%d,%d) merged (merge 1), "
           "ldq=%d ldkv=%d: out %.1e, lse %.1e, dq %.1e, dk %.1e, dv %.1e",
           t->name, NH, NKV, HS, Tq, q0, k1, k1, Tk, ldq, KVC, e1, e2, e3, e4, e5);
    free(q), free(k), free(v), free(g), free(bq), free(bk), free(bv), free(bg), free(bo), free(bdq), free(bdk);
    free(bdv), free(l2), free(bk1), free(bv1), free(bk2), free(bv2), free(bdk1), free(bdv1), free(bdk2), free(bdv2);
    free(ro), free(rl), free(rdq), free(rdk), free(rdv), free(go), free(gdq), free(gdk), free(gdv), free(gl2);
}

/* GQA equals MHA on explicitly repeated K, V (HF's repeat_kv): the forward
 * reads the same numbers (out, lse bit for bit in fp32), dq likewise, and
 * dK, dV of KV head g are MHA's dK, dV summed over g's query heads. */
static void gqa_vs_repeated(const pt_ops *t, int NKV, double tol)
{
    const int NH = 8, rep = NH / NKV, HS = randint(3, 40), B = randint(1, 2), T = randint(2, 2 * PT_FLASH_TILE + 7);
    const int C = NH * HS, KVC = NKV * HS;
    const size_t es = pt_dtype_size(t->act), nq = (size_t)B * T * C, nkv = (size_t)B * T * KVC, nl = (size_t)B * NH * T;
    double *q = dalloc(nq), *k = dalloc(nkv), *v = dalloc(nkv), *g = dalloc(nq), *kr = dalloc(nq), *vr = dalloc(nq);
    randn(q, nq, 1), randn(k, nkv, 1), randn(v, nkv, 1), randn(g, nq, 1);
    void *bq = act_load(t, q, nq), *bk = act_load(t, k, nkv), *bv = act_load(t, v, nkv), *bg = act_load(t, g, nq);
    for (size_t r = 0; r < (size_t)B * T; r++)
        for (int h = 0; h < NH; h++)
            for (int c = 0; c < HS; c++) {
                kr[r * C + (size_t)h * HS + c] = k[r * KVC + (size_t)(h / rep) * HS + c];
                vr[r * C + (size_t)h * HS + c] = v[r * KVC + (size_t)(h / rep) * HS + c];
            }
    void *bkr = act_load(t, kr, nq), *bvr = act_load(t, vr, nq); /* exact: already ACT values */
    void *o1 = xcalloc(nq, es), *o2 = xcalloc(nq, es), *dq1 = xcalloc(nq, es), *dq2 = xcalloc(nq, es);
    void *dk1 = xcalloc(nkv, es), *dv1 = xcalloc(nkv, es), *dk2 = xcalloc(nq, es), *dv2 = xcalloc(nq, es);
    float *l1 = xcalloc(nl, sizeof(float)), *l2 = xcalloc(nl, sizeof(float));
    const pt_attn_dims dg = {B, NH, HS, T, T, 0, 0, C, KVC, NKV}, dm = {B, NH, HS, T, T, 0, 0, C, C, NH};
    t->attention_fwd(o1, l1, bq, bk, bv, &dg, 0);
    t->attention_fwd(o2, l2, bq, bkr, bvr, &dm, 0);
    t->attention_bwd(dq1, dk1, dv1, bg, bq, bk, bv, o1, l1, &dg);
    t->attention_bwd(dq2, dk2, dv2, bg, bq, bkr, bvr, o2, l2, &dm);
    const int same_fwd = memcmp(o1, o2, nq * es) == 0 && memcmp(l1, l2, nl * sizeof(float)) == 0;
    double *a = act_read(t, dq1, nq), *b = act_read(t, dq2, nq);
    const double eq = maxrel(a, b, nq);
    free(a), free(b);
    double *gk = act_read(t, dk1, nkv), *gv = act_read(t, dv1, nkv), *mk = act_read(t, dk2, nq),
           *mv = act_read(t, dv2, nq), *sk = dalloc(nkv), *sv = dalloc(nkv);
    for (size_t r = 0; r < (size_t)B * T; r++)
        for (int h = 0; h < NH; h++)
            for (int c = 0; c < HS; c++) {
                sk[r * KVC + (size_t)(h / rep) * HS + c] += mk[r * C + (size_t)h * HS + c];
                sv[r * KVC + (size_t)(h / rep) * HS + c] += mv[r * C + (size_t)h * HS + c];
            }
    const double ek = maxrel(gk, sk, nkv), ev = maxrel(gv, sv, nkv);
    tap_ok(same_fwd && eq <= tol && ek <= tol && ev <= tol,
           "GQA %s NKV=%d equals MHA on repeated K, V (NH=%d HS=%d B=%d T=%d): out, lse %s; dq %.1e; dk, dv against "
           "MHA's summed over the group %.1e, %.1e (bound %.0e)",
           t->name, NKV, NH, HS, B, T, same_fwd ? "bit for bit" : "DIFFER", eq, ek, ev, tol);
    free(q), free(k), free(v), free(g), free(kr), free(vr), free(bq), free(bk), free(bv), free(bg), free(bkr);
    free(bvr), free(o1), free(o2), free(dq1), free(dq2), free(dk1), free(dv1), free(dk2), free(dv2), free(l1), free(l2);
    free(gk), free(gv), free(mk), free(mv), free(sk), free(sv);
}

/* The backward threads over (b, KV head): 1 and 2 threads give the same
 * bits (fp32 table) for a GQA shape. */
static void gqa_threads(void)
{
#ifdef _OPENMP
    const pt_ops *t = &pt_cpu_ops_f32;
    const pt_backend *be = pt_backend_get("cpu");
    const int NH = 8, NKV = 2, HS = randint(3, 40), B = 2, T = randint(PT_FLASH_TILE + 1, 2 * PT_FLASH_TILE - 1);
    const int C = NH * HS, KVC = NKV * HS;
    const size_t nq = (size_t)B * T * C, nkv = (size_t)B * T * KVC, nl = (size_t)B * NH * T;
    double *q = dalloc(nq), *k = dalloc(nkv), *v = dalloc(nkv), *g = dalloc(nq);
    randn(q, nq, 1), randn(k, nkv, 1), randn(v, nkv, 1), randn(g, nq, 1);
    void *bq = act_load(t, q, nq), *bk = act_load(t, k, nkv), *bv = act_load(t, v, nkv), *bg = act_load(t, g, nq);
    void *res[2][5];
    const pt_attn_dims d = {B, NH, HS, T, T, 0, 0, C, KVC, NKV};
    for (int r = 0; r < 2; r++) {
        be->set_threads(r + 1);
        res[r][0] = xcalloc(nq, 4), res[r][1] = xcalloc(nl, 4), res[r][2] = xcalloc(nq, 4);
        res[r][3] = xcalloc(nkv, 4), res[r][4] = xcalloc(nkv, 4);
        t->attention_fwd(res[r][0], res[r][1], bq, bk, bv, &d, 0);
        t->attention_bwd(res[r][2], res[r][3], res[r][4], bg, bq, bk, bv, res[r][0], res[r][1], &d);
    }
    be->set_threads(1);
    const size_t n[5] = {nq, nl, nq, nkv, nkv};
    int same = 1;
    for (int i = 0; i < 5; i++) same &= memcmp(res[0][i], res[1][i], n[i] * 4) == 0;
    tap_ok(same, "GQA f32 NH=%d NKV=%d: out, lse, dq, dk, dv with 2 OpenMP threads equal 1 thread's bit for bit", NH,
           NKV);
    for (int r = 0; r < 2; r++)
        for (int i = 0; i < 5; i++) free(res[r][i]);
    free(q), free(k), free(v), free(g), free(bq), free(bk), free(bv), free(bg);
#else
    tap_diag("no OpenMP: the thread-count check does not apply");
#endif
}

static void test_gqa(void)
{
    static const int nkv[4] = {1, 2, 4, 8};
    /* bounds: fp32 a few ulps of the O(T) sums; bf16 the inputs are exact
     * (the reference reads the rounded values), the stored out and gradients
     * round once (2^-9 relative) plus fp32 accumulation */
    for (int i = 0; i < 4; i++) gqa_case(&pt_cpu_ops_f32, nkv[i], 2e-5, 1e-4);
    for (int i = 0; i < 4; i++) gqa_case(&pt_cpu_ops_bf16, nkv[i], 1e-2, 2e-2);
    for (int i = 0; i < 4; i++) gqa_vs_repeated(&pt_cpu_ops_f32, nkv[i], 1e-5);
    for (int i = 0; i < 4; i++) gqa_vs_repeated(&pt_cpu_ops_bf16, nkv[i], 1e-2);
    gqa_threads();
}

int main(void)
{
    const uint64_t seed = test_seed();
    pt_rng_seed(&rng, seed, 0);

    test_attention();
    test_softmax_causal();
    tap_diag("worst finite-difference error over these ops: %.2e (bound %.0e)", g_worst_fd, FD_TOL);
    test_float_attention();
    test_gqa();
    return tap_done();
}
