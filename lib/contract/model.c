/* SPDX-License-Identifier: MIT */
/* The model presets and the model shape parser (see model.h).  libc
 * only. */
#include "contract/model.h"
#include "core/core.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- model presets ------------------------------------------------------- */

#define LLAMA PT_FAMILY_LLAMA
/* Llama 3.1's RoPE scaling (config.json rope_scaling, rope_type llama3) */
#define LLAMA31_ROPE(factor) .rope_theta = 500000.0f, .rope_factor = (factor), .rope_low_freq = 1.0f, \
                             .rope_high_freq = 4.0f, .rope_orig_ctx = 8192

/* The published shapes (each model's config.json on the Hugging Face hub);
 * seq_len the length it was pretrained at.  The small llama-* presets are
 * for CPU tests and the CPU demo (GPT-2's vocabulary, so the demo's
 * shards serve them). */
static const struct {
    const char *name;
    pt_model_shape shape;
} presets[] = {
    {"test", {2, 4, 64, 32, 50257, .family = PT_FAMILY_GPT2}},
    {"tiny", {4, 4, 128, 64, 50257, .family = PT_FAMILY_GPT2}},
    {"small", {4, 4, 256, 128, 50257, .family = PT_FAMILY_GPT2}},
    {"gpt2-124M", {12, 12, 768, 1024, 50257, .family = PT_FAMILY_GPT2}},
    {"llama-test", {2, 4, 64, 32, 50257, .family = LLAMA, .n_kv_head = 2, .ffn = 192}},
    {"llama-tiny", {4, 4, 128, 64, 50257, .family = LLAMA, .n_kv_head = 2, .ffn = 384}},
    {"llama-small", {4, 8, 256, 128, 50257, .family = LLAMA, .n_kv_head = 4, .ffn = 768}},
    {"smollm2-135m", {30, 9, 576, 2048, 49152, .family = LLAMA, .n_kv_head = 3, .ffn = 1536,
                      .rope_theta = 100000.0f}},
    {"tinyllama-1.1b", {22, 32, 2048, 2048, 32000, .family = LLAMA, .n_kv_head = 4, .ffn = 5632, .untied = 1}},
    {"llama3.2-1b", {16, 32, 2048, 8192, 128256, .family = LLAMA, .n_kv_head = 8, .ffn = 8192, LLAMA31_ROPE(32.0f)}},
    {"llama3.2-3b", {28, 24, 3072, 8192, 128256, .family = LLAMA, .n_kv_head = 8, .ffn = 8192, LLAMA31_ROPE(32.0f)}},
    {"llama3.1-8b", {32, 32, 4096, 8192, 128256, .family = LLAMA, .n_kv_head = 8, .ffn = 14336, .untied = 1,
                     LLAMA31_ROPE(8.0f)}},
};
#define NPRESETS (sizeof presets / sizeof presets[0])

#define PRESET_NAMES                                                                                               \
    "test, tiny, small, gpt2-124M, llama-test, llama-tiny, llama-small, smollm2-135m, tinyllama-1.1b, "            \
    "llama3.2-1b, llama3.2-3b, llama3.1-8b"
#define LLAMA_FORM "llama:L,H,KV,C,I,T,V[,untied][,qkv-bias][,theta=X]"

const char *pt_model_preset_names(void) { return PRESET_NAMES; }

const char *pt_model_family_name(int family)
{
    return family == PT_FAMILY_GPT2 ? "gpt2" : family == PT_FAMILY_LLAMA ? "llama" : "?";
}

int pt_model_kv_heads(const pt_model_shape *m) { return m->n_kv_head > 0 ? m->n_kv_head : m->n_head; }
int pt_model_ffn(const pt_model_shape *m) { return m->ffn > 0 ? m->ffn : 4 * m->n_embd; }
double pt_model_norm_eps(const pt_model_shape *m) { return m->norm_eps > 0 ? m->norm_eps : 1e-5; }
double pt_model_rope_theta(const pt_model_shape *m) { return m->rope_theta > 0 ? m->rope_theta : 10000.0; }
int pt_model_untied(const pt_model_shape *m) { return m->family == PT_FAMILY_LLAMA && m->untied; }

