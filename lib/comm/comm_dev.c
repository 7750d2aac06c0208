/* SPDX-License-Identifier: MIT */
/* The device path of a pt_comm (comm.h "Device buffers", comm_dev.h):
 * the choice between NCCL and staging, staging through host memory over
 * MPI, the group queue, and the bf16 MPI operations.  No CUDA header: the
 * device is reached through lib/backend/cuda/cuda.h, NCCL through
 * comm_nccl.c. */
#include "config.h"
#include "comm/comm_dev.h"
#include "comm/comm_priv.h"
#include "backend/ops.h"
#include "core/core.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- element types ----------------------------------------------------------------- */

size_t pt_comm_elem_size(int elem)
{
    return pt_dtype_size((pt_dtype)elem);
}

/* bf16 <-> fp32: lib/core's pt_bf16_to_f32 / pt_f32_to_bf16 (round to
 * nearest even, NaN kept NaN), the pair every bf16 path uses. */
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

/* ---- the choice ------------------------------------------------------------------------ */

int pt_comm_dev_choose(const unsigned char *uuid, int n, int have_nccl, int mode, char *why, size_t len)
{
    if (len) why[0] = '\0';
    if (mode == PT_COMM_DEV_STAGED) return PT_COMM_DEV_STAGED;
    int a = -1, b = -1;
    for (int i = 0; i < n && a < 0; i++)
        for (int j = i + 1; j < n; j++)
            if (memcmp(uuid + 16 * (size_t)i, uuid + 16 * (size_t)j, 16) == 0) {
                a = i, b = j;
                break;
            }
    if (mode == PT_COMM_DEV_NCCL) {
        if (!have_nccl) {
            snprintf(why, len, "NCCL was asked for, but this build has no NCCL (configure found no nccl.h and libnccl)");
            return -1;
        }
        if (a >= 0) {
            snprintf(why, len, "NCCL was asked for, but ranks %d and %d of the group share one GPU (NCCL needs a GPU "
                     "per rank; staging through host memory serves shared GPUs)", a, b);
            return -1;
        }
        return PT_COMM_DEV_NCCL;
    }
    return n > 1 && have_nccl && a < 0 ? PT_COMM_DEV_NCCL : PT_COMM_DEV_STAGED;
}

/* ---- movers -------------------------------------------------------------------------------- */

static int host_is_device(const void *p) { return p != NULL; }
static int host_move(void *dst, const void *src, size_t bytes)
{
    if (bytes) memmove(dst, src, bytes);
    return PT_OK;
}
static void *host_alloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p) pt_fail(PT_ENOMEM, "out of memory for %zu bytes of staging memory", bytes);
    return p;
}

/* the tests' (staging only: the stream and identity hooks are the device's) */
static const pt_backend_dev host_mover = {.is_device_ptr = host_is_device, .to_host = host_move,
                                          .to_device = host_move, .copy = host_move,
                                          .host_alloc = host_alloc, .host_free = free};
/* the device's: the CUDA backend's table (ops.h's pt_backend_dev), no CUDA header here */
#define DEV (pt_cuda_backend.dev)

/* ---- helpers ------------------------------------------------------------------------------------ */

static int bad_elem(const pt_comm *c, const char *what, int elem)
{
    return pt_fail(PT_EINVAL, "%s on group '%s': element type %d is not valid (valid: %d fp32, %d bf16, %d fp64)", what,
                   c->name, elem, PT_COMM_F32, PT_COMM_BF16, PT_COMM_F64);
}

/* staging memory of at least `bytes`; NULL (message set) when it cannot be had */
static char *stage(pt_comm *c, size_t bytes)
{
    struct pt_comm_dev *d = c->dev;
    if (d->stage_bytes >= bytes) return d->stage;
    d->mv->host_free(d->stage);
    d->stage = NULL;
    d->stage_bytes = 0;
    void *p = d->mv->host_alloc(bytes);
    if (!p) {
        pt_fail(PT_ENOMEM, "group '%s': no %zu bytes of staging memory: %s", c->name, bytes, pt_errmsg());
        return NULL;
    }
    d->stage = p;
    d->stage_bytes = bytes;
    return p;
}

