/* SPDX-License-Identifier: MIT */
/* libFuzzer target: the corpus readers of lib/data, one against the other.
 *   - pt_corpus_add (lib/data/corpus.c): a text file or JSON Lines read
 *     whole into documents (ptrain-data prepare --in-memory, encode);
 *   - the streaming reader of ptrain-data prepare (lib/data/prepare.c,
 *     static: that file is included here) on the same file listed with
 *     pt_corpus_list, with chunks of CHUNK_BYTES = 64 bytes instead of
 *     1 MiB, so that documents of a few hundred bytes are cut in parts.
 * Both must accept the same files and give the same documents (the
 * streamed parts, joined, are the documents), each part after the first
 * starting at a place where GPT-2's pre-tokenizer always splits (an ASCII
 * white-space byte after a printable non-space ASCII byte, prepare.h), and
 * both refuse the same files in one line with the same code.
 * The first input byte picks the file's name (.txt, .jsonl, .ndjson, none),
 * the format (by name, or text or JSON Lines whatever the name) and the
 * JSON Lines field ("text" or "body"); the rest is the file. */
#define CHUNK_BYTES ((size_t)64)
#include "fuzz_util.h"

#include "../../lib/data/prepare.c"

/* the streamed documents, joined: text[off[i], off[i + 1]) is document i */
typedef struct docs {
    char *text;
    size_t len, cap;
    size_t *off;
    int n, cap_off;
} docs;

static void add_part(docs *d, const char *s, size_t len, int start)
{
    if (start) {
        if (d->n + 2 > d->cap_off) {
            d->cap_off = d->cap_off ? 2 * d->cap_off : 16;
            d->off = realloc(d->off, sizeof *d->off * (size_t)d->cap_off);
            if (!d->off) abort();
        }
        d->off[d->n++] = d->len;
    } else {
        if (!d->n) abort(); /* a continuation before any document */
        /* a cut inside a document: where the pre-tokenizer always splits */
        unsigned char c = len ? (unsigned char)s[0] : 0, p = d->len ? (unsigned char)d->text[d->len - 1] : 0;
        if (!len || !(c == ' ' || (c >= '\t' && c <= '\r')) || !(p > ' ' && p < 0x7f)) {
            fprintf(stderr, "a document cut between bytes 0x%02x and 0x%02x\n", p, c);
            abort();
        }
    }
    if (d->len + len > d->cap) {
        d->cap = 2 * (d->len + len) + 64;
        d->text = realloc(d->text, d->cap);
        if (!d->text) abort();
    }
    if (len) memcpy(d->text + d->len, s, len);
    d->len += len;
    d->off[d->n] = d->len;
}

/* the streaming reader over corpus c (listed): 0 or its error, the documents in *d */
static int stream(const pt_corpus *c, const char *field, docs *d, int64_t *ndocs, uint64_t *bytes)
{
    reader r;
    memset(&r, 0, sizeof r);
    r.fd = -1;
    r.c = c;
    r.field = field ? field : "text";
    int more = 1, rc = 0;
    while (more && !rc) {
        chunk ch;
        memset(&ch, 0, sizeof ch);
        rc = reader_fill(&r, &ch, &more);
        if (!rc) {
            for (int j = 0; j < ch.nsegs; j++)
                add_part(d, ch.text + ch.segs[j].off, ch.segs[j].len, ch.segs[j].doc_start);
        }
        chunk_free(&ch);
    }
    *ndocs = r.docs;
    *bytes = r.bytes;
    reader_free(&r);
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    static const char *const names[4] = {"doc.txt", "doc.jsonl", "doc.ndjson", "doc"};
    static const pt_corpus_format fmts[3] = {PT_CORPUS_AUTO, PT_CORPUS_TEXT, PT_CORPUS_JSONL};
    const char *field = data[0] & 16 ? "body" : NULL;
    const pt_corpus_format fmt = fmts[(data[0] >> 2) % 3];
    char path[400];
    snprintf(path, sizeof path, "%s/%s", fuzz_dir(), names[data[0] & 3]);
    fuzz_write(path, data + 1, size - 1);

    pt_corpus whole;
    memset(&whole, 0, sizeof whole);
    pt_error_clear();
    const int rc_whole = pt_corpus_add(&whole, path, fmt, field);
    char msg_whole[PT_ERROR_LEN];
    snprintf(msg_whole, sizeof msg_whole, "%s", rc_whole ? pt_errmsg() : "");
    if (rc_whole) fuzz_check_msg(msg_whole);

    pt_corpus listed;
    memset(&listed, 0, sizeof listed);
    if (pt_corpus_list(&listed, path, fmt) != PT_OK || listed.nsrc != 1 || listed.ndocs != 0 ||
        listed.sizes[0] != (long long)(size - 1))
        abort();
    docs d;
    memset(&d, 0, sizeof d);
    int64_t ndocs = 0;
    uint64_t bytes = 0;
    pt_error_clear();
    const int rc_stream = stream(&listed, field, &d, &ndocs, &bytes);
    if (rc_stream) fuzz_check_msg(pt_errmsg());

    if (rc_whole != rc_stream) {
        fprintf(stderr, "in memory: %d (%s); streamed: %d (%s)\n", rc_whole, msg_whole, rc_stream,
                rc_stream ? pt_errmsg() : "");
        abort();
    }
    if (!rc_whole) {
        if (whole.ndocs != d.n || (int64_t)whole.ndocs != ndocs || whole.bytes != bytes || whole.bytes != d.len) {
            fprintf(stderr, "in memory %d documents of %zu bytes; streamed %d (%lld) of %zu (%llu)\n", whole.ndocs,
                    whole.bytes, d.n, (long long)ndocs, d.len, (unsigned long long)bytes);
            abort();
        }
        for (int i = 0; i < d.n; i++) {
            const pt_corpus_doc *w = &whole.docs[i];
            if (w->len == 0 || w->len != d.off[i + 1] - d.off[i] || memcmp(w->text, d.text + d.off[i], w->len)) {
                fprintf(stderr, "document %d differs (%zu bytes in memory, %zu streamed)\n", i, w->len,
                        d.off[i + 1] - d.off[i]);
                abort();
            }
        }
    }
    free(d.text);
    free(d.off);
    pt_corpus_free(&listed);
    pt_corpus_free(&whole);
    return 0;
}
