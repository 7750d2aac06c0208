/* SPDX-License-Identifier: MIT */
/* ptrain-run's command line: defaults, parsing into run_opts, and the
 * --help / --version answers given before MPI starts (bin/run/run.h). */
#define _GNU_SOURCE
#include "config.h"
#include "run.h"
#include "backend/ops.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

/* ptrain-run's own long options; then one per plan setting it offers
 * (lib/contract/settings.h's rows with PT_SETTING_RUN; val RUN_SETTING +
 * the row) but those an option of its own here names (--model, --batch:
 * what the run trains, with -m and -b and their own messages).  long_opts()
 * joins them: parse_args' table, and the early scan for --help and
 * --version (which must know which options take an argument). */
enum { O_LAYERS = 256, O_HEADS, O_EMBD, O_SEQ, O_VOCAB, O_LR, O_MINLR, O_WARM, O_WD, O_CLIP,
       O_VALE, O_VALB, O_LOGE, O_SEED, O_THREADS, O_DP, O_DRY,
       O_QUIET, O_WATCHDOG, O_METRICS, O_OLD_MICRO, O_PEAK, O_SAVEDIR, O_SAVEEVERY, O_KEEP, O_RESUME, O_TOPOLOGY,
       O_EXPLAIN, O_EPS, O_BETA1, O_BETA2, O_ENERGY, O_ECLOCK, O_EPLAN, O_EPROFILE, O_PROFILE, O_PCLOCKS, O_PSTEPS,
       O_STRAGGLER, O_DEVICE, RUN_SETTING = 1000 };
static const struct option own_opts[] = {
    {"model", 1, 0, 'm'}, {"data", 1, 0, 'd'}, {"steps", 1, 0, 's'}, {"batch", 1, 0, 'b'},
    {"layers", 1, 0, O_LAYERS}, {"heads", 1, 0, O_HEADS}, {"embd", 1, 0, O_EMBD},
    {"seq-len", 1, 0, O_SEQ}, {"vocab", 1, 0, O_VOCAB}, {"lr", 1, 0, O_LR}, {"min-lr", 1, 0, O_MINLR},
    {"warmup", 1, 0, O_WARM}, {"weight-decay", 1, 0, O_WD}, {"grad-clip", 1, 0, O_CLIP},
    {"adam-eps", 1, 0, O_EPS}, {"beta1", 1, 0, O_BETA1}, {"beta2", 1, 0, O_BETA2},
    {"val-every", 1, 0, O_VALE}, {"val-batches", 1, 0, O_VALB}, {"log-every", 1, 0, O_LOGE},
    {"seed", 1, 0, O_SEED}, {"threads", 1, 0, O_THREADS}, {"dp", 1, 0, O_DP},
    {"dry-run", 0, 0, O_DRY}, {"quiet", 0, 0, O_QUIET}, {"watchdog", 1, 0, O_WATCHDOG},
    {"metrics", 1, 0, O_METRICS},
    {"micro-batches", 1, 0, O_OLD_MICRO}, /* --microbatches as earlier versions spelt it: the same flag */
    {"peak-gflops", 1, 0, O_PEAK},
    {"save-dir", 1, 0, O_SAVEDIR}, {"save-every", 1, 0, O_SAVEEVERY}, {"keep", 1, 0, O_KEEP},
    {"resume", 1, 0, O_RESUME}, {"topology", 1, 0, O_TOPOLOGY}, {"explain", 0, 0, O_EXPLAIN},
    {"energy", 1, 0, O_ENERGY}, {"energy-clock", 1, 0, O_ECLOCK}, {"energy-plan", 1, 0, O_EPLAN},
    {"energy-profile", 1, 0, O_EPROFILE}, {"profile-energy", 1, 0, O_PROFILE}, {"profile-clocks", 1, 0, O_PCLOCKS},
    {"profile-steps", 1, 0, O_PSTEPS}, {"energy-straggler", 1, 0, O_STRAGGLER},
    {"device", 1, 0, O_DEVICE},
    {"help", 0, 0, 'h'}, {"version", 0, 0, 'V'}, {0, 0, 0, 0}};
enum { NOWN = sizeof own_opts / sizeof own_opts[0] - 1 };

