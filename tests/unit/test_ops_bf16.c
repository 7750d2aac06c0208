/* SPDX-License-Identifier: MIT */
/* The bf16 ops table (pt_cpu_ops_bf16: bf16 activations and weight copies,
 * fp32 accumulation) against the double reference table.
 *
 *  1. Every op of the table, forward and backward, on fresh random inputs
 *     of odd sizes (T across a flash tile, a vocabulary not a multiple of
 *     the classifier's block, width in 2 column pieces), written once for
 *     any table and run on both: the inputs are bf16 values (ACT) and
 *     floats (ACC), so both tables see the same numbers and the difference
 *     is the bf16 table's rounding of what it stores and its float
 *     arithmetic.  Outputs start at 0.  Bound: the norm of the difference
 *     over the
 *     norm of the reference, 1e-2 per buffer (one bf16 rounding is at most
 *     2^-8 = 3.9e-3 relative, 2^-9 on average over many elements; a few
 *     chained ones stay under 1e-2).
 *  2. The table: act bf16, acc fp32; the materialised reference attention
 *     absent (NULL), gemm_batched and softmax_causal the f32 table's.
 *  3. convert fp32 -> bf16 rounds to nearest, ties to even, keeps NaN,
 *     infinities and signed zero; fill and the generic ops on bf16.
 *  4. The accumulate contract in bf16: every backward that adds (+=) adds
 *     to a prefill P of its output's size (out(P) - P == out(0) up to the
 *     roundings of a bf16 store), the ones documented to write ignore it.
 *  5. 1 vs 2 OpenMP threads: the same bf16 results, bit for bit (1e-6 with
 *     oneDNN or sbgemm, which thread themselves).
 * Inputs are fresh random numbers every run; the seed is printed as a TAP
 * diagnostic and PTRAIN_TEST_SEED=<n> reproduces a run. */
#include "backend/gemm_bf16.h"
#include "backend/ops.h"
#include "core/core.h"
#include "tests/tap.h"
#include "tests/unit/ops_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#define BF16_TOL 1e-2

/* sizes: T crosses the 64-wide flash tile, V three classifier blocks (the
 * last partial), OC and C not powers of two */
enum { B = 3, T = 70, NH = 4, HS = 12, C = NH * HS, N = B * T, OC = 45, V = 1100, VREAL = 1093, V1 = 13, T1 = 29,
       KS = 2 };

enum { ACT, ACC }; /* buffer roles (ops.h) */

/* the buffers: inputs first */
enum {
    I_TOKW, I_WPE, I_X, I_LNW, I_LNB, I_W, I_BIAS, I_QKV, I_GIN, I_A2, I_LOGITS, I_RC, I_ROC, I_CW, I_DLOSS,
    I_ADP, I_ADG, I_ADM, I_ADV, I_FROM, I_TO,
    O_EMB, O_DTOKW, O_POS, O_DWPE, O_LN, O_MEAN, O_RSTD, O_LNDX, O_LNDW, O_LNDB, O_MM, O_MMDX, O_MMDW, O_MMDB,
    O_EGO, O_EAUX, O_EMDX, O_EMDB, O_EFB, O_EFAUX, O_ECDX, O_ECDB, O_FO, O_FLSE, O_FDQKV, O_RO, O_RLSE, O_RDQKV,
    O_GELU, O_GDX, O_ADD, O_ADA, O_ADB, O_BOUT, O_BDB, O_XMAX, O_XSUM, O_XTGT, O_DLOG, O_CST, O_CDX, O_CDW,
    O_CST2, O_CDX2, O_CDW2, O_RESC, O_XLOSS, O_LNP, O_LNPM, O_LNPR, O_LNPS, O_LNPDX, O_LNPDW, O_LNPDB, O_AXPY,
    O_CP2D, O_SUMS, O_CONV, O_ADP, O_ADM, O_ADV, O_ADW,
    NBUF
};
#define NINPUT O_EMB
/* the classifier's work: scratch, not compared */
#define CWORK_ELEMS ((size_t)N * 512 + (size_t)N * C)

