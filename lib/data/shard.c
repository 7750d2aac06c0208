/* SPDX-License-Identifier: MIT */
/* Token shards and the batch loader (format and semantics in shard.h). */
#define _GNU_SOURCE /* program_invocation_short_name */
#include "data/shard.h"
#include "core/file.h"
#include "core/core.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
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
#define GUARD_SLOTS 8192 /* two splits of PT_DATASET_MAX_FILES */
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
    if (s->nfiles > 1 && s->files) {
        pt_shard *f = (pt_shard *)s->files;
        for (int k = 0; k < s->nfiles; k++) pt_shard_close(&f[k]);
        free(f);
    }
    if (s->map_) {
        guard_remove(s->map_);
        munmap(s->map_, s->map_bytes_);
    }
    free(s->starts_);
    free((char *)s->path);
    memset(s, 0, sizeof *s);
}

const char *pt_token_format_name(int fmt)
{
    switch (fmt) {
    case 0: return "memory";
    case PT_TOKENS_PTRAIN: return "ptrain";
    case PT_TOKENS_LLMC: return "llmc";
    case PT_TOKENS_NANOGPT: return "nanogpt";
    default: return "?";
    }
}

void pt_token_format_parse(const char *spec, int *fmt, const char **rest)
{
    static const struct { const char *prefix; int fmt; } p[] = {
        { "ptrain:", PT_TOKENS_PTRAIN }, { "llmc:", PT_TOKENS_LLMC }, { "nanogpt:", PT_TOKENS_NANOGPT } };
    *fmt = PT_TOKENS_AUTO;
    *rest = spec;
    for (size_t i = 0; spec && i < sizeof p / sizeof p[0]; i++)
        if (!strncmp(spec, p[i].prefix, strlen(p[i].prefix))) {
            *fmt = p[i].fmt;
            *rest = spec + strlen(p[i].prefix);
        }
}

/* What a file of format fmt is called in messages. */
static const char *file_kind(int fmt)
{
    switch (fmt) {
    case PT_TOKENS_PTRAIN: return "token shard";
    case PT_TOKENS_LLMC: return "llm.c token file";
    case PT_TOKENS_NANOGPT: return "nanoGPT token file";
    default: return "token file";
    }
}

/* The one message of a file whose size does not match its header. */
static int size_mismatch(const char *path, int fmt, uint64_t ntok, uint64_t hdr, uint64_t size, uint32_t bpt)
{
    uint64_t expect = ntok > (UINT64_MAX - hdr) / bpt ? UINT64_MAX : hdr + bpt * ntok;
    if (expect == UINT64_MAX)
        return pt_fail(PT_EFORMAT, "%s: truncated %s: header says %llu tokens, more than 2^64 bytes; file has %llu bytes",
                       path, file_kind(fmt), (unsigned long long)ntok, (unsigned long long)size);
    if (expect != size)
        return pt_fail(PT_EFORMAT, "%s: %s %s: header says %llu tokens = %llu bytes, file has %llu bytes", path,
                       expect > size ? "truncated" : "over-long", file_kind(fmt), (unsigned long long)ntok,
                       (unsigned long long)expect, (unsigned long long)size);
    return PT_OK;
}

/* Open, check and map one token file (pt_tokens_open; format and checks in
 * shard.h). */
