/* SPDX-License-Identifier: MIT */
/* libFuzzer target: energy profiles and energy plans as JSON
 * (lib/energy/profile.c, ptrain-run --energy-profile / --energy-plan,
 * ptrain-plan --energy-profile).  Every input is read as both (its
 * "format" picks the one that may accept it); a refusal is one line.  A
 * profile that loads has 2 pp v types of 1..4096 clocks each, every clock
 * > 0, time > 0 and energy >= 0, all finite; saved and loaded back it
 * gives the same profile (to the 10 digits the writer keeps; numbers
 * above 1e307 are left out of that check: rounded to 10 digits the
 * largest doubles overflow, see README).  A plan that loads has every one
 * of its 2 pp v m instructions at a clock > 0.
 * An accepted profile is also planned on, as ptrain-plan and ptrain-run
 * --energy-profile do (lib/plan/energy.c, pt_energy_frontier_compute), on
 * the iteration DAG of its own schedule, pp and v, with its own
 * microbatches and with as many as 256 instructions allow (the tools plan
 * a profile for the plan's microbatches): refused in one line, or a
 * frontier whose points are achievable as given (their clocks' longest
 * path and energy), ordered by time with energy falling, with an
 * intrinsic point no slower than max clock, in units no finer than
 * 1/PT_ENERGY_MAX_UNITS of the iteration -- and quickly (a profile with
 * one clock at 1e6 s ran for hours: regress/energy_json/). */
#include "fuzz_util.h"
#include "core/core.h"
#include "energy/profile.h"
#include "plan/energy.h"

#include <math.h>

static void check_profile(const pt_energy_profile *pr, const pt_energy_meta *m)
{
    if (m->pp < 1 || m->v < 1 || m->m < 1 || pr->ntypes != 2 * m->pp * m->v) abort();
    for (int t = 0; t < pr->ntypes; t++) {
        if (pr->nchoices[t] < 1 || pr->nchoices[t] > 4096 || !pr->choice[t]) abort();
        for (int k = 0; k < pr->nchoices[t]; k++) {
            const pt_energy_choice *c = &pr->choice[t][k];
            if (!(c->freq_mhz > 0) || !(c->time_s > 0) || !(c->energy_j >= 0) || !isfinite(c->freq_mhz) ||
                !isfinite(c->time_s) || !isfinite(c->energy_j))
                abort();
        }
    }
    if (!(pr->idle_w >= 0) || !isfinite(pr->idle_w)) abort();
}

/* the same number after a save (JSON_REAL_PRECISION(10): 10 significant digits) */
static int close_to(double a, double b) { return fabs(a - b) <= 1e-9 * fmax(fabs(a), fabs(b)); }

/* every number at most 1e307 (see the header) */
static int writable(const pt_energy_profile *pr)
{
    int ok = pr->idle_w <= 1e307;
    for (int t = 0; t < pr->ntypes; t++)
        for (int k = 0; k < pr->nchoices[t]; k++) {
            const pt_energy_choice *c = &pr->choice[t][k];
            ok &= c->freq_mhz <= 1e307 && c->time_s <= 1e307 && c->energy_j <= 1e307;
        }
    return ok;
}

static void round_trip(const pt_energy_profile *pr, const pt_energy_meta *m)
{
    if (!writable(pr)) return;
    char path[300];
    snprintf(path, sizeof path, "%s/profile.json", fuzz_dir());
    if (pt_energy_profile_save(path, pr, m) != PT_OK) {
        fprintf(stderr, "save refused: %s\n", pt_errmsg());
        abort();
    }
    pt_energy_profile q;
    pt_energy_meta n;
    if (pt_energy_profile_load(path, &q, &n) != PT_OK) {
        fprintf(stderr, "a saved profile does not load back: %s\n", pt_errmsg());
        abort();
    }
    if (q.ntypes != pr->ntypes || q.modelled != pr->modelled || !close_to(q.idle_w, pr->idle_w) ||
        n.schedule != m->schedule || n.pp != m->pp || n.v != m->v || n.m != m->m)
        abort();
    for (int t = 0; t < q.ntypes; t++) {
        if (q.nchoices[t] != pr->nchoices[t]) abort();
        for (int k = 0; k < q.nchoices[t]; k++) {
            const pt_energy_choice *a = &pr->choice[t][k], *b = &q.choice[t][k];
            if (!close_to(a->freq_mhz, b->freq_mhz) || !close_to(a->time_s, b->time_s) ||
                !close_to(a->energy_j, b->energy_j))
                abort();
        }
    }
    pt_energy_profile_free(&q);
}