static const struct {
    const char *name;
    int role;
    size_t n;
} buf[NBUF] = {
    [I_TOKW] = {"embedding table", ACT, V1 * C}, [I_WPE] = {"wpe", ACT, T * C}, [I_X] = {"x", ACT, N * C},
    [I_LNW] = {"ln w", ACT, C}, [I_LNB] = {"ln b", ACT, C}, [I_W] = {"w", ACT, OC * C}, [I_BIAS] = {"bias", ACT, OC},
    [I_QKV] = {"qkv", ACT, N * 3 * C}, [I_GIN] = {"gelu in", ACT, N * C}, [I_A2] = {"add b", ACT, N * C},
    [I_LOGITS] = {"logits", ACT, (size_t)N * V}, [I_RC] = {"dout [N,C]", ACT, N * C},
    [I_ROC] = {"dout [N,OC]", ACT, N * OC}, [I_CW] = {"classifier w", ACT, (size_t)V * C},
    [I_DLOSS] = {"dloss", ACC, N}, [I_ADP] = {"adamw p0", ACC, N * C}, [I_ADG] = {"adamw g", ACC, N * C},
    [I_ADM] = {"adamw m0", ACC, N * C}, [I_ADV] = {"adamw v0", ACC, N * C}, [I_FROM] = {"rescale from", ACC, N},
    [I_TO] = {"rescale to", ACC, N},
    [O_EMB] = {"embedding_fwd out", ACT, N * C}, [O_DTOKW] = {"embedding_bwd dw", ACC, V1 * C},
    [O_POS] = {"posemb_fwd x", ACT, N * C}, [O_DWPE] = {"posemb_bwd dwpe", ACC, T * C},
    [O_LN] = {"layernorm_fwd out", ACT, N * C}, [O_MEAN] = {"layernorm_fwd mean", ACC, N},
    [O_RSTD] = {"layernorm_fwd rstd", ACC, N}, [O_LNDX] = {"layernorm_bwd dinp", ACT, N * C},
    [O_LNDW] = {"layernorm_bwd dw", ACC, C}, [O_LNDB] = {"layernorm_bwd db", ACC, C},
    [O_MM] = {"matmul_fwd bias out", ACT, N * OC}, [O_MMDX] = {"matmul_bwd dinp (+=)", ACT, N * C},
    [O_MMDW] = {"matmul_bwd dw", ACC, OC * C}, [O_MMDB] = {"matmul_bwd dbias", ACC, OC},
    [O_EGO] = {"matmul_fwd GELU_AUX_BIAS beta 1 out", ACT, N * OC},
    [O_EAUX] = {"matmul_fwd GELU_AUX_BIAS aux", ACT, N * OC}, [O_EMDX] = {"matmul_bwd DGELU dinp", ACT, N * C},
    [O_EMDB] = {"matmul_bwd DGELU_BGRAD dbias", ACC, C}, [O_EFB] = {"epilogue_fwd GELU out", ACT, N * OC},
    [O_EFAUX] = {"epilogue_fwd GELU aux", ACT, N * OC}, [O_ECDX] = {"epilogue_bwd d", ACT, N * OC},
    [O_ECDB] = {"epilogue_bwd dbias", ACC, OC}, [O_FO] = {"attention_fwd out", ACT, N * C},
    [O_FLSE] = {"attention_fwd lse", ACC, B * NH * T}, [O_FDQKV] = {"attention_bwd dqkv", ACT, N * 3 * C},
    [O_RO] = {"attention_fwd 2 key blocks merged: out", ACT, T * C},
    [O_RLSE] = {"attention_fwd 2 key blocks merged: lse", ACC, NH * T},
    [O_RDQKV] = {"attention_bwd per key block: dqkv", ACT, T * 3 * C}, [O_GELU] = {"gelu_fwd", ACT, N * C},
    [O_GDX] = {"gelu_bwd", ACT, N * C}, [O_ADD] = {"add_fwd", ACT, N * C}, [O_ADA] = {"add_bwd da", ACT, N * C},
    [O_ADB] = {"add_bwd db", ACT, N * C}, [O_BOUT] = {"bias_fwd", ACT, N * OC}, [O_BDB] = {"bias_bwd", ACC, OC},
    [O_XMAX] = {"xent_max", ACC, N}, [O_XSUM] = {"xent_sumexp sumexp", ACC, N}, [O_XTGT] = {"xent_sumexp tgt", ACC, N},
    [O_DLOG] = {"xent_bwd dlogits", ACT, (size_t)N * V}, [O_CST] = {"classifier_fwd stats", ACC, 3 * N},
    [O_CDX] = {"classifier_bwd dx", ACT, N * C}, [O_CDW] = {"classifier_bwd dw", ACC, (size_t)V * C},
    [O_CST2] = {"classifier_fwd stats (2 pieces)", ACC, 3 * N}, [O_CDX2] = {"classifier_bwd dx (2 pieces)", ACT, N * C},
    [O_CDW2] = {"classifier_bwd dw (2 pieces)", ACC, (size_t)V * C}, [O_RESC] = {"xent_rescale", ACC, N},
    [O_XLOSS] = {"xent_loss", ACC, N}, [O_LNP] = {"layernorm_apply out", ACT, N * C},
    [O_LNPM] = {"layernorm_rowvar mean", ACC, N}, [O_LNPR] = {"layernorm_apply rstd", ACC, N},
    [O_LNPS] = {"layernorm_bwd_rowsums", ACC, 2 * N}, [O_LNPDX] = {"layernorm_bwd_apply dx", ACT, N * C},
    [O_LNPDW] = {"layernorm_bwd_apply dw", ACC, C}, [O_LNPDB] = {"layernorm_bwd_apply db", ACC, C},
    [O_AXPY] = {"fill + axpy + scale", ACT, N * C}, [O_CP2D] = {"copy2d + add2d", ACT, N * C / 2},
    [O_SUMS] = {"sum, sumsq", ACC, 2}, [O_CONV] = {"convert to fp32", ACC, N * C},
    [O_ADP] = {"adamw p", ACC, N * C}, [O_ADM] = {"adamw m", ACC, N * C}, [O_ADV] = {"adamw v", ACC, N * C},
    [O_ADW] = {"adamw work copy", ACT, N * C},
};

