/* SPDX-License-Identifier: MIT */
/* ZeRO stages 1-3 (Rajbhandari et al. 2020) reproduce the single-process
 * run and ZeRO-0, move the bytes of the paper's section 7 and need the
 * memory of its section 5.
 *
 * usage: test_zero equiv STAGE DP TP [STEPS [PRECISION]]   (mpirun -np DP*TP; 1d tp)
 *   Every rank builds three models on fresh random weights and tokens: the
 *   reference (dp=tp=1, MPI_COMM_SELF, the whole global batch, allreduce
 *   strategy), ZeRO-0 on the grid, and ZeRO-STAGE on the grid.  For STEPS
 *   AdamW steps it compares the loss, each rank's OWN slice of every
 *   gradient after the sync (pt_train_owned) with the reference's (sliced
 *   by the layout's param_slice) and with ZeRO-0's, the global gradient
 *   norm, and at the end the own slice of every parameter.  It checks that
 *   the own slices of the group partition every shard (each element owned
 *   by exactly one rank), and the byte counters of one step over the sync
 *   groups against pt_zero_comm_bytes (ring model): ZeRO-1/2 equal to the
 *   ZeRO-0 allreduce, ZeRO-3 1.5x.  PRECISION bf16: all three models in
 *   bf16 (fp32 masters sliced from stage 1 on, the bf16 work copy
 *   regathered or gathered per piece): ZeRO-k against ZeRO-0 as tight as
 *   in fp32 until the work copies' roundings part (the reduction orders
 *   differ, so a master may round to the other bf16 neighbour), against
 *   the reference to bf16 tolerance; the parameter allgathers move bf16,
 *   the gradient reduce-scatters fp32.
 * usage: test_zero memory DP [PRECISION]        (mpirun -np DP)
 *   Stages 0..3 on a deeper model (L=12, so one block's parameters are a
 *   small part of the model): the model state comes from an arena of its
 *   own (pt_train_create_in), so its peak over one training step (after
 *   create, pt_arena_reset_peak) is the state memory without activations.
 *   Each stage's state peak must be within 10% of 16 Psi (the stage-0
 *   fp32 state) of pt_zero_state_bytes at the precision (bf16: 18 Psi, 6
 *   Psi + 12 Psi / N, 2 Psi + 16 Psi / N, 18 Psi / N), and below the
 *   previous stage's.
 * Output: TAP lines without numbers (the driver script adds the plan).
 */
#include "comm/comm.h"
#include "core/core.h"
#include "model/gpt.h"
#include "parallel/context.h"
#include "ref_slice.h"
#include "train/train.h"

#include <math.h>
#include <mpi.h>
#include "mpi_tap.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>


/* which: 0 parameters, 1 gradients.  Max over parameters of the own
 * slice's max |z - slice(ref)|, relative to max |slice(ref)| when rel
 * (gradients), absolute otherwise; and the same against ZeRO-0's shard. */
static void compare(const pt_train *tz, const pt_train *t0, const pt_gpt *ref, const pt_pctx *c, int which, int rel,
                    double *e_ref, double *e_0, char *worst, size_t wn)
{
    const pt_gpt *m = tz->model;
    *e_ref = *e_0 = 0;
    for (int i = 0; i < m->nparams; i++) {
        const pt_param *p = &m->params[i], *q = &ref->params[i];
        float *slice = ref_slice(m, c, p, q, which);
        int64_t lo, hi, lo0, hi0;
        const float *zd, *zg, *d0, *g0;
        pt_train_owned(tz, i, &lo, &hi, &zd, &zg);
        pt_train_owned(t0, i, &lo0, &hi0, &d0, &g0);
        const float *a = which ? zg : zd, *b = (which ? g0 : d0) + lo; /* ZeRO-0 owns all of it */
        double dr = 0, d0m = 0, mag = 0;
        for (int64_t j = 0; j < p->shard.numel; j++) mag = fmax(mag, fabs(slice[j]));
        for (int64_t j = lo; j < hi; j++) {
            dr = fmax(dr, fabs((double)a[j - lo] - slice[j]));
            d0m = fmax(d0m, fabs((double)a[j - lo] - b[j - lo]));
        }
        if (rel) {
            dr = dr / (mag + 1e-12);
            d0m = d0m / (mag + 1e-12);
        }
        if (dr > *e_ref) {
            *e_ref = dr;
            snprintf(worst, wn, "%s", p->name);
        }
        *e_0 = fmax(*e_0, d0m);
        free(slice);
    }
}

