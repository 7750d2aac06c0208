/* SPDX-License-Identifier: MIT */
/* bench-step: throughput of one training step at 1 rank, beside the
 * machine's sgemm rate measured in the same run.
 *
 *   usage: bench-step [--model small] [--batch 8] [--steps 5] [--threads N]
 *                     [--precision fp32|bf16] [--device cpu|cuda]
 *
 * Prints the BLAS in use (library, kernel set, threads), a table of the
 * sgemm GFLOP/s of square and of the model's own GEMM shapes (the ceiling;
 * best of the repetitions), then the model's ms/step, tokens/s, achieved
 * GFLOP/s (6N + 12LTC FLOPs per token, see pt_gpt_flops_per_token) and the
 * ratio of achieved to sgemm GFLOP/s, for the mean and for the best step
 * (the best is the one to compare on a shared, noisy machine), then one
 * more step through the profiling ops table (lib/backend/ops_profile.h):
 * per op family (gemm, attention, classifier, layernorm, elementwise,
 * embedding, optimizer, memory) its calls, ms, share of that step and
 * GFLOP/s (the compute families) and GB/s, the time outside the ops, and a
 * line "profile: gemm_ms=... classifier_ms=... other_ms=... step_ms=...";
 * and last a machine-readable line "result: tok_s=<best> mean_tok_s=<mean>
 * gflops=<best> sgemm_fc=<GFLOP/s> pct_sgemm=<best %>" (read by
 * bench/bench-torch.sh).  The step is pt_train_step (lib/train), the one
 * ptrain-run uses; a second pass times the forward alone for the fwd /
 * bwd+optim split.  Default preset: L=4 H=4 C=256 T=128, V=50257, B=8
 * ("small").
 *
 * --precision bf16 runs the bf16 table (lib/backend/ops.h: bf16
 * activations and weight copies, fp32 master weights, gradients and AdamW)
 * and measures the bf16 GEMM (pt_gemm_bf16, lib/backend/gemm_bf16.h) on the
 * fc shape beside sgemm; the "vs GEMM(fc)" ratio is then against the bf16
 * rate, and the result line adds precision=, gemm_fc= (the rate used for
 * the ratio) and peak_mib=.
 *
 * --device cuda (a build with the CUDA backend and a visible GPU) runs the
 * same step on the GPU (lib/backend/cuda's tables); the reference rates are
 * then cuBLASLt's, in the run's precision, on the same fc and head shapes
 * (pt_cuda_gemm), and the result line adds mfu= (the model's FLOP/s over
 * the GPU's dense peak: 989.4 TFLOP/s bf16, 494.7 TF32 as fp32's tensor
 * cores are not used, 66.9 fp32; H100/H200 SXM, NVIDIA's data sheets).
 */
#include "config.h"
#include "backend/blas.h"
#include "backend/cuda/cuda.h"
#include "backend/cuda/gemm_plan.h"
#include "backend/cuda/ops_cuda.h"
#include "backend/gemm_bf16.h"
#include "backend/ops_profile.h"
#include "core/core.h"
#include "model/gpt.h"
#include "train/train.h"
#include "parallel/context.h"
#include "bench_opts.h"

#include <cblas.h>
#include <mpi.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int omp_threads(void)
{
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

static double sgemm_gflops(int M, int N, int K, int reps)
{
    float *a = malloc(sizeof(float) * (size_t)M * K), *b = malloc(sizeof(float) * (size_t)K * N),
          *c = malloc(sizeof(float) * (size_t)M * N);
    pt_rng r;
    pt_rng_seed(&r, 1, 1);
    for (size_t i = 0; i < (size_t)M * K; i++) a[i] = (float)pt_rng_uniform(&r);
    for (size_t i = 0; i < (size_t)K * N; i++) b[i] = (float)pt_rng_uniform(&r);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1, a, K, b, K, 0, c, N); /* warm */
    double best = 1e30;
    for (int i = 0; i < reps; i++) {
        double t0 = pt_now();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1, a, K, b, K, 0, c, N);
        double dt = pt_now() - t0;
        if (dt < best) best = dt;
    }
    free(a);
    free(b);
    free(c);
    return 2.0 * M * N * K / best / 1e9;
}

