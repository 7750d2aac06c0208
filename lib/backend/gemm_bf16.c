/* SPDX-License-Identifier: MIT */
/* The CPU's bf16 GEMM: see gemm_bf16.h.
 *
 * The selection rule comes from bench/bench-gemm-bf16 on a 2-core KVM
 * guest of a Sapphire Rapids Xeon (AVX512_BF16 and AMX-BF16), Debian 12's
 * OpenBLAS 0.3.21 (SkylakeX kernels) and oneDNN 2.6.3: GFLOP/s over all
 * fifteen GEMMs of a step (forward, dinp, dw of qkv, attproj, fc, fcproj
 * and the vocabulary projection), 1024 rows, one thread timed by CPU time
 * (the machine is shared), GPT-2 124M / the bench preset (small); the
 * other classes by capping oneDNN with DNNL_MAX_CPU_ISA:
 *
 *   class                      fp32 sgemm   onednn      sbgemm     sgemm on tiles
 *   amx_bf16                   151 / 135    463 / 344   -          142 / 115
 *   avx512_bf16                155 / 139     98 /  96   104 / 97*  139 / 121
 *   none (avx512_core)         157 / 147     37 /  38   -          138 / 127
 *   none (avx2)                  -          no bf16 matmul in oneDNN 2.6
 *   * OpenBLAS 0.3.21 built with BUILD_BFLOAT16 for Cooperlake (its fp32
 *     sgemm 157 / 143 in that run); built for SapphireRapids its AMX
 *     sbgemm computes wrong sums (see find_avail).
 *
 * AMX tiles give oneDNN 3x fp32 sgemm; AVX512_BF16 dot products
 * (vdpbf16ps) land below fp32 sgemm in both libraries on this core;
 * without bf16 instructions oneDNN converts inside its GEMM at a quarter of
 * sgemm's rate.  So: amx_bf16 -> onednn; avx512_bf16 and none -> sgemm (fp32
 * compute on converted tiles, 0.85 to 0.95 of fp32 sgemm: the conversion
 * passes).  Without oneDNN, amx_bf16 -> sgemm as well. */
#define _GNU_SOURCE
#include "config.h"
#include "backend/gemm_bf16.h"
#include "backend/blas.h"
#include "core/core.h"

#include <cblas.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#if defined(__x86_64__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif
#ifdef PTRAIN_HAVE_ONEDNN
#include <oneapi/dnnl/dnnl.h>
#endif

/* OpenBLAS's bf16 GEMM (cblas.h declares it whether or not the library was
 * built with BUILD_BFLOAT16): weak, so the address is NULL unless the
 * OpenBLAS loaded at run time exports it */
#pragma weak cblas_sbgemm
extern char *openblas_get_corename(void);
extern char *openblas_get_config(void);

/* ---------------------------------------------------------------- conversion */


/* Row kernels compiled for AVX-512, AVX2 and baseline x86-64
 * (gemm_bf16_rows.inc), the copy of pt_kernel_isa_level() called (blas.h:
 * PTRAIN_MAX_CPU_ISA caps it), as cpu.c's row kernels */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(PTRAIN_NO_CLONES)
#define ROW(x) x##_v4
#pragma GCC push_options
#pragma GCC target("arch=x86-64-v4")
#include "backend/gemm_bf16_rows.inc"
#pragma GCC pop_options
#undef ROW
#define ROW(x) x##_v3
#pragma GCC push_options
#pragma GCC target("arch=x86-64-v3")
#include "backend/gemm_bf16_rows.inc"
#pragma GCC pop_options
#undef ROW
#define PT_CVT_PICK(v4, v3, v1) (pt_kernel_isa_level() >= PT_ISA_AVX512 ? v4 : pt_kernel_isa_level() >= PT_ISA_AVX2 ? v3 : v1)
#else
#define PT_CVT_PICK(v4, v3, v1) (v1)
#endif
#define ROW(x) x##_v1
#include "backend/gemm_bf16_rows.inc"
#undef ROW

static inline void to_f32_row(float *restrict d, const pt_bf16 *restrict s, size_t n)
{
    PT_CVT_PICK(to_f32_row_v4, to_f32_row_v3, to_f32_row_v1)(d, s, n);
}

static inline void to_bf16_row(pt_bf16 *restrict d, const float *restrict s, size_t n)
{
    PT_CVT_PICK(to_bf16_row_v4, to_bf16_row_v3, to_bf16_row_v1)(d, s, n);
}



enum { CHUNK = 1 << 16 }; /* elements per thread-loop piece of the 1-D converters */

