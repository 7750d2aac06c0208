/* SPDX-License-Identifier: MIT */
/* ptrain topology: MPI ping-pong and allreduce probes. */
#define _GNU_SOURCE /* sched_getaffinity, CPU_* */
#include "topo/probe_mpi.h"
#include "comm/comm.h"
#include "core/core.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

pt_probe_mpi_opts pt_probe_mpi_defaults(int quick)
{
    pt_probe_mpi_opts o;
    if (quick) {
        o.msg_bytes = 64 << 10; o.ar_bytes = 256 << 10; o.fit_bytes = 4 << 20;
        o.lat_iters = 50; o.bw_iters = 5; o.ar_iters = 5; o.fit_iters = 3;
    } else {
        o.msg_bytes = 4 << 20; o.ar_bytes = 16 << 20; o.fit_bytes = 1 << 20;
        o.lat_iters = 1000; o.bw_iters = 20; o.ar_iters = 20; o.fit_iters = 20;
    }
    o.pair_bytes = 32 << 10;
    o.pair_iters = quick ? 20 : 40;
    o.coll_bytes[0] = quick ? 256 << 10 : 1 << 20;
    o.coll_bytes[1] = quick ? 2 << 20 : 16 << 20;
    o.coll_iters = quick ? 3 : 10;
    return o;
}

/* iters calls of MPI_Allreduce (float sum) of n floats from in to out
 * over comm: PT_OK, or PT_ECOMM at the first that fails. */
static int allreduces(MPI_Comm comm, float *in, float *out, size_t n, int iters)
{
    for (int i = 0; i < iters; i++)
        if (MPI_Allreduce(in, out, (int)n, MPI_FLOAT, MPI_SUM, comm) != MPI_SUCCESS)
            return pt_fail(PT_ECOMM, "MPI probe: MPI_Allreduce of %zu bytes failed", n * 4);
    return PT_OK;
}

/* Time per MPI_Allreduce (float sum) of `bytes` inside pairs (pair comm:
 * ranks 2i and 2i+1) of the first `npairs` pairs, while every other rank
 * computes (a spin loop polling an MPI_Ibarrier) until they are done: the
 * slowest pair's mean over iters (seconds) in *t, on every rank. */
static int time_pairs(MPI_Comm comm, MPI_Comm pair, int me, int npairs, float *in, float *out, size_t bytes,
                      int iters, double *t)
{
    const int talk = pair != MPI_COMM_NULL && me / 2 < npairs;
    int rc = PT_OK;
    double dt = 0;
    MPI_Barrier(comm);
    if (talk) {
        rc = allreduces(pair, in, out, bytes / 4, 1); /* warm-up */
        double t0 = MPI_Wtime();
        if (!rc) rc = allreduces(pair, in, out, bytes / 4, iters);
        dt = (MPI_Wtime() - t0) / iters;
    }
    MPI_Request done_rq;
    MPI_Ibarrier(comm, &done_rq);
    if (talk) {
        MPI_Wait(&done_rq, MPI_STATUS_IGNORE);
    } else { /* compute until every pair is done */
        volatile double s = 0;
        for (int done = 0; !done; MPI_Test(&done_rq, &done, MPI_STATUS_IGNORE))
            for (int i = 0; i < 20000; i++) s += i * 1e-9;
    }
    *t = 0;
    MPI_Allreduce(&dt, t, 1, MPI_DOUBLE, MPI_MAX, comm);
    return rc;
}

/* Pin the calling rank to one CPU of its affinity mask when the node's
 * ranks (shm, this rank's index local of nlocal) outnumber the mask's
 * CPUs: local rank i takes the mask's (i mod ncpu)-th CPU, so that ranks
 * 2i and 2i+1 sit on different CPUs, each beside ranks of other pairs.
 * The old mask goes to *saved and *pinned says whether it changed. */