#define MPI_TRY(call, what)                                          \
    do {                                                             \
        int mrc_ = (call);                                           \
        if (mrc_ != MPI_SUCCESS) return pt_comm_mpi_fail(mrc_, what, c); \
    } while (0)
#define TRY(call)                     \
    do {                              \
        int rc_ = (call);             \
        if (rc_ != PT_OK) return rc_; \
    } while (0)

#ifdef HAVE_NCCL
/* NCCL: the communication stream after the compute stream's queued work
 * (a group orders itself at its end) ... */
static int nccl_before(pt_comm *c) { return c->dev->in_group ? PT_OK : DEV->comm_after_compute(); }
/* ... and the compute stream after the call, unless it overlaps */
static int nccl_after(pt_comm *c, int rc)
{
    if (rc != PT_OK || c->dev->in_group || c->dev->overlap) return rc;
    return DEV->compute_after_comm();
}

#else
static int no_nccl(const pt_comm *c)
{
    return pt_fail(PT_EUNSUPP, "group '%s': the NCCL path without NCCL in this build", c->name);
}
#endif

/* ---- collectives ------------------------------------------------------------------------------ */

static int dev_owns(const pt_comm *c, const void *buf) { return c->dev && c->dev->mv->is_device_ptr(buf); }

int pt_comm_dev_allreduce(pt_comm *c, void *buf, size_t n, int elem, int op)
{
    const size_t es = pt_comm_elem_size(elem);
    if (!es) return bad_elem(c, "allreduce", elem);
    if (op != PT_COMM_SUM && op != PT_COMM_MAX)
        return pt_fail(PT_EINVAL, "allreduce on group '%s': reduction %d is not valid (valid: %d sum, %d max)", c->name,
                       op, PT_COMM_SUM, PT_COMM_MAX);
    if (c->size == 1 || n == 0) return PT_OK;
    struct pt_comm_dev *d = c->dev;
    if (d->path == PT_COMM_DEV_NCCL) {
#ifdef HAVE_NCCL
        int rc = nccl_before(c);
        if (rc == PT_OK) rc = pt_nccl_allreduce(c, d->nccl, buf, buf, n, elem, op);
        TRY(nccl_after(c, rc));
#else
        return no_nccl(c);
#endif
    } else {
        const size_t step = pt_comm_chunk_elems(c, es);
        char *st = stage(c, (n < step ? n : step) * es), *b = buf;
        if (!st) return PT_ENOMEM;
        for (size_t off = 0; off < n; off += step) {
            const size_t len = n - off < step ? n - off : step;
            TRY(d->mv->to_host(st, b + off * es, len * es));
            MPI_TRY(MPI_Allreduce(MPI_IN_PLACE, st, (int)len, pt_comm_mpi_type(elem), pt_comm_mpi_op(elem, op), c->comm),
                    op == PT_COMM_SUM ? "allreduce (staged)" : "allreduce(max) (staged)");
            TRY(d->mv->to_device(b + off * es, st, len * es));
        }
    }
    pt_comm_count(c, PT_COLL_ALLREDUCE, n * es, pt_comm_ring(n * es, c->size, 2));
    return PT_OK;
}

