/* SPDX-License-Identifier: MIT */
/* ZeRO stage 0 as a pt_train strategy: plain data parallelism (train.h,
 * "Registry" and "Strategy").  Four flat fp32 buffers of every local shard,
 * bucket by bucket (PyTorch DDP's gradient buckets, Li et al. 2020, section
 * 3.2); one allreduce per bucket; every rank updates its whole shard. */
#include "train/strategy.h"

#define TRY(x) do { int rc_ = (x); if (rc_) return rc_; } while (0)

static int allreduce_create(pt_train *t)
{
    pt_gpt *m = t->model;
    const size_t total = t->nfloats;
    float **bufs[] = {&t->params_memory, &t->grads_memory, &t->m_memory, &t->v_memory};
    for (size_t k = 0; k < sizeof bufs / sizeof bufs[0]; k++) {
        *bufs[k] = pt_arena_alloc(t->arena, (total ? total : 1) * sizeof(float));
        if (!*bufs[k])
            return pt_fail(PT_ENOMEM, "out of memory for 4 x %zu parameter floats (parameters, gradients, AdamW m, v)",
                           total);
    }
    const pt_dtype act = t->ops->act;
    t->work_memory = t->params_memory;
    if (act != PT_F32 && !(t->work_memory = pt_arena_alloc(t->arena, (total ? total : 1) * pt_dtype_size(act))))
        return pt_fail(PT_ENOMEM, "out of memory for the %s copy of %zu parameters", pt_dtype_name(act), total);
    /* buckets: parameters grouped by the group their gradient is summed
     * over, in order of first appearance, so each group is one range */
    size_t off = 0;
    pt_train_bucket *b;
    int rc;
    for (int i = 0; !(rc = pt_train_bucket_next(t, &i, off, &b)) && b; i++) {
        for (int j = i; j >= 0; j = pt_train_next_in_group(m, j + 1, b->comm)) {
            pt_param *p = &m->params[j];
            p->data = t->params_memory + off;
            p->work = pt_elem(t->work_memory, off, act);
            p->grad = t->grads_memory + off;
            off += (size_t)p->shard.numel;
        }
        b->n = off - b->off;
    }
    return rc ? rc : pt_gpt_bind_params(m);
}

static void allreduce_free(pt_train *t)
{
    if (t->work_memory != t->params_memory) pt_arena_free(t->arena, t->work_memory);
    pt_arena_free(t->arena, t->v_memory);
    pt_arena_free(t->arena, t->m_memory);
    pt_arena_free(t->arena, t->grads_memory);
    pt_arena_free(t->arena, t->params_memory);
}

static void allreduce_zero_grad(pt_train *t)
{
    if (t->grads_memory) t->ops->zero(t->grads_memory, t->grads_n, PT_F32);
}

static int allreduce_sync(pt_train *t)
{
    for (int k = 0; k < t->nbuckets; k++)
        TRY(pt_allreduce_sum(t->buckets[k].comm, t->grads_memory + t->buckets[k].off, t->buckets[k].n));
    return pt_train_sync_tied(t);
}

/* each distinct shard on its norm owner (pt_pshard.norm_owner) */
static double allreduce_grad_sumsq(const pt_train *t)
{
    const pt_gpt *m = t->model;
    double s = 0;
    for (int i = 0; i < m->nparams; i++) {
        const pt_param *p = &m->params[i];
        if (p->shard.norm_owner) s += t->ops->sumsq(p->grad, (size_t)p->shard.numel, PT_F32);
    }
    return s;
}

static int allreduce_update(pt_train *t, float lr, float clip)
{
    if (clip != 1.0f) t->ops->scale(t->grads_memory, clip, t->nfloats, PT_F32);
    const pt_gpt *m = t->model;
    for (int i = 0; i < m->nparams; i++) {
        const pt_param *p = &m->params[i];
        const size_t off = (size_t)(p->data - t->params_memory); /* moments sit beside the parameter */
        pt_adamw_update(t->ops, p->data, p->work == (void *)p->data ? NULL : p->work, p->grad, t->m_memory + off,
                        t->v_memory + off, (size_t)p->shard.numel, lr, p->decay ? t->opt.weight_decay : 0.0f, &t->opt,
                        t->step);
    }
    return PT_OK;
}

/* the whole shard */
static void allreduce_owned(const pt_train *t, int i, int64_t *lo, int64_t *hi, float **data, float **grad, float **m,
                            float **v)
{
    pt_param *p = &t->model->params[i];
    const size_t off = (size_t)(p->data - t->params_memory);
    *lo = 0;
    *hi = p->shard.numel;
    *data = p->data;
    *grad = p->grad;
    *m = t->m_memory + off;
    *v = t->v_memory + off;
}

static int allreduce_state_loaded(pt_train *t)
{
    if (t->work_memory != t->params_memory) /* the forward's copy of the loaded masters */
        t->ops->convert(t->work_memory, t->ops->act, t->params_memory, PT_F32, t->nfloats);
    return PT_OK;
}

static double allreduce_sync_bytes(const pt_train *t)
{
    double b = 0;
    for (int k = 0; k < t->nbuckets; k++)
        b += pt_zero_comm_bytes(0, (double)t->buckets[k].n, t->buckets[k].comm->size, (int)t->model->ea);
    return b;
}

const pt_train_strategy pt_train_allreduce = {
    .name = "allreduce",
    .zero_stage = 0,
    .create = allreduce_create,
    .free_state = allreduce_free,
    .zero_grad = allreduce_zero_grad,
    .sync = allreduce_sync,
    .sync_bytes = allreduce_sync_bytes,
    .grad_sumsq = allreduce_grad_sumsq,
    .update = allreduce_update,
    .owned = allreduce_owned,
    .state_loaded = allreduce_state_loaded,
};
