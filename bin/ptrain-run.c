/* ptrain-run: the training job.
 *
 * One process per rank (srun, sbatch, or mpirun).  The plan comes from the
 * PTRAIN_* variables the SPANK plugin injects, overridden by flags of the
 * same names, so the same binary runs under plain mpirun.  Rank 0 prints the
 * plan, the model size, one line per step (loss, learning rate, gradient
 * norm, ms/step, tokens/s), the validation loss every --val-every steps
 * and a final "done:" summary.
 */
#define _GNU_SOURCE
#include "comm/comm.h"
#include "core/core.h"
#include "data/shard.h"
#include "model/gpt.h"
#include "parallel/context.h"
#include "plan/plan.h"

#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <math.h>
#include <mpi.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct opts {
    const char *model, *data, *rank_order, *mode;
    int layers, heads, embd, seq_len, vocab;
    long steps, batch, warmup, val_every, val_batches, log_every, threads, seed, dp, tp, tp_depth, sp;
    float lr, min_lr, wd, clip;
    int dry_run, quiet;
} opts;

static int world_rank = 0;

static void usage(FILE *f)
{
    fprintf(f,
        "usage: ptrain-run [options]\n"
        "  --model NAME         preset: %s (default tiny)\n"
        "  --layers N --heads N --embd N --seq-len N --vocab N   override the preset\n"
        "  --data DIR|synthetic[:SEED]  DIR holds train.bin and val.bin (ptrain-data prepare)\n"
        "  --steps N            optimizer steps (default 200)\n"
        "  --batch B            global batch in sequences (default 8; multiple of dp)\n"
        "  --lr F --min-lr F --warmup N --weight-decay F --grad-clip F\n"
        "  --val-every N        validation every N steps (default 50; 0 = only at the end)\n"
        "  --val-batches N      batches per validation (default 8)\n"
        "  --log-every N        print every N steps (default 1)\n"
        "  --seed N             initialisation seed (default 1337)\n"
        "  --threads N          compute threads per rank (default: cores / ranks on the node)\n"
        "  --mode 1d|2d|2.5d|3d|off  tensor-parallel layout (off: as 1d; default PTRAIN_MODE, else 1d)\n"
        "  --dp N --tp N --tp-depth D --sp N --rank-order DPT   the plan's sizes (default from\n"
        "                       PTRAIN_* env; dp = world / (tp * sp) when not given)\n"
        "  --dry-run            print every rank's place in the grid and exit\n"
        "  --quiet              only the plan, validation and summary lines\n",
        pt_gpt_preset_names());
}

/* Print a one-line error from rank 0 and leave with status 2 on every rank
 * (argument and plan errors are detected identically on every rank). */
