/* bench-pipeline: pipeline schedules side by side (lib/pipeline).
 *
 *   usage: mpirun -np P bench/bench-pipeline [--layers 8] [--embd 128]
 *            [--heads 4] [--seq 64] [--vocab 1024] [--micro 2]
 *            [--ms P,2P,4P] [--steps 3] [--warmup 1] [--help]
 *
 * pp = P (dp = tp = 1).  For GPipe, 1F1B and interleaved 1F1B (v = 2)
 * and every m in --ms (interleaved only where P | m), it builds the stage
 * models (pt_pipeline_plan, pt_gpt_create_stage) on a fresh arena, runs
 * --warmup untimed then --steps timed pt_pipeline_step calls on the same
 * random tokens, and prints one markdown table:
 *   bubble       measured: 1 - busy / schedule time, where busy is the
 *                rank's forward/backward compute seconds and schedule
 *                time the wall seconds of its whole action list
 *                (pt_pipeline.busy_s / sched_s), summed over the timed
 *                steps, mean over ranks;
 *   formula      (p-1)/(m+p-1) (GPipe, 1F1B) or (p-1)/(v m+p-1)
 *                (interleaved; Narayanan et al. 2021, sec. 2.1-2.2), and
 *                the ratio measured / formula;
 *   slots        activation sets on stage 0 (microbatches held at once);
 *   peak MiB     arena high-water mark, max over ranks (parameters,
 *                gradients, AdamW moments, activation slots, boundary
 *                buffers);
 *   tokens/s     m * micro * T * steps / wall seconds of the timed steps
 *                (slowest rank), and the ratio to the first row (GPipe at
 *                the smallest m), the baseline of this run.
 * The formula assumes equal stages and free communication: the last
 * stage also runs the head (a V x C matmul) and the first the
 * embedding, so the measured bubble is larger.  With more ranks than
 * cores, waiting ranks poll and steal compute: compare rows of one run.
 */
