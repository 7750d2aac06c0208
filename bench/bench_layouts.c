/* bench-layouts: the tensor-parallel layouts side by side at one world size.
 *
 *   usage: mpirun -np P bench/bench-layouts [--models tiny,wide] [--batch 8]
 *                      [--steps 3] [--warmup 1] [--threads 1] [--help]
 *
 * For every model and every layout whose tp grid fits the P ranks
 *   P = 4:  1d tp=4, 2d tp=4 (q=2)
 *   P = 8:  1d tp=8, 1d tp=4 x dp=2, 2.5d tp=8 (d=2, q=2), 3d tp=8 (l=2)
 *   other:  1d tp=P
 * it builds the GPT (lib/model/gpt.h) and its training step (lib/train)
 * on a fresh arena, runs --warmup untimed then --steps timed
 * pt_train_step calls (zero_grad, forward, backward, gradient sync, norm,
 * clip, AdamW) on the same global batch of random tokens, and prints one
 * markdown table per model:
 *   ms/step      median over the timed steps of the slowest rank's step
 *                time (each step starts after a barrier);
 *   tokens/s     global batch * T / (ms/step);
 *   sent MiB     modelled bytes this rank sent per step over every group of
 *                its context (pt_pctx_sent_total, lib/parallel/context.h),
 *                max and mean over ranks;
 *   peak MiB     the rank's arena high-water mark over creation and training
 *                (parameters + gradients + AdamW moments + activations +
 *                layer scratch), max over ranks; "state" is the parameter,
 *                gradient and moment part alone (16 bytes per local float);
 *   loss         the first step's loss: the same within rounding for every
 *                layout (same initial weights and tokens), a sanity check;
 *   speed, mem   ms/step of the 1D baseline / ms/step of the row, and peak
 *                of the row / peak of the baseline (the 1d tp=P row, or the
 *                first 1d row that ran when tp=P does not fit the model).
 * A layout the model or build cannot run prints "n/a: <reason>" and the
 * run goes on.  Models: a preset name (pt_gpt_preset) or "wide" (L2 H8
 * C512 T64, V50257: H8 so that 1d runs at tp=8).  dp = 1 except in the
 * 1d tp=4 x dp=2 row; --batch is the global batch (sequences) and must be
 * divisible by every layout's batch split (4 for the 8-rank grids).
 */
#define _POSIX_C_SOURCE 200809L /* strtok_r, gethostname */
#include "core/core.h"
#include "model/gpt.h"
#include "train/train.h"
#include "parallel/context.h"
#include "bench_opts.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct layout_spec {
    pt_mode mode;
    int tp, depth, dp;
} layout_spec;

typedef struct row {
    int ran;
    char label[48], grid[48];
    char why[256];          /* n/a reason */
    double ms, tps, sent_max, sent_mean, peak, state, loss;
} row;

static int model_config(const char *name, pt_gpt_config *cfg)
{
    if (!strcmp(name, "wide")) {
        *cfg = (pt_gpt_config){.n_layer = 2, .n_head = 8, .n_embd = 512, .seq_len = 64, .vocab = 50257};
        return PT_OK;
    }
    if (pt_gpt_preset(name, cfg)) return pt_fail(PT_EINVAL, "unknown model '%s'; valid: wide, %s", name, pt_gpt_preset_names());
    return PT_OK;
}

