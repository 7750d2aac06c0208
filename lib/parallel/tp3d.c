/* SPDX-License-Identifier: MIT */
/* 3D tensor parallelism (Bian et al. 2021, "Maximizing Parallelism in
 * Distributed Training for Huge Neural Networks", section 3; the layout
 * of Colossal-AI's parallel_3d).
 *
 * Grid: tp = l*l*l ranks p(i, j, k) (context axes 0, 1, 2).  Axis groups:
 * I = tp_sub[1] (varying i), J = tp_sub[2] (varying j), K = tp_sub[4]
 * (varying k); a rank's index in each is its coordinate on that axis.
 * The batch is split into l*l sub-blocks of Bl = B/l^2 sequences, sub-block
 * (a, b) being sequences (a*l + b)*Bl ... (a*l + b + 1)*Bl - 1, so batch
 * block a (l*Bl sequences) is the sub-blocks (a, 0..l-1) in order.
 *   layout A (residual side: embedding output, residual stream, LayerNorm,
 *            head input): p(i,j,k) holds sub-block (i, k), hidden block j;
 *   layout B (inner side: attention heads, MLP hidden units): sub-block
 *            (i, j), hidden block k (NH/l whole heads of q, k and v).
 * Column linears (qkv, fc) go A -> B, row linears (proj, fcproj) B -> A.
 *
 * Linear A -> B, Y = X W^T with full W [O, I]: p(i,j,k) holds W[O-block k,
 * I-block j] (for qkv the O blocks are whole heads of q|k|v), of which
 * the row piece i of l: [O/l^2, I/l].  Forward: allgather X over K ->
 * [l*N, I/l] = batch block i (allgather's rank-order concatenation is the
 * sub-block order), allgather W over I -> [O/l, I/l], Yp = Xg Wg^T
 * [l*N, O/l] is the partial sum over input block j, reduce-scatter over
 * J -> Y [N, O/l] = sub-block (i, j), output block k: layout B.  Bias
 * block k is held on every (i, j) and added after the reduce-scatter.
 * Backward: allgather W over I and dY over J -> [l*N, O/l]; dXp = dYg Wg
 * reduce-scattered over K -> dX (sub-block (i, k), block j); allgather X
 * over K again; dWp = dYg^T Xg (batch block i's share) reduce-scattered
 * over I -> this rank's piece of dW; db = column sums of the local dY.
 * Linear B -> A is the same with the roles of J and K swapped: X gathered
 * over J, Y reduce-scattered over K, W[O-block j, I-block k] piece i,
 * bias block j.
 *
 * Memory: the backward gathers X and W again instead of keeping the l
 * times larger gathered blocks alive from forward to backward (they would
 * be l*N*I/l + O*I/l^2 floats per linear and layer held for the whole
 * step).  Scratch at most: forward Xg + Wg + Yp, backward Xg (first as
 * dXp) + Wg (then dWp) + dYg + one local W block.
 *
 * Communication per linear and rank, counted as comm.h's ring model, with
 * the GATHERED block sizes Sx = [l*N, I/l], Sw = [O/l, I/l], Sy = [l*N,
 * O/l] in bytes (N = Bl*T local rows):
 *   forward   AG X, AG W, RS Y                  (l-1)/l (Sx + Sw + Sy)
 *   backward  AG W, AG dY, RS dX, AG X, RS dW   (l-1)/l (2Sx + 2Sw + Sy)
 *   total                                       (l-1)/l (3Sx + 3Sw + 2Sy)
 * against Table 1's 2(l-1)/l (Sx + Sw + Sy) (Bian et al. 2021): the extra
 * (l-1)/l (Sx + Sw) is the backward's re-gather of X and W, the price of
 * the memory saving above.  X and Y travel over I's complementary axes
 * (J/K), W always over I.
 *
 * Parameters: linear weights and wte are unique per rank (gradient summed
 * over dp x sp only: sync[0]); the bias of an A -> B linear (block k) is
 * replicated over (i, j): sync[I|J]; the bias of a B -> A linear, the
 * LayerNorm vectors and the position embedding ([Tmax, C/l], hidden block
 * j) are replicated over (i, k): sync[I|K].
 *
 * Embedding: wte [Vp, C] (Vp = V padded to a multiple of l^2) is stored
 * like an A -> B weight with O = Vp: p(i,j,k) holds vocabulary block k,
 * piece i, hidden block j ([Vp/l^2, C/l]).  Forward: allgather it over I
 * -> [Vp/l, C/l]; look up all l*Bl sequences of batch block i, rows of
 * tokens outside vocabulary block k being zero; reduce-scatter over K ->
 * sub-block (i, k), hidden j (layout A).  Per rank (l-1)/l (Se + Swte)
 * with Se = [l*N, C/l], Swte = [Vp/l, C/l] bytes.  Backward: allgather
 * dout over K, scatter-add into a zeroed [Vp/l, C/l] block, reduce-scatter
 * over I into this rank's piece: the same (l-1)/l (Se + Swte).
 * Vocabulary head (the fused classifier, ops.h: no [N, Vp/l] logits): rank
 * p(i,j,k) takes the layout-B rows, sub-block (i, j), against vocabulary
 * block k, each with the full width C.  The rows: X allgathered over K
 * (batch block i, hidden j) and exchanged over J (an all-to-all of l-1
 * sendrecvs of [N, C/l]: rank j' sends rank j the rows (i, j) of its hidden
 * block j'); vocabulary block k: wte allgathered over I ([Vp/l, C/l]) and
 * over J ([l][Vp/l][C/l]).  The cross-entropy reduces over K (rows' max [N]
 * and (sum, target) [2N] allreduces), and the k = 0 rank of each row owns
 * its loss.  The backward gathers both again, exchanges the dX pieces back
 * over J and reduce-scatters them over K (layout A), and reduce-scatters
 * dW over J and then I into the rank's piece.  Per rank, with Sx = [N,
 * C/l] and Sw = [Vp/l, C/l] in bytes: forward (l-1)(2 Sx + (l+1)/l Sw),
 * backward twice that (lib/plan/cost.c counts the same calls); the price
 * of never holding [N, Vp/l] logits is the vocabulary block's full width
 * [Vp/l, C] as scratch.
 *
 * Epilogues: a linear's bias and GELU come after its reduce-scatter
 * (ops->epilogue_fwd), DGELU_BGRAD after the reduce-scatter of dX.
 */
