/* SPDX-License-Identifier: MIT */
/* Llama's CUDA kernels (lib/backend/cuda/layernorm.cu's RMSNorm, whole rows
 * and the column pieces; eltwise.cu's RoPE and SwiGLU) against the CPU
 * tables of the same precision (pt_cpu_ops_f32, pt_cpu_ops_bf16), in
 * llm.c's dev/cuda pattern as tests/gpu/test_ops_norm.c: fresh random inputs
 * (bf16 inputs are bf16 on both sides, so only the arithmetic differs), the
 * CPU op on host copies, the device op on device copies, max|gpu-cpu| /
 * max|cpu| per output with a tolerance, a timing line per op at Llama 3.1
 * 8B's shapes.  Odd shapes (N 37, C 50, HS 8 with a row stride past the
 * heads), Llama's widths (C 4096, HS 128, F 14336 / 2 for time), a
 * position offset t0 with the llama3-scaled table, rstd in the sums'
 * buffer (ops.h allows it), dinp NULL.  Skips without a GPU;
 * PTRAIN_GPU_QUICK=1 leaves out the timing (compute-sanitizer runs). */
#define _POSIX_C_SOURCE 200809L
#include "config.h"

#include <cuda_runtime_api.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_priv.h"
#include "backend/cuda/ops_cuda.h"
#include "backend/ops.h"
#include "gpu_tap.h"
#include "tests/tap.h"

/* the device functions of one table, as ops.h's entries */
typedef struct {
    void (*rmsnorm_fwd)(void *, void *, const void *, const void *, int, int, double);
    void (*rmsnorm_bwd)(void *, void *, const void *, const void *, const void *, const void *, int, int);
    void (*rmsnorm_rowsumsq)(void *, const void *, int, int);
    void (*rmsnorm_apply)(void *, void *, const void *, const void *, const void *, int, int, int, double);
    void (*rmsnorm_bwd_rowsums)(void *, const void *, const void *, const void *, const void *, int, int);
    void (*rmsnorm_bwd_apply)(void *, void *, const void *, const void *, const void *, const void *, const void *,
                              int, int, int);
    void (*rope_fwd)(void *, const void *, int, int, int, int, int, int);
    void (*rope_bwd)(void *, const void *, int, int, int, int, int, int);
    void (*swiglu_fwd)(void *, const void *, int, int);
    void (*swiglu_bwd)(void *, const void *, const void *, int, int);
} gops;

#define GOPS(S)                                                                                                        \
    {                                                                                                                  \
        pt_cuda_rmsnorm_fwd_##S, pt_cuda_rmsnorm_bwd_##S, pt_cuda_rmsnorm_rowsumsq_##S, pt_cuda_rmsnorm_apply_##S,     \
            pt_cuda_rmsnorm_bwd_rowsums_##S, pt_cuda_rmsnorm_bwd_apply_##S, pt_cuda_rope_fwd_##S,                      \
            pt_cuda_rope_bwd_##S, pt_cuda_swiglu_fwd_##S, pt_cuda_swiglu_bwd_##S                                       \
    }
static const gops gops_f32 = GOPS(f32), gops_bf16 = GOPS(bf16);

typedef struct {
    const char *name;
    const pt_ops *cpu;
    const gops *g;
    int bf;
    double tact, tacc;
} table;

typedef struct {
    size_t n;
    int bf;
    void *h, *d;
} buf;

static size_t esz(const buf *b) { return b->bf ? 2 : 4; }
static double hget(const buf *b, const void *raw, size_t i)
{
    return b->bf ? gpu_bf16_to_f32(((const uint16_t *)raw)[i]) : ((const float *)raw)[i];
}

static void die(const char *what)
{
    printf("Bail out! %s: %s\n", what, pt_errmsg());
    exit(1);
}

static void upload(buf *b)
{
    if (pt_cuda_to_device(b->d, b->h, b->n * esz(b)) != PT_OK) die("upload");
}

