/* SPDX-License-Identifier: MIT */
/* The CUDA ops of lib/backend/cuda/ops_elem.cu against the CPU's, in
 * llm.c's dev/cuda pattern: the CPU table of the same precision
 * (pt_cpu_ops_f32 / pt_cpu_ops_bf16) on host copies as the reference, the
 * device call on the same inputs, the comparison (max|gpu-cpu|/max|cpu| on
 * one TAP line naming op, table and shape), and timing lines for a
 * GPT-2-124M-sized shape (B=16, T=1024, C=768, V=50304).  Every function of
 * ops_cuda.h's ops_elem.cu section, in the f32 and bf16 tables, on odd sizes
 * and on the GPT-2 shape: embeddings (tokens outside the shard, repeated
 * tokens), positional embeddings, GELU, residual, bias, AdamW (work NULL,
 * p itself, an ACT copy), the cross-entropy's rescale (with -inf) and loss,
 * causal softmax rows, zero, fill, copy, convert and copy2d with host and
 * device sides, add2d, axpy, scale, sum and sumsq (against a double host
 * sum), and the refusal of fp64 (the recorded error, NaN from sum after
 * it).  Fresh random inputs each run (bf16 inputs rounded to bf16 before
 * the reference sees them, so only the arithmetic differs).  Skips without
 * a GPU.  PTRAIN_GPU_QUICK=1 leaves out the GPT-2 shape and the timing
 * (compute-sanitizer runs). */
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

/* ---- tensors on both sides -------------------------------------------------------------------------- */

/* n elements of type t: h on the host (what the CPU reference computes on),
 * d on the device (uploaded from h) */
typedef struct {
    pt_dtype t;
    size_t n;
    void *h, *d;
} buf;

static double get(pt_dtype t, const void *p, size_t i)
{
    return t == PT_BF16 ? (double)gpu_bf16_to_f32(((const uint16_t *)p)[i]) : (double)((const float *)p)[i];
}

static void set(pt_dtype t, void *p, size_t i, double x)
{
    if (t == PT_BF16) ((uint16_t *)p)[i] = gpu_f32_to_bf16((float)x);
    else ((float *)p)[i] = (float)x;
}

static void *dev_alloc(size_t bytes)
{
    void *d = pt_cuda_mem.alloc(bytes ? bytes : 1);
    if (!d) {
        printf("Bail out! no %zu bytes of device memory: %s\n", bytes, pt_errmsg());
        exit(1);
    }
    return d;
}

static void *host_alloc(size_t bytes)
{
    void *h = malloc(bytes ? bytes : 1);
    if (!h) {
        printf("Bail out! no %zu bytes of host memory\n", bytes);
        exit(1);
    }
    return h;
}

static void upload(buf *b)
{
    if (pt_cuda_to_device(b->d, b->h, b->n * pt_dtype_size(b->t)) != PT_OK) {
        printf("Bail out! upload: %s\n", pt_errmsg());
        exit(1);
    }
}

/* random values in [lo, hi) on both sides */
static buf mk(pt_dtype t, size_t n, double lo, double hi)
{
    buf b = {t, n, host_alloc(n * pt_dtype_size(t)), dev_alloc(n * pt_dtype_size(t))};
    for (size_t i = 0; i < n; i++) set(t, b.h, i, lo + (hi - lo) * 0.5 * (gpu_urand() + 1.0));
    upload(&b);
    return b;
}

static void drop(buf *b)
{
    free(b->h);
    pt_cuda_mem.free(b->d);
    b->h = b->d = NULL;
}

/* max |got - ref| / max |ref| over n elements of type t (NaN == NaN and
 * equal infinities count as equal; any other NaN is an infinite error) */
static double cmp_host(pt_dtype t, const void *got, const void *ref, size_t n)
{
    double e = 0, m = 0;
    for (size_t i = 0; i < n; i++) {
        const double x = get(t, got, i), r = get(t, ref, i);
        if ((isnan(x) && isnan(r)) || (isinf(r) && x == r)) continue;
        const double d = fabs(x - r);
        if (!(d <= e)) e = isnan(d) ? INFINITY : d;
        if (isfinite(r) && fabs(r) > m) m = fabs(r);
    }
    return e / (m > 0 ? m : 1);
}

