/* SPDX-License-Identifier: MIT */
/* ops_cuda.h's PT_CUDA_NORM_OPS: LayerNorm (whole rows and the pieces of
 * the tensor-parallel split), the materialised cross-entropy pieces and the
 * fused classifier, on device memory, for the f32 (act fp32) and bf16 (act
 * bf16) tables; ACC tensors are fp32 in both.  Semantics are ops.h's, and
 * the arithmetic follows the CPU kernels (lib/backend/cpu_ops.inc) step by
 * step: bf16 is loaded into fp32 registers and each stored ACT element is
 * rounded once (round to nearest even); the reductions that the CPU
 * accumulates in double (layernorm_rowsum, rowvar, bwd_rowsums) accumulate
 * in double here too.
 *
 * Kernel families (THREADS 256 per block everywhere):
 *  - row kernels, a warp per row (LayerNorm rows, the classifier's row
 *    statistics and dlogits over a vocabulary block): lanes stride the
 *    columns, butterfly shuffles reduce (llm.c's layernorm_forward_kernel3
 *    and fused_classifier_kernel3 learn the same layout);
 *  - the materialised cross-entropy, a block per row (rows of the whole
 *    shard, tens of thousands of columns): strided loops, a warp then a
 *    block reduction through shared memory;
 *  - LayerNorm's dw, db: column sums over N rows without atomics: blocks
 *    of 32 columns x LN_ROWS rows write partial sums to a scratch buffer
 *    (cudaMallocAsync on the compute stream), then the same block shape
 *    adds the partials (the CPU's PT_RBLK scheme, with fixed trees).
 * Every reduction's order is set by the shape alone, so results do not
 * depend on the launch or on timing.  The classifier's GEMMs are
 * pt_cuda_gemm (cuBLASLt, fp32 accumulation, fp32 logits block).
 * Sources: Ba et al. 2016 (LayerNorm), Shoeybi et al. 2019 section 3
 * (vocabulary-parallel cross-entropy), Milakov & Gimelshein 2018 (the
 * online max and sum of exp), llm.c's fused_classifier and Liger Kernel's
 * fused linear cross-entropy (Hsu et al. 2024) for the classifier. */
#include "config.h"
#include "backend/cuda/cuda_priv.h"
#include "backend/cuda/ops_cuda.h"

#include <cuda_bf16.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>

