/* SPDX-License-Identifier: MIT */
/* 2D tensor parallelism with SUMMA (Optimus: Xu et al. 2021, "An
 * Efficient 2D Method for Training Super-Large Deep Learning Models",
 * section 3; SUMMA: van de Geijn & Watts 1997) and its depth extension
 * 2.5D (Tesseract: Wang et al. 2021, "Tesseract: Parallelize the Tensor
 * Parallelism Efficiently", section 3).
 *
 * Grid: tp = d*q*q ranks p(k, i, j): depth slice k, row i, column j
 * (context axes 0, 1, 2; d = 1 is plain 2D).  Each depth slice is an
 * independent q x q SUMMA grid over its own part of the batch:
 *   activations  X_ij  = rows of batch block b = k*q + i (B/(dq) sequences),
 *                        hidden block j (C/q columns);
 *   linear W [O, I]    p(k,i,j) holds W[O-block j, I-block i] ([O/q, I/q];
 *                        for qkv the O blocks are whole heads of q, k, v),
 *                        the same on every depth slice;
 *   bias, LayerNorm,   block j of the vector, on every (k, i);
 *   position emb.
 *   wte [Vp, C]        p(k,i,j) holds wte[V-block i, C-block j].
 * Row group = same (k, i), varying j; column group = same (k, j), varying i.
 *
 * Linear (Y = X W^T, SUMMA "AB" with B = W^T): for s = 0..q-1 broadcast
 * X_is along the row and W[O-blk j, I-blk s] down the column, Y_ij +=
 * X_is W^T.  Backward: dX_is = sum_j dY_ij W[j, s] (broadcast W down the
 * column, reduce the partial products along the row to column s), dW[j,
 * s] = sum_i dY_ij^T X_is (broadcast X along the row, reduce down the
 * column to row s).  Per linear and rank, with Sx = the local input block
 * and Sw = the local weight block (bytes), the counters see q broadcasts
 * or reduces of each, six times (q-1)/q: 3(q-1)(Sx + Sw), the Colossal-AI
 * paper's Table 1 (Bian et al. 2021) for j = q.
 *
 * 2.5D: the weights are replicated over the d depth slices, which see
 * different batch blocks, so dW must also be summed over depth (Tesseract
 * section 3.2; Colossal-AI's own 2.5D code omits this).  That sum is the
 * same operation as data parallelism's, so it runs once per step in the
 * model's gradient synchronisation over sync[depth] (= depth x dp x sp)
 * rather than once per layer: 2(dp*d-1)/(dp*d) Sw per weight and step.
 * Biases and LayerNorm parameters sum over (depth, rows): sync[depth|row].
 *
 * Embedding: wte[V-blk s, C-blk j] is broadcast down column j for each s
 * and rows of tokens in that vocabulary block are copied (no broadcast of
 * the one-hot input: every rank of a row has the tokens); the backward
 * scatter-adds into a block and reduces it down the column to row s.
 * Vocabulary head (the fused classifier, ops.h: no [N, Vp/q] logits):
 * p(k,i,j) takes vocabulary block j for its rows.  Its rows' full width is
 * an allgather of X along the row ([q][N][C/q]); vocabulary block j's full
 * width is the transposed block wte[V-blk j, C-blk i] (what p(i,j) holds
 * is wte[V-blk i, C-blk j], so the slice swaps blocks with p(j,i): one
 * send of Sw each way) gathered down the column ([q][Vb][C/q]).  The
 * cross-entropy reduces over the row; the backward gathers both again,
 * reduce-scatters dX along the row (over the vocabulary blocks) and dW
 * down the column (over the batch blocks) and swaps dW back.  The volume
 * equals the SUMMA head's (q broadcasts of each block are one allgather's
 * (q-1)/q of the q-fold size), and no rank holds [N, Vb] logits.
 *
 * Epilogues: a linear's bias and GELU ride on its last SUMMA step's GEMM;
 * the DGELU_BGRAD of fc runs after fcproj's dX reduce (ops->epilogue_bwd).
 */
#include "parallel/layout.h"
#include "shape/shape.h"

#include <stdio.h>
#include <string.h>

enum { AX_DEPTH = 1, AX_ROW = 2, AX_COL = 4 }; /* masks of context axes 0, 1, 2 */

