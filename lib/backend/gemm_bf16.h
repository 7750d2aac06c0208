/* SPDX-License-Identifier: MIT */
/* The CPU's bf16 GEMM for mixed-precision training: bf16 operands (the
 * 16 high bits of an IEEE-754 binary32, stored as uint16_t), fp32
 * accumulation, fp32 or bf16 output.  Kalamkar et al., "A Study of
 * BFLOAT16 for Deep Learning Training" (2019), for the format and why
 * fp32 accumulation keeps training at fp32 accuracy.
 *
 *   C[M,N] = alpha op(A)[M,K] op(B)[K,N] + beta C[M,N] + bias[N] (each row)
 *
 * row-major like cblas_sgemm(CblasRowMajor, ...): op(A) is A stored [M, K]
 * (row stride lda >= K), or A^T with A stored [K, M] when ta (lda >= M);
 * op(B) is B stored [K, N] (ldb >= N), or B^T with B stored [N, K] when tb
 * (ldb >= K); C [M, N], ldc >= N.  The training's three matmul forms:
 *   forward   out[N,OC]  = inp[N,C] w[OC,C]^T (+ bias)   ta=0 tb=1
 *   backward  dinp[N,C] += dout[N,OC] w[OC,C]           ta=0 tb=0 beta=1
 *             dw[OC,C]  += dout[N,OC]^T inp[N,C]        ta=1 tb=0 beta=1, fp32 C:
 *                                                        the fp32 master gradient
 * The sum over K is accumulated in fp32 (all three implementations); a
 * bf16 C is rounded once, to nearest even, after alpha, beta and bias.
 * beta == 0 means C is not read (NaN or garbage there does not propagate),
 * as in BLAS.
 *
 * Implementations (none is a GEMM kernel of ptrain's own):
 *   onednn  oneDNN's matmul primitive (libdnnl, the library PyTorch runs on
 *           CPUs): AMX tiles or AVX512_BF16 dot products; one primitive per
 *           shape, built on first use and kept (a cache of 64).
 *   sbgemm  OpenBLAS's cblas_sbgemm, when the OpenBLAS this process runs
 *           exports it (Debian 12's 0.3.21 does not: built without
 *           BUILD_BFLOAT16); its kernels use bf16 instructions only in the
 *           Cooperlake (AVX512_BF16) and SapphireRapids (AMX) kernel sets,
 *           and the latter compute wrong sums before 0.3.24 (OpenBLAS pull
 *           request 4048; refused here).
 *   sgemm   bf16 -> fp32 conversion of tiles of A and B (whole operands
 *           when both fit 32 MiB, see pt_gemm_bf16_tile_budget) and
 *           OpenBLAS's fp32 cblas_sgemm on them: fp32 compute, for CPUs
 *           without bf16 instructions (bf16 storage still halves activation
 *           memory).
 * sbgemm and sgemm compute a bf16 C through an fp32 block of at most 16 MiB.
 * These buffers are kept per calling thread (freed at its exit) and are
 * not charged to any arena.
 * Which one runs is chosen once per process by the CPU's bf16 ISA class
 * (pt_bf16_isa) from measurements (bench/bench-gemm-bf16; the rule and its
 * numbers are in gemm_bf16.c), or forced with
 * PTRAIN_BF16_GEMM=onednn|sbgemm|sgemm (auto: the rule).
 *
 * Threads: the caller's OpenMP thread count (omp_get_max_threads) and
 * OpenBLAS's, i.e. what pt_backend.set_threads sets; oneDNN (Debian's is
 * built with the OpenMP runtime), OpenBLAS's OpenMP build and the
 * conversion loops all run in libgomp's one pool.  Calls from several
 * threads are safe; oneDNN executions are serialised. */
#ifndef PTRAIN_GEMM_BF16_H
#define PTRAIN_GEMM_BF16_H
#include <stddef.h>
#include <stdint.h>

#include "core/core.h"
#include "core/cpu.h"

