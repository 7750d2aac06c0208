/* SPDX-License-Identifier: MIT */
/* ptrain.so in the local and allocator contexts (srun, sbatch, salloc):
 * a bad request makes srun exit before any allocation, and one no plan
 * satisfies on the step's real geometry fails in srun before any task
 * starts.  See plugin.h. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "plan/planner.h"
#include "spank/plugin.h"

static int node_tasks[MAX_NODES]; /* the step's tasks per node, as srun sees them */

/* init_post_opt: resolve the request in srun/sbatch/salloc (option >
 * environment > default_mode), and refuse bad values before anything is
 * allocated.  A step that does not ask for ptrain (ptsp_is_ptrain_step) is
 * never refused: a PTRAIN_* variable a ptrain step would refuse is named in
 * one warning line, and the step runs. */
int ptsp_srun_post_opt(spank_t sp)
{
    (void)sp;
    pt_plan_request req;
    int level;
    if (ptsp_stray_check(pt_plan_getenv, NULL) < 0) {
        const char *why = pt_errmsg();
        if (!strncmp(why, "ptrain: ", 8)) why += 8;
        slurm_info("ptrain: warning: %s; ignored: this is not a ptrain step (no --ptrain-* option, PTRAIN_MODE unset "
                   "or off)", why);
    }
    if (ptsp_resolve_request(pt_plan_getenv, NULL, &req) < 0 ||
        ptsp_resolve_energy(pt_plan_getenv, NULL, &level) < 0) {
        slurm_error("%s", pt_errmsg());
        return -1;
    }
    return 0;
}

/* local_user_init, srun after the allocation: check the request against the step's real
 * geometry, so that e.g. a --ptrain-tp that does not divide the tasks per
 * node fails here, before any task starts, with the list of sizes that
 * fit.  srun exports the step's SLURM_TASKS_PER_NODE into its own
 * environment; when it is missing or disagrees with the step, the check
 * is left to slurmstepd. */
int ptsp_srun_user_init(spank_t sp)
{
    pt_plan_request req;
    pt_plan out;
    if (ptsp_resolve_request(pt_plan_getenv, NULL, &req) < 0)
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
    if (pt_spank_parse_tasks_per_node(tpn, node_tasks, MAX_NODES, &n) < 0 ||
        (uint32_t)n != nnodes)
        return 0;
    long long sum = 0;
    for (int i = 0; i < n; i++) sum += node_tasks[i];
    if (sum != ntasks) return 0;
    pt_job_geometry g = {n, (int)ntasks, node_tasks};
    /* srun's host is not a compute node: its model stands in for the
     * layout checks, and memory is left to the nodes (local_check) */
    ptsp_node.local_check = 1;
    ptsp_load_node_model();
    const char *nodelist = getenv("SLURM_STEP_NODELIST");
    if (!nodelist) nodelist = getenv("SLURM_JOB_NODELIST");
    if (!nodelist) nodelist = getenv("SLURM_NODELIST");
    if (ptsp_plan_request(&g, nodelist, &req, &out) < 0) {
        slurm_error("ptrain: %s", pt_errmsg());
        return -1;
    }
    return 0;
}
