/* SPDX-License-Identifier: MIT */
/* Compute kernels with explicit forward and backward, behind an ops table.
 *
 * Conventions (all tables):
 *  - activations are row-major [B, T, C] (N = B*T rows of C), weights are
 *    [OC, C] (PyTorch nn.Linear layout; Y = X W^T + b);
 *  - every backward ACCUMULATES (+=) into parameter gradients and into
 *    input gradients unless its comment says it writes; pass NULL to skip
 *    an input gradient or a bias;
 *  - qkv is [B, T, 3*NH*HS] laid out as [all q heads | all k heads | all v
 *    heads], each head HS contiguous; attention output is [B, T, NH*HS];
 *    the model's attention is the flash form (attention_fwd/bwd): it keeps
 *    the output and the row log-sum-exp lse [B, NH, T], never the [T, T]
 *    probabilities (those exist only in attention_ref_fwd/bwd, the
 *    materialised reference the tests and bench/ compare against);
 *  - the cross-entropy is vocabulary-parallel (Megatron's vocab-parallel
 *    cross-entropy, Shoeybi et al. 2019 section 3): a shard holds
 *    vocabulary ids v0 .. v0+Vl-1; ids >= vreal are padding and excluded
 *    from the softmax.  The model's head is the fused classifier
 *    (classifier_fwd/bwd: the head GEMM, log-sum-exp, loss and dlogits over
 *    blocks of vocabulary columns, never the [N, Vl] logits); xent_max,
 *    xent_sumexp and xent_bwd are the materialised pieces, kept as the
 *    tests' reference;
 *  - GEMM epilogues follow cuBLASLt's (see "Epilogues" below), so a CUDA
 *    backend maps matmul_fwd/bwd 1:1 onto cublasLtMatmul;
 *  - the generic ops at the end of the table (zero .. adamw) are what the
 *    layers above the backend use instead of loops of their own: memory
 *    (cudaMemset / cudaMemcpy2D semantics), BLAS-1 (axpy, scal, sums),
 *    strided batched GEMM and causal softmax rows (the tests' materialised
 *    ring), LayerNorm and RMSNorm split in pieces around a group reduction, the cross-entropy
 *    loss and AdamW.
 *    Reductions return a double to the host (like cuBLAS's host pointer
 *    mode).
 *
 * Epilogues (enum pt_epilogue), what each call is in cuBLASLt terms
 * (cublasLtEpilogue_t; aux is CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
 * bias CUBLASLT_MATMUL_DESC_BIAS_POINTER, beta the matmul's beta):
 *   matmul_fwd PT_EPI_DEFAULT, bias NULL    CUBLASLT_EPILOGUE_DEFAULT
 *   matmul_fwd PT_EPI_DEFAULT, bias         CUBLASLT_EPILOGUE_BIAS
 *   matmul_fwd PT_EPI_GELU, aux NULL        CUBLASLT_EPILOGUE_GELU (bias: GELU_BIAS)
 *   matmul_fwd PT_EPI_GELU, aux             CUBLASLT_EPILOGUE_GELU_AUX (bias: GELU_AUX_BIAS):
 *                                           aux keeps the pre-GELU values for the backward
 *   matmul_bwd dw, dbias                    the dW GEMM with CUBLASLT_EPILOGUE_BGRADA
 *                                           (dbias = column sums of dout)
 *   matmul_bwd dinp, PT_EPI_DEFAULT         the dX GEMM, CUBLASLT_EPILOGUE_DEFAULT, beta 1
 *   matmul_bwd dinp, PT_EPI_DGELU           the dX GEMM with CUBLASLT_EPILOGUE_DGELU, beta 0
 *                                           (dbias_aux: DGELU_BGRAD), aux the previous
 *                                           layer's pre-GELU values
 *   epilogue_fwd / epilogue_bwd             the same epilogues on their own, for layouts
 *                                           whose communication sits between the GEMM and
 *                                           its epilogue (a reduce-scatter of Y, a reduce
 *                                           of dX): a small elementwise kernel on a device
 * cuBLASLt's BGRAD epilogues write the bias gradient; these ops add to it
 * (the accumulate convention), so a CUDA backend reduces into a scratch
 * vector and adds it, as llm.c does.  GELU is the tanh form throughout
 * (what cuBLASLt's GELU epilogue computes).
 *
 * The CPU kernels are written once (cpu_ops.inc) and instantiated for
 * float (pt_cpu_ops_f32, fp32 training), bf16 storage with float
 * arithmetic (pt_cpu_ops_bf16, mixed-precision training: Micikevicius et
 * al. 2018, "Mixed Precision Training"; Kalamkar et al. 2019, "A Study of
 * BFLOAT16 for Deep Learning Training") and double (pt_cpu_ops_f64, used
 * by the tests to check every backward against finite differences in
 * double precision, and the float and bf16 kernels against the double
 * ones).
 * Formulas follow GPT-2 (Radford et al. 2019) and llm.c's CPU reference:
 * layernorm (Ba et al. 2016), GELU tanh form (Hendrycks & Gimpel 2016),
 * causal softmax attention (Vaswani et al. 2017, section 3.2.1) computed
 * as FlashAttention (Dao et al. 2022, "FlashAttention: Fast and
 * Memory-Efficient Exact Attention with IO-Awareness", algorithms 1 and 2;
 * FlashAttention-2, Dao 2023, algorithm 1 and section 3.1's D = rowsum(dO
 * * O) backward), the fused classifier as llm.c's fused_classifier and
 * Liger Kernel's fused linear cross-entropy (Hsu et al. 2024).  Llama's
 * ops follow Hugging Face's LlamaForCausalLM: RMSNorm (Zhang & Sennrich
 * 2019), rotary embeddings in the rotate-half layout (Su et al. 2021) and
 * the SwiGLU MLP (Shazeer 2020).
 *
 * Element types: see "The ops table" below (the ACT and ACC roles).
 */
#ifndef PTRAIN_OPS_H
#define PTRAIN_OPS_H
#include "core/core.h"
#include <stddef.h>
#include <stdint.h>

/* What a GEMM's epilogue applies to its result (see "Epilogues" above). */
enum pt_epilogue {
    PT_EPI_DEFAULT = 0, /* + bias when one is given */
    PT_EPI_GELU = 1,    /* GELU(result + bias); aux (if given) keeps result + bias */
    PT_EPI_DGELU = 2    /* backward: result * GELU'(aux) */
};

/* Flash attention: query row tile and key column tile (FlashAttention's
 * B_r = B_c).  The largest score block any call holds is TILE x TILE per
 * thread; T need not be a multiple. */
#define PT_FLASH_TILE 64

/* Vocabulary columns per block of the fused classifier: the caller's
 * work buffer is [N, min(PT_CLASSIFIER_VBLOCK, Vl)]. */
#define PT_CLASSIFIER_VBLOCK 512

