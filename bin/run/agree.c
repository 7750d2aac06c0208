/* SPDX-License-Identifier: MIT */
/* ptrain-run's start-up agreement and collective error exits
 * (bin/run/run.h).
 *
 * Every rank resolves its options, plan, model and data alone; before the
 * first collective of the training itself the ranks compare what they
 * resolved.  A difference (a node with another ptrain.conf, a per-node
 * PTRAIN_* variable, a wrapper that passes an option to some ranks) would
 * otherwise make the collectives mismatch: a silent hang, or Open MPI's
 * internal errors.  Every option that changes the sequence of collectives
 * or the computation is in the record: the plan, the model, the data's
 * identity, the training options, --metrics (it adds a collective per
 * step), the checkpoint options (--save-dir, --save-every, --keep,
 * --resume: saves and loads are collective), the energy options (a
 * collective per step, the plan's and profile's contents), the device
 * (--device: where the tensors live decides which collectives run) and the
 * build. */
#include "config.h"
#include "run.h"
#include "energy/clock.h"

#include <limits.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

/* How a field's value is shown in the one-line report. */
typedef enum { SHOW_INT, SHOW_MODE, SHOW_RECOMPUTE, SHOW_SCHEDULE, SHOW_ORDER, SHOW_HEX, SHOW_HASH,
               SHOW_GIVEN, SHOW_PRECISION, SHOW_DEVICE } show_kind;

/* The record's fields, in the order they are reported. */
enum {
    F_STATUS, F_MODE, F_DP, F_PP, F_TP, F_TP_DEPTH, F_SP, F_ZERO, F_MICRO, F_RECOMPUTE, F_ORDER, F_TP_ORDER,
    F_LAYERS, F_HEADS, F_EMBD, F_SEQ, F_VOCAB, F_SHAPE, F_TRAIN_TOK, F_TRAIN_SUM, F_VAL_TOK, F_VAL_SUM,
    F_STEPS, F_BATCH, F_TRAINING, F_SCHEDULE, F_VSTAGES, F_METRICS, F_SAVE_DIR, F_SAVE_EVERY, F_KEEP,
    F_RESUME, F_PRECISION, F_ENERGY, F_DEVICE, F_PLAN_MODEL, F_PLAN_BATCH, F_N
};

static const struct {
    const char *name;
    show_kind show;
} fields[F_N] = {
    [F_STATUS] = {"start-up status", SHOW_INT},
    [F_MODE] = {"plan mode", SHOW_MODE},
    [F_DP] = {"plan dp", SHOW_INT},
    [F_PP] = {"plan pp", SHOW_INT},
    [F_TP] = {"plan tp", SHOW_INT},
    [F_TP_DEPTH] = {"plan tp_depth", SHOW_INT},
    [F_SP] = {"plan sp", SHOW_INT},
    [F_ZERO] = {"plan zero", SHOW_INT},
    [F_MICRO] = {"plan microbatches", SHOW_INT},
    [F_RECOMPUTE] = {"plan recompute", SHOW_RECOMPUTE},
    [F_ORDER] = {"plan rank order", SHOW_ORDER},
    [F_TP_ORDER] = {"plan tp order", SHOW_ORDER},
    [F_LAYERS] = {"model layers", SHOW_INT},
    [F_HEADS] = {"model heads", SHOW_INT},
    [F_EMBD] = {"model embd", SHOW_INT},
    [F_SEQ] = {"model seq_len", SHOW_INT},
    [F_VOCAB] = {"model vocab", SHOW_INT},
    [F_SHAPE] = {"model family and shape (--model: KV heads, MLP width, head, biases, RoPE)", SHOW_HASH},
    [F_TRAIN_TOK] = {"data train tokens", SHOW_INT},
    [F_TRAIN_SUM] = {"data train checksum", SHOW_HEX},
    [F_VAL_TOK] = {"data val tokens", SHOW_INT},
    [F_VAL_SUM] = {"data val checksum", SHOW_HEX},
    [F_STEPS] = {"--steps", SHOW_INT},
    [F_BATCH] = {"--batch", SHOW_INT},
    [F_TRAINING] = {"training options (--seed, --lr, --min-lr, --warmup, --weight-decay, --grad-clip, "
                    "--adam-eps, --beta1, --beta2, --val-every, --val-batches, --dry-run)", SHOW_HASH},
    [F_SCHEDULE] = {"plan schedule", SHOW_SCHEDULE},
    [F_VSTAGES] = {"plan virtual_stages", SHOW_INT},
    [F_METRICS] = {"--metrics", SHOW_GIVEN},
    [F_SAVE_DIR] = {"--save-dir", SHOW_HASH},
    [F_SAVE_EVERY] = {"--save-every", SHOW_INT},
    [F_KEEP] = {"--keep", SHOW_INT},
    [F_RESUME] = {"--resume", SHOW_HASH},
    [F_PRECISION] = {"plan precision", SHOW_PRECISION},
    [F_ENERGY] = {"energy options (--energy, --energy-clock, --energy-plan and its file, --energy-profile and its "
                  "file, --energy-straggler, --profile-energy, --profile-clocks, --profile-steps, PTRAIN_ENERGY*)",
                  SHOW_HASH},
    [F_DEVICE] = {"device (--device, PTRAIN_DEVICE)", SHOW_DEVICE},
    [F_PLAN_MODEL] = {"the model the plugin's plan was made for (PTRAIN_MODEL)", SHOW_HASH},
    [F_PLAN_BATCH] = {"the global batch the plugin's plan was made for (PTRAIN_BATCH)", SHOW_INT},
};

