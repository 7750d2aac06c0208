/* SPDX-License-Identifier: MIT */
/* GEMMs that the CPU tables call inside OpenMP parallel regions run on one
 * BLAS thread, with OpenBLAS's OpenMP build and with its pthreads build
 * (lib/backend/blas.h, pt_blas_gemm_prepare); GEMMs the tables make
 * outside regions run on pt_blas_sgemm's tile grid, whose tiles are
 * again one BLAS thread each, in a region of the backend's thread count.
 *
 * This program defines cblas_sgemm and cblas_dgemm: libptrain's calls bind
 * to them (the executable comes first in the dynamic linker's lookup
 * order).  Each call notes whether it came from inside an active parallel
 * region and how many threads OpenBLAS would run it on, then forwards to
 * OpenBLAS's own (dlsym RTLD_NEXT).  That count: the OpenMP build returns 1
 * inside a region by itself (num_cpu_avail in its common_thread.h); the
 * pthreads build uses openblas_get_num_threads() wherever it is called.
 *
 * The checks run in children (this program, --child): one with the
 * OpenBLAS this program loads, and two against the pthreads build, once as
 * the environment has it and once with OPENBLAS_THREAD_TIMEOUT=10, both
 * with OPENBLAS_NUM_THREADS=2 (a worker in the pool from the start).  That
 * build is the openblas-pthread directory beside the loaded library's
 * (Debian and Ubuntu install both as /usr/lib/<triplet>/openblas-*), or
 * $PTRAIN_TEST_OPENBLAS_PTHREAD_DIR; its runs are skipped when there is
 * none.  At 2 threads:
 *  1. matmul_fwd with a bias (one GEMM per row block in a region): at
 *     least one GEMM in a region, every one on 1 BLAS thread, and the
 *     result matches a double product + bias (fresh random inputs);
 *  2. right after it pt_blas_get_info reports 2 threads, and then
 *     matmul_fwd without a bias (one GEMM that the caller makes outside
 *     any region) runs on pt_blas_sgemm's tile grid: every BLAS call in
 *     a region on 1 BLAS thread, none outside (the grid's threads are
 *     the OpenMP pool's), and the backend's count is still 2;
 *  3. the double table's attention_ref_fwd (cblas_dgemm per (b, h) in a
 *     region): as 1;
 *  4. the "blas:" summary says "1 thread inside OpenMP regions" and
 *     "idle workers sleep" (OPENBLAS_THREAD_TIMEOUT unset) or
 *     "OPENBLAS_THREAD_TIMEOUT=<v> kept" exactly when the pthreads build is
 *     loaded;
 *  5. pt_backend_get, which restarts the pthreads build's pool (workers
 *     that sleep when idle), leaves the thread count as it was.
 * Without the guard, the pthreads child fails 1 and 3 (its GEMMs in
 * regions see 2 threads) and 4. */
#define _GNU_SOURCE
#include "backend/blas.h"
#include "backend/ops.h"
#include "core/core.h"
#include "tests/tap.h"

#include <cblas.h>
#include <dirent.h>
#include <dlfcn.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

extern int openblas_get_parallel(void);
extern int openblas_get_num_threads(void);
extern char *openblas_get_config(void);

/* ---- the interposed GEMMs ---------------------------------------------- */
static atomic_int n_in, n_in_multi, n_out, last_out_threads;

static void note(void)
{
#ifdef _OPENMP
    const int in = omp_in_parallel();
#else
    const int in = 0;
#endif
    const int threads = in && openblas_get_parallel() == 2 ? 1 : openblas_get_num_threads();
    if (in) {
        atomic_fetch_add(&n_in, 1);
        if (threads != 1) atomic_fetch_add(&n_in_multi, 1);
    } else {
        atomic_fetch_add(&n_out, 1);
        atomic_store(&last_out_threads, threads);
    }
}

