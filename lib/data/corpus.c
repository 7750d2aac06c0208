/* SPDX-License-Identifier: MIT */
/* Corpus input and parallel BPE encoding (see corpus.h). */
#define _GNU_SOURCE
#include "data/corpus.h"
#include "core/core.h"
#include "core/file.h"
#include "data/bpe.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int grow(void **v, int *cap, int need, size_t elem)
{
    if (need <= *cap) return 0;
    int nc = *cap ? *cap * 2 : 16;
    while (nc < need) nc *= 2;
    void *p = realloc(*v, (size_t)nc * elem);
    if (!p) return -1;
    *v = p;
    *cap = nc;
    return 0;
}

static int add_doc(pt_corpus *c, int src, const char *text, size_t len, size_t off, long line, int owned)
{
    if (grow((void **)&c->docs, &c->cap_docs, c->ndocs + 1, sizeof *c->docs)) {
        if (owned) free((char *)text);
        return pt_fail(PT_ENOMEM, "corpus: out of memory for document %d", c->ndocs + 1);
    }
    c->docs[c->ndocs++] = (pt_corpus_doc){text, len, src, off, line, owned};
    c->bytes += len;
    return PT_OK;
}

static int is_jsonl_name(const char *p)
{
    size_t n = strlen(p);
    return (n > 6 && !strcmp(p + n - 6, ".jsonl")) || (n > 7 && !strcmp(p + n - 7, ".ndjson"));
}

/* One JSON object per line; its string `field` is a document. */
static int split_jsonl(pt_corpus *c, int src, const char *field)
{
    const char *buf = c->bufs[src], *name = c->names[src];
    size_t len = strlen(buf), off = 0;
    long line = 0;
    while (off < len) {
        const char *s = buf + off, *nl = memchr(s, '\n', len - off);
        size_t l = nl ? (size_t)(nl - s) : len - off;
        line++;
        size_t k = 0;
        while (k < l && (s[k] == ' ' || s[k] == '\t' || s[k] == '\r')) k++;
        if (k < l) {
            json_error_t je;
            json_t *o = json_loadb(s, l, 0, &je);
            if (!o)
                return pt_fail(PT_EFORMAT, "%s:%ld (byte %zu): not JSON: %s", name, line,
                               off + (je.position > 0 ? (size_t)je.position - 1 : 0), je.text);
            int obj = json_is_object(o);
            json_t *v = obj ? json_object_get(o, field) : NULL;
            if (!json_is_string(v)) {
                json_decref(o);
                return pt_fail(PT_EFORMAT, "%s:%ld (byte %zu): %s '%s'", name, line, off,
                               obj ? "no string field" : "not a JSON object with a string field", field);
            }
            size_t dl = json_string_length(v);
            if (dl) {
                char *d = malloc(dl + 1);
                if (!d) { json_decref(o); return pt_fail(PT_ENOMEM, "%s:%ld: out of memory", name, line); }
                memcpy(d, json_string_value(v), dl + 1);
                int rc = add_doc(c, src, d, dl, off, line, 1);
                if (rc) { json_decref(o); return rc; }
            }
            json_decref(o);
        }
        off += l + (nl ? 1 : 0);
    }
    return PT_OK;
}

