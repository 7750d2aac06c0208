/* SPDX-License-Identifier: MIT */
/* ptrain core: error reporting, logging, tracked memory (the arena) and
 * tensor views.  Everything in libptrain returns an int status (PT_OK or a
 * negative PT_E* code) and leaves a one-line message retrievable with
 * pt_errmsg(); nothing in the library calls exit().
 */
#ifndef PTRAIN_CORE_H
#define PTRAIN_CORE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "core/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- status codes ----------------------------------------------------- */
enum {
    PT_OK = 0,
    PT_EINVAL = -1,   /* bad argument, option or configuration value */
    PT_EIO = -2,      /* file could not be read or written */
    PT_ENOMEM = -3,   /* allocation failed or arena limit exceeded */
    PT_EFORMAT = -4,  /* file content malformed (bad magic, truncated) */
    PT_ECOMM = -5,    /* MPI / collective failure */
    PT_EUNSUPP = -6,  /* valid request that this build/version cannot do */
};

/* ---- the error convention ----------------------------------------------
 * ptrain has ONE error convention, in every layer (lib/, topo/, spank/,
 * bin/): a function that can fail returns an int, PT_OK (0) or a negative
 * PT_E* code above (a function returning a pointer returns NULL), and
 * records one line of text for the calling thread naming the bad value and
 * what would be valid, through `return pt_fail(PT_EINVAL, "...")`.  The
 * caller reads that line with pt_errmsg(), as it would read errno or
 * dlerror(): a per-thread "last error", valid until the next pt_fail on
 * that thread, so read it (or add a context to it with
 * `pt_fail(rc, "file %s: %s", path, pt_errmsg())`) before calling anything
 * else that may fail.  No error buffers are passed between functions.  A
 * quiet check that must not disturb a message the caller still needs
 * brackets itself with pt_error_save()/pt_error_restore(). */

/* Record a one-line error message (printf format; '\n' and '\r' become
 * spaces; cut to PT_ERROR_LEN - 1 bytes) for the calling thread and return
 * `code` so callers can write `return pt_fail(PT_EINVAL, "...")`.  An
 * argument may be pt_errmsg() itself: the message is formatted into a
 * temporary first. */
int pt_fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The last message recorded by pt_fail() on this thread ("" if none). */
const char *pt_errmsg(void);
/* A copy of the calling thread's message, for a quiet check that may fail
 * without the caller wanting its message: pt_error_save(&s); ...;
 * pt_error_restore(&s) puts the earlier message back. */
typedef struct pt_errsave {
    char text[PT_ERROR_LEN];
} pt_errsave;
void pt_error_save(pt_errsave *s);
void pt_error_restore(const pt_errsave *s);
/* Empty the calling thread's message (as `errno = 0` before a call whose
 * success must leave nothing behind to be read). */
void pt_error_clear(void);
/* Short name of a status code ("invalid argument", ...). */
const char *pt_strerror(int code);

/* ---- logging ----------------------------------------------------------- */
/* Levels: 0 = errors only, 1 = info (default), 2 = debug.  Messages go to
 * stderr prefixed with "ptrain[rank]: ". */
void pt_log_set_level(int level);
void pt_log_set_rank(int rank);
void pt_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- element types ------------------------------------------------------- */
/* What a tensor's elements are.  The ops tables (lib/backend/ops.h) have
 * two roles, each one of these: ACT (activations, their gradients, the
 * weight copies the GEMMs read; the run's precision) and ACC (master
 * weights, weight gradients, AdamW moments, LayerNorm and softmax
 * statistics, losses: fp32, fp64 in the reference table). */
typedef enum pt_dtype {
    PT_F32 = 0,  /* IEEE-754 binary32 */
    PT_BF16 = 1, /* bfloat16: the high 16 bits of a binary32 (Kalamkar et al. 2019), stored as uint16_t */
    PT_F64 = 2,  /* IEEE-754 binary64 (the tests' reference table) */
} pt_dtype;

/* Bytes of one element: 4, 2, 8 (0 for a value outside pt_dtype). */
static inline size_t pt_dtype_size(pt_dtype t)
{
    return t == PT_F32 ? 4 : t == PT_BF16 ? 2 : t == PT_F64 ? 8 : 0;
}
/* "fp32", "bf16", "fp64" ("?" otherwise). */
const char *pt_dtype_name(pt_dtype t);
/* p advanced by n elements of type t (byte arithmetic on an untyped tensor pointer). */
static inline void *pt_elem(const void *p, size_t n, pt_dtype t)
{
    return (char *)(uintptr_t)p + n * pt_dtype_size(t);
}

/* One bfloat16 value: sign, 8 exponent bits, 7 fraction bits. */
typedef uint16_t pt_bf16;

/* fp32 -> bf16 rounded to nearest, ties to even (IEEE 754 roundTiesToEven
 * applied at bit 16; subnormals round the same way, magnitudes at or above
 * 0x1.ffp127 round to inf).  NaN stays NaN: sign and top 7 payload bits
 * kept, quiet bit set, so a signalling NaN whose payload lies in the low 16
 * bits does not become inf.  The one definition: lib/backend/gemm_bf16.h
 * (the bf16 GEMM and its array forms pt_f32_to_bf16_n, pt_bf16_to_f32_n)
 * uses this pair. */
static inline pt_bf16 pt_f32_to_bf16(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    uint32_t q = (u >> 16) | 0x40u;
    return (pt_bf16)((u & 0x7fffffffu) > 0x7f800000u ? q : r);
}

