/* SPDX-License-Identifier: MIT */
/* fence_delay: an LD_PRELOAD shim for the start-up tests under a local
 * Slurm (tests/slurm/test_fence.sh).  It interposes PMIx_Fence_nb, the
 * call through which Open MPI 4.1's MPI_Init runs its two fences (the
 * modex, then the barrier), and holds the completion of one of them in
 * one rank: with PTRAIN_TEST_FENCE_DELAY="RANK:CALL:SECONDS" the
 * completion callback of fence number CALL (1 = the modex) of the task
 * with SLURM_PROCID=RANK runs SECONDS late, in the PMIx client's thread,
 * while the rank's main thread keeps polling its transports inside
 * MPI_Init.  That is the slow rank of a loaded machine, made
 * deterministic: a barrier that holds keeps every other rank inside
 * MPI_Init meanwhile; one that does not lets them send to a rank whose
 * PML has not registered its receive callbacks yet.
 *
 * PTRAIN_TEST_FENCE_LOG=FILE appends "TIME RANK EVENT CALL" lines: "fence"
 * when a fence is called, "held" when its completion is held, "done" when
 * its completion reaches Open MPI.  Written without pmix.h: only pointers are passed on, and
 * the callback's type is PMIx's pmix_op_cbfunc_t, void (*)(int, void *). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <stdint.h>
#include <unistd.h>

typedef int pmix_status_t;
typedef void (*op_cbfunc)(pmix_status_t status, void *cbdata);
typedef pmix_status_t (*fence_nb_fn)(const void *procs, size_t nprocs, const void *info, size_t ninfo,
                                     op_cbfunc cbfunc, void *cbdata);

pmix_status_t PMIx_Fence_nb(const void *procs, size_t nprocs, const void *info, size_t ninfo, op_cbfunc cbfunc,
                            void *cbdata);

static int calls;

static void note(const char *what, int n)
{
    const char *path = getenv("PTRAIN_TEST_FENCE_LOG");
    FILE *f = path ? fopen(path, "a") : NULL;
    if (!f) return;
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    const char *r = getenv("SLURM_PROCID");
    fprintf(f, "%ld.%06ld %s %s %d\n", (long)t.tv_sec, t.tv_nsec / 1000, r ? r : "?", what, n);
    fclose(f);
}

typedef struct held {
    op_cbfunc cb;
    void *cbdata;
    int call;
    unsigned secs; /* 0: pass it on at once */
} held;

static void finish(held *h, pmix_status_t status)
{
    note("done", h->call);
    op_cbfunc cb = h->cb;
    void *cbdata = h->cbdata;
    free(h);
    if (cb) cb(status, cbdata);
}

typedef struct later {
    held *h;
    pmix_status_t status;
} later;

static void *hold_thread(void *arg)
{
    later *l = arg;
    sleep(l->h->secs);
    finish(l->h, l->status);
    free(l);
    return NULL;
}

/* Every fence's completion is logged ("done CALL").  The held one is
 * passed on from a thread of its own after its seconds, so that PMIx's
 * own thread stays free (Open MPI's transports ask it for peers' data
 * meanwhile; a PMIx thread asleep would stall them and hide the race). */
static void late(pmix_status_t status, void *arg)
{
    held *h = arg;
    if (h->secs) {
        note("held", h->call);
        later *l = malloc(sizeof *l);
        pthread_t t;
        pthread_attr_t at;
        if (l && pthread_attr_init(&at) == 0) {
            *l = (later){h, status};
            pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
            int rc = pthread_create(&t, &at, hold_thread, l);
            pthread_attr_destroy(&at);
            if (rc == 0) return;
        }
        free(l);
        sleep(h->secs); /* no thread: hold here */
    }
    finish(h, status);
}

pmix_status_t PMIx_Fence_nb(const void *procs, size_t nprocs, const void *info, size_t ninfo, op_cbfunc cbfunc,
                            void *cbdata)
{
    fence_nb_fn real = (fence_nb_fn)(uintptr_t)dlsym(RTLD_NEXT, "PMIx_Fence_nb");
    if (!real) abort();
    int n = ++calls;
    note("fence", n);
    const char *spec = getenv("PTRAIN_TEST_FENCE_DELAY"), *me = getenv("SLURM_PROCID");
    int rank = -1, call = 0, secs = 0;
    held *h = malloc(sizeof *h);
    if (!h) return real(procs, nprocs, info, ninfo, cbfunc, cbdata);
    *h = (held){cbfunc, cbdata, n, 0};
    if (spec && me && sscanf(spec, "%d:%d:%d", &rank, &call, &secs) == 3 && rank == atoi(me) && call == n &&
        secs > 0)
        h->secs = (unsigned)secs;
    pmix_status_t rc = real(procs, nprocs, info, ninfo, late, h);
    if (rc != 0) free(h); /* PMIx calls no callback when the call itself fails */
    return rc;
}
