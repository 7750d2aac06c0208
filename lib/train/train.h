/* SPDX-License-Identifier: MIT */
/* The training step (lib/train; docs/ARCHITECTURE.md): the parameter registry, the
 * gradient buckets by sync group, gradient synchronisation, the global
 * gradient norm and clipping, AdamW with its moments, and one
 * pt_train_step that ptrain-run, the benches and the tests share.
 *
 * Registry.  The model (lib/model/gpt.h) lists its parameters with each
 * rank's shard size and the group its partial gradients are summed over
 * (pt_pshard.sync, chosen by the layout).  pt_train_create lays every
 * shard out in four flat buffers (parameters, gradients, AdamW m and v),
 * grouped bucket by bucket: the parameters of one sync group are
 * contiguous, so one allreduce per group synchronises them (as PyTorch
 * DDP's gradient buckets, Li et al. 2020, section 3.2, with one bucket per
 * group rather than per 25 MB).  It then binds the model's views and
 * writes the initial values (pt_gpt_bind_params).
 *
 * Strategy.  What happens between the backward and the next forward, and
 * how the state is spread over the ranks, is a pt_train_strategy: a table
 * of hooks (create/free the state, zero_grad, sync, grad_sumsq, update,
 * owned, state_loaded) that the entry points below call and nothing else
 * (train.c never looks at the ZeRO stage).  The default
 * (pt_train_allreduce, allreduce.c) is plain data parallelism: allreduce
 * each bucket over its group, every rank updates its whole shard.  ZeRO
 * 1-3 (Rajbhandari et al. 2020, zero.c) are three more tables over the
 * same buckets (reduce-scatter, update the owned slice, allgather), not a
 * model change; a pipeline stage is the model's block range
 * (pt_gpt_blocks_forward/backward).  The step keeps what every strategy
 * shares: the norm's sum over world, the divergence check and the clip
 * factor (pt_train_update).
 *
 * All arithmetic is the backend's (ops->zero, sumsq, scale, adamw);
 * communication is pt_comm.  Memory: 16 bytes per local parameter (4
 * buffers of fp32) from the arena, so arena->peak counts them; under ZeRO
 * the per-stage amounts below ("ZeRO"), selected by
 * pt_train_strategy_zero(plan.zero).
 *
 * Mixed precision (a model whose ops->act is bf16; Micikevicius et al.
 * 2018): the four buffers stay fp32 (master weights, gradients, AdamW
 * moments), and a fifth, work_memory, holds the bf16 copy of the
 * parameters that the forward reads (pt_param.work, 2 bytes per local
 * parameter: 18 in all).  AdamW writes it in the same pass as the master
 * (ops->adamw's work argument); a checkpoint load refreshes it
 * (pt_train_state_loaded).  Gradients are summed in fp32.  Under fp32,
 * work_memory is params_memory.
 *
 * Structs follow llm.c's train_gpt2.c (a shape on every field).
 */
#ifndef PTRAIN_TRAIN_H
#define PTRAIN_TRAIN_H
#include "model/gpt.h"
#include "optim/adamw.h"

/* at most one bucket per sync group of the context (ctx->sync[]) */
#define PT_TRAIN_MAX_BUCKETS (1 << PT_TP_AXES)

/* The parameters whose gradients are summed over one group: a contiguous
 * range of the flat buffers. */
typedef struct pt_train_bucket {
    pt_comm *comm;  /* group of the sum (one of ctx->sync[]; contains dp and sp) */
    size_t off;     /* first float of the range in every flat buffer */
    size_t n;       /* floats in the range */
} pt_train_bucket;

struct pt_train;

/* A training strategy: how the state is laid out across the ranks and what
 * happens between the backward and the next forward.  pt_train's entry
 * points (pt_train_create, _zero_grad, _sync, _grad_norm, _update, _owned,
 * _owned_state, _state_loaded, _free) call these hooks and nothing else
 * depends on the strategy, so stage 0 (pt_train_allreduce, allreduce.c)
 * and ZeRO 1-3 (zero.c) are four instances of this table, and a new stage
 * or sync scheme is one more table (lib/train/strategy.h says what an
 * implementation may use).  Every hook returning int returns PT_OK or a
 * PT_E* code with the message set. */