/* The shape of one attention call (attention_fwd/bwd): B sequences, NH
 * query heads of HS; Tq query rows and Tk key rows per sequence.  q (and
 * dq) rows have stride ldq elements, query head h at column h*HS; k and v
 * (and dk, dv) stride ldkv, holding NKV key/value heads, KV head g at
 * column g*HS.  Grouped-query attention (Ainslie et al. 2023, "GQA:
 * Training Generalized Multi-Query Transformer Models from Multi-Head
 * Checkpoints", section 2.2): NKV divides NH and query head h reads KV head
 * h / (NH/NKV) (consecutive query heads share a KV head, as HF's
 * repeat_kv); NKV = NH is multi-head attention, NKV = 1 multi-query
 * attention (Shazeer 2019); NKV = 0 means NH (so a caller that does not
 * set it keeps MHA; pt_attn_nkv).  The backward's dk, dv of a KV head sum
 * the contributions of all its query heads.  Sequence b's rows start at
 * b*Tq (queries) and b*Tk (keys).  Causal on global positions: query row
 * i sits at q0 + i, key row j at k0 + j, and the query sees the key iff
 * k0 + j <= q0 + i.
 * The whole sequence: Tq = Tk = T, q0 = k0 = 0, q = qkv, k = qkv + C,
 * v = qkv + 2C, ldq = ldkv = 3C (C = NH*HS).  A ring step (Liu et al.
 * 2023; Li et al. 2021): the local queries against a key/value block
 * passed round the sequence-parallel group. */
typedef struct pt_attn_dims {
    int B, NH, HS;
    int Tq, Tk;
    int q0, k0;
    int ldq, ldkv;
    int NKV; /* KV heads (GQA): NH % NKV == 0; 0 means NH */
} pt_attn_dims;

/* The KV head count of d: NKV, or NH where NKV is 0 */
static inline int pt_attn_nkv(const pt_attn_dims *d) { return d->NKV > 0 ? d->NKV : d->NH; }

/* The precision a table computes in: a policy, not a dtype, so that a new
 * precision (FP8: a GEMM-operand type with per-tensor scales) is new rows of
 * pt_prec_policies, not a change of the ops contract.
 *   act      activations, activation gradients and the weight copies the
 *            forward reads (the ACT role below);
 *   gemm     the operand type of the GEMMs (matmul_fwd/bwd, the fused
 *            classifier's): the type the weights and activations are in
 *            when they enter the tensor cores / the BLAS;
 *   acc      accumulation: parameter gradients, master weights, moments,
 *            statistics (the ACC role); the GEMMs accumulate in it;
 *   scaling  per-tensor scaling of the GEMM operands: PT_SCALE_NONE for
 *            fp32 and bf16 (their range needs none); FP8 will set
 *            PT_SCALE_DELAYED (a scale from the amax history of the last
 *            amax_history steps, Micikevicius et al. 2022, "FP8 Formats
 *            for Deep Learning", section 4.3; Transformer Engine's
 *            DelayedScaling) or PT_SCALE_CURRENT (from this step's amax).
 * The named rows (pt_prec_policies): fp32 (act = gemm = acc = fp32, the
 * training default) and bf16 (act = gemm = bf16, acc fp32).  fp8 has no
 * row yet: pt_prec_policy_find("fp8") fails saying what is valid. */
enum pt_scaling { PT_SCALE_NONE = 0, PT_SCALE_DELAYED = 1, PT_SCALE_CURRENT = 2 };
typedef struct pt_prec_policy {
    const char *name;          /* "fp32", "bf16" */
    pt_dtype act, gemm, acc;   /* the roles above */
    enum pt_scaling scaling;   /* of the GEMM operands */
    int amax_history;          /* steps of amax kept (PT_SCALE_DELAYED); 0 otherwise */
} pt_prec_policy;

/* The named policies, in this order, ending at a row whose name is NULL. */
extern const pt_prec_policy pt_prec_policies[];
#define PT_PREC_POLICY_FP32 (&pt_prec_policies[0])
#define PT_PREC_POLICY_BF16 (&pt_prec_policies[1])
/* The policy called `name` ("fp32", "bf16"), or NULL with PT_EUNSUPP via
 * pt_errmsg naming the valid ones. */
const pt_prec_policy *pt_prec_policy_find(const char *name);
/* The policy whose activations are `act` (the thin helper for callers that
 * hold a dtype: PT_F32 -> fp32, PT_BF16 -> bf16), or NULL with PT_EUNSUPP
 * via pt_errmsg naming the dtype and the valid ones. */
const pt_prec_policy *pt_prec_policy_for(pt_dtype act);

/* The op list.  One row per entry of the ops table, with its contract:
 *   X(name, return type, (arguments), family, role, need)
 * family  the op family: the file of each backend that holds its kernels
 *         and whose fill sets its entries (pt_op_family below);
 * role    ACT: its tensors include ACT ones, so a backend has one kernel per
 *         activation type (the CUDA entries pt_cuda_<op>_f32 / _bf16);
 *         ACC: only ACC tensors, one kernel per accumulation type (a bf16
 *         table shares the fp32 table's); ANY: the dtype is an argument,
 *         one kernel serves every table (the generic ops);
 * need    REQ: every table has it (a table built without it fails, naming
 *         the op); OPT: a table may leave it NULL, as its comment says.
 * PT_OPS(X) generates the members of pt_ops (below), the checks of
 * pt_ops_check, the profiling table's wrappers (ops_profile.c) and the CUDA
 * backend's C-entry declarations (cuda/ops_cuda.h).  Adding an op: a row
 * here, its kernel in each backend's family file and the family's fill
 * (docs/ARCHITECTURE.md, "Add an op"). */
enum pt_op_family {
    PT_FAM_EMBED,     /* token and position embeddings */
    PT_FAM_ELTWISE,   /* GELU, residual add, bias, RoPE, SwiGLU */
    PT_FAM_NORM,      /* LayerNorm and RMSNorm, whole rows and pieces */
    PT_FAM_GEMM,      /* matmuls, their epilogues, the batched GEMM */
    PT_FAM_ATTENTION, /* flash attention, the materialised reference, causal softmax rows */
    PT_FAM_XENT,      /* the cross-entropy pieces and the fused classifier */
    PT_FAM_MEM,       /* memory and BLAS-1 on any dtype */
    PT_FAM_ADAMW,     /* the optimizer */
    PT_FAM_N
};
#define PT_FAM_ALL ((1u << PT_FAM_N) - 1u)
/* "embed", "eltwise", ... (the enum above); "?" out of range */
const char *pt_op_family_id(int f);

