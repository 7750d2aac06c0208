/* SPDX-License-Identifier: MIT */
/* The planner tests' machine (test_search, test_resolve): nnodes nodes of
 * tpn ranks with rates like a GPU node -- fast islands of `island` ranks
 * (0: the node is one island), a slower node link, a slower network.
 * Bandwidths in GB/s per rank, latencies in s, memory in bytes per rank,
 * gemm_gflops in GFLOP/s.  tasks: [nnodes], filled with tpn, referenced by
 * the result. */
#ifndef PTRAIN_TESTS_PLAN_CLUSTER_H
#define PTRAIN_TESTS_PLAN_CLUSTER_H
#include <string.h>

#include "plan/search.h"

static inline pt_cluster plan_test_cluster(int nnodes, int tpn, int island, double gemm_gflops,
                                           double inter_gbps, int *tasks)
{
    pt_cluster c;
    memset(&c, 0, sizeof c);
    for (int i = 0; i < nnodes; i++) tasks[i] = tpn;
    c.nnodes = nnodes;
    c.tasks_per_node = tasks;
    c.island_ranks = island;
    c.hw.gemm_gflops = gemm_gflops;
    c.hw.mem_bytes = 80e9;
    c.hw.lat_s[PT_NET_ISLAND] = 3e-6;
    c.hw.lat_s[PT_NET_NODE] = 5e-6;
    c.hw.lat_s[PT_NET_INTER] = 10e-6;
    c.hw.gbps[PT_NET_ISLAND] = 300;
    c.hw.gbps[PT_NET_NODE] = 50;
    c.hw.gbps[PT_NET_INTER] = inter_gbps;
    return c;
}

#endif
