/* SPDX-License-Identifier: MIT */
/* ptrain-plan --energy: the time-energy frontier of the chosen plan's
 * iteration (lib/plan/energy.h), from the cost model's instruction times
 * and a power model (modelled) or a measured profile. */
#define _POSIX_C_SOURCE 200809L
#include "plan_energy.h"
#include "core/core.h"
#include "contract/schedule.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int plan_energy_times(const pt_model_shape *m, int global_batch, const pt_plan *p, const pt_hw *hw, double *type_time,
                      double *p2p_s)
{
    /* the cost model's own terms (lib/plan/cost.h pt_cost_stages): the
     * precision's GEMM rate and element size, the tp and sp calls inside
     * each instruction, the boundary send between stages */
    if (!hw || !(pt_hw_gemm_gflops(hw, p->precision) > 0))
        return pt_fail(PT_EINVAL, "no GEMM rate for the energy model");
    const int S = p->pp * p->virtual_stages;
    pt_cost_stage *st = calloc((size_t)S, sizeof *st);
    if (!st) return pt_fail(PT_ENOMEM, "out of memory");
    int rc = pt_cost_stages(m, global_batch, p, hw, NULL, st, NULL, p2p_s);
    for (int s = 0; s < S && !rc; s++) {
        int t = ((s % p->pp) * p->virtual_stages + s / p->pp) * 2;
        type_time[t] = st[s].compute_s[0] + st[s].comm_s[0];     /* forward */
        type_time[t + 1] = st[s].compute_s[1] + st[s].comm_s[1]; /* backward */
    }
    free(st);
    return rc;
}

/* A deep copy of profile a into b. */
static int profile_copy(const pt_energy_profile *a, pt_energy_profile *b)
{
    memset(b, 0, sizeof *b);
    b->ntypes = a->ntypes;
    b->idle_w = a->idle_w;
    b->modelled = a->modelled;
    b->nchoices = calloc((size_t)a->ntypes, sizeof *b->nchoices);
    b->choice = calloc((size_t)a->ntypes, sizeof *b->choice);
    if (!b->nchoices || !b->choice) {
        pt_energy_profile_free(b);
        return pt_fail(PT_ENOMEM, "out of memory for the energy profile");
    }
    for (int t = 0; t < a->ntypes; t++) {
        b->choice[t] = malloc(sizeof **b->choice * (size_t)a->nchoices[t]);
        if (!b->choice[t]) {
            pt_energy_profile_free(b);
            return pt_fail(PT_ENOMEM, "out of memory for the energy profile");
        }
        memcpy(b->choice[t], a->choice[t], sizeof **b->choice * (size_t)a->nchoices[t]);
        b->nchoices[t] = a->nchoices[t];
    }
    return 0;
}

int plan_energy(const pt_model_shape *m, int global_batch, const pt_plan *p, const pt_hw *hw,
                const pt_energy_power_model *pm, const pt_energy_profile *measured, const pt_energy_meta *meta,
                double tau_s, pt_energy_dag *dag, pt_energy_profile *pr, pt_energy_frontier *f)
{
    memset(dag, 0, sizeof *dag);
    memset(pr, 0, sizeof *pr);
    memset(f, 0, sizeof *f);
    int ntypes = 2 * p->pp * p->virtual_stages;
    if (measured && meta && (meta->pp != p->pp || meta->v != p->virtual_stages))
        return pt_fail(PT_EINVAL, "the energy profile was made with pp=%d virtual_stages=%d, the plan has pp=%d "
                       "virtual_stages=%d (valid: a profile of the same pipeline; pin --pp and the schedule)",
                       meta->pp, meta->v, p->pp, p->virtual_stages);
    double *tt = calloc((size_t)ntypes, sizeof(double)), p2p = 0;
    if (!tt) return pt_fail(PT_ENOMEM, "out of memory");
    int rc = plan_energy_times(m, global_batch, p, hw, tt, &p2p);
    if (!rc) rc = pt_energy_dag_build(p->schedule, p->pp, p->microbatches, p->virtual_stages, p2p, dag);
    if (!rc) rc = measured ? profile_copy(measured, pr) : pt_energy_profile_model(pm, ntypes, tt, pr);
    if (!rc) rc = pt_energy_frontier_compute(dag, pr, tau_s, 0, f);
    free(tt);
    if (rc) {
        pt_energy_frontier_free(f);
        pt_energy_profile_free(pr);
        pt_energy_dag_free(dag);
    }
    return rc;
}

static void row(FILE *o, const char *label, const pt_energy_point *pt, const pt_energy_point *ref)
{
    fprintf(o, "  %-22s %10.3f ms %12.3f J %+8.1f%%  %+7.1f%%\n", label, pt->time_s * 1e3, pt->energy_j,
            100 * (pt->energy_j / ref->energy_j - 1), 100 * (pt->time_s / ref->time_s - 1));
}

