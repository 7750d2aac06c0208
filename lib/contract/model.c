/* SPDX-License-Identifier: MIT */
/* The model presets and the model shape parser (see model.h).  libc
 * only. */
#include "contract/model.h"
#include "core/core.h"

#include <stddef.h>
#include <string.h>

/* ---- model presets ------------------------------------------------------- */

static const struct {
    const char *name;
    pt_model_shape shape;
} presets[] = {
    {"test", {2, 4, 64, 32, 50257}},
    {"tiny", {4, 4, 128, 64, 50257}},
    {"small", {4, 4, 256, 128, 50257}},
    {"gpt2-124M", {12, 12, 768, 1024, 50257}},
};

const char *pt_model_preset_names(void) { return "test, tiny, small, gpt2-124M"; }

int pt_model_preset(const char *name, pt_model_shape *m)
{
    if (!name) return -1;
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++)
        if (strcmp(name, presets[i].name) == 0) {
            if (m) *m = presets[i].shape;
            return 0;
        }
    return -1;
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

int pt_model_shape_parse(const char *what, const char *s, pt_model_shape *m)
{
    pt_model_shape r;
    if (!what) what = "model";
    if (s && pt_model_preset(s, &r) == 0) {
        if (m) *m = r;
        return 0;
    }
    int v[5];
    const char *c = s;
    int ok = s != NULL;
    for (int i = 0; ok && i < 5; i++) {
        if (parse_pos(c, &c, &v[i]) < 0) ok = 0;
        else if (i < 4 && *c++ != ',') ok = 0;
    }
    if (ok && *c != '\0') ok = 0;
    if (ok && (v[2] % v[1] != 0 || v[4] < 2)) ok = 0;
    if (!ok)
        return pt_fail(PT_EINVAL, "invalid %s '%s' (valid: a preset %s or L,H,C,T,V)", what, s ? s : "(null)",
                       pt_model_preset_names());
    r.n_layer = v[0], r.n_head = v[1], r.n_embd = v[2], r.seq_len = v[3], r.vocab = v[4];
    if (m) *m = r;
    return 0;
}
