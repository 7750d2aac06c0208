/* Ring self-attention (Li et al. 2021, "Sequence Parallelism: Long Sequence
 * Training from System Perspective", section 3.2).  See seq.h for shapes,
 * the algorithm and the communication volume.
 *
 * Ring: rank s sends to s+1 and receives from s-1 (mod sp), so at ring step
 * j (0 .. sp-1) rank s holds the block owned by rank (s - j) mod sp, which
 * covers the global key positions [r*Tl, (r+1)*Tl).  Blocks with r > s hold
 * only future keys of every local query (causal mask): they are forwarded
 * but not computed on.  Every rank calls pt_sendrecv in the same order, so
 * the ring cannot deadlock.
 *
 * All arithmetic goes through the backend's ops table (ops.h): per batch
 * row b, the NH heads' products are one strided batched GEMM on strided
 * views (head h at column offset h*HS; no copies besides packing the local
 * K and V into contiguous blocks that can be sent, ops->copy2d), the
 * softmax and its backward are ops->softmax_causal_fwd/bwd with the local
 * queries' global offset, and accumulators come home with ops->add2d.
 *   scores  S[:, r]  = scale * Q K_r^T        [Tl, HS] x [HS, Tl]
 *   output  O       += P[:, r] V_r            [Tl, Tl] x [Tl, HS]
 *   dP[:, r]         = dO V_r^T
 *   dV_r            += P[:, r]^T dO           (travels with V_r)
 *   dS               = P * (dP - rowsum(P * dP)) * scale   (local rows)
 *   dQ              += dS[:, r] K_r
 *   dK_r            += dS[:, r]^T Q           (travels with K_r)
 */
#include "parallel/seq.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

/* Message tags, one per kind of block, so that a mismatch between ranks
 * shows up as a hang in a named place instead of silently mixing blocks. */
enum {
    TAG_FWD_K = 0x5e01,
    TAG_FWD_V,
    TAG_BWD_V,
    TAG_BWD_DV,
    TAG_BWD_DV_HOME,
    TAG_BWD_K,
    TAG_BWD_DK,
    TAG_BWD_DK_HOME,
};

static int check_args(const pt_comm *sp, const char *fn, int B, int Tl, int NH, int HS)
{
    if (!sp || sp->size < 1) return pt_fail(PT_EINVAL, "%s: no sp group", fn);
    if (B < 1 || Tl < 1 || NH < 1 || HS < 1)
        return pt_fail(PT_EINVAL, "%s: B=%d Tl=%d NH=%d HS=%d: every size must be >= 1", fn, B, Tl, NH, HS);
    if ((int64_t)Tl * sp->size > INT32_MAX || (int64_t)NH * HS * 3 > INT32_MAX)
        return pt_fail(PT_EINVAL, "%s: Tl=%d x sp=%d or 3*NH*HS=%d*%d*3 exceeds the int range", fn, Tl, sp->size,
                       NH, HS);
    return PT_OK;
}

/* dst [B, Tl, C] = the C columns at offset `off` of qkv [B, Tl, 3C]. */
static void pack(const pt_ops_f32 *ops, float *dst, const float *qkv, size_t rows, int C, int off)
{
    ops->copy2d(dst, sizeof(float) * (size_t)C, qkv + off, sizeof(float) * 3 * (size_t)C, sizeof(float) * (size_t)C,
                rows);
}

/* qkv columns at offset `off` [B, Tl, C of 3C] += src [B, Tl, C]. */
static void unpack_add(const pt_ops_f32 *ops, float *qkv, const float *src, size_t rows, int C, int off)
{
    ops->add2d(qkv + off, 3 * (size_t)C, src, (size_t)C, rows, (size_t)C);
}

static void swap(float **a, float **b)
{
    float *t = *a;
    *a = *b;
    *b = t;
}