#define PT_OPS(X)                                                                                                      \
    /* out[n,:] = w[tok[n]-v0,:] if v0 <= tok[n] < v0+Vl else 0.  out [N, C] ACT, w [Vl, C] ACT */                     \
    X(embedding_fwd, void, (void *out, const int32_t *tok, const void *w, int v0, int Vl, int N, int C), EMBED,        \
          ACT, REQ)                                                                                                    \
    /* dw[tok[n]-v0,:] += dout[n,:] for tokens in the shard.  dw ACC, dout ACT */                                      \
    X(embedding_bwd, void, (void *dw, const void *dout, const int32_t *tok, int v0, int Vl, int N, int C), EMBED,      \
          ACT, REQ)                                                                                                    \
    /* x[b,t,:] += wpe[t,:];  x [B, T, C] ACT, wpe [>=T, C] ACT */                                                     \
    X(posemb_fwd, void, (void *x, const void *wpe, int B, int T, int C), EMBED, ACT, REQ)                              \
    /* dwpe[t,:] += sum_b dout[b,t,:].  dwpe ACC, dout ACT */                                                          \
    X(posemb_bwd, void, (void *dwpe, const void *dout, int B, int T, int C), EMBED, ACT, REQ)                          \
    /* out = (inp - mean)*rstd*w + b per row; mean, rstd [N] saved for backward (eps 1e-5).                            \
     * out, inp ACT [N, C]; w, b ACT [C]; mean, rstd ACC */                                                            \
    X(layernorm_fwd, void, (void *out, void *mean, void *rstd, const void *inp, const void *w, const void *b,          \
          int N, int C), NORM, ACT, REQ)                                                                               \
    /* dinp ACT (+=), dw, db ACC (+=); dout, inp, w ACT; mean, rstd ACC */                                             \
    X(layernorm_bwd, void, (void *dinp, void *dw, void *db, const void *dout, const void *inp, const void *w,          \
          const void *mean, const void *rstd, int N, int C), NORM, ACT, REQ)                                           \
    /* RMSNorm (Zhang & Sennrich 2019; Hugging Face's LlamaRMSNorm): out = x * rstd * w per row,                       \
     * rstd[n] = 1/sqrt(mean_c(x^2) + eps) saved for backward; eps the model's norm_eps                                \
     * (sum of squares accumulated in double, the rest in the compute type).  out, inp                                 \
     * ACT [N, C]; w ACT [C]; rstd ACC [N].  bf16: x widened, out rounded once (HF rounds                              \
     * x*rstd to bf16 before the weight's multiply: ours is the more exact of the two) */                              \
    X(rmsnorm_fwd, void, (void *out, void *rstd, const void *inp, const void *w, int N, int C, double eps), NORM,      \
          ACT, REQ)                                                                                                    \
    /* dinp += rstd (dout w - xhat sum_c(dout w xhat)/C), xhat = x rstd; dw += sum_n dout xhat.                        \
     * dinp ACT (+=, NULL skips), dw ACC (+=); dout, inp, w ACT; rstd ACC (the forward's) */                           \
    X(rmsnorm_bwd, void, (void *dinp, void *dw, const void *dout, const void *inp, const void *w, const void *rstd,    \
          int N, int C), NORM, ACT, REQ)                                                                               \
    /* out[N,OC] = epi(inp[N,C] w[OC,C]^T + beta out + bias[OC]) (bias NULL: none;                                     \
     * beta 0 or 1: 1 accumulates a SUMMA step's partial product into out); epi                                        \
     * PT_EPI_DEFAULT or PT_EPI_GELU, which also writes aux [N,OC] = the pre-GELU value                                \
     * unless aux is NULL.  Row blocks of the GEMM get their epilogue while in cache.                                  \
     * out, aux, inp, w, bias ACT.  bf16: one GEMM writes inp w^T + beta out + bias                                    \
     * rounded to bf16, then the GELU epilogue runs on those values (aux keeps them). */                               \
    X(matmul_fwd, void, (void *out, void *aux, const void *inp, const void *w, const void *bias, double beta,          \
          int N, int C, int OC, int epi), GEMM, ACT, REQ)                                                              \
    /* dw += dout^T inp; dbias += colsum(dout) (BGRADA); epi PT_EPI_DEFAULT: dinp +=                                   \
     * dout w; PT_EPI_DGELU: dinp = (dout w) * GELU'(aux) WRITTEN (aux [N,C], the                                      \
     * pre-GELU values of the layer that produced inp) and dbias_aux [C] += colsum of                                  \
     * that dinp (DGELU_BGRAD; NULL skips).  NULL dinp / dw / dbias skip.                                              \
     * dinp, dout, inp, w, aux ACT; dw, dbias, dbias_aux ACC (dW accumulates into the                                  \
     * master gradient in fp32).  bf16: the DGELU's dX GEMM is rounded to bf16 before                                  \
     * the GELU' factor. */                                                                                            \
    X(matmul_bwd, void, (void *dinp, void *dw, void *dbias, const void *dout, const void *inp, const void *w,          \
          int N, int C, int OC, int epi, const void *aux, void *dbias_aux), GEMM, ACT, REQ)                            \
    /* The epilogue alone, in place on out [N,OC]: out = epi(out + bias); epi                                          \
     * PT_EPI_GELU writes aux = out + bias first (NULL skips).  out, aux, bias ACT */                                  \
    X(epilogue_fwd, void, (void *out, void *aux, const void *bias, int N, int OC, int epi), GEMM, ACT, REQ)            \
    /* The DGELU_BGRAD epilogue alone, in place: d [N,OC] *= GELU'(aux); dbias [OC] +=                                 \
     * colsum of the result (NULL skips).  d, aux ACT; dbias ACC */                                                    \
    X(epilogue_bwd, void, (void *d, void *dbias, const void *aux, int N, int OC), GEMM, ACT, REQ)                      \
    /* Flash attention forward (Dao et al. 2022, alg. 1; Dao 2023, alg. 1), scale                                      \
     * 1/sqrt(HS), causal per pt_attn_dims: out [B, Tq, NH*HS] ACT, lse [B, NH, Tq] ACC                                \
     * the row log-sum-exp of the scaled scores.  merge 0: writes both (a row that sees                                \
     * no key gets out 0, lse -inf); merge 1: (out, lse) hold the result over other                                    \
     * keys and leave holding the exact result over both sets (ring attention's merge:                                 \
     * lse' = log(e^lse + e^lse_blk), out' = e^(lse-lse') out + e^(lse_blk-lse') out_blk,                              \
     * done as one more step of the online softmax).  q, k, v ACT; k, v hold                                           \
     * pt_attn_nkv(d) heads (GQA: query head h reads KV head h / (NH/NKV); NH % NKV                                    \
     * must be 0, the device refuses it otherwise).  Tiles of                                                          \
     * PT_FLASH_TILE queries x keys; key tiles past a query tile's diagonal are                                        \
     * skipped; threads over (b, h, query tile).  The score and probability tiles, the                                 \
     * running max, sum and output are ACC (bf16: the q, k, v tiles are widened to                                     \
     * fp32 and the output rounded once). */                                                                           \
    X(attention_fwd, void, (void *out, void *lse, const void *q, const void *k, const void *v,                         \
          const pt_attn_dims *d, int merge), ATTENTION, ACT, REQ)                                                      \
    /* Flash attention backward (Dao et al. 2022, alg. 2; Dao 2023, sec. 3.1): out and                                 \
     * lse are the forward's FINAL results (over every key the queries see, also keys                                  \
     * outside this call); D = rowsum(dout * out); per tile P = exp(S - lse) again,                                    \
     * dS = P (dout v^T - D) scale.  dq += dS k, dk += dS^T q, dv += P^T dout (strides                                 \
     * as pt_attn_dims).  dq, dk, dv, dout, q, k, v, out ACT; lse ACC.  GQA: dk, dv of                                 \
     * KV head g sum the contributions of query heads g*NH/NKV .. (g+1)*NH/NKV - 1 (in                                 \
     * that order).  Threads over (b, KV head g), looping over g's query heads: a pair                                 \
     * owns its dq columns and its dk, dv columns, so no atomics and the result does                                   \
     * not depend on the thread count.  bf16: a pair's dk, dv (and each query head's                                   \
     * dq) accumulate in fp32 and are added to the ACT gradients once. */                                              \
    X(attention_bwd, void, (void *dq, void *dk, void *dv, const void *dout, const void *q, const void *k,              \
          const void *v, const void *out, const void *lse, const pt_attn_dims *d), ATTENTION, ACT, REQ)                \
    /* Materialised causal attention (the reference; the model does not run it):                                       \
     * att [B, NH, T, T] ACC post-softmax; qkv, out, dout, dqkv ACT.  Forward writes out                               \
     * and att, backward accumulates dqkv [B, T, 3C].  NULL in tables whose act differs                                \
     * from acc (bf16) and may be NULL on a backend other than cpu. */                                                 \
    X(attention_ref_fwd, void, (void *out, void *att, const void *qkv, int B, int T, int NH, int HS), ATTENTION,       \
          ACT, OPT)                                                                                                    \
    X(attention_ref_bwd, void, (void *dqkv, const void *dout, const void *qkv, const void *att, int B, int T,          \
          int NH, int HS), ATTENTION, ACT, OPT)                                                                        \
    /* GELU, tanh approximation.  All ACT */                                                                           \
    X(gelu_fwd, void, (void *out, const void *inp, size_t n), ELTWISE, ACT, REQ)                                       \
    X(gelu_bwd, void, (void *dinp, const void *inp, const void *dout, size_t n), ELTWISE, ACT, REQ)                    \
    /* residual: out = a + b; backward da += dout, db += dout.  All ACT */                                             \
    X(add_fwd, void, (void *out, const void *a, const void *b, size_t n), ELTWISE, ACT, REQ)                           \
    X(add_bwd, void, (void *da, void *db, const void *dout, size_t n), ELTWISE, ACT, REQ)                              \
    /* out[n,:] += bias; dbias += colsum(dout).  out [N, OC], bias, dout ACT; dbias ACC */                             \
    X(bias_fwd, void, (void *out, const void *bias, int N, int OC), ELTWISE, ACT, REQ)                                 \
    X(bias_bwd, void, (void *dbias, const void *dout, int N, int OC), ELTWISE, ACT, REQ)                               \
    /* Rotary position embedding, rotate-half layout (Su et al. 2021; HF's                                             \
     * apply_rotary_pos_emb), in place: row b*T+t of x (row stride ld elements) holds nh                               \
     * heads of HS (head h at column h*HS, HS even) at position p = t0+t; for i < HS/2,                                \
     * (x1, x2) = (x[i], x[i+HS/2]) -> (x1 c - x2 s, x2 c + x1 s), (c, s) = cs[p][i], the                              \
     * table [Tmax, HS/2, 2] ACC of (cos, sin) of p * inv_freq[i] (pt_rope_table below;                                \
     * needs t0 + T <= Tmax).  rope_bwd: the transpose rotation (angle -> -angle), in                                  \
     * place on the gradient dx (it holds dy on entry: WRITES).  x ACT.  bf16: fp32                                    \
     * table and arithmetic, each element rounded once (HF multiplies in bf16) */                                      \
    X(rope_fwd, void, (void *x, const void *cs, int B, int T, int t0, int nh, int HS, int ld), ELTWISE, ACT, REQ)      \
    X(rope_bwd, void, (void *dx, const void *cs, int B, int T, int t0, int nh, int HS, int ld), ELTWISE, ACT, REQ)     \
    /* SwiGLU (Shazeer 2020; HF's LlamaMLP act_fn(gate) * up): inp [N, 2F] rows are                                    \
     * [gate (F) | up (F)] (F the FFN width), out [N, F] = silu(gate) up, silu(g) =                                    \
     * g/(1+e^-g).  Backward WRITES dinp [N, 2F] = [dout up silu'(gate) | dout                                         \
     * silu(gate)].  All ACT.  bf16: fp32 arithmetic, out rounded once (HF rounds                                      \
     * silu(gate) first) */                                                                                            \
    X(swiglu_fwd, void, (void *out, const void *inp, int N, int F), ELTWISE, ACT, REQ)                                 \
    X(swiglu_bwd, void, (void *dinp, const void *dout, const void *inp, int N, int F), ELTWISE, ACT, REQ)              \
    /* Materialised cross-entropy pieces (the reference of the fused classifier): logits                               \
     * [N, Vl] ACT; rowmax, sumexp, tgt, dloss ACC; dlogits ACT.                                                       \
     * rowmax[n] = max over unpadded ids of the shard (-inf if none) */                                                \
    X(xent_max, void, (void *rowmax, const void *logits, int v0, int vreal, int N, int Vl), XENT, ACT, REQ)            \
    /* sumexp[n] = sum exp(logit - rowmax[n]) over unpadded shard ids;                                                 \
     * tgt[n] = logits[n, targets[n]-v0] if the target is in the shard, else 0 */                                      \
    X(xent_sumexp, void, (void *sumexp, void *tgt, const void *logits, const void *rowmax, const int32_t *targets,     \
          int v0, int vreal, int N, int Vl), XENT, ACT, REQ)                                                           \
    /* dlogits = (softmax - onehot(target)) * dloss[n], written (not accumulated);                                     \
     * padded ids get 0.  Needs the GLOBAL rowmax and sumexp. */                                                       \
    X(xent_bwd, void, (void *dlogits, const void *logits, const void *rowmax, const void *sumexp,                      \
          const int32_t *targets, const void *dloss, int v0, int vreal, int N, int Vl), XENT, ACT, REQ)                \
    /* Fused classifier (llm.c's fused_classifier; Liger's fused linear cross-entropy):                                \
     * logits = x w^T one block of vb <= Vl vocabulary columns at a time in work (the                                  \
     * only logits that exist), through the BLAS.  x is [ks][N][C/ks] ACT and w                                        \
     * [ks][Vl][C/ks] ACT: C split in ks column pieces stored one after another (what                                  \
     * an allgather of column blocks gives; ks 1 is plain [N, C] and [Vl, C]); logits =                                \
     * sum over pieces.  work: pt_classifier_work_elems(ops, N, C, vb, 0) ACC elements                                 \
     * ([N, vb], the logits block).  Forward: stats [3N] ACC = this shard's rowmax,                                    \
     * sumexp (relative to that rowmax) and target logit (0 if the target is elsewhere),                               \
     * over unpadded ids, with an online max (Milakov & Gimelshein 2018) across blocks:                                \
     * a shard's LOCAL statistics, which a vocabulary-parallel caller merges over its                                  \
     * group (allreduce max, xent_rescale, allreduce sum of sumexp and target). */                                     \
    X(classifier_fwd, void, (void *stats, const void *x, const void *w, const int32_t *targets, void *work, int vb,    \
          int v0, int vreal, int N, int C, int Vl, int ks), XENT, ACT, REQ)                                            \
    /* Backward from the GLOBAL stats [3N] ACC and dloss [N] ACC: per block the logits                                 \
     * again, dlogits = (softmax - onehot(target)) dloss[n] in work, dx [ks][N][C/ks] ACT                              \
     * += dlogits w, dw [ks][Vl][C/ks] ACC += dlogits^T x (padded rows of dw untouched).                               \
     * NULL skips.  work: pt_classifier_work_elems(ops, N, C, vb, 1) ACC elements: the                                 \
     * logits block, and where act differs from acc (bf16) [ks][N][C/ks] more, where dx                                \
     * accumulates over the vocabulary blocks in fp32 before one rounding to ACT (each                                 \
     * block's dlogits are rounded to bf16 for its two GEMMs, as llm.c stores them). */                                \
    X(classifier_bwd, void, (void *dx, void *dw, const void *x, const void *w, const void *stats,                      \
          const int32_t *targets, const void *dloss, void *work, int vb, int v0, int vreal, int N, int C, int Vl,      \
          int ks), XENT, ACT, REQ)                                                                                     \
    /* The fused classifier over a chunk of R rows whose logits are held whole                                         \
     * (Liger Kernel's fused linear cross-entropy, Hsu et al. 2024, sec. 3.1: rows in                                  \
     * chunks; llm.c's fused_classifier computes dlogits where the loss is): forward                                   \
     * and backward of a chunk back to back, so the logits are computed once, 6 R C Vl                                 \
     * FLOPs against the 8 of classifier_fwd + classifier_bwd, which compute them                                      \
     * again; the price is the [R, Vl] buffer.  x [R, C] ACT, w [Vl, C] ACT (ks 1).                                    \
     * rows_fwd: logits [R, Vl] ACC = x w^T over the unpadded columns (written; the                                    \
     * padded ones untouched); stats [3R] ACC = this shard's rowmax, sumexp (relative to                               \
     * that rowmax) and target logit over unpadded ids, as classifier_fwd's for R rows                                 \
     * (-inf, 0, 0 for a row that sees no id).  rows_bwd: from the GLOBAL stats [3R] and                               \
     * dloss [R] ACC (a vocabulary-parallel caller merges stats between the two calls):                                \
     * logits become dlogits = (softmax - onehot(target)) dloss[n] in place, dx [R, C]                                 \
     * ACT += dlogits w, dw [Vl, C] ACC += dlogits^T x (padded rows untouched); NULL                                   \
     * skips.  work (both): pt_classifier_rows_work_elems(R, C, Vl) ACC elements (the                                  \
     * forward's per-slice row statistics, the backward's dX partial sums; its contents                                \
     * are scratch).  bf16: fp32 logits from bf16 operands; dlogits rounded to bf16 for                                \
     * the two GEMMs (as classifier_bwd).  A table may leave both NULL (the model then                                 \
     * runs classifier_fwd/bwd). */                                                                                    \
    X(classifier_rows_fwd, void, (void *stats, void *logits, const void *x, const void *w, const int32_t *targets,     \
          void *work, int v0, int vreal, int R, int C, int Vl), XENT, ACT, OPT)                                        \
    X(classifier_rows_bwd, void, (void *dx, void *dw, const void *x, const void *w, void *logits,                      \
          const void *stats, const int32_t *targets, const void *dloss, void *work, int v0, int vreal, int R,          \
          int C, int Vl), XENT, ACT, OPT)                                                                              \
    /* sumexp[n] *= exp(from[n] - to[n]) (0 where from[n] is -inf): a shard's sum of                                   \
     * exp moved from its own row max to the group's, [N] ACC each */                                                  \
    X(xent_rescale, void, (void *sumexp, const void *from, const void *to, int N), XENT, ACC, REQ)                     \
    /* ---- generic ops ---- */                                                                                        \
    /* Memory.  Pointers are backend memory (pt_backend.alloc) unless said otherwise;                                  \
     * on the CPU backend that is host memory.  t: the buffers' dtype (see above). */                                  \
    /* x[0..n) = 0 (cudaMemset on a device backend) */                                                                 \
    X(zero, void, (void *x, size_t n, pt_dtype t), MEM, ANY, REQ)                                                      \
    /* x[0..n) = a (rounded to t) */                                                                                   \
    X(fill, void, (void *x, double a, size_t n, pt_dtype t), MEM, ANY, REQ)                                            \
    /* dst[0..n) = src[0..n), no overlap */                                                                            \
    X(copy, void, (void *dst, const void *src, size_t n, pt_dtype t), MEM, ANY, REQ)                                   \
    /* dst[0..n) (type dt) = src[0..n) (type st) converted (rounded to nearest even                                    \
     * where dt is narrower; NaN stays NaN); no overlap.  Either side may be host                                      \
     * memory (the way fp32 host values enter an ACT buffer and back). */                                              \
    X(convert, void, (void *dst, pt_dtype dt, const void *src, pt_dtype st, size_t n), MEM, ANY, REQ)                  \
    /* height rows of width BYTES, row pitches dpitch/spitch in bytes (cudaMemcpy2D with                               \
     * cudaMemcpyDefault: either side may be host memory; any element type, e.g. the                                   \
     * int32 token ids); no overlap */                                                                                 \
    X(copy2d, void, (void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height), MEM,      \
          ANY, REQ)                                                                                                    \
    /* dst[r*ldd + c] += src[r*lds + c] for r < rows, c < cols (leading dims in elements) */                           \
    X(add2d, void, (void *dst, size_t ldd, const void *src, size_t lds, size_t rows, size_t cols, pt_dtype t), MEM,    \
          ANY, REQ)                                                                                                    \
    /* y[0..n) += a x[0..n)  (BLAS axpy) */                                                                            \
    X(axpy, void, (void *y, double a, const void *x, size_t n, pt_dtype t), MEM, ANY, REQ)                             \
    /* x[0..n) *= a  (BLAS scal) */                                                                                    \
    X(scale, void, (void *x, double a, size_t n, pt_dtype t), MEM, ANY, REQ)                                           \
    /* sum of x[0..n) and of x^2, accumulated in double, returned to the host */                                       \
    X(sum, double, (const void *x, size_t n, pt_dtype t), MEM, ANY, REQ)                                               \
    X(sumsq, double, (const void *x, size_t n, pt_dtype t), MEM, ANY, REQ)                                             \
    /* Strided batched GEMM on ACC elements, row-major (cublasGemmStridedBatched's                                     \
     * contract): for i < batch, C_i = alpha op(A_i) op(B_i) + beta C_i with A_i = A +                                 \
     * i*sA (and B_i, C_i alike, strides in elements); op(A_i) [M, K] (A_i stored [K, M]                               \
     * when ta), op(B_i) [K, N] (stored [N, K] when tb), C_i [M, N]; lda/ldb/ldc row                                   \
     * strides. */                                                                                                     \
    X(gemm_batched, void, (int ta, int tb, int M, int N, int K, double alpha, const void *A, int lda, int64_t sA,      \
          const void *B, int ldb, int64_t sB, double beta, void *C, int ldc, int64_t sC, int batch), GEMM, ACC,        \
          REQ)                                                                                                         \
    /* Causal softmax in place over att [BH, Tq, T] ACC (scores in, probabilities out):                                \
     * row i is the query at global position q0+i and sees keys 0 .. q0+i; later keys                                  \
     * get 0.  Needs 0 <= q0 and q0 + Tq <= T.  (Vaswani et al. 2017, 3.2.1.)  With                                    \
     * gemm_batched, the pieces of a materialised ring attention (Li et al. 2021), the                                 \
     * tests' reference for the flash ring (lib/parallel/seq.c). */                                                    \
    X(softmax_causal_fwd, void, (void *att, int BH, int Tq, int T, int q0), ATTENTION, ACC, REQ)                       \
    /* In place: datt [BH, Tq, T] ACC holds dP on entry and gets dS = att*(dP -                                        \
     * rowsum(att*dP)) * scale on the visible keys, 0 elsewhere (WRITES). */                                           \
    X(softmax_causal_bwd, void, (void *datt, const void *att, double scale, int BH, int Tq, int T, int q0),            \
          ATTENTION, ACC, REQ)                                                                                         \
    /* LayerNorm over rows whose C columns are split in pieces of Cl (Ba et al. 2016), for                             \
     * a layout that sums the row statistics over a group between the calls:                                           \
     *   rowsum    sum[n] = sum_c x[n,c]                       x [N, Cl]                                               \
     *   rowvar    mean[n] = sum[n]/C (sum: the group total);                                                          \
     *             sqsum[n] = sum_c (x[n,c] - mean[n])^2        (local piece)                                          \
     *   apply     rstd[n] = 1/sqrt(sqsum[n]/C + 1e-5) (sqsum: group total);                                           \
     *             out = (x - mean) rstd w + b                  w, b [Cl]                                              \
     * equal to layernorm_fwd when Cl == C.  Row n is read before it is written, so mean                               \
     * or sqsum may be the sum buffer and rstd the sqsum buffer.  x, out, w, b ACT; sum,                               \
     * mean, sqsum, rstd ACC. */                                                                                       \
    X(layernorm_rowsum, void, (void *sum, const void *x, int N, int Cl), NORM, ACT, REQ)                               \
    X(layernorm_rowvar, void, (void *mean, void *sqsum, const void *x, const void *sum, int N, int Cl, int C),         \
          NORM, ACT, REQ)                                                                                              \
    X(layernorm_apply, void, (void *out, void *rstd, const void *x, const void *mean, const void *sqsum,               \
          const void *w, const void *b, int N, int Cl, int C), NORM, ACT, REQ)                                         \
    /* backward pieces: s [2N] ACC, s[2n] = sum_c dy*w, s[2n+1] = sum_c dy*w*xhat (local);                             \
     * apply (s: group totals) accumulates dx [N, Cl] ACT (NULL skips), dw, db [Cl] ACC;                               \
     * equal to layernorm_bwd when Cl == C.  dy, x, w ACT; mean, rstd ACC. */                                          \
    X(layernorm_bwd_rowsums, void, (void *s, const void *dy, const void *x, const void *w, const void *mean,           \
          const void *rstd, int N, int Cl), NORM, ACT, REQ)                                                            \
    X(layernorm_bwd_apply, void, (void *dx, void *dw, void *db, const void *dy, const void *x, const void *w,          \
          const void *mean, const void *rstd, const void *s, int N, int Cl, int C), NORM, ACT, REQ)                    \
    /* RMSNorm over rows whose C columns are split in pieces of Cl (layernorm_rowsum ..                                \
     * _bwd_apply's scheme, one group sum forward and one backward):                                                   \
     *   rowsumsq   sqsum[n] = sum_c x[n,c]^2 (local; accumulated in double)   x [N, Cl]                               \
     *   apply      rstd[n] = 1/sqrt(sqsum[n]/C + eps) (sqsum: the group total);                                       \
     *              out = x rstd w                                  w [Cl]                                             \
     *   bwd_rowsums  s[n] = sum_c dy w xhat, xhat = x rstd (local; double)                                            \
     *   bwd_apply  (s: group totals) dx += rstd (dy w - xhat s[n]/C) (NULL skips),                                    \
     *              dw += sum_n dy xhat                                                                                \
     * equal to rmsnorm_fwd/bwd when Cl == C.  rstd may be the sqsum buffer (row n is                                  \
     * read before it is written).  x, out, w, dy, dx ACT; sqsum, rstd, s [N] ACC, dw                                  \
     * [Cl] ACC. */                                                                                                    \
    X(rmsnorm_rowsumsq, void, (void *sqsum, const void *x, int N, int Cl), NORM, ACT, REQ)                             \
    X(rmsnorm_apply, void, (void *out, void *rstd, const void *x, const void *sqsum, const void *w, int N, int Cl,     \
          int C, double eps), NORM, ACT, REQ)                                                                          \
    X(rmsnorm_bwd_rowsums, void, (void *s, const void *dy, const void *x, const void *w, const void *rstd, int N,      \
          int Cl), NORM, ACT, REQ)                                                                                     \
    X(rmsnorm_bwd_apply, void, (void *dx, void *dw, const void *dy, const void *x, const void *w, const void *rstd,    \
          const void *s, int N, int Cl, int C), NORM, ACT, REQ)                                                        \
    /* losses[n] = log(sumexp[n]) + rowmax[n] - tgt[n] (nats) from xent_max/xent_sumexp's                              \
     * GLOBAL row statistics, [N] ACC each */                                                                          \
    X(xent_loss, void, (void *losses, const void *rowmax, const void *sumexp, const void *tgt, int N), XENT, ACC,      \
          REQ)                                                                                                         \
    /* AdamW (Loshchilov & Hutter 2019, Algorithm 2) on n elements, in place on the                                    \
     * master p and the moments m, v (ACC), from the gradient g (ACC):                                                 \
     *   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;                                                                  \
     *   p -= lr (m/bc1 / (sqrt(v/bc2) + eps) + wd p)                                                                  \
     * bc1 = 1 - b1^t, bc2 = 1 - b2^t are the bias corrections of step t >= 1.  work:                                  \
     * NULL, p itself, or [n] ACT elements that get the updated p in the same pass (the                                \
     * weight copy the forward reads, rounded once). */                                                                \
    X(adamw, void, (void *p, void *work, const void *g, void *m, void *v, size_t n, double lr, double b1,              \
          double b2, double eps, double wd, double bc1, double bc2), ADAMW, ACT, REQ)

