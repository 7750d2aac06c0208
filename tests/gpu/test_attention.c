/* SPDX-License-Identifier: MIT */
/* The CUDA backend's flash attention (lib/backend/cuda/attention.cu) against
 * the CPU's, in llm.c's dev/cuda pattern: the CPU table of the same
 * precision (pt_cpu_ops_f32 / pt_cpu_ops_bf16) on host copies as the
 * reference, the device call, the comparison (one line per op, dtype,
 * shape and tensor: max|gpu-cpu|/max|cpu|), a timing line.  Cases: the
 * whole sequence (q, k, v inside one qkv buffer, ldq = ldkv = 3C) with T a
 * multiple of the tile and not (77), HS 16, 64 and 80 (a head that is not
 * a multiple of 16 lanes); a ring step (queries at q0 against key blocks
 * at other k0, Tq != Tk, separate q and interleaved k|v buffers): merge 0
 * on a block that crosses the diagonal (its first rows see no key), merge 1
 * on an earlier block, a block wholly in the future (out 0, lse -inf
 * exactly; merge 1 on it changes nothing; its backward adds nothing); the
 * backward from the final (out, lse) into random, nonzero dq, dk, dv (the
 * ops accumulate); a refused head size.  Fresh random inputs each run
 * (PTRAIN_TEST_SEED repeats one); bf16 inputs are given to the CPU as the
 * same bf16 values.  Skips without a GPU.  PTRAIN_GPU_QUICK=1 leaves out
 * the timing (compute-sanitizer runs).
 * With cuDNN, "bf16 cudnn" runs every case again with PTRAIN_ATTENTION's
 * cudnn selected (attention_cudnn.c), against the same CPU reference and
 * tolerances (lse: 1e-4, cuDNN's own exp/log): each whole-sequence call
 * the rule gives to cuDNN must have run there (a fallback to the flash
 * kernels fails, with cuDNN's reason), every other call (HS 200, 300, the
 * ring steps, HS 600) must have stayed on the flash kernels; the whole
 * sequence also with separate q and k|v buffers (ldq = C, ldkv = 2C: the
 * backward's unpacked scratch); a timing line beside flash's.
 * Grouped-query attention (pt_attn_dims.NKV < NH: k, v of NKV heads, query
 * head h reading KV head h / (NH/NKV); Ainslie et al. 2023): the whole
 * sequence packed [q | k | v] and split, MQA to groups of 4, and ring
 * steps, for the flash kernels and cuDNN's SDPA (its K, V tensors of NKV
 * heads, dK and dV reduced over each group inside the graph), against the
 * CPU table with the same NKV (held to a double repeat_kv reference by
 * tests/unit/test_ops_attention). */
#define _POSIX_C_SOURCE 200809L
#include "config.h"

#include <cuda_runtime_api.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/attention_cudnn.h"
#include "backend/cuda/cuda_priv.h"
#include "backend/cuda/ops_cuda.h"
#include "backend/ops.h"
#include "gpu_tap.h"
#include "tests/tap.h"

/* One precision: the CPU reference table and the device functions */
typedef struct {
    const char *name;
    int bf; /* ACT is bf16 */
    const pt_ops *cpu;
    void (*fwd)(void *, void *, const void *, const void *, const void *, const pt_attn_dims *, int);
    void (*bwd)(void *, void *, void *, const void *, const void *, const void *, const void *, const void *,
                const void *, const pt_attn_dims *);
    double tol_out, tol_lse, tol_grad;
    int impl; /* PT_ATTN_FLASH, PT_ATTN_CUDNN: the selection the bf16 entries run under */
} prec;

/* The cuDNN runs since *r0: where the call should have run (cudnn: the
 * rule applied) one more, else none; a TAP line saying which and why */
static void check_path(const prec *p, const char *what, const pt_attn_dims *d, int merge, long *r0)
{
    if (p->impl != PT_ATTN_CUDNN) return;
    const long r = pt_cuda_attention_cudnn_runs(), ran = r - *r0;
    const char *why = pt_attn_cudnn_rule(d, merge);
    *r0 = r;
    if (!why)
        tap_ok(ran == 1, "%s %s B=%d NH=%d HS=%d T=%d ldq=%d ldkv=%d ran on cuDNN (%ld runs)%s%s", p->name, what, d->B,
               d->NH, d->HS, d->Tq, d->ldq, d->ldkv, ran, ran == 1 ? "" : ": fell back: ",
               ran == 1 ? "" : pt_cuda_attention_cudnn_fallback());
    else
        tap_ok(ran == 0, "%s %s B=%d NH=%d HS=%d Tq=%d q0=%d k0=%d stayed on the flash kernels (%s; %ld cuDNN runs)",
               p->name, what, d->B, d->NH, d->HS, d->Tq, d->q0, d->k0, why, ran);
}