void pt_f32_to_bf16_n(pt_bf16 *dst, const float *src, size_t n)
{
    const size_t pieces = (n + CHUNK - 1) / CHUNK;
#pragma omp parallel for schedule(static) if (pieces > 1)
    for (size_t p = 0; p < pieces; p++) {
        size_t i = p * CHUNK, m = n - i < CHUNK ? n - i : CHUNK;
        to_bf16_row(dst + i, src + i, m);
    }
}

void pt_bf16_to_f32_n(float *dst, const pt_bf16 *src, size_t n)
{
    const size_t pieces = (n + CHUNK - 1) / CHUNK;
#pragma omp parallel for schedule(static) if (pieces > 1)
    for (size_t p = 0; p < pieces; p++) {
        size_t i = p * CHUNK, m = n - i < CHUNK ? n - i : CHUNK;
        to_f32_row(dst + i, src + i, m);
    }
}

/* ---------------------------------------------------------------- ISA class */

static int cpu_isa, capped_isa;
static char isa_note[160]; /* how the class was capped or why AMX is off, or "" */
static pthread_once_t isa_once = PTHREAD_ONCE_INIT;

static void detect_isa(void)
{
    /* the CPU's class (core/cpu.h), within PTRAIN_MAX_CPU_ISA's cap */
    cpu_isa = pt_kernel_isa_level() >= PT_ISA_AVX512 ? pt_cpu_bf16_class() : PT_BF16_ISA_NONE;
#if defined(__x86_64__)
    /* Linux hands out the 8 KiB tile data state per process on request */
    if (cpu_isa == PT_BF16_ISA_AMX &&
        syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XFEATURE_XTILEDATA */) != 0) {
        snprintf(isa_note, sizeof isa_note, "AMX-BF16 present but Linux refused the tile-data permission");
        cpu_isa = PT_BF16_ISA_AVX512;
    }
#endif
    capped_isa = cpu_isa;
#ifdef PTRAIN_HAVE_ONEDNN
    const int e = (int)dnnl_get_effective_cpu_isa();
    const int amx = dnnl_cpu_isa_avx512_core_amx, bf = dnnl_cpu_isa_avx512_core_bf16;
    const int dn = (e & amx) == amx ? PT_BF16_ISA_AMX : (e & bf) == bf ? PT_BF16_ISA_AVX512 : PT_BF16_ISA_NONE;
    if (dn < capped_isa) {
        const char *cap = getenv("DNNL_MAX_CPU_ISA");
        snprintf(isa_note, sizeof isa_note, "capped from %s by oneDNN's ISA%s%s", pt_bf16_isa_name(cpu_isa),
                 cap ? " DNNL_MAX_CPU_ISA=" : "", cap ? cap : "");
        capped_isa = dn;
    }
#endif
}

int pt_bf16_isa(void)
{
    pthread_once(&isa_once, detect_isa);
    return capped_isa;
}

int pt_bf16_cpu_isa(void)
{
    pthread_once(&isa_once, detect_isa);
    return cpu_isa;
}

/* ---------------------------------------------------------------- checks */

static int check_args(int ta, int tb, int M, int N, int K, const void *A, int lda, const void *B, int ldb, void *C,
                      int ctype, int ldc)
{
    if ((ta != 0 && ta != 1) || (tb != 0 && tb != 1))
        return pt_fail(PT_EINVAL, "bf16 GEMM: ta=%d tb=%d: valid values are 0 and 1", ta, tb);
    if (M < 0 || N < 0 || K < 0) return pt_fail(PT_EINVAL, "bf16 GEMM: M=%d N=%d K=%d: sizes must be >= 0", M, N, K);
    if (ctype != PT_BF16_OUT_F32 && ctype != PT_BF16_OUT_BF16)
        return pt_fail(PT_EINVAL, "bf16 GEMM: output type %d: valid are PT_BF16_OUT_F32, PT_BF16_OUT_BF16", ctype);
    const int mina = ta ? M : K, minb = tb ? K : N;
    if (lda < (mina > 1 ? mina : 1) || ldb < (minb > 1 ? minb : 1) || ldc < (N > 1 ? N : 1))
        return pt_fail(
            PT_EINVAL,
            "bf16 GEMM: lda=%d ldb=%d ldc=%d for M=%d N=%d K=%d ta=%d tb=%d: need lda >= %d, ldb >= %d, ldc >= %d", lda,
            ldb, ldc, M, N, K, ta, tb, mina > 1 ? mina : 1, minb > 1 ? minb : 1, N > 1 ? N : 1);
    if (M > 0 && N > 0 && (!C || (K > 0 && (!A || !B))))
        return pt_fail(PT_EINVAL, "bf16 GEMM: NULL %s for M=%d N=%d K=%d", !C ? "C" : !A ? "A" : "B", M, N, K);
    return PT_OK;
}

