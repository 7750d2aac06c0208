/* SPDX-License-Identifier: MIT */
/* Streaming data set preparation (see prepare.h). */
#define _GNU_SOURCE
#include "data/prepare.h"
#include "core/core.h"
#include "core/file.h"
#include "data/bpe.h"
#include "data/shard.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef CHUNK_BYTES /* (tests/fuzz/fuzz_corpus.c makes it small, to cut documents of a few hundred bytes) */
#define CHUNK_BYTES ((size_t)1 << 20)      /* text per chunk (a chunk may reach about twice that) */
#endif
#define PROGRESS_BYTES ((uint64_t)64 << 20)
#define MIN_MEMORY ((size_t)16 << 20)

/* ---- chunks: text of one or more documents (or parts of one) ------------- */

typedef struct seg {
    size_t off, len;   /* in the chunk's text */
    int doc_start;     /* the first part of a document: "<|endoftext|>" before it */
    size_t n;          /* ids it encoded to, the "<|endoftext|>" included */
} seg;

typedef struct chunk {
    char *text;
    size_t len, cap;
    seg *segs;
    int nsegs, cap_segs;
    uint64_t src_bytes; /* source bytes read for it (progress) */
    uint32_t *ids;      /* encoded */
    size_t n;
} chunk;

static void chunk_free(chunk *c)
{
    free(c->text);
    free(c->segs);
    free(c->ids);
    memset(c, 0, sizeof *c);
}

static int chunk_add(chunk *c, const char *s, size_t len, int doc_start)
{
    if (c->len + len > c->cap) {
        size_t nc = c->cap ? c->cap : 2 * CHUNK_BYTES;
        while (nc < c->len + len) nc *= 2;
        char *t = realloc(c->text, nc);
        if (!t) return pt_fail(PT_ENOMEM, "prepare: out of memory for %zu bytes of text", nc);
        c->text = t;
        c->cap = nc;
    }
    if (c->nsegs == c->cap_segs) {
        int nc = c->cap_segs ? 2 * c->cap_segs : 16;
        seg *v = realloc(c->segs, sizeof *v * (size_t)nc);
        if (!v) return pt_fail(PT_ENOMEM, "prepare: out of memory");
        c->segs = v;
        c->cap_segs = nc;
    }
    memcpy(c->text + c->len, s, len);
    c->segs[c->nsegs++] = (seg){ c->len, len, doc_start, 0 };
    c->len += len;
    return PT_OK;
}

/* The first place at or after `from` (>= 1) where GPT-2's pre-tokenizer
 * always splits: an ASCII white-space byte after a printable non-space
 * ASCII byte (prepare.h); 0 when there is none in s[0, len). */
static size_t safe_cut(const char *s, size_t len, size_t from)
{
    if (from < 1) from = 1;
    for (size_t i = from; i < len; i++) {
        unsigned char c = (unsigned char)s[i], p = (unsigned char)s[i - 1];
        if ((c == ' ' || (c >= '\t' && c <= '\r')) && p > ' ' && p < 0x7f) return i;
    }
    return 0;
}

/* The last such place before `before`, or 0. */
static size_t safe_cut_before(const char *s, size_t before)
{
    for (size_t i = before; i-- > 1;) {
        unsigned char c = (unsigned char)s[i], p = (unsigned char)s[i - 1];
        if ((c == ' ' || (c >= '\t' && c <= '\r')) && p > ' ' && p < 0x7f) return i;
    }
    return 0;
}

/* How far past `want` a part looks for a safe_cut before it takes a
 * pre-token boundary instead (>= PT_BPE_LOOKAHEAD). */
#ifndef CUT_SLACK /* (tests/fuzz/fuzz_corpus.c makes it PT_BPE_LOOKAHEAD, so that inputs under 64 KiB reach it) */
#define CUT_SLACK ((size_t)256 << 10)
#endif

/* ---- the document stream of a listed corpus -------------------------------- */

typedef struct reader {
    const pt_corpus *c;
    const char *field;
    pt_bpe *bpe;         /* pre-token boundaries (pt_bpe_boundary); only between windows */
    size_t line_max;     /* JSON Lines: the longest line, bytes */
    size_t memory;       /* cfg->memory, for the message */
    int src;             /* current source; c->nsrc when every one was read */
    int open;
    int fd;
    int fmt;
    /* bytes read and not yet used: buf[bpos, blen); buf is allocated
     * when the first source opens (text_part and next_line view it from
     * then on) and kept until reader_free */
    char *buf;
    size_t bpos, blen, bcap, scanned;
    int eof, in_doc;
    /* the source as opened (a regular file: its size and time), bytes read */
    long long size;      /* -1: not a regular file (a pipe) */
    struct timespec mtime;
    uint64_t nread;
    /* JSON Lines: the line number, its offset, and a document being cut */
    long lineno;
    uint64_t off;
    json_t *obj;         /* holds the document's text */
    const char *doc;
    size_t dlen, dat;
    uint64_t pending;    /* source bytes read, not yet counted in a chunk */
    int64_t docs;        /* documents met */
    uint64_t bytes;      /* their bytes */
} reader;

