/* SPDX-License-Identifier: MIT */
/* ptrain-run's energy during the run: the meter (each rank's NVML and RAPL
 * counters, shared packages counted once), the per-step allgather of the
 * ranks' joules, the pipeline hook that sets each instruction's clock and
 * feeds the sweep, and the run's start, summary and end (bin/run/energy.h;
 * energy.c has the overview). */
#define _GNU_SOURCE
#include "energy.h"
#include "energy/clock.h"
#include "energy/meter.h"
#include "parallel/context.h"
#include "pipeline/pipeline.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <mpi.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int energy_hook(void *arg, int chunk, int mb, int bwd, int after)
{
    run_energy *e = arg;
    if (!e->in_step) return PT_OK; /* validation */
    if (!after) {
        if (e->ninstr == 0) {
            if (e->delay_s > 0) {
                struct timespec ts = {(time_t)e->delay_s, (long)((e->delay_s - (double)(time_t)e->delay_s) * 1e9)};
                while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
            }
            e->w_t0 = run_energy_read(e, &e->w_e0);
        }
        if (e->plan_on && e->clk && e->apply_ok) {
            double f = run_energy_instr_freq(e, chunk, mb, bwd);
            if (f > 0 && pt_clock_set(e->clk, f) != PT_OK) {
                fprintf(stderr, "ptrain-run: warning: rank %d: energy plan: %s; running at the default clocks from "
                        "here on\n", run_rank, pt_errmsg());
                e->apply_ok = 0;
                pt_clock_reset(e->clk);
            }
        }
        if (e->sweep_on && e->sweep_contrib && e->cur_idx >= 0) {
            e->ib_t = run_energy_read(e, &e->ib_e);
            if (e->have_last) {
                e->idle_e += e->ib_e - e->last_e;
                e->idle_t += e->ib_t - e->last_t;
            }
        }
        return PT_OK;
    }
    e->ninstr++;
    if (e->sweep_on && e->sweep_contrib && e->cur_idx >= 0) {
        double j, t = run_energy_read(e, &j);
        int type = (e->ctx->pp_rank * e->v + chunk) * 2 + bwd;
        sweep_acc *a = &e->acc[(size_t)e->cur_idx * (size_t)e->ntypes + (size_t)type];
        a->t += t - e->ib_t;
        a->n += 1;
        a->f += e->sweep_real && pt_clock_current(e->clk) > 0 ? pt_clock_current(e->clk) : e->sweep_f[e->cur_idx];
        if (e->measuring) {
            a->e += j - e->ib_e;
            a->ne += 1;
        }
        e->last_e = j, e->last_t = t, e->have_last = 1;
        if (e->ninstr == e->per_step) e->w_t1 = t, e->w_e1 = j;
    } else if (e->ninstr == e->per_step) {
        e->w_t1 = run_energy_read(e, &e->w_e1);
    }
    return PT_OK;
}

/* The rank's GPU for NVML: PTRAIN_ENERGY_GPU, else CUDA_VISIBLE_DEVICES's first entry. */
static void rank_gpu(char *buf, size_t len)
{
    buf[0] = '\0';
    const char *g = getenv("PTRAIN_ENERGY_GPU");
    if (g && *g) {
        snprintf(buf, len, "%s", g);
        return;
    }
    g = getenv("CUDA_VISIBLE_DEVICES");
    if (!g || !*g || !strcmp(g, "NoDevFiles") || g[0] == '-') return;
    snprintf(buf, len, "%.*s", (int)strcspn(g, ","), g);
}

/* Each counter's share: 1 / the ranks of this node that read it. */
static void share_counters(run_energy *e)
{
    MPI_Comm node;
    if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) != MPI_SUCCESS) return;
    int nr = 1;
    MPI_Comm_size(node, &nr);
    enum { K = 64 };
    uint64_t mine[K] = {0};
    int n = pt_meter_ncounters(e->meter);
    for (int i = 0; i < n && i < K; i++) {
        const char *key = pt_meter_counter_at(e->meter, i)->key;
        mine[i] = pt_fnv1a64(key, strlen(key)) | 1;
    }
    uint64_t *all = malloc(sizeof(uint64_t) * K * (size_t)nr);
    int ok = all != NULL, every = 0;
    MPI_Allreduce(&ok, &every, 1, MPI_INT, MPI_MIN, node);
    if (every) {
        MPI_Allgather(mine, K, MPI_UINT64_T, all, K, MPI_UINT64_T, node);
        for (int i = 0; i < n && i < K; i++) {
            int k = 0;
            for (long j = 0; j < (long)K * nr; j++) k += all[j] == mine[i];
            if (k > 1) pt_meter_set_share(e->meter, i, 1.0 / k);
        }
    }
    free(all);
    MPI_Comm_free(&node);
}

