/* SPDX-License-Identifier: MIT */
/* Token shards and the batch loader: round trip of fresh random ids, the
 * on-disk header against the documented layout, loader offsets against an
 * independent computation, dp ranks concatenating to the dp = 1 batch, and
 * every kind of corrupted file refused with PT_EFORMAT and a message; a
 * shard truncated while mapped ends the reader with one line naming it. */
#define _GNU_SOURCE /* strsignal */
#include "core/core.h"
#include "data/shard.h"
#include "tests/tap.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char dir[256];
static pt_rng rng;

/* independent FNV-1a 64 over the little-endian payload */
static uint64_t ref_fnv(const int32_t *ids, uint64_t n)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (uint64_t i = 0; i < n; i++) {
        unsigned char b[2] = { (unsigned char)(ids[i] & 0xff), (unsigned char)((ids[i] >> 8) & 0xff) };
        for (int k = 0; k < 2; k++) {
            h ^= b[k];
            h *= 0x100000001b3ULL;
        }
    }
    return h;
}

static int read_file(const char *path, unsigned char **buf, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    *buf = malloc((size_t)n + 1);
    *len = fread(*buf, 1, (size_t)n, f);
    fclose(f);
    return *len == (size_t)n ? 0 : -1;
}

static void write_file(const char *path, const unsigned char *buf, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f) return;
    fwrite(buf, 1, len, f);
    fclose(f);
}

static uint64_t le64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}
static uint32_t le32(const unsigned char *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static void set32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static void set64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

/* (a * b) mod m by doubling: independent of the loader's 128-bit product */
static uint64_t mulmod(uint64_t a, uint64_t b, uint64_t m)
{
    uint64_t r = 0;
    a %= m;
    while (b) {
        if (b & 1) r = (r >= m - a) ? r - (m - a) : r + a;
        b >>= 1;
        a = (a >= m - a) ? a - (m - a) : a + a;
    }
    return r;
}

static uint64_t ref_offset(uint64_t step, uint64_t B, uint64_t i, uint64_t T, uint64_t ntok)
{
    uint64_t m = ntok - T - 1;
    uint64_t seq = (mulmod(step, B, m) + i % m) % m;
    return mulmod(seq, T, m);
}

/* Open a corrupted copy and expect PT_EFORMAT with `needle` in the message. */
static void expect_refused(const char *what, const unsigned char *buf, size_t len, const char *needle)
{
    char path[300];
    snprintf(path, sizeof path, "%s/bad.bin", dir);
    write_file(path, buf, len);
    pt_shard s;
    memset(&s, 0xab, sizeof s);
    int rc = pt_shard_open(&s, path);
    const char *msg = pt_errmsg();
    tap_ok(rc == PT_EFORMAT && strstr(msg, needle) && !strchr(msg, '\n') && s.tokens == NULL && s.ntokens == 0,
           "%s refused with PT_EFORMAT (rc %d): %s", what, rc, msg);
    pt_shard_close(&s);
}

/* Run `fn(arg)` in a child whose standard error goes to file `err`; the
 * child's wait status (-1: fork failed) */
static int in_child(void (*fn)(const char *), const char *arg, const char *err)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        int fd = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) dup2(fd, 2);
        fn(arg);
        _exit(0);
    }
    int st = -1;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
    return st;
}

/* open the shard, truncate the file to its header (as an in-place rewrite
 * does first), read its last token */
static void read_truncated(const char *path)
{
    pt_shard s;
    if (pt_shard_open(&s, path)) _exit(10);
    if (truncate(path, 64)) _exit(11);
    volatile uint16_t last = s.tokens[s.ntokens - 1];
    (void)last;
    pt_shard_close(&s);
}

/* with a shard open (the handler installed), a SIGBUS elsewhere: another
 * mapped file truncated under the reader */
static void read_other_truncated(const char *path)
{
    pt_shard s;
    if (pt_shard_open(&s, path)) _exit(10);
    char other[320];
    snprintf(other, sizeof other, "%s.other", path);
    int fd = open(other, O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || ftruncate(fd, 1 << 16)) _exit(12);
    volatile unsigned char *m = mmap(NULL, 1 << 16, PROT_READ, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED || ftruncate(fd, 0)) _exit(13);
    unlink(other);
    volatile unsigned char c = m[(1 << 16) - 1];
    (void)c;
}