/* Row group (varying j, my rank = j) and column group (varying i, rank = i). */
#define ROWG(c) (&(c)->tp_sub[AX_COL])
#define COLG(c) (&(c)->tp_sub[AX_ROW])
#define SLICE(c) (&(c)->tp_sub[AX_ROW | AX_COL])
#define CI(c) ((c)->tp_coord[1])
#define CJ(c) ((c)->tp_coord[2])
#define CK(c) ((c)->tp_coord[0])
#define Q(c) ((c)->tp_dims[1])

static int geometry(const pt_pctx *c, int B, int T, int C, int NH, int V, pt_geom *g)
{
    int rc = pt_geom_shape(c, pt_shape_2d, B, T, C, NH, V, g);
    if (rc) return rc;
    g->loss_owner = CJ(c) == 0;
    g->norm = (pt_comm *)ROWG(c);
    return PT_OK;
}

static int is_weight(pt_pclass cls)
{
    return cls == PT_P_QKV_W || cls == PT_P_PROJ_W || cls == PT_P_FC_W || cls == PT_P_FCPROJ_W || cls == PT_P_WTE;
}

static void param(pt_pctx *c, pt_pclass cls, int64_t rows, int64_t cols, pt_pshard *s)
{
    const int q = Q(c);
    if (is_weight(cls)) { /* one block of the q x q grid: weights differ only over depth */
        s->numel = rows * cols / ((int64_t)q * q);
        s->sync = &c->sync[AX_DEPTH];
    } else { /* column block j of a vector (or of wpe's columns), on every (k, i) */
        s->numel = rows * cols / q;
        s->sync = &c->sync[AX_DEPTH | AX_ROW];
    }
    s->norm_owner = s->sync->rank == 0;
}

static void param_slice(const pt_ops *ops, const pt_pctx *c, pt_pclass cls, const float *full, float *local,
                        int64_t rows, int64_t cols)
{
    const int q = Q(c), i = CI(c), j = CJ(c);
    const int qkv = pt_pclass_stacked(cls);
    switch (cls) {
    case PT_P_WTE: /* [V-blk i, C-blk j] */
        pt_block_copy(ops, full, local, rows, cols, q, i, 0, 1, 0, q, j);
        break;
    case PT_P_WPE: /* [T, C-blk j] */
        pt_block_copy(ops, full, local, rows, cols, 1, 0, 0, 1, 0, q, j);
        break;
    case PT_P_QKV_W: case PT_P_PROJ_W: case PT_P_FC_W: case PT_P_FCPROJ_W: /* [O-blk j, I-blk i] */
        pt_block_copy(ops, full, local, rows, cols, q, j, qkv, 1, 0, q, i);
        break;
    default: /* vectors [C] or [O]: block j */
        pt_block_copy(ops, full, local, rows, cols, q, j, qkv, 1, 0, 1, 0);
        break;
    }
}

/* y [N, Ol] = epi(x [N, Il] W^T + b), W the local [Ol, Il] block; the last
 * step's GEMM carries the bias and the epilogue (aux: GELU's input).  X and
 * W move in ACT. */
static int summa_fwd(const pt_lenv *e, const void *w, const void *b, void *y, void *aux, const void *x, int N,
                     int Il, int Ol, int epi)
{
    pt_pctx *c = e->c;
    const int q = Q(c);
    const pt_dtype at = e->ops->act;
    const size_t nx = (size_t)N * Il, nw = (size_t)Ol * Il;
    void *xb = pt_scratch_t(e->arena, nx, at, "SUMMA X"), *wb = xb ? pt_scratch_t(e->arena, nw, at, "SUMMA W") : NULL;
    int rc = wb ? PT_OK : PT_ENOMEM;
    for (int s = 0; !rc && s < q; s++) {
        void *xs = CJ(c) == s ? (void *)x : xb; /* the root only reads its buffer */
        void *ws = CI(c) == s ? (void *)w : wb;
        if ((rc = pt_broadcast_t(ROWG(c), xs, nx, s, at))) break;
        if ((rc = pt_broadcast_t(COLG(c), ws, nw, s, at))) break;
        const int last = s == q - 1;
        e->ops->matmul_fwd(y, last ? aux : NULL, xs, ws, last ? b : NULL, s ? 1.0 : 0.0, N, Il, Ol,
                           last ? epi : PT_EPI_DEFAULT);
    }
    pt_arena_free(e->arena, wb);
    pt_arena_free(e->arena, xb);
    return rc;
}

