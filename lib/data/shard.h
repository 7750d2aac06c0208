/* Token shards (files of uint16 token ids) and the deterministic, rank-aware
 * batch loader.
 *
 * Shard file format, version 1 (all integers little-endian):
 *
 *   offset size  field
 *        0    8  magic "PTRNTOK\0" (the 7 letters and a NUL byte)
 *        8    4  uint32 version = 1
 *       12    4  uint32 bytes_per_token = 2
 *       16    8  uint64 ntokens
 *       24    4  uint32 vocab_size  (<= 65536; every id is < vocab_size)
 *       28    4  uint32 eot_id      (end-of-text id, < vocab_size)
 *       32    8  uint64 checksum    (FNV-1a 64 of the payload bytes)
 *       40    8  uint64 set_id      (shards written together, e.g. train.bin and
 *                                    val.bin of one prepare, share it; 0 = none)
 *       48   16  zero
 *       64  2*n  payload: ntokens uint16 ids
 *
 * FNV-1a 64: Fowler, Noll, Vo, "FNV hash" (IETF draft-eastlake-fnv), offset
 * basis 0xcbf29ce484222325, prime 0x100000001b3, one byte at a time.
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
#define PT_SHARD_VERSION 1
#define PT_SHARD_HEADER_BYTES 64

/* An open, validated shard.  `tokens` points into a read-only mapping of the
 * file ([ntokens] uint16 ids, each < vocab_size). */
typedef struct pt_shard {
    const uint16_t *tokens;
    uint64_t ntokens;
    uint32_t vocab_size, eot_id;
    uint64_t checksum;  /* FNV-1a 64 of the payload (verified at open) */
    uint64_t set_id;    /* shared by the shards of one pt_shard_write_set; 0 = none */
    /* private */
    void *map_;
    size_t map_bytes_;
} pt_shard;

/* Exit status of a process whose mapped shard changed under it (below). */
#define PT_SHARD_CHANGED_EXIT 4

/* Open `path` read-only, mmap it and validate: magic, version, bytes per token,
 * file size == 64 + 2 * ntokens, eot_id < vocab_size <= 65536, payload
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

/* Unmap and zero *s (a zeroed or already closed shard is ignored). */
void pt_shard_close(pt_shard *s);

/* Write `n` ids (each in [0, vocab_size)) as a shard at `path`, atomically
 * (core/file.h: an unnamed O_TMPFILE, or an O_EXCL temporary, in the same
 * directory; fsync; rename over `path`).  On error `path` is untouched and
 * nothing is left behind.  set_id 0.
 * Errors: PT_EINVAL (NULL ids with n > 0, vocab_size not in [1, 65536],
 * eot_id >= vocab_size, an id out of range -- naming its position),
 * PT_EIO (write, fsync or rename failed, naming the path and errno text). */
int pt_shard_write(const char *path, const int32_t *ids, uint64_t n, uint32_t vocab_size, uint32_t eot_id);

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

/* FNV-1a 64 of `n` bytes (the shard checksum); exposed for tests and tools. */
uint64_t pt_fnv1a64(const void *data, size_t n);

/* Fill inputs and targets, each [nseq, T] int32 row-major, with sequences
 * first_seq .. first_seq+nseq-1 of global batch `step` (B_global sequences
 * of T tokens per step).  Sequence i of step s starts at token offset
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