static int add_source(pt_corpus *c, const char *path, char *buf, size_t len, pt_corpus_format fmt, const char *field,
                      long long size)
{
    /* names, bufs, fmts and sizes share cap_src: grow names, then the others to the same size */
    if (grow((void **)&c->names, &c->cap_src, c->nsrc + 1, sizeof *c->names)) goto oom;
    char **nb = realloc(c->bufs, (size_t)c->cap_src * sizeof *nb);
    if (!nb) goto oom;
    c->bufs = nb;
    pt_corpus_format *nf = realloc(c->fmts, (size_t)c->cap_src * sizeof *nf);
    if (!nf) goto oom;
    c->fmts = nf;
    long long *ns = realloc(c->sizes, (size_t)c->cap_src * sizeof *ns);
    if (!ns) goto oom;
    c->sizes = ns;
    char *name = strdup(path);
    if (!name) goto oom;
    int src = c->nsrc++;
    if (fmt == PT_CORPUS_AUTO) fmt = strcmp(path, "-") && is_jsonl_name(path) ? PT_CORPUS_JSONL : PT_CORPUS_TEXT;
    c->names[src] = name;
    c->bufs[src] = buf;
    c->fmts[src] = fmt;
    c->sizes[src] = size;
    if (c->listing) return PT_OK;
    if (fmt == PT_CORPUS_JSONL) {
        if (strlen(buf) != len)
            return pt_fail(PT_EFORMAT, "%s (byte %zu): a NUL byte in JSON Lines", path, strlen(buf));
        return split_jsonl(c, src, field);
    }
    return len ? add_doc(c, src, buf, len, 0, 0, 0) : PT_OK;
oom:
    free(buf);
    return pt_fail(PT_ENOMEM, "corpus: out of memory adding %s", path);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Record a directory entry passed over: its path and why (a printf format) */
__attribute__((format(printf, 3, 4))) static int skip(pt_corpus *c, const char *path, const char *fmt, ...)
{
    char why[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    if (grow((void **)&c->skipped, &c->cap_skipped, c->nskipped + 1, sizeof *c->skipped))
        return pt_fail(PT_ENOMEM, "corpus: out of memory");
    char *p = strdup(path), *w = strdup(why);
    if (!p || !w) {
        free(p);
        free(w);
        return pt_fail(PT_ENOMEM, "corpus: out of memory");
    }
    c->skipped[c->nskipped++] = (pt_corpus_skip){ p, w };
    return PT_OK;
}

static const char *kind_of(mode_t m)
{
    if (S_ISFIFO(m)) return "a FIFO";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    if (S_ISSOCK(m)) return "a socket";
    return "not a regular file or directory";
}

/* The directories of one walk: those entered (device and inode, each read
 * once) and how deep the current one is on the path from the top. */
typedef struct walk {
    struct seen { dev_t dev; ino_t ino; int depth; char *path; } *v;
    int n, cap;
} walk;

static int add_dir(pt_corpus *c, const char *path, pt_corpus_format fmt, const char *field, int depth, walk *w);

/* A subdirectory (`linked`: reached through a symbolic link): entered
 * unless it is one of the directories being read (a loop) or was read
 * already (through another link), so every directory is read once. */
static int enter_dir(pt_corpus *c, const char *p, const struct stat *st, int linked, pt_corpus_format fmt,
                     const char *field, int depth, walk *w)
{
    const char *what = linked ? "a symbolic link to" : "the directory";
    for (int k = 0; k < w->n; k++)
        if (w->v[k].dev == st->st_dev && w->v[k].ino == st->st_ino)
            return w->v[k].depth >= 0
                       ? skip(c, p, "%s %s, a directory that contains it (a directory loop)", what, w->v[k].path)
                       : skip(c, p, "%s %s, a directory already read", what, w->v[k].path);
    return add_dir(c, p, fmt, field, depth + 1, w);
}

static int add_dir(pt_corpus *c, const char *path, pt_corpus_format fmt, const char *field, int depth, walk *w)
{
    if (depth > 64) return pt_fail(PT_EIO, "%s: directories nested deeper than 64 levels", path);
    DIR *d = opendir(path);
    if (!d) return pt_fail(PT_EIO, "cannot read directory %s: %s", path, strerror(errno));
    struct stat ds;
    int me = w->n;
    if (fstat(dirfd(d), &ds) != 0) {
        int e = errno;
        closedir(d);
        return pt_fail(PT_EIO, "cannot stat directory %s: %s", path, strerror(e));
    }
    if (grow((void **)&w->v, &w->cap, w->n + 1, sizeof *w->v) || !(w->v[me].path = strdup(path))) {
        closedir(d);
        return pt_fail(PT_ENOMEM, "corpus: out of memory listing %s", path);
    }
    w->v[me] = (struct seen){ ds.st_dev, ds.st_ino, depth, w->v[me].path };
    w->n++;
    char **names = NULL;
    int n = 0, cap = 0, rc = PT_OK;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        if (grow((void **)&names, &cap, n + 1, sizeof *names) || !(names[n] = strdup(e->d_name))) {
            rc = pt_fail(PT_ENOMEM, "corpus: out of memory listing %s", path);
            break;
        }
        n++;
    }
    closedir(d);
    if (!rc && n > 1) qsort(names, (size_t)n, sizeof *names, cmp_str); /* names is NULL when n == 0 */
    for (int i = 0; i < n && !rc; i++) {
        size_t l = strlen(path) + strlen(names[i]) + 2;
        char *p = malloc(l);
        if (!p) { rc = pt_fail(PT_ENOMEM, "corpus: out of memory"); break; }
        snprintf(p, l, "%s/%s", path, names[i]);
        struct stat st;
        if (lstat(p, &st)) rc = pt_fail(PT_EIO, "cannot stat %s: %s", p, strerror(errno));
        else if (S_ISDIR(st.st_mode)) rc = enter_dir(c, p, &st, 0, fmt, field, depth, w);
        else if (S_ISREG(st.st_mode)) rc = pt_corpus_add(c, p, fmt, field);
        else if (!S_ISLNK(st.st_mode)) rc = skip(c, p, "%s, not a regular file", kind_of(st.st_mode));
        else if (stat(p, &st) != 0) {
            /* the link's target, for the message (readlink does not follow) */
            int e = errno;
            char to[256];
            ssize_t tl = readlink(p, to, sizeof to - 1);
            if (tl < 0) tl = 0;
            to[tl] = '\0';
            if (e == ENOENT) rc = skip(c, p, "a broken symbolic link (to '%s', which does not exist)", to);
            else if (e == ELOOP) rc = skip(c, p, "a symbolic link loop (to '%s')", to);
            else rc = skip(c, p, "a symbolic link to '%s', which cannot be examined: %s", to, strerror(e));
        }
        /* symbolic links are followed for reading only (Hugging Face's hub
         * cache, git-annex and DVC lay corpora out as links into a store) */
        else if (S_ISREG(st.st_mode)) rc = pt_corpus_add(c, p, fmt, field);
        else if (S_ISDIR(st.st_mode)) rc = enter_dir(c, p, &st, 1, fmt, field, depth, w);
        else rc = skip(c, p, "a symbolic link to %s, not a regular file", kind_of(st.st_mode));
        free(p);
    }
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
    w->v[me].depth = -1; /* read: no longer an ancestor */
    return rc;
}

/* Bytes of physical memory (0: unknown). */
static unsigned long long phys_memory(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? (unsigned long long)pages * (unsigned long long)page : 0;
}

/* All of corpus file `path`, sized before it is read: one larger than the
 * machine's memory is refused at once (PT_EINVAL), and the file must end at
 * the size it had when opened, unchanged (PT_EIO): a file truncated or
 * rewritten while it is read would give the tokens of no file. */
static int read_whole(const char *path, char **buf, size_t *len)
{
    *buf = NULL;
    *len = 0;
    int fd = pt_open_regular(path, "corpus file");
    if (fd < 0) return fd;
    struct stat a, b;
    if (fstat(fd, &a) != 0) {
        int e = errno;
        close(fd);
        return pt_fail(PT_EIO, "cannot stat corpus file %s: %s", path, strerror(e));
    }
    unsigned long long mem = phys_memory(), size = a.st_size > 0 ? (unsigned long long)a.st_size : 0;
    if ((mem && size > mem) || size >= SIZE_MAX / 2) {
        close(fd);
        return pt_fail(PT_EINVAL, "corpus file %s is %llu bytes, more than the %llu bytes of this machine's memory "
                                  "that reading it whole needs (stream it: ptrain-data prepare without --in-memory)",
                       path, size, mem);
    }
    char *p = malloc((size_t)size + 2); /* one byte more: a file that grew */
    if (!p) {
        close(fd);
        return pt_fail(PT_ENOMEM, "out of memory reading corpus file %s (%llu bytes)", path, size);
    }
    size_t n = 0;
    while (n <= size) {
        ssize_t got = read(fd, p + n, (size_t)size + 1 - n);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) {
            int e = errno;
            free(p);
            close(fd);
            return pt_fail(PT_EIO, "error reading corpus file %s: %s", path, strerror(e));
        }
        if (got == 0) break;
        n += (size_t)got;
    }
    int changed = fstat(fd, &b) != 0 || n != size || (unsigned long long)b.st_size != size ||
                  b.st_mtim.tv_sec != a.st_mtim.tv_sec || b.st_mtim.tv_nsec != a.st_mtim.tv_nsec;
    close(fd);
    if (changed) {
        free(p);
        return pt_fail(PT_EIO, "corpus file %s changed while it was read (%llu bytes when opened, %s%zu read)", path,
                       size, n > size ? "more than " : "", n > size ? (size_t)size : n);
    }
    p[n] = '\0';
    *buf = p;
    *len = n;
    return PT_OK;
}

