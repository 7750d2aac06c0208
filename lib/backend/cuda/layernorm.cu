/* SPDX-License-Identifier: MIT */
/* The norm family (ops.h PT_FAM_NORM): LayerNorm (Ba et al. 2016) and
 * RMSNorm (Zhang & Sennrich 2019), whole rows and the pieces of the
 * tensor-parallel split, on device memory,
 * for the f32 (act fp32) and bf16 (act bf16) tables; ACC tensors are fp32
 * in both.  The arithmetic follows the CPU kernels (cpu_ops.inc) step by
 * step: bf16 is loaded into fp32 registers and each stored ACT element is
 * rounded once; the reductions the CPU accumulates in double (rowsum,
 * rowvar, bwd_rowsums) accumulate in double here too.
 *  - row kernels, a warp per row: lanes stride the columns, butterfly
 *    shuffles reduce (llm.c's layernorm_forward_kernel3);
 *  - dw, db: column sums over N rows without atomics: blocks of 32 columns
 *    x LN_ROWS rows write partial sums to a scratch buffer (cudaMallocAsync
 *    on the compute stream), then the same block shape adds the partials
 *    (the CPU's PT_RBLK scheme, with fixed trees).
 * Every reduction's order is set by the shape alone. */
#include "config.h"
#include "backend/cuda/kernels.cuh"