typedef struct pt_train_strategy {
    const char *name; /* "allreduce", "zero1", "zero2", "zero3" */
    int zero_stage;   /* the plan's ZeRO stage (pt_plan.zero) this table implements, 0..3 */
    /* lay out the state from t->arena (t->model, ops, opt, nfloats set, the
     * rest zero): params/grads/m/v_memory, work_memory, t->buckets, t->impl;
     * point the model's parameters at it and write the initial values
     * (pt_gpt_bind_params).  On an error free_state runs next. */
    int (*create)(struct pt_train *t);
    /* release what create allocated (also a partial create); t->arena is
     * still set, pt_train_free clears the rest */
    void (*free_state)(struct pt_train *t);
    /* gradients = 0, every buffer a backward accumulates into */
    void (*zero_grad)(struct pt_train *t);
    /* after the backward: each rank's partial gradients -> the gradient of
     * the global mean loss, on the ranks that update those parameters
     * (allreduce or reduce-scatter per bucket, the tied sum) */
    int (*sync)(struct pt_train *t);
    /* this rank's part of the squared global gradient norm: the sum of
     * squares (ops->sumsq) of the synchronised gradient elements it counts,
     * each element of the model counted on exactly one rank of the world
     * (pt_train_grad_norm sums over world) */
    double (*grad_sumsq)(const struct pt_train *t);
    /* one AdamW step (t->step already counts it) at learning rate lr on the
     * parameters this rank owns, their gradients first scaled by clip (1:
     * no clipping); then every copy the next forward reads is current
     * (ZeRO: the allgather of the parameters) */
    int (*update)(struct pt_train *t, float lr, float clip);
    /* parameter i's (0 <= i < nparams) owned elements [*lo, *hi) of its
     * local shard, and pointers at element *lo of its master parameter,
     * synchronised gradient, AdamW m and v (pt_train_owned, _owned_state) */
    void (*owned)(const struct pt_train *t, int i, int64_t *lo, int64_t *hi, float **data, float **grad, float **m,
                  float **v);
    /* after the owned parameters were overwritten (pt_train_state_loaded) */
    int (*state_loaded)(struct pt_train *t);
    /* pt_train_sync_bytes */
    double (*sync_bytes)(const struct pt_train *t);
} pt_train_strategy;

/* Data parallelism without sharding (ZeRO stage 0): one allreduce per
 * bucket, every rank updates its whole shard. */
extern const pt_train_strategy pt_train_allreduce;

typedef struct pt_train {
    pt_gpt *model;                 /* the model trained (not owned) */
    const pt_ops *ops;             /* its backend's ops (the model's table) */
    pt_arena *arena;               /* the flat buffers' arena (the model's) */
    pt_adamw_cfg opt;              /* betas, eps, weight decay, clip */
    const pt_train_strategy *strategy;
    size_t nfloats;                /* local parameter floats (sum of shard numel) */
    float *params_memory;          /* [nfloats] every shard, bucket by bucket: the fp32 master */
    void *work_memory;             /* the ACT copy the forward reads, same layout ([nfloats] ops->act
                                    * elements; ZeRO: see zero.c); params_memory under fp32 */
    float *grads_memory;           /* [nfloats] gradients, same layout */
    float *m_memory;               /* [nfloats] AdamW first moment */
    float *v_memory;               /* [nfloats] AdamW second moment */
    int nbuckets;                  /* buckets in use */
    pt_train_bucket buckets[PT_TRAIN_MAX_BUCKETS];
    int step;                      /* AdamW steps taken (t of the bias correction) */
    size_t grads_n;                /* floats of grads_memory (nfloats; ZeRO: see zero.c) */
    void *impl;                    /* the strategy's own state (ZeRO: its shard layout; NULL under allreduce) */
} pt_train;

