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
#include <stdint.h>

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

/* ---- groups of the same members share a communicator (comm_share.c) ---- */

/* One shared object (an NCCL communicator) of a member list: the world
 * ranks of a group in the group's rank order.  tag tells apart two
 * objects of one list (created at different times, never 0); the members
 * agreed on it at creation. */
typedef struct pt_comm_share_entry {
    int *members;
    int n;
    uint64_t tag;
    void *handle;
    int refs; /* groups using it */
    struct pt_comm_share_entry *next;
} pt_comm_share_entry;

/* A process's cache of shared objects, newest first; destroy releases one
 * handle (NULL: nothing to release).  Zero-initialised is empty.  One
 * thread: the one that drives the collectives. */
typedef struct pt_comm_share {
    pt_comm_share_entry *head;
    void (*destroy)(void *handle);
} pt_comm_share;

/* Pure.  The newest entry of members[0 .. n-1] (same ranks, same order)
 * whose tag is `tag` (0: any tag), or NULL. */
pt_comm_share_entry *pt_comm_share_find(const pt_comm_share *s, const int *members, int n, uint64_t tag);
/* Pure.  A new entry for (members, tag, handle) with one reference, at the
 * head (the list is copied).  PT_OK, PT_ENOMEM, PT_EINVAL (tag 0 or n < 1). */
int pt_comm_share_add(pt_comm_share *s, const int *members, int n, uint64_t tag, void *handle);
/* Pure.  Drop one reference of the entry holding handle; at the last, the
 * entry leaves the cache and s->destroy(handle) runs.  The references
 * left (0: destroyed), or -1 when handle is not in s. */
int pt_comm_share_release(pt_comm_share *s, void *handle);
/* Pure.  Entries in s. */
size_t pt_comm_share_size(const pt_comm_share *s);
/* Pure.  A tag unique in the job: made by the member at group rank 0,
 * whose world rank is world_rank, from its own sequence number seq (> 0). */
uint64_t pt_comm_share_tag(int world_rank, uint32_t seq);

/* The world ranks (MPI_COMM_WORLD) of c's members in c's rank order into
 * members[0 .. c->size-1].  PT_OK, PT_ECOMM. */
int pt_comm_world_ranks(const pt_comm *c, int *members);
/* Collective over c: whether every member holds the same entry of c's
 * member list (the one whose tag member 0 holds newest).  Then *hit is this
 * member's entry with one more reference.  Otherwise *hit is NULL and *tag
 * a fresh tag from member 0 (every member the same) for the object the
 * caller creates and adds.  members as pt_comm_world_ranks wrote them.
 * PT_OK, PT_ECOMM. */
int pt_comm_share_agree(pt_comm_share *s, const pt_comm *c, const int *members, pt_comm_share_entry **hit,
                        uint64_t *tag);

/* ---- comm_nccl.c (builds with NCCL) ---- */

/* The NCCL communicator of group c into *nccl (an ncclComm_t): the one a
 * group of the same members already has (pt_comm_share_agree), else a new
 * one (rank 0's ncclGetUniqueId, MPI_Bcast, ncclCommInitRank).  Collective
 * over c; every member returns the same status.  Errors name the call, the
 * group and NCCL's string (PT_ECOMM). */
int pt_nccl_init(pt_comm *c, void **nccl);
/* Drop c's reference to the communicator; the last group's destroys it. */
void pt_nccl_release(void *nccl);
/* Communicators this process holds (for checks: one per distinct member list). */
size_t pt_nccl_count(void);
/* pt_fail(PT_ECOMM) for an ncclResult_t (as int) of a call on group c:
 * "WHAT on group 'NAME' (size P) failed: <ncclGetErrorString>[:
 * <ncclGetLastError(nccl)>]" (nccl NULL: no detail). */
int pt_nccl_fail(int result, void *nccl, const char *what, const pt_comm *c);

#endif
