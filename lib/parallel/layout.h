/* The parallel-layer interface (DESIGN.md, lib/parallel).
 *
 * A layout decides how each parameter is sharded over the tensor-parallel
 * group and implements the layers whose computation or communication
 * depends on that sharding: the linear layers of attention and MLP, the
 * token embedding and the vocabulary head with its cross-entropy.  The
 * model builder (lib/model) only calls through this table, so choosing
 * 1d/2d/2.5d/3d is choosing which table it instantiates.  This build has
 * the 1D (Megatron) layout; the others are later implementations of the
 * same table.
 */
#ifndef PTRAIN_LAYOUT_H
#define PTRAIN_LAYOUT_H
#include "backend/ops.h"
#include "parallel/context.h"
#include <stdint.h>

/* How a parameter's full tensor [rows, cols] is split over the tp group. */
typedef enum pt_shard_kind {
    PT_SHARD_REPLICATED, /* every tp rank holds all of it */
    PT_SHARD_ROWS,       /* rank r holds rows [r*rows/tp, (r+1)*rows/tp) */
    PT_SHARD_ROWS3,      /* rows are 3 blocks (q|k|v); each block split by rows */
    PT_SHARD_COLS,       /* rank r holds columns [r*cols/tp, (r+1)*cols/tp) */
} pt_shard_kind;

/* Copy rank tp_rank's shard of the full row-major tensor `full` [rows,
 * cols] into `local` (rows_local x cols_local as the kind implies).
 * rows (resp. cols, rows/3 for ROWS3) must be divisible by tp. */
void pt_shard_copy(pt_shard_kind kind, const float *full, float *local, int64_t rows, int64_t cols,
                   int tp_rank, int tp);

/* A linear layer Y = X W^T + b with full W [out, in], as the layout
 * shards it.  role COLUMN: output features split (Megatron's
 * ColumnParallelLinear); ROW: input features split (RowParallelLinear). */
typedef enum pt_linear_role { PT_LINEAR_COLUMN, PT_LINEAR_ROW, PT_LINEAR_COLUMN_QKV } pt_linear_role;

typedef struct pt_linear {
    pt_linear_role role;
    int in, out;              /* full sizes */
    int in_local, out_local;  /* this rank's sizes */
    float *w, *b, *dw, *db;   /* local shards (b/db may be NULL) */
} pt_linear;

typedef struct pt_layout {
    const char *name;
    /* shard kind of a linear's weight and bias for a role */
    pt_shard_kind (*weight_shard)(pt_linear_role role);
    pt_shard_kind (*bias_shard)(pt_linear_role role);
    /* y [N, out_local or out] = x W^T + b.  x is [N, in_local or in] as
     * the role dictates; ROW layers reduce partial sums over tp. */
    int (*linear_fwd)(pt_pctx *c, const pt_ops_f32 *ops, const pt_linear *l, float *y,
                      const float *x, int N);
    /* dx (+=, may be NULL), dW, db from dy; COLUMN layers reduce dx over tp. */
    int (*linear_bwd)(pt_pctx *c, const pt_ops_f32 *ops, const pt_linear *l, float *dx,
                      const float *dy, const float *x, int N);
    /* out [N, C] = wte[tok] with wte sharded by vocabulary rows [Vl, C]. */
    int (*embed_fwd)(pt_pctx *c, const pt_ops_f32 *ops, float *out, const int32_t *tok,
                     const float *wte, int Vl, int N, int C);
    int (*embed_bwd)(pt_pctx *c, const pt_ops_f32 *ops, float *dwte, const float *dout,
                     const int32_t *tok, int Vl, int N, int C);
    /* Tied vocabulary head + cross-entropy: logits [N, Vl] = x wte^T,
     * losses [N] = -log softmax(logits)[target] over the vocab ids < vreal.
     * stats [3N] receives rowmax, sumexp, target logit for the backward. */
    int (*head_fwd)(pt_pctx *c, const pt_ops_f32 *ops, float *logits, float *losses, float *stats,
                    const float *x, const float *wte, const int32_t *targets, int vreal, int Vl,
                    int N, int C);
    /* dx (+=) and dwte (+=) from per-row loss weights dloss [N];
     * overwrites logits with dlogits. */
    int (*head_bwd)(pt_pctx *c, const pt_ops_f32 *ops, float *dx, float *dwte, float *logits,
                    const float *stats, const float *x, const float *wte, const int32_t *targets,
                    const float *dloss, int vreal, int Vl, int N, int C);
} pt_layout;

/* The 1D tensor-parallel layout (Megatron-LM, Shoeybi et al. 2019, section
 * 3: column-parallel QKV and fc, row-parallel projections, vocab-parallel
 * embedding and cross-entropy).  Per transformer block and step it moves
 * 4 allreduces of [B, T, C] in the tp group (2 forward, 2 backward). */
extern const pt_layout pt_layout_1d;

/* The layout for a plan mode, or NULL (PT_EUNSUPP via pt_errmsg). */
const pt_layout *pt_layout_for(pt_mode mode);

#endif
