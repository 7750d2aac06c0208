/* SPDX-License-Identifier: MIT */
/* The training step: registry, buckets, sync, norm, clip, AdamW (see train.h). */
#include "train/train.h"
#include "train/zero.h"

#include <math.h>
#include <string.h>

#define TRY(x) do { int rc_ = (x); if (rc_) return rc_; } while (0)

int pt_train_create(pt_train *t, pt_gpt *m, const pt_adamw_cfg *opt, const pt_train_strategy *strategy)
{
    return pt_train_create_in(t, m, m->arena, opt, strategy);
}

int pt_train_create_in(pt_train *t, pt_gpt *m, pt_arena *state, const pt_adamw_cfg *opt,
                       const pt_train_strategy *strategy)
{
    memset(t, 0, sizeof *t);
    t->model = m;
    t->ops = m->ops;
    t->arena = state;
    t->opt = *opt;
    t->strategy = strategy ? strategy : &pt_train_allreduce;
    size_t total = 0;
    for (int i = 0; i < m->nparams; i++) total += (size_t)m->params[i].shard.numel;
    t->nfloats = total;
    t->grads_n = total;
    if (t->strategy->attach) {
        int rc = t->strategy->attach(t);
        if (rc) pt_train_free(t);
        return rc;
    }
    float **bufs[] = {&t->params_memory, &t->grads_memory, &t->m_memory, &t->v_memory};
    for (size_t k = 0; k < sizeof bufs / sizeof bufs[0]; k++) {
        *bufs[k] = pt_arena_alloc(t->arena, (total ? total : 1) * sizeof(float));
        if (!*bufs[k]) {
            pt_train_free(t);
            return pt_fail(PT_ENOMEM, "out of memory for 4 x %zu parameter floats (parameters, gradients, AdamW m, v)",
                           total);
        }
    }
    const pt_dtype act = t->ops->act;
    t->work_memory = t->params_memory;
    if (act != PT_F32 && !(t->work_memory = pt_arena_alloc(t->arena, (total ? total : 1) * pt_dtype_size(act)))) {
        pt_train_free(t);
        return pt_fail(PT_ENOMEM, "out of memory for the %s copy of %zu parameters", pt_dtype_name(act), total);
    }
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
    if (!rc) rc = pt_gpt_bind_params(m);
    if (rc) pt_train_free(t);
    return rc;
}

int pt_train_next_in_group(const pt_gpt *m, int j, const pt_comm *sc)
{
    for (; j < m->nparams; j++)
        if (m->params[j].shard.sync == sc) return j;
    return -1;
}

int pt_train_bucket_next(pt_train *t, int *i, size_t off, pt_train_bucket **b)
{
    const pt_gpt *m = t->model;
    *b = NULL;
    for (; *i < m->nparams; ++*i) {
        pt_comm *sc = m->params[*i].shard.sync;
        int known = 0;
        for (int k = 0; k < t->nbuckets; k++) known |= t->buckets[k].comm == sc;
        if (known) continue;
        if (t->nbuckets == PT_TRAIN_MAX_BUCKETS)
            return pt_fail(PT_EINVAL, "parameters use more than %d gradient sync groups", PT_TRAIN_MAX_BUCKETS);
        *b = &t->buckets[t->nbuckets++];
        (*b)->comm = sc;
        (*b)->off = off;
        return PT_OK;
    }
    return PT_OK;
}

void pt_train_free(pt_train *t)
{
    if (!t->arena) return;
    if (t->strategy && t->strategy->detach) t->strategy->detach(t);
    if (t->work_memory != t->params_memory) pt_arena_free(t->arena, t->work_memory);
    pt_arena_free(t->arena, t->v_memory);
    pt_arena_free(t->arena, t->m_memory);
    pt_arena_free(t->arena, t->grads_memory);
    pt_arena_free(t->arena, t->params_memory);
    if (t->model)
        for (int i = 0; i < t->model->nparams; i++) {
            t->model->params[i].data = t->model->params[i].grad = NULL;
            t->model->params[i].work = NULL;
        }
    memset(t, 0, sizeof *t);
}

void pt_train_zero_grad(pt_train *t)
{
    if (t->grads_memory) t->ops->zero(t->grads_memory, t->grads_n, PT_F32);
    if (t->zero) pt_zero_zero_inflight(t);
}