namespace {

__device__ __forceinline__ float load(const float *p, size_t i) { return p[i]; }
__device__ __forceinline__ float load(const __nv_bfloat16 *p, size_t i) { return __bfloat162float(p[i]); }
__device__ __forceinline__ void store(float *p, size_t i, float v) { p[i] = v; }
__device__ __forceinline__ void store(__nv_bfloat16 *p, size_t i, float v) { p[i] = __float2bfloat16_rn(v); }

constexpr unsigned THREADS = 256;
constexpr int WARPS = THREADS / 32;
constexpr float LN_EPS = 1e-5f;
/* rows per block of LayerNorm's column partial sums */
constexpr int LN_ROWS = 64;
constexpr int LN_YT = 8; /* thread rows of that block: (32, LN_YT) */

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
__device__ float block_sum(float v, float *sh)
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

__device__ float block_max(float v, float *sh)
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

unsigned row_blocks(int N) { return (unsigned)((N + WARPS - 1) / WARPS); }

/* ---- LayerNorm ------------------------------------------------------------------------------------ */

/* out = (x - mean) rstd w + b per row, two passes over the row as the CPU */
template <typename T>
__global__ void ln_fwd_kernel(T *out, float *mean, float *rstd, const T *inp, const T *w, const T *b, int N, int C)
{
    const int n = warp_row(), lane = threadIdx.x % 32;
    if (n >= N) return;
    const T *x = inp + (size_t)n * C;
    float s = 0.0f;
    for (int c = lane; c < C; c += 32) s += load(x, c);
    const float m = warp_sum(s) / (float)C;
    float v = 0.0f;
    for (int c = lane; c < C; c += 32) {
        float d = load(x, c) - m;
        v += d * d;
    }
    const float r = 1.0f / sqrtf(warp_sum(v) / (float)C + LN_EPS);
    T *o = out + (size_t)n * C;
    for (int c = lane; c < C; c += 32) store(o, c, (load(x, c) - m) * r * load(w, c) + load(b, c));
    if (lane == 0) {
        if (mean) mean[n] = m;
        if (rstd) rstd[n] = r;
    }
}

/* dx[n,:] += r (dy w - m1 - xhat m2): the row's input gradient from its
 * means m1 = sum(dy w)/C and m2 = sum(dy w xhat)/C (lanes of one warp) */
template <typename T>
__device__ __forceinline__ void ln_dx_row(T *__restrict__ d, const T *__restrict__ g, const T *__restrict__ x,
                                          const T *__restrict__ w, float m, float r, float m1, float m2, int Cl)
{
    for (int c = threadIdx.x % 32; c < Cl; c += 32) {
        float xhat = (load(x, c) - m) * r;
        float dn = load(w, c) * load(g, c);
        store(d, c, load(d, c) + (dn - m1 - xhat * m2) * r);
    }
}

/* layernorm_bwd's rows: the two row sums, then dinp (+=).  __restrict__
 * (dinp never overlaps dout, inp, w: ops.h) lets the loads of a row run
 * ahead of its bf16 stores: without it the bf16 kernel ran at 239 GB/s on
 * an H200, with it 2675 GB/s, bit-identical (fp32: 2548 -> 2706). */
template <typename T>
__global__ void ln_bwd_dx_kernel(T *__restrict__ dinp, const T *__restrict__ dout, const T *__restrict__ inp,
                                 const T *__restrict__ w, const float *__restrict__ mean,
                                 const float *__restrict__ rstd, int N, int C)
{
    const int n = warp_row(), lane = threadIdx.x % 32;
    if (n >= N) return;
    const T *g = dout + (size_t)n * C, *x = inp + (size_t)n * C;
    const float m = mean[n], r = rstd[n];
    float a = 0.0f, b = 0.0f;
    for (int c = lane; c < C; c += 32) {
        float norm = (load(x, c) - m) * r;
        float dn = load(w, c) * load(g, c);
        a += dn;
        b += dn * norm;
    }
    a = warp_sum(a) / (float)C;
    b = warp_sum(b) / (float)C;
    ln_dx_row(dinp + (size_t)n * C, g, x, w, m, r, a, b, C);
}

/* layernorm_bwd_apply's rows: dx (+=) from the group's row sums s [2N] */
template <typename T>
__global__ void ln_bwd_apply_dx_kernel(T *__restrict__ dx, const T *__restrict__ dy, const T *__restrict__ x,
                                       const T *__restrict__ w, const float *__restrict__ mean,
                                       const float *__restrict__ rstd, const float *__restrict__ s, int N, int Cl,
                                       int C)
{
    const int n = warp_row();
    if (n >= N) return;
    const float m1 = s[2 * (size_t)n] / (float)C, m2 = s[2 * (size_t)n + 1] / (float)C;
    ln_dx_row(dx + (size_t)n * Cl, dy + (size_t)n * Cl, x + (size_t)n * Cl, w, mean[n], rstd[n], m1, m2, Cl);
}

/* Column partial sums of dw = sum dy xhat and db = sum dy: block (32,
 * LN_YT) owns 32 columns of the row blocks blockIdx.y, + gridDim.y, ...
 * (LN_ROWS rows each); part [nblk][2][C] gets each row block's sums (a
 * fixed tree over the thread rows). */
template <typename T>
__global__ void ln_colpart_kernel(float *part, const T *dy, const T *x, const float *mean, const float *rstd, int N,
                                  int C, int nblk)
{
    __shared__ float sw[LN_YT][33], sb[LN_YT][33];
    const int c = blockIdx.x * 32 + threadIdx.x;
    for (int k = blockIdx.y; k < nblk; k += gridDim.y) {
        const int r1 = (k + 1) * LN_ROWS < N ? (k + 1) * LN_ROWS : N;
        float aw = 0.0f, ab = 0.0f;
        if (c < C)
            for (int n = k * LN_ROWS + (int)threadIdx.y; n < r1; n += LN_YT) {
                const size_t i = (size_t)n * C + c;
                const float g = load(dy, i);
                aw += g * ((load(x, i) - mean[n]) * rstd[n]);
                ab += g;
            }
        sw[threadIdx.y][threadIdx.x] = aw;
        sb[threadIdx.y][threadIdx.x] = ab;
        __syncthreads();
        for (int h = LN_YT / 2; h > 0; h /= 2) {
            if ((int)threadIdx.y < h) {
                sw[threadIdx.y][threadIdx.x] += sw[threadIdx.y + h][threadIdx.x];
                sb[threadIdx.y][threadIdx.x] += sb[threadIdx.y + h][threadIdx.x];
            }
            __syncthreads();
        }
        if (threadIdx.y == 0 && c < C) {
            part[(size_t)k * 2 * C + c] = sw[0][threadIdx.x];
            part[(size_t)k * 2 * C + C + c] = sb[0][threadIdx.x];
        }
        __syncthreads();
    }
}

/* dw[c] += the sum over row blocks of part, db alike: block (32, LN_YT)
 * owns 32 columns, thread row y sums blocks y, y + LN_YT, ... in order,
 * then a fixed tree over the thread rows */
__global__ void ln_colsum_kernel(float *dw, float *db, const float *part, int C, int nblk)
{
    __shared__ float sw[LN_YT][33], sb[LN_YT][33];
    const int c = blockIdx.x * 32 + threadIdx.x;
    float aw = 0.0f, ab = 0.0f;
    if (c < C)
        for (int k = threadIdx.y; k < nblk; k += LN_YT) {
            aw += part[(size_t)k * 2 * C + c];
            ab += part[(size_t)k * 2 * C + C + c];
        }
    sw[threadIdx.y][threadIdx.x] = aw;
    sb[threadIdx.y][threadIdx.x] = ab;
    __syncthreads();
    for (int h = LN_YT / 2; h > 0; h /= 2) {
        if ((int)threadIdx.y < h) {
            sw[threadIdx.y][threadIdx.x] += sw[threadIdx.y + h][threadIdx.x];
            sb[threadIdx.y][threadIdx.x] += sb[threadIdx.y + h][threadIdx.x];
        }
        __syncthreads();
    }
    if (threadIdx.y == 0 && c < C) {
        if (dw) dw[c] += sw[0][threadIdx.x];
        if (db) db[c] += sb[0][threadIdx.x];
    }
}

/* sum[n] = sum_c x[n,c], accumulated in double (the CPU's) */
template <typename T>
__global__ void ln_rowsum_kernel(float *sum, const T *x, int N, int Cl)
{
    const int n = warp_row(), lane = threadIdx.x % 32;
    if (n >= N) return;
    const T *xr = x + (size_t)n * Cl;
    double s = 0.0;
    for (int c = lane; c < Cl; c += 32) s += (double)load(xr, c);
    s = warp_sum(s);
    if (lane == 0) sum[n] = (float)s;
}

/* mean[n] = sum[n]/C; sqsum[n] = sum_c (x - mean)^2 (double); mean or sqsum
 * may be sum: every lane reads sum[n] before lane 0 writes */
template <typename T>
__global__ void ln_rowvar_kernel(float *mean, float *sqsum, const T *x, const float *sum, int N, int Cl, int C)
{
    const int n = warp_row(), lane = threadIdx.x % 32;
    if (n >= N) return;
    const T *xr = x + (size_t)n * Cl;
    const float m = sum[n] / (float)C;
    double v = 0.0;
    for (int c = lane; c < Cl; c += 32) {
        double d = (double)(load(xr, c) - m);
        v += d * d;
    }
    v = warp_sum(v);
    __syncwarp();
    if (lane == 0) {
        mean[n] = m;
        sqsum[n] = (float)v;
    }
}

/* rstd[n] = 1/sqrt(sqsum[n]/C + eps) (rstd may be sqsum: read, sync, write);
 * out = (x - mean) rstd w + b */
template <typename T>
__global__ void ln_apply_kernel(T *out, float *rstd, const T *x, const float *mean, const float *sqsum, const T *w,
                                const T *b, int N, int Cl, int C)
{
    const int n = warp_row(), lane = threadIdx.x % 32;
    if (n >= N) return;
    const float m = mean[n], r = 1.0f / sqrtf(sqsum[n] / (float)C + LN_EPS);
    __syncwarp();
    if (lane == 0) rstd[n] = r;
    const T *xr = x + (size_t)n * Cl;
    T *o = out + (size_t)n * Cl;
    for (int c = lane; c < Cl; c += 32) store(o, c, (load(xr, c) - m) * r * load(w, c) + load(b, c));
}

/* s[2n] = sum dy w, s[2n+1] = sum dy w xhat (double) */
template <typename T>
__global__ void ln_bwd_rowsums_kernel(float *s, const T *dy, const T *x, const T *w, const float *mean,
                                      const float *rstd, int N, int Cl)
{
    const int n = warp_row(), lane = threadIdx.x % 32;
    if (n >= N) return;
    const T *g = dy + (size_t)n * Cl, *xr = x + (size_t)n * Cl;
    const float m = mean[n], r = rstd[n];
    double s1 = 0.0, s2 = 0.0;
    for (int c = lane; c < Cl; c += 32) {
        float xhat = (load(xr, c) - m) * r;
        float dn = load(g, c) * load(w, c);
        s1 += (double)dn;
        s2 += (double)(dn * xhat);
    }
    s1 = warp_sum(s1);
    s2 = warp_sum(s2);
    if (lane == 0) {
        s[2 * (size_t)n] = (float)s1;
        s[2 * (size_t)n + 1] = (float)s2;
    }
}

/* ---- the cross-entropy ------------------------------------------------------------------------------ */

/* unpadded ids of a shard starting at v0, width Vl (the CPU's xent_width) */
int xent_width(int v0, int vreal, int Vl)
{
    int w = vreal - v0;
    return w < 0 ? 0 : (w > Vl ? Vl : w);
}

/* a block per row (grid-stride over rows) */
template <typename T>
__global__ void xent_max_kernel(float *rowmax, const T *logits, int N, int Vl, int W)
{
    __shared__ float sh[WARPS + 1];
    for (int n = blockIdx.x; n < N; n += gridDim.x) {
        const T *l = logits + (size_t)n * Vl;
        float m = -INFINITY;
        for (int v = threadIdx.x; v < W; v += THREADS) m = fmax_cpu(m, load(l, v));
        m = block_max(m, sh);
        if (threadIdx.x == 0) rowmax[n] = m;
    }
}

template <typename T>
__global__ void xent_sumexp_kernel(float *sumexp, float *tgt, const T *logits, const float *rowmax,
                                   const int32_t *targets, int v0, int N, int Vl, int W)
{
    __shared__ float sh[WARPS + 1];
    for (int n = blockIdx.x; n < N; n += gridDim.x) {
        const T *l = logits + (size_t)n * Vl;
        const float m = rowmax[n];
        float s = 0.0f;
        for (int v = threadIdx.x; v < W; v += THREADS) s += expf(load(l, v) - m);
        s = block_sum(s, sh);
        if (threadIdx.x == 0) {
            const long id = (long)targets[n] - v0;
            sumexp[n] = s;
            tgt[n] = id >= 0 && id < W ? load(l, (size_t)id) : 0.0f;
        }
    }
}

/* element-wise: each element reads only its own logit (so dlogits may be
 * logits); padded ids get 0 */
template <typename T>
__global__ void xent_bwd_kernel(T *dlogits, const T *logits, const float *rowmax, const float *sumexp,
                                const int32_t *targets, const float *dloss, int v0, int N, int Vl, int W)
{
    for (int n = blockIdx.x; n < N; n += gridDim.x) {
        const T *l = logits + (size_t)n * Vl;
        T *d = dlogits + (size_t)n * Vl;
        const float m = rowmax[n], inv = 1.0f / sumexp[n], g = dloss[n];
        const long id = (long)targets[n] - v0;
        for (int v = threadIdx.x; v < Vl; v += THREADS) {
            float r = 0.0f;
            if (v < W) {
                const float e = expf(load(l, v) - m);
                r = v == id ? (e * inv - 1.0f) * g : e * (inv * g);
            }
            store(d, v, r);
        }
    }
}

unsigned row_grid(int N) { return (unsigned)(N < 65536 * 16 ? N : 65536 * 16); }

/* ---- the fused classifier --------------------------------------------------------------------------- */

__global__ void cls_init_kernel(float *stats, int N)
{
    for (int n = blockIdx.x * blockDim.x + threadIdx.x; n < N; n += gridDim.x * blockDim.x) {
        stats[n] = -INFINITY;
        stats[(size_t)N + n] = 0.0f;
        stats[2 * (size_t)N + n] = 0.0f;
    }
}

/* one block's online max and sum of exp and target logit per row (the
 * CPU's classifier_stats_rows): logits l = work row n (stride vb), nb
 * columns, vocabulary id of column 0 vofs */
__global__ void cls_stats_kernel(float *stats, const float *work, int vb, int nb, int N, const int32_t *targets,
                                 long vofs)
{
    const int n = warp_row(), lane = threadIdx.x % 32;
    if (n >= N) return;
    const float *l = work + (size_t)n * vb;
    float bm = -INFINITY;
    for (int c = lane; c < nb; c += 32) bm = fmax_cpu(bm, l[c]);
    bm = warp_max(bm);
    const float mo = stats[n], so = stats[(size_t)N + n], mn = bm > mo ? bm : mo;
    float s = 0.0f;
    for (int c = lane; c < nb; c += 32) s += expf(l[c] - mn);
    s = warp_sum(s);
    __syncwarp();
    if (lane == 0) {
        stats[n] = mn;
        stats[(size_t)N + n] = (mo == -INFINITY ? 0.0f : so * expf(mo - mn)) + s;
        const long id = (long)targets[n] - vofs;
        if (id >= 0 && id < nb) stats[2 * (size_t)N + n] = l[id];
    }
}

/* dlogits of a block in place (the CPU's classifier_dlogits_rows), written
 * as O: float at the logits' places, or bf16 at the start of each row
 * (row stride 2 vb bf16 elements, the CPU's layout).  A bf16 element c
 * overlaps float c/2 <= c, so the warp reads its 32 floats, syncs, then
 * writes their 32 bf16: every float is read before any write reaches it. */
template <typename O>
__global__ void cls_dlogits_kernel(float *work, int vb, int nb, int N, const float *stats, const float *dloss,
                                   const int32_t *targets, long vofs)
{
    const int n = warp_row(), lane = threadIdx.x % 32;
    if (n >= N) return;
    const float *l = work + (size_t)n * vb;
    O *d = (O *)(work + (size_t)n * vb);
    const float m = stats[n], inv = 1.0f / stats[(size_t)N + n], g = dloss[n];
    const long id = (long)targets[n] - vofs;
    for (int c0 = 0; c0 < nb; c0 += 32) {
        const int c = c0 + lane;
        float r = 0.0f;
        if (c < nb) {
            const float e = expf(l[c] - m);
            r = c == id ? (e * inv - 1.0f) * g : e * (inv * g);
        }
        __syncwarp();
        if (c < nb) store(d, c, r);
        __syncwarp();
    }
}

/* dx [n] (ACT) += acc [n] (fp32), rounded once */
template <typename T>
__global__ void add_acc_kernel(T *dx, const float *acc, size_t n)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        store(dx, i, load(dx, i) + acc[i]);
}

