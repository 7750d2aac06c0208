/* Token shards and the batch loader (format and semantics in shard.h). */
#define _GNU_SOURCE /* program_invocation_short_name */
#include "data/shard.h"
#include "core/file.h"
#include "core/core.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define FNV_BASIS 0xcbf29ce484222325ULL
#define FNV_PRIME 0x100000001b3ULL

static uint64_t fnv_update(uint64_t h, const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= FNV_PRIME;
    }
    return h;
}

uint64_t pt_fnv1a64(const void *data, size_t n) { return fnv_update(FNV_BASIS, data, n); }

static void put_u32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static void put_u64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static uint32_t get_u32(const unsigned char *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}
static uint64_t get_u64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

static int host_is_little_endian(void)
{
    const uint16_t one = 1;
    return *(const unsigned char *)&one == 1;
}

/* ---- SIGBUS on a mapped shard ------------------------------------------------
 * A shard is read through a MAP_PRIVATE mapping.  When the file is truncated
 * or rewritten in place while mapped (cp, `>`, a prepare writing into an
 * existing inode by hand), a read of a page past its new end raises SIGBUS,
 * which killed every rank without a word.  Every mapped shard is registered
 * here (address range and name), and a SIGBUS handler checks whether the
 * faulting address lies in one: if so it writes one line naming the shard
 * and _exits with PT_SHARD_CHANGED_EXIT; any other SIGBUS goes to the
 * handler that was there before (or the default action, which ends the
 * process with SIGBUS).  The handler uses only atomics, write(2),
 * sigaction, raise and _exit (async-signal-safe, POSIX.1-2008 2.4.3). */
#define GUARD_SLOTS 64
#define GUARD_NAME 256
enum { GUARD_FREE = 0, GUARD_BUSY = 1, GUARD_LIVE = 2 };
static struct guard {
    atomic_int state;
    atomic_uintptr_t start;
    atomic_size_t len;
    char name[GUARD_NAME]; /* NUL-terminated, truncated with "..." */
} guards[GUARD_SLOTS];
static struct sigaction guard_prev;
static pthread_once_t guard_once = PTHREAD_ONCE_INIT;

static size_t put_str(char *b, size_t at, size_t cap, const char *s)
{
    while (*s && at < cap) b[at++] = *s++;
    return at;
}

static size_t put_num(char *b, size_t at, size_t cap, unsigned long long v)
{
    char d[24];
    int n = 0;
    do d[n++] = (char)('0' + v % 10); while ((v /= 10) && n < 24);
    while (n && at < cap) b[at++] = d[--n];
    return at;
}

static void guard_handler(int sig, siginfo_t *si, void *uc)
{
    uintptr_t a = (uintptr_t)si->si_addr;
    for (int i = 0; si->si_code > 0 && i < GUARD_SLOTS; i++) {
        if (atomic_load(&guards[i].state) != GUARD_LIVE) continue;
        uintptr_t st = atomic_load(&guards[i].start);
        size_t len = atomic_load(&guards[i].len);
        if (a < st || a - st >= len) continue;
        char m[GUARD_NAME + 400];
        size_t k = 0, cap = sizeof m - 1;
        k = put_str(m, k, cap, program_invocation_short_name);
        k = put_str(m, k, cap, ": token shard ");
        k = put_str(m, k, cap, guards[i].name);
        k = put_str(m, k, cap, " changed or was truncated while mapped (bus error reading byte ");
        k = put_num(m, k, cap, (unsigned long long)(a - st));
        k = put_str(m, k, cap, " of the ");
        k = put_num(m, k, cap, (unsigned long long)len);
        k = put_str(m, k, cap, " it had when opened): replace a shard in use by writing a new file and renaming it "
                               "over the old one, as ptrain-data prepare does, never in place\n");
        m[k] = '\0';
        for (size_t off = 0; off < k;) {
            ssize_t w = write(STDERR_FILENO, m + off, k - off);
            if (w < 0 && errno == EINTR) continue;
            if (w <= 0) break;
            off += (size_t)w;
        }
        _exit(PT_SHARD_CHANGED_EXIT);
    }
    /* not a shard: what was there before */
    if (guard_prev.sa_flags & SA_SIGINFO) {
        guard_prev.sa_sigaction(sig, si, uc);
        return;
    }
    if (guard_prev.sa_handler != SIG_DFL && guard_prev.sa_handler != SIG_IGN) {
        guard_prev.sa_handler(sig);
        return;
    }
    /* the default action (a SIGBUS of a fault cannot be ignored): restored,
     * and the signal raised again; it is delivered when this returns */
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(sig, &dfl, NULL);
    raise(sig);
}

static void guard_install(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = guard_handler;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, &guard_prev);
}

