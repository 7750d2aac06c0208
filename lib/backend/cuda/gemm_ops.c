/* SPDX-License-Identifier: MIT */
/* The gemm family (ops.h PT_FAM_GEMM) of the CUDA backend: the entries
 * that are cuBLASLt calls (matmul_fwd/bwd through gemm.c's plans,
 * gemm_batched through pt_cuda_gemm) or the epilogue kernels of
 * gemm_epi.cu on their own, and the family's fill. */
#include "config.h"
#include "backend/cuda/cuda_priv.h"
#include "backend/cuda/gemm.h"
#include "backend/cuda/ops_cuda.h"
#include "backend/ops.h"
#include "core/core.h"

/* ---- the cuBLASLt entries ------------------------------------------------------------------------ */

static void matmul_fwd(int act, void *out, void *aux, const void *inp, const void *w, const void *bias, double beta,
                       int N, int C, int OC, int epi)
{
    pt_cuda_op_record(pt_cuda_matmul_fwd(act, out, aux, inp, w, bias, (float)beta, N, C, OC, epi), "matmul_fwd");
}

static void matmul_bwd(int act, void *dinp, void *dw, void *dbias, const void *dout, const void *inp, const void *w,
                       int N, int C, int OC, int epi, const void *aux, void *dbias_aux)
{
    pt_cuda_op_record(pt_cuda_matmul_bwd(act, dinp, (float *)dw, (float *)dbias, dout, inp, w, N, C, OC, epi, aux,
                                         (float *)dbias_aux),
                      "matmul_bwd");
}

static void epilogue_fwd(int act, void *out, void *aux, const void *bias, int N, int OC, int epi)
{
    if (epi != PT_EPI_DEFAULT && epi != PT_EPI_GELU) {
        pt_cuda_op_record(pt_fail(PT_EINVAL, "epi %d is not valid (valid: %d default, %d GELU)", epi, PT_EPI_DEFAULT,
                                  PT_EPI_GELU),
                          "epilogue_fwd");
        return;
    }
    if (epi == PT_EPI_DEFAULT && !bias) return;
    pt_cuda_op_record(pt_cuda_epi_fwd(act, out, epi == PT_EPI_GELU ? aux : NULL, bias, N, OC, epi == PT_EPI_GELU,
                                      pt_cuda_stream_compute()),
                      "epilogue_fwd");
}

static void epilogue_bwd(int act, void *d, void *dbias, const void *aux, int N, int OC)
{
    pt_cuda_op_record(pt_cuda_epi_dgelu(act, d, (float *)dbias, aux, N, OC, pt_cuda_stream_compute()), "epilogue_bwd");
}

#define PT_CUDA_GEMM_ENTRIES(S, ELEM)                                                                                 \
    void pt_cuda_matmul_fwd_##S(void *out, void *aux, const void *inp, const void *w, const void *bias, double beta, \
                                int N, int C, int OC, int epi)                                                       \
    {                                                                                                                \
        matmul_fwd(ELEM, out, aux, inp, w, bias, beta, N, C, OC, epi);                                               \
    }                                                                                                                \
    void pt_cuda_matmul_bwd_##S(void *dinp, void *dw, void *dbias, const void *dout, const void *inp, const void *w, \
                                int N, int C, int OC, int epi, const void *aux, void *dbias_aux)                     \
    {                                                                                                                \
        matmul_bwd(ELEM, dinp, dw, dbias, dout, inp, w, N, C, OC, epi, aux, dbias_aux);                              \
    }                                                                                                                \
    void pt_cuda_epilogue_fwd_##S(void *out, void *aux, const void *bias, int N, int OC, int epi)                    \
    {                                                                                                                \
        epilogue_fwd(ELEM, out, aux, bias, N, OC, epi);                                                              \
    }                                                                                                                \
    void pt_cuda_epilogue_bwd_##S(void *d, void *dbias, const void *aux, int N, int OC)                              \
    {                                                                                                                \
        epilogue_bwd(ELEM, d, dbias, aux, N, OC);                                                                    \
    }
PT_CUDA_GEMM_ENTRIES(f32, PT_GEMM_F32)
PT_CUDA_GEMM_ENTRIES(bf16, PT_GEMM_BF16)

void pt_cuda_gemm_batched(int ta, int tb, int M, int N, int K, double alpha, const void *A, int lda, int64_t sA,
                          const void *B, int ldb, int64_t sB, double beta, void *C, int ldc, int64_t sC, int batch)
{
    pt_cuda_op_record(pt_cuda_gemm(ta, tb, M, N, K, (float)alpha, A, lda, sA, B, ldb, sB, (float)beta, C, ldc, sC,
                                   batch, PT_GEMM_F32, PT_GEMM_F32),
                      "gemm_batched");
}

int pt_cuda_fill_gemm(pt_ops *o, const pt_prec_policy *p)
{
    PT_CUDA_SET_ACT(o, p, matmul_fwd);
    PT_CUDA_SET_ACT(o, p, matmul_bwd);
    PT_CUDA_SET_ACT(o, p, epilogue_fwd);
    PT_CUDA_SET_ACT(o, p, epilogue_bwd);
    PT_CUDA_SET_ONE(o, gemm_batched);
    return PT_OK;
}