/* A tensor on both sides: ref (host, what the CPU op reads and writes) and
 * dev (the device's copy, what the device op reads and writes); es the
 * element size (2: bf16, 4: fp32). */
typedef struct {
    size_t n, es;
    void *ref, *dev;
} tensor;

static double get(const tensor *t, const void *buf, size_t i)
{
    return t->es == 2 ? (double)gpu_bf16_to_f32(((const uint16_t *)buf)[i]) : (double)((const float *)buf)[i];
}

static void bail(const char *what, size_t bytes)
{
    printf("Bail out! %s (%zu bytes): %s\n", what, bytes, pt_errmsg());
    exit(1);
}

/* n random values times s (bf: stored as bf16), the same on both sides */
static tensor mk(size_t n, int bf, double s)
{
    tensor t = {n, bf ? 2 : 4, malloc(n * (bf ? 2 : 4) + 1), pt_cuda_mem.alloc(n * (bf ? 2 : 4) + 1)};
    if (!t.ref || !t.dev) bail("no memory for a tensor", n * t.es);
    for (size_t i = 0; i < n; i++) {
        float x = (float)(s * gpu_urand());
        if (bf) ((uint16_t *)t.ref)[i] = gpu_f32_to_bf16(x);
        else ((float *)t.ref)[i] = x;
    }
    if (pt_cuda_to_device(t.dev, t.ref, n * t.es) != PT_OK) bail("upload", n * t.es);
    return t;
}

static void drop(tensor *t)
{
    free(t->ref);
    pt_cuda_mem.free(t->dev);
}

/* max |device - reference| / max |reference| over the finite reference
 * values of columns c0 .. c0+w-1 of the rows (stride ld) of t, or all of t
 * when ld is 0; a -inf must be -inf on both sides (else INFINITY); NaN
 * counts */
static double relerr_cols(const tensor *t, size_t ld, size_t c0, size_t w)
{
    void *h = malloc(t->n * t->es + 1);
    if (!h || pt_cuda_to_host(h, t->dev, t->n * t->es) != PT_OK) {
        free(h);
        return INFINITY;
    }
    double e = 0, m = 0;
    for (size_t i = 0; i < t->n; i++) {
        if (ld && (i % ld < c0 || i % ld >= c0 + w)) continue;
        double g = get(t, h, i), r = get(t, t->ref, i);
        if (isinf(r) || isinf(g)) {
            if (g != r) e = INFINITY;
            continue;
        }
        if (!(fabs(g - r) <= e)) e = fabs(g - r);
        if (fabs(r) > m) m = fabs(r);
    }
    free(h);
    return e / (m > 0 ? m : 1);
}

static double relerr(const tensor *t) { return relerr_cols(t, 0, 0, 0); }

/* the device call's recorded failure, after the stream is done */
static int dev_status(void)
{
    int rc = pt_cuda_sync();
    return rc != PT_OK ? rc : pt_cuda_ops_status();
}

static void check_err(const prec *p, const char *what, const char *tname, double err, double tol, int rc,
                      const pt_attn_dims *d)
{
    tap_ok(rc == PT_OK && err <= tol,
           "%s %s %s B=%d NH=%d HS=%d Tq=%d Tk=%d q0=%d k0=%d: max|gpu-cpu|/max|cpu| = %.2e (tol %.0e)%s%s", p->name,
           what, tname, d->B, d->NH, d->HS, d->Tq, d->Tk, d->q0, d->k0, err, tol, rc ? ": " : "",
           rc ? pt_cuda_ops_errmsg() : "");
}

static void check(const prec *p, const char *what, const char *tname, const tensor *t, double tol, int rc,
                  const pt_attn_dims *d)
{
    check_err(p, what, tname, relerr(t), tol, rc, d);
}

