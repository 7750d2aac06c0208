/* SPDX-License-Identifier: MIT */
/* Groups of the same members share one communicator (comm_dev.h's
 * pt_comm_share): a cache keyed by the member list (world ranks in the
 * group's rank order), reference-counted, the object destroyed with its
 * last group.  The cache itself is pure (no MPI, no device): the NCCL
 * transport keeps one (comm_nccl.c), the tests their own with fake
 * handles.  pt_comm_share_agree makes the hit collective: a group shares
 * an object only when every member holds the same one, so members whose
 * caches differ (one freed its last group of those members, another did
 * not) create a new one together instead of waiting on each other. */
#include "comm/comm_dev.h"
#include "comm/comm_priv.h"
#include "core/core.h"

#include <stdlib.h>
#include <string.h>

static int same_members(const pt_comm_share_entry *e, const int *members, int n)
{
    return e->n == n && memcmp(e->members, members, sizeof *members * (size_t)n) == 0;
}

pt_comm_share_entry *pt_comm_share_find(const pt_comm_share *s, const int *members, int n, uint64_t tag)
{
    for (pt_comm_share_entry *e = s->head; e; e = e->next)
        if (same_members(e, members, n) && (tag == 0 || e->tag == tag)) return e;
    return NULL;
}

int pt_comm_share_add(pt_comm_share *s, const int *members, int n, uint64_t tag, void *handle)
{
    if (n < 1 || tag == 0)
        return pt_fail(PT_EINVAL, "shared communicator of %d members with tag %llu: needs a member and a tag", n,
                       (unsigned long long)tag);
    pt_comm_share_entry *e = calloc(1, sizeof *e);
    int *m = malloc(sizeof *m * (size_t)n);
    if (!e || !m) {
        free(e);
        free(m);
        return pt_fail(PT_ENOMEM, "out of memory for the cache entry of a group of %d members", n);
    }
    memcpy(m, members, sizeof *m * (size_t)n);
    *e = (pt_comm_share_entry){m, n, tag, handle, 1, s->head};
    s->head = e;
    return PT_OK;
}

int pt_comm_share_release(pt_comm_share *s, void *handle)
{
    for (pt_comm_share_entry **pe = &s->head; *pe; pe = &(*pe)->next) {
        pt_comm_share_entry *e = *pe;
        if (e->handle != handle) continue;
        if (--e->refs > 0) return e->refs;
        *pe = e->next;
        if (s->destroy) s->destroy(e->handle);
        free(e->members);
        free(e);
        return 0;
    }
    return -1;
}

size_t pt_comm_share_size(const pt_comm_share *s)
{
    size_t n = 0;
    for (const pt_comm_share_entry *e = s->head; e; e = e->next) n++;
    return n;
}

uint64_t pt_comm_share_tag(int world_rank, uint32_t seq)
{
    return ((uint64_t)(uint32_t)world_rank + 1) << 32 | seq;
}

int pt_comm_world_ranks(const pt_comm *c, int *members)
{
    MPI_Group g, w;
    int rc = MPI_Comm_group(c->comm, &g);
    if (rc != MPI_SUCCESS) return pt_comm_mpi_fail(rc, "MPI_Comm_group", c);
    rc = MPI_Comm_group(MPI_COMM_WORLD, &w);
    if (rc != MPI_SUCCESS) {
        MPI_Group_free(&g);
        return pt_comm_mpi_fail(rc, "MPI_Comm_group(MPI_COMM_WORLD)", c);
    }
    int stack[64], *ranks = stack;
    if (c->size > 64 && !(ranks = malloc(sizeof *ranks * (size_t)c->size))) {
        MPI_Group_free(&g);
        MPI_Group_free(&w);
        return pt_fail(PT_ENOMEM, "group '%s': out of memory for the ranks of %d members", c->name, c->size);
    }
    for (int i = 0; i < c->size; i++) ranks[i] = i;
    rc = MPI_Group_translate_ranks(g, c->size, ranks, w, members);
    if (ranks != stack) free(ranks);
    MPI_Group_free(&g);
    MPI_Group_free(&w);
    if (rc != MPI_SUCCESS) return pt_comm_mpi_fail(rc, "MPI_Group_translate_ranks", c);
    for (int i = 0; i < c->size; i++)
        if (members[i] == MPI_UNDEFINED)
            return pt_fail(PT_ECOMM, "group '%s': member %d is outside MPI_COMM_WORLD", c->name, i);
    return PT_OK;
}

int pt_comm_share_agree(pt_comm_share *s, const pt_comm *c, const int *members, pt_comm_share_entry **hit,
                        uint64_t *tag)
{
    /* member 0 names the object it would share (its newest of the list)
     * and a fresh tag in case not all hold it; every member says whether it
     * holds that object */
    static uint32_t seq;
    *hit = NULL;
    *tag = 0;
    uint64_t v[2] = {0, 0};
    if (c->rank == 0) {
        const pt_comm_share_entry *e = pt_comm_share_find(s, members, c->size, 0);
        v[0] = e ? e->tag : 0;
        v[1] = pt_comm_share_tag(members[0], ++seq);
    }
    int rc = MPI_Bcast(v, 2, MPI_UINT64_T, 0, c->comm);
    if (rc != MPI_SUCCESS) return pt_comm_mpi_fail(rc, "MPI_Bcast(shared communicator)", c);
    pt_comm_share_entry *e = v[0] ? pt_comm_share_find(s, members, c->size, v[0]) : NULL;
    int mine = e != NULL, all = 0;
    rc = MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, c->comm);
    if (rc != MPI_SUCCESS) return pt_comm_mpi_fail(rc, "MPI_Allreduce(shared communicator)", c);
    if (all) {
        e->refs++;
        *hit = e;
    } else {
        *tag = v[1];
    }
    return PT_OK;
}
