/* SPDX-License-Identifier: MIT */
/* ptrain-ckpt's modules (bin/ckpt/): one subcommand or concern each;
 * main.c parses the command line (options.c) and dispatches.
 *
 *   options.c      the command line: usage, the subcommand and its options
 *   manifest.c     a checkpoint's directory (or save directory) and its
 *                  manifest: what info, verify, convert and sample read
 *   info.c         info: the manifest's summary
 *   verify.c       verify: every rank file against the manifest
 *   holder.c       the one-rank model that convert and sample go through
 *   llmc.c         llm.c's gpt2 model file (.bin): read and write
 *   safetensors.c  safetensors under Hugging Face GPT-2 names: the names, write
 *   hf_read.c      a Hugging Face GPT-2 model.safetensors (and its config.json)
 *                  read into a holder
 *   convert.c      convert: between checkpoints, llm.c and safetensors files
 *   sample.c       sample: text from a checkpoint's model
 *
 * Errors: the helpers return PT_OK or a negative PT_E* code with the message
 * in pt_errmsg() (lib/core/core.h); the subcommands print one line
 * (tool_die, bin/tool_util.h) and return the exit status (ptrain-ckpt(1)):
 * 0 success; 1 a problem found by verify, or a failure while converting;
 * 2 bad command line, or a missing/unreadable/malformed input. */
#ifndef PTRAIN_CKPT_TOOL_H
#define PTRAIN_CKPT_TOOL_H
#include "core/core.h"
#include "model/gpt.h"
#include "parallel/context.h"
#include "contract/plan.h"
#include "train/train.h"

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* llm.c's gpt2 model file (train_gpt2.c): a header of 256 int32 (magic,
 * version, maxT, V, L, NH, C, Vp), then the tensors */
#define LLMC_MAGIC 20240326
#define LLMC_VERSION_FP32 3
#define LLMC_VERSION_BF16 5 /* llm.c's bf16 model file (train_gpt2.py --dtype bfloat16) */
#define LLMC_HEADER_INTS 256
#define LLMC_PAD 128 /* llm.c pads the vocabulary to a multiple of 128 (train_gpt2.py, pad_vocab) */

/* ---- the command line (options.c) -------------------------------------- */

/* sample's options (the defaults are set by ckpt_options) */
typedef struct sample_opts {
    const char *prompt, *vocab_dir, *logits_file;
    long tokens, top_k;
    double temperature;
    unsigned long long seed;
    int ids;
} sample_opts;

/* The parsed command line: the subcommand, its options and its arguments. */
typedef struct ckpt_cmdline {
    const char *cmd;                  /* "info", "verify", "convert" or "sample" */
    const char *to, *model, *dtype;   /* convert's --to, --model, --dtype; NULL: not given */
    long long max_shard;              /* convert's --max-shard-size in bytes; 0: not given */
    sample_opts so;                   /* sample's options */
    char **args;                      /* the subcommand's arguments: 1 (convert: 2, SRC and DST) */
} ckpt_cmdline;

/* Print the usage text to f (stdout for --help, stderr for a bare
 * ptrain-ckpt).  No errors. */
void ckpt_usage(FILE *f);

/* Parse argv (argv[1] the subcommand) into *cl.  Returns -1 when the
 * subcommand is to run, else the exit status to leave with: 0 after --help
 * or --version, 2 (one line printed) for a bad command line. */
int ckpt_options(int argc, char **argv, ckpt_cmdline *cl);

/* ---- the manifest (manifest.c) ------------------------------------------ */

/* o's string member k, or "" when it is absent or not a string */
static inline const char *jstr(json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}
/* o's integer member k, or 0 when it is absent or not an integer */
static inline long long jint(json_t *o, const char *k) { return json_integer_value(json_object_get(o, k)); }

/* Whether p names a directory (stat, so through a link).  No errors. */
int ckpt_is_dir(const char *p);

/* The checkpoint directory named by arg, in out (n bytes): arg itself when
 * it holds manifest.json or has no `latest`, else the step-NNNNNNNN that
 * arg/latest names.  PT_EINVAL (a name over 4000 bytes), PT_EIO (not a
 * directory, unreadable pointer), PT_EFORMAT (a pointer that names no step
 * directory). */
int ckpt_resolve(const char *arg, char *out, size_t n);
/* DST as ptrain-run treats a --save-dir: usable (pt_ckpt_dir_check) and
 * locked against a job saving into it (*lockfd, -1 where the file system
 * has no locks: a warning on stderr then).  PT_OK or the check's error. */
