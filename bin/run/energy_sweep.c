/* SPDX-License-Identifier: MIT */
/* ptrain-run's clock sweep (--profile-energy): the clocks each rank
 * steps through, and the profile made from the sums over the ranks,
 * written by rank 0 (bin/run/energy.h; energy.c has the overview). */
#define _GNU_SOURCE
#include "energy.h"
#include "energy/clock.h"
#include "energy/profile.h"

#include <errno.h>
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void run_energy_sweep_start(run_energy *e)
{
    const run_opts *o = &e->s->o;
    e->nsweep = (int)o->profile_clocks;
    e->sweep_first = e->start_step + 1;
    e->ntypes = 2 * e->pp * e->v;
    e->acc = calloc((size_t)e->nsweep * (size_t)e->ntypes, sizeof(sweep_acc));
    int ok = e->acc != NULL, all = 0;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all) {
        if (run_rank == 0) fprintf(stderr, "ptrain-run: warning: --profile-energy: out of memory; no profile\n");
        return;
    }
    /* this rank's clocks, the top first, evenly apart; the dry controller
     * changes no clock, so it sweeps nothing */
    int real = e->clk && pt_clock_kind(e->clk) != PT_CLOCK_DRY, nreal = 0;
    MPI_Allreduce(&real, &nreal, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (run_rank == 0 && !nreal && e->clk)
        fprintf(stderr, "ptrain-run: --profile-energy: the dry controller sets no clock: the profile will be the power "
                        "model's over the times measured at the default clock\n");
    const double *f = NULL;
    int nf = real ? pt_clock_freqs(e->clk, &f) : 0;
    for (int c = 0; c < e->nsweep; c++) {
        if (!nf) e->sweep_f[c] = 0;
        else if (e->nsweep == 1) e->sweep_f[c] = f[nf - 1];
        else e->sweep_f[c] = f[(nf - 1) - (int)lround((double)c * (nf - 1) / (e->nsweep - 1))];
    }
    e->sweep_on = 1;
    e->sweep_real = real;
    e->sweep_contrib = real || nreal == 0;
    e->cur_idx = -1;
}

