/* SPDX-License-Identifier: MIT */
/* ptrain-ckpt convert: a checkpoint to llm.c's .bin or safetensors, and
 * those model files to a checkpoint or to each other (ckpt_tool.h). */
#define _GNU_SOURCE
#include "config.h"
#include "ckpt_tool.h"
#include "bin/tool_util.h"
#include "ckpt/ckpt.h"
#include "core/file.h"

#include <errno.h>
#include <mpi.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int ends_with(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

/* Whether a model file is read as safetensors: not an llm.c file (its
 * first int32 is not llm.c's magic), and named *.safetensors or starting as
 * one (a u64 header length, then '{'); a file of neither kind goes to
 * ckpt_llmc_read, whose message names llm.c's magic. */
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

/* the preset whose config is cfg, or "custom" */
/* The model name a converted checkpoint records: the contract's spelling of
 * cfg (pt_model_shape_format: a preset's name, either family's, where the
 * shape is one exactly, else L,H,C,T,V or llama:...), into buf [n]; "custom"
 * where that spelling does not fit the manifest's field. */
static const char *preset_of(const pt_gpt_config *cfg, char *buf, int n)
{
    const int len = pt_model_shape_format(cfg, buf, n);
    if (len <= 0 || len >= n) snprintf(buf, (size_t)n, "custom");
    return buf;
}

/* a finished llama conversion: its status, MPI finalised when a holder started it */
static int llama_done(int rc)
{
    int inited = 0;
    MPI_Initialized(&inited);
    const int status = rc ? tool_die(rc == PT_ENOMEM || rc == PT_EIO ? 1 : 2, "convert: %s", pt_errmsg()) : 0;
    if (inited) MPI_Finalize();
    return status;
}

/* Llama-family models: a Hugging Face model in, a llama checkpoint out (llama.c); -1 for anything else */
static int convert_llama(const char *to, const char *dtype, const char *model, long long max_shard, const char *src,
                         const char *dst)
{
    if (strlen(dst) > 4000) return -1;
    if (!(ckpt_is_dir(src) && !ckpt_hf_is_llama(src, NULL)) && ckpt_hf_is_llama(src, model)) {
        if (to && strcmp(to, "ckpt"))
            return tool_die(2, "convert: --to %s: a Hugging Face Llama-family model converts to a checkpoint (valid: "
                               "--to ckpt, or no --to)", to);
        if (dtype) return tool_die(2, "convert: --dtype %s: a checkpoint keeps fp32 (valid: no --dtype)", dtype);
        if (max_shard) return tool_die(2, "convert: --max-shard-size is for writing Hugging Face files (--to hf)");
        return llama_done(ckpt_llama_in(src, model, dst));
    }
    if (!ckpt_is_dir(src)) return -1;
    char path[4200];
    json_t *man = NULL;
    pt_model_shape m;
    pt_errsave es;
    pt_error_save(&es);
    int rc = ckpt_resolve(src, path, sizeof path);
    if (!rc) rc = pt_ckpt_manifest_read(path, &man);
    if (!rc) rc = ckpt_manifest_config(man, &m);
    if (rc && to && !strcmp(to, "hf")) {
        json_decref(man);
        return tool_die(2, "convert: %s", pt_errmsg());
    }
    if (rc || m.family != PT_FAMILY_LLAMA) { /* the GPT-2 path reports its own errors */
        json_decref(man);
        pt_error_restore(&es);
        if (!rc && to && !strcmp(to, "hf"))
            return tool_die(2, "convert: --to hf writes a Hugging Face Llama-family directory; %s holds a GPT-2 model "
                               "(valid: --to safetensors, --to llmc)", src);
        return -1;
    }
    int dir = 0;
    if (!to) to = ends_with(dst, ".safetensors") ? "safetensors" : ends_with(dst, ".bin") ? "llmc" : "hf";
    if (!strcmp(to, "llmc")) rc = pt_fail(PT_EINVAL, "llm.c's model file holds GPT-2 models only; %s is a llama model "
                                                     "(valid: --to hf, --to safetensors)", src);
    else if (!strcmp(to, "ckpt")) rc = pt_fail(PT_EINVAL, "%s is already a checkpoint (ptrain-run --resume reshards it to "
                                                          "any plan; valid targets: --to hf, --to safetensors)", src);
    else if (!strcmp(to, "hf")) dir = 1;
    else if (strcmp(to, "safetensors"))
        rc = pt_fail(PT_EINVAL, "--to '%s' is not one of hf, safetensors (a llama checkpoint's targets)", to);
    if (!rc && dtype && strcmp(dtype, "fp32") && strcmp(dtype, "bf16") && strcmp(dtype, "fp16"))
        rc = pt_fail(PT_EINVAL, "--dtype '%s' is not one of fp32, bf16, fp16", dtype);
    if (!rc && model) rc = pt_fail(PT_EINVAL, "--model is for a Hugging Face SRC; a checkpoint records its model");
    if (!rc) {
        ckpt_old_manifest_warning(path, man);
        rc = ckpt_llama_out(path, man, &m, dst, dir, dtype, max_shard);
        json_decref(man);
        return llama_done(rc);
    }
    json_decref(man);
    return tool_die(2, "convert: %s", pt_errmsg());
}