/* C = beta C + bias (beta 0: C not read), fp32 C; rows of N */
static void scale_bias_f32(float *C, int ldc, int M, int N, float beta, const float *bias)
{
#pragma omp parallel for schedule(static) if ((size_t)M * N >= 32768)
    for (int m = 0; m < M; m++) {
        float *c = C + (size_t)m * ldc;
        if (beta == 0) {
            if (bias) memcpy(c, bias, sizeof(float) * (size_t)N);
            else memset(c, 0, sizeof(float) * (size_t)N);
        } else {
#pragma omp simd
            for (int n = 0; n < N; n++) c[n] = beta * c[n] + (bias ? bias[n] : 0.0f);
        }
    }
}

static inline void finish_row(pt_bf16 *restrict c, const float *restrict t, const float *restrict bias,
                                     float beta, int N)
{
    PT_CVT_PICK(finish_row_v4, finish_row_v3, finish_row_v1)(c, t, bias, beta, N);
}

/* C (bf16) = round(T + beta C + bias), T fp32 [M, N] with row stride ldt; T NULL: 0 */
static void finish_bf16(pt_bf16 *C, int ldc, const float *T, size_t ldt, int M, int N, float beta, const float *bias)
{
#pragma omp parallel for schedule(static) if ((size_t)M * N >= 32768)
    for (int m = 0; m < M; m++) finish_row(C + (size_t)m * ldc, T ? T + (size_t)m * ldt : NULL, bias, beta, N);
}

/* ---------------------------------------------------------------- scratch */

/* per-thread conversion buffers, freed at thread exit */
enum { NSCRATCH = 3 };
typedef struct scratch {
    void *p[NSCRATCH];
    size_t n[NSCRATCH];
} scratch;
static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;

static void scratch_free(void *v)
{
    scratch *s = v;
    for (int i = 0; i < NSCRATCH; i++) free(s->p[i]);
    free(s);
}

static void scratch_init(void) { pthread_key_create(&scratch_key, scratch_free); }

static void *scratch_get(int i, size_t bytes)
{
    pthread_once(&scratch_once, scratch_init);
    scratch *s = pthread_getspecific(scratch_key);
    if (!s) {
        if (!(s = calloc(1, sizeof *s)) || pthread_setspecific(scratch_key, s) != 0) {
            free(s);
            return NULL;
        }
    }
    if (s->n[i] < bytes) {
        free(s->p[i]);
        s->p[i] = malloc(bytes);
        s->n[i] = s->p[i] ? bytes : 0;
    }
    return s->p[i];
}

/* an implementation with fp32 C and no bias: C = alpha op(A) op(B) + beta C */
typedef int (*f32_gemm)(int ta, int tb, int M, int N, int K, float alpha, const pt_bf16 *A, int lda, const pt_bf16 *B,
                        int ldb, float beta, float *C, int ldc);

/* ---------------------------------------------------------------- sgemm on converted tiles */

/* Tiles: op(A) [mb, kc] and op(B) [kc, nb] in fp32, mb <= MB rows, nb <=
 * NB columns, kc as deep as the budget (floats, both tiles together)
 * allows, in steps of 16: the training's GEMMs below the vocabulary
 * projection fit whole (one conversion of each operand, one sgemm); the
 * projection runs in 4096-column or 2048-row tiles as deep as K or 2048. */
enum { MB = 2048, NB = 4096, KSTEP = 16 };
static size_t tile_budget = (size_t)8 << 20; /* 32 MiB */

size_t pt_gemm_bf16_tile_budget(size_t floats)
{
    size_t old = tile_budget;
    if (floats) tile_budget = floats;
    return old;
}

/* in one parallel region: d1 = widen(s1) [r1, c1] and, if d2, d2 = widen(s2) [r2, c2] */
static void to_f32_tiles(float *d1, size_t ld1, const pt_bf16 *s1, size_t ls1, size_t r1, size_t c1, float *d2,
                         size_t ld2, const pt_bf16 *s2, size_t ls2, size_t r2, size_t c2)
{
    if (!d2) r2 = 0;
#pragma omp parallel if (r1 * c1 + r2 * c2 >= 32768)
    {
#pragma omp for schedule(static) nowait
        for (size_t r = 0; r < r1; r++) to_f32_row(d1 + r * ld1, s1 + r * ls1, c1);
#pragma omp for schedule(static) nowait
        for (size_t r = 0; r < r2; r++) to_f32_row(d2 + r * ld2, s2 + r * ls2, c2);
    }
}

