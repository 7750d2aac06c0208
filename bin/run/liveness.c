/* SPDX-License-Identifier: MIT */
/* ptrain-run's liveness: the watchdog, the heartbeat between ranks, and
 * the whole-job abort when a peer died, stopped or hangs
 * (bin/run/run.h).  Needs MPI_THREAD_MULTIPLE for the heartbeat. */
#define _GNU_SOURCE
#include "run.h"
#include "energy/clock.h"

#include <mpi.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int run_rank = 0;

/* ---- the whole-job abort ------------------------------------------------
 * A rank that finds a peer dead, stopped or hung ends the whole job, not
 * only itself: under srun without --kill-on-bad-exit (Slurm's default) a
 * stopped task never exits and the step would hold its nodes.
 * MPI_Abort makes the launcher kill every task (Open MPI under srun:
 * PMIx_Abort, which Slurm's mpi/pmix plugin answers by killing the step
 * with SIGKILL, stopped tasks included; under mpirun, its daemons).  The
 * MPI library may itself be stuck on the broken connection: a thread of
 * its own ends the rank 10 s later whatever MPI_Abort does. */
static void *abort_backstop(void *arg)
{
    (void)arg;
    sleep(10);
    pt_clock_restore_emergency();
    _exit(PT_EXIT_PEER);
    return NULL;
}

void run_abort_job(const char *line)
{
    static atomic_int once;
    if (atomic_fetch_add(&once, 1)) { /* another thread is aborting */
        for (;;) pause();
    }
    fprintf(stderr, "%s\n", line);
    fflush(stderr);
    /* the launcher kills every task with SIGKILL after MPI_Abort: the
     * energy plan's clocks go back now */
    pt_clock_restore_emergency();
    pthread_t th;
    pthread_attr_t at;
    if (pthread_attr_init(&at) == 0) {
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&th, &at, abort_backstop, NULL) != 0) _exit(PT_EXIT_PEER);
        pthread_attr_destroy(&at);
    }
    int init = 0, fin = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    if (init && !fin) MPI_Abort(MPI_COMM_WORLD, PT_EXIT_PEER);
    _exit(PT_EXIT_PEER);
}

/* ---- watchdog ----------------------------------------------------------
 * A peer that hangs leaves the others blocked in a collective; the
 * heartbeat below does not see it (the hung rank's heartbeat thread runs
 * on).  When no collective phase completed for --watchdog seconds, the
 * rank prints one line naming the phase it waits in and aborts the job. */
static _Atomic double watchdog_last;
static const char *_Atomic watchdog_phase = "start-up";
static double watchdog_secs;

void run_watchdog_beat(const char *phase)
{
    atomic_store(&watchdog_last, pt_now());
    atomic_store(&watchdog_phase, phase);
}

static void *watchdog_main(void *arg)
{
    (void)arg;
    for (;;) {
        sleep(1);
        double idle = pt_now() - atomic_load(&watchdog_last);
        if (idle > watchdog_secs) {
            char line[300];
            snprintf(line, sizeof line, "ptrain-run: error: rank %d: no progress for %.0f s after '%s' (--watchdog "
                     "%.0f): a peer rank may have died or hung; every rank exits", run_rank, idle,
                     atomic_load(&watchdog_phase), watchdog_secs);
            run_abort_job(line);
        }
    }
    return NULL;
}

/* Start fn in a detached thread; a warning naming `what` when it cannot. */
static void start_detached(void *(*fn)(void *), const char *what)
{
    pthread_t th;
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&th, &at, fn, NULL) != 0)
        fprintf(stderr, "ptrain-run: warning: rank %d: cannot start the %s thread\n", run_rank, what);
    pthread_attr_destroy(&at);
}

void run_watchdog_start(double secs)
{
    watchdog_secs = secs;
    run_watchdog_beat("start-up");
    if (secs > 0) start_detached(watchdog_main, "watchdog");
}