namespace {
using namespace ptk;

constexpr float LN_EPS = 1e-5f;
/* rows per block of LayerNorm's column partial sums */
constexpr int LN_ROWS = 64;
constexpr int LN_YT = 8; /* thread rows of that block: (32, LN_YT) */

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

/* Column partial sums of dw = sum dy xhat and db = sum dy (mean NULL:
 * RMSNorm's xhat = x rstd): block (32,
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
                aw += g * ((load(x, i) - (mean ? mean[n] : 0.0f)) * rstd[n]);
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

/* ---- RMSNorm (Zhang & Sennrich 2019): the CPU's kernels, a warp per row ------------------------------ */

/* out = x rstd w, rstd = 1/sqrt(sum x^2 / C + eps) (the sum in double, as the CPU's) */
template <typename T>
__global__ void rms_fwd_kernel(T *__restrict__ out, float *__restrict__ rstd, const T *__restrict__ inp,
                               const T *__restrict__ w, int N, int C, float eps)
{
    const int n = warp_row(), lane = threadIdx.x % 32;
    if (n >= N) return;
    const T *x = inp + (size_t)n * C;
    double ss = 0.0;
    for (int c = lane; c < C; c += 32) {
        const double v = (double)load(x, c);
        ss += v * v;
    }
    const float r = 1.0f / sqrtf((float)warp_sum(ss) / (float)C + eps);
    T *o = out + (size_t)n * C;
    for (int c = lane; c < C; c += 32) store(o, c, load(x, c) * r * load(w, c));
    if (lane == 0) rstd[n] = r;
}

/* dx[n,:] += r (dy w - xhat m), m = sum(dy w xhat)/C (lanes of one warp) */
template <typename T>
__device__ __forceinline__ void rms_dx_row(T *__restrict__ d, const T *__restrict__ g, const T *__restrict__ x,
                                           const T *__restrict__ w, float r, float m, int Cl)
{
    for (int c = threadIdx.x % 32; c < Cl; c += 32) {
        const float xhat = load(x, c) * r;
        store(d, c, load(d, c) + r * (load(g, c) * load(w, c) - xhat * m));
    }
}

/* the row sum sum_c dy w xhat of one row (double; every lane gets it) */
template <typename T>
__device__ __forceinline__ double rms_rowsum(const T *__restrict__ g, const T *__restrict__ x,
                                             const T *__restrict__ w, float r, int Cl)
{
    double s = 0.0;
    for (int c = threadIdx.x % 32; c < Cl; c += 32) s += (double)(load(g, c) * load(w, c) * (load(x, c) * r));
    return warp_sum(s);
}

template <typename T>
__global__ void rms_bwd_dx_kernel(T *__restrict__ dinp, const T *__restrict__ dout, const T *__restrict__ inp,
                                  const T *__restrict__ w, const float *__restrict__ rstd, int N, int C)
{
    const int n = warp_row();
    if (n >= N) return;
    const T *g = dout + (size_t)n * C, *x = inp + (size_t)n * C;
    const float r = rstd[n];
    const float m = (float)(rms_rowsum(g, x, w, r, C) / C);
    rms_dx_row(dinp + (size_t)n * C, g, x, w, r, m, C);
}

/* sqsum[n] = sum_c x^2 (double) */
template <typename T>
__global__ void rms_rowsumsq_kernel(float *sqsum, const T *x, int N, int Cl)
{
    const int n = warp_row(), lane = threadIdx.x % 32;
    if (n >= N) return;
    const T *xr = x + (size_t)n * Cl;
    double ss = 0.0;
    for (int c = lane; c < Cl; c += 32) {
        const double v = (double)load(xr, c);
        ss += v * v;
    }
    ss = warp_sum(ss);
    if (lane == 0) sqsum[n] = (float)ss;
}

/* rstd[n] = 1/sqrt(sqsum[n]/C + eps) (rstd may be sqsum: read, sync, write); out = x rstd w */
template <typename T>
__global__ void rms_apply_kernel(T *out, float *rstd, const T *x, const float *sqsum, const T *w, int N, int Cl, int C,
                                 float eps)
{
    const int n = warp_row(), lane = threadIdx.x % 32;
    if (n >= N) return;
    const float r = 1.0f / sqrtf(sqsum[n] / (float)C + eps);
    __syncwarp();
    if (lane == 0) rstd[n] = r;
    const T *xr = x + (size_t)n * Cl;
    T *o = out + (size_t)n * Cl;
    for (int c = lane; c < Cl; c += 32) store(o, c, load(xr, c) * r * load(w, c));
}

template <typename T>
__global__ void rms_bwd_rowsums_kernel(float *s, const T *dy, const T *x, const T *w, const float *rstd, int N, int Cl)
{
    const int n = warp_row();
    if (n >= N) return;
    const double v = rms_rowsum(dy + (size_t)n * Cl, x + (size_t)n * Cl, w, rstd[n], Cl);
    if (threadIdx.x % 32 == 0) s[n] = (float)v;
}

template <typename T>
__global__ void rms_bwd_apply_dx_kernel(T *__restrict__ dx, const T *__restrict__ dy, const T *__restrict__ x,
                                        const T *__restrict__ w, const float *__restrict__ rstd,
                                        const float *__restrict__ s, int N, int Cl, int C)
{
    const int n = warp_row();
    if (n >= N) return;
    rms_dx_row(dx + (size_t)n * Cl, dy + (size_t)n * Cl, x + (size_t)n * Cl, w, rstd[n], s[n] / (float)C, Cl);
}

template <typename T>
void rmsnorm_fwd(void *out, void *rstd, const void *inp, const void *w, int N, int C, double eps)
{
    const char *op = "rmsnorm_fwd";
    if (bad_rows(op, N, C) || !N) return;
    if (!given(op, "out, rstd, inp, w", {out, rstd, inp, w})) return;
    rms_fwd_kernel<T><<<row_blocks(N), THREADS, 0, pt_cuda_stream_compute()>>>(
        (T *)out, (float *)rstd, (const T *)inp, (const T *)w, N, C, (float)eps);
    pt_cuda_op_check(op);
}

template <typename T>
void rmsnorm_bwd(void *dinp, void *dw, const void *dout, const void *inp, const void *w, const void *rstd, int N, int C)
{
    const char *op = "rmsnorm_bwd";
    if (bad_rows(op, N, C) || !N) return;
    cudaStream_t st = pt_cuda_stream_compute();
    if (dinp)
        rms_bwd_dx_kernel<T><<<row_blocks(N), THREADS, 0, st>>>((T *)dinp, (const T *)dout, (const T *)inp,
                                                                (const T *)w, (const float *)rstd, N, C);
    if (pt_cuda_op_check(op) != PT_OK) return;
    pt_cuda_op_record(ln_dwdb<T>((float *)dw, NULL, (const T *)dout, (const T *)inp, NULL, (const float *)rstd, N, C,
                                 st),
                      op);
    pt_cuda_op_check(op);
}

template <typename T>
void rmsnorm_rowsumsq(void *sqsum, const void *x, int N, int Cl)
{
    const char *op = "rmsnorm_rowsumsq";
    if (bad(op, N >= 0 && Cl >= 0, "N %d, Cl %d are not valid (valid: >= 0)", N, Cl) || !N) return;
    rms_rowsumsq_kernel<T><<<row_blocks(N), THREADS, 0, pt_cuda_stream_compute()>>>((float *)sqsum, (const T *)x, N,
                                                                                     Cl);
    pt_cuda_op_check(op);
}

template <typename T>
void rmsnorm_apply(void *out, void *rstd, const void *x, const void *sqsum, const void *w, int N, int Cl, int C,
                   double eps)
{
    const char *op = "rmsnorm_apply";
    if (bad_piece(op, N, Cl, C) || !N) return;
    rms_apply_kernel<T><<<row_blocks(N), THREADS, 0, pt_cuda_stream_compute()>>>(
        (T *)out, (float *)rstd, (const T *)x, (const float *)sqsum, (const T *)w, N, Cl, C, (float)eps);
    pt_cuda_op_check(op);
}

template <typename T>
void rmsnorm_bwd_rowsums(void *s, const void *dy, const void *x, const void *w, const void *rstd, int N, int Cl)
{
    const char *op = "rmsnorm_bwd_rowsums";
    if (bad(op, N >= 0 && Cl >= 0, "N %d, Cl %d are not valid (valid: >= 0)", N, Cl) || !N) return;
    rms_bwd_rowsums_kernel<T><<<row_blocks(N), THREADS, 0, pt_cuda_stream_compute()>>>(
        (float *)s, (const T *)dy, (const T *)x, (const T *)w, (const float *)rstd, N, Cl);
    pt_cuda_op_check(op);
}

template <typename T>
void rmsnorm_bwd_apply(void *dx, void *dw, const void *dy, const void *x, const void *w, const void *rstd,
                       const void *s, int N, int Cl, int C)
{
    const char *op = "rmsnorm_bwd_apply";
    if (bad_piece(op, N, Cl, C) || !N || !Cl) return;
    cudaStream_t st = pt_cuda_stream_compute();
    if (dx)
        rms_bwd_apply_dx_kernel<T><<<row_blocks(N), THREADS, 0, st>>>((T *)dx, (const T *)dy, (const T *)x,
                                                                      (const T *)w, (const float *)rstd,
                                                                      (const float *)s, N, Cl, C);
    if (pt_cuda_op_check(op) != PT_OK) return;
    pt_cuda_op_record(ln_dwdb<T>((float *)dw, NULL, (const T *)dy, (const T *)x, NULL, (const float *)rstd, N, Cl, st),
                      op);
    pt_cuda_op_check(op);
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


} // namespace

/* ---- the C entries and the family fill ---------------------------------------------------------- */
#define PT_CUDA_NORM_ENTRIES(S, T) \
    extern "C" void pt_cuda_layernorm_fwd_##S(void *out, void *mean, void *rstd, const void *inp, const void *w,       \
                                              const void *b, int N, int C)                                             \
    {                                                                                                                  \
        layernorm_fwd<T>(out, mean, rstd, inp, w, b, N, C);                                                            \
    }                                                                                                                  \
    extern "C" void pt_cuda_layernorm_bwd_##S(void *dinp, void *dw, void *db, const void *dout, const void *inp,       \
                                              const void *w, const void *mean, const void *rstd, int N, int C)         \
    {                                                                                                                  \
        layernorm_bwd<T>(dinp, dw, db, dout, inp, w, mean, rstd, N, C);                                                \
    }                                                                                                                  \
    extern "C" void pt_cuda_layernorm_rowsum_##S(void *sum, const void *x, int N, int Cl)                              \
    {                                                                                                                  \
        layernorm_rowsum<T>(sum, x, N, Cl);                                                                            \
    }                                                                                                                  \
    extern "C" void pt_cuda_layernorm_rowvar_##S(void *mean, void *sqsum, const void *x, const void *sum, int N,       \
                                                 int Cl, int C)                                                        \
    {                                                                                                                  \
        layernorm_rowvar<T>(mean, sqsum, x, sum, N, Cl, C);                                                            \
    }                                                                                                                  \
    extern "C" void pt_cuda_layernorm_apply_##S(void *out, void *rstd, const void *x, const void *mean,                \
                                                const void *sqsum, const void *w, const void *b, int N, int Cl,        \
                                                int C)                                                                 \
    {                                                                                                                  \
        layernorm_apply<T>(out, rstd, x, mean, sqsum, w, b, N, Cl, C);                                                 \
    }                                                                                                                  \
    extern "C" void pt_cuda_layernorm_bwd_rowsums_##S(void *s, const void *dy, const void *x, const void *w,           \
                                                      const void *mean, const void *rstd, int N, int Cl)               \
    {                                                                                                                  \
        layernorm_bwd_rowsums<T>(s, dy, x, w, mean, rstd, N, Cl);                                                      \
    }                                                                                                                  \
    extern "C" void pt_cuda_layernorm_bwd_apply_##S(void *dx, void *dw, void *db, const void *dy, const void *x,       \
                                                    const void *w, const void *mean, const void *rstd,                 \
                                                    const void *s, int N, int Cl, int C)                               \
    {                                                                                                                  \
        layernorm_bwd_apply<T>(dx, dw, db, dy, x, w, mean, rstd, s, N, Cl, C);                                         \
    }
