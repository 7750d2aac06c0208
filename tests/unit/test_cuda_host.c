/* SPDX-License-Identifier: MIT */
/* The CUDA backend's host-side logic on the CPU, in every build (no GPU,
 * no CUDA header): lib/backend/cuda/host.c (the device a rank takes, the
 * device allocator's block table, the versions line) and gemm_plan.c (how
 * each of ops.h's matmuls becomes one column-major cuBLASLt problem, which
 * epilogue it fuses and when not, the cache key).  The GEMM mapping is
 * checked by carrying out each plan's column-major problem with a naive
 * loop on random inputs and comparing it with the row-major formula of
 * ops.h, so a wrong transpose, leading dimension or role fails here before
 * any GPU runs it. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/cuda/gemm_plan.h"
#include "backend/cuda/host.h"
#include "core/core.h"
#include "tests/tap.h"

static uint64_t rng_state;
static double urand(void) /* [-1, 1) */
{
    rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (double)(rng_state >> 11) / (double)(1ULL << 52) - 1.0;
}

/* ---- device choice -------------------------------------------------------------------- */

static void test_local_rank(void)
{
    static const char *const vars[] = {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "MPI_LOCALRANKID"};
    for (size_t i = 0; i < 4; i++) unsetenv(vars[i]);
    int r = -1;
    tap_ok(pt_cuda_local_rank(&r) == PT_OK && r == 0, "no local-rank variable: local rank 0 (got %d)", r);
    setenv("SLURM_LOCALID", "5", 1);
    setenv("MPI_LOCALRANKID", "7", 1);
    tap_ok(pt_cuda_local_rank(&r) == PT_OK && r == 5, "SLURM_LOCALID=5 before MPI_LOCALRANKID=7: %d", r);
    setenv("OMPI_COMM_WORLD_LOCAL_RANK", "3", 1);
    tap_ok(pt_cuda_local_rank(&r) == PT_OK && r == 3, "Open MPI's local rank 3 before Slurm's: %d", r);
    setenv("LOCAL_RANK", "", 1);
    tap_ok(pt_cuda_local_rank(&r) == PT_OK && r == 3, "an empty LOCAL_RANK is not set: %d", r);
    setenv("LOCAL_RANK", "2", 1);
    tap_ok(pt_cuda_local_rank(&r) == PT_OK && r == 2, "the plugin's LOCAL_RANK=2 comes first: %d", r);
    setenv("LOCAL_RANK", "two", 1);
    int rc = pt_cuda_local_rank(&r);
    tap_ok(rc == PT_EINVAL && strstr(pt_errmsg(), "LOCAL_RANK") && strstr(pt_errmsg(), "'two'") &&
               !strchr(pt_errmsg(), '\n'),
           "LOCAL_RANK=two is refused naming the variable and value: %s", pt_errmsg());
    setenv("LOCAL_RANK", "-1", 1);
    tap_ok(pt_cuda_local_rank(&r) == PT_EINVAL, "LOCAL_RANK=-1 is refused: %s", pt_errmsg());
    for (size_t i = 0; i < 4; i++) unsetenv(vars[i]);

    int ok = 1;
    for (int ndev = 1; ndev <= 8; ndev++)
        for (int local = 0; local < 3 * ndev; local++) {
            int d = pt_cuda_pick_device(ndev, local);
            ok &= d >= 0 && d < ndev && d == local % ndev;
            /* the tasks of a node spread over the devices: task local and
             * local + ndev share one, neighbours do not */
            if (ndev > 1 && local + 1 < 3 * ndev) ok &= d != pt_cuda_pick_device(ndev, local + 1);
        }
    tap_ok(ok, "pick_device: local rank i of a node with n visible devices takes device i mod n (n = 1..8)");
    tap_ok(pt_cuda_pick_device(0, 0) == -1 && pt_cuda_pick_device(4, -1) == -1, "pick_device: no devices, or a "
           "negative local rank, give -1");
}

/* ---- the block table ----------------------------------------------------------------------- */