int pt_comm_dev_reduce_scatter(pt_comm *c, const void *in, void *out, size_t n, int elem)
{
    const size_t es = pt_comm_elem_size(elem);
    if (!es) return bad_elem(c, "reduce_scatter", elem);
    if (n % (size_t)c->size)
        return pt_fail(PT_EINVAL, "reduce_scatter of %zu elements over %d ranks: count must be a multiple of the group size",
                       n, c->size);
    struct pt_comm_dev *d = c->dev;
    if (c->size == 1) return d->mv->copy(out, in, n * es);
    const size_t p = (size_t)c->size, nb = n / p;
    if (d->path == PT_COMM_DEV_NCCL) {
#ifdef HAVE_NCCL
        int rc = nccl_before(c);
        if (rc == PT_OK) rc = pt_nccl_reduce_scatter(c, d->nccl, in, out, nb, elem);
        TRY(nccl_after(c, rc));
#else
        return no_nccl(c);
#endif
    } else if (nb) {
        /* as the host path: each call takes the next len elements of every
         * rank's block, packed rank by rank, and receives its own len */
        size_t step = pt_comm_chunk_elems(c, es) / p;
        if (step < 1) step = 1;
        const size_t len0 = nb < step ? nb : step;
        char *st = stage(c, (p + 1) * len0 * es);
        if (!st) return PT_ENOMEM;
        int stack_counts[64], *counts = stack_counts;
        if (p > 64 && !(counts = malloc(p * sizeof *counts)))
            return pt_fail(PT_ENOMEM, "reduce_scatter over %d ranks: out of memory for the counts", c->size);
        int rc = PT_OK;
        for (size_t off = 0; off < nb && rc == PT_OK; off += step) {
            const size_t len = nb - off < step ? nb - off : step;
            char *sout = st + p * len * es;
            for (size_t r = 0; r < p && rc == PT_OK; r++)
                rc = d->mv->to_host(st + r * len * es, (const char *)in + (r * nb + off) * es, len * es);
            if (rc != PT_OK) break;
            for (size_t r = 0; r < p; r++) counts[r] = (int)len;
            int mrc = MPI_Reduce_scatter(st, sout, counts, pt_comm_mpi_type(elem), pt_comm_mpi_op(elem, PT_COMM_SUM),
                                         c->comm);
            if (mrc != MPI_SUCCESS) rc = pt_comm_mpi_fail(mrc, "reduce_scatter (staged)", c);
            if (rc == PT_OK) rc = d->mv->to_device((char *)out + off * es, sout, len * es);
        }
        if (counts != stack_counts) free(counts);
        TRY(rc);
    }
    pt_comm_count(c, PT_COLL_REDUCE_SCATTER, n * es, pt_comm_ring(n * es, c->size, 1));
    return PT_OK;
}

int pt_comm_dev_allgather(pt_comm *c, const void *in, void *out, size_t n, int elem)
{
    const size_t es = pt_comm_elem_size(elem);
    if (!es) return bad_elem(c, "allgather", elem);
    if (n % (size_t)c->size)
        return pt_fail(PT_EINVAL, "allgather of %zu elements over %d ranks: count must be a multiple of the group size", n,
                       c->size);
    struct pt_comm_dev *d = c->dev;
    if (c->size == 1) return d->mv->copy(out, in, n * es);
    const size_t p = (size_t)c->size, nb = n / p;
    if (d->path == PT_COMM_DEV_NCCL) {
#ifdef HAVE_NCCL
        int rc = nccl_before(c);
        if (rc == PT_OK) rc = pt_nccl_allgather(c, d->nccl, in, out, nb, elem);
        TRY(nccl_after(c, rc));
#else
        return no_nccl(c);
#endif
    } else if (nb) {
        size_t step = pt_comm_chunk_elems(c, es) / p;
        if (step < 1) step = 1;
        const size_t len0 = nb < step ? nb : step;
        char *st = stage(c, (p + 1) * len0 * es);
        if (!st) return PT_ENOMEM;
        for (size_t off = 0; off < nb; off += step) {
            const size_t len = nb - off < step ? nb - off : step;
            char *sout = st + len * es;
            TRY(d->mv->to_host(st, (const char *)in + off * es, len * es));
            MPI_TRY(MPI_Allgather(st, (int)len, pt_comm_mpi_type(elem), sout, (int)len, pt_comm_mpi_type(elem), c->comm),
                    "allgather (staged)");
            for (size_t r = 0; r < p; r++)
                TRY(d->mv->to_device((char *)out + (r * nb + off) * es, sout + r * len * es, len * es));
        }
    }
    pt_comm_count(c, PT_COLL_ALLGATHER, n * es, pt_comm_ring(n * es, c->size, 1));
    return PT_OK;
}

