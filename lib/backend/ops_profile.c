/* SPDX-License-Identifier: MIT */
/* The profiling ops table (ops_profile.h): one wrapper per entry of
 * pt_ops, each timing the forwarded call and counting its family's FLOPs
 * and bytes from the call's shapes. */
#include "backend/ops_profile.h"

#include <stdio.h>
#include <stdlib.h>

static pt_ops_profile *P; /* the active profile */

static const char *const fam_names[PT_OPF_N] = {"gemm",        "attention", "classifier", "layernorm",
                                                "elementwise", "embedding", "optimizer",  "memory"};

const char *pt_op_family_name(int f) { return f >= 0 && f < PT_OPF_N ? fam_names[f] : "?"; }
int pt_op_family_compute(int f) { return f == PT_OPF_GEMM || f == PT_OPF_ATTENTION || f == PT_OPF_CLASSIFIER; }

static const pt_ops *in(void)
{
    if (!P) {
        fprintf(stderr, "ptrain: a profiling ops table was called with no profile active (pt_ops_profile_stop)\n");
        abort();
    }
    return P->inner;
}
static double begin(void)
{
    if (P->sync) P->sync();
    return pt_now();
}
static void end(int f, double t0, double flops, double bytes)
{
    if (P->sync) P->sync();
    pt_op_family_stats *s = &P->fam[f];
    s->seconds += pt_now() - t0;
    s->flops += flops;
    s->bytes += bytes;
    s->calls++;
}
/* element sizes of the inner table's roles and of a dtype */
static double ea(void) { return (double)pt_dtype_size(P->inner->act); }
static double ec(void) { return (double)pt_dtype_size(P->inner->acc); }
static double es(pt_dtype t) { return (double)pt_dtype_size(t); }
/* unpadded columns of a vocabulary shard (ops.h) */
static double vwidth(int v0, int vreal, int Vl)
{
    const int w = vreal - v0;
    return w < 0 ? 0 : w > Vl ? Vl : w;
}
/* (query, key) pairs a causal attention call computes, per (b, h) */
static double attn_pairs(const pt_attn_dims *d)
{
    double n = 0;
    for (int i = 0; i < d->Tq; i++) {
        long vis = (long)d->q0 + i - d->k0 + 1;
        n += vis < 0 ? 0 : vis > d->Tk ? d->Tk : vis;
    }
    return n;
}

#define BEGIN const pt_ops *o_ = in(); const double t0_ = begin()
#define END(fam, flops, bytes) end(fam, t0_, flops, bytes)

