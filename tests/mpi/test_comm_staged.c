/* lib/comm's device path, staged through host memory (comm_dev.c), on the
 * CPU: a group whose "device" buffers are host memory moved by memcpy
 * (pt_comm_device_enable_host), so the staging algorithm -- chunks,
 * packing of reduce-scatter and allgather blocks, roots, the group queue,
 * the bf16 MPI operations, the counters -- runs in every build without a
 * GPU.  Every call is made twice, on the staged group and on a plain host
 * group over the same ranks, with the same inputs; the results must be
 * bitwise equal (the inputs are small integers, whose sums are exact in
 * any order) and the counters equal to the byte.  Also: the choice
 * between NCCL and staging (pt_comm_dev_choose) and the bf16 operations'
 * rounding.  tests/gpu/test_comm_gpu runs the same on a GPU. */
#include "comm/comm.h"
#include "comm/comm_dev.h"
#include "core/core.h"
#include "mpi_tap.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static unsigned long g_seed;

/* an integer in [-16, 16] for element i of rank r in test t */
static int ival(int t, int r, size_t i)
{
    uint64_t z = g_seed ^ ((uint64_t)t << 56) ^ ((uint64_t)r << 40) ^ (uint64_t)i;
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return (int)(z % 33) - 16;
}

static float *fill_f(int t, int r, size_t n)
{
    float *x = malloc(sizeof *x * (n ? n : 1));
    for (size_t i = 0; i < n; i++) x[i] = (float)ival(t, r, i);
    return x;
}

static int same_stats(const pt_comm *a, const pt_comm *b) { return memcmp(&a->stats, &b->stats, sizeof a->stats) == 0; }

static int same(const void *a, const void *b, size_t bytes) { return memcmp(a, b, bytes) == 0; }

/* every float collective on both groups: h host, d staged */
static void run(pt_comm *h, pt_comm *d, size_t chunk_bytes, size_t nb, int t0)
{
    const int p = h->size, me = h->rank;
    const size_t n = nb * (size_t)p;
    h->chunk_bytes = d->chunk_bytes = chunk_bytes;
    pt_comm_reset_stats(h);
    pt_comm_reset_stats(d);
    char tag[96];
    if (chunk_bytes) snprintf(tag, sizeof tag, "n=%zu, chunk %zu bytes", n, chunk_bytes);
    else snprintf(tag, sizeof tag, "n=%zu, chunk default", n);

    float *a = fill_f(t0, me, n), *b = fill_f(t0, me, n);
    int rc = pt_allreduce_sum(h, a, n) | pt_allreduce_sum(d, b, n);
    report(!rc && same(a, b, n * 4) && same_stats(h, d), "staged allreduce sum, %s: equal to MPI's, counted alike", tag);
    free(a), free(b);
    a = fill_f(t0 + 1, me, n), b = fill_f(t0 + 1, me, n);
    rc = pt_allreduce_max(h, a, n) | pt_allreduce_max(d, b, n);
    report(!rc && same(a, b, n * 4) && same_stats(h, d), "staged allreduce max, %s", tag);
    free(a), free(b);
    double *da = malloc(sizeof *da * n), *db = malloc(sizeof *db * n);
    for (size_t i = 0; i < n; i++) da[i] = db[i] = ival(t0 + 2, me, i) * 0.25;
    rc = pt_allreduce_sum_f64(h, da, n) | pt_allreduce_sum_f64(d, db, n);
    report(!rc && same(da, db, n * 8) && same_stats(h, d), "staged allreduce f64, %s", tag);
    free(da), free(db);

    float *in = fill_f(t0 + 3, me, n), *o1 = calloc(nb + 1, 4), *o2 = calloc(nb + 1, 4);
    rc = pt_reduce_scatter_sum(h, in, o1, n) | pt_reduce_scatter_sum(d, in, o2, n);
    int ok = !rc && same(o1, o2, nb * 4) && same_stats(h, d);
    /* and against the exact sum of rank me's block */
    for (size_t i = 0; i < nb && ok; i++) {
        int s = 0;
        for (int r = 0; r < p; r++) s += ival(t0 + 3, r, (size_t)me * nb + i);
        ok &= o2[i] == (float)s;
    }
    report(ok, "staged reduce_scatter, %s: each rank its block's sums, exactly", tag);
    free(in), free(o1), free(o2);

    in = fill_f(t0 + 4, me, nb);
    o1 = calloc(n + 1, 4), o2 = calloc(n + 1, 4);
    rc = pt_allgather(h, in, o1, n) | pt_allgather(d, in, o2, n);
    ok = !rc && same(o1, o2, n * 4) && same_stats(h, d);
    for (int r = 0; r < p && ok; r++)
        for (size_t i = 0; i < nb; i++) ok &= o2[(size_t)r * nb + i] == (float)ival(t0 + 4, r, i);
    report(ok, "staged allgather, %s: rank order, exact", tag);
    free(in), free(o1), free(o2);

    const int root = p - 1;
    a = fill_f(t0 + 5, me, n), b = fill_f(t0 + 5, me, n);
    rc = pt_broadcast(h, a, n, root) | pt_broadcast(d, b, n, root);
    ok = !rc && same(a, b, n * 4) && same_stats(h, d);
    for (size_t i = 0; i < n && ok; i++) ok &= b[i] == (float)ival(t0 + 5, root, i);
    report(ok, "staged broadcast from rank %d, %s", root, tag);
    free(a), free(b);

    a = fill_f(t0 + 6, me, n), b = fill_f(t0 + 6, me, n);
    rc = pt_reduce_sum(h, a, n, root) | pt_reduce_sum(d, b, n, root);
    ok = !rc && same(a, b, n * 4) && same_stats(h, d);
    if (me != root)
        for (size_t i = 0; i < n && ok; i++) ok &= b[i] == (float)ival(t0 + 6, me, i);
    report(ok, "staged reduce to rank %d, %s: the root's sums, the others unchanged", root, tag);
    free(a), free(b);

    const int right = (me + 1) % p, left = (me + p - 1) % p;
    float *s = fill_f(t0 + 7, me, n);
    o1 = calloc(n + 1, 4), o2 = calloc(n + 1, 4);
    rc = pt_sendrecv(h, s, right, o1, left, n, 5) | pt_sendrecv(d, s, right, o2, left, n, 5);
    ok = !rc && same(o1, o2, n * 4) && same_stats(h, d);
    for (size_t i = 0; i < n && ok; i++) ok &= o2[i] == (float)ival(t0 + 7, left, i);
    report(ok, "staged sendrecv around the ring, %s", tag);
    /* plain send / recv in pairs (even sends to odd) */
    if (p > 1) {
        int peer = me % 2 ? me - 1 : me + 1;
        if (peer < p) {
            if (me % 2 == 0) rc = pt_send(h, s, n, peer, 9) | pt_send(d, s, n, peer, 9);
            else rc = pt_recv(h, o1, n, peer, 9) | pt_recv(d, o2, n, peer, 9);
        } else {
            rc = 0;
        }
        ok = !rc && same(o1, o2, n * 4) && same_stats(h, d);
        if (peer < p && me % 2)
            for (size_t i = 0; i < n && ok; i++) ok &= o2[i] == (float)ival(t0 + 7, peer, i);
        report(ok, "staged send / recv between pairs, %s", tag);
    }
    free(s), free(o1), free(o2);
}