int pt_comm_dev_broadcast(pt_comm *c, void *buf, size_t n, int elem, int root)
{
    const size_t es = pt_comm_elem_size(elem);
    if (!es) return bad_elem(c, "broadcast", elem);
    if (c->size == 1 || n == 0) return PT_OK;
    struct pt_comm_dev *d = c->dev;
    if (d->path == PT_COMM_DEV_NCCL) {
#ifdef HAVE_NCCL
        int rc = nccl_before(c);
        if (rc == PT_OK) rc = pt_nccl_broadcast(c, d->nccl, buf, n, elem, root);
        TRY(nccl_after(c, rc));
#else
        return no_nccl(c);
#endif
    } else {
        const size_t step = pt_comm_chunk_elems(c, es);
        char *st = stage(c, (n < step ? n : step) * es), *b = buf;
        if (!st) return PT_ENOMEM;
        for (size_t off = 0; off < n; off += step) {
            const size_t len = n - off < step ? n - off : step;
            if (c->rank == root) TRY(d->mv->to_host(st, b + off * es, len * es));
            MPI_TRY(MPI_Bcast(st, (int)len, pt_comm_mpi_type(elem), root, c->comm), "broadcast (staged)");
            if (c->rank != root) TRY(d->mv->to_device(b + off * es, st, len * es));
        }
    }
    pt_comm_count(c, PT_COLL_BROADCAST, n * es, pt_comm_ring(n * es, c->size, 1));
    return PT_OK;
}

int pt_comm_dev_reduce(pt_comm *c, void *buf, size_t n, int elem, int root)
{
    const size_t es = pt_comm_elem_size(elem);
    if (!es) return bad_elem(c, "reduce", elem);
    if (c->size == 1 || n == 0) return PT_OK;
    struct pt_comm_dev *d = c->dev;
    if (d->path == PT_COMM_DEV_NCCL) {
#ifdef HAVE_NCCL
        int rc = nccl_before(c);
        if (rc == PT_OK) rc = pt_nccl_reduce(c, d->nccl, buf, n, elem, root);
        TRY(nccl_after(c, rc));
#else
        return no_nccl(c);
#endif
    } else {
        const size_t step = pt_comm_chunk_elems(c, es);
        char *st = stage(c, (n < step ? n : step) * es), *b = buf;
        if (!st) return PT_ENOMEM;
        for (size_t off = 0; off < n; off += step) {
            const size_t len = n - off < step ? n - off : step;
            TRY(d->mv->to_host(st, b + off * es, len * es));
            MPI_TRY(MPI_Reduce(c->rank == root ? MPI_IN_PLACE : st, st, (int)len, pt_comm_mpi_type(elem),
                               pt_comm_mpi_op(elem, PT_COMM_SUM), root, c->comm),
                    "reduce (staged)");
            if (c->rank == root) TRY(d->mv->to_device(b + off * es, st, len * es));
        }
    }
    pt_comm_count(c, PT_COLL_REDUCE, n * es, pt_comm_ring(n * es, c->size, 1));
    return PT_OK;
}

/* ---- point to point -------------------------------------------------------------------------- */

static int enqueue(pt_comm *c, int send, const void *buf, size_t n, int elem, int peer, int tag)
{
    struct pt_comm_dev *d = c->dev;
    if (d->nq == d->qcap) {
        size_t ncap = d->qcap ? 2 * d->qcap : 8;
        pt_comm_qop *q = realloc(d->q, ncap * sizeof *q);
        if (!q) return pt_fail(PT_ENOMEM, "group '%s': out of memory queueing %zu sends/receives", c->name, ncap);
        d->q = q;
        d->qcap = ncap;
    }
    d->q[d->nq++] = (pt_comm_qop){send, (void *)(uintptr_t)buf, n, elem, peer, tag};
    return PT_OK;
}

