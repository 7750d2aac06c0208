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
 * head allreduces dX like a column layer.
 */
#include "parallel/layout.h"
#include "core/core.h"

#include <math.h>
#include <string.h>

void pt_shard_copy(pt_shard_kind kind, const float *full, float *local, int64_t rows, int64_t cols,
                   int r, int p)
{
    switch (kind) {
    case PT_SHARD_REPLICATED:
        memcpy(local, full, sizeof(float) * (size_t)(rows * cols));
        break;
    case PT_SHARD_ROWS: {
        int64_t rl = rows / p;
        memcpy(local, full + r * rl * cols, sizeof(float) * (size_t)(rl * cols));
        break;
    }
    case PT_SHARD_ROWS3: {
        int64_t blk = rows / 3, rl = blk / p;
        for (int k = 0; k < 3; k++)
            memcpy(local + k * rl * cols, full + (k * blk + r * rl) * cols, sizeof(float) * (size_t)(rl * cols));
        break;
    }
    case PT_SHARD_COLS: {
        int64_t cl = cols / p;
        for (int64_t i = 0; i < rows; i++)
            memcpy(local + i * cl, full + i * cols + r * cl, sizeof(float) * (size_t)cl);
        break;
    }
    }
}

static pt_shard_kind w1d(pt_linear_role role)
{
    switch (role) {
    case PT_LINEAR_COLUMN: return PT_SHARD_ROWS;
    case PT_LINEAR_COLUMN_QKV: return PT_SHARD_ROWS3;
    default: return PT_SHARD_COLS;
    }
}

static pt_shard_kind b1d(pt_linear_role role)
{
    switch (role) {
    case PT_LINEAR_COLUMN: return PT_SHARD_ROWS;
    case PT_LINEAR_COLUMN_QKV: return PT_SHARD_ROWS3;
    default: return PT_SHARD_REPLICATED;
    }
}

static int lin_fwd(pt_pctx *c, const pt_ops_f32 *ops, const pt_linear *l, float *y, const float *x, int N)
{
    if (l->role == PT_LINEAR_ROW) {
        ops->matmul_fwd(y, x, l->w, NULL, N, l->in_local, l->out);
        int rc = pt_allreduce_sum(&c->tp, y, (size_t)N * l->out);
        if (rc) return rc;
        if (l->b) ops->bias_fwd(y, l->b, N, l->out);
        return PT_OK;
    }
    ops->matmul_fwd(y, x, l->w, l->b, N, l->in, l->out_local);
    return PT_OK;
}

static int lin_bwd(pt_pctx *c, const pt_ops_f32 *ops, const pt_linear *l, float *dx, const float *dy,
                   const float *x, int N)
{
    if (l->role == PT_LINEAR_ROW) {
        if (dx) memset(dx, 0, sizeof(float) * (size_t)N * l->in_local);
        ops->matmul_bwd(dx, l->dw, l->db, dy, x, l->w, N, l->in_local, l->out);
        return PT_OK;
    }
    if (dx) memset(dx, 0, sizeof(float) * (size_t)N * l->in);
    ops->matmul_bwd(dx, l->dw, l->db, dy, x, l->w, N, l->in, l->out_local);
    return dx ? pt_allreduce_sum(&c->tp, dx, (size_t)N * l->in) : PT_OK;
}

static int emb_fwd(pt_pctx *c, const pt_ops_f32 *ops, float *out, const int32_t *tok, const float *wte,
                   int Vl, int N, int C)
{
    ops->embedding_fwd(out, tok, wte, c->tp_rank * Vl, Vl, N, C);
    return pt_allreduce_sum(&c->tp, out, (size_t)N * C);
}

static int emb_bwd(pt_pctx *c, const pt_ops_f32 *ops, float *dwte, const float *dout, const int32_t *tok,
                   int Vl, int N, int C)
{
    ops->embedding_bwd(dwte, dout, tok, c->tp_rank * Vl, Vl, N, C);
    return PT_OK;
}

static int head_fwd(pt_pctx *c, const pt_ops_f32 *ops, float *logits, float *losses, float *stats,
                    const float *x, const float *wte, const int32_t *targets, int vreal, int Vl, int N,
                    int C)
{
    float *rowmax = stats, *sumexp = stats + N, *tgt = stats + 2 * N;
    int v0 = c->tp_rank * Vl;
    ops->matmul_fwd(logits, x, wte, NULL, N, C, Vl);
    ops->xent_max(rowmax, logits, v0, vreal, N, Vl);
    int rc = pt_allreduce_max(&c->tp, rowmax, (size_t)N);
    if (rc) return rc;
    ops->xent_sumexp(sumexp, tgt, logits, rowmax, targets, v0, vreal, N, Vl);
    rc = pt_allreduce_sum(&c->tp, sumexp, 2 * (size_t)N); /* sumexp and tgt are adjacent */
    if (rc) return rc;
    for (int n = 0; n < N; n++) losses[n] = logf(sumexp[n]) + rowmax[n] - tgt[n];
    return PT_OK;
}

static int head_bwd(pt_pctx *c, const pt_ops_f32 *ops, float *dx, float *dwte, float *logits,
                    const float *stats, const float *x, const float *wte, const int32_t *targets,
                    const float *dloss, int vreal, int Vl, int N, int C)
{
    const float *rowmax = stats, *sumexp = stats + N;
    ops->xent_bwd(logits, logits, rowmax, sumexp, targets, dloss, c->tp_rank * Vl, vreal, N, Vl);
    memset(dx, 0, sizeof(float) * (size_t)N * C);
    ops->matmul_bwd(dx, dwte, NULL, logits, x, wte, N, C, Vl);
    return pt_allreduce_sum(&c->tp, dx, (size_t)N * C);
}

const pt_layout pt_layout_1d = {
    .name = "1d",
    .weight_shard = w1d,
    .bias_shard = b1d,
    .linear_fwd = lin_fwd,
    .linear_bwd = lin_bwd,
    .embed_fwd = emb_fwd,
    .embed_bwd = emb_bwd,
    .head_fwd = head_fwd,
    .head_bwd = head_bwd,
};

const pt_layout *pt_layout_for(pt_mode mode)
{
    if (mode == PT_MODE_1D) return &pt_layout_1d;
    pt_fail(PT_EUNSUPP, "tensor-parallel mode '%s' is not yet supported (supported: 1d)", pt_mode_name(mode));
    return NULL;
}