/* Whether an option of ptrain-run's own is named name. */
static int own_option(const char *name)
{
    for (const struct option *o = own_opts; o->name; o++)
        if (!strcmp(o->name, name)) return 1;
    return 0;
}

/* The row a plan setting flag's val stands for, or NULL. */
static const pt_setting *setting_of(int val)
{
    int n = 0;
    const pt_setting *rows = pt_settings(&n);
    return val >= RUN_SETTING && val < RUN_SETTING + n ? &rows[val - RUN_SETTING] : NULL;
}

/* Every long option: the own ones (--micro-batches as --microbatches:
 * the same val, so that a prefix of both is no ambiguity), then the
 * settings' (built once). */
static const struct option *long_opts(void)
{
    static struct option all[NOWN + PT_SETTINGS_MAX + 1];
    if (all[0].name) return all;
    int nrows = 0, n = 0;
    const pt_setting *rows = pt_settings(&nrows);
    for (int i = 0; i < NOWN; i++) {
        all[n] = own_opts[i];
        if (all[n].val == O_OLD_MICRO) all[n].val = RUN_SETTING + (int)(pt_setting_find("microbatches") - rows);
        n++;
    }
    for (int i = 0; i < nrows && i < PT_SETTINGS_MAX; i++)
        if ((rows[i].offered & PT_SETTING_RUN) && !own_option(rows[i].key))
            all[n++] = (struct option){rows[i].key, required_argument, 0, RUN_SETTING + i};
    all[n] = (struct option){0, 0, 0, 0};
    return all;
}
static const char short_opts[] = "m:d:s:b:hV";

static int parse_float(const char *what, const char *s, float lo, float hi, float *out)
{
    char *end;
    float v = strtof(s, &end);
    if (!*s || *end || !(v >= lo && v <= hi))
        return pt_fail(PT_EINVAL, "%s: '%s' is not a number in [%g, %g]", what, s, lo, hi);
    *out = v;
    return 0;
}

static int parse_long(const char *what, const char *s, long lo, long hi, long *out)
{
    if (pt_parse_int(what, s, lo, hi, out)) return PT_EINVAL;
    return 0;
}

/* The --help lines of the plan settings named in keys (NULL-terminated)
 * or, keys NULL, of every other one ptrain-run offers (a row new to the
 * table), each once (printed: a bit per row); not those options of its
 * own describe (--model, --batch). */
static void usage_settings(FILE *f, const char *const *keys, unsigned long long *printed)
{
    int n = 0;
    const pt_setting *rows = pt_settings(&n);
    for (int k = 0; keys ? keys[k] != NULL : k < n; k++) {
        const pt_setting *s = keys ? pt_setting_find(keys[k]) : &rows[k];
        const unsigned long long bit = s ? 1ull << (s - rows) : 0;
        if (!s || !(s->offered & PT_SETTING_RUN) || own_option(s->key) || (*printed & bit)) continue;
        *printed |= bit;
        if (s->run_usage) fputs(s->run_usage, f);
        else fprintf(f, "  --%s %s  %s (default %s)\n", s->key, s->plugin_arg ? s->plugin_arg : "V", s->values, s->var);
    }
}

/* --help, grouped by topic; tests/unit/test_help.sh checks that every long
 * option of the own table appears here, tests/unit/test_settings_docs.sh
 * every plan setting's. */