int pt_comm_dev_send(pt_comm *c, const void *buf, size_t n, int elem, int dst, int tag)
{
    const size_t es = pt_comm_elem_size(elem);
    if (!es) return bad_elem(c, "send", elem);
    struct pt_comm_dev *d = c->dev;
    if (d->path == PT_COMM_DEV_NCCL) {
#ifdef HAVE_NCCL
        int rc = nccl_before(c);
        if (rc == PT_OK) rc = pt_nccl_send(c, d->nccl, buf, n, elem, dst);
        TRY(nccl_after(c, rc));
#else
        return no_nccl(c);
#endif
    } else if (d->in_group) {
        TRY(enqueue(c, 1, buf, n, elem, dst, tag));
    } else {
        const size_t step = pt_comm_chunk_elems(c, es);
        char *st = stage(c, (n < step ? n : step) * es);
        if (!st) return PT_ENOMEM;
        for (size_t off = 0; off < n; off += step) {
            const size_t len = n - off < step ? n - off : step;
            TRY(d->mv->to_host(st, (const char *)buf + off * es, len * es));
            MPI_TRY(MPI_Send(st, (int)len, pt_comm_mpi_type(elem), dst, tag, c->comm), "send (staged)");
        }
    }
    pt_comm_count(c, PT_COLL_SEND, n * es, n * es);
    return PT_OK;
}

int pt_comm_dev_recv(pt_comm *c, void *buf, size_t n, int elem, int src, int tag)
{
    const size_t es = pt_comm_elem_size(elem);
    if (!es) return bad_elem(c, "recv", elem);
    struct pt_comm_dev *d = c->dev;
    if (d->path == PT_COMM_DEV_NCCL) {
#ifdef HAVE_NCCL
        int rc = nccl_before(c);
        if (rc == PT_OK) rc = pt_nccl_recv(c, d->nccl, buf, n, elem, src);
        TRY(nccl_after(c, rc));
#else
        return no_nccl(c);
#endif
    } else if (d->in_group) {
        TRY(enqueue(c, 0, buf, n, elem, src, tag));
    } else {
        const size_t step = pt_comm_chunk_elems(c, es);
        char *st = stage(c, (n < step ? n : step) * es);
        if (!st) return PT_ENOMEM;
        for (size_t off = 0; off < n; off += step) {
            const size_t len = n - off < step ? n - off : step;
            MPI_TRY(MPI_Recv(st, (int)len, pt_comm_mpi_type(elem), src, tag, c->comm, MPI_STATUS_IGNORE),
                    "recv (staged)");
            TRY(d->mv->to_device((char *)buf + off * es, st, len * es));
        }
    }
    pt_comm_count(c, PT_COLL_RECV, n * es, 0);
    return PT_OK;
}

