/* ptrain topology: MPI probes (linked into ptrain-topo only, so that
 * libptrain_topo, which the SPANK plugin may link, stays free of MPI). */
#ifndef PTRAIN_TOPO_PROBE_MPI_H
#define PTRAIN_TOPO_PROBE_MPI_H

#include <mpi.h>
#include "topo/topo.h"

/* Sizes of one probe run.  Quick: 64 KiB ping-pong, 256 KiB allreduce
 * and 4 MiB for the fit, few iterations (for tests); full: 4 MiB ping-pong,
 * 16 MiB allreduce and 1 MiB for the fit. */
typedef struct pt_probe_mpi_opts {
    size_t msg_bytes;       /* ping-pong bandwidth message, bytes (>= 8) */
    size_t ar_bytes;        /* allreduce message, bytes (multiple of 4, >= 4) */
    size_t fit_bytes;       /* a second allreduce size for the alpha-beta fit (multiple of 4,
                             * != ar_bytes); 0 = no fit */
    size_t pair_bytes;      /* allreduce inside pairs of ranks, idle and busy (multiple of 4);
                             * 0 = not measured */
    size_t coll_bytes[2];   /* each collective kind at these two buffer sizes (multiples of 4,
                             * different); coll_bytes[0] 0 = not measured */
    int lat_iters, bw_iters, ar_iters, fit_iters, pair_iters, coll_iters;
} pt_probe_mpi_opts;

/* Defaults for quick (non-zero) or full runs (collectives at 256 KiB and
 * 2 MiB, 3 calls each, quick; 1 and 16 MiB, 10 calls, full). */
pt_probe_mpi_opts pt_probe_mpi_defaults(int quick);

/* Collective over `comm`: measure
 *  - ping-pong between rank 0 and the first other rank on its node (intra)
 *    and the first rank on another node (inter): latency = half the round
 *    trip of an 8-byte message (us), bandwidth = msg_bytes / half round trip
 *    (GB/s), best of the iterations;
 *  - MPI_Allreduce (float sum) of ar_bytes over all ranks: time per call
 *    (us, mean over ar_iters after one warm-up), algbw = bytes / time,
 *    busbw = algbw * 2(p-1)/p (nccl-tests, doc/PERFORMANCE.md), after
 *    checking the result against the closed-form sum;
 *  - the same at fit_bytes, and through the two sizes the ring model
 *    t(n) = 2(p-1) alpha + 2(p-1)/p n beta (Thakur et al. 2005, sec. 4):
 *    alpha, the latency of one ring step (us, t->net.ring_lat_us, at least
 *    the slowest ping-pong latency), and 1/beta, the bandwidth one rank
 *    gets in a step while every rank sends at once (GB/s,
 *    t->net.ring_gbps: on a node whose ranks share cores or a memory bus it
 *    is well below the ping-pong's).  Without the fit (fit_bytes 0, p = 1,
 *    or times that do not grow with the size) ring_gbps is 0 and alpha is
 *    (time - 2(p-1)/p bytes / bw) / (2(p-1)) with bw the slowest ping-pong
 *    bandwidth.  pt_topo_plan_hw takes both as the collectives' alpha and
 *    beta;
 *  - p >= 3: MPI_Allreduce of pair_bytes inside pairs of ranks (2i, 2i+1):
 *    with every rank in a pair (t->net.pair_us), and with half the pairs
 *    while the other ranks compute (t->net.pair_busy_us), best of 5 rounds:
 *    on a node whose ranks time-share cores, a rank waiting in a collective
 *    yields to ranks that compute and hold the core for their time slice,
 *    so a pipeline's send inside a step waits longer than with everyone
 *    communicating (pt_topo_plan_hw's busy_delay_s: the difference); about
 *    0 on a core per rank.  Where the
 *    node's ranks outnumber their CPUs, each is pinned for these timings
 *    to one CPU of its affinity mask (node-local rank i to the
 *    (i mod ncpu)-th), so a pair always spans two CPUs beside other
 *    pairs' ranks: unpinned, the time depended on where the scheduler
 *    happened to put the pair.
 *  - each collective kind the layouts call (lib/comm: pt_allreduce_sum,
 *    pt_reduce_scatter_sum, pt_allgather, pt_broadcast and pt_reduce_sum
 *    with the root going round, pt_sendrecv to the next rank in a ring,
 *    every rank sending at once) at coll_bytes[0] and [1] (the call's
 *    whole buffer; the slowest rank's mean of coll_iters calls after one
 *    warm-up): through both sizes t(b) = steps_k(p) alpha_k + b
 *    busfactor_k(p) / busbw_k (nccl-tests' bus bandwidth, Thakur et al.
 *    2005's ring steps, as lib/plan/cost.h prices them): t->net.coll_lat_us
 *    (at least the slowest ping-pong latency) and coll_busbw (GB/s) per
 *    kind; a kind whose time does not grow with the size keeps 0 (not
 *    measured);
 * Nodes are told apart by MPI_Comm_split_type(SHARED), each split
 * further by $SLURM_NODEID when every rank has it (srun; fake Slurm nodes
 * share one host): pt_comm_nodes; a node is named by $SLURMD_NODENAME
 * when every rank has it, else by the host name.
 * Rank 0's t->net gets the results (other ranks' too, by broadcast).
 * Returns PT_OK, PT_ECOMM (MPI error or wrong allreduce result),
 * PT_ENOMEM, PT_EINVAL (bad sizes). */
int pt_probe_mpi(pt_topo *t, MPI_Comm comm, const pt_probe_mpi_opts *o);

#endif