static int bad_input(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int bad_input(const char *fmt, ...)
{
    if (world_rank == 0) {
        va_list ap;
        va_start(ap, fmt);
        fprintf(stderr, "ptrain-run: error: ");
        vfprintf(stderr, fmt, ap);
        fprintf(stderr, "\n");
        va_end(ap);
    }
    MPI_Finalize();
    exit(2);
}

/* Errors that may happen on some ranks only (files, memory, a model that
 * does not fit the layout): every rank learns that one failed, the lowest
 * failing rank says why in one line, all exit 1. */
static void agree(int rc, const char *what)
{
    int mine = rc == PT_OK ? INT_MAX : world_rank, first = INT_MAX;
    MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (first == INT_MAX) return;
    if (world_rank == first) fprintf(stderr, "ptrain-run: error: rank %d: %s: %s\n", world_rank, what, pt_errmsg());
    MPI_Finalize();
    exit(1);
}

static float parse_float(const char *what, const char *s, float lo, float hi)
{
    char *end;
    float v = strtof(s, &end);
    if (!*s || *end || !(v >= lo && v <= hi)) bad_input("%s: '%s' is not a number in [%g, %g]", what, s, lo, hi);
    return v;
}

static long parse_long(const char *what, const char *s, long lo, long hi)
{
    long v;
    if (pt_parse_int(what, s, lo, hi, &v)) bad_input("%s", pt_errmsg());
    return v;
}

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

static void parse_args(int argc, char **argv, opts *o)
{
    enum { O_LAYERS = 256, O_HEADS, O_EMBD, O_SEQ, O_VOCAB, O_LR, O_MINLR, O_WARM, O_WD, O_CLIP,
           O_VALE, O_VALB, O_LOGE, O_SEED, O_THREADS, O_MODE, O_DP, O_TP, O_TPD, O_SP, O_ORDER, O_DRY,
           O_QUIET };
    static const struct option lo[] = {
        {"model", 1, 0, 'm'}, {"data", 1, 0, 'd'}, {"steps", 1, 0, 's'}, {"batch", 1, 0, 'b'},
        {"layers", 1, 0, O_LAYERS}, {"heads", 1, 0, O_HEADS}, {"embd", 1, 0, O_EMBD},
        {"seq-len", 1, 0, O_SEQ}, {"vocab", 1, 0, O_VOCAB}, {"lr", 1, 0, O_LR}, {"min-lr", 1, 0, O_MINLR},
        {"warmup", 1, 0, O_WARM}, {"weight-decay", 1, 0, O_WD}, {"grad-clip", 1, 0, O_CLIP},
        {"val-every", 1, 0, O_VALE}, {"val-batches", 1, 0, O_VALB}, {"log-every", 1, 0, O_LOGE},
        {"seed", 1, 0, O_SEED}, {"threads", 1, 0, O_THREADS}, {"mode", 1, 0, O_MODE}, {"dp", 1, 0, O_DP},
        {"tp", 1, 0, O_TP}, {"tp-depth", 1, 0, O_TPD}, {"sp", 1, 0, O_SP}, {"rank-order", 1, 0, O_ORDER}, {"dry-run", 0, 0, O_DRY}, {"quiet", 0, 0, O_QUIET},
        {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
    memset(o, 0, sizeof *o);
    o->model = "tiny";
    o->steps = 200;
    o->batch = 8;
    o->lr = 1e-3f;
    o->min_lr = -1;
    o->warmup = -1;
    o->wd = 0.1f;
    o->clip = 1.0f;
    o->val_every = 50;
    o->val_batches = 8;
    o->log_every = 1;
    o->seed = 1337;
    o->threads = 0;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "m:d:s:b:h", lo, NULL)) != -1) {
        switch (c) {
        case 'm': o->model = optarg; break;
        case 'd': o->data = optarg; break;
        case 's': o->steps = parse_long("--steps", optarg, 1, 100000000); break;
        case 'b': o->batch = parse_long("--batch", optarg, 1, 1 << 20); break;
        case O_LAYERS: o->layers = (int)parse_long("--layers", optarg, 1, 4096); break;
        case O_HEADS: o->heads = (int)parse_long("--heads", optarg, 1, 4096); break;
        case O_EMBD: o->embd = (int)parse_long("--embd", optarg, 1, 1 << 20); break;
        case O_SEQ: o->seq_len = (int)parse_long("--seq-len", optarg, 1, 1 << 20); break;
        case O_VOCAB: o->vocab = (int)parse_long("--vocab", optarg, 2, 65536); break;
        case O_LR: o->lr = parse_float("--lr", optarg, 0, 10); break;
        case O_MINLR: o->min_lr = parse_float("--min-lr", optarg, 0, 10); break;
        case O_WARM: o->warmup = parse_long("--warmup", optarg, 0, 100000000); break;
        case O_WD: o->wd = parse_float("--weight-decay", optarg, 0, 10); break;
        case O_CLIP: o->clip = parse_float("--grad-clip", optarg, 0, 1e6f); break;
        case O_VALE: o->val_every = parse_long("--val-every", optarg, 0, 100000000); break;
        case O_VALB: o->val_batches = parse_long("--val-batches", optarg, 1, 1000000); break;
        case O_LOGE: o->log_every = parse_long("--log-every", optarg, 1, 100000000); break;
        case O_SEED: o->seed = parse_long("--seed", optarg, 0, 0x7fffffffL); break;
        case O_THREADS: o->threads = parse_long("--threads", optarg, 1, 4096); break;
        case O_MODE: o->mode = optarg; break;
        case O_DP: o->dp = parse_long("--dp", optarg, 1, 1 << 20); break;
        case O_TP: o->tp = parse_long("--tp", optarg, 1, 1 << 20); break;
        case O_TPD: o->tp_depth = parse_long("--tp-depth", optarg, 1, 1 << 20); break;
        case O_SP: o->sp = parse_long("--sp", optarg, 1, 1 << 20); break;
        case O_ORDER: o->rank_order = optarg; break;
        case O_DRY: o->dry_run = 1; break;
        case O_QUIET: o->quiet = 1; break;
        case 'h':
            if (world_rank == 0) usage(stdout);
            MPI_Finalize();
            exit(0);
        default:
            bad_input("unknown or incomplete option '%s' (see --help)", argv[optind - 1]);
        }
    }
    if (optind < argc) bad_input("unexpected argument '%s' (see --help)", argv[optind]);
}