/* ---- heartbeat ---------------------------------------------------------
 * The watchdog above is long (a step may legitimately take minutes); a peer
 * that DIES must end the job sooner, also where the launcher does not tear
 * it down: under srun without --kill-on-bad-exit, a SIGKILLed rank leaves
 * the others blocked in a collective for good (Open MPI's TCP transport
 * prints "peer process has unexpectedly disconnected" and keeps waiting).
 * So a thread per rank exchanges heartbeats on a duplicate of
 * MPI_COMM_WORLD, independent of computation (needs MPI_THREAD_MULTIPLE):
 * a star around rank 0, every HB_INTERVAL_S seconds each worker sends one
 * int to rank 0 and rank 0 one to each worker.  When rank 0 hears nothing
 * from rank k for $PTRAIN_HEARTBEAT seconds (default HB_TIMEOUT_S; 0 = off)
 * it prints one line naming rank k and its host and aborts the whole job
 * (run_abort_job: every task ends, status 3, a stopped one too); a worker
 * that hears nothing from rank 0 does the same naming rank 0.  A rank that leaves in order (MPI_Finalize) says
 * so first and is no longer watched.  A detector that was itself not
 * running for half the timeout (the job was suspended or stopped as a
 * whole) restarts its clocks instead of blaming its peers.  The heartbeat
 * starts right after MPI_Init, so a rank that dies during start-up is
 * covered too.  Cost: 2 (N-1) messages of 4 bytes per second through rank
 * 0, and MPI_THREAD_MULTIPLE's locking. */
#define HB_TIMEOUT_S 15
#define HB_INTERVAL_S 1.0
#define HB_TAG 4242
#define HB_HOST 64
enum { HB_BEAT = -1, HB_LEAVING = -2 };
static MPI_Comm hb_comm = MPI_COMM_NULL;
static int hb_world;
static double hb_timeout;
static char (*hb_host)[HB_HOST];
static pthread_t hb_thread;
static int hb_running;
static atomic_int hb_stop;
static _Atomic double hb_loop_at; /* when the heartbeat loop last went round */

/* The heartbeat thread itself can get stuck inside MPI when a peer's
 * connection breaks (Open MPI's TCP transport retrying a send to a killed
 * rank while the main thread is in a collective).  This MPI-free thread
 * ends the rank when the heartbeat loop has not gone round for the timeout
 * plus 5 s; like the loop, it does not blame anyone after the process
 * itself was stopped (a gap in its own sleeps). */
static void *hb_guard_main(void *arg)
{
    (void)arg;
    double prev = pt_now();
    while (!atomic_load(&hb_stop)) {
        sleep(1);
        double now = pt_now();
        if (now - prev > hb_timeout / 2) { /* this process was not running: give the loop a round */
            prev = now;
            atomic_store(&hb_loop_at, now);
            continue;
        }
        prev = now;
        double stuck = now - atomic_load(&hb_loop_at);
        if (!atomic_load(&hb_stop) && stuck > hb_timeout + 5) {
            char line[300];
            snprintf(line, sizeof line, "ptrain-run: error: rank %d: the heartbeat has been stuck inside MPI for "
                     "%.0f s: a peer rank died or its connection broke; every rank exits (PTRAIN_HEARTBEAT=%.0f)",
                     run_rank, stuck, hb_timeout);
            run_abort_job(line);
        }
    }
    return NULL;
}

static void hb_send(int to, int *buf, MPI_Request *req, int value)
{
    int done = 1;
    if (*req != MPI_REQUEST_NULL) MPI_Test(req, &done, MPI_STATUS_IGNORE);
    if (!done) return; /* the last one is still on its way: no pile-up towards a slow peer */
    *buf = value;
    MPI_Isend(buf, 1, MPI_INT, to, HB_TAG, hb_comm, req);
}