/* the device tensor against ref (host, b's type) */
static double err_vs(const buf *b, const void *ref)
{
    void *g = host_alloc(b->n * pt_dtype_size(b->t));
    double e = INFINITY;
    if (pt_cuda_to_host(g, b->d, b->n * pt_dtype_size(b->t)) == PT_OK) e = cmp_host(b->t, g, ref, b->n);
    free(g);
    return e;
}

static double err(const buf *b) { return err_vs(b, b->h); }

/* ---- the tables ------------------------------------------------------------------------------------- */

typedef struct {
    const char *name;
    pt_dtype act;
    const pt_ops *cpu;
    pt_ops dev;     /* the ops_elem.cu entries of this precision */
    double tol_act; /* ACT outputs; fp32 (ACC) outputs: TOL_ACC, sums TOL_SUM */
} variant;

#define TOL_ACC 1e-5
#define TOL_SUM 1e-4

static void fill_dev(pt_ops *o, int bf)
{
    memset(o, 0, sizeof *o);
#define PICK(op) o->op = bf ? pt_cuda_##op##_bf16 : pt_cuda_##op##_f32
    PICK(embedding_fwd);
    PICK(embedding_bwd);
    PICK(posemb_fwd);
    PICK(posemb_bwd);
    PICK(gelu_fwd);
    PICK(gelu_bwd);
    PICK(add_fwd);
    PICK(add_bwd);
    PICK(bias_fwd);
    PICK(bias_bwd);
    PICK(adamw);
#undef PICK
    o->xent_rescale = pt_cuda_xent_rescale;
    o->xent_loss = pt_cuda_xent_loss;
    o->softmax_causal_fwd = pt_cuda_softmax_causal_fwd;
    o->softmax_causal_bwd = pt_cuda_softmax_causal_bwd;
    o->zero = pt_cuda_zero;
    o->fill = pt_cuda_fill;
    o->copy = pt_cuda_copy;
    o->convert = pt_cuda_convert;
    o->copy2d = pt_cuda_copy2d;
    o->add2d = pt_cuda_add2d;
    o->axpy = pt_cuda_axpy;
    o->scale = pt_cuda_scale;
    o->sum = pt_cuda_sum;
    o->sumsq = pt_cuda_sumsq;
}

/* after the device call: wait, and say what the ops recorded */
static int done(void)
{
    int rc = pt_cuda_sync();
    return rc != PT_OK ? rc : pt_cuda_ops_status();
}

static void check(const variant *v, const char *op, const char *shape, double e, double tol)
{
    const int rc = done();
    tap_ok(rc == PT_OK && e <= tol, "%s %s %s: max|gpu-cpu|/max|cpu| = %.2e (tol %.0e)%s%s", v->name, op, shape, e,
           tol, rc != PT_OK ? ": " : "", rc != PT_OK ? pt_cuda_ops_errmsg() : "");
}

/* ---- timing --------------------------------------------------------------------------------------------- */

static cudaEvent_t ev0, ev1;
static int timing_on;
#define REPS 10
/* ms per call of stmt (after one warm-up call) and the bytes it moves per
 * call as GB/s: a record, never a check */
#define TIMED(v, what, bytes, stmt)                                                                               \
    do {                                                                                                          \
        if (!timing_on) break;                                                                                    \
        stmt;                                                                                                     \
        cudaStream_t s_ = pt_cuda_stream_compute();                                                               \
        cudaEventRecord(ev0, s_);                                                                                 \
        for (int r_ = 0; r_ < REPS; r_++) stmt;                                                                   \
        cudaEventRecord(ev1, s_);                                                                                 \
        cudaEventSynchronize(ev1);                                                                                \
        float ms_ = 0;                                                                                            \
        cudaEventElapsedTime(&ms_, ev0, ev1);                                                                     \
        ms_ /= REPS;                                                                                              \
        printf("# timing: %-4s %s: %.3f ms, %.0f GB/s%s\n", (v)->name, what, (double)ms_,                       \
               (double)(bytes) / (ms_ * 1e-3) / 1e9, pt_cuda_ops_status() != PT_OK ? " (FAILED)" : "");           \
        fflush(stdout);                                                                                           \
    } while (0)

