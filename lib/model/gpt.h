/* SPDX-License-Identifier: MIT */
/* The decoder of both model families (lib/contract/model.h):
 *   gpt2   GPT-2 (Radford et al. 2019): token + position embedding,
 *          n_layer pre-LN blocks (LN -> causal self-attention -> residual,
 *          LN -> MLP with GELU -> residual), final LN, head tied to the
 *          token embedding, softmax cross-entropy;
 *   llama  Hugging Face's LlamaForCausalLM: token embedding, blocks
 *          (RMSNorm -> q, k|v projections -> RoPE on q and k -> grouped-
 *          query attention -> residual, RMSNorm -> down(silu(gate) * up) ->
 *          residual), final RMSNorm, head tied or lm_head (llm.c's Llama 3
 *          branch and torchtitan's model for the structure).  Every linear, the embedding and the head are
 * built through the plan's parallel layout (lib/parallel/layout.h), which
 * also decides which rows and columns of every activation a rank holds;
 * sequence parallelism splits the tokens of every sequence over the sp
 * group (lib/parallel/seq.h).  The model computes this rank's partial
 * gradients only; summing them over each shard's sync group (dp x sp and
 * the tp ranks holding the same shard, ptrain-layouts(7)), the norm,
 * clipping and AdamW are the training step's (lib/train/train.h), which
 * also owns the parameter storage.  Forward and backward run by pieces
 * (embedding, a block range with explicit boundary activations, head) so a
 * pipeline stage is a block range.  All arithmetic goes through the
 * backend's ops table and all communication through pt_comm.
 *
 * Memory: activations come from the caller's arena (parameters, gradients
 * and AdamW moments from the same arena via pt_train_create), so
 * arena->peak is the rank's training memory.
 *
 * Precision (ctx->plan.precision): the model runs the backend's table for
 * it (pt_backend_ops: fp32, or bf16 activations with fp32 accumulation).
 * Activations, their gradients and the weight copies the forward reads
 * (pt_param.work) have the table's ACT type (m->act, m->ea bytes each);
 * parameter gradients, LayerNorm mean/rstd, the attention's lse, losses,
 * the cross-entropy's statistics and dloss are fp32.  Sources: GPT-2 (Radford et
 * al. 2019), llm.c's train_gpt2.c for the forward/backward structure.
 */
#ifndef PTRAIN_GPT_H
#define PTRAIN_GPT_H
#include "backend/ops.h"
#include "contract/model.h"
#include "core/core.h"
#include "parallel/layout.h"

/* The model config is the contract's one struct (lib/contract/model.h:
 * L, heads, C, T, V), the same the planner and the plugin parse; here its
 * seq_len is the maximum T (rows of the position embedding). */
typedef pt_model_shape pt_gpt_config;

/* Named presets: "test" (L2 H4 C64 T32), "tiny" (L4 H4 C128 T64),
 * "small" (L4 H4 C256 T128, the benchmark preset), "gpt2-124M" (L12 H12
 * C768 T1024); all with V = 50257.  PT_EINVAL listing the names otherwise.
 * The table is lib/contract/model.c's (pt_model_preset), libc only, so the SPANK
 * plugin parses the same names without libptrain. */
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
 * N_matmul = 12 L C^2 + C V (pt_model_flops_per_token). */
double pt_gpt_flops_per_token(const pt_gpt_config *cfg, int T);

/* One parameter tensor: full shape [rows, cols] (cols 1 for vectors), its
 * class (which decides how the layout shards it) and this rank's shard.
 * data/grad are bound by the parameter registry (lib/train/train.h), which
 * owns the flat buffers they point into. */
typedef struct pt_param {
    char name[24];       /* "h3.qkv.w" */
    int64_t rows, cols;  /* full shape [rows, cols] */
    pt_pclass cls;       /* role; the layout shards by it */
    pt_pshard shard;     /* local numel, gradient-sum group, norm owner */
    float *data, *grad;  /* [shard.numel] fp32 each, backend memory: the master value (the registry's
                          * where it keeps the whole shard; ZeRO: see lib/train) and the gradient */
    void *work;          /* [shard.numel] ACT: the copy the forward reads (== data under fp32) */
    int decay;           /* weight decay applies (2-D weights only) */
    float init_std;      /* normal(0, std) init; 0: constant init_value */
    float init_value;
    int64_t init_rows;   /* rows >= init_rows start at 0 (vocabulary padding) */
    int index;           /* position in the whole model's list: its RNG stream */
    pt_comm *tied;       /* NULL, or a second group its gradient is summed over after
                          * shard.sync: the tied wte of the first and last pipeline
                          * stage (ctx->embed, as Megatron-LM's embedding group) */
} pt_param;