/* the outputs the ops accumulate into (+=), the others are written */
static int accumulates(int i)
{
    static const int acc[] = {O_DTOKW, O_DWPE, O_LNDX, O_LNDW, O_LNDB, O_MMDX, O_MMDW, O_MMDB, O_EMDB, O_ECDB, O_FDQKV,
                              O_RDQKV, O_GDX, O_ADA, O_ADB, O_BDB, O_CDX, O_CDW, O_CDX2, O_CDW2, O_LNPDX, O_LNPDW,
                              O_LNPDB};
    for (size_t k = 0; k < sizeof acc / sizeof acc[0]; k++)
        if (acc[k] == i) return 1;
    return 0;
}

static pt_dtype dt_of(const pt_ops *o, int i) { return buf[i].role == ACT ? o->act : o->acc; }
#define AT(i, k) pt_elem(b[i], (size_t)(k), dt_of(o, i))

/* Every op once, for any table; b[] holds the buffers in the table's types. */
static void run_all(const pt_ops *o, void **b, void *work, const int32_t *tok, const int32_t *tgt)
{
    const pt_dtype at = o->act, ac = o->acc;
    o->embedding_fwd(b[O_EMB], tok, b[I_TOKW], 0, V1, N, C);
    o->embedding_bwd(b[O_DTOKW], b[I_RC], tok, 0, V1, N, C);
    o->copy(b[O_POS], b[I_X], N * C, at);
    o->posemb_fwd(b[O_POS], b[I_WPE], B, T, C);
    o->posemb_bwd(b[O_DWPE], b[I_RC], B, T, C);
    o->layernorm_fwd(b[O_LN], b[O_MEAN], b[O_RSTD], b[I_X], b[I_LNW], b[I_LNB], N, C);
    o->layernorm_bwd(b[O_LNDX], b[O_LNDW], b[O_LNDB], b[I_RC], b[I_X], b[I_LNW], b[O_MEAN], b[O_RSTD], N, C);
    o->matmul_fwd(b[O_MM], NULL, b[I_X], b[I_W], b[I_BIAS], 0, N, C, OC, PT_EPI_DEFAULT);
    o->matmul_bwd(b[O_MMDX], b[O_MMDW], b[O_MMDB], b[I_ROC], b[I_X], b[I_W], N, C, OC, PT_EPI_DEFAULT, NULL, NULL);
    o->matmul_fwd(b[O_EGO], b[O_EAUX], b[I_X], b[I_W], b[I_BIAS], 1, N, C, OC, PT_EPI_GELU);
    o->matmul_bwd(b[O_EMDX], NULL, NULL, b[I_ROC], b[I_X], b[I_W], N, C, OC, PT_EPI_DGELU, b[I_GIN], b[O_EMDB]);
    o->copy(b[O_EFB], b[I_ROC], N * OC, at);
    o->epilogue_fwd(b[O_EFB], b[O_EFAUX], b[I_BIAS], N, OC, PT_EPI_GELU);
    o->copy(b[O_ECDX], b[I_ROC], N * OC, at);
    o->epilogue_bwd(b[O_ECDX], b[O_ECDB], b[O_EFAUX], N, OC);

    /* flash attention over the whole sequence, then one sequence's queries
     * against its keys in two blocks (a ring's merge and per-block backward) */
    const pt_attn_dims fd = {B, NH, HS, T, T, 0, 0, 3 * C, 3 * C, NH};
    o->attention_fwd(b[O_FO], b[O_FLSE], b[I_QKV], AT(I_QKV, C), AT(I_QKV, 2 * C), &fd, 0);
    o->attention_bwd(b[O_FDQKV], AT(O_FDQKV, C), AT(O_FDQKV, 2 * C), b[I_RC], b[I_QKV], AT(I_QKV, C),
                     AT(I_QKV, 2 * C), b[O_FO], b[O_FLSE], &fd);
    const pt_attn_dims d1 = {1, NH, HS, T, T1, 0, 0, 3 * C, 3 * C, NH};
    const pt_attn_dims d2 = {1, NH, HS, T, T - T1, 0, T1, 3 * C, 3 * C, NH};
    const size_t k2 = (size_t)T1 * 3 * C;
    o->attention_fwd(b[O_RO], b[O_RLSE], b[I_QKV], AT(I_QKV, C), AT(I_QKV, 2 * C), &d1, 0);
    o->attention_fwd(b[O_RO], b[O_RLSE], b[I_QKV], AT(I_QKV, k2 + C), AT(I_QKV, k2 + 2 * C), &d2, 1);
    o->attention_bwd(b[O_RDQKV], AT(O_RDQKV, C), AT(O_RDQKV, 2 * C), b[I_RC], b[I_QKV], AT(I_QKV, C),
                     AT(I_QKV, 2 * C), b[O_RO], b[O_RLSE], &d1);
    o->attention_bwd(b[O_RDQKV], AT(O_RDQKV, k2 + C), AT(O_RDQKV, k2 + 2 * C), b[I_RC], b[I_QKV],
                     AT(I_QKV, k2 + C), AT(I_QKV, k2 + 2 * C), b[O_RO], b[O_RLSE], &d2);

    o->gelu_fwd(b[O_GELU], b[I_GIN], N * C);
    o->gelu_bwd(b[O_GDX], b[I_GIN], b[I_RC], N * C);
    o->add_fwd(b[O_ADD], b[I_X], b[I_A2], N * C);
    o->add_bwd(b[O_ADA], b[O_ADB], b[I_RC], N * C);
    o->copy(b[O_BOUT], b[I_ROC], N * OC, at);
    o->bias_fwd(b[O_BOUT], b[I_BIAS], N, OC);
    o->bias_bwd(b[O_BDB], b[I_ROC], N, OC);

    o->xent_max(b[O_XMAX], b[I_LOGITS], 0, VREAL, N, V);
    o->xent_sumexp(b[O_XSUM], b[O_XTGT], b[I_LOGITS], b[O_XMAX], tgt, 0, VREAL, N, V);
    o->xent_bwd(b[O_DLOG], b[I_LOGITS], b[O_XMAX], b[O_XSUM], tgt, b[I_DLOSS], 0, VREAL, N, V);
    o->classifier_fwd(b[O_CST], b[I_X], b[I_CW], tgt, work, 512, 0, VREAL, N, C, V, 1);
    o->classifier_bwd(b[O_CDX], b[O_CDW], b[I_X], b[I_CW], b[O_CST], tgt, b[I_DLOSS], work, 512, 0, VREAL, N, C, V, 1);
    o->classifier_fwd(b[O_CST2], b[I_X], b[I_CW], tgt, work, 512, 0, VREAL, N, C, V, KS);
    o->classifier_bwd(b[O_CDX2], b[O_CDW2], b[I_X], b[I_CW], b[O_CST2], tgt, b[I_DLOSS], work, 512, 0, VREAL, N, C, V,
                      KS);
    o->copy(b[O_RESC], b[O_XSUM], N, ac);
    o->xent_rescale(b[O_RESC], b[I_FROM], b[I_TO], N);
    o->xent_loss(b[O_XLOSS], b[O_XMAX], b[O_XSUM], b[O_XTGT], N);

    o->layernorm_rowsum(b[O_LNPM], b[I_X], N, C);
    o->layernorm_rowvar(b[O_LNPM], b[O_LNPR], b[I_X], b[O_LNPM], N, C, C);
    o->layernorm_apply(b[O_LNP], b[O_LNPR], b[I_X], b[O_LNPM], b[O_LNPR], b[I_LNW], b[I_LNB], N, C, C);
    o->layernorm_bwd_rowsums(b[O_LNPS], b[I_RC], b[I_X], b[I_LNW], b[O_LNPM], b[O_LNPR], N, C);
    o->layernorm_bwd_apply(b[O_LNPDX], b[O_LNPDW], b[O_LNPDB], b[I_RC], b[I_X], b[I_LNW], b[O_LNPM], b[O_LNPR],
                           b[O_LNPS], N, C, C);

    o->fill(b[O_AXPY], 0.5, N * C, at);
    o->axpy(b[O_AXPY], 0.25, b[I_X], N * C, at);
    o->scale(b[O_AXPY], -1.5, N * C, at);
    const size_t es = pt_dtype_size(at);
    o->copy2d(b[O_CP2D], es * (C / 2), AT(I_X, 3), es * C, es * (C / 2), N);
    o->add2d(b[O_CP2D], C / 2, AT(I_RC, 1), C, N, C / 2, at);
    double sums[2] = {o->sum(b[I_X], N * C, at), o->sumsq(b[I_X], N * C, at)};
    o->convert(b[O_SUMS], ac, sums, PT_F64, 2);
    o->convert(b[O_CONV], ac, b[I_X], at, N * C);

    o->copy(b[O_ADP], b[I_ADP], N * C, ac);
    o->copy(b[O_ADM], b[I_ADM], N * C, ac);
    o->copy(b[O_ADV], b[I_ADV], N * C, ac);
    for (int t = 1; t <= 2; t++)
        o->adamw(b[O_ADP], at == ac ? NULL : b[O_ADW], b[I_ADG], b[O_ADM], b[O_ADV], N * C, 1e-2, 0.9, 0.95, 1e-8,
                 0.1, 1 - pow(0.9, t), 1 - pow(0.95, t));
}

