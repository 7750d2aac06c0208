/* SPDX-License-Identifier: MIT */
/* Tests of the compute kernels (lib/backend/ops.h, cpu_ops.inc).
 *
 *  1. Every backward of the double table (pt_cpu_ops_f64) against central
 *     finite differences of a scalar loss L = sum(out * R) (R fixed random),
 *     or the cross-entropy loss itself, for every input and parameter
 *     element (a random subset of FD_SAMPLES for big tensors).  Every
 *     forward against a naive reference written here.  The "backward
 *     accumulates (+=)" contract (two calls on pre-filled random buffers)
 *     and the NULL skips.
 *  2. Vocab-parallel composition (Megatron, Shoeybi et al. 2019 section 3):
 *     the embedding and the cross-entropy split in 2 and 3 vocabulary shards,
 *     with padded ids, recombined as the model does, against the unsharded
 *     kernels and an independent double softmax cross-entropy.
 *  3. Attention causality and the shape of the saved softmax matrix.
 *  4. The float table against the double table on the same inputs, and
 *     its vectorised exp/GELU over their whole input range, the
 *     cross-entropy at V = 50257 and attention at T = 128.
 *  5. With OpenMP: 1 thread against 2 and 3 threads (races).
 *
 * Inputs are fresh random numbers every run; the seed is printed as a TAP
 * diagnostic and PTRAIN_TEST_SEED=<n> reproduces a run. */
#ifndef TEST_OPS_MIXED_BODY

#include "backend/ops.h"
#include "core/core.h"
#include "tests/tap.h"
#include "tests/unit/ops_util.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

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

/* ---- matmul ------------------------------------------------------------------ */
typedef struct {
    opcase c;
    int N, C, OC, use_bias;
    double *inp, *w, *bias, *out, *R;
} mm_case;

static double mm_loss(opcase *c)
{
    mm_case *m = (mm_case *)c;
    D->matmul_fwd(m->out, NULL, m->inp, m->w, m->use_bias ? m->bias : NULL, 0.0, m->N, m->C, m->OC, PT_EPI_DEFAULT);
    return dot(m->out, m->R, (size_t)m->N * m->OC);
}
static void mm_bwd(opcase *c, double **g)
{
    mm_case *m = (mm_case *)c;
    mm_loss(c);
    D->matmul_bwd(g[0], g[1], m->use_bias ? g[2] : NULL, m->R, m->inp, m->w, m->N, m->C, m->OC, PT_EPI_DEFAULT, NULL,
                  NULL);
}