int pt_model_preset(const char *name, pt_model_shape *m)
{
    if (!name) return -1;
    for (size_t i = 0; i < NPRESETS; i++)
        if (strcmp(name, presets[i].name) == 0) {
            if (m) *m = presets[i].shape;
            return 0;
        }
    return -1;
}

long long pt_model_num_params(const pt_model_shape *m)
{
    long long C = m->n_embd, L = m->n_layer, V = m->vocab;
    if (m->family != PT_FAMILY_LLAMA) {
        long long per_layer = 2 * C + (3 * C * C + 3 * C) + (C * C + C) + 2 * C + (4 * C * C + 4 * C) + (4 * C * C + C);
        return V * C + (long long)m->seq_len * C + L * per_layer + 2 * C;
    }
    long long HS = C / m->n_head, KVC = (long long)pt_model_kv_heads(m) * HS, I = pt_model_ffn(m);
    long long per_layer = 2 * C + C * C + 2 * KVC * C + (m->qkv_bias ? C + 2 * KVC : 0) + C * C + 3 * C * I;
    return V * C * (pt_model_untied(m) ? 2 : 1) + L * per_layer + C;
}

double pt_model_flops_per_token(const pt_model_shape *m, int T)
{
    double C = m->n_embd, L = m->n_layer, nmat;
    if (m->family != PT_FAMILY_LLAMA) {
        nmat = 12.0 * L * C * C + C * m->vocab;
    } else {
        double KVC = (double)pt_model_kv_heads(m) * (m->n_embd / m->n_head), I = pt_model_ffn(m);
        nmat = L * (2.0 * C * C + 2.0 * C * KVC + 3.0 * C * I) + C * m->vocab;
    }
    return 6.0 * nmat + 12.0 * L * T * C;
}

/* strict positive decimal int up to 1 << 30; *end after it */
static int parse_pos(const char *s, const char **end, int *out)
{
    long long v = 0;
    const char *c = s;
    if (*c < '0' || *c > '9') return -1;
    for (; *c >= '0' && *c <= '9'; c++) {
        v = v * 10 + (*c - '0');
        if (v > (1 << 30)) return -1;
    }
    if (v < 1) return -1;
    *out = (int)v;
    *end = c;
    return 0;
}

/* n comma-separated positive integers from *c into v; *c after them */
static int parse_ints(const char **c, int *v, int n)
{
    for (int i = 0; i < n; i++) {
        if (parse_pos(*c, c, &v[i]) < 0) return -1;
        if (i < n - 1 && *(*c)++ != ',') return -1;
    }
    return 0;
}

/* "llama:L,H,KV,C,I,T,V[,untied][,qkv-bias][,theta=X]" after the prefix */
static int parse_llama(const char *c, pt_model_shape *r)
{
    int v[7];
    if (parse_ints(&c, v, 7) < 0) return -1;
    memset(r, 0, sizeof *r);
    r->family = PT_FAMILY_LLAMA;
    r->n_layer = v[0], r->n_head = v[1], r->n_kv_head = v[2], r->n_embd = v[3], r->ffn = v[4];
    r->seq_len = v[5], r->vocab = v[6];
    while (*c == ',') {
        c++;
        size_t k = strcspn(c, ",");
        if (k == 6 && strncmp(c, "untied", 6) == 0) r->untied = 1;
        else if (k == 8 && strncmp(c, "qkv-bias", 8) == 0) r->qkv_bias = 1;
        else if (k > 6 && strncmp(c, "theta=", 6) == 0) {
            char num[32], *e;
            if (k - 6 >= sizeof num) return -1;
            memcpy(num, c + 6, k - 6);
            num[k - 6] = '\0';
            double t = strtod(num, &e);
            if (*e != '\0' || !(t > 0 && t < 1e12)) return -1;
            r->rope_theta = (float)t;
        } else return -1;
        c += k;
    }
    if (*c != '\0') return -1;
    if (r->n_embd % r->n_head || r->n_head % r->n_kv_head || (r->n_embd / r->n_head) % 2 || r->vocab < 2) return -1;
    return 0;
}