/* ---- a run that a signal ends: the clocks back first -------------------
 * SIGTERM (scancel, a time limit, preemption; without --save-dir, whose
 * handler saves and ends the run in order), SIGINT and SIGHUP would end
 * the rank with the plan's clocks left on its CPUs for every later job.
 * The handler writes the clocks found at open back itself
 * (pt_clock_restore_emergency, async-signal-safe) rather than set a flag
 * for the loop: a rank blocked in MPI (a peer stopped or dead) would never
 * look at it.  Then it ends the rank by the same signal, at its default
 * action, so the exit status says what ended it (143 for SIGTERM).  A
 * signal the launcher set to be ignored (nohup) stays ignored. */
static void on_end_signal(int sig)
{
    pt_clock_restore_emergency();
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(sig, &dfl, NULL);
    raise(sig); /* blocked in this handler: delivered, at the default action, when it returns */
}

static void catch_end_signals(int save_dir)
{
    static const int sigs[] = {SIGTERM, SIGINT, SIGHUP};
    for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++) {
        if (sigs[i] == SIGTERM && save_dir) continue; /* run_ckpt_catch_signals' */
        struct sigaction old, sa;
        if (sigaction(sigs[i], NULL, &old) != 0 || old.sa_handler == SIG_IGN) continue;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_end_signal;
        sigemptyset(&sa.sa_mask);
        for (size_t k = 0; k < sizeof sigs / sizeof *sigs; k++) sigaddset(&sa.sa_mask, sigs[k]);
        sigaction(sigs[i], &sa, NULL);
    }
}

