/* SPDX-License-Identifier: MIT */
/* A text corpus as a list of documents, read from files, directories and
 * standard input (plain text: one document per file; JSON Lines: one
 * document per line, the string field `field` of its object), and its
 * encoding into one stream of GPT-2 BPE ids with "<|endoftext|>" before
 * every document, the convention of llm.c's and nanoGPT's data scripts
 * (GPT-2, Radford et al. 2019, trained on documents delimited by it).
 *
 * pt_corpus_add and pt_corpus_encode hold everything in memory: the
 * sources' bytes, then the ids (4 bytes per token).  pt_corpus_list only
 * names the sources, for a reader that streams them (lib/data/prepare.h).
 * Sizes are bytes unless named otherwise.
 */
#ifndef PTRAIN_CORPUS_H
#define PTRAIN_CORPUS_H
#include <stddef.h>
#include <stdint.h>

typedef enum pt_corpus_format {
    PT_CORPUS_AUTO = 0,  /* by name: *.jsonl / *.ndjson are JSON Lines, the rest (and "-") text */
    PT_CORPUS_TEXT = 1,  /* the whole file is one document */
    PT_CORPUS_JSONL = 2, /* one JSON object per line; blank lines are skipped */
} pt_corpus_format;

typedef struct pt_corpus_doc {
    const char *text;   /* the document's bytes: a view into its source or its own copy */
    size_t len;         /* bytes */
    int src;            /* index into pt_corpus.names */
    size_t offset;      /* byte offset in the source where it starts (JSONL: its line) */
    long line;          /* JSONL line number, 1-based; 0 for text */
    int owned;          /* text is a malloc'd copy (a decoded JSON string) */
} pt_corpus_doc;

/* A directory entry that pt_corpus_add passed over, and why. */
typedef struct pt_corpus_skip {
    char *path;         /* the entry, as reached ("DIR/sub/name") */
    char *why;          /* one line: "a broken symbolic link (to 'x', which does not exist)",
                         * "a FIFO, not a regular file", "a symbolic link to DIR, a directory
                         * that contains it (a directory loop)", ... */
} pt_corpus_skip;

typedef struct pt_corpus {
    int nsrc;           /* sources read (files, "-") */
    char **names;       /* [nsrc] their paths ("-" for standard input) */
    char **bufs;        /* [nsrc] their bytes (NUL-terminated) */
    int ndocs;          /* documents, in the order given (directories sorted by name) */
    pt_corpus_doc *docs;/* [ndocs] */
    size_t bytes;       /* sum of the documents' lengths */
    int cap_src, cap_docs;
    int nskipped;       /* entries of the directories read that were passed over */
    pt_corpus_skip *skipped; /* [nskipped], in the order met */
    int cap_skipped;
    int listing;        /* set by pt_corpus_list: sources are named, not read (bufs[i] NULL) */
    pt_corpus_format *fmts; /* [nsrc] each source's format (TEXT or JSONL: AUTO resolved by name) */
    long long *sizes;   /* [nsrc] bytes of each source when listed (stat), -1 for standard input */
} pt_corpus;

/* Add `path`: a regular file, a directory (its regular files and
 * subdirectories, recursively, in byte order of their names; names
 * starting with '.' are skipped) or "-" (standard input, once).  Inside a
 * directory, symbolic links are followed for reading: a link to a regular
 * file is read as one (the layout of Hugging Face's hub cache, git-annex and
 * DVC), a link to a directory is entered; each directory is read once.
 * Entries that cannot be read are passed over and listed in c->skipped
 * with the reason: a broken link, a link loop, a link to a directory that
 * contains it (a directory loop) or to one already read, a FIFO, socket or
 * device (also behind a link).  `field`
 * names the JSONL string field (NULL: "text").  Empty documents are
 * skipped.  A file is read whole: its size is checked first.  Errors, each
 * one line naming the file (and for JSONL the line and byte offset):
 * PT_EINVAL (a file larger than the machine's physical memory, naming both
 * sizes, before it is read), PT_EIO (cannot open or read, not a regular file
 * or directory, "-" twice, a file that changed while it was read: it ended
 * before or after its size when opened, or got a new modification time),
 * PT_EFORMAT (a JSONL line that is not a JSON object, or lacks a string
 * `field`; invalid UTF-8 in JSON), PT_ENOMEM.
 * Documents added before an error stay in c. */
int pt_corpus_add(pt_corpus *c, const char *path, pt_corpus_format fmt, const char *field);

/* Name the sources of `path` as pt_corpus_add would read them, without
 * reading any: the same walk (order, links, loops, skipped entries),
 * each regular file opened once to check that it can be read, and its
 * name, format (fmt, AUTO resolved by name as pt_corpus_add does) and size
 * recorded; "-" is standard input (size -1).  No document is added
 * (ndocs stays 0); every later call on c must be pt_corpus_list too.
 * Errors: pt_corpus_add's that need no reading (PT_EIO, PT_ENOMEM). */
int pt_corpus_list(pt_corpus *c, const char *path, pt_corpus_format fmt);

/* Progress of pt_corpus_encode: bytes encoded so far of `total`. */
typedef void (*pt_corpus_progress)(size_t done, size_t total, void *arg);

/* Encode every document with the GPT-2 BPE of `vocab_dir` (pt_bpe_load),
 * "<|endoftext|>" before each, on `threads` threads (each with its own
 * tokenizer; documents longer than 1 MiB are cut into pieces at newlines
 * that follow a printable ASCII character, where the GPT-2 pre-tokenizer
 * always splits, so the ids equal a one-thread encoding exactly).
 * *ids [*n] is malloc'd; doc_start [ndocs + 1] (may be NULL) receives the
 * index of each document's "<|endoftext|>" and *n last.  `progress` (may
 * be NULL) is called from one thread at a time at most every 64 MiB.
 * Errors: PT_EINVAL (no documents, threads < 1, a vocabulary without
 * "<|endoftext|>"), pt_bpe_load's errors, PT_ENOMEM. */
int pt_corpus_encode(const pt_corpus *c, const char *vocab_dir, int threads, int32_t **ids, size_t *n,
                     size_t *doc_start, pt_corpus_progress progress, void *arg);

/* Release everything (a zeroed corpus is fine). */
void pt_corpus_free(pt_corpus *c);

#endif
