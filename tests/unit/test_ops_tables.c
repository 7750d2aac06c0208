/* SPDX-License-Identifier: MIT */
/* Every op of lib/backend/ops.h in one forward + backward pass on
 * moderately large random inputs (B=4 T=16 C=48 OC=40 NH=4 V=100), across
 * tables and threads; the op families one by one are in test_ops_elem,
 * test_ops_norm, test_ops_gemm, test_ops_attention, test_ops_xent and
 * test_ops_fused.
 *
 *  1. Every compiled backend's float table (pt_backend_names) against the
 *     CPU double table (pt_cpu_ops_f64) on the same inputs, output by
 *     output: max|f - d| / max|d| <= MIXED_TOL.
 *  2. With OpenMP: the double table on 1 thread against 2 and 3 threads
 *     (races), five runs each.
 *
 * Inputs are fresh random numbers every run; the seed is printed as a TAP
 * diagnostic and PTRAIN_TEST_SEED=<n> reproduces a run. */
#ifndef TEST_OPS_MIXED_BODY

#include "backend/ops.h"
#include "core/core.h"
#include "tests/tap.h"
#include "tests/unit/ops_util.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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
#include "tests/unit/test_ops_tables.c"
#undef MIXED_REAL
#undef MIXED_DT
#undef MIXED_OPS
#undef MIXED_FN
#define MIXED_REAL double
#define MIXED_DT PT_F64
#define MIXED_OPS pt_ops
#define MIXED_FN mixed_run_f64
#include "tests/unit/test_ops_tables.c"
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
        mixed_run_f64(D, d, tok, tgt);
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
    mixed_run_f64(D, one, tok, tgt);
    for (int nt = 2; nt <= 3; nt++) {
        be->set_threads(nt);
        double worst = 0;
        const char *wname = "none";
        for (int rep = 0; rep < 5; rep++) { /* races show up intermittently */
            for (int i = M_NINPUT; i < M_NBUF; i++) memset(many[i], 0, m_size[i] * sizeof(double));
            mixed_run_f64(D, many, tok, tgt);
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

    test_float_vs_double();
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
    const pt_attn_dims fd = {MB, MNH, HS, MT, MT, 0, 0, 3 * C, 3 * C, MNH};
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