static void pin_shared(int local, int nlocal, cpu_set_t *saved, int *pinned)
{
    *pinned = 0;
    if (sched_getaffinity(0, sizeof *saved, saved) != 0) return;
    const int ncpu = CPU_COUNT(saved);
    if (ncpu < 2 || nlocal <= ncpu) return;
    int want = local % ncpu;
    for (int c = 0; c < CPU_SETSIZE; c++) {
        if (!CPU_ISSET(c, saved) || want--) continue;
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(c, &one);
        *pinned = sched_setaffinity(0, sizeof one, &one) == 0;
        return;
    }
}

/* MPI_Allreduce (float sum) of `bytes` from in to out over comm, after
 * one warm-up: the slowest rank's mean time per call (seconds) in *t, and
 * whether some rank's result differs from the closed-form sum (every rank
 * contributes (rank + 1) * (i % 7 + 1), exact in float for small p). */
static int time_allreduce(MPI_Comm comm, int me, int p, float *in, float *out, size_t bytes, int iters, double *t)
{
    size_t n = bytes / 4;
    for (size_t i = 0; i < n; i++) in[i] = (float)((me + 1) * (int)(i % 7 + 1));
    int rc = allreduces(comm, in, out, n, 1); /* warm-up */
    MPI_Barrier(comm);
    double t0 = MPI_Wtime();
    if (!rc) rc = allreduces(comm, in, out, n, iters);
    double dt = (MPI_Wtime() - t0) / iters;
    *t = 0;
    MPI_Allreduce(&dt, t, 1, MPI_DOUBLE, MPI_MAX, comm);
    int bad = 0;
    double tri = (double)p * (p + 1) / 2;
    for (size_t i = 0; i < n && !rc; i++)
        if (out[i] != (float)(tri * (double)(i % 7 + 1))) { bad = 1; break; }
    MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_MAX, comm);
    if (bad && !rc) rc = pt_fail(PT_ECOMM, "MPI probe: allreduce of %zu bytes returned a wrong sum", bytes);
    return rc;
}

/* Steps and bus factor of kind k over p ranks (lib/plan/cost.h's
 * pt_cost_kind_steps and pt_cost_busfactor, which libptrain_topo does not
 * link). */
static double kind_steps(int k, int p)
{
    return p <= 1 ? 0 : k == 5 ? 1 : (k == 0 ? 2.0 : 1.0) * (p - 1);
}
static double kind_busfactor(int k, int p)
{
    return p <= 1 ? 0 : k == 0 ? 2.0 * (p - 1) / p : (k == 1 || k == 2) ? (double)(p - 1) / p : 1;
}

/* iters calls of collective kind k (PT_TOPO_COLL_N order) on a buffer of
 * n floats (the whole buffer: the gathered output, the scattered input),
 * after one warm-up: the slowest rank's mean time per call (s) in *t. */
static int time_kind(pt_comm *w, int me, int p, int k, float *a, float *b, size_t n, int iters, double *t)
{
    int rc = PT_OK;
    double t0 = 0;
    for (int i = 0; i <= iters && !rc; i++) {
        if (i == 1) {
            MPI_Barrier(w->comm);
            t0 = MPI_Wtime();
        }
        switch (k) {
        case 0: rc = pt_allreduce_sum(w, a, n); break;
        case 1: rc = pt_reduce_scatter_sum(w, a, b, n); break;
        case 2: rc = pt_allgather(w, a, b, n); break;
        case 3: rc = pt_broadcast(w, a, n, i % p); break;
        case 4: rc = pt_reduce_sum(w, a, n, i % p); break;
        default: rc = pt_sendrecv(w, a, (me + 1) % p, b, (me + p - 1) % p, n, 91); break;
        }
    }
    double dt = (MPI_Wtime() - t0) / iters;
    *t = 0;
    MPI_Allreduce(&dt, t, 1, MPI_DOUBLE, MPI_MAX, w->comm);
    int bad = rc != PT_OK, any = 0;
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, w->comm);
    return any ? pt_fail(PT_ECOMM, "MPI probe: %s of %zu bytes failed", pt_topo_coll_name(k), n * 4) : PT_OK;
}

