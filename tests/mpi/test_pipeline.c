/* SPDX-License-Identifier: MIT */
/* Pipeline parallelism reproduces the single-process run.
 *
 * usage: test_pipeline SCHEDULE PP M V DP TP MODE SPLIT [STEPS [RECOMPUTE [ZERO [PRECISION]]]]
 *          (under mpirun -np DP*PP*TP; SCHEDULE gpipe, 1f1b or interleaved;
 *           SPLIT "-" for the even split or blocks per virtual stage "3,1";
 *           RECOMPUTE none, block or attention: the pipeline model only,
 *           the reference stores everything; ZERO 0..3 the pipeline's
 *           strategy, gradients and parameters compared on the elements
 *           each rank updates, pt_train_owned; PRECISION fp32 or bf16: both
 *           models in it, bf16 bounds as test_equiv's)
 *        test_pipeline memory   (mpirun -np 2)
 *
 * Equivalence: every rank also builds the reference model (dp = pp = tp =
 * 1) on MPI_COMM_SELF with the whole global batch (dp * M microbatches).
 * For STEPS AdamW steps on fresh random tokens (seed from the clock,
 * PTRAIN_TEST_SEED reproduces) it compares the loss, every gradient of
 * every stage after the dp sync (each local parameter against the
 * reference's parameter of the same whole-model index, sliced by the
 * layout; both copies of the tied wte carry the whole gradient), the
 * global gradient norm, and at the end every parameter.  Byte counters:
 * the pp group moves 2 (S-1) M boundary tensors of e Bl*Tl*Cr bytes per
 * step (S = PP * V, e = 4 fp32, 2 bf16), in as many sends.
 *
 * Memory: at pp = 2, the arena peak of stage 0 after one step for GPipe
 * and 1F1B at M = 2, 4, 8: GPipe grows by one activation set per extra
 * microbatch (linear in M, each set at least the model's formula for
 * the stage's blocks plus the two boundary buffers), 1F1B stays at its
 * pp = 2 sets.
 */
#include "comm/comm.h"
#include "core/core.h"
#include "model/gpt.h"
#include "parallel/context.h"
#include "ref_slice.h"
#include "pipeline/pipeline.h"
#include "train/train.h"

#include <math.h>
#include <mpi.h>
#include "mpi_tap.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int parse_sched(const char *s)
{
    if (!strcmp(s, "gpipe")) return PT_SCHED_GPIPE;
    if (!strcmp(s, "1f1b")) return PT_SCHED_1F1B;
    if (!strcmp(s, "interleaved")) return PT_SCHED_INTERLEAVED;
    return -1;
}

/* max over local parameters of max|local - slice(ref[index])| / max|slice|
 * (grads) or the absolute difference (params) */
static double compare(const pt_train *t, const pt_gpt *ref, int grads, int relative, const pt_pctx *c, char *worst,
                      size_t wn)
{
    const pt_gpt *m = t->model;
    double worst_err = 0;
    for (int i = 0; i < m->nparams; i++) {
        const pt_param *p = &m->params[i], *q = &ref->params[p->index];
        float *slice = ref_slice(m, c, p, q, grads);
        /* the elements this rank updates (the whole shard without ZeRO) */
        int64_t lo = 0, hi = 0;
        const float *d = NULL, *g = NULL;
        pt_train_owned(t, i, &lo, &hi, &d, &g);
        const float *a = grads ? g : d;
        double diff = 0, mag = 0;
        for (int64_t j = lo; j < hi; j++) {
            diff = fmax(diff, fabs((double)a[j - lo] - slice[j]));
            mag = fmax(mag, fabs(slice[j]));
        }
        double err = relative ? (diff == 0 ? 0 : diff / (mag + 1e-12)) : diff;
        if (strcmp(p->name, q->name)) err = INFINITY; /* index maps to another tensor */
        if (err > worst_err) {
            worst_err = err;
            snprintf(worst, wn, "%s", p->name);
        }
        free(slice);
    }
    return worst_err;
}


/* Build context, stage model, registry and executor for plan `plan`. */
typedef struct rig {
    pt_pctx ctx;
    pt_arena arena;
    pt_gpt m;
    pt_train t;
    pt_pipeline pipe;
    pt_pipeline_cfg pc;
} rig;

static int rig_build(rig *g, const pt_plan *plan, const pt_gpt_config *cfg, int Bdp, uint64_t seed)
{
    memset(g, 0, sizeof *g);
    const pt_backend *be = pt_backend_get("cpu");
    pt_adamw_cfg opt;
    pt_adamw_default(&opt);
    opt.eps = 1e-2f; /* Lipschitz update, see test_equiv.c */
    int rc = pt_pctx_init(&g->ctx, MPI_COMM_WORLD, plan, -1);
    if (!rc) rc = pt_pipeline_plan(plan, cfg, Bdp, g->ctx.pp_rank, &g->pc);
    if (!rc) rc = pt_gpt_create_stage(&g->m, cfg, &g->ctx, be, &g->arena, g->pc.micro, cfg->seq_len, seed, &g->pc.stage);
    if (!rc) rc = pt_train_create(&g->t, &g->m, &opt, pt_train_strategy_zero(plan->zero));
    if (!rc) rc = pt_pipeline_create(&g->pipe, &g->t, plan->schedule);
    return rc;
}

