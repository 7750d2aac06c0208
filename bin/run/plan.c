/* SPDX-License-Identifier: MIT */
/* ptrain-run's plan: defaults < PTRAIN_* < flags, or planned here under
 * --mode auto by the planning handle from the job's node models
 * (bin/run/run.h).  Nothing here communicates. */
#define _GNU_SOURCE
#include "run.h"
#include "plan/cost.h"
#include "plan/planner.h"
#include "plan/resolve.h"
#include "topo/topo.h"
#include "topo/topo_plan.h"
#include "topo/machine_load.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The divisors of n as "1, 2, 4" into buf. */
static void divisors(int n, char *buf, size_t len)
{
    size_t off = 0;
    buf[0] = '\0';
    for (int d = 1; d <= n && off < len; d++)
        if (n % d == 0) off += (size_t)snprintf(buf + off, len - off, "%s%d", off ? ", " : "", d);
}

/* The planner's rates of this job's nodes (run.h), for the energy
 * profile that is modelled rather than measured. */
int run_node_hw(const run_opts *o, const run_nodes *nodes, pt_hw *hw, int *island_ranks, char *source, size_t len)
{
    int maxt = 1;
    for (int i = 0; i < nodes->nnodes; i++)
        if (nodes->tpn[i] > maxt) maxt = nodes->tpn[i];
    pt_topo t;
    int from = PT_TOPO_FROM_NONE, count = 0;
    char path[4096];
    /* the first kind's model (--topology FILE:COUNT names one per kind),
     * else this node's hwloc model, else the estimates: the node-model
     * loader pt_machine_load uses for --mode auto */
    if (o->topology && pt_topo_plan_arg_parse("--topology", o->topology, path, sizeof path, &count) < 0) return -1;
    if (pt_topo_plan_load(o->topology ? path : NULL, "--topology", PT_TOPO_LOAD_ESTIMATES, &t, &from, NULL, 0) < 0)
        return pt_fail(PT_EINVAL, "cannot load the node model %s: %s (valid: a ptrain-topo --save JSON or hwloc XML file)",
                       path, pt_errmsg());
    if (from == PT_TOPO_FROM_PATH) snprintf(source, len, "%.290s", path);
    else if (from == PT_TOPO_FROM_HWLOC) snprintf(source, len, "hwloc (this node)");
    else snprintf(source, len, "defaults");
    int rc = pt_topo_plan_hw(from != PT_TOPO_FROM_NONE ? &t : NULL, maxt, NULL, hw, island_ranks, NULL, 0);
    if (from != PT_TOPO_FROM_NONE) pt_topo_free(&t);
    if (rc < 0) return pt_fail(PT_EINVAL, "node model %s: %s", source, pt_errmsg());
    return 0;
}

/* --mode auto under plain mpirun (no plugin plan): the cluster is the
 * job's nodes (nodes->tpn) with the rates of the node model (--topology /
 * PTRAIN_TOPOLOGY, else this node's hwloc model, else pt_topo_plan_hw's
 * estimates for a one-NUMA-node machine: pt_topo_plan_load), or of each
 * kind's model for --topology FILE:COUNT given once per kind of node (the
 * counts, in node order, add up to the job's nodes: mixed nodes, planned
 * as ptrain-plan and the plugin's node_models plan them), and the planning
 * handle (lib/plan/planner.h) plans the request r exactly as the plugin
 * and ptrain-plan do.  Every rank computes it; the start-up agreement
 * compares the plans. */