/* Build the registry of model m (created by pt_gpt_create, parameters not
 * yet bound): the strategy's create hook allocates the state from m's
 * arena (allreduce: four flat buffers, 16 bytes per local parameter; a
 * bf16 model also the work copy, 2 more; ZeRO: the per-stage amounts
 * below), groups it into buckets, binds and initialises the parameters.
 * opt: AdamW settings (copied); strategy NULL = allreduce.
 * Errors: PT_ENOMEM, PT_EINVAL (more sync groups than buckets), the
 * strategy's (ZeRO: pt_comm's). */
int pt_train_create(pt_train *t, pt_gpt *m, const pt_adamw_cfg *opt, const pt_train_strategy *strategy);
/* As pt_train_create, but the training state (parameters, gradients,
 * AdamW moments and, under ZeRO, the gathered parameters and per-piece
 * gradients of the step) comes from `state` instead of the model's arena,
 * so state->peak is the model-state memory alone (ZeRO's Psi terms,
 * Rajbhandari et al. 2020, section 3) and the model's arena holds the
 * activations.  state must live on the model's device.  Errors as
 * pt_train_create. */
int pt_train_create_in(pt_train *t, pt_gpt *m, pt_arena *state, const pt_adamw_cfg *opt,
                       const pt_train_strategy *strategy);
/* Release the state (the strategy's free_state hook; the model stays:
 * free it after). */
void pt_train_free(pt_train *t);

/* ---- the step by pieces (tests compare between them) ---- */
/* grads = 0 (the strategy's zero_grad: ops->zero over the flat buffer
 * and, under ZeRO 2/3, the full-size gradients in flight). */
void pt_train_zero_grad(pt_train *t);
/* Forward and backward of the whole model on the dp group's [B, T] host
 * token ids (pt_gpt_forward/backward); *loss = global mean cross-entropy,
 * nats/token.  Gradients accumulate, unsynchronised. */
int pt_train_forward_backward(pt_train *t, const int32_t *inputs, const int32_t *targets, float *loss);
/* The strategy's gradient synchronisation (allreduce: one per bucket,
 * 2(p-1)/p * 4n bytes sent per rank for a bucket of n floats over p ranks). */
int pt_train_sync(pt_train *t);
/* The tied parameters' second sum (pt_param.tied: the wte copies of the
 * first and last pipeline stage, Megatron-LM's embedding group): one
 * allreduce of each such gradient over its tied group, 2(2-1)/2 * 4n
 * bytes per rank.  Strategies call it after their own sync. */
int pt_train_sync_tied(pt_train *t);
/* Global L2 norm of the gradient over all unique parameters: each
 * distinct shard counted once (on its norm owner, pt_pshard.norm_owner;
 * ZeRO: each rank its own slices of those), sum of squares by ops->sumsq
 * (the strategy's grad_sumsq), one allreduce of a double over world.
 * (Pascanu et al. 2013, section 3.2.)  Errors: pt_comm's. */
int pt_train_grad_norm(pt_train *t, double *norm);
/* Norm (pt_train_grad_norm), clip factor min(1, grad_clip / norm), then
 * the strategy's update: AdamW on the owned parameters (Loshchilov &
 * Hutter 2019) and, under ZeRO, their allgather.  *norm (may be NULL) =
 * pre-clip global norm.  PT_EINVAL when the norm is not finite (the
 * message gives the norm and AdamW's step; nothing is updated, and where
 * the NaN or infinity came from -- weights trained so far, or loaded -- is
 * the caller's to say). */
int pt_train_update(pt_train *t, float lr, double *norm);

/* One training step: zero_grad -> forward -> backward -> sync -> norm,
 * clip -> AdamW at lr.  *loss (may be NULL): the step's global mean loss
 * before the update; *norm (may be NULL): the pre-clip gradient norm.
 * Errors: those of the pieces. */
int pt_train_step(pt_train *t, const int32_t *inputs, const int32_t *targets, float lr, float *loss,
                  double *norm);

