/* SPDX-License-Identifier: MIT */
/* The adamw family (ops.h PT_FAM_ADAMW): AdamW on device memory, fp32
 * master weights and moments, for the f32 and bf16 tables (the bf16 one
 * also writes the bf16 weight copy in the same pass). */
#include "config.h"
#include "backend/cuda/kernels.cuh"

namespace {
using namespace ptk;

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

} // namespace

/* ---- the C entries and the family fill ---------------------------------------------------------- */
#define PT_CUDA_ADAMW_ENTRIES(S, T) \
    extern "C" void pt_cuda_adamw_##S(void *p, void *work, const void *g, void *m, void *v, size_t n, double lr,       \
                                      double b1, double b2, double eps, double wd, double bc1, double bc2)             \
    {                                                                                                                  \
        adamw<T>(p, work, g, m, v, n, lr, b1, b2, eps, wd, bc1, bc2);                                                  \
    }
PT_CUDA_ADAMW_ENTRIES(f32, float)
PT_CUDA_ADAMW_ENTRIES(bf16, bf16)

extern "C" int pt_cuda_fill_adamw(pt_ops *o, const pt_prec_policy *p)
{
    PT_CUDA_SET_ACT(o, p, adamw);
    return PT_OK;
}