/* n values offset + scale * U[-1, 1), ACT (act 1) or fp32, the same bits on both sides */
static buf mk(const table *t, int act, size_t n, double scale, double offset)
{
    buf b = {n, act && t->bf, NULL, NULL};
    b.h = malloc(n * esz(&b) + 4);
    b.d = pt_cuda_mem.alloc(n * esz(&b) + 4);
    if (!b.h || !b.d) die("allocation");
    for (size_t i = 0; i < n; i++) {
        float v = (float)(offset + scale * gpu_urand());
        if (b.bf) ((uint16_t *)b.h)[i] = gpu_f32_to_bf16(v);
        else ((float *)b.h)[i] = v;
    }
    upload(&b);
    return b;
}

/* the RoPE table [Tmax, HS/2, 2] (fp32 on both sides) */
static buf mk_rope(int Tmax, int HS, double factor)
{
    buf b = {(size_t)Tmax * HS, 0, NULL, NULL};
    b.h = malloc(b.n * 4);
    b.d = pt_cuda_mem.alloc(b.n * 4);
    if (!b.h || !b.d) die("allocation");
    if (pt_rope_table(b.h, Tmax, HS, 500000.0, factor, 1.0, 4.0, 8192) != PT_OK) die("pt_rope_table");
    upload(&b);
    return b;
}

static void drop(buf *b)
{
    free(b->h);
    pt_cuda_mem.free(b->d);
    b->h = b->d = NULL;
}

static double relerr(const buf *b)
{
    void *g = malloc(b->n * esz(b) + 4);
    if (!g || pt_cuda_to_host(g, b->d, b->n * esz(b)) != PT_OK) {
        free(g);
        return INFINITY;
    }
    double e = 0, m = 0;
    for (size_t i = 0; i < b->n; i++) {
        double want = hget(b, b->h, i), got = hget(b, g, i);
        if (!(fabs(got - want) <= e)) e = isnan(got - want) ? INFINITY : fabs(got - want);
        if (fabs(want) > m) m = fabs(want);
    }
    free(g);
    return e / (m > 0 ? m : 1);
}

static void check(const table *t, const char *op, const char *shape, const char *out, const buf *b, double tol)
{
    int rc = pt_cuda_sync();
    if (rc == PT_OK) rc = pt_cuda_ops_status();
    double err = rc == PT_OK ? relerr(b) : INFINITY;
    tap_ok(rc == PT_OK && err <= tol, "%s %s %s: %s max|gpu-cpu|/max|cpu| = %.2e (tol %.0e)%s%s", t->name, op, shape,
           out, err, tol, rc != PT_OK ? ": " : "", rc != PT_OK ? pt_cuda_ops_errmsg() : "");
    if (rc != PT_OK) pt_cuda_ops_clear();
}

/* ---- RMSNorm ------------------------------------------------------------------------------------------ */

static void test_rmsnorm(const table *t, int N, int C, double eps)
{
    char shape[64];
    snprintf(shape, sizeof shape, "N=%d C=%d eps=%g", N, C, eps);
    const pt_ops *c = t->cpu;
    const gops *g = t->g;
    const size_t nc = (size_t)N * C;
    buf inp = mk(t, 1, nc, 2, 0.3), w = mk(t, 1, C, 0.5, 1), out = mk(t, 1, nc, 1, 0), rstd = mk(t, 0, N, 1, 0);
    c->rmsnorm_fwd(out.h, rstd.h, inp.h, w.h, N, C, eps);
    g->rmsnorm_fwd(out.d, rstd.d, inp.d, w.d, N, C, eps);
    check(t, "rmsnorm_fwd", shape, "out", &out, t->tact);
    check(t, "rmsnorm_fwd", shape, "rstd", &rstd, t->tacc);
    upload(&rstd); /* the backward from the CPU's rstd on both sides */
    buf dout = mk(t, 1, nc, 1, 0), dinp = mk(t, 1, nc, 1, 0), dw = mk(t, 0, C, 1, 0);
    c->rmsnorm_bwd(dinp.h, dw.h, dout.h, inp.h, w.h, rstd.h, N, C);
    g->rmsnorm_bwd(dinp.d, dw.d, dout.d, inp.d, w.d, rstd.d, N, C);
    check(t, "rmsnorm_bwd", shape, "dinp (+=)", &dinp, t->tact);
    check(t, "rmsnorm_bwd", shape, "dw (+=)", &dw, t->tacc);
    c->rmsnorm_bwd(NULL, dw.h, dout.h, inp.h, w.h, rstd.h, N, C);
    g->rmsnorm_bwd(NULL, dw.d, dout.d, inp.d, w.d, rstd.d, N, C);
    check(t, "rmsnorm_bwd", shape, "dw (+=, dinp NULL)", &dw, t->tacc);
    drop(&inp), drop(&w), drop(&out), drop(&rstd), drop(&dout), drop(&dinp), drop(&dw);
}