/* dx [N, Il] (overwritten) from dy [N, Ol]: dX_is = sum_j dY_ij W[j, s],
 * W broadcast down the column, partials reduced along the row to column s
 * (all ACT). */
static int summa_bwd_dx(const pt_lenv *e, const void *w, void *dx, const void *dy, int N, int Il, int Ol)
{
    pt_pctx *c = e->c;
    const int q = Q(c);
    const pt_dtype at = e->ops->act;
    const size_t nx = (size_t)N * Il, nw = (size_t)Ol * Il;
    void *xb = pt_scratch_t(e->arena, nx, at, "SUMMA dX"), *wb = xb ? pt_scratch_t(e->arena, nw, at, "SUMMA W") : NULL;
    int rc = wb ? PT_OK : PT_ENOMEM;
    for (int s = 0; !rc && s < q; s++) {
        void *ws = CI(c) == s ? (void *)w : wb;
        if ((rc = pt_broadcast_t(COLG(c), ws, nw, s, at))) break;
        void *p = CJ(c) == s ? dx : xb;
        e->ops->zero(p, nx, at);
        e->ops->matmul_bwd(p, NULL, NULL, dy, NULL, ws, N, Il, Ol, PT_EPI_DEFAULT, NULL, NULL);
        rc = pt_reduce_sum_t(ROWG(c), p, nx, s, at);
    }
    pt_arena_free(e->arena, wb);
    pt_arena_free(e->arena, xb);
    return rc;
}

/* dw [Ol, Il] (+=), db [Ol] (+=): dW[j, s] = sum_i dY_ij^T X_is, X (ACT)
 * broadcast along the row, fp32 partials reduced down the column to row s. */
static int summa_bwd_dw(const pt_lenv *e, float *dw, float *db, const void *dy, const void *x, int N, int Il, int Ol)
{
    pt_pctx *c = e->c;
    const int q = Q(c);
    const pt_dtype at = e->ops->act;
    const size_t nx = (size_t)N * Il, nw = (size_t)Ol * Il;
    void *xb = pt_scratch_t(e->arena, nx, at, "SUMMA X");
    float *wb = xb ? pt_scratch(e->arena, nw, "SUMMA dW") : NULL;
    int rc = wb ? PT_OK : PT_ENOMEM;
    for (int s = 0; !rc && s < q; s++) {
        void *xs = CJ(c) == s ? (void *)x : xb;
        if ((rc = pt_broadcast_t(ROWG(c), xs, nx, s, at))) break;
        e->ops->zero(wb, nw, PT_F32);
        e->ops->matmul_bwd(NULL, wb, NULL, dy, xs, NULL, N, Il, Ol, PT_EPI_DEFAULT, NULL, NULL);
        if ((rc = pt_reduce_sum(COLG(c), wb, nw, s))) break;
        if (CI(c) == s) e->ops->axpy(dw, 1.0, wb, nw, PT_F32);
    }
    if (!rc && db) e->ops->bias_bwd(db, dy, N, Ol);
    pt_arena_free(e->arena, wb);
    pt_arena_free(e->arena, xb);
    return rc;
}

static int lin_fwd(const pt_lenv *e, const pt_linear *l, void *y, void *aux, const void *x, int N, int epi)
{
    return summa_fwd(e, l->w, l->b, y, aux, x, N, l->in_local, l->out_local, epi);
}

static int lin_bwd(const pt_lenv *e, const pt_linear *l, void *dx, const void *dy, const void *x, int N, int epi,
                   const void *aux, float *dbias_aux)
{
    int rc = summa_bwd_dx(e, l->w, dx, dy, N, l->in_local, l->out_local);
    /* dX is complete only after the reduce along the row: DGELU_BGRAD after it */
    if (!rc && epi == PT_EPI_DGELU) e->ops->epilogue_bwd(dx, dbias_aux, aux, N, l->in_local);
    return rc ? rc : summa_bwd_dw(e, l->dw, l->db, dy, x, N, l->in_local, l->out_local);
}

