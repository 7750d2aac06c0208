/* SPDX-License-Identifier: MIT */
/* ptrain-run's energy: measurement, the per-instruction clock plan
 * (Perseus), the straggler response and the clock sweep that writes a
 * profile (bin/run/run.h; ptrain-run(1), ENERGY).
 *
 * Measurement.  Each rank opens a meter (lib/energy/meter.h: its GPU's
 * NVML counter, the CPU packages' RAPL counters).  A package is shared by
 * the node's ranks: each rank is given 1/k of a counter k ranks of its
 * node read, so the job's sum counts it once.  Around every training step
 * each rank reads its meter; one allgather per step gives every rank the
 * step's joules of every rank (and the schedule times the straggler test
 * needs).  The job's joules per step, its average watts (joules / step
 * time) and tokens per joule go to the step line, the train record and
 * the summary; validation steps are not counted (energy_run_j in the done
 * record is the meter over the whole run).
 *
 * Applying a plan.  The frontier of the run's pipeline iteration is
 * computed at start-up (lib/plan/energy.h) from --energy-profile, else
 * from the cost model's instruction times and a power model whose clocks
 * are the range every rank's controller offers (marked modelled).  The
 * pipeline hook sets, before each forward and backward, the clock the
 * current point gives that instruction (--energy-plan FILE: the file's
 * clocks; auto: the intrinsic point).  Where the clocks cannot be set the
 * rank says so in one line and runs at its default clocks.
 *
 * Stragglers (Perseus sec. 3, extrinsic energy bloat).  Each replica's
 * schedule time (pt_pipeline.sched_s, the slowest of its ranks) over the
 * planned time of its current point is its pace; the slowest replica, when
 * its pace is --energy-straggler above the median pace of the others for
 * two steps running, is the straggler, and every other replica moves to the least-energy
 * frontier point whose planned time is the straggler's schedule time in
 * its own pace (pt_energy_frontier_at); two steps without a straggler and
 * every replica is back at its plan.  Every rank decides from the same
 * allgathered numbers, so all agree.
 *
 * The sweep (--profile-energy).  From the run's second step, N clocks
 * (the controller's offered clocks, the top one first, evenly apart) for
 * K steps each; the hook reads the meter around every instruction, and
 * the gaps between instructions (p2p waits) give the idle power (else a
 * 0.25 s sleep does).  The sums over ranks make each instruction type's
 * time and energy at each clock; rank 0 writes the profile.  Where no
 * clock could be set, or no energy measured, the profile is the power
 * model's over the measured times (calibrated to the measured energy at
 * the default clock when there is one) and says "modelled". */
#define _GNU_SOURCE
#include "run.h"
#include "core/file.h"
#include "energy/clock.h"
#include "energy/meter.h"
#include "energy/profile.h"
#include "parallel/context.h"
#include "pipeline/pipeline.h"
#include "pipeline/schedule.h"
#include "plan/energy.h"
#include "plan_energy.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <mpi.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- options ------------------------------------------------------------ */
static int parse_range(const char *name, double r[2])
{
    r[0] = r[1] = 0;
    const char *v = getenv(name);
    if (!v || !*v) return 0;
    char *end;
    errno = 0;
    double a = strtod(v, &end);
    if (end == v || *end != '-') goto bad;
    const char *p = end + 1;
    double b = strtod(p, &end);
    if (end == p || *end || errno || !(a > 0) || !(b >= a) || b > 1e6) goto bad;
    r[0] = a, r[1] = b;
    return 0;
bad:
    return pt_fail(PT_EINVAL, "%s='%s' is not a clock range (valid: MIN-MAX in MHz, 0 < MIN <= MAX, e.g. 1100-1980)",
                   name, v);
}

