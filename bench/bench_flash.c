/* SPDX-License-Identifier: MIT */
/* bench-flash-ops: the fused kernels beside the materialised ones they
 * replace, one layer's worth at GPT-2 124M's shapes (H12 C768 T1024,
 * V50257), forward + backward, on the cpu backend's float table.
 *
 *   usage: bench-flash-ops [--batch B] [--threads N] [--reps R] [--help]
 *
 * Prints one table: per op pair, the best of R wall times (ms) and the
 * bytes the pair keeps between forward and backward plus its largest
 * scratch (attention: [B, NH, T, T] probabilities and a [T, T] backward
 * block per thread, against lse [B, NH, T] and two 64 x 64 tiles per
 * thread; head: [N, V] logits against one [N, 512] block; MLP fc: the
 * separate bias, GELU and GELU-backward passes against the epilogues).
 * A bench, not a test: it asserts nothing. */
#include "backend/ops.h"
#include "core/core.h"
#include "bench_opts.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static float *buf(size_t n, pt_rng *r, float scale)
{
    float *p = malloc(sizeof(float) * (n ? n : 1));
    if (!p) {
        fprintf(stderr, "bench-flash-ops: out of memory for %zu floats\n", n);
        exit(1);
    }
    for (size_t i = 0; i < n; i++) p[i] = r ? (float)(scale * pt_rng_normal(r)) : 0.0f;
    return p;
}