int pt_comm_dev_sendrecv(pt_comm *c, const void *sbuf, int dst, void *rbuf, int src, size_t n, int elem, int tag)
{
    const size_t es = pt_comm_elem_size(elem);
    if (!es) return bad_elem(c, "sendrecv", elem);
    if (n == 0) return PT_OK;
    struct pt_comm_dev *d = c->dev;
    if (d->path == PT_COMM_DEV_NCCL) {
#ifdef HAVE_NCCL
        /* a send and a receive in one NCCL group: neither waits for the other */
        int rc = nccl_before(c);
        if (rc == PT_OK) rc = pt_nccl_group(c, 1);
        if (rc == PT_OK) rc = pt_nccl_send(c, d->nccl, sbuf, n, elem, dst);
        if (rc == PT_OK) rc = pt_nccl_recv(c, d->nccl, rbuf, n, elem, src);
        int end = pt_nccl_group(c, 0);
        TRY(nccl_after(c, rc != PT_OK ? rc : end));
#else
        return no_nccl(c);
#endif
    } else if (d->in_group) {
        TRY(enqueue(c, 1, sbuf, n, elem, dst, tag));
        TRY(enqueue(c, 0, rbuf, n, elem, src, tag));
    } else {
        const size_t step = pt_comm_chunk_elems(c, es), len0 = n < step ? n : step;
        char *st = stage(c, 2 * len0 * es);
        if (!st) return PT_ENOMEM;
        for (size_t off = 0; off < n; off += step) {
            const size_t len = n - off < step ? n - off : step;
            char *rs = st + len0 * es;
            TRY(d->mv->to_host(st, (const char *)sbuf + off * es, len * es));
            MPI_TRY(MPI_Sendrecv(st, (int)len, pt_comm_mpi_type(elem), dst, tag, rs, (int)len, pt_comm_mpi_type(elem),
                                 src, tag, c->comm, MPI_STATUS_IGNORE),
                    "sendrecv (staged)");
            TRY(d->mv->to_device((char *)rbuf + off * es, rs, len * es));
        }
    }
    pt_comm_count(c, PT_COLL_SEND, n * es, n * es);
    pt_comm_count(c, PT_COLL_RECV, n * es, 0);
    return PT_OK;
}

/* ---- groups ------------------------------------------------------------------------------------ */

int pt_comm_group_start(pt_comm *c)
{
    if (!c->dev) return PT_OK; /* host buffers: MPI's blocking calls, nothing to group */
    if (c->dev->in_group) return pt_fail(PT_EINVAL, "group '%s': pt_comm_group_start inside a group (groups do not nest)", c->name);
    if (c->dev->path == PT_COMM_DEV_NCCL) {
#ifdef HAVE_NCCL
        TRY(pt_nccl_group(c, 1));
#else
        return no_nccl(c);
#endif
    }
    c->dev->in_group = 1;
    return PT_OK;
}

/* The staged group's queue: every send copied to host memory, all posted
 * as MPI_Isend / MPI_Irecv (in pieces of at most 2^30 elements, matched in
 * order), one MPI_Waitall, every receive copied to the device. */
static int run_queue(pt_comm *c)
{
    struct pt_comm_dev *d = c->dev;
    const size_t piece = (size_t)1 << 30;
    size_t nreq = 0;
    for (size_t i = 0; i < d->nq; i++) nreq += d->q[i].n ? (d->q[i].n + piece - 1) / piece : 0;
    char **hb = calloc(d->nq ? d->nq : 1, sizeof *hb);
    MPI_Request *req = malloc((nreq ? nreq : 1) * sizeof *req);
    int rc = hb && req ? PT_OK : pt_fail(PT_ENOMEM, "group '%s': out of memory for %zu queued transfers", c->name, d->nq);
    for (size_t i = 0; i < d->nq && rc == PT_OK; i++) {
        const pt_comm_qop *o = &d->q[i];
        size_t bytes = o->n * pt_comm_elem_size(o->elem);
        hb[i] = malloc(bytes ? bytes : 1);
        if (!hb[i]) rc = pt_fail(PT_ENOMEM, "group '%s': out of memory staging %zu bytes", c->name, bytes);
        else if (o->send) rc = d->mv->to_host(hb[i], o->buf, bytes);
    }
    size_t posted = 0;
    for (size_t i = 0; i < d->nq && rc == PT_OK; i++) {
        const pt_comm_qop *o = &d->q[i];
        const size_t es = pt_comm_elem_size(o->elem);
        for (size_t off = 0; off < o->n && rc == PT_OK; off += piece) {
            const int len = (int)(o->n - off < piece ? o->n - off : piece);
            int mrc = o->send ? MPI_Isend(hb[i] + off * es, len, pt_comm_mpi_type(o->elem), o->peer, o->tag, c->comm,
                                          &req[posted])
                              : MPI_Irecv(hb[i] + off * es, len, pt_comm_mpi_type(o->elem), o->peer, o->tag, c->comm,
                                          &req[posted]);
            if (mrc != MPI_SUCCESS) rc = pt_comm_mpi_fail(mrc, o->send ? "isend (staged group)" : "irecv (staged group)", c);
            else posted++;
        }
    }
    if (posted) {
        int mrc = MPI_Waitall((int)posted, req, MPI_STATUSES_IGNORE);
        if (mrc != MPI_SUCCESS && rc == PT_OK) rc = pt_comm_mpi_fail(mrc, "waitall (staged group)", c);
    }
    for (size_t i = 0; i < d->nq && rc == PT_OK; i++)
        if (!d->q[i].send) rc = d->mv->to_device(d->q[i].buf, hb[i], d->q[i].n * pt_comm_elem_size(d->q[i].elem));
    for (size_t i = 0; hb && i < d->nq; i++) free(hb[i]);
    free(hb);
    free(req);
    d->nq = 0;
    return rc;
}