/* The FNV-1a hash of a model shape, every field of its normalised form
 * (the struct is 4-byte fields without padding) (never 0). */
static int64_t shape_id(const pt_model_shape *m)
{
    pt_model_shape n = *m; /* two spellings of one model hash equal */
    pt_model_shape_normalise(&n);
    uint64_t h = pt_fnv1a64(&n, sizeof n);
    return (int64_t)(h ? h : 1);
}

typedef struct startup_rec {
    int64_t v[F_N];
    char version[32];
    char split[PT_PP_SPLIT_MAX * 6]; /* the plan's stage split, pt_plan_split_format */
} startup_rec;

/* A string option as a field: 0 when not given, else its FNV-1a hash
 * (never 0). */
static int64_t text_id(const char *s)
{
    if (!s) return 0;
    uint64_t h = pt_fnv1a64(s, strlen(s));
    return (int64_t)(h ? h : 1);
}

static void fill_rec(startup_rec *r, int ok, const run_setup *s)
{
    memset(r, 0, sizeof *r);
    r->v[F_STATUS] = ok;
    snprintf(r->version, sizeof r->version, "%s", PACKAGE_VERSION);
    if (!ok) return;
    const pt_plan *p = &s->plan;
    const pt_gpt_config *c = &s->cfg;
    const run_opts *o = &s->o;
    int64_t *v = r->v;
    v[F_MODE] = p->mode;
    v[F_DP] = p->dp;
    v[F_PP] = p->pp;
    v[F_TP] = p->tp;
    v[F_TP_DEPTH] = p->tp_depth;
    v[F_SP] = p->sp;
    v[F_ZERO] = p->zero;
    v[F_MICRO] = p->microbatches;
    v[F_RECOMPUTE] = p->recompute;
    v[F_ORDER] = (int64_t)p->rank_order[0] << 16 | (int64_t)p->rank_order[1] << 8 | p->rank_order[2];
    v[F_TP_ORDER] = (int64_t)p->tp_order[0] << 16 | (int64_t)p->tp_order[1] << 8 | p->tp_order[2];
    v[F_LAYERS] = c->n_layer;
    v[F_HEADS] = c->n_head;
    v[F_EMBD] = c->n_embd;
    v[F_SEQ] = c->seq_len;
    v[F_VOCAB] = c->vocab;
    v[F_SHAPE] = shape_id(c);
    v[F_TRAIN_TOK] = (int64_t)s->data_id[0];
    v[F_TRAIN_SUM] = (int64_t)s->data_id[1];
    v[F_VAL_TOK] = (int64_t)s->data_id[2];
    v[F_VAL_SUM] = (int64_t)s->data_id[3];
    v[F_STEPS] = o->steps;
    v[F_BATCH] = o->batch;
    double opt[] = {(double)o->seed, o->lr, o->min_lr, (double)o->warmup, o->wd, o->clip,
                    (double)o->val_every, (double)o->val_batches, (double)o->dry_run, o->eps, o->beta1, o->beta2};
    v[F_TRAINING] = (int64_t)pt_fnv1a64(opt, sizeof opt);
    v[F_SCHEDULE] = p->schedule;
    v[F_VSTAGES] = p->virtual_stages;
    v[F_METRICS] = o->metrics != NULL;
    v[F_SAVE_DIR] = text_id(o->save_dir);
    v[F_SAVE_EVERY] = o->save_every;
    v[F_KEEP] = o->keep;
    v[F_RESUME] = text_id(o->resume);
    v[F_PRECISION] = p->precision;
    v[F_ENERGY] = (int64_t)s->energy_id;
    v[F_DEVICE] = s->device;
    v[F_PLAN_MODEL] = s->planned_for ? shape_id(&s->plan_model) : 0;
    v[F_PLAN_BATCH] = s->planned_for ? s->plan_batch : 0;
    pt_plan_split_format(p, r->split, sizeof r->split);
}