#include "parallel/layout.h"
#include "shape/shape.h"

#include <stdio.h>
#include <string.h>

enum { AX_I = 1, AX_J = 2, AX_K = 4 }; /* masks of context axes 0, 1, 2 */

#define IG(c) (&(c)->tp_sub[AX_I])
#define JG(c) (&(c)->tp_sub[AX_J])
#define KG(c) (&(c)->tp_sub[AX_K])
#define CI(c) ((c)->tp_coord[0])
#define CJ(c) ((c)->tp_coord[1])
#define CK(c) ((c)->tp_coord[2])
#define LL(c) ((c)->tp_dims[0])

static int geometry(const pt_pctx *c, int B, int T, int C, int NH, int V, pt_geom *g)
{
    int rc = pt_geom_shape(c, pt_shape_3d, B, T, C, NH, V, g);
    if (rc) return rc;
    g->loss_owner = CK(c) == 0;
    g->norm = (pt_comm *)JG(c); /* layout A splits the hidden columns over j */
    return PT_OK;
}

static void param(pt_pctx *c, pt_pclass cls, int64_t rows, int64_t cols, pt_pshard *s)
{
    const int64_t l = LL(c);
    switch (cls) {
    case PT_P_WTE: case PT_P_QKV_W: case PT_P_PROJ_W: case PT_P_FC_W: case PT_P_FCPROJ_W:
        s->numel = rows * cols / (l * l * l);
        s->sync = &c->sync[0];
        break;
    case PT_P_QKV_B: case PT_P_FC_B: /* block k on every (i, j) */
        s->numel = rows * cols / l;
        s->sync = &c->sync[AX_I | AX_J];
        break;
    default: /* row-linear biases, LayerNorm, wpe: block j on every (i, k) */
        s->numel = rows * cols / l;
        s->sync = &c->sync[AX_I | AX_K];
        break;
    }
    s->norm_owner = s->sync->rank == 0;
}

