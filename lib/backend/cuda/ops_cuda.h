/* SPDX-License-Identifier: MIT */
/* The CUDA backend's ops table (lib/backend/ops.h's pt_ops on device
 * memory): the kernels behind each entry, as C functions whose signatures
 * are the table's (declared from PT_OPS below).  ops.c builds
 * pt_cuda_ops_f32 (act = acc = fp32) and pt_cuda_ops_bf16 (act bf16, acc
 * fp32) from the op families' fills.
 *
 * Naming: pt_cuda_<op>_f32 / pt_cuda_<op>_bf16 for ops whose ACT tensors
 * are the table's activation type (ACC tensors are fp32 in both tables);
 * the generic memory and BLAS-1 ops take their dtype as ops.h says and are
 * one function for both tables (PT_F32 and PT_BF16; PT_F64 is refused).
 * Pointers are device memory (pt_cuda_mem) unless ops.h says host memory
 * may be given (convert, copy2d: cudaMemcpyDefault).  Token ids (int32)
 * are device memory.
 *
 * Semantics are ops.h's, entry by entry; the kernels compute in fp32
 * registers (bf16 loaded with __bfloat162float, stored once with
 * __float2bfloat16_rn, round to nearest even: the CPU's pt_f32_to_bf16),
 * except the reductions that ops.h returns as double (sum, sumsq), which
 * accumulate in double.  Everything runs on the compute stream
 * (pt_cuda_stream_compute), asynchronously for the host, except what
 * returns a value to the host (sum, sumsq), which waits for its result.
 *
 * Errors: ops.h's entries return nothing, so a failure (a launch error, a
 * cuBLASLt status, a bad argument) is recorded: the first one is kept with
 * its one-line message and logged once (pt_cuda_op_check /
 * pt_cuda_op_record), and every reduction that returns to the host then
 * returns NaN, so a training step that fails on the device ends in a
 * non-finite loss that ptrain-run reports with the recorded line
 * (pt_cuda_ops_status). */
#ifndef PTRAIN_CUDA_OPS_H
#define PTRAIN_CUDA_OPS_H
#include "backend/ops.h"
#include "core/core.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- error state of the void ops ----------------------------------------- */
/* After an op's launches: cudaGetLastError(); on an error records it (the
 * first one is kept: "OP: <cudaGetErrorString> (<name>)") and returns its
 * code, else PT_OK. */
int pt_cuda_op_check(const char *op);
/* Record a failure already reported through pt_fail (rc != PT_OK; the
 * message is pt_errmsg()), prefixed by op. */
void pt_cuda_op_record(int rc, const char *op);
/* pt_cuda_ops_status / pt_cuda_ops_errmsg: cuda.h */
/* Forget the recorded failure (tests that provoke one on purpose). */
void pt_cuda_ops_clear(void);

/* ---- GEMM (gemm.c) --------------------------------------------------------- */
/* Row-major strided batched GEMM through cuBLASLt, fp32 compute: for i <
 * batch, C_i [M, N] = alpha op(A_i) op(B_i) + beta C_i, A_i = A + i*sA
 * elements (B, C alike); op(A_i) [M, K] is stored [K, M] when ta, op(B_i)
 * [K, N] is stored [N, K] when tb; lda, ldb, ldc are row strides in
 * elements.  ab_elem: the type of A and B, c_elem of C (gemm_plan.h's
 * PT_GEMM_F32 / PT_GEMM_BF16).  The descriptors and algorithm are cached
 * per call shape.  PT_OK; PT_EINVAL for a bad size or type; PT_EUNSUPP
 * before pt_cuda_init or when cuBLASLt has no algorithm; PT_EIO. */
int pt_cuda_gemm(int ta, int tb, int M, int N, int K, float alpha, const void *A, int lda, int64_t sA, const void *B,
                 int ldb, int64_t sB, float beta, void *C, int ldc, int64_t sC, int batch, int ab_elem, int c_elem);

/* ---- the C entries: one per op of lib/backend/ops.h's PT_OPS ---------------------------------------- */
/* An op whose role is ACT has one entry per activation type,
 * pt_cuda_<op>_f32 and pt_cuda_<op>_bf16; an ACC or ANY op one,
 * pt_cuda_<op>, for both tables.  Each lives in its family's file (embed.cu,
 * eltwise.cu, layernorm.cu, gemm_ops.c, attention.cu, xent.cu, mem.cu,
 * adamw.cu), whose fill sets the table's entries.  The materialised
 * attention reference (attention_ref_fwd/bwd, OPT) is the CPU's alone:
 * its two declarations have no definition. */
#define PT_CUDA_DECL_ACT(op, ret, args) ret pt_cuda_##op##_f32 args; ret pt_cuda_##op##_bf16 args;
#define PT_CUDA_DECL_ACC(op, ret, args) ret pt_cuda_##op args;
#define PT_CUDA_DECL_ANY(op, ret, args) ret pt_cuda_##op args;
#define PT_CUDA_DECL(op, ret, args, fam, role, need) PT_CUDA_DECL_##role(op, ret, args)
PT_OPS(PT_CUDA_DECL)
#undef PT_CUDA_DECL

/* What a family fill writes: an ACT op's entry of the policy's activation
 * type (fp32 or bf16), an ACC/ANY op's one entry. */
#define PT_CUDA_SET_ACT(o, p, op) ((o)->op = (p)->act == PT_BF16 ? pt_cuda_##op##_bf16 : pt_cuda_##op##_f32)
#define PT_CUDA_SET_ONE(o, op) ((o)->op = pt_cuda_##op)

/* ---- the tables (ops.c) ----------------------------------------------------------------------------- */
/* The family fills (ops.h's pt_ops_fill_fn), one per pt_op_family: PT_OK. */
int pt_cuda_fill_embed(pt_ops *o, const pt_prec_policy *p);
int pt_cuda_fill_eltwise(pt_ops *o, const pt_prec_policy *p);
int pt_cuda_fill_norm(pt_ops *o, const pt_prec_policy *p);
int pt_cuda_fill_gemm(pt_ops *o, const pt_prec_policy *p);
int pt_cuda_fill_attention(pt_ops *o, const pt_prec_policy *p);
int pt_cuda_fill_xent(pt_ops *o, const pt_prec_policy *p);
int pt_cuda_fill_mem(pt_ops *o, const pt_prec_policy *p);
int pt_cuda_fill_adamw(pt_ops *o, const pt_prec_policy *p);
/* Build a CUDA table for policy p (fp32 or bf16) from the families in the
 * mask `families` (ops.h's pt_ops_build): host code, no device needed.
 * PT_OK, or PT_EUNSUPP with one line (a policy without kernels here, a
 * required entry left NULL). */
int pt_cuda_ops_build(pt_ops *o, const pt_prec_policy *p, unsigned families);
/* pt_cuda_ops_f32 (act = acc = fp32) and pt_cuda_ops_bf16 (act bf16, acc
 * fp32), built when the library is loaded; read them, never write. */
extern pt_ops pt_cuda_ops_f32;
extern pt_ops pt_cuda_ops_bf16;

#ifdef __cplusplus
}
#endif
#endif
