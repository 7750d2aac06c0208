/* SPDX-License-Identifier: MIT */
/* lib/plan/resolve.c: pt_plan_resolve, the one resolution path of the
 * plugin and ptrain-run.  Pins are honoured (and the result is the search's
 * best plan for them), pins that cannot fit the task count are refused in
 * one line listing the divisors (an independent reference), the
 * administrator's default ZeRO stage is tried and dropped where nothing can
 * shard, a pinned ZeRO stage 0 forbids ZeRO, and a named layout whose tensor
 * group crosses nodes is honoured with one warning note.  Random clusters
 * and requests (seed printed; PTRAIN_TEST_SEED repeats a run). */
#define _POSIX_C_SOURCE 200809L
#include "plan/planner.h"
#include "plan/resolve.h"
#include "tests/tap.h"
#include "tests/unit/plan_cluster.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static uint64_t rng_state;
static unsigned rnd(unsigned n)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (unsigned)((rng_state >> 33) % n);
}

/* A cluster of nnodes x tpn ranks with rates like a GPU node
 * (plan_cluster.h), GEMM rate and network bandwidth drawn fresh. */
static pt_cluster make_cluster(int nnodes, int tpn, int *tasks)
{
    double gemm = 20000 + rnd(30000);
    return plan_test_cluster(nnodes, tpn, 0, gemm, 5 + rnd(20), tasks);
}

/* "1, 2, 4": the divisors of n, the reference for "valid tp here". */
static void ref_divisors(int n, char *buf, size_t len)
{
    size_t off = 0;
    buf[0] = '\0';
    for (int d = 1; d <= n && off < len; d++)
        if (n % d == 0) off += (size_t)snprintf(buf + off, len - off, "%s%d", off ? ", " : "", d);
}

static void req_init(pt_plan *r, pt_mode mode)
{
    pt_plan_default(r);
    r->rank_order[0] = '\0';
    r->tp_order[0] = '\0';
    r->mode = mode;
    r->dp = r->pp = r->tp = r->tp_depth = r->sp = r->microbatches = r->virtual_stages = 0;
}

static const pt_plan_limits all = {1 << 20, ~0u, 1 << 20, 3, ~0u, 0, PT_MIXED_ADAPT, 0, "--ptrain-"};

/* Random requests on random clusters: a request whose pins divide the task
 * count resolves to the search's best plan with every pin honoured; one
 * whose pin does not is refused naming the pin and the divisors. */