static void test_matmul(int use_bias)
{
    mm_case m = {{use_bias ? "matmul+bias" : "matmul", mm_loss, mm_bwd, 0, use_bias ? 3 : 2,
                  {"inp", "w", "bias"}, {0}, {0}},
                 0, 0, 0, use_bias, 0, 0, 0, 0, 0};
    m.N = randint(4, 9), m.C = randint(5, 9), m.OC = randint(4, 8);
    size_t ni = (size_t)m.N * m.C, nw = (size_t)m.OC * m.C, no = (size_t)m.N * m.OC;
    m.inp = dalloc(ni), m.w = dalloc(nw), m.bias = dalloc(m.OC), m.out = dalloc(no), m.R = dalloc(no);
    randn(m.inp, ni, 1), randn(m.w, nw, 1), randn(m.bias, m.OC, 1), randn(m.R, no, 1);
    m.c.w[0] = m.inp, m.c.wn[0] = ni, m.c.w[1] = m.w, m.c.wn[1] = nw, m.c.w[2] = m.bias, m.c.wn[2] = m.OC;

    mm_loss(&m.c);
    double *ref = dalloc(no);
    for (int n = 0; n < m.N; n++)
        for (int o = 0; o < m.OC; o++) {
            double s = use_bias ? m.bias[o] : 0;
            for (int c = 0; c < m.C; c++) s += m.inp[(size_t)n * m.C + c] * m.w[(size_t)o * m.C + c];
            ref[(size_t)n * m.OC + o] = s;
        }
    double ef = relerr(m.out, ref, no);
    tap_ok(ef <= 1e-13, "%s: forward == inp w^T%s (N=%d C=%d OC=%d, err %.1e)", m.c.name,
           use_bias ? " + bias" : "", m.N, m.C, m.OC, ef);
    run_case(&m.c);

    if (use_bias) { /* each NULL skip leaves the other gradients as in the full call */
        double *dx = dalloc(ni), *dw = dalloc(nw), *db = dalloc(m.OC);
        double *dx2 = dalloc(ni), *dw2 = dalloc(nw), *db2 = dalloc(m.OC);
        D->matmul_bwd(dx, dw, db, m.R, m.inp, m.w, m.N, m.C, m.OC, PT_EPI_DEFAULT, NULL, NULL);
        D->matmul_bwd(NULL, dw2, NULL, m.R, m.inp, m.w, m.N, m.C, m.OC, PT_EPI_DEFAULT, NULL, NULL);
        D->matmul_bwd(dx2, NULL, NULL, m.R, m.inp, m.w, m.N, m.C, m.OC, PT_EPI_DEFAULT, NULL, NULL);
        D->matmul_bwd(NULL, NULL, db2, m.R, m.inp, m.w, m.N, m.C, m.OC, PT_EPI_DEFAULT, NULL, NULL);
        tap_ok(relerr(dx2, dx, ni) <= 1e-15 && relerr(dw2, dw, nw) <= 1e-15 &&
                   relerr(db2, db, m.OC) <= 1e-15,
               "matmul: backward with NULL dinp / dw / dbias computes the others unchanged");
        double *bb = dalloc(m.OC), *bb2 = dalloc(m.OC);
        D->bias_bwd(bb, m.R, m.N, m.OC);
        tap_ok(relerr(bb, db, m.OC) <= 1e-15, "bias_bwd == matmul_bwd's dbias");
        free(dx), free(dw), free(db), free(dx2), free(dw2), free(db2), free(bb), free(bb2);
    }
    free(ref), free(m.inp), free(m.w), free(m.bias), free(m.out), free(m.R);
}

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

/* gemm_batched against a naive triple loop, all four transpose cases, with
 * leading dimensions wider than the operands and alpha, beta != 0, 1. */