/* the pieces on a column piece of Cl of C columns */
static void test_rmsnorm_pieces(const table *t, int N, int Cl, int C, double eps)
{
    char shape[64];
    snprintf(shape, sizeof shape, "N=%d Cl=%d C=%d", N, Cl, C);
    const pt_ops *c = t->cpu;
    const gops *g = t->g;
    const size_t nc = (size_t)N * Cl;
    buf x = mk(t, 1, nc, 2, 0.3), w = mk(t, 1, Cl, 0.5, 1), sq = mk(t, 0, N, 1, 0), out = mk(t, 1, nc, 1, 0);
    c->rmsnorm_rowsumsq(sq.h, x.h, N, Cl);
    g->rmsnorm_rowsumsq(sq.d, x.d, N, Cl);
    check(t, "rmsnorm_rowsumsq", shape, "sqsum", &sq, t->tacc);
    /* the group total (this piece's times C/Cl), rstd written over it */
    for (int n = 0; n < N; n++) ((float *)sq.h)[n] *= (float)C / (float)Cl;
    upload(&sq);
    c->rmsnorm_apply(out.h, sq.h, x.h, sq.h, w.h, N, Cl, C, eps);
    g->rmsnorm_apply(out.d, sq.d, x.d, sq.d, w.d, N, Cl, C, eps);
    check(t, "rmsnorm_apply", shape, "out", &out, t->tact);
    check(t, "rmsnorm_apply", shape, "rstd (in the sqsum buffer)", &sq, t->tacc);
    upload(&sq);
    buf dy = mk(t, 1, nc, 1, 0), s = mk(t, 0, N, 1, 0), dx = mk(t, 1, nc, 1, 0), dw = mk(t, 0, Cl, 1, 0);
    c->rmsnorm_bwd_rowsums(s.h, dy.h, x.h, w.h, sq.h, N, Cl);
    g->rmsnorm_bwd_rowsums(s.d, dy.d, x.d, w.d, sq.d, N, Cl);
    check(t, "rmsnorm_bwd_rowsums", shape, "s", &s, t->tacc);
    for (int n = 0; n < N; n++) ((float *)s.h)[n] *= (float)C / (float)Cl;
    upload(&s);
    c->rmsnorm_bwd_apply(dx.h, dw.h, dy.h, x.h, w.h, sq.h, s.h, N, Cl, C);
    g->rmsnorm_bwd_apply(dx.d, dw.d, dy.d, x.d, w.d, sq.d, s.d, N, Cl, C);
    check(t, "rmsnorm_bwd_apply", shape, "dx (+=)", &dx, t->tact);
    check(t, "rmsnorm_bwd_apply", shape, "dw (+=)", &dw, t->tacc);
    drop(&x), drop(&w), drop(&sq), drop(&out), drop(&dy), drop(&s), drop(&dx), drop(&dw);
}

/* ---- RoPE, SwiGLU ------------------------------------------------------------------------------------- */

static void test_rope(const table *t, int B, int T, int t0, int nh, int HS, int ld, double factor)
{
    char shape[96];
    snprintf(shape, sizeof shape, "B=%d T=%d t0=%d nh=%d HS=%d ld=%d factor %g", B, T, t0, nh, HS, ld, factor);
    buf cs = mk_rope(t0 + T, HS, factor), x = mk(t, 1, (size_t)B * T * ld, 1, 0);
    t->cpu->rope_fwd(x.h, cs.h, B, T, t0, nh, HS, ld);
    t->g->rope_fwd(x.d, cs.d, B, T, t0, nh, HS, ld);
    check(t, "rope_fwd", shape, "x (in place)", &x, t->tact);
    upload(&x);
    t->cpu->rope_bwd(x.h, cs.h, B, T, t0, nh, HS, ld);
    t->g->rope_bwd(x.d, cs.d, B, T, t0, nh, HS, ld);
    check(t, "rope_bwd", shape, "dx (in place)", &x, t->tact);
    drop(&cs), drop(&x);
}