int pt_corpus_add(pt_corpus *c, const char *path, pt_corpus_format fmt, const char *field)
{
    if (!c || !path) return pt_fail(PT_EINVAL, "pt_corpus_add: NULL argument");
    if (!field) field = "text";
    char *buf = NULL;
    size_t len = 0;
    int rc;
    if (!strcmp(path, "-")) {
        for (int i = 0; i < c->nsrc; i++)
            if (!strcmp(c->names[i], "-")) return pt_fail(PT_EIO, "standard input ('-') given twice");
        if (c->listing) return add_source(c, "-", NULL, 0, fmt, field, -1);
        rc = pt_read_file(NULL, &buf, &len);
        if (rc) return rc;
        return add_source(c, "-", buf, len, fmt, field, (long long)len);
    }
    struct stat st;
    if (stat(path, &st)) return pt_fail(PT_EIO, "cannot open %s: %s", path, strerror(errno));
    if (S_ISDIR(st.st_mode)) {
        walk w = { 0 };
        rc = add_dir(c, path, fmt, field, 0, &w);
        for (int k = 0; k < w.n; k++) free(w.v[k].path);
        free(w.v);
        return rc;
    }
    if (c->listing) { /* opened once: a FIFO, device or unreadable file is refused now, as when read */
        int fd = pt_open_regular(path, "corpus file");
        if (fd < 0) return fd;
        struct stat fs;
        long long size = fstat(fd, &fs) == 0 ? (long long)fs.st_size : (long long)st.st_size;
        close(fd);
        return add_source(c, path, NULL, 0, fmt, field, size);
    }
    rc = read_whole(path, &buf, &len);
    if (rc) return rc;
    return add_source(c, path, buf, len, fmt, field, (long long)len);
}