static void test_ptrmap(void)
{
    pt_ptrmap m;
    memset(&m, 0, sizeof m);
    size_t got = 7;
    tap_ok(pt_ptrmap_take(&m, (void *)(uintptr_t)0x1000, &got) == 0 && got == 7,
           "an empty table has no block and writes nothing");
    /* random puts and takes against a plain array as the reference: block
     * addresses as cudaMalloc makes them (256-byte aligned, clustered) */
    enum { NB = 3000 };
    static uintptr_t addr[NB];
    static size_t size[NB];
    static int live[NB];
    int ok = 1, nlive = 0;
    for (int i = 0; i < NB; i++) {
        addr[i] = (uintptr_t)0x7f0000000000 + 256 * ((uintptr_t)i * 8 + (uintptr_t)(i % 7)); /* distinct */
        size[i] = (size_t)(urand() * 1e6 + 2e6);
        live[i] = 0;
    }
    for (int step = 0; step < 40000 && ok; step++) {
        int i = (int)((urand() + 1) * 0.5 * NB) % NB;
        if (!live[i]) {
            ok &= pt_ptrmap_put(&m, (void *)addr[i], size[i]) == PT_OK;
            live[i] = 1, nlive++;
        } else {
            size_t b = 0;
            ok &= pt_ptrmap_take(&m, (void *)addr[i], &b) == 1 && b == size[i];
            live[i] = 0, nlive--;
        }
        ok &= m.n == (size_t)nlive && m.n * 2 <= m.cap;
    }
    tap_ok(ok, "40000 random puts and takes of 3000 blocks agree with the reference (%zu live, %zu slots)", m.n, m.cap);
    /* every live block is found with its size, every dead one is not */
    int found = 1;
    for (int i = 0; i < NB; i++) {
        size_t b = 0;
        int t = pt_ptrmap_take(&m, (void *)addr[i], &b);
        found &= live[i] ? t == 1 && b == size[i] : t == 0;
    }
    tap_ok(found && m.n == 0, "after them, each block is found exactly when live (a deletion never hides a later "
           "entry of its probe run)");
    tap_ok(pt_ptrmap_put(&m, (void *)addr[1], 5) == PT_OK && pt_ptrmap_put(&m, (void *)addr[1], 5) == PT_EINVAL,
           "a block recorded twice is refused: %s", pt_errmsg());
    tap_ok(pt_ptrmap_put(&m, NULL, 5) == PT_EINVAL, "a NULL block is refused");
    tap_ok(pt_ptrmap_put(&m, (void *)addr[2], 0) == PT_OK && pt_ptrmap_take(&m, (void *)addr[2], &got) == 1 && got == 0,
           "a 0-byte block is kept (as the host arena's)");
    pt_ptrmap_clear(&m);
    tap_ok(m.cap == 0 && m.n == 0 && !m.key, "clear empties the table");
}

/* ---- versions ------------------------------------------------------------------------------- */

