/* SPDX-License-Identifier: MIT */
/* Checkpoints (lib/ckpt): save and resume the training state of every
 * rank, resumed under the same plan.
 *
 * Layout on disk.  A checkpoint is a directory DIR/step-NNNNNNNN (8-digit
 * optimizer step) holding
 *   rank-RRRRR.bin   one per grid rank: for each parameter the rank holds,
 *                    in model order, the floats [lo, hi) of its local shard
 *                    it owns (pt_train_owned_state: the whole shard under
 *                    allreduce, the ZeRO own slice otherwise) of the
 *                    parameter, then of AdamW m, then of AdamW v (fp32,
 *                    host byte order);
 *   rank-RRRRR.json  the rank's description of that file (bytes, FNV-1a 64,
 *                    grid coordinates, per tensor: index, full shape,
 *                    local numel, [lo, hi), byte offset);
 *   manifest.json    written LAST by rank 0, after every rank file was
 *                    fsynced and renamed (a collective agreement): format,
 *                    step, AdamW step, the model config, the plan (summary,
 *                    world, dp/tp/pp/sp, ZeRO stage), lr schedule inputs,
 *                    data position, the initialisation seed, every tensor's
 *                    full shape, the rank files' descriptions above and,
 *                    last, its own checksum "manifest_fnv1a64": FNV-1a 64
 *                    (16 hex digits) of the file's bytes with those 16
 *                    digits replaced by '0' characters.
 * and DIR/latest names the newest complete checkpoint ("step-NNNNNNNN\n"),
 * replaced last.  Every file is written atomically (lib/core/file.h:
 * O_TMPFILE or an O_EXCL temporary, fsync, rename, directory fsync), so a
 * crash leaves either the previous checkpoint or the new one, and a
 * directory without manifest.json is never loaded.  A save is written into
 * DIR/.step-NNNNNNNN.tmp.XXXXXXXXXXXX (12 hex digits drawn by the saving
 * job) and renamed to step-NNNNNNNN when complete.
 *
 * The save directory DIR belongs to one job at a time: pt_ckpt_dir_lock
 * holds an exclusive flock(2) on DIR/.ptrain-lock for the job's life.
 * Nothing is ever written or deleted through a symbolic link: a step-*
 * entry that is not a real directory (an archived checkpoint linked back
 * in) is neither pruned nor saved over.
 *
 * The layout of rank files follows Megatron-LM's per-rank checkpoint
 * files (mp_rank_XX) and DeepSpeed's per-rank ZeRO optimizer state files
 * (Rajbhandari et al. 2020, section 5: each rank saves the partition it
 * owns); the manifest plays the role of PyTorch Distributed Checkpoint's
 * metadata file (written last by the coordinator).
 *
 * Resuming under another plan reshards (pt_ckpt_load).
 *
 * Every function here is collective over the model's world (ctx->world):
 * all ranks call it with the same arguments, and all return the same
 * status; a failure on any rank is reported on every rank with the
 * failing rank's one-line message (pt_errmsg()), which starts with
 * "rank R: " (the first failing rank) when not every rank failed.
 */
#ifndef PTRAIN_CKPT_H
#define PTRAIN_CKPT_H
#include "contract/plan.h"
#include "train/train.h"

/* The largest step (and AdamW step, warmup, schedule length) a manifest
 * may record: ptrain-run's --steps range. */
#define PT_CKPT_MAX_STEP 100000000L

/* Whether name is a checkpoint directory's name, "step-%08ld" of a step in
 * [0, PT_CKPT_MAX_STEP]: 8 digits, or 9 from step 10^8, no other spelling
 * ("step-012345678" is not one); 1 and *step, else 0. */
int pt_ckpt_step_name(const char *name, long *step);
/* The step directory a `latest` pointer of len bytes names: its first
 * line, when pt_ckpt_step_name takes it, into name (NUL-terminated) and
 * *step; 1, else 0 (name then unspecified). */
int pt_ckpt_pointer_parse(const char *text, size_t len, char name[16], long *step);
/* The largest learning rate (lr, min_lr) a manifest may record: ptrain-run's --lr range. */
#define PT_CKPT_MAX_LR 10.0f

/* The run state a checkpoint records besides the tensors.  Every member
 * read back (pt_ckpt_load) was range-checked in the manifest first
 * (pt_ckpt_manifest_check). */
