/* bench-gemm-bf16: the bf16 GEMM implementations (lib/backend/gemm_bf16.h)
 * side by side with fp32 sgemm, on the matmul shapes of a training step.
 *
 *   usage: bench-gemm-bf16 [--model small|gpt2-124M|all] [--rows N]
 *                          [--threads 1,2,...] [--min-time S] [--clock wall|cpu] [--help]
 *
 * For each linear layer of the model (qkv C->3C, attproj C->C, fc C->4C,
 * fcproj 4C->C, head C->V) and each of its three GEMMs,
 *   fwd   out[N,OC] = inp[N,C] w[OC,C]^T + bias  bf16 C (head: fp32, no bias)
 *   dinp  dinp[N,C] += dout[N,OC] w[OC,C]        fp32 C, beta 1
 *   dw    dw[OC,C]  += dout[N,OC]^T inp[N,C]     fp32 C, beta 1
 * with N = rows (B*T: default 8*128 for small, the bench preset, and
 * 1*1024 for gpt2-124M), prints GFLOP/s (2 M N K per call; best of at least
 * 3 calls and --min-time seconds, default 0.2, after one warm-up call that
 * also builds oneDNN's primitive) of: fp32 cblas_sgemm on fp32 copies of the
 * operands (the fp32 step's GEMM), then each bf16 implementation (onednn,
 * sbgemm, sgemm on converted tiles; "-" when it cannot run here, the reason
 * in the header), and the best bf16 rate over fp32.  A "total" row per
 * model and thread count gives the rate over all of its GEMMs (sum of flops
 * over sum of best times), the figure the selection rule is made from.
 * Thread counts: default 1 and all cores (omp_get_num_procs), set through
 * the cpu backend (OpenMP and OpenBLAS alike).  oneDNN's ISA can be capped
 * with DNNL_MAX_CPU_ISA (e.g. avx512_core_bf16, avx512_core) to measure the
 * other bf16 ISA classes on an AMX machine.  --clock cpu times 1-thread
 * cells by the process's CPU time instead of the wall clock (on a shared
 * machine a call preempted part of the way keeps its CPU time).
 *
 * A program to run by hand, not a test: it asserts nothing about time.
 */
#include "backend/blas.h"
#include "backend/gemm_bf16.h"
#include "backend/ops.h"
#include "core/core.h"
#include "model/gpt.h"
#include "bench_opts.h"

#include <cblas.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { NCOL = PT_GEMM_BF16_NIMPL }; /* column 0: fp32 sgemm; 1..: the bf16 implementations */

typedef struct shape {
    const char *layer, *form;
    int ta, tb, M, N, K, ctype, bias;
    float beta;
} shape;

static double min_time = 0.2;

/* operands, big enough for every shape of a model */
static pt_bf16 *Ah, *Bh, *Ch;
static float *Af, *Bf, *Cf, *bias;

static int run(int col, const shape *s)
{
    const int lda = s->ta ? s->M : s->K, ldb = s->tb ? s->K : s->N;
    if (col == 0) {
        cblas_sgemm(CblasRowMajor, s->ta ? CblasTrans : CblasNoTrans, s->tb ? CblasTrans : CblasNoTrans, s->M, s->N,
                    s->K, 1.0f, Af, lda, Bf, ldb, s->beta, Cf, s->N);
        if (s->bias) /* as the fp32 step's matmul_fwd: a threaded pass after the GEMM */
#pragma omp parallel for schedule(static)
            for (int m = 0; m < s->M; m++)
                for (int n = 0; n < s->N; n++) Cf[(size_t)m * s->N + n] += bias[n];
        return 0;
    }
    return pt_gemm_bf16_with(col, s->ta, s->tb, s->M, s->N, s->K, 1.0f, Ah, lda, Bh, ldb, s->beta,
                             s->ctype == PT_BF16_OUT_BF16 ? (void *)Ch : (void *)Cf, s->ctype, s->N,
                             s->bias ? bias : NULL);
}

static int use_cpu_clock, cur_threads = 1;

/* the clock: wall (monotonic), or with --clock cpu at 1 thread the
 * process's CPU time: on a shared machine a call preempted for part of its
 * run keeps its wall time but not its CPU time.  (Not at more threads: a
 * library may run a small problem on fewer threads than asked, and
 * spinning OpenMP workers burn CPU time while a preempted one is away.) */