/* the planner on profile pr over its own schedule, pp and v with mb
 * microbatches (at most 256 instructions) */
static void plan_on(const pt_energy_profile *pr, const pt_energy_meta *m, int mb)
{
    if (mb < 1 || (long long)2 * m->pp * m->v * mb > 256) return;
    pt_energy_dag d;
    pt_error_clear();
    if (pt_energy_dag_build(m->schedule, m->pp, mb, m->v, 20e-6, &d) != PT_OK) {
        fuzz_check_msg(pt_errmsg());
        return;
    }
    pt_energy_frontier f;
    pt_error_clear();
    if (pt_energy_frontier_compute(&d, pr, 0, 0, &f) != PT_OK) {
        fuzz_check_msg(pt_errmsg());
        if (f.npoints || f.p) abort(); /* nothing left behind */
        pt_energy_dag_free(&d);
        return;
    }
    if (f.npoints < 1 || f.intrinsic < 0 || f.intrinsic >= f.npoints || !(f.tau_s > 0) ||
        !(f.tau_s * PT_ENERGY_MAX_UNITS >= f.max_clock.time_s * (1 - 1e-9)) ||
        !(f.p[f.intrinsic].time_s <= f.max_clock.time_s * (1 + 1e-12)) ||
        !(f.p[f.intrinsic].energy_j <= f.max_clock.energy_j * (1 + 1e-12))) {
        fprintf(stderr, "frontier: %d points, intrinsic %d, unit %g s, max clock %g s %g J\n", f.npoints, f.intrinsic,
                f.tau_s, f.max_clock.time_s, f.max_clock.energy_j);
        abort();
    }
    for (int i = 0; i < f.npoints; i++) {
        const pt_energy_point *p = &f.p[i];
        for (int j = 0; j < d.n; j++)
            if (p->choice[j] < 0 || p->choice[j] >= pr->nchoices[d.in[j].type]) abort();
        double T, E;
        pt_energy_evaluate(&d, pr, p->choice, &T, &E);
        if (T != p->time_s || E != p->energy_j || !isfinite(T) || !isfinite(E) ||
            (i && !(p->time_s > f.p[i - 1].time_s && p->energy_j < f.p[i - 1].energy_j))) {
            fprintf(stderr, "frontier point %d of %d: %g s %g J, its clocks give %g s %g J; the point before: %g s "
                    "%g J\n", i, f.npoints, p->time_s, p->energy_j, T, E, i ? f.p[i - 1].time_s : 0,
                    i ? f.p[i - 1].energy_j : 0);
            abort();
        }
    }
    pt_energy_frontier_free(&f);
    pt_energy_dag_free(&d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[64];
    int fd = fuzz_memfile(data, size, path, sizeof path);
    pt_energy_profile pr;
    pt_energy_meta meta;
    pt_error_clear();
    if (pt_energy_profile_load(path, &pr, &meta) == PT_OK) {
        check_profile(&pr, &meta);
        round_trip(&pr, &meta);
        /* its own microbatches, and as many as 256 instructions hold (a
         * profile is per instruction type: the tools plan it for the
         * plan's microbatches, whatever it was measured with) */
        plan_on(&pr, &meta, meta.m);
        const int most = (int)(128 / ((long long)meta.pp * meta.v));
        const int mb = most >= meta.pp ? most - most % meta.pp : most; /* interleaved: a multiple of pp */
        if (mb != meta.m) plan_on(&pr, &meta, mb);
        pt_energy_profile_free(&pr);
    } else {
        fuzz_check_msg(pt_errmsg());
        if (pr.ntypes || pr.nchoices || pr.choice) abort(); /* nothing left behind */
    }
    pt_energy_plan plan;
    pt_error_clear();
    if (pt_energy_plan_load(path, &plan) == PT_OK) {
        const pt_energy_meta *m = &plan.meta;
        if (m->pp < 1 || m->v < 1 || m->m < 1 || plan.n != 2 * m->pp * m->v * m->m || !plan.freq) abort();
        for (int i = 0; i < plan.n; i++)
            if (!(plan.freq[i] > 0) || !isfinite(plan.freq[i])) abort();
        if (!(plan.time_s > 0) || !(plan.max_time_s > 0) || !(plan.energy_j >= 0) || !(plan.max_energy_j >= 0)) abort();
        pt_energy_plan_free(&plan);
    } else {
        fuzz_check_msg(pt_errmsg());
        if (plan.n || plan.freq) abort();
    }
    close(fd);
    return 0;
}
