/* SPDX-License-Identifier: MIT */
/* BLAS kernel-set choice and ptrain's GEMM over it: see blas.h.  The
 * dispatch being re-run is OpenBLAS's driver/others/dynamic.c
 * (gotoblas_dynamic_init reads OPENBLAS_CORETYPE, else detects the CPU;
 * gotoblas_dynamic_quit clears the table pointer so that init runs again).
 * The summary line and the GEMM probes, which also report and run the bf16
 * GEMM, are blas_report.c's: gemm_bf16.c calls into this file, never the
 * other way. */
#define _GNU_SOURCE
#include "config.h"
#include "backend/blas.h"
#include "core/core.h"

#include <cblas.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#ifdef _OPENMP
#include <omp.h>
#endif

/* OpenBLAS entry points; declared here since not every cblas.h has them.
 * The two dispatch functions exist only in DYNAMIC_ARCH builds: weak, so a
 * build for one fixed target links and reports that it cannot switch. */
extern char *openblas_get_corename(void);
extern char *openblas_get_config(void);
extern int openblas_get_parallel(void);
extern int openblas_get_num_threads(void);
extern void openblas_set_num_threads(int);
extern void gotoblas_dynamic_init(void) __attribute__((weak));
extern void gotoblas_dynamic_quit(void) __attribute__((weak));
/* The pthreads build's pool (driver/others/blas_server.c, openblas_env.c):
 * exported by its shared library but not in cblas.h; weak, used only when
 * all are there.  blas_thread_shutdown_ is what its fork handler calls. */
extern void openblas_read_env(void) __attribute__((weak));
extern int openblas_thread_timeout(void) __attribute__((weak));
extern int blas_thread_init(void) __attribute__((weak));
extern int blas_thread_shutdown_(void) __attribute__((weak));

const char *pt_isa_name(int level)
{
    switch (level) {
    case PT_ISA_SSE: return "sse";
    case PT_ISA_AVX: return "avx";
    case PT_ISA_AVX2: return "avx2";
    case PT_ISA_AVX512: return "avx512";
    default: return "unknown";
    }
}

int pt_cpu_isa_level(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512vl"))
        return PT_ISA_AVX512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return PT_ISA_AVX2;
    if (__builtin_cpu_supports("avx")) return PT_ISA_AVX;
    return PT_ISA_SSE;
#else
    return PT_ISA_UNKNOWN;
#endif
}

/* PTRAIN_MAX_CPU_ISA: read once per process */
static pthread_once_t cap_once = PTHREAD_ONCE_INIT;
static int kernel_level = PT_ISA_UNKNOWN, cap_level = PT_ISA_UNKNOWN;
static char cap_error[PT_ERROR_LEN];

static void read_cap(void)
{
    const int cpu = pt_cpu_isa_level();
    kernel_level = cpu;
    const char *v = getenv("PTRAIN_MAX_CPU_ISA");
    if (!v || !*v) return;
    int want = PT_ISA_UNKNOWN;
    for (int l = PT_ISA_SSE; l <= PT_ISA_AVX512; l++)
        if (strcasecmp(v, pt_isa_name(l)) == 0) want = l;
    if (want == PT_ISA_UNKNOWN) {
        snprintf(cap_error, sizeof cap_error, "PTRAIN_MAX_CPU_ISA=%.64s: valid values are sse, avx, avx2, avx512", v);
        return;
    }
    if (cpu == PT_ISA_UNKNOWN) return; /* no x86 levels to cap */
    cap_level = want;
    if (want < cpu) kernel_level = want;
}

int pt_kernel_isa_level(void)
{
    pthread_once(&cap_once, read_cap);
    return kernel_level;
}

int pt_kernel_isa_check(void)
{
    pthread_once(&cap_once, read_cap);
    return *cap_error ? pt_fail(PT_EINVAL, "%s", cap_error) : PT_OK;
}

/* OpenBLAS's x86 core names (dynamic.c's corename[]) by the widest vector
 * ISA their sgemm/dgemm kernels use. */
