/* SPDX-License-Identifier: MIT */
/* The device side of a pt_comm (comm.h "Device buffers", comm_dev.h): the
 * choice of path and transport, enabling and releasing it, the group
 * calls, overlap.  The transports themselves are comm_staged.c and
 * comm_nccl.c.  No CUDA header: the device is reached through the CUDA
 * backend's pt_backend_dev (lib/backend/ops.h), NCCL through
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

#ifdef HAVE_NCCL
#define HAVE_NCCL_BUILD 1
#else
#define HAVE_NCCL_BUILD 0
#endif

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

int pt_comm_transport_for(int path, int device)
{
    if (!device) return path == 0 || path == PT_COMM_DEV_NCCL || path == PT_COMM_DEV_STAGED ? PT_TP_MPI_HOST : -1;
    if (path == PT_COMM_DEV_NCCL) return PT_TP_NCCL;
    if (path == PT_COMM_DEV_STAGED) return PT_TP_MPI_STAGED;
    return -1;
}

/* the transport of an enum pt_comm_tp value in this build (NULL: nccl without NCCL) */
static const pt_transport *transport(int tp)
{
    switch (tp) {
    case PT_TP_MPI_HOST: return &pt_transport_mpi_host;
    case PT_TP_MPI_STAGED: return &pt_transport_mpi_staged;
#ifdef HAVE_NCCL
    case PT_TP_NCCL: return &pt_transport_nccl;
#endif
    }
    return NULL;
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

/* ---- the device transport's calls (comm_dev.h) ---------------------------------------------- */

static int no_dev(const pt_comm *c, const char *what)
{
    return pt_fail(PT_EINVAL, "%s on group '%s': no device path (pt_comm_device_enable)", what, c->name);
}

#define DEV_TP(c, what)                             \
    do {                                            \
        if (!(c)->dev) return no_dev((c), (what));  \
    } while (0)

int pt_comm_dev_allreduce(pt_comm *c, void *buf, size_t n, int elem, int op)
{
    DEV_TP(c, "allreduce");
    return pt_comm_run_allreduce(c, c->dev->tp[1], buf, n, elem, op);
}
int pt_comm_dev_reduce_scatter(pt_comm *c, const void *in, void *out, size_t n, int elem)
{
    DEV_TP(c, "reduce_scatter");
    return pt_comm_run_reduce_scatter(c, c->dev->tp[1], in, out, n, elem);
}
int pt_comm_dev_allgather(pt_comm *c, const void *in, void *out, size_t n, int elem)
{
    DEV_TP(c, "allgather");
    return pt_comm_run_allgather(c, c->dev->tp[1], in, out, n, elem);
}
int pt_comm_dev_broadcast(pt_comm *c, void *buf, size_t n, int elem, int root)
{
    DEV_TP(c, "broadcast");
    return pt_comm_run_broadcast(c, c->dev->tp[1], buf, n, elem, root);
}
int pt_comm_dev_reduce(pt_comm *c, void *buf, size_t n, int elem, int root)
{
    DEV_TP(c, "reduce");
    return pt_comm_run_reduce(c, c->dev->tp[1], buf, n, elem, root);
}
int pt_comm_dev_send(pt_comm *c, const void *buf, size_t n, int elem, int dst, int tag)
{
    DEV_TP(c, "send");
    return pt_comm_run_send(c, c->dev->tp[1], buf, n, elem, dst, tag);
}
int pt_comm_dev_recv(pt_comm *c, void *buf, size_t n, int elem, int src, int tag)
{
    DEV_TP(c, "recv");
    return pt_comm_run_recv(c, c->dev->tp[1], buf, n, elem, src, tag);
}
int pt_comm_dev_sendrecv(pt_comm *c, const void *sbuf, int dst, void *rbuf, int src, size_t n, int elem, int tag)
{
    DEV_TP(c, "sendrecv");
    return pt_comm_run_sendrecv(c, c->dev->tp[1], sbuf, dst, rbuf, src, n, elem, tag);
}

/* ---- groups ------------------------------------------------------------------------------------ */

int pt_comm_group_start(pt_comm *c)
{
    if (!c->dev) return PT_OK; /* host buffers: MPI's blocking calls, nothing to group */
    if (c->dev->in_group) return pt_fail(PT_EINVAL, "group '%s': pt_comm_group_start inside a group (groups do not nest)", c->name);
    int rc = c->dev->tp[1]->group(c, 1);
    if (rc == PT_OK) c->dev->in_group = 1;
    return rc;
}

int pt_comm_group_end(pt_comm *c)
{
    if (!c->dev) return PT_OK;
    if (!c->dev->in_group) return pt_fail(PT_EINVAL, "group '%s': pt_comm_group_end without pt_comm_group_start", c->name);
    c->dev->in_group = 0;
    return c->dev->tp[1]->group(c, 0);
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
    return c->dev->tp[1]->wait(c);
}

/* ---- enable / disable -------------------------------------------------------------------------- */

static void dev_disable(pt_comm *c)
{
    struct pt_comm_dev *d = c->dev;
    if (!d) return;
#ifdef HAVE_NCCL
    pt_nccl_release(d->nccl);
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

/* A device side on path `path` with mover mv into *out: its transports
 * picked here, once (pt_comm_transport_for).  PT_OK, PT_EUNSUPP (no such
 * transport in this build), PT_ENOMEM. */
static int dev_new(int path, const pt_backend_dev *mv, struct pt_comm_dev **out)
{
    *out = NULL;
    const pt_transport *h = transport(pt_comm_transport_for(path, 0)), *t = transport(pt_comm_transport_for(path, 1));
    if (!h || !t) return pt_fail(PT_EUNSUPP, "device path %d has no transport in this build", path);
    struct pt_comm_dev *d = calloc(1, sizeof *d);
    if (!d) return pt_fail(PT_ENOMEM, "out of memory for a device path");
    d->tp[0] = h;
    d->tp[1] = t;
    d->disable = dev_disable;
    d->path = path;
    d->mv = mv;
    *out = d;
    return PT_OK;
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
    int rc = pt_cuda_backend.init();
    if (rc == PT_OK) rc = DEV->device_uuid(mine);
    if (rc == PT_OK && !(all = malloc(16 * (size_t)c->size)))
        rc = pt_fail(PT_ENOMEM, "out of memory for the device path of %d ranks", c->size);
    rc = agree(c, rc, "device set-up");
    if (rc == PT_OK) {
        int mrc = MPI_Allgather(mine, 16, MPI_BYTE, all, 16, MPI_BYTE, c->comm);
        if (mrc != MPI_SUCCESS) rc = pt_comm_mpi_fail(mrc, "MPI_Allgather(GPU UUIDs)", c);
    }
    char why[PT_ERROR_LEN];
    int path = rc == PT_OK ? pt_comm_dev_choose(all, c->size, HAVE_NCCL_BUILD, mode, why, sizeof why) : -1;
    free(all);
    if (rc == PT_OK && path < 0) rc = pt_fail(PT_EUNSUPP, "group '%s' (size %d): %s", c->name, c->size, why);
    struct pt_comm_dev *d = NULL;
    if (rc == PT_OK) rc = dev_new(path, DEV, &d);
    rc = agree(c, rc, "device path");
    if (rc != PT_OK) {
        free(d);
        return rc;
    }
#ifdef HAVE_NCCL
    if (path == PT_COMM_DEV_NCCL) {
        rc = pt_nccl_init(c, &d->nccl); /* agreed: every member returns the same */
        if (rc != PT_OK && mode == PT_COMM_DEV_AUTO) {
            if (c->rank == 0)
                pt_log(0, "warning: %s; the group's device collectives stage through host memory instead", pt_errmsg());
            d->path = PT_COMM_DEV_STAGED;
            d->tp[1] = transport(pt_comm_transport_for(PT_COMM_DEV_STAGED, 1));
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

int pt_comm_device_enable_mover(pt_comm *c, const pt_backend_dev *mv)
{
    if (c->dev) return PT_OK;
    struct pt_comm_dev *d = NULL;
    int rc = dev_new(PT_COMM_DEV_STAGED, mv, &d);
    if (rc == PT_OK) c->dev = d;
    return rc;
}

int pt_comm_device_enable_host(pt_comm *c) { return pt_comm_device_enable_mover(c, &host_mover); }
