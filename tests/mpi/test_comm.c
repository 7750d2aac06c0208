/* SPDX-License-Identifier: MIT */
/* lib/comm's collectives against references computed on every rank from
 * the same fresh random inputs, whole and split in chunks
 * (pt_comm.chunk_bytes): allreduce (sum, max, f64 sum), reduce-scatter,
 * allgather, broadcast, reduce, sendrecv.  Every result is compared with
 * the double-precision sum over ranks (float sums within 1e-5 x ranks,
 * max, copies and gathers exactly), and every call's counters with comm.h's
 * ring formulas to the byte: one logical call however many MPI calls it
 * took.  Chunk sizes are primes of floats so the pieces never line up with
 * the ranks' blocks.  The _t variants on bf16 elements the same way (sums
 * within bf16's pairwise roundings, counters at 2 bytes an element). */
#include "comm/comm.h"
#include "core/core.h"
#include "mpi_tap.h"
#include "shape/shape.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static unsigned long g_seed;

/* input element i of rank r in test t: uniform in [-1, 1), the same on
 * every rank that computes it (splitmix64 of the seed, test, rank, index) */
static float value(int t, int r, size_t i)
{
    uint64_t z = g_seed ^ ((uint64_t)t << 56) ^ ((uint64_t)r << 40) ^ (uint64_t)i;
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return (float)((double)(z >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static double sum_over_ranks(int t, int p, size_t i)
{
    double s = 0;
    for (int r = 0; r < p; r++) s += value(t, r, i);
    return s;
}

/* the counters' ring model (comm.h), the planner's formula too */
static uint64_t ring(uint64_t bytes, int p, int factor) { return pt_ring_bytes(bytes, p, factor); }

/* counters after one call of kind k on n payload bytes: calls 1, payload,
 * sent as comm.h; a group of one counts nothing */
static int counted_once(const pt_comm *c, enum pt_coll k, uint64_t payload, uint64_t sent)
{
    for (int j = 0; j < PT_COLL_N; j++) {
        uint64_t calls = j == (int)k && c->size > 1, pay = calls ? payload : 0, snt = calls ? sent : 0;
        if (c->stats.calls[j] != calls || c->stats.payload_bytes[j] != pay || c->stats.sent_bytes[j] != snt) return 0;
    }
    return 1;
}

static void run(pt_comm *w, size_t chunk_floats, size_t nb, int t0)
{
    const int p = w->size, me = w->rank;
    const size_t n = nb * (size_t)p; /* a multiple of the group for reduce-scatter / allgather */
    const float tol = 1e-5f * (float)p;
    char tag[96];
    snprintf(tag, sizeof tag, "n=%zu, chunk %s", n, chunk_floats ? "" : "default");
    if (chunk_floats) snprintf(tag, sizeof tag, "n=%zu, chunk %zu floats", n, chunk_floats);
    w->chunk_bytes = chunk_floats * sizeof(float);
    float *a = malloc(n * sizeof *a), *o = malloc(n * sizeof *o);
    double *d = malloc(n * sizeof *d);
    if (!a || !o || !d) { fprintf(stderr, "out of memory\n"); MPI_Abort(MPI_COMM_WORLD, 1); }
    double err;
    int rc, ok;

    /* allreduce sum */
    for (size_t i = 0; i < n; i++) a[i] = value(t0, me, i);
    pt_comm_reset_stats(w);
    rc = pt_allreduce_sum(w, a, n);
    err = 0;
    for (size_t i = 0; i < n; i++) err = fmax(err, fabs(a[i] - sum_over_ranks(t0, p, i)));
    report(!rc && max_world(err) <= tol, "allreduce sum, %s: max error %.2g", tag, max_world(err));
    report(counted_once(w, PT_COLL_ALLREDUCE, n * 4, ring(n * 4, p, 2)), "allreduce sum, %s: counted once", tag);

    /* allreduce max: exact */
    for (size_t i = 0; i < n; i++) a[i] = value(t0 + 1, me, i);
    rc = pt_allreduce_max(w, a, n);
    ok = !rc;
    for (size_t i = 0; i < n && ok; i++) {
        float m = value(t0 + 1, 0, i);
        for (int r = 1; r < p; r++) m = fmaxf(m, value(t0 + 1, r, i));
        ok = a[i] == m;
    }
    report(ok, "allreduce max, %s: exact", tag);

    /* allreduce f64: chunked by bytes, so half as many elements a call */
    for (size_t i = 0; i < n; i++) d[i] = value(t0 + 2, me, i);
    pt_comm_reset_stats(w);
    rc = pt_allreduce_sum_f64(w, d, n);
    err = 0;
    for (size_t i = 0; i < n; i++) err = fmax(err, fabs(d[i] - sum_over_ranks(t0 + 2, p, i)));
    report(!rc && max_world(err) <= 1e-12 * p, "allreduce f64, %s: max error %.2g", tag, max_world(err));
    report(counted_once(w, PT_COLL_ALLREDUCE, n * 8, ring(n * 8, p, 2)), "allreduce f64, %s: counted once", tag);

    /* reduce-scatter: rank r gets the sums of block r; in is left alone */
    for (size_t i = 0; i < n; i++) a[i] = value(t0 + 3, me, i);
    for (size_t i = 0; i < nb; i++) o[i] = NAN;
    pt_comm_reset_stats(w);
    rc = pt_reduce_scatter_sum(w, a, o, n);
    err = 0;
    ok = !rc;
    for (size_t i = 0; i < nb; i++) err = fmax(err, fabs(o[i] - sum_over_ranks(t0 + 3, p, (size_t)me * nb + i)));
    for (size_t i = 0; i < n && ok; i++) ok = a[i] == value(t0 + 3, me, i);
    report(ok && !(max_world(err) > tol), "reduce_scatter, %s: own block's sums, max error %.2g, input kept", tag,
           max_world(err));
    report(counted_once(w, PT_COLL_REDUCE_SCATTER, n * 4, ring(n * 4, p, 1)), "reduce_scatter, %s: counted once", tag);

    /* allgather: exact concatenation in rank order */
    for (size_t i = 0; i < nb; i++) a[i] = value(t0 + 4, me, i);
    pt_comm_reset_stats(w);
    rc = pt_allgather(w, a, o, n);
    ok = !rc;
    for (size_t i = 0; i < n && ok; i++) ok = o[i] == value(t0 + 4, (int)(i / nb), i % nb);
    report(ok, "allgather, %s: rank order, exact", tag);
    report(counted_once(w, PT_COLL_ALLGATHER, n * 4, ring(n * 4, p, 1)), "allgather, %s: counted once", tag);

    /* broadcast from the last rank: exact */
    for (size_t i = 0; i < n; i++) a[i] = value(t0 + 5, me, i);
    rc = pt_broadcast(w, a, n, p - 1);
    ok = !rc;
    for (size_t i = 0; i < n && ok; i++) ok = a[i] == value(t0 + 5, p - 1, i);
    report(ok, "broadcast from rank %d, %s: exact", p - 1, tag);

    /* reduce to the last rank: sums there, the others' buffers unchanged */
    for (size_t i = 0; i < n; i++) a[i] = value(t0 + 6, me, i);
    pt_comm_reset_stats(w);
    rc = pt_reduce_sum(w, a, n, p - 1);
    err = 0;
    ok = !rc;
    for (size_t i = 0; i < n; i++) {
        if (me == p - 1) err = fmax(err, fabs(a[i] - sum_over_ranks(t0 + 6, p, i)));
        else if (a[i] != value(t0 + 6, me, i)) ok = 0;
    }
    report(ok && max_world(err) <= tol, "reduce to rank %d, %s: max error %.2g, other ranks unchanged", p - 1, tag,
           max_world(err));
    report(counted_once(w, PT_COLL_REDUCE, n * 4, ring(n * 4, p, 1)), "reduce, %s: counted once", tag);

    /* sendrecv around the ring: exact */
    for (size_t i = 0; i < n; i++) a[i] = value(t0 + 7, me, i);
    rc = pt_sendrecv(w, a, (me + 1) % p, o, (me + p - 1) % p, n, 7);
    ok = !rc;
    for (size_t i = 0; i < n && ok; i++) ok = o[i] == value(t0 + 7, (me + p - 1) % p, i);
    report(ok, "sendrecv around the ring, %s: exact", tag);

    free(a), free(o), free(d);
    w->chunk_bytes = 0;
}

/* The _t collectives on bf16 (the tensor-parallel and pipeline traffic of
 * bf16 activations): sums within the roundings of the pairwise bf16 sums
 * (each <= 2^-8 of the magnitudes it adds, p - 1 of them) of the double sum
 * of the same bf16 inputs, gathers and copies exact, counters at 2 bytes
 * per element to the byte; chunk_elems (0: default) bf16 elements per MPI
 * call of a chunked collective. */
static void run_bf16(pt_comm *w, size_t chunk_elems, size_t nb, int t0)
{
    const int p = w->size, me = w->rank;
    const size_t n = nb * (size_t)p;
    char tag[96];
    snprintf(tag, sizeof tag, "bf16 n=%zu, chunk %s", n, chunk_elems ? "" : "default");
    if (chunk_elems) snprintf(tag + strlen(tag), sizeof tag - strlen(tag), "%zu elements", chunk_elems);
    w->chunk_bytes = 2 * chunk_elems;
    pt_bf16 *a = calloc(n, 2), *o = calloc(n, 2);
    if (!a || !o) MPI_Abort(MPI_COMM_WORLD, 1);
    /* input element i of rank r: value() rounded to bf16 */
#define BV(t, r, i) pt_bf16_to_f32(pt_f32_to_bf16(value(t, r, i)))
    for (size_t i = 0; i < n; i++) a[i] = pt_f32_to_bf16(value(t0, me, i));
    pt_comm_reset_stats(w);
    int rc = pt_allreduce_sum_t(w, a, n, PT_BF16);
    int ok = !rc && counted_once(w, PT_COLL_ALLREDUCE, 2 * n, ring(2 * n, p, 2));
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double exact = 0, mag = 0;
        for (int r = 0; r < p; r++) exact += BV(t0, r, i), mag += fabs(BV(t0, r, i));
        const double e = fabs(pt_bf16_to_f32(a[i]) - exact) / (p * 0x1p-8 * mag + 1e-30);
        if (!(e <= worst)) worst = e;
    }
    report(ok && worst <= 1, "allreduce sum, %s: within the pairwise bf16 roundings (%.2f of the bound), counted "
           "2 bytes an element", tag, worst);

    for (size_t i = 0; i < n; i++) a[i] = pt_f32_to_bf16(value(t0 + 1, me, i));
    pt_comm_reset_stats(w);
    rc = pt_reduce_scatter_sum_t(w, a, o, n, PT_BF16);
    ok = !rc && counted_once(w, PT_COLL_REDUCE_SCATTER, 2 * n, ring(2 * n, p, 1));
    worst = 0;
    for (size_t i = 0; i < nb; i++) {
        const size_t g = (size_t)me * nb + i;
        double exact = 0, mag = 0;
        for (int r = 0; r < p; r++) exact += BV(t0 + 1, r, g), mag += fabs(BV(t0 + 1, r, g));
        const double e = fabs(pt_bf16_to_f32(o[i]) - exact) / (p * 0x1p-8 * mag + 1e-30);
        if (!(e <= worst)) worst = e;
    }
    report(ok && worst <= 1, "reduce_scatter sum, %s: block %d within the bf16 roundings (%.2f of the bound), counted",
           tag, me, worst);

    for (size_t i = 0; i < n; i++) a[i] = pt_f32_to_bf16(value(t0 + 2, me, i));
    pt_comm_reset_stats(w);
    rc = pt_reduce_sum_t(w, a, n, 0, PT_BF16);
    ok = !rc && counted_once(w, PT_COLL_REDUCE, 2 * n, ring(2 * n, p, 1));
    worst = 0;
    for (size_t i = 0; i < n && me == 0; i++) {
        double exact = 0, mag = 0;
        for (int r = 0; r < p; r++) exact += BV(t0 + 2, r, i), mag += fabs(BV(t0 + 2, r, i));
        const double e = fabs(pt_bf16_to_f32(a[i]) - exact) / (p * 0x1p-8 * mag + 1e-30);
        if (!(e <= worst)) worst = e;
    }
    report(ok && max_world(worst) <= 1, "reduce sum to rank 0, %s: within the bf16 roundings, counted", tag);

    for (size_t i = 0; i < nb; i++) a[i] = pt_f32_to_bf16(value(t0 + 3, me, i));
    pt_comm_reset_stats(w);
    rc = pt_allgather_t(w, a, o, n, PT_BF16);
    ok = !rc && counted_once(w, PT_COLL_ALLGATHER, 2 * n, ring(2 * n, p, 1));
    for (size_t i = 0; i < n && ok; i++) ok = o[i] == pt_f32_to_bf16(value(t0 + 3, (int)(i / nb), i % nb));
    report(ok, "allgather, %s: exact, counted", tag);

    for (size_t i = 0; i < n; i++) a[i] = pt_f32_to_bf16(value(t0 + 4, me, i));
    pt_comm_reset_stats(w);
    rc = pt_broadcast_t(w, a, n, p - 1, PT_BF16);
    ok = !rc && counted_once(w, PT_COLL_BROADCAST, 2 * n, ring(2 * n, p, 1));
    for (size_t i = 0; i < n && ok; i++) ok = a[i] == pt_f32_to_bf16(value(t0 + 4, p - 1, i));
    report(ok, "broadcast from the last rank, %s: exact, counted", tag);

    for (size_t i = 0; i < n; i++) a[i] = pt_f32_to_bf16(value(t0 + 5, me, i));
    pt_comm_reset_stats(w);
    rc = pt_sendrecv_t(w, a, (me + 1) % p, o, (me + p - 1) % p, n, 9, PT_BF16);
    ok = !rc && w->stats.sent_bytes[PT_COLL_SEND] == 2 * n && w->stats.payload_bytes[PT_COLL_RECV] == 2 * n;
    for (size_t i = 0; i < n && ok; i++) ok = o[i] == pt_f32_to_bf16(value(t0 + 5, (me + p - 1) % p, i));
    report(ok, "sendrecv around the ring, %s: exact, 2 bytes an element each way", tag);
#undef BV
    free(a), free(o);
    w->chunk_bytes = 0;
}

int main(int argc, char **argv)
{
    tap_init(&argc, &argv);
    g_seed = tap_seed();
    pt_comm w;
    pt_comm_wrap(&w, MPI_COMM_WORLD, "world");
    if (tap_rank0) printf("# seed %lu (PTRAIN_TEST_SEED=%lu reproduces), %d ranks\n", g_seed, g_seed, w.size);

    report(w.chunk_bytes == 0, "a wrapped group starts with the default chunk (%zu bytes)", (size_t)PT_COMM_CHUNK_BYTES);
    run(&w, 0, 1, 0);          /* one element a rank */
    run(&w, 0, 3001, 10);      /* below the default chunk: one MPI call */
    run(&w, 997, 2503, 20);    /* chunked: pieces cross the blocks */
    run(&w, 1, 5, 30);         /* one float a call (reduce-scatter: 1 per rank) */
    run(&w, 4099, 4099, 40);   /* exactly one chunk per block */

    run_bf16(&w, 0, 2001, 50);
    run_bf16(&w, 997, 2503, 60); /* chunked: pieces cross the blocks */
    run_bf16(&w, 1, 5, 70);
    {
        double x = 1.5;
        int rc = pt_allreduce_sum_t(&w, &x, 1, (pt_dtype)7);
        report(rc == PT_EINVAL && strstr(pt_errmsg(), "element type 7"), "an unknown element type is refused: %s",
               pt_errmsg());
    }

    /* a count that is not a multiple of the group is refused, with a message */
    if (w.size > 1) {
        float x[8] = {0}, y[8];
        int rc = pt_reduce_scatter_sum(&w, x, y, (size_t)w.size + 1);
        report(rc == PT_EINVAL && strstr(pt_errmsg(), "multiple of the group size"),
               "reduce_scatter of size+1 floats is refused: %s", pt_errmsg());
    }
    MPI_Finalize();
    return tap_failures ? 1 : 0;
}