static const struct { const char *name; int level; } core_levels[] = {
    {"SkylakeX", PT_ISA_AVX512}, {"Cooperlake", PT_ISA_AVX512}, {"SapphireRapids", PT_ISA_AVX512},
    {"Haswell", PT_ISA_AVX2},    {"Zen", PT_ISA_AVX2},          {"Excavator", PT_ISA_AVX2},
    {"Sandybridge", PT_ISA_AVX}, {"Bulldozer", PT_ISA_AVX},     {"Piledriver", PT_ISA_AVX},
    {"Steamroller", PT_ISA_AVX}, {"Prescott", PT_ISA_SSE},      {"Core2", PT_ISA_SSE},
    {"Penryn", PT_ISA_SSE},      {"Dunnington", PT_ISA_SSE},    {"Nehalem", PT_ISA_SSE},
    {"Atom", PT_ISA_SSE},        {"Nano", PT_ISA_SSE},          {"Opteron", PT_ISA_SSE},
    {"Opteron_SSE3", PT_ISA_SSE}, {"Barcelona", PT_ISA_SSE},    {"Bobcat", PT_ISA_SSE},
    {"Athlon", PT_ISA_SSE},      {"Katmai", PT_ISA_SSE},        {"Coppermine", PT_ISA_SSE},
    {"Northwood", PT_ISA_SSE},   {"Banias", PT_ISA_SSE},
};

int pt_blas_core_level(const char *corename)
{
    if (!corename) return PT_ISA_UNKNOWN;
    for (size_t i = 0; i < sizeof core_levels / sizeof core_levels[0]; i++)
        if (strcasecmp(corename, core_levels[i].name) == 0) return core_levels[i].level;
    return PT_ISA_UNKNOWN;
}

/* the table that matches an ISA level */
static const char *core_for_level(int level)
{
    switch (level) {
    case PT_ISA_AVX512: return "SkylakeX";
    case PT_ISA_AVX2: return "Haswell";
    case PT_ISA_AVX: return "Sandybridge";
    case PT_ISA_SSE: return "Prescott"; /* only ever asked for under PTRAIN_MAX_CPU_ISA=sse */
    default: return NULL;
    }
}

static pthread_once_t select_once = PTHREAD_ONCE_INIT;
static char select_reason[200];
#ifdef _OPENMP
/* 1: OpenBLAS's pthreads build under OpenMP kernels, whose GEMMs inside
 * parallel regions pt_blas_gemm_prepare holds to one thread; set once by
 * do_select, read after pt_blas_select */
static int nest_guard;
/* what quick_sleep did to the pthreads pool's idle wait, for the summary */
static char pool_note[64];
#endif

/* Re-run OpenBLAS's dispatch with OPENBLAS_CORETYPE=core, restoring the
 * variable afterwards.  Returns 0 when the dispatch could be re-run. */
static int reselect(const char *core)
{
    if (!gotoblas_dynamic_init || !gotoblas_dynamic_quit) return -1;
    const char *old = getenv("OPENBLAS_CORETYPE");
    char *saved = old ? strdup(old) : NULL;
    setenv("OPENBLAS_CORETYPE", core, 1);
    gotoblas_dynamic_quit();
    gotoblas_dynamic_init();
    if (saved) setenv("OPENBLAS_CORETYPE", saved, 1);
    else unsetenv("OPENBLAS_CORETYPE");
    free(saved);
    return 0;
}

#ifdef _OPENMP
/* The pthreads build's idle workers spin (sched_yield) for 2^28 cycles by
 * default (OPENBLAS_THREAD_TIMEOUT, read once when the library loads) after
 * each threaded GEMM, on the cores the OpenMP kernels that follow need.
 * Restart the pool (before its first use) with the shortest wait, 2^4
 * cycles, so that they sleep at once, as libgomp's do on an oversubscribed
 * machine: measured +30 to +90% tokens/s for the tiny model at 2 and 4
 * threads on 2 cores (bench/bench-blas-threads.sh).  A timeout the user
 * set is kept. */
