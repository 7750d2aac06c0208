/* SPDX-License-Identifier: MIT */
/* ptrain-plan's planning: the job's nodes from the node models, the
 * planner's search, and the chosen plan's time-energy frontier
 * (bin/plan/plan_tool.h). */
#define _POSIX_C_SOURCE 200809L
#include "plan_tool.h"
#include "core/file.h"
#include "plan_energy.h"
#include "topo/machine_load.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The job's nodes (plan_tool.h). */
int plan_machine(plan_cmdline *op, plan_run *run)
{
    /* the nodes: one model for --nodes N nodes, or FILE:COUNT per kind */
    int counted = 0, sum = 0;
    for (int i = 0; i < op->ntopo; i++) counted += op->topo[i].count > 0, sum += op->topo[i].count;
    if (op->ntopo > 1 && counted < op->ntopo) {
        fprintf(stderr, "ptrain-plan: with %d --topology options each needs its node count (valid: FILE:COUNT, e.g. "
                "--topology a.xml:4 --topology b.xml:2)\n", op->ntopo);
        return PT_EXIT_INPUT;
    }
    if (counted && op->nodes && op->nodes != sum) {
        fprintf(stderr, "ptrain-plan: --nodes %d, but the --topology counts add up to %d nodes (valid: --nodes %d, or "
                "no --nodes)\n", op->nodes, sum, sum);
        return PT_EXIT_INPUT;
    }
    if (counted) op->nodes = sum;
    if (!op->nodes) op->nodes = 1;
    run->nkinds = op->ntopo > 0 ? op->ntopo : 1;
    /* each kind's model: its --topology file, else this machine's (no
     * estimates: ptrain-plan plans a machine it knows) */
    pt_machine_kind kinds[MAX_TOPOLOGIES];
    memset(kinds, 0, sizeof kinds);
    for (int k = 0; k < run->nkinds; k++) {
        kinds[k].path = op->ntopo ? op->topo[k].path : NULL;
        kinds[k].what = "--topology";
    }
    run->tasks = malloc(sizeof(int) * (size_t)op->nodes);
    int *kind_of = malloc(sizeof(int) * (size_t)op->nodes);
    if (!run->tasks || !kind_of) {
        fprintf(stderr, "ptrain-plan: out of memory\n");
        return PT_EXIT_FAIL;
    }
    /* tasks: --tasks-per-node, else (0) the node's GPUs, else 1 */
    for (int i = 0, k = 0, left = op->ntopo ? op->topo[0].count : op->nodes; i < op->nodes; i++) {
        while (counted && left == 0 && k + 1 < run->nkinds) left = op->topo[++k].count;
        kind_of[i] = k;
        left--;
        run->tasks[i] = op->tpn;
    }
    int rc = pt_machine_load(&run->mach, run->nkinds, kinds, kind_of, run->tasks, op->nodes, &op->ov, 0, NULL, 0, NULL);
    free(kind_of);
    if (rc < 0) {
        fprintf(stderr, "ptrain-plan: %s\n", pt_errmsg());
        free(run->tasks);
        return PT_EXIT_INPUT;
    }
    memcpy(run->tasks, run->mach.tasks, sizeof(int) * (size_t)op->nodes);
    int kind_gpus = 0;
    for (int k = 0; k < run->nkinds; k++) {
        snprintf(run->names[k], sizeof run->names[k], "%s", kinds[k].source);
        if (kinds[k].gpus > 0) kind_gpus = 1;
    }
    if (!op->power_model) op->power_model = kind_gpus ? "gpu" : "cpu";
    return -1;
}

/* The plan and its energy (plan_tool.h). */
int plan_search(plan_cmdline *op, plan_run *run)
{
    const pt_model_shape m = op->req.model;
    const pt_cluster *cl = &run->mach.cluster;
    /* the one planning handle the plugin and ptrain-run --mode auto use */
    run->pl = pt_planner_new(cl, &op->lim);
    if (!run->pl || pt_planner_set_request(run->pl, &op->req) < 0 || pt_planner_run(run->pl) < 0) {
        fprintf(stderr, "ptrain-plan: %s\n", pt_errmsg());
        pt_planner_free(run->pl);
        pt_plan_machine_free(&run->mach);
        free(run->tasks);
        return PT_EXIT_INPUT;
    }
    const pt_plan chosen = *pt_planner_plan(run->pl);
    if (pt_planner_notes(run->pl)[0]) fprintf(stderr, "%s\n", pt_planner_notes(run->pl));
    run->status = 0;
    /* --energy: the chosen plan's iteration on the time-energy frontier */
    if (op->profile_path) snprintf(run->esource, sizeof run->esource, "profile %.500s", op->profile_path);
    else snprintf(run->esource, sizeof run->esource, "%s power model", op->power_model);
    pt_energy_profile measured;
    pt_energy_meta pmeta;
    memset(&measured, 0, sizeof measured);
    memset(&pmeta, 0, sizeof pmeta);
    int erc = 0;
    if (op->profile_path && pt_energy_profile_load(op->profile_path, &measured, &pmeta) != PT_OK) {
        fprintf(stderr, "ptrain-plan: --energy-profile: %s\n", pt_errmsg());
        pt_planner_free(run->pl);
        pt_plan_machine_free(&run->mach);
        free(run->tasks);
        return PT_EXIT_INPUT;
    }
    if (op->energy)
        erc = plan_energy(&m, op->batch, &chosen, &cl->hw, pt_energy_power_model_named(op->power_model),
                          op->profile_path ? &measured : NULL, &pmeta, 0, &run->edag, &run->eprof, &run->efront);
    pt_energy_profile_free(&measured);
    if (erc < 0) {
        fprintf(stderr, "ptrain-plan: --energy: %s\n", pt_errmsg());
        pt_planner_free(run->pl);
        pt_plan_machine_free(&run->mach);
        free(run->tasks);
        return PT_EXIT_INPUT;
    }
    if (op->plan_out) {
        /* the chosen point's clocks, for ptrain-run --energy-plan FILE */
        char point[48];
        int k = plan_energy_pick(&run->efront, op->slowdown, point, sizeof point);
        pt_energy_meta meta;
        memset(&meta, 0, sizeof meta);
        snprintf(meta.device, sizeof meta.device, "%s", op->profile_path ? pmeta.device : op->power_model);
        if (op->profile_path) snprintf(meta.basis, sizeof meta.basis, "profile %.200s", op->profile_path);
        else snprintf(meta.basis, sizeof meta.basis, "modelled: %s power model and the cost model", op->power_model);
        pt_plan_summary(&chosen, meta.plan, sizeof meta.plan);
        if (k < 0 || pt_energy_plan_save(op->plan_out, &run->edag, &run->eprof, &run->efront.p[k], &run->efront, point,
                                         &meta) != PT_OK) {
            fprintf(stderr, "ptrain-plan: --energy-plan-out: %s\n", k < 0 ? "no frontier point" : pt_errmsg());
            run->status = PT_EXIT_FAIL;
        } else {
            fprintf(stderr, "ptrain-plan: wrote the %s point's clocks of %d instructions to %s\n", point, run->edag.n,
                    op->plan_out);
        }
    }
    return -1;
}