/* fp32 C = alpha op(A) op(B) + beta C */
static int sgemm_tiles(int ta, int tb, int M, int N, int K, float alpha, const pt_bf16 *A, int lda, const pt_bf16 *B,
                       int ldb, float beta, float *C, int ldc)
{
    const int mb_max = M < MB ? M : MB, nb_max = N < NB ? N : NB;
    size_t deep = tile_budget / (size_t)(mb_max + nb_max);
    int kc_max = deep >= (size_t)K ? K : (int)(deep / KSTEP * KSTEP);
    if (kc_max < KSTEP) kc_max = K < KSTEP ? K : KSTEP;
    float *at = scratch_get(0, sizeof(float) * (size_t)mb_max * kc_max);
    float *bt = scratch_get(1, sizeof(float) * (size_t)kc_max * nb_max);
    if (!at || !bt)
        return pt_fail(PT_ENOMEM, "bf16 GEMM (sgemm): no memory for %dx%d and %dx%d fp32 tiles", mb_max, kc_max, kc_max,
                       nb_max);
    for (int n0 = 0; n0 < N; n0 += NB) {
        const int nb = N - n0 < NB ? N - n0 : NB;
        for (int k0 = 0; k0 < K; k0 += kc_max) {
            const int kc = K - k0 < kc_max ? K - k0 : kc_max;
            for (int m0 = 0; m0 < M; m0 += MB) {
                const int mb = M - m0 < MB ? M - m0 : MB;
                /* op(A)[m0.., k0..]: A stored [M, K] rows m0.. cols k0.., or [K, M] rows k0.. cols m0..;
                 * op(B)[k0.., n0..] (with the first A tile): B stored [K, N] rows k0.. cols n0.., or
                 * [N, K] rows n0.. cols k0.. */
                const pt_bf16 *as = ta ? A + (size_t)k0 * lda + m0 : A + (size_t)m0 * lda + k0;
                const pt_bf16 *bs = tb ? B + (size_t)n0 * ldb + k0 : B + (size_t)k0 * ldb + n0;
                to_f32_tiles(at, (size_t)(ta ? mb : kc), as, (size_t)lda, (size_t)(ta ? kc : mb),
                             (size_t)(ta ? mb : kc), m0 == 0 ? bt : NULL, (size_t)(tb ? kc : nb), bs, (size_t)ldb,
                             (size_t)(tb ? nb : kc), (size_t)(tb ? kc : nb));
                pt_blas_sgemm(ta, tb, mb, nb, kc, alpha, at, ta ? mb : kc, bt, tb ? kc : nb, k0 == 0 ? beta : 1.0f,
                              C + (size_t)m0 * ldc + n0, ldc);
            }
        }
    }
    return PT_OK;
}

/* ---------------------------------------------------------------- OpenBLAS sbgemm */

static int sbgemm_f32(int ta, int tb, int M, int N, int K, float alpha, const pt_bf16 *A, int lda, const pt_bf16 *B,
                      int ldb, float beta, float *C, int ldc)
{
    pt_blas_gemm_prepare();
    cblas_sbgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda,
                 B, ldb, beta, C, ldc);
    return PT_OK;
}

/* OpenBLAS kernel sets whose sbgemm uses bf16 instructions (kernel/x86_64/
 * KERNEL.COOPERLAKE, KERNEL.SAPPHIRERAPIDS; the others fall back to the
 * generic C kernel) */
static int sbgemm_native(void)
{
    const char *core = openblas_get_corename();
    return core && (strcasecmp(core, "Cooperlake") == 0 || strcasecmp(core, "SapphireRapids") == 0);
}

/* ---------------------------------------------------------------- oneDNN matmul */

#ifdef PTRAIN_HAVE_ONEDNN
typedef struct dn_key {
    int ta, tb, M, N, K, lda, ldb, ldc, ctype, bias;
    float alpha, beta;
} dn_key;

enum { DN_CACHE = 64 };
static struct dn_entry {
    dn_key key;
    int used;
    dnnl_primitive_desc_t pd;
    dnnl_primitive_t prim;
    dnnl_memory_desc_t a, b, c, bias;
} dn_cache[DN_CACHE];
static int dn_next; /* the entry replaced when the cache is full (round robin) */
static pthread_mutex_t dn_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t dn_once = PTHREAD_ONCE_INIT;
static dnnl_engine_t dn_engine;
static dnnl_stream_t dn_stream;
static dnnl_status_t dn_init_status;

static void dn_init(void)
{
    dn_init_status = dnnl_engine_create(&dn_engine, dnnl_cpu, 0);
    if (dn_init_status == dnnl_success)
        dn_init_status = dnnl_stream_create(&dn_stream, dn_engine, dnnl_stream_default_flags);
}

static const char *dn_status(dnnl_status_t s)
{
    switch (s) {
    case dnnl_success: return "success";
    case dnnl_out_of_memory: return "out of memory";
    case dnnl_invalid_arguments: return "invalid arguments";
    case dnnl_unimplemented: return "unimplemented (no implementation for this problem on this CPU)";
    case dnnl_runtime_error: return "runtime error";
    default: return "error";
    }
}