/* Register a mapping; a full table leaves it unguarded (the default SIGBUS). */
static void guard_add(const void *start, size_t len, const char *path)
{
    pthread_once(&guard_once, guard_install);
    for (int i = 0; i < GUARD_SLOTS; i++) {
        int expect = GUARD_FREE;
        if (!atomic_compare_exchange_strong(&guards[i].state, &expect, GUARD_BUSY)) continue;
        size_t n = strlen(path);
        if (n < GUARD_NAME) {
            memcpy(guards[i].name, path, n + 1);
        } else { /* keep the end of a long path, where the file name is */
            memcpy(guards[i].name, "...", 3);
            memcpy(guards[i].name + 3, path + n - (GUARD_NAME - 4), GUARD_NAME - 3);
        }
        atomic_store(&guards[i].start, (uintptr_t)start);
        atomic_store(&guards[i].len, len);
        atomic_store(&guards[i].state, GUARD_LIVE);
        return;
    }
}

static void guard_remove(const void *start)
{
    for (int i = 0; i < GUARD_SLOTS; i++) {
        int expect = GUARD_LIVE;
        if (atomic_load(&guards[i].start) == (uintptr_t)start &&
            atomic_compare_exchange_strong(&guards[i].state, &expect, GUARD_BUSY)) {
            atomic_store(&guards[i].start, 0);
            atomic_store(&guards[i].len, 0);
            atomic_store(&guards[i].state, GUARD_FREE);
            return;
        }
    }
}

void pt_shard_close(pt_shard *s)
{
    if (!s) return;
    if (s->map_) {
        guard_remove(s->map_);
        munmap(s->map_, s->map_bytes_);
    }
    memset(s, 0, sizeof *s);
}

int pt_shard_open(pt_shard *s, const char *path)
{
    if (!s || !path) return pt_fail(PT_EINVAL, "pt_shard_open: NULL argument");
    memset(s, 0, sizeof *s);
    if (!host_is_little_endian())
        return pt_fail(PT_EUNSUPP, "%s: token shards are little-endian; this host is big-endian", path);
    int fd = pt_open_regular(path, "token shard"); /* FIFOs refused without blocking */
    if (fd < 0) return fd;
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return pt_fail(PT_EIO, "cannot stat %s: %s", path, strerror(e));
    }
    uint64_t size = (uint64_t)sb.st_size;
    unsigned char h[PT_SHARD_HEADER_BYTES];
    size_t want = size < sizeof h ? (size_t)size : sizeof h;
    ssize_t got = want ? pread(fd, h, want, 0) : 0;
    if (got < 0 || (size_t)got != want) {
        int e = got < 0 ? errno : EIO;
        close(fd);
        return pt_fail(PT_EIO, "cannot read the header of %s: %s", path, strerror(e));
    }
    if (size < 8 || memcmp(h, PT_SHARD_MAGIC, 8) != 0) {
        close(fd);
        return pt_fail(PT_EFORMAT, "%s is not a ptrain token shard (no \"PTRNTOK\" magic in its first 8 bytes)", path);
    }
    if (size < PT_SHARD_HEADER_BYTES) {
        close(fd);
        return pt_fail(PT_EFORMAT, "%s: truncated token shard: header needs %d bytes, file has %llu", path,
                       PT_SHARD_HEADER_BYTES, (unsigned long long)size);
    }
    uint32_t version = get_u32(h + 8), bpt = get_u32(h + 12);
    uint64_t ntok = get_u64(h + 16), checksum = get_u64(h + 32);
    uint32_t vocab = get_u32(h + 24), eot = get_u32(h + 28);
    uint64_t set_id = get_u64(h + 40);
    int rc = PT_OK;
    if (version != PT_SHARD_VERSION)
        rc = pt_fail(PT_EFORMAT, "%s: token shard version %u is not supported (this build reads version %d)", path,
                     version, PT_SHARD_VERSION);
    else if (bpt != 2)
        rc = pt_fail(PT_EFORMAT, "%s: %u bytes per token is not supported (valid: 2)", path, bpt);
    else if (vocab < 1 || vocab > 65536 || eot >= vocab)
        rc = pt_fail(PT_EFORMAT, "%s: bad header: vocab_size %u, eot_id %u (need eot_id < vocab_size <= 65536)", path,
                     vocab, eot);
    else {
        uint64_t expect = ntok > (UINT64_MAX - PT_SHARD_HEADER_BYTES) / 2 ? UINT64_MAX
                                                                          : PT_SHARD_HEADER_BYTES + 2 * ntok;
        if (expect == UINT64_MAX)
            rc = pt_fail(PT_EFORMAT, "%s: truncated token shard: header says %llu tokens, more than 2^64 bytes; file has %llu bytes",
                         path, (unsigned long long)ntok, (unsigned long long)size);
        else if (expect != size)
            rc = pt_fail(PT_EFORMAT, "%s: %s token shard: header says %llu tokens = %llu bytes, file has %llu bytes",
                         path, expect > size ? "truncated" : "over-long", (unsigned long long)ntok,
                         (unsigned long long)expect, (unsigned long long)size);
    }
    if (rc) {
        close(fd);
        return rc;
    }
    if ((uint64_t)(size_t)size != size) {
        close(fd);
        return pt_fail(PT_EUNSUPP, "%s: %llu bytes do not fit this address space", path, (unsigned long long)size);
    }
    void *map = mmap(NULL, (size_t)size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (map == MAP_FAILED) return pt_fail(PT_EIO, "cannot mmap %s (%llu bytes): %s", path, (unsigned long long)size, strerror(e));
    guard_add(map, (size_t)size, path); /* before the first read: the checksum pass can fault too */
    const unsigned char *payload = (const unsigned char *)map + PT_SHARD_HEADER_BYTES;
    const uint16_t *tok = (const uint16_t *)(const void *)payload;
    uint64_t sum = fnv_update(FNV_BASIS, payload, (size_t)(2 * ntok));
    if (sum != checksum) {
        guard_remove(map);
        munmap(map, (size_t)size);
        return pt_fail(PT_EFORMAT, "%s: checksum mismatch: header says %016llx, payload hashes to %016llx (corrupted file)",
                       path, (unsigned long long)checksum, (unsigned long long)sum);
    }
    for (uint64_t i = 0; i < ntok; i++)
        if (tok[i] >= vocab) {
            unsigned id = tok[i];
            guard_remove(map);
            munmap(map, (size_t)size);
            return pt_fail(PT_EFORMAT, "%s: token %llu has id %u >= vocab_size %u", path, (unsigned long long)i, id,
                           vocab);
        }
    s->tokens = tok;
    s->ntokens = ntok;
    s->vocab_size = vocab;
    s->eot_id = eot;
    s->checksum = checksum;
    s->set_id = set_id;
    s->map_ = map;
    s->map_bytes_ = (size_t)size;
    return PT_OK;
}

