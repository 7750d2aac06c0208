/* SPDX-License-Identifier: MIT */
/* The pipeline executor (see pipeline.h). */
#include "pipeline/pipeline.h"

#include <stdlib.h>
#include <string.h>

#define TRY(x) do { int rc_ = (x); if (rc_) return rc_; } while (0)

enum { TAG_ACT = 71, TAG_GRAD = 72 };

int pt_pipeline_plan(const pt_plan *p, const pt_gpt_config *cfg, int B, int pp_rank, pt_pipeline_cfg *out)
{
    memset(out, 0, sizeof *out);
    const int pp = p->pp, v = p->virtual_stages > 0 ? p->virtual_stages : 1, m = p->microbatches;
    TRY(pt_pp_schedule_check(p->schedule, pp, m, v));
    if (v > PT_GPT_MAX_CHUNKS)
        return pt_fail(PT_EINVAL, "virtual stages %d: at most %d model chunks per rank", v, PT_GPT_MAX_CHUNKS);
    if (pp_rank < 0 || pp_rank >= pp) return pt_fail(PT_EINVAL, "pp rank %d outside 0..%d", pp_rank, pp - 1);
    TRY(pt_pp_split_layers(cfg->n_layer, pp, v, p->pp_split_n ? p->pp_split : NULL, p->pp_split_n, &out->split));
    TRY(pt_pp_microbatch(B, m, &out->micro));
    pt_pp_schedule s;
    TRY(pt_pp_schedule_build(&s, p->schedule, pp, pp_rank, m, v));
    out->schedule = p->schedule;
    out->pp = pp, out->pp_rank = pp_rank, out->m = m, out->v = v;
    out->stage.nchunks = v;
    for (int c = 0; c < v; c++) pt_pp_split_chunk(&out->split, pp, pp_rank, c, &out->stage.l0[c], &out->stage.l1[c]);
    out->stage.first = pp_rank == 0;
    out->stage.last = pp_rank == pp - 1;
    out->stage.nslots = s.nslots;
    out->stage.microbatches = m;
    pt_pp_schedule_free(&s);
    return PT_OK;
}

void pt_pipeline_free(pt_pipeline *p)
{
    if (p->model) {
        pt_arena_free(p->model->arena, p->grad);
        pt_arena_free(p->model->arena, p->xin);
    }
    free(p->yout);
    pt_pp_schedule_free(&p->sched);
    memset(p, 0, sizeof *p);
}

int pt_pipeline_create(pt_pipeline *p, pt_train *t, int kind)
{
    memset(p, 0, sizeof *p);
    pt_gpt *m = t->model;
    const pt_gpt_stage *st = &m->stage;
    p->train = t, p->model = m, p->ctx = m->ctx;
    TRY(pt_pp_schedule_build(&p->sched, kind, m->ctx->pp.size, m->ctx->pp.rank, st->microbatches, st->nchunks));
    if (p->sched.nslots > m->nslots) {
        int need = p->sched.nslots;
        pt_pipeline_free(p);
        return pt_fail(PT_EINVAL, "the %s schedule needs %d activation slots on pp rank %d; the model was built with %d",
                       pt_pp_schedule_name(kind), need, m->ctx->pp.rank, m->nslots);
    }
    if (st->first != (m->ctx->pp.rank == 0) || st->last != (m->ctx->pp.rank == m->ctx->pp.size - 1)) {
        pt_pipeline_free(p);
        return pt_fail(PT_EINVAL, "stage ends (first %d, last %d) do not match pp rank %d of %d", st->first, st->last,
                       m->ctx->pp.rank, m->ctx->pp.size);
    }
    p->micro = m->B, p->T = m->T;
    p->nact = (size_t)m->g.Bl * (size_t)m->Tl * (size_t)m->g.Cr;
    const size_t nbuf = (size_t)p->sched.nbufs * (size_t)st->nchunks;
    p->xin = pt_arena_alloc(m->arena, nbuf * p->nact * m->ea);
    p->grad = pt_arena_alloc(m->arena, nbuf * p->nact * m->ea);
    p->yout = calloc(nbuf, sizeof *p->yout);
    if (!p->xin || !p->grad || !p->yout) {
        pt_pipeline_free(p);
        return pt_fail(PT_ENOMEM, "out of memory for 2 x %zu pipeline boundary buffers of %zu %s elements", nbuf,
                       p->nact, pt_dtype_name(m->act));
    }
    return PT_OK;
}

void pt_pipeline_set_hook(pt_pipeline *p, pt_pipeline_hook fn, void *arg)
{
    p->hook = fn;
    p->hook_arg = arg;
}

static int run_op(pt_pipeline *p, const pt_pp_action *a, const int32_t *inputs, const int32_t *targets,
                       double *loss_sum);