static void rig_free(rig *g)
{
    pt_pipeline_free(&g->pipe);
    pt_train_free(&g->t);
    pt_gpt_free(&g->m);
    pt_pctx_free(&g->ctx);
}

static int memory_test(uint64_t seed)
{
    pt_gpt_config cfg = {.n_layer = 4, .n_head = 4, .n_embd = 32, .seq_len = 16, .vocab = 97};
    const int ms[3] = {2, 4, 8};
    size_t peak[2][3];
    size_t slot_formula = 0;
    for (int s = 0; s < 2; s++)
        for (int k = 0; k < 3; k++) {
            pt_plan plan;
            pt_plan_default(&plan);
            plan.pp = 2;
            plan.microbatches = ms[k];
            plan.schedule = s == 0 ? PT_SCHED_GPIPE : PT_SCHED_1F1B;
            rig g;
            int rc = rig_build(&g, &plan, &cfg, 2 * ms[k], seed);
            int32_t *tok = malloc(sizeof(int32_t) * (size_t)(2 * ms[k] * cfg.seq_len + 1));
            pt_rng r;
            pt_rng_seed(&r, seed, 5);
            for (int i = 0; i <= 2 * ms[k] * cfg.seq_len; i++) tok[i] = (int32_t)(pt_rng_u64(&r) % (uint64_t)cfg.vocab);
            if (!rc) rc = pt_pipeline_step(&g.pipe, tok, tok + 1, 1e-3f, NULL, NULL);
            if (rc) {
                report(0, "memory run %s m=%d: %s", pt_pp_schedule_name(plan.schedule), ms[k], pt_errmsg());
                return 1;
            }
            peak[s][k] = g.arena.peak;
            /* one slot: the stage's blocks at the model's formula + 2 boundary buffers */
            slot_formula = pt_gpt_block_act_bytes(&g.m, PT_RECOMPUTE_NONE) * (size_t)(g.pc.stage.l1[0] - g.pc.stage.l0[0]) +
                           2 * g.pipe.nact * g.m.ea;
            free(tok);
            rig_free(&g);
        }
    /* stage 0 (rank 0) holds the most microbatches: report its peaks */
    MPI_Bcast(peak, (int)sizeof peak, MPI_BYTE, 0, MPI_COMM_WORLD);
    MPI_Bcast(&slot_formula, (int)sizeof slot_formula, MPI_BYTE, 0, MPI_COMM_WORLD);
    const double per_mb = (double)(peak[0][1] - peak[0][0]) / 2;
    report(peak[0][2] - peak[0][1] == 2 * (peak[0][1] - peak[0][0]) && per_mb >= (double)slot_formula &&
               per_mb <= 1.5 * (double)slot_formula,
           "GPipe stage-0 peak grows linearly with m: %zu, %zu, %zu B at m = 2, 4, 8; %.0f B per microbatch "
           "(model formula for the stage's blocks + 2 boundary buffers: %zu B)",
           peak[0][0], peak[0][1], peak[0][2], per_mb, slot_formula);
    report(peak[1][0] == peak[1][1] && peak[1][1] == peak[1][2] && peak[1][0] == peak[0][0],
           "1F1B stage-0 peak stays at pp = 2 microbatches: %zu, %zu, %zu B at m = 2, 4, 8 (GPipe at m = 2: %zu B)",
           peak[1][0], peak[1][1], peak[1][2], peak[0][0]);
    return 0;
}

