/* SPDX-License-Identifier: MIT */
/* GPT-2 byte-level BPE tokenizer (encoder and decoder).
 *
 * Algorithm: Radford et al. 2019, "Language Models are Unsupervised Multitask
 * Learners", section 2.2 (byte-level BPE over a regex pre-tokenisation), as
 * implemented by openai/gpt-2 src/encoder.py and by the npm package
 * `gpt-3-encoder` (Encoder.js), whose ids this implementation reproduces
 * exactly -- including two of its JavaScript details:
 *   - `\s` in the pre-tokenisation pattern is ECMAScript white space (Unicode
 *     Zs, TAB, LF, VT, FF, CR, U+2028, U+2029, U+FEFF), not PCRE's;
 *   - merge ranks are looked up by the key `first + "," + second` (a JS
 *     object keyed by an array), so when two merges share a key the later
 *     rank wins, and among equal ranks the right-most pair of a word merges.
 * Unicode letter/number classes come from the PCRE2 library's tables
 * (Unicode 14 for PCRE2 10.42); code points assigned as letters or numbers in
 * later Unicode versions may be split differently from a newer node.
 *
 * Vocabulary files (from gpt-3-encoder, see scripts/get-tokenizer.sh):
 *   encoder.json  {"<byte-level token>": id, ...}   (50257 entries)
 *   vocab.bpe     "#version" line, then one merge "a b" per line, rank order
 * or Hugging Face's copies of them (the gpt2 model repository, beside
 * model.safetensors), the same contents under other names:
 *   vocab.json    as encoder.json
 *   merges.txt    as vocab.bpe; its first line is dropped only when it
 *                 starts with "#version", and a last line without a
 *                 newline counts (as Hugging Face's tokenizers read it)
 *
 * Long pre-tokens (a choice of this encoder, not GPT-2's): a pre-token --
 * a match of the pattern, or a run of bytes it skips (not UTF-8) -- longer
 * than PT_BPE_PIECE_MAX (16384) bytes is cut after PT_BPE_PIECE_MAX bytes,
 * backed off by at most 3 bytes so that no UTF-8 character is split, and
 * the pattern matches again from the cut; each piece is encoded as a word of
 * its own.  GPT-2's pattern splits a run of letters only at a non-letter (a
 * line of DNA, a base64 blob or a run of one character is one pre-token), and
 * its BPE is quadratic in memory and time in a word's length; the cut
 * bounds both (about 70 bytes per byte of a piece: 1.1 MiB).  The ids of
 * such a pre-token differ from the reference's only at its cuts -- the
 * tokens that a merge across a cut would have made, and in a run of one
 * repeated character the alignment of the merges of each following piece --
 * and decode(encode(x)) == x still holds.  Pre-tokens of natural text are
 * far shorter (GPT-2's longest token is 128 bytes, the reference test's long
 * words 5000).  The cut is a function of the text alone: the same on any
 * machine, --memory or chunking (pt_bpe_boundary).
 *
 * Errors: every int function returns PT_OK or a negative PT_E* code and sets
 * a one-line message (pt_errmsg()).  A pt_bpe keeps a cache of encoded words
 * (at most 20 MiB): pt_bpe_encode() and pt_bpe_boundary() on the same handle
 * must not run in two threads at once; pt_bpe_decode() is read-only.
 */
#ifndef PTRAIN_DATA_BPE_H
#define PTRAIN_DATA_BPE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pt_bpe pt_bpe;

/* The longest piece of a pre-token, bytes (above). */
#define PT_BPE_PIECE_MAX 16384
/* Bytes after a position that the pre-tokenisation at that position reads:
 * pt_bpe_boundary finds a boundary at or after `from` in any text of at
 * least from + PT_BPE_LOOKAHEAD bytes. */
#define PT_BPE_LOOKAHEAD (2 * PT_BPE_PIECE_MAX + 16)
/* The largest tokenizer file (encoder.json, vocab.bpe, ...) pt_bpe_load
 * reads, bytes: 64 MiB (GPT-2's are 1 MB and 456 KB). */
