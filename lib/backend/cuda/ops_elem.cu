/* SPDX-License-Identifier: MIT */
/* The CUDA ops table's element-wise kernels (ops_cuda.h, "ops_elem.cu"):
 * embeddings, GELU, residual add, bias, AdamW, the cross-entropy's
 * rescale and loss, the causal softmax rows of the materialised ring, and
 * the generic memory and BLAS-1 ops.  Semantics are lib/backend/ops.h's,
 * entry by entry, and the reference is the CPU's cpu_ops.inc / cpu.c: ACT
 * tensors fp32 or bf16 (loaded into fp32 registers, stored once rounded to
 * nearest even with __float2bfloat16_rn, the CPU's pt_f32_to_bf16), ACC
 * tensors fp32, fp32 arithmetic; sum and sumsq accumulate in double.
 *
 * Launches: grid-stride loops of THREADS per block over the elements (as
 * gemm_epi.cu and llm.c's dev/cuda element-wise kernels), a warp per row
 * for the softmax rows (llm.c's softmax_forward_kernel: a row's max and sum
 * by warp shuffles).  No result depends on the launch: every reduction has
 * an order set by the shape alone (posemb_bwd and embedding_bwd add the
 * rows in the CPU's order, so their fp32 results are the CPU's bit for
 * bit; bias_bwd is gemm_epi.cu's column sums; sum and sumsq a fixed tree
 * over a block count that depends on n alone), and there are no atomics.
 *
 * Everything runs on the compute stream (pt_cuda_stream_compute),
 * asynchronously for the host, except: sum and sumsq (they return a
 * value), and copy, convert and copy2d when a side is host memory (they
 * return when the host side may be reused).  Errors are recorded for the
 * table (pt_cuda_op_check after launches, pt_cuda_op_record for a bad
 * argument or a failed runtime call): a bad argument launches nothing. */
#include "config.h"
#include "backend/cuda/cuda_priv.h"
#include "backend/cuda/ops_cuda.h"

#include <cub/device/device_radix_sort.cuh>
#include <cuda_bf16.h>
#include <initializer_list>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>

namespace {

typedef __nv_bfloat16 bf16;

__device__ __forceinline__ float load(const float *p, size_t i) { return p[i]; }
__device__ __forceinline__ float load(const bf16 *p, size_t i) { return __bfloat162float(p[i]); }
__device__ __forceinline__ void store(float *p, size_t i, float v) { p[i] = v; }
__device__ __forceinline__ void store(bf16 *p, size_t i, float v) { p[i] = __float2bfloat16_rn(v); }

constexpr float GELU_K = 0.7978845608028654f; /* sqrt(2/pi) */
constexpr unsigned THREADS = 256;
constexpr unsigned FULL = 0xffffffffu;

/* blocks for a grid-stride loop over n elements */
unsigned blocks_for(size_t n)
{
    size_t b = (n + THREADS - 1) / THREADS;
    return (unsigned)(b < 65536 ? (b ? b : 1) : 65536);
}

#define GRID_STRIDE(i, n) \
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (size_t)gridDim.x * blockDim.x)

/* ---- argument checks and error recording ---------------------------------------------------------- */

/* a bad argument: one line through pt_fail, recorded for the table */
__attribute__((format(printf, 2, 3))) void refuse(const char *op, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    pt_cuda_op_record(pt_fail(PT_EINVAL, "%s", msg), op);
}

/* a runtime call's failure, recorded; true when it failed */
bool failed(cudaError_t e, const char *op, const char *call)
{
    if (e == cudaSuccess) return false;
    pt_cuda_op_record(pt_cuda_fail(e, "%s", call), op);
    return true;
}

bool dtype_ok(const char *op, pt_dtype t)
{
    if (t == PT_F32 || t == PT_BF16) return true;
    refuse(op, "element type %d (%s) is not valid here (valid: fp32, bf16)", (int)t, pt_dtype_name(t));
    return false;
}

/* sizes that may not be negative */
bool sizes_ok(const char *op, int a, const char *an, int b, const char *bn)
{
    if (a >= 0 && b >= 0) return true;
    refuse(op, "%s=%d, %s=%d: sizes must be >= 0", an, a, bn, b);
    return false;
}

