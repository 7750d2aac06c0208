/* SPDX-License-Identifier: MIT */
/* The CUDA kernels of lib/backend/cuda/ops_norm.cu (ops_cuda.h's
 * PT_CUDA_NORM_OPS: LayerNorm whole and in its tensor-parallel pieces, the
 * materialised cross-entropy pieces, the fused classifier) against the CPU
 * tables of the same precision (pt_cpu_ops_f32, pt_cpu_ops_bf16), in llm.c's
 * dev/cuda pattern: fresh random inputs (never zeros; bf16 inputs are bf16
 * on both sides, so only the arithmetic differs), the CPU op on host copies,
 * the device op on device copies, max|gpu-cpu|/max|cpu| per output with a
 * tolerance, a timing line per op at GPT-2 124M's shapes.  Odd shapes (N 37,
 * C 50, a shard of Vl 300 whose last ids are padding, targets inside the
 * shard, in its padding and outside it, ks 1 and 2, several vocabulary
 * blocks with a partial last one), the aliasing ops.h allows (rowvar's mean
 * or sqsum in the sum buffer, apply's rstd in sqsum, xent_bwd in place),
 * NULL-skipped gradients, and one check at GPT-2's widths (C 768, the
 * classifier's default block of 512 columns); the chunked classifier
 * (classifier_rows_fwd/bwd) the same way, its held logits too.  Skips without a GPU;
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
    void (*layernorm_fwd)(void *, void *, void *, const void *, const void *, const void *, int, int);
    void (*layernorm_bwd)(void *, void *, void *, const void *, const void *, const void *, const void *,
                          const void *, int, int);
    void (*layernorm_rowsum)(void *, const void *, int, int);
    void (*layernorm_rowvar)(void *, void *, const void *, const void *, int, int, int);
    void (*layernorm_apply)(void *, void *, const void *, const void *, const void *, const void *, const void *,
                            int, int, int);
    void (*layernorm_bwd_rowsums)(void *, const void *, const void *, const void *, const void *, const void *, int,
                                  int);
    void (*layernorm_bwd_apply)(void *, void *, void *, const void *, const void *, const void *, const void *,
                                const void *, const void *, int, int, int);
    void (*xent_max)(void *, const void *, int, int, int, int);
    void (*xent_sumexp)(void *, void *, const void *, const void *, const int32_t *, int, int, int, int);
    void (*xent_bwd)(void *, const void *, const void *, const void *, const int32_t *, const void *, int, int, int,
                     int);
    void (*classifier_fwd)(void *, const void *, const void *, const int32_t *, void *, int, int, int, int, int, int,
                           int);
    void (*classifier_bwd)(void *, void *, const void *, const void *, const void *, const int32_t *, const void *,
                           void *, int, int, int, int, int, int, int);
    void (*classifier_rows_fwd)(void *, void *, const void *, const void *, const int32_t *, void *, int, int, int,
                                int, int);
    void (*classifier_rows_bwd)(void *, void *, const void *, const void *, void *, const void *, const int32_t *,
                                const void *, void *, int, int, int, int, int);
} gops;

#define GOPS(S)                                                                                                    \
    {                                                                                                              \
        pt_cuda_layernorm_fwd_##S, pt_cuda_layernorm_bwd_##S, pt_cuda_layernorm_rowsum_##S,                        \
            pt_cuda_layernorm_rowvar_##S, pt_cuda_layernorm_apply_##S, pt_cuda_layernorm_bwd_rowsums_##S,          \
            pt_cuda_layernorm_bwd_apply_##S, pt_cuda_xent_max_##S, pt_cuda_xent_sumexp_##S, pt_cuda_xent_bwd_##S,  \
            pt_cuda_classifier_fwd_##S, pt_cuda_classifier_bwd_##S, pt_cuda_classifier_rows_fwd_##S,               \
            pt_cuda_classifier_rows_bwd_##S                                                                        \
    }
static const gops gops_f32 = GOPS(f32), gops_bf16 = GOPS(bf16);

/* one table under test: the CPU reference, the device functions, tolerances
 * for ACT outputs and for ACC (fp32) outputs */
typedef struct {
    const char *name;
    const pt_ops *cpu;
    const gops *g;
    int bf;
    double tact, tacc;
} table;

/* A tensor on both sides: h the host copy in the element type (what the CPU
 * op reads and writes), d the device copy. */