static void field_value(const startup_rec *r, int f, char *buf, size_t len)
{
    int64_t x = r->v[f];
    switch (fields[f].show) {
    case SHOW_MODE: snprintf(buf, len, "%s", pt_mode_name((pt_mode)x)); break;
    case SHOW_RECOMPUTE: snprintf(buf, len, "%s", pt_recompute_name((int)x)); break;
    case SHOW_PRECISION: snprintf(buf, len, "%s", pt_precision_name((int)x)); break;
    case SHOW_SCHEDULE: snprintf(buf, len, "%s", pt_schedule_name((int)x)); break;
    case SHOW_ORDER: snprintf(buf, len, "%c%c%c", (char)(x >> 16), (char)(x >> 8), (char)x); break;
    case SHOW_HEX: snprintf(buf, len, "%016llx", (unsigned long long)x); break;
    case SHOW_HASH:
        if (x) snprintf(buf, len, "hash %016llx", (unsigned long long)x);
        else snprintf(buf, len, "not given");
        break;
    case SHOW_GIVEN: snprintf(buf, len, "%s", x ? "given" : "not given"); break;
    case SHOW_DEVICE: snprintf(buf, len, "%s", x == RUN_DEVICE_CUDA ? "cuda" : "cpu"); break;
    default: snprintf(buf, len, "%lld", (long long)x);
    }
}

/* "1, 3, 5" (at most 8 named, then "and N more") of the ranks in list. */
static void ranks_text(const int *list, int n, char *buf, size_t len)
{
    size_t off = 0;
    buf[0] = '\0';
    for (int i = 0; i < n && i < 8 && off < len; i++)
        off += (size_t)snprintf(buf + off, len - off, "%s%d", i ? ", " : "", list[i]);
    if (n > 8 && off < len) snprintf(buf + off, len - off, " and %d more", n - 8);
}

void run_exit(int status)
{
    pt_clock_restore_emergency(); /* a run that leaves before run_energy_finish */
    MPI_Finalize();
    exit(status);
}

