/* Sequence parallelism: ring self-attention (Li et al. 2021, "Sequence
 * Parallelism: Long Sequence Training from System Perspective", section
 * 3.2, "Ring Self-Attention").
 *
 * The sequence of T tokens is split over the sp group: rank s holds tokens
 * [s*Tl, (s+1)*Tl) of every sequence (T = sp*Tl) for all heads.  Every op
 * of the model except attention is per-token and runs unchanged on the
 * local tokens; attention needs every key and value of earlier positions,
 * so the key blocks and then the value blocks travel round the ring: each
 * rank computes its queries' causal scores against each key block as it
 * passes (the full score rows [Tl, T] stay local, so the softmax is exact),
 * then accumulates the output from each value block.  The backward sends
 * the blocks round again together with their accumulating gradients, which
 * end back at their owners.
 *
 * Layouts match ops->attention_fwd: qkv [B, Tl, 3*NH*HS] as [q heads | k
 * heads | v heads], out [B, Tl, NH*HS], att [B, NH, Tl, T] post-softmax
 * probabilities of the local queries against all T keys (future keys 0).
 * Scale 1/sqrt(HS), causal on global positions.
 *
 * Ring: rank s sends to s+1 and receives from s-1 (mod sp) with
 * pt_sendrecv, so at step j it holds the block of rank (s-j) mod sp.  Blocks
 * of later positions (owner > s) are fully masked: forwarded, not computed.
 * Backward order: V with its dV accumulator goes round first (dP = dO V^T
 * per block, dV += P^T dO); the softmax backward dS = P (dP - rowsum(P dP))
 * then needs the full local rows of dP; then K with dK goes round (dQ +=
 * dS K, dK += dS^T Q).  After sp steps each accumulator sits one rank
 * before its owner, and one more hop brings it home, where it is added
 * into dqkv.
 *
 * Communication per call (counted on sp as send/recv), with
 * S = B*Tl*NH*HS*4 bytes (one K or V block), for sp > 1:
 *   forward   2*(sp-1) sends of S      (K ring, then V ring)
 *   backward  2*(2*sp-1) sends of S    (per ring: sp-1 of V (or K), sp of
 *                                       its accumulator, the last one home)
 * With sp == 1 these equal ops->attention_fwd/bwd and move nothing (0).
 * The blocking sendrecv does not overlap transfer with compute.
 */
#ifndef PTRAIN_SEQ_H
#define PTRAIN_SEQ_H
#include "backend/ops.h"
#include "comm/comm.h"
#include "core/core.h"

/* out [B, Tl, C] and att [B, NH, Tl, sp*Tl] from qkv [B, Tl, 3C] (C =
 * NH*HS) of this rank's sequence block.  Scratch (two K/V blocks) comes
 * from arena a; every product, the softmax and the copies run through
 * ops (the backend's table; its memory is a's).  Errors: PT_EINVAL (a size < 1, or T or 3C beyond int), PT_ENOMEM, PT_ECOMM. */
int pt_ring_attention_fwd(pt_comm *sp, pt_arena *a, const pt_ops_f32 *ops, float *out, float *att, const float *qkv, int B, int Tl,
                          int NH, int HS);

/* dqkv [B, Tl, 3C] += gradient from dout [B, Tl, C], given the forward's
 * qkv and att (accumulates, like ops->attention_bwd).  Scratch from arena
 * a: dS [B, NH, Tl, sp*Tl] and four K/V blocks of S bytes.
 * Errors: PT_EINVAL (a size < 1, or T or 3C beyond int), PT_ENOMEM, PT_ECOMM. */
int pt_ring_attention_bwd(pt_comm *sp, pt_arena *a, const pt_ops_f32 *ops, float *dqkv, const float *dout, const float *qkv,
                          const float *att, int B, int Tl, int NH, int HS);

#endif
