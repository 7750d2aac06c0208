/* SPDX-License-Identifier: MIT */
/* ptrain topology: host memory bandwidth per NUMA node (STREAM copy). */
#define _POSIX_C_SOURCE 200809L
#include "topo/topo.h"
#include "core/core.h"

#include <hwloc.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* One measurement: CPUs of `cpu` copy between two arrays bound to `mem`. */
static int copy_bw(hwloc_topology_t h, hwloc_obj_t cpu, hwloc_obj_t mem, size_t bytes, int reps, double *gbps)
{
    size_t n = bytes / sizeof(double);
    double *a = hwloc_alloc_membind(h, n * sizeof(double), mem->nodeset, HWLOC_MEMBIND_BIND, HWLOC_MEMBIND_BYNODESET);
    double *b = hwloc_alloc_membind(h, n * sizeof(double), mem->nodeset, HWLOC_MEMBIND_BIND, HWLOC_MEMBIND_BYNODESET);
    if (!a || !b) {
        if (a) hwloc_free(h, a, n * sizeof(double));
        if (b) hwloc_free(h, b, n * sizeof(double));
        return pt_fail(PT_ENOMEM, "memory probe: cannot allocate 2 x %zu bytes on NUMA node %u", bytes, mem->os_index);
    }
    int nthreads = hwloc_get_nbobjs_inside_cpuset_by_type(h, cpu->cpuset, HWLOC_OBJ_CORE);
    if (nthreads < 1) nthreads = 1;
    double best = 0;
#ifdef _OPENMP
#pragma omp parallel num_threads(nthreads)
#endif
    {
        hwloc_set_cpubind(h, cpu->cpuset, HWLOC_CPUBIND_THREAD);
#ifdef _OPENMP
#pragma omp for schedule(static)
#endif
        for (size_t i = 0; i < n; i++) { a[i] = (double)(i & 1023) + 0.5; b[i] = 0; } /* first touch by the copying threads */
        for (int r = 0; r < reps + 1; r++) {
            double t0 = 0;
#ifdef _OPENMP
#pragma omp barrier
#pragma omp master
#endif
            t0 = now_s();
#ifdef _OPENMP
#pragma omp for schedule(static)
#endif
            for (size_t i = 0; i < n; i++) b[i] = a[i];
#ifdef _OPENMP
#pragma omp master
#endif
            {
                double dt = now_s() - t0;
                double g = 2.0 * (double)(n * sizeof(double)) / dt / 1e9;
                if (r > 0 && g > best) best = g;   /* pass 0 warms up */
            }
        }
    }
    int ok = b[n / 2] == a[n / 2];
    hwloc_free(h, a, n * sizeof(double));
    hwloc_free(h, b, n * sizeof(double));
    if (!ok) return pt_fail(PT_EINVAL, "memory probe: copy kernel produced a wrong result");
    *gbps = best;
    return PT_OK;
}

int pt_topo_probe_membw(pt_topo *t, size_t bytes, int reps)
{
    if (bytes < (1u << 20) || reps < 1)
        return pt_fail(PT_EINVAL, "memory probe: %zu bytes x %d passes (need >= 1 MiB and >= 1 pass)", bytes, reps);
    hwloc_topology_t h = (hwloc_topology_t)t->hw;
    if (!h || !hwloc_topology_is_thissystem(h))
        return pt_fail(PT_EUNSUPP, "memory probe: the model comes from '%s', not from this machine", t->source);
    hwloc_bitmap_t saved = hwloc_bitmap_alloc();
    if (!saved) return pt_fail(PT_ENOMEM, "memory probe: out of memory");
    hwloc_get_cpubind(h, saved, HWLOC_CPUBIND_THREAD);
    int n = t->nnuma, rc = PT_OK;
    for (int i = 0; i < n && !rc; i++)
        for (int j = 0; j < n && !rc; j++) {
            if (n > 8 && i != j) continue;   /* full matrix only on small machines */
            hwloc_obj_t ci = hwloc_get_numanode_obj_by_os_index(h, (unsigned)t->numa[i].os_index);
            hwloc_obj_t mj = hwloc_get_numanode_obj_by_os_index(h, (unsigned)t->numa[j].os_index);
            if (!ci || !mj || hwloc_bitmap_iszero(ci->cpuset)) continue;  /* CPU-less (e.g. HBM/CXL) node */
            double g = 0;
            rc = copy_bw(h, ci, mj, bytes, reps, &g);
            t->numa_gbps[i * n + j] = g;
        }
    for (int i = 0; i < n; i++) t->numa[i].membw_gbps = t->numa_gbps[i * n + i];
    hwloc_set_cpubind(h, saved, HWLOC_CPUBIND_THREAD);
    hwloc_bitmap_free(saved);
    return rc;
}