/* GFLOP/s of pt_gemm_bf16 on C[M,N] (bf16) = A[M,K] B[N,K]^T (the forward
 * matmul form), best of reps; 0 when the GEMM fails. */
static double gemm_bf16_gflops(int M, int N, int K, int reps)
{
    pt_bf16 *a = malloc(sizeof(pt_bf16) * (size_t)M * K), *b = malloc(sizeof(pt_bf16) * (size_t)K * N),
            *c = malloc(sizeof(pt_bf16) * (size_t)M * N);
    double best = 1e30;
    if (a && b && c) {
        pt_rng r;
        pt_rng_seed(&r, 1, 1);
        for (size_t i = 0; i < (size_t)M * K; i++) a[i] = pt_f32_to_bf16((float)pt_rng_uniform(&r));
        for (size_t i = 0; i < (size_t)K * N; i++) b[i] = pt_f32_to_bf16((float)pt_rng_uniform(&r));
        for (int i = 0; i <= reps; i++) { /* i = 0 warms up (oneDNN builds its primitive) */
            double t0 = pt_now();
            if (pt_gemm_bf16(0, 1, M, N, K, 1, a, K, b, K, 0, c, PT_BF16_OUT_BF16, N, NULL)) {
                best = 1e30;
                break;
            }
            double dt = pt_now() - t0;
            if (i && dt < best) best = dt;
        }
    }
    free(a);
    free(b);
    free(c);
    return best < 1e30 ? 2.0 * M * N * K / best / 1e9 : 0;
}

#ifdef HAVE_CUDA
/* cuBLASLt's GFLOP/s of row-major C [M, N] = A [M, K] B [N, K]^T in the
 * element type elem (fp32 output for fp32 inputs, bf16 for bf16), best of
 * reps after one warm-up; 0 when it cannot run */
static double cuda_gemm_gflops(int M, int N, int K, int elem, int reps)
{
    const size_t es = elem == PT_GEMM_BF16 ? 2 : 4;
    void *a = pt_cuda_mem.alloc(es * (size_t)M * K), *b = pt_cuda_mem.alloc(es * (size_t)N * K),
         *c = pt_cuda_mem.alloc(es * (size_t)M * N);
    double best = 1e30;
    for (int r = 0; a && b && c && r <= reps; r++) {
        pt_cuda_sync();
        double t0 = pt_now();
        if (pt_cuda_gemm(0, 1, M, N, K, 1.0f, a, K, 0, b, K, 0, 0.0f, c, N, 0, 1, elem, elem) != PT_OK) break;
        pt_cuda_sync();
        double dt = pt_now() - t0;
        if (r && dt < best) best = dt;
    }
    if (a) pt_cuda_mem.free(a);
    if (b) pt_cuda_mem.free(b);
    if (c) pt_cuda_mem.free(c);
    return best < 1e30 ? 2.0 * M * N * K / best / 1e9 : 0;
}
#endif

/* the profiling table's sync: the GPU's work done before and after each op */
static void profile_sync(void)
{
#ifdef HAVE_CUDA
    pt_cuda_sync();
#endif
}