#ifdef __cplusplus
extern "C" {
#endif

/* pt_bf16 and the scalar pair pt_f32_to_bf16 (round to nearest even, NaN
 * kept quiet) / pt_bf16_to_f32 (exact) are lib/core's (core/core.h): one
 * definition for the GEMM, the ops tables and the collectives. */

/* dst[i] = pt_f32_to_bf16(src[i]) for i < n (OpenMP threads for large n);
 * no overlap.  Bytes: 4n read, 2n written. */
void pt_f32_to_bf16_n(pt_bf16 *dst, const float *src, size_t n);
/* dst[i] = pt_bf16_to_f32(src[i]) for i < n; no overlap. */
void pt_bf16_to_f32_n(float *dst, const pt_bf16 *src, size_t n);

/* bf16 ISA classes of a CPU (PT_BF16_ISA_*) and their names: core/cpu.h */

/* This process's bf16 ISA class: cpuid (leaf 7: AVX512_BF16, AMX-BF16,
 * AMX-TILE), XGETBV (the OS saves the AVX-512 and tile state), and for AMX
 * Linux's per-process permission, which this call requests
 * (arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA), Linux >= 5.16;
 * refused: not AMX).  With oneDNN built in, capped at the ISA oneDNN may
 * use (dnnl_get_effective_cpu_isa, which DNNL_MAX_CPU_ISA lowers).  Cached
 * after the first call. */
int pt_bf16_isa(void);
/* The same from the CPU alone (no oneDNN cap). */
int pt_bf16_cpu_isa(void);

/* implementations */
enum { PT_GEMM_BF16_AUTO = 0, PT_GEMM_BF16_ONEDNN = 1, PT_GEMM_BF16_SBGEMM = 2, PT_GEMM_BF16_SGEMM = 3 };
#define PT_GEMM_BF16_NIMPL 4
/* "auto", "onednn", "sbgemm", "sgemm"; NULL for other values */
const char *pt_gemm_bf16_impl_name(int impl);
/* 1 when impl can run in this process; 0 with why (one clause, e.g.
 * "OpenBLAS 0.3.21 does not export cblas_sbgemm (built without
 * BUILD_BFLOAT16)") written to why[n] (may be NULL).  The sgemm
 * implementation is always available. */
int pt_gemm_bf16_available(int impl, char *why, size_t n);

/* Choose the implementation (once per process; thread-safe): from
 * PTRAIN_BF16_GEMM if set, else by the rule for pt_bf16_isa().  Returns
 * PT_OK; PT_EINVAL when PTRAIN_BF16_GEMM is not one of auto, onednn,
 * sbgemm, sgemm, PT_EUNSUPP when it names one that cannot run here (the
 * message says why); every later pt_gemm_bf16 call then returns the same
 * error. */
int pt_gemm_bf16_select(void);
/* The chosen implementation (PT_GEMM_BF16_*; AUTO when the choice failed). */
int pt_gemm_bf16_impl(void);
/* One clause for the `blas:` line, e.g. "bf16 GEMM onednn (oneDNN 2.6.3,
 * brg:avx512_core_amx_bf16) on an amx_bf16 CPU [rule for amx_bf16]".
 * Static buffer, valid until the next call. */
const char *pt_gemm_bf16_summary(void);

/* output types of C */
enum { PT_BF16_OUT_F32 = 0, PT_BF16_OUT_BF16 = 1 };

/* C = alpha op(A) op(B) + beta C + bias (see the top of this file) with the
 * chosen implementation.  A, B: pt_bf16; C: float (ctype PT_BF16_OUT_F32)
 * or pt_bf16 (PT_BF16_OUT_BF16); bias: N floats or NULL.  ta, tb: 0 or 1.
 * M, N or K may be 0 (K = 0: C = beta C + bias).  C must not overlap A, B
 * or bias.  Returns PT_OK; PT_EINVAL for a negative size, a leading
 * dimension below its minimum, NULL operands, ta/tb/ctype out of range;
 * PT_ENOMEM; PT_EUNSUPP from a failed choice (pt_gemm_bf16_select) or when
 * oneDNN refuses the problem (the message has its status). */
int pt_gemm_bf16(int ta, int tb, int M, int N, int K, float alpha, const pt_bf16 *A, int lda, const pt_bf16 *B,
                 int ldb, float beta, void *C, int ctype, int ldc, const float *bias);

/* The same with a given implementation (tests, bench/bench-gemm-bf16);
 * impl AUTO is the chosen one.  PT_EUNSUPP when impl cannot run here. */
int pt_gemm_bf16_with(int impl, int ta, int tb, int M, int N, int K, float alpha, const pt_bf16 *A, int lda,
                      const pt_bf16 *B, int ldb, float beta, void *C, int ctype, int ldc, const float *bias);

/* The sgemm implementation's tile budget: fp32 elements of the op(A) and
 * op(B) tiles together (default 8 Mi = 32 MiB; tiles are at most 2048 rows
 * of op(A) and 4096 columns of op(B), as deep in K as the budget allows,
 * at least 16).  floats 0 leaves it; returns the previous value.  For tests
 * and benchmarks; not to be changed while GEMMs run. */
size_t pt_gemm_bf16_tile_budget(size_t floats);

/* oneDNN's implementation name for the problem (e.g.
 * "brg:avx512_core_amx_bf16", "gemm:jit"), or a reason in brackets when
 * oneDNN is not built in or refuses it.  Static buffer. */
const char *pt_gemm_bf16_onednn_impl(int ta, int tb, int M, int N, int K, int ctype);

#ifdef __cplusplus
}
#endif
#endif
