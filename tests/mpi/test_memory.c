/* SPDX-License-Identifier: MIT */
/* Memory per rank of the layouts, from the arena's peak (parameters,
 * gradients, AdamW moments, saved activations and every layer's scratch
 * buffers over one training step).
 *
 * usage: test_memory LAYOUTS   (under mpirun -np P, P = 4 or 8)
 *   tensor layouts at P ranks (dp = 1, tp = P): 1d against 2d (P = 4) or
 *   2.5d (depth 2) and 3d (P = 8); as the Colossal-AI paper's Figure 8
 *   reports, the 2D/2.5D/3D layouts, which shard the activations between
 *   the linears as well as the weights, need less memory per rank than 1D,
 *   which replicates them.
 * usage: test_memory SP        (under mpirun -np 4)
 *   sequence parallelism: with one sequence per data-parallel group, the
 *   longest sequence length whose step fits the per-rank memory that sp=1
 *   needs at T0 grows with the sp size (sp = 1, 2, 4; dp = 4/sp).
 * usage: test_memory LINEAR [PRECISION]   (under mpirun -np 2 or 4)
 *   the step's peak at T, 2T and 4T (2 ranks: dp=2, tp=2, sp=2; 4 ranks:
 *   1d tp=2 x sp=2, ring attention on each rank's heads) in fp32 or bf16:
 *   equal to the cost model's (lib/plan/cost.c) at each, growing linearly
 *   in T (flash
 *   attention keeps no [T, T] probabilities: the second difference of the
 *   peaks is 0) and by less per local row than [N, V/tp] logits alone
 *   would take (the fused classifier keeps no [N, V] logits: the training
 *   step's holds one chunk of 256 rows').  bf16 also: the
 *   activations (the peak's growth in T) below 80% of fp32's.
 * The model is chosen so that activations, not the vocabulary, dominate
 * (small V): the regime the paper measures.
 * Output: TAP lines without numbers (the driver script numbers them).
 */
#include "core/core.h"
#include "model/gpt.h"
#include "plan/cost.h"
#include "train/train.h"
#include "parallel/context.h"

#include <mpi.h>
#include "mpi_tap.h"
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Peak arena bytes (max over ranks) of create + one forward/backward/step,
 * or 0 when the model does not build (message in pt_errmsg on rank 0). */
