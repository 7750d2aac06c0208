/* SPDX-License-Identifier: MIT */
/* ptrain-ckpt: describe, verify and convert ptrain checkpoints.
 * See man/ptrain-ckpt.1.
 *
 *   info DIR            the manifest's summary: model, plan, step, lr
 *                       schedule, files, tensors (no MPI, reads no tensor)
 *   verify DIR          every rank file's size and FNV-1a 64 against the
 *                       manifest, and the manifest's own consistency; one
 *                       line per problem, exit 0 (sound) or 1
 *   convert SRC DST     a checkpoint to llm.c's gpt2 .bin (version 3, fp32)
 *                       or to safetensors (Hugging Face GPT-2 names), and an
 *                       llm.c .bin or a Hugging Face GPT-2 model.safetensors
 *                       (lib/ckpt/safetensors.h reads it) to a checkpoint
 *                       ptrain-run --resume can fine-tune from (step 0,
 *                       fresh AdamW state) or to the other formats.
 *
 * Converting goes through a one-rank model: the checkpoint is loaded with
 * pt_ckpt_load, which reshards any saved plan (tp, pp, ZeRO, world size) to
 * the full tensors, so the tool needs no knowledge of layouts; an llm.c file
 * is written into a fresh model's registry and saved with pt_ckpt_save.
 * ptrain's weights are [out, in] (PyTorch nn.Linear, lib/core/core.h), as
 * llm.c's (train_gpt2.c, fill_in_parameter_sizes: wte [Vp, C], wpe [maxT,
 * C], ln1w [L, C], ln1b, qkvw [L, 3C, C], qkvb [L, 3C], attprojw [L, C, C],
 * attprojb, ln2w, ln2b, fcw [L, 4C, C], fcb [L, 4C], fcprojw [L, C, 4C],
 * fcprojb, lnfw [C], lnfb [C]), so llm.c's tensors are copied as they are;
 * Hugging Face's GPT-2 uses Conv1D ([in, out]) for c_attn, c_proj, c_fc and
 * mlp.c_proj, which are transposed (through the backend's copy2d).
 *
 * Exit status: 0 success; 1 a problem found by verify, or a failure while
 * converting; 2 bad command line, or a missing/unreadable/malformed input. */
#define _GNU_SOURCE
#include "config.h"
#include "backend/gemm_bf16.h"
#include "backend/ops.h"
#include "ckpt/ckpt.h"
#include "ckpt/safetensors.h"
#include "bin/tool_util.h"
#include "core/core.h"
#include "core/file.h"
#include "data/bpe.h"
#include "data/shard.h"
#include "model/gpt.h"
#include "optim/adamw.h"
#include "parallel/context.h"
#include "plan/cost.h"
#include "plan/plan.h"
#include "train/train.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *const tool_name = "ptrain-ckpt";

#define LLMC_MAGIC 20240326
#define LLMC_VERSION_FP32 3
#define LLMC_VERSION_BF16 5 /* llm.c's bf16 model file (train_gpt2.py --dtype bfloat16) */
#define LLMC_HEADER_INTS 256
#define LLMC_PAD 128 /* llm.c pads the vocabulary to a multiple of 128 (train_gpt2.py, pad_vocab) */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: ptrain-ckpt COMMAND [OPTIONS] ARGS\n"
            "  info DIR            print a checkpoint's manifest summary: model, plan, step, lr\n"
            "                      schedule, data, rank files and tensors\n"
            "  verify DIR          check every rank file's size and checksum and the manifest;\n"
            "                      one line per problem; exit 0 when sound, 1 otherwise\n"
            "  convert [--to FORMAT] [--dtype fp32|bf16] [--model M] SRC DST\n"
            "                      SRC: a checkpoint, an llm.c gpt2 .bin (version 3, fp32, or 5,\n"
            "                      bf16), or a\n"
            "                      Hugging Face GPT-2 model.safetensors (F32, F16 or BF16; its shape\n"
            "                      from config.json beside it, or --model NAME|L,H,C,T,V);\n"
            "                      FORMAT: llmc (llm.c's .bin), safetensors (Hugging Face GPT-2\n"
            "                      names), ckpt (a save directory that ptrain-run --resume DST\n"
            "                      fine-tunes from: step 0, fresh AdamW state; from a model file);\n"
            "                      default from DST: *.bin llmc, *.safetensors safetensors, else ckpt;\n"
            "                      --dtype bf16 writes llm.c's version 5 (bf16, rounded to nearest\n"
            "                      even) instead of version 3 (fp32, the default)\n"
            "  sample [--prompt TEXT] [--tokens N] [--temperature F] [--top-k K] [--seed S]\n"
            "         [--vocab-dir DIR] [--ids] [--logits FILE] DIR\n"
            "                      print TEXT and N (default 64) tokens sampled from the checkpoint's\n"
            "                      model, decoded with GPT-2's BPE (DIR: $PTRAIN_BPE_DIR); F default 1,\n"
            "                      K default 0 = all ids (1: greedy), S default 1337 (same seed, same\n"
            "                      text); --ids prints the new ids instead, one per line; --logits\n"
            "                      writes each step's logits (fp32 [N, V]) to FILE\n"
            "DIR is a checkpoint (DIR/manifest.json) or a save directory (its DIR/latest).\n"
            "--help, --version: this text; the version.\n");
}

/* ---- manifest ------------------------------------------------------------ */

static const char *jstr(json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}
static long long jint(json_t *o, const char *k) { return json_integer_value(json_object_get(o, k)); }

static int is_dir(const char *p)
{
    struct stat sb;
    return !stat(p, &sb) && S_ISDIR(sb.st_mode);
}

/* The checkpoint directory named by arg: arg itself when it holds
 * manifest.json or has no `latest`, else the step-NNNNNNNN that arg/latest
 * names.  PT_EIO (not a directory, unreadable pointer), PT_EFORMAT (a
 * pointer that names no step directory). */
static int resolve(const char *arg, char *out, size_t n)
{
    char p[4200];
    if (strlen(arg) > 4000) return pt_fail(PT_EINVAL, "checkpoint name of %zu bytes is too long (at most 4000)", strlen(arg));
    if (!is_dir(arg)) return pt_fail(PT_EIO, "checkpoint %s: not a directory", arg);
    snprintf(p, sizeof p, "%s/manifest.json", arg);
    if (!access(p, F_OK)) return snprintf(out, n, "%s", arg), PT_OK;
    snprintf(p, sizeof p, "%s/latest", arg);
    if (access(p, F_OK)) return snprintf(out, n, "%s", arg), PT_OK;
    char *txt = NULL;
    size_t len;
    int rc = pt_read_regular(p, "checkpoint pointer", &txt, &len);
    if (rc) return rc;
    int good = len >= 13 && !strncmp(txt, "step-", 5) && (len == 13 || txt[13] == '\n');
    for (int i = 5; good && i < 13; i++) good = txt[i] >= '0' && txt[i] <= '9';
    if (!good) {
        free(txt);
        return pt_fail(PT_EFORMAT, "checkpoint pointer %s does not name a step-NNNNNNNN directory", p);
    }
    txt[13] = 0;
    snprintf(out, n, "%s/%s", arg, txt);
    free(txt);
    return PT_OK;
}

static int manifest_config(json_t *man, pt_gpt_config *cfg)
{
    json_t *mc = json_object_get(man, "model");
    cfg->n_layer = (int)jint(mc, "n_layer");
    cfg->n_head = (int)jint(mc, "n_head");
    cfg->n_embd = (int)jint(mc, "n_embd");
    cfg->seq_len = (int)jint(mc, "seq_len");
    cfg->vocab = (int)jint(mc, "vocab");
    if (cfg->n_layer < 1 || cfg->n_head < 1 || cfg->n_embd < 1 || cfg->n_embd % cfg->n_head || cfg->seq_len < 1 ||
        cfg->vocab < 1)
        return pt_fail(PT_EFORMAT, "manifest model L=%d H=%d C=%d T=%d V=%d is not a valid GPT-2 config", cfg->n_layer,
                       cfg->n_head, cfg->n_embd, cfg->seq_len, cfg->vocab);
    return PT_OK;
}

/* a manifest saved before manifests had a checksum: accepted, said once on stderr */
static void old_manifest_warning(const char *path, json_t *man)
{
    if (!json_object_get(man, PT_CKPT_MANIFEST_SUM))
        fprintf(stderr, "ptrain-ckpt: warning: checkpoint %s: manifest.json has no checksum (saved by an older ptrain); "
                        "accepted after its consistency checks\n", path);
}