/* The ops table.  Tensor arguments are untyped pointers whose element type
 * is the table's ACT or ACC dtype, as each argument's comment says:
 *   ACT  activations, activation gradients and the weight copies the
 *        forward reads (matmul weights, biases, LayerNorm weights, the
 *        embeddings): ops->act, the run's precision;
 *   ACC  parameter gradients, LayerNorm mean/rstd, RMSNorm rstd, the RoPE
 *        (cos, sin) table, the attention's lse,
 *        the cross-entropy's statistics, losses and loss weights, the
 *        fused classifier's logits block, AdamW's master weights and
 *        moments: ops->acc.
 * The tables (pt_cpu_ops_*):   name   act    acc    compute
 *                              f32    fp32   fp32   fp32 (the training default)
 *                              bf16   bf16   fp32   fp32 registers, bf16 GEMMs with fp32 accumulation
 *                              f64    fp64   fp64   fp64 (the tests' reference)
 * Scalars are double; a table converts them to its compute type (a float
 * passed in and converted back is exact, so the f32 table computes with
 * the caller's float values).  Generic memory and BLAS-1 ops take the
 * dtype of their buffers as their last argument: any of the table's act
 * and acc (and PT_F32 on every table); convert moves between any two.
 * Integers (sizes, strides, flags), token ids (int32) and pt_attn_dims
 * are type-free.  A bf16 table loads ACT elements into fp32 registers,
 * computes as the f32 table does, and rounds each stored ACT element once
 * (pt_f32_to_bf16, ties to even); its GEMMs take bf16 operands with fp32
 * accumulation and write ACT or (weight gradients, dW into the fp32
 * master gradient) ACC results; what differs from the f32 kernels beyond
 * that is said per op ("bf16:").  The entries and their contracts are the
 * rows of PT_OPS above. */