static double now(void)
{
    if (!use_cpu_clock || cur_threads > 1) return pt_now();
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ((double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec) / cur_threads;
}

/* best seconds per call, or -1 when the call fails */
static double best_time(int col, const shape *s)
{
    if (run(col, s)) return -1; /* warm-up (and oneDNN's primitive) */
    double best = INFINITY, t_all = 0;
    for (int r = 0; r < 3 || t_all < min_time; r++) {
        double t0 = now(), w0 = pt_now();
        run(col, s);
        double dt = now() - t0;
        t_all += pt_now() - w0;
        if (dt < best) best = dt;
        if (r > 1000) break;
    }
    return best;
}

static void fill(size_t n, pt_rng *r)
{
    for (size_t i = 0; i < n; i++) {
        Af[i] = (float)pt_rng_normal(r), Bf[i] = (float)pt_rng_normal(r);
        Ah[i] = pt_f32_to_bf16(Af[i]), Bh[i] = pt_f32_to_bf16(Bf[i]);
        Af[i] = pt_bf16_to_f32(Ah[i]), Bf[i] = pt_bf16_to_f32(Bh[i]);
        Cf[i] = 0, Ch[i] = 0;
    }
}

static int bench_model(const char *model, int rows, const int *threads, int nthreads, const pt_backend *be)
{
    pt_gpt_config cfg;
    if (pt_gpt_preset(model, &cfg)) {
        fprintf(stderr, "bench-gemm-bf16: %s\n", pt_errmsg());
        return 2;
    }
    const int C = cfg.n_embd, V = cfg.vocab;
    const int N = rows > 0 ? rows : strcmp(model, "small") == 0 ? 8 * cfg.seq_len : cfg.seq_len;
    const struct { const char *name; int in, out; } layers[] = {
        {"qkv", C, 3 * C}, {"attproj", C, C}, {"fc", C, 4 * C}, {"fcproj", 4 * C, C}, {"head", C, V}};
    enum { NL = 5 };
    shape sh[3 * NL];
    size_t maxel = 0;
    for (int l = 0; l < NL; l++) {
        const int in = layers[l].in, out = layers[l].out, head = l == NL - 1;
        sh[3 * l + 0] =
            (shape){layers[l].name, "fwd", 0, 1, N, out, in, head ? PT_BF16_OUT_F32 : PT_BF16_OUT_BF16, !head, 0};
        sh[3 * l + 1] = (shape){layers[l].name, "dinp", 0, 0, N, in, out, PT_BF16_OUT_F32, 0, 1};
        sh[3 * l + 2] = (shape){layers[l].name, "dw", 1, 0, out, in, N, PT_BF16_OUT_F32, 0, 1};
        size_t e[3] = {(size_t)N * out, (size_t)out * in, (size_t)N * in};
        for (int i = 0; i < 3; i++) maxel = e[i] > maxel ? e[i] : maxel;
    }
    Ah = malloc(sizeof(pt_bf16) * maxel), Bh = malloc(sizeof(pt_bf16) * maxel), Ch = malloc(sizeof(pt_bf16) * maxel);
    Af = malloc(sizeof(float) * maxel), Bf = malloc(sizeof(float) * maxel), Cf = malloc(sizeof(float) * maxel);
    bias = malloc(sizeof(float) * (size_t)(V > 4 * C ? V : 4 * C));
    if (!Ah || !Bh || !Ch || !Af || !Bf || !Cf || !bias) {
        fprintf(stderr, "bench-gemm-bf16: out of memory for %zu-element operands\n", maxel);
        return 1;
    }
    pt_rng r;
    pt_rng_seed(&r, 3, 3);
    fill(maxel, &r);
    for (int i = 0; i < (V > 4 * C ? V : 4 * C); i++) bias[i] = (float)pt_rng_normal(&r);

    printf("\n## %s: L=%d C=%d V=%d, rows N=%d\n", model, cfg.n_layer, C, V, N);
    printf("# oneDNN implementations: fwd %s", pt_gemm_bf16_onednn_impl(0, 1, N, 4 * C, C, PT_BF16_OUT_BF16));
    printf(", dinp %s", pt_gemm_bf16_onednn_impl(0, 0, N, C, 4 * C, PT_BF16_OUT_F32));
    printf(", dw %s (fc)\n", pt_gemm_bf16_onednn_impl(1, 0, 4 * C, C, N, PT_BF16_OUT_F32));
    printf("%-9s %-5s %-20s %-7s %3s %9s %9s %9s %9s %12s\n", "layer", "form", "M x N x K", "C", "thr", "fp32",
           "onednn", "sbgemm", "sgemm-bf", "best/fp32");
    for (int t = 0; t < nthreads; t++) {
        be->set_threads(threads[t]);
        cur_threads = threads[t];
        double tsum[NCOL] = {0}, fsum = 0;
        int ok[NCOL];
        for (int c = 0; c < NCOL; c++) ok[c] = c == 0 || pt_gemm_bf16_available(c, NULL, 0);
        for (int i = 0; i < 3 * NL; i++) {
            const shape *s = &sh[i];
            const double flops = 2.0 * s->M * s->N * (double)s->K;
            char dims[32], cdesc[16];
            snprintf(dims, sizeof dims, "%dx%dx%d", s->M, s->N, s->K);
            snprintf(cdesc, sizeof cdesc, "%s%s", s->ctype == PT_BF16_OUT_BF16 ? "bf16" : "f32",
                     s->bias ? "+b" : s->beta != 0 ? "+=" : "");
            printf("%-9s %-5s %-20s %-7s %3d", s->layer, s->form, dims, cdesc, threads[t]);
            double best_bf = 0;
            int best_c = 0;
            fsum += flops;
            double g0 = 0;
            for (int c = 0; c < NCOL; c++) {
                double sec = ok[c] ? best_time(c, s) : -1;
                if (sec <= 0) {
                    if (ok[c]) {
                        fprintf(stderr, "bench-gemm-bf16: %s\n", pt_errmsg());
                        ok[c] = 0;
                    }
                    printf(" %9s", "-");
                    continue;
                }
                tsum[c] += sec;
                const double g = flops / sec * 1e-9;
                printf(" %9.1f", g);
                if (c == 0) g0 = g;
                else if (g > best_bf) best_bf = g, best_c = c;
            }
            if (best_c) printf(" %5.2fx %-6s\n", best_bf / g0, pt_gemm_bf16_impl_name(best_c));
            else printf("\n");
            fflush(stdout);
        }
        printf("%-9s %-5s %-20s %-7s %3d", "total", "all", "", "", threads[t]);
        double best_bf = 0, g0 = fsum / tsum[0] * 1e-9;
        int best_c = 0;
        for (int c = 0; c < NCOL; c++) {
            if (!ok[c]) {
                printf(" %9s", "-");
                continue;
            }
            const double g = fsum / tsum[c] * 1e-9;
            printf(" %9.1f", g);
            if (c && g > best_bf) best_bf = g, best_c = c;
        }
        if (best_c) printf(" %5.2fx %-6s\n", best_bf / g0, pt_gemm_bf16_impl_name(best_c));
        else printf("\n");
    }
    free(Ah), free(Bh), free(Ch), free(Af), free(Bf), free(Cf), free(bias);
    return 0;
}

int main(int argc, char **argv)
{
    const char *model = "all", *clock_name = "wall";
    int rows = 0, threads[BENCH_INTS_MAX], nthreads = 0;
    bench_ints tlist = {0};
    char model_help[256];
    snprintf(model_help, sizeof model_help, "all (small and gpt2-124M) or a model preset: %s", pt_gpt_preset_names());
    const bench_opt opts[] = {
        {"model", BENCH_STR, 0, 0, &model, "NAME", model_help, NULL},
        {"rows", BENCH_INT, 0, 1048576, &rows, "N", "rows N of the GEMMs (B*T), 0: the model's own",
         "0: 8*128 for small, 1*1024 for gpt2-124M"},
        {"threads", BENCH_INTS, 1, 4096, &tlist, "LIST", "comma-separated thread counts",
         "1 and all cores"},
        {"min-time", BENCH_DOUBLE, 0, 3600, &min_time, "S", "seconds each cell is timed for at least", NULL},
        {"clock", BENCH_CHOICE, 0, 0, &clock_name, "wall|cpu", "cpu: time 1-thread cells by the process's CPU time", NULL},
        {0}};
    bench_opts_parse(argc, argv, "bench-gemm-bf16", "bench-gemm-bf16 [options]",
                     "The bf16 GEMM implementations beside fp32 sgemm on the matmul shapes of a training step (GFLOP/s).",
                     opts);
    use_cpu_clock = !strcmp(clock_name, "cpu");
    for (int i = 0; i < tlist.n; i++) threads[nthreads++] = tlist.v[i];
    pt_gpt_config cfg;
    if (strcmp(model, "all") && pt_gpt_preset(model, &cfg)) {
        fprintf(stderr, "bench-gemm-bf16: --model: %s; or all\n", pt_errmsg());
        return 2;
    }
    if (!nthreads) {
        threads[nthreads++] = 1;
#ifdef _OPENMP
        if (omp_get_num_procs() > 1) threads[nthreads++] = omp_get_num_procs();
#endif
    }
    const pt_backend *be = pt_backend_get("cpu");
    printf("# bench-gemm-bf16: GFLOP/s (2 M N K per call), best of >= 3 calls and >= %.2f s per cell, %s\n", min_time,
           use_cpu_clock ? "CPU-time clock at 1 thread, wall clock at more" : "wall clock");
    printf("# blas: %s\n", pt_blas_summary());
    printf("# bf16 ISA class %s (CPU %s)\n", pt_bf16_isa_name(pt_bf16_isa()), pt_bf16_isa_name(pt_bf16_cpu_isa()));
    for (int c = 1; c < NCOL; c++) {
        char why[200];
        if (!pt_gemm_bf16_available(c, why, sizeof why)) printf("# %s: not run: %s\n", pt_gemm_bf16_impl_name(c), why);
    }
    printf(
        "# columns: fp32 = cblas_sgemm on fp32 operands; onednn, sbgemm, sgemm-bf = pt_gemm_bf16 with bf16 operands\n");
    int rc = 0;
    if (!strcmp(model, "all")) {
        rc = bench_model("small", rows, threads, nthreads, be);
        if (!rc) rc = bench_model("gpt2-124M", rows, threads, nthreads, be);
    } else {
        rc = bench_model(model, rows, threads, nthreads, be);
    }
    return rc;
}
