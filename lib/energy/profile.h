/* SPDX-License-Identifier: MIT */
/* Energy profiles and energy plans as JSON files (jansson).
 *
 * A profile (ptrain-run --profile-energy writes it, ptrain-plan
 * --energy-profile and ptrain-run --energy-profile read it) holds, for every
 * instruction type of a pipeline (lib/plan/energy.h: type (rank * v +
 * chunk) * 2 + bwd), its time and energy at each clock:
 *   {"format": "ptrain-energy-profile", "version": 1,
 *    "modelled": false, "basis": "measured: ...", "device": "cpu",
 *    "schedule": "1f1b", "pp": 2, "virtual_stages": 1, "microbatches": 4,
 *    "plan": "...", "idle_w": 11.5,
 *    "types": [{"type": 0, "rank": 0, "chunk": 0, "bwd": false,
 *               "choices": [{"freq_mhz": 1200, "time_s": 0.0021, "energy_j": 0.031}, ...]}, ...]}
 * (time_s seconds and energy_j joules of one instruction, one microbatch,
 * on one device; idle_w watts of a device waiting for a peer).
 *
 * An energy plan (ptrain-plan --energy-plan-out writes it, ptrain-run
 * --energy-plan reads it) is one frontier point's clock for every
 * instruction of one iteration:
 *   {"format": "ptrain-energy-plan", "version": 1, "point": "intrinsic",
 *    "modelled": true, "schedule": "1f1b", "pp": 2, "virtual_stages": 1,
 *    "microbatches": 4, "time_s": ..., "energy_j": ...,
 *    "max_clock": {"time_s": ..., "energy_j": ...},
 *    "instructions": [{"rank": 0, "chunk": 0, "mb": 0, "bwd": false, "freq_mhz": 1500}, ...]}
 *
 * Reading refuses (PT_EFORMAT, one line naming the file and the field) a
 * file over 64 MiB (from its size, before anything is read), any other
 * format or version, a count of types that is not 2 * pp *
 * virtual_stages, a type missing or given twice, a choice's or an
 * instruction's clock not in (0, 100000] MHz (PT_CLOCK_MAX_MHZ), time not
 * > 0 or energy negative or not finite, an instruction outside the
 * schedule or one missing.  Files are regular files only
 * (core/file.h); writing replaces atomically.  Errors: pt_fail. */
#ifndef PTRAIN_ENERGY_PROFILE_H
#define PTRAIN_ENERGY_PROFILE_H

#include "plan/energy.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a profile or plan was made for, and how. */
typedef struct pt_energy_meta {
    int schedule;          /* a pt_schedule */
    int pp, v, m;          /* pipeline size, chunks per rank, microbatches */
    char device[16];       /* "gpu" or "cpu" */
    char basis[256];       /* "measured: nvml GPU ..., 6 clocks x 2 steps", "modelled: ..." */
    char plan[640];        /* the plan summary it was made under ("" unknown) */
} pt_energy_meta;

int pt_energy_profile_save(const char *path, const pt_energy_profile *pr, const pt_energy_meta *meta);
/* Load into *pr (free with pt_energy_profile_free) and *meta. */
int pt_energy_profile_load(const char *path, pt_energy_profile *pr, pt_energy_meta *meta);

/* A loaded energy plan: clock (MHz) of instruction (stage, mb, bwd) at
 * freq[((bwd * pp * v) + stage) * m + mb] (stage = chunk * pp + rank, the
 * DAG's numbering, lib/plan/energy.c). */
typedef struct pt_energy_plan {
    pt_energy_meta meta;
    char point[32];        /* "intrinsic", "deadline +10%", ... */
    int modelled;
    double time_s, energy_j;           /* the point, per pipeline iteration */
    double max_time_s, max_energy_j;   /* max clock */
    int n;                 /* 2 * pp * v * m */
    double *freq;          /* [n] */
} pt_energy_plan;

/* Index of instruction (stage, mb, bwd) in pt_energy_plan.freq and in a
 * pt_energy_dag's instructions. */
static inline int pt_energy_instr_index(int pp, int v, int m, int stage, int mb, int bwd)
{
    return ((bwd * pp * v) + stage) * m + mb;
}

/* Write point `pt` of the frontier of dag under pr (its clocks:
 * pr->choice[type][pt->choice[i]].freq_mhz) named `point`; max clock from f
 * (may be NULL: then the point's own time and energy). */
int pt_energy_plan_save(const char *path, const pt_energy_dag *dag, const pt_energy_profile *pr,
                        const pt_energy_point *pt, const pt_energy_frontier *f, const char *point,
                        const pt_energy_meta *meta);
int pt_energy_plan_load(const char *path, pt_energy_plan *out);
void pt_energy_plan_free(pt_energy_plan *p);

#ifdef __cplusplus
}
#endif
#endif
