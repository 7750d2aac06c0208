/* SPDX-License-Identifier: MIT */
/* ptrain-ckpt: the one-rank model that convert and sample go through
 * (ckpt_tool.h). */
#define _GNU_SOURCE
#include "config.h"
#include "ckpt_tool.h"
#include "optim/adamw.h"

#include <mpi.h>
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