static void test_pins(void)
{
    pt_model_shape m;
    pt_model_shape_parse("model", "tiny", &m);
    int honoured = 1, same = 1, refused_ok = 1, nres = 0, nref = 0, npinned = 0;
    for (int trial = 0; trial < 60; trial++) {
        int tasks[4], nnodes = 1 + (int)rnd(3), tpn = 1 << rnd(4);
        pt_cluster c = make_cluster(nnodes, tpn, tasks);
        int n = nnodes * tpn;
        pt_plan req;
        req_init(&req, rnd(3) ? PT_MODE_AUTO : PT_MODE_1D);
        const char *which = NULL;
        int v = 0;
        switch (rnd(4)) {
        case 0: req.tp = v = 1 + (int)rnd(8); which = "tp"; break;
        case 1: req.pp = v = 1 + (int)rnd(4); which = "pp"; break;
        case 2: req.sp = v = 1 + (int)rnd(4); which = "sp"; break;
        default: break;
        }
        int gb = 8 * (1 + (int)rnd(4));
        pt_plan out;
        pt_search_result r, r2;
        char notes[512];
        int rc = pt_plan_resolve(&c, &m, gb, &all, &req, 0, 0, &out, &r, notes, sizeof notes);
        char rmsg[PT_ERROR_LEN]; /* resolve's message, before the search writes its own */
        snprintf(rmsg, sizeof rmsg, "%s", pt_errmsg());
        if (which && n % v) {
            char want[256], list[128];
            ref_divisors(n, list, sizeof list);
            snprintf(want, sizeof want, "--ptrain-%s=%d does not divide the %d tasks of the step (valid %s here: %s)",
                     which, v, n, which, list);
            nref++;
            if (rc != -1 || strcmp(pt_errmsg(), want) != 0) {
                refused_ok = 0;
                tap_diag("trial %d: want '%s', got rc=%d '%s'", trial, want, rc, pt_errmsg());
            }
            continue;
        }
        int src = pt_plan_search(&c, &m, gb, &all, &req, &r2);
        if (rc != src || (rc == 0 && memcmp(&out, &r2.best.plan, sizeof out) != 0) ||
            (rc < 0 && strcmp(rmsg, pt_errmsg()) != 0)) {
            same = 0;
            tap_diag("trial %d: resolve rc=%d '%s', search rc=%d '%s'", trial, rc, rmsg, src, pt_errmsg());
        }
        if (rc < 0) continue;
        nres++;
        npinned += which != NULL;
        if ((req.tp && out.tp != req.tp) || (req.pp && out.pp != req.pp) || (req.sp && out.sp != req.sp) ||
            (long long)out.dp * out.pp * out.tp * out.sp != n || pt_plan_validate(&out, n) != 0 ||
            (req.mode != PT_MODE_AUTO && out.mode != req.mode)) {
            honoured = 0;
            tap_diag("trial %d: pins tp=%d pp=%d sp=%d mode %s not honoured by tp=%d pp=%d sp=%d dp=%d %s", trial,
                     req.tp, req.pp, req.sp, pt_mode_name(req.mode), out.tp, out.pp, out.sp, out.dp,
                     pt_mode_name(out.mode));
        }
    }
    tap_ok(honoured, "%d resolved requests (%d with a pin) honour their pins and cover the world", nres, npinned);
    tap_ok(same, "pt_plan_resolve returns the search's best plan (or its refusal) when the pins fit");
    tap_ok(refused_ok && nref > 0, "%d pins that do not divide the tasks are refused in one line listing "
           "the divisors", nref);
}

/* The administrator's default ZeRO stage and the user's pinned stage. */
static void test_zero(void)
{
    pt_model_shape m;
    pt_model_shape_parse("model", "tiny", &m);
    int tasks[1];
    pt_cluster c = make_cluster(1, 4, tasks);
    pt_plan req, out;
    req_init(&req, PT_MODE_AUTO);
    int rc = pt_plan_resolve(&c, &m, 8, &all, &req, 0, 2, &out, NULL, NULL, 0);
    tap_ok(rc == 0 && out.zero == 2 && out.dp * out.sp >= 2,
           "default_zero 2 is applied where the plan has dp ranks to shard over (%s; dp=%d zero=%d)",
           rc ? pt_errmsg() : "ok", out.dp, out.zero);
    req.tp = 4;
    rc = pt_plan_resolve(&c, &m, 8, &all, &req, 0, 2, &out, NULL, NULL, 0);
    tap_ok(rc == 0 && out.tp == 4 && out.dp == 1 && out.zero == 0,
           "default_zero 2 is dropped, not refused, when tp=4 leaves dp=1 (%s)", rc ? pt_errmsg() : "zero=0");
    req.zero = 1;
    rc = pt_plan_resolve(&c, &m, 8, &all, &req, 1, 0, &out, NULL, NULL, 0);
    tap_ok(rc == -1 && strstr(pt_errmsg(), "zero=1 with dp=1 sp=1") && strstr(pt_errmsg(), "nothing to shard") &&
               !strchr(pt_errmsg(), '\n'),
           "a pinned zero=1 with tp=4 on 4 tasks is refused: %s", pt_errmsg());
    /* a pinned 0 forbids ZeRO even where the search would pick a stage */
    req.tp = 0;
    req.zero = 0;
    int forbid = 1, chose = 0;
    for (int gb = 8; gb <= 64; gb *= 2) {
        pt_search_result r;
        pt_plan_limits lim = all;
        if (pt_plan_resolve(&c, &m, gb, &lim, &req, 1, 3, &out, &r, NULL, 0) < 0) {
            forbid = 0;
            continue;
        }
        if (out.zero != 0) forbid = 0;
        for (int i = 0; i < r.nrunners; i++)
            if (r.runner[i].plan.zero != 0) forbid = 0;
        if (pt_plan_resolve(&c, &m, gb, &lim, &req, 0, 0, &out, NULL, NULL, 0) == 0 && out.zero) chose = 1;
    }
    tap_ok(forbid, "a pinned zero=0 forbids ZeRO in the plan and every runner-up, over default_zero 3%s",
           chose ? " (the search alone chose a stage there)" : "");
    rc = pt_plan_resolve(&c, &m, 8, &all, &req, 0, 4, &out, NULL, NULL, 0);
    tap_ok(rc == -1 && strstr(pt_errmsg(), "default ZeRO stage 4") && strstr(pt_errmsg(), "0..max_zero=3"),
           "default_zero above max_zero is refused: %s", pt_errmsg());
}

