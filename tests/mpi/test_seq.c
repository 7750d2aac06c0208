/* SPDX-License-Identifier: MIT */
/* Ring self-attention (sequence parallelism, Li et al. 2021 section 3.2;
 * flash attention per ring step, Liu et al. 2023) reproduces the
 * single-process attention and moves exactly the volume seq.h states.
 *
 * usage: test_seq                      (under mpirun -np SP, SP >= 1)
 *        test_seq --bench B NH HS T    (timing only, printed as # lines)
 *
 * For each shape (B, NH, HS, Tl) of a built-in list (Tl = 1 included), every
 * rank builds the same fresh random qkv [B, T, 3C], dout [B, T, C] and an
 * initial dqkv [B, T, 3C] (T = SP*Tl, C = NH*HS; normal values, seed from
 * PTRAIN_TEST_SEED or the clock, printed), runs pt_cpu_ops_f32's
 * materialised attention_ref_fwd/bwd on the full sequence as the reference
 * (and the flash attention_fwd for the log-sum-exp), and the ring
 * functions on its own block of positions [s*Tl, (s+1)*Tl) with
 * MPI_COMM_WORLD as the sp group.  It compares, to fp32 tolerance relative
 * to the largest reference magnitude:
 *   out [B, Tl, C]          with the reference's rows of the block,
 *   lse [B, NH, Tl]         with the single-process flash op's rows,
 *   dqkv [B, Tl, 3C]        q, k and v parts, both sides starting from the
 *                           same random dqkv (so "+=" is checked), error
 *                           relative to the largest increment of dqkv,
 * and the byte counters of the group with seq.h's formula, S = B*Tl*C*4:
 *   forward  2(SP-1) sends of S, backward 2(2SP-1) sends of S (0 if SP=1);
 * and that all scratch went back to the arena.  The same ring in bf16 against
 * the bf16 table's whole-sequence flash op (run_case_bf16), and
 * grouped-query attention (NKV < NH KV heads) against the fp32 flash op
 * with the same NKV, its blocks NH/NKV times smaller (run_case_gqa).
 * Output: TAP lines without numbers (test_seq.sh adds them and the plan).
 */
#include "backend/ops.h"
#include "comm/comm.h"
#include "core/core.h"
#include "parallel/seq.h"

