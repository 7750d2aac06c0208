/* Process grid construction (see context.h). */
#include "parallel/context.h"
#include "core/core.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int pt_launcher_rank(MPI_Comm comm)
{
    int size, mine = -1;
    MPI_Comm_size(comm, &size);
    const char *r = getenv("RANK"), *w = getenv("WORLD_SIZE");
    long rv, wv;
    char save[512];
    snprintf(save, sizeof save, "%s", pt_errmsg()); /* parsing failures here are not errors */
    if (r && w && pt_parse_int("RANK", r, 0, size - 1, &rv) == PT_OK &&
        pt_parse_int("WORLD_SIZE", w, 1, 1 << 30, &wv) == PT_OK && wv == size)
        mine = (int)rv;
    pt_fail(PT_OK, "%s", save);
    int *all = malloc(sizeof(int) * (size_t)size);
    if (!all) return -1;
    MPI_Allgather(&mine, 1, MPI_INT, all, 1, MPI_INT, comm);
    char *seen = calloc((size_t)size, 1);
    int okay = seen != NULL;
    for (int i = 0; okay && i < size; i++) {
        if (all[i] < 0 || all[i] >= size || seen[all[i]]) okay = 0;
        else seen[all[i]] = 1;
    }
    free(seen);
    free(all);
    return okay ? mine : -1;
}

int pt_pctx_init(pt_pctx *c, MPI_Comm comm, const pt_plan *p, int grid_rank)
{
    memset(c, 0, sizeof *c);
    c->plan = *p;
    int size, mpirank;
    MPI_Comm_size(comm, &size);
    MPI_Comm_rank(comm, &mpirank);
    char err[256];
    if (pt_plan_validate(p, size, err, sizeof err) != 0) return pt_fail(PT_EINVAL, "%s", err);
    int g = grid_rank < 0 ? mpirank : grid_rank;
    /* every process must hold a distinct grid rank */
    int *all = malloc(sizeof(int) * (size_t)size);
    char *seen = calloc((size_t)size, 1);
    if (!all || !seen) { free(all); free(seen); return pt_fail(PT_ENOMEM, "out of memory"); }
    MPI_Allgather(&g, 1, MPI_INT, all, 1, MPI_INT, comm);
    int bad = -1;
    for (int i = 0; i < size && bad < 0; i++) {
        if (all[i] < 0 || all[i] >= size || seen[all[i]]) bad = all[i];
        else seen[all[i]] = 1;
    }
    free(all);
    free(seen);
    if (bad != -1) return pt_fail(PT_EINVAL, "grid ranks are not a permutation of 0..%d (rank %d repeated or out of range)", size - 1, bad);

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
