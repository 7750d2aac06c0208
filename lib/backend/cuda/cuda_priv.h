/* SPDX-License-Identifier: MIT */
/* Inside the CUDA backend (lib/backend/cuda, lib/comm's NCCL path): the
 * CUDA types behind cuda.h, the one-line error helpers and the epilogue
 * kernels' launchers.  Needs the CUDA headers (CUDA_CPPFLAGS); C and C++
 * (nvcc) alike. */
#ifndef PTRAIN_CUDA_PRIV_H
#define PTRAIN_CUDA_PRIV_H
#include "backend/cuda/cuda.h"
#include "backend/cuda/gemm_plan.h"

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The one-line error helpers (context.c).  pt_fail for a CUDA runtime error: "CALL: <cudaGetErrorString>
 * (<cudaGetErrorName>)"; PT_ENOMEM for cudaErrorMemoryAllocation,
 * PT_EUNSUPP for no device / no driver, else PT_EIO.  Clears the runtime's
 * last (non-sticky) error.  CALL is a printf format (the call as written,
 * with its sizes). */
int pt_cuda_fail(cudaError_t e, const char *call, ...) __attribute__((format(printf, 2, 3)));
/* pt_fail for a cuBLAS / cuBLASLt status: "CALL: <cublasLtGetStatusString>
 * (<cublasLtGetStatusName>)"; PT_ENOMEM for CUBLAS_STATUS_ALLOC_FAILED,
 * PT_EUNSUPP for CUBLAS_STATUS_NOT_SUPPORTED, else PT_EIO. */
int pt_cublas_fail(cublasStatus_t s, const char *call, ...) __attribute__((format(printf, 2, 3)));
/* pt_fail for a cuDNN status (cudnnStatus_t as int, so this header needs
 * no cudnn.h): "CALL: <cudnnGetErrorString> (cuDNN status N)"; PT_ENOMEM
 * for the host/device allocation failures, PT_EUNSUPP for the
 * CUDNN_STATUS_NOT_SUPPORTED* codes, else PT_EIO.  Only in builds with
 * cuDNN (HAVE_CUDNN). */
int pt_cudnn_fail(int status, const char *call, ...) __attribute__((format(printf, 2, 3)));

/* `return` the pt_fail code when a call fails, naming the call as written. */
#define PT_CUDA_TRY(call)                                                  \
    do {                                                                   \
        cudaError_t pt_e_ = (call);                                        \
        if (pt_e_ != cudaSuccess) return pt_cuda_fail(pt_e_, "%s", #call); \
    } while (0)
#define PT_CUBLAS_TRY(call)                                                          \
    do {                                                                             \
        cublasStatus_t pt_s_ = (call);                                               \
        if (pt_s_ != CUBLAS_STATUS_SUCCESS) return pt_cublas_fail(pt_s_, "%s", #call); \
    } while (0)

/* The process's two streams (context.c; created by pt_cuda_init; NULL,
 * the legacy stream, before it). */
cudaStream_t pt_cuda_stream_compute(void);
cudaStream_t pt_cuda_stream_comm(void);
/* pt_cuda_init's part (context.c): create the two non-blocking streams on
 * the current device dev (the communication stream at the highest
 * priority, the compute stream at the lowest); PT_OK, or pt_cuda_fail's
 * code with nothing left created.  pt_cuda_streams_destroy: destroy them
 * (pt_cuda_shutdown; none: nothing). */
int pt_cuda_streams_create(int dev);
void pt_cuda_streams_destroy(void);
/* The device's properties (pt_cuda_init), NULL before. */
const struct cudaDeviceProp *pt_cuda_props(void);

/* lib/backend/cuda/gemm.c: the cuBLASLt handle and its workspace, created
 * by pt_cuda_init and released by pt_cuda_shutdown. */
int pt_cuda_gemm_init(void);
void pt_cuda_gemm_shutdown(void);

/* A plan's cuBLASLt descriptors (gemm.c): the matmul descriptor
 * (compute type fp32 or TF32, scale fp32, transposes, epilogue, bias type,
 * aux leading dimension) and the layouts of A, B and C = D.  Built on the
 * host alone (cuBLASLt needs no device for descriptors), so the tests
 * read them back on the CPU. */
typedef struct pt_gemm_lt {
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t a, b, d;
} pt_gemm_lt;
int pt_gemm_lt_build(const pt_gemm_plan *p, pt_gemm_lt *lt);
void pt_gemm_lt_free(pt_gemm_lt *lt);
/* CUDA_R_32F / CUDA_R_16BF for PT_GEMM_F32 / PT_GEMM_BF16 */
cudaDataType_t pt_gemm_cuda_type(int elem);
/* the cublasLtEpilogue_t of an enum pt_lt_epi */
cublasLtEpilogue_t pt_gemm_lt_epilogue(int lt_epi);

/* lib/backend/cuda/gemm_epi.cu: the GEMM epilogues as kernels, for the
 * shapes cuBLASLt cannot fuse (gemm_plan.h says which) and for the bias
 * gradients cuBLASLt writes where ptrain accumulates.  elem: 0 fp32, 1
 * bf16 (gemm_plan.h's PT_GEMM_F32 / PT_GEMM_BF16), the type of every
 * tensor argument except dbias, which is fp32.  Row-major, as ops.h:
 *   epi_fwd:     out [N, OC] = epi(out + bias) in place; gelu: aux = out +
 *                bias first (aux NULL: not kept); bias NULL: none
 *   epi_dgelu:   d [N, C] *= GELU'(aux); dbias [C] += column sums of the
 *                result (NULL: skipped)
 *   colsum_add:  dbias [OC] += column sums of x [N, OC]
 *   add_f32:     dst [n] (fp32) += src [n] (elem)
 * Launched on `stream`; the launch error (cudaGetLastError) is returned
 * through pt_cuda_fail.  Column sums: each block owns 32 columns and sums
 * them over every row in a fixed order (a tree in shared memory), so the
 * result does not depend on the launch and needs no atomics.  GELU is the
 * tanh form (Hendrycks & Gimpel 2016), as the CPU's. */
int pt_cuda_epi_fwd(int elem, void *out, void *aux, const void *bias, int N, int OC, int gelu, cudaStream_t stream);
int pt_cuda_epi_dgelu(int elem, void *d, float *dbias, const void *aux, int N, int C, cudaStream_t stream);
int pt_cuda_colsum_add(int elem, float *dbias, const void *x, int N, int OC, cudaStream_t stream);
int pt_cuda_add_f32(float *dst, int elem, const void *src, size_t n, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif
