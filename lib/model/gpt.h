/* GPT-2-style decoder (Radford et al. 2019): token + position embedding,
 * n_layer pre-LN blocks (LN -> causal self-attention -> residual, LN ->
 * MLP with GELU -> residual), final LN, head tied to the token embedding,
 * softmax cross-entropy.  Every linear, the embedding and the head are
 * built through the plan's parallel layout (lib/parallel/layout.h), which
 * also decides which rows and columns of every activation a rank holds;
 * sequence parallelism splits the tokens of every sequence over the sp
 * group (lib/parallel/seq.h).  Gradients are summed over each shard's sync
 * group (dp x sp and the tp ranks holding the same shard), see
 * ptrain-layouts(7).
 *
 * Memory: parameters, gradients, AdamW moments and activations come from
 * the caller's arena, so arena->peak is the rank's training memory.
 */
#ifndef PTRAIN_GPT_H
#define PTRAIN_GPT_H
#include "backend/ops.h"
#include "core/core.h"
#include "optim/adamw.h"
#include "parallel/layout.h"

typedef struct pt_gpt_config {
    int n_layer, n_head, n_embd; /* L, heads, C */
    int seq_len;                 /* maximum T (rows of the position embedding) */
    int vocab;                   /* V, e.g. 50257 for GPT-2's BPE */
} pt_gpt_config;

/* Named presets: "test" (L2 H4 C64 T32), "tiny" (L4 H4 C128 T64),
 * "small" (L4 H4 C256 T128, the benchmark preset), "gpt2-124M" (L12 H12
 * C768 T1024); all with V = 50257.  PT_EINVAL listing the names otherwise. */
int pt_gpt_preset(const char *name, pt_gpt_config *cfg);
const char *pt_gpt_preset_names(void);

/* Check a config fits a tp size: n_embd % n_head == 0 and tp | n_head.
 * On failure the one-line message lists the tp values that would work
 * (divisors of n_head), PT_EINVAL. */
int pt_gpt_check_tp(const pt_gpt_config *cfg, int tp);

/* Check a model, dp-group batch B and length T fit plan p's layout
 * (heads, width, batch and sequence divisibility: the layout's
 * geometry), without building anything.  PT_EINVAL with one line naming
 * the size that does not fit and the values that would. */
int pt_gpt_check_plan(const pt_gpt_config *cfg, const pt_plan *p, int B, int T);

/* Parameter count (unique, without vocabulary padding). */
int64_t pt_gpt_num_params(const pt_gpt_config *cfg);
/* Training FLOPs per token (forward + backward): 6 N_matmul + 12 L T C
 * (Kaplan et al. 2020 / PaLM, Chowdhery et al. 2022, appendix B), with
 * N_matmul = 12 L C^2 + C V. */
double pt_gpt_flops_per_token(const pt_gpt_config *cfg, int T);

/* One parameter tensor: full shape [rows, cols] (cols 1 for vectors), its
 * class (which decides how the layout shards it) and this rank's shard;
 * data/grad point into flat buffers. */
typedef struct pt_param {
    char name[24];
    int64_t rows, cols;
    pt_pclass cls;
    pt_pshard shard;     /* local numel, gradient-sum group, norm owner */
    float *data, *grad;  /* [shard.numel] */
    int decay;           /* weight decay applies (2-D weights only) */
    float init_std;      /* normal(0, std) init; 0: constant init_value */
    float init_value;
    int64_t init_rows;   /* rows >= init_rows start at 0 (vocabulary padding) */
} pt_param;

typedef struct pt_gpt_layer {
    pt_linear qkv, proj, fc, fcproj;
    float *ln1w, *ln1b, *ln2w, *ln2b, *dln1w, *dln1b, *dln2w, *dln2b;
    /* activations saved for backward: residual side [Bl*T, Cr], inner side
     * [Bl*T, 3Cl] / [Bl*T, Cl] / [Bl*T, Fl], att [Bl, NHl, T, T*sp] */
    float *in;                    /* block input (view, not owned) */
    float *ln1, *ln1_mean, *ln1_rstd, *qkv_out, *att, *atty, *res2;
    float *ln2, *ln2_mean, *ln2_rstd, *fch, *fch_gelu, *res3;
} pt_gpt_layer;

