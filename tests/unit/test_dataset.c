/* SPDX-License-Identifier: MIT */
/* Data sets (lib/data/shard.h): token files of other tools and streams over
 * several files.
 *  - llm.c shards and nanoGPT .bin files written here by an independent
 *    writer (bytes put one by one, no library call) read back id for id,
 *    as data sets (pt_dataset_open) whose splits span several files;
 *    pt_shard_read and the loader's batches over them equal those of the
 *    concatenated ids with an independent offset computation (sequences
 *    crossing file boundaries included); the streams' checksums follow the
 *    documented rule; refusals of malformed headers, ids, layouts, one line;
 *  - the streaming set writer: random ids in shards of a random size,
 *    split at random, at a shard boundary and at the ends, read back as
 *    train and val; with one shard per split, byte for byte the files of
 *    pt_shard_write_set; the previous set's shards removed (only shards it
 *    listed); an abort leaves nothing; an index that was edited is refused;
 *  - pt_llmc_write: the header and ids of a range of a multi-file stream. */
#define _GNU_SOURCE
#include "core/core.h"
#include "core/file.h"
#include "data/shard.h"
#include "tests/tap.h"

#include <dirent.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static char top[256];
static pt_rng rng;

static uint64_t rnd(uint64_t n) { return pt_rng_u64(&rng) % n; }

/* FNV-1a 64 over the ids as little-endian bytes, written out here */
static uint64_t ref_fnv_ids(const uint16_t *ids, uint64_t n)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (uint64_t i = 0; i < n; i++) {
        h = (h ^ (ids[i] & 0xffu)) * 0x100000001b3ULL;
        h = (h ^ (ids[i] >> 8)) * 0x100000001b3ULL;
    }
    return h;
}

/* FNV-1a 64 over (count, checksum) pairs, 16 little-endian bytes each */
static uint64_t ref_pairs(int n, const uint64_t *count, const uint64_t *sum)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (int k = 0; k < n; k++)
        for (int half = 0; half < 2; half++)
            for (int b = 0; b < 8; b++) h = (h ^ (((half ? sum[k] : count[k]) >> (8 * b)) & 0xff)) * 0x100000001b3ULL;
    return h;
}

static void put32(FILE *f, int32_t v)
{
    for (int b = 0; b < 4; b++) fputc((int)(((uint32_t)v >> (8 * b)) & 0xff), f);
}

/* llm.c's write_datafile: 256 int32 (magic, version, count, zeros), uint16 ids */
static void write_llmc(const char *path, const uint16_t *ids, uint64_t n, int32_t magic, int32_t version, int32_t count)
{
    FILE *f = fopen(path, "wb");
    if (!f) return;
    put32(f, magic);
    put32(f, version);
    put32(f, count);
    for (int i = 3; i < 256; i++) put32(f, 0);
    for (uint64_t i = 0; i < n; i++) {
        fputc(ids[i] & 0xff, f);
        fputc(ids[i] >> 8, f);
    }
    fclose(f);
}

/* nanoGPT's np.array(ids, dtype=np.uint16).tofile(path): no header */
static void write_nanogpt(const char *path, const uint16_t *ids, uint64_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f) return;
    for (uint64_t i = 0; i < n; i++) {
        fputc(ids[i] & 0xff, f);
        fputc(ids[i] >> 8, f);
    }
    fclose(f);
}

static void fill(uint16_t *ids, uint64_t n, uint32_t vocab)
{
    for (uint64_t i = 0; i < n; i++) ids[i] = (uint16_t)rnd(vocab);
}

/* (a * b) mod m by doubling, as test_shard.c */
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

/* the stream s holds exactly ids [n]: pt_shard_read of all and of random
 * ranges, and the loader's batches at several steps against the offsets
 * computed here */
