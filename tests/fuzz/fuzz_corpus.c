/* SPDX-License-Identifier: MIT */
/* libFuzzer target: the corpus readers of lib/data, one against the other.
 *   - pt_corpus_add (lib/data/corpus.c): a text file or JSON Lines read
 *     whole into documents (ptrain-data prepare --in-memory, encode);
 *   - the streaming reader of ptrain-data prepare (lib/data/prepare.c,
 *     static: that file is included here) on the same file listed with
 *     pt_corpus_list, with chunks of CHUNK_BYTES = 64 bytes instead of
 *     1 MiB, so that documents of a few hundred bytes are cut in parts, and
 *     a CUT_SLACK of PT_BPE_LOOKAHEAD (32 KiB) instead of 256 KiB, so that
 *     text without a safe place is cut at a pre-token boundary
 *     (pt_bpe_boundary) in inputs under libFuzzer's 64 KiB.
 * Both must accept the same files and give the same documents (the
 * streamed parts, joined, are the documents), the parts of a document must
 * encode (pt_bpe_encode, one after the other) to the ids of the whole
 * document -- the rule the reader cuts by (prepare.h) -- and both refuse
 * the same files in one line with the same code.  The one refusal of the
 * stream alone is a JSON Lines line over its limit (a quarter of
 * --memory): then the file must hold such a line.
 * The first input byte picks the file's name (.txt, .jsonl, .ndjson, none:
 * bits 0-1), the JSON Lines field ("text" or "body": bit 4), the format
 * (by name, or text or JSON Lines whatever the name: bits 2-7 mod 3) and
 * the line limit (256 bytes when bit 7 is set, else 4 MiB, --memory 16M's);
 * the rest is the file.  Needs GPT-2's tokenizer files in $PTRAIN_BPE_DIR
 * (scripts/fuzz.sh sets it, or skips this target). */
#define CHUNK_BYTES ((size_t)64)
#define CUT_SLACK ((size_t)PT_BPE_LOOKAHEAD)
#include "fuzz_util.h"

#include "../../lib/data/prepare.c"

/* the streamed documents, joined: text[off[i], off[i + 1]) is document i;
 * cut[0, ncut) the offsets in text where a document was cut into parts */
typedef struct docs {
    char *text;
    size_t len, cap;
    size_t *off;
    int n, cap_off;
    size_t *cut;
    int ncut, cap_cut;
} docs;

static void add_part(docs *d, const char *s, size_t len, int start)
{
    if (!len) abort(); /* an empty part */
    if (start) {
        if (d->n + 2 > d->cap_off) {
            d->cap_off = d->cap_off ? 2 * d->cap_off : 16;
            d->off = realloc(d->off, sizeof *d->off * (size_t)d->cap_off);
            if (!d->off) abort();
        }
        d->off[d->n++] = d->len;
    } else {
        if (!d->n) abort(); /* a continuation before any document */
        if (d->ncut == d->cap_cut) {
            d->cap_cut = d->cap_cut ? 2 * d->cap_cut : 16;
            d->cut = realloc(d->cut, sizeof *d->cut * (size_t)d->cap_cut);
            if (!d->cut) abort();
        }
        d->cut[d->ncut++] = d->len;
    }
    if (d->len + len > d->cap) {
        d->cap = 2 * (d->len + len) + 64;
        d->text = realloc(d->text, d->cap);
        if (!d->text) abort();
    }
    memcpy(d->text + d->len, s, len);
    d->len += len;
    d->off[d->n] = d->len;
}

static pt_bpe *bpe;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    const char *dir = getenv("PTRAIN_BPE_DIR");
    if (!dir || pt_bpe_load(&bpe, dir) != PT_OK) {
        fprintf(stderr, "fuzz_corpus: set PTRAIN_BPE_DIR to the GPT-2 tokenizer files, e.g. "
                "PTRAIN_BPE_DIR=$(scripts/get-tokenizer.sh), or run it through scripts/fuzz.sh (%s)\n",
                dir ? pt_errmsg() : "PTRAIN_BPE_DIR is not set");
        exit(1);
    }
    return 0;
}