static void reader_close_src(reader *r)
{
    if (r->fd > 0) close(r->fd);
    r->fd = -1;
    r->open = 0;
    r->bpos = r->blen = r->scanned = 0;
    r->eof = r->in_doc = 0;
    json_decref(r->obj);
    r->obj = NULL;
    r->doc = NULL;
    r->src++;
}

static void reader_free(reader *r)
{
    if (r->open) reader_close_src(r);
    free(r->buf);
    r->buf = NULL;
    r->bcap = 0;
    json_decref(r->obj);
    r->obj = NULL;
}

static int reader_open_src(reader *r)
{
    const char *name = r->c->names[r->src];
    int std = !strcmp(name, "-");
    if (!r->buf) { /* the read buffer exists before anything points into it */
        if (!(r->buf = malloc(2 * CHUNK_BYTES))) return pt_fail(PT_ENOMEM, "prepare: out of memory reading %s", name);
        r->bcap = 2 * CHUNK_BYTES;
    }
    r->fmt = r->c->fmts[r->src];
    r->fd = std ? 0 : pt_open_regular(name, "corpus file");
    if (r->fd < 0) {
        int rc = r->fd;
        r->fd = -1;
        return rc;
    }
    r->open = 1;
    r->lineno = 0;
    r->off = 0;
    r->nread = 0;
    r->size = -1;
    /* a regular file must keep the size it was listed with until it is read */
    struct stat sb;
    if (fstat(r->fd, &sb) != 0) return pt_fail(PT_EIO, "cannot stat %s: %s", name, strerror(errno));
    if (S_ISREG(sb.st_mode)) {
        off_t at = std ? lseek(r->fd, 0, SEEK_CUR) : 0; /* standard input from a file may be read in part */
        r->size = (long long)sb.st_size - (at > 0 ? (long long)at : 0);
        r->mtime = sb.st_mtim;
        long long listed = r->c->sizes ? r->c->sizes[r->src] : -1;
        if (!std && listed >= 0 && listed != (long long)sb.st_size)
            return pt_fail(PT_EIO, "corpus file %s changed while prepare ran: %lld bytes when listed, %lld when opened "
                                   "to be read (nothing was written)", name, listed, (long long)sb.st_size);
    }
    return PT_OK;
}

/* At the end of a regular file: it must have been read to the size it had
 * when opened, and be unchanged (size and modification time) -- else the
 * tokens are not those of the file (a truncated or rewritten corpus). */
static int check_unchanged(reader *r)
{
    if (r->size < 0) return PT_OK;
    const char *name = r->c->names[r->src];
    struct stat sb;
    if (fstat(r->fd, &sb) != 0) return pt_fail(PT_EIO, "cannot stat %s: %s", name, strerror(errno));
    if ((long long)r->nread != r->size || sb.st_mtim.tv_sec != r->mtime.tv_sec ||
        sb.st_mtim.tv_nsec != r->mtime.tv_nsec || !S_ISREG(sb.st_mode) ||
        (!strcmp(name, "-") ? 0 : (long long)sb.st_size != r->size))
        return pt_fail(PT_EIO, "corpus file %s changed while it was read (%lld bytes when opened, %llu read, %lld "
                               "now%s): nothing was written", name, r->size, (unsigned long long)r->nread,
                       (long long)sb.st_size, (long long)r->nread == r->size ? ", modified" : "");
    return PT_OK;
}

/* Read more of the current source into buf: [bpos, blen) is moved to the
 * start, buf grows when full (to at most `max` bytes when that is larger
 * than its first size); r->eof at the end, after check_unchanged. */