int pt_ring_attention_fwd(pt_comm *sp, pt_arena *a, const pt_ops_f32 *ops, float *out, float *att, const float *qkv, int B, int Tl,
                          int NH, int HS)
{
    int rc = check_args(sp, "ring attention forward", B, Tl, NH, HS);
    if (rc) return rc;
    const int p = sp->size, s = sp->rank, T = p * Tl, C = NH * HS, C3 = 3 * C;
    const int next = (s + 1) % p, prev = (s + p - 1) % p;
    const size_t rows = (size_t)B * Tl, blk = rows * C;
    const float scale = 1.0f / sqrtf((float)HS);

    float *cur = pt_arena_alloc(a, sizeof(float) * blk);
    float *nxt = p > 1 ? pt_arena_alloc(a, sizeof(float) * blk) : NULL;
    if (!cur || (p > 1 && !nxt)) {
        pt_arena_free(a, cur);
        pt_arena_free(a, nxt);
        return pt_fail(PT_ENOMEM, "ring attention forward: no memory for two K/V blocks of %zu bytes",
                       sizeof(float) * blk);
    }

    /* 1. K ring: raw scaled scores of the local queries against every block
     *    of earlier (or the same) positions, written into att. */
    pack(ops, cur, qkv, rows, C, C);
    for (int j = 0; j < p && !rc; j++) {
        const int r = (s - j + p) % p;
        if (r <= s) /* per sequence b, one GEMM per head h (batch NH, head stride HS) */
            for (int b = 0; b < B; b++)
                ops->gemm_batched(0, 1, Tl, Tl, HS, scale, qkv + (size_t)b * Tl * C3, C3, HS,
                                  cur + (size_t)b * Tl * C, C, HS, 0.0f,
                                  att + (size_t)b * NH * Tl * T + (size_t)r * Tl, T, (int64_t)Tl * T, NH);
        if (j < p - 1) {
            rc = pt_sendrecv(sp, cur, next, nxt, prev, blk, TAG_FWD_K);
            swap(&cur, &nxt);
        }
    }

    /* 2. Exact causal softmax over the full local rows [Tl, T]: query i sits
     *    at global position s*Tl + i and sees keys 0 .. s*Tl + i. */
    if (!rc) ops->softmax_causal_fwd(att, B * NH, Tl, T, s * Tl);

    /* 3. V ring: out = sum over blocks r <= s of P[:, r] V_r. */
    if (!rc) {
        pack(ops, cur, qkv, rows, C, 2 * C);
        ops->zero(out, rows * C);
    }
    for (int j = 0; j < p && !rc; j++) {
        const int r = (s - j + p) % p;
        if (r <= s)
            for (int b = 0; b < B; b++)
                ops->gemm_batched(0, 0, Tl, HS, Tl, 1.0f, att + (size_t)b * NH * Tl * T + (size_t)r * Tl, T,
                                  (int64_t)Tl * T, cur + (size_t)b * Tl * C, C, HS, 1.0f, out + (size_t)b * Tl * C, C,
                                  HS, NH);
        if (j < p - 1) {
            rc = pt_sendrecv(sp, cur, next, nxt, prev, blk, TAG_FWD_V);
            swap(&cur, &nxt);
        }
    }

    pt_arena_free(a, cur);
    pt_arena_free(a, nxt);
    return rc;
}

/* One ring pass of the backward: the block X (K or V, packed from qkv at
 * column offset xoff) travels round with its gradient accumulator dX, and
 * `step` adds this rank's contribution for the block owned by rank r into
 * dX (and, for K, into dQ).  After the pass dX is back at its owner, which
 * adds it into dqkv at xoff.  Sends: sp-1 blocks of X, sp of dX (sp > 1). */
typedef void (*ring_step)(float *dx, const float *x, int r, void *ctx);

static int ring_pass(pt_comm *sp, const pt_ops_f32 *ops, float *buf[4], const float *qkv, float *dqkv, size_t rows, int C, int xoff,
                     int tag_x, int tag_dx, int tag_home, ring_step step, void *ctx)
{
    const int p = sp->size, s = sp->rank, next = (s + 1) % p, prev = (s + p - 1) % p;
    const size_t blk = rows * C;
    float *x = buf[0], *xn = buf[1], *dx = buf[2], *dxn = buf[3];
    int rc = PT_OK;
    pack(ops, x, qkv, rows, C, xoff);
    ops->zero(dx, blk);
    for (int j = 0; j < p && !rc; j++) {
        const int r = (s - j + p) % p;
        if (r <= s) step(dx, x, r, ctx);
        if (j < p - 1) {
            rc = pt_sendrecv(sp, x, next, xn, prev, blk, tag_x);
            if (!rc) rc = pt_sendrecv(sp, dx, next, dxn, prev, blk, tag_dx);
            swap(&x, &xn);
            swap(&dx, &dxn);
        }
    }
    /* dx now belongs to rank s+1 (the block that started at s-(sp-1)); one
     * more hop brings every accumulator home. */
    if (!rc && p > 1) {
        rc = pt_sendrecv(sp, dx, next, dxn, prev, blk, tag_home);
        swap(&dx, &dxn);
    }
    if (!rc) unpack_add(ops, dqkv, dx, rows, C, xoff);
    return rc;
}

typedef struct bwd_ctx {
    const pt_ops_f32 *ops;
    int B, Tl, T, NH, HS;
    const float *qkv, *dout, *att;
    float *ds;   /* [B, NH, Tl, T]: dP during the V pass, then dS */
    float *dqkv; /* for dQ */
} bwd_ctx;

