/* SPDX-License-Identifier: MIT */
/* lib/comm's transports (comm_priv.h) on the CPU, no GPU needed:
 *  - the choice: which transport a group's path gives each kind of buffer
 *    (pt_comm_transport_for), and a group's pick per buffer;
 *  - the member-list cache that lets groups of the same members share one
 *    NCCL communicator (comm_dev.h's pt_comm_share_*): keying, references,
 *    destruction with the last group, and the members' agreement over MPI,
 *    all with fake handles;
 *  - the mpi_staged chunk loop against mpi_host: random data (not small
 *    integers: the two must make the same MPI calls to get the same bits),
 *    fp32 / bf16 / fp64, counts around the chunk and odd ones, all eight
 *    calls, over a fake device memory whose mover checks that every copy
 *    stays inside a device buffer and the staging memory, and counts the
 *    bytes copied each way. */
#include "backend/ops.h"
#include "comm/comm.h"
#include "comm/comm_dev.h"
#include "core/core.h"
#include "mpi_tap.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static unsigned long g_seed;

static uint64_t mix(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* a random value in [-1, 1) for element i of rank r in test t */
static double rnd(int t, int r, size_t i)
{
    uint64_t z = mix(g_seed ^ ((uint64_t)t << 48) ^ ((uint64_t)r << 36) ^ (uint64_t)i);
    return (double)(z >> 11) / (double)(1ULL << 52) - 1.0;
}

/* ---- a fake device memory ---------------------------------------------------------------------- */

#define MAXBUF 64
static struct {
    char *p[MAXBUF];
    size_t n[MAXBUF];
} devmem;
static char *stage_p;
static size_t stage_n, stage_max;
static uint64_t to_host_bytes, to_dev_bytes;
static int bad_copies;

/* the device buffer holding [p, p + bytes), or -1 */
static int dev_find(const void *p, size_t bytes)
{
    const char *c = p;
    for (int i = 0; i < MAXBUF; i++)
        if (devmem.p[i] && c >= devmem.p[i] && c + bytes <= devmem.p[i] + devmem.n[i]) return i;
    return -1;
}
static int in_stage(const void *p, size_t bytes)
{
    const char *c = p;
    return stage_p && c >= stage_p && c + bytes <= stage_p + stage_n;
}
static void *dev_alloc(size_t bytes)
{
    for (int i = 0; i < MAXBUF; i++)
        if (!devmem.p[i]) {
            devmem.p[i] = malloc(bytes ? bytes : 1);
            devmem.n[i] = bytes;
            return devmem.p[i];
        }
    abort();
}
static void dev_free(void *p)
{
    for (int i = 0; i < MAXBUF; i++)
        if (devmem.p[i] == p) {
            free(p);
            devmem.p[i] = NULL;
            devmem.n[i] = 0;
        }
}
static int f_is_device(const void *p) { return p && dev_find(p, 1) >= 0; }
static int f_to_host(void *dst, const void *src, size_t bytes)
{
    if (dev_find(src, bytes) < 0 || !in_stage(dst, bytes)) bad_copies++;
    memcpy(dst, src, bytes);
    to_host_bytes += bytes;
    return PT_OK;
}
static int f_to_device(void *dst, const void *src, size_t bytes)
{
    if (dev_find(dst, bytes) < 0 || !in_stage(src, bytes)) bad_copies++;
    memcpy(dst, src, bytes);
    to_dev_bytes += bytes;
    return PT_OK;
}
static int f_copy(void *dst, const void *src, size_t bytes)
{
    if (dev_find(dst, bytes) < 0 || dev_find(src, bytes) < 0) bad_copies++;
    memmove(dst, src, bytes);
    return PT_OK;
}
static void *f_host_alloc(size_t bytes)
{
    if (stage_p) bad_copies++; /* one staging buffer per group at a time */
    stage_p = malloc(bytes ? bytes : 1);
    stage_n = bytes;
    if (bytes > stage_max) stage_max = bytes;
    return stage_p;
}
static void f_host_free(void *p)
{
    if (!p) return;
    if (p != stage_p) bad_copies++;
    free(p);
    stage_p = NULL;
    stage_n = 0;
}
static const pt_backend_dev fake = {.is_device_ptr = f_is_device, .to_host = f_to_host, .to_device = f_to_device,
                                    .copy = f_copy, .host_alloc = f_host_alloc, .host_free = f_host_free};

/* ---- the choice ------------------------------------------------------------------------------ */

static void test_choice(pt_comm *h, pt_comm *d)
{
    int ok = pt_comm_transport_for(0, 0) == PT_TP_MPI_HOST && pt_comm_transport_for(0, 1) == -1 &&
             pt_comm_transport_for(PT_COMM_DEV_STAGED, 0) == PT_TP_MPI_HOST &&
             pt_comm_transport_for(PT_COMM_DEV_NCCL, 0) == PT_TP_MPI_HOST &&
             pt_comm_transport_for(PT_COMM_DEV_STAGED, 1) == PT_TP_MPI_STAGED &&
             pt_comm_transport_for(PT_COMM_DEV_NCCL, 1) == PT_TP_NCCL && pt_comm_transport_for(7, 0) == -1 &&
             pt_comm_transport_for(7, 1) == -1;
    report(ok, "transport choice: host memory over mpi_host on every path, device memory over mpi_staged / nccl by "
               "the path, none without one");
    float x = 0, *dx = dev_alloc(4);
    report(strcmp(pt_comm_transport(h, &x)->name, "mpi_host") == 0 && strcmp(pt_comm_transport(h, dx)->name, "mpi_host") == 0,
           "a group without a device path sends every buffer over mpi_host");
    report(strcmp(pt_comm_transport(d, &x)->name, "mpi_host") == 0 &&
               strcmp(pt_comm_transport(d, dx)->name, "mpi_staged") == 0 && d->dev->tp[1] == &pt_transport_mpi_staged,
           "a staged group: host buffers over mpi_host, device buffers over mpi_staged (picked at enable)");
    dev_free(dx);
}

/* ---- the member-list cache -------------------------------------------------------------------- */

static int destroyed;
static void fake_destroy(void *h)
{
    destroyed++;
    free(h);
}

static void test_cache_pure(void)
{
    pt_comm_share s = {NULL, fake_destroy};
    int a[4] = {0, 1, 2, 3}, rev[4] = {3, 2, 1, 0}, sub[3] = {0, 1, 2}, b[2] = {4, 6};
    void *ha = malloc(1), *hb = malloc(1), *ha2 = malloc(1);
    uint64_t t1 = pt_comm_share_tag(0, 1), t2 = pt_comm_share_tag(0, 2), t3 = pt_comm_share_tag(1, 1);
    report(t1 && t2 && t3 && t1 != t2 && t1 != t3 && t2 != t3 && pt_comm_share_tag(0, 0) != 0,
           "tags: never 0, distinct by creator and sequence");
    destroyed = 0;
    int ok = pt_comm_share_find(&s, a, 4, 0) == NULL && pt_comm_share_size(&s) == 0;
    ok &= pt_comm_share_add(&s, a, 4, t1, ha) == PT_OK && pt_comm_share_add(&s, b, 2, t3, hb) == PT_OK;
    pt_comm_share_entry *e = pt_comm_share_find(&s, a, 4, 0);
    ok &= e && e->handle == ha && e->refs == 1 && pt_comm_share_find(&s, a, 4, t1) == e;
    ok &= pt_comm_share_find(&s, a, 4, t2) == NULL;
    ok &= pt_comm_share_find(&s, rev, 4, 0) == NULL && pt_comm_share_find(&s, sub, 3, 0) == NULL &&
          pt_comm_share_find(&s, a, 3, 0) == NULL;
    ok &= pt_comm_share_find(&s, b, 2, 0)->handle == hb && pt_comm_share_size(&s) == 2;
    report(ok, "cache: keyed by the member list (same ranks, same order: the reversed list, a prefix and a "
               "subset miss), and by tag when one is given");
    /* a second object of the same list: the newest is found */
    ok = pt_comm_share_add(&s, a, 4, t2, ha2) == PT_OK && pt_comm_share_find(&s, a, 4, 0)->handle == ha2 &&
         pt_comm_share_find(&s, a, 4, t1)->handle == ha;
    report(ok, "cache: two objects of one list are told apart by tag, the newest found first");
    /* references */
    pt_comm_share_find(&s, a, 4, t1)->refs++; /* a second group on ha */
    ok = pt_comm_share_release(&s, ha) == 1 && destroyed == 0 && pt_comm_share_find(&s, a, 4, t1) != NULL;
    ok &= pt_comm_share_release(&s, ha) == 0 && destroyed == 1 && pt_comm_share_find(&s, a, 4, t1) == NULL;
    ok &= pt_comm_share_release(&s, ha) == -1 && destroyed == 1;
    ok &= pt_comm_share_size(&s) == 2;
    report(ok, "cache: the object is destroyed with its last group, once; releasing it again is -1");
    ok = pt_comm_share_release(&s, ha2) == 0 && pt_comm_share_release(&s, hb) == 0 && destroyed == 3 &&
         pt_comm_share_size(&s) == 0 && s.head == NULL;
    ok &= pt_comm_share_add(&s, a, 0, t1, NULL) == PT_EINVAL && pt_comm_share_add(&s, a, 4, 0, NULL) == PT_EINVAL;
    report(ok, "cache: empty after the last release; no entry without members or a tag: %s", pt_errmsg());
}

/* over MPI: groups of the same members agree on one object; an order
 * change, or a member that dropped its copy, makes a new one everywhere */
static int agree_get(pt_comm_share *s, pt_comm *c, void **h, int *fresh)
{
    int *m = malloc(sizeof *m * (size_t)c->size);
    pt_comm_share_entry *hit = NULL;
    uint64_t tag = 0;
    int rc = pt_comm_world_ranks(c, m);
    if (!rc) rc = pt_comm_share_agree(s, c, m, &hit, &tag);
    *fresh = !hit;
    if (!rc && hit) *h = hit->handle;
    else if (!rc) {
        uint64_t *obj = malloc(sizeof *obj);
        *obj = tag; /* the object "is" its tag: the same on every member when agreed */
        rc = pt_comm_share_add(s, m, c->size, tag, obj);
        *h = obj;
    }
    free(m);
    return rc;
}

/* every member holds the same object: its tag is equal everywhere */
static int same_object(const pt_comm *c, void *h)
{
    uint64_t v[2] = {*(uint64_t *)h, ~*(uint64_t *)h}, r[2];
    MPI_Allreduce(v, r, 2, MPI_UINT64_T, MPI_MAX, c->comm);
    return r[0] == v[0] && ~r[1] == v[0];
}

static void test_cache_mpi(pt_comm *world)
{
    pt_comm_share s = {NULL, fake_destroy};
    const int p = world->size, me = world->rank;
    pt_comm a, b, r;
    pt_comm_split(&a, world, 0, me, "a");
    pt_comm_split(&b, world, 0, me, "b");       /* the same members in the same order */
    pt_comm_split(&r, world, 0, p - 1 - me, "r"); /* the same members, reversed */
    int ranks[64], ids[64];
    int ok = pt_comm_world_ranks(&r, ranks) == PT_OK && pt_comm_world_ranks(&a, ids) == PT_OK;
    for (int i = 0; i < p && ok; i++) ok &= ranks[i] == p - 1 - i && ids[i] == i;
    report(ok, "member list: world ranks in the group's rank order");
    void *ha, *hb, *hr;
    int fa, fb, fr;
    destroyed = 0;
    int rc = agree_get(&s, &a, &ha, &fa) | agree_get(&s, &b, &hb, &fb) | agree_get(&s, &r, &hr, &fr);
    report(!rc && fa && !fb && hb == ha && same_object(&a, ha),
           "groups of the same members share one object (the second group finds the first's, on every member)");
    report(!rc && (p == 1 ? !fr && hr == ha : fr && hr != ha && same_object(&r, hr)),
           "the same members in another order get their own object (one member: the same list)");
    report(pt_comm_share_size(&s) == (p == 1 ? 1u : 2u) && pt_comm_share_find(&s, ids, p, 0)->refs == (p == 1 ? 3 : 2),
           "references: one per group using the object");
    /* member 0 releases both groups of a's members (destroying its
     * object), the others keep theirs: the next group of those members
     * must not share (member 0 has nothing), so all make a new one */
    pt_comm c2, c3;
    pt_comm_split(&c2, world, 0, me, "c2");
    pt_comm_split(&c3, world, 0, me, "c3");
    if (p > 1 && me == 0) {
        pt_comm_share_release(&s, ha);
        pt_comm_share_release(&s, ha);
    }
    void *h2, *h3;
    int f2, f3;
    rc = agree_get(&s, &c2, &h2, &f2);
    int all_fresh = 0;
    MPI_Allreduce(&f2, &all_fresh, 1, MPI_INT, MPI_MIN, world->comm);
    report(!rc && (p == 1 ? !f2 : all_fresh && h2 != ha) && same_object(&c2, h2),
           "a member that freed its last group of those members: every member makes a new one (no member waits "
           "alone), with one tag");
    rc = agree_get(&s, &c3, &h3, &f3);
    report(!rc && !f3 && h3 == h2, "and the next group of those members shares that new one");
    /* release everything: every object destroyed once */
    while (s.head) pt_comm_share_release(&s, s.head->handle);
    report(pt_comm_share_size(&s) == 0 && destroyed == (p == 1 ? 1 : 3),
           "the cache empties as the groups release, each object destroyed once");
    pt_comm_free(&c3), pt_comm_free(&c2), pt_comm_free(&r), pt_comm_free(&b), pt_comm_free(&a);
}

/* ---- the staged chunk loop against mpi_host ---------------------------------------------------- */

static void fill(void *x, int elem, size_t n, int t, int r)
{
    for (size_t i = 0; i < n; i++) {
        double v = rnd(t, r, i);
        if (elem == PT_F32) ((float *)x)[i] = (float)v;
        else if (elem == PT_F64) ((double *)x)[i] = v;
        else ((uint16_t *)x)[i] = pt_f32_to_bf16((float)v);
    }
}

static int same_stats(const pt_comm *a, const pt_comm *b) { return memcmp(&a->stats, &b->stats, sizeof a->stats) == 0; }

static void copies_reset(void) { to_host_bytes = to_dev_bytes = 0; }

/* one case: elem, nb elements per rank's block (n = nb * p for every
 * call), chunk_bytes; every call on h (host buffers) and d (fake device
 * buffers, staged), the same inputs */
static int run_case(pt_comm *h, pt_comm *d, int elem, size_t nb, size_t chunk_bytes, int t0, char *why, size_t wl)
{
    const int p = h->size, me = h->rank;
    const size_t es = pt_comm_elem_size(elem), n = nb * (size_t)p, bytes = n * es;
    h->chunk_bytes = d->chunk_bytes = chunk_bytes;
    char *a = malloc(bytes + 1), *b = malloc(bytes + 1), *ref = malloc(bytes + 1);
    char *da = dev_alloc(bytes), *db = dev_alloc(bytes);
    int ok = 1, rc;
#define CHECK(cond, what)                                                      \
    do {                                                                       \
        if (ok && !(cond)) {                                                   \
            ok = 0;                                                            \
            snprintf(why, wl, "%s (rc %d: %s)", what, rc, rc ? pt_errmsg() : ""); \
        }                                                                      \
    } while (0)
#define RESET() (pt_comm_reset_stats(h), pt_comm_reset_stats(d), copies_reset())
    /* allreduce sum and max: n in, n out, in place */
    for (int op = 0; op < 2; op++) {
        RESET();
        fill(a, elem, n, t0 + op, me);
        memcpy(da, a, bytes);
        rc = pt_comm_run_allreduce(h, &pt_transport_mpi_host, a, n, elem, op) |
             pt_comm_run_allreduce(d, pt_comm_transport(d, da), da, n, elem, op);
        CHECK(!rc && memcmp(a, da, bytes) == 0 && same_stats(h, d), op ? "allreduce max" : "allreduce sum");
        CHECK(p == 1 || (to_host_bytes == bytes && to_dev_bytes == bytes), "allreduce: n copied each way");
    }
    /* reduce_scatter: n in, nb out */
    RESET();
    fill(a, elem, n, t0 + 2, me);
    memcpy(da, a, bytes);
    rc = pt_comm_run_reduce_scatter(h, &pt_transport_mpi_host, a, ref, n, elem) |
         pt_comm_run_reduce_scatter(d, pt_comm_transport(d, da), da, db, n, elem);
    CHECK(!rc && memcmp(ref, db, nb * es) == 0 && memcmp(a, da, bytes) == 0 && same_stats(h, d), "reduce_scatter");
    CHECK(p == 1 || (to_host_bytes == bytes && to_dev_bytes == nb * es), "reduce_scatter: n in, n/p back");
    /* allgather: nb in, n out */
    RESET();
    fill(a, elem, nb, t0 + 3, me);
    memcpy(da, a, nb * es);
    rc = pt_comm_run_allgather(h, &pt_transport_mpi_host, a, ref, n, elem) |
         pt_comm_run_allgather(d, pt_comm_transport(d, da), da, db, n, elem);
    CHECK(!rc && memcmp(ref, db, bytes) == 0 && same_stats(h, d), "allgather");
    CHECK(p == 1 || (to_host_bytes == nb * es && to_dev_bytes == bytes), "allgather: n/p in, n back");
    /* broadcast and reduce from / to the last rank */
    const int root = p - 1;
    RESET();
    fill(a, elem, n, t0 + 4, me);
    memcpy(da, a, bytes);
    rc = pt_comm_run_broadcast(h, &pt_transport_mpi_host, a, n, elem, root) |
         pt_comm_run_broadcast(d, pt_comm_transport(d, da), da, n, elem, root);
    CHECK(!rc && memcmp(a, da, bytes) == 0 && same_stats(h, d), "broadcast");
    CHECK(p == 1 || (me == root ? to_host_bytes == bytes && to_dev_bytes == 0 : to_host_bytes == 0 && to_dev_bytes == bytes),
          "broadcast: the root copies in, the others out");
    RESET();
    fill(a, elem, n, t0 + 5, me);
    memcpy(da, a, bytes);
    rc = pt_comm_run_reduce(h, &pt_transport_mpi_host, a, n, elem, root) |
         pt_comm_run_reduce(d, pt_comm_transport(d, da), da, n, elem, root);
    CHECK(!rc && memcmp(a, da, bytes) == 0 && same_stats(h, d), "reduce");
    CHECK(p == 1 || (to_host_bytes == bytes && to_dev_bytes == (me == root ? bytes : 0)), "reduce: only the root copies out");
    /* sendrecv around the ring */
    const int right = (me + 1) % p, left = (me + p - 1) % p;
    RESET();
    fill(a, elem, n, t0 + 6, me);
    memcpy(da, a, bytes);
    rc = pt_comm_run_sendrecv(h, &pt_transport_mpi_host, a, right, ref, left, n, elem, 3) |
         pt_comm_run_sendrecv(d, pt_comm_transport(d, da), da, right, db, left, n, elem, 3);
    CHECK(!rc && memcmp(ref, db, bytes) == 0 && same_stats(h, d), "sendrecv");
    CHECK(to_host_bytes == bytes && to_dev_bytes == bytes, "sendrecv: n each way");
    /* send / recv in pairs, even to odd */
    const int peer = me % 2 ? me - 1 : me + 1;
    if (peer < p) {
        RESET();
        rc = 0;
        if (me % 2 == 0) {
            fill(a, elem, n, t0 + 7, me);
            memcpy(da, a, bytes);
            rc = pt_comm_run_send(h, &pt_transport_mpi_host, a, n, elem, peer, 4) |
                 pt_comm_run_send(d, pt_comm_transport(d, da), da, n, elem, peer, 5);
            CHECK(!rc && same_stats(h, d) && to_host_bytes == bytes && to_dev_bytes == 0, "send");
        } else {
            memset(db, 0, bytes);
            rc = pt_comm_run_recv(h, &pt_transport_mpi_host, ref, n, elem, peer, 4) |
                 pt_comm_run_recv(d, pt_comm_transport(d, db), db, n, elem, peer, 5);
            CHECK(!rc && memcmp(ref, db, bytes) == 0 && same_stats(h, d) && to_host_bytes == 0 && to_dev_bytes == bytes,
                  "recv");
        }
    }
#undef CHECK
#undef RESET
    free(a), free(b), free(ref);
    dev_free(da), dev_free(db);
    return ok;
}

static void test_staged(pt_comm *h, pt_comm *d)
{
    const int p = h->size;
    static const int elems[3] = {PT_F32, PT_BF16, PT_F64};
    static const char *names[3] = {"fp32", "bf16", "fp64"};
    for (int e = 0; e < 3; e++) {
        const size_t es = pt_comm_elem_size(elems[e]);
        const size_t C = 97; /* chunk: 97 elements (reduce_scatter, allgather: 97 / p per block) */
        const size_t chunk_bytes = C * es;
        /* per-rank block sizes nb around the chunk and its share of one
         * block, odd ones; n = nb * p */
        const size_t cb = C / (size_t)p;
        size_t sizes[] = {1, 2, cb - 1 ? cb - 1 : 1, cb, cb + 1, C - 1, C, C + 1, 2 * C - 1, 2 * C + 1, 3 * C + 7};
        int all = 1;
        char why[PT_ERROR_LEN + 128] = "";
        size_t bad = 0;
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
            int ok = run_case(h, d, elems[e], sizes[i], chunk_bytes, 100 * e + 10 * (int)i, why, sizeof why);
            int allok = 0;
            MPI_Allreduce(&ok, &allok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
            if (!allok && all) bad = sizes[i];
            all &= allok;
        }
        report(all && bad_copies == 0,
               "%s, chunk %zu elements, %zu per-rank sizes from 1 to %zu: staged = mpi_host bit for bit for all eight "
               "calls, counted alike, every copy inside the buffers%s%s (first bad block size %zu, %d bad copies)",
               names[e], C, sizeof sizes / sizeof sizes[0], 3 * C + 7, all ? "" : ": ", why, bad, bad_copies);
    }
    /* staging memory: at most a chunk per block and one more (reduce_scatter's p blocks in and its own out) */
    const size_t most = (size_t)(p + 1) * 97 * 8;
    report(stage_max > 0 && stage_max <= most, "staging memory at most (p+1) chunks: %zu of %zu bytes", stage_max, most);
    /* the default chunk, one large case */
    char why[PT_ERROR_LEN + 128] = "";
    int ok = run_case(h, d, PT_F32, ((size_t)3 << 20) / (size_t)p + 3, 0, 900, why, sizeof why);
    report(ok && bad_copies == 0, "fp32, the default chunk, %zu elements: staged = mpi_host for all eight calls%s%s",
           (((size_t)3 << 20) / (size_t)p + 3) * (size_t)p, ok ? "" : ": ", why);
}

int main(int argc, char **argv)
{
    tap_init(&argc, &argv);
    g_seed = tap_seed();
    if (tap_rank0) printf("# seed %lu (PTRAIN_TEST_SEED=%lu reruns it)\n", g_seed, g_seed);
    pt_comm h, d;
    pt_comm_wrap(&h, MPI_COMM_WORLD, "world");
    pt_comm_wrap(&d, MPI_COMM_WORLD, "staged");
    report(pt_comm_device_enable_mover(&d, &fake) == PT_OK && strcmp(pt_comm_device_path(&d), "staged") == 0,
           "a staged path over a fake device memory");
    test_choice(&h, &d);
    test_cache_pure();
    test_cache_mpi(&h);
    test_staged(&h, &d);
    float one = 1;
    int rc = pt_comm_dev_allreduce(&h, &one, 1, PT_COMM_F32, PT_COMM_SUM);
    report(rc == PT_EINVAL && strstr(pt_errmsg(), "no device path"), "a device call on a group without one: %s",
           pt_errmsg());
    pt_comm_free(&d);
    report(d.dev == NULL && stage_p == NULL, "pt_comm_free releases the path and its staging memory");
    pt_comm_free(&h);
    MPI_Finalize();
    return tap_failures ? 1 : 0;
}