int run_energy_options(run_opts *o)
{
    const char *lv = getenv("PTRAIN_ENERGY");
    if (lv && *lv) {
        if (strcmp(lv, "off") && strcmp(lv, "report") && strcmp(lv, "plan") && strcmp(lv, "apply"))
            return pt_fail(PT_EINVAL, "PTRAIN_ENERGY='%s' is not valid (valid: off, report, plan, apply)", lv);
        o->energy_level = lv;
    }
    const char *level = o->energy_level ? o->energy_level : "";
    int plan_level = !strcmp(level, "plan"), apply_level = !strcmp(level, "apply");
    if (!o->energy) o->energy = !strcmp(level, "off") ? "none" : "auto";
    /* the level's plan, unless this run profiles (the two exclude each other) */
    if (!o->energy_plan && !o->profile_energy && (plan_level || apply_level)) o->energy_plan = "auto";
    if (!o->energy_clock) o->energy_clock = plan_level ? "dry" : "auto";
    unsigned kinds;
    int automatic, kind;
    const char *log;
    if (pt_meter_parse(o->energy, &kinds, &automatic) != PT_OK) return pt_fail(PT_EINVAL, "--energy: %s", pt_errmsg());
    if (pt_clock_parse(o->energy_clock, &kind, &log) != PT_OK)
        return pt_fail(PT_EINVAL, "--energy-clock: %s", pt_errmsg());
    if (o->energy_plan && !o->energy_plan[0])
        return pt_fail(PT_EINVAL, "--energy-plan '' is not valid (valid: auto or a plan file from ptrain-plan "
                       "--energy-plan-out)");
    if (o->energy_profile && !o->energy_profile[0])
        return pt_fail(PT_EINVAL, "--energy-profile '' is not valid (valid: a profile from ptrain-run "
                       "--profile-energy)");
    if (o->profile_energy && !o->profile_energy[0])
        return pt_fail(PT_EINVAL, "--profile-energy '' is not valid (valid: the profile file to write)");
    if (o->profile_energy && o->energy_plan)
        return pt_fail(PT_EINVAL, "--profile-energy and --energy-plan %s exclude each other: profile in one run, then "
                       "plan from the profile (--energy-profile FILE --energy-plan auto)", o->energy_plan);
    if (o->energy_profile && !o->energy_plan)
        return pt_fail(PT_EINVAL, "--energy-profile is the profile --energy-plan plans from: give --energy-plan auto "
                       "(or FILE) too");
    double r[2];
    if (parse_range("PTRAIN_ENERGY_GPU_MHZ", r) < 0 || parse_range("PTRAIN_ENERGY_CPU_MHZ", r) < 0) return -1;
    return 0;
}

/* ---- set-up (every rank, before the agreement) -------------------------- */
int run_energy_setup(run_setup *s, const run_nodes *nodes)
{
    const run_opts *o = &s->o;
    const pt_plan *p = &s->plan;
    if (parse_range("PTRAIN_ENERGY_GPU_MHZ", s->gpu_mhz) < 0 ||
        parse_range("PTRAIN_ENERGY_CPU_MHZ", s->cpu_mhz) < 0)
        return -1;
    int v = p->virtual_stages > 0 ? p->virtual_stages : 1;
    uint64_t h = 0;
    if (o->energy_plan && strcmp(o->energy_plan, "auto") != 0) {
        if (pt_energy_plan_load(o->energy_plan, &s->eplan) != PT_OK)
            return pt_fail(PT_EINVAL, "--energy-plan: %s", pt_errmsg());
        const pt_energy_meta *m = &s->eplan.meta;
        if (m->pp != p->pp || m->v != v || m->m != p->microbatches || m->schedule != p->schedule)
            return pt_fail(PT_EINVAL, "--energy-plan %s is for %s pp=%d virtual_stages=%d microbatches=%d, this run is "
                           "%s pp=%d virtual_stages=%d microbatches=%d (valid: a plan of this pipeline: "
                           "ptrain-plan --energy-plan-out with the same --pp, --schedule, --microbatches)",
                           o->energy_plan, pt_schedule_name(m->schedule), m->pp, m->v, m->m,
                           pt_schedule_name(p->schedule), p->pp, v, p->microbatches);
        h ^= pt_fnv1a64(s->eplan.freq, sizeof(double) * (size_t)s->eplan.n);
    }
    if (o->energy_profile) {
        if (pt_energy_profile_load(o->energy_profile, &s->eprofile, &s->eprofile_meta) != PT_OK)
            return pt_fail(PT_EINVAL, "--energy-profile: %s", pt_errmsg());
        const pt_energy_meta *m = &s->eprofile_meta;
        if (m->pp != p->pp || m->v != v)
            return pt_fail(PT_EINVAL, "--energy-profile %s was made with pp=%d virtual_stages=%d, this run has pp=%d "
                           "virtual_stages=%d (valid: a profile of this pipeline)", o->energy_profile, m->pp, m->v,
                           p->pp, v);
        for (int t = 0; t < s->eprofile.ntypes; t++)
            h = h * 31 + pt_fnv1a64(s->eprofile.choice[t], sizeof(pt_energy_choice) * (size_t)s->eprofile.nchoices[t]);
    }
    if (o->profile_energy) {
        long need = o->profile_clocks * o->profile_steps + 1;
        if (o->steps < need)
            return pt_fail(PT_EINVAL, "--profile-energy needs %ld steps (the first, then %ld clocks x %ld steps), "
                           "--steps is %ld (valid: --steps >= %ld, or fewer --profile-clocks/--profile-steps)",
                           need, o->profile_clocks, o->profile_steps, o->steps, need);
        if (run_rank == 0 && pt_output_check(o->profile_energy) != PT_OK)
            return pt_fail(PT_EINVAL, "--profile-energy: %s", pt_errmsg());
    }
    if (o->energy_plan || o->profile_energy) {
        char source[320];
        int island = 0;
        if (run_node_hw(o, nodes, &s->ehw, &island, source, sizeof source) < 0)
            return pt_fail(PT_EINVAL, "--energy-plan: %s", pt_errmsg());
    }
    /* the options (and what the files hold) every rank must share */
    char text[1024];
    snprintf(text, sizeof text, "%s|%s|%s|%s|%d|%ld|%ld|%.6g|%.6g-%.6g|%.6g-%.6g", o->energy, o->energy_clock,
             o->energy_plan ? (strcmp(o->energy_plan, "auto") ? "file" : "auto") : "-", o->energy_profile ? "p" : "-",
             o->profile_energy != NULL, o->profile_clocks, o->profile_steps, o->straggler, s->gpu_mhz[0], s->gpu_mhz[1],
             s->cpu_mhz[0], s->cpu_mhz[1]);
    s->energy_id = pt_fnv1a64(text, strlen(text)) ^ h;
    if (!s->energy_id) s->energy_id = 1;
    return 0;
}

