/* SPDX-License-Identifier: MIT */
/* What the BLAS (blas.c) and the bf16 GEMM (gemm_bf16.c) report together:
 * the run header's line (pt_blas_summary) and the GEMM rates of one core
 * (pt_blas_sgemm_gflops, pt_blas_sgemm_mkn_gflops, pt_blas_bf16_gemm_gflops)
 * that ptrain-topo --probe records.  Above both files, which it only
 * calls: gemm_bf16.c runs on blas.c's kernel choice and GEMM, so what needs
 * both lives here rather than in blas.c.  See blas.h. */
#define _GNU_SOURCE
#include "config.h"
#include "backend/blas.h"
#include "backend/gemm_bf16.h"
#include "core/core.h"

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif

/* OpenBLAS's thread count outside parallel regions (the count
 * pt_blas_gemm_prepare will restore, when it lowered it) */
static int blas_threads(void)
{
    pt_blas_info i;
    pt_blas_get_info(&i);
    return i.threads;
}

const char *pt_blas_summary(void)
{
    static char line[800 + PT_ERROR_LEN];
    pt_blas_info i;
    pt_blas_get_info(&i);
    const char *pool = pt_blas_pool_note();
    /* ptrain's own kernels: at the CPU's level unless PTRAIN_MAX_CPU_ISA
     * caps it (a value that is not a level: pt_kernel_isa_check's line; the
     * caller's message is left as it was) */
    char cap[PT_ERROR_LEN + 16] = "";
    const int kl = pt_kernel_isa_level();
    pt_errsave es;
    pt_error_save(&es);
    if (pt_kernel_isa_check() != PT_OK) snprintf(cap, sizeof cap, " (%s: ignored)", pt_errmsg());
    else if (kl < i.cpu_level) snprintf(cap, sizeof cap, " run as %s (PTRAIN_MAX_CPU_ISA)", pt_isa_name(kl));
    pt_error_restore(&es);
    snprintf(line, sizeof line, "%s (%s%s%s), kernels %s (%s) on an %s CPU%s [%s], %d thread%s; %s", i.name,
             i.threading, i.nest_guard ? ", 1 thread inside OpenMP regions" : "", pool, i.coretype,
             pt_isa_name(i.kernel_level), pt_isa_name(i.cpu_level), cap, i.reason, i.threads, i.threads == 1 ? "" : "s",
             pt_gemm_bf16_summary());
    return line;
}

double pt_blas_sgemm_gflops(int n, int reps)
{
    if (n < 16 || n > 8192 || reps < 1) return -1;
    return pt_blas_sgemm_mkn_gflops(n, n, n, reps);
}

/* The GEMM probes' operands: the next value in [-0.5, 0.5) of a 64-bit
 * LCG (Knuth's MMIX constants), 16 bits of its high half. */
static float probe_operand(unsigned long long *x)
{
    *x = *x * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((*x >> 40) & 0xffff) / 65536.0f - 0.5f;
}

double pt_blas_sgemm_mkn_gflops(int m, int k, int n, int reps)
{
    if (m < 1 || k < 1 || n < 1 || m > 8192 || k > 8192 || n > 8192 || reps < 1) return -1;
    pt_blas_select();
    size_t na = (size_t)m * (size_t)k, nb = (size_t)k * (size_t)n, nc = (size_t)m * (size_t)n;
    size_t nn = na > nb ? na : nb;
    float *a = malloc(sizeof(float) * nn), *b = malloc(sizeof(float) * nn), *c = malloc(sizeof(float) * nc);
    if (!a || !b || !c) {
        free(a);
        free(b);
        free(c);
        return -1;
    }
    unsigned long long x = 0x9e3779b97f4a7c15ull ^ (unsigned long long)time(NULL);
    for (size_t i = 0; i < nn; i++) {
        a[i] = probe_operand(&x);
        b[i] = probe_operand(&x);
    }
    const int threads = blas_threads();
    pt_blas_set_threads(1);
    double best = 0;
    for (int r = 0; r <= reps; r++) { /* the first call warms up */
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a, k, b, n, 0.0f, c, n);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
        double g = s > 0 ? 2.0 * m * (double)k * n / s * 1e-9 : 0;
        if (r > 0 && g > best) best = g;
    }
    pt_blas_set_threads(threads);
    free(a);
    free(b);
    free(c);
    return best;
}

double pt_blas_bf16_gemm_gflops(int n, int reps)
{
    if (n < 16 || n > 8192 || reps < 1) return -1;
    pt_blas_select();
    const size_t nn = (size_t)n * (size_t)n;
    pt_bf16 *a = malloc(sizeof(pt_bf16) * nn), *b = malloc(sizeof(pt_bf16) * nn);
    float *c = malloc(sizeof(float) * nn);
    if (!a || !b || !c) {
        free(a);
        free(b);
        free(c);
        return -1;
    }
    unsigned long long x = 0x9e3779b97f4a7c15ull ^ (unsigned long long)time(NULL);
    for (size_t i = 0; i < nn; i++) {
        a[i] = pt_f32_to_bf16(probe_operand(&x));
        b[i] = pt_f32_to_bf16(probe_operand(&x));
    }
    /* one core: OpenBLAS (the sgemm and sbgemm implementations) and the
     * OpenMP pool (oneDNN, the conversions) held to one thread */
    const int threads = blas_threads();
    pt_blas_set_threads(1);
#ifdef _OPENMP
    const int omp_threads = omp_get_max_threads();
    omp_set_num_threads(1);
#endif
    double best = 0;
    for (int r = 0; r <= reps && best >= 0; r++) { /* the first call warms up (and builds oneDNN's primitive) */
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        int rc = pt_gemm_bf16(0, 0, n, n, n, 1.0f, a, n, b, n, 0.0f, c, PT_BF16_OUT_F32, n, NULL);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
        double g = s > 0 ? 2.0 * n * (double)n * n / s * 1e-9 : 0;
        if (rc != PT_OK) best = -1;
        else if (r > 0 && g > best) best = g;
    }
#ifdef _OPENMP
    omp_set_num_threads(omp_threads);
#endif
    pt_blas_set_threads(threads);
    free(a);
    free(b);
    free(c);
    return best;
}