static int reader_read(reader *r, size_t max)
{
    const char *name = r->c->names[r->src];
    if (r->bpos) {
        memmove(r->buf, r->buf + r->bpos, r->blen - r->bpos);
        r->blen -= r->bpos;
        r->bpos = 0;
    }
    if (r->blen == r->bcap) {
        size_t nc = r->bcap ? 2 * r->bcap : 2 * CHUNK_BYTES;
        if (r->bcap && nc > max) nc = max > r->bcap ? max : r->bcap + CHUNK_BYTES;
        char *b = realloc(r->buf, nc);
        if (!b) return pt_fail(PT_ENOMEM, "prepare: out of memory reading %s", name);
        r->buf = b;
        r->bcap = nc;
    }
    for (;;) {
        ssize_t got = read(r->fd, r->buf + r->blen, r->bcap - r->blen);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) return pt_fail(PT_EIO, "cannot read %s: %s", name, strerror(errno));
        if (got == 0) {
            r->eof = 1;
            return check_unchanged(r);
        }
        r->blen += (size_t)got;
        r->nread += (uint64_t)got;
        r->pending += (uint64_t)got;
        return PT_OK;
    }
}

/* Where to end a part of s[0, len) (s starts where the encoding may be cut)
 * of at least `want` bytes: the first safe_cut in [want, want + CUT_SLACK),
 * else, when len >= want + CUT_SLACK, a pre-token boundary (pt_bpe_boundary
 * from the last safe_cut before want, or from s); *cut 0: s is too short to
 * tell.  *scanned: bytes known to hold no safe_cut from want on (updated). */
static int find_cut(reader *r, const char *s, size_t len, size_t want, size_t *scanned, size_t *cut)
{
    *cut = 0;
    if (len <= want) return PT_OK;
    if (!pt_bpe_gpt2_pattern(r->bpe)) {
        /* another pattern (Llama 3's keeps punctuation and the line breaks after it together: "!\n" is
         * one pre-token): safe_cut is GPT-2's only; the first pre-token boundary at or after want */
        size_t at = 0;
        int rc = pt_bpe_boundary(r->bpe, s, len, want, &at);
        if (rc) return rc;
        if (!at && len >= want + PT_BPE_LOOKAHEAD) /* cannot happen */
            return pt_fail(PT_EINVAL, "prepare: no pre-token boundary in %zu bytes", len);
        *cut = at; /* 0: too short to tell yet */
        return PT_OK;
    }
    size_t lim = len < want + CUT_SLACK ? len : want + CUT_SLACK;
    *cut = safe_cut(s, lim, *scanned > want ? *scanned : want);
    if (*cut) return PT_OK;
    *scanned = lim;
    if (len < want + CUT_SLACK) return PT_OK;
    /* no safe place: a long pre-token, or text without ASCII white space */
    size_t from = safe_cut_before(s, want), at = 0;
    int rc = pt_bpe_boundary(r->bpe, s + from, len - from, want - from, &at);
    if (rc) return rc;
    if (!at) return pt_fail(PT_EINVAL, "prepare: no pre-token boundary in %zu bytes", len - from); /* cannot happen */
    *cut = from + at;
    return PT_OK;
}

/* Text: the next part of the current document, at least `want` bytes when
 * the source has them, cut where the encoding may be; 0 = the source is done. */
static int text_part(reader *r, chunk *c, size_t want, int *added)
{
    *added = 0;
    for (;;) {
        const char *s = r->buf + r->bpos;
        size_t avail = r->blen - r->bpos, cut = 0;
        int rc = find_cut(r, s, avail, want, &r->scanned, &cut);
        if (rc) return rc;
        if (cut || (r->eof && avail)) {
            if (!cut) cut = avail;
            rc = chunk_add(c, s, cut, !r->in_doc);
            if (rc) return rc;
            if (!r->in_doc) r->docs++;
            r->in_doc = 1;
            r->bytes += cut;
            r->bpos += cut;
            r->scanned = 0;
            *added = 1;
            return PT_OK;
        }
        if (r->eof) return PT_OK; /* nothing left */
        if ((rc = reader_read(r, 4 * CHUNK_BYTES))) return rc;
    }
}

/* JSON Lines: the next line, without its '\n', in *line [*len] (a view
 * into the read buffer, valid until the next read); *got 0 at the end of the
 * source.  A line over r->line_max bytes is refused before more of it is
 * read. */
