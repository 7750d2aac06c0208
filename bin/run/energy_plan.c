/* SPDX-License-Identifier: MIT */
/* ptrain-run's energy plan: the frontier of the run's pipeline iteration
 * at start-up, each instruction's clock at a replica's point, and the
 * straggler test that moves the other replicas along the frontier
 * (bin/run/energy.h; energy.c has the overview). */
#define _GNU_SOURCE
#include "energy.h"
#include "energy/clock.h"
#include "energy/meter.h"
#include "parallel/context.h"
#include "plan/energy.h"
#include "plan_energy.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

/* The clock of this rank's instruction (chunk, mb, bwd) at replica point k. */
double run_energy_instr_freq(const run_energy *e, int chunk, int mb, int bwd)
{
    int stage = chunk * e->pp + e->ctx->pp_rank;
    int i = pt_energy_instr_index(e->pp, e->v, e->m, stage, mb, bwd);
    if (i < 0 || i >= e->dag.n) return 0;
    int k = e->rep_point[e->ctx->dp_rank];
    if (k == BASE_POINT && e->base_freq) return e->base_freq[i];
    if (!e->have_frontier) return 0;
    if (k == BASE_POINT) k = e->base_k;
    return e->prof.choice[e->dag.in[i].type][e->fr.p[k].choice[i]].freq_mhz;
}

/* The modelled profile's power model: the named model ("gpu" when any rank
 * clocks a GPU, else "cpu") over the clocks every controller offers. */
