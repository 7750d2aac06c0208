/* SPDX-License-Identifier: MIT */
/* Token shards (files of uint16 or uint32 token ids), the other token files ptrain
 * reads (llm.c's and nanoGPT's), data sets made of several of them, and the
 * deterministic, rank-aware batch loader.
 *
 * Shard file format, versions 1 and 2 (all integers little-endian):
 *
 *   offset size  field
 *        0    8  magic "PTRNTOK\0" (the 7 letters and a NUL byte)
 *        8    4  uint32 version = 1 (2-byte ids) or 2 (4-byte ids)
 *       12    4  uint32 bytes_per_token = 2 (version 1) or 4 (version 2)
 *       16    8  uint64 ntokens
 *       24    4  uint32 vocab_size  (every id is < vocab_size; version 1:
 *                                    1..65536; version 2: 65537..2^31-1)
 *       28    4  uint32 eot_id      (end-of-text id, < vocab_size)
 *       32    8  uint64 checksum    (FNV-1a 64 of the payload bytes)
 *       40    8  uint64 set_id      (shards written together, e.g. train.bin and
 *                                    val.bin of one prepare, share it; 0 = none)
 *       48   16  zero
 *       64  w*n  payload: ntokens ids of w = bytes_per_token bytes (uint16
 *                or uint32)
 *
 * Writers pick the width from the vocabulary: 2 bytes (version 1, the
 * format of every earlier ptrain, byte for byte) when vocab_size <= 65536
 * (GPT-2), else 4 bytes (version 2; Llama 3's 128,256 ids).  Version 1
 * files of earlier ptrain are read as they always were.  Readers before
 * version 2 refuse a version 2 file by its version ("not supported").
 *
 * FNV-1a 64: Fowler, Noll, Vo, "FNV hash" (IETF draft-eastlake-fnv), offset
 * basis 0xcbf29ce484222325, prime 0x100000001b3, one byte at a time.
 *
 * Other token files (read by pt_tokens_open, named by a FORMAT: prefix or
 * recognised by their magic):
 *   llm.c (karpathy/llm.c, dev/data/data_common.py write_datafile): a header
 *     of 256 int32 (1024 bytes): magic 20240520, version 1 (uint16 GPT-2
 *     ids; version 2 is uint32 Llama 3 ids, refused), token count, zeros;
 *     then the ids as uint16.  GPT-2's vocabulary: ids < 50257.
 *   nanoGPT (karpathy/nanoGPT, data/{openwebtext,shakespeare}/prepare.py):
 *     no header, the ids as uint16 (numpy's np.uint16 tofile); the
 *     vocabulary is not recorded (meta.pkl is a Python pickle, not read):
 *     the caller gives it, and every id is checked against it.
 *
 * A data set (pt_dataset_open) is a directory holding a training and a
 * validation split, each one or more of these files read as one stream of
 * tokens (a pt_shard whose `files` are its parts):
 *   DIR/index.json  (ptrain-data prepare's sharded output; pt_shard_writer)
 *     {"format": "ptrain-token-set", "version": 1, "set_id": "16 hex",
 *      "vocab_size": V, "eot_id": E, ["bytes_per_token": 4,] (only when 4)
 *      "train": [{"file": "train_000000.bin", "tokens": N, "fnv1a64": "16 hex"}, ...],
 *      "val": [...]}
 *     every shard a ptrain shard in DIR with that set id, count and checksum;
 *   DIR/train.bin and DIR/val.bin (ptrain shards of one set, or llm.c files);
 *   llm.c shards named PREFIX_train*.bin and PREFIX_val*.bin (as llm.c's
 *     fineweb.py, tinyshakespeare.py and tinystories.py name them: the word
 *     followed by '_' or ".bin"), each split in byte order of the names;
 *   nanoGPT's DIR/train.bin and DIR/val.bin (the prefix nanogpt: only).
 *
 * Errors: functions return PT_OK or a negative PT_E* code and set a one-line
 * message (pt_errmsg()).
 */
