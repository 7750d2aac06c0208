/* SPDX-License-Identifier: MIT */
/* The CUDA backend's GEMM layer (gemm.h): cuBLASLt matmuls with fused
 * epilogues, descriptors and algorithms cached per shape.  The rules
 * (shapes, transposes, epilogue choice, the key) are gemm_plan.c's; this
 * file only speaks cuBLASLt.  cuBLASLt's API: NVIDIA cuBLAS documentation,
 * "Using the cuBLASLt API" (cublasLtMatmul, cublasLtMatmulAlgoGetHeuristic,
 * cublasLtMatmulDescAttributes_t); llm.c's matmul_cublaslt is the same use. */
#include "config.h"
#include "backend/cuda/cuda_priv.h"
#include "backend/cuda/gemm.h"
#include "backend/cuda/gemm_plan.h"
#include "backend/ops.h"
#include "core/core.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One cached shape: the plan as it runs (unfused when cuBLASLt had no
 * algorithm for its epilogue), its descriptors and the heuristic's pick. */
typedef struct entry {
    int used;
    pt_gemm_key key;
    pt_gemm_plan plan;
    pt_gemm_lt lt;
    cublasLtMatmulAlgo_t algo;
} entry;

static struct {
    cublasLtHandle_t handle;
    void *workspace;
    float *scratch; /* cuBLASLt's bias gradients, added to ptrain's accumulators after */
    size_t scratch_bytes;
    entry *tab;     /* open addressing over pt_gemm_key_hash, at most half full */
    size_t cap, n;
    int tf32, nofuse;
    pt_cuda_gemm_stats st;
} L;

/* ---- descriptors (no device needed) --------------------------------------------------- */

cudaDataType_t pt_gemm_cuda_type(int elem) { return elem == PT_GEMM_BF16 ? CUDA_R_16BF : CUDA_R_32F; }

cublasLtEpilogue_t pt_gemm_lt_epilogue(int lt_epi)
{
    switch (lt_epi) {
    case PT_LT_BIAS: return CUBLASLT_EPILOGUE_BIAS;
    case PT_LT_GELU: return CUBLASLT_EPILOGUE_GELU;
    case PT_LT_GELU_BIAS: return CUBLASLT_EPILOGUE_GELU_BIAS;
    case PT_LT_GELU_AUX: return CUBLASLT_EPILOGUE_GELU_AUX;
    case PT_LT_GELU_AUX_BIAS: return CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    case PT_LT_DGELU: return CUBLASLT_EPILOGUE_DGELU;
    case PT_LT_DGELU_BGRAD: return CUBLASLT_EPILOGUE_DGELU_BGRAD;
    case PT_LT_BGRADB: return CUBLASLT_EPILOGUE_BGRADB;
    default: return CUBLASLT_EPILOGUE_DEFAULT;
    }
}

void pt_gemm_lt_free(pt_gemm_lt *lt)
{
    if (lt->op) cublasLtMatmulDescDestroy(lt->op);
    if (lt->a) cublasLtMatrixLayoutDestroy(lt->a);
    if (lt->b) cublasLtMatrixLayoutDestroy(lt->b);
    if (lt->d) cublasLtMatrixLayoutDestroy(lt->d);
    memset(lt, 0, sizeof *lt);
}

