/* SPDX-License-Identifier: MIT */
/* ptrain-plan's modules (bin/plan/): main.c runs them in order.
 *
 *   options.c   the command line: usage, the options, their checks
 *   machine.c   the job's nodes from the node models (plan_machine), the
 *               planner's search and the chosen plan's time-energy
 *               frontier, written with --energy-plan-out (plan_search)
 *   output.c    --env, --json or the text explanation (plan_print)
 *
 * Each stage returns -1 to go on, or the exit status to leave with after
 * printing one line on stderr (ptrain-plan(1), EXIT STATUS): 0 (--help,
 * --version), PT_EXIT_INPUT (2) bad input or no plan fits, PT_EXIT_FAIL (1) out
 * of memory or a write failure.  A stage that fails frees what the stages
 * before it made. */
#ifndef PTRAIN_PLAN_TOOL_H
#define PTRAIN_PLAN_TOOL_H
#include "bin/tool_util.h"
#include "core/core.h"
#include "energy/profile.h"
#include "plan/energy.h"
#include "contract/plan.h"
#include "plan/planner.h"
#include "plan/search.h"
#include "topo/topo.h"
#include "topo/topo_plan.h"


/* One --topology FILE[:COUNT]: the file and its node count (0 = none
 * given), as pt_topo_plan_arg_parse reads it (ptrain-run's too). */
typedef struct topo_arg {
    char path[4096];
    int count;
} topo_arg;

#define MAX_TOPOLOGIES 16

/* The command line (plan_options; 0 / NULL = not given where said). */
typedef struct plan_cmdline {
    topo_arg topo[MAX_TOPOLOGIES]; /* --topology, in node order */
    int ntopo;
    int nodes, tpn;                /* --nodes (plan_machine sets it), --tasks-per-node */
    int batch;                     /* --batch (default 512) */
    int out;                       /* 'j' --json, 'e' --env, 0 text */
    int energy;                    /* --energy, or any energy option */
    double slowdown, straggler;    /* --energy-slowdown / 100, --energy-straggler / 1000 (seconds) */
    const char *power_model;       /* --power-model (plan_machine: by the node models when not given) */
    const char *profile_path;      /* --energy-profile */
    const char *plan_out;          /* --energy-plan-out */
    pt_topo_hw_override ov;        /* --mem-gb, --inter-gbps, --gemm-gflops, --gemm-gflops-bf16 */
    pt_plan_limits lim;            /* --mixed-nodes */
    pt_plan_request req;           /* the pins, --model, --batch (global_batch) */
} plan_cmdline;

/* What the planning made (plan_machine, plan_search), for plan_print. */
typedef struct plan_run {
    int nkinds;                    /* node models (1 without --topology) */
    char names[MAX_TOPOLOGIES][256]; /* each node model's source */
    int *tasks;                    /* [nodes] tasks on each node */
    pt_plan_machine mach;
    pt_planner *pl;                /* the search, done */
    int status;                    /* PT_EXIT_FAIL when --energy-plan-out was not written, else 0 */
    pt_energy_dag edag;            /* --energy: the chosen plan's iteration, */
    pt_energy_profile eprof;       /* the profile it was priced with */
    pt_energy_frontier efront;     /* and its time-energy frontier */
    char esource[600];             /* "profile FILE" or "NAME power model" */
} plan_run;

/* ---- options.c ---- */
/* Parse argv into *op (defaults first): -1 to go on, else the exit status
 * (0 after --help or --version, PT_EXIT_INPUT with one line for a bad option,
 * PT_EXIT_FAIL when the default model cannot be set).  Checks --energy-plan-out
 * (pt_output_check) without writing it. */
int plan_options(int argc, char **argv, plan_cmdline *op);

/* ---- machine.c ---- */
/* The job's nodes: load the node models (--topology, else this node's),
 * give each node its kind and tasks, build run->mach (run->tasks,
 * run->names, run->nkinds); sets op->nodes and, when not given,
 * op->power_model ("gpu" when a node model has GPUs, else "cpu").  -1, or
 * PT_EXIT_INPUT / PT_EXIT_FAIL with one line on stderr. */
int plan_machine(plan_cmdline *op, plan_run *run);
/* The planner's search over run->mach (its notes on stderr), then with
 * --energy the chosen plan's frontier (plan_energy, bin/plan_energy.h)
 * and with --energy-plan-out its point written (run->status PT_EXIT_FAIL
 * when that fails; the output still follows).  -1, or PT_EXIT_INPUT with one
 * line, everything freed. */
int plan_search(plan_cmdline *op, plan_run *run);

/* ---- output.c ---- */
/* Print the plan to stdout as op->out asks: --env (pt_plan_export),
 * --json (one object: machine, best, runners-up, energy) or the text
 * explanation.  0, or PT_EXIT_FAIL (out of memory, a write failure of
 * --env). */
int plan_print(const plan_cmdline *op, plan_run *run);

#endif