unsigned blocks_for(size_t n)
{
    size_t b = (n + THREADS - 1) / THREADS;
    return (unsigned)(b < 65536 ? (b ? b : 1) : 65536);
}

template <typename T> struct elem_of;
template <> struct elem_of<float> {
    static constexpr int value = PT_GEMM_F32;
};
template <> struct elem_of<__nv_bfloat16> {
    static constexpr int value = PT_GEMM_BF16;
};

/* ---- host side -------------------------------------------------------------------------------------- */

/* a bad argument: the one-line message (op, the values, what is valid)
 * recorded, 1 (the op returns) */
__attribute__((format(printf, 3, 4))) int bad(const char *op, int ok, const char *fmt, ...)
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
int bad_rows(const char *op, int N, int C)
{
    return bad(op, N >= 0 && C >= 1, "N %d, C %d are not valid (valid: N >= 0, C >= 1)", N, C);
}

/* N rows of a piece of Cl of C columns */
int bad_piece(const char *op, int N, int Cl, int C)
{
    return bad(op, N >= 0 && C >= 1 && Cl >= 0 && Cl <= C,
               "N %d, Cl %d, C %d are not valid (valid: N >= 0, 0 <= Cl <= C, C >= 1)", N, Cl, C);
}

/* dw, db [C] += column sums over N rows of dy xhat and dy, without atomics
 * (partials per LN_ROWS rows in a stream-ordered scratch, then their sum) */