/* Each collective kind (PT_TOPO_COLL_N order) at o->coll_bytes[0] and [1]
 * over the ranks of w (p >= 2), fitted through both sizes to t(b) =
 * steps_k(p) alpha + b busfactor_k(p) / busbw: f gets the times, alpha
 * (us, at least floor_us) and busbw (GB/s) of every kind whose time grows
 * with the size (0 for the others), the sizes and nranks = p.  a and b
 * hold coll_bytes[1] bytes.  Collective over w; PT_OK or time_kind's
 * PT_ECOMM on every rank of w. */
static int fit_kinds(pt_comm *w, const pt_probe_mpi_opts *o, double floor_us, float *a, float *b, pt_topo_coll_fit *f)
{
    const int me = w->rank, p = w->size;
    int rc = PT_OK;
    memset(f, 0, sizeof *f);
    for (int k = 0; k < PT_TOPO_COLL_N && !rc; k++) {
        double t[2] = {0, 0};
        size_t n[2];
        for (int s = 0; s < 2 && !rc; s++) {
            n[s] = o->coll_bytes[s] / 4 / (size_t)p * (size_t)p; /* a multiple of p for the scatters */
            for (size_t i = 0; i < n[s]; i++) a[i] = (float)(i % 7 + 1);
            rc = time_kind(w, me, p, k, a, b, n[s], o->coll_iters, &t[s]);
            f->time_us[k][s] = t[s] * 1e6;
        }
        if (rc) break;
        const double slope = (t[1] - t[0]) / (4.0 * ((double)n[1] - (double)n[0])); /* s per byte */
        if (slope > 0) {
            f->busbw[k] = kind_busfactor(k, p) / slope / 1e9;
            double al = (t[0] - 4.0 * (double)n[0] * slope) * 1e6 / kind_steps(k, p);
            f->lat_us[k] = al > floor_us ? al : floor_us;
        }
    }
    if (!rc) f->nranks = p, f->bytes[0] = o->coll_bytes[0], f->bytes[1] = o->coll_bytes[1];
    return rc;
}

/* rc on every rank of comm: PT_OK where every rank's is, else this rank's
 * own error, or PT_ECOMM naming `what` on the ranks whose call succeeded. */
static int agree(MPI_Comm comm, int rc, const char *what)
{
    int bad = rc != PT_OK, any = 0;
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, comm);
    return !any || rc ? rc : pt_fail(PT_ECOMM, "MPI probe: %s failed on another rank", what);
}

/* Half round trip (seconds), best of iters, between ranks a and b. */
static int pingpong(MPI_Comm comm, int me, int a, int b, char *buf, size_t bytes, int iters, double *best)
{
    double bt = 1e30;
    int rc = MPI_SUCCESS;
    MPI_Barrier(comm);
    for (int i = 0; i < iters + 1 && rc == MPI_SUCCESS; i++) {
        double t0 = MPI_Wtime();
        if (me == a) {
            rc = MPI_Send(buf, (int)bytes, MPI_BYTE, b, 7, comm);
            if (rc == MPI_SUCCESS) rc = MPI_Recv(buf, (int)bytes, MPI_BYTE, b, 7, comm, MPI_STATUS_IGNORE);
        } else if (me == b) {
            rc = MPI_Recv(buf, (int)bytes, MPI_BYTE, a, 7, comm, MPI_STATUS_IGNORE);
            if (rc == MPI_SUCCESS) rc = MPI_Send(buf, (int)bytes, MPI_BYTE, a, 7, comm);
        }
        double dt = (MPI_Wtime() - t0) / 2;
        if (i > 0 && dt < bt) bt = dt;   /* iteration 0 warms up */
    }
    *best = bt;
    return rc == MPI_SUCCESS ? PT_OK : pt_fail(PT_ECOMM, "ping-pong between ranks %d and %d failed", a, b);
}

/* PT_OK when the sizes and iteration counts of o can be probed, else
 * PT_EINVAL with one line. */
