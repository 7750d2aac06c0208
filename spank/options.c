/* SPDX-License-Identifier: MIT */
/* ptrain.so, every SPANK context: the administrator's settings (plugstack
 * arguments and ptrain.conf, read in slurm_spank_init), the --ptrain-*
 * options (registered there; each value checked by its callback, in srun
 * and again where Slurm hands them to slurmstepd), and the request they
 * make with the PTRAIN_* variables and the administrator's defaults.  See
 * plugin.h and man/ptrain_spank.8. */
#include <stdio.h>
#include <string.h>

#include "plan/planner.h"
#include "spank/plugin.h"

pt_spank_conf ptsp_conf;
char ptsp_conf_err[PT_ERROR_LEN];
int ptsp_conf_bad;
int ptsp_opt_verbose;
int ptsp_opt_explain;

static int opt_mode_given;      /* --ptrain-mode seen (locally or propagated) */
static pt_mode opt_mode;
static int opt_tp;              /* --ptrain-tp, 0 = not given */
static int opt_tp_depth;        /* --ptrain-tp-depth, 0 = not given */
static int opt_sp;              /* --ptrain-sp, 0 = not given */
static char opt_model[64];      /* --ptrain-model text, "" = not given */
static int opt_batch;           /* --ptrain-batch, 0 = not given */

/* --ptrain-energy (ptrain_spank(8), ENERGY): the level asked for, -1 none */
static int opt_energy = -1;

/* Some --ptrain-* option was given (srun, sbatch, or handed to slurmstepd):
 * the step asks for ptrain (ptsp_is_ptrain_step). */
static int opt_any;

/* The pipeline/ZeRO options: their text as given (validated by the
 * callback), read over the PTRAIN_* variable (pt_plan_request_env's table names it
 * from the key) and the admin default in ptsp_resolve_request.  Index = the
 * spank_option's val. */
static const struct { const char *key; } pipe_opts[] = {
    {"pp"}, {"microbatches"}, {"schedule"}, {"virtual-stages"}, {"pp-split"}, {"zero"},
    {"recompute"}, /* its variable's old name, PTRAIN_CKPT_ACT, is read too (ptrain-env(7)) */
    {"precision"},
};
#define N_PIPE ((int)(sizeof pipe_opts / sizeof pipe_opts[0]))
static char opt_pipe[N_PIPE][400];
static int opt_pipe_given[N_PIPE];

/* ---- options ------------------------------------------------------------ */
/* Parse a requested mode / group size against the administrator's settings
 * (request.c; the settings are ignored while the configuration is bad,
 * which ptsp_resolve_request refuses on its own). */
static int parse_mode_text(const char *what, const char *text, pt_mode *out)
{
    return pt_spank_parse_mode_opt(&ptsp_conf, what, text, out);
}

static int parse_size_text(const char *what, const char *text, int is_tp, int *out)
{
    return pt_spank_parse_size_opt(ptsp_conf_bad ? NULL : &ptsp_conf, what, text, is_tp, out);
}

static int cb_mode(int val, const char *optarg, int remote)
{
    (void)val;
    (void)remote;
    pt_mode m = PT_MODE_OFF;
    if (parse_mode_text("--ptrain-mode", optarg, &m) < 0) {
        slurm_error("%s", pt_errmsg());
        return -1;
    }
    opt_mode = m;
    opt_mode_given = 1;
    opt_any = 1;
    return 0;
}

static int cb_size(const char *what, const char *optarg, int is_tp, int *out)
{
    if (parse_size_text(what, optarg, is_tp, out) < 0) {
        slurm_error("%s", pt_errmsg());
        return -1;
    }
    opt_any = 1;
    return 0;
}

static int cb_tp(int val, const char *optarg, int remote)
{
    (void)val;
    (void)remote;
    return cb_size("--ptrain-tp", optarg, 1, &opt_tp);
}

static int cb_tp_depth(int val, const char *optarg, int remote)
{
    (void)val;
    (void)remote;
    return cb_size("--ptrain-tp-depth", optarg, 0, &opt_tp_depth);
}

static int cb_sp(int val, const char *optarg, int remote)
{
    (void)val;
    (void)remote;
    return cb_size("--ptrain-sp", optarg, 0, &opt_sp);
}