/* A named or pinned layout whose tensor group crosses nodes: honoured
 * with one warning line naming the link; inside a node, or chosen by
 * auto, no warning. */
static void test_warning(void)
{
    pt_model_shape m;
    pt_model_shape_parse("model", "tiny", &m);
    int tasks[2];
    pt_cluster c = make_cluster(2, 2, tasks);
    pt_plan req, out;
    char notes[512];
    req_init(&req, PT_MODE_2D);
    int rc = pt_plan_resolve(&c, &m, 8, &all, &req, 0, 0, &out, NULL, notes, sizeof notes);
    tap_ok(rc == 0 && out.mode == PT_MODE_2D && out.tp == 4 &&
               strstr(notes, "ptrain: warning: tp=4 (2d) spans the network link (") == notes && !strchr(notes, '\n'),
           "2d on 2 x 2 tasks: tp=4 honoured with one warning: %s", rc ? pt_errmsg() : notes);
    req_init(&req, PT_MODE_1D);
    req.tp = 4;
    rc = pt_plan_resolve(&c, &m, 8, &all, &req, 0, 0, &out, NULL, notes, sizeof notes);
    tap_ok(rc == 0 && out.tp == 4 && strstr(notes, "tp=4 (1d) spans the network link") &&
               strstr(notes, "predicted tp communication"),
           "--ptrain-tp=4 on 2 x 2: honoured with the warning and its predicted cost");
    req.tp = 2;
    rc = pt_plan_resolve(&c, &m, 8, &all, &req, 0, 0, &out, NULL, notes, sizeof notes);
    tap_ok(rc == 0 && out.tp == 2 && notes[0] == '\0', "--ptrain-tp=2 on 2 x 2 stays in a node: no warning");
    req_init(&req, PT_MODE_AUTO);
    rc = pt_plan_resolve(&c, &m, 8, &all, &req, 0, 0, &out, NULL, notes, sizeof notes);
    tap_ok(rc == 0 && notes[0] == '\0', "auto without pins: no warning (the search weighed the links)");
    /* a short notes buffer is cut, never overrun */
    req_init(&req, PT_MODE_2D);
    char small[24];
    memset(small, 'x', sizeof small);
    rc = pt_plan_resolve(&c, &m, 8, &all, &req, 0, 0, &out, NULL, small, 16);
    tap_ok(rc == 0 && strlen(small) == 15 && small[16] == 'x', "a short notes buffer is cut at its length");
}

