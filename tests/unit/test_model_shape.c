/* SPDX-License-Identifier: MIT */
/* lib/contract/model.c: the presets against the published config.json
 * numbers (written out here independently), the shape spellings' round
 * trip on random shapes (seed printed; PTRAIN_TEST_SEED repeats a run), the
 * parameter list against the closed-form count, and the refusals. */
#define _POSIX_C_SOURCE 200809L
#include "contract/model.h"
#include "core/core.h"
#include "tests/tap.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint64_t rng_state;
static int rnd(int n)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (int)((rng_state >> 33) % (uint64_t)n);
}

/* sum of the list's rows * cols */
static long long list_params(const pt_model_shape *m)
{
    long long n = 0;
    pt_param_info pi;
    for (int i = 0; pt_model_param_info(m, i, &pi) == 0; i++) n += pi.rows * pi.cols;
    return n;
}

int main(void)
{
    rng_state = (uint64_t)time(NULL) ^ ((uint64_t)clock() << 20);
    if (getenv("PTRAIN_TEST_SEED")) rng_state = strtoull(getenv("PTRAIN_TEST_SEED"), NULL, 10);
    printf("# seed %llu (PTRAIN_TEST_SEED repeats this run)\n", (unsigned long long)rng_state);

    /* published sizes: L, H, KV, C, I, V, untied, theta, rope factor, and the
     * parameter count the model cards give (rounded as they state it) */
    static const struct {
        const char *name;
        int L, H, KV, C, I, V, untied;
        double theta, factor, params_b;
    } pub[] = {
        {"llama3.2-1b", 16, 32, 8, 2048, 8192, 128256, 0, 500000, 32, 1.236},
        {"llama3.2-3b", 28, 24, 8, 3072, 8192, 128256, 0, 500000, 32, 3.213},
        {"llama3.1-8b", 32, 32, 8, 4096, 14336, 128256, 1, 500000, 8, 8.030},
        {"smollm2-135m", 30, 9, 3, 576, 1536, 49152, 0, 100000, 0, 0.1345},
        {"tinyllama-1.1b", 22, 32, 4, 2048, 5632, 32000, 1, 10000, 0, 1.100},
    };
    int ok = 1;
    for (size_t i = 0; i < sizeof pub / sizeof pub[0]; i++) {
        pt_model_shape m;
        if (pt_model_shape_parse("--model", pub[i].name, &m) < 0 || m.family != PT_FAMILY_LLAMA ||
            m.n_layer != pub[i].L || m.n_head != pub[i].H || pt_model_kv_heads(&m) != pub[i].KV ||
            m.n_embd != pub[i].C || pt_model_ffn(&m) != pub[i].I || m.vocab != pub[i].V ||
            pt_model_untied(&m) != pub[i].untied || pt_model_rope_theta(&m) != pub[i].theta ||
            m.rope_factor != (float)pub[i].factor || pt_model_norm_eps(&m) != 1e-5) {
            ok = 0;
            tap_diag("%s differs from its config.json", pub[i].name);
        }
        double b = (double)pt_model_num_params(&m) / 1e9, rel = (b - pub[i].params_b) / pub[i].params_b;
        if (rel > 0.005 || rel < -0.005) {
            ok = 0;
            tap_diag("%s: %.4f B parameters, the model card says %.4f B", pub[i].name, b, pub[i].params_b);
        }
    }
    tap_ok(ok, "the Llama presets are the published shapes and parameter counts (within 0.5%%)");

    /* the list sums to the closed form, for every preset and random shapes of both families */
    const char *names = pt_model_preset_names();
    int nlist = 0, sum_ok = 1;
    char buf[512];
    snprintf(buf, sizeof buf, "%s", names);
    for (char *t = strtok(buf, ", "); t; t = strtok(NULL, ", ")) {
        pt_model_shape m;
        if (pt_model_preset(t, &m) < 0 || list_params(&m) != pt_model_num_params(&m)) {
            sum_ok = 0;
            tap_diag("preset %s: list %lld, closed form %lld", t, list_params(&m), pt_model_num_params(&m));
        }
        nlist++;
    }
    int round_ok = 1, nround = 0;
    for (int it = 0; it < 500; it++) {
        pt_model_shape m;
        memset(&m, 0, sizeof m);
        m.n_layer = 1 + rnd(6);
        m.seq_len = 1 + rnd(512);
        m.vocab = 2 + rnd(70000);
        if (rnd(2)) {
            m.family = PT_FAMILY_LLAMA;
            m.n_kv_head = 1 + rnd(4);
            m.n_head = m.n_kv_head * (1 + rnd(4));
            m.n_embd = m.n_head * 2 * (1 + rnd(16));
            m.ffn = 1 + rnd(1000);
            m.untied = rnd(2);
            m.qkv_bias = rnd(2);
            if (rnd(2)) m.rope_theta = (float)(1000 + rnd(1000000));
        } else {
            m.n_head = 1 + rnd(8);
            m.n_embd = m.n_head * (1 + rnd(32));
        }
        char s[160];
        pt_model_shape back;
        pt_model_shape_format(&m, s, sizeof s);
        if (pt_model_shape_parse("--model", s, &back) < 0 || memcmp(&back, &m, sizeof m) != 0) {
            round_ok = 0;
            tap_diag("'%s' does not parse back to its shape: %s", s, pt_errmsg());
        }
        if (list_params(&m) != pt_model_num_params(&m)) {
            sum_ok = 0;
            tap_diag("'%s': list %lld, closed form %lld", s, list_params(&m), pt_model_num_params(&m));
        }
        nround++;
    }
    tap_ok(sum_ok, "the parameter list sums to pt_model_num_params (%d presets, %d random shapes)", nlist, nround);
    tap_ok(round_ok, "pt_model_shape_format parses back to the same shape (%d random shapes)", nround);

    /* the list's names, shapes and order for a small Llama with biases and an untied head */
    pt_model_shape q;
    int pq = pt_model_shape_parse("--model", "llama:2,4,2,64,96,16,100,untied,qkv-bias,theta=1e6", &q);
    static const char *want[] = {"wte", "h0.ln1.w", "h0.q.w", "h0.q.b", "h0.kv.w", "h0.kv.b", "h0.proj.w",
                                 "h0.ln2.w", "h0.fc.w", "h0.fcproj.w"};
    static const long long wr[] = {100, 64, 64, 64, 64, 64, 64, 64, 192, 64}, wc[] = {64, 1, 64, 1, 64, 1, 64, 1, 64, 96};
    int names_ok = pq == 0 && pt_model_param_count(&q) == 1 + 2 * 9 + 2 && q.rope_theta == 1e6f;
    for (int i = 0; names_ok && i < 10; i++) {
        pt_param_info pi;
        names_ok = pt_model_param_info(&q, i, &pi) == 0 && !strcmp(pi.name, want[i]) && pi.rows == wr[i] &&
                   pi.cols == wc[i];
        if (!names_ok) tap_diag("entry %d: %s [%lld, %lld], want %s [%lld, %lld]", i, pi.name, pi.rows, pi.cols, want[i], wr[i], wc[i]);
    }
    pt_param_info last;
    names_ok = names_ok && pt_model_param_info(&q, 20, &last) == 0 && !strcmp(last.name, "lm_head.w") &&
               last.rows == 100 && pt_model_param_info(&q, 21, &last) == -1;
    tap_ok(names_ok, "llama:2,4,2,64,96,16,100,untied,qkv-bias: the list's names, shapes and order");

    /* a preset with its defaults written out (as a converted config.json
     * gives it) is still that preset, and normalises equal */
    int canon_ok = 1;
    snprintf(buf, sizeof buf, "%s", names);
    for (char *t = strtok(buf, ", "); t; t = strtok(NULL, ", ")) {
        pt_model_shape a, b;
        pt_model_preset(t, &a);
        b = a;
        if (b.family == PT_FAMILY_LLAMA) {
            b.n_kv_head = pt_model_kv_heads(&b), b.ffn = pt_model_ffn(&b);
            b.norm_eps = 1e-5f, b.rope_theta = (float)pt_model_rope_theta(&b);
        }
        char fb[160];
        pt_model_shape_format(&b, fb, sizeof fb);
        pt_model_shape_normalise(&a);
        pt_model_shape_normalise(&b);
        if (strcmp(fb, t) || memcmp(&a, &b, sizeof a)) {
            canon_ok = 0;
            tap_diag("%s with its defaults written out formats as '%s'", t, fb);
        }
    }
    tap_ok(canon_ok, "every preset with its defaults written out formats as its name and normalises equal");

    /* refusals name the value and the forms */
    const char *bad[] = {"llama:2,4,3,64,96,16,100", "llama:2,4,2,63,96,16,100", "llama:2,4,2,64,96,16",
                         "llama:2,4,2,64,96,16,100,tied", "llama:2,4,2,64,96,16,100,theta=-1",
                         "llama:2,6,2,30,96,16,100", "llama:2,4,2,64,96,16,1", "llama2:2,4,2,64,96,16,100"};
    int refused = 1;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        pt_model_shape m;
        char want_msg[640];
        snprintf(want_msg, sizeof want_msg,
                 "invalid --model '%s' (valid: a preset %s, L,H,C,T,V or "
                 "llama:L,H,KV,C,I,T,V[,untied][,qkv-bias][,theta=X])", bad[i], pt_model_preset_names());
        if (pt_model_shape_parse("--model", bad[i], &m) != -1 || strcmp(pt_errmsg(), want_msg) != 0) {
            refused = 0;
            tap_diag("'%s' gave: %s", bad[i], pt_errmsg());
        }
    }
    tap_ok(refused, "bad llama: spellings (KV not dividing H, odd head size, missing V, unknown flags) are refused");
    return tap_done();
}