#ifndef PTRAIN_DATA_SHARD_H
#define PTRAIN_DATA_SHARD_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PT_SHARD_MAGIC "PTRNTOK" /* 8 bytes on disk including the NUL */
#define PT_SHARD_VERSION 1   /* 2-byte ids */
#define PT_SHARD_VERSION_4 2 /* 4-byte ids (vocab_size > 65536) */
#define PT_SHARD_MAX_VOCAB_2 65536u      /* the largest vocabulary of a 2-byte shard */
#define PT_SHARD_MAX_VOCAB_4 2147483647u /* of a 4-byte shard (ids fit an int32) */

/* Bytes per token of a shard of vocabulary vocab_size: 2 up to 65536, else 4. */
#define PT_SHARD_TOKEN_BYTES(vocab_size) ((vocab_size) > PT_SHARD_MAX_VOCAB_2 ? 4 : 2)
#define PT_SHARD_HEADER_BYTES 64

/* Token file formats. */
typedef enum pt_token_format {
    PT_TOKENS_AUTO = 0,    /* by magic: ptrain or llm.c (nanoGPT files have none) */
    PT_TOKENS_PTRAIN = 1,  /* ptrain token shard (above) */
    PT_TOKENS_LLMC = 2,    /* llm.c token shard, version 1 */
    PT_TOKENS_NANOGPT = 3, /* nanoGPT .bin: headerless uint16 */
} pt_token_format;

#define PT_LLMC_TOKENS_MAGIC 20240520
#define PT_LLMC_TOKENS_VERSION 1
#define PT_LLMC_HEADER_BYTES 1024
#define PT_LLMC_VOCAB 50257 /* version 1: GPT-2's vocabulary */

/* An open, validated token stream: one file, or the files of one split of
 * a data set read one after the other.  `tokens` points into a read-only
 * mapping of the file ([ntokens] uint16 ids, each < vocab_size) when the
 * stream is one 2-byte file or was built in memory, `tokens32` ([ntokens]
 * uint32 ids) when it is one 4-byte file; for several files both are NULL
 * and `files` holds each file's own shard: read the stream with
 * pt_shard_read32 (any width), pt_shard_read (2-byte streams) or
 * pt_loader_batch. */
typedef struct pt_shard {
    const uint16_t *tokens;
    const uint32_t *tokens32;
    uint32_t token_bytes; /* 2 or 4 (every file of a stream has the same) */
    uint64_t ntokens;   /* all files together */
    uint32_t vocab_size, eot_id;
    uint64_t checksum;  /* one file: FNV-1a 64 of its payload (a ptrain shard's is verified
                         * against its header, the others' computed at open); several: FNV-1a
                         * 64 of the files' (ntokens, checksum) pairs, 16 little-endian bytes
                         * each, in stream order */
    uint64_t set_id;    /* shared by the shards of one set (pt_shard_write_set, an index);
                         * 0 = none (llm.c, nanoGPT) */
    int format;         /* pt_token_format of the file(s); 0 for a stream built in memory */
    int nfiles;         /* 1: one file; > 1: the files in `files`; 0: built in memory */
    const struct pt_shard *files; /* [nfiles] when nfiles > 1, in stream order; else NULL */
    const char *path;   /* the file (a set: its index or directory); NULL in memory */
    /* private */
    void *map_;
    size_t map_bytes_;
    uint64_t *starts_;  /* [nfiles + 1] first token of each file in the stream */
} pt_shard;

/* Exit status of a process whose mapped shard changed under it (below). */
#define PT_SHARD_CHANGED_EXIT 4

/* Open `path` read-only, mmap it and validate: magic, version, bytes per token
 * (version 1: 2, version 2: 4), file size == 64 + bytes_per_token * ntokens,
 * eot_id < vocab_size (version 1: <= 65536; version 2: 65537..2^31-1), payload
 * checksum, every id < vocab_size (one pass over the payload, O(ntokens)).
 * On success fill *s (close with pt_shard_close()); on error *s is zeroed.
 * The mapping reads the file itself: a shard truncated or rewritten in
 * place while open makes reads past its new end fault (SIGBUS).  The first
 * pt_shard_open installs a SIGBUS handler (sigaction; the previous
 * disposition is kept for every other SIGBUS) that, for a fault inside an
 * open shard (up to 64 at once), writes one line to standard error,
 * "PROG: token shard PATH changed or was truncated while mapped (bus error
 * reading byte N of the M it had when opened): ...", and _exits with
 * PT_SHARD_CHANGED_EXIT.  Replacing a shard by rename (pt_shard_write,
 * ptrain-data prepare) is safe: the open mapping keeps the old file.
 * Errors: PT_EINVAL (NULL argument), PT_EIO (cannot open/read/mmap),
 * PT_EFORMAT (not a ptrain token shard, unknown version, truncated or
 * over-long file -- giving expected vs actual bytes --, checksum mismatch,
 * id out of range), PT_EUNSUPP (big-endian host). */
