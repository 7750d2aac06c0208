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
 *    vreal are padding and excluded from the softmax;
 *  - the generic ops at the end of the table (zero .. adamw) are what the
 *    layers above the backend use instead of loops of their own: memory
 *    (cudaMemset / cudaMemcpy2D semantics), BLAS-1 (axpy, scal, sums),
 *    strided batched GEMM and causal softmax rows (ring self-attention,
 *    Li et al. 2021), LayerNorm split in pieces around a group reduction,
 *    the cross-entropy loss and AdamW.  Reductions return a double to the
 *    host (like cuBLAS's host pointer mode).
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
#include "core/core.h"
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
         * Needs 0 <= q0 and q0 + Tq <= T.  (Vaswani et al. 2017, 3.2.1; the ring of Li et   \
         * al. 2021 calls it with q0 = sp_rank*Tq.) */                                         \
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
 * PT_EUNSUPP via pt_errmsg naming the compiled backends. */
const pt_backend *pt_backend_get(const char *name);
/* Names of the compiled backends, NULL-terminated ({"cpu", NULL} in this
 * build): what tests iterate over. */
const char *const *pt_backend_names(void);

#endif