static void test_swiglu(const table *t, int N, int F)
{
    char shape[64];
    snprintf(shape, sizeof shape, "N=%d F=%d", N, F);
    const size_t n = (size_t)N * F;
    buf inp = mk(t, 1, 2 * n, 6, 0), out = mk(t, 1, n, 1, 0), dout = mk(t, 1, n, 1, 0), dinp = mk(t, 1, 2 * n, 1, 0);
    t->cpu->swiglu_fwd(out.h, inp.h, N, F);
    t->g->swiglu_fwd(out.d, inp.d, N, F);
    check(t, "swiglu_fwd", shape, "out", &out, t->tact);
    t->cpu->swiglu_bwd(dinp.h, dout.h, inp.h, N, F);
    t->g->swiglu_bwd(dinp.d, dout.d, inp.d, N, F);
    check(t, "swiglu_bwd", shape, "dinp (written)", &dinp, t->tact);
    drop(&inp), drop(&out), drop(&dout), drop(&dinp);
}

/* ---- timing ------------------------------------------------------------------------------------------- */

typedef struct {
    cudaEvent_t e0, e1;
} timer;

static void tstart(timer *tm)
{
    cudaEventCreate(&tm->e0);
    cudaEventCreate(&tm->e1);
    cudaEventRecord(tm->e0, pt_cuda_stream_compute());
}

static double tstop(timer *tm, int reps)
{
    float ms = 0;
    cudaEventRecord(tm->e1, pt_cuda_stream_compute());
    cudaEventSynchronize(tm->e1);
    cudaEventElapsedTime(&ms, tm->e0, tm->e1);
    cudaEventDestroy(tm->e0);
    cudaEventDestroy(tm->e1);
    return ms / reps;
}

static void report(const table *t, const char *op, const char *shape, double ms, double bytes)
{
    if (pt_cuda_ops_status() != PT_OK) {
        printf("# timing: %s %s %s failed: %s\n", t->name, op, shape, pt_cuda_ops_errmsg());
        pt_cuda_ops_clear();
        return;
    }
    printf("# timing: %-4s %-12s %s: %.3f ms, %.0f GB/s\n", t->name, op, shape, ms, bytes / (ms * 1e-3) / 1e9);
}

/* Llama 3.1 8B: C 4096, 32 query heads of 128 (8 key/value heads), F
 * 14336, 8192 rows */
static void timing(const table *t)
{
    const int N = 8192, C = 4096, nh = 32, nkv = 8, HS = 128, F = 14336, reps = 10;
    const double ea = t->bf ? 2 : 4;
    char shape[96];
    timer tm;
    buf x = mk(t, 1, (size_t)N * C, 2, 0.3), w = mk(t, 1, C, 0.5, 1), out = mk(t, 1, (size_t)N * C, 1, 0),
        rstd = mk(t, 0, N, 1, 0), dw = mk(t, 0, C, 1, 0);
    snprintf(shape, sizeof shape, "N=%d C=%d", N, C);
    t->g->rmsnorm_fwd(out.d, rstd.d, x.d, w.d, N, C, 1e-5);
    tstart(&tm);
    for (int i = 0; i < reps; i++) t->g->rmsnorm_fwd(out.d, rstd.d, x.d, w.d, N, C, 1e-5);
    report(t, "rmsnorm_fwd", shape, tstop(&tm, reps), 2.0 * N * C * ea);
    tstart(&tm);
    for (int i = 0; i < reps; i++) t->g->rmsnorm_bwd(out.d, dw.d, x.d, x.d, w.d, rstd.d, N, C);
    report(t, "rmsnorm_bwd", shape, tstop(&tm, reps), 4.0 * N * C * ea);
    drop(&x), drop(&w), drop(&out), drop(&rstd), drop(&dw);

    /* q and k in a fused qkv row of (nh + 2 nkv) HS: T 8192 positions of B 1 */
    const int ld = (nh + 2 * nkv) * HS;
    buf cs = mk_rope(N, HS, 8), qkv = mk(t, 1, (size_t)N * ld, 1, 0);
    snprintf(shape, sizeof shape, "T=%d nh=%d HS=%d (q)", N, nh, HS);
    tstart(&tm);
    for (int i = 0; i < reps; i++) t->g->rope_fwd(qkv.d, cs.d, 1, N, 0, nh, HS, ld);
    report(t, "rope_fwd", shape, tstop(&tm, reps), 2.0 * N * nh * HS * ea);
    drop(&cs), drop(&qkv);

    const int Nf = 2048;
    buf inp = mk(t, 1, (size_t)Nf * 2 * F, 6, 0), h = mk(t, 1, (size_t)Nf * F, 1, 0);
    snprintf(shape, sizeof shape, "N=%d F=%d", Nf, F);
    tstart(&tm);
    for (int i = 0; i < reps; i++) t->g->swiglu_fwd(h.d, inp.d, Nf, F);
    report(t, "swiglu_fwd", shape, tstop(&tm, reps), 3.0 * Nf * F * ea);
    tstart(&tm);
    for (int i = 0; i < reps; i++) t->g->swiglu_bwd(inp.d, h.d, inp.d, Nf, F);
    report(t, "swiglu_bwd", shape, tstop(&tm, reps), 5.0 * Nf * F * ea);
    drop(&inp), drop(&h);
}

