/* SPDX-License-Identifier: MIT */
/* The mem family (ops.h PT_FAM_MEM): the generic memory and BLAS-1 ops on
 * device memory, one function for both tables (fp32 and bf16 buffers; fp64
 * is refused).  sum and sumsq accumulate in double over a fixed tree whose
 * block count depends on n alone, and return to the host (they wait);
 * copy, convert and copy2d with a host side return when the host side may
 * be reused; the rest runs on the compute stream, asynchronously. */
#include "config.h"
#include "backend/cuda/kernels.cuh"

namespace {
using namespace ptk;

/* ---- generic ops -------------------------------------------------------------------------------------- */
template <typename T>
__global__ void fill_kernel(T *x, float a, size_t n)
{
    GRID_STRIDE(i, n) store(x, i, a);
}

template <typename TD, typename TS>
__global__ void convert_kernel(TD *dst, const TS *src, size_t n)
{
    GRID_STRIDE(i, n) store(dst, i, load(src, i));
}

template <typename T>
__global__ void add2d_kernel(T *dst, size_t ldd, const T *src, size_t lds, size_t cols, size_t total)
{
    GRID_STRIDE(i, total)
    {
        const size_t r = i / cols, c = i - r * cols;
        store(dst, r * ldd + c, load(dst, r * ldd + c) + load(src, r * lds + c));
    }
}

template <typename T>
__global__ void axpy_kernel(T *y, float a, const T *x, size_t n)
{
    GRID_STRIDE(i, n) store(y, i, load(y, i) + a * load(x, i));
}

template <typename T>
__global__ void scale_kernel(T *x, float a, size_t n)
{
    GRID_STRIDE(i, n) store(x, i, load(x, i) * a);
}

/* Sums in double (cuBLAS's reductions to a host pointer; the CPU's gen_sum
 * and gen_sumsq): SUM_BLOCKS(n) blocks, a count set by n alone; thread t of
 * block b adds elements b*THREADS + t + k*blocks*THREADS in order, a fixed
 * tree in shared memory sums the block, and one block sums the blocks' parts
 * the same way.  So the result depends on n and the data, never on the
 * device or the launch. */
constexpr size_t SUM_MAX_BLOCKS = 1024;

size_t sum_blocks(size_t n)
{
    size_t b = (n + 8 * THREADS - 1) / (8 * THREADS);
    return b < SUM_MAX_BLOCKS ? (b ? b : 1) : SUM_MAX_BLOCKS;
}

__device__ __forceinline__ double block_tree(double s, double *sh)
{
    sh[threadIdx.x] = s;
    __syncthreads();
    for (unsigned h = THREADS / 2; h > 0; h /= 2) {
        if (threadIdx.x < h) sh[threadIdx.x] += sh[threadIdx.x + h];
        __syncthreads();
    }
    return sh[0];
}

template <typename T, bool SQ>
__global__ void sum_kernel(double *part, const T *x, size_t n)
{
    __shared__ double sh[THREADS];
    double s = 0.0;
    for (size_t i = (size_t)blockIdx.x * THREADS + threadIdx.x; i < n; i += (size_t)gridDim.x * THREADS) {
        const double v = (double)load(x, i);
        s += SQ ? v * v : v;
    }
    s = block_tree(s, sh);
    if (threadIdx.x == 0) part[blockIdx.x] = s;
}

__global__ void sum_parts_kernel(double *out, const double *part, size_t nb)
{
    __shared__ double sh[THREADS];
    double s = 0.0;
    for (size_t i = threadIdx.x; i < nb; i += THREADS) s += part[i];
    s = block_tree(s, sh);
    if (threadIdx.x == 0) *out = s;
}

template <bool SQ>
double reduce(const char *op, const void *x, size_t n, pt_dtype t)
{
    if (pt_cuda_ops_status() != PT_OK) return NAN;
    if (!dtype_ok(op, t)) return NAN;
    if (!n) return 0.0;
    if (!given(op, "x", {x})) return NAN;
    cudaStream_t s = pt_cuda_stream_compute();
    const size_t nb = sum_blocks(n);
    double *part = nullptr, result = NAN;
    if (failed(cudaMallocAsync((void **)&part, (nb + 1) * sizeof(double), s), op, "cudaMallocAsync (partial sums)"))
        return NAN;
    if (t == PT_F32) sum_kernel<float, SQ><<<(unsigned)nb, THREADS, 0, s>>>(part + 1, (const float *)x, n);
    else sum_kernel<bf16, SQ><<<(unsigned)nb, THREADS, 0, s>>>(part + 1, (const bf16 *)x, n);
    sum_parts_kernel<<<1, THREADS, 0, s>>>(part, part + 1, nb);
    if (pt_cuda_op_check(op) == PT_OK &&
        !failed(cudaMemcpyAsync(&result, part, sizeof result, cudaMemcpyDeviceToHost, s), op,
                "cudaMemcpyAsync (the sum to the host)"))
        failed(cudaStreamSynchronize(s), op, "cudaStreamSynchronize (the sum)");
    failed(cudaFreeAsync(part, s), op, "cudaFreeAsync (partial sums)");
    return pt_cuda_ops_status() == PT_OK ? result : NAN;
}

/* after a copy that has a host side: wait for it (the host buffer may be
 * reused when the op returns) */
void host_sync(const char *op, bool host)
{
    if (host) failed(cudaStreamSynchronize(pt_cuda_stream_compute()), op, "cudaStreamSynchronize (host-side copy)");
}

/* dst (dt) = src (st) converted by a kernel, both on the device */
void convert_dev(void *dst, pt_dtype dt, const void *src, size_t n, cudaStream_t s)
{
    if (dt == PT_BF16)
        convert_kernel<bf16, float><<<blocks_for(n), THREADS, 0, s>>>((bf16 *)dst, (const float *)src, n);
    else
        convert_kernel<float, bf16><<<blocks_for(n), THREADS, 0, s>>>((float *)dst, (const bf16 *)src, n);
}

/* elements per staging piece of convert with a host side (64 MiB of fp32) */
constexpr size_t CONVERT_PIECE = (size_t)1 << 24;


} // namespace

