/* SPDX-License-Identifier: MIT */
/* One resolution path: a user's request (what is pinned, 0 = choose) into
 * the plan a job runs, for the SPANK plugin (at srun time and in
 * slurmstepd) and for ptrain-run under plain mpirun (--mode auto): a plan
 * is resolved once, the same way everywhere (docs/ARCHITECTURE.md).
 *
 * libc only (with libm), as the rest of lib/plan: the plugin links it into
 * slurmstepd.  Deterministic: every node and every rank computes the same
 * plan from the same inputs. */
#ifndef PTRAIN_PLAN_RESOLVE_H
#define PTRAIN_PLAN_RESOLVE_H
#include <stddef.h>

#include "core/core.h"
#include "plan/cost.h"
#include "contract/plan.h"
#include "plan/search.h"

/* Resolve request `req` into a concrete plan for cluster c, model m and
 * global_batch sequences per step (the batch of all dp ranks together).
 *
 * Inputs
 *   c            the job's nodes (nnodes, tasks_per_node [nnodes]) and the
 *                node model's rates (pt_hw: GEMM rate in GFLOP/s, link
 *                bandwidths in GB/s per rank, latencies in s, memory per
 *                rank in bytes; 0 memory: not judged).
 *   m            the model shape [L, H, C, T, V] (pt_model_shape).
 *   lim          the administrator's limits (largest tp and pp, modes,
 *                highest ZeRO stage, schedules).
 *   req          what the user pinned, pt_plan_search's convention: mode
 *                auto chooses the mode, a named mode fixes it; tp, tp_depth,
 *                sp, pp, microbatches, virtual_stages 0 = choose; a schedule
 *                other than 1f1b, a recompute other than none and an
 *                explicit split are pins; req->dp is ignored (dp is what is
 *                left: world / (pp * tp * sp)).
 *   zero_pinned  1 when the user gave the ZeRO stage (req->zero, 0 included:
 *                a pinned 0 forbids ZeRO); 0 lets the search choose
 *                0..lim->max_zero after default_zero.
 *   default_zero the administrator's ZeRO stage for requests that give none
 *                (0..lim->max_zero): tried as a pin first and dropped (ZeRO
 *                then forbidden) when no plan can take it, e.g. dp*sp = 1.
 *
 * Before the search, the pins that can be judged from the task count and
 * the model alone are checked, each named as lim's front end spells it
 * (pt_plan_flag, lim->flag_prefix): each pinned tp, sp and pp divides the
 * tasks ("--ptrain-tp=3 does not divide the 4 tasks of the step (valid tp
 * here: 1, 2, 4)" under the prefix "--ptrain-"), their product too, an explicit
 * split covers n_layer blocks (pt_plan_check_model), and a pinned ZeRO
 * stage > 0 leaves dp*sp >= 2 ranks to shard over (Rajbhandari et al.
 * 2020, sec. 5).  Then pt_plan_search (search.h: cost model, Alpa-style
 * stage split, SageMaker-style placement) chooses what is left.
 *
 * Outputs
 *   out          the chosen plan (res->best.plan).
 *   res          the search result for the explanation (pt_plan_explain):
 *                the winner, runners-up, predicted times (s) and memory
 *                (bytes).  NULL: not wanted.
 *   notes        warnings for the user, one per line ('\n' between lines,
 *                NUL terminated, cut to notes_len), "" when none; NULL or
 *                notes_len 0: not wanted.  Today: a layout the user named or
 *                pinned (mode other than auto, or tp > 0) whose tensor group
 *                spans a slower link than the fastest one inside a node
 *                (network between nodes; node when the node has islands) is
 *                honoured with "ptrain: warning: tp=4 (2d) spans the network
 *                link (G GB/s per rank, L us; inside a node G GB/s):
 *                predicted tp communication X ms of a Y ms step", followed,
 *                when some of the layout's tp communicators stay on faster
 *                links, by "; on it: 2d columns X ms, ...; 2d rows X ms on
 *                the island link" (each communicator is priced on its own
 *                link, pt_cost_eval_at).
 *
 * Returns 0, or -1 with one line in pt_errmsg() naming the value and what would
 * be valid (the pin checks above, or pt_plan_search's refusal); never
 * exits, never prints.  *out and *res are undefined after an error. */
int pt_plan_resolve(const pt_cluster *c, const pt_model_shape *m, int global_batch,
                    const pt_plan_limits *lim, const pt_plan *req, int zero_pinned, int default_zero,
                    pt_plan *out, pt_search_result *res, char *notes, size_t notes_len);

#endif
