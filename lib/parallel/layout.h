/* SPDX-License-Identifier: MIT */
/* The parallel-layer interface (lib/parallel).
 *
 * A layout decides how every parameter and every activation is sharded
 * over the tensor-parallel group and implements the layers whose
 * computation or communication depends on that sharding: the linear
 * layers of attention and MLP, the token embedding, the vocabulary head
 * with its cross-entropy, and the group LayerNorm reduces over.  The model
 * (lib/model) only calls through this table, so choosing 1d/2d/2.5d/3d is
 * choosing which table it instantiates.
 *
 * Activations.  The model sees two sides of every block:
 *   residual side  the stream between blocks and the LayerNorm inputs:
 *                  [Bl, T, Cr] on each rank;
 *   inner side     the attention heads and the MLP hidden units, between a
 *                  "column" linear (residual -> inner: qkv, fc) and a
 *                  "row" linear (inner -> residual: proj, fcproj):
 *                  [Bl, T, 3*Cl] / [Bl, T, Fl] with NHl whole heads.
 * Both sides hold the same number Bl of sequences, but not necessarily the
 * same ones (3d swaps the batch and hidden axes between them).
 *
 *   mode   ranks    residual [Bl, T, Cr]     inner heads / MLP     head rows, vocabulary
 *   1d     p        [B, T, C]   (replica)    NH/p, 4C/p            [B, T], V/p
 *   2d     q*q      [B/q, T, C/q]            NH/q, 4C/q            [B/q, T], V/q
 *   2.5d   d*q*q    [B/(dq), T, C/q]         NH/q, 4C/q            [B/(dq), T], V/q
 *   3d     l*l*l    [B/l^2, T, C/l]          NH/l, 4C/l            [B/l^2, T], V/l
 * The head never holds its logits: the fused classifier (ops.h) runs over
 * vocabulary blocks with the full width C of its rows gathered (2d, 3d).
 *
 * B is the batch of the rank's data-parallel group (sequences); the model
 * hands every rank all B sequences' tokens and the layout picks its rows.
 */
#ifndef PTRAIN_LAYOUT_H
#define PTRAIN_LAYOUT_H
#include "backend/ops.h"
#include "core/core.h"
#include "parallel/context.h"
#include <stdint.h>

/* What a parameter is; the layout decides its shard from this. */
typedef enum pt_pclass {
    PT_P_WTE,      /* [Vp, C] token embedding, tied to the vocabulary head */
    PT_P_WPE,      /* [Tmax, C] position embedding */
    PT_P_NORM,     /* [C] LayerNorm weight or bias (residual side) */
    PT_P_QKV_W,    /* [3C, C] residual -> heads, rows are q|k|v blocks */
    PT_P_QKV_B,    /* [3C] */
    PT_P_PROJ_W,   /* [C, C] heads -> residual */
    PT_P_PROJ_B,   /* [C] */
    PT_P_FC_W,     /* [4C, C] residual -> MLP */
    PT_P_FC_B,     /* [4C] */
    PT_P_FCPROJ_W, /* [C, 4C] MLP -> residual */
    PT_P_FCPROJ_B, /* [C] */
    PT_P_COL2_W,   /* [2R, C] residual -> inner, rows two equal blocks each split like
                      a column weight: Llama's kv (k|v) and fc (gate|up); 1d only */
    PT_P_COL2_B,   /* [2R] their biases (Qwen2's k|v) */
    PT_P_NCLASS
} pt_pclass;

/* How one rank holds a parameter of full shape [rows, cols]. */
typedef struct pt_pshard {
    int64_t numel;   /* local floats */
    pt_comm *sync;   /* group whose partial gradients of this shard are summed
                        (always contains dp and sp); one of ctx->sync[] */
    int norm_owner;  /* 1 on exactly one rank per distinct shard: it counts the
                        shard in the global gradient norm */
} pt_pshard;

/* Local sizes of the model on this rank (see the table above). */
typedef struct pt_geom {
    int B, T;          /* dp-group batch (sequences) and sequence length held */
    int V;             /* real vocabulary (ids >= V are padding) */
    int Bl;            /* sequences held on each side */
    int Cr;            /* residual width held */
    int NHl, Cl, Fl;   /* inner side: heads, NHl*HS, MLP width */
    int Vp, Vl;        /* padded vocabulary, vocabulary columns (ids) held */
    int loss_owner;    /* 1 if this rank's head rows count in the global loss
                          (one rank among the replicas of those rows) */
    pt_comm *norm;     /* group LayerNorm sums its row statistics over */
} pt_geom;

/* A linear layer Y = X W^T + b with full W [out, in].  role COLUMN goes
 * residual -> inner (QKV: output rows are q|k|v blocks), ROW inner ->
 * residual.  w/b/dw/db are this rank's shards (b/db may be NULL). */
