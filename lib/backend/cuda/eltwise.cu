/* SPDX-License-Identifier: MIT */
/* The eltwise family (ops.h PT_FAM_ELTWISE): GELU (tanh form), residual
 * add, bias, and Llama's RoPE (rotate-half) and SwiGLU on device memory, for the f32 and bf16 tables: grid-stride
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

/* ---- RoPE, SwiGLU (Llama) ------------------------------------------------------------------------------ */
/* RoPE, rotate-half (ops.h): one thread per channel pair (row, head, i),
 * sgn +1 forward, -1 the transpose; the (cos, sin) table is fp32 */
template <typename T>
__global__ void rope_kernel(T *x, const float *cs, int T_, int t0, int nh, int HS, int ld, float sgn, size_t total)
{
    const int h2 = HS / 2;
    GRID_STRIDE(k, total)
    {
        const int i = (int)(k % (size_t)h2);
        const size_t rh = k / (size_t)h2;
        const int h = (int)(rh % (size_t)nh);
        const size_t r = rh / (size_t)nh;
        const int t = (int)(r % (size_t)T_);
        const float *e = cs + ((size_t)(t0 + t) * HS + 2 * (size_t)i);
        const float c = e[0], sn = sgn * e[1];
        const size_t a = r * (size_t)ld + (size_t)h * HS + i, b = a + h2;
        const float x1 = load(x, a), x2 = load(x, b);
        store(x, a, x1 * c - x2 * sn);
        store(x, b, x2 * c + x1 * sn);
    }
}

/* SwiGLU: out[n, i] = silu(gate) up, rows of inp [gate (F) | up (F)] */
template <typename T>
__global__ void swiglu_fwd_kernel(T *out, const T *inp, int F, size_t total)
{
    GRID_STRIDE(k, total)
    {
        const size_t n = k / (size_t)F, i = k % (size_t)F;
        const float g = load(inp, n * 2 * F + i), u = load(inp, n * 2 * F + F + i);
        store(out, k, g / (1.0f + expf(-g)) * u);
    }
}

/* dinp = [dout up silu'(gate) | dout silu(gate)] (written) */
template <typename T>
__global__ void swiglu_bwd_kernel(T *dinp, const T *dout, const T *inp, int F, size_t total)
{
    GRID_STRIDE(k, total)
    {
        const size_t n = k / (size_t)F, i = k % (size_t)F, a = n * 2 * F + i;
        const float g = load(inp, a), u = load(inp, a + F), dy = load(dout, k);
        const float sg = 1.0f / (1.0f + expf(-g));
        store(dinp, a, dy * u * sg * (1.0f + g * (1.0f - sg)));
        store(dinp, a + F, dy * g * sg);
    }
}

template <typename T>
void rope(const char *op, void *x, const void *cs, int B, int T_, int t0, int nh, int HS, int ld, float sgn)
{
    if (bad(op, B >= 0 && T_ >= 0 && t0 >= 0 && nh >= 0 && HS >= 2 && HS % 2 == 0 && ld >= nh * HS,
            "B %d, T %d, t0 %d, nh %d, HS %d, ld %d are not valid (valid: >= 0, HS even >= 2, ld >= nh*HS)", B, T_, t0,
            nh, HS, ld))
        return;
    const size_t total = (size_t)B * T_ * nh * (HS / 2);
    if (!total || !given(op, "x, cs", {x, cs})) return;
    rope_kernel<T><<<blocks_for(total), THREADS, 0, pt_cuda_stream_compute()>>>((T *)x, (const float *)cs, T_, t0, nh,
                                                                                 HS, ld, sgn, total);
    pt_cuda_op_check(op);
}

template <typename T>
void swiglu_fwd(void *out, const void *inp, int N, int F)
{
    if (!sizes_ok("swiglu_fwd", N, "N", F, "F") || !N || !F) return;
    if (!given("swiglu_fwd", "out, inp", {out, inp})) return;
    const size_t total = (size_t)N * F;
    swiglu_fwd_kernel<T><<<blocks_for(total), THREADS, 0, pt_cuda_stream_compute()>>>((T *)out, (const T *)inp, F,
                                                                                       total);
    pt_cuda_op_check("swiglu_fwd");
}

template <typename T>
void swiglu_bwd(void *dinp, const void *dout, const void *inp, int N, int F)
{
    if (!sizes_ok("swiglu_bwd", N, "N", F, "F") || !N || !F) return;
    if (!given("swiglu_bwd", "dinp, dout, inp", {dinp, dout, inp})) return;
    const size_t total = (size_t)N * F;
    swiglu_bwd_kernel<T><<<blocks_for(total), THREADS, 0, pt_cuda_stream_compute()>>>((T *)dinp, (const T *)dout,
                                                                                       (const T *)inp, F, total);
    pt_cuda_op_check("swiglu_bwd");
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
#define PT_CUDA_LLAMA_ENTRIES(S, T) \
    extern "C" void pt_cuda_rope_fwd_##S(void *x, const void *cs, int B, int T_, int t0, int nh, int HS, int ld)       \
    {                                                                                                                  \
        rope<T>("rope_fwd", x, cs, B, T_, t0, nh, HS, ld, 1.0f);                                                       \
    }                                                                                                                  \
    extern "C" void pt_cuda_rope_bwd_##S(void *dx, const void *cs, int B, int T_, int t0, int nh, int HS, int ld)      \
    {                                                                                                                  \
        rope<T>("rope_bwd", dx, cs, B, T_, t0, nh, HS, ld, -1.0f);                                                     \
    }                                                                                                                  \
    extern "C" void pt_cuda_swiglu_fwd_##S(void *out, const void *inp, int N, int F) { swiglu_fwd<T>(out, inp, N, F); } \
    extern "C" void pt_cuda_swiglu_bwd_##S(void *dinp, const void *dout, const void *inp, int N, int F)                \
    {                                                                                                                  \
        swiglu_bwd<T>(dinp, dout, inp, N, F);                                                                          \
    }
PT_CUDA_LLAMA_ENTRIES(f32, float)
PT_CUDA_LLAMA_ENTRIES(bf16, bf16)
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
    PT_CUDA_SET_ACT(o, p, rope_fwd);
    PT_CUDA_SET_ACT(o, p, rope_bwd);
    PT_CUDA_SET_ACT(o, p, swiglu_fwd);
    PT_CUDA_SET_ACT(o, p, swiglu_bwd);
    return PT_OK;
}
