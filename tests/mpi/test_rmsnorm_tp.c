/* SPDX-License-Identifier: MIT */
/* lib/parallel's distributed RMSNorm (pt_rmsnorm_fwd/bwd, layout.h) over
 * the world group, each rank holding C/p columns of every row, against the
 * whole-row ops (rmsnorm_fwd/bwd) on the full rows computed on every rank
 * from the same fresh random inputs: out, rstd, dx (+=) and dw (+=) of the
 * rank's columns, for the CPU's f32 and bf16 tables; dx NULL; the arena's
 * scratch returned; one [N] allreduce each way (the group's counters).  The
 * seed is printed; PTRAIN_TEST_SEED reproduces. */
#include "backend/ops.h"
#include "comm/comm.h"
#include "core/core.h"
#include "mpi_tap.h"
#include "parallel/layout.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t dsz(pt_dtype t) { return t == PT_F32 ? 4 : 2; }

/* columns [c0, c0 + Cl) of rows of C doubles, as dt elements */
static void *slice(pt_dtype dt, const double *x, int N, int C, int c0, int Cl)
{
    void *p = calloc((size_t)N * Cl + 1, dsz(dt));
    if (!p) abort();
    for (int n = 0; n < N; n++)
        for (int c = 0; c < Cl; c++) {
            const double v = x[(size_t)n * C + c0 + c];
            if (dt == PT_F32) ((float *)p)[(size_t)n * Cl + c] = (float)v;
            else ((pt_bf16 *)p)[(size_t)n * Cl + c] = pt_f32_to_bf16((float)v);
        }
    return p;
}
static double get(pt_dtype dt, const void *p, size_t i)
{
    return dt == PT_F32 ? ((const float *)p)[i] : pt_bf16_to_f32(((const pt_bf16 *)p)[i]);
}
/* max |a - b| / max |b| over the columns [c0, c0 + Cl) of b's rows of C (a: rows of Cl) */
static double err(pt_dtype dt, const void *a, const void *b, int N, int C, int c0, int Cl)
{
    double e = 0, m = 0;
    for (int n = 0; n < N; n++)
        for (int c = 0; c < Cl; c++) {
            const double x = get(dt, a, (size_t)n * Cl + c), y = get(dt, b, (size_t)n * C + c0 + c);
            if (!(fabs(x - y) <= e)) e = fabs(x - y);
            if (fabs(y) > m) m = fabs(y);
        }
    return e / (m > 0 ? m : 1);
}