/* ---- info ------------------------------------------------------------------ */

static int cmd_info(const char *arg)
{
    char path[4200];
    json_t *man;
    if (resolve(arg, path, sizeof path) || pt_ckpt_manifest_read(path, &man)) return tool_die(2, "info: %s", pt_errmsg());
    old_manifest_warning(path, man);
    json_t *mc = json_object_get(man, "model"), *mp = json_object_get(man, "plan"),
           *ls = json_object_get(man, "lr_schedule"), *files = json_object_get(man, "files"),
           *tens = json_object_get(man, "tensors");
    printf("checkpoint: %s\n", path);
    printf("step: %lld (AdamW step %lld)\n", jint(man, "step"), jint(man, "adam_step"));
    /* sums of numbers pt_ckpt_manifest_check bounded, taken unsigned: never undefined */
    unsigned long long nparam = 0;
    size_t k;
    json_t *x;
    json_array_foreach(tens, k, x) nparam += (unsigned long long)jint(x, "rows") * (unsigned long long)jint(x, "cols");
    printf("model: %s L=%lld H=%lld C=%lld T=%lld V=%lld, %.3fM parameters (with vocabulary padding)\n",
           *jstr(man, "model_name") ? jstr(man, "model_name") : "(unnamed)", jint(mc, "n_layer"), jint(mc, "n_head"),
           jint(mc, "n_embd"), jint(mc, "seq_len"), jint(mc, "vocab"), (double)nparam / 1e6);
    printf("plan: %s (world %lld: mode %s, dp=%lld tp=%lld pp=%lld sp=%lld, ZeRO stage %lld)\n", jstr(mp, "summary"),
           jint(mp, "world"), jstr(mp, "mode"), jint(mp, "dp"), jint(mp, "tp"), jint(mp, "pp"), jint(mp, "sp"),
           jint(mp, "zero"));
    printf("lr schedule: lr %g -> min_lr %g, warmup %lld, total steps %lld\n",
           json_number_value(json_object_get(ls, "lr")), json_number_value(json_object_get(ls, "min_lr")),
           jint(ls, "warmup"), jint(ls, "total_steps"));
    printf("data: %s (position: step %lld); init seed %lld\n", *jstr(json_object_get(man, "data"), "spec") ? jstr(json_object_get(man, "data"), "spec") : "(none)",
           jint(json_object_get(man, "data"), "position_step"), jint(json_object_get(man, "rng"), "init_seed"));
    unsigned long long bytes = 0;
    json_array_foreach(files, k, x) bytes += (unsigned long long)jint(x, "bytes");
    printf("files: %zu, %llu bytes (parameters, AdamW m and v, fp32)\n", json_array_size(files), bytes);
    json_array_foreach(files, k, x) {
        json_t *co = json_object_get(x, "coords");
        printf("  %-16s %12lld bytes  fnv1a64 %s  rank %lld (dp %lld, pp %lld, tp %lld, sp %lld), %zu tensors\n",
               jstr(x, "name"), jint(x, "bytes"), jstr(x, "fnv1a64"), jint(x, "rank"), jint(co, "dp"), jint(co, "pp"),
               jint(co, "tp"), jint(co, "sp"), json_array_size(json_object_get(x, "tensors")));
    }
    printf("tensors: %zu\n", json_array_size(tens));
    json_array_foreach(tens, k, x) {
        if (jint(x, "cols") == 1) printf("  %-14s [%lld]\n", jstr(x, "name"), jint(x, "rows"));
        else printf("  %-14s [%lld, %lld]\n", jstr(x, "name"), jint(x, "rows"), jint(x, "cols"));
    }
    json_decref(man);
    return 0;
}

/* ---- verify ---------------------------------------------------------------- */

static int problems;
static void problem(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void problem(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
    problems++;
}

static void report_problem(void *arg, const char *msg)
{
    (void)arg;
    problem("%s", msg);
}

static int cmd_verify(const char *arg)
{
    char path[4200];
    json_t *man = NULL;
    problems = 0;
    if (resolve(arg, path, sizeof path) || pt_ckpt_manifest_parse(path, &man)) {
        problem("%s", pt_errmsg());
        return 1;
    }
    old_manifest_warning(path, man);
    /* the manifest's consistency: the checks a resume and convert apply (lib/ckpt) */
    pt_ckpt_manifest_check(path, man, report_problem, NULL);
    /* each listed file against its size and checksum */
    json_t *files = json_object_get(man, "files");
    const size_t nt = json_array_size(json_object_get(man, "tensors"));
    unsigned long long total = 0;
    size_t k;
    json_t *f;
    json_array_foreach(files, k, f) {
        const char *name = jstr(f, "name");
        char p[4400];
        if (!*name || strchr(name, '/') || name[0] == '.') continue; /* reported above */
        snprintf(p, sizeof p, "%s/%s", path, name);
        const long long want = jint(f, "bytes");
        total += (unsigned long long)want;
        struct stat sb;
        if (stat(p, &sb)) {
            problem("checkpoint %s: %s is missing: %s", path, name, strerror(errno));
            continue;
        }
        if (!S_ISREG(sb.st_mode)) {
            problem("checkpoint %s: %s is not a regular file", path, name);
            continue;
        }
        if ((long long)sb.st_size != want) {
            problem("checkpoint %s: %s has %lld bytes, the manifest says %lld (truncated or replaced)", path, name,
                    (long long)sb.st_size, want);
            continue;
        }
        char *buf = NULL;
        size_t len;
        if (pt_read_regular(p, "checkpoint rank file", &buf, &len)) {
            problem("checkpoint %s: %s", path, pt_errmsg());
            continue;
        }
        char sum[20];
        snprintf(sum, sizeof sum, "%016" PRIx64, pt_fnv1a64(buf, len));
        free(buf);
        if (strcmp(sum, jstr(f, "fnv1a64")))
            problem("checkpoint %s: %s has checksum %s, the manifest says %.20s (corrupted)", path, name, sum,
                    jstr(f, "fnv1a64"));
    }
    if (!problems)
        printf("ok: %s: step %lld, %zu rank files, %llu bytes, %zu tensors; sizes and checksums match the manifest%s\n",
               path, jint(man, "step"), json_array_size(files), total, nt,
               json_object_get(man, PT_CKPT_MANIFEST_SUM) ? "" : " (which has no checksum of its own)");
    json_decref(man);
    return problems ? 1 : 0;
}

/* ---- a one-rank model to convert through ------------------------------------ */

typedef struct holder {
    pt_plan plan;
    pt_pctx ctx;
    pt_arena arena;
    pt_gpt model;
    pt_train tr;
    int have_ctx, have_model, have_tr;
} holder;

static void holder_free(holder *h)
{
    if (h->have_tr) pt_train_free(&h->tr);
    if (h->have_model) pt_gpt_free(&h->model);
    if (h->have_ctx) pt_pctx_free(&h->ctx);
    h->have_tr = h->have_model = h->have_ctx = 0;
}

/* The whole model cfg on this process alone (dp = tp = pp = 1), with its
 * training state (16 bytes per parameter) and activations for one sequence
 * of T tokens. */
static int holder_build(holder *h, const pt_gpt_config *cfg, int T)
{
    memset(h, 0, sizeof *h);
    /* MPI starts here, once a model is built: a file refused before then
     * never starts Open MPI's singleton daemon, whose own log lines (seen
     * under load: "ORTE_ERROR_LOG: Out of resource") would join the one
     * line of the refusal */
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited) MPI_Init(NULL, NULL);
    int world;
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    if (world != 1) return pt_fail(PT_EINVAL, "convert runs as one process (started with %d ranks)", world);
    pt_plan_default(&h->plan);
    int rc = pt_pctx_init(&h->ctx, MPI_COMM_WORLD, &h->plan, -1);
    if (rc) return rc;
    h->have_ctx = 1;
    const pt_backend *be = pt_backend_get("cpu");
    if (!be) return pt_fail(PT_EUNSUPP, "no cpu backend");
    rc = pt_gpt_create(&h->model, cfg, &h->ctx, be, &h->arena, 1, T, 0);
    if (rc) return rc;
    h->have_model = 1;
    pt_adamw_cfg opt;
    pt_adamw_default(&opt);
    rc = pt_train_create(&h->tr, &h->model, &opt, NULL);
    if (rc) return rc;
    h->have_tr = 1;
    return PT_OK;
}