/* Resolve the plan: defaults < PTRAIN_* environment < flags.  When dp is
 * not given it is world / (tp * pp * sp).  A plan that does not fit the
 * world is refused listing the tp (or sp) values that would (pt_plan_list_tp,
 * pt_plan_validate). */
static void resolve_plan(const opts *o, int world, pt_plan *p, const char **source)
{
    pt_error err;
    pt_plan_default(p);
    p->dp = 0;
    int from_env = pt_plan_from_env(p, &err);
    if (from_env < 0) bad_input("%s", err.text);
    *source = from_env ? (getenv("SLURM_JOB_ID") ? "slurm" : "env") : "flags";
    if (o->mode) {
        pt_mode m;
        if (pt_mode_parse(o->mode, &m, &err)) bad_input("--mode: %s", err.text);
        p->mode = m;
    }
    if (o->tp) p->tp = (int)o->tp;
    if (o->tp_depth) p->tp_depth = (int)o->tp_depth;
    if (o->sp) p->sp = (int)o->sp;
    if (o->dp) p->dp = (int)o->dp;
    if (o->rank_order) snprintf(p->rank_order, sizeof p->rank_order, "%s", o->rank_order);
    /* off: nothing was planned, run the sizes given with 1d layers; auto
     * is the plugin's to resolve, as 1d when there is none. */
    if (p->mode == PT_MODE_OFF || p->mode == PT_MODE_AUTO) p->mode = PT_MODE_1D;
    long long inner = (long long)p->tp * p->pp * p->sp;
    if (!o->dp && (p->dp == 0 || o->tp || o->sp || o->tp_depth)) {
        if (inner < 1 || world % inner) {
            char valid[256];
            if (p->sp > 1) {
                int n = world % ((long long)p->tp * p->pp) ? world : world / (p->tp * p->pp);
                pt_plan_list_tp(PT_MODE_1D, 1, n, world, valid, sizeof valid);
                bad_input("--mode %s with %d ranks: sp=%d does not divide the world (with tp=%d, "
                          "pp=%d; valid sp here: %s)", pt_mode_name(p->mode), world, p->sp, p->tp,
                          p->pp, valid);
            }
            int n = world % p->pp ? world : world / p->pp;
            int k = pt_plan_list_tp(p->mode, p->mode == PT_MODE_2P5D ? p->tp_depth : 1, n, world,
                                    valid, sizeof valid);
            bad_input("--mode %s with %d ranks: tp=%d does not divide the world (with pp=%d, "
                      "sp=%d; valid tp%s here: %s)", pt_mode_name(p->mode), world, p->tp, p->pp,
                      p->sp, p->mode == PT_MODE_2P5D ? " for this tp_depth" : "",
                      k ? valid : "none");
        }
        p->dp = (int)(world / inner);
    }
    if (pt_plan_validate(p, world, &err)) bad_input("%s", err.text);
}

