/* SPDX-License-Identifier: MIT */
/* comm.h's entry points (check, pick the group's transport for the
 * buffer, count), the mpi_host transport (host buffers over MPI), the
 * element types (comm_priv.h).  Stands alone: ptrain-topo links this file
 * without comm_dev.c and reaches the device side only through a group's
 * struct pt_comm_dev, which it never creates. */
#include "comm/comm.h"
#include "comm/comm_dev.h"
#include "comm/comm_priv.h"
#include "backend/ops.h"
#include "core/core.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int pt_comm_mpi_fail(int rc, const char *what, const pt_comm *c)
{
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    return pt_fail(PT_ECOMM, "%s on group '%s' (size %d) failed: %s", what, c->name, c->size, msg);
}

int pt_comm_wrap(pt_comm *c, MPI_Comm comm, const char *name)
{
    memset(c, 0, sizeof *c);
    c->comm = comm;
    MPI_Comm_rank(comm, &c->rank);
    MPI_Comm_size(comm, &c->size);
    snprintf(c->name, sizeof c->name, "%s", name);
    return PT_OK;
}

int pt_comm_split(pt_comm *c, const pt_comm *parent, int color, int key, const char *name)
{
    MPI_Comm nc;
    int rc = MPI_Comm_split(parent->comm, color, key, &nc);
    if (rc != MPI_SUCCESS) return pt_comm_mpi_fail(rc, "MPI_Comm_split", parent);
    pt_comm_wrap(c, nc, name);
    c->owned = 1;
    return PT_OK;
}

void pt_comm_free(pt_comm *c)
{
    if (c->dev) c->dev->disable(c);
    if (c->owned && c->comm != MPI_COMM_NULL) MPI_Comm_free(&c->comm);
    c->owned = 0;
}

int pt_comm_nodes(const pt_comm *c, int *tasks_per_node, int *nnodes, int *node)
{
    /* ranks that share memory, split further by Slurm's node id when
     * every rank has one: the fake nodes of a test Slurm share one host's
     * memory, while ranks on different hosts stay apart even where a
     * launcher passed one SLURM_NODEID to all (mpirun inside sbatch) */
    const char *sn = getenv("SLURM_NODEID");
    char *end = NULL;
    long id = sn && *sn ? strtol(sn, &end, 10) : -1;
    int have_id = end && !*end && id >= 0 && id < (1L << 30), all_id = 0;
    int rc = MPI_Allreduce(&have_id, &all_id, 1, MPI_INT, MPI_MIN, c->comm);
    if (rc != MPI_SUCCESS) return pt_comm_mpi_fail(rc, "MPI_Allreduce(SLURM_NODEID)", c);
    MPI_Comm local;
    rc = MPI_Comm_split_type(c->comm, MPI_COMM_TYPE_SHARED, c->rank, MPI_INFO_NULL, &local);
    if (rc != MPI_SUCCESS) return pt_comm_mpi_fail(rc, "MPI_Comm_split_type(shared)", c);
    if (all_id) {
        MPI_Comm host = local;
        rc = MPI_Comm_split(host, (int)id, c->rank, &local);
        MPI_Comm_free(&host);
        if (rc != MPI_SUCCESS) return pt_comm_mpi_fail(rc, "MPI_Comm_split(SLURM_NODEID)", c);
    }
    int lrank, lsize, mine[2];
    MPI_Comm_rank(local, &lrank);
    MPI_Comm_size(local, &lsize);
    /* the key orders local ranks by their rank in c: local rank 0 is the
     * node's lowest rank, which names the node */
    mine[0] = c->rank;
    mine[1] = lsize;
    rc = MPI_Bcast(mine, 1, MPI_INT, 0, local);
    MPI_Comm_free(&local);
    if (rc != MPI_SUCCESS) return pt_comm_mpi_fail(rc, "MPI_Bcast(node leader)", c);
    int *all = malloc(sizeof(int) * 2 * (size_t)c->size);
    int have = all != NULL, everyone = 0;
    rc = MPI_Allreduce(&have, &everyone, 1, MPI_INT, MPI_MIN, c->comm);
    if (rc != MPI_SUCCESS || !everyone) {
        free(all);
        return rc != MPI_SUCCESS ? pt_comm_mpi_fail(rc, "MPI_Allreduce(node count)", c)
                                 : pt_fail(PT_ECOMM, "out of memory for the node list of %d ranks", c->size);
    }
    rc = MPI_Allgather(mine, 2, MPI_INT, all, 2, MPI_INT, c->comm);
    if (rc != MPI_SUCCESS) {
        free(all);
        return pt_comm_mpi_fail(rc, "MPI_Allgather(node sizes)", c);
    }
    int n = 0;
    for (int r = 0; r < c->size; r++)
        if (all[2 * r] == r) { /* r leads a node */
            if (node && r == mine[0]) *node = n;
            tasks_per_node[n++] = all[2 * r + 1];
        }
    *nnodes = n;
    free(all);
    return PT_OK;
}