/* A pipeline rank's share of the model (lib/pipeline): model chunks
 * (virtual stages, Narayanan et al. 2021 sec. 2.2) as block ranges, which
 * end pieces it holds, and how many microbatches it keeps in flight. */
#define PT_GPT_MAX_CHUNKS 16
typedef struct pt_gpt_stage {
    int nchunks;                    /* model chunks on this rank, 1..PT_GPT_MAX_CHUNKS */
    int l0[PT_GPT_MAX_CHUNKS], l1[PT_GPT_MAX_CHUNKS]; /* block range [l0, l1) of each chunk */
    int first, last;                /* holds the embedding / the final LayerNorm and head */
    int nslots;                     /* activation sets: microbatches in flight (>= 1) */
    int microbatches;               /* m per step: the loss is the mean over m*B*dp*T tokens */
} pt_gpt_stage;

/* Pieces a ZeRO-3 hook is called around (piece -1 embedding, 0..L-1 block,
 * L head) and when. */
enum { PT_HOOK_FWD_PRE, PT_HOOK_FWD_POST, PT_HOOK_BWD_PRE, PT_HOOK_BWD_POST };
struct pt_gpt;
/* Called before and after every piece's forward and backward; may repoint
 * the piece's params[i].data/.grad (then call pt_gpt_bind_views).  Returns
 * PT_OK or an error code with the message set. */
typedef int (*pt_gpt_param_hook)(void *arg, struct pt_gpt *m, int piece, int phase);

typedef struct pt_gpt_layer {
    pt_linear qkv, proj, fc, fcproj;          /* views of the bound parameters (llama: fc is gate|up) */
    pt_linear q, kv;                          /* llama: the q [C, C] and k|v [2 KV HS, C] projections */
    const void *ln1w, *ln1b, *ln2w, *ln2b;   /* [Cr] each, ACT (llama: RMSNorm weights, no b) */
    float *dln1w, *dln1b, *dln2w, *dln2b;    /* [Cr] each */
    /* activations saved for backward (ACT unless said fp32): residual side
     * [Bl*Tl, Cr], inner side [Bl*Tl, QKVl] / [Bl*Tl, Cl] / [Bl*Tl, Fl], the
     * attention's row log-sum-exp lse [Bl, NHl, Tl] (flash attention keeps
     * no [Tl, T] probabilities).  Llama: qkv_out is q|k|v packed per row
     * (QKVl = Cl + 2 KVl, q and k after RoPE), fch the gate|up output
     * [Bl*Tl, 2 Il], fch_gelu the SwiGLU output [Bl*Tl, Il], ln*_mean unused
     * (RMSNorm keeps rstd only). */
    const void *in;               /* [Bl*Tl, Cr] block input (view of the caller's buffer, kept to backward) */
    void *ln1;                    /* [Bl*Tl, Cr] */
    float *ln1_mean, *ln1_rstd;   /* [Bl*Tl] fp32 each */
    void *qkv_out;                /* [Bl*Tl, 3Cl] */
    float *lse;                   /* [Bl, NHl, Tl] fp32 attention row log-sum-exp */
    void *atty;                   /* [Bl*Tl, Cl] attention output */
    void *res2;                   /* [Bl*Tl, Cr] after the attention residual */
    void *ln2;                    /* [Bl*Tl, Cr] */
    float *ln2_mean, *ln2_rstd;   /* [Bl*Tl] fp32 each */
    void *fch, *fch_gelu;         /* [Bl*Tl, Fl]: fc's pre-GELU output (its epilogue's aux) and GELU output */
    void *res3;                   /* [Bl*Tl, Cr] block output */
} pt_gpt_layer;

/* One microbatch's saved activations (pt_gpt_use_slot). */
typedef struct pt_gpt_slot {
    pt_gpt_layer *layers;   /* [n_layer] views + this slot's activations (stage layers only) */
    int32_t *tok, *tgt;     /* [B, Tl] token ids of the microbatch */
    void *enc;              /* [N, Cr] ACT embedding output (first stage) */
    const void *head_in;    /* view kept from head forward to head backward */
} pt_gpt_slot;