#define PT_CUDA_RMSNORM_ENTRIES(S, T) \
    extern "C" void pt_cuda_rmsnorm_fwd_##S(void *out, void *rstd, const void *inp, const void *w, int N, int C,       \
                                            double eps)                                                                \
    {                                                                                                                  \
        rmsnorm_fwd<T>(out, rstd, inp, w, N, C, eps);                                                                  \
    }                                                                                                                  \
    extern "C" void pt_cuda_rmsnorm_bwd_##S(void *dinp, void *dw, const void *dout, const void *inp, const void *w,    \
                                            const void *rstd, int N, int C)                                            \
    {                                                                                                                  \
        rmsnorm_bwd<T>(dinp, dw, dout, inp, w, rstd, N, C);                                                            \
    }                                                                                                                  \
    extern "C" void pt_cuda_rmsnorm_rowsumsq_##S(void *sqsum, const void *x, int N, int Cl)                            \
    {                                                                                                                  \
        rmsnorm_rowsumsq<T>(sqsum, x, N, Cl);                                                                          \
    }                                                                                                                  \
    extern "C" void pt_cuda_rmsnorm_apply_##S(void *out, void *rstd, const void *x, const void *sqsum, const void *w,  \
                                              int N, int Cl, int C, double eps)                                        \
    {                                                                                                                  \
        rmsnorm_apply<T>(out, rstd, x, sqsum, w, N, Cl, C, eps);                                                       \
    }                                                                                                                  \
    extern "C" void pt_cuda_rmsnorm_bwd_rowsums_##S(void *s, const void *dy, const void *x, const void *w,             \
                                                    const void *rstd, int N, int Cl)                                   \
    {                                                                                                                  \
        rmsnorm_bwd_rowsums<T>(s, dy, x, w, rstd, N, Cl);                                                              \
    }                                                                                                                  \
    extern "C" void pt_cuda_rmsnorm_bwd_apply_##S(void *dx, void *dw, const void *dy, const void *x, const void *w,    \
                                                  const void *rstd, const void *s, int N, int Cl, int C)               \
    {                                                                                                                  \
        rmsnorm_bwd_apply<T>(dx, dw, dy, x, w, rstd, s, N, Cl, C);                                                     \
    }