/* ---- element types ------------------------------------------------------------------------ */

size_t pt_comm_elem_size(int elem)
{
    switch (elem) {
    case PT_COMM_F32: return 4;
    case PT_COMM_BF16: return 2;
    case PT_COMM_F64: return 8;
    }
    return 0;
}

/* bf16 <-> fp32: lib/core's pt_bf16_to_f32 / pt_f32_to_bf16 (round to
 * nearest even, NaN kept NaN), the pair every bf16 path uses.  MPI has no
 * bf16 type before MPI 4.1's extensions: a ring over p ranks rounds p-1
 * times. */
void pt_comm_bf16_sum(void *in, void *inout, int *len, MPI_Datatype *type)
{
    (void)type;
    const uint16_t *a = in;
    uint16_t *b = inout;
    for (int i = 0; i < *len; i++) b[i] = pt_f32_to_bf16(pt_bf16_to_f32(a[i]) + pt_bf16_to_f32(b[i]));
}

void pt_comm_bf16_max(void *in, void *inout, int *len, MPI_Datatype *type)
{
    (void)type;
    const uint16_t *a = in;
    uint16_t *b = inout;
    for (int i = 0; i < *len; i++) {
        float x = pt_bf16_to_f32(a[i]), y = pt_bf16_to_f32(b[i]);
        if (x != x || x > y) b[i] = a[i]; /* NaN propagates, as MPI_MAX on floats does in Open MPI */
    }
}

MPI_Datatype pt_comm_mpi_type(int elem)
{
    switch (elem) {
    case PT_COMM_F32: return MPI_FLOAT;
    case PT_COMM_BF16: return MPI_UINT16_T;
    case PT_COMM_F64: return MPI_DOUBLE;
    }
    return MPI_DATATYPE_NULL;
}

MPI_Op pt_comm_mpi_op(int elem, int op)
{
    if (op != PT_COMM_SUM && op != PT_COMM_MAX) return MPI_OP_NULL;
    if (elem == PT_COMM_F32 || elem == PT_COMM_F64) return op == PT_COMM_SUM ? MPI_SUM : MPI_MAX;
    if (elem != PT_COMM_BF16) return MPI_OP_NULL;
    /* created on first use (from the thread that drives the collectives);
     * MPI_Finalize releases them */
    static MPI_Op ops[2] = {MPI_OP_NULL, MPI_OP_NULL};
    if (ops[op] == MPI_OP_NULL &&
        MPI_Op_create(op == PT_COMM_SUM ? pt_comm_bf16_sum : pt_comm_bf16_max, 1, &ops[op]) != MPI_SUCCESS)
        return MPI_OP_NULL;
    return ops[op];
}

/* ---- mpi_host: host buffers over MPI ---------------------------------------------------------- */

#define MPI_TRY(call, what)                                              \
    do {                                                                 \
        int mrc_ = (call);                                               \
        if (mrc_ != MPI_SUCCESS) return pt_comm_mpi_fail(mrc_, what, c); \
    } while (0)

