/* ptrain-run: the training job.
 *
 * One process per rank (srun, sbatch, or mpirun).  The plan comes from the
 * PTRAIN_* variables the SPANK plugin injects, overridden by flags of the
 * same names, so the same binary runs under plain mpirun.  Rank 0 prints the
 * plan, the model size, one line per step (loss, learning rate, gradient
 * norm, ms/step, tokens/s), the validation loss every --val-every steps
 * and a final "done:" summary.
 */
#define _GNU_SOURCE
#include "config.h"
#include "comm/comm.h"
#include "backend/blas.h"
#include "core/core.h"
#include "core/file.h"
#include "ckpt/ckpt.h"
#include "data/shard.h"
#include "model/gpt.h"
#include "pipeline/pipeline.h"
#include "train/train.h"
#include "parallel/context.h"
#include "plan/cost.h"
#include "plan/plan.h"
#include "plan/resolve.h"
#include "plan/search.h"
#include "topo/topo.h"
#include "topo/topo_plan.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <unistd.h>
#include <limits.h>
#include <stdarg.h>
#include <math.h>
#include <mpi.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct opts {
    const char *model, *data, *rank_order, *mode, *metrics;
    const char *model_what;  /* "--model" or "PTRAIN_MODEL": where the model came from */
    int layers, heads, embd, seq_len, vocab;
    long steps, batch, warmup, val_every, val_batches, log_every, threads, seed, dp, tp, tp_depth, sp;
    long pp, microbatches, virtual_stages; /* 0 = not given */
    int zero, schedule, recompute;         /* -1 = not given */
    const char *pp_split;                  /* NULL = not given */
    float lr, min_lr, wd, clip, eps;
    int dry_run, quiet;
    double watchdog;   /* seconds without progress before a rank gives up; 0 = off */
    double peak_gflops; /* per-rank peak for MFU (--peak-gflops, PTRAIN_PEAK_GFLOPS); 0 = not given */
    char order[4];     /* --rank-order, parsed */
    const char *save_dir, *resume; /* --save-dir, --resume (NULL = not given) */
    long save_every, keep;         /* 0 = not given */
    const char *topology;          /* --topology (else PTRAIN_TOPOLOGY): node model for --mode auto */
    int explain;                   /* --explain: print the auto plan's explanation */
} opts;

static int world_rank = 0;

/* ---- watchdog ----------------------------------------------------------
 * A peer that dies mid-run leaves the others blocked in a collective.
 * mpirun (and srun with --kill-on-bad-exit) tear the job down when a rank
 * exits abnormally; this thread is the backstop where the launcher does
 * not: when no collective phase completed for --watchdog seconds, the
 * rank prints one line naming the phase it waits in and exits with status
 * 3, which makes the launcher end the rest. */
static _Atomic double watchdog_last;
static const char *_Atomic watchdog_phase = "start-up";
static double watchdog_secs;

static void watchdog_beat(const char *phase)
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
            fprintf(stderr, "ptrain-run: error: rank %d: no progress for %.0f s after '%s' (--watchdog "
                    "%.0f): a peer rank may have died or hung; exiting\n", world_rank, idle,
                    atomic_load(&watchdog_phase), watchdog_secs);
            fflush(stderr);
            _exit(3);
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
        fprintf(stderr, "ptrain-run: warning: rank %d: cannot start the %s thread\n", world_rank, what);
    pthread_attr_destroy(&at);
}

static void watchdog_start(double secs)
{
    watchdog_secs = secs;
    watchdog_beat("start-up");
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
 * it prints one line naming rank k and its host, tells every other rank,
 * and all exit with status 3; a worker that hears nothing from rank 0 does
 * the same naming rank 0.  A rank that leaves in order (MPI_Finalize) says
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
enum { HB_BEAT = -1, HB_LEAVING = -2 }; /* a value >= 0: "rank v died", from rank 0 */
static MPI_Comm hb_comm = MPI_COMM_NULL;
static int hb_world;
static double hb_timeout;
static char (*hb_host)[HB_HOST];
static char hb_bad[200];     /* an invalid $PTRAIN_HEARTBEAT, reported at start-up */
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
            fprintf(stderr, "ptrain-run: error: rank %d: the heartbeat has been stuck inside MPI for %.0f s: a "
                    "peer rank died or its connection broke; exiting (PTRAIN_HEARTBEAT=%.0f)\n", world_rank, stuck,
                    hb_timeout);
            fflush(stderr);
            _exit(3);
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
    const int n = hb_world, root = world_rank == 0;
    const int npeer = root ? n : 1; /* rank 0 indexes peers by rank, a worker has one: rank 0 */
    int *rbuf = calloc((size_t)npeer, sizeof *rbuf), *sbuf = calloc((size_t)npeer, sizeof *sbuf);
    MPI_Request *rreq = malloc(sizeof *rreq * (size_t)npeer), *sreq = malloc(sizeof *sreq * (size_t)npeer);
    double *seen = malloc(sizeof *seen * (size_t)npeer);
    char *gone = calloc((size_t)npeer, 1);
    if (!rbuf || !sbuf || !rreq || !sreq || !seen || !gone) {
        fprintf(stderr, "ptrain-run: warning: rank %d: out of memory for the heartbeat; it is off\n", world_rank);
        return NULL;
    }
    double now = pt_now(), next_send = now, prev = now;
    for (int i = 0; i < npeer; i++) {
        sreq[i] = rreq[i] = MPI_REQUEST_NULL;
        seen[i] = now;
        int src = root ? i : 0;
        if (src == world_rank) { gone[i] = 1; continue; }
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
                if (v >= 0 && !root) _exit(3); /* rank 0 named the dead rank */
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
            fprintf(stderr, "ptrain-run: error: rank %d: rank %d (host %s) sent no heartbeat for %.0f s: it died "
                    "or hangs; every rank exits (PTRAIN_HEARTBEAT=%.0f)\n", world_rank, dead,
                    hb_host ? hb_host[dead] : "?", now - seen[i], hb_timeout);
            fflush(stderr);
            if (root) { /* tell the others, give the messages a moment to leave */
                static int notice;
                notice = dead;
                for (int k = 1; k < n; k++)
                    if (k != dead && !gone[k]) {
                        if (sreq[k] != MPI_REQUEST_NULL) MPI_Request_free(&sreq[k]);
                        MPI_Isend(&notice, 1, MPI_INT, k, HB_TAG, hb_comm, &sreq[k]);
                    }
                double t0 = pt_now();
                int all = 0;
                while (!all && pt_now() - t0 < 2) {
                    MPI_Testall(n, sreq, &all, MPI_STATUSES_IGNORE);
                    usleep(10000);
                }
            }
            _exit(3);
        }
        usleep(50000);
    }
    /* orderly: say so, then leave no request behind for MPI_Finalize */
    for (int i = 0; i < npeer; i++) {
        if (gone[i] || (root ? i : 0) == world_rank) continue;
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
 * spank/ptrain_spank.c, pmix_fence_ring; tests/slurm/test_fence.sh.) */
