/* SPDX-License-Identifier: MIT */
/* The nccl transport (comm_priv.h) and its communicators (comm_dev.h's
 * pt_nccl_*): one NCCL communicator per distinct member list, shared by
 * the groups of those members, bootstrapped over the first such group's
 * MPI communicator (NCCL documentation, "Example 2: One Device per Process
 * or Thread": rank 0's ncclGetUniqueId, MPI_Bcast, ncclCommInitRank),
 * every collective on the CUDA backend's communication stream.  Built
 * only with NCCL (HAVE_NCCL). */
#include "config.h"
#include "comm/comm_dev.h"
#include "comm/comm_priv.h"
#include "backend/ops.h"
#include "core/core.h"

#include <limits.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int pt_nccl_fail(int result, void *nccl, const char *what, const pt_comm *c)
{
    ncclResult_t r = (ncclResult_t)result;
    ncclComm_t comm = nccl;
    const char *detail = comm ? ncclGetLastError(comm) : NULL;
    return pt_fail(PT_ECOMM, "%s on group '%s' (size %d) failed: %s%s%s", what, c->name, c->size, ncclGetErrorString(r),
                   detail && *detail ? ": " : "", detail && *detail ? detail : "");
}

/* the CUDA backend's communication stream (ops.h's pt_backend_dev) */
static cudaStream_t stream(void) { return (cudaStream_t)pt_cuda_backend.dev->comm_stream(); }

static ncclDataType_t nccl_type(int elem)
{
    return elem == PT_COMM_BF16 ? ncclBfloat16 : elem == PT_COMM_F64 ? ncclFloat64 : ncclFloat32;
}

static ncclRedOp_t nccl_op(int op) { return op == PT_COMM_MAX ? ncclMax : ncclSum; }

#define NCCL_TRY(call, what)                                              \
    do {                                                                  \
        ncclResult_t r_ = (call);                                         \
        if (r_ != ncclSuccess) return pt_nccl_fail(r_, comm, what, c);       \
    } while (0)

/* the process's NCCL communicators, one per member list in use
 * (comm_dev.h's pt_comm_share): a run's 22 groups of a context
 * (lib/parallel) often repeat members (tp and the full tp sub-group, dp
 * and a sync group, every group of one), and each communicator holds
 * device memory and its proxy threads */
static void nccl_destroy(void *h)
{
    if (h) ncclCommDestroy((ncclComm_t)h);
}
static pt_comm_share cache = {NULL, nccl_destroy};

size_t pt_nccl_count(void) { return pt_comm_share_size(&cache); }

void pt_nccl_release(void *nccl)
{
    if (nccl) pt_comm_share_release(&cache, nccl);
}

/* A new communicator over c: rank 0's unique id, broadcast over MPI with
 * the tag the members agreed on, ncclCommInitRank; every member learns
 * whether all got theirs. */
static int nccl_create(pt_comm *c, ncclComm_t *out)
{
    *out = NULL;
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    ncclResult_t r = c->rank == 0 ? ncclGetUniqueId(&id) : ncclSuccess;
    int ok = r == ncclSuccess;
    int mrc = MPI_Bcast(&ok, 1, MPI_INT, 0, c->comm);
    if (mrc == MPI_SUCCESS && ok) mrc = MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, c->comm);
    if (mrc != MPI_SUCCESS) return pt_comm_mpi_fail(mrc, "MPI_Bcast(NCCL unique id)", c);
    if (!ok)
        return r != ncclSuccess ? pt_nccl_fail(r, NULL, "ncclGetUniqueId", c)
                                : pt_fail(PT_ECOMM, "ncclGetUniqueId on rank 0 of group '%s' failed", c->name);
    ncclComm_t comm = NULL;
    r = ncclCommInitRank(&comm, c->size, id, c->rank);
    char why[PT_ERROR_LEN] = "";
    if (r != ncclSuccess) {
        pt_nccl_fail(r, NULL, "ncclCommInitRank", c);
        snprintf(why, sizeof why, "%s", pt_errmsg());
    }
    /* every member learns whether all got their communicator */
    int bad = r != ncclSuccess ? c->rank : INT_MAX, first = INT_MAX;
    mrc = MPI_Allreduce(&bad, &first, 1, MPI_INT, MPI_MIN, c->comm);
    if (mrc == MPI_SUCCESS && first != INT_MAX) mrc = MPI_Bcast(why, (int)sizeof why, MPI_CHAR, first, c->comm);
    if (mrc != MPI_SUCCESS || first != INT_MAX) {
        if (comm) ncclCommDestroy(comm);
        return mrc != MPI_SUCCESS ? pt_comm_mpi_fail(mrc, "MPI_Allreduce(NCCL set-up)", c)
                                  : pt_fail(PT_ECOMM, "NCCL set-up of group '%s': rank %d: %s", c->name, first, why);
    }
    *out = comm;
    return PT_OK;
}