typedef struct {
    size_t n;
    int bf; /* bf16 elements (ACT of the bf16 table); else fp32 */
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

/* n values offset + scale * U[-1, 1), ACT (act 1: bf16 in the bf16 table) or
 * fp32, the same bits on both sides */
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

static void drop(buf *b)
{
    free(b->h);
    pt_cuda_mem.free(b->d);
    b->h = b->d = NULL;
}

/* max |device - host| / max |host| over elements [i0, i0 + n) (NaN: inf) */
static double relerr(const buf *b, size_t i0, size_t n)
{
    void *g = malloc(b->n * esz(b) + 4);
    if (!g || pt_cuda_to_host(g, b->d, b->n * esz(b)) != PT_OK) {
        free(g);
        return INFINITY;
    }
    double e = 0, m = 0;
    for (size_t i = i0; i < i0 + n; i++) {
        double want = hget(b, b->h, i), got = hget(b, g, i);
        if (!(fabs(got - want) <= e)) e = isnan(got - want) ? INFINITY : fabs(got - want);
        if (fabs(want) > m) m = fabs(want);
    }
    free(g);
    return e / (m > 0 ? m : 1);
}

/* one TAP line: op, table, shape, output, error and tolerance */
static void check_part(const table *t, const char *op, const char *shape, const char *out, const buf *b, size_t i0,
                       size_t n, double tol)
{
    int rc = pt_cuda_sync();
    if (rc == PT_OK) rc = pt_cuda_ops_status();
    double err = rc == PT_OK ? relerr(b, i0, n) : INFINITY;
    tap_ok(rc == PT_OK && err <= tol, "%s %s %s: %s max|gpu-cpu|/max|cpu| = %.2e (tol %.0e)%s%s", t->name, op, shape,
           out, err, tol, rc != PT_OK ? ": " : "", rc != PT_OK ? pt_cuda_ops_errmsg() : "");
    if (rc != PT_OK) pt_cuda_ops_clear();
}

static void check(const table *t, const char *op, const char *shape, const char *out, const buf *b, double tol)
{
    check_part(t, op, shape, out, b, 0, b->n, tol);
}

/* ---- LayerNorm -------------------------------------------------------------------------------------- */

static void test_layernorm(const table *t, int N, int C)
{
    char shape[64];
    snprintf(shape, sizeof shape, "N=%d C=%d", N, C);
    const pt_ops *c = t->cpu;
    const gops *g = t->g;
    const size_t nc = (size_t)N * C;
    buf inp = mk(t, 1, nc, 2, 0.3), w = mk(t, 1, C, 1, 0.5), b = mk(t, 1, C, 0.5, 0), out = mk(t, 1, nc, 1, 0),
        mean = mk(t, 0, N, 1, 0), rstd = mk(t, 0, N, 1, 0);
    c->layernorm_fwd(out.h, mean.h, rstd.h, inp.h, w.h, b.h, N, C);
    g->layernorm_fwd(out.d, mean.d, rstd.d, inp.d, w.d, b.d, N, C);
    check(t, "layernorm_fwd", shape, "out", &out, t->tact);
    check(t, "layernorm_fwd", shape, "mean", &mean, t->tacc);
    check(t, "layernorm_fwd", shape, "rstd", &rstd, t->tacc);
    /* backward from the CPU's mean and rstd (the same inputs on both sides) */
    upload(&mean), upload(&rstd);
    buf dout = mk(t, 1, nc, 1, 0), dinp = mk(t, 1, nc, 1, 0), dw = mk(t, 0, C, 1, 0), db = mk(t, 0, C, 1, 0);
    c->layernorm_bwd(dinp.h, dw.h, db.h, dout.h, inp.h, w.h, mean.h, rstd.h, N, C);
    g->layernorm_bwd(dinp.d, dw.d, db.d, dout.d, inp.d, w.d, mean.d, rstd.d, N, C);
    check(t, "layernorm_bwd", shape, "dinp (+=)", &dinp, t->tact);
    check(t, "layernorm_bwd", shape, "dw (+=)", &dw, t->tacc);
    check(t, "layernorm_bwd", shape, "db (+=)", &db, t->tacc);
    /* dinp NULL: dw, db alone */
    c->layernorm_bwd(NULL, dw.h, db.h, dout.h, inp.h, w.h, mean.h, rstd.h, N, C);
    g->layernorm_bwd(NULL, dw.d, db.d, dout.d, inp.d, w.d, mean.d, rstd.d, N, C);
    check(t, "layernorm_bwd", shape, "dw (+=, dinp NULL)", &dw, t->tacc);
    check(t, "layernorm_bwd", shape, "db (+=, dinp NULL)", &db, t->tacc);
    drop(&inp), drop(&w), drop(&b), drop(&out), drop(&mean), drop(&rstd), drop(&dout), drop(&dinp), drop(&dw),
        drop(&db);
}

/* the pieces on a column piece of Cl of C columns */
static void test_layernorm_pieces(const table *t, int N, int Cl, int C)
{
    char shape[64];
    snprintf(shape, sizeof shape, "N=%d Cl=%d C=%d", N, Cl, C);
    const pt_ops *c = t->cpu;
    const gops *g = t->g;
    const size_t nc = (size_t)N * Cl;
    buf x = mk(t, 1, nc, 2, 0.3), w = mk(t, 1, Cl, 1, 0.5), b = mk(t, 1, Cl, 0.5, 0), sum = mk(t, 0, N, 1, 0),
        sq = mk(t, 0, N, 1, 0), mean = mk(t, 0, N, 1, 0), out = mk(t, 1, nc, 1, 0);
    c->layernorm_rowsum(sum.h, x.h, N, Cl);
    g->layernorm_rowsum(sum.d, x.d, N, Cl);
    check(t, "layernorm_rowsum", shape, "sum", &sum, t->tacc);
    /* the group total: this piece's sum times C/Cl, on both sides */
    for (int n = 0; n < N; n++) ((float *)sum.h)[n] *= (float)C / (float)Cl;
    upload(&sum);
    /* mean in the sum buffer (a copy of it), sqsum apart */
    buf s2 = mk(t, 0, N, 1, 0);
    memcpy(s2.h, sum.h, sizeof(float) * N);
    upload(&s2);
    c->layernorm_rowvar(s2.h, sq.h, x.h, s2.h, N, Cl, C);
    g->layernorm_rowvar(s2.d, sq.d, x.d, s2.d, N, Cl, C);
    check(t, "layernorm_rowvar", shape, "mean (in the sum buffer)", &s2, t->tacc);
    check(t, "layernorm_rowvar", shape, "sqsum", &sq, t->tacc);
    /* sqsum in the sum buffer, mean apart */
    memcpy(s2.h, sum.h, sizeof(float) * N);
    upload(&s2);
    c->layernorm_rowvar(mean.h, s2.h, x.h, s2.h, N, Cl, C);
    g->layernorm_rowvar(mean.d, s2.d, x.d, s2.d, N, Cl, C);
    check(t, "layernorm_rowvar", shape, "mean", &mean, t->tacc);
    check(t, "layernorm_rowvar", shape, "sqsum (in the sum buffer)", &s2, t->tacc);
    /* apply with rstd in the sqsum buffer (the group total: times C/Cl) */
    for (int n = 0; n < N; n++) ((float *)s2.h)[n] *= (float)C / (float)Cl;
    upload(&s2), upload(&mean);
    c->layernorm_apply(out.h, s2.h, x.h, mean.h, s2.h, w.h, b.h, N, Cl, C);
    g->layernorm_apply(out.d, s2.d, x.d, mean.d, s2.d, w.d, b.d, N, Cl, C);
    check(t, "layernorm_apply", shape, "out", &out, t->tact);
    check(t, "layernorm_apply", shape, "rstd (in the sqsum buffer)", &s2, t->tacc);
    /* backward pieces from the CPU's rstd */
    upload(&s2);
    buf dy = mk(t, 1, nc, 1, 0), s = mk(t, 0, 2 * (size_t)N, 1, 0), dx = mk(t, 1, nc, 1, 0), dw = mk(t, 0, Cl, 1, 0),
        db = mk(t, 0, Cl, 1, 0);
    c->layernorm_bwd_rowsums(s.h, dy.h, x.h, w.h, mean.h, s2.h, N, Cl);
    g->layernorm_bwd_rowsums(s.d, dy.d, x.d, w.d, mean.d, s2.d, N, Cl);
    check(t, "layernorm_bwd_rowsums", shape, "s", &s, t->tacc);
    for (size_t i = 0; i < 2 * (size_t)N; i++) ((float *)s.h)[i] *= (float)C / (float)Cl;
    upload(&s);
    c->layernorm_bwd_apply(dx.h, dw.h, db.h, dy.h, x.h, w.h, mean.h, s2.h, s.h, N, Cl, C);
    g->layernorm_bwd_apply(dx.d, dw.d, db.d, dy.d, x.d, w.d, mean.d, s2.d, s.d, N, Cl, C);
    check(t, "layernorm_bwd_apply", shape, "dx (+=)", &dx, t->tact);
    check(t, "layernorm_bwd_apply", shape, "dw (+=)", &dw, t->tacc);
    check(t, "layernorm_bwd_apply", shape, "db (+=)", &db, t->tacc);
    c->layernorm_bwd_apply(NULL, dw.h, db.h, dy.h, x.h, w.h, mean.h, s2.h, s.h, N, Cl, C);
    g->layernorm_bwd_apply(NULL, dw.d, db.d, dy.d, x.d, w.d, mean.d, s2.d, s.d, N, Cl, C);
    check(t, "layernorm_bwd_apply", shape, "dw (+=, dx NULL)", &dw, t->tacc);
    drop(&x), drop(&w), drop(&b), drop(&sum), drop(&sq), drop(&mean), drop(&out), drop(&s2), drop(&dy), drop(&s),
        drop(&dx), drop(&dw), drop(&db);
}

/* ---- the cross-entropy ------------------------------------------------------------------------------- */

/* targets on both sides: by row, inside the shard's unpadded ids, in its
 * padding, below it, above it */
typedef struct {
    int32_t *h, *d;
} ids;

static ids mk_targets(int N, int v0, int W, int Vl)
{
    ids t = {malloc(sizeof(int32_t) * N + 4), pt_cuda_mem.alloc(sizeof(int32_t) * N + 4)};
    if (!t.h || !t.d) die("allocation");
    for (int n = 0; n < N; n++) {
        uint32_t r = (uint32_t)((gpu_urand() + 1) * 1e6);
        switch (n % 5) {
        case 3: t.h[n] = Vl > W ? v0 + W + (int32_t)(r % (uint32_t)(Vl - W)) : v0; break;
        case 4: t.h[n] = (n / 5) % 2 && v0 > 0 ? (int32_t)(r % (uint32_t)v0) : v0 + Vl + (int32_t)(r % 100); break;
        default: t.h[n] = v0 + (int32_t)(r % (uint32_t)W); break;
        }
    }
    if (pt_cuda_to_device(t.d, t.h, sizeof(int32_t) * N) != PT_OK) die("upload");
    return t;
}

static void drop_ids(ids *t)
{
    free(t->h);
    pt_cuda_mem.free(t->d);
}

static void test_xent(const table *t, int N, int Vl, int v0, int vreal)
{
    char shape[96];
    snprintf(shape, sizeof shape, "N=%d Vl=%d v0=%d vreal=%d", N, Vl, v0, vreal);
    const pt_ops *c = t->cpu;
    const gops *g = t->g;
    const int W = vreal - v0 < Vl ? vreal - v0 : Vl;
    const size_t nv = (size_t)N * Vl;
    ids tg = mk_targets(N, v0, W, Vl);
    buf l = mk(t, 1, nv, 4, 0), mx = mk(t, 0, N, 1, 0), se = mk(t, 0, N, 1, 0), tl = mk(t, 0, N, 1, 0),
        dl = mk(t, 1, nv, 1, 0), dloss = mk(t, 0, N, 0.5, 1.0);
    c->xent_max(mx.h, l.h, v0, vreal, N, Vl);
    g->xent_max(mx.d, l.d, v0, vreal, N, Vl);
    check(t, "xent_max", shape, "rowmax", &mx, t->tacc);
    upload(&mx);
    c->xent_sumexp(se.h, tl.h, l.h, mx.h, tg.h, v0, vreal, N, Vl);
    g->xent_sumexp(se.d, tl.d, l.d, mx.d, tg.d, v0, vreal, N, Vl);
    check(t, "xent_sumexp", shape, "sumexp", &se, t->tacc);
    check(t, "xent_sumexp", shape, "tgt", &tl, t->tacc);
    upload(&se);
    c->xent_bwd(dl.h, l.h, mx.h, se.h, tg.h, dloss.h, v0, vreal, N, Vl);
    g->xent_bwd(dl.d, l.d, mx.d, se.d, tg.d, dloss.d, v0, vreal, N, Vl);
    check(t, "xent_bwd", shape, "dlogits (written)", &dl, t->tact);
    /* in place: dlogits = logits */
    c->xent_bwd(l.h, l.h, mx.h, se.h, tg.h, dloss.h, v0, vreal, N, Vl);
    g->xent_bwd(l.d, l.d, mx.d, se.d, tg.d, dloss.d, v0, vreal, N, Vl);
    check(t, "xent_bwd", shape, "dlogits (in place over the logits)", &l, t->tact);
    drop_ids(&tg);
    drop(&l), drop(&mx), drop(&se), drop(&tl), drop(&dl), drop(&dloss);
}

/* ---- the fused classifier ----------------------------------------------------------------------------- */

static void test_classifier(const table *t, int N, int C, int Vl, int v0, int vreal, int vb, int ks)
{
    char shape[128];
    snprintf(shape, sizeof shape, "N=%d C=%d Vl=%d v0=%d vreal=%d vb=%d ks=%d", N, C, Vl, v0, vreal, vb, ks);
    const pt_ops *c = t->cpu;
    const gops *g = t->g;
    const int W = vreal - v0 < Vl ? vreal - v0 : Vl;
    ids tg = mk_targets(N, v0, W, Vl);
    buf x = mk(t, 1, (size_t)N * C, 1, 0), w = mk(t, 1, (size_t)Vl * C, 3 / sqrt((double)C), 0),
        stats = mk(t, 0, 3 * (size_t)N, 1, 0), dloss = mk(t, 0, N, 0.5, 1.0),
        dx = mk(t, 1, (size_t)N * C, 1, 0), dw = mk(t, 0, (size_t)Vl * C, 1, 0);
    const size_t nwork = pt_classifier_work_elems(c, N, C, vb, 1);
    float *hwork = malloc(sizeof(float) * nwork);
    void *dwork = pt_cuda_mem.alloc(sizeof(float) * nwork);
    if (!hwork || !dwork) die("allocation");
    c->classifier_fwd(stats.h, x.h, w.h, tg.h, hwork, vb, v0, vreal, N, C, Vl, ks);
    g->classifier_fwd(stats.d, x.d, w.d, tg.d, dwork, vb, v0, vreal, N, C, Vl, ks);
    check_part(t, "classifier_fwd", shape, "rowmax", &stats, 0, N, t->tacc);
    check_part(t, "classifier_fwd", shape, "sumexp", &stats, N, N, t->tacc);
    check_part(t, "classifier_fwd", shape, "target logit", &stats, 2 * (size_t)N, N, t->tacc);
    upload(&stats);
    c->classifier_bwd(dx.h, dw.h, x.h, w.h, stats.h, tg.h, dloss.h, hwork, vb, v0, vreal, N, C, Vl, ks);
    g->classifier_bwd(dx.d, dw.d, x.d, w.d, stats.d, tg.d, dloss.d, dwork, vb, v0, vreal, N, C, Vl, ks);
    check(t, "classifier_bwd", shape, "dx (+=)", &dx, t->tact);
    check(t, "classifier_bwd", shape, "dw (+=)", &dw, t->tacc);
    /* dx NULL: dw alone; then dw NULL: dx alone */
    c->classifier_bwd(NULL, dw.h, x.h, w.h, stats.h, tg.h, dloss.h, hwork, vb, v0, vreal, N, C, Vl, ks);
    g->classifier_bwd(NULL, dw.d, x.d, w.d, stats.d, tg.d, dloss.d, dwork, vb, v0, vreal, N, C, Vl, ks);
    check(t, "classifier_bwd", shape, "dw (+=, dx NULL)", &dw, t->tacc);
    c->classifier_bwd(dx.h, NULL, x.h, w.h, stats.h, tg.h, dloss.h, hwork, vb, v0, vreal, N, C, Vl, ks);
    g->classifier_bwd(dx.d, NULL, x.d, w.d, stats.d, tg.d, dloss.d, dwork, vb, v0, vreal, N, C, Vl, ks);
    check(t, "classifier_bwd", shape, "dx (+=, dw NULL)", &dx, t->tact);
    free(hwork);
    pt_cuda_mem.free(dwork);
    drop_ids(&tg);
    drop(&x), drop(&w), drop(&stats), drop(&dloss), drop(&dx), drop(&dw);
}

/* The chunked classifier (classifier_rows_fwd/bwd): R rows' logits held
 * whole, the statistics, then dlogits in place, dx (+=) and dw (+=); the
 * CPU table's slices against the GPU's whole-chunk GEMMs.  The logits
 * buffer is compared after the forward (fp32 logits over the W unpadded
 * columns). */
static void test_classifier_rows(const table *t, int R, int C, int Vl, int v0, int vreal)
{
    char shape[128];
    snprintf(shape, sizeof shape, "R=%d C=%d Vl=%d v0=%d vreal=%d", R, C, Vl, v0, vreal);
    const pt_ops *c = t->cpu;
    const gops *g = t->g;
    const int W = vreal - v0 < Vl ? vreal - v0 : Vl;
    ids tg = mk_targets(R, v0, W, Vl);
    buf x = mk(t, 1, (size_t)R * C, 1, 0), w = mk(t, 1, (size_t)Vl * C, 3 / sqrt((double)C), 0),
        stats = mk(t, 0, 3 * (size_t)R, 1, 0), dloss = mk(t, 0, R, 0.5, 1.0), dx = mk(t, 1, (size_t)R * C, 1, 0),
        dw = mk(t, 0, (size_t)Vl * C, 1, 0), lg = mk(t, 0, (size_t)R * Vl, 1, 0);
    const size_t nwork = pt_classifier_rows_work_elems(R, C, Vl);
    float *hwork = malloc(sizeof(float) * nwork);
    void *dwork = pt_cuda_mem.alloc(sizeof(float) * nwork);
    if (!hwork || !dwork) die("allocation");
    c->classifier_rows_fwd(stats.h, lg.h, x.h, w.h, tg.h, hwork, v0, vreal, R, C, Vl);
    g->classifier_rows_fwd(stats.d, lg.d, x.d, w.d, tg.d, dwork, v0, vreal, R, C, Vl);
    check_part(t, "classifier_rows_fwd", shape, "rowmax", &stats, 0, R, t->tacc);
    check_part(t, "classifier_rows_fwd", shape, "sumexp", &stats, R, R, t->tacc);
    check_part(t, "classifier_rows_fwd", shape, "target logit", &stats, 2 * (size_t)R, R, t->tacc);
    /* the held logits, row by row over the unpadded columns */
    double el = 0;
    for (int n = 0; n < R && W > 0; n++) {
        const double e = relerr(&lg, (size_t)n * Vl, (size_t)W);
        if (!(e <= el)) el = e;
    }
    tap_ok(el <= t->tacc, "%s classifier_rows_fwd %s: logits held max|gpu-cpu|/max|cpu| per row = %.2e (tol %.0e)",
           t->name, shape, el, t->tacc);
    upload(&stats), upload(&lg); /* both sides go on from the CPU's statistics and logits */
    c->classifier_rows_bwd(dx.h, dw.h, x.h, w.h, lg.h, stats.h, tg.h, dloss.h, hwork, v0, vreal, R, C, Vl);
    g->classifier_rows_bwd(dx.d, dw.d, x.d, w.d, lg.d, stats.d, tg.d, dloss.d, dwork, v0, vreal, R, C, Vl);
    check(t, "classifier_rows_bwd", shape, "dx (+=)", &dx, t->tact);
    check(t, "classifier_rows_bwd", shape, "dw (+=)", &dw, t->tacc);
    free(hwork);
    pt_cuda_mem.free(dwork);
    drop_ids(&tg);
    drop(&x), drop(&w), drop(&stats), drop(&dloss), drop(&dx), drop(&dw), drop(&lg);
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

/* ms per call of reps calls since tstart */
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
    printf("# timing: %-4s %-15s %s: %.3f ms", t->name, op, shape, ms);
    if (bytes > 0) printf(", %.0f GB/s", bytes / (ms * 1e-3) / 1e9);
    printf("\n");
}

/* GPT-2 124M at B=16, T=1024: N=16384 rows, C=768, V=50304 */
static void timing(const table *t)
{
    const int N = 16384, C = 768, V = 50304, vb = PT_CLASSIFIER_VBLOCK, reps = 10;
    const double ea = t->bf ? 2 : 4;
    char shape[96];
    timer tm;
    buf inp = mk(t, 1, (size_t)N * C, 2, 0.3), w = mk(t, 1, C, 1, 0.5), b = mk(t, 1, C, 0.5, 0),
        out = mk(t, 1, (size_t)N * C, 1, 0), mean = mk(t, 0, N, 1, 0), rstd = mk(t, 0, N, 1, 0),
        dw = mk(t, 0, C, 1, 0), db = mk(t, 0, C, 1, 0);
    snprintf(shape, sizeof shape, "N=%d C=%d", N, C);
    t->g->layernorm_fwd(out.d, mean.d, rstd.d, inp.d, w.d, b.d, N, C);
    tstart(&tm);
    for (int i = 0; i < reps; i++) t->g->layernorm_fwd(out.d, mean.d, rstd.d, inp.d, w.d, b.d, N, C);
    report(t, "layernorm_fwd", shape, tstop(&tm, reps), 2.0 * N * C * ea);
    t->g->layernorm_bwd(out.d, dw.d, db.d, inp.d, inp.d, w.d, mean.d, rstd.d, N, C);
    tstart(&tm);
    for (int i = 0; i < reps; i++) t->g->layernorm_bwd(out.d, dw.d, db.d, inp.d, inp.d, w.d, mean.d, rstd.d, N, C);
    report(t, "layernorm_bwd", shape, tstop(&tm, reps), 5.0 * N * C * ea);
    /* its two parts: the rows (dinp) and the column sums (dw, db) */
    tstart(&tm);
    for (int i = 0; i < reps; i++) t->g->layernorm_bwd(out.d, NULL, NULL, inp.d, inp.d, w.d, mean.d, rstd.d, N, C);
    report(t, " (dinp rows)", shape, tstop(&tm, reps), 4.0 * N * C * ea);
    tstart(&tm);
    for (int i = 0; i < reps; i++) t->g->layernorm_bwd(NULL, dw.d, db.d, inp.d, inp.d, w.d, mean.d, rstd.d, N, C);
    report(t, " (dw, db cols)", shape, tstop(&tm, reps), 2.0 * N * C * ea);
    drop(&inp), drop(&w), drop(&b), drop(&out), drop(&mean), drop(&rstd), drop(&dw), drop(&db);

    /* the materialised pieces on 2048 rows of the whole vocabulary */
    const int Nx = 2048;
    ids tg = mk_targets(Nx, 0, V, V);
    buf l = mk(t, 1, (size_t)Nx * V, 4, 0), mx = mk(t, 0, Nx, 1, 0), se = mk(t, 0, Nx, 1, 0), tl = mk(t, 0, Nx, 1, 0),
        dloss = mk(t, 0, Nx, 0.5 / Nx, 1.0 / Nx);
    snprintf(shape, sizeof shape, "N=%d V=%d", Nx, V);
    t->g->xent_max(mx.d, l.d, 0, V, Nx, V);
    tstart(&tm);
    for (int i = 0; i < reps; i++) t->g->xent_max(mx.d, l.d, 0, V, Nx, V);
    report(t, "xent_max", shape, tstop(&tm, reps), (double)Nx * V * ea);
    tstart(&tm);
    for (int i = 0; i < reps; i++) t->g->xent_sumexp(se.d, tl.d, l.d, mx.d, tg.d, 0, V, Nx, V);
    report(t, "xent_sumexp", shape, tstop(&tm, reps), (double)Nx * V * ea);
    tstart(&tm);
    for (int i = 0; i < reps; i++) t->g->xent_bwd(l.d, l.d, mx.d, se.d, tg.d, dloss.d, 0, V, Nx, V);
    report(t, "xent_bwd", shape, tstop(&tm, reps), 2.0 * Nx * V * ea);
    drop_ids(&tg);
    drop(&l), drop(&mx), drop(&se), drop(&tl), drop(&dloss);

    /* the fused classifier (GPT-2's tied head) */
    tg = mk_targets(N, 0, V, V);
    buf x = mk(t, 1, (size_t)N * C, 1, 0), wte = mk(t, 1, (size_t)V * C, 0.1, 0), stats = mk(t, 0, 3 * (size_t)N, 1, 0),
        dl2 = mk(t, 0, N, 0.5 / N, 1.0 / N), dx = mk(t, 1, (size_t)N * C, 1, 0), dwte = mk(t, 0, (size_t)V * C, 1, 0);
    void *work = pt_cuda_mem.alloc(sizeof(float) * pt_classifier_work_elems(t->cpu, N, C, vb, 1));
    if (!work) die("allocation");
    snprintf(shape, sizeof shape, "N=%d C=%d V=%d vb=%d", N, C, V, vb);
    const double flop = 2.0 * N * C * V;
    t->g->classifier_fwd(stats.d, x.d, wte.d, tg.d, work, vb, 0, V, N, C, V, 1);
    tstart(&tm);
    for (int i = 0; i < 3; i++) t->g->classifier_fwd(stats.d, x.d, wte.d, tg.d, work, vb, 0, V, N, C, V, 1);
    double ms = tstop(&tm, 3);
    report(t, "classifier_fwd", shape, ms, 0);
    printf("#   (%.1f TFLOP/s)\n", flop / (ms * 1e-3) / 1e12);
    tstart(&tm);
    for (int i = 0; i < 3; i++)
        t->g->classifier_bwd(dx.d, dwte.d, x.d, wte.d, stats.d, tg.d, dl2.d, work, vb, 0, V, N, C, V, 1);
    ms = tstop(&tm, 3);
    report(t, "classifier_bwd", shape, ms, 0);
    printf("#   (%.1f TFLOP/s)\n", 3 * flop / (ms * 1e-3) / 1e12);
    pt_cuda_mem.free(work);
    drop_ids(&tg);
    drop(&x), drop(&wte), drop(&stats), drop(&dl2), drop(&dx), drop(&dwte);
}

int main(void)
{
    gpu_require();
    gpu_rs = gpu_seed();
    /* tolerances: fp32 1e-5 relative (reductions 1e-4); bf16 ACT outputs a
     * few bf16 ulps (2^-8), fp32 outputs of the bf16 table as fp32 results
     * of GEMMs and sums in another order */
    const table tables[] = {
        {"f32", &pt_cpu_ops_f32, &gops_f32, 0, 1e-4, 1e-4},
        {"bf16", &pt_cpu_ops_bf16, &gops_bf16, 1, 1e-2, 1e-3},
    };
    for (size_t i = 0; i < sizeof tables / sizeof tables[0]; i++) {
        const table *t = &tables[i];
        test_layernorm(t, 37, 50);
        test_layernorm(t, 300, 768); /* GPT-2's width, several column-sum row blocks */
        test_layernorm_pieces(t, 37, 20, 50);
        test_layernorm_pieces(t, 300, 768, 768); /* Cl == C: the whole row */
        test_xent(t, 37, 300, 1000, 1250);       /* 50 padded ids at the end */
        test_xent(t, 37, 300, 0, 300);           /* no padding, v0 0 */
        test_xent(t, 5, 50304, 0, 50257);        /* GPT-2's padded vocabulary, one shard */
        test_classifier(t, 37, 50, 300, 600, 850, 64, 1); /* blocks 64 64 64 58, 50 padded */
        test_classifier(t, 37, 50, 300, 600, 850, 64, 2);
        test_classifier(t, 37, 50, 300, 0, 300, 300, 1);     /* one block, no padding */
        test_classifier(t, 128, 768, 4096, 4096, 8000, PT_CLASSIFIER_VBLOCK, 2); /* GPT-2's width, last shard */
        test_classifier_rows(t, 37, 50, 300, 600, 850);          /* 50 padded ids */
        test_classifier_rows(t, 256, 768, 9000, 0, 8990);        /* GPT-2's width, three of the CPU's slices */
    }
    /* a bad argument is recorded with its line, nothing runs */
    pt_cuda_ops_clear();
    gops_f32.classifier_fwd(NULL, NULL, NULL, NULL, NULL, 64, 0, 300, 37, 50, 300, 3);
    tap_ok(pt_cuda_ops_status() == PT_EINVAL && strstr(pt_cuda_ops_errmsg(), "ks 3"),
           "classifier_fwd with C 50, ks 3 records PT_EINVAL: %s", pt_cuda_ops_errmsg());
    pt_cuda_ops_clear();
    gops_bf16.layernorm_apply(NULL, NULL, NULL, NULL, NULL, NULL, NULL, 37, 60, 50);
    tap_ok(pt_cuda_ops_status() == PT_EINVAL && strstr(pt_cuda_ops_errmsg(), "Cl 60"),
           "layernorm_apply with Cl 60 > C 50 records PT_EINVAL: %s", pt_cuda_ops_errmsg());
    pt_cuda_ops_clear();
    tap_ok(pt_cuda_mem_live() == 0, "every device block was freed (%zu bytes live)", pt_cuda_mem_live());
    const char *quick = getenv("PTRAIN_GPU_QUICK");
    if (!quick || strcmp(quick, "1") != 0)
        for (size_t i = 0; i < sizeof tables / sizeof tables[0]; i++) timing(&tables[i]);
    pt_cuda_shutdown();
    return tap_done();
}