int main(int argc, char **argv)
{
    tap_init(&argc, &argv);
    int ws;
    MPI_Comm_size(MPI_COMM_WORLD, &ws);
    pt_backend_get("cpu")->set_threads(1);
    const unsigned long seed = tap_seed();
    if (argc == 2 && !strcmp(argv[1], "memory")) {
        if (tap_rank0) printf("# memory seed=%lu (PTRAIN_TEST_SEED reproduces)\n", seed);
        memory_test(seed);
        MPI_Finalize();
        return tap_failures ? 1 : 0;
    }
    if (argc < 9) {
        if (tap_rank0) printf("not ok - usage: test_pipeline SCHEDULE PP M V DP TP MODE SPLIT [STEPS]\n");
        MPI_Finalize();
        return 1;
    }
    pt_plan plan;
    pt_plan_default(&plan);
    plan.schedule = parse_sched(argv[1]);
    plan.pp = atoi(argv[2]);
    plan.microbatches = atoi(argv[3]);
    plan.virtual_stages = atoi(argv[4]);
    plan.dp = atoi(argv[5]);
    plan.tp = atoi(argv[6]);
    pt_mode_parse(argv[7], &plan.mode);
    if (strcmp(argv[8], "-")) {
        char *s = argv[8];
        while (*s && plan.pp_split_n < PT_PP_SPLIT_MAX) {
            plan.pp_split[plan.pp_split_n++] = (int)strtol(s, &s, 10);
            if (*s == ',') s++;
        }
    }
    const int steps = argc > 9 ? atoi(argv[9]) : 3;
    const char *rcname = argc > 10 ? argv[10] : "none";
    plan.zero = argc > 11 ? atoi(argv[11]) : 0;
    if (argc > 12 && pt_precision_parse("precision", argv[12], &plan.precision) < 0) {
        if (tap_rank0) printf("not ok - bad precision %s\n", argv[12]);
        MPI_Finalize();
        return 1;
    }
    const int bf = plan.precision == PT_PREC_BF16;
    /* bounds: fp32 summation order; bf16 (test_equiv's reasoning), except
     * each gradient tensor by norm to 5e-2, not 3e-2: under 2d tp a SUMMA
     * step rounds its partial product to bf16 and the dX partials are summed
     * in bf16, and with pp = 2 the small LayerNorm gradients then differ
     * from the single process by 2.2e-2 (median) and 3.14e-2 (worst) over
     * 30 seeds of "1f1b 2 2 1 1 4 2d"; 3e-2 failed 2 of 40 runs.  A lost or
     * doubled partial is off by O(1). */
    const double ltol = bf ? 1e-3 : 2e-6, gtol = bf ? 5e-2 : 1e-4, ntol = bf ? 5e-3 : 1e-5, ptol = bf ? 2e-4 : 1e-6;
    plan.recompute = !strcmp(rcname, "block") ? PT_RECOMPUTE_BLOCK : !strcmp(rcname, "attention") ? PT_RECOMPUTE_ATTENTION
                                                                                                  : PT_RECOMPUTE_NONE;
    const int pp = plan.pp, M = plan.microbatches, V = plan.virtual_stages, dp = plan.dp;
    int L = pp * V < 4 ? 4 : pp * V;
    if (plan.pp_split_n) {
        L = 0;
        for (int i = 0; i < plan.pp_split_n; i++) L += plan.pp_split[i];
    }
    /* tiny model; V=97 makes vocabulary padding real */
    pt_gpt_config cfg = {.n_layer = L, .n_head = 4, .n_embd = 32, .seq_len = 8, .vocab = 97};
    test_model_family(&cfg);
    const int micro = 2, Bdp = M * micro, B = Bdp * dp, T = cfg.seq_len;
    char summary[160];
    snprintf(summary, sizeof summary, "%s pp=%d m=%d v=%d dp=%d tp=%d %s split=%s L=%d recompute=%s zero=%d %s", argv[1],
             pp, M, V, dp, plan.tp, argv[7], argv[8], L, rcname, plan.zero, pt_precision_name(plan.precision));
    if (tap_rank0) printf("# %s steps=%d seed=%lu (PTRAIN_TEST_SEED reproduces)\n", summary, steps, seed);

    rig g;
    pt_pctx rctx;
    pt_plan rplan;
    pt_plan_default(&rplan);
    rplan.precision = plan.precision;
    pt_arena rarena = {0};
    pt_gpt ref;
    pt_train tref;
    pt_adamw_cfg opt;
    pt_adamw_default(&opt);
    opt.eps = 1e-2f;
    int rc = rig_build(&g, &plan, &cfg, Bdp, seed);
    if (!rc) rc = pt_pctx_init(&rctx, MPI_COMM_SELF, &rplan, -1);
    if (!rc) rc = pt_gpt_create(&ref, &cfg, &rctx, pt_backend_get("cpu"), &rarena, B, T, seed);
    if (!rc) rc = pt_train_create(&tref, &ref, &opt, NULL);
    report(rc == PT_OK, "stage models built (%s): %s", summary, rc ? pt_errmsg() : "");
    if (rc) { MPI_Finalize(); return 1; }
    if (tap_rank0) printf("# pp rank 0: chunks %d, blocks [%d,%d), slots %d\n", g.pc.stage.nchunks, g.pc.stage.l0[0], g.pc.stage.l1[0], g.pc.stage.nslots);

    char worst[32] = "";
    double e = max_world_named(compare(&g.t, &ref, 0, 0, &g.ctx, worst, sizeof worst), worst, sizeof worst);
    report(e == 0, "initial parameters of every stage are the reference's (max abs diff %.2e)", e);
    int32_t *tok = malloc(sizeof(int32_t) * (size_t)(B * T + 1));
    pt_rng r;
    pt_rng_seed(&r, seed, 99);
    const int S = pp * V;
    for (int s = 0; s < steps && rc == PT_OK; s++) {
        for (int i = 0; i <= B * T; i++) tok[i] = (int32_t)(pt_rng_u64(&r) % (uint64_t)cfg.vocab);
        const int32_t *in = tok, *tg = tok + 1;
        float loss, rloss;
        pt_pctx_reset_stats(&g.ctx);
        pt_train_zero_grad(&g.t);
        pt_train_zero_grad(&tref);
        rc = pt_train_forward_backward(&tref, in, tg, &rloss);
        if (!rc) rc = pt_train_sync(&tref);
        if (!rc) rc = pt_pipeline_forward_backward(&g.pipe, in + g.ctx.dp_rank * Bdp * T, tg + g.ctx.dp_rank * Bdp * T, &loss);
        uint64_t sent = pt_comm_sent_total(&g.ctx.pp), sends = g.ctx.pp.stats.calls[PT_COLL_SEND];
        if (!rc) rc = pt_train_sync(&g.t);
        if (rc) { report(0, "step %d: %s", s + 1, pt_errmsg()); break; }
        double le = fabs((double)loss - rloss) / fabs(rloss);
        report(le < ltol, "step %d: loss %.6f equals reference %.6f (rel err %.2e)", s + 1, loss, rloss, le);
        e = max_world_named(compare(&g.t, &ref, 1, 1, &g.ctx, worst, sizeof worst), worst, sizeof worst);
        report(e < gtol, "step %d: every gradient of every stage equals the reference's (max rel err %.2e < %.0e, worst %s)",
               s + 1, e, gtol, worst);
        if (s == 0) {
            const size_t eb = g.pipe.nact * g.m.ea; /* one boundary tensor's bytes */
            uint64_t tot[2] = {sent, sends}, want = 2ull * (uint64_t)(S - 1) * (uint64_t)M * eb;
            MPI_Allreduce(MPI_IN_PLACE, tot, 2, MPI_UINT64_T, MPI_SUM, g.ctx.pp.comm);
            report(tot[0] == want && tot[1] == 2ull * (uint64_t)(S - 1) * (uint64_t)M,
                   "pp group p2p: %llu B in %llu sends = 2 (S-1) m = %d boundary tensors of %zu B (expected %llu B)",
                   (unsigned long long)tot[0], (unsigned long long)tot[1], 2 * (S - 1) * M, eb,
                   (unsigned long long)want);
        }
        double n1, n2;
        rc = pt_train_update(&g.t, 1e-3f, &n1);
        if (!rc) rc = pt_train_update(&tref, 1e-3f, &n2);
        if (rc) { report(0, "optimizer step %d: %s", s + 1, pt_errmsg()); break; }
        report(fabs(n1 - n2) / n2 < ntol, "step %d: global gradient norm %.6f equals reference %.6f", s + 1, n1, n2);
    }
    e = max_world_named(compare(&g.t, &ref, 0, 0, &g.ctx, worst, sizeof worst), worst, sizeof worst);
    report(rc == PT_OK && e <= ptol,
           "after %d AdamW steps every parameter of every stage equals the reference's (max abs diff %.2e <= %.0e, worst %s)",
           steps, e, ptol, worst);
    /* pt_pipeline_step is the same step: one more on both */
    if (rc == PT_OK) {
        for (int i = 0; i <= B * T; i++) tok[i] = (int32_t)(pt_rng_u64(&r) % (uint64_t)cfg.vocab);
        float l1 = 0, l2 = 0;
        rc = pt_pipeline_step(&g.pipe, tok + g.ctx.dp_rank * Bdp * T, tok + 1 + g.ctx.dp_rank * Bdp * T, 1e-3f, &l1, NULL);
        if (!rc) rc = pt_train_step(&tref, tok, tok + 1, 1e-3f, &l2, NULL);
        e = max_world_named(compare(&g.t, &ref, 0, 0, &g.ctx, worst, sizeof worst), worst, sizeof worst);
        report(rc == PT_OK && fabs((double)l1 - l2) / l2 < ltol && e <= ptol,
               "pt_pipeline_step == pt_train_step: loss %.6f vs %.6f, parameters max abs diff %.2e%s%s", l1, l2, e,
               rc ? ": " : "", rc ? pt_errmsg() : "");
    }
    free(tok);
    rig_free(&g);
    pt_train_free(&tref);
    pt_gpt_free(&ref);
    pt_pctx_free(&rctx);
    report(g.arena.cur == 0 && rarena.cur == 0, "arena returns to 0 bytes after free (peak %zu B/rank)", g.arena.peak);
    MPI_Finalize();
    return tap_failures ? 1 : 0;
}