/* ---- the C entries and the family fill ---------------------------------------------------------- */
extern "C" void pt_cuda_zero(void *x, size_t n, pt_dtype t)
{
    if (!dtype_ok("zero", t) || !n || !given("zero", "x", {x})) return;
    failed(cudaMemsetAsync(x, 0, n * pt_dtype_size(t), pt_cuda_stream_compute()), "zero", "cudaMemsetAsync");
}

extern "C" void pt_cuda_fill(void *x, double a, size_t n, pt_dtype t)
{
    if (!dtype_ok("fill", t) || !n || !given("fill", "x", {x})) return;
    cudaStream_t s = pt_cuda_stream_compute();
    if (t == PT_F32) fill_kernel<float><<<blocks_for(n), THREADS, 0, s>>>((float *)x, (float)a, n);
    else fill_kernel<bf16><<<blocks_for(n), THREADS, 0, s>>>((bf16 *)x, (float)a, n);
    pt_cuda_op_check("fill");
}

extern "C" void pt_cuda_copy(void *dst, const void *src, size_t n, pt_dtype t)
{
    if (!dtype_ok("copy", t) || !n || !given("copy", "dst, src", {dst, src})) return;
    const bool host = on_host(dst) || on_host(src);
    if (failed(cudaMemcpyAsync(dst, src, n * pt_dtype_size(t), cudaMemcpyDefault, pt_cuda_stream_compute()), "copy",
               "cudaMemcpyAsync"))
        return;
    host_sync("copy", host);
}

/* Either side may be host memory.  The same type: one cudaMemcpyAsync.
 * fp32 <-> bf16: the conversion kernel on the device; a host side is
 * staged through a device buffer (pieces of CONVERT_PIECE elements, the
 * buffers allocated on the stream), and the op waits for the copies. */
extern "C" void pt_cuda_convert(void *dst, pt_dtype dt, const void *src, pt_dtype st, size_t n)
{
    const char *op = "convert";
    if (!dtype_ok(op, dt) || !dtype_ok(op, st) || !n || !given(op, "dst, src", {dst, src})) return;
    if (dt == st) {
        pt_cuda_copy(dst, src, n, dt);
        return;
    }
    cudaStream_t s = pt_cuda_stream_compute();
    const size_t ds = pt_dtype_size(dt), ss = pt_dtype_size(st), piece = n < CONVERT_PIECE ? n : CONVERT_PIECE;
    const bool dhost = on_host(dst), shost = on_host(src);
    if (!dhost && !shost) {
        convert_dev(dst, dt, src, n, s);
        pt_cuda_op_check(op);
        return;
    }
    /* the source part starts 256-byte aligned: after an odd number of bf16
     * elements its floats would be misaligned (cudaErrorMisalignedAddress
     * on an H200 for fp32 host -> bf16 host of 1851 elements) */
    const size_t dpart = dhost ? (piece * ds + 255) / 256 * 256 : 0;
    void *tmp = nullptr;
    if (failed(cudaMallocAsync(&tmp, dpart + (shost ? piece * ss : 0), s), op, "cudaMallocAsync (staging buffer)"))
        return;
    char *td = (char *)tmp, *ts = td + dpart;
    for (size_t off = 0; off < n; off += piece) {
        const size_t len = n - off < piece ? n - off : piece;
        const char *sp = (const char *)src + off * ss;
        char *dp = (char *)dst + off * ds;
        if (shost && failed(cudaMemcpyAsync(ts, sp, len * ss, cudaMemcpyDefault, s), op, "cudaMemcpyAsync (in)"))
            break;
        convert_dev(dhost ? td : dp, dt, shost ? ts : sp, len, s);
        if (pt_cuda_op_check(op) != PT_OK) break;
        if (dhost && failed(cudaMemcpyAsync(dp, td, len * ds, cudaMemcpyDefault, s), op, "cudaMemcpyAsync (out)"))
            break;
    }
    failed(cudaFreeAsync(tmp, s), op, "cudaFreeAsync (staging buffer)");
    host_sync(op, true);
}