static int next_line(reader *r, const char **line, size_t *len, int *got)
{
    const char *name = r->c->names[r->src];
    *got = 0;
    for (;;) {
        const char *s = r->buf + r->bpos;
        size_t avail = r->blen - r->bpos;
        const char *nl = avail > r->scanned ? memchr(s + r->scanned, '\n', avail - r->scanned) : NULL;
        size_t l = nl ? (size_t)(nl - s) : avail;
        if (l > r->line_max)
            return pt_fail(PT_EINVAL, "%s:%ld (byte %llu): a line of more than %zu bytes, the longest JSON Lines line "
                                      "read (a quarter of --memory, %zu bytes); give a larger --memory", name,
                           r->lineno + 1, (unsigned long long)r->off, r->line_max, r->memory);
        if (nl || (r->eof && avail)) {
            *line = s;
            *len = l;
            r->bpos += l + (nl ? 1 : 0);
            r->scanned = 0;
            *got = 1;
            return PT_OK;
        }
        if (r->eof) return PT_OK;
        r->scanned = avail;
        int rc = reader_read(r, r->line_max + 2 > 2 * CHUNK_BYTES ? r->line_max + 2 : 2 * CHUNK_BYTES);
        if (rc) return rc;
    }
}

/* JSON Lines: the next document (or the next part of a long one). */
static int jsonl_part(reader *r, chunk *c, size_t want, int *added)
{
    const char *name = r->c->names[r->src];
    *added = 0;
    while (!r->doc) {
        const char *ln;
        size_t l;
        int got, rc = next_line(r, &ln, &l, &got);
        if (rc) return rc;
        if (!got) return PT_OK; /* end of the source */
        r->lineno++;
        const uint64_t off = r->off;
        r->off += (uint64_t)l + 1;
        const char *nul = memchr(ln, 0, l);
        if (nul) return pt_fail(PT_EFORMAT, "%s (byte %llu): a NUL byte in JSON Lines", name,
                                (unsigned long long)(off + (uint64_t)(nul - ln)));
        size_t k = 0;
        while (k < l && (ln[k] == ' ' || ln[k] == '\t' || ln[k] == '\r')) k++;
        if (k == l) continue; /* blank */
        json_error_t je;
        json_t *o = json_loadb(ln, l, 0, &je);
        if (r->bcap > 4 * CHUNK_BYTES && r->blen - r->bpos < CHUNK_BYTES) { /* after a long line: give it back */
            memmove(r->buf, r->buf + r->bpos, r->blen - r->bpos);
            r->blen -= r->bpos;
            r->bpos = 0;
            char *b = realloc(r->buf, 2 * CHUNK_BYTES);
            if (b) {
                r->buf = b;
                r->bcap = 2 * CHUNK_BYTES;
            }
        }
        if (!o)
            return pt_fail(PT_EFORMAT, "%s:%ld (byte %llu): not JSON: %s", name, r->lineno,
                           (unsigned long long)(off + (je.position > 0 ? (uint64_t)je.position - 1 : 0)), je.text);
        int obj = json_is_object(o);
        json_t *v = obj ? json_object_get(o, r->field) : NULL;
        if (!json_is_string(v)) {
            json_decref(o);
            return pt_fail(PT_EFORMAT, "%s:%ld (byte %llu): %s '%s'", name, r->lineno, (unsigned long long)off,
                           obj ? "no string field" : "not a JSON object with a string field", r->field);
        }
        size_t dl = json_string_length(v);
        if (!dl) {
            json_decref(o);
            continue;
        }
        r->obj = o; /* the document's text stays in it until it is cut up */
        r->doc = json_string_value(v);
        r->dlen = dl;
        r->dat = 0;
        r->docs++;
        r->bytes += dl;
    }
    /* a document of at most a chunk goes whole; a longer one in parts cut where the encoding may be */
    size_t left = r->dlen - r->dat, cut = left;
    if (r->dlen > CHUNK_BYTES && left > want) {
        size_t scanned = 0, at = 0;
        int rc = find_cut(r, r->doc + r->dat, left, want, &scanned, &at);
        if (rc) return rc;
        if (at) cut = at;
    }
    int rc = chunk_add(c, r->doc + r->dat, cut, r->dat == 0);
    if (rc) return rc;
    r->dat += cut;
    *added = 1;
    if (r->dat == r->dlen) {
        json_decref(r->obj);
        r->obj = NULL;
        r->doc = NULL;
    }
    return PT_OK;
}

/* Fill chunk c with parts of documents up to about CHUNK_BYTES; *more = 0
 * when the corpus is exhausted. */
static int reader_fill(reader *r, chunk *c, int *more)
{
    *more = 1;
    while (c->len < CHUNK_BYTES) {
        if (r->src >= r->c->nsrc) {
            *more = 0;
            break;
        }
        int rc;
        if (!r->open && (rc = reader_open_src(r))) return rc;
        int added = 0;
        size_t want = CHUNK_BYTES - c->len;
        rc = r->fmt == PT_CORPUS_JSONL ? jsonl_part(r, c, want, &added) : text_part(r, c, want, &added);
        if (rc) return rc;
        if (!added) reader_close_src(r);
    }
    c->src_bytes += r->pending;
    r->pending = 0;
    return PT_OK;
}