static int cb_pipe(int val, const char *optarg, int remote)
{
    (void)remote;
    if (val < 0 || val >= N_PIPE) return -1;
    char what[64];
    snprintf(what, sizeof what, "--ptrain-%s", pipe_opts[val].key);
    pt_plan scratch;
    pt_plan_default(&scratch);
    if (pt_spank_parse_pipe_opt(ptsp_conf_bad ? NULL : &ptsp_conf, pipe_opts[val].key, what, optarg,
                                &scratch) < 0) {
        slurm_error("%s", pt_errmsg());
        return -1;
    }
    snprintf(opt_pipe[val], sizeof opt_pipe[val], "%s", optarg ? optarg : "");
    opt_pipe_given[val] = 1;
    opt_any = 1;
    return 0;
}

static int cb_model(int val, const char *optarg, int remote)
{
    (void)val;
    (void)remote;
    if (pt_spank_parse_model_opt("--ptrain-model", optarg) < 0) {
        slurm_error("%s", pt_errmsg());
        return -1;
    }
    snprintf(opt_model, sizeof opt_model, "%s", optarg);
    opt_any = 1;
    return 0;
}

static int cb_batch(int val, const char *optarg, int remote)
{
    (void)val;
    (void)remote;
    if (pt_spank_parse_batch_opt("--ptrain-batch", optarg, &opt_batch) < 0) {
        slurm_error("%s", pt_errmsg());
        return -1;
    }
    opt_any = 1;
    return 0;
}

static int cb_explain(int val, const char *optarg, int remote)
{
    (void)val;
    (void)optarg;
    (void)remote;
    ptsp_opt_explain = 1;
    opt_any = 1;
    return 0;
}

static int cb_energy(int val, const char *optarg, int remote)
{
    (void)val;
    (void)remote;
    if (pt_spank_parse_energy_opt(&ptsp_conf, "--ptrain-energy", optarg, &opt_energy) < 0) {
        slurm_error("%s", pt_errmsg());
        return -1;
    }
    opt_any = 1;
    return 0;
}

static int cb_verbose(int val, const char *optarg, int remote)
{
    (void)val;
    (void)optarg;
    (void)remote;
    ptsp_opt_verbose = 1;
    opt_any = 1;
    return 0;
}

/* ---- the request -------------------------------------------------------- */
int ptsp_is_ptrain_step(ptsp_env_fn get, void *arg)
{
    if (opt_any) return 1;
    char buf[64];
    int g = get(arg, "PTRAIN_MODE", buf, (int)sizeof buf);
    if (g < 0) return 1; /* too long for any mode: a request, refused as such */
    if (g > 0) return strcmp(buf, "off") != 0;
    return ptsp_conf.default_mode != PT_MODE_OFF;
}

/* The request of a ptrain step (ptsp_resolve_request's contract). */
static int resolve_request(ptsp_env_fn get, void *arg, pt_plan_request *r)
{
    pt_plan_request_init(r, ptsp_conf.default_mode);
    r->plan.schedule = ptsp_conf.default_schedule;
    r->plan.recompute = ptsp_conf.default_recompute;
    r->plan.precision = ptsp_conf.default_precision;
    pt_plan_limits lim = pt_spank_conf_limits(&ptsp_conf);
    const pt_plan_limits *lp = ptsp_conf_bad ? NULL : &lim;
    /* the options given (validated by their callbacks) */
    if (opt_mode_given) r->plan.mode = opt_mode, r->pinned |= PT_PIN_MODE;
    if (opt_tp) r->plan.tp = opt_tp, r->pinned |= PT_PIN_TP;
    if (opt_tp_depth) r->plan.tp_depth = opt_tp_depth, r->pinned |= PT_PIN_TP_DEPTH;
    if (opt_sp) r->plan.sp = opt_sp, r->pinned |= PT_PIN_SP;
    if (opt_model[0] && pt_plan_request_set(r, NULL, "model", "--ptrain-model", opt_model) < 0)
        return pt_fail(PT_EINVAL, "ptrain: %s", pt_errmsg());
    if (opt_batch) r->global_batch = opt_batch, r->pinned |= PT_PIN_BATCH;
    for (int i = 0; i < N_PIPE; i++) {
        if (!opt_pipe_given[i]) continue;
        char what[64];
        snprintf(what, sizeof what, "--ptrain-%s", pipe_opts[i].key);
        if (pt_plan_request_set(r, lp, pipe_opts[i].key, what, opt_pipe[i]) < 0)
            return pt_fail(PT_EINVAL, "ptrain: %s", pt_errmsg());
    }
    /* the job's PTRAIN_* variables for the rest */
    if (pt_plan_request_env(r, lp, get, arg) < 0) return pt_fail(PT_EINVAL, "ptrain: %s", pt_errmsg());
    if (r->plan.mode == PT_MODE_OFF) return 0;
    if (ptsp_conf_bad)
        return pt_fail(PT_EINVAL, "ptrain: cluster configuration is invalid, refusing "
                       "--ptrain-mode=%s: %s", pt_mode_name(r->plan.mode), ptsp_conf_err);
    if (pt_plan_request_check(&r->plan, &lim) < 0)
        return pt_fail(PT_EINVAL, "ptrain: %s", pt_errmsg());
    return 0;
}

