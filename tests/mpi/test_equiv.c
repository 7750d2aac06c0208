/* SPDX-License-Identifier: MIT */
/* Every parallel layout reproduces the single-process run.
 *
 * usage: test_equiv MODE DP TP [DEPTH SP ORDER STEPS PRECISION MODEL]
 *   (under mpirun -np DP*TP*SP; MODE 1d, 2d, 2.5d or 3d; MODEL a
 *   pt_model_shape_parse spelling, default 2,4,32,8,97: GPT-2 L2 H4 C32
 *   T8 V97; a llama: shape runs the Llama family the same way)
 *
 * Every rank also builds the reference model (dp=1, tp=1, sp=1) on
 * MPI_COMM_SELF with the whole global batch.  For several optimizer steps
 * on fresh random tokens, the test compares the loss, every gradient (the
 * reference's full gradient sliced by the layout's own param_slice) and,
 * at the end, every parameter, to fp32 tolerance.
 *
 * It also checks the byte counters of one forward+backward against the
 * analytic volume of the layout (per rank, modelled ring algorithm: an
 * allreduce of b bytes over p ranks sends 2(p-1)/p b, allgather /
 * reduce-scatter / broadcast / reduce of b (full) bytes (p-1)/p b):
 *   1d  (Megatron)  tp group: 4L+2 allreduces of Sx = [B, T, C] fp32
 *       (embedding, 2 per block forward and backward, head dX; Llama 5L+2:
 *       its q and k|v projections' dX are two allreduces) plus the
 *       cross-entropy's [N] max and [2N] (sum, target) allreduces; per
 *       allreduce 2(p-1)/p Sx, i.e. Colossal-AI Table 1's 2(p-1)Sx summed
 *       over the p ranks.
 *   2d/2.5d (SUMMA) per linear 3(q-1)(Sx+Sw) with Sx, Sw the local input
 *       and weight blocks: Table 1's 3(j-1)(Sx+Sw), and with 2.5D's Sx =
 *       [B/(dq), T, I/q] Table 1's 3(k-1)(Sx/d+Sw).  Checked per linear on
 *       each of the four linears of a block.
 *   3d  per linear (l-1)/l (3Sx + 3Sw + 2Sy) with the gathered blocks Sx =
 *       [B/l, T, I/l], Sw = [O/l, I/l], Sy = [B/l, T, O/l]: Table 1's
 *       2(l-1)/l (Sx+Sw+Sy) plus one more allgather of X and of W in the
 *       backward (tp3d.c keeps only the local blocks between forward and
 *       backward).
 *   gradient sync: one allreduce per sync group of its parameters' floats
 *       (dp x sp, plus 2.5D's depth: Tesseract's dW allreduce over depth).
 * Output: TAP lines without numbers (the driver script adds the plan).
 */
#include "comm/comm.h"
#include "core/core.h"
#include "model/gpt.h"
#include "train/train.h"
#include "parallel/context.h"
#include "ref_slice.h"

#include <math.h>
#include <mpi.h>
#include "mpi_tap.h"
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>


/* Is element j of parameter p part of a key bias?  The key bias has an
 * exactly zero gradient in exact arithmetic (softmax is invariant to adding
 * the same q.b_k to every score of a row), so its float gradient must be
 * rounding noise: checked below as a property of the attention backward. */
static int is_key_bias(const pt_param *p, int64_t j)
{
    size_t n = strlen(p->name);
    int64_t third = p->shard.numel / 3; /* local qkv bias blocks hold q|k|v pieces */
    if (n >= 5 && strcmp(p->name + n - 5, ".kv.b") == 0) return j < p->shard.numel / 2; /* llama: k|v pieces */
    return n >= 5 && strcmp(p->name + n - 5, "qkv.b") == 0 && j >= third && j < 2 * third;
}

