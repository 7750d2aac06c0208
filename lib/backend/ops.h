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
 *    ring), LayerNorm split in pieces around a group reduction, the cross-entropy loss and AdamW.
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
 * float (pt_cpu_ops_f32, the training backend) and double (pt_cpu_ops_f64,
 * used by the tests to check every backward against finite differences in
 * double precision, and the float kernels against the double ones).
 * Formulas follow GPT-2 (Radford et al. 2019) and llm.c's CPU reference:
 * layernorm (Ba et al. 2016), GELU tanh form (Hendrycks & Gimpel 2016),
 * causal softmax attention (Vaswani et al. 2017, section 3.2.1) computed
 * as FlashAttention (Dao et al. 2022, "FlashAttention: Fast and
 * Memory-Efficient Exact Attention with IO-Awareness", algorithms 1 and 2;
 * FlashAttention-2, Dao 2023, algorithm 1 and section 3.1's D = rowsum(dO
 * * O) backward), the fused classifier as llm.c's fused_classifier and
 * Liger Kernel's fused linear cross-entropy (Hsu et al. 2024).
 *
 * Element types.  Every op of the table takes REAL tensors (float or
 * double) and int32 token ids; integers (sizes, strides, flags) and the
 * pt_attn_dims shape are type-free.  A mixed-precision table (bf16
 * storage, fp32 accumulation) is another instantiation with its own
 * storage type for activations and weights; see cpu_ops.inc.
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
 * heads of HS; Tq query rows and Tk key rows per sequence.  q (and dq)
 * rows have stride ldq elements, k and v (and dk, dv) stride ldkv, head h
 * at column h*HS of each; sequence b's rows start at b*Tq (queries) and
 * b*Tk (keys).  Causal on global positions: query row i sits at q0 + i,
 * key row j at k0 + j, and the query sees the key iff k0 + j <= q0 + i.
 * The whole sequence: Tq = Tk = T, q0 = k0 = 0, q = qkv, k = qkv + C,
 * v = qkv + 2C, ldq = ldkv = 3C (C = NH*HS).  A ring step (Liu et al.
 * 2023; Li et al. 2021): the local queries against a key/value block
 * passed round the sequence-parallel group. */