/* the tensor's elements from element off on, as a pointer on either side */
static void *at(const tensor *t, int dev, size_t off) { return (char *)(dev ? t->dev : t->ref) + off * t->es; }

/* The whole sequence: q, k, v in one qkv [B, T, C + 2 KVC] (ldq = ldkv =
 * C + 2 KVC; KVC = NKV*HS, NKV KV heads: GQA when NKV < NH); split: q [B, T,
 * C] (ldq = C) and k | v interleaved [B, T, 2 KVC] (ldkv = 2 KVC),
 * gradients alike */
static void whole(const prec *p, int B, int T, int NH, int NKV, int HS, int split)
{
    const int C = NH * HS, KVC = NKV * HS, ldq = split ? C : C + 2 * KVC, ldkv = split ? 2 * KVC : C + 2 * KVC;
    const size_t nq = (size_t)B * T * ldq, nkv = split ? (size_t)B * T * ldkv : 0, nout = (size_t)B * T * C,
                 nlse = (size_t)B * NH * T;
    tensor qkv = mk(nq, p->bf, 1.5), out = mk(nout, p->bf, 1), lse = mk(nlse, 0, 1), dout = mk(nout, p->bf, 1),
           dqkv = mk(nq, p->bf, 1);
    tensor kvs = split ? mk(nkv, p->bf, 1.5) : qkv, dkvs = split ? mk(nkv, p->bf, 1) : dqkv;
    const size_t k0 = split ? 0 : (size_t)C, v0 = split ? (size_t)KVC : (size_t)(C + KVC);
    const pt_attn_dims d = {B, NH, HS, T, T, 0, 0, ldq, ldkv, NKV};
    const char *fw = split ? "attention_fwd whole sequence, separate q and k|v" : "attention_fwd whole sequence";
    const char *bw = split ? "attention_bwd whole sequence, separate q and k|v (+= into random grads)"
                           : "attention_bwd whole sequence (+= into random dqkv)";
    pt_cuda_attention_set_impl(p->impl);
    long r0 = pt_cuda_attention_cudnn_runs();
    p->cpu->attention_fwd(out.ref, lse.ref, qkv.ref, at(&kvs, 0, k0), at(&kvs, 0, v0), &d, 0);
    p->fwd(out.dev, lse.dev, qkv.dev, at(&kvs, 1, k0), at(&kvs, 1, v0), &d, 0);
    int rc = dev_status();
    check_path(p, fw, &d, 0, &r0);
    check(p, fw, "out", &out, p->tol_out, rc, &d);
    check(p, fw, "lse", &lse, p->tol_lse, rc, &d);
    /* backward from the CPU's (out, lse) on both sides, into random gradients */
    if (pt_cuda_to_device(out.dev, out.ref, nout * out.es) != PT_OK ||
        pt_cuda_to_device(lse.dev, lse.ref, nlse * lse.es) != PT_OK)
        bail("upload", nout * out.es);
    p->cpu->attention_bwd(dqkv.ref, at(&dkvs, 0, k0), at(&dkvs, 0, v0), dout.ref, qkv.ref, at(&kvs, 0, k0),
                          at(&kvs, 0, v0), out.ref, lse.ref, &d);
    p->bwd(dqkv.dev, at(&dkvs, 1, k0), at(&dkvs, 1, v0), dout.dev, qkv.dev, at(&kvs, 1, k0), at(&kvs, 1, v0), out.dev,
           lse.dev, &d);
    rc = dev_status();
    check_path(p, bw, &d, 0, &r0);
    check_err(p, bw, "dq", relerr_cols(&dqkv, (size_t)ldq, 0, C), p->tol_grad, rc, &d);
    check_err(p, bw, "dk", relerr_cols(&dkvs, (size_t)ldkv, k0, KVC), p->tol_grad, rc, &d);
    check_err(p, bw, "dv", relerr_cols(&dkvs, (size_t)ldkv, v0, KVC), p->tol_grad, rc, &d);
    if (split) drop(&kvs), drop(&dkvs);
    drop(&qkv), drop(&out), drop(&lse), drop(&dout), drop(&dqkv);
}

/* A ring step: Tq local queries at q0 (q [B, Tq, ldq], ldq = C + 8) against
 * key blocks (k | v interleaved [B, Tk, 2 KVC] of NKV heads, ldkv = 2 KVC) at
 * other k0 */