static int stream_is(const pt_shard *s, const uint16_t *ids, uint64_t n, char *why, size_t wl)
{
    if (s->ntokens != n) return snprintf(why, wl, "%llu tokens, want %llu", (unsigned long long)s->ntokens,
                                         (unsigned long long)n), 0;
    uint16_t *got = malloc(sizeof *got * (n ? n : 1));
    int ok = got && pt_shard_read(s, 0, n, got) == PT_OK && (!n || !memcmp(got, ids, sizeof *got * n));
    if (!ok) snprintf(why, wl, "pt_shard_read of the whole stream differs");
    for (int r = 0; ok && r < 50 && n; r++) {
        uint64_t a = rnd(n), b = a + rnd(n - a + 1);
        ok = pt_shard_read(s, a, b - a, got) == PT_OK && (b == a || !memcmp(got, ids + a, sizeof *got * (b - a)));
        if (!ok) snprintf(why, wl, "pt_shard_read [%llu, %llu) differs", (unsigned long long)a, (unsigned long long)b);
    }
    if (ok) ok = pt_shard_read(s, n, 1, got) == PT_EINVAL && !strchr(pt_errmsg(), '\n');
    if (!ok && !*why) snprintf(why, wl, "a read past the end was not refused");
    free(got);
    const int B = 3, T = 7;
    if (!ok || n < (uint64_t)T + 2) return ok;
    int32_t in[3 * 7], tg[3 * 7];
    const long steps[] = { 0, 1, 5, (long)rnd(1000000), 0x7fffffffffffL };
    for (size_t k = 0; ok && k < sizeof steps / sizeof steps[0]; k++) {
        if (pt_loader_batch(s, steps[k], B, T, 0, B, in, tg)) {
            snprintf(why, wl, "loader: %s", pt_errmsg());
            return 0;
        }
        uint64_t m = n - T - 1;
        for (int i = 0; ok && i < B; i++) {
            uint64_t seq = (mulmod((uint64_t)steps[k], B, m) + (uint64_t)i % m) % m, off = mulmod(seq, T, m);
            for (int t = 0; ok && t < T; t++) ok = in[i * T + t] == ids[off + t] && tg[i * T + t] == ids[off + t + 1];
        }
        if (!ok) snprintf(why, wl, "loader batch of step %ld differs", steps[k]);
    }
    return ok;
}

static void path_of(char *p, size_t n, const char *d, const char *name) { snprintf(p, n, "%s/%s", d, name); }

static int count_entries(const char *d)
{
    DIR *x = opendir(d);
    int n = 0;
    struct dirent *e;
    while (x && (e = readdir(x)))
        if (e->d_name[0] != '.') n++;
    if (x) closedir(x);
    return n;
}

static int one_line(void) { return *pt_errmsg() && !strchr(pt_errmsg(), '\n'); }

/* ---- llm.c and nanoGPT files ------------------------------------------------- */