static void run(pt_comm *w, const pt_ops *o, double tact, double tacc, unsigned long seed, int N, int C)
{
    const int p = w->size, Cl = C / p, c0 = w->rank * Cl;
    const pt_dtype A = o->act, Z = o->acc;
    const double eps = 1e-5;
    const size_t n = (size_t)N * C;
    pt_rng r;
    pt_rng_seed(&r, seed, 7);
    double *x = calloc(n, 8), *wt = calloc(C, 8), *dy = calloc(n, 8), *dx0 = calloc(n, 8), *dw0 = calloc(C, 8);
    if (!x || !wt || !dy || !dx0 || !dw0) abort();
    for (size_t i = 0; i < n; i++) x[i] = 1.5 * pt_rng_normal(&r), dy[i] = pt_rng_normal(&r), dx0[i] = pt_rng_normal(&r);
    for (int c = 0; c < C; c++) wt[c] = 0.5 + pt_rng_uniform(&r), dw0[c] = pt_rng_normal(&r);
    /* the whole rows on every rank */
    void *fx = slice(A, x, N, C, 0, C), *fw = slice(A, wt, 1, C, 0, C), *fdy = slice(A, dy, N, C, 0, C),
         *fdx = slice(A, dx0, N, C, 0, C), *fdw = slice(Z, dw0, 1, C, 0, C), *fout = slice(A, dx0, N, C, 0, C),
         *frs = slice(Z, dx0, 1, N, 0, N);
    o->rmsnorm_fwd(fout, frs, fx, fw, N, C, eps);
    o->rmsnorm_bwd(fdx, fdw, fdy, fx, fw, frs, N, C);
    /* this rank's columns over the group */
    void *lx = slice(A, x, N, C, c0, Cl), *lw = slice(A, wt, 1, C, c0, Cl), *ldy = slice(A, dy, N, C, c0, Cl),
         *ldx = slice(A, dx0, N, C, c0, Cl), *ldw = slice(Z, dw0, 1, C, c0, Cl), *lout = slice(A, dx0, N, C, c0, Cl),
         *lrs = slice(Z, dx0, 1, N, 0, N);
    pt_arena a = {0};
    memset(&w->stats, 0, sizeof w->stats);
    int rc = pt_rmsnorm_fwd(w, o, &a, lout, lrs, lx, lw, N, Cl, C, eps);
    const uint64_t fwd_calls = w->stats.calls[PT_COLL_ALLREDUCE];
    if (!rc) rc = pt_rmsnorm_bwd(w, o, &a, ldx, ldw, ldy, lx, lw, lrs, N, Cl, C);
    const uint64_t all_calls = w->stats.calls[PT_COLL_ALLREDUCE];
    const double eo = err(A, lout, fout, N, C, c0, Cl), er = err(Z, lrs, frs, 1, N, 0, N),
                 ed = err(A, ldx, fdx, N, C, c0, Cl), ew = err(Z, ldw, fdw, 1, C, c0, Cl);
    const double worst_act = max_world(fmax(eo, ed)), worst_acc = max_world(fmax(er, ew));
    const int one_each = p == 1 || (fwd_calls == 1 && all_calls == 2);
    report(rc == PT_OK && worst_act <= tact && worst_acc <= tacc && one_each && a.cur == 0,
           "pt_rmsnorm_fwd/bwd %s over %d ranks (N=%d C=%d, Cl=%d): == the whole-row ops (out, dx err %.1e, tol "
           "%.0e; rstd, dw err %.1e, tol %.0e), allreduces %llu forward, %llu backward, arena %zu bytes left",
           o->name, p, N, C, Cl, worst_act, tact, worst_acc, tacc, (unsigned long long)fwd_calls,
           (unsigned long long)(all_calls - fwd_calls), a.cur);
    /* dx NULL: dw alone, the same increment again */
    void *ldw2 = slice(Z, dw0, 1, C, c0, Cl);
    rc = pt_rmsnorm_bwd(w, o, &a, NULL, ldw2, ldy, lx, lw, lrs, N, Cl, C);
    const double e2 = max_world(err(Z, ldw2, fdw, 1, C, c0, Cl));
    report(rc == PT_OK && e2 <= tacc, "pt_rmsnorm_bwd %s over %d ranks with dx NULL: dw the same (err %.1e)", o->name,
           p, e2);
    free(x), free(wt), free(dy), free(dx0), free(dw0);
    free(fx), free(fw), free(fdy), free(fdx), free(fdw), free(fout), free(frs);
    free(lx), free(lw), free(ldy), free(ldx), free(ldw), free(lout), free(lrs), free(ldw2);
}

int main(int argc, char **argv)
{
    tap_init(&argc, &argv);
    const unsigned long seed = tap_seed();
    pt_comm w;
    pt_comm_wrap(&w, MPI_COMM_WORLD, "world");
    if (tap_rank0) printf("# seed %lu (PTRAIN_TEST_SEED=%lu reproduces), %d ranks\n", seed, seed, w.size);
    const int C = 12 * w.size * 5; /* columns split evenly at any rank count */
    run(&w, &pt_cpu_ops_f32, 1e-5, 1e-5, seed, 37, C);
    run(&w, &pt_cpu_ops_bf16, 1e-2, 1e-4, seed, 37, C);
    MPI_Finalize();
    return tap_failures ? 1 : 0;
}
