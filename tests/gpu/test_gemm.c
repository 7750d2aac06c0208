/* SPDX-License-Identifier: MIT */
/* The CUDA backend's GEMM layer (lib/backend/cuda/gemm.h) against the CPU,
 * in llm.c's dev/cuda pattern: the CPU's matmul_fwd / matmul_bwd in double
 * (pt_cpu_ops_f64) as the reference, the cuBLASLt call, the comparison, a
 * timing line.  Every epilogue (bias, GELU with and without the saved
 * pre-GELU values, beta 1, the backward's DGELU with the bias gradient,
 * dw with BGRADB, dbias alone) in fp32, fp32 on TF32 tensor cores and bf16
 * (fp32 accumulation; dw and the bias gradients fp32), fused and with the
 * fusion turned off (the epilogue kernels of gemm_epi.cu), on shapes whose
 * aux can be fused and on odd ones whose cannot.  Fresh random inputs each
 * run; bf16 inputs are rounded to bf16 before the reference sees them, so
 * only the products' rounding differs.  Skips without a GPU.
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
#include "backend/cuda/gemm.h"
#include "backend/ops.h"
#include "gpu_tap.h"
#include "tests/tap.h"

/* A tensor on both sides: ref (double, what the device holds, exactly) and
 * dev (act elements, or fp32 when acc). */
typedef struct {
    size_t n;
    int elem;     /* PT_GEMM_F32 / PT_GEMM_BF16 */
    double *ref;
    void *dev;
} tensor;

static size_t esize(int elem) { return elem == PT_GEMM_BF16 ? 2 : 4; }

/* what an element of type elem stores for x */
static double stored(int elem, double x)
{
    return elem == PT_GEMM_BF16 ? (double)gpu_bf16_to_f32(gpu_f32_to_bf16((float)x)) : (double)(float)x;
}

static int upload(tensor *t)
{
    void *h = malloc(t->n * esize(t->elem) + 1);
    for (size_t i = 0; i < t->n; i++) {
        t->ref[i] = stored(t->elem, t->ref[i]);
        if (t->elem == PT_GEMM_BF16) ((uint16_t *)h)[i] = gpu_f32_to_bf16((float)t->ref[i]);
        else ((float *)h)[i] = (float)t->ref[i];
    }
    int rc = pt_cuda_to_device(t->dev, h, t->n * esize(t->elem));
    free(h);
    return rc;
}

/* random values scaled by s, on both sides */
static tensor mk(size_t n, int elem, double s)
{
    tensor t = {n, elem, malloc(sizeof(double) * (n + 1)), pt_cuda_mem.alloc(n * esize(elem))};
    if (!t.dev) {
        printf("Bail out! no %zu bytes of device memory: %s\n", n * esize(elem), pt_errmsg());
        exit(1);
    }
    for (size_t i = 0; i < n; i++) t.ref[i] = s * gpu_urand();
    if (upload(&t) != PT_OK) {
        printf("Bail out! upload: %s\n", pt_errmsg());
        exit(1);
    }
    return t;
}

static void drop(tensor *t)
{
    free(t->ref);
    pt_cuda_mem.free(t->dev);
}

/* max |device - reference| / max |reference| */
static double relerr(const tensor *t, const double *want)
{
    void *h = malloc(t->n * esize(t->elem) + 1);
    if (pt_cuda_to_host(h, t->dev, t->n * esize(t->elem)) != PT_OK) {
        free(h);
        return INFINITY;
    }
    double e = 0, m = 0;
    for (size_t i = 0; i < t->n; i++) {
        double g = t->elem == PT_GEMM_BF16 ? gpu_bf16_to_f32(((uint16_t *)h)[i]) : ((float *)h)[i];
        if (!(fabs(g - want[i]) <= e)) e = fabs(g - want[i]); /* NaN counts */
        if (fabs(want[i]) > m) m = fabs(want[i]);
    }
    free(h);
    return e / (m > 0 ? m : 1);
}