typedef struct pt_ops {
    const char *name;         /* "f32", "bf16", "f64" */
    pt_dtype act, acc;        /* element types of the two roles (prec->act, prec->acc) */
    const pt_prec_policy *prec; /* the policy the table was filled for */
#define PT_OPS_MEMBER(name, ret, args, fam, role, need) ret(*name) args;
    PT_OPS(PT_OPS_MEMBER)
#undef PT_OPS_MEMBER
} pt_ops;

/* A backend's table is built by its family fills, one per pt_op_family:
 * each sets its family's entries of *o for policy p (PT_OK, or PT_EUNSUPP
 * with one line when the family has no kernels for p). */
typedef int (*pt_ops_fill_fn)(pt_ops *o, const pt_prec_policy *p);
/* Build *o for policy p: name, act, acc, then fills[f] for every family f
 * in the mask `families` (bit 1u << f; PT_FAM_ALL: all), then
 * pt_ops_check; prec is set last, so a table that failed has prec NULL.
 * PT_OK or the fill's / the check's error. */
int pt_ops_build(pt_ops *o, const char *backend, const char *name, const pt_prec_policy *p,
                 const pt_ops_fill_fn fills[PT_FAM_N], unsigned families);
/* PT_OK when every REQ entry of PT_OPS is set in *o, else PT_EUNSUPP via
 * pt_fail with one line naming the first missing op, its family and the
 * backend ("backend 'cpu', table 'bf16': op 'adamw' (family adamw) has no
 * kernel"): a missing entry fails when the table is built, not at its
 * first call. */