/* a q, k or v bias (GPT-2's qkv.b; Llama's q.b and kv.b) */
static int is_qkv_bias(const pt_param *p)
{
    size_t n = strlen(p->name);
    return n >= 4 && (strcmp(p->name + n - 4, ".q.b") == 0 || strcmp(p->name + n - 4, "kv.b") == 0);
}

/* max over parameters of max|local - slice(ref)| / (max|slice(ref)| + tiny) */
static double compare(const pt_gpt *m, const pt_gpt *ref, int grads, const pt_pctx *c, char *worst, size_t wn)
{
    double worst_err = 0;
    for (int i = 0; i < m->nparams; i++) {
        const pt_param *p = &m->params[i], *q = &ref->params[i];
        /* the reference's full tensor has the unpadded vocabulary: padded to m's rows */
        float *slice = ref_slice(m, c, p, q, grads);
        const float *a = grads ? p->grad : p->data;
        double diff = 0, mag = 0;
        for (int64_t j = 0; j < p->shard.numel; j++) {
            double d = fabs((double)a[j] - slice[j]);
            if (d > diff) diff = d;
            if (fabs(slice[j]) > mag) mag = fabs(slice[j]);
        }
        double err = diff / (mag + 1e-12);
        if (mag == 0 && diff == 0) err = 0;
        if (err > worst_err) {
            worst_err = err;
            snprintf(worst, wn, "%s", p->name);
        }
        free(slice);
    }
    return worst_err;
}

/* max over parameters of max |local - slice(ref)| */
static double compare_abs(const pt_gpt *m, const pt_gpt *ref, const pt_pctx *c, char *worst, size_t wn)
{
    double worst_d = 0;
    for (int i = 0; i < m->nparams; i++) {
        const pt_param *p = &m->params[i], *q = &ref->params[i];
        float *slice = ref_slice(m, c, p, q, 0);
        for (int64_t j = 0; j < p->shard.numel; j++) {
            double d = fabs((double)p->data[j] - slice[j]);
            if (d > worst_d) {
                worst_d = d;
                snprintf(worst, wn, "%s", p->name);
            }
        }
        free(slice);
    }
    return worst_d;
}

/* max over parameters of ||local - slice(ref)|| / ||slice(ref)|| (bf16
 * runs: the norm of the difference, which rounding spreads over every
 * element, against the tensor's norm) */
static double compare_norm(const pt_gpt *m, const pt_gpt *ref, int grads, const pt_pctx *c, char *worst, size_t wn)
{
    double worst_err = 0;
    for (int i = 0; i < m->nparams; i++) {
        const pt_param *p = &m->params[i], *q = &ref->params[i];
        float *slice = ref_slice(m, c, p, q, grads);
        const float *a = grads ? p->grad : p->data;
        double e = 0, s = 0;
        for (int64_t j = 0; j < p->shard.numel; j++)
            e += ((double)a[j] - slice[j]) * ((double)a[j] - slice[j]), s += (double)slice[j] * slice[j];
        double err = s > 0 ? sqrt(e / s) : sqrt(e);
        if (err != err) err = INFINITY;
        if (err > worst_err) {
            worst_err = err;
            snprintf(worst, wn, "%s", p->name);
        }
        free(slice);
    }
    return worst_err;
}

/* Modelled bytes of one collective call (the comm layer's ring model). */
static uint64_t ring(uint64_t bytes, uint64_t p, uint64_t factor) { return factor * (p - 1) * bytes / p; }

static uint64_t tp_sent(const pt_pctx *c)
{
    uint64_t s = pt_comm_sent_total(&c->tp);
    for (int k = 1; k < (1 << PT_TP_AXES); k++) s += pt_comm_sent_total(&c->tp_sub[k]);
    return s;
}

/* Expected per-rank bytes of one linear's forward + backward: activations
 * and weight copies of e bytes (4 fp32, 2 bf16), dW partials fp32. */