static int load_batch(const pt_shard *s, long step, const opts *o, int T, const pt_pctx *c, int32_t *in, int32_t *tg)
{
    int nseq = (int)(o->batch / c->plan.dp);
    return pt_loader_batch(s, step, (int)o->batch, T, c->dp_rank * nseq, nseq, in, tg);
}

static int evaluate(pt_gpt *m, const pt_shard *val, const opts *o, const pt_pctx *c, int32_t *in, int32_t *tg, double *out)
{
    double sum = 0;
    for (long i = 0; i < o->val_batches; i++) {
        int rc = load_batch(val, i, o, m->T, c, in, tg);
        if (rc) return rc;
        float l;
        rc = pt_gpt_forward(m, in, tg, &l);
        if (rc) return rc;
        sum += l;
    }
    *out = sum / (double)o->val_batches;
    return PT_OK;
}

/* In-memory random shard for tests and benchmarks (--data synthetic[:SEED]). */
static uint16_t *synthetic_shard(pt_shard *s, const char *spec, int vocab, long ntok)
{
    long seed = 1;
    const char *colon = strchr(spec, ':');
    if (colon && pt_parse_int("--data synthetic:SEED", colon + 1, 0, 0x7fffffffL, &seed)) bad_input("%s", pt_errmsg());
    uint16_t *t = malloc(sizeof(uint16_t) * (size_t)ntok);
    if (!t) return NULL;
    pt_rng r;
    pt_rng_seed(&r, (uint64_t)seed, 7);
    for (long i = 0; i < ntok; i++) t[i] = (uint16_t)(pt_rng_u64(&r) % (uint64_t)vocab);
    memset(s, 0, sizeof *s);
    s->tokens = t;
    s->ntokens = (uint64_t)ntok;
    s->vocab_size = (uint32_t)vocab;
    s->eot_id = (uint32_t)(vocab - 1);
    return t;
}

