/* SPDX-License-Identifier: MIT */
/* cuDNN's fused flash attention (scaled dot product attention on tensor
 * cores) behind the bf16 table's attention_fwd / attention_bwd
 * (lib/backend/cuda/attention_cudnn.c), the default where the build has
 * cuDNN (PTRAIN_ATTENTION=flash turns it off).
 * attention.cu's pt_cuda_attention_fwd_bf16 / _bwd_bf16 ask
 * pt_cuda_attention_cudnn_wants() and, where it says yes, run the cuDNN
 * graph instead of the flash kernels; everything else (the fp32 table,
 * ring steps, merge 1, shapes cuDNN does not take, a graph cuDNN cannot
 * plan) stays on the flash kernels.  C and C++ (nvcc); needs no cuDNN or
 * CUDA header, so the unit tests use the pure parts on any build. */
#ifndef PTRAIN_ATTENTION_CUDNN_H
#define PTRAIN_ATTENTION_CUDNN_H
#include "backend/ops.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Which attention the bf16 table runs (PTRAIN_ATTENTION) */
enum pt_attn_impl { PT_ATTN_FLASH = 0, PT_ATTN_CUDNN = 1 };

/* The largest head size given to cuDNN: its bf16 SDPA takes d a multiple
 * of 8, the backward d <= 128 on every architecture (<= 256 on sm_90 only;
 * cudnn-frontend's support checks for cuDNN 9) */
#define PT_SDPA_MAX_HS 128

/* What pt_cuda_attention_cudnn_fwd / _bwd return when cuDNN has no plan
 * for the shape (logged once per shape): run the flash kernels instead.
 * Positive, so never a pt_fail code. */
#define PT_ATTN_FALLBACK 1

/* A PTRAIN_ATTENTION value: NULL or "" or "cudnn" -> PT_ATTN_CUDNN,
 * "flash" -> PT_ATTN_FLASH, anything else -> -1 (case matters). */
int pt_attn_impl_parse(const char *s);
/* "flash" / "cudnn" */
const char *pt_attn_impl_name(int impl);
/* The selection: PTRAIN_ATTENTION read once per process (an invalid value
 * is logged in one line naming it and the valid ones, and flash is used;
 * a build without cuDNN uses flash, with one line if cudnn was asked for),
 * unless a test set it. */
int pt_cuda_attention_impl(void);
/* Override the selection (tests, benchmarks): PT_ATTN_FLASH or
 * PT_ATTN_CUDNN (the latter is kept as flash without cuDNN). */
void pt_cuda_attention_set_impl(int impl);

/* Why the cuDNN graph does not apply to this call (a static phrase), or
 * NULL when it does: whole-sequence causal self-attention only (merge 0,
 * q0 = k0 = 0, Tq = Tk >= 1), HS a multiple of 8 in 8 .. PT_SDPA_MAX_HS,
 * row strides ldq, ldkv multiples of 8 elements (16-byte rows of bf16),
 * ldq >= NH*HS and ldkv >= NKV*HS, B, NH >= 1, NKV 0 or a divisor of NH
 * (GQA).  Pure C (no device). */
const char *pt_attn_cudnn_rule(const pt_attn_dims *d, int merge);
/* 1 when each of the n pointers is 16-byte aligned (cuDNN's tensor
 * alignment), else 0; NULL counts as unaligned. */
int pt_attn_ptrs_aligned(const void *const *p, int n);
/* 1 when the bf16 attention call should run on cuDNN: selected
 * (pt_cuda_attention_impl), the rule holds, the n pointers are aligned. */
int pt_cuda_attention_cudnn_wants(const pt_attn_dims *d, int merge, const void *const *p, int n);

