/* SPDX-License-Identifier: MIT */
/* ptrain.so in slurmstepd (the remote context), once per step:
 * SLURM_PMIX_FENCE=ring before Slurm's mpi/pmix plugin reads the job's
 * environment, and in user_init the step's plan: the request (option >
 * environment > admin default), the node model (ptrain.conf `topology`,
 * else hwloc) and pt_plan_resolve through the planning handle, which is
 * deterministic: every node computes the same plan from the same inputs.
 * See plugin.h. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "plan/planner.h"
#include "spank/plugin.h"

struct ptsp_step ptsp_step;

/* ---- the job's environment ---------------------------------------------- */
/* 1 and the value, 0 when unset or empty, -1 when longer than buf
 * (ESPANK_NOSPACE; ptsp_env_fn's contract). */
int ptsp_job_getenv(spank_t sp, const char *name, char *buf, int len)
{
    buf[0] = '\0';
    spank_err_t rc = spank_getenv(sp, name, buf, len);
    if (rc == ESPANK_NOSPACE) {
        buf[0] = '\0';
        return -1;
    }
    return rc == ESPANK_SUCCESS && buf[0];
}

int ptsp_job_getenv_cb(void *arg, const char *name, char *buf, int len)
{
    return ptsp_job_getenv((spank_t)arg, name, buf, len);
}

static int plan_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int plan_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ptsp_step.err, sizeof ptsp_step.err, fmt, ap);
    va_end(ap);
    pt_fail(PT_EINVAL, "%s", ptsp_step.err); /* one line, as every message */
    snprintf(ptsp_step.err, sizeof ptsp_step.err, "%s", pt_errmsg());
    ptsp_step.state = PLAN_ERROR;
    return -1;
}

int ptsp_is_mpi_daemon(spank_t sp)
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

/* ---- init_post_opt: SLURM_PMIX_FENCE ------------------------------------ */
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
int ptsp_stepd_post_opt(spank_t sp)
{
    pt_plan_request req;
    char buf[64];
    if (ptsp_resolve_request(ptsp_job_getenv_cb, sp, &req) < 0 || req.plan.mode == PT_MODE_OFF)
        return 0;
    if (ptsp_is_mpi_daemon(sp) || ptsp_job_getenv(sp, "SLURM_PMIX_FENCE", buf, sizeof buf)) return 0;
    spank_err_t rc = spank_setenv(sp, "SLURM_PMIX_FENCE", "ring", 0);
    if (rc != ESPANK_SUCCESS)
        slurm_error("ptrain: cannot set SLURM_PMIX_FENCE=ring for the step: %s (MPI start-up may crash; "
                    "set PMIxCollFence=ring in mpi.conf)", spank_strerror(rc));
    return 0;
}

