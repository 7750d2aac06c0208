/* SPDX-License-Identifier: MIT */
/* The eltwise family (ops.h PT_FAM_ELTWISE): GELU (tanh form), residual
 * add and bias on device memory, for the f32 and bf16 tables: grid-stride
 * loops of THREADS per block (as gemm_epi.cu and llm.c's dev/cuda
 * element-wise kernels); bias_bwd is gemm_epi.cu's fixed-order column sums. */
#include "config.h"
#include "backend/cuda/kernels.cuh"

namespace {
using namespace ptk;

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

} // namespace

/* ---- the C entries and the family fill ---------------------------------------------------------- */
#define PT_CUDA_ELTWISE_ENTRIES(S, T) \
    extern "C" void pt_cuda_gelu_fwd_##S(void *out, const void *inp, size_t n) { gelu_fwd<T>(out, inp, n); }           \
    extern "C" void pt_cuda_gelu_bwd_##S(void *dinp, const void *inp, const void *dout, size_t n)                      \
    {                                                                                                                  \
        gelu_bwd<T>(dinp, inp, dout, n);                                                                               \
    }                                                                                                                  \
    extern "C" void pt_cuda_add_fwd_##S(void *out, const void *a, const void *b, size_t n)                             \
    {                                                                                                                  \
        add_fwd<T>(out, a, b, n);                                                                                      \
    }                                                                                                                  \
    extern "C" void pt_cuda_add_bwd_##S(void *da, void *db, const void *dout, size_t n)                                \
    {                                                                                                                  \
        add_bwd<T>(da, db, dout, n);                                                                                   \
    }                                                                                                                  \
    extern "C" void pt_cuda_bias_fwd_##S(void *out, const void *bias, int N, int OC)                                   \
    {                                                                                                                  \
        bias_fwd<T>(out, bias, N, OC);                                                                                 \
    }                                                                                                                  \
    extern "C" void pt_cuda_bias_bwd_##S(void *dbias, const void *dout, int N, int OC)                                 \
    {                                                                                                                  \
        bias_bwd<T>(dbias, dout, N, OC);                                                                               \
    }
PT_CUDA_ELTWISE_ENTRIES(f32, float)
PT_CUDA_ELTWISE_ENTRIES(bf16, bf16)

extern "C" int pt_cuda_fill_eltwise(pt_ops *o, const pt_prec_policy *p)
{
    PT_CUDA_SET_ACT(o, p, gelu_fwd);
    PT_CUDA_SET_ACT(o, p, gelu_bwd);
    PT_CUDA_SET_ACT(o, p, add_fwd);
    PT_CUDA_SET_ACT(o, p, add_bwd);
    PT_CUDA_SET_ACT(o, p, bias_fwd);
    PT_CUDA_SET_ACT(o, p, bias_bwd);
    return PT_OK;
}