/* the value x rounded as a buffer of role r holds it in the bf16 run */
static double as_stored(double x, int r)
{
    return r == ACT ? (double)pt_bf16_to_f32(pt_f32_to_bf16((float)x)) : (double)(float)x;
}

/* fresh inputs and output prefills, all representable in both runs */
static void make_inputs(double **d, int32_t *tok, int32_t *tgt)
{
    for (int i = 0; i < NBUF; i++) randn(d[i], buf[i].n, 1);
    for (size_t j = 0; j < buf[I_X].n; j++) d[I_X][j] = 2 * d[I_X][j] + 0.5;
    for (size_t j = 0; j < buf[I_LNW].n; j++) d[I_LNW][j] += 1;
    for (size_t j = 0; j < buf[I_W].n; j++) d[I_W][j] /= sqrt((double)C);
    for (size_t j = 0; j < buf[I_CW].n; j++) d[I_CW][j] /= sqrt((double)C);
    for (size_t j = 0; j < buf[I_GIN].n; j++) d[I_GIN][j] *= 2;
    for (size_t j = 0; j < buf[I_LOGITS].n; j++) d[I_LOGITS][j] *= 3;
    for (size_t j = 0; j < N; j++) d[I_DLOSS][j] = (0.5 + pt_rng_uniform(&rng)) / N;
    for (size_t j = 0; j < buf[I_ADV].n; j++) d[I_ADV][j] = d[I_ADV][j] * d[I_ADV][j];
    for (int i = NINPUT; i < NBUF; i++) memset(d[i], 0, buf[i].n * sizeof(double)); /* outputs start at 0 */
    for (int i = 0; i < NBUF; i++)
        for (size_t j = 0; j < buf[i].n; j++) d[i][j] = as_stored(d[i][j], buf[i].role);
    for (int n = 0; n < N; n++) tok[n] = randint(0, V1 - 1), tgt[n] = randint(0, VREAL - 1);
}

