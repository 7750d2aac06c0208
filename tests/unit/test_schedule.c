/* SPDX-License-Identifier: MIT */
/* Pipeline schedules (lib/contract/schedule.h): every rank's action list
 * is run together in a simulator with blocking (rendezvous) point-to-point
 * semantics: a send completes only when its peer's next action is the
 * matching receive, both ends wait otherwise.  For each schedule, pp, m
 * and v the test checks: the lists finish (no deadlock), every send meets
 * the receive of the same microbatch, kind and virtual stage in order,
 * each (microbatch, chunk) runs its forward exactly once before its
 * backward, its input has arrived before it runs, the slots of
 * microbatches held at the same time differ and fit nslots, 1F1B holds at
 * most pp microbatches (GPipe exactly m), the messages are 2 (S-1) m per
 * step, and with every chunk step taking one time unit the idle share of
 * the step equals the bubble formulas (p-1)/(m+p-1) and (p-1)/(vm+p-1).
 * Negative controls: lists corrupted by hand are caught (a deadlock, a
 * backward before its forward).  Also the stage split and its errors.
 */
#include "pipeline/pipeline.h"
#include "contract/schedule.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "tests/tap.h"

typedef struct simres {
    int ok;          /* finished with every check passing */
    char why[200];   /* first failure */
    double bubble;   /* 1 - busy / makespan (max over ranks) */
    int sends;       /* messages over all ranks */
    int max_held;    /* most microbatches held at once on a rank */
} simres;

static int fail(simres *r, const char *fmt, int a, int b, int c, int d)
{
    if (r->ok) snprintf(r->why, sizeof r->why, fmt, a, b, c, d);
    r->ok = 0;
    return 0;
}

/* Live ranges of the microbatches on rank r (compute steps only for the
 * model slots, every action for the buffer sets): one id per microbatch,
 * never shared by two live at once, and at most nslots / nbufs live. */
static void check_ids(simres *res, const pt_pp_schedule *s, int r, int compute_only)
{
    const int m = s->m, cap = compute_only ? s->nslots : s->nbufs;
    const char *what = compute_only ? "slot" : "buffer set";
    int *first = malloc(sizeof(int) * m), *last = malloc(sizeof(int) * m), *id = malloc(sizeof(int) * m);
    for (int i = 0; i < m; i++) first[i] = -1, id[i] = -1;
    for (int k = 0; k < s->n; k++) {
        const pt_pp_action *a = &s->a[k];
        if (compute_only && a->op != PT_PP_FWD && a->op != PT_PP_BWD) continue;
        const int x = compute_only ? a->slot : a->buf;
        if (first[a->mb] < 0) first[a->mb] = k, id[a->mb] = x;
        else if (id[a->mb] != x) fail(res, "rank %d: mb %d changes id %d -> %d", r, a->mb, id[a->mb], x);
        last[a->mb] = k;
    }
    int peak = 0;
    for (int k = 0; k < s->n; k++) {
        int held = 0;
        for (int i = 0; i < m; i++) held += first[i] <= k && k <= last[i];
        if (held > peak) peak = held;
    }
    if (peak > cap) {
        fail(res, "rank %d: %d microbatches hold a %s at once, only %d%.0d", r, peak, cap, 0);
        snprintf(res->why + strlen(res->why), sizeof res->why - strlen(res->why), " (%s)", what);
    }
    for (int i = 0; i < m; i++)
        for (int j = i + 1; j < m; j++)
            if (id[i] == id[j] && first[i] <= last[j] && first[j] <= last[i])
                fail(res, "rank %d: mb %d and %d share id %d while both live", r, i, j, id[i]);
    if (compute_only && peak > res->max_held) res->max_held = peak;
    free(first), free(last), free(id);
}

