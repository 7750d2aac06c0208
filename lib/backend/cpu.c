/* SPDX-License-Identifier: MIT */
/* CPU backend: the kernels of cpu_ops.inc instantiated for float, bf16
 * (storage) with float arithmetic and double, the generic memory and
 * BLAS-1 ops, and the "cpu" backend (OpenBLAS sgemm, the bf16 GEMM of
 * gemm_bf16.h, OpenMP loops). */
#include "backend/ops.h"
#include "backend/blas.h"
#include "backend/gemm_bf16.h"
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

/* Hot row kernels of the float and bf16 tables (cpu_rows.inc) are compiled
 * three times (AVX-512, AVX2+FMA, baseline x86-64) and called through a
 * wrapper that picks the copy of pt_kernel_isa_level(): this CPU's level,
 * capped by PTRAIN_MAX_CPU_ISA (blas.h).  (GCC's target_clones picked the
 * same copies at load time, but nothing could make an AVX-512 machine run
 * the AVX2 ones.)  The library itself stays baseline x86-64.  The double
 * table is the reference and is compiled once. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(PTRAIN_NO_CLONES)
#define PT_ROW_CLONES_F32 1
#else
#define PT_ROW_CLONES_F32 0
#endif

/* ---- generic ops: memory and BLAS-1 on any dtype (ops.h) ------------------ */
/* Below this many elements an element-wise op runs on one thread: a
 * parallel region costs more than it saves, much more when the cores are
 * shared (measured: +30% step time for the "test" model at 2 threads on a
 * loaded 2-core machine when every small zero/sum forked). */
#define PT_PAR_MIN 32768

static void bad_dtype(const char *op, pt_dtype t)
{
    fprintf(stderr, "ptrain: %s: element type %d is not fp32, bf16 or fp64\n", op, (int)t);
    abort();
}

static void gen_zero(void *x, size_t n, pt_dtype t)
{
    const size_t es = pt_dtype_size(t);
    if (!es) bad_dtype("zero", t);
    const size_t bytes = n * es, nc = (bytes + (1u << 20) - 1) >> 20; /* 1 MiB pieces */
#pragma omp parallel for schedule(static) if (n >= PT_PAR_MIN)
    for (size_t c = 0; c < nc; c++) {
        const size_t off = c << 20;
        memset((char *)x + off, 0, bytes - off < (1u << 20) ? bytes - off : (1u << 20));
    }
}

static void gen_fill(void *x, double a, size_t n, pt_dtype t)
{
    switch (t) {
    case PT_F32: {
        float *y = x, v = (float)a;
#pragma omp parallel for simd schedule(static) if (n >= PT_PAR_MIN)
        for (size_t i = 0; i < n; i++) y[i] = v;
        return;
    }
    case PT_F64: {
        double *y = x;
#pragma omp parallel for simd schedule(static) if (n >= PT_PAR_MIN)
        for (size_t i = 0; i < n; i++) y[i] = a;
        return;
    }
    case PT_BF16: {
        pt_bf16 *y = x, v = pt_f32_to_bf16((float)a);
#pragma omp parallel for simd schedule(static) if (n >= PT_PAR_MIN)
        for (size_t i = 0; i < n; i++) y[i] = v;
        return;
    }
    }
    bad_dtype("fill", t);
}

static void gen_copy(void *dst, const void *src, size_t n, pt_dtype t)
{
    const size_t es = pt_dtype_size(t);
    if (!es) bad_dtype("copy", t);
    const size_t bytes = n * es, nc = (bytes + (1u << 20) - 1) >> 20;
#pragma omp parallel for schedule(static) if (n >= PT_PAR_MIN)
    for (size_t c = 0; c < nc; c++) {
        const size_t off = c << 20;
        memcpy((char *)dst + off, (const char *)src + off, bytes - off < (1u << 20) ? bytes - off : (1u << 20));
    }
}

