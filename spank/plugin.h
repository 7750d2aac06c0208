/* SPDX-License-Identifier: MIT */
/* Between the files of the ptrain SPANK plugin (ptrain.so), split by SPANK
 * context as NVIDIA pyxis does (pyxis_dispatch.c routing to pyxis_srun.c,
 * pyxis_slurmstepd.c, ...):
 *
 *   dispatch.c  the exported slurm_spank_* callbacks: each routes by
 *               spank_context() to one of the files below
 *   options.c   every context: the administrator's settings (plugstack
 *               arguments, ptrain.conf) and the --ptrain-* options, and the
 *               request they and PTRAIN_* make (option > variable > default)
 *   planning.c  srun and slurmstepd: this node's model and the planner
 *   srun.c      local / allocator context (srun, sbatch, salloc): refuse a
 *               bad request, and in srun one no plan satisfies, before any
 *               task starts
 *   stepd.c     remote context (slurmstepd): SLURM_PMIX_FENCE=ring, the
 *               step's plan (user_init)
 *   task.c      remote context, each task: PTRAIN_* and the rank variables,
 *               the binding, rank 0's plan and explanation
 *   energy.c    remote context: --ptrain-energy's variables and NVML's
 *               application-clock restriction of a task's GPU
 * The job-script context (prolog, epilog) has nothing to do.
 *
 * Nothing here is exported (-fvisibility=hidden and spank/ptrain_spank.map:
 * only slurm_spank_* and the plugin identifiers).  Nothing may crash
 * slurmstepd: every failure is a slurm_error() line and a -1 return.  Errors
 * between functions follow core/core.h's convention (a negative return, the
 * line in pt_errmsg()), as in spank_util.h; a message that must outlive the
 * callback that made it (a refused plan, raised again in task_init) is
 * copied into a buffer of its own.
 */
#ifndef PTRAIN_SPANK_PLUGIN_H
#define PTRAIN_SPANK_PLUGIN_H
#include <stdint.h>

#include <slurm/spank.h>

#include "core/core.h"
#include "contract/plan.h"
#include "plan/planner.h"
#include "plan/search.h"
#include "spank/spank_util.h"
#include "topo/topo.h"

/* Step ids Slurm uses for steps that are not an srun launch (slurm.h:
 * SLURM_PENDING_STEP .. SLURM_BATCH_SCRIPT); the plugin injects nothing
 * into them. */
#define PT_STEP_EXTERN 0xfffffffcu
#define PT_STEP_BATCH 0xfffffffbu
#define PT_STEP_INTERACTIVE 0xfffffffau

#define MAX_NODES 65536 /* nodes of a step */
#define MAX_LOCAL 1024  /* tasks of a step on one node */

/* ---- options.c ---------------------------------------------------------- */
extern pt_spank_conf ptsp_conf; /* the administrator's settings (defaults while invalid) */
extern int ptsp_conf_bad;       /* plugstack arguments or ptrain.conf invalid: ptsp_conf_err says why */
extern char ptsp_conf_err[PT_ERROR_LEN]; /* why, one line (pt_errmsg() of the refusal, kept) */
extern int ptsp_opt_verbose;    /* --ptrain-verbose given */
extern int ptsp_opt_explain;    /* --ptrain-explain given */

/* slurm_spank_init, every context: apply the plugstack arguments (ac, av;
 * an invalid one is logged in slurmd / slurmstepd and leaves the defaults,
 * steps that ask for ptrain are then refused with the same line) and
 * register the --ptrain-* options.  -1 when an option cannot be registered. */
int ptsp_options_init(spank_t sp, int ac, char **av);

/* A variable of the environment the request is read from: srun's own
 * (local: pt_plan_getenv) or the job's (remote).  Fills buf and returns 1
 * when set and not empty, 0 when unset or empty, -1 when the value does
 * not fit buf (never truncated: a cut-off value could pass as another
 * valid one). */
typedef int (*ptsp_env_fn)(void *arg, const char *name, char *buf, int len);

/* 1 when the step asks for ptrain: a --ptrain-* option was given (srun,
 * sbatch, or handed on to slurmstepd), else PTRAIN_MODE (get) is set and
 * not "off" (a value too long to be a mode counts: it is refused later),
 * else the administrator's default_mode is not off.  Only such a step's
 * PTRAIN_* variables are read: a variable left in the shell must not fail
 * every plain `srun hostname`. */
int ptsp_is_ptrain_step(ptsp_env_fn get, void *arg);

/* The user's request through lib/plan's one request builder: each option,
 * else its PTRAIN_* variable (get), else the administrator's default_mode,
 * default_schedule, default_recompute and default_precision (sizes not
 * pinned: the planner chooses).  Then the checks that need no geometry.
 * A step that is not a ptrain step (ptsp_is_ptrain_step) gets mode off and
 * the defaults, its variables unread.  -1 with a one-line error
 * ("ptrain: ..."). */
int ptsp_resolve_request(ptsp_env_fn get, void *arg, pt_plan_request *r);

/* The energy level of the request: --ptrain-energy, else PTRAIN_ENERGY,
 * within ptsp_conf.energy; -1 when neither asks or the step is not a
 * ptrain step.  0 or -1 with one line. */
int ptsp_resolve_energy(ptsp_env_fn get, void *arg, int *level);

/* For a step that is not a ptrain step: -1 with the first of its PTRAIN_*
 * variables that a ptrain step would refuse in pt_errmsg() ("ptrain: ..."),
 * for a warning; 0 when there is none, or for a ptrain step. */
int ptsp_stray_check(ptsp_env_fn get, void *arg);