static int check_opts(const pt_probe_mpi_opts *o)
{
    if (o->msg_bytes < 8 || o->msg_bytes > (1u << 30) || o->ar_bytes < 4 || o->ar_bytes % 4 || o->ar_bytes > (1u << 30) ||
        o->lat_iters < 1 || o->bw_iters < 1 || o->ar_iters < 1 || o->fit_bytes % 4 || o->fit_bytes > (1u << 30) ||
        (o->fit_bytes && o->fit_iters < 1) || o->pair_bytes % 4 || o->pair_bytes > (1u << 30) ||
        (o->pair_bytes && o->pair_iters < 1) || o->coll_bytes[0] % 4 || o->coll_bytes[1] % 4 ||
        o->coll_bytes[0] > (1u << 30) || o->coll_bytes[1] > (1u << 30) ||
        (o->coll_bytes[0] && (o->coll_iters < 1 || o->coll_bytes[1] == o->coll_bytes[0])))
        return pt_fail(PT_EINVAL, "MPI probe: bad sizes (message %zu bytes, allreduce %zu and %zu bytes: multiples of "
                       "4 up to 1 GiB)", o->msg_bytes, o->ar_bytes, o->fit_bytes);
    return PT_OK;
}

#define PROBE_NAME 64 /* bytes of one rank's node name */

/* What the phases of pt_probe_mpi share: the communicator and sizes,
 * where each rank runs, the buffers, and the results so far. */
typedef struct probe_ctx {
    MPI_Comm comm;
    const pt_probe_mpi_opts *o;
    int me, p;             /* this rank, the ranks */
    int *keys;             /* [p] each rank's node */
    int *sizes;            /* [nodes] the ranks of each node */
    int node, nn;          /* this rank's node, the nodes */
    char *names;           /* [p][PROBE_NAME] each rank's node name */
    char *buf;             /* bufsz bytes for the ping-pongs */
    size_t bufsz;
    float *ar_in, *ar_out; /* the collectives' buffers (the largest of their sizes) */
    pt_comm world;
    pt_topo_net net;       /* the results */
} probe_ctx;

/* The buffers, then, collectively, each rank's node (as pt_comm_nodes
 * finds it) and node name.  Returns 1 to go on; 0 when some rank could not
 * allocate or find the nodes, with *rc this rank's error (PT_OK on the
 * ranks whose allocations succeeded, as before). */
static int probe_setup(probe_ctx *pr, int *rc)
{
    const pt_probe_mpi_opts *o = pr->o;
    const int p = pr->p;
    /* Node of every rank, as pt_comm_nodes finds it (ranks that share
     * memory, split by $SLURM_NODEID when every rank has one), named by
     * $SLURMD_NODENAME when every rank has one, else the host name */
    pr->keys = malloc((size_t)p * sizeof *pr->keys);
    pr->sizes = malloc((size_t)p * sizeof *pr->sizes);
    const char *sn = getenv("SLURMD_NODENAME");
    int have = sn && *sn, all = 0;
    MPI_Allreduce(&have, &all, 1, MPI_INT, MPI_MIN, pr->comm);
    char name[PROBE_NAME] = "";
    if (all) snprintf(name, sizeof name, "%s", sn);
    else gethostname(name, sizeof name - 1);
    pr->names = malloc((size_t)p * sizeof name);
    size_t arsz = o->fit_bytes > o->ar_bytes ? o->fit_bytes : o->ar_bytes;
    if (o->pair_bytes > arsz) arsz = o->pair_bytes;
    if (o->coll_bytes[0] > arsz) arsz = o->coll_bytes[0];
    if (o->coll_bytes[1] > arsz) arsz = o->coll_bytes[1];
    pr->bufsz = o->msg_bytes > arsz ? o->msg_bytes : arsz;
    pr->buf = malloc(pr->bufsz);
    pr->ar_in = malloc(arsz), pr->ar_out = malloc(arsz);
    *rc = PT_OK;
    if (!pr->keys || !pr->sizes || !pr->names || !pr->buf || !pr->ar_in || !pr->ar_out)
        *rc = pt_fail(PT_ENOMEM, "MPI probe: out of memory");
    int any_fail = *rc != PT_OK;
    MPI_Allreduce(MPI_IN_PLACE, &any_fail, 1, MPI_INT, MPI_MAX, pr->comm);
    if (any_fail) return 0;
    *rc = pt_comm_wrap(&pr->world, pr->comm, "world");
    if (!*rc) *rc = pt_comm_nodes(&pr->world, pr->sizes, &pr->nn, &pr->node); /* the ranks of each node */
    if (*rc) return 0;
    MPI_Allgather(&pr->node, 1, MPI_INT, pr->keys, 1, MPI_INT, pr->comm);
    MPI_Allgather(name, sizeof name, MPI_CHAR, pr->names, sizeof name, MPI_CHAR, pr->comm);
    memset(pr->buf, 0x5a, pr->bufsz);
    return 1;
}

