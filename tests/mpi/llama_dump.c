/* SPDX-License-Identifier: MIT */
/* The ptrain side of tests/mpi/test_llama_torch.sh: train a model of the
 * Llama family (or GPT-2) single-process in fp32 for STEPS AdamW steps on
 * random tokens and write, for tests/mpi/llama_torch.py (an independent
 * float64 PyTorch implementation of Hugging Face's LlamaForCausalLM), the
 * shape, every initial parameter, the tokens and ptrain's validation losses.
 *
 * usage: llama_dump MODEL B T STEPS LR SEED OUT [ROPE]
 * ROPE "factor,low,high,orig": Llama 3.1's RoPE scaling on the model (the
 * spellings carry it only through the presets).
 * OUT (little-endian): "PTLLAMA1"; int32 L, H, KV, C, I, V, untied,
 * qkv_bias, rope_orig_ctx, B, T, steps, nparams; float64 norm_eps,
 * rope_theta, rope_factor, rope_low_freq, rope_high_freq, lr, beta1, beta2,
 * eps, weight_decay, grad_clip; per parameter (pt_model_param_info order):
 * char name[24], int64 rows, cols, float32 [rows*cols] initial values;
 * int32 tokens [(steps + 1) (B T + 1)] (batch s trains step s, the last is
 * the validation batch; targets are the next token); float64 losses
 * [steps + 1] (the validation loss before the first step and after each).
 */
#include "core/core.h"
#include "model/gpt.h"
#include "parallel/context.h"
#include "train/train.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void w32(FILE *f, int v) { int32_t x = v; fwrite(&x, 4, 1, f); }
static void w64(FILE *f, double v) { fwrite(&v, 8, 1, f); }

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    if (argc != 8 && argc != 9) {
        fprintf(stderr, "usage: llama_dump MODEL B T STEPS LR SEED OUT [factor,low,high,orig]\n");
        MPI_Finalize();
        return 2;
    }
    pt_gpt_config cfg;
    if (pt_model_shape_parse("MODEL", argv[1], &cfg) < 0) {
        fprintf(stderr, "llama_dump: %s\n", pt_errmsg());
        MPI_Finalize();
        return 2;
    }
    if (argc == 9 && sscanf(argv[8], "%f,%f,%f,%d", &cfg.rope_factor, &cfg.rope_low_freq, &cfg.rope_high_freq,
                            &cfg.rope_orig_ctx) != 4) {
        fprintf(stderr, "llama_dump: ROPE '%s' is not factor,low,high,orig\n", argv[8]);
        MPI_Finalize();
        return 2;
    }
    const int B = atoi(argv[2]), T = atoi(argv[3]), steps = atoi(argv[4]);
    const float lr = (float)atof(argv[5]);
    const uint64_t seed = strtoull(argv[6], NULL, 10);
    pt_plan plan;
    pt_plan_default(&plan);
    pt_pctx ctx;
    pt_arena arena = {0};
    pt_gpt m;
    pt_train t;
    pt_adamw_cfg opt;
    pt_adamw_default(&opt);
    const pt_backend *be = pt_backend_get("cpu");
    be->set_threads(1);
    int rc = pt_pctx_init(&ctx, MPI_COMM_SELF, &plan, -1);
    if (!rc) rc = pt_gpt_create(&m, &cfg, &ctx, be, &arena, B, T, seed);
    if (!rc) rc = pt_train_create(&t, &m, &opt, NULL);
    if (rc) {
        fprintf(stderr, "llama_dump: %s\n", pt_errmsg());
        MPI_Finalize();
        return 1;
    }
    FILE *f = fopen(argv[7], "wb");
    if (!f) {
        perror(argv[7]);
        MPI_Finalize();
        return 1;
    }
    fwrite("PTLLAMA1", 8, 1, f);
    const int ints[] = {cfg.n_layer, cfg.n_head, pt_model_kv_heads(&cfg), cfg.n_embd, pt_model_ffn(&cfg), cfg.vocab,
                        pt_model_untied(&cfg), cfg.qkv_bias, cfg.rope_orig_ctx, B, T, steps, m.nparams};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) w32(f, ints[i]);
    const double dbl[] = {pt_model_norm_eps(&cfg), pt_model_rope_theta(&cfg), cfg.rope_factor, cfg.rope_low_freq,
                          cfg.rope_high_freq, lr, opt.beta1, opt.beta2, opt.eps, opt.weight_decay, opt.grad_clip};
    for (size_t i = 0; i < sizeof dbl / sizeof dbl[0]; i++) w64(f, dbl[i]);
    for (int i = 0; i < m.nparams; i++) {
        const pt_param *p = &m.params[i];
        const int64_t rows = p->init_rows, n = rows * p->cols; /* the real vocabulary rows */
        char name[24] = {0};
        snprintf(name, sizeof name, "%s", p->name);
        fwrite(name, 24, 1, f);
        fwrite(&rows, 8, 1, f);
        fwrite(&p->cols, 8, 1, f);
        fwrite(p->data, 4, (size_t)n, f); /* fp32 on the CPU backend: data is host memory */
    }
    const size_t nb = (size_t)B * T + 1;
    int32_t *tok = malloc(sizeof(int32_t) * nb * (size_t)(steps + 1));
    double *losses = malloc(sizeof(double) * (size_t)(steps + 1));
    pt_rng r;
    pt_rng_seed(&r, seed, 7);
    for (size_t i = 0; i < nb * (size_t)(steps + 1); i++) tok[i] = (int32_t)(pt_rng_u64(&r) % (uint64_t)cfg.vocab);
    const int32_t *val = tok + nb * (size_t)steps;
    float loss;
    rc = pt_gpt_forward(&m, val, val + 1, &loss);
    losses[0] = loss;
    for (int s = 0; !rc && s < steps; s++) {
        const int32_t *b = tok + nb * (size_t)s;
        rc = pt_train_step(&t, b, b + 1, lr, &loss, NULL);
        if (!rc) rc = pt_gpt_forward(&m, val, val + 1, &loss);
        losses[s + 1] = loss;
    }
    if (rc) fprintf(stderr, "llama_dump: %s\n", pt_errmsg());
    fwrite(tok, sizeof(int32_t), nb * (size_t)(steps + 1), f);
    fwrite(losses, sizeof(double), (size_t)(steps + 1), f);
    fclose(f);
    free(tok);
    free(losses);
    pt_train_free(&t);
    pt_gpt_free(&m);
    pt_pctx_free(&ctx);
    MPI_Finalize();
    return rc ? 1 : 0;
}