static void w_embedding_fwd(void *out, const int32_t *tok, const void *w, int v0, int Vl, int N, int C)
{
    BEGIN;
    o_->embedding_fwd(out, tok, w, v0, Vl, N, C);
    END(PT_OPF_EMBEDDING, 0, 2.0 * N * C * ea() + 4.0 * N);
}
static void w_embedding_bwd(void *dw, const void *dout, const int32_t *tok, int v0, int Vl, int N, int C)
{
    BEGIN;
    o_->embedding_bwd(dw, dout, tok, v0, Vl, N, C);
    END(PT_OPF_EMBEDDING, (double)N * C, (double)N * C * (ea() + 2 * ec()) + 4.0 * N);
}
static void w_posemb_fwd(void *x, const void *wpe, int B, int T, int C)
{
    BEGIN;
    o_->posemb_fwd(x, wpe, B, T, C);
    END(PT_OPF_EMBEDDING, (double)B * T * C, ((double)B * T * C * 2 + (double)T * C) * ea());
}
static void w_posemb_bwd(void *dwpe, const void *dout, int B, int T, int C)
{
    BEGIN;
    o_->posemb_bwd(dwpe, dout, B, T, C);
    END(PT_OPF_EMBEDDING, (double)B * T * C, (double)B * T * C * ea() + 2.0 * T * C * ec());
}
static void w_layernorm_fwd(void *out, void *mean, void *rstd, const void *inp, const void *w, const void *b, int N,
                            int C)
{
    BEGIN;
    o_->layernorm_fwd(out, mean, rstd, inp, w, b, N, C);
    END(PT_OPF_LAYERNORM, 8.0 * N * C, (2.0 * N * C + 2.0 * C) * ea() + 2.0 * N * ec());
}
static void w_layernorm_bwd(void *dinp, void *dw, void *db, const void *dout, const void *inp, const void *w,
                            const void *mean, const void *rstd, int N, int C)
{
    BEGIN;
    o_->layernorm_bwd(dinp, dw, db, dout, inp, w, mean, rstd, N, C);
    END(PT_OPF_LAYERNORM, 14.0 * N * C, (4.0 * N * C + C) * ea() + (2.0 * N + 4.0 * C) * ec());
}
static void w_rmsnorm_fwd(void *out, void *rstd, const void *inp, const void *w, int N, int C, double eps)
{
    BEGIN;
    o_->rmsnorm_fwd(out, rstd, inp, w, N, C, eps);
    END(PT_OPF_LAYERNORM, 4.0 * N * C, (2.0 * N * C + C) * ea() + (double)N * ec());
}
static void w_rmsnorm_bwd(void *dinp, void *dw, const void *dout, const void *inp, const void *w, const void *rstd,
                          int N, int C)
{
    BEGIN;
    o_->rmsnorm_bwd(dinp, dw, dout, inp, w, rstd, N, C);
    END(PT_OPF_LAYERNORM, 10.0 * N * C, (4.0 * N * C + C) * ea() + ((double)N + 2.0 * C) * ec());
}
static void w_matmul_fwd(void *out, void *aux, const void *inp, const void *w, const void *bias, double beta, int N,
                         int C, int OC, int epi)
{
    BEGIN;
    o_->matmul_fwd(out, aux, inp, w, bias, beta, N, C, OC, epi);
    END(PT_OPF_GEMM, 2.0 * N * C * OC,
        ((double)N * C + (double)OC * C + (double)N * OC * (1 + (beta != 0) + (aux != NULL))) * ea());
}
static void w_matmul_bwd(void *dinp, void *dw, void *dbias, const void *dout, const void *inp, const void *w, int N,
                         int C, int OC, int epi, const void *aux, void *dbias_aux)
{
    BEGIN;
    o_->matmul_bwd(dinp, dw, dbias, dout, inp, w, N, C, OC, epi, aux, dbias_aux);
    const double n = (dinp ? 1 : 0) + (dw ? 1 : 0);
    END(PT_OPF_GEMM, 2.0 * n * N * C * OC,
        (double)N * OC * ea() + (dinp ? ((double)OC * C + 2.0 * N * C) * ea() : 0) +
            (dw ? (double)N * C * ea() + 2.0 * OC * C * ec() : 0));
}
static void w_epilogue_fwd(void *out, void *aux, const void *bias, int N, int OC, int epi)
{
    BEGIN;
    o_->epilogue_fwd(out, aux, bias, N, OC, epi);
    END(PT_OPF_ELEMENTWISE, 0, (double)N * OC * (2 + (aux != NULL)) * ea());
}
static void w_epilogue_bwd(void *d, void *dbias, const void *aux, int N, int OC)
{
    BEGIN;
    o_->epilogue_bwd(d, dbias, aux, N, OC);
    END(PT_OPF_ELEMENTWISE, 0, 3.0 * N * OC * ea());
}
static void w_attention_fwd(void *out, void *lse, const void *q, const void *k, const void *v, const pt_attn_dims *d,
                            int merge)
{
    BEGIN;
    o_->attention_fwd(out, lse, q, k, v, d, merge);
    /* q, out per query head; k, v per KV head (GQA: pt_attn_nkv(d) of them) */
    const double bh = (double)d->B * d->NH, bkv = (double)d->B * pt_attn_nkv(d);
    END(PT_OPF_ATTENTION, 4.0 * bh * d->HS * attn_pairs(d),
        d->HS * (2.0 * bh * d->Tq + 2.0 * bkv * d->Tk) * ea() + bh * d->Tq * ec());
}
static void w_attention_bwd(void *dq, void *dk, void *dv, const void *dout, const void *q, const void *k, const void *v,
                            const void *out, const void *lse, const pt_attn_dims *d)
{
    BEGIN;
    o_->attention_bwd(dq, dk, dv, dout, q, k, v, out, lse, d);
    /* S again, dV, dP, dQ, dK: five products over the visible pairs */
    const double bh = (double)d->B * d->NH, bkv = (double)d->B * pt_attn_nkv(d);
    END(PT_OPF_ATTENTION, 10.0 * bh * d->HS * attn_pairs(d),
        d->HS * (5.0 * bh * d->Tq + 6.0 * bkv * d->Tk) * ea() + bh * d->Tq * ec());
}
static void w_attention_ref_fwd(void *out, void *att, const void *qkv, int B, int T, int NH, int HS)
{
    BEGIN;
    o_->attention_ref_fwd(out, att, qkv, B, T, NH, HS);
    END(PT_OPF_ATTENTION, 4.0 * B * NH * (double)T * T * HS, 4.0 * B * T * NH * HS * ea() + (double)B * NH * T * T * ec());
}
static void w_attention_ref_bwd(void *dqkv, const void *dout, const void *qkv, const void *att, int B, int T, int NH,
                                int HS)
{
    BEGIN;
    o_->attention_ref_bwd(dqkv, dout, qkv, att, B, T, NH, HS);
    END(PT_OPF_ATTENTION, 8.0 * B * NH * (double)T * T * HS,
        10.0 * B * T * NH * HS * ea() + (double)B * NH * T * T * ec());
}
static void w_gelu_fwd(void *out, const void *inp, size_t n)
{
    BEGIN;
    o_->gelu_fwd(out, inp, n);
    END(PT_OPF_ELEMENTWISE, 0, 2.0 * (double)n * ea());
}
static void w_gelu_bwd(void *dinp, const void *inp, const void *dout, size_t n)
{
    BEGIN;
    o_->gelu_bwd(dinp, inp, dout, n);
    END(PT_OPF_ELEMENTWISE, 0, 4.0 * (double)n * ea());
}
static void w_add_fwd(void *out, const void *a, const void *b, size_t n)
{
    BEGIN;
    o_->add_fwd(out, a, b, n);
    END(PT_OPF_ELEMENTWISE, (double)n, 3.0 * (double)n * ea());
}
static void w_add_bwd(void *da, void *db, const void *dout, size_t n)
{
    BEGIN;
    o_->add_bwd(da, db, dout, n);
    END(PT_OPF_ELEMENTWISE, 2.0 * (double)n, 5.0 * (double)n * ea());
}
static void w_bias_fwd(void *out, const void *bias, int N, int OC)
{
    BEGIN;
    o_->bias_fwd(out, bias, N, OC);
    END(PT_OPF_ELEMENTWISE, (double)N * OC, (2.0 * N * OC + OC) * ea());
}
static void w_bias_bwd(void *dbias, const void *dout, int N, int OC)
{
    BEGIN;
    o_->bias_bwd(dbias, dout, N, OC);
    END(PT_OPF_ELEMENTWISE, (double)N * OC, (double)N * OC * ea() + 2.0 * OC * ec());
}
/* RoPE: 6 FLOPs per channel pair; x read and written, the table's rows read */
static void w_rope_fwd(void *x, const void *cs, int B, int T, int t0, int nh, int HS, int ld)
{
    BEGIN;
    o_->rope_fwd(x, cs, B, T, t0, nh, HS, ld);
    END(PT_OPF_ELEMENTWISE, 3.0 * B * T * nh * HS, 2.0 * B * T * nh * HS * ea() + (double)T * HS * ec());
}
static void w_rope_bwd(void *dx, const void *cs, int B, int T, int t0, int nh, int HS, int ld)
{
    BEGIN;
    o_->rope_bwd(dx, cs, B, T, t0, nh, HS, ld);
    END(PT_OPF_ELEMENTWISE, 3.0 * B * T * nh * HS, 2.0 * B * T * nh * HS * ea() + (double)T * HS * ec());
}
static void w_swiglu_fwd(void *out, const void *inp, int N, int F)
{
    BEGIN;
    o_->swiglu_fwd(out, inp, N, F);
    END(PT_OPF_ELEMENTWISE, 4.0 * N * F, 3.0 * N * F * ea());
}
static void w_swiglu_bwd(void *dinp, const void *dout, const void *inp, int N, int F)
{
    BEGIN;
    o_->swiglu_bwd(dinp, dout, inp, N, F);
    END(PT_OPF_ELEMENTWISE, 9.0 * N * F, 5.0 * N * F * ea());
}
static void w_xent_max(void *rowmax, const void *logits, int v0, int vreal, int N, int Vl)
{
    BEGIN;
    o_->xent_max(rowmax, logits, v0, vreal, N, Vl);
    END(PT_OPF_CLASSIFIER, (double)N * vwidth(v0, vreal, Vl), (double)N * vwidth(v0, vreal, Vl) * ea() + N * ec());
}
static void w_xent_sumexp(void *sumexp, void *tgt, const void *logits, const void *rowmax, const int32_t *targets,
                          int v0, int vreal, int N, int Vl)
{
    BEGIN;
    o_->xent_sumexp(sumexp, tgt, logits, rowmax, targets, v0, vreal, N, Vl);
    END(PT_OPF_CLASSIFIER, 2.0 * N * vwidth(v0, vreal, Vl), (double)N * vwidth(v0, vreal, Vl) * ea() + 3.0 * N * ec());
}
static void w_xent_bwd(void *dlogits, const void *logits, const void *rowmax, const void *sumexp,
                       const int32_t *targets, const void *dloss, int v0, int vreal, int N, int Vl)
{
    BEGIN;
    o_->xent_bwd(dlogits, logits, rowmax, sumexp, targets, dloss, v0, vreal, N, Vl);
    END(PT_OPF_CLASSIFIER, 3.0 * N * vwidth(v0, vreal, Vl), 2.0 * N * Vl * ea() + 3.0 * N * ec());
}
static void w_classifier_fwd(void *stats, const void *x, const void *w, const int32_t *targets, void *work, int vb,
                             int v0, int vreal, int N, int C, int Vl, int ks)
{
    BEGIN;
    o_->classifier_fwd(stats, x, w, targets, work, vb, v0, vreal, N, C, Vl, ks);
    const double W = vwidth(v0, vreal, Vl);
    END(PT_OPF_CLASSIFIER, 2.0 * N * C * W, ((double)N * C + W * C) * ea() + 3.0 * N * ec());
}
static void w_classifier_bwd(void *dx, void *dw, const void *x, const void *w, const void *stats,
                             const int32_t *targets, const void *dloss, void *work, int vb, int v0, int vreal, int N,
                             int C, int Vl, int ks)
{
    BEGIN;
    o_->classifier_bwd(dx, dw, x, w, stats, targets, dloss, work, vb, v0, vreal, N, C, Vl, ks);
    const double W = vwidth(v0, vreal, Vl), n = 1 + (dx ? 1 : 0) + (dw ? 1 : 0); /* the logits again, dX, dW */
    END(PT_OPF_CLASSIFIER, 2.0 * n * N * C * W,
        ((double)N * C * (dx ? 3 : 1) + W * C) * ea() + (dw ? 2.0 * W * C : 0) * ec() + 4.0 * N * ec());
}
static void w_classifier_rows_fwd(void *stats, void *logits, const void *x, const void *w, const int32_t *targets,
                                  void *work, int v0, int vreal, int R, int C, int Vl)
{
    BEGIN;
    o_->classifier_rows_fwd(stats, logits, x, w, targets, work, v0, vreal, R, C, Vl);
    const double W = vwidth(v0, vreal, Vl);
    END(PT_OPF_CLASSIFIER, 2.0 * R * C * W, ((double)R * C + W * C) * ea() + ((double)R * W + 3.0 * R) * ec());
}
static void w_classifier_rows_bwd(void *dx, void *dw, const void *x, const void *w, void *logits, const void *stats,
                                  const int32_t *targets, const void *dloss, void *work, int v0, int vreal, int R,
                                  int C, int Vl)
{
    BEGIN;
    o_->classifier_rows_bwd(dx, dw, x, w, logits, stats, targets, dloss, work, v0, vreal, R, C, Vl);
    const double W = vwidth(v0, vreal, Vl), n = (dx ? 1 : 0) + (dw ? 1 : 0);
    END(PT_OPF_CLASSIFIER, 2.0 * n * R * C * W,
        ((double)R * C * (dx ? 3 : 1) + W * C) * ea() + (2.0 * R * W + 4.0 * R + (dw ? 2.0 * W * C : 0)) * ec());
}
static void w_xent_rescale(void *sumexp, const void *from, const void *to, int N)
{
    BEGIN;
    o_->xent_rescale(sumexp, from, to, N);
    END(PT_OPF_CLASSIFIER, 2.0 * N, 4.0 * N * ec());
}
static void w_zero(void *x, size_t n, pt_dtype t)
{
    BEGIN;
    o_->zero(x, n, t);
    END(PT_OPF_MEMORY, 0, (double)n * es(t));
}
static void w_fill(void *x, double a, size_t n, pt_dtype t)
{
    BEGIN;
    o_->fill(x, a, n, t);
    END(PT_OPF_MEMORY, 0, (double)n * es(t));
}
static void w_copy(void *dst, const void *src, size_t n, pt_dtype t)
{
    BEGIN;
    o_->copy(dst, src, n, t);
    END(PT_OPF_MEMORY, 0, 2.0 * (double)n * es(t));
}
static void w_convert(void *dst, pt_dtype dt, const void *src, pt_dtype st, size_t n)
{
    BEGIN;
    o_->convert(dst, dt, src, st, n);
    END(PT_OPF_MEMORY, 0, (double)n * (es(dt) + es(st)));
}
static void w_copy2d(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height)
{
    BEGIN;
    o_->copy2d(dst, dpitch, src, spitch, width, height);
    END(PT_OPF_MEMORY, 0, 2.0 * (double)width * (double)height);
}
static void w_add2d(void *dst, size_t ldd, const void *src, size_t lds, size_t rows, size_t cols, pt_dtype t)
{
    BEGIN;
    o_->add2d(dst, ldd, src, lds, rows, cols, t);
    END(PT_OPF_MEMORY, (double)rows * cols, 3.0 * (double)rows * cols * es(t));
}
static void w_axpy(void *y, double a, const void *x, size_t n, pt_dtype t)
{
    BEGIN;
    o_->axpy(y, a, x, n, t);
    END(PT_OPF_MEMORY, 2.0 * (double)n, 3.0 * (double)n * es(t));
}
static void w_scale(void *x, double a, size_t n, pt_dtype t)
{
    BEGIN;
    o_->scale(x, a, n, t);
    END(PT_OPF_MEMORY, (double)n, 2.0 * (double)n * es(t));
}
static double w_sum(const void *x, size_t n, pt_dtype t)
{
    BEGIN;
    const double r = o_->sum(x, n, t);
    END(PT_OPF_MEMORY, (double)n, (double)n * es(t));
    return r;
}
static double w_sumsq(const void *x, size_t n, pt_dtype t)
{
    BEGIN;
    const double r = o_->sumsq(x, n, t);
    END(PT_OPF_MEMORY, 2.0 * (double)n, (double)n * es(t));
    return r;
}
static void w_gemm_batched(int ta, int tb, int M, int N, int K, double alpha, const void *A, int lda, int64_t sA,
                           const void *B, int ldb, int64_t sB, double beta, void *C, int ldc, int64_t sC, int batch)
{
    BEGIN;
    o_->gemm_batched(ta, tb, M, N, K, alpha, A, lda, sA, B, ldb, sB, beta, C, ldc, sC, batch);
    END(PT_OPF_GEMM, 2.0 * M * N * (double)K * batch,
        ((double)M * K + (double)K * N + (double)M * N * (1 + (beta != 0))) * batch * ec());
}
static void w_softmax_causal_fwd(void *att, int BH, int Tq, int T, int q0)
{
    BEGIN;
    o_->softmax_causal_fwd(att, BH, Tq, T, q0);
    END(PT_OPF_ATTENTION, 0, 2.0 * BH * Tq * (double)T * ec());
}
static void w_softmax_causal_bwd(void *datt, const void *att, double scale, int BH, int Tq, int T, int q0)
{
    BEGIN;
    o_->softmax_causal_bwd(datt, att, scale, BH, Tq, T, q0);
    END(PT_OPF_ATTENTION, 0, 3.0 * BH * Tq * (double)T * ec());
}
static void w_layernorm_rowsum(void *sum, const void *x, int N, int Cl)
{
    BEGIN;
    o_->layernorm_rowsum(sum, x, N, Cl);
    END(PT_OPF_LAYERNORM, (double)N * Cl, (double)N * Cl * ea() + N * ec());
}
static void w_layernorm_rowvar(void *mean, void *sqsum, const void *x, const void *sum, int N, int Cl, int C)
{
    BEGIN;
    o_->layernorm_rowvar(mean, sqsum, x, sum, N, Cl, C);
    END(PT_OPF_LAYERNORM, 3.0 * N * Cl, (double)N * Cl * ea() + 3.0 * N * ec());
}
static void w_layernorm_apply(void *out, void *rstd, const void *x, const void *mean, const void *sqsum, const void *w,
                              const void *b, int N, int Cl, int C)
{
    BEGIN;
    o_->layernorm_apply(out, rstd, x, mean, sqsum, w, b, N, Cl, C);
    END(PT_OPF_LAYERNORM, 4.0 * N * Cl, (2.0 * N * Cl + 2.0 * Cl) * ea() + 3.0 * N * ec());
}
static void w_layernorm_bwd_rowsums(void *s, const void *dy, const void *x, const void *w, const void *mean,
                                    const void *rstd, int N, int Cl)
{
    BEGIN;
    o_->layernorm_bwd_rowsums(s, dy, x, w, mean, rstd, N, Cl);
    END(PT_OPF_LAYERNORM, 6.0 * N * Cl, (2.0 * N * Cl + Cl) * ea() + 4.0 * N * ec());
}
static void w_layernorm_bwd_apply(void *dx, void *dw, void *db, const void *dy, const void *x, const void *w,
                                  const void *mean, const void *rstd, const void *s, int N, int Cl, int C)
{
    BEGIN;
    o_->layernorm_bwd_apply(dx, dw, db, dy, x, w, mean, rstd, s, N, Cl, C);
    END(PT_OPF_LAYERNORM, 10.0 * N * Cl, (4.0 * N * Cl + Cl) * ea() + (4.0 * N + 4.0 * Cl) * ec());
}
static void w_rmsnorm_rowsumsq(void *sqsum, const void *x, int N, int Cl)
{
    BEGIN;
    o_->rmsnorm_rowsumsq(sqsum, x, N, Cl);
    END(PT_OPF_LAYERNORM, 2.0 * N * Cl, (double)N * Cl * ea() + N * ec());
}
static void w_rmsnorm_apply(void *out, void *rstd, const void *x, const void *sqsum, const void *w, int N, int Cl,
                            int C, double eps)
{
    BEGIN;
    o_->rmsnorm_apply(out, rstd, x, sqsum, w, N, Cl, C, eps);
    END(PT_OPF_LAYERNORM, 2.0 * N * Cl, (2.0 * N * Cl + Cl) * ea() + 2.0 * N * ec());
}
static void w_rmsnorm_bwd_rowsums(void *s, const void *dy, const void *x, const void *w, const void *rstd, int N,
                                  int Cl)
{
    BEGIN;
    o_->rmsnorm_bwd_rowsums(s, dy, x, w, rstd, N, Cl);
    END(PT_OPF_LAYERNORM, 4.0 * N * Cl, (2.0 * N * Cl + Cl) * ea() + 2.0 * N * ec());
}
static void w_rmsnorm_bwd_apply(void *dx, void *dw, const void *dy, const void *x, const void *w, const void *rstd,
                                const void *s, int N, int Cl, int C)
{
    BEGIN;
    o_->rmsnorm_bwd_apply(dx, dw, dy, x, w, rstd, s, N, Cl, C);
    END(PT_OPF_LAYERNORM, 8.0 * N * Cl, (4.0 * N * Cl + Cl) * ea() + (2.0 * N + 2.0 * Cl) * ec());
}
static void w_xent_loss(void *losses, const void *rowmax, const void *sumexp, const void *tgt, int N)
{
    BEGIN;
    o_->xent_loss(losses, rowmax, sumexp, tgt, N);
    END(PT_OPF_CLASSIFIER, 3.0 * N, 4.0 * N * ec());
}
static void w_adamw(void *p, void *work, const void *g, void *m, void *v, size_t n, double lr, double b1, double b2,
                    double eps, double wd, double bc1, double bc2)
{
    BEGIN;
    o_->adamw(p, work, g, m, v, n, lr, b1, b2, eps, wd, bc1, bc2);
    END(PT_OPF_OPTIMIZER, 15.0 * (double)n, (double)n * (7 * ec() + (work && work != p ? ea() : 0)));
}

const pt_ops *pt_ops_profile_start(pt_ops_profile *prof, const pt_ops *inner, void (*sync)(void))
{
    pt_ops *t = &prof->table;
    *t = (pt_ops){.name = inner->name, .act = inner->act, .acc = inner->acc, .prec = inner->prec};
    prof->inner = inner;
    prof->sync = sync;
    for (int f = 0; f < PT_OPF_N; f++) prof->fam[f] = (pt_op_family_stats){0, 0, 0, 0};
/* each entry of PT_OPS wrapped where the inner table has it */
#define W(op, ...) t->op = inner->op ? w_##op : NULL;
    PT_OPS(W)
#undef W
    P = prof;
    return t;
}

void pt_ops_profile_stop(void) { P = NULL; }