typedef struct pt_ckpt_meta {
    long step;          /* optimizer steps completed = the data loader's position
                           (pt_loader_batch is a function of the step) */
    int adam_step;      /* AdamW's t (bias correction), pt_train.step */
    long seed;          /* initialisation seed (--seed); no other RNG stream is
                           consumed during training */
    float lr, min_lr;   /* learning-rate schedule inputs (pt_lr_schedule) */
    long warmup;        /* warmup steps */
    long total_steps;   /* the schedule's total steps */
    float beta1, beta2, adam_eps, weight_decay, grad_clip; /* AdamW's settings (0: a checkpoint
                           of a ptrain that did not record them) */
    char model[32];     /* preset name ("test", "tiny", ...) */
    char data[256];     /* data spec (--data) */
} pt_ckpt_meta;

/* Save the state of registry t (model built under plan `plan`) as
 * checkpoint `dir`/step-NNNNNNNN with meta->step, then point dir/latest at
 * it and, when keep > 0, remove all but the newest `keep` step-* checkpoints
 * of dir.  dir is created (one level) when absent.  A previous checkpoint
 * of the same step is removed (its manifest first) only once the new one
 * is complete.  Removal never follows a symbolic link: a step-* entry that
 * is not a real directory is left alone by --keep (one warning line through
 * pt_log on rank 0), and a save over one is refused.  The caller should
 * hold dir's lock (pt_ckpt_dir_lock); without it, the temporary directory's
 * name is still unique to this save.  saved (may be NULL) receives the
 * checkpoint's path (NUL-terminated, truncated to n bytes).  Bytes written
 * per rank: 12 * (owned floats) plus about 200 per tensor.
 * Errors (every rank): PT_EIO (a file or directory cannot be written:
 * disk full, permissions; or step-NNNNNNNN exists and is not a directory;
 * the message names it; the previous checkpoint and `latest` are left as
 * they were), PT_EINVAL (dir longer than 4000 bytes), PT_ENOMEM. */
int pt_ckpt_save(const char *dir, pt_train *t, const pt_plan *plan, const pt_gpt_config *cfg,
                 const pt_ckpt_meta *meta, int keep, char *saved, size_t n);

struct json_t; /* jansson's JSON value */

/* pt_ckpt_save, with the members of extra (may be NULL; not stolen; rank
 * 0's is written) merged into the manifest: e.g. the "hf" record of a
 * model converted from Hugging Face files, carried to its fine-tuned
 * checkpoints. */
int pt_ckpt_save_extra(const char *dir, pt_train *t, const pt_plan *plan, const pt_gpt_config *cfg,
                       const pt_ckpt_meta *meta, struct json_t *extra, int keep, char *saved, size_t n);

/* Load checkpoint directory `path` (a step-NNNNNNNN directory) into t,
 * whose model was built under the same plan and model config: every rank
 * reads the manifest (pt_ckpt_manifest_read: its checksum and every check
 * of pt_ckpt_manifest_check), checks model config, plan (summary and
 * world) and its own rank file (size and FNV-1a 64 against the manifest,
 * tensor list against its own), and only when every rank succeeded copies
 * parameters, m and v into its owned slices, sets t->step and makes
 * replicated copies current (pt_train_state_loaded).  *meta receives the
 * recorded run state.  On error t is unchanged.
 * Every rank file read is checked float by float
 * (pt_ckpt_rank_file_finite) before anything is copied: non-finite
 * weights are refused here, not trained from.
 * Errors (every rank, one line naming the checkpoint and what is wrong):
 * PT_EIO (missing manifest or rank file), PT_EFORMAT (manifest not valid
 * JSON or incomplete, a run-state member out of range, truncated rank
 * file, checksum mismatch, a tensor element no file holds, a weight or
 * AdamW moment that is not finite), PT_EINVAL (saved for another model
 * config), PT_ENOMEM.
 * Another plan (any mode, dp/tp/pp/sp, ZeRO stage, world size) is loaded by
 * resharding: every rank rebuilds the full tensors of its parameters from
 * the files holding them (the saving ranks' slices recovered by slicing an
 * index tensor with the saved plan's layout) and cuts its own shard with its
 * layout's param_slice; memory 12 bytes per full element of its parameters,
 * and it reads and checksums every file holding one of them. */
int pt_ckpt_load(const char *path, pt_train *t, const pt_plan *plan, const pt_gpt_config *cfg, pt_ckpt_meta *meta);

struct json_t; /* jansson's JSON value */

/* The manifest's own checksum member (see the layout above). */
#define PT_CKPT_MANIFEST_SUM "manifest_fnv1a64"

