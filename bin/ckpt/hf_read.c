/* SPDX-License-Identifier: MIT */
/* ptrain-ckpt: a Hugging Face GPT-2 model.safetensors read into a holder
 * (ckpt_tool.h).
 *
 * transformers' GPT2Model / GPT2LMHeadModel state dict (model.safetensors):
 * the names of ckpt_st_entries, with or without the "transformer." prefix of
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
#define _GNU_SOURCE
#include "config.h"
#include "ckpt_tool.h"
#include "backend/ops.h"
#include "ckpt/safetensors.h"
#include "core/file.h"
#include "contract/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
    memset(cfg, 0, sizeof *cfg); /* a GPT-2 shape: the fields after vocab stay 0 */
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

/* Hugging Face's shape of ckpt_st_entries' entry i of a model cfg: [rows, cols] or [n]:
 * pt_model_param_info's, Conv1D weights ([in, out]) transposed */
static int hf_shape(const pt_gpt_config *cfg, int i, int64_t *shape)
{
    pt_param_info pi;
    if (pt_model_param_info(cfg, i, &pi)) return shape[0] = 0, 1;
    if (pi.cols == 1) return shape[0] = pi.rows, 1;
    const int transposed = pi.role == PT_ROLE_QKV_W || pi.role == PT_ROLE_PROJ_W || pi.role == PT_ROLE_FC_W ||
                           pi.role == PT_ROLE_FCPROJ_W;
    shape[0] = transposed ? pi.cols : pi.rows;
    shape[1] = transposed ? pi.rows : pi.cols;
    return 2;
}

static void shape_text(char *b, size_t n, const int64_t *shape, int nd)
{
    size_t o = (size_t)snprintf(b, n, "[");
    for (int k = 0; k < nd && o < n; k++) o += (size_t)snprintf(b + o, n - o, "%s%lld", k ? ", " : "", (long long)shape[k]);
    if (o < n) snprintf(b + o, n - o, "]");
}

/* Read a Hugging Face GPT-2 model.safetensors into a fresh holder: every
 * name, shape and dtype checked against the model before it is built. */
int ckpt_st_read(const char *file, const char *model, holder *h, pt_gpt_config *cfg, char *from, size_t fn)
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
        *cfg = ms;
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
    const int n = ckpt_st_entries(cfg, &e);
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
    /* the checks passed: sizes are the file's own (at most 4 bytes per
     * element of it); the model and the tensors in memory must fit before
     * either is allocated */
    if ((rc = ckpt_holder_fits(cfg, 1, 4.0 * (double)most + (lmt ? 4.0 * (double)lmt->numel : 0)))) {
        rc = pt_fail(rc, "%s: %s", file, pt_errmsg());
        goto out;
    }
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
    if ((rc = ckpt_holder_build(h, cfg, 1))) goto out;
    const pt_ops *ops = h->model.ops;
    for (int k = 0; k < n && !rc; k++) {
        char name[64];
        snprintf(name, sizeof name, "%s%s", prefix, e[k].name);
        const pt_st_tensor *t = pt_st_find(&st, name);
        if ((rc = pt_st_read_f32(&st, t, buf))) break;
        /* NaN or infinite weights would train and save NaN: refused here, naming the element */
        const long long bad = ckpt_first_nonfinite(buf, (size_t)t->numel);
        if (bad >= 0) {
            char at[64];
            if (t->ndim == 2) snprintf(at, sizeof at, " [%lld, %lld]", bad / t->shape[1], bad % t->shape[1]);
            else at[0] = 0;
            rc = pt_fail(PT_EFORMAT, "%s: tensor '%s' element %lld%s is %g (valid: a finite number): its weights "
                         "cannot be trained or sampled from", file, name, bad, at, (double)buf[bad]);
            break;
        }
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
