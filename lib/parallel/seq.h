/* SPDX-License-Identifier: MIT */
/* Sequence parallelism: ring self-attention (Li et al. 2021, "Sequence
 * Parallelism: Long Sequence Training from System Perspective", section
 * 3.2, "Ring Self-Attention") computed blockwise as Ring Attention (Liu et
 * al. 2023, "Ring Attention with Blockwise Transformers for Near-Infinite
 * Context"): flash attention per ring step, never the [Tl, T] scores.
 *
 * The sequence of T tokens is split over the sp group: rank s holds tokens
 * [s*Tl, (s+1)*Tl) of every sequence (T = sp*Tl) for the heads its tensor
 * layout gives it (all NH with tp = 1; NH/tp under 1d tp, NH/q under 2d and
 * 2.5d, NH/l under 3d: attention heads are whole on every rank, so sp
 * composes with each layout as Megatron-LM's context parallelism does with
 * its tensor parallelism).  The sp group joins the ranks with the same dp,
 * pp and tp coordinates (context.h): the same sequences and heads.  NH
 * below is the local head count, B the local sequences.  Every op
 * of the model except attention is per-token and runs unchanged on the
 * local tokens; attention needs every key and value of earlier positions,
 * so the key and value blocks travel round the ring together: at each step
 * the local queries' flash attention against the block that passes
 * (ops->attention_fwd with the block's global offset) gives a partial
 * output and its row log-sum-exp, merged exactly into the running ones
 * (merge = 1: lse' = log(e^lse + e^lse_blk), the outputs weighted by
 * e^(lse - lse')).  The backward sends K, V and their accumulating
 * gradients dK, dV round again: each step is ops->attention_bwd of the
 * local queries against the block with the FINAL output and lse (the
 * softmax's normaliser is global, so every block's share is exact); dQ
 * stays local, dK and dV end back at their owners.
 *
 * Layouts match ops->attention_fwd on the whole sequence: qkv [B, Tl,
 * W] as [NH q heads | NKV k heads | NKV v heads], W = (NH + 2*NKV)*HS
 * (3*NH*HS for MHA), out [B, Tl, NH*HS], lse [B, NH, Tl] for the local
 * queries.  Scale 1/sqrt(HS), causal on global positions.  Grouped-query
 * attention (Ainslie et al. 2023, "GQA", section 2.2): NKV KV heads, NH %
 * NKV == 0, query head h reads KV head h / (NH/NKV) (pt_attn_dims); only
 * the NKV heads' K and V (and dK, dV) travel round the ring, so a block is
 * NH/NKV times smaller than MHA's.  NKV = 0 means NH (MHA, GPT-2).
 *
 * Ring: rank s sends to s+1 and receives from s-1 (mod sp) with
 * pt_sendrecv, so at step j it holds the block of rank (s-j) mod sp.  Blocks
 * of later positions (owner > s) are fully masked: forwarded, not computed.
 *
 * Communication per call (counted on sp as send/recv), with
 * S = B*Tl*NKV*HS*e bytes (one K or V block; e the ACT element size, 4 for
 * fp32 and 2 for bf16: the blocks and their gradients travel in ACT), for
 * sp > 1:
 *   forward   2*(sp-1) sends of S      (K and V, one sendrecv each per step)
 *   backward  2*(2*sp-1) sends of S    (K, V: sp-1 each; dK, dV: sp each,
 *                                       the last one home)
 * With sp == 1 these equal ops->attention_fwd/bwd and move nothing (0).
 * The blocking sendrecv does not overlap transfer with compute.
 */
#ifndef PTRAIN_SEQ_H
#define PTRAIN_SEQ_H
#include "backend/ops.h"
#include "comm/comm.h"
#include "core/core.h"

/* out [B, Tl, C] (ACT) and lse [B, NH, Tl] (fp32) from qkv [B, Tl, W]
 * (ACT; C = NH*HS, W = C + 2*NKV*HS: q | k | v) of this rank's sequence
 * block.  NKV: the KV heads (GQA; 0 means NH, MHA: W = 3C).  Scratch (four
 * K/V blocks of S bytes) comes from arena a; every product, the merge and
 * the copies run through ops (the backend's table; its memory is a's).
 * Errors: PT_EINVAL (a size < 1, NKV neither 0 nor a divisor of NH, or T
 * or 3C beyond int), PT_ENOMEM, PT_ECOMM. */
int pt_ring_attention_fwd(pt_comm *sp, pt_arena *a, const pt_ops *ops, void *out, float *lse, const void *qkv,
                          int B, int Tl, int NH, int HS, int NKV);

/* dqkv [B, Tl, W] += gradient from dout [B, Tl, C], given the forward's
 * qkv, out and lse (accumulates, like ops->attention_bwd; W and NKV as
 * pt_ring_attention_fwd: dK, dV of a KV head sum over its NH/NKV query
 * heads).  Scratch from arena a: eight K/V blocks of S bytes (K, V, dK, dV
 * and the next ones).  Errors: PT_EINVAL (a size < 1, NKV neither 0 nor a
 * divisor of NH, or T or 3C beyond int), PT_ENOMEM, PT_ECOMM. */
int pt_ring_attention_bwd(pt_comm *sp, pt_arena *a, const pt_ops *ops, void *dqkv, const void *dout,
                          const void *qkv, const void *out, const float *lse, int B, int Tl, int NH, int HS,
                          int NKV);

#endif