/* First token of this rank's batch block in the dp-group batch [B, T]. */
static size_t row0(const pt_pctx *c, const pt_geom *g)
{
    return (size_t)(CK(c) * Q(c) + CI(c)) * g->Bl * g->T;
}

static int emb_fwd(const pt_lenv *e, const pt_geom *g, void *out, const int32_t *tok, const void *wte)
{
    pt_pctx *c = e->c;
    const int q = Q(c), N = g->Bl * g->T, Cl = g->Cr, Vb = g->Vp / q;
    const pt_dtype at = e->ops->act;
    const size_t nw = (size_t)Vb * Cl, no = (size_t)N * Cl;
    tok += row0(c, g);
    void *wb = pt_scratch_t(e->arena, nw, at, "embedding W");
    void *tmp = wb ? pt_scratch_t(e->arena, no, at, "embedding") : NULL;
    int rc = tmp ? PT_OK : PT_ENOMEM;
    for (int s = 0; !rc && s < q; s++) {
        void *ws = CI(c) == s ? (void *)wte : wb;
        if ((rc = pt_broadcast_t(COLG(c), ws, nw, s, at))) break;
        e->ops->embedding_fwd(s == 0 ? out : tmp, tok, ws, s * Vb, Vb, N, Cl);
        if (s) e->ops->add_fwd(out, out, tmp, no);
    }
    pt_arena_free(e->arena, tmp);
    pt_arena_free(e->arena, wb);
    return rc;
}

static int emb_bwd(const pt_lenv *e, const pt_geom *g, float *dwte, const void *dout, const int32_t *tok)
{
    pt_pctx *c = e->c;
    const int q = Q(c), N = g->Bl * g->T, Cl = g->Cr, Vb = g->Vp / q;
    const size_t nw = (size_t)Vb * Cl;
    tok += row0(c, g);
    float *wb = pt_scratch(e->arena, nw, "embedding dW");
    int rc = wb ? PT_OK : PT_ENOMEM;
    for (int s = 0; !rc && s < q; s++) {
        e->ops->zero(wb, nw, PT_F32);
        e->ops->embedding_bwd(wb, dout, tok, s * Vb, Vb, N, Cl);
        if ((rc = pt_reduce_sum(COLG(c), wb, nw, s))) break;
        if (CI(c) == s) e->ops->axpy(dwte, 1.0, wb, nw, PT_F32);
    }
    pt_arena_free(e->arena, wb);
    return rc;
}

/* Swap blocks with the transposed rank p(j, i) of the slice: out = the
 * partner's n elements of type t (in itself on the diagonal). */
static int transpose_block(const pt_lenv *e, const void *in, void *out, size_t n, pt_dtype t)
{
    pt_pctx *c = e->c;
    const int q = Q(c), i = CI(c), j = CJ(c);
    if (i == j) {
        e->ops->copy(out, in, n, t);
        return PT_OK;
    }
    int partner = j * q + i;
    return pt_sendrecv_t(SLICE(c), in, partner, out, partner, n, 77, t);
}

/* The head's operands with the full width C (ks = q column pieces, as the
 * allgathers lay them out, ops.h's classifier): xa [q][N][C/q] = this
 * rank's rows (batch block (k, i)) gathered along the row; wf [q][Vb][C/q] =
 * vocabulary block j, from the transposed block wte[V-blk j, C-blk i]
 * (swapped with p(j, i)) gathered down the column. */
static int head_gather(const pt_lenv *e, const pt_geom *g, const void *x, const void *wte, void **xa, void **wf)
{
    pt_pctx *c = e->c;
    const int q = Q(c), N = g->Bl * g->T, Cl = g->Cr, Vb = g->Vp / q;
    const pt_dtype at = e->ops->act;
    const size_t nw = (size_t)Vb * Cl;
    *wf = NULL;
    *xa = pt_scratch_t(e->arena, (size_t)q * N * Cl, at, "head gathered X");
    void *wt = *xa ? pt_scratch_t(e->arena, nw, at, "head W^T") : NULL;
    *wf = wt ? pt_scratch_t(e->arena, (size_t)q * nw, at, "head gathered W") : NULL;
    int rc = *wf ? PT_OK : PT_ENOMEM;
    if (!rc) rc = pt_allgather_t(ROWG(c), x, *xa, (size_t)q * N * Cl, at);
    if (!rc) rc = transpose_block(e, wte, wt, nw, at);
    if (!rc) rc = pt_allgather_t(COLG(c), wt, *wf, (size_t)q * nw, at);
    pt_arena_free(e->arena, wt);
    if (rc) {
        pt_arena_free(e->arena, *wf);
        pt_arena_free(e->arena, *xa);
        *xa = *wf = NULL;
    }
    return rc;
}

