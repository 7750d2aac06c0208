/* SPDX-License-Identifier: MIT */
/* What ptrain-run's energy modules share (bin/run/energy_meter.c,
 * energy_plan.c, energy_sweep.c, energy_read.c; the overview is in
 * energy.c): the run's energy state and the functions one module calls in
 * another.  Every
 * function here is for one rank's run_energy; those said to be collective
 * must be called by every rank. */
#ifndef PTRAIN_RUN_ENERGY_H
#define PTRAIN_RUN_ENERGY_H
#include "run.h"
#include "energy/clock.h"
#include "energy/meter.h"
#include "energy/profile.h"
#include "parallel/context.h"
#include "pipeline/pipeline.h"
#include "plan/energy.h"

/* per (clock, type) of the sweep: summed time (s), energy (J), count,
 * clock (MHz) and energy count; summed over the ranks as ACC_K doubles */
typedef struct sweep_acc {
    double t, e, n, f, ne;
} sweep_acc;
enum { ACC_K = sizeof(sweep_acc) / sizeof(double) };
#define BASE_POINT (-2)

/* One rank's numbers of a step, allgathered. */
typedef struct step_rec {
    double e;        /* joules of the step (this rank's share) */
    double measured; /* 1 when e is a reading */
    double sched_s;  /* pipeline schedule wall time */
    double dp_rank;
    double win_e, win_t; /* energy and time from the first instruction's start to the last's end */
} step_rec;

struct run_energy {
    const run_setup *s;
    const pt_pctx *ctx;
    pt_pipeline *pipe;
    int world, rank, pp, v, m, dp;
    long start_step;
    pt_meter *meter;
    int measuring;       /* this rank reads a counter (0 after a read failed) */
    int nmeasured;       /* ranks that measure (start-up) */
    pt_clock *clk;
    int nclocked;        /* ranks that can set clocks */
    char meter_desc[400], clock_desc[300];
    /* the step */
    int in_step, ninstr, per_step;
    double e0, t0, w_e0, w_t0, w_e1, w_t1;
    /* totals */
    double my_total, job_total, job_time, tokens, run_e0;
    long steps;
    /* the plan */
    int plan_on, apply_ok, have_frontier;
    pt_energy_dag dag;
    pt_energy_profile prof;
    pt_energy_frontier fr;
    const double *base_freq; /* --energy-plan FILE */
    int base_k;              /* the plan's frontier point (intrinsic) */
    double base_time, base_energy; /* the plan's point, per pipeline iteration */
    double max_time, max_energy;   /* max clock, of the same source */
    char plan_name[160];
    int *rep_point;          /* [dp] each replica's point, BASE_POINT = its plan */
    int straggler, streak, calm, cand;
    double ach_t, ach_e;
    long ach_n, moves;
    double delay_s;          /* PTRAIN_ENERGY_DELAY on this rank's replica */
    /* the sweep */
    int sweep_on, nsweep, sweep_contrib; /* contrib: this rank's instructions count (it sets clocks, or none does) */
    int sweep_real;          /* this rank's controller really sets clocks (not dry) */
    long sweep_first;
    double sweep_f[64];      /* this rank's clock at each sweep index */
    sweep_acc *acc;          /* [nsweep][ntypes] */
    int ntypes, cur_idx;
    double idle_e, idle_t, last_e, last_t, ib_e, ib_t;
    int have_last;
};

/* ---- energy_read.c ---- */
/* The time now (seconds, pt_now) and this rank's meter reading into *j
 * (joules; 0 when it does not measure).  A failed read is reported once
 * (one line on stderr) and ends this rank's measuring. */
double run_energy_read(run_energy *e, double *j);

/* ---- energy_plan.c ---- */
/* The clock (MHz) of this rank's instruction (chunk, mb, bwd: the
 * pipeline hook's arguments) at its replica's current point: the plan
 * file's clock at BASE_POINT, else the frontier point's; 0 = leave the
 * clock as it is (no frontier, or an instruction outside the DAG). */
double run_energy_instr_freq(const run_energy *e, int chunk, int mb, int bwd);
/* Collective: the frontier of the run's pipeline iteration (plan_energy,
 * from --energy-profile, else the cost model and the power model over the
 * clocks every rank's controller offers), the plan's point, times and
 * energies (seconds, joules per pipeline iteration) and its name.  -1
 * with one line in pt_errmsg(). */
int run_energy_plan_start(run_energy *e);
/* Every rank, after each step, with the same allgathered records (all:
 * [world]): the straggler test (Perseus sec. 3) and the replicas' moves
 * along the frontier; rank 0 prints each change.  Nothing when no plan,
 * no frontier, dp < 2 or --energy-straggler off. */
void run_energy_straggler(run_energy *e, const step_rec *all);

/* ---- energy_sweep.c ---- */
/* Collective: prepare the sweep from step start_step + 1: e->acc
 * ([nsweep][ntypes]) and this rank's clocks (MHz, the top first, evenly
 * apart; none under the dry controller).  Out of memory on any rank: a
 * warning from rank 0 and no sweep. */
void run_energy_sweep_start(run_energy *e);
/* Collective (a no-op once done or when no sweep runs): the idle power,
 * the sums over the ranks, and the profile rank 0 writes to
 * --profile-energy (measured, else modelled; a failure is reported in one
 * line and the run goes on); the clocks reset. */
void run_energy_sweep_finish(run_energy *e);

#endif