/* bf16 -> fp32: exact (the 16 bits become the high half). */
static inline float pt_bf16_to_f32(pt_bf16 h)
{
    uint32_t u = (uint32_t)h << 16;
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* ---- arena: tracked allocations ---------------------------------------- */
/* Where tensor memory lives.  The backend that computes on a buffer must
 * be able to address it (lib/backend/ops.h: pt_backend.mem). */
typedef enum pt_device {
    PT_DEV_CPU = 0,  /* host memory (malloc) */
    PT_DEV_CUDA = 1, /* device memory of the rank's GPU (cudaMalloc), no backend in this build yet */
} pt_device;

/* "cpu" / "cuda" */
const char *pt_device_name(pt_device d);

/* How an arena gets memory on its device: a backend provides one.
 * alloc returns a zeroed, 64-byte aligned block of `bytes` bytes (NULL on
 * failure); free releases it and returns its size in bytes (the arena
 * cannot read a header in device memory, so the allocator keeps sizes). */
typedef struct pt_arena_mem {
    pt_device device;
    void *(*alloc)(size_t bytes);
    size_t (*free)(void *p);
} pt_arena_mem;

/* Host memory (posix_memalign + a size header); what a zeroed arena uses. */
extern const pt_arena_mem pt_arena_mem_host;

/* A per-rank accounting allocator.  Every tensor, parameter, gradient,
 * optimizer state and activation buffer of a model comes from one arena, so
 * `cur` and `peak` are the rank's training memory in bytes (what the memory
 * tables of the layouts compare).  `limit` (bytes, 0 = none) makes
 * allocations beyond it fail with PT_ENOMEM, which is how tests ask "does
 * this configuration fit in N bytes per rank".  The arena's memory lives on
 * one device (`mem`, NULL = host): `pt_arena a = {0}` is a host arena;
 * pt_arena_init(&a, be->mem, limit) gives one on backend be's device. */
typedef struct pt_arena {
    size_t cur;    /* bytes currently allocated */
    size_t peak;   /* high-water mark of cur, bytes */
    size_t limit;  /* 0 = unlimited */
    size_t nallocs;
    const pt_arena_mem *mem; /* allocator and device; NULL = pt_arena_mem_host */
} pt_arena;

/* An empty arena on mem's device (NULL: host) with a limit in bytes (0 = none). */
void pt_arena_init(pt_arena *a, const pt_arena_mem *mem, size_t limit);
/* The device an arena's memory lives on. */
pt_device pt_arena_device(const pt_arena *a);

/* Zeroed, 64-byte aligned block of `bytes` bytes on the arena's device,
 * charged to `a`.  Returns NULL (and records PT_ENOMEM via pt_fail) when the
 * allocator fails or the limit would be exceeded. */
void *pt_arena_alloc(pt_arena *a, size_t bytes);
/* Release a block from pt_arena_alloc (NULL is ignored). */
void pt_arena_free(pt_arena *a, void *p);
/* Reset the high-water mark to the current usage. */
void pt_arena_reset_peak(pt_arena *a);

/* Keep freed host memory in the process for the next allocation: with
 * glibc, serve blocks up to 1 GiB from the heap instead of a fresh mmap
 * each (M_MMAP_THRESHOLD) and never give the heap's top back
 * (M_TRIM_THRESHOLD).  A training step frees and re-allocates the same
 * large blocks every step (ZeRO's gathered units and gradients, MPI's
 * temporary buffers of an allreduce or reduce), and a fresh mapping pays
 * its page faults on each: 51 MiB cost 160-220 ms per step on this
 * project's VMs against 9 ms with the memory kept (bench/bench-coll, a
 * ZeRO-2 step).  PyTorch's caching allocator keeps device memory for the
 * same reason.  Process-wide; call once at start-up, before MPI_Init (the
 * programs ptrain-run and bench-* do).  Returns 1 when both settings took,
 * 0 when the C library refused or lacks them (not glibc). */
int pt_host_memory_keep(void);

/* ---- tensors ------------------------------------------------------------ */
#define PT_MAX_DIMS 4
/* A dense row-major fp32 view.  Shapes follow the papers' notation:
 * activations are [B, T, C], weights [out, in] (PyTorch's nn.Linear layout,
 * so Y = X W^T). */
typedef struct pt_tensor {
    float *data;
    int ndim;
    int64_t shape[PT_MAX_DIMS];
    int64_t numel;
} pt_tensor;

/* Allocate a zeroed tensor of the given shape from `a` (ndim 1..4).
 * Returns PT_OK, PT_EINVAL for a bad shape, PT_ENOMEM. */
int pt_tensor_alloc(pt_arena *a, pt_tensor *t, int ndim, const int64_t *shape);
void pt_tensor_free(pt_arena *a, pt_tensor *t);

/* ---- small utilities ------------------------------------------------------ */
/* Deterministic RNG: xoshiro256** seeded through splitmix64.  Streams are
 * derived from (seed, stream id) so that every parameter gets the same
 * initial values whatever the layout or world size. */
typedef struct pt_rng { uint64_t s[4]; } pt_rng;
void pt_rng_seed(pt_rng *r, uint64_t seed, uint64_t stream);
uint64_t pt_rng_u64(pt_rng *r);
/* uniform in [0, 1) */
double pt_rng_uniform(pt_rng *r);
/* standard normal (Box-Muller) */
double pt_rng_normal(pt_rng *r);

/* Wall-clock seconds (CLOCK_MONOTONIC). */
double pt_now(void);

/* Parse a strictly positive/non-negative decimal integer; returns PT_EINVAL
 * with a message naming `what` when `s` is not an integer in [lo, hi]. */
int pt_parse_int(const char *what, const char *s, long lo, long hi, long *out);


#ifdef __cplusplus
}
#endif
#endif