int pt_model_shape_parse(const char *what, const char *s, pt_model_shape *m)
{
    pt_model_shape r;
    if (!what) what = "model";
    if (s && pt_model_preset(s, &r) == 0) {
        if (m) *m = r;
        return 0;
    }
    int ok;
    if (s && strncmp(s, "llama:", 6) == 0) {
        ok = parse_llama(s + 6, &r) == 0;
    } else {
        int v[5];
        const char *c = s;
        ok = s != NULL && parse_ints(&c, v, 5) == 0 && *c == '\0' && v[2] % v[1] == 0 && v[4] >= 2;
        if (ok) {
            memset(&r, 0, sizeof r);
            r.n_layer = v[0], r.n_head = v[1], r.n_embd = v[2], r.seq_len = v[3], r.vocab = v[4];
        }
    }
    if (!ok)
        return pt_fail(PT_EINVAL, "invalid %s '%s' (valid: a preset %s, L,H,C,T,V or " LLAMA_FORM ")", what,
                       s ? s : "(null)", pt_model_preset_names());
    if (m) *m = r;
    return 0;
}

void pt_model_shape_normalise(pt_model_shape *m)
{
    if (m->family != PT_FAMILY_LLAMA) return;
    m->n_kv_head = pt_model_kv_heads(m);
    m->ffn = pt_model_ffn(m);
    m->norm_eps = (float)pt_model_norm_eps(m);
    m->rope_theta = (float)pt_model_rope_theta(m);
    m->untied = m->untied != 0;
    m->qkv_bias = m->qkv_bias != 0;
}

int pt_model_shape_format(const pt_model_shape *m, char *buf, int n)
{
    pt_model_shape a = *m;
    pt_model_shape_normalise(&a);
    for (size_t i = 0; i < NPRESETS; i++) {
        pt_model_shape b = presets[i].shape;
        pt_model_shape_normalise(&b);
        if (memcmp(&a, &b, sizeof a) == 0) return snprintf(buf, (size_t)n, "%s", presets[i].name);
    }
    if (m->family != PT_FAMILY_LLAMA)
        return snprintf(buf, (size_t)n, "%d,%d,%d,%d,%d", m->n_layer, m->n_head, m->n_embd, m->seq_len, m->vocab);
    char theta[48] = "";
    if (m->rope_theta > 0 && m->rope_theta != 10000.0f) snprintf(theta, sizeof theta, ",theta=%.9g", m->rope_theta);
    return snprintf(buf, (size_t)n, "llama:%d,%d,%d,%d,%d,%d,%d%s%s%s", m->n_layer, m->n_head, pt_model_kv_heads(m),
                    m->n_embd, pt_model_ffn(m), m->seq_len, m->vocab, m->untied ? ",untied" : "",
                    m->qkv_bias ? ",qkv-bias" : "", theta);
}

/* ---- the parameter list ---------------------------------------------------- */

int pt_model_block_params(const pt_model_shape *m)
{
    return m->family == PT_FAMILY_LLAMA ? 7 + 2 * (m->qkv_bias != 0) : 12;
}

int pt_model_pre_params(const pt_model_shape *m) { return m->family == PT_FAMILY_LLAMA ? 1 : 2; }

int pt_model_param_count(const pt_model_shape *m)
{
    const int post = m->family == PT_FAMILY_LLAMA ? 1 + pt_model_untied(m) : 2;
    return pt_model_pre_params(m) + m->n_layer * pt_model_block_params(m) + post;
}

static void info_set(pt_param_info *o, const char *name, int block, long long rows, long long cols, int role)
{
    if (block >= 0 && name[0] == '.') snprintf(o->name, sizeof o->name, "h%d%s", block, name);
    else snprintf(o->name, sizeof o->name, "%s", name);
    o->rows = rows, o->cols = cols, o->role = role;
}