static void hb_wireup(void)
{
    const int tag = HB_TAG + 1;
    int v = 0;
    if (world_rank != 0) {
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
static void heartbeat_start(int world)
{
    hb_world = world;
    double t = HB_TIMEOUT_S;
    const char *e = getenv("PTRAIN_HEARTBEAT");
    long v;
    if (e && *e) {
        if (pt_parse_int("PTRAIN_HEARTBEAT", e, 0, 3600, &v) == PT_OK && (v == 0 || v >= 3)) t = (double)v;
        else snprintf(hb_bad, sizeof hb_bad, "invalid PTRAIN_HEARTBEAT='%.40s' (valid: 0 = off, or seconds from 3 to 3600)", e);
    }
    int provided = MPI_THREAD_SINGLE;
    MPI_Query_thread(&provided);
    if (world < 2) return;
    double lo = t, hi = t;
    MPI_Allreduce(&t, &lo, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&t, &hi, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (lo <= 0) return;
    if (provided < MPI_THREAD_MULTIPLE) {
        if (world_rank == 0)
            fprintf(stderr, "ptrain-run: warning: the MPI library gives no MPI_THREAD_MULTIPLE: no heartbeat, a dead "
                    "rank is noticed only by the launcher or --watchdog\n");
        return;
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
    if (!all) { free(hb_host); hb_host = NULL; return; }
    MPI_Allgather(me, HB_HOST, MPI_CHAR, hb_host, HB_HOST, MPI_CHAR, MPI_COMM_WORLD);
    hb_wireup();
    atomic_store(&hb_loop_at, pt_now());
    if (pthread_create(&hb_thread, NULL, hb_main, NULL) == 0) {
        hb_running = 1;
        start_detached(hb_guard_main, "heartbeat guard");
    }
    else fprintf(stderr, "ptrain-run: warning: rank %d: cannot start the heartbeat thread\n", world_rank);
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

/* --help, grouped by topic; tests/unit/test_help.sh checks that every long
 * option of parse_args' table appears here. */
static void usage(FILE *f)
{
    fprintf(f,
        "usage: ptrain-run [options]   (one process per rank: srun, sbatch or mpirun)\n"
        "\n"
        "Model:\n"
        "  --model NAME|L,H,C,T,V  preset: %s, or the five sizes (default\n"
        "                       PTRAIN_MODEL, else tiny)\n"
        "  --layers N --heads N --embd N --seq-len N --vocab N   override the preset\n"
        "  --seed N             initialisation seed (default 1337)\n"
        "\n"
        "Data:\n"
        "  --data DIR|synthetic[:SEED]  DIR holds train.bin and val.bin (ptrain-data prepare)\n"
        "  --batch B            global batch in sequences (default PTRAIN_BATCH, else 8;\n"
        "                       multiple of dp)\n"
        "  --steps N            optimizer steps (default 200)\n"
        "  --val-every N        validation every N steps (default 50; 0 = only at the end)\n"
        "  --val-batches N      batches per validation (default 8)\n"
        "\n"
        "Plan and parallelism (default: the PTRAIN_* variables the SPANK plugin sets):\n"
        "  --mode auto|1d|2d|2.5d|3d|off  tensor-parallel layout (off: as 1d; default 1d);\n"
        "                       auto plans every size not given from the job's nodes, the\n"
        "                       node model, --model and --batch (as ptrain-plan)\n"
        "  --dp N --tp N --tp-depth D --sp N --pp N   the plan's group sizes\n"
        "                       (dp = world / (pp * tp * sp) when not given)\n"
        "  --topology FILE      node model for --mode auto: ptrain-topo JSON or hwloc XML\n"
        "                       (default PTRAIN_TOPOLOGY, else this node's hwloc model)\n"
        "  --explain            with --mode auto: print the chosen plan, the runners-up and why\n"
        "  --rank-order DPT|cluster|spread   how grid ranks map to groups (a permutation\n"
        "                       of D, P, T, outermost first; default PTRAIN_RANK_ORDER)\n"
        "  --micro-batches M    microbatches per step: each dp rank's batch/dp sequences in M\n"
        "                       pieces (default PTRAIN_MICROBATCHES, else 1)\n"
        "  --schedule gpipe|1f1b|interleaved   pipeline schedule (default 1f1b)\n"
        "  --virtual-stages V   model chunks per pipeline rank, interleaved only (default 1)\n"
        "  --pp-split N,N,...|even  blocks per pipeline stage (default even)\n"
        "  --zero 0|1|2|3       ZeRO stage over the dp group (default PTRAIN_ZERO, else 0)\n"
        "  --recompute none|block|attention   activation checkpointing (default\n"
        "                       PTRAIN_CKPT_ACT, else none)\n"
        "  --threads N          compute threads per rank (default: cores / ranks on the node)\n"
        "  --dry-run            print every rank's place in the grid and exit\n"
        "\n"
        "Optimizer (AdamW, cosine schedule):\n"
        "  --lr F --min-lr F    peak and final learning rate (default 1e-3, lr/10)\n"
        "  --warmup N           linear warm-up steps (default steps/10, at most 100)\n"
        "  --weight-decay F --grad-clip F   (default 0.1, 1.0; 0 = no clipping)\n"
        "  --adam-eps F         AdamW's epsilon (default 1e-8)\n"
        "\n"
        "Logging and metrics:\n"
        "  --log-every N        print every N steps (default 1)\n"
        "  --quiet              only the plan, validation and summary lines\n"
        "  --metrics FILE       write every step and validation as JSON Lines (rank 0;\n"
        "                       plot with ptrain-plot FILE)\n"
        "  --peak-gflops F      peak GFLOP/s of one rank, for MFU in the metrics and the\n"
        "                       summary (default PTRAIN_PEAK_GFLOPS; none: no MFU)\n"
        "\n"
        "Robustness:\n"
        "  --watchdog SECONDS   exit (status 3) when no step completes for this long: a peer\n"
        "                       rank hangs (default 600; 0 = off); a rank that dies or stops ends\n"
        "                       the job after PTRAIN_HEARTBEAT seconds without heartbeat (15; 0 = off)\n"
        "\n"
        "Checkpoints:\n"
        "  --save-dir DIR       checkpoints go to DIR/step-NNNNNNNN (DIR/latest names the newest);\n"
        "                       SIGTERM or SIGUSR1 then finish the step, save and exit 0\n"
        "  --save-every N       save every N steps (needs --save-dir)\n"
        "  --keep K             keep only the newest K checkpoints after each save\n"
        "  --resume auto|DIR    continue from DIR, or (auto) the newest valid checkpoint of\n"
        "                       --save-dir, else start fresh (any plan: resharded)\n"
        "\n"
        "  --help, --version    this text; the version\n"
        "See ptrain-run(1), ptrain-layouts(7) and ptrain-env(7).\n",
        pt_gpt_preset_names());
}

/* Input errors.  During start-up (arguments, plan, model config, data) an
 * error is recorded and the rank jumps to the start-up agreement, which
 * every rank enters, so a rank that fails alone (a per-node PTRAIN_*
 * difference) never leaves the others waiting in a collective: all exit
 * with status 2 and rank 0 prints one line naming the failing ranks.
 * After start-up, an input error is one every rank detects identically:
 * rank 0 prints it, all leave with status 2. */
static jmp_buf startup_jmp;
static int in_startup;
static pt_error startup_err;

static int bad_input(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int bad_input(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pt_verrprintf(&startup_err, fmt, ap);
    va_end(ap);
    if (in_startup) longjmp(startup_jmp, 1);
    if (world_rank == 0) fprintf(stderr, "ptrain-run: error: %s\n", startup_err.text);
    MPI_Finalize();
    exit(2);
}

/* Errors that may happen on some ranks only (files, memory, a model that
 * does not fit the layout): every rank learns that one failed, the lowest
 * failing rank says why in one line, all exit 1. */
static void agree(int rc, const char *what)
{
    watchdog_beat(what);
    int mine = rc == PT_OK ? INT_MAX : world_rank, first = INT_MAX;
    MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (first == INT_MAX) return;
    if (world_rank == first) fprintf(stderr, "ptrain-run: error: rank %d: %s: %s\n", world_rank, what, pt_errmsg());
    MPI_Finalize();
    exit(1);
}

/* As agree, for a collective library call whose status every rank already
 * shares, with the message naming the rank it came from when only some
 * failed (lib/ckpt): rank 0 prints it without a "rank N:" of its own, which
 * would blame rank 0 for another rank's file. */
static void agree_collective(int rc, const char *what)
{
    watchdog_beat(what);
    int mine = rc == PT_OK ? 0 : 1, any = 0;
    MPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (!any) return;
    if (world_rank == 0) fprintf(stderr, "ptrain-run: error: %s: %s\n", what, rc ? pt_errmsg() : "failed on another rank");
    MPI_Finalize();
    exit(1);
}

static float parse_float(const char *what, const char *s, float lo, float hi)
{
    char *end;
    float v = strtof(s, &end);
    if (!*s || *end || !(v >= lo && v <= hi)) bad_input("%s: '%s' is not a number in [%g, %g]", what, s, lo, hi);
    return v;
}

static long parse_long(const char *what, const char *s, long lo, long hi)
{
    long v;
    if (pt_parse_int(what, s, lo, hi, &v)) bad_input("%s", pt_errmsg());
    return v;
}

static int local_ranks(void)
{
    const char *v = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    if (!v) v = getenv("LOCAL_WORLD_SIZE");
    if (!v) v = getenv("SLURM_NTASKS_PER_NODE");
    long n;
    if (v && pt_parse_int("local size", v, 1, 1 << 20, &n) == PT_OK) return (int)n;
    return 1;
}

static int default_threads(void)
{
    const char *e = getenv("OMP_NUM_THREADS");
    long n;
    if (e && pt_parse_int("OMP_NUM_THREADS", e, 1, 4096, &n) == PT_OK) return (int)n;
    cpu_set_t set;
    int cpus = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
    int t = cpus / local_ranks();
    return t < 1 ? 1 : t;
}

/* "1h02m", "3m05s", "42s": a duration for the ETA column. */
static void fmt_duration(char *buf, size_t len, double sec)
{
    long s = sec > 0 && sec < 1e9 ? (long)(sec + 0.5) : 0;
    if (s >= 3600) snprintf(buf, len, "%ldh%02ldm", s / 3600, s / 60 % 60);
    else if (s >= 60) snprintf(buf, len, "%ldm%02lds", s / 60, s % 60);
    else snprintf(buf, len, "%lds", s);
}

/* The metrics log (--metrics FILE, rank 0 only): JSON Lines, one object
 * per line, flushed as written so a crashed or preempted run keeps every
 * line it finished:
 *   {"type":"header", model, plan, sizes, "tokens_per_step", "steps"}
 *   {"type":"train","step":N,"loss":..,"lr":..,"norm":..,"step_ms":..,"tok_s":..,"elapsed_s":..,
 *    "gflops_per_rank":..,["mfu":..,]"peak_mib":..,"sent_bytes":{"dp":..,"tp":..,"pp":..,"sp":..,"sync":..,"world":..}}
 *   {"type":"val","step":N,"val_loss":..,"elapsed_s":..}
 *   {"type":"done", ...the summary line's numbers}
 * The file is created or truncated; a symlink or a non-regular file at
 * that path is refused. */
static FILE *metrics_open(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0644);
    if (fd < 0) {
        pt_fail(PT_EIO, "cannot write the metrics file %s: %s", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
        close(fd);
        pt_fail(PT_EIO, "the metrics file %s is not a regular file", path);
        return NULL;
    }
    FILE *f = fdopen(fd, "w");
    if (!f) {
        close(fd);
        pt_fail(PT_EIO, "cannot write the metrics file %s: %s", path, strerror(errno));
    }
    return f;
}

static void metrics_line(FILE *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void metrics_line(FILE *f, const char *fmt, ...)
{
    if (!f) return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    fputc('\n', f);
    fflush(f);
}

/* A JSON number: NaN and infinities (a diverged loss) become null. */
static const char *jnum(char *buf, size_t len, double v)
{
    if (isfinite(v)) snprintf(buf, len, "%.6g", v);
    else snprintf(buf, len, "null");
    return buf;
}

/* Per-step numbers of a train record that need every rank (--metrics
 * only, so a run without it has no extra collective per step).
 * Index 0: the arena's high-water mark (bytes); 1..6: modelled bytes sent
 * (pt_comm_sent_total) in the context's groups: dp (the dp group alone:
 * nothing sends there today), tp (with the axis sub-groups of the
 * 2D/2.5D/3D layouts),
 * pp (stage to stage, with the embed group: the tied embedding's gradient
 * between first and last stage), sp, sync (the gradient sum over dp x sp,
 * and over the tp axes a parameter is replicated on; ZeRO's reduce-scatter
 * and allgather run here too) and world. */
enum { ST_PEAK, ST_DP, ST_TP, ST_PP, ST_SP, ST_SYNC, ST_WORLD, ST_N };
static const char *const st_group[ST_N] = {"peak", "dp", "tp", "pp", "sp", "sync", "world"};

static void group_sent(const pt_pctx *c, uint64_t v[ST_N])
{
    uint64_t tp = pt_comm_sent_total(&c->tp), sync = 0; /* host byte counters, not tensors */
    for (int m = 0; m < (1 << PT_TP_AXES); m++) {
        tp += pt_comm_sent_total(&c->tp_sub[m]);
        sync += pt_comm_sent_total(&c->sync[m]);
    }
    v[ST_PEAK] = 0;
    v[ST_DP] = pt_comm_sent_total(&c->dp);
    v[ST_TP] = tp;
    v[ST_SYNC] = sync;
    v[ST_PP] = pt_comm_sent_total(&c->pp) + pt_comm_sent_total(&c->embed);
    v[ST_SP] = pt_comm_sent_total(&c->sp);
    v[ST_WORLD] = pt_comm_sent_total(&c->world);
}

/* The step's bytes per group (since `before`) and the arena peak, each the
 * maximum over all ranks.  Collective over MPI_COMM_WORLD: every rank
 * calls it after every step.  out[ST_PEAK] in bytes. */
static void step_stats(const pt_pctx *c, const pt_arena *a, const uint64_t before[ST_N], uint64_t out[ST_N])
{
    uint64_t now[ST_N], mine[ST_N];
    group_sent(c, now);
    for (int i = 1; i < ST_N; i++) mine[i] = now[i] - before[i];
    mine[ST_PEAK] = a->peak;
    watchdog_beat("metrics");
    MPI_Allreduce(mine, out, ST_N, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
}

/* The train record's fields after elapsed_s: achieved model GFLOP/s per
 * rank (pt_gpt_flops_per_token * tokens/s / world: model FLOPs, recompute
 * not counted, PaLM appendix B), MFU against --peak-gflops when given,
 * peak memory (MiB, max over ranks) and the step's bytes per group. */
static void stats_json(char *buf, size_t len, double gflops, double peak_gflops, const uint64_t st[ST_N])
{
    size_t off = (size_t)snprintf(buf, len, ",\"gflops_per_rank\":%.4g", gflops);
    if (peak_gflops > 0 && off < len) off += (size_t)snprintf(buf + off, len - off, ",\"mfu\":%.4g", gflops / peak_gflops);
    if (off < len)
        off += (size_t)snprintf(buf + off, len - off, ",\"peak_mib\":%.2f,\"sent_bytes\":{",
                                (double)st[ST_PEAK] / (1024.0 * 1024.0));
    for (int i = 1; i < ST_N && off < len; i++)
        off += (size_t)snprintf(buf + off, len - off, "%s\"%s\":%llu", i > 1 ? "," : "", st_group[i],
                                (unsigned long long)st[i]);
    if (off < len) snprintf(buf + off, len - off, "}");
}

static void parse_args(int argc, char **argv, opts *o)
{
    enum { O_LAYERS = 256, O_HEADS, O_EMBD, O_SEQ, O_VOCAB, O_LR, O_MINLR, O_WARM, O_WD, O_CLIP,
           O_VALE, O_VALB, O_LOGE, O_SEED, O_THREADS, O_MODE, O_DP, O_TP, O_TPD, O_SP, O_ORDER, O_DRY,
           O_QUIET, O_WATCHDOG, O_METRICS, O_PP, O_MICRO, O_SCHED, O_VSTAGES, O_SPLIT, O_ZERO,
           O_RECOMPUTE, O_PEAK, O_SAVEDIR, O_SAVEEVERY, O_KEEP, O_RESUME, O_TOPOLOGY, O_EXPLAIN, O_EPS };
    static const struct option lo[] = {
        {"model", 1, 0, 'm'}, {"data", 1, 0, 'd'}, {"steps", 1, 0, 's'}, {"batch", 1, 0, 'b'},
        {"layers", 1, 0, O_LAYERS}, {"heads", 1, 0, O_HEADS}, {"embd", 1, 0, O_EMBD},
        {"seq-len", 1, 0, O_SEQ}, {"vocab", 1, 0, O_VOCAB}, {"lr", 1, 0, O_LR}, {"min-lr", 1, 0, O_MINLR},
        {"warmup", 1, 0, O_WARM}, {"weight-decay", 1, 0, O_WD}, {"grad-clip", 1, 0, O_CLIP},
        {"adam-eps", 1, 0, O_EPS},
        {"val-every", 1, 0, O_VALE}, {"val-batches", 1, 0, O_VALB}, {"log-every", 1, 0, O_LOGE},
        {"seed", 1, 0, O_SEED}, {"threads", 1, 0, O_THREADS}, {"mode", 1, 0, O_MODE}, {"dp", 1, 0, O_DP},
        {"tp", 1, 0, O_TP}, {"tp-depth", 1, 0, O_TPD}, {"sp", 1, 0, O_SP}, {"rank-order", 1, 0, O_ORDER}, {"dry-run", 0, 0, O_DRY}, {"quiet", 0, 0, O_QUIET}, {"watchdog", 1, 0, O_WATCHDOG},
        {"metrics", 1, 0, O_METRICS}, {"pp", 1, 0, O_PP}, {"micro-batches", 1, 0, O_MICRO},
        {"schedule", 1, 0, O_SCHED}, {"virtual-stages", 1, 0, O_VSTAGES},
        {"pp-split", 1, 0, O_SPLIT}, {"zero", 1, 0, O_ZERO}, {"recompute", 1, 0, O_RECOMPUTE},
        {"peak-gflops", 1, 0, O_PEAK},
        {"save-dir", 1, 0, O_SAVEDIR}, {"save-every", 1, 0, O_SAVEEVERY}, {"keep", 1, 0, O_KEEP},
        {"resume", 1, 0, O_RESUME}, {"topology", 1, 0, O_TOPOLOGY}, {"explain", 0, 0, O_EXPLAIN}, {"help", 0, 0, 'h'}, {"version", 0, 0, 'V'}, {0, 0, 0, 0}};
    memset(o, 0, sizeof *o);
    o->model = "tiny";
    o->steps = 200;
    o->batch = 8;
    o->lr = 1e-3f;
    o->eps = 1e-8f;
    o->min_lr = -1;
    o->warmup = -1;
    o->wd = 0.1f;
    o->clip = 1.0f;
    o->val_every = 50;
    o->val_batches = 8;
    o->log_every = 1;
    o->seed = 1337;
    o->threads = 0;
    o->watchdog = 600;
    o->zero = o->schedule = o->recompute = -1;
    opterr = 0;
    int c, model_given = 0, batch_given = 0;
    while ((c = getopt_long(argc, argv, "m:d:s:b:h", lo, NULL)) != -1) {
        switch (c) {
        case 'm': o->model = optarg; model_given = 1; break;
        case 'd': o->data = optarg; break;
        case 's': o->steps = parse_long("--steps", optarg, 1, 100000000); break;
        case 'b': o->batch = parse_long("--batch", optarg, 1, 1 << 20); batch_given = 1; break;
        case O_LAYERS: o->layers = (int)parse_long("--layers", optarg, 1, 4096); break;
        case O_HEADS: o->heads = (int)parse_long("--heads", optarg, 1, 4096); break;
        case O_EMBD: o->embd = (int)parse_long("--embd", optarg, 1, 1 << 20); break;
        case O_SEQ: o->seq_len = (int)parse_long("--seq-len", optarg, 1, 1 << 20); break;
        case O_VOCAB: o->vocab = (int)parse_long("--vocab", optarg, 2, 65536); break;
        case O_LR: o->lr = parse_float("--lr", optarg, 0, 10); break;
        case O_MINLR: o->min_lr = parse_float("--min-lr", optarg, 0, 10); break;
        case O_WARM: o->warmup = parse_long("--warmup", optarg, 0, 100000000); break;
        case O_WD: o->wd = parse_float("--weight-decay", optarg, 0, 10); break;
        case O_CLIP: o->clip = parse_float("--grad-clip", optarg, 0, 1e6f); break;
        case O_EPS: o->eps = parse_float("--adam-eps", optarg, 1e-30f, 1); break;
        case O_VALE: o->val_every = parse_long("--val-every", optarg, 0, 100000000); break;
        case O_VALB: o->val_batches = parse_long("--val-batches", optarg, 1, 1000000); break;
        case O_LOGE: o->log_every = parse_long("--log-every", optarg, 1, 100000000); break;
        case O_SEED: o->seed = parse_long("--seed", optarg, 0, 0x7fffffffL); break;
        case O_THREADS: o->threads = parse_long("--threads", optarg, 1, 4096); break;
        case O_MODE: o->mode = optarg; break;
        case O_DP: o->dp = parse_long("--dp", optarg, 1, 1 << 20); break;
        case O_TP: o->tp = parse_long("--tp", optarg, 1, 1 << 20); break;
        case O_TPD: o->tp_depth = parse_long("--tp-depth", optarg, 1, 1 << 20); break;
        case O_SP: o->sp = parse_long("--sp", optarg, 1, 1 << 20); break;
        case O_PP: o->pp = parse_long("--pp", optarg, 1, 1 << 20); break;
        case O_MICRO: o->microbatches = parse_long("--micro-batches", optarg, 1, 1 << 20); break;
        case O_VSTAGES: o->virtual_stages = parse_long("--virtual-stages", optarg, 1, PT_VIRTUAL_STAGES_MAX); break;
        case O_ZERO: o->zero = (int)parse_long("--zero", optarg, 0, 3); break;
        case O_SCHED: {
            pt_error e;
            if (pt_schedule_parse("--schedule", optarg, &o->schedule, &e) < 0) bad_input("%s", e.text);
            break;
        }
        case O_RECOMPUTE: {
            pt_error e;
            if (pt_recompute_parse("--recompute", optarg, &o->recompute, &e) < 0) bad_input("%s", e.text);
            break;
        }
        case O_SPLIT: {
            pt_error e;
            pt_plan tmp;
            pt_plan_default(&tmp);
            if (pt_plan_split_parse("--pp-split", optarg, &tmp, &e) < 0) bad_input("%s", e.text);
            o->pp_split = optarg;
            break;
        }
        case O_ORDER: {
            pt_error e;
            if (pt_plan_order_parse(optarg, o->order, &e) < 0) bad_input("--rank-order: %s", e.text);
            o->rank_order = o->order;
            break;
        }
        case O_WATCHDOG: o->watchdog = (double)parse_long("--watchdog", optarg, 0, 86400 * 365); break;
        case O_DRY: o->dry_run = 1; break;
        case O_QUIET: o->quiet = 1; break;
        case O_METRICS: o->metrics = optarg; break;
        case O_PEAK: o->peak_gflops = parse_float("--peak-gflops", optarg, 1e-3f, 1e9f); break;
        case O_SAVEDIR: o->save_dir = optarg; break;
        case O_SAVEEVERY: o->save_every = parse_long("--save-every", optarg, 1, 100000000); break;
        case O_KEEP: o->keep = parse_long("--keep", optarg, 1, 1000000); break;
        case O_RESUME: o->resume = optarg; break;
        case O_TOPOLOGY: o->topology = optarg; break;
        case O_EXPLAIN: o->explain = 1; break;
        case 'h':
            if (world_rank == 0) usage(stdout);
            MPI_Finalize();
            exit(0);
        case 'V':
            if (world_rank == 0) printf("ptrain-run (ptrain) %s\n", PACKAGE_VERSION);
            MPI_Finalize();
            exit(0);
        default:
            bad_input("unknown or incomplete option '%s' (see --help)", argv[optind - 1]);
        }
    }
    if (optind < argc) bad_input("unexpected argument '%s' (see --help)", argv[optind]);
    /* The model and batch the SPANK plugin planned for (--ptrain-model,
     * --ptrain-batch) when the command line gives none. */
    o->model_what = "--model";
    const char *em = getenv("PTRAIN_MODEL"), *eb = getenv("PTRAIN_BATCH");
    if (!model_given && em && *em) {
        o->model = em;
        o->model_what = "PTRAIN_MODEL";
    }
    if (!batch_given && eb && *eb) o->batch = parse_long("PTRAIN_BATCH", eb, 1, 1 << 20);
    const char *topo = getenv("PTRAIN_TOPOLOGY");
    if (!o->topology && topo && *topo) o->topology = topo;
    if (o->topology && !o->topology[0]) bad_input("--topology '' is not valid (valid: a node model file from ptrain-topo --save, or hwloc XML)");
    const char *peak = getenv("PTRAIN_PEAK_GFLOPS");
    if (!o->peak_gflops && peak && *peak) o->peak_gflops = parse_float("PTRAIN_PEAK_GFLOPS", peak, 1e-3f, 1e9f);
    if ((o->save_every || o->keep) && !o->save_dir)
        bad_input("%s needs --save-dir DIR (where checkpoints go)", o->save_every ? "--save-every" : "--keep");
    if (o->resume && !strcmp(o->resume, "auto") && !o->save_dir)
        bad_input("--resume auto needs --save-dir DIR (where to look for checkpoints)");
    if (o->resume && !o->resume[0]) bad_input("--resume '' is not valid (valid: auto or a checkpoint directory)");
}

/* ---- checkpoints: SIGTERM / SIGUSR1 ask for a save and a clean exit ---- */
static volatile sig_atomic_t stop_signal;
static void on_stop_signal(int sig) { stop_signal = sig; }
static void ckpt_warn(const char *msg)
{
    if (world_rank == 0) fprintf(stderr, "ptrain-run: warning: %s; trying the previous checkpoint\n", msg);
}

/* The job's nodes, learnt collectively before start-up (pt_comm_nodes:
 * ranks that share memory are one node): what --mode auto plans for. */
static int job_nnodes;
static int *job_tpn; /* [job_nnodes] tasks on each node, nodes in rank order */

/* What --mode auto chose, for rank 0 to print after the agreement. */
static struct {
    int on;                   /* the plan was resolved here (--mode auto) */
    pt_search_result res;     /* for --explain */
    pt_model_shape m;
    char notes[1024];         /* pt_plan_resolve's warnings */
    char machine[400];        /* "1 node x 4 tasks, node model FILE" */
} A;

/* --mode auto under plain mpirun (no plugin plan): the cluster is the
 * job's nodes (job_tpn) with the rates of the node model (--topology /
 * PTRAIN_TOPOLOGY, else this node's hwloc model, else pt_topo_plan_hw's
 * estimates for a one-NUMA-node machine), and pt_plan_resolve plans what
 * req leaves open (0 = choose), exactly as the plugin and ptrain-plan do.
 * Every rank computes it; the start-up agreement compares the plans. */
static void plan_auto(const opts *o, const pt_gpt_config *cfg, const pt_plan *req, int zero_pinned, int sched_pinned,
                      pt_plan *p)
{
    pt_error err;
    int maxt = 1;
    for (int i = 0; i < job_nnodes; i++)
        if (job_tpn[i] > maxt) maxt = job_tpn[i];
    pt_topo t;
    memset(&t, 0, sizeof t);
    char source[300];
    int loaded = 0;
    if (o->topology) {
        if (pt_topo_load_file(&t, o->topology) != PT_OK)
            bad_input("--mode auto: cannot load the node model %s: %s (valid: a ptrain-topo --save JSON or hwloc XML file)",
                      o->topology, pt_errmsg());
        loaded = 1;
        snprintf(source, sizeof source, "%.290s", o->topology);
    } else if (pt_topo_load_hwloc(&t, NULL) == PT_OK) {
        loaded = 1;
        snprintf(source, sizeof source, "hwloc (this node)");
    } else {
        pt_topo_free(&t);
        memset(&t, 0, sizeof t);
        snprintf(source, sizeof source, "defaults");
    }
    pt_cluster c;
    memset(&c, 0, sizeof c);
    c.nnodes = job_nnodes;
    c.tasks_per_node = job_tpn;
    int rc = pt_topo_plan_hw(loaded ? &t : NULL, maxt, NULL, &c.hw, &c.island_ranks, NULL, 0, &err);
    if (loaded) pt_topo_free(&t);
    if (rc < 0) bad_input("--mode auto: node model %s: %s", source, err.text);
    pt_model_shape m = {cfg->n_layer, cfg->n_head, cfg->n_embd, cfg->seq_len, cfg->vocab};
    pt_plan_limits lim = {INT_MAX, ~0u, INT_MAX, 3, ~0u};
    /* a schedule given is a pin, 1f1b too (the request's default), as in ptrain-plan */
    if (sched_pinned) lim.schedules = 1u << req->schedule;
    if (o->batch > INT_MAX) bad_input("--batch %ld is too large (valid: at most %d)", o->batch, INT_MAX);
    if (pt_plan_resolve(&c, &m, (int)o->batch, &lim, req, zero_pinned, 0, p, &A.res, A.notes, sizeof A.notes,
                        &err) < 0) {
        /* the planner names srun's options; ours are the same without "ptrain-" */
        pt_plan_error_options(&err, "--");
        bad_input("--mode auto: %s", err.text);
    }
    A.on = 1;
    A.m = m;
    size_t off = (size_t)snprintf(A.machine, sizeof A.machine, "%d node%s x ", job_nnodes, job_nnodes == 1 ? "" : "s");
    int uniform = 1;
    for (int i = 1; i < job_nnodes; i++) uniform &= job_tpn[i] == job_tpn[0];
    if (uniform) off += (size_t)snprintf(A.machine + off, sizeof A.machine - off, "%d tasks", job_tpn[0]);
    else
        for (int i = 0; i < job_nnodes && off < sizeof A.machine; i++)
            off += (size_t)snprintf(A.machine + off, sizeof A.machine - off, "%s%d", i ? "," : "(", job_tpn[i]);
    if (!uniform && off < sizeof A.machine) off += (size_t)snprintf(A.machine + off, sizeof A.machine - off, ") tasks");
    if (off < sizeof A.machine) snprintf(A.machine + off, sizeof A.machine - off, ", node model %s", source);
}

/* Resolve the plan: defaults < PTRAIN_* environment < flags.  When dp is
 * not given it is world / (tp * pp * sp).  A plan that does not fit the
 * world is refused listing the tp (or sp) values that would (pt_plan_list_tp,
 * pt_plan_validate).  Mode auto (--mode auto, or PTRAIN_MODE=auto without
 * the plugin's PTRAIN_PLAN) is planned here by pt_plan_resolve, the sizes
 * given by flags or PTRAIN_* variables pinned; --mode auto beside a plugin
 * plan re-plans from the flags alone (the plugin's variables are its
 * choice, not the user's pins). */
static void resolve_plan(const opts *o, const pt_gpt_config *cfg, int world, pt_plan *p, const char **source)
{
    pt_error err;
    /* the request: sizes 0 and zero -1 = not given, rank order "" = not given */
    pt_plan_default(p);
    p->dp = p->pp = p->tp = p->tp_depth = p->sp = p->microbatches = p->virtual_stages = 0;
    p->zero = -1;
    p->schedule = -1;
    p->rank_order[0] = '\0';
    pt_mode flag_mode = PT_MODE_OFF;
    if (o->mode && pt_mode_parse(o->mode, &flag_mode, &err)) bad_input("--mode: %s", err.text);
    const char *plugin_plan = getenv("PTRAIN_PLAN");
    int replan = o->mode && flag_mode == PT_MODE_AUTO && plugin_plan;
    int from_env = replan ? 0 : pt_plan_from_env(p, &err);
    if (from_env < 0) bad_input("%s", err.text);
    *source = from_env ? (getenv("SLURM_JOB_ID") ? "slurm" : "env") : "flags";
    if (o->mode) p->mode = flag_mode;
    if (o->tp) p->tp = (int)o->tp;
    if (o->tp_depth) p->tp_depth = (int)o->tp_depth;
    if (o->sp) p->sp = (int)o->sp;
    if (o->dp) p->dp = (int)o->dp;
    if (o->pp) p->pp = (int)o->pp;
    if (o->microbatches) p->microbatches = (int)o->microbatches;
    if (o->virtual_stages) p->virtual_stages = (int)o->virtual_stages;
    if (o->schedule >= 0) p->schedule = o->schedule;
    if (o->zero >= 0) p->zero = o->zero;
    if (o->recompute >= 0) p->ckpt_act = o->recompute;
    if (o->pp_split && pt_plan_split_parse("--pp-split", o->pp_split, p, &err) < 0)
        bad_input("%s", err.text);
    if (o->rank_order) memcpy(p->rank_order, o->rank_order, sizeof p->rank_order);
    if (p->mode == PT_MODE_AUTO && (replan || !plugin_plan)) {
        pt_plan req = *p;
        int zero_pinned = req.zero >= 0, sched_pinned = req.schedule >= 0;
        if (!zero_pinned) req.zero = 0;
        if (!sched_pinned) req.schedule = PT_SCHED_1F1B;
        plan_auto(o, cfg, &req, zero_pinned, sched_pinned, p);
        /* what the planner does not choose: dp follows (an order the user
         * gave was the search's pin, so the plan was priced with it) */
        if (o->dp && p->dp != o->dp)
            bad_input("--mode auto planned dp=%d (%s), not --dp %ld: pin --tp, --pp and --sp instead of --dp",
                      p->dp, A.machine, o->dp);
        *source = replan ? "auto, re-planned over the plugin's plan" : "auto";
        if (pt_plan_validate(p, world, &err)) bad_input("%s", err.text);
        return;
    }
    /* not planned here: the sizes not given are the defaults */
    pt_plan d;
    pt_plan_default(&d);
    if (!p->pp) p->pp = d.pp;
    if (!p->tp) p->tp = d.tp;
    if (!p->tp_depth) p->tp_depth = d.tp_depth;
    if (!p->sp) p->sp = d.sp;
    if (!p->microbatches) p->microbatches = d.microbatches;
    if (!p->virtual_stages) p->virtual_stages = d.virtual_stages;
    if (p->zero < 0) p->zero = d.zero;
    if (p->schedule < 0) p->schedule = d.schedule;
    if (!p->rank_order[0]) memcpy(p->rank_order, d.rank_order, sizeof p->rank_order);
    /* off: nothing was planned, run the sizes given with 1d layers; auto
     * beside a plugin plan (PTRAIN_MODE=auto is never the plugin's) runs
     * the plugin's sizes as 1d, as before */
    if (p->mode == PT_MODE_OFF || p->mode == PT_MODE_AUTO) p->mode = PT_MODE_1D;
    long long inner = (long long)p->tp * p->pp * p->sp;
    if (!o->dp && (p->dp == 0 || o->tp || o->sp || o->tp_depth || o->pp)) {
        if (inner < 1 || world % inner) {
            char valid[256];
            if (p->sp > 1) {
                int n = world % ((long long)p->tp * p->pp) ? world : world / (p->tp * p->pp);
                pt_plan_list_tp(PT_MODE_1D, 1, n, world, valid, sizeof valid);
                bad_input("--mode %s with %d ranks: sp=%d does not divide the world (with tp=%d, "
                          "pp=%d; valid sp here: %s)", pt_mode_name(p->mode), world, p->sp, p->tp,
                          p->pp, valid);
            }
            int n = world % p->pp ? world : world / p->pp;
            int k = pt_plan_list_tp(p->mode, p->mode == PT_MODE_2P5D ? p->tp_depth : 1, n, world,
                                    valid, sizeof valid);
            bad_input("--mode %s with %d ranks: tp=%d does not divide the world (with pp=%d, "
                      "sp=%d; valid tp%s here: %s)", pt_mode_name(p->mode), world, p->tp, p->pp,
                      p->sp, p->mode == PT_MODE_2P5D ? " for this tp_depth" : "",
                      k ? valid : "none");
        }
        p->dp = (int)(world / inner);
    }
    if (pt_plan_validate(p, world, &err)) bad_input("%s", err.text);
}

static int load_batch(const pt_shard *s, long step, const opts *o, int T, const pt_pctx *c, int32_t *in, int32_t *tg)
{
    int nseq = (int)(o->batch / c->plan.dp);
    return pt_loader_batch(s, step, (int)o->batch, T, c->dp_rank * nseq, nseq, in, tg);
}

/* Mean validation loss over --val-batches batches.  It runs the same
 * schedule as training (every stage, every microbatch, the ZeRO hooks) and
 * discards the gradients: the next step zeroes them first. */
static int evaluate(pt_pipeline *p, const pt_shard *val, const opts *o, const pt_pctx *c, int32_t *in, int32_t *tg, double *out)
{
    double sum = 0;
    for (long i = 0; i < o->val_batches; i++) {
        int rc = load_batch(val, i, o, p->T, c, in, tg);
        if (rc) return rc;
        float l;
        pt_train_zero_grad(p->train);
        rc = pt_pipeline_forward_backward(p, in, tg, &l);
        if (rc) return rc;
        sum += l;
    }
    *out = sum / (double)o->val_batches;
    return PT_OK;
}

/* In-memory random shard for tests and benchmarks (--data synthetic[:SEED]). */
static uint16_t *synthetic_shard(pt_shard *s, const char *spec, int vocab, long ntok)
{
    long seed = 1;
    const char *colon = strchr(spec, ':');
    if (colon && pt_parse_int("--data synthetic:SEED", colon + 1, 0, 0x7fffffffL, &seed)) bad_input("%s", pt_errmsg());
    uint16_t *t = malloc(sizeof(uint16_t) * (size_t)ntok);
    if (!t) return NULL;
    pt_rng r;
    pt_rng_seed(&r, (uint64_t)seed, 7);
    for (long i = 0; i < ntok; i++) t[i] = (uint16_t)(pt_rng_u64(&r) % (uint64_t)vocab);
    memset(s, 0, sizeof *s);
    s->tokens = t;
    s->ntokens = (uint64_t)ntok;
    s->vocab_size = (uint32_t)vocab;
    s->eot_id = (uint32_t)(vocab - 1);
    return t;
}

static double mb(size_t bytes) { return (double)bytes / (1024.0 * 1024.0); }

/* ---- start-up -----------------------------------------------------------
 * What every rank resolves on its own before the first collective: options,
 * model config, plan, data.  File scope, so that the values stay defined
 * across the longjmp of a rank whose start-up fails. */
static struct {
    opts o;
    pt_gpt_config cfg;
    pt_plan plan;
    const char *source;
    pt_shard train, val;
    uint16_t *synth_train, *synth_val;
    uint64_t data_id[4]; /* train tokens, train checksum, val tokens, val checksum */
} S;

/* Divisors of n in [1, cap] as "1, 2, 4" into buf. */
static void divisors_text(int n, int cap, char *buf, size_t len)
{
    size_t off = 0;
    buf[0] = '\0';
    for (int d = 1; d <= n && d <= cap && off < len; d++)
        if (n % d == 0) off += (size_t)snprintf(buf + off, len - off, "%s%d", off ? ", " : "", d);
}

static void startup(int argc, char **argv, int world)
{
    opts *o = &S.o;
    parse_args(argc, argv, o);
    pt_gpt_config *cfg = &S.cfg;
    {   /* a preset name or L,H,C,T,V (the names of lib/plan/cost.h, shared with the plugin) */
        pt_model_shape ms;
        pt_error e;
        if (pt_model_shape_parse(o->model_what, o->model, &ms, &e) < 0) bad_input("%s", e.text);
        *cfg = (pt_gpt_config){ms.n_layer, ms.n_head, ms.n_embd, ms.seq_len, ms.vocab};
    }
    if (o->layers) cfg->n_layer = o->layers;
    if (o->heads) cfg->n_head = o->heads;
    if (o->embd) cfg->n_embd = o->embd;
    if (o->seq_len) cfg->seq_len = o->seq_len;
    if (o->vocab) cfg->vocab = o->vocab;
    if (cfg->n_head < 1 || cfg->n_embd % cfg->n_head) {
        char valid[256];
        divisors_text(cfg->n_embd, 4096, valid, sizeof valid);
        bad_input("--heads %d does not divide the embedding width %d (valid --heads for --embd %d: %s)",
                  cfg->n_head, cfg->n_embd, cfg->n_embd, valid);
    }

    pt_plan *plan = &S.plan;
    resolve_plan(o, cfg, world, plan, &S.source);
    if (plan->mode == PT_MODE_1D && pt_gpt_check_tp(cfg, plan->tp)) {
        /* the 1d sizes that divide both the world and the heads: the mode
         * table's list over their greatest common divisor (1 always fits) */
        int g = world, h = cfg->n_head;
        while (h) {
            int t = g % h;
            g = h;
            h = t;
        }
        char valid[256];
        pt_plan_list_tp(PT_MODE_1D, 1, g, world, valid, sizeof valid);
        bad_input("%s; with %d ranks use --tp one of: %s", pt_errmsg(), world, valid);
    }
    if (o->batch % plan->dp)
        bad_input("--batch %ld is not a multiple of dp=%d (each data-parallel rank takes batch/dp sequences); try --batch %ld",
                  o->batch, plan->dp, (o->batch / plan->dp + 1) * plan->dp);
    {
        /* stages against the layers, the split's sum, microbatches against batch/dp */
        pt_error err;
        if (pt_plan_check_model(plan, cfg->n_layer, (int)(o->batch / plan->dp), &err) < 0)
            bad_input("%s (--batch %ld, dp=%d, --layers %d)", err.text, o->batch, plan->dp, cfg->n_layer);
    }
    if (o->warmup < 0) o->warmup = o->steps / 10 < 100 ? o->steps / 10 : 100;
    if (o->min_lr < 0) o->min_lr = o->lr / 10;
    if (o->dry_run) return;

    /* data: opened here, so that a rank that cannot read it fails in the
     * start-up agreement and the data's identity is agreed on */
    const int T = cfg->seq_len;
    if (!o->data) bad_input("--data is required: a directory made by 'ptrain-data prepare' (train.bin, val.bin) or 'synthetic'");
    if (strncmp(o->data, "synthetic", 9) == 0 && (o->data[9] == 0 || o->data[9] == ':')) {
        S.synth_train = synthetic_shard(&S.train, o->data, cfg->vocab, 1 << 20);
        S.synth_val = synthetic_shard(&S.val, o->data, cfg->vocab, 1 << 16);
        if (!S.synth_train || !S.synth_val) bad_input("synthetic data: out of memory");
        /* generated from (spec, vocab): their hash stands for the checksum */
        uint64_t h = pt_fnv1a64(o->data, strlen(o->data)) ^ (uint64_t)cfg->vocab;
        S.data_id[0] = S.train.ntokens;
        S.data_id[1] = h;
        S.data_id[2] = S.val.ntokens;
        S.data_id[3] = h + 1;
    } else {
        size_t pl = strlen(o->data) + 16;
        char *ptr = malloc(pl), *pva = malloc(pl);
        if (!ptr || !pva) bad_input("data: out of memory");
        snprintf(ptr, pl, "%s/train.bin", o->data);
        snprintf(pva, pl, "%s/val.bin", o->data);
        int rc = pt_shard_open(&S.train, ptr);
        if (rc == PT_OK) rc = pt_shard_open(&S.val, pva);
        if (rc == PT_OK) {
            const pt_shard *set[2] = {&S.train, &S.val};
            const char *names[2] = {ptr, pva};
            rc = pt_shard_check_set(set, names, 2);
        }
        free(ptr);
        free(pva);
        if (rc) bad_input("data: %s", pt_errmsg());
        if (S.train.vocab_size > (uint32_t)cfg->vocab)
            bad_input("data vocabulary %u is larger than the model's %d (--vocab)", S.train.vocab_size, cfg->vocab);
        if (S.train.ntokens < (uint64_t)T + 2 || S.val.ntokens < (uint64_t)T + 2)
            bad_input("data in %s is too short for seq_len %d (train %llu, val %llu tokens)", o->data, T,
                      (unsigned long long)S.train.ntokens, (unsigned long long)S.val.ntokens);
        S.data_id[0] = S.train.ntokens;
        S.data_id[1] = S.train.checksum;
        S.data_id[2] = S.val.ntokens;
        S.data_id[3] = S.val.checksum;
    }
}

/* What the ranks agree on: the start-up outcome, the resolved plan, the
 * model config, the data identity, the training options and the build. */
typedef struct startup_rec {
    int64_t v[26];
    char version[32];
    char split[PT_PP_SPLIT_MAX * 6]; /* the plan's stage split, pt_plan_split_format */
} startup_rec;

static const char *const rec_field[] = {
    "start-up status", "plan mode", "plan dp", "plan pp", "plan tp", "plan tp_depth", "plan sp",
    "plan zero", "plan microbatches", "plan ckpt_act", "plan offload", "plan rank order",
    "model layers", "model heads", "model embd", "model seq_len", "model vocab",
    "data train tokens", "data train checksum", "data val tokens", "data val checksum",
    "--steps", "--batch", "training options (--seed, --lr, --min-lr, --warmup, --weight-decay, "
    "--grad-clip, --adam-eps, --val-every, --val-batches, --dry-run)", "plan schedule", "plan virtual_stages"};
#define REC_FIELDS ((int)(sizeof rec_field / sizeof rec_field[0]))

static void fill_rec(startup_rec *r, int ok)
{
    memset(r, 0, sizeof *r);
    r->v[0] = ok;
    snprintf(r->version, sizeof r->version, "%s", PACKAGE_VERSION);
    if (!ok) return;
    const pt_plan *p = &S.plan;
    const pt_gpt_config *c = &S.cfg;
    const opts *o = &S.o;
    int64_t *v = r->v;
    v[1] = p->mode; v[2] = p->dp; v[3] = p->pp; v[4] = p->tp; v[5] = p->tp_depth; v[6] = p->sp;
    v[7] = p->zero; v[8] = p->microbatches; v[9] = p->ckpt_act; v[10] = p->offload;
    v[11] = (int64_t)p->rank_order[0] << 16 | (int64_t)p->rank_order[1] << 8 | p->rank_order[2];
    v[12] = c->n_layer; v[13] = c->n_head; v[14] = c->n_embd; v[15] = c->seq_len; v[16] = c->vocab;
    for (int i = 0; i < 4; i++) v[17 + i] = (int64_t)S.data_id[i];
    v[21] = o->steps;
    v[22] = o->batch;
    double opt[] = {(double)o->seed, o->lr, o->min_lr, (double)o->warmup, o->wd, o->clip,
                    (double)o->val_every, (double)o->val_batches, (double)o->dry_run, o->eps};
    v[23] = (int64_t)pt_fnv1a64(opt, sizeof opt);
    v[24] = p->schedule;
    v[25] = p->virtual_stages;
    pt_plan_split_format(p, r->split, sizeof r->split);
}

static uint64_t rec_hash(const startup_rec *r) { return pt_fnv1a64(r, sizeof *r); }

static void field_value(const startup_rec *r, int f, char *buf, size_t len)
{
    if (f == 1) snprintf(buf, len, "%s", pt_mode_name((pt_mode)r->v[1]));
    else if (f == 9) snprintf(buf, len, "%s", pt_recompute_name((int)r->v[9]));
    else if (f == 24) snprintf(buf, len, "%s", pt_schedule_name((int)r->v[24]));
    else if (f == 11) snprintf(buf, len, "%c%c%c", (char)(r->v[11] >> 16), (char)(r->v[11] >> 8), (char)r->v[11]);
    else if (f >= 17 && f <= 20 && f % 2 == 0) snprintf(buf, len, "%016llx", (unsigned long long)r->v[f]);
    else if (f == 23) snprintf(buf, len, "hash %016llx", (unsigned long long)r->v[f]);
    else snprintf(buf, len, "%lld", (long long)r->v[f]);
}

/* "1, 3, 5" (at most 8 named, then "and N more") of the ranks in list. */
static void ranks_text(const int *list, int n, char *buf, size_t len)
{
    size_t off = 0;
    buf[0] = '\0';
    for (int i = 0; i < n && i < 8 && off < len; i++)
        off += (size_t)snprintf(buf + off, len - off, "%s%d", i ? ", " : "", list[i]);
    if (n > 8 && off < len) snprintf(buf + off, len - off, " and %d more", n - 8);
}

/* The collective start-up agreement (issue 9): every rank, also one whose
 * start-up failed, contributes its record; a failure anywhere or any
 * difference from rank 0 makes every rank exit with status 2, rank 0
 * printing one line that names the failing ranks and the first one's
 * error, or the differing ranks and fields with their values.  Returns the
 * hash of the agreed record. */
static uint64_t startup_agree(int ok, int world)
{
    watchdog_beat("start-up agreement");
    startup_rec mine;
    fill_rec(&mine, ok);
    startup_rec *all = malloc(sizeof *all * (size_t)world);
    int have = all != NULL, everyone = 0;
    MPI_Allreduce(&have, &everyone, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!everyone) {
        if (world_rank == 0) fprintf(stderr, "ptrain-run: error: out of memory for the start-up agreement of %d ranks\n", world);
        MPI_Finalize();
        exit(1);
    }
    MPI_Allgather(&mine, (int)sizeof mine, MPI_BYTE, all, (int)sizeof mine, MPI_BYTE, MPI_COMM_WORLD);
    int *list = malloc(sizeof(int) * (size_t)world), nfail = 0, first = -1;
    for (int r = 0; r < world; r++)
        if (!all[r].v[0]) {
            if (first < 0) first = r;
            if (list) list[nfail] = r;
            nfail++;
        }
    if (nfail) {
        /* the first failing rank's message goes to rank 0 */
        MPI_Bcast(startup_err.text, (int)sizeof startup_err.text, MPI_CHAR, first, MPI_COMM_WORLD);
        if (world_rank == 0) {
            char who[160] = "";
            if (list) ranks_text(list, nfail, who, sizeof who);
            if (nfail == world)
                fprintf(stderr, "ptrain-run: error: %s\n", startup_err.text);
            else
                fprintf(stderr, "ptrain-run: error: rank %d: %s (start-up failed on rank%s %s of %d; every rank exits)\n",
                        first, startup_err.text, nfail > 1 ? "s" : "", who, world);
        }
        MPI_Finalize();
        exit(2);
    }
    /* every rank resolved a plan: all must hold rank 0's */
    char line[1024] = "";
    size_t off = 0;
    int differ = 0;
    if (strcmp(all[0].version, mine.version) != 0) differ = 1;
    for (int f = 0; f < REC_FIELDS; f++) {
        int n = 0, r1 = -1;
        for (int r = 1; r < world; r++)
            if (all[r].v[f] != all[0].v[f]) {
                if (r1 < 0) r1 = r;
                if (list) list[n] = r;
                n++;
            }
        if (!n) continue;
        differ = 1;
        if (world_rank != 0 || off >= sizeof line) continue;
        char who[160] = "", a[40], b[40];
        if (list) ranks_text(list, n, who, sizeof who);
        field_value(&all[r1], f, b, sizeof b);
        field_value(&all[0], f, a, sizeof a);
        off += (size_t)snprintf(line + off, sizeof line - off, "%s%s: rank%s %s %s %s, rank 0 has %s",
                                off ? "; " : "", rec_field[f], n > 1 ? "s" : "", who,
                                n > 1 ? "have (first)" : "has", b, a);
    }
    for (int r = 1; r < world && off < sizeof line; r++)
        if (strcmp(all[r].split, all[0].split) != 0) {
            differ = 1;
            if (world_rank == 0)
                off += (size_t)snprintf(line + off, sizeof line - off, "%splan pp_split: rank %d has %.60s, rank 0 has %.60s",
                                        off ? "; " : "", r, all[r].split, all[0].split);
            break;
        }
    for (int r = 1; r < world && off < sizeof line; r++)
        if (strcmp(all[r].version, all[0].version) != 0) {
            differ = 1;
            if (world_rank == 0)
                off += (size_t)snprintf(line + off, sizeof line - off, "%sptrain version: rank %d has %.31s, rank 0 has %.31s",
                                        off ? "; " : "", r, all[r].version, all[0].version);
            break;
        }
    free(list);
    uint64_t h = rec_hash(&all[0]);
    free(all);
    if (differ) {
        if (world_rank == 0)
            fprintf(stderr, "ptrain-run: error: ranks disagree at start-up: %s (every rank must get the same "
                    "plan, model, data, options and ptrain build; under Slurm check the nodes' ptrain.conf "
                    "and PTRAIN_* settings)\n", line);
        MPI_Finalize();
        exit(2);
    }
    return h;
}

int main(int argc, char **argv)
{
    /* A write to a peer's closed connection must fail with EPIPE, not kill
     * the rank: a peer that finished and left (MPI_Finalize, exit) can
     * close its sockets while this rank still sends the heartbeat's last
     * messages.  mpirun's daemons start ranks with SIGPIPE ignored, srun
     * does not: under the local Slurm, a job that had printed "done:" lost
     * rank 0 to SIGPIPE ("task 0: Broken pipe"), once in 30 runs under load. */
    signal(SIGPIPE, SIG_IGN);
    /* a step frees and re-allocates the same large blocks (ZeRO's units,
     * MPI's temporaries): keep them rather than fault fresh pages in each
     * step (core.h) */
    pt_host_memory_keep();
    int provided = MPI_THREAD_SINGLE;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided); /* the heartbeat thread */
    int world;
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    watchdog_beat("start-up");
    heartbeat_start(world);
    /* the job's nodes, for --mode auto: collective, so learnt by every rank
     * before the start-up that a rank may leave early */
    {
        pt_comm wc;
        pt_comm_wrap(&wc, MPI_COMM_WORLD, "world");
        job_tpn = malloc(sizeof(int) * (size_t)world);
        if (!job_tpn) {
            fprintf(stderr, "ptrain-run: error: rank %d: out of memory for the node list\n", world_rank);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        if (pt_comm_nodes(&wc, job_tpn, &job_nnodes, NULL) != PT_OK) {
            job_nnodes = 1; /* as one node of every rank; the agreement compares the plans */
            job_tpn[0] = world;
        }
    }

    /* Start-up: a rank whose arguments, PTRAIN_* plan, model or data fail
     * jumps straight to the agreement, which every rank enters. */
    int ok = 0;
    in_startup = 1;
    if (setjmp(startup_jmp) == 0) {
        if (hb_bad[0]) bad_input("%s", hb_bad);
        startup(argc, argv, world);
        ok = 1;
    }
    in_startup = 0;
    uint64_t agreed = startup_agree(ok, world);
    watchdog_start(S.o.watchdog);
    if (world_rank == 0 && A.on) {
        /* the warnings and the explanation of a plan made here (--mode auto) */
        if (A.notes[0]) fprintf(stderr, "%s\n", A.notes);
        if (S.o.explain) {
            size_t need = pt_plan_explain(&A.res, &A.m, (int)S.o.batch, NULL, 0) + 1;
            char *text = malloc(need);
            printf("machine: %s\n", A.machine);
            if (text) {
                pt_plan_explain(&A.res, &A.m, (int)S.o.batch, text, need);
                fputs(text, stdout);
                free(text);
            }
        }
        fflush(stdout);
        fflush(stderr);
    } else if (world_rank == 0 && S.o.explain) {
        fprintf(stderr, "ptrain-run: warning: --explain explains a plan made by --mode auto; this one came "
                        "from %s (see ptrain-plan for its explanation)\n", S.source);
    }

    opts o = S.o;
    pt_gpt_config cfg = S.cfg;
    pt_plan plan = S.plan;
    const char *source = S.source;

    int grid_rank = pt_launcher_rank(MPI_COMM_WORLD);
    pt_pctx ctx;
    int rc = pt_pctx_init(&ctx, MPI_COMM_WORLD, &plan, grid_rank);
    if (rc) bad_input("%s", pt_errmsg());
    pt_log_set_rank(ctx.rank);
    char summary[640];
    pt_plan_summary(&plan, summary, sizeof summary);

    if (o.dry_run) {
        char line[1024];
        snprintf(line, sizeof line,
                 "rank %d/%d dp=%d pp=%d tp=%d sp=%d dp_rank=%d pp_rank=%d tp_rank=%d sp_rank=%d mpi_rank=%d plan=%s",
                 ctx.rank, world, plan.dp, plan.pp, plan.tp, plan.sp, ctx.dp_rank, ctx.pp_rank, ctx.tp_rank,
                 ctx.sp_rank, world_rank, summary);
        char *all = world_rank == 0 ? malloc(sizeof line * (size_t)world) : NULL;
        int *ranks = world_rank == 0 ? malloc(sizeof(int) * (size_t)world) : NULL;
        MPI_Gather(line, sizeof line, MPI_CHAR, all, sizeof line, MPI_CHAR, 0, MPI_COMM_WORLD);
        MPI_Gather(&ctx.rank, 1, MPI_INT, ranks, 1, MPI_INT, 0, MPI_COMM_WORLD);
        if (world_rank == 0) {
            for (int g = 0; g < world; g++)
                for (int i = 0; i < world; i++)
                    if (ranks[i] == g) printf("%s\n", all + (size_t)i * sizeof line);
            fflush(stdout);
        }
        free(all);
        free(ranks);
        pt_pctx_free(&ctx);
        MPI_Finalize();
        return 0;
    }

    const pt_backend *be = pt_backend_get("cpu");
    int threads = o.threads ? (int)o.threads : default_threads();
    be->set_threads(threads);

    /* data (opened and agreed on at start-up) */
    pt_shard train = S.train, val = S.val;
    uint16_t *synth_train = S.synth_train, *synth_val = S.synth_val;
    const int T = cfg.seq_len;

    pt_arena arena = {0};
    pt_gpt model;
    int Bl = (int)(o.batch / plan.dp);
    pt_train tr;
    pt_adamw_cfg opt;
    pt_adamw_default(&opt);
    opt.weight_decay = o.wd;
    opt.grad_clip = o.clip;
    opt.eps = o.eps;
    /* every plan runs through the pipeline executor: pp = 1 with m = 1 is
     * the plain step, pp = 1 with m > 1 gradient accumulation */
    pt_pipeline_cfg pc;
    pt_pipeline pipe;
    const pt_train_strategy *strategy = pt_train_strategy_zero(plan.zero);
    rc = strategy ? pt_pipeline_plan(&plan, &cfg, Bl, ctx.pp_rank, &pc) : PT_EINVAL;
    if (!rc) rc = pt_gpt_create_stage(&model, &cfg, &ctx, be, &arena, pc.micro, T, (uint64_t)o.seed, &pc.stage);
    if (!rc) rc = pt_train_create(&tr, &model, &opt, strategy);
    if (!rc) rc = pt_pipeline_create(&pipe, &tr, plan.schedule);
    agree(rc, "model");
    /* checkpoints: the run state besides the tensors, and resuming */
    pt_ckpt_meta cmeta = {.adam_step = 0, .seed = o.seed, .lr = o.lr, .min_lr = o.min_lr, .warmup = o.warmup,
                          .total_steps = o.steps};
    snprintf(cmeta.model, sizeof cmeta.model, "%s", o.model);
    snprintf(cmeta.data, sizeof cmeta.data, "%s", o.data);
    long start_step = 0;
    if (o.resume) {
        int loaded = 0;
        char which[4200] = "";
        pt_ckpt_meta got;
        rc = pt_ckpt_resume(o.resume, o.save_dir, &tr, &plan, &cfg, &got, &loaded, which, sizeof which, ckpt_warn);
        agree_collective(rc, "--resume");
        if (loaded && got.step > o.steps)
            agree(pt_fail(PT_EINVAL, "checkpoint %s is at step %ld, beyond --steps %ld", which, got.step, o.steps),
                  "--resume");
        if (loaded) start_step = got.step;
        /* the schedule the checkpoint was trained with: a different one is
         * allowed (extending --steps is how a run is continued) but the run
         * is then not the uninterrupted one; a checkpoint converted from
         * llm.c has none (total_steps 0) */
        if (loaded && world_rank == 0 && got.total_steps > 0 &&
            (got.total_steps != o.steps || got.warmup != o.warmup || got.lr != (float)o.lr ||
             got.min_lr != (float)o.min_lr)) {
            fprintf(stderr, "ptrain-run: warning: checkpoint %s was trained with --steps %ld --lr %g --min-lr %g --warmup %ld, "
                            "this run has --steps %ld --lr %g --min-lr %g --warmup %ld: the learning-rate schedule changes "
                            "from step %ld on\n",
                    which, got.total_steps, (double)got.lr, (double)got.min_lr, got.warmup, o.steps, (double)(float)o.lr,
                    (double)(float)o.min_lr, o.warmup, got.step);
            fflush(stderr);
        }
        if (world_rank == 0) {
            if (loaded) printf("resume: %s (step %ld, AdamW step %d)\n", which, got.step, got.adam_step);
            else printf("resume: no valid checkpoint in %s, starting fresh\n", o.save_dir);
            fflush(stdout);
        }
    }
    if (o.save_dir) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_stop_signal;
        sa.sa_flags = SA_RESTART;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGUSR1, &sa, NULL);
    }
    int32_t *in = malloc(sizeof(int32_t) * (size_t)Bl * T), *tg = malloc(sizeof(int32_t) * (size_t)Bl * T);
    if (!in || !tg) agree(pt_fail(PT_ENOMEM, "out of memory"), "batch");

    const double tok_per_step = (double)o.batch * T;
    const double flops_tok = pt_gpt_flops_per_token(&cfg, T);
    if (world_rank == 0) {
        printf("plan: %s (source: %s, world %d, grid rank from %s; agreed by every rank, start-up hash %016llx)\n",
               summary, source, world, grid_rank >= 0 ? "launcher RANK" : "MPI", (unsigned long long)agreed);
        printf("model: %s L=%d H=%d C=%d T=%d V=%d (padded %d), %.2fM parameters, %.2fM per rank\n",
               o.model, cfg.n_layer, cfg.n_head, cfg.n_embd, cfg.seq_len, cfg.vocab, model.g.Vp,
               (double)pt_gpt_num_params(&cfg) / 1e6, (double)model.nfloats / 1e6);
        printf("train: %s, %llu train / %llu val tokens; batch %ld x %d = %.0f tokens/step; %ld steps, lr %.2e -> %.2e, warmup %ld; %d threads/rank\n",
               o.data, (unsigned long long)train.ntokens, (unsigned long long)val.ntokens, o.batch, T, tok_per_step,
               o.steps, o.lr, o.min_lr, o.warmup, threads);
        printf("blas: %s\n", pt_blas_summary());
        fflush(stdout);
    }
    FILE *mf = NULL;
    if (o.metrics) {
        rc = PT_OK;
        if (world_rank == 0 && !(mf = metrics_open(o.metrics))) rc = PT_EIO;
        agree(rc, "--metrics");
        char pk[32];
        metrics_line(mf, "{\"type\":\"header\",\"model\":\"%s\",\"n_layer\":%d,\"n_head\":%d,\"n_embd\":%d,"
                         "\"seq_len\":%d,\"vocab\":%d,\"params\":%lld,\"plan\":\"%s\",\"world\":%d,"
                         "\"tokens_per_step\":%.0f,\"steps\":%ld,\"lr\":%g,\"min_lr\":%g,\"warmup\":%ld,"
                         "\"flops_per_token\":%.6g,\"peak_gflops_per_rank\":%s}",
                     o.model, cfg.n_layer, cfg.n_head, cfg.n_embd, cfg.seq_len, cfg.vocab,
                     (long long)pt_gpt_num_params(&cfg), summary, world, tok_per_step, o.steps, o.lr, o.min_lr,
                     o.warmup, flops_tok, o.peak_gflops > 0 ? jnum(pk, sizeof pk, o.peak_gflops) : "null");
    }
    const double t_start = pt_now();
    char nb[3][32];

    double val0 = NAN, vloss = NAN, t_total = 0, first_loss = NAN, train_comm = 0;
    float loss = NAN;
    rc = evaluate(&pipe, &val, &o, &ctx, in, tg, &val0);
    agree(rc, "validation");
    if (world_rank == 0) { printf("val: step 0 | val_loss %.4f\n", val0); fflush(stdout); }
    metrics_line(mf, "{\"type\":\"val\",\"step\":0,\"val_loss\":%s,\"elapsed_s\":%.3f}",
                 jnum(nb[0], sizeof nb[0], val0), pt_now() - t_start);
    int stopped = 0;
    long last_saved = -1; /* a step saved by this run */
    for (long step = start_step; step < o.steps; step++) {
        double t0 = pt_now();
        uint64_t c0 = pt_pctx_sent_total(&ctx), g0[ST_N], gs[ST_N];
        if (o.metrics) group_sent(&ctx, g0);
        rc = load_batch(&train, step, &o, T, &ctx, in, tg);
        float lr = pt_lr_schedule((int)step, (int)o.warmup, (int)o.steps, o.lr, o.min_lr);
        double norm = 0;
        if (!rc) rc = pt_pipeline_step(&pipe, in, tg, lr, &loss, &norm);
        agree(rc, "training step");
        double dt = pt_now() - t0;
        train_comm += (double)(pt_pctx_sent_total(&ctx) - c0);
        if (step > 0 || o.steps == 1) t_total += dt; /* the first step warms caches */
        char stats[256] = "";
        if (o.metrics) {
            step_stats(&ctx, &arena, g0, gs);
            stats_json(stats, sizeof stats, tok_per_step / dt * flops_tok / 1e9 / world, o.peak_gflops, gs);
        }
        if (step == 0) first_loss = loss;
        if (world_rank == 0 && !o.quiet && (step % o.log_every == 0 || step == o.steps - 1)) {
            /* ETA from the mean step time so far (the first step warms caches) */
            double mean = step > 0 ? t_total / (double)step : dt;
            char eta[32];
            fmt_duration(eta, sizeof eta, mean * (double)(o.steps - 1 - step));
            printf("step %5ld/%ld | loss %.4f | lr %.2e | norm %.3f | %.1f ms | %.0f tok/s | eta %s\n", step + 1,
                   o.steps, loss, lr, norm, dt * 1e3, tok_per_step / dt, eta);
            fflush(stdout);
        }
        metrics_line(mf, "{\"type\":\"train\",\"step\":%ld,\"loss\":%s,\"lr\":%g,\"norm\":%s,\"step_ms\":%.3f,"
                         "\"tok_s\":%.1f,\"elapsed_s\":%.3f%s}",
                     step + 1, jnum(nb[0], sizeof nb[0], loss), lr, jnum(nb[1], sizeof nb[1], norm), dt * 1e3,
                     tok_per_step / dt, pt_now() - t_start, stats);
        if (o.save_dir) {
            /* every rank sees the signal or not: agree on it, then save together */
            int want = stop_signal, any = 0;
            MPI_Allreduce(&want, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
            if (any || (o.save_every && (step + 1) % o.save_every == 0)) {
                char saved[4200];
                cmeta.step = step + 1;
                cmeta.adam_step = tr.step;
                watchdog_beat("checkpoint");
                rc = pt_ckpt_save(o.save_dir, &tr, &plan, &cfg, &cmeta, (int)o.keep, saved, sizeof saved);
                if (rc && world_rank == 0) fprintf(stderr, "ptrain-run: error: checkpoint at step %ld: %s\n", step + 1, pt_errmsg());
                if (rc) { MPI_Finalize(); return 1; }
                last_saved = step + 1;
                if (world_rank == 0 && any)
                    printf("stop: signal %s: checkpoint %s saved at step %ld; exiting\n",
                           any == SIGTERM ? "SIGTERM" : "SIGUSR1", saved, step + 1);
                else if (world_rank == 0 && !o.quiet) printf("checkpoint: %s\n", saved);
                fflush(stdout);
                if (any) { stopped = 1; break; }
            }
        }
        if ((o.val_every > 0 && (step + 1) % o.val_every == 0) || step == o.steps - 1) {
            rc = evaluate(&pipe, &val, &o, &ctx, in, tg, &vloss);
            agree(rc, "validation");
            if (world_rank == 0) { printf("val: step %ld | val_loss %.4f\n", step + 1, vloss); fflush(stdout); }
            metrics_line(mf, "{\"type\":\"val\",\"step\":%ld,\"val_loss\":%s,\"elapsed_s\":%.3f}", step + 1,
                         jnum(nb[0], sizeof nb[0], vloss), pt_now() - t_start);
        }
    }
    if (stopped) goto out;
    if (o.save_dir && last_saved != o.steps) { /* the end of the run is always kept */
        char saved[4200];
        cmeta.step = o.steps;
        cmeta.adam_step = tr.step;
        watchdog_beat("checkpoint");
        rc = pt_ckpt_save(o.save_dir, &tr, &plan, &cfg, &cmeta, (int)o.keep, saved, sizeof saved);
        if (rc && world_rank == 0) fprintf(stderr, "ptrain-run: error: checkpoint at step %ld: %s\n", o.steps, pt_errmsg());
        if (rc) { MPI_Finalize(); return 1; }
        if (world_rank == 0 && !o.quiet) { printf("checkpoint: %s\n", saved); fflush(stdout); }
    }
    long timed = o.steps > 1 ? o.steps - 1 : 1;
    double tps = tok_per_step * timed / t_total;
    size_t peak = arena.peak, peak_max = 0;
    MPI_Allreduce(&peak, &peak_max, 1, MPI_UNSIGNED_LONG, MPI_MAX, MPI_COMM_WORLD);
    double comm_bytes = train_comm / (double)o.steps;
    const double gflops = tps * flops_tok / 1e9 / world;
    if (world_rank == 0) {
        char mfu[48] = "";
        if (o.peak_gflops > 0) snprintf(mfu, sizeof mfu, " | MFU %.2f%%", 100 * gflops / o.peak_gflops);
        printf("done: steps=%ld train_loss %.4f -> %.4f | val_loss %.4f -> %.4f | %.1f ms/step | %.0f tok/s | %.2f GFLOP/s per rank | peak mem %.1f MiB/rank | comm %.2f MiB/step/rank%s\n",
               o.steps, first_loss, loss, val0, vloss, 1e3 * t_total / timed, tps, gflops,
               mb(peak_max), comm_bytes / (1024.0 * 1024.0), mfu);
        fflush(stdout);
    }
    metrics_line(mf, "{\"type\":\"done\",\"steps\":%ld,\"train_loss\":%s,\"val_loss\":%s,\"ms_per_step\":%.3f,"
                     "\"tok_s\":%.1f,\"gflops_per_rank\":%.4g,\"mfu\":%s,\"peak_mib_per_rank\":%.2f,"
                     "\"comm_mib_per_step_per_rank\":%.3f,\"elapsed_s\":%.3f}",
                 o.steps, jnum(nb[0], sizeof nb[0], loss), jnum(nb[1], sizeof nb[1], vloss), 1e3 * t_total / timed, tps,
                 gflops, o.peak_gflops > 0 ? jnum(nb[2], sizeof nb[2], gflops / o.peak_gflops) : "null", mb(peak_max),
                 comm_bytes / (1024.0 * 1024.0), pt_now() - t_start);
out:
    if (mf && fclose(mf)) fprintf(stderr, "ptrain-run: warning: closing the metrics file %s: %s\n", o.metrics, strerror(errno));
    free(in);
    free(tg);
    pt_pipeline_free(&pipe);
    pt_train_free(&tr);
    pt_gpt_free(&model);
    if (synth_train) { free(synth_train); free(synth_val); }
    else { pt_shard_close(&train); pt_shard_close(&val); }
    pt_pctx_free(&ctx);
    MPI_Finalize();
    return 0;
}