typedef struct pt_attn_dims {
    int B, NH, HS;
    int Tq, Tk;
    int q0, k0;
    int ldq, ldkv;
} pt_attn_dims;

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
        /* out[N,OC] = epi(inp[N,C] w[OC,C]^T + beta out + bias[OC]) (bias NULL: none;    \
         * beta 0 or 1: 1 accumulates a SUMMA step's partial product into out); epi        \
         * PT_EPI_DEFAULT or PT_EPI_GELU, which also writes aux [N,OC] = the pre-GELU value \
         * unless aux is NULL.  Row blocks of the GEMM get their epilogue while in cache.  */ \
        void (*matmul_fwd)(REAL *out, REAL *aux, const REAL *inp, const REAL *w, const REAL *bias, \
                           REAL beta, int N, int C, int OC, int epi);                         \
        /* dw += dout^T inp; dbias += colsum(dout) (BGRADA); epi PT_EPI_DEFAULT: dinp +=    \
         * dout w; PT_EPI_DGELU: dinp = (dout w) * GELU'(aux) WRITTEN (aux [N,C], the       \
         * pre-GELU values of the layer that produced inp) and dbias_aux [C] += colsum of   \
         * that dinp (DGELU_BGRAD; NULL skips).  NULL dinp / dw / dbias skip. */            \
        void (*matmul_bwd)(REAL *dinp, REAL *dw, REAL *dbias, const REAL *dout, const REAL *inp, \
                           const REAL *w, int N, int C, int OC, int epi, const REAL *aux,      \
                           REAL *dbias_aux);                                                   \
        /* The epilogue alone, in place on out [N,OC]: out = epi(out + bias); epi           \
         * PT_EPI_GELU writes aux = out + bias first (NULL skips). */                         \
        void (*epilogue_fwd)(REAL *out, REAL *aux, const REAL *bias, int N, int OC, int epi); \
        /* The DGELU_BGRAD epilogue alone, in place: d [N,OC] *= GELU'(aux); dbias [OC] +=   \
         * colsum of the result (NULL skips). */                                              \
        void (*epilogue_bwd)(REAL *d, REAL *dbias, const REAL *aux, int N, int OC);          \
        /* Flash attention forward (Dao et al. 2022, alg. 1; Dao 2023, alg. 1), scale       \
         * 1/sqrt(HS), causal per pt_attn_dims: out [B, Tq, NH*HS], lse [B, NH, Tq] the row \
         * log-sum-exp of the scaled scores.  merge 0: writes both (a row that sees no key  \
         * gets out 0, lse -inf); merge 1: (out, lse) hold the result over other keys and   \
         * leave holding the exact result over both sets (ring attention's merge: lse' =     \
         * log(e^lse + e^lse_blk), out' = e^(lse-lse') out + e^(lse_blk-lse') out_blk, done  \
         * as one more step of the online softmax).  Tiles of PT_FLASH_TILE queries x keys; \
         * key tiles past a query tile's diagonal are skipped; threads over (b, h, query    \
         * tile). */                                                                          \
        void (*attention_fwd)(REAL *out, REAL *lse, const REAL *q, const REAL *k, const REAL *v, \
                              const pt_attn_dims *d, int merge);                               \
        /* Flash attention backward (Dao et al. 2022, alg. 2; Dao 2023, sec. 3.1): out and   \
         * lse are the forward's FINAL results (over every key the queries see, also keys   \
         * outside this call); D = rowsum(dout * out); per tile P = exp(S - lse) again,      \
         * dS = P (dout v^T - D) scale.  dq += dS k, dk += dS^T q, dv += P^T dout (strides as \
         * pt_attn_dims).  Threads over (b, h): a pair owns its dq, dk, dv columns, so no    \
         * atomics and the result does not depend on the thread count. */                   \
        void (*attention_bwd)(REAL *dq, REAL *dk, REAL *dv, const REAL *dout, const REAL *q,  \
                              const REAL *k, const REAL *v, const REAL *out, const REAL *lse,  \
                              const pt_attn_dims *d);                                          \
        /* Materialised causal attention (the reference; the model does not run it):        \
         * att [B, NH, T, T] post-softmax; forward writes out and att, backward accumulates  \
         * dqkv [B, T, 3C].  May be NULL on a backend other than cpu. */                     \
        void (*attention_ref_fwd)(REAL *out, REAL *att, const REAL *qkv, int B, int T, int NH,  \
                                  int HS);                                                     \
        void (*attention_ref_bwd)(REAL *dqkv, const REAL *dout, const REAL *qkv, const REAL *att, \
                                  int B, int T, int NH, int HS);                               \
        /* GELU, tanh approximation */                                                         \
        void (*gelu_fwd)(REAL *out, const REAL *inp, size_t n);                                \
        void (*gelu_bwd)(REAL *dinp, const REAL *inp, const REAL *dout, size_t n);             \
        /* residual: out = a + b; backward da += dout, db += dout */                           \
        void (*add_fwd)(REAL *out, const REAL *a, const REAL *b, size_t n);                    \
        void (*add_bwd)(REAL *da, REAL *db, const REAL *dout, size_t n);                       \
        /* out[n,:] += bias; dbias += colsum(dout).  out [N, OC] */                            \
        void (*bias_fwd)(REAL *out, const REAL *bias, int N, int OC);                          \
        void (*bias_bwd)(REAL *dbias, const REAL *dout, int N, int OC);                        \
        /* Materialised cross-entropy pieces (the reference of the fused classifier): logits \
         * [N, Vl].  rowmax[n] = max over unpadded ids of the shard (-inf if none) */         \
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
        /* Fused classifier (llm.c's fused_classifier; Liger's fused linear cross-entropy):  \
         * logits = x w^T one block of vb <= Vl vocabulary columns at a time in work [N, vb] \
         * (the only logits that exist), through the BLAS.  x is [ks][N][C/ks] and w        \
         * [ks][Vl][C/ks]: C split in ks column pieces stored one after another (what an    \
         * allgather of column blocks gives; ks 1 is plain [N, C] and [Vl, C]); logits =     \
         * sum over pieces.  Forward: stats [3N] = this shard's rowmax, sumexp (relative to \
         * that rowmax) and target logit (0 if the target is elsewhere), over unpadded ids, \
         * with an online max (Milakov & Gimelshein 2018) across blocks: a shard's LOCAL    \
         * statistics, which a vocabulary-parallel caller merges over its group (allreduce  \
         * max, xent_rescale, allreduce sum of sumexp and target). */                        \
        void (*classifier_fwd)(REAL *stats, const REAL *x, const REAL *w, const int32_t *targets, \
                               REAL *work, int vb, int v0, int vreal, int N, int C, int Vl, int ks); \
        /* Backward from the GLOBAL stats: per block the logits again, dlogits = (softmax -    \
         * onehot(target)) dloss[n] in work, dx [ks][N][C/ks] += dlogits w, dw               \
         * [ks][Vl][C/ks] += dlogits^T x (padded rows of dw untouched).  NULL skips. */       \
        void (*classifier_bwd)(REAL *dx, REAL *dw, const REAL *x, const REAL *w, const REAL *stats, \
                               const int32_t *targets, const REAL *dloss, REAL *work, int vb,  \
                               int v0, int vreal, int N, int C, int Vl, int ks);                \
        /* sumexp[n] *= exp(from[n] - to[n]) (0 where from[n] is -inf): a shard's sum of     \
         * exp moved from its own row max to the group's, [N] each */                        \
        void (*xent_rescale)(REAL *sumexp, const REAL *from, const REAL *to, int N);         \
        /* ---- generic ops (train-step refactor) ---- */                                     \
        /* Memory.  Pointers are backend memory (pt_backend.alloc) unless said otherwise;      \
         * on the CPU backend that is host memory. */                                          \
        /* x[0..n) = 0 (cudaMemset on a device backend) */                                     \
        void (*zero)(REAL *x, size_t n);                                                       \
        /* x[0..n) = a */                                                                      \
        void (*fill)(REAL *x, REAL a, size_t n);                                               \
        /* dst[0..n) = src[0..n), no overlap */                                                \
        void (*copy)(REAL *dst, const REAL *src, size_t n);                                    \
        /* height rows of width BYTES, row pitches dpitch/spitch in bytes (cudaMemcpy2D with   \
         * cudaMemcpyDefault: either side may be host memory; any element type, e.g. the     \
         * int32 token ids); no overlap */                                                     \
        void (*copy2d)(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, \
                       size_t height);                                                         \
        /* dst[r*ldd + c] += src[r*lds + c] for r < rows, c < cols (leading dims in elements) */ \
        void (*add2d)(REAL *dst, size_t ldd, const REAL *src, size_t lds, size_t rows,         \
                      size_t cols);                                                            \
        /* y[0..n) += a x[0..n)  (BLAS axpy) */                                                \
        void (*axpy)(REAL *y, REAL a, const REAL *x, size_t n);                                \
        /* x[0..n) *= a  (BLAS scal) */                                                        \
        void (*scale)(REAL *x, REAL a, size_t n);                                              \
        /* sum of x[0..n) and of x^2, accumulated in double, returned to the host */           \
        double (*sum)(const REAL *x, size_t n);                                                \
        double (*sumsq)(const REAL *x, size_t n);                                              \
        /* Strided batched GEMM, row-major (cublasGemmStridedBatched's contract):              \
         * for i < batch, C_i = alpha op(A_i) op(B_i) + beta C_i with A_i = A + i*sA (and      \
         * B_i, C_i alike, strides in elements); op(A_i) [M, K] (A_i stored [K, M] when ta),   \
         * op(B_i) [K, N] (stored [N, K] when tb), C_i [M, N]; lda/ldb/ldc row strides. */     \
        void (*gemm_batched)(int ta, int tb, int M, int N, int K, REAL alpha, const REAL *A,   \
                             int lda, int64_t sA, const REAL *B, int ldb, int64_t sB,          \
                             REAL beta, REAL *C, int ldc, int64_t sC, int batch);             \
        /* Causal softmax in place over att [BH, Tq, T] (scores in, probabilities out): row   \
         * i is the query at global position q0+i and sees keys 0 .. q0+i; later keys get 0.  \
         * Needs 0 <= q0 and q0 + Tq <= T.  (Vaswani et al. 2017, 3.2.1.)  With             \
         * gemm_batched, the pieces of a materialised ring attention (Li et al. 2021), the   \
         * tests' reference for the flash ring (lib/parallel/seq.c). */                      \
        void (*softmax_causal_fwd)(REAL *att, int BH, int Tq, int T, int q0);                  \
        /* In place: datt [BH, Tq, T] holds dP on entry and gets dS = att*(dP - rowsum(att*dP)) \
         * * scale on the visible keys, 0 elsewhere (WRITES, does not accumulate). */          \
        void (*softmax_causal_bwd)(REAL *datt, const REAL *att, REAL scale, int BH, int Tq,    \
                                   int T, int q0);                                             \
        /* LayerNorm over rows whose C columns are split in pieces of Cl (Ba et al. 2016), for  \
         * a layout that sums the row statistics over a group between the calls:              \
         *   rowsum    sum[n] = sum_c x[n,c]                       x [N, Cl]                  \
         *   rowvar    mean[n] = sum[n]/C (sum: the group total);                             \
         *             sqsum[n] = sum_c (x[n,c] - mean[n])^2        (local piece)              \
         *   apply     rstd[n] = 1/sqrt(sqsum[n]/C + 1e-5) (sqsum: group total);              \
         *             out = (x - mean) rstd w + b                  w, b [Cl]                  \
         * equal to layernorm_fwd when Cl == C.  Row n is read before it is written, so mean \
         * or sqsum may be the sum buffer and rstd the sqsum buffer. */                        \
        void (*layernorm_rowsum)(REAL *sum, const REAL *x, int N, int Cl);                    \
        void (*layernorm_rowvar)(REAL *mean, REAL *sqsum, const REAL *x, const REAL *sum,       \
                                 int N, int Cl, int C);                                        \
        void (*layernorm_apply)(REAL *out, REAL *rstd, const REAL *x, const REAL *mean,         \
                                const REAL *sqsum, const REAL *w, const REAL *b, int N, int Cl, \
                                int C);                                                        \
        /* backward pieces: s [2N], s[2n] = sum_c dy*w, s[2n+1] = sum_c dy*w*xhat (local);    \
         * apply (s: group totals) accumulates dx [N, Cl] (NULL skips), dw, db [Cl]; equal to  \
         * layernorm_bwd when Cl == C. */                                                      \
        void (*layernorm_bwd_rowsums)(REAL *s, const REAL *dy, const REAL *x, const REAL *w,   \
                                      const REAL *mean, const REAL *rstd, int N, int Cl);     \
        void (*layernorm_bwd_apply)(REAL *dx, REAL *dw, REAL *db, const REAL *dy, const REAL *x, \
                                    const REAL *w, const REAL *mean, const REAL *rstd,         \
                                    const REAL *s, int N, int Cl, int C);                      \
        /* losses[n] = log(sumexp[n]) + rowmax[n] - tgt[n] (nats) from xent_max/xent_sumexp's  \
         * GLOBAL row statistics, [N] each */                                                  \
        void (*xent_loss)(REAL *losses, const REAL *rowmax, const REAL *sumexp,               \
                          const REAL *tgt, int N);                                             \
        /* AdamW (Loshchilov & Hutter 2019, Algorithm 2) on n elements, in place on p, m, v:   \
         *   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;                                      \
         *   p -= lr (m/bc1 / (sqrt(v/bc2) + eps) + wd p)                                      \
         * bc1 = 1 - b1^t, bc2 = 1 - b2^t are the bias corrections of step t >= 1. */          \
        void (*adamw)(REAL *p, const REAL *g, REAL *m, REAL *v, size_t n, REAL lr, REAL b1,    \
                      REAL b2, REAL eps, REAL wd, REAL bc1, REAL bc2);                         \
    } NAME;