int ckpt_dst_open(const char *dst, int *lockfd);

/* The model of a manifest (its "model" object) in *cfg.  PT_EFORMAT when
 * it is not a valid GPT-2 config. */
int ckpt_manifest_config(json_t *man, pt_gpt_config *cfg);

/* Bytes pt_ckpt_load of a checkpoint with manifest man (checked by
 * pt_ckpt_manifest_read) into a holder holds besides the model, at most:
 * saved under the holder's plan (one rank, the default plan), its rank
 * file (12 bytes per element); else, resharded, every tensor's full data,
 * m and v (12 bytes per element), its coverage (1 byte), the owned slices
 * cut from them (12 bytes), two index and two slice tensors and two
 * temporaries of the largest tensor (24 bytes per element) and one rank
 * file at a time.  No errors. */
double ckpt_load_bytes(json_t *man);

/* A manifest saved before manifests had a checksum: accepted, said once on
 * stderr (path: the checkpoint directory).  No errors. */
void ckpt_old_manifest_warning(const char *path, json_t *man);

/* ---- the subcommands (info.c, verify.c, convert.c, sample.c) ------------- */

/* info DIR: the manifest's summary on stdout.  Returns 0, or 2 (one line)
 * for a checkpoint that cannot be read. */
int ckpt_info(const char *arg);

/* verify DIR: the manifest's consistency (its run state's ranges
 * included) and each rank file's size, FNV-1a 64 and floats (weights and
 * AdamW m finite, AdamW v finite and >= 0), one line per problem on
 * stdout.  Returns 0 (sound) or 1. */
int ckpt_verify(const char *arg);

/* convert SRC DST (--to, --dtype, --model: NULL when not given).  Returns
 * 0, 1 (a model beyond the memory this process may use, a failure while
 * converting or writing) or 2 (bad options, a missing, unreadable or
 * malformed SRC: a manifest number out of range, a weight that is not
 * finite); one line on stderr for each. */
int ckpt_convert(const char *to, const char *dtype, const char *model, long long max_shard, const char *src,
                 const char *dst);

/* sample DIR: so->tokens tokens sampled from the checkpoint's model, on
 * stdout.  Returns 0, 1 (a model beyond the memory this process may use, a
 * failure while sampling or writing) or 2 (a bad tokenizer, checkpoint,
 * prompt or --logits file); one line on stderr. */
int ckpt_sample(const char *arg, const sample_opts *so);

/* The index of the first element of x [n] (fp32) that is not finite (NaN
 * or an infinity), or -1 when every one is.  No errors. */
static inline long long ckpt_first_nonfinite(const float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!(x[i] - x[i] == 0)) return (long long)i; /* NaN - NaN and inf - inf are NaN */
    return -1;
}

/* ---- a one-rank model to convert through (holder.c) ---------------------- */

typedef struct holder {
    pt_plan plan;
    pt_pctx ctx;
    pt_arena arena;
    pt_gpt model;
    pt_train tr;
    int have_ctx, have_model, have_tr;
} holder;

/* The whole model cfg on this process alone (dp = tp = pp = 1), with its
 * training state (16 bytes per parameter) and activations for one sequence
 * of T tokens; starts MPI when it is not started.  PT_EINVAL (more than one
 * rank), PT_EUNSUPP (no cpu backend), or the errors of pt_pctx_init,
 * pt_gpt_create and pt_train_create; what was built is freed by
 * ckpt_holder_free. */
int ckpt_holder_build(holder *h, const pt_gpt_config *cfg, int T);

/* Free what ckpt_holder_build built (also after it failed half way). */
void ckpt_holder_free(holder *h);

/* Whether ckpt_holder_build(cfg, T) and `extra` more bytes (the caller's
 * buffers: a file's tensors read into memory) fit in the memory this
 * process may use: the host-memory check ptrain-run makes
 * (lib/core/hostmem.h), the holder's bytes from the cost model (its
 * parameters, gradients, AdamW m and v, 16 bytes per parameter, and the
 * activations of T tokens).  Call it before reading a file's tensors, so
 * that a model beyond the machine is refused in one line rather than the
 * process killed.  PT_OK, or PT_ENOMEM: "model L=.. H=.. C=.. T=.. V=..
 * needs X GiB (...), but this process may use Y GiB (...)". */
int ckpt_holder_fits(const pt_gpt_config *cfg, int T, double extra);

/* the full tensor [rows, cols] of whole-model parameter index idx */
static inline pt_param *param_at(holder *h, int idx) { return &h->model.params[h->model.pidx[idx]]; }