static void test_bad_input(void)
{
    pt_model_shape m;
    pt_model_shape_parse("model", "tiny", &m);
    int tasks[2] = {2, 0};
    pt_cluster c = make_cluster(1, 2, tasks);
    c.nnodes = 2;
    pt_plan req, out;
    req_init(&req, PT_MODE_AUTO);
    tap_ok(pt_plan_resolve(&c, &m, 8, &all, &req, 0, 0, &out, NULL, NULL, 0) == -1 &&
               strstr(pt_errmsg(), "node 1 has 0 tasks"),
           "a node without tasks is refused: %s", pt_errmsg());
    c.nnodes = 0;
    tap_ok(pt_plan_resolve(&c, &m, 8, &all, &req, 0, 0, &out, NULL, NULL, 0) == -1 &&
               strstr(pt_errmsg(), "0 nodes"),
           "no nodes is refused: %s", pt_errmsg());
    c.nnodes = 1;
    tap_ok(pt_plan_resolve(&c, &m, 0, &all, &req, 0, 0, &out, NULL, NULL, 0) == -1 &&
               strstr(pt_errmsg(), "global batch 0"),
           "global batch 0 is refused (the search's message): %s", pt_errmsg());
    tap_ok(pt_plan_resolve(NULL, &m, 8, &all, &req, 0, 0, &out, NULL, NULL, 0) == -1,
           "a missing cluster is refused");
    /* the library names the setting; each front end renders its flag
     * (limits' flag_prefix): none, srun's "--ptrain-", ptrain-run's "--" */
    pt_plan_limits lim;
    pt_plan_limits_default(&lim);
    int four[1] = {4};
    pt_cluster c4 = make_cluster(1, 4, four);
    req_init(&req, PT_MODE_AUTO);
    req.tp = 3;
    tap_ok(pt_plan_resolve(&c4, &m, 8, &lim, &req, 0, 0, &out, NULL, NULL, 0) == -1 &&
               strncmp(pt_errmsg(), "tp=3 does not divide the 4 tasks", 32) == 0 && !strstr(pt_errmsg(), "--"),
           "without a front end's prefix the setting is named alone: %s", pt_errmsg());
    req.tp = 2;
    req.sp = 2;
    req.pp = 2;
    char alone[PT_ERROR_LEN] = "";
    tap_ok(pt_plan_resolve(&c4, &m, 8, &lim, &req, 0, 0, &out, NULL, NULL, 0) == -1 &&
               snprintf(alone, sizeof alone, "%s", pt_errmsg()) >= 0 &&
               strncmp(alone, "tp=2 x sp=2 x pp=2 = 8 does not divide", 38) == 0 &&
               pt_plan_resolve(&c4, &m, 8, &all, &req, 0, 0, &out, NULL, NULL, 0) == -1 &&
               strncmp(pt_errmsg(), "--ptrain-tp=2 x --ptrain-sp=2 x --ptrain-pp=2 = 8", 49) == 0,
           "the product of the pins: named alone (%s), as srun's options (%s)", alone, pt_errmsg());
    req.sp = req.pp = 0;
    req.tp = 4;
    req.mode = PT_MODE_3D;
    tap_ok(pt_plan_request_check(&req, &lim) == -1 &&
               strncmp(pt_errmsg(), "tp=4 is not l*l*l for mode=3d", 29) == 0,
           "pt_plan_request_check names the setting alone: %s", pt_errmsg());
    lim.flag_prefix = "--";
    tap_ok(pt_plan_request_check(&req, &lim) == -1 &&
               strncmp(pt_errmsg(), "--tp=4 is not l*l*l for --mode=3d", 33) == 0,
           "... and as ptrain-run's flags under the prefix \"--\": %s", pt_errmsg());
    req_init(&req, PT_MODE_OFF);
    c4 = make_cluster(1, 4, four);
    static pt_search_result sr;
    tap_ok(pt_plan_search(&c4, &m, 8, &lim, &req, &sr) == -1 &&
               strncmp(pt_errmsg(), "--mode=off plans nothing", 24) == 0,
           "pt_plan_search names the setting as the front end spells it: %s", pt_errmsg());
    char f[8];
    tap_ok(strcmp(pt_plan_flag(NULL, "tp-depth", f, sizeof f), "tp-dept") == 0 &&
               strcmp(pt_plan_flag(&all, "tp", f, sizeof f), "--ptrai") == 0,
           "pt_plan_flag cuts to the buffer: %s", f);
}