/* Run the lists of all pp ranks together. */
static simres simulate(pt_pp_schedule *s, int pp)
{
    simres res = {.ok = 1};
    const int m = s[0].m, v = s[0].v, S = pp * v;
    int *idx = calloc((size_t)pp, sizeof(int));
    double *t = calloc((size_t)pp, sizeof(double));
    /* per rank, mb, chunk: 1 fwd, 2 bwd, 4 act arrived, 8 grad arrived */
    unsigned char *st = calloc((size_t)pp * m * v, 1);
#define ST(r, i, c) st[((size_t)(r) * m + (i)) * v + (c)]
    int done = 0;
    while (res.ok) {
        int progress = 0;
        done = 1;
        for (int r = 0; r < pp && res.ok; r++) {
            while (idx[r] < s[r].n && res.ok) {
                const pt_pp_action *a = &s[r].a[idx[r]];
                const int vs = a->chunk * pp + r;
                if (a->mb < 0 || a->mb >= m || a->chunk < 0 || a->chunk >= v) {
                    fail(&res, "rank %d action %d: mb %d chunk %d out of range", r, idx[r], a->mb, a->chunk);
                    break;
                }
                const int compute = a->op == PT_PP_FWD || a->op == PT_PP_BWD;
                if (compute ? a->slot < 0 || a->slot >= s[r].nslots : a->slot != -1) {
                    fail(&res, "rank %d action %d: slot %d, nslots %d", r, idx[r], a->slot, s[r].nslots);
                    break;
                }
                if (a->buf < 0 || a->buf >= s[r].nbufs) {
                    fail(&res, "rank %d action %d: buffer set %d outside nbufs %d", r, idx[r], a->buf, s[r].nbufs);
                    break;
                }
                if (a->op == PT_PP_FWD) {
                    if (ST(r, a->mb, a->chunk) & 1) fail(&res, "rank %d: forward of mb %d chunk %d twice%.0d", r, a->mb, a->chunk, 0);
                    if (vs > 0 && !(ST(r, a->mb, a->chunk) & 4))
                        fail(&res, "rank %d: forward of mb %d chunk %d before its activation arrived%.0d", r, a->mb, a->chunk, 0);
                    ST(r, a->mb, a->chunk) |= 1;
                    t[r] += 1;
                } else if (a->op == PT_PP_BWD) {
                    if (!(ST(r, a->mb, a->chunk) & 1)) fail(&res, "rank %d: backward of mb %d chunk %d before its forward%.0d", r, a->mb, a->chunk, 0);
                    if (ST(r, a->mb, a->chunk) & 2) fail(&res, "rank %d: backward of mb %d chunk %d twice%.0d", r, a->mb, a->chunk, 0);
                    if (vs < S - 1 && !(ST(r, a->mb, a->chunk) & 8))
                        fail(&res, "rank %d: backward of mb %d chunk %d before its gradient arrived%.0d", r, a->mb, a->chunk, 0);
                    ST(r, a->mb, a->chunk) |= 2;
                    t[r] += 1;
                } else if (a->op == PT_PP_SEND_ACT || a->op == PT_PP_SEND_GRAD) {
                    const int grad = a->op == PT_PP_SEND_GRAD, q = a->peer;
                    if (q < 0 || q >= pp) { fail(&res, "rank %d: send to rank %d%.0d%.0d", r, q, 0, 0); break; }
                    if (idx[q] >= s[q].n) { fail(&res, "rank %d: send of mb %d to rank %d which has finished%.0d", r, a->mb, q, 0); break; }
                    const pt_pp_action *b = &s[q].a[idx[q]];
                    if (b->op != (grad ? PT_PP_RECV_GRAD : PT_PP_RECV_ACT) || b->peer != r) break; /* blocked */
                    const int dvs = grad ? vs - 1 : vs + 1;
                    if (dvs < 0 || dvs >= S || dvs % pp != q) { fail(&res, "rank %d: send from stage %d to rank %d%.0d", r, vs, q, 0); break; }
                    if (b->mb != a->mb || b->chunk != dvs / pp)
                        fail(&res, "rank %d sends mb %d, rank %d receives mb %d (out of order)", r, a->mb, q, b->mb);
                    if (!(ST(r, a->mb, a->chunk) & (grad ? 2 : 1)))
                        fail(&res, "rank %d: sends mb %d chunk %d before computing it%.0d", r, a->mb, a->chunk, 0);
                    ST(q, b->mb, b->chunk) |= grad ? 8 : 4;
                    t[r] = t[q] = fmax(t[r], t[q]); /* rendezvous, no transfer time */
                    idx[q]++;
                    res.sends++;
                } else {
                    break; /* a receive waits for its sender's turn */
                }
                idx[r]++;
                progress = 1;
            }
            if (idx[r] < s[r].n) done = 0;
        }
        if (done || !res.ok) break;
        if (!progress) {
            int r = 0;
            while (idx[r] == s[r].n) r++;
            fail(&res, "deadlock: rank %d blocked at action %d (%d) of %d", r, idx[r], s[r].a[idx[r]].op, s[r].n);
        }
    }
    if (res.ok)
        for (int r = 0; r < pp; r++)
            for (int i = 0; i < m; i++)
                for (int c = 0; c < v; c++)
                    if ((ST(r, i, c) & 3) != 3) fail(&res, "rank %d: mb %d chunk %d not run forward and backward%.0d", r, i, c, 0);
    double makespan = 0;
    for (int r = 0; r < pp; r++) makespan = fmax(makespan, t[r]);
    res.bubble = 1.0 - 2.0 * m * v / makespan;
    /* model slots live from a microbatch's first to its last compute
     * step, buffer sets from its first to its last action */
    for (int r = 0; r < pp && res.ok; r++) {
        check_ids(&res, &s[r], r, 1);
        check_ids(&res, &s[r], r, 0);
    }
#undef ST
    free(idx), free(t), free(st);
    return res;
}