#define SET(attr, val)                                                                            \
    do {                                                                                          \
        s = cublasLtMatmulDescSetAttribute(lt->op, attr, &(val), sizeof(val));                    \
        if (s != CUBLAS_STATUS_SUCCESS) {                                                         \
            rc = pt_cublas_fail(s, "cublasLtMatmulDescSetAttribute(%s) for %s", #attr, shape);    \
            goto fail;                                                                            \
        }                                                                                         \
    } while (0)

int pt_gemm_lt_build(const pt_gemm_plan *p, pt_gemm_lt *lt)
{
    memset(lt, 0, sizeof *lt);
    char shape[160];
    snprintf(shape, sizeof shape, "m=%lld n=%lld k=%lld epilogue %s", (long long)p->m, (long long)p->n,
             (long long)p->k, pt_lt_epi_name(p->lt_epi));
    int rc = PT_OK;
    cublasComputeType_t ct = p->tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    cublasStatus_t s = cublasLtMatmulDescCreate(&lt->op, ct, CUDA_R_32F);
    if (s != CUBLAS_STATUS_SUCCESS) {
        rc = pt_cublas_fail(s, "cublasLtMatmulDescCreate for %s", shape);
        goto fail;
    }
    int32_t ta = p->transa ? CUBLAS_OP_T : CUBLAS_OP_N, tb = p->transb ? CUBLAS_OP_T : CUBLAS_OP_N;
    uint32_t epi = (uint32_t)pt_gemm_lt_epilogue(p->lt_epi);
    SET(CUBLASLT_MATMUL_DESC_TRANSA, ta);
    SET(CUBLASLT_MATMUL_DESC_TRANSB, tb);
    SET(CUBLASLT_MATMUL_DESC_EPILOGUE, epi);
    if (p->bias_elem >= 0) {
        int32_t bt = (int32_t)pt_gemm_cuda_type(p->bias_elem);
        SET(CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, bt);
    }
    if (p->aux_ld) {
        int64_t ld = p->aux_ld;
        SET(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, ld);
    }
    s = cublasLtMatrixLayoutCreate(&lt->a, pt_gemm_cuda_type(p->ab_elem), (uint64_t)p->a_rows, (uint64_t)p->a_cols,
                                   p->lda);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatrixLayoutCreate(&lt->b, pt_gemm_cuda_type(p->ab_elem), (uint64_t)p->b_rows,
                                       (uint64_t)p->b_cols, p->ldb);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatrixLayoutCreate(&lt->d, pt_gemm_cuda_type(p->d_elem), (uint64_t)p->m, (uint64_t)p->n, p->ldd);
    if (s != CUBLAS_STATUS_SUCCESS) {
        rc = pt_cublas_fail(s, "cublasLtMatrixLayoutCreate for %s", shape);
        goto fail;
    }
    return PT_OK;
fail:
    pt_gemm_lt_free(lt);
    return rc;
}
#undef SET

/* ---- handle, workspace, scratch ---------------------------------------------------------- */

int pt_cuda_gemm_init(void)
{
    if (L.handle) return PT_OK;
    PT_CUBLAS_TRY(cublasLtCreate(&L.handle));
    cudaError_t e = cudaMalloc(&L.workspace, PT_CUDA_GEMM_WORKSPACE);
    if (e != cudaSuccess) {
        cublasLtDestroy(L.handle);
        L.handle = NULL;
        return pt_cuda_fail(e, "cudaMalloc(%zu bytes) (cuBLASLt's workspace)", PT_CUDA_GEMM_WORKSPACE);
    }
    L.st.workspace = PT_CUDA_GEMM_WORKSPACE;
    return PT_OK;
}

static void cache_clear(void)
{
    for (size_t i = 0; i < L.cap; i++)
        if (L.tab[i].used) pt_gemm_lt_free(&L.tab[i].lt);
    free(L.tab);
    L.tab = NULL;
    L.cap = L.n = 0;
    L.st.entries = 0;
}

static void gcache_clear(void);

void pt_cuda_gemm_shutdown(void)
{
    cache_clear();
    gcache_clear();
    if (L.scratch) cudaFree(L.scratch);
    if (L.workspace) cudaFree(L.workspace);
    if (L.handle) cublasLtDestroy(L.handle);
    int tf32 = L.tf32, nofuse = L.nofuse;
    memset(&L, 0, sizeof L);
    L.tf32 = tf32, L.nofuse = nofuse;
}

void pt_cuda_gemm_set_tf32(int on) { L.tf32 = !!on; }

void pt_cuda_gemm_set_fusion(int on)
{
    if (L.nofuse == !on) return;
    L.nofuse = !on;
    cache_clear();
}

void pt_cuda_gemm_get_stats(pt_cuda_gemm_stats *s) { *s = L.st; }

static int need_scratch(size_t bytes)
{
    if (bytes <= L.scratch_bytes) return PT_OK;
    size_t want = bytes < ((size_t)64 << 10) ? (size_t)64 << 10 : bytes;
    if (L.scratch) {
        /* earlier matmuls may still read it */
        cudaError_t e = cudaStreamSynchronize(pt_cuda_stream_compute());
        if (e != cudaSuccess) return pt_cuda_fail(e, "cudaStreamSynchronize (before growing the bias-gradient scratch)");
        cudaFree(L.scratch);
        L.scratch = NULL;
        L.scratch_bytes = 0;
    }
    cudaError_t e = cudaMalloc((void **)&L.scratch, want);
    if (e != cudaSuccess) return pt_cuda_fail(e, "cudaMalloc(%zu bytes) (the bias-gradient scratch)", want);
    L.scratch_bytes = want;
    L.st.scratch = want;
    return PT_OK;
}

/* ---- the cache ------------------------------------------------------------------------------ */

static entry *lookup(const pt_gemm_key *k, uint64_t h)
{
    if (!L.cap) return NULL;
    for (size_t i = h & (L.cap - 1);; i = (i + 1) & (L.cap - 1)) {
        if (!L.tab[i].used) return NULL;
        if (memcmp(&L.tab[i].key, k, sizeof *k) == 0) return &L.tab[i];
    }
}

/* a free slot for k (not present), growing the table; NULL when out of memory */
static entry *slot_for(const pt_gemm_key *k, uint64_t h)
{
    if ((L.n + 1) * 2 > L.cap) {
        size_t ncap = L.cap ? L.cap * 2 : 64;
        entry *nt = calloc(ncap, sizeof *nt);
        if (!nt) return NULL;
        for (size_t i = 0; i < L.cap; i++) {
            if (!L.tab[i].used) continue;
            size_t j = pt_gemm_key_hash(&L.tab[i].key) & (ncap - 1);
            while (nt[j].used) j = (j + 1) & (ncap - 1);
            nt[j] = L.tab[i];
        }
        free(L.tab);
        L.tab = nt;
        L.cap = ncap;
    }
    size_t i = h & (L.cap - 1);
    while (L.tab[i].used) i = (i + 1) & (L.cap - 1);
    L.tab[i].key = *k;
    return &L.tab[i];
}

/* The heuristic's best algorithm for descriptors lt whose operands are
 * aligned al[4] bytes (A, B, C, D: cuBLASLt picks kernels by it), within
 * the workspace (cuBLAS documentation, cublasLtMatmulAlgoGetHeuristic).
 * PT_OK; pt_cublas_fail naming what (the problem) when the preference
 * cannot be set up; PT_EUNSUPP with *why the heuristic's status string
 * ("no result" when it found none) and no message, for the caller to say
 * which problem has no algorithm. */
static int best_algo(const pt_gemm_lt *lt, const uint32_t al[4], const char *what, cublasLtMatmulAlgo_t *algo,
                     const char **why)
{
    static const cublasLtMatmulPreferenceAttributes_t which[4] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    const uint64_t ws = PT_CUDA_GEMM_WORKSPACE;
    cublasLtMatmulPreference_t pref = NULL;
    cublasStatus_t s = cublasLtMatmulPreferenceCreate(&pref);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    for (int i = 0; i < 4 && s == CUBLAS_STATUS_SUCCESS; i++)
        s = cublasLtMatmulPreferenceSetAttribute(pref, which[i], &al[i], sizeof al[i]);
    if (s != CUBLAS_STATUS_SUCCESS) {
        if (pref) cublasLtMatmulPreferenceDestroy(pref);
        return pt_cublas_fail(s, "setting up cuBLASLt's heuristic (%s)", what);
    }
    cublasLtMatmulHeuristicResult_t res;
    int found = 0;
    s = cublasLtMatmulAlgoGetHeuristic(L.handle, lt->op, lt->a, lt->b, lt->d, lt->d, pref, 1, &res, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    if (s != CUBLAS_STATUS_SUCCESS || found < 1) {
        *why = s != CUBLAS_STATUS_SUCCESS ? cublasLtGetStatusString(s) : "no result";
        return PT_EUNSUPP;
    }
    *algo = res.algo;
    return PT_OK;
}

/* Descriptors of q and the heuristic's best algorithm for these pointers'
 * alignment.  PT_EUNSUPP (message set) when cuBLASLt has no algorithm. */
static int build(const pt_gemm_plan *q, const pt_gemm_key *k, const void *bias, const void *aux, pt_gemm_lt *lt,
                 cublasLtMatmulAlgo_t *algo)
{
    int rc = pt_gemm_lt_build(q, lt);
    if (rc != PT_OK) return rc;
    cublasStatus_t s = CUBLAS_STATUS_SUCCESS;
    /* the heuristic reads the pointers' alignment from these */
    if (q->bias_elem >= 0)
        s = cublasLtMatmulDescSetAttribute(lt->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias);
    if (s == CUBLAS_STATUS_SUCCESS && q->aux_ld)
        s = cublasLtMatmulDescSetAttribute(lt->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof aux);
    char what[96];
    snprintf(what, sizeof what, "m=%lld n=%lld k=%lld", (long long)q->m, (long long)q->n, (long long)q->k);
    if (s != CUBLAS_STATUS_SUCCESS) {
        pt_gemm_lt_free(lt);
        return pt_cublas_fail(s, "setting up cuBLASLt's heuristic (%s)", what);
    }
    const uint32_t al[4] = {(uint32_t)k->align_a, (uint32_t)k->align_b, (uint32_t)k->align_d, (uint32_t)k->align_d};
    const char *why = NULL;
    rc = best_algo(lt, al, what, algo, &why);
    if (rc == PT_EUNSUPP && why)
        pt_fail(PT_EUNSUPP,
                "cuBLASLt has no algorithm for m=%lld n=%lld k=%lld, %s inputs, %s output, epilogue %s%s "
                "(cublasLtMatmulAlgoGetHeuristic: %s)",
                (long long)q->m, (long long)q->n, (long long)q->k, q->ab_elem == PT_GEMM_BF16 ? "bf16" : "fp32",
                q->d_elem == PT_GEMM_BF16 ? "bf16" : "fp32", pt_lt_epi_name(q->lt_epi), q->tf32 ? ", TF32" : "", why);
    if (rc != PT_OK) pt_gemm_lt_free(lt);
    return rc;
}

/* ---- one matmul --------------------------------------------------------------------------- */

/* Run plan p: A, B, D as the plan's roles say; bias the forward's bias
 * vector; aux the aux matrix; acc the fp32 bias-gradient accumulator
 * (DGELU_BGRAD's dbias_aux, BGRADB's dbias); dout the tensor whose column
 * sums make dw's bias gradient when unfused. */
static int run(pt_gemm_plan *p, const void *A, const void *B, void *D, const void *bias, void *aux, float *acc,
               const void *dout)
{
    if (!L.handle) return pt_fail(PT_EUNSUPP, "cuBLASLt matmul before pt_cuda_init (no device selected)");
    if (L.nofuse && p->lt_epi != PT_LT_DEFAULT) pt_gemm_plan_unfuse(p, "fusion turned off (pt_cuda_gemm_set_fusion)");
    if (p->bias_accum) {
        int rc = need_scratch((size_t)p->bias_len * sizeof(float));
        if (rc != PT_OK) return rc;
    }
    const void *bias_ptr = p->bias_accum ? (const void *)L.scratch : bias;
    pt_gemm_key k;
    pt_gemm_key_of(p, A, B, D, bias_ptr, aux, &k);
    uint64_t h = pt_gemm_key_hash(&k);
    entry *e = lookup(&k, h);
    if (!e) {
        pt_gemm_plan q = *p;
        pt_gemm_lt lt;
        cublasLtMatmulAlgo_t algo;
        int rc = build(&q, &k, bias_ptr, aux, &lt, &algo);
        if (rc == PT_EUNSUPP && q.lt_epi != PT_LT_DEFAULT) {
            char why[sizeof q.why];
            snprintf(why, sizeof why, "%s", pt_errmsg());
            pt_gemm_plan_unfuse(&q, "%s", why);
            rc = build(&q, &k, NULL, NULL, &lt, &algo);
        }
        if (rc != PT_OK) return rc;
        e = slot_for(&k, h);
        if (!e) {
            pt_gemm_lt_free(&lt);
            return pt_fail(PT_ENOMEM, "out of host memory for the GEMM cache (%zu shapes)", L.n + 1);
        }
        e->used = 1;
        e->plan = q;
        e->lt = lt;
        e->algo = algo;
        L.n++;
        L.st.entries = L.n;
        L.st.misses++;
        if (!q.fused) snprintf(L.st.last_unfused, sizeof L.st.last_unfused, "%s", q.why);
    }
    const pt_gemm_plan *q = &e->plan;
    cublasStatus_t s = CUBLAS_STATUS_SUCCESS;
    if (q->bias_elem >= 0)
        s = cublasLtMatmulDescSetAttribute(e->lt.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias_ptr, sizeof bias_ptr);
    if (s == CUBLAS_STATUS_SUCCESS && q->aux_ld)
        s = cublasLtMatmulDescSetAttribute(e->lt.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof aux);
    if (s != CUBLAS_STATUS_SUCCESS) return pt_cublas_fail(s, "cublasLtMatmulDescSetAttribute(bias/aux pointer)");
    const float alpha = 1.0f, beta = q->beta;
    cudaStream_t st = pt_cuda_stream_compute();
    s = cublasLtMatmul(L.handle, e->lt.op, &alpha, A, e->lt.a, B, e->lt.b, &beta, D, e->lt.d, D, e->lt.d, &e->algo,
                       L.workspace, PT_CUDA_GEMM_WORKSPACE, st);
    if (s != CUBLAS_STATUS_SUCCESS)
        return pt_cublas_fail(s, "cublasLtMatmul(m=%lld n=%lld k=%lld, epilogue %s)", (long long)q->m, (long long)q->n,
                              (long long)q->k, pt_lt_epi_name(q->lt_epi));
    L.st.calls++;
    if (q->fused) {
        L.st.fused += q->lt_epi != PT_LT_DEFAULT;
        /* cuBLASLt wrote the bias gradient; ops.h accumulates it */
        return q->bias_accum ? pt_cuda_add_f32(acc, q->bias_elem, L.scratch, (size_t)q->bias_len, st) : PT_OK;
    }
    L.st.unfused++;
    switch (q->kind) {
    case PT_GEMM_FWD: /* out [N = n, OC = m] */
        return q->has_bias || q->gelu
                   ? pt_cuda_epi_fwd(q->d_elem, D, q->has_aux ? aux : NULL, q->has_bias ? bias : NULL, (int)q->n,
                                     (int)q->m, q->gelu, st)
                   : PT_OK;
    case PT_GEMM_DINP: /* dinp [N = n, C = m] */
        return q->dgelu ? pt_cuda_epi_dgelu(q->d_elem, D, q->has_dbias ? acc : NULL, aux, (int)q->n, (int)q->m, st)
                        : PT_OK;
    default: /* dw: dbias [OC = n] += column sums of dout [N = k, OC] */
        return q->has_dbias ? pt_cuda_colsum_add(q->ab_elem, acc, dout, (int)q->k, (int)q->n, st) : PT_OK;
    }
}

int pt_cuda_matmul_fwd(int act, void *out, void *aux, const void *inp, const void *w, const void *bias, float beta,
                       int N, int C, int OC, int epi)
{
    if (epi != PT_EPI_DEFAULT && epi != PT_EPI_GELU)
        return pt_fail(PT_EINVAL, "matmul_fwd: epi %d is not valid (valid: %d default, %d GELU)", epi, PT_EPI_DEFAULT,
                       PT_EPI_GELU);
    if (!out || !inp || !w) return pt_fail(PT_EINVAL, "matmul_fwd: out, inp and w must not be NULL");
    pt_gemm_plan p;
    int rc = pt_gemm_plan_fwd(&p, act, N, C, OC, bias != NULL, epi == PT_EPI_GELU, aux != NULL, beta, L.tf32);
    return rc != PT_OK ? rc : run(&p, w, inp, out, bias, aux, NULL, NULL);
}

int pt_cuda_matmul_bwd(int act, void *dinp, float *dw, float *dbias, const void *dout, const void *inp, const void *w,
                       int N, int C, int OC, int epi, const void *aux, float *dbias_aux)
{
    if (epi != PT_EPI_DEFAULT && epi != PT_EPI_DGELU)
        return pt_fail(PT_EINVAL, "matmul_bwd: epi %d is not valid (valid: %d default, %d DGELU)", epi, PT_EPI_DEFAULT,
                       PT_EPI_DGELU);
    if (!dout) return pt_fail(PT_EINVAL, "matmul_bwd: dout must not be NULL");
    pt_gemm_plan p;
    int rc = PT_OK;
    if (dw) {
        if (!inp) return pt_fail(PT_EINVAL, "matmul_bwd: dw needs inp");
        rc = pt_gemm_plan_dw(&p, act, N, C, OC, dbias != NULL, L.tf32);
        if (rc == PT_OK) rc = run(&p, inp, dout, dw, NULL, NULL, dbias, dout);
    } else if (dbias) {
        pt_gemm_plan chk; /* the shape's checks, then the column sums alone */
        rc = pt_gemm_plan_dw(&chk, act, N, C, OC, 1, 0);
        if (rc == PT_OK) rc = pt_cuda_colsum_add(act, dbias, dout, N, OC, pt_cuda_stream_compute());
    }
    if (rc != PT_OK || !dinp) return rc;
    if (!w) return pt_fail(PT_EINVAL, "matmul_bwd: dinp needs w");
    rc = pt_gemm_plan_dinp(&p, act, N, C, OC, epi == PT_EPI_DGELU, aux != NULL, epi == PT_EPI_DGELU && dbias_aux,
                           L.tf32);
    return rc != PT_OK ? rc : run(&p, w, dout, dinp, NULL, (void *)(uintptr_t)aux, dbias_aux, NULL);
}

/* ---- the generic GEMM (ops_cuda.h's pt_cuda_gemm) ----------------------------------------------- */

/* One cached call shape of pt_cuda_gemm: every argument but the pointers
 * and the scalars, and the pointers' alignment (all bytes set). */
typedef struct gkey {
    int32_t ta, tb, M, N, K, lda, ldb, ldc, batch, ab_elem, c_elem, tf32, beta_zero;
    int32_t align_a, align_b, align_c;
    int64_t sA, sB, sC;
} gkey;

typedef struct gentry {
    gkey key;
    pt_gemm_lt lt;
    cublasLtMatmulAlgo_t algo;
} gentry;

enum { GCACHE = 64 };
static gentry gcache[GCACHE];
static int gcache_n;

static void gcache_clear(void)
{
    for (int i = 0; i < gcache_n; i++) pt_gemm_lt_free(&gcache[i].lt);
    gcache_n = 0;
}

static int layout(cublasLtMatrixLayout_t *l, int elem, int rows, int cols, int ld, int batch, int64_t stride)
{
    cublasStatus_t s = cublasLtMatrixLayoutCreate(l, pt_gemm_cuda_type(elem), (uint64_t)rows, (uint64_t)cols, ld);
    if (s == CUBLAS_STATUS_SUCCESS && batch > 1) {
        int32_t bc = batch;
        s = cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &bc, sizeof bc);
        if (s == CUBLAS_STATUS_SUCCESS)
            s = cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                                 sizeof stride);
    }
    return s == CUBLAS_STATUS_SUCCESS ? PT_OK : pt_cublas_fail(s, "cublasLtMatrixLayoutCreate(%d x %d, ld %d)", rows,
                                                                cols, ld);
}

/* Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T, and a
 * row-major buffer read column-major is its transpose: so cuBLASLt gets
 * m = N, n = M, the B buffer first (transposed when tb) and the A buffer
 * second (transposed when ta). */
static int gbuild(const gkey *k, gentry *e)
{
    memset(&e->lt, 0, sizeof e->lt);
    cublasComputeType_t ct = k->tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    cublasStatus_t s = cublasLtMatmulDescCreate(&e->lt.op, ct, CUDA_R_32F);
    if (s != CUBLAS_STATUS_SUCCESS) return pt_cublas_fail(s, "cublasLtMatmulDescCreate (gemm %dx%dx%d)", k->M, k->N, k->K);
    int32_t opa = k->tb ? CUBLAS_OP_T : CUBLAS_OP_N, opb = k->ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    s = cublasLtMatmulDescSetAttribute(e->lt.op, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulDescSetAttribute(e->lt.op, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb);
    int rc = s == CUBLAS_STATUS_SUCCESS ? PT_OK : pt_cublas_fail(s, "cublasLtMatmulDescSetAttribute(TRANSA/B)");
    if (rc == PT_OK)
        rc = layout(&e->lt.a, k->ab_elem, k->tb ? k->K : k->N, k->tb ? k->N : k->K, k->ldb, k->batch, k->sB);
    if (rc == PT_OK)
        rc = layout(&e->lt.b, k->ab_elem, k->ta ? k->M : k->K, k->ta ? k->K : k->M, k->lda, k->batch, k->sA);
    if (rc == PT_OK) rc = layout(&e->lt.d, k->c_elem, k->N, k->M, k->ldc, k->batch, k->sC);
    if (rc == PT_OK) {
        const uint32_t al[4] = {(uint32_t)k->align_b, (uint32_t)k->align_a, (uint32_t)k->align_c,
                                (uint32_t)k->align_c};
        const char *why = NULL;
        rc = best_algo(&e->lt, al, "gemm", &e->algo, &why);
        if (rc == PT_EUNSUPP && why)
            pt_fail(PT_EUNSUPP, "cuBLASLt has no algorithm for the gemm M=%d N=%d K=%d ta=%d tb=%d batch %d, %s "
                    "inputs, %s output (cublasLtMatmulAlgoGetHeuristic: %s)", k->M, k->N, k->K, k->ta, k->tb,
                    k->batch, k->ab_elem == PT_GEMM_BF16 ? "bf16" : "fp32",
                    k->c_elem == PT_GEMM_BF16 ? "bf16" : "fp32", why);
    }
    if (rc != PT_OK) pt_gemm_lt_free(&e->lt);
    return rc;
}

int pt_cuda_gemm(int ta, int tb, int M, int N, int K, float alpha, const void *A, int lda, int64_t sA, const void *B,
                 int ldb, int64_t sB, float beta, void *C, int ldc, int64_t sC, int batch, int ab_elem, int c_elem)
{
    if (!L.handle) return pt_fail(PT_EUNSUPP, "cuBLASLt gemm before pt_cuda_init (no device selected)");
    if (M < 0 || N < 0 || K < 0 || batch < 0)
        return pt_fail(PT_EINVAL, "gemm: M=%d N=%d K=%d batch %d is not valid (valid: >= 0)", M, N, K, batch);
    if ((ab_elem != PT_GEMM_F32 && ab_elem != PT_GEMM_BF16) || (c_elem != PT_GEMM_F32 && c_elem != PT_GEMM_BF16))
        return pt_fail(PT_EINVAL, "gemm: element types %d, %d are not valid (valid: %d fp32, %d bf16)", ab_elem, c_elem,
                       PT_GEMM_F32, PT_GEMM_BF16);
    if (!M || !N || !batch) return PT_OK;
    if (lda < (ta ? M : K) || ldb < (tb ? K : N) || ldc < N)
        return pt_fail(PT_EINVAL, "gemm: lda %d, ldb %d, ldc %d too small for M=%d N=%d K=%d ta=%d tb=%d", lda, ldb,
                       ldc, M, N, K, ta, tb);
    if (!K) { /* C = beta C: cuBLASLt needs K >= 1 */
        if (beta == 1.0f) return PT_OK;
        return pt_fail(PT_EINVAL, "gemm: K=0 with beta %g (only beta 1 is a no-op)", (double)beta);
    }
    gkey k;
    memset(&k, 0, sizeof k);
    k.ta = !!ta, k.tb = !!tb, k.M = M, k.N = N, k.K = K, k.lda = lda, k.ldb = ldb, k.ldc = ldc;
    k.batch = batch, k.ab_elem = ab_elem, k.c_elem = c_elem, k.tf32 = L.tf32 && ab_elem == PT_GEMM_F32;
    k.beta_zero = beta == 0.0f;
    k.align_a = pt_gemm_align(A), k.align_b = pt_gemm_align(B), k.align_c = pt_gemm_align(C);
    k.sA = batch > 1 ? sA : 0, k.sB = batch > 1 ? sB : 0, k.sC = batch > 1 ? sC : 0;
    gentry *e = NULL;
    for (int i = 0; i < gcache_n && !e; i++)
        if (!memcmp(&gcache[i].key, &k, sizeof k)) e = &gcache[i];
    if (!e) {
        if (gcache_n == GCACHE) gcache_clear(); /* full: start over (the shapes of one run are few) */
        gentry ne;
        ne.key = k;
        int rc = gbuild(&k, &ne);
        if (rc != PT_OK) return rc;
        gcache[gcache_n] = ne;
        e = &gcache[gcache_n++];
        L.st.misses++;
    }
    cublasStatus_t s = cublasLtMatmul(L.handle, e->lt.op, &alpha, B, e->lt.a, A, e->lt.b, &beta, C, e->lt.d, C,
                                      e->lt.d, &e->algo, L.workspace, PT_CUDA_GEMM_WORKSPACE, pt_cuda_stream_compute());
    if (s != CUBLAS_STATUS_SUCCESS)
        return pt_cublas_fail(s, "cublasLtMatmul(gemm M=%d N=%d K=%d ta=%d tb=%d batch %d)", M, N, K, ta, tb, batch);
    L.st.calls++;
    return PT_OK;
}
