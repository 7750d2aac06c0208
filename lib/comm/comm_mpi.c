/* SPDX-License-Identifier: MIT */
/* MPI implementation of the pt_comm collectives (see comm.h). */
#include "comm/comm.h"
#include "comm/comm_priv.h"
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
    if (c->dev) c->dev->vt->disable(c);
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

/* bf16 sums: a user MPI op on 16-bit elements that adds in fp32 and rounds
 * once per pairwise sum (MPI has no bf16 type before MPI 4.1's
 * extensions).  Created at the first use (after MPI_Init) and kept. */
static void bf16_sum_fn(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)dt;
    const pt_bf16 *a = in;
    pt_bf16 *b = inout;
    for (int i = 0; i < *len; i++) b[i] = pt_f32_to_bf16(pt_bf16_to_f32(a[i]) + pt_bf16_to_f32(b[i]));
}

static MPI_Op bf16_sum_op(void)
{
    static MPI_Op op = MPI_OP_NULL;
    if (op == MPI_OP_NULL) MPI_Op_create(bf16_sum_fn, 1, &op);
    return op;
}

/* The MPI datatype, element size and sum op of a pt_dtype; 0, or PT_EINVAL. */
static int mpi_type(pt_dtype t, MPI_Datatype *mt, size_t *es, MPI_Op *sum, const char *what)
{
    *mt = MPI_DATATYPE_NULL, *es = 0, *sum = MPI_OP_NULL;
    switch (t) {
    case PT_F32: *mt = MPI_FLOAT, *es = 4, *sum = MPI_SUM; return PT_OK;
    case PT_F64: *mt = MPI_DOUBLE, *es = 8, *sum = MPI_SUM; return PT_OK;
    case PT_BF16: *mt = MPI_UINT16_T, *es = 2, *sum = bf16_sum_op(); return PT_OK;
    }
    return pt_fail(PT_EINVAL, "%s: element type %d is not fp32, bf16 or fp64", what, (int)t);
}

/* In-place allreduce of n elements in chunks (one MPI_Allreduce each) */
static int allreduce_chunked(pt_comm *c, void *buf, size_t n, MPI_Datatype t, size_t esize, MPI_Op op,
                             const char *what)
{
    const size_t step = pt_comm_chunk_elems(c, esize);
    for (size_t off = 0; off < n; off += step) {
        size_t len = n - off < step ? n - off : step;
        int rc = MPI_Allreduce(MPI_IN_PLACE, (char *)buf + off * esize, (int)len, t, op, c->comm);
        if (rc != MPI_SUCCESS) return pt_comm_mpi_fail(rc, what, c);
    }
    return PT_OK;
}

int pt_allreduce_sum_t(pt_comm *c, void *buf, size_t n, pt_dtype t)
{
    if (c->dev && c->dev->vt->owns(c, buf)) return c->dev->vt->allreduce(c, buf, n, (int)t, PT_COMM_SUM);
    MPI_Datatype mt;
    size_t es;
    MPI_Op op;
    int rc = mpi_type(t, &mt, &es, &op, "allreduce");
    if (rc || c->size == 1 || n == 0) return rc;
    if ((rc = allreduce_chunked(c, buf, n, mt, es, op, "allreduce"))) return rc;
    pt_comm_count(c, PT_COLL_ALLREDUCE, n * es, pt_comm_ring(n * es, c->size, 2));
    return PT_OK;
}

int pt_allreduce_sum(pt_comm *c, float *buf, size_t n) { return pt_allreduce_sum_t(c, buf, n, PT_F32); }

int pt_allreduce_max(pt_comm *c, float *buf, size_t n)
{
    if (c->dev && c->dev->vt->owns(c, buf)) return c->dev->vt->allreduce(c, buf, n, PT_COMM_F32, PT_COMM_MAX);
    if (c->size == 1 || n == 0) return PT_OK;
    int rc = allreduce_chunked(c, buf, n, MPI_FLOAT, 4, MPI_MAX, "allreduce(max)");
    if (rc) return rc;
    pt_comm_count(c, PT_COLL_ALLREDUCE, n * 4, pt_comm_ring(n * 4, c->size, 2));
    return PT_OK;
}

