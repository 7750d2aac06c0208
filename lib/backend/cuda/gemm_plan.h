/* SPDX-License-Identifier: MIT */
/* The GEMM layer's host-side logic, in plain C (no CUDA header): how one
 * of ops.h's row-major matmuls becomes one cuBLASLt call on column-major
 * operands, which epilogue it fuses and when it cannot, and the key its
 * descriptors and heuristic result are cached under.  gemm.c turns a plan
 * into cuBLASLt descriptors; tests/unit/test_cuda_host checks every
 * rule here on the CPU, in every build.
 *
 * The row-major -> column-major step (cuBLAS is column-major; a row-major
 * [R, K] matrix with row stride K is the column-major [K, R] matrix with
 * leading dimension K, so Y = X W^T becomes Y^T = W X^T; llm.c's
 * matmul_cublaslt does the same):
 *   forward  out[N,OC] = inp[N,C] w[OC,C]^T:   D = out^T [OC,N], A = w (T),
 *            B = inp (N); m = OC, n = N, k = C
 *   dinp     dinp[N,C] = dout[N,OC] w[OC,C]:   D = dinp^T [C,N], A = w (N),
 *            B = dout (N); m = C, n = N, k = OC
 *   dw       dw[OC,C] += dout^T inp[N,C]:      D = dw^T [C,OC], A = inp (N),
 *            B = dout (T); m = C, n = OC, k = N
 * Epilogues (cuBLASLt's, see ops.h "Epilogues"): the forward's bias is a
 * vector over D's rows (m = OC): BIAS, GELU_BIAS, GELU_AUX_BIAS; its aux
 * [N,OC] is column-major [OC,N], leading dimension OC.  dinp's DGELU reads
 * the aux [N,C] (leading dimension C) and DGELU_BGRAD writes the bias
 * gradient over D's rows (m = C).  dw's bias gradient is the sum of dout
 * over N, i.e. over the k of op(B) = dout [N,OC]: BGRADB (a vector over D's
 * columns, n = OC).  ops.h calls the same reduction BGRADA thinking of
 * dW = dout^T inp with dout as the left operand; in the column-major
 * problem cuBLASLt sees it is B.
 */
#ifndef PTRAIN_GEMM_PLAN_H
#define PTRAIN_GEMM_PLAN_H
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Element types: the values of lib/core's pt_dtype PT_F32 and PT_BF16
 * (gemm_plan.c asserts it), spelled here because this header is also
 * compiled as CUDA C++, which core.h is not written for. */
enum { PT_GEMM_F32 = 0, PT_GEMM_BF16 = 1 };

/* Which matmul of ops.h a plan is. */
enum pt_gemm_kind { PT_GEMM_FWD = 0, PT_GEMM_DINP = 1, PT_GEMM_DW = 2 };
/* Which tensor an operand is. */
enum pt_gemm_role { PT_ROLE_INP = 0, PT_ROLE_W = 1, PT_ROLE_DOUT = 2 };

/* cuBLASLt's epilogues, as this file's own enum (gemm.c maps each to its
 * cublasLtEpilogue_t one to one). */
enum pt_lt_epi {
    PT_LT_DEFAULT = 0,
    PT_LT_BIAS,
    PT_LT_GELU,
    PT_LT_GELU_BIAS,
    PT_LT_GELU_AUX,
    PT_LT_GELU_AUX_BIAS,
    PT_LT_DGELU,
    PT_LT_DGELU_BGRAD,
    PT_LT_BGRADB,
    PT_LT_N
};
/* "DEFAULT", "BIAS", ... (cuBLASLt's names without CUBLASLT_EPILOGUE_) */
const char *pt_lt_epi_name(int e);

/* cuBLASLt's rule for the GELU aux matrix (cublasLt.h,
 * CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD): its leading dimension must be a
 * multiple of 8. */
#define PT_GEMM_AUX_LD_MULTIPLE 8

/* One matmul as one cuBLASLt problem: D [m,n] = epi(alpha op(A) op(B) +
 * beta C), C = D (in place), alpha 1, all column-major. */
