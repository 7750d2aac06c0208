/* SPDX-License-Identifier: MIT */
/* Which BLAS kernels this process runs, chosen to match the CPU.
 *
 * OpenBLAS built with DYNAMIC_ARCH (Debian's is) carries kernels for many
 * CPUs and picks one table in its load-time constructor: from
 * OPENBLAS_CORETYPE if set, else from the CPU model.  A model it does not
 * know (0.3.21 on Sapphire Rapids) falls back to Prescott (SSE3), and an
 * OPENBLAS_CORETYPE inherited from the environment can pin a lower set
 * (Haswell on an AVX-512 CPU): sgemm then runs 2-4x below the core's rate.
 *
 * pt_blas_select() compares the table OpenBLAS chose with the CPU's ISA
 * level (cpuid through GCC's __builtin_cpu_supports, which also checks that
 * the OS saves the AVX/AVX-512 registers, XGETBV) and, when the table is
 * below it, re-runs OpenBLAS's own dispatch (gotoblas_dynamic_quit/init,
 * the functions its constructor calls) with OPENBLAS_CORETYPE set to the
 * matching table: SkylakeX for AVX-512 (F, CD, BW, DQ, VL), Haswell for
 * AVX2+FMA, Sandybridge for AVX.  This happens in-process, before the first
 * BLAS call, with no re-exec; the environment is left as it was.
 *
 * PTRAIN_BLAS_CORETYPE=<OpenBLAS core name> forces a table (the documented
 * way to run below the ISA, e.g. to compare); PTRAIN_BLAS_CORETYPE=keep
 * keeps whatever OpenBLAS chose.  An OPENBLAS_CORETYPE at or above the ISA
 * level is kept.
 *
 * The thread count is OpenBLAS's: with the OpenMP build (what configure
 * links when libopenblas-openmp-dev is installed) BLAS and the OpenMP
 * kernels share libgomp's one pool.  The pthreads build (selected at run
 * time by the libopenblas.so.0 alternative or LD_LIBRARY_PATH) keeps its
 * own pool: see pt_blas_gemm_prepare; and pt_blas_select restarts that
 * pool with OPENBLAS_THREAD_TIMEOUT=4 (idle workers sleep after 2^4
 * cycles instead of spinning 2^28 on the OpenMP kernels' cores) unless
 * the environment sets a timeout. */
#ifndef PTRAIN_BLAS_H
#define PTRAIN_BLAS_H
#include <stddef.h>

/* ISA levels, ordered: a kernel set runs on CPUs of its level and above */
enum { PT_ISA_UNKNOWN = -1, PT_ISA_SSE = 0, PT_ISA_AVX = 1, PT_ISA_AVX2 = 2, PT_ISA_AVX512 = 3 };

typedef struct pt_blas_info {
    char name[48];       /* "OpenBLAS 0.3.21" */
    char threading[16];  /* "OpenMP", "pthreads", "serial" */
    char coretype[32];   /* the kernel table in use, e.g. "SkylakeX" */
    int kernel_level;    /* PT_ISA_* of coretype (PT_ISA_UNKNOWN: name not in the table) */
    int cpu_level;       /* PT_ISA_* of this CPU */
    int threads;         /* BLAS threads outside parallel regions (openblas_get_num_threads, or the count
                          * pt_blas_gemm_prepare will restore) */
    int nest_guard;      /* 1: GEMMs inside OpenMP regions are held to one thread (pt_blas_gemm_prepare) */
    char reason[200];    /* how the table was chosen, one clause */
} pt_blas_info;

/* Make the BLAS run kernels that match this CPU (see above).  Idempotent and
 * thread-safe; pt_backend_get("cpu") calls it, so callers need not.  Must
 * run before any BLAS call made from several threads.  Returns 0; never
 * fails (a table that cannot be raised is reported in pt_blas_get_info's
 * reason and kernel_level). */
int pt_blas_select(void);

/* The state after pt_blas_select() (which it calls). */
void pt_blas_get_info(pt_blas_info *info);

/* One line for run headers: "OpenBLAS 0.3.21 (OpenMP), kernels SkylakeX
 * (avx512) on an avx512 CPU [reason], 2 threads; bf16 GEMM onednn (...)
 * on an amx_bf16 CPU [rule for amx_bf16]", the part after ';' being
 * pt_gemm_bf16_summary() (backend/gemm_bf16.h).  With the pthreads build
 * the parenthesis reads "(pthreads, 1 thread inside OpenMP regions, idle
 * workers sleep)" (or ", OPENBLAS_THREAD_TIMEOUT=<v> kept").  Under
 * PTRAIN_MAX_CPU_ISA the CPU reads "on an avx512 CPU run as avx2
 * (PTRAIN_MAX_CPU_ISA)" (a bad value: "(PTRAIN_MAX_CPU_ISA=<v>: valid
 * values are ...: ignored)").  Static buffer, valid until the next call.
 * (blas_report.c, above blas.c and gemm_bf16.c, as the GEMM probes.) */