static int open_file(pt_shard *s, const char *path, int fmt, uint32_t vocab_arg)
{
    if (!s || !path) return pt_fail(PT_EINVAL, "pt_tokens_open: NULL argument");
    memset(s, 0, sizeof *s);
    if (fmt < PT_TOKENS_AUTO || fmt > PT_TOKENS_NANOGPT)
        return pt_fail(PT_EINVAL, "pt_tokens_open: format %d is not a pt_token_format", fmt);
    if (!host_is_little_endian())
        return pt_fail(PT_EUNSUPP, "%s: token files are little-endian; this host is big-endian", path);
    if (fmt == PT_TOKENS_NANOGPT && (vocab_arg < 1 || vocab_arg > 65536))
        return pt_fail(PT_EINVAL, "%s: a nanoGPT token file does not record its vocabulary: give one in 1..65536 "
                                  "(got %u), the largest id + 1 of the data", path, vocab_arg);
    int fd = pt_open_regular(path, file_kind(fmt)); /* FIFOs refused without blocking */
    if (fd < 0) return fd;
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return pt_fail(PT_EIO, "cannot stat %s: %s", path, strerror(e));
    }
    uint64_t size = (uint64_t)sb.st_size;
    unsigned char h[PT_LLMC_HEADER_BYTES];
    size_t want = size < sizeof h ? (size_t)size : sizeof h;
    ssize_t got = want ? pread(fd, h, want, 0) : 0;
    if (got < 0 || (size_t)got != want) {
        int e = got < 0 ? errno : EIO;
        close(fd);
        return pt_fail(PT_EIO, "cannot read the header of %s: %s", path, strerror(e));
    }
    if (fmt == PT_TOKENS_AUTO) {
        if (size >= 8 && !memcmp(h, PT_SHARD_MAGIC, 8)) fmt = PT_TOKENS_PTRAIN;
        else if (size >= 4 && get_u32(h) == PT_LLMC_TOKENS_MAGIC) fmt = PT_TOKENS_LLMC;
        else {
            close(fd);
            return pt_fail(PT_EFORMAT, "%s is not a ptrain token shard (magic \"PTRNTOK\") nor an llm.c token file "
                                       "(magic %d) by its first bytes; a headerless nanoGPT .bin is named nanogpt:PATH",
                           path, PT_LLMC_TOKENS_MAGIC);
        }
    }
    uint64_t ntok = 0, checksum = 0, set_id = 0, hdr = 0;
    uint32_t vocab = 0, eot = 0, width = 2;
    int rc = PT_OK;
    if (fmt == PT_TOKENS_PTRAIN) {
        hdr = PT_SHARD_HEADER_BYTES;
        if (size < 8 || memcmp(h, PT_SHARD_MAGIC, 8) != 0)
            rc = pt_fail(PT_EFORMAT, "%s is not a ptrain token shard (no \"PTRNTOK\" magic in its first 8 bytes)", path);
        else if (size < PT_SHARD_HEADER_BYTES)
            rc = pt_fail(PT_EFORMAT, "%s: truncated token shard: header needs %d bytes, file has %llu", path,
                         PT_SHARD_HEADER_BYTES, (unsigned long long)size);
        else {
            uint32_t version = get_u32(h + 8), bpt = get_u32(h + 12);
            ntok = get_u64(h + 16);
            checksum = get_u64(h + 32);
            vocab = get_u32(h + 24);
            eot = get_u32(h + 28);
            set_id = get_u64(h + 40);
            if (version != PT_SHARD_VERSION && version != PT_SHARD_VERSION_4)
                rc = pt_fail(PT_EFORMAT, "%s: token shard version %u is not supported (this build reads versions %d "
                                         "and %d)", path, version, PT_SHARD_VERSION, PT_SHARD_VERSION_4);
            else if (bpt != (version == PT_SHARD_VERSION ? 2u : 4u))
                rc = pt_fail(PT_EFORMAT, "%s: %u bytes per token is not supported by a version %u shard (valid: %d)",
                             path, bpt, version, version == PT_SHARD_VERSION ? 2 : 4);
            else if (bpt == 2 && (vocab < 1 || vocab > PT_SHARD_MAX_VOCAB_2 || eot >= vocab))
                rc = pt_fail(PT_EFORMAT, "%s: bad header: vocab_size %u, eot_id %u (need eot_id < vocab_size <= 65536)",
                             path, vocab, eot);
            else if (bpt == 4 && (vocab <= PT_SHARD_MAX_VOCAB_2 || vocab > PT_SHARD_MAX_VOCAB_4 || eot >= vocab))
                rc = pt_fail(PT_EFORMAT, "%s: bad header: vocab_size %u, eot_id %u (a 4-byte shard needs eot_id < "
                                         "vocab_size, vocab_size in 65537..2147483647)", path, vocab, eot);
            else
                rc = size_mismatch(path, fmt, ntok, hdr, size, (width = bpt));
        }
    } else if (fmt == PT_TOKENS_LLMC) {
        hdr = PT_LLMC_HEADER_BYTES;
        vocab = PT_LLMC_VOCAB;
        eot = PT_LLMC_VOCAB - 1;
        int32_t magic = (int32_t)get_u32(h), version = (int32_t)get_u32(h + 4), count = (int32_t)get_u32(h + 8);
        if (size < 4 || magic != PT_LLMC_TOKENS_MAGIC)
            rc = pt_fail(PT_EFORMAT, "%s is not an llm.c token file (its first int32 is not the magic %d)", path,
                         PT_LLMC_TOKENS_MAGIC);
        else if (size < PT_LLMC_HEADER_BYTES)
            rc = pt_fail(PT_EFORMAT, "%s: truncated llm.c token file: header needs %d bytes, file has %llu", path,
                         PT_LLMC_HEADER_BYTES, (unsigned long long)size);
        else if (version != PT_LLMC_TOKENS_VERSION)
            rc = pt_fail(PT_EFORMAT, "%s: llm.c token file version %d is not supported (this build reads version %d: "
                                     "uint16 GPT-2 ids%s)", path, (int)version, PT_LLMC_TOKENS_VERSION,
                         version == 2 ? "; version 2 holds uint32 Llama 3 ids" : "");
        else if (count < 0)
            rc = pt_fail(PT_EFORMAT, "%s: llm.c token file with a negative token count %d", path, (int)count);
        else {
            ntok = (uint64_t)count;
            rc = size_mismatch(path, fmt, ntok, hdr, size, 2);
        }
    } else { /* nanoGPT */
        vocab = vocab_arg;
        eot = vocab > 50256 ? 50256 : vocab - 1;
        if (size == 0) rc = pt_fail(PT_EFORMAT, "%s: empty nanoGPT token file (no tokens)", path);
        else if (size % 2)
            rc = pt_fail(PT_EFORMAT, "%s: %llu bytes, an odd number: not a nanoGPT token file of uint16 ids", path,
                         (unsigned long long)size);
        ntok = size / 2;
    }
    if (rc) {
        close(fd);
        return rc;
    }
    if ((uint64_t)(size_t)size != size) {
        close(fd);
        return pt_fail(PT_EUNSUPP, "%s: %llu bytes do not fit this address space", path, (unsigned long long)size);
    }
    char *name = strdup(path);
    if (!name) {
        close(fd);
        return pt_fail(PT_ENOMEM, "out of memory");
    }
    void *map = mmap(NULL, (size_t)size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (map == MAP_FAILED) {
        free(name);
        return pt_fail(PT_EIO, "cannot mmap %s (%llu bytes): %s", path, (unsigned long long)size, strerror(e));
    }
    guard_add(map, (size_t)size, path); /* before the first read: the checksum pass can fault too */
    const unsigned char *payload = (const unsigned char *)map + hdr;
    const uint16_t *tok = (const uint16_t *)(const void *)payload;
    const uint32_t *tok32 = (const uint32_t *)(const void *)payload;
    uint64_t sum = fnv_update(FNV_BASIS, payload, (size_t)(width * ntok));
    if (fmt == PT_TOKENS_PTRAIN && sum != checksum)
        rc = pt_fail(PT_EFORMAT, "%s: checksum mismatch: header says %016llx, payload hashes to %016llx (corrupted file)",
                     path, (unsigned long long)checksum, (unsigned long long)sum);
    for (uint64_t i = 0; !rc && width == 4 && i < ntok; i++)
        if (tok32[i] >= vocab)
            rc = pt_fail(PT_EFORMAT, "%s: token %llu has id %lu >= vocab_size %u", path, (unsigned long long)i,
                         (unsigned long)tok32[i], vocab);
    for (uint64_t i = 0; !rc && width == 2 && i < ntok; i++)
        if (tok[i] >= vocab)
            rc = pt_fail(PT_EFORMAT, "%s: token %llu has id %u >= vocab_size %u%s", path, (unsigned long long)i,
                         (unsigned)tok[i], vocab,
                         fmt == PT_TOKENS_LLMC ? " (llm.c version 1: GPT-2's vocabulary)" : "");
    if (rc) {
        guard_remove(map);
        munmap(map, (size_t)size);
        free(name);
        return rc;
    }
    if (width == 4) s->tokens32 = tok32;
    else s->tokens = tok;
    s->token_bytes = width;
    s->ntokens = ntok;
    s->vocab_size = vocab;
    s->eot_id = eot;
    s->checksum = sum;
    s->set_id = set_id;
    s->format = fmt;
    s->nfiles = 1;
    s->path = name;
    s->map_ = map;
    s->map_bytes_ = (size_t)size;
    return PT_OK;
}

int pt_shard_open(pt_shard *s, const char *path)
{
    if (!s || !path) return pt_fail(PT_EINVAL, "pt_shard_open: NULL argument");
    return open_file(s, path, PT_TOKENS_PTRAIN, 0);
}

int pt_tokens_open(pt_shard *s, const char *path, int fmt, uint32_t vocab)
{
    return open_file(s, path, fmt, vocab);
}

static int check_ids(const int32_t *ids, uint64_t n, uint32_t vocab_size, uint32_t eot_id, uint32_t max_vocab)
{
    if (!ids && n) return pt_fail(PT_EINVAL, "pt_shard_write: NULL argument");
    if (vocab_size < 1 || vocab_size > max_vocab)
        return pt_fail(PT_EINVAL, "vocab_size %u does not fit a %s token shard (valid: 1..%lu)", vocab_size,
                       max_vocab == PT_SHARD_MAX_VOCAB_2 ? "2-byte" : "2- or 4-byte", (unsigned long)max_vocab);
    if (eot_id >= vocab_size)
        return pt_fail(PT_EINVAL, "eot_id %u is not below vocab_size %u", eot_id, vocab_size);
    for (uint64_t i = 0; i < n; i++)
        if (ids[i] < 0 || (uint32_t)ids[i] >= vocab_size)
            return pt_fail(PT_EINVAL, "token %llu has id %ld, outside [0, %u)", (unsigned long long)i, (long)ids[i],
                           vocab_size);
    return PT_OK;
}

/* ids as little-endian uint16 (w 2) or uint32 (w 4) bytes, in chunks of buf */
static size_t pack(const int32_t *ids, uint64_t n, uint64_t *i, unsigned char *buf, size_t cap, uint32_t w)
{
    size_t k = 0;
    for (; *i < n && k + w <= cap; (*i)++, k += w)
        for (uint32_t b = 0; b < w; b++) buf[k + b] = (unsigned char)(((uint32_t)ids[*i] >> (8 * b)) & 0xff);
    return k;
}

static uint64_t payload_sum(const int32_t *ids, uint64_t n, uint32_t w)
{
    unsigned char buf[1 << 14];
    uint64_t sum = FNV_BASIS;
    for (uint64_t i = 0; i < n;) sum = fnv_update(sum, buf, pack(ids, n, &i, buf, sizeof buf, w));
    return sum;
}