static int check_ids(const int32_t *ids, uint64_t n, uint32_t vocab_size, uint32_t eot_id)
{
    if (!ids && n) return pt_fail(PT_EINVAL, "pt_shard_write: NULL argument");
    if (vocab_size < 1 || vocab_size > 65536)
        return pt_fail(PT_EINVAL, "vocab_size %u does not fit a 2-byte token shard (valid: 1..65536)", vocab_size);
    if (eot_id >= vocab_size)
        return pt_fail(PT_EINVAL, "eot_id %u is not below vocab_size %u", eot_id, vocab_size);
    for (uint64_t i = 0; i < n; i++)
        if (ids[i] < 0 || (uint32_t)ids[i] >= vocab_size)
            return pt_fail(PT_EINVAL, "token %llu has id %ld, outside [0, %u)", (unsigned long long)i, (long)ids[i],
                           vocab_size);
    return PT_OK;
}

/* ids as little-endian uint16 bytes, in chunks of buf */
static size_t pack(const int32_t *ids, uint64_t n, uint64_t *i, unsigned char *buf, size_t cap)
{
    size_t k = 0;
    for (; *i < n && k + 2 <= cap; (*i)++, k += 2) {
        buf[k] = (unsigned char)(ids[*i] & 0xff);
        buf[k + 1] = (unsigned char)((ids[*i] >> 8) & 0xff);
    }
    return k;
}

static uint64_t payload_sum(const int32_t *ids, uint64_t n)
{
    unsigned char buf[1 << 14];
    uint64_t sum = FNV_BASIS;
    for (uint64_t i = 0; i < n;) sum = fnv_update(sum, buf, pack(ids, n, &i, buf, sizeof buf));
    return sum;
}

/* Write one shard (header with set_id) into an open atomic file. */
static int write_shard(pt_atomic_file *f, const int32_t *ids, uint64_t n, uint32_t vocab_size, uint32_t eot_id,
                       uint64_t set_id)
{
    unsigned char h[PT_SHARD_HEADER_BYTES] = { 0 };
    unsigned char buf[1 << 16];
    uint64_t sum = FNV_BASIS;
    if (pt_write_all(f->fd, h, sizeof h) != 0) goto ioerr;
    for (uint64_t i = 0; i < n;) {
        size_t k = pack(ids, n, &i, buf, sizeof buf);
        sum = fnv_update(sum, buf, k);
        if (pt_write_all(f->fd, buf, k) != 0) goto ioerr;
    }
    memcpy(h, PT_SHARD_MAGIC, 8); /* includes the NUL */
    put_u32(h + 8, PT_SHARD_VERSION);
    put_u32(h + 12, 2);
    put_u64(h + 16, n);
    put_u32(h + 24, vocab_size);
    put_u32(h + 28, eot_id);
    put_u64(h + 32, sum);
    put_u64(h + 40, set_id);
    if (pwrite(f->fd, h, sizeof h, 0) != (ssize_t)sizeof h) goto ioerr;
    return PT_OK;
ioerr:
    return pt_fail(PT_EIO, "cannot write token shard %s: %s", f->path, strerror(errno));
}