static void param_slice(const pt_ops *ops, const pt_pctx *c, pt_pclass cls, const float *full, float *local,
                        int64_t rows, int64_t cols)
{
    const int l = LL(c), i = CI(c), j = CJ(c), k = CK(c);
    const int qkv = pt_pclass_stacked(cls);
    switch (cls) {
    case PT_P_WTE: case PT_P_QKV_W: case PT_P_FC_W: /* [O-blk k piece i, I-blk j] */
        pt_block_copy(ops, full, local, rows, cols, l, k, qkv, l, i, l, j);
        break;
    case PT_P_PROJ_W: case PT_P_FCPROJ_W: /* [O-blk j piece i, I-blk k] */
        pt_block_copy(ops, full, local, rows, cols, l, j, 0, l, i, l, k);
        break;
    case PT_P_QKV_B: case PT_P_FC_B: /* block k */
        pt_block_copy(ops, full, local, rows, cols, l, k, qkv, 1, 0, 1, 0);
        break;
    case PT_P_WPE: /* [T, C-blk j] */
        pt_block_copy(ops, full, local, rows, cols, 1, 0, 0, 1, 0, l, j);
        break;
    default: /* row-linear biases, LayerNorm: block j */
        pt_block_copy(ops, full, local, rows, cols, l, j, 0, 1, 0, 1, 0);
        break;
    }
}

/* y [N, Ol] = epi(x [N, Il] W^T + b) with W gathered over I from the local
 * [Ol/l, Il] pieces, x gathered over gx and the partial product
 * reduce-scattered over gy; the bias and epilogue after the reduce-scatter
 * (ops->epilogue_fwd; aux: GELU's input). */
static int lin3_fwd(const pt_lenv *e, pt_comm *gx, pt_comm *gy, const void *w, const void *b, void *y,
                    void *aux, const void *x, int N, int Il, int Ol, int epi)
{
    pt_pctx *c = e->c;
    const int l = LL(c), lN = l * N;
    const pt_dtype at = e->ops->act;
    const size_t nx = (size_t)lN * Il, nw = (size_t)Ol * Il, ny = (size_t)lN * Ol;
    void *xg = pt_scratch_t(e->arena, nx, at, "3D gathered X");
    void *wg = xg ? pt_scratch_t(e->arena, nw, at, "3D gathered W") : NULL;
    void *yp = wg ? pt_scratch_t(e->arena, ny, at, "3D partial Y") : NULL;
    int rc = yp ? PT_OK : PT_ENOMEM;
    if (!rc) rc = pt_allgather_t(gx, x, xg, nx, at);
    if (!rc) rc = pt_allgather_t(IG(c), w, wg, nw, at);
    if (!rc) {
        e->ops->matmul_fwd(yp, NULL, xg, wg, NULL, 0.0, lN, Il, Ol, PT_EPI_DEFAULT);
        rc = pt_reduce_scatter_sum_t(gy, yp, y, ny, at);
    }
    if (!rc && (b || epi != PT_EPI_DEFAULT)) e->ops->epilogue_fwd(y, aux, b, N, Ol, epi);
    pt_arena_free(e->arena, yp);
    pt_arena_free(e->arena, wg);
    pt_arena_free(e->arena, xg);
    return rc;
}

/* dx [N, Il] (overwritten), dw [Ol/l, Il] (+=), db [Ol] (+=) from dy
 * [N, Ol]: the backward of lin3_fwd with the same groups; epi PT_EPI_DGELU
 * applies DGELU_BGRAD to dx after its reduce-scatter (aux [N, Il],
 * dbias_aux [Il]). */
