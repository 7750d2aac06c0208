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

int pt_allreduce_sum(pt_comm *c, float *buf, size_t n)
{
    if (c->dev && c->dev->vt->owns(c, buf)) return c->dev->vt->allreduce(c, buf, n, PT_COMM_F32, PT_COMM_SUM);
    if (c->size == 1 || n == 0) return PT_OK;
    int rc = allreduce_chunked(c, buf, n, MPI_FLOAT, 4, MPI_SUM, "allreduce");
    if (rc) return rc;
    pt_comm_count(c, PT_COLL_ALLREDUCE, n * 4, pt_comm_ring(n * 4, c->size, 2));
    return PT_OK;
}

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

int pt_reduce_scatter_sum(pt_comm *c, const float *in, float *out, size_t n)
{
    if (c->dev && c->dev->vt->owns(c, in)) return c->dev->vt->reduce_scatter(c, in, out, n, PT_COMM_F32);
    if (n % (size_t)c->size)
        return pt_fail(PT_EINVAL, "reduce_scatter of %zu floats over %d ranks: count must be a multiple of the group size", n, c->size);
    if (c->size == 1) { memmove(out, in, n * sizeof(float)); return PT_OK; }
    /* MPI_Reduce_scatter with equal counts, not MPI_Reduce_scatter_block:
     * Open MPI's coll/tuned runs the block form as a reduce to rank 0 and
     * a linear scatter by default (open-mpi/ompi#5156), 6-30x slower than
     * the counts form's recursive halving / ring from 4 MiB up on 2-8
     * ranks here (4.1.4; bench/bench-coll).  Above the chunk, each call
     * takes the next `len` floats of every rank's block, packed rank by
     * rank into a staging buffer of at most a chunk. */
    const size_t p = (size_t)c->size, nb = n / p;
    size_t step = pt_comm_chunk_elems(c, sizeof(float)) / p;
    if (step < 1) step = 1;
    int stack_counts[64], *counts = stack_counts;
    float *stage = NULL;
    if (p > 64 && !(counts = malloc(p * sizeof *counts)))
        return pt_fail(PT_ENOMEM, "reduce_scatter over %d ranks: out of memory for the counts", c->size);
    if (step < nb && !(stage = malloc(p * step * sizeof *stage))) {
        if (counts != stack_counts) free(counts);
        return pt_fail(PT_ENOMEM, "reduce_scatter of %zu floats: out of memory for a %zu-byte staging buffer", n,
                       p * step * sizeof *stage);
    }
    int rc = MPI_SUCCESS;
    for (size_t off = 0; off < nb && rc == MPI_SUCCESS; off += step) {
        const size_t len = nb - off < step ? nb - off : step;
        const float *src = in;
        if (stage) {
            for (size_t r = 0; r < p; r++) memcpy(stage + r * len, in + r * nb + off, len * sizeof *stage);
            src = stage;
        }
        for (size_t r = 0; r < p; r++) counts[r] = (int)len;
        rc = MPI_Reduce_scatter(src, out + off, counts, MPI_FLOAT, MPI_SUM, c->comm);
    }
    free(stage);
    if (counts != stack_counts) free(counts);
    if (rc != MPI_SUCCESS) return pt_comm_mpi_fail(rc, "reduce_scatter", c);
    pt_comm_count(c, PT_COLL_REDUCE_SCATTER, n * 4, pt_comm_ring(n * 4, c->size, 1));
    return PT_OK;
}

int pt_allgather(pt_comm *c, const float *in, float *out, size_t n)
{
    if (c->dev && c->dev->vt->owns(c, in)) return c->dev->vt->allgather(c, in, out, n, PT_COMM_F32);
    if (n % (size_t)c->size)
        return pt_fail(PT_EINVAL, "allgather of %zu floats over %d ranks: count must be a multiple of the group size", n, c->size);
    if (c->size == 1) { memmove(out, in, n * sizeof(float)); return PT_OK; }
    int rc = MPI_Allgather(in, (int)(n / c->size), MPI_FLOAT, out, (int)(n / c->size), MPI_FLOAT, c->comm);
    if (rc != MPI_SUCCESS) return pt_comm_mpi_fail(rc, "allgather", c);
    pt_comm_count(c, PT_COLL_ALLGATHER, n * 4, pt_comm_ring(n * 4, c->size, 1));
    return PT_OK;
}