/* ---- encoding a window on threads ------------------------------------------ */

typedef struct pool {
    pt_bpe **bpe;        /* [threads], loaded by the first window's workers */
    int threads;
    const char *vocab_dir;
    int eot;
    /* the window */
    chunk *chunks;
    int nchunks, next;
    pthread_mutex_t mu;
    int rc;
    char err[512];
    /* progress */
    const pt_prepare_cfg *cfg;
    uint64_t done, total, reported, tokens;
    double t0;
} pool;

static void pool_error(pool *p, int rc)
{
    pthread_mutex_lock(&p->mu);
    if (!p->rc) {
        p->rc = rc;
        snprintf(p->err, sizeof p->err, "%s", pt_errmsg());
    }
    pthread_mutex_unlock(&p->mu);
}

static int encode_chunk(pt_bpe *t, int eot, chunk *c)
{
    /* at most one token per byte, and one "<|endoftext|>" per segment */
    size_t cap = c->len + (size_t)c->nsegs;
    c->ids = malloc(sizeof *c->ids * (cap ? cap : 1));
    if (!c->ids) return pt_fail(PT_ENOMEM, "prepare: out of memory for %zu token ids", cap);
    c->n = 0;
    for (int i = 0; i < c->nsegs; i++) {
        seg *s = &c->segs[i];
        size_t before = c->n;
        if (s->doc_start) c->ids[c->n++] = (uint32_t)eot;
        int32_t *ids = NULL;
        size_t n = 0;
        int rc = pt_bpe_encode(t, c->text + s->off, s->len, &ids, &n);
        if (rc) return rc;
        if (c->n + n > cap) { /* cannot happen: byte-level BPE gives at most one id per byte */
            free(ids);
            return pt_fail(PT_EINVAL, "prepare: %zu bytes encoded to %zu ids", s->len, n);
        }
        for (size_t k = 0; k < n; k++) c->ids[c->n++] = (uint32_t)ids[k]; /* ids < the vocabulary */
        free(ids);
        s->n = c->n - before;
    }
    free(c->text); /* the text is no longer needed */
    c->text = NULL;
    c->cap = 0;
    uint32_t *shrunk = realloc(c->ids, sizeof *c->ids * (c->n ? c->n : 1));
    if (shrunk) c->ids = shrunk;
    return PT_OK;
}

typedef struct worker_arg { pool *p; int slot; } worker_arg;

static void *worker(void *arg)
{
    worker_arg *a = arg;
    pool *p = a->p;
    if (!p->bpe[a->slot]) {
        int rc = pt_bpe_load(&p->bpe[a->slot], p->vocab_dir);
        if (rc) {
            pool_error(p, rc);
            return NULL;
        }
    }
    for (;;) {
        pthread_mutex_lock(&p->mu);
        int k = p->rc ? p->nchunks : p->next++;
        pthread_mutex_unlock(&p->mu);
        if (k >= p->nchunks) break;
        chunk *c = &p->chunks[k];
        int rc = encode_chunk(p->bpe[a->slot], p->eot, c);
        if (rc) {
            pool_error(p, rc);
            break;
        }
        pthread_mutex_lock(&p->mu);
        p->done += c->src_bytes;
        p->tokens += c->n;
        if (p->cfg->progress && p->done - p->reported >= PROGRESS_BYTES) {
            p->reported = p->done;
            pt_prepare_progress pr = { p->done, p->total, p->tokens, pt_now() - p->t0 };
            p->cfg->progress(&pr, p->cfg->arg);
        }
        pthread_mutex_unlock(&p->mu);
    }
    return NULL;
}

static int encode_window(pool *p)
{
    p->next = 0;
    int n = p->threads < p->nchunks ? p->threads : p->nchunks, started = 0;
    pthread_t th[64];
    worker_arg args[64];
    if (n > 64) n = 64;
    for (int i = 0; i < n; i++) args[i] = (worker_arg){ p, i };
    if (n > 1)
        for (; started < n; started++)
            if (pthread_create(&th[started], NULL, worker, &args[started])) break;
    if (started == 0) worker(&args[0]); /* one thread, or none could start: here */
    for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
    return p->rc ? pt_fail(p->rc, "%s", p->err) : PT_OK;
}