#include "core/core.h"
#include "model/gpt.h"
#include "parallel/context.h"
#include "pipeline/pipeline.h"
#include "train/train.h"
#include "bench_opts.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    pt_host_memory_keep(); /* as ptrain-run: freed blocks stay for the next step */
    pt_gpt_config cfg = {.n_layer = 8, .n_head = 4, .n_embd = 128, .seq_len = 64, .vocab = 1024};
    int micro = 2, steps = 3, warmup = 1;
    bench_ints mlist = {0};
    const bench_opt opts[] = {
        {"layers", BENCH_INT, 1, 4096, &cfg.n_layer, "L", "transformer layers", NULL},
        {"embd", BENCH_INT, 1, 65536, &cfg.n_embd, "C", "embedding width, a multiple of --heads", NULL},
        {"heads", BENCH_INT, 1, 4096, &cfg.n_head, "H", "attention heads", NULL},
        {"seq", BENCH_INT, 1, 65536, &cfg.seq_len, "T", "sequence length", NULL},
        {"vocab", BENCH_INT, 1, 16777216, &cfg.vocab, "V", "vocabulary size", NULL},
        {"micro", BENCH_INT, 1, 65536, &micro, "N", "sequences per microbatch", NULL},
        {"ms", BENCH_INTS, 1, 65536, &mlist, "LIST", "microbatch counts m (interleaved only where P divides m)",
         "P,2P,4P for P ranks"},
        {"steps", BENCH_INT, 1, 1000000, &steps, "N", "timed steps per row", NULL},
        {"warmup", BENCH_INT, 0, 1000000, &warmup, "N", "untimed steps before them", NULL},
        {0}};
    bench_opts_parse(argc, argv, "bench-pipeline", "mpirun -np P bench-pipeline [options]",
                     "GPipe, 1F1B and interleaved 1F1B at pp = P side by side: measured bubble against the formula, "
                     "peak memory, tokens/s.",
                     opts);
    MPI_Init(&argc, &argv);
    int rank, P;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &P);
    const pt_backend *be = pt_backend_get("cpu");
    be->set_threads(1);
    const int T = cfg.seq_len;
    int ms[BENCH_INTS_MAX], nm = 0;
    if (mlist.n) {
        for (int i = 0; i < mlist.n; i++) ms[nm++] = mlist.v[i];
    } else {
        ms[nm++] = P, ms[nm++] = 2 * P, ms[nm++] = 4 * P;
    }
    for (int i = 0; i < nm; i++) /* the tokens of a step, m * micro * T + 1, are indexed by int */
        if ((long long)ms[i] * micro * T >= 1LL << 30) {
            if (rank == 0)
                fprintf(stderr, "bench-pipeline: m %d x --micro %d x --seq %d = %lld tokens a step; valid: below 2^30\n",
                        ms[i], micro, T, (long long)ms[i] * micro * T);
            MPI_Finalize();
            return 2;
        }
    if (rank == 0) {
        printf("# bench-pipeline: pp=%d, model L%d H%d C%d T%d V%d, microbatch %d sequences, %d timed steps\n", P,
               cfg.n_layer, cfg.n_head, cfg.n_embd, T, cfg.vocab, micro, steps);
        printf("| schedule | pp | m | v | bubble | formula | ratio | slots | peak MiB | tokens/s | vs first |\n");
        printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
    }
    double base_tps = 0;
    const int kinds[3] = {PT_SCHED_GPIPE, PT_SCHED_1F1B, PT_SCHED_INTERLEAVED};
    for (int ki = 0; ki < 3; ki++)
        for (int mi = 0; mi < nm; mi++) {
            const int kind = kinds[ki], m = ms[mi], v = kind == PT_SCHED_INTERLEAVED ? 2 : 1;
            pt_plan plan;
            pt_plan_default(&plan);
            plan.pp = P, plan.microbatches = m, plan.schedule = kind, plan.virtual_stages = v;
            pt_pctx ctx;
            pt_arena arena = {0};
            pt_gpt model;
            pt_train tr;
            pt_pipeline pipe;
            pt_pipeline_cfg pc;
            pt_adamw_cfg opt;
            pt_adamw_default(&opt);
            memset(&model, 0, sizeof model);
            memset(&tr, 0, sizeof tr);
            memset(&pipe, 0, sizeof pipe);
            int rc = pt_pctx_init(&ctx, MPI_COMM_WORLD, &plan, -1);
            if (rc) {
                if (rank == 0) printf("| %s | %d | %d | %d | n/a: %s |\n", pt_pp_schedule_name(kind), P, m, v, pt_errmsg());
                continue;
            }
            rc = pt_pipeline_plan(&plan, &cfg, m * micro, ctx.pp_rank, &pc);
            if (!rc) rc = pt_gpt_create_stage(&model, &cfg, &ctx, be, &arena, micro, T, 1234, &pc.stage);
            if (!rc) rc = pt_train_create(&tr, &model, &opt, NULL);
            if (!rc) rc = pt_pipeline_create(&pipe, &tr, kind);
            int32_t *tok = malloc(sizeof(int32_t) * (size_t)(m * micro * T + 1));
            pt_rng r;
            pt_rng_seed(&r, 42, 7);
            for (int i = 0; i <= m * micro * T; i++) tok[i] = (int32_t)(pt_rng_u64(&r) % (uint64_t)cfg.vocab);
            double busy = 0, sched = 0, wall = 0;
            for (int s = 0; s < warmup + steps && !rc; s++) {
                MPI_Barrier(MPI_COMM_WORLD);
                double t0 = pt_now();
                rc = pt_pipeline_step(&pipe, tok, tok + 1, 1e-4f, NULL, NULL);
                if (s >= warmup) {
                    wall += pt_now() - t0;
                    busy += pipe.busy_s;
                    sched += pipe.sched_s;
                }
            }
            int bad = rc != 0;
            MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
            if (bad) {
                if (rank == 0) printf("| %s | %d | %d | %d | n/a: %s |\n", pt_pp_schedule_name(kind), P, m, v, rc ? pt_errmsg() : "failed on another rank");
            } else {
                double bubble = sched > 0 ? 1.0 - busy / sched : 0, peak = (double)arena.peak, wmax = wall;
                MPI_Allreduce(MPI_IN_PLACE, &bubble, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
                MPI_Allreduce(MPI_IN_PLACE, &peak, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
                MPI_Allreduce(MPI_IN_PLACE, &wmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
                bubble /= P;
                const double f = pt_pp_bubble_formula(kind, P, m, v);
                const double tps = (double)m * micro * T * steps / wmax;
                if (base_tps == 0) base_tps = tps;
                if (rank == 0)
                    printf("| %s | %d | %d | %d | %.3f | %.3f | %.2f | %d | %.2f | %.0f | %.2f |\n", pt_pp_schedule_name(kind), P,
                           m, v, bubble, f, f > 0 ? bubble / f : 0, pc.stage.nslots, peak / (1 << 20), tps, tps / base_tps);
            }
            fflush(stdout);
            free(tok);
            pt_pipeline_free(&pipe);
            pt_train_free(&tr);
            pt_gpt_free(&model);
            pt_pctx_free(&ctx);
        }
    MPI_Finalize();
    return 0;
}
