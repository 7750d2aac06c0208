/* SPDX-License-Identifier: MIT */
/* Tests of the GEMM kernels of the CPU tables (lib/backend/ops.h,
 * cpu_ops.inc): matmul_fwd / matmul_bwd with and without bias, bias_bwd
 * against matmul_bwd's dbias, gemm_batched in all four transpose cases (the
 * family of tests/gpu/test_gemm.c; the epilogues are in test_ops_fused).
 *
 *  1. Every backward of the double table (pt_cpu_ops_f64) against central
 *     finite differences of a scalar loss L = sum(out * R) (R fixed random),
 *     for every input and parameter element, and the "backward accumulates
 *     (+=)" contract (two calls on pre-filled random buffers) and the NULL
 *     skips.
 *  2. The forwards against naive loops written here, with leading
 *     dimensions wider than the operands and alpha, beta != 0, 1.
 *
 * Inputs are fresh random numbers every run; the seed is printed as a TAP
 * diagnostic and PTRAIN_TEST_SEED=<n> reproduces a run. */
#include "backend/ops.h"
#include "core/core.h"
#include "tests/tap.h"
#include "tests/unit/ops_util.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- matmul ------------------------------------------------------------------ */
typedef struct {
    opcase c;
    int N, C, OC, use_bias;
    double *inp, *w, *bias, *out, *R;
} mm_case;

static double mm_loss(opcase *c)
{
    mm_case *m = (mm_case *)c;
    D->matmul_fwd(m->out, NULL, m->inp, m->w, m->use_bias ? m->bias : NULL, 0.0, m->N, m->C, m->OC, PT_EPI_DEFAULT);
    return dot(m->out, m->R, (size_t)m->N * m->OC);
}
static void mm_bwd(opcase *c, double **g)
{
    mm_case *m = (mm_case *)c;
    mm_loss(c);
    D->matmul_bwd(g[0], g[1], m->use_bias ? g[2] : NULL, m->R, m->inp, m->w, m->N, m->C, m->OC, PT_EPI_DEFAULT, NULL,
                  NULL);
}

static void test_matmul(int use_bias)
{
    mm_case m = {{use_bias ? "matmul+bias" : "matmul", mm_loss, mm_bwd, 0, use_bias ? 3 : 2,
                  {"inp", "w", "bias"}, {0}, {0}},
                 0, 0, 0, use_bias, 0, 0, 0, 0, 0};
    m.N = randint(4, 9), m.C = randint(5, 9), m.OC = randint(4, 8);
    size_t ni = (size_t)m.N * m.C, nw = (size_t)m.OC * m.C, no = (size_t)m.N * m.OC;
    m.inp = dalloc(ni), m.w = dalloc(nw), m.bias = dalloc(m.OC), m.out = dalloc(no), m.R = dalloc(no);
    randn(m.inp, ni, 1), randn(m.w, nw, 1), randn(m.bias, m.OC, 1), randn(m.R, no, 1);
    m.c.w[0] = m.inp, m.c.wn[0] = ni, m.c.w[1] = m.w, m.c.wn[1] = nw, m.c.w[2] = m.bias, m.c.wn[2] = m.OC;

    mm_loss(&m.c);
    double *ref = dalloc(no);
    for (int n = 0; n < m.N; n++)
        for (int o = 0; o < m.OC; o++) {
            double s = use_bias ? m.bias[o] : 0;
            for (int c = 0; c < m.C; c++) s += m.inp[(size_t)n * m.C + c] * m.w[(size_t)o * m.C + c];
            ref[(size_t)n * m.OC + o] = s;
        }
    double ef = relerr(m.out, ref, no);
    tap_ok(ef <= 1e-13, "%s: forward == inp w^T%s (N=%d C=%d OC=%d, err %.1e)", m.c.name,
           use_bias ? " + bias" : "", m.N, m.C, m.OC, ef);
    run_case(&m.c);

    if (use_bias) { /* each NULL skip leaves the other gradients as in the full call */
        double *dx = dalloc(ni), *dw = dalloc(nw), *db = dalloc(m.OC);
        double *dx2 = dalloc(ni), *dw2 = dalloc(nw), *db2 = dalloc(m.OC);
        D->matmul_bwd(dx, dw, db, m.R, m.inp, m.w, m.N, m.C, m.OC, PT_EPI_DEFAULT, NULL, NULL);
        D->matmul_bwd(NULL, dw2, NULL, m.R, m.inp, m.w, m.N, m.C, m.OC, PT_EPI_DEFAULT, NULL, NULL);
        D->matmul_bwd(dx2, NULL, NULL, m.R, m.inp, m.w, m.N, m.C, m.OC, PT_EPI_DEFAULT, NULL, NULL);
        D->matmul_bwd(NULL, NULL, db2, m.R, m.inp, m.w, m.N, m.C, m.OC, PT_EPI_DEFAULT, NULL, NULL);
        tap_ok(relerr(dx2, dx, ni) <= 1e-15 && relerr(dw2, dw, nw) <= 1e-15 &&
                   relerr(db2, db, m.OC) <= 1e-15,
               "matmul: backward with NULL dinp / dw / dbias computes the others unchanged");
        double *bb = dalloc(m.OC), *bb2 = dalloc(m.OC);
        D->bias_bwd(bb, m.R, m.N, m.OC);
        tap_ok(relerr(bb, db, m.OC) <= 1e-15, "bias_bwd == matmul_bwd's dbias");
        free(dx), free(dw), free(db), free(dx2), free(dw2), free(db2), free(bb), free(bb2);
    }
    free(ref), free(m.inp), free(m.w), free(m.bias), free(m.out), free(m.R);
}