static void test_gemm_batched(void)
{
    for (int ta = 0; ta <= 1; ta++)
        for (int tb = 0; tb <= 1; tb++) {
            const int M = randint(2, 7), N = randint(2, 7), K = randint(2, 7), batch = randint(1, 4);
            const int arows = ta ? K : M, acols = ta ? M : K, brows = tb ? N : K, bcols = tb ? K : N;
            const int lda = acols + randint(0, 3), ldb = bcols + randint(0, 3), ldc = N + randint(0, 3);
            const int64_t sA = (int64_t)arows * lda + randint(0, 5), sB = (int64_t)brows * ldb + randint(0, 5),
                          sC = (int64_t)M * ldc + randint(0, 5);
            const double alpha = pt_rng_normal(&rng), beta = pt_rng_normal(&rng);
            double *A = dalloc((size_t)(sA * batch)), *B = dalloc((size_t)(sB * batch)),
                   *C = dalloc((size_t)(sC * batch)), *Cr = dalloc((size_t)(sC * batch));
            randn(A, (size_t)(sA * batch), 1), randn(B, (size_t)(sB * batch), 1), randn(C, (size_t)(sC * batch), 1);
            memcpy(Cr, C, sizeof(double) * (size_t)(sC * batch));
            for (int b = 0; b < batch; b++)
                for (int i = 0; i < M; i++)
                    for (int j = 0; j < N; j++) {
                        double s = 0;
                        for (int k = 0; k < K; k++) {
                            double av = ta ? A[b * sA + (int64_t)k * lda + i] : A[b * sA + (int64_t)i * lda + k];
                            double bv = tb ? B[b * sB + (int64_t)j * ldb + k] : B[b * sB + (int64_t)k * ldb + j];
                            s += av * bv;
                        }
                        double *c = &Cr[b * sC + (int64_t)i * ldc + j];
                        *c = alpha * s + beta * *c;
                    }
            D->gemm_batched(ta, tb, M, N, K, alpha, A, lda, sA, B, ldb, sB, beta, C, ldc, sC, batch);
            double e = relerr(C, Cr, (size_t)(sC * batch));
            tap_ok(e <= 1e-14, "gemm_batched ta=%d tb=%d: M=%d N=%d K=%d batch=%d lda=%d ldb=%d ldc=%d == naive "
                   "(err %.1e; padding untouched)", ta, tb, M, N, K, batch, lda, ldb, ldc, e);
            free(A), free(B), free(C), free(Cr);
        }
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

/* xent_loss and adamw against the formulas. */
static void test_xent_loss_adamw(void)
{
    const int N = randint(5, 20);
    double *mx = dalloc((size_t)N), *se = dalloc((size_t)N), *tg = dalloc((size_t)N), *l = dalloc((size_t)N);
    randn(mx, (size_t)N, 2), randu(se, (size_t)N, 0.5, 50), randn(tg, (size_t)N, 2);
    D->xent_loss(l, mx, se, tg, N);
    double e = 0;
    for (int n = 0; n < N; n++) e = fmax(e, fabs(l[n] - (log(se[n]) + mx[n] - tg[n])));
    tap_ok(e <= 1e-14, "xent_loss: log(sumexp) + rowmax - target logit (N=%d, err %.1e)", N, e);
    free(mx), free(se), free(tg), free(l);

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

/* ---- float vs double, and threads ------------------------------------------------ */
/* Every op's forward and backward on moderately large random inputs, written
 * once for both tables (this file includes itself with TEST_OPS_MIXED_BODY). */
enum {
    M_TOKW, M_WPE, M_X, M_LNW, M_LNB, M_W, M_BIAS, M_QKV, M_GIN, M_A2, M_LOGITS, M_RC, M_ROC, /* inputs */
    M_DP, M_CW,
    M_EMB, M_DTOKW, M_POS, M_DWPE, M_LN, M_MEAN, M_RSTD, M_LNDX, M_LNDW, M_LNDB, M_MM, M_MMDX,
    M_MMDW, M_MMDB, M_ATTO, M_ATT, M_DQKV, M_GELU, M_GDX, M_ADD, M_ADA, M_ADB, M_BOUT, M_BDB,
    M_XMAX, M_XSUM, M_XTGT, M_DLOSS, M_DLOG,
    /* generic ops (train-step refactor) */
    M_AXPY, M_CP2D, M_SUMS, M_SCORES, M_SMAX, M_SMAXB, M_PV, M_LNP, M_LNPM, M_LNPR, M_LNPS, M_LNPDX, M_LNPDW,
    M_LNPDB, M_XLOSS, M_ADP, M_ADM, M_ADV,
    /* flash attention, GEMM epilogues, fused classifier */
    M_FO, M_FLSE, M_FDQKV, M_EGO, M_EAUX, M_EMDX, M_EMDB, M_EFB, M_ECDX, M_ECDB, M_CST, M_CDX, M_CDW, M_CWORK,
    M_NBUF
};
#define M_NINPUT M_EMB
static const char *m_name[M_NBUF] = {
    "tokw", "wpe", "x", "ln.w", "ln.b", "w", "bias", "qkv", "gelu.in", "add.b", "logits", "R", "R_oc", "dP",
    "classifier w",
    "embedding out", "embedding dw", "posemb out", "posemb dwpe", "layernorm out", "layernorm mean",
    "layernorm rstd", "layernorm dinp", "layernorm dw", "layernorm db", "matmul out", "matmul dinp",
    "matmul dw", "matmul dbias", "attention out", "attention att", "attention dqkv", "gelu out",
    "gelu dinp", "add out", "add da", "add db", "bias out", "bias dbias", "xent rowmax", "xent sumexp",
    "xent tgt", "fill dloss", "xent dlogits",
    "fill+axpy+scale", "copy2d+add2d", "sum, sumsq", "gemm_batched scores", "softmax_causal_fwd",
    "softmax_causal_bwd", "gemm_batched P V", "layernorm pieces out", "layernorm pieces mean",
    "layernorm pieces rstd", "layernorm bwd rowsums", "layernorm pieces dinp", "layernorm pieces dw",
    "layernorm pieces db", "xent_loss", "adamw p", "adamw m", "adamw v",
    "flash attention out", "flash attention lse", "flash attention dqkv", "matmul GELU_AUX_BIAS out",
    "matmul GELU_AUX_BIAS aux", "matmul DGELU_BGRAD dinp", "matmul DGELU_BGRAD dbias", "epilogue_fwd GELU",
    "epilogue_bwd", "epilogue_bwd dbias", "classifier stats", "classifier dx", "classifier dw",
    "classifier work (last dlogits block)"};
enum { MB = 4, MT = 16, MN = MB * MT, MC = 48, MOC = 40, MNH = 4, MV = 100, MVREAL = 97, MTOK = 12, MCVB = 32 };
static size_t m_size[M_NBUF];

static void m_sizes(void)
{
    size_t s[M_NBUF] = {
        [M_TOKW] = MTOK * MC, [M_WPE] = MT * MC, [M_X] = MN * MC, [M_LNW] = MC, [M_LNB] = MC,
        [M_W] = MOC * MC, [M_BIAS] = MOC, [M_QKV] = MN * 3 * MC, [M_GIN] = MN * MC, [M_A2] = MN * MC,
        [M_LOGITS] = MN * MV, [M_RC] = MN * MC, [M_ROC] = MN * MOC, [M_DP] = MB * MNH * MT * MT,
        [M_EMB] = MN * MC,
        [M_DTOKW] = MTOK * MC, [M_POS] = MN * MC, [M_DWPE] = MT * MC, [M_LN] = MN * MC, [M_MEAN] = MN,
        [M_RSTD] = MN, [M_LNDX] = MN * MC, [M_LNDW] = MC, [M_LNDB] = MC, [M_MM] = MN * MOC,
        [M_MMDX] = MN * MC, [M_MMDW] = MOC * MC, [M_MMDB] = MOC, [M_ATTO] = MN * MC,
        [M_ATT] = MB * MNH * MT * MT, [M_DQKV] = MN * 3 * MC, [M_GELU] = MN * MC, [M_GDX] = MN * MC,
        [M_ADD] = MN * MC, [M_ADA] = MN * MC, [M_ADB] = MN * MC, [M_BOUT] = MN * MOC, [M_BDB] = MOC,
        [M_XMAX] = MN, [M_XSUM] = MN, [M_XTGT] = MN, [M_DLOSS] = MN, [M_DLOG] = MN * MV,
        [M_AXPY] = MN * MC, [M_CP2D] = MN * MC / 2, [M_SUMS] = 2, [M_SCORES] = MB * MNH * MT * MT,
        [M_SMAX] = MB * MNH * MT * MT, [M_SMAXB] = MB * MNH * MT * MT, [M_PV] = MN * MC, [M_LNP] = MN * MC,
        [M_LNPM] = MN, [M_LNPR] = MN, [M_LNPS] = 2 * MN, [M_LNPDX] = MN * MC, [M_LNPDW] = MC, [M_LNPDB] = MC,
        [M_XLOSS] = MN, [M_ADP] = MN * MC, [M_ADM] = MN * MC, [M_ADV] = MN * MC,
        [M_CW] = MV * MC, [M_FO] = MN * MC, [M_FLSE] = MB * MNH * MT, [M_FDQKV] = MN * 3 * MC, [M_EGO] = MN * MOC,
        [M_EAUX] = MN * MOC, [M_EMDX] = MN * MC, [M_EMDB] = MC, [M_EFB] = MN * MOC, [M_ECDX] = MN * MOC,
        [M_ECDB] = MOC, [M_CST] = 3 * MN, [M_CDX] = MN * MC, [M_CDW] = MV * MC, [M_CWORK] = MN * MCVB};
    memcpy(m_size, s, sizeof s);
}

#define TEST_OPS_MIXED_BODY
#define MIXED_REAL float
#define MIXED_DT PT_F32
#define MIXED_OPS pt_ops
#define MIXED_FN mixed_run_f32
#include "tests/unit/test_ops.c"
#undef MIXED_REAL
#undef MIXED_DT
#undef MIXED_OPS
#undef MIXED_FN
#define MIXED_REAL double
#define MIXED_DT PT_F64
#define MIXED_OPS pt_ops
#define MIXED_FN mixed_run_f64
#include "tests/unit/test_ops.c"
#undef MIXED_REAL
#undef MIXED_DT
#undef MIXED_OPS
#undef MIXED_FN
#undef TEST_OPS_MIXED_BODY

static void mixed_inputs(double **d, int32_t *tok, int32_t *tgt)
{
    for (int i = 0; i < M_NINPUT; i++) randn(d[i], m_size[i], 1);
    for (size_t i = 0; i < m_size[M_X]; i++) d[M_X][i] = 2 * d[M_X][i] + 0.5;
    for (size_t i = 0; i < m_size[M_LNW]; i++) d[M_LNW][i] += 1;
    for (size_t i = 0; i < m_size[M_W]; i++) d[M_W][i] /= sqrt((double)MC);
    for (size_t i = 0; i < m_size[M_GIN]; i++) d[M_GIN][i] *= 2;
    for (size_t i = 0; i < m_size[M_LOGITS]; i++) d[M_LOGITS][i] *= 3;
    for (size_t i = 0; i < m_size[M_CW]; i++) d[M_CW][i] /= sqrt((double)MC);
    for (int i = 0; i < M_NINPUT; i++) /* both tables see the same (float) values */
        for (size_t j = 0; j < m_size[i]; j++) d[i][j] = (float)d[i][j];
    for (int n = 0; n < MN; n++) tok[n] = randint(0, MTOK - 1), tgt[n] = randint(0, MVREAL - 1);
}

/* Every compiled backend's fp32 table (pt_backend_names) against the CPU
 * double table as the reference, on fresh random inputs.  The backend's
 * buffers come from its own allocator (be->mem) and move to and from the
 * host with its copy2d (either side may be host memory), so a device
 * backend runs the same comparison. */
static void test_float_vs_double(void)
{
    for (const char *const *name = pt_backend_names(); *name; name++) {
        const pt_backend *be = pt_backend_get(*name);
        if (!tap_ok(be != NULL, "backend %s: pt_backend_get finds it (%s)", *name, be ? "" : pt_errmsg())) continue;
        double *d[M_NBUF];
        float *f[M_NBUF], *h[M_NBUF];
        int32_t tok[MN], tgt[MN];
        int ok = 1;
        for (int i = 0; i < M_NBUF; i++) {
            d[i] = dalloc(m_size[i]), h[i] = xcalloc(m_size[i], sizeof(float));
            f[i] = be->mem->alloc(m_size[i] * sizeof(float)); /* zeroed */
            ok &= f[i] != NULL;
        }
        if (!tap_ok(ok, "backend %s: %d buffers from its allocator (%s memory)", *name, M_NBUF,
                    pt_device_name(be->mem->device)))
            return;
        mixed_inputs(d, tok, tgt);
        for (int i = 0; i < M_NINPUT; i++) {
            for (size_t j = 0; j < m_size[i]; j++) h[i][j] = (float)d[i][j];
            be->ops->copy2d(f[i], 0, h[i], 0, m_size[i] * sizeof(float), 1);
        }
        /* token ids, in the backend's memory too */
        int32_t *dtok = be->mem->alloc(sizeof tok), *dtgt = be->mem->alloc(sizeof tgt);
        be->ops->copy2d(dtok, 0, tok, 0, sizeof tok, 1);
        be->ops->copy2d(dtgt, 0, tgt, 0, sizeof tgt, 1);
        mixed_run_f64(&pt_cpu_ops_f64, d, tok, tgt);
        mixed_run_f32(be->ops, f, dtok, dtgt);
        size_t nmax = 0;
        for (int i = 0; i < M_NBUF; i++) nmax = m_size[i] > nmax ? m_size[i] : nmax;
        double *tmp = dalloc(nmax);
        for (int i = M_NINPUT; i < M_NBUF; i++) {
            be->ops->copy2d(h[i], 0, f[i], 0, m_size[i] * sizeof(float), 1);
            for (size_t j = 0; j < m_size[i]; j++) tmp[j] = h[i][j];
            double e = relerr(tmp, d[i], m_size[i]);
            tap_ok(e <= MIXED_TOL && maxabs(d[i], m_size[i]) > 0,
                   "backend %s float vs cpu double: %s agrees (max|f-d|/max|d| = %.2e, B=%d T=%d C=%d OC=%d NH=%d V=%d)",
                   *name, m_name[i], e, MB, MT, MC, MOC, MNH, MV);
        }
        free(tmp);
        be->mem->free(dtok), be->mem->free(dtgt);
        for (int i = 0; i < M_NBUF; i++) free(d[i]), free(h[i]), be->mem->free(f[i]);
    }
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

/* The float table's vectorised exp (a polynomial, not libm) and its GELU
 * over the whole input range, element by element against libm in double:
 * xent_sumexp with one logit per row and rowmax as the shift gives
 * exp(l - m) for any l - m; GELU forward and backward on [-12, 12].  Also
 * a wide row (V = 50257, the GPT-2 vocabulary, unpadded width 50250) and
 * causal rows of T = 128 through the float attention, against double. */
static void test_float_range(void)
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
    free(l), free(m), free(se), free(tg), free(t), free(go), free(gd), free(dy);
    free(xd), free(god), free(gdd), free(dyd);

    /* bench-like widths: one 50257-wide vocabulary row set, T = 128 attention */
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

static void test_threads(void)
{
#ifdef _OPENMP
    const pt_backend *be = pt_backend_get("cpu");
    double *one[M_NBUF], *many[M_NBUF];
    int32_t tok[MN], tgt[MN];
    for (int i = 0; i < M_NBUF; i++) one[i] = dalloc(m_size[i]), many[i] = dalloc(m_size[i]);
    mixed_inputs(one, tok, tgt);
    for (int i = 0; i < M_NINPUT; i++) memcpy(many[i], one[i], m_size[i] * sizeof(double));
    be->set_threads(1);
    mixed_run_f64(&pt_cpu_ops_f64, one, tok, tgt);
    for (int nt = 2; nt <= 3; nt++) {
        be->set_threads(nt);
        double worst = 0;
        const char *wname = "none";
        for (int rep = 0; rep < 5; rep++) { /* races show up intermittently */
            for (int i = M_NINPUT; i < M_NBUF; i++) memset(many[i], 0, m_size[i] * sizeof(double));
            mixed_run_f64(&pt_cpu_ops_f64, many, tok, tgt);
            for (int i = M_NINPUT; i < M_NBUF; i++) {
                double e = relerr(many[i], one[i], m_size[i]);
                if (!(e <= worst)) worst = e, wname = m_name[i];
            }
        }
        tap_ok(worst <= THREAD_TOL, "%d OpenMP threads give the 1-thread results for every op "
                                    "(5 runs, worst %.1e in %s)", nt, worst, wname);
    }
    be->set_threads(1);
    for (int i = 0; i < M_NBUF; i++) free(one[i]), free(many[i]);
#else
    tap_diag("built without OpenMP: thread comparison not run");
#endif
}

int main(void)
{
    const uint64_t seed = test_seed();
    pt_rng_seed(&rng, seed, 0);
    m_sizes();

    test_embedding();
    test_posemb();
    test_layernorm();
    test_matmul(1);
    test_matmul(0);
    test_attention();
    test_elementwise();
    test_xent();
    test_generic();
    test_gemm_batched();
    test_softmax_causal();
    test_layernorm_pieces();
    test_xent_loss_adamw();
    tap_diag("worst finite-difference error over all ops: %.2e (bound %.0e)", g_worst_fd, FD_TOL);
    test_float_vs_double();
    test_float_range();
    test_float_exp_edges();
    test_threads();
    return tap_done();
}

#else /* TEST_OPS_MIXED_BODY: one forward + backward of every op, for MIXED_REAL */

/* b[] holds the M_* buffers: inputs filled, outputs zeroed (backwards accumulate). */
static void MIXED_FN(const MIXED_OPS *o, MIXED_REAL **b, const int32_t *tok, const int32_t *tgt)
{
    const int C = MC, HS = MC / MNH;
    o->embedding_fwd(b[M_EMB], tok, b[M_TOKW], 0, MTOK, MN, C);
    o->embedding_bwd(b[M_DTOKW], b[M_RC], tok, 0, MTOK, MN, C);

    o->copy(b[M_POS], b[M_X], m_size[M_X], MIXED_DT);
    o->posemb_fwd(b[M_POS], b[M_WPE], MB, MT, C);
    o->posemb_bwd(b[M_DWPE], b[M_RC], MB, MT, C);

    o->layernorm_fwd(b[M_LN], b[M_MEAN], b[M_RSTD], b[M_X], b[M_LNW], b[M_LNB], MN, C);
    o->layernorm_bwd(b[M_LNDX], b[M_LNDW], b[M_LNDB], b[M_RC], b[M_X], b[M_LNW], b[M_MEAN],
                     b[M_RSTD], MN, C);

    o->matmul_fwd(b[M_MM], NULL, b[M_X], b[M_W], b[M_BIAS], 0, MN, C, MOC, PT_EPI_DEFAULT);
    o->matmul_bwd(b[M_MMDX], b[M_MMDW], b[M_MMDB], b[M_ROC], b[M_X], b[M_W], MN, C, MOC, PT_EPI_DEFAULT, NULL, NULL);

    o->attention_ref_fwd(b[M_ATTO], b[M_ATT], b[M_QKV], MB, MT, MNH, HS);
    o->attention_ref_bwd(b[M_DQKV], b[M_RC], b[M_QKV], b[M_ATT], MB, MT, MNH, HS);

    o->gelu_fwd(b[M_GELU], b[M_GIN], m_size[M_GIN]);
    o->gelu_bwd(b[M_GDX], b[M_GIN], b[M_RC], m_size[M_GIN]);

    o->add_fwd(b[M_ADD], b[M_X], b[M_A2], m_size[M_X]);
    o->add_bwd(b[M_ADA], b[M_ADB], b[M_GELU], m_size[M_X]); /* a dout that differs from R */

    o->copy(b[M_BOUT], b[M_ROC], m_size[M_ROC], MIXED_DT);
    o->bias_fwd(b[M_BOUT], b[M_BIAS], MN, MOC);
    o->bias_bwd(b[M_BDB], b[M_BOUT], MN, MOC);

    o->fill(b[M_DLOSS], (MIXED_REAL)1 / MN, MN, MIXED_DT);
    o->xent_max(b[M_XMAX], b[M_LOGITS], 0, MVREAL, MN, MV);
    o->xent_sumexp(b[M_XSUM], b[M_XTGT], b[M_LOGITS], b[M_XMAX], tgt, 0, MVREAL, MN, MV);
    o->xent_bwd(b[M_DLOG], b[M_LOGITS], b[M_XMAX], b[M_XSUM], tgt, b[M_DLOSS], 0, MVREAL, MN, MV);

    /* generic ops (train-step refactor) */
    o->fill(b[M_AXPY], (MIXED_REAL)0.5, m_size[M_AXPY], MIXED_DT);
    o->axpy(b[M_AXPY], (MIXED_REAL)0.25, b[M_X], m_size[M_X], MIXED_DT);
    o->scale(b[M_AXPY], (MIXED_REAL)-1.5, m_size[M_AXPY], MIXED_DT);
    o->copy2d(b[M_CP2D], sizeof(MIXED_REAL) * (C / 2), b[M_X] + 3, sizeof(MIXED_REAL) * C, sizeof(MIXED_REAL) * (C / 2), MN);
    o->add2d(b[M_CP2D], C / 2, b[M_RC] + 1, C, MN, C / 2, MIXED_DT);
    MIXED_REAL sums[2] = {(MIXED_REAL)o->sum(b[M_X], m_size[M_X], MIXED_DT), (MIXED_REAL)o->sumsq(b[M_X], m_size[M_X], MIXED_DT)};
    o->copy2d(b[M_SUMS], 0, sums, 0, sizeof sums, 1);
    const int64_t sS = (int64_t)MT * MT;
    for (int bb = 0; bb < MB; bb++) {
        const MIXED_REAL *q = b[M_QKV] + (size_t)bb * MT * 3 * C;
        o->gemm_batched(0, 1, MT, MT, HS, (MIXED_REAL)0.3, q, 3 * C, HS, q + C, 3 * C, HS, 0, b[M_SCORES] + bb * MNH * sS,
                        MT, sS, MNH);
    }
    o->copy(b[M_SMAX], b[M_SCORES], m_size[M_SCORES], MIXED_DT);
    o->softmax_causal_fwd(b[M_SMAX], MB * MNH, MT / 2, MT, MT / 2); /* the second half of the queries */
    o->copy(b[M_SMAXB], b[M_DP], m_size[M_DP], MIXED_DT);
    o->softmax_causal_bwd(b[M_SMAXB], b[M_SMAX], (MIXED_REAL)0.3, MB * MNH, MT / 2, MT, MT / 2);
    for (int bb = 0; bb < MB; bb++)
        o->gemm_batched(0, 0, MT / 2, HS, MT, 1, b[M_SMAX] + bb * MNH * (MT / 2) * MT, MT, (int64_t)(MT / 2) * MT,
                        b[M_QKV] + (size_t)bb * MT * 3 * C + 2 * C, 3 * C, HS, 1, b[M_PV] + (size_t)bb * MT * C, C, HS,
                        MNH);
    o->layernorm_rowsum(b[M_LNPM], b[M_X], MN, C);
    o->layernorm_rowvar(b[M_LNPM], b[M_LNPR], b[M_X], b[M_LNPM], MN, C, C); /* sum -> mean in place */
    o->layernorm_apply(b[M_LNP], b[M_LNPR], b[M_X], b[M_LNPM], b[M_LNPR], b[M_LNW], b[M_LNB], MN, C, C);
    o->layernorm_bwd_rowsums(b[M_LNPS], b[M_RC], b[M_X], b[M_LNW], b[M_LNPM], b[M_LNPR], MN, C);
    o->layernorm_bwd_apply(b[M_LNPDX], b[M_LNPDW], b[M_LNPDB], b[M_RC], b[M_X], b[M_LNW], b[M_LNPM], b[M_LNPR],
                           b[M_LNPS], MN, C, C);
    o->xent_loss(b[M_XLOSS], b[M_XMAX], b[M_XSUM], b[M_XTGT], MN);
    o->copy(b[M_ADP], b[M_X], m_size[M_X], MIXED_DT);
    for (int t = 1; t <= 2; t++)
        o->adamw(b[M_ADP], NULL, t == 1 ? b[M_RC] : b[M_GIN], b[M_ADM], b[M_ADV], m_size[M_ADP], (MIXED_REAL)1e-2,
                 (MIXED_REAL)0.9, (MIXED_REAL)0.95, (MIXED_REAL)1e-8, (MIXED_REAL)0.1, (MIXED_REAL)(1 - pow(0.9, t)),
                 (MIXED_REAL)(1 - pow(0.95, t)));

    /* flash attention over the whole sequence; GEMM epilogues (GELU_AUX_BIAS,
     * DGELU_BGRAD, and alone); the fused classifier in blocks of MCVB columns */
    const pt_attn_dims fd = {MB, MNH, HS, MT, MT, 0, 0, 3 * C, 3 * C};
    MIXED_REAL *qkv = b[M_QKV], *dqkv = b[M_FDQKV];
    o->attention_fwd(b[M_FO], b[M_FLSE], qkv, qkv + C, qkv + 2 * C, &fd, 0);
    o->attention_bwd(dqkv, dqkv + C, dqkv + 2 * C, b[M_RC], qkv, qkv + C, qkv + 2 * C, b[M_FO], b[M_FLSE], &fd);
    o->matmul_fwd(b[M_EGO], b[M_EAUX], b[M_X], b[M_W], b[M_BIAS], 0, MN, C, MOC, PT_EPI_GELU);
    o->matmul_bwd(b[M_EMDX], NULL, NULL, b[M_ROC], b[M_X], b[M_W], MN, C, MOC, PT_EPI_DGELU, b[M_GIN], b[M_EMDB]);
    o->copy(b[M_EFB], b[M_ROC], m_size[M_ROC], MIXED_DT);
    o->epilogue_fwd(b[M_EFB], NULL, b[M_BIAS], MN, MOC, PT_EPI_GELU);
    o->copy(b[M_ECDX], b[M_ROC], m_size[M_ROC], MIXED_DT);
    o->epilogue_bwd(b[M_ECDX], b[M_ECDB], b[M_EAUX], MN, MOC);
    o->classifier_fwd(b[M_CST], b[M_X], b[M_CW], tgt, b[M_CWORK], MCVB, 0, MVREAL, MN, C, MV, 1);
    o->classifier_bwd(b[M_CDX], b[M_CDW], b[M_X], b[M_CW], b[M_CST], tgt, b[M_DLOSS], b[M_CWORK], MCVB, 0, MVREAL, MN,
                      C, MV, 1);
}

#endif