void run_usage(FILE *f)
{
    static const char *const sizes[] = {"mode", "tp", "tp-depth", "sp", "pp", NULL};
    static const char *const layout[] = {"rank-order", "tp-order", "microbatches", "schedule", "virtual-stages",
                                         "pp-split", "zero", "recompute", "precision", NULL};
    unsigned long long printed = 0;
    fprintf(f,
        "usage: ptrain-run [options]   (one process per rank: srun, sbatch or mpirun)\n"
        "\n"
        "Model:\n"
        "  --model NAME|L,H,C,T,V|llama:L,H,KV,C,I,T,V[,untied][,qkv-bias][,theta=X]\n"
        "                       preset: %s; or GPT-2's five sizes, or a Llama\n"
        "                       (KV heads, MLP width I) (default PTRAIN_MODEL, else tiny)\n"
        "  --layers N --heads N --embd N --seq-len N --vocab N   override the preset\n"
        "  --seed N             initialisation seed (default 1337)\n"
        "\n"
        "Data:\n"
        "  --data [FORMAT:]DIR|synthetic[:SEED]  a data set: ptrain-data prepare's output\n"
        "                       (index.json, or train.bin+val.bin), llm.c shards\n"
        "                       (PREFIX_train*.bin, PREFIX_val*.bin), or nanogpt:DIR (ids\n"
        "                       checked against --vocab); see ptrain-data(1)\n"
        "  --batch B            global batch in sequences (default PTRAIN_BATCH, else 8;\n"
        "                       multiple of dp)\n"
        "  --steps N            optimizer steps (default 200)\n"
        "  --val-every N        validation every N steps (default 50; 0 = only at the end)\n"
        "  --val-batches N      batches per validation (default 8)\n"
        "\n"
        "Plan and parallelism (default: the PTRAIN_* variables the SPANK plugin sets):\n",
        pt_gpt_preset_names());
    usage_settings(f, sizes, &printed);
    fprintf(f,
        "  --topology FILE      node model for --mode auto: ptrain-topo JSON or hwloc XML\n"
        "                       (default PTRAIN_TOPOLOGY, else this node's hwloc model)\n"
        "  --topology FILE:COUNT  COUNT nodes of this model, in node order; repeat for\n"
        "                       mixed nodes (as ptrain-plan; the counts add up to the job's)\n"
        "  --explain            with --mode auto: print the chosen plan, the runners-up and why\n");
    usage_settings(f, layout, &printed);
    usage_settings(f, NULL, &printed); /* rows new to the table */
    fprintf(f,
        "  --threads N          compute threads per rank (default: cores / ranks on the node)\n"
        "  --device cpu|cuda|auto   where each rank trains (default PTRAIN_DEVICE, which the\n"
        "                       plugin sets to cuda when it binds a GPU, else auto: cuda when\n"
        "                       the task sees a GPU and ptrain has the CUDA backend, else cpu;\n"
        "                       cuda refuses without them)\n"
        "  --dry-run            print every rank's place in the grid and exit\n"
        "\n"
        "Optimizer (AdamW, cosine schedule):\n"
        "  --lr F --min-lr F    peak and final learning rate (default 1e-3, lr/10)\n"
        "  --warmup N           linear warm-up steps (default steps/10, at most 100)\n"
        "  --weight-decay F --grad-clip F   (default 0.1, 1.0; 0 = no clipping)\n"
        "  --adam-eps F         AdamW's epsilon (default 1e-8)\n"
        "  --beta1 F --beta2 F  AdamW's moment decays (default 0.9, 0.95 as GPT-2/3 recipes;\n"
        "                       llm.c's CPU trainer uses 0.999 for beta2)\n"
        "\n"
        "Logging and metrics:\n"
        "  --log-every N        print every N steps (default 1)\n"
        "  --quiet              only the plan, validation and summary lines\n"
        "  --metrics FILE       write every step and validation as JSON Lines (rank 0;\n"
        "                       plot with ptrain-plot FILE)\n"
        "  --peak-gflops F      peak GFLOP/s of one rank, for MFU in the metrics and the\n"
        "                       summary (default PTRAIN_PEAK_GFLOPS, else the node model's\n"
        "                       GEMM rate for one rank, as the planner prices compute)\n"
        "\n"
        "Energy (ptrain-run(1), ENERGY; the defaults follow PTRAIN_ENERGY, see ptrain-env(7)):\n"
        "  --energy auto|none|nvml|rapl|nvml,rapl   what to measure: the rank's GPU (NVML's\n"
        "                       counter) and the CPU packages (RAPL); joules per step, watts and\n"
        "                       tokens per joule in the step lines, the metrics and the summary\n"
        "                       (default auto: whatever is readable; none when PTRAIN_ENERGY=off)\n"
        "  --energy-plan FILE|auto  set each pipeline instruction's clock from FILE\n"
        "                       (ptrain-plan --energy-plan-out) or, auto, the intrinsic point\n"
        "                       planned at start-up; replicas slow to a straggler's pace\n"
        "  --energy-profile FILE  the measured profile --energy-plan auto plans from (default:\n"
        "                       the cost model and a power model, marked modelled)\n"
        "  --energy-clock auto|nvml|cpufreq|dry|dry:FILE   how clocks are set (default auto:\n"
        "                       the rank's GPU, else its CPUs; dry sets nothing, FILE.RANK logs)\n"
        "  --energy-straggler PCT  a dp replica PCT %% slower than the others is a straggler\n"
        "                       (default 10; 0 = off)\n"
        "  --profile-energy FILE  sweep the clocks over the first steps and write each\n"
        "                       instruction's time and energy at each clock (for ptrain-plan\n"
        "                       --energy-profile)\n"
        "  --profile-clocks N --profile-steps K   the sweep: N clocks, K steps each (default 6, 2)\n"
        "\n"
        "Robustness:\n"
        "  --watchdog SECONDS   exit (status 3) when no step completes for this long: a peer\n"
        "                       rank hangs (default 600; 0 = off); a rank that dies or stops ends\n"
        "                       the job after PTRAIN_HEARTBEAT seconds without heartbeat (15; 0 = off)\n"
        "\n"
        "Checkpoints:\n"
        "  --save-dir DIR       checkpoints go to DIR/step-NNNNNNNN (DIR/latest names the newest);\n"
        "                       SIGTERM or SIGUSR1 then finish the step, save and exit 0\n"
        "  --save-every N       save every N steps (needs --save-dir)\n"
        "  --keep K             keep only the newest K checkpoints after each save\n"
        "  --resume auto|DIR    continue from DIR, or (auto) the newest valid checkpoint of\n"
        "                       --save-dir, else start fresh (any plan: resharded)\n"
        "\n"
        "  --help, --version    this text; the version\n"
        "See ptrain-run(1), ptrain-layouts(7) and ptrain-env(7).\n");
}