/* In-place allreduce of n elements in chunks (one MPI_Allreduce each) */
static int host_allreduce(pt_comm *c, void *buf, size_t n, int elem, int op)
{
    const size_t es = pt_comm_elem_size(elem), step = pt_comm_chunk_elems(c, es);
    const MPI_Datatype t = pt_comm_mpi_type(elem);
    const MPI_Op mop = pt_comm_mpi_op(elem, op);
    for (size_t off = 0; off < n; off += step) {
        size_t len = n - off < step ? n - off : step;
        MPI_TRY(MPI_Allreduce(MPI_IN_PLACE, (char *)buf + off * es, (int)len, t, mop, c->comm),
                op == PT_COMM_MAX ? "allreduce(max)" : "allreduce");
    }
    return PT_OK;
}

static int host_reduce_scatter(pt_comm *c, const void *in, void *out, size_t n, int elem)
{
    const size_t es = pt_comm_elem_size(elem);
    if (c->size == 1) {
        memmove(out, in, n * es);
        return PT_OK;
    }
    /* MPI_Reduce_scatter with equal counts, not MPI_Reduce_scatter_block:
     * Open MPI's coll/tuned runs the block form as a reduce to rank 0 and
     * a linear scatter by default (open-mpi/ompi#5156), 6-30x slower than
     * the counts form's recursive halving / ring from 4 MiB up on 2-8
     * ranks here (4.1.4; bench/bench-coll).  Above the chunk, each call
     * takes the next `len` elements of every rank's block, packed rank by
     * rank into a staging buffer of at most a chunk. */
    const size_t p = (size_t)c->size, nb = n / p;
    const MPI_Datatype mt = pt_comm_mpi_type(elem);
    const MPI_Op op = pt_comm_mpi_op(elem, PT_COMM_SUM);
    size_t step = pt_comm_chunk_elems(c, es) / p;
    if (step < 1) step = 1;
    int stack_counts[64], *counts = stack_counts;
    char *stage = NULL;
    if (p > 64 && !(counts = malloc(p * sizeof *counts)))
        return pt_fail(PT_ENOMEM, "reduce_scatter over %d ranks: out of memory for the counts", c->size);
    if (step < nb && !(stage = malloc(p * step * es))) {
        if (counts != stack_counts) free(counts);
        return pt_fail(PT_ENOMEM, "reduce_scatter of %zu elements: out of memory for a %zu-byte staging buffer", n,
                       p * step * es);
    }
    int rc = MPI_SUCCESS;
    for (size_t off = 0; off < nb && rc == MPI_SUCCESS; off += step) {
        const size_t len = nb - off < step ? nb - off : step;
        const void *src = in;
        if (stage) {
            for (size_t r = 0; r < p; r++) memcpy(stage + r * len * es, (const char *)in + (r * nb + off) * es, len * es);
            src = stage;
        }
        for (size_t r = 0; r < p; r++) counts[r] = (int)len;
        rc = MPI_Reduce_scatter(src, (char *)out + off * es, counts, mt, op, c->comm);
    }
    free(stage);
    if (counts != stack_counts) free(counts);
    return rc == MPI_SUCCESS ? PT_OK : pt_comm_mpi_fail(rc, "reduce_scatter", c);
}

static int host_allgather(pt_comm *c, const void *in, void *out, size_t n, int elem)
{
    if (c->size == 1) {
        memmove(out, in, n * pt_comm_elem_size(elem));
        return PT_OK;
    }
    const MPI_Datatype mt = pt_comm_mpi_type(elem);
    const int nb = (int)(n / (size_t)c->size);
    MPI_TRY(MPI_Allgather(in, nb, mt, out, nb, mt, c->comm), "allgather");
    return PT_OK;
}

static int host_bcast(pt_comm *c, void *buf, size_t n, int elem, int root)
{
    MPI_TRY(MPI_Bcast(buf, (int)n, pt_comm_mpi_type(elem), root, c->comm), "broadcast");
    return PT_OK;
}