static void test_versions(void)
{
    char v[32];
    pt_cuda_parse_driver("NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.65.06  Sun Jul 27 07:09:46 UTC 2025\n"
                         "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n",
                         v, sizeof v);
    tap_ok(strcmp(v, "580.65.06") == 0, "driver version of the proprietary module: %s", v);
    int ok = pt_cuda_parse_driver("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  575.57.08  Release Build  "
                                  "(dvs-builder@U16-I3-B10-1-4)\n", v, sizeof v);
    tap_ok(ok && strcmp(v, "575.57.08") == 0, "driver version of the open module (\"for x86_64\" skipped): %s", v);
    tap_ok(!pt_cuda_parse_driver("GCC version: 12.2.0\n", v, sizeof v) && v[0] == '\0',
           "no \"Kernel Module\": no version");
    tap_ok(!pt_cuda_parse_driver("Kernel Module\nGCC version 12.2.0", v, sizeof v),
           "the version must be on the Kernel Module line");
    tap_ok(!pt_cuda_parse_driver(NULL, v, sizeof v), "no text: no version");
    char small[4];
    tap_ok(!pt_cuda_parse_driver("Kernel Module 580.65.06", small, sizeof small) && small[0] == '\0',
           "a version longer than the buffer is not cut");

    char t[32];
    pt_cuda_version_text('c', 13000, t, sizeof t);
    ok = strcmp(t, "13.0") == 0;
    pt_cuda_version_text('c', 12080, t, sizeof t);
    ok &= strcmp(t, "12.8") == 0;
    pt_cuda_version_text('b', 130100, t, sizeof t);
    ok &= strcmp(t, "13.1.0") == 0;
    pt_cuda_version_text('d', 91900, t, sizeof t);
    ok &= strcmp(t, "9.19.0") == 0;
    pt_cuda_version_text('d', 8907, t, sizeof t);
    ok &= strcmp(t, "8.9.7") == 0;
    pt_cuda_version_text('n', 22809, t, sizeof t);
    ok &= strcmp(t, "2.28.9") == 0;
    pt_cuda_version_text('n', 2804, t, sizeof t);
    ok &= strcmp(t, "2.8.4") == 0;
    pt_cuda_version_text('b', 0, t, sizeof t);
    ok &= strcmp(t, "none") == 0;
    tap_ok(ok, "version codes: CUDA 13000 = 13.0, cuBLASLt 130100 = 13.1.0, cuDNN 91900 = 9.19.0 (8907 = 8.9.7), "
               "NCCL 22809 = 2.28.9 (2804 = 2.8.4), 0 = none");

    pt_cuda_info info;
    memset(&info, 0, sizeof info);
    snprintf(info.gpu, sizeof info.gpu, "NVIDIA H100 80GB HBM3");
    info.sm = 90;
    info.mem_bytes = 85e9;
    snprintf(info.driver, sizeof info.driver, "580.65.06");
    info.driver_api = 13000, info.runtime = 13000, info.cublaslt = 130100, info.cudnn = 91900, info.nccl = 22809;
    char line[512];
    size_t n = pt_cuda_info_format(&info, line, sizeof line);
    tap_ok(n == strlen(line) &&
               strcmp(line, "gpu NVIDIA H100 80GB HBM3 (sm_90, 79.2 GiB), driver 580.65.06 (CUDA 13.0), CUDA runtime "
                            "13.0, cuBLASLt 13.1.0, cuDNN 9.19.0, NCCL 2.28.9") == 0,
           "the versions line: %s", line);
    memset(&info, 0, sizeof info);
    snprintf(info.why, sizeof info.why, "no CUDA device visible (cudaGetDeviceCount: no driver)");
    info.runtime = 13000, info.cublaslt = 130100;
    pt_cuda_info_format(&info, line, sizeof line);
    tap_ok(strstr(line, "gpu none (no CUDA device visible") && strstr(line, "driver CUDA none") &&
               strstr(line, "cuDNN not built") && strstr(line, "NCCL not built") && !strchr(line, '\n'),
           "without a device or the optional libraries the line says so: %s", line);
    char tiny[16];
    n = pt_cuda_info_format(&info, tiny, sizeof tiny);
    tap_ok(n > sizeof tiny && strlen(tiny) == sizeof tiny - 1, "a short buffer gets a cut line and the length needed");
}

/* ---- GEMM plans ------------------------------------------------------------------------------ */

/* Carry out plan p's column-major problem naively in double: D = op(A)
 * op(B) + beta D, A and B as stored with their leading dimensions.  This
 * is what cuBLASLt computes (before the epilogue). */
static void run_colmajor(const pt_gemm_plan *p, const double *A, const double *B, double *D)
{
    for (int64_t j = 0; j < p->n; j++)
        for (int64_t i = 0; i < p->m; i++) {
            double s = 0;
            for (int64_t l = 0; l < p->k; l++) {
                double a = p->transa ? A[i * p->lda + l] : A[l * p->lda + i]; /* op(A)[i,l] */
                double b = p->transb ? B[l * p->ldb + j] : B[j * p->ldb + l]; /* op(B)[l,j] */
                s += a * b;
            }
            D[j * p->ldd + i] = s + p->beta * D[j * p->ldd + i];
        }
}