int pt_corpus_list(pt_corpus *c, const char *path, pt_corpus_format fmt)
{
    if (!c || !path) return pt_fail(PT_EINVAL, "pt_corpus_list: NULL argument");
    if (c->ndocs) return pt_fail(PT_EINVAL, "pt_corpus_list: the corpus already holds documents");
    c->listing = 1;
    return pt_corpus_add(c, path, fmt, NULL);
}

void pt_corpus_free(pt_corpus *c)
{
    if (!c) return;
    for (int i = 0; i < c->ndocs; i++)
        if (c->docs[i].owned) free((char *)c->docs[i].text);
    for (int i = 0; i < c->nsrc; i++) {
        free(c->names[i]);
        free(c->bufs[i]);
    }
    for (int i = 0; i < c->nskipped; i++) {
        free(c->skipped[i].path);
        free(c->skipped[i].why);
    }
    free(c->skipped);
    free(c->fmts);
    free(c->sizes);
    free(c->docs);
    free(c->names);
    free(c->bufs);
    memset(c, 0, sizeof *c);
}

/* ---- encoding ------------------------------------------------------------ */

#define PIECE_BYTES ((size_t)1 << 20)
#define PROGRESS_BYTES ((size_t)64 << 20)

typedef struct piece {
    int doc;             /* document it belongs to */
    const char *text;
    size_t len;
    int32_t *ids;        /* encoded, malloc'd */
    size_t n;
} piece;

typedef struct job {
    piece *pieces;
    int npieces;
    const char *vocab_dir;
    pthread_mutex_t mu;
    int next;            /* next piece to take */
    size_t done, total, reported;
    int rc;              /* first error */
    char err[256];
    pt_corpus_progress progress;
    void *arg;
} job;

/* Where the GPT-2 pre-tokenizer always splits: before a newline that
 * follows a printable ASCII byte (no pre-token pattern spans a
 * non-space followed by white space, and the engine's matches from there
 * on look only forward). */
static size_t cut_at(const char *s, size_t len, size_t from)
{
    for (size_t i = from; i < len; i++)
        if (s[i] == '\n' && i > 0 && s[i - 1] > ' ' && s[i - 1] < 0x7f) return i;
    return len;
}