/* Write one shard (header with set_id) into an open atomic file. */
static int write_shard(pt_atomic_file *f, const int32_t *ids, uint64_t n, uint32_t vocab_size, uint32_t eot_id,
                       uint64_t set_id)
{
    unsigned char h[PT_SHARD_HEADER_BYTES] = { 0 };
    unsigned char buf[1 << 16];
    uint64_t sum = FNV_BASIS;
    const uint32_t w = PT_SHARD_TOKEN_BYTES(vocab_size);
    if (pt_write_all(f->fd, h, sizeof h) != 0) goto ioerr;
    for (uint64_t i = 0; i < n;) {
        size_t k = pack(ids, n, &i, buf, sizeof buf, w);
        sum = fnv_update(sum, buf, k);
        if (pt_write_all(f->fd, buf, k) != 0) goto ioerr;
    }
    memcpy(h, PT_SHARD_MAGIC, 8); /* includes the NUL */
    put_u32(h + 8, w == 4 ? PT_SHARD_VERSION_4 : PT_SHARD_VERSION);
    put_u32(h + 12, w);
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

static int write_set(int nshards, const char *const *paths, const int32_t *const *ids, const uint64_t *counts,
                     uint32_t vocab_size, uint32_t eot_id, uint32_t max_vocab)
{
    if (nshards < 1 || nshards > 16 || !paths || !ids || !counts)
        return pt_fail(PT_EINVAL, "pt_shard_write_set: %d shards (valid: 1..16) or NULL argument", nshards);
    uint64_t set_id = FNV_BASIS;
    for (int k = 0; k < nshards; k++) {
        if (!paths[k]) return pt_fail(PT_EINVAL, "pt_shard_write_set: NULL path");
        int rc = check_ids(ids[k], counts[k], vocab_size, eot_id, max_vocab);
        if (rc) return rc;
        unsigned char b[16];
        put_u64(b, counts[k]);
        put_u64(b + 8, payload_sum(ids[k], counts[k], PT_SHARD_TOKEN_BYTES(vocab_size)));
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

int pt_shard_write_set(int nshards, const char *const *paths, const int32_t *const *ids, const uint64_t *counts,
                       uint32_t vocab_size, uint32_t eot_id)
{
    return write_set(nshards, paths, ids, counts, vocab_size, eot_id, PT_SHARD_MAX_VOCAB_2);
}

int pt_shard_write(const char *path, const int32_t *ids, uint64_t n, uint32_t vocab_size, uint32_t eot_id)
{
    if (!path) return pt_fail(PT_EINVAL, "pt_shard_write: NULL argument");
    return pt_shard_write_set(1, &path, &ids, &n, vocab_size, eot_id);
}

int pt_shard_write_any(const char *path, const int32_t *ids, uint64_t n, uint32_t vocab_size, uint32_t eot_id)
{
    if (!path) return pt_fail(PT_EINVAL, "pt_shard_write: NULL argument");
    return write_set(1, &path, &ids, &n, vocab_size, eot_id, PT_SHARD_MAX_VOCAB_4);
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

/* ---- a stream over several files ------------------------------------------ */

/* index of the file holding stream token off (nfiles > 1, off < ntokens) */
static int file_of(const pt_shard *s, uint64_t off)
{
    int lo = 0, hi = s->nfiles - 1;
    while (lo < hi) { /* the last file whose start is <= off */
        int mid = lo + (hi - lo + 1) / 2;
        if (s->starts_[mid] <= off) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

int pt_shard_read32(const pt_shard *s, uint64_t off, uint64_t n, uint32_t *dst)
{
    if (!s || (!dst && n)) return pt_fail(PT_EINVAL, "pt_shard_read32: NULL argument");
    if (off > s->ntokens || n > s->ntokens - off)
        return pt_fail(PT_EINVAL, "pt_shard_read32: tokens [%llu, +%llu) outside the stream's %llu",
                       (unsigned long long)off, (unsigned long long)n, (unsigned long long)s->ntokens);
    if (!n) return PT_OK;
    if (s->tokens32 || s->tokens) {
        for (uint64_t i = 0; i < n; i++) dst[i] = s->tokens32 ? s->tokens32[off + i] : s->tokens[off + i];
        return PT_OK;
    }
    if (s->nfiles < 2 || !s->files || !s->starts_) return pt_fail(PT_EINVAL, "pt_shard_read32: a stream without tokens");
    for (int k = file_of(s, off); n; k++) {
        const pt_shard *f = &s->files[k];
        uint64_t at = off - s->starts_[k], take = f->ntokens - at < n ? f->ntokens - at : n;
        for (uint64_t i = 0; i < take; i++) dst[i] = f->tokens32 ? f->tokens32[at + i] : f->tokens[at + i];
        dst += take;
        off += take;
        n -= take;
    }
    return PT_OK;
}

int pt_shard_read(const pt_shard *s, uint64_t off, uint64_t n, uint16_t *dst)
{
    if (!s || (!dst && n)) return pt_fail(PT_EINVAL, "pt_shard_read: NULL argument");
    if (s->token_bytes == 4)
        return pt_fail(PT_EINVAL, "pt_shard_read: %s holds 4-byte token ids (vocab_size %u); read it with "
                                  "pt_shard_read32", s->path ? s->path : "the stream", s->vocab_size);
    if (off > s->ntokens || n > s->ntokens - off)
        return pt_fail(PT_EINVAL, "pt_shard_read: tokens [%llu, +%llu) outside the stream's %llu",
                       (unsigned long long)off, (unsigned long long)n, (unsigned long long)s->ntokens);
    if (!n) return PT_OK;
    if (s->tokens) {
        memcpy(dst, s->tokens + off, (size_t)n * sizeof *dst);
        return PT_OK;
    }
    if (s->nfiles < 2 || !s->files || !s->starts_) return pt_fail(PT_EINVAL, "pt_shard_read: a stream without tokens");
    for (int k = file_of(s, off); n; k++) {
        const pt_shard *f = &s->files[k];
        uint64_t at = off - s->starts_[k], take = f->ntokens - at < n ? f->ntokens - at : n;
        if (take) memcpy(dst, f->tokens + at, (size_t)take * sizeof *dst);
        dst += take;
        off += take;
        n -= take;
    }
    return PT_OK;
}

/* Make *out the stream of files parts[0..n) (owned by it from here on,
 * also on error), named `name` in messages.  The files must agree on
 * vocabulary, end-of-text id and format. */
static int make_stream(pt_shard *out, pt_shard *parts, int n, const char *name)
{
    memset(out, 0, sizeof *out);
    int rc = PT_OK;
    for (int k = 1; k < n && !rc; k++)
        if (parts[k].vocab_size != parts[0].vocab_size || parts[k].eot_id != parts[0].eot_id)
            rc = pt_fail(PT_EFORMAT, "%s and %s have different vocabularies (vocab_size %u and %u, eot_id %u and %u): "
                                     "not one data set", parts[0].path, parts[k].path, parts[0].vocab_size,
                         parts[k].vocab_size, parts[0].eot_id, parts[k].eot_id);
    if (!rc && n == 1) {
        *out = parts[0];
        free(parts);
        return PT_OK;
    }
    uint64_t *starts = rc ? NULL : malloc(sizeof *starts * ((size_t)n + 1));
    char *nm = rc ? NULL : strdup(name);
    if (!rc && (!starts || !nm)) rc = pt_fail(PT_ENOMEM, "out of memory");
    if (rc) {
        for (int k = 0; k < n; k++) pt_shard_close(&parts[k]);
        free(parts);
        free(starts);
        free(nm);
        return rc;
    }
    uint64_t total = 0, sum = FNV_BASIS;
    for (int k = 0; k < n; k++) {
        starts[k] = total;
        total += parts[k].ntokens; /* each below 2^63 (a mapped file's bytes / 2), at most 8192 of them */
        unsigned char b[16];
        put_u64(b, parts[k].ntokens);
        put_u64(b + 8, parts[k].checksum);
        sum = fnv_update(sum, b, sizeof b);
    }
    starts[n] = total;
    out->token_bytes = parts[0].token_bytes;
    out->ntokens = total;
    out->vocab_size = parts[0].vocab_size;
    out->eot_id = parts[0].eot_id;
    out->checksum = sum;
    out->set_id = parts[0].set_id;
    out->format = parts[0].format;
    out->nfiles = n;
    out->files = parts;
    out->path = nm;
    out->starts_ = starts;
    return PT_OK;
}

/* ---- data sets ------------------------------------------------------------- */

#define PT_DATASET_MAX_FILES 4096 /* per split */
#define INDEX_NAME "index.json"
#define INDEX_FORMAT "ptrain-token-set"
#define INDEX_MAX_BYTES ((size_t)64 << 20)

static char *join(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s", dir, name);
    return p;
}

static int exists(const char *path)
{
    struct stat sb;
    return lstat(path, &sb) == 0;
}

/* a file name an index may list: a plain name in the directory */
static int safe_name(const char *n)
{
    size_t l = strlen(n);
    return l > 0 && l <= 255 && n[0] != '.' && !strchr(n, '/');
}

static int parse_hex64(const char *s, uint64_t *v)
{
    if (!s || strlen(s) != 16) return -1;
    uint64_t x = 0;
    for (int i = 0; i < 16; i++) {
        int c = s[i], d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0) return -1;
        x = x << 4 | (uint64_t)d;
    }
    *v = x;
    return 0;
}

/* One split of an index: its entries opened, checked and made a stream. */
static int open_index_split(pt_shard *out, const char *dir, const char *ipath, json_t *arr, const char *split,
                            uint64_t set_id, uint32_t vocab, uint32_t eot)
{
    size_t n = json_array_size(arr);
    if (!json_is_array(arr) || n < 1 || n > PT_DATASET_MAX_FILES)
        return pt_fail(PT_EFORMAT, "%s: \"%s\" is not a list of 1..%d shards", ipath, split, PT_DATASET_MAX_FILES);
    pt_shard *parts = calloc(n, sizeof *parts);
    if (!parts) return pt_fail(PT_ENOMEM, "out of memory");
    int rc = PT_OK;
    size_t k;
    for (k = 0; k < n && !rc; k++) {
        json_t *e = json_array_get(arr, k), *jt = json_object_get(e, "tokens");
        const char *file = json_string_value(json_object_get(e, "file"));
        uint64_t sum;
        if (!json_is_object(e) || !file || !safe_name(file) || !json_is_integer(jt) || json_integer_value(jt) < 0 ||
            parse_hex64(json_string_value(json_object_get(e, "fnv1a64")), &sum)) {
            rc = pt_fail(PT_EFORMAT, "%s: \"%s\" entry %zu is not {\"file\": NAME (in the directory, not starting with "
                                     "'.'), \"tokens\": N >= 0, \"fnv1a64\": 16 hex digits}", ipath, split, k);
            break;
        }
        char *p = join(dir, file);
        if (!p) {
            rc = pt_fail(PT_ENOMEM, "out of memory");
            break;
        }
        rc = pt_shard_open(&parts[k], p);
        if (!rc && (parts[k].set_id != set_id || parts[k].ntokens != (uint64_t)json_integer_value(jt) ||
                    parts[k].checksum != sum || parts[k].vocab_size != vocab || parts[k].eot_id != eot))
            rc = pt_fail(PT_EFORMAT, "%s does not match its entry in %s (set id %016llx, %llu tokens, checksum %016llx, "
                                     "vocab_size %u, eot_id %u; the index says %016llx, %lld, %016llx, %u, %u): a shard "
                                     "of another prepare; run ptrain-data prepare again", p,
                         ipath, (unsigned long long)parts[k].set_id, (unsigned long long)parts[k].ntokens,
                         (unsigned long long)parts[k].checksum, parts[k].vocab_size, parts[k].eot_id,
                         (unsigned long long)set_id, (long long)json_integer_value(jt), (unsigned long long)sum, vocab,
                         eot);
        free(p);
    }
    if (rc) {
        for (size_t i = 0; i < n; i++) pt_shard_close(&parts[i]);
        free(parts);
        return rc;
    }
    char name[64];
    snprintf(name, sizeof name, "%s (%s)", INDEX_NAME, split);
    char *nm = join(dir, name);
    if (!nm) {
        for (size_t i = 0; i < n; i++) pt_shard_close(&parts[i]);
        free(parts);
        return pt_fail(PT_ENOMEM, "out of memory");
    }
    rc = make_stream(out, parts, (int)n, nm);
    free(nm);
    return rc;
}

/* Parse DIR/index.json (at most 64 MiB; duplicate keys refused) and check
 * its format line and header fields. */
static int read_index(const char *ipath, json_t **root, uint64_t *set_id, uint32_t *vocab, uint32_t *eot)
{
    *root = NULL;
    int fd = pt_open_regular(ipath, "token set index");
    if (fd < 0) return fd;
    struct stat sb;
    if (fstat(fd, &sb) != 0 || (uint64_t)sb.st_size > INDEX_MAX_BYTES) {
        int e = errno;
        close(fd);
        return sb.st_size > 0 && (uint64_t)sb.st_size > INDEX_MAX_BYTES
                   ? pt_fail(PT_EFORMAT, "%s: %lld bytes, more than an index of 8192 shards needs (at most 64 MiB)",
                             ipath, (long long)sb.st_size)
                   : pt_fail(PT_EIO, "cannot stat %s: %s", ipath, strerror(e));
    }
    char *buf = NULL;
    size_t len = 0;
    int rc = pt_read_fd(fd, "token set index", ipath, &buf, &len);
    close(fd);
    if (rc) return rc;
    json_error_t je;
    json_t *r = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
    free(buf);
    if (!r) return pt_fail(PT_EFORMAT, "%s:%d: not valid JSON: %s", ipath, je.line, je.text);
    json_t *jv = json_object_get(r, "vocab_size"), *je_ = json_object_get(r, "eot_id");
    const char *fmt = json_string_value(json_object_get(r, "format"));
    if (!json_is_object(r) || !fmt || strcmp(fmt, INDEX_FORMAT) || json_integer_value(json_object_get(r, "version")) != 1 ||
        !json_is_integer(json_object_get(r, "version"))) {
        json_decref(r);
        return pt_fail(PT_EFORMAT, "%s: not a ptrain token set index (expected \"format\": \"%s\", \"version\": 1)",
                       ipath, INDEX_FORMAT);
    }
    if (parse_hex64(json_string_value(json_object_get(r, "set_id")), set_id) || !json_is_integer(jv) ||
        !json_is_integer(je_) || json_integer_value(jv) < 1 || json_integer_value(jv) > (json_int_t)PT_SHARD_MAX_VOCAB_4 ||
        json_integer_value(je_) < 0 || json_integer_value(je_) >= json_integer_value(jv)) {
        json_decref(r);
        return pt_fail(PT_EFORMAT, "%s: needs \"set_id\" (16 hex digits), \"vocab_size\" in 1..2147483647 and \"eot_id\" "
                                   "below it", ipath);
    }
    json_t *jb = json_object_get(r, "bytes_per_token");
    json_int_t want_b = PT_SHARD_TOKEN_BYTES((uint64_t)json_integer_value(jv));
    if (jb && (!json_is_integer(jb) || json_integer_value(jb) != want_b)) {
        const int isint = json_is_integer(jb);
        const long long got = (long long)json_integer_value(jb), v = (long long)json_integer_value(jv);
        json_decref(r); /* frees jb and jv */
        if (!isint)
            return pt_fail(PT_EFORMAT, "%s: \"bytes_per_token\" is not an integer (valid for vocab_size %lld: %lld)",
                           ipath, v, (long long)want_b);
        return pt_fail(PT_EFORMAT, "%s: \"bytes_per_token\" %lld does not match vocab_size %lld (valid: %lld)", ipath,
                       got, v, (long long)want_b);
    }
    *vocab = (uint32_t)json_integer_value(jv);
    *eot = (uint32_t)json_integer_value(je_);
    *root = r;
    return PT_OK;
}

static int open_index(const char *dir, pt_shard *train, pt_shard *val)
{
    char *ipath = join(dir, INDEX_NAME);
    if (!ipath) return pt_fail(PT_ENOMEM, "out of memory");
    json_t *r;
    uint64_t set_id = 0;
    uint32_t vocab = 0, eot = 0;
    int rc = read_index(ipath, &r, &set_id, &vocab, &eot);
    if (!rc) rc = open_index_split(train, dir, ipath, json_object_get(r, "train"), "train", set_id, vocab, eot);
    if (!rc) {
        rc = open_index_split(val, dir, ipath, json_object_get(r, "val"), "val", set_id, vocab, eot);
        if (rc) pt_shard_close(train);
    }
    json_decref(r);
    free(ipath);
    return rc;
}

/* DIR/train.bin and DIR/val.bin of format fmt (AUTO: each by its magic) */
static int open_pair(const char *dir, int fmt, uint32_t vocab, pt_shard *train, pt_shard *val)
{
    char *pt = join(dir, "train.bin"), *pv = join(dir, "val.bin");
    int rc = pt && pv ? PT_OK : pt_fail(PT_ENOMEM, "out of memory");
    if (!rc) rc = open_file(train, pt, fmt, vocab);
    if (!rc && (rc = open_file(val, pv, fmt, vocab))) pt_shard_close(train);
    if (!rc && train->format != val->format)
        rc = pt_fail(PT_EFORMAT, "%s is a %s file and %s a %s file: not one data set", pt,
                     pt_token_format_name(train->format), pv, pt_token_format_name(val->format));
    if (!rc && train->format == PT_TOKENS_PTRAIN) {
        const pt_shard *set[2] = { train, val };
        const char *names[2] = { pt, pv };
        rc = pt_shard_check_set(set, names, 2);
    }
    if (rc) {
        pt_shard_close(train);
        pt_shard_close(val);
    }
    free(pt);
    free(pv);
    return rc;
}

/* Where the split word ("train" or "val") of an llm.c shard name starts: the
 * name is PREFIX_WORD.bin or PREFIX_WORD_REST.bin; -1 when it is not. */
static long llmc_split_at(const char *name, const char *word)
{
    size_t n = strlen(name), w = strlen(word);
    if (name[0] == '.' || n < 4 || strcmp(name + n - 4, ".bin")) return -1;
    for (const char *p = name; (p = strstr(p, "_")); p++) {
        if (strncmp(p + 1, word, w)) continue;
        const char *after = p + 1 + w;
        if (*after == '_' || !strcmp(after, ".bin")) return (long)(p - name);
    }
    return -1;
}

static int cmp_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* llm.c shards PREFIX_train*.bin and PREFIX_val*.bin in dir: PT_OK, an
 * error, or 1 (no message) when dir holds no such name at all */
static int open_llmc_dir(const char *dir, pt_shard *train, pt_shard *val)
{
    DIR *d = opendir(dir);
    if (!d) return pt_fail(PT_EIO, "cannot read directory %s: %s", dir, strerror(errno));
    char **names[2] = { NULL, NULL }, *prefix = NULL;
    int n[2] = { 0, 0 }, cap[2] = { 0, 0 }, rc = PT_OK;
    static const char *const word[2] = { "train", "val" };
    struct dirent *e;
    while (!rc && (e = readdir(d))) {
        for (int k = 0; k < 2 && !rc; k++) {
            long at = llmc_split_at(e->d_name, word[k]);
            if (at < 0) continue;
            if (!prefix && !(prefix = strndup(e->d_name, (size_t)at))) rc = pt_fail(PT_ENOMEM, "out of memory");
            else if (strlen(prefix) != (size_t)at || strncmp(prefix, e->d_name, (size_t)at))
                rc = pt_fail(PT_EFORMAT, "%s holds llm.c shards of two data sets, '%s_...' and '%.*s_...': keep one "
                                         "per directory", dir, prefix, (int)at, e->d_name);
            else if (n[k] == PT_DATASET_MAX_FILES)
                rc = pt_fail(PT_EFORMAT, "%s: more than %d %s shards", dir, PT_DATASET_MAX_FILES, word[k]);
            else {
                if (n[k] == cap[k]) {
                    int nc = cap[k] ? 2 * cap[k] : 64;
                    char **v = realloc(names[k], sizeof *v * (size_t)nc);
                    if (!v) { rc = pt_fail(PT_ENOMEM, "out of memory"); break; }
                    names[k] = v;
                    cap[k] = nc;
                }
                if (!(names[k][n[k]] = strdup(e->d_name))) rc = pt_fail(PT_ENOMEM, "out of memory");
                else n[k]++;
            }
            break; /* a name is train or val, whichever word comes first in the list */
        }
    }
    closedir(d);
    if (!rc && n[0] + n[1] == 0) rc = 1; /* not this layout: the caller says what was looked for */
    else if (!rc && (!n[0] || !n[1]))
        rc = pt_fail(PT_EFORMAT, "%s holds llm.c shards %s_%s*.bin but no %s_%s*.bin: a data set needs both splits",
                     dir, prefix, word[n[0] ? 0 : 1], prefix, word[n[0] ? 1 : 0]);
    pt_shard *out[2] = { train, val };
    for (int k = 0; k < 2 && !rc; k++) {
        qsort(names[k], (size_t)n[k], sizeof *names[k], cmp_name);
        pt_shard *parts = calloc((size_t)n[k], sizeof *parts);
        if (!parts) { rc = pt_fail(PT_ENOMEM, "out of memory"); break; }
        for (int i = 0; i < n[k] && !rc; i++) {
            char *p = join(dir, names[k][i]);
            rc = p ? open_file(&parts[i], p, PT_TOKENS_LLMC, 0) : pt_fail(PT_ENOMEM, "out of memory");
            free(p);
        }
        if (rc) {
            for (int i = 0; i < n[k]; i++) pt_shard_close(&parts[i]);
            free(parts);
            break;
        }
        char label[600];
        snprintf(label, sizeof label, "%s/%s_%s*.bin", dir, prefix, word[k]);
        rc = make_stream(out[k], parts, n[k], label);
    }
    if (rc) pt_shard_close(train);
    for (int k = 0; k < 2; k++) {
        for (int i = 0; i < n[k]; i++) free(names[k][i]);
        free(names[k]);
    }
    free(prefix);
    return rc;
}

int pt_dataset_open(const char *spec, uint32_t vocab, pt_shard *train, pt_shard *val)
{
    if (!spec || !train || !val) return pt_fail(PT_EINVAL, "pt_dataset_open: NULL argument");
    memset(train, 0, sizeof *train);
    memset(val, 0, sizeof *val);
    int fmt;
    const char *dir;
    pt_token_format_parse(spec, &fmt, &dir);
    struct stat sb;
    if (stat(dir, &sb) != 0) return pt_fail(PT_EIO, "data set %s: %s", dir, strerror(errno));
    if (!S_ISDIR(sb.st_mode))
        return pt_fail(PT_EIO, "data set %s is not a directory (a data set is a directory holding its training and "
                               "validation files; ptrain-data info reads one file)", dir);
    if (fmt == PT_TOKENS_NANOGPT) return open_pair(dir, fmt, vocab, train, val);
    char *ip = join(dir, INDEX_NAME), *pt = join(dir, "train.bin"), *pv = join(dir, "val.bin");
    int rc = ip && pt && pv ? PT_OK : pt_fail(PT_ENOMEM, "out of memory");
    int have_index = !rc && exists(ip), have_pair = !rc && (exists(pt) || exists(pv));
    free(ip);
    free(pt);
    free(pv);
    if (rc) return rc;
    if (have_index && fmt != PT_TOKENS_LLMC) return open_index(dir, train, val);
    if (have_pair) return open_pair(dir, fmt, vocab, train, val);
    if (fmt != PT_TOKENS_PTRAIN && (rc = open_llmc_dir(dir, train, val)) <= 0) return rc;
    return pt_fail(PT_EFORMAT, "%s holds no data set: expected %s (ptrain-data prepare), train.bin and val.bin (ptrain "
                               "or llm.c token files)%s; a directory of nanoGPT's train.bin and val.bin is named "
                               "nanogpt:%s", dir, INDEX_NAME,
                   fmt == PT_TOKENS_PTRAIN ? "" : ", or llm.c shards PREFIX_train*.bin and PREFIX_val*.bin", dir);
}

/* ---- llm.c export ---------------------------------------------------------- */

int pt_llmc_write(int fd, const char *name, const pt_shard *s, uint64_t off, uint64_t n)
{
    if (!s || !name) return pt_fail(PT_EINVAL, "pt_llmc_write: NULL argument");
    if (off > s->ntokens || n > s->ntokens - off)
        return pt_fail(PT_EINVAL, "pt_llmc_write: tokens [%llu, +%llu) outside the stream's %llu",
                       (unsigned long long)off, (unsigned long long)n, (unsigned long long)s->ntokens);
    if (n > INT32_MAX)
        return pt_fail(PT_EINVAL, "%s: %llu tokens do not fit an llm.c token file (its count is an int32: at most %d)",
                       name, (unsigned long long)n, INT32_MAX);
    if (s->vocab_size > PT_LLMC_VOCAB)
        return pt_fail(PT_EINVAL, "%s: a vocabulary of %u ids does not fit an llm.c token file (version 1 holds GPT-2 "
                                  "ids, below %d)", name, s->vocab_size, PT_LLMC_VOCAB);
    unsigned char h[PT_LLMC_HEADER_BYTES] = { 0 };
    put_u32(h, PT_LLMC_TOKENS_MAGIC);
    put_u32(h + 4, PT_LLMC_TOKENS_VERSION);
    put_u32(h + 8, (uint32_t)n);
    if (pt_write_all(fd, h, sizeof h)) return pt_fail(PT_EIO, "cannot write %s: %s", name, strerror(errno));
    uint16_t buf[1 << 15];
    while (n) {
        uint64_t k = n < sizeof buf / sizeof buf[0] ? n : sizeof buf / sizeof buf[0];
        int rc = pt_shard_read(s, off, k, buf); /* little-endian host: the ids' bytes as they are */
        if (rc) return rc;
        if (pt_write_all(fd, buf, (size_t)k * sizeof buf[0])) return pt_fail(PT_EIO, "cannot write %s: %s", name, strerror(errno));
        off += k;
        n -= k;
    }
    return PT_OK;
}

/* ---- the streaming set writer ------------------------------------------- */

#include <sys/resource.h>

typedef struct wshard {
    pt_atomic_file f;
    uint64_t n, sum; /* tokens written, FNV-1a 64 of them */
} wshard;

typedef struct wsplit {
    wshard *v;
    int n, cap;
    uint64_t tokens;
    unsigned char buf[1 << 16]; /* bytes not yet written to v[n - 1] */
    size_t blen;
} wsplit;

struct pt_shard_writer {
    char *dir;
    uint64_t cap;
    uint32_t vocab, eot;
    uint32_t width; /* bytes per token: 2 or 4 */
    wsplit sp[2];
};

static const char *const split_name[2] = { "train", "val" };

static int wflush(pt_shard_writer *w, int k)
{
    wsplit *p = &w->sp[k];
    if (!p->blen) return PT_OK;
    wshard *c = &p->v[p->n - 1];
    if (pt_write_all(c->f.fd, p->buf, p->blen))
        return pt_fail(PT_EIO, "cannot write token shard %s: %s", c->f.path, strerror(errno));
    p->blen = 0;
    return PT_OK;
}

/* a new, empty shard at the end of split k (its 64-byte header zero until the commit) */
static int wnew(pt_shard_writer *w, int k)
{
    wsplit *p = &w->sp[k];
    int open_now = w->sp[0].n + w->sp[1].n;
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && (rlim_t)open_now + 32 >= rl.rlim_cur)
        return pt_fail(PT_EIO, "%s: %d shards are open, the most this process may hold (ulimit -n %llu) until the set "
                               "is complete: give a larger --shard-tokens", w->dir, open_now,
                       (unsigned long long)rl.rlim_cur);
    if (p->n == p->cap) {
        int nc = p->cap ? 2 * p->cap : 16;
        wshard *v = realloc(p->v, sizeof *v * (size_t)nc);
        if (!v) return pt_fail(PT_ENOMEM, "out of memory");
        p->v = v;
        p->cap = nc;
    }
    char name[48];
    if (w->cap == UINT64_MAX) snprintf(name, sizeof name, "%s.bin", split_name[k]); /* one shard per split */
    else snprintf(name, sizeof name, "%s_%06d.bin", split_name[k], p->n);
    char *path = join(w->dir, name);
    if (!path) return pt_fail(PT_ENOMEM, "out of memory");
    wshard *c = &p->v[p->n];
    memset(c, 0, sizeof *c);
    int rc = pt_atomic_open(&c->f, path);
    free(path);
    if (rc) return rc;
    c->sum = FNV_BASIS;
    unsigned char h[PT_SHARD_HEADER_BYTES] = { 0 };
    if (pt_write_all(c->f.fd, h, sizeof h)) {
        rc = pt_fail(PT_EIO, "cannot write token shard %s: %s", c->f.path, strerror(errno));
        pt_atomic_abort(&c->f);
        return rc;
    }
    p->n++;
    return PT_OK;
}

int pt_shard_writer_open(pt_shard_writer **out, const char *dir, uint64_t shard_tokens, uint32_t vocab_size,
                         uint32_t eot_id)
{
    if (!out || !dir) return pt_fail(PT_EINVAL, "pt_shard_writer_open: NULL argument");
    *out = NULL;
    if (vocab_size < 1 || vocab_size > PT_SHARD_MAX_VOCAB_4)
        return pt_fail(PT_EINVAL, "vocab_size %u does not fit a token shard (valid: 1..2147483647)", vocab_size);
    if (eot_id >= vocab_size) return pt_fail(PT_EINVAL, "eot_id %u is not below vocab_size %u", eot_id, vocab_size);
    static const char *const fixed[] = { "train.bin", "val.bin", INDEX_NAME };
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) {
        char *p = join(dir, fixed[i]);
        int rc = p ? pt_output_check(p) : pt_fail(PT_ENOMEM, "out of memory");
        free(p);
        if (rc) return rc;
    }
    pt_shard_writer *w = calloc(1, sizeof *w);
    if (!w || !(w->dir = strdup(dir))) {
        free(w);
        return pt_fail(PT_ENOMEM, "out of memory");
    }
    w->cap = shard_tokens ? shard_tokens : UINT64_MAX;
    w->vocab = vocab_size;
    w->eot = eot_id;
    w->width = PT_SHARD_TOKEN_BYTES(vocab_size);
    *out = w;
    return PT_OK;
}

/* one id (already checked) into split k */
static int wadd1(pt_shard_writer *w, int k, uint32_t id)
{
    wsplit *p = &w->sp[k];
    int rc;
    if (!p->n || p->v[p->n - 1].n == w->cap) {
        if ((rc = wflush(w, k)) || (rc = wnew(w, k))) return rc;
    }
    wshard *c = &p->v[p->n - 1];
    for (uint32_t j = 0; j < w->width; j++) {
        unsigned char b = (unsigned char)((id >> (8 * j)) & 0xff);
        c->sum = (c->sum ^ b) * FNV_PRIME;
        p->buf[p->blen++] = b;
    }
    c->n++;
    p->tokens++;
    if (p->blen == sizeof p->buf && (rc = wflush(w, k))) return rc; /* 2^16 is a multiple of 2 and 4 */
    return PT_OK;
}

int pt_shard_writer_add(pt_shard_writer *w, int k, const uint16_t *ids, size_t n)
{
    if (!w || (k != PT_SPLIT_TRAIN && k != PT_SPLIT_VAL) || (!ids && n))
        return pt_fail(PT_EINVAL, "pt_shard_writer_add: bad argument");
    wsplit *p = &w->sp[k];
    int rc;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] >= w->vocab)
            return pt_fail(PT_EINVAL, "%s token %llu has id %u, outside [0, %u)", split_name[k],
                           (unsigned long long)p->tokens, (unsigned)ids[i], w->vocab);
        if ((rc = wadd1(w, k, ids[i]))) return rc;
    }
    return PT_OK;
}