/* net.nnodes, the distinct nodes, and net.nodes their names in order of
 * first rank, joined by commas (as many as fit). */
static void probe_node_names(probe_ctx *pr)
{
    pt_topo_net *net = &pr->net;
    for (int r = 0; r < pr->p; r++) {
        int seen = 0;
        for (int q = 0; q < r; q++) seen |= pr->keys[q] == pr->keys[r];
        if (seen) continue;
        net->nnodes++;
        const char *nm = pr->names + (size_t)r * PROBE_NAME;
        size_t l = strlen(net->nodes);
        if (l + strlen(nm) + 2 < sizeof net->nodes)
            snprintf(net->nodes + l, sizeof net->nodes - l, "%s%s", l ? "," : "", nm);
    }
}

/* Ping-pong latency and bandwidth between rank 0 and the first other rank
 * on its node (intra) and the first on another node (inter). */
static int probe_pingpongs(probe_ctx *pr)
{
    const pt_probe_mpi_opts *o = pr->o;
    pt_topo_net *net = &pr->net;
    int intra = -1, inter = -1;
    for (int r = 1; r < pr->p; r++) {
        if (pr->keys[r] == pr->keys[0] && intra < 0) intra = r;
        if (pr->keys[r] != pr->keys[0] && inter < 0) inter = r;
    }
    int pair[2] = { intra, inter }, rc = PT_OK;
    for (int k = 0; k < 2 && !rc; k++) {
        if (pair[k] < 0) continue;
        double lat = 0, bwt = 0;
        rc = pingpong(pr->comm, pr->me, 0, pair[k], pr->buf, 8, o->lat_iters, &lat);
        if (!rc) rc = pingpong(pr->comm, pr->me, 0, pair[k], pr->buf, o->msg_bytes, o->bw_iters, &bwt);
        if (k == 0) { net->intra_lat_us = lat * 1e6; net->intra_gbps = (double)o->msg_bytes / bwt / 1e9; }
        else { net->inter_lat_us = lat * 1e6; net->inter_gbps = (double)o->msg_bytes / bwt / 1e9; }
    }
    return rc;
}

/* The ring's alpha and beta (Thakur et al. 2005, sec. 4: a ring
 * allreduce of n bytes over p ranks takes 2(p-1) steps of n/p bytes,
 * t = 2(p-1) alpha + 2(p-1)/p n beta) through the two sizes (fit: the
 * second, tfit seconds, was timed); they hold what a collective's step
 * costs beyond the wire: the ranks' contention for cores, the reduction,
 * the library.  Alpha is at least the slowest ping-pong latency.  p > 1. */