int main(int argc, char **argv)
{
    pt_host_memory_keep(); /* as ptrain-run: freed blocks stay for the next step */
    const char *model = "small";
    int B = 8, steps = 5, threads = 0, prec = PT_PREC_FP32;
    const char *precision = "fp32", *device = "cpu";
    char model_help[256];
    snprintf(model_help, sizeof model_help, "model preset: %s", pt_gpt_preset_names());
    const bench_opt opts[] = {
        {"model", BENCH_STR, 0, 0, &model, "NAME", model_help, NULL},
        {"batch", BENCH_INT, 1, 1000000, &B, "N", "sequences per step", NULL},
        {"steps", BENCH_INT, 1, 1000000, &steps, "N", "timed steps, after one untimed warm-up step", NULL},
        {"threads", BENCH_INT, 0, 4096, &threads, "N", "threads of the cpu backend, 0: OpenMP's default", NULL},
        {"precision", BENCH_CHOICE, 0, 0, &precision, "fp32|bf16",
         "bf16: bf16 activations and weight copies, fp32 master weights, gradients and AdamW", NULL},
        {"device", BENCH_CHOICE, 0, 0, &device, "cpu|cuda", "where the step runs (cuda: the GPU this process sees)",
         NULL},
        {0}};
    bench_opts_parse(argc, argv, "bench-step", "bench-step [options]",
                     "One training step's throughput at 1 rank beside the machine's sgemm (or bf16 GEMM) rate.", opts);
    if (pt_precision_parse("--precision", precision, &prec) < 0) { /* the table admits only the names */
        fprintf(stderr, "bench-step: %s\n", pt_errmsg());
        return 2;
    }
    MPI_Init(&argc, &argv);
    pt_gpt_config cfg;
    if (pt_gpt_preset(model, &cfg) || B < 1 || steps < 1) {
        fprintf(stderr, "bench-step: %s\n", B < 1 || steps < 1 ? "--batch and --steps must be >= 1" : pt_errmsg());
        MPI_Finalize();
        return 2;
    }
    const int gpu = !strcmp(device, "cuda");
    const pt_backend *be = pt_backend_get(gpu ? "cuda" : "cpu");
    if (!be) {
        fprintf(stderr, "bench-step: --device %s: %s\n", device, pt_errmsg());
        MPI_Finalize();
        return 2;
    }
    if (threads > 0) be->set_threads(threads);
    const int T = cfg.seq_len, C = cfg.n_embd, N = B * T;
    double mlp = 0, bmlp = 0; /* the ceiling: the fc shape's GEMM rate, sgemm / bf16 (cuBLASLt on the GPU) */
    if (gpu) {
#ifdef HAVE_CUDA
        char v[600];
        pt_cuda_versions(v, sizeof v);
        const int el = prec == PT_PREC_BF16 ? PT_GEMM_BF16 : PT_GEMM_F32;
        printf("# bench-step: %s L=%d H=%d C=%d T=%d V=%d B=%d, 1 rank on the GPU, %s\n# %s\n", model, cfg.n_layer,
               cfg.n_head, C, T, cfg.vocab, B, pt_precision_name(prec), v);
        printf("%-34s %12s\n", "kernel", "GFLOP/s");
        double fc = cuda_gemm_gflops(N, 4 * C, C, el, 20), head = cuda_gemm_gflops(N, cfg.vocab, C, el, 5);
        printf("%-34s %12.1f\n", "cuBLASLt [B*T, C] x [4C, C]^T (fc)", fc);
        printf("%-34s %12.1f\n", "cuBLASLt [B*T, C] x [V, C]^T (head)", head);
        if (prec == PT_PREC_BF16) bmlp = fc;
        else mlp = fc;
#endif
    } else {
        printf("# bench-step: %s L=%d H=%d C=%d T=%d V=%d B=%d, 1 rank, %d threads%s, %s\n", model, cfg.n_layer,
               cfg.n_head, C, T, cfg.vocab, B, threads ? threads : omp_threads(), threads ? "" : " (default)",
               pt_precision_name(prec));
        printf("# blas: %s\n", pt_blas_summary());
        printf("%-34s %12s\n", "kernel", "GFLOP/s");
        double sq = sgemm_gflops(512, 512, 512, 20);
        mlp = sgemm_gflops(N, 4 * C, C, 20);
        double head = sgemm_gflops(N, cfg.vocab, C, 3);
        printf("%-34s %12.1f\n", "sgemm 512x512x512", sq);
        printf("%-34s %12.1f\n", "sgemm [B*T, C] x [4C, C]^T (fc)", mlp);
        printf("%-34s %12.1f\n", "sgemm [B*T, C] x [V, C]^T (head)", head);
        if (prec == PT_PREC_BF16) {
            if (pt_gemm_bf16_select()) {
                fprintf(stderr, "bench-step: %s\n", pt_errmsg());
                MPI_Finalize();
                return 2;
            }
            bmlp = gemm_bf16_gflops(N, 4 * C, C, 20);
            printf("%-34s %12.1f\n", "bf16 GEMM [B*T, C] x [4C, C]^T (fc)", bmlp);
            printf("%-34s %12.1f\n", "bf16 GEMM [B*T, C] x [V, C]^T (head)", gemm_bf16_gflops(N, cfg.vocab, C, 3));
        }
    }

    pt_plan plan;
    pt_plan_default(&plan);
    plan.precision = prec;
    pt_pctx ctx;
    pt_arena arena;
    pt_arena_init(&arena, be->mem, 0);
    pt_gpt m;
    pt_train tr;
    pt_adamw_cfg opt;
    pt_adamw_default(&opt);
    if (pt_pctx_init(&ctx, MPI_COMM_WORLD, &plan, -1) || pt_gpt_create(&m, &cfg, &ctx, be, &arena, B, T, 1) ||
        pt_train_create(&tr, &m, &opt, NULL)) {
        fprintf(stderr, "bench-step: %s\n", pt_errmsg());
        MPI_Finalize();
        return 1;
    }
    int32_t *tok = malloc(sizeof(int32_t) * (size_t)(N + 1));
    pt_rng r;
    pt_rng_seed(&r, 5, 5);
    for (int i = 0; i <= N; i++) tok[i] = (int32_t)(pt_rng_u64(&r) % (uint64_t)cfg.vocab);
    /* the training step is pt_train_step (lib/train), as in ptrain-run;
     * the forward alone is timed in a second pass for the breakdown */
    double t_step = 0, t_fwd = 0, best = 1e30;
    float loss;
    int rc = PT_OK;
    for (int s = 0; s <= steps && !rc; s++) { /* step 0 warms up and is not timed */
        double t0 = pt_now();
        rc = pt_train_step(&tr, tok, tok + 1, 1e-4f, &loss, NULL);
        if (gpu) pt_cuda_sync(); /* AdamW's kernels may still run after the loss came back */
        double dt = pt_now() - t0;
        if (s) t_step += dt;
        if (s && dt < best) best = dt;
    }
    for (int s = 0; s < steps && !rc; s++) {
        double t0 = pt_now();
        rc = pt_gpt_forward(&m, tok, tok + 1, &loss);
        if (gpu) pt_cuda_sync();
        t_fwd += pt_now() - t0;
    }
    /* one more step through the profiling table (lib/backend/ops_profile.h):
     * the time per op family.  The model and the training step read their
     * ops table through m.ops and tr.ops, swapped for this step only. */
    pt_ops_profile prof;
    double t_prof = 0;
    if (!rc) {
        const pt_ops *plain = m.ops;
        const pt_ops *wrapped = pt_ops_profile_start(&prof, plain, gpu ? profile_sync : NULL);
        m.ops = tr.ops = wrapped;
        double t0 = pt_now();
        rc = pt_train_step(&tr, tok, tok + 1, 1e-4f, &loss, NULL);
        if (gpu) pt_cuda_sync();
        t_prof = pt_now() - t0;
        m.ops = tr.ops = plain;
        pt_ops_profile_stop();
    }
    if (rc) {
        fprintf(stderr, "bench-step: %s\n", pt_errmsg());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    /* the sgemm reference again after the steps, keeping the faster: on a
     * shared machine a neighbour's burst during the first measurement would
     * otherwise inflate the ratio */
    double mlp2 = gpu ? 0 : sgemm_gflops(N, 4 * C, C, 20);
    if (mlp2 > mlp) {
        printf("%-34s %12.1f (re-measured after the steps; used below)\n", "sgemm [B*T, C] x [4C, C]^T (fc)", mlp2);
        mlp = mlp2;
    }
    if (prec == PT_PREC_BF16 && !gpu) {
        double b2 = gemm_bf16_gflops(N, 4 * C, C, 20);
        if (b2 > bmlp) {
            printf("%-34s %12.1f (re-measured after the steps; used below)\n", "bf16 GEMM [B*T, C] x [4C, C]^T (fc)", b2);
            bmlp = b2;
        }
    }
    double ref = prec == PT_PREC_BF16 && bmlp > 0 ? bmlp : mlp; /* the ceiling of this precision's GEMM */
    if (ref <= 0) ref = 1e-30;
    double per = t_step / steps;
    double tps = N / per;
    double gf = tps * pt_gpt_flops_per_token(&cfg, T) / 1e9;
    printf("\n%-12s %10s %14s %10s %12s %12s %14s\n", model, "fwd ms", "bwd+optim ms", "ms/step", "tokens/s",
           "GFLOP/s", prec == PT_PREC_BF16 ? "vs bf16(fc)" : "vs sgemm(fc)");
    printf("%-12s %10.1f %14.1f %10.1f %12.0f %12.1f %13.0f%%\n", "mean", 1e3 * t_fwd / steps, 1e3 * (per - t_fwd / steps),
           1e3 * per, tps, gf, 100.0 * gf / ref);
    double btps = N / best, bgf = btps * pt_gpt_flops_per_token(&cfg, T) / 1e9;
    printf("%-12s %10s %14s %10.1f %12.0f %12.1f %13.0f%%\n", "best step", "", "", 1e3 * best, btps, bgf, 100.0 * bgf / ref);
    /* fp32 master, gradient, AdamW m and v; bf16 adds the 2-byte work copy */
    const double pbytes = prec == PT_PREC_BF16 ? 18.0 : 16.0;
    printf("peak memory %.1f MiB (params+grads+adam%s %.1f MiB)\n", arena.peak / 1048576.0,
           prec == PT_PREC_BF16 ? "+bf16 copy" : "", m.nfloats * pbytes / 1048576.0);
    /* the profiled step by op family */
    printf("\n%-16s %8s %10s %7s %10s %9s\n", "op family", "calls", "ms/step", "share", "GFLOP/s", "GB/s");
    double in_ops = 0;
    char fams[512] = "";
    size_t fl = 0;
    for (int f = 0; f < PT_OPF_N; f++) {
        const pt_op_family_stats *st = &prof.fam[f];
        in_ops += st->seconds;
        if (!st->calls) continue;
        char rate[16] = "", bw[16] = "";
        if (st->seconds > 0 && pt_op_family_compute(f)) snprintf(rate, sizeof rate, "%.1f", st->flops / st->seconds / 1e9);
        if (st->seconds > 0) snprintf(bw, sizeof bw, "%.1f", st->bytes / st->seconds / 1e9);
        printf("%-16s %8ld %10.1f %6.1f%% %10s %9s\n", pt_op_family_name(f), st->calls, 1e3 * st->seconds,
               100 * st->seconds / t_prof, rate, bw);
        if (fl < sizeof fams)
            fl += (size_t)snprintf(fams + fl, sizeof fams - fl, " %s_ms=%.2f", pt_op_family_name(f), 1e3 * st->seconds);
    }
    printf("%-16s %8s %10.1f %6.1f%%   (communication, ptrain's own code between the ops)\n", "outside the ops", "",
           1e3 * (t_prof - in_ops), 100 * (t_prof - in_ops) / t_prof);
    printf("%-16s %8s %10.1f %7s   (one step through the profiling table%s)\n", "profiled step", "", 1e3 * t_prof, "",
           gpu ? ", synchronised around every op" : "");
    printf("profile:%s other_ms=%.2f step_ms=%.2f\n", fams, 1e3 * (t_prof - in_ops), 1e3 * t_prof);
    char mfu[64] = "";
    if (gpu) /* dense peaks of an H100/H200 SXM (NVIDIA's data sheets), GFLOP/s */
        snprintf(mfu, sizeof mfu, " device=cuda mfu=%.1f", 100.0 * bgf / (prec == PT_PREC_BF16 ? 989.4e3 : 66.9e3));
    printf("result: tok_s=%.1f mean_tok_s=%.1f gflops=%.2f sgemm_fc=%.2f pct_sgemm=%.1f precision=%s gemm_fc=%.2f "
           "peak_mib=%.1f%s\n", btps, tps, bgf, mlp, mlp > 0 ? 100.0 * bgf / mlp : 0.0, pt_precision_name(prec), ref,
           arena.peak / 1048576.0, mfu);
    free(tok);
    pt_train_free(&tr);
    pt_gpt_free(&m);
    pt_pctx_free(&ctx);
    MPI_Finalize();
    return 0;
}