typedef enum pt_linear_role { PT_LINEAR_COLUMN, PT_LINEAR_ROW, PT_LINEAR_COLUMN_QKV } pt_linear_role;

typedef struct pt_linear {
    pt_linear_role role;
    int in, out;              /* full sizes */
    int in_local, out_local;  /* activation columns held on the input / output side */
    const void *w, *b;        /* the weight copies the GEMMs read (ACT: ops->act) */
    float *dw, *db;           /* their gradients (ACC: fp32) */
} pt_linear;

/* What every layer call needs: the grid, the kernels and the arena the
 * layer's scratch buffers (broadcast, gather, transpose blocks) are taken
 * from and returned to, so they count in the rank's peak memory.
 * Activations (x, y, dx, dy, aux, the embedding and head inputs and
 * outputs) and the weight copies are ACT (ops->act elements); parameter
 * gradients, losses, the cross-entropy's statistics and dloss are fp32.
 * Tensor-parallel collectives move activations in ACT (a bf16 run's tp
 * traffic is 2 bytes per element) and parameter gradients in fp32. */
typedef struct pt_lenv {
    pt_pctx *c;
    const pt_ops *ops;
    pt_arena *arena;
} pt_lenv;

typedef struct pt_layout {
    const char *name;
    /* Local sizes for a model (C, NH heads, vocabulary V) at dp-group batch
     * B and length T.  PT_EINVAL with one line naming the size that does
     * not fit and the values that would (heads, C, B, V divisibility). */
    int (*geometry)(const pt_pctx *c, int B, int T, int C, int NH, int V, pt_geom *g);
    /* Shard of a parameter of class cls and full shape [rows, cols]. */
    void (*param)(pt_pctx *c, pt_pclass cls, int64_t rows, int64_t cols, pt_pshard *s);
    /* Copy this rank's shard of the row-major full tensor into local
     * (through ops->copy2d: full may be host memory, local the backend's). */
    void (*param_slice)(const pt_ops *ops, const pt_pctx *c, pt_pclass cls, const float *full, float *local, int64_t rows,
                        int64_t cols);
    /* y [Bl*T, out_local] = epi(x [Bl*T, in_local] W^T + b): epi PT_EPI_DEFAULT, or
     * PT_EPI_GELU (the MLP's fc: y = gelu(x W^T + b), aux [Bl*T, out_local] = the
     * pre-GELU values, kept for the backward).  The epilogue runs inside the GEMM's
     * pass (ops.h) unless the layout communicates between the two. */
    int (*linear_fwd)(const pt_lenv *e, const pt_linear *l, void *y, void *aux, const void *x, int N,
                      int epi);
    /* dx [Bl*T, in_local] (overwritten), dW and db (+=) from dy and the forward input
     * x.  epi PT_EPI_DGELU: x was the GELU output of the linear before (aux [Bl*T,
     * in_local] its pre-GELU values): dx leaves holding the gradient w.r.t. those
     * pre-GELU values and dbias_aux [in_local] += its column sums (that linear's bias
     * gradient; its own linear_bwd then runs with db NULL).  epi PT_EPI_DEFAULT
     * ignores aux and dbias_aux. */
    int (*linear_bwd)(const pt_lenv *e, const pt_linear *l, void *dx, const void *dy, const void *x,
                      int N, int epi, const void *aux, float *dbias_aux);
    /* out [Bl, T, Cr] = wte[tok] for this rank's residual rows; tok is the
     * whole dp-group batch [B, T]; wte is this rank's PT_P_WTE shard. */
    int (*embed_fwd)(const pt_lenv *e, const pt_geom *g, void *out, const int32_t *tok, const void *wte);
    /* dwte (+=) from dout [Bl, T, Cr]. */
    int (*embed_bwd)(const pt_lenv *e, const pt_geom *g, float *dwte, const void *dout, const int32_t *tok);
    /* Tied head + cross-entropy through the fused classifier (ops.h: no [N, V]
     * logits; one [N, PT_CLASSIFIER_VBLOCK] block of scratch): for this rank's
     * head rows (x: residual side [Bl, T, Cr]), losses [Bl*T] = -log
     * softmax(x wte^T)[target] over ids < V; stats [3*Bl*T] keep the row max,
     * sum of exp and target logit (global over the vocabulary) for the
     * backward.  tgt is the whole dp-group batch [B, T]. */
    int (*head_fwd)(const pt_lenv *e, const pt_geom *g, float *losses, float *stats, const void *x,
                    const void *wte, const int32_t *tgt);
    /* dx [Bl, T, Cr] (overwritten) and dwte (+=) from the per-row loss
     * weights dloss [Bl*T]: the logits again block by block. */
    int (*head_bwd)(const pt_lenv *e, const pt_geom *g, void *dx, float *dwte, const float *stats,
                    const void *x, const void *wte, const int32_t *tgt, const float *dloss);
    /* head_fwd and head_bwd in one pass, for the training step, which knows
     * dloss before the forward: losses, stats as head_fwd's, dx and dwte as
     * head_bwd's, the logits computed once (pt_classifier_step).  NULL: the
     * layout has none (the model runs head_fwd then head_bwd); the model also
     * calls head_fwd/bwd where the ops table has no classifier_rows_fwd. */
    int (*head_step)(const pt_lenv *e, const pt_geom *g, float *losses, float *stats, void *dx, float *dwte,
                     const void *x, const void *wte, const int32_t *tgt, const float *dloss);
} pt_layout;