typedef struct {
    const char *name;
    int act, tf32, fuse;
    double tol;
} variant;

static void check(const variant *v, const char *what, int rc, double err, int N, int C, int OC)
{
    tap_ok(rc == PT_OK && err <= v->tol, "%s %s N=%d C=%d OC=%d: max|gpu-cpu|/max|cpu| = %.2e (tol %.0e)%s%s", v->name,
           what, N, C, OC, err, v->tol, rc ? ": " : "", rc ? pt_errmsg() : "");
}

static void forward(const variant *v, int N, int C, int OC)
{
    static const struct {
        int bias, gelu, aux;
        float beta;
    } cases[] = {{0, 0, 0, 0}, {1, 0, 0, 0}, {1, 0, 0, 1}, {1, 1, 1, 0}, {0, 1, 1, 0}, {1, 1, 0, 1}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const int a = v->act;
        tensor inp = mk((size_t)N * C, a, 1), w = mk((size_t)OC * C, a, 1 / sqrt((double)C)),
               b = mk((size_t)OC, a, 0.5), out = mk((size_t)N * OC, a, 1), aux = mk((size_t)N * OC, a, 1);
        double *ref = malloc(sizeof(double) * (size_t)N * OC), *raux = malloc(sizeof(double) * (size_t)N * OC);
        memcpy(ref, out.ref, sizeof(double) * (size_t)N * OC);
        pt_cpu_ops_f64.matmul_fwd(ref, cases[c].aux ? raux : NULL, inp.ref, w.ref, cases[c].bias ? b.ref : NULL,
                                  cases[c].beta, N, C, OC, cases[c].gelu ? PT_EPI_GELU : PT_EPI_DEFAULT);
        int rc = pt_cuda_matmul_fwd(a, out.dev, cases[c].aux ? aux.dev : NULL, inp.dev, w.dev,
                                    cases[c].bias ? b.dev : NULL, cases[c].beta, N, C, OC,
                                    cases[c].gelu ? PT_EPI_GELU : PT_EPI_DEFAULT);
        if (rc == PT_OK) rc = pt_cuda_sync();
        char what[96];
        snprintf(what, sizeof what, "forward%s%s%s, beta %g", cases[c].bias ? " +bias" : "",
                 cases[c].gelu ? " GELU" : "", cases[c].aux ? " (aux kept)" : "", (double)cases[c].beta);
        check(v, what, rc, relerr(&out, ref), N, C, OC);
        if (cases[c].aux) {
            snprintf(what, sizeof what, "forward%s GELU: the pre-GELU aux", cases[c].bias ? " +bias" : "");
            check(v, what, rc, relerr(&aux, raux), N, C, OC);
        }
        free(ref), free(raux);
        drop(&inp), drop(&w), drop(&b), drop(&out), drop(&aux);
    }
}

