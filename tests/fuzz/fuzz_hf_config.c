/* SPDX-License-Identifier: MIT */
/* libFuzzer target: a Hugging Face GPT-2 config.json as ptrain-ckpt
 * convert reads it beside a model.safetensors (bin/ckpt/hf_read.c,
 * hf_config, through its file path: stat, the 1 MiB limit, the read).
 * The tool's source is included here, so that its static reader is
 * called as it is, with no change to the tool.
 *
 * A config it accepts has n_layer, n_head, n_embd, n_positions and
 * vocab_size in [1, 2^31); a refusal is one line.  Each accepted config
 * then goes through ckpt_st_read with an empty model.safetensors (refused
 * in one line: no tensor, or a model ptrain does not build) and, when the
 * model has at most 2^16 parameters, with a model.safetensors of exactly
 * its tensors (zeros), which must pass every check and reach the model's
 * construction -- a stub here that takes the config and stops.  The memory
 * check before it (ckpt_holder_fits) is a stub that passes (see there). */
#include "fuzz_util.h"

#include "../../bin/ckpt/hf_read.c"

/* ---- ckpt_st_read's model construction and training state: stubs ------- */
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
int pt_train_owned_state(pt_train *t, int i, int64_t *lo, int64_t *hi, float **data, float **m, float **v)
{
    (void)t, (void)i, (void)lo, (void)hi, (void)data, (void)m, (void)v;
    abort(); /* after ckpt_holder_build: never */
}
int pt_train_state_loaded(pt_train *t)
{
    (void)t;
    abort();
}

static char cfgpath[300], stpath[300];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    snprintf(cfgpath, sizeof cfgpath, "%s/config.json", fuzz_dir());
    snprintf(stpath, sizeof stpath, "%s/model.safetensors", fuzz_dir());
    return 0;
}

/* model.safetensors holding json header hdr and `data` bytes of zeros */
static void write_st(const char *hdr, size_t data)
{
    size_t hl = strlen(hdr);
    unsigned char *b = calloc(1, 8 + hl + data);
    if (!b) abort();
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)((uint64_t)hl >> (8 * i));
    memcpy(b + 8, hdr, hl);
    fuzz_write(stpath, b, 8 + hl + data);
    free(b);
}

/* the safetensors of model cfg under Hugging Face's names (F32 zeros), when
 * it has at most 2^16 parameters; 0 when it is larger */
static int write_model(const pt_gpt_config *cfg)
{
    const int64_t C = cfg->n_embd, L = cfg->n_layer;
    if (L > 64 || C > 256 || cfg->vocab > 65536 || cfg->seq_len > 65536) return 0;
    const int64_t n = (int64_t)cfg->vocab * C + (int64_t)cfg->seq_len * C + L * (12 * C * C + 13 * C) + 2 * C;
    if (n > (1 << 16)) return 0;
    st_entry *e = NULL;
    const int ne = ckpt_st_entries(cfg, &e);
    if (ne < 0) abort();
    json_t *hdr = json_object();
    int64_t off = 0;
    for (int k = 0; k < ne; k++) {
        int64_t shape[2];
        const int nd = hf_shape(cfg, k, shape);
        const int64_t bytes = 4 * shape[0] * (nd == 2 ? shape[1] : 1);
        json_t *sh = nd == 2 ? json_pack("[I, I]", (json_int_t)shape[0], (json_int_t)shape[1])
                             : json_pack("[I]", (json_int_t)shape[0]);
        json_object_set_new(hdr, e[k].name, json_pack("{s:s, s:o, s:[I, I]}", "dtype", "F32", "shape", sh,
                                                      "data_offsets", (json_int_t)off, (json_int_t)(off + bytes)));
        off += bytes;
    }
    free(e);
    char *text = json_dumps(hdr, JSON_COMPACT);
    json_decref(hdr);
    if (!text || off != 4 * n) abort();
    write_st(text, (size_t)off);
    free(text);
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_write(cfgpath, data, size);
    pt_gpt_config cfg;
    memset(&cfg, 0, sizeof cfg);
    char used[400] = "";
    pt_error_clear();
    int rc = hf_config(stpath, &cfg, used, sizeof used);
    if (rc == 1) abort(); /* config.json is there */
    if (rc != PT_OK) {
        fuzz_check_msg(pt_errmsg());
        return 0;
    }
    if (cfg.n_layer < 1 || cfg.n_head < 1 || cfg.n_embd < 1 || cfg.seq_len < 1 || cfg.vocab < 1 ||
        strcmp(used, cfgpath))
        abort();
    /* an empty safetensors beside it: refused in one line */
    holder h;
    memset(&h, 0, sizeof h);
    pt_gpt_config got;
    char from[400];
    write_st("{}", 0);
    pt_error_clear();
    if (ckpt_st_read(stpath, NULL, &h, &got, from, sizeof from) == PT_OK) abort();
    fuzz_check_msg(pt_errmsg());
    /* a small model of exactly its tensors: every check passes, the model is built from this config */
    if (cfg.n_embd % cfg.n_head == 0 && write_model(&cfg)) {
        nbuilt = 0;
        pt_error_clear();
        rc = ckpt_st_read(stpath, NULL, &h, &got, from, sizeof from);
        if (rc != PT_EUNSUPP || nbuilt != 1 || memcmp(&built, &cfg, sizeof cfg) != 0) {
            fprintf(stderr, "a model.safetensors of exactly the config's tensors: %s\n", pt_errmsg());
            abort();
        }
    }
    return 0;
}