/* ---- the ACT ops ---------------------------------------------------------------------------------------- */

static int32_t *tokens(int N, int lo, int hi, int32_t **dev)
{
    int32_t *t = host_alloc(sizeof(int32_t) * (size_t)N);
    for (int n = 0; n < N; n++) t[n] = lo + (int)((hi - lo) * 0.5 * (gpu_urand() + 1.0));
    for (int n = 0; n < N; n++) /* a frequent token, as in text (about 4% of the rows) */
        if (n % 25 == 3) t[n] = lo + (hi - lo) / 2;
    if (N > 1) t[N - 1] = t[0];
    *dev = dev_alloc(sizeof(int32_t) * (size_t)N);
    if (pt_cuda_to_device(*dev, t, sizeof(int32_t) * (size_t)N) != PT_OK) {
        printf("Bail out! upload: %s\n", pt_errmsg());
        exit(1);
    }
    return t;
}

static void embeddings(const variant *v, int N, int C, int v0, int Vl, int tlo, int thi)
{
    char sh[96];
    snprintf(sh, sizeof sh, "N=%d C=%d v0=%d Vl=%d (tokens %d..%d)", N, C, v0, Vl, tlo, thi - 1);
    const pt_dtype a = v->act;
    int32_t *dtok, *tok = tokens(N, tlo, thi, &dtok);
    buf out = mk(a, (size_t)N * C, -1, 1), w = mk(a, (size_t)Vl * C, -1, 1);
    v->cpu->embedding_fwd(out.h, tok, w.h, v0, Vl, N, C);
    v->dev.embedding_fwd(out.d, dtok, w.d, v0, Vl, N, C);
    check(v, "embedding_fwd", sh, err(&out), 0); /* a copy: exact */
    buf dw = mk(PT_F32, (size_t)Vl * C, -1, 1), dout = mk(a, (size_t)N * C, -1, 1);
    v->cpu->embedding_bwd(dw.h, dout.h, tok, v0, Vl, N, C);
    v->dev.embedding_bwd(dw.d, dout.d, dtok, v0, Vl, N, C);
    check(v, "embedding_bwd (dw fp32)", sh, err(&dw), TOL_ACC);
    TIMED(v, "embedding_fwd", (double)N * C * 2 * pt_dtype_size(a),
          v->dev.embedding_fwd(out.d, dtok, w.d, v0, Vl, N, C));
    TIMED(v, "embedding_bwd", (double)N * C * (pt_dtype_size(a) + 8),
          v->dev.embedding_bwd(dw.d, dout.d, dtok, v0, Vl, N, C));
    drop(&out), drop(&w), drop(&dw), drop(&dout);
    free(tok);
    pt_cuda_mem.free(dtok);
}

static void posemb(const variant *v, int B, int T, int C)
{
    char sh[64];
    snprintf(sh, sizeof sh, "B=%d T=%d C=%d", B, T, C);
    const pt_dtype a = v->act;
    buf x = mk(a, (size_t)B * T * C, -1, 1), wpe = mk(a, (size_t)(T + 3) * C, -1, 1);
    v->cpu->posemb_fwd(x.h, wpe.h, B, T, C);
    v->dev.posemb_fwd(x.d, wpe.d, B, T, C);
    check(v, "posemb_fwd", sh, err(&x), v->tol_act);
    buf dwpe = mk(PT_F32, (size_t)T * C, -1, 1);
    v->cpu->posemb_bwd(dwpe.h, x.h, B, T, C);
    v->dev.posemb_bwd(dwpe.d, x.d, B, T, C);
    check(v, "posemb_bwd (dwpe fp32)", sh, err(&dwpe), TOL_ACC);
    TIMED(v, "posemb_fwd", (double)B * T * C * 3 * pt_dtype_size(a), v->dev.posemb_fwd(x.d, wpe.d, B, T, C));
    TIMED(v, "posemb_bwd", (double)B * T * C * pt_dtype_size(a), v->dev.posemb_bwd(dwpe.d, x.d, B, T, C));
    drop(&x), drop(&wpe), drop(&dwpe);
}