int ckpt_convert(const char *to, const char *dtype, const char *model, long long max_shard, const char *src,
                 const char *dst)
{
    const int lr = convert_llama(to, dtype, model, max_shard, src, dst);
    if (lr >= 0) return lr;
    if (max_shard) return tool_die(2, "convert: --max-shard-size is for a llama model's Hugging Face files (--to hf)");
    enum { F_LLMC, F_ST, F_CKPT } target;
    int bf16 = 0;
    if (dtype && strcmp(dtype, "fp32") && strcmp(dtype, "bf16"))
        return tool_die(2, "convert: --dtype '%s' is not one of fp32, bf16", dtype);
    if (dtype) bf16 = !strcmp(dtype, "bf16");
    if (!to) to = ends_with(dst, ".bin") ? "llmc" : ends_with(dst, ".safetensors") ? "safetensors" : "ckpt";
    if (!strcmp(to, "llmc")) target = F_LLMC;
    else if (!strcmp(to, "safetensors")) target = F_ST;
    else if (!strcmp(to, "ckpt")) target = F_CKPT;
    else return tool_die(2, "convert: --to '%s' is not one of llmc, safetensors, ckpt%s", to,
                         !strcmp(to, "hf") ? " (hf: a llama checkpoint's Hugging Face directory)" : "");
    if (bf16 && target != F_LLMC)
        return tool_die(2, "convert: --dtype bf16 is for llm.c files (--to llmc: version 5); %s keeps fp32 (valid: "
                        "--dtype fp32, or --to llmc)", target == F_ST ? "safetensors" : "a checkpoint");
    if (strlen(dst) > 4000) return tool_die(2, "convert: destination name of %zu bytes is too long (at most 4000)", strlen(dst));
    const int from_ckpt = ckpt_is_dir(src);
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
        int rc = ckpt_resolve(src, path, sizeof path);
        if (!rc) rc = pt_ckpt_manifest_read(path, &man);
        if (!rc) rc = ckpt_manifest_config(man, &cfg);
        const double load = rc ? 0 : ckpt_load_bytes(man);
        json_decref(man);
        if (rc) {
            status = tool_die(2, "convert: %s", pt_errmsg());
            goto out;
        }
        /* the model and the checkpoint's data must fit before either is allocated */
        if ((rc = ckpt_holder_fits(&cfg, 1, load))) {
            status = tool_die(1, "convert: %s", pt_errmsg());
            goto out;
        }
        pt_ckpt_meta meta;
        if ((rc = ckpt_holder_build(&h, &cfg, 1)) || (rc = pt_ckpt_load(path, &h.tr, &h.plan, &cfg, &meta))) {
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
        int rc = is_st ? ckpt_st_read(src, model, &h, &cfg, st_from, sizeof st_from) : ckpt_llmc_read(src, &h, &cfg);
        if (rc) {
            status = tool_die(rc == PT_ENOMEM ? 1 : 2, "convert: %s", pt_errmsg());
            goto out;
        }
    }
    int64_t bytes = 0;
    int rc;
    char what[512];
    if (target == F_LLMC) {
        rc = ckpt_llmc_write(&h, dst, bf16, &bytes);
        snprintf(what, sizeof what, "llm.c gpt2 version %d (%s), Vp=%d", bf16 ? LLMC_VERSION_BF16 : LLMC_VERSION_FP32,
                 bf16 ? "bf16" : "fp32", (cfg.vocab + LLMC_PAD - 1) / LLMC_PAD * LLMC_PAD);
    } else if (target == F_ST) {
        rc = ckpt_st_write(&h, dst, step, &bytes);
        snprintf(what, sizeof what, "safetensors, Hugging Face GPT-2 names, F32");
    } else {
        pt_ckpt_meta meta = {.step = 0, .adam_step = 0, .seed = 0, .lr = 0, .min_lr = 0, .warmup = 0, .total_steps = 0};
        preset_of(&cfg, meta.model, (int)sizeof meta.model);
        snprintf(meta.data, sizeof meta.data, "%s:%.240s", is_st ? "safetensors" : "llm.c", src);
        char saved[4200] = "";
        int lockfd = -1;
        rc = ckpt_dst_open(dst, &lockfd);
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
    ckpt_holder_free(&h);
    int inited = 0;
    MPI_Initialized(&inited);
    if (inited) MPI_Finalize();
    return status;
}
