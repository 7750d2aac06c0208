/* SPDX-License-Identifier: MIT */
/* The pipeline executor (lib/pipeline): one training step of a
 * pipeline stage over m microbatches, driven by a schedule's action list
 * (lib/contract/schedule.h).
 *
 * Each pp rank holds a model built by pt_gpt_create_stage (its chunks'
 * block ranges, the embedding on the first stage, the final LayerNorm and
 * the tied head on the last; pt_pipeline_plan gives the pt_gpt_stage).
 * For every action of its list the rank runs, on microbatch i's
 * activation slot: FWD = (first stage, chunk 0: set_batch + embedding)
 * blocks forward (last stage, last chunk: set_batch + pt_gpt_head_step,
 * which also yields the gradient of the chunk's output); BWD = blocks
 * backward in place on the boundary gradient (first stage, chunk 0: the
 * embedding backward); SEND/RECV = pt_send / pt_recv of one boundary
 * activation or gradient, [Bl*Tl, Cr] elements of the model's ACT type
 * (the layout's local rows and columns; bf16 under --precision bf16), over
 * ctx->pp.  Gradients accumulate over the m
 * microbatches; the loss sum of the last stage is allreduced over world
 * once per step (other stages add 0), and the gradient synchronisation
 * over dp (pt_train_sync: buckets, then the tied embedding over
 * ctx->embed) runs once after the last microbatch, as in Megatron-LM
 * (Narayanan et al. 2021, sec. 2.1).
 *
 * Communication per step: every boundary crossing moves one activation
 * forward and one gradient backward: 2 (S - 1) m messages of
 * e Bl Tl Cr bytes per pp group (S = pp * v virtual stages; e = 4 for
 * fp32, 2 for bf16).
 * Memory (arena): the model's nslots activation sets, plus 2 * nbufs * v
 * boundary buffers of Bl*Tl*Cr ACT elements (received activations, gradients;
 * schedule.h: nbufs >= nslots because an input may arrive early).
 */
#ifndef PTRAIN_PIPELINE_H
#define PTRAIN_PIPELINE_H
#include "contract/schedule.h"
#include "train/train.h"

/* What a plan asks of one pp rank: the schedule, the split and the model
 * stage to build. */
typedef struct pt_pipeline_cfg {
    int schedule;        /* a pt_schedule */
    int pp, pp_rank;     /* pipeline size and this rank's place */
    int m, v;            /* microbatches per step, chunks per rank */
    int micro;           /* sequences per microbatch per dp group (B / m) */
    pt_pp_split split;   /* block ranges of the pp * v virtual stages */
    pt_gpt_stage stage;  /* for pt_gpt_create_stage (nslots from the schedule) */
} pt_pipeline_cfg;

/* Map plan p (pp, microbatches, schedule, virtual_stages, pp_split) for a
 * model cfg and the dp group's batch of B sequences per step to pp rank
 * pp_rank's configuration.  The model is then built with
 * pt_gpt_create_stage(..., out->micro, T, seed, &out->stage).  With pp =
 * 1 and m > 1 this is plain gradient accumulation.  Errors (PT_EINVAL, one
 * line naming the value and what fits): those of pt_pp_schedule_check,
 * pt_pp_split_layers and pt_pp_microbatch (B % m != 0), pp_rank outside
 * 0..pp-1, v above PT_GPT_MAX_CHUNKS. */
int pt_pipeline_plan(const pt_plan *p, const pt_gpt_config *cfg, int B, int pp_rank, pt_pipeline_cfg *out);

/* A callback around every forward and backward of a step (not around the
 * sends and receives): called with after = 0 right before the compute of
 * model chunk `chunk` on microbatch `mb` (bwd 0 forward, 1 backward)
 * starts, and with after = 1 right after it ends, on the rank that runs
 * it, in the order of its action list (pt_pp_schedule).  Its time is not
 * counted in busy_s.  A non-zero return (a PT_E* status, the message set
 * with pt_fail) fails the step with that status.  For instance a per-
 * instruction clock (Perseus: lib/energy) or a per-instruction profile. */
typedef int (*pt_pipeline_hook)(void *arg, int chunk, int mb, int bwd, int after);

typedef struct pt_pipeline {
    pt_train *train;      /* the stage's registry (not owned) */
    pt_gpt *model;        /* train->model */
    pt_pctx *ctx;         /* the model's grid (ctx->pp carries the p2p) */
    pt_pp_schedule sched; /* this rank's action list */
    int micro, T;         /* sequences per microbatch (the model's B), sequence length */
    size_t nact;          /* elements of one boundary tensor: Bl * Tl * Cr (the model's ACT type) */
    void *xin;            /* [nbufs * v, nact] received activations (kept to the backward) */
    void *grad;           /* [nbufs * v, nact] boundary gradients (received or from the head) */
    const void **yout;    /* [nbufs * v] chunk outputs to send (model-owned views) */
    double busy_s;        /* last step: seconds in forward/backward compute on this rank */
    double sched_s;       /* last step: wall seconds of the whole schedule (compute + p2p waits) */
    pt_pipeline_hook hook; /* NULL: none (pt_pipeline_set_hook) */
    void *hook_arg;
} pt_pipeline;

/* Build the executor over registry t, whose model was built by
 * pt_gpt_create_stage for `kind` (a pt_schedule) with the pipeline
 * config's stage: v = stage.nchunks, m = stage.microbatches, pp and the
 * rank from the model's context.  Boundary buffers come from the model's
 * arena.  Errors: PT_EINVAL (the schedule needs more slots than the model
 * has, naming both; the schedule's errors), PT_ENOMEM. */
int pt_pipeline_create(pt_pipeline *p, pt_train *t, int kind);
void pt_pipeline_free(pt_pipeline *p);

/* Call fn(arg, ...) around every forward and backward from now on (NULL:
 * no hook). */
void pt_pipeline_set_hook(pt_pipeline *p, pt_pipeline_hook fn, void *arg);

/* Forward and backward of the m microbatches of the dp group's batch
 * inputs/targets [m * micro, T] (host token ids; microbatch i = rows
 * i*micro .. (i+1)*micro - 1; read by the first stage (inputs) and the
 * last (targets), NULL allowed on middle stages), following the action
 * list.  Gradients
 * ACCUMULATE, unsynchronised over dp.  *loss (may be NULL) = global mean
 * cross-entropy over m * micro * dp * T tokens (nats/token), the same on
 * every rank (one allreduce of a double over world).  Sets busy_s and
 * sched_s.  Errors: those of the model's pieces and of pt_comm; after an
 * error the other ranks of the pipeline may wait forever (abort the job). */
int pt_pipeline_forward_backward(pt_pipeline *p, const int32_t *inputs, const int32_t *targets, float *loss);

/* One training step, as pt_train_step: zero_grad -> schedule (forward and
 * backward of every microbatch) -> pt_train_sync -> norm, clip, AdamW at
 * lr (pt_train_update).  *loss, *norm as pt_train_step (may be NULL). */
int pt_pipeline_step(pt_pipeline *p, const int32_t *inputs, const int32_t *targets, float lr, float *loss,
                     double *norm);

#endif