/* memory descriptors and the primitive descriptor for key k into e (not the
 * primitive itself) */
static dnnl_status_t dn_make_pd(const dn_key *k, struct dn_entry *e)
{
    dnnl_dims_t da = {k->M, k->K}, db = {k->K, k->N}, dc = {k->M, k->N}, dbias = {1, k->N};
    dnnl_dims_t sa = {k->ta ? 1 : k->lda, k->ta ? k->lda : 1}, sb = {k->tb ? 1 : k->ldb, k->tb ? k->ldb : 1};
    dnnl_dims_t sc = {k->ldc, 1}, sbias = {k->N, 1};
    dnnl_status_t s;
    if ((s = dnnl_memory_desc_init_by_strides(&e->a, 2, da, dnnl_bf16, sa)) ||
        (s = dnnl_memory_desc_init_by_strides(&e->b, 2, db, dnnl_bf16, sb)) ||
        (s = dnnl_memory_desc_init_by_strides(&e->c, 2, dc, k->ctype == PT_BF16_OUT_BF16 ? dnnl_bf16 : dnnl_f32, sc)) ||
        (s = dnnl_memory_desc_init_by_strides(&e->bias, 2, dbias, dnnl_f32, sbias)))
        return s;
    dnnl_matmul_desc_t md;
    if ((s = dnnl_matmul_desc_init(&md, &e->a, &e->b, k->bias ? &e->bias : NULL, &e->c))) return s;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t po = NULL;
    if ((s = dnnl_primitive_attr_create(&attr))) return s;
    if (k->alpha != 1.0f) s = dnnl_primitive_attr_set_output_scales(attr, 1, 0, &k->alpha);
    if (!s && k->beta != 0.0f) {
        if (!(s = dnnl_post_ops_create(&po)) && !(s = dnnl_post_ops_append_sum(po, k->beta)))
            s = dnnl_primitive_attr_set_post_ops(attr, po);
    }
    if (!s) s = dnnl_primitive_desc_create(&e->pd, &md, attr, dn_engine, NULL);
    if (po) dnnl_post_ops_destroy(po);
    dnnl_primitive_attr_destroy(attr);
    return s;
}

static void dn_key_of(dn_key *k, int ta, int tb, int M, int N, int K, float alpha, int lda, int ldb, float beta,
                      int ctype, int ldc, const float *bias)
{
    memset(k, 0, sizeof *k); /* compared with memcmp */
    k->ta = ta, k->tb = tb, k->M = M, k->N = N, k->K = K, k->lda = lda, k->ldb = ldb, k->ldc = ldc;
    k->ctype = ctype, k->bias = bias != NULL, k->alpha = alpha, k->beta = beta;
}

static int onednn_run(int ta, int tb, int M, int N, int K, float alpha, const pt_bf16 *A, int lda, const pt_bf16 *B,
                      int ldb, float beta, void *C, int ctype, int ldc, const float *bias)
{
    pthread_once(&dn_once, dn_init);
    if (dn_init_status != dnnl_success)
        return pt_fail(PT_EUNSUPP, "bf16 GEMM (onednn): no CPU engine: %s", dn_status(dn_init_status));
    /* oneDNN's bias is added before the output scale; with alpha != 1 it is
     * added here afterwards instead */
    dn_key k;
    dn_key_of(&k, ta, tb, M, N, K, alpha, lda, ldb, beta, ctype, ldc, bias);
    pthread_mutex_lock(&dn_lock);
    struct dn_entry *e = NULL;
    for (int i = 0; i < DN_CACHE && !e; i++)
        if (dn_cache[i].used && memcmp(&dn_cache[i].key, &k, sizeof k) == 0) e = &dn_cache[i];
    dnnl_status_t s = dnnl_success;
    if (!e) {
        e = &dn_cache[dn_next];
        dn_next = (dn_next + 1) % DN_CACHE;
        if (e->used) {
            dnnl_primitive_destroy(e->prim);
            dnnl_primitive_desc_destroy(e->pd);
            e->used = 0;
        }
        e->key = k;
        if (!(s = dn_make_pd(&k, e))) {
            if ((s = dnnl_primitive_create(&e->prim, e->pd))) dnnl_primitive_desc_destroy(e->pd);
            else e->used = 1;
        }
    }
    dnnl_memory_t ma = NULL, mb = NULL, mc = NULL, mbias = NULL;
    if (!s && !(s = dnnl_memory_create(&ma, &e->a, dn_engine, (void *)A)) &&
        !(s = dnnl_memory_create(&mb, &e->b, dn_engine, (void *)B)) &&
        !(s = dnnl_memory_create(&mc, &e->c, dn_engine, C)) &&
        !(bias && (s = dnnl_memory_create(&mbias, &e->bias, dn_engine, (void *)bias)))) {
        dnnl_exec_arg_t args[4] = {
            {DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, mc}, {DNNL_ARG_BIAS, mbias}};
        if (!(s = dnnl_primitive_execute(e->prim, dn_stream, bias ? 4 : 3, args))) s = dnnl_stream_wait(dn_stream);
    }
    if (ma) dnnl_memory_destroy(ma);
    if (mb) dnnl_memory_destroy(mb);
    if (mc) dnnl_memory_destroy(mc);
    if (mbias) dnnl_memory_destroy(mbias);
    pthread_mutex_unlock(&dn_lock);
    if (s)
        return pt_fail(PT_EUNSUPP, "bf16 GEMM (onednn): matmul %dx%dx%d ta=%d tb=%d to %s: %s", M, N, K, ta, tb,
                       ctype == PT_BF16_OUT_BF16 ? "bf16" : "f32", dn_status(s));
    return PT_OK;
}

