/* Process grid construction (see context.h). */
#include "parallel/context.h"
#include "core/core.h"

#include <stdlib.h>
#include <string.h>

/* Collective over comm: do the values `mine` of all processes form a
 * permutation of 0..size-1?  Returns 1 (yes), 0 (no: *bad gets the first
 * value that is repeated or out of range) or PT_ENOMEM.  Every process
 * returns the same answer, also when an allocation fails on some of them
 * (they agree before the allgather, so none is left waiting in it). */
static int is_permutation(MPI_Comm comm, int mine, int *bad)
{
    int size;
    MPI_Comm_size(comm, &size);
    int *all = malloc(sizeof(int) * (size_t)size);
    char *seen = calloc((size_t)size, 1);
    int have = all && seen, everyone = 0;
    MPI_Allreduce(&have, &everyone, 1, MPI_INT, MPI_MIN, comm);
    if (!everyone) {
        free(all);
        free(seen);
        return pt_fail(PT_ENOMEM, "out of memory checking the grid ranks of %d processes", size);
    }
    MPI_Allgather(&mine, 1, MPI_INT, all, 1, MPI_INT, comm);
    int ok = 1;
    for (int i = 0; ok && i < size; i++) {
        if (all[i] < 0 || all[i] >= size || seen[all[i]]) {
            ok = 0;
            *bad = all[i];
        } else {
            seen[all[i]] = 1;
        }
    }
    free(all);
    free(seen);
    return ok;
}

int pt_launcher_rank(MPI_Comm comm)
{
    int size, mine = -1, bad;
    MPI_Comm_size(comm, &size);
    const char *r = getenv("RANK"), *w = getenv("WORLD_SIZE");
    long rv, wv;
    if (r && w && pt_parse_int("RANK", r, 0, size - 1, &rv) == PT_OK &&
        pt_parse_int("WORLD_SIZE", w, 1, 1 << 30, &wv) == PT_OK && wv == size)
        mine = (int)rv;
    return is_permutation(comm, mine, &bad) == 1 ? mine : -1;
}

int pt_pctx_init(pt_pctx *c, MPI_Comm comm, const pt_plan *p, int grid_rank)
{
    memset(c, 0, sizeof *c);
    c->plan = *p;
    int size, mpirank, bad = -1;
    MPI_Comm_size(comm, &size);
    MPI_Comm_rank(comm, &mpirank);
    char err[256];
    if (pt_plan_validate(p, size, err, sizeof err) != 0) return pt_fail(PT_EINVAL, "%s", err);
    int g = grid_rank < 0 ? mpirank : grid_rank;
    int perm = is_permutation(comm, g, &bad);
    if (perm < 0) return perm;
    if (!perm) return pt_fail(PT_EINVAL, "grid ranks are not a permutation of 0..%d (rank %d repeated or out of range)", size - 1, bad);

    pt_comm parent;
    pt_comm_wrap(&parent, comm, "parent");
    int rc = pt_comm_split(&c->world, &parent, 0, g, "world");
    if (rc) return rc;
    c->rank = g;
    c->world_size = size;
    if (pt_plan_coords(p, g, &c->dp_rank, &c->pp_rank, &c->tp_rank) != 0)
        return pt_fail(PT_EINVAL, "rank %d is outside the %dx%dx%d grid", g, p->dp, p->pp, p->tp);
    /* dp group: same (pp, tp); tp group: same (dp, pp) */
    rc = pt_comm_split(&c->dp, &c->world, c->pp_rank * p->tp + c->tp_rank, c->dp_rank, "dp");
    if (rc) return rc;
    rc = pt_comm_split(&c->tp, &c->world, c->dp_rank * p->pp + c->pp_rank, c->tp_rank, "tp");
    return rc;
}

void pt_pctx_free(pt_pctx *c)
{
    pt_comm_free(&c->tp);
    pt_comm_free(&c->dp);
    pt_comm_free(&c->world);
}