/* one element of type st at s as double (bf16 and fp32 exactly) */
static inline double load_as_double(const void *s, size_t i, pt_dtype st)
{
    return st == PT_F32 ? (double)((const float *)s)[i]
         : st == PT_BF16 ? (double)pt_bf16_to_f32(((const pt_bf16 *)s)[i]) : ((const double *)s)[i];
}

static void gen_convert(void *dst, pt_dtype dt, const void *src, pt_dtype st, size_t n)
{
    if (!pt_dtype_size(dt)) bad_dtype("convert", dt);
    if (!pt_dtype_size(st)) bad_dtype("convert", st);
    if (dt == st) {
        gen_copy(dst, src, n, dt);
        return;
    }
    if (dt == PT_BF16 && st == PT_F32) { /* the hot pair: weight copies */
        pt_bf16 *d = dst;
        const float *s = src;
#pragma omp parallel for simd schedule(static) if (n >= PT_PAR_MIN)
        for (size_t i = 0; i < n; i++) d[i] = pt_f32_to_bf16(s[i]);
        return;
    }
    if (dt == PT_F32 && st == PT_BF16) {
        float *d = dst;
        const pt_bf16 *s = src;
#pragma omp parallel for simd schedule(static) if (n >= PT_PAR_MIN)
        for (size_t i = 0; i < n; i++) d[i] = pt_bf16_to_f32(s[i]);
        return;
    }
    /* the rest goes through double: f64 -> bf16 rounds to float first, then
     * to bf16 (double rounding; the f64 table has no bf16 tensors) */
#pragma omp parallel for schedule(static) if (n >= PT_PAR_MIN)
    for (size_t i = 0; i < n; i++) {
        const double v = load_as_double(src, i, st);
        if (dt == PT_F32) ((float *)dst)[i] = (float)v;
        else if (dt == PT_F64) ((double *)dst)[i] = v;
        else ((pt_bf16 *)dst)[i] = pt_f32_to_bf16((float)v);
    }
}

static void gen_copy2d(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height)
{
    if (height == 1) {
        memcpy(dst, src, width);
        return;
    }
#pragma omp parallel for schedule(static) if (height * width >= 4 * PT_PAR_MIN)
    for (size_t r = 0; r < height; r++)
        memcpy((char *)dst + r * dpitch, (const char *)src + r * spitch, width);
}

static void gen_add2d(void *dst, size_t ldd, const void *src, size_t lds, size_t rows, size_t cols, pt_dtype t)
{
    if (!pt_dtype_size(t)) bad_dtype("add2d", t);
#pragma omp parallel for schedule(static) if (rows * cols >= PT_PAR_MIN)
    for (size_t r = 0; r < rows; r++) {
        if (t == PT_F32) {
            float *d = (float *)dst + r * ldd;
            const float *s = (const float *)src + r * lds;
#pragma omp simd
            for (size_t c = 0; c < cols; c++) d[c] += s[c];
        } else if (t == PT_F64) {
            double *d = (double *)dst + r * ldd;
            const double *s = (const double *)src + r * lds;
#pragma omp simd
            for (size_t c = 0; c < cols; c++) d[c] += s[c];
        } else {
            pt_bf16 *d = (pt_bf16 *)dst + r * ldd;
            const pt_bf16 *s = (const pt_bf16 *)src + r * lds;
#pragma omp simd
            for (size_t c = 0; c < cols; c++) d[c] = pt_f32_to_bf16(pt_bf16_to_f32(d[c]) + pt_bf16_to_f32(s[c]));
        }
    }
}

static void gen_axpy(void *y_, double a, const void *x_, size_t n, pt_dtype t)
{
    switch (t) {
    case PT_F32: {
        float *y = y_, af = (float)a;
        const float *x = x_;
#pragma omp parallel for simd schedule(static) if (n >= PT_PAR_MIN)
        for (size_t i = 0; i < n; i++) y[i] += af * x[i];
        return;
    }
    case PT_F64: {
        double *y = y_;
        const double *x = x_;
#pragma omp parallel for simd schedule(static) if (n >= PT_PAR_MIN)
        for (size_t i = 0; i < n; i++) y[i] += a * x[i];
        return;
    }
    case PT_BF16: {
        pt_bf16 *y = y_;
        const pt_bf16 *x = x_;
        const float af = (float)a;
#pragma omp parallel for simd schedule(static) if (n >= PT_PAR_MIN)
        for (size_t i = 0; i < n; i++) y[i] = pt_f32_to_bf16(pt_bf16_to_f32(y[i]) + af * pt_bf16_to_f32(x[i]));
        return;
    }
    }
    bad_dtype("axpy", t);
}

