/* SPDX-License-Identifier: MIT */
/* ptrain.so: the SPANK plugin that plans a parallel training job and hands
 * the plan to every task.  See man/ptrain_spank.8 (options, plugstack
 * arguments, ptrain.conf) and man/ptrain-env.7 (the variables it sets);
 * the data flow is DESIGN.md's "Data flow of the main job".
 *
 *   srun / sbatch / salloc (local, allocator context)
 *       --ptrain-mode, --ptrain-tp, --ptrain-tp-depth, --ptrain-sp, the
 *       pipeline/ZeRO options (--ptrain-pp, --ptrain-microbatches,
 *       --ptrain-schedule, --ptrain-virtual-stages, --ptrain-pp-split,
 *       --ptrain-zero, --ptrain-recompute, --ptrain-precision), the model and batch the plan is
 *       for (--ptrain-model, --ptrain-batch), --ptrain-explain and
 *       --ptrain-verbose are registered in slurm_spank_init; their
 *       callbacks validate values at once and init_post_opt checks the
 *       whole request (pt_plan_request_check), so a bad value makes srun
 *       exit before any allocation; local_user_init plans the step's
 *       geometry (pt_plan_resolve, memory left to the nodes) and refuses a
 *       request no plan satisfies, with the reason.
 *   slurmstepd (remote context)
 *       user_init: resolve the request (option > environment > admin
 *       default), load the node model (ptrain.conf `topology`, else hwloc),
 *       and plan with pt_plan_resolve (lib/plan/resolve.h: the pin checks,
 *       the default ZeRO stage, then pt_plan_search over the cost
 *       model): deterministic, every node computes the same plan from the
 *       same inputs;
 *       task_init: per task, set PTRAIN_* (PTRAIN_MODEL, PTRAIN_BATCH
 *       included) plus RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
 *       MASTER_ADDR, MASTER_PORT; bind the task mpibind-style (bind=auto:
 *       GPU, CPU set, HCA); global rank 0's task prints the warnings, the
 *       plan (--ptrain-verbose) and the explanation (--ptrain-explain);
 *       --ptrain-energy=off|report|plan|apply (within ptrain.conf's
 *       `energy`): PTRAIN_ENERGY and the allowed clock ranges for
 *       ptrain-run; under apply, task_post_fork (slurmstepd, root) lifts
 *       NVML's application-clock restriction of the task's own GPU (NVML is
 *       dlopen'ed, never linked) and task_exit resets its clocks and puts
 *       the restriction back.
 *
 * Nothing here may crash slurmstepd: every failure is a slurm_error() line
 * and a -1 return.  Only the slurm_spank_* entry points and the plugin
 * identification symbols are exported (spank/ptrain_spank.map and
 * -fvisibility=hidden).
 */
#define _GNU_SOURCE /* sched_getaffinity */
#include <hwloc.h>
#include <limits.h>
#include <sched.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <slurm/spank.h>

#include "core/core.h"
#include "plan/cost.h"
#include "plan/plan.h"
#include "plan/planner.h"
#include "plan/resolve.h"
#include "plan/search.h"
#include "spank/spank_util.h"
#include "topo/topo.h"
#include "topo/topo_plan.h"

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
static char opt_model[64];      /* --ptrain-model text, "" = not given */
static int opt_batch;           /* --ptrain-batch, 0 = not given */
static int opt_explain;         /* --ptrain-explain */

/* --ptrain-energy (ptrain_spank(8), ENERGY): the level asked for, -1 none;
 * under apply, each local task's GPU whose application-clock restriction
 * this slurmstepd lifted (restored at the task's exit). */
static int opt_energy = -1;
static int req_energy = -1;       /* option > PTRAIN_ENERGY, within conf.energy */
static int energy_state;          /* 0 not resolved, 1 resolved, -1 refused (energy_err) */
static pt_error energy_err;
#define MAX_LOCAL 1024
static struct { char busid[32]; int was, lifted; } energy_gpu[MAX_LOCAL];

/* What the plan is made for when neither option nor variable says: the
 * defaults of ptrain-run's --model and --batch. */
#define DEFAULT_MODEL "tiny"
#define DEFAULT_BATCH 8

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
    {"precision", "PTRAIN_PRECISION"},
};
#define N_PIPE ((int)(sizeof pipe_opts / sizeof pipe_opts[0]))
static char opt_pipe[N_PIPE][400];
static int opt_pipe_given[N_PIPE];

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
static int verbose, explain;
static char req_model[64];      /* the model the plan is made for (PTRAIN_MODEL) */
static int req_batch;           /* the global batch (PTRAIN_BATCH) */
static pt_search_result search_res; /* the planner's result, for --ptrain-explain */
static char plan_notes[1024];   /* warnings for the user, lines joined by '\n' */
static pt_topo node_topo;       /* this node's model */
static int node_topo_state;     /* 0 not loaded, 1 loaded, -1 failed */
static char topo_source[320];   /* "cached model FILE", "hwloc" */
static int local_check;         /* planning in srun: memory is not judged there */

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