int pt_broadcast(pt_comm *c, float *buf, size_t n, int root)
{
    if (c->dev && c->dev->vt->owns(c, buf)) return c->dev->vt->broadcast(c, buf, n, PT_COMM_F32, root);
    if (c->size == 1 || n == 0) return PT_OK;
    int rc = MPI_Bcast(buf, (int)n, MPI_FLOAT, root, c->comm);
    if (rc != MPI_SUCCESS) return pt_comm_mpi_fail(rc, "broadcast", c);
    pt_comm_count(c, PT_COLL_BROADCAST, n * 4, pt_comm_ring(n * 4, c->size, 1));
    return PT_OK;
}

int pt_reduce_sum(pt_comm *c, float *buf, size_t n, int root)
{
    if (c->dev && c->dev->vt->owns(c, buf)) return c->dev->vt->reduce(c, buf, n, PT_COMM_F32, root);
    if (c->size == 1 || n == 0) return PT_OK;
    const size_t step = pt_comm_chunk_elems(c, sizeof(float));
    for (size_t off = 0; off < n; off += step) {
        const size_t len = n - off < step ? n - off : step;
        int rc = MPI_Reduce(c->rank == root ? MPI_IN_PLACE : buf + off, buf + off, (int)len, MPI_FLOAT, MPI_SUM,
                            root, c->comm);
        if (rc != MPI_SUCCESS) return pt_comm_mpi_fail(rc, "reduce", c);
    }
    pt_comm_count(c, PT_COLL_REDUCE, n * 4, pt_comm_ring(n * 4, c->size, 1));
    return PT_OK;
}

int pt_sendrecv(pt_comm *c, const float *sbuf, int dst, float *rbuf, int src, size_t n, int tag)
{
    if (c->dev && c->dev->vt->owns(c, sbuf)) return c->dev->vt->sendrecv(c, sbuf, dst, rbuf, src, n, PT_COMM_F32, tag);
    if (n == 0) return PT_OK;
    int rc = MPI_Sendrecv(sbuf, (int)n, MPI_FLOAT, dst, tag, rbuf, (int)n, MPI_FLOAT, src, tag, c->comm,
                          MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) return pt_comm_mpi_fail(rc, "sendrecv", c);
    pt_comm_count(c, PT_COLL_SEND, n * 4, n * 4);
    pt_comm_count(c, PT_COLL_RECV, n * 4, 0);
    return PT_OK;
}

int pt_send(pt_comm *c, const float *buf, size_t n, int dst, int tag)
{
    if (c->dev && c->dev->vt->owns(c, buf)) return c->dev->vt->send(c, buf, n, PT_COMM_F32, dst, tag);
    int rc = MPI_Send(buf, (int)n, MPI_FLOAT, dst, tag, c->comm);
    if (rc != MPI_SUCCESS) return pt_comm_mpi_fail(rc, "send", c);
    pt_comm_count(c, PT_COLL_SEND, n * 4, n * 4);
    return PT_OK;
}

int pt_recv(pt_comm *c, float *buf, size_t n, int src, int tag)
{
    if (c->dev && c->dev->vt->owns(c, buf)) return c->dev->vt->recv(c, buf, n, PT_COMM_F32, src, tag);
    int rc = MPI_Recv(buf, (int)n, MPI_FLOAT, src, tag, c->comm, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) return pt_comm_mpi_fail(rc, "recv", c);
    pt_comm_count(c, PT_COLL_RECV, n * 4, 0);
    return PT_OK;
}

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