int pt_ops_check(const pt_ops *o, const char *backend);


/* ACC elements of the fused classifier's work buffer for N rows, width C,
 * blocks of vb columns: [N, vb], and for the backward (bwd 1) of a table
 * whose act differs from its acc [N, C] more (the fp32 dX accumulator). */
static inline size_t pt_classifier_work_elems(const pt_ops *ops, int N, int C, int vb, int bwd)
{
    return (size_t)N * (size_t)vb + (bwd && ops->act != ops->acc ? (size_t)N * (size_t)C : 0);
}

/* Vocabulary columns per dX partial sum of classifier_rows_bwd (a fixed
 * K-split of dX = dlogits w, so that its threads need no thread-count
 * dependent order) */
#define PT_CLASSIFIER_XSLICE 4096
/* ACC elements of classifier_rows_fwd/bwd's work for R rows, width C, shard
 * Vl: per slice of PT_CLASSIFIER_XSLICE columns the [R, C] partial of dX (the
 * backward) or the rows' max and sum of exp [2, R] (the forward) */
static inline size_t pt_classifier_rows_work_elems(int R, int C, int Vl)
{
    const size_t ns = ((size_t)(Vl > 0 ? Vl : 1) + PT_CLASSIFIER_XSLICE - 1) / PT_CLASSIFIER_XSLICE;
    return ns * (size_t)R * (size_t)(C > 2 ? C : 2);
}

