/* TAP from an MPI test: one line per check for all ranks (ok only if ok on
 * every rank), printed by rank 0 without a number; the driver script
 * (tests/lib.sh: mpi_tap) numbers the lines and tags them with the run.
 * Header-only, for the programs under tests/mpi. */
#ifndef PTRAIN_MPI_TAP_H
#define PTRAIN_MPI_TAP_H
#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>

static int tap_rank0;    /* set by main after MPI_Init: world rank == 0 */
static int tap_failures; /* checks that failed so far (main's exit status) */

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