/* A shard truncated while mapped: one line naming it and a distinct exit
 * status instead of a silent SIGBUS; a SIGBUS outside every shard still
 * ends the process as before, without the message. */
static void test_changed_while_mapped(const char *path, const char *path2)
{
    char err[320], line[1024] = "";
    snprintf(err, sizeof err, "%s.err", path);
    int st = in_child(read_truncated, path, err);
    FILE *f = fopen(err, "r");
    int lines = 0;
    char buf[1024];
    while (f && fgets(buf, sizeof buf, f))
        if (lines++ == 0) snprintf(line, sizeof line, "%s", buf);
    if (f) fclose(f);
    char want[400];
    snprintf(want, sizeof want, "token shard %s changed or was truncated while mapped (bus error reading byte ", path);
    if (strchr(line, '\n')) *strchr(line, '\n') = '\0';
    tap_ok(WIFEXITED(st) && WEXITSTATUS(st) == PT_SHARD_CHANGED_EXIT && lines == 1 && strstr(line, want),
           "a shard truncated while mapped: exit status %d (want %d), %d line on stderr: %s",
           WIFEXITED(st) ? WEXITSTATUS(st) : -1, PT_SHARD_CHANGED_EXIT, lines,
           WIFSIGNALED(st) ? "(killed by a signal)" : line);
    if (!(WIFEXITED(st) && WEXITSTATUS(st) == PT_SHARD_CHANGED_EXIT) && WIFSIGNALED(st))
        tap_diag("the child was killed by signal %d (%s)", WTERMSIG(st), strsignal(WTERMSIG(st)));
    st = in_child(read_other_truncated, path2, err);
    f = fopen(err, "r");
    int named = 0, asan = 0;
    while (f && fgets(buf, sizeof buf, f)) {
        named |= strstr(buf, "token shard") != NULL;
        asan |= strstr(buf, "AddressSanitizer: BUS") != NULL;
    }
    if (f) fclose(f);
    /* the disposition from before: the default (killed by SIGBUS), or in
     * the sanitizer build ASan's handler (its report, exit status 1) */
#ifdef __SANITIZE_ADDRESS__
    int before = (WIFSIGNALED(st) && WTERMSIG(st) == SIGBUS) || (WIFEXITED(st) && WEXITSTATUS(st) == 1 && asan);
#else
    int before = WIFSIGNALED(st) && WTERMSIG(st) == SIGBUS;
#endif
    tap_ok(before && !named,
           "a SIGBUS outside every shard goes to the previous handler (%s %d%s), without the shard message",
           WIFSIGNALED(st) ? "signal" : "status", WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st),
           asan ? ", ASan's report" : "");
    unlink(err);
}