int main(void)
{
    gpu_require();
    gpu_rs = gpu_seed();
    /* tolerances as tests/gpu/test_ops_norm.c: fp32 1e-5 relative for the
     * element-wise ops, 1e-4 for the reductions; bf16 ACT outputs a few
     * bf16 ulps, fp32 outputs of the bf16 table sums in another order */
    const table tables[] = {
        {"f32", &pt_cpu_ops_f32, &gops_f32, 0, 1e-4, 1e-4},
        {"bf16", &pt_cpu_ops_bf16, &gops_bf16, 1, 1e-2, 1e-3},
    };
    for (size_t i = 0; i < sizeof tables / sizeof tables[0]; i++) {
        const table *t = &tables[i];
        test_rmsnorm(t, 37, 50, 1e-5);
        test_rmsnorm(t, 300, 4096, 1e-5); /* Llama 3.1 8B's width, several column-sum row blocks */
        test_rmsnorm_pieces(t, 37, 20, 50, 1e-6);
        test_rmsnorm_pieces(t, 300, 1024, 4096, 1e-5);
        test_rmsnorm_pieces(t, 64, 768, 768, 1e-5); /* Cl == C */
        test_rope(t, 2, 5, 3, 3, 8, 3 * 8 + 5, 0);
        test_rope(t, 2, 33, 100, 32, 128, 48 * 128, 8); /* q of Llama 3.1 8B's fused qkv row */
        test_rope(t, 1, 17, 8000, 8, 64, 8 * 64, 32);
        test_swiglu(t, 37, 50);
        test_swiglu(t, 64, 14336);
    }
    /* a bad argument is recorded with its line, nothing runs */
    pt_cuda_ops_clear();
    gops_f32.rope_fwd(NULL, NULL, 1, 4, 0, 2, 7, 14);
    tap_ok(pt_cuda_ops_status() == PT_EINVAL && strstr(pt_cuda_ops_errmsg(), "HS 7"),
           "rope_fwd with HS 7 records PT_EINVAL: %s", pt_cuda_ops_errmsg());
    pt_cuda_ops_clear();
    gops_bf16.rmsnorm_apply(NULL, NULL, NULL, NULL, NULL, 37, 60, 50, 1e-5);
    tap_ok(pt_cuda_ops_status() == PT_EINVAL && strstr(pt_cuda_ops_errmsg(), "Cl 60"),
           "rmsnorm_apply with Cl 60 > C 50 records PT_EINVAL: %s", pt_cuda_ops_errmsg());
    pt_cuda_ops_clear();
    tap_ok(pt_cuda_mem_live() == 0, "every device block was freed (%zu bytes live)", pt_cuda_mem_live());
    const char *quick = getenv("PTRAIN_GPU_QUICK");
    if (!quick || strcmp(quick, "1") != 0)
        for (size_t i = 0; i < sizeof tables / sizeof tables[0]; i++) timing(&tables[i]);
    pt_cuda_shutdown();
    return tap_done();
}