typedef struct pt_gpt {
    pt_gpt_config cfg;
    int B, T;               /* dp-group batch (sequences) and full sequence length */
    int Tl, t0;             /* tokens held per sequence (T/sp) and the first one's position */
    pt_geom g;              /* the layout's local sizes (g.T == Tl) */
    int C, HS;              /* n_embd, head size C/n_head */
    int llama;              /* cfg.family == PT_FAMILY_LLAMA */
    int KVl, Il;            /* llama: KV width KV*HS/tp and MLP width I/tp held */
    int QKVl;               /* width of the packed qkv rows: 3 Cl (gpt2), Cl + 2 KVl (llama) */
    int npre, npb, nall;    /* whole-model list: parameters before the blocks, per block, in all
                               (pt_model_pre_params, pt_model_block_params, pt_model_param_count) */
    float *rope_cs;         /* llama: [T, HS/2, 2] fp32 cos, sin of every position (backend memory) */
    pt_pctx *ctx;           /* the process grid (not owned) */
    const pt_layout *layout;
    const pt_backend *be;   /* the backend it computes on (its hooks: status, describe) */
    const pt_ops *ops;      /* the backend's table for the plan's precision */
    pt_dtype act;           /* ops->act: the activations' element type */
    size_t ea;              /* its size in bytes (4 fp32, 2 bf16) */
    pt_arena *arena;        /* activations and scratch (not owned) */
    uint64_t seed;          /* initial values (pt_gpt_bind_params) */
    pt_gpt_stage stage;     /* chunks, ends, slots, microbatches (whole model: 1 chunk, 1 slot) */
    int nslots, slot;       /* activation sets and the current one */
    pt_gpt_slot *slots;     /* [nslots] */
    int *pidx;              /* [nall] whole-model parameter index -> params[] index, -1 absent */
    void **allocs;          /* every arena block of the model's activations, for pt_gpt_free */
    int nallocs, cap_allocs;
    int bound;              /* views set (pt_gpt_bind_views) */
    pt_gpt_param_hook param_hook; /* NULL, or ZeRO-3's gather/release (lib/train) */
    void *param_hook_arg;

    int nparams;
    pt_param *params;       /* [nparams], in RNG-stream order */
    size_t nfloats;         /* sum of the shards' numel: local parameter elements */
    /* views of the bound parameters (weights ACT, gradients fp32): wte [Vl-shard, Cr],
     * wpe [seq_len, Cr], lnf [Cr] */
    const void *wte, *wpe, *lnfw, *lnfb;
    float *dwte, *dwpe, *dlnfw, *dlnfb;
    const void *whead;      /* the head's weight: wte, or lm_head [Vl-shard, Cr] (llama untied) */
    float *dwhead;
    pt_gpt_layer *layers;   /* [n_layer]: the current slot's (views of absent layers are NULL) */

    /* activations and scratch, N = Bl*Tl rows (ACT unless said fp32) */
    int32_t *tok, *tgt;     /* [B, Tl]: every sequence of the dp group, this rank's positions (current slot) */
    void *enc;              /* [N, Cr] embedding output (input of block 0; current slot) */
    const void *head_in;    /* [N, Cr] input of the final LayerNorm (view, kept to backward) */
    void *lnf;              /* [N, Cr] */
    float *lnf_mean, *lnf_rstd; /* [N], [N] fp32 */
    float *losses;          /* [N] fp32 per-row cross-entropy, nats */
    float *stats;           /* [3N] fp32 row max, sum of exp, target logit (the fused classifier's; no logits kept) */
    float *dloss;           /* [N] fp32 */
    void *dres;             /* [N, Cr] residual gradient of pt_gpt_backward */
    void *dtmp;             /* [N, max(Cr, Cl)] */
    void *dqkv;             /* [N, QKVl] */
    void *datty;            /* [N, max(Cl, 2 KVl)] */
    void *dfch;             /* [N, Fl] (fcproj's dX with fc's DGELU epilogue applied; llama [N, 2 Il]) */
    void *dtmp2;            /* llama: [N, Cr] the k|v projection's dX */
} pt_gpt;

/* Build the model for the dp group's batch B (sequences) of length T <=
 * seq_len on context ctx (plan mode picks the layout; with sp > 1 each
 * rank holds T/sp positions and attention runs round the sp ring,
 * lib/parallel/seq.h): the parameter list with each shard's size and sync
 * group, and the activations (from arena, which must live on the backend's
 * device).  Parameters have no storage yet: a registry (pt_train_create,
 * lib/train) binds them and calls pt_gpt_bind_params, which initialises
 * them as GPT-2 does from `seed` (normal(0, 0.02), residual projections
 * scaled by 1/sqrt(2L), LN = 1/0, biases 0): every parameter has its own
 * RNG stream, so the full tensors are the same for any layout and world
 * size and each rank keeps its shard.
 * Errors: PT_EINVAL (config does not fit tp, bad sizes, arena on another
 * device than the backend), PT_ENOMEM, PT_EUNSUPP (layout not built, or
 * no table of the backend for the plan's precision). */