static void ring(const prec *p, int B, int NH, int NKV, int HS)
{
    const int C = NH * HS, KVC = NKV * HS, Tq = 70, q0 = 130, ldq = C + 8;
    const size_t nq = (size_t)B * Tq * ldq, nout = (size_t)B * Tq * C, nlse = (size_t)B * NH * Tq;
    tensor q = mk(nq, p->bf, 1.5), out = mk(nout, p->bf, 1), lse = mk(nlse, 0, 1), dout = mk(nout, p->bf, 1),
           dq = mk(nq, p->bf, 1);
    pt_cuda_attention_set_impl(p->impl);
    long r0 = pt_cuda_attention_cudnn_runs();
    /* blocks: crossing the diagonal (keys 150..239: query rows 0..19 see none), before it (keys 0..100), in
     * the future (keys 200..263) */
    const int nblk = 3, Tk[3] = {90, 101, 64}, k0[3] = {150, 0, 200};
    tensor kv[3], dkv[3];
    pt_attn_dims d[3];
    for (int i = 0; i < nblk; i++) {
        kv[i] = mk((size_t)B * Tk[i] * 2 * KVC, p->bf, 1.5);
        dkv[i] = mk((size_t)B * Tk[i] * 2 * KVC, p->bf, 1);
        d[i] = (pt_attn_dims){B, NH, HS, Tq, Tk[i], q0, k0[i], ldq, 2 * KVC, NKV};
    }
    /* the future block alone: merge 0 writes out 0 and lse -inf (exactly, on both sides) */
    tensor fo = mk(nout, p->bf, 1), fl = mk(nlse, 0, 1);
    p->cpu->attention_fwd(fo.ref, fl.ref, q.ref, kv[2].ref, at(&kv[2], 0, KVC), &d[2], 0);
    p->fwd(fo.dev, fl.dev, q.dev, kv[2].dev, at(&kv[2], 1, KVC), &d[2], 0);
    int rc = dev_status();
    int zero = 1;
    for (size_t i = 0; i < nlse; i++) zero &= isinf(((float *)fl.ref)[i]) && ((float *)fl.ref)[i] < 0;
    tap_ok(zero, "%s CPU reference: a key block wholly in the future gives lse -inf", p->name);
    check(p, "attention_fwd ring, merge 0, block in the future", "out (0)", &fo, 0, rc, &d[2]);
    check(p, "attention_fwd ring, merge 0, block in the future", "lse (-inf)", &fl, 0, rc, &d[2]);
    drop(&fo), drop(&fl);

    /* block 0 (merge 0), block 1 (merge 1), block 2 (merge 1: nothing changes) */
    for (int i = 0; i < nblk; i++) {
        const int merge = i > 0;
        p->cpu->attention_fwd(out.ref, lse.ref, q.ref, kv[i].ref, at(&kv[i], 0, KVC), &d[i], merge);
        p->fwd(out.dev, lse.dev, q.dev, kv[i].dev, at(&kv[i], 1, KVC), &d[i], merge);
        rc = dev_status();
        char what[96];
        snprintf(what, sizeof what, "attention_fwd ring, merge %d, block %d", merge, i);
        check(p, what, "out", &out, p->tol_out, rc, &d[i]);
        check(p, what, "lse", &lse, p->tol_lse, rc, &d[i]);
    }
    /* the backward of each block from the final (out, lse): dq accumulates over the blocks */
    if (pt_cuda_to_device(out.dev, out.ref, nout * out.es) != PT_OK ||
        pt_cuda_to_device(lse.dev, lse.ref, nlse * lse.es) != PT_OK)
        bail("upload", nout * out.es);
    for (int i = 0; i < nblk; i++) {
        p->cpu->attention_bwd(dq.ref, dkv[i].ref, at(&dkv[i], 0, KVC), dout.ref, q.ref, kv[i].ref,
                              at(&kv[i], 0, KVC), out.ref, lse.ref, &d[i]);
        p->bwd(dq.dev, dkv[i].dev, at(&dkv[i], 1, KVC), dout.dev, q.dev, kv[i].dev, at(&kv[i], 1, KVC), out.dev,
               lse.dev, &d[i]);
        rc = dev_status();
        char what[96];
        snprintf(what, sizeof what, "attention_bwd ring, block %d (+= into random grads)", i);
        check(p, what, "dq (and the row padding)", &dq, p->tol_grad, rc, &d[i]);
        check_err(p, what, "dk", relerr_cols(&dkv[i], 2 * (size_t)KVC, 0, KVC), i == 2 ? 0 : p->tol_grad, rc,
                  &d[i]);
        check_err(p, what, "dv", relerr_cols(&dkv[i], 2 * (size_t)KVC, KVC, KVC), i == 2 ? 0 : p->tol_grad, rc,
                  &d[i]);
    }
    check_path(p, "attention_fwd/bwd ring steps", &d[0], 0, &r0);
    for (int i = 0; i < nblk; i++) drop(&kv[i]), drop(&dkv[i]);
    drop(&q), drop(&out), drop(&lse), drop(&dout), drop(&dq);
}