static void test_llmc(void)
{
    char d[300], p[400], why[256] = "";
    snprintf(d, sizeof d, "%s/fineweb", top);
    mkdir(d, 0755);
    /* train: 4 files, one of them shorter than a sequence so batches span files */
    const uint64_t tn[4] = { 500 + rnd(900), 3, 200 + rnd(300), 1 + rnd(40) }, vn[2] = { 30 + rnd(100), 100 + rnd(100) };
    uint64_t T = tn[0] + tn[1] + tn[2] + tn[3], Vn = vn[0] + vn[1];
    uint16_t *tr = malloc(sizeof *tr * T), *va = malloc(sizeof *va * Vn);
    fill(tr, T, 50257);
    fill(va, Vn, 50257);
    tr[0] = 50256;
    uint64_t at = 0, sums[4];
    for (int k = 0; k < 4; k++) {
        char name[64];
        snprintf(name, sizeof name, "fineweb_train_%06d.bin", k + 1); /* llm.c's names: val 0, train from 1 */
        path_of(p, sizeof p, d, name);
        write_llmc(p, tr + at, tn[k], 20240520, 1, (int32_t)tn[k]);
        sums[k] = ref_fnv_ids(tr + at, tn[k]);
        at += tn[k];
    }
    path_of(p, sizeof p, d, "fineweb_val_000000.bin");
    write_llmc(p, va, vn[0], 20240520, 1, (int32_t)vn[0]);
    path_of(p, sizeof p, d, "fineweb_val_000001.bin");
    write_llmc(p, va + vn[0], vn[1], 20240520, 1, (int32_t)vn[1]);
    path_of(p, sizeof p, d, "README.md"); /* other files are passed over */
    FILE *f = fopen(p, "w");
    if (f) fclose(f);

    pt_shard a, b;
    int rc = pt_dataset_open(d, 0, &a, &b);
    tap_ok(rc == PT_OK && a.nfiles == 4 && b.nfiles == 2 && a.tokens == NULL && a.format == PT_TOKENS_LLMC &&
               a.vocab_size == 50257 && a.eot_id == 50256 && a.set_id == 0,
           "a directory of llm.c shards opens as a data set: train 4 files (%llu tokens), val 2 (%llu): %s",
           (unsigned long long)T, (unsigned long long)Vn, rc ? pt_errmsg() : "ok");
    if (rc) return;
    tap_ok(stream_is(&a, tr, T, why, sizeof why), "train is the 4 files' ids in name order, read and batched across "
           "files (%s)", *why ? why : "equal");
    why[0] = 0;
    tap_ok(stream_is(&b, va, Vn, why, sizeof why), "val is the 2 files' ids (%s)", *why ? why : "equal");
    tap_ok(a.checksum == ref_pairs(4, tn, sums) && a.files[2].checksum == sums[2],
           "the stream's checksum is FNV-1a 64 of the files' (count, FNV-1a 64) pairs");

    /* pt_llmc_write of a range across files: header + ids */
    path_of(p, sizeof p, top, "range.bin");
    pt_atomic_file af;
    uint64_t off = tn[0] - 2, n = 10;
    rc = pt_atomic_open(&af, p);
    if (!rc) rc = pt_llmc_write(af.fd, p, &a, off, n);
    if (!rc) rc = pt_atomic_commit(&af, 1);
    pt_shard r;
    int ok = !rc && pt_tokens_open(&r, p, PT_TOKENS_AUTO, 0) == PT_OK && r.format == PT_TOKENS_LLMC &&
             r.ntokens == n && !memcmp(r.tokens, tr + off, 2 * n);
    tap_ok(ok, "pt_llmc_write of tokens [%llu, +%llu) (across two files) reads back as an llm.c file of them",
           (unsigned long long)off, (unsigned long long)n);
    if (!rc) pt_shard_close(&r);
    pt_shard_close(&a);
    pt_shard_close(&b);

    /* a prefix restricts the format */
    rc = pt_dataset_open(d, 0, &a, &b);
    if (!rc) { pt_shard_close(&a); pt_shard_close(&b); }
    rc = pt_dataset_open(strcat(strcpy(p, "ptrain:"), d), 0, &a, &b);
    tap_ok(rc == PT_EFORMAT && one_line() && strstr(pt_errmsg(), "holds no data set"),
           "ptrain:DIR does not read llm.c shards: %s", pt_errmsg());
    rc = pt_dataset_open(strcat(strcpy(p, "llmc:"), d), 0, &a, &b);
    tap_ok(rc == PT_OK && a.ntokens == T, "llmc:DIR does");
    if (!rc) { pt_shard_close(&a); pt_shard_close(&b); }

    /* malformed llm.c files: one line each, PT_EFORMAT */
    struct { const char *what, *needle; int32_t magic, version, count; int64_t n; } bad[] = {
        { "version 2 (uint32 Llama 3 ids)", "version 2 is not supported", 20240520, 2, 20, 20 },
        { "version 7", "version 7 is not supported", 20240520, 7, 20, 20 },
        { "a negative count", "negative token count", 20240520, 1, -5, 20 },
        { "a count past the file's end", "truncated llm.c token file", 20240520, 1, 21, 20 },
        { "a count of 2^31 - 1", "truncated llm.c token file", 20240520, 1, INT32_MAX, 20 },
        { "a count short of the file", "over-long llm.c token file", 20240520, 1, 19, 20 },
        { "another magic", "not an llm.c token file", 20240326, 1, 20, 20 },
        { "a header cut at 100 bytes", "header needs 1024 bytes", 20240520, 1, 20, -100 },
    };
    uint16_t small[20];
    fill(small, 20, 50257);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        path_of(p, sizeof p, top, "bad.bin");
        write_llmc(p, small, bad[i].n > 0 ? (uint64_t)bad[i].n : 0, bad[i].magic, bad[i].version, bad[i].count);
        if (bad[i].n < 0) truncate(p, -bad[i].n);
        rc = pt_tokens_open(&r, p, PT_TOKENS_LLMC, 0);
        tap_ok(rc == PT_EFORMAT && one_line() && strstr(pt_errmsg(), bad[i].needle) && r.tokens == NULL,
               "llm.c file with %s: refused in one line (%s)", bad[i].what, pt_errmsg());
    }
    small[7] = 50257;
    write_llmc(p, small, 20, 20240520, 1, 20);
    rc = pt_tokens_open(&r, p, PT_TOKENS_AUTO, 0);
    tap_ok(rc == PT_EFORMAT && strstr(pt_errmsg(), "token 7 has id 50257 >= vocab_size 50257"),
           "an llm.c id outside GPT-2's vocabulary: %s", pt_errmsg());

    /* layouts that are not one data set */
    char d2[300];
    snprintf(d2, sizeof d2, "%s/mixed", top);
    mkdir(d2, 0755);
    path_of(p, sizeof p, d2, "fineweb_train_000001.bin");
    write_llmc(p, tr, 100, 20240520, 1, 100);
    rc = pt_dataset_open(d2, 0, &a, &b);
    tap_ok(rc == PT_EFORMAT && one_line() && strstr(pt_errmsg(), "no fineweb_val*.bin"),
           "train shards without val shards: %s", pt_errmsg());
    path_of(p, sizeof p, d2, "edu_fineweb_val_000000.bin");
    write_llmc(p, tr, 100, 20240520, 1, 100);
    rc = pt_dataset_open(d2, 0, &a, &b);
    tap_ok(rc == PT_EFORMAT && one_line() && strstr(pt_errmsg(), "two data sets"), "two prefixes: %s", pt_errmsg());
    free(tr);
    free(va);
}

