/* bench-coll: lib/comm's collectives against one plain MPI call each.
 *
 *   usage: mpirun -np P bench/bench-coll [--sizes 32K,768K,4M,16M,51M]
 *                                         [--iters 10] [--keep-memory] [--help]
 *
 * For every size S (bytes of the full buffer, rounded down to a multiple
 * of 4 P) it times, after one untimed call and a barrier before each call,
 * the median over --iters calls of the slowest rank's time of
 *   allreduce / MPI_Allreduce             S bytes in place; lib/comm splits
 *                                         it in PT_COMM_CHUNK_BYTES calls
 *   reduce_scatter / MPI_Reduce_scatter_block   S in, S/P out: lib/comm runs
 *                                         MPI_Reduce_scatter with equal
 *                                         counts, chunked; Open MPI's block
 *                                         form defaults to a reduce to rank 0
 *                                         and a linear scatter
 *                                         (open-mpi/ompi#5156)
 *   reduce / MPI_Reduce                   S bytes to rank 0, chunked
 *   allgather / MPI_Allgather             S/P in, S out (one call both)
 * and prints one markdown table: ms per call, bus bandwidth (GB/s, the
 * nccl-tests definition that lib/comm's counters use: 2(P-1)/P S / t for
 * the allreduce, (P-1)/P S / t for the others) and, on lib/comm's rows,
 * the speed-up over the plain MPI call of the same size, the baseline.
 * lib/comm's results are checked against the plain call's (the same sums
 * to float rounding; a mismatch is an error), so a fast path is never a
 * wrong one.  --keep-memory calls pt_host_memory_keep first, as ptrain-run
 * does: MPI's temporary buffers then come from the heap, and the plain
 * calls lose their page faults above 32 MiB too.  On this project's 2-core machines, where ranks share cores,
 * Open MPI needs --oversubscribe beyond 2 ranks.
 */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include "comm/comm.h"
#include "core/core.h"
#include "bench_opts.h"

#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { K_AR, K_MPI_AR, K_RS, K_MPI_RSB, K_RED, K_MPI_RED, K_AG, K_MPI_AG, K_N };
static const char *kname[K_N] = {"allreduce",  "MPI_Allreduce", "reduce_scatter", "MPI_Reduce_scatter_block",
                                 "reduce",     "MPI_Reduce",    "allgather",      "MPI_Allgather"};

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* "32K", "4M", "100": bytes, or 0 when malformed */
static size_t parse_size(const char *s)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || v <= 0) return 0;
    if (*end == 'K' || *end == 'k') v *= 1024, end++;
    else if (*end == 'M' || *end == 'm') v *= 1024 * 1024, end++;
    return *end ? 0 : (size_t)v;
}

static int mpi_rc(int rc, const char *what, size_t n)
{
    return rc == MPI_SUCCESS ? PT_OK : pt_fail(PT_ECOMM, "%s of %zu floats failed", what, n);
}

/* one call of kind k: in a (n floats; n/P for the allgathers), out o */
static int one_call(int k, pt_comm *c, float *a, float *o, size_t n)
{
    const int np = (int)(n / (size_t)c->size);
    switch (k) {
    case K_AR: return pt_allreduce_sum(c, a, n);
    case K_MPI_AR: return mpi_rc(MPI_Allreduce(MPI_IN_PLACE, a, (int)n, MPI_FLOAT, MPI_SUM, c->comm), kname[k], n);
    case K_RS: return pt_reduce_scatter_sum(c, a, o, n);
    case K_MPI_RSB: return mpi_rc(MPI_Reduce_scatter_block(a, o, np, MPI_FLOAT, MPI_SUM, c->comm), kname[k], n);
    case K_RED: return pt_reduce_sum(c, a, n, 0);
    case K_MPI_RED:
        return mpi_rc(MPI_Reduce(c->rank ? a : MPI_IN_PLACE, a, (int)n, MPI_FLOAT, MPI_SUM, 0, c->comm), kname[k], n);
    case K_AG: return pt_allgather(c, a, o, n);
    default: return mpi_rc(MPI_Allgather(a, np, MPI_FLOAT, o, np, MPI_FLOAT, c->comm), kname[k], n);
    }
}

/* the same inputs for every call: fresh-looking values that differ by rank */
static void fill(float *a, size_t n, int rank)
{
    for (size_t i = 0; i < n; i++) a[i] = (float)((i * 7 + (size_t)rank * 13) % 101) / 101.0f;
}

/* the result a call of kind k leaves where its pair's result is compared:
 * the whole buffer for the allreduces, rank 0's buffer for the reduces,
 * the output for the others */
