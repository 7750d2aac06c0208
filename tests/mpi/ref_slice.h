/* SPDX-License-Identifier: MIT */
/* The reference side of the MPI equivalence tests (test_equiv, test_zero,
 * test_pipeline): a single-process model's tensor cut to a parallel model's
 * shard with the layout's own param_slice, so a shard compares element by
 * element.  Header-only, for the programs under tests/mpi. */
#ifndef PTRAIN_TESTS_REF_SLICE_H
#define PTRAIN_TESTS_REF_SLICE_H
#include "model/gpt.h"
#include "parallel/layout.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Reference parameter q (its gradient when grads) as parameter p of model m
 * holds it on this rank: q's [q->rows, q->cols] floats zero-padded to p's
 * full [p->rows, p->cols] (the padded vocabulary), then sliced by m's
 * layout.  Returns a malloc'd [p->shard.numel] buffer the caller frees;
 * out of memory aborts the job (a test cannot go on without it). */
static inline float *ref_slice(const pt_gpt *m, const pt_pctx *c, const pt_param *p, const pt_param *q, int grads)
{
    float *full = calloc((size_t)(p->rows * p->cols), sizeof(float));
    float *slice = malloc(sizeof(float) * (size_t)p->shard.numel);
    if (!full || !slice) {
        fprintf(stderr, "ref_slice: out of memory for %s\n", p->name);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    memcpy(full, grads ? q->grad : q->data, sizeof(float) * (size_t)(q->rows * q->cols));
    m->layout->param_slice(m->ops, c, p->cls, full, slice, p->rows, p->cols);
    free(full);
    return slice;
}

/* PTRAIN_TEST_LLAMA=1 in the environment: the test's GPT-2 shape as a
 * Llama of the same depth, heads and vocabulary (KV heads n_head/2 from 4 heads up, MLP
 * width 3C/2, untied head, q/k/v biases; C rounded up to an even head
 * size), so the MPI equivalence tests run the Llama family through the
 * same checks (tests/mpi/test_zero.sh, test_pipeline.sh). */
static inline void test_model_family(pt_gpt_config *cfg)
{
    const char *e = getenv("PTRAIN_TEST_LLAMA");
    if (!e || strcmp(e, "1") != 0) return;
    cfg->family = PT_FAMILY_LLAMA;
    if ((cfg->n_embd / cfg->n_head) % 2) cfg->n_embd += cfg->n_head;
    cfg->n_kv_head = cfg->n_head >= 4 ? cfg->n_head / 2 : cfg->n_head; /* GQA where 1d tp=2 still divides it */
    cfg->ffn = cfg->n_embd * 3 / 2;
    cfg->untied = 1;
    cfg->qkv_bias = 1;
}

#endif