int pt_shard_writer_add32(pt_shard_writer *w, int k, const uint32_t *ids, size_t n)
{
    if (!w || (k != PT_SPLIT_TRAIN && k != PT_SPLIT_VAL) || (!ids && n))
        return pt_fail(PT_EINVAL, "pt_shard_writer_add32: bad argument");
    wsplit *p = &w->sp[k];
    int rc;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] >= w->vocab)
            return pt_fail(PT_EINVAL, "%s token %llu has id %lu, outside [0, %u)", split_name[k],
                           (unsigned long long)p->tokens, (unsigned long)ids[i], w->vocab);
        if ((rc = wadd1(w, k, ids[i]))) return rc;
    }
    return PT_OK;
}

uint64_t pt_shard_writer_tokens(const pt_shard_writer *w, int k)
{
    return w && (k == PT_SPLIT_TRAIN || k == PT_SPLIT_VAL) ? w->sp[k].tokens : 0;
}

/* pread exactly n bytes at off: 0, or -1 (errno; EIO at an early end) */
static int pread_all(int fd, void *buf, size_t n, off_t off)
{
    char *b = buf;
    while (n) {
        ssize_t r = pread(fd, b, n, off);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            if (r == 0) errno = EIO;
            return -1;
        }
        b += r;
        off += r;
        n -= (size_t)r;
    }
    return 0;
}