int pt_shard_open(pt_shard *s, const char *path);

/* Unmap and zero *s, and every file of a set (a zeroed or already closed
 * shard is ignored). */
void pt_shard_close(pt_shard *s);

/* Open one token file of format `fmt` (PT_TOKENS_AUTO: a ptrain or llm.c
 * file, recognised by its magic) with the checks of pt_shard_open: a ptrain
 * shard exactly as pt_shard_open; an llm.c file: magic 20240520, version 1,
 * a token count in [0, 2^31) and a file of exactly 1024 + 2 * count bytes,
 * every id < 50257 (vocab_size 50257, eot_id 50256); a nanoGPT file: an even,
 * non-zero number of bytes, every id < `vocab` (vocab_size `vocab`, which
 * must be in [1, 65536]; eot_id GPT-2's 50256 when below it, else vocab - 1).
 * The file is mapped read-only (zero copy, guarded against truncation as
 * pt_shard_open's) and read once (checksum and ids, O(ntokens)).  `vocab`
 * is used for nanoGPT files only.
 * Errors: pt_shard_open's, and PT_EFORMAT for a file that is neither a
 * ptrain nor an llm.c token file under PT_TOKENS_AUTO (the message says
 * that a headerless nanoGPT file needs the nanogpt: prefix), an llm.c
 * header of another version ("version 2 ... is not supported") or a size
 * that does not match it; PT_EINVAL for a nanoGPT file without a vocabulary
 * (`vocab` 0) or a `fmt` that is not a pt_token_format. */
int pt_tokens_open(pt_shard *s, const char *path, int fmt, uint32_t vocab);

/* The format named by a "FORMAT:" prefix of spec ("ptrain:", "llmc:",
 * "nanogpt:"): *fmt receives it and *rest the text after the colon; without
 * one of those prefixes *fmt is PT_TOKENS_AUTO and *rest is spec. */
void pt_token_format_parse(const char *spec, int *fmt, const char **rest);

/* "ptrain", "llmc", "nanogpt" ("memory" for 0, "?" otherwise). */
const char *pt_token_format_name(int fmt);

/* Open the data set `spec` names, [FORMAT:]DIR (the layouts in the comment
 * at the top), as its training and validation streams:
 *   - DIR/index.json: the shards it lists, each checked against its entry
 *     (set id, token count, checksum, vocabulary);
 *   - else DIR/train.bin and DIR/val.bin: two ptrain shards of one set
 *     (pt_shard_check_set), or two llm.c files;
 *   - else llm.c shards PREFIX_train*.bin / PREFIX_val*.bin (one PREFIX);
 *   - nanogpt:DIR: DIR/train.bin and DIR/val.bin, ids < `vocab`.
 * A prefix llmc: or ptrain: restricts the files to that format.  `vocab`
 * is the vocabulary of nanoGPT files (ptrain-run passes its model's); other
 * formats record theirs.  Files are read as pt_tokens_open reads them, at
 * most 4096 per split.  On success both streams are open (close each with
 * pt_shard_close); on error both are zeroed.
 * Errors (one line naming the file or directory and what was expected):
 * PT_EINVAL (NULL argument, nanogpt: without a vocabulary), PT_EIO (DIR is
 * not a directory, a file cannot be read), PT_EFORMAT (no data set layout
 * in DIR, a malformed index.json or a shard that does not match it, files
 * of two formats or two llm.c prefixes, a file refused by pt_tokens_open,
 * train and val from different sets), PT_ENOMEM. */
int pt_dataset_open(const char *spec, uint32_t vocab, pt_shard *train, pt_shard *val);