/* tensors that must be given (count pointers, their names in `names`) */
bool given(const char *op, const char *names, std::initializer_list<const void *> ptrs)
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
bool on_host(const void *p)
{
    cudaPointerAttributes a;
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        (void)cudaGetLastError(); /* not a pointer CUDA knows: host */
        return true;
    }
    return a.type != cudaMemoryTypeDevice && a.type != cudaMemoryTypeManaged;
}

/* ---- embeddings ------------------------------------------------------------------------------------------ */
/* Token and position embeddings (GPT-2; llm.c's encoder_forward/backward).
 * Forward: a thread per output element, out[n,c] = w[tok[n]-v0, c] (0
 * outside the shard).  Backward, deterministic without atomics: the rows
 * are sorted by their token id (CUB's stable radix sort of (id, row)
 * pairs), so a token's rows sit together in increasing row order; the
 * first position of each run sums the run's rows for one column in that
 * order onto dw's value: the CPU's order, n ascending (llm.c sorts on the
 * host into buckets for the same reason). */
template <typename T>
__global__ void embedding_fwd_kernel(T *out, const int32_t *tok, const T *w, int v0, int Vl, int N, int C)
{
    const size_t total = (size_t)N * (size_t)C;
    GRID_STRIDE(i, total)
    {
        const size_t n = i / (size_t)C, c = i - n * (size_t)C;
        const int id = tok[n] - v0;
        if (id >= 0 && id < Vl) out[i] = w[(size_t)id * C + c];
        else store(out, i, 0.0f);
    }
}

/* key[n] = the row's id in the shard, Vl for rows outside it; row[n] = n */
__global__ void embedding_keys_kernel(uint32_t *key, int32_t *row, const int32_t *tok, int v0, int Vl, int N)
{
    GRID_STRIDE(i, (size_t)N)
    {
        const int id = tok[i] - v0;
        key[i] = (uint32_t)(id >= 0 && id < Vl ? id : Vl);
        row[i] = (int32_t)i;
    }
}

/* grid (column blocks, sorted positions): the first position of a run of
 * one id adds the run's rows to dw, in row order */
template <typename T>
__global__ void embedding_bwd_kernel(float *dw, const T *dout, const uint32_t *key, const int32_t *row, int Vl, int N,
                                     int C)
{
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    for (int i = blockIdx.y; i < N; i += gridDim.y) {
        const uint32_t id = key[i];
        if (id >= (uint32_t)Vl || (i > 0 && key[i - 1] == id)) continue;
        float *d = dw + (size_t)id * C + c;
        float acc = *d;
        for (int j = i; j < N && key[j] == id; j++) acc += load(dout, (size_t)row[j] * C + c);
        *d = acc;
    }
}

template <typename T>
void embedding_fwd(void *out, const int32_t *tok, const void *w, int v0, int Vl, int N, int C)
{
    const char *op = "embedding_fwd";
    if (!sizes_ok(op, N, "N", C, "C") || !sizes_ok(op, Vl, "Vl", 0, "-")) return;
    if (!N || !C) return;
    if (!given(op, "out, tok, w", {out, tok, w})) return;
    embedding_fwd_kernel<T><<<blocks_for((size_t)N * C), THREADS, 0, pt_cuda_stream_compute()>>>(
        (T *)out, tok, (const T *)w, v0, Vl, N, C);
    pt_cuda_op_check(op);
}

