/* SPDX-License-Identifier: MIT */
/* ptrain-ckpt: Hugging Face Llama-family models in and out (ckpt_tool.h).
 *
 * In: a directory (or its config.json's model.safetensors, or
 * model.safetensors.index.json) of LlamaForCausalLM, Qwen2ForCausalLM
 * (q/k/v biases), MistralForCausalLM without a sliding window (SmolLM2 and
 * TinyLlama are LlamaForCausalLM): config.json gives the shape
 * (ckpt_llama_config), the tensors (F32, F16, BF16; one file, or shards
 * named by the index's weight_map) are streamed in blocks of 1 Mi elements
 * straight into the checkpoint's rank file (pt_ckpt_write_model): no model
 * is built, memory is a few MB whatever the model's size.  Names
 * (transformers' LlamaForCausalLM state dict -> pt_model_param_info):
 *   model.embed_tokens.weight                          wte
 *   model.layers.N.input_layernorm.weight              hN.ln1.w
 *   model.layers.N.self_attn.q_proj.weight (.bias)     hN.q.w (hN.q.b)
 *   model.layers.N.self_attn.k_proj, v_proj (rows)     hN.kv.w (hN.kv.b)
 *   model.layers.N.self_attn.o_proj.weight             hN.proj.w
 *   model.layers.N.post_attention_layernorm.weight     hN.ln2.w
 *   model.layers.N.mlp.gate_proj, up_proj (rows)       hN.fc.w
 *   model.layers.N.mlp.down_proj.weight                hN.fcproj.w
 *   model.norm.weight                                  lnf.w
 *   lm_head.weight                                     lm_head.w (untied; tied: absent or equal to wte)
 * The manifest records the source layout ("hf": config.json, and per file
 * its name, metadata and tensors in data order with their dtypes, the
 * index's metadata), so that converting out writes the same files back,
 * bit for bit (safetensors' own serialisation: compact header JSON,
 * "__metadata__" first, padded with spaces to 8 bytes).
 *
 * Out: a checkpoint of a llama model to a directory (--to hf: config.json,
 * model.safetensors or, sharded, model-0000N-of-0000M.safetensors and
 * model.safetensors.index.json) or one .safetensors file, in the recorded
 * dtypes (else --dtype, else F32: fp32 rounded to nearest even), streamed
 * from the rank file of a one-rank checkpoint (else through a one-rank
 * holder, pt_ckpt_load resharding). */
#define _GNU_SOURCE
#include "config.h"
#include "ckpt_tool.h"
#include "bin/tool_util.h"
#include "ckpt/ckpt.h"
#include "ckpt/safetensors.h"
#include "contract/model.h"
#include "core/file.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define BLOCK (1 << 20) /* elements streamed at a time */

/* one Hugging Face tensor: elements [first, first + n) of ptrain parameter idx */
typedef struct hf_t {
    char name[96];
    int idx;
    int64_t first, n;
    int ndim;
    int64_t shape[2];
    int dtype; /* pt_st_dtype (out) */
    int file;  /* source / destination file */
    const pt_st_tensor *src;
} hf_t;

/* The Hugging Face tensors of model m in transformers' state-dict order
 * (per layer: q, k, v, o, gate, up, down, input_layernorm,
 * post_attention_layernorm), lm_head only when untied.  Count, or PT_ENOMEM. */
static int hf_list(const pt_model_shape *m, hf_t **out)
{
    const int L = m->n_layer, per = 9 + 3 * (m->qkv_bias != 0);
    const int n = 2 + L * per + pt_model_untied(m);
    hf_t *e = calloc((size_t)n, sizeof *e);
    if (!e) return pt_fail(PT_ENOMEM, "out of memory");
    const int64_t C = m->n_embd, KVC = (int64_t)pt_model_kv_heads(m) * (m->n_embd / m->n_head), I = pt_model_ffn(m);
    const int pre = pt_model_pre_params(m), npb = pt_model_block_params(m);
    int k = 0;
#define ADD(nm, ix, fi, rows, cols) do {                                                         \
        hf_t *x = &e[k++];                                                                      \
        snprintf(x->name, sizeof x->name, "%s", nm);                                            \
        x->idx = (ix), x->first = (fi) * ((cols) ? (cols) : 1), x->n = (rows) * ((cols) ? (cols) : 1); \
        x->ndim = (cols) ? 2 : 1, x->shape[0] = (rows), x->shape[1] = (cols);                   \
    } while (0)
    ADD("model.embed_tokens.weight", 0, 0, (int64_t)m->vocab, C);
    for (int l = 0; l < L; l++) {
        char b[96];
        const int base = pre + l * npb, q = base + 1, qb = base + 2, kv = base + 2 + m->qkv_bias,
                  kvb = kv + 1, o = kv + 1 + m->qkv_bias, ln2 = o + 1, fc = ln2 + 1, fcp = fc + 1;
#define LN(s) (snprintf(b, sizeof b, "model.layers.%d.%s", l, s), b)
        ADD(LN("self_attn.q_proj.weight"), q, 0, C, C);
        if (m->qkv_bias) ADD(LN("self_attn.q_proj.bias"), qb, 0, C, 0);
        ADD(LN("self_attn.k_proj.weight"), kv, 0, KVC, C);
        if (m->qkv_bias) ADD(LN("self_attn.k_proj.bias"), kvb, 0, KVC, 0);
        ADD(LN("self_attn.v_proj.weight"), kv, KVC, KVC, C);
        if (m->qkv_bias) ADD(LN("self_attn.v_proj.bias"), kvb, KVC, KVC, 0);
        ADD(LN("self_attn.o_proj.weight"), o, 0, C, C);
        ADD(LN("mlp.gate_proj.weight"), fc, 0, I, C);
        ADD(LN("mlp.up_proj.weight"), fc, I, I, C);
        ADD(LN("mlp.down_proj.weight"), fcp, 0, C, I);
        ADD(LN("input_layernorm.weight"), base, 0, C, 0);
        ADD(LN("post_attention_layernorm.weight"), ln2, 0, C, 0);
#undef LN
    }
    const int post = pre + L * npb;
    ADD("model.norm.weight", post, 0, C, 0);
    if (pt_model_untied(m)) ADD("lm_head.weight", post + 1, 0, (int64_t)m->vocab, C);
#undef ADD
    *out = e;
    return k;
}

/* ---- config.json ------------------------------------------------------------ */

static const char *const ARCHS = "LlamaForCausalLM, Qwen2ForCausalLM, MistralForCausalLM";

static int read_json(const char *path, const char *what, size_t most, json_t **out)
{
    char *txt = NULL;
    size_t len = 0;
    *out = NULL;
    int rc = pt_read_regular(path, what, &txt, &len);
    if (rc) return rc;
    if (len > most) {
        free(txt);
        return pt_fail(PT_EFORMAT, "%s: %zu bytes, more than a %s has (at most %zu)", path, len, what, most);
    }
    json_error_t je;
    *out = json_loadb(txt, len, JSON_REJECT_DUPLICATES, &je);
    free(txt);
    if (!*out || !json_is_object(*out)) {
        json_decref(*out);
        *out = NULL;
        return pt_fail(PT_EFORMAT, "%s: not a JSON object (line %d: %s)", path, je.line, je.text);
    }
    return PT_OK;
}

