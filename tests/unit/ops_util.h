/* SPDX-License-Identifier: MIT */
/* Helpers of the op tests (tests/unit/test_ops_*.c):
 * fresh random inputs, error measures and the generic gradient check
 * (every backward of the double table against central finite differences
 * of a scalar loss, and the accumulate contract).  Header-only; every
 * function static inline so a test that leaves one unused stays
 * warning-free. */
#ifndef PTRAIN_TEST_OPS_UTIL_H
#define PTRAIN_TEST_OPS_UTIL_H
#include "backend/ops.h"
#include "core/core.h"
#include "tests/tap.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const pt_ops *D = &pt_cpu_ops_f64;
static pt_rng rng;

/* finite differences: step h = FD_EPS * max(1, |x|); error of one element
 * |analytic - numeric| / max(|analytic|, |numeric|, FD_FLOOR) */
#define FD_EPS 1e-6
#define FD_FLOOR 1e-2
#define FD_TOL 1e-5
#define FD_SAMPLES 256
/* float vs double: max|f - d| / max|d| per tensor */
#define MIXED_TOL 1e-5
/* 1 thread vs several: bit for bit.  Every reduction sums fixed blocks in
 * order and every GEMM runs on pt_blas_gemm's fixed tile grid, so the
 * thread count changes only who computes a piece (issue 34: OpenBLAS's
 * threaded GEMM did not hold this on its AVX2 kernels). */
#define THREAD_TOL 0.0

/* ---- helpers -------------------------------------------------------------- */
static inline void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);
    if (!p) {
        printf("Bail out! out of memory allocating %zu x %zu bytes\n", n, size);
        exit(1);
    }
    return p;
}
static inline double *dalloc(size_t n) { return xcalloc(n, sizeof(double)); }

static inline void randn(double *x, size_t n, double scale)
{
    for (size_t i = 0; i < n; i++) x[i] = scale * pt_rng_normal(&rng);
}
static inline void randu(double *x, size_t n, double lo, double hi)
{
    for (size_t i = 0; i < n; i++) x[i] = lo + (hi - lo) * pt_rng_uniform(&rng);
}
static inline int randint(int lo, int hi) /* in [lo, hi] */
{
    return lo + (int)(pt_rng_u64(&rng) % (uint64_t)(hi - lo + 1));
}
static inline double *ddup(const double *x, size_t n)
{
    double *y = dalloc(n);
    memcpy(y, x, n * sizeof(double));
    return y;
}
static inline double dot(const double *a, const double *b, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}
static inline double maxabs(const double *a, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs(a[i]));
    return m;
}
/* max|a - b| / max|b| (0 when both are all zero) */
static inline double relerr(const double *a, const double *b, size_t n)
{
    double e = 0, s = maxabs(b, n);
    for (size_t i = 0; i < n; i++) e = fmax(e, fabs(a[i] - b[i]));
    if (e != e) return INFINITY; /* NaN */
    return s > 0 ? e / s : e;
}
static inline int all_finite(const double *a, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(a[i])) return 0;
    return 1;
}

/* ---- generic gradient check ------------------------------------------------ */
/* One op under test: the tensors it differentiates with respect to, a loss
 * (forward + reduction to a scalar) and a backward into gradient buffers. */
typedef struct opcase opcase;
struct opcase {
    const char *name;
    double (*loss)(opcase *c);          /* forward, then the scalar loss */
    void (*bwd)(opcase *c, double **g); /* forward, then backward into g[i] */
    int writes;                         /* backward writes (xent_bwd) instead of += */
    int nw;
    const char *wname[4];
    double *w[4];
    size_t wn[4];
};

