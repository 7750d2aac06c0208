/* SPDX-License-Identifier: MIT */
/* Inside lib/comm: the device side of a pt_comm (comm.h, "Device
 * buffers"; the transports of comm_priv.h), typed by element and
 * reduction so that one implementation serves every element type.
 *
 * Counting: every function counts as comm.h's calls do for the same call
 * (comm_priv.h), in bytes of the element type. */
#ifndef PTRAIN_COMM_DEV_H
#define PTRAIN_COMM_DEV_H
#include "comm/comm.h"
#include "comm/comm_priv.h"

#include <mpi.h>
#include <stddef.h>

/* The collectives of comm.h on group c's device transport (whatever the
 * buffers), n elements of elem: same contracts (n % size for
 * reduce_scatter and allgather, root, tags; NCCL ignores tags: its sends
 * and receives between two ranks match in order).  PT_OK, PT_EINVAL (also:
 * c has no device path), PT_ENOMEM (staging memory), PT_ECOMM, PT_EIO (a
 * device copy). */
int pt_comm_dev_allreduce(pt_comm *c, void *buf, size_t n, int elem, int op);
int pt_comm_dev_reduce_scatter(pt_comm *c, const void *in, void *out, size_t n, int elem);
int pt_comm_dev_allgather(pt_comm *c, const void *in, void *out, size_t n, int elem);
int pt_comm_dev_broadcast(pt_comm *c, void *buf, size_t n, int elem, int root);
int pt_comm_dev_reduce(pt_comm *c, void *buf, size_t n, int elem, int root);
int pt_comm_dev_send(pt_comm *c, const void *buf, size_t n, int elem, int dst, int tag);
int pt_comm_dev_recv(pt_comm *c, void *buf, size_t n, int elem, int src, int tag);
int pt_comm_dev_sendrecv(pt_comm *c, const void *sbuf, int dst, void *rbuf, int src, size_t n, int elem, int tag);

/* The same with the transport given: comm.h's calls and the ones above
 * are these with pt_comm_transport(c, buf) / the device transport
 * (comm_mpi.c).  They check the arguments, skip what moves nothing and
 * count. */
int pt_comm_run_allreduce(pt_comm *c, const pt_transport *t, void *buf, size_t n, int elem, int op);
int pt_comm_run_reduce_scatter(pt_comm *c, const pt_transport *t, const void *in, void *out, size_t n, int elem);
int pt_comm_run_allgather(pt_comm *c, const pt_transport *t, const void *in, void *out, size_t n, int elem);
int pt_comm_run_broadcast(pt_comm *c, const pt_transport *t, void *buf, size_t n, int elem, int root);
int pt_comm_run_reduce(pt_comm *c, const pt_transport *t, void *buf, size_t n, int elem, int root);
int pt_comm_run_send(pt_comm *c, const pt_transport *t, const void *buf, size_t n, int elem, int dst, int tag);
int pt_comm_run_recv(pt_comm *c, const pt_transport *t, void *buf, size_t n, int elem, int src, int tag);
int pt_comm_run_sendrecv(pt_comm *c, const pt_transport *t, const void *sbuf, int dst, void *rbuf, int src, size_t n,
                         int elem, int tag);

/* ---- the choice (pure: every member computes the same from the same input) ---- */

/* The device path for a group of n members whose GPU UUIDs are uuid[0 ..
 * n-1] (16 bytes each): PT_COMM_DEV_NCCL when n > 1, have_nccl and no two
 * members share a UUID, else PT_COMM_DEV_STAGED; mode PT_COMM_DEV_STAGED
 * forces staging; mode PT_COMM_DEV_NCCL returns -1 with one line in why
 * (len bytes) when NCCL cannot serve the group (which members share a GPU,
 * or no NCCL). */
int pt_comm_dev_choose(const unsigned char *uuid, int n, int have_nccl, int mode, char *why, size_t len);
/* The transport (enum pt_comm_tp) of a group whose device path is `path`
 * (0: none enabled, PT_COMM_DEV_NCCL, PT_COMM_DEV_STAGED) for a buffer in
 * device memory (device 1) or host memory (device 0): host memory always
 * goes over mpi_host; device memory over nccl or mpi_staged by the path.
 * -1 for device memory on a group without a device path, or a bad path. */
int pt_comm_transport_for(int path, int device);

/* ---- enabling without a GPU (tests) ---- */

/* For the tests: give c the staged path over HOST buffers (every non-NULL
 * buffer counts as a device buffer, copies are memmove).  Not collective. */
int pt_comm_device_enable_host(pt_comm *c);
/* For the tests: give c the staged path with mover mv (its is_device_ptr,
 * to_host, to_device, copy, host_alloc and host_free are used; the stream
 * and identity hooks are not), so a fake device memory can check what the
 * chunk loop copies.  mv must outlive the path.  Not collective.  PT_OK
 * (also when already enabled), PT_ENOMEM. */
int pt_comm_device_enable_mover(pt_comm *c, const struct pt_backend_dev *mv);

/* ---- comm_nccl.c (builds with NCCL) ---- */

/* The NCCL communicator of group c into *nccl (an ncclComm_t): rank 0's
 * ncclGetUniqueId, MPI_Bcast, ncclCommInitRank.  Collective
 * over c; every member returns the same status.  Errors name the call, the
 * group and NCCL's string (PT_ECOMM). */
int pt_nccl_init(pt_comm *c, void **nccl);
/* Destroy the communicator. */
void pt_nccl_release(void *nccl);
/* pt_fail(PT_ECOMM) for an ncclResult_t (as int) of a call on group c:
 * "WHAT on group 'NAME' (size P) failed: <ncclGetErrorString>[:
 * <ncclGetLastError(nccl)>]" (nccl NULL: no detail). */
int pt_nccl_fail(int result, void *nccl, const char *what, const pt_comm *c);

#endif
