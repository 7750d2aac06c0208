/* SPDX-License-Identifier: MIT */
/* ptrain-run's training: build the model under the agreed plan, resume,
 * train, validate, save, summarise (bin/run/run.h).  Rank 0 prints the
 * plan, the model size, one line per step (loss, learning rate, gradient
 * norm, ms/step, tokens/s, ETA), the validation loss every --val-every
 * steps and the "done:" summary; --metrics writes the same as JSON Lines.
 * Resuming and the checkpoint saves are in ckpt.c. */
#define _GNU_SOURCE
#include "config.h"
#include "run.h"
#include "backend/blas.h"
#include "ckpt/ckpt.h"
#include "comm/comm.h"
#include "parallel/context.h"
#include "pipeline/pipeline.h"
#include "train/train.h"

#include <jansson.h>
#include <math.h>
#include <mpi.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

static int local_ranks(void)
{
    const char *v = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    if (!v) v = getenv("LOCAL_WORLD_SIZE");
    if (!v) v = getenv("SLURM_NTASKS_PER_NODE");
    long n;
    if (v && pt_parse_int("local size", v, 1, 1 << 20, &n) == PT_OK) return (int)n;
    return 1;
}

static int default_threads(void)
{
    const char *e = getenv("OMP_NUM_THREADS");
    long n;
    if (e && pt_parse_int("OMP_NUM_THREADS", e, 1, 4096, &n) == PT_OK) return (int)n;
    cpu_set_t set;
    int cpus = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
    int t = cpus / local_ranks();
    return t < 1 ? 1 : t;
}

/* "1h02m", "3m05s", "42s": a duration for the ETA column. */
static void fmt_duration(char *buf, size_t len, double sec)
{
    long s = sec > 0 && sec < 1e9 ? (long)(sec + 0.5) : 0;
    if (s >= 3600) snprintf(buf, len, "%ldh%02ldm", s / 3600, s / 60 % 60);
    else if (s >= 60) snprintf(buf, len, "%ldm%02lds", s / 60, s % 60);
    else snprintf(buf, len, "%lds", s);
}

static double mb(double bytes) { return bytes / (1024.0 * 1024.0); }

/* Per-step numbers of a train record that need every rank (--metrics
 * only, so a run without it has no extra collective per step).
 * Index 0: the arena's high-water mark (bytes); 1..6: modelled bytes sent
 * (pt_comm_sent_total) in the context's groups, and from ST_SUB on per
 * communicator (the cost model's PT_SUB_* order): dp (the dp group alone:
 * nothing sends there today), tp (with the axis sub-groups of the
 * 2D/2.5D/3D layouts), pp (stage to stage, with the embed group: the tied
 * embedding's gradient between first and last stage), sp, sync (the
 * gradient sum over dp x sp, and over the tp axes a parameter is
 * replicated on; ZeRO's reduce-scatter and allgather run here too) and
 * world. */
enum { ST_PEAK, ST_DP, ST_TP, ST_PP, ST_SP, ST_SYNC, ST_WORLD, ST_SUB, ST_N = ST_SUB + PT_SUB_N };
static const char *const st_group[ST_SUB] = {"peak", "dp", "tp", "pp", "sp", "sync", "world"};

/* The context's communicator of the cost model's index s (PT_SUB_*,
 * lib/plan/cost.h): ST_SUB + s holds its bytes, "sent_bytes_comm" names it
 * as the cost model does, so each can be held against its prediction. */
static const pt_comm *sub_comm(const pt_pctx *c, int s)
{
    if (s == PT_SUB_TP) return &c->tp;
    if (s < PT_SUB_SYNC) return &c->tp_sub[s - PT_SUB_TP_AXES + 1];
    if (s < PT_SUB_SP) return &c->sync[s - PT_SUB_SYNC];
    return s == PT_SUB_SP ? &c->sp : s == PT_SUB_PP ? &c->pp : s == PT_SUB_EMBED ? &c->embed : &c->dp;
}

