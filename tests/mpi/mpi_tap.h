/* SPDX-License-Identifier: MIT */
/* TAP from an MPI test: one line per check for all ranks (ok only if ok on
 * every rank), printed by rank 0 without a number; the driver script
 * (tests/lib.sh: mpi_tap) numbers the lines and tags them with the run.
 * Header-only, for the programs under tests/mpi. */
#ifndef PTRAIN_MPI_TAP_H
#define PTRAIN_MPI_TAP_H
#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static int tap_rank0;    /* set by main after MPI_Init: world rank == 0 */
static int tap_failures; /* checks that failed so far (main's exit status) */

/* MPI_Init and tap_rank0 (every test program's first lines). */
static inline void tap_init(int *argc, char ***argv)
{
    int wr;
    MPI_Init(argc, argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &wr);
    tap_rank0 = wr == 0;
}

/* The run's random seed, the same on every rank: fresh each run (clock),
 * or $PTRAIN_TEST_SEED to reproduce a failure (the tests print the seed). */
static inline unsigned long tap_seed(void)
{
    unsigned long seed = (unsigned long)time(NULL) ^ ((unsigned long)clock() << 16);
    if (getenv("PTRAIN_TEST_SEED")) seed = strtoul(getenv("PTRAIN_TEST_SEED"), NULL, 10);
    MPI_Bcast(&seed, 1, MPI_UNSIGNED_LONG, 0, MPI_COMM_WORLD);
    return seed;
}

static void report(int ok, const char *fmt, ...) __attribute__((format(printf, 2, 3), unused));
static void report(int ok, const char *fmt, ...)
{
    int all_ok = ok;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all_ok) tap_failures++;
    if (!tap_rank0) return;
    va_list ap;
    va_start(ap, fmt);
    printf("%s - ", all_ok ? "ok" : "not ok");
    vprintf(fmt, ap);
    printf("\n");
    fflush(stdout);
    va_end(ap);
}

/* max of v over all ranks */
static inline double max_world(double v)
{
    double m = v;
    MPI_Allreduce(&v, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return m;
}

/* max of v over all ranks, with `name` ([n] chars) replaced by the name of
 * the rank holding the maximum (so a report names the worst tensor) */
static inline double max_world_named(double v, char *name, size_t n)
{
    struct { double v; int rank; } in = {v, 0}, out;
    MPI_Comm_rank(MPI_COMM_WORLD, &in.rank);
    MPI_Allreduce(&in, &out, 1, MPI_DOUBLE_INT, MPI_MAXLOC, MPI_COMM_WORLD);
    MPI_Bcast(name, (int)n, MPI_CHAR, out.rank, MPI_COMM_WORLD);
    return out.v;
}

#endif