static int head_fwd(const pt_lenv *e, const pt_geom *g, float *losses, float *stats, const void *x, const void *wte,
                    const int32_t *tgt)
{
    pt_pctx *c = e->c;
    const int q = Q(c), N = g->Bl * g->T, Vb = g->Vp / q;
    void *xa, *wf;
    int rc = head_gather(e, g, x, wte, &xa, &wf);
    if (!rc)
        rc = pt_classifier_fwd(ROWG(c), e->ops, e->arena, losses, stats, xa, wf, tgt + row0(c, g), CJ(c) * Vb, g->V, N,
                               q * g->Cr, Vb, q);
    pt_arena_free(e->arena, wf);
    pt_arena_free(e->arena, xa);
    return rc;
}

/* dX: the pieces [q][N][C/q] summed over the row (the vocabulary blocks)
 * and scattered by hidden block; dW: [q][Vb][C/q] summed down the column
 * (the batch blocks), piece i = the gradient of wte[V-blk j, C-blk i],
 * swapped back to p(j, i), its owner. */
static int head_bwd(const pt_lenv *e, const pt_geom *g, void *dx, float *dwte, const float *stats, const void *x,
                    const void *wte, const int32_t *tgt, const float *dloss)
{
    pt_pctx *c = e->c;
    const int q = Q(c), N = g->Bl * g->T, Cl = g->Cr, Vb = g->Vp / q;
    const pt_dtype at = e->ops->act;
    const size_t nw = (size_t)Vb * Cl, nxa = (size_t)q * N * Cl;
    void *xa, *wf;
    int rc = head_gather(e, g, x, wte, &xa, &wf);
    void *dxa = rc ? NULL : pt_scratch_t(e->arena, nxa, at, "head dX pieces");
    float *dwf = dxa ? pt_scratch(e->arena, (size_t)q * nw, "head dW pieces") : NULL;
    if (!rc && !dwf) rc = PT_ENOMEM;
    if (!rc) {
        e->ops->zero(dxa, nxa, at);
        e->ops->zero(dwf, (size_t)q * nw, PT_F32);
        rc = pt_classifier_bwd(e->ops, e->arena, dxa, dwf, stats, xa, wf, tgt + row0(c, g), dloss, CJ(c) * Vb, g->V, N,
                               q * Cl, Vb, q);
    }
    pt_arena_free(e->arena, wf);
    pt_arena_free(e->arena, xa);
    if (!rc) rc = pt_reduce_scatter_sum_t(ROWG(c), dxa, dx, nxa, at);
    pt_arena_free(e->arena, dxa);
    float *dwt = rc ? NULL : pt_scratch(e->arena, nw, "head dW^T");
    if (!rc && !dwt) rc = PT_ENOMEM;
    if (!rc) rc = pt_reduce_scatter_sum(COLG(c), dwf, dwt, (size_t)q * nw);
    pt_arena_free(e->arena, dwf);
    float *mine = rc ? NULL : pt_scratch(e->arena, nw, "head dW");
    if (!rc && !mine) rc = PT_ENOMEM;
    if (!rc) rc = transpose_block(e, dwt, mine, nw, PT_F32);
    if (!rc) e->ops->axpy(dwte, 1.0, mine, nw, PT_F32);
    pt_arena_free(e->arena, mine);
    pt_arena_free(e->arena, dwt);
    return rc;
}

const pt_layout pt_layout_2d = {
    .name = "2d",
    .geometry = geometry,
    .param = param,
    .param_slice = param_slice,
    .linear_fwd = lin_fwd,
    .linear_bwd = lin_bwd,
    .embed_fwd = emb_fwd,
    .embed_bwd = emb_bwd,
    .head_fwd = head_fwd,
    .head_bwd = head_bwd,
};
