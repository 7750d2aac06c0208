/* SPDX-License-Identifier: MIT */
/* Ring self-attention (Li et al. 2021, section 3.2) as Ring Attention
 * (Liu et al. 2023): see seq.h for shapes, the algorithm and the
 * communication volume.
 *
 * Ring: rank s sends to s+1 and receives from s-1 (mod sp), so at ring step
 * j (0 .. sp-1) rank s holds the block owned by rank (s - j) mod sp, which
 * covers the global key positions [r*Tl, (r+1)*Tl).  Blocks with r > s hold
 * only future keys of every local query (causal mask): they are forwarded
 * but not computed on.  Every rank calls pt_sendrecv in the same order, so
 * the ring cannot deadlock.
 *
 * All arithmetic goes through the backend's ops table (ops.h): the local
 * K and V are packed into contiguous blocks that can be sent
 * (ops->copy2d), each step is one flash-attention call on strided views
 * (queries at row stride W = C + 2*NKV*HS in qkv, the block of NKV heads at
 * stride NKV*HS: GQA's blocks are NH/NKV times narrower) with the
 * block's global key offset, and the accumulators come home with
 * ops->add2d:
 *   forward   (out, lse) = merge((out, lse), flash(Q, K_r, V_r))
 *   backward  dQ += dS_r K_r;  dK_r += dS_r^T Q;  dV_r += P_r^T dO, with
 *             P_r = exp(S_r - lse) and dS_r = P_r (dO V_r^T - rowsum(dO O))
 *             scale from the final out and lse (ops->attention_bwd)
 */
#include "parallel/seq.h"

#include <stdint.h>
#include <string.h>

/* Message tags, one per kind of block, so that a mismatch between ranks
 * shows up as a hang in a named place instead of silently mixing blocks. */
enum {
    TAG_FWD_K = 0x5e01,
    TAG_FWD_V,
    TAG_BWD_K,
    TAG_BWD_V,
    TAG_BWD_DK,
    TAG_BWD_DV,
    TAG_BWD_DK_HOME,
    TAG_BWD_DV_HOME,
};

static int check_args(const pt_comm *sp, const char *fn, int B, int Tl, int NH, int HS, int NKV)
{
    if (!sp || sp->size < 1) return pt_fail(PT_EINVAL, "%s: no sp group", fn);
    if (B < 1 || Tl < 1 || NH < 1 || HS < 1)
        return pt_fail(PT_EINVAL, "%s: B=%d Tl=%d NH=%d HS=%d: every size must be >= 1", fn, B, Tl, NH, HS);
    if (NKV < 0 || NKV > NH || (NKV > 0 && NH % NKV))
        return pt_fail(PT_EINVAL, "%s: NKV=%d KV heads for NH=%d query heads (valid: 0 for NH, or a divisor of NH)",
                       fn, NKV, NH);
    if ((int64_t)Tl * sp->size > INT32_MAX || (int64_t)NH * HS * 3 > INT32_MAX)
        return pt_fail(PT_EINVAL, "%s: Tl=%d x sp=%d or 3*NH*HS=%d*%d*3 exceeds the int range", fn, Tl, sp->size,
                       NH, HS);
    return PT_OK;
}

/* dst [B, Tl, KVC] = the KVC columns at offset `off` of qkv [B, Tl, W]
 * (ACT; W = C + 2*KVC, the row width). */
static void pack(const pt_ops *ops, void *dst, const void *qkv, size_t rows, int KVC, int W, int off)
{
    const size_t es = pt_dtype_size(ops->act);
    ops->copy2d(dst, es * (size_t)KVC, pt_elem(qkv, (size_t)off, ops->act), es * (size_t)W, es * (size_t)KVC, rows);
}

/* qkv columns at offset `off` [B, Tl, KVC of W] += src [B, Tl, KVC] (ACT). */
static void unpack_add(const pt_ops *ops, void *qkv, const void *src, size_t rows, int KVC, int W, int off)
{
    ops->add2d(pt_elem(qkv, (size_t)off, ops->act), (size_t)W, src, (size_t)KVC, rows, (size_t)KVC, ops->act);
}

static void swap(void **a, void **b)
{
    void *t = *a;
    *a = *b;
    *b = t;
}

/* The flash-attention shape of ring step r: the local queries (global
 * offset s*Tl, stride W = (NH + 2*NKV)*HS in qkv) against rank r's packed
 * block of NKV heads (offset r*Tl, stride NKV*HS). */
static pt_attn_dims step_dims(int B, int Tl, int NH, int HS, int NKV, int s, int r)
{
    return (pt_attn_dims){B, NH, HS, Tl, Tl, s * Tl, r * Tl, (NH + 2 * NKV) * HS, NKV * HS, NKV};
}

static void free_blocks(pt_arena *a, void **buf, int n)
{
    for (int i = 0; i < n; i++) pt_arena_free(a, buf[i]);
}

/* n blocks of blk elements of type t from the arena, or PT_ENOMEM (none kept) */
static int alloc_blocks(pt_arena *a, void **buf, int n, size_t blk, pt_dtype t, const char *what)
{
    for (int i = 0; i < n; i++) buf[i] = NULL;
    for (int i = 0; i < n; i++)
        if (!(buf[i] = pt_arena_alloc(a, pt_dtype_size(t) * blk))) {
            free_blocks(a, buf, n);
            return pt_fail(PT_ENOMEM, "%s: no memory for %d K/V blocks of %zu bytes", what, n, pt_dtype_size(t) * blk);
        }
    return PT_OK;
}