template <typename T>
void embedding_bwd(void *dw, const void *dout, const int32_t *tok, int v0, int Vl, int N, int C)
{
    const char *op = "embedding_bwd";
    if (!sizes_ok(op, N, "N", C, "C") || !sizes_ok(op, Vl, "Vl", 0, "-")) return;
    if (!N || !C || !Vl) return;
    if (!given(op, "dw, dout, tok", {dw, dout, tok})) return;
    cudaStream_t s = pt_cuda_stream_compute();
    int bits = 1; /* keys are 0 .. Vl */
    while (bits < 31 && (Vl >> bits) != 0) bits++;
    size_t cub_bytes = 0;
    if (failed(cub::DeviceRadixSort::SortPairs(nullptr, cub_bytes, (const uint32_t *)nullptr, (uint32_t *)nullptr,
                                               (const int32_t *)nullptr, (int32_t *)nullptr, N, 0, bits, s),
               op, "cub::DeviceRadixSort::SortPairs (temporary storage size)"))
        return;
    /* CUB's storage first (cudaMallocAsync's alignment), the four [N] arrays after it */
    const size_t cub_room = (cub_bytes + 255) / 256 * 256, bytes = cub_room + 4 * (size_t)N * sizeof(int32_t);
    void *tmp = nullptr;
    if (failed(cudaMallocAsync(&tmp, bytes, s), op, "cudaMallocAsync (sort buffers)")) return;
    void *cub_tmp = tmp;
    uint32_t *key_in = (uint32_t *)((char *)tmp + cub_room), *key = key_in + N;
    int32_t *row_in = (int32_t *)(key + N), *row = row_in + N;
    embedding_keys_kernel<<<blocks_for((size_t)N), THREADS, 0, s>>>(key_in, row_in, tok, v0, Vl, N);
    if (pt_cuda_op_check(op) == PT_OK &&
        !failed(cub::DeviceRadixSort::SortPairs(cub_tmp, cub_bytes, key_in, key, row_in, row, N, 0, bits, s), op,
                "cub::DeviceRadixSort::SortPairs")) {
        const dim3 grid((unsigned)((C + THREADS - 1) / THREADS), (unsigned)(N < 65535 ? N : 65535));
        embedding_bwd_kernel<T><<<grid, THREADS, 0, s>>>((float *)dw, (const T *)dout, key, row, Vl, N, C);
        pt_cuda_op_check(op);
    }
    failed(cudaFreeAsync(tmp, s), op, "cudaFreeAsync (sort buffers)");
}

/* x[b,t,:] += wpe[t,:], a thread per element */
template <typename T>
__global__ void posemb_fwd_kernel(T *x, const T *wpe, int T_, int C, size_t total)
{
    GRID_STRIDE(i, total)
    {
        const size_t r = i / (size_t)C, c = i - r * (size_t)C, t = r % (size_t)T_;
        store(x, i, load(x, i) + load(wpe, t * C + c));
    }
}

/* dwpe[t,c] += dout[b,t,c] for b = 0, 1, ..: a thread per (t, c), the
 * CPU's order */
template <typename T>
__global__ void posemb_bwd_kernel(float *dwpe, const T *dout, int B, size_t TC)
{
    GRID_STRIDE(j, TC)
    {
        float acc = dwpe[j];
        for (int b = 0; b < B; b++) acc += load(dout, (size_t)b * TC + j);
        dwpe[j] = acc;
    }
}

template <typename T>
void posemb_fwd(void *x, const void *wpe, int B, int T_, int C)
{
    const char *op = "posemb_fwd";
    if (!sizes_ok(op, B, "B", T_, "T") || !sizes_ok(op, C, "C", 0, "-")) return;
    const size_t total = (size_t)B * T_ * C;
    if (!total) return;
    if (!given(op, "x, wpe", {x, wpe})) return;
    posemb_fwd_kernel<T><<<blocks_for(total), THREADS, 0, pt_cuda_stream_compute()>>>((T *)x, (const T *)wpe, T_, C,
                                                                                        total);
    pt_cuda_op_check(op);
}

template <typename T>
void posemb_bwd(void *dwpe, const void *dout, int B, int T_, int C)
{
    const char *op = "posemb_bwd";
    if (!sizes_ok(op, B, "B", T_, "T") || !sizes_ok(op, C, "C", 0, "-")) return;
    const size_t TC = (size_t)T_ * C;
    if (!TC || !B) return;
    if (!given(op, "dwpe, dout", {dwpe, dout})) return;
    posemb_bwd_kernel<T><<<blocks_for(TC), THREADS, 0, pt_cuda_stream_compute()>>>((float *)dwpe, (const T *)dout, B,
                                                                                     TC);
    pt_cuda_op_check(op);
}