int pt_nccl_init(pt_comm *c, void **out)
{
    *out = NULL;
    int *members = malloc(sizeof *members * (size_t)c->size);
    int have = members != NULL, all = 0;
    int mrc = MPI_Allreduce(&have, &all, 1, MPI_INT, MPI_MIN, c->comm);
    if (mrc != MPI_SUCCESS || !all) {
        free(members);
        return mrc != MPI_SUCCESS ? pt_comm_mpi_fail(mrc, "MPI_Allreduce(NCCL set-up)", c)
                                  : pt_fail(PT_ENOMEM, "group '%s': out of memory for the list of %d members", c->name,
                                            c->size);
    }
    pt_comm_share_entry *hit = NULL;
    uint64_t tag = 0;
    int rc = pt_comm_world_ranks(c, members);
    if (rc == PT_OK) rc = pt_comm_share_agree(&cache, c, members, &hit, &tag);
    if (rc == PT_OK && hit) {
        *out = hit->handle; /* a group of the same members already has one */
    } else if (rc == PT_OK) {
        ncclComm_t comm = NULL;
        rc = nccl_create(c, &comm); /* agreed: every member returns the same */
        if (rc == PT_OK && pt_comm_share_add(&cache, members, c->size, tag, comm) != PT_OK) {
            /* not agreed: a member without it would wait in the next call */
            ncclCommDestroy(comm);
            rc = PT_ENOMEM;
        }
        if (rc == PT_OK) *out = comm;
    }
    free(members);
    return rc;
}

/* ---- the nccl transport ------------------------------------------------------------------------ */

#define DEV (pt_cuda_backend.dev)

/* the communication stream after the compute stream's queued work (a
 * group orders itself at its end) ... */
static int before(pt_comm *c) { return c->dev->in_group ? PT_OK : DEV->comm_after_compute(); }
/* ... and the compute stream after the call, unless it overlaps */
static int after(pt_comm *c, int rc)
{
    if (rc != PT_OK || c->dev->in_group || c->dev->overlap) return rc;
    return DEV->compute_after_comm();
}

/* one NCCL call `call` (an ncclResult_t expression using comm) between before and after */
#define NCCL_CALL(call, what)                                                      \
    do {                                                                           \
        ncclComm_t comm = c->dev->nccl;                                            \
        int rc_ = before(c);                                                       \
        if (rc_ == PT_OK) {                                                        \
            ncclResult_t r_ = (call);                                              \
            if (r_ != ncclSuccess) rc_ = pt_nccl_fail(r_, comm, what, c);          \
        }                                                                          \
        return after(c, rc_);                                                      \
    } while (0)

static int nc_allreduce(pt_comm *c, void *buf, size_t n, int elem, int op)
{
    NCCL_CALL(ncclAllReduce(buf, buf, n, nccl_type(elem), nccl_op(op), comm, stream()), "ncclAllReduce");
}