/* ---- planning.c --------------------------------------------------------- */
/* This process's node model and the planner's last result. */
struct ptsp_node {
    pt_topo topo;              /* this node's model */
    int state;                 /* 0 not loaded, 1 loaded, -1 failed */
    char source[320];          /* "cached model FILE", "hwloc", "defaults" */
    char notes[1024];          /* warnings for the user, lines joined by '\n' */
    pt_search_result result;   /* the planner's result, for --ptrain-explain */
    int local_check;           /* planning in srun: memory is not judged there */
};
extern struct ptsp_node ptsp_node;

/* Load ptsp_node's model once per process: ptrain.conf `topology` when it
 * loads, else hwloc's view of this node, else the estimates. */
void ptsp_load_node_model(void);

/* Plan request r for the step of geometry g (nodelist: its Slurm host
 * list, NULL unknown) through the planning handle (lib/plan/planner.h)
 * with the administrator's limits; its warnings join ptsp_node.notes.
 * -1 with the reason a request no plan satisfies is refused. */
int ptsp_plan_request(const pt_job_geometry *g, const char *nodelist, const pt_plan_request *r, pt_plan *out);

/* Return the node model (the end of the step or of srun). */
void ptsp_node_free(void);

/* ---- srun.c: local and allocator context -------------------------------- */
/* init_post_opt: the request (options, PTRAIN_* of srun's environment,
 * defaults) and its energy level; -1 and a slurm_error() line refuse it. */
int ptsp_srun_post_opt(spank_t sp);
/* local_user_init (srun only): plan the request on the step's geometry;
 * -1 and the reason when no plan satisfies it, 0 when it plans or the
 * geometry is unknown here (left to slurmstepd). */
int ptsp_srun_user_init(spank_t sp);

/* ---- stepd.c: remote context -------------------------------------------- */
enum { PLAN_NONE = 0, PLAN_SKIP, PLAN_READY, PLAN_ERROR };

/* The step's plan, computed once per slurmstepd (ptsp_compute_plan). */
struct ptsp_step {
    int state;                   /* PLAN_*: PLAN_ERROR with err below */
    char err[PT_ERROR_LEN];      /* PLAN_ERROR: why, one line, kept for task_init */
    pt_plan plan;
    int node_tasks[MAX_NODES];   /* tasks of each node */
    pt_job_geometry geo;
    int node_id, local_tasks;    /* this node, and its tasks */
    char master_addr[256];
    int master_port;
    char tpn_text[256];          /* SLURM_STEP_TASKS_PER_NODE as Slurm wrote it */
    int verbose, explain;        /* --ptrain-verbose / PTRAIN_VERBOSE, --ptrain-explain / PTRAIN_EXPLAIN */
    char model[64];              /* the model the plan is made for (PTRAIN_MODEL) */
    int batch;                   /* the global batch (PTRAIN_BATCH) */
};
extern struct ptsp_step ptsp_step;

/* One variable of the job's environment (ptsp_env_fn's contract). */
int ptsp_job_getenv(spank_t sp, const char *name, char *buf, int len);
int ptsp_job_getenv_cb(void *arg, const char *name, char *buf, int len);

/* 1 when the step runs an MPI daemon (orted, prted): not our tasks. */
int ptsp_is_mpi_daemon(spank_t sp);

/* Compute ptsp_step once: 0 (PLAN_READY or PLAN_SKIP) or -1 (PLAN_ERROR,
 * ptsp_step.err). */
int ptsp_compute_plan(spank_t sp);

/* init_post_opt: SLURM_PMIX_FENCE=ring for a ptrain step that chose none
 * (stepd.c says why); always 0, a failure is one slurm_error() line. */
int ptsp_stepd_post_opt(spank_t sp);
/* user_init: ptsp_compute_plan; a failure is logged (slurmd log) and
 * raised again by task_init, where the user sees it; always 0. */
int ptsp_stepd_user_init(spank_t sp);

/* ---- task.c: remote context, each task ---------------------------------- */
/* Set name=value in the task's environment (arg: the spank_t); -1 and a
 * slurm_error() line on failure. */
int ptsp_set_task_env(const char *name, const char *value, void *arg);

/* task_init: the plan's variables, the rank variables and the binding of
 * this task; rank 0 logs the notes, the plan and the explanation.  -1 (and
 * a slurm_error() line: the task exits 1) when the step has no plan for a
 * request or a variable cannot be set. */
int ptsp_task_init(spank_t sp);

/* ---- energy.c: remote context ------------------------------------------- */
/* PTRAIN_ENERGY and the clock ranges into the task's environment, each
 * variable through set(name, value, arg) (task.c passes ptsp_set_task_env
 * and the spank_t, as to pt_plan_export: energy.c does not call back into
 * task.c); -1 (and a slurm_error() line) when the request is refused or a
 * variable cannot be set. */
int ptsp_energy_task_env(spank_t sp, int (*set)(const char *name, const char *value, void *arg), void *arg);
/* task_post_fork (root): in a ptrain step (not the extern one), record the
 * cpufreq settings of the CPUs the task may run on; under apply, lift the
 * clock restriction of the task's own GPU.  task_exit: reset that GPU's
 * clocks and restrict it again; at the last local task's exit, write back
 * the cpufreq settings the step left changed (pt_spank_cpufreq_restore: a
 * ptrain-run killed by SIGKILL cannot).  Always 0: a failure is one log
 * line and the task runs (ran) at the default clocks. */
int ptsp_energy_task_post_fork(spank_t sp);
int ptsp_energy_task_exit(spank_t sp);
/* The end of the step: put back what a task whose exit was not seen left. */
void ptsp_energy_exit(spank_t sp);

#endif