/* ---- GELU, residual, bias ---------------------------------------------------------------------------- */
/* GELU, tanh form (Hendrycks & Gimpel 2016), and its derivative as the
 * CPU's gelu_bwd (llm.c's gelu_forward/backward kernels). */
template <typename T>
__global__ void gelu_fwd_kernel(T *out, const T *inp, size_t n)
{
    GRID_STRIDE(i, n)
    {
        const float x = load(inp, i);
        store(out, i, 0.5f * x * (1.0f + tanhf(GELU_K * (x + 0.044715f * x * x * x))));
    }
}

template <typename T>
__global__ void gelu_bwd_kernel(T *dinp, const T *inp, const T *dout, size_t n)
{
    GRID_STRIDE(i, n)
    {
        const float x = load(inp, i);
        const float th = tanhf(GELU_K * (x + 0.044715f * x * x * x));
        const float du = GELU_K * (1.0f + 3.0f * 0.044715f * x * x);
        const float g = 0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * du;
        store(dinp, i, load(dinp, i) + g * load(dout, i));
    }
}

template <typename T>
__global__ void add_fwd_kernel(T *out, const T *a, const T *b, size_t n)
{
    GRID_STRIDE(i, n) store(out, i, load(a, i) + load(b, i));
}

/* da += dout, db += dout (either may be NULL) */
template <typename T>
__global__ void add_bwd_kernel(T *da, T *db, const T *dout, size_t n)
{
    GRID_STRIDE(i, n)
    {
        const float g = load(dout, i);
        if (da) store(da, i, load(da, i) + g);
        if (db) store(db, i, load(db, i) + g);
    }
}

template <typename T>
__global__ void bias_fwd_kernel(T *out, const T *bias, int OC, size_t total)
{
    GRID_STRIDE(i, total) store(out, i, load(out, i) + load(bias, i % (size_t)OC));
}

template <typename T>
void gelu_fwd(void *out, const void *inp, size_t n)
{
    if (!n || !given("gelu_fwd", "out, inp", {out, inp})) return;
    gelu_fwd_kernel<T><<<blocks_for(n), THREADS, 0, pt_cuda_stream_compute()>>>((T *)out, (const T *)inp, n);
    pt_cuda_op_check("gelu_fwd");
}

template <typename T>
void gelu_bwd(void *dinp, const void *inp, const void *dout, size_t n)
{
    if (!n || !given("gelu_bwd", "dinp, inp, dout", {dinp, inp, dout})) return;
    gelu_bwd_kernel<T><<<blocks_for(n), THREADS, 0, pt_cuda_stream_compute()>>>((T *)dinp, (const T *)inp,
                                                                                 (const T *)dout, n);
    pt_cuda_op_check("gelu_bwd");
}

template <typename T>
void add_fwd(void *out, const void *a, const void *b, size_t n)
{
    if (!n || !given("add_fwd", "out, a, b", {out, a, b})) return;
    add_fwd_kernel<T><<<blocks_for(n), THREADS, 0, pt_cuda_stream_compute()>>>((T *)out, (const T *)a, (const T *)b,
                                                                                n);
    pt_cuda_op_check("add_fwd");
}

template <typename T>
void add_bwd(void *da, void *db, const void *dout, size_t n)
{
    if (!n || (!da && !db) || !given("add_bwd", "dout", {dout})) return;
    add_bwd_kernel<T><<<blocks_for(n), THREADS, 0, pt_cuda_stream_compute()>>>((T *)da, (T *)db, (const T *)dout, n);
    pt_cuda_op_check("add_bwd");
}

template <typename T>
void bias_fwd(void *out, const void *bias, int N, int OC)
{
    if (!sizes_ok("bias_fwd", N, "N", OC, "OC") || !N || !OC) return;
    if (!given("bias_fwd", "out, bias", {out, bias})) return;
    const size_t total = (size_t)N * OC;
    bias_fwd_kernel<T><<<blocks_for(total), THREADS, 0, pt_cuda_stream_compute()>>>((T *)out, (const T *)bias, OC,
                                                                                     total);
    pt_cuda_op_check("bias_fwd");
}

