/* SPDX-License-Identifier: MIT */
/* ptrain core: errors, logging, arena, tensors, RNG. */
#define _POSIX_C_SOURCE 200809L
#include "core/core.h"

#include <errno.h>
#include <limits.h>
#ifdef __GLIBC__
#include <malloc.h> /* mallopt: pt_host_memory_keep */
#endif
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The calling thread's last error message (core.h: the error convention). */
static _Thread_local char last_error[PT_ERROR_LEN];

int pt_fail(int code, const char *fmt, ...)
{
    /* Arguments may alias last_error (pt_fail(code, "context: %s",
     * pt_errmsg())), and vsnprintf with overlapping source and destination
     * is undefined behaviour: format into a temporary. */
    char tmp[PT_ERROR_LEN];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0) snprintf(tmp, sizeof tmp, "(unformattable error message)");
    /* one line: a message must never break the caller's log format */
    for (char *c = tmp; *c; c++)
        if (*c == '\n' || *c == '\r') *c = ' ';
    memcpy(last_error, tmp, sizeof tmp);
    return code;
}

const char *pt_errmsg(void) { return last_error; }

void pt_error_save(pt_errsave *s) { memcpy(s->text, last_error, sizeof s->text); }

void pt_error_restore(const pt_errsave *s) { memcpy(last_error, s->text, sizeof last_error); }

void pt_error_clear(void) { last_error[0] = '\0'; }

const char *pt_strerror(int code)
{
    switch (code) {
    case PT_OK: return "success";
    case PT_EINVAL: return "invalid argument";
    case PT_EIO: return "I/O error";
    case PT_ENOMEM: return "out of memory";
    case PT_EFORMAT: return "malformed file";
    case PT_ECOMM: return "communication error";
    case PT_EUNSUPP: return "not supported";
    default: return "unknown error";
    }
}

static int log_level = 1;
static int log_rank = -1;

void pt_log_set_level(int level) { log_level = level; }
void pt_log_set_rank(int rank) { log_rank = rank; }

void pt_log(int level, const char *fmt, ...)
{
    if (level > log_level) return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (log_rank >= 0) fprintf(stderr, "ptrain[%d]: %s\n", log_rank, line);
    else fprintf(stderr, "ptrain: %s\n", line);
}

/* Each block carries a 64-byte header holding its size, so free() can
 * uncharge it and the payload stays 64-byte aligned. */
#define PT_HDR 64

static void *host_alloc(size_t bytes)
{
    void *raw = NULL;
    if (posix_memalign(&raw, 64, bytes + PT_HDR) != 0) return NULL;
    memset(raw, 0, bytes + PT_HDR);
    *(size_t *)raw = bytes;
    return (char *)raw + PT_HDR;
}

static size_t host_free(void *p)
{
    char *raw = (char *)p - PT_HDR;
    size_t bytes = *(size_t *)raw;
    free(raw);
    return bytes;
}

const pt_arena_mem pt_arena_mem_host = {PT_DEV_CPU, host_alloc, host_free};

const char *pt_dtype_name(pt_dtype t)
{
    switch (t) {
    case PT_F32: return "fp32";
    case PT_BF16: return "bf16";
    case PT_F64: return "fp64";
    }
    return "?";
}

const char *pt_device_name(pt_device d)
{
    switch (d) {
    case PT_DEV_CPU: return "cpu";
    case PT_DEV_CUDA: return "cuda";
    }
    return "unknown";
}

void pt_arena_init(pt_arena *a, const pt_arena_mem *mem, size_t limit)
{
    memset(a, 0, sizeof *a);
    a->mem = mem;
    a->limit = limit;
}

static const pt_arena_mem *arena_mem(const pt_arena *a) { return a->mem ? a->mem : &pt_arena_mem_host; }

pt_device pt_arena_device(const pt_arena *a) { return arena_mem(a)->device; }

void *pt_arena_alloc(pt_arena *a, size_t bytes)
{
    if (a->limit && a->cur + bytes > a->limit) {
        pt_fail(PT_ENOMEM, "arena limit exceeded: %zu bytes in use + %zu requested > limit %zu",
                a->cur, bytes, a->limit);
        return NULL;
    }
    void *p = arena_mem(a)->alloc(bytes);
    if (!p) {
        pt_fail(PT_ENOMEM, "out of memory allocating %zu bytes of %s memory", bytes, pt_device_name(pt_arena_device(a)));
        return NULL;
    }
    a->cur += bytes;
    a->nallocs++;
    if (a->cur > a->peak) a->peak = a->cur;
    return p;
}

void pt_arena_free(pt_arena *a, void *p)
{
    if (!p) return;
    a->cur -= arena_mem(a)->free(p);
    a->nallocs--;
}

void pt_arena_reset_peak(pt_arena *a) { a->peak = a->cur; }

int pt_host_memory_keep(void)
{
#if defined(__GLIBC__) && defined(M_MMAP_THRESHOLD) && defined(M_TRIM_THRESHOLD)
    /* both fixed values also stop glibc's dynamic threshold */
    int ok = mallopt(M_MMAP_THRESHOLD, 1 << 30);
    ok &= mallopt(M_TRIM_THRESHOLD, INT_MAX);
    return ok ? 1 : 0;
#else
    return 0;
#endif
}

int pt_tensor_alloc(pt_arena *a, pt_tensor *t, int ndim, const int64_t *shape)
{
    if (ndim < 1 || ndim > PT_MAX_DIMS)
        return pt_fail(PT_EINVAL, "tensor rank %d outside 1..%d", ndim, PT_MAX_DIMS);
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] <= 0) return pt_fail(PT_EINVAL, "tensor dimension %d is %lld, must be > 0", i, (long long)shape[i]);
        n *= shape[i];
    }
    memset(t, 0, sizeof *t);
    t->data = pt_arena_alloc(a, (size_t)n * sizeof(float));
    if (!t->data) return PT_ENOMEM;
    t->ndim = ndim;
    for (int i = 0; i < ndim; i++) t->shape[i] = shape[i];
    t->numel = n;
    return PT_OK;
}

void pt_tensor_free(pt_arena *a, pt_tensor *t)
{
    pt_arena_free(a, t->data);
    memset(t, 0, sizeof *t);
}

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void pt_rng_seed(pt_rng *r, uint64_t seed, uint64_t stream)
{
    uint64_t x = seed ^ (stream * 0xd1b54a32d192ed03ULL);
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&x);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t pt_rng_u64(pt_rng *r)
{
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double pt_rng_uniform(pt_rng *r) { return (double)(pt_rng_u64(r) >> 11) * 0x1.0p-53; }

double pt_rng_normal(pt_rng *r)
{
    double u1 = pt_rng_uniform(r), u2 = pt_rng_uniform(r);
    if (u1 < 1e-300) u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

double pt_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int pt_parse_int(const char *what, const char *s, long lo, long hi, long *out)
{
    if (!s || !*s) return pt_fail(PT_EINVAL, "%s: empty value, expected an integer in %ld..%ld", what, lo, hi);
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < lo || v > hi)
        return pt_fail(PT_EINVAL, "%s: '%s' is not an integer in %ld..%ld", what, s, lo, hi);
    *out = v;
    return PT_OK;
}
