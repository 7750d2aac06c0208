/* SPDX-License-Identifier: MIT */
/* The CUDA ops table's host side (ops_cuda.h): the error record of the
 * void ops, and the tables, built from the op families' fills (embed.cu,
 * eltwise.cu, layernorm.cu, gemm_ops.c, attention.cu, xent.cu, mem.cu,
 * adamw.cu) and checked against ops.h's PT_OPS. */
#include "config.h"
#include "backend/cuda/cuda_priv.h"
#include "backend/cuda/ops_cuda.h"
#include "backend/ops.h"
#include "core/core.h"

#include <stdio.h>
#include <string.h>

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

/* ---- the tables ----------------------------------------------------------------------------------- */

static const pt_ops_fill_fn cuda_fills[PT_FAM_N] = {
    [PT_FAM_EMBED] = pt_cuda_fill_embed, [PT_FAM_ELTWISE] = pt_cuda_fill_eltwise,
    [PT_FAM_NORM] = pt_cuda_fill_norm,   [PT_FAM_GEMM] = pt_cuda_fill_gemm,
    [PT_FAM_ATTENTION] = pt_cuda_fill_attention, [PT_FAM_XENT] = pt_cuda_fill_xent,
    [PT_FAM_MEM] = pt_cuda_fill_mem,     [PT_FAM_ADAMW] = pt_cuda_fill_adamw,
};

int pt_cuda_ops_build(pt_ops *o, const pt_prec_policy *p, unsigned families)
{
    /* the kernels' instantiations: (fp32, fp32) and (bf16, fp32), GEMM operands in the activation type */
    const char *name = p && p->act == PT_F32 ? "f32" : p && p->act == PT_BF16 ? "bf16" : NULL;
    if (!name || p->gemm != p->act || p->acc != PT_F32 || p->scaling != PT_SCALE_NONE)
        return pt_fail(PT_EUNSUPP, "backend 'cuda' has no kernels for precision '%s' (valid: fp32, bf16)",
                       p && p->name ? p->name : "?");
    return pt_ops_build(o, "cuda", name, p, cuda_fills, families);
}

pt_ops pt_cuda_ops_f32, pt_cuda_ops_bf16;

/* Both tables when the library is loaded (host code: no device needed).
 * A table that fails its check keeps prec NULL, so the backend's lookup
 * refuses it; its line is said here, once. */
__attribute__((constructor)) static void cuda_tables(void)
{
    if (pt_cuda_ops_build(&pt_cuda_ops_f32, PT_PREC_POLICY_FP32, PT_FAM_ALL) != PT_OK)
        fprintf(stderr, "ptrain: %s\n", pt_errmsg());
    if (pt_cuda_ops_build(&pt_cuda_ops_bf16, PT_PREC_POLICY_BF16, PT_FAM_ALL) != PT_OK)
        fprintf(stderr, "ptrain: %s\n", pt_errmsg());
}