/* buffers of table o from the doubles d (o->convert from fp64) */
static void **load(const pt_ops *o, double **d)
{
    void **b = xcalloc(NBUF, sizeof *b);
    for (int i = 0; i < NBUF; i++) {
        b[i] = xcalloc(buf[i].n, pt_dtype_size(dt_of(o, i)));
        o->convert(b[i], dt_of(o, i), d[i], PT_F64, buf[i].n);
    }
    return b;
}

static double *readback(const pt_ops *o, void *p, int i)
{
    double *r = dalloc(buf[i].n);
    o->convert(r, PT_F64, p, dt_of(o, i), buf[i].n);
    return r;
}

/* ||a - b|| / ||b|| (INFINITY on NaN) */
static double relnorm(const double *a, const double *b, size_t n)
{
    double e = 0, s = 0;
    for (size_t i = 0; i < n; i++) e += (a[i] - b[i]) * (a[i] - b[i]), s += b[i] * b[i];
    if (e != e) return INFINITY;
    return s > 0 ? sqrt(e / s) : sqrt(e);
}

static void test_table(void)
{
    const pt_ops *Bt = &pt_cpu_ops_bf16;
    tap_ok(Bt->act == PT_BF16 && Bt->acc == PT_F32 && strcmp(Bt->name, "bf16") == 0,
           "the bf16 table: act bf16, acc fp32 (%s, %s)", pt_dtype_name(Bt->act), pt_dtype_name(Bt->acc));
    tap_ok(!Bt->attention_ref_fwd && !Bt->attention_ref_bwd && Bt->gemm_batched == pt_cpu_ops_f32.gemm_batched &&
               Bt->softmax_causal_fwd == pt_cpu_ops_f32.softmax_causal_fwd,
           "no materialised reference attention in bf16; gemm_batched and softmax_causal (ACC) are the f32 table's");
    const pt_backend *be = pt_backend_get("cpu");
    tap_ok(be && pt_backend_ops(be, PT_BF16) == Bt && pt_backend_ops(be, PT_F32) == &pt_cpu_ops_f32 &&
               !pt_backend_ops(be, PT_F64) && strstr(pt_errmsg(), "fp64") && strstr(pt_errmsg(), "bf16"),
           "pt_backend_ops: fp32 and bf16 tables, fp64 refused: %s", pt_errmsg());
}

