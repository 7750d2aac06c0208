/* libFuzzer target: the token file readers (pt_shard_open, and
 * pt_tokens_open for every format: by magic, llm.c, nanoGPT with a
 * vocabulary from the first byte) and the batch loader on whatever they
 * accept. */
#include "fuzz_util.h"
#include "core/core.h"
#include "data/shard.h"

static void check_one(const uint8_t *data, size_t size);
static void check_open(pt_shard *s, int rc);

/* FNV-1a 64, as the shard format */
static uint64_t fnv(const uint8_t *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ULL;
    return h;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    check_one(data, size);
    /* the same input with a valid magic, token count and checksum, so the
     * fuzzer also reaches the id checks and the loader */
    if (size >= 64 && size < (1u << 20)) {
        uint8_t *fix = malloc(size);
        memcpy(fix, data, size);
        memcpy(fix, "PTRNTOK", 8);
        uint64_t n = (size - 64) / 2, sum = fnv(fix + 64, 2 * n);
        for (int i = 0; i < 8; i++) {
            fix[16 + i] = (uint8_t)(n >> (8 * i));
            fix[32 + i] = (uint8_t)(sum >> (8 * i));
        }
        check_one(fix, 64 + 2 * n);
        free(fix);
    }
    /* and as an llm.c file with a valid magic, version and count */
    if (size >= 1024 && size < (1u << 20)) {
        uint8_t *fix = malloc(size);
        memcpy(fix, data, size);
        uint32_t head[3] = { 20240520, 1, (uint32_t)((size - 1024) / 2) };
        for (int k = 0; k < 3; k++)
            for (int i = 0; i < 4; i++) fix[4 * k + i] = (uint8_t)(head[k] >> (8 * i));
        check_one(fix, 1024 + 2 * (size_t)head[2]);
        free(fix);
    }
    return 0;
}

static void check_one(const uint8_t *data, size_t size)
{
    char path[64];
    int fd = fuzz_memfile(data, size, path, sizeof path);
    pt_shard s;
    /* pt_shard_open, then pt_tokens_open by magic, as llm.c, as nanoGPT */
    for (int fmt = -1; fmt <= PT_TOKENS_NANOGPT; fmt++) {
        if (fmt == PT_TOKENS_PTRAIN) continue;
        uint32_t vocab = size ? 1u + data[0] * 257u : 1u;
        int rc = fmt < 0 ? pt_shard_open(&s, path) : pt_tokens_open(&s, path, fmt, vocab);
        check_open(&s, rc);
    }
    close(fd);
}

static void check_open(pt_shard *s, int rc)
{
    if (rc == PT_OK) {
        if (s->ntokens >= 4) {
            int T = (int)(s->ntokens - 2 < 8 ? s->ntokens - 2 : 8);
            int32_t in[2 * 8], tg[2 * 8];
            if (pt_loader_batch(s, 3, 2, T, 0, 2, in, tg) != PT_OK) abort();
            for (int i = 0; i < 2 * T; i++)
                if (in[i] < 0 || (uint32_t)in[i] >= s->vocab_size || tg[i] < 0 ||
                    (uint32_t)tg[i] >= s->vocab_size)
                    abort();
        }
        pt_shard_close(s);
    } else if (!*pt_errmsg() || strchr(pt_errmsg(), '\n')) {
        abort(); /* every refusal is one non-empty line */
    }
}
