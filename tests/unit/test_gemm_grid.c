/* SPDX-License-Identifier: MIT */
/* ptrain's GEMM on a fixed tile grid (lib/backend/blas.h: pt_blas_sgemm,
 * pt_blas_dgemm, pt_blas_gemm_grid).
 *
 *  1. The grid is a function of the shape: its tiles cover C exactly once,
 *     small GEMMs are one tile, cut sides are multiples of 64 and at least
 *     the documented minimum.
 *  2. Thread-count independence: the same call at 1, 2 and 3 OpenMP
 *     threads gives the same C bit for bit, for random shapes above and
 *     below the grid's threshold, each transpose pair, beta 0 and 1,
 *     strides wider than the matrices, float and double.  (A plain
 *     threaded cblas_sgemm fails this on OpenBLAS's Haswell/Zen kernels:
 *     issue 34.)
 *  3. The result is the product: against a long-double reference.
 *  4. Inside a parallel region it is one call on the calling thread: a
 *     region of one thread and a region of two give the 1-thread result.
 * Fresh random shapes and values each run (PTRAIN_TEST_SEED reproduces). */
#include "backend/blas.h"
#include "backend/ops.h"
#include "tests/unit/ops_util.h"

#ifdef _OPENMP
#include <omp.h>
#endif

static void test_grid(void)
{
    int ok = 1, small_one = 1, sides = 1;
    for (int r = 0; r < 2000; r++) {
        const int M = randint(1, 20000), N = randint(1, 20000), K = randint(0, 20000);
        int tm, tn;
        pt_blas_gemm_grid(M, N, K, &tm, &tn);
        const long gm = (M + tm - 1) / tm, gn = (N + tn - 1) / tn;
        /* every row in exactly one tile: tiles of tm from 0, the last one M - (gm-1) tm in (0, tm] */
        if (!(tm >= 1 && tn >= 1 && tm <= M && tn <= N && M - (gm - 1) * tm > 0 && N - (gn - 1) * tn > 0)) ok = 0;
        if ((double)M * N * (K > 0 ? K : 1) < (double)(1 << 20) && (tm != M || tn != N)) small_one = 0;
        if ((tm != M && (tm % 64 || tm < 256)) || (tn != N && (tn % 64 || tn < 256))) sides = 0;
    }
    tap_ok(ok, "the tile grid covers C exactly once (2000 random shapes)");
    tap_ok(small_one, "GEMMs under 2^20 multiply-adds are one tile");
    tap_ok(sides, "cut tile sides are multiples of 64 and at least 256");
}

/* C (M x N, stride ldc) = alpha op(A) op(B) + beta C in long double */
static double ref_err(int ta, int tb, int M, int N, int K, double alpha, const double *A, int lda, const double *B,
                      int ldb, double beta, const double *C0, const double *C, int ldc)
{
    double worst = 0;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            long double s = 0, sa = 0;
            for (int k = 0; k < K; k++) {
                const long double a = ta ? A[(size_t)k * lda + i] : A[(size_t)i * lda + k];
                const long double b = tb ? B[(size_t)j * ldb + k] : B[(size_t)k * ldb + j];
                s += a * b, sa += fabsl(a * b);
            }
            const long double want = alpha * s + beta * (long double)C0[(size_t)i * ldc + j];
            const long double scale = fabsl(alpha) * sa + fabsl(beta * (long double)C0[(size_t)i * ldc + j]) + 1e-300L;
            const double e = (double)(fabsl((long double)C[(size_t)i * ldc + j] - want) / scale);
            if (!(e <= worst)) worst = e;
        }
    return worst;
}

typedef struct {
    int ta, tb, M, N, K, lda, ldb, ldc;
    double alpha, beta;
} shape;

static shape random_shape(int big)
{
    shape s;
    s.ta = randint(0, 1), s.tb = randint(0, 1);
    if (big) { /* above the grid's threshold: several tiles on the longer side */
        s.M = randint(300, 1400), s.N = randint(40, 700), s.K = randint(8, 160);
        if (randint(0, 1)) { int t = s.M; s.M = s.N; s.N = t; }
    } else {
        s.M = randint(1, 90), s.N = randint(1, 90), s.K = randint(1, 90);
    }
    s.lda = (s.ta ? s.M : s.K) + randint(0, 3);
    s.ldb = (s.tb ? s.K : s.N) + randint(0, 3);
    s.ldc = s.N + randint(0, 3);
    s.alpha = randint(0, 1) ? 1.0 : 0.5 + pt_rng_uniform(&rng);
    s.beta = randint(0, 1) ? 0.0 : 1.0;
    return s;
}

static void set_threads(int n)
{
    pt_backend_get("cpu")->set_threads(n);
}