int pt_allreduce_sum_f64(pt_comm *c, double *buf, size_t n)
{
    if (c->dev && c->dev->vt->owns(c, buf)) return c->dev->vt->allreduce(c, buf, n, PT_COMM_F64, PT_COMM_SUM);
    if (c->size == 1 || n == 0) return PT_OK;
    int rc = allreduce_chunked(c, buf, n, MPI_DOUBLE, 8, MPI_SUM, "allreduce(f64)");
    if (rc) return rc;
    pt_comm_count(c, PT_COLL_ALLREDUCE, n * 8, pt_comm_ring(n * 8, c->size, 2));
    return PT_OK;
}

int pt_reduce_scatter_sum_t(pt_comm *c, const void *in, void *out, size_t n, pt_dtype t)
{
    if (c->dev && c->dev->vt->owns(c, in)) return c->dev->vt->reduce_scatter(c, in, out, n, (int)t);
    MPI_Datatype mt;
    size_t es;
    MPI_Op op;
    int rc0 = mpi_type(t, &mt, &es, &op, "reduce_scatter");
    if (rc0) return rc0;
    if (n % (size_t)c->size)
        return pt_fail(PT_EINVAL, "reduce_scatter of %zu elements over %d ranks: count must be a multiple of the group size", n, c->size);
    if (c->size == 1) { memmove(out, in, n * es); return PT_OK; }
    /* MPI_Reduce_scatter with equal counts, not MPI_Reduce_scatter_block:
     * Open MPI's coll/tuned runs the block form as a reduce to rank 0 and
     * a linear scatter by default (open-mpi/ompi#5156), 6-30x slower than
     * the counts form's recursive halving / ring from 4 MiB up on 2-8
     * ranks here (4.1.4; bench/bench-coll).  Above the chunk, each call
     * takes the next `len` elements of every rank's block, packed rank by
     * rank into a staging buffer of at most a chunk. */
    const size_t p = (size_t)c->size, nb = n / p;
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
    if (rc != MPI_SUCCESS) return pt_comm_mpi_fail(rc, "reduce_scatter", c);
    pt_comm_count(c, PT_COLL_REDUCE_SCATTER, n * es, pt_comm_ring(n * es, c->size, 1));
    return PT_OK;
}

int pt_reduce_scatter_sum(pt_comm *c, const float *in, float *out, size_t n)
{
    return pt_reduce_scatter_sum_t(c, in, out, n, PT_F32);
}

int pt_allgather_t(pt_comm *c, const void *in, void *out, size_t n, pt_dtype t)
{
    if (c->dev && c->dev->vt->owns(c, in)) return c->dev->vt->allgather(c, in, out, n, (int)t);
    MPI_Datatype mt;
    size_t es;
    MPI_Op op;
    int rc = mpi_type(t, &mt, &es, &op, "allgather");
    if (rc) return rc;
    if (n % (size_t)c->size)
        return pt_fail(PT_EINVAL, "allgather of %zu elements over %d ranks: count must be a multiple of the group size", n, c->size);
    if (c->size == 1) { memmove(out, in, n * es); return PT_OK; }
    rc = MPI_Allgather(in, (int)(n / c->size), mt, out, (int)(n / c->size), mt, c->comm);
    if (rc != MPI_SUCCESS) return pt_comm_mpi_fail(rc, "allgather", c);
    pt_comm_count(c, PT_COLL_ALLGATHER, n * es, pt_comm_ring(n * es, c->size, 1));
    return PT_OK;
}

int pt_allgather(pt_comm *c, const float *in, float *out, size_t n) { return pt_allgather_t(c, in, out, n, PT_F32); }

int pt_broadcast_t(pt_comm *c, void *buf, size_t n, int root, pt_dtype t)
{
    if (c->dev && c->dev->vt->owns(c, buf)) return c->dev->vt->broadcast(c, buf, n, (int)t, root);
    MPI_Datatype mt;
    size_t es;
    MPI_Op op;
    int rc = mpi_type(t, &mt, &es, &op, "broadcast");
    if (rc || c->size == 1 || n == 0) return rc;
    rc = MPI_Bcast(buf, (int)n, mt, root, c->comm);
    if (rc != MPI_SUCCESS) return pt_comm_mpi_fail(rc, "broadcast", c);
    pt_comm_count(c, PT_COLL_BROADCAST, n * es, pt_comm_ring(n * es, c->size, 1));
    return PT_OK;
}