int pt_comm_group_end(pt_comm *c)
{
    if (!c->dev) return PT_OK;
    struct pt_comm_dev *d = c->dev;
    if (!d->in_group) return pt_fail(PT_EINVAL, "group '%s': pt_comm_group_end without pt_comm_group_start", c->name);
    d->in_group = 0;
    if (d->path == PT_COMM_DEV_NCCL) {
#ifdef HAVE_NCCL
        /* the queued NCCL calls are enqueued now: order them after the
         * compute stream's work first */
        int rc = DEV->comm_after_compute();
        int end = pt_nccl_group(c, 0);
        return nccl_after(c, rc != PT_OK ? rc : end);
#else
        return no_nccl(c);
#endif
    }
    return run_queue(c);
}

int pt_comm_device_overlap(pt_comm *c, int on)
{
    if (!c->dev) return pt_fail(PT_EINVAL, "group '%s': overlap without a device path (pt_comm_device_enable)", c->name);
    c->dev->overlap = !!on;
    return PT_OK;
}

int pt_comm_device_wait(pt_comm *c)
{
    if (!c->dev) return pt_fail(PT_EINVAL, "group '%s': wait without a device path (pt_comm_device_enable)", c->name);
    return c->dev->path == PT_COMM_DEV_NCCL ? DEV->compute_after_comm() : PT_OK;
}

/* ---- enable / disable -------------------------------------------------------------------------- */

static void dev_disable(pt_comm *c);
static const pt_comm_dev_vt dev_vt = {dev_owns,
                                      pt_comm_dev_allreduce,
                                      pt_comm_dev_reduce_scatter,
                                      pt_comm_dev_allgather,
                                      pt_comm_dev_broadcast,
                                      pt_comm_dev_reduce,
                                      pt_comm_dev_send,
                                      pt_comm_dev_recv,
                                      pt_comm_dev_sendrecv,
                                      dev_disable};

static void dev_disable(pt_comm *c)
{
    struct pt_comm_dev *d = c->dev;
    if (!d) return;
#ifdef HAVE_NCCL
    if (d->nccl) pt_nccl_free(d->nccl);
#endif
    d->mv->host_free(d->stage);
    free(d->q);
    free(d);
    c->dev = NULL;
}

void pt_comm_device_disable(pt_comm *c) { dev_disable(c); }

const char *pt_comm_device_path(const pt_comm *c)
{
    if (!c->dev) return "host";
    return c->dev->path == PT_COMM_DEV_NCCL ? "nccl" : "staged";
}

/* Every member learns whether all succeeded (rc PT_OK); when not, all fail
 * with the lowest failing rank's message, naming it. */