static void test_threads(int dbl)
{
#ifdef _OPENMP
    int same = 1, tiles = 0, cases = 0;
    double worst = 0;
    for (int r = 0; r < 12; r++) {
        shape s = random_shape(r % 3 != 2);
        const size_t na = (size_t)(s.ta ? s.K : s.M) * s.lda, nb = (size_t)(s.tb ? s.N : s.K) * s.ldb,
                     nc = (size_t)s.M * s.ldc;
        double *A = dalloc(na), *B = dalloc(nb), *C0 = dalloc(nc), *C = dalloc(nc);
        randn(A, na, 1), randn(B, nb, 1), randn(C0, nc, 1);
        if (!dbl) { /* float inputs: round once so the reference sees the same values */
            for (size_t i = 0; i < na; i++) A[i] = (float)A[i];
            for (size_t i = 0; i < nb; i++) B[i] = (float)B[i];
            for (size_t i = 0; i < nc; i++) C0[i] = (float)C0[i];
        }
        float *fA = xcalloc(na, sizeof(float)), *fB = xcalloc(nb, sizeof(float)), *fC = xcalloc(nc, sizeof(float));
        float *f1 = xcalloc(nc, sizeof(float));
        double *d1 = dalloc(nc);
        for (size_t i = 0; i < na; i++) fA[i] = (float)A[i];
        for (size_t i = 0; i < nb; i++) fB[i] = (float)B[i];
        int tm, tn;
        pt_blas_gemm_grid(s.M, s.N, s.K, &tm, &tn);
        tiles += ((s.M + tm - 1) / tm) * ((s.N + tn - 1) / tn) > 1;
        for (int nt = 1; nt <= 3; nt++) {
            set_threads(nt);
            if (dbl) {
                memcpy(C, C0, nc * sizeof(double));
                pt_blas_dgemm(s.ta, s.tb, s.M, s.N, s.K, s.alpha, A, s.lda, B, s.ldb, s.beta, C, s.ldc);
                if (nt == 1) memcpy(d1, C, nc * sizeof(double));
                else if (memcmp(d1, C, nc * sizeof(double))) same = 0;
            } else {
                for (size_t i = 0; i < nc; i++) fC[i] = (float)C0[i];
                pt_blas_sgemm(s.ta, s.tb, s.M, s.N, s.K, (float)s.alpha, fA, s.lda, fB, s.ldb, (float)s.beta, fC,
                              s.ldc);
                if (nt == 1) memcpy(f1, fC, nc * sizeof(float));
                else if (memcmp(f1, fC, nc * sizeof(float))) same = 0;
                for (size_t i = 0; i < nc; i++) C[i] = fC[i];
            }
        }
        set_threads(1);
        if (!dbl) s.alpha = (float)s.alpha;
        const double e = ref_err(s.ta, s.tb, s.M, s.N, s.K, s.alpha, A, s.lda, B, s.ldb, s.beta, C0, C, s.ldc);
        if (!(e <= worst)) worst = e;
        cases++;
        free(A), free(B), free(C0), free(C), free(fA), free(fB), free(fC), free(f1), free(d1);
    }
    const double tol = dbl ? 1e-13 : 1e-5;
    tap_ok(same, "%s: 1, 2 and 3 threads give the same C bit for bit (%d random shapes, %d of them cut in tiles)",
           dbl ? "pt_blas_dgemm" : "pt_blas_sgemm", cases, tiles);
    tap_ok(worst <= tol, "%s equals a long-double product (worst %.1e of sum|a b|, bound %.0e)",
           dbl ? "pt_blas_dgemm" : "pt_blas_sgemm", worst, tol);
#else
    (void)dbl;
    tap_diag("built without OpenMP: thread comparison not run");
#endif
}

/* inside a region: one call on the calling thread, whatever the team */
static void test_in_region(void)
{
#ifdef _OPENMP
    const int M = 700, N = 300, K = 100;
    float *A = xcalloc((size_t)M * K, sizeof(float)), *B = xcalloc((size_t)K * N, sizeof(float));
    float *c0 = xcalloc((size_t)M * N, sizeof(float)), *c1 = xcalloc((size_t)M * N, sizeof(float)),
          *c2 = xcalloc((size_t)M * N, sizeof(float));
    for (size_t i = 0; i < (size_t)M * K; i++) A[i] = (float)pt_rng_normal(&rng);
    for (size_t i = 0; i < (size_t)K * N; i++) B[i] = (float)pt_rng_normal(&rng);
    set_threads(2);
    /* the row blocks of a region, one per thread, against the same blocks at 1 thread */
#pragma omp parallel for schedule(static) num_threads(2)
    for (int b = 0; b < 2; b++)
        pt_blas_sgemm(0, 0, M / 2, N, K, 1, A + (size_t)b * (M / 2) * K, K, B, N, 0, c2 + (size_t)b * (M / 2) * N, N);
#pragma omp parallel for schedule(static) num_threads(1)
    for (int b = 0; b < 2; b++)
        pt_blas_sgemm(0, 0, M / 2, N, K, 1, A + (size_t)b * (M / 2) * K, K, B, N, 0, c1 + (size_t)b * (M / 2) * N, N);
    set_threads(1);
    for (int b = 0; b < 2; b++) {
#pragma omp parallel num_threads(1)
        pt_blas_sgemm(0, 0, M / 2, N, K, 1, A + (size_t)b * (M / 2) * K, K, B, N, 0, c0 + (size_t)b * (M / 2) * N, N);
    }
    tap_ok(!memcmp(c0, c1, sizeof(float) * M * N) && !memcmp(c0, c2, sizeof(float) * M * N),
           "inside a parallel region (of 1 or 2 threads) a call is one BLAS call on its thread: same blocks, same C");
    free(A), free(B), free(c0), free(c1), free(c2);
#endif
}

int main(void)
{
    (void)D;
    pt_rng_seed(&rng, test_seed(), 0);
    pt_backend_get("cpu");
    tap_diag("blas: %s", pt_blas_summary());
    test_grid();
    test_threads(0);
    test_threads(1);
    test_in_region();
    return tap_done();
}
