/* SPDX-License-Identifier: MIT */
/* The CUDA backend's ops table (lib/backend/ops.h's pt_ops on device
 * memory): the kernels behind each entry, as C functions whose signatures
 * are the table's.  ops.c assembles pt_cuda_ops_f32 (act = acc = fp32) and
 * pt_cuda_ops_bf16 (act bf16, acc fp32) from them.
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

/* The entries that are cuBLASLt calls or gemm_epi.cu's kernels (ops.c):
 * matmul_fwd/bwd (gemm.h's pt_cuda_matmul_fwd/bwd), epilogue_fwd/bwd, and
 * gemm_batched on ACC (fp32) tensors through pt_cuda_gemm. */
#define PT_CUDA_GEMM_OPS(S)                                                                                         \
    void pt_cuda_matmul_fwd_##S(void *out, void *aux, const void *inp, const void *w, const void *bias, double beta, \
                                int N, int C, int OC, int epi);                                                      \
    void pt_cuda_matmul_bwd_##S(void *dinp, void *dw, void *dbias, const void *dout, const void *inp, const void *w, \
                                int N, int C, int OC, int epi, const void *aux, void *dbias_aux);                    \
    void pt_cuda_epilogue_fwd_##S(void *out, void *aux, const void *bias, int N, int OC, int epi);                   \
    void pt_cuda_epilogue_bwd_##S(void *d, void *dbias, const void *aux, int N, int OC);
PT_CUDA_GEMM_OPS(f32)
PT_CUDA_GEMM_OPS(bf16)
void pt_cuda_gemm_batched(int ta, int tb, int M, int N, int K, double alpha, const void *A, int lda, int64_t sA,
                          const void *B, int ldb, int64_t sB, double beta, void *C, int ldc, int64_t sC, int batch);

/* ---- ops_elem.cu: embeddings, elementwise, memory, BLAS-1, AdamW, softmax -- */
#define PT_CUDA_ACT_OPS(S)                                                                                        \
    void pt_cuda_embedding_fwd_##S(void *out, const int32_t *tok, const void *w, int v0, int Vl, int N, int C);   \
    void pt_cuda_embedding_bwd_##S(void *dw, const void *dout, const int32_t *tok, int v0, int Vl, int N, int C); \
    void pt_cuda_posemb_fwd_##S(void *x, const void *wpe, int B, int T, int C);                                   \
    void pt_cuda_posemb_bwd_##S(void *dwpe, const void *dout, int B, int T, int C);                               \
    void pt_cuda_gelu_fwd_##S(void *out, const void *inp, size_t n);                                              \
    void pt_cuda_gelu_bwd_##S(void *dinp, const void *inp, const void *dout, size_t n);                           \
    void pt_cuda_add_fwd_##S(void *out, const void *a, const void *b, size_t n);                                  \
    void pt_cuda_add_bwd_##S(void *da, void *db, const void *dout, size_t n);                                     \
    void pt_cuda_bias_fwd_##S(void *out, const void *bias, int N, int OC);                                        \
    void pt_cuda_bias_bwd_##S(void *dbias, const void *dout, int N, int OC);                                      \
    void pt_cuda_adamw_##S(void *p, void *work, const void *g, void *m, void *v, size_t n, double lr, double b1,  \
                           double b2, double eps, double wd, double bc1, double bc2);
PT_CUDA_ACT_OPS(f32)
PT_CUDA_ACT_OPS(bf16)
/* ops on ACC tensors alone (fp32 in both tables) */
void pt_cuda_xent_rescale(void *sumexp, const void *from, const void *to, int N);
void pt_cuda_xent_loss(void *losses, const void *rowmax, const void *sumexp, const void *tgt, int N);
void pt_cuda_softmax_causal_fwd(void *att, int BH, int Tq, int T, int q0);
void pt_cuda_softmax_causal_bwd(void *datt, const void *att, double scale, int BH, int Tq, int T, int q0);
/* the generic ops (ops.h "generic ops"): one function for both tables */
void pt_cuda_zero(void *x, size_t n, pt_dtype t);
void pt_cuda_fill(void *x, double a, size_t n, pt_dtype t);
void pt_cuda_copy(void *dst, const void *src, size_t n, pt_dtype t);
void pt_cuda_convert(void *dst, pt_dtype dt, const void *src, pt_dtype st, size_t n);
void pt_cuda_copy2d(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height);
void pt_cuda_add2d(void *dst, size_t ldd, const void *src, size_t lds, size_t rows, size_t cols, pt_dtype t);
void pt_cuda_axpy(void *y, double a, const void *x, size_t n, pt_dtype t);
void pt_cuda_scale(void *x, double a, size_t n, pt_dtype t);
double pt_cuda_sum(const void *x, size_t n, pt_dtype t);
double pt_cuda_sumsq(const void *x, size_t n, pt_dtype t);

