/* SPDX-License-Identifier: MIT */
/* Energy planning on the time-energy frontier of one training iteration
 * (Chung et al., "Perseus: Removing Energy Bloat from Large Model
 * Training", SOSP 2024).  libc only, beside the cost model.
 *
 * One iteration of a pipeline is a DAG of instructions: the forward and
 * the backward of every microbatch on every virtual stage, in the order
 * each pp rank runs them (lib/contract/schedule.h's action lists: GPipe,
 * 1F1B, interleaved 1F1B), with the data dependencies between stages.
 * Each instruction can run at one of several clocks, each with its time
 * and energy (a profile: measured, or modelled, pt_energy_profile_model).
 * Stages are never perfectly balanced, so instructions off the critical
 * path finish early and wait: running them slower saves energy without
 * lengthening the iteration (Perseus's "intrinsic energy bloat").  The
 * time-energy frontier gives, for every iteration time, the least energy
 * and the clock of every instruction.
 *
 * The frontier is computed as a time-cost tradeoff (Phillips and Dessouky,
 * "Solving the project time/cost tradeoff problem using the minimal cut
 * concept", Management Science 24(4), 1977), Perseus's algorithm (sec. 4):
 * time is counted in units of tau; every instruction's energy, less the
 * idle power it displaces, is made a convex, non-increasing function of
 * its duration (the lower convex hull of its profile's points); starting
 * with every instruction at its cheapest duration, each step shortens the
 * iteration by one unit at the least energy increase: on the subgraph of
 * critical instructions it shortens those across a minimum s-t cut whose
 * forward capacities are the energy of shortening an instruction by a
 * unit (infinite at its fastest clock) and lengthens those crossing back
 * (lower bounds: the energy lengthening saves).  The cut is found with a
 * max-flow with lower bounds (Dinic's algorithm).  The steps stop when
 * the cut's capacity is infinite: the critical path is at its fastest. */
#ifndef PTRAIN_ENERGY_H
#define PTRAIN_ENERGY_H
#include "core/core.h"

#include <stddef.h>

/* ---- the iteration's DAG ---------------------------------------------- */

/* One instruction: the forward or backward of microbatch mb on chunk
 * `chunk` of pp rank `rank` (virtual stage stage = chunk * pp + rank). */
typedef struct pt_energy_instr {
    int rank, chunk, stage, mb;
    int bwd;   /* 0 forward, 1 backward */
    int type;  /* its profile: (rank * v + chunk) * 2 + bwd; instructions of one type share it */
} pt_energy_instr;

/* A dependency: instruction `to` starts after `from` ends, plus delay_s
 * (a point-to-point transfer between ranks; 0 on one rank). */
typedef struct pt_energy_edge {
    int from, to;
    double delay_s;
} pt_energy_edge;

typedef struct pt_energy_dag {
    int pp, m, v, kind; /* the schedule (a pt_schedule) */
    int n;              /* instructions: 2 * m * pp * v */
    pt_energy_instr *in;
    int nedges;
    pt_energy_edge *e;
    int ntypes;         /* 2 * pp * v */
} pt_energy_dag;

/* Build the DAG of one iteration of schedule `kind` over pp ranks with m
 * microbatches and v chunks per rank, from each rank's action list
 * (pt_pp_schedule_build): each rank runs its compute actions in list
 * order; forward of stage s before forward of s + 1, the last stage's
 * forward before its backward, backward of s + 1 before backward of s.
 * p2p_s: the delay of each dependency between ranks (seconds, >= 0).
 * Errors: pt_pp_schedule_check's (PT_EINVAL), PT_ENOMEM. */
int pt_energy_dag_build(int kind, int pp, int m, int v, double p2p_s, pt_energy_dag *d);
void pt_energy_dag_free(pt_energy_dag *d);

/* ---- profiles ---------------------------------------------------------- */

/* One clock of one instruction type: its time (s) and energy (J). */
typedef struct pt_energy_choice {
    double freq_mhz;
    double time_s;
    double energy_j;
} pt_energy_choice;

typedef struct pt_energy_profile {
    int ntypes;
    int *nchoices;              /* [ntypes] */
    pt_energy_choice **choice;  /* [ntypes][nchoices[t]], any order */
    double idle_w;              /* power of one device while it waits for a peer (W) */
    int modelled;               /* 1: from pt_energy_profile_model, not measured */
} pt_energy_profile;

/* A power model for a device whose clock runs from f_min to f_max (MHz):
 * at clock f an instruction whose time at f_max is t takes
 * t (mem_share + (1 - mem_share) f_max / f) (the compute-bound share scales
 * with the clock, the memory- and communication-bound share does not) and
 * draws static_w + dynamic_w (f / f_max)^3 (dynamic power ~ f V^2 with the
 * voltage scaling with f); a device waiting for a peer draws idle_w.  The
 * figures are estimates unless measured; every table marks them
 * "modelled". */