/* ids of text[0, len) appended to *ids [*n] */
static void encode_more(const char *text, size_t len, int32_t **ids, size_t *n, size_t *cap)
{
    int32_t *part = NULL;
    size_t np = 0;
    if (pt_bpe_encode(bpe, text, len, &part, &np) != PT_OK) {
        fprintf(stderr, "pt_bpe_encode refuses %zu bytes: %s\n", len, pt_errmsg());
        abort();
    }
    if (*n + np > *cap) {
        *cap = 2 * (*n + np) + 16;
        *ids = realloc(*ids, sizeof **ids * *cap);
        if (!*ids) abort();
    }
    if (np) memcpy(*ids + *n, part, sizeof *part * np);
    *n += np;
    free(part);
}

/* The parts of every document that was cut encode to its ids. */
static void check_cuts(const docs *d)
{
    int k = 0;
    for (int i = 0; i < d->n && k < d->ncut; i++) {
        const size_t a = d->off[i], b = d->off[i + 1];
        if (d->cut[k] <= a || d->cut[k] >= b) continue; /* not cut */
        int32_t *whole = NULL, *parts = NULL;
        size_t nw = 0, cw = 0, np = 0, cp = 0, from = a;
        encode_more(d->text + a, b - a, &whole, &nw, &cw);
        for (; k < d->ncut && d->cut[k] < b; k++) {
            encode_more(d->text + from, d->cut[k] - from, &parts, &np, &cp);
            from = d->cut[k];
        }
        encode_more(d->text + from, b - from, &parts, &np, &cp);
        if (np != nw || (nw && memcmp(parts, whole, sizeof *whole * nw))) {
            size_t j = 0;
            while (j < np && j < nw && parts[j] == whole[j]) j++;
            fprintf(stderr, "document %d (%zu bytes) cut in parts encodes to %zu ids, whole to %zu; first "
                    "difference at id %zu\n", i, b - a, np, nw, j);
            abort();
        }
        free(whole);
        free(parts);
    }
    if (k != d->ncut) abort(); /* a cut outside every document */
}

/* the longest line of data[0, size), without its '\n' */
static size_t longest_line(const uint8_t *data, size_t size)
{
    size_t most = 0, start = 0;
    for (size_t i = 0; i <= size; i++)
        if (i == size || data[i] == '\n') {
            if (i - start > most) most = i - start;
            start = i + 1;
        }
    return most;
}

/* the streaming reader over corpus c (listed): 0 or its error, the documents in *d */
static int stream(const pt_corpus *c, const char *field, size_t line_max, docs *d, int64_t *ndocs, uint64_t *bytes)
{
    reader r;
    memset(&r, 0, sizeof r);
    r.fd = -1;
    r.c = c;
    r.field = field ? field : "text";
    r.bpe = bpe; /* as pt_prepare: the reader's handle for pt_bpe_boundary */
    r.line_max = line_max;
    r.memory = 4 * line_max;
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
    const size_t line_max = data[0] & 128 ? 256 : MIN_MEMORY / 4;
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
    const int rc_stream = stream(&listed, field, line_max, &d, &ndocs, &bytes);
    if (rc_stream) fuzz_check_msg(pt_errmsg());

    if (rc_stream == PT_EINVAL && strstr(pt_errmsg(), "the longest JSON Lines line read")) {
        /* the stream's own limit: the in-memory reader has none */
        if (longest_line(data + 1, size - 1) <= line_max) {
            fprintf(stderr, "a line over %zu bytes refused in a file whose longest line is %zu: %s\n", line_max,
                    longest_line(data + 1, size - 1), pt_errmsg());
            abort();
        }
    } else if (rc_whole != rc_stream) {
        fprintf(stderr, "in memory: %d (%s); streamed: %d (%s)\n", rc_whole, msg_whole, rc_stream,
                rc_stream ? pt_errmsg() : "");
        abort();
    }
    if (!rc_whole && !rc_stream) {
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
        check_cuts(&d);
    }
    free(d.text);
    free(d.off);
    free(d.cut);
    pt_corpus_free(&listed);
    pt_corpus_free(&whole);
    return 0;
}