#include <math.h>
#include <mpi.h>
#include "mpi_tap.h"
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static float *xalloc(size_t n)
{
    float *p = calloc(n ? n : 1, sizeof(float));
    if (!p) {
        fprintf(stderr, "test_seq: out of memory for %zu floats\n", n);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    return p;
}

static void fill_normal(float *x, size_t n, pt_rng *r)
{
    for (size_t i = 0; i < n; i++) x[i] = (float)pt_rng_normal(r);
}

/* rows [t0, t0+Tl) of every batch of full [B, T, W] -> loc [B, Tl, W] */
static void slice(float *loc, const float *full, int B, int T, int t0, int Tl, int W)
{
    for (int b = 0; b < B; b++)
        memcpy(loc + (size_t)b * Tl * W, full + ((size_t)b * T + t0) * W, sizeof(float) * (size_t)Tl * W);
}

/* Largest |got - want| over the `ncol` columns at `col` of rows of width W,
 * and largest |want - base| (base NULL: |want|) in *scale. */
static double maxdiff(const float *got, const float *want, const float *base, size_t rows, int W, int col,
                      int ncol, double *scale)
{
    double e = 0, m = 0;
    for (size_t n = 0; n < rows; n++)
        for (int c = col; c < col + ncol; c++) {
            size_t i = n * W + c;
            double d = fabs((double)got[i] - want[i]);
            double w = fabs((double)want[i] - (base ? base[i] : 0));
            if (d > e || d != d) e = d;
            if (w > m) m = w;
        }
    *scale = m;
    return e;
}

/* Relative error over all ranks: max error / max reference magnitude. */
static double rel_world(double e, double scale)
{
    e = max_world(e);
    scale = max_world(scale);
    return scale > 0 ? e / scale : e;
}

static void run_case(pt_comm *sp, int B, int NH, int HS, int Tl, unsigned long seed)
{
    const int p = sp->size, s = sp->rank, T = p * Tl, C = NH * HS, C3 = 3 * C;
    const double tol = 1e-5;
    char tag[96];
    snprintf(tag, sizeof tag, "sp=%d B=%d NH=%d HS=%d Tl=%d", p, B, NH, HS, Tl);
    pt_rng r;
    pt_rng_seed(&r, seed, (uint64_t)(((B * 131 + NH) * 131 + HS) * 131 + Tl));

    /* the full problem, identical on every rank */
    float *qkv = xalloc((size_t)B * T * C3), *dout = xalloc((size_t)B * T * C);
    float *dqkv0 = xalloc((size_t)B * T * C3), *dqkv_ref = xalloc((size_t)B * T * C3);
    float *out_ref = xalloc((size_t)B * T * C), *att_ref = xalloc((size_t)B * NH * T * T);
    float *fout = xalloc((size_t)B * T * C), *lse_ref = xalloc((size_t)B * NH * T);
    fill_normal(qkv, (size_t)B * T * C3, &r);
    fill_normal(dout, (size_t)B * T * C, &r);
    fill_normal(dqkv0, (size_t)B * T * C3, &r);
    memcpy(dqkv_ref, dqkv0, sizeof(float) * (size_t)B * T * C3);
    pt_cpu_ops_f32.attention_ref_fwd(out_ref, att_ref, qkv, B, T, NH, HS);
    pt_cpu_ops_f32.attention_ref_bwd(dqkv_ref, dout, qkv, att_ref, B, T, NH, HS);
    const pt_attn_dims full = {B, NH, HS, T, T, 0, 0, C3, C3, NH};
    pt_cpu_ops_f32.attention_fwd(fout, lse_ref, qkv, qkv + C, qkv + 2 * C, &full, 0);

    /* this rank's block and the reference restricted to it */
    const int t0 = s * Tl;
    float *lqkv = xalloc((size_t)B * Tl * C3), *ldout = xalloc((size_t)B * Tl * C);
    float *ldqkv = xalloc((size_t)B * Tl * C3), *ldqkv0 = xalloc((size_t)B * Tl * C3);
    float *lref_dqkv = xalloc((size_t)B * Tl * C3), *lref_out = xalloc((size_t)B * Tl * C);
    float *lref_lse = xalloc((size_t)B * NH * Tl);
    float *out = xalloc((size_t)B * Tl * C), *lse = xalloc((size_t)B * NH * Tl);
    slice(lqkv, qkv, B, T, t0, Tl, C3);
    slice(ldout, dout, B, T, t0, Tl, C);
    slice(ldqkv0, dqkv0, B, T, t0, Tl, C3);
    slice(ldqkv, dqkv0, B, T, t0, Tl, C3);
    slice(lref_dqkv, dqkv_ref, B, T, t0, Tl, C3);
    slice(lref_out, out_ref, B, T, t0, Tl, C);
    for (int bh = 0; bh < B * NH; bh++)
        memcpy(lref_lse + (size_t)bh * Tl, lse_ref + (size_t)bh * T + t0, sizeof(float) * (size_t)Tl);
    /* poison the outputs: the forward must write every element */
    for (size_t i = 0; i < (size_t)B * Tl * C; i++) out[i] = NAN;
    for (size_t i = 0; i < (size_t)B * NH * Tl; i++) lse[i] = NAN;

    const uint64_t S = (uint64_t)B * Tl * C * 4;
    pt_arena arena = {0};
    pt_comm_reset_stats(sp);
    int rc = pt_ring_attention_fwd(sp, &arena, &pt_cpu_ops_f32, out, lse, lqkv, B, Tl, NH, HS, NH);
    report(rc == PT_OK, "[%s] forward returns PT_OK%s%s", tag, rc ? ": " : "", rc ? pt_errmsg() : "");
    uint64_t fsent = pt_comm_sent_total(sp), fcalls = sp->stats.calls[PT_COLL_SEND];
    uint64_t fwant = p > 1 ? 2 * (uint64_t)(p - 1) : 0;
    size_t fleft = arena.cur;

    double sc, e = maxdiff(out, lref_out, NULL, (size_t)B * Tl, C, 0, C, &sc);
    double rel = rel_world(e, sc);
    report(rel <= tol, "[%s] out matches the materialised op (max err %.2e of max |out|)", tag, rel);
    e = maxdiff(lse, lref_lse, NULL, (size_t)B * NH, Tl, 0, Tl, &sc);
    rel = rel_world(e, sc);
    report(rel <= tol, "[%s] lse rows match the single-process flash op (max err %.2e)", tag, rel);
    report(fsent == fwant * S && fcalls == fwant,
           "[%s] forward sends %llu blocks, %llu bytes (want 2(sp-1), 0 if sp=1: %llu blocks of S = %llu bytes)", tag,
           (unsigned long long)fcalls, (unsigned long long)fsent, (unsigned long long)fwant,
           (unsigned long long)S);

    pt_comm_reset_stats(sp);
    rc = pt_ring_attention_bwd(sp, &arena, &pt_cpu_ops_f32, ldqkv, ldout, lqkv, out, lse, B, Tl, NH, HS, NH);
    report(rc == PT_OK, "[%s] backward returns PT_OK%s%s", tag, rc ? ": " : "", rc ? pt_errmsg() : "");
    uint64_t bsent = pt_comm_sent_total(sp), bcalls = sp->stats.calls[PT_COLL_SEND];
    uint64_t bwant = p > 1 ? 2 * (2 * (uint64_t)p - 1) : 0;
    static const char *part[3] = {"dq", "dk", "dv"};
    /* The scale is the largest increment of the whole dqkv, not of the part:
     * with HS = 1 and a few positions one part can be a near-cancelling sum
     * (dk = sum_t dpre_t q_t) far smaller than its terms, where two fp32
     * summation orders differ by more than 1e-5 of it (seen at sp=3, B = NH
     * = HS = Tl = 1).  dv (softmax-weighted, no cancellation) keeps the
     * scale at the terms' size. */
    double gscale;
    maxdiff(ldqkv, lref_dqkv, ldqkv0, (size_t)B * Tl, C3, 0, C3, &gscale);
    for (int k = 0; k < 3; k++) {
        e = maxdiff(ldqkv, lref_dqkv, ldqkv0, (size_t)B * Tl, C3, k * C, C, &sc);
        rel = rel_world(e, gscale);
        report(rel <= tol, "[%s] %s accumulated into dqkv matches the materialised op (max err %.2e of max |dqkv "
               "increment|)", tag, part[k],
               rel);
    }
    report(bsent == bwant * S && bcalls == bwant,
           "[%s] backward sends %llu blocks, %llu bytes (want 2(2sp-1), 0 if sp=1: %llu blocks of S = %llu bytes)", tag,
           (unsigned long long)bcalls, (unsigned long long)bsent, (unsigned long long)bwant,
           (unsigned long long)S);
    report(fleft == 0 && arena.cur == 0, "[%s] scratch returned to the arena (%zu, %zu bytes left; peak %zu)", tag,
           fleft, arena.cur, arena.peak);

    free(qkv); free(dout); free(dqkv0); free(dqkv_ref); free(out_ref); free(att_ref); free(fout); free(lse_ref);
    free(lqkv); free(ldout); free(ldqkv); free(ldqkv0); free(lref_dqkv); free(lref_out); free(lref_lse);
    free(out); free(lse);
}

/* The ring in bf16 (pt_cpu_ops_bf16: K/V blocks and their gradients travel
 * as bf16, S = B*Tl*C*2 bytes) against the bf16 table's flash op on the
 * whole sequence, on bf16 inputs: out, lse and the dqkv increment within
 * 2e-2 of the largest reference magnitude (each ring step's merge rounds
 * out to bf16 once more), and the byte counters. */
static void run_case_bf16(pt_comm *sp, int B, int NH, int HS, int Tl, unsigned long seed)
{
    const pt_ops *o = &pt_cpu_ops_bf16;
    const int p = sp->size, s = sp->rank, T = p * Tl, C = NH * HS, C3 = 3 * C;
    const double tol = 2e-2;
    char tag[96];
    snprintf(tag, sizeof tag, "bf16 sp=%d B=%d NH=%d HS=%d Tl=%d", p, B, NH, HS, Tl);
    pt_rng r;
    pt_rng_seed(&r, seed, 7 + (uint64_t)(((B * 131 + NH) * 131 + HS) * 131 + Tl));
    const size_t nq = (size_t)B * T * C3, no = (size_t)B * T * C, nl = (size_t)B * NH * T;
    float *qkv = xalloc(nq), *dout = xalloc(no), *dqkv = xalloc(nq), *out = xalloc(no), *lse = xalloc(nl);
    fill_normal(qkv, nq, &r);
    fill_normal(dout, no, &r);
    pt_bf16 *hq = calloc(nq, 2), *hd = calloc(no, 2), *hdq = calloc(nq, 2), *ho = calloc(no, 2);
    if (!hq || !hd || !hdq || !ho) MPI_Abort(MPI_COMM_WORLD, 1);
    o->convert(hq, PT_BF16, qkv, PT_F32, nq);
    o->convert(hd, PT_BF16, dout, PT_F32, no);
    const pt_attn_dims full = {B, NH, HS, T, T, 0, 0, C3, C3, NH};
    o->attention_fwd(ho, lse, hq, hq + C, hq + 2 * C, &full, 0);
    o->attention_bwd(hdq, hdq + C, hdq + 2 * C, hd, hq, hq + C, hq + 2 * C, ho, lse, &full);
    o->convert(out, PT_F32, ho, PT_BF16, no);
    o->convert(dqkv, PT_F32, hdq, PT_BF16, nq);
    /* this rank's block (as floats, then bf16) */
    const int t0 = s * Tl;
    const size_t lq = (size_t)B * Tl * C3, lo = (size_t)B * Tl * C, ll = (size_t)B * NH * Tl;
    float *fq = xalloc(lq), *fd = xalloc(lo), *rout = xalloc(lo), *rdq = xalloc(lq), *rlse = xalloc(ll);
    float *gout = xalloc(lo), *gdq = xalloc(lq), *glse = xalloc(ll);
    slice(fq, qkv, B, T, t0, Tl, C3);
    slice(fd, dout, B, T, t0, Tl, C);
    slice(rout, out, B, T, t0, Tl, C);
    slice(rdq, dqkv, B, T, t0, Tl, C3);
    for (int bh = 0; bh < B * NH; bh++) memcpy(rlse + (size_t)bh * Tl, lse + (size_t)bh * T + t0, sizeof(float) * Tl);
    pt_bf16 *bq = calloc(lq, 2), *bd = calloc(lo, 2), *bo = calloc(lo, 2), *bdq = calloc(lq, 2);
    if (!bq || !bd || !bo || !bdq) MPI_Abort(MPI_COMM_WORLD, 1);
    o->convert(bq, PT_BF16, fq, PT_F32, lq);
    o->convert(bd, PT_BF16, fd, PT_F32, lo);
    const uint64_t S = (uint64_t)B * Tl * C * 2;
    pt_arena arena = {0};
    pt_comm_reset_stats(sp);
    int rc = pt_ring_attention_fwd(sp, &arena, o, bo, glse, bq, B, Tl, NH, HS, 0);
    uint64_t fsent = pt_comm_sent_total(sp);
    pt_comm_reset_stats(sp);
    if (!rc) rc = pt_ring_attention_bwd(sp, &arena, o, bdq, bd, bq, bo, glse, B, Tl, NH, HS, 0);
    uint64_t bsent = pt_comm_sent_total(sp);
    o->convert(gout, PT_F32, bo, PT_BF16, lo);
    o->convert(gdq, PT_F32, bdq, PT_BF16, lq);
    double sc, e = maxdiff(gout, rout, NULL, (size_t)B * Tl, C, 0, C, &sc);
    const double eo = rel_world(e, sc);
    e = maxdiff(glse, rlse, NULL, (size_t)B * NH, Tl, 0, Tl, &sc);
    const double el = rel_world(e, sc);
    e = maxdiff(gdq, rdq, NULL, (size_t)B * Tl, C3, 0, C3, &sc);
    const double eq = rel_world(e, sc);
    const uint64_t fw = p > 1 ? 2 * (uint64_t)(p - 1) : 0, bw = p > 1 ? 2 * (2 * (uint64_t)p - 1) : 0;
    report(rc == PT_OK && eo <= tol && el <= tol && eq <= tol && fsent == fw * S && bsent == bw * S &&
               arena.cur == 0,
           "[%s] ring == the bf16 flash op on the whole sequence: out %.1e, lse %.1e, dqkv %.1e (bound %.0e); "
           "%llu + %llu B sent (want %llu + %llu blocks of %llu B)%s%s", tag, eo, el, eq, tol,
           (unsigned long long)fsent, (unsigned long long)bsent, (unsigned long long)fw, (unsigned long long)bw,
           (unsigned long long)S, rc ? ": " : "", rc ? pt_errmsg() : "");
    free(qkv), free(dout), free(dqkv), free(out), free(lse), free(hq), free(hd), free(hdq), free(ho);
    free(fq), free(fd), free(rout), free(rdq), free(rlse), free(gout), free(gdq), free(glse);
    free(bq), free(bd), free(bo), free(bdq);
}

/* Grouped-query attention round the ring (Ainslie et al. 2023): qkv [B, T,
 * W] as [NH q heads | NKV k heads | NKV v heads], W = (NH + 2 NKV) HS; the
 * ring on this rank's block against pt_cpu_ops_f32's flash op with the same
 * NKV on the whole sequence (itself held to a double reference of repeat_kv
 * attention by tests/unit/test_ops_attention): out, lse and the dqkv
 * increment (q, k, v parts) within 1e-5 of the largest reference
 * magnitude, and the bytes sent: blocks of S = B*Tl*NKV*HS*4, NH/NKV times
 * fewer than MHA's. */
static void run_case_gqa(pt_comm *sp, int B, int NH, int NKV, int HS, int Tl, unsigned long seed)
{
    const pt_ops *o = &pt_cpu_ops_f32;
    const int p = sp->size, s = sp->rank, T = p * Tl, C = NH * HS, KVC = NKV * HS, W = C + 2 * KVC;
    const double tol = 1e-5;
    char tag[96];
    snprintf(tag, sizeof tag, "GQA sp=%d B=%d NH=%d NKV=%d HS=%d Tl=%d", p, B, NH, NKV, HS, Tl);
    pt_rng r;
    pt_rng_seed(&r, seed, 11 + (uint64_t)((((B * 131 + NH) * 131 + NKV) * 131 + HS) * 131 + Tl));
    const size_t nq = (size_t)B * T * W, no = (size_t)B * T * C, nl = (size_t)B * NH * T;
    float *qkv = xalloc(nq), *dout = xalloc(no), *dqkv = xalloc(nq), *out = xalloc(no), *lse = xalloc(nl);
    float *dqkv0 = xalloc(nq);
    fill_normal(qkv, nq, &r);
    fill_normal(dout, no, &r);
    fill_normal(dqkv0, nq, &r);
    memcpy(dqkv, dqkv0, sizeof(float) * nq);
    const pt_attn_dims full = {B, NH, HS, T, T, 0, 0, W, W, NKV};
    o->attention_fwd(out, lse, qkv, qkv + C, qkv + C + KVC, &full, 0);
    o->attention_bwd(dqkv, dqkv + C, dqkv + C + KVC, dout, qkv, qkv + C, qkv + C + KVC, out, lse, &full);
    const int t0 = s * Tl;
    const size_t lq = (size_t)B * Tl * W, lo = (size_t)B * Tl * C, ll = (size_t)B * NH * Tl;
    float *fq = xalloc(lq), *fd = xalloc(lo), *rout = xalloc(lo), *rdq = xalloc(lq), *rdq0 = xalloc(lq);
    float *rlse = xalloc(ll), *gout = xalloc(lo), *gdq = xalloc(lq), *glse = xalloc(ll);
    slice(fq, qkv, B, T, t0, Tl, W);
    slice(fd, dout, B, T, t0, Tl, C);
    slice(rout, out, B, T, t0, Tl, C);
    slice(rdq, dqkv, B, T, t0, Tl, W);
    slice(rdq0, dqkv0, B, T, t0, Tl, W);
    slice(gdq, dqkv0, B, T, t0, Tl, W);
    for (int bh = 0; bh < B * NH; bh++) memcpy(rlse + (size_t)bh * Tl, lse + (size_t)bh * T + t0, sizeof(float) * Tl);
    for (size_t i = 0; i < lo; i++) gout[i] = NAN;
    const uint64_t S = (uint64_t)B * Tl * KVC * 4;
    pt_arena arena = {0};
    pt_comm_reset_stats(sp);
    int rc = pt_ring_attention_fwd(sp, &arena, o, gout, glse, fq, B, Tl, NH, HS, NKV);
    uint64_t fsent = pt_comm_sent_total(sp);
    pt_comm_reset_stats(sp);
    if (!rc) rc = pt_ring_attention_bwd(sp, &arena, o, gdq, fd, fq, gout, glse, B, Tl, NH, HS, NKV);
    uint64_t bsent = pt_comm_sent_total(sp);
    double sc, e = maxdiff(gout, rout, NULL, (size_t)B * Tl, C, 0, C, &sc);
    const double eo = rel_world(e, sc);
    e = maxdiff(glse, rlse, NULL, (size_t)B * NH, Tl, 0, Tl, &sc);
    const double el = rel_world(e, sc);
    double gscale, eg[3];
    maxdiff(gdq, rdq, rdq0, (size_t)B * Tl, W, 0, W, &gscale);
    const int col[3] = {0, C, C + KVC}, ncol[3] = {C, KVC, KVC};
    for (int k = 0; k < 3; k++)
        eg[k] = rel_world(maxdiff(gdq, rdq, rdq0, (size_t)B * Tl, W, col[k], ncol[k], &sc), gscale);
    const uint64_t fw = p > 1 ? 2 * (uint64_t)(p - 1) : 0, bw = p > 1 ? 2 * (2 * (uint64_t)p - 1) : 0;
    report(rc == PT_OK && eo <= tol && el <= tol && eg[0] <= tol && eg[1] <= tol && eg[2] <= tol &&
               fsent == fw * S && bsent == bw * S && arena.cur == 0,
           "[%s] ring == the flash op with NKV on the whole sequence: out %.1e, lse %.1e, dq %.1e, dk %.1e, dv %.1e "
           "(bound %.0e); %llu + %llu B sent (want %llu + %llu blocks of S = B*Tl*NKV*HS*4 = %llu B)%s%s",
           tag, eo, el, eg[0], eg[1], eg[2], tol, (unsigned long long)fsent, (unsigned long long)bsent,
           (unsigned long long)fw, (unsigned long long)bw, (unsigned long long)S, rc ? ": " : "",
           rc ? pt_errmsg() : "");
    free(qkv), free(dout), free(dqkv), free(out), free(lse), free(dqkv0), free(fq), free(fd), free(rout), free(rdq);
    free(rdq0), free(rlse), free(gout), free(gdq), free(glse);
}

/* Wall time of forward+backward: the op on the full sequence (every rank
 * alone) and the ring on this rank's block.  Printed, never asserted. */
static void bench(pt_comm *sp, int B, int NH, int HS, int T)
{
    const int p = sp->size, C = NH * HS, C3 = 3 * C;
    if (T % p) {
        if (tap_rank0) printf("# bench: T=%d is not a multiple of sp=%d\n", T, p);
        return;
    }
    const int Tl = T / p;
    pt_rng r;
    pt_rng_seed(&r, 1234, 0);
    float *qkv = xalloc((size_t)B * T * C3), *dout = xalloc((size_t)B * T * C), *dqkv = xalloc((size_t)B * T * C3);
    float *out = xalloc((size_t)B * T * C), *lse = xalloc((size_t)B * NH * T);
    fill_normal(qkv, (size_t)B * T * C3, &r);
    fill_normal(dout, (size_t)B * T * C, &r);
    const pt_attn_dims full = {B, NH, HS, T, T, 0, 0, C3, C3, NH};
    pt_arena arena = {0};
    const int reps = 5;
    double best_op = 1e30, best_ring = 1e30;
    for (int i = 0; i < reps; i++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t = MPI_Wtime();
        if (tap_rank0) {
            pt_cpu_ops_f32.attention_fwd(out, lse, qkv, qkv + C, qkv + 2 * C, &full, 0);
            pt_cpu_ops_f32.attention_bwd(dqkv, dqkv + C, dqkv + 2 * C, dout, qkv, qkv + C, qkv + 2 * C, out, lse, &full);
        }
        t = MPI_Wtime() - t;
        if (t < best_op) best_op = t;
        MPI_Barrier(MPI_COMM_WORLD);
        t = MPI_Wtime();
        int rc = pt_ring_attention_fwd(sp, &arena, &pt_cpu_ops_f32, out, lse, qkv, B, Tl, NH, HS, NH);
        if (!rc) rc = pt_ring_attention_bwd(sp, &arena, &pt_cpu_ops_f32, dqkv, dout, qkv, out, lse, B, Tl, NH, HS,
                                                  NH);
        MPI_Barrier(MPI_COMM_WORLD);
        t = MPI_Wtime() - t;
        if (rc && tap_rank0) printf("# bench: %s\n", pt_errmsg());
        if (t < best_ring) best_ring = t;
    }
    if (tap_rank0)
        printf("# bench B=%d NH=%d HS=%d T=%d: op fwd+bwd %.4f s (1 rank), ring sp=%d fwd+bwd %.4f s (best of %d)\n",
               B, NH, HS, T, best_op, p, best_ring, reps);
    free(qkv); free(dout); free(dqkv); free(out); free(lse);
}

int main(int argc, char **argv)
{
    tap_init(&argc, &argv);
    pt_comm sp;
    if (pt_comm_wrap(&sp, MPI_COMM_WORLD, "sp")) {
        if (tap_rank0) printf("not ok - wrap MPI_COMM_WORLD: %s\n", pt_errmsg());
        MPI_Finalize();
        return 1;
    }
    if (argc == 6 && !strcmp(argv[1], "--bench")) {
        bench(&sp, atoi(argv[2]), atoi(argv[3]), atoi(argv[4]), atoi(argv[5]));
        MPI_Finalize();
        return 0;
    }
    if (argc != 1) {
        if (tap_rank0) fprintf(stderr, "usage: test_seq | test_seq --bench B NH HS T\n");
        MPI_Finalize();
        return 2;
    }

    const unsigned long seed = tap_seed();
    if (tap_rank0) printf("# sp=%d seed=%lu (PTRAIN_TEST_SEED reproduces)\n", sp.size, seed);

    /* B, NH, HS, Tl: Tl = 1 (one token per rank), HS = 1, odd sizes, and a
     * block longer than the flash tile (not a multiple of it) */
    static const int shapes[][4] = {{1, 1, 1, 1}, {2, 3, 4, 1}, {2, 2, 8, 3}, {1, 4, 16, 5}, {3, 2, 32, 7},
                                    {1, 2, 8, PT_FLASH_TILE + 13}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        run_case(&sp, shapes[i][0], shapes[i][1], shapes[i][2], shapes[i][3], seed);
    run_case_bf16(&sp, 2, 3, 16, 5, seed);
    run_case_bf16(&sp, 1, 2, 32, PT_FLASH_TILE + 13, seed);
    /* GQA: MQA (NKV 1), groups of 2 and 4 query heads, a block past the tile */
    run_case_gqa(&sp, 2, 4, 1, 8, 3, seed);
    run_case_gqa(&sp, 1, 8, 4, 5, 7, seed);
    run_case_gqa(&sp, 2, 8, 2, 16, PT_FLASH_TILE + 13, seed);

    /* bad sizes are refused before any communication */
    pt_arena arena = {0};
    float dummy[8] = {0};
    int rc = pt_ring_attention_fwd(&sp, &arena, &pt_cpu_ops_f32, dummy, dummy, dummy, 1, 0, 1, 1, 0);
    report(rc == PT_EINVAL && strstr(pt_errmsg(), "Tl=0"), "Tl=0 is refused with PT_EINVAL (%s)", pt_errmsg());
    rc = pt_ring_attention_bwd(&sp, &arena, &pt_cpu_ops_f32, dummy, dummy, dummy, dummy, dummy, 1, 1, 0, 1, 0);
    report(rc == PT_EINVAL && strstr(pt_errmsg(), "NH=0"), "NH=0 is refused with PT_EINVAL (%s)", pt_errmsg());
    rc = pt_ring_attention_fwd(&sp, &arena, &pt_cpu_ops_f32, dummy, dummy, dummy, 1, 1, 4, 1, 3);
    report(rc == PT_EINVAL && strstr(pt_errmsg(), "NKV=3"), "NKV=3 for NH=4 is refused with PT_EINVAL (%s)",
           pt_errmsg());

    pt_comm_free(&sp);
    MPI_Finalize();
    return tap_failures ? 1 : 0;
}