static void gen_scale(void *x_, double a, size_t n, pt_dtype t)
{
    switch (t) {
    case PT_F32: {
        float *x = x_, af = (float)a;
#pragma omp parallel for simd schedule(static) if (n >= PT_PAR_MIN)
        for (size_t i = 0; i < n; i++) x[i] *= af;
        return;
    }
    case PT_F64: {
        double *x = x_;
#pragma omp parallel for simd schedule(static) if (n >= PT_PAR_MIN)
        for (size_t i = 0; i < n; i++) x[i] *= a;
        return;
    }
    case PT_BF16: {
        pt_bf16 *x = x_;
        const float af = (float)a;
#pragma omp parallel for simd schedule(static) if (n >= PT_PAR_MIN)
        for (size_t i = 0; i < n; i++) x[i] = pt_f32_to_bf16(pt_bf16_to_f32(x[i]) * af);
        return;
    }
    }
    bad_dtype("scale", t);
}

static double gen_sum(const void *x_, size_t n, pt_dtype t)
{
    double s = 0;
    switch (t) {
    case PT_F32: {
        const float *x = x_;
#pragma omp parallel for simd schedule(static) reduction(+ : s) if (n >= PT_PAR_MIN)
        for (size_t i = 0; i < n; i++) s += (double)x[i];
        return s;
    }
    case PT_F64: {
        const double *x = x_;
#pragma omp parallel for simd schedule(static) reduction(+ : s) if (n >= PT_PAR_MIN)
        for (size_t i = 0; i < n; i++) s += (double)x[i];
        return s;
    }
    case PT_BF16: {
        const pt_bf16 *x = x_;
#pragma omp parallel for simd schedule(static) reduction(+ : s) if (n >= PT_PAR_MIN)
        for (size_t i = 0; i < n; i++) s += (double)pt_bf16_to_f32(x[i]);
        return s;
    }
    }
    bad_dtype("sum", t);
    return 0;
}

static double gen_sumsq(const void *x_, size_t n, pt_dtype t)
{
    double s = 0;
    switch (t) {
    case PT_F32: {
        const float *x = x_;
#pragma omp parallel for simd schedule(static) reduction(+ : s) if (n >= PT_PAR_MIN)
        for (size_t i = 0; i < n; i++) s += (double)x[i] * (double)x[i];
        return s;
    }
    case PT_F64: {
        const double *x = x_;
#pragma omp parallel for simd schedule(static) reduction(+ : s) if (n >= PT_PAR_MIN)
        for (size_t i = 0; i < n; i++) s += (double)x[i] * (double)x[i];
        return s;
    }
    case PT_BF16: {
        const pt_bf16 *x = x_;
#pragma omp parallel for simd schedule(static) reduction(+ : s) if (n >= PT_PAR_MIN)
        for (size_t i = 0; i < n; i++) {
            const double v = (double)pt_bf16_to_f32(x[i]);
            s += v * v;
        }
        return s;
    }
    }
    bad_dtype("sumsq", t);
    return 0;
}

/* ---- the three instantiations of cpu_ops.inc -------------------------------- */
/* The tables' GEMMs, outside and inside parallel regions: cblas after
 * pt_blas_gemm_prepare, which holds a pthreads OpenBLAS to one thread inside
 * a region (backend/blas.h) */
