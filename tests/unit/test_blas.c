/* SPDX-License-Identifier: MIT */
/* The BLAS kernel set against the CPU (lib/backend/blas.h).
 *
 *  1. The ISA level from cpuid (pt_cpu_isa_level) equals the one read
 *     independently from /proc/cpuinfo's flags.
 *  2. After pt_backend_get("cpu"), the kernel set OpenBLAS reports
 *     (openblas_get_corename) is at or above that level, in this process's
 *     environment (which may carry OPENBLAS_CORETYPE) and in a child run
 *     with OPENBLAS_CORETYPE=Prescott: a lower set fails unless
 *     PTRAIN_BLAS_CORETYPE documents it.
 *  3. PTRAIN_BLAS_CORETYPE=<name> forces that set and says so.
 *  4. The core-name table: known names, case, unknown names.
 *  5. The chosen kernels compute: sgemm against a naive product.
 *  6. PTRAIN_MAX_CPU_ISA caps the level of ptrain's own kernels and of the
 *     BLAS kernel set (a child run one level below this CPU: AVX on an
 *     AVX2 CPU, AVX2 on an AVX-512 one) and the summary says so; a bad
 *     value is refused by pt_kernel_isa_check in one line and ignored.
 * Children are this program run again (/proc/self/exe --child) with a
 * changed environment, since the choice is made once per process. */
#define _GNU_SOURCE
#include "backend/blas.h"
#include "backend/gemm_bf16.h"
#include "backend/ops.h"
#include "core/core.h"
#include "tests/tap.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern char *openblas_get_corename(void);

/* ISA level from /proc/cpuinfo's first "flags" line; -2 if unreadable */
static int proc_level(void)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return -2;
    char *line = NULL;
    size_t cap = 0;
    int level = -2;
    while (getline(&line, &cap, f) > 0) {
        if (strncmp(line, "flags", 5) != 0) continue;
        char *p = strchr(line, ':');
        if (!p) break;
        int has[8] = {0};
        static const char *want[8] = {"avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl", "avx2", "fma", "avx"};
        for (char *tok = strtok(p + 1, " \t\n"); tok; tok = strtok(NULL, " \t\n"))
            for (int i = 0; i < 8; i++)
                if (strcmp(tok, want[i]) == 0) has[i] = 1;
        if (has[0] && has[1] && has[2] && has[3] && has[4]) level = PT_ISA_AVX512;
        else if (has[5] && has[6]) level = PT_ISA_AVX2;
        else if (has[7]) level = PT_ISA_AVX;
        else level = PT_ISA_SSE;
        break;
    }
    free(line);
    fclose(f);
    return level;
}

/* run this program with --child under an environment change; returns its
 * one output line (core name, then a tab, then the summary) */