int ptsp_resolve_request(ptsp_env_fn get, void *arg, pt_plan_request *r)
{
    if (!ptsp_is_ptrain_step(get, arg)) { /* its PTRAIN_* are not read: mode off, the defaults */
        pt_plan_request_init(r, PT_MODE_OFF);
        return 0;
    }
    return resolve_request(get, arg, r);
}

static struct spank_option options[] = {
    {"ptrain-mode", "MODE",
     "ptrain: parallel layout to plan: auto, 1d, 2d, 2.5d, 3d, off. "
     "Default: $PTRAIN_MODE, else the cluster's default_mode.",
     1, 0, cb_mode},
    {"ptrain-tp", "N",
     "ptrain: pin the tensor-parallel size (must divide the tasks on every node; "
     "2d: q*q, 2.5d: depth*q*q, 3d: l*l*l). Default: $PTRAIN_TP, else chosen by the planner.",
     1, 0, cb_tp},
    {"ptrain-tp-depth", "D",
     "ptrain: 2.5d only: pin the depth d of the d x q x q tensor grid. "
     "Default: $PTRAIN_TP_DEPTH, else chosen by the planner.",
     1, 0, cb_tp_depth},
    {"ptrain-sp", "N",
     "ptrain: sequence-parallel size (must divide the tasks on every node; implies tp=1). "
     "Default: $PTRAIN_SP, else 1.",
     1, 0, cb_sp},
    {"ptrain-pp", "N",
     "ptrain: pipeline-parallel size (divides the task count; <= the cluster's max_pp). "
     "Default: $PTRAIN_PP, else 1.",
     1, 0, cb_pipe},
    {"ptrain-microbatches", "M",
     "ptrain: microbatches per step (divides each data-parallel rank's batch). "
     "Default: $PTRAIN_MICROBATCHES, else 1.",
     1, 1, cb_pipe},
    {"ptrain-schedule", "S",
     "ptrain: pipeline schedule: gpipe, 1f1b, interleaved. "
     "Default: $PTRAIN_SCHEDULE, else the cluster's default_schedule.",
     1, 2, cb_pipe},
    {"ptrain-virtual-stages", "V",
     "ptrain: model chunks per pipeline rank (interleaved only). "
     "Default: $PTRAIN_VIRTUAL_STAGES, else 1.",
     1, 3, cb_pipe},
    {"ptrain-pp-split", "N,N,...",
     "ptrain: blocks per pipeline stage, pp*virtual_stages entries, or even. "
     "Default: $PTRAIN_PP_SPLIT, else even.",
     1, 4, cb_pipe},
    {"ptrain-zero", "K",
     "ptrain: ZeRO stage 0-3 over the data-parallel ranks. "
     "Default: $PTRAIN_ZERO, else the cluster's default_zero.",
     1, 5, cb_pipe},
    {"ptrain-recompute", "R",
     "ptrain: activation recomputation: none, block, attention. "
     "Default: $PTRAIN_RECOMPUTE, else the cluster's default_recompute.",
     1, 6, cb_pipe},
    {"ptrain-precision", "P",
     "ptrain: training precision: fp32, bf16 (bf16 activations and weight copies, fp32 master weights, "
     "gradients and AdamW). Default: $PTRAIN_PRECISION, else the cluster's default_precision.",
     1, 7, cb_pipe},
    {"ptrain-model", "NAME|L,H,C,T,V",
     "ptrain: the model the plan is made for: a ptrain-run preset (test, tiny, small, "
     "gpt2-124M) or L,H,C,T,V; injected as PTRAIN_MODEL. Default: $PTRAIN_MODEL, else tiny.",
     1, 0, cb_model},
    {"ptrain-batch", "N",
     "ptrain: global batch in sequences per step the plan is made for; injected as "
     "PTRAIN_BATCH. Default: $PTRAIN_BATCH, else 8.",
     1, 0, cb_batch},
    {"ptrain-explain", NULL,
     "ptrain: print the chosen plan, the runners-up with predicted time and memory, and why "
     "(once, from rank 0's task).", 0, 0, cb_explain},
    {"ptrain-verbose", NULL, "ptrain: print the chosen plan (from rank 0's task).", 0, 0,
     cb_verbose},
    {"ptrain-energy", "off|report|plan|apply",
     "ptrain: energy: report (measure joules per step), plan (also plan each pipeline "
     "instruction's clock), apply (also set them: the task may set its own GPU's clocks); "
     "injected as PTRAIN_ENERGY, at most the cluster's energy level. Default: $PTRAIN_ENERGY.",
     1, 0, cb_energy},
};