run_energy *run_energy_start(const run_setup *s, const pt_pctx *ctx, pt_pipeline *pipe, int world, long start_step)
{
    const run_opts *o = &s->o;
    unsigned kinds = 0;
    int automatic = 0, ckind = 0;
    const char *dry_log = NULL;
    pt_meter_parse(o->energy, &kinds, &automatic);
    pt_clock_parse(o->energy_clock, &ckind, &dry_log);
    if (!kinds && !o->energy_plan && !o->profile_energy) return NULL; /* the same on every rank (agreed) */
    run_energy *e = calloc(1, sizeof *e);
    int ok = e != NULL, all = 0;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all) {
        free(e);
        run_agree(pt_fail(PT_ENOMEM, "out of memory for the energy meter"), "energy");
        return NULL;
    }
    e->s = s, e->ctx = ctx, e->pipe = pipe, e->world = world, e->rank = run_rank;
    e->pp = s->plan.pp, e->v = s->plan.virtual_stages > 0 ? s->plan.virtual_stages : 1, e->m = s->plan.microbatches;
    e->dp = s->plan.dp, e->start_step = start_step;
    e->per_step = 2 * e->m * e->v;
    e->straggler = -1;
    char gpu[128], note[2048];
    rank_gpu(gpu, sizeof gpu);
    /* the meter */
    pt_meter_open(&e->meter, kinds, automatic, gpu, note, sizeof note);
    e->measuring = pt_meter_ncounters(e->meter) > 0;
    share_counters(e);
    pt_meter_describe(e->meter, e->meter_desc, sizeof e->meter_desc);
    MPI_Allreduce(&e->measuring, &e->nmeasured, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (run_rank == 0) {
        for (char *l = strtok(note, "\n"); l; l = strtok(NULL, "\n")) fprintf(stderr, "ptrain-run: %s\n", l);
        if (e->nmeasured)
            printf("energy: measuring %s on rank 0; %d of %d ranks measure\n", e->meter_desc, e->nmeasured, world);
        else if (!automatic && kinds)
            printf("energy: nothing measured (no readable counter on any rank): energy is reported as null\n");
        fflush(stdout);
        fflush(stderr);
    }
    /* the clocks */
    if (o->energy_plan || o->profile_energy) {
        cpu_set_t set;
        int cpus[1024], ncpu = 0;
        if (sched_getaffinity(0, sizeof set, &set) == 0)
            for (int c = 0; c < CPU_SETSIZE && ncpu < 1024; c++)
                if (CPU_ISSET(c, &set)) cpus[ncpu++] = c;
        const double *range = gpu[0] && ckind != PT_CLOCK_CPUFREQ ? s->gpu_mhz : s->cpu_mhz;
        char logp[4200];
        if (dry_log) snprintf(logp, sizeof logp, "%s.%d", dry_log, run_rank);
        int rc = pt_clock_open(&e->clk, ckind, gpu[0] ? gpu : NULL, cpus, ncpu, range[0], range[1],
                               dry_log ? logp : NULL);
        char why[PT_ERROR_LEN] = "";
        if (rc) snprintf(why, sizeof why, "%s", pt_errmsg());
        if (pt_clock_kind(e->clk) == PT_CLOCK_CPUFREQ) catch_end_signals(o->save_dir != NULL);
        int can = e->clk != NULL;
        MPI_Allreduce(&can, &e->nclocked, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        pt_clock_describe(e->clk, e->clock_desc, sizeof e->clock_desc);
        if (run_rank == 0) {
            if (e->clk) printf("energy: clocks: %s on rank 0; %d of %d ranks can set theirs\n", e->clock_desc,
                               e->nclocked, world);
            else fprintf(stderr, "ptrain-run: energy: rank 0 cannot set clocks (%s): it runs at the default clocks; "
                         "%d of %d ranks can set theirs\n", why, e->nclocked, world);
        } else if (!e->clk && rc != PT_EUNSUPP) {
            fprintf(stderr, "ptrain-run: energy: rank %d cannot set clocks (%s): it runs at the default clocks\n",
                    run_rank, why);
        }
        fflush(stdout);
        fflush(stderr);
    }
    e->rep_point = calloc((size_t)(e->dp > 0 ? e->dp : 1), sizeof *e->rep_point);
    for (int d = 0; e->rep_point && d < e->dp; d++) e->rep_point[d] = BASE_POINT;
    /* the plan */
    if (o->energy_plan) {
        int rc = e->rep_point ? run_energy_plan_start(e) : pt_fail(PT_ENOMEM, "out of memory");
        int bad = rc < 0, any = 0;
        MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        if (any) {
            if (run_rank == 0) fprintf(stderr, "ptrain-run: warning: --energy-plan: %s; no plan applied\n",
                                       bad ? pt_errmsg() : "failed on another rank");
        } else {
            e->plan_on = 1;
            e->apply_ok = e->clk != NULL;
            const char *d = getenv("PTRAIN_ENERGY_DELAY");
            if (d && *d) {
                int dr = -1;
                double sec = 0;
                if (sscanf(d, "%d:%lf", &dr, &sec) == 2 && dr == ctx->dp_rank && sec > 0 && sec < 60) e->delay_s = sec;
            }
            if (run_rank == 0) {
                printf("energy plan: %s: %.3f ms, %.3f J per pipeline iteration (max clock %.3f ms, %.3f J: %+.1f%% "
                       "energy); %s\n", e->plan_name, e->base_time * 1e3, e->base_energy,
                       e->max_time * 1e3, e->max_energy, 100 * (e->base_energy / e->max_energy - 1),
                       e->nclocked ? (pt_clock_kind(e->clk) == PT_CLOCK_DRY ? "dry: clocks logged, not set"
                                                                           : "applied per instruction")
                                   : "not applied: no rank can set clocks");
                fflush(stdout);
            }
        }
    }
    if (o->profile_energy) run_energy_sweep_start(e);
    if (e->plan_on || e->sweep_on) pt_pipeline_set_hook(pipe, energy_hook, e);
    run_energy_read(e, &e->run_e0);
    return e;
}

void run_energy_step_begin(run_energy *e, long step)
{
    if (!e) return;
    e->in_step = 1;
    e->ninstr = 0;
    e->have_last = 0;
    e->w_e0 = e->w_e1 = e->w_t0 = e->w_t1 = 0;
    e->cur_idx = -1;
    if (e->sweep_on) {
        long k = step - e->sweep_first;
        if (k >= 0 && k < (long)e->nsweep * e->s->o.profile_steps) {
            e->cur_idx = (int)(k / e->s->o.profile_steps);
            /* the first step at a clock settles it: counted only with one step per clock */
            if (e->s->o.profile_steps > 1 && k % e->s->o.profile_steps == 0) e->cur_idx = -1;
            int idx = (int)(k / e->s->o.profile_steps);
            if (e->sweep_real && e->sweep_f[idx] > 0 && pt_clock_set(e->clk, e->sweep_f[idx]) != PT_OK) {
                fprintf(stderr, "ptrain-run: warning: rank %d: --profile-energy: %s; this rank stays at its current "
                        "clock\n", run_rank, pt_errmsg());
                pt_clock_close(e->clk);
                e->clk = NULL;
                e->sweep_real = 0;
            }
        }
    }
    e->t0 = run_energy_read(e, &e->e0);
}

void run_energy_step_end(run_energy *e, long step, double dt, double tokens, json_t *rec, char *line, size_t len)
{
    if (len) line[0] = '\0';
    if (!e) { /* --energy none: the fields, null */
        if (rec) {
            json_object_set_new(rec, "energy_j", json_null());
            json_object_set_new(rec, "power_w", json_null());
            json_object_set_new(rec, "tok_per_j", json_null());
        }
        return;
    }
    double j1;
    run_energy_read(e, &j1);
    e->in_step = 0;
    int measured = e->measuring;
    step_rec mine = {measured ? j1 - e->e0 : 0, (double)measured, e->pipe->sched_s, (double)e->ctx->dp_rank,
                     e->w_e1 - e->w_e0, e->w_t1 - e->w_t0};
    step_rec *all = malloc(sizeof *all * (size_t)e->world);
    int ok = all != NULL, every = 0;
    MPI_Allreduce(&ok, &every, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!every) {
        free(all);
        run_agree(pt_fail(PT_ENOMEM, "out of memory for the energy record of %d ranks", e->world), "energy");
        return;
    }
    MPI_Allgather(&mine, (int)sizeof mine, MPI_BYTE, all, (int)sizeof mine, MPI_BYTE, MPI_COMM_WORLD);
    double job = 0, mx = 0, tmax = 0;
    int nm = 0;
    for (int i = 0; i < e->world; i++) {
        tmax = fmax(tmax, all[i].sched_s);
        if (all[i].measured <= 0) continue;
        nm++;
        job += all[i].e;
        mx = fmax(mx, all[i].e);
    }
    if (measured) e->my_total += mine.e;
    e->job_total += job;
    e->job_time += dt;
    e->tokens += tokens;
    e->steps++;
    /* achieved against the plan: the schedule's time, and its energy per pipeline
     * (each rank's window, plus idle power for the rest of its replica's time) */
    if (e->plan_on && e->straggler < 0 && step > e->start_step && nm > 0) {
        double *rt = calloc((size_t)e->dp, sizeof(double));
        if (rt) {
            for (int i = 0; i < e->world; i++) {
                int d = (int)all[i].dp_rank;
                if (d >= 0 && d < e->dp) rt[d] = fmax(rt[d], all[i].sched_s);
            }
            double ew = 0;
            for (int i = 0; i < e->world; i++) {
                if (all[i].measured <= 0) continue;
                int d = (int)all[i].dp_rank;
                ew += all[i].win_e + e->prof.idle_w * fmax(0, rt[d] - all[i].win_t);
            }
            e->ach_e += ew * e->pp / nm;
            e->ach_t += rt[0];
            e->ach_n++;
            free(rt);
        }
    }
    run_energy_straggler(e, all);
    if (e->sweep_on && step + 1 >= e->sweep_first + (long)e->nsweep * e->s->o.profile_steps) run_energy_sweep_finish(e);
    free(all);
    if (rec) {
        json_object_set_new(rec, "energy_j", nm ? run_json_num(job) : json_null());
        json_object_set_new(rec, "power_w", nm && dt > 0 ? run_json_num(job / dt) : json_null());
        json_object_set_new(rec, "tok_per_j", nm && job > 0 ? run_json_num(tokens / job) : json_null());
        json_object_set_new(rec, "energy_j_max_rank", nm ? run_json_num(mx) : json_null());
        json_object_set_new(rec, "energy_ranks", json_integer(nm));
        if (e->plan_on) {
            json_object_set_new(rec, "schedule_ms", run_json_num(tmax * 1e3));
            json_object_set_new(rec, "straggler", e->straggler >= 0 ? json_integer(e->straggler) : json_null());
            json_object_set_new(rec, "clock_changes", json_integer(pt_clock_changes(e->clk)));
        }
    }
    if (nm && len)
        snprintf(line, len, " | %.3g J | %.3g W | %.4g tok/J", job, dt > 0 ? job / dt : 0, job > 0 ? tokens / job : 0);
}

void run_energy_header(const run_energy *e, json_t *hdr)
{
    if (!hdr) return;
    json_object_set_new(hdr, "energy_source", e ? json_string(e->meter_desc) : json_string("none"));
    json_object_set_new(hdr, "energy_ranks", json_integer(e ? e->nmeasured : 0));
    if (e && e->plan_on) {
        json_object_set_new(hdr, "energy_plan", json_string(e->plan_name));
        json_object_set_new(hdr, "energy_plan_time_s", run_json_num(e->base_time));
        json_object_set_new(hdr, "energy_plan_energy_j", run_json_num(e->base_energy));
    }
}

void run_energy_finish(run_energy *e, json_t *done, char *line, size_t len)
{
    if (len) line[0] = '\0';
    if (!e) {
        if (done) {
            json_object_set_new(done, "energy_j", json_null());
            json_object_set_new(done, "avg_power_w", json_null());
            json_object_set_new(done, "tok_per_j", json_null());
        }
        return;
    }
    run_energy_sweep_finish(e); /* a sweep the run ended before finishing */
    if (e->clk) pt_clock_reset(e->clk);
    double j_end;
    run_energy_read(e, &j_end);
    double mine[2] = {e->my_total, e->measuring ? j_end - e->run_e0 : 0}, run_sum[2];
    MPI_Allreduce(mine, run_sum, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    double *per = run_rank == 0 ? malloc(sizeof(double) * (size_t)e->world) : NULL;
    int ok = run_rank != 0 || per != NULL, every = 0;
    MPI_Allreduce(&ok, &every, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (every) MPI_Gather(&e->my_total, 1, MPI_DOUBLE, per, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (run_rank != 0) {
        free(per);
        return;
    }
    const int nm = e->nmeasured;
    double tot = e->job_total;
    if (done) {
        json_object_set_new(done, "energy_j", nm ? run_json_num(tot) : json_null());
        json_object_set_new(done, "energy_run_j", nm ? run_json_num(run_sum[1]) : json_null());
        json_object_set_new(done, "avg_power_w", nm && e->job_time > 0 ? run_json_num(tot / e->job_time) : json_null());
        json_object_set_new(done, "tok_per_j", nm && tot > 0 ? run_json_num(e->tokens / tot) : json_null());
        json_t *arr = json_array();
        for (int i = 0; per && i < e->world; i++) json_array_append_new(arr, nm ? run_json_num(per[i]) : json_null());
        json_object_set_new(done, "energy_j_per_rank", arr);
        json_object_set_new(done, "energy_ranks", json_integer(nm));
        if (e->plan_on) {
            json_object_set_new(done, "plan_time_s", run_json_num(e->base_time));
            json_object_set_new(done, "plan_energy_j", run_json_num(e->base_energy));
            json_object_set_new(done, "achieved_time_s", e->ach_n ? run_json_num(e->ach_t / e->ach_n) : json_null());
            json_object_set_new(done, "achieved_energy_j", e->ach_n ? run_json_num(e->ach_e / e->ach_n) : json_null());
            json_object_set_new(done, "straggler_moves", json_integer(e->moves));
        }
    }
    if (nm && len) {
        double mx = 0;
        int imax = 0;
        for (int i = 0; per && i < e->world; i++)
            if (per[i] > mx) mx = per[i], imax = i;
        snprintf(line, len, " | energy %.4g J (%.3g W, %.4g tok/J; rank 0 %.4g J, most rank %d %.4g J; %d/%d ranks "
                 "measured)", tot, e->job_time > 0 ? tot / e->job_time : 0, tot > 0 ? e->tokens / tot : 0,
                 per ? per[0] : 0, imax, mx, nm, e->world);
    }
    if (e->plan_on) {
        if (e->ach_n)
            printf("energy plan: %s planned %.3f ms, %.3f J per pipeline iteration; achieved %.3f ms (%+.1f%%)%s%.3f J "
                   "(%+.1f%%) over %ld steps; %ld clock changes on rank 0, %ld straggler moves\n", e->plan_name,
                   e->base_time * 1e3, e->base_energy, 1e3 * e->ach_t / e->ach_n,
                   100 * (e->ach_t / e->ach_n / e->base_time - 1), ", ", e->ach_e / e->ach_n,
                   100 * (e->ach_e / e->ach_n / e->base_energy - 1), e->ach_n, pt_clock_changes(e->clk), e->moves);
        else
            printf("energy plan: %s planned %.3f ms, %.3f J per pipeline iteration; achieved: not measured; %ld "
                   "clock changes on rank 0\n", e->plan_name, e->base_time * 1e3, e->base_energy,
                   pt_clock_changes(e->clk));
        fflush(stdout);
    }
    free(per);
}

void run_energy_free(run_energy *e)
{
    if (!e) return;
    if (e->pipe) pt_pipeline_set_hook(e->pipe, NULL, NULL);
    pt_clock_close(e->clk);
    pt_meter_close(e->meter);
    if (e->have_frontier) {
        pt_energy_frontier_free(&e->fr);
        pt_energy_profile_free(&e->prof);
        pt_energy_dag_free(&e->dag);
    }
    free(e->rep_point);
    free(e->acc);
    free(e);
}
