/* The GEMM epilogues as kernels (cuda_priv.h): what cuBLASLt fuses into
 * the matmul, for the plans it cannot fuse (gemm_plan.h) and for the bias
 * gradients it writes where ops.h accumulates.  fp32 and bf16 tensors
 * (bf16 loaded into fp32 registers, stored rounded to nearest even),
 * fp32 arithmetic and fp32 bias gradients.  GELU is the tanh form
 * (Hendrycks & Gimpel 2016), its derivative as the CPU's gelu_bwd. */
#include "config.h"
#include "backend/cuda/cuda_priv.h"

#include <cuda_bf16.h>
#include <stdint.h>

namespace {

__device__ __forceinline__ float load(const float *p, size_t i) { return p[i]; }
__device__ __forceinline__ float load(const __nv_bfloat16 *p, size_t i) { return __bfloat162float(p[i]); }
__device__ __forceinline__ void store(float *p, size_t i, float v) { p[i] = v; }
__device__ __forceinline__ void store(__nv_bfloat16 *p, size_t i, float v) { p[i] = __float2bfloat16_rn(v); }

constexpr float GELU_K = 0.7978845608028654f; /* sqrt(2/pi) */

__device__ __forceinline__ float gelu(float x)
{
    return 0.5f * x * (1.0f + tanhf(GELU_K * (x + 0.044715f * x * x * x)));
}

__device__ __forceinline__ float dgelu(float x)
{
    float th = tanhf(GELU_K * (x + 0.044715f * x * x * x));
    float du = GELU_K * (1.0f + 3.0f * 0.044715f * x * x);
    return 0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * du;
}

constexpr unsigned THREADS = 256;

/* blocks for a grid-stride loop over n elements */
unsigned blocks_for(size_t n)
{
    size_t b = (n + THREADS - 1) / THREADS;
    return (unsigned)(b < 65536 ? (b ? b : 1) : 65536);
}

template <typename T>
__global__ void epi_fwd_kernel(T *out, T *aux, const T *bias, int N, int OC, int act_gelu)
{
    const size_t total = (size_t)N * (size_t)OC;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        float v = load(out, i);
        if (bias) v += load(bias, i % (size_t)OC);
        if (act_gelu) {
            if (aux) store(aux, i, v);
            v = gelu(v);
        }
        store(out, i, v);
    }
}

template <typename T>
__global__ void dgelu_kernel(T *d, const T *aux, size_t total)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x)
        store(d, i, load(d, i) * dgelu(load(aux, i)));
}

/* dbias [OC] += column sums of x [N, OC]: block (32, COLSUM_ROWS) owns 32
 * columns; thread (c, r) sums rows r, r + COLSUM_ROWS, ... of its column,
 * then a fixed tree over r in shared memory: the order of every sum is set
 * by the shape alone. */
constexpr int COLSUM_ROWS = 32;

template <typename T>
__global__ void colsum_kernel(float *dbias, const T *x, int N, int OC)
{
    __shared__ float part[COLSUM_ROWS][33];
    const int c = blockIdx.x * 32 + threadIdx.x;
    float s = 0.0f;
    if (c < OC)
        for (int r = threadIdx.y; r < N; r += COLSUM_ROWS) s += load(x, (size_t)r * OC + c);
    part[threadIdx.y][threadIdx.x] = s;
    __syncthreads();
    for (int h = COLSUM_ROWS / 2; h > 0; h /= 2) {
        if ((int)threadIdx.y < h) part[threadIdx.y][threadIdx.x] += part[threadIdx.y + h][threadIdx.x];
        __syncthreads();
    }
    if (threadIdx.y == 0 && c < OC) dbias[c] += part[0][threadIdx.x];
}

template <typename T>
__global__ void add_kernel(float *dst, const T *src, size_t n)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        dst[i] += load(src, i);
}

int launched(const char *what, int a, int b)
{
    cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? PT_OK : pt_cuda_fail(e, "%s kernel launch (%d x %d)", what, a, b);
}

int bad_elem(const char *what, int elem)
{
    return pt_fail(PT_EINVAL, "%s: element type %d is not valid (valid: %d fp32, %d bf16)", what, elem, PT_GEMM_F32,
                   PT_GEMM_BF16);
}

} // namespace

extern "C" int pt_cuda_epi_fwd(int elem, void *out, void *aux, const void *bias, int N, int OC, int act_gelu,
                               cudaStream_t stream)
{
    if (N < 1 || OC < 1) return PT_OK;
    const unsigned nb = blocks_for((size_t)N * (size_t)OC);
    if (elem == PT_GEMM_F32)
        epi_fwd_kernel<float><<<nb, THREADS, 0, stream>>>((float *)out, (float *)aux, (const float *)bias, N, OC,
                                                           act_gelu);
    else if (elem == PT_GEMM_BF16)
        epi_fwd_kernel<__nv_bfloat16><<<nb, THREADS, 0, stream>>>((__nv_bfloat16 *)out, (__nv_bfloat16 *)aux,
                                                                   (const __nv_bfloat16 *)bias, N, OC, act_gelu);
    else
        return bad_elem("epilogue (forward)", elem);
    return launched("epilogue (forward)", N, OC);
}

extern "C" int pt_cuda_colsum_add(int elem, float *dbias, const void *x, int N, int OC, cudaStream_t stream)
{
    if (N < 1 || OC < 1) return PT_OK;
    const dim3 grid((unsigned)((OC + 31) / 32)), block(32, COLSUM_ROWS);
    if (elem == PT_GEMM_F32)
        colsum_kernel<float><<<grid, block, 0, stream>>>(dbias, (const float *)x, N, OC);
    else if (elem == PT_GEMM_BF16)
        colsum_kernel<__nv_bfloat16><<<grid, block, 0, stream>>>(dbias, (const __nv_bfloat16 *)x, N, OC);
    else
        return bad_elem("column sums", elem);
    return launched("column sums", N, OC);
}

extern "C" int pt_cuda_epi_dgelu(int elem, void *d, float *dbias, const void *aux, int N, int C, cudaStream_t stream)
{
    if (N < 1 || C < 1) return PT_OK;
    const size_t total = (size_t)N * (size_t)C;
    if (elem == PT_GEMM_F32)
        dgelu_kernel<float><<<blocks_for(total), THREADS, 0, stream>>>((float *)d, (const float *)aux, total);
    else if (elem == PT_GEMM_BF16)
        dgelu_kernel<__nv_bfloat16><<<blocks_for(total), THREADS, 0, stream>>>((__nv_bfloat16 *)d,
                                                                               (const __nv_bfloat16 *)aux, total);
    else
        return bad_elem("epilogue (DGELU)", elem);
    int rc = launched("epilogue (DGELU)", N, C);
    return rc != PT_OK || !dbias ? rc : pt_cuda_colsum_add(elem, dbias, d, N, C, stream);
}

extern "C" int pt_cuda_add_f32(float *dst, int elem, const void *src, size_t n, cudaStream_t stream)
{
    if (!n) return PT_OK;
    if (elem == PT_GEMM_F32)
        add_kernel<float><<<blocks_for(n), THREADS, 0, stream>>>(dst, (const float *)src, n);
    else if (elem == PT_GEMM_BF16)
        add_kernel<__nv_bfloat16><<<blocks_for(n), THREADS, 0, stream>>>(dst, (const __nv_bfloat16 *)src, n);
    else
        return bad_elem("vector add", elem);
    return launched("vector add", (int)(n > 0x7fffffff ? 0x7fffffff : n), 1);
}