#define PT_BPE_FILE_MAX ((size_t)64 << 20)

/* Load encoder.json and vocab.bpe from directory `dir` (or, when it has no
 * encoder.json, vocab.json and merges.txt) and compile the
 * pre-tokenisation pattern (PCRE2, UTF + UCP, JIT when available).
 * *out receives a handle to free with pt_bpe_free().  Each file's size is
 * checked before it is read.
 * Errors: PT_EINVAL (NULL argument), PT_EIO (file missing/unreadable, or
 * changed while it was read; a directory with neither pair of files, naming
 * both), PT_EFORMAT (a file over PT_BPE_FILE_MAX bytes, naming its size and
 * the limit; malformed JSON or merges, a JSON key given twice, token not
 * made of byte-level characters, an id given to two tokens, naming the id
 * and both), PT_ENOMEM, PT_EUNSUPP (PCRE2 without UTF support). */
int pt_bpe_load(pt_bpe **out, const char *dir);

/* Encode `len` bytes of UTF-8 `text` into token ids.  *ids receives a
 * malloc'd array of *n int32 ids in [0, vocab_size) (free() it; NULL when
 * *n == 0).  Bytes that are not valid UTF-8 are not matched by the pattern;
 * each such run is byte-level encoded on its own, so decode(encode(x)) == x
 * for any byte string.  Pre-tokens over PT_BPE_PIECE_MAX bytes are encoded
 * in pieces (above).  Throughput on English text: several million tokens/s.
 * Memory: the ids (4 bytes each, at most one per byte of text), and for the
 * encoder at most about 70 * PT_BPE_PIECE_MAX bytes, whatever the text.
 * Errors: PT_EINVAL (NULL argument, or a merged piece missing from the
 * vocabulary -- only possible with a vocabulary whose merge keys collide),
 * PT_ENOMEM. */
int pt_bpe_encode(pt_bpe *t, const char *text, size_t len, int32_t **ids, size_t *n);

/* A place to cut a text without changing its ids: *at (>= from, <= len) is
 * the first pre-token boundary at or after `from` (>= 1) of pt_bpe_encode
 * on any text that starts with these `len` bytes, so that encoding
 * text[0, *at) and then the rest gives the ids of encoding the whole.
 * `text` must itself start at such a boundary (the start of a document, or
 * an earlier *at).  Runs the pattern only (no BPE) over about `from` bytes;
 * *at is 0 when the boundary could depend on bytes after len, never when
 * len >= from + PT_BPE_LOOKAHEAD.  The same handle rule as pt_bpe_encode.
 * Errors: PT_EINVAL (NULL argument, from 0, a PCRE2 matching error). */
int pt_bpe_boundary(pt_bpe *t, const char *text, size_t len, size_t from, size_t *at);

/* Decode `n` ids into the concatenation of their tokens' bytes.  *text
 * receives a malloc'd, NUL-terminated buffer of *len bytes (not counting the
 * NUL; free() it).  Unlike the JS decoder, invalid UTF-8 produced by a
 * partial sequence of ids is returned as is (no U+FFFD replacement).
 * Errors: PT_EINVAL (NULL argument, id outside [0, vocab_size)), PT_ENOMEM. */
int pt_bpe_decode(const pt_bpe *t, const int32_t *ids, size_t n, char **text, size_t *len);

/* Number of ids (max id + 1): 50257 for GPT-2. */
int pt_bpe_vocab_size(const pt_bpe *t);

/* Id of "<|endoftext|>" (50256 for GPT-2), or -1 when the vocabulary has no
 * such token.  Encoding the literal text "<|endoftext|>" does NOT produce it
 * (as in GPT-2's encoder); append it explicitly between documents. */
int pt_bpe_eot(const pt_bpe *t);

/* Release everything (NULL is ignored). */
void pt_bpe_free(pt_bpe *t);

#ifdef __cplusplus
}
#endif
#endif