/* gemm_batched against a naive triple loop, all four transpose cases, with
 * leading dimensions wider than the operands and alpha, beta != 0, 1. */
static void test_gemm_batched(void)
{
    for (int ta = 0; ta <= 1; ta++)
        for (int tb = 0; tb <= 1; tb++) {
            const int M = randint(2, 7), N = randint(2, 7), K = randint(2, 7), batch = randint(1, 4);
            const int arows = ta ? K : M, acols = ta ? M : K, brows = tb ? N : K, bcols = tb ? K : N;
            const int lda = acols + randint(0, 3), ldb = bcols + randint(0, 3), ldc = N + randint(0, 3);
            const int64_t sA = (int64_t)arows * lda + randint(0, 5), sB = (int64_t)brows * ldb + randint(0, 5),
                          sC = (int64_t)M * ldc + randint(0, 5);
            const double alpha = pt_rng_normal(&rng), beta = pt_rng_normal(&rng);
            double *A = dalloc((size_t)(sA * batch)), *B = dalloc((size_t)(sB * batch)),
                   *C = dalloc((size_t)(sC * batch)), *Cr = dalloc((size_t)(sC * batch));
            randn(A, (size_t)(sA * batch), 1), randn(B, (size_t)(sB * batch), 1), randn(C, (size_t)(sC * batch), 1);
            memcpy(Cr, C, sizeof(double) * (size_t)(sC * batch));
            for (int b = 0; b < batch; b++)
                for (int i = 0; i < M; i++)
                    for (int j = 0; j < N; j++) {
                        double s = 0;
                        for (int k = 0; k < K; k++) {
                            double av = ta ? A[b * sA + (int64_t)k * lda + i] : A[b * sA + (int64_t)i * lda + k];
                            double bv = tb ? B[b * sB + (int64_t)j * ldb + k] : B[b * sB + (int64_t)k * ldb + j];
                            s += av * bv;
                        }
                        double *c = &Cr[b * sC + (int64_t)i * ldc + j];
                        *c = alpha * s + beta * *c;
                    }
            D->gemm_batched(ta, tb, M, N, K, alpha, A, lda, sA, B, ldb, sB, beta, C, ldc, sC, batch);
            double e = relerr(C, Cr, (size_t)(sC * batch));
            tap_ok(e <= 1e-14, "gemm_batched ta=%d tb=%d: M=%d N=%d K=%d batch=%d lda=%d ldb=%d ldc=%d == naive "
                   "(err %.1e; padding untouched)", ta, tb, M, N, K, batch, lda, ldb, ldc, e);
            free(A), free(B), free(C), free(Cr);
        }
}

int main(void)
{
    const uint64_t seed = test_seed();
    pt_rng_seed(&rng, seed, 0);

    test_matmul(1);
    test_matmul(0);
    tap_diag("worst finite-difference error over these ops: %.2e (bound %.0e)", g_worst_fd, FD_TOL);
    test_gemm_batched();
    return tap_done();
}