template <typename T>
int ln_dwdb(float *dw, float *db, const T *dy, const T *x, const float *mean, const float *rstd, int N, int C,
            cudaStream_t st)
{
    if (!dw && !db) return PT_OK;
    const int nblk = (N + LN_ROWS - 1) / LN_ROWS;
    float *part = NULL;
    const size_t bytes = sizeof(float) * 2 * (size_t)C * (size_t)nblk;
    cudaError_t e = cudaMallocAsync((void **)&part, bytes, st);
    if (e != cudaSuccess) return pt_cuda_fail(e, "cudaMallocAsync(%zu bytes of LayerNorm partial sums)", bytes);
    const dim3 grid((unsigned)((C + 31) / 32), (unsigned)(nblk < 65535 ? nblk : 65535)), block(32, LN_YT);
    ln_colpart_kernel<T><<<grid, block, 0, st>>>(part, dy, x, mean, rstd, N, C, nblk);
    ln_colsum_kernel<<<grid.x, block, 0, st>>>(dw, db, part, C, nblk);
    e = cudaFreeAsync(part, st);
    return e == cudaSuccess ? PT_OK : pt_cuda_fail(e, "cudaFreeAsync(LayerNorm partial sums)");
}

template <typename T>
void layernorm_fwd(void *out, void *mean, void *rstd, const void *inp, const void *w, const void *b, int N, int C)
{
    const char *op = "layernorm_fwd";
    if (bad_rows(op, N, C) || !N) return;
    ln_fwd_kernel<T><<<row_blocks(N), THREADS, 0, pt_cuda_stream_compute()>>>(
        (T *)out, (float *)mean, (float *)rstd, (const T *)inp, (const T *)w, (const T *)b, N, C);
    pt_cuda_op_check(op);
}

