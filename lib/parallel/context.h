/* The parallel context: the dp x pp x tp process grid of a job and the
 * communicators of its groups (DESIGN.md, "Process grid and placement").
 *
 * Ranks are placed in the grid by the plan's rank_order letters (a
 * permutation of D, P, T; the right-most varies fastest, as SageMaker's
 * placement_strategy: "DPT" keeps tensor groups on neighbouring ranks,
 * i.e. inside a node).  The grid rank of a process comes from the launcher
 * (the SPANK plugin's RANK) when it is a consistent permutation, else from
 * MPI; the world communicator is re-ordered by it with MPI_Comm_split.
 */
#ifndef PTRAIN_CONTEXT_H
#define PTRAIN_CONTEXT_H
#include "comm/comm.h"
#include "plan/plan.h"

typedef struct pt_pctx {
    pt_plan plan;
    int rank, world_size;               /* grid rank, dp*pp*tp */
    int dp_rank, pp_rank, tp_rank;
    pt_comm world;                      /* all ranks, ordered by grid rank */
    pt_comm dp;                         /* ranks with my (pp, tp) coordinates */
    pt_comm tp;                         /* ranks with my (dp, pp) coordinates */
} pt_pctx;

/* Build the grid over `comm` for plan p.  grid_rank is this process's rank
 * in the grid (0..world-1, a permutation across processes) or -1 to use the
 * MPI rank.  Collective over comm.
 * Errors: PT_EINVAL when the plan does not fit the communicator's size or
 * the grid ranks are not a permutation (message names the sizes), PT_ECOMM. */
int pt_pctx_init(pt_pctx *c, MPI_Comm comm, const pt_plan *p, int grid_rank);
void pt_pctx_free(pt_pctx *c);

/* The grid rank the launcher assigned, if it is consistent: reads RANK and
 * WORLD_SIZE and checks (collectively) that every process got a distinct
 * rank in 0..size-1 and WORLD_SIZE == size.  Returns that rank, or -1 when
 * the variables are absent or inconsistent (e.g. mpirun inside sbatch,
 * where they belong to Open MPI's per-node daemon). */
int pt_launcher_rank(MPI_Comm comm);

#endif