/* Read the manifest of checkpoint directory `path` (a step-NNNNNNNN
 * directory, DIR/manifest.json in the layout above) without reading any
 * rank file: parse it (duplicate keys refused), check its format line
 * ("ptrain-checkpoint" version 1) and its checksum member
 * PT_CKPT_MANIFEST_SUM.  A manifest without that member (saved before it
 * existed) is accepted: the caller can tell by
 * json_object_get(*man, PT_CKPT_MANIFEST_SUM) == NULL and should warn.
 * Does NOT check consistency (pt_ckpt_manifest_check).  Needs no MPI; not
 * collective.  On success *man receives the parsed manifest (the caller
 * json_decref()s it); on error *man is NULL.
 * Errors: PT_EINVAL (a path longer than 4200 bytes), PT_EIO (path is not a
 * directory, has no manifest.json: an incomplete save or not a checkpoint,
 * or it cannot be read), PT_EFORMAT (not valid JSON: the message gives
 * the line; another format or version; a checksum that does not match:
 * the manifest was edited or corrupted), PT_ENOMEM. */
int pt_ckpt_manifest_parse(const char *path, struct json_t **man);

/* Check a parsed manifest's consistency before any number in it is used
 * to address a file or to train: the run state (step an integer in [0,
 * PT_CKPT_MAX_STEP]; adam_step an integer in [0, step]; data an object
 * with a string spec and position_step equal to step; lr_schedule's lr
 * and min_lr numbers in [0, PT_CKPT_MAX_LR], warmup and total_steps
 * integers in [0, PT_CKPT_MAX_STEP]; rng.init_seed an integer in [0,
 * 2^31 - 1]; model_name a string; optimizer, when present (older ptrain
 * wrote none), beta1 and beta2 in [0, 0.999999], eps in [0, 1],
 * weight_decay in [0, 10], grad_clip in [0, 10^6]: ptrain-run's option
 * ranges, 0 meaning not recorded), model config (all >= 1, at most 2^31 - 1, heads
 * dividing the width), plan (world in [1, 2^24], dp, tp, pp, sp >= 1 with
 * product world, mode a tensor-parallel layout's name, tp_depth in [1,
 * tp], zero in [0, 3]), tensor list (4 + 12 L entries, entry i has index i and
 * rows, cols >= 1 with rows * cols <= 2^40 elements), one rank file per
 * rank of the plan (entry r has rank r, a name without '/' not starting
 * with '.', bytes in [0, 2^62], 16 hex digits of FNV-1a 64, grid
 * coordinates inside the plan), each file's tensor slices (index of the
 * tensor list with its name, 0 <= lo <= hi <= local_numel <= rows * cols,
 * offsets contiguous from 0 in order, 12 (hi - lo) bytes each, filling
 * exactly `bytes`), and every tensor held by some file.  Every number is
 * checked for type and range before arithmetic, so no check overflows.
 * report(arg, msg) (may be NULL) is called once per problem with one line
 * starting "checkpoint PATH: " (path names the checkpoint in messages).
 * Returns the number of problems (0: consistent).  Not collective. */
int pt_ckpt_manifest_check(const char *path, struct json_t *man, void (*report)(void *arg, const char *msg),
                           void *arg);

/* pt_ckpt_manifest_parse, then pt_ckpt_manifest_check: the first problem
 * found is the error (PT_EFORMAT, its one line).  This is the reader
 * pt_ckpt_load starts with, so tools (ptrain-ckpt info, verify, convert)
 * accept exactly the manifests a resume accepts.  Reads one file of a few
 * KB per tensor and rank.  Errors: pt_ckpt_manifest_parse's. */
int pt_ckpt_manifest_read(const char *path, struct json_t **man);

/* Check the floats of one rank file of checkpoint `path` (named in the
 * message): `file` is its manifest entry (name; tensors with lo, hi,
 * offset, as pt_ckpt_manifest_check accepts them), buf [len bytes] the
 * file's contents (host byte order floats; any alignment).  For every
 * tensor slice, its hi - lo weights and AdamW m must be finite and its
 * AdamW v finite and >= 0.  Reads len bytes once; no allocation.  Not
 * collective.  Errors: PT_EFORMAT, one line naming the checkpoint, the
 * file, which of weight / AdamW m / AdamW v, the first bad element (its
 * index in the saving rank's shard of the tensor: lo + k), the tensor and
 * the value; or a slice outside buf. */
int pt_ckpt_rank_file_finite(const char *path, struct json_t *file, const void *buf, size_t len);

/* Make save directory `dir` ready for a run, before its first save: create
 * it when absent (one level, mode 0755), check that it is a directory
 * (a symbolic link to one is followed: the user named it), that its
 * checkpoint pointer DIR/latest, which every save replaces, is absent or
 * a regular file (pt_output_check: a symbolic link there is refused, not
 * followed, now rather than at the first save), and create,
 * write 6 bytes to, close and remove a probe file DIR/.ptrain-probe.HOST.
 * PID.N (O_EXCL|O_NOFOLLOW), so that a read-only file system, a full disk
 * or missing permissions are found at start-up rather than after hours of
 * training.  Call it on every rank that writes rank files (all of them).
 * Not collective.  Errors (one line naming dir and the reason): PT_EINVAL
 * (longer than 4000 bytes), PT_EIO (cannot be created, not a directory,
 * DIR/latest is not a regular file, the probe cannot be written). */