/* the full tensor [rows, cols] of whole-model parameter index idx */
static pt_param *param_at(holder *h, int idx) { return &h->model.params[h->model.pidx[idx]]; }

/* llm.c's tensor order: k-th of the 16 tensors, layer l -> ptrain index */
static int llmc_index(int k, int l, int L)
{
    if (k < 2) return k;
    if (k < 14) return 2 + 12 * l + (k - 2);
    return 2 + 12 * L + (k - 14);
}

/* ---- llm.c .bin ------------------------------------------------------------ */

/* read exactly n bytes at the descriptor's position: 0, or -1 (errno; 0 at end of file) */
static int read_exact(int fd, void *buf, size_t n)
{
    char *p = buf;
    while (n) {
        ssize_t got = read(fd, p, n);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) {
            if (got == 0) errno = 0;
            return -1;
        }
        p += got;
        n -= (size_t)got;
    }
    return 0;
}

/* Read an llm.c gpt2 checkpoint into a fresh holder: version 3 (fp32) or
 * 5 (bf16, widened exactly to the fp32 master).  The 1 KiB header is read
 * and checked first, and the file's size against it, so a wrong or huge
 * file costs 1 KiB of reading, not its size; then the tensors the header
 * describes, 4 (or 2) bytes per element, in one buffer. */
static int llmc_read(const char *file, holder *h, pt_gpt_config *cfg)
{
    int fd = pt_open_regular(file, "llm.c model file");
    if (fd < 0) return fd;
    struct stat sb;
    int32_t hd[LLMC_HEADER_INTS];
    memset(hd, 0, sizeof hd);
    if (fstat(fd, &sb)) {
        int e = errno;
        close(fd);
        return pt_fail(PT_EIO, "llm.c model file %s: %s", file, strerror(e));
    }
    const long long size = (long long)sb.st_size;
    const size_t want_hd = size < (long long)sizeof hd ? (size_t)size : sizeof hd;
    if (read_exact(fd, hd, want_hd)) {
        int e = errno;
        close(fd);
        return pt_fail(PT_EIO, "llm.c model file %s: cannot read its header: %s", file, e ? strerror(e) : "end of file");
    }
    if (size < (long long)sizeof hd) {
        close(fd);
        return pt_fail(PT_EFORMAT, "llm.c model file %s: %lld bytes, shorter than its %zu-byte header", file, size, sizeof hd);
    }
    if (hd[0] != LLMC_MAGIC || (hd[1] != LLMC_VERSION_FP32 && hd[1] != LLMC_VERSION_BF16)) {
        close(fd);
        return pt_fail(PT_EFORMAT, "llm.c model file %s: magic %d version %d (expected %d version %d, fp32, or %d, bf16)",
                       file, hd[0], hd[1], LLMC_MAGIC, LLMC_VERSION_FP32, LLMC_VERSION_BF16);
    }
    const int64_t es = hd[1] == LLMC_VERSION_BF16 ? 2 : 4; /* bytes per element */
    const int maxT = hd[2], V = hd[3], L = hd[4], NH = hd[5], C = hd[6], Vp = hd[7];
    if (maxT < 1 || V < 1 || L < 1 || NH < 1 || C < 1 || C % NH || Vp < V || L > 4096 || C > 1 << 16 ||
        maxT > 1 << 20 || Vp > 1 << 24) {
        close(fd);
        return pt_fail(PT_EFORMAT, "llm.c model file %s: header maxT=%d V=%d L=%d NH=%d C=%d Vp=%d is not a GPT-2 model "
                                   "(need all >= 1, C %% NH == 0, Vp >= V)", file, maxT, V, L, NH, C, Vp);
    }
    const int64_t c = C, l = L;
    const int64_t n = (int64_t)Vp * c + (int64_t)maxT * c + l * (12 * c * c + 13 * c) + 2 * c;
    if (size != (long long)sizeof hd + es * n) {
        close(fd);
        return pt_fail(PT_EFORMAT, "llm.c model file %s: %lld bytes, its header (version %d, maxT=%d V=%d Vp=%d L=%d C=%d) "
                       "needs %lld", file, size, hd[1], maxT, V, Vp, L, C, (long long)(sizeof hd + es * n));
    }
    char *buf = malloc((size_t)(es * n));
    if (!buf) {
        close(fd);
        return pt_fail(PT_ENOMEM, "out of memory for the %lld bytes of llm.c model file %s", (long long)(es * n), file);
    }
    if (read_exact(fd, buf, (size_t)(es * n))) {
        int e = errno;
        free(buf);
        close(fd);
        return pt_fail(PT_EIO, "llm.c model file %s: cannot read its tensors: %s", file, e ? strerror(e) : "shorter than it was");
    }
    close(fd);
    *cfg = (pt_gpt_config){.n_layer = L, .n_head = NH, .n_embd = C, .seq_len = maxT, .vocab = V};
    int rc = holder_build(h, cfg, 1);
    if (rc) {
        free(buf);
        return rc;
    }
    const pt_ops *ops = h->model.ops;
    const char *src = buf;
    for (int k = 0; k < 16; k++)
        for (int li = 0; li < (k >= 2 && k < 14 ? L : 1); li++) {
            pt_param *p = param_at(h, llmc_index(k, li, L));
            const size_t nel = (size_t)(p->rows * p->cols);
            int64_t lo, hi;
            float *d, *m, *v;
            pt_train_owned_state(&h->tr, h->model.pidx[llmc_index(k, li, L)], &lo, &hi, &d, &m, &v);
            /* one rank: the owned state is the whole tensor; wte keeps V of the file's Vp rows;
             * bf16 widens exactly (the 16 bits become the high half) */
            if (es == 2) pt_bf16_to_f32_n(d, (const pt_bf16 *)(const void *)src, nel);
            else ops->copy2d(d, sizeof(float), src, sizeof(float), sizeof(float) * nel, 1);
            ops->zero(m, nel, PT_F32);
            ops->zero(v, nel, PT_F32);
            src += (size_t)es * (k == 0 ? (size_t)Vp * (size_t)C : nel);
        }
    free(buf);
    h->tr.step = 0;
    return pt_train_state_loaded(&h->tr);
}

/* llm.c's gpt2 model file: version 3 (fp32) or, with bf16, version 5 (each
 * fp32 master rounded to nearest even, as llm.c's train_gpt2.py writes
 * --dtype bfloat16 files); the padding rows of wte are zero. */
static int write_llmc(holder *h, const char *out, int bf16, int64_t *bytes)
{
    const pt_gpt_config *cfg = &h->model.cfg;
    const int L = cfg->n_layer, C = cfg->n_embd, V = cfg->vocab;
    const int Vp = (V + LLMC_PAD - 1) / LLMC_PAD * LLMC_PAD;
    int32_t hd[LLMC_HEADER_INTS] = {0};
    hd[0] = LLMC_MAGIC;
    hd[1] = bf16 ? LLMC_VERSION_BF16 : LLMC_VERSION_FP32;
    hd[2] = cfg->seq_len;
    hd[3] = V;
    hd[4] = L;
    hd[5] = cfg->n_head;
    hd[6] = C;
    hd[7] = Vp;
    pt_atomic_file f;
    int rc = pt_atomic_open(&f, out);
    if (rc) return rc;
    int bad = pt_write_all(f.fd, hd, sizeof hd);
    *bytes = (int64_t)sizeof hd;
    for (int k = 0; k < 16 && !bad; k++)
        for (int li = 0; li < (k >= 2 && k < 14 ? L : 1) && !bad; li++) {
            pt_param *p = param_at(h, llmc_index(k, li, L));
            size_t nel = (size_t)(k == 0 ? (int64_t)V * C : p->rows * p->cols);
            const size_t es = bf16 ? 2 : sizeof(float);
            if (bf16) {
                pt_bf16 *b = malloc(nel * sizeof *b);
                if (b) pt_f32_to_bf16_n(b, p->data, nel);
                bad = !b || pt_write_all(f.fd, b, es * nel);
                free(b);
            } else {
                bad = pt_write_all(f.fd, p->data, es * nel);
            }
            *bytes += (int64_t)(es * nel);
            if (k == 0 && !bad) { /* llm.c's padding rows: zero, as train_gpt2.py's pad_vocab */
                size_t pad = es * (size_t)(Vp - V) * (size_t)C;
                char *z = calloc(pad ? pad : 1, 1);
                bad = !z || pt_write_all(f.fd, z, pad);
                free(z);
                *bytes += (int64_t)pad;
            }
        }
    if (bad) {
        int e = errno;
        pt_atomic_abort(&f);
        return pt_fail(PT_EIO, "%s: write failed: %s", out, strerror(e));
    }
    return pt_atomic_commit(&f, 1);
}