static uint64_t linear_bytes(const pt_pctx *c, const pt_linear *l, int N, uint64_t e)
{
    const uint64_t q = (uint64_t)c->tp_dims[1], ll = (uint64_t)c->tp_dims[0];
    switch (c->plan.mode) {
    case PT_MODE_1D: case PT_MODE_OFF: {
        uint64_t p = (uint64_t)c->plan.tp, Sx = (uint64_t)N * l->in * e;
        if (l->role == PT_LINEAR_ROW) Sx = (uint64_t)N * l->out * e; /* forward allreduce of Y */
        return ring(Sx, p, 2);
    }
    case PT_MODE_2D: case PT_MODE_2P5D: {
        /* X: q broadcasts forward, q for dW, q reduces of dX; W: q broadcasts forward and for
         * dX; the dW partials' q reduces in fp32.  At e = 4: 3(q-1)(Sx+Sw) */
        uint64_t nw = (uint64_t)l->out_local * l->in_local, Sx = (uint64_t)N * l->in_local * e;
        return 3 * q * ring(Sx, q, 1) + 2 * q * ring(nw * e, q, 1) + q * ring(nw * 4, q, 1);
    }
    case PT_MODE_3D: {
        /* gathered blocks: X [l*N, I/l], W [O/l, I/l], Y [l*N, O/l]; W's reduce-scatter of dW in fp32 */
        uint64_t Sx = ll * N * l->in_local * e, nw = (uint64_t)(l->out / ll) * (l->in / ll),
                 Sy = ll * N * l->out_local * e;
        return 3 * ring(Sx, ll, 1) + 2 * ring(nw * e, ll, 1) + ring(nw * 4, ll, 1) + 2 * ring(Sy, ll, 1);
    }
    default:
        return 0;
    }
}