static void elementwise(const variant *v, size_t n)
{
    char sh[64];
    snprintf(sh, sizeof sh, "n=%zu", n);
    const pt_dtype a = v->act;
    const double es = (double)pt_dtype_size(a);
    buf inp = mk(a, n, -4, 4), out = mk(a, n, -1, 1), dinp = mk(a, n, -1, 1), dout = mk(a, n, -1, 1);
    v->cpu->gelu_fwd(out.h, inp.h, n);
    v->dev.gelu_fwd(out.d, inp.d, n);
    check(v, "gelu_fwd", sh, err(&out), v->tol_act);
    v->cpu->gelu_bwd(dinp.h, inp.h, dout.h, n);
    v->dev.gelu_bwd(dinp.d, inp.d, dout.d, n);
    check(v, "gelu_bwd (+=)", sh, err(&dinp), v->tol_act);
    TIMED(v, "gelu_fwd", n * 2 * es, v->dev.gelu_fwd(out.d, inp.d, n));
    TIMED(v, "gelu_bwd", n * 4 * es, v->dev.gelu_bwd(dinp.d, inp.d, dout.d, n));
    buf b = mk(a, n, -1, 1);
    v->cpu->add_fwd(out.h, inp.h, b.h, n);
    v->dev.add_fwd(out.d, inp.d, b.d, n);
    check(v, "add_fwd", sh, err(&out), v->tol_act);
    v->cpu->add_bwd(inp.h, b.h, dout.h, n);
    v->dev.add_bwd(inp.d, b.d, dout.d, n);
    check(v, "add_bwd da (+=)", sh, err(&inp), v->tol_act);
    check(v, "add_bwd db (+=)", sh, err(&b), v->tol_act);
    v->cpu->add_bwd(NULL, b.h, dout.h, n);
    v->dev.add_bwd(NULL, b.d, dout.d, n);
    check(v, "add_bwd db alone (da NULL)", sh, err(&b), v->tol_act);
    TIMED(v, "add_fwd", n * 3 * es, v->dev.add_fwd(out.d, inp.d, b.d, n));
    drop(&inp), drop(&out), drop(&dinp), drop(&dout), drop(&b);
}

static void bias(const variant *v, int N, int OC)
{
    char sh[64];
    snprintf(sh, sizeof sh, "N=%d OC=%d", N, OC);
    const pt_dtype a = v->act;
    buf out = mk(a, (size_t)N * OC, -1, 1), b = mk(a, (size_t)OC, -1, 1), db = mk(PT_F32, (size_t)OC, -1, 1);
    v->cpu->bias_fwd(out.h, b.h, N, OC);
    v->dev.bias_fwd(out.d, b.d, N, OC);
    check(v, "bias_fwd", sh, err(&out), v->tol_act);
    v->cpu->bias_bwd(db.h, out.h, N, OC);
    v->dev.bias_bwd(db.d, out.d, N, OC);
    check(v, "bias_bwd (dbias fp32, column sums)", sh, err(&db), TOL_SUM);
    TIMED(v, "bias_bwd", (double)N * OC * pt_dtype_size(a), v->dev.bias_bwd(db.d, out.d, N, OC));
    drop(&out), drop(&b), drop(&db);
}

/* AdamW step t = 3, with the weight copy kept: work NULL (0), p itself (1),
 * an ACT array (2) */
static void adamw(const variant *v, size_t n, int how)
{
    static const char *const hows[] = {"work NULL", "work = p", "work ACT copy"};
    char sh[64];
    snprintf(sh, sizeof sh, "n=%zu, %s", n, hows[how]);
    buf p = mk(PT_F32, n, -1, 1), g = mk(PT_F32, n, -1, 1), m = mk(PT_F32, n, -0.1, 0.1), vv = mk(PT_F32, n, 0, 0.01),
        work = mk(v->act, n, -1, 1);
    const double lr = 1e-3, b1 = 0.9, b2 = 0.999, eps = 1e-8, wd = 0.1, bc1 = 1 - pow(b1, 3), bc2 = 1 - pow(b2, 3);
    void *wh = how == 0 ? NULL : how == 1 ? p.h : work.h, *wd_ = how == 0 ? NULL : how == 1 ? p.d : work.d;
    v->cpu->adamw(p.h, wh, g.h, m.h, vv.h, n, lr, b1, b2, eps, wd, bc1, bc2);
    v->dev.adamw(p.d, wd_, g.d, m.d, vv.d, n, lr, b1, b2, eps, wd, bc1, bc2);
    /* the step moves p by ~1e-3 of its size: TOL_ACC sees a missing step */
    check(v, "adamw p", sh, err(&p), TOL_ACC);
    check(v, "adamw m", sh, err(&m), TOL_ACC);
    check(v, "adamw v", sh, err(&vv), TOL_ACC);
    if (how == 2) check(v, "adamw work (p rounded to ACT)", sh, err(&work), v->act == PT_F32 ? TOL_ACC : v->tol_act);
    if (how == 2)
        TIMED(v, "adamw (with the ACT copy)", n * (16.0 + 4 + pt_dtype_size(v->act)),
              v->dev.adamw(p.d, wd_, g.d, m.d, vv.d, n, lr, b1, b2, eps, wd, bc1, bc2));
    drop(&p), drop(&g), drop(&m), drop(&vv), drop(&work);
}