static void quick_sleep(void)
{
    const char *user = getenv("OPENBLAS_THREAD_TIMEOUT");
    if (!user) user = getenv("GOTO_THREAD_TIMEOUT");
    if (user) {
        snprintf(pool_note, sizeof pool_note, ", OPENBLAS_THREAD_TIMEOUT=%.20s kept", user);
        return;
    }
    if (!openblas_read_env || !openblas_thread_timeout || !blas_thread_init || !blas_thread_shutdown_) return;
    setenv("OPENBLAS_THREAD_TIMEOUT", "4", 1);
    openblas_read_env();
    if (openblas_thread_timeout() == 4) {
        blas_thread_shutdown_();
        blas_thread_init(); /* reads the timeout */
        snprintf(pool_note, sizeof pool_note, ", idle workers sleep");
    }
    unsetenv("OPENBLAS_THREAD_TIMEOUT");
    openblas_read_env(); /* its other settings as they were */
}
#endif

static void do_select(void)
{
#ifdef _OPENMP
    nest_guard = openblas_get_parallel() == 1;
    if (nest_guard) quick_sleep();
#endif
    /* the level to match: the CPU's, or lower under PTRAIN_MAX_CPU_ISA */
    const int cpu = pt_kernel_isa_level(), capped = cpu < pt_cpu_isa_level();
    const char *force = getenv("PTRAIN_BLAS_CORETYPE");
    const char *envc = getenv("OPENBLAS_CORETYPE");
    const char *cur = openblas_get_corename();
    char was[32];
    snprintf(was, sizeof was, "%s", cur ? cur : "?");
    const int have = pt_blas_core_level(was);
    char *r = select_reason;
    const size_t rn = sizeof select_reason;

    if (force && *force && strcasecmp(force, "keep") != 0 && strcasecmp(force, "auto") != 0) {
        if (reselect(force) != 0) snprintf(r, rn, "PTRAIN_BLAS_CORETYPE=%s ignored: this OpenBLAS has no DYNAMIC_ARCH", force);
        else if (strcasecmp(openblas_get_corename(), force) != 0)
            snprintf(r, rn, "PTRAIN_BLAS_CORETYPE=%s is not a core this OpenBLAS knows; it chose %s", force,
                     openblas_get_corename());
        else snprintf(r, rn, "forced by PTRAIN_BLAS_CORETYPE");
        return;
    }
    if (force && strcasecmp(force, "keep") == 0) {
        snprintf(r, rn, "kept as OpenBLAS chose it (PTRAIN_BLAS_CORETYPE=keep)%s%s", envc ? ", OPENBLAS_CORETYPE=" : "",
                 envc ? envc : "");
        return;
    }
    if (cpu == PT_ISA_UNKNOWN) {
        snprintf(r, rn, "OpenBLAS's own choice (no ISA table for this architecture)");
        return;
    }
    if (have == cpu || (have > cpu && !capped)) {
        snprintf(r, rn, "%s%s%s", envc ? "from OPENBLAS_CORETYPE" : "OpenBLAS's own choice",
                 capped ? ", PTRAIN_MAX_CPU_ISA=" : "", capped ? pt_isa_name(cpu) : "");
        return;
    }
    const char *want = core_for_level(cpu);
    if (!want) {
        snprintf(r, rn, "OpenBLAS's own choice");
        return;
    }
    if (reselect(want) != 0) {
        snprintf(r, rn, "below the CPU: this OpenBLAS has no DYNAMIC_ARCH to switch from %s", was);
        return;
    }
    const char *now = openblas_get_corename();
    if (pt_blas_core_level(now) < cpu)
        snprintf(r, rn, "below the CPU: this OpenBLAS has no %s kernels (asked %s, got %s)", pt_isa_name(cpu), want, now);
    else if (capped)
        snprintf(r, rn, "replaced %s: PTRAIN_MAX_CPU_ISA=%s", was, pt_isa_name(cpu));
    else if (envc)
        snprintf(r, rn, "replaced %s from OPENBLAS_CORETYPE=%s; PTRAIN_BLAS_CORETYPE=%s keeps it", was, envc, envc);
    else
        snprintf(r, rn, "replaced OpenBLAS's choice %s", was);
}

int pt_blas_select(void)
{
    pthread_once(&select_once, do_select);
    return 0;
}

