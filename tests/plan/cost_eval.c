/* SPDX-License-Identifier: MIT */
/* cost_eval MODEL BATCH: print the cost model's prediction for the plan in
 * the PTRAIN_* environment (pt_plan_from_env over the defaults; dp = the
 * world the plan needs, i.e. PTRAIN_DP) as one JSON object:
 *   {"bytes":{"dp":..,"tp":..,"pp":..,"sp":..,"sync":..},"msgs":{..},
 *    "bytes_comm":{"tp":..,"tpx--":..,..,"sync---":..,..,"sp":..,"pp":..,"embed":..,"dp":..},
 *    "flops":..,"mem_params":..,"mem_grads":..,"mem_optim":..,"mem_act":..,
 *    "mem_total":..,"mem_peak":..,"bubble":..,"t_step":..}
 * bytes per rank and step (maximum over ranks), memory in bytes, FLOPs per
 * rank and step.  MODEL is a preset, L,H,C,T,V or llama:...; BATCH the global batch
 * (sequences per step).  Optional GFLOPS GBPS LAT_US: the machine (GEMM
 * rate of a rank in GFLOP/s, bandwidth in GB/s and latency in us of the
 * link every group uses; default 10, 10, 5), RANKS_PER_CORE
 * (pt_hw.ranks_per_core, default 0), GEMM_N_HALF (pt_hw.gemm_n_half,
 * rows, default 0: one GEMM rate for every size) and BUSY_DELAY_US
 * (pt_hw.busy_delay_s in us, default 0: none).  Or --topology FILE
 * TASKS: the machine of one node of TASKS ranks with node model FILE, as
 * ptrain-plan takes it (pt_topo_plan_hw: the GEMM rate and its fit, each
 * link class's and each collective kind's alpha and bus bandwidth, ranks
 * per core, the busy delay), each communicator priced on the link it
 * spans in the plan's rank and tp orders (pt_place_where).  Exit 2 with
 * one line on stderr for a plan the model refuses or a bad argument.  A
 * check program for tests/plan/test_cost_metrics.sh and
 * bench/bench_plan.sh. */