void plan_energy_print(FILE *o, const pt_energy_dag *dag, const pt_energy_profile *pr, const pt_energy_frontier *f,
                       const char *source, double slowdown, double straggler_s)
{
    fprintf(o, "energy: one iteration of %s pp=%d microbatches=%d virtual_stages=%d per pipeline (%d instructions, "
            "%s, %s)\n", pt_pp_schedule_name(dag->kind), dag->pp, dag->m, dag->v, dag->n, source,
            pr->modelled ? "modelled: estimated clocks, power and times" : "measured");
    fprintf(o, "  time-energy frontier (Perseus, SOSP 2024): %d points in %d cut steps of %.2f us\n", f->npoints,
            f->steps, f->tau_s * 1e6);
    fprintf(o, "  %-22s %13s %14s %9s %9s\n", "point", "time", "energy", "energy", "time");
    fprintf(o, "  %-22s %13s %14s %9s %9s\n", "", "", "", "vs max", "vs max");
    row(o, "max clock", &f->max_clock, &f->max_clock);
    if (f->intrinsic >= 0) row(o, "intrinsic (same time)", &f->p[f->intrinsic], &f->max_clock);
    if (slowdown > 0) {
        char lab[48];
        snprintf(lab, sizeof lab, "deadline +%.0f%%", 100 * slowdown);
        int k = pt_energy_frontier_at(f, f->max_clock.time_s * (1 + slowdown));
        if (k >= 0) row(o, lab, &f->p[k], &f->max_clock);
    }
    if (straggler_s > 0) {
        int k = pt_energy_frontier_at(f, straggler_s);
        if (k >= 0) row(o, "extrinsic (straggler)", &f->p[k], &f->max_clock);
        else fprintf(o, "  extrinsic: the straggler's %.3f ms is faster than any point\n", straggler_s * 1e3);
    }
    /* the frontier itself, at most 12 rows evenly over its points */
    int rows = f->npoints < 12 ? f->npoints : 12;
    for (int r = 0; r < rows; r++) {
        int k = rows == 1 ? 0 : (int)((long)r * (f->npoints - 1) / (rows - 1));
        char lab[32];
        snprintf(lab, sizeof lab, "frontier %d/%d", k + 1, f->npoints);
        row(o, lab, &f->p[k], &f->max_clock);
    }
    if (f->intrinsic >= 0) {
        double save = f->max_clock.energy_j - f->p[f->intrinsic].energy_j;
        fprintf(o, "  intrinsic energy bloat: %.3f J per iteration (%.1f%%) saved at the max-clock time by slowing "
                "the instructions off the critical path\n", save, 100 * save / f->max_clock.energy_j);
    }
}

int plan_energy_pick(const pt_energy_frontier *f, double slowdown, char *name, size_t len)
{
    if (slowdown > 0) {
        int k = pt_energy_frontier_at(f, f->max_clock.time_s * (1 + slowdown));
        if (k >= 0) {
            snprintf(name, len, "deadline +%g%%", 100 * slowdown);
            return k;
        }
    }
    snprintf(name, len, "intrinsic");
    return f->intrinsic;
}

json_t *plan_energy_json(const pt_energy_dag *dag, const pt_energy_profile *pr, const pt_energy_frontier *f,
                         const char *model_name, const char *profile, double slowdown, double straggler_s)
{
    json_t *e = json_object(), *fr = json_array();
    json_object_set_new(e, "schedule", json_string(pt_pp_schedule_name(dag->kind)));
    json_object_set_new(e, "instructions", json_integer(dag->n));
    json_object_set_new(e, "power_model", model_name ? json_string(model_name) : json_null());
    json_object_set_new(e, "profile", profile ? json_string(profile) : json_null());
    json_object_set_new(e, "modelled", json_boolean(pr->modelled));
    json_object_set_new(e, "tau_s", json_real(f->tau_s));
    for (int i = 0; i < f->npoints; i++)
        json_array_append_new(fr, json_pack("{s:f, s:f}", "time_s", f->p[i].time_s, "energy_j", f->p[i].energy_j));
    json_object_set_new(e, "frontier", fr);
    json_object_set_new(e, "max_clock", json_pack("{s:f, s:f}", "time_s", f->max_clock.time_s, "energy_j",
                                                  f->max_clock.energy_j));
    if (f->intrinsic >= 0)
        json_object_set_new(e, "intrinsic", json_pack("{s:f, s:f}", "time_s", f->p[f->intrinsic].time_s, "energy_j",
                                                      f->p[f->intrinsic].energy_j));
    if (slowdown > 0) {
        int k = pt_energy_frontier_at(f, f->max_clock.time_s * (1 + slowdown));
        if (k >= 0)
            json_object_set_new(e, "deadline", json_pack("{s:f, s:f, s:f}", "slowdown", slowdown, "time_s",
                                                         f->p[k].time_s, "energy_j", f->p[k].energy_j));
    }
    if (straggler_s > 0) {
        int k = pt_energy_frontier_at(f, straggler_s);
        if (k >= 0)
            json_object_set_new(e, "extrinsic", json_pack("{s:f, s:f, s:f}", "straggler_s", straggler_s, "time_s",
                                                          f->p[k].time_s, "energy_j", f->p[k].energy_j));
    }
    return e;
}
