/* SPDX-License-Identifier: MIT */
/* ptrain-plan: offline planning from a node model (hwloc XML or ptrain
 * JSON), a job geometry and a model shape; prints the chosen plan and the
 * runners-up with their predicted step time, memory and why.  See
 * ptrain-plan(1); the modules are in bin/plan/plan_tool.h. */
#define _POSIX_C_SOURCE 200809L
#include "plan_tool.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    plan_cmdline op;
    plan_run run;
    memset(&run, 0, sizeof run);
    int st = plan_options(argc, argv, &op);
    if (st < 0) st = plan_machine(&op, &run);
    if (st < 0) st = plan_search(&op, &run);
    if (st >= 0) return st;
    int status = run.status, printed = plan_print(&op, &run);
    if (printed) status = printed;
    if (op.energy) {
        pt_energy_frontier_free(&run.efront);
        pt_energy_profile_free(&run.eprof);
        pt_energy_dag_free(&run.edag);
    }
    pt_planner_free(run.pl);
    pt_plan_machine_free(&run.mach);
    free(run.tasks);
    if (fflush(stdout) != 0 && !status) status = PT_EXIT_FAIL;
    return status;
}