int pt_model_param_info(const pt_model_shape *m, int i, pt_param_info *o)
{
    const long long C = m->n_embd, V = m->vocab, L = m->n_layer;
    const int pre = pt_model_pre_params(m), npb = pt_model_block_params(m);
    if (i < 0 || i >= pt_model_param_count(m)) return -1;
    memset(o, 0, sizeof *o);
    if (i < pre) {
        o->block = -1;
        if (i == 0) info_set(o, "wte", -1, V, C, PT_ROLE_WTE);
        else info_set(o, "wpe", -1, m->seq_len, C, PT_ROLE_WPE);
        return 0;
    }
    if (i >= pre + L * npb) {
        const int k = i - pre - (int)L * npb;
        o->block = (int)L;
        if (m->family == PT_FAMILY_LLAMA)
            k == 0 ? info_set(o, "lnf.w", -1, C, 1, PT_ROLE_NORM_W) : info_set(o, "lm_head.w", -1, V, C, PT_ROLE_HEAD);
        else
            k == 0 ? info_set(o, "lnf.w", -1, C, 1, PT_ROLE_NORM_W) : info_set(o, "lnf.b", -1, C, 1, PT_ROLE_NORM_B);
        return 0;
    }
    const int l = (i - pre) / npb, j = (i - pre) % npb;
    o->block = l;
    if (m->family != PT_FAMILY_LLAMA) {
        static const struct { const char *n; int rows4, cols4, role; } g[12] = {
            /* rows and cols in units of C/4 ... 0 for 1 */
            {".ln1.w", 4, 0, PT_ROLE_NORM_W}, {".ln1.b", 4, 0, PT_ROLE_NORM_B}, {".qkv.w", 12, 4, PT_ROLE_QKV_W},
            {".qkv.b", 12, 0, PT_ROLE_QKV_B}, {".proj.w", 4, 4, PT_ROLE_PROJ_W}, {".proj.b", 4, 0, PT_ROLE_PROJ_B},
            {".ln2.w", 4, 0, PT_ROLE_NORM_W}, {".ln2.b", 4, 0, PT_ROLE_NORM_B}, {".fc.w", 16, 4, PT_ROLE_FC_W},
            {".fc.b", 16, 0, PT_ROLE_FC_B}, {".fcproj.w", 4, 16, PT_ROLE_FCPROJ_W}, {".fcproj.b", 4, 0, PT_ROLE_FCPROJ_B},
        };
        info_set(o, g[j].n, l, g[j].rows4 * C / 4, g[j].cols4 ? g[j].cols4 * C / 4 : 1, g[j].role);
        return 0;
    }
    const long long KVC = (long long)pt_model_kv_heads(m) * (C / m->n_head), I = pt_model_ffn(m);
    int k = j;
    if (!m->qkv_bias && k >= 2) k++; /* no q.b */
    if (!m->qkv_bias && k >= 4) k++; /* no kv.b */
    switch (k) {
    case 0: info_set(o, ".ln1.w", l, C, 1, PT_ROLE_NORM_W); break;
    case 1: info_set(o, ".q.w", l, C, C, PT_ROLE_Q_W); break;
    case 2: info_set(o, ".q.b", l, C, 1, PT_ROLE_Q_B); break;
    case 3: info_set(o, ".kv.w", l, 2 * KVC, C, PT_ROLE_KV_W); break;
    case 4: info_set(o, ".kv.b", l, 2 * KVC, 1, PT_ROLE_KV_B); break;
    case 5: info_set(o, ".proj.w", l, C, C, PT_ROLE_PROJ_W); break;
    case 6: info_set(o, ".ln2.w", l, C, 1, PT_ROLE_NORM_W); break;
    case 7: info_set(o, ".fc.w", l, 2 * I, C, PT_ROLE_FC_W); break;
    default: info_set(o, ".fcproj.w", l, C, I, PT_ROLE_FCPROJ_W); break;
    }
    return 0;
}
