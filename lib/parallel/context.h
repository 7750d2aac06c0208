/* SPDX-License-Identifier: MIT */
/* The parallel context: the dp x pp x tp x sp process grid of a job and
 * the communicators of its groups (ptrain-layouts(7)).
 *
 * Ranks are placed in the grid by the plan's rank_order letters (a
 * permutation of D, P, T; the right-most varies fastest, as SageMaker's
 * placement_strategy: "DPT" keeps tensor groups on neighbouring ranks,
 * i.e. inside a node).  The T letter covers a block of tp*sp ranks, tp
 * varying fastest.  The grid rank of a process comes from the launcher
 * (the SPANK plugin's RANK) when it is a consistent permutation, else from
 * MPI; the world communicator is re-ordered by it with MPI_Comm_split.
 *
 * The tensor-parallel group is itself a grid of three axes
 * (pt_plan_tp_dims): {1, 1, tp} for 1d, {depth, row i, column j} for
 * 2d/2.5d, {i, j, k} for 3d; tp_rank = (c0 * dims[1] + c1) * dims[2] + c2.
 * For every subset `mask` of those axes (bit a = axis a) the context
 * builds two groups:
 *   tp_sub[mask]  ranks that differ only in the masked tp axes (same dp,
 *                 sp and other tp coordinates): the layouts' row, column,
 *                 depth, input/weight/output groups; a rank's place in it
 *                 is the mixed-radix index of its masked coordinates;
 *   sync[mask]    the same plus every dp and sp coordinate: the ranks
 *                 holding one copy of a parameter shard whose gradient is
 *                 summed over them (sync[0] is dp x sp).
 */
#ifndef PTRAIN_CONTEXT_H
#define PTRAIN_CONTEXT_H
#include "comm/comm.h"
#include "contract/plan.h"

#define PT_TP_AXES 3

typedef struct pt_pctx {
    pt_plan plan;
    int rank, world_size;               /* grid rank, dp*pp*tp*sp */
    int dp_rank, pp_rank, tp_rank, sp_rank;
    int tp_dims[PT_TP_AXES];            /* pt_plan_tp_dims */
    int tp_coord[PT_TP_AXES];           /* this rank's place on each tp axis */
    pt_comm world;                      /* all ranks, ordered by grid rank */
    pt_comm dp;                         /* ranks with my (pp, tp, sp) coordinates */
    pt_comm tp;                         /* ranks with my (dp, pp, sp) coordinates */
    pt_comm sp;                         /* ranks with my (dp, pp, tp) coordinates */
    pt_comm pp;                         /* ranks with my (dp, tp, sp) coordinates, by pp_rank */
    pt_comm embed;                      /* first and last stage of my pp group (the tied
                                         * embedding/head weight's gradient sum, Megatron-LM);
                                         * size 1 (myself) when pp == 1 or on a middle stage */
    pt_comm tp_sub[1 << PT_TP_AXES];
    pt_comm sync[1 << PT_TP_AXES];
} pt_pctx;

/* Build the grid over `comm` for plan p.  grid_rank is this process's rank
 * in the grid (0..world-1, a permutation across processes) or -1 to use the
 * MPI rank.  Collective over comm.
 * Errors: PT_EINVAL when the plan does not fit the communicator's size or
 * the grid ranks are not a permutation (message names the sizes), PT_ECOMM. */
int pt_pctx_init(pt_pctx *c, MPI_Comm comm, const pt_plan *p, int grid_rank);
void pt_pctx_free(pt_pctx *c);

/* Give every group of the context a device path (lib/comm's
 * pt_comm_device_enable, mode enum pt_comm_device_mode): collectives on
 * device buffers then run over NCCL, or staged through host memory where
 * ranks share a GPU.  Collective over the world; every rank in the same
 * order.  PT_OK or the first group's error (every member of a group
 * returns the same). */
int pt_pctx_device_enable(pt_pctx *c, int mode);
/* Modelled bytes this rank sent over all of the context's groups
 * (pt_comm_sent_total summed), and a reset of every group's counters. */
uint64_t pt_pctx_sent_total(const pt_pctx *c);
void pt_pctx_reset_stats(pt_pctx *c);

/* The grid rank the launcher assigned, if it is consistent: reads RANK and
 * WORLD_SIZE and checks (collectively) that every process got a distinct
 * rank in 0..size-1 and WORLD_SIZE == size.  Returns that rank, or -1 when
 * the variables are absent or inconsistent (e.g. mpirun inside sbatch,
 * where they belong to Open MPI's per-node daemon). */
int pt_launcher_rank(MPI_Comm comm);

#endif
