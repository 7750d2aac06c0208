/* SPDX-License-Identifier: MIT */
/* 1D tensor parallelism (Megatron-LM: Shoeybi et al. 2019, "Megatron-LM:
 * Training Multi-Billion Parameter Language Models Using Model
 * Parallelism", section 3).
 *
 * Activations between layers are replicated over the tp group.  A column
 * layer splits W's output rows: forward needs no communication (the "f"
 * operator is the identity), backward allreduces dX.  A row layer splits
 * W's input columns: forward allreduces the partial sums of Y (the "g"
 * operator), backward needs none.  The embedding and the tied head split
 * the vocabulary: the embedding allreduces its output, the cross-entropy
 * allreduces the row max and the (sum of exp, target logit) pairs, and the
 * head allreduces dX like a column layer.  The head is the fused classifier
 * over the rank's vocabulary shard (lib/parallel/tp_common.c): the logits
 * exist one block of columns at a time.  Epilogues (bias, GELU) run inside
 * a column linear's GEMM; a row linear's bias comes after its allreduce,
 * and its backward's dX GEMM carries the DGELU of the column linear before.
 */
#include "parallel/layout.h"
#include "shape/shape.h"
#include "core/core.h"

#include <stdio.h>
#include <string.h>

/* Helpers: ranks whose copy of a parameter counts in the gradient norm. */
static int first_of_sync(const pt_pctx *c) { return c->sync[0].rank == 0; }

static int geometry(const pt_pctx *c, int B, int T, int C, int NH, int V, pt_geom *g)
{
    int rc = pt_geom_shape(c, pt_shape_1d, B, T, C, NH, V, g);
    if (rc) return rc;
    g->loss_owner = c->tp_rank == 0;
    g->norm = (pt_comm *)&c->tp_sub[0]; /* rows are whole: LayerNorm is local */
    return PT_OK;
}

/* Megatron's shards: column layers split W's output rows (qkv per q|k|v
 * block), row layers split W's input columns, the embedding splits the
 * vocabulary; LayerNorm, position embedding and row-layer biases are
 * replicated over tp (every tp rank computes the same full gradient, so
 * only dp x sp sums them and only tp rank 0 counts them in the norm). */
static void param(pt_pctx *c, pt_pclass cls, int64_t rows, int64_t cols, pt_pshard *s)
{
    const int tp = c->plan.tp;
    int split = 1;
    switch (cls) {
    case PT_P_WTE: case PT_P_QKV_W: case PT_P_QKV_B: case PT_P_FC_W: case PT_P_FC_B:
    case PT_P_PROJ_W: case PT_P_FCPROJ_W: case PT_P_COL2_W: case PT_P_COL2_B:
        split = tp;
        break;
    default:
        break;
    }
    s->numel = rows * cols / split;
    s->sync = &c->sync[0];
    s->norm_owner = first_of_sync(c) && (split > 1 || c->tp_rank == 0);
}

static void param_slice(const pt_ops *ops, const pt_pctx *c, pt_pclass cls, const float *full, float *local,
                        int64_t rows, int64_t cols)
{
    const int tp = c->plan.tp, r = c->tp_rank;
    switch (cls) {
    case PT_P_WTE: case PT_P_FC_W: case PT_P_FC_B:
        pt_block_copy(ops, full, local, rows, cols, tp, r, 0, 1, 0, 1, 0);
        break;
    case PT_P_QKV_W: case PT_P_QKV_B: case PT_P_COL2_W: case PT_P_COL2_B:
        pt_block_copy(ops, full, local, rows, cols, tp, r, pt_pclass_stacked(cls), 1, 0, 1, 0);
        break;
    case PT_P_PROJ_W: case PT_P_FCPROJ_W:
        pt_block_copy(ops, full, local, rows, cols, 1, 0, 0, 1, 0, tp, r);
        break;
    default:
        ops->copy2d(local, 0, full, 0, sizeof(float) * (size_t)(rows * cols), 1);
        break;
    }
}

static int lin_fwd(const pt_lenv *e, const pt_linear *l, void *y, void *aux, const void *x, int N, int epi)
{
    pt_pctx *c = e->c;
    const pt_ops *ops = e->ops;
    if (l->role == PT_LINEAR_ROW) { /* the allreduce sits between the GEMM and its epilogue */
        ops->matmul_fwd(y, NULL, x, l->w, NULL, 0.0, N, l->in_local, l->out, PT_EPI_DEFAULT);
        int rc = pt_allreduce_sum_t(&c->tp, y, (size_t)N * l->out, ops->act);
        if (rc) return rc;
        if (l->b || epi != PT_EPI_DEFAULT) ops->epilogue_fwd(y, aux, l->b, N, l->out, epi);
        return PT_OK;
    }
    ops->matmul_fwd(y, aux, x, l->w, l->b, 0.0, N, l->in, l->out_local, epi);
    return PT_OK;
}

