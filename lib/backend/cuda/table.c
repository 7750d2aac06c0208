/* SPDX-License-Identifier: MIT */
/* The CUDA backend's ops tables (ops_cuda.h): pt_cuda_ops_f32 (fp32
 * activations) and pt_cuda_ops_bf16 (bf16 activations, fp32 accumulation),
 * entry by entry the kernels of ops_elem.cu, ops_norm.cu, attention.cu and
 * the cuBLASLt entries of ops.c.  The materialised attention reference
 * (attention_ref_fwd/bwd) is the CPU's alone (ops.h allows NULL here). */
#include "config.h"
#include "backend/cuda/ops_cuda.h"
#include "backend/ops.h"

#define PT_CUDA_TABLE(S, NAME, ACT)                                 \
    {                                                               \
        .name = NAME,                                               \
        .act = ACT,                                                 \
        .acc = PT_F32,                                              \
        .prec = (ACT) == PT_BF16 ? PT_PREC_POLICY_BF16 : PT_PREC_POLICY_FP32, \
        .embedding_fwd = pt_cuda_embedding_fwd_##S,                 \
        .embedding_bwd = pt_cuda_embedding_bwd_##S,                 \
        .posemb_fwd = pt_cuda_posemb_fwd_##S,                       \
        .posemb_bwd = pt_cuda_posemb_bwd_##S,                       \
        .layernorm_fwd = pt_cuda_layernorm_fwd_##S,                 \
        .layernorm_bwd = pt_cuda_layernorm_bwd_##S,                 \
        .matmul_fwd = pt_cuda_matmul_fwd_##S,                       \
        .matmul_bwd = pt_cuda_matmul_bwd_##S,                       \
        .epilogue_fwd = pt_cuda_epilogue_fwd_##S,                   \
        .epilogue_bwd = pt_cuda_epilogue_bwd_##S,                   \
        .attention_fwd = pt_cuda_attention_fwd_##S,                 \
        .attention_bwd = pt_cuda_attention_bwd_##S,                 \
        .attention_ref_fwd = NULL,                                  \
        .attention_ref_bwd = NULL,                                  \
        .gelu_fwd = pt_cuda_gelu_fwd_##S,                           \
        .gelu_bwd = pt_cuda_gelu_bwd_##S,                           \
        .add_fwd = pt_cuda_add_fwd_##S,                             \
        .add_bwd = pt_cuda_add_bwd_##S,                             \
        .bias_fwd = pt_cuda_bias_fwd_##S,                           \
        .bias_bwd = pt_cuda_bias_bwd_##S,                           \
        .xent_max = pt_cuda_xent_max_##S,                           \
        .xent_sumexp = pt_cuda_xent_sumexp_##S,                     \
        .xent_bwd = pt_cuda_xent_bwd_##S,                           \
        .classifier_fwd = pt_cuda_classifier_fwd_##S,               \
        .classifier_bwd = pt_cuda_classifier_bwd_##S,               \
        .classifier_rows_fwd = pt_cuda_classifier_rows_fwd_##S,     \
        .classifier_rows_bwd = pt_cuda_classifier_rows_bwd_##S,     \
        .xent_rescale = pt_cuda_xent_rescale,                       \
        .zero = pt_cuda_zero,                                       \
        .fill = pt_cuda_fill,                                       \
        .copy = pt_cuda_copy,                                       \
        .convert = pt_cuda_convert,                                 \
        .copy2d = pt_cuda_copy2d,                                   \
        .add2d = pt_cuda_add2d,                                     \
        .axpy = pt_cuda_axpy,                                       \
        .scale = pt_cuda_scale,                                     \
        .sum = pt_cuda_sum,                                         \
        .sumsq = pt_cuda_sumsq,                                     \
        .gemm_batched = pt_cuda_gemm_batched,                       \
        .softmax_causal_fwd = pt_cuda_softmax_causal_fwd,           \
        .softmax_causal_bwd = pt_cuda_softmax_causal_bwd,           \
        .layernorm_rowsum = pt_cuda_layernorm_rowsum_##S,           \
        .layernorm_rowvar = pt_cuda_layernorm_rowvar_##S,           \
        .layernorm_apply = pt_cuda_layernorm_apply_##S,             \
        .layernorm_bwd_rowsums = pt_cuda_layernorm_bwd_rowsums_##S, \
        .layernorm_bwd_apply = pt_cuda_layernorm_bwd_apply_##S,     \
        .xent_loss = pt_cuda_xent_loss,                             \
        .adamw = pt_cuda_adamw_##S,                                 \
    }

const pt_ops pt_cuda_ops_f32 = PT_CUDA_TABLE(f32, "f32", PT_F32);
const pt_ops pt_cuda_ops_bf16 = PT_CUDA_TABLE(bf16, "bf16", PT_BF16);