static const float *result(int k, const float *a, const float *o, size_t *len, size_t n, int P, int rank)
{
    if (k == K_AR || k == K_MPI_AR) { *len = n; return a; }
    if (k == K_RED || k == K_MPI_RED) { *len = rank ? 0 : n; return a; }
    *len = (k == K_RS || k == K_MPI_RSB) ? n / (size_t)P : n;
    return o;
}

int main(int argc, char **argv)
{
    int keep = 0, iters = 10;
    const char *sizes = "32K,768K,4M,16M,51M";
    const bench_opt opts[] = {
        {"sizes", BENCH_STR, 0, 0, &sizes, "LIST", "comma-separated buffer sizes in bytes, with K or M", NULL},
        {"iters", BENCH_INT, 1, 10000, &iters, "N", "timed calls per size and call, the median kept", NULL},
        {"keep-memory", BENCH_FLAG, 0, 0, &keep, "", "call pt_host_memory_keep first, as ptrain-run does", NULL},
        {0}};
    bench_opts_parse(argc, argv, "bench-coll", "mpirun -np P bench-coll [options]",
                     "lib/comm's collectives size by size against one plain MPI call each: ms, bus bandwidth, speed-up.",
                     opts);
    if (keep) pt_host_memory_keep();
    MPI_Init(&argc, &argv);
    pt_comm w;
    pt_comm_wrap(&w, MPI_COMM_WORLD, "world");
    const int P = w.size;
    if (!w.rank) {
        printf("## bench-coll: %d ranks, median of %d calls, freed memory %s\n\n", P, iters,
               keep ? "kept (pt_host_memory_keep)" : "returned (glibc's default)");
        printf("| bytes | call | ms | busbw GB/s | speed-up over plain MPI |\n|---|---|---|---|---|\n");
    }
    char *list = strdup(sizes);
    int rc = 0;
    for (char *tok = strtok(list, ","); tok && !rc; tok = strtok(NULL, ",")) {
        size_t bytes = parse_size(tok);
        size_t n = bytes / 4 / (size_t)P * (size_t)P;
        if (!n) {
            if (!w.rank) fprintf(stderr, "bench-coll: bad size '%s' (valid: bytes >= %d, with K or M)\n", tok, 4 * P);
            rc = 2;
            break;
        }
        float *a = malloc(n * sizeof *a), *o = malloc(n * sizeof *o), *ref = malloc(n * sizeof *ref);
        double *t = malloc((size_t)iters * sizeof *t), ms[K_N];
        if (!a || !o || !ref || !t) { fprintf(stderr, "bench-coll: out of memory at %zu bytes\n", bytes); MPI_Abort(MPI_COMM_WORLD, 1); }
        for (int k = 0; k < K_N && !rc; k++) {
            for (int it = -1; it < iters && !rc; it++) {
                fill(a, n, w.rank);
                MPI_Barrier(MPI_COMM_WORLD);
                double t0 = MPI_Wtime();
                rc = one_call(k, &w, a, o, n);
                double dt = MPI_Wtime() - t0;
                MPI_Allreduce(MPI_IN_PLACE, &dt, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
                if (it >= 0) t[it] = dt;
            }
            if (rc) break;
            /* lib/comm's result (even k) against the plain call's (k + 1) */
            size_t len;
            const float *res = result(k, a, o, &len, n, P, w.rank);
            if (k % 2 == 0) memcpy(ref, res, len * sizeof *ref);
            int wrong = 0;
            for (size_t i = 0; k % 2 && i < len; i++)
                if (fabsf(res[i] - ref[i]) > 1e-5f * (float)P) wrong = 1;
            MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
            if (wrong) rc = pt_fail(PT_ECOMM, "%s of %zu bytes differs from %s's result", kname[k - 1], n * 4, kname[k]);
            qsort(t, (size_t)iters, sizeof *t, cmp_double);
            ms[k] = t[iters / 2] * 1e3;
        }
        if (!rc && !w.rank)
            for (int k = 0; k < K_N; k++) {
                double factor = k <= K_MPI_AR ? 2.0 * (P - 1) / P : (double)(P - 1) / P;
                printf("| %zu | %s | %.3f | %.3f |", n * 4, kname[k], ms[k], factor * (double)n * 4 / (ms[k] * 1e-3) / 1e9);
                if (k % 2 == 0) printf(" %.2f |\n", ms[k + 1] / ms[k]);
                else printf(" |\n");
            }
        free(a), free(o), free(ref), free(t);
    }
    free(list);
    if (rc && rc != 2) fprintf(stderr, "bench-coll: rank %d: %s\n", w.rank, pt_errmsg());
    MPI_Finalize();
    return rc ? 1 : 0;
}