/* ---- ACC-only ops ------------------------------------------------------------------------------------- */

static void xent(const variant *v, int N)
{
    char sh[32];
    snprintf(sh, sizeof sh, "N=%d", N);
    buf se = mk(PT_F32, (size_t)N, 0.5, 50), from = mk(PT_F32, (size_t)N, -3, 3), to = mk(PT_F32, (size_t)N, 3, 5),
        tgt = mk(PT_F32, (size_t)N, -3, 3), loss = mk(PT_F32, (size_t)N, -1, 1);
    for (int n = 0; n < N; n += 5) ((float *)from.h)[n] = -INFINITY; /* a shard with no unpadded id */
    upload(&from);
    v->cpu->xent_rescale(se.h, from.h, to.h, N);
    v->dev.xent_rescale(se.d, from.d, to.d, N);
    check(v, "xent_rescale (-inf rows)", sh, err(&se), TOL_ACC);
    for (int n = 0; n < N; n++) ((float *)se.h)[n] += 1.0f; /* positive sums for the log */
    upload(&se);
    v->cpu->xent_loss(loss.h, to.h, se.h, tgt.h, N);
    v->dev.xent_loss(loss.d, to.d, se.d, tgt.d, N);
    check(v, "xent_loss", sh, err(&loss), TOL_ACC);
    drop(&se), drop(&from), drop(&to), drop(&tgt), drop(&loss);
}

static void softmax(const variant *v, int BH, int Tq, int T, int q0)
{
    char sh[64];
    snprintf(sh, sizeof sh, "BH=%d Tq=%d T=%d q0=%d", BH, Tq, T, q0);
    const size_t n = (size_t)BH * Tq * T;
    buf att = mk(PT_F32, n, -6, 6), datt = mk(PT_F32, n, -1, 1);
    v->cpu->softmax_causal_fwd(att.h, BH, Tq, T, q0);
    v->dev.softmax_causal_fwd(att.d, BH, Tq, T, q0);
    check(v, "softmax_causal_fwd", sh, err(&att), TOL_ACC);
    upload(&att); /* the backward from the same probabilities on both sides */
    v->cpu->softmax_causal_bwd(datt.h, att.h, 0.125, BH, Tq, T, q0);
    v->dev.softmax_causal_bwd(datt.d, att.d, 0.125, BH, Tq, T, q0);
    check(v, "softmax_causal_bwd", sh, err(&datt), TOL_SUM);
    TIMED(v, "softmax_causal_fwd", (double)n * 8, v->dev.softmax_causal_fwd(att.d, BH, Tq, T, q0));
    drop(&att), drop(&datt);
}

/* ---- generic ops -------------------------------------------------------------------------------------- */