static int cb_model(int val, const char *optarg, int remote)
{
    (void)val;
    (void)remote;
    pt_error err;
    if (pt_spank_parse_model_opt("--ptrain-model", optarg, &err) < 0) {
        slurm_error("%s", err.text);
        return -1;
    }
    snprintf(opt_model, sizeof opt_model, "%s", optarg);
    return 0;
}

static int cb_batch(int val, const char *optarg, int remote)
{
    (void)val;
    (void)remote;
    pt_error err;
    if (pt_spank_parse_batch_opt("--ptrain-batch", optarg, &opt_batch, &err) < 0) {
        slurm_error("%s", err.text);
        return -1;
    }
    return 0;
}

static int cb_explain(int val, const char *optarg, int remote)
{
    (void)val;
    (void)optarg;
    (void)remote;
    opt_explain = 1;
    return 0;
}

static int cb_energy(int val, const char *optarg, int remote)
{
    (void)val;
    (void)remote;
    pt_error err;
    if (pt_spank_parse_energy_opt(&conf, "--ptrain-energy", optarg, &opt_energy, &err) < 0) {
        slurm_error("%s", err.text);
        return -1;
    }
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
 * (local: pt_plan_getenv) or the job's (remote).  Fills buf and returns 1
 * when set and not empty, 0 when unset or empty, -1 when the value does
 * not fit buf (never truncated: a cut-off value could pass as another
 * valid one). */
typedef int (*env_get_fn)(void *arg, const char *name, char *buf, int len);

static pt_plan_limits conf_limits(void)
{
    pt_plan_limits lim;
    pt_plan_limits_default(&lim);
    lim.max_tp = conf.max_tp;
    lim.modes = conf.allowed_modes;
    lim.max_pp = conf.max_pp;
    lim.max_zero = conf.max_zero;
    lim.schedules = conf.allowed_schedules;
    lim.precisions = conf.allowed_precisions;
    lim.default_zero = conf.default_zero;
    lim.mixed = conf.mixed_nodes;
    return lim;
}

/* ---- the node model and the planner ------------------------------------ */
/* This node's model, loaded once per process: the administrator's cached
 * model (ptrain.conf `topology`, the output of ptrain-topo --probe --save)
 * when it loads, else hwloc's view of this node (no measurement).  Every
 * node reads the same file, so every node plans from the same inputs; the
 * hwloc fallback gives the same structure on identical nodes, and
 * ptrain-run's start-up agreement (every rank hashes the plan) stops a
 * job whose nodes disagree. */
static void load_node_model(void)
{
    if (node_topo_state) return;
    plan_notes[0] = '\0';
    int from;
    pt_error e;
    if (pt_topo_plan_load(conf.topology, "topology", PT_TOPO_LOAD_FALLBACK | PT_TOPO_LOAD_ESTIMATES | PT_TOPO_LOAD_WARN,
                          &node_topo, &from, plan_notes, sizeof plan_notes, &e) < 0)
        from = PT_TOPO_FROM_NONE; /* not with these flags: the estimates */
    node_topo_state = from == PT_TOPO_FROM_NONE ? -1 : 1;
    if (from == PT_TOPO_FROM_PATH) snprintf(topo_source, sizeof topo_source, "cached model %.290s", conf.topology);
    else if (from == PT_TOPO_FROM_HWLOC) snprintf(topo_source, sizeof topo_source, "hwloc");
    else snprintf(topo_source, sizeof topo_source, "defaults");
}

/* The cluster the planner sees: each node's model (ptrain.conf's
 * node_models for the nodes of its host lists, mixed nodes; every other
 * node this node's model: `topology`, else hwloc), their rates from
 * pt_topo_plan_hw (measured where the model holds a measurement, else
 * estimated) with ptrain.conf's gemm_gflops / gemm_gflops_bf16 / inter_node_gbps /
 * inter_node_lat_us over them (pt_plan_machine_build).  Without a model:
 * the estimates of a node of one NUMA node and no GPU.  nodelist (NULL:
 * unknown, every node the default) names the step's nodes in order. */
static int make_machine(const pt_job_geometry *g, const char *nodelist, pt_plan_machine *m, pt_error *err)
{
    int *kind_of = calloc((size_t)g->nnodes, sizeof(int));
    if (!kind_of) return pt_errprintf(err, "out of memory for %d nodes", g->nnodes);
    if (conf.n_node_models > 0 && nodelist && pt_spank_node_kinds(&conf, nodelist, g->nnodes, kind_of, err) < 0) {
        free(kind_of);
        return -1;
    }
    if (conf.n_node_models == 0 || !nodelist)
        for (int i = 0; i < g->nnodes; i++) kind_of[i] = -1;
    /* kinds: 0 the default model, then each node_models entry a node uses */
    pt_topo models[PT_SPANK_NODE_MODELS];
    const pt_topo *mp[PT_SPANK_NODE_MODELS + 1];
    const char *names[PT_SPANK_NODE_MODELS + 1];
    int kind_index[PT_SPANK_NODE_MODELS], nk = 1, rc = 0;
    mp[0] = node_topo_state > 0 ? &node_topo : NULL;
    names[0] = topo_source;
    for (int e = 0; e < PT_SPANK_NODE_MODELS; e++) kind_index[e] = -1;
    for (int i = 0; i < g->nnodes && rc == 0; i++) {
        const int e = kind_of[i];
        if (e < 0) {
            kind_of[i] = 0;
            continue;
        }
        if (kind_index[e] < 0) {
            if (pt_topo_load_file(&models[nk - 1], conf.node_model[e].path) != PT_OK) {
                rc = pt_errprintf(err, "node model %.300s of nodes %.200s (ptrain.conf node_models): %s",
                                  conf.node_model[e].path, conf.node_model[e].hosts, pt_errmsg());
                break;
            }
            kind_index[e] = nk;
            mp[nk] = &models[nk - 1];
            names[nk] = conf.node_model[e].path;
            nk++;
        }
        kind_of[i] = kind_index[e];
    }
    if (rc == 0) {
        pt_topo_hw_override ov = {.inter_gbps = conf.inter_node_gbps, .gemm_gflops = conf.gemm_gflops,
                                  .gemm_gflops_bf16 = conf.gemm_gflops_bf16};
        pt_error inner;
        if (pt_plan_machine_build(m, nk, mp, names, kind_of, g->tasks_per_node, g->nnodes, &ov, conf.inter_node_lat_us,
                                  &inner) < 0)
            rc = pt_errprintf(err, "node model (%s): %s", topo_source, inner.text);
    }
    for (int k = 1; k < nk; k++) pt_topo_free(&models[k - 1]);
    free(kind_of);
    if (rc == 0 && local_check) { /* srun's host judges no memory: the nodes do */
        m->cluster.hw.mem_bytes = 0;
        for (int k = 0; k < m->nkinds; k++) m->kinds[k].hw.mem_bytes = 0;
    }
    return rc;
}

/* Plan the step through the planning handle (lib/plan/planner.h) with the
 * administrator's limits (default_zero, mixed_nodes) on the step's
 * machine; its warnings (a pinned layout over a slower link) join
 * plan_notes.  No fallback to a fixed rule: a request the search cannot
 * satisfy is refused with its reason (a fallback would silently run a plan
 * the cost model says does not fit, or quietly drop the named layout). */
static int plan_request(const pt_job_geometry *g, const char *nodelist, const pt_plan_request *r, pt_plan *out,
                        pt_error *err)
{
    pt_plan_limits lim = conf_limits();
    pt_plan_machine m;
    if (make_machine(g, nodelist, &m, err) < 0) return -1;
    pt_planner *p = pt_planner_new(&m.cluster, &lim, err);
    int rc = -1;
    if (p && pt_planner_set_request(p, r, err) == 0 && pt_planner_run(p, err) == 0) {
        *out = *pt_planner_plan(p);
        search_res = *pt_planner_result(p);
        if (pt_planner_notes(p)[0]) pt_notef(plan_notes, sizeof plan_notes, "%s", pt_planner_notes(p));
        rc = 0;
    }
    pt_planner_free(p);
    pt_plan_machine_free(&m);
    return rc;
}

/* The user's request through lib/plan's one request builder: each option,
 * else its PTRAIN_* variable, else the administrator's default_mode,
 * default_schedule, default_recompute and default_precision (sizes not
 * pinned: the planner chooses).  Then the checks that need no geometry.  -1 with a one-line
 * error. */
static int resolve_request(env_get_fn get, void *arg, pt_plan_request *r, pt_error *err)
{
    pt_plan_request_init(r, conf.default_mode);
    r->plan.schedule = conf.default_schedule;
    r->plan.ckpt_act = conf.default_recompute;
    r->plan.precision = conf.default_precision;
    pt_plan_limits lim = conf_limits();
    const pt_plan_limits *lp = conf_bad ? NULL : &lim;
    /* the options given (validated by their callbacks) */
    if (opt_mode_given) r->plan.mode = opt_mode, r->pinned |= PT_PIN_MODE;
    if (opt_tp) r->plan.tp = opt_tp, r->pinned |= PT_PIN_TP;
    if (opt_tp_depth) r->plan.tp_depth = opt_tp_depth, r->pinned |= PT_PIN_TP_DEPTH;
    if (opt_sp) r->plan.sp = opt_sp, r->pinned |= PT_PIN_SP;
    pt_error inner;
    if (opt_model[0] && pt_plan_request_set(r, NULL, "model", "--ptrain-model", opt_model, &inner) < 0)
        return pt_errprintf(err, "ptrain: %s", inner.text);
    if (opt_batch) r->global_batch = opt_batch, r->pinned |= PT_PIN_BATCH;
    for (int i = 0; i < N_PIPE; i++) {
        if (!opt_pipe_given[i]) continue;
        char what[64];
        snprintf(what, sizeof what, "--ptrain-%s", pipe_opts[i].key);
        if (pt_plan_request_set(r, lp, pipe_opts[i].key, what, opt_pipe[i], &inner) < 0)
            return pt_errprintf(err, "ptrain: %s", inner.text);
    }
    /* the job's PTRAIN_* variables for the rest */
    if (pt_plan_request_env(r, lp, get, arg, &inner) < 0) return pt_errprintf(err, "ptrain: %s", inner.text);
    snprintf(req_model, sizeof req_model, "%s", r->model_name);
    req_batch = r->global_batch;
    if (r->plan.mode == PT_MODE_OFF) return 0;
    if (conf_bad)
        return pt_errprintf(err, "ptrain: cluster configuration is invalid, refusing "
                            "--ptrain-mode=%s: %s", pt_mode_name(r->plan.mode), conf_err.text);
    if (pt_plan_request_check(&r->plan, &lim, &inner) < 0)
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

/* The energy level of the request: --ptrain-energy, else PTRAIN_ENERGY,
 * within conf.energy; -1 when neither asks.  0 or -1 with one line. */
static int resolve_energy(env_get_fn get, void *arg, int *level, pt_error *err)
{
    char buf[64];
    *level = opt_energy;
    if (*level >= 0) return 0;
    int g = get(arg, "PTRAIN_ENERGY", buf, (int)sizeof buf);
    if (g < 0)
        return pt_errprintf(err, "ptrain: PTRAIN_ENERGY in the job environment is longer than %d bytes; it is not a "
                            "valid value (valid: off, report, plan, apply)", (int)sizeof buf - 1);
    if (g && pt_spank_parse_energy_opt(&conf, "PTRAIN_ENERGY", buf, level, err) < 0) return -1;
    return 0;
}

/* ---- entry points ------------------------------------------------------- */
static int pmix_fence_ring(spank_t sp);

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
    (void)ac;
    (void)av;
    spank_context_t ctx = spank_context();
    if (ctx == S_CTX_REMOTE) return pmix_fence_ring(sp);
    if (ctx != S_CTX_LOCAL && ctx != S_CTX_ALLOCATOR) return 0;
    pt_plan_request req;
    pt_error err;
    int level;
    if (resolve_request(pt_plan_getenv, NULL, &req, &err) < 0 || resolve_energy(pt_plan_getenv, NULL, &level, &err) < 0) {
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
    pt_plan_request req;
    pt_plan out;
    pt_error err;
    if (resolve_request(pt_plan_getenv, NULL, &req, &err) < 0)
        return 0; /* refused in init_post_opt already */
    if (req.plan.mode == PT_MODE_OFF) return 0;
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
    /* srun's host is not a compute node: its model stands in for the
     * layout checks, and memory is left to the nodes (local_check) */
    local_check = 1;
    load_node_model();
    const char *nodelist = getenv("SLURM_STEP_NODELIST");
    if (!nodelist) nodelist = getenv("SLURM_JOB_NODELIST");
    if (!nodelist) nodelist = getenv("SLURM_NODELIST");
    if (plan_request(&g, nodelist, &req, &out, &err) < 0) {
        slurm_error("ptrain: %s", err.text);
        return -1;
    }
    return 0;
}

/* Read one variable of the job's environment into buf ("" if unset). */
/* 1 and the value, 0 when unset or empty, -1 when longer than buf
 * (ESPANK_NOSPACE; env_get_fn's contract). */
static int job_getenv(spank_t sp, const char *name, char *buf, int len)
{
    buf[0] = '\0';
    spank_err_t rc = spank_getenv(sp, name, buf, len);
    if (rc == ESPANK_NOSPACE) {
        buf[0] = '\0';
        return -1;
    }
    return rc == ESPANK_SUCCESS && buf[0];
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

/* slurmstepd, before Slurm's mpi/pmix plugin reads the job environment
 * (spank_init runs before mpi_g_slurmstepd_prefork): a ptrain step's
 * PMIx fences all take Slurm's ring algorithm (SLURM_PMIX_FENCE=ring),
 * unless the job already chose one.  Why: with SLURM_PMIX_FENCE unset
 * ("auto"), Slurm 22.05 runs data-less fences (Open MPI's MPI_Init
 * barrier) on its tree algorithm, whose tree comes from reverse_tree_info
 * (src/common/reverse_tree.c) with TreeWidth fan-out; when TreeWidth
 * (default 50) exceeds the step's node count every node is a root with no
 * children, so the barrier completes on each node with its local tasks
 * only.  Ranks of the other nodes then leave MPI_Init while a slower rank
 * still waits in the modex fence, before its PML registered its receive
 * callbacks, and their first message kills it: Open MPI 4.1's TCP BTL
 * calls the null callback (SIGSEGV at address 0 in ompi_mpi_init ->
 * opal_progress -> mca_btl_tcp).  The ring fence needs every node's
 * contribution.  Sites can set PMIxCollFence=ring in mpi.conf for every
 * job; ptrain-env(7) and ptrain_spank(8) say so.  The batch script's own
 * step and MPI daemons' steps are left alone; errors in the request are
 * reported by task_init. */
static int pmix_fence_ring(spank_t sp)
{
    pt_plan_request req;
    pt_error err;
    char buf[64];
    if (resolve_request(job_getenv_cb, sp, &req, &err) < 0 || req.plan.mode == PT_MODE_OFF) return 0;
    if (is_mpi_daemon(sp) || job_getenv(sp, "SLURM_PMIX_FENCE", buf, sizeof buf)) return 0;
    spank_err_t rc = spank_setenv(sp, "SLURM_PMIX_FENCE", "ring", 0);
    if (rc != ESPANK_SUCCESS)
        slurm_error("ptrain: cannot set SLURM_PMIX_FENCE=ring for the step: %s (MPI start-up may crash; "
                    "set PMIxCollFence=ring in mpi.conf)", spank_strerror(rc));
    return 0;
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
    pt_plan_request req;
    int bad_request = resolve_request(job_getenv_cb, sp, &req, &err) < 0;
    verbose = opt_verbose || (job_getenv(sp, "PTRAIN_VERBOSE", buf, sizeof buf) > 0 &&
                              strcmp(buf, "0") != 0);
    explain = opt_explain || (job_getenv(sp, "PTRAIN_EXPLAIN", buf, sizeof buf) > 0 &&
                              strcmp(buf, "0") != 0);
    if (bad_request) return plan_fail("%s", err.text);
    if (req.plan.mode == PT_MODE_OFF) {
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
    if (job_getenv(sp, "SLURM_STEP_TASKS_PER_NODE", tpn_text, sizeof tpn_text) <= 0 &&
        job_getenv(sp, "SLURM_TASKS_PER_NODE", tpn_text, sizeof tpn_text) <= 0)
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

    load_node_model();
    if (job_getenv(sp, "SLURM_STEP_NODELIST", buf, sizeof buf) <= 0 &&
        job_getenv(sp, "SLURM_JOB_NODELIST", buf, sizeof buf) <= 0 &&
        job_getenv(sp, "SLURM_NODELIST", buf, sizeof buf) <= 0)
        return plan_fail("ptrain: no SLURM_STEP_NODELIST / SLURM_JOB_NODELIST in the job "
                         "environment: cannot name MASTER_ADDR");
    if (plan_request(&geo, buf, &req, &plan, &err) < 0)
        return plan_fail("ptrain: %s", err.text);
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

/* slurm_spank_log one line per line of text (it takes one line). */
static void log_lines(const char *text)
{
    const char *p = text;
    while (*p) {
        size_t n = strcspn(p, "\n");
        slurm_spank_log("%.*s", (int)n, p);
        p += n;
        if (*p) p++;
    }
}

/* mpibind-style binding of this task (runs in the task's own process,
 * before exec): its GPU (CUDA_VISIBLE_DEVICES, and PTRAIN_DEVICE=cuda for
 * ptrain-run's --device), a CPU set near it
 * (sched_setaffinity), its nearest HCA (UCX_NET_DEVICES, NCCL_IB_HCA);
 * PTRAIN_CPUS names the CPU set the task runs on and PTRAIN_BIND who set
 * it.  Settings the user or Slurm made already are left alone: a variable
 * already in the task's environment, a CPU mask smaller than the node's
 * allowed set (Slurm's task/affinity or cgroup binding). */
static int bind_task(spank_t sp, int local)
{
    pt_topo own;
    const pt_topo *bt = &node_topo;
    int own_loaded = 0;
    char buf[256];
    pt_error err;
    pt_spank_binding b;
    hwloc_topology_t m = NULL;
    /* this machine, whatever HWLOC_XMLFILE slurmd was started with */
    if (hwloc_topology_init(&m) == 0) {
        hwloc_topology_set_components(m, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "xml");
        hwloc_topology_set_components(m, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "synthetic");
        if (hwloc_topology_load(m) != 0) {
            hwloc_topology_destroy(m);
            m = NULL;
        }
    } else {
        m = NULL;
    }
    char allowed[1024] = "";
    cpu_set_t cur;
    CPU_ZERO(&cur);
    int have_cur = sched_getaffinity(0, sizeof cur, &cur) == 0;
    hwloc_bitmap_t curset = hwloc_bitmap_alloc(), node = hwloc_bitmap_alloc();
    int rc = 0;
    if (!curset || !node) goto out;
    if (have_cur)
        for (int i = 0; i < CPU_SETSIZE; i++)
            if (CPU_ISSET(i, &cur)) hwloc_bitmap_set(curset, (unsigned)i);
    if (m) hwloc_bitmap_copy(node, hwloc_topology_get_allowed_cpuset(m));
    else hwloc_bitmap_copy(node, curset);
    hwloc_bitmap_list_snprintf(allowed, sizeof allowed, node);
    /* this node's model: its node_models entry (mixed nodes), else the
     * default one the plan used */
    char host[256] = "";
    if (conf.n_node_models > 0 && (job_getenv(sp, "SLURMD_NODENAME", host, sizeof host) > 0 ||
                                   gethostname(host, sizeof host - 1) == 0)) {
        for (int e = 0; e < conf.n_node_models && !own_loaded; e++)
            if (pt_spank_hostlist_has(conf.node_model[e].hosts, host, NULL) == 1 &&
                pt_topo_load_file(&own, conf.node_model[e].path) == PT_OK)
                own_loaded = 1, bt = &own;
    }
    rc = pt_spank_bind_compute(bt, m, allowed, local, local_tasks, &b, &err);
    if (rc < 0) {
        slurm_error("ptrain: %s", err.text);
        rc = -1;
        goto out;
    }
    if (b.gpu >= 0 && !job_getenv(sp, "CUDA_VISIBLE_DEVICES", buf, sizeof buf)) {
        set_task_env("CUDA_DEVICE_ORDER", "PCI_BUS_ID", sp);
        set_task_int(sp, "CUDA_VISIBLE_DEVICES", b.gpu);
        /* the task has a GPU: ptrain-run trains there, or refuses (a build
         * without the CUDA backend) unless the user says --device cpu */
        if (!job_getenv(sp, "PTRAIN_DEVICE", buf, sizeof buf)) set_task_env("PTRAIN_DEVICE", "cuda", sp);
    }
    if (b.nic >= 0) {
        const char *hca = bt->nic[b.nic].name;
        char dev[64];
        snprintf(dev, sizeof dev, "%s:1", hca);
        if (!job_getenv(sp, "UCX_NET_DEVICES", buf, sizeof buf)) set_task_env("UCX_NET_DEVICES", dev, sp);
        if (!job_getenv(sp, "NCCL_IB_HCA", buf, sizeof buf)) set_task_env("NCCL_IB_HCA", hca, sp);
    }
    const char *who = "ptrain";
    char cpus[1024];
    if (have_cur && !hwloc_bitmap_isincluded(node, curset)) {
        who = "slurm"; /* already bound by Slurm: keep its mask */
        hwloc_bitmap_list_snprintf(cpus, sizeof cpus, curset);
    } else if (b.cpus[0]) {
        hwloc_bitmap_t want = hwloc_bitmap_alloc();
        cpu_set_t set;
        CPU_ZERO(&set);
        int id, ok = want && hwloc_bitmap_list_sscanf(want, b.cpus) == 0;
        if (ok) {
            hwloc_bitmap_foreach_begin(id, want)
                if (id < CPU_SETSIZE) CPU_SET(id, &set);
            hwloc_bitmap_foreach_end();
        }
        if (want) hwloc_bitmap_free(want);
        if (!ok || sched_setaffinity(0, sizeof set, &set) != 0) {
            slurm_error("ptrain: cannot bind task %d to CPUs %s (near %s)", local, b.cpus, b.where);
            rc = -1;
            goto out;
        }
        snprintf(cpus, sizeof cpus, "%s", b.cpus);
    } else {
        who = "none";
        hwloc_bitmap_list_snprintf(cpus, sizeof cpus, curset);
    }
    if (set_task_env("PTRAIN_CPUS", cpus, sp) != 0 || set_task_env("PTRAIN_BIND", who, sp) != 0)
        rc = -1;
out:
    if (own_loaded) pt_topo_free(&own);
    if (curset) hwloc_bitmap_free(curset);
    if (node) hwloc_bitmap_free(node);
    if (m) hwloc_topology_destroy(m);
    return rc;
}

/* ---- energy (--ptrain-energy) ----------------------------------------- */
/* The step's energy level, once per slurmstepd: -1 with energy_err when
 * the request is refused; req_energy -1 when none is asked or the step
 * runs no tasks of ours (the batch script's step, MPI daemons). */
static int energy_resolve_remote(spank_t sp)
{
    if (energy_state) return energy_state < 0 ? -1 : 0;
    energy_state = 1;
    req_energy = -1;
    uint32_t step_id = 0;
    if (spank_get_item(sp, S_JOB_STEPID, &step_id) != ESPANK_SUCCESS || step_id == PT_STEP_BATCH ||
        step_id == PT_STEP_EXTERN || step_id == PT_STEP_INTERACTIVE || is_mpi_daemon(sp))
        return 0;
    if (resolve_energy(job_getenv_cb, sp, &req_energy, &energy_err) < 0) {
        energy_state = -1;
        req_energy = -1;
        return -1;
    }
    return 0;
}

/* In the task: PTRAIN_ENERGY and the allowed clock ranges for ptrain-run. */
static int energy_task_env(spank_t sp)
{
    if (energy_resolve_remote(sp) < 0) {
        slurm_error("%s", energy_err.text);
        return -1;
    }
    if (req_energy < 0) return 0;
    char r[64];
    if (set_task_env("PTRAIN_ENERGY", pt_spank_energy_name(req_energy), sp) != 0) return -1;
    if (conf.gpu_clock_mhz[1] > 0) {
        snprintf(r, sizeof r, "%g-%g", conf.gpu_clock_mhz[0], conf.gpu_clock_mhz[1]);
        if (set_task_env("PTRAIN_ENERGY_GPU_MHZ", r, sp) != 0) return -1;
    }
    if (conf.cpu_clock_mhz[1] > 0) {
        snprintf(r, sizeof r, "%g-%g", conf.cpu_clock_mhz[0], conf.cpu_clock_mhz[1]);
        if (set_task_env("PTRAIN_ENERGY_CPU_MHZ", r, sp) != 0) return -1;
    }
    return 0;
}

/* slurmstepd (root), each task: under apply, lift the application-clock
 * restriction of the task's own GPU (its binding's: bind = auto, a GPU per
 * task, and no GPU chosen by the user or Slurm: no CUDA_VISIBLE_DEVICES,
 * SLURM_STEP_GPUS or SLURM_JOB_GPUS in the step) so that its process may set
 * that GPU's clocks.  Failures are
 * one line in the log; the task runs on (ptrain-run says it cannot set
 * clocks and runs at the default ones). */
PT_EXPORT int slurm_spank_task_post_fork(spank_t sp, int ac, char **av)
{
    (void)ac;
    (void)av;
    if (!spank_remote(sp) || energy_resolve_remote(sp) < 0 || req_energy != PT_SPANK_ENERGY_APPLY) return 0;
    int local = -1;
    if (spank_get_item(sp, S_TASK_ID, &local) != ESPANK_SUCCESS || local < 0 || local >= MAX_LOCAL) return 0;
    pt_error err;
    pt_spank_binding b;
    /* a GPU the user or Slurm's gres chose is left to the task by bind_task,
     * so the binding's GPU may not be the task's (another job's, even): lift
     * nothing then, the binding's index and theirs are not comparable */
    char cvd[256];
    static const char *const chosen[] = {"CUDA_VISIBLE_DEVICES", "SLURM_STEP_GPUS", "SLURM_JOB_GPUS"};
    for (size_t i = 0; i < sizeof chosen / sizeof *chosen; i++)
        if (job_getenv(sp, chosen[i], cvd, sizeof cvd)) {
            slurm_info("ptrain: --ptrain-energy=apply: task %d: its GPU was chosen outside ptrain (%s=%s), not by "
                       "ptrain's binding: GPU clocks stay restricted", local, chosen[i], cvd);
            return 0;
        }
    if (plan_state != PLAN_READY || conf.bind != PT_SPANK_BIND_AUTO || node_topo_state <= 0 ||
        pt_spank_bind_compute(&node_topo, NULL, NULL, local, local_tasks, &b, &err) < 0 || b.gpu < 0 ||
        b.gpu >= node_topo.ngpus) {
        slurm_info("ptrain: --ptrain-energy=apply: task %d has no GPU of its own (it needs a ptrain plan, bind = auto "
                   "and a GPU per task): GPU clocks stay restricted", local);
        return 0;
    }
    snprintf(energy_gpu[local].busid, sizeof energy_gpu[local].busid, "%s", node_topo.gpu[b.gpu].pci.busid);
    if (pt_spank_nvml_unrestrict(energy_gpu[local].busid, &energy_gpu[local].was, &err) < 0) {
        slurm_error("ptrain: --ptrain-energy=apply: task %d: %s; it runs at the default clocks", local, err.text);
        return 0;
    }
    energy_gpu[local].lifted = 1;
    slurm_info("ptrain: --ptrain-energy=apply: task %d may set the clocks of its GPU %s%s", local,
               energy_gpu[local].busid, energy_gpu[local].was ? "" : " (already unrestricted)");
    return 0;
}

/* Put back what task_post_fork changed for local task i. */
static void energy_restore(int i)
{
    if (i < 0 || i >= MAX_LOCAL || !energy_gpu[i].lifted) return;
    pt_error err;
    energy_gpu[i].lifted = 0;
    if (pt_spank_nvml_restore(energy_gpu[i].busid, energy_gpu[i].was, &err) < 0)
        slurm_error("ptrain: --ptrain-energy=apply: task %d: %s", i, err.text);
}

PT_EXPORT int slurm_spank_task_exit(spank_t sp, int ac, char **av)
{
    (void)ac;
    (void)av;
    int local = -1;
    if (spank_remote(sp) && spank_get_item(sp, S_TASK_ID, &local) == ESPANK_SUCCESS) energy_restore(local);
    return 0;
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
    if (energy_task_env(sp) != 0) return -1;
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
        set_task_env("PTRAIN_MODEL", req_model, sp) != 0 ||
        set_task_int(sp, "PTRAIN_BATCH", req_batch) != 0 ||
        set_task_int(sp, "RANK", rank) != 0 ||
        set_task_int(sp, "WORLD_SIZE", geo.ntasks) != 0 ||
        set_task_int(sp, "LOCAL_RANK", local) != 0 ||
        set_task_int(sp, "LOCAL_WORLD_SIZE", local_tasks) != 0 ||
        set_task_env("MASTER_ADDR", master_addr, sp) != 0 ||
        set_task_int(sp, "MASTER_PORT", master_port) != 0)
        return -1;
    if (conf.bind == PT_SPANK_BIND_AUTO && bind_task(sp, local) != 0) return -1;
    if (rank == 0) {
        /* Printed once, by the task of global rank 0: slurm_spank_log from
         * a task's context reaches the srun user's terminal (stderr). */
        if (plan_notes[0]) log_lines(plan_notes);
        if (verbose) {
            char line[640];
            pt_plan_summary(&plan, line, sizeof line);
            slurm_spank_log("ptrain: plan %s (nodes=%d tasks=%d tasks_per_node=%s master=%s:%d)",
                            line, geo.nnodes, geo.ntasks, tpn_text, master_addr, master_port);
        }
        if (explain) {
            pt_model_shape m;
            pt_error e;
            slurm_spank_log("ptrain: plan for model %s, global batch %d, on %d nodes (tasks per "
                            "node %s), node model: %s", req_model, req_batch, geo.nnodes,
                            tpn_text, topo_source);
            if (pt_model_shape_parse("PTRAIN_MODEL", req_model, &m, &e) == 0) {
                size_t need = pt_plan_explain(&search_res, &m, req_batch, NULL, 0);
                char *text = malloc(need + 1);
                if (text) {
                    pt_plan_explain(&search_res, &m, req_batch, text, need + 1);
                    log_lines(text);
                    free(text);
                }
            }
        }
    }
    return 0;
}

/* slurmstepd, at the end of the step (and srun, which loaded nothing): the
 * node model loaded for the plan and the binding is returned, so that a
 * plugin kept loaded across steps holds none of it. */
PT_EXPORT int slurm_spank_exit(spank_t sp, int ac, char **av)
{
    (void)sp;
    (void)ac;
    (void)av;
    for (int i = 0; i < MAX_LOCAL; i++) energy_restore(i); /* a task whose exit was not seen */
    if (node_topo_state > 0) pt_topo_free(&node_topo);
    memset(&node_topo, 0, sizeof node_topo);
    node_topo_state = 0;
    return 0;
}
