/* SPDX-License-Identifier: MIT */
/* The time-energy frontier (lib/plan/energy.h) against brute force on
 * small iteration DAGs built from the real schedules, and its properties
 * on larger ones: the fastest point keeps the max-clock time, slows only
 * instructions with slack, saves nothing where nothing has slack, and the
 * deadline point; profiles whose times span more than the frontier's units
 * (PT_ENERGY_MAX_SPREAD, PT_ENERGY_MAX_UNITS) end quickly, refused or
 * planned in coarser units. */
#include "plan/energy.h"
#include "contract/schedule.h"
#include "core/core.h"
#include "../tap.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static pt_rng rng; /* lib/core's generator */
static double urand(void) { return pt_rng_uniform(&rng); } /* [0, 1) */

/* A profile whose choices sit on every whole unit between t0 and t0 + nc - 1
 * (tau = 1) with E - idle t convex and decreasing in t: the cut algorithm
 * is exact there, so the frontier must equal brute force. */
static int exact_profile(int ntypes, int nc, double idle, pt_energy_profile *p)
{
    memset(p, 0, sizeof *p);
    p->ntypes = ntypes;
    p->idle_w = idle;
    p->nchoices = calloc((size_t)ntypes, sizeof(int));
    p->choice = calloc((size_t)ntypes, sizeof *p->choice);
    if (!p->nchoices || !p->choice) return -1;
    for (int t = 0; t < ntypes; t++) {
        p->nchoices[t] = nc;
        p->choice[t] = calloc((size_t)nc, sizeof **p->choice);
        if (!p->choice[t]) return -1;
        double t0 = 2 + (int)(urand() * 4), e = 10 + 20 * urand(), step = 2 + 6 * urand();
        for (int k = 0; k < nc; k++) {
            double time = t0 + k;
            p->choice[t][k] = (pt_energy_choice){2000 - 100 * k, time, e + idle * time};
            e -= step;          /* E' decreases ... */
            step *= 0.3 + 0.6 * urand(); /* ... by less each unit: convex */
        }
    }
    return 0;
}

/* Every assignment of choices: the least energy for each time bound. */
static int brute_force_check(const char *what, const pt_energy_dag *d, const pt_energy_profile *pr)
{
    pt_energy_frontier f;
    if (pt_energy_frontier_compute(d, pr, 1.0, 0, &f) < 0) {
        tap_ok(0, "%s: frontier computed (%s)", what, pt_errmsg());
        return -1;
    }
    int n = d->n, nc = pr->nchoices[0];
    long total = 1;
    for (int i = 0; i < n; i++) total *= nc;
    int *ch = calloc((size_t)n, sizeof(int));
    /* best energy per integer time */
    int tmax = 4096;
    double *best = malloc(sizeof(double) * (size_t)tmax);
    for (int t = 0; t < tmax; t++) best[t] = INFINITY;
    for (long a = 0; a < total; a++) {
        long x = a;
        for (int i = 0; i < n; i++) {
            ch[i] = (int)(x % nc);
            x /= nc;
        }
        double T, E;
        pt_energy_evaluate(d, pr, ch, &T, &E);
        int ti = (int)llround(T);
        if (ti < tmax && E < best[ti]) best[ti] = E;
    }
    /* bf(<= T): least energy at a time of at most T */
    double run = INFINITY;
    int worst_t = -1, checked = 0;
    double worst = 0;
    for (int t = 0; t < tmax; t++) {
        if (best[t] < run) run = best[t];
        if (!isfinite(run)) continue;
        int k = pt_energy_frontier_at(&f, t);
        double fe = k >= 0 ? f.p[k].energy_j : INFINITY;
        double diff = fabs(fe - run) / run;
        if (!(diff <= worst)) {
            worst = diff;
            worst_t = t;
        }
        checked++;
        if (best[t] == run && t > (int)llround(f.min_energy.time_s)) break;
    }
    tap_ok(worst < 1e-9, "%s (%d instructions, %ld assignments): the frontier's least energy equals brute force's at "
           "every time bound (%d bounds, worst rel diff %.2e at T=%d), %d points in %d steps", what, n, total, checked,
           worst, worst_t, f.npoints, f.steps);
    int mono = 1;
    for (int i = 1; i < f.npoints; i++)
        mono &= f.p[i].time_s > f.p[i - 1].time_s && f.p[i].energy_j < f.p[i - 1].energy_j;
    tap_ok(mono, "%s: the frontier's points are ordered by time, each cheaper than the faster ones", what);
    free(ch);
    free(best);
    pt_energy_frontier_free(&f);
    return 0;
}