template <typename T>
void layernorm_bwd(void *dinp, void *dw, void *db, const void *dout, const void *inp, const void *w, const void *mean,
                   const void *rstd, int N, int C)
{
    const char *op = "layernorm_bwd";
    if (bad_rows(op, N, C) || !N) return;
    cudaStream_t st = pt_cuda_stream_compute();
    if (dinp)
        ln_bwd_dx_kernel<T><<<row_blocks(N), THREADS, 0, st>>>((T *)dinp, (const T *)dout, (const T *)inp,
                                                               (const T *)w, (const float *)mean,
                                                               (const float *)rstd, N, C);
    if (pt_cuda_op_check(op) != PT_OK) return;
    pt_cuda_op_record(ln_dwdb<T>((float *)dw, (float *)db, (const T *)dout, (const T *)inp, (const float *)mean,
                                 (const float *)rstd, N, C, st),
                      op);
    pt_cuda_op_check(op);
}

template <typename T>
void layernorm_rowsum(void *sum, const void *x, int N, int Cl)
{
    const char *op = "layernorm_rowsum";
    if (bad(op, N >= 0 && Cl >= 0, "N %d, Cl %d are not valid (valid: >= 0)", N, Cl) || !N) return;
    ln_rowsum_kernel<T><<<row_blocks(N), THREADS, 0, pt_cuda_stream_compute()>>>((float *)sum, (const T *)x, N, Cl);
    pt_cuda_op_check(op);
}

template <typename T>
void layernorm_rowvar(void *mean, void *sqsum, const void *x, const void *sum, int N, int Cl, int C)
{
    const char *op = "layernorm_rowvar";
    if (bad_piece(op, N, Cl, C) || !N) return;
    ln_rowvar_kernel<T><<<row_blocks(N), THREADS, 0, pt_cuda_stream_compute()>>>(
        (float *)mean, (float *)sqsum, (const T *)x, (const float *)sum, N, Cl, C);
    pt_cuda_op_check(op);
}

template <typename T>
void layernorm_apply(void *out, void *rstd, const void *x, const void *mean, const void *sqsum, const void *w,
                     const void *b, int N, int Cl, int C)
{
    const char *op = "layernorm_apply";
    if (bad_piece(op, N, Cl, C) || !N) return;
    ln_apply_kernel<T><<<row_blocks(N), THREADS, 0, pt_cuda_stream_compute()>>>(
        (T *)out, (float *)rstd, (const T *)x, (const float *)mean, (const float *)sqsum, (const T *)w, (const T *)b,
        N, Cl, C);
    pt_cuda_op_check(op);
}

template <typename T>
void layernorm_bwd_rowsums(void *s, const void *dy, const void *x, const void *w, const void *mean, const void *rstd,
                           int N, int Cl)
{
    const char *op = "layernorm_bwd_rowsums";
    if (bad(op, N >= 0 && Cl >= 0, "N %d, Cl %d are not valid (valid: >= 0)", N, Cl) || !N) return;
    ln_bwd_rowsums_kernel<T><<<row_blocks(N), THREADS, 0, pt_cuda_stream_compute()>>>(
        (float *)s, (const T *)dy, (const T *)x, (const T *)w, (const float *)mean, (const float *)rstd, N, Cl);
    pt_cuda_op_check(op);
}

template <typename T>
void layernorm_bwd_apply(void *dx, void *dw, void *db, const void *dy, const void *x, const void *w, const void *mean,
                         const void *rstd, const void *s, int N, int Cl, int C)
{
    const char *op = "layernorm_bwd_apply";
    if (bad_piece(op, N, Cl, C) || !N || !Cl) return;
    cudaStream_t st = pt_cuda_stream_compute();
    if (dx)
        ln_bwd_apply_dx_kernel<T><<<row_blocks(N), THREADS, 0, st>>>((T *)dx, (const T *)dy, (const T *)x,
                                                                     (const T *)w, (const float *)mean,
                                                                     (const float *)rstd, (const float *)s, N, Cl, C);
    if (pt_cuda_op_check(op) != PT_OK) return;
    pt_cuda_op_record(ln_dwdb<T>((float *)dw, (float *)db, (const T *)dy, (const T *)x, (const float *)mean,
                                 (const float *)rstd, N, Cl, st),
                      op);
    pt_cuda_op_check(op);
}

template <typename T>
void xent_max(void *rowmax, const void *logits, int v0, int vreal, int N, int Vl)
{
    const char *op = "xent_max";
    if (bad(op, N >= 0 && Vl >= 0, "N %d, Vl %d are not valid (valid: >= 0)", N, Vl) || !N) return;
    xent_max_kernel<T><<<row_grid(N), THREADS, 0, pt_cuda_stream_compute()>>>((float *)rowmax, (const T *)logits, N,
                                                                              Vl, xent_width(v0, vreal, Vl));
    pt_cuda_op_check(op);
}

template <typename T>
void xent_sumexp(void *sumexp, void *tgt, const void *logits, const void *rowmax, const int32_t *targets, int v0,
                 int vreal, int N, int Vl)
{
    const char *op = "xent_sumexp";
    if (bad(op, N >= 0 && Vl >= 0, "N %d, Vl %d are not valid (valid: >= 0)", N, Vl) || !N) return;
    xent_sumexp_kernel<T><<<row_grid(N), THREADS, 0, pt_cuda_stream_compute()>>>(
        (float *)sumexp, (float *)tgt, (const T *)logits, (const float *)rowmax, targets, v0, N, Vl,
        xent_width(v0, vreal, Vl));
    pt_cuda_op_check(op);
}

