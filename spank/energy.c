/* SPDX-License-Identifier: MIT */
/* ptrain.so in slurmstepd: --ptrain-energy=off|report|plan|apply (within
 * ptrain.conf's `energy`): PTRAIN_ENERGY and the allowed clock ranges for
 * ptrain-run; under apply, task_post_fork (slurmstepd, root) lifts NVML's
 * application-clock restriction of the task's own GPU (NVML is dlopen'ed,
 * never linked) and task_exit resets its clocks and puts the restriction
 * back.  In every ptrain step, task_post_fork records the cpufreq settings
 * of the task's CPUs and the last task's exit writes back what the step
 * left changed (a ptrain-run killed by SIGKILL cannot).  See plugin.h and
 * ptrain_spank(8), ENERGY. */
#define _GNU_SOURCE /* sched_getaffinity */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spank/plugin.h"

/* --ptrain-energy's level in this slurmstepd, and under apply each local
 * task's GPU whose application-clock restriction it lifted (restored at the
 * task's exit). */
static int req_energy = -1;       /* option > PTRAIN_ENERGY, within ptsp_conf.energy */
static int energy_state;          /* 0 not resolved, 1 resolved, -1 refused (energy_err) */
static char energy_err[PT_ERROR_LEN]; /* the refusal (pt_errmsg() then), kept for later callbacks */
static struct { char busid[32]; int was, lifted; } energy_gpu[MAX_LOCAL];

/* The cpufreq settings of the step's CPUs before its tasks ran (slurmstepd
 * forks every task before any runs, so the first task_post_fork sees them
 * untouched), and the local tasks forked and not yet exited. */
static pt_spank_cpufreq cf_saved;
static int cf_state; /* 0 not decided, 1 recorded for this step, -1 not a ptrain step */
static int cf_live;

/* task_post_fork: record the settings of the CPUs task pid may run on. */
static void cpufreq_save_task(spank_t sp)
{
    if (!cf_state) {
        uint32_t step_id = 0;
        cf_state = spank_get_item(sp, S_JOB_STEPID, &step_id) == ESPANK_SUCCESS && step_id != PT_STEP_EXTERN &&
                           ptsp_is_ptrain_step(ptsp_job_getenv_cb, sp)
                       ? 1
                       : -1;
    }
    if (cf_state < 0) return;
    pid_t pid = 0;
    cpu_set_t set;
    CPU_ZERO(&set);
    if (spank_get_item(sp, S_TASK_PID, &pid) != ESPANK_SUCCESS || sched_getaffinity(pid, sizeof set, &set) != 0)
        sched_getaffinity(0, sizeof set, &set); /* slurmstepd's own: the node's CPUs it may use */
    int cpus[CPU_SETSIZE], n = 0;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &set)) cpus[n++] = c;
    if (pt_spank_cpufreq_save(&cf_saved, cpus, n) < 0) slurm_error("ptrain: %s", pt_errmsg());
    cf_live++;
}

/* Write back what the step's tasks left changed (the last task's exit, or
 * the step's end); one line in the slurmd log when something was. */
static void cpufreq_restore(spank_t sp)
{
    if (cf_state <= 0 || !cf_saved.n) return;
    uid_t uid = 0;
    gid_t gid = 0, *g = NULL;
    int ng = 0;
    unsigned gids[64];
    if (!sp || spank_get_item(sp, S_JOB_UID, &uid) != ESPANK_SUCCESS ||
        spank_get_item(sp, S_JOB_GID, &gid) != ESPANK_SUCCESS)
        uid = 0, gid = 0; /* at the step's end, no handle: as root, whatever changed */
    else if (spank_get_item(sp, S_JOB_SUPPLEMENTARY_GIDS, &g, &ng) != ESPANK_SUCCESS || !g)
        ng = 0;
    if (ng > 64) ng = 64;
    for (int i = 0; i < ng; i++) gids[i] = (unsigned)g[i];
    int restored = 0;
    char note[600];
    int rc = pt_spank_cpufreq_restore(&cf_saved, uid, gid, gids, ng, &restored, note, sizeof note);
    if (restored)
        slurm_info("ptrain: put back %d cpufreq setting%s the step's tasks left changed: %s", restored,
                   restored == 1 ? "" : "s", note);
    if (rc < 0) slurm_error("ptrain: %s", pt_errmsg());
}

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
        step_id == PT_STEP_EXTERN || step_id == PT_STEP_INTERACTIVE || ptsp_is_mpi_daemon(sp))
        return 0;
    if (ptsp_resolve_energy(ptsp_job_getenv_cb, sp, &req_energy) < 0) {
        snprintf(energy_err, sizeof energy_err, "%s", pt_errmsg());
        energy_state = -1;
        req_energy = -1;
        return -1;
    }
    return 0;
}