/* A staged group: every rank posts its receives from both neighbours
 * before its sends (a deadlock for blocking MPI calls of large messages);
 * the group queues them and runs them together. */
static void run_group(pt_comm *d, size_t n, int t0)
{
    const int p = d->size, me = d->rank, right = (me + 1) % p, left = (me + p - 1) % p;
    float *s = fill_f(t0, me, n), *fromleft = calloc(n, 4), *fromright = calloc(n, 4);
    pt_comm_reset_stats(d);
    int rc = pt_comm_group_start(d);
    if (!rc) rc = pt_recv(d, fromleft, n, left, 1);
    if (!rc) rc = pt_recv(d, fromright, n, right, 2);
    if (!rc) rc = pt_send(d, s, n, right, 1);
    if (!rc) rc = pt_send(d, s, n, left, 2);
    int mid = fromleft[0] == 0 && fromright[n - 1] == 0; /* nothing arrived before the end */
    if (!rc) rc = pt_comm_group_end(d);
    int ok = !rc && mid;
    for (size_t i = 0; i < n && ok; i++)
        ok &= fromleft[i] == (float)ival(t0, left, i) && fromright[i] == (float)ival(t0, right, i);
    ok &= d->stats.calls[PT_COLL_SEND] == 2 && d->stats.calls[PT_COLL_RECV] == 2 &&
          d->stats.sent_bytes[PT_COLL_SEND] == 2 * n * 4 && d->stats.payload_bytes[PT_COLL_RECV] == 2 * n * 4;
    report(ok, "staged group of %zu-float receives posted before the sends, both neighbours: all arrive at the end, "
               "counted as two sends and two receives", n);
    free(s), free(fromleft), free(fromright);
}

static uint16_t bf(float x) /* exact for the values used */
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return (uint16_t)(u >> 16);
}