int pt_shard_writer_split(pt_shard_writer *w, uint64_t at)
{
    if (!w) return pt_fail(PT_EINVAL, "pt_shard_writer_split: NULL argument");
    wsplit *t = &w->sp[PT_SPLIT_TRAIN], *v = &w->sp[PT_SPLIT_VAL];
    if (v->n || v->tokens) return pt_fail(PT_EINVAL, "pt_shard_writer_split: the validation split is not empty");
    if (at > t->tokens)
        return pt_fail(PT_EINVAL, "pt_shard_writer_split: token %llu is beyond the %llu training tokens",
                       (unsigned long long)at, (unsigned long long)t->tokens);
    int rc = wflush(w, PT_SPLIT_TRAIN);
    if (rc || at == t->tokens) return rc;
    /* the shard k holding token `at`, cut at c */
    int k = 0;
    uint64_t start = 0;
    while (start + t->v[k].n <= at) start += t->v[k++].n;
    const uint64_t c = at - start;
    wshard *src = &t->v[k];
    unsigned char buf[1 << 16];
    if (c > 0) {
        /* its tail [c, n) into a new first validation shard */
        if ((rc = wnew(w, PT_SPLIT_VAL))) return rc;
        wshard *d = &v->v[0];
        for (uint64_t i = c; i < src->n;) {
            size_t m = src->n - i < sizeof buf / w->width ? (size_t)(src->n - i) : sizeof buf / w->width;
            if (pread_all(src->f.fd, buf, w->width * m, (off_t)(PT_SHARD_HEADER_BYTES + (uint64_t)w->width * i)))
                return pt_fail(PT_EIO, "cannot read back token shard %s: %s", src->f.path, strerror(errno));
            if (pt_write_all(d->f.fd, buf, w->width * m))
                return pt_fail(PT_EIO, "cannot write token shard %s: %s", d->f.path, strerror(errno));
            d->sum = fnv_update(d->sum, buf, w->width * m);
            d->n += m;
            i += m;
        }
        /* its head [0, c) stays: truncated, its checksum read again */
        if (ftruncate(src->f.fd, (off_t)(PT_SHARD_HEADER_BYTES + (uint64_t)w->width * c)) ||
            lseek(src->f.fd, 0, SEEK_END) < 0)
            return pt_fail(PT_EIO, "cannot truncate token shard %s: %s", src->f.path, strerror(errno));
        src->sum = FNV_BASIS;
        for (uint64_t i = 0; i < c;) {
            size_t m = c - i < sizeof buf / w->width ? (size_t)(c - i) : sizeof buf / w->width;
            if (pread_all(src->f.fd, buf, w->width * m, (off_t)(PT_SHARD_HEADER_BYTES + (uint64_t)w->width * i)))
                return pt_fail(PT_EIO, "cannot read back token shard %s: %s", src->f.path, strerror(errno));
            src->sum = fnv_update(src->sum, buf, w->width * m);
            i += m;
        }
        src->n = c;
        k++; /* shards from k on move */
    }
    /* shards k.. become validation shards as they are */
    int move = t->n - k;
    if (v->n + move > v->cap) {
        wshard *nv = realloc(v->v, sizeof *nv * (size_t)(v->n + move));
        if (!nv) return pt_fail(PT_ENOMEM, "out of memory");
        v->v = nv;
        v->cap = v->n + move;
    }
    memcpy(v->v + v->n, t->v + k, sizeof *v->v * (size_t)move);
    v->n += move;
    t->n = k;
    v->tokens = t->tokens - at;
    t->tokens = at;
    return PT_OK;
}