template <typename T>
void xent_bwd(void *dlogits, const void *logits, const void *rowmax, const void *sumexp, const int32_t *targets,
              const void *dloss, int v0, int vreal, int N, int Vl)
{
    const char *op = "xent_bwd";
    if (bad(op, N >= 0 && Vl >= 0, "N %d, Vl %d are not valid (valid: >= 0)", N, Vl) || !N || !Vl) return;
    xent_bwd_kernel<T><<<row_grid(N), THREADS, 0, pt_cuda_stream_compute()>>>(
        (T *)dlogits, (const T *)logits, (const float *)rowmax, (const float *)sumexp, targets,
        (const float *)dloss, v0, N, Vl, xent_width(v0, vreal, Vl));
    pt_cuda_op_check(op);
}

/* the classifier's arguments (ops.h), checked: 1 when bad (recorded) */
int cls_bad(const char *op, int vb, int N, int C, int Vl, int ks)
{
    return bad(op, N >= 0 && Vl >= 0, "N %d, Vl %d are not valid (valid: >= 0)", N, Vl) ||
           bad(op, ks >= 1 && C >= ks && C % ks == 0, "C %d, ks %d are not valid (valid: ks >= 1 dividing C)", C, ks) ||
           bad(op, vb >= 1, "vb %d is not valid (valid: >= 1)", vb);
}

/* work [N, vb] (fp32) = logits of vocabulary columns [v, v+nb): the sum over
 * the ks pieces of x_s w_s[v..v+nb)^T */
template <typename T>
int cls_logits(float *work, int vb, const T *x, const T *w, int v, int nb, int N, int Ck, int Vl, int ks)
{
    for (int s = 0; s < ks; s++) {
        int rc = pt_cuda_gemm(0, 1, N, nb, Ck, 1.0f, x + (size_t)s * N * Ck, Ck, 0, w + ((size_t)s * Vl + v) * Ck,
                              Ck, 0, s ? 1.0f : 0.0f, work, vb, 0, 1, elem_of<T>::value, PT_GEMM_F32);
        if (rc != PT_OK) return rc;
    }
    return PT_OK;
}

template <typename T>
void classifier_fwd(void *stats_, const void *x_, const void *w_, const int32_t *targets, void *work_, int vb, int v0,
                    int vreal, int N, int C, int Vl, int ks)
{
    const char *op = "classifier_fwd";
    if (cls_bad(op, vb, N, C, Vl, ks) || !N) return;
    float *stats = (float *)stats_, *work = (float *)work_;
    const T *x = (const T *)x_, *w = (const T *)w_;
    const int W = xent_width(v0, vreal, Vl), Ck = C / ks;
    cudaStream_t st = pt_cuda_stream_compute();
    cls_init_kernel<<<blocks_for((size_t)N), THREADS, 0, st>>>(stats, N);
    if (pt_cuda_op_check(op) != PT_OK) return;
    for (int v = 0; v < W; v += vb) {
        const int nb = W - v < vb ? W - v : vb;
        int rc = cls_logits<T>(work, vb, x, w, v, nb, N, Ck, Vl, ks);
        if (rc != PT_OK) {
            pt_cuda_op_record(rc, op);
            return;
        }
        cls_stats_kernel<<<row_blocks(N), THREADS, 0, st>>>(stats, work, vb, nb, N, targets, (long)v0 + v);
        if (pt_cuda_op_check(op) != PT_OK) return;
    }
}

/* Backward: per block the logits again, dlogits in place, dx += dlogits w,
 * dw += dlogits^T x.  bf16 (T != float): the dlogits are rounded to bf16 in
 * place (row stride 2 vb) for both GEMMs, and dx accumulates in fp32 in
 * work's second part [ks][N][Ck] before one rounding, as the CPU's table. */
template <typename T>
void classifier_bwd(void *dx_, void *dw_, const void *x_, const void *w_, const void *stats_, const int32_t *targets,
                    const void *dloss_, void *work_, int vb, int v0, int vreal, int N, int C, int Vl, int ks)
{
    const char *op = "classifier_bwd";
    if (cls_bad(op, vb, N, C, Vl, ks) || !N || (!dx_ && !dw_)) return;
    constexpr bool narrow = elem_of<T>::value == PT_GEMM_BF16;
    T *dx = (T *)dx_;
    float *dw = (float *)dw_, *work = (float *)work_;
    const T *x = (const T *)x_, *w = (const T *)w_;
    const float *stats = (const float *)stats_, *dloss = (const float *)dloss_;
    const int W = xent_width(v0, vreal, Vl), Ck = C / ks;
    const size_t nx = (size_t)N * C;
    float *dxacc = narrow ? work + (size_t)N * vb : NULL;
    const void *dl = work;                /* the block's dlogits: fp32, or bf16 at row stride 2 vb */
    const int ldl = narrow ? 2 * vb : vb; /* in elements of dl */
    cudaStream_t st = pt_cuda_stream_compute();
    if (narrow && dx) {
        cudaError_t e = cudaMemsetAsync(dxacc, 0, sizeof(float) * nx, st);
        if (e != cudaSuccess) {
            pt_cuda_op_record(pt_cuda_fail(e, "cudaMemsetAsync(%zu bytes of the dx accumulator)", sizeof(float) * nx),
                              op);
            return;
        }
    }
    for (int v = 0; v < W; v += vb) {
        const int nb = W - v < vb ? W - v : vb;
        int rc = cls_logits<T>(work, vb, x, w, v, nb, N, Ck, Vl, ks);
        if (rc != PT_OK) {
            pt_cuda_op_record(rc, op);
            return;
        }
        if (narrow)
            cls_dlogits_kernel<__nv_bfloat16><<<row_blocks(N), THREADS, 0, st>>>(work, vb, nb, N, stats, dloss,
                                                                                 targets, (long)v0 + v);
        else
            cls_dlogits_kernel<float><<<row_blocks(N), THREADS, 0, st>>>(work, vb, nb, N, stats, dloss, targets,
                                                                         (long)v0 + v);
        if (pt_cuda_op_check(op) != PT_OK) return;
        for (int s = 0; s < ks && rc == PT_OK; s++) {
            if (dx)
                rc = pt_cuda_gemm(0, 0, N, Ck, nb, 1.0f, dl, ldl, 0, w + ((size_t)s * Vl + v) * Ck, Ck, 0, 1.0f,
                                  narrow ? (void *)(dxacc + (size_t)s * N * Ck) : (void *)(dx + (size_t)s * N * Ck),
                                  Ck, 0, 1, elem_of<T>::value, PT_GEMM_F32);
            if (dw && rc == PT_OK)
                rc = pt_cuda_gemm(1, 0, nb, Ck, N, 1.0f, dl, ldl, 0, x + (size_t)s * N * Ck, Ck, 0, 1.0f,
                                  dw + ((size_t)s * Vl + v) * Ck, Ck, 0, 1, elem_of<T>::value, PT_GEMM_F32);
        }
        if (rc != PT_OK) {
            pt_cuda_op_record(rc, op);
            return;
        }
    }
    if (narrow && dx) {
        add_acc_kernel<T><<<blocks_for(nx), THREADS, 0, st>>>(dx, dxacc, nx);
        pt_cuda_op_check(op);
    }
}

