/* SPDX-License-Identifier: MIT */
/* The GPT forward and backward on the GPU against the CPU (scripts/test-gpu.sh's
 * gpt-fwd-bwd step): the same model (same seed, same parameters) built on the
 * "cpu" and the "cuda" backend, in fp32 and in bf16, a few AdamW steps on fresh
 * random tokens; each step's loss, every parameter's gradient and, after the
 * steps, every parameter compared.  Where this passes and a layout on the GPU
 * fails, the layout is wrong; where this fails, tests/gpu/test_ops_* say which
 * kernel.  Skips without a GPU.  PTRAIN_GPU_QUICK=1 leaves out the timing.
 *
 * Tolerances.  fp32: the GPU sums in other orders (cuBLASLt's split-K, the
 * flash kernels' tiles, block reductions), so the loss agrees to 1e-5 and each
 * gradient tensor to 1e-3 of its largest element; bf16: the two backends round
 * to bf16 at slightly different places (cuBLASLt's fused GELU rounds once, the
 * CPU twice), so the loss agrees to 1e-2 and each gradient by norm to 5e-2.  A
 * wrong kernel is off by O(1). */
#define _POSIX_C_SOURCE 200809L
#include "config.h"

#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda.h"
#include "backend/ops.h"
#include "core/core.h"
#include "gpu_tap.h"
#include "model/gpt.h"
#include "parallel/context.h"
#include "tests/tap.h"
#include "train/train.h"

typedef struct side {
    const pt_backend *be;
    pt_arena arena;
    pt_pctx ctx;
    pt_gpt m;
    pt_train t;
    int ok;
} side;

static int build(side *s, const char *backend, const pt_gpt_config *cfg, int precision, int B, uint64_t seed)
{
    memset(s, 0, sizeof *s);
    pt_plan plan;
    pt_plan_default(&plan);
    plan.precision = precision;
    s->be = pt_backend_get(backend);
    if (!s->be) return PT_EUNSUPP;
    s->be->set_threads(2);
    pt_arena_init(&s->arena, s->be->mem, 0);
    int rc = pt_pctx_init(&s->ctx, MPI_COMM_SELF, &plan, -1);
    pt_adamw_cfg opt;
    pt_adamw_default(&opt);
    opt.eps = 1e-2f; /* update Lipschitz in g, as tests/mpi/test_equiv.c explains */
    if (!rc) rc = pt_gpt_create(&s->m, cfg, &s->ctx, s->be, &s->arena, B, cfg->seq_len, seed);
    if (!rc) rc = pt_train_create(&s->t, &s->m, &opt, NULL);
    s->ok = rc == PT_OK;
    return rc;
}

static void destroy(side *s)
{
    if (s->ok) {
        pt_train_free(&s->t);
        pt_gpt_free(&s->m);
    }
    pt_pctx_free(&s->ctx);
}

/* n fp32 values of the device (or host) tensor x into host memory */
static float *to_host(const side *s, const float *x, size_t n)
{
    float *h = malloc(sizeof(float) * (n ? n : 1));
    if (h) s->m.ops->copy2d(h, n * sizeof(float), x, n * sizeof(float), n * sizeof(float), 1);
    return h;
}

/* The worst tensor's difference: by its largest element (norm 0) or by norm
 * (norm 1), gradients (grads 1) or parameters; its name into worst. */
static double compare(const side *c, const side *g, int grads, int norm, char *worst, size_t len)
{
    double e = 0;
    for (int i = 0; i < c->m.nparams; i++) {
        const pt_param *pc = &c->m.params[i], *pg = &g->m.params[i];
        size_t n = (size_t)pc->shard.numel;
        const float *a = grads ? pc->grad : pc->data;
        float *b = to_host(g, grads ? pg->grad : pg->data, n);
        if (!b) return INFINITY;
        double num = 0, den = 0;
        for (size_t j = 0; j < n; j++) {
            double d = fabs((double)a[j] - b[j]), r = fabs((double)a[j]);
            if (norm) num += d * d, den += r * r;
            else num = fmax(num, d), den = fmax(den, r);
        }
        double ei = norm ? sqrt(num) / fmax(sqrt(den), 1e-30) : num / fmax(den, 1e-30);
        if (!(ei <= e)) {
            e = ei;
            snprintf(worst, len, "%s", pc->name);
        }
        free(b);
    }
    return e;
}