/* Whether this process is one of several ranks started by a launcher
 * (its variables, before MPI_Init). */
static int launched_with_peers(void)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS", "PMI_SIZE",
                                       "WORLD_SIZE"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        long n;
        if (v && *v && pt_parse_int(vars[i], v, 1, 1L << 30, &n) == PT_OK) return n > 1;
    }
    return 0;
}

int run_early_exit(int argc, char **argv, int *asked)
{
    int help = 0, version = 0;
    *asked = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) break;
        if (a[0] != '-' || a[1] == '\0') continue; /* an operand */
        if (a[1] != '-') {                          /* -m X, -mX, -h, -V */
            if (a[1] == 'h') help = 1;
            else if (a[1] == 'V') version = 1;
            else if (strchr("mdsb", a[1]) && a[2] == '\0') i++; /* its argument follows */
            continue;
        }
        const char *name = a + 2, *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        int matches = 0, has_arg = 0, which = 0;
        for (const struct option *o = long_opts(); o->name; o++) {
            if (strncmp(o->name, name, len) != 0) continue;
            if (o->name[len] == '\0') { matches = 1; has_arg = o->has_arg; which = o->val; break; } /* exact */
            matches++;
            has_arg = o->has_arg;
            which = o->val;
        }
        if (matches != 1) continue; /* unknown or ambiguous: parse_args says so */
        if (which == 'h') help = 1;
        else if (which == 'V') version = 1;
        else if (has_arg && !eq) i++;
    }
    if (!help && !version) return 0;
    *asked = help ? RUN_ASKED_HELP : RUN_ASKED_VERSION;
    if (launched_with_peers()) return 0; /* answered after the start-up agreement, by rank 0 */
    run_answer(*asked);
    return 1;
}

void run_answer(int asked)
{
    if (asked == RUN_ASKED_HELP) run_usage(stdout);
    else printf("ptrain-run (ptrain) %s\n", PACKAGE_VERSION);
    fflush(stdout);
}