static void wfree(pt_shard_writer *w)
{
    for (int k = 0; k < 2; k++) {
        for (int i = 0; i < w->sp[k].n; i++) pt_atomic_abort(&w->sp[k].v[i].f);
        free(w->sp[k].v);
    }
    free(w->dir);
    free(w);
}

void pt_shard_writer_abort(pt_shard_writer *w)
{
    if (w) wfree(w);
}

/* The file names the previous set in dir used (its index.json's, or
 * train.bin and val.bin without one), for the clean-up after a commit. */
static int old_names(const char *dir, char ***names, int *n)
{
    *names = NULL;
    *n = 0;
    char *ip = join(dir, INDEX_NAME);
    if (!ip) return -1;
    json_t *r = NULL;
    uint64_t sid;
    uint32_t vo, eo;
    int have = exists(ip);
    if (have && read_index(ip, &r, &sid, &vo, &eo)) { /* unreadable: clean nothing */
        free(ip);
        return -1;
    }
    free(ip);
    char **v = NULL;
    int cnt = 0;
    if (r) {
        size_t tn = json_array_size(json_object_get(r, "train")), vn = json_array_size(json_object_get(r, "val"));
        v = calloc(tn + vn + 1, sizeof *v);
        for (int k = 0; v && k < 2; k++) {
            size_t i;
            json_t *e;
            json_array_foreach(json_object_get(r, split_name[k]), i, e) {
                const char *f = json_string_value(json_object_get(e, "file"));
                if (f && safe_name(f) && (v[cnt] = strdup(f))) cnt++;
            }
        }
        json_decref(r);
    } else {
        v = calloc(2, sizeof *v);
        if (v && (v[0] = strdup("train.bin"))) cnt++;
        if (v && (v[cnt] = strdup("val.bin"))) cnt++;
    }
    if (!v) return -1;
    *names = v;
    *n = cnt;
    return 0;
}