static void memory_ops(const variant *v, pt_dtype t, size_t n)
{
    char sh[64];
    snprintf(sh, sizeof sh, "%s n=%zu", pt_dtype_name(t), n);
    buf x = mk(t, n, -1, 1), y = mk(t, n, -1, 1);
    v->cpu->zero(x.h, n, t);
    v->dev.zero(x.d, n, t);
    check(v, "zero", sh, err(&x), 0);
    v->cpu->fill(x.h, -0.3711, n, t);
    v->dev.fill(x.d, -0.3711, n, t);
    check(v, "fill", sh, err(&x), 0);
    v->cpu->copy(x.h, y.h, n, t);
    v->dev.copy(x.d, y.d, n, t);
    check(v, "copy (device to device)", sh, err(&x), 0);
    v->cpu->axpy(y.h, -0.7, x.h, n, t);
    v->dev.axpy(y.d, -0.7, x.d, n, t);
    check(v, "axpy", sh, err(&y), t == PT_F32 ? TOL_ACC : v->tol_act);
    v->cpu->scale(y.h, 1.7, n, t);
    v->dev.scale(y.d, 1.7, n, t);
    check(v, "scale", sh, err(&y), t == PT_F32 ? TOL_ACC : v->tol_act);
    /* sum, sumsq against a double host sum of the values each side holds
     * (the device's axpy/scale may round differently from the CPU's: an FMA,
     * within the tolerance above, so each sum is of its own side's values;
     * on an H200 the host's values made the device's sum look 3e-9 off) */
    double s = 0, q = 0, sa = 0, hs = 0, hsa = 0;
    void *yd = host_alloc(n * pt_dtype_size(t));
    if (pt_cuda_to_host(yd, y.d, n * pt_dtype_size(t)) != PT_OK) {
        printf("Bail out! download: %s\n", pt_errmsg());
        exit(1);
    }
    for (size_t i = 0; i < n; i++) {
        const double e = get(t, yd, i), h = get(t, y.h, i);
        s += e, q += e * e, sa += fabs(e);
        hs += h, hsa += fabs(h);
    }
    free(yd);
    const double gs = v->dev.sum(y.d, n, t), gq = v->dev.sumsq(y.d, n, t), cs = v->cpu->sum(y.h, n, t);
    const int rc = done();
    tap_ok(rc == PT_OK && fabs(gs - s) <= 1e-10 * sa && fabs(cs - hs) <= 1e-10 * hsa,
           "%s sum %s: gpu %.17g, host double %.17g, cpu table %.17g (|gpu-host|/sum|x| = %.1e, tol 1e-10)", v->name,
           sh, gs, s, cs, fabs(gs - s) / (sa > 0 ? sa : 1));
    tap_ok(rc == PT_OK && fabs(gq - q) <= 1e-10 * q, "%s sumsq %s: gpu %.17g, host double %.17g (rel %.1e, tol 1e-10)",
           v->name, sh, gq, q, fabs(gq - q) / (q > 0 ? q : 1));
    TIMED(v, "sum", (double)n * pt_dtype_size(t), (void)v->dev.sum(y.d, n, t));
    drop(&x), drop(&y);
}

/* convert between fp32 and bf16 (and the same type), each side on the host
 * or the device; the input has NaN and infinities */
static void convert(const variant *v, pt_dtype dt, pt_dtype st, size_t n)
{
    buf s = mk(st, n, -3, 3), d = mk(dt, n, -1, 1);
    if (n > 3) {
        set(st, s.h, 0, NAN), set(st, s.h, 1, INFINITY), set(st, s.h, 2, -INFINITY);
        upload(&s);
    }
    void *ref = host_alloc(n * pt_dtype_size(dt));
    memcpy(ref, d.h, n * pt_dtype_size(dt));
    v->cpu->convert(ref, dt, s.h, st, n);
    const size_t sb = n * pt_dtype_size(st), db = n * pt_dtype_size(dt);
    void *hs = host_alloc(sb), *hd = host_alloc(db);
    for (int side = 0; side < 4; side++) {
        const int shost = side & 1, dhost = side >> 1;
        char sh[96];
        snprintf(sh, sizeof sh, "%s (%s) -> %s (%s) n=%zu", pt_dtype_name(st), shost ? "host" : "device",
                 pt_dtype_name(dt), dhost ? "host" : "device", n);
        upload(&d); /* the old values back on the device */
        memcpy(hd, d.h, db);
        memcpy(hs, s.h, sb);
        v->dev.convert(dhost ? hd : d.d, dt, shost ? hs : s.d, st, n);
        /* synchronous for the host: the source may be overwritten and the
         * result read at once */
        memset(hs, 0x7f, sb);
        const double e = dhost ? cmp_host(dt, hd, ref, n) : err_vs(&d, ref);
        check(v, "convert", sh, e, 0);
    }
    free(hs), free(hd);
    free(ref);
    drop(&s), drop(&d);
}

