/* SPDX-License-Identifier: MIT */
/* ptrain-ckpt: the one-rank model that convert and sample go through
 * (ckpt_tool.h). */
#define _GNU_SOURCE
#include "config.h"
#include "ckpt_tool.h"
#include "core/hostmem.h"
#include "optim/adamw.h"
#include "plan/cost.h"

#include <mpi.h>
#include <stdio.h>
#include <string.h>

void ckpt_holder_free(holder *h)
{
    if (h->have_tr) pt_train_free(&h->tr);
    if (h->have_model) pt_gpt_free(&h->model);
    if (h->have_ctx) pt_pctx_free(&h->ctx);
    h->have_tr = h->have_model = h->have_ctx = 0;
}

/* The whole model cfg on this process alone (dp = tp = pp = 1), with its
 * training state (16 bytes per parameter) and activations for one sequence
 * of T tokens. */
int ckpt_holder_build(holder *h, const pt_gpt_config *cfg, int T)
{
    memset(h, 0, sizeof *h);
    /* MPI starts here, once a model is built: a file refused before then
     * never starts Open MPI's singleton daemon, whose own log lines (seen
     * under load: "ORTE_ERROR_LOG: Out of resource") would join the one
     * line of the refusal */
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited) MPI_Init(NULL, NULL);
    int world;
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    if (world != 1) return pt_fail(PT_EINVAL, "convert runs as one process (started with %d ranks)", world);
    pt_plan_default(&h->plan);
    int rc = pt_pctx_init(&h->ctx, MPI_COMM_WORLD, &h->plan, -1);
    if (rc) return rc;
    h->have_ctx = 1;
    const pt_backend *be = pt_backend_get("cpu");
    if (!be) return pt_fail(PT_EUNSUPP, "no cpu backend");
    rc = pt_gpt_create(&h->model, cfg, &h->ctx, be, &h->arena, 1, T, 0);
    if (rc) return rc;
    h->have_model = 1;
    pt_adamw_cfg opt;
    pt_adamw_default(&opt);
    rc = pt_train_create(&h->tr, &h->model, &opt, NULL);
    if (rc) return rc;
    h->have_tr = 1;
    return PT_OK;
}

/* The bytes ckpt_holder_build(cfg, T) allocates: the cost model's
 * parameters, gradients and AdamW state (the model as built, wpe of
 * cfg->seq_len rows) under the holder's plan (one rank), and its
 * activations for one sequence of T tokens; 16 bytes per parameter when
 * the cost model refuses the shape. */
static double holder_bytes(const pt_gpt_config *cfg, int T)
{
    pt_plan plan;
    pt_plan_default(&plan);
    pt_model_shape m = *cfg;
    pt_cost full, act;
    pt_errsave es;
    pt_error_save(&es); /* a refusal of the cost model is not this check's message */
    double need = 16.0 * (double)pt_gpt_num_params(cfg);
    if (pt_cost_eval(&m, 1, &plan, NULL, NULL, &full) >= 0) {
        need = full.mem_params + full.mem_grads + full.mem_optim;
        m.seq_len = T;
        if (pt_cost_eval(&m, 1, &plan, NULL, NULL, &act) >= 0) need += act.mem_act;
        else need += full.mem_act;
    }
    pt_error_restore(&es);
    return need;
}

int ckpt_holder_fits(const pt_gpt_config *cfg, int T, double extra)
{
    const double model = holder_bytes(cfg, T), need = model + (extra > 0 ? extra : 0);
    char what[160], detail[200];
    snprintf(what, sizeof what, "model L=%d H=%d C=%d T=%d V=%d", cfg->n_layer, cfg->n_head, cfg->n_embd,
             cfg->seq_len, cfg->vocab);
    snprintf(detail, sizeof detail, " (%.2f GiB for its weights, gradients and AdamW state on one process, %.2f GiB "
             "for the file's data in memory)", pt_gib(model), pt_gib(need - model));
    return pt_mem_check(need, 1, what, detail, "this process", NULL);
}