static void test_convert(void)
{
    const pt_ops *o = &pt_cpu_ops_bf16;
    /* 1 + 2^-8 is a tie between 1 and 1 + 2^-7: even is 1; 1 + 3 * 2^-8 ties
     * between 1 + 2^-7 and 1 + 2^-6: even is 1 + 2^-6; one ulp off a tie
     * rounds to the nearer */
    const float in[] = {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, 1.0f + 0x1p-8f + 0x1p-23f, -(1.0f + 0x1p-8f), INFINITY,
                        -INFINITY, NAN, -0.0f, 0x1p-130f, 3.4e38f};
    const float want[] = {1.0f, 1.0f + 0x1p-6f, 1.0f + 0x1p-7f, -1.0f, INFINITY, -INFINITY, NAN, -0.0f, 0x1p-130f,
                          INFINITY};
    enum { NC = sizeof in / sizeof in[0] };
    pt_bf16 h[NC];
    float back[NC];
    o->convert(h, PT_BF16, in, PT_F32, NC);
    o->convert(back, PT_F32, h, PT_BF16, NC);
    int ok = 1;
    for (int i = 0; i < NC; i++) {
        int same = isnan(want[i]) ? isnan(back[i]) : back[i] == want[i] && signbit(back[i]) == signbit(want[i]);
        if (!same) ok = 0, tap_diag("convert %a: got %a, want %a", in[i], back[i], want[i]);
    }
    tap_ok(ok, "convert fp32 -> bf16: ties to even both ways, off a tie to the nearer, +-inf, NaN stays NaN, -0, "
               "subnormal, overflow to inf (%d values)", NC);
    /* random values: the round trip is within half a bf16 ulp and exact on bf16 values */
    enum { NR = 4097 };
    float *r = xcalloc(NR, sizeof(float)), *rb = xcalloc(NR, sizeof(float));
    pt_bf16 *hb = xcalloc(NR, sizeof(pt_bf16));
    for (int i = 0; i < NR; i++) r[i] = (float)(pt_rng_normal(&rng) * exp(20 * pt_rng_uniform(&rng) - 10));
    o->convert(hb, PT_BF16, r, PT_F32, NR);
    o->convert(rb, PT_F32, hb, PT_BF16, NR);
    double worst = 0;
    for (int i = 0; i < NR; i++) worst = fmax(worst, fabs(rb[i] - r[i]) / fabs(r[i]));
    o->convert(hb, PT_BF16, rb, PT_F32, NR);
    o->convert(r, PT_F32, hb, PT_BF16, NR);
    tap_ok(worst <= 0x1p-8 && memcmp(r, rb, NR * sizeof(float)) == 0,
           "convert round trip of %d random floats: relative error %.2e <= 2^-8 (bf16 unit roundoff), bf16 values come back exactly", NR,
           worst);
    o->fill(hb, -2.5, NR, PT_BF16);
    o->convert(r, PT_F32, hb, PT_BF16, NR);
    int fill_ok = 1;
    for (int i = 0; i < NR; i++) fill_ok &= r[i] == -2.5f;
    tap_ok(fill_ok, "fill on bf16 elements");
    free(r), free(rb), free(hb);
}