static double mb(size_t bytes) { return (double)bytes / (1024.0 * 1024.0); }

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int world;
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    opts o;
    parse_args(argc, argv, &o);

    pt_gpt_config cfg;
    if (pt_gpt_preset(o.model, &cfg)) bad_input("--model: %s", pt_errmsg());
    if (o.layers) cfg.n_layer = o.layers;
    if (o.heads) cfg.n_head = o.heads;
    if (o.embd) cfg.n_embd = o.embd;
    if (o.seq_len) cfg.seq_len = o.seq_len;
    if (o.vocab) cfg.vocab = o.vocab;

    pt_plan plan;
    const char *source;
    resolve_plan(&o, world, &plan, &source);
    if (plan.mode == PT_MODE_1D && pt_gpt_check_tp(&cfg, plan.tp)) {
        char valid[256] = "";
        size_t off = 0;
        for (int t = 1; t <= world; t++)
            if (world % t == 0 && cfg.n_head % t == 0 && cfg.n_embd % cfg.n_head == 0)
                off += (size_t)snprintf(valid + off, sizeof valid - off, "%s%d", off ? " " : "", t);
        bad_input("%s; with %d ranks use --tp one of: %s", pt_errmsg(), world, valid);
    }
    if (o.batch % plan.dp)
        bad_input("--batch %ld is not a multiple of dp=%d (each data-parallel rank takes batch/dp sequences); try --batch %ld",
                  o.batch, plan.dp, (o.batch / plan.dp + 1) * plan.dp);
    if (o.warmup < 0) o.warmup = o.steps / 10 < 100 ? o.steps / 10 : 100;
    if (o.min_lr < 0) o.min_lr = o.lr / 10;

    int grid_rank = pt_launcher_rank(MPI_COMM_WORLD);
    pt_pctx ctx;
    int rc = pt_pctx_init(&ctx, MPI_COMM_WORLD, &plan, grid_rank);
    if (rc) bad_input("%s", pt_errmsg());
    pt_log_set_rank(ctx.rank);
    char summary[256];
    pt_plan_summary(&plan, summary, sizeof summary);

    if (o.dry_run) {
        char line[512];
        snprintf(line, sizeof line,
                 "rank %d/%d dp=%d tp=%d sp=%d dp_rank=%d tp_rank=%d sp_rank=%d mpi_rank=%d plan=%s",
                 ctx.rank, world, plan.dp, plan.tp, plan.sp, ctx.dp_rank, ctx.tp_rank, ctx.sp_rank,
                 world_rank, summary);
        char *all = world_rank == 0 ? malloc(sizeof line * (size_t)world) : NULL;
        int *ranks = world_rank == 0 ? malloc(sizeof(int) * (size_t)world) : NULL;
        MPI_Gather(line, sizeof line, MPI_CHAR, all, sizeof line, MPI_CHAR, 0, MPI_COMM_WORLD);
        MPI_Gather(&ctx.rank, 1, MPI_INT, ranks, 1, MPI_INT, 0, MPI_COMM_WORLD);
        if (world_rank == 0) {
            for (int g = 0; g < world; g++)
                for (int i = 0; i < world; i++)
                    if (ranks[i] == g) printf("%s\n", all + (size_t)i * sizeof line);
            fflush(stdout);
        }
        free(all);
        free(ranks);
        pt_pctx_free(&ctx);
        MPI_Finalize();
        return 0;
    }

    const pt_backend *be = pt_backend_get("cpu");
    int threads = o.threads ? (int)o.threads : default_threads();
    be->set_threads(threads);

    /* data */
    pt_shard train = {0}, val = {0};
    uint16_t *synth_train = NULL, *synth_val = NULL;
    const int T = cfg.seq_len;
    if (!o.data) bad_input("--data is required: a directory made by 'ptrain-data prepare' (train.bin, val.bin) or 'synthetic'");
    if (strncmp(o.data, "synthetic", 9) == 0 && (o.data[9] == 0 || o.data[9] == ':')) {
        synth_train = synthetic_shard(&train, o.data, cfg.vocab, 1 << 20);
        synth_val = synthetic_shard(&val, o.data, cfg.vocab, 1 << 16);
        if (!synth_train || !synth_val) agree(pt_fail(PT_ENOMEM, "out of memory"), "synthetic data");
    } else {
        char path[4096];
        snprintf(path, sizeof path, "%s/train.bin", o.data);
        rc = pt_shard_open(&train, path);
        if (rc == PT_OK) {
            snprintf(path, sizeof path, "%s/val.bin", o.data);
            rc = pt_shard_open(&val, path);
        }
        agree(rc, "data");
        if (train.vocab_size > (uint32_t)cfg.vocab)
            bad_input("data vocabulary %u is larger than the model's %d (--vocab)", train.vocab_size, cfg.vocab);
        if (train.ntokens < (uint64_t)T + 2 || val.ntokens < (uint64_t)T + 2)
            bad_input("data in %s is too short for seq_len %d (train %llu, val %llu tokens)", o.data, T,
                      (unsigned long long)train.ntokens, (unsigned long long)val.ntokens);
    }

    pt_arena arena = {0};
    pt_gpt model;
    int Bl = (int)(o.batch / plan.dp);
    rc = pt_gpt_create(&model, &cfg, &ctx, be, &arena, Bl, T, (uint64_t)o.seed);
    agree(rc, "model");
    int32_t *in = malloc(sizeof(int32_t) * (size_t)Bl * T), *tg = malloc(sizeof(int32_t) * (size_t)Bl * T);
    if (!in || !tg) agree(pt_fail(PT_ENOMEM, "out of memory"), "batch");

    const double tok_per_step = (double)o.batch * T;
    const double flops_tok = pt_gpt_flops_per_token(&cfg, T);
    if (world_rank == 0) {
        printf("plan: %s (source: %s, world %d, grid rank from %s)\n", summary, source, world,
               grid_rank >= 0 ? "launcher RANK" : "MPI");
        printf("model: %s L=%d H=%d C=%d T=%d V=%d (padded %d), %.2fM parameters, %.2fM per rank\n",
               o.model, cfg.n_layer, cfg.n_head, cfg.n_embd, cfg.seq_len, cfg.vocab, model.g.Vp,
               (double)pt_gpt_num_params(&cfg) / 1e6, (double)model.nfloats / 1e6);
        printf("train: %s, %llu train / %llu val tokens; batch %ld x %d = %.0f tokens/step; %ld steps, lr %.2e -> %.2e, warmup %ld; %d threads/rank\n",
               o.data, (unsigned long long)train.ntokens, (unsigned long long)val.ntokens, o.batch, T, tok_per_step,
               o.steps, o.lr, o.min_lr, o.warmup, threads);
        fflush(stdout);
    }

    pt_adamw_cfg opt;
    pt_adamw_default(&opt);
    opt.weight_decay = o.wd;
    opt.grad_clip = o.clip;
    double val0 = NAN, vloss = NAN, t_total = 0, first_loss = NAN, train_comm = 0;
    float loss = NAN;
    rc = evaluate(&model, &val, &o, &ctx, in, tg, &val0);
    agree(rc, "validation");
    if (world_rank == 0) { printf("val: step 0 | val_loss %.4f\n", val0); fflush(stdout); }
    for (long step = 0; step < o.steps; step++) {
        double t0 = pt_now();
        uint64_t c0 = pt_pctx_sent_total(&ctx);
        rc = load_batch(&train, step, &o, T, &ctx, in, tg);
        if (!rc) { pt_gpt_zero_grad(&model); rc = pt_gpt_forward(&model, in, tg, &loss); }
        if (!rc) rc = pt_gpt_backward(&model);
        float lr = pt_lr_schedule((int)step, (int)o.warmup, (int)o.steps, o.lr, o.min_lr);
        double norm = 0;
        if (!rc) rc = pt_gpt_step(&model, &opt, lr, &norm);
        agree(rc, "training step");
        double dt = pt_now() - t0;
        train_comm += (double)(pt_pctx_sent_total(&ctx) - c0);
        if (step > 0 || o.steps == 1) t_total += dt; /* the first step warms caches */
        if (step == 0) first_loss = loss;
        if (world_rank == 0 && !o.quiet && (step % o.log_every == 0 || step == o.steps - 1)) {
            printf("step %5ld/%ld | loss %.4f | lr %.2e | norm %.3f | %.1f ms | %.0f tok/s\n", step + 1, o.steps,
                   loss, lr, norm, dt * 1e3, tok_per_step / dt);
            fflush(stdout);
        }
        if ((o.val_every > 0 && (step + 1) % o.val_every == 0) || step == o.steps - 1) {
            rc = evaluate(&model, &val, &o, &ctx, in, tg, &vloss);
            agree(rc, "validation");
            if (world_rank == 0) { printf("val: step %ld | val_loss %.4f\n", step + 1, vloss); fflush(stdout); }
        }
    }
    long timed = o.steps > 1 ? o.steps - 1 : 1;
    double tps = tok_per_step * timed / t_total;
    size_t peak = arena.peak, peak_max = 0;
    MPI_Allreduce(&peak, &peak_max, 1, MPI_UNSIGNED_LONG, MPI_MAX, MPI_COMM_WORLD);
    double comm_bytes = train_comm / (double)o.steps;
    if (world_rank == 0) {
        printf("done: steps=%ld train_loss %.4f -> %.4f | val_loss %.4f -> %.4f | %.1f ms/step | %.0f tok/s | %.2f GFLOP/s per rank | peak mem %.1f MiB/rank | comm %.2f MiB/step/rank\n",
               o.steps, first_loss, loss, val0, vloss, 1e3 * t_total / timed, tps, tps * flops_tok / 1e9 / world,
               mb(peak_max), comm_bytes / (1024.0 * 1024.0));
        fflush(stdout);
    }
    free(in);
    free(tg);
    pt_gpt_free(&model);
    if (synth_train) { free(synth_train); free(synth_val); }
    else { pt_shard_close(&train); pt_shard_close(&val); }
    pt_pctx_free(&ctx);
    MPI_Finalize();
    return 0;
}