static void probe_ring_fit(probe_ctx *pr, int fit, double tfit)
{
    const pt_probe_mpi_opts *o = pr->o;
    const int p = pr->p;
    pt_topo_net *net = &pr->net;
    double lat = net->inter_lat_us > net->intra_lat_us ? net->inter_lat_us : net->intra_lat_us;
    double a = -1;
    if (fit) {
        net->fit_bytes = o->fit_bytes;
        net->fit_time_us = tfit * 1e6;
        const double k = 2.0 * (p - 1) / p;
        const double dn = (double)o->fit_bytes - (double)o->ar_bytes, dt = net->fit_time_us - net->ar_time_us;
        const double beta = dt / (k * dn); /* us per byte */
        if (beta > 0) {
            net->ring_gbps = 1e-3 / beta;
            a = (net->ar_time_us - k * (double)o->ar_bytes * beta) / (2.0 * (p - 1));
        }
    }
    if (net->ring_gbps <= 0) { /* no fit: alpha from the one size and the ping-pong bandwidth */
        double bw = net->inter_gbps > 0 && (net->intra_gbps <= 0 || net->inter_gbps < net->intra_gbps)
                        ? net->inter_gbps : net->intra_gbps;
        double wire_us = bw > 0 ? 2.0 * (p - 1) / p * (double)o->ar_bytes / (bw * 1e3) : 0;
        a = (net->ar_time_us - wire_us) / (2.0 * (p - 1));
    }
    net->ring_lat_us = a > lat ? a : lat;
}

/* The allreduce over all ranks at ar_bytes (time, algbw, busbw), at
 * fit_bytes, and the ring's alpha and beta through both (probe_ring_fit);
 * rc: the probe's so far, returned with this phase's. */
static int probe_allreduce(probe_ctx *pr, int rc)
{
    const pt_probe_mpi_opts *o = pr->o;
    const int p = pr->p;
    pt_topo_net *net = &pr->net;
    double tmax = 0, tfit = 0;
    if (!rc) rc = time_allreduce(pr->comm, pr->me, p, pr->ar_in, pr->ar_out, o->ar_bytes, o->ar_iters, &tmax);
    const int fit = !rc && p > 1 && o->fit_bytes > 0 && o->fit_bytes != o->ar_bytes;
    if (fit) rc = time_allreduce(pr->comm, pr->me, p, pr->ar_in, pr->ar_out, o->fit_bytes, o->fit_iters, &tfit);
    net->ar_time_us = tmax * 1e6;
    net->ar_algbw = (double)o->ar_bytes / tmax / 1e9;
    net->ar_busbw = net->ar_algbw * 2.0 * (p - 1) / p;
    if (p > 1) probe_ring_fit(pr, fit, tfit);
    return rc;
}

/* Collectives while the other ranks compute: a pair's allreduce with
 * every rank in pairs (as the fit's ring, all communicating), then with
 * half the pairs while the others compute, as a pipeline's send inside a
 * step; the best of 5 rounds each, in turn.  Where a node's ranks share
 * CPUs, they are pinned for it, the two ranks of a pair on different
 * CPUs: unpinned, the scheduler puts a pair on one CPU in some runs (its
 * exchange then waits for nobody) and on two in others, and the time
 * jumped between the two (92 and 283 us at 32 KiB, 4 ranks on 2 cores)
 * from run to run.  p >= 3. */
static int probe_pairs(probe_ctx *pr)
{
    const pt_probe_mpi_opts *o = pr->o;
    const int me = pr->me;
    MPI_Comm pair = MPI_COMM_NULL, shm = MPI_COMM_NULL;
    int local = 0, nlocal = 1, pinned = 0, rc = PT_OK;
    cpu_set_t saved;
    MPI_Comm_split_type(pr->comm, MPI_COMM_TYPE_SHARED, me, MPI_INFO_NULL, &shm);
    MPI_Comm_rank(shm, &local);
    MPI_Comm_size(shm, &nlocal);
    MPI_Comm_free(&shm);
    pin_shared(local, nlocal, &saved, &pinned);
    const int all_pairs = pr->p / 2, busy_pairs = all_pairs / 2 > 0 ? all_pairs / 2 : 1;
    MPI_Comm_split(pr->comm, me < 2 * all_pairs ? me / 2 : MPI_UNDEFINED, me, &pair);
    double idle = 1e30, busy = 1e30, x = 0;
    for (int r = 0; r < 5 && !rc; r++) {
        rc = time_pairs(pr->comm, pair, me, all_pairs, pr->ar_in, pr->ar_out, o->pair_bytes, o->pair_iters, &x);
        if (x < idle) idle = x;
        if (!rc) rc = time_pairs(pr->comm, pair, me, busy_pairs, pr->ar_in, pr->ar_out, o->pair_bytes, o->pair_iters, &x);
        if (x < busy) busy = x;
    }
    if (pair != MPI_COMM_NULL) MPI_Comm_free(&pair);
    if (pinned) sched_setaffinity(0, sizeof saved, &saved);
    if (!rc) {
        pr->net.pair_bytes = o->pair_bytes;
        pr->net.pair_us = idle * 1e6;
        pr->net.pair_busy_us = busy * 1e6;
    }
    return rc;
}