static int host_reduce(pt_comm *c, void *buf, size_t n, int elem, int root)
{
    const size_t es = pt_comm_elem_size(elem), step = pt_comm_chunk_elems(c, es);
    for (size_t off = 0; off < n; off += step) {
        const size_t len = n - off < step ? n - off : step;
        char *b = (char *)buf + off * es;
        MPI_TRY(MPI_Reduce(c->rank == root ? MPI_IN_PLACE : b, b, (int)len, pt_comm_mpi_type(elem),
                           pt_comm_mpi_op(elem, PT_COMM_SUM), root, c->comm),
                "reduce");
    }
    return PT_OK;
}

static int host_send(pt_comm *c, const void *buf, size_t n, int elem, int dst, int tag)
{
    MPI_TRY(MPI_Send(buf, (int)n, pt_comm_mpi_type(elem), dst, tag, c->comm), "send");
    return PT_OK;
}

static int host_recv(pt_comm *c, void *buf, size_t n, int elem, int src, int tag)
{
    MPI_TRY(MPI_Recv(buf, (int)n, pt_comm_mpi_type(elem), src, tag, c->comm, MPI_STATUS_IGNORE), "recv");
    return PT_OK;
}

static int host_sendrecv(pt_comm *c, const void *sbuf, int dst, void *rbuf, int src, size_t n, int elem, int tag)
{
    const MPI_Datatype mt = pt_comm_mpi_type(elem);
    MPI_TRY(MPI_Sendrecv(sbuf, (int)n, mt, dst, tag, rbuf, (int)n, mt, src, tag, c->comm, MPI_STATUS_IGNORE),
            "sendrecv");
    return PT_OK;
}

const pt_transport pt_transport_mpi_host = {
    .name = "mpi_host",
    .allreduce = host_allreduce,
    .reduce_scatter = host_reduce_scatter,
    .allgather = host_allgather,
    .bcast = host_bcast,
    .reduce = host_reduce,
    .send = host_send,
    .recv = host_recv,
    .sendrecv = host_sendrecv,
    .group = NULL, /* MPI's blocking calls: nothing to group */
    .wait = NULL,
};

const pt_transport *pt_comm_transport(const pt_comm *c, const void *buf)
{
    const struct pt_comm_dev *d = c->dev;
    return d ? d->tp[d->mv->is_device_ptr(buf) ? 1 : 0] : &pt_transport_mpi_host;
}

/* ---- the entry points: check, skip what moves nothing, run, count ------------------------------ */

static int bad_elem(const pt_comm *c, const char *what, int elem)
{
    return pt_fail(PT_EINVAL, "%s on group '%s': element type %d is not valid (valid: %d fp32, %d bf16, %d fp64)", what,
                   c->name, elem, PT_COMM_F32, PT_COMM_BF16, PT_COMM_F64);
}

static int not_multiple(const pt_comm *c, const char *what, size_t n)
{
    return pt_fail(PT_EINVAL, "%s of %zu elements over %d ranks: count must be a multiple of the group size", what, n,
                   c->size);
}

int pt_comm_run_allreduce(pt_comm *c, const pt_transport *t, void *buf, size_t n, int elem, int op)
{
    const size_t es = pt_comm_elem_size(elem);
    if (!es) return bad_elem(c, "allreduce", elem);
    if (op != PT_COMM_SUM && op != PT_COMM_MAX)
        return pt_fail(PT_EINVAL, "allreduce on group '%s': reduction %d is not valid (valid: %d sum, %d max)", c->name,
                       op, PT_COMM_SUM, PT_COMM_MAX);
    if (c->size == 1 || n == 0) return PT_OK;
    int rc = t->allreduce(c, buf, n, elem, op);
    if (rc == PT_OK) pt_comm_count(c, PT_COLL_ALLREDUCE, n * es, pt_comm_ring(n * es, c->size, 2));
    return rc;
}

int pt_comm_run_reduce_scatter(pt_comm *c, const pt_transport *t, const void *in, void *out, size_t n, int elem)
{
    const size_t es = pt_comm_elem_size(elem);
    if (!es) return bad_elem(c, "reduce_scatter", elem);
    if (n % (size_t)c->size) return not_multiple(c, "reduce_scatter", n);
    int rc = t->reduce_scatter(c, in, out, n, elem);
    if (rc == PT_OK && c->size > 1)
        pt_comm_count(c, PT_COLL_REDUCE_SCATTER, n * es, pt_comm_ring(n * es, c->size, 1));
    return rc;
}