static int onednn_f32(int ta, int tb, int M, int N, int K, float alpha, const pt_bf16 *A, int lda, const pt_bf16 *B,
                      int ldb, float beta, float *C, int ldc)
{
    return onednn_run(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, PT_BF16_OUT_F32, ldc, NULL);
}
#endif

const char *pt_gemm_bf16_onednn_impl(int ta, int tb, int M, int N, int K, int ctype)
{
    static char out[96];
#ifdef PTRAIN_HAVE_ONEDNN
    pthread_once(&dn_once, dn_init);
    if (dn_init_status != dnnl_success) {
        snprintf(out, sizeof out, "[no CPU engine: %s]", dn_status(dn_init_status));
        return out;
    }
    dn_key k;
    struct dn_entry e;
    dn_key_of(&k, ta, tb, M, N, K, 1.0f, ta ? M : K, tb ? K : N, 0.0f, ctype, N, NULL);
    dnnl_status_t s = dn_make_pd(&k, &e);
    const char *impl = NULL;
    if (!s) {
        s = dnnl_primitive_desc_query(e.pd, dnnl_query_impl_info_str, 0, &impl);
        snprintf(out, sizeof out, "%s", !s && impl ? impl : "?");
        dnnl_primitive_desc_destroy(e.pd);
    }
    if (s) snprintf(out, sizeof out, "[%s]", dn_status(s));
#else
    (void)ta, (void)tb, (void)M, (void)N, (void)K, (void)ctype;
    snprintf(out, sizeof out, "[not built with oneDNN]");
#endif
    return out;
}

/* ---------------------------------------------------------------- dispatch */

const char *pt_gemm_bf16_impl_name(int impl)
{
    static const char *const names[PT_GEMM_BF16_NIMPL] = {"auto", "onednn", "sbgemm", "sgemm"};
    return impl >= 0 && impl < PT_GEMM_BF16_NIMPL ? names[impl] : NULL;
}

static void blas_version(char *out, size_t n)
{
    const char *cfg = openblas_get_config();
    char name[32] = "OpenBLAS", ver[24] = "";
    if (cfg) sscanf(cfg, "%31s %23s", name, ver);
    snprintf(out, n, "%s%s%s", name, *ver ? " " : "", ver);
}

/* which implementations can run, found once */
static int avail[PT_GEMM_BF16_NIMPL];
static char avail_why[PT_GEMM_BF16_NIMPL][224];
static pthread_once_t avail_once = PTHREAD_ONCE_INIT;

static void find_avail(void)
{
#ifdef PTRAIN_HAVE_ONEDNN
    const char *impl_name = pt_gemm_bf16_onednn_impl(0, 1, 64, 64, 64, PT_BF16_OUT_F32);
    avail[PT_GEMM_BF16_ONEDNN] = impl_name[0] != '[';
    if (!avail[PT_GEMM_BF16_ONEDNN])
        snprintf(avail_why[PT_GEMM_BF16_ONEDNN], sizeof avail_why[0], "oneDNN has no bf16 matmul on this CPU %s",
                 impl_name);
#else
    snprintf(avail_why[PT_GEMM_BF16_ONEDNN], sizeof avail_why[0],
             "ptrain was built without oneDNN (libdnnl-dev; configure --with-onednn)");
#endif
    pt_blas_select(); /* the kernel set sbgemm runs */
    char v[64];
    blas_version(v, sizeof v);
    const char *core = openblas_get_corename(), *cfg = openblas_get_config();
    int maj = 0, min = 0, pat = 0;
    if (cfg) sscanf(cfg, "%*s %d.%d.%d", &maj, &min, &pat);
    avail[PT_GEMM_BF16_SBGEMM] = cblas_sbgemm != NULL;
    if (!avail[PT_GEMM_BF16_SBGEMM])
        snprintf(avail_why[PT_GEMM_BF16_SBGEMM], sizeof avail_why[0],
                 "%s does not export cblas_sbgemm (built without BUILD_BFLOAT16)", v);
    else if (core && strcasecmp(core, "SapphireRapids") == 0 && maj * 10000 + min * 100 + pat < 324) {
        /* tests/unit/test_gemm_bf16 sees it too: wrong sums for sizes not multiples of 16 */
        avail[PT_GEMM_BF16_SBGEMM] = 0;
        snprintf(
            avail_why[PT_GEMM_BF16_SBGEMM], sizeof avail_why[0],
            "%s's SapphireRapids sbgemm kernels compute wrong results (fixed in 0.3.24, OpenBLAS pull request 4048)",
            v);
    }
    avail[PT_GEMM_BF16_SGEMM] = 1;
    snprintf(avail_why[PT_GEMM_BF16_AUTO], sizeof avail_why[0], "auto is not an implementation");
}

