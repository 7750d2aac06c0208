/* SPDX-License-Identifier: MIT */
/* libFuzzer target: llm.c's gpt2 model file (.bin) as ptrain-ckpt convert
 * reads it (bin/ckpt/llmc.c, ckpt_llmc_read: the 1 KiB header, its
 * checks, the size it implies, the tensors' bytes).  The tool's source is
 * included here and the model it would build is a stub that records the
 * config and stops: what is fuzzed is everything before the model exists
 * (the memory check before it, ckpt_holder_fits, is a stub that passes).
 *
 * Every input is read as it is: refused in one line, or accepted with a
 * header whose config reaches the model.  Then, so that the fuzzer gets
 * past the magic and the size check, the input is also read as a repaired
 * file: magic and version (3, fp32, or 5, bf16, by the input's second
 * int) set, the shape taken from the input's header ints folded into a
 * small model, and exactly the tensor bytes that shape needs (the input's
 * bytes after the header, then zeros; NaN and infinite weights, which
 * convert refuses, made 0).  That file must be accepted with that shape;
 * one byte shorter or longer, or with the input's first non-finite weight
 * put back, it must be refused. */
#include "fuzz_util.h"

#include "../../bin/ckpt/llmc.c"

/* ---- the model (holder.c, lib/train, lib/backend): stubs ---------------- */
static pt_gpt_config built;
static int nbuilt;
int ckpt_holder_build(holder *h, const pt_gpt_config *cfg, int T)
{
    (void)h, (void)T;
    built = *cfg;
    nbuilt++;
    return pt_fail(PT_EUNSUPP, "fuzz: the model is not built");
}
/* bin/ckpt/holder.c's memory check (the host-memory limit against the cost
 * model's bytes for the model) returns PT_OK here: the models this target
 * reaches it with are those of files under libFuzzer's 64 KiB inputs, which
 * the real check passes on any machine, and holder.c cannot be linked (it
 * defines ckpt_holder_build, stubbed above, and starts MPI).  What it does
 * check is its callers' side: a config they accepted (the limits of their
 * own refusals), one sequence, and a finite, non-negative byte count. */
int ckpt_holder_fits(const pt_gpt_config *cfg, int T, double extra)
{
    if (cfg->n_layer < 1 || cfg->n_layer > 4096 || cfg->n_head < 1 || cfg->n_embd < 1 || cfg->n_embd > 1 << 16 ||
        cfg->n_embd % cfg->n_head || cfg->seq_len < 1 || cfg->seq_len > 1 << 20 || cfg->vocab < 1 ||
        cfg->vocab > 1 << 24 || T != 1 || !(extra >= 0 && extra < 1e18)) {
        fprintf(stderr, "ckpt_holder_fits(L=%d H=%d C=%d T=%d V=%d, T=%d, extra %g): not a model its caller accepts\n",
                cfg->n_layer, cfg->n_head, cfg->n_embd, cfg->seq_len, cfg->vocab, T, extra);
        abort();
    }
    return PT_OK;
}
/* after ckpt_holder_build, or in the writer: never reached */
int pt_train_owned_state(pt_train *t, int i, int64_t *lo, int64_t *hi, float **data, float **m, float **v)
{
    (void)t, (void)i, (void)lo, (void)hi, (void)data, (void)m, (void)v;
    abort();
}
int pt_train_state_loaded(pt_train *t)
{
    (void)t;
    abort();
}
void pt_bf16_to_f32_n(float *dst, const pt_bf16 *src, size_t n)
{
    (void)dst, (void)src, (void)n;
    abort();
}
void pt_f32_to_bf16_n(pt_bf16 *dst, const float *src, size_t n)
{
    (void)dst, (void)src, (void)n;
    abort();
}

