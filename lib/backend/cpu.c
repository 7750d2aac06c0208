/* SPDX-License-Identifier: MIT */
/* CPU backend: the kernels of cpu_ops.inc instantiated for float and
 * double, and the "cpu" backend table (OpenBLAS sgemm + OpenMP loops). */
#include "backend/ops.h"
#include "backend/blas.h"
#include "backend/cuda/cuda.h"
#include "core/core.h"

#include <cblas.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

/* exp for float in `omp simd` loops: x = k ln2 + r, |r| <= ln2/2 (k by the
 * round-to-nearest trick 1.5*2^23, which vectorises on SSE2), exp(r) by
 * Cephes' expf minimax polynomial (Moshier, Cephes Math Library, expf.c;
 * relative error about 2 ulp), times 2^k built in the exponent bits.
 * Inputs below -87.3 (and -inf) give 0; above 88.72283, the largest float
 * whose exp is finite (ln FLT_MAX = 88.7228391), +inf; NaN gives NaN, as
 * expf does.  The polynomial only ever sees x clamped to [-87.3, 88.72283]
 * (NaN clamped too), so k is in [-126, 128] and the exponent bits are never
 * built from a NaN or out-of-range k; 2^128 is built as 2^127 * 2.  The
 * tests hold it against libm's exp through the double table and against
 * expf on NaN, +-inf and huge inputs. */
static inline __attribute__((always_inline)) float pt_vexpf(float x)
{
    const float lo = -87.3f, hi = 88.72283f;
    float xc = x >= lo ? (x <= hi ? x : hi) : lo; /* NaN -> lo */
    float kf = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f; /* rint(x / ln2) */
    float r = xc - kf * 0.693359375f;                                    /* ln2 = C1 + C2 */
    r = r - kf * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    int32_t k = (int32_t)kf;                           /* [-126, 128] */
    int32_t bits = ((k > 127 ? 127 : k) + 127) << 23; /* 2^min(k, 127), exponent field 1..254 */
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    float y = p * scale * (k > 127 ? 2.0f : 1.0f);
    return x <= hi ? (x >= lo ? y : 0.0f) : (x > hi ? INFINITY : x); /* the last: NaN */
}

/* tanh(u) = 1 - 2 / (exp(2u) + 1): saturates to +-1, absolute error a few
 * float ulp (relative error grows only where |tanh| << 1, which GELU
 * multiplies by 0.5 x and adds to 1). */
static inline __attribute__((always_inline)) float pt_vtanhf(float u)
{
    return 1.0f - 2.0f / (pt_vexpf(2.0f * u) + 1.0f);
}

/* Hot row kernels of the float table are compiled three times (AVX-512,
 * AVX2+FMA, baseline x86-64) and the loader picks the clone for this CPU
 * (GCC's target_clones, an ifunc).  The library itself stays baseline
 * x86-64.  The double table is the reference and is left as it is. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(PTRAIN_NO_CLONES)
#define PT_VCLONES_F32 __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default"), noinline))
#else
#define PT_VCLONES_F32
#endif

#define REAL float
#define SFX(x) x##_f32
#define PT_VCLONES PT_VCLONES_F32
#define GEMM cblas_sgemm
#define EXP expf
#define SQRT sqrtf
#define TANH tanhf
#define VEXP pt_vexpf
#define VTANH pt_vtanhf
#include "backend/cpu_ops.inc"
#undef REAL
#undef SFX
#undef GEMM
#undef EXP
#undef SQRT
#undef TANH
#undef VEXP
#undef VTANH
#undef PT_VCLONES

#define REAL double
#define SFX(x) x##_f64
#define PT_VCLONES
#define GEMM cblas_dgemm
#define EXP exp
#define SQRT sqrt
#define TANH tanh
#define VEXP exp
#define VTANH tanh
#include "backend/cpu_ops.inc"
#undef REAL
#undef SFX
#undef GEMM
#undef EXP
#undef SQRT
#undef TANH
#undef VEXP
#undef VTANH
#undef PT_VCLONES

/* OpenBLAS's own thread count; declared here since not every cblas.h has it */
extern void openblas_set_num_threads(int n);

static void cpu_set_threads(int n)
{
    if (n < 1) n = 1;
    openblas_set_num_threads(n);
#ifdef _OPENMP
    omp_set_num_threads(n);
#endif
}

static const pt_backend cpu_backend = {"cpu", &pt_cpu_ops_f32, cpu_set_threads, &pt_arena_mem_host};

static const char *const backend_names[] = {"cpu", NULL};

const char *const *pt_backend_names(void) { return backend_names; }

const pt_backend *pt_backend_get(const char *name)
{
    if (!name || strcmp(name, "cpu") == 0) {
        pt_blas_select(); /* kernels that match the CPU, before the first GEMM */
        return &cpu_backend;
    }
    /* its memory, streams, GEMMs and communication; its ops table is not
     * wired yet (ops NULL), so it is not in pt_backend_names (cuda.h) */
    if (strcmp(name, "cuda") == 0) return pt_cuda_backend();
    pt_fail(PT_EUNSUPP, "backend '%s' is not built in; valid: cpu%s", name, pt_cuda_built() ? ", cuda" : "");
    return NULL;
}