int pt_gemm_bf16_available(int impl, char *why, size_t n)
{
    pthread_once(&avail_once, find_avail);
    const int ok = impl > PT_GEMM_BF16_AUTO && impl < PT_GEMM_BF16_NIMPL && avail[impl];
    if (why && n) {
        if (ok) *why = 0;
        else if (impl >= 0 && impl < PT_GEMM_BF16_NIMPL) snprintf(why, n, "%s", avail_why[impl]);
        else snprintf(why, n, "no implementation %d (valid: 1..%d)", impl, PT_GEMM_BF16_NIMPL - 1);
    }
    return ok;
}

static pthread_once_t sel_once = PTHREAD_ONCE_INIT;
static int sel_impl, sel_status;
static char sel_reason[160], sel_error[PT_ERROR_LEN];

/* the rule (measurements at the top of this file) */
static int rule(int isa, char *why, size_t n)
{
    const char *name = pt_bf16_isa_name(isa);
    if (isa == PT_BF16_ISA_AMX) {
        if (pt_gemm_bf16_available(PT_GEMM_BF16_ONEDNN, NULL, 0)) {
            snprintf(why, n, "rule for %s", name);
            return PT_GEMM_BF16_ONEDNN;
        }
        snprintf(why, n, "rule for %s without oneDNN", name);
        return PT_GEMM_BF16_SGEMM;
    }
    if (isa == PT_BF16_ISA_AVX512) {
        snprintf(why, n, "rule for %s: its bf16 dot products measured slower than fp32 sgemm", name);
        return PT_GEMM_BF16_SGEMM;
    }
    snprintf(why, n, "rule for a CPU without bf16 instructions");
    return PT_GEMM_BF16_SGEMM;
}

static void do_select(void)
{
    const int isa = pt_bf16_isa();
    const char *env = getenv("PTRAIN_BF16_GEMM");
    sel_status = PT_OK;
    if (!env || !*env || strcmp(env, "auto") == 0) {
        sel_impl = rule(isa, sel_reason, sizeof sel_reason);
        return;
    }
    int want = 0;
    for (int i = 1; i < PT_GEMM_BF16_NIMPL; i++)
        if (strcmp(env, pt_gemm_bf16_impl_name(i)) == 0) want = i;
    char why[224];
    if (!want) {
        sel_status = PT_EINVAL;
        snprintf(sel_error, sizeof sel_error, "PTRAIN_BF16_GEMM=%s: valid values are onednn, sbgemm, sgemm, auto", env);
    } else if (!pt_gemm_bf16_available(want, why, sizeof why)) {
        sel_status = PT_EUNSUPP;
        snprintf(sel_error, sizeof sel_error, "PTRAIN_BF16_GEMM=%s cannot run here: %s", env, why);
    } else {
        sel_impl = want;
        snprintf(sel_reason, sizeof sel_reason, "PTRAIN_BF16_GEMM=%s", env);
        return;
    }
    sel_impl = PT_GEMM_BF16_AUTO;
    snprintf(sel_reason, sizeof sel_reason, "%.150s", sel_error);
}

int pt_gemm_bf16_select(void)
{
    pthread_once(&sel_once, do_select);
    return sel_status ? pt_fail(sel_status, "%s", sel_error) : PT_OK;
}

int pt_gemm_bf16_impl(void)
{
    pthread_once(&sel_once, do_select);
    return sel_impl;
}

