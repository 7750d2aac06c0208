/* ptrain.so: the SPANK plugin that plans a parallel training job and hands
 * the plan to every task.  See man/ptrain_spank.8 (options, plugstack
 * arguments, ptrain.conf) and man/ptrain-env.7 (the variables it sets);
 * the data flow is DESIGN.md's "Data flow of the main job".
 *
 *   srun / sbatch / salloc (local, allocator context)
 *       --ptrain-mode, --ptrain-tp, --ptrain-tp-depth, --ptrain-sp, the
 *       pipeline/ZeRO options (--ptrain-pp, --ptrain-microbatches,
 *       --ptrain-schedule, --ptrain-virtual-stages, --ptrain-pp-split,
 *       --ptrain-zero, --ptrain-recompute) and --ptrain-verbose are
 *       registered in slurm_spank_init; their
 *       callbacks validate values at once and init_post_opt checks the
 *       whole request (pt_plan_request_check), so a bad value makes srun
 *       exit before any allocation; local_user_init checks it against the
 *       step's tasks per node (pt_plan_auto), listing the sizes that fit.
 *   slurmstepd (remote context)
 *       user_init: resolve the request (option > environment > admin
 *       default_mode), read the step geometry and compute the plan with
 *       lib/plan (deterministic: every node computes the same one);
 *       task_init: per task, set PTRAIN_* plus RANK, WORLD_SIZE,
 *       LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT.
 *
 * Nothing here may crash slurmstepd: every failure is a slurm_error() line
 * and a -1 return.  Only the slurm_spank_* entry points and the plugin
 * identification symbols are exported (spank/ptrain_spank.map and
 * -fvisibility=hidden).
 */
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <slurm/spank.h>

#include "plan/plan.h"
#include "spank/spank_util.h"

#pragma GCC visibility push(default)
SPANK_PLUGIN(ptrain, 1)
#pragma GCC visibility pop
#define PT_EXPORT __attribute__((visibility("default")))

/* Step ids Slurm uses for steps that are not an srun launch (slurm.h:
 * SLURM_PENDING_STEP .. SLURM_BATCH_SCRIPT); the plugin injects nothing
 * into them. */
#define PT_STEP_EXTERN 0xfffffffcu
#define PT_STEP_BATCH 0xfffffffbu
#define PT_STEP_INTERACTIVE 0xfffffffau

#define MAX_NODES 65536

/* ---- per-process state (srun, sbatch or one slurmstepd) ---------------- */
static pt_spank_conf conf;
static int conf_bad;            /* plugstack arguments or ptrain.conf invalid */
static pt_error conf_err;

static int opt_mode_given;      /* --ptrain-mode seen (locally or propagated) */
static pt_mode opt_mode;
static int opt_tp;              /* --ptrain-tp, 0 = not given */
static int opt_tp_depth;        /* --ptrain-tp-depth, 0 = not given */
static int opt_sp;              /* --ptrain-sp, 0 = not given */
static int opt_verbose;

/* The pipeline/ZeRO options: their text as given (validated by the
 * callback), read over the PTRAIN_* variable and the admin default in
 * resolve_request.  Index = the spank_option's val. */
static const struct { const char *key, *var; } pipe_opts[] = {
    {"pp", "PTRAIN_PP"},
    {"microbatches", "PTRAIN_MICROBATCHES"},
    {"schedule", "PTRAIN_SCHEDULE"},
    {"virtual-stages", "PTRAIN_VIRTUAL_STAGES"},
    {"pp-split", "PTRAIN_PP_SPLIT"},
    {"zero", "PTRAIN_ZERO"},
    {"recompute", "PTRAIN_CKPT_ACT"},
};
#define N_PIPE ((int)(sizeof pipe_opts / sizeof pipe_opts[0]))
static char opt_pipe[N_PIPE][400];
static int opt_pipe_given[N_PIPE];
static int req_zero_given;      /* the request's zero came from the user, not default_zero */

enum { PLAN_NONE = 0, PLAN_SKIP, PLAN_READY, PLAN_ERROR };
static int plan_state = PLAN_NONE;
static pt_error plan_err;
static pt_plan plan;
static int node_tasks[MAX_NODES];
static pt_job_geometry geo;
static int node_id, local_tasks;
static char master_addr[256];
static int master_port;
static char tpn_text[256];
static int verbose;

/* ---- options ------------------------------------------------------------ */
/* Parse a requested mode / group size against the administrator's settings
 * (spank_util.c; the settings are ignored while the configuration is bad,
 * which resolve_request refuses on its own). */
