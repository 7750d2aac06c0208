/* SPDX-License-Identifier: MIT */
/* Inside lib/comm: the device path of a pt_comm (comm.h, "Device
 * buffers"), typed by element and reduction so that one implementation
 * serves every element type.  comm_mpi.c's float functions call these for
 * device buffers; the typed collectives (a count and a pt_dtype) call the
 * same functions with their type, whose values PT_COMM_F32 / PT_COMM_BF16
 * / PT_COMM_F64 are pt_dtype's.
 *
 * Counting: every function counts as comm_mpi.c does for the same call
 * (comm_priv.h), in bytes of the element type. */
#ifndef PTRAIN_COMM_DEV_H
#define PTRAIN_COMM_DEV_H
#include "comm/comm.h"
#include "comm/comm_priv.h"

#include <mpi.h>
#include <stddef.h>

/* Bytes of one element (0 for a value outside pt_comm_elem). */
size_t pt_comm_elem_size(int elem);
/* The MPI datatype and reduction of an element type: MPI_FLOAT,
 * MPI_DOUBLE; bf16 is MPI_UINT16_T with user operations (MPI_Op_create)
 * that add or compare in fp32 and round the result to nearest even
 * (pt_comm_bf16_sum / _max), as NCCL's bf16 reductions do per step.
 * MPI_DATATYPE_NULL / MPI_OP_NULL for an invalid value. */
MPI_Datatype pt_comm_mpi_type(int elem);
MPI_Op pt_comm_mpi_op(int elem, int op);
/* The bf16 user operations themselves (MPI_User_function): inout[i] =
 * bf16(f32(in[i]) + f32(inout[i])) / the larger; NaN propagates. */
void pt_comm_bf16_sum(void *in, void *inout, int *len, MPI_Datatype *type);
void pt_comm_bf16_max(void *in, void *inout, int *len, MPI_Datatype *type);

/* The collectives of comm.h on device buffers of n elements of elem:
 * same contracts (n % size for reduce_scatter and allgather, root, tags;
 * NCCL ignores tags: its sends and receives between two ranks match in
 * order).  PT_OK, PT_EINVAL, PT_ENOMEM (staging memory), PT_ECOMM, PT_EIO
 * (a device copy). */
int pt_comm_dev_allreduce(pt_comm *c, void *buf, size_t n, int elem, int op);
int pt_comm_dev_reduce_scatter(pt_comm *c, const void *in, void *out, size_t n, int elem);
int pt_comm_dev_allgather(pt_comm *c, const void *in, void *out, size_t n, int elem);
int pt_comm_dev_broadcast(pt_comm *c, void *buf, size_t n, int elem, int root);
int pt_comm_dev_reduce(pt_comm *c, void *buf, size_t n, int elem, int root);
int pt_comm_dev_send(pt_comm *c, const void *buf, size_t n, int elem, int dst, int tag);
int pt_comm_dev_recv(pt_comm *c, void *buf, size_t n, int elem, int src, int tag);
int pt_comm_dev_sendrecv(pt_comm *c, const void *sbuf, int dst, void *rbuf, int src, size_t n, int elem, int tag);

/* The path for a group of n members whose GPU UUIDs are uuid[0 .. n-1]
 * (16 bytes each): PT_COMM_DEV_NCCL when n > 1, have_nccl and no two
 * members share a UUID, else PT_COMM_DEV_STAGED; mode PT_COMM_DEV_STAGED
 * forces staging; mode PT_COMM_DEV_NCCL returns -1 with one line in why
 * (len bytes) when NCCL cannot serve the group (which members share a GPU,
 * or no NCCL).  Pure: every member computes the same from the same list. */
int pt_comm_dev_choose(const unsigned char *uuid, int n, int have_nccl, int mode, char *why, size_t len);

/* How the staged path reaches device memory: the CUDA backend's
 * pt_backend_dev (lib/backend/ops.h: its copies on the communication
 * stream, pinned staging memory), or for the tests on the CPU plain memcpy
 * over host buffers (pt_comm_device_enable_host) so the staging algorithm
 * runs without a GPU. */

/* For the tests: give c the staged path over HOST buffers (every buffer
 * counts as a device buffer, copies are memcpy).  Not collective. */
int pt_comm_device_enable_host(pt_comm *c);

/* comm_nccl.c (builds with NCCL): the group's NCCL communicator and the
 * collectives on the communication stream. *nccl receives an ncclComm_t.
 * Errors name the call, the group and NCCL's string (PT_ECOMM). */
int pt_nccl_init(pt_comm *c, void **nccl);
void pt_nccl_free(void *nccl);
int pt_nccl_allreduce(pt_comm *c, void *nccl, const void *in, void *out, size_t n, int elem, int op);
int pt_nccl_reduce_scatter(pt_comm *c, void *nccl, const void *in, void *out, size_t recv_n, int elem);
int pt_nccl_allgather(pt_comm *c, void *nccl, const void *in, void *out, size_t send_n, int elem);
int pt_nccl_broadcast(pt_comm *c, void *nccl, void *buf, size_t n, int elem, int root);
int pt_nccl_reduce(pt_comm *c, void *nccl, void *buf, size_t n, int elem, int root);
int pt_nccl_send(pt_comm *c, void *nccl, const void *buf, size_t n, int elem, int peer);
int pt_nccl_recv(pt_comm *c, void *nccl, void *buf, size_t n, int elem, int peer);
int pt_nccl_group(pt_comm *c, int start);
/* pt_fail(PT_ECOMM) for an ncclResult_t (as int) of a call on group c:
 * "WHAT on group 'NAME' (size P) failed: <ncclGetErrorString>[:
 * <ncclGetLastError(nccl)>]" (nccl NULL: no detail). */
int pt_nccl_fail(int result, void *nccl, const char *what, const pt_comm *c);

#endif