const char *pt_blas_summary(void);

/* Called before every GEMM ptrain makes (the CPU tables' cblas_sgemm and
 * cblas_dgemm, pt_gemm_bf16's OpenBLAS paths), from the thread that calls
 * the ops or from a thread of one of its OpenMP parallel regions (never
 * from two unrelated threads at once).  With OpenBLAS's pthreads build
 * (Ubuntu's and Debian's default libopenblas0) a GEMM inside a region is
 * otherwise threaded again by OpenBLAS's own pool: the region's threads
 * queue behind one lock for that pool while its busy-waiting workers and
 * the OpenMP threads oversubscribe the cores (the tiny model: 3.1 s/step
 * at 16 threads on 16 cores, slower than one thread).  So inside a region
 * this lowers OpenBLAS to one thread (openblas_set_num_threads), and the
 * first GEMM outside one puts the count back: the GEMMs the region's
 * threads divide among themselves run one per thread, as OpenBLAS's OpenMP
 * build runs them (its num_cpu_avail returns 1 under omp_in_parallel()),
 * and whole-matrix GEMMs keep the BLAS threads.  No effect with the OpenMP
 * or serial builds or without OpenMP.  Never fails. */
void pt_blas_gemm_prepare(void);
/* ptrain's GEMM: C = alpha op(A) op(B) + beta C, row-major, with
 * cblas_sgemm's (cblas_dgemm's) contract: op(A) [M, K] (A stored [K, M]
 * when ta), op(B) [K, N] (B stored [N, K] when tb), C [M, N], lda/ldb/ldc
 * row strides in elements.  Every GEMM of the CPU tables and of the bf16
 * GEMM's sgemm path goes through it, so that no result depends on the
 * thread count:
 *   - called inside an OpenMP parallel region (omp_get_level() > 0, active
 *     or not: a region of one thread counts), it is one single-threaded
 *     BLAS call on the calling thread, as the regions' row blocks want
 *     (made inside a nested region, so that OpenBLAS's OpenMP build, which
 *     threads a call unless omp_in_parallel(), runs it on one thread also
 *     in a region of one thread while more are allowed);
 *   - called outside, C is cut in the fixed grid of tiles
 *     pt_blas_gemm_grid(M, N, K) gives, a function of the shape alone, and
 *     each tile is one single-threaded BLAS call; the tiles are spread over
 *     the OpenMP threads.
 * Why: OpenBLAS threads a GEMM by splitting C at rows and columns that
 * depend on the thread count, and its kernels for a tile's edge (the rows
 * and columns past the last full register block) sum in another order
 * than its main kernel on the Haswell/Zen kernel sets (not on SkylakeX), so
 * a threaded GEMM's result changed with the thread count on AVX2 CPUs
 * (issue 34).  The price: each tile packs its own panels of the operand it
 * shares with the other tiles (OpenBLAS's threads share them), which the
 * grid's minimum tile size keeps small (bench/bench-gemm-grid).  No
 * failure: a shape with M or N < 1 does nothing. */
void pt_blas_sgemm(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B, int ldb,
                   float beta, float *C, int ldc);
void pt_blas_dgemm(int ta, int tb, int M, int N, int K, double alpha, const double *A, int lda, const double *B,
                   int ldb, double beta, double *C, int ldc);
/* The tile grid of pt_blas_sgemm/dgemm for C [M, N] with inner size K:
 * tiles of *tm rows and *tn columns (the last ones smaller).  One tile
 * (*tm = M, *tn = N) for GEMMs under PT_GEMM_GRID_MIN multiply-adds; else
 * the longer of M and N is cut in tiles of at least PT_GEMM_TILE_MIN (512
 * where the other operand's panel is large), a multiple of 64, about
 * PT_GEMM_TILES of them. */
void pt_blas_gemm_grid(int M, int N, int K, int *tm, int *tn);

/* Set OpenBLAS's thread count to n (< 1: 1) for GEMMs outside parallel
 * regions, replacing any count pt_blas_gemm_prepare would restore.  The
 * cpu backend's set_threads calls it (with omp_set_num_threads). */