/* Rows per chunk of the chunked classifier (lib/parallel's
 * pt_classifier_step) for N rows and a shard of Vl columns:
 * PT_CLASSIFIER_CHUNK_ROWS (enough rows for the chunk's GEMMs to run at the
 * BLAS's rate: 256 rows of logits repack a vocabulary block of w once per
 * 2 x 256 multiply-adds per element), fewer where the chunk's fp32 logits
 * would pass PT_CLASSIFIER_CHUNK_BYTES (64 MiB: a vocabulary over 65536), a
 * multiple of 64, at least 64, at most N.  A function of N and Vl only, so
 * the chunks (and the sums over them) are the same on every rank of a group
 * and at any thread count; the planner's memory model counts the same. */
#define PT_CLASSIFIER_CHUNK_ROWS 256
#define PT_CLASSIFIER_CHUNK_BYTES ((size_t)64 << 20)
static inline int pt_classifier_chunk_rows(int N, int Vl)
{
    size_t r = PT_CLASSIFIER_CHUNK_BYTES / (sizeof(float) * (size_t)(Vl > 0 ? Vl : 1));
    r = r / 64 * 64;
    if (r < 64) r = 64;
    if (r > PT_CLASSIFIER_CHUNK_ROWS) r = PT_CLASSIFIER_CHUNK_ROWS;
    return (size_t)N < r ? N : (int)r;
}

/* The RoPE table of rope_fwd/bwd (host code, libc only): cs [Tmax, HS/2, 2]
 * floats, cs[p][i] = (cos, sin) of p * inv_freq[i], inv_freq[i] =
 * theta^(-2i/HS) (HF's _compute_default_rope_parameters), with Llama 3.1's
 * frequency scaling where factor > 0 (HF's _compute_llama3_parameters):
 * wavelen = 2 pi / inv_freq; wavelen > orig_ctx/low_freq: inv_freq/factor;
 * wavelen < orig_ctx/high_freq: unchanged; between: smooth = (orig_ctx/wavelen
 * - low_freq)/(high_freq - low_freq), (1 - smooth) inv_freq/factor + smooth
 * inv_freq.  Computed in double and rounded to float once (HF computes the
 * angle in fp32 from fp32 inv_freq: its cos/sin differ from these by a few
 * fp32 ulps of the angle, growing with p).  A host buffer: a device backend's
 * caller moves it with ops->convert / copy.  PT_OK, or PT_EINVAL via pt_fail
 * (Tmax < 1, HS odd or < 2, theta <= 1, factor > 0 with low_freq >= high_freq
 * or orig_ctx < 1). */
