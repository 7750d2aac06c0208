/* SPDX-License-Identifier: MIT */
/* The error record of the CUDA ops (ops_cuda.h): the ops return nothing,
 * so a family's kernel records its first failure here and the step reads
 * it (pt_cuda_ops_status).  Below the family files and ops.c's tables. */
#include "config.h"
#include "backend/cuda/cuda_priv.h"
#include "backend/cuda/ops_cuda.h"
#include "core/core.h"

#include <stdio.h>

/* ---- the error record ------------------------------------------------------------------------ */

static struct {
    int rc;
    char msg[512];
} E;

void pt_cuda_op_record(int rc, const char *op)
{
    if (rc == PT_OK || E.rc != PT_OK) return;
    E.rc = rc;
    snprintf(E.msg, sizeof E.msg, "%s: %s", op ? op : "cuda op", pt_errmsg());
    /* the ops return nothing: say it once, where the run's log shows it */
    fprintf(stderr, "ptrain: error: CUDA op failed: %s\n", E.msg);
    fflush(stderr);
}

int pt_cuda_op_check(const char *op)
{
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess) return PT_OK;
    int rc = pt_cuda_fail(e, "kernel launch");
    pt_cuda_op_record(rc, op);
    return rc;
}

int pt_cuda_ops_status(void) { return E.rc; }
const char *pt_cuda_ops_errmsg(void) { return E.rc != PT_OK ? E.msg : ""; }

void pt_cuda_ops_clear(void)
{
    E.rc = PT_OK;
    E.msg[0] = '\0';
}