static int run_action(pt_pipeline *p, const pt_pp_action *a, const int32_t *inputs, const int32_t *targets,
                      double *loss_sum)
{
    if (a->op != PT_PP_FWD && a->op != PT_PP_BWD) return run_op(p, a, inputs, targets, loss_sum);
    const int bwd = a->op == PT_PP_BWD;
    if (p->hook) TRY(p->hook(p->hook_arg, a->chunk, a->mb, bwd, 0));
    TRY(run_op(p, a, inputs, targets, loss_sum));
    if (p->hook) TRY(p->hook(p->hook_arg, a->chunk, a->mb, bwd, 1));
    return PT_OK;
}

/* One action of the list (the hook aside). */
static int run_op(pt_pipeline *p, const pt_pp_action *a, const int32_t *inputs, const int32_t *targets,
                       double *loss_sum)
{
    pt_gpt *m = p->model;
    const pt_gpt_stage *st = &m->stage;
    pt_comm *pc = &p->ctx->pp;
    const size_t k = (size_t)a->buf * (size_t)p->sched.v + (size_t)a->chunk; /* buffers of (set, chunk) */
    void *xin = pt_elem(p->xin, k * p->nact, m->act), *g = pt_elem(p->grad, k * p->nact, m->act);
    const int first = st->first && a->chunk == 0, last = st->last && a->chunk == st->nchunks - 1;
    switch (a->op) {
    case PT_PP_FWD: {
        double t0 = pt_now();
        void *x = xin, *y;
        TRY(pt_gpt_use_slot(m, a->slot));
        if (first || last) {
            if (!inputs || !targets) return pt_fail(PT_EINVAL, "pipeline: the first and last stage need the batch's tokens");
            const size_t off = (size_t)a->mb * (size_t)p->micro * (size_t)p->T; /* microbatch rows of [B, T] */
            TRY(pt_gpt_set_batch(m, inputs + off, targets + off));
        }
        if (first) TRY(pt_gpt_embed_forward(m, &x));
        TRY(pt_gpt_blocks_forward(m, st->l0[a->chunk], st->l1[a->chunk], x, &y));
        if (last) TRY(pt_gpt_head_step(m, y, g, loss_sum));
        else p->yout[k] = y;
        p->busy_s += pt_now() - t0;
        return PT_OK;
    }
    case PT_PP_BWD: {
        double t0 = pt_now();
        TRY(pt_gpt_use_slot(m, a->slot));
        TRY(pt_gpt_blocks_backward(m, st->l0[a->chunk], st->l1[a->chunk], g));
        if (first) TRY(pt_gpt_embed_backward(m, g));
        p->busy_s += pt_now() - t0;
        return PT_OK;
    }
    case PT_PP_SEND_ACT: return pt_send_t(pc, p->yout[k], p->nact, a->peer, TAG_ACT, m->act);
    case PT_PP_RECV_ACT: return pt_recv_t(pc, xin, p->nact, a->peer, TAG_ACT, m->act);
    case PT_PP_SEND_GRAD: return pt_send_t(pc, g, p->nact, a->peer, TAG_GRAD, m->act);
    case PT_PP_RECV_GRAD: return pt_recv_t(pc, g, p->nact, a->peer, TAG_GRAD, m->act);
    default: return pt_fail(PT_EINVAL, "pipeline action %d unknown", a->op);
    }
}

int pt_pipeline_forward_backward(pt_pipeline *p, const int32_t *inputs, const int32_t *targets, float *loss)
{
    double loss_sum = 0, t0 = pt_now();
    p->busy_s = 0;
    for (int i = 0; i < p->sched.n; i++) {
        int rc = run_action(p, &p->sched.a[i], inputs, targets, &loss_sum);
        if (rc)
            return pt_fail(rc, "pipeline %s, pp rank %d, action %d (%s microbatch %d chunk %d): %s",
                           pt_pp_schedule_name(p->sched.kind), p->sched.rank, i, pt_pp_op_name(p->sched.a[i].op),
                           p->sched.a[i].mb, p->sched.a[i].chunk, pt_errmsg());
    }
    p->sched_s = pt_now() - t0;
    TRY(pt_allreduce_sum_f64(&p->ctx->world, &loss_sum, 1));
    if (loss) {
        const double tokens = (double)p->sched.m * p->micro * p->ctx->plan.dp * p->T;
        *loss = (float)(loss_sum / tokens);
    }
    return PT_OK;
}

int pt_pipeline_step(pt_pipeline *p, const int32_t *inputs, const int32_t *targets, float lr, float *loss,
                     double *norm)
{
    pt_train_zero_grad(p->train);
    TRY(pt_pipeline_forward_backward(p, inputs, targets, loss));
    TRY(pt_train_sync(p->train));
    return pt_train_update(p->train, lr, norm);
}