static int parse_mode_text(const char *what, const char *text, pt_mode *out, pt_error *err)
{
    return pt_spank_parse_mode_opt(&conf, what, text, out, err);
}

static int parse_size_text(const char *what, const char *text, int is_tp, int *out, pt_error *err)
{
    return pt_spank_parse_size_opt(conf_bad ? NULL : &conf, what, text, is_tp, out, err);
}

static int cb_mode(int val, const char *optarg, int remote)
{
    (void)val;
    (void)remote;
    pt_error err;
    pt_mode m = PT_MODE_OFF;
    if (parse_mode_text("--ptrain-mode", optarg, &m, &err) < 0) {
        slurm_error("%s", err.text);
        return -1;
    }
    opt_mode = m;
    opt_mode_given = 1;
    return 0;
}

static int cb_size(const char *what, const char *optarg, int is_tp, int *out)
{
    pt_error err;
    if (parse_size_text(what, optarg, is_tp, out, &err) < 0) {
        slurm_error("%s", err.text);
        return -1;
    }
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
    pt_error err;
    if (pt_spank_parse_pipe_opt(conf_bad ? NULL : &conf, pipe_opts[val].key, what, optarg,
                                &scratch, &err) < 0) {
        slurm_error("%s", err.text);
        return -1;
    }
    snprintf(opt_pipe[val], sizeof opt_pipe[val], "%s", optarg ? optarg : "");
    opt_pipe_given[val] = 1;
    return 0;
}

static int cb_verbose(int val, const char *optarg, int remote)
{
    (void)val;
    (void)optarg;
    (void)remote;
    opt_verbose = 1;
    return 0;
}

/* A variable of the environment the request is read from: srun's own
 * (local) or the job's (remote).  Fills buf and returns 1 when set and
 * not empty. */
typedef int (*env_get_fn)(void *arg, const char *name, char *buf, int len);

static int local_getenv(void *arg, const char *name, char *buf, int len)
{
    (void)arg;
    const char *v = getenv(name);
    if (!v || !*v) return 0;
    snprintf(buf, (size_t)len, "%s", v);
    return 1;
}

static pt_plan_limits conf_limits(void)
{
    pt_plan_limits lim = {.max_tp = conf.max_tp, .modes = conf.allowed_modes,
                          .max_pp = conf.max_pp, .max_zero = conf.max_zero,
                          .schedules = conf.allowed_schedules};
    return lim;
}

/* pt_plan_auto, then the administrator's default_zero where the user
 * asked for no ZeRO stage and the plan has data-parallel ranks to shard
 * over (a default must not make single-replica steps fail). */
static int plan_request(const pt_job_geometry *g, const pt_plan *req, pt_plan *out, pt_error *err)
{
    pt_plan_limits lim = conf_limits();
    if (pt_plan_auto(g, &lim, req, out, err) < 0) return -1;
    if (!req_zero_given && out->mode != PT_MODE_OFF && (long long)out->dp * out->sp > 1)
        out->zero = conf.default_zero;
    return 0;
}

/* The user's request: each option, else its PTRAIN_* variable, else the
 * administrator's default_mode (sizes 0 = let the planner choose).  Then
 * the checks that need no geometry.  -1 with a one-line error. */