static int nc_reduce_scatter(pt_comm *c, const void *in, void *out, size_t n, int elem)
{
    if (c->size == 1) return c->dev->mv->copy(out, in, n * pt_comm_elem_size(elem));
    NCCL_CALL(ncclReduceScatter(in, out, n / (size_t)c->size, nccl_type(elem), ncclSum, comm, stream()),
              "ncclReduceScatter");
}

static int nc_allgather(pt_comm *c, const void *in, void *out, size_t n, int elem)
{
    if (c->size == 1) return c->dev->mv->copy(out, in, n * pt_comm_elem_size(elem));
    NCCL_CALL(ncclAllGather(in, out, n / (size_t)c->size, nccl_type(elem), comm, stream()), "ncclAllGather");
}

static int nc_bcast(pt_comm *c, void *buf, size_t n, int elem, int root)
{
    NCCL_CALL(ncclBroadcast(buf, buf, n, nccl_type(elem), root, comm, stream()), "ncclBroadcast");
}

static int nc_reduce(pt_comm *c, void *buf, size_t n, int elem, int root)
{
    /* recvbuff matters at the root only: the others' buf stays as it was */
    NCCL_CALL(ncclReduce(buf, buf, n, nccl_type(elem), ncclSum, root, comm, stream()), "ncclReduce");
}

static int nc_send(pt_comm *c, const void *buf, size_t n, int elem, int dst, int tag)
{
    (void)tag; /* NCCL's sends and receives between two ranks match in order */
    NCCL_CALL(ncclSend(buf, n, nccl_type(elem), dst, comm, stream()), "ncclSend");
}

static int nc_recv(pt_comm *c, void *buf, size_t n, int elem, int src, int tag)
{
    (void)tag;
    NCCL_CALL(ncclRecv(buf, n, nccl_type(elem), src, comm, stream()), "ncclRecv");
}

static int nc_sendrecv(pt_comm *c, const void *sbuf, int dst, void *rbuf, int src, size_t n, int elem, int tag)
{
    (void)tag;
    /* a send and a receive in one NCCL group: neither waits for the other */
    ncclComm_t comm = c->dev->nccl;
    int rc = before(c);
    ncclResult_t r = ncclSuccess;
    const char *what = "ncclGroupStart";
    if (rc == PT_OK && (r = ncclGroupStart()) == ncclSuccess) {
        what = "ncclSend";
        r = ncclSend(sbuf, n, nccl_type(elem), dst, comm, stream());
        if (r == ncclSuccess) {
            what = "ncclRecv";
            r = ncclRecv(rbuf, n, nccl_type(elem), src, comm, stream());
        }
        ncclResult_t e = ncclGroupEnd();
        if (r == ncclSuccess && e != ncclSuccess) r = e, what = "ncclGroupEnd";
    }
    if (rc == PT_OK && r != ncclSuccess) rc = pt_nccl_fail(r, comm, what, c);
    return after(c, rc);
}

static int nc_group(pt_comm *c, int start)
{
    ncclComm_t comm = NULL;
    if (start) {
        NCCL_TRY(ncclGroupStart(), "ncclGroupStart");
        return PT_OK;
    }
    /* the queued NCCL calls are enqueued now: order them after the
     * compute stream's work first (in_group is already 0 here) */
    int rc = DEV->comm_after_compute();
    ncclResult_t r = ncclGroupEnd();
    if (r != ncclSuccess && rc == PT_OK) rc = pt_nccl_fail(r, comm, "ncclGroupEnd", c);
    return after(c, rc);
}

static int nc_wait(pt_comm *c)
{
    (void)c;
    return DEV->compute_after_comm();
}

const pt_transport pt_transport_nccl = {
    .name = "nccl",
    .allreduce = nc_allreduce,
    .reduce_scatter = nc_reduce_scatter,
    .allgather = nc_allgather,
    .bcast = nc_bcast,
    .reduce = nc_reduce,
    .send = nc_send,
    .recv = nc_recv,
    .sendrecv = nc_sendrecv,
    .group = nc_group,
    .wait = nc_wait,
};