int pt_train_forward_backward(pt_train *t, const int32_t *inputs, const int32_t *targets, float *loss)
{
    TRY(pt_gpt_forward(t->model, inputs, targets, loss));
    return pt_gpt_backward(t->model);
}

int pt_train_sync(pt_train *t) { return t->strategy->sync(t); }

int pt_train_grad_norm(pt_train *t, double *norm)
{
    if (t->zero) return pt_zero_grad_norm(t, norm);
    const pt_gpt *m = t->model;
    double s = 0;
    for (int i = 0; i < m->nparams; i++) {
        const pt_param *p = &m->params[i];
        if (p->shard.norm_owner) s += t->ops->sumsq(p->grad, (size_t)p->shard.numel, PT_F32);
    }
    TRY(pt_allreduce_sum_f64(&m->ctx->world, &s, 1));
    *norm = sqrt(s);
    return PT_OK;
}

int pt_train_update(pt_train *t, float lr, double *norm) { return t->strategy->update(t, lr, norm); }

int pt_train_owned(const pt_train *t, int i, int64_t *lo, int64_t *hi, const float **data, const float **grad)
{
    if (!t->model || i < 0 || i >= t->model->nparams)
        return pt_fail(PT_EINVAL, "parameter index %d is not in [0, %d)", i, t->model ? t->model->nparams : 0);
    if (t->zero) return pt_zero_owned(t, i, lo, hi, data, grad);
    const pt_param *p = &t->model->params[i];
    *lo = 0;
    *hi = p->shard.numel;
    *data = p->data;
    *grad = p->grad;
    return PT_OK;
}

int pt_train_step(pt_train *t, const int32_t *inputs, const int32_t *targets, float lr, float *loss, double *norm)
{
    float l;
    pt_train_zero_grad(t);
    TRY(pt_train_forward_backward(t, inputs, targets, &l));
    if (loss) *loss = l;
    TRY(pt_train_sync(t));
    return pt_train_update(t, lr, norm);
}

/* ---- the allreduce strategy (ZeRO stage 0) ---------------------------------- */

int pt_train_sync_tied(pt_train *t)
{
    const pt_gpt *m = t->model;
    for (int i = 0; i < m->nparams; i++) {
        const pt_param *p = &m->params[i];
        if (p->tied && p->tied->size > 1) TRY(pt_allreduce_sum(p->tied, p->grad, (size_t)p->shard.numel));
    }
    return PT_OK;
}

static int allreduce_sync(pt_train *t)
{
    for (int k = 0; k < t->nbuckets; k++)
        TRY(pt_allreduce_sum(t->buckets[k].comm, t->grads_memory + t->buckets[k].off, t->buckets[k].n));
    return pt_train_sync_tied(t);
}

static int allreduce_update(pt_train *t, float lr, double *norm_out)
{
    double norm;
    TRY(pt_train_grad_norm(t, &norm));
    if (norm_out) *norm_out = norm;
    if (!isfinite(norm))
        return pt_fail(PT_EINVAL, "gradient norm is %g at step %d: training diverged (lower --lr)", norm, t->step + 1);
    if (t->opt.grad_clip > 0 && norm > t->opt.grad_clip)
        t->ops->scale(t->grads_memory, (float)(t->opt.grad_clip / norm), t->nfloats, PT_F32);
    t->step++;
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

const pt_train_strategy pt_train_allreduce = {
    .name = "allreduce", .sync = allreduce_sync, .update = allreduce_update, .zero_stage = 0};

int pt_train_owned_state(pt_train *t, int i, int64_t *lo, int64_t *hi, float **data, float **m, float **v)
{
    if (!t->model || i < 0 || i >= t->model->nparams)
        return pt_fail(PT_EINVAL, "parameter index %d is not in [0, %d)", i, t->model ? t->model->nparams : 0);
    if (t->zero) return pt_zero_owned_state(t, i, lo, hi, data, m, v);
    pt_param *p = &t->model->params[i];
    const size_t off = (size_t)(p->data - t->params_memory);
    *lo = 0;
    *hi = p->shard.numel;
    *data = p->data;
    *m = t->m_memory + off;
    *v = t->v_memory + off;
    return PT_OK;
}

int pt_train_state_loaded(pt_train *t)
{
    if (t->zero) return pt_zero_regather(t);
    if (t->work_memory != t->params_memory) /* the forward's copy of the loaded masters */
        t->ops->convert(t->work_memory, t->ops->act, t->params_memory, PT_F32, t->nfloats);
    return PT_OK;
}