int pt_ring_attention_fwd(pt_comm *sp, pt_arena *a, const pt_ops *ops, void *out, float *lse, const void *qkv,
                          int B, int Tl, int NH, int HS, int NKV)
{
    int rc = check_args(sp, "ring attention forward", B, Tl, NH, HS, NKV);
    if (rc) return rc;
    if (NKV == 0) NKV = NH;
    const int p = sp->size, s = sp->rank, C = NH * HS, KVC = NKV * HS, W = C + 2 * KVC;
    const int next = (s + 1) % p, prev = (s + p - 1) % p;
    const pt_dtype at = ops->act;
    const size_t rows = (size_t)B * Tl, blk = rows * KVC;
    void *buf[4]; /* K, V and the next K, V */
    if ((rc = alloc_blocks(a, buf, p > 1 ? 4 : 2, blk, at, "ring attention forward"))) return rc;
    void *k = buf[0], *v = buf[1], *kn = p > 1 ? buf[2] : NULL, *vn = p > 1 ? buf[3] : NULL;
    pack(ops, k, qkv, rows, KVC, W, C);
    pack(ops, v, qkv, rows, KVC, W, C + KVC);
    /* step 0 is the own block (the diagonal): it writes (out, lse); the
     * earlier blocks merge into them */
    for (int j = 0; j < p && !rc; j++) {
        const int r = (s - j + p) % p;
        if (r <= s) {
            const pt_attn_dims d = step_dims(B, Tl, NH, HS, NKV, s, r);
            ops->attention_fwd(out, lse, qkv, k, v, &d, j > 0);
        }
        if (j < p - 1) {
            rc = pt_sendrecv_t(sp, k, next, kn, prev, blk, TAG_FWD_K, at);
            if (!rc) rc = pt_sendrecv_t(sp, v, next, vn, prev, blk, TAG_FWD_V, at);
            swap(&k, &kn);
            swap(&v, &vn);
        }
    }
    free_blocks(a, buf, p > 1 ? 4 : 2);
    return rc;
}

int pt_ring_attention_bwd(pt_comm *sp, pt_arena *a, const pt_ops *ops, void *dqkv, const void *dout,
                          const void *qkv, const void *out, const float *lse, int B, int Tl, int NH, int HS,
                          int NKV)
{
    int rc = check_args(sp, "ring attention backward", B, Tl, NH, HS, NKV);
    if (rc) return rc;
    if (NKV == 0) NKV = NH;
    const int p = sp->size, s = sp->rank, C = NH * HS, KVC = NKV * HS, W = C + 2 * KVC;
    const int next = (s + 1) % p, prev = (s + p - 1) % p;
    const pt_dtype at = ops->act;
    const size_t rows = (size_t)B * Tl, blk = rows * KVC;
    const int nbuf = p > 1 ? 8 : 4;
    void *buf[8]; /* K, V, dK, dV and the next ones */
    if ((rc = alloc_blocks(a, buf, nbuf, blk, at, "ring attention backward"))) return rc;
    void *k = buf[0], *v = buf[1], *dk = buf[2], *dv = buf[3];
    void *kn = p > 1 ? buf[4] : NULL, *vn = p > 1 ? buf[5] : NULL, *dkn = p > 1 ? buf[6] : NULL,
         *dvn = p > 1 ? buf[7] : NULL;
    pack(ops, k, qkv, rows, KVC, W, C);
    pack(ops, v, qkv, rows, KVC, W, C + KVC);
    ops->zero(dk, blk, at);
    ops->zero(dv, blk, at);
    for (int j = 0; j < p && !rc; j++) {
        const int r = (s - j + p) % p;
        if (r <= s) {
            const pt_attn_dims d = step_dims(B, Tl, NH, HS, NKV, s, r);
            ops->attention_bwd(dqkv, dk, dv, dout, qkv, k, v, out, lse, &d);
        }
        if (j < p - 1) {
            rc = pt_sendrecv_t(sp, k, next, kn, prev, blk, TAG_BWD_K, at);
            if (!rc) rc = pt_sendrecv_t(sp, v, next, vn, prev, blk, TAG_BWD_V, at);
            if (!rc) rc = pt_sendrecv_t(sp, dk, next, dkn, prev, blk, TAG_BWD_DK, at);
            if (!rc) rc = pt_sendrecv_t(sp, dv, next, dvn, prev, blk, TAG_BWD_DV, at);
            swap(&k, &kn);
            swap(&v, &vn);
            swap(&dk, &dkn);
            swap(&dv, &dvn);
        }
    }
    /* the accumulators now belong to rank s+1 (the blocks that started at
     * s-(sp-1)); one more hop brings every one home */
    if (!rc && p > 1) {
        rc = pt_sendrecv_t(sp, dk, next, dkn, prev, blk, TAG_BWD_DK_HOME, at);
        if (!rc) rc = pt_sendrecv_t(sp, dv, next, dvn, prev, blk, TAG_BWD_DV_HOME, at);
        swap(&dk, &dkn);
        swap(&dv, &dvn);
    }
    if (!rc) {
        unpack_add(ops, dqkv, dk, rows, KVC, W, C);
        unpack_add(ops, dqkv, dv, rows, KVC, W, C + KVC);
    }
    free_blocks(a, buf, nbuf);
    return rc;
}