/* The chunked classifier (ops.h classifier_rows_fwd/bwd): the chunk's
 * logits [R, W] in one GEMM into the [R, Vl] buffer, the row statistics
 * over all W columns with the block kernels (cls_stats_kernel with one
 * block of W columns, from the initial -inf, 0, 0), dlogits in place
 * (cls_dlogits_kernel over W columns: bf16 at row stride 2 Vl), then dX
 * and dW as one GEMM each.  work: the bf16 table's fp32 dX accumulator [R,
 * C] (pt_classifier_rows_work_elems holds at least that); unused in fp32.
 * The row reductions' order is set by the shape alone, as the block
 * classifier's. */
template <typename T>
void classifier_rows_fwd(void *stats_, void *logits_, const void *x_, const void *w_, const int32_t *targets,
                         void *work_, int v0, int vreal, int R, int C, int Vl)
{
    const char *op = "classifier_rows_fwd";
    (void)work_;
    if (cls_bad(op, 1, R, C, Vl, 1) || !R) return;
    float *stats = (float *)stats_, *lg = (float *)logits_;
    const int W = xent_width(v0, vreal, Vl);
    cudaStream_t st = pt_cuda_stream_compute();
    cls_init_kernel<<<blocks_for((size_t)R), THREADS, 0, st>>>(stats, R);
    if (pt_cuda_op_check(op) != PT_OK || W <= 0) return;
    int rc = pt_cuda_gemm(0, 1, R, W, C, 1.0f, x_, C, 0, w_, C, 0, 0.0f, lg, Vl, 0, 1, elem_of<T>::value, PT_GEMM_F32);
    if (rc != PT_OK) {
        pt_cuda_op_record(rc, op);
        return;
    }
    cls_stats_kernel<<<row_blocks(R), THREADS, 0, st>>>(stats, lg, Vl, W, R, targets, (long)v0);
    pt_cuda_op_check(op);
}

template <typename T>
void classifier_rows_bwd(void *dx_, void *dw_, const void *x_, const void *w_, void *logits_, const void *stats_,
                         const int32_t *targets, const void *dloss_, void *work_, int v0, int vreal, int R, int C,
                         int Vl)
{
    const char *op = "classifier_rows_bwd";
    if (cls_bad(op, 1, R, C, Vl, 1) || !R || (!dx_ && !dw_)) return;
    constexpr bool narrow = elem_of<T>::value == PT_GEMM_BF16;
    const int W = xent_width(v0, vreal, Vl);
    if (W <= 0) return;
    T *dx = (T *)dx_;
    float *dw = (float *)dw_, *lg = (float *)logits_, *acc = (float *)work_;
    const float *stats = (const float *)stats_, *dloss = (const float *)dloss_;
    cudaStream_t st = pt_cuda_stream_compute();
    if (narrow)
        cls_dlogits_kernel<__nv_bfloat16><<<row_blocks(R), THREADS, 0, st>>>(lg, Vl, W, R, stats, dloss, targets,
                                                                             (long)v0);
    else
        cls_dlogits_kernel<float><<<row_blocks(R), THREADS, 0, st>>>(lg, Vl, W, R, stats, dloss, targets, (long)v0);
    if (pt_cuda_op_check(op) != PT_OK) return;
    const int ldl = narrow ? 2 * Vl : Vl; /* the dlogits' row stride in their elements */
    int rc = PT_OK;
    if (dx)
        rc = pt_cuda_gemm(0, 0, R, C, W, 1.0f, lg, ldl, 0, w_, C, 0, narrow ? 0.0f : 1.0f,
                          narrow ? (void *)acc : (void *)dx, C, 0, 1, elem_of<T>::value, PT_GEMM_F32);
    if (dw && rc == PT_OK)
        rc = pt_cuda_gemm(1, 0, W, C, R, 1.0f, lg, ldl, 0, x_, C, 0, 1.0f, dw, C, 0, 1, elem_of<T>::value, PT_GEMM_F32);
    if (rc != PT_OK) {
        pt_cuda_op_record(rc, op);
        return;
    }
    if (narrow && dx) {
        add_acc_kernel<T><<<blocks_for((size_t)R * C), THREADS, 0, st>>>(dx, acc, (size_t)R * C);
        pt_cuda_op_check(op);
    }
}

} // namespace