/* The defaults, before the command line. */
static void defaults(run_opts *o)
{
    memset(o, 0, sizeof *o);
    o->model = PT_DEFAULT_MODEL;
    o->steps = 200;
    o->batch = PT_DEFAULT_BATCH;
    o->lr = 1e-3f;
    o->eps = 1e-8f;
    o->beta1 = 0.9f;
    o->beta2 = 0.95f;
    o->min_lr = -1;
    o->warmup = -1;
    o->wd = 0.1f;
    o->clip = 1.0f;
    o->val_every = 50;
    o->val_batches = 8;
    o->log_every = 1;
    o->seed = 1337;
    o->threads = 0;
    o->watchdog = 600;
    pt_plan_request_init(&o->flags, PT_MODE_OFF); /* nothing pinned: no flag given */
    o->profile_clocks = 6;
    o->profile_steps = 2;
    o->straggler = 0.10;
}

/* A plan setting's flag: its row's parser (lib/contract/settings.h), the
 * flag named as the row's key (also when spelt --micro-batches); an
 * integer read as ptrain-run's other integer flags first, and passed on as
 * the number it read.  0, or -1 with one line. */
static int setting_flag(run_opts *o, const pt_setting *s, const char *text)
{
    char what[48], num[24];
    snprintf(what, sizeof what, "--%s", s->key);
    if (s->max > 0) {
        long v;
        if (pt_parse_int(what, text, s->min, s->max, &v)) return -1;
        snprintf(num, sizeof num, "%ld", v);
        text = num;
    }
    return pt_plan_request_set(&o->flags, NULL, s->key, what, text);
}

/* The model, data and optimizer options (c: getopt_long's answer): 1 when
 * c is one of them, 0 when not, -1 with one line on a bad value. */
static int train_option(run_opts *o, int c, const char *arg)
{
    long vl;
    float vf;
    switch (c) {
    case 'm': o->model = arg; break;
    case 'd': o->data = arg; break;
    case 's': if (parse_long("--steps", arg, 1, 100000000, &vl)) return -1; o->steps = vl; break;
    case 'b': if (parse_long("--batch", arg, 1, 1 << 20, &vl)) return -1; o->batch = vl; break;
    case O_LAYERS: if (parse_long("--layers", arg, 1, 4096, &vl)) return -1; o->layers = (int)vl; break;
    case O_HEADS: if (parse_long("--heads", arg, 1, 4096, &vl)) return -1; o->heads = (int)vl; break;
    case O_EMBD: if (parse_long("--embd", arg, 1, 1 << 20, &vl)) return -1; o->embd = (int)vl; break;
    case O_SEQ: if (parse_long("--seq-len", arg, 1, 1 << 20, &vl)) return -1; o->seq_len = (int)vl; break;
    case O_VOCAB: if (parse_long("--vocab", arg, 2, 65536, &vl)) return -1; o->vocab = (int)vl; break;
    case O_LR: if (parse_float("--lr", arg, 0, 10, &vf)) return -1; o->lr = vf; break;
    case O_MINLR: if (parse_float("--min-lr", arg, 0, 10, &vf)) return -1; o->min_lr = vf; break;
    case O_WARM: if (parse_long("--warmup", arg, 0, 100000000, &vl)) return -1; o->warmup = vl; break;
    case O_WD: if (parse_float("--weight-decay", arg, 0, 10, &vf)) return -1; o->wd = vf; break;
    case O_CLIP: if (parse_float("--grad-clip", arg, 0, 1e6f, &vf)) return -1; o->clip = vf; break;
    case O_EPS: if (parse_float("--adam-eps", arg, 1e-30f, 1, &vf)) return -1; o->eps = vf; break;
    case O_BETA1: if (parse_float("--beta1", arg, 0, 0.999999f, &vf)) return -1; o->beta1 = vf; break;
    case O_BETA2: if (parse_float("--beta2", arg, 0, 0.999999f, &vf)) return -1; o->beta2 = vf; break;
    case O_VALE: if (parse_long("--val-every", arg, 0, 100000000, &vl)) return -1; o->val_every = vl; break;
    case O_VALB: if (parse_long("--val-batches", arg, 1, 1000000, &vl)) return -1; o->val_batches = vl; break;
    case O_SEED: if (parse_long("--seed", arg, 0, 0x7fffffffL, &vl)) return -1; o->seed = vl; break;
    default: return 0;
    }
    return 1;
}

/* The other own options (run, logging, checkpoints, energy): as
 * train_option. */