/* the family a config.json names: 1 llama-family, 0 another (GPT-2, ...) */
static int config_is_llama(json_t *cfg)
{
    const char *mt = json_string_value(json_object_get(cfg, "model_type"));
    const char *ar = json_string_value(json_array_get(json_object_get(cfg, "architectures"), 0));
    if (ar) /* the architecture decides; model_type only without one */
        return !strcmp(ar, "LlamaForCausalLM") || !strcmp(ar, "Qwen2ForCausalLM") || !strcmp(ar, "MistralForCausalLM") ||
               (mt && (!strcmp(mt, "llama") || !strcmp(mt, "qwen2") || !strcmp(mt, "mistral")) &&
                strncmp(ar, "GPT2", 4));
    return mt && (!strcmp(mt, "llama") || !strcmp(mt, "qwen2") || !strcmp(mt, "mistral"));
}

static int cint(json_t *c, const char *path, const char *k, int dflt, int *out)
{
    json_t *v = json_object_get(c, k);
    if (!v && dflt > 0) return *out = dflt, PT_OK;
    if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > (1 << 30))
        return pt_fail(PT_EFORMAT, "%s: \"%s\" is %s (valid: an integer in [1, 2^30])", path, k,
                       v ? (json_is_integer(v) ? "out of range" : "not an integer") : "missing");
    *out = (int)json_integer_value(v);
    return PT_OK;
}

static int cnum(json_t *c, const char *path, const char *k, double dflt, double lo, double hi, double *out)
{
    json_t *v = json_object_get(c, k);
    if (!v || json_is_null(v)) return *out = dflt, PT_OK;
    if (!json_is_number(v) || !(json_number_value(v) > lo && json_number_value(v) <= hi))
        return pt_fail(PT_EFORMAT, "%s: \"%s\" %s%g is not valid (valid: a number in (%g, %g])", path, k,
                       json_is_number(v) ? "" : "(not a number) ", json_is_number(v) ? json_number_value(v) : 0.0, lo, hi);
    *out = json_number_value(v);
    return PT_OK;
}

/* a boolean field: 0/1, dflt when absent or null, -1 when not a boolean (failed) */
static int cbool(json_t *c, const char *path, const char *k, int dflt)
{
    json_t *v = json_object_get(c, k);
    if (!v || json_is_null(v)) return dflt;
    if (!json_is_boolean(v)) return pt_fail(PT_EFORMAT, "%s: \"%s\" is not true or false", path, k), -1;
    return json_is_true(v);
}

int ckpt_llama_config(json_t *c, const char *path, pt_model_shape *m)
{
    memset(m, 0, sizeof *m);
    m->family = PT_FAMILY_LLAMA;
    const char *mt = json_string_value(json_object_get(c, "model_type"));
    const char *ar = json_string_value(json_array_get(json_object_get(c, "architectures"), 0));
    const int qwen = (mt && !strcmp(mt, "qwen2")) || (ar && !strcmp(ar, "Qwen2ForCausalLM"));
    const int mistral = (mt && !strcmp(mt, "mistral")) || (ar && !strcmp(ar, "MistralForCausalLM"));
    if (!config_is_llama(c))
        return pt_fail(PT_EFORMAT, "%s: architecture %s / model_type %s is not a Llama-family model (valid: %s)", path,
                       ar ? ar : "(none)", mt ? mt : "(none)", ARCHS);
    if (ar && strcmp(ar, "LlamaForCausalLM") && strcmp(ar, "Qwen2ForCausalLM") && strcmp(ar, "MistralForCausalLM"))
        return pt_fail(PT_EFORMAT, "%s: \"architectures\" [\"%.60s\"] is not a causal LM ptrain builds (valid: %s)", path,
                       ar, ARCHS);
    int rc;
    if ((rc = cint(c, path, "num_hidden_layers", 0, &m->n_layer)) || (rc = cint(c, path, "num_attention_heads", 0, &m->n_head)) ||
        (rc = cint(c, path, "hidden_size", 0, &m->n_embd)) || (rc = cint(c, path, "intermediate_size", 0, &m->ffn)) ||
        (rc = cint(c, path, "vocab_size", 0, &m->vocab)) ||
        (rc = cint(c, path, "max_position_embeddings", 0, &m->seq_len)) ||
        (rc = cint(c, path, "num_key_value_heads", m->n_head, &m->n_kv_head)))
        return rc;
    if (m->n_embd % m->n_head || m->n_head % m->n_kv_head || (m->n_embd / m->n_head) % 2)
        return pt_fail(PT_EFORMAT, "%s: hidden_size %d, num_attention_heads %d, num_key_value_heads %d are not a shape "
                                   "ptrain builds (valid: heads dividing hidden_size with an even head size, key-value "
                                   "heads dividing heads)", path, m->n_embd, m->n_head, m->n_kv_head);
    json_t *hd = json_object_get(c, "head_dim");
    if (hd && !json_is_null(hd) && (!json_is_integer(hd) || json_integer_value(hd) != m->n_embd / m->n_head))
        return pt_fail(PT_EFORMAT, "%s: \"head_dim\" %lld is not hidden_size / num_attention_heads = %d (valid: that, "
                                   "or absent)", path, (long long)json_integer_value(hd), m->n_embd / m->n_head);
    const char *act = json_string_value(json_object_get(c, "hidden_act"));
    if (json_object_get(c, "hidden_act") && (!act || strcmp(act, "silu")))
        return pt_fail(PT_EFORMAT, "%s: \"hidden_act\" %.40s is not silu, the activation of ptrain's SwiGLU (valid: "
                                   "\"silu\")", path, act ? act : "(not a string)");
    const int tie = cbool(c, path, "tie_word_embeddings", 0); /* transformers' Llama/Qwen2/Mistral default: untied */
    const int ab = cbool(c, path, "attention_bias", 0), mb = cbool(c, path, "mlp_bias", 0);
    if (tie < 0 || ab < 0 || mb < 0) return PT_EFORMAT;
    if (ab && !qwen)
        return pt_fail(PT_EFORMAT, "%s: \"attention_bias\" true puts a bias on o_proj too, which ptrain's Llama has not "
                                   "(valid: false; q/k/v biases alone are Qwen2ForCausalLM's)", path);
    if (mb) return pt_fail(PT_EFORMAT, "%s: \"mlp_bias\" true: ptrain's SwiGLU has no biases (valid: false)", path);
    m->untied = !tie;
    m->qkv_bias = qwen;
    json_t *sw = json_object_get(c, "sliding_window");
    const int usw = cbool(c, path, "use_sliding_window", 0);
    if (usw < 0) return PT_EFORMAT;
    if ((mistral && sw && !json_is_null(sw)) || usw)
        return pt_fail(PT_EFORMAT, "%s: a sliding window (\"%s\" %s): ptrain's attention is full causal (valid: "
                                   "\"sliding_window\": null, \"use_sliding_window\": false)", path,
                       usw ? "use_sliding_window" : "sliding_window", usw ? "true" : "set");
    double eps, theta;
    if ((rc = cnum(c, path, "rms_norm_eps", 1e-6, 0, 1, &eps)) || (rc = cnum(c, path, "rope_theta", 10000, 0, 1e12, &theta)))
        return rc;
    m->norm_eps = (float)eps;
    m->rope_theta = (float)theta;
    json_t *rs = json_object_get(c, "rope_scaling");
    if (rs && !json_is_null(rs)) {
        const char *ty = json_string_value(json_object_get(rs, "rope_type"));
        if (!ty) ty = json_string_value(json_object_get(rs, "type"));
        if (!json_is_object(rs) || !ty || strcmp(ty, "llama3"))
            return pt_fail(PT_EFORMAT, "%s: \"rope_scaling\" of type %.40s is not one ptrain computes (valid: null, or "
                                       "rope_type \"llama3\")", path, ty ? ty : "(none)");
        double f, lo, hi;
        int oc;
        if ((rc = cnum(rs, path, "factor", -1, 0, 1e6, &f)) || (rc = cnum(rs, path, "low_freq_factor", -1, 0, 1e6, &lo)) ||
            (rc = cnum(rs, path, "high_freq_factor", -1, 0, 1e6, &hi)) ||
            (rc = cint(rs, path, "original_max_position_embeddings", 0, &oc)))
            return rc;
        if (f <= 0 || lo <= 0 || hi <= lo)
            return pt_fail(PT_EFORMAT, "%s: \"rope_scaling\" needs factor, low_freq_factor < high_freq_factor, all > 0 "
                                       "(has %g, %g, %g)", path, f, lo, hi);
        m->rope_factor = (float)f, m->rope_low_freq = (float)lo, m->rope_high_freq = (float)hi, m->rope_orig_ctx = oc;
    }
    return PT_OK;
}