static int resolve_request(env_get_fn get, void *arg, pt_plan *req, pt_error *err)
{
    char buf[256];
    pt_plan_default(req);
    req->mode = conf.default_mode;
    req->tp = opt_tp;
    req->tp_depth = opt_tp_depth;
    req->sp = opt_sp;
    if (opt_mode_given) req->mode = opt_mode;
    else if (get(arg, "PTRAIN_MODE", buf, sizeof buf) &&
             parse_mode_text("PTRAIN_MODE", buf, &req->mode, err) < 0)
        return -1;
    if (!req->tp && get(arg, "PTRAIN_TP", buf, sizeof buf) &&
        parse_size_text("PTRAIN_TP", buf, 1, &req->tp, err) < 0)
        return -1;
    if (!req->tp_depth && get(arg, "PTRAIN_TP_DEPTH", buf, sizeof buf) &&
        parse_size_text("PTRAIN_TP_DEPTH", buf, 0, &req->tp_depth, err) < 0)
        return -1;
    if (!req->sp && get(arg, "PTRAIN_SP", buf, sizeof buf) &&
        parse_size_text("PTRAIN_SP", buf, 0, &req->sp, err) < 0)
        return -1;
    /* pipeline/ZeRO: option > PTRAIN_* > the administrator's default */
    req->schedule = conf.default_schedule;
    req->ckpt_act = conf.default_recompute;
    req->zero = 0;
    req_zero_given = 0;
    for (int i = 0; i < N_PIPE; i++) {
        char what[64];
        const char *text = NULL;
        if (opt_pipe_given[i]) {
            snprintf(what, sizeof what, "--ptrain-%s", pipe_opts[i].key);
            text = opt_pipe[i];
        } else if (get(arg, pipe_opts[i].var, buf, sizeof buf)) {
            snprintf(what, sizeof what, "%s", pipe_opts[i].var);
            text = buf;
        }
        if (!text) continue;
        if (pt_spank_parse_pipe_opt(conf_bad ? NULL : &conf, pipe_opts[i].key, what, text, req,
                                    err) < 0)
            return -1;
        if (strcmp(pipe_opts[i].key, "zero") == 0) req_zero_given = 1;
    }
    if (req->mode == PT_MODE_OFF) return 0;
    if (conf_bad)
        return pt_errprintf(err, "ptrain: cluster configuration is invalid, refusing "
                            "--ptrain-mode=%s: %s", pt_mode_name(req->mode), conf_err.text);
    pt_plan_limits lim = conf_limits();
    pt_error inner;
    if (pt_plan_request_check(req, &lim, &inner) < 0)
        return pt_errprintf(err, "ptrain: %s", inner.text);
    return 0;
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
     "ptrain: activation checkpointing: none, block, attention. "
     "Default: $PTRAIN_CKPT_ACT, else the cluster's default_recompute.",
     1, 6, cb_pipe},
    {"ptrain-verbose", NULL, "ptrain: print the chosen plan (from rank 0's task).", 0, 0,
     cb_verbose},
};