/* The energy level of a ptrain step (ptsp_resolve_energy's contract). */
static int resolve_energy(ptsp_env_fn get, void *arg, int *level)
{
    char buf[64];
    *level = opt_energy;
    if (*level >= 0) return 0;
    int g = get(arg, "PTRAIN_ENERGY", buf, (int)sizeof buf);
    if (g < 0)
        return pt_fail(PT_EINVAL, "ptrain: PTRAIN_ENERGY in the job environment is longer than %d bytes; it is not a "
                       "valid value (valid: off, report, plan, apply)", (int)sizeof buf - 1);
    if (g && pt_spank_parse_energy_opt(&ptsp_conf, "PTRAIN_ENERGY", buf, level) < 0) return -1;
    return 0;
}

int ptsp_resolve_energy(ptsp_env_fn get, void *arg, int *level)
{
    *level = -1;
    return ptsp_is_ptrain_step(get, arg) ? resolve_energy(get, arg, level) : 0;
}

int ptsp_stray_check(ptsp_env_fn get, void *arg)
{
    if (ptsp_is_ptrain_step(get, arg)) return 0;
    pt_plan_request r;
    int level;
    if (resolve_request(get, arg, &r) < 0 || resolve_energy(get, arg, &level) < 0) return -1;
    return 0;
}

/* ---- slurm_spank_init ---------------------------------------------------- */
int ptsp_options_init(spank_t sp, int ac, char **av)
{
    pt_spank_conf_default(&ptsp_conf);
    ptsp_conf_bad = 0;
    ptsp_conf_err[0] = 0;
    for (int i = 0; i < ac && !ptsp_conf_bad; i++) {
        if (pt_spank_conf_arg(av[i], &ptsp_conf) < 0) {
            ptsp_conf_bad = 1;
            snprintf(ptsp_conf_err, sizeof ptsp_conf_err, "%s", pt_errmsg());
        }
    }
    if (ptsp_conf_bad) {
        /* Logged where an administrator looks (slurmd / slurmstepd log);
         * steps that ask for ptrain are refused with the same text. */
        spank_context_t ctx = spank_context();
        if (ctx == S_CTX_SLURMD || ctx == S_CTX_REMOTE) slurm_error("ptrain: %s", ptsp_conf_err);
        pt_spank_conf_default(&ptsp_conf);
    }
    for (size_t i = 0; i < sizeof options / sizeof options[0]; i++) {
        spank_err_t rc = spank_option_register(sp, &options[i]);
        if (rc != ESPANK_SUCCESS) {
            slurm_error("ptrain: cannot register --%s: %s", options[i].name, spank_strerror(rc));
            return -1;
        }
    }
    return 0;
}