/* dbias += colsum(dout): gemm_epi.cu's fixed-order column sums */
template <typename T>
void bias_bwd(void *dbias, const void *dout, int N, int OC)
{
    if (!sizes_ok("bias_bwd", N, "N", OC, "OC") || !N || !OC) return;
    if (!given("bias_bwd", "dbias, dout", {dbias, dout})) return;
    const int elem = sizeof(T) == 2 ? PT_GEMM_BF16 : PT_GEMM_F32;
    pt_cuda_op_record(pt_cuda_colsum_add(elem, (float *)dbias, dout, N, OC, pt_cuda_stream_compute()), "bias_bwd");
}

/* ---- AdamW -------------------------------------------------------------------------------------------- */
/* Loshchilov & Hutter 2019, Algorithm 2 (decoupled weight decay), as the
 * CPU's adamw (and llm.c's adamw_kernel3, which also writes the low-
 * precision weight copy in the same pass): fp32 master p, moments m, v and
 * gradient g; work, when not NULL, gets the updated p rounded once. */
template <typename T>
__global__ void adamw_kernel(float *p, T *work, const float *g, float *m, float *v, size_t n, float lr, float b1,
                             float b2, float eps, float wd, float bc1, float bc2)
{
    GRID_STRIDE(i, n)
    {
        const float gi = g[i];
        const float mi = b1 * m[i] + (1.0f - b1) * gi;
        const float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
        m[i] = mi;
        v[i] = vi;
        const float mhat = mi / bc1, vhat = vi / bc2;
        const float pi = p[i] - lr * (mhat / (sqrtf(vhat) + eps) + wd * p[i]);
        p[i] = pi;
        if (work) store(work, i, pi);
    }
}

template <typename T>
void adamw(void *p, void *work, const void *g, void *m, void *v, size_t n, double lr, double b1, double b2,
           double eps, double wd, double bc1, double bc2)
{
    if (!n || !given("adamw", "p, g, m, v", {p, g, m, v})) return;
    T *w = work == p ? nullptr : (T *)work;
    adamw_kernel<T><<<blocks_for(n), THREADS, 0, pt_cuda_stream_compute()>>>(
        (float *)p, w, (const float *)g, (float *)m, (float *)v, n, (float)lr, (float)b1, (float)b2, (float)eps,
        (float)wd, (float)bc1, (float)bc2);
    pt_cuda_op_check("adamw");
}

/* ---- cross-entropy pieces, causal softmax rows (fp32) ------------------------------------------------ */
__global__ void xent_rescale_kernel(float *sumexp, const float *from, const float *to, int N)
{
    GRID_STRIDE(i, (size_t)N) sumexp[i] = from[i] == -INFINITY ? 0.0f : sumexp[i] * expf(from[i] - to[i]);
}

__global__ void xent_loss_kernel(float *losses, const float *rowmax, const float *sumexp, const float *tgt, int N)
{
    GRID_STRIDE(i, (size_t)N) losses[i] = logf(sumexp[i]) + rowmax[i] - tgt[i];
}

/* Causal softmax rows (Vaswani et al. 2017, 3.2.1), a warp per row (llm.c's
 * softmax_forward_kernel): the row max and the sum of exp by xor shuffles
 * (every lane ends with the same value, the order set by the warp alone);
 * row r = (bh, i) sees keys 0 .. q0+i, the rest is written 0. */
__device__ __forceinline__ float warp_max(float x)
{
    for (int k = 16; k > 0; k /= 2) {
        const float o = __shfl_xor_sync(FULL, x, k);
        x = o > x ? o : x;
    }
    return x;
}

__device__ __forceinline__ float warp_sum(float x)
{
    for (int k = 16; k > 0; k /= 2) x += __shfl_xor_sync(FULL, x, k);
    return x;
}

constexpr unsigned ROWS_PER_BLOCK = THREADS / 32;