static double *rnd(size_t n)
{
    double *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++) x[i] = urand();
    return x;
}

static double maxdiff(const double *a, const double *b, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs(a[i] - b[i]));
    return m;
}

/* the operand a plan names for a role */
static const double *role(int r, const double *inp, const double *w, const double *dout)
{
    return r == PT_ROLE_INP ? inp : r == PT_ROLE_W ? w : dout;
}

static void test_gemm_mapping(void)
{
    /* odd sizes, fresh each run */
    const int N = 5 + (int)((urand() + 1) * 10), C = 3 + (int)((urand() + 1) * 9), OC = 4 + (int)((urand() + 1) * 11);
    double *inp = rnd((size_t)N * C), *w = rnd((size_t)OC * C), *dout = rnd((size_t)N * OC);
    /* room for any of the three results: [N, OC], [N, C], [OC, C] */
    size_t most = (size_t)N * OC;
    if ((size_t)N * C > most) most = (size_t)N * C;
    if ((size_t)OC * C > most) most = (size_t)OC * C;
    double *ref = rnd((size_t)N * OC), *got = malloc(sizeof(double) * most);
    pt_gemm_plan p;
    /* forward, beta 1: out[n,o] = sum_c inp[n,c] w[o,c] + out[n,o] (row-major, ops.h) */
    tap_ok(pt_gemm_plan_fwd(&p, PT_GEMM_F32, N, C, OC, 0, 0, 0, 1.0f, 0) == PT_OK, "forward plan (N=%d C=%d OC=%d)",
           N, C, OC);
    memcpy(got, ref, sizeof(double) * (size_t)N * OC);
    run_colmajor(&p, role(p.a_role, inp, w, dout), role(p.b_role, inp, w, dout), got);
    for (int n = 0; n < N; n++)
        for (int o = 0; o < OC; o++) {
            double s = ref[n * OC + o];
            for (int c = 0; c < C; c++) s += inp[n * C + c] * w[o * C + c];
            ref[n * OC + o] = s;
        }
    tap_ok(maxdiff(got, ref, (size_t)N * OC) < 1e-12 && p.transa == 1 && p.transb == 0 && p.m == OC && p.n == N &&
               p.k == C && p.ldd == OC,
           "forward: out = inp w^T + out as D = out^T [OC,N], A = w (T), B = inp (N) (max diff %.1e)",
           maxdiff(got, ref, (size_t)N * OC));
    /* dinp[n,c] = sum_o dout[n,o] w[o,c] + dinp (DEFAULT accumulates) */
    double *dref = rnd((size_t)N * C);
    tap_ok(pt_gemm_plan_dinp(&p, PT_GEMM_BF16, N, C, OC, 0, 0, 0, 0) == PT_OK && p.beta == 1.0f,
           "dinp plan without DGELU accumulates (beta 1)");
    memcpy(got, dref, sizeof(double) * (size_t)N * C);
    run_colmajor(&p, role(p.a_role, inp, w, dout), role(p.b_role, inp, w, dout), got);
    for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++) {
            double s = dref[n * C + c];
            for (int o = 0; o < OC; o++) s += dout[n * OC + o] * w[o * C + c];
            dref[n * C + c] = s;
        }
    tap_ok(maxdiff(got, dref, (size_t)N * C) < 1e-12 && p.m == C && p.n == N && p.k == OC,
           "dinp: dinp += dout w as D = dinp^T [C,N], A = w (N), B = dout (N) (max diff %.1e)",
           maxdiff(got, dref, (size_t)N * C));
    /* dw[o,c] += sum_n dout[n,o] inp[n,c] */
    double *wref = rnd((size_t)OC * C);
    tap_ok(pt_gemm_plan_dw(&p, PT_GEMM_BF16, N, C, OC, 1, 0) == PT_OK && p.d_elem == PT_GEMM_F32 &&
               p.ab_elem == PT_GEMM_BF16 && p.beta == 1.0f,
           "dw plan: bf16 operands, an fp32 (ACC) gradient accumulated");
    memcpy(got, wref, sizeof(double) * (size_t)OC * C);
    run_colmajor(&p, role(p.a_role, inp, w, dout), role(p.b_role, inp, w, dout), got);
    for (int o = 0; o < OC; o++)
        for (int c = 0; c < C; c++) {
            double s = wref[o * C + c];
            for (int n = 0; n < N; n++) s += dout[n * OC + o] * inp[n * C + c];
            wref[o * C + c] = s;
        }
    tap_ok(maxdiff(got, wref, (size_t)OC * C) < 1e-12 && p.transa == 0 && p.transb == 1 && p.m == C && p.n == OC &&
               p.k == N,
           "dw: dw += dout^T inp as D = dw^T [C,OC], A = inp (N), B = dout (T) (max diff %.1e)",
           maxdiff(got, wref, (size_t)OC * C));
    tap_ok(p.lt_epi == PT_LT_BGRADB && p.bias_len == OC && p.bias_elem == PT_GEMM_F32 && p.bias_accum,
           "dw's bias gradient is BGRADB over D's columns (OC), fp32, written to scratch and accumulated");
    tap_ok(p.a_rows == C && p.a_cols == N && p.lda == C && p.b_rows == OC && p.b_cols == N && p.ldb == OC,
           "dw's operands as stored: A [C,N] ld C, B [OC,N] ld OC (column-major)");
    free(inp), free(w), free(dout), free(ref), free(got), free(dref), free(wref);
}

