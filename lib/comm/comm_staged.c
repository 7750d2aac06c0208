/* SPDX-License-Identifier: MIT */
/* The mpi_staged transport (comm_priv.h): device buffers staged through
 * host memory over MPI, for groups NCCL cannot serve (several ranks on one
 * GPU) or when asked for (PT_COMM_DEV_STAGED).  Every call is one plan for
 * one chunk loop (run below): per chunk, copy the device blocks this rank
 * contributes to the staging memory, make one MPI call there, copy the
 * blocks it receives back to the device.  The chunks are the mpi_host
 * transport's (comm_mpi.c), so a staged collective makes the same MPI
 * calls on the same data as the host one and gets the same bits.  The
 * device is reached through the group's mover only (struct pt_comm_dev's
 * mv: lib/backend's pt_backend_dev, or a test's). */
#include "comm/comm_dev.h"
#include "comm/comm_priv.h"
#include "backend/ops.h"
#include "core/core.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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

/* One staged call.  The device data are `blocks` blocks of nb elements
 * (block b at element b * nb); a chunk is the same range [off, off + len)
 * of each.  Per chunk: nin blocks of src go to the host at `in` (packed,
 * len apart), call runs, nout blocks at `out` go to dst.  out is in itself
 * (inplace) or follows the nin blocks. */
typedef struct plan {
    const char *what;   /* for errors: "allreduce (staged)" */
    int (*call)(pt_comm *c, const struct plan *s, void *in, void *out, size_t len); /* an MPI return code */
    const void *src;
    void *dst;
    size_t nb;          /* elements per block */
    size_t blocks;      /* blocks per chunk: the chunk's elements are shared by them */
    size_t nin, nout;   /* blocks copied in / out this rank (0, 1 or blocks) */
    int inplace;
    int elem, op, root, dst_rank, src_rank, tag;
    int *counts;        /* reduce_scatter: blocks counts */
} plan;

static int run(pt_comm *c, const plan *s)
{
    struct pt_comm_dev *d = c->dev;
    const size_t es = pt_comm_elem_size(s->elem);
    if (s->nb == 0) return PT_OK;
    size_t step = pt_comm_chunk_elems(c, es) / s->blocks;
    if (step < 1) step = 1;
    const size_t len0 = s->nb < step ? s->nb : step;
    const size_t nin = s->nin, nout = s->nout;
    const size_t room = s->inplace ? (nin > nout ? nin : nout) : nin + nout;
    char *st = stage(c, (room ? room : 1) * len0 * es);
    if (!st) return PT_ENOMEM;
    for (size_t off = 0; off < s->nb; off += step) {
        const size_t len = s->nb - off < step ? s->nb - off : step, bytes = len * es;
        char *in = st, *out = s->inplace ? st : st + nin * bytes;
        for (size_t b = 0; b < nin; b++) {
            int rc = d->mv->to_host(in + b * bytes, (const char *)s->src + (b * s->nb + off) * es, bytes);
            if (rc != PT_OK) return rc;
        }
        int mrc = s->call(c, s, in, out, len);
        if (mrc != MPI_SUCCESS) return pt_comm_mpi_fail(mrc, s->what, c);
        for (size_t b = 0; b < nout; b++) {
            int rc = d->mv->to_device((char *)s->dst + (b * s->nb + off) * es, out + b * bytes, bytes);
            if (rc != PT_OK) return rc;
        }
    }
    return PT_OK;
}

/* the MPI call of each kind on one chunk of len elements per block */
static int call_allreduce(pt_comm *c, const plan *s, void *in, void *out, size_t len)
{
    (void)out;
    return MPI_Allreduce(MPI_IN_PLACE, in, (int)len, pt_comm_mpi_type(s->elem), pt_comm_mpi_op(s->elem, s->op), c->comm);
}
static int call_reduce_scatter(pt_comm *c, const plan *s, void *in, void *out, size_t len)
{
    for (int r = 0; r < c->size; r++) s->counts[r] = (int)len;
    return MPI_Reduce_scatter(in, out, s->counts, pt_comm_mpi_type(s->elem), pt_comm_mpi_op(s->elem, PT_COMM_SUM),
                              c->comm);
}
static int call_allgather(pt_comm *c, const plan *s, void *in, void *out, size_t len)
{
    const MPI_Datatype t = pt_comm_mpi_type(s->elem);
    return MPI_Allgather(in, (int)len, t, out, (int)len, t, c->comm);
}
static int call_bcast(pt_comm *c, const plan *s, void *in, void *out, size_t len)
{
    (void)out;
    return MPI_Bcast(in, (int)len, pt_comm_mpi_type(s->elem), s->root, c->comm);
}
static int call_reduce(pt_comm *c, const plan *s, void *in, void *out, size_t len)
{
    (void)out;
    return MPI_Reduce(c->rank == s->root ? MPI_IN_PLACE : in, in, (int)len, pt_comm_mpi_type(s->elem),
                      pt_comm_mpi_op(s->elem, PT_COMM_SUM), s->root, c->comm);
}
static int call_send(pt_comm *c, const plan *s, void *in, void *out, size_t len)
{
    (void)out;
    return MPI_Send(in, (int)len, pt_comm_mpi_type(s->elem), s->dst_rank, s->tag, c->comm);
}
static int call_recv(pt_comm *c, const plan *s, void *in, void *out, size_t len)
{
    (void)in;
    return MPI_Recv(out, (int)len, pt_comm_mpi_type(s->elem), s->src_rank, s->tag, c->comm, MPI_STATUS_IGNORE);
}
static int call_sendrecv(pt_comm *c, const plan *s, void *in, void *out, size_t len)
{
    const MPI_Datatype t = pt_comm_mpi_type(s->elem);
    return MPI_Sendrecv(in, (int)len, t, s->dst_rank, s->tag, out, (int)len, t, s->src_rank, s->tag, c->comm,
                        MPI_STATUS_IGNORE);
}