static void test_bf16(pt_comm *d, size_t chunk_bytes, int t0)
{
    const int p = d->size, me = d->rank;
    const size_t n = 3001;
    d->chunk_bytes = chunk_bytes;
    pt_comm_reset_stats(d);
    uint16_t *x = malloc(2 * n), *y = malloc(2 * n);
    for (size_t i = 0; i < n; i++) x[i] = bf((float)ival(t0, me, i)), y[i] = bf((float)ival(t0 + 1, me, i));
    int rc = pt_comm_dev_allreduce(d, x, n, PT_COMM_BF16, PT_COMM_SUM);
    rc |= pt_comm_dev_allreduce(d, y, n, PT_COMM_BF16, PT_COMM_MAX);
    int ok = !rc;
    for (size_t i = 0; i < n && ok; i++) {
        int s = 0, m = -100;
        for (int r = 0; r < p; r++) {
            s += ival(t0, r, i);
            if (ival(t0 + 1, r, i) > m) m = ival(t0 + 1, r, i);
        }
        ok &= x[i] == bf((float)s) && y[i] == bf((float)m);
    }
    uint64_t payload = p > 1 ? 2 * n * 2 : 0;
    ok &= d->stats.payload_bytes[PT_COLL_ALLREDUCE] == payload;
    report(ok, "bf16 allreduce sum and max (MPI user operations, %s): exact, counted in 2-byte elements",
           chunk_bytes ? "small chunks" : "default chunk");
    uint16_t *g = malloc(2 * n * (size_t)p);
    rc = pt_comm_dev_allgather(d, x, g, n * (size_t)p, PT_COMM_BF16);
    ok = !rc;
    for (int r = 0; r < p && ok; r++) ok &= memcmp(g + (size_t)r * n, x, 2 * n) == 0; /* x is the same everywhere */
    report(ok, "bf16 allgather moves 2-byte elements");
    free(x), free(y), free(g);
}

static void test_bf16_ops(void)
{
    uint16_t a[6] = {0x3F80, 0x3F80, 0x3F81, 0x7FC0, 0x7F80, 0xBF80};
    uint16_t b[6] = {0x3C00, 0x3B80, 0x3B80, 0x3F80, 0xFF80, 0x3F80};
    /* 1 + 2^-7 = 0x3F81 exact; 1 + 2^-8 ties to even 0x3F80; 1.0078125 + 2^-8
     * ties to even 0x3F82; NaN + 1 = NaN; inf + -inf = NaN; -1 + 1 = 0 */
    int len = 6;
    MPI_Datatype t = MPI_UINT16_T;
    pt_comm_bf16_sum(a, b, &len, &t);
    int ok = b[0] == 0x3F81 && b[1] == 0x3F80 && b[2] == 0x3F82 && (b[3] & 0x7F80) == 0x7F80 && (b[3] & 0x7F) &&
             (b[4] & 0x7F80) == 0x7F80 && (b[4] & 0x7F) && b[5] == 0x0000;
    report(ok, "bf16 sum: exact, ties to even, NaN stays NaN, inf - inf is NaN (%04x %04x %04x %04x %04x %04x)", b[0],
           b[1], b[2], b[3], b[4], b[5]);
    uint16_t c[3] = {0x3F80, 0x7FC0, 0xC000}, e[3] = {0x4000, 0x3F80, 0xBF80};
    len = 3;
    pt_comm_bf16_max(c, e, &len, &t);
    report(e[0] == 0x4000 && (e[1] & 0x7F80) == 0x7F80 && (e[1] & 0x7F) && e[2] == 0xBF80,
           "bf16 max: the larger, NaN propagates, -1 > -2");
    report(pt_comm_mpi_type(PT_COMM_F32) == MPI_FLOAT && pt_comm_mpi_type(PT_COMM_F64) == MPI_DOUBLE &&
               pt_comm_mpi_type(PT_COMM_BF16) == MPI_UINT16_T && pt_comm_mpi_type(9) == MPI_DATATYPE_NULL &&
               pt_comm_mpi_op(PT_COMM_F32, PT_COMM_SUM) == MPI_SUM && pt_comm_mpi_op(PT_COMM_BF16, PT_COMM_SUM) != MPI_SUM &&
               pt_comm_mpi_op(PT_COMM_BF16, PT_COMM_SUM) == pt_comm_mpi_op(PT_COMM_BF16, PT_COMM_SUM) &&
               pt_comm_mpi_op(PT_COMM_F32, 5) == MPI_OP_NULL && pt_comm_elem_size(PT_COMM_BF16) == 2 &&
               pt_comm_elem_size(7) == 0,
           "element types: MPI types, operations (bf16's created once), sizes");
}

