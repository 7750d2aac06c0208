/* SPDX-License-Identifier: MIT */
/* ptrain.so in srun and slurmstepd: this node's model and the planner, the
 * one plan resolution the plugin, ptrain-plan and ptrain-run --mode auto
 * share (lib/plan/planner.h).  See plugin.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/cost.h"
#include "plan/planner.h"
#include "plan/resolve.h"
#include "spank/plugin.h"
#include "topo/topo_plan.h"
#include "topo/machine_load.h"

struct ptsp_node ptsp_node;

/* ---- the node model ------------------------------------------------------ */
/* This node's model, loaded once per process: the administrator's cached
 * model (ptrain.conf `topology`, the output of ptrain-topo --probe --save)
 * when it loads, else hwloc's view of this node (no measurement).  Every
 * node reads the same file, so every node plans from the same inputs; the
 * hwloc fallback gives the same structure on identical nodes, and
 * ptrain-run's start-up agreement (every rank hashes the plan) stops a
 * job whose nodes disagree. */
void ptsp_load_node_model(void)
{
    if (ptsp_node.state) return;
    ptsp_node.notes[0] = '\0';
    int from;
    if (pt_topo_plan_load(ptsp_conf.topology, "topology",
                          PT_TOPO_LOAD_FALLBACK | PT_TOPO_LOAD_ESTIMATES | PT_TOPO_LOAD_WARN, &ptsp_node.topo, &from,
                          ptsp_node.notes, sizeof ptsp_node.notes) < 0)
        from = PT_TOPO_FROM_NONE; /* not with these flags: the estimates */
    ptsp_node.state = from == PT_TOPO_FROM_NONE ? -1 : 1;
    if (from == PT_TOPO_FROM_PATH)
        snprintf(ptsp_node.source, sizeof ptsp_node.source, "cached model %.290s", ptsp_conf.topology);
    else if (from == PT_TOPO_FROM_HWLOC) snprintf(ptsp_node.source, sizeof ptsp_node.source, "hwloc");
    else snprintf(ptsp_node.source, sizeof ptsp_node.source, "defaults");
}

/* The cluster the planner sees: each node's model (ptrain.conf's
 * node_models for the nodes of its host lists, mixed nodes; every other
 * node this node's model: `topology`, else hwloc), their rates from
 * pt_topo_plan_hw (measured where the model holds a measurement, else
 * estimated) with ptrain.conf's gemm_gflops / gemm_gflops_bf16 / inter_node_gbps /
 * inter_node_lat_us over them (pt_plan_machine_build).  Without a model:
 * the estimates of a node of one NUMA node and no GPU.  nodelist (NULL:
 * unknown, every node the default) names the step's nodes in order. */
static int make_machine(const pt_job_geometry *g, const char *nodelist, pt_plan_machine *m)
{
    int *kind_of = calloc((size_t)g->nnodes, sizeof(int));
    if (!kind_of) return pt_fail(PT_ENOMEM, "out of memory for %d nodes", g->nnodes);
    if (ptsp_conf.n_node_models > 0 && nodelist &&
        pt_spank_node_kinds(&ptsp_conf, nodelist, g->nnodes, kind_of) < 0) {
        free(kind_of);
        return -1;
    }
    if (ptsp_conf.n_node_models == 0 || !nodelist)
        for (int i = 0; i < g->nnodes; i++) kind_of[i] = -1;
    /* kinds: 0 the default model, then each node_models entry a node uses,
     * in the order the nodes first use them */
    pt_machine_kind kinds[PT_SPANK_NODE_MODELS + 1];
    int entry_of[PT_SPANK_NODE_MODELS + 1], kind_index[PT_SPANK_NODE_MODELS], nk = 1, rc = 0, bad = -1;
    memset(kinds, 0, sizeof kinds);
    kinds[0].model = ptsp_node.state > 0 ? &ptsp_node.topo : NULL;
    kinds[0].estimates = ptsp_node.state <= 0;
    kinds[0].name = ptsp_node.source;
    for (int e = 0; e < PT_SPANK_NODE_MODELS; e++) kind_index[e] = -1;
    for (int i = 0; i < g->nnodes; i++) {
        const int e = kind_of[i];
        if (e < 0) {
            kind_of[i] = 0;
            continue;
        }
        if (kind_index[e] < 0) {
            kind_index[e] = nk;
            entry_of[nk] = e;
            kinds[nk].path = kinds[nk].name = ptsp_conf.node_model[e].path;
            kinds[nk].what = "node_models";
            nk++;
        }
        kind_of[i] = kind_index[e];
    }
    pt_topo_hw_override ov = {.inter_gbps = ptsp_conf.inter_node_gbps, .gemm_gflops = ptsp_conf.gemm_gflops,
                              .gemm_gflops_bf16 = ptsp_conf.gemm_gflops_bf16};
    if (pt_machine_load(m, nk, kinds, kind_of, g->tasks_per_node, g->nnodes, &ov, ptsp_conf.inter_node_lat_us, NULL, 0,
                        &bad) < 0) {
        if (bad > 0)
            rc = pt_fail(PT_EINVAL, "node model %.300s of nodes %.200s (ptrain.conf node_models): %s",
                         ptsp_conf.node_model[entry_of[bad]].path, ptsp_conf.node_model[entry_of[bad]].hosts,
                         pt_errmsg());
        else rc = pt_fail(PT_EINVAL, "node model (%s): %s", ptsp_node.source, pt_errmsg());
    }
    free(kind_of);
    if (rc == 0 && ptsp_node.local_check) { /* srun's host judges no memory: the nodes do */
        m->cluster.hw.mem_bytes = 0;
        for (int k = 0; k < m->nkinds; k++) m->kinds[k].hw.mem_bytes = 0;
    }
    return rc;
}

/* ---- the planner --------------------------------------------------------- */
/* Plan the step through the planning handle (lib/plan/planner.h) with the
 * administrator's limits (default_zero, mixed_nodes) on the step's
 * machine; its warnings (a pinned layout over a slower link) join
 * ptsp_node.notes.  No fallback to a fixed rule: a request the search cannot
 * satisfy is refused with its reason (a fallback would silently run a plan
 * the cost model says does not fit, or quietly drop the named layout). */
int ptsp_plan_request(const pt_job_geometry *g, const char *nodelist, const pt_plan_request *r, pt_plan *out)
{
    pt_plan_limits lim = pt_spank_conf_limits(&ptsp_conf);
    pt_plan_machine m;
    if (make_machine(g, nodelist, &m) < 0) return -1;
    pt_planner *p = pt_planner_new(&m.cluster, &lim);
    int rc = -1;
    if (p && pt_planner_set_request(p, r) == 0 && pt_planner_run(p) == 0) {
        *out = *pt_planner_plan(p);
        ptsp_node.result = *pt_planner_result(p);
        if (pt_planner_notes(p)[0]) pt_notef(ptsp_node.notes, sizeof ptsp_node.notes, "%s", pt_planner_notes(p));
        rc = 0;
    }
    pt_planner_free(p);
    pt_plan_machine_free(&m);
    return rc;
}

/* The end of the step (or of srun): the node model loaded for the plan and
 * the binding is returned, so that a plugin kept loaded across steps holds
 * none of it. */
void ptsp_node_free(void)
{
    if (ptsp_node.state > 0) pt_topo_free(&ptsp_node.topo);
    memset(&ptsp_node.topo, 0, sizeof ptsp_node.topo);
    ptsp_node.state = 0;
}