/* ---- the eight calls: one plan each ------------------------------------------------------------ */

static int st_allreduce(pt_comm *c, void *buf, size_t n, int elem, int op)
{
    plan s = {.what = op == PT_COMM_MAX ? "allreduce(max) (staged)" : "allreduce (staged)", .call = call_allreduce,
              .src = buf, .dst = buf, .nb = n, .blocks = 1, .nin = 1, .nout = 1, .inplace = 1, .elem = elem, .op = op};
    return run(c, &s);
}

static int st_reduce_scatter(pt_comm *c, const void *in, void *out, size_t n, int elem)
{
    if (c->size == 1) return c->dev->mv->copy(out, in, n * pt_comm_elem_size(elem));
    /* as mpi_host: each call takes the next len elements of every rank's
     * block, packed rank by rank, and receives its own len */
    const size_t p = (size_t)c->size;
    int stack_counts[64], *counts = stack_counts;
    if (p > 64 && !(counts = malloc(p * sizeof *counts)))
        return pt_fail(PT_ENOMEM, "reduce_scatter over %d ranks: out of memory for the counts", c->size);
    plan s = {.what = "reduce_scatter (staged)", .call = call_reduce_scatter, .src = in, .dst = out, .nb = n / p,
              .blocks = p, .nin = p, .nout = 1, .elem = elem, .counts = counts};
    int rc = run(c, &s);
    if (counts != stack_counts) free(counts);
    return rc;
}

static int st_allgather(pt_comm *c, const void *in, void *out, size_t n, int elem)
{
    if (c->size == 1) return c->dev->mv->copy(out, in, n * pt_comm_elem_size(elem));
    const size_t p = (size_t)c->size;
    plan s = {.what = "allgather (staged)", .call = call_allgather, .src = in, .dst = out, .nb = n / p, .blocks = p,
              .nin = 1, .nout = p, .elem = elem};
    return run(c, &s);
}

static int st_bcast(pt_comm *c, void *buf, size_t n, int elem, int root)
{
    const int me = c->rank == root;
    plan s = {.what = "broadcast (staged)", .call = call_bcast, .src = buf, .dst = buf, .nb = n, .blocks = 1,
              .nin = (size_t)me, .nout = (size_t)!me, .inplace = 1, .elem = elem, .root = root};
    return run(c, &s);
}

static int st_reduce(pt_comm *c, void *buf, size_t n, int elem, int root)
{
    plan s = {.what = "reduce (staged)", .call = call_reduce, .src = buf, .dst = buf, .nb = n, .blocks = 1, .nin = 1,
              .nout = (size_t)(c->rank == root), .inplace = 1, .elem = elem, .root = root};
    return run(c, &s);
}

/* ---- point to point, and the group queue ------------------------------------------------------- */

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

static int st_send(pt_comm *c, const void *buf, size_t n, int elem, int dst, int tag)
{
    if (c->dev->in_group) return enqueue(c, 1, buf, n, elem, dst, tag);
    plan s = {.what = "send (staged)", .call = call_send, .src = buf, .nb = n, .blocks = 1, .nin = 1, .elem = elem,
              .dst_rank = dst, .tag = tag};
    return run(c, &s);
}

static int st_recv(pt_comm *c, void *buf, size_t n, int elem, int src, int tag)
{
    if (c->dev->in_group) return enqueue(c, 0, buf, n, elem, src, tag);
    plan s = {.what = "recv (staged)", .call = call_recv, .dst = buf, .nb = n, .blocks = 1, .nout = 1, .elem = elem,
              .src_rank = src, .tag = tag};
    return run(c, &s);
}

static int st_sendrecv(pt_comm *c, const void *sbuf, int dst, void *rbuf, int src, size_t n, int elem, int tag)
{
    if (c->dev->in_group) {
        int rc = enqueue(c, 1, sbuf, n, elem, dst, tag);
        return rc != PT_OK ? rc : enqueue(c, 0, rbuf, n, elem, src, tag);
    }
    plan s = {.what = "sendrecv (staged)", .call = call_sendrecv, .src = sbuf, .dst = rbuf, .nb = n, .blocks = 1,
              .nin = 1, .nout = 1, .elem = elem, .dst_rank = dst, .src_rank = src, .tag = tag};
    return run(c, &s);
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

/* start: nothing yet (the calls queue themselves while in_group); end: the queue */
static int st_group(pt_comm *c, int start) { return start ? PT_OK : run_queue(c); }

/* every staged call has finished when it returns */
static int st_wait(pt_comm *c)
{
    (void)c;
    return PT_OK;
}

const pt_transport pt_transport_mpi_staged = {
    .name = "mpi_staged",
    .allreduce = st_allreduce,
    .reduce_scatter = st_reduce_scatter,
    .allgather = st_allgather,
    .bcast = st_bcast,
    .reduce = st_reduce,
    .send = st_send,
    .recv = st_recv,
    .sendrecv = st_sendrecv,
    .group = st_group,
    .wait = st_wait,
};