static void test_choose(void)
{
    unsigned char u[4 * 16];
    for (int i = 0; i < 64; i++) u[i] = (unsigned char)(i * 37 + 11);
    char why[256];
    int ok = pt_comm_dev_choose(u, 4, 1, PT_COMM_DEV_AUTO, why, sizeof why) == PT_COMM_DEV_NCCL;
    ok &= pt_comm_dev_choose(u, 4, 0, PT_COMM_DEV_AUTO, why, sizeof why) == PT_COMM_DEV_STAGED;
    ok &= pt_comm_dev_choose(u, 4, 1, PT_COMM_DEV_STAGED, why, sizeof why) == PT_COMM_DEV_STAGED;
    ok &= pt_comm_dev_choose(u, 1, 1, PT_COMM_DEV_AUTO, why, sizeof why) == PT_COMM_DEV_STAGED;
    report(ok, "four GPUs of their own: NCCL (staged without NCCL, when asked, or for a group of one)");
    memcpy(u + 2 * 16, u, 16); /* ranks 0 and 2 share a GPU */
    ok = pt_comm_dev_choose(u, 4, 1, PT_COMM_DEV_AUTO, why, sizeof why) == PT_COMM_DEV_STAGED;
    ok &= pt_comm_dev_choose(u, 4, 1, PT_COMM_DEV_NCCL, why, sizeof why) == -1;
    report(ok && strstr(why, "ranks 0 and 2") && strstr(why, "share one GPU") && !strchr(why, '\n'),
           "ranks 0 and 2 on one GPU: staged; NCCL asked for is refused naming them: %s", why);
    ok = pt_comm_dev_choose(u, 4, 0, PT_COMM_DEV_NCCL, why, sizeof why) == -1 && strstr(why, "no NCCL");
    report(ok, "NCCL asked for without NCCL in the build: %s", why);
}

int main(int argc, char **argv)
{
    tap_init(&argc, &argv);
    g_seed = tap_seed();
    if (tap_rank0) printf("# seed %lu (PTRAIN_TEST_SEED=%lu reruns it)\n", g_seed, g_seed);
    pt_comm h, d;
    pt_comm_wrap(&h, MPI_COMM_WORLD, "world");
    pt_comm_wrap(&d, MPI_COMM_WORLD, "staged");
    report(strcmp(pt_comm_device_path(&d), "host") == 0, "a group starts on host buffers only");
    report(pt_comm_device_enable_host(&d) == PT_OK && strcmp(pt_comm_device_path(&d), "staged") == 0,
           "the test's staged path over host buffers");
    test_choose();
    test_bf16_ops();
    const int p = h.size;
    struct {
        size_t chunk_bytes, nb;
    } cases[] = {{0, 1}, {0, 3001}, {4 * 997, 1251}, {4, 5}, {8 * p, 1027}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run(&h, &d, cases[i].chunk_bytes, cases[i].nb, (int)i * 10);
    d.chunk_bytes = 0;
    run_group(&d, 2053, 100);
    test_bf16(&d, 0, 200);
    test_bf16(&d, 2 * 61, 210);
    /* misuse: one line each */
    int rc = pt_comm_group_end(&d);
    report(rc == PT_EINVAL && strstr(pt_errmsg(), "without pt_comm_group_start"), "group end without start: %s",
           pt_errmsg());
    pt_comm_group_start(&d);
    rc = pt_comm_group_start(&d);
    report(rc == PT_EINVAL && strstr(pt_errmsg(), "do not nest"), "nested group: %s", pt_errmsg());
    pt_comm_group_end(&d);
    float one = 1;
    rc = pt_comm_dev_allreduce(&d, &one, 1, 7, PT_COMM_SUM);
    report(rc == PT_EINVAL && strstr(pt_errmsg(), "element type 7"), "a bad element type: %s", pt_errmsg());
    if (p > 1) {
        float three[3] = {1, 2, 3}, out[3];
        rc = pt_comm_dev_reduce_scatter(&d, three, out, (size_t)p + 1, PT_COMM_F32);
        report(rc == PT_EINVAL && strstr(pt_errmsg(), "multiple of the group size"), "staged reduce_scatter of size+1: %s",
               pt_errmsg());
    }
    pt_comm_free(&d);
    report(d.dev == NULL && strcmp(pt_comm_device_path(&d), "host") == 0, "pt_comm_free releases the device path");
    pt_comm_free(&h);
    MPI_Finalize();
    return tap_failures ? 1 : 0;
}
