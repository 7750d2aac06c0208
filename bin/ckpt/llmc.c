/* SPDX-License-Identifier: MIT */
/* ptrain-ckpt: llm.c's gpt2 model file, read into a holder and written
 * from one (ckpt_tool.h). */
#define _GNU_SOURCE
#include "config.h"
#include "ckpt_tool.h"
#include "contract/model.h"
#include "backend/gemm_bf16.h"
#include "backend/ops.h"
#include "core/file.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* llm.c's tensor order: k-th of the 16 tensors, layer l -> ptrain index
 * (pt_model_param_info's GPT-2 list: wte, wpe, 12 per block, lnf.w, lnf.b) */
static int llmc_index(int k, int l, int L)
{
    const pt_model_shape g = {.n_layer = L, .family = PT_FAMILY_GPT2};
    const int pre = pt_model_pre_params(&g), npb = pt_model_block_params(&g);
    if (k < pre) return k;
    if (k < pre + npb) return pre + npb * l + (k - pre);
    return pre + npb * L + (k - pre - npb);
}

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
int ckpt_llmc_read(const char *file, holder *h, pt_gpt_config *cfg)
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
    *cfg = (pt_gpt_config){.n_layer = L, .n_head = NH, .n_embd = C, .seq_len = maxT, .vocab = V};
    /* the model and the file's tensors in memory: checked before either is allocated */
    int rc = ckpt_holder_fits(cfg, 1, (double)(es * n));
    if (rc) {
        close(fd);
        return pt_fail(rc, "llm.c model file %s: %s", file, pt_errmsg());
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
    /* NaN or infinite weights would train and save NaN: refused before
     * anything is built, naming llm.c's tensor (ParameterTensors) and the
     * element (its index over all layers, then the layer) */
    static const char *const names[16] = {"wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb",
                                          "ln2w", "ln2b", "fcw", "fcb", "fcprojw", "fcprojb", "lnfw", "lnfb"};
    const int64_t per[16] = {(int64_t)Vp * c, (int64_t)maxT * c, c, c, 3 * c * c, 3 * c, c * c, c, c, c,
                             4 * c * c, 4 * c, 4 * c * c, c, c, c};
    const char *at = buf;
    for (int k = 0; k < 16; k++) {
        const int64_t cnt = per[k] * (k >= 2 && k < 14 ? l : 1);
        for (int64_t e = 0; e < cnt; e++) {
            float f;
            if (es == 2) f = pt_bf16_to_f32(((const pt_bf16 *)(const void *)at)[e]);
            else memcpy(&f, at + 4 * e, sizeof f);
            if (f - f == 0) continue;
            char layer[32] = "";
            if (k >= 2 && k < 14) snprintf(layer, sizeof layer, " (layer %lld)", (long long)(e / per[k]));
            free(buf);
            return pt_fail(PT_EFORMAT, "llm.c model file %s: tensor %s element %lld%s is %g (valid: a finite number): "
                           "its weights cannot be trained or sampled from", file, names[k], (long long)e, layer,
                           (double)f);
        }
        at += es * cnt;
    }
    rc = ckpt_holder_build(h, cfg, 1);
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
int ckpt_llmc_write(holder *h, const char *out, int bf16, int64_t *bytes)
{
    const pt_gpt_config *cfg = &h->model.cfg;
    if (cfg->family != PT_FAMILY_GPT2)
        return pt_fail(PT_EINVAL, "llm.c's model file holds GPT-2 models only, not a %s model (valid: --to hf, --to "
                                  "safetensors)", pt_model_family_name(cfg->family));
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