/* In the task: PTRAIN_ENERGY and the allowed clock ranges for ptrain-run,
 * each through set(name, value, arg) (as pt_plan_export). */
int ptsp_energy_task_env(spank_t sp, int (*set)(const char *name, const char *value, void *arg), void *arg)
{
    if (energy_resolve_remote(sp) < 0) {
        slurm_error("%s", energy_err);
        return -1;
    }
    if (req_energy < 0) return 0;
    char r[64];
    if (set("PTRAIN_ENERGY", pt_spank_energy_name(req_energy), arg) != 0) return -1;
    if (ptsp_conf.gpu_clock_mhz[1] > 0) {
        snprintf(r, sizeof r, "%g-%g", ptsp_conf.gpu_clock_mhz[0], ptsp_conf.gpu_clock_mhz[1]);
        if (set("PTRAIN_ENERGY_GPU_MHZ", r, arg) != 0) return -1;
    }
    if (ptsp_conf.cpu_clock_mhz[1] > 0) {
        snprintf(r, sizeof r, "%g-%g", ptsp_conf.cpu_clock_mhz[0], ptsp_conf.cpu_clock_mhz[1]);
        if (set("PTRAIN_ENERGY_CPU_MHZ", r, arg) != 0) return -1;
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
int ptsp_energy_task_post_fork(spank_t sp)
{
    cpufreq_save_task(sp);
    if (energy_resolve_remote(sp) < 0 || req_energy != PT_SPANK_ENERGY_APPLY) return 0;
    int local = -1;
    if (spank_get_item(sp, S_TASK_ID, &local) != ESPANK_SUCCESS || local < 0 || local >= MAX_LOCAL) return 0;
    pt_spank_binding b;
    /* a GPU the user or Slurm's gres chose is left to the task by bind_task,
     * so the binding's GPU may not be the task's (another job's, even): lift
     * nothing then, the binding's index and theirs are not comparable */
    char cvd[256];
    static const char *const chosen[] = {"CUDA_VISIBLE_DEVICES", "SLURM_STEP_GPUS", "SLURM_JOB_GPUS"};
    for (size_t i = 0; i < sizeof chosen / sizeof *chosen; i++)
        if (ptsp_job_getenv(sp, chosen[i], cvd, sizeof cvd)) {
            slurm_info("ptrain: --ptrain-energy=apply: task %d: its GPU was chosen outside ptrain (%s=%s), not by "
                       "ptrain's binding: GPU clocks stay restricted", local, chosen[i], cvd);
            return 0;
        }
    if (ptsp_step.state != PLAN_READY || ptsp_conf.bind != PT_SPANK_BIND_AUTO || ptsp_node.state <= 0 ||
        pt_spank_bind_compute(&ptsp_node.topo, NULL, NULL, local, ptsp_step.local_tasks, &b) < 0 ||
        b.gpu < 0 || b.gpu >= ptsp_node.topo.ngpus) {
        slurm_info("ptrain: --ptrain-energy=apply: task %d has no GPU of its own (it needs a ptrain plan, bind = auto "
                   "and a GPU per task): GPU clocks stay restricted", local);
        return 0;
    }
    snprintf(energy_gpu[local].busid, sizeof energy_gpu[local].busid, "%s", ptsp_node.topo.gpu[b.gpu].pci.busid);
    if (pt_spank_nvml_unrestrict(energy_gpu[local].busid, &energy_gpu[local].was) < 0) {
        slurm_error("ptrain: --ptrain-energy=apply: task %d: %s; it runs at the default clocks", local, pt_errmsg());
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
    energy_gpu[i].lifted = 0;
    if (pt_spank_nvml_restore(energy_gpu[i].busid, energy_gpu[i].was) < 0)
        slurm_error("ptrain: --ptrain-energy=apply: task %d: %s", i, pt_errmsg());
}

int ptsp_energy_task_exit(spank_t sp)
{
    int local = -1;
    if (spank_get_item(sp, S_TASK_ID, &local) == ESPANK_SUCCESS) energy_restore(local);
    /* the step's CPUs may be shared by its tasks: when the last one is gone */
    if (cf_live > 0 && --cf_live == 0) cpufreq_restore(sp);
    return 0;
}

void ptsp_energy_exit(spank_t sp)
{
    for (int i = 0; i < MAX_LOCAL; i++) energy_restore(i); /* a task whose exit was not seen */
    if (cf_live > 0) cpufreq_restore(sp);
    pt_spank_cpufreq_free(&cf_saved);
    cf_state = cf_live = 0;
}