/* ---- safetensors --------------------------------------------------------------
 * Format (huggingface/safetensors): u64 little-endian N, N bytes of JSON
 * {"NAME": {"dtype": "F32", "shape": [...], "data_offsets": [BEGIN, END]},
 * ..., "__metadata__": {string: string}}, then the raw little-endian data;
 * offsets are relative to the byte after the header.  The header is padded
 * with spaces to a multiple of 8 bytes.  Names and shapes are those of
 * transformers' GPT2Model state dict (wte.weight [V, C], h.N.attn.c_attn.weight
 * [C, 3C] (Conv1D: [in, out]), ...). */

typedef struct st_entry {
    char name[48];
    int idx;      /* ptrain parameter index */
    int64_t rows; /* rows taken from ptrain's tensor (wte: V) */
    int transpose;
    int vec;      /* 1-D */
} st_entry;

static int st_entries(const pt_gpt_config *cfg, st_entry **out)
{
    const int L = cfg->n_layer, n = 4 + 12 * L;
    st_entry *e = calloc((size_t)n, sizeof *e);
    if (!e) return pt_fail(PT_ENOMEM, "out of memory");
    static const char *const layer[12] = {"ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias",
                                          "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight", "ln_2.bias",
                                          "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias"};
    int k = 0;
    e[k++] = (st_entry){"wte.weight", 0, cfg->vocab, 0, 0};
    e[k++] = (st_entry){"wpe.weight", 1, cfg->seq_len, 0, 0};
    for (int l = 0; l < L; l++)
        for (int j = 0; j < 12; j++, k++) {
            snprintf(e[k].name, sizeof e[k].name, "h.%d.%s", l, layer[j]);
            e[k].idx = 2 + 12 * l + j;
            e[k].rows = -1;
            e[k].transpose = j == 2 || j == 4 || j == 8 || j == 10;
            e[k].vec = !e[k].transpose;
        }
    e[k++] = (st_entry){"ln_f.weight", 2 + 12 * L, -1, 0, 1};
    e[k++] = (st_entry){"ln_f.bias", 3 + 12 * L, -1, 0, 1};
    *out = e;
    return n;
}