int pt_comm_run_allgather(pt_comm *c, const pt_transport *t, const void *in, void *out, size_t n, int elem)
{
    const size_t es = pt_comm_elem_size(elem);
    if (!es) return bad_elem(c, "allgather", elem);
    if (n % (size_t)c->size) return not_multiple(c, "allgather", n);
    int rc = t->allgather(c, in, out, n, elem);
    if (rc == PT_OK && c->size > 1) pt_comm_count(c, PT_COLL_ALLGATHER, n * es, pt_comm_ring(n * es, c->size, 1));
    return rc;
}

int pt_comm_run_broadcast(pt_comm *c, const pt_transport *t, void *buf, size_t n, int elem, int root)
{
    const size_t es = pt_comm_elem_size(elem);
    if (!es) return bad_elem(c, "broadcast", elem);
    if (c->size == 1 || n == 0) return PT_OK;
    int rc = t->bcast(c, buf, n, elem, root);
    if (rc == PT_OK) pt_comm_count(c, PT_COLL_BROADCAST, n * es, pt_comm_ring(n * es, c->size, 1));
    return rc;
}

int pt_comm_run_reduce(pt_comm *c, const pt_transport *t, void *buf, size_t n, int elem, int root)
{
    const size_t es = pt_comm_elem_size(elem);
    if (!es) return bad_elem(c, "reduce", elem);
    if (c->size == 1 || n == 0) return PT_OK;
    int rc = t->reduce(c, buf, n, elem, root);
    if (rc == PT_OK) pt_comm_count(c, PT_COLL_REDUCE, n * es, pt_comm_ring(n * es, c->size, 1));
    return rc;
}

int pt_comm_run_send(pt_comm *c, const pt_transport *t, const void *buf, size_t n, int elem, int dst, int tag)
{
    const size_t es = pt_comm_elem_size(elem);
    if (!es) return bad_elem(c, "send", elem);
    int rc = t->send(c, buf, n, elem, dst, tag);
    if (rc == PT_OK) pt_comm_count(c, PT_COLL_SEND, n * es, n * es);
    return rc;
}

int pt_comm_run_recv(pt_comm *c, const pt_transport *t, void *buf, size_t n, int elem, int src, int tag)
{
    const size_t es = pt_comm_elem_size(elem);
    if (!es) return bad_elem(c, "recv", elem);
    int rc = t->recv(c, buf, n, elem, src, tag);
    if (rc == PT_OK) pt_comm_count(c, PT_COLL_RECV, n * es, 0);
    return rc;
}

int pt_comm_run_sendrecv(pt_comm *c, const pt_transport *t, const void *sbuf, int dst, void *rbuf, int src, size_t n,
                         int elem, int tag)
{
    const size_t es = pt_comm_elem_size(elem);
    if (!es) return bad_elem(c, "sendrecv", elem);
    if (n == 0) return PT_OK;
    int rc = t->sendrecv(c, sbuf, dst, rbuf, src, n, elem, tag);
    if (rc == PT_OK) {
        pt_comm_count(c, PT_COLL_SEND, n * es, n * es);
        pt_comm_count(c, PT_COLL_RECV, n * es, 0);
    }
    return rc;
}

/* comm.h's calls: the transport for the buffer, then the checks and counts above */

int pt_allreduce_sum_t(pt_comm *c, void *buf, size_t n, pt_dtype t)
{
    return pt_comm_run_allreduce(c, pt_comm_transport(c, buf), buf, n, (int)t, PT_COMM_SUM);
}
int pt_allreduce_sum(pt_comm *c, float *buf, size_t n) { return pt_allreduce_sum_t(c, buf, n, PT_F32); }
int pt_allreduce_max(pt_comm *c, float *buf, size_t n)
{
    return pt_comm_run_allreduce(c, pt_comm_transport(c, buf), buf, n, PT_COMM_F32, PT_COMM_MAX);
}
int pt_allreduce_sum_f64(pt_comm *c, double *buf, size_t n) { return pt_allreduce_sum_t(c, buf, n, PT_F64); }