const char *pt_gemm_bf16_summary(void)
{
    static char line[640];
    pthread_once(&sel_once, do_select);
    const int isa = pt_bf16_isa();
    char what[128] = "", v[64];
    switch (sel_impl) {
    case PT_GEMM_BF16_ONEDNN: {
#ifdef PTRAIN_HAVE_ONEDNN
        const dnnl_version_t *dv = dnnl_version();
        snprintf(what, sizeof what, " (oneDNN %d.%d.%d, %s)", dv->major, dv->minor, dv->patch,
                 pt_gemm_bf16_onednn_impl(0, 1, 1024, 1024, 1024, PT_BF16_OUT_BF16));
#endif
        break;
    }
    case PT_GEMM_BF16_SBGEMM:
        blas_version(v, sizeof v);
        snprintf(what, sizeof what, " (%s cblas_sbgemm, kernels %s%s)", v, openblas_get_corename(),
                 sbgemm_native() ? "" : ": generic C, no bf16 instructions");
        break;
    case PT_GEMM_BF16_SGEMM: snprintf(what, sizeof what, " (fp32 compute on converted tiles)"); break;
    default: break;
    }
    snprintf(line, sizeof line, "bf16 GEMM %s%s on a%s %s CPU%s%s [%s]",
             sel_impl ? pt_gemm_bf16_impl_name(sel_impl) : "unavailable", what, isa != PT_BF16_ISA_NONE ? "n" : "",
             isa == PT_BF16_ISA_NONE ? "no-bf16" : pt_bf16_isa_name(isa), *isa_note ? ", " : "", isa_note, sel_reason);
    return line;
}

int pt_gemm_bf16_with(int impl, int ta, int tb, int M, int N, int K, float alpha, const pt_bf16 *A, int lda,
                      const pt_bf16 *B, int ldb, float beta, void *C, int ctype, int ldc, const float *bias)
{
    int rc = check_args(ta, tb, M, N, K, A, lda, B, ldb, C, ctype, ldc);
    if (rc) return rc;
    if (impl == PT_GEMM_BF16_AUTO) {
        if ((rc = pt_gemm_bf16_select())) return rc;
        impl = sel_impl;
    }
    pt_bf16_isa(); /* once: Linux's AMX permission, before an OpenBLAS AMX kernel runs */
    char why[224];
    if (!pt_gemm_bf16_available(impl, why, sizeof why))
        return pt_fail(PT_EUNSUPP, "bf16 GEMM %s: %s",
                       pt_gemm_bf16_impl_name(impl) ? pt_gemm_bf16_impl_name(impl) : "?", why);
    if (M == 0 || N == 0) return PT_OK;
    if (K == 0) { /* C = beta C + bias */
        if (ctype == PT_BF16_OUT_F32) scale_bias_f32(C, ldc, M, N, beta, bias);
        else finish_bf16(C, ldc, NULL, 0, M, N, beta, bias);
        return PT_OK;
    }
    f32_gemm f32 = impl == PT_GEMM_BF16_SBGEMM ? sbgemm_f32 : sgemm_tiles;
#ifdef PTRAIN_HAVE_ONEDNN
    if (impl == PT_GEMM_BF16_ONEDNN) {
        /* oneDNN adds its bias before the output scale (alpha): with both,
         * the bias goes through the generic paths below */
        if (alpha == 1.0f || !bias)
            return onednn_run(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ctype, ldc, bias);
        f32 = onednn_f32;
    }
#endif
    if (ctype == PT_BF16_OUT_F32) {
        if (!bias) return f32(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        scale_bias_f32(C, ldc, M, N, beta, bias);
        return f32(ta, tb, M, N, K, alpha, A, lda, B, ldb, 1.0f, C, ldc);
    }
    /* bf16 C: fp32 products of row blocks (4 Mi floats at most), then one rounding */
    int mb = (int)((size_t)(1 << 22) / (size_t)N);
    if (mb < 1) mb = 1;
    if (mb > M) mb = M;
    float *t = scratch_get(2, sizeof(float) * (size_t)mb * N);
    if (!t) return pt_fail(PT_ENOMEM, "bf16 GEMM: no memory for a %dx%d fp32 block", mb, N);
    for (int m0 = 0; m0 < M; m0 += mb) {
        const int rows = M - m0 < mb ? M - m0 : mb;
        const pt_bf16 *a = ta ? A + m0 : A + (size_t)m0 * lda;
        if ((rc = f32(ta, tb, rows, N, K, alpha, a, lda, B, ldb, 0.0f, t, N))) return rc;
        finish_bf16((pt_bf16 *)C + (size_t)m0 * ldc, ldc, t, (size_t)N, rows, N, beta, bias);
    }
    return PT_OK;
}

int pt_gemm_bf16(int ta, int tb, int M, int N, int K, float alpha, const pt_bf16 *A, int lda, const pt_bf16 *B,
                 int ldb, float beta, void *C, int ctype, int ldc, const float *bias)
{
    return pt_gemm_bf16_with(PT_GEMM_BF16_AUTO, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ctype, ldc, bias);
}