static void backward(const variant *v, int N, int C, int OC)
{
    const int a = v->act;
    tensor inp = mk((size_t)N * C, a, 1), w = mk((size_t)OC * C, a, 1 / sqrt((double)C)),
           dout = mk((size_t)N * OC, a, 1), dinp = mk((size_t)N * C, a, 1), dw = mk((size_t)OC * C, PT_GEMM_F32, 1),
           db = mk((size_t)OC, PT_GEMM_F32, 1), aux = mk((size_t)N * C, a, 2), dba = mk((size_t)C, PT_GEMM_F32, 1);
    const size_t nbytes = sizeof(double) * ((size_t)N * C + (size_t)OC * C + (size_t)OC + (size_t)C);
    double *r = malloc(nbytes), *rdinp = r, *rdw = r + (size_t)N * C, *rdb = rdw + (size_t)OC * C, *rdba = rdb + OC;
    /* DEFAULT: dinp += dout w, dw += dout^T inp, dbias += colsum(dout) */
    memcpy(rdinp, dinp.ref, sizeof(double) * (size_t)N * C);
    memcpy(rdw, dw.ref, sizeof(double) * (size_t)OC * C);
    memcpy(rdb, db.ref, sizeof(double) * (size_t)OC);
    pt_cpu_ops_f64.matmul_bwd(rdinp, rdw, rdb, dout.ref, inp.ref, w.ref, N, C, OC, PT_EPI_DEFAULT, NULL, NULL);
    int rc = pt_cuda_matmul_bwd(a, dinp.dev, dw.dev, db.dev, dout.dev, inp.dev, w.dev, N, C, OC, PT_EPI_DEFAULT, NULL,
                                NULL);
    if (rc == PT_OK) rc = pt_cuda_sync();
    check(v, "backward dinp += dout w", rc, relerr(&dinp, rdinp), N, C, OC);
    check(v, "backward dw += dout^T inp (fp32)", rc, relerr(&dw, rdw), N, C, OC);
    check(v, "backward dbias += colsum(dout) (BGRADB, fp32)", rc, relerr(&db, rdb), N, C, OC);
    /* DGELU: dinp = (dout w) * GELU'(aux) written, dbias_aux += its colsums */
    memcpy(rdba, dba.ref, sizeof(double) * (size_t)C);
    pt_cpu_ops_f64.matmul_bwd(rdinp, NULL, NULL, dout.ref, inp.ref, w.ref, N, C, OC, PT_EPI_DGELU, aux.ref, rdba);
    rc = pt_cuda_matmul_bwd(a, dinp.dev, NULL, NULL, dout.dev, inp.dev, w.dev, N, C, OC, PT_EPI_DGELU, aux.dev, dba.dev);
    if (rc == PT_OK) rc = pt_cuda_sync();
    check(v, "backward DGELU: dinp = (dout w) GELU'(aux) written", rc, relerr(&dinp, rdinp), N, C, OC);
    check(v, "backward DGELU_BGRAD: dbias_aux += colsum (fp32)", rc, relerr(&dba, rdba), N, C, OC);
    /* dbias alone (no dw, no dinp): the column sums */
    pt_cpu_ops_f64.matmul_bwd(NULL, NULL, rdb, dout.ref, inp.ref, w.ref, N, C, OC, PT_EPI_DEFAULT, NULL, NULL);
    rc = pt_cuda_matmul_bwd(a, NULL, NULL, db.dev, dout.dev, inp.dev, w.dev, N, C, OC, PT_EPI_DEFAULT, NULL, NULL);
    if (rc == PT_OK) rc = pt_cuda_sync();
    check(v, "backward dbias alone", rc, relerr(&db, rdb), N, C, OC);
    free(r);
    drop(&inp), drop(&w), drop(&dout), drop(&dinp), drop(&dw), drop(&db), drop(&aux), drop(&dba);
}

/* ms per call and TFLOP/s of one GEMM shape (cudaEvents on the compute
 * stream, after warm-up): a record, never a check */