#include "core/core.h"
#include "plan/cost.h"
#include "plan/search.h"
#include "topo/topo.h"
#include "topo/topo_plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    const int topo_mode = argc == 6 && strcmp(argv[3], "--topology") == 0;
    if (argc != 3 && !topo_mode && (argc < 6 || argc > 9)) {
        fprintf(stderr, "usage: cost_eval MODEL BATCH [GFLOPS GBPS LAT_US [RANKS_PER_CORE [GEMM_N_HALF [BUSY_DELAY_US]]] | "
                        "--topology FILE TASKS] (plan from PTRAIN_* variables)\n");
        return 2;
    }
    pt_model_shape m;
    if (pt_model_shape_parse("model", argv[1], &m) < 0) {
        fprintf(stderr, "cost_eval: %s\n", pt_errmsg());
        return 2;
    }
    char *end;
    long batch = strtol(argv[2], &end, 10);
    if (*end || batch < 1 || batch > 1 << 30) {
        fprintf(stderr, "cost_eval: invalid batch '%s' (valid: 1..%d sequences)\n", argv[2], 1 << 30);
        return 2;
    }
    pt_plan p;
    pt_plan_default(&p);
    if (pt_plan_from_env(&p) < 0) {
        fprintf(stderr, "cost_eval: %s\n", pt_errmsg());
        return 2;
    }
    pt_hw hw = {.gemm_gflops = 10, .lat_s = {5e-6, 5e-6, 5e-6}, .gbps = {10, 10, 10}};
    pt_cost_where where;
    int pp_next[PT_PP_SPLIT_MAX];
    const pt_cost_where *w = NULL;
    if (topo_mode) { /* the node model's machine, one node of TASKS ranks */
        long tasks = strtol(argv[5], &end, 10);
        pt_topo t;
        pt_cluster c;
        int isl = 0, tpn;
        if (*end || tasks < 1 || tasks > 4096 || p.pp > PT_PP_SPLIT_MAX) {
            fprintf(stderr, "cost_eval: invalid TASKS '%s' (valid: 1..4096 ranks, pp <= %d)\n", argv[5], PT_PP_SPLIT_MAX);
            return 2;
        }
        if (pt_topo_load_file(&t, argv[4]) != 0) {
            fprintf(stderr, "cost_eval: %s\n", pt_errmsg());
            return 2;
        }
        tpn = (int)tasks;
        int rc = pt_topo_plan_hw(&t, tpn, NULL, &hw, &isl, NULL, 0);
        pt_topo_free(&t);
        if (rc < 0) {
            fprintf(stderr, "cost_eval: %s\n", pt_errmsg());
            return 2;
        }
        memset(&c, 0, sizeof c);
        c.nnodes = 1;
        c.tasks_per_node = &tpn;
        c.island_ranks = isl;
        c.hw = hw;
        if (pt_place_where(&c, &p, &where, pp_next, 0) != 0) {
            fprintf(stderr, "cost_eval: the plan is not a grid of %d ranks, or its tp is not of its mode's shape\n", tpn);
            return 2;
        }
        w = &where;
    } else if (argc >= 6) {
        double v[6] = {0, 0, 0, 0, 0, 0};
        for (int i = 0; i < argc - 3; i++) {
            v[i] = strtod(argv[3 + i], &end);
            if (*end || !(i >= 4 ? v[i] >= 0 : v[i] > 0) || v[i] > 1e12) {
                fprintf(stderr, "cost_eval: invalid %s '%s' (valid: a %s number)\n",
                        i == 0 ? "GFLOPS" : i == 1 ? "GBPS" : i == 2 ? "LAT_US" : i == 3 ? "RANKS_PER_CORE"
                        : i == 4 ? "GEMM_N_HALF" : "BUSY_DELAY_US",
                        argv[3 + i], i >= 4 ? "non-negative" : "positive");
                return 2;
            }
        }
        hw.gemm_gflops = v[0];
        for (int l = 0; l < PT_NET_N; l++) hw.gbps[l] = v[1], hw.lat_s[l] = v[2] * 1e-6;
        hw.ranks_per_core = v[3];
        hw.gemm_n_half = v[4];
        hw.busy_delay_s = v[5] * 1e-6;
    }
    const int link[PT_GRP_N] = {PT_NET_NODE, PT_NET_NODE, PT_NET_NODE, PT_NET_NODE, PT_NET_NODE};
    pt_cost c;
    if ((w ? pt_cost_eval_at(&m, (int)batch, &p, &hw, w, &c) : pt_cost_eval(&m, (int)batch, &p, &hw, link, &c)) < 0) {
        fprintf(stderr, "cost_eval: %s\n", pt_errmsg());
        return 2;
    }
    printf("{\"bytes\":{");
    for (int g = 0; g < PT_GRP_N; g++) printf("%s\"%s\":%.0f", g ? "," : "", pt_cost_group_name(g), c.bytes[g]);
    printf("},\"msgs\":{");
    for (int g = 0; g < PT_GRP_N; g++) printf("%s\"%s\":%.0f", g ? "," : "", pt_cost_group_name(g), c.msgs[g]);
    printf("},\"bytes_comm\":{");
    for (int k = 0; k < PT_SUB_N; k++) printf("%s\"%s\":%.0f", k ? "," : "", pt_cost_sub_name(k), c.sub_bytes[k]);
    printf("},\"flops\":%.6g,\"mem_params\":%.0f,\"mem_grads\":%.0f,\"mem_optim\":%.0f,\"mem_act\":%.0f,"
           "\"mem_total\":%.0f,\"mem_peak\":%.0f,\"bubble\":%.6g,\"t_compute\":%.6g,\"t_step\":%.6g}\n",
           c.flops, c.mem_params, c.mem_grads, c.mem_optim, c.mem_act, c.mem_total, c.mem_peak, c.bubble, c.t_compute, c.t_step);
    return 0;
}