/* A head size the kernels do not take is recorded, naming HS and the range */
static void refused(const prec *p)
{
    const pt_attn_dims d = {1, 1, 600, 4, 4, 0, 0, 600, 600, 1};
    tensor q = mk(4 * 600, p->bf, 1), out = mk(4 * 600, p->bf, 1), lse = mk(4, 0, 1);
    pt_cuda_ops_clear();
    pt_cuda_attention_set_impl(p->impl);
    p->fwd(out.dev, lse.dev, q.dev, q.dev, q.dev, &d, 0);
    const char *msg = pt_cuda_ops_errmsg();
    tap_ok(pt_cuda_ops_status() != PT_OK && strstr(msg, "HS 600") && strstr(msg, "1..512"),
           "%s attention_fwd HS=600 is refused and recorded: \"%s\"", p->name, msg);
    pt_cuda_ops_clear();
    drop(&q), drop(&out), drop(&lse);
}

/* ms per call and TFLOP/s at GPT-2 124M's shape (causal FLOPs: forward 2
 * GEMMs of B NH T^2/2 HS multiply-adds, backward 5), cudaEvents on the
 * compute stream after a warm-up: a record, never a check */
static void timing(const prec *p, int B, int T, int NH, int HS)
{
    const int C = NH * HS;
    const size_t nqkv = (size_t)B * T * 3 * C, nout = (size_t)B * T * C, nlse = (size_t)B * NH * T;
    tensor qkv = mk(nqkv, p->bf, 1.5), out = mk(nout, p->bf, 1), lse = mk(nlse, 0, 1), dout = mk(nout, p->bf, 1),
           dqkv = mk(nqkv, p->bf, 1);
    const pt_attn_dims d = {B, NH, HS, T, T, 0, 0, 3 * C, 3 * C, NH};
    cudaStream_t s = pt_cuda_stream_compute();
    cudaEvent_t e0, e1, e2;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    cudaEventCreate(&e2);
    const int reps = 10;
    pt_cuda_attention_set_impl(p->impl);
    const long r0 = pt_cuda_attention_cudnn_runs();
    p->fwd(out.dev, lse.dev, qkv.dev, at(&qkv, 1, C), at(&qkv, 1, 2 * C), &d, 0);
    p->bwd(dqkv.dev, at(&dqkv, 1, C), at(&dqkv, 1, 2 * C), dout.dev, qkv.dev, at(&qkv, 1, C), at(&qkv, 1, 2 * C),
           out.dev, lse.dev, &d);
    cudaEventRecord(e0, s);
    for (int i = 0; i < reps; i++) p->fwd(out.dev, lse.dev, qkv.dev, at(&qkv, 1, C), at(&qkv, 1, 2 * C), &d, 0);
    cudaEventRecord(e1, s);
    for (int i = 0; i < reps; i++)
        p->bwd(dqkv.dev, at(&dqkv, 1, C), at(&dqkv, 1, 2 * C), dout.dev, qkv.dev, at(&qkv, 1, C), at(&qkv, 1, 2 * C),
               out.dev, lse.dev, &d);
    cudaEventRecord(e2, s);
    cudaEventSynchronize(e2);
    float f = 0, b = 0;
    cudaEventElapsedTime(&f, e0, e1);
    cudaEventElapsedTime(&b, e1, e2);
    f /= reps, b /= reps;
    const double fl = 2.0 * 2.0 * B * NH * ((double)T * T / 2) * HS;
    const long ran = pt_cuda_attention_cudnn_runs() - r0;
    if (p->impl == PT_ATTN_CUDNN && ran != 2 * (reps + 1))
        printf("# timing: %s: only %ld of %d calls ran on cuDNN (%s)\n", p->name, ran, 2 * (reps + 1),
               pt_cuda_attention_cudnn_fallback());
    if (pt_cuda_ops_status() == PT_OK)
        printf("# timing: %-4s attention B=%d T=%d NH=%d HS=%d: forward %.3f ms, %.1f TFLOP/s; backward %.3f ms, "
               "%.1f TFLOP/s\n",
               p->name, B, T, NH, HS, (double)f, fl / (f * 1e-3) / 1e12, (double)b, 2.5 * fl / (b * 1e-3) / 1e12);
    else
        printf("# timing: %s failed: %s\n", p->name, pt_cuda_ops_errmsg());
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    cudaEventDestroy(e2);
    drop(&qkv), drop(&out), drop(&lse), drop(&dout), drop(&dqkv);
}