static int lin3_bwd(const pt_lenv *e, pt_comm *gx, pt_comm *gy, const void *w, float *dw, float *db, void *dx,
                    const void *dy, const void *x, int N, int Il, int Ol, int epi, const void *aux,
                    float *dbias_aux)
{
    pt_pctx *c = e->c;
    const int l = LL(c), lN = l * N;
    const pt_dtype at = e->ops->act;
    const size_t nx = (size_t)lN * Il, nw = (size_t)Ol * Il, ny = (size_t)lN * Ol, nwl = nw / (size_t)l;
    /* wg holds the gathered W (ACT), then the fp32 dW partial: sized for fp32 */
    void *xg = pt_scratch_t(e->arena, nx, at, "3D gathered X / dX partial");
    void *wg = xg ? pt_scratch(e->arena, nw, "3D gathered W / dW partial") : NULL;
    void *dyg = wg ? pt_scratch_t(e->arena, ny, at, "3D gathered dY") : NULL;
    float *dwl = dyg ? pt_scratch(e->arena, nwl, "3D dW piece") : NULL;
    int rc = dwl ? PT_OK : PT_ENOMEM;
    if (!rc) rc = pt_allgather_t(IG(c), w, wg, nw, at);
    if (!rc) rc = pt_allgather_t(gy, dy, dyg, ny, at);
    if (!rc) { /* dXp = dYg Wg, summed over the output blocks held along gx */
        e->ops->zero(xg, nx, at);
        e->ops->matmul_bwd(xg, NULL, NULL, dyg, NULL, wg, lN, Il, Ol, PT_EPI_DEFAULT, NULL, NULL);
        rc = pt_reduce_scatter_sum_t(gx, xg, dx, nx, at);
    }
    if (!rc && epi == PT_EPI_DGELU) e->ops->epilogue_bwd(dx, dbias_aux, aux, N, Il);
    if (!rc) rc = pt_allgather_t(gx, x, xg, nx, at);
    if (!rc) { /* dWp = dYg^T Xg for batch block i, summed over the batch blocks along I */
        e->ops->zero(wg, nw, PT_F32);
        e->ops->matmul_bwd(NULL, wg, NULL, dyg, xg, NULL, lN, Il, Ol, PT_EPI_DEFAULT, NULL, NULL);
        rc = pt_reduce_scatter_sum(IG(c), wg, dwl, nw);
    }
    if (!rc) {
        e->ops->axpy(dw, 1.0, dwl, nwl, PT_F32);
        if (db) e->ops->bias_bwd(db, dy, N, Ol);
    }
    pt_arena_free(e->arena, dwl);
    pt_arena_free(e->arena, dyg);
    pt_arena_free(e->arena, wg);
    pt_arena_free(e->arena, xg);
    return rc;
}

static int lin_fwd(const pt_lenv *e, const pt_linear *l, void *y, void *aux, const void *x, int N, int epi)
{
    pt_pctx *c = e->c;
    if (l->role == PT_LINEAR_ROW) /* B -> A */
        return lin3_fwd(e, JG(c), KG(c), l->w, l->b, y, aux, x, N, l->in_local, l->out_local, epi);
    return lin3_fwd(e, KG(c), JG(c), l->w, l->b, y, aux, x, N, l->in_local, l->out_local, epi);
}

static int lin_bwd(const pt_lenv *e, const pt_linear *l, void *dx, const void *dy, const void *x, int N, int epi,
                   const void *aux, float *dbias_aux)
{
    pt_pctx *c = e->c;
    if (l->role == PT_LINEAR_ROW)
        return lin3_bwd(e, JG(c), KG(c), l->w, l->dw, l->db, dx, dy, x, N, l->in_local, l->out_local, epi, aux,
                        dbias_aux);
    return lin3_bwd(e, KG(c), JG(c), l->w, l->dw, l->db, dx, dy, x, N, l->in_local, l->out_local, epi, aux, dbias_aux);
}

/* First token of batch block i (sub-blocks (i, 0..l-1)) in the dp-group batch [B, T]. */
static size_t block0(const pt_pctx *c, const pt_geom *g)
{
    return (size_t)CI(c) * LL(c) * g->Bl * g->T;
}

/* First token of the layout-B rows, sub-block (i, j). */
static size_t rowsB0(const pt_pctx *c, const pt_geom *g)
{
    return (size_t)(CI(c) * LL(c) + CJ(c)) * g->Bl * g->T;
}