/* ---- the document starts, on disk ------------------------------------------ */

typedef struct starts {
    int fd;
    uint64_t buf[4096];
    int n;
    int64_t count;
} starts;

static int starts_open(starts *s, const char *dir)
{
    s->n = 0;
    s->count = 0;
#ifdef O_TMPFILE
    s->fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
#else
    s->fd = -1;
#endif
    if (s->fd < 0) { /* a named temporary, removed at once */
        size_t l = strlen(dir) + 40;
        char *p = malloc(l);
        if (!p) return pt_fail(PT_ENOMEM, "out of memory");
        snprintf(p, l, "%s/.ptrain-prepare.XXXXXX", dir);
        s->fd = mkostemp(p, O_CLOEXEC);
        int e = errno;
        if (s->fd >= 0) unlink(p);
        free(p);
        if (s->fd < 0) return pt_fail(PT_EIO, "cannot create a temporary file in %s: %s", dir, strerror(e));
    }
    return PT_OK;
}

static int starts_flush(starts *s)
{
    if (s->n && pt_write_all(s->fd, s->buf, sizeof s->buf[0] * (size_t)s->n))
        return pt_fail(PT_EIO, "cannot write the document list (a temporary file): %s", strerror(errno));
    s->n = 0;
    return PT_OK;
}

static int starts_add(starts *s, uint64_t v)
{
    s->buf[s->n++] = v;
    s->count++;
    return s->n == (int)(sizeof s->buf / sizeof s->buf[0]) ? starts_flush(s) : PT_OK;
}

static int starts_get(starts *s, int64_t i, uint64_t *v)
{
    int rc = starts_flush(s);
    if (rc) return rc;
    if (pread(s->fd, v, sizeof *v, (off_t)(i * (int64_t)sizeof *v)) != (ssize_t)sizeof *v)
        return pt_fail(PT_EIO, "cannot read the document list (a temporary file): %s", strerror(errno));
    return PT_OK;
}

/* ---- the split --------------------------------------------------------------- */

/* Where the validation split starts in the training stream of n tokens and
 * ndocs documents (prepare.h; the rule of ptrain-data prepare since it
 * first split): the last round(ndocs * F) documents, at least one when
 * F > 0, never all; one document: its last round(n * F) tokens. */
static int choose_split(double F, uint64_t n, int64_t ndocs, int (*start_of)(void *, int64_t, uint64_t *),
                        void *arg, uint64_t *at, pt_prepare_result *res)
{
    if (ndocs > 1) {
        int64_t k = (int64_t)floor((double)ndocs * F + 0.5);
        if (k == 0 && F > 0) k = 1;
        if (k >= ndocs) k = ndocs - 1;
        res->held = PT_HELD_DOCS;
        res->held_docs = k;
        if (k == 0) {
            *at = n;
            return PT_OK;
        }
        return start_of(arg, ndocs - k, at);
    }
    uint64_t nval = (uint64_t)floor((double)n * F + 0.5);
    if (nval > n) nval = n;
    *at = n - nval;
    res->held = PT_HELD_TOKENS;
    res->held_docs = 0;
    return PT_OK;
}

static int starts_of_file(void *arg, int64_t i, uint64_t *v) { return starts_get(arg, i, v); }

static int check_cfg(const pt_prepare_cfg *cfg)
{
    if (!cfg || !cfg->vocab_dir || !cfg->out_dir) return pt_fail(PT_EINVAL, "pt_prepare: NULL argument");
    if (cfg->threads < 1 || cfg->threads > 1024) return pt_fail(PT_EINVAL, "threads=%d: need 1..1024", cfg->threads);
    if (!(cfg->val_fraction >= 0 && cfg->val_fraction < 1))
        return pt_fail(PT_EINVAL, "validation fraction %g is not in [0, 1)", cfg->val_fraction);
    return PT_OK;
}