/* Copy tokens [off, off + n) of stream s (across its files) to dst [n].
 * PT_EINVAL when the range is outside [0, ntokens) or an argument is NULL;
 * pt_shard_read also for a stream of 4-byte ids (use pt_shard_read32). */
int pt_shard_read(const pt_shard *s, uint64_t off, uint64_t n, uint16_t *dst);
int pt_shard_read32(const pt_shard *s, uint64_t off, uint64_t n, uint32_t *dst);

/* Write an llm.c token file (version 1: the 1024-byte header with magic
 * 20240520, version 1 and n, then n uint16 ids) holding tokens [off, off +
 * n) of s into descriptor fd (a pt_atomic_file's; the caller commits it).
 * Errors: PT_EINVAL (n >= 2^31: llm.c's count is an int32; a range outside
 * s; a vocabulary over 50257, whose ids llm.c's version 1 cannot mean),
 * PT_EIO (write failed; `name` names the file in the message). */
int pt_llmc_write(int fd, const char *name, const pt_shard *s, uint64_t off, uint64_t n);

/* Write `n` ids (each in [0, vocab_size)) as a shard at `path`, atomically
 * (core/file.h: an unnamed O_TMPFILE, or an O_EXCL temporary, in the same
 * directory; fsync; rename over `path`).  On error `path` is untouched and
 * nothing is left behind.  set_id 0.
 * Errors: PT_EINVAL (NULL ids with n > 0, vocab_size not in [1, 65536],
 * eot_id >= vocab_size, an id out of range -- naming its position),
 * PT_EIO (write, fsync or rename failed, naming the path and errno text). */
int pt_shard_write(const char *path, const int32_t *ids, uint64_t n, uint32_t vocab_size, uint32_t eot_id);

/* pt_shard_write for any vocabulary in 1..2^31-1: a 2-byte shard (version 1,
 * the same file as pt_shard_write's) up to 65536 ids, else a 4-byte one
 * (version 2).  Errors as pt_shard_write. */
int pt_shard_write_any(const char *path, const int32_t *ids, uint64_t n, uint32_t vocab_size, uint32_t eot_id);

/* Write `nshards` (1..16) shards as one set: paths[k] gets counts[k] ids
 * from ids[k].  Every shard's header carries the same set_id (FNV-1a 64 of
 * each shard's token count and payload checksum), and the files are renamed
 * into place only after all of them were written and synced, so a failure
 * (disk full, a bad id) leaves every previous file untouched; a crash
 * between the renames leaves shards whose set ids differ, which
 * pt_shard_check_set refuses.  Errors as pt_shard_write. */
int pt_shard_write_set(int nshards, const char *const *paths, const int32_t *const *ids, const uint64_t *counts,
                       uint32_t vocab_size, uint32_t eot_id);

/* Check that n open shards (named paths[k] in messages) belong to one set
 * (equal set_id; shards from before set ids, all 0, also agree).
 * PT_EFORMAT naming both files otherwise. */
int pt_shard_check_set(const pt_shard *const *shards, const char *const *paths, int n);

/* ---- a sharded set written as it fills -----------------------------------
 * pt_shard_writer writes the splits of a data set (0 train, 1 val) into
 * directory dir as ptrain shards of at most shard_tokens tokens each, one
 * file open per split at a time, with a fixed amount of memory (two 64 KiB
 * buffers).  Every shard is an unnamed temporary file in dir (O_TMPFILE, or
 * an O_EXCL "NAME.tmp.XXXXXX") until pt_shard_writer_commit names them all:
 * dir/train.bin and dir/val.bin when shard_tokens is 0 (one shard per
 * split: the layout of pt_shard_write_set, byte for byte the same files),
 * else dir/train_NNNNNN.bin and dir/val_NNNNNN.bin (6 digits from 0), and
 * dir/index.json listing them, renamed last.  The set id is pt_shard_write_
 * set's: FNV-1a 64 over every shard's (ntokens, checksum), train first. */
enum { PT_SPLIT_TRAIN = 0, PT_SPLIT_VAL = 1 };
typedef struct pt_shard_writer pt_shard_writer;