static size_t step_peak(const pt_gpt_config *cfg, const pt_plan *plan, int B, int T, unsigned long seed)
{
    pt_pctx ctx;
    if (pt_pctx_init(&ctx, MPI_COMM_WORLD, plan, -1)) return 0;
    const pt_backend *be = pt_backend_get("cpu");
    pt_arena a = {0};
    pt_gpt m;
    pt_train tr;
    memset(&tr, 0, sizeof tr);
    pt_adamw_cfg opt;
    pt_adamw_default(&opt);
    int rc = pt_gpt_create(&m, cfg, &ctx, be, &a, B, T, seed);
    if (!rc) rc = pt_train_create(&tr, &m, &opt, NULL);
    int all = rc;
    MPI_Allreduce(&rc, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    size_t peak = 0;
    if (all == PT_OK) {
        int32_t *tok = malloc(sizeof(int32_t) * (size_t)(B * T + 1));
        pt_rng r;
        pt_rng_seed(&r, seed, 7);
        for (int i = 0; i <= B * T; i++) tok[i] = (int32_t)(pt_rng_u64(&r) % (uint64_t)cfg->vocab);
        rc = pt_train_step(&tr, tok, tok + 1, 1e-3f, NULL, NULL);
        free(tok);
        unsigned long long p = rc ? 0 : a.peak, mx = 0;
        MPI_Allreduce(&p, &mx, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
        peak = (size_t)mx;
    }
    pt_train_free(&tr);
    pt_gpt_free(&m); /* a failed create left nothing behind; freeing it again is a no-op */
    pt_pctx_free(&ctx);
    return peak;
}

static void layouts(int P, unsigned long seed)
{
    /* activations dominate: 8 sequences of 64, C = 128, small vocabulary */
    pt_gpt_config cfg = {.n_layer = 2, .n_head = 8, .n_embd = 128, .seq_len = 64, .vocab = 512, .family = PT_FAMILY_GPT2};
    const int B = 8, T = 64;
    typedef struct { const char *name; pt_mode mode; int depth; } lay;
    static const lay four[] = {{"1d", PT_MODE_1D, 1}, {"2d", PT_MODE_2D, 1}},
                     eight[] = {{"1d", PT_MODE_1D, 1}, {"2.5d", PT_MODE_2P5D, 2}, {"3d", PT_MODE_3D, 1}};
    const lay *L = P == 4 ? four : eight;
    const int n = P == 4 ? 2 : 3;
    size_t peak[3];
    for (int i = 0; i < n; i++) {
        pt_plan p;
        pt_plan_default(&p);
        p.mode = L[i].mode;
        p.tp = P;
        p.tp_depth = L[i].depth;
        peak[i] = step_peak(&cfg, &p, B, T, seed);
        if (tap_rank0) printf("# %-5s tp=%d: peak %.2f MiB per rank%s%s\n", L[i].name, P, peak[i] / 1048576.0,
                          peak[i] ? "" : " (did not build: ", peak[i] ? "" : pt_errmsg());
    }
    report(peak[0] > 0, "1d at %d ranks builds and steps (L2 H8 C128 T64 V512, B=8): %.2f MiB/rank", P, peak[0] / 1048576.0);
    for (int i = 1; i < n; i++)
        report(peak[i] > 0 && peak[i] < peak[0], "%s at %d ranks needs less memory per rank than 1d: %.2f < %.2f MiB (%.0f%%)",
               L[i].name, P, peak[i] / 1048576.0, peak[0] / 1048576.0, 100.0 * (double)peak[i] / (double)peak[0]);
}

static void sequence(int P, unsigned long seed)
{
    pt_gpt_config cfg = {.n_layer = 2, .n_head = 4, .n_embd = 64, .seq_len = 512, .vocab = 256, .family = PT_FAMILY_GPT2};
    const int T0 = 64;
    int longest[3] = {0, 0, 0}, sps[3] = {1, 2, 4};
    size_t budget = 0;
    for (int k = 0; k < 3; k++) {
        int sp = sps[k];
        if (P % sp) continue;
        pt_plan p;
        pt_plan_default(&p);
        p.sp = sp;
        p.dp = P / sp;
        if (k == 0) {
            budget = step_peak(&cfg, &p, 1, T0, seed);
            longest[0] = T0;
            continue;
        }
        /* the longest T (multiple of 16) whose step peak fits the budget */
        for (int T = T0; T <= cfg.seq_len; T += 16) {
            size_t pk = step_peak(&cfg, &p, 1, T, seed);
            if (pk == 0 || pk > budget) break;
            longest[k] = T;
        }
        if (tap_rank0) printf("# sp=%d: longest T within %.2f MiB/rank: %d\n", sp, budget / 1048576.0, longest[k]);
    }
    report(budget > 0, "sp=1 budget: one step at T=%d needs %.2f MiB/rank", T0, budget / 1048576.0);
    report(longest[1] > longest[0], "sp=2 fits a longer sequence than sp=1 in that memory: T=%d > %d", longest[1], longest[0]);
    report(longest[2] > longest[1], "sp=4 fits a longer sequence than sp=2: T=%d > %d", longest[2], longest[1]);
}

/* Peaks at T0, 2 T0, 4 T0 for three plans at P = 2 ranks.  The model's
 * seq_len is T itself (the position embedding grows linearly with it too). */
static void linear(int P, unsigned long seed, int precision)
{
    /* B = 8: a rank's rows (256 at T0 under sp = 2) fill the training step's
     * classifier chunk (pt_classifier_chunk_rows: 256 rows of logits), so
     * from T0 on the head's scratch is constant and the peak's growth is the
     * activations' */
    const int T0 = 64, B = 8;
    pt_gpt_config cfg = {.n_layer = 2, .n_head = 4, .n_embd = 32, .seq_len = T0, .vocab = 8192, .family = PT_FAMILY_GPT2};
    typedef struct { const char *name; int dp, tp, sp; } lay;
    static const lay plans[] = {{"dp=2", 2, 1, 1}, {"tp=2", 1, 2, 1}, {"sp=2", 1, 1, 2}, {"tp=2 sp=2", 1, 2, 2}};
    for (size_t k = 0; k < sizeof plans / sizeof plans[0]; k++) {
        const lay *l = &plans[k];
        if (l->dp * l->tp * l->sp != P) continue;
        pt_plan p;
        pt_plan_default(&p);
        p.dp = l->dp, p.tp = l->tp, p.sp = l->sp;
        if (l->tp > 1) p.mode = PT_MODE_1D;
        p.precision = precision;
        const double ea = precision == PT_PREC_BF16 ? 2 : 4;
        size_t peak[3], peak32[3] = {0, 0, 0};
        double pred[3], worst = 0;
        for (int i = 0; i < 3; i++) {
            cfg.seq_len = T0 << i;
            peak[i] = step_peak(&cfg, &p, B, cfg.seq_len, seed);
            if (precision != PT_PREC_FP32) {
                pt_plan p32 = p;
                p32.precision = PT_PREC_FP32;
                peak32[i] = step_peak(&cfg, &p32, B, cfg.seq_len, seed);
            }
            const pt_model_shape ms = {cfg.n_layer, cfg.n_head, cfg.n_embd, cfg.seq_len, cfg.vocab, .family = PT_FAMILY_GPT2};
            pt_cost c;
            /* pt_train_step runs without the pipeline executor's two boundary
             * buffers [B*T/sp, C] that ptrain-run's step holds and the cost
             * model counts */
            pred[i] = pt_cost_eval(&ms, B * l->dp, &p, NULL, NULL, &c) == 0
                          ? c.mem_peak - 2.0 * ea * B * (cfg.seq_len / l->sp) * cfg.n_embd
                          : 0;
            worst = fmax(worst, fabs((double)peak[i] / pred[i] - 1));
            if (tap_rank0)
                printf("# %s %s T=%d: peak %zu B, cost model %.0f B\n", l->name, pt_precision_name(precision),
                       cfg.seq_len, peak[i], pred[i]);
            if (tap_rank0 && precision) printf("#   fp32 peak %zu B\n", peak32[i]);
        }
        report(peak[0] && peak[1] && peak[2] && worst <= 0.005,
               "%s %s: the step's peak at T=%d, %d, %d equals the cost model's within %.2f%% (bound 0.5%%)", l->name,
               pt_precision_name(precision), T0, 2 * T0, 4 * T0, 100 * worst);
        if (precision != PT_PREC_FP32) {
            /* the peak's growth in T is the activations' (the bf16 run adds
             * a 2-byte work copy per parameter, so at short T it may be above) */
            const double g16 = (double)peak[2] - (double)peak[0], g32 = (double)peak32[2] - (double)peak32[0];
            report(g16 < 0.8 * g32, "%s bf16: the activations (the peak's growth from T=%d to %d) take %.0f B, %.1f%% of "
                   "fp32's %.0f B (bound 80%%)", l->name, T0, 4 * T0, g16, 100 * g16 / g32, g32);
        }
        /* linear: the peak's second difference over T, 2T, 4T is 0 (a [T, T]
         * term would make it 2 T^2 per sequence, head and layer) */
        const double d1 = (double)peak[1] - (double)peak[0], d2 = (double)peak[2] - (double)peak[1];
        report(d1 > 0 && fabs(d2 - 2 * d1) <= 0.005 * d2,
               "%s: the peak grows linearly in T: +%.0f B from T to 2T, +%.0f B from 2T to 4T (2x within 0.5%%)",
               l->name, d1, d2);
        /* the head: per local row (B T / sp rows) less than [V/tp] logits' bytes */
        const double rows = (double)B * T0 / l->sp, per_row = d1 / rows, logits = ea * cfg.vocab / l->tp;
        report(per_row > 0 && per_row < logits, "%s: %.0f B per local row of T, less than the %.0f B of one row of [N, V/tp] logits "
               "(no [N, V] logits are kept)", l->name, per_row, logits);
    }
}

/* Arena memory carries its device: an arena on an allocator that claims
 * CUDA memory is refused by the CPU backend's model with one line naming
 * both devices; an arena on a (counting) CPU allocator gets every model,
 * registry and scratch block from it and gives them all back. */
static size_t n_alloc, n_free;
static void *count_alloc(size_t bytes)
{
    n_alloc++;
    return pt_arena_mem_host.alloc(bytes);
}
static size_t count_free(void *p)
{
    n_free++;
    return pt_arena_mem_host.free(p);
}

static void device(unsigned long seed)
{
    pt_gpt_config cfg = {.n_layer = 1, .n_head = 2, .n_embd = 16, .seq_len = 8, .vocab = 64, .family = PT_FAMILY_GPT2};
    pt_plan p;
    pt_plan_default(&p);
    p.dp = 1;
    pt_pctx ctx;
    if (pt_pctx_init(&ctx, MPI_COMM_SELF, &p, -1)) {
        report(0, "device: context: %s", pt_errmsg());
        return;
    }
    const pt_backend *be = pt_backend_get("cpu");
    const pt_arena_mem cuda_claim = {PT_DEV_CUDA, count_alloc, count_free};
    pt_arena a;
    pt_arena_init(&a, &cuda_claim, 0);
    pt_gpt m;
    int rc = pt_gpt_create(&m, &cfg, &ctx, be, &a, 2, 8, seed);
    report(rc == PT_EINVAL && strstr(pt_errmsg(), "cuda") && strstr(pt_errmsg(), "cpu") && a.cur == 0,
           "a model on the cpu backend refuses an arena of cuda memory: \"%s\"", pt_errmsg());
    if (rc == PT_OK) pt_gpt_free(&m);

    const pt_arena_mem counting = {PT_DEV_CPU, count_alloc, count_free};
    pt_arena_init(&a, &counting, 0);
    n_alloc = n_free = 0;
    pt_train tr;
    memset(&tr, 0, sizeof tr);
    pt_adamw_cfg opt;
    pt_adamw_default(&opt);
    int32_t tok[2 * 8 + 1];
    pt_rng r;
    pt_rng_seed(&r, seed, 3);
    for (int i = 0; i <= 16; i++) tok[i] = (int32_t)(pt_rng_u64(&r) % 64);
    float loss = 0;
    rc = pt_gpt_create(&m, &cfg, &ctx, be, &a, 2, 8, seed);
    if (!rc) rc = pt_train_create(&tr, &m, &opt, NULL);
    if (!rc) rc = pt_train_step(&tr, tok, tok + 1, 1e-3f, &loss, NULL);
    size_t allocs = n_alloc, peak = a.peak;
    pt_train_free(&tr);
    pt_gpt_free(&m);
    report(rc == PT_OK && allocs > 0 && allocs == n_free && a.nallocs == 0 && a.cur == 0 &&
               pt_arena_device(&a) == PT_DEV_CPU,
           "every block of a step (%zu allocations, peak %zu B) comes from the arena's allocator and goes back to it "
           "(%zu frees, %zu B left)%s%s", allocs, peak, n_free, a.cur, rc ? ": " : "", rc ? pt_errmsg() : "");
    pt_pctx_free(&ctx);
}

int main(int argc, char **argv)
{
    tap_init(&argc, &argv);
    int P;
    MPI_Comm_size(MPI_COMM_WORLD, &P);
    pt_backend_get("cpu")->set_threads(1);
    const unsigned long seed = tap_seed();
    if (argc > 1 && strcmp(argv[1], "SP") == 0) sequence(P, seed);
    else if (argc > 1 && strcmp(argv[1], "LINEAR") == 0)
        linear(P, seed, argc > 2 && strcmp(argv[2], "bf16") == 0 ? PT_PREC_BF16 : PT_PREC_FP32);
    else layouts(P, seed);
    if (P == 1 || (argc > 1 && strcmp(argv[1], "SP") == 0)) device(seed);
    MPI_Finalize();
    return tap_failures ? 1 : 0;
}
