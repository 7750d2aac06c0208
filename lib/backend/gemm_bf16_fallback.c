/* The bf16 GEMM by widening to fp32 (see gemm_bf16_fallback.h). */
#include "backend/gemm_bf16_fallback.h"

#include <cblas.h>
#include <stdlib.h>
#include <string.h>

/* Below this many elements a conversion runs on one thread. */
#define PAR_MIN 32768

/* dst [rows, cols] dense fp32 = src [rows, cols] with row stride ld */
static void widen(float *dst, const pt_bf16 *src, size_t rows, size_t cols, size_t ld)
{
#pragma omp parallel for schedule(static) if (rows * cols >= PAR_MIN)
    for (size_t r = 0; r < rows; r++) {
        const pt_bf16 *s = src + r * ld;
        float *d = dst + r * cols;
#pragma omp simd
        for (size_t c = 0; c < cols; c++) d[c] = pt_bf16_to_f32(s[c]);
    }
}

int pt_gemm_bf16(int ta, int tb, int M, int N, int K, float alpha, const pt_bf16 *A, int lda, const pt_bf16 *B,
                 int ldb, float beta, void *C, int ctype, int ldc, const float *bias)
{
    if (M < 0 || N < 0 || K < 0)
        return pt_fail(PT_EINVAL, "bf16 GEMM: sizes M=%d N=%d K=%d must be >= 0", M, N, K);
    if ((ta != 0 && ta != 1) || (tb != 0 && tb != 1) || (ctype != PT_BF16_OUT_F32 && ctype != PT_BF16_OUT_BF16))
        return pt_fail(PT_EINVAL, "bf16 GEMM: ta=%d tb=%d ctype=%d (valid: 0 or 1 each)", ta, tb, ctype);
    const int arows = ta ? K : M, acols = ta ? M : K, brows = tb ? N : K, bcols = tb ? K : N;
    if (lda < (acols > 1 ? acols : 1) || ldb < (bcols > 1 ? bcols : 1) || ldc < (N > 1 ? N : 1))
        return pt_fail(PT_EINVAL, "bf16 GEMM: leading dimensions lda=%d ldb=%d ldc=%d below %d, %d, %d", lda, ldb,
                       ldc, acols, bcols, N);
    if (M == 0 || N == 0) return PT_OK;
    if ((K > 0 && (!A || !B)) || !C) return pt_fail(PT_EINVAL, "bf16 GEMM: NULL operand");
    const size_t na = (size_t)arows * acols, nb = (size_t)brows * bcols, nc = (size_t)M * N;
    const int cbf = ctype == PT_BF16_OUT_BF16;
    float *a = malloc((na ? na : 1) * sizeof *a), *b = malloc((nb ? nb : 1) * sizeof *b);
    float *c = cbf ? malloc(nc * sizeof *c) : C;
    if (!a || !b || !c) {
        free(a), free(b);
        if (cbf) free(c);
        return pt_fail(PT_ENOMEM, "bf16 GEMM %dx%dx%d: out of memory widening the operands to fp32", M, N, K);
    }
    const int ldcf = cbf ? N : ldc;
    if (cbf) {
        const pt_bf16 *ch = C;
        if (beta != 0)
            widen(c, ch, (size_t)M, (size_t)N, (size_t)ldc);
        else
            memset(c, 0, nc * sizeof *c);
    }
    widen(a, A, (size_t)arows, (size_t)acols, (size_t)lda);
    widen(b, B, (size_t)brows, (size_t)bcols, (size_t)ldb);
    if (K > 0)
        cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, alpha, a,
                    acols > 0 ? acols : 1, b, bcols > 0 ? bcols : 1, beta, c, ldcf);
    else if (beta != 1) /* K = 0: C = beta C */
        for (int m = 0; m < M; m++)
            for (int n = 0; n < N; n++) c[(size_t)m * ldcf + n] = beta == 0 ? 0.0f : beta * c[(size_t)m * ldcf + n];
    if (bias)
#pragma omp parallel for schedule(static) if (nc >= PAR_MIN)
        for (int m = 0; m < M; m++)
            for (int n = 0; n < N; n++) c[(size_t)m * ldcf + n] += bias[n];
    if (cbf) {
        pt_bf16 *ch = C;
#pragma omp parallel for schedule(static) if (nc >= PAR_MIN)
        for (int m = 0; m < M; m++)
            for (int n = 0; n < N; n++) ch[(size_t)m * ldc + n] = pt_f32_to_bf16(c[(size_t)m * N + n]);
        free(c);
    }
    free(a);
    free(b);
    return PT_OK;
}

const char *pt_gemm_bf16_summary(void) { return "bf16 GEMM sgemm (operands widened to fp32)"; }