static void test_nanogpt(void)
{
    char d[300], p[400], spec[400], why[256] = "";
    snprintf(d, sizeof d, "%s/shakespeare_char", top);
    mkdir(d, 0755);
    const uint32_t V = 65;
    uint64_t tn = 1000 + rnd(1000), vn = 100 + rnd(100);
    uint16_t *tr = malloc(sizeof *tr * tn), *va = malloc(sizeof *va * vn);
    /* ids below V - 1 but the one at 5: the refusal below names the first
     * id >= V - 1 (a random V - 1 before it failed one run in ~10) */
    fill(tr, tn, V - 1);
    fill(va, vn, V - 1);
    tr[5] = V - 1;
    path_of(p, sizeof p, d, "train.bin");
    write_nanogpt(p, tr, tn);
    path_of(p, sizeof p, d, "val.bin");
    write_nanogpt(p, va, vn);
    snprintf(spec, sizeof spec, "nanogpt:%s", d);
    pt_shard a, b;
    int rc = pt_dataset_open(spec, V, &a, &b);
    tap_ok(rc == PT_OK && a.format == PT_TOKENS_NANOGPT && a.vocab_size == V && a.nfiles == 1,
           "nanogpt:DIR with vocabulary %u opens: %s", V, rc ? pt_errmsg() : "ok");
    if (!rc) {
        tap_ok(stream_is(&a, tr, tn, why, sizeof why) && stream_is(&b, va, vn, why, sizeof why) &&
                   a.checksum == ref_fnv_ids(tr, tn),
               "train.bin and val.bin hold the written ids (%s)", *why ? why : "equal");
        pt_shard_close(&a);
        pt_shard_close(&b);
    }
    rc = pt_dataset_open(spec, V - 1, &a, &b);
    tap_ok(rc == PT_EFORMAT && one_line() && strstr(pt_errmsg(), "token 5 has id 64 >= vocab_size 64"),
           "a vocabulary below an id: %s", pt_errmsg());
    rc = pt_dataset_open(spec, 0, &a, &b);
    tap_ok(rc == PT_EINVAL && one_line() && strstr(pt_errmsg(), "does not record its vocabulary"),
           "no vocabulary: %s", pt_errmsg());
    rc = pt_dataset_open(d, V, &a, &b);
    tap_ok(rc == PT_EFORMAT && one_line() && strstr(pt_errmsg(), "nanogpt:"),
           "without the prefix, headerless files are refused naming nanogpt: (%s)", pt_errmsg());
    path_of(p, sizeof p, top, "odd.bin");
    FILE *f = fopen(p, "wb");
    if (f) { fputs("abc", f); fclose(f); }
    pt_shard r;
    rc = pt_tokens_open(&r, p, PT_TOKENS_NANOGPT, V);
    tap_ok(rc == PT_EFORMAT && one_line() && strstr(pt_errmsg(), "odd number"), "an odd-sized file: %s", pt_errmsg());
    free(tr);
    free(va);
}