extern "C" void pt_cuda_copy2d(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height)
{
    const char *op = "copy2d";
    if (!width || !height || !given(op, "dst, src", {dst, src})) return;
    if (height > 1 && (dpitch < width || spitch < width)) {
        refuse(op, "row pitches %zu (dst) and %zu (src) bytes must be >= the width %zu bytes", dpitch, spitch, width);
        return;
    }
    const bool host = on_host(dst) || on_host(src);
    cudaStream_t s = pt_cuda_stream_compute();
    cudaError_t e = height == 1 ? cudaMemcpyAsync(dst, src, width, cudaMemcpyDefault, s)
                                : cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, height, cudaMemcpyDefault, s);
    if (failed(e, op, height == 1 ? "cudaMemcpyAsync" : "cudaMemcpy2DAsync")) return;
    host_sync(op, host);
}

extern "C" void pt_cuda_add2d(void *dst, size_t ldd, const void *src, size_t lds, size_t rows, size_t cols,
                              pt_dtype t)
{
    const char *op = "add2d";
    if (!dtype_ok(op, t) || !rows || !cols || !given(op, "dst, src", {dst, src})) return;
    if (rows > 1 && (ldd < cols || lds < cols)) {
        refuse(op, "leading dimensions %zu (dst) and %zu (src) must be >= cols %zu", ldd, lds, cols);
        return;
    }
    const size_t total = rows * cols;
    cudaStream_t s = pt_cuda_stream_compute();
    if (t == PT_F32)
        add2d_kernel<float><<<blocks_for(total), THREADS, 0, s>>>((float *)dst, ldd, (const float *)src, lds, cols,
                                                                  total);
    else
        add2d_kernel<bf16><<<blocks_for(total), THREADS, 0, s>>>((bf16 *)dst, ldd, (const bf16 *)src, lds, cols, total);
    pt_cuda_op_check(op);
}

extern "C" void pt_cuda_axpy(void *y, double a, const void *x, size_t n, pt_dtype t)
{
    if (!dtype_ok("axpy", t) || !n || !given("axpy", "y, x", {y, x})) return;
    cudaStream_t s = pt_cuda_stream_compute();
    if (t == PT_F32) axpy_kernel<float><<<blocks_for(n), THREADS, 0, s>>>((float *)y, (float)a, (const float *)x, n);
    else axpy_kernel<bf16><<<blocks_for(n), THREADS, 0, s>>>((bf16 *)y, (float)a, (const bf16 *)x, n);
    pt_cuda_op_check("axpy");
}

extern "C" void pt_cuda_scale(void *x, double a, size_t n, pt_dtype t)
{
    if (!dtype_ok("scale", t) || !n || !given("scale", "x", {x})) return;
    cudaStream_t s = pt_cuda_stream_compute();
    if (t == PT_F32) scale_kernel<float><<<blocks_for(n), THREADS, 0, s>>>((float *)x, (float)a, n);
    else scale_kernel<bf16><<<blocks_for(n), THREADS, 0, s>>>((bf16 *)x, (float)a, n);
    pt_cuda_op_check("scale");
}

extern "C" double pt_cuda_sum(const void *x, size_t n, pt_dtype t) { return reduce<false>("sum", x, n, t); }
extern "C" double pt_cuda_sumsq(const void *x, size_t n, pt_dtype t) { return reduce<true>("sumsq", x, n, t); }

extern "C" int pt_cuda_fill_mem(pt_ops *o, const pt_prec_policy *p)
{
    (void)p;
    PT_CUDA_SET_ONE(o, zero);
    PT_CUDA_SET_ONE(o, fill);
    PT_CUDA_SET_ONE(o, copy);
    PT_CUDA_SET_ONE(o, convert);
    PT_CUDA_SET_ONE(o, copy2d);
    PT_CUDA_SET_ONE(o, add2d);
    PT_CUDA_SET_ONE(o, axpy);
    PT_CUDA_SET_ONE(o, scale);
    PT_CUDA_SET_ONE(o, sum);
    PT_CUDA_SET_ONE(o, sumsq);
    return PT_OK;
}