int pt_gpt_create(pt_gpt *m, const pt_gpt_config *cfg, pt_pctx *ctx, const pt_backend *be,
                  pt_arena *arena, int B, int T, uint64_t seed);
/* The same for one pipeline rank's share (st): B is the microbatch's
 * sequences per dp group.  m->params holds only the parameters of the
 * stage's chunks and ends (wte on the first and the last stage, wpe on the
 * first, lnf on the last), each with its whole-model `index`, so initial
 * values are the same for every split; with pp > 1 the two copies of wte
 * are tied (`tied` = &ctx->embed; the last stage's copy is not a norm
 * owner).  st->nslots activation sets are allocated; under recompute
 * (ctx->plan.recompute) a slot keeps only block outputs (block) or all but
 * the attention's output and row log-sum-exp (attention: the backward runs
 * the flash forward again from the kept qkv), sharing one scratch set.
 * pt_gpt_create is this with the whole model, 1 slot, 1 microbatch.
 * Errors: those of pt_gpt_create; PT_EINVAL for chunk ranges outside
 * [0, n_layer), nchunks or nslots < 1, microbatches < 1. */
int pt_gpt_create_stage(pt_gpt *m, const pt_gpt_config *cfg, pt_pctx *ctx, const pt_backend *be,
                        pt_arena *arena, int B, int T, uint64_t seed, const pt_gpt_stage *st);
/* Select slot k's activations (0 <= k < nslots) for the following
 * set_batch / forward / backward calls.  PT_EINVAL outside the range. */
int pt_gpt_use_slot(pt_gpt *m, int k);
/* Activation bytes a slot keeps for one block under recompute mode rc
 * (pt_recompute), at the model's sizes and precision (m->ea bytes per
 * activation, 4 per fp32 statistic): the formula behind the arena peaks
 * (Korthikanti et al. 2022, sec. 4), linear in the sequence length (flash
 * attention: no T^2 term). */
size_t pt_gpt_block_act_bytes(const pt_gpt *m, int rc);
/* Free the activations and the parameter list (not the parameter storage,
 * which belongs to its registry).  A zeroed or freed model is a no-op. */
void pt_gpt_free(pt_gpt *m);

/* After every params[i].data and .grad points at [shard.numel] floats and
 * .work at [shard.numel] ACT elements (.data itself under fp32): set the
 * layer views and write the initial values (host RNG, then the layout's
 * param_slice through ops->copy2d into .data, and ops->convert into .work
 * where it is another buffer).  PT_EINVAL naming the first unbound
 * parameter, PT_ENOMEM. */
int pt_gpt_bind_params(pt_gpt *m);
/* Set the views (layer linears, LayerNorm vectors, wte, ...) from
 * params[i].work/.grad again, without initialising; for a hook that
 * repointed them (NULL storage gives NULL views: a ZeRO-3 piece that is
 * not gathered).  Always PT_OK. */
int pt_gpt_bind_views(pt_gpt *m);

/* ---- forward and backward by pieces ------------------------------------
 * A pipeline stage runs a contiguous block range [l0, l1); the first stage
 * also runs the embedding, the last the head.  Boundary activations are
 * explicit: x [Bl*Tl, Cr] ACT (residual side, the layout's rows and columns).
 * Every backward ACCUMULATES into the parameter gradients of this rank's
 * shards; summing them over the sync groups is the training step's job
 * (pt_train_sync).  Errors: PT_EINVAL (unbound parameters, a block range
 * outside [0, n_layer)), PT_ENOMEM (layout scratch), PT_ECOMM. */

/* Take the dp group's inputs/targets [B, T] (host memory, token ids <
 * vocab; every rank of a tp or sp group passes the same B sequences and
 * the layout picks its rows): validates them and copies this rank's
 * positions.  PT_EINVAL naming the first bad id and its position. */