/* Remove dir/name when it is a regular file holding a ptrain shard (never
 * through a link: O_NOFOLLOW, and unlinkat names the entry itself). */
static void remove_old_shard(const char *dir, const char *name)
{
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) return;
    int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    struct stat sb;
    unsigned char m[8];
    if (fd >= 0 && fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && pread(fd, m, 8, 0) == 8 &&
        !memcmp(m, PT_SHARD_MAGIC, 8))
        (void)unlinkat(dfd, name, 0);
    if (fd >= 0) close(fd);
    close(dfd);
}

int pt_shard_writer_commit(pt_shard_writer *w, char names[2][64], int nfiles[2])
{
    if (!w) return pt_fail(PT_EINVAL, "pt_shard_writer_commit: NULL argument");
    int rc = PT_OK;
    for (int k = 0; k < 2 && !rc; k++) {
        rc = wflush(w, k);
        if (!rc && !w->sp[k].n) rc = wnew(w, k); /* an empty split: one empty shard */
    }
    if (rc) {
        wfree(w);
        return rc;
    }
    const int legacy = w->cap == UINT64_MAX, total = w->sp[0].n + w->sp[1].n; /* legacy: one shard per split */
    /* the set id of pt_shard_write_set: FNV-1a 64 over (count, checksum), train first */
    uint64_t set_id = FNV_BASIS;
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < w->sp[k].n; i++) {
            unsigned char b[16];
            put_u64(b, w->sp[k].v[i].n);
            put_u64(b + 8, w->sp[k].v[i].sum);
            set_id = fnv_update(set_id, b, sizeof b);
        }
    if (set_id == 0) set_id = 1;
    json_t *idx = json_pack("{s:s, s:i, s:s, s:I, s:I}", "format", INDEX_FORMAT, "version", 1, "set_id", "",
                            "vocab_size", (json_int_t)w->vocab, "eot_id", (json_int_t)w->eot);
    char hex[20];
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)set_id);
    if (idx) json_object_set_new(idx, "set_id", json_string(hex));
    if (idx && w->width == 4) json_object_set_new(idx, "bytes_per_token", json_integer(4)); /* 2-byte sets: as before */
    pt_atomic_file *all = calloc((size_t)total + 1, sizeof *all);
    if (!idx || !all) rc = pt_fail(PT_ENOMEM, "out of memory");
    for (int k = 0; k < 2 && !rc; k++) {
        json_t *arr = json_array();
        if (!arr || json_object_set_new(idx, split_name[k], arr)) {
            rc = pt_fail(PT_ENOMEM, "out of memory");
            break;
        }
        for (int i = 0; i < w->sp[k].n && !rc; i++) {
            wshard *c = &w->sp[k].v[i];
            char name[48], sum[20];
            if (legacy) snprintf(name, sizeof name, "%s.bin", split_name[k]);
            else snprintf(name, sizeof name, "%s_%06d.bin", split_name[k], i);
            snprintf(sum, sizeof sum, "%016llx", (unsigned long long)c->sum);
            char *path = join(w->dir, name);
            if (!path || json_array_append_new(arr, json_pack("{s:s, s:I, s:s}", "file", name, "tokens",
                                                              (json_int_t)c->n, "fnv1a64", sum))) {
                free(path);
                rc = pt_fail(PT_ENOMEM, "out of memory");
                break;
            }
            free(c->f.path); /* the final name (opened under a provisional one) */
            c->f.path = path;
            unsigned char h[PT_SHARD_HEADER_BYTES] = { 0 };
            memcpy(h, PT_SHARD_MAGIC, 8);
            put_u32(h + 8, w->width == 4 ? PT_SHARD_VERSION_4 : PT_SHARD_VERSION);
            put_u32(h + 12, w->width);
            put_u64(h + 16, c->n);
            put_u32(h + 24, w->vocab);
            put_u32(h + 28, w->eot);
            put_u64(h + 32, c->sum);
            put_u64(h + 40, set_id);
            if (pwrite(c->f.fd, h, sizeof h, 0) != (ssize_t)sizeof h)
                rc = pt_fail(PT_EIO, "cannot write token shard %s: %s", path, strerror(errno));
        }
    }
    char *js = rc ? NULL : json_dumps(idx, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
    if (!rc && !js) rc = pt_fail(PT_ENOMEM, "out of memory");
    char *ip = rc ? NULL : join(w->dir, INDEX_NAME);
    if (!rc && !ip) rc = pt_fail(PT_ENOMEM, "out of memory");
    if (!rc) rc = pt_atomic_open(&all[total], ip);
    if (!rc && (pt_write_all(all[total].fd, js, strlen(js)) || pt_write_all(all[total].fd, "\n", 1))) {
        rc = pt_fail(PT_EIO, "cannot write %s: %s", ip, strerror(errno));
        pt_atomic_abort(&all[total]);
    }
    char **old = NULL;
    int nold = 0;
    if (!rc) {
        (void)old_names(w->dir, &old, &nold); /* before the commit replaces index.json */
        int j = 0;
        for (int k = 0; k < 2; k++)
            for (int i = 0; i < w->sp[k].n; i++) {
                all[j++] = w->sp[k].v[i].f; /* the commit releases them */
                w->sp[k].v[i].f.fd = -1;
                w->sp[k].v[i].f.path = w->sp[k].v[i].f.tmp = NULL;
            }
        rc = pt_atomic_commit(all, total + 1);
    }
    if (!rc) {
        for (int i = 0; i < nold; i++) {
            int keep = 0;
            for (int k = 0; k < 2 && !keep; k++)
                for (int j = 0; j < w->sp[k].n && !keep; j++) {
                    char name[48];
                    if (legacy) snprintf(name, sizeof name, "%s.bin", split_name[k]);
                    else snprintf(name, sizeof name, "%s_%06d.bin", split_name[k], j);
                    keep = !strcmp(name, old[i]);
                }
            if (!keep) remove_old_shard(w->dir, old[i]);
        }
        for (int k = 0; k < 2; k++) {
            if (nfiles) nfiles[k] = w->sp[k].n;
            if (!names) continue;
            if (legacy) snprintf(names[k], 64, "%s.bin", split_name[k]);
            else if (w->sp[k].n == 1) snprintf(names[k], 64, "%s_000000.bin", split_name[k]);
            else snprintf(names[k], 64, "%s_000000.bin .. %s_%06d.bin", split_name[k], split_name[k], w->sp[k].n - 1);
        }
    }
    for (int i = 0; i < nold; i++) free(old[i]);
    free(old);
    free(js);
    free(ip);
    free(all);
    json_decref(idx);
    wfree(w);
    return rc;
}