/* largest element error of g against central differences of c->loss over x */
static inline double fd_err(opcase *c, double *x, size_t n, const double *g, size_t *checked)
{
    size_t m = n <= FD_SAMPLES ? n : FD_SAMPLES;
    double worst = 0;
    for (size_t k = 0; k < m; k++) {
        size_t i = n <= FD_SAMPLES ? k : (size_t)(pt_rng_u64(&rng) % n);
        double x0 = x[i], h = FD_EPS * fmax(1, fabs(x0));
        double xp = x0 + h, xm = x0 - h;
        x[i] = xp;
        double lp = c->loss(c);
        x[i] = xm;
        double lm = c->loss(c);
        x[i] = x0;
        double num = (lp - lm) / (xp - xm);
        double e = fabs(num - g[i]) / fmax(fmax(fabs(num), fabs(g[i])), FD_FLOOR);
        if (!(e <= worst)) worst = e; /* NaN propagates */
    }
    *checked = m;
    return worst;
}

static double g_worst_fd = 0;

static inline void run_case(opcase *c)
{
    double *g[4], *p[4], *buf[4];
    for (int i = 0; i < c->nw; i++) g[i] = dalloc(c->wn[i]);
    c->bwd(c, g);
    c->loss(c); /* leave the caches of the unperturbed inputs */
    for (int i = 0; i < c->nw; i++) {
        size_t checked;
        double e = fd_err(c, c->w[i], c->wn[i], g[i], &checked);
        if (e > g_worst_fd || e != e) g_worst_fd = e;
        tap_ok(e <= FD_TOL && all_finite(g[i], c->wn[i]),
               "%s: d/d%s matches central differences (max rel err %.2e over %zu of %zu elements, "
               "max |grad| %.3g)",
               c->name, c->wname[i], e, checked, c->wn[i], maxabs(g[i], c->wn[i]));
    }
    /* the accumulate contract: prefill P, two calls give P + g and P + 2g */
    double e1 = 0, e2 = 0;
    for (int i = 0; i < c->nw; i++) {
        p[i] = dalloc(c->wn[i]);
        randn(p[i], c->wn[i], 1);
        buf[i] = ddup(p[i], c->wn[i]);
    }
    c->bwd(c, buf);
    for (int i = 0; i < c->nw; i++)
        for (size_t j = 0; j < c->wn[i]; j++) {
            double want = c->writes ? g[i][j] : p[i][j] + g[i][j];
            e1 = fmax(e1, fabs(buf[i][j] - want) / fmax(1, fabs(want)));
        }
    c->bwd(c, buf);
    for (int i = 0; i < c->nw; i++)
        for (size_t j = 0; j < c->wn[i]; j++) {
            double want = c->writes ? g[i][j] : p[i][j] + 2 * g[i][j];
            e2 = fmax(e2, fabs(buf[i][j] - want) / fmax(1, fabs(want)));
        }
    if (c->writes)
        tap_ok(e1 <= 1e-12 && e2 <= 1e-12,
               "%s: backward overwrites pre-filled gradients (documented), err %.1e / %.1e",
               c->name, e1, e2);
    else
        tap_ok(e1 <= 1e-12 && e2 <= 1e-12,
               "%s: backward accumulates: prefill + g after one call, + 2g after two "
               "(err %.1e / %.1e)",
               c->name, e1, e2);
    for (int i = 0; i < c->nw; i++) {
        free(g[i]);
        free(p[i]);
        free(buf[i]);
    }
}

/* The seed of this run: PTRAIN_TEST_SEED=<n>, else fresh (time, pid,
 * clock); printed as a TAP diagnostic.  Bails out on a malformed value. */
static inline uint64_t test_seed(void)
{
    uint64_t seed;
    const char *s = getenv("PTRAIN_TEST_SEED");
    if (s && *s) {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(s, &end, 10);
        if (errno || *end || *s == '-') {
            printf("Bail out! PTRAIN_TEST_SEED='%s' is not a non-negative decimal integer\n", s);
            exit(1);
        }
        seed = v;
    } else {
        seed = ((uint64_t)time(NULL) << 20) ^ (uint64_t)getpid() ^ (uint64_t)clock();
    }
    tap_diag("seed %llu (reproduce with PTRAIN_TEST_SEED=%llu)", (unsigned long long)seed, (unsigned long long)seed);
    return seed;
}

#endif