/* read data[0, size) as a file: accepted (up to the stub) or refused in one line */
static int read_file(const uint8_t *data, size_t size, pt_gpt_config *cfg)
{
    char path[64];
    int fd = fuzz_memfile(data, size, path, sizeof path);
    holder h;
    memset(&h, 0, sizeof h);
    memset(cfg, 0, sizeof *cfg);
    nbuilt = 0;
    pt_error_clear();
    int rc = ckpt_llmc_read(path, &h, cfg);
    close(fd);
    if (rc == PT_OK) abort(); /* the stub never builds */
    fuzz_check_msg(pt_errmsg());
    if (nbuilt && (rc != PT_EUNSUPP || memcmp(&built, cfg, sizeof *cfg) != 0)) abort();
    return nbuilt ? 1 : 0; /* 1: the file passed every check */
}

static int32_t int_at(const uint8_t *data, size_t size, int i)
{
    uint32_t v = 0;
    for (int b = 0; b < 4; b++) v |= (uint32_t)(4 * (size_t)i + b < size ? data[4 * i + b] : 0) << (8 * b);
    return (int32_t)v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pt_gpt_config cfg;
    if (read_file(data, size, &cfg)) {
        /* accepted as it is: a header of a model ptrain builds, and the size it says */
        if (cfg.n_layer < 1 || cfg.n_head < 1 || cfg.n_embd % cfg.n_head || cfg.seq_len < 1 || cfg.vocab < 1) abort();
    }
    /* repaired: a small model from the header's ints, exactly its bytes */
    int bf16 = int_at(data, size, 1) & 1;
    uint32_t u[6];
    for (int i = 0; i < 6; i++) u[i] = (uint32_t)int_at(data, size, 2 + i);
    const int T = 1 + (int)(u[0] % 16), V = 1 + (int)(u[1] % 300), L = 1 + (int)(u[2] % 3), NH = 1 + (int)(u[3] % 4),
              C = NH * (1 + (int)(u[4] % 4)), Vp = V + (int)(u[5] % 129);
    const size_t es = bf16 ? 2 : 4;
    const size_t n = (size_t)Vp * C + (size_t)T * C + (size_t)L * (12 * (size_t)C * C + 13 * (size_t)C) + 2 * (size_t)C;
    const size_t want = 1024 + es * n;
    uint8_t *fix = calloc(1, want + 1);
    if (!fix) abort();
    memcpy(fix, data, size < want ? size : want);
    const int32_t hd[8] = {LLMC_MAGIC, bf16 ? LLMC_VERSION_BF16 : LLMC_VERSION_FP32, T, V, L, NH, C, Vp};
    memcpy(fix, hd, sizeof hd);
    /* NaN and infinite weights are refused (the file's element named): the
     * repaired file holds zeros in their place; the first one is put back
     * below */
    size_t bad = 0; /* byte offset of the first, 0: none */
    uint8_t bad_bytes[4];
    for (size_t at = 1024; at < want; at += es) {
        float f;
        if (bf16) {
            pt_bf16 h;
            memcpy(&h, fix + at, sizeof h);
            f = pt_bf16_to_f32(h);
        } else {
            memcpy(&f, fix + at, sizeof f);
        }
        if (f - f == 0) continue;
        if (!bad) {
            bad = at;
            memcpy(bad_bytes, fix + at, es);
        }
        memset(fix + at, 0, es);
    }
    if (!read_file(fix, want, &cfg) || cfg.n_layer != L || cfg.n_head != NH || cfg.n_embd != C ||
        cfg.seq_len != T || cfg.vocab != V) {
        fprintf(stderr, "a repaired file (T=%d V=%d Vp=%d L=%d NH=%d C=%d, %s, %zu bytes) is refused: %s\n", T, V, Vp,
                L, NH, C, bf16 ? "bf16" : "fp32", want, pt_errmsg());
        abort();
    }
    if (read_file(fix, want - 1, &cfg) || read_file(fix, want + 1, &cfg)) abort(); /* a byte less or more */
    if (bad) { /* with the input's first non-finite weight: refused, naming it */
        memcpy(fix + bad, bad_bytes, es);
        if (read_file(fix, want, &cfg) || !strstr(pt_errmsg(), "(valid: a finite number)")) {
            fprintf(stderr, "a repaired file with a non-finite weight at byte %zu: %s\n", bad, pt_errmsg());
            abort();
        }
    }
    free(fix);
    return 0;
}
