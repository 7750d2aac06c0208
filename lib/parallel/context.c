/* SPDX-License-Identifier: MIT */
/* Process grid construction (see context.h). */
#include "parallel/context.h"
#include "core/core.h"

#include <stdio.h>
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
    if (pt_plan_validate(p, size) != 0) return PT_EINVAL;
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
    if (pt_plan_coords(p, g, &c->dp_rank, &c->pp_rank, &c->tp_rank, &c->sp_rank) != 0)
        return pt_fail(PT_EINVAL, "rank %d is outside the %dx%dx%dx%d grid", g, p->dp, p->pp, p->tp, p->sp);
    if (pt_plan_tp_dims(p, c->tp_dims) != 0) return PT_EINVAL;
    c->tp_coord[0] = c->tp_rank / (c->tp_dims[1] * c->tp_dims[2]);
    c->tp_coord[1] = c->tp_rank / c->tp_dims[2] % c->tp_dims[1];
    c->tp_coord[2] = c->tp_rank % c->tp_dims[2];
    const int pp = p->pp, tp = p->tp, sp = p->sp;
    /* dp: same (pp, tp, sp); tp: same (dp, pp, sp); sp: same (dp, pp, tp) */
    rc = pt_comm_split(&c->dp, &c->world, (c->pp_rank * tp + c->tp_rank) * sp + c->sp_rank, c->dp_rank, "dp");
    if (!rc) rc = pt_comm_split(&c->tp, &c->world, (c->dp_rank * pp + c->pp_rank) * sp + c->sp_rank, c->tp_rank, "tp");
    if (!rc) rc = pt_comm_split(&c->sp, &c->world, (c->dp_rank * pp + c->pp_rank) * tp + c->tp_rank, c->sp_rank, "sp");
    const int pp_color = (c->dp_rank * tp + c->tp_rank) * sp + c->sp_rank;
    if (!rc) rc = pt_comm_split(&c->pp, &c->world, pp_color, c->pp_rank, "pp");
    /* embed: the two ends of my pp group; a middle stage is alone (its own
     * color above every pp_color) */
    const int end = c->pp_rank == 0 || c->pp_rank == pp - 1;
    if (!rc) rc = pt_comm_split(&c->embed, &c->world, end ? pp_color : size + g, c->pp_rank, "embed");
    for (int mask = 0; !rc && mask < (1 << PT_TP_AXES); mask++) {
        /* fixed: the coordinates outside the mask; inside: their mixed-radix index */
        int fixed = 0, inside = 0;
        for (int a = 0; a < PT_TP_AXES; a++) {
            if (mask & (1 << a)) inside = inside * c->tp_dims[a] + c->tp_coord[a];
            else fixed = fixed * c->tp_dims[a] + c->tp_coord[a];
        }
        char name[16];
        snprintf(name, sizeof name, "tp%c%c%c", mask & 1 ? 'x' : '-', mask & 2 ? 'x' : '-', mask & 4 ? 'x' : '-');
        rc = pt_comm_split(&c->tp_sub[mask], &c->world, ((c->dp_rank * pp + c->pp_rank) * sp + c->sp_rank) * tp + fixed,
                           inside, name);
        if (rc) break;
        snprintf(name, sizeof name, "sync%c%c%c", mask & 1 ? 'x' : '-', mask & 2 ? 'x' : '-', mask & 4 ? 'x' : '-');
        rc = pt_comm_split(&c->sync[mask], &c->world, c->pp_rank * tp + fixed,
                           (c->dp_rank * sp + c->sp_rank) * tp + inside, name);
    }
    return rc;
}

void pt_pctx_free(pt_pctx *c)
{
    for (int m = 0; m < (1 << PT_TP_AXES); m++) {
        pt_comm_free(&c->sync[m]);
        pt_comm_free(&c->tp_sub[m]);
    }
    pt_comm_free(&c->embed);
    pt_comm_free(&c->pp);
    pt_comm_free(&c->sp);
    pt_comm_free(&c->tp);
    pt_comm_free(&c->dp);
    pt_comm_free(&c->world);
}

#define ALL_GROUPS(c, X)                                                \
    do {                                                                \
        X(&(c)->world); X(&(c)->dp); X(&(c)->tp); X(&(c)->sp);          \
        X(&(c)->pp); X(&(c)->embed);                                    \
        for (int m_ = 0; m_ < (1 << PT_TP_AXES); m_++) {                \
            X(&(c)->tp_sub[m_]); X(&(c)->sync[m_]);                     \
        }                                                               \
    } while (0)

uint64_t pt_pctx_sent_total(const pt_pctx *c)
{
    uint64_t s = 0;
#define ADD(g) (s += pt_comm_sent_total(g))
    ALL_GROUPS(c, ADD);
#undef ADD
    return s;
}

void pt_pctx_reset_stats(pt_pctx *c) { ALL_GROUPS(c, pt_comm_reset_stats); }

int pt_pctx_device_enable(pt_pctx *c, int mode)
{
    /* every rank walks every group in the same order, also after a
     * failure (each set-up is collective over its group and agrees on its
     * status there; a rank that stopped early would leave the members of
     * its next group waiting), and keeps the first error */
    int rc = PT_OK;
    char first[PT_ERROR_LEN] = "";
#define ENABLE(g)                                                            \
    do {                                                                     \
        int r_ = pt_comm_device_enable(g, mode);                             \
        if (r_ != PT_OK && rc == PT_OK) {                                    \
            rc = r_;                                                         \
            snprintf(first, sizeof first, "%s", pt_errmsg());                \
        }                                                                    \
    } while (0)
    ALL_GROUPS(c, ENABLE);
#undef ENABLE
    return rc == PT_OK ? PT_OK : pt_fail(rc, "%s", first);
}