void run_energy_setup_free(run_setup *s)
{
    pt_energy_plan_free(&s->eplan);
    pt_energy_profile_free(&s->eprofile);
}

/* ---- the run ------------------------------------------------------------ */
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

static double now_read(run_energy *e, double *j)
{
    double t = pt_now();
    *j = 0;
    if (e->measuring && pt_meter_read(e->meter, j) != PT_OK) {
        fprintf(stderr, "ptrain-run: warning: rank %d: %s; energy is not measured on this rank from here on\n",
                run_rank, pt_errmsg());
        e->measuring = 0;
    }
    return t;
}

/* The clock of this rank's instruction (chunk, mb, bwd) at replica point k. */
static double instr_freq(const run_energy *e, int chunk, int mb, int bwd)
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
            e->w_t0 = now_read(e, &e->w_e0);
        }
        if (e->plan_on && e->clk && e->apply_ok) {
            double f = instr_freq(e, chunk, mb, bwd);
            if (f > 0 && pt_clock_set(e->clk, f) != PT_OK) {
                fprintf(stderr, "ptrain-run: warning: rank %d: energy plan: %s; running at the default clocks from "
                        "here on\n", run_rank, pt_errmsg());
                e->apply_ok = 0;
                pt_clock_reset(e->clk);
            }
        }
        if (e->sweep_on && e->sweep_contrib && e->cur_idx >= 0) {
            e->ib_t = now_read(e, &e->ib_e);
            if (e->have_last) {
                e->idle_e += e->ib_e - e->last_e;
                e->idle_t += e->ib_t - e->last_t;
            }
        }
        return PT_OK;
    }
    e->ninstr++;
    if (e->sweep_on && e->sweep_contrib && e->cur_idx >= 0) {
        double j, t = now_read(e, &j);
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
        e->w_t1 = now_read(e, &e->w_e1);
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

static int plan_start(run_energy *e)
{
    const run_setup *s = e->s;
    const pt_plan *p = &s->plan;
    pt_model_shape ms = {s->cfg.n_layer, s->cfg.n_head, s->cfg.n_embd, s->cfg.seq_len, s->cfg.vocab};
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

static void sweep_start(run_energy *e)
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
        int rc = e->rep_point ? plan_start(e) : pt_fail(PT_ENOMEM, "out of memory");
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
    if (o->profile_energy) sweep_start(e);
    if (e->plan_on || e->sweep_on) pt_pipeline_set_hook(pipe, energy_hook, e);
    now_read(e, &e->run_e0);
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
    e->t0 = now_read(e, &e->e0);
}

/* The profile from the sweep's sums (every rank), written by rank 0. */
static void sweep_finish(run_energy *e)
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
        double j0, j1, t0 = now_read(e, &j0);
        struct timespec ts = {0, 250000000L};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
        double t1 = now_read(e, &j1);
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

/* The straggler test and the moves (every rank, the same numbers). */
static void straggler_step(run_energy *e, const step_rec *all)
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
    now_read(e, &j1);
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
    straggler_step(e, all);
    if (e->sweep_on && step + 1 >= e->sweep_first + (long)e->nsweep * e->s->o.profile_steps) sweep_finish(e);
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
    sweep_finish(e); /* a sweep the run ended before finishing */
    if (e->clk) pt_clock_reset(e->clk);
    double j_end;
    now_read(e, &j_end);
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
