/* SPDX-License-Identifier: MIT */
/* Inside lib/comm: the byte counters' model (comm.h's table), shared by the
 * MPI path (comm_mpi.c) and the device path (comm_dev.c) so both count
 * exactly alike. */
#ifndef PTRAIN_COMM_PRIV_H
#define PTRAIN_COMM_PRIV_H
#include "comm/comm.h"
#include "shape/shape.h"

/* One call of kind k: payload bytes n as comm.h defines them, sent the
 * bytes this rank sends under the ring model. */
static inline void pt_comm_count(pt_comm *c, enum pt_coll k, uint64_t payload, uint64_t sent)
{
    c->stats.calls[k]++;
    c->stats.payload_bytes[k] += payload;
    c->stats.sent_bytes[k] += sent;
}

/* factor (p-1)/p of bytes: the ring algorithm's share of one rank
 * (lib/shape's pt_ring_bytes, the formula the planner counts with too) */
static inline uint64_t pt_comm_ring(uint64_t bytes, int p, int factor) { return pt_ring_bytes(bytes, p, factor); }

/* Elements of `esize` bytes per MPI call of a chunked collective
 * (comm.h: pt_comm.chunk_bytes). */
static inline size_t pt_comm_chunk_elems(const pt_comm *c, size_t esize)
{
    size_t b = c->chunk_bytes ? c->chunk_bytes : PT_COMM_CHUNK_BYTES;
    return b >= esize ? b / esize : 1;
}

/* The device path of a group (comm_dev.c), reached by comm_mpi.c through
 * this table only, so that programs linking comm_mpi.c alone (ptrain-topo)
 * need none of it.  Functions as comm_dev.h's pt_comm_dev_* (owns: 1 when
 * buf is one of the path's device buffers; disable: comm.h's
 * pt_comm_device_disable). */
typedef struct pt_comm_dev_vt {
    int (*owns)(const pt_comm *c, const void *buf);
    int (*allreduce)(pt_comm *c, void *buf, size_t n, int elem, int op);
    int (*reduce_scatter)(pt_comm *c, const void *in, void *out, size_t n, int elem);
    int (*allgather)(pt_comm *c, const void *in, void *out, size_t n, int elem);
    int (*broadcast)(pt_comm *c, void *buf, size_t n, int elem, int root);
    int (*reduce)(pt_comm *c, void *buf, size_t n, int elem, int root);
    int (*send)(pt_comm *c, const void *buf, size_t n, int elem, int dst, int tag);
    int (*recv)(pt_comm *c, void *buf, size_t n, int elem, int src, int tag);
    int (*sendrecv)(pt_comm *c, const void *sbuf, int dst, void *rbuf, int src, size_t n, int elem, int tag);
    void (*disable)(pt_comm *c);
} pt_comm_dev_vt;

/* A p2p call queued inside a staged group (pt_comm_group_start). */
typedef struct pt_comm_qop {
    int send;     /* 1 send, 0 receive */
    void *buf;    /* device buffer */
    size_t n;     /* elements */
    int elem, peer, tag;
} pt_comm_qop;

struct pt_comm_dev {
    const pt_comm_dev_vt *vt;
    int path;                        /* PT_COMM_DEV_NCCL or PT_COMM_DEV_STAGED */
    const struct pt_backend_dev *mv; /* staged: how device memory is reached (comm_dev.h) */
    void *stage;                     /* staged: pinned host memory, grown on demand */
    size_t stage_bytes;
    void *nccl;                      /* NCCL: the ncclComm_t */
    int overlap;                     /* pt_comm_device_overlap */
    int in_group;                    /* between pt_comm_group_start and _end */
    pt_comm_qop *q;                  /* staged group: the queued sends and receives */
    size_t nq, qcap;
};

/* Element types of the device path: lib/core's pt_dtype values (the _t
 * collectives pass their pt_dtype through as is), and its reductions. */
enum pt_comm_elem { PT_COMM_F32 = PT_F32, PT_COMM_BF16 = PT_BF16, PT_COMM_F64 = PT_F64 };
enum pt_comm_redop { PT_COMM_SUM = 0, PT_COMM_MAX = 1 };

/* pt_fail(PT_ECOMM) for an MPI error code: "WHAT on group 'NAME' (size
 * P) failed: <MPI_Error_string>" (comm_mpi.c). */
int pt_comm_mpi_fail(int rc, const char *what, const pt_comm *c);

#endif