static pt_energy_power_model agreed_model(run_energy *e, const char **name)
{
    int gpu = pt_clock_kind(e->clk) == PT_CLOCK_NVML, any_gpu = 0;
    for (int i = 0; i < pt_meter_ncounters(e->meter); i++)
        gpu |= pt_meter_counter_at(e->meter, i)->kind == PT_METER_NVML;
    MPI_Allreduce(&gpu, &any_gpu, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    *name = any_gpu ? "gpu" : "cpu";
    pt_energy_power_model pm = *pt_energy_power_model_named(*name);
    /* the clocks every controller offers: the highest bottom, the lowest top, the fewest clocks */
    double v[3] = {0, -1e30, -1e9}, out[3];
    if (e->clk) {
        const double *f;
        int k = pt_clock_freqs(e->clk, &f);
        v[0] = f[0], v[1] = -f[k - 1], v[2] = -k;
    }
    MPI_Allreduce(v, out, 3, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    double lo = out[0], top = -out[1], cnt = -out[2];
    if (top < 1e29 && lo > 0 && top >= lo) {
        pm.f_min_mhz = lo;
        pm.f_max_mhz = top;
        pm.nfreq = cnt < 2 ? 2 : cnt > 16 ? 16 : (int)cnt;
        if (top == lo) pm.nfreq = 2;
    }
    return pm;
}

int run_energy_plan_start(run_energy *e)
{
    const run_setup *s = e->s;
    const pt_plan *p = &s->plan;
    pt_model_shape ms = s->cfg; /* pt_gpt_config is the contract's shape */
    const char *name = "cpu";
    pt_energy_power_model pm = agreed_model(e, &name);
    pt_plan pv = *p;
    pv.virtual_stages = e->v;
    int rc = plan_energy(&ms, (int)s->o.batch, &pv, &s->ehw, &pm, s->eprofile.ntypes ? &s->eprofile : NULL,
                         s->eprofile.ntypes ? &s->eprofile_meta : NULL, 0, &e->dag, &e->prof, &e->fr);
    if (rc < 0) return -1;
    e->have_frontier = 1;
    e->base_k = e->fr.intrinsic >= 0 ? e->fr.intrinsic : e->fr.npoints - 1;
    const char *how = s->eprofile.ntypes ? (e->prof.modelled ? "a modelled profile" : "a measured profile")
                                         : e->prof.modelled ? "modelled" : "measured";
    if (s->eplan.n) {
        e->base_freq = s->eplan.freq;
        e->base_time = s->eplan.time_s;
        e->base_energy = s->eplan.energy_j;
        e->max_time = s->eplan.max_time_s;
        e->max_energy = s->eplan.max_energy_j;
        snprintf(e->plan_name, sizeof e->plan_name, "%s point of %.80s (%s)", s->eplan.point, s->o.energy_plan,
                 s->eplan.modelled ? "modelled" : "measured");
    } else {
        e->base_time = e->fr.p[e->base_k].time_s;
        e->base_energy = e->fr.p[e->base_k].energy_j;
        e->max_time = e->fr.max_clock.time_s;
        e->max_energy = e->fr.max_clock.energy_j;
        if (s->eprofile.ntypes)
            snprintf(e->plan_name, sizeof e->plan_name, "intrinsic point of %s, %.80s", how, s->o.energy_profile);
        else
            snprintf(e->plan_name, sizeof e->plan_name, "intrinsic point, modelled (cost model, %s power model "
                     "%.0f-%.0f MHz)", name, pm.f_min_mhz, pm.f_max_mhz);
    }
    return 0;
}

/* The straggler test and the moves (every rank, the same numbers). */
void run_energy_straggler(run_energy *e, const step_rec *all)
{
    const int dp = e->dp;
    if (!e->plan_on || !e->have_frontier || dp < 2 || !(e->s->o.straggler > 0)) return;
    double *T = calloc((size_t)dp, sizeof(double)), *r = calloc((size_t)dp, sizeof(double)),
           *srt = calloc((size_t)dp, sizeof(double));
    if (!T || !r || !srt) goto out;
    for (int i = 0; i < e->world; i++) {
        int d = (int)all[i].dp_rank;
        if (d >= 0 && d < dp && all[i].sched_s > T[d]) T[d] = all[i].sched_s;
    }
    for (int d = 0; d < dp; d++) { /* paces in the frontier's units (a plan file's point: as the intrinsic one) */
        int k = e->rep_point[d];
        r[d] = T[d] / e->fr.p[k == BASE_POINT ? e->base_k : k].time_s;
        srt[d] = r[d];
    }
    int s = 0; /* the slowest pace, against the median pace of the others */
    for (int d = 1; d < dp; d++)
        if (r[d] > r[s]) s = d;
    int no = 0;
    for (int d = 0; d < dp; d++)
        if (d != s) srt[no++] = r[d];
    for (int i = 1; i < no; i++)
        for (int j = i; j > 0 && srt[j] < srt[j - 1]; j--) {
            double t = srt[j];
            srt[j] = srt[j - 1];
            srt[j - 1] = t;
        }
    double med = no % 2 ? srt[no / 2] : 0.5 * (srt[no / 2 - 1] + srt[no / 2]);
    int slow = r[s] > med * (1 + e->s->o.straggler);
    if (slow) {
        e->streak = e->cand == s ? e->streak + 1 : 1;
        e->cand = s;
        e->calm = 0;
    } else {
        e->calm++;
        e->streak = 0;
    }
    if (slow && e->streak >= 2) {
        int changed = e->straggler != s;
        e->straggler = s;
        for (int d = 0; d < dp; d++) {
            int k = BASE_POINT;
            if (d != s) {
                double target = T[s] / r[d]; /* the straggler's time in replica d's own pace */
                k = pt_energy_frontier_at(&e->fr, target);
                if (k < 0) k = BASE_POINT;
            }
            changed |= e->rep_point[d] != k;
            e->rep_point[d] = k;
        }
        if (changed) {
            e->moves++;
            if (run_rank == 0) {
                int k = e->rep_point[s == 0 ? 1 : 0];
                printf("energy: dp replica %d is a straggler (schedule %.1f ms, %+.0f%% against the others' median "
                       "pace): the others move to the frontier point at its pace (planned %.3f ms, %.3f J per pipeline "
                       "iteration)\n", s, T[s] * 1e3, 100 * (r[s] / med - 1),
                       k == BASE_POINT ? e->base_time * 1e3 : e->fr.p[k].time_s * 1e3,
                       k == BASE_POINT ? e->base_energy : e->fr.p[k].energy_j);
                fflush(stdout);
            }
        }
    } else if (e->straggler >= 0 && e->calm >= 2) {
        if (run_rank == 0) {
            printf("energy: no straggler now (dp replica %d keeps pace): every replica is back at its plan\n",
                   e->straggler);
            fflush(stdout);
        }
        e->straggler = -1;
        for (int d = 0; d < dp; d++) e->rep_point[d] = BASE_POINT;
    }
out:
    free(T), free(r), free(srt);
}
