/* The training step (DESIGN.md, lib/train): the parameter registry, the
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
 * Strategy.  What happens between the backward and the next forward is a
 * pt_train_strategy: `sync` makes the gradients global, `update` takes the
 * norm, clips and steps the optimizer.  The default (pt_train_allreduce)
 * is plain data parallelism: allreduce each bucket over its group, every
 * rank updates its whole shard.  ZeRO (Rajbhandari et al. 2020) is another
 * strategy over the same buckets (reduce-scatter, update the owned slice,
 * allgather), not a model change; a pipeline stage is the model's block
 * range (pt_gpt_blocks_forward/backward).
 *
 * All arithmetic is the backend's (ops->zero, sumsq, scale, adamw);
 * communication is pt_comm.  Memory: 16 bytes per local parameter (4
 * buffers of fp32) from the arena, so arena->peak counts them.
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

/* How gradients become global and parameters get updated.  Both return
 * PT_OK or a PT_E* code with the message set. */
typedef struct pt_train_strategy {
    const char *name; /* "allreduce" */
    /* after the backward: each rank's partial gradients -> the gradient of
     * the global mean loss (on the ranks that update those parameters) */
    int (*sync)(struct pt_train *t);
    /* global L2 norm (*norm, pre-clip), clip to opt.grad_clip, one AdamW
     * step at learning rate lr */
    int (*update)(struct pt_train *t, float lr, double *norm);
} pt_train_strategy;

/* Data parallelism without sharding (ZeRO stage 0): one allreduce per
 * bucket, every rank updates its whole shard. */
extern const pt_train_strategy pt_train_allreduce;

typedef struct pt_train {
    pt_gpt *model;                 /* the model trained (not owned) */
    const pt_ops_f32 *ops;         /* its backend's ops */
    pt_arena *arena;               /* the flat buffers' arena (the model's) */
    pt_adamw_cfg opt;              /* betas, eps, weight decay, clip */
    const pt_train_strategy *strategy;
    size_t nfloats;                /* local parameter floats (sum of shard numel) */
    float *params_memory;          /* [nfloats] every shard, bucket by bucket */
    float *grads_memory;           /* [nfloats] gradients, same layout */
    float *m_memory;               /* [nfloats] AdamW first moment */
    float *v_memory;               /* [nfloats] AdamW second moment */
    int nbuckets;                  /* buckets in use */
    pt_train_bucket buckets[PT_TRAIN_MAX_BUCKETS];
    int step;                      /* AdamW steps taken (t of the bias correction) */
} pt_train;

/* Build the registry of model m (created by pt_gpt_create, parameters not
 * yet bound): allocate the four flat buffers from m's arena (16 bytes per
 * local parameter), group them into buckets, bind and initialise the
 * parameters.  opt: AdamW settings (copied); strategy NULL = allreduce.
 * Errors: PT_ENOMEM, PT_EINVAL (more sync groups than buckets). */
int pt_train_create(pt_train *t, pt_gpt *m, const pt_adamw_cfg *opt, const pt_train_strategy *strategy);
/* Release the flat buffers (the model stays; free it after). */
void pt_train_free(pt_train *t);

/* ---- the step by pieces (tests compare between them) ---- */
/* grads = 0 (ops->zero over the flat buffer). */
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
 * distinct shard counted once (on its norm owner, pt_pshard.norm_owner),
 * sum of squares by ops->sumsq, one allreduce of a double over world.
 * (Pascanu et al. 2013, section 3.2.) */
int pt_train_grad_norm(pt_train *t, double *norm);
/* The strategy's update: norm, clip, AdamW (Loshchilov & Hutter 2019).
 * *norm (may be NULL) = pre-clip global norm.  PT_EINVAL when the norm is
 * not finite (training diverged; the message names the step). */
int pt_train_update(pt_train *t, float lr, double *norm);

/* One training step: zero_grad -> forward -> backward -> sync -> norm,
 * clip -> AdamW at lr.  *loss (may be NULL): the step's global mean loss
 * before the update; *norm (may be NULL): the pre-clip gradient norm.
 * Errors: those of the pieces. */
int pt_train_step(pt_train *t, const int32_t *inputs, const int32_t *targets, float lr, float *loss,
                  double *norm);

#endif
