/* SPDX-License-Identifier: MIT */
/* ptrain-run's checkpoints (bin/run/run.h): resuming from --resume, the
 * saves, and SIGTERM / SIGUSR1, which ask for a save and a clean exit. */
#define _GNU_SOURCE
#include "run.h"
#include <jansson.h>
#include "ckpt/ckpt.h"
#include "train/train.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>

/* ---- checkpoints: SIGTERM / SIGUSR1 ask for a save and a clean exit ---- */
static volatile sig_atomic_t stop_signal;
static void on_stop_signal(int sig) { stop_signal = sig; }
static void ckpt_warn(const char *msg)
{
    if (run_rank == 0) fprintf(stderr, "ptrain-run: warning: %s; trying the previous checkpoint\n", msg);
}

/* Ask for a save and a clean exit on SIGTERM and SIGUSR1 (run.h). */
void run_ckpt_catch_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGUSR1, &sa, NULL);
}

int run_ckpt_stop_signal(void) { return stop_signal; }

/* the "hf" record of the checkpoint resumed from (a model converted from
 * Hugging Face files: its layout and dtypes), carried into every save so
 * that ptrain-ckpt convert --to hf writes the fine-tuned model as the
 * source was laid out; NULL when none */
static json_t *resumed_extra;

/* Load --resume into tr (run.h); the step to start from. */
long run_ckpt_resume(const run_opts *o, pt_train *tr, const pt_plan *plan, const pt_gpt_config *cfg, char *loaded_from,
                     size_t lfn)
{
    long start_step = 0;
    int loaded = 0;
    char which[4200] = "";
    pt_ckpt_meta got;
    int rc = pt_ckpt_resume(o->resume, o->save_dir, tr, plan, cfg, &got, &loaded, which, sizeof which, ckpt_warn);
    run_agree_collective(rc, "--resume");
    if (loaded_from && lfn) snprintf(loaded_from, lfn, "%s", loaded ? which : "");
    if (loaded && got.step > o->steps)
        run_agree(pt_fail(PT_EINVAL, "checkpoint %s is at step %ld, beyond --steps %ld", which, got.step, o->steps),
                  "--resume");
    if (loaded) start_step = got.step;
    if (loaded) {
        json_t *man = NULL;
        pt_errsave es;
        pt_error_save(&es);
        if (!pt_ckpt_manifest_read(which, &man) && json_is_object(json_object_get(man, "hf")))
            resumed_extra = json_pack("{s:O}", "hf", json_object_get(man, "hf"));
        json_decref(man);
        pt_error_restore(&es);
    }
    /* the schedule the checkpoint was trained with: a different one is
     * allowed (extending --steps is how a run is continued) but the run
     * is then not the uninterrupted one; a checkpoint converted from
     * llm.c has none (total_steps 0) */
    if (loaded && run_rank == 0 && got.total_steps > 0 &&
        (got.total_steps != o->steps || got.warmup != o->warmup || got.lr != (float)o->lr ||
         got.min_lr != (float)o->min_lr)) {
        fprintf(stderr, "ptrain-run: warning: checkpoint %s was trained with --steps %ld --lr %g --min-lr %g --warmup %ld, "
                        "this run has --steps %ld --lr %g --min-lr %g --warmup %ld: the learning-rate schedule changes "
                        "from step %ld on\n",
                which, got.total_steps, (double)got.lr, (double)got.min_lr, got.warmup, o->steps, (double)(float)o->lr,
                (double)(float)o->min_lr, o->warmup, got.step);
        fflush(stderr);
    }
    /* AdamW's own settings: a change is allowed, the run then is not the
     * uninterrupted one (a checkpoint of an older ptrain records none) */
    if (loaded && run_rank == 0 && got.beta2 > 0 &&
        (got.beta1 != o->beta1 || got.beta2 != o->beta2 || got.adam_eps != o->eps || got.weight_decay != o->wd ||
         got.grad_clip != o->clip)) {
        fprintf(stderr, "ptrain-run: warning: checkpoint %s was trained with --beta1 %g --beta2 %g --adam-eps %g "
                        "--weight-decay %g --grad-clip %g, this run has --beta1 %g --beta2 %g --adam-eps %g "
                        "--weight-decay %g --grad-clip %g: the optimizer changes from step %ld on\n",
                which, (double)got.beta1, (double)got.beta2, (double)got.adam_eps, (double)got.weight_decay,
                (double)got.grad_clip, (double)o->beta1, (double)o->beta2, (double)o->eps, (double)o->wd,
                (double)o->clip, got.step);
        fflush(stderr);
    }
    if (run_rank == 0) {
        if (loaded) printf("resume: %s (step %ld, AdamW step %d)\n", which, got.step, got.adam_step);
        else printf("resume: no valid checkpoint in %s, starting fresh\n", o->save_dir);
        fflush(stdout);
    }
    return start_step;
}

/* Save a checkpoint (run.h). */
void run_ckpt_save(const run_opts *o, pt_train *tr, const pt_plan *plan, const pt_gpt_config *cfg,
                   pt_ckpt_meta *cmeta, long step, char *saved, size_t len)
{
    cmeta->step = step;
    cmeta->adam_step = tr->step;
    run_watchdog_beat("checkpoint");
    /* never a NaN or an infinity on disk (every rank its own slices; the
     * loop checks the weights after every step, this adds AdamW m and v).
     * What was loaded was checked finite, so training produced it. */
    int rc = pt_train_check_finite(tr, 1);
    const char *opmsg;
    int opst;
    if (rc && (opst = tr->model->be->status(&opmsg)) != PT_OK) /* the check's own device op failed: that is the error */
        rc = pt_fail(opst, "checkpoint at step %ld not saved: %s", step, opmsg);
    else if (rc)
        rc = pt_fail(rc, "checkpoint at step %ld not saved (the previous one and %s/latest are left as they were): "
                     "after training step %ld, %s: training diverged (lower --lr)", step, o->save_dir, step,
                     pt_errmsg());
    run_agree(rc, "checkpoint");
    rc = pt_ckpt_save_extra(o->save_dir, tr, plan, cfg, cmeta, resumed_extra, (int)o->keep, saved, len);
    if (rc && run_rank == 0) fprintf(stderr, "ptrain-run: error: checkpoint at step %ld: %s\n", step, pt_errmsg());
    if (rc) run_exit(PT_EXIT_FAIL);
}