/* 1D (Megatron-LM, Shoeybi et al. 2019, section 3): lib/parallel/tp1d.c. */
extern const pt_layout pt_layout_1d;
/* 2D SUMMA (Optimus, Xu et al. 2021) and its depth-d extension 2.5D
 * (Tesseract, Wang et al. 2021): lib/parallel/tp2d.c. */
extern const pt_layout pt_layout_2d;
/* 3D (Bian et al. 2021): lib/parallel/tp3d.c. */
extern const pt_layout pt_layout_3d;

/* The layout for a plan mode (off runs the 1D layout with tp = 1), or
 * NULL (PT_EUNSUPP via pt_errmsg). */
const pt_layout *pt_layout_for(pt_mode mode);

/* ---- helpers shared by the layouts (tp_common.c) ---- */

/* Full row of logical row r of a [rows] dimension split into `parts`
 * blocks, block `blk`: plain blocks (stacked 0 or 1), or the rows are
 * `stacked` equal blocks (3: q|k|v, 2: k|v or gate|up) each split into
 * `parts` and block blk is the union of their pieces (so a block holds
 * whole heads of q, k and v, or matching gate and up units). */
int64_t pt_block_row(int64_t rows, int parts, int blk, int stacked, int64_t r);
/* How many equal blocks a class's rows are stacked from: 3 for
 * PT_P_QKV_W/B, 2 for PT_P_COL2_W/B, else 1. */
int pt_pclass_stacked(pt_pclass cls);

/* Copy the sub-block of full [rows, cols]: rows = block rblk of rparts
 * (stacked blocks as pt_block_row's `stacked`, passed as qkv), then rows [rsub*n/rsubparts, ...) of that block's
 * n rows; columns = block cblk of cparts.  local is
 * [rows/(rparts*rsubparts), cols/cparts] row-major.  One ops->copy2d per
 * run of consecutive rows (full may be host memory, local the backend's). */
void pt_block_copy(const pt_ops *ops, const float *full, float *local, int64_t rows, int64_t cols, int rparts,
                   int rblk, int qkv, int rsubparts, int rsub, int cparts, int cblk);

/* Distributed LayerNorm over rows whose C columns are split over group g
 * (Ba et al. 2016; the per-row sums of x and of (x-mean)^2, and in the
 * backward of dy*w and dy*w*xhat, are allreduced over g: 2 allreduces of
 * [N] floats forward, one of [2N] backward).  out/x [N, Cl], w/b [Cl];
 * mean/rstd [N] saved (fp32; out, x, w, b, dx, dy ACT, dw, db fp32).
 * C is the full width.  Backward accumulates dx, dw, db. */
int pt_layernorm_fwd(pt_comm *g, const pt_ops *ops, pt_arena *a, void *out, float *mean, float *rstd,
                     const void *x, const void *w, const void *b, int N, int Cl, int C);
int pt_layernorm_bwd(pt_comm *g, const pt_ops *ops, pt_arena *a, void *dx, float *dw, float *db,
                     const void *dy, const void *x, const void *w, const float *mean, const float *rstd,
                     int N, int Cl, int C);

/* Distributed RMSNorm (Zhang & Sennrich 2019; Llama's, eps the model's
 * norm_eps) over rows whose C columns are split over group g, as
 * pt_layernorm_fwd/bwd: the per-row sum of x^2 forward and of dy*w*xhat
 * backward are allreduced over g (one allreduce of [N] floats each way).
 * out/x [N, Cl], w [Cl]; rstd [N] saved (fp32; out, x, w, dx, dy ACT, dw
 * fp32).  C is the full width.  Backward accumulates dx (NULL skips) and
 * dw.  g->size 1 and Cl == C: the whole-row ops, no scratch.  Errors:
 * PT_ENOMEM (the backward's arena scratch of [N]), PT_ECOMM. */
int pt_rmsnorm_fwd(pt_comm *g, const pt_ops *ops, pt_arena *a, void *out, float *rstd, const void *x, const void *w,
                   int N, int Cl, int C, double eps);
