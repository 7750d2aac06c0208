/* SPDX-License-Identifier: MIT */
/* Byte-level BPE tokenizers (encoder and decoder): GPT-2's, and any byte-level
 * BPE given as a Hugging Face tokenizer.json -- Llama 3's among them.
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
 * Hugging Face tokenizer.json (the `tokenizers` library's serialisation;
 * Llama 3's: scripts/get-tokenizer-llama3.sh), read with jansson.  Accepted:
 *   model          {"type": "BPE", "vocab": {token: id}, "merges": [...]}:
 *                  merges as "a b" strings or ["a", "b"] pairs, rank = index
 *                  (a pair given twice keeps its later rank, as HF's map);
 *                  every token byte-level (GPT-2's alphabet), every one of
 *                  the 256 bytes a token, every merge's parts and result in
 *                  the vocabulary; "ignore_merges": true (Llama 3) makes a
 *                  pre-token that is itself in the vocabulary one token;
 *                  byte_fallback, dropout, continuing_subword_prefix and
 *                  end_of_word_suffix refused when set;
 *   added_tokens   [{"id", "content", ...}]: ids may lie beyond model.vocab
 *                  (Llama 3's 256 special tokens are 128000-128255); content
 *                  1-256 bytes; single_word, lstrip, rstrip true refused;
 *   pre_tokenizer  ByteLevel (add_prefix_space false; use_regex true: GPT-2's
 *                  pattern with JavaScript's \s as above, as tokenizers.js
 *                  has it -- HF's Rust uses Oniguruma's \s there, which
 *                  differs at U+0085 and U+FEFF), or a Sequence of Split (pattern {"Regex"} or
 *                  {"String"}, behavior Isolated, invert false), Digits and
 *                  exactly one ByteLevel: each split step cuts the pieces of
 *                  the one before (Llama 3: Split with the pattern
 *                  (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
 *                   ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+ ,
 *                  then ByteLevel without its own pattern);
 *   normalizer     null only; decoder ByteLevel or null; the post_processor
 *                  is not applied (no <|begin_of_text|> is prepended).
 * The patterns, written for Oniguruma (HF's Rust tokenizers), are compiled by
 * PCRE2 as tokenizers.js (npm @huggingface/tokenizers) translates them for
 * JavaScript: \s is Unicode White_Space (with U+0085, without U+FEFF: not
 * GPT-2's JavaScript \s above), and (?i:...) folds ASCII letters only.
 * Added tokens in the text: matched before the pre-tokenizer, left-most then
 * longest, and encoded as their ids -- Hugging Face's encode() default
 * (`split_special_tokens` false), so "<|end_of_text|>" in a Llama 3 text
 * becomes 128001.  Strip the markers from untrusted text when that is not
 * wanted.  (GPT-2's own files have no added tokens: there, "<|endoftext|>"
 * in the text is encoded as ordinary text, as GPT-2's encoder does.)
 * BPE: the lowest-ranked adjacent pair of ids merges first, the left-most of
 * equal ranks (HF tokenizers models/bpe/word.rs).  Ids equal tokenizers.js'
 * (and so Hugging Face's) on the whole KJV corpus and the hand-written
 * samples (tests/unit/test_tokenizer_llama3.sh).  The first split step sees
 * the text in windows of PT_BPE_LOOKAHEAD - 256 bytes: only a run of white
 * space longer than that (about 32 KB) can split otherwise than in HF.
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

/* Load a tokenizer.  `dir` is a directory holding encoder.json and
 * vocab.bpe (GPT-2's files), else vocab.json and merges.txt, else
 * tokenizer.json (Hugging Face; above) -- in that order; or a tokenizer.json
 * file itself; or, when no such path exists, a name: "gpt2" (the directory
 * in $PTRAIN_BPE_DIR) or "llama3" ($PTRAIN_LLAMA3_DIR).  Compiles the
 * pre-tokenisation patterns (PCRE2, UTF + UCP, JIT when available).
 * *out receives a handle to free with pt_bpe_free().  Each file's size is
 * checked before it is read.
 * Errors: PT_EINVAL (NULL argument), PT_EIO (file missing/unreadable, or
 * changed while it was read; a directory with none of the files, naming
 * them; a name whose variable is unset, naming it and the script that
 * prints it), PT_EFORMAT (a file over PT_BPE_FILE_MAX bytes, naming its size
 * and the limit; malformed JSON or merges, a JSON key given twice, token not
 * made of byte-level characters, an id given to two tokens, naming the id
 * and both; tokenizer.json: no model, no merges, a merge naming a token not
 * in the vocabulary, an added token's id outside [0, 2^24) or content over
 * 256 bytes, a byte without a token), PT_EUNSUPP (PCRE2 without UTF
 * support; tokenizer.json: a model other than BPE, byte_fallback, a
 * normalizer, a pre-tokenizer or decoder other than those above, naming the
 * value and the valid ones), PT_ENOMEM. */
int pt_bpe_load(pt_bpe **out, const char *dir);

/* Encode `len` bytes of UTF-8 `text` into token ids (tokenizer.json: added
 * tokens first, then the pre-tokenizer's steps, then BPE).  *ids receives a
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

/* Decode `n` ids into the concatenation of their tokens' bytes (an added
 * token: its content, as HF's decode with skip_special_tokens false).  *text
 * receives a malloc'd, NUL-terminated buffer of *len bytes (not counting the
 * NUL; free() it).  Unlike the JS decoder, invalid UTF-8 produced by a
 * partial sequence of ids is returned as is (no U+FFFD replacement).
 * Errors: PT_EINVAL (NULL argument, id outside [0, vocab_size)), PT_ENOMEM. */
int pt_bpe_decode(const pt_bpe *t, const int32_t *ids, size_t n, char **text, size_t *len);

/* Number of ids (max id + 1, added tokens included): 50257 for GPT-2,
 * 128256 for Llama 3. */
int pt_bpe_vocab_size(const pt_bpe *t);

/* The end-of-text id that separates documents, or -1 when there is none:
 * the token "<|end_of_text|>" (Llama 3: 128001), else "<|endoftext|>"
 * (GPT-2: 50256; Qwen2, SmolLM2), an added token or in the vocabulary.
 * With GPT-2's own files, encoding the literal text "<|endoftext|>" does NOT
 * produce it (as in GPT-2's encoder); with a tokenizer.json it does (added
 * tokens are matched in the text, above).  Put it between documents
 * explicitly. */
int pt_bpe_eot(const pt_bpe *t);

/* 1 when t splits text with GPT-2's own pre-tokenizer pattern (loaded from
 * GPT-2's encoder.json and vocab.bpe), whose splits at ASCII white space
 * after a printable non-space ASCII byte ptrain-data prepare's fast cut
 * relies on; 0 for a tokenizer.json (Llama 3's pattern keeps "!\n" in one
 * pre-token, for one: cut such text with pt_bpe_boundary) or NULL. */
int pt_bpe_gpt2_pattern(const pt_bpe *t);

/* Release everything (NULL is ignored). */
void pt_bpe_free(pt_bpe *t);

#ifdef __cplusplus
}
#endif
#endif
