/* lib/comm on device buffers (comm.h "Device buffers"), on 1-2 ranks of a
 * GPU machine: every collective, send/recv and a group on GPU memory,
 * through the path the group chose (NCCL when the ranks have GPUs of their
 * own, staging through host memory when they share one) and through the
 * forced staged path, against the same call on host buffers over MPI
 * (inputs are small integers: every sum is exact in any order, so the
 * results must be bitwise equal) with the counters equal to the byte.
 * Also bf16 sums, the overlap mode, and that NCCL asked for on a shared GPU
 * is refused in one line.
 *
 * Run by test_comm_gpu.sh, which skips (with the reason) when `--probe`
 * finds no device.  `--emulate` runs the same checks on the CPU with the
 * staged path over host buffers (pt_comm_device_enable_host): a check of
 * this program itself, for machines without a GPU. */
#define _POSIX_C_SOURCE 200809L
#include "config.h"

#include "comm/comm.h"
#include "comm/comm_dev.h"
#include "core/core.h"
#include "../mpi/mpi_tap.h"
#include "gpu_tap.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int emulate;
static unsigned long g_seed;

/* ---- buffers: device memory, or host memory when emulating ---------------------------- */

static void *dalloc(size_t bytes)
{
    void *p = emulate ? calloc(1, bytes ? bytes : 1) : pt_cuda_mem.alloc(bytes);
    if (!p) {
        fprintf(stderr, "test_comm_gpu: no %zu bytes of %s memory: %s\n", bytes, emulate ? "host" : "device",
                pt_errmsg());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    return p;
}
static void dfree(void *p)
{
    if (emulate) free(p);
    else pt_cuda_mem.free(p);
}
static void put(void *d, const void *h, size_t bytes)
{
    if (emulate) memcpy(d, h, bytes);
    else if (pt_cuda_to_device(d, h, bytes) != PT_OK) {
        fprintf(stderr, "test_comm_gpu: %s\n", pt_errmsg());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}
static void get(void *h, const void *d, size_t bytes)
{
    if (emulate) memcpy(h, d, bytes);
    else if (pt_cuda_to_host(h, d, bytes) != PT_OK) {
        fprintf(stderr, "test_comm_gpu: %s\n", pt_errmsg());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

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

static float *hvals(int t, int r, size_t n)
{
    float *x = malloc(4 * (n ? n : 1));
    for (size_t i = 0; i < n; i++) x[i] = (float)ival(t, r, i);
    return x;
}

/* the same values on the device */
static float *dvals(int t, int r, size_t n)
{
    float *h = hvals(t, r, n), *d = dalloc(4 * n);
    put(d, h, 4 * n);
    free(h);
    return d;
}

/* device buffer d [n floats] equals host buffer h */
static int dev_equals(const float *d, const float *h, size_t n)
{
    float *back = malloc(4 * (n ? n : 1));
    get(back, d, 4 * n);
    int ok = memcmp(back, h, 4 * n) == 0;
    free(back);
    return ok;
}

static int same_stats(const pt_comm *a, const pt_comm *b) { return memcmp(&a->stats, &b->stats, sizeof a->stats) == 0; }

/* every float call on d (device buffers) against h (host buffers) */
static void run(pt_comm *h, pt_comm *d, size_t nb, int t0)
{
    const int p = h->size, me = h->rank, root = p - 1, right = (me + 1) % p, left = (me + p - 1) % p;
    const size_t n = nb * (size_t)p;
    const char *path = pt_comm_device_path(d);
    pt_comm_reset_stats(h);
    pt_comm_reset_stats(d);
    float *a = hvals(t0, me, n), *da = dvals(t0, me, n);
    int rc = pt_allreduce_sum(h, a, n) | pt_allreduce_sum(d, da, n);
    report(!rc && dev_equals(da, a, n) && same_stats(h, d), "%s allreduce sum, n=%zu: equal to MPI on host buffers, "
           "counted alike", path, n);
    free(a), dfree(da);
    a = hvals(t0 + 1, me, n), da = dvals(t0 + 1, me, n);
    rc = pt_allreduce_max(h, a, n) | pt_allreduce_max(d, da, n);
    report(!rc && dev_equals(da, a, n) && same_stats(h, d), "%s allreduce max, n=%zu", path, n);
    free(a), dfree(da);
    double *f = malloc(8 * n), *df = dalloc(8 * n), *back = malloc(8 * n);
    for (size_t i = 0; i < n; i++) f[i] = ival(t0 + 2, me, i) * 0.5;
    put(df, f, 8 * n);
    rc = pt_allreduce_sum_f64(h, f, n) | pt_allreduce_sum_f64(d, df, n);
    get(back, df, 8 * n);
    report(!rc && memcmp(back, f, 8 * n) == 0 && same_stats(h, d), "%s allreduce f64, n=%zu", path, n);
    free(f), dfree(df), free(back);

    float *in = hvals(t0 + 3, me, n), *din = dvals(t0 + 3, me, n), *o = calloc(n + 1, 4), *dout = dalloc(4 * n);
    rc = pt_reduce_scatter_sum(h, in, o, n) | pt_reduce_scatter_sum(d, din, dout, n);
    report(!rc && dev_equals(dout, o, nb) && same_stats(h, d), "%s reduce_scatter, n=%zu", path, n);
    rc = pt_allgather(h, in, o, n) | pt_allgather(d, din, dout, n);
    report(!rc && dev_equals(dout, o, n) && same_stats(h, d), "%s allgather, n=%zu", path, n);
    free(in), dfree(din), free(o), dfree(dout);

    a = hvals(t0 + 5, me, n), da = dvals(t0 + 5, me, n);
    rc = pt_broadcast(h, a, n, root) | pt_broadcast(d, da, n, root);
    report(!rc && dev_equals(da, a, n) && same_stats(h, d), "%s broadcast from rank %d, n=%zu", path, root, n);
    free(a), dfree(da);
    a = hvals(t0 + 6, me, n), da = dvals(t0 + 6, me, n);
    rc = pt_reduce_sum(h, a, n, root) | pt_reduce_sum(d, da, n, root);
    report(!rc && dev_equals(da, a, n) && same_stats(h, d), "%s reduce to rank %d (the others unchanged), n=%zu", path,
           root, n);
    free(a), dfree(da);

    float *s = hvals(t0 + 7, me, n), *ds = dvals(t0 + 7, me, n), *r = calloc(n + 1, 4), *dr = dalloc(4 * n);
    rc = pt_sendrecv(h, s, right, r, left, n, 3) | pt_sendrecv(d, ds, right, dr, left, n, 3);
    report(!rc && dev_equals(dr, r, n) && same_stats(h, d), "%s sendrecv around the ring, n=%zu", path, n);
    if (p > 1) {
        /* a group: receives from both neighbours posted before the sends */
        float *dl = dalloc(4 * n), *drt = dalloc(4 * n);
        rc = pt_comm_group_start(d);
        if (!rc) rc = pt_recv(d, dl, n, left, 1);
        if (!rc) rc = pt_recv(d, drt, n, right, 2);
        if (!rc) rc = pt_send(d, ds, n, right, 1);
        if (!rc) rc = pt_send(d, ds, n, left, 2);
        if (!rc) rc = pt_comm_group_end(d);
        float *wl = hvals(t0 + 7, left, n), *wr = hvals(t0 + 7, right, n);
        report(!rc && dev_equals(dl, wl, n) && dev_equals(drt, wr, n), "%s group: receives before sends, both "
               "neighbours, n=%zu", path, n);
        free(wl), free(wr), dfree(dl), dfree(drt);
    }
    free(s), dfree(ds), free(r), dfree(dr);
}

static void run_bf16(pt_comm *d, size_t n, int t0)
{
    const int p = d->size, me = d->rank;
    uint16_t *h = malloc(2 * n), *want = malloc(2 * n);
    for (size_t i = 0; i < n; i++) {
        int s = 0;
        for (int r = 0; r < p; r++) s += ival(t0, r, i);
        h[i] = gpu_f32_to_bf16((float)ival(t0, me, i));
        want[i] = gpu_f32_to_bf16((float)s); /* exact: |s| <= 16 p */
    }
    void *dx = dalloc(2 * n);
    put(dx, h, 2 * n);
    int rc = pt_comm_dev_allreduce(d, dx, n, PT_COMM_BF16, PT_COMM_SUM);
    get(h, dx, 2 * n);
    report(!rc && memcmp(h, want, 2 * n) == 0, "%s bf16 allreduce sum, n=%zu: exact", pt_comm_device_path(d), n);
    free(h), free(want), dfree(dx);
}

/* overlap: the compute stream does not wait by itself; device_wait orders it */
static void run_overlap(pt_comm *h, pt_comm *d, size_t n, int t0)
{
    const int me = h->rank;
    float *a = hvals(t0, me, n), *da = dvals(t0, me, n);
    int rc = pt_comm_device_overlap(d, 1);
    if (!rc) rc = pt_allreduce_sum(d, da, n);
    if (!rc) rc = pt_comm_device_wait(d);
    if (!rc) rc = pt_comm_device_overlap(d, 0);
    rc |= pt_allreduce_sum(h, a, n);
    report(!rc && dev_equals(da, a, n), "%s allreduce with overlap on, then device_wait: the sums", pt_comm_device_path(d));
    free(a), dfree(da);
}

int main(int argc, char **argv)
{
    gpu_probe(argc, argv);
    emulate = argc > 1 && strcmp(argv[1], "--emulate") == 0;
    tap_init(&argc, &argv);
    g_seed = tap_seed();
    if (tap_rank0) printf("# seed %lu%s\n", g_seed, emulate ? " (emulated on the CPU: host buffers, staged)" : "");
    if (!emulate && pt_cuda_init() != PT_OK) {
        report(0, "pt_cuda_init: %s", pt_errmsg());
        MPI_Finalize();
        return 1;
    }
    pt_comm h, d, s;
    pt_comm_wrap(&h, MPI_COMM_WORLD, "host");
    pt_comm_wrap(&d, MPI_COMM_WORLD, "auto");
    pt_comm_wrap(&s, MPI_COMM_WORLD, "staged");
    int rc = emulate ? pt_comm_device_enable_host(&d) : pt_comm_device_enable(&d, PT_COMM_DEV_AUTO);
    report(rc == PT_OK, "device path of %d rank(s), auto: %s%s%s", h.size, pt_comm_device_path(&d), rc ? ": " : "",
           rc ? pt_errmsg() : "");
    rc = emulate ? pt_comm_device_enable_host(&s) : pt_comm_device_enable(&s, PT_COMM_DEV_STAGED);
    report(rc == PT_OK && strcmp(pt_comm_device_path(&s), "staged") == 0, "forced staged path: %s",
           rc ? pt_errmsg() : pt_comm_device_path(&s));
    if (!emulate) {
        /* NCCL asked for: fine with a GPU per rank, refused on a shared one */
        unsigned char mine[16], *all = malloc(16 * (size_t)h.size);
        pt_cuda_device_uuid(mine);
        MPI_Allgather(mine, 16, MPI_BYTE, all, 16, MPI_BYTE, MPI_COMM_WORLD);
        int shared = 0;
        for (int i = 0; i < h.size; i++)
            for (int j = i + 1; j < h.size; j++) shared |= memcmp(all + 16 * i, all + 16 * j, 16) == 0;
        free(all);
        pt_comm n;
        pt_comm_wrap(&n, MPI_COMM_WORLD, "nccl");
        rc = pt_comm_device_enable(&n, PT_COMM_DEV_NCCL);
#ifdef HAVE_NCCL
        if (shared)
            report(rc == PT_EUNSUPP && strstr(pt_errmsg(), "share one GPU"), "NCCL asked for on a shared GPU is "
                   "refused in one line: %s", pt_errmsg());
        else
            report(rc == PT_OK && strcmp(pt_comm_device_path(&n), "nccl") == 0, "NCCL asked for with a GPU per rank: %s",
                   rc ? pt_errmsg() : pt_comm_device_path(&n));
        if (!shared && h.size > 1)
            report(strcmp(pt_comm_device_path(&d), "nccl") == 0, "auto chose NCCL for GPUs of their own");
        if (shared) report(strcmp(pt_comm_device_path(&d), "staged") == 0, "auto chose staging for a shared GPU");
#else
        report(rc == PT_EUNSUPP && strstr(pt_errmsg(), "no NCCL"), "NCCL asked for without NCCL: %s", pt_errmsg());
#endif
        pt_comm_free(&n);
    }
    const size_t sizes[] = {1, 4099, (size_t)3 << 18}; /* per-rank blocks; the last crosses the 8 MiB chunk at 2 ranks */
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        run(&h, &d, sizes[i], 10 * (int)i);
        run(&h, &s, sizes[i], 10 * (int)i + 100);
    }
    d.chunk_bytes = s.chunk_bytes = h.chunk_bytes = 4 * 997; /* chunk edges inside the blocks */
    run(&h, &s, 3001, 300);
    run_bf16(&d, 5003, 400);
    run_bf16(&s, 5003, 410);
    run_overlap(&h, &d, 70001, 500);
    pt_comm_free(&s);
    pt_comm_free(&d);
    pt_comm_free(&h);
    if (!emulate) {
        report(pt_cuda_mem_live() == 0, "every device block freed (%zu bytes live)", pt_cuda_mem_live());
        pt_cuda_shutdown();
    }
    MPI_Finalize();
    return tap_failures ? 1 : 0;
}
