/* SPDX-License-Identifier: MIT */
/* ptrain-ckpt: a holder's model written as safetensors under Hugging Face
 * GPT-2 names (ckpt_tool.h).
 *
 * Format (huggingface/safetensors): u64 little-endian N, N bytes of JSON
 * {"NAME": {"dtype": "F32", "shape": [...], "data_offsets": [BEGIN, END]},
 * ..., "__metadata__": {string: string}}, then the raw little-endian data;
 * offsets are relative to the byte after the header.  The header is padded
 * with spaces to a multiple of 8 bytes.  Names and shapes are those of
 * transformers' GPT2Model state dict (wte.weight [V, C], h.N.attn.c_attn.weight
 * [C, 3C] (Conv1D: [in, out]), ...). */
#define _GNU_SOURCE
#include "config.h"
#include "ckpt_tool.h"
#include "contract/model.h"
#include "backend/ops.h"
#include "core/file.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int ckpt_st_entries(const pt_gpt_config *cfg, st_entry **out)
{
    const int L = cfg->n_layer, n = pt_model_param_count(cfg);
    const int pre = pt_model_pre_params(cfg), npb = pt_model_block_params(cfg);
    if (cfg->family != PT_FAMILY_GPT2 || npb != 12)
        return pt_fail(PT_EINVAL, "Hugging Face GPT-2 names are for a GPT-2 model, not a %s one",
                       pt_model_family_name(cfg->family));
    st_entry *e = calloc((size_t)n, sizeof *e);
    if (!e) return pt_fail(PT_ENOMEM, "out of memory");
    static const char *const layer[12] = {"ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias",
                                          "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight", "ln_2.bias",
                                          "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias"};
    int k = 0;
    e[k++] = (st_entry){"wte.weight", 0, cfg->vocab, 0, 0};
    e[k++] = (st_entry){"wpe.weight", 1, cfg->seq_len, 0, 0};
    for (int l = 0; l < L; l++)
        for (int j = 0; j < npb; j++, k++) {
            snprintf(e[k].name, sizeof e[k].name, "h.%d.%s", l, layer[j]);
            e[k].idx = pre + npb * l + j;
            e[k].rows = -1;
            e[k].transpose = j == 2 || j == 4 || j == 8 || j == 10;
            e[k].vec = !e[k].transpose;
        }
    e[k++] = (st_entry){"ln_f.weight", pre + npb * L, -1, 0, 1};
    e[k++] = (st_entry){"ln_f.bias", pre + npb * L + 1, -1, 0, 1};
    *out = e;
    return n;
}

int ckpt_st_write(holder *h, const char *out, long step, int64_t *bytes)
{
    st_entry *e = NULL;
    int n = ckpt_st_entries(&h->model.cfg, &e);
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