int pt_shard_write_set(int nshards, const char *const *paths, const int32_t *const *ids, const uint64_t *counts,
                       uint32_t vocab_size, uint32_t eot_id)
{
    if (nshards < 1 || nshards > 16 || !paths || !ids || !counts)
        return pt_fail(PT_EINVAL, "pt_shard_write_set: %d shards (valid: 1..16) or NULL argument", nshards);
    uint64_t set_id = FNV_BASIS;
    for (int k = 0; k < nshards; k++) {
        if (!paths[k]) return pt_fail(PT_EINVAL, "pt_shard_write_set: NULL path");
        int rc = check_ids(ids[k], counts[k], vocab_size, eot_id);
        if (rc) return rc;
        unsigned char b[16];
        put_u64(b, counts[k]);
        put_u64(b + 8, payload_sum(ids[k], counts[k]));
        set_id = fnv_update(set_id, b, sizeof b);
    }
    if (nshards == 1) set_id = 0;
    else if (set_id == 0) set_id = 1; /* 0 means "not part of a set" */
    pt_atomic_file f[16];
    int opened = 0, rc = PT_OK;
    for (; opened < nshards; opened++)
        if ((rc = pt_atomic_open(&f[opened], paths[opened]))) break;
    for (int k = 0; k < opened && !rc; k++)
        rc = write_shard(&f[k], ids[k], counts[k], vocab_size, eot_id, set_id);
    if (rc) {
        for (int k = 0; k < opened; k++) pt_atomic_abort(&f[k]);
        return rc;
    }
    return pt_atomic_commit(f, nshards);
}

int pt_shard_write(const char *path, const int32_t *ids, uint64_t n, uint32_t vocab_size, uint32_t eot_id)
{
    if (!path) return pt_fail(PT_EINVAL, "pt_shard_write: NULL argument");
    return pt_shard_write_set(1, &path, &ids, &n, vocab_size, eot_id);
}

int pt_shard_check_set(const pt_shard *const *shards, const char *const *paths, int n)
{
    for (int k = 1; k < n; k++)
        if (shards[k]->set_id != shards[0]->set_id)
            return pt_fail(PT_EFORMAT,
                           "%s and %s were not written together by one 'ptrain-data prepare' (set ids %016llx "
                           "and %016llx): a failed or interrupted prepare, or files from two corpora; run "
                           "prepare again",
                           paths[0], paths[k], (unsigned long long)shards[0]->set_id,
                           (unsigned long long)shards[k]->set_id);
    return PT_OK;
}

int pt_loader_batch(const pt_shard *s, long step, int B_global, int T, int first_seq, int nseq, int32_t *inputs,
                    int32_t *targets)
{
    if (!s || !inputs || !targets) return pt_fail(PT_EINVAL, "pt_loader_batch: NULL argument");
    if (step < 0) return pt_fail(PT_EINVAL, "loader: step %ld is negative", step);
    if (B_global < 1 || T < 1)
        return pt_fail(PT_EINVAL, "loader: global batch %d and sequence length %d must both be >= 1", B_global, T);
    if (first_seq < 0 || nseq < 1 || first_seq > B_global - nseq)
        return pt_fail(PT_EINVAL, "loader: sequences %d..%d are outside the global batch of %d", first_seq,
                       first_seq + nseq - 1, B_global);
    if (!s->tokens || s->ntokens < (uint64_t)T + 2)
        return pt_fail(PT_EINVAL, "loader: shard has %llu tokens, sequence length %d needs at least %d",
                       (unsigned long long)s->ntokens, T, T + 2);
    unsigned __int128 span = (unsigned __int128)(s->ntokens - (uint64_t)T - 1);
    for (int j = 0; j < nseq; j++) {
        unsigned __int128 seq = (unsigned __int128)(uint64_t)step * (uint64_t)B_global + (uint64_t)(first_seq + j);
        uint64_t off = (uint64_t)((seq * (uint64_t)T) % span);
        const uint16_t *src = s->tokens + off;
        int32_t *in = inputs + (size_t)j * (size_t)T, *tg = targets + (size_t)j * (size_t)T;
        for (int t = 0; t < T; t++) {
            in[t] = src[t];
            tg[t] = src[t + 1];
        }
    }
    return PT_OK;
}