static int plan_auto(const run_opts *o, const run_nodes *nodes, const pt_plan_request *r, pt_plan *p, run_auto *A)
{
    const int nkinds = o->ntopologies > 0 ? o->ntopologies : 1;
    char(*path)[4096] = calloc((size_t)nkinds, sizeof *path);
    int count[RUN_MAX_TOPOLOGIES] = {0}, counted = 0, sum = 0;
    if (!path) return pt_fail(PT_ENOMEM, "--mode auto: out of memory for the node models");
    for (int k = 0; k < o->ntopologies; k++) {
        if (pt_topo_plan_arg_parse("--topology", o->topologies[k], path[k], sizeof path[k], &count[k]) < 0) {
            free(path);
            return -1;
        }
        counted += count[k] > 0;
        sum += count[k];
    }
    if (nkinds > 1 && counted < nkinds) {
        free(path);
        return pt_fail(PT_EINVAL, "--mode auto: with %d --topology options each needs its node count (valid: FILE:COUNT "
                       "in node order, e.g. --topology a.xml:4 --topology b.xml:2)", nkinds);
    }
    if (counted && sum != nodes->nnodes) {
        free(path);
        return pt_fail(PT_EINVAL, "--mode auto: the --topology counts add up to %d node%s, but the job runs on %d "
                       "(valid: counts that add up to %d, in node order)", sum, sum == 1 ? "" : "s",
                       nodes->nnodes, nodes->nnodes);
    }
    /* each kind's model: its --topology file, else this node's hwloc
     * model, else the estimates; named as ptrain-plan names each kind */
    pt_machine_kind kinds[RUN_MAX_TOPOLOGIES];
    memset(kinds, 0, sizeof kinds);
    for (int k = 0; k < nkinds; k++) {
        kinds[k].path = o->ntopologies ? path[k] : NULL;
        kinds[k].flags = PT_TOPO_LOAD_ESTIMATES;
        kinds[k].what = "--topology";
        kinds[k].name = nkinds > 1 ? NULL : "kind 0";
    }
    /* each node's kind, in node order (one kind: NULL, every node kind 0) */
    int *kind_of = NULL;
    if (nkinds > 1) {
        kind_of = malloc(sizeof(int) * (size_t)nodes->nnodes);
        if (!kind_of) {
            free(path);
            return pt_fail(PT_ENOMEM, "--mode auto: out of memory for the node list");
        }
        for (int i = 0, k = 0, left = count[0]; i < nodes->nnodes; i++) {
            while (left == 0 && k + 1 < nkinds) left = count[++k];
            kind_of[i] = k;
            left--;
        }
    }
    pt_plan_machine mach;
    int bad = -1;
    int rc = pt_machine_load(&mach, nkinds, kinds, kind_of, nodes->tpn, nodes->nnodes, NULL, 0, NULL, 0, &bad);
    free(kind_of);
    char source[300];
    if (nkinds > 1) {
        size_t off = 0;
        for (int k = 0; k < nkinds && off < sizeof source; k++)
            off += (size_t)snprintf(source + off, sizeof source - off, "%s%s:%d", k ? ", " : "", path[k], count[k]);
    } else if (kinds[0].from == PT_TOPO_FROM_PATH) snprintf(source, sizeof source, "%.290s", path[0]);
    else if (kinds[0].from == PT_TOPO_FROM_HWLOC) snprintf(source, sizeof source, "hwloc (this node)");
    else snprintf(source, sizeof source, "defaults");
    if (rc < 0 && bad >= 0) {
        pt_fail(PT_EINVAL, "--mode auto: cannot load the node model %s: %s (valid: a ptrain-topo --save JSON or hwloc "
                "XML file)", kinds[bad].path ? kinds[bad].path : "of this node", pt_errmsg());
        free(path);
        return -1;
    }
    free(path);
    if (rc < 0) return pt_fail(PT_EINVAL, "--mode auto: node model %s: %s", source, pt_errmsg());
    pt_plan_limits lim;
    pt_plan_limits_default(&lim);
    lim.flag_prefix = "--"; /* the planner's messages name our flags */
    pt_planner *pl = pt_planner_new(&mach.cluster, &lim);
    if (!pl || pt_planner_set_request(pl, r) < 0 || pt_planner_run(pl) < 0) {
        pt_planner_free(pl);
        pt_plan_machine_free(&mach);
        return pt_fail(PT_EINVAL, "--mode auto: %s", pt_errmsg());
    }
    *p = *pt_planner_plan(pl);
    A->res = *pt_planner_result(pl);
    snprintf(A->notes, sizeof A->notes, "%s", pt_planner_notes(pl));
    pt_planner_free(pl);
    pt_plan_machine_free(&mach);
    A->on = 1;
    A->m = r->model;
    size_t off = (size_t)snprintf(A->machine, sizeof A->machine, "%d node%s x ", nodes->nnodes, nodes->nnodes == 1 ? "" : "s");
    int uniform = 1;
    for (int i = 1; i < nodes->nnodes; i++) uniform &= nodes->tpn[i] == nodes->tpn[0];
    if (uniform) off += (size_t)snprintf(A->machine + off, sizeof A->machine - off, "%d tasks", nodes->tpn[0]);
    else
        for (int i = 0; i < nodes->nnodes && off < sizeof A->machine; i++)
            off += (size_t)snprintf(A->machine + off, sizeof A->machine - off, "%s%d", i ? "," : "(", nodes->tpn[i]);
    if (!uniform && off < sizeof A->machine) off += (size_t)snprintf(A->machine + off, sizeof A->machine - off, ") tasks");
    if (off < sizeof A->machine) snprintf(A->machine + off, sizeof A->machine - off, ", node model %s", source);
    return 0;
}