PT_DECLARE_OPS(float, pt_ops_f32)
PT_DECLARE_OPS(double, pt_ops_f64)

/* CPU kernels (OpenBLAS + OpenMP). */
extern const pt_ops_f32 pt_cpu_ops_f32;
extern const pt_ops_f64 pt_cpu_ops_f64;

/* A compute backend: a name, its fp32 ops table and the memory its ops
 * address.  Everything above lib/backend computes only through this table
 * (no BLAS call and no loop over tensor data elsewhere; tests/unit/
 * test_compute_rule.sh checks), so a CUDA backend (cuBLAS + kernels,
 * device pointers, mem->device == PT_DEV_CUDA) slots in as another
 * instance: give its mem to pt_arena_init for the arena the model uses. */
typedef struct pt_backend {
    const char *name;
    const pt_ops_f32 *ops;
    /* set the number of compute threads (BLAS and OpenMP) for this rank */
    void (*set_threads)(int n);
    /* allocator of the memory the ops work on (its device) */
    const pt_arena_mem *mem;
} pt_backend;

/* The backend called `name` (NULL: the default, "cpu"), or NULL with
 * PT_EUNSUPP via pt_errmsg naming the compiled backends.  "cuda"
 * (lib/backend/cuda/cuda.h: pt_cuda_backend) selects the process's GPU; it
 * is NULL with the reason when this build has no CUDA backend or the
 * process sees no device, and its ops are NULL until the CUDA kernels are
 * wired into the table. */
const pt_backend *pt_backend_get(const char *name);
/* Names of the backends whose ops table is complete, NULL-terminated
 * ({"cpu", NULL} today: "cuda" joins when its ops are wired): what tests
 * iterate over. */
const char *const *pt_backend_names(void);

#endif