static void test_against_f64(void)
{
    const pt_ops *Bt = &pt_cpu_ops_bf16, *Dt = D;
    double *d[NBUF];
    int32_t tok[N], tgt[N];
    for (int i = 0; i < NBUF; i++) d[i] = dalloc(buf[i].n);
    make_inputs(d, tok, tgt);
    void **bd = load(Dt, d), **bb = load(Bt, d);
    void *wd = xcalloc(CWORK_ELEMS, sizeof(double)), *wb = xcalloc(CWORK_ELEMS, sizeof(float));
    run_all(Dt, bd, wd, tok, tgt);
    run_all(Bt, bb, wb, tok, tgt);
    double worst = 0;
    for (int i = NINPUT; i < NBUF; i++) {
        if (i == O_ADW) continue;
        double *ref = readback(Dt, bd[i], i), *got = readback(Bt, bb[i], i);
        const double e = relnorm(got, ref, buf[i].n);
        worst = fmax(worst, e);
        tap_ok(e <= BF16_TOL && maxabs(ref, buf[i].n) > 0,
               "bf16 vs fp64: %s (%s) within %.0e: |bf16 - f64| / |f64| = %.2e (N=%d C=%d OC=%d T=%d V=%d)",
               buf[i].name, buf[i].role == ACT ? "bf16" : "fp32", BF16_TOL, e, N, C, OC, T, V);
        free(ref), free(got);
    }
    /* the work copy AdamW wrote: the updated master rounded to bf16 */
    double *ref = readback(Dt, bd[O_ADP], O_ADP), *got = readback(Bt, bb[O_ADW], O_ADW),
           *mst = readback(Bt, bb[O_ADP], O_ADP);
    int rounded = 1;
    for (size_t j = 0; j < buf[O_ADW].n; j++) rounded &= got[j] == as_stored(mst[j], ACT);
    const double e = relnorm(got, ref, buf[O_ADW].n);
    tap_ok(rounded && e <= BF16_TOL,
           "adamw writes the bf16 work copy in the same pass: each element the updated fp32 master rounded to bf16, "
           "%.2e from the f64 master", e);
    tap_diag("worst bf16 vs fp64 difference over every op: %.2e (bound %.0e)", worst, BF16_TOL);
    free(ref), free(got), free(mst);
    for (int i = 0; i < NBUF; i++) free(d[i]), free(bd[i]), free(bb[i]);
    free(bd), free(bb), free(wd), free(wb);
}