static int run_option(run_opts *o, int c, const char *arg)
{
    long vl;
    float vf;
    switch (c) {
    case O_LOGE: if (parse_long("--log-every", arg, 1, 100000000, &vl)) return -1; o->log_every = vl; break;
    case O_THREADS: if (parse_long("--threads", arg, 1, 4096, &vl)) return -1; o->threads = vl; break;
    case O_DP: if (parse_long("--dp", arg, 1, 1 << 20, &vl)) return -1; o->dp = vl; break;
    case O_WATCHDOG: if (parse_long("--watchdog", arg, 0, 86400 * 365, &vl)) return -1; o->watchdog = (double)vl; break;
    case O_DRY: o->dry_run = 1; break;
    case O_QUIET: o->quiet = 1; break;
    case O_METRICS: o->metrics = arg; break;
    case O_PEAK: if (parse_float("--peak-gflops", arg, 1e-3f, 1e9f, &vf)) return -1; o->peak_gflops = vf; o->peak_what = "--peak-gflops"; break;
    case O_SAVEDIR: o->save_dir = arg; break;
    case O_SAVEEVERY: if (parse_long("--save-every", arg, 1, 100000000, &vl)) return -1; o->save_every = vl; break;
    case O_KEEP: if (parse_long("--keep", arg, 1, 1000000, &vl)) return -1; o->keep = vl; break;
    case O_RESUME: o->resume = arg; break;
    case O_TOPOLOGY:
        if (o->ntopologies == RUN_MAX_TOPOLOGIES)
            return pt_fail(PT_EINVAL, "more than %d --topology options (valid: at most %d node models, one per kind of node)",
                           RUN_MAX_TOPOLOGIES, RUN_MAX_TOPOLOGIES);
        o->topologies[o->ntopologies++] = arg;
        o->topology = o->topologies[0];
        break;
    case O_EXPLAIN: o->explain = 1; break;
    case O_ENERGY: o->energy = arg; break;
    case O_ECLOCK: o->energy_clock = arg; break;
    case O_EPLAN: o->energy_plan = arg; break;
    case O_EPROFILE: o->energy_profile = arg; break;
    case O_PROFILE: o->profile_energy = arg; break;
    case O_PCLOCKS: if (parse_long("--profile-clocks", arg, 1, 64, &vl)) return -1; o->profile_clocks = vl; break;
    case O_PSTEPS: if (parse_long("--profile-steps", arg, 1, 1000, &vl)) return -1; o->profile_steps = vl; break;
    case O_STRAGGLER: if (parse_float("--energy-straggler", arg, 0, 1000, &vf)) return -1; o->straggler = vf / 100; break;
    case O_DEVICE: o->device = arg; o->device_what = "--device"; break;
    case 'h':
    case 'V':
        break; /* answered before MPI started (run_early_exit) */
    default: return 0;
    }
    return 1;
}

/* What the environment gives where the command line gave nothing: the
 * model and batch the SPANK plugin planned for (--ptrain-model,
 * --ptrain-batch), the node model (an empty one refused), the MFU's peak,
 * the device.  0, or -1 with one line. */
static int from_environment(run_opts *o, int model_given, int batch_given)
{
    long vl;
    float vf;
    o->model_what = "--model";
    const char *em = getenv("PTRAIN_MODEL"), *eb = getenv("PTRAIN_BATCH");
    if (!model_given && em && *em) {
        o->model = em;
        o->model_what = "PTRAIN_MODEL";
    }
    if (!batch_given && eb && *eb) {
        if (parse_long("PTRAIN_BATCH", eb, 1, 1 << 20, &vl)) return -1;
        o->batch = vl;
    }
    const char *topo = getenv("PTRAIN_TOPOLOGY");
    if (!o->topology && topo && *topo) o->topology = o->topologies[o->ntopologies++] = topo;
    for (int i = 0; i < o->ntopologies; i++)
        if (!o->topologies[i][0])
            return pt_fail(PT_EINVAL, "--topology '' is not valid (valid: a node model file from ptrain-topo --save, or hwloc XML)");
    const char *peak = getenv("PTRAIN_PEAK_GFLOPS");
    if (!o->peak_gflops && peak && *peak) {
        if (parse_float("PTRAIN_PEAK_GFLOPS", peak, 1e-3f, 1e9f, &vf)) return -1;
        o->peak_gflops = vf;
        o->peak_what = "PTRAIN_PEAK_GFLOPS";
    }
    /* the device the plugin's binding implies (PTRAIN_DEVICE=cuda), or the
     * user's, when the command line gives none */
    const char *dev = getenv("PTRAIN_DEVICE");
    if (!o->device && dev && *dev) {
        o->device = dev;
        o->device_what = "PTRAIN_DEVICE";
    }
    return 0;
}