/* Start times of the max-clock schedule, its slack per instruction. */
static void slack_of(const pt_energy_dag *d, const pt_energy_profile *pr, const int *choice, double *slack)
{
    int n = d->n;
    double *es = calloc((size_t)n, sizeof(double)), *lf = malloc(sizeof(double) * (size_t)n);
    double *dur = malloc(sizeof(double) * (size_t)n);
    for (int i = 0; i < n; i++) dur[i] = pr->choice[d->in[i].type][choice[i]].time_s;
    /* Bellman-Ford style relaxation suffices on these small DAGs */
    for (int pass = 0; pass < n; pass++)
        for (int k = 0; k < d->nedges; k++) {
            const pt_energy_edge *e = &d->e[k];
            double s = es[e->from] + dur[e->from] + e->delay_s;
            if (s > es[e->to]) es[e->to] = s;
        }
    double T = 0;
    for (int i = 0; i < n; i++) T = fmax(T, es[i] + dur[i]);
    for (int i = 0; i < n; i++) lf[i] = T;
    for (int pass = 0; pass < n; pass++)
        for (int k = 0; k < d->nedges; k++) {
            const pt_energy_edge *e = &d->e[k];
            double f = lf[e->to] - dur[e->to] - e->delay_s;
            if (f < lf[e->from]) lf[e->from] = f;
        }
    for (int i = 0; i < n; i++) slack[i] = lf[i] - es[i] - dur[i];
    free(es), free(lf), free(dur);
}