/* The request of --mode auto (lib/plan/planner.h's builder): the flags
 * given, pinned; the PTRAIN_* variables for what no flag gives (unless
 * re-planning over a plugin plan: its variables are its choice, not the
 * user's pins); the model and batch this run trains. */
static int auto_request(const run_opts *o, const pt_gpt_config *cfg, int from_env, pt_plan_request *r)
{
    pt_plan_request_init(r, PT_MODE_AUTO);
    pt_plan_request_overlay(&o->flags, &r->plan);
    r->pinned |= o->flags.pinned | PT_PIN_MODE;
    /* the model and batch this run trains (already from PTRAIN_MODEL and
     * PTRAIN_BATCH when no flag gave them) */
    snprintf(r->model_name, sizeof r->model_name, "%.63s", o->model);
    r->model = *cfg;
    if (o->batch > INT_MAX) return pt_fail(PT_EINVAL, "--batch %ld is too large (valid: at most %d)", o->batch, INT_MAX);
    r->global_batch = (int)o->batch;
    r->pinned |= PT_PIN_MODEL | PT_PIN_BATCH;
    if (from_env && pt_plan_request_env(r, NULL, pt_plan_getenv, NULL) < 0) return -1;
    return 0;
}

/* Resolve the plan (run.h). */
int run_resolve_plan(const run_opts *o, const pt_gpt_config *cfg, int world, const run_nodes *nodes, pt_plan *p,
                     const char **source, run_auto *A)
{
    /* the request: sizes 0 and zero -1 = not given, rank order "" = not given */
    pt_plan_default(p);
    p->dp = p->pp = p->tp = p->tp_depth = p->sp = p->microbatches = p->virtual_stages = 0;
    p->zero = -1;
    p->schedule = -1;
    p->rank_order[0] = '\0';
    p->tp_order[0] = '\0';
    const unsigned given = o->flags.pinned; /* the plan flags given (PT_PIN_*) */
    const int flag_auto = (given & PT_PIN_MODE) && o->flags.plan.mode == PT_MODE_AUTO;
    const char *plugin_plan = getenv("PTRAIN_PLAN");
    int replan = flag_auto && plugin_plan;
    const char *env_mode = getenv("PTRAIN_MODE");
    pt_mode em = PT_MODE_OFF;
    const int env_auto = !replan && !(given & PT_PIN_MODE) && env_mode && pt_mode_parse(env_mode, &em) == 0 &&
                         em == PT_MODE_AUTO;
    if (flag_auto || env_auto) {
        pt_plan_request r;
        if (auto_request(o, cfg, !replan, &r) < 0) return -1;
        if (plan_auto(o, nodes, &r, p, A) < 0) return -1;
        /* what the planner does not choose: dp follows (an order the user
         * gave was the search's pin, so the plan was priced with it) */
        if (o->dp && p->dp != o->dp)
            return pt_fail(PT_EINVAL, "--mode auto planned dp=%d (%s), not --dp %ld: pin --tp, --pp and --sp instead of --dp",
                      p->dp, A->machine, o->dp);
        *source = replan ? "auto, re-planned over the plugin's plan" : "auto";
        return pt_plan_validate(p, world) ? -1 : 0;
    }
    int from_env = pt_plan_from_env(p);
    if (from_env < 0) return -1;
    *source = from_env ? (getenv("SLURM_JOB_ID") ? "slurm" : "env") : "flags";
    pt_plan_request_overlay(&o->flags, p); /* the flags given over the variables */
    if (o->dp) p->dp = (int)o->dp;
    /* not planned here: the sizes not given are the defaults */
    pt_plan d;
    pt_plan_default(&d);
    if (!p->pp) p->pp = d.pp;
    if (!p->tp) p->tp = d.tp;
    if (!p->tp_depth) p->tp_depth = d.tp_depth;
    if (!p->sp) p->sp = d.sp;
    if (!p->microbatches) p->microbatches = d.microbatches;
    if (!p->virtual_stages) p->virtual_stages = d.virtual_stages;
    if (p->zero < 0) p->zero = d.zero;
    if (p->schedule < 0) p->schedule = d.schedule;
    if (!p->rank_order[0]) memcpy(p->rank_order, d.rank_order, sizeof p->rank_order);
    if (!p->tp_order[0]) memcpy(p->tp_order, d.tp_order, sizeof p->tp_order);
    /* off: nothing was planned, run the sizes given with 1d layers */
    if (p->mode == PT_MODE_OFF) p->mode = PT_MODE_1D;
    long long inner = (long long)p->tp * p->pp * p->sp;
    if (!o->dp && (p->dp == 0 || (given & (PT_PIN_TP | PT_PIN_SP | PT_PIN_TP_DEPTH | PT_PIN_PP)))) {
        if (inner < 1 || world % inner) {
            char valid[256];
            if (p->pp < 1 || world % p->pp) { /* the pipeline alone does not fit: say so, not tp */
                divisors(world, valid, sizeof valid);
                return pt_fail(PT_EINVAL, "--mode %s with %d ranks: pp=%d does not divide the world (valid pp here: "
                               "%s)", pt_mode_name(p->mode), world, p->pp, valid);
            }
            if (p->sp > 1) {
                int n = world % ((long long)p->tp * p->pp) ? world : world / (p->tp * p->pp);
                pt_plan_list_tp(PT_MODE_1D, 1, n, world, valid, sizeof valid);
                return pt_fail(PT_EINVAL, "--mode %s with %d ranks: sp=%d does not divide the world (with tp=%d, "
                          "pp=%d; valid sp here: %s)", pt_mode_name(p->mode), world, p->sp, p->tp,
                          p->pp, valid);
            }
            int n = world % p->pp ? world : world / p->pp;
            int k = pt_plan_list_tp(p->mode, p->mode == PT_MODE_2P5D ? p->tp_depth : 1, n, world,
                                    valid, sizeof valid);
            return pt_fail(PT_EINVAL, "--mode %s with %d ranks: tp=%d does not divide the world (with pp=%d, "
                      "sp=%d; valid tp%s here: %s)", pt_mode_name(p->mode), world, p->tp, p->pp,
                      p->sp, p->mode == PT_MODE_2P5D ? " for this tp_depth" : "",
                      k ? valid : "none");
        }
        p->dp = (int)(world / inner);
    }
    return pt_plan_validate(p, world) ? -1 : 0;
}
