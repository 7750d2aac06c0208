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
 * the default clock when there is one) and says "modelled".
 *
 * The modules (bin/run/energy.h): energy.c the options and the set-up
 * before the agreement; energy_meter.c the meter, the step's numbers, the
 * pipeline hook, start and finish; energy_plan.c the frontier plan and the
 * straggler response; energy_sweep.c the sweep and the profile it writes. */
#define _GNU_SOURCE
#include "run.h"
#include "core/file.h"
#include "energy/clock.h"
#include "energy/meter.h"
#include "energy/profile.h"
#include "contract/schedule.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>


/* ---- options ------------------------------------------------------------ */
static int parse_range(const char *name, double r[2])
{
    r[0] = r[1] = 0;
    const char *v = getenv(name);
    if (!v || !*v) return 0;
    if (pt_clock_parse_range(v, r) != PT_OK)
        return pt_fail(PT_EINVAL, "%s='%s' is not a clock range (valid: " PT_CLOCK_RANGE_VALID ")", name, v);
    return 0;
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