static int write_safetensors(holder *h, const char *out, long step, int64_t *bytes)
{
    st_entry *e = NULL;
    int n = st_entries(&h->model.cfg, &e);
    if (n < 0) return PT_ENOMEM;
    json_t *hdr = json_object();
    char stepbuf[32];
    snprintf(stepbuf, sizeof stepbuf, "%ld", step);
    json_object_set_new(hdr, "__metadata__", json_pack("{s:s, s:s, s:s}", "format", "pt", "source", "ptrain-ckpt " PACKAGE_VERSION,
                                                       "step", stepbuf));
    int64_t off = 0;
    for (int i = 0; i < n; i++) {
        pt_param *p = param_at(h, e[i].idx);
        if (e[i].rows < 0) e[i].rows = p->rows;
        const int64_t r = e[i].rows, c = p->cols, nb = 4 * r * c;
        json_t *shape = e[i].vec ? json_pack("[I]", (json_int_t)(r * c))
                      : e[i].transpose ? json_pack("[I, I]", (json_int_t)c, (json_int_t)r)
                                       : json_pack("[I, I]", (json_int_t)r, (json_int_t)c);
        json_object_set_new(hdr, e[i].name, json_pack("{s:s, s:o, s:[I, I]}", "dtype", "F32", "shape", shape,
                                                      "data_offsets", (json_int_t)off, (json_int_t)(off + nb)));
        off += nb;
    }
    char *js = json_dumps(hdr, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(hdr);
    if (!js) {
        free(e);
        return pt_fail(PT_ENOMEM, "out of memory for the safetensors header");
    }
    size_t jl = strlen(js), padded = (jl + 7) / 8 * 8;
    char *hb = malloc(8 + padded);
    if (!hb) {
        free(js);
        free(e);
        return pt_fail(PT_ENOMEM, "out of memory for the safetensors header");
    }
    uint64_t hn = padded;
    for (int b = 0; b < 8; b++) hb[b] = (char)(hn >> (8 * b) & 0xff); /* little-endian on any host */
    memcpy(hb + 8, js, jl);
    memset(hb + 8 + jl, ' ', padded - jl);
    free(js);
    pt_atomic_file f;
    int rc = pt_atomic_open(&f, out);
    if (rc) {
        free(hb);
        free(e);
        return rc;
    }
    int bad = pt_write_all(f.fd, hb, 8 + padded);
    free(hb);
    *bytes = (int64_t)(8 + padded) + off;
    const pt_ops *ops = h->model.ops;
    float *tmp = NULL;
    for (int i = 0; i < n && !bad; i++) {
        pt_param *p = param_at(h, e[i].idx);
        const int64_t r = e[i].rows, c = p->cols;
        if (!e[i].transpose) {
            bad = pt_write_all(f.fd, p->data, sizeof(float) * (size_t)(r * c));
            continue;
        }
        /* [out, in] -> [in, out]: column j of the source is row j of the result */
        float *nt = realloc(tmp, sizeof(float) * (size_t)(r * c));
        if (!nt) { bad = 1; errno = ENOMEM; break; }
        tmp = nt;
        for (int64_t j = 0; j < c; j++)
            ops->copy2d(tmp + j * r, sizeof(float), p->data + j, sizeof(float) * (size_t)c, sizeof(float), (size_t)r);
        bad = pt_write_all(f.fd, tmp, sizeof(float) * (size_t)(r * c));
    }
    free(tmp);
    free(e);
    if (bad) {
        int er = errno;
        pt_atomic_abort(&f);
        return pt_fail(PT_EIO, "%s: write failed: %s", out, strerror(er));
    }
    return pt_atomic_commit(&f, 1);
}

static int ends_with(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

/* ---- reading Hugging Face GPT-2 safetensors -------------------------------------
 * transformers' GPT2Model / GPT2LMHeadModel state dict (model.safetensors):
 * the names of st_entries, with or without the "transformer." prefix of
 * GPT2LMHeadModel; lm_head.weight, when present, must be wte.weight (tied,
 * as GPT-2 is and ptrain's model is); the attention mask buffers
 * h.N.attn.bias and h.N.attn.masked_bias (constants, saved by older
 * transformers) are passed over.  Conv1D weights ([in, out]) are transposed
 * to ptrain's [out, in]; F16 and BF16 are widened to fp32 exactly.  The
 * shape comes from --model, else config.json beside the file (transformers'
 * GPT2Config: n_layer, n_head, n_embd, n_positions (older: n_ctx),
 * vocab_size), whose other fields, when present, must describe the model
 * ptrain computes (model_type gpt2, a tanh GELU, LayerNorm epsilon 1e-5,
 * n_inner 4 n_embd, attention scaled by 1/sqrt(head size) only). */

/* a field of config.json that must hold an integer in [1, 2^31) */
static int cfg_int(json_t *root, const char *path, const char *key, const char *alt, int *out)
{
    json_t *v = json_object_get(root, key);
    if (!v && alt) v = json_object_get(root, alt);
    if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > INT32_MAX)
        return pt_fail(PT_EFORMAT, "%s: \"%s\"%s%s%s is not an integer in [1, 2^31)", path, key, alt ? " (or \"" : "",
                       alt ? alt : "", alt ? "\")" : "");
    *out = (int)json_integer_value(v);
    return PT_OK;
}

/* The model of config.json in the directory of st_path: PT_OK, 1 (no
 * config.json there), or an error naming the file and the field. */
static int hf_config(const char *st_path, pt_gpt_config *cfg, char *used, size_t un)
{
    char path[4300];
    const char *slash = strrchr(st_path, '/');
    if (slash) snprintf(path, sizeof path, "%.*s/config.json", (int)(slash - st_path), st_path);
    else snprintf(path, sizeof path, "config.json");
    struct stat sb;
    if (stat(path, &sb) != 0) return 1;
    snprintf(used, un, "%s", path);
    int fd = pt_open_regular(path, "model config");
    if (fd < 0) return fd;
    if (fstat(fd, &sb) != 0 || sb.st_size > (1 << 20)) {
        close(fd);
        return pt_fail(PT_EFORMAT, "%s: more than 1 MiB, not a model config", path);
    }
    char *buf = NULL;
    size_t len = 0;
    int rc = pt_read_fd(fd, "model config", path, &buf, &len);
    close(fd);
    if (rc) return rc;
    json_error_t je;
    json_t *root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
    free(buf);
    if (!json_is_object(root)) {
        rc = root ? pt_fail(PT_EFORMAT, "%s: not a JSON object", path)
                  : pt_fail(PT_EFORMAT, "%s:%d: not valid JSON: %s", path, je.line, je.text);
        json_decref(root);
        return rc;
    }
    const char *mt = json_string_value(json_object_get(root, "model_type"));
    const char *act = json_string_value(json_object_get(root, "activation_function"));
    json_t *eps = json_object_get(root, "layer_norm_epsilon"), *inner = json_object_get(root, "n_inner");
    json_t *inv = json_object_get(root, "scale_attn_by_inverse_layer_idx"), *scale = json_object_get(root, "scale_attn_weights");
    if ((rc = cfg_int(root, path, "n_layer", NULL, &cfg->n_layer)) || (rc = cfg_int(root, path, "n_head", NULL, &cfg->n_head)) ||
        (rc = cfg_int(root, path, "n_embd", NULL, &cfg->n_embd)) ||
        (rc = cfg_int(root, path, "n_positions", "n_ctx", &cfg->seq_len)) ||
        (rc = cfg_int(root, path, "vocab_size", NULL, &cfg->vocab))) {
    } else if (json_object_get(root, "model_type") && (!mt || strcmp(mt, "gpt2")))
        rc = pt_fail(PT_EFORMAT, "%s: \"model_type\" is not \"gpt2\": convert reads GPT-2 models", path);
    else if (json_object_get(root, "activation_function") &&
             (!act || (strcmp(act, "gelu_new") && strcmp(act, "gelu_pytorch_tanh") && strcmp(act, "gelu_fast"))))
        rc = pt_fail(PT_EFORMAT, "%s: \"activation_function\" %s%.40s%s: ptrain's GPT-2 computes the tanh GELU (valid: "
                                 "gelu_new, gelu_pytorch_tanh, gelu_fast)", path, act ? "\"" : "", act ? act : "(not a string)",
                     act ? "\"" : "");
    else if (eps && (!json_is_number(eps) || fabs(json_number_value(eps) - 1e-5) > 1e-12))
        rc = pt_fail(PT_EFORMAT, "%s: \"layer_norm_epsilon\" is not 1e-05, the epsilon of ptrain's LayerNorm", path);
    else if (inner && !json_is_null(inner) &&
             (!json_is_integer(inner) || json_integer_value(inner) != 4 * (json_int_t)cfg->n_embd))
        rc = pt_fail(PT_EFORMAT, "%s: \"n_inner\" is not null or 4 n_embd (%lld): ptrain's MLP is 4 n_embd wide", path,
                     4LL * cfg->n_embd);
    else if ((inv && !json_is_false(inv)) || (scale && !json_is_true(scale)))
        rc = pt_fail(PT_EFORMAT, "%s: attention scaled otherwise than by 1/sqrt(head size) (scale_attn_weights true, "
                                 "scale_attn_by_inverse_layer_idx false)", path);
    json_decref(root);
    return rc;
}

/* Hugging Face's shape of st_entries' entry i of a model cfg: [rows, cols] or [n] */
static int hf_shape(const pt_gpt_config *cfg, int i, int64_t *shape)
{
    const int64_t C = cfg->n_embd, L = cfg->n_layer;
    if (i == 0) return shape[0] = cfg->vocab, shape[1] = C, 2;
    if (i == 1) return shape[0] = cfg->seq_len, shape[1] = C, 2;
    if (i >= 2 + 12 * L) return shape[0] = C, 1;
    switch ((i - 2) % 12) {
    case 2: return shape[0] = C, shape[1] = 3 * C, 2;  /* c_attn.weight [in, out] */
    case 3: return shape[0] = 3 * C, 1;
    case 4: return shape[0] = C, shape[1] = C, 2;      /* attn.c_proj.weight */
    case 8: return shape[0] = C, shape[1] = 4 * C, 2;  /* c_fc.weight */
    case 9: return shape[0] = 4 * C, 1;
    case 10: return shape[0] = 4 * C, shape[1] = C, 2; /* mlp.c_proj.weight */
    default: return shape[0] = C, 1;                   /* LayerNorms, c_proj biases */
    }
}

static void shape_text(char *b, size_t n, const int64_t *shape, int nd)
{
    size_t o = (size_t)snprintf(b, n, "[");
    for (int k = 0; k < nd && o < n; k++) o += (size_t)snprintf(b + o, n - o, "%s%lld", k ? ", " : "", (long long)shape[k]);
    if (o < n) snprintf(b + o, n - o, "]");
}

/* Read a Hugging Face GPT-2 model.safetensors into a fresh holder: every
 * name, shape and dtype checked against the model before it is built. */
static int st_read(const char *file, const char *model, holder *h, pt_gpt_config *cfg, char *from, size_t fn)
{
    pt_safetensors st;
    int rc = pt_st_open(&st, file);
    if (rc) return rc;
    st_entry *e = NULL;
    float *buf = NULL, *lm = NULL;
    if (model) {
        pt_model_shape ms;
        if (pt_model_shape_parse("--model", model, &ms) < 0) {
            rc = PT_EINVAL;
            goto out;
        }
        *cfg = (pt_gpt_config){ms.n_layer, ms.n_head, ms.n_embd, ms.seq_len, ms.vocab};
        snprintf(from, fn, "--model %s", model);
    } else if ((rc = hf_config(file, cfg, from, fn)) == 1) {
        rc = pt_fail(PT_EINVAL, "%s: no config.json beside it to give the model's shape: give --model NAME or "
                                "L,H,C,T,V", file);
        goto out;
    } else if (rc)
        goto out;
    if (cfg->n_embd % cfg->n_head || cfg->n_layer > 4096 || cfg->n_embd > 1 << 16 || cfg->seq_len > 1 << 20 ||
        cfg->vocab > 1 << 24) {
        rc = pt_fail(PT_EFORMAT, "%s: model L=%d H=%d C=%d T=%d V=%d is not a GPT-2 model ptrain builds (need n_head "
                                 "dividing n_embd, L <= 4096, C <= 65536, T <= 2^20, V <= 2^24)", from, cfg->n_layer,
                     cfg->n_head, cfg->n_embd, cfg->seq_len, cfg->vocab);
        goto out;
    }
    const char *prefix = pt_st_find(&st, "transformer.wte.weight") ? "transformer." : "";
    const int n = st_entries(cfg, &e);
    if (n < 0) {
        rc = PT_ENOMEM;
        goto out;
    }
    /* every tensor of the file is a weight, a mask buffer or the tied head */
    const pt_st_tensor *lmt = pt_st_find(&st, "lm_head.weight");
    for (int i = 0; i < st.n; i++) {
        const char *nm = st.t[i].name, *rest = !strncmp(nm, prefix, strlen(prefix)) ? nm + strlen(prefix) : NULL;
        int known = &st.t[i] == lmt, l = -1, len = 0;
        for (int k = 0; !known && rest && k < n; k++) known = !strcmp(rest, e[k].name);
        if (!known && rest && sscanf(rest, "h.%d.attn.%n", &l, &len) == 1 && len && l >= 0 && l < cfg->n_layer)
            known = !strcmp(rest + len, "bias") || !strcmp(rest + len, "masked_bias");
        if (!known) {
            rc = pt_fail(PT_EFORMAT, "%s: tensor '%.200s' is not a weight of this GPT-2 model (L=%d: wte, wpe, h.0 .. "
                                     "h.%d, ln_f%s, lm_head tied to wte)", file, nm, cfg->n_layer, cfg->n_layer - 1,
                         *prefix ? ", under transformer." : "");
            goto out;
        }
    }
    size_t most = 0;
    for (int k = 0; k < n; k++) {
        char name[64];
        snprintf(name, sizeof name, "%s%s", prefix, e[k].name);
        const pt_st_tensor *t = pt_st_find(&st, name);
        int64_t want[2];
        const int nd = hf_shape(cfg, k, want);
        char a[64], b[64];
        if (!t) {
            rc = pt_fail(PT_EFORMAT, "%s: no tensor '%s': not a GPT-2 model of %d layers", file, name, cfg->n_layer);
            goto out;
        }
        if (t->ndim != nd || t->shape[0] != want[0] || (nd == 2 && t->shape[1] != want[1])) {
            shape_text(a, sizeof a, t->shape, t->ndim);
            shape_text(b, sizeof b, want, nd);
            rc = pt_fail(PT_EFORMAT, "%s: tensor '%s' has shape %s; the model of %s (L=%d H=%d C=%d T=%d V=%d) needs %s",
                         file, name, a, from, cfg->n_layer, cfg->n_head, cfg->n_embd, cfg->seq_len, cfg->vocab, b);
            goto out;
        }
        if (t->dtype != PT_ST_F32 && t->dtype != PT_ST_F16 && t->dtype != PT_ST_BF16) {
            rc = pt_fail(PT_EFORMAT, "%s: tensor '%s' is %s; weights are read from F32, F16 or BF16", file, name,
                         pt_st_dtype_name(t->dtype));
            goto out;
        }
        if (t->numel > most) most = (size_t)t->numel;
    }
    if (lmt && (lmt->ndim != 2 || lmt->shape[0] != cfg->vocab || lmt->shape[1] != cfg->n_embd)) {
        rc = pt_fail(PT_EFORMAT, "%s: lm_head.weight is not [%d, %d] as wte: an output layer ptrain's GPT-2 (tied to "
                                 "wte) cannot hold", file, cfg->vocab, cfg->n_embd);
        goto out;
    }
    /* the checks passed: sizes are the file's own (at most 4 bytes per element of it) */
    buf = malloc(sizeof *buf * (most ? most : 1));
    if (!buf) {
        rc = pt_fail(PT_ENOMEM, "out of memory for a tensor of %zu elements", most);
        goto out;
    }
    if (lmt) { /* the tied head, bit for bit, before the model is built (and MPI started) */
        char name[64];
        snprintf(name, sizeof name, "%swte.weight", prefix);
        const pt_st_tensor *w = pt_st_find(&st, name);
        if (!(lm = malloc(sizeof *lm * (size_t)lmt->numel))) {
            rc = pt_fail(PT_ENOMEM, "out of memory");
            goto out;
        }
        if ((rc = pt_st_read_f32(&st, w, buf)) || (rc = pt_st_read_f32(&st, lmt, lm))) goto out;
        if (memcmp(lm, buf, sizeof *lm * (size_t)lmt->numel)) {
            rc = pt_fail(PT_EFORMAT, "%s: lm_head.weight differs from wte.weight (an untied output layer): ptrain's "
                                     "GPT-2 ties them", file);
            goto out;
        }
    }
    if ((rc = holder_build(h, cfg, 1))) goto out;
    const pt_ops *ops = h->model.ops;
    for (int k = 0; k < n && !rc; k++) {
        char name[64];
        snprintf(name, sizeof name, "%s%s", prefix, e[k].name);
        const pt_st_tensor *t = pt_st_find(&st, name);
        if ((rc = pt_st_read_f32(&st, t, buf))) break;
        pt_param *p = param_at(h, e[k].idx);
        int64_t lo, hi;
        float *d, *m, *v;
        pt_train_owned_state(&h->tr, h->model.pidx[e[k].idx], &lo, &hi, &d, &m, &v);
        const size_t nel = (size_t)(p->rows * p->cols);
        if (e[k].transpose) { /* [in, out] -> [out, in]: element (i, o) to (o, i) */
            const size_t in = (size_t)t->shape[0], out = (size_t)t->shape[1];
            for (size_t o = 0; o < out; o++) ops->copy2d(d + o * in, sizeof(float), buf + o, sizeof(float) * out,
                                                         sizeof(float), in);
        } else {
            ops->copy2d(d, sizeof(float), buf, sizeof(float), sizeof(float) * (size_t)t->numel, 1);
            if (nel > t->numel) ops->zero(d + t->numel, nel - (size_t)t->numel, PT_F32); /* wte's padding rows */
        }
        ops->zero(m, nel, PT_F32);
        ops->zero(v, nel, PT_F32);
    }
    if (!rc) {
        h->tr.step = 0;
        rc = pt_train_state_loaded(&h->tr);
    }
out:
    free(lm);
    free(buf);
    free(e);
    pt_st_close(&st);
    return rc;
}

/* Whether a model file is read as safetensors: not an llm.c file (its
 * first int32 is not llm.c's magic), and named *.safetensors or starting as
 * one (a u64 header length, then '{'); a file of neither kind goes to
 * llmc_read, whose message names llm.c's magic. */
static int looks_safetensors(const char *file)
{
    int fd = pt_open_regular(file, "model file");
    if (fd < 0) return 0;
    unsigned char b[9];
    ssize_t got = pread(fd, b, sizeof b, 0);
    close(fd);
    if (got >= 4 && (int32_t)((uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24) == LLMC_MAGIC)
        return 0;
    return ends_with(file, ".safetensors") || (got == 9 && b[8] == '{');
}

/* ---- convert ----------------------------------------------------------------- */


/* the preset whose config is cfg, or "custom" */
static const char *preset_of(const pt_gpt_config *cfg)
{
    static const char *const names[] = {"test", "tiny", "small", "gpt2-124M"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        pt_gpt_config p;
        if (!pt_gpt_preset(names[i], &p) && !memcmp(&p, cfg, sizeof p)) return names[i];
    }
    return "custom";
}

static int convert(const char *to, const char *dtype, const char *model, const char *src, const char *dst)
{
    enum { F_LLMC, F_ST, F_CKPT } target;
    int bf16 = 0;
    if (dtype && strcmp(dtype, "fp32") && strcmp(dtype, "bf16"))
        return tool_die(2, "convert: --dtype '%s' is not one of fp32, bf16", dtype);
    if (dtype) bf16 = !strcmp(dtype, "bf16");
    if (!to) to = ends_with(dst, ".bin") ? "llmc" : ends_with(dst, ".safetensors") ? "safetensors" : "ckpt";
    if (!strcmp(to, "llmc")) target = F_LLMC;
    else if (!strcmp(to, "safetensors")) target = F_ST;
    else if (!strcmp(to, "ckpt")) target = F_CKPT;
    else return tool_die(2, "convert: --to '%s' is not one of llmc, safetensors, ckpt", to);
    if (bf16 && target != F_LLMC)
        return tool_die(2, "convert: --dtype bf16 is for llm.c files (--to llmc: version 5); %s keeps fp32 (valid: "
                        "--dtype fp32, or --to llmc)", target == F_ST ? "safetensors" : "a checkpoint");
    if (strlen(dst) > 4000) return tool_die(2, "convert: destination name of %zu bytes is too long (at most 4000)", strlen(dst));
    const int from_ckpt = is_dir(src);
    if (!from_ckpt && access(src, R_OK)) return tool_die(2, "convert: %s: %s", src, strerror(errno));
    if (from_ckpt && target == F_CKPT)
        return tool_die(2, "convert: %s is already a checkpoint (ptrain-run --resume reshards it to any plan; "
                      "valid targets: --to llmc, --to safetensors)", src);
    holder h;
    memset(&h, 0, sizeof h);
    pt_gpt_config cfg;
    long step = 0;
    char path[4200], st_from[4400] = "";
    int status = 0, is_st = 0;
    if (from_ckpt && model) return tool_die(2, "convert: --model is for a safetensors SRC; a checkpoint records its model");
    if (from_ckpt) {
        json_t *man = NULL;
        int rc = resolve(src, path, sizeof path);
        if (!rc) rc = pt_ckpt_manifest_read(path, &man);
        if (!rc) rc = manifest_config(man, &cfg);
        json_decref(man);
        if (rc) {
            status = tool_die(2, "convert: %s", pt_errmsg());
            goto out;
        }
        pt_ckpt_meta meta;
        if ((rc = holder_build(&h, &cfg, 1)) || (rc = pt_ckpt_load(path, &h.tr, &h.plan, &cfg, &meta))) {
            status = tool_die(rc == PT_ENOMEM ? 1 : 2, "convert: %s", pt_errmsg());
            goto out;
        }
        step = meta.step;
    } else {
        snprintf(path, sizeof path, "%s", src);
        is_st = looks_safetensors(src);
        if (model && !is_st) {
            status = tool_die(2, "convert: --model is for a safetensors SRC (its shape); %s is not one", src);
            goto out;
        }
        int rc = is_st ? st_read(src, model, &h, &cfg, st_from, sizeof st_from) : llmc_read(src, &h, &cfg);
        if (rc) {
            status = tool_die(rc == PT_ENOMEM ? 1 : 2, "convert: %s", pt_errmsg());
            goto out;
        }
    }
    int64_t bytes = 0;
    int rc;
    char what[512];
    if (target == F_LLMC) {
        rc = write_llmc(&h, dst, bf16, &bytes);
        snprintf(what, sizeof what, "llm.c gpt2 version %d (%s), Vp=%d", bf16 ? LLMC_VERSION_BF16 : LLMC_VERSION_FP32,
                 bf16 ? "bf16" : "fp32", (cfg.vocab + LLMC_PAD - 1) / LLMC_PAD * LLMC_PAD);
    } else if (target == F_ST) {
        rc = write_safetensors(&h, dst, step, &bytes);
        snprintf(what, sizeof what, "safetensors, Hugging Face GPT-2 names, F32");
    } else {
        pt_ckpt_meta meta = {.step = 0, .adam_step = 0, .seed = 0, .lr = 0, .min_lr = 0, .warmup = 0, .total_steps = 0};
        snprintf(meta.model, sizeof meta.model, "%s", preset_of(&cfg));
        snprintf(meta.data, sizeof meta.data, "%s:%.240s", is_st ? "safetensors" : "llm.c", src);
        char saved[4200] = "";
        /* DST as ptrain-run treats a --save-dir: usable, and locked against a job saving into it */
        int lockfd = -1;
        rc = pt_ckpt_dir_check(dst);
        if (!rc && (rc = pt_ckpt_dir_lock(dst, NULL, &lockfd)) == PT_EUNSUPP) {
            fprintf(stderr, "ptrain-ckpt: warning: %s\n", pt_errmsg());
            rc = PT_OK;
        }
        if (!rc) rc = pt_ckpt_save(dst, &h.tr, &h.plan, &cfg, &meta, 0, saved, sizeof saved);
        if (lockfd >= 0) close(lockfd);
        snprintf(what, sizeof what, "checkpoint %.200s, step 0, fresh AdamW state, model %s", saved, meta.model);
    }
    if (rc) {
        status = tool_die(1, "convert: %s", pt_errmsg());
        goto out;
    }
    printf("convert: %s (step %ld, L=%d H=%d C=%d T=%d V=%d%s%s) -> %s (%s%s", path, step, cfg.n_layer, cfg.n_head,
           cfg.n_embd, cfg.seq_len, cfg.vocab, *st_from ? ", shape from " : "", st_from, dst, what, bytes ? "" : ")\n");
    if (bytes) printf(", %lld bytes)\n", (long long)bytes);
out:
    holder_free(&h);
    int inited = 0;
    MPI_Initialized(&inited);
    if (inited) MPI_Finalize();
    return status;
}


/* ---- sample -------------------------------------------------------------------
 * Autoregressive sampling from the model of a checkpoint, on one process
 * (the checkpoint resharded to the full model, as convert does): for each
 * new token, the forward pass over the last min(n, T) tokens (the rest of
 * the T positions padded; attention is causal, so padding after position
 * n-1 does not change its logits), the logits row of the last real
 * position (pt_gpt_logits: the head keeps none, one GEMM row again), then
 * on the host:
 * top-k filtering (Fan et al. 2018, "Hierarchical Neural Story
 * Generation", sec. 5.4: keep the k largest logits; ties at the k-th value
 * broken by the lower id), softmax at temperature F (logits / F), and one
 * draw by inverse CDF over the kept ids in id order with a uniform number
 * from a seeded xorshift64* generator (as llm.c's sample_mult with its
 * random_f32), so a seed gives the same text on every machine with the
 * same floating-point results.  --top-k 1 is greedy decoding (argmax, the
 * lowest id among equal maxima). */

typedef struct sample_opts {
    const char *prompt, *vocab_dir, *logits_file;
    long tokens, top_k;
    double temperature;
    unsigned long long seed;
    int ids;
} sample_opts;

static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545F4914F6CDD1Dull;
}

typedef struct cand { float v; int id; } cand;
static int cand_cmp(const void *a, const void *b)
{
    const cand *x = a, *y = b;
    if (x->v != y->v) return x->v < y->v ? 1 : -1;
    return x->id - y->id;
}

/* one id from logits [V] (host memory); scratch c [V] */
static int sample_one(const float *logits, int V, double temp, long top_k, uint64_t *rng, cand *c)
{
    int n = V;
    for (int i = 0; i < V; i++) c[i] = (cand){logits[i], i};
    if (top_k > 0 && top_k < V) {
        qsort(c, (size_t)V, sizeof *c, cand_cmp);
        n = (int)top_k;
        /* back to id order for the draw */
        for (int i = 1; i < n; i++)
            for (int j = i; j > 0 && c[j - 1].id > c[j].id; j--) {
                cand t = c[j]; c[j] = c[j - 1]; c[j - 1] = t;
            }
    }
    if (n == 1) return c[0].id;
    float mx = c[0].v;
    for (int i = 1; i < n; i++) if (c[i].v > mx) mx = c[i].v;
    double sum = 0;
    for (int i = 0; i < n; i++) sum += exp(((double)c[i].v - mx) / temp);
    const double coin = (double)(rng_next(rng) >> 11) / 9007199254740992.0 * sum;
    double cdf = 0;
    for (int i = 0; i < n; i++) {
        cdf += exp(((double)c[i].v - mx) / temp);
        if (coin < cdf) return c[i].id;
    }
    return c[n - 1].id; /* rounding */
}

static int cmd_sample(const char *arg, const sample_opts *so)
{
    if (!so->vocab_dir) return tool_die(2, "sample: the GPT-2 tokenizer is needed: --vocab-dir DIR or $PTRAIN_BPE_DIR (scripts/get-tokenizer.sh prints it)");
    pt_bpe *bpe = NULL;
    if (pt_bpe_load(&bpe, so->vocab_dir))
        return tool_die(2, "sample: the GPT-2 tokenizer (--vocab-dir %s): %s", so->vocab_dir, pt_errmsg());
    char path[4200];
    json_t *man = NULL;
    pt_gpt_config cfg;
    int rc = resolve(arg, path, sizeof path);
    if (!rc) rc = pt_ckpt_manifest_read(path, &man);
    if (!rc) rc = manifest_config(man, &cfg);
    json_decref(man);
    if (rc) {
        pt_bpe_free(bpe);
        return tool_die(2, "sample: %s", pt_errmsg());
    }
    int32_t *pids = NULL;
    size_t np = 0;
    if (pt_bpe_encode(bpe, so->prompt, strlen(so->prompt), &pids, &np)) {
        pt_bpe_free(bpe);
        return tool_die(2, "sample: --prompt: %s", pt_errmsg());
    }
    const int V = cfg.vocab, T = cfg.seq_len;
    const int eot = pt_bpe_eot(bpe);
    if (np == 0) { /* no prompt: start from <|endoftext|>, as GPT-2 and llm.c do */
        free(pids);
        pids = malloc(sizeof *pids);
        if (!pids || eot < 0 || eot >= V) {
            free(pids);
            pt_bpe_free(bpe);
            return tool_die(2, "sample: an empty --prompt starts from <|endoftext|> (%d), outside this model's vocabulary of %d", eot, V);
        }
        pids[0] = eot;
        np = 1;
    }
    for (size_t i = 0; i < np; i++)
        if (pids[i] >= V) {
            int bad = pids[i];
            free(pids);
            pt_bpe_free(bpe);
            return tool_die(2, "sample: the prompt's token %d (position %zu) is outside this model's vocabulary of %d ids", bad, i, V);
        }
    int status = 0;
    pt_atomic_file lf = {.fd = -1}; /* --logits: written atomically, never through a link (lib/core/file.h) */
    int have_lf = 0;
    holder h;
    memset(&h, 0, sizeof h);
    const size_t total = np + (size_t)so->tokens;
    int32_t *all = malloc(sizeof *all * total), *in = calloc((size_t)T, sizeof *in), *tg = calloc((size_t)T, sizeof *tg);
    float *row = malloc(sizeof *row * (size_t)V);
    cand *sc = malloc(sizeof *sc * (size_t)V);
    MPI_Init(NULL, NULL);
    if (!all || !in || !tg || !row || !sc) {
        status = tool_die(1, "sample: out of memory");
        goto out;
    }
    memcpy(all, pids, sizeof *all * np);
    pt_ckpt_meta meta;
    if ((rc = holder_build(&h, &cfg, T)) || (rc = pt_ckpt_load(path, &h.tr, &h.plan, &cfg, &meta))) {
        status = tool_die(rc == PT_ENOMEM ? 1 : 2, "sample: %s", pt_errmsg());
        goto out;
    }
    if (so->logits_file) {
        if (pt_atomic_open(&lf, so->logits_file)) {
            status = tool_die(2, "sample: --logits %s: %s", so->logits_file, pt_errmsg());
            goto out;
        }
        have_lf = 1;
    }
    fprintf(stderr, "sample: %s (step %ld, L=%d H=%d C=%d T=%d V=%d): %zu prompt tokens + %ld, temperature %g, top-k %ld, seed %llu\n",
            path, meta.step, cfg.n_layer, cfg.n_head, cfg.n_embd, T, V, np, so->tokens, so->temperature, so->top_k,
            so->seed);
    uint64_t rng = so->seed * 0x9E3779B97F4A7C15ull + 0x6A09E667F3BCC909ull;
    if (!rng) rng = 1;
    size_t n = np;
    if (h.model.g.Vl > V) { /* the whole vocabulary on one process: padded to Vl (= V at tp 1) */
        float *wide = realloc(row, sizeof *row * (size_t)h.model.g.Vl);
        if (!wide) {
            status = tool_die(1, "sample: out of memory");
            goto out;
        }
        row = wide;
    }
    for (long s = 0; s < so->tokens; s++) {
        const size_t w = n < (size_t)T ? n : (size_t)T;
        memcpy(in, all + (n - w), sizeof *in * w);
        memset(in + w, 0, sizeof *in * ((size_t)T - w));
        float loss;
        if ((rc = pt_gpt_forward(&h.model, in, tg, &loss))) {
            status = tool_die(1, "sample: forward: %s", pt_errmsg());
            goto out;
        }
        if ((rc = pt_gpt_logits(&h.model, (int)w - 1, row))) { /* the head keeps no logits: this row's again */
            status = tool_die(1, "sample: logits: %s", pt_errmsg());
            goto out;
        }
        if (have_lf && pt_write_all(lf.fd, row, sizeof *row * (size_t)V)) {
            status = tool_die(1, "sample: --logits %s: write failed: %s", so->logits_file, strerror(errno));
            goto out;
        }
        all[n++] = sample_one(row, V, so->temperature, so->top_k, &rng, sc);
    }
    if (so->ids) {
        for (size_t i = np; i < n; i++) printf("%d\n", all[i]);
    } else {
        char *text = NULL;
        size_t len;
        if (pt_bpe_decode(bpe, all, n, &text, &len)) {
            status = tool_die(1, "sample: decode: %s", pt_errmsg());
            goto out;
        }
        fwrite(text, 1, len, stdout);
        putchar('\n');
        free(text);
    }
    if (have_lf) {
        have_lf = 0;
        if (pt_atomic_commit(&lf, 1)) status = tool_die(1, "sample: --logits %s: %s", so->logits_file, pt_errmsg());
    }
out:
    if (have_lf) pt_atomic_abort(&lf);
    holder_free(&h);
    MPI_Finalize();
    free(all);
    free(in);
    free(tg);
    free(row);
    free(sc);
    free(pids);
    pt_bpe_free(bpe);
    return status;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    static const struct option lo[] = {
        {"to", required_argument, 0, 't'},
        {"dtype", required_argument, 0, 'D'},
        {"prompt", required_argument, 0, 'p'},
        {"tokens", required_argument, 0, 'n'},
        {"temperature", required_argument, 0, 'T'},
        {"top-k", required_argument, 0, 'k'},
        {"seed", required_argument, 0, 's'},
        {"vocab-dir", required_argument, 0, 'v'},
        {"ids", no_argument, 0, 'i'},
        {"logits", required_argument, 0, 'l'},
        {"model", required_argument, 0, 'm'},
        {"help", no_argument, 0, 'h'},
        {"version", no_argument, 0, 'V'},
        {0, 0, 0, 0},
    };
    const char *c = argv[1], *to = NULL, *model = NULL, *dtype = NULL;
    const int sub = !strcmp(c, "info") || !strcmp(c, "verify") || !strcmp(c, "convert") || !strcmp(c, "sample");
    sample_opts so = {.prompt = "", .tokens = 64, .temperature = 1.0, .top_k = 0, .seed = 1337};
    so.vocab_dir = tool_bpe_dir_env();
    if (!sub && strcmp(c, "--help") && strcmp(c, "-h") && strcmp(c, "help") && strcmp(c, "--version") &&
        strcmp(c, "-V"))
        return tool_die(2, "unknown command '%s' (valid: info, verify, convert, sample, --help, --version)", c);
    if (!strcmp(c, "help")) {
        usage(stdout);
        return 0;
    }
    opterr = 0;
    optind = sub ? 2 : 1;
    int o, li = 0;
    while ((o = getopt_long(argc, argv, ":hV", lo, &li)) != -1) {
        switch (o) {
        case 't':
            if (strcmp(c, "convert")) return tool_die(2, "%s: --to is only valid for convert", c);
            to = optarg;
            break;
        case 'D':
            if (strcmp(c, "convert")) return tool_die(2, "%s: --dtype is only valid for convert", c);
            dtype = optarg;
            break;
        case 'm':
            if (strcmp(c, "convert")) return tool_die(2, "%s: --model is only valid for convert", c);
            model = optarg;
            break;
        case 'p': case 'n': case 'T': case 'k': case 's': case 'v': case 'i': case 'l':
            if (strcmp(c, "sample")) return tool_die(2, "%s: --%s is only valid for sample", c, lo[li].name);
            if (o == 'p') so.prompt = optarg;
            else if (o == 'v') so.vocab_dir = optarg;
            else if (o == 'l') so.logits_file = optarg;
            else if (o == 'i') so.ids = 1;
            else if (o == 'n' && pt_parse_int("--tokens", optarg, 1, 1000000, &so.tokens)) return tool_die(2, "sample: %s", pt_errmsg());
            else if (o == 'k' && pt_parse_int("--top-k", optarg, 0, 1 << 24, &so.top_k)) return tool_die(2, "sample: %s", pt_errmsg());
            else if (o == 's') {
                long v;
                if (pt_parse_int("--seed", optarg, 0, 2147483647L, &v)) return tool_die(2, "sample: %s", pt_errmsg());
                so.seed = (unsigned long long)v;
            } else if (o == 'T') {
                char *end;
                errno = 0;
                double f = strtod(optarg, &end);
                if (end == optarg || *end || errno || !(f > 0) || f > 100)
                    return tool_die(2, "sample: --temperature '%s' is not a number in (0, 100] (use --top-k 1 for greedy decoding)", optarg);
                so.temperature = f;
            }
            break;
        case 'h':
            usage(stdout);
            return 0;
        case 'V':
            return tool_version();
        case ':':
            return tool_die(2, "%s: option '%s' needs a value", c, argv[optind - 1]);
        default:
            return tool_die(2, "%s: unknown option '%s' (valid: --to FORMAT, --dtype fp32|bf16, --model M (convert); --prompt, --tokens, --temperature, "
                          "--top-k, --seed, --vocab-dir, --ids, --logits (sample); --help, --version)", c, argv[optind - 1]);
        }
    }
    if (!sub) return tool_die(2, "a command is needed (valid: info, verify, convert, sample)");
    const int nargs = argc - optind, want = strcmp(c, "convert") ? 1 : 2;
    if (nargs != want)
        return tool_die(2, "%s: needs %s (got %d arguments)", c, want == 1 ? "one checkpoint directory" : "SRC and DST",
                   nargs);
    if (!strcmp(c, "info")) return cmd_info(argv[optind]);
    if (!strcmp(c, "verify")) return cmd_verify(argv[optind]);
    if (!strcmp(c, "sample")) return cmd_sample(argv[optind], &so);
    return convert(to, dtype, model, argv[optind], argv[optind + 1]);
}