static void *worker(void *p)
{
    job *j = p;
    pt_bpe *t = NULL;
    int rc = pt_bpe_load(&t, j->vocab_dir);
    if (rc) {
        pthread_mutex_lock(&j->mu);
        if (!j->rc) { j->rc = rc; snprintf(j->err, sizeof j->err, "%s", pt_errmsg()); }
        pthread_mutex_unlock(&j->mu);
        return NULL;
    }
    for (;;) {
        pthread_mutex_lock(&j->mu);
        int k = j->rc ? j->npieces : j->next++;
        pthread_mutex_unlock(&j->mu);
        if (k >= j->npieces) break;
        piece *pc = &j->pieces[k];
        rc = pt_bpe_encode(t, pc->text, pc->len, &pc->ids, &pc->n);
        pthread_mutex_lock(&j->mu);
        if (rc && !j->rc) { j->rc = rc; snprintf(j->err, sizeof j->err, "%s", pt_errmsg()); }
        j->done += pc->len;
        if (j->progress && j->done - j->reported >= PROGRESS_BYTES) {
            j->reported = j->done;
            j->progress(j->done, j->total, j->arg);
        }
        pthread_mutex_unlock(&j->mu);
    }
    pt_bpe_free(t);
    return NULL;
}

int pt_corpus_encode(const pt_corpus *c, const char *vocab_dir, int threads, int32_t **ids, size_t *n,
                     size_t *doc_start, pt_corpus_progress progress, void *arg)
{
    *ids = NULL;
    *n = 0;
    if (!c || c->ndocs < 1) return pt_fail(PT_EINVAL, "the corpus has no documents (every input was empty)");
    if (threads < 1 || threads > 1024) return pt_fail(PT_EINVAL, "threads=%d: need 1..1024", threads);
    /* the end-of-text id, from a tokenizer of our own */
    pt_bpe *t0 = NULL;
    int rc = pt_bpe_load(&t0, vocab_dir);
    if (rc) return rc;
    int eot = pt_bpe_eot(t0);
    pt_bpe_free(t0);
    if (eot < 0) return pt_fail(PT_EINVAL, "the vocabulary in %s has no <|endoftext|> token to separate documents", vocab_dir);

    /* pieces: documents, long ones cut where the pre-tokenizer splits */
    job j = {0};
    int cap = 0;
    for (int d = 0; d < c->ndocs; d++) {
        const char *s = c->docs[d].text;
        size_t len = c->docs[d].len, at = 0;
        do {
            size_t end = len - at > PIECE_BYTES ? cut_at(s, len, at + PIECE_BYTES) : len;
            if (grow((void **)&j.pieces, &cap, j.npieces + 1, sizeof *j.pieces)) {
                free(j.pieces);
                return pt_fail(PT_ENOMEM, "corpus: out of memory");
            }
            j.pieces[j.npieces++] = (piece){d, s + at, end - at, NULL, 0};
            at = end;
        } while (at < len);
    }
    j.vocab_dir = vocab_dir;
    j.total = c->bytes;
    j.progress = progress;
    j.arg = arg;
    pthread_mutex_init(&j.mu, NULL);
    if (threads > j.npieces) threads = j.npieces;
    pthread_t *th = calloc((size_t)threads, sizeof *th);
    int started = 0;
    if (th)
        for (; started < threads; started++)
            if (pthread_create(&th[started], NULL, worker, &j)) break;
    if (started == 0) worker(&j); /* no thread could start: encode here */
    for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
    free(th);
    pthread_mutex_destroy(&j.mu);
    if (progress && j.reported != j.done) progress(j.done, j.total, arg);

    rc = j.rc ? pt_fail(j.rc, "%s", j.err) : PT_OK;
    size_t total = 0;
    for (int k = 0; k < j.npieces; k++) total += j.pieces[k].n;
    total += (size_t)c->ndocs;
    int32_t *out = rc ? NULL : malloc(sizeof(int32_t) * total);
    if (!rc && !out) rc = pt_fail(PT_ENOMEM, "corpus: out of memory for %zu token ids", total);
    size_t at = 0;
    for (int k = 0; k < j.npieces; k++) {
        piece *pc = &j.pieces[k];
        if (out) {
            if (k == 0 || pc->doc != j.pieces[k - 1].doc) {
                if (doc_start) doc_start[pc->doc] = at;
                out[at++] = eot;
            }
            if (pc->n) memcpy(out + at, pc->ids, sizeof(int32_t) * pc->n);
            at += pc->n;
        }
        free(pc->ids);
    }
    free(j.pieces);
    if (rc) return rc;
    if (doc_start) doc_start[c->ndocs] = at;
    *ids = out;
    *n = at;
    return PT_OK;
}
