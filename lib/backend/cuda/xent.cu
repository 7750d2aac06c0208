/* SPDX-License-Identifier: MIT */
/* The xent family (ops.h PT_FAM_XENT): the vocabulary-parallel
 * cross-entropy (Shoeybi et al. 2019 section 3) on device memory, for the
 * f32 and bf16 tables: the materialised pieces (xent_max, xent_sumexp,
 * xent_bwd, a block per row: strided loops, a warp then a block reduction
 * through shared memory), the fused classifier (classifier_fwd/bwd, over
 * blocks of vocabulary columns; llm.c's fused_classifier, Liger Kernel's
 * fused linear cross-entropy, Hsu et al. 2024) and its chunked form
 * (classifier_rows_fwd/bwd; the row statistics and dlogits a warp per row),
 * and the fp32 statistics' rescale and loss.  The online max and sum of exp
 * follow Milakov & Gimelshein 2018.  The classifier's GEMMs are
 * pt_cuda_gemm (cuBLASLt, fp32 accumulation, fp32 logits block).  The
 * arithmetic follows the CPU kernels (cpu_ops.inc) step by step; every
 * reduction's order is set by the shape alone. */
#include "config.h"
#include "backend/cuda/kernels.cuh"

namespace {
using namespace ptk;

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

template <typename T> struct elem_of;
template <> struct elem_of<float> {
    static constexpr int value = PT_GEMM_F32;
};
template <> struct elem_of<__nv_bfloat16> {
    static constexpr int value = PT_GEMM_BF16;
};

/* ---- cross-entropy pieces, causal softmax rows (fp32) ------------------------------------------------ */
__global__ void xent_rescale_kernel(float *sumexp, const float *from, const float *to, int N)
{
    GRID_STRIDE(i, (size_t)N) sumexp[i] = from[i] == -INFINITY ? 0.0f : sumexp[i] * expf(from[i] - to[i]);
}

__global__ void xent_loss_kernel(float *losses, const float *rowmax, const float *sumexp, const float *tgt, int N)
{
    GRID_STRIDE(i, (size_t)N) losses[i] = logf(sumexp[i]) + rowmax[i] - tgt[i];
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

/* ---- the C entries and the family fill ---------------------------------------------------------- */
#define PT_CUDA_XENT_ENTRIES(S, T) \
    extern "C" void pt_cuda_xent_max_##S(void *rowmax, const void *logits, int v0, int vreal, int N, int Vl)           \
    {                                                                                                                  \
        xent_max<T>(rowmax, logits, v0, vreal, N, Vl);                                                                 \
    }                                                                                                                  \
    extern "C" void pt_cuda_xent_sumexp_##S(void *sumexp, void *tgt, const void *logits, const void *rowmax,           \
                                            const int32_t *targets, int v0, int vreal, int N, int Vl)                  \
    {                                                                                                                  \
        xent_sumexp<T>(sumexp, tgt, logits, rowmax, targets, v0, vreal, N, Vl);                                        \
    }                                                                                                                  \
    extern "C" void pt_cuda_xent_bwd_##S(void *dlogits, const void *logits, const void *rowmax, const void *sumexp,    \
                                         const int32_t *targets, const void *dloss, int v0, int vreal, int N, int Vl)  \
    {                                                                                                                  \
        xent_bwd<T>(dlogits, logits, rowmax, sumexp, targets, dloss, v0, vreal, N, Vl);                                \
    }                                                                                                                  \
    extern "C" void pt_cuda_classifier_fwd_##S(void *stats, const void *x, const void *w, const int32_t *targets,      \
                                               void *work, int vb, int v0, int vreal, int N, int C, int Vl, int ks)    \
    {                                                                                                                  \
        classifier_fwd<T>(stats, x, w, targets, work, vb, v0, vreal, N, C, Vl, ks);                                    \
    }                                                                                                                  \
    extern "C" void pt_cuda_classifier_bwd_##S(void *dx, void *dw, const void *x, const void *w, const void *stats,    \
                                               const int32_t *targets, const void *dloss, void *work, int vb, int v0,  \
                                               int vreal, int N, int C, int Vl, int ks)                                \
    {                                                                                                                  \
        classifier_bwd<T>(dx, dw, x, w, stats, targets, dloss, work, vb, v0, vreal, N, C, Vl, ks);                     \
    }                                                                                                                  \
    extern "C" void pt_cuda_classifier_rows_fwd_##S(void *stats, void *logits, const void *x, const void *w,           \
                                                    const int32_t *targets, void *work, int v0, int vreal, int R,      \
                                                    int C, int Vl)                                                     \
    {                                                                                                                  \
        classifier_rows_fwd<T>(stats, logits, x, w, targets, work, v0, vreal, R, C, Vl);                               \
    }                                                                                                                  \
    extern "C" void pt_cuda_classifier_rows_bwd_##S(void *dx, void *dw, const void *x, const void *w, void *logits,    \
                                                    const void *stats, const int32_t *targets, const void *dloss,      \
                                                    void *work, int v0, int vreal, int R, int C, int Vl)               \
    {                                                                                                                  \
        classifier_rows_bwd<T>(dx, dw, x, w, logits, stats, targets, dloss, work, v0, vreal, R, C, Vl);                \
    }
PT_CUDA_XENT_ENTRIES(f32, float)
PT_CUDA_XENT_ENTRIES(bf16, __nv_bfloat16)

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

extern "C" int pt_cuda_fill_xent(pt_ops *o, const pt_prec_policy *p)
{
    PT_CUDA_SET_ACT(o, p, xent_max);
    PT_CUDA_SET_ACT(o, p, xent_sumexp);
    PT_CUDA_SET_ACT(o, p, xent_bwd);
    PT_CUDA_SET_ACT(o, p, classifier_fwd);
    PT_CUDA_SET_ACT(o, p, classifier_bwd);
    PT_CUDA_SET_ACT(o, p, classifier_rows_fwd);
    PT_CUDA_SET_ACT(o, p, classifier_rows_bwd);
    PT_CUDA_SET_ONE(o, xent_rescale);
    PT_CUDA_SET_ONE(o, xent_loss);
    return PT_OK;
}
