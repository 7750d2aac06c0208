/* SPDX-License-Identifier: MIT */
/* The training step: registry and the entry points that call the
 * strategy's hooks (see train.h; the strategies are allreduce.c and zero.c,
 * the buckets and the tied sum they share are bucket.c's). */
#include "train/strategy.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
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
    int rc = t->strategy->create(t);
    if (rc) pt_train_free(t);
    return rc;
}

void pt_train_free(pt_train *t)
{
    if (!t->arena) return;
    if (t->strategy) t->strategy->free_state(t);
    if (t->model)
        for (int i = 0; i < t->model->nparams; i++) {
            t->model->params[i].data = t->model->params[i].grad = NULL;
            t->model->params[i].work = NULL;
        }
    memset(t, 0, sizeof *t);
}

void pt_train_zero_grad(pt_train *t)
{
    if (t->strategy) t->strategy->zero_grad(t);
}

int pt_train_forward_backward(pt_train *t, const int32_t *inputs, const int32_t *targets, float *loss)
{
    return pt_gpt_forward_backward(t->model, inputs, targets, loss);
}

int pt_train_sync(pt_train *t) { return t->strategy->sync(t); }

double pt_train_sync_bytes(const pt_train *t) { return t->strategy->sync_bytes(t); }

int pt_train_grad_norm(pt_train *t, double *norm)
{
    double s = t->strategy->grad_sumsq(t);
    TRY(pt_allreduce_sum_f64(&t->model->ctx->world, &s, 1));
    *norm = sqrt(s);
    return PT_OK;
}

int pt_train_update(pt_train *t, float lr, double *norm_out)
{
    double norm;
    TRY(pt_train_grad_norm(t, &norm));
    if (norm_out) *norm_out = norm;
    /* where the NaN or infinity came from (the weights trained so far,
     * or loaded) is the caller's to say: it knows the run's steps */
    if (!isfinite(norm))
        return pt_fail(PT_EINVAL, "gradient norm is %g (not finite) at AdamW step %d", norm, t->step + 1);
    const float clip = t->opt.grad_clip > 0 && norm > t->opt.grad_clip ? (float)(t->opt.grad_clip / norm) : 1.0f;
    t->step++;
    return t->strategy->update(t, lr, clip);
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

/* ---- owned state (lib/ckpt, tests) ------------------------------------------ */

static int check_index(const pt_train *t, int i)
{
    if (!t->model || !t->strategy || i < 0 || i >= t->model->nparams)
        return pt_fail(PT_EINVAL, "parameter index %d is not in [0, %d)", i, t->model ? t->model->nparams : 0);
    return PT_OK;
}

int pt_train_owned(const pt_train *t, int i, int64_t *lo, int64_t *hi, const float **data, const float **grad)
{
    TRY(check_index(t, i));
    float *d, *g, *m, *v;
    t->strategy->owned(t, i, lo, hi, &d, &g, &m, &v);
    *data = d;
    *grad = g;
    return PT_OK;
}

int pt_train_owned_state(pt_train *t, int i, int64_t *lo, int64_t *hi, float **data, float **m, float **v)
{
    TRY(check_index(t, i));
    float *g;
    t->strategy->owned(t, i, lo, hi, data, &g, m, v);
    return PT_OK;
}

int pt_train_check_finite(pt_train *t, int moments)
{
    static const char *const what[3] = {"weight", "AdamW m", "AdamW v"};
    const pt_ops *ops = t->ops;
    for (int i = 0; t->model && t->strategy && i < t->model->nparams; i++) {
        int64_t lo, hi;
        float *w3[3], *g;
        t->strategy->owned(t, i, &lo, &hi, &w3[0], &g, &w3[1], &w3[2]);
        const size_t n = (size_t)(hi - lo);
        for (int w = 0; n && w < (moments ? 3 : 1); w++) {
            /* a sum of squares in double is finite exactly when every float is */
            if (isfinite(ops->sumsq(w3[w], n, PT_F32))) continue;
            long long at = -1;
            float val = NAN;
            float *h = malloc(n * sizeof *h); /* the state may live on the device */
            if (h) {
                ops->copy2d(h, n * sizeof *h, w3[w], n * sizeof *h, n * sizeof *h, 1);
                for (size_t e = 0; e < n && at < 0; e++)
                    if (!isfinite(h[e])) { at = lo + (long long)e; val = h[e]; }
                free(h);
            }
            if (at < 0)
                return pt_fail(PT_EINVAL, "tensor %s has a non-finite %s in this rank's shard [%lld, %lld)",
                               t->model->params[i].name, what[w], (long long)lo, (long long)hi);
            return pt_fail(PT_EINVAL, "%s element %lld of tensor %s (in this rank's shard) is %g", what[w], at,
                           t->model->params[i].name, (double)val);
        }
    }
    return PT_OK;
}

int pt_train_state_loaded(pt_train *t) { return t->strategy ? t->strategy->state_loaded(t) : PT_OK; }

/* ---- the strategy of a plan's ZeRO stage -------------------------------------- */

/* every table pt_train_strategy_zero chooses from: a new stage is one more entry */
static const pt_train_strategy *const strategies[] = {
    &pt_train_allreduce, &pt_train_zero_stages[0], &pt_train_zero_stages[1], &pt_train_zero_stages[2]};
#define NSTRATEGIES (int)(sizeof strategies / sizeof strategies[0])

const pt_train_strategy *pt_train_strategy_zero(int stage)
{
    char valid[64] = "";
    size_t k = 0;
    for (int s = 0; s < NSTRATEGIES; s++) {
        if (strategies[s]->zero_stage == stage) return strategies[s];
        int n = snprintf(valid + k, sizeof valid - k, "%s%d", s ? ", " : "", strategies[s]->zero_stage);
        if (n < 0 || (size_t)n >= sizeof valid - k) break;
        k += (size_t)n;
    }
    pt_fail(PT_EINVAL, "ZeRO stage %d is not valid (valid: %s)", stage, valid);
    return NULL;
}
