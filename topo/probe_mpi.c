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

int pt_probe_mpi(pt_topo *t, MPI_Comm comm, const pt_probe_mpi_opts *o)
{
    if (o->msg_bytes < 8 || o->msg_bytes > (1u << 30) || o->ar_bytes < 4 || o->ar_bytes % 4 || o->ar_bytes > (1u << 30) ||
        o->lat_iters < 1 || o->bw_iters < 1 || o->ar_iters < 1 || o->fit_bytes % 4 || o->fit_bytes > (1u << 30) ||
        (o->fit_bytes && o->fit_iters < 1) || o->pair_bytes % 4 || o->pair_bytes > (1u << 30) ||
        (o->pair_bytes && o->pair_iters < 1) || o->coll_bytes[0] % 4 || o->coll_bytes[1] % 4 ||
        o->coll_bytes[0] > (1u << 30) || o->coll_bytes[1] > (1u << 30) ||
        (o->coll_bytes[0] && (o->coll_iters < 1 || o->coll_bytes[1] == o->coll_bytes[0])))
        return pt_fail(PT_EINVAL, "MPI probe: bad sizes (message %zu bytes, allreduce %zu and %zu bytes: multiples of "
                       "4 up to 1 GiB)", o->msg_bytes, o->ar_bytes, o->fit_bytes);
    int me, p;
    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &p);

    /* Node of every rank, as pt_comm_nodes finds it (ranks that share
     * memory, split by $SLURM_NODEID when every rank has one), named by
     * $SLURMD_NODENAME when every rank has one, else the host name */
    int *keys = malloc((size_t)p * sizeof *keys), node = 0, nn = 0;
    const char *sn = getenv("SLURMD_NODENAME");
    int have = sn && *sn, all = 0;
    MPI_Allreduce(&have, &all, 1, MPI_INT, MPI_MIN, comm);
    char name[64] = "";
    if (all) snprintf(name, sizeof name, "%s", sn);
    else gethostname(name, sizeof name - 1);
    char *names = malloc((size_t)p * sizeof name);
    size_t arsz = o->fit_bytes > o->ar_bytes ? o->fit_bytes : o->ar_bytes;
    if (o->pair_bytes > arsz) arsz = o->pair_bytes;
    if (o->coll_bytes[0] > arsz) arsz = o->coll_bytes[0];
    if (o->coll_bytes[1] > arsz) arsz = o->coll_bytes[1];
    size_t bufsz = o->msg_bytes > arsz ? o->msg_bytes : arsz;
    char *buf = malloc(bufsz);
    float *ar_in = malloc(arsz), *ar_out = malloc(arsz);
    int rc = PT_OK;
    if (!keys || !names || !buf || !ar_in || !ar_out) rc = pt_fail(PT_ENOMEM, "MPI probe: out of memory");
    int any_fail = rc != PT_OK;
    MPI_Allreduce(MPI_IN_PLACE, &any_fail, 1, MPI_INT, MPI_MAX, comm);
    if (any_fail) goto out;
    pt_comm world;
    rc = pt_comm_wrap(&world, comm, "world");
    if (!rc) rc = pt_comm_nodes(&world, keys, &nn, &node); /* keys: the node sizes, unused */
    if (rc) goto out;
    MPI_Allgather(&node, 1, MPI_INT, keys, 1, MPI_INT, comm);
    MPI_Allgather(name, sizeof name, MPI_CHAR, names, sizeof name, MPI_CHAR, comm);
    memset(buf, 0x5a, bufsz);

    pt_topo_net net;
    memset(&net, 0, sizeof net);
    net.measured = 1;
    net.nranks = p;
    net.msg_bytes = o->msg_bytes;
    net.ar_bytes = o->ar_bytes;
    /* distinct nodes, in order of first rank */
    for (int r = 0; r < p; r++) {
        int seen = 0;
        for (int q = 0; q < r; q++) seen |= keys[q] == keys[r];
        if (seen) continue;
        net.nnodes++;
        size_t l = strlen(net.nodes);
        if (l + strlen(names + (size_t)r * sizeof name) + 2 < sizeof net.nodes)
            snprintf(net.nodes + l, sizeof net.nodes - l, "%s%s", l ? "," : "", names + (size_t)r * sizeof name);
    }
    int intra = -1, inter = -1;
    for (int r = 1; r < p; r++) {
        if (keys[r] == keys[0] && intra < 0) intra = r;
        if (keys[r] != keys[0] && inter < 0) inter = r;
    }
    int pair[2] = { intra, inter };
    for (int k = 0; k < 2 && !rc; k++) {
        if (pair[k] < 0) continue;
        double lat = 0, bwt = 0;
        rc = pingpong(comm, me, 0, pair[k], buf, 8, o->lat_iters, &lat);
        if (!rc) rc = pingpong(comm, me, 0, pair[k], buf, o->msg_bytes, o->bw_iters, &bwt);
        if (k == 0) { net.intra_lat_us = lat * 1e6; net.intra_gbps = (double)o->msg_bytes / bwt / 1e9; }
        else { net.inter_lat_us = lat * 1e6; net.inter_gbps = (double)o->msg_bytes / bwt / 1e9; }
    }

    double tmax = 0, tfit = 0;
    if (!rc) rc = time_allreduce(comm, me, p, ar_in, ar_out, o->ar_bytes, o->ar_iters, &tmax);
    const int fit = !rc && p > 1 && o->fit_bytes > 0 && o->fit_bytes != o->ar_bytes;
    if (fit) rc = time_allreduce(comm, me, p, ar_in, ar_out, o->fit_bytes, o->fit_iters, &tfit);
    net.ar_time_us = tmax * 1e6;
    net.ar_algbw = (double)o->ar_bytes / tmax / 1e9;
    net.ar_busbw = net.ar_algbw * 2.0 * (p - 1) / p;
    /* the ring's alpha and beta (Thakur et al. 2005, sec. 4: a ring
     * allreduce of n bytes over p ranks takes 2(p-1) steps of n/p bytes,
     * t = 2(p-1) alpha + 2(p-1)/p n beta) through the two sizes; they hold
     * what a collective's step costs beyond the wire: the ranks'
     * contention for cores, the reduction, the library.  Alpha is at least
     * the slowest ping-pong latency. */
    if (p > 1) {
        double lat = net.inter_lat_us > net.intra_lat_us ? net.inter_lat_us : net.intra_lat_us;
        double a = -1;
        if (fit) {
            net.fit_bytes = o->fit_bytes;
            net.fit_time_us = tfit * 1e6;
            const double k = 2.0 * (p - 1) / p;
            const double dn = (double)o->fit_bytes - (double)o->ar_bytes, dt = net.fit_time_us - net.ar_time_us;
            const double beta = dt / (k * dn); /* us per byte */
            if (beta > 0) {
                net.ring_gbps = 1e-3 / beta;
                a = (net.ar_time_us - k * (double)o->ar_bytes * beta) / (2.0 * (p - 1));
            }
        }
        if (net.ring_gbps <= 0) { /* no fit: alpha from the one size and the ping-pong bandwidth */
            double bw = net.inter_gbps > 0 && (net.intra_gbps <= 0 || net.inter_gbps < net.intra_gbps)
                            ? net.inter_gbps : net.intra_gbps;
            double wire_us = bw > 0 ? 2.0 * (p - 1) / p * (double)o->ar_bytes / (bw * 1e3) : 0;
            a = (net.ar_time_us - wire_us) / (2.0 * (p - 1));
        }
        net.ring_lat_us = a > lat ? a : lat;
    }
    /* collectives while the other ranks compute: a pair's allreduce with
     * every rank in pairs (as the fit's ring, all communicating), then with
     * half the pairs while the others compute, as a pipeline's send inside
     * a step; the best of 5 rounds each, in
     * turn.  Where a node's ranks share CPUs, they are pinned for it, the
     * two ranks of a pair on different CPUs: unpinned, the scheduler puts
     * a pair on one CPU in some runs (its exchange then waits for nobody)
     * and on two in others, and the time jumped between the two (92 and
     * 283 us at 32 KiB, 4 ranks on 2 cores) from run to run. */
    if (!rc && p >= 3 && o->pair_bytes > 0) {
        MPI_Comm pair = MPI_COMM_NULL, shm = MPI_COMM_NULL;
        int local = 0, nlocal = 1, pinned = 0;
        cpu_set_t saved;
        MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, me, MPI_INFO_NULL, &shm);
        MPI_Comm_rank(shm, &local);
        MPI_Comm_size(shm, &nlocal);
        MPI_Comm_free(&shm);
        pin_shared(local, nlocal, &saved, &pinned);
        const int all_pairs = p / 2, busy_pairs = all_pairs / 2 > 0 ? all_pairs / 2 : 1;
        MPI_Comm_split(comm, me < 2 * all_pairs ? me / 2 : MPI_UNDEFINED, me, &pair);
        double idle = 1e30, busy = 1e30, x = 0;
        for (int r = 0; r < 5 && !rc; r++) {
            rc = time_pairs(comm, pair, me, all_pairs, ar_in, ar_out, o->pair_bytes, o->pair_iters, &x);
            if (x < idle) idle = x;
            if (!rc) rc = time_pairs(comm, pair, me, busy_pairs, ar_in, ar_out, o->pair_bytes, o->pair_iters, &x);
            if (x < busy) busy = x;
        }
        if (pair != MPI_COMM_NULL) MPI_Comm_free(&pair);
        if (pinned) sched_setaffinity(0, sizeof saved, &saved);
        if (!rc) {
            net.pair_bytes = o->pair_bytes;
            net.pair_us = idle * 1e6;
            net.pair_busy_us = busy * 1e6;
        }
    }
    /* each collective kind at two sizes, every rank taking part: the
     * alpha and bus bandwidth the cost model prices that kind with */
    if (!rc && p > 1 && o->coll_bytes[0] > 0) {
        double lat = net.inter_lat_us > net.intra_lat_us ? net.inter_lat_us : net.intra_lat_us;
        for (int k = 0; k < PT_TOPO_COLL_N && !rc; k++) {
            double t[2] = {0, 0};
            size_t n[2];
            for (int s = 0; s < 2 && !rc; s++) {
                n[s] = o->coll_bytes[s] / 4 / (size_t)p * (size_t)p; /* a multiple of p for the scatters */
                for (size_t i = 0; i < n[s]; i++) ar_in[i] = (float)(i % 7 + 1);
                rc = time_kind(&world, me, p, k, ar_in, ar_out, n[s], o->coll_iters, &t[s]);
                net.coll_time_us[k][s] = t[s] * 1e6;
            }
            if (rc) break;
            const double slope = (t[1] - t[0]) / (4.0 * ((double)n[1] - (double)n[0])); /* s per byte */
            if (slope > 0) {
                net.coll_busbw[k] = kind_busfactor(k, p) / slope / 1e9;
                double a = (t[0] - 4.0 * (double)n[0] * slope) * 1e6 / kind_steps(k, p);
                net.coll_lat_us[k] = a > lat ? a : lat;
            }
        }
        if (!rc) net.coll_bytes[0] = o->coll_bytes[0], net.coll_bytes[1] = o->coll_bytes[1];
    }
    /* rank 0 measured the ping-pongs: everyone gets its view */
    MPI_Bcast(&net, (int)sizeof net, MPI_BYTE, 0, comm);
    if (!rc) t->net = net;
out:
    free(keys); free(names); free(buf); free(ar_in); free(ar_out);
    return rc;
}