/* height rows of width bytes between pitched buffers, each side on the
 * host or the device, against the CPU's copy2d; the bytes between the rows
 * must stay */
static void copy2d(const variant *v, size_t width, size_t height, size_t dpitch, size_t spitch)
{
    const size_t db = dpitch * (height - 1) + width, sb = spitch * (height - 1) + width;
    unsigned char *src = host_alloc(sb), *dst0 = host_alloc(db), *ref = host_alloc(db), *got = host_alloc(db),
                  *hd = host_alloc(db), *hs = host_alloc(sb);
    for (size_t i = 0; i < sb; i++) src[i] = (unsigned char)(128.0 * (gpu_urand() + 1.0));
    for (size_t i = 0; i < db; i++) dst0[i] = (unsigned char)(128.0 * (gpu_urand() + 1.0));
    memcpy(ref, dst0, db);
    v->cpu->copy2d(ref, dpitch, src, spitch, width, height);
    void *ds = dev_alloc(sb), *dd = dev_alloc(db);
    pt_cuda_to_device(ds, src, sb);
    for (int side = 0; side < 4; side++) {
        const int shost = side & 1, dhost = side >> 1;
        pt_cuda_to_device(dd, dst0, db);
        memcpy(hd, dst0, db);
        memcpy(hs, src, sb);
        v->dev.copy2d(dhost ? (void *)hd : dd, dpitch, shost ? (void *)hs : ds, spitch, width, height);
        memset(hs, 0x5a, sb); /* synchronous for the host: the source may be reused at once */
        if (dhost) memcpy(got, hd, db);
        else pt_cuda_to_host(got, dd, db);
        size_t bad = 0;
        for (size_t i = 0; i < db; i++) bad += got[i] != ref[i];
        const int rc = done();
        tap_ok(rc == PT_OK && bad == 0,
               "%s copy2d %s -> %s: %zu rows of %zu bytes, pitches %zu/%zu: %zu bytes differ%s%s", v->name,
               shost ? "host" : "device", dhost ? "host" : "device", height, width, dpitch, spitch, bad,
               rc != PT_OK ? ": " : "", rc != PT_OK ? pt_cuda_ops_errmsg() : "");
    }
    pt_cuda_mem.free(ds), pt_cuda_mem.free(dd);
    free(src), free(dst0), free(ref), free(got), free(hd), free(hs);
}

static void add2d(const variant *v, pt_dtype t, size_t rows, size_t cols, size_t ldd, size_t lds)
{
    char sh[96];
    snprintf(sh, sizeof sh, "%s rows=%zu cols=%zu ldd=%zu lds=%zu", pt_dtype_name(t), rows, cols, ldd, lds);
    /* rows - 1 pitches and one row: with rows 1 the pitches may be 0 (on an
     * H200, buffers of rows * ldd = 0 elements made both sides read past them:
     * compute-sanitizer's out-of-bounds reads and a failed check) */
    buf d = mk(t, (rows - 1) * ldd + cols, -1, 1), s = mk(t, (rows - 1) * lds + cols, -1, 1);
    v->cpu->add2d(d.h, ldd, s.h, lds, rows, cols, t);
    v->dev.add2d(d.d, ldd, s.d, lds, rows, cols, t);
    check(v, "add2d", sh, err(&d), t == PT_F32 ? TOL_ACC : v->tol_act);
    drop(&d), drop(&s);
}

/* fp64 is refused: recorded, nothing written, sum NaN after it */
static void refusals(void)
{
    buf x = mk(PT_F32, 16, -1, 1);
    pt_cuda_ops_clear();
    pt_cuda_fill(x.d, 1.0, 8, PT_F64);
    pt_cuda_sync();
    const int rc = pt_cuda_ops_status();
    tap_ok(rc == PT_EINVAL && strstr(pt_cuda_ops_errmsg(), "fill") != NULL, "fill of fp64 is refused (PT_EINVAL): %s",
           pt_cuda_ops_errmsg());
    tap_ok(err(&x) == 0, "the refused fill wrote nothing");
    tap_ok(isnan(pt_cuda_sum(x.d, 16, PT_F32)), "sum after a recorded failure is NaN");
    pt_cuda_ops_clear();
    const double s = pt_cuda_sum(x.d, 16, PT_F32);
    tap_ok(isfinite(s) && pt_cuda_ops_status() == PT_OK, "sum after pt_cuda_ops_clear is finite (%g)", s);
    pt_cuda_convert(x.d, PT_F64, x.d, PT_F32, 4);
    tap_ok(pt_cuda_ops_status() == PT_EINVAL, "convert to fp64 is refused: %s", pt_cuda_ops_errmsg());
    pt_cuda_ops_clear();
    drop(&x);
}