uint64_t run_agree_startup(int ok, int asked, const run_setup *s, int world)
{
    run_watchdog_beat("start-up agreement");
    /* --help / --version on some rank: rank 0 answers (help before version), all leave */
    int want = asked, any = 0;
    MPI_Allreduce(&want, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (any) {
        int help = asked == RUN_ASKED_HELP, anyhelp = 0;
        MPI_Allreduce(&help, &anyhelp, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        if (run_rank == 0) run_answer(anyhelp ? RUN_ASKED_HELP : RUN_ASKED_VERSION);
        run_exit(PT_EXIT_OK);
    }
    startup_rec mine;
    fill_rec(&mine, ok, s);
    startup_rec *all = malloc(sizeof *all * (size_t)world);
    int have = all != NULL, everyone = 0;
    MPI_Allreduce(&have, &everyone, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!everyone) {
        if (run_rank == 0)
            fprintf(stderr, "ptrain-run: error: out of memory for the start-up agreement of %d ranks\n", world);
        free(all);
        run_exit(PT_EXIT_FAIL);
    }
    MPI_Allgather(&mine, (int)sizeof mine, MPI_BYTE, all, (int)sizeof mine, MPI_BYTE, MPI_COMM_WORLD);
    int *list = malloc(sizeof(int) * (size_t)world), nfail = 0, first = -1;
    for (int r = 0; r < world; r++)
        if (!all[r].v[F_STATUS]) {
            if (first < 0) first = r;
            if (list) list[nfail] = r;
            nfail++;
        }
    if (nfail) {
        /* the first failing rank's message goes to rank 0 */
        char why[PT_ERROR_LEN] = "";
        if (run_rank == first) snprintf(why, sizeof why, "%s", pt_errmsg());
        MPI_Bcast(why, (int)sizeof why, MPI_CHAR, first, MPI_COMM_WORLD);
        if (run_rank == 0) {
            char who[160] = "";
            if (list) ranks_text(list, nfail, who, sizeof who);
            if (nfail == world)
                fprintf(stderr, "ptrain-run: error: %s\n", why);
            else
                fprintf(stderr, "ptrain-run: error: rank %d: %s (start-up failed on rank%s %s of %d; every rank exits)\n",
                        first, why, nfail > 1 ? "s" : "", who, world);
        }
        free(list);
        free(all);
        run_exit(PT_EXIT_INPUT);
    }
    /* every rank resolved a plan: all must hold rank 0's */
    char line[1024] = "";
    size_t off = 0;
    int differ = 0;
    for (int f = 0; f < F_N; f++) {
        int n = 0, r1 = -1;
        for (int r = 1; r < world; r++)
            if (all[r].v[f] != all[0].v[f]) {
                if (r1 < 0) r1 = r;
                if (list) list[n] = r;
                n++;
            }
        if (!n) continue;
        differ = 1;
        if (run_rank != 0 || off >= sizeof line) continue;
        char who[160] = "", a[40], b[40];
        if (list) ranks_text(list, n, who, sizeof who);
        field_value(&all[r1], f, b, sizeof b);
        field_value(&all[0], f, a, sizeof a);
        off += (size_t)snprintf(line + off, sizeof line - off, "%s%s: rank%s %s %s %s, rank 0 has %s",
                                off ? "; " : "", fields[f].name, n > 1 ? "s" : "", who,
                                n > 1 ? "have (first)" : "has", b, a);
    }
    for (int r = 1; r < world && off < sizeof line; r++)
        if (strcmp(all[r].split, all[0].split) != 0) {
            differ = 1;
            if (run_rank == 0)
                off += (size_t)snprintf(line + off, sizeof line - off, "%splan pp_split: rank %d has %.60s, rank 0 has %.60s",
                                        off ? "; " : "", r, all[r].split, all[0].split);
            break;
        }
    for (int r = 1; r < world && off < sizeof line; r++)
        if (strcmp(all[r].version, all[0].version) != 0) {
            differ = 1;
            if (run_rank == 0)
                off += (size_t)snprintf(line + off, sizeof line - off, "%sptrain version: rank %d has %.31s, rank 0 has %.31s",
                                        off ? "; " : "", r, all[r].version, all[0].version);
            break;
        }
    free(list);
    uint64_t h = pt_fnv1a64(&all[0], sizeof all[0]);
    free(all);
    if (differ) {
        if (run_rank == 0)
            fprintf(stderr, "ptrain-run: error: ranks disagree at start-up: %s (every rank must get the same "
                    "plan, model, data, options and ptrain build; under Slurm check the nodes' ptrain.conf "
                    "and PTRAIN_* settings)\n", line);
        run_exit(PT_EXIT_INPUT);
    }
    /* every rank agrees: the plugin's plan must have been made for the
     * model and global batch this run trains (its memory and its layout's
     * fit were judged for them) */
    if (mine.v[F_PLAN_MODEL] || mine.v[F_PLAN_BATCH]) {
        const pt_gpt_config *c = &s->cfg;
        const pt_model_shape run_m = *c;
        const pt_model_shape *pm = &s->plan_model;
        if (mine.v[F_PLAN_MODEL] != shape_id(&run_m) || mine.v[F_PLAN_BATCH] != s->o.batch) {
            if (run_rank == 0)
                fprintf(stderr, "ptrain-run: error: the plan (PTRAIN_PLAN, from the SPANK plugin) was made for model "
                        "L=%d H=%d C=%d T=%d V=%d (PTRAIN_MODEL=%s) and global batch %ld (PTRAIN_BATCH), but this run "
                        "trains L=%d H=%d C=%d T=%d V=%d with batch %ld (valid: give srun --ptrain-model and "
                        "--ptrain-batch for what ptrain-run trains, or leave ptrain-run's --model, --layers, --heads, "
                        "--embd, --seq-len, --vocab and --batch to PTRAIN_MODEL and PTRAIN_BATCH)\n",
                        pm->n_layer, pm->n_head, pm->n_embd, pm->seq_len, pm->vocab, s->plan_model_text,
                        s->plan_batch, run_m.n_layer, run_m.n_head, run_m.n_embd, run_m.seq_len, run_m.vocab,
                        s->o.batch);
            run_exit(PT_EXIT_INPUT);
        }
    }
    return h;
}

void run_agree(int rc, const char *what)
{
    run_watchdog_beat(what);
    int mine = rc == PT_OK ? INT_MAX : run_rank, first = INT_MAX;
    MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (first == INT_MAX) return;
    if (run_rank == first) fprintf(stderr, "ptrain-run: error: rank %d: %s: %s\n", run_rank, what, pt_errmsg());
    run_exit(PT_EXIT_FAIL);
}

void run_agree_collective(int rc, const char *what)
{
    run_watchdog_beat(what);
    int mine = rc == PT_OK ? 0 : 1, any = 0;
    MPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (!any) return;
    if (run_rank == 0) fprintf(stderr, "ptrain-run: error: %s: %s\n", what, rc ? pt_errmsg() : "failed on another rank");
    run_exit(PT_EXIT_FAIL);
}