/* ---- entry points ------------------------------------------------------- */
PT_EXPORT int slurm_spank_init(spank_t sp, int ac, char **av)
{
    pt_spank_conf_default(&conf);
    conf_bad = 0;
    conf_err.text[0] = 0;
    for (int i = 0; i < ac && !conf_bad; i++) {
        if (pt_spank_conf_arg(av[i], &conf, &conf_err) < 0) conf_bad = 1;
    }
    if (conf_bad) {
        /* Logged where an administrator looks (slurmd / slurmstepd log);
         * steps that ask for ptrain are refused with the same text. */
        spank_context_t ctx = spank_context();
        if (ctx == S_CTX_SLURMD || ctx == S_CTX_REMOTE) slurm_error("ptrain: %s", conf_err.text);
        pt_spank_conf_default(&conf);
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

/* Resolve the request in srun/sbatch/salloc: option > environment >
 * default_mode, and refuse bad values before anything is allocated. */
PT_EXPORT int slurm_spank_init_post_opt(spank_t sp, int ac, char **av)
{
    (void)sp;
    (void)ac;
    (void)av;
    spank_context_t ctx = spank_context();
    if (ctx != S_CTX_LOCAL && ctx != S_CTX_ALLOCATOR) return 0;
    pt_plan req;
    pt_error err;
    if (resolve_request(local_getenv, NULL, &req, &err) < 0) {
        slurm_error("%s", err.text);
        return -1;
    }
    return 0;
}

/* srun, after the allocation: check the request against the step's real
 * geometry, so that e.g. a --ptrain-tp that does not divide the tasks per
 * node fails here, before any task starts, with the list of sizes that
 * fit.  srun exports the step's SLURM_TASKS_PER_NODE into its own
 * environment; when it is missing or disagrees with the step, the check
 * is left to slurmstepd. */
PT_EXPORT int slurm_spank_local_user_init(spank_t sp, int ac, char **av)
{
    (void)ac;
    (void)av;
    if (spank_context() != S_CTX_LOCAL) return 0;
    pt_plan req, out;
    pt_error err;
    if (resolve_request(local_getenv, NULL, &req, &err) < 0)
        return 0; /* refused in init_post_opt already */
    if (req.mode == PT_MODE_OFF) return 0;
    uint32_t nnodes = 0, ntasks = 0;
    const char *tpn = getenv("SLURM_STEP_TASKS_PER_NODE");
    if (!tpn) tpn = getenv("SLURM_TASKS_PER_NODE");
    if (spank_get_item(sp, S_JOB_NNODES, &nnodes) != ESPANK_SUCCESS ||
        spank_get_item(sp, S_JOB_TOTAL_TASK_COUNT, &ntasks) != ESPANK_SUCCESS || !tpn ||
        nnodes == 0 || nnodes > MAX_NODES)
        return 0;
    int n = 0;
    if (pt_spank_parse_tasks_per_node(tpn, node_tasks, MAX_NODES, &n, NULL) < 0 ||
        (uint32_t)n != nnodes)
        return 0;
    long long sum = 0;
    for (int i = 0; i < n; i++) sum += node_tasks[i];
    if (sum != ntasks) return 0;
    pt_job_geometry g = {n, (int)ntasks, node_tasks};
    if (plan_request(&g, &req, &out, &err) < 0) {
        slurm_error("ptrain: %s", err.text);
        return -1;
    }
    return 0;
}

/* Read one variable of the job's environment into buf ("" if unset). */
static int job_getenv(spank_t sp, const char *name, char *buf, int len)
{
    buf[0] = '\0';
    return spank_getenv(sp, name, buf, len) == ESPANK_SUCCESS && buf[0];
}

static int job_getenv_cb(void *arg, const char *name, char *buf, int len)
{
    return job_getenv((spank_t)arg, name, buf, len);
}

static int plan_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int plan_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pt_verrprintf(&plan_err, fmt, ap);
    va_end(ap);
    plan_state = PLAN_ERROR;
    return -1;
}

static int is_mpi_daemon(spank_t sp)
{
    int argc = 0;
    char **argv = NULL;
    if (spank_get_item(sp, S_JOB_ARGV, &argc, &argv) != ESPANK_SUCCESS || argc < 1 || !argv ||
        !argv[0])
        return 0;
    const char *base = strrchr(argv[0], '/');
    base = base ? base + 1 : argv[0];
    return strcmp(base, "orted") == 0 || strcmp(base, "prted") == 0;
}

/* Compute this step's plan once per slurmstepd (remote context). */
static int compute_plan(spank_t sp)
{
    if (plan_state != PLAN_NONE) return plan_state == PLAN_ERROR ? -1 : 0;
    uint32_t step_id = 0, job_id = 0, nnodes = 0, nodeid = 0, ntasks = 0, nlocal = 0;
    if (spank_get_item(sp, S_JOB_STEPID, &step_id) != ESPANK_SUCCESS ||
        spank_get_item(sp, S_JOB_ID, &job_id) != ESPANK_SUCCESS)
        return plan_fail("ptrain: cannot read the job and step id from Slurm");
    if (step_id == PT_STEP_BATCH || step_id == PT_STEP_EXTERN || step_id == PT_STEP_INTERACTIVE ||
        spank_get_item(sp, S_JOB_NNODES, &nnodes) != ESPANK_SUCCESS || nnodes == 0) {
        plan_state = PLAN_SKIP; /* the batch script's own step: nothing to plan */
        return 0;
    }

    char buf[4096];
    pt_error err;
    pt_plan req;
    int bad_request = resolve_request(job_getenv_cb, sp, &req, &err) < 0;
    verbose = opt_verbose || (job_getenv(sp, "PTRAIN_VERBOSE", buf, sizeof buf) &&
                              strcmp(buf, "0") != 0);
    if (bad_request) return plan_fail("%s", err.text);
    if (req.mode == PT_MODE_OFF) {
        plan_state = PLAN_SKIP;
        return 0;
    }
    if (is_mpi_daemon(sp)) {
        /* mpirun inside an allocation launches one orted per node through
         * srun: its ranks are not this step's tasks, so inject nothing. */
        slurm_debug("ptrain: step runs an MPI daemon (orted/prted): no plan injected");
        plan_state = PLAN_SKIP;
        return 0;
    }

    if (spank_get_item(sp, S_JOB_NODEID, &nodeid) != ESPANK_SUCCESS ||
        spank_get_item(sp, S_JOB_TOTAL_TASK_COUNT, &ntasks) != ESPANK_SUCCESS ||
        spank_get_item(sp, S_JOB_LOCAL_TASK_COUNT, &nlocal) != ESPANK_SUCCESS)
        return plan_fail("ptrain: cannot read the step geometry from Slurm");
    if (nnodes > MAX_NODES || ntasks > (1u << 20) || nodeid >= nnodes)
        return plan_fail("ptrain: step geometry out of range (nodes=%u tasks=%u node=%u)", nnodes,
                         ntasks, nodeid);
    if (!job_getenv(sp, "SLURM_STEP_TASKS_PER_NODE", tpn_text, sizeof tpn_text) &&
        !job_getenv(sp, "SLURM_TASKS_PER_NODE", tpn_text, sizeof tpn_text))
        return plan_fail("ptrain: neither SLURM_STEP_TASKS_PER_NODE nor SLURM_TASKS_PER_NODE is "
                         "set: cannot place ranks");
    int n = 0;
    if (pt_spank_parse_tasks_per_node(tpn_text, node_tasks, MAX_NODES, &n, &err) < 0)
        return plan_fail("ptrain: %s", err.text);
    long long sum = 0;
    for (int i = 0; i < n; i++) sum += node_tasks[i];
    if ((uint32_t)n != nnodes || sum != ntasks || (uint32_t)node_tasks[nodeid] != nlocal)
        return plan_fail("ptrain: tasks per node '%s' disagree with the step (%u nodes, %u tasks, "
                         "%u on node %u)", tpn_text, nnodes, ntasks, nlocal, nodeid);
    geo.nnodes = (int)nnodes;
    geo.ntasks = (int)ntasks;
    geo.tasks_per_node = node_tasks;
    node_id = (int)nodeid;
    local_tasks = (int)nlocal;

    if (plan_request(&geo, &req, &plan, &err) < 0)
        return plan_fail("ptrain: %s", err.text);

    if (!job_getenv(sp, "SLURM_STEP_NODELIST", buf, sizeof buf) &&
        !job_getenv(sp, "SLURM_JOB_NODELIST", buf, sizeof buf) &&
        !job_getenv(sp, "SLURM_NODELIST", buf, sizeof buf))
        return plan_fail("ptrain: no SLURM_STEP_NODELIST / SLURM_JOB_NODELIST in the job "
                         "environment: cannot name MASTER_ADDR");
    if (pt_spank_first_host(buf, master_addr, sizeof master_addr, &err) < 0)
        return plan_fail("ptrain: %s", err.text);
    master_port = pt_spank_master_port(job_id, step_id, conf.master_port_base,
                                       conf.master_port_count);
    plan_state = plan.mode == PT_MODE_OFF ? PLAN_SKIP : PLAN_READY;
    return 0;
}

PT_EXPORT int slurm_spank_user_init(spank_t sp, int ac, char **av)
{
    (void)ac;
    (void)av;
    if (!spank_remote(sp)) return 0;
    if (compute_plan(sp) < 0) {
        /* This text only reaches the slurmd log; task_init repeats it to
         * the user's terminal. */
        /* Errors of remote user_init do not reach srun and failing here
         * would not fail the step visibly: log for the administrator and
         * raise the same error from task_init, which the user sees and
         * which makes the tasks exit 1 (plugin loaded as `required`). */
        slurm_info("%s", plan_err.text);
    }
    return 0;
}

static int set_task_env(const char *name, const char *value, void *arg)
{
    spank_t sp = arg;
    spank_err_t rc = spank_setenv(sp, name, value, 1);
    if (rc != ESPANK_SUCCESS) {
        slurm_error("ptrain: cannot set %s=%s: %s", name, value, spank_strerror(rc));
        return -1;
    }
    return 0;
}

static int set_task_int(spank_t sp, const char *name, int v)
{
    char txt[32];
    snprintf(txt, sizeof txt, "%d", v);
    return set_task_env(name, txt, sp);
}

PT_EXPORT int slurm_spank_task_init(spank_t sp, int ac, char **av)
{
    (void)ac;
    (void)av;
    if (!spank_remote(sp)) return 0;
    if (compute_plan(sp) < 0) {
        slurm_error("%s", plan_err.text);
        return -1;
    }
    if (plan_state != PLAN_READY) return 0;
    int local = -1;
    if (spank_get_item(sp, S_TASK_ID, &local) != ESPANK_SUCCESS || local < 0 ||
        local >= local_tasks) {
        slurm_error("ptrain: cannot read this task's local id (got %d of %d)", local, local_tasks);
        return -1;
    }
    int rank = pt_plan_rank(&geo, node_id, local);
    if (rank < 0) {
        slurm_error("ptrain: no rank for task %d on node %d", local, node_id);
        return -1;
    }
    if (pt_plan_export(&plan, set_task_env, sp) != 0 ||
        set_task_int(sp, "RANK", rank) != 0 ||
        set_task_int(sp, "WORLD_SIZE", geo.ntasks) != 0 ||
        set_task_int(sp, "LOCAL_RANK", local) != 0 ||
        set_task_int(sp, "LOCAL_WORLD_SIZE", local_tasks) != 0 ||
        set_task_env("MASTER_ADDR", master_addr, sp) != 0 ||
        set_task_int(sp, "MASTER_PORT", master_port) != 0)
        return -1;
    if (verbose && rank == 0) {
        char line[640];
        pt_plan_summary(&plan, line, sizeof line);
        slurm_spank_log("ptrain: plan %s (nodes=%d tasks=%d tasks_per_node=%s master=%s:%d)",
                        line, geo.nnodes, geo.ntasks, tpn_text, master_addr, master_port);
    }
    return 0;
}