/* bytes sent over the distinct sync groups of t's buckets */
static uint64_t sync_sent(const pt_train *t)
{
    uint64_t s = 0;
    for (int k = 0; k < t->nbuckets; k++) s += pt_comm_sent_total(t->buckets[k].comm);
    return s;
}

static int equiv(int stage, int dp, int tp, int steps, int precision)
{
    pt_plan plan, rplan;
    pt_plan_default(&plan);
    plan.mode = PT_MODE_1D;
    plan.dp = dp;
    plan.tp = tp;
    plan.precision = precision;
    /* plan.zero stays 0: the context does not depend on it (and refuses it
     * until ptrain-run wires ZeRO); the strategy is chosen here */
    pt_plan_default(&rplan);
    rplan.precision = precision;
    const int bf = precision == PT_PREC_BF16;
    /* bounds against the reference (fp32: summation order; bf16: the tp
     * sums' and GEMMs' roundings, see test_equiv) and against zero0 (the
     * same forward; fp32 gradient sums in another order; under bf16 a
     * master may round to the other bf16 neighbour from step 2 on) */
    const double l_ref = bf ? 1e-3 : 2e-6, l_0 = bf ? 1e-4 : 1e-6, g_ref = bf ? 5e-2 : 1e-4, g_0 = bf ? 1e-2 : 1e-5;
    const double n_ref = bf ? 5e-3 : 1e-5, n_0 = bf ? 1e-3 : 1e-6, p_ref = bf ? 2e-4 : 1e-6, p_0 = bf ? 1e-5 : 1e-7;
    const unsigned long seed = tap_seed();
    char summary[160];
    pt_plan_summary(&plan, summary, sizeof summary);
    if (tap_rank0) printf("# %s, ZeRO stage %d, steps=%d seed=%lu (PTRAIN_TEST_SEED reproduces)\n", summary, stage, steps, seed);
    /* V=97 pads the vocabulary; C=30 makes a block's unit (11190 floats,
     * 5685 per 1d tp rank) pad to the group size at dp=4 and tp=2 */
    pt_gpt_config cfg = {.n_layer = 2, .n_head = 2, .n_embd = 30, .seq_len = 8, .vocab = 97};
    test_model_family(&cfg);
    const int Bdp = 2, B = Bdp * dp, T = cfg.seq_len;
    pt_pctx ctx, rctx;
    if (pt_pctx_init(&ctx, MPI_COMM_WORLD, &plan, -1) || pt_pctx_init(&rctx, MPI_COMM_SELF, &rplan, -1)) {
        report(0, "context: %s", pt_errmsg());
        return 1;
    }
    const pt_backend *be = pt_backend_get("cpu");
    be->set_threads(1);
    pt_arena a0 = {0}, az = {0}, ar = {0};
    pt_gpt m0, mz, ref;
    pt_train t0, tz, tref;
    memset(&t0, 0, sizeof t0), memset(&tz, 0, sizeof tz), memset(&tref, 0, sizeof tref);
    pt_adamw_cfg opt;
    pt_adamw_default(&opt);
    opt.eps = 1e-2f; /* as test_equiv: the update is Lipschitz in g, so rounding does not amplify */
    opt.grad_clip = 0.05f; /* below the norm of the first steps: clipping runs */
    const pt_train_strategy *zs = pt_train_strategy_zero(stage);
    int rc = zs ? PT_OK : PT_EINVAL;
    if (!rc) rc = pt_gpt_create(&m0, &cfg, &ctx, be, &a0, Bdp, T, seed);
    if (!rc) rc = pt_gpt_create(&mz, &cfg, &ctx, be, &az, Bdp, T, seed);
    if (!rc) rc = pt_gpt_create(&ref, &cfg, &rctx, be, &ar, B, T, seed);
    if (!rc) rc = pt_train_create(&t0, &m0, &opt, NULL);
    if (!rc) rc = pt_train_create(&tz, &mz, &opt, zs);
    if (!rc) rc = pt_train_create(&tref, &ref, &opt, NULL);
    report(rc == PT_OK, "models built (reference, zero0, %s): %s", zs ? zs->name : "?", rc ? pt_errmsg() : "");
    if (rc) return 1;

    /* own slices partition every shard over its sync group */
    int part = 1;
    for (int i = 0; i < mz.nparams; i++) {
        int64_t lo, hi;
        const float *d, *g;
        pt_train_owned(&tz, i, &lo, &hi, &d, &g);
        long long mine = hi - lo, sum = 0;
        MPI_Allreduce(&mine, &sum, 1, MPI_LONG_LONG, MPI_SUM, mz.params[i].shard.sync->comm);
        if (sum != mz.params[i].shard.numel || lo < 0 || hi > mz.params[i].shard.numel) part = 0;
    }
    report(part, "own slices partition every local shard over its sync group (%d buckets)", tz.nbuckets);

    int32_t *tok = malloc(sizeof(int32_t) * (size_t)(B * T + 1));
    pt_rng r;
    pt_rng_seed(&r, seed, 99);
    char worst[32] = "";
    for (int s = 0; s < steps && !rc; s++) {
        for (int i = 0; i <= B * T; i++) tok[i] = (int32_t)(pt_rng_u64(&r) % (uint64_t)cfg.vocab);
        const int32_t *in = tok + ctx.dp_rank * Bdp * T, *tg = in + 1;
        float l0, lz, lr_;
        pt_train_zero_grad(&tref);
        pt_train_zero_grad(&t0);
        pt_train_zero_grad(&tz);
        rc = pt_train_forward_backward(&tref, tok, tok + 1, &lr_);
        if (!rc) rc = pt_train_sync(&tref);
        if (!rc) rc = pt_train_forward_backward(&t0, in, tg, &l0);
        if (!rc) rc = pt_train_sync(&t0);
        pt_pctx_reset_stats(&ctx);
        uint64_t z0 = 0;
        if (!rc) rc = pt_train_forward_backward(&tz, in, tg, &lz);
        if (!rc) rc = pt_train_sync(&tz);
        if (rc) { report(0, "step %d: %s", s + 1, pt_errmsg()); break; }
        /* zero0 and ZeRO sum the gradients in another order (allreduce
         * against reduce-scatter), so from step 2 on their parameters, and
         * with them the loss, may differ in the last bits (the parameter
         * check below allows 1e-7) */
        double le = fabs((double)lz - lr_) / fabs(lr_), l0e = fabs((double)lz - l0) / fabs(l0);
        le = max_world(le);
        l0e = max_world(l0e);
        report(le < l_ref && l0e < l_0,
               "step %d: loss %.6f equals the reference %.6f (rel %.1e < %.0e) and zero0's %.6f (rel %.1e < %.0e)", s + 1,
               lz, lr_, le, l_ref, l0, l0e, l_0);
        double er, e0;
        compare(&tz, &t0, &ref, &ctx, 1, 1, &er, &e0, worst, sizeof worst);
        er = max_world_named(er, worst, sizeof worst);
        e0 = max_world(e0);
        report(er < g_ref && e0 < g_0, "step %d: own gradient slices equal the reference's (max rel %.1e < %.0e, worst %s) "
               "and zero0's (%.1e < %.0e)", s + 1, er, g_ref, worst, e0, g_0);
        double nz, n0, nr;
        rc = pt_train_update(&tz, 1e-3f, &nz);
        if (!rc) rc = pt_train_update(&t0, 1e-3f, &n0);
        if (!rc) rc = pt_train_update(&tref, 1e-3f, &nr);
        if (rc) { report(0, "update %d: %s", s + 1, pt_errmsg()); break; }
        z0 = sync_sent(&tz);
        report(fabs(nz - nr) / nr < n_ref && fabs(nz - n0) / n0 < n_0,
               "step %d: gradient norm %.6f equals the reference %.6f and zero0's %.6f (clip at %.2f)", s + 1, nz, nr, n0,
               opt.grad_clip);
        if (s == 0) {
            /* one step's traffic over the sync groups vs the formulas */
            double want = 0, want0 = 0;
            for (int k = 0; k < tz.nbuckets; k++) {
                want += pt_zero_comm_bytes(stage, (double)tz.buckets[k].n, tz.buckets[k].comm->size, (int)mz.ea);
                want0 += pt_zero_comm_bytes(0, (double)t0.buckets[k].n, t0.buckets[k].comm->size, (int)m0.ea);
            }
            pt_pctx_reset_stats(&ctx);
            rc = pt_train_sync(&t0); /* ZeRO-0's allreduce, counted alone (values are reused: norm not retaken) */
            uint64_t a0b = sync_sent(&t0);
            size_t padded = 0;
            for (int k = 0; k < tz.nbuckets; k++) padded += tz.buckets[k].n;
            double ratio = (double)z0 / (double)a0b, pad = (double)padded / (double)tz.nfloats;
            /* the parameter allgathers move the work copy: bf16 halves them */
            const double want_ratio = (bf ? (stage == 3 ? 1.0 : 0.75) : (stage == 3 ? 1.5 : 1.0)) * pad;
            /* ZeRO-3 under the fused head (pt_gpt_head_fused): the units the head
             * uses last (the tied wte, lnf) are gathered once, not twice; what
             * pt_train_sync_bytes predicts, one gather of their work copy less
             * than the formula, whose 1.5 (1 bf16) the ratio then undercuts */
            const double pred = pt_train_sync_bytes(&tz), pred0 = pt_train_sync_bytes(&t0);
            const double saved = want - pred, gather = (bf ? 2.0 : 4.0) / (4.0 + 2 * (bf ? 2.0 : 4.0)) * want;
            const int resident = stage == 3 && pt_gpt_head_fused(&mz);
            const int formula_ok = resident ? saved > 0 && saved < gather && ratio < want_ratio && ratio > want_ratio / 1.5
                                            : saved == 0 && fabs(ratio - want_ratio) < 1e-9;
            report((double)z0 == pred && (double)a0b == want0 && pred0 == want0 && formula_ok,
                   "step 1 bytes over the sync groups: %s %llu B (pt_train_sync_bytes %.0f, formula %.0f%s), zero0 "
                   "allreduce %llu B (formula %.0f): ratio %.4f %s %s x padding %.4f (%zu of %zu floats)",
                   zs->name, (unsigned long long)z0, pred, want,
                   resident ? " less one gather of the head's units" : "", (unsigned long long)a0b, want0, ratio,
                   resident ? "<" : "=",
                   bf ? (stage == 3 ? "1 (bf16 gathers)" : "0.75 (bf16 gather)") : stage == 3 ? "1.5" : "1", pad,
                   padded, tz.nfloats);
            if (rc) break;
        }
    }
    if (!rc) {
        double er, e0;
        compare(&tz, &t0, &ref, &ctx, 0, 0, &er, &e0, worst, sizeof worst);
        er = max_world_named(er, worst, sizeof worst);
        e0 = max_world(e0);
        report(er <= p_ref && e0 <= p_0,
               "after %d AdamW steps every owned parameter slice equals the reference (max abs %.1e <= %.0e, worst %s) "
               "and zero0 (%.1e <= %.0e)", steps, er, p_ref, worst, e0, p_0);
    }
    free(tok);
    pt_train_free(&tz);
    pt_train_free(&t0);
    pt_train_free(&tref);
    pt_gpt_free(&mz);
    pt_gpt_free(&m0);
    pt_gpt_free(&ref);
    report(az.cur == 0 && a0.cur == 0, "arenas return to 0 bytes after free");
    pt_pctx_free(&ctx);
    pt_pctx_free(&rctx);
    return rc;
}