#define PT_CUDA_NORM_ENTRIES(S, T)                                                                                    \
    extern "C" void pt_cuda_layernorm_fwd_##S(void *out, void *mean, void *rstd, const void *inp, const void *w,      \
                                              const void *b, int N, int C)                                           \
    {                                                                                                                 \
        layernorm_fwd<T>(out, mean, rstd, inp, w, b, N, C);                                                           \
    }                                                                                                                 \
    extern "C" void pt_cuda_layernorm_bwd_##S(void *dinp, void *dw, void *db, const void *dout, const void *inp,     \
                                              const void *w, const void *mean, const void *rstd, int N, int C)       \
    {                                                                                                                 \
        layernorm_bwd<T>(dinp, dw, db, dout, inp, w, mean, rstd, N, C);                                               \
    }                                                                                                                 \
    extern "C" void pt_cuda_layernorm_rowsum_##S(void *sum, const void *x, int N, int Cl)                            \
    {                                                                                                                 \
        layernorm_rowsum<T>(sum, x, N, Cl);                                                                           \
    }                                                                                                                 \
    extern "C" void pt_cuda_layernorm_rowvar_##S(void *mean, void *sqsum, const void *x, const void *sum, int N,     \
                                                 int Cl, int C)                                                       \
    {                                                                                                                 \
        layernorm_rowvar<T>(mean, sqsum, x, sum, N, Cl, C);                                                           \
    }                                                                                                                 \
    extern "C" void pt_cuda_layernorm_apply_##S(void *out, void *rstd, const void *x, const void *mean,              \
                                                const void *sqsum, const void *w, const void *b, int N, int Cl,      \
                                                int C)                                                                \
    {                                                                                                                 \
        layernorm_apply<T>(out, rstd, x, mean, sqsum, w, b, N, Cl, C);                                                \
    }                                                                                                                 \
    extern "C" void pt_cuda_layernorm_bwd_rowsums_##S(void *s, const void *dy, const void *x, const void *w,         \
                                                      const void *mean, const void *rstd, int N, int Cl)             \
    {                                                                                                                 \
        layernorm_bwd_rowsums<T>(s, dy, x, w, mean, rstd, N, Cl);                                                     \
    }                                                                                                                 \
    extern "C" void pt_cuda_layernorm_bwd_apply_##S(void *dx, void *dw, void *db, const void *dy, const void *x,     \
                                                    const void *w, const void *mean, const void *rstd,               \
                                                    const void *s, int N, int Cl, int C)                             \
    {                                                                                                                 \
        layernorm_bwd_apply<T>(dx, dw, db, dy, x, w, mean, rstd, s, N, Cl, C);                                        \
    }                                                                                                                 \
    extern "C" void pt_cuda_xent_max_##S(void *rowmax, const void *logits, int v0, int vreal, int N, int Vl)         \
    {                                                                                                                 \
        xent_max<T>(rowmax, logits, v0, vreal, N, Vl);                                                                \
    }                                                                                                                 \
    extern "C" void pt_cuda_xent_sumexp_##S(void *sumexp, void *tgt, const void *logits, const void *rowmax,         \
                                            const int32_t *targets, int v0, int vreal, int N, int Vl)                \
    {                                                                                                                 \
        xent_sumexp<T>(sumexp, tgt, logits, rowmax, targets, v0, vreal, N, Vl);                                       \
    }                                                                                                                 \
    extern "C" void pt_cuda_xent_bwd_##S(void *dlogits, const void *logits, const void *rowmax, const void *sumexp,  \
                                         const int32_t *targets, const void *dloss, int v0, int vreal, int N, int Vl) \
    {                                                                                                                 \
        xent_bwd<T>(dlogits, logits, rowmax, sumexp, targets, dloss, v0, vreal, N, Vl);                               \
    }                                                                                                                 \
    extern "C" void pt_cuda_classifier_fwd_##S(void *stats, const void *x, const void *w, const int32_t *targets,    \
                                               void *work, int vb, int v0, int vreal, int N, int C, int Vl, int ks)  \
    {                                                                                                                 \
        classifier_fwd<T>(stats, x, w, targets, work, vb, v0, vreal, N, C, Vl, ks);                                   \
    }                                                                                                                 \
    extern "C" void pt_cuda_classifier_bwd_##S(void *dx, void *dw, const void *x, const void *w, const void *stats,  \
                                               const int32_t *targets, const void *dloss, void *work, int vb, int v0, \
                                               int vreal, int N, int C, int Vl, int ks)                              \
    {                                                                                                                 \
        classifier_bwd<T>(dx, dw, x, w, stats, targets, dloss, work, vb, v0, vreal, N, C, Vl, ks);                    \
    }                                                                                                                 \
    extern "C" void pt_cuda_classifier_rows_fwd_##S(void *stats, void *logits, const void *x, const void *w,         \
                                                    const int32_t *targets, void *work, int v0, int vreal, int R,    \
                                                    int C, int Vl)                                                   \
    {                                                                                                                 \
        classifier_rows_fwd<T>(stats, logits, x, w, targets, work, v0, vreal, R, C, Vl);                              \
    }                                                                                                                 \
    extern "C" void pt_cuda_classifier_rows_bwd_##S(void *dx, void *dw, const void *x, const void *w, void *logits,  \
                                                    const void *stats, const int32_t *targets, const void *dloss,    \
                                                    void *work, int v0, int vreal, int R, int C, int Vl)             \
    {                                                                                                                 \
        classifier_rows_bwd<T>(dx, dw, x, w, logits, stats, targets, dloss, work, v0, vreal, R, C, Vl);               \
    }
PT_CUDA_NORM_ENTRIES(f32, float)
PT_CUDA_NORM_ENTRIES(bf16, __nv_bfloat16)