/* Start a set in existing directory dir: shards of at most shard_tokens
 * tokens (0: one shard per split), ids < vocab_size (1..2^31-1; the shards
 * hold 2-byte ids up to 65536, else 4-byte ones, and index.json then says
 * "bytes_per_token": 4), eot_id <
 * vocab_size.  The names dir/train.bin, dir/val.bin and dir/index.json must
 * be absent or regular files (pt_output_check).
 * Errors: PT_EINVAL (bad sizes, NULL), PT_EIO (a refused name), PT_ENOMEM. */
int pt_shard_writer_open(pt_shard_writer **w, const char *dir, uint64_t shard_tokens, uint32_t vocab_size,
                         uint32_t eot_id);

/* Append n ids to split (PT_SPLIT_TRAIN or PT_SPLIT_VAL), starting a new
 * shard whenever the current one holds shard_tokens.  Errors: PT_EINVAL
 * (an id >= vocab_size, naming its position in the split), PT_EIO (a
 * temporary file cannot be created or written: the directory and errno
 * text; "too many open files" advises a larger --shard-tokens). */
int pt_shard_writer_add(pt_shard_writer *w, int split, const uint16_t *ids, size_t n);
int pt_shard_writer_add32(pt_shard_writer *w, int split, const uint32_t *ids, size_t n);

/* Tokens appended to split so far. */
uint64_t pt_shard_writer_tokens(const pt_shard_writer *w, int split);

/* Move the training tokens [at, end) to the validation split, which must
 * still be empty: the shard holding token `at` is cut there (its tail
 * copied into the first validation shard, its checksum computed again
 * from the file), the shards after it become validation shards as they
 * are.  Reads back at most 2 * shard_tokens tokens of the files.
 * Errors: PT_EINVAL (at > the training tokens, a non-empty validation
 * split), PT_EIO (a read, write or truncate failed). */
int pt_shard_writer_split(pt_shard_writer *w, uint64_t at);

/* Write every shard's header, dir/index.json, and rename them all into place
 * (pt_atomic_commit: all files synced before the first rename, index.json
 * renamed last).  A split without tokens gets one empty shard.  Then the
 * shards of the set that dir held before and this one does not replace
 * (those its previous index.json listed, or a previous train.bin and
 * val.bin when it had none) are removed, when they are regular files that
 * are ptrain shards; nothing else is.  names (may be NULL) receives, for
 * messages, "train.bin" or "train_000000.bin .. train_000011.bin" and the
 * same for val (each at most 64 bytes), nfiles[2] (may be NULL) the shard
 * counts.  Frees w, also on error (then nothing was renamed, or the set is
 * incomplete: its set ids differ and pt_dataset_open refuses it).
 * Errors: PT_EIO (write, fsync or rename failed, a refused name), PT_ENOMEM. */
int pt_shard_writer_commit(pt_shard_writer *w, char names[2][64], int nfiles[2]);

/* Drop everything written (no file appears) and free w (NULL is ignored). */
void pt_shard_writer_abort(pt_shard_writer *w);

/* FNV-1a 64 of `n` bytes (the shard checksum); exposed for tests and tools. */
uint64_t pt_fnv1a64(const void *data, size_t n);

/* Fill inputs and targets, each [nseq, T] int32 row-major, with sequences
 * first_seq .. first_seq+nseq-1 of global batch `step` (B_global sequences
 * of T tokens per step) of stream s (one file, memory, or the files of a
 * data set's split read as one stream: a sequence may span two files).  Sequence i of step s starts at token offset
 *     o(s, i) = ((s * B_global + i) * T) mod (ntokens - T - 1)
 * (computed exactly, without overflow); inputs[i][t] = tokens[o + t],
 * targets[i][t] = tokens[o + t + 1].  For validation pass the batch index as
 * `step`.  A data-parallel rank d of dp takes first_seq = d * B_global/dp,
 * nseq = B_global/dp, so every dp sees the same global batch (the batches
 * of the dp ranks concatenate to the dp = 1 batch).
 * Errors: PT_EINVAL when the shard has fewer than T+2 tokens, or step < 0,
 * B_global < 1, T < 1, nseq < 1, first_seq < 0, first_seq + nseq > B_global,
 * or a NULL pointer. */
int pt_loader_batch(const pt_shard *s, long step, int B_global, int T, int first_seq, int nseq,
                    int32_t *inputs, int32_t *targets);

#ifdef __cplusplus
}
#endif
#endif