static void *hb_main(void *arg)
{
    (void)arg;
    const int n = hb_world, root = run_rank == 0;
    const int npeer = root ? n : 1; /* rank 0 indexes peers by rank, a worker has one: rank 0 */
    int *rbuf = calloc((size_t)npeer, sizeof *rbuf), *sbuf = calloc((size_t)npeer, sizeof *sbuf);
    MPI_Request *rreq = malloc(sizeof *rreq * (size_t)npeer), *sreq = malloc(sizeof *sreq * (size_t)npeer);
    double *seen = malloc(sizeof *seen * (size_t)npeer);
    char *gone = calloc((size_t)npeer, 1);
    if (!rbuf || !sbuf || !rreq || !sreq || !seen || !gone) {
        fprintf(stderr, "ptrain-run: warning: rank %d: out of memory for the heartbeat; it is off\n", run_rank);
        return NULL;
    }
    double now = pt_now(), next_send = now, prev = now;
    for (int i = 0; i < npeer; i++) {
        sreq[i] = rreq[i] = MPI_REQUEST_NULL;
        seen[i] = now;
        int src = root ? i : 0;
        if (src == run_rank) { gone[i] = 1; continue; }
        MPI_Irecv(&rbuf[i], 1, MPI_INT, src, HB_TAG, hb_comm, &rreq[i]);
    }
    int watching = 1;
    while (!atomic_load(&hb_stop)) {
        now = pt_now();
        atomic_store(&hb_loop_at, now);
        if (now - prev > hb_timeout / 2) /* this process itself was not running */
            for (int i = 0; i < npeer; i++) seen[i] = now;
        prev = now;
        for (int i = 0; i < npeer; i++) {
            int flag = 0;
            while (!gone[i] && rreq[i] != MPI_REQUEST_NULL &&
                   (MPI_Test(&rreq[i], &flag, MPI_STATUS_IGNORE), flag)) {
                seen[i] = now;
                int v = rbuf[i];
                if (v == HB_LEAVING) { gone[i] = 1; if (!root) watching = 0; break; }
                MPI_Irecv(&rbuf[i], 1, MPI_INT, root ? i : 0, HB_TAG, hb_comm, &rreq[i]);
            }
        }
        if (now >= next_send) {
            for (int i = 0; i < npeer; i++)
                if (!gone[i]) hb_send(root ? i : 0, &sbuf[i], &sreq[i], HB_BEAT);
            next_send = now + HB_INTERVAL_S;
        }
        for (int i = 0; watching && i < npeer; i++) {
            if (gone[i] || now - seen[i] <= hb_timeout) continue;
            int dead = root ? i : 0;
            char line[300];
            snprintf(line, sizeof line, "ptrain-run: error: rank %d: rank %d (host %s) sent no heartbeat for %.0f s: "
                     "it died or hangs; every rank exits (PTRAIN_HEARTBEAT=%.0f)", run_rank, dead,
                     hb_host ? hb_host[dead] : "?", now - seen[i], hb_timeout);
            run_abort_job(line);
        }
        usleep(50000);
    }
    /* orderly: say so, then leave no request behind for MPI_Finalize */
    for (int i = 0; i < npeer; i++) {
        if (gone[i] || (root ? i : 0) == run_rank) continue;
        if (sreq[i] != MPI_REQUEST_NULL) MPI_Request_free(&sreq[i]);
        sbuf[i] = HB_LEAVING;
        MPI_Isend(&sbuf[i], 1, MPI_INT, root ? i : 0, HB_TAG, hb_comm, &sreq[i]);
    }
    double t0 = pt_now();
    int all = 0;
    while (!all && pt_now() - t0 < 2) {
        MPI_Testall(npeer, sreq, &all, MPI_STATUSES_IGNORE);
        if (!all) usleep(1000);
    }
    for (int i = 0; i < npeer; i++) {
        if (sreq[i] != MPI_REQUEST_NULL) MPI_Request_free(&sreq[i]);
        if (rreq[i] != MPI_REQUEST_NULL) {
            MPI_Cancel(&rreq[i]);
            MPI_Wait(&rreq[i], MPI_STATUS_IGNORE);
        }
    }
    free(rbuf); free(sbuf); free(rreq); free(sreq); free(seen); free(gone);
    return NULL;
}

/* Before the heartbeat thread starts: one message from rank 0 to every
 * rank and one back, from this (the main) thread, so that the thread only
 * ever talks to peers the MPI library has already set up.  Open MPI adds
 * a peer lazily, on the first message to or from it, and its TCP
 * transport's peer set-up has known races between threads (open-mpi/ompi
 * #3035, worked around in #8966); without the wire-up a worker's heartbeat
 * thread and its main thread (a tp group's first collective that includes
 * rank 0) could both reach rank 0 first.  Only rank 0 starts connections
 * here (a worker answers once it has heard from rank 0), so no two ranks
 * dial each other at the same time either.  Cost: 2 (N-1) messages of 4
 * bytes at start-up.  (The crash inside MPI_Init seen under load on the
 * local Slurm was not this but Slurm's barrier not holding across nodes:
 * spank/stepd.c, ptsp_stepd_post_opt sets SLURM_PMIX_FENCE=ring; tests/slurm/test_fence.sh.) */
