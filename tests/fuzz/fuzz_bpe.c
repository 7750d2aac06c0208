/* SPDX-License-Identifier: MIT */
/* libFuzzer target: GPT-2 BPE encode -> decode round trip (must give the
 * input bytes back exactly, NUL bytes and invalid UTF-8 included), and
 * decode of arbitrary ids.  Needs the tokenizer files in $PTRAIN_BPE_DIR:
 * scripts/fuzz.sh sets it (from scripts/get-tokenizer.sh when unset) or
 * skips this target. */
#include "fuzz_util.h"
#include "core/core.h"
#include "data/bpe.h"

static pt_bpe *bpe;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    const char *dir = getenv("PTRAIN_BPE_DIR");
    if (!dir || pt_bpe_load(&bpe, dir) != PT_OK) {
        fprintf(stderr, "fuzz_bpe: set PTRAIN_BPE_DIR to the GPT-2 tokenizer files, e.g. "
                "PTRAIN_BPE_DIR=$(scripts/get-tokenizer.sh), or run it through scripts/fuzz.sh (%s)\n",
                dir ? pt_errmsg() : "PTRAIN_BPE_DIR is not set");
        exit(1);
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int32_t *ids = NULL;
    size_t n = 0;
    if (pt_bpe_encode(bpe, (const char *)data, size, &ids, &n) != PT_OK) abort();
    char *text = NULL;
    size_t len = 0;
    if (pt_bpe_decode(bpe, ids, n, &text, &len) != PT_OK) abort();
    if (len != size || memcmp(text, data, size) != 0) abort(); /* byte-exact round trip */
    free(text);
    free(ids);
    /* the same bytes read as ids: decode must refuse or succeed, never crash */
    size_t nid = size / 4;
    if (nid) {
        int32_t *raw = malloc(nid * sizeof *raw);
        memcpy(raw, data, nid * sizeof *raw);
        text = NULL;
        if (pt_bpe_decode(bpe, raw, nid, &text, &len) == PT_OK) free(text);
        free(raw);
    }
    return 0;
}