/* pt_loader_batch of a stream of 4-byte ids (arguments checked) */
static int loader_batch32(const pt_shard *s, long step, int B_global, int T, int first_seq, int nseq, int32_t *inputs,
                          int32_t *targets)
{
    uint32_t *tmp = NULL; /* T + 1 tokens of a sequence read across files */
    if (!s->tokens32 && !(tmp = malloc(sizeof *tmp * ((size_t)T + 1))))
        return pt_fail(PT_ENOMEM, "loader: out of memory for a sequence of %d tokens", T);
    unsigned __int128 span = (unsigned __int128)(s->ntokens - (uint64_t)T - 1);
    for (int j = 0; j < nseq; j++) {
        unsigned __int128 seq = (unsigned __int128)(uint64_t)step * (uint64_t)B_global + (uint64_t)(first_seq + j);
        uint64_t off = (uint64_t)((seq * (uint64_t)T) % span);
        const uint32_t *src = s->tokens32 ? s->tokens32 + off : tmp;
        if (!s->tokens32) (void)pt_shard_read32(s, off, (uint64_t)T + 1, tmp); /* in range: off + T + 1 <= ntokens */
        int32_t *in = inputs + (size_t)j * (size_t)T, *tg = targets + (size_t)j * (size_t)T;
        for (int t = 0; t < T; t++) { /* ids < vocab_size <= 2^31 - 1 */
            in[t] = (int32_t)src[t];
            tg[t] = (int32_t)src[t + 1];
        }
    }
    free(tmp);
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
    if ((!s->tokens && !s->tokens32 && s->nfiles < 2) || s->ntokens < (uint64_t)T + 2)
        return pt_fail(PT_EINVAL, "loader: shard has %llu tokens, sequence length %d needs at least %d",
                       (unsigned long long)s->ntokens, T, T + 2);
    if (s->token_bytes == 4 || s->tokens32) return loader_batch32(s, step, B_global, T, first_seq, nseq, inputs, targets);
    uint16_t *tmp = NULL; /* T + 1 tokens of a sequence read across files */
    if (!s->tokens && !(tmp = malloc(sizeof *tmp * ((size_t)T + 1))))
        return pt_fail(PT_ENOMEM, "loader: out of memory for a sequence of %d tokens", T);
    unsigned __int128 span = (unsigned __int128)(s->ntokens - (uint64_t)T - 1);
    for (int j = 0; j < nseq; j++) {
        unsigned __int128 seq = (unsigned __int128)(uint64_t)step * (uint64_t)B_global + (uint64_t)(first_seq + j);
        uint64_t off = (uint64_t)((seq * (uint64_t)T) % span);
        const uint16_t *src = s->tokens ? s->tokens + off : tmp;
        if (!s->tokens) (void)pt_shard_read(s, off, (uint64_t)T + 1, tmp); /* in range: off + T + 1 <= ntokens */
        int32_t *in = inputs + (size_t)j * (size_t)T, *tg = targets + (size_t)j * (size_t)T;
        for (int t = 0; t < T; t++) {
            in[t] = src[t];
            tg[t] = src[t + 1];
        }
    }
    free(tmp);
    return PT_OK;
}