static int lin_bwd(const pt_lenv *e, const pt_linear *l, void *dx, const void *dy, const void *x, int N, int epi,
                   const void *aux, float *dbias_aux)
{
    pt_pctx *c = e->c;
    const pt_ops *ops = e->ops;
    if (l->role == PT_LINEAR_ROW) { /* dX is local: DGELU(_BGRAD) runs in the dX GEMM */
        if (dx && epi != PT_EPI_DGELU) ops->zero(dx, (size_t)N * l->in_local, ops->act);
        ops->matmul_bwd(dx, l->dw, l->db, dy, x, l->w, N, l->in_local, l->out, dx ? epi : PT_EPI_DEFAULT, aux,
                        dbias_aux);
        return PT_OK;
    }
    if (dx) ops->zero(dx, (size_t)N * l->in, ops->act);
    ops->matmul_bwd(dx, l->dw, l->db, dy, x, l->w, N, l->in, l->out_local, PT_EPI_DEFAULT, NULL, NULL);
    int rc = dx ? pt_allreduce_sum_t(&c->tp, dx, (size_t)N * l->in, ops->act) : PT_OK;
    if (!rc && dx && epi == PT_EPI_DGELU) ops->epilogue_bwd(dx, dbias_aux, aux, N, l->in);
    return rc;
}

static int emb_fwd(const pt_lenv *e, const pt_geom *g, void *out, const int32_t *tok, const void *wte)
{
    const int N = g->B * g->T;
    e->ops->embedding_fwd(out, tok, wte, e->c->tp_rank * g->Vl, g->Vl, N, g->Cr);
    return pt_allreduce_sum_t(&e->c->tp, out, (size_t)N * g->Cr, e->ops->act);
}

static int emb_bwd(const pt_lenv *e, const pt_geom *g, float *dwte, const void *dout, const int32_t *tok)
{
    e->ops->embedding_bwd(dwte, dout, tok, e->c->tp_rank * g->Vl, g->Vl, g->B * g->T, g->Cr);
    return PT_OK;
}

static int head_fwd(const pt_lenv *e, const pt_geom *g, float *losses, float *stats, const void *x, const void *wte,
                    const int32_t *tgt)
{
    const int N = g->B * g->T;
    return pt_classifier_fwd(&e->c->tp, e->ops, e->arena, losses, stats, x, wte, tgt, e->c->tp_rank * g->Vl, g->V, N,
                             g->Cr, g->Vl, 1);
}

static int head_bwd(const pt_lenv *e, const pt_geom *g, void *dx, float *dwte, const float *stats, const void *x,
                    const void *wte, const int32_t *tgt, const float *dloss)
{
    const int N = g->B * g->T, C = g->Cr;
    e->ops->zero(dx, (size_t)N * C, e->ops->act);
    int rc = pt_classifier_bwd(e->ops, e->arena, dx, dwte, stats, x, wte, tgt, dloss, e->c->tp_rank * g->Vl, g->V, N,
                               C, g->Vl, 1);
    return rc ? rc : pt_allreduce_sum_t(&e->c->tp, dx, (size_t)N * C, e->ops->act);
}

static int head_step(const pt_lenv *e, const pt_geom *g, float *losses, float *stats, void *dx, float *dwte,
                     const void *x, const void *wte, const int32_t *tgt, const float *dloss)
{
    const int N = g->B * g->T, C = g->Cr;
    e->ops->zero(dx, (size_t)N * C, e->ops->act);
    int rc = pt_classifier_step(&e->c->tp, e->ops, e->arena, losses, stats, dx, dwte, x, wte, tgt, dloss,
                                e->c->tp_rank * g->Vl, g->V, N, C, g->Vl);
    return rc ? rc : pt_allreduce_sum_t(&e->c->tp, dx, (size_t)N * C, e->ops->act);
}

const pt_layout pt_layout_1d = {
    .name = "1d",
    .geometry = geometry,
    .param = param,
    .param_slice = param_slice,
    .linear_fwd = lin_fwd,
    .linear_bwd = lin_bwd,
    .embed_fwd = emb_fwd,
    .embed_bwd = emb_bwd,
    .head_fwd = head_fwd,
    .head_bwd = head_bwd,
    .head_step = head_step,
};