/* the run's seed: gpu_seed() once in main (fresh, or $PTRAIN_TEST_SEED) */
static uint64_t seed0;

static void run_case(const char *name, const pt_gpt_config *cfg, int B, int precision, int steps)
{
    const int bf = precision == PT_PREC_BF16;
    const uint64_t seed = seed0;
    side c, g;
    int rc = build(&c, "cpu", cfg, precision, B, seed);
    if (!tap_ok(rc == PT_OK, "%s %s: the CPU model (%s)", name, bf ? "bf16" : "fp32", rc ? pt_errmsg() : "")) return;
    rc = build(&g, "cuda", cfg, precision, B, seed);
    if (!tap_ok(rc == PT_OK, "%s %s: the GPU model (%s)", name, bf ? "bf16" : "fp32", rc ? pt_errmsg() : "")) {
        destroy(&g);
        destroy(&c);
        return;
    }
    char worst[32] = "";
    double e = compare(&c, &g, 0, 0, worst, sizeof worst);
    tap_ok(e == 0, "%s %s: the initial parameters are the CPU's exactly (max rel err %.2e, %s)", name,
           bf ? "bf16" : "fp32", e, worst);
    const int T = cfg->seq_len;
    int32_t *tok = malloc(sizeof(int32_t) * (size_t)(B * T + 1));
    pt_rng r;
    pt_rng_seed(&r, seed, 7);
    const double ltol = bf ? 1e-2 : 1e-5, gtol = bf ? 5e-2 : 1e-3, ptol = bf ? 5e-2 : 1e-4;
    for (int s = 0; s < steps && tok; s++) {
        for (int i = 0; i <= B * T; i++) tok[i] = (int32_t)(pt_rng_u64(&r) % (uint64_t)cfg->vocab);
        float lc = NAN, lg = NAN;
        pt_train_zero_grad(&c.t);
        pt_train_zero_grad(&g.t);
        rc = pt_train_forward_backward(&c.t, tok, tok + 1, &lc);
        if (!rc) rc = pt_train_sync(&c.t);
        if (!rc) rc = pt_train_forward_backward(&g.t, tok, tok + 1, &lg);
        if (!rc) rc = pt_train_sync(&g.t);
        if (!rc && pt_cuda_ops_status() != PT_OK) rc = pt_fail(pt_cuda_ops_status(), "%s", pt_cuda_ops_errmsg());
        if (!tap_ok(rc == PT_OK, "%s %s step %d: forward and backward (%s)", name, bf ? "bf16" : "fp32", s + 1,
                    rc ? pt_errmsg() : ""))
            break;
        double le = fabs((double)lc - lg) / fabs((double)lc);
        tap_ok(le < ltol, "%s %s step %d: loss gpu %.6f cpu %.6f (rel err %.2e < %.0e)", name, bf ? "bf16" : "fp32",
               s + 1, lg, lc, le, ltol);
        e = compare(&c, &g, 1, bf, worst, sizeof worst);
        tap_ok(e < gtol, "%s %s step %d: every gradient equals the CPU's (max rel err%s %.2e < %.0e, worst %s)", name,
               bf ? "bf16" : "fp32", s + 1, bf ? " by norm" : "", e, gtol, worst);
        double nc = 0, ng = 0;
        rc = pt_train_update(&c.t, 1e-3f, &nc);
        if (!rc) rc = pt_train_update(&g.t, 1e-3f, &ng);
        if (!tap_ok(rc == PT_OK && fabs(nc - ng) <= 10 * gtol * nc, "%s %s step %d: AdamW, gradient norm gpu %.6f cpu %.6f (%s)",
                    name, bf ? "bf16" : "fp32", s + 1, ng, nc, rc ? pt_errmsg() : ""))
            break;
    }
    e = compare(&c, &g, 0, 1, worst, sizeof worst);
    tap_ok(e < ptol, "%s %s: after %d steps every parameter equals the CPU's (rel err by norm %.2e < %.0e, worst %s)",
           name, bf ? "bf16" : "fp32", steps, e, ptol, worst);
    free(tok);
    destroy(&g);
    destroy(&c);
}