static void test_gemm_epilogues(void)
{
    pt_gemm_plan p;
    struct {
        int bias, gelu, aux, want;
    } fw[] = {{0, 0, 0, PT_LT_DEFAULT}, {1, 0, 0, PT_LT_BIAS},     {0, 1, 0, PT_LT_GELU},
              {1, 1, 0, PT_LT_GELU_BIAS}, {0, 1, 1, PT_LT_GELU_AUX}, {1, 1, 1, PT_LT_GELU_AUX_BIAS}};
    int ok = 1;
    for (size_t i = 0; i < sizeof fw / sizeof fw[0]; i++) {
        ok &= pt_gemm_plan_fwd(&p, PT_GEMM_BF16, 64, 768, 3072, fw[i].bias, fw[i].gelu, fw[i].aux, 0.0f, 0) == PT_OK;
        ok &= p.fused && p.lt_epi == fw[i].want && p.has_bias == fw[i].bias;
        ok &= fw[i].bias ? p.bias_elem == PT_GEMM_BF16 && p.bias_len == 3072 && !p.bias_accum : p.bias_elem == -1;
        ok &= fw[i].aux ? p.aux_ld == 3072 : p.aux_ld == 0;
    }
    tap_ok(ok, "forward epilogues: none BIAS GELU GELU_BIAS GELU_AUX GELU_AUX_BIAS, bias over OC of the ACT type, "
               "aux leading dimension OC");
    tap_ok(pt_gemm_plan_fwd(&p, PT_GEMM_F32, 64, 768, 3070, 1, 1, 1, 0.0f, 0) == PT_OK && !p.fused &&
               p.lt_epi == PT_LT_DEFAULT && p.aux_ld == 0 && p.bias_elem == -1 && p.has_bias && p.gelu && p.has_aux &&
               strstr(p.why, "3070") && strstr(p.why, "multiple of 8"),
           "GELU_AUX with OC=3070 (not a multiple of 8): the plain GEMM and the kernels, why: %s", p.why);
    tap_ok(pt_gemm_plan_fwd(&p, PT_GEMM_F32, 64, 768, 3070, 1, 1, 0, 0.0f, 0) == PT_OK && p.fused &&
               p.lt_epi == PT_LT_GELU_BIAS,
           "without aux, OC=3070 stays fused (the rule is the aux matrix's)");
    tap_ok(pt_gemm_plan_dinp(&p, PT_GEMM_BF16, 64, 3072, 768, 1, 1, 1, 0) == PT_OK && p.fused &&
               p.lt_epi == PT_LT_DGELU_BGRAD && p.beta == 0.0f && p.aux_ld == 3072 && p.bias_len == 3072 &&
               p.bias_elem == PT_GEMM_F32 && p.bias_accum,
           "dinp with DGELU and dbias_aux: DGELU_BGRAD, written (beta 0), aux ld C, an fp32 bias gradient over C");
    tap_ok(pt_gemm_plan_dinp(&p, PT_GEMM_F32, 64, 3072, 768, 1, 1, 0, 0) == PT_OK && p.lt_epi == PT_LT_DGELU &&
               p.bias_elem == -1,
           "dinp with DGELU alone: DGELU");
    tap_ok(pt_gemm_plan_dinp(&p, PT_GEMM_F32, 64, 3071, 768, 1, 1, 1, 0) == PT_OK && !p.fused && p.dgelu &&
               p.has_dbias && p.beta == 0.0f && p.lt_epi == PT_LT_DEFAULT,
           "DGELU with C=3071: unfused, still written (beta 0) for the kernel to finish");
    tap_ok(pt_gemm_plan_dw(&p, PT_GEMM_F32, 64, 768, 3072, 0, 0) == PT_OK && p.lt_epi == PT_LT_DEFAULT &&
               p.bias_elem == -1,
           "dw without dbias: DEFAULT");
    tap_ok(pt_gemm_plan_fwd(&p, PT_GEMM_F32, 8, 8, 8, 0, 0, 0, 0.0f, 1) == PT_OK && p.tf32 &&
               pt_gemm_plan_fwd(&p, PT_GEMM_BF16, 8, 8, 8, 0, 0, 0, 0.0f, 1) == PT_OK && !p.tf32,
           "TF32 applies to fp32 inputs only");
    pt_gemm_plan_fwd(&p, PT_GEMM_F32, 64, 768, 3072, 1, 1, 1, 1.0f, 0);
    pt_gemm_plan_unfuse(&p, "test %d", 42);
    tap_ok(!p.fused && p.lt_epi == PT_LT_DEFAULT && p.beta == 1.0f && p.has_bias && p.gelu && p.has_aux &&
               strcmp(p.why, "test 42") == 0,
           "unfuse keeps what the op asks for (bias, GELU, aux, beta) for the kernels");

    /* bad arguments: PT_EINVAL, one line naming the value */
    const int bad[] = {
        pt_gemm_plan_fwd(&p, 7, 8, 8, 8, 0, 0, 0, 0.0f, 0),                     /* element type */
        pt_gemm_plan_fwd(&p, PT_GEMM_F32, 0, 8, 8, 0, 0, 0, 0.0f, 0),           /* N = 0 */
        pt_gemm_plan_fwd(&p, PT_GEMM_F32, 8, (1 << 24) + 1, 8, 0, 0, 0, 0.0f, 0), /* C > 2^24 */
        pt_gemm_plan_fwd(&p, PT_GEMM_F32, 8, 8, 8, 0, 0, 0, 0.5f, 0),           /* beta 0.5 */
        pt_gemm_plan_fwd(&p, PT_GEMM_F32, 8, 8, 8, 0, 0, 1, 0.0f, 0),           /* aux without GELU */
        pt_gemm_plan_dinp(&p, PT_GEMM_F32, 8, 8, 8, 1, 0, 0, 0),                /* DGELU without aux */
        pt_gemm_plan_dinp(&p, PT_GEMM_F32, 8, 8, 8, 0, 0, 1, 0),                /* dbias_aux without DGELU */
        pt_gemm_plan_dw(&p, PT_GEMM_F32, 8, 8, -3, 0, 0),                       /* OC < 1 */
    };
    int all = 1;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) all &= bad[i] == PT_EINVAL;
    tap_ok(all, "bad element type, sizes, beta, aux and dbias combinations are PT_EINVAL");
    pt_gemm_plan_fwd(&p, PT_GEMM_F32, 8, 8, 8, 0, 0, 0, 0.5f, 0);
    tap_ok(strstr(pt_errmsg(), "beta 0.5") && strstr(pt_errmsg(), "valid") && !strchr(pt_errmsg(), '\n'),
           "the message names the value and what is valid: %s", pt_errmsg());
    pt_gemm_plan_dw(&p, PT_GEMM_F32, 8, 8, -3, 0, 0);
    tap_ok(strstr(pt_errmsg(), "OC=-3") && strstr(pt_errmsg(), "valid"), "%s", pt_errmsg());
    tap_ok(strcmp(pt_lt_epi_name(PT_LT_GELU_AUX_BIAS), "GELU_AUX_BIAS") == 0 && strcmp(pt_lt_epi_name(-1), "?") == 0 &&
               strcmp(pt_lt_epi_name(PT_LT_N), "?") == 0,
           "epilogue names");
}

