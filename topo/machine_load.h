/* SPDX-License-Identifier: MIT */
/* The one loader of a job's machine for the planner: the node model of
 * each kind of node loaded (pt_topo_plan_load), then the cluster built
 * from them (pt_plan_machine_build).  The SPANK plugin (spank/planning.c),
 * ptrain-run --mode auto (bin/run/plan.c) and ptrain-plan
 * (bin/plan/machine.c) build their machines through it.  It lives beside
 * pt_plan_machine_build in libptrain_topo_model, which all three link
 * (lib/plan is libc only: it cannot load an hwloc model). */
#ifndef PTRAIN_TOPO_MACHINE_LOAD_H
#define PTRAIN_TOPO_MACHINE_LOAD_H
#include <stddef.h>

#include "topo/topo_plan.h"

/* One kind of node: where its model comes from (in) and what was loaded
 * (out). */
typedef struct pt_machine_kind {
    /* in: one of model, path (NULL or "": this node's hwloc model) and estimates */
    const pt_topo *model; /* a model loaded already (used as is, not freed) */
    const char *path;     /* a model file: ptrain-topo --save JSON/XML or hwloc XML */
    int estimates;        /* no model: pt_topo_plan_hw's estimates (model and path unused) */
    unsigned flags;       /* pt_topo_plan_load's PT_TOPO_LOAD_* for path and hwloc */
    const char *what;     /* the setting that named path, in its warnings ("topology", "--topology") */
    const char *name;     /* its name in the machine (notes, m->names; NULL: source) */
    /* out */
    int from;             /* PT_TOPO_FROM_*: PATH (also a given model), HWLOC, NONE (the estimates) */
    int gpus;             /* the model's GPUs (0 without a model) */
    char source[256];     /* the model's source (pt_topo.source), "defaults" without a model */
} pt_machine_kind;

/* Load the nkinds kinds' models and build m, a machine of nnodes nodes:
 * node i is of kind kind_of[i] (NULL: every node kind 0) and runs tasks[i]
 * tasks (tasks NULL or an entry 0: its kind's GPUs, else 1; m->tasks holds
 * the counts used).  The rates are each kind's pt_topo_plan_hw (measured
 * where its model holds a measurement, else estimated: GEMM rates in
 * GFLOP/s, bandwidths in GB/s), ov's over them (may be NULL), and
 * inter_lat_us the network's latency in microseconds (0: the model's).
 * pt_topo_plan_load's warnings go to notes (may be NULL; notes_len bytes).
 * 0, or -1 with one line in pt_errmsg(): *bad (may be NULL) is the kind
 * whose model did not load (the loader's line, "FILE: ..."), or -1 when
 * building failed (pt_plan_machine_build's line: "node model NAME: ...",
 * "machine: ...") or memory ran out.  The models loaded here are freed
 * before it returns; free m with pt_plan_machine_free. */
int pt_machine_load(pt_plan_machine *m, int nkinds, pt_machine_kind *kinds, const int *kind_of, const int *tasks,
                    int nnodes, const pt_topo_hw_override *ov, double inter_lat_us, char *notes, size_t notes_len,
                    int *bad);

#endif