static int memory(int dp, int precision)
{
    const unsigned long seed = tap_seed();
    pt_gpt_config cfg = {.n_layer = 12, .n_head = 4, .n_embd = 32, .seq_len = 8, .vocab = 64};
    const int B = 2, T = cfg.seq_len;
    double peak[4] = {0}, total[4] = {0}, form[4] = {0}, psi = 0;
    int ok_all = 1;
    for (int stage = 0; stage <= 3; stage++) {
        pt_plan plan;
        pt_plan_default(&plan);
        plan.dp = dp;
        plan.precision = precision;
        pt_pctx ctx;
        if (pt_pctx_init(&ctx, MPI_COMM_WORLD, &plan, -1)) { report(0, "context: %s", pt_errmsg()); return 1; }
        const pt_backend *be = pt_backend_get("cpu");
        be->set_threads(1);
        pt_arena act = {0}, st = {0};
        pt_gpt m;
        pt_train t;
        memset(&t, 0, sizeof t);
        pt_adamw_cfg opt;
        pt_adamw_default(&opt);
        int rc = pt_gpt_create(&m, &cfg, &ctx, be, &act, B, T, seed);
        if (!rc) rc = pt_train_create_in(&t, &m, &st, &opt, pt_train_strategy_zero(stage));
        if (!rc) {
            int32_t *tok = malloc(sizeof(int32_t) * (size_t)(B * T + 1));
            pt_rng r;
            pt_rng_seed(&r, seed, 7);
            for (int i = 0; i <= B * T; i++) tok[i] = (int32_t)(pt_rng_u64(&r) % (uint64_t)cfg.vocab);
            pt_arena_reset_peak(&st);
            pt_arena_reset_peak(&act);
            rc = pt_train_step(&t, tok, tok + 1, 1e-3f, NULL, NULL);
            free(tok);
            peak[stage] = max_world((double)st.peak);
            total[stage] = max_world((double)(act.peak + st.peak)); /* upper bound: the two peaks need not coincide */
            psi = (double)t.nfloats;
            form[stage] = pt_zero_state_bytes(stage, psi, dp, (int)m.ea);
        }
        if (rc) { ok_all = 0; report(0, "stage %d: %s", stage, pt_errmsg()); }
        pt_train_free(&t);
        pt_gpt_free(&m);
        pt_pctx_free(&ctx);
        if (rc) return 1;
    }
    if (tap_rank0)
        for (int s = 0; s <= 3; s++)
            printf("# zero%d dp=%d %s: state peak %.0f B (formula %.0f, %+.1f%% of 16 Psi), state + activation peaks %.0f B\n",
                   s, dp, pt_precision_name(precision), peak[s], form[s], 100 * (peak[s] - form[s]) / (16 * psi), total[s]);
    for (int s = 0; s <= 3 && ok_all; s++) {
        double dev = fabs(peak[s] - form[s]) / (16 * psi);
        report(dev < 0.10 && (s == 0 || peak[s] < peak[s - 1]),
               "zero%d at dp=%d %s: state peak per rank %.0f B = %.3f x 16 Psi, formula %.3f (off by %.1f%% of 16 Psi < 10%%)%s",
               s, dp, pt_precision_name(precision), peak[s], peak[s] / (16 * psi), form[s] / (16 * psi), 100 * dev,
               s ? ", below the previous stage" : "");
    }
    const pt_train_strategy *bad = pt_train_strategy_zero(4);
    report(bad == NULL && strstr(pt_errmsg(), "stage 4") && strstr(pt_errmsg(), "valid: 0, 1, 2, 3"),
           "ZeRO stage 4 is refused in one line: %s", pt_errmsg());
    return ok_all ? 0 : 1;
}

int main(int argc, char **argv)
{
    tap_init(&argc, &argv);
    int rc = 2, prec = PT_PREC_FP32;
    const char *ps = argc >= 5 && !strcmp(argv[1], "equiv") ? (argc > 6 ? argv[6] : NULL) : (argc > 3 ? argv[3] : NULL);
    if (ps && pt_precision_parse("precision", ps, &prec) < 0) argc = 0;
    if (argc >= 5 && !strcmp(argv[1], "equiv"))
        rc = equiv(atoi(argv[2]), atoi(argv[3]), atoi(argv[4]), argc > 5 ? atoi(argv[5]) : 3, prec);
    else if (argc >= 3 && !strcmp(argv[1], "memory"))
        rc = memory(atoi(argv[2]), prec);
    else if (tap_rank0)
        fprintf(stderr, "usage: test_zero equiv STAGE DP TP [STEPS [PRECISION]] | test_zero memory DP [PRECISION]\n");
    MPI_Finalize();
    return rc == 2 ? 2 : (tap_failures ? 1 : 0);
}