/* The planning handle and the request builder (lib/plan/planner.h). */
struct fake_env { const char *names[8], *values[8]; int n; };
static int fake_get(void *arg, const char *name, char *buf, int len)
{
    const struct fake_env *f = arg;
    for (int i = 0; i < f->n; i++)
        if (!strcmp(f->names[i], name)) {
            if ((int)strlen(f->values[i]) >= len) return -1;
            snprintf(buf, (size_t)len, "%s", f->values[i]);
            return 1;
        }
    return 0;
}

static void test_planner(void)
{
    pt_plan_limits lim;
    pt_plan_limits_default(&lim);
    pt_plan_request r;
    pt_plan_request_init(&r, PT_MODE_AUTO);
    tap_ok(r.pinned == 0 && r.plan.tp == 0 && !r.plan.rank_order[0] && !r.plan.tp_order[0] && r.global_batch == 8 &&
               !strcmp(r.model_name, "tiny"),
           "request defaults: nothing pinned, sizes and orders chosen, model tiny, batch 8");
    /* a flag pins; the environment fills what no flag pinned */
    int ok = pt_plan_request_set(&r, &lim, "tp", "--tp", "4") == 0;
    struct fake_env env = {{"PTRAIN_TP", "PTRAIN_PP", "PTRAIN_ZERO", "PTRAIN_MODEL", "PTRAIN_TP_ORDER"},
                           {"2", "2", "0", "test", "021"}, 5};
    ok = ok && pt_plan_request_env(&r, &lim, fake_get, &env) == 0;
    tap_ok(ok && r.plan.tp == 4 && r.plan.pp == 2 && r.plan.zero == 0 && !strcmp(r.plan.tp_order, "021") &&
               r.model.n_layer == 2 && (r.pinned & (PT_PIN_TP | PT_PIN_PP | PT_PIN_ZERO | PT_PIN_MODEL | PT_PIN_TP_ORDER)) ==
                   (PT_PIN_TP | PT_PIN_PP | PT_PIN_ZERO | PT_PIN_MODEL | PT_PIN_TP_ORDER) && !(r.pinned & PT_PIN_SP),
           "request: a flag wins over its variable (tp 4, not PTRAIN_TP=2), the variables fill and pin the rest");
    /* one line per bad value, with the plugin's wording */
    pt_plan_request q = r;
    lim.max_tp = 8;
    tap_ok(pt_plan_request_set(&q, &lim, "tp", "PTRAIN_TP", "16") < 0 && !strcmp(pt_errmsg(), "PTRAIN_TP=16 exceeds this "
           "cluster's max_tp=8") && q.plan.tp == 4, "request: tp over max_tp refused, request unchanged: %s", pt_errmsg());
    tap_ok(pt_plan_request_set(&q, &lim, "zero", "--ptrain-zero", "4") < 0 &&
               strstr(pt_errmsg(), "--ptrain-zero='4' is invalid (valid ZeRO stages: 0, 1, 2, 3)"),
           "request: zero 4 refused: %s", pt_errmsg());
    tap_ok(pt_plan_request_set(&q, &lim, "width", "--width", "4") < 0 && strstr(pt_errmsg(), "unknown request key 'width'"),
           "request: an unknown key refused naming the valid ones: %s", pt_errmsg());
    /* the recompute mode: PTRAIN_RECOMPUTE, or PTRAIN_CKPT_ACT its old
     * name; both naming two modes is refused naming both */
    static const char *rc_names[] = {"none", "block", "attention"};
    const int rm = (int)rnd(3), other = (rm + 1 + (int)rnd(2)) % 3;
    struct fake_env rc_new = {{"PTRAIN_RECOMPUTE"}, {rc_names[rm]}, 1};
    struct fake_env rc_old = {{"PTRAIN_CKPT_ACT"}, {rc_names[rm]}, 1};
    struct fake_env rc_both = {{"PTRAIN_RECOMPUTE", "PTRAIN_CKPT_ACT"}, {rc_names[rm], rc_names[other]}, 2};
    pt_plan_request_init(&q, PT_MODE_AUTO);
    ok = pt_plan_request_env(&q, &lim, fake_get, &rc_new) == 0 && q.plan.recompute == rm &&
         (q.pinned & PT_PIN_RECOMPUTE);
    pt_plan_request_init(&q, PT_MODE_AUTO);
    ok = ok && pt_plan_request_env(&q, &lim, fake_get, &rc_old) == 0 && q.plan.recompute == rm &&
         (q.pinned & PT_PIN_RECOMPUTE);
    tap_ok(ok, "request: PTRAIN_RECOMPUTE=%s and, alone, PTRAIN_CKPT_ACT=%s are read and pinned", rc_names[rm],
           rc_names[rm]);
    pt_plan_request_init(&q, PT_MODE_AUTO);
    char differ[128];
    snprintf(differ, sizeof differ, "PTRAIN_RECOMPUTE=%s and PTRAIN_CKPT_ACT=%s differ", rc_names[rm], rc_names[other]);
    tap_ok(pt_plan_request_env(&q, &lim, fake_get, &rc_both) < 0 && strstr(pt_errmsg(), differ) && !q.pinned,
           "request: PTRAIN_RECOMPUTE and PTRAIN_CKPT_ACT naming two modes are refused naming both: %s", pt_errmsg());
    rc_both.values[1] = rc_names[rm];
    tap_ok(pt_plan_request_env(&q, &lim, fake_get, &rc_both) == 0 && q.plan.recompute == rm,
           "request: both naming the same mode are read");
    char big[300];
    memset(big, '7', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    struct fake_env longv = {{"PTRAIN_MODEL"}, {big}, 1};
    pt_plan_request_init(&q, PT_MODE_AUTO);
    tap_ok(pt_plan_request_env(&q, &lim, fake_get, &longv) < 0 && strstr(pt_errmsg(), "PTRAIN_MODEL in the job environment "
           "is longer than 255 bytes"), "request: a variable too long for its buffer refused: %s", pt_errmsg());
    pt_plan_limits_default(&lim);

    /* the handle plans what pt_plan_resolve plans for the same request */
    int tasks[2];
    pt_cluster c = make_cluster(2, 4, tasks);
    pt_plan_request_init(&r, PT_MODE_AUTO);
    pt_plan_request_set(&r, &lim, "model", "--model", "small");
    pt_plan_request_set(&r, &lim, "batch", "--batch", "16");
    pt_planner *p = pt_planner_new(&c, &lim);
    ok = p && pt_planner_set_request(p, &r) == 0 && pt_planner_run(p) == 0;
    pt_plan want, req;
    req_init(&req, PT_MODE_AUTO);
    pt_model_shape small;
    pt_model_preset("small", &small);
    ok = ok && pt_plan_resolve(&c, &small, 16, &lim, &req, 0, 0, &want, NULL, NULL, 0) == 0;
    char a[640] = "", b[640] = "";
    if (ok) pt_plan_summary(pt_planner_plan(p), a, sizeof a), pt_plan_summary(&want, b, sizeof b);
    size_t need = ok ? pt_planner_explain(p, NULL, 0) : 0;
    tap_ok(ok && !strcmp(a, b) && need > 0 && pt_planner_result(p)->best.plan.tp == pt_planner_plan(p)->tp,
           "planner: the plan of pt_plan_resolve for the same request (%s), with an explanation of %zu bytes", a, need);
    /* a pinned 1f1b is the only schedule (the search would try
     * interleaved); a pinned ZeRO 0 forbids ZeRO over a default of 1 */
    pt_plan_request_set(&r, &lim, "pp", "--pp", "2");
    pt_plan_request_set(&r, &lim, "schedule", "--schedule", "1f1b");
    pt_plan_request_set(&r, &lim, "zero", "--zero", "0");
    lim.default_zero = 1;
    pt_planner_free(p);
    p = pt_planner_new(&c, &lim);
    ok = p && pt_planner_set_request(p, &r) == 0 && pt_planner_run(p) == 0;
    const pt_search_result *res = ok ? pt_planner_result(p) : NULL;
    int all = ok;
    for (int i = 0; res && i <= res->nrunners; i++) {
        const pt_plan *x = i ? &res->runner[i - 1].plan : &res->best.plan;
        if (x->schedule != PT_SCHED_1F1B || x->zero != 0 || x->pp != 2) all = 0;
    }
    tap_ok(all, "planner: pinned pp=2, 1f1b and zero 0 hold for the winner and every runner-up (default_zero 1)");
    /* the unpinned zero takes the administrator's default where it fits */
    pt_plan_request_init(&r, PT_MODE_AUTO);
    pt_plan_request_set(&r, &lim, "model", "--model", "small");
    pt_plan_request_set(&r, &lim, "batch", "--batch", "16");
    pt_plan_request_set(&r, &lim, "tp", "--tp", "1");
    pt_plan_request_set(&r, &lim, "pp", "--pp", "1");
    ok = pt_planner_set_request(p, &r) == 0 && pt_planner_run(p) == 0 && pt_planner_plan(p)->zero == 1;
    tap_ok(ok, "planner: default_zero 1 applies to a request that pins no ZeRO stage (%s)", ok ? "zero=1" : pt_errmsg());
    pt_planner_free(p);
    tap_ok(pt_planner_new(NULL, &lim) == NULL && strstr(pt_errmsg(), "no cluster"), "planner: no cluster refused: %s",
           pt_errmsg());
    lim.default_zero = 4;
    tap_ok(pt_planner_new(&c, &lim) == NULL && strstr(pt_errmsg(), "invalid limits"), "planner: bad limits refused: %s",
           pt_errmsg());
    /* mixed nodes: refused when the limits say so, planned otherwise */
    pt_plan_limits_default(&lim);
    int kind_of[2] = {0, 1};
    pt_node_kind kinds[2];
    memset(kinds, 0, sizeof kinds);
    kinds[0].name = "a.json", kinds[0].hw = c.hw;
    kinds[1].name = "b.json", kinds[1].hw = c.hw;
    kinds[1].hw.gemm_gflops *= 2;
    pt_cluster mc = c;
    mc.nkinds = 2, mc.kinds = kinds, mc.kind_of = kind_of;
    pt_cluster_slowest(&mc, &mc.hw, NULL);
    lim.mixed = PT_MIXED_REFUSE;
    p = pt_planner_new(&mc, &lim);
    ok = p && pt_planner_set_request(p, &r) == 0 && pt_planner_run(p) < 0 &&
         strstr(pt_errmsg(), "2 kinds (1 x a.json") && strstr(pt_errmsg(), "mixed_nodes=refuse");
    tap_ok(ok, "planner: mixed nodes refused under mixed_nodes=refuse: %s", pt_errmsg());
    pt_planner_free(p);
    lim.mixed = PT_MIXED_ADAPT;
    p = pt_planner_new(&mc, &lim);
    ok = p && pt_planner_set_request(p, &r) == 0 && pt_planner_run(p) == 0 &&
         strstr(pt_planner_result(p)->limit, "a.json for compute");
    tap_ok(ok, "planner: mixed nodes adapted to, the limiting node named (%s)", ok ? pt_planner_result(p)->limit : pt_errmsg());
    pt_planner_free(p);
}

int main(void)
{
    const char *seed_env = getenv("PTRAIN_TEST_SEED");
    uint64_t seed = seed_env ? strtoull(seed_env, NULL, 10) : (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 16);
    rng_state = seed;
    tap_diag("seed %llu (set PTRAIN_TEST_SEED to repeat)", (unsigned long long)seed);
    test_pins();
    test_zero();
    test_warning();
    test_bad_input();
    test_planner();
    return tap_done();
}