int main(void)
{
    uint64_t seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
    pt_rng_seed(&rng, seed, 7);
    tap_diag("seed %llu", (unsigned long long)seed);
    snprintf(dir, sizeof dir, "/tmp/ptrain-test-shard-XXXXXX");
    if (!mkdtemp(dir)) {
        tap_skip_all("cannot create a temporary directory");
        return 0;
    }

    /* ---- round trip of fresh random ids --------------------------------- */
    const uint32_t V = 50257, EOT = 50256;
    uint64_t n = 3000 + pt_rng_u64(&rng) % 5000;
    int32_t *ids = malloc(n * sizeof *ids);
    for (uint64_t i = 0; i < n; i++) ids[i] = (int32_t)(pt_rng_u64(&rng) % V);
    ids[n / 2] = (int32_t)(V - 1); /* the largest id survives 16 bits */
    char path[300];
    snprintf(path, sizeof path, "%s/train.bin", dir);
    int rc = pt_shard_write(path, ids, n, V, EOT);
    tap_ok(rc == PT_OK, "pt_shard_write %llu random ids: %s", (unsigned long long)n, rc ? pt_errmsg() : "ok");

    unsigned char *raw = NULL;
    size_t rawlen = 0;
    read_file(path, &raw, &rawlen);
    tap_ok(rawlen == 64 + 2 * n, "file is 64 + 2 * ntokens bytes (%zu)", rawlen);
    int hdr_ok = rawlen >= 64 && memcmp(raw, "PTRNTOK\0", 8) == 0 && le32(raw + 8) == 1 && le32(raw + 12) == 2 &&
                 le64(raw + 16) == n && le32(raw + 24) == V && le32(raw + 28) == EOT && le64(raw + 32) == ref_fnv(ids, n);
    for (int i = 40; i < 64 && hdr_ok; i++) hdr_ok = raw[i] == 0;
    tap_ok(hdr_ok, "header bytes follow the documented layout (magic, version, width, n, vocab, eot, FNV-1a 64, zeros)");
    int payload_ok = 1;
    for (uint64_t i = 0; i < n && payload_ok; i++)
        payload_ok = (raw[64 + 2 * i] | raw[64 + 2 * i + 1] << 8) == ids[i];
    tap_ok(payload_ok, "payload is the ids as little-endian uint16");

    pt_shard s;
    rc = pt_shard_open(&s, path);
    int same = rc == PT_OK && s.ntokens == n && s.vocab_size == V && s.eot_id == EOT && s.checksum == ref_fnv(ids, n);
    for (uint64_t i = 0; same && i < n; i++) same = s.tokens[i] == (uint16_t)ids[i];
    tap_ok(same, "pt_shard_open reads back the same %llu ids, vocab %u, eot %u", (unsigned long long)n, V, EOT);
    tap_ok(pt_fnv1a64(raw + 64, 2 * n) == ref_fnv(ids, n), "pt_fnv1a64 equals the reference FNV-1a 64");

    /* ---- loader ---------------------------------------------------------- */
    if (rc == PT_OK) {
        const int B = 8, T = 16;
        int32_t in[8 * 16], tg[8 * 16], in1[8 * 16], tg1[8 * 16];
        long steps[] = { 0, 1, 2, 7, 1000, 123456789L, (long)(pt_rng_u64(&rng) >> 2) };
        int good = 1, shift = 1;
        for (size_t k = 0; k < sizeof steps / sizeof *steps; k++) {
            rc = pt_loader_batch(&s, steps[k], B, T, 0, B, in, tg);
            if (rc) {
                good = 0;
                tap_diag("step %ld: %s", steps[k], pt_errmsg());
                continue;
            }
            for (int i = 0; i < B; i++) {
                uint64_t off = ref_offset((uint64_t)steps[k], B, (uint64_t)i, T, n);
                for (int t = 0; t < T; t++) {
                    if (in[i * T + t] != ids[off + t] || tg[i * T + t] != ids[off + t + 1]) good = 0;
                    if (t + 1 < T && tg[i * T + t] != in[i * T + t + 1]) shift = 0;
                }
            }
        }
        tap_ok(good, "loader offsets ((s*B+i)*T) mod (n-T-1) match an independent computation, incl. huge steps");
        tap_ok(shift, "targets are the inputs shifted by one token");

        /* dp ranks concatenate to the dp = 1 batch */
        int cat_ok = 1;
        long step = (long)(pt_rng_u64(&rng) % 100000);
        pt_loader_batch(&s, step, B, T, 0, B, in1, tg1);
        for (int dp = 1; dp <= B; dp *= 2) {
            int per = B / dp;
            for (int d = 0; d < dp; d++) {
                rc = pt_loader_batch(&s, step, B, T, d * per, per, in, tg);
                if (rc || memcmp(in, in1 + d * per * T, sizeof(int32_t) * (size_t)(per * T)) ||
                    memcmp(tg, tg1 + d * per * T, sizeof(int32_t) * (size_t)(per * T)))
                    cat_ok = 0;
            }
        }
        tap_ok(cat_ok, "dp = 1, 2, 4, 8 rank batches concatenate to the dp = 1 global batch (step %ld)", step);

        /* argument errors */
        int e1 = pt_loader_batch(&s, -1, B, T, 0, B, in, tg);
        int e2 = pt_loader_batch(&s, 0, B, T, 4, 5, in, tg);
        int e3 = pt_loader_batch(&s, 0, B, 0, 0, B, in, tg);
        int e4 = pt_loader_batch(&s, 0, B, T, 0, 0, in, tg);
        int e5 = pt_loader_batch(&s, 0, B, T, 0, B, NULL, tg);
        int e6 = pt_loader_batch(&s, 0, 1, (int)n - 1, 0, 1, in, tg); /* needs T+2 tokens */
        tap_ok(e1 == PT_EINVAL && e2 == PT_EINVAL && e3 == PT_EINVAL && e4 == PT_EINVAL && e5 == PT_EINVAL &&
                   e6 == PT_EINVAL,
               "loader refuses negative step, sequences outside the batch, T=0, nseq=0, NULL, T+2 > ntokens");
        pt_shard_close(&s);
    }

    /* ---- a shard with exactly T+2 tokens is the smallest usable one ------- */
    {
        int32_t small[6];
        for (int i = 0; i < 6; i++) small[i] = (int32_t)(pt_rng_u64(&rng) % 100);
        snprintf(path, sizeof path, "%s/small.bin", dir);
        pt_shard ss;
        int ok = pt_shard_write(path, small, 6, 100, 0) == PT_OK && pt_shard_open(&ss, path) == PT_OK;
        int32_t in[4], tg[4];
        /* T = 4: span = 6 - 5 = 1, every offset is 0 */
        ok = ok && pt_loader_batch(&ss, 3, 2, 4, 1, 1, in, tg) == PT_OK;
        for (int t = 0; ok && t < 4; t++) ok = in[t] == small[t] && tg[t] == small[t + 1];
        tap_ok(ok, "a shard of T+2 tokens serves offset 0");
        pt_shard_close(&ss);
    }

    /* ---- corrupted files --------------------------------------------------- */
    unsigned char *bad = malloc(rawlen + 1);
    memcpy(bad, raw, rawlen);
    bad[0] ^= 0x20;
    expect_refused("bad magic", bad, rawlen, "not a ptrain token shard");
    expect_refused("empty file", bad, 0, "not a ptrain token shard");
    expect_refused("JSON file", (const unsigned char *)"{\"a\": 1}\n", 9, "not a ptrain token shard");
    memcpy(bad, raw, rawlen);
    expect_refused("header cut to 40 bytes", bad, 40, "truncated");
    expect_refused("truncated by one byte", bad, rawlen - 1, "truncated");
    bad[rawlen] = (unsigned char)pt_rng_u64(&rng);
    expect_refused("one extra byte", bad, rawlen + 1, "over-long");
    size_t pos = 64 + (size_t)(pt_rng_u64(&rng) % (2 * n));
    bad[pos] ^= (unsigned char)(1u << (pt_rng_u64(&rng) % 8));
    expect_refused("one flipped payload bit", bad, rawlen, "checksum");
    memcpy(bad, raw, rawlen);
    set32(bad + 8, 2);
    expect_refused("version 2", bad, rawlen, "version 2");
    memcpy(bad, raw, rawlen);
    set32(bad + 12, 4);
    expect_refused("4 bytes per token", bad, rawlen, "bytes per token");
    memcpy(bad, raw, rawlen);
    set64(bad + 16, n + 1);
    expect_refused("ntokens larger than the payload", bad, rawlen, "truncated");
    memcpy(bad, raw, rawlen);
    set64(bad + 16, UINT64_MAX / 2);
    expect_refused("absurd ntokens", bad, rawlen, "truncated");
    {
        /* id >= vocab_size with a valid checksum */
        memcpy(bad, raw, rawlen);
        uint32_t smallv = 1000;
        int32_t *ids2 = malloc(n * sizeof *ids2);
        for (uint64_t i = 0; i < n; i++) ids2[i] = (int32_t)(pt_rng_u64(&rng) % smallv);
        uint64_t at = pt_rng_u64(&rng) % n;
        ids2[at] = (int32_t)smallv;
        for (uint64_t i = 0; i < n; i++) {
            bad[64 + 2 * i] = (unsigned char)(ids2[i] & 0xff);
            bad[64 + 2 * i + 1] = (unsigned char)(ids2[i] >> 8);
        }
        set32(bad + 24, smallv);
        set32(bad + 28, 0);
        set64(bad + 32, ref_fnv(ids2, n));
        expect_refused("token id == vocab_size", bad, rawlen, ">= vocab_size");
        free(ids2);
    }

    /* ---- writer errors leave the old file intact, no temp files ---------- */
    {
        snprintf(path, sizeof path, "%s/train.bin", dir);
        int32_t one[3] = { 1, 2, (int32_t)V };
        int w1 = pt_shard_write(path, one, 3, V, EOT);
        tap_ok(w1 == PT_EINVAL && strstr(pt_errmsg(), "outside"), "writing id %u with vocab %u is refused: %s", V, V,
               pt_errmsg());
        int w2 = pt_shard_write(path, one, 2, 70000, 0);
        tap_ok(w2 == PT_EINVAL, "vocab 70000 does not fit 16 bits: %s", pt_errmsg());
        char nodir[320];
        snprintf(nodir, sizeof nodir, "%s/missing/x.bin", dir);
        int w3 = pt_shard_write(nodir, one, 2, V, EOT);
        tap_ok(w3 == PT_EIO && strstr(pt_errmsg(), "missing"), "writing into a missing directory: %s", pt_errmsg());
        pt_shard s2;
        int r = pt_shard_open(&s2, path);
        tap_ok(r == PT_OK && s2.ntokens == n, "the original shard is intact after the refused writes");
        pt_shard_close(&s2);
        snprintf(nodir, sizeof nodir, "%s/none.bin", dir);
        r = pt_shard_open(&s2, nodir);
        tap_ok(r == PT_EIO && strstr(pt_errmsg(), "none.bin"), "a missing shard gives PT_EIO naming it: %s", pt_errmsg());
        /* an empty shard round-trips, and the loader refuses it */
        snprintf(nodir, sizeof nodir, "%s/empty.bin", dir);
        r = pt_shard_write(nodir, NULL, 0, V, EOT);
        int r2 = r ? r : pt_shard_open(&s2, nodir);
        int32_t x[4], y[4];
        tap_ok(r == PT_OK && r2 == PT_OK && s2.ntokens == 0 && pt_loader_batch(&s2, 0, 1, 1, 0, 1, x, y) == PT_EINVAL,
               "an empty shard opens with 0 tokens and the loader refuses it");
        pt_shard_close(&s2);
        DIR *d = opendir(dir);
        int tmpfiles = 0;
        struct dirent *de;
        while (d && (de = readdir(d)))
            if (strstr(de->d_name, ".tmp.")) tmpfiles++;
        if (d) closedir(d);
        tap_ok(tmpfiles == 0, "no temporary files left behind (%d)", tmpfiles);
    }

    /* ---- a shard truncated while mapped ------------------------------- */
    {
        char path2[300];
        snprintf(path, sizeof path, "%s/mapped.bin", dir);
        snprintf(path2, sizeof path2, "%s/mapped2.bin", dir);
        uint64_t m = 20000 + pt_rng_u64(&rng) % 20000; /* several pages */
        int32_t *mids = malloc(m * sizeof *mids);
        for (uint64_t i = 0; i < m; i++) mids[i] = (int32_t)(pt_rng_u64(&rng) % V);
        if (pt_shard_write(path, mids, m, V, EOT) || pt_shard_write(path2, mids, m, V, EOT))
            tap_diag("cannot write %s: %s", path, pt_errmsg());
        free(mids);
        test_changed_while_mapped(path, path2);
    }

    /* ---- 4-byte shards (version 2): random ids up to 2^17 ---------------- */
    {
        const uint32_t V4 = (1u << 17) + 1 + (uint32_t)(pt_rng_u64(&rng) % 1000), E4 = 128001;
        uint64_t m = 3000 + pt_rng_u64(&rng) % 5000;
        int32_t *w = malloc(m * sizeof *w);
        for (uint64_t i = 0; i < m; i++) w[i] = (int32_t)(pt_rng_u64(&rng) % V4);
        w[m / 3] = (int32_t)(V4 - 1); /* beyond 16 bits */
        w[m / 2] = 65535;
        w[m / 2 + 1] = 65536;
        tap_diag("4-byte round trip: vocab %u, %llu ids (seed above)", V4, (unsigned long long)m);
        snprintf(path, sizeof path, "%s/wide.bin", dir);
        int w1 = pt_shard_write(path, w, m, V4, E4);
        tap_ok(w1 == PT_EINVAL && !strchr(pt_errmsg(), '\n'), "pt_shard_write (2-byte only) still refuses vocab %u: %s",
               V4, pt_errmsg());
        rc = pt_shard_write_any(path, w, m, V4, E4);
        tap_ok(rc == PT_OK, "pt_shard_write_any %llu ids < %u: %s", (unsigned long long)m, V4, rc ? pt_errmsg() : "ok");
        unsigned char *b4 = NULL;
        size_t l4 = 0;
        int hdr_ok = read_file(path, &b4, &l4) == 0 && l4 == 64 + 4 * m && !memcmp(b4, "PTRNTOK", 8) && le32(b4 + 8) == 2 &&
                     le32(b4 + 12) == 4 && le64(b4 + 16) == m && le32(b4 + 24) == V4 && le32(b4 + 28) == E4;
        int pay_ok = hdr_ok;
        uint64_t h = 0xcbf29ce484222325ULL;
        for (uint64_t i = 0; hdr_ok && i < m; i++) {
            pay_ok = pay_ok && le32(b4 + 64 + 4 * i) == (uint32_t)w[i];
            for (int k = 0; k < 4; k++) h = (h ^ b4[64 + 4 * i + (uint64_t)k]) * 0x100000001b3ULL;
        }
        tap_ok(hdr_ok && pay_ok && le64(b4 + 32) == h,
               "file: version 2, 4 bytes per token, 64 + 4 * n bytes, ids as little-endian uint32, FNV-1a 64 of them");
        pt_shard s4;
        rc = pt_shard_open(&s4, path);
        int same = rc == PT_OK && s4.token_bytes == 4 && s4.tokens == NULL && s4.tokens32 && s4.ntokens == m &&
                   s4.vocab_size == V4 && s4.eot_id == E4 && s4.checksum == h;
        for (uint64_t i = 0; same && i < m; i++) same = s4.tokens32[i] == (uint32_t)w[i];
        tap_ok(same, "pt_shard_open reads back the same %llu ids: %s", (unsigned long long)m, rc ? pt_errmsg() : "ok");
        uint32_t *r32 = malloc(m * sizeof *r32);
        uint16_t r16[4];
        int rr = rc ? -1 : pt_shard_read32(&s4, 0, m, r32);
        for (uint64_t i = 0; !rr && i < m; i++) rr = r32[i] != (uint32_t)w[i];
        tap_ok(!rr, "pt_shard_read32 of the whole stream");
        int r2 = rc ? 0 : pt_shard_read(&s4, 0, 4, r16);
        tap_ok(r2 == PT_EINVAL && !strchr(pt_errmsg(), '\n') && strstr(pt_errmsg(), "4-byte"),
               "pt_shard_read (uint16) refuses a 4-byte stream: %s", pt_errmsg());
        const int T = 16, B = 4;
        int32_t in[4 * 16], tg[4 * 16];
        int lb = rc ? -1 : pt_loader_batch(&s4, 12345, B, T, 0, B, in, tg);
        for (int i = 0; !lb && i < B; i++) {
            uint64_t o = ref_offset(12345, (uint64_t)B, (uint64_t)i, (uint64_t)T, m);
            for (int t = 0; !lb && t < T; t++) lb = in[i * T + t] != w[o + (uint64_t)t] || tg[i * T + t] != w[o + (uint64_t)t + 1];
        }
        tap_ok(!lb, "loader batches of the 4-byte shard are the ids at the documented offsets");
        free(r32);
        pt_shard_close(&s4);
        /* a version 1 file (the format of earlier ptrain) still opens as 2-byte */
        snprintf(path, sizeof path, "%s/train.bin", dir);
        pt_shard s2;
        rc = pt_shard_open(&s2, path);
        tap_ok(rc == PT_OK && s2.token_bytes == 2 && s2.tokens && !s2.tokens32,
               "a version 1 (2-byte) shard still opens, as 2-byte: %s", rc ? pt_errmsg() : "ok");
        pt_shard_close(&s2);
        /* bad 4-byte headers: one line each */
        if (hdr_ok) {
            unsigned char *c4 = malloc(l4);
            memcpy(c4, b4, l4);
            set32(c4 + 12, 2);
            expect_refused("version 2 with 2 bytes per token", c4, l4, "valid: 4");
            memcpy(c4, b4, l4);
            set32(c4 + 8, 3);
            expect_refused("version 3", c4, l4, "version 3 is not supported");
            memcpy(c4, b4, l4);
            set32(c4 + 24, 50257);
            set32(c4 + 28, 0);
            expect_refused("a 4-byte shard of vocab 50257", c4, l4, "65537..2147483647");
            memcpy(c4, b4, l4);
            set32(c4 + 28, V4);
            expect_refused("a 4-byte shard with eot_id == vocab_size", c4, l4, "eot_id");
            memcpy(c4, b4, l4);
            set32(c4 + 64 + 4 * 7, V4);
            set64(c4 + 32, pt_fnv1a64(c4 + 64, l4 - 64)); /* a valid checksum: the id check refuses it */
            expect_refused("a 4-byte id == vocab_size", c4, l4, ">= vocab_size");
            memcpy(c4, b4, l4);
            expect_refused("a 4-byte shard cut by 2 bytes", c4, l4 - 2, "truncated token shard");
            free(c4);
        }
        /* a sharded 4-byte set (pt_shard_writer, index.json) read as one stream across its files */
        char sd[300];
        snprintf(sd, sizeof sd, "%s/wideset", dir);
        mkdir(sd, 0755);
        pt_shard_writer *wr = NULL;
        const uint64_t S = 97, at = m - m / 10;
        int wrc = pt_shard_writer_open(&wr, sd, S, V4, E4);
        for (uint64_t i = 0; !wrc && i < m; i++) {
            uint32_t one = (uint32_t)w[i];
            wrc = pt_shard_writer_add32(wr, PT_SPLIT_TRAIN, &one, 1);
        }
        if (!wrc) wrc = pt_shard_writer_split(wr, at);
        char names[2][64];
        int nf[2] = { 0, 0 };
        if (!wrc) wrc = pt_shard_writer_commit(wr, names, nf);
        else pt_shard_writer_abort(wr);
        pt_shard tr, va;
        int orc = wrc ? -1 : pt_dataset_open(sd, 0, &tr, &va);
        int ok = !orc && tr.token_bytes == 4 && va.token_bytes == 4 && tr.ntokens == at && va.ntokens == m - at &&
                 tr.nfiles > 1 && tr.vocab_size == V4;
        uint32_t *all = malloc(m * sizeof *all);
        if (ok) ok = !pt_shard_read32(&tr, 0, at, all) && !pt_shard_read32(&va, 0, m - at, all + at);
        for (uint64_t i = 0; ok && i < m; i++) ok = all[i] == (uint32_t)w[i];
        int32_t in2[4 * 16], tg2[4 * 16];
        int lb2 = ok ? pt_loader_batch(&tr, 777, B, T, 0, B, in2, tg2) : -1;
        for (int i = 0; !lb2 && i < B; i++) {
            uint64_t o = ref_offset(777, (uint64_t)B, (uint64_t)i, (uint64_t)T, at);
            for (int t = 0; !lb2 && t < T; t++)
                lb2 = in2[i * T + t] != w[o + (uint64_t)t] || tg2[i * T + t] != w[o + (uint64_t)t + 1];
        }
        tap_ok(ok && !lb2, "a 4-byte set in shards of %llu (%d + %d files, split at %llu): the same ids and batches "
                           "across files: %s", (unsigned long long)S, nf[0], nf[1], (unsigned long long)at,
               wrc || orc ? pt_errmsg() : "ok");
        if (!orc) {
            pt_shard_close(&tr);
            pt_shard_close(&va);
        }
        free(all);
        char cmd[400];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", sd);
        if (system(cmd) != 0) tap_diag("cannot remove %s", sd);
        free(b4);
        free(w);
        snprintf(path, sizeof path, "%s/wide.bin", dir);
        unlink(path);
    }

    /* clean up */
    const char *names[] = { "train.bin", "bad.bin", "small.bin", "empty.bin", "mapped.bin", "mapped2.bin" };
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        unlink(path);
    }
    rmdir(dir);
    free(bad);
    free(raw);
    free(ids);
    return tap_done();
}
