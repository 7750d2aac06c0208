/* SPDX-License-Identifier: MIT */
/* ptrain.so in slurmstepd, each task (task_init): PTRAIN_* (PTRAIN_MODEL,
 * PTRAIN_BATCH included) plus RANK, WORLD_SIZE, LOCAL_RANK,
 * LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT; the mpibind-style binding
 * (bind=auto: GPU, CPU set, HCA); global rank 0's task prints the
 * warnings, the plan (--ptrain-verbose) and the explanation
 * (--ptrain-explain).  See plugin.h. */
#define _GNU_SOURCE /* sched_getaffinity */
#include <hwloc.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plan/cost.h"
#include "plan/planner.h"
#include "spank/plugin.h"

int ptsp_set_task_env(const char *name, const char *value, void *arg)
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
    return ptsp_set_task_env(name, txt, sp);
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

/* ---- binding ------------------------------------------------------------- */
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
    const pt_topo *bt = &ptsp_node.topo;
    int own_loaded = 0;
    char buf[256];
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
    if (ptsp_conf.n_node_models > 0 && (ptsp_job_getenv(sp, "SLURMD_NODENAME", host, sizeof host) > 0 ||
                                   gethostname(host, sizeof host - 1) == 0)) {
        for (int e = 0; e < ptsp_conf.n_node_models && !own_loaded; e++)
            if (pt_spank_hostlist_has(ptsp_conf.node_model[e].hosts, host) == 1 &&
                pt_topo_load_file(&own, ptsp_conf.node_model[e].path) == PT_OK)
                own_loaded = 1, bt = &own;
    }
    rc = pt_spank_bind_compute(bt, m, allowed, local, ptsp_step.local_tasks, &b);
    if (rc < 0) {
        slurm_error("ptrain: %s", pt_errmsg());
        rc = -1;
        goto out;
    }
    if (b.gpu >= 0 && !ptsp_job_getenv(sp, "CUDA_VISIBLE_DEVICES", buf, sizeof buf)) {
        ptsp_set_task_env("CUDA_DEVICE_ORDER", "PCI_BUS_ID", sp);
        set_task_int(sp, "CUDA_VISIBLE_DEVICES", b.gpu);
        /* the task has a GPU: ptrain-run trains there, or refuses (a build
         * without the CUDA backend) unless the user says --device cpu */
        if (!ptsp_job_getenv(sp, "PTRAIN_DEVICE", buf, sizeof buf)) ptsp_set_task_env("PTRAIN_DEVICE", "cuda", sp);
    }
    if (b.nic >= 0) {
        const char *hca = bt->nic[b.nic].name;
        char dev[64];
        snprintf(dev, sizeof dev, "%s:1", hca);
        if (!ptsp_job_getenv(sp, "UCX_NET_DEVICES", buf, sizeof buf)) ptsp_set_task_env("UCX_NET_DEVICES", dev, sp);
        if (!ptsp_job_getenv(sp, "NCCL_IB_HCA", buf, sizeof buf)) ptsp_set_task_env("NCCL_IB_HCA", hca, sp);
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
    if (ptsp_set_task_env("PTRAIN_CPUS", cpus, sp) != 0 || ptsp_set_task_env("PTRAIN_BIND", who, sp) != 0)
        rc = -1;
out:
    if (own_loaded) pt_topo_free(&own);
    if (curset) hwloc_bitmap_free(curset);
    if (node) hwloc_bitmap_free(node);
    if (m) hwloc_topology_destroy(m);
    return rc;
}

/* ---- task_init ----------------------------------------------------------- */
int ptsp_task_init(spank_t sp)
{
    const struct ptsp_step *st = &ptsp_step;
    if (ptsp_compute_plan(sp) < 0) {
        slurm_error("%s", st->err);
        return -1;
    }
    if (ptsp_energy_task_env(sp, ptsp_set_task_env, sp) != 0) return -1;
    if (st->state != PLAN_READY) return 0;
    int local = -1;
    if (spank_get_item(sp, S_TASK_ID, &local) != ESPANK_SUCCESS || local < 0 ||
        local >= st->local_tasks) {
        slurm_error("ptrain: cannot read this task's local id (got %d of %d)", local, st->local_tasks);
        return -1;
    }
    int rank = pt_plan_rank(&st->geo, st->node_id, local);
    if (rank < 0) {
        slurm_error("ptrain: no rank for task %d on node %d", local, st->node_id);
        return -1;
    }
    if (pt_plan_export(&st->plan, ptsp_set_task_env, sp) != 0 ||
        ptsp_set_task_env("PTRAIN_MODEL", st->model, sp) != 0 ||
        set_task_int(sp, "PTRAIN_BATCH", st->batch) != 0 ||
        set_task_int(sp, "RANK", rank) != 0 ||
        set_task_int(sp, "WORLD_SIZE", st->geo.ntasks) != 0 ||
        set_task_int(sp, "LOCAL_RANK", local) != 0 ||
        set_task_int(sp, "LOCAL_WORLD_SIZE", st->local_tasks) != 0 ||
        ptsp_set_task_env("MASTER_ADDR", st->master_addr, sp) != 0 ||
        set_task_int(sp, "MASTER_PORT", st->master_port) != 0)
        return -1;
    /* the plan's recompute mode is PTRAIN_RECOMPUTE: a PTRAIN_CKPT_ACT (its
     * old name) from the job's environment was read as the request and
     * would contradict the plan where an option or the planner chose
     * another mode (ptrain-run refuses two names that differ) */
    spank_err_t urc = spank_unsetenv(sp, "PTRAIN_CKPT_ACT");
    if (urc != ESPANK_SUCCESS) {
        slurm_error("ptrain: cannot unset PTRAIN_CKPT_ACT: %s", spank_strerror(urc));
        return -1;
    }
    if (ptsp_conf.bind == PT_SPANK_BIND_AUTO && bind_task(sp, local) != 0) return -1;
    if (rank == 0) {
        /* Printed once, by the task of global rank 0: slurm_spank_log from
         * a task's context reaches the srun user's terminal (stderr). */
        if (ptsp_node.notes[0]) log_lines(ptsp_node.notes);
        if (st->verbose) {
            char line[640];
            pt_plan_summary(&st->plan, line, sizeof line);
            slurm_spank_log("ptrain: plan %s (nodes=%d tasks=%d tasks_per_node=%s master=%s:%d)", line,
                            st->geo.nnodes, st->geo.ntasks, st->tpn_text, st->master_addr, st->master_port);
        }
        if (st->explain) {
            pt_model_shape m;
            slurm_spank_log("ptrain: plan for model %s, global batch %d, on %d nodes (tasks per "
                            "node %s), node model: %s", st->model, st->batch, st->geo.nnodes, st->tpn_text,
                            ptsp_node.source);
            if (pt_model_shape_parse("PTRAIN_MODEL", st->model, &m) == 0) {
                size_t need = pt_plan_explain(&ptsp_node.result, &m, st->batch, NULL, 0);
                char *text = malloc(need + 1);
                if (text) {
                    pt_plan_explain(&ptsp_node.result, &m, st->batch, text, need + 1);
                    log_lines(text);
                    free(text);
                }
            }
        }
    }
    return 0;
}