static void timing(const char *name, int act, int tf32, int N, int C, int OC, int gelu)
{
    pt_cuda_gemm_set_tf32(tf32);
    tensor inp = mk((size_t)N * C, act, 1), w = mk((size_t)OC * C, act, 0.03), b = mk((size_t)OC, act, 0.1),
           out = mk((size_t)N * OC, act, 0), aux = mk((size_t)N * OC, act, 0);
    cudaStream_t s = pt_cuda_stream_compute();
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    const int reps = 20;
    int rc = PT_OK;
    for (int i = 0; i < 3 && rc == PT_OK; i++)
        rc = pt_cuda_matmul_fwd(act, out.dev, gelu ? aux.dev : NULL, inp.dev, w.dev, b.dev, 0, N, C, OC,
                                gelu ? PT_EPI_GELU : PT_EPI_DEFAULT);
    cudaEventRecord(e0, s);
    for (int i = 0; i < reps && rc == PT_OK; i++)
        rc = pt_cuda_matmul_fwd(act, out.dev, gelu ? aux.dev : NULL, inp.dev, w.dev, b.dev, 0, N, C, OC,
                                gelu ? PT_EPI_GELU : PT_EPI_DEFAULT);
    cudaEventRecord(e1, s);
    cudaEventSynchronize(e1);
    float ms = 0;
    cudaEventElapsedTime(&ms, e0, e1);
    ms /= reps;
    if (rc == PT_OK)
        printf("# timing: %-5s forward N=%d C=%d OC=%d %s: %.3f ms, %.1f TFLOP/s\n", name, N, C, OC,
               gelu ? "GELU_AUX_BIAS" : "BIAS", (double)ms, 2.0 * N * C * OC / (ms * 1e-3) / 1e12);
    else
        printf("# timing: %s failed: %s\n", name, pt_errmsg());
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    drop(&inp), drop(&w), drop(&b), drop(&out), drop(&aux);
    pt_cuda_gemm_set_tf32(0);
}

int main(void)
{
    gpu_require();
    gpu_rs = gpu_seed();
    const variant variants[] = {
        {"fp32", PT_GEMM_F32, 0, 1, 5e-5},          {"tf32", PT_GEMM_F32, 1, 1, 5e-3},
        {"bf16", PT_GEMM_BF16, 0, 1, 1.6e-2},       {"fp32 unfused", PT_GEMM_F32, 0, 0, 5e-5},
        {"bf16 unfused", PT_GEMM_BF16, 0, 0, 1.6e-2},
    };
    /* (N, C, OC): aux fusable (C, OC multiples of 8), odd (not fusable), a GPT-2 MLP slice */
    const int shapes[][3] = {{37, 96, 136}, {61, 50, 70}, {256, 768, 3072}};
    for (size_t i = 0; i < sizeof variants / sizeof variants[0]; i++) {
        const variant *v = &variants[i];
        pt_cuda_gemm_set_tf32(v->tf32);
        pt_cuda_gemm_set_fusion(v->fuse);
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            forward(v, shapes[s][0], shapes[s][1], shapes[s][2]);
            backward(v, shapes[s][0], shapes[s][1], shapes[s][2]);
        }
        pt_cuda_gemm_stats st;
        pt_cuda_gemm_get_stats(&st);
        printf("# %s: %llu matmuls, %llu with the epilogue fused, %llu followed by the kernels; %zu shapes cached%s%s\n",
               v->name, (unsigned long long)st.calls, (unsigned long long)st.fused, (unsigned long long)st.unfused,
               st.entries, st.last_unfused[0] ? "; last unfused: " : "", st.last_unfused);
    }
    pt_cuda_gemm_set_fusion(1);
    pt_cuda_gemm_set_tf32(0);
    pt_cuda_gemm_stats st;
    pt_cuda_gemm_get_stats(&st);
    tap_ok(st.workspace == PT_CUDA_GEMM_WORKSPACE, "cuBLASLt's workspace: %zu bytes, allocated once", st.workspace);
    tap_ok(pt_cuda_mem_live() == 0, "every device block was freed (%zu bytes live)", pt_cuda_mem_live());
    const char *quick = getenv("PTRAIN_GPU_QUICK");
    if (!quick || strcmp(quick, "1") != 0) {
        /* GPT-2 124M's MLP at B=16, T=1024 */
        timing("bf16", PT_GEMM_BF16, 0, 16384, 768, 3072, 1);
        timing("bf16", PT_GEMM_BF16, 0, 16384, 768, 3072, 0);
        timing("tf32", PT_GEMM_F32, 1, 16384, 768, 3072, 1);
        timing("fp32", PT_GEMM_F32, 0, 16384, 768, 3072, 1);
    }
    pt_cuda_shutdown();
    return tap_done();
}
