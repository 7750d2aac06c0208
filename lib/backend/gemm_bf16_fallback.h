/* The bf16 GEMM the bf16 ops table calls, in its minimal form: bf16
 * operands widened to fp32 and OpenBLAS's cblas_sgemm on them (fp32
 * accumulation, fp32 compute).  It has the call shape of lib/backend/
 * gemm_bf16.h on branch i23-bf16gemm (oneDNN / cblas_sbgemm / converted
 * tiles, chosen per ISA), which replaces this file when it merges: that
 * header's pt_gemm_bf16, PT_BF16_OUT_* and pt_gemm_bf16_summary are these
 * (and its pt_bf16 scalar pair is lib/core's).
 *
 *   C[M,N] = alpha op(A)[M,K] op(B)[K,N] + beta C[M,N] + bias[N] (each row)
 *
 * row-major like cblas_sgemm(CblasRowMajor, ...): op(A) is A stored [M, K]
 * (row stride lda >= K), or A^T with A stored [K, M] when ta (lda >= M);
 * op(B) is B stored [K, N] (ldb >= N), or B^T with B stored [N, K] when tb
 * (ldb >= K); C [M, N], ldc >= N, fp32 (ctype PT_BF16_OUT_F32) or bf16
 * (PT_BF16_OUT_BF16, rounded once to nearest even after alpha, beta and
 * bias).  beta == 0: C is not read.  The sum over K is accumulated in fp32
 * (Kalamkar et al. 2019: bf16 operands with fp32 accumulation train at
 * fp32 accuracy).
 *
 * Memory: the widened op(A), op(B) (and a bf16 C's fp32 block) are
 * malloc'd per call and freed before it returns; not charged to an arena.
 * Threads: OpenMP for the conversions and OpenBLAS's own for the sgemm
 * (both one thread inside an OpenMP parallel region). */
#ifndef PTRAIN_GEMM_BF16_FALLBACK_H
#define PTRAIN_GEMM_BF16_FALLBACK_H
#include "core/core.h"

/* output types of C */
enum { PT_BF16_OUT_F32 = 0, PT_BF16_OUT_BF16 = 1 };

/* C = alpha op(A) op(B) + beta C + bias (above).  A, B: pt_bf16; C: float
 * or pt_bf16 by ctype; bias: N floats or NULL.  M, N or K may be 0.  C
 * must not overlap A, B or bias.  Returns PT_OK; PT_EINVAL for a negative
 * size, a leading dimension below its minimum, NULL operands, ta/tb/ctype
 * out of range; PT_ENOMEM. */
int pt_gemm_bf16(int ta, int tb, int M, int N, int K, float alpha, const pt_bf16 *A, int lda, const pt_bf16 *B,
                 int ldb, float beta, void *C, int ctype, int ldc, const float *bias);

/* One clause for the `blas:` line: "bf16 GEMM sgemm (widened to fp32)". */
const char *pt_gemm_bf16_summary(void);

#endif