/* ptrain's attention tensors as cuDNN's 4-d (b, h, s, d) tensors: dims
 * and strides in elements; Hk = pt_attn_nkv(d) the KV heads (GQA; Hk = NH
 * for MHA).  q [B, T, ldq] with head h at column h*HS is
 * dims {B, NH, T, HS}, strides {T*ldq, HS, ldq, 1} (the BSHD layout);
 * kt (K^T, what the first matmul reads) {B, Hk, HS, T}, {T*ldkv, HS, 1,
 * ldkv}; k {B, Hk, T, HS}, {T*ldkv, HS, ldkv, 1}; v {B, Hk, T, HS},
 * {T*ldkv, HS, ldkv, 1}; vt (V^T, the backward's dO V^T) {B, Hk, HS, T},
 * {T*ldkv, HS, 1, ldkv}; o (out, dout) {B, NH, T, HS}, {T*C, HS, C, 1}; g
 * (the backward's dq scratch, rows of lds elements) {B, NH, T, HS},
 * {T*lds, HS, lds, 1}; gk (its dk, dv scratch) {B, Hk, T, HS}, {T*ldk,
 * HS, ldk, 1} with ldk = Hk*HS where lds = C (three separate scratches)
 * and ldk = lds otherwise (one packed [B, T, C + 2*Hk*HS] scratch); fh
 * (GQA's virtual per-query-head dK, dV before the sum over a group) {B,
 * NH, T, HS}, {NH*T*HS, T*HS, HS, 1}; stats (lse [B, NH,
 * T]) {B, NH, T, 1}, {NH*T, T, 1, 1}; s (the T x T scores, virtual) {B,
 * NH, T, T}, {NH*T*T, T*T, T, 1}; st (their transpose) {B, NH, T, T},
 * {NH*T*T, T*T, 1, T}.  Needs the rule's shape (Tq = Tk = T). */
typedef struct pt_sdpa_layout {
    int64_t q_dim[4], q_str[4], kt_dim[4], kt_str[4], k_dim[4], k_str[4], v_dim[4], v_str[4], vt_dim[4], vt_str[4];
    int64_t o_dim[4], o_str[4], g_dim[4], g_str[4], gk_dim[4], gk_str[4], fh_dim[4], fh_str[4];
    int64_t stats_dim[4], stats_str[4];
    int64_t s_dim[4], s_str[4], st_dim[4], st_str[4];
} pt_sdpa_layout;
void pt_sdpa_layout_of(const pt_attn_dims *d, int lds, pt_sdpa_layout *l);

/* The cuDNN SDPA on the compute stream, bf16 tensors (device memory), the
 * semantics of ops.h's attention_fwd with merge 0 / attention_bwd for the
 * shapes pt_attn_cudnn_rule takes: out [B, T, NH*HS] and lse [B, NH, T]
 * (fp32, natural log of the row sums of exp(scaled scores): cuDNN's
 * softmax Stats = max + log(sum exp(s - max))) written; the backward ADDS
 * dq, dk, dv (cuDNN writes them into a stream-ordered scratch, then
 * add2d).  The graphs (below in attention_cudnn.c) are planned once per
 * shape (B, NH, NKV, T, HS, ldq, ldkv, packed gradients) and cached.
 * GQA (NKV < NH): K, V of NKV heads; dK, dV summed over each group's
 * query heads inside the graph (a reduction, Ainslie et al. 2023).
 * PT_OK; PT_ATTN_FALLBACK when cuDNN has no plan for the shape (logged
 * once per shape, pt_cuda_attention_cudnn_fallback says why); else a
 * pt_fail code (cudnnBackendExecute, a scratch allocation). */
int pt_cuda_attention_cudnn_fwd(void *out, void *lse, const void *q, const void *k, const void *v,
                                const pt_attn_dims *d);
int pt_cuda_attention_cudnn_bwd(void *dq, void *dk, void *dv, const void *dout, const void *q, const void *k,
                                const void *v, const void *out, const void *lse, const pt_attn_dims *d);
/* How many calls ran on cuDNN so far (the tests tell a cuDNN run from a
 * fallback) and the last fallback's reason ("" if none). */
long pt_cuda_attention_cudnn_runs(void);
const char *pt_cuda_attention_cudnn_fallback(void);
/* Free the cached plans and the cuDNN handle (before pt_cuda_shutdown;
 * the next call plans again). */
void pt_cuda_attention_cudnn_release(void);

/* Host-only check of the graphs: builds and finalizes every tensor and
 * operation descriptor of the forward (bwd 0) or backward (bwd 1) graph
 * for d (rule shape; lds as pt_sdpa_layout_of), which cuDNN does without a
 * device, and frees them; *nops = the number of operations.  PT_OK; the
 * first failing cuDNN call's pt_cudnn_fail code (message names the node);
 * PT_EUNSUPP without cuDNN. */
int pt_sdpa_ops_check(const pt_attn_dims *d, int bwd, int lds, int *nops);

#ifdef __cplusplus
}
#endif
#endif