static void hb_wireup(void)
{
    const int tag = HB_TAG + 1;
    int v = 0;
    if (run_rank != 0) {
        MPI_Recv(&v, 1, MPI_INT, 0, tag, hb_comm, MPI_STATUS_IGNORE);
        MPI_Send(&v, 1, MPI_INT, 0, tag, hb_comm);
        return;
    }
    int *back = calloc((size_t)hb_world, sizeof *back);
    MPI_Request *req = malloc(sizeof *req * 2 * (size_t)hb_world);
    if (!back || !req) { /* serially, then */
        for (int k = 1; k < hb_world; k++) {
            MPI_Send(&v, 1, MPI_INT, k, tag, hb_comm);
            MPI_Recv(&v, 1, MPI_INT, k, tag, hb_comm, MPI_STATUS_IGNORE);
        }
    } else {
        int n = 0;
        for (int k = 1; k < hb_world; k++) MPI_Isend(&v, 1, MPI_INT, k, tag, hb_comm, &req[n++]);
        for (int k = 1; k < hb_world; k++) MPI_Irecv(&back[k], 1, MPI_INT, k, tag, hb_comm, &req[n++]);
        MPI_Waitall(n, req, MPI_STATUSES_IGNORE);
    }
    free(back);
    free(req);
}

/* Right after MPI_Init (collective: every rank calls it).  The timeout is
 * agreed (the largest; off if any rank has it off) so no rank watches a
 * peer that sends nothing. */
int run_heartbeat_start(int world)
{
    int rc = PT_OK;
    hb_world = world;
    double t = HB_TIMEOUT_S;
    const char *e = getenv("PTRAIN_HEARTBEAT");
    long v;
    if (e && *e) {
        if (pt_parse_int("PTRAIN_HEARTBEAT", e, 0, 3600, &v) == PT_OK && (v == 0 || v >= 3)) t = (double)v;
        else rc = pt_fail(PT_EINVAL, "invalid PTRAIN_HEARTBEAT='%.40s' (valid: 0 = off, or seconds from 3 to 3600)", e);
    }
    int provided = MPI_THREAD_SINGLE;
    MPI_Query_thread(&provided);
    if (world < 2) return rc;
    double lo = t, hi = t;
    MPI_Allreduce(&t, &lo, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&t, &hi, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (lo <= 0) return rc;
    if (provided < MPI_THREAD_MULTIPLE) {
        if (run_rank == 0)
            fprintf(stderr, "ptrain-run: warning: the MPI library gives no MPI_THREAD_MULTIPLE: no heartbeat, a dead "
                    "rank is noticed only by the launcher or --watchdog\n");
        return rc;
    }
    hb_timeout = hi;
    MPI_Comm_dup(MPI_COMM_WORLD, &hb_comm);
    MPI_Comm_set_errhandler(hb_comm, MPI_ERRORS_RETURN); /* a send to a dead peer: the timeout decides */
    char me[HB_HOST] = "";
    int len = 0;
    char full[MPI_MAX_PROCESSOR_NAME];
    const char *node = getenv("SLURMD_NODENAME"); /* Slurm's node name (fake nodes share a hostname) */
    if (node && *node) snprintf(me, sizeof me, "%.63s", node);
    else if (MPI_Get_processor_name(full, &len) == MPI_SUCCESS) snprintf(me, sizeof me, "%.63s", full);
    hb_host = calloc((size_t)world, HB_HOST);
    int have = hb_host != NULL, all = 0;
    MPI_Allreduce(&have, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all) { free(hb_host); hb_host = NULL; return rc; }
    MPI_Allgather(me, HB_HOST, MPI_CHAR, hb_host, HB_HOST, MPI_CHAR, MPI_COMM_WORLD);
    hb_wireup();
    atomic_store(&hb_loop_at, pt_now());
    if (pthread_create(&hb_thread, NULL, hb_main, NULL) == 0) {
        hb_running = 1;
        start_detached(hb_guard_main, "heartbeat guard");
    }
    else fprintf(stderr, "ptrain-run: warning: rank %d: cannot start the heartbeat thread\n", run_rank);
    return rc;
}

/* Every orderly exit passes MPI_Finalize; through MPI's profiling
 * interface (MPI-3.1 section 14.2) the heartbeat thread is stopped first,
 * whichever of ptrain-run's exits calls it, so no MPI call of the thread
 * can follow MPI_Finalize. */
int MPI_Finalize(void)
{
    if (hb_running) {
        atomic_store(&hb_stop, 1);
        pthread_join(hb_thread, NULL);
        hb_running = 0;
    }
    return PMPI_Finalize();
}