int pt_prepare(const pt_prepare_cfg *cfg, const pt_corpus *train, const pt_corpus *val, pt_prepare_result *res)
{
    int rc = check_cfg(cfg);
    if (rc) return rc;
    if (!train || !res) return pt_fail(PT_EINVAL, "pt_prepare: NULL argument");
    if (cfg->memory < MIN_MEMORY)
        return pt_fail(PT_EINVAL, "memory budget of %zu bytes is below the %zu MiB a window of chunks needs",
                       cfg->memory, MIN_MEMORY >> 20);
    memset(res, 0, sizeof *res);
    const double t0 = pt_now();
    const int have_val = val && val->nsrc > 0;
    const size_t window = cfg->memory / 3;
    pool p = { 0 };
    p.threads = cfg->threads < 64 ? cfg->threads : 64;
    p.vocab_dir = cfg->vocab_dir;
    p.cfg = cfg;
    p.t0 = t0;
    pthread_mutex_init(&p.mu, NULL);
    for (int k = 0; k < (have_val ? 2 : 1); k++) {
        const pt_corpus *c = k ? val : train;
        for (int i = 0; i < c->nsrc; i++) p.total += c->sizes[i] > 0 ? (uint64_t)c->sizes[i] : 0;
    }
    for (int i = 0; i < train->nsrc; i++)
        if (train->sizes[i] < 0 && !strcmp(train->names[i], "-")) {
            struct stat sb; /* standard input redirected from a file has a size */
            if (fstat(0, &sb) == 0 && S_ISREG(sb.st_mode)) p.total += (uint64_t)sb.st_size;
            else p.total = 0, i = train->nsrc;
        }
    p.bpe = calloc((size_t)p.threads, sizeof *p.bpe);
    pt_shard_writer *w = NULL;
    starts st = { .fd = -1 };
    reader r = { .fd = -1 };
    if (!p.bpe) {
        rc = pt_fail(PT_ENOMEM, "out of memory");
        goto out;
    }
    /* the vocabulary (and the first worker's tokenizer) */
    if ((rc = pt_bpe_load(&p.bpe[0], cfg->vocab_dir))) goto out;
    p.eot = pt_bpe_eot(p.bpe[0]);
    const uint32_t vocab = (uint32_t)pt_bpe_vocab_size(p.bpe[0]);
    if (p.eot < 0) {
        rc = pt_fail(PT_EINVAL, "the vocabulary in %s has no <|endoftext|> token to separate documents", cfg->vocab_dir);
        goto out;
    }
    /* the shards hold 2-byte ids up to 65536 (GPT-2), else 4-byte ones (Llama 3; pt_shard_writer_open) */
    if ((rc = pt_shard_writer_open(&w, cfg->out_dir, cfg->shard_tokens, vocab, (uint32_t)p.eot))) goto out;
    if (!have_val && (rc = starts_open(&st, cfg->out_dir))) goto out;
    for (int k = 0; k < (have_val ? 2 : 1) && !rc; k++) {
        memset(&r, 0, sizeof r);
        r.fd = -1;
        r.c = k ? val : train;
        r.field = cfg->field ? cfg->field : "text";
        r.bpe = p.bpe[0]; /* the workers' slot 0: the reader runs between windows */
        r.memory = cfg->memory;
        r.line_max = cfg->memory / 4;
        int more = 1;
        while (more && !rc) {
            /* a window of chunks */
            int cap = 0;
            size_t bytes = 0;
            p.nchunks = 0;
            while (more && bytes < window) {
                if (p.nchunks == cap) {
                    int nc = cap ? 2 * cap : 64;
                    chunk *v = realloc(p.chunks, sizeof *v * (size_t)nc);
                    if (!v) {
                        rc = pt_fail(PT_ENOMEM, "out of memory");
                        break;
                    }
                    p.chunks = v;
                    cap = nc;
                }
                chunk *c = &p.chunks[p.nchunks];
                memset(c, 0, sizeof *c);
                p.nchunks++;
                if ((rc = reader_fill(&r, c, &more))) break;
                bytes += c->len;
                if (!c->len) chunk_free(&p.chunks[--p.nchunks]);
            }
            if (!rc && p.nchunks) rc = encode_window(&p);
            /* in order into the set */
            for (int i = 0; i < p.nchunks; i++) {
                chunk *c = &p.chunks[i];
                if (!rc && !have_val) {
                    uint64_t at = pt_shard_writer_tokens(w, PT_SPLIT_TRAIN);
                    for (int j = 0; j < c->nsegs && !rc; j++) {
                        if (c->segs[j].doc_start) rc = starts_add(&st, at);
                        at += c->segs[j].n;
                    }
                }
                if (!rc) rc = pt_shard_writer_add32(w, k, c->ids, c->n);
                chunk_free(c);
            }
        }
        res->docs[k] = r.docs;
        res->bytes += r.bytes;
        reader_free(&r);
        memset(&r, 0, sizeof r);
        r.fd = -1;
    }
    if (rc) goto out;
    if (cfg->progress && p.reported != p.done) {
        pt_prepare_progress pr = { p.done, p.total, p.tokens, pt_now() - t0 };
        cfg->progress(&pr, cfg->arg);
    }
    if (res->docs[0] == 0) {
        rc = pt_fail(PT_EINVAL, "the inputs hold no document (empty files, or JSON Lines with empty '%s' fields)",
                     cfg->field ? cfg->field : "text");
        goto out;
    }
    if (have_val && res->docs[1] == 0) {
        rc = pt_fail(PT_EINVAL, "the --val-file inputs hold no document");
        goto out;
    }
    if (have_val) {
        res->held = PT_HELD_FILES;
        res->held_docs = res->docs[1];
    } else {
        uint64_t at;
        rc = choose_split(cfg->val_fraction, pt_shard_writer_tokens(w, PT_SPLIT_TRAIN), res->docs[0], starts_of_file,
                          &st, &at, res);
        if (!rc) rc = pt_shard_writer_split(w, at);
        if (rc) goto out;
    }
    res->tokens[0] = pt_shard_writer_tokens(w, PT_SPLIT_TRAIN);
    res->tokens[1] = pt_shard_writer_tokens(w, PT_SPLIT_VAL);
    res->seconds = pt_now() - t0;
    rc = pt_shard_writer_commit(w, res->names, res->nfiles);
    w = NULL;
out:
    pt_shard_writer_abort(w);
    reader_free(&r);
    for (int i = 0; i < p.nchunks; i++) chunk_free(&p.chunks[i]);
    free(p.chunks);
    for (int i = 0; p.bpe && i < p.threads; i++) pt_bpe_free(p.bpe[i]);
    free(p.bpe);
    if (st.fd >= 0) close(st.fd);
    pthread_mutex_destroy(&p.mu);
    return rc;
}

