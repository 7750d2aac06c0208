/* The CUDA backend's GEMM layer: ops.h's matmul_fwd and matmul_bwd on
 * device pointers through cuBLASLt (row-major semantics exactly as the CPU
 * table's; gemm_plan.h has the mapping), bf16 in with fp32 accumulation,
 * or fp32 in (TF32 tensor cores optional), the bias / GELU epilogues fused
 * into the GEMM where cuBLASLt has them (BIAS, GELU_AUX_BIAS saving the
 * pre-GELU values, DGELU_BGRAD, BGRADB), else applied by the kernels of
 * gemm_epi.cu after a plain GEMM.  The descriptors and the heuristic's
 * algorithm are cached per shape (gemm_plan.h's key); one workspace of
 * PT_CUDA_GEMM_WORKSPACE bytes is allocated by pt_cuda_init.  Everything
 * runs on the compute stream, asynchronously for the host.
 *
 * No CUDA types here: the kernel work wires these into the ops table.
 * Errors: pt_fail with one line (cuda.h's conventions); PT_EINVAL for a
 * bad shape or argument, PT_EUNSUPP before pt_cuda_init or without the
 * backend. */
#ifndef PTRAIN_CUDA_GEMM_H
#define PTRAIN_CUDA_GEMM_H
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* cuBLASLt's workspace: 32 MiB, what NVIDIA recommends for Hopper
 * (cuBLAS documentation, cublasSetWorkspace) and what llm.c uses. */
#define PT_CUDA_GEMM_WORKSPACE ((size_t)32 << 20)

/* ops.h's matmul_fwd on the device, act the element type of out, aux,
 * inp, w and bias (gemm_plan.h: PT_GEMM_F32 or PT_GEMM_BF16):
 * out [N,OC] = epi(inp [N,C] w[OC,C]^T + beta out + bias [OC]); epi
 * PT_EPI_DEFAULT (0) or PT_EPI_GELU (1), which also writes aux [N,OC] =
 * the pre-GELU values unless aux is NULL; bias NULL: none; beta 0 or 1. */
int pt_cuda_matmul_fwd(int act, void *out, void *aux, const void *inp, const void *w, const void *bias, float beta,
                       int N, int C, int OC, int epi);
/* ops.h's matmul_bwd on the device: dw [OC,C] (fp32) += dout^T inp;
 * dbias [OC] (fp32) += colsum(dout); epi PT_EPI_DEFAULT: dinp += dout w;
 * PT_EPI_DGELU (2): dinp = (dout w) * GELU'(aux) written, aux [N,C], and
 * dbias_aux [C] (fp32) += colsum of that dinp.  dinp, dout, inp, w and aux
 * are of type act; NULL dinp / dw / dbias / dbias_aux skip. */
int pt_cuda_matmul_bwd(int act, void *dinp, float *dw, float *dbias, const void *dout, const void *inp, const void *w,
                       int N, int C, int OC, int epi, const void *aux, float *dbias_aux);

/* fp32 GEMMs on TF32 tensor cores (1) or in full fp32 (0, the default:
 * what the CPU's sgemm computes). */
void pt_cuda_gemm_set_tf32(int on);
/* 0: never fuse the epilogue (the kernels do it after a plain GEMM), for
 * the tests to hold both paths against the CPU; 1 (default): fuse when
 * cuBLASLt can.  Changing it empties the cache. */
void pt_cuda_gemm_set_fusion(int on);

typedef struct pt_cuda_gemm_stats {
    uint64_t calls;        /* cuBLASLt matmuls run */
    uint64_t fused;        /* of them, with the epilogue fused */
    uint64_t unfused;      /* of them, followed by the epilogue kernels */
    uint64_t misses;       /* cache misses (descriptors built, heuristic asked) */
    size_t entries;        /* cached shapes */
    size_t workspace;      /* bytes of cuBLASLt's workspace */
    size_t scratch;        /* bytes of the bias-gradient scratch vector */
    char last_unfused[160]; /* why the last unfused plan was not fused ("" if none) */
} pt_cuda_gemm_stats;
void pt_cuda_gemm_get_stats(pt_cuda_gemm_stats *s);

#ifdef __cplusplus
}
#endif
#endif