/* ---- user_init: the step's plan ------------------------------------------ */
/* Compute this step's plan once per slurmstepd (remote context). */
int ptsp_compute_plan(spank_t sp)
{
    if (ptsp_step.state != PLAN_NONE) return ptsp_step.state == PLAN_ERROR ? -1 : 0;
    uint32_t step_id = 0, job_id = 0, nnodes = 0, nodeid = 0, ntasks = 0, nlocal = 0;
    if (spank_get_item(sp, S_JOB_STEPID, &step_id) != ESPANK_SUCCESS ||
        spank_get_item(sp, S_JOB_ID, &job_id) != ESPANK_SUCCESS)
        return plan_fail("ptrain: cannot read the job and step id from Slurm");
    if (step_id == PT_STEP_BATCH || step_id == PT_STEP_EXTERN || step_id == PT_STEP_INTERACTIVE ||
        spank_get_item(sp, S_JOB_NNODES, &nnodes) != ESPANK_SUCCESS || nnodes == 0) {
        ptsp_step.state = PLAN_SKIP; /* the batch script's own step: nothing to plan */
        return 0;
    }

    char buf[4096];
    pt_plan_request req;
    int bad_request = ptsp_resolve_request(ptsp_job_getenv_cb, sp, &req) < 0;
    ptsp_step.verbose = ptsp_opt_verbose ||
                        (ptsp_job_getenv(sp, "PTRAIN_VERBOSE", buf, sizeof buf) > 0 && strcmp(buf, "0") != 0);
    ptsp_step.explain = ptsp_opt_explain ||
                        (ptsp_job_getenv(sp, "PTRAIN_EXPLAIN", buf, sizeof buf) > 0 && strcmp(buf, "0") != 0);
    if (bad_request) return plan_fail("%s", pt_errmsg());
    snprintf(ptsp_step.model, sizeof ptsp_step.model, "%s", req.model_name);
    ptsp_step.batch = req.global_batch;
    if (req.plan.mode == PT_MODE_OFF) {
        ptsp_step.state = PLAN_SKIP;
        return 0;
    }
    if (ptsp_is_mpi_daemon(sp)) {
        /* mpirun inside an allocation launches one orted per node through
         * srun: its ranks are not this step's tasks, so inject nothing. */
        slurm_debug("ptrain: step runs an MPI daemon (orted/prted): no plan injected");
        ptsp_step.state = PLAN_SKIP;
        return 0;
    }

    if (spank_get_item(sp, S_JOB_NODEID, &nodeid) != ESPANK_SUCCESS ||
        spank_get_item(sp, S_JOB_TOTAL_TASK_COUNT, &ntasks) != ESPANK_SUCCESS ||
        spank_get_item(sp, S_JOB_LOCAL_TASK_COUNT, &nlocal) != ESPANK_SUCCESS)
        return plan_fail("ptrain: cannot read the step geometry from Slurm");
    if (nnodes > MAX_NODES || ntasks > (1u << 20) || nodeid >= nnodes)
        return plan_fail("ptrain: step geometry out of range (nodes=%u tasks=%u node=%u)", nnodes,
                         ntasks, nodeid);
    char *tpn = ptsp_step.tpn_text;
    if (ptsp_job_getenv(sp, "SLURM_STEP_TASKS_PER_NODE", tpn, sizeof ptsp_step.tpn_text) <= 0 &&
        ptsp_job_getenv(sp, "SLURM_TASKS_PER_NODE", tpn, sizeof ptsp_step.tpn_text) <= 0)
        return plan_fail("ptrain: neither SLURM_STEP_TASKS_PER_NODE nor SLURM_TASKS_PER_NODE is "
                         "set: cannot place ranks");
    int n = 0;
    if (pt_spank_parse_tasks_per_node(ptsp_step.tpn_text, ptsp_step.node_tasks, MAX_NODES, &n) < 0)
        return plan_fail("ptrain: %s", pt_errmsg());
    long long sum = 0;
    for (int i = 0; i < n; i++) sum += ptsp_step.node_tasks[i];
    if ((uint32_t)n != nnodes || sum != ntasks || (uint32_t)ptsp_step.node_tasks[nodeid] != nlocal)
        return plan_fail("ptrain: tasks per node '%s' disagree with the step (%u nodes, %u tasks, "
                         "%u on node %u)", ptsp_step.tpn_text, nnodes, ntasks, nlocal, nodeid);
    ptsp_step.geo.nnodes = (int)nnodes;
    ptsp_step.geo.ntasks = (int)ntasks;
    ptsp_step.geo.tasks_per_node = ptsp_step.node_tasks;
    ptsp_step.node_id = (int)nodeid;
    ptsp_step.local_tasks = (int)nlocal;

    ptsp_load_node_model();
    if (ptsp_job_getenv(sp, "SLURM_STEP_NODELIST", buf, sizeof buf) <= 0 &&
        ptsp_job_getenv(sp, "SLURM_JOB_NODELIST", buf, sizeof buf) <= 0 &&
        ptsp_job_getenv(sp, "SLURM_NODELIST", buf, sizeof buf) <= 0)
        return plan_fail("ptrain: no SLURM_STEP_NODELIST / SLURM_JOB_NODELIST in the job "
                         "environment: cannot name MASTER_ADDR");
    if (ptsp_plan_request(&ptsp_step.geo, buf, &req, &ptsp_step.plan) < 0)
        return plan_fail("ptrain: %s", pt_errmsg());
    if (pt_spank_first_host(buf, ptsp_step.master_addr, sizeof ptsp_step.master_addr) < 0)
        return plan_fail("ptrain: %s", pt_errmsg());
    ptsp_step.master_port = pt_spank_master_port(job_id, step_id, ptsp_conf.master_port_base,
                                                 ptsp_conf.master_port_count);
    ptsp_step.state = ptsp_step.plan.mode == PT_MODE_OFF ? PLAN_SKIP : PLAN_READY;
    return 0;
}

int ptsp_stepd_user_init(spank_t sp)
{
    if (ptsp_compute_plan(sp) < 0) {
        /* This text only reaches the slurmd log; task_init repeats it to
         * the user's terminal. */
        /* Errors of remote user_init do not reach srun and failing here
         * would not fail the step visibly: log for the administrator and
         * raise the same error from task_init, which the user sees and
         * which makes the tasks exit 1 (plugin loaded as `required`). */
        slurm_info("%s", ptsp_step.err);
    }
    return 0;
}