/* ---- the runs ----------------------------------------------------------------------------------------- */

static void odd_sizes(const variant *v)
{
    embeddings(v, 37, 50, 7, 23, 0, 40); /* a shard: tokens below, inside and above it */
    embeddings(v, 37, 50, 0, 40, 0, 40);
    posemb(v, 3, 13, 50);
    elementwise(v, 37 * 50 + 1);
    bias(v, 37, 50);
    for (int how = 0; how < 3; how++) adamw(v, 37 * 50 + 3, how);
    xent(v, 37);
    softmax(v, 5, 7, 50, 20); /* a ring step's rows */
    softmax(v, 3, 37, 37, 0); /* a whole sequence */
    for (int t = 0; t < 2; t++) {
        const pt_dtype dt = t ? PT_BF16 : PT_F32;
        memory_ops(v, dt, 37 * 50 + 1);
        add2d(v, dt, 13, 37, 50, 41);
        add2d(v, dt, 1, 37, 0, 0);
    }
    convert(v, PT_BF16, PT_F32, 37 * 50 + 1);
    convert(v, PT_F32, PT_BF16, 37 * 50 + 1);
    convert(v, v->act, v->act, 37 * 50 + 1);
    copy2d(v, 37 * 4, 13, 50 * 4, 41 * 4);
    copy2d(v, 37, 1, 0, 0);
}

/* GPT-2 124M at B=16, T=1024: checks on the full shapes, then the timings */
static void gpt2(const variant *v)
{
    const int B = 16, T = 1024, C = 768, V = 50304, NH = 12, N = B * T;
    embeddings(v, N, C, 0, V, 0, V);
    posemb(v, B, T, C);
    elementwise(v, (size_t)N * 4 * C);
    bias(v, N, 4 * C);
    adamw(v, (size_t)12 * C * C, 2); /* about one transformer block's parameters */
    softmax(v, NH, T, T, 0);
    memory_ops(v, v->act, (size_t)N * C);
    convert(v, PT_BF16, PT_F32, (size_t)N * C * 2); /* more than one staging piece */
    convert(v, PT_F32, PT_BF16, (size_t)N * C * 2);
}

int main(void)
{
    gpu_require();
    gpu_rs = gpu_seed();
    static variant variants[] = {
        {"f32", PT_F32, &pt_cpu_ops_f32, {0}, TOL_ACC},
        {"bf16", PT_BF16, &pt_cpu_ops_bf16, {0}, 1e-2},
    };
    fill_dev(&variants[0].dev, 0);
    fill_dev(&variants[1].dev, 1);
    const char *quick = getenv("PTRAIN_GPU_QUICK");
    const int full = !quick || strcmp(quick, "1") != 0;
    cudaEventCreate(&ev0);
    cudaEventCreate(&ev1);
    for (size_t i = 0; i < sizeof variants / sizeof variants[0]; i++) odd_sizes(&variants[i]);
    if (full) {
        timing_on = 1;
        for (size_t i = 0; i < sizeof variants / sizeof variants[0]; i++) gpt2(&variants[i]);
        timing_on = 0;
    }
    tap_ok(pt_cuda_ops_status() == PT_OK, "no op recorded a failure%s%s", pt_cuda_ops_status() ? ": " : "",
           pt_cuda_ops_errmsg());
    refusals();
    cudaEventDestroy(ev0);
    cudaEventDestroy(ev1);
    tap_ok(pt_cuda_mem_live() == 0, "every device block was freed (%zu bytes live)", pt_cuda_mem_live());
    pt_cuda_shutdown();
    return tap_done();
}
