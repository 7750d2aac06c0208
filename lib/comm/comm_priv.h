/* SPDX-License-Identifier: MIT */
/* Inside lib/comm: the byte counters' model (comm.h's table), the element
 * types, and the transports.
 *
 * Structure.  comm.h's entry points (comm_mpi.c) check their arguments,
 * pick the group's transport for the buffer and count the bytes; a
 * transport (pt_transport below) only moves the data:
 *
 *   mpi_host    host buffers over MPI (comm_mpi.c): every group has it
 *   mpi_staged  device buffers staged through host memory over MPI
 *               (comm_staged.c): one chunk loop serves all eight calls
 *   nccl        device buffers by NCCL on the communication stream
 *               (comm_nccl.c, built with NCCL only)
 *
 * A group picks its transports once: mpi_host for host buffers from the
 * start, and at pt_comm_device_enable (comm_dev.c) the device transport
 * for device buffers (pt_comm_transport_for).  A call then asks only
 * which kind of memory its buffer is in (the mover's is_device_ptr) and
 * goes to that transport: no transport branches per call. */
#ifndef PTRAIN_COMM_PRIV_H
#define PTRAIN_COMM_PRIV_H
#include "comm/comm.h"
#include "shape/shape.h"

#include <mpi.h>

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

/* ---- element types (comm_mpi.c) ---- */

/* Element types of the transports: lib/core's pt_dtype values (the _t
 * collectives pass their pt_dtype through as is), and the reductions. */
enum pt_comm_elem { PT_COMM_F32 = PT_F32, PT_COMM_BF16 = PT_BF16, PT_COMM_F64 = PT_F64 };
enum pt_comm_redop { PT_COMM_SUM = 0, PT_COMM_MAX = 1 };

/* Bytes of one element (0 for a value outside pt_comm_elem). */
size_t pt_comm_elem_size(int elem);
/* The MPI datatype and reduction of an element type: MPI_FLOAT,
 * MPI_DOUBLE; bf16 is MPI_UINT16_T with user operations (MPI_Op_create,
 * at the first use, kept until MPI_Finalize) that add or compare in fp32
 * and round the result to nearest even (pt_comm_bf16_sum / _max), as
 * NCCL's bf16 reductions do per step.  MPI_DATATYPE_NULL / MPI_OP_NULL for
 * an invalid value. */
MPI_Datatype pt_comm_mpi_type(int elem);
MPI_Op pt_comm_mpi_op(int elem, int op);
/* The bf16 user operations themselves (MPI_User_function): inout[i] =
 * bf16(f32(in[i]) + f32(inout[i])) / the larger; NaN propagates. */
void pt_comm_bf16_sum(void *in, void *inout, int *len, MPI_Datatype *type);
void pt_comm_bf16_max(void *in, void *inout, int *len, MPI_Datatype *type);

/* pt_fail(PT_ECOMM) for an MPI error code: "WHAT on group 'NAME' (size
 * P) failed: <MPI_Error_string>" (comm_mpi.c). */
int pt_comm_mpi_fail(int rc, const char *what, const pt_comm *c);

/* ---- transports ---- */

/* How one kind of buffer moves over a group.  The entry points have
 * already checked elem (a pt_comm_elem), op (a pt_comm_redop), n % size
 * for reduce_scatter and allgather, and returned for what moves nothing
 * (a group of one or n == 0, except reduce_scatter and allgather, which
 * the transport makes a local copy on a group of one, and the
 * point-to-point calls); they count after a transport's PT_OK.  Counts n
 * are elements of elem, as comm.h's calls take them (reduce_scatter: n in,
 * n / size out; allgather: n / size in, n out).  Each returns PT_OK,
 * PT_ENOMEM (staging memory), PT_ECOMM, PT_EIO (a device copy) with one
 * line.  group (NULL for mpi_host): pt_comm_group_start (start 1) and
 * _end (start 0) of comm.h; wait: pt_comm_device_wait. */
typedef struct pt_transport {
    const char *name; /* "mpi_host", "mpi_staged", "nccl" */
    int (*allreduce)(pt_comm *c, void *buf, size_t n, int elem, int op);
    int (*reduce_scatter)(pt_comm *c, const void *in, void *out, size_t n, int elem);
    int (*allgather)(pt_comm *c, const void *in, void *out, size_t n, int elem);
    int (*bcast)(pt_comm *c, void *buf, size_t n, int elem, int root);
    int (*reduce)(pt_comm *c, void *buf, size_t n, int elem, int root);
    int (*send)(pt_comm *c, const void *buf, size_t n, int elem, int dst, int tag);
    int (*recv)(pt_comm *c, void *buf, size_t n, int elem, int src, int tag);
    int (*sendrecv)(pt_comm *c, const void *sbuf, int dst, void *rbuf, int src, size_t n, int elem, int tag);
    int (*group)(pt_comm *c, int start);
    int (*wait)(pt_comm *c);
} pt_transport;

extern const pt_transport pt_transport_mpi_host;   /* comm_mpi.c */
extern const pt_transport pt_transport_mpi_staged; /* comm_staged.c */
extern const pt_transport pt_transport_nccl;       /* comm_nccl.c (HAVE_NCCL only) */

/* The transports a group can pick, in the order of pt_comm_transport_for's
 * answers. */
enum pt_comm_tp { PT_TP_MPI_HOST = 0, PT_TP_MPI_STAGED = 1, PT_TP_NCCL = 2 };

/* A p2p call queued inside a staged group (pt_comm_group_start). */
typedef struct pt_comm_qop {
    int send;     /* 1 send, 0 receive */
    void *buf;    /* device buffer */
    size_t n;     /* elements */
    int elem, peer, tag;
} pt_comm_qop;

/* The device side of a group (pt_comm_device_enable).  comm_mpi.c reaches
 * it through its data only (tp, mv, disable), so that programs linking
 * comm_mpi.c alone (ptrain-topo) need none of comm_dev.c. */
struct pt_comm_dev {
    const pt_transport *tp[2];       /* by buffer kind: [0] host memory, [1] device memory */
    void (*disable)(pt_comm *c);     /* comm.h's pt_comm_device_disable */
    int path;                        /* PT_COMM_DEV_NCCL or PT_COMM_DEV_STAGED */
    const struct pt_backend_dev *mv; /* how device memory is reached (lib/backend/ops.h) */
    void *stage;                     /* staged: host memory from mv->host_alloc, grown on demand */
    size_t stage_bytes;
    void *nccl;                      /* NCCL: the ncclComm_t, shared with groups of the same members */
    int overlap;                     /* pt_comm_device_overlap */
    int in_group;                    /* between pt_comm_group_start and _end */
    pt_comm_qop *q;                  /* staged group: the queued sends and receives */
    size_t nq, qcap;
};

/* The transport of group c for a call on buffer buf: the device transport
 * when the group has one and buf is device memory, else mpi_host. */
const pt_transport *pt_comm_transport(const pt_comm *c, const void *buf);

#endif