static void test_accumulate(void)
{
    const pt_ops *Bt = &pt_cpu_ops_bf16;
    double *d[NBUF];
    int32_t tok[N], tgt[N];
    for (int i = 0; i < NBUF; i++) d[i] = dalloc(buf[i].n);
    make_inputs(d, tok, tgt);
    void **b0 = load(Bt, d);
    void *w = xcalloc(CWORK_ELEMS, sizeof(float));
    run_all(Bt, b0, w, tok, tgt);
    /* prefills of each output's size: random values times its rms at 0 */
    double *out0[NBUF] = {0};
    for (int i = NINPUT; i < NBUF; i++) {
        out0[i] = readback(Bt, b0[i], i);
        const double rms = sqrt(dot(out0[i], out0[i], buf[i].n) / (double)buf[i].n);
        for (size_t j = 0; j < buf[i].n; j++) d[i][j] = as_stored(pt_rng_normal(&rng) * rms, buf[i].role);
    }
    void **bp = load(Bt, d);
    run_all(Bt, bp, w, tok, tgt);
    int ok = 1, n_acc = 0, n_write = 0;
    for (int i = NINPUT; i < NBUF; i++) {
        if (i == O_EGO || i == O_EAUX) continue; /* beta 1: the prefill enters the GELU */
        double *outp = readback(Bt, bp[i], i);
        const int add = accumulates(i);
        double e = 0, s = 0;
        for (size_t j = 0; j < buf[i].n; j++) {
            const double want = add ? d[i][j] + out0[i][j] : out0[i][j];
            e += (outp[j] - want) * (outp[j] - want);
            s += want * want + (add ? d[i][j] * d[i][j] : 0);
        }
        /* a bf16 store rounds the sum once (2^-8 relative); fp32 ones ~1e-7 */
        const double r = s > 0 ? sqrt(e / s) : sqrt(e);
        if (!(r <= (buf[i].role == ACT ? 0x1p-7 : 1e-5))) {
            ok = 0;
            tap_diag("%s %s: |out(P) - %s| / |...| = %.2e", buf[i].name, add ? "+=" : "=", add ? "(P + out(0))" : "out(0)",
                     r);
        }
        add ? n_acc++ : n_write++;
        free(outp);
    }
    tap_ok(ok, "bf16 accumulate contract: %d outputs add to a prefill of their size, %d documented writes ignore it",
           n_acc, n_write);
    for (int i = 0; i < NBUF; i++) free(d[i]), free(b0[i]), free(bp[i]), free(out0[i]);
    free(b0), free(bp), free(w);
}

static void test_threads(void)
{
#ifdef _OPENMP
    const pt_ops *Bt = &pt_cpu_ops_bf16;
    const pt_backend *be = pt_backend_get("cpu");
    double *d[NBUF];
    int32_t tok[N], tgt[N];
    for (int i = 0; i < NBUF; i++) d[i] = dalloc(buf[i].n);
    make_inputs(d, tok, tgt);
    void **b1 = load(Bt, d), **b2 = load(Bt, d);
    void *w = xcalloc(CWORK_ELEMS, sizeof(float));
    be->set_threads(1);
    run_all(Bt, b1, w, tok, tgt);
    be->set_threads(2);
    run_all(Bt, b2, w, tok, tgt);
    be->set_threads(1);
    double worst = 0;
    const char *wname = "none";
    for (int i = NINPUT; i < NBUF; i++) {
        double *x = readback(Bt, b1[i], i), *y = readback(Bt, b2[i], i);
        const double e = relnorm(y, x, buf[i].n);
        if (!(e <= worst)) worst = e, wname = buf[i].name;
        free(x), free(y);
    }
    /* bit for bit where ptrain's GEMM grid runs the bf16 GEMMs (sgemm on
     * converted tiles); oneDNN's and OpenBLAS's sbgemm thread themselves */
    const double tol = pt_gemm_bf16_impl() == PT_GEMM_BF16_SGEMM ? 0.0 : 1e-6;
    tap_ok(worst <= tol, "2 OpenMP threads give the 1-thread bf16 results (worst %.1e in %s, bound %.0e: bf16 GEMM %s)",
           worst, wname, tol, pt_gemm_bf16_impl_name(pt_gemm_bf16_impl()));
    for (int i = 0; i < NBUF; i++) free(d[i]), free(b1[i]), free(b2[i]);
    free(b1), free(b2), free(w);
#else
    tap_diag("built without OpenMP: thread comparison not run");
#endif
}

int main(void)
{
    pt_rng_seed(&rng, test_seed(), 0);
    test_table();
    test_convert();
    test_against_f64();
    test_accumulate();
    test_threads();
    return tap_done();
}