static int emb_fwd(const pt_lenv *e, const pt_geom *g, void *out, const int32_t *tok, const void *wte)
{
    pt_pctx *c = e->c;
    const int l = LL(c), lN = l * g->Bl * g->T, Cl = g->Cr, Vb = g->Vp / l;
    const pt_dtype at = e->ops->act;
    const size_t nw = (size_t)Vb * Cl, np = (size_t)lN * Cl;
    void *wb = pt_scratch_t(e->arena, nw, at, "embedding W");
    void *part = wb ? pt_scratch_t(e->arena, np, at, "embedding partial") : NULL;
    int rc = part ? PT_OK : PT_ENOMEM;
    if (!rc) rc = pt_allgather_t(IG(c), wte, wb, nw, at);
    if (!rc) {
        e->ops->embedding_fwd(part, tok + block0(c, g), wb, CK(c) * Vb, Vb, lN, Cl);
        rc = pt_reduce_scatter_sum_t(KG(c), part, out, np, at);
    }
    pt_arena_free(e->arena, part);
    pt_arena_free(e->arena, wb);
    return rc;
}

static int emb_bwd(const pt_lenv *e, const pt_geom *g, float *dwte, const void *dout, const int32_t *tok)
{
    pt_pctx *c = e->c;
    const int l = LL(c), lN = l * g->Bl * g->T, Cl = g->Cr, Vb = g->Vp / l;
    const pt_dtype at = e->ops->act;
    const size_t nw = (size_t)Vb * Cl, np = (size_t)lN * Cl, nwl = nw / (size_t)l;
    void *dg = pt_scratch_t(e->arena, np, at, "embedding gathered dout");
    float *wb = dg ? pt_scratch(e->arena, nw, "embedding dW block") : NULL;
    float *dwl = wb ? pt_scratch(e->arena, nwl, "embedding dW piece") : NULL;
    int rc = dwl ? PT_OK : PT_ENOMEM;
    if (!rc) rc = pt_allgather_t(KG(c), dout, dg, np, at);
    if (!rc) {
        e->ops->zero(wb, nw, PT_F32);
        e->ops->embedding_bwd(wb, dg, tok + block0(c, g), CK(c) * Vb, Vb, lN, Cl);
        rc = pt_reduce_scatter_sum(IG(c), wb, dwl, nw);
    }
    if (!rc) e->ops->axpy(dwte, 1.0, dwl, nwl, PT_F32);
    pt_arena_free(e->arena, dwl);
    pt_arena_free(e->arena, wb);
    pt_arena_free(e->arena, dg);
    return rc;
}

/* Blocks [l][N][Cr] exchanged over J (an all-to-all of l-1 pairwise
 * sendrecvs): out[j'] = block j of rank j' (out[j] = in[j]), where j is
 * this rank's J coordinate; step d sends in[j+d] to j+d and receives from
 * j-d (mod l), so every pair meets in the same step. */
static int alltoall_j(const pt_lenv *e, const void *in, void *out, size_t blk, int tag)
{
    pt_pctx *c = e->c;
    const int l = LL(c), j = CJ(c);
    const pt_dtype at = e->ops->act;
    e->ops->copy(pt_elem(out, (size_t)j * blk, at), pt_elem(in, (size_t)j * blk, at), blk, at);
    int rc = PT_OK;
    for (int d = 1; d < l && !rc; d++) {
        const int dst = (j + d) % l, src = (j - d + l) % l;
        rc = pt_sendrecv_t(JG(c), pt_elem(in, (size_t)dst * blk, at), dst, pt_elem(out, (size_t)src * blk, at), src,
                           blk, tag, at);
    }
    return rc;
}

/* The head's operands with the full width C (ks = l column pieces,
 * ops.h's classifier): xa [l][N][C/l] = the layout-B rows (sub-block (i,
 * j)) with every hidden block: X gathered over K (batch block i, hidden j)
 * then exchanged over J; wf [l][Vl][C/l] = vocabulary block k with every
 * hidden block: wte gathered over I (all pieces), then over J. */