/* ---- model files (llmc.c, safetensors.c, hf_read.c) ----------------------- */

/* Read an llm.c gpt2 model file (version 3, fp32, or 5, bf16) into a fresh
 * holder h (step 0, zero AdamW state) and its model into *cfg.  PT_EIO
 * (unreadable), PT_EFORMAT (not such a file, or of the wrong size, or a
 * weight that is not finite: the message names llm.c's tensor, the element
 * and the layer), PT_ENOMEM (also from ckpt_holder_fits, before the body is
 * read), or ckpt_holder_build's errors. */
int ckpt_llmc_read(const char *file, holder *h, pt_gpt_config *cfg);

/* Write h's model to out as llm.c's gpt2 model file: version 3 (fp32) or,
 * with bf16, version 5; *bytes: the file's size in bytes.  Replaced
 * atomically (pt_atomic_open); PT_EIO on a failed write, or the errors of
 * pt_atomic_open and pt_atomic_commit. */
int ckpt_llmc_write(holder *h, const char *out, int bf16, int64_t *bytes);

/* One tensor under its Hugging Face GPT-2 name (transformers' GPT2Model
 * state dict) */
typedef struct st_entry {
    char name[48];
    int idx;      /* ptrain parameter index */
    int64_t rows; /* rows taken from ptrain's tensor (wte: V) */
    int transpose;
    int vec;      /* 1-D */
} st_entry;

/* The 4 + 12 L tensors of a model cfg under Hugging Face's names, in
 * ptrain's order, in *out (the caller frees it).  Returns their number, or
 * PT_ENOMEM. */
int ckpt_st_entries(const pt_gpt_config *cfg, st_entry **out);

/* Write h's model to out as safetensors under Hugging Face GPT-2 names,
 * F32 (step: in the metadata); *bytes: the file's size in bytes.  Replaced
 * atomically; PT_ENOMEM, PT_EIO on a failed write, or the errors of
 * pt_atomic_open and pt_atomic_commit. */
int ckpt_st_write(holder *h, const char *out, long step, int64_t *bytes);

/* Read a Hugging Face GPT-2 model.safetensors into a fresh holder h (step
 * 0, zero AdamW state): its shape from model (--model NAME|L,H,C,T,V) or,
 * when model is NULL, config.json beside the file, in *cfg, and where it
 * came from in from (fn bytes).  PT_EINVAL (a bad --model, no config.json),
 * PT_EFORMAT (a tensor or config field that is not of this GPT-2 model, a
 * weight that is not finite: the tensor and the element named),
 * PT_ENOMEM (also from ckpt_holder_fits, before any tensor is read), or the
 * errors of pt_st_open, pt_st_read_f32 and ckpt_holder_build. */
int ckpt_st_read(const char *file, const char *model, holder *h, pt_gpt_config *cfg, char *from, size_t fn);

/* ---- Hugging Face Llama-family models (llama.c) ---------------------------- */

/* The shape of a Llama-family config.json (parsed: c; named path in
 * messages) into *m: LlamaForCausalLM, Qwen2ForCausalLM (q/k/v biases),
 * MistralForCausalLM without a sliding window.  PT_EFORMAT: one line
 * naming the field, its value and what would be valid. */
int ckpt_llama_config(json_t *c, const char *path, pt_model_shape *m);

/* Whether convert's SRC is a Hugging Face Llama-family model: a directory
 * (not a checkpoint) or a file beside a config.json of that family, a
 * model.safetensors.index.json, or model (--model) a llama shape.  No
 * errors. */
int ckpt_hf_is_llama(const char *src, const char *model);

/* convert SRC (a Hugging Face Llama-family directory or file) DST (a save
 * directory): streamed into checkpoint DST/step-00000000 (see llama.c).
 * PT_OK, or an error with its one line. */
int ckpt_llama_in(const char *src, const char *model, const char *dst);

/* convert a checkpoint (path, its checked manifest man, model m) of a llama
 * model to Hugging Face safetensors: dir 1, DST a directory with
 * config.json, model.safetensors or shards and their index; dir 0, DST one
 * .safetensors file.  dtype: NULL (the recorded dtypes, else F32), "fp32",
 * "bf16" or "fp16"; max_shard: 0, or bytes per file (transformers'
 * max_shard_size).  PT_OK, or an error with its one line. */
int ckpt_llama_out(const char *path, json_t *man, const pt_model_shape *m, const char *dst, int dir, const char *dtype,
                   long long max_shard);

#endif