/* The nested-GEMM guard (see blas.h).  OpenBLAS's OpenMP build runs a GEMM
 * called inside a parallel region on the calling thread (num_cpu_avail in
 * common_thread.h returns 1 when omp_in_parallel()); its pthreads build has
 * no such test: every thread of the region hands its GEMM to the one
 * pthread pool, the level-3 driver's lock serialises them, and the pool's
 * busy-waiting workers compete with the region's spinning OpenMP threads
 * for the cores.  So for the pthreads build, the first GEMM of a region
 * lowers OpenBLAS to one thread (remembering the count) and the first GEMM
 * outside a region puts the count back.  GEMMs come from one thread (the
 * one calling the ops) or the teams of its regions, never from two regions
 * at once, so the region's threads all want 1 and nothing outside a region
 * runs while they do. */
static atomic_int nest_restore; /* the count to put back; 0: not lowered */
#ifdef _OPENMP
static pthread_mutex_t nest_lock = PTHREAD_MUTEX_INITIALIZER;
#endif

/* OpenBLAS's thread count outside regions: the one to restore, if lowered */
static int blas_threads_now(void)
{
    const int lowered = atomic_load(&nest_restore);
    return lowered > 0 ? lowered : openblas_get_num_threads();
}

void pt_blas_gemm_prepare(void)
{
#ifdef _OPENMP
    pt_blas_select(); /* sets nest_guard */
    if (!nest_guard) return;
    if (omp_in_parallel()) {
        if (atomic_load_explicit(&nest_restore, memory_order_acquire) != 0 || openblas_get_num_threads() == 1) return;
        pthread_mutex_lock(&nest_lock);
        const int n = openblas_get_num_threads();
        if (atomic_load_explicit(&nest_restore, memory_order_relaxed) == 0 && n > 1) {
            openblas_set_num_threads(1);
            atomic_store_explicit(&nest_restore, n, memory_order_release);
        }
        pthread_mutex_unlock(&nest_lock);
    } else {
        const int n = atomic_exchange_explicit(&nest_restore, 0, memory_order_acq_rel);
        if (n > 0) openblas_set_num_threads(n);
    }
#endif
}

void pt_blas_set_threads(int n)
{
    if (n < 1) n = 1;
    pt_blas_select();
    atomic_store(&nest_restore, 0);
    openblas_set_num_threads(n);
}

int pt_blas_nest_guard(void)
{
    pt_blas_select();
#ifdef _OPENMP
    return nest_guard;
#else
    return 0;
#endif
}

const char *pt_blas_pool_note(void)
{
    pt_blas_select();
#ifdef _OPENMP
    return pool_note;
#else
    return "";
#endif
}

void pt_blas_get_info(pt_blas_info *info)
{
    pt_blas_select();
    memset(info, 0, sizeof *info);
    const char *cfg = openblas_get_config(); /* "OpenBLAS 0.3.21 DYNAMIC_ARCH ..." */
    int n = 0;
    if (cfg && sscanf(cfg, "%47s %n", info->name, &n) == 1) {
        char ver[24];
        if (sscanf(cfg + n, "%23s", ver) == 1 && ver[0] >= '0' && ver[0] <= '9') {
            size_t l = strlen(info->name);
            snprintf(info->name + l, sizeof info->name - l, " %s", ver);
        }
    } else {
        snprintf(info->name, sizeof info->name, "OpenBLAS");
    }
    int par = openblas_get_parallel();
    snprintf(info->threading, sizeof info->threading, "%s", par == 2 ? "OpenMP" : par == 1 ? "pthreads" : "serial");
    snprintf(info->coretype, sizeof info->coretype, "%s", openblas_get_corename());
    info->kernel_level = pt_blas_core_level(info->coretype);
    info->cpu_level = pt_cpu_isa_level();
    info->nest_guard = pt_blas_nest_guard();
    info->threads = blas_threads_now();
    snprintf(info->reason, sizeof info->reason, "%s", select_reason);
}

/* ---------------------------------------------------------------- the fixed-grid GEMM */

/* Below this many multiply-adds (2 MFLOP, tens of microseconds) a GEMM is
 * one tile: a team costs more than it would save. */