/* The node class's fit (PT_TOPO_CLASS_NODE) over the node with the most
 * ranks (the first), when it has >= 2: on one node the world's fit f;
 * else every node of >= 2 ranks at once, as a job's groups run (f gets
 * this rank's node's), and the biggest node's fit to rank 0.  Alpha at
 * least floor_us.  Collective over the world. */
static int probe_coll_node(probe_ctx *pr, double floor_us, pt_topo_coll_fit *f)
{
    const int me = pr->me;
    int biggest = 0, lead = 0; /* the node with the most ranks (the first), its first rank */
    for (int y = 0; y < pr->nn; y++)
        if (pr->sizes[y] > pr->sizes[biggest]) biggest = y;
    for (int r = pr->p - 1; r >= 0; r--)
        if (pr->keys[r] == biggest) lead = r;
    if (pr->sizes[biggest] < 2) return PT_OK;
    pt_topo_coll_fit *nf = &pr->net.coll_class[PT_TOPO_CLASS_NODE];
    if (pr->nn == 1) {
        *nf = *f;
        return PT_OK;
    }
    int rc = PT_OK;
    MPI_Comm nc = MPI_COMM_NULL;
    if (MPI_Comm_split(pr->comm, pr->sizes[pr->node] >= 2 ? pr->node : MPI_UNDEFINED, me, &nc) != MPI_SUCCESS)
        rc = pt_fail(PT_ECOMM, "MPI probe: MPI_Comm_split into nodes failed");
    if (!rc && nc != MPI_COMM_NULL) {
        pt_comm c;
        pt_comm_wrap(&c, nc, "node");
        rc = fit_kinds(&c, pr->o, floor_us, pr->ar_in, pr->ar_out, f);
    }
    if (nc != MPI_COMM_NULL) MPI_Comm_free(&nc);
    rc = agree(pr->comm, rc, "a collective inside a node");
    if (!rc && lead != 0) { /* the biggest node's fit to rank 0 */
        if (me == lead) MPI_Send(f, (int)sizeof *f, MPI_BYTE, 0, 92, pr->comm);
        if (me == 0) MPI_Recv(nf, (int)sizeof *nf, MPI_BYTE, lead, 92, pr->comm, MPI_STATUS_IGNORE);
    } else if (!rc) {
        *nf = *f;
    }
    return rc;
}

/* The network class's fit (PT_TOPO_CLASS_NETWORK) over the first rank of
 * each node, the others waiting; with one rank per node the world's fit.
 * Alpha at least floor_us.  nn >= 2; collective over the world. */