int main(int argc, char **argv)
{
    tap_init(&argc, &argv);
    int ws;
    MPI_Comm_size(MPI_COMM_WORLD, &ws);
    if (argc < 4) {
        if (tap_rank0) fprintf(stderr, "usage: test_equiv MODE DP TP [DEPTH SP ORDER STEPS PRECISION]\n");
        MPI_Finalize();
        return 2;
    }
    pt_plan plan, rplan;
    pt_plan_default(&plan);
    if (pt_mode_parse(argv[1], &plan.mode) < 0) {
        if (tap_rank0) fprintf(stderr, "bad mode %s\n", argv[1]);
        MPI_Finalize();
        return 2;
    }
    plan.dp = atoi(argv[2]);
    plan.tp = atoi(argv[3]);
    plan.tp_depth = argc > 4 ? atoi(argv[4]) : 1;
    plan.sp = argc > 5 ? atoi(argv[5]) : 1;
    /* ORDER or ORDER/TPO: the rank order and the tp axes' order */
    const char *order = argc > 6 ? argv[6] : "DPT";
    snprintf(plan.rank_order, sizeof plan.rank_order, "%.3s", order);
    if (strlen(order) == 7 && order[3] == '/') snprintf(plan.tp_order, sizeof plan.tp_order, "%.3s", order + 4);
    int steps = argc > 7 ? atoi(argv[7]) : 3;
    if (argc > 8 && pt_precision_parse("precision", argv[8], &plan.precision) < 0) {
        if (tap_rank0) fprintf(stderr, "bad precision %s\n", argv[8]);
        MPI_Finalize();
        return 2;
    }
    const int dp = plan.dp, tp = plan.tp, sp = plan.sp, bf = plan.precision == PT_PREC_BF16;

    const unsigned long seed = tap_seed();
    char summary[160];
    pt_plan_summary(&plan, summary, sizeof summary);
    if (tap_rank0) printf("# %s steps=%d seed=%lu (PTRAIN_TEST_SEED reproduces)\n", summary, steps, seed);

    /* small model; V=97 makes vocabulary padding real for every layout */
    pt_gpt_config cfg;
    if (pt_model_shape_parse("MODEL", argc > 9 ? argv[9] : "2,4,32,8,97", &cfg) < 0) {
        if (tap_rank0) fprintf(stderr, "%s\n", pt_errmsg());
        MPI_Finalize();
        return 2;
    }
    const int llama = cfg.family == PT_FAMILY_LLAMA;
    const int Bdp = 4, B = Bdp * dp, T = cfg.seq_len, L = cfg.n_layer;

    pt_plan_default(&rplan);
    rplan.precision = plan.precision; /* the single-process run of the same precision */
    pt_pctx ctx, rctx;
    if (pt_pctx_init(&ctx, MPI_COMM_WORLD, &plan, -1) || pt_pctx_init(&rctx, MPI_COMM_SELF, &rplan, -1)) {
        if (tap_rank0) printf("not ok - context: %s\n", pt_errmsg());
        MPI_Finalize();
        return 1;
    }
    const pt_backend *be = pt_backend_get("cpu");
    be->set_threads(1);
    pt_arena arena = {0}, rarena = {0};
    pt_gpt m, ref;
    pt_train tm, tref; /* the training step's registry, sync and update (lib/train) */

    /* AdamW with eps = 1e-2.  With the default eps (1e-8) the first update is
     * about lr * sign(g): an element whose gradient is at rounding level can
     * flip sign between layouts and move 2 lr apart, a chaotic amplification
     * that no fixed tolerance separates from a bug.  A large eps keeps the
     * same code path (moments, bias correction, decoupled weight decay,
     * clipping) but makes the update Lipschitz in g (slope lr/eps = 0.1), so
     * rounding differences shrink instead of growing and the bounds stay
     * tight over every step. */
    pt_adamw_cfg opt;
    pt_adamw_default(&opt);
    opt.eps = 1e-2f;
    int rc = pt_gpt_create(&m, &cfg, &ctx, be, &arena, Bdp, T, seed);
    if (!rc) rc = pt_gpt_create(&ref, &cfg, &rctx, be, &rarena, B, T, seed);
    if (!rc) rc = pt_train_create(&tm, &m, &opt, NULL);
    if (!rc) rc = pt_train_create(&tref, &ref, &opt, NULL);
    report(rc == PT_OK, "models built (%s): %s", summary, rc ? pt_errmsg() : "");
    if (rc) { MPI_Finalize(); return 1; }

    char worst[32] = "";
    double e = max_world(compare(&m, &ref, 0, &ctx, worst, sizeof worst));
    report(e == 0, "initial parameters are the reference's shards exactly (max rel err %.2e)", e);
    int32_t *tok = malloc(sizeof(int32_t) * (size_t)(B * T + 1));
    pt_rng r;
    pt_rng_seed(&r, seed, 99);
    const int N = m.g.Bl * m.Tl; /* rows this rank holds */
    const uint64_t ea = m.ea;    /* bytes of an activation element */
    /* Bounds.  fp32: summation order is the only difference.  bf16: the
     * layouts round activations at other places than the single process
     * (a tp sum rounds each pairwise sum, a SUMMA step its partial product),
     * so loss, gradients and parameters agree to bf16 tolerance: the loss
     * to 1e-3, each gradient tensor by norm to 3e-2, the gradient norm to
     * 5e-3, parameters after the steps to 2e-4 absolute (measured: 2e-5,
     * 1.4e-2, 6e-4, 8e-5; a missing or wrong reduction is off by O(1)
     * either way). */
    const double ltol = bf ? 1e-3 : 2e-6, gtol = bf ? 3e-2 : 1e-4, ntol = bf ? 5e-3 : 1e-5, ptol = bf ? 2e-4 : 1e-6;
    for (int s = 0; s < steps; s++) {
        for (int i = 0; i <= B * T; i++) tok[i] = (int32_t)(pt_rng_u64(&r) % (uint64_t)cfg.vocab);
        const int32_t *in = tok, *tg = tok + 1; /* targets: next token */
        float loss, rloss;
        pt_pctx_reset_stats(&ctx);
        /* pt_train_step's pieces, so the synchronised gradients can be
         * compared before the update */
        pt_train_zero_grad(&tm);
        pt_train_zero_grad(&tref);
        rc = pt_train_forward_backward(&tref, in, tg, &rloss);
        if (!rc) rc = pt_train_sync(&tref);
        if (!rc) rc = pt_train_forward_backward(&tm, in + ctx.dp_rank * Bdp * T, tg + ctx.dp_rank * Bdp * T, &loss);
        if (!rc) rc = pt_train_sync(&tm);
        if (rc) { report(0, "step %d: %s", s, pt_errmsg()); break; }
        double le = fabs((double)loss - rloss) / fabs(rloss);
        report(le < ltol, "step %d: loss %.6f equals reference %.6f (rel err %.2e < %.0e)", s + 1, loss, rloss, le, ltol);
        e = max_world_named(bf ? compare_norm(&m, &ref, 1, &ctx, worst, sizeof worst)
                               : compare(&m, &ref, 1, &ctx, worst, sizeof worst),
                            worst, sizeof worst);
        /* fp32 summation order is the only difference: 1e-4 of each tensor's
         * largest gradient (a missing or wrong reduction is off by O(1), e.g.
         * 0.5 with a row-parallel allreduce or the 2.5D depth sum left out);
         * bf16: the difference's norm over the tensor's */
        report(e < gtol, "step %d: every gradient equals the reference's shard (max rel err %s %.2e < %.0e, worst %s)",
               s + 1, bf ? "by norm" : "", e, gtol, worst);

        if (s == 0) {
            /* gradient synchronisation: one allreduce per sync group */
            int ok = 1;
            for (int k = 0; k < tm.nbuckets; k++) {
                const pt_comm *g = tm.buckets[k].comm;
                uint64_t want = g->size > 1 ? ring(tm.buckets[k].n * 4, (uint64_t)g->size, 2) : 0;
                if (pt_comm_sent_total(g) != want || g->stats.calls[PT_COLL_ALLREDUCE] != (g->size > 1 ? 1u : 0u)) ok = 0;
            }
            report(ok, "gradient sync: one allreduce per sync group (%d groups; %zu floats in all)", tm.nbuckets, tm.nfloats);
            if (plan.mode == PT_MODE_1D && tp > 1) {
                const uint64_t Sx = (uint64_t)N * cfg.n_embd * ea, p = (uint64_t)tp;
                uint64_t expect = (uint64_t)((llama ? 5 : 4) * L + 2) * ring(Sx, p, 2) + ring(4 * (uint64_t)N, p, 2) +
                                  ring(8 * (uint64_t)N, p, 2);
                report(tp_sent(&ctx) == expect, "tp byte counters equal the 1D volume: %llu sent B (expected %llu)",
                       (unsigned long long)tp_sent(&ctx), (unsigned long long)expect);
            }
            if (sp > 1) {
                /* one K or V block of the rank's KV heads (NKV/tp under 1d tp) */
                const uint64_t S = (uint64_t)m.g.Bl * m.Tl * m.KVl * ea; /* NKV heads: KVl = Cl for GPT-2 */
                uint64_t expect = (uint64_t)L * (2 * (uint64_t)(sp - 1) + 2 * (2 * (uint64_t)sp - 1)) * S;
                report(pt_comm_sent_total(&ctx.sp) == expect,
                       "sp ring attention moved L*(2(sp-1) + 2(2sp-1)) K/V blocks: %llu B (expected %llu)",
                       (unsigned long long)pt_comm_sent_total(&ctx.sp), (unsigned long long)expect);
            }
        }
        float lr = 1e-3f;
        double n1, n2;
        rc = pt_train_update(&tm, lr, &n1);
        if (!rc) rc = pt_train_update(&tref, lr, &n2);
        if (rc) { report(0, "optimizer step %d: %s", s + 1, pt_errmsg()); break; }
        report(fabs(n1 - n2) / n2 < ntol, "step %d: global gradient norm %.6f equals reference %.6f", s + 1, n1, n2);
    }
    /* key biases: gradient is noise far below the other biases', drift bounded by lr*steps */
    double kb_grad = 0, qkvb_grad = 0, kb_drift = 0;
    for (int i = 0; i < m.nparams; i++) {
        const pt_param *p = &m.params[i];
        if (!is_qkv_bias(p)) continue;
        for (int64_t j = 0; j < p->shard.numel; j++) {
            if (is_key_bias(p, j)) {
                kb_grad = fmax(kb_grad, fabs(p->grad[j]));
                kb_drift = fmax(kb_drift, fabs(p->data[j]));
            } else {
                qkvb_grad = fmax(qkvb_grad, fabs(p->grad[j]));
            }
        }
    }
    kb_grad = max_world(kb_grad);
    qkvb_grad = max_world(qkvb_grad);
    kb_drift = max_world(kb_drift);
    /* (bf16 rounds the scores' inputs, so the invariance holds to bf16's 1e-2) */
    /* (not for Llama: RoPE rotates k + b_k by the key's position, so q . R_j b_k
     * differs between keys and the key bias has a true gradient) */
    if (!llama)
        report(kb_grad < (bf ? 1e-2 : 1e-4) * qkvb_grad && kb_drift <= 1.001e-3 * steps,
               "key-bias gradients are rounding noise (%.1e vs %.1e for q/v biases) and drift <= lr*steps (%.1e)",
               kb_grad, qkvb_grad, kb_drift);
    /* Parameters: absolute bound 1e-6 (bf16: 2e-4), far below one step (lr =
     * 1e-3) and the init scale (2e-2) that a wrongly sharded or reduced
     * tensor is off by. */
    double absdiff = max_world_named(compare_abs(&m, &ref, &ctx, worst, sizeof worst), worst, sizeof worst);
    report(absdiff <= ptol, "after %d AdamW steps every parameter equals the reference's shard (max abs diff %.2e <= %.0e, worst %s)",
           steps, absdiff, ptol, worst);
    /* vocabulary padding rows never train: slice a mask of the padded rows */
    {
        const pt_param *p = &m.params[0];
        float *full = calloc((size_t)(p->rows * p->cols), sizeof(float));
        float *mask = malloc(sizeof(float) * (size_t)p->shard.numel);
        for (int64_t v = cfg.vocab; v < p->rows; v++)
            for (int64_t c = 0; c < p->cols; c++) full[v * p->cols + c] = 1;
        m.layout->param_slice(m.ops, &ctx, p->cls, full, mask, p->rows, p->cols);
        double pad = 0;
        for (int64_t j = 0; j < p->shard.numel; j++)
            if (mask[j] != 0) pad = fmax(pad, fabs(p->grad[j]));
        report(max_world(pad) == 0, "padded vocabulary rows (%d..%d) get zero gradient", cfg.vocab, m.g.Vp - 1);
        free(mask);
    }

    /* A pipeline stage is a block range: the model run by pieces, blocks
     * [0, 1) then [1, L) with the boundary activation and its gradient
     * copied into buffers of their own (as a stage would receive them, and
     * block 0's own output overwritten with NaN), gives the whole model's
     * loss and every gradient bit for bit. */
    if (rc == PT_OK && L >= 2) {
        const size_t nb = (size_t)N * m.g.Cr;
        void *xb = malloc(nb * m.ea), *db = malloc(nb * m.ea), *x;
        float *gw = malloc(tm.nfloats * sizeof(float));
        float lw = 0, ls = 0;
        const int32_t *in = tok + ctx.dp_rank * Bdp * T, *tg = tok + 1 + ctx.dp_rank * Bdp * T;
        pt_train_zero_grad(&tm);
        rc = pt_train_forward_backward(&tm, in, tg, &lw);
        if (!rc) memcpy(gw, tm.grads_memory, tm.nfloats * sizeof(float));
        pt_train_zero_grad(&tm);
        if (!rc) rc = pt_gpt_set_batch(&m, in, tg);
        if (!rc) rc = pt_gpt_embed_forward(&m, &x);
        if (!rc) rc = pt_gpt_blocks_forward(&m, 0, 1, x, &x);
        if (!rc) memcpy(xb, x, nb * m.ea); /* stage 0 -> stage 1 */
        if (!rc) m.ops->fill(m.layers[0].res3, NAN, nb, m.act); /* stage 1 must read its input buffer, not block 0's */
        if (!rc) rc = pt_gpt_blocks_forward(&m, 1, L, xb, &x);
        if (!rc) rc = pt_gpt_head_forward(&m, x, &ls);
        if (!rc) rc = pt_gpt_head_backward(&m, db);
        if (!rc) rc = pt_gpt_blocks_backward(&m, 1, L, db);
        if (!rc) rc = pt_gpt_blocks_backward(&m, 0, 1, db); /* stage 1 -> stage 0 */
        if (!rc) rc = pt_gpt_embed_backward(&m, db);
        int same = rc == PT_OK && lw == ls && memcmp(gw, tm.grads_memory, tm.nfloats * sizeof(float)) == 0;
        report(same, "blocks [0, 1) + [1, %d) with explicit boundary buffers == the whole model: loss %.6f vs %.6f, "
               "%zu gradient floats compared bit for bit%s%s", L, ls, lw, tm.nfloats, rc ? ": " : "", rc ? pt_errmsg() : "");
        int bad = pt_gpt_blocks_forward(&m, 1, L + 1, xb, &x);
        char want[32];
        snprintf(want, sizeof want, "[1, %d)", L + 1);
        report(bad == PT_EINVAL && strstr(pt_errmsg(), want), "a block range beyond n_layer is refused: %s",
               pt_errmsg());
        free(xb), free(db), free(gw);
    }

    /* Activation recompute (block: Chen et al. 2016; attention only:
     * Korthikanti et al. 2022 sec. 4) re-runs deterministic kernels, so two
     * full training steps under each mode equal the model without recompute
     * bit for bit (loss, every gradient, every parameter), and the
     * activations the model keeps shrink by exactly the formula of
     * pt_gpt_block_act_bytes (L blocks kept per slot, plus the one shared
     * scratch set). */
    for (int mode = PT_RECOMPUTE_BLOCK; rc == PT_OK && mode <= PT_RECOMPUTE_ATTENTION; mode++) {
        const char *mname = mode == PT_RECOMPUTE_BLOCK ? "block" : "attention";
        pt_plan rcplan = plan;
        rcplan.recompute = mode;
        pt_pctx rcctx;
        pt_arena a0 = {0}, a1 = {0};
        pt_gpt m0, m1;
        pt_train t0, t1;
        rc = pt_pctx_init(&rcctx, MPI_COMM_WORLD, &rcplan, -1);
        if (rc) { report(0, "recompute=%s context: %s", mname, pt_errmsg()); break; }
        rc = pt_gpt_create(&m0, &cfg, &ctx, be, &a0, Bdp, T, seed ^ 77);
        const size_t base = a0.cur;
        if (!rc) rc = pt_gpt_create(&m1, &cfg, &rcctx, be, &a1, Bdp, T, seed ^ 77);
        const size_t kept = a1.cur;
        if (!rc) rc = pt_train_create(&t0, &m0, &opt, NULL);
        if (!rc) rc = pt_train_create(&t1, &m1, &opt, NULL);
        int same = rc == PT_OK;
        const int32_t *in = tok + ctx.dp_rank * Bdp * T, *tg = tok + 1 + ctx.dp_rank * Bdp * T;
        for (int s = 0; same && s < 2; s++) {
            float l0, l1;
            rc = pt_train_step(&t0, in, tg, 1e-3f, &l0, NULL);
            if (!rc) rc = pt_train_step(&t1, in, tg, 1e-3f, &l1, NULL);
            same = rc == PT_OK && l0 == l1 && memcmp(t0.grads_memory, t1.grads_memory, t0.nfloats * 4) == 0 &&
                   memcmp(t0.params_memory, t1.params_memory, t0.nfloats * 4) == 0;
        }
        int all_same = 0;
        MPI_Allreduce(&same, &all_same, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        report(all_same, "recompute=%s: 2 AdamW steps equal no recompute bit for bit (loss, %zu gradient and "
               "parameter floats)%s%s", mname, t0.nfloats, rc ? ": " : "", rc ? pt_errmsg() : "");
        const size_t f0 = pt_gpt_block_act_bytes(&m0, PT_RECOMPUTE_NONE), f1 = pt_gpt_block_act_bytes(&m0, mode);
        const size_t scratch = mode == PT_RECOMPUTE_BLOCK ? f0 : f0 - f1; /* block: one full set; attention: one att */
        const size_t want = (size_t)L * (f0 - f1) - scratch;
        report(base - kept == want, "recompute=%s keeps %zu B less per rank: L x (%zu - %zu) B less, one %zu-B "
               "scratch set more (formula %zu B)", mname, base - kept, f0, f1, scratch, want);
        pt_train_free(&t1);
        pt_train_free(&t0);
        pt_gpt_free(&m1);
        pt_gpt_free(&m0);
        pt_pctx_free(&rcctx);
    }

    /* Per-linear volume against Table 1: run each linear of block 0 alone on
     * fresh random activations and compare the tp counters (last: it
     * accumulates into the gradients). */
    if (tp > 1 && rc == PT_OK) {
        pt_gpt_layer *ly = &m.layers[0];
        const pt_linear *lins[5] = {&ly->qkv, &ly->proj, &ly->fc, &ly->fcproj, NULL};
        const char *names[5] = {"qkv", "proj", "fc", "fcproj", "kv"};
        if (llama) lins[0] = &ly->q, names[0] = "q", lins[4] = &ly->kv;
        const pt_lenv env = {&ctx, m.ops, &arena};
        for (int k = 0; k < 5 && lins[k]; k++) {
            const pt_linear *l = lins[k];
            size_t nx = (size_t)N * l->in_local, ny = (size_t)N * l->out_local;
            float *xf = malloc(nx * sizeof(float));
            void *x = malloc(nx * ea), *y = malloc(ny * ea), *dx = malloc(nx * ea);
            pt_rng rr;
            pt_rng_seed(&rr, seed, 1000 + (uint64_t)k);
            for (size_t t = 0; t < nx; t++) xf[t] = (float)pt_rng_normal(&rr);
            m.ops->convert(x, m.act, xf, PT_F32, nx);
            pt_pctx_reset_stats(&ctx);
            rc = m.layout->linear_fwd(&env, l, y, NULL, x, N, PT_EPI_DEFAULT);
            if (!rc) rc = m.layout->linear_bwd(&env, l, dx, y, x, N, PT_EPI_DEFAULT, NULL, NULL);
            uint64_t got = tp_sent(&ctx), want = linear_bytes(&ctx, l, N, ea);
            report(rc == PT_OK && got == want, "%s linear [%d -> %d]: %llu B sent per rank, layout formula %llu", names[k],
                   l->in, l->out, (unsigned long long)got, (unsigned long long)want);
            free(xf); free(x); free(y); free(dx);
        }
    }
    free(tok);
    pt_train_free(&tm);
    pt_train_free(&tref);
    pt_gpt_free(&m);
    pt_gpt_free(&ref);
    report(arena.cur == 0 && rarena.cur == 0, "arena returns to 0 bytes after free (peak %zu B/rank)", arena.peak);
    pt_pctx_free(&ctx);
    pt_pctx_free(&rctx);
    MPI_Finalize();
    return tap_failures ? 1 : 0;
}
