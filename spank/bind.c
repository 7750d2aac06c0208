/* SPDX-License-Identifier: MIT */
/* Per-task binding, mpibind-style (LLNL mpibind: one device and a CPU set
 * near it per task, the node's cores split among its tasks): what
 * pt_spank_bind_compute gives each of a node's tasks; see spank_util.h. */
#include "spank/spank_util.h"
#include "core/core.h"

#include <hwloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "topo/topo.h"

/* The locality list of task l: its GPU's local CPUs, else its NUMA node's. */
static const char *task_locality(const pt_topo *t, int l, int ntasks, int *gpu, int *numa)
{
    *gpu = -1;
    *numa = -1;
    if (t->ngpus > 0 && ntasks <= t->ngpus) {
        /* the l-th GPU in island order (pt_topo_device_order): consecutive
         * tasks, and so a tensor group's consecutive ranks, fill an NVLink
         * island first, as the planner priced them */
        int order[64];
        *gpu = t->ngpus <= 64 && pt_topo_device_order(t, order, 64) == t->ngpus ? order[l] : l;
        if (t->gpu[*gpu].pci.cpus[0]) return t->gpu[*gpu].pci.cpus;
    }
    if (t->nnuma > 0) {
        *numa = (int)((long long)l * t->nnuma / ntasks);
        if (*gpu >= 0 && t->gpu[*gpu].pci.numa >= 0) *numa = -1;
        if (*numa >= 0) return t->numa[*numa].cpus;
    }
    return "";
}

/* Cores (or PUs without a machine) of set, in order: their cpusets. */
static int set_units(hwloc_topology_t m, hwloc_const_bitmap_t set, hwloc_bitmap_t *units, int cap)
{
    int n = 0;
    if (m) {
        int nc = hwloc_get_nbobjs_inside_cpuset_by_type(m, set, HWLOC_OBJ_CORE);
        for (int i = 0; i < nc && n < cap; i++) {
            hwloc_obj_t c = hwloc_get_obj_inside_cpuset_by_type(m, set, HWLOC_OBJ_CORE, (unsigned)i);
            units[n] = hwloc_bitmap_dup(c->cpuset);
            hwloc_bitmap_and(units[n], units[n], set);
            n++;
        }
        if (n > 0) return n;
    }
    int id;
    hwloc_bitmap_foreach_begin(id, set)
        if (n < cap) {
            units[n] = hwloc_bitmap_alloc();
            hwloc_bitmap_only(units[n], (unsigned)id);
            n++;
        }
    hwloc_bitmap_foreach_end();
    return n;
}

#define MAX_UNITS 4096

int pt_spank_bind_compute(const pt_topo *t, void *machine, const char *allowed, int local,
                          int ntasks, pt_spank_binding *out)
{
    if (!t || ntasks < 1 || local < 0 || local >= ntasks)
        return pt_fail(PT_EINVAL, "binding: task %d of %d is out of range (valid: 0..%d)", local,
                       ntasks, ntasks - 1);
    hwloc_topology_t m = machine;
    memset(out, 0, sizeof *out);
    out->gpu = out->nic = -1;
    int rc = -1;
    hwloc_bitmap_t allow = hwloc_bitmap_alloc(), loc = hwloc_bitmap_alloc(),
                   mine = hwloc_bitmap_alloc();
    hwloc_bitmap_t *units = calloc(MAX_UNITS, sizeof *units);
    int nunits = 0;
    if (!allow || !loc || !mine || !units) {
        pt_fail(PT_ENOMEM, "binding: out of memory");
        goto out;
    }
    if (allowed) {
        if (hwloc_bitmap_list_sscanf(allow, allowed) < 0) {
            pt_fail(PT_EINVAL, "binding: cannot read the allowed CPU list '%s'", allowed);
            goto out;
        }
    } else if (m) {
        hwloc_bitmap_copy(allow, hwloc_topology_get_allowed_cpuset(m));
    } else {
        hwloc_bitmap_fill(allow);
    }
    int gpu, numa;
    const char *mylist = task_locality(t, local, ntasks, &gpu, &numa);
    out->gpu = gpu;
    if (hwloc_bitmap_list_sscanf(loc, mylist) < 0) {
        pt_fail(PT_EINVAL, "binding: cannot read the CPU list '%s' of the node model", mylist);
        goto out;
    }
    hwloc_bitmap_and(loc, loc, allow);
    int k = 0, share = 0;
    if (hwloc_bitmap_iszero(loc)) {
        /* the locality is not on this machine (or the model has none): split
         * the whole allowed set among all tasks */
        hwloc_bitmap_copy(loc, allow);
        k = local;
        share = ntasks;
        snprintf(out->where, sizeof out->where, "node");
    } else {
        for (int j = 0; j < ntasks; j++) {
            int g2, n2;
            const char *other = task_locality(t, j, ntasks, &g2, &n2);
            if (strcmp(other, mylist) != 0) continue;
            if (j < local) k++;
            share++;
        }
        if (gpu >= 0) snprintf(out->where, sizeof out->where, "GPU %s", t->gpu[gpu].pci.busid);
        else if (numa >= 0) snprintf(out->where, sizeof out->where, "NUMA %d", t->numa[numa].os_index);
        else snprintf(out->where, sizeof out->where, "node");
    }
    if (hwloc_bitmap_iszero(loc)) { /* nothing allowed at all: leave the task as is */
        rc = 0;
        goto out;
    }
    nunits = set_units(m, loc, units, MAX_UNITS);
    if (nunits >= share) {
        long lo = (long)k * nunits / share, hi = (long)(k + 1) * nunits / share;
        for (long u = lo; u < hi; u++) hwloc_bitmap_or(mine, mine, units[u]);
    } else {
        hwloc_bitmap_copy(mine, units[(long)k * nunits / share]);
    }
    hwloc_bitmap_list_snprintf(out->cpus, sizeof out->cpus, mine);

    /* the nearest InfiniBand/RoCE HCA */
    int best = -1, best_class = -1;
    for (int i = 0; i < t->nnics; i++) {
        if (t->nic[i].kind != PT_NIC_IB && t->nic[i].kind != PT_NIC_ROCE) continue;
        int cls;
        if (gpu >= 0 && t->gn_class) cls = t->gn_class[gpu * t->nnics + i];
        else {
            int mynuma = gpu >= 0 ? t->gpu[gpu].pci.numa : numa >= 0 ? t->numa[numa].os_index : -1;
            cls = mynuma >= 0 && t->nic[i].pci.numa == mynuma ? PT_LINK_PHB : PT_LINK_SYS;
        }
        if (cls > best_class) {
            best_class = cls;
            best = i;
        }
    }
    out->nic = best;
    rc = 0;
out:
    for (int i = 0; i < nunits; i++) hwloc_bitmap_free(units[i]);
    free(units);
    if (allow) hwloc_bitmap_free(allow);
    if (loc) hwloc_bitmap_free(loc);
    if (mine) hwloc_bitmap_free(mine);
    return rc;
}