#define PT_GEMM_GRID_MIN ((double)(1 << 20))
/* Tiles aimed at per GEMM (enough for 16 threads to share unevenly sized
 * GEMMs), and the smallest tile side: a tile packs the shared operand's
 * panel (K x its columns or rows) for itself, a cost of one packed element
 * per 2 x side multiply-adds, small beside the product from 256 on where the
 * panel is cache-resident and from 512 where it is not (OpenBLAS's own
 * M block on Haswell/Zen is 768 rows). */
#define PT_GEMM_TILES 32
#define PT_GEMM_TILE_MIN 256
#define PT_GEMM_TILE_BIG 512
#define PT_GEMM_PANEL_BIG ((size_t)1 << 20) /* elements (4 MiB of floats): the panel a tile re-packs */

static int grid_side(int D, size_t panel)
{
    const int lo = panel > PT_GEMM_PANEL_BIG ? PT_GEMM_TILE_BIG : PT_GEMM_TILE_MIN;
    if (D < 2 * lo) return D;
    int t = (D + PT_GEMM_TILES - 1) / PT_GEMM_TILES;
    t = (t + 63) / 64 * 64;
    return t < lo ? lo : t;
}

void pt_blas_gemm_grid(int M, int N, int K, int *tm, int *tn)
{
    *tm = M > 0 ? M : 1, *tn = N > 0 ? N : 1;
    if (M < 1 || N < 1 || (double)M * N * (K > 0 ? K : 1) < PT_GEMM_GRID_MIN) return;
    /* cutting rows re-packs B (K x N) per tile, cutting columns A (M x K) */
    const size_t kk = (size_t)(K > 0 ? K : 1);
    if (M >= N) {
        *tm = grid_side(M, kk * (size_t)N);
        if (*tm == M) *tn = grid_side(N, kk * (size_t)M);
    } else {
        *tn = grid_side(N, kk * (size_t)M);
        if (*tn == N) *tm = grid_side(M, kk * (size_t)N);
    }
}

#ifdef _OPENMP
#define PT_IN_REGION() (omp_get_level() > 0)
#else
#define PT_IN_REGION() 1
#endif

/* one body for float and double (cblas_sgemm, cblas_dgemm) */
#define PT_GRID_GEMM(NAME, T, CBLAS)                                                                                \
    void NAME(int ta, int tb, int M, int N, int K, T alpha, const T *A, int lda, const T *B, int ldb, T beta, T *C, \
              int ldc)                                                                                              \
    {                                                                                                               \
        if (M < 1 || N < 1) return;                                                                                 \
        const enum CBLAS_TRANSPOSE oa = ta ? CblasTrans : CblasNoTrans, ob = tb ? CblasTrans : CblasNoTrans;        \
        int tm = M, tn = N; /* inside a region: one tile, the calling thread's */                                  \
        if (!PT_IN_REGION()) pt_blas_gemm_grid(M, N, K, &tm, &tn);                                                  \
        const int gm = (M + tm - 1) / tm, gn = (N + tn - 1) / tn, nt = gm * gn;                                     \
        /* a region even for one tile (nested: inactive inside an active one): in it omp_in_parallel() holds or   \
         * the thread count is 1, so the BLAS (OpenMP build: num_cpu_avail) runs each tile on one thread */        \
        _Pragma("omp parallel for schedule(static)")                                                                \
        for (int t = 0; t < nt; t++) {                                                                              \
            const int i0 = (t / gn) * tm, j0 = (t % gn) * tn;                                                       \
            const int m = M - i0 < tm ? M - i0 : tm, n = N - j0 < tn ? N - j0 : tn;                                 \
            const T *a = ta ? A + i0 : A + (size_t)i0 * lda, *b = tb ? B + (size_t)j0 * ldb : B + j0;              \
            pt_blas_gemm_prepare();                                                                                 \
            CBLAS(CblasRowMajor, oa, ob, m, n, K, alpha, a, lda, b, ldb, beta, C + (size_t)i0 * ldc + j0, ldc);     \
        }                                                                                                           \
    }

PT_GRID_GEMM(pt_blas_sgemm, float, cblas_sgemm)
PT_GRID_GEMM(pt_blas_dgemm, double, cblas_dgemm)
