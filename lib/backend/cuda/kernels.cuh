/* SPDX-License-Identifier: MIT */
/* What the CUDA op families' kernels share (embed.cu, eltwise.cu,
 * layernorm.cu, xent.cu, adamw.cu, mem.cu; attention.cu's causal softmax
 * rows): bf16 loads and stores in fp32 registers, the launch shape of the
 * grid-stride loops, warp and block reductions with an order set by the
 * shape alone, and the argument checks that record a refused call for the
 * table (pt_cuda_op_record).  Inline, in namespace ptk, so each family file
 * takes what it uses. */
#ifndef PTRAIN_CUDA_KERNELS_CUH
#define PTRAIN_CUDA_KERNELS_CUH
#include "backend/cuda/cuda_priv.h"
#include "backend/cuda/ops_cuda.h"

#include <cuda_bf16.h>
#include <initializer_list>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>

namespace ptk {

typedef __nv_bfloat16 bf16;

__device__ __forceinline__ float load(const float *p, size_t i) { return p[i]; }
__device__ __forceinline__ float load(const bf16 *p, size_t i) { return __bfloat162float(p[i]); }
__device__ __forceinline__ void store(float *p, size_t i, float v) { p[i] = v; }
__device__ __forceinline__ void store(bf16 *p, size_t i, float v) { p[i] = __float2bfloat16_rn(v); }

constexpr float GELU_K = 0.7978845608028654f; /* sqrt(2/pi) */
constexpr unsigned THREADS = 256;
constexpr unsigned FULL = 0xffffffffu;

/* blocks for a grid-stride loop over n elements */
inline unsigned blocks_for(size_t n)
{
    size_t b = (n + THREADS - 1) / THREADS;
    return (unsigned)(b < 65536 ? (b ? b : 1) : 65536);
}

#define GRID_STRIDE(i, n) \
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (size_t)gridDim.x * blockDim.x)

/* ---- argument checks and error recording ---------------------------------------------------------- */

/* a bad argument: one line through pt_fail, recorded for the table */
inline __attribute__((format(printf, 2, 3))) void refuse(const char *op, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    pt_cuda_op_record(pt_fail(PT_EINVAL, "%s", msg), op);
}

/* a runtime call's failure, recorded; true when it failed */
inline bool failed(cudaError_t e, const char *op, const char *call)
{
    if (e == cudaSuccess) return false;
    pt_cuda_op_record(pt_cuda_fail(e, "%s", call), op);
    return true;
}

inline bool dtype_ok(const char *op, pt_dtype t)
{
    if (t == PT_F32 || t == PT_BF16) return true;
    refuse(op, "element type %d (%s) is not valid here (valid: fp32, bf16)", (int)t, pt_dtype_name(t));
    return false;
}

/* sizes that may not be negative */
inline bool sizes_ok(const char *op, int a, const char *an, int b, const char *bn)
{
    if (a >= 0 && b >= 0) return true;
    refuse(op, "%s=%d, %s=%d: sizes must be >= 0", an, a, bn, b);
    return false;
}

/* tensors that must be given (count pointers, their names in `names`) */
inline bool given(const char *op, const char *names, std::initializer_list<const void *> ptrs)
{
    for (const void *p : ptrs)
        if (!p) {
            refuse(op, "a NULL tensor among (%s)", names);
            return false;
        }
    return true;
}

/* host memory (pageable, pinned or registered): what cudaMemcpyDefault
 * copies but a kernel must not read */
inline bool on_host(const void *p)
{
    cudaPointerAttributes a;
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        (void)cudaGetLastError(); /* not a pointer CUDA knows: host */
        return true;
    }
    return a.type != cudaMemoryTypeDevice && a.type != cudaMemoryTypeManaged;
}
/* ---- warp and block reductions (a warp per row, a block per row) ---------------------------------------- */
constexpr int WARPS = THREADS / 32;
__device__ __forceinline__ float warp_sum(float v)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ double warp_sum(double v)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float fmax_cpu(float a, float b) { return b > a ? b : a; } /* the CPU's l > m ? l : m */

__device__ __forceinline__ float warp_max(float v)
{
    for (int o = 16; o > 0; o >>= 1) v = fmax_cpu(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* sum / max over a THREADS block; every thread gets the result; sh [WARPS + 1] */
__device__ inline float block_sum(float v, float *sh)
{
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    v = warp_sum(v);
    if (lane == 0) sh[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = warp_sum(lane < WARPS ? sh[lane] : 0.0f);
        if (lane == 0) sh[WARPS] = v;
    }
    __syncthreads();
    v = sh[WARPS];
    __syncthreads();
    return v;
}

__device__ inline float block_max(float v, float *sh)
{
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    v = warp_max(v);
    if (lane == 0) sh[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = warp_max(lane < WARPS ? sh[lane] : -INFINITY);
        if (lane == 0) sh[WARPS] = v;
    }
    __syncthreads();
    v = sh[WARPS];
    __syncthreads();
    return v;
}

/* the warp's row of a warp-per-row kernel (N rows; blocks of WARPS rows) */
__device__ __forceinline__ int warp_row() { return (int)(blockIdx.x * WARPS + threadIdx.x / 32); }

inline unsigned row_blocks(int N) { return (unsigned)((N + WARPS - 1) / WARPS); }

/* a bad argument: the one-line message (op, the values, what is valid)
 * recorded, 1 (the op returns) */
inline __attribute__((format(printf, 3, 4))) int bad(const char *op, int ok, const char *fmt, ...)
{
    if (ok) return 0;
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    pt_cuda_op_record(pt_fail(PT_EINVAL, "%s: %s", op, msg), op);
    return 1;
}

/* N rows of C columns (C >= 1) */
inline int bad_rows(const char *op, int N, int C)
{
    return bad(op, N >= 0 && C >= 1, "N %d, C %d are not valid (valid: N >= 0, C >= 1)", N, C);
}

/* N rows of a piece of Cl of C columns */
inline int bad_piece(const char *op, int N, int Cl, int C)
{
    return bad(op, N >= 0 && C >= 1 && Cl >= 0 && Cl <= C,
               "N %d, Cl %d, C %d are not valid (valid: N >= 0, 0 <= Cl <= C, C >= 1)", N, Cl, C);
}

} // namespace ptk
#endif