/* ---- the source: config.json and its safetensors ----------------------------- */

typedef struct hf_src {
    char dir[4200];
    json_t *config, *index;
    int nf;
    pt_safetensors st[64];
    char fname[64][256];
} hf_src;

static void src_close(hf_src *s)
{
    for (int i = 0; i < s->nf; i++) pt_st_close(&s->st[i]);
    json_decref(s->config);
    json_decref(s->index);
    s->nf = 0;
    s->config = s->index = NULL;
}

static int ends_with(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

/* dir of src (a directory, or a file in it) into s->dir; the file named
 * (or NULL for a directory) into *file */
static void src_dir(const char *src, hf_src *s, const char **file)
{
    struct stat sb;
    if (!stat(src, &sb) && S_ISDIR(sb.st_mode)) {
        snprintf(s->dir, sizeof s->dir, "%s", src);
        *file = NULL;
        return;
    }
    const char *sl = strrchr(src, '/');
    if (sl) snprintf(s->dir, sizeof s->dir, "%.*s", (int)(sl - src), src);
    else snprintf(s->dir, sizeof s->dir, ".");
    *file = sl ? sl + 1 : src;
}

int ckpt_hf_is_llama(const char *src, const char *model)
{
    if (model) {
        pt_model_shape m;
        pt_errsave es;
        pt_error_save(&es);
        const int ok = !pt_model_shape_parse("--model", model, &m) && m.family == PT_FAMILY_LLAMA;
        pt_error_restore(&es);
        if (ok) return 1;
    }
    hf_src s;
    const char *file;
    memset(&s, 0, sizeof s);
    src_dir(src, &s, &file);
    char p[4400];
    struct stat sb;
    if (!file) { /* a checkpoint or save directory is not a Hugging Face one */
        snprintf(p, sizeof p, "%s/manifest.json", s.dir);
        if (!stat(p, &sb)) return 0;
        snprintf(p, sizeof p, "%s/latest", s.dir);
        if (!stat(p, &sb)) return 0;
    } else if (ends_with(file, ".index.json"))
        return 1;
    snprintf(p, sizeof p, "%s/config.json", s.dir);
    if (stat(p, &sb)) return !file && (snprintf(p, sizeof p, "%s/model.safetensors.index.json", s.dir), !stat(p, &sb));
    pt_errsave es;
    pt_error_save(&es);
    json_t *c = NULL;
    const int is = !read_json(p, "model config", 1 << 20, &c) && config_is_llama(c);
    json_decref(c);
    pt_error_restore(&es);
    return is;
}

static int open_file(hf_src *s, const char *name)
{
    for (int i = 0; i < s->nf; i++)
        if (!strcmp(s->fname[i], name)) return i;
    if (s->nf == 64) return pt_fail(PT_EFORMAT, "%s: more than 64 safetensors files", s->dir);
    if (strchr(name, '/') || name[0] == '.' || strlen(name) >= sizeof s->fname[0])
        return pt_fail(PT_EFORMAT, "%s/model.safetensors.index.json: file name '%.80s' is not a file of this directory "
                                   "(valid: a name without '/' not starting with '.')", s->dir, name);
    char p[4600];
    snprintf(p, sizeof p, "%s/%s", s->dir, name);
    int rc = pt_st_open(&s->st[s->nf], p);
    if (rc) return rc;
    snprintf(s->fname[s->nf], sizeof s->fname[0], "%s", name);
    return s->nf++;
}

/* config.json (or --model) and every safetensors file of src */
static int src_open(const char *src, const char *model, hf_src *s, pt_model_shape *m, char *from, size_t fn)
{
    const char *file;
    memset(s, 0, sizeof *s);
    src_dir(src, s, &file);
    char p[4400];
    struct stat sb;
    snprintf(p, sizeof p, "%s/config.json", s->dir);
    int rc;
    if (!stat(p, &sb)) {
        if ((rc = read_json(p, "model config", 1 << 20, &s->config))) return rc;
        if ((rc = ckpt_llama_config(s->config, p, m))) return rc;
        snprintf(from, fn, "%s", p);
    }
    if (model) {
        pt_model_shape g;
        if (pt_model_shape_parse("--model", model, &g) < 0) return PT_EINVAL;
        if (g.family != PT_FAMILY_LLAMA)
            return pt_fail(PT_EINVAL, "--model %s is a GPT-2 shape; this is a Llama-family model (valid: a llama preset "
                                      "or llama:L,H,KV,C,I,T,V[,untied][,qkv-bias][,theta=X])", model);
        if (s->config) { /* --model keeps its T; the rest must be config.json's */
            pt_model_shape a = *m, b = g;
            a.seq_len = b.seq_len = 0;
            a.norm_eps = b.norm_eps = 0;
            a.rope_factor = b.rope_factor = a.rope_low_freq = b.rope_low_freq = a.rope_high_freq = b.rope_high_freq = 0;
            a.rope_orig_ctx = b.rope_orig_ctx = 0;
            pt_model_shape_normalise(&a);
            pt_model_shape_normalise(&b);
            char fa[160];
            pt_model_shape_format(m, fa, sizeof fa);
            if (memcmp(&a, &b, sizeof a))
                return pt_fail(PT_EINVAL, "--model %s is not the model of %s (%s; valid: that shape, any T)", model, p, fa);
            m->seq_len = g.seq_len;
            snprintf(from, fn, "%s, T from --model", p);
        } else {
            *m = g;
            snprintf(from, fn, "--model %s", model);
        }
    } else if (!s->config)
        return pt_fail(PT_EINVAL, "%s: no config.json to give the model's shape: give --model NAME or "
                                  "llama:L,H,KV,C,I,T,V[,untied][,qkv-bias]", s->dir);
    /* the files: the index's, or the one named, or model.safetensors */
    snprintf(p, sizeof p, "%s/model.safetensors.index.json", s->dir);
    if ((file && ends_with(file, ".index.json")) || (!file && stat(p, &sb) == 0)) {
        if (file) snprintf(p, sizeof p, "%s/%s", s->dir, file);
        if ((rc = read_json(p, "safetensors index", 64 << 20, &s->index))) return rc;
        json_t *wm = json_object_get(s->index, "weight_map");
        if (!json_is_object(wm) || !json_object_size(wm))
            return pt_fail(PT_EFORMAT, "%s: no \"weight_map\" object of tensor names to file names", p);
        const char *k;
        json_t *v;
        json_object_foreach(wm, k, v) {
            if (!json_is_string(v)) return pt_fail(PT_EFORMAT, "%s: weight_map[\"%.80s\"] is not a file name", p, k);
            if ((rc = open_file(s, json_string_value(v))) < 0) return rc;
            if (!pt_st_find(&s->st[rc], k))
                return pt_fail(PT_EFORMAT, "%s: weight_map names %.80s for '%.80s', which has no such tensor", p,
                               json_string_value(v), k);
        }
        for (int f = 0; f < s->nf; f++) /* and every tensor of the files is in the map, in its file */
            for (int i = 0; i < s->st[f].n; i++) {
                const char *w = json_string_value(json_object_get(wm, s->st[f].t[i].name));
                if (!w || strcmp(w, s->fname[f]))
                    return pt_fail(PT_EFORMAT, "%s: tensor '%.80s' of %s is %s (valid: each tensor in exactly the "
                                               "file weight_map names)", p, s->st[f].t[i].name, s->fname[f],
                                   w ? "mapped to another file" : "not in weight_map");
            }
        return PT_OK;
    }
    rc = open_file(s, file ? file : "model.safetensors");
    return rc < 0 ? rc : PT_OK;
}

static const pt_st_tensor *src_find(hf_src *s, const char *name, int *file)
{
    for (int f = 0; f < s->nf; f++) {
        const pt_st_tensor *t = pt_st_find(&s->st[f], name);
        if (t) return *file = f, t;
    }
    return NULL;
}

static void shape_text(char *b, size_t n, const int64_t *shape, int nd)
{
    size_t o = (size_t)snprintf(b, n, "[");
    for (int k = 0; k < nd && o < n; k++) o += (size_t)snprintf(b + o, n - o, "%s%lld", k ? ", " : "", (long long)shape[k]);
    if (o < n) snprintf(b + o, n - o, "]");
}

typedef struct in_ctx {
    hf_src *s;
    hf_t *e;
    int n;
} in_ctx;

/* pt_ckpt_fill_fn: parameter idx's elements [first, first + n) from its HF tensors */
static int fill_in(void *arg, int idx, int64_t first, int64_t n, float *dst)
{
    in_ctx *c = arg;
    for (int k = 0; k < c->n; k++) {
        hf_t *x = &c->e[k];
        if (x->idx != idx) continue;
        const int64_t a = first > x->first ? first : x->first, b = first + n < x->first + x->n ? first + n : x->first + x->n;
        if (a >= b) continue;
        int rc = pt_st_read_f32_at(&c->s->st[x->file], x->src, (uint64_t)(a - x->first), (uint64_t)(b - a), dst + (a - first));
        if (rc) return rc;
        const long long bad = ckpt_first_nonfinite(dst + (a - first), (size_t)(b - a));
        if (bad >= 0)
            return pt_fail(PT_EFORMAT, "%s: tensor '%s' element %lld is %g (valid: a finite number): its weights cannot "
                                       "be trained or sampled from", c->s->st[x->file].path, x->name,
                           (long long)(a - x->first) + bad, (double)dst[a - first + bad]);
    }
    return PT_OK;
}

/* the manifest's record of the source layout */
static json_t *hf_record(hf_src *s)
{
    json_t *files = json_array();
    for (int f = 0; f < s->nf; f++) {
        const pt_safetensors *st = &s->st[f];
        int *ord = malloc(sizeof *ord * (size_t)(st->n ? st->n : 1));
        if (!ord) break;
        for (int i = 0; i < st->n; i++) ord[i] = i;
        for (int i = 1; i < st->n; i++) /* data order: insertion sort by begin */
            for (int j = i; j > 0 && st->t[ord[j]].begin < st->t[ord[j - 1]].begin; j--) {
                int t = ord[j];
                ord[j] = ord[j - 1], ord[j - 1] = t;
            }
        json_t *tl = json_array();
        for (int i = 0; i < st->n; i++)
            json_array_append_new(tl, json_pack("[s, s]", st->t[ord[i]].name, pt_st_dtype_name(st->t[ord[i]].dtype)));
        free(ord);
        /* the metadata as the file has it: read back from its header */
        json_t *meta = json_null();
        unsigned char h8[8];
        int fd = open(st->path, O_RDONLY | O_CLOEXEC);
        if (fd >= 0 && pread(fd, h8, 8, 0) == 8) {
            uint64_t hn = 0;
            for (int b = 0; b < 8; b++) hn |= (uint64_t)h8[b] << (8 * b);
            char *hb = hn <= PT_ST_MAX_HEADER ? malloc((size_t)hn) : NULL;
            if (hb && pread(fd, hb, (size_t)hn, 8) == (ssize_t)hn) {
                json_t *root = json_loadb(hb, (size_t)hn, 0, NULL);
                json_t *md = json_object_get(root, "__metadata__");
                if (md) {
                    json_decref(meta);
                    meta = json_incref(md);
                }
                json_decref(root);
            }
            free(hb);
        }
        if (fd >= 0) close(fd);
        json_array_append_new(files, json_pack("{s:s, s:o, s:o}", "name", s->fname[f], "metadata", meta, "tensors", tl));
    }
    json_t *r = json_pack("{s:O?, s:o}", "config", s->config, "files", files);
    if (r && s->index) json_object_set(r, "index_metadata", json_object_get(s->index, "metadata"));
    if (r && s->index) json_object_set_new(r, "sharded", json_true());
    return json_pack("{s:o}", "hf", r);
}

int ckpt_llama_in(const char *src, const char *model, const char *dst)
{
    hf_src s;
    pt_model_shape m;
    char from[4500] = "";
    hf_t *e = NULL;
    json_t *extra = NULL;
    int rc = src_open(src, model, &s, &m, from, sizeof from), n = 0;
    if (rc) goto out;
    if ((n = hf_list(&m, &e)) < 0) {
        rc = n;
        goto out;
    }
    char spec[160];
    pt_model_shape_format(&m, spec, sizeof spec);
    /* every tensor named, shaped and typed as the model's, and every file tensor one of them */
    for (int k = 0; k < n; k++) {
        const pt_st_tensor *t = src_find(&s, e[k].name, &e[k].file);
        char a[64], b[64];
        if (!t) {
            rc = pt_fail(PT_EFORMAT, "%s: no tensor '%s': not the model %s of %s", s.dir, e[k].name, spec, from);
            goto out;
        }
        if (t->ndim != e[k].ndim || t->shape[0] != e[k].shape[0] || (e[k].ndim == 2 && t->shape[1] != e[k].shape[1])) {
            shape_text(a, sizeof a, t->shape, t->ndim);
            shape_text(b, sizeof b, e[k].shape, e[k].ndim);
            rc = pt_fail(PT_EFORMAT, "%s: tensor '%s' has shape %s; the model %s of %s needs %s", s.st[e[k].file].path,
                         e[k].name, a, spec, from, b);
            goto out;
        }
        if (t->dtype != PT_ST_F32 && t->dtype != PT_ST_F16 && t->dtype != PT_ST_BF16) {
            rc = pt_fail(PT_EFORMAT, "%s: tensor '%s' is %s (valid: F32, F16 or BF16)", s.st[e[k].file].path, e[k].name,
                         pt_st_dtype_name(t->dtype));
            goto out;
        }
        e[k].src = t;
    }
    const pt_st_tensor *lmt = NULL;
    int lmf = -1;
    for (int f = 0; f < s.nf; f++)
        for (int i = 0; i < s.st[f].n; i++) {
            const char *nm = s.st[f].t[i].name;
            int known = 0;
            for (int k = 0; k < n && !known; k++) known = !strcmp(nm, e[k].name);
            if (!known && !pt_model_untied(&m) && !strcmp(nm, "lm_head.weight")) known = 1, lmt = &s.st[f].t[i], lmf = f;
            if (!known) {
                rc = pt_fail(PT_EFORMAT, "%s: tensor '%.200s' is not a weight of the model %s of %s (valid: "
                                         "model.embed_tokens, model.layers.0 .. %d, model.norm, lm_head%s)",
                             s.st[f].path, nm, spec, from, m.n_layer - 1, pt_model_untied(&m) ? "" : " equal to embed_tokens");
                goto out;
            }
        }
    if (lmt) { /* a tied head saved anyway: it must be embed_tokens, element for element */
        const pt_st_tensor *w = e[0].src;
        if (lmt->ndim != 2 || lmt->shape[0] != w->shape[0] || lmt->shape[1] != w->shape[1]) {
            rc = pt_fail(PT_EFORMAT, "%s: lm_head.weight is not shaped as embed_tokens: an untied head, but config.json "
                                     "says tie_word_embeddings true (valid: tie_word_embeddings false)", s.st[lmf].path);
            goto out;
        }
        float *a = malloc(sizeof(float) * BLOCK), *b = malloc(sizeof(float) * BLOCK);
        for (uint64_t at = 0; a && b && at < w->numel && !rc; at += BLOCK) {
            const uint64_t k = w->numel - at < BLOCK ? w->numel - at : BLOCK;
            if ((rc = pt_st_read_f32_at(&s.st[e[0].file], w, at, k, a)) || (rc = pt_st_read_f32_at(&s.st[lmf], lmt, at, k, b)))
                break;
            if (memcmp(a, b, sizeof(float) * k))
                rc = pt_fail(PT_EFORMAT, "%s: lm_head.weight differs from model.embed_tokens.weight, but config.json says "
                                         "tie_word_embeddings true (valid: false, an untied head)", s.st[lmf].path);
        }
        if (!a || !b) rc = pt_fail(PT_ENOMEM, "out of memory");
        free(a);
        free(b);
        if (rc) goto out;
    }
    extra = hf_record(&s);
    pt_ckpt_meta meta = {.step = 0};
    if (pt_model_preset(spec, NULL) == 0 && strlen(spec) < sizeof meta.model) memcpy(meta.model, spec, strlen(spec) + 1);
    else snprintf(meta.model, sizeof meta.model, "custom");
    snprintf(meta.data, sizeof meta.data, "hf:%.240s", src);
    char saved[4200] = "";
    int lockfd = -1;
    if (!rc) rc = ckpt_dst_open(dst, &lockfd);
    in_ctx ic = {&s, e, n};
    if (!rc) rc = pt_ckpt_write_model(dst, &m, &meta, extra, fill_in, &ic, saved, sizeof saved);
    if (lockfd >= 0) close(lockfd);
    if (!rc)
        printf("convert: %s (%s, %d file%s, shape from %s) -> %s (checkpoint %s, step 0, fresh AdamW state, model %s)\n",
               src, spec, s.nf, s.nf == 1 ? "" : "s", from, dst, saved, meta.model);
out:
    json_decref(extra);
    free(e);
    src_close(&s);
    return rc;
}

/* ---- out ---------------------------------------------------------------------- */

static uint16_t f32_to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)(x >> 16 | 0x40); /* NaN stays NaN */
    x += 0x7fffu + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}

static uint16_t f32_to_f16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    const uint32_t sign = (x >> 16) & 0x8000u;
    x &= 0x7fffffffu;
    if (x > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);
    if (x >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* rounds to infinity */
    if (x < 0x38800000u) {                                    /* subnormal or zero: x * 2^24 rounded */
        if (x < 0x33000000u) return (uint16_t)sign;
        const uint32_t e = x >> 23, man = (x & 0x7fffffu) | 0x800000u, shift = 126 - e; /* 14 .. 24 */
        uint32_t r = man >> shift;
        const uint32_t rem = man & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (r & 1))) r++;
        return (uint16_t)(sign | r);
    }
    uint32_t r = ((x - 0x38000000u) >> 13);
    const uint32_t rem = x & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (r & 1))) r++;
    return (uint16_t)(sign | r);
}

static int dtype_bytes(int dt) { return dt == PT_ST_F32 ? 4 : 2; }

typedef int (*get_fn)(void *arg, int idx, int64_t first, int64_t n, float *dst);

/* one output file: header then the data of tensors [lo, hi) of e (in that order) */
static int write_st(const char *path, hf_t *e, int lo, int hi, json_t *metadata, get_fn get, void *arg, int64_t *bytes)
{
    json_t *hdr = json_object();
    if (metadata && !json_is_null(metadata)) json_object_set(hdr, "__metadata__", metadata);
    int64_t off = 0;
    for (int i = lo; i < hi; i++) {
        const int64_t nb = e[i].n * dtype_bytes(e[i].dtype);
        json_t *shape = e[i].ndim == 2 ? json_pack("[I, I]", (json_int_t)e[i].shape[0], (json_int_t)e[i].shape[1])
                                       : json_pack("[I]", (json_int_t)e[i].shape[0]);
        json_object_set_new(hdr, e[i].name, json_pack("{s:s, s:o, s:[I, I]}", "dtype", pt_st_dtype_name(e[i].dtype),
                                                      "shape", shape, "data_offsets", (json_int_t)off, (json_int_t)(off + nb)));
        off += nb;
    }
    char *js = json_dumps(hdr, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(hdr);
    if (!js) return pt_fail(PT_ENOMEM, "out of memory for a safetensors header");
    const size_t jl = strlen(js), padded = (jl + 7) / 8 * 8;
    unsigned char h8[8];
    for (int b = 0; b < 8; b++) h8[b] = (unsigned char)((uint64_t)padded >> (8 * b) & 0xff);
    pt_atomic_file f;
    int rc = pt_atomic_open(&f, path);
    if (rc) {
        free(js);
        return rc;
    }
    int bad = pt_write_all(f.fd, h8, 8) || pt_write_all(f.fd, js, jl) || pt_write_all(f.fd, "        ", padded - jl);
    free(js);
    float *buf = malloc(sizeof(float) * BLOCK);
    uint16_t *half = malloc(sizeof(uint16_t) * BLOCK);
    if (!buf || !half) rc = pt_fail(PT_ENOMEM, "out of memory");
    for (int i = lo; i < hi && !rc && !bad; i++)
        for (int64_t a = 0; a < e[i].n && !rc && !bad; a += BLOCK) {
            const int64_t k = e[i].n - a < BLOCK ? e[i].n - a : BLOCK;
            if ((rc = get(arg, e[i].idx, e[i].first + a, k, buf))) break;
            const long long nf = ckpt_first_nonfinite(buf, (size_t)k);
            if (nf >= 0) {
                rc = pt_fail(PT_EFORMAT, "tensor '%s' element %lld is %g: not written (valid: finite weights)", e[i].name,
                             (long long)a + nf, (double)buf[nf]);
                break;
            }
            if (e[i].dtype == PT_ST_F32) {
                bad = pt_write_all(f.fd, buf, sizeof(float) * (size_t)k);
                continue;
            }
            for (int64_t j = 0; j < k; j++) {
                half[j] = e[i].dtype == PT_ST_BF16 ? f32_to_bf16(buf[j]) : f32_to_f16(buf[j]);
                if (e[i].dtype == PT_ST_F16 && (half[j] & 0x7c00u) == 0x7c00u) {
                    rc = pt_fail(PT_EINVAL, "tensor '%s' element %lld is %g, beyond F16's range (valid: --dtype fp32 "
                                            "or bf16)", e[i].name, (long long)(a + j), (double)buf[j]);
                    break;
                }
            }
            if (!rc) bad = pt_write_all(f.fd, half, sizeof(uint16_t) * (size_t)k);
        }
    free(buf);
    free(half);
    if (bad && !rc) rc = pt_fail(PT_EIO, "%s: write failed: %s", path, strerror(errno));
    if (rc) {
        pt_atomic_abort(&f);
        return rc;
    }
    *bytes += (int64_t)(8 + padded) + off;
    return pt_atomic_commit(&f, 1);
}

/* a checkpoint's tensors: straight from the rank file holding each whole, or a holder */
typedef struct out_src {
    int fd[64];
    int64_t off[4096 * 12 + 8]; /* per parameter: byte offset of its weights in file fdi */
    int fdi[4096 * 12 + 8];
    holder *h;
} out_src;

static int get_out(void *arg, int idx, int64_t first, int64_t n, float *dst)
{
    out_src *o = arg;
    if (o->h) {
        o->h->model.ops->copy(dst, param_at(o->h, idx)->data + first, (size_t)n, PT_F32);
        return PT_OK;
    }
    size_t want = sizeof(float) * (size_t)n, got = 0;
    while (got < want) {
        ssize_t r = pread(o->fd[o->fdi[idx]], (char *)dst + got, want - got, (off_t)(o->off[idx] + 4 * first) + (off_t)got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return pt_fail(PT_EIO, "checkpoint rank file: short read: %s", r < 0 ? strerror(errno) : "it shrank");
        got += (size_t)r;
    }
    return PT_OK;
}

/* open the rank files holding every tensor whole, their size and FNV-1a 64 checked: 1, else 0 (use a holder) */
static int stream_files(const char *path, json_t *man, int np, out_src *o)
{
    json_t *files = json_object_get(man, "files"), *f;
    size_t k;
    for (int i = 0; i < np; i++) o->fdi[i] = -1;
    int used[64] = {0};
    json_array_foreach(files, k, f) {
        if (k >= 64) break;
        size_t j;
        json_t *x;
        json_array_foreach(json_object_get(f, "tensors"), j, x) {
            const long long i = jint(x, "index"), full = jint(x, "rows") * jint(x, "cols");
            if (i >= 0 && i < np && o->fdi[i] < 0 && jint(x, "lo") == 0 && jint(x, "hi") == full &&
                jint(x, "local_numel") == full) {
                o->fdi[i] = (int)k, o->off[i] = jint(x, "offset");
                used[k] = 1;
            }
        }
    }
    for (int i = 0; i < np; i++)
        if (o->fdi[i] < 0) return 0;
    json_array_foreach(files, k, f) {
        o->fd[k] = -1;
        if (k >= 64 || !used[k]) continue;
        char p[4600];
        snprintf(p, sizeof p, "%s/%s", path, jstr(f, "name"));
        if ((o->fd[k] = pt_open_regular(p, "checkpoint rank file")) < 0) return o->fd[k];
        struct stat sb;
        if (fstat(o->fd[k], &sb) || (long long)sb.st_size != jint(f, "bytes"))
            return pt_fail(PT_EFORMAT, "checkpoint %s: %s has %lld bytes, the manifest says %lld (truncated or replaced)",
                           path, jstr(f, "name"), (long long)sb.st_size, jint(f, "bytes"));
        uint64_t h = 0xcbf29ce484222325ULL;
        unsigned char *b = malloc(1 << 20);
        if (!b) return pt_fail(PT_ENOMEM, "out of memory");
        ssize_t r;
        off_t at = 0;
        while ((r = pread(o->fd[k], b, 1 << 20, at)) > 0) {
            for (ssize_t q = 0; q < r; q++) h = (h ^ b[q]) * 0x100000001b3ULL;
            at += r;
        }
        free(b);
        char sum[20];
        snprintf(sum, sizeof sum, "%016" PRIx64, h);
        if (strcmp(sum, jstr(f, "fnv1a64")))
            return pt_fail(PT_EFORMAT, "checkpoint %s: %s has checksum %s, the manifest says %s (corrupted)", path,
                           jstr(f, "name"), sum, jstr(f, "fnv1a64"));
    }
    return 1;
}

static int dtype_of(const char *s)
{
    return !strcmp(s, "F32") ? PT_ST_F32 : !strcmp(s, "F16") ? PT_ST_F16 : !strcmp(s, "BF16") ? PT_ST_BF16 : -1;
}

static int cmp_canon(const void *a, const void *b)
{
    const hf_t *x = a, *y = b;
    if (x->file != y->file) return x->file - y->file;
    if (x->dtype != y->dtype) return y->dtype - x->dtype; /* safetensors: dtype descending, then name */
    return strcmp(x->name, y->name);
}

/* config.json for shape m (no record) */
static json_t *make_config(const pt_model_shape *m, int dtype)
{
    const int qwen = m->qkv_bias;
    json_t *c = json_pack("{s:[s], s:b, s:f, s:s, s:i, s:f, s:i, s:i, s:s, s:i, s:i, s:i, s:f, s:f, s:b, s:s, s:b, s:i, s:i}",
                          "architectures", qwen ? "Qwen2ForCausalLM" : "LlamaForCausalLM", "attention_bias", 0,
                          "attention_dropout", 0.0, "hidden_act", "silu", "hidden_size", m->n_embd, "initializer_range",
                          0.02, "intermediate_size", pt_model_ffn(m), "max_position_embeddings", m->seq_len,
                          "model_type", qwen ? "qwen2" : "llama", "num_attention_heads", m->n_head,
                          "num_hidden_layers", m->n_layer, "num_key_value_heads", pt_model_kv_heads(m), "rms_norm_eps",
                          pt_model_norm_eps(m), "rope_theta", pt_model_rope_theta(m), "tie_word_embeddings",
                          !pt_model_untied(m), "torch_dtype",
                          dtype == PT_ST_BF16 ? "bfloat16" : dtype == PT_ST_F16 ? "float16" : "float32", "use_cache", 1,
                          "vocab_size", m->vocab, "head_dim", m->n_embd / m->n_head);
    if (!c) return NULL;
    if (m->rope_factor > 0)
        json_object_set_new(c, "rope_scaling", json_pack("{s:f, s:f, s:f, s:i, s:s}", "factor", (double)m->rope_factor,
                                                         "low_freq_factor", (double)m->rope_low_freq, "high_freq_factor",
                                                         (double)m->rope_high_freq, "original_max_position_embeddings",
                                                         m->rope_orig_ctx, "rope_type", "llama3"));
    else json_object_set_new(c, "rope_scaling", json_null());
    if (!qwen) json_object_set_new(c, "mlp_bias", json_false());
    return c;
}

static int write_text(const char *path, const char *txt)
{
    pt_atomic_file f;
    int rc = pt_atomic_open(&f, path);
    if (rc) return rc;
    if (pt_write_all(f.fd, txt, strlen(txt))) {
        int er = errno;
        pt_atomic_abort(&f);
        return pt_fail(PT_EIO, "%s: write failed: %s", path, strerror(er));
    }
    return pt_atomic_commit(&f, 1);
}

/* a growing text buffer */
typedef struct tbuf {
    char *s;
    size_t n, cap;
    int oom;
} tbuf;

static void put(tbuf *b, const char *s, size_t n)
{
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t c = (b->n + n + 1) * 2;
        char *t = realloc(b->s, c);
        if (!t) {
            b->oom = 1;
            return;
        }
        b->s = t, b->cap = c;
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = 0;
}
static void puts_(tbuf *b, const char *s) { put(b, s, strlen(s)); }

/* Python's repr of a float: the shortest digits that read back, fixed
 * notation for exponents in [-4, 16) (with ".0" when whole), else d.ddde-XX */
static void py_float(tbuf *b, double x)
{
    char e[40], out[64];
    int p = 1;
    for (; p < 17; p++) {
        snprintf(e, sizeof e, "%.*e", p - 1, x);
        if (strtod(e, NULL) == x) break;
    }
    snprintf(e, sizeof e, "%.*e", p - 1, x);
    const int neg = e[0] == '-';
    char dig[24];
    int nd = 0;
    const char *c = e + neg;
    for (; *c && *c != 'e'; c++)
        if (*c >= '0' && *c <= '9') dig[nd++] = *c;
    dig[nd] = 0;
    const int ex = atoi(c + 1);
    while (nd > 1 && dig[nd - 1] == '0') dig[--nd] = 0;
    size_t o = 0;
    if (neg) out[o++] = '-';
    if (ex >= -4 && ex < 16) {
        if (ex < 0) {
            o += (size_t)snprintf(out + o, sizeof out - o, "0.");
            for (int i = 0; i < -ex - 1; i++) out[o++] = '0';
            o += (size_t)snprintf(out + o, sizeof out - o, "%s", dig);
        } else {
            for (int i = 0; i <= ex; i++) out[o++] = i < nd ? dig[i] : '0';
            out[o++] = '.';
            if (nd > ex + 1) o += (size_t)snprintf(out + o, sizeof out - o, "%s", dig + ex + 1);
            else out[o++] = '0';
        }
        out[o] = 0;
    } else {
        out[o++] = dig[0];
        if (nd > 1) o += (size_t)snprintf(out + o, sizeof out - o, ".%s", dig + 1);
        snprintf(out + o, sizeof out - o, "e%c%02d", ex < 0 ? '-' : '+', ex < 0 ? -ex : ex);
    }
    puts_(b, out);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* json.dumps(x, indent=2, sort_keys=True)'s text of x at depth d */
static void py_json(tbuf *b, json_t *x, int d)
{
    char ind[2 * 64 + 2];
    if (json_is_object(x) || json_is_array(x)) {
        const size_t n = json_is_object(x) ? json_object_size(x) : json_array_size(x);
        const int obj = json_is_object(x);
        if (!n) {
            puts_(b, obj ? "{}" : "[]");
            return;
        }
        const char **keys = NULL;
        if (obj) {
            keys = malloc(sizeof *keys * n);
            if (!keys) {
                b->oom = 1;
                return;
            }
            size_t i = 0;
            const char *k;
            json_t *v;
            json_object_foreach(x, k, v) keys[i++] = k;
            qsort(keys, n, sizeof *keys, cmp_str);
        }
        const int di = d + 1 < 64 ? d + 1 : 64;
        memset(ind, ' ', (size_t)(2 * di));
        ind[2 * di] = 0;
        puts_(b, obj ? "{\n" : "[\n");
        for (size_t i = 0; i < n; i++) {
            puts_(b, ind);
            if (obj) {
                json_t *ks = json_string(keys[i]);
                char *t = ks ? json_dumps(ks, JSON_ENCODE_ANY | JSON_ENSURE_ASCII) : NULL;
                json_decref(ks);
                if (!t) b->oom = 1;
                else puts_(b, t), puts_(b, ": ");
                free(t);
            }
            py_json(b, obj ? json_object_get(x, keys[i]) : json_array_get(x, i), d + 1);
            puts_(b, i + 1 < n ? ",\n" : "\n");
        }
        free(keys);
        memset(ind, ' ', (size_t)(2 * (di - 1)));
        ind[2 * (di - 1)] = 0;
        puts_(b, ind);
        puts_(b, obj ? "}" : "]");
    } else if (json_is_real(x))
        py_float(b, json_real_value(x));
    else {
        char *t = json_dumps(x, JSON_ENCODE_ANY | JSON_ENSURE_ASCII);
        if (!t) b->oom = 1;
        else puts_(b, t);
        free(t);
    }
}

/* transformers' json.dumps(x, indent=2, sort_keys=True) + "\n" */
static int write_json_py(const char *path, json_t *x)
{
    tbuf b = {0};
    py_json(&b, x, 0);
    puts_(&b, "\n");
    int rc = b.oom ? pt_fail(PT_ENOMEM, "out of memory") : write_text(path, b.s);
    free(b.s);
    return rc;
}

int ckpt_llama_out(const char *path, json_t *man, const pt_model_shape *m, const char *dst, int dir, const char *dtype,
                   long long max_shard)
{
    hf_t *e = NULL, *order = NULL;
    out_src *o = calloc(1, sizeof *o);
    holder h;
    memset(&h, 0, sizeof h);
    int n = hf_list(m, &e), rc = n < 0 ? n : PT_OK, forced = -1;
    if (!o && !rc) rc = pt_fail(PT_ENOMEM, "out of memory");
    if (rc) goto out;
    if (dtype) forced = !strcmp(dtype, "fp32") ? PT_ST_F32 : !strcmp(dtype, "bf16") ? PT_ST_BF16 : PT_ST_F16;
    json_t *rec = json_object_get(man, "hf"), *rfiles = json_object_get(rec, "files");
    /* each tensor's dtype and file: the record's, unless --dtype / --max-shard-size say otherwise */
    int nf = 1;
    const int use_layout = json_is_array(rfiles) && !max_shard && dir;
    for (int k = 0; k < n; k++) e[k].dtype = forced >= 0 ? forced : PT_ST_F32, e[k].file = 0;
    json_t *tied_name = NULL; /* a tied lm_head the source file held */
    int ntot = n;
    if (json_is_array(rfiles)) {
        size_t fi, j;
        json_t *f, *x;
        json_array_foreach(rfiles, fi, f) json_array_foreach(json_object_get(f, "tensors"), j, x) {
            const char *nm = json_string_value(json_array_get(x, 0));
            const int dt = dtype_of(json_string_value(json_array_get(x, 1)) ? json_string_value(json_array_get(x, 1)) : "");
            int found = 0;
            for (int k = 0; k < n && nm; k++)
                if (!strcmp(e[k].name, nm)) {
                    found = 1;
                    if (forced < 0 && dt >= 0) e[k].dtype = dt;
                }
            if (!found && nm && !strcmp(nm, "lm_head.weight") && !pt_model_untied(m)) tied_name = x;
        }
    }
    if (tied_name && use_layout) ntot = n + 1;
    order = ntot > 0 ? calloc((size_t)ntot, sizeof *order) : NULL;
    if (!order) {
        rc = pt_fail(PT_ENOMEM, "out of memory");
        goto out;
    }
    if (use_layout) { /* the source's files, tensors in their data order */
        size_t fi, j;
        json_t *f, *x;
        int k = 0;
        json_array_foreach(rfiles, fi, f) json_array_foreach(json_object_get(f, "tensors"), j, x) {
            const char *nm = json_string_value(json_array_get(x, 0));
            int q = -1;
            for (int z = 0; z < n && nm && q < 0; z++)
                if (!strcmp(e[z].name, nm)) q = z;
            if (q < 0 && nm && x == tied_name) { /* the tied head: wte's data under its name */
                order[k] = e[0];
                snprintf(order[k].name, sizeof order[k].name, "lm_head.weight");
                const int dt = dtype_of(json_string_value(json_array_get(x, 1)) ? json_string_value(json_array_get(x, 1)) : "");
                order[k].dtype = forced >= 0 ? forced : dt >= 0 ? dt : PT_ST_F32;
            } else if (q < 0 || k >= ntot || e[q].file < 0) {
                rc = pt_fail(PT_EFORMAT, "checkpoint %s: manifest hf record names tensor '%.80s' %s (valid: each "
                             "tensor of the model once)", path, nm ? nm : "?", q >= 0 ? "twice" : "not of the model");
                goto out;
            } else {
                order[k] = e[q];
                e[q].file = -1; /* taken: a name listed twice is refused above */
            }
            order[k++].file = (int)fi;
        }
        if (k != ntot) {
            rc = pt_fail(PT_EFORMAT, "checkpoint %s: manifest hf record lists %d tensors, the model has %d", path, k, ntot);
            goto out;
        }
        nf = (int)json_array_size(rfiles);
    } else { /* transformers' sharding: state-dict order, a new shard past max_shard bytes; canonical order within */
        int64_t cur = 0;
        for (int k = 0; k < n; k++) {
            order[k] = e[k];
            const int64_t nb = e[k].n * dtype_bytes(e[k].dtype);
            if (max_shard && cur > 0 && cur + nb > max_shard) nf++, cur = 0;
            order[k].file = nf - 1;
            cur += nb;
        }
        qsort(order, (size_t)n, sizeof *order, cmp_canon);
    }
    if (!dir && nf > 1) {
        rc = pt_fail(PT_EINVAL, "--max-shard-size writes several files: give --to hf and a directory DST");
        goto out;
    }
    /* the data source */
    const int np = pt_model_param_count(m);
    if (np > (int)(sizeof o->fdi / sizeof o->fdi[0])) {
        rc = pt_fail(PT_EINVAL, "model of %d parameters: too many layers to convert", np);
        goto out;
    }
    int direct = stream_files(path, man, np, o);
    if (direct < 0) {
        rc = direct;
        goto out;
    }
    if (!direct) { /* saved sharded: through a one-rank holder (pt_ckpt_load reshards) */
        pt_ckpt_meta meta;
        if ((rc = ckpt_holder_fits(m, 1, ckpt_load_bytes(man))) || (rc = ckpt_holder_build(&h, m, 1)) ||
            (rc = pt_ckpt_load(path, &h.tr, &h.plan, m, &meta)))
            goto out;
        o->h = &h;
    }
    int64_t bytes = 0;
    if (dir && mkdir(dst, 0755) && errno != EEXIST) {
        rc = pt_fail(PT_EIO, "%s: cannot be created: %s", dst, strerror(errno));
        goto out;
    }
    json_t *wmap = json_object();
    int64_t total = 0;
    for (int f = 0, lo = 0; f < nf && !rc; f++) {
        int hi = lo;
        while (hi < ntot && order[hi].file == f) hi++;
        char name[256], p[4600];
        json_t *meta = NULL;
        if (use_layout) {
            json_t *rf = json_array_get(rfiles, (size_t)f);
            snprintf(name, sizeof name, "%s", jstr(rf, "name"));
            if (!*name || strchr(name, '/') || name[0] == '.') {
                rc = pt_fail(PT_EFORMAT, "checkpoint %s: hf record file name '%.80s' is not valid", path, name);
                break;
            }
            meta = json_incref(json_object_get(rf, "metadata"));
        } else {
            if (nf == 1) snprintf(name, sizeof name, "model.safetensors");
            else snprintf(name, sizeof name, "model-%05d-of-%05d.safetensors", f + 1, nf);
            meta = json_pack("{s:s}", "format", "pt");
        }
        if (dir) snprintf(p, sizeof p, "%s/%s", dst, name);
        else snprintf(p, sizeof p, "%s", dst);
        rc = write_st(p, order, lo, hi, meta, get_out, o, &bytes);
        json_decref(meta);
        for (int k = lo; k < hi; k++) {
            json_object_set_new(wmap, order[k].name, json_string(name));
            total += order[k].n * dtype_bytes(order[k].dtype);
        }
        lo = hi;
    }
    const int sharded = nf > 1 || json_is_true(json_object_get(rec, "sharded"));
    if (!rc && dir && sharded && (!use_layout || nf >= 1)) {
        json_t *im = use_layout && json_is_object(json_object_get(rec, "index_metadata"))
                         ? json_deep_copy(json_object_get(rec, "index_metadata")) : json_object();
        if (!use_layout || !json_object_get(im, "total_size")) json_object_set_new(im, "total_size", json_integer(total));
        json_t *idx = json_pack("{s:o, s:O}", "metadata", im, "weight_map", wmap);
        char p[4600];
        snprintf(p, sizeof p, "%s/model.safetensors.index.json", dst);
        rc = write_json_py(p, idx);
        json_decref(idx);
    }
    json_decref(wmap);
    if (!rc && dir) {
        json_t *cfg = json_object_get(rec, "config");
        json_t *c = json_is_object(cfg) && forced < 0 ? json_incref(cfg) : make_config(m, forced >= 0 ? forced : PT_ST_F32);
        if (json_is_object(cfg) && forced >= 0) { /* the source's config, the dtype changed */
            json_decref(c);
            c = json_deep_copy(cfg);
            json_object_set_new(c, "torch_dtype", json_string(forced == PT_ST_BF16 ? "bfloat16" : forced == PT_ST_F16 ? "float16" : "float32"));
        }
        char p[4600];
        snprintf(p, sizeof p, "%s/config.json", dst);
        rc = c ? write_json_py(p, c) : pt_fail(PT_ENOMEM, "out of memory");
        json_decref(c);
    }
    if (!rc) {
        char spec[160];
        pt_model_shape_format(m, spec, sizeof spec);
        printf("convert: %s (%s) -> %s (Hugging Face %s, %d safetensors file%s%s, %lld bytes of tensors)\n", path, spec,
               dst, m->qkv_bias ? "Qwen2ForCausalLM" : "LlamaForCausalLM", nf, nf == 1 ? "" : "s",
               use_layout ? ", the source's layout and dtypes" : "", (long long)total);
    }
out:
    if (o)
        for (size_t k = 0; k < json_array_size(json_object_get(man, "files")) && k < 64; k++)
            if (o->fd[k] > 0) close(o->fd[k]);
    ckpt_holder_free(&h);
    free(o);
    free(order);
    free(e);
    return rc;
}