static int probe_coll_network(probe_ctx *pr, double floor_us)
{
    pt_topo_net *net = &pr->net;
    pt_topo_coll_fit *wf = &net->coll_class[PT_TOPO_CLASS_NETWORK];
    if (pr->nn == pr->p) { /* one rank per node: the world's fit */
        wf->nranks = pr->p;
        memcpy(wf->bytes, net->coll_bytes, sizeof wf->bytes);
        memcpy(wf->time_us, net->coll_time_us, sizeof wf->time_us);
        memcpy(wf->lat_us, net->coll_lat_us, sizeof wf->lat_us);
        memcpy(wf->busbw, net->coll_busbw, sizeof wf->busbw);
        return PT_OK;
    }
    int local = 0, rc = PT_OK; /* this rank's index on its node */
    for (int r = 0; r < pr->me; r++) local += pr->keys[r] == pr->node;
    MPI_Comm lc = MPI_COMM_NULL;
    if (MPI_Comm_split(pr->comm, local == 0 ? 0 : MPI_UNDEFINED, pr->me, &lc) != MPI_SUCCESS)
        rc = pt_fail(PT_ECOMM, "MPI probe: MPI_Comm_split over the nodes failed");
    if (!rc && lc != MPI_COMM_NULL) {
        pt_comm c;
        pt_comm_wrap(&c, lc, "network");
        rc = fit_kinds(&c, pr->o, floor_us, pr->ar_in, pr->ar_out, wf); /* rank 0 is node 0's first */
    }
    if (lc != MPI_COMM_NULL) MPI_Comm_free(&lc);
    return agree(pr->comm, rc, "a collective between nodes");
}

/* Each collective kind at two sizes, every rank taking part: the alpha
 * and bus bandwidth the cost model prices that kind with; then the same
 * per link class (cost.c prices a communicator on the slowest class it
 * spans): the ranks of one node, and one rank per node.  Where the world
 * is that class (one node; one rank per node) its fit is the world's, not
 * timed again.  p > 1, coll_bytes[0] > 0. */
static int probe_collectives(probe_ctx *pr)
{
    const pt_probe_mpi_opts *o = pr->o;
    pt_topo_net *net = &pr->net;
    double lat = net->inter_lat_us > net->intra_lat_us ? net->inter_lat_us : net->intra_lat_us;
    pt_topo_coll_fit f;
    int rc = fit_kinds(&pr->world, o, lat, pr->ar_in, pr->ar_out, &f);
    if (!rc) {
        memcpy(net->coll_time_us, f.time_us, sizeof f.time_us);
        memcpy(net->coll_lat_us, f.lat_us, sizeof f.lat_us);
        memcpy(net->coll_busbw, f.busbw, sizeof f.busbw);
        net->coll_bytes[0] = o->coll_bytes[0], net->coll_bytes[1] = o->coll_bytes[1];
    }
    double floor_us[2] = {net->intra_lat_us, net->inter_lat_us}; /* rank 0's ping-pongs, every rank's floors */
    MPI_Bcast(floor_us, 2, MPI_DOUBLE, 0, pr->comm);
    if (!rc) rc = probe_coll_node(pr, floor_us[0], &f);
    if (!rc && pr->nn >= 2) rc = probe_coll_network(pr, floor_us[1]);
    return rc;
}

int pt_probe_mpi(pt_topo *t, MPI_Comm comm, const pt_probe_mpi_opts *o)
{
    int rc = check_opts(o);
    if (rc) return rc;
    probe_ctx pr;
    memset(&pr, 0, sizeof pr);
    pr.comm = comm;
    pr.o = o;
    MPI_Comm_rank(comm, &pr.me);
    MPI_Comm_size(comm, &pr.p);
    if (probe_setup(&pr, &rc)) {
        pr.net.measured = 1;
        pr.net.nranks = pr.p;
        pr.net.msg_bytes = o->msg_bytes;
        pr.net.ar_bytes = o->ar_bytes;
        probe_node_names(&pr);
        rc = probe_pingpongs(&pr);
        rc = probe_allreduce(&pr, rc);
        if (!rc && pr.p >= 3 && o->pair_bytes > 0) rc = probe_pairs(&pr);
        if (!rc && pr.p > 1 && o->coll_bytes[0] > 0) rc = probe_collectives(&pr);
        /* rank 0 measured the ping-pongs: everyone gets its view */
        MPI_Bcast(&pr.net, (int)sizeof pr.net, MPI_BYTE, 0, comm);
        if (!rc) t->net = pr.net;
    }
    free(pr.keys); free(pr.sizes); free(pr.names); free(pr.buf); free(pr.ar_in); free(pr.ar_out);
    return rc;
}