/* ---- the streaming writer ---------------------------------------------------- */

/* write ids [n] to split k in random pieces */
static int add_random_pieces(pt_shard_writer *w, int k, const uint16_t *ids, uint64_t n)
{
    for (uint64_t at = 0; at < n;) {
        uint64_t m = 1 + rnd(300);
        if (m > n - at) m = n - at;
        int rc = pt_shard_writer_add(w, k, ids + at, (size_t)m);
        if (rc) return rc;
        at += m;
    }
    return PT_OK;
}

static int file_tokens(const char *d, const char *name, uint64_t *n)
{
    char p[400];
    path_of(p, sizeof p, d, name);
    pt_shard s;
    if (pt_shard_open(&s, p)) return -1;
    *n = s.ntokens;
    pt_shard_close(&s);
    return 0;
}

static void test_writer(void)
{
    char d[300], p[400], why[256];
    const uint32_t V = 1000 + (uint32_t)rnd(60000), E = (uint32_t)rnd(V);
    const uint64_t S = 37 + rnd(200), n = 20 * S + rnd(5 * S);
    uint16_t *ids = malloc(sizeof *ids * n);
    fill(ids, n, V);
    tap_diag("writer: vocab %u, %llu ids, shards of %llu", V, (unsigned long long)n, (unsigned long long)S);
    /* split points: random, at a shard boundary, in the first shard, nothing to val, everything to val */
    const uint64_t cuts[] = { S + rnd(n - 2 * S), 7 * S, rnd(S), n, 0 };
    for (size_t c = 0; c < sizeof cuts / sizeof cuts[0]; c++) {
        snprintf(d, sizeof d, "%s/w%zu", top, c);
        mkdir(d, 0755);
        pt_shard_writer *w;
        int rc = pt_shard_writer_open(&w, d, S, V, E);
        if (!rc) rc = add_random_pieces(w, PT_SPLIT_TRAIN, ids, n);
        if (!rc) rc = pt_shard_writer_split(w, cuts[c]);
        char names[2][64];
        int nf[2] = { 0, 0 };
        if (!rc) rc = pt_shard_writer_commit(w, names, nf);
        else pt_shard_writer_abort(w);
        pt_shard a, b;
        if (!rc) rc = pt_dataset_open(d, 0, &a, &b);
        why[0] = 0;
        int ok = !rc && stream_is(&a, ids, cuts[c], why, sizeof why) &&
                 stream_is(&b, ids + cuts[c], n - cuts[c], why, sizeof why) && a.vocab_size == V && a.eot_id == E &&
                 a.set_id && a.set_id == b.set_id;
        /* shard sizes: train full shards then one partial; val after the cut shard's tail, full ones */
        uint64_t m = 0;
        for (int i = 0; ok && i + 1 < nf[0]; i++) {
            char name[64];
            snprintf(name, sizeof name, "train_%06d.bin", i);
            ok = !file_tokens(d, name, &m) && m == S;
            if (!ok) snprintf(why, sizeof why, "%s holds %llu tokens, not %llu", name, (unsigned long long)m,
                              (unsigned long long)S);
        }
        tap_ok(ok, "split at %llu of %llu: train (%d shards, %s) and val (%d shards, %s) read back (%s)",
               (unsigned long long)cuts[c], (unsigned long long)n, nf[0], names[0], nf[1], names[1],
               rc ? pt_errmsg() : *why ? why : "equal");
        if (!rc) {
            pt_shard_close(&a);
            pt_shard_close(&b);
        }
    }

    /* one shard per split: the files of pt_shard_write_set, byte for byte */
    snprintf(d, sizeof d, "%s/legacy", top);
    mkdir(d, 0755);
    const uint64_t cut = 1 + rnd(n - 1);
    pt_shard_writer *w;
    int rc = pt_shard_writer_open(&w, d, 0, V, E);
    if (!rc) rc = add_random_pieces(w, PT_SPLIT_TRAIN, ids, n);
    if (!rc) rc = pt_shard_writer_split(w, cut);
    if (!rc) rc = pt_shard_writer_commit(w, NULL, NULL);
    int32_t *wide = malloc(sizeof *wide * n);
    for (uint64_t i = 0; i < n; i++) wide[i] = ids[i];
    char q1[400], q2[400];
    path_of(q1, sizeof q1, top, "ref-train.bin");
    path_of(q2, sizeof q2, top, "ref-val.bin");
    const char *paths[2] = { q1, q2 };
    const int32_t *parts[2] = { wide, wide + cut };
    const uint64_t counts[2] = { cut, n - cut };
    int rc2 = pt_shard_write_set(2, paths, parts, counts, V, E);
    int same = !rc && !rc2;
    for (int k = 0; same && k < 2; k++) {
        char mine[400];
        path_of(mine, sizeof mine, d, k ? "val.bin" : "train.bin");
        FILE *x = fopen(mine, "rb"), *y = fopen(paths[k], "rb");
        int cx, cy;
        do { cx = x ? fgetc(x) : -2; cy = y ? fgetc(y) : -3; } while (cx == cy && cx != EOF);
        same = cx == cy;
        if (x) fclose(x);
        if (y) fclose(y);
    }
    tap_ok(same, "shard_tokens 0: train.bin and val.bin equal pt_shard_write_set's, byte for byte (cut at %llu)",
           (unsigned long long)cut);
    free(wide);
    tap_ok(count_entries(d) == 3, "... with index.json beside them, nothing else (%d entries)", count_entries(d));

    /* the previous set's shards go: sharded -> legacy -> sharded in one directory */
    snprintf(d, sizeof d, "%s/replace", top);
    mkdir(d, 0755);
    rc = pt_shard_writer_open(&w, d, S, V, E);
    if (!rc) rc = add_random_pieces(w, PT_SPLIT_TRAIN, ids, n);
    if (!rc) rc = pt_shard_writer_split(w, n - 2 * S);
    if (!rc) rc = pt_shard_writer_commit(w, NULL, NULL);
    int before = count_entries(d);
    path_of(p, sizeof p, d, "train_000003.bin"); /* a listed shard the user replaced by a text of their own */
    unlink(p);
    FILE *f = fopen(p, "w");
    if (f) { fputs("my notes\n", f); fclose(f); }
    path_of(p, sizeof p, d, "train_000099.bin"); /* and a file no index lists */
    f = fopen(p, "w");
    if (f) { fputs("mine too\n", f); fclose(f); }
    if (!rc) rc = pt_shard_writer_open(&w, d, 0, V, E);
    if (!rc) rc = pt_shard_writer_add(w, PT_SPLIT_TRAIN, ids, 100);
    if (!rc) rc = pt_shard_writer_add(w, PT_SPLIT_VAL, ids + 100, 50);
    if (!rc) rc = pt_shard_writer_commit(w, NULL, NULL);
    int after = count_entries(d);
    pt_shard a, b;
    int rd = rc ? rc : pt_dataset_open(d, 0, &a, &b);
    tap_ok(!rc && !rd && a.ntokens == 100 && b.ntokens == 50 && after == 5,
           "a set of %d files replaced by train.bin + val.bin: the old shards are removed, a replaced one and one "
           "never listed stay (%d entries: index.json, train.bin, val.bin, train_000003.bin, train_000099.bin)",
           before - 1, after);
    if (!rd) {
        pt_shard_close(&a);
        pt_shard_close(&b);
    }
    rc = pt_shard_writer_open(&w, d, S, V, E);
    if (!rc) rc = add_random_pieces(w, PT_SPLIT_TRAIN, ids, 3 * S);
    if (!rc) rc = add_random_pieces(w, PT_SPLIT_VAL, ids, S);
    if (!rc) rc = pt_shard_writer_commit(w, NULL, NULL);
    path_of(p, sizeof p, d, "train.bin");
    tap_ok(!rc && access(p, F_OK) != 0 && count_entries(d) == 1 + 3 + 1 + 2,
           "... and back to shards: train.bin and val.bin removed (%d entries)", count_entries(d));

    /* an abort leaves nothing */
    snprintf(d, sizeof d, "%s/aborted", top);
    mkdir(d, 0755);
    rc = pt_shard_writer_open(&w, d, S, V, E);
    if (!rc) rc = add_random_pieces(w, PT_SPLIT_TRAIN, ids, n);
    if (!rc) pt_shard_writer_abort(w);
    tap_ok(!rc && count_entries(d) == 0, "an aborted set leaves no file (%d entries)", count_entries(d));
    uint16_t big = (uint16_t)V;
    rc = pt_shard_writer_open(&w, d, S, V, E);
    if (!rc) {
        int r2 = pt_shard_writer_add(w, PT_SPLIT_TRAIN, &big, 1);
        tap_ok(r2 == PT_EINVAL && one_line() && strstr(pt_errmsg(), "outside"), "an id >= vocab is refused: %s",
               pt_errmsg());
        pt_shard_writer_abort(w);
    }

    /* an edited index is refused, one line each */
    snprintf(d, sizeof d, "%s/edited", top);
    mkdir(d, 0755);
    rc = pt_shard_writer_open(&w, d, S, V, E);
    if (!rc) rc = add_random_pieces(w, PT_SPLIT_TRAIN, ids, 3 * S);
    if (!rc) rc = add_random_pieces(w, PT_SPLIT_VAL, ids, S);
    if (!rc) rc = pt_shard_writer_commit(w, NULL, NULL);
    char *orig = NULL;
    size_t olen = 0;
    path_of(p, sizeof p, d, "index.json");
    if (!rc) rc = pt_read_regular(p, NULL, &orig, &olen);
    struct { const char *what, *from, *to, *needle; } edits[] = {
        { "a file outside the directory", "\"train_000001.bin\"", "\"../w0/train_000001.bin\"", "is not {\"file\"" },
        { "a token count off by one", "\"tokens\": ", "\"tokens\": 1", "does not match its entry" },
        { "a duplicate key", "\"version\": 1,", "\"version\": 1, \"version\": 1,", "duplicate" },
        { "another format", "ptrain-token-set", "ptrain-token-sex", "not a ptrain token set index" },
        { "a short set id", "\"set_id\": \"", "\"set_id\": \"0", "set_id" },
        { "no val list", "\"val\"", "\"lav\"", "\"val\" is not a list" },
    };
    for (size_t i = 0; !rc && i < sizeof edits / sizeof edits[0]; i++) {
        const char *at = strstr(orig, edits[i].from);
        if (!at) continue;
        f = fopen(p, "w");
        if (!f) continue;
        fwrite(orig, 1, (size_t)(at - orig), f);
        fputs(edits[i].to, f);
        fputs(at + strlen(edits[i].from), f);
        fclose(f);
        int r2 = pt_dataset_open(d, 0, &a, &b);
        tap_ok(r2 == PT_EFORMAT && one_line() && strstr(pt_errmsg(), edits[i].needle),
               "index.json with %s: refused (%s)", edits[i].what, pt_errmsg());
        if (!r2) {
            pt_shard_close(&a);
            pt_shard_close(&b);
        }
    }
    /* a shard of another set under a listed name */
    if (!rc) {
        f = fopen(p, "w");
        if (f) { fwrite(orig, 1, olen, f); fclose(f); }
        char from[400];
        path_of(from, sizeof from, top, "w0/train_000000.bin");
        path_of(p, sizeof p, d, "train_000000.bin");
        rename(from, p);
        int r2 = pt_dataset_open(d, 0, &a, &b);
        tap_ok(r2 == PT_EFORMAT && one_line() && strstr(pt_errmsg(), "a shard of another prepare"),
               "a shard of another set under a listed name: %s", pt_errmsg());
    }
    free(orig);
    free(ids);
}

int main(void)
{
    uint64_t seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
    if (getenv("PTRAIN_TEST_SEED")) seed = strtoull(getenv("PTRAIN_TEST_SEED"), NULL, 10);
    pt_rng_seed(&rng, seed, 11);
    tap_diag("seed %llu (PTRAIN_TEST_SEED reproduces)", (unsigned long long)seed);
    snprintf(top, sizeof top, "/tmp/ptrain-test-dataset-XXXXXX");
    if (!mkdtemp(top)) {
        tap_skip_all("cannot create a temporary directory");
        return 0;
    }
    test_llmc();
    test_nanogpt();
    test_writer();
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", top);
    if (system(cmd)) tap_diag("could not remove %s", top);
    return tap_done();
}