typedef void sgemm_fn(enum CBLAS_ORDER, enum CBLAS_TRANSPOSE, enum CBLAS_TRANSPOSE, blasint, blasint, blasint, float,
                      const float *, blasint, const float *, blasint, float, float *, blasint);
typedef void dgemm_fn(enum CBLAS_ORDER, enum CBLAS_TRANSPOSE, enum CBLAS_TRANSPOSE, blasint, blasint, blasint, double,
                      const double *, blasint, const double *, blasint, double, double *, blasint);

void cblas_sgemm(enum CBLAS_ORDER o, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, blasint M, blasint N, blasint K,
                 float alpha, const float *A, blasint lda, const float *B, blasint ldb, float beta, float *C, blasint ldc)
{
    sgemm_fn *f = (sgemm_fn *)dlsym(RTLD_NEXT, "cblas_sgemm");
    if (!f) abort();
    note();
    f(o, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void cblas_dgemm(enum CBLAS_ORDER o, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, blasint M, blasint N, blasint K,
                 double alpha, const double *A, blasint lda, const double *B, blasint ldb, double beta, double *C,
                 blasint ldc)
{
    dgemm_fn *f = (dgemm_fn *)dlsym(RTLD_NEXT, "cblas_dgemm");
    if (!f) abort();
    note();
    f(o, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

static void reset(void)
{
    atomic_store(&n_in, 0);
    atomic_store(&n_in_multi, 0);
    atomic_store(&n_out, 0);
    atomic_store(&last_out_threads, 0);
}

/* ---- the checks ---------------------------------------------------------- */
static unsigned long long rng;

static double uniform(void) /* [-1, 1) */
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng >> 11) / 4503599627370496.0 - 1.0;
}

/* threads of this process (entries of /proc/self/task); -1 if unreadable */
static int task_count(void)
{
    DIR *d = opendir("/proc/self/task");
    if (!d) return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (e->d_name[0] != '.') n++;
    closedir(d);
    return n;
}

/* prints one line per check, "1 <what>" or "0 <what>" */
static void checks(void)
{
    const int tasks0 = task_count();
    const pt_backend *be = pt_backend_get("cpu");
    const int tasks1 = task_count();
    be->set_threads(2);
    const int pthreads = openblas_get_parallel() == 1;
    const char *tag = pthreads ? "[pthreads OpenBLAS]" : "[OpenMP OpenBLAS]";
    printf("%d %s pt_backend_get (which restarts a pthreads pool) leaves the process's thread count as it was "
           "(%d, then %d)\n",
           tasks0 > 0 && tasks1 == tasks0, tag, tasks0, tasks1);

    /* 1, 2: matmul_fwd with and without a bias */
    const int N = 300 + (int)(uniform() * 20 + 20), C = 40 + (int)(uniform() * 8 + 8), OC = 50;
    float *x = malloc(sizeof(float) * (size_t)N * C), *w = malloc(sizeof(float) * (size_t)OC * C);
    float *b = malloc(sizeof(float) * OC), *y = malloc(sizeof(float) * (size_t)N * OC);
    if (!x || !w || !b || !y) abort();
    for (size_t i = 0; i < (size_t)N * C; i++) x[i] = (float)uniform();
    for (size_t i = 0; i < (size_t)OC * C; i++) w[i] = (float)uniform();
    for (int i = 0; i < OC; i++) b[i] = (float)uniform();
    reset();
    pt_cpu_ops_f32.matmul_fwd(y, NULL, x, w, b, 0.0, N, C, OC, PT_EPI_DEFAULT);
    double worst = 0;
    for (int n = 0; n < N; n++)
        for (int o = 0; o < OC; o++) {
            double s = b[o], mag = fabs(b[o]);
            for (int c = 0; c < C; c++) s += (double)x[(size_t)n * C + c] * w[(size_t)o * C + c],
                                         mag += fabs((double)x[(size_t)n * C + c] * w[(size_t)o * C + c]);
            const double e = fabs(y[(size_t)n * OC + o] - s) / (mag + 1e-30);
            if (e > worst) worst = e;
        }
    printf("%d %s matmul_fwd + bias, N=%d C=%d OC=%d, 2 threads: %d GEMMs inside regions, %d of them on >1 BLAS "
           "thread (want >0, 0); max rel err %.1e\n",
           atomic_load(&n_in) > 0 && atomic_load(&n_in_multi) == 0 && worst < 1e-5, tag, N, C, OC,
           atomic_load(&n_in), atomic_load(&n_in_multi), worst);
    pt_blas_info info;
    pt_blas_get_info(&info);
    printf("%d %s right after the region's GEMMs pt_blas_get_info reports the backend's count: %d BLAS threads "
           "(want 2)\n",
           info.threads == 2, tag, info.threads);
    reset();
    pt_cpu_ops_f32.matmul_fwd(y, NULL, x, w, NULL, 0.0, N, C, OC, PT_EPI_DEFAULT);
    pt_blas_get_info(&info);
    printf("%d %s matmul_fwd without bias (one GEMM on pt_blas_sgemm's grid) after it: %d BLAS calls outside a "
           "region, %d inside on >1 BLAS thread (want 0, 0), %d inside; the backend's count still %d (want 2)\n",
           atomic_load(&n_out) == 0 && atomic_load(&n_in) >= 1 && atomic_load(&n_in_multi) == 0 && info.threads == 2,
           tag, atomic_load(&n_out), atomic_load(&n_in_multi), atomic_load(&n_in), info.threads);
    free(x), free(w), free(b), free(y);

    /* 3: the double table's reference attention */
    const int B = 2, T = 24, NH = 2, HS = 8, C3 = 3 * NH * HS;
    double *qkv = malloc(sizeof(double) * (size_t)B * T * C3), *o = malloc(sizeof(double) * (size_t)B * T * NH * HS);
    double *att = malloc(sizeof(double) * (size_t)B * NH * T * T);
    if (!qkv || !o || !att) abort();
    for (size_t i = 0; i < (size_t)B * T * C3; i++) qkv[i] = uniform();
    reset();
    pt_cpu_ops_f64.attention_ref_fwd(o, att, qkv, B, T, NH, HS);
    printf("%d %s attention_ref_fwd (f64), 2 threads: %d GEMMs inside regions, %d of them on >1 BLAS thread (want "
           ">0, 0)\n",
           atomic_load(&n_in) > 0 && atomic_load(&n_in_multi) == 0, tag, atomic_load(&n_in),
           atomic_load(&n_in_multi));
    free(qkv), free(o), free(att);

    /* 4: the summary */
    const char *s = pt_blas_summary();
    const char *user = getenv("OPENBLAS_THREAD_TIMEOUT");
    const int says = strstr(s, "1 thread inside OpenMP regions") != NULL;
    const int pool = strstr(s, user ? ", OPENBLAS_THREAD_TIMEOUT=" : ", idle workers sleep") != NULL;
    printf("%d %s the blas: line says what was done (pthreads build: %s, OPENBLAS_THREAD_TIMEOUT %s): %s\n",
           says == pthreads && pool == pthreads, tag, pthreads ? "yes" : "no", user ? user : "unset", s);
    fflush(stdout);
}

/* the pthreads build's directory: $PTRAIN_TEST_OPENBLAS_PTHREAD_DIR, or
 * ../openblas-pthread from the directory of the loaded libopenblas */
static int pthread_dir(char *dir, size_t n)
{
    const char *env = getenv("PTRAIN_TEST_OPENBLAS_PTHREAD_DIR");
    if (env && *env) {
        snprintf(dir, n, "%s", env);
    } else {
        Dl_info di;
        if (!dladdr((void *)openblas_get_config, &di) || !di.dli_fname) return 0;
        snprintf(dir, n, "%s", di.dli_fname);
        char *p = strrchr(dir, '/');
        if (!p) return 0;
        *p = 0; /* .../openblas-openmp */
        p = strrchr(dir, '/');
        if (!p) return 0;
        *p = 0;
        size_t l = strlen(dir);
        snprintf(dir + l, n - l, "/openblas-pthread");
    }
    char lib[4200];
    snprintf(lib, sizeof lib, "%s/libopenblas.so.0", dir);
    return access(lib, R_OK) == 0;
}

static void relay(FILE *p)
{
    char line[2048];
    while (fgets(line, sizeof line, p)) {
        line[strcspn(line, "\n")] = 0;
        if ((line[0] == '0' || line[0] == '1') && line[1] == ' ') tap_ok(line[0] == '1', "%s", line + 2);
        else tap_diag("child: %s", line);
    }
}

int main(int argc, char **argv)
{
    rng = 0x9e3779b97f4a7c15ull ^ (unsigned long long)time(NULL) ^ ((unsigned long long)getpid() << 20);
    if (argc > 1 && strcmp(argv[1], "--child") == 0) {
        checks();
        return 0;
    }
#ifndef _OPENMP
    tap_skip_all("built without OpenMP: no parallel regions");
    return 0;
#else
    /* a child with this process's environment (whichever OpenBLAS it loads), then one against the pthreads build */
    char path[4096], cmd[9000];
    ssize_t len = readlink("/proc/self/exe", path, sizeof path - 1);
    if (len <= 0) return tap_ok(0, "readlink /proc/self/exe"), tap_done();
    path[len] = 0;
    snprintf(cmd, sizeof cmd, "'%s' --child", path);
    FILE *p = popen(cmd, "r");
    if (!p) return tap_ok(0, "run %s", cmd), tap_done();
    relay(p);
    tap_ok(pclose(p) == 0, "child run with the default OpenBLAS exits 0");

    char dir[4096];
    if (openblas_get_parallel() == 1) {
        tap_diag("the pthreads build is the one loaded: checked above");
    } else if (!pthread_dir(dir, sizeof dir)) {
        tap_diag("no OpenBLAS pthreads build found (openblas-pthread beside the loaded library, or "
                 "PTRAIN_TEST_OPENBLAS_PTHREAD_DIR): its checks are skipped");
    } else {
        /* as the environment has it, then with a timeout of the user's (kept) */
        const char *old = getenv("LD_LIBRARY_PATH"), *oldto = getenv("OPENBLAS_THREAD_TIMEOUT");
        const char *oldnt = getenv("OPENBLAS_NUM_THREADS");
        char *saved = old ? strdup(old) : NULL, *savedto = oldto ? strdup(oldto) : NULL;
        char *savednt = oldnt ? strdup(oldnt) : NULL;
        setenv("OPENBLAS_NUM_THREADS", "2", 1); /* a worker in the pool from the start (make check sets 1) */
        char llp[9000];
        snprintf(llp, sizeof llp, "%s%s%s", dir, old && *old ? ":" : "", old ? old : "");
        setenv("LD_LIBRARY_PATH", llp, 1);
        for (int run = 0; run < 2; run++) {
            if (run == 1) setenv("OPENBLAS_THREAD_TIMEOUT", "10", 1);
            p = popen(cmd, "r");
            if (!p) {
                tap_ok(0, "run %s", cmd);
                break;
            }
            relay(p);
            tap_ok(pclose(p) == 0, "child run against %s%s exits 0", dir, run ? " with OPENBLAS_THREAD_TIMEOUT=10" : "");
        }
        if (saved) setenv("LD_LIBRARY_PATH", saved, 1);
        else unsetenv("LD_LIBRARY_PATH");
        if (savedto) setenv("OPENBLAS_THREAD_TIMEOUT", savedto, 1);
        else unsetenv("OPENBLAS_THREAD_TIMEOUT");
        if (savednt) setenv("OPENBLAS_NUM_THREADS", savednt, 1);
        else unsetenv("OPENBLAS_NUM_THREADS");
        free(saved);
        free(savedto);
        free(savednt);
    }
    return tap_done();
#endif
}