__global__ void softmax_causal_fwd_kernel(float *att, size_t rows, int Tq, int T, int q0)
{
    const unsigned lane = threadIdx.x % 32;
    for (size_t r = (size_t)blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / 32; r < rows;
         r += (size_t)gridDim.x * ROWS_PER_BLOCK) {
        float *a = att + r * (size_t)T;
        const int n = q0 + (int)(r % (size_t)Tq) + 1; /* visible keys */
        float mx = -INFINITY;
        for (int t = lane; t < n; t += 32) mx = a[t] > mx ? a[t] : mx;
        mx = warp_max(mx);
        float sum = 0.0f;
        for (int t = lane; t < n; t += 32) {
            const float e = expf(a[t] - mx);
            a[t] = e;
            sum += e;
        }
        const float inv = 1.0f / warp_sum(sum);
        for (int t = lane; t < n; t += 32) a[t] *= inv;
        for (int t = n + lane; t < T; t += 32) a[t] = 0.0f;
    }
}

/* datt = att (datt - rowsum(att datt)) scale on the visible keys, 0 after */
__global__ void softmax_causal_bwd_kernel(float *datt, const float *att, float scale, size_t rows, int Tq, int T,
                                          int q0)
{
    const unsigned lane = threadIdx.x % 32;
    for (size_t r = (size_t)blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / 32; r < rows;
         r += (size_t)gridDim.x * ROWS_PER_BLOCK) {
        float *d = datt + r * (size_t)T;
        const float *p = att + r * (size_t)T;
        const int n = q0 + (int)(r % (size_t)Tq) + 1;
        float dot = 0.0f;
        for (int t = lane; t < n; t += 32) dot += p[t] * d[t];
        dot = warp_sum(dot);
        for (int t = lane; t < n; t += 32) d[t] = p[t] * (d[t] - dot) * scale;
        for (int t = n + lane; t < T; t += 32) d[t] = 0.0f;
    }
}

unsigned row_blocks(size_t rows)
{
    size_t b = (rows + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK;
    return (unsigned)(b < 65536 ? (b ? b : 1) : 65536);
}

bool softmax_dims_ok(const char *op, int BH, int Tq, int T, int q0)
{
    if (BH >= 0 && Tq >= 0 && T >= 0 && q0 >= 0 && (long)q0 + Tq <= T) return true;
    refuse(op, "BH=%d Tq=%d T=%d q0=%d: needs sizes >= 0, q0 >= 0 and q0 + Tq <= T", BH, Tq, T, q0);
    return false;
}

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

/* ---- the C entries ------------------------------------------------------------------------------------ */

#define PT_CUDA_ACT_ENTRIES(S, T)                                                                                   \
    extern "C" void pt_cuda_embedding_fwd_##S(void *out, const int32_t *tok, const void *w, int v0, int Vl, int N,  \
                                              int C)                                                                \
    {                                                                                                               \
        embedding_fwd<T>(out, tok, w, v0, Vl, N, C);                                                                \
    }                                                                                                               \
    extern "C" void pt_cuda_embedding_bwd_##S(void *dw, const void *dout, const int32_t *tok, int v0, int Vl, int N, \
                                              int C)                                                                \
    {                                                                                                               \
        embedding_bwd<T>(dw, dout, tok, v0, Vl, N, C);                                                              \
    }                                                                                                               \
    extern "C" void pt_cuda_posemb_fwd_##S(void *x, const void *wpe, int B, int T_, int C)                          \
    {                                                                                                               \
        posemb_fwd<T>(x, wpe, B, T_, C);                                                                            \
    }                                                                                                               \
    extern "C" void pt_cuda_posemb_bwd_##S(void *dwpe, const void *dout, int B, int T_, int C)                      \
    {                                                                                                               \
        posemb_bwd<T>(dwpe, dout, B, T_, C);                                                                        \
    }                                                                                                               \
    extern "C" void pt_cuda_gelu_fwd_##S(void *out, const void *inp, size_t n) { gelu_fwd<T>(out, inp, n); }        \
    extern "C" void pt_cuda_gelu_bwd_##S(void *dinp, const void *inp, const void *dout, size_t n)                   \
    {                                                                                                               \
        gelu_bwd<T>(dinp, inp, dout, n);                                                                            \
    }                                                                                                               \
    extern "C" void pt_cuda_add_fwd_##S(void *out, const void *a, const void *b, size_t n)                          \
    {                                                                                                               \
        add_fwd<T>(out, a, b, n);                                                                                   \
    }                                                                                                               \
    extern "C" void pt_cuda_add_bwd_##S(void *da, void *db, const void *dout, size_t n)                             \
    {                                                                                                               \
        add_bwd<T>(da, db, dout, n);                                                                                \
    }                                                                                                               \
    extern "C" void pt_cuda_bias_fwd_##S(void *out, const void *bias, int N, int OC)                                \
    {                                                                                                               \
        bias_fwd<T>(out, bias, N, OC);                                                                              \
    }                                                                                                               \
    extern "C" void pt_cuda_bias_bwd_##S(void *dbias, const void *dout, int N, int OC)                              \
    {                                                                                                               \
        bias_bwd<T>(dbias, dout, N, OC);                                                                            \
    }                                                                                                               \
    extern "C" void pt_cuda_adamw_##S(void *p, void *work, const void *g, void *m, void *v, size_t n, double lr,    \
                                      double b1, double b2, double eps, double wd, double bc1, double bc2)          \
    {                                                                                                               \
        adamw<T>(p, work, g, m, v, n, lr, b1, b2, eps, wd, bc1, bc2);                                               \
    }