/* ---- ZeRO (Rajbhandari et al. 2020, "ZeRO: Memory Optimizations Toward
 * Training Trillion Parameter Models", section 5) -------------------------
 *
 * Sharding group.  Each bucket's parameters are sharded over the bucket's
 * sync group (pt_train_bucket.comm: dp x sp, plus the tp ranks that hold a
 * replica of the same tp shard, e.g. LayerNorm parameters under 1d).  With
 * sp = 1 and tp = 1 that is exactly the dp group of the paper.  Why the
 * whole sync group: every rank in it holds an identical copy of the shard
 * and needs the identical summed gradient and update, so every one of them
 * can own 1/N of it; a tp-sharded weight is dp-sharded within each tp
 * shard (composition with tp), a pipeline stage shards its own registry
 * (composition with pp).
 *
 * Units.  Within a bucket the parameters are cut into units by model piece
 * (the token embedding wte, the position embedding, each block, the final
 * LayerNorm; pt_gpt's param_hook pieces), each padded with zeros to a
 * multiple of the group size N.  Rank r of the group owns floats
 * [r s, (r+1) s) of each unit (s = padded / N), as llm.c's
 * multi_gpu_get_shard_offset with padding instead of a divisibility error.
 *
 *   stage 1 (P_os, section 5.1): AdamW m and v only for the own slices;
 *     sync = reduce-scatter of each unit's gradient, update = norm and
 *     AdamW on the own slice, then allgather of the parameters.
 *     State per rank: 4 Psi (params) + 4 Psi (grads) + 8 Psi / N bytes.
 *   stage 2 (P_os+g, section 5.2): the gradient is kept only for the own
 *     slice; a unit's full gradient exists only while the backward produces
 *     it: allocated at the first backward piece that touches it, reduce-
 *     scattered and freed after the last (pt_gpt.param_hook), so the peak
 *     shows one piece's gradient, not the model's.
 *     State: 4 Psi + 12 Psi / N (+ one unit's gradient in flight).
 *   stage 3 (P_os+g+p, section 5.3): the parameters are sharded too; each
 *     unit is allgathered just before its piece's forward and backward and
 *     freed after; its gradient is reduce-scattered after its backward.
 *     State: 16 Psi / N (+ the units in use).
 * Mixed precision (bf16 work copy, section 3.1's fp16 parameters with fp32
 * optimizer states, K = 12 for master + m + v): the fp32 master is part of
 * the optimizer state and only the own slices are kept from stage 1 on;
 * the bf16 work copy is what stages 1 and 2 keep whole and regather (in
 * bf16, half the bytes) and stage 3 shards and gathers per piece; the
 * gradients stay fp32 (reduce-scattered in fp32).
 *     State: stage 0 18 Psi; 1: 6 Psi + 12 Psi / N; 2: 2 Psi + 16 Psi / N;
 *     3: 18 Psi / N.
 * Tied weight (pp > 1: wte on the first and last stage): its gradient is
 * first summed over pt_param.tied, then reduce-scattered; under stages 2
 * and 3 that happens in pt_train_sync (the first and last stage reach the
 * tied sum at different times of a pipeline schedule), so wte's gradient
 * stays full-size on those stages until the sync.
 * Norm: every rank sums the squares of its own slices of the shards that
 * count (the group's norm owner), one allreduce of a double over world:
 * each element once, the same norm as stage 0 (Pascanu et al. 2013). */

/* The training strategy of ZeRO stage 0..3 (stage 0 = pt_train_allreduce),
 * for pt_train_create: the table whose zero_stage is `stage`.  NULL with a
 * one-line message naming the stage and the valid ones (0, 1, 2, 3)
 * otherwise.  Stages 2 and 3 install the model's param_hook
 * (lib/model/gpt.h). */
const pt_train_strategy *pt_train_strategy_zero(int stage);

/* The part of parameter i's local shard [shard.numel] this rank owns and
 * updates: elements [*lo, *hi) (empty: *lo == *hi), with *data and *grad
 * pointing at element *lo of the up-to-date parameter (after the update)
 * and of the synchronised gradient (after pt_train_sync).  Under allreduce
 * that is the whole shard.  PT_EINVAL for i outside [0, nparams). */