typedef struct pt_energy_power_model {
    double f_min_mhz, f_max_mhz;
    int nfreq;          /* clocks from f_min to f_max, evenly spaced (>= 2) */
    double static_w, dynamic_w, idle_w;
    double mem_share;   /* in [0, 1) */
} pt_energy_power_model;

/* Data-sheet-style defaults: "gpu" (an H100 SXM-like 700 W part, clocks
 * 810-1980 MHz) or "cpu" (a server socket share per rank).  NULL for an
 * unknown name. */
const pt_energy_power_model *pt_energy_power_model_named(const char *name);

/* Build a modelled profile: type t's time at f_max is type_time_s[t]
 * (seconds, > 0).  Free with pt_energy_profile_free.  PT_EINVAL (a bad
 * model or time, one line), PT_ENOMEM. */
int pt_energy_profile_model(const pt_energy_power_model *pm, int ntypes, const double *type_time_s,
                            pt_energy_profile *out);
void pt_energy_profile_free(pt_energy_profile *p);

/* ---- the frontier ------------------------------------------------------ */

typedef struct pt_energy_point {
    double time_s;   /* iteration time of the chosen clocks (the DAG's longest path) */
    double energy_j; /* the instructions' energy plus idle_w on every rank for the rest of time_s */
    int *choice;     /* [dag->n] the clock of every instruction: an index into its type's choices */
} pt_energy_point;

typedef struct pt_energy_frontier {
    int npoints;
    pt_energy_point *p;        /* Pareto points, ordered by time (ascending), energy descending */
    pt_energy_point max_clock; /* every instruction at its fastest choice */
    pt_energy_point min_energy;/* every instruction at its least-energy choice (idle included) */
    int intrinsic;             /* index of the fastest point: max_clock's time, least energy */
    double tau_s;              /* the time unit the steps used */
    int steps;                 /* cut steps taken */
} pt_energy_frontier;

/* The widest range of times one instruction type's clocks may span: its
 * slowest clock at most this many times its fastest.  No device's clock
 * range comes near (a GPU's lowest clock is about 1/10 of its highest, a
 * CPU's 1/15, and an instruction's time scales with the clock at most), so
 * a wider profile holds a broken measurement (a stalled step, seconds
 * written for microseconds), and planning on it would only spread the
 * frontier's units over a time no run takes. */
#define PT_ENERGY_MAX_SPREAD 1000
/* The most time units the frontier divides the slowest iteration into
 * (every instruction at its slowest clock): it bounds every duration and
 * every cost curve to that many units, so the memory (12 bytes per unit of
 * each type's curve), the integer times and the cut steps are bounded
 * whatever the profile's times. */
#define PT_ENERGY_MAX_UNITS 1000000

/* Compute the frontier of dag under profile pr with time unit tau_s
 * (seconds; 0 = 1/20 of the fastest clock's time, or 1/PT_ENERGY_MAX_UNITS
 * of the slowest iteration when that is longer).  At most max_steps cut
 * steps (0 = no limit but the units').  Times are planned in whole units
 * (an instruction's choice time rounded up), and each point's clocks are
 * the slowest whose time fits its planned duration; its time_s and
 * energy_j are those clocks' (the longest path, recomputed), so a point
 * is achievable as printed.  Cost: O(steps * max-flow on the critical
 * subgraph), the subgraph at most 2 n + 2 nodes; a step moves the
 * iteration time by at least one unit, mostly by a whole segment of a
 * curve.  Errors: PT_EINVAL (a profile that does not cover the DAG's
 * types, a choice with time <= 0, a type whose slowest clock takes more
 * than PT_ENERGY_MAX_SPREAD times its fastest, times or energies whose
 * sums over an iteration are not finite, a tau_s that cuts the slowest
 * iteration into more than PT_ENERGY_MAX_UNITS units), PT_ENOMEM;
 * one line in pt_errmsg(). */
int pt_energy_frontier_compute(const pt_energy_dag *dag, const pt_energy_profile *pr, double tau_s, int max_steps,
                               pt_energy_frontier *out);
void pt_energy_frontier_free(pt_energy_frontier *f);

/* The point with the least energy whose time is at most max_time_s, or -1
 * (all slower).  With max_time_s = max_clock.time_s (1 + slowdown) it is the
 * deadline point of a permitted slowdown; with a straggler's iteration time
 * it is the extrinsic point (Perseus sec. 3: the others slow to the
 * straggler's pace). */
int pt_energy_frontier_at(const pt_energy_frontier *f, double max_time_s);

/* Time and energy of an arbitrary assignment (choice[dag->n]) under pr:
 * the longest path and the energy as pt_energy_point defines them. */
void pt_energy_evaluate(const pt_energy_dag *dag, const pt_energy_profile *pr, const int *choice, double *time_s,
                        double *energy_j);

#endif