int pt_ckpt_dir_check(const char *dir);

/* Claim save directory `dir` (existing; pt_ckpt_dir_check) for this job:
 * open or create DIR/.ptrain-lock (a regular file, never through a
 * symbolic link) and take an exclusive, non-blocking flock(2) on it, then
 * replace its contents by one line "job JOB host HOST pid PID\n" (JOB:
 * `job`, e.g. $SLURM_JOB_ID, or "-" when NULL) and remove the temporary
 * directories (.step-*.tmp*) that killed saves left (no save can be under
 * way: the lock is ours).  *fd receives the locked descriptor: keep it
 * open for the run; the lock goes with the process (exit, crash, kill:
 * the kernel releases it, so a dead holder's lock is reclaimed by the
 * next job; on NFS the server does so once the dead client's lease ends).
 * The file is never removed (a removed lock file would let a third job
 * lock a new one while the second holds the old).  Call it on one rank of
 * the job, which lives as long as the job; not collective.
 * Errors: PT_EIO (another process holds the lock: the message names the
 * holder's line and the lock file; or the lock file cannot be opened or
 * written), PT_EUNSUPP (the file system has no flock, e.g. Lustre mounted
 * without -o flock: *fd is -1 and the caller may go on unlocked after a
 * warning), PT_EINVAL (dir longer than 4000 bytes). */
int pt_ckpt_dir_lock(const char *dir, const char *job, int *fd);

/* Resume: `spec` is "auto" or a checkpoint directory.  "auto": try the
 * checkpoints of save_dir newest first (dir/latest's target first, then
 * every step-* directory in decreasing step order); a refused one is
 * reported through warn(msg) (may be NULL) and the previous one tried.
 * *loaded = 1 when one was loaded (then *meta and the path in `which`,
 * n bytes), 0 when none was valid or save_dir has none (start fresh).
 * A directory spec must load: its errors are pt_ckpt_load's (a save dir
 * with a `latest` file is accepted as the checkpoint latest names).
 * Errors: pt_ckpt_load's; PT_EINVAL ("auto" without save_dir). */
int pt_ckpt_resume(const char *spec, const char *save_dir, pt_train *t, const pt_plan *plan,
                   const pt_gpt_config *cfg, pt_ckpt_meta *meta, int *loaded, char *which, size_t n,
                   void (*warn)(const char *msg));

/* ---- the model a manifest records -------------------------------------------
 * The manifest's "model" object: n_layer, n_head, n_embd, seq_len, vocab,
 * "family" ("gpt2" or "llama"), "spec" (pt_model_shape_format's spelling)
 * and, for llama, n_kv_head, ffn, untied, qkv_bias, norm_eps, rope_theta,
 * rope_factor, rope_low_freq, rope_high_freq, rope_orig_ctx.  A manifest
 * without "family" (saved before Llama) is GPT-2's. */
struct json_t *pt_ckpt_model_json(const pt_model_shape *m);
/* The shape of a manifest's "model" object into *m: PT_OK, or PT_EFORMAT
 * (one line naming the value and what would be valid). */
int pt_ckpt_model_shape(struct json_t *model, pt_model_shape *m);

/* The tensor data of a one-rank checkpoint written without a model:
 * elements [first, first + n) of whole-model parameter index (row-major
 * [rows, cols] of pt_model_param_info) into dst.  PT_OK or an error with
 * its one line. */
typedef int (*pt_ckpt_fill_fn)(void *arg, int index, int64_t first, int64_t n, float *dst);

/* Write checkpoint dir/step-NNNNNNNN (meta->step) of model m as a
 * one-process run under the default plan saves it (pt_ckpt_save's layout,
 * so pt_ckpt_load reads it under any plan), its weights from fill, in
 * blocks of at most 1 Mi elements, and zero AdamW moments; nothing but one
 * block in memory, so a model of any size converts in a few MB.  extra
 * (may be NULL; not stolen) is merged into the manifest (e.g. "hf", the
 * layout a model came from).  Not collective (no MPI).  saved (may be
 * NULL) receives the checkpoint's path.  Errors: fill's, PT_EIO,
 * PT_EINVAL (dir over 4000 bytes), PT_ENOMEM. */
int pt_ckpt_write_model(const char *dir, const pt_model_shape *m, const pt_ckpt_meta *meta, struct json_t *extra,
                        pt_ckpt_fill_fn fill, void *arg, char *saved, size_t n);

#endif