/* The options' checks against each other, after the environment. */
static int check_options(const run_opts *o)
{
    if (o->device && strcmp(o->device, "cpu") && strcmp(o->device, "cuda") && strcmp(o->device, "auto"))
        return pt_fail(PT_EINVAL, "%s '%s' is not valid (valid: cpu, cuda, auto)", o->device_what, o->device);
    if ((o->save_every || o->keep) && !o->save_dir)
        return pt_fail(PT_EINVAL, "%s needs --save-dir DIR (where checkpoints go)", o->save_every ? "--save-every" : "--keep");
    if (o->resume && !strcmp(o->resume, "auto") && !o->save_dir)
        return pt_fail(PT_EINVAL, "--resume auto needs --save-dir DIR (where to look for checkpoints)");
    if (o->resume && !o->resume[0]) return pt_fail(PT_EINVAL, "--resume '' is not valid (valid: auto or a checkpoint directory)");
    return 0;
}

int run_parse_args(int argc, char **argv, run_opts *o)
{
    defaults(o);
    opterr = 0;
    int c, model_given = 0, batch_given = 0;
    while ((c = getopt_long(argc, argv, short_opts, long_opts(), NULL)) != -1) {
        const pt_setting *s = setting_of(c);
        int rc = s ? (setting_flag(o, s, optarg) < 0 ? -1 : 1) : train_option(o, c, optarg);
        if (rc == 0) rc = run_option(o, c, optarg);
        if (rc < 0) return -1;
        if (rc == 0) return pt_fail(PT_EINVAL, "unknown or incomplete option '%s' (see --help)", argv[optind - 1]);
        model_given |= c == 'm';
        batch_given |= c == 'b';
    }
    if (optind < argc) return pt_fail(PT_EINVAL, "unexpected argument '%s' (see --help)", argv[optind]);
    if (from_environment(o, model_given, batch_given) < 0 || check_options(o) < 0) return -1;
    o->model_given = model_given || !strcmp(o->model_what, "PTRAIN_MODEL");
    return run_energy_options(o);
}

int run_resolve_device(const run_opts *o, int *device, char *note, size_t len)
{
    const char *want = o->device ? o->device : "auto";
    const int env = o->device && !strcmp(o->device_what, "PTRAIN_DEVICE");
    char given[64]; /* "--device cuda", "PTRAIN_DEVICE=cuda" */
    snprintf(given, sizeof given, env ? "PTRAIN_DEVICE=%.20s" : "--device %.20s", want);
    *device = RUN_DEVICE_CPU;
    if (!strcmp(want, "cpu")) {
        snprintf(note, len, "%s", given);
        return 0;
    }
    char why[300] = "";
    const int avail = pt_cuda_backend.available(why, sizeof why);
    const int built = avail >= 0, ndev = avail > 0;
    /* auto, or PTRAIN_DEVICE (the plugin sets cuda when it binds a GPU,
     * also for a build without the backend): the CPU when CUDA cannot run,
     * named on the run header's device line */
    const int chosen = !strcmp(want, "auto") || env;
    if (chosen && (!built || ndev < 1)) {
        snprintf(note, len, "%s: %s: training on the CPU", given, built ? why : "this build has no CUDA backend");
        return 0;
    }
    /* --device cuda, or chosen with a device and the backend */
    if (!built)
        return pt_fail(PT_EINVAL, "%s: this ptrain build has no CUDA backend (configure found no nvcc; rebuild with "
                       "--with-cuda=DIR), so it would train on the CPU: give --device cpu to do that", given);
    if (ndev < 1) return pt_fail(PT_EINVAL, "%s: %s; give --device cpu to train on the CPU", given, why);
    /* the backend and a device: train there */
    *device = RUN_DEVICE_CUDA;
    snprintf(note, len, "%s", given);
    return 0;
}