int main(void)
{
    const uint64_t seed = 0x9e3779b97f4a7c15ull ^ (uint64_t)time(NULL);
    pt_rng_seed(&rng, seed, 0);
    tap_diag("seed %llu", (unsigned long long)seed);

    /* 1. brute force on the real schedules' DAGs */
    struct { int kind, pp, m, v, nc; const char *name; } small[] = {
        {PT_SCHED_1F1B, 2, 2, 1, 3, "1f1b pp=2 m=2"},
        {PT_SCHED_GPIPE, 2, 2, 1, 3, "gpipe pp=2 m=2"},
        {PT_SCHED_1F1B, 3, 1, 1, 3, "1f1b pp=3 m=1"},
        {PT_SCHED_INTERLEAVED, 2, 2, 2, 2, "interleaved pp=2 m=2 v=2"},
    };
    for (size_t c = 0; c < sizeof small / sizeof small[0]; c++) {
        pt_energy_dag d;
        pt_energy_profile pr;
        if (pt_energy_dag_build(small[c].kind, small[c].pp, small[c].m, small[c].v, 0, &d) < 0) {
            tap_ok(0, "%s: DAG built (%s)", small[c].name, pt_errmsg());
            continue;
        }
        exact_profile(d.ntypes, small[c].nc, 0.5 + urand(), &pr);
        brute_force_check(small[c].name, &d, &pr);
        pt_energy_profile_free(&pr);
        pt_energy_dag_free(&d);
    }

    /* 2. a 1F1B pipeline of 4 stages, the last one heavier (the head), on the
     * modelled GPU: the fastest point keeps the max-clock time and saves
     * energy, by slowing only instructions with slack */
    pt_energy_dag d;
    pt_energy_dag_build(PT_SCHED_1F1B, 4, 8, 1, 20e-6, &d);
    double tt[8];
    for (int t = 0; t < 8; t++) {
        int rank = t / 2, bwd = t % 2;
        tt[t] = (bwd ? 2.0 : 1.0) * (rank == 3 ? 1.6e-3 : 1.0e-3) * (0.9 + 0.2 * urand());
    }
    pt_energy_profile pr;
    int rc = pt_energy_profile_model(pt_energy_power_model_named("gpu"), d.ntypes, tt, &pr);
    tap_ok(rc == 0 && pr.modelled, "modelled GPU profile for 8 instruction types");
    pt_energy_frontier f;
    rc = pt_energy_frontier_compute(&d, &pr, 0, 0, &f);
    tap_ok(rc == 0 && f.npoints >= 3, "unbalanced 1f1b pp=4 m=8: a frontier of %d points (%d steps, unit %.2f us)",
           f.npoints, f.steps, f.tau_s * 1e6);
    if (rc == 0) {
        const pt_energy_point *in = &f.p[f.intrinsic];
        tap_ok(f.intrinsic >= 0 && in->time_s <= f.max_clock.time_s * (1 + 1e-12),
               "the intrinsic point keeps the max-clock time (%.4f ms vs %.4f ms)", in->time_s * 1e3,
               f.max_clock.time_s * 1e3);
        double save = 1 - in->energy_j / f.max_clock.energy_j;
        tap_ok(save > 0.01, "... and saves %.1f%% of the max-clock energy (%.3f J of %.3f J)", 100 * save,
               f.max_clock.energy_j - in->energy_j, f.max_clock.energy_j);
        double *slack = malloc(sizeof(double) * (size_t)d.n);
        slack_of(&d, &pr, f.max_clock.choice, slack);
        int bad = 0, slowed = 0;
        for (int i = 0; i < d.n; i++) {
            const pt_energy_choice *c = pr.choice[d.in[i].type];
            double t_fast = c[f.max_clock.choice[i]].time_s, t_now = c[in->choice[i]].time_s;
            if (t_now > t_fast * (1 + 1e-12)) {
                slowed++;
                if (t_now - t_fast > slack[i] + 1e-12) bad++;
            }
        }
        tap_ok(bad == 0 && slowed > 0, "... slowing %d of %d instructions, each within its slack in the max-clock "
               "schedule (%d beyond it)", slowed, d.n, bad);
        int k = pt_energy_frontier_at(&f, f.max_clock.time_s * 1.10);
        tap_ok(k >= 0 && f.p[k].energy_j <= in->energy_j && f.p[k].time_s <= f.max_clock.time_s * 1.10,
               "the 10%% deadline point is at most 1.10x the time and no more energy than the intrinsic point "
               "(%.4f ms, %.3f J)", k >= 0 ? f.p[k].time_s * 1e3 : 0, k >= 0 ? f.p[k].energy_j : 0);
        tap_ok(f.p[f.npoints - 1].energy_j <= f.min_energy.energy_j * (1 + 1e-9) + 1e-12,
               "the slowest point costs no more than every instruction at its cheapest clock (%.3f J vs %.3f J)",
               f.p[f.npoints - 1].energy_j, f.min_energy.energy_j);
        free(slack);
    }
    pt_energy_frontier_free(&f);
    pt_energy_profile_free(&pr);
    pt_energy_dag_free(&d);

    /* 3. no bubble: one rank (a chain), every instruction critical: the
     * intrinsic point saves nothing */
    pt_energy_dag_build(PT_SCHED_1F1B, 1, 4, 1, 0, &d);
    double t1[2] = {1e-3, 2e-3};
    pt_energy_profile_model(pt_energy_power_model_named("gpu"), d.ntypes, t1, &pr);
    rc = pt_energy_frontier_compute(&d, &pr, 0, 0, &f);
    tap_ok(rc == 0 && fabs(f.p[f.intrinsic].energy_j - f.max_clock.energy_j) <= 1e-9 * f.max_clock.energy_j,
           "no slack (pp=1): the intrinsic point is the max-clock point (%.4f J vs %.4f J)",
           rc == 0 ? f.p[f.intrinsic].energy_j : 0, f.max_clock.energy_j);
    pt_energy_frontier_free(&f);
    pt_energy_profile_free(&pr);
    pt_energy_dag_free(&d);

    /* 4. bad input: one line each */
    pt_energy_dag_build(PT_SCHED_1F1B, 2, 2, 1, 0, &d);
    pt_energy_profile_model(pt_energy_power_model_named("gpu"), 2, t1, &pr);
    rc = pt_energy_frontier_compute(&d, &pr, 0, 0, &f);
    tap_ok(rc < 0 && strstr(pt_errmsg(), "2 instruction types, the schedule has 4"), "a profile of too few types is "
           "refused: %s", pt_errmsg());
    pt_energy_profile_free(&pr);
    pt_energy_dag_free(&d);
    rc = pt_energy_dag_build(PT_SCHED_1F1B, 2, 2, 2, 0, &d);
    tap_ok(rc < 0 && strstr(pt_errmsg(), "virtual stages"), "v=2 with 1f1b is refused: %s", pt_errmsg());
    pt_energy_power_model bad = *pt_energy_power_model_named("cpu");
    bad.mem_share = 1.5;
    rc = pt_energy_profile_model(&bad, 2, t1, &pr);
    tap_ok(rc < 0 && strstr(pt_errmsg(), "memory share 1.5"), "a power model with memory share 1.5 is refused: %s",
           pt_errmsg());

    /* 5. times far apart (fuzzing: one clock at 1e6 s kept ptrain-plan
     * --energy-profile busy for hours, 1e8-unit curves summed past INT_MAX
     * in one-unit cut steps).  SIGALRM ends the test if one does not end:
     * a hang is a failure, not a stuck run. */
    alarm(120);
    pt_energy_dag_build(PT_SCHED_1F1B, 4, 32, 1, 20e-6, &d);
    double t4[8];
    for (int t = 0; t < 8; t++) t4[t] = (t % 2 ? 2e-3 : 1e-3);
    pt_energy_profile_model(pt_energy_power_model_named("gpu"), d.ntypes, t4, &pr);
    const pt_energy_choice keep = pr.choice[3][0];
    pr.choice[3][0].time_s = 1e6; /* the fuzz input's clock: 1e6 s */
    double t0 = pt_now();
    rc = pt_energy_frontier_compute(&d, &pr, 0, 0, &f);
    tap_ok(rc < 0 && strstr(pt_errmsg(), "type 3 (rank 1 chunk 0 backward) clock 0 takes 1e+06 s") &&
               strstr(pt_errmsg(), "at most 1000 times its fastest") && !strchr(pt_errmsg(), '\n'),
           "a type whose slowest clock takes 1e6 s, 5e8 times its fastest, is refused (%.3f s): %s",
           pt_now() - t0, rc < 0 ? pt_errmsg() : "accepted");
    if (rc == 0) pt_energy_frontier_free(&f);
    pr.choice[3][0] = keep;
    /* every clock of type 3 1e7 times slower than the others' (each type's
     * own clocks 2.4x apart): units of 1/20 of the fastest clock would be
     * ~1e8 per instruction; the unit is 1/1e6 of the slowest iteration */
    for (int k = 0; k < pr.nchoices[3]; k++) pr.choice[3][k].time_s *= 1e7;
    t0 = pt_now();
    rc = pt_energy_frontier_compute(&d, &pr, 0, 0, &f);
    const double took = pt_now() - t0;
    tap_ok(rc == 0 && took < 30, "type 3 1e7 times slower than the rest: a frontier in %.3f s (%d points, %d steps, "
           "unit %g s)%s%s", took, rc == 0 ? f.npoints : 0, rc == 0 ? f.steps : 0, rc == 0 ? f.tau_s : 0,
           rc ? ": " : "", rc ? pt_errmsg() : "");
    if (rc == 0) {
        tap_ok(f.tau_s * PT_ENERGY_MAX_UNITS >= f.min_energy.time_s * (1 - 1e-12),
               "... its unit (%g s) cuts the least-energy iteration (%g s) into at most %d units", f.tau_s,
               f.min_energy.time_s, PT_ENERGY_MAX_UNITS);
        int ok = f.npoints >= 1 && f.intrinsic >= 0 && f.p[f.intrinsic].time_s <= f.max_clock.time_s * (1 + 1e-12) &&
                 f.p[f.intrinsic].energy_j <= f.max_clock.energy_j * (1 + 1e-12);
        for (int i = 0; i < f.npoints && ok; i++) {
            double T, E;
            pt_energy_evaluate(&d, &pr, f.p[i].choice, &T, &E);
            ok = T == f.p[i].time_s && E == f.p[i].energy_j &&
                 (i == 0 || (f.p[i].time_s > f.p[i - 1].time_s && f.p[i].energy_j < f.p[i - 1].energy_j));
        }
        tap_ok(ok, "... its points are achievable as given, ordered by time with energy falling, the intrinsic one "
               "no slower and no dearer than max clock (%.1f s, %.1f J vs %.1f J)", f.max_clock.time_s,
               f.intrinsic >= 0 ? f.p[f.intrinsic].energy_j : 0, f.max_clock.energy_j);
        pt_energy_frontier_free(&f);
    }
    /* a unit asked for that is finer than the units allow: refused */
    for (int k = 0; k < pr.nchoices[3]; k++) pr.choice[3][k].time_s /= 1e7;
    rc = pt_energy_frontier_compute(&d, &pr, 1e-12, 0, &f);
    tap_ok(rc < 0 && strstr(pt_errmsg(), "time unit 1e-12 s cuts the slowest iteration") &&
               strstr(pt_errmsg(), "at most 1000000 units"),
           "a time unit of 1e-12 s is refused: %s", rc < 0 ? pt_errmsg() : "accepted");
    if (rc == 0) pt_energy_frontier_free(&f);
    pt_energy_profile_free(&pr);
    pt_energy_dag_free(&d);
    alarm(0);
    return tap_done();
}