int pt_gpt_set_batch(pt_gpt *m, const int32_t *inputs, const int32_t *targets);
/* *x_out = the embedding output m->enc [Bl*Tl, Cr] (token + position). */
int pt_gpt_embed_forward(pt_gpt *m, void **x_out);
/* Blocks l0 .. l1-1 on x_in [Bl*Tl, Cr] (kept as a view until the
 * backward); *x_out = the output of block l1-1 (model-owned; x_in when
 * l0 == l1). */
int pt_gpt_blocks_forward(pt_gpt *m, int l0, int l1, const void *x_in, void **x_out);
/* Final LayerNorm, tied head and cross-entropy on x_in [Bl*Tl, Cr] (kept
 * until the backward); *loss = mean cross-entropy (nats/token) over the
 * GLOBAL batch (B*dp sequences; an allreduce over world).  The head is the
 * fused classifier: no logits are kept (pt_gpt_logits computes a row's). */
int pt_gpt_head_forward(pt_gpt *m, const void *x_in, float *loss);
/* After a head forward: the logits of local head row `row` (0 <= row <
 * Bl*Tl) over this rank's vocabulary shard, written to out [g.Vl] (host
 * memory; ids tp_rank*Vl .., padding included), through ops (one GEMM row
 * of the tied head on the final LayerNorm's output).  For layouts whose
 * head rows hold the full width (1d, and off) and no ZeRO hook (a ZeRO-3
 * hook releases the head's parameters); PT_EUNSUPP for 2d/2.5d/3d or a
 * hook, PT_EINVAL for a row outside the range or no head forward yet,
 * PT_ENOMEM. */
int pt_gpt_logits(pt_gpt *m, int row, float *out);
/* dx [Bl*Tl, Cr] = d loss / d x_in of the head (overwritten). */
int pt_gpt_head_backward(pt_gpt *m, void *dx);
/* In place: dx holds d loss / d(output of block l1-1) and leaves holding
 * d loss / d(input of block l0). */
int pt_gpt_blocks_backward(pt_gpt *m, int l0, int l1, void *dx);
/* Embedding gradients from dx = d loss / d(embedding output). */
int pt_gpt_embed_backward(pt_gpt *m, const void *dx);

/* The last stage's head forward and backward at once (pipelines): final
 * LN, tied head and cross-entropy on x_in [Bl*Tl, Cr]; *loss_sum += this
 * rank's part of the summed token losses (nats; no collective outside the
 * layout's tp group: the caller sums it over world once per step); dx
 * [Bl*Tl, Cr] = d(mean loss over m*B*dp*T tokens) / d x_in.  Where the
 * layout has head_step and the ops table classifier_rows_fwd/bwd (the 1D
 * layout on the CPU tables), the classifier runs forward and backward in
 * one pass over chunks of rows whose logits it holds whole
 * (pt_classifier_step: 6 N C V FLOPs, not 8; the logits of
 * pt_classifier_chunk_rows(N, Vl) rows, 256 by default); else head_fwd then
 * head_bwd. */
int pt_gpt_head_step(pt_gpt *m, const void *x_in, void *dx, double *loss_sum);
/* 1 when pt_gpt_head_step runs the classifier's forward and backward in one
 * pass (the layout's head_step and the ops table's classifier_rows_fwd/bwd
 * exist), else 0.  Then the head is one piece for the ZeRO hooks: FWD_PRE,
 * BWD_PRE, the work, FWD_POST, BWD_POST. */
int pt_gpt_head_fused(const pt_gpt *m);

/* The whole model: set_batch, embed, blocks 0..L-1, head.  Saves
 * activations for pt_gpt_backward. */
int pt_gpt_forward(pt_gpt *m, const int32_t *inputs, const int32_t *targets, float *loss);
/* Forward and backward of the whole model in one call (the training step):
 * as pt_gpt_forward then pt_gpt_backward, with the head's forward and
 * backward in one pass (pt_gpt_head_step: where the layout and ops table
 * have the chunked classifier, the logits are computed once); *loss the
 * mean token loss over the world, as pt_gpt_forward's. */
int pt_gpt_forward_backward(pt_gpt *m, const int32_t *inputs, const int32_t *targets, float *loss);
/* Backward of the last pt_gpt_forward (head, blocks L-1..0, embedding);
 * accumulates this rank's partial gradients, NOT summed over the sync
 * groups (see pt_train_sync). */
int pt_gpt_backward(pt_gpt *m);

/* The full (unsharded) initial value of parameter i, [rows*cols] floats
 * (host memory), as pt_gpt_bind_params generates it; used by tests to
 * compare layouts. */
void pt_gpt_param_init_full(const pt_param *p, int index, uint64_t seed, float *full);

#endif