PT_CUDA_RMSNORM_ENTRIES(f32, float)
PT_CUDA_RMSNORM_ENTRIES(bf16, __nv_bfloat16)
PT_CUDA_NORM_ENTRIES(f32, float)
PT_CUDA_NORM_ENTRIES(bf16, __nv_bfloat16)

extern "C" int pt_cuda_fill_norm(pt_ops *o, const pt_prec_policy *p)
{
    PT_CUDA_SET_ACT(o, p, layernorm_fwd);
    PT_CUDA_SET_ACT(o, p, layernorm_bwd);
    PT_CUDA_SET_ACT(o, p, layernorm_rowsum);
    PT_CUDA_SET_ACT(o, p, layernorm_rowvar);
    PT_CUDA_SET_ACT(o, p, layernorm_apply);
    PT_CUDA_SET_ACT(o, p, layernorm_bwd_rowsums);
    PT_CUDA_SET_ACT(o, p, layernorm_bwd_apply);
    PT_CUDA_SET_ACT(o, p, rmsnorm_fwd);
    PT_CUDA_SET_ACT(o, p, rmsnorm_bwd);
    PT_CUDA_SET_ACT(o, p, rmsnorm_rowsumsq);
    PT_CUDA_SET_ACT(o, p, rmsnorm_apply);
    PT_CUDA_SET_ACT(o, p, rmsnorm_bwd_rowsums);
    PT_CUDA_SET_ACT(o, p, rmsnorm_bwd_apply);
    return PT_OK;
}