/* ms of one forward+backward of GPT-2 124M's shape on the GPU (bf16 and fp32) */
static void timing(int precision)
{
    pt_gpt_config cfg;
    if (pt_gpt_preset("gpt2-124M", &cfg) != PT_OK) return;
    const int B = 4, T = cfg.seq_len;
    side g;
    if (build(&g, "cuda", &cfg, precision, B, 1) != PT_OK) {
        tap_diag("timing: %s", pt_errmsg());
        destroy(&g);
        return;
    }
    int32_t *tok = malloc(sizeof(int32_t) * (size_t)(B * T + 1));
    for (int i = 0; tok && i <= B * T; i++) tok[i] = (int32_t)((i * 2654435761u) % (unsigned)cfg.vocab);
    float loss;
    double best = INFINITY;
    for (int it = 0; it < 4 && tok; it++) {
        pt_cuda_sync();
        double t0 = pt_now();
        pt_train_zero_grad(&g.t);
        if (pt_train_forward_backward(&g.t, tok, tok + 1, &loss) != PT_OK) break;
        pt_cuda_sync();
        if (it) best = fmin(best, pt_now() - t0);
    }
    double tok_s = B * T / best;
    tap_diag("timing: gpt2-124M %s B=%d T=%d forward+backward %.1f ms, %.0f tok/s (loss %.3f)",
             precision == PT_PREC_BF16 ? "bf16" : "fp32", B, T, best * 1e3, tok_s, loss);
    free(tok);
    destroy(&g);
}

int main(int argc, char **argv)
{
    gpu_require();
    MPI_Init(&argc, &argv);
    seed0 = gpu_seed();
    pt_gpt_config small = {.n_layer = 2, .n_head = 4, .n_embd = 64, .seq_len = 32, .vocab = 97};
    pt_gpt_config wide = {.n_layer = 2, .n_head = 2, .n_embd = 128, .seq_len = 128, .vocab = 500};
    pt_gpt_config llama; /* GQA 8:2 heads of 64, untied head, q/k/v biases, SwiGLU 344 */
    pt_model_shape_parse("model", "llama:2,8,2,512,344,128,500,untied,qkv-bias,theta=500000", &llama);
    for (int bf = 0; bf <= 1; bf++) {
        run_case("small (HS 16, V 97 padded)", &small, 4, bf ? PT_PREC_BF16 : PT_PREC_FP32, 3);
        run_case("wide (HS 64, T 128)", &wide, 2, bf ? PT_PREC_BF16 : PT_PREC_FP32, 2);
        run_case("llama (GQA 8:2, HS 64, untied, biases)", &llama, 2, bf ? PT_PREC_BF16 : PT_PREC_FP32, 2);
    }
    if (!getenv("PTRAIN_GPU_QUICK") || strcmp(getenv("PTRAIN_GPU_QUICK"), "1")) {
        timing(PT_PREC_BF16);
        timing(PT_PREC_FP32);
    }
    tap_ok(pt_cuda_ops_status() == PT_OK, "no CUDA op failed (%s)", pt_cuda_ops_errmsg());
    int rc = tap_done();
    MPI_Finalize();
    return rc;
}