static int agree(pt_comm *c, int rc, const char *what)
{
    int bad = rc != PT_OK ? c->rank : INT_MAX, first = INT_MAX;
    int mrc = MPI_Allreduce(&bad, &first, 1, MPI_INT, MPI_MIN, c->comm);
    if (mrc != MPI_SUCCESS) return pt_comm_mpi_fail(mrc, what, c);
    if (first == INT_MAX) return PT_OK;
    char why[PT_ERROR_LEN] = "";
    if (c->rank == first) snprintf(why, sizeof why, "%s", pt_errmsg());
    int code = rc != PT_OK ? rc : PT_EUNSUPP;
    MPI_Bcast(why, (int)sizeof why, MPI_CHAR, first, c->comm);
    MPI_Bcast(&code, 1, MPI_INT, first, c->comm);
    return pt_fail(code, "group '%s' (size %d): %s: rank %d: %s", c->name, c->size, what, first, why);
}

int pt_comm_device_enable(pt_comm *c, int mode)
{
    if (c->dev) return PT_OK;
    if (mode != PT_COMM_DEV_AUTO && mode != PT_COMM_DEV_NCCL && mode != PT_COMM_DEV_STAGED)
        return pt_fail(PT_EINVAL, "group '%s': device path mode %d is not valid (valid: %d auto, %d nccl, %d staged)",
                       c->name, mode, PT_COMM_DEV_AUTO, PT_COMM_DEV_NCCL, PT_COMM_DEV_STAGED);
    unsigned char mine[16] = {0};
    unsigned char *all = NULL;
    struct pt_comm_dev *d = NULL;
    int rc = pt_cuda_backend.init();
    if (rc == PT_OK) rc = DEV->device_uuid(mine);
    if (rc == PT_OK && (!(all = malloc(16 * (size_t)c->size)) || !(d = calloc(1, sizeof *d))))
        rc = pt_fail(PT_ENOMEM, "out of memory for the device path of %d ranks", c->size);
    rc = agree(c, rc, "device set-up");
    if (rc == PT_OK) {
        int mrc = MPI_Allgather(mine, 16, MPI_BYTE, all, 16, MPI_BYTE, c->comm);
        if (mrc != MPI_SUCCESS) rc = pt_comm_mpi_fail(mrc, "MPI_Allgather(GPU UUIDs)", c);
    }
    char why[PT_ERROR_LEN];
    int path = rc == PT_OK ? pt_comm_dev_choose(all, c->size,
#ifdef HAVE_NCCL
                                                1,
#else
                                                0,
#endif
                                                mode, why, sizeof why)
                           : -1;
    free(all);
    if (rc == PT_OK && path < 0) rc = pt_fail(PT_EUNSUPP, "group '%s' (size %d): %s", c->name, c->size, why);
    if (rc != PT_OK) {
        free(d);
        return rc;
    }
    d->vt = &dev_vt;
    d->mv = DEV;
    d->path = path;
#ifdef HAVE_NCCL
    if (path == PT_COMM_DEV_NCCL) {
        rc = pt_nccl_init(c, &d->nccl); /* agreed: every member returns the same */
        if (rc != PT_OK && mode == PT_COMM_DEV_AUTO) {
            if (c->rank == 0)
                pt_log(0, "warning: %s; the group's device collectives stage through host memory instead", pt_errmsg());
            d->path = PT_COMM_DEV_STAGED;
            d->nccl = NULL;
            rc = PT_OK;
        }
        if (rc != PT_OK) {
            free(d);
            return rc;
        }
    }
#endif
    c->dev = d;
    return PT_OK;
}

int pt_comm_device_enable_host(pt_comm *c)
{
    if (c->dev) return PT_OK;
    struct pt_comm_dev *d = calloc(1, sizeof *d);
    if (!d) return pt_fail(PT_ENOMEM, "out of memory for a device path");
    d->vt = &dev_vt;
    d->mv = &host_mover;
    d->path = PT_COMM_DEV_STAGED;
    c->dev = d;
    return PT_OK;
}