typedef struct pt_gemm_plan {
    int kind;                    /* enum pt_gemm_kind */
    int transa, transb;          /* 1: op(X) = X^T (CUBLAS_OP_T) */
    int64_t m, n, k;
    int64_t a_rows, a_cols, lda; /* A as stored: [a_rows, a_cols], leading dimension lda */
    int64_t b_rows, b_cols, ldb;
    int64_t ldd;                 /* C = D [m, n] */
    int a_role, b_role;          /* enum pt_gemm_role */
    int ab_elem, d_elem;         /* PT_GEMM_F32 / PT_GEMM_BF16 of A and B, of C and D */
    int tf32;                    /* fp32 A and B on TF32 tensor cores (CUBLAS_COMPUTE_32F_FAST_TF32) */
    float beta;                  /* 0 (D written) or 1 (D accumulated) */
    /* what the op asks for */
    int has_bias;                /* forward: + bias [OC] */
    int gelu;                    /* forward: GELU */
    int has_aux;                 /* forward with GELU: keep the pre-GELU values; dinp with DGELU: read them */
    int dgelu;                   /* dinp: * GELU'(aux) */
    int has_dbias;               /* dinp with DGELU: dbias_aux [C] +=; dw: dbias [OC] += */
    /* how: fused into the cuBLASLt call, or the plain GEMM then the epilogue kernels */
    int fused;                   /* 1: lt_epi does it all (when cuBLASLt's heuristic agrees) */
    int lt_epi;                  /* enum pt_lt_epi of the cuBLASLt call (DEFAULT when not fused) */
    int bias_elem;               /* type of the vector at the bias pointer: -1 none */
    int64_t bias_len;            /* its length */
    int bias_accum;              /* 1: the vector is a bias GRADIENT that cuBLASLt writes into
                                  * scratch and the fp32 accumulator then gets added */
    int64_t aux_ld;              /* leading dimension of the aux matrix (elements); 0 = none */
    char why[120];               /* when not fused: why */
} pt_gemm_plan;

/* Plans for ops.h's matmul_fwd, and matmul_bwd's two GEMMs, in the
 * activation type act (PT_GEMM_F32 or PT_GEMM_BF16), on N rows, C inputs
 * and OC outputs (each >= 1; C and OC at most 2^24, N at most 2^31 - 1):
 *   fwd:  out = epi(inp w^T + beta out + bias); gelu 0/1 (PT_EPI_GELU);
 *         has_aux: keep the pre-GELU values (needs gelu); beta 0 or 1
 *   dinp: dgelu 0: dinp += dout w (beta 1); dgelu 1: dinp = (dout w) *
 *         GELU'(aux), written (beta 0), has_dbias: dbias_aux [C] += its
 *         column sums
 *   dw:   dw [OC,C] (fp32, the ACC type) += dout^T inp; has_dbias: dbias
 *         [OC] (fp32) += column sums of dout
 * tf32: fp32 inputs on TF32 tensor cores (ignored for bf16).  The plan is
 * fused when cuBLASLt's documented rules allow (the aux leading dimension
 * a multiple of 8); whether its heuristic has an algorithm is learnt on
 * the device, and gemm.c then unfuses it (pt_gemm_plan_unfuse).  PT_OK, or
 * PT_EINVAL with one line naming the bad value. */
int pt_gemm_plan_fwd(pt_gemm_plan *p, int act, int N, int C, int OC, int has_bias, int gelu, int has_aux,
                     float beta, int tf32);
int pt_gemm_plan_dinp(pt_gemm_plan *p, int act, int N, int C, int OC, int dgelu, int has_aux, int has_dbias,
                      int tf32);
int pt_gemm_plan_dw(pt_gemm_plan *p, int act, int N, int C, int OC, int has_dbias, int tf32);
/* Turn p into the plain GEMM (lt_epi DEFAULT, no bias or aux pointer) whose
 * epilogue the kernels apply afterwards; why (printf format) says why. */
void pt_gemm_plan_unfuse(pt_gemm_plan *p, const char *why, ...) __attribute__((format(printf, 2, 3)));

/* The largest power of two (at most 256) that divides the address; 0 for
 * NULL.  cuBLASLt picks kernels by the operands' alignment
 * (CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_*_BYTES), so it is part of the key. */
int pt_gemm_align(const void *p);

/* The cache key of a call: the plan's problem, what the op asks for (the
 * epilogue the cached plan runs, fused or as kernels after the plain GEMM:
 * two unfused plans share one cuBLASLt call but not their epilogues), how
 * cuBLASLt fuses it, and the alignment of each operand.  Every byte is set
 * (padding zeroed), so keys compare with memcmp. */
typedef struct pt_gemm_key {
    int32_t kind, transa, transb, ab_elem, d_elem, tf32, lt_epi, bias_elem, bias_accum, beta_one;
    int32_t has_bias, gelu, has_aux, dgelu, has_dbias, pad0;
    int64_t m, n, k, lda, ldb, ldd, aux_ld;
    int32_t align_a, align_b, align_d, align_bias, align_aux, pad;
} pt_gemm_key;
/* The key of plan p called on these pointers (bias: the vector the bias
 * pointer will hold, aux the aux matrix; NULL when unused). */
void pt_gemm_key_of(const pt_gemm_plan *p, const void *a, const void *b, const void *d, const void *bias,
                    const void *aux, pt_gemm_key *k);
/* FNV-1a over the key's bytes, finished with MurmurHash3's fmix64 so that
 * the low bits (the cache's index) depend on every byte. */
uint64_t pt_gemm_key_hash(const pt_gemm_key *k);

#ifdef __cplusplus
}
#endif
#endif
