/* SPDX-License-Identifier: MIT */
/* lib/comm's NCCL path (comm_dev.h's pt_nccl_*): one NCCL communicator
 * per pt_comm, bootstrapped over the group's MPI communicator (NCCL
 * documentation, "Example 2: One Device per Process or Thread": rank 0's
 * ncclGetUniqueId, MPI_Bcast, ncclCommInitRank), every collective on the
 * CUDA backend's communication stream.  Built only with NCCL (HAVE_NCCL). */
#include "config.h"
#include "comm/comm_dev.h"
#include "comm/comm_priv.h"
#include "backend/ops.h"
#include "core/core.h"

#include <limits.h>
#include <nccl.h>
#include <stdio.h>
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

int pt_nccl_init(pt_comm *c, void **out)
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

void pt_nccl_free(void *nccl)
{
    if (nccl) ncclCommDestroy((ncclComm_t)nccl);
}

int pt_nccl_allreduce(pt_comm *c, void *nccl, const void *in, void *out, size_t n, int elem, int op)
{
    ncclComm_t comm = nccl;
    NCCL_TRY(ncclAllReduce(in, out, n, nccl_type(elem), nccl_op(op), comm, stream()), "ncclAllReduce");
    return PT_OK;
}

int pt_nccl_reduce_scatter(pt_comm *c, void *nccl, const void *in, void *out, size_t recv_n, int elem)
{
    ncclComm_t comm = nccl;
    NCCL_TRY(ncclReduceScatter(in, out, recv_n, nccl_type(elem), ncclSum, comm, stream()),
             "ncclReduceScatter");
    return PT_OK;
}

int pt_nccl_allgather(pt_comm *c, void *nccl, const void *in, void *out, size_t send_n, int elem)
{
    ncclComm_t comm = nccl;
    NCCL_TRY(ncclAllGather(in, out, send_n, nccl_type(elem), comm, stream()), "ncclAllGather");
    return PT_OK;
}

int pt_nccl_broadcast(pt_comm *c, void *nccl, void *buf, size_t n, int elem, int root)
{
    ncclComm_t comm = nccl;
    NCCL_TRY(ncclBroadcast(buf, buf, n, nccl_type(elem), root, comm, stream()), "ncclBroadcast");
    return PT_OK;
}

int pt_nccl_reduce(pt_comm *c, void *nccl, void *buf, size_t n, int elem, int root)
{
    /* recvbuff matters at the root only: the others' buf stays as it was */
    ncclComm_t comm = nccl;
    NCCL_TRY(ncclReduce(buf, buf, n, nccl_type(elem), ncclSum, root, comm, stream()), "ncclReduce");
    return PT_OK;
}

int pt_nccl_send(pt_comm *c, void *nccl, const void *buf, size_t n, int elem, int peer)
{
    ncclComm_t comm = nccl;
    NCCL_TRY(ncclSend(buf, n, nccl_type(elem), peer, comm, stream()), "ncclSend");
    return PT_OK;
}

int pt_nccl_recv(pt_comm *c, void *nccl, void *buf, size_t n, int elem, int peer)
{
    ncclComm_t comm = nccl;
    NCCL_TRY(ncclRecv(buf, n, nccl_type(elem), peer, comm, stream()), "ncclRecv");
    return PT_OK;
}

int pt_nccl_group(pt_comm *c, int start)
{
    ncclComm_t comm = NULL;
    if (start) NCCL_TRY(ncclGroupStart(), "ncclGroupStart");
    else NCCL_TRY(ncclGroupEnd(), "ncclGroupEnd");
    return PT_OK;
}
