/* The pipeline executor's per-instruction hook (pt_pipeline_set_hook):
 *
 * usage: test_pipeline_hook SCHEDULE PP M V   (mpirun -np PP)
 *        test_pipeline_hook error             (mpirun -np 1)
 *
 * On every rank, for two steps on fresh random tokens: the hook is called
 * once before and once after every forward and backward of the rank's
 * action list, in the list's order, never around a send or receive, with
 * the action's chunk and microbatch; the step's loss and every parameter
 * after it are bitwise those of the same step without a hook (a second
 * model built from the same seed).  "error": a hook that fails at the
 * second instruction fails the step with its status and message, and the
 * instructions after it are not run. */
#include "comm/comm.h"
#include "core/core.h"
#include "model/gpt.h"
#include "parallel/context.h"
#include "pipeline/pipeline.h"
#include "train/train.h"

#include <mpi.h>
#include "mpi_tap.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct rig {
    pt_pctx ctx;
    pt_pipeline_cfg pc;
    pt_arena arena;
    pt_gpt m;
    pt_train t;
    pt_pipeline pipe;
} rig;

static int rig_build(rig *g, const pt_plan *plan, const pt_gpt_config *cfg, int Bdp, uint64_t seed)
{
    memset(g, 0, sizeof *g);
    pt_adamw_cfg opt;
    pt_adamw_default(&opt);
    int rc = pt_pctx_init(&g->ctx, MPI_COMM_WORLD, plan, -1);
    if (!rc) rc = pt_pipeline_plan(plan, cfg, Bdp, g->ctx.pp_rank, &g->pc);
    if (!rc)
        rc = pt_gpt_create_stage(&g->m, cfg, &g->ctx, pt_backend_get("cpu"), &g->arena, g->pc.micro, cfg->seq_len, seed,
                                 &g->pc.stage);
    if (!rc) rc = pt_train_create(&g->t, &g->m, &opt, NULL);
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

/* What the hook saw: (chunk, mb, bwd, after) per call. */
typedef struct calls {
    int n, cap, fail_at;
    int (*c)[4];
} calls;

static int record(void *arg, int chunk, int mb, int bwd, int after)
{
    calls *k = arg;
    if (k->fail_at >= 0 && k->n == k->fail_at) return pt_fail(PT_EIO, "hook refused chunk %d mb %d", chunk, mb);
    if (k->n < k->cap) {
        k->c[k->n][0] = chunk, k->c[k->n][1] = mb, k->c[k->n][2] = bwd, k->c[k->n][3] = after;
    }
    k->n++;
    return PT_OK;
}

static int parse_sched(const char *s)
{
    return !strcmp(s, "gpipe") ? PT_SCHED_GPIPE : !strcmp(s, "interleaved") ? PT_SCHED_INTERLEAVED : PT_SCHED_1F1B;
}

int main(int argc, char **argv)
{
    tap_init(&argc, &argv);
    pt_backend_get("cpu")->set_threads(1);
    const unsigned long seed = tap_seed();
    const int error_mode = argc == 2 && !strcmp(argv[1], "error");
    if (!error_mode && argc < 5) {
        if (tap_rank0) printf("not ok - usage: test_pipeline_hook SCHEDULE PP M V | error\n");
        MPI_Finalize();
        return 1;
    }
    pt_plan plan;
    pt_plan_default(&plan);
    plan.schedule = error_mode ? PT_SCHED_1F1B : parse_sched(argv[1]);
    plan.pp = error_mode ? 1 : atoi(argv[2]);
    plan.microbatches = error_mode ? 4 : atoi(argv[3]);
    plan.virtual_stages = error_mode ? 1 : atoi(argv[4]);
    const int pp = plan.pp, M = plan.microbatches, V = plan.virtual_stages;
    pt_gpt_config cfg = {.n_layer = pp * V < 4 ? 4 : pp * V, .n_head = 2, .n_embd = 16, .seq_len = 8, .vocab = 61};
    const int micro = 2, B = M * micro, T = cfg.seq_len;
    if (tap_rank0)
        printf("# %s pp=%d m=%d v=%d seed=%lu (PTRAIN_TEST_SEED reproduces)\n", pt_pp_schedule_name(plan.schedule), pp,
               M, V, seed);
    rig a, b;
    int rc = rig_build(&a, &plan, &cfg, B, seed);
    if (!rc) rc = rig_build(&b, &plan, &cfg, B, seed);
    report(rc == PT_OK, "two identical pipelines built: %s", rc ? pt_errmsg() : "");
    if (rc) {
        MPI_Finalize();
        return 1;
    }
    calls k = {0, 4096, -1, NULL};
    k.c = calloc((size_t)k.cap, sizeof *k.c);
    pt_pipeline_set_hook(&a.pipe, record, &k);
    int32_t *tok = malloc(sizeof(int32_t) * (size_t)(B * T + 1));
    pt_rng r;
    pt_rng_seed(&r, seed, 7);
    for (int i = 0; i <= B * T; i++) tok[i] = (int32_t)(pt_rng_u64(&r) % (uint64_t)cfg.vocab);

    if (error_mode) {
        k.fail_at = 2; /* the before-call of the second instruction */
        rc = pt_pipeline_step(&a.pipe, tok, tok + 1, 1e-3f, NULL, NULL);
        /* 1F1B on one stage: forward 0, backward 0, forward 1, ...: the second is backward 0 */
        report(rc == PT_EIO && strstr(pt_errmsg(), "(bwd microbatch 0 chunk 0): hook refused chunk 0 mb 0"),
               "a hook that fails fails the step with its status and message: %s", pt_errmsg());
        report(k.n == 2, "nothing after the failing call ran (%d hook calls before it)", k.n);
        free(k.c);
        free(tok);
        rig_free(&a);
        rig_free(&b);
        MPI_Finalize();
        return tap_failures ? 1 : 0;
    }

    for (int step = 0; step < 2; step++) {
        k.n = 0;
        float la = 0, lb = 0;
        rc = pt_pipeline_step(&a.pipe, tok, tok + 1, 1e-3f, &la, NULL);
        if (!rc) rc = pt_pipeline_step(&b.pipe, tok, tok + 1, 1e-3f, &lb, NULL);
        report(rc == PT_OK, "step %d ran with and without the hook: %s", step + 1, rc ? pt_errmsg() : "");
        if (rc) break;
        /* the hook's calls against the rank's action list */
        int ok = 1, j = 0, computes = 0;
        const pt_pp_schedule *s = &a.pipe.sched;
        for (int i = 0; i < s->n && ok; i++) {
            const pt_pp_action *x = &s->a[i];
            if (x->op != PT_PP_FWD && x->op != PT_PP_BWD) continue;
            computes++;
            for (int after = 0; after < 2 && ok; after++, j++)
                ok = j < k.n && k.c[j][0] == x->chunk && k.c[j][1] == x->mb && k.c[j][2] == (x->op == PT_PP_BWD) &&
                     k.c[j][3] == after;
        }
        ok &= j == k.n;
        report(ok, "step %d: before and after every one of the rank's %d forwards and backwards, in its list's order "
               "(%d calls)", step + 1, computes, k.n);
        report(memcmp(&la, &lb, sizeof la) == 0, "step %d: the loss is bitwise the one without a hook (%.6f)", step + 1,
               la);
        int same = 1;
        for (int i = 0; i < a.m.nparams; i++)
            same &= memcmp(a.m.params[i].data, b.m.params[i].data, (size_t)a.m.params[i].shard.numel * sizeof(float)) == 0;
        report(same, "step %d: every parameter is bitwise the one without a hook", step + 1);
        for (int i = 0; i <= B * T; i++) tok[i] = (int32_t)(pt_rng_u64(&r) % (uint64_t)cfg.vocab);
    }
    free(k.c);
    free(tok);
    rig_free(&a);
    rig_free(&b);
    MPI_Finalize();
    return tap_failures ? 1 : 0;
}
