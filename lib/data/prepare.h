/* SPDX-License-Identifier: MIT */
/* A token data set from a text corpus in constant memory (ptrain-data
 * prepare): the sources named by pt_corpus_list are read as a stream of
 * documents (text files whole, JSON Lines one document per line), cut into
 * chunks of about 1 MiB, encoded a window at a time on several threads with
 * GPT-2's BPE, "<|endoftext|>" before every document (as pt_corpus_encode),
 * and written in order through pt_shard_writer (lib/data/shard.h) as the
 * shards fill.
 *
 * Memory: a window of at most memory / 3 bytes of text and its ids (2 bytes
 * per token, at most one token per byte), whatever the corpus size, plus
 * about 16 MiB (the program, a reading buffer of 2 MiB) and up to 40 MiB per
 * thread (pt_bpe: 8 MiB of vocabulary, a cache of encoded words of at most
 * 20 MiB; the 4-byte ids of the chunk it encodes, up to 8 MiB), and one line
 * of a JSON Lines file (parsed whole: at most memory / 4 bytes, about three
 * times that while parsed).  A long pre-token costs nothing more (bpe.h).
 * A document is cut where GPT-2's pre-tokenizer always splits -- before an
 * ASCII white-space byte that follows a printable, non-space ASCII byte: no
 * pre-token spans a non-space character followed by white space, and the
 * pattern's matches from there on look only forward -- or, with no such place
 * within 256 KiB, at a pre-token boundary (pt_bpe_boundary), so its ids are
 * those of one encoding of the whole text, whatever the memory and threads.
 * A source must not change while it is read: a regular file whose size when
 * opened differs from its size when listed, or that then ends early, grows
 * or gets a new modification time, fails pt_prepare (PT_EIO) and nothing is
 * written.
 *
 * The split is pt_corpus_encode's in ptrain-data prepare: the documents of
 * the validation sources when given; else the last fraction of the
 * documents (their starts are kept in an unnamed temporary file in the
 * output directory, 8 bytes per document, not in memory); else, for one
 * document, the last fraction of its tokens (pt_shard_writer_split).
 * Sizes are bytes unless named otherwise.  Errors are one line
 * (pt_errmsg()). */
#ifndef PTRAIN_DATA_PREPARE_H
#define PTRAIN_DATA_PREPARE_H
#include "data/corpus.h"

#include <stddef.h>
#include <stdint.h>

typedef struct pt_prepare_progress {
    uint64_t done;   /* bytes of the sources encoded so far */
    uint64_t total;  /* bytes of all sources (0: unknown, e.g. a pipe on standard input) */
    uint64_t tokens; /* tokens so far */
    double seconds;  /* since pt_prepare started */
} pt_prepare_progress;

typedef struct pt_prepare_cfg {
    const char *vocab_dir;   /* the tokenizer's directory (pt_bpe_load) */
    const char *out_dir;     /* an existing directory: the set is written there */
    const char *field;       /* JSON Lines string field (NULL: "text") */
    int threads;             /* 1..1024 */
    size_t memory;           /* bytes of text and ids in flight, >= 16 MiB */
    uint64_t shard_tokens;   /* tokens per shard (0: one shard per split) */
    double val_fraction;     /* [0, 1), without validation sources */
    /* called at most every 64 MiB of source bytes and at the end (may be NULL),
     * from one thread at a time */
    void (*progress)(const pt_prepare_progress *p, void *arg);
    void *arg;
} pt_prepare_cfg;

/* How the validation split was chosen. */
enum { PT_HELD_FILES = 0, PT_HELD_DOCS = 1, PT_HELD_TOKENS = 2 };

typedef struct pt_prepare_result {
    int64_t docs[2];    /* documents of the training and the validation sources */
    int64_t held_docs;  /* documents in val.bin (PT_HELD_FILES: docs[1]; PT_HELD_TOKENS: 0) */
    int held;           /* PT_HELD_* */
    uint64_t bytes;     /* the documents' bytes */
    uint64_t tokens[2]; /* tokens written to train and val */
    char names[2][64];  /* the shard files, pt_shard_writer_commit's */
    int nfiles[2];
    double seconds;     /* from the start to the commit */
} pt_prepare_result;

/* Encode the documents of train (and val, which may be NULL or have no
 * sources; both listed with pt_corpus_list) into cfg->out_dir as one set.
 * Nothing appears there unless everything succeeded (pt_shard_writer).
 * Errors: PT_EINVAL (bad cfg; no document in train, or none in val when it
 * has sources: the message says which; a JSON Lines line over memory / 4
 * bytes, named FILE:LINE (byte OFFSET) with the limit), PT_EIO (a source
 * cannot be read, or changed while prepare ran, naming its sizes; an output
 * cannot be written), PT_EFORMAT (a JSON Lines line that is not an object
 * with a string field, named FILE:LINE (byte OFFSET); a NUL byte in JSON
 * Lines), pt_bpe_load's errors, PT_ENOMEM. */
int pt_prepare(const pt_prepare_cfg *cfg, const pt_corpus *train, const pt_corpus *val, pt_prepare_result *res);

/* The same split and set from ids already in memory (ptrain-data prepare
 * --in-memory: pt_corpus_encode's output): ids [n] with doc_start [ndocs]
 * (each document's "<|endoftext|>" index), val ids [nv] of nval_docs
 * documents (nval_docs 0: split ids by cfg->val_fraction), ids < vocab.
 * Errors: as pt_prepare's writing. */
int pt_prepare_write(const pt_prepare_cfg *cfg, uint32_t vocab, uint32_t eot, const int32_t *ids, size_t n,
                     const size_t *doc_start, int64_t ndocs, const int32_t *vids, size_t nv, int64_t nval_docs,
                     pt_prepare_result *res);

#endif
