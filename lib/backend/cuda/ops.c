/* SPDX-License-Identifier: MIT */
/* The CUDA ops tables (ops_cuda.h), built from the op families' fills
 * (embed.cu, eltwise.cu, layernorm.cu, gemm_ops.c, attention.cu, xent.cu,
 * mem.cu, adamw.cu) and checked against ops.h's PT_OPS.  The families
 * record their errors in op_record.c, below this file and them. */
#include "config.h"
#include "backend/cuda/ops_cuda.h"
#include "backend/ops.h"
#include "core/core.h"

#include <stdio.h>

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