/* ---- the same from ids in memory ------------------------------------------ */

static int starts_of_array(void *arg, int64_t i, uint64_t *v)
{
    *v = ((const size_t *)arg)[i];
    return PT_OK;
}

/* ids (each < vocab) into split k, a block at a time */
static int add_ids(pt_shard_writer *w, int k, const int32_t *ids, size_t n, uint32_t vocab)
{
    uint32_t buf[1 << 14];
    for (size_t i = 0; i < n;) {
        size_t m = n - i < sizeof buf / sizeof buf[0] ? n - i : sizeof buf / sizeof buf[0];
        for (size_t j = 0; j < m; j++) {
            if (ids[i + j] < 0 || (uint32_t)ids[i + j] >= vocab)
                return pt_fail(PT_EINVAL, "token %zu has id %ld, outside [0, %u)", i + j, (long)ids[i + j], vocab);
            buf[j] = (uint32_t)ids[i + j];
        }
        int rc = pt_shard_writer_add32(w, k, buf, m);
        if (rc) return rc;
        i += m;
    }
    return PT_OK;
}

int pt_prepare_write(const pt_prepare_cfg *cfg, uint32_t vocab, uint32_t eot, const int32_t *ids, size_t n,
                     const size_t *doc_start, int64_t ndocs, const int32_t *vids, size_t nv, int64_t nval_docs,
                     pt_prepare_result *res)
{
    int rc = check_cfg(cfg);
    if (rc) return rc;
    if (!res || (!ids && n) || (!doc_start && ndocs > 1) || (!vids && nv))
        return pt_fail(PT_EINVAL, "pt_prepare_write: NULL argument");
    memset(res, 0, sizeof *res);
    const double t0 = pt_now();
    pt_shard_writer *w = NULL;
    if ((rc = pt_shard_writer_open(&w, cfg->out_dir, cfg->shard_tokens, vocab, eot))) return rc;
    rc = add_ids(w, PT_SPLIT_TRAIN, ids, n, vocab);
    res->docs[0] = ndocs;
    if (!rc && nval_docs) {
        rc = add_ids(w, PT_SPLIT_VAL, vids, nv, vocab);
        res->docs[1] = nval_docs;
        res->held = PT_HELD_FILES;
        res->held_docs = nval_docs;
    } else if (!rc) {
        uint64_t at;
        rc = choose_split(cfg->val_fraction, n, ndocs, starts_of_array, (void *)doc_start, &at, res);
        if (!rc) rc = pt_shard_writer_split(w, at);
    }
    if (rc) {
        pt_shard_writer_abort(w);
        return rc;
    }
    res->tokens[0] = pt_shard_writer_tokens(w, PT_SPLIT_TRAIN);
    res->tokens[1] = pt_shard_writer_tokens(w, PT_SPLIT_VAL);
    res->seconds = pt_now() - t0;
    return pt_shard_writer_commit(w, res->names, res->nfiles);
}