static int build_all(pt_pp_schedule *s, int kind, int pp, int m, int v)
{
    for (int r = 0; r < pp; r++)
        if (pt_pp_schedule_build(&s[r], kind, pp, r, m, v)) return -1;
    return 0;
}

static void free_all(pt_pp_schedule *s, int pp)
{
    for (int r = 0; r < pp; r++) pt_pp_schedule_free(&s[r]);
}

static int contains(const char *msg, const char *a, const char *b)
{
    return strstr(msg, a) && (!b || strstr(msg, b));
}

int main(void)
{
    pt_pp_schedule s[8];
    /* ---- every schedule, simulated ---- */
    const int pps[] = {1, 2, 3, 4, 8}, ms[] = {1, 2, 3, 4, 6, 8, 12, 16};
    const int kinds[] = {PT_SCHED_GPIPE, PT_SCHED_1F1B, PT_SCHED_INTERLEAVED};
    for (size_t ki = 0; ki < 3; ki++)
        for (size_t pi = 0; pi < sizeof pps / sizeof *pps; pi++)
            for (size_t mi = 0; mi < sizeof ms / sizeof *ms; mi++)
                for (int v = 1; v <= (kinds[ki] == PT_SCHED_INTERLEAVED ? 3 : 1); v++) {
                    const int kind = kinds[ki], pp = pps[pi], m = ms[mi];
                    if (kind == PT_SCHED_INTERLEAVED && (m % pp || v == 1 || pp == 1)) continue;
                    if (build_all(s, kind, pp, m, v)) {
                        tap_ok(0, "%s pp=%d m=%d v=%d: %s", pt_pp_schedule_name(kind), pp, m, v, pt_errmsg());
                        continue;
                    }
                    simres r = simulate(s, pp);
                    const int S = pp * v;
                    double f = pt_pp_bubble_formula(kind, pp, m, v);
                    int slots_ok = 1, nbufs = 0, nslots = 0;
                    for (int k = 0; k < pp; k++) {
                        if (s[k].nslots > nslots) nslots = s[k].nslots;
                        if (s[k].nbufs > nbufs) nbufs = s[k].nbufs;
                        /* 1F1B: rank k holds at most pp - k (and m) microbatches */
                        if (kind == PT_SCHED_1F1B && (s[k].nslots > (pp - k < m ? pp - k : m) || s[k].nbufs > pp)) slots_ok = 0;
                        if (kind == PT_SCHED_GPIPE && s[k].nslots != m) slots_ok = 0;
                    }
                    const char *bound = kind == PT_SCHED_1F1B ? "<= min(pp - rank, m)" : kind == PT_SCHED_GPIPE ? "= m" : "";
                    tap_ok(r.ok && r.sends == 2 * (S - 1) * m && fabs(r.bubble - f) < 1e-12 && slots_ok,
                           "%s pp=%d m=%d v=%d: no deadlock, sends meet receives in order, fwd before bwd; "
                           "%d messages (2(S-1)m = %d); bubble %.4f (formula %.4f); model slots %d %s, buffer sets %d%s%s",
                           pt_pp_schedule_name(kind), pp, m, v, r.sends, 2 * (S - 1) * m, r.bubble, f, nslots, bound,
                           nbufs, r.ok ? "" : ": ", r.why);
                    free_all(s, pp);
                }

    /* memory: 1F1B stays at pp while GPipe grows with m */
    {
        int g4, g16, f4, f16;
        build_all(s, PT_SCHED_GPIPE, 4, 4, 1); g4 = s[0].nslots; free_all(s, 4);
        build_all(s, PT_SCHED_GPIPE, 4, 16, 1); g16 = s[0].nslots; free_all(s, 4);
        build_all(s, PT_SCHED_1F1B, 4, 4, 1); f4 = s[0].nslots; free_all(s, 4);
        build_all(s, PT_SCHED_1F1B, 4, 16, 1); f16 = s[0].nslots; free_all(s, 4);
        tap_ok(g4 == 4 && g16 == 16 && f4 == 4 && f16 == 4,
               "stage 0 of pp=4 needs slots: GPipe %d (m=4), %d (m=16); 1F1B %d, %d (bounded by pp)", g4, g16, f4, f16);
    }

    /* ---- negative controls: the simulator catches broken lists ---- */
    {
        build_all(s, PT_SCHED_1F1B, 2, 4, 1);
        /* rank 0: make its first send_act come after the next recv_grad: with
         * rank 1 waiting to receive that activation first, both block */
        int k = 0, j;
        while (s[0].a[k].op != PT_PP_RECV_GRAD) k++;
        for (j = k; j > 0 && s[0].a[j - 1].op != PT_PP_SEND_ACT; j--) {}
        pt_pp_action tmp = s[0].a[j - 1];
        memmove(&s[0].a[j - 1], &s[0].a[j], sizeof tmp * (size_t)(k - j + 1));
        s[0].a[k] = tmp;
        simres r = simulate(s, 2);
        tap_ok(!r.ok && strstr(r.why, "deadlock"), "negative control: a send moved after a receive deadlocks (%s)", r.why);
        free_all(s, 2);
        build_all(s, PT_SCHED_GPIPE, 2, 2, 1);
        for (k = 0; s[1].a[k].op != PT_PP_FWD; k++) {}
        for (j = k; s[1].a[j].op != PT_PP_BWD; j++) {}
        pt_pp_action t2 = s[1].a[k];
        s[1].a[k] = s[1].a[j];
        s[1].a[j] = t2;
        r = simulate(s, 2);
        tap_ok(!r.ok && strstr(r.why, "before its forward"), "negative control: a backward before its forward is caught (%s)", r.why);
        free_all(s, 2);
        build_all(s, PT_SCHED_GPIPE, 2, 2, 1);
        for (k = 0; k < s[0].n; k++)
            if (s[0].a[k].slot > 0) s[0].a[k].slot = 0;
        r = simulate(s, 2);
        tap_ok(!r.ok && strstr(r.why, "share id"), "negative control: two live microbatches in one slot are caught (%s)", r.why);
        free_all(s, 2);
    }

    /* ---- schedule errors ---- */
    tap_ok(pt_pp_schedule_build(&s[0], PT_SCHED_INTERLEAVED, 4, 0, 6, 2) == PT_EINVAL &&
           contains(pt_errmsg(), "microbatches 6", "multiple of pp 4"), "interleaved m=6 pp=4 refused: %s", pt_errmsg());
    tap_ok(pt_pp_schedule_build(&s[0], PT_SCHED_1F1B, 4, 0, 4, 2) == PT_EINVAL &&
           contains(pt_errmsg(), "virtual stages 2", "interleaved"), "1f1b with v=2 refused: %s", pt_errmsg());
    tap_ok(pt_pp_schedule_build(&s[0], PT_SCHED_INTERLEAVED, 1, 0, 4, 2) == PT_EINVAL &&
           contains(pt_errmsg(), "virtual stages 2 with pp 1", NULL), "interleaved with pp=1 refused: %s", pt_errmsg());
    tap_ok(pt_pp_schedule_build(&s[0], PT_SCHED_1F1B, 4, 0, 0, 1) == PT_EINVAL && contains(pt_errmsg(), "microbatches 0", NULL),
           "m=0 refused: %s", pt_errmsg());
    tap_ok(pt_pp_schedule_build(&s[0], PT_SCHED_1F1B, 4, 4, 4, 1) == PT_EINVAL && contains(pt_errmsg(), "rank 4", "0..3"),
           "rank outside the pipeline refused: %s", pt_errmsg());

    /* ---- stage split ---- */
    pt_pp_split sp;
    int rc = pt_pp_split_layers(10, 4, 1, NULL, 0, &sp);
    tap_ok(rc == 0 && sp.nstages == 4 && sp.l0[0] == 0 && sp.l1[0] == 3 && sp.l1[1] == 6 && sp.l1[2] == 8 && sp.l1[3] == 10,
           "even split of 10 blocks over 4 stages: 3,3,2,2");
    rc = pt_pp_split_layers(8, 2, 2, NULL, 0, &sp);
    int a0, a1, b0, b1;
    pt_pp_split_chunk(&sp, 2, 1, 0, &a0, &a1);
    pt_pp_split_chunk(&sp, 2, 1, 1, &b0, &b1);
    tap_ok(rc == 0 && a0 == 2 && a1 == 4 && b0 == 6 && b1 == 8,
           "interleaved pp=2 v=2 over 8 blocks: rank 1 holds virtual stages 1 [%d,%d) and 3 [%d,%d)", a0, a1, b0, b1);
    const int c3[] = {3, 1, 2, 2};
    rc = pt_pp_split_layers(8, 4, 1, c3, 4, &sp);
    tap_ok(rc == 0 && sp.l1[0] == 3 && sp.l0[1] == 3 && sp.l1[1] == 4 && sp.l1[3] == 8, "explicit split 3,1,2,2");
    tap_ok(pt_pp_split_layers(4, 4, 2, NULL, 0, &sp) == PT_EINVAL && contains(pt_errmsg(), "8 stages", "pp x v <= 4"),
           "pp*v > n_layer refused: %s", pt_errmsg());
    tap_ok(pt_pp_split_layers(8, 4, 1, c3, 3, &sp) == PT_EINVAL && contains(pt_errmsg(), "3 entries", "needs 4"),
           "split with the wrong number of entries refused: %s", pt_errmsg());
    const int c0[] = {4, 0, 2, 2}, c9[] = {3, 3, 2, 2};
    tap_ok(pt_pp_split_layers(8, 4, 1, c0, 4, &sp) == PT_EINVAL && contains(pt_errmsg(), "entry 1 is 0 blocks", NULL),
           "zero-block stage refused: %s", pt_errmsg());
    tap_ok(pt_pp_split_layers(8, 4, 1, c9, 4, &sp) == PT_EINVAL && contains(pt_errmsg(), "sums to 10", "n_layer 8"),
           "split not summing to n_layer refused: %s", pt_errmsg());
    int micro = 0;
    rc = pt_pp_microbatch(12, 4, &micro);
    tap_ok(rc == 0 && micro == 3, "12 sequences in 4 microbatches of %d", micro);
    tap_ok(pt_pp_microbatch(6, 4, &micro) == PT_EINVAL && contains(pt_errmsg(), "6 sequences", "1, 2, 3, 6"),
           "6 sequences into 4 microbatches refused: %s", pt_errmsg());

    /* ---- a plan mapped to one pp rank's stage (pt_pipeline_plan) ---- */
    pt_plan plan;
    pt_plan_default(&plan);
    plan.pp = 2, plan.microbatches = 4, plan.schedule = PT_SCHED_1F1B;
    pt_gpt_config cfg = {.n_layer = 4, .n_head = 4, .n_embd = 32, .seq_len = 8, .vocab = 97};
    pt_pipeline_cfg pc;
    rc = pt_pipeline_plan(&plan, &cfg, 8, 1, &pc);
    tap_ok(rc == 0 && pc.micro == 2 && pc.stage.nchunks == 1 && pc.stage.l0[0] == 2 && pc.stage.l1[0] == 4 &&
               !pc.stage.first && pc.stage.last && pc.stage.nslots == 1 && pc.stage.microbatches == 4,
           "plan pp=2 m=4 1f1b, batch 8: rank 1 holds blocks [%d,%d), last stage, %d slot(s), microbatch %d", pc.stage.l0[0],
           pc.stage.l1[0], pc.stage.nslots, pc.micro);
    plan.schedule = PT_SCHED_INTERLEAVED, plan.virtual_stages = 2;
    rc = pt_pipeline_plan(&plan, &cfg, 8, 0, &pc);
    tap_ok(rc == 0 && pc.stage.nchunks == 2 && pc.stage.first && !pc.stage.last && pc.stage.l0[1] == 2 && pc.stage.l1[1] == 3,
           "plan interleaved v=2: rank 0 holds virtual stages 0 and 2 (blocks [%d,%d) and [%d,%d))", pc.stage.l0[0],
           pc.stage.l1[0], pc.stage.l0[1], pc.stage.l1[1]);
    tap_ok(pt_pipeline_plan(&plan, &cfg, 6, 0, &pc) == PT_EINVAL && contains(pt_errmsg(), "6 sequences", "4 microbatches"),
           "plan with a batch of 6 and m=4 refused: %s", pt_errmsg());
    plan.pp_split_n = 4, plan.pp_split[0] = 1, plan.pp_split[1] = 1, plan.pp_split[2] = 1, plan.pp_split[3] = 2;
    tap_ok(pt_pipeline_plan(&plan, &cfg, 8, 0, &pc) == PT_EINVAL && contains(pt_errmsg(), "sums to 5", "n_layer 4"),
           "plan with --pp-split 1,1,1,2 over 4 blocks refused: %s", pt_errmsg());
    return tap_done();
}