int pt_train_owned(const pt_train *t, int i, int64_t *lo, int64_t *hi, const float **data, const float **grad);

/* Mutable view of parameter i's owned state for checkpoints (lib/ckpt):
 * elements [*lo, *hi) of its local shard [shard.numel], with *data, *m and
 * *v pointing at element *lo of the parameter, AdamW m and AdamW v (the
 * same ranges as pt_train_owned).  After writing into them on every rank,
 * call pt_train_state_loaded.  PT_EINVAL for i outside [0, nparams). */
int pt_train_owned_state(pt_train *t, int i, int64_t *lo, int64_t *hi, float **data, float **m, float **v);
/* After the owned parameters were overwritten on every rank (a checkpoint
 * load): make the replicated copies and the work copy current again.
 * ZeRO 1 and 2: one allgather per unit over its group ((N-1)/N * e npad
 * bytes received per rank, e the work copy's element size); allreduce and
 * ZeRO 3: no communication (a bf16 work copy is converted from the owned
 * masters).  Collective over every rank of the model.  Errors: PT_ENOMEM,
 * pt_comm's. */
int pt_train_state_loaded(pt_train *t);
/* Whether this rank's owned state is finite: for every parameter, its
 * owned fp32 master weights (pt_train_owned_state's [lo, hi)) and, with
 * moments != 0, its AdamW m and v.  One ops->sumsq (double sum of squares,
 * finite exactly when every float is) per tensor; a tensor that fails is
 * copied to the host to find its first bad element.  Not collective (each
 * rank checks what it owns: together, the whole model).  Costs one read
 * of the owned weights (three with moments).  Errors: PT_EINVAL, one line
 * naming which of weight / AdamW m / AdamW v, the first bad element (its
 * index in this rank's local shard), the tensor and the value. */
int pt_train_check_finite(pt_train *t, int moments);

/* Model-state bytes per rank of ZeRO stage 0..3 for psi local parameters
 * sharded over N ranks.  act_bytes 4 (fp32 everywhere: params 4 psi,
 * gradients 4 psi, AdamW m + v 8 psi): 16 psi; 8 psi + 8 psi/N; 4 psi +
 * 12 psi/N; 16 psi/N (Rajbhandari et al. 2020, section 5 and Figure 1,
 * with K = 8 and 4-byte parameters and gradients).  act_bytes 2 (bf16 work
 * copy, fp32 gradients, master + m + v K = 12): 18 psi; 6 psi + 12 psi/N;
 * 2 psi + 16 psi/N; 18 psi/N.  0 for a bad stage, N < 1 or act_bytes
 * other than 2 or 4. */
double pt_zero_state_bytes(int stage, double psi, int N, int act_bytes);
/* Bytes this rank sends per step for the gradient/parameter traffic of n
 * parameters over N ranks (ring model of lib/comm), act_bytes the work
 * copy's element size (4 fp32, 2 bf16): stage 0 2(N-1)/N 4n (the fp32
 * allreduce); stages 1-2 (N-1)/N (4 + act_bytes) n (fp32 reduce-scatter,
 * allgather of the work copy); stage 3 (N-1)/N (4 + 2 act_bytes) n (two
 * allgathers and one reduce-scatter: at fp32 the paper's 3 Psi vs 2 Psi,
 * section 7.2).  0 for a bad stage, N < 1 or act_bytes other than 2 or 4. */
double pt_zero_comm_bytes(int stage, double n, int N, int act_bytes);
/* Bytes this rank sends for one forward, backward and sync under its
 * strategy over the sync groups (ring model of lib/comm): the sum of
 * pt_zero_comm_bytes over its buckets (stage 0) or its ZeRO units (their
 * padded floats), except that a ZeRO-3 unit whose last user is the head is
 * gathered once, not twice, where the model runs the head as one piece
 * (pt_gpt_head_fused): its forward's gathered copy is still held when the
 * head's backward starts, as FSDP keeps the last layer's between them (the
 * tied embedding is such a unit).  The tied embedding's sum over the
 * pipeline's ends is not counted. */
double pt_train_sync_bytes(const pt_train *t);

#endif