/* A group of parameters whose gradients are summed over one group: the
 * flat buffers hold each such group contiguously, so one allreduce per
 * group synchronises them after the backward. */
typedef struct pt_gpt_sync {
    pt_comm *comm;
    size_t off, n;          /* floats in the flat buffers */
} pt_gpt_sync;

typedef struct pt_gpt {
    pt_gpt_config cfg;
    int B, T;               /* dp-group batch (sequences) and full sequence length */
    int Tl, t0;             /* tokens held per sequence (T/sp) and the first one's position */
    pt_geom g;              /* the layout's local sizes (g.T == Tl) */
    int C, HS;
    pt_pctx *ctx;
    const pt_layout *layout;
    const pt_ops_f32 *ops;
    pt_arena *arena;

    int nparams;
    pt_param *params;
    size_t nfloats;         /* local parameter floats */
    float *param_mem, *grad_mem, *adam_m, *adam_v;
    int nsync;
    pt_gpt_sync sync[1 << PT_TP_AXES];
    float *wte, *wpe, *lnfw, *lnfb, *dwte, *dwpe, *dlnfw, *dlnfb;
    pt_gpt_layer *layers;

    /* activations and scratch */
    int32_t *tok, *tgt;     /* [B, Tl]: every sequence of the dp group, this rank's positions */
    float *enc, *lnf, *lnf_mean, *lnf_rstd, *logits, *losses, *stats, *dloss;
    float *dres, *dtmp, *dqkv, *datty, *dfch, *dfchg;
    int step_t;             /* AdamW steps taken */
} pt_gpt;

/* Build the model for the dp group's batch B (sequences) of length T <=
 * seq_len on context ctx (plan mode picks the layout; with sp > 1 each
 * rank holds T/sp positions and attention runs round the sp ring,
 * lib/parallel/seq.h), initialising parameters as
 * GPT-2 does from `seed` (normal(0, 0.02), residual projections scaled by
 * 1/sqrt(2L), LN = 1/0, biases 0): every parameter has its own RNG stream,
 * so the full tensors are the same for any layout and world size and each
 * rank keeps its shard.
 * Errors: PT_EINVAL (config does not fit tp, bad sizes), PT_ENOMEM,
 * PT_EUNSUPP (layout not built). */
int pt_gpt_create(pt_gpt *m, const pt_gpt_config *cfg, pt_pctx *ctx, const pt_backend *be,
                  pt_arena *arena, int B, int T, uint64_t seed);
void pt_gpt_free(pt_gpt *m);

/* Forward over the dp group's inputs/targets [B, T] (token ids < vocab;
 * every rank of a tp or sp group passes the same B sequences and the
 * layout picks its rows).  *loss gets the mean cross-entropy (nats/token)
 * over the GLOBAL batch (B*dp sequences).  Saves activations for
 * pt_gpt_backward.  PT_EINVAL on a token id outside the vocabulary,
 * PT_ECOMM. */
int pt_gpt_forward(pt_gpt *m, const int32_t *inputs, const int32_t *targets, float *loss);
/* Backward of the last forward: accumulates into the gradients (call
 * pt_gpt_zero_grad first), then sums every shard's partial gradients over
 * its sync group (dp x sp, plus the tp ranks that hold the same shard for
 * other rows), so each rank holds the gradient of the global mean loss. */
int pt_gpt_backward(pt_gpt *m);
void pt_gpt_zero_grad(pt_gpt *m);
/* Global L2 norm of the gradient over all unique parameters (each
 * distinct shard counted once, on its norm owner; allreduce over world). */
int pt_gpt_grad_norm(pt_gpt *m, double *norm);
/* Clip to opt->grad_clip by global norm, then one AdamW step at lr.
 * *norm_out (may be NULL) receives the pre-clip norm. */
int pt_gpt_step(pt_gpt *m, const pt_adamw_cfg *opt, float lr, double *norm_out);

/* The full (unsharded) initial value of parameter i, [rows*cols] floats,
 * as pt_gpt_create generates it; used by tests to compare layouts. */
void pt_gpt_param_init_full(const pt_param *p, int index, uint64_t seed, float *full);

#endif