static int child(const char *var, const char *val, char *out, size_t n)
{
    const char *old = getenv(var);
    char *saved = old ? strdup(old) : NULL;
    if (val) setenv(var, val, 1);
    else unsetenv(var);
    char self[4096], cmd[4200];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0) return 0;
    self[len] = 0;
    snprintf(cmd, sizeof cmd, "'%s' --child", self);
    FILE *p = popen(cmd, "r");
    out[0] = 0;
    int ok = p && fgets(out, (int)n, p) != NULL;
    if (p) ok = pclose(p) == 0 && ok;
    if (saved) setenv(var, saved, 1);
    else unsetenv(var);
    free(saved);
    out[strcspn(out, "\n")] = 0;
    return ok;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--child") == 0) {
        pt_backend_get("cpu");
        const int ok = pt_kernel_isa_check() == PT_OK;
        printf("%s\t%s\t%d\t%s\n", openblas_get_corename(), pt_blas_summary(), pt_kernel_isa_level(),
               ok ? "ok" : pt_errmsg());
        return 0;
    }
    const int cpu = pt_cpu_isa_level();
    if (cpu == PT_ISA_UNKNOWN) {
        tap_skip_all("not an x86 CPU: no ISA table for OpenBLAS's kernel sets here");
        return 0;
    }
    const pt_backend *be = pt_backend_get("cpu");
    tap_diag("blas: %s", pt_blas_summary());
    /* this process keeps its PTRAIN_MAX_CPU_ISA (read once, above); the
     * children below run without one unless they set it */
    const char *capped = getenv("PTRAIN_MAX_CPU_ISA");
    char *cap_saved = capped ? strdup(capped) : NULL;
    unsetenv("PTRAIN_MAX_CPU_ISA");
    const char *forced = getenv("PTRAIN_BLAS_CORETYPE");

    int pl = proc_level();
    if (pl == -2) tap_diag("/proc/cpuinfo unreadable: cpuid level %s not cross-checked", pt_isa_name(cpu));
    else tap_ok(pl == cpu, "cpuid ISA level (%s) == /proc/cpuinfo flags level (%s)", pt_isa_name(cpu), pt_isa_name(pl));

    pt_blas_info info;
    pt_blas_get_info(&info);
    const char *core = openblas_get_corename();
    if (forced && *forced) {
        tap_diag("PTRAIN_BLAS_CORETYPE=%s set: the in-process level check is skipped (documented override)", forced);
    } else {
        const int kl = pt_kernel_isa_level(); /* the CPU's, or PTRAIN_MAX_CPU_ISA's */
        tap_ok(pt_blas_core_level(core) >= kl && (kl == cpu || pt_blas_core_level(core) == kl),
               "kernel set %s (%s) matches this CPU's ISA (%s%s%s); OPENBLAS_CORETYPE in the environment: %s", core,
               pt_isa_name(pt_blas_core_level(core)), pt_isa_name(cpu), kl < cpu ? ", capped at " : "",
               kl < cpu ? pt_isa_name(kl) : "", getenv("OPENBLAS_CORETYPE") ? getenv("OPENBLAS_CORETYPE") : "(unset)");
    }
    tap_ok(strcmp(info.coretype, core) == 0 && info.kernel_level == pt_blas_core_level(core) && info.cpu_level == cpu,
           "pt_blas_get_info reports the kernel set in use (%s) and the CPU level", info.coretype);
    be->set_threads(2);
    pt_blas_get_info(&info);
    tap_ok(info.threads == 2, "pt_blas_get_info reports the BLAS thread count set through the backend (%d)", info.threads);
    be->set_threads(1);
    tap_ok(strstr(pt_blas_summary(), info.coretype) && strstr(pt_blas_summary(), "], 1 thread;"),
           "summary names the kernel set and the thread count: %s", pt_blas_summary());

    /* children: a low OPENBLAS_CORETYPE is raised; PTRAIN_BLAS_CORETYPE forces */
    char out[512];
    unsetenv("PTRAIN_BLAS_CORETYPE");
    if (child("OPENBLAS_CORETYPE", "Prescott", out, sizeof out)) {
        char *tab = strchr(out, '\t');
        if (tab) *tab = 0;
        tap_ok(pt_blas_core_level(out) >= cpu && (cpu == PT_ISA_SSE || (tab && strstr(tab + 1, "replaced"))),
               "OPENBLAS_CORETYPE=Prescott in the environment: kernels %s, not below %s, and the summary says it was replaced",
               out, pt_isa_name(cpu));
    } else {
        tap_ok(0, "child run with OPENBLAS_CORETYPE=Prescott");
    }
    if (child("PTRAIN_BLAS_CORETYPE", "Prescott", out, sizeof out)) {
        char *tab = strchr(out, '\t');
        if (tab) *tab = 0;
        tap_ok(strcmp(out, "Prescott") == 0 && tab && strstr(tab + 1, "forced by PTRAIN_BLAS_CORETYPE"),
               "PTRAIN_BLAS_CORETYPE=Prescott forces that set and the summary says so (%s)", out);
    } else {
        tap_ok(0, "child run with PTRAIN_BLAS_CORETYPE=Prescott");
    }
    /* 6: the cap, one level below this CPU (nothing to cap on an SSE-only one) */
    if (cpu > PT_ISA_SSE) {
        const char *below = pt_isa_name(cpu - 1);
        if (child("PTRAIN_MAX_CPU_ISA", below, out, sizeof out)) {
            char *f[4] = {out, NULL, NULL, NULL};
            for (int k = 1; k < 4 && f[k - 1]; k++) {
                f[k] = strchr(f[k - 1], '\t');
                if (f[k]) *f[k]++ = 0;
            }
            char want[96];
            snprintf(want, sizeof want, "on an %s CPU run as %s (PTRAIN_MAX_CPU_ISA)", pt_isa_name(cpu), below);
            tap_ok(f[3] && pt_blas_core_level(out) == cpu - 1 && atoi(f[2]) == cpu - 1 && strstr(f[1], want) &&
                       strcmp(f[3], "ok") == 0,
                   "PTRAIN_MAX_CPU_ISA=%s: kernel set %s (%s), ptrain's kernels at %s, the summary says '%s'", below,
                   out, pt_isa_name(pt_blas_core_level(out)), f[2] ? pt_isa_name(atoi(f[2])) : "?", want);
        } else {
            tap_ok(0, "child run with PTRAIN_MAX_CPU_ISA=%s", below);
        }
    }
    if (child("PTRAIN_MAX_CPU_ISA", "avx3", out, sizeof out)) {
        char *msg = strrchr(out, '\t'), *tab = strchr(out, '\t');
        if (msg) *msg++ = 0;
        if (tab) *tab = 0;
        tap_ok(msg && strcmp(msg, "PTRAIN_MAX_CPU_ISA=avx3: valid values are sse, avx, avx2, avx512") == 0 &&
                   pt_blas_core_level(out) >= cpu,
               "PTRAIN_MAX_CPU_ISA=avx3 is refused in one line (%s) and ignored (kernels %s)", msg ? msg : "?", out);
    } else {
        tap_ok(0, "child run with PTRAIN_MAX_CPU_ISA=avx3");
    }
    if (cap_saved) setenv("PTRAIN_MAX_CPU_ISA", cap_saved, 1);
    free(cap_saved);
    if (forced) setenv("PTRAIN_BLAS_CORETYPE", forced, 1);

    tap_ok(pt_blas_core_level("SkylakeX") == PT_ISA_AVX512 && pt_blas_core_level("cooperlake") == PT_ISA_AVX512 &&
               pt_blas_core_level("HASWELL") == PT_ISA_AVX2 && pt_blas_core_level("Zen") == PT_ISA_AVX2 &&
               pt_blas_core_level("Sandybridge") == PT_ISA_AVX && pt_blas_core_level("Prescott") == PT_ISA_SSE &&
               pt_blas_core_level("Neoverse") == PT_ISA_UNKNOWN && pt_blas_core_level(NULL) == PT_ISA_UNKNOWN,
           "core-name table: SkylakeX/Cooperlake avx512, Haswell/Zen avx2, Sandybridge avx, Prescott sse, unknown names -1");

    /* the selected kernels compute: sgemm against a naive double product */
    enum { M = 67, N = 45, K = 131 };
    static float a[M * K], b[N * K], c[M * N];
    pt_rng r;
    pt_rng_seed(&r, 42, 7);
    for (int i = 0; i < M * K; i++) a[i] = (float)pt_rng_normal(&r);
    for (int i = 0; i < N * K; i++) b[i] = (float)pt_rng_normal(&r);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1, a, K, b, K, 0, c, N);
    double worst = 0;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0, sa = 0;
            for (int k = 0; k < K; k++) s += (double)a[i * K + k] * b[j * K + k], sa += fabs((double)a[i * K + k] * b[j * K + k]);
            worst = fmax(worst, fabs(c[i * N + j] - s) / sa);
        }
    tap_ok(worst < 1e-5, "sgemm with %s kernels matches a double product (max err %.1e relative to sum|a*b|)", core, worst);
    /* one core's sgemm rate (ptrain-topo --probe's gemm_gflops): a
     * positive finite figure, printed; bad sizes refused */
    double g = pt_blas_sgemm_gflops(128, 2);
    tap_diag("sgemm 128x128, one thread: %.1f GFLOP/s (a measurement on a shared machine)", g);
    tap_ok(g > 0 && g < 1e6, "pt_blas_sgemm_gflops measures a positive rate (%.1f GFLOP/s)", g);
    tap_ok(pt_blas_sgemm_gflops(8, 2) == -1 && pt_blas_sgemm_gflops(128, 0) == -1,
           "pt_blas_sgemm_gflops refuses n < 16 and reps < 1");
    /* and its bf16 GEMM rate (ptrain-topo --probe's gemm_gflops_bf16),
     * through whichever pt_gemm_bf16 this process chose */
    double gb = pt_blas_bf16_gemm_gflops(128, 2);
    tap_diag("bf16 GEMM 128x128, one thread: %.1f GFLOP/s (%s)", gb, pt_gemm_bf16_summary());
    tap_ok(gb > 0 && gb < 1e6, "pt_blas_bf16_gemm_gflops measures a positive rate (%.1f GFLOP/s)", gb);
    tap_ok(pt_blas_bf16_gemm_gflops(8, 2) == -1 && pt_blas_bf16_gemm_gflops(128, 0) == -1 &&
               pt_blas_bf16_gemm_gflops(8193, 1) == -1,
           "pt_blas_bf16_gemm_gflops refuses n < 16, n > 8192 and reps < 1");
    return tap_done();
}