static void test_gemm_key(void)
{
    tap_ok(pt_gemm_align(NULL) == 0 && pt_gemm_align((void *)(uintptr_t)0x7f0000000100) == 256 &&
               pt_gemm_align((void *)(uintptr_t)0x7f0000000104) == 4 &&
               pt_gemm_align((void *)(uintptr_t)0x7f0000000110) == 16 &&
               pt_gemm_align((void *)(uintptr_t)0x7f0000000002) == 2 &&
               pt_gemm_align((void *)(uintptr_t)0x7f0000001000) == 256,
           "alignment: the largest power of two up to 256 dividing the address");
    pt_gemm_plan p, q;
    pt_gemm_key a, b;
    char *base = (char *)(uintptr_t)0x7f0000100000;
    pt_gemm_plan_fwd(&p, PT_GEMM_BF16, 64, 768, 2304, 1, 0, 0, 0.0f, 0);
    pt_gemm_key_of(&p, base, base + 4096, base + 8192, base + 16384, NULL, &a);
    /* the same call with other pointers of the same alignment */
    pt_gemm_key_of(&p, base + 256, base + 512, base + 1024, base + 2048, base + 777, &b);
    tap_ok(memcmp(&a, &b, sizeof a) == 0 && pt_gemm_key_hash(&a) == pt_gemm_key_hash(&b),
           "same shape, same alignments: one key (an unused aux pointer does not count)");
    pt_gemm_key_of(&p, base + 2, base + 512, base + 1024, base + 2048, NULL, &b);
    tap_ok(memcmp(&a, &b, sizeof a) != 0, "an operand aligned to 2 bytes instead of 256: another key");
    pt_gemm_key_of(&p, base, base + 4096, base + 8192, base + 16388, NULL, &b);
    tap_ok(memcmp(&a, &b, sizeof a) != 0, "a bias aligned to 4 bytes: another key");
    q = p;
    pt_gemm_plan_unfuse(&q, "x");
    pt_gemm_key_of(&q, base, base + 4096, base + 8192, base + 16384, NULL, &b);
    tap_ok(memcmp(&a, &b, sizeof a) != 0, "the unfused plan of the same shape: another key");
    pt_gemm_plan_fwd(&q, PT_GEMM_BF16, 64, 768, 2304, 1, 0, 0, 1.0f, 0);
    pt_gemm_key_of(&q, base, base + 4096, base + 8192, base + 16384, NULL, &b);
    tap_ok(memcmp(&a, &b, sizeof a) != 0, "beta 1 instead of 0: another key");
    /* unfused plans run the same plain GEMM, but the epilogue kernels that
     * follow differ: the cached plan decides them, so the key must too (on
     * an H200 a plain forward cached first made a later unfused +bias or
     * GELU call of the same shape skip its epilogue) */
    {
        static const int want[][3] = {{0, 0, 0}, {1, 0, 0}, {0, 1, 0}, {1, 1, 0}, {0, 1, 1}, {1, 1, 1}};
        enum { W = sizeof want / sizeof want[0] };
        pt_gemm_key kw[W];
        int distinct = 1;
        for (int i = 0; i < W; i++) {
            pt_gemm_plan_fwd(&q, PT_GEMM_F32, 61, 50, 70, want[i][0], want[i][1], want[i][2], 0.0f, 0);
            pt_gemm_plan_unfuse(&q, "test");
            pt_gemm_key_of(&q, base, base + 4096, base + 8192, NULL, NULL, &kw[i]);
            for (int j = 0; j < i; j++) distinct &= memcmp(&kw[i], &kw[j], sizeof kw[i]) != 0;
        }
        tap_ok(distinct, "unfused forwards without/with bias, GELU, aux: %d keys, all distinct", W);
        pt_gemm_key d0, d1;
        pt_gemm_plan_dinp(&q, PT_GEMM_F32, 61, 70, 50, 1, 1, 0, 0);
        pt_gemm_plan_unfuse(&q, "test");
        pt_gemm_key_of(&q, base, base + 4096, base + 8192, NULL, NULL, &d0);
        pt_gemm_plan_dinp(&q, PT_GEMM_F32, 61, 70, 50, 1, 1, 1, 0);
        pt_gemm_plan_unfuse(&q, "test");
        pt_gemm_key_of(&q, base, base + 4096, base + 8192, NULL, NULL, &d1);
        tap_ok(memcmp(&d0, &d1, sizeof d0) != 0, "unfused DGELU without and with the bias gradient: two keys");
        pt_gemm_plan_dw(&q, PT_GEMM_F32, 61, 50, 70, 0, 0);
        pt_gemm_key_of(&q, base, base + 4096, base + 8192, NULL, NULL, &d0);
        pt_gemm_plan_dw(&q, PT_GEMM_F32, 61, 50, 70, 1, 0);
        pt_gemm_plan_unfuse(&q, "test");
        pt_gemm_key_of(&q, base, base + 4096, base + 8192, NULL, NULL, &d1);
        tap_ok(memcmp(&d0, &d1, sizeof d0) != 0, "dw and the unfused dw with its bias gradient: two keys");
    }
    pt_gemm_plan_fwd(&q, PT_GEMM_F32, 64, 768, 2304, 1, 0, 0, 0.0f, 0);
    pt_gemm_key_of(&q, base, base + 4096, base + 8192, base + 16384, NULL, &b);
    tap_ok(memcmp(&a, &b, sizeof a) != 0, "fp32 instead of bf16: another key");
    pt_gemm_plan_fwd(&q, PT_GEMM_BF16, 65, 768, 2304, 1, 0, 0, 0.0f, 0);
    pt_gemm_key_of(&q, base, base + 4096, base + 8192, base + 16384, NULL, &b);
    tap_ok(memcmp(&a, &b, sizeof a) != 0 && pt_gemm_key_hash(&a) != pt_gemm_key_hash(&b), "N=65 instead of 64: "
           "another key and hash");
    /* the hash spreads keys of neighbouring shapes over a small table */
    enum { SLOTS = 64 };
    int used[SLOTS] = {0}, distinct = 0;
    for (int n = 1; n <= SLOTS; n++) {
        pt_gemm_plan_fwd(&q, PT_GEMM_BF16, 16 * n, 768, 768, 0, 0, 0, 0.0f, 0);
        pt_gemm_key_of(&q, base, base, base, NULL, NULL, &b);
        size_t s = pt_gemm_key_hash(&b) & (SLOTS - 1);
        distinct += !used[s];
        used[s] = 1;
    }
    tap_ok(distinct >= SLOTS / 2, "64 neighbouring shapes land in %d of 64 slots (no clustering)", distinct);
}

int main(void)
{
    rng_state = getenv("PTRAIN_TEST_SEED") ? strtoull(getenv("PTRAIN_TEST_SEED"), NULL, 10)
                                           : (uint64_t)time(NULL) ^ (uint64_t)(pt_now() * 1e9);
    tap_diag("seed %llu", (unsigned long long)rng_state);
    test_local_rank();
    test_ptrmap();
    test_versions();
    test_gemm_mapping();
    test_gemm_epilogues();
    test_gemm_key();
    return tap_done();
}