int pt_reduce_scatter_sum_t(pt_comm *c, const void *in, void *out, size_t n, pt_dtype t)
{
    return pt_comm_run_reduce_scatter(c, pt_comm_transport(c, in), in, out, n, (int)t);
}
int pt_reduce_scatter_sum(pt_comm *c, const float *in, float *out, size_t n)
{
    return pt_reduce_scatter_sum_t(c, in, out, n, PT_F32);
}

int pt_allgather_t(pt_comm *c, const void *in, void *out, size_t n, pt_dtype t)
{
    return pt_comm_run_allgather(c, pt_comm_transport(c, in), in, out, n, (int)t);
}
int pt_allgather(pt_comm *c, const float *in, float *out, size_t n) { return pt_allgather_t(c, in, out, n, PT_F32); }

int pt_broadcast_t(pt_comm *c, void *buf, size_t n, int root, pt_dtype t)
{
    return pt_comm_run_broadcast(c, pt_comm_transport(c, buf), buf, n, (int)t, root);
}
int pt_broadcast(pt_comm *c, float *buf, size_t n, int root) { return pt_broadcast_t(c, buf, n, root, PT_F32); }

int pt_reduce_sum_t(pt_comm *c, void *buf, size_t n, int root, pt_dtype t)
{
    return pt_comm_run_reduce(c, pt_comm_transport(c, buf), buf, n, (int)t, root);
}
int pt_reduce_sum(pt_comm *c, float *buf, size_t n, int root) { return pt_reduce_sum_t(c, buf, n, root, PT_F32); }

int pt_sendrecv_t(pt_comm *c, const void *sbuf, int dst, void *rbuf, int src, size_t n, int tag, pt_dtype t)
{
    return pt_comm_run_sendrecv(c, pt_comm_transport(c, sbuf), sbuf, dst, rbuf, src, n, (int)t, tag);
}
int pt_sendrecv(pt_comm *c, const float *sbuf, int dst, float *rbuf, int src, size_t n, int tag)
{
    return pt_sendrecv_t(c, sbuf, dst, rbuf, src, n, tag, PT_F32);
}

int pt_send_t(pt_comm *c, const void *buf, size_t n, int dst, int tag, pt_dtype t)
{
    return pt_comm_run_send(c, pt_comm_transport(c, buf), buf, n, (int)t, dst, tag);
}
int pt_send(pt_comm *c, const float *buf, size_t n, int dst, int tag) { return pt_send_t(c, buf, n, dst, tag, PT_F32); }

int pt_recv_t(pt_comm *c, void *buf, size_t n, int src, int tag, pt_dtype t)
{
    return pt_comm_run_recv(c, pt_comm_transport(c, buf), buf, n, (int)t, src, tag);
}
int pt_recv(pt_comm *c, float *buf, size_t n, int src, int tag) { return pt_recv_t(c, buf, n, src, tag, PT_F32); }

int pt_barrier(pt_comm *c)
{
    if (c->size == 1) return PT_OK;
    int rc = MPI_Barrier(c->comm);
    return rc == MPI_SUCCESS ? PT_OK : pt_comm_mpi_fail(rc, "barrier", c);
}

uint64_t pt_comm_sent_total(const pt_comm *c)
{
    uint64_t s = 0;
    for (int k = 0; k < PT_COLL_N; k++) s += c->stats.sent_bytes[k];
    return s;
}

void pt_comm_reset_stats(pt_comm *c) { memset(&c->stats, 0, sizeof c->stats); }

const char *pt_coll_name(enum pt_coll k)
{
    static const char *names[PT_COLL_N] = {"allreduce", "reduce_scatter", "allgather", "broadcast", "reduce", "send", "recv"};
    return (unsigned)k < PT_COLL_N ? names[k] : "?";
}
