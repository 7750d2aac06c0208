/* SPDX-License-Identifier: MIT */
/* ptrain-run: the training job, one process per rank (srun, sbatch or
 * mpirun).  The plan comes from the PTRAIN_* variables the SPANK plugin
 * injects, overridden by flags of the same names, so the same binary runs
 * under plain mpirun.  The modules are in bin/run/run.h; this is their
 * order:
 *   --help/--version (no MPI) -> MPI_Init -> heartbeat -> the job's nodes
 *   -> each rank's set-up -> the start-up agreement -> watchdog -> train. */
#define _GNU_SOURCE
#include "run.h"
#include "comm/comm.h"

#include <mpi.h>
#include <signal.h>
#include <stdlib.h>

/* The job's nodes (pt_comm_nodes: ranks that share memory are one node),
 * learnt collectively before the set-up that a rank may leave early. */
static void job_nodes(int world, run_nodes *n)
{
    pt_comm wc;
    pt_comm_wrap(&wc, MPI_COMM_WORLD, "world");
    n->tpn = malloc(sizeof(int) * (size_t)world);
    if (!n->tpn) {
        fprintf(stderr, "ptrain-run: error: rank %d: out of memory for the node list\n", run_rank);
        MPI_Abort(MPI_COMM_WORLD, PT_EXIT_FAIL);
    }
    if (pt_comm_nodes(&wc, n->tpn, &n->nnodes, &n->node) != PT_OK) {
        n->nnodes = 1; /* as one node of every rank; the agreement compares the plans */
        n->tpn[0] = world;
        n->node = 0;
    }
}

int main(int argc, char **argv)
{
    int asked = 0;
    if (run_early_exit(argc, argv, &asked)) return PT_EXIT_OK;
    /* A write to a peer's closed connection must fail with EPIPE, not kill
     * the rank: a peer that finished and left can close its sockets while
     * this rank still sends the heartbeat's last messages (srun, unlike
     * mpirun's daemons, starts ranks with SIGPIPE at its default). */
    signal(SIGPIPE, SIG_IGN);
    /* a file-size limit (ulimit -f) makes a write fail with EFBIG, reported
     * in one line by the writer, rather than kill the rank */
    signal(SIGXFSZ, SIG_IGN);
    /* a step frees and re-allocates the same large blocks (ZeRO's units,
     * MPI's temporaries): keep them rather than fault fresh pages in each
     * step (core.h) */
    pt_host_memory_keep();
    int provided = MPI_THREAD_SINGLE, world = 1;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided); /* the heartbeat thread */
    MPI_Comm_rank(MPI_COMM_WORLD, &run_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    run_watchdog_beat("start-up");
    int hb = run_heartbeat_start(world);
    run_nodes nodes = {0};
    job_nodes(world, &nodes);

    static run_setup s; /* large (the auto plan's search result) */
    int ok = !asked && hb == PT_OK && run_setup_rank(argc, argv, world, &nodes, &s) == 0;
    uint64_t agreed = run_agree_startup(ok, asked, &s, world);
    run_watchdog_start(s.o.watchdog);
    if (run_rank == 0 && s.aut.on) {
        /* the warnings and the explanation of a plan made here (--mode auto) */
        if (s.aut.notes[0]) fprintf(stderr, "%s\n", s.aut.notes);
        if (s.o.explain) {
            size_t need = pt_plan_explain(&s.aut.res, &s.aut.m, (int)s.o.batch, NULL, 0) + 1;
            char *text = malloc(need);
            printf("machine: %s\n", s.aut.machine);
            if (text) {
                pt_plan_explain(&s.aut.res, &s.aut.m, (int)s.o.batch, text, need);
                fputs(text, stdout);
                free(text);
            }
        }
        fflush(stdout);
        fflush(stderr);
    } else if (run_rank == 0 && s.o.explain) {
        fprintf(stderr, "ptrain-run: warning: --explain explains a plan made by --mode auto; this one came "
                        "from %s (see ptrain-plan for its explanation)\n", s.source);
    }
    int status = run_train(&s, agreed, world);
    run_setup_free(&s);
    free(nodes.tpn);
    MPI_Finalize();
    return status;
}
