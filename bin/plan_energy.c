/* SPDX-License-Identifier: MIT */
/* ptrain-plan --energy: the time-energy frontier of the chosen plan's
 * iteration (lib/plan/energy.h), from the cost model's instruction times
 * and a power model (modelled) or a measured profile. */
#define _POSIX_C_SOURCE 200809L
#include "plan_energy.h"
#include "core/core.h"
#include "pipeline/schedule.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Forward FLOPs per token of one block: 24 C^2 for the four matmuls
 * (QKV 3 C^2, projection C^2, MLP 8 C^2, 2 FLOPs each) and 4 T C for the
 * attention's scores and weighted values (Kaplan et al. 2020, table 1);
 * the head adds 2 C V. */
static double block_flops_tok(const pt_model_shape *m) { return 24.0 * m->n_embd * m->n_embd + 4.0 * m->seq_len * m->n_embd; }

int plan_energy_times(const pt_model_shape *m, int global_batch, const pt_plan *p, const pt_hw *hw, double *type_time,
                      double *p2p_s, pt_error *err)
{
    pt_pp_split split;
    if (pt_pp_split_layers(m->n_layer, p->pp, p->virtual_stages, p->pp_split_n ? p->pp_split : NULL, p->pp_split_n,
                           &split) != PT_OK)
        return pt_errprintf(err, "%s", pt_errmsg());
    if (!(hw->gemm_gflops > 0)) return pt_errprintf(err, "no GEMM rate for the energy model");
    /* tokens one rank computes per microbatch: the dp rank's share of the
     * batch, split into microbatches, sequence-split over sp; the layout
     * divides the matmuls over tp */
    double tokens = (double)global_batch / p->dp / p->microbatches * m->seq_len / p->sp;
    double rate = hw->gemm_gflops * 1e9;
    if (hw->ranks_per_core > 1) rate /= hw->ranks_per_core;
    int S = p->pp * p->virtual_stages;
    for (int s = 0; s < S; s++) {
        int rank = s % p->pp, chunk = s / p->pp;
        double f = (split.l1[s] - split.l0[s]) * block_flops_tok(m);
        if (s == S - 1) f += 2.0 * m->n_embd * m->vocab; /* the head */
        f *= tokens / p->tp;
        int t = (rank * p->virtual_stages + chunk) * 2;
        type_time[t] = f / rate; /* forward */
        /* backward: twice the forward's FLOPs, and the forward again under block recompute */
        type_time[t + 1] = (p->recompute == PT_RECOMPUTE_BLOCK ? 3 : 2) * f / rate;
    }
    /* one activation [b, T / sp, C / (tp in 2d/3d)] between stages */
    double bytes = 4.0 * tokens * m->n_embd;
    *p2p_s = hw->lat_s[PT_NET_NODE] + bytes / (hw->gbps[PT_NET_NODE] * 1e9);
    return 0;
}

/* A deep copy of profile a into b. */
static int profile_copy(const pt_energy_profile *a, pt_energy_profile *b, pt_error *err)
{
    memset(b, 0, sizeof *b);
    b->ntypes = a->ntypes;
    b->idle_w = a->idle_w;
    b->modelled = a->modelled;
    b->nchoices = calloc((size_t)a->ntypes, sizeof *b->nchoices);
    b->choice = calloc((size_t)a->ntypes, sizeof *b->choice);
    if (!b->nchoices || !b->choice) {
        pt_energy_profile_free(b);
        return pt_errprintf(err, "out of memory for the energy profile");
    }
    for (int t = 0; t < a->ntypes; t++) {
        b->choice[t] = malloc(sizeof **b->choice * (size_t)a->nchoices[t]);
        if (!b->choice[t]) {
            pt_energy_profile_free(b);
            return pt_errprintf(err, "out of memory for the energy profile");
        }
        memcpy(b->choice[t], a->choice[t], sizeof **b->choice * (size_t)a->nchoices[t]);
        b->nchoices[t] = a->nchoices[t];
    }
    return 0;
}

int plan_energy(const pt_model_shape *m, int global_batch, const pt_plan *p, const pt_hw *hw,
                const pt_energy_power_model *pm, const pt_energy_profile *measured, const pt_energy_meta *meta,
                double tau_s, pt_energy_dag *dag, pt_energy_profile *pr, pt_energy_frontier *f, pt_error *err)
{
    memset(dag, 0, sizeof *dag);
    memset(pr, 0, sizeof *pr);
    memset(f, 0, sizeof *f);
    int ntypes = 2 * p->pp * p->virtual_stages;
    if (measured && meta && (meta->pp != p->pp || meta->v != p->virtual_stages))
        return pt_errprintf(err, "the energy profile was made with pp=%d virtual_stages=%d, the plan has pp=%d "
                            "virtual_stages=%d (valid: a profile of the same pipeline; pin --pp and the schedule)",
                            meta->pp, meta->v, p->pp, p->virtual_stages);
    double *tt = calloc((size_t)ntypes, sizeof(double)), p2p = 0;
    if (!tt) return pt_errprintf(err, "out of memory");
    int rc = plan_energy_times(m, global_batch, p, hw, tt, &p2p, err);
    if (!rc) rc = pt_energy_dag_build(p->schedule, p->pp, p->microbatches, p->virtual_stages, p2p, dag, err);
    if (!rc) rc = measured ? profile_copy(measured, pr, err) : pt_energy_profile_model(pm, ntypes, tt, pr, err);
    if (!rc) rc = pt_energy_frontier_compute(dag, pr, tau_s, 0, f, err);
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
