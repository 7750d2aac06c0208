/* Compute kernels with explicit forward and backward, behind an ops table.
 *
 * Conventions (all tables):
 *  - activations are row-major [B, T, C] (N = B*T rows of C), weights are
 *    [OC, C] (PyTorch nn.Linear layout; Y = X W^T + b);
 *  - every backward ACCUMULATES (+=) into parameter gradients and into
 *    input gradients; pass NULL to skip an input gradient or a bias;
 *  - qkv is [B, T, 3*NH*HS] laid out as [all q heads | all k heads | all v
 *    heads], each head HS contiguous; attention output is [B, T, NH*HS];
 *    att is the post-softmax causal matrix [B, NH, T, T];
 *  - the cross-entropy is split in three kernels so the vocabulary can be
 *    sharded (Megatron's vocab-parallel cross-entropy, Shoeybi et al. 2019
 *    section 3): logits [N, Vl] hold vocabulary ids v0 .. v0+Vl-1; ids >=
 *    vreal are padding and excluded from the softmax.
 *
 * The CPU kernels are written once (cpu_ops.inc) and instantiated for
 * float (pt_cpu_ops_f32, the training backend) and double (pt_cpu_ops_f64,
 * used by the tests to check every backward against finite differences in
 * double precision, and the float kernels against the double ones).
 * Formulas follow GPT-2 (Radford et al. 2019) and llm.c's CPU reference:
 * layernorm (Ba et al. 2016), GELU tanh form (Hendrycks & Gimpel 2016),
 * causal softmax attention (Vaswani et al. 2017, section 3.2.1).
 */
#ifndef PTRAIN_OPS_H
#define PTRAIN_OPS_H
#include <stddef.h>
#include <stdint.h>

#define PT_DECLARE_OPS(REAL, NAME)                                                            \
    typedef struct NAME {                                                                     \
        /* out[n,:] = w[tok[n]-v0,:] if v0 <= tok[n] < v0+Vl else 0.  out [N, C], w [Vl, C] */ \
        void (*embedding_fwd)(REAL *out, const int32_t *tok, const REAL *w, int v0, int Vl,  \
                              int N, int C);                                                   \
        /* dw[tok[n]-v0,:] += dout[n,:] for tokens in the shard */                             \
        void (*embedding_bwd)(REAL *dw, const REAL *dout, const int32_t *tok, int v0, int Vl, \
                              int N, int C);                                                   \
        /* x[b,t,:] += wpe[t,:];  x [B, T, C], wpe [>=T, C] */                                 \
        void (*posemb_fwd)(REAL *x, const REAL *wpe, int B, int T, int C);                     \
        /* dwpe[t,:] += sum_b dout[b,t,:] */                                                   \
        void (*posemb_bwd)(REAL *dwpe, const REAL *dout, int B, int T, int C);                 \
        /* out = (inp - mean)*rstd*w + b per row; mean, rstd [N] saved for backward (eps 1e-5) */ \
        void (*layernorm_fwd)(REAL *out, REAL *mean, REAL *rstd, const REAL *inp, const REAL *w, \
                              const REAL *b, int N, int C);                                    \
        void (*layernorm_bwd)(REAL *dinp, REAL *dw, REAL *db, const REAL *dout, const REAL *inp, \
                              const REAL *w, const REAL *mean, const REAL *rstd, int N, int C); \
        /* out[N,OC] = inp[N,C] w[OC,C]^T (+ bias[OC] unless NULL); sgemm/dgemm */             \
        void (*matmul_fwd)(REAL *out, const REAL *inp, const REAL *w, const REAL *bias, int N,  \
                           int C, int OC);                                                     \
        /* out[N,OC] += inp[N,C] w[OC,C]^T (accumulating form, for SUMMA steps) */             \
        void (*matmul_acc)(REAL *out, const REAL *inp, const REAL *w, int N, int C, int OC);   \
        /* dinp += dout w; dw += dout^T inp; dbias += colsum(dout); NULL skips */              \
        void (*matmul_bwd)(REAL *dinp, REAL *dw, REAL *dbias, const REAL *dout, const REAL *inp, \
                           const REAL *w, int N, int C, int OC);                               \
        /* causal multi-head self-attention, scale 1/sqrt(HS) */                               \
        void (*attention_fwd)(REAL *out, REAL *att, const REAL *qkv, int B, int T, int NH,     \
                              int HS);                                                         \
        void (*attention_bwd)(REAL *dqkv, const REAL *dout, const REAL *qkv, const REAL *att,   \
                              int B, int T, int NH, int HS);                                   \
        /* GELU, tanh approximation */                                                         \
        void (*gelu_fwd)(REAL *out, const REAL *inp, size_t n);                                \
        void (*gelu_bwd)(REAL *dinp, const REAL *inp, const REAL *dout, size_t n);             \
        /* residual: out = a + b; backward da += dout, db += dout */                           \
        void (*add_fwd)(REAL *out, const REAL *a, const REAL *b, size_t n);                    \
        void (*add_bwd)(REAL *da, REAL *db, const REAL *dout, size_t n);                       \
        /* out[n,:] += bias; dbias += colsum(dout).  out [N, OC] */                            \
        void (*bias_fwd)(REAL *out, const REAL *bias, int N, int OC);                          \
        void (*bias_bwd)(REAL *dbias, const REAL *dout, int N, int OC);                        \
        /* rowmax[n] = max over unpadded ids of the shard (-inf if none) */                    \
        void (*xent_max)(REAL *rowmax, const REAL *logits, int v0, int vreal, int N, int Vl);  \
        /* sumexp[n] = sum exp(logit - rowmax[n]) over unpadded shard ids;                     \
         * tgt[n] = logits[n, targets[n]-v0] if the target is in the shard, else 0 */          \
        void (*xent_sumexp)(REAL *sumexp, REAL *tgt, const REAL *logits, const REAL *rowmax,   \
                            const int32_t *targets, int v0, int vreal, int N, int Vl);        \
        /* dlogits = (softmax - onehot(target)) * dloss[n], written (not accumulated);         \
         * padded ids get 0.  Needs the GLOBAL rowmax and sumexp. */                           \
        void (*xent_bwd)(REAL *dlogits, const REAL *logits, const REAL *rowmax,                \
                         const REAL *sumexp, const int32_t *targets, const REAL *dloss, int v0, \
                         int vreal, int N, int Vl);                                            \
    } NAME;

PT_DECLARE_OPS(float, pt_ops_f32)
PT_DECLARE_OPS(double, pt_ops_f64)

/* CPU kernels (OpenBLAS + OpenMP). */
extern const pt_ops_f32 pt_cpu_ops_f32;
extern const pt_ops_f64 pt_cpu_ops_f64;

/* A compute backend: a name and its fp32 ops table.  The model only calls
 * through this table, so a CUDA backend (cuBLAS + kernels, device pointers)
 * slots in as another instance.  pt_backend_get("cpu") is the only one in
 * this build; it returns NULL (PT_EUNSUPP via pt_errmsg) for unknown names. */
typedef struct pt_backend {
    const char *name;
    const pt_ops_f32 *ops;
    /* set the number of compute threads (BLAS and OpenMP) for this rank */
    void (*set_threads)(int n);
} pt_backend;

const pt_backend *pt_backend_get(const char *name);

#endif