int pt_broadcast(pt_comm *c, float *buf, size_t n, int root) { return pt_broadcast_t(c, buf, n, root, PT_F32); }

int pt_reduce_sum_t(pt_comm *c, void *buf, size_t n, int root, pt_dtype t)
{
    if (c->dev && c->dev->vt->owns(c, buf)) return c->dev->vt->reduce(c, buf, n, (int)t, root);
    MPI_Datatype mt;
    size_t es;
    MPI_Op op;
    int rc0 = mpi_type(t, &mt, &es, &op, "reduce");
    if (rc0 || c->size == 1 || n == 0) return rc0;
    const size_t step = pt_comm_chunk_elems(c, es);
    for (size_t off = 0; off < n; off += step) {
        const size_t len = n - off < step ? n - off : step;
        char *b = (char *)buf + off * es;
        int rc = MPI_Reduce(c->rank == root ? MPI_IN_PLACE : b, b, (int)len, mt, op, root, c->comm);
        if (rc != MPI_SUCCESS) return pt_comm_mpi_fail(rc, "reduce", c);
    }
    pt_comm_count(c, PT_COLL_REDUCE, n * es, pt_comm_ring(n * es, c->size, 1));
    return PT_OK;
}

int pt_reduce_sum(pt_comm *c, float *buf, size_t n, int root) { return pt_reduce_sum_t(c, buf, n, root, PT_F32); }

int pt_sendrecv_t(pt_comm *c, const void *sbuf, int dst, void *rbuf, int src, size_t n, int tag, pt_dtype t)
{
    if (c->dev && c->dev->vt->owns(c, sbuf)) return c->dev->vt->sendrecv(c, sbuf, dst, rbuf, src, n, (int)t, tag);
    MPI_Datatype mt;
    size_t es;
    MPI_Op op;
    int rc = mpi_type(t, &mt, &es, &op, "sendrecv");
    if (rc || n == 0) return rc;
    rc = MPI_Sendrecv(sbuf, (int)n, mt, dst, tag, rbuf, (int)n, mt, src, tag, c->comm, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) return pt_comm_mpi_fail(rc, "sendrecv", c);
    pt_comm_count(c, PT_COLL_SEND, n * es, n * es);
    pt_comm_count(c, PT_COLL_RECV, n * es, 0);
    return PT_OK;
}

int pt_sendrecv(pt_comm *c, const float *sbuf, int dst, float *rbuf, int src, size_t n, int tag)
{
    return pt_sendrecv_t(c, sbuf, dst, rbuf, src, n, tag, PT_F32);
}

int pt_send_t(pt_comm *c, const void *buf, size_t n, int dst, int tag, pt_dtype t)
{
    if (c->dev && c->dev->vt->owns(c, buf)) return c->dev->vt->send(c, buf, n, (int)t, dst, tag);
    MPI_Datatype mt;
    size_t es;
    MPI_Op op;
    int rc = mpi_type(t, &mt, &es, &op, "send");
    if (rc) return rc;
    rc = MPI_Send(buf, (int)n, mt, dst, tag, c->comm);
    if (rc != MPI_SUCCESS) return pt_comm_mpi_fail(rc, "send", c);
    pt_comm_count(c, PT_COLL_SEND, n * es, n * es);
    return PT_OK;
}

int pt_send(pt_comm *c, const float *buf, size_t n, int dst, int tag) { return pt_send_t(c, buf, n, dst, tag, PT_F32); }

int pt_recv_t(pt_comm *c, void *buf, size_t n, int src, int tag, pt_dtype t)
{
    if (c->dev && c->dev->vt->owns(c, buf)) return c->dev->vt->recv(c, buf, n, (int)t, src, tag);
    MPI_Datatype mt;
    size_t es;
    MPI_Op op;
    int rc = mpi_type(t, &mt, &es, &op, "recv");
    if (rc) return rc;
    rc = MPI_Recv(buf, (int)n, mt, src, tag, c->comm, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) return pt_comm_mpi_fail(rc, "recv", c);
    pt_comm_count(c, PT_COLL_RECV, n * es, 0);
    return PT_OK;
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