void pt_blas_set_threads(int n);
/* 1 when pt_blas_gemm_prepare holds GEMMs in OpenMP regions to one thread
 * (an OpenBLAS pthreads build in an OpenMP build of ptrain), else 0. */
int pt_blas_nest_guard(void);
/* What pt_blas_select did to the pthreads build's pool, as
 * pt_blas_summary's parenthesis says it: ", idle workers sleep",
 * ", OPENBLAS_THREAD_TIMEOUT=<v> kept", or "" (nothing done: the OpenMP or
 * serial build, or no OpenMP).  Static; calls pt_blas_select. */
const char *pt_blas_pool_note(void);
/* This CPU's ISA level (PT_ISA_*), from cpuid; PT_ISA_UNKNOWN off x86. */
int pt_cpu_isa_level(void);

/* The ISA level ptrain's own kernels run at and pt_blas_select matches the
 * BLAS kernels to: this CPU's level (pt_cpu_isa_level), or lower where
 * PTRAIN_MAX_CPU_ISA=sse|avx|avx2|avx512 (case-insensitive; as oneDNN's
 * ONEDNN_MAX_CPU_ISA) caps it, so that an AVX-512 machine runs the code an
 * AVX2-only CPU runs: ptrain's row kernels' AVX2 copies (cpu_rows.inc),
 * OpenBLAS's Haswell kernels, and no bf16 instructions (pt_bf16_isa).  A cap
 * at or above the CPU changes nothing.  Read once per process; a value
 * that is not one of those is ignored (pt_kernel_isa_check says so).
 * PT_ISA_UNKNOWN off x86. */
int pt_kernel_isa_level(void);
/* PT_OK, or PT_EINVAL with "PTRAIN_MAX_CPU_ISA=<v>: valid values are sse,
 * avx, avx2, avx512" when the variable holds something else (ptrain-run
 * refuses to start on it). */
int pt_kernel_isa_check(void);

/* ISA level of an OpenBLAS core name (case-insensitive: "Haswell",
 * "SkylakeX", "Prescott", ...); PT_ISA_UNKNOWN for names not in the table. */
int pt_blas_core_level(const char *corename);

/* "sse", "avx", "avx2", "avx512" or "unknown". */
const char *pt_isa_name(int level);

/* ---- the GEMM probes (blas_report.c) ---- */

/* The fp32 GEMM rate of one core: the best of `reps` timed
 * cblas_sgemm calls C[n, n] = A[n, n] B[n, n] with inputs of fresh random
 * values and the BLAS held to one thread (restored after), in GFLOP/s
 * (2 n^3 flops per call, PaLM appendix B's count).  What ptrain-topo
 * --probe records as the node model's "gemm_gflops" (the planner scales it
 * by the cores per rank).  Returns the rate, or -1 when n < 16, n > 8192,
 * reps < 1 or memory runs out. */
double pt_blas_sgemm_gflops(int n, int reps);

/* The same for C[m, n] = A[m, k] B[k, n] (2 m k n flops per call): how
 * the rate of one core depends on a GEMM's rows m (a microbatch's rows
 * under a layout), for ptrain-topo --probe's Hockney fit (the node
 * model's "gemm_fit").  Returns the rate (GFLOP/s), or -1 when a size is
 * < 1 or > 8192, reps < 1 or memory runs out. */
double pt_blas_sgemm_mkn_gflops(int m, int k, int n, int reps);

/* The bf16 GEMM rate of one core, measured as pt_blas_sgemm_gflops: the
 * best of `reps` timed pt_gemm_bf16 calls (lib/backend/gemm_bf16.h: the
 * implementation this process chose, oneDNN's AMX/AVX512_BF16 kernels or,
 * on CPUs without bf16 instructions, fp32 sgemm on converted tiles)
 * C[n, n] = A[n, n] B[n, n], bf16 operands of fresh random values, fp32 C,
 * after one untimed call, with OpenBLAS and the OpenMP pool held to one
 * thread (restored after); GFLOP/s (2 n^3 flops per call).  What
 * ptrain-topo --probe records as the node model's "gemm_gflops_bf16" (the
 * planner's rate for bf16 plans).  Returns the rate, or -1 when n < 16,
 * n > 8192, reps < 1, memory runs out or pt_gemm_bf16 fails (pt_errmsg()
 * says why, e.g. a PTRAIN_BF16_GEMM that cannot run here). */
double pt_blas_bf16_gemm_gflops(int n, int reps);

#endif