static void group_sent(const pt_pctx *c, uint64_t v[ST_N])
{
    for (int s = 0; s < PT_SUB_N; s++) v[ST_SUB + s] = pt_comm_sent_total(sub_comm(c, s));
    uint64_t tp = pt_comm_sent_total(&c->tp), sync = 0; /* host byte counters, not tensors */
    for (int m = 0; m < (1 << PT_TP_AXES); m++) {
        tp += pt_comm_sent_total(&c->tp_sub[m]);
        sync += pt_comm_sent_total(&c->sync[m]);
    }
    v[ST_PEAK] = 0;
    v[ST_DP] = pt_comm_sent_total(&c->dp);
    v[ST_TP] = tp;
    v[ST_SYNC] = sync;
    v[ST_PP] = pt_comm_sent_total(&c->pp) + pt_comm_sent_total(&c->embed);
    v[ST_SP] = pt_comm_sent_total(&c->sp);
    v[ST_WORLD] = pt_comm_sent_total(&c->world);
}

/* The step's bytes per group (since `before`) and the arena peak, each the
 * maximum over all ranks.  Collective over MPI_COMM_WORLD: every rank
 * calls it after every step.  out[ST_PEAK] in bytes. */
static void step_stats(const pt_pctx *c, const pt_arena *a, const uint64_t before[ST_N], uint64_t out[ST_N])
{
    uint64_t now[ST_N], mine[ST_N];
    group_sent(c, now);
    for (int i = 1; i < ST_N; i++) mine[i] = now[i] - before[i];
    mine[ST_PEAK] = a->peak;
    run_watchdog_beat("metrics");
    MPI_Allreduce(mine, out, ST_N, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
}

/* The train record's fields after elapsed_s: achieved model GFLOP/s per
 * rank (pt_gpt_flops_per_token * tokens/s / world: model FLOPs, recompute
 * not counted, PaLM appendix B), MFU against --peak-gflops when given,
 * peak memory (MiB, max over ranks) and the step's bytes per group. */
static void stats_json(json_t *rec, double gflops, double peak_gflops, const uint64_t st[ST_N])
{
    json_object_set_new(rec, "gflops_per_rank", run_json_num(gflops));
    if (peak_gflops > 0) json_object_set_new(rec, "mfu", run_json_num(gflops / peak_gflops));
    json_object_set_new(rec, "peak_mib", run_json_num(mb((double)st[ST_PEAK])));
    json_t *sent = json_object();
    for (int i = 1; i < ST_SUB; i++) json_object_set_new(sent, st_group[i], json_integer((json_int_t)st[i]));
    json_object_set_new(rec, "sent_bytes", sent);
    sent = json_object();
    for (int i = 0; i < PT_SUB_N; i++)
        json_object_set_new(sent, pt_cost_sub_name(i), json_integer((json_int_t)st[ST_SUB + i]));
    json_object_set_new(rec, "sent_bytes_comm", sent);
}

static int load_batch(const pt_shard *s, long step, const run_opts *o, int T, const pt_pctx *c, int32_t *in,
                      int32_t *tg)
{
    int nseq = (int)(o->batch / c->plan.dp);
    return pt_loader_batch(s, step, (int)o->batch, T, c->dp_rank * nseq, nseq, in, tg);
}

/* Mean validation loss over --val-batches batches.  It runs the same
 * schedule as training (every stage, every microbatch, the ZeRO hooks) and
 * discards the gradients: the next step zeroes them first. */
static int evaluate(pt_pipeline *p, const pt_shard *val, const run_opts *o, const pt_pctx *c, int32_t *in,
                    int32_t *tg, double *out)
{
    double sum = 0;
    for (long i = 0; i < o->val_batches; i++) {
        int rc = load_batch(val, i, o, p->T, c, in, tg);
        if (rc) return rc;
        float l;
        pt_train_zero_grad(p->train);
        rc = pt_pipeline_forward_backward(p, in, tg, &l);
        if (rc) return rc;
        sum += l;
    }
    *out = sum / (double)o->val_batches;
    return PT_OK;
}

/* A NaN or an infinity, with where it came from.  The files a run loads
 * are checked finite (lib/ckpt) and the weights after every step, so what
 * is not finite was produced by the first computation that met it:
 * from_start when that computation read the state this run started from
 * (the first validation or step; the first update's AdamW moments when
 * they were loaded): then the checkpoint `resumed` ("" for a fresh start:
 * the initial weights of --seed) is named; else training diverged. */
static int blame(int rc, int from_start, const char *resumed, long seed, const char *what)
{
    char m[PT_ERROR_LEN];
    snprintf(m, sizeof m, "%s", pt_errmsg());
    if (from_start && *resumed)
        return pt_fail(rc, "%s, the first after resuming from checkpoint %s: %s: the state loaded from it (finite "
                       "weights and AdamW moments that overflow) cannot be trained from (resume an earlier checkpoint)",
                       what, resumed, m);
    if (from_start) return pt_fail(rc, "%s: %s: from the initial weights (--seed %ld)", what, m, seed);
    return pt_fail(rc, "%s: %s: training diverged (lower --lr)", what, m);
}

static void validate(pt_pipeline *pipe, const run_setup *s, const pt_pctx *ctx, int32_t *in, int32_t *tg, long step,
                     double t_start, run_metrics *mf, double *vloss, long start_step, const char *resumed)
{
    int rc = evaluate(pipe, &s->val, &s->o, ctx, in, tg, vloss);
    if (!rc && !isfinite(*vloss)) {
        char what[64];
        snprintf(what, sizeof what, "step %ld", step); /* after run_agree's "validation: " */
        rc = blame(pt_fail(PT_EINVAL, "loss %g (not finite)", *vloss),
                   step == start_step, resumed, s->o.seed, what);
    }
    run_agree(rc, "validation");
    if (run_rank == 0) {
        printf("val: step %ld | val_loss %.4f\n", step, *vloss);
        fflush(stdout);
    }
    run_metrics_write(mf, json_pack("{s:s, s:I, s:o, s:o}", "type", "val", "step", (json_int_t)step, "val_loss",
                                    run_json_num(*vloss), "elapsed_s", run_json_num(pt_now() - t_start)));
}

/* --dry-run: every rank's place in the grid, printed by rank 0 in grid order. */
static int dry_run(const pt_pctx *ctx, const pt_plan *plan, const char *summary, int world)
{
    char line[1024];
    snprintf(line, sizeof line,
             "rank %d/%d dp=%d pp=%d tp=%d sp=%d dp_rank=%d pp_rank=%d tp_rank=%d sp_rank=%d mpi_rank=%d plan=%s",
             ctx->rank, world, plan->dp, plan->pp, plan->tp, plan->sp, ctx->dp_rank, ctx->pp_rank, ctx->tp_rank,
             ctx->sp_rank, run_rank, summary);
    char *all = run_rank == 0 ? malloc(sizeof line * (size_t)world) : NULL;
    int *ranks = run_rank == 0 ? malloc(sizeof(int) * (size_t)world) : NULL;
    int ok = run_rank != 0 || (all && ranks);
    run_agree(ok ? PT_OK : pt_fail(PT_ENOMEM, "out of memory for %d rank lines", world), "--dry-run");
    MPI_Gather(line, sizeof line, MPI_CHAR, all, sizeof line, MPI_CHAR, 0, MPI_COMM_WORLD);
    MPI_Gather((void *)&ctx->rank, 1, MPI_INT, ranks, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (run_rank == 0) {
        for (int g = 0; g < world; g++)
            for (int i = 0; i < world; i++)
                if (ranks[i] == g) printf("%s\n", all + (size_t)i * sizeof line);
        fflush(stdout);
    }
    free(all);
    free(ranks);
    return PT_EXIT_OK;
}

/* One run's state, shared by run_train's parts. */
typedef struct loop {
    run_setup *s;
    run_opts o;
    pt_gpt_config cfg;
    pt_plan plan;
    int world, T, Bl, threads;
    char summary[640];
    pt_pctx ctx;
    const pt_backend *be;
    pt_arena arena;
    pt_gpt model;
    pt_train tr;
    pt_pipeline pipe;
    pt_ckpt_meta cmeta;
    long start_step;
    char resumed[4200];    /* the checkpoint loaded ("": a fresh start), blamed for what it produces */
    int32_t *in, *tg;
    double tok_per_step, flops_tok, t_start;
    run_energy *en;
    run_metrics *mf;
    /* the training so far */
    double val0, vloss, t_total, first_loss, train_comm;
    float loss;
    long last_saved, ran, timed; /* a step saved by this run; steps run; steps timed */
} loop;

/* The backend, the model, its optimizer and the pipeline under the plan
 * (collective: every failure agreed on). */
static void build_model(loop *L)
{
    const run_opts *o = &L->o;
    run_setup *s = L->s;
    /* the device run_resolve_device chose */
    const pt_backend *be = L->be = pt_backend_get(s->device == RUN_DEVICE_CUDA ? "cuda" : "cpu");
    run_agree(be && be->ops ? PT_OK : pt_fail(PT_EUNSUPP, "%s", be ? "the backend has no ops table" : pt_errmsg()),
              "device");
    /* tensors on the GPU: every group's collectives on device buffers (NCCL
     * between GPUs, staged through host memory where ranks share one) */
    if (s->device == RUN_DEVICE_CUDA) run_agree(pt_pctx_device_enable(&L->ctx, PT_COMM_DEV_AUTO), "device communication");
    L->threads = o->threads ? (int)o->threads : default_threads();
    be->set_threads(L->threads);
    L->T = L->cfg.seq_len;

    pt_arena_init(&L->arena, be->mem, 0); /* the backend's memory: the GPU's under cuda */
    L->Bl = (int)(o->batch / L->plan.dp);
    pt_adamw_cfg opt;
    pt_adamw_default(&opt);
    opt.weight_decay = o->wd;
    opt.grad_clip = o->clip;
    opt.eps = o->eps;
    opt.beta1 = o->beta1;
    opt.beta2 = o->beta2;
    /* every plan runs through the pipeline executor: pp = 1 with m = 1 is
     * the plain step, pp = 1 with m > 1 gradient accumulation */
    pt_pipeline_cfg pc;
    const pt_train_strategy *strategy = pt_train_strategy_zero(L->plan.zero);
    int rc = strategy ? pt_pipeline_plan(&L->plan, &L->cfg, L->Bl, L->ctx.pp_rank, &pc) : PT_EINVAL;
    if (!rc)
        rc = pt_gpt_create_stage(&L->model, &L->cfg, &L->ctx, be, &L->arena, pc.micro, L->T, (uint64_t)o->seed,
                                 &pc.stage);
    if (!rc) rc = pt_train_create(&L->tr, &L->model, &opt, strategy);
    if (!rc) rc = pt_pipeline_create(&L->pipe, &L->tr, L->plan.schedule);
    run_agree(rc, "model");
}

/* Checkpoints (the run state besides the tensors, resuming) and the
 * batch buffers (collective). */
static void prepare_run(loop *L)
{
    const run_opts *o = &L->o;
    L->cmeta = (pt_ckpt_meta){.adam_step = 0, .seed = o->seed, .lr = o->lr, .min_lr = o->min_lr,
                              .warmup = o->warmup, .total_steps = o->steps, .beta1 = o->beta1, .beta2 = o->beta2,
                              .adam_eps = o->eps, .weight_decay = o->wd, .grad_clip = o->clip};
    snprintf(L->cmeta.model, sizeof L->cmeta.model, "%s", o->model);
    snprintf(L->cmeta.data, sizeof L->cmeta.data, "%s", o->data);
    L->start_step = 0;
    L->resumed[0] = '\0';
    if (o->resume) L->start_step = run_ckpt_resume(o, &L->tr, &L->plan, &L->cfg, L->resumed, sizeof L->resumed);
    if (o->save_dir) run_ckpt_catch_signals();
    L->in = malloc(sizeof(int32_t) * (size_t)L->Bl * L->T);
    L->tg = malloc(sizeof(int32_t) * (size_t)L->Bl * L->T);
    /* a collective: every rank takes part, with its own allocation's status */
    run_agree(L->in && L->tg ? PT_OK : pt_fail(PT_ENOMEM, "out of memory"), "batch");
    L->tok_per_step = (double)o->batch * L->T;
    L->flops_tok = pt_gpt_flops_per_token(&L->cfg, L->T);
}

/* Rank 0: the run's header lines (plan, model, train, device, blas,
 * precision). */
static void print_header(const loop *L, uint64_t agreed, int grid_rank)
{
    const run_opts *o = &L->o;
    const run_setup *s = L->s;
    const pt_gpt_config *cfg = &L->cfg;
    printf("plan: %s (source: %s, world %d, grid rank from %s; agreed by every rank, start-up hash %016llx)\n",
           L->summary, s->source, L->world, grid_rank >= 0 ? "launcher RANK" : "MPI", (unsigned long long)agreed);
    printf("model: %s L=%d H=%d C=%d T=%d V=%d (padded %d), %.2fM parameters, %.2fM per rank\n",
           o->model, cfg->n_layer, cfg->n_head, cfg->n_embd, cfg->seq_len, cfg->vocab, L->model.g.Vp,
           (double)pt_gpt_num_params(cfg) / 1e6, (double)L->model.nfloats / 1e6);
    printf("train: %s, %llu train / %llu val tokens; batch %ld x %d = %.0f tokens/step; %ld steps, lr %.2e -> %.2e, warmup %ld; %d threads/rank\n",
           o->data, (unsigned long long)s->train.ntokens, (unsigned long long)s->val.ntokens, o->batch, L->T,
           L->tok_per_step, o->steps, o->lr, o->min_lr, o->warmup, L->threads);
    char v[600];
    L->be->describe(v, sizeof v);
    printf("device: %s (%s)%s%s\n", L->be->name, s->device_note, v[0] ? ": " : "", v);
    printf("blas: %s\n", pt_blas_summary()); /* the fp32 GEMM; the bf16 one */
    char pline[600];
    run_precision_line(L->plan.precision, s->device, pline, sizeof pline);
    printf("precision: %s\n", pline);
    fflush(stdout);
}

/* --metrics: open the file (rank 0; agreed) and write the header record. */
static void open_metrics(loop *L)
{
    const run_opts *o = &L->o;
    const pt_gpt_config *cfg = &L->cfg;
    int rc = PT_OK;
    if (run_rank == 0 && !(L->mf = run_metrics_open(o->metrics))) rc = pt_fail(PT_EIO, "%s", pt_errmsg());
    run_agree(rc, "--metrics");
    json_t *hdr = json_pack("{s:s, s:s, s:i, s:i, s:i, s:i, s:i, s:I, s:s, s:i, s:o, s:I, s:o, s:o, "
                            "s:I, s:o, s:o}",
                            "type", "header", "model", o->model, "n_layer", cfg->n_layer, "n_head",
                            cfg->n_head, "n_embd", cfg->n_embd, "seq_len", cfg->seq_len, "vocab", cfg->vocab,
                            "params", (json_int_t)pt_gpt_num_params(cfg), "plan", L->summary, "world",
                            L->world, "tokens_per_step", run_json_num(L->tok_per_step), "steps",
                            (json_int_t)o->steps, "lr", run_json_num(o->lr), "min_lr",
                            run_json_num(o->min_lr), "warmup", (json_int_t)o->warmup, "flops_per_token",
                            run_json_num(L->flops_tok), "peak_gflops_per_rank",
                            o->peak_gflops > 0 ? run_json_num(o->peak_gflops) : json_null());
    if (hdr && L->s->peak_source[0]) json_object_set_new(hdr, "peak_source", json_string(L->s->peak_source));
    if (L->mf) run_energy_header(L->en, hdr);
    run_metrics_write(L->mf, hdr);
}

/* One training step's update at lr: the loss into L->loss, the gradient
 * norm into *norm; a failure, a CUDA op's included, or a NaN or an
 * infinity (the loss, the gradient norm, the weights the update left),
 * named with where it came from.  Agreed by every rank. */
static void train_step(loop *L, long step, float lr, double *norm)
{
    const pt_backend *be = L->be;
    int rc = load_batch(&L->s->train, step, &L->o, L->T, &L->ctx, L->in, L->tg);
    *norm = 0;
    run_energy_step_begin(L->en, step);
    if (!rc) rc = pt_pipeline_step(&L->pipe, L->in, L->tg, lr, &L->loss, norm);
    /* a CUDA op's failure (recorded; the ops return nothing) */
    const char *opmsg;
    int opst;
    if (!rc && (opst = be->status(&opmsg)) != PT_OK) rc = pt_fail(opst, "%s", opmsg);
    /* NaN and infinities: the loss and the gradient norm (pt_train_update
     * refuses a non-finite one before updating), then the weights the
     * update left (every rank its owned slices); none is ever saved, and
     * the message says where it came from */
    int from_start = step == L->start_step, nonfinite = rc && !isfinite(*norm);
    if (!rc && !isfinite(L->loss)) {
        rc = pt_fail(PT_EINVAL, "loss %g (not finite)", (double)L->loss);
        nonfinite = 1;
    }
    if (!rc && (rc = pt_train_check_finite(&L->tr, 0))) {
        if ((opst = be->status(&opmsg)) != PT_OK) { /* the check's own device op failed: that is the error */
            rc = pt_fail(opst, "%s", opmsg);
        } else {
            rc = pt_fail(rc, "after its update, %s", pt_errmsg());
            nonfinite = 1;
            from_start = from_start && *L->resumed; /* the loaded AdamW moments; a fresh start's first update is training */
        }
    }
    if (nonfinite) {
        char what[96];
        snprintf(what, sizeof what, "step %ld", step + 1); /* after run_agree's "training step: " */
        rc = blame(rc, from_start, L->resumed, L->o.seed, what);
    }
    run_agree(rc, "training step");
}

/* The step's record (--metrics: collective) and line (rank 0, every
 * --log-every steps and the last); dt its time in seconds. */
static void report_step(loop *L, long step, float lr, double norm, double dt, const uint64_t g0[ST_N])
{
    const run_opts *o = &L->o;
    json_t *rec = NULL;
    if (o->metrics) {
        uint64_t gs[ST_N];
        step_stats(&L->ctx, &L->arena, g0, gs);
        rec = json_pack("{s:s, s:I, s:o, s:o, s:o, s:o, s:o, s:o}", "type", "train", "step", (json_int_t)(step + 1),
                        "loss", run_json_num(L->loss), "lr", run_json_num(lr), "norm", run_json_num(norm), "step_ms",
                        run_json_num(dt * 1e3), "tok_s", run_json_num(L->tok_per_step / dt), "elapsed_s",
                        run_json_num(pt_now() - L->t_start));
        if (rec) stats_json(rec, L->tok_per_step / dt * L->flops_tok / 1e9 / L->world, o->peak_gflops, gs);
    }
    char eline[160];
    run_energy_step_end(L->en, step, dt, L->tok_per_step, rec, eline, sizeof eline);
    if (run_rank == 0 && !o->quiet && (step % o->log_every == 0 || step == o->steps - 1)) {
        /* ETA from the mean step time so far (the first step warms caches) */
        double mean = L->timed > 0 ? L->t_total / (double)L->timed : dt;
        char eta[32];
        fmt_duration(eta, sizeof eta, mean * (double)(o->steps - 1 - step));
        printf("step %5ld/%ld | loss %.4f | lr %.2e | norm %.3f | %.1f ms | %.0f tok/s%s | eta %s\n", step + 1,
               o->steps, L->loss, lr, norm, dt * 1e3, L->tok_per_step / dt, eline, eta);
        fflush(stdout);
    }
    run_metrics_write(L->mf, rec);
}

/* With --save-dir, after step `step`: a stop signal on any rank, or
 * --save-every, saves (collective).  1 when a signal asked to stop. */
static int save_after(loop *L, long step)
{
    const run_opts *o = &L->o;
    /* every rank sees the signal or not: agree on it, then save together */
    int want = run_ckpt_stop_signal(), any = 0;
    MPI_Allreduce(&want, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (!any && !(o->save_every && (step + 1) % o->save_every == 0)) return 0;
    char saved[4200];
    run_ckpt_save(o, &L->tr, &L->plan, &L->cfg, &L->cmeta, step + 1, saved, sizeof saved);
    L->last_saved = step + 1;
    if (run_rank == 0 && any)
        printf("stop: signal %s: checkpoint %s saved at step %ld; exiting\n", any == SIGTERM ? "SIGTERM" : "SIGUSR1",
               saved, step + 1);
    else if (run_rank == 0 && !o->quiet) printf("checkpoint: %s\n", saved);
    fflush(stdout);
    return any != 0;
}

/* The steps from start_step to --steps, validating every --val-every
 * and at the end.  1 when a signal stopped the run. */
static int train_steps(loop *L)
{
    const run_opts *o = &L->o;
    const long to_run = o->steps - L->start_step;
    for (long step = L->start_step; step < o->steps; step++) {
        double t0 = pt_now();
        uint64_t c0 = pt_pctx_sent_total(&L->ctx), g0[ST_N];
        if (o->metrics) group_sent(&L->ctx, g0);
        float lr = pt_lr_schedule((int)step, (int)o->warmup, (int)o->steps, o->lr, o->min_lr);
        double norm;
        train_step(L, step, lr, &norm);
        double dt = pt_now() - t0;
        L->train_comm += (double)(pt_pctx_sent_total(&L->ctx) - c0);
        if (L->ran > 0 || to_run == 1) { /* the first step of a run warms caches */
            L->t_total += dt;
            L->timed++;
        }
        if (L->ran == 0) L->first_loss = L->loss;
        L->ran++;
        report_step(L, step, lr, norm, dt, g0);
        if (o->save_dir && save_after(L, step)) return 1;
        if ((o->val_every > 0 && (step + 1) % o->val_every == 0) || step == o->steps - 1)
            validate(&L->pipe, L->s, &L->ctx, L->in, L->tg, step + 1, L->t_start, L->mf, &L->vloss, L->start_step,
                     L->resumed);
    }
    return 0;
}

/* The summary: rank 0's "done:" line and the done record (collective). */
static void summarise(loop *L)
{
    const run_opts *o = &L->o;
    const int timed = L->timed > 0;
    /* throughput over the steps this run timed (a resumed run's own
     * steps, the first of them warming caches); none when nothing ran */
    double ms_step = timed ? 1e3 * L->t_total / (double)L->timed : NAN;
    double tps = timed ? L->tok_per_step * (double)L->timed / L->t_total : NAN;
    size_t peak = L->arena.peak, peak_max = 0;
    MPI_Allreduce(&peak, &peak_max, 1, MPI_UNSIGNED_LONG, MPI_MAX, MPI_COMM_WORLD);
    double comm_bytes = L->ran > 0 ? L->train_comm / (double)L->ran : 0;
    const double gflops = tps * L->flops_tok / 1e9 / L->world;
    char eline[400];
    json_t *done = L->mf ? json_object() : NULL;
    run_energy_finish(L->en, done, eline, sizeof eline);
    if (run_rank == 0) {
        char mfu[48] = "", speed[160], losses[160];
        if (o->peak_gflops > 0 && timed) snprintf(mfu, sizeof mfu, " | MFU %.2f%%", 100 * gflops / o->peak_gflops);
        if (timed)
            snprintf(speed, sizeof speed, "%.1f ms/step | %.0f tok/s | %.2f GFLOP/s per rank", ms_step, tps, gflops);
        else
            snprintf(speed, sizeof speed, "no step run (resumed at step %ld)", L->start_step);
        /* no step run (resumed at the last step): no training loss and
         * one validation, not "train_loss nan -> nan" */
        if (L->ran > 0)
            snprintf(losses, sizeof losses, "train_loss %.4f -> %.4f | val_loss %.4f -> %.4f", L->first_loss,
                     L->loss, L->val0, L->vloss);
        else
            snprintf(losses, sizeof losses, "val_loss %.4f", L->vloss);
        printf("done: steps=%ld %s | %s | peak mem %.1f MiB/rank | comm %.2f MiB/step/rank%s%s\n", o->steps, losses,
               speed, mb((double)peak_max), mb(comm_bytes), eline, mfu);
        fflush(stdout);
    }
    json_t *rec = json_pack("{s:s, s:I, s:I, s:I, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "type",
                            "done", "steps", (json_int_t)o->steps, "start_step", (json_int_t)L->start_step,
                            "steps_run", (json_int_t)L->ran, "train_loss", run_json_num(L->loss), "val_loss",
                            run_json_num(L->vloss), "ms_per_step", run_json_num(ms_step), "tok_s",
                            run_json_num(tps), "gflops_per_rank", run_json_num(gflops), "mfu",
                            o->peak_gflops > 0 ? run_json_num(gflops / o->peak_gflops) : json_null(),
                            "peak_mib_per_rank", run_json_num(mb((double)peak_max)),
                            "comm_mib_per_step_per_rank", run_json_num(mb(comm_bytes)), "elapsed_s",
                            run_json_num(pt_now() - L->t_start));
    if (rec && done) json_object_update(rec, done);
    json_decref(done);
    run_metrics_write(L->mf, rec);
}

/* Release the run; its status agreed by every rank (a lost metrics
 * record fails the run on every rank alike). */
static int finish(loop *L)
{
    run_energy_free(L->en);
    int status = PT_EXIT_OK;
    if (run_metrics_close(L->mf) < 0) status = PT_EXIT_FAIL;
    free(L->in);
    free(L->tg);
    pt_pipeline_free(&L->pipe);
    pt_train_free(&L->tr);
    pt_gpt_free(&L->model);
    pt_pctx_free(&L->ctx);
    int worst = status;
    MPI_Allreduce(&status, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return worst;
}

int run_train(run_setup *s, uint64_t agreed, int world)
{
    loop L;
    memset(&L, 0, sizeof L);
    L.s = s;
    L.o = s->o;
    L.cfg = s->cfg;
    L.plan = s->plan;
    L.world = world;
    const run_opts *o = &L.o;

    int grid_rank = pt_launcher_rank(MPI_COMM_WORLD);
    run_agree(pt_pctx_init(&L.ctx, MPI_COMM_WORLD, &L.plan, grid_rank), "process grid");
    pt_log_set_rank(L.ctx.rank);
    pt_plan_summary(&L.plan, L.summary, sizeof L.summary);
    if (o->dry_run) {
        int st = dry_run(&L.ctx, &L.plan, L.summary, world);
        pt_pctx_free(&L.ctx);
        return st;
    }
    build_model(&L);
    prepare_run(&L);
    if (run_rank == 0) print_header(&L, agreed, grid_rank);
    /* energy: the meter, the clock plan, the sweep (collective; NULL when off) */
    L.en = run_energy_start(s, &L.ctx, &L.pipe, world, L.start_step);
    if (o->metrics) open_metrics(&L); /* agreed: given to every rank or to none; rank 0 writes */
    L.t_start = pt_now();

    /* the validation before the first step of this run: at step 0, or at
     * the step a resumed run starts from */
    L.val0 = L.vloss = L.first_loss = NAN;
    L.loss = NAN;
    L.last_saved = -1;
    validate(&L.pipe, s, &L.ctx, L.in, L.tg, L.start_step, L.t_start, L.mf, &L.val0, L.start_step, L.resumed);
    L.vloss = L.val0;
    const int stopped = train_steps(&L);
    /* the end of the run is always kept; a run resumed at its last step
     * saves it again, in its own plan and --save-dir (how a checkpoint is
     * resharded: tests/mpi/test_ckpt.sh) */
    if (!stopped && o->save_dir && L.last_saved != o->steps) {
        char saved[4200];
        run_ckpt_save(o, &L.tr, &L.plan, &L.cfg, &L.cmeta, o->steps, saved, sizeof saved);
        if (run_rank == 0 && !o->quiet) {
            printf("checkpoint: %s\n", saved);
            fflush(stdout);
        }
    }
    if (!stopped) summarise(&L);
    return finish(&L);
}