int pt_rope_table(float *cs, int Tmax, int HS, double theta, double factor, double low_freq, double high_freq,
                  int orig_ctx);

/* CPU kernels (OpenBLAS + OpenMP; bf16 GEMMs through lib/backend's bf16
 * GEMM).  pt_cpu_ops_f32 trains in fp32, pt_cpu_ops_bf16 in bf16 with
 * fp32 accumulation, pt_cpu_ops_f64 is the tests' reference.  Built by
 * pt_cpu_ops_build when the library is loaded; read them, never write. */
extern pt_ops pt_cpu_ops_f32;
extern pt_ops pt_cpu_ops_bf16;
extern pt_ops pt_cpu_ops_f64;
/* Build a CPU table for policy p (fp32, bf16, or act = gemm = acc = fp64)
 * from the families in the mask `families` (pt_ops_build): PT_OK, or
 * PT_EUNSUPP with one line (a policy the CPU has no kernels for, a
 * required entry left NULL). */
int pt_cpu_ops_build(pt_ops *o, const pt_prec_policy *p, unsigned families);

/* What lib/comm needs of a backend whose memory is not host memory: the
 * movers between its memory and the host (on its communication stream,
 * ordered after the compute stream's queued work, synchronous for the
 * host), pinned staging memory, the two streams' ordering, the device's
 * identity and the communication stream itself.  Sizes in bytes.  The
 * CUDA backend's (lib/backend/cuda/cuda.h) is the only one; NULL for the
 * CPU.  So lib/comm reaches the device with no CUDA header. */
typedef struct pt_backend_dev {
    /* whether p points into this backend's memory (0 for host memory, NULL) */
    int (*is_device_ptr)(const void *p);
    /* device -> host, host -> device, device -> device: PT_OK or PT_EIO */
    int (*to_host)(void *dst, const void *src, size_t bytes);
    int (*to_device)(void *dst, const void *src, size_t bytes);
    int (*copy)(void *dst, const void *src, size_t bytes);
    /* pinned host memory for staging; NULL with pt_fail's line; free(NULL) is a no-op */
    void *(*host_alloc)(size_t bytes);
    void (*host_free)(void *p);
    /* the communication stream waits for the compute stream's queued work,
     * and the other way round: PT_OK or PT_EIO */
    int (*comm_after_compute)(void);
    int (*compute_after_comm)(void);
    /* the 16-byte identity of this process's device (two ranks share a
     * device when equal): PT_OK, PT_EUNSUPP before init */
    int (*device_uuid)(unsigned char uuid[16]);
    /* the communication stream as the collective library takes it (a
     * cudaStream_t for NCCL); NULL before init */
    void *(*comm_stream)(void);
} pt_backend_dev;

/* A compute backend: a name, its ops tables, the memory its ops address,
 * and the hooks the run needs around them.  Everything above lib/backend
 * computes only through this table (no BLAS call and no loop over tensor
 * data elsewhere; tests/unit/test_compute_rule.sh checks) and reaches a
 * device only through it (no CUDA header outside lib/backend:
 * tests/unit/test_backend_seam.sh checks), so a new backend is another
 * instance registered in lib/backend/backend.c. */
typedef struct pt_backend {
    const char *name;
    const pt_ops *ops;      /* fp32 activations (act = acc = fp32) */
    const pt_ops *ops_bf16; /* bf16 activations, fp32 accumulation; NULL: not built */
    /* set the number of compute threads (BLAS and OpenMP) for this rank */
    void (*set_threads)(int n);
    /* allocator of the memory the ops work on (its device) */
    const pt_arena_mem *mem;
    /* whether it can run in this process, initialising nothing: 1; 0 when
     * built in but unusable here (no device visible); -1 when this build
     * lacks it.  The reason for 0 and -1 goes to why (len bytes, one line). */
    int (*available)(char *why, size_t len);
    /* make it ready (the CPU: OpenBLAS's kernel set; CUDA: the device, its
     * streams and cuBLASLt).  Idempotent, main thread, before the first op.
     * PT_OK, or the error with one line (PT_EUNSUPP: no device or not
     * built; PT_EIO, PT_ENOMEM from the runtime). */
    int (*init)(void);
    /* the choices a run's precision policy makes before its first op, so
     * that a bad one is a start-up line and not a failure at the first
     * matmul (the CPU: for bf16 GEMM operands, the bf16 GEMM,
     * PTRAIN_BF16_GEMM or the ISA rule).  Initialises nothing else.  PT_OK
     * or PT_EINVAL / PT_EUNSUPP with one line (a policy this backend has no
     * table for among them). */
    int (*prepare)(const pt_prec_policy *p);
    /* the run header's device line (the CPU: its model; CUDA: the GPU,
     * driver and library versions) into buf (len bytes) */
    void (*describe)(char *buf, size_t len);
    /* the first failure an op recorded (tables whose entries return
     * nothing: a kernel launch, a library status): its code, PT_OK when
     * none; *msg its line ("" when none) */
    int (*status)(const char **msg);
    /* its memory's movers and streams for lib/comm; NULL: host memory */
    const pt_backend_dev *dev;
} pt_backend;

/* The backend called `name` (NULL: the default, "cpu") as registered,
 * initialising nothing (for available, describe, dev), or NULL with
 * PT_EUNSUPP via pt_errmsg naming the valid names.  "cuda" is registered
 * in every build; without the CUDA backend its available() says so. */
const pt_backend *pt_backend_find(const char *name);
/* pt_backend_find, then its init: the backend ready for ops, or NULL with
 * the reason ("backend 'cuda': no CUDA device visible ...") via
 * pt_errmsg. */
const pt_backend *pt_backend_get(const char *name);
/* The table of backend be for precision policy p (the one of be->ops and
 * be->ops_bf16 built for p), or NULL with PT_EUNSUPP via pt_errmsg naming
 * the policy and what this backend has. */
const pt_ops *pt_backend_ops_for(const pt_backend *be, const pt_prec_policy *p);
/* The thin helper for callers that hold a dtype: the table of backend be
 * whose activations are `act` (PT_F32 or PT_BF16: pt_prec_policy_for(act),
 * then pt_backend_ops_for), or NULL with PT_EUNSUPP via pt_errmsg naming
 * the dtype and what this backend has. */
const pt_ops *pt_backend_ops(const pt_backend *be, pt_dtype act);
/* Names of the backends whose ops run on host memory, NULL-terminated
 * ({"cpu", NULL}): what the CPU tests iterate over (tests/gpu holds the
 * CUDA tables against these). */
const char *const *pt_backend_names(void);

/* The registered backends (lib/backend/cpu.c; lib/backend/cuda/cuda_backend.c
 * in every build, whose hooks say when the CUDA backend is not built). */
extern const pt_backend pt_cpu_backend;
extern const pt_backend pt_cuda_backend;

#endif