int main(int argc, char **argv)
{
    int B = 1, threads = 0, reps = 3;
    const bench_opt opts[] = {
        {"batch", BENCH_INT, 1, 1024, &B, "B", "sequences of T = 1024 tokens", NULL},
        {"threads", BENCH_INT, 0, 4096, &threads, "N", "threads of the cpu backend, 0: OpenMP's default", NULL},
        {"reps", BENCH_INT, 1, 1000000, &reps, "R", "repetitions of each op pair, the best kept", NULL},
        {0}};
    bench_opts_parse(argc, argv, "bench-flash-ops", "bench-flash-ops [options]",
                     "One GPT-2 124M layer's fused kernels (flash attention, fused classifier, GELU epilogues) beside "
                     "the materialised ones: ms and bytes kept.",
                     opts);
    const pt_backend *be = pt_backend_get("cpu");
    if (threads) be->set_threads(threads);
    const pt_ops *o = be->ops;
    const int T = 1024, NH = 12, HS = 64, C = NH * HS, V = 50257, N = B * T, F = 4 * C;
    pt_rng r;
    pt_rng_seed(&r, 7, 1);
    printf("one layer at GPT-2 124M shapes: B=%d T=%d NH=%d HS=%d C=%d V=%d; best of %d, forward + backward\n", B, T,
           NH, HS, C, V, reps);
    printf("%-34s %10s %14s\n", "op", "ms", "MiB kept+scratch");
    const double MiB = 1048576.0;

    /* attention */
    float *qkv = buf((size_t)N * 3 * C, &r, 1), *dout = buf((size_t)N * C, &r, 1), *out = buf((size_t)N * C, NULL, 0);
    float *dqkv = buf((size_t)N * 3 * C, NULL, 0), *att = buf((size_t)B * NH * T * T, NULL, 0);
    float *lse = buf((size_t)B * NH * T, NULL, 0);
    const pt_attn_dims d = {B, NH, HS, T, T, 0, 0, 3 * C, 3 * C, NH};
    double best_ref = 1e30, best_flash = 1e30;
    for (int k = 0; k < reps; k++) {
        double t = pt_now();
        o->attention_ref_fwd(out, att, qkv, B, T, NH, HS);
        o->attention_ref_bwd(dqkv, dout, qkv, att, B, T, NH, HS);
        t = pt_now() - t;
        if (t < best_ref) best_ref = t;
        t = pt_now();
        o->attention_fwd(out, lse, qkv, qkv + C, qkv + 2 * C, &d, 0);
        o->attention_bwd(dqkv, dqkv + C, dqkv + 2 * C, dout, qkv, qkv + C, qkv + 2 * C, out, lse, &d);
        t = pt_now() - t;
        if (t < best_flash) best_flash = t;
    }
    const int nt = threads ? threads : 1;
    printf("%-34s %10.1f %14.2f\n", "attention materialised (ref)", 1e3 * best_ref,
           4.0 * ((double)B * NH * T * T + (double)nt * T * T) / MiB);
    printf("%-34s %10.1f %14.2f\n", "attention flash", 1e3 * best_flash,
           4.0 * ((double)B * NH * T + (double)nt * (2.0 * 64 * 64 + 64)) / MiB);
    free(att), free(lse), free(dqkv), free(out), free(dout), free(qkv);

    /* head: logits [N, V] + cross-entropy against the fused classifier */
    float *x = buf((size_t)N * C, &r, 1), *w = buf((size_t)V * C, &r, 0.02f), *dx = buf((size_t)N * C, NULL, 0);
    float *dw = buf((size_t)V * C, NULL, 0), *logits = buf((size_t)N * V, NULL, 0), *st = buf(3 * (size_t)N, NULL, 0);
    float *loss = buf((size_t)N, NULL, 0), *dl = buf((size_t)N, NULL, 0);
    float *work = buf((size_t)N * PT_CLASSIFIER_VBLOCK, NULL, 0);
    int32_t *tgt = malloc(sizeof(int32_t) * (size_t)N);
    if (!tgt) return 1;
    for (int n = 0; n < N; n++) tgt[n] = (int32_t)(pt_rng_u64(&r) % (uint64_t)V), dl[n] = 1.0f / (float)N;
    best_ref = best_flash = 1e30;
    for (int k = 0; k < reps; k++) {
        double t = pt_now();
        o->matmul_fwd(logits, NULL, x, w, NULL, 0.0f, N, C, V, PT_EPI_DEFAULT);
        o->xent_max(st, logits, 0, V, N, V);
        o->xent_sumexp(st + N, st + 2 * N, logits, st, tgt, 0, V, N, V);
        o->xent_loss(loss, st, st + N, st + 2 * N, N);
        o->xent_bwd(logits, logits, st, st + N, tgt, dl, 0, V, N, V);
        o->matmul_bwd(dx, dw, NULL, logits, x, w, N, C, V, PT_EPI_DEFAULT, NULL, NULL);
        t = pt_now() - t;
        if (t < best_ref) best_ref = t;
        t = pt_now();
        o->classifier_fwd(st, x, w, tgt, work, PT_CLASSIFIER_VBLOCK, 0, V, N, C, V, 1);
        o->xent_loss(loss, st, st + N, st + 2 * N, N);
        o->classifier_bwd(dx, dw, x, w, st, tgt, dl, work, PT_CLASSIFIER_VBLOCK, 0, V, N, C, V, 1);
        t = pt_now() - t;
        if (t < best_flash) best_flash = t;
    }
    printf("%-34s %10.1f %14.2f\n", "head logits + cross-entropy", 1e3 * best_ref, 4.0 * (double)N * V / MiB);
    printf("%-34s %10.1f %14.2f\n", "head fused classifier", 1e3 * best_flash,
           4.0 * (double)N * PT_CLASSIFIER_VBLOCK / MiB);
    free(x), free(w), free(dx), free(dw), free(logits), free(st), free(loss), free(dl), free(work), free(tgt);

    /* MLP fc: GEMM, bias, GELU as passes against the GELU_AUX_BIAS / DGELU_BGRAD epilogues */
    float *in = buf((size_t)N * C, &r, 1), *wf = buf((size_t)F * C, &r, 0.02f), *bf = buf((size_t)F, &r, 0.1f);
    float *pre = buf((size_t)N * F, NULL, 0), *h = buf((size_t)N * F, NULL, 0), *w2 = buf((size_t)C * F, &r, 0.02f);
    float *dy = buf((size_t)N * C, &r, 1), *dh = buf((size_t)N * F, NULL, 0), *dpre = buf((size_t)N * F, NULL, 0);
    float *dbf = buf((size_t)F, NULL, 0);
    best_ref = best_flash = 1e30;
    for (int k = 0; k < reps; k++) {
        double t = pt_now();
        o->matmul_fwd(pre, NULL, in, wf, NULL, 0.0f, N, C, F, PT_EPI_DEFAULT);
        o->bias_fwd(pre, bf, N, F);
        o->gelu_fwd(h, pre, (size_t)N * F);
        o->zero(dh, (size_t)N * F, PT_F32);
        o->matmul_bwd(dh, NULL, NULL, dy, h, w2, N, F, C, PT_EPI_DEFAULT, NULL, NULL);
        o->zero(dpre, (size_t)N * F, PT_F32);
        o->gelu_bwd(dpre, pre, dh, (size_t)N * F);
        o->bias_bwd(dbf, dpre, N, F);
        t = pt_now() - t;
        if (t < best_ref) best_ref = t;
        t = pt_now();
        o->matmul_fwd(h, pre, in, wf, bf, 0.0f, N, C, F, PT_EPI_GELU);
        o->matmul_bwd(dpre, NULL, NULL, dy, h, w2, N, F, C, PT_EPI_DGELU, pre, dbf);
        t = pt_now() - t;
        if (t < best_flash) best_flash = t;
    }
    printf("%-34s %10.1f %14.2f\n", "fc: GEMM, bias, GELU passes", 1e3 * best_ref, 4.0 * 3.0 * N * F / MiB);
    printf("%-34s %10.1f %14.2f\n", "fc: GELU_AUX_BIAS + DGELU_BGRAD", 1e3 * best_flash, 4.0 * 2.0 * N * F / MiB);
    free(in), free(wf), free(bf), free(pre), free(h), free(w2), free(dy), free(dh), free(dpre), free(dbf);
    return 0;
}
