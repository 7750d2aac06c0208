/* SPDX-License-Identifier: MIT */
/* ptrain-plan --energy (bin/plan_energy.c). */
#ifndef PTRAIN_PLAN_ENERGY_H
#define PTRAIN_PLAN_ENERGY_H
#include "plan/cost.h"
#include "plan/energy.h"
#include "energy/profile.h"
#include "contract/plan.h"

#include <jansson.h>
#include <stdio.h>

/* The time at the top clock of every instruction type of plan p (type
 * (rank * v + chunk) * 2 + bwd, seconds): the cost model's forward and
 * backward of one microbatch on that virtual stage (lib/plan/cost.h
 * pt_cost_stages: its FLOPs at the GEMM rate of p's precision, the bf16
 * rate for bf16 when hw knows it, plus its tp and sp calls in the
 * precision's bytes); *p2p_s the cost model's time of one boundary send
 * between stages (2-byte activations in bf16), on the node's links.
 * -1 with the cost model's one line in pt_errmsg() (no GEMM rate). */
int plan_energy_times(const pt_model_shape *m, int global_batch, const pt_plan *p, const pt_hw *hw, double *type_time,
                      double *p2p_s);
/* Build the DAG, the profile and the frontier of plan p: the profile is
 * modelled from the power model pm when `measured` is NULL; else *measured
 * (a profile loaded with pt_energy_profile_load, made on pp and
 * virtual_stages equal to the plan's: -1 with one line naming both when
 * not) is copied into *pr. */
int plan_energy(const pt_model_shape *m, int global_batch, const pt_plan *p, const pt_hw *hw,
                const pt_energy_power_model *pm, const pt_energy_profile *measured, const pt_energy_meta *meta,
                double tau_s, pt_energy_dag *dag, pt_energy_profile *pr, pt_energy_frontier *f);
/* The table (max clock, intrinsic, deadline at +slowdown, extrinsic at a
 * straggler's iteration time, the frontier sampled) and its JSON.
 * source: "gpu power model", "profile FILE". */
void plan_energy_print(FILE *o, const pt_energy_dag *dag, const pt_energy_profile *pr, const pt_energy_frontier *f,
                       const char *source, double slowdown, double straggler_s);
/* model_name: the power model (NULL with a profile); profile: its path
 * (NULL when modelled). */
json_t *plan_energy_json(const pt_energy_dag *dag, const pt_energy_profile *pr, const pt_energy_frontier *f,
                         const char *model_name, const char *profile, double slowdown, double straggler_s);
/* The point --energy-plan-out writes: the deadline point of --energy-slowdown
 * when given (and reached), else the intrinsic one; its name into name. */
int plan_energy_pick(const pt_energy_frontier *f, double slowdown, char *name, size_t len);
#endif