static void cpu_sgemm(enum CBLAS_ORDER o, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, int M, int N, int K,
                      float alpha, const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
    (void)o; /* always CblasRowMajor */
    pt_blas_sgemm(ta == CblasTrans, tb == CblasTrans, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

static void cpu_dgemm(enum CBLAS_ORDER o, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, int M, int N, int K,
                      double alpha, const double *A, int lda, const double *B, int ldb, double beta, double *C, int ldc)
{
    (void)o; /* always CblasRowMajor */
    pt_blas_dgemm(ta == CblasTrans, tb == CblasTrans, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

#define REAL float
#define ACT float
#define LD(x) (x)
#define ST(x) (x)
#define ACT_IS_REAL 1
#define SFX(x) x##_f32
#define PT_ROW_CLONES PT_ROW_CLONES_F32
#define GEMM cpu_sgemm
#define EXP expf
#define SQRT sqrtf
#define TANH tanhf
#define VEXP pt_vexpf
#define VTANH pt_vtanhf
#include "backend/cpu_ops.inc"
#undef ACT
#undef LD
#undef ST
#undef ACT_IS_REAL
#undef SFX

/* bf16 storage, float arithmetic: the float kernels' helpers (REAL, EXP,
 * VEXP, GEMM for the widened tiles) stay */
#define ACT pt_bf16
#define LD(x) pt_bf16_to_f32(x)
#define ST(x) pt_f32_to_bf16(x)
#define ACT_IS_REAL 0
#define SFX(x) x##_bf16
#include "backend/cpu_ops.inc"
#undef REAL
#undef ACT
#undef LD
#undef ST
#undef ACT_IS_REAL
#undef SFX
#undef GEMM
#undef EXP
#undef SQRT
#undef TANH
#undef VEXP
#undef VTANH
#undef PT_ROW_CLONES

#define REAL double
#define ACT double
#define LD(x) (x)
#define ST(x) (x)
#define ACT_IS_REAL 1
#define SFX(x) x##_f64
#define PT_ROW_CLONES 0
#define GEMM cpu_dgemm
#define EXP exp
#define SQRT sqrt
#define TANH tanh
#define VEXP exp
#define VTANH tanh
#include "backend/cpu_ops.inc"
#undef REAL
#undef ACT
#undef LD
#undef ST
#undef ACT_IS_REAL
#undef SFX
#undef GEMM
#undef EXP
#undef SQRT
#undef TANH
#undef VEXP
#undef VTANH
#undef PT_ROW_CLONES

/* ---- the tables: one fill per op family (ops.h's PT_OPS) ----------------------- */
/* The kernels above, by role: an ACT op's kernel is the instantiation of
 * the policy's activation type, an ACC op's that of its accumulation type
 * (the bf16 table shares the f32 table's), an ANY op's the generic one. */
#define ACT_K(p, op) ((p)->act == PT_F64 ? op##_f64 : (p)->act == PT_BF16 ? op##_bf16 : op##_f32)
#define ACC_K(p, op) ((p)->acc == PT_F64 ? op##_f64 : op##_f32)

static int fill_embed(pt_ops *o, const pt_prec_policy *p)
{
    o->embedding_fwd = ACT_K(p, embedding_fwd);
    o->embedding_bwd = ACT_K(p, embedding_bwd);
    o->posemb_fwd = ACT_K(p, posemb_fwd);
    o->posemb_bwd = ACT_K(p, posemb_bwd);
    return PT_OK;
}

static int fill_eltwise(pt_ops *o, const pt_prec_policy *p)
{
    o->gelu_fwd = ACT_K(p, gelu_fwd);
    o->gelu_bwd = ACT_K(p, gelu_bwd);
    o->add_fwd = ACT_K(p, add_fwd);
    o->add_bwd = ACT_K(p, add_bwd);
    o->bias_fwd = ACT_K(p, bias_fwd);
    o->bias_bwd = ACT_K(p, bias_bwd);
    o->rope_fwd = ACT_K(p, rope_fwd);
    o->rope_bwd = ACT_K(p, rope_bwd);
    o->swiglu_fwd = ACT_K(p, swiglu_fwd);
    o->swiglu_bwd = ACT_K(p, swiglu_bwd);
    return PT_OK;
}

static int fill_norm(pt_ops *o, const pt_prec_policy *p)
{
    o->layernorm_fwd = ACT_K(p, layernorm_fwd);
    o->layernorm_bwd = ACT_K(p, layernorm_bwd);
    o->layernorm_rowsum = ACT_K(p, layernorm_rowsum);
    o->layernorm_rowvar = ACT_K(p, layernorm_rowvar);
    o->layernorm_apply = ACT_K(p, layernorm_apply);
    o->layernorm_bwd_rowsums = ACT_K(p, layernorm_bwd_rowsums);
    o->layernorm_bwd_apply = ACT_K(p, layernorm_bwd_apply);
    o->rmsnorm_fwd = ACT_K(p, rmsnorm_fwd);
    o->rmsnorm_bwd = ACT_K(p, rmsnorm_bwd);
    o->rmsnorm_rowsumsq = ACT_K(p, rmsnorm_rowsumsq);
    o->rmsnorm_apply = ACT_K(p, rmsnorm_apply);
    o->rmsnorm_bwd_rowsums = ACT_K(p, rmsnorm_bwd_rowsums);
    o->rmsnorm_bwd_apply = ACT_K(p, rmsnorm_bwd_apply);
    return PT_OK;
}

static int fill_gemm(pt_ops *o, const pt_prec_policy *p)
{
    o->matmul_fwd = ACT_K(p, matmul_fwd);
    o->matmul_bwd = ACT_K(p, matmul_bwd);
    o->epilogue_fwd = ACT_K(p, epilogue_fwd);
    o->epilogue_bwd = ACT_K(p, epilogue_bwd);
    o->gemm_batched = ACC_K(p, gemm_batched);
    return PT_OK;
}

static int fill_attention(pt_ops *o, const pt_prec_policy *p)
{
    o->attention_fwd = ACT_K(p, attention_fwd);
    o->attention_bwd = ACT_K(p, attention_bwd);
    /* the materialised reference: tables whose act is their acc (ops.h) */
    o->attention_ref_fwd = p->act == PT_F64 ? attention_ref_fwd_f64 : p->act == PT_F32 ? attention_ref_fwd_f32 : NULL;
    o->attention_ref_bwd = p->act == PT_F64 ? attention_ref_bwd_f64 : p->act == PT_F32 ? attention_ref_bwd_f32 : NULL;
    o->softmax_causal_fwd = ACC_K(p, softmax_causal_fwd);
    o->softmax_causal_bwd = ACC_K(p, softmax_causal_bwd);
    return PT_OK;
}

static int fill_xent(pt_ops *o, const pt_prec_policy *p)
{
    o->xent_max = ACT_K(p, xent_max);
    o->xent_sumexp = ACT_K(p, xent_sumexp);
    o->xent_bwd = ACT_K(p, xent_bwd);
    o->classifier_fwd = ACT_K(p, classifier_fwd);
    o->classifier_bwd = ACT_K(p, classifier_bwd);
    o->classifier_rows_fwd = ACT_K(p, classifier_rows_fwd);
    o->classifier_rows_bwd = ACT_K(p, classifier_rows_bwd);
    o->xent_rescale = ACC_K(p, xent_rescale);
    o->xent_loss = ACC_K(p, xent_loss);
    return PT_OK;
}

static int fill_mem(pt_ops *o, const pt_prec_policy *p)
{
    (void)p; /* the dtype is each call's argument */
    o->zero = gen_zero;
    o->fill = gen_fill;
    o->copy = gen_copy;
    o->convert = gen_convert;
    o->copy2d = gen_copy2d;
    o->add2d = gen_add2d;
    o->axpy = gen_axpy;
    o->scale = gen_scale;
    o->sum = gen_sum;
    o->sumsq = gen_sumsq;
    return PT_OK;
}

static int fill_adamw(pt_ops *o, const pt_prec_policy *p)
{
    o->adamw = ACT_K(p, adamw);
    return PT_OK;
}
#undef ACT_K
#undef ACC_K

static const pt_ops_fill_fn cpu_fills[PT_FAM_N] = {
    [PT_FAM_EMBED] = fill_embed, [PT_FAM_ELTWISE] = fill_eltwise,     [PT_FAM_NORM] = fill_norm,
    [PT_FAM_GEMM] = fill_gemm,   [PT_FAM_ATTENTION] = fill_attention, [PT_FAM_XENT] = fill_xent,
    [PT_FAM_MEM] = fill_mem,     [PT_FAM_ADAMW] = fill_adamw,
};

/* the tests' reference: double throughout (no row of pt_prec_policies) */
static const pt_prec_policy prec_f64 = {"f64", PT_F64, PT_F64, PT_F64, PT_SCALE_NONE, 0};

int pt_cpu_ops_build(pt_ops *o, const pt_prec_policy *p, unsigned families)
{
    const char *name = p ? (p->act == PT_F32 ? "f32" : p->act == PT_BF16 ? "bf16" : p->act == PT_F64 ? "f64" : NULL)
                         : NULL;
    /* what cpu_ops.inc is instantiated for: (fp32, fp32), (bf16, fp32), (fp64, fp64), GEMM operands in the
     * activation type, no scaling */
    if (!name || p->gemm != p->act || p->acc != (p->act == PT_F64 ? PT_F64 : PT_F32) || p->scaling != PT_SCALE_NONE)
        return pt_fail(PT_EUNSUPP, "backend 'cpu' has no kernels for precision '%s' (valid: fp32, bf16)",
                       p && p->name ? p->name : "?");
    return pt_ops_build(o, "cpu", name, p, cpu_fills, families);
}

pt_ops pt_cpu_ops_f32, pt_cpu_ops_bf16, pt_cpu_ops_f64;

/* The three tables, when the library is loaded (callers and tests read them
 * as objects).  A table that fails its check (a family fill that left a
 * required entry NULL: a build defect) keeps prec NULL, so the backend's
 * lookup refuses it; its line is said here, once. */
__attribute__((constructor)) static void cpu_tables(void)
{
    pt_ops *const t[3] = {&pt_cpu_ops_f32, &pt_cpu_ops_bf16, &pt_cpu_ops_f64};
    const pt_prec_policy *const p[3] = {PT_PREC_POLICY_FP32, PT_PREC_POLICY_BF16, &prec_f64};
    for (int i = 0; i < 3; i++)
        if (pt_cpu_ops_build(t[i], p[i], PT_FAM_ALL) != PT_OK) fprintf(stderr, "ptrain: %s\n", pt_errmsg());
}

static void cpu_set_threads(int n)
{
    if (n < 1) n = 1;
    pt_blas_set_threads(n);
#ifdef _OPENMP
    omp_set_num_threads(n);
#endif
}

static int cpu_available(char *why, size_t len)
{
    if (len) why[0] = 0;
    return 1;
}

static int cpu_init(void)
{
    pt_blas_select(); /* kernels that match the CPU, before the first GEMM */
    return PT_OK;
}

/* a policy with a table; bf16 GEMM operands: the GEMM's choice (PTRAIN_BF16_GEMM or the ISA rule) */
static int cpu_prepare(const pt_prec_policy *p)
{
    if (!pt_backend_ops_for(&pt_cpu_backend, p)) return PT_EUNSUPP;
    return p->gemm == PT_BF16 ? pt_gemm_bf16_select() : PT_OK;
}

/* the header's "device: cpu (...)" says all there is */
static void cpu_describe(char *buf, size_t len)
{
    if (len) buf[0] = 0;
}

/* the CPU's entries report nothing afterwards: an error is a return or a check before */
static int cpu_status(const char **msg)
{
    *msg = "";
    return PT_OK;
}

const pt_backend pt_cpu_backend = {
    .name = "cpu",
    .ops = &pt_cpu_ops_f32,
    .ops_bf16 = &pt_cpu_ops_bf16,
    .set_threads = cpu_set_threads,
    .mem = &pt_arena_mem_host,
    .available = cpu_available,
    .init = cpu_init,
    .prepare = cpu_prepare,
    .describe = cpu_describe,
    .status = cpu_status,
    .dev = NULL,
};