PT_CUDA_ACT_ENTRIES(f32, float)
PT_CUDA_ACT_ENTRIES(bf16, bf16)

extern "C" void pt_cuda_xent_rescale(void *sumexp, const void *from, const void *to, int N)
{
    const char *op = "xent_rescale";
    if (!sizes_ok(op, N, "N", 0, "-") || !N || !given(op, "sumexp, from, to", {sumexp, from, to})) return;
    xent_rescale_kernel<<<blocks_for((size_t)N), THREADS, 0, pt_cuda_stream_compute()>>>(
        (float *)sumexp, (const float *)from, (const float *)to, N);
    pt_cuda_op_check(op);
}

extern "C" void pt_cuda_xent_loss(void *losses, const void *rowmax, const void *sumexp, const void *tgt, int N)
{
    const char *op = "xent_loss";
    if (!sizes_ok(op, N, "N", 0, "-") || !N || !given(op, "losses, rowmax, sumexp, tgt", {losses, rowmax, sumexp, tgt}))
        return;
    xent_loss_kernel<<<blocks_for((size_t)N), THREADS, 0, pt_cuda_stream_compute()>>>(
        (float *)losses, (const float *)rowmax, (const float *)sumexp, (const float *)tgt, N);
    pt_cuda_op_check(op);
}

extern "C" void pt_cuda_softmax_causal_fwd(void *att, int BH, int Tq, int T, int q0)
{
    const char *op = "softmax_causal_fwd";
    if (!softmax_dims_ok(op, BH, Tq, T, q0)) return;
    const size_t rows = (size_t)BH * Tq;
    if (!rows || !T || !given(op, "att", {att})) return;
    softmax_causal_fwd_kernel<<<row_blocks(rows), THREADS, 0, pt_cuda_stream_compute()>>>((float *)att, rows, Tq, T,
                                                                                          q0);
    pt_cuda_op_check(op);
}

extern "C" void pt_cuda_softmax_causal_bwd(void *datt, const void *att, double scale, int BH, int Tq, int T, int q0)
{
    const char *op = "softmax_causal_bwd";
    if (!softmax_dims_ok(op, BH, Tq, T, q0)) return;
    const size_t rows = (size_t)BH * Tq;
    if (!rows || !T || !given(op, "datt, att", {datt, att})) return;
    softmax_causal_bwd_kernel<<<row_blocks(rows), THREADS, 0, pt_cuda_stream_compute()>>>(
        (float *)datt, (const float *)att, (float)scale, rows, Tq, T, q0);
    pt_cuda_op_check(op);
}

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
    void *tmp = nullptr;
    if (failed(cudaMallocAsync(&tmp, piece * ((dhost ? ds : 0) + (shost ? ss : 0)), s), op,
               "cudaMallocAsync (staging buffer)"))
        return;
    char *td = (char *)tmp, *ts = td + (dhost ? piece * ds : 0);
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