int main(void)
{
    gpu_require();
    gpu_rs = gpu_seed();
    const prec precs[] = {
        {"fp32", 0, &pt_cpu_ops_f32, pt_cuda_attention_fwd_f32, pt_cuda_attention_bwd_f32, 5e-5, 1e-5, 1e-4,
         PT_ATTN_FLASH},
        {"bf16", 1, &pt_cpu_ops_bf16, pt_cuda_attention_fwd_bf16, pt_cuda_attention_bwd_bf16, 1.6e-2, 1e-5, 1.6e-2,
         PT_ATTN_FLASH},
#ifdef HAVE_CUDNN
        {"bf16 cudnn", 1, &pt_cpu_ops_bf16, pt_cuda_attention_fwd_bf16, pt_cuda_attention_bwd_bf16, 1.6e-2, 1e-4,
         1.6e-2, PT_ATTN_CUDNN},
#endif
    };
    /* (B, T, NH, HS): tile multiple, T = 77 (not), HS 16, 64, 80; the 32- and 16-row tiles of HS 200, 300 */
    const int shapes[][4] = {{2, 128, 2, 64}, {2, 77, 3, 64}, {1, 77, 2, 16},
                             {2, 77, 2, 80},  {1, 150, 1, 200}, {1, 40, 2, 300}};
    /* GQA: (B, T, NH, NKV, HS, split) */
    const int gqa[][6] = {{2, 77, 8, 1, 64, 0}, {2, 130, 8, 2, 64, 0}, {1, 77, 8, 4, 128, 0},
                          {2, 77, 4, 2, 80, 1}, {1, 200, 6, 3, 16, 1}};
    for (size_t i = 0; i < sizeof precs / sizeof precs[0]; i++) {
        const prec *p = &precs[i];
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            whole(p, shapes[s][0], shapes[s][1], shapes[s][2], shapes[s][2], shapes[s][3], 0);
        whole(p, 2, 77, 3, 3, 64, 1);
        ring(p, 2, 2, 2, 64);
        ring(p, 1, 2, 2, 80);
        /* GQA (NKV < NH; Ainslie et al. 2023): MQA and groups of 2 and 4, packed and split, HS 64, 80, 128
         * (Llama's), T not a multiple of the tile; ring steps with fewer KV heads */
        for (size_t s = 0; s < sizeof gqa / sizeof gqa[0]; s++)
            whole(p, gqa[s][0], gqa[s][1], gqa[s][2], gqa[s][3], gqa[s][4], gqa[s][5]);
        ring(p, 2, 4, 1, 64);
        ring(p, 1, 8, 2, 80);
        refused(p);
    }
    tap_ok(pt_cuda_mem_live() == 0, "every device block was freed (%zu bytes live)", pt_cuda_mem_live());
    const char *quick = getenv("PTRAIN_GPU_QUICK");
    if (!quick || strcmp(quick, "1") != 0)
        for (size_t i = 0; i < sizeof precs / sizeof precs[0]; i++) timing(&precs[i], 16, 1024, 12, 64);
    pt_cuda_attention_set_impl(PT_ATTN_FLASH);
    pt_cuda_attention_cudnn_release();
    pt_cuda_shutdown();
    return tap_done();
}