int pt_rmsnorm_bwd(pt_comm *g, const pt_ops *ops, pt_arena *a, void *dx, float *dw, const void *dy, const void *x,
                   const void *w, const float *rstd, int N, int Cl, int C);

/* Vocab-parallel fused classifier over group g (Megatron, section 3; the
 * blocks of ops.h's classifier_fwd/bwd): x [ks][N][C/ks] and w
 * [ks][Vl][C/ks] hold ids v0..v0+Vl-1 (ks column pieces as an allgather
 * lays them out, ks = 1 plain rows).  Forward: this shard's row max, sum of
 * exp and target logit, then the row max's allreduce (max) over g, each
 * sum moved to the global max (xent_rescale), the allreduce (sum) of the
 * [2N] sums and target logits; losses [N], stats [3N] (global).  Backward:
 * dx (+=, ACT) and dw (+=, fp32), same layouts, from the global stats and
 * dloss [N].  x, w ACT; losses, stats fp32.  Scratch from arena a: the
 * fused classifier's work, pt_classifier_work_elems(ops, N, C, vb, bwd)
 * fp32 ([N, vb] with vb = min(PT_CLASSIFIER_VBLOCK, Vl), and in a bf16
 * backward [N, C] more), and [N] in the forward after it.  Errors:
 * PT_ENOMEM, PT_ECOMM. */
int pt_classifier_fwd(pt_comm *g, const pt_ops *ops, pt_arena *a, float *losses, float *stats, const void *x,
                      const void *w, const int32_t *tgt, int v0, int vreal, int N, int C, int Vl, int ks);
int pt_classifier_bwd(const pt_ops *ops, pt_arena *a, void *dx, float *dw, const float *stats, const void *x,
                      const void *w, const int32_t *tgt, const float *dloss, int v0, int vreal, int N, int C, int Vl,
                      int ks);
/* The classifier's block width for a shard of Vl columns: min(PT_CLASSIFIER_VBLOCK, Vl). */
int pt_classifier_vblock(int Vl);

/* Forward and backward of the vocab-parallel classifier in one pass, for a
 * caller that knows the loss weights dloss [N] before the forward (the
 * training step: pt_gpt_head_step): over chunks of R =
 * pt_classifier_chunk_rows(N, Vl) rows, ops->classifier_rows_fwd (the
 * chunk's logits held whole), the chunk's statistics merged over g as
 * pt_classifier_fwd merges them (one allreduce max and one sum of 2R per
 * chunk), its losses, then ops->classifier_rows_bwd from the same logits:
 * 6 N C Vl FLOPs instead of pt_classifier_fwd + _bwd's 8 (Liger Kernel's
 * chunked fused linear cross-entropy, Hsu et al. 2024, sec. 3.1).  x [N, C]
 * and w [Vl, C] ACT (ks 1); losses [N], stats [3N] (global, as
 * pt_classifier_fwd's), dx [N, C] ACT (+=) and dw [Vl, C] fp32 (+=); tgt
 * [N].  Scratch from arena a: R Vl fp32 (the logits),
 * pt_classifier_rows_work_elems(R, C, Vl) fp32 and 3R fp32 (the chunk's
 * statistics).  Needs ops->classifier_rows_fwd/bwd (PT_EUNSUPP when the
 * table has none).  Errors: PT_ENOMEM, PT_ECOMM, PT_EUNSUPP. */
int pt_classifier_step(pt_comm *g, const pt_ops *ops, pt_arena *a, float *losses, float *stats, void *dx, float *dw,
                       const void *x, const void *w, const int32_t *tgt, const float *dloss, int v0, int vreal, int N,
                       int C, int Vl);


/* For one-line "valid values" messages: write the divisors of n,
 * space-separated, into buf [len]; truncated to fit. */
void pt_list_divisors(char *buf, size_t len, int n);

/* A geometry hook's sizes: the layout family's lib/shape function `fn`
 * (pt_shape_1d, _2d or _3d) on c's plan and grid dims, the model (C, NH,
 * V), the batch B and the length T held (already T / sp), written into *g
 * (zeroed first; the hook adds loss_owner and norm).  PT_OK, or fn's
 * PT_EINVAL with its one-line message (lib/shape/shape.h). */
struct pt_shape_in;
struct pt_shape;
int pt_geom_shape(const pt_pctx *c, int (*fn)(const struct pt_shape_in *, struct pt_shape *), int B, int T, int C,
                  int NH, int V, pt_geom *g);

/* Take n floats from the arena (PT_ENOMEM with a message naming what). */
float *pt_scratch(pt_arena *a, size_t n, const char *what);
/* Take n elements of type t from the arena (the same, for ACT buffers). */
void *pt_scratch_t(pt_arena *a, size_t n, pt_dtype t, const char *what);

#endif