static int layouts_for(int P, layout_spec *out)
{
    int n = 0;
    out[n++] = (layout_spec){PT_MODE_1D, P, 1, 1};
    if (P == 4) out[n++] = (layout_spec){PT_MODE_2D, 4, 1, 1};
    if (P == 8) {
        out[n++] = (layout_spec){PT_MODE_1D, 4, 1, 2};
        out[n++] = (layout_spec){PT_MODE_2P5D, 8, 2, 1};
        out[n++] = (layout_spec){PT_MODE_3D, 8, 1, 1};
    }
    return n;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Same status on every rank: the worst (most negative) one.  The message
 * of a failing rank is kept on that rank; rank 0 prints its own or, if it
 * succeeded, a generic line naming the failing code. */
static int agree(int rc)
{
    int worst;
    MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    return worst;
}

static void set_why(row *r, int rc)
{
    if (rc == PT_OK) return;
    const char *msg = pt_errmsg();
    snprintf(r->why, sizeof r->why, "%s", msg && *msg ? msg : pt_strerror(rc));
}

/* Run one layout of one model; fills *r on rank 0 (and every rank). */
static void run_layout(const pt_gpt_config *cfg, const layout_spec *ls, const pt_backend *be, int Bglob,
                       int warmup, int steps, const int32_t *tok, row *r)
{
    memset(r, 0, sizeof *r);
    snprintf(r->label, sizeof r->label, "%s", pt_mode_name(ls->mode));
    const char *shape = ls->mode == PT_MODE_2D ? " (q=2)" : ls->mode == PT_MODE_3D ? " (l=2)" : "";
    if (ls->mode == PT_MODE_2P5D)
        snprintf(r->grid, sizeof r->grid, "tp=%d (d=%d, q=2) dp=%d", ls->tp, ls->depth, ls->dp);
    else
        snprintf(r->grid, sizeof r->grid, "tp=%d%s dp=%d", ls->tp, shape, ls->dp);

    pt_plan plan;
    pt_plan_default(&plan);
    plan.mode = ls->mode;
    plan.tp = ls->tp;
    plan.tp_depth = ls->depth;
    plan.dp = ls->dp;
    if (Bglob % ls->dp) {
        snprintf(r->why, sizeof r->why, "global batch %d is not a multiple of dp=%d", Bglob, ls->dp);
        return;
    }
    const int B = Bglob / ls->dp, T = cfg->seq_len;
    /* geometry first: same answer on every rank, nothing built */
    int rc = pt_gpt_check_plan(cfg, &plan, B, T);
    if (rc) { set_why(r, rc); return; }

    pt_pctx ctx;
    rc = agree(pt_pctx_init(&ctx, MPI_COMM_WORLD, &plan, -1));
    if (rc) { set_why(r, rc); return; }
    pt_arena arena = {0};
    pt_gpt m;
    pt_train tr;
    memset(&m, 0, sizeof m);
    memset(&tr, 0, sizeof tr);
    pt_adamw_cfg opt;
    pt_adamw_default(&opt);
    int crc = pt_gpt_create(&m, cfg, &ctx, be, &arena, B, T, 1);
    if (crc == PT_OK) crc = pt_train_create(&tr, &m, &opt, NULL);
    rc = agree(crc);
    if (rc) {
        set_why(r, rc);
        pt_train_free(&tr);
        pt_gpt_free(&m);
        pt_pctx_free(&ctx);
        return;
    }
    /* every rank passes its dp group's B sequences: group dp_rank's rows */
    const int32_t *in = tok + (size_t)ctx.dp_rank * B * T;

    double *dt = calloc((size_t)steps, sizeof *dt);
    float loss = 0;
    for (int s = 0; s < warmup + steps && rc == PT_OK; s++) {
        if (s == warmup) pt_pctx_reset_stats(&ctx);
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = pt_now();
        int src = pt_train_step(&tr, in, in + 1, 1e-4f, &loss, NULL);
        double t = pt_now() - t0;
        rc = agree(src);
        if (rc) { set_why(r, rc); break; }
        if (s == 0) r->loss = loss;
        if (s >= warmup) MPI_Allreduce(&t, &dt[s - warmup], 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    }
    if (rc == PT_OK) {
        int P;
        MPI_Comm_size(MPI_COMM_WORLD, &P);
        qsort(dt, (size_t)steps, sizeof *dt, cmp_double);
        double med = steps % 2 ? dt[steps / 2] : 0.5 * (dt[steps / 2 - 1] + dt[steps / 2]);
        double sent = (double)pt_pctx_sent_total(&ctx) / steps, peak = (double)arena.peak,
               state = 16.0 * (double)m.nfloats;
        MPI_Allreduce(&sent, &r->sent_max, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        MPI_Allreduce(&sent, &r->sent_mean, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        r->sent_mean /= P;
        MPI_Allreduce(&peak, &r->peak, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        MPI_Allreduce(&state, &r->state, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        r->ms = 1e3 * med;
        r->tps = (double)Bglob * T / med;
        r->ran = 1;
    }
    free(dt);
    pt_train_free(&tr);
    pt_gpt_free(&m);
    pt_pctx_free(&ctx);
}

static void print_table(const char *name, const pt_gpt_config *cfg, int Bglob, const row *rows, int n)
{
    int base = -1;
    for (int i = 0; i < n && base < 0; i++)
        if (rows[i].ran && !strcmp(rows[i].label, "1d")) base = i;
    printf("\n## %s: L=%d H=%d C=%d T=%d V=%d, %.1fM params, global batch %d x %d tokens; baseline: %s\n", name,
           cfg->n_layer, cfg->n_head, cfg->n_embd, cfg->seq_len, cfg->vocab, pt_gpt_num_params(cfg) / 1e6, Bglob,
           cfg->seq_len, base >= 0 ? rows[base].grid : "none (no 1d row ran)");
    printf("| %-5s | %-22s | %9s | %9s | %13s | %14s | %13s | %10s | %7s | %11s | %9s |\n", "mode", "grid", "ms/step",
           "tokens/s", "sent MiB max", "sent MiB mean", "peak MiB/rank", "state MiB", "loss", "speed vs 1d",
           "mem vs 1d");
    printf("|-------|------------------------|----------:|----------:|--------------:|---------------:|--------------:|"
           "-----------:|--------:|------------:|----------:|\n");
    const double MiB = 1048576.0;
    for (int i = 0; i < n; i++) {
        const row *r = &rows[i];
        if (!r->ran) {
            printf("| %-5s | %-22s | n/a: %s |\n", r->label, r->grid, r->why);
            continue;
        }
        char sp[16] = "-", mm[16] = "-";
        if (base >= 0) {
            snprintf(sp, sizeof sp, "%.2fx", rows[base].ms / r->ms);
            snprintf(mm, sizeof mm, "%.2fx", r->peak / rows[base].peak);
        }
        printf("| %-5s | %-22s | %9.1f | %9.0f | %13.2f | %14.2f | %13.1f | %10.1f | %7.4f | %11s | %9s |\n", r->label,
               r->grid, r->ms, r->tps, r->sent_max / MiB, r->sent_mean / MiB, r->peak / MiB, r->state / MiB, r->loss,
               sp, mm);
    }
    fflush(stdout);
}

int main(int argc, char **argv)
{
    pt_host_memory_keep(); /* as ptrain-run: freed blocks stay for the next step */
    const char *models_arg = "tiny,wide";
    int Bglob = 8, steps = 3, warmup = 1, threads = 1;
    char models_help[256];
    snprintf(models_help, sizeof models_help, "comma-separated models: wide, %s", pt_gpt_preset_names());
    const bench_opt opts[] = {
        {"models", BENCH_STR, 0, 0, &models_arg, "LIST", models_help, NULL},
        {"batch", BENCH_INT, 1, 1000000, &Bglob, "N", "global batch in sequences, divisible by each layout's split", NULL},
        {"steps", BENCH_INT, 1, 1000000, &steps, "N", "timed steps per layout", NULL},
        {"warmup", BENCH_INT, 0, 1000000, &warmup, "N", "untimed steps before them", NULL},
        {"threads", BENCH_INT, 1, 1000000, &threads, "N", "threads per rank", NULL},
        {0}};
    bench_opts_parse(argc, argv, "bench-layouts", "mpirun -np P bench-layouts [options]",
                     "The tensor-parallel layouts that fit P ranks side by side: ms/step, tokens/s, bytes sent and "
                     "peak memory per rank.",
                     opts);
    MPI_Init(&argc, &argv);
    int P, me;
    MPI_Comm_size(MPI_COMM_WORLD, &P);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    /* check every model name before running anything */
    char *names[16];
    int nmodels = 0;
    pt_gpt_config cfgs[16];
    char buf[256];
    if (strlen(models_arg) >= sizeof buf) {
        if (me == 0) fprintf(stderr, "bench-layouts: --models '%s': longer than %zu bytes\n", models_arg, sizeof buf - 1);
        MPI_Finalize();
        return 2;
    }
    snprintf(buf, sizeof buf, "%s", models_arg);
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (nmodels == 16 || model_config(t, &cfgs[nmodels])) {
            if (me == 0)
                fprintf(stderr, "bench-layouts: %s\n", nmodels == 16 ? "--models: at most 16 models" : pt_errmsg());
            MPI_Finalize();
            return 2;
        }
        names[nmodels++] = t;
    }
    if (!nmodels) {
        if (me == 0) fprintf(stderr, "bench-layouts: --models '%s': no model named; valid: a comma-separated list, e.g. tiny,wide\n", models_arg);
        MPI_Finalize();
        return 2;
    }
    const pt_backend *be = pt_backend_get("cpu");
    if (!be) {
        if (me == 0) fprintf(stderr, "bench-layouts: %s\n", pt_errmsg());
        MPI_Finalize();
        return 1;
    }
    be->set_threads(threads);

    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (me == 0) {
        char host[256] = "?", lib[MPI_MAX_LIBRARY_VERSION_STRING] = "";
        int len;
        gethostname(host, sizeof host - 1);
        MPI_Get_library_version(lib, &len);
        lib[strcspn(lib, "\n,")] = 0;
        /* the program as the user ran it, not libtool's .libs/lt- copy */
        const char *prog = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
        if (!strncmp(prog, "lt-", 3)) prog += 3;
        printf("# command: mpirun -np %d %s", P, prog);
        for (int i = 1; i < argc; i++) printf(" %s", argv[i]);
        printf("\n# machine: %s, %ld cores online, %s; %d ranks x %d thread%s; %d warm-up + %d timed steps\n", host,
               cores, lib, P, threads, threads > 1 ? "s" : "", warmup, steps);
        if (cores > 0 && (long)P * threads > cores)
            printf("# timings are OVERSUBSCRIBED: %d ranks x %d thread%s on %ld cores; compare rows with each other, "
                   "not with a dedicated machine\n", P, threads, threads > 1 ? "s" : "", cores);
        printf("# ms/step: median over steps of the slowest rank; sent: modelled bytes per rank per step; "
               "peak: arena high-water mark per rank (params+grads+AdamW+activations+scratch)\n");
        fflush(stdout);
    }

    layout_spec ls[8];
    int nl = layouts_for(P, ls);
    for (int mi = 0; mi < nmodels; mi++) {
        const pt_gpt_config *cfg = &cfgs[mi];
        const int T = cfg->seq_len;
        /* the global batch of random tokens (+1 for the shifted targets) */
        int32_t *tok = malloc(sizeof(int32_t) * ((size_t)Bglob * T + 1));
        if (!tok) {
            fprintf(stderr, "bench-layouts: out of memory for %d x %d tokens\n", Bglob, T);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        pt_rng rng;
        pt_rng_seed(&rng, 5, 5);
        for (size_t i = 0; i <= (size_t)Bglob * T; i++) tok[i] = (int32_t)(pt_rng_u64(&rng) % (uint64_t)cfg->vocab);
        row rows[8];
        for (int li = 0; li < nl; li++) {
            run_layout(cfg, &ls[li], be, Bglob, warmup, steps, tok, &rows[li]);
            if (me == 0 && !rows[li].ran)
                fprintf(stderr, "bench-layouts: %s %s %s: %s\n", names[mi], rows[li].label, rows[li].grid,
                        rows[li].why);
        }
        if (me == 0) print_table(names[mi], cfg, Bglob, rows, nl);
        free(tok);
    }
    MPI_Finalize();
    return 0;
}