/* ---- ops_norm.cu: LayerNorm, the cross-entropy pieces, the fused classifier */
#define PT_CUDA_NORM_OPS(S)                                                                                           \
    void pt_cuda_layernorm_fwd_##S(void *out, void *mean, void *rstd, const void *inp, const void *w, const void *b, \
                                   int N, int C);                                                                    \
    void pt_cuda_layernorm_bwd_##S(void *dinp, void *dw, void *db, const void *dout, const void *inp, const void *w, \
                                   const void *mean, const void *rstd, int N, int C);                                \
    void pt_cuda_layernorm_rowsum_##S(void *sum, const void *x, int N, int Cl);                                      \
    void pt_cuda_layernorm_rowvar_##S(void *mean, void *sqsum, const void *x, const void *sum, int N, int Cl, int C); \
    void pt_cuda_layernorm_apply_##S(void *out, void *rstd, const void *x, const void *mean, const void *sqsum,      \
                                     const void *w, const void *b, int N, int Cl, int C);                            \
    void pt_cuda_layernorm_bwd_rowsums_##S(void *s, const void *dy, const void *x, const void *w, const void *mean,  \
                                           const void *rstd, int N, int Cl);                                         \
    void pt_cuda_layernorm_bwd_apply_##S(void *dx, void *dw, void *db, const void *dy, const void *x, const void *w, \
                                         const void *mean, const void *rstd, const void *s, int N, int Cl, int C);   \
    void pt_cuda_xent_max_##S(void *rowmax, const void *logits, int v0, int vreal, int N, int Vl);                   \
    void pt_cuda_xent_sumexp_##S(void *sumexp, void *tgt, const void *logits, const void *rowmax,                    \
                                 const int32_t *targets, int v0, int vreal, int N, int Vl);                          \
    void pt_cuda_xent_bwd_##S(void *dlogits, const void *logits, const void *rowmax, const void *sumexp,             \
                              const int32_t *targets, const void *dloss, int v0, int vreal, int N, int Vl);          \
    void pt_cuda_classifier_fwd_##S(void *stats, const void *x, const void *w, const int32_t *targets, void *work,   \
                                    int vb, int v0, int vreal, int N, int C, int Vl, int ks);                        \
    void pt_cuda_classifier_bwd_##S(void *dx, void *dw, const void *x, const void *w, const void *stats,             \
                                    const int32_t *targets, const void *dloss, void *work, int vb, int v0, int vreal, \
                                    int N, int C, int Vl, int ks);                                                    \
    void pt_cuda_classifier_rows_fwd_##S(void *stats, void *logits, const void *x, const void *w,                    \
                                         const int32_t *targets, void *work, int v0, int vreal, int R, int C, int Vl); \
    void pt_cuda_classifier_rows_bwd_##S(void *dx, void *dw, const void *x, const void *w, void *logits,             \
                                         const void *stats, const int32_t *targets, const void *dloss, void *work,   \
                                         int v0, int vreal, int R, int C, int Vl);
PT_CUDA_NORM_OPS(f32)
PT_CUDA_NORM_OPS(bf16)

/* ---- attention.cu: flash attention ------------------------------------------ */
#define PT_CUDA_ATTN_OPS(S)                                                                                       \
    void pt_cuda_attention_fwd_##S(void *out, void *lse, const void *q, const void *k, const void *v,             \
                                   const pt_attn_dims *d, int merge);                                             \
    void pt_cuda_attention_bwd_##S(void *dq, void *dk, void *dv, const void *dout, const void *q, const void *k,  \
                                   const void *v, const void *out, const void *lse, const pt_attn_dims *d);
PT_CUDA_ATTN_OPS(f32)
PT_CUDA_ATTN_OPS(bf16)

/* ---- ops.c: the tables ------------------------------------------------------- */
extern const pt_ops pt_cuda_ops_f32;
extern const pt_ops pt_cuda_ops_bf16;

#ifdef __cplusplus
}
#endif
#endif