static int head_gather(const pt_lenv *e, const pt_geom *g, const void *x, const void *wte, void **xa, void **wf)
{
    pt_pctx *c = e->c;
    const int l = LL(c), N = g->Bl * g->T, Cl = g->Cr;
    const pt_dtype at = e->ops->act;
    const size_t nx = (size_t)N * Cl, nw = (size_t)g->Vl * Cl;
    *wf = NULL;
    *xa = pt_scratch_t(e->arena, (size_t)l * nx, at, "head rows X");
    void *xg = *xa ? pt_scratch_t(e->arena, (size_t)l * nx, at, "head gathered X") : NULL;
    int rc = xg ? PT_OK : PT_ENOMEM;
    if (!rc) rc = pt_allgather_t(KG(c), x, xg, (size_t)l * nx, at);
    if (!rc) rc = alltoall_j(e, xg, *xa, nx, 78);
    pt_arena_free(e->arena, xg);
    void *wg = rc ? NULL : pt_scratch_t(e->arena, nw, at, "head gathered W");
    *wf = wg ? pt_scratch_t(e->arena, (size_t)l * nw, at, "head full-width W") : NULL;
    if (!rc && !*wf) rc = PT_ENOMEM;
    if (!rc) rc = pt_allgather_t(IG(c), wte, wg, nw, at);
    if (!rc) rc = pt_allgather_t(JG(c), wg, *wf, (size_t)l * nw, at);
    pt_arena_free(e->arena, wg);
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
    const int l = LL(c), N = g->Bl * g->T;
    void *xa, *wf;
    int rc = head_gather(e, g, x, wte, &xa, &wf);
    if (!rc)
        rc = pt_classifier_fwd(KG(c), e->ops, e->arena, losses, stats, xa, wf, tgt + rowsB0(c, g), CK(c) * g->Vl, g->V,
                               N, l * g->Cr, g->Vl, l);
    pt_arena_free(e->arena, wf);
    pt_arena_free(e->arena, xa);
    return rc;
}

/* dX: the pieces exchanged back over J (rows (i, *), hidden j) and
 * reduce-scattered over K (summed over the vocabulary blocks, rows (i, k):
 * layout A); dW [l][Vl][C/l]: reduce-scattered over J (hidden j, summed
 * over the rows (i, *)) and over I (piece i, summed over batch blocks). */
static int head_bwd(const pt_lenv *e, const pt_geom *g, void *dx, float *dwte, const float *stats, const void *x,
                    const void *wte, const int32_t *tgt, const float *dloss)
{
    pt_pctx *c = e->c;
    const int l = LL(c), N = g->Bl * g->T, Cl = g->Cr;
    const pt_dtype at = e->ops->act;
    const size_t nx = (size_t)N * Cl, nw = (size_t)g->Vl * Cl;
    void *xa, *wf;
    int rc = head_gather(e, g, x, wte, &xa, &wf);
    void *dxa = rc ? NULL : pt_scratch_t(e->arena, (size_t)l * nx, at, "head dX pieces");
    float *dwf = dxa ? pt_scratch(e->arena, (size_t)l * nw, "head dW pieces") : NULL;
    if (!rc && !dwf) rc = PT_ENOMEM;
    if (!rc) {
        e->ops->zero(dxa, (size_t)l * nx, at);
        e->ops->zero(dwf, (size_t)l * nw, PT_F32);
        rc = pt_classifier_bwd(e->ops, e->arena, dxa, dwf, stats, xa, wf, tgt + rowsB0(c, g), dloss, CK(c) * g->Vl,
                               g->V, N, l * Cl, g->Vl, l);
    }
    pt_arena_free(e->arena, wf);
    void *dxg = xa; /* xa is no longer needed: it takes the exchanged pieces */
    if (!rc) rc = alltoall_j(e, dxa, dxg, nx, 79);
    pt_arena_free(e->arena, dxa);
    if (!rc) rc = pt_reduce_scatter_sum_t(KG(c), dxg, dx, (size_t)l * nx, at);
    pt_arena_free(e->arena, xa);
    float *dwg = rc ? NULL : pt_scratch(e->arena, nw, "head dW block");
    if (!rc && !dwg) rc = PT_ENOMEM;
    if (!rc) rc = pt_reduce_scatter_sum(JG(c), dwf, dwg, (size_t)l * nw);
    pt_arena_free(e->arena, dwf);
    float *dwl = rc ? NULL : pt_scratch(e->arena, nw / (size_t)l, "head dW piece");
    if (!rc && !dwl) rc = PT_ENOMEM;
    if (!rc) rc = pt_reduce_scatter_sum(IG(c), dwg, dwl, nw);
    if (!rc) e->ops->axpy(dwte, 1.0, dwl, nw / (size_t)l, PT_F32);
    pt_arena_free(e->arena, dwl);
    pt_arena_free(e->arena, dwg);
    return rc;
}

const pt_layout pt_layout_3d = {
    .name = "3d",
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