/* The profile from the sweep's sums (every rank), written by rank 0. */
void run_energy_sweep_finish(run_energy *e)
{
    if (!e->sweep_on) return;
    e->sweep_on = 0;
    if (e->clk) pt_clock_reset(e->clk);
    size_t n = (size_t)e->nsweep * (size_t)e->ntypes * ACC_K; /* doubles */
    sweep_acc *sum = malloc(sizeof(sweep_acc) * ((size_t)e->nsweep * (size_t)e->ntypes + 1));
    int ok = sum != NULL, all = 0;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all) {
        free(sum);
        if (run_rank == 0) fprintf(stderr, "ptrain-run: warning: --profile-energy: out of memory; no profile\n");
        return;
    }
    /* idle: the gaps between instructions, else a short sleep */
    double idle[3] = {e->idle_e * e->measuring, e->idle_t * e->measuring, 0}, isum[3];
    MPI_Allreduce(idle, isum, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    double idle_w = isum[1] > 0.05 ? isum[0] / isum[1] : -1;
    if (idle_w < 0) {
        double j0, j1, t0 = run_energy_read(e, &j0);
        struct timespec ts = {0, 250000000L};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
        double t1 = run_energy_read(e, &j1);
        double mine[2] = {e->measuring ? (j1 - j0) / (t1 - t0) : 0, (double)e->measuring}, tot[2];
        MPI_Allreduce(mine, tot, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        idle_w = tot[1] > 0 ? tot[0] / tot[1] : 0;
    }
    MPI_Allreduce(e->acc, sum, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    int gpu = pt_clock_kind(e->clk) == PT_CLOCK_NVML, any_gpu = 0;
    MPI_Allreduce(&gpu, &any_gpu, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (run_rank != 0) {
        free(sum);
        return;
    }
    const int nt = e->ntypes;
#define A(c, t) sum[(size_t)(c) * (size_t)nt + (size_t)(t)]
    /* distinct clocks measured, and whether every type has its energy */
    int nclk = 0, cidx[64], energy_all = 1;
    for (int c = 0; c < e->nsweep; c++) {
        int have = 1;
        for (int t = 0; t < nt; t++) {
            have &= A(c, t).n > 0;
            energy_all &= A(c, t).n <= 0 || A(c, t).ne >= A(c, t).n;
        }
        if (!have) continue;
        double f = A(c, 0).f / A(c, 0).n;
        int dup = 0;
        for (int j = 0; j < nclk; j++) dup |= fabs(A(cidx[j], 0).f / A(cidx[j], 0).n - f) < 0.5;
        if (!dup) cidx[nclk++] = c;
    }
    const char *model = any_gpu ? "gpu" : "cpu";
    pt_energy_profile pr;
    memset(&pr, 0, sizeof pr);
    pt_energy_meta meta;
    memset(&meta, 0, sizeof meta);
    meta.schedule = e->s->plan.schedule, meta.pp = e->pp, meta.v = e->v, meta.m = e->m;
    snprintf(meta.device, sizeof meta.device, "%s", model);
    pt_plan_summary(&e->s->plan, meta.plan, sizeof meta.plan);
    int rc = PT_OK;
    if (nclk >= 2 && energy_all) { /* measured */
        pr.ntypes = nt;
        pr.idle_w = idle_w;
        pr.nchoices = calloc((size_t)nt, sizeof *pr.nchoices);
        pr.choice = calloc((size_t)nt, sizeof *pr.choice);
        if (!pr.nchoices || !pr.choice) rc = PT_ENOMEM;
        for (int t = 0; t < nt && !rc; t++) {
            pr.choice[t] = calloc((size_t)nclk, sizeof **pr.choice);
            if (!pr.choice[t]) {
                rc = PT_ENOMEM;
                break;
            }
            pr.nchoices[t] = nclk;
            for (int j = 0; j < nclk; j++) {
                int c = cidx[j];
                double cnt = A(c, t).n;
                pr.choice[t][j] = (pt_energy_choice){A(c, t).f / cnt, fmax(A(c, t).t / cnt, 1e-9),
                                                     fmax(A(c, t).e / A(c, t).ne, 0)};
            }
        }
        snprintf(meta.basis, sizeof meta.basis, "measured: %d clocks x %ld steps, %.200s", nclk, e->s->o.profile_steps,
                 e->meter_desc);
    } else { /* modelled over the times measured at the first clock */
        int c0 = nclk ? cidx[0] : 0;
        pt_energy_power_model pm = *pt_energy_power_model_named(model);
        double *tt = calloc((size_t)nt, sizeof(double));
        double f0 = A(c0, 0).n > 0 ? A(c0, 0).f / A(c0, 0).n : 0;
        if (f0 > pm.f_min_mhz) pm.f_max_mhz = f0;
        if (!tt) rc = PT_ENOMEM;
        for (int t = 0; t < nt && !rc; t++)
            tt[t] = A(c0, t).n > 0 ? fmax(A(c0, t).t / A(c0, t).n, 1e-9) : 1e-6;
        if (!rc && pt_energy_profile_model(&pm, nt, tt, &pr) < 0) rc = PT_EINVAL;
        /* calibrated to the energy measured at the top clock */
        for (int t = 0; t < nt && !rc; t++) {
            double me = A(c0, t).ne > 0 ? A(c0, t).e / A(c0, t).ne : -1;
            double top = pr.choice[t][pr.nchoices[t] - 1].energy_j;
            if (me > 0 && top > 0)
                for (int k = 0; k < pr.nchoices[t]; k++) pr.choice[t][k].energy_j *= me / top;
        }
        if (idle_w > 0) pr.idle_w = idle_w;
        pr.modelled = 1;
        free(tt);
        char at[48] = "the default clock";
        if (f0 > 0) snprintf(at, sizeof at, "%.0f MHz", f0);
        snprintf(meta.basis, sizeof meta.basis, "modelled: %s; times measured at %s, the %s power model over "
                 "%.0f-%.0f MHz%s", nclk < 2 ? "the clocks could not be set" : "energy was not measured on every rank",
                 at, model, pm.f_min_mhz, pm.f_max_mhz,
                 energy_all && A(c0, 0).ne > 0 ? ", calibrated to the energy measured there" : "");
    }
#undef A
    if (!rc) rc = pt_energy_profile_save(e->s->o.profile_energy, &pr, &meta);
    if (rc)
        fprintf(stderr, "ptrain-run: error: --profile-energy %s: %s\n", e->s->o.profile_energy,
                rc == PT_ENOMEM ? "out of memory" : pt_errmsg());
    else
        printf("energy: profile written to %s (%s, %d instruction types, idle %.2f W)\n", e->s->o.profile_energy,
               meta.basis, nt, pr.idle_w);
    fflush(stdout);
    pt_energy_profile_free(&pr);
    free(sum);
}