/* V pass: dP[:, r] = dO V_r^T; dV_r += P[:, r]^T dO. */
static void v_step(float *dv, const float *v, int r, void *vctx)
{
    const bwd_ctx *c = vctx;
    const int Tl = c->Tl, T = c->T, NH = c->NH, HS = c->HS, C = NH * HS;
    for (int b = 0; b < c->B; b++) { /* batch of NH heads: head stride HS, score-block stride Tl*T */
        const size_t bh = (size_t)b * NH * Tl * T + (size_t)r * Tl, xo = (size_t)b * Tl * C;
        const int64_t sS = (int64_t)Tl * T;
        const float *g = c->dout + xo;
        c->ops->gemm_batched(0, 1, Tl, Tl, HS, 1.0f, g, C, HS, v + xo, C, HS, 0.0f, c->ds + bh, T, sS, NH);
        c->ops->gemm_batched(1, 0, Tl, HS, Tl, 1.0f, c->att + bh, T, sS, g, C, HS, 1.0f, dv + xo, C, HS, NH);
    }
}

/* K pass: dQ += dS[:, r] K_r; dK_r += dS[:, r]^T Q (dS already scaled). */
static void k_step(float *dk, const float *k, int r, void *vctx)
{
    const bwd_ctx *c = vctx;
    const int Tl = c->Tl, T = c->T, NH = c->NH, HS = c->HS, C = NH * HS, C3 = 3 * C;
    for (int b = 0; b < c->B; b++) {
        const float *ds = c->ds + (size_t)b * NH * Tl * T + (size_t)r * Tl;
        const size_t xo = (size_t)b * Tl * C, qo = (size_t)b * Tl * C3;
        const int64_t sS = (int64_t)Tl * T;
        c->ops->gemm_batched(0, 0, Tl, HS, Tl, 1.0f, ds, T, sS, k + xo, C, HS, 1.0f, c->dqkv + qo, C3, HS, NH);
        c->ops->gemm_batched(1, 0, Tl, HS, Tl, 1.0f, ds, T, sS, c->qkv + qo, C3, HS, 1.0f, dk + xo, C, HS, NH);
    }
}

int pt_ring_attention_bwd(pt_comm *sp, pt_arena *a, const pt_ops_f32 *ops, float *dqkv, const float *dout, const float *qkv,
                          const float *att, int B, int Tl, int NH, int HS)
{
    int rc = check_args(sp, "ring attention backward", B, Tl, NH, HS);
    if (rc) return rc;
    const int p = sp->size, s = sp->rank, T = p * Tl, C = NH * HS;
    const size_t rows = (size_t)B * Tl, blk = rows * C, nds = (size_t)B * NH * Tl * T;
    const float scale = 1.0f / sqrtf((float)HS);

    float *buf[4] = {0};
    float *ds = pt_arena_alloc(a, sizeof(float) * nds);
    int ok = ds != NULL;
    for (int i = 0; i < 4 && ok; i++) ok = (buf[i] = pt_arena_alloc(a, sizeof(float) * blk)) != NULL;
    if (!ok) {
        for (int i = 0; i < 4; i++) pt_arena_free(a, buf[i]);
        pt_arena_free(a, ds);
        return pt_fail(PT_ENOMEM,
                       "ring attention backward: no memory for dS (%zu bytes) and four K/V blocks of %zu bytes",
                       sizeof(float) * nds, sizeof(float) * blk);
    }
    bwd_ctx c = {ops, B, Tl, T, NH, HS, qkv, dout, att, ds, dqkv};

    /* 1. V with dV round the ring: dP blocks into ds, dV home into dqkv. */
    rc = ring_pass(sp, ops, buf, qkv, dqkv, rows, C, 2 * C, TAG_BWD_V, TAG_BWD_DV, TAG_BWD_DV_HOME, v_step, &c);

    /* 2. Softmax backward on the full local rows (causal: keys 0 .. s*Tl+i),
     *    dS = P * (dP - sum_t P dP) * scale; masked entries stay 0. */
    if (!rc) ops->softmax_causal_bwd(ds, att, scale, B * NH, Tl, T, s * Tl);

    /* 3. K with dK round the ring: dQ into dqkv directly, dK home. */
    if (!rc) rc = ring_pass(sp, ops, buf, qkv, dqkv, rows, C, C, TAG_BWD_K, TAG_BWD_DK, TAG_BWD_DK_HOME, k_step, &c);

    for (int i = 0; i < 4; i++) pt_arena_free(a, buf[i]);
    pt_arena_free(a, ds);
    return rc;
}
