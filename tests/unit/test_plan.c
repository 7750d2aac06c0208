/* SPDX-License-Identifier: MIT */
/* lib/plan: environment round trip, validation messages against
 * independent references of the modes' shapes, request checks,
 * coordinates and placement (pt_plan_resolve has tests/unit/test_resolve.c).
 * Geometries are drawn at random (seed printed; PTRAIN_TEST_SEED repeats a
 * run). */
#define _POSIX_C_SOURCE 200809L
#include "contract/plan.h"
#include "tests/tap.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static uint64_t rng_state;
static unsigned rnd(unsigned n) /* uniform-ish in [0, n) */
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (unsigned)((rng_state >> 33) % n);
}

static const char *plan_vars[] = {
    "PTRAIN_MODE", "PTRAIN_DP", "PTRAIN_PP", "PTRAIN_TP", "PTRAIN_TP_DEPTH", "PTRAIN_SP",
    "PTRAIN_ZERO", "PTRAIN_MICROBATCHES", "PTRAIN_SCHEDULE", "PTRAIN_VIRTUAL_STAGES",
    "PTRAIN_PP_SPLIT", "PTRAIN_RECOMPUTE", "PTRAIN_PRECISION", "PTRAIN_RANK_ORDER", "PTRAIN_TP_ORDER",
    "PTRAIN_PLAN",
};
#define N_VARS (sizeof plan_vars / sizeof plan_vars[0])

static void clear_env(void)
{
    for (size_t i = 0; i < N_VARS; i++) unsetenv(plan_vars[i]);
    unsetenv("PTRAIN_CKPT_ACT"); /* PTRAIN_RECOMPUTE's old name, read, never exported */
}

struct seen { int count[N_VARS]; int others; char plan_line[640]; };
static int set_env_cb(const char *name, const char *value, void *arg)
{
    struct seen *s = arg;
    int known = 0;
    for (size_t i = 0; i < N_VARS; i++)
        if (strcmp(plan_vars[i], name) == 0) s->count[i]++, known = 1;
    if (!known) {
        s->others++;
        tap_diag("export set %s, which is not a plan variable", name);
    }
    if (strcmp(name, "PTRAIN_PLAN") == 0) snprintf(s->plan_line, sizeof s->plan_line, "%s", value);
    return setenv(name, value, 1);
}
static int failing_cb(const char *name, const char *value, void *arg)
{
    (void)value;
    int *n = arg;
    return ++*n == 3 ? 42 : 0;
    (void)name;
}

static int same_plan(const pt_plan *a, const pt_plan *b)
{
    return a->mode == b->mode && a->dp == b->dp && a->pp == b->pp && a->tp == b->tp &&
           a->tp_depth == b->tp_depth && a->sp == b->sp && a->zero == b->zero &&
           a->microbatches == b->microbatches && a->recompute == b->recompute &&
           strcmp(a->rank_order, b->rank_order) == 0 &&
           strcmp(a->tp_order, b->tp_order) == 0 &&
           a->schedule == b->schedule && a->virtual_stages == b->virtual_stages &&
           a->pp_split_n == b->pp_split_n &&
           memcmp(a->pp_split, b->pp_split, sizeof(int) * (size_t)a->pp_split_n) == 0;
}

static void random_order(char out[4])
{
    static const char *perms[] = {"DPT", "DTP", "PDT", "PTD", "TDP", "TPD"};
    memcpy(out, perms[rnd(6)], 4);
}

static void test_env_round_trip(void)
{
    int ok_all = 1, each_once = 1;
    for (int trial = 0; trial < 50; trial++) {
        pt_plan p;
        pt_plan_default(&p);
        /* Any field values (the environment must carry them even if this
         * build cannot run them). */
        p.mode = (pt_mode)(2 + rnd(4));
        p.dp = 1 + (int)rnd(64);
        p.pp = 1 + (int)rnd(8);
        p.tp = 1 + (int)rnd(16);
        p.tp_depth = 1 + (int)rnd(4);
        p.sp = 1 + (int)rnd(4);
        p.zero = (int)rnd(4);
        p.microbatches = 1 + (int)rnd(32);
        p.recompute = (int)rnd(3);
        p.schedule = (int)rnd(3);
        p.virtual_stages = 1 + (int)rnd(PT_VIRTUAL_STAGES_MAX);
        p.pp_split_n = rnd(3) ? 0 : 1 + (int)rnd(PT_PP_SPLIT_MAX);
        for (int i = 0; i < p.pp_split_n; i++) p.pp_split[i] = 1 + (int)rnd(rnd(2) ? 9 : 4096);
        random_order(p.rank_order);
        static const char *tpo[] = {"012", "021", "102", "120", "201", "210"};
        memcpy(p.tp_order, tpo[rnd(6)], 4);
        clear_env();
        struct seen s;
        memset(&s, 0, sizeof s);
        if (pt_plan_export(&p, set_env_cb, &s) != 0) ok_all = 0;
        for (size_t i = 0; i < N_VARS; i++)
            if (s.count[i] != 1) each_once = 0;
        if (s.others) each_once = 0;
        pt_plan q;
        pt_plan_default(&q);
        int rc = pt_plan_from_env(&q);
        if (rc != 1 || !same_plan(&p, &q)) {
            ok_all = 0;
            tap_diag("trial %d: rc=%d err=%s", trial, rc, pt_errmsg());
        }
        char line[640];
        pt_plan_summary(&p, line, sizeof line);
        if (strcmp(line, s.plan_line) != 0) ok_all = 0;
        /* the summary names every non-default pipeline setting */
        char want[64];
        if (p.recompute) {
            snprintf(want, sizeof want, " recompute=%s", pt_recompute_name(p.recompute));
            if (!strstr(line, want)) ok_all = 0;
        }
        if (p.virtual_stages > 1) {
            snprintf(want, sizeof want, " virtual_stages=%d", p.virtual_stages);
            if (!strstr(line, want)) ok_all = 0;
        }
        if (p.pp_split_n && (!strstr(line, " split=") || strstr(line, "..."))) ok_all = 0;
    }
    tap_ok(ok_all, "export -> from_env round trip restores every field (50 random plans)");
    tap_ok(each_once, "export sets each of the %zu PTRAIN_* variables exactly once, and no other (no "
                      "PTRAIN_OFFLOAD, no PTRAIN_CKPT_ACT)", N_VARS);

    int calls = 0;
    pt_plan p;
    pt_plan_default(&p);
    tap_ok(pt_plan_export(&p, failing_cb, &calls) == 42 && calls == 3,
           "export stops at and returns the first non-zero set() result");

    clear_env();
    pt_plan q;
    pt_plan_default(&q);
    pt_plan before = q;
    tap_ok(pt_plan_from_env(&q) == 0 && same_plan(&q, &before),
           "from_env with no PTRAIN_* variables returns 0 and changes nothing");
    setenv("PTRAIN_TP", "4", 1);
    tap_ok(pt_plan_from_env(&q) == 1 && q.tp == 4 && q.dp == 1,
           "from_env overlays only the variables present");
    clear_env();
    pt_plan_default(&q);
    setenv("PTRAIN_MODE", "2.5d", 1);
    setenv("PTRAIN_TP", "8", 1);
    setenv("PTRAIN_TP_DEPTH", "2", 1);
    setenv("PTRAIN_SP", "3", 1);
    tap_ok(pt_plan_from_env(&q) == 1 && q.mode == PT_MODE_2P5D && q.tp == 8 &&
               q.tp_depth == 2 && q.sp == 3,
           "PTRAIN_MODE=2.5d PTRAIN_TP_DEPTH=2 PTRAIN_SP=3 are read");
    clear_env();
    setenv("PTRAIN_RANK_ORDER", "spread", 1);
    tap_ok(pt_plan_from_env(&q) == 1 && strcmp(q.rank_order, "TPD") == 0,
           "PTRAIN_RANK_ORDER=spread means TPD");
    setenv("PTRAIN_RANK_ORDER", "tdp", 1);
    tap_ok(pt_plan_from_env(&q) == 1 && strcmp(q.rank_order, "TDP") == 0,
           "PTRAIN_RANK_ORDER accepts lower case");
    clear_env();
    pt_plan_default(&q);
    setenv("PTRAIN_CKPT_ACT", "1", 1);
    tap_ok(pt_plan_from_env(&q) == 1 && q.recompute == PT_RECOMPUTE_BLOCK,
           "PTRAIN_CKPT_ACT=1 (earlier versions) means block");
    setenv("PTRAIN_CKPT_ACT", "0", 1);
    tap_ok(pt_plan_from_env(&q) == 1 && q.recompute == PT_RECOMPUTE_NONE,
           "PTRAIN_CKPT_ACT=0 means none");
    setenv("PTRAIN_CKPT_ACT", "attention", 1);
    setenv("PTRAIN_SCHEDULE", "gpipe", 1);
    setenv("PTRAIN_PP_SPLIT", "3,3,2,2", 1);
    tap_ok(pt_plan_from_env(&q) == 1 && q.recompute == PT_RECOMPUTE_ATTENTION &&
               q.schedule == PT_SCHED_GPIPE && q.pp_split_n == 4 && q.pp_split[0] == 3 &&
               q.pp_split[3] == 2,
           "PTRAIN_CKPT_ACT=attention PTRAIN_SCHEDULE=gpipe PTRAIN_PP_SPLIT=3,3,2,2 are read");
    setenv("PTRAIN_PP_SPLIT", "even", 1);
    tap_ok(pt_plan_from_env(&q) == 1 && q.pp_split_n == 0, "PTRAIN_PP_SPLIT=even clears the split");
    /* PTRAIN_RECOMPUTE, and PTRAIN_CKPT_ACT its old name: either, or both
     * naming the same mode; two modes are refused naming both */
    clear_env();
    pt_plan_default(&q);
    const char *modes[] = {"none", "block", "attention"};
    int r = (int)rnd(3);
    setenv("PTRAIN_RECOMPUTE", modes[r], 1);
    tap_ok(pt_plan_from_env(&q) == 1 && q.recompute == r, "PTRAIN_RECOMPUTE=%s is read", modes[r]);
    setenv("PTRAIN_CKPT_ACT", r == PT_RECOMPUTE_BLOCK ? "1" : r == PT_RECOMPUTE_NONE ? "0" : "attention", 1);
    tap_ok(pt_plan_from_env(&q) == 1 && q.recompute == r,
           "PTRAIN_RECOMPUTE=%s beside PTRAIN_CKPT_ACT=%s (the same mode) is read", modes[r], getenv("PTRAIN_CKPT_ACT"));
    int other = (r + 1 + (int)rnd(2)) % 3;
    setenv("PTRAIN_CKPT_ACT", modes[other], 1);
    before = q;
    char want[160];
    snprintf(want, sizeof want, "PTRAIN_RECOMPUTE=%s and PTRAIN_CKPT_ACT=%s differ", modes[r], modes[other]);
    tap_ok(pt_plan_from_env(&q) == -1 && strstr(pt_errmsg(), want) && same_plan(&q, &before) &&
               !strchr(pt_errmsg(), '\n'),
           "PTRAIN_RECOMPUTE=%s beside PTRAIN_CKPT_ACT=%s is refused naming both: %s", modes[r], modes[other],
           pt_errmsg());
    setenv("PTRAIN_CKPT_ACT", "full", 1);
    tap_ok(pt_plan_from_env(&q) == -1 && strstr(pt_errmsg(), "invalid PTRAIN_CKPT_ACT 'full'"),
           "a bad PTRAIN_CKPT_ACT beside PTRAIN_RECOMPUTE is refused by its name: %s", pt_errmsg());
    clear_env();
    setenv("PTRAIN_OFFLOAD", "1", 1);
    pt_plan_default(&q);
    before = q;
    tap_ok(pt_plan_from_env(&q) == 0 && same_plan(&q, &before),
           "PTRAIN_OFFLOAD is no plan variable (optimizer offload does not exist)");
    unsetenv("PTRAIN_OFFLOAD");
    clear_env();
}

/* from_env on one bad variable: -1, the plan untouched, and the message names the value. */
static void env_bad(const char *var, const char *value)
{
    clear_env();
    setenv(var, value, 1);
    pt_plan q, before;
    pt_plan_default(&q);
    before = q;
    int rc = pt_plan_from_env(&q);
    tap_ok(rc == -1 && strstr(pt_errmsg(), value) && strstr(pt_errmsg(), "valid") && same_plan(&q, &before) &&
               !strchr(pt_errmsg(), '\n'),
           "%s='%s' refused: %s", var, value, pt_errmsg());
    clear_env();
}

static void validate_bad(const pt_plan *p, int world, const char *must_contain, const char *what)
{
    int rc = pt_plan_validate(p, world);
    tap_ok(rc == -1 && strstr(pt_errmsg(), must_contain) != NULL && !strchr(pt_errmsg(), '\n'),
           "validate refuses %s: %s", what, pt_errmsg());
}

static void validate_good(const pt_plan *p, int world, const char *what)
{
    int rc = pt_plan_validate(p, world);
    tap_ok(rc == 0, "validate accepts %s%s%s", what, rc ? ": " : "", rc ? pt_errmsg() : "");
}

/* ---- independent references for the layouts' shapes -------------------- */

/* 1 if t has the tensor grid shape of mode m: q*q (2d), depth*q*q (2.5d;
 * depth 0 = any), l*l*l (3d), anything (1d/off).  By search, not by
 * plan.c's code. */
static int ref_shape(pt_mode m, int depth, int t)
{
    if (m == PT_MODE_2D) depth = 1;
    if (m == PT_MODE_2D || m == PT_MODE_2P5D) {
        if (depth == 0) return 1;
        for (int q = 1; (long long)depth * q * q <= t; q++)
            if (depth * q * q == t) return 1;
        return 0;
    }
    if (m == PT_MODE_3D) {
        for (int l = 1; (long long)l * l * l <= t; l++)
            if (l * l * l == t) return 1;
        return 0;
    }
    return 1;
}

/* The text an error must end its list with: "valid tp here: 1, 4)",
 * "valid tp with tp_depth=2 here: 2, 8)" or, for 2.5d with any depth,
 * "valid (tp_depth, tp) here: (1, 1), (2, 2))"; "none" when empty. */
static void ref_valid(pt_mode m, int depth, int n, int cap, char *buf, size_t len)
{
    char list[512] = "";
    size_t k = 0;
    if (m == PT_MODE_2P5D && depth == 0) {
        for (int d = 1; d <= n; d++)
            for (int q = 1; d * q * q <= n; q++)
                if (n % (d * q * q) == 0 && d * q * q <= cap)
                    k += (size_t)snprintf(list + k, sizeof list - k, "%s(%d, %d)", k ? ", " : "",
                                          d, d * q * q);
        snprintf(buf, len, "valid (tp_depth, tp) here: %s)", k ? list : "none");
        return;
    }
    for (int t = 1; t <= n && t <= cap; t++)
        if (n % t == 0 && ref_shape(m, depth, t))
            k += (size_t)snprintf(list + k, sizeof list - k, "%s%d", k ? ", " : "", t);
    if (m == PT_MODE_2P5D)
        snprintf(buf, len, "valid tp with tp_depth=%d here: %s)", depth, k ? list : "none");
    else
        snprintf(buf, len, "valid tp here: %s)", k ? list : "none");
}

static const pt_mode grid_modes[] = {PT_MODE_1D, PT_MODE_2D, PT_MODE_2P5D, PT_MODE_3D};

/* validate on random worlds, modes and sizes against the references: a
 * plan is accepted exactly when it has the mode's shape and covers the
 * world, and a refusal lists exactly the sizes that would fit. */
static void validate_modes(void)
{
    int agree = 1, lists = 1, n_ok = 0, n_bad = 0;
    for (int trial = 0; trial < 1500; trial++) {
        pt_plan p;
        pt_plan_default(&p);
        int world = 1 + (int)rnd(40);
        p.mode = grid_modes[rnd(4)];
        p.tp_depth = p.mode == PT_MODE_2P5D ? 1 + (int)rnd(4) : 1;
        p.tp = 1 + (int)rnd((unsigned)world);
        p.dp = world % p.tp == 0 && rnd(4) ? world / p.tp : 1 + (int)rnd(6);
        char want[512];
        int rc = pt_plan_validate(&p, world);
        int shape = ref_shape(p.mode, p.tp_depth, p.tp), covers = p.dp * p.tp == world;
        if (shape && covers) {
            n_ok++;
            if (rc != 0) {
                agree = 0;
                tap_diag("mode %s world %d dp=%d tp=%d depth=%d refused: %s",
                         pt_mode_name(p.mode), world, p.dp, p.tp, p.tp_depth, pt_errmsg());
            }
            continue;
        }
        n_bad++;
        ref_valid(p.mode, p.tp_depth, world, INT_MAX, want, sizeof want);
        char tpname[32];
        snprintf(tpname, sizeof tpname, "tp=%d", p.tp);
        if (rc != -1 || !strstr(pt_errmsg(), tpname) || strchr(pt_errmsg(), '\n')) agree = 0;
        if (!strstr(pt_errmsg(), want)) {
            lists = 0;
            tap_diag("mode %s world %d dp=%d tp=%d depth=%d: '%s' lacks '%s'",
                     pt_mode_name(p.mode), world, p.dp, p.tp, p.tp_depth, pt_errmsg(), want);
        }
    }
    tap_ok(agree, "validate accepts a 1d/2d/2.5d/3d plan exactly when tp has the mode's shape "
           "and the plan covers the world (%d valid, %d invalid random plans)", n_ok, n_bad);
    tap_ok(lists, "every refusal lists exactly the tp values of the mode that divide the world");

    pt_plan p;
    pt_plan_default(&p);
    p.mode = PT_MODE_2D;
    p.tp = 6;
    p.dp = 2;
    validate_bad(&p, 12, "valid tp here: 1, 4)", "2d tp=6 on 12 ranks (lists 1, 4)");
    p.tp = 4;
    p.dp = 1;
    validate_bad(&p, 6, "valid tp here: 1)", "2d tp=4 on 6 ranks (lists only 1)");
    p.dp = 2;
    tap_ok(pt_plan_validate(&p, 8) == 0, "2d dp=2 tp=4 valid on 8 ranks");
    p.mode = PT_MODE_2P5D;
    p.tp = 8;
    p.tp_depth = 2;
    p.dp = 1;
    tap_ok(pt_plan_validate(&p, 8) == 0, "2.5d tp=8 tp_depth=2 valid on 8 ranks");
    validate_bad(&p, 12, "valid tp with tp_depth=2 here: 2)", "2.5d tp=8 depth 2 on 12 ranks");
    p.tp_depth = 3;
    validate_bad(&p, 8, "valid tp with tp_depth=3 here: none)", "2.5d tp=8 depth 3 on 8 ranks");
    p.mode = PT_MODE_3D;
    p.tp_depth = 1;
    tap_ok(pt_plan_validate(&p, 8) == 0, "3d tp=8 valid on 8 ranks");
    p.tp = 4;
    p.dp = 4;
    validate_bad(&p, 16, "valid tp here: 1, 8)", "3d tp=4 on 16 ranks (lists the cubes 1, 8)");
    p.mode = PT_MODE_2D;
    p.tp_depth = 2;
    validate_bad(&p, 16, "tp_depth=2", "tp_depth=2 in mode 2d");

    char buf[256];
    tap_ok(pt_plan_list_tp(PT_MODE_2P5D, 0, 8, 64, buf, sizeof buf) == 6 &&
               strcmp(buf, "(1, 1), (1, 4), (2, 2), (2, 8), (4, 4), (8, 8)") == 0,
           "2.5d pairs (tp_depth, tp) for 8 ranks: %s", buf);
    tap_ok(pt_plan_list_tp(PT_MODE_1D, 1, 720720, 1 << 20, buf, 40) == 240 &&
               strlen(buf) < 40 && strstr(buf, "...") && !strstr(buf, ", ,"),
           "a list that does not fit ends in '...' and still counts every size: %s", buf);
}

static void test_validation(void)
{
    env_bad("PTRAIN_MODE", "bogus");
    env_bad("PTRAIN_MODE", "1D ");
    env_bad("PTRAIN_DP", "0");
    env_bad("PTRAIN_DP", "two");
    env_bad("PTRAIN_TP", "-2");
    env_bad("PTRAIN_TP", "4x");
    env_bad("PTRAIN_TP", "");
    env_bad("PTRAIN_PP", "99999999999999");
    env_bad("PTRAIN_ZERO", "4");
    env_bad("PTRAIN_CKPT_ACT", "2");
    env_bad("PTRAIN_CKPT_ACT", "full");
    env_bad("PTRAIN_RECOMPUTE", "2");
    env_bad("PTRAIN_RECOMPUTE", "full");
    env_bad("PTRAIN_SCHEDULE", "zb-h1");
    env_bad("PTRAIN_SCHEDULE", "1F1B");
    env_bad("PTRAIN_VIRTUAL_STAGES", "0");
    env_bad("PTRAIN_VIRTUAL_STAGES", "17");
    env_bad("PTRAIN_PP_SPLIT", "3,,2");
    env_bad("PTRAIN_PP_SPLIT", "3,0,2");
    env_bad("PTRAIN_PP_SPLIT", "3,2,");
    env_bad("PTRAIN_PP_SPLIT", "-1,2");
    env_bad("PTRAIN_PP_SPLIT", "99999999999,1");
    env_bad("PTRAIN_MICROBATCHES", "0");
    env_bad("PTRAIN_TP_DEPTH", "0");
    env_bad("PTRAIN_TP_DEPTH", "2.5");
    env_bad("PTRAIN_SP", "-1");
    env_bad("PTRAIN_SP", "many");
    env_bad("PTRAIN_RANK_ORDER", "DPP");
    env_bad("PTRAIN_RANK_ORDER", "DPTX");

    pt_mode m;
    tap_ok(pt_mode_parse("2.5d", &m) == 0 && m == PT_MODE_2P5D &&
               strcmp(pt_mode_name(m), "2.5d") == 0,
           "mode names round trip (2.5d)");
    int names_ok = 1;
    for (int i = PT_MODE_OFF; i <= PT_MODE_3D; i++)
        if (pt_mode_parse(pt_mode_name((pt_mode)i), &m) != 0 || (int)m != i)
            names_ok = 0;
    tap_ok(names_ok, "every mode name parses back to its mode");

    pt_plan p;
    pt_plan_default(&p);
    p.dp = 2;
    p.tp = 2;
    tap_ok(pt_plan_validate(&p, 4) == 0, "1d dp=2 tp=2 valid on 4 ranks");
    tap_ok(pt_plan_validate(&p, 0) == 0, "world_size 0 skips the world check");
    validate_bad(&p, 6, "6", "a plan that does not cover the world (names the world size)");
    p.mode = PT_MODE_OFF;
    tap_ok(pt_plan_validate(&p, 4) == 0, "mode off is accepted");

    validate_modes();
    pt_plan_default(&p);
    p.mode = PT_MODE_AUTO;
    validate_bad(&p, 1, "auto", "unresolved mode auto");
    pt_plan_default(&p);
    p.pp = 2;
    tap_ok(pt_plan_validate(&p, 2) == 0, "pp=2 valid on 2 ranks (pipeline supported)");
    pt_plan_default(&p);
    p.sp = 3;
    p.dp = 2;
    tap_ok(pt_plan_validate(&p, 6) == 0, "1d dp=2 sp=3 valid on 6 ranks");
    validate_bad(&p, 8, "valid sp here: 1, 2, 4, 8", "dp=2 sp=3 on 8 ranks (lists the sp values)");
    /* ring attention over the sp group runs on each rank's heads: sp composes
     * with every tensor-parallel layout */
    p.tp = 2;
    validate_good(&p, 12, "1d dp=2 tp=2 sp=3 on 12 ranks");
    validate_bad(&p, 8, "valid sp here: 1, 2, 4)", "dp=2 tp=2 sp=3 on 8 ranks (lists the sp values tp=2 leaves)");
    p.mode = PT_MODE_2D;
    p.tp = 4;
    p.sp = 2;
    p.dp = 1;
    validate_good(&p, 8, "2d tp=4 sp=2 on 8 ranks");
    p.mode = PT_MODE_2P5D;
    p.tp = 8;
    p.tp_depth = 2;
    validate_good(&p, 16, "2.5d tp=8 depth=2 sp=2 on 16 ranks");
    p.mode = PT_MODE_3D;
    p.tp_depth = 1;
    validate_good(&p, 16, "3d tp=8 sp=2 on 16 ranks");
    pt_plan_default(&p);
    p.zero = 2;
    validate_bad(&p, 1, "zero=2 with dp=1 sp=1: ZeRO shards the optimizer state over the "
                 "data-parallel ranks and this plan has one, so there is nothing to shard "
                 "(valid: zero=0, or dp*sp >= 2)", "zero=2 with dp=1 (nothing to shard)");
    p.dp = 2;
    tap_ok(pt_plan_validate(&p, 2) == 0, "zero=2 with dp=2 valid");
    p.dp = 1;
    p.sp = 2;
    tap_ok(pt_plan_validate(&p, 2) == 0, "zero=2 with sp=2 valid (dp*sp = 2)");
    p.sp = 1;
    p.zero = 7;
    validate_bad(&p, 1, "zero=7", "zero=7 (out of range)");
    pt_plan_default(&p);
    p.tp_depth = 2;
    validate_bad(&p, 1, "tp_depth=2", "tp_depth=2 in mode 1d");
    pt_plan_default(&p);
    p.dp = 0;
    validate_bad(&p, 0, "dp=0", "dp=0");
    pt_plan_default(&p);
    p.tp = -3;
    validate_bad(&p, 0, "tp=-3", "tp=-3");
    pt_plan_default(&p);
    memcpy(p.rank_order, "DDT", 4);
    validate_bad(&p, 0, "DDT", "rank order DDT");
    pt_plan_default(&p);
    p.mode = (pt_mode)17;
    validate_bad(&p, 0, "17", "mode value 17");
}

/* 1 if every block of ranks sharing (dp_rank, pp_rank) -- the tp x sp
 * block of the T letter -- lies on one node under pt_plan_rank's placement. */
static int blocks_on_one_node(const pt_job_geometry *g, const pt_plan *out)
{
    int ok = 1;
    int *node_of_rank = malloc(sizeof(int) * (size_t)g->ntasks);
    int *block_node = malloc(sizeof(int) * (size_t)out->dp * (size_t)out->pp);
    for (int i = 0; i < out->dp * out->pp; i++) block_node[i] = -1;
    for (int n = 0; n < g->nnodes; n++)
        for (int l = 0; l < g->tasks_per_node[n]; l++) {
            int r = pt_plan_rank(g, n, l);
            if (r < 0 || r >= g->ntasks) ok = 0;
            else node_of_rank[r] = n;
        }
    for (int r = 0; ok && r < g->ntasks; r++) {
        int d, pp, t, s;
        if (pt_plan_coords(out, r, &d, &pp, &t, &s) != 0) { ok = 0; break; }
        int b = d * out->pp + pp;
        if (block_node[b] < 0) block_node[b] = node_of_rank[r];
        else if (block_node[b] != node_of_rank[r]) ok = 0;
    }
    free(node_of_rank);
    free(block_node);
    return ok;
}

/* Random geometry: 1..6 nodes, uniform or not (a few odd counts). */
static pt_job_geometry random_geometry(int tpn[8])
{
    int nnodes = 1 + (int)rnd(6), uniform = rnd(2), base = 1 + (int)rnd(12), ntasks = 0;
    for (int i = 0; i < nnodes; i++) {
        tpn[i] = uniform ? base : base * (1 + (int)rnd(3)) + (rnd(4) == 0 ? (int)rnd(3) : 0);
        ntasks += tpn[i];
    }
    return (pt_job_geometry){nnodes, ntasks, tpn};
}

static int gcd_of(const pt_job_geometry *g)
{
    int c = 0;
    for (int i = 0; i < g->nnodes; i++) {
        int a = c, b = g->tasks_per_node[i];
        while (b) { int t = a % b; a = b; b = t; }
        c = a;
    }
    return c;
}

/* Placement (pt_plan_rank, pt_plan_coords): ranks numbered node by node
 * form a permutation of 0..ntasks-1, and under order DPT every tp x sp
 * block of a plan whose tp*sp divides every node's task count lies on one
 * node, on random geometries (uniform or not). */
static void test_rank(void)
{
    int rank_ok = 1, placed = 1, cases = 0, with_tp = 0, with_sp = 0;
    for (int trial = 0; trial < 2000; trial++) {
        int tpn[8];
        pt_job_geometry g = random_geometry(tpn);
        int common = gcd_of(&g), divs[64], nd = 0;
        for (int d = 1; d <= common && nd < 64; d++)
            if (common % d == 0) divs[nd++] = d;
        int block = divs[rnd((unsigned)nd)];
        pt_plan p;
        pt_plan_default(&p);
        if (rnd(2)) p.tp = block;
        else p.sp = block;
        p.dp = g.ntasks / block;
        with_tp += p.tp > 1;
        with_sp += p.sp > 1;
        int *hit = calloc((size_t)g.ntasks, sizeof(int));
        for (int n = 0; n < g.nnodes; n++)
            for (int l = 0; l < tpn[n]; l++) {
                int r = pt_plan_rank(&g, n, l);
                if (r < 0 || r >= g.ntasks || hit[r]++) rank_ok = 0;
            }
        free(hit);
        if (!blocks_on_one_node(&g, &p)) {
            placed = 0;
            tap_diag("trial %d: %d nodes, tp=%d sp=%d: a block spans nodes", trial, g.nnodes, p.tp, p.sp);
        }
        cases++;
    }
    tap_ok(rank_ok, "pt_plan_rank is a permutation of 0..ntasks-1 on %d random geometries", cases);
    tap_ok(placed, "every tp x sp block whose size divides every node's tasks lies on one node "
           "(%d with tp > 1, %d with sp > 1)", with_tp, with_sp);
    int two2[] = {2, 2};
    pt_job_geometry g = {2, 4, two2};
    tap_ok(pt_plan_rank(&g, 2, 0) == -1 && pt_plan_rank(&g, 0, 2) == -1 &&
               pt_plan_rank(&g, -1, 0) == -1 && pt_plan_rank(&g, 1, 1) == 3,
           "pt_plan_rank refuses out-of-range node/task and numbers node by node");
}

/* pt_plan_request_check: the checks of a request that need no geometry
 * (the plugin's srun/sbatch side), each refusal one line naming the
 * option and what is valid.  Auto is checked as itself: any pinned tp
 * fits its shape, and a depth is for 2.5d only. */
static void test_request_check(void)
{
    pt_plan_limits lim = {64, ~0u, 4, 1, (1u << PT_SCHED_1F1B) | (1u << PT_SCHED_GPIPE), 0, PT_MIXED_ADAPT, 0,
                          "--ptrain-"};
    pt_plan req;
    pt_plan_default(&req);
    req.tp = req.tp_depth = req.pp = req.microbatches = 0;
    req.mode = PT_MODE_2D;
    req.tp = 2;
    tap_ok(pt_plan_request_check(&req, &lim) == -1 &&
               strstr(pt_errmsg(), "--ptrain-tp=2 is not q*q") && strstr(pt_errmsg(), "1, 4, 9, 16, 25, 36") &&
               !strchr(pt_errmsg(), '\n'),
           "2d tp=2 refused naming squares: %s", pt_errmsg());
    req.mode = PT_MODE_3D;
    req.tp = 4;
    tap_ok(pt_plan_request_check(&req, &lim) == -1 && strstr(pt_errmsg(), "--ptrain-tp=4 is not l*l*l") &&
               strstr(pt_errmsg(), "1, 8, 27, 64"),
           "3d tp=4 refused naming cubes: %s", pt_errmsg());
    req.mode = PT_MODE_2P5D;
    req.tp = 8;
    req.tp_depth = 2;
    tap_ok(pt_plan_request_check(&req, &lim) == 0, "2.5d tp=8 depth=2 passes");
    req.tp = 4;
    tap_ok(pt_plan_request_check(&req, &lim) == -1 && strstr(pt_errmsg(), "--ptrain-tp=4 is not 2*q*q") &&
               strstr(pt_errmsg(), "2, 8, 18"),
           "2.5d tp=4 depth=2 refused naming 2*q*q sizes: %s", pt_errmsg());
    req.mode = PT_MODE_AUTO;
    req.tp = 6;
    req.tp_depth = 0;
    tap_ok(pt_plan_request_check(&req, &lim) == 0,
           "auto with tp=6 passes (any tp: the planner picks the mode)");
    req.tp_depth = 2;
    req.tp = 0;
    tap_ok(pt_plan_request_check(&req, &lim) == -1 &&
               strstr(pt_errmsg(), "--ptrain-tp-depth=2 is for --ptrain-mode=2.5d, but the mode is auto (valid") &&
               !strstr(pt_errmsg(), "plans 1d"),
           "auto with a depth refused without the old 'plans 1d': %s", pt_errmsg());
    req.tp_depth = 0;
    lim.modes = (1u << PT_MODE_AUTO) | (1u << PT_MODE_2D);
    tap_ok(pt_plan_request_check(&req, &lim) == 0,
           "auto is allowed without 1d in allowed_modes (the search picks an allowed mode)");
    req.mode = PT_MODE_3D;
    tap_ok(pt_plan_request_check(&req, &lim) == -1 && strstr(pt_errmsg(), "--ptrain-mode=3d is not allowed"),
           "3d outside allowed_modes refused: %s", pt_errmsg());
    lim.modes = ~0u;
    req.mode = PT_MODE_1D;
    req.tp_depth = 2;
    tap_ok(pt_plan_request_check(&req, &lim) == -1 &&
               strstr(pt_errmsg(), "--ptrain-tp-depth=2 is for --ptrain-mode=2.5d"),
           "a depth with mode 1d refused: %s", pt_errmsg());
    req.tp_depth = 0;
    req.sp = 2;
    req.tp = 2;
    pt_error_clear();
    tap_ok(pt_plan_request_check(&req, &lim) == 0, "sp=2 with tp=2 passes (ring attention on the rank's heads)%s%s",
           pt_errmsg()[0] ? ": " : "", pt_errmsg());
    req.mode = PT_MODE_2P5D;
    req.tp = 8;
    req.tp_depth = 2;
    pt_error_clear();
    tap_ok(pt_plan_request_check(&req, &lim) == 0, "sp=2 with 2.5d tp=8 depth=2 passes%s%s",
           pt_errmsg()[0] ? ": " : "", pt_errmsg());
    req.mode = PT_MODE_1D;
    req.tp_depth = 0;
    req.sp = 0;
    req.tp = 0;
    req.pp = 8;
    tap_ok(pt_plan_request_check(&req, &lim) == -1 &&
               strstr(pt_errmsg(), "--ptrain-pp=8 exceeds the administrator's max_pp=4 (valid: 1..4"),
           "pp above max_pp refused: %s", pt_errmsg());
    req.pp = 2;
    req.zero = 2;
    tap_ok(pt_plan_request_check(&req, &lim) == -1 &&
               strstr(pt_errmsg(), "--ptrain-zero=2 exceeds the administrator's max_zero=1"),
           "zero above max_zero refused: %s", pt_errmsg());
    req.zero = 0;
    req.schedule = PT_SCHED_INTERLEAVED;
    req.virtual_stages = 2;
    req.microbatches = 4;
    tap_ok(pt_plan_request_check(&req, &lim) == -1 &&
               strstr(pt_errmsg(), "--ptrain-schedule=interleaved is not allowed by the administrator "
                      "(allowed_schedules in ptrain.conf: 1f1b, gpipe)"),
           "schedule outside allowed_schedules refused: %s", pt_errmsg());
    lim.schedules = ~0u;
    req.microbatches = 3;
    tap_ok(pt_plan_request_check(&req, &lim) == -1 && strstr(pt_errmsg(), "microbatches=3 is not"),
           "interleaved m=3 pp=2 refused: %s", pt_errmsg());
    req.mode = PT_MODE_OFF;
    req.tp_depth = 3;
    tap_ok(pt_plan_request_check(&req, &lim) == 0, "sizes are ignored with mode off");
}

static void test_coords(void)
{
    static const char *perms[] = {"DPT", "DTP", "PDT", "PTD", "TDP", "TPD"};
    int bijection = 1, fastest = 1, out_of_range = 1, with_sp = 0;
    for (int trial = 0; trial < 60; trial++) {
        pt_plan p;
        pt_plan_default(&p);
        p.dp = 1 + (int)rnd(5);
        p.pp = 1 + (int)rnd(4);
        p.tp = 1 + (int)rnd(6);
        p.sp = 1 + (int)rnd(3);
        with_sp += p.sp > 1;
        for (int o = 0; o < 6; o++) {
            memcpy(p.rank_order, perms[o], 4);
            int world = p.dp * p.pp * p.tp * p.sp;
            char *seen = calloc((size_t)world, 1);
            for (int r = 0; r < world; r++) {
                int d = -1, pp = -1, t = -1, s = -1;
                if (pt_plan_coords(&p, r, &d, &pp, &t, &s) != 0 || d < 0 || d >= p.dp || pp < 0 ||
                    pp >= p.pp || t < 0 || t >= p.tp || s < 0 || s >= p.sp) {
                    bijection = 0;
                    continue;
                }
                int key = ((d * p.pp + pp) * p.sp + s) * p.tp + t;
                if (seen[key]++) bijection = 0;
                /* Independent decoding: the right-most letter is the fastest
                 * axis; T spans tp*sp ranks with tp fastest inside it. */
                int axis_size[3], axis_coord[3];
                for (int i = 0; i < 3; i++) {
                    char a = perms[o][i];
                    axis_size[i] = a == 'D' ? p.dp : a == 'P' ? p.pp : p.tp * p.sp;
                    axis_coord[i] = a == 'D' ? d : a == 'P' ? pp : s * p.tp + t;
                }
                int recomposed = (axis_coord[0] * axis_size[1] + axis_coord[1]) * axis_size[2] +
                                 axis_coord[2];
                if (recomposed != r) fastest = 0;
            }
            free(seen);
            if (pt_plan_coords(&p, world, NULL, NULL, NULL, NULL) != -1 ||
                pt_plan_coords(&p, -1, NULL, NULL, NULL, NULL) != -1)
                out_of_range = 0;
        }
    }
    tap_ok(bijection, "coordinates are a bijection between ranks and the dp x pp x sp x tp grid "
           "for every rank order (%d of 60 plans with sp > 1)", with_sp);
    tap_ok(fastest, "the right-most letter of rank_order varies fastest; tp varies fastest "
           "inside the T block");
    tap_ok(out_of_range, "ranks outside the grid are refused");

    /* the tp grid's axes inside the T block, in tp_order (right-most
     * fastest): tp_rank stays the canonical (c0 dims1 + c1) dims2 + c2 */
    static const char *tpo[] = {"012", "021", "102", "120", "201", "210"};
    int placed = 1, n = 0;
    for (int trial = 0; trial < 40; trial++) {
        pt_plan p;
        pt_plan_default(&p);
        int kind = (int)rnd(3), q = 1 + (int)rnd(3), d = 1 + (int)rnd(3);
        p.mode = kind == 0 ? PT_MODE_2D : kind == 1 ? PT_MODE_2P5D : PT_MODE_3D;
        p.tp = kind == 0 ? q * q : kind == 1 ? d * q * q : q * q * q;
        p.tp_depth = kind == 1 ? d : 1;
        p.dp = 1 + (int)rnd(3);
        p.pp = 1 + (int)rnd(3);
        memcpy(p.rank_order, perms[rnd(6)], 4);
        int dims[3];
        if (pt_plan_tp_dims(&p, dims) < 0) continue;
        for (int o = 0; o < 6; o++) {
            memcpy(p.tp_order, tpo[o], 4);
            int world = p.dp * p.pp * p.tp, prev = -1, dd, pp, t, sp;
            for (int r = 0; r < world; r++) {
                if (pt_plan_coords(&p, r, &dd, &pp, &t, &sp) != 0) {
                    placed = 0;
                    continue;
                }
                /* the position of r in its T block, decoded by hand */
                int pos = -1, sz = 1;
                for (int i = 2; i >= 0; i--) {
                    char a = p.rank_order[i];
                    int size = a == 'D' ? p.dp : a == 'P' ? p.pp : p.tp;
                    if (a == 'T') pos = r / sz % size;
                    sz *= size;
                }
                int c[3] = {t / (dims[1] * dims[2]), t / dims[2] % dims[1], t % dims[2]}, want = 0;
                for (int i = 0; i < 3; i++) want = want * dims[tpo[o][i] - '0'] + c[tpo[o][i] - '0'];
                if (want != pos) placed = 0;
                (void)prev;
            }
            n++;
        }
    }
    tap_ok(placed, "tp_order lays the tp grid's axes out in the T block, right-most fastest, tp_rank canonical "
           "(%d plans of 2d, 2.5d, 3d)", n);
    pt_plan p;
    pt_plan_default(&p);
    memcpy(p.tp_order, "011", 4);
    tap_ok(pt_plan_validate(&p, 1) < 0 && strstr(pt_errmsg(), "tp order '011'") &&
               pt_plan_coords(&p, 0, NULL, NULL, NULL, NULL) == -1,
           "tp order 011 refused: %s", pt_errmsg());
    char out[4];
    tap_ok(pt_plan_tp_order_parse("--tp-order", "12", out) < 0 && strstr(pt_errmsg(), "invalid --tp-order '12'") &&
               pt_plan_tp_order_parse("--tp-order", "201", out) == 0 && !strcmp(out, "201"),
           "tp order text: 201 parsed, 12 refused: %s", pt_errmsg());
}

/* Each pipeline/ZeRO/recompute misfit that needs no model: one line
 * naming the value and what fits. */
static void test_pipeline_misfits(void)
{
    pt_plan p;
    pt_plan_default(&p);
    p.pp = 4;
    p.microbatches = 8;
    p.schedule = PT_SCHED_INTERLEAVED;
    p.virtual_stages = 2;
    tap_ok(pt_plan_validate(&p, 4) == 0, "interleaved pp=4 v=2 m=8 valid on 4 ranks");
    p.microbatches = 6;
    validate_bad(&p, 4, "schedule=interleaved with pp=4 needs microbatches a multiple of pp, "
                 "microbatches=6 is not (Narayanan et al. 2021, sec. 2.2; valid microbatches: "
                 "4, 8, 12, ...)", "interleaved m=6 with pp=4");
    p.microbatches = 3;
    validate_bad(&p, 4, "valid microbatches: 4, 8, 12, ...)", "interleaved m=3 with pp=4 (no multiple below)");
    p.microbatches = 8;
    p.virtual_stages = 1;
    validate_bad(&p, 4, "schedule=interleaved with virtual_stages=1: interleaving needs at least "
                 "2 model chunks per rank (valid: virtual_stages 2..16, or schedule 1f1b)",
                 "interleaved with v=1");
    p.virtual_stages = 2;
    p.pp = 1;
    validate_bad(&p, 1, "schedule=interleaved with pp=1: interleaving needs a pipeline (valid: "
                 "pp >= 2, or schedule gpipe or 1f1b)", "interleaved with pp=1");
    pt_plan_default(&p);
    p.pp = 2;
    p.virtual_stages = 2;
    p.schedule = PT_SCHED_GPIPE;
    validate_bad(&p, 2, "virtual_stages=2 with schedule=gpipe: virtual stages are for the "
                 "interleaved schedule (valid: schedule=interleaved, or virtual_stages=1)",
                 "virtual_stages=2 with gpipe");
    p.virtual_stages = 17;
    validate_bad(&p, 2, "invalid virtual_stages=17 (valid: 1..16", "virtual_stages=17");
    pt_plan_default(&p);
    p.pp = 4;
    tap_ok(pt_plan_split_parse("--pp-split", "3,3,2", &p) == 0 && p.pp_split_n == 3,
           "split 3,3,2 parses");
    validate_bad(&p, 4, "pp_split 3,3,2 has 3 entries, but pp=4 x virtual_stages=1 makes 4 "
                 "stages (valid: 4 comma-separated block counts, or even)", "3 split entries for pp=4");
    pt_plan_split_parse("--pp-split", "3,3,2,2", &p);
    tap_ok(pt_plan_validate(&p, 4) == 0, "split 3,3,2,2 with pp=4 valid");
    p.pp_split[2] = 0;
    validate_bad(&p, 4, "stage 2 has 0 blocks (valid: at least 1 block per stage)", "a stage of 0 blocks");
    pt_plan_default(&p);
    p.schedule = 3;
    validate_bad(&p, 1, "invalid schedule value 3 (valid: gpipe, 1f1b, interleaved)", "schedule 3");
    pt_plan_default(&p);
    p.recompute = 3;
    validate_bad(&p, 1, "invalid recompute=3 (valid recompute modes: 0 none, 1 block, 2 attention)",
                 "recompute 3");
    pt_plan_default(&p);
    p.microbatches = 4;
    p.recompute = PT_RECOMPUTE_ATTENTION;
    tap_ok(pt_plan_validate(&p, 1) == 0,
           "microbatches=4 and recompute=attention valid without a pipeline (gradient accumulation)");

    char buf[16];
    pt_plan_default(&p);
    pt_plan_split_parse("x", "1,2,3,4,5,6,7", &p);
    pt_plan_split_format(&p, buf, sizeof buf);
    tap_ok(strcmp(buf, "1,2,3,4,5,6...") == 0 || (strlen(buf) < sizeof buf && strstr(buf, "...")),
           "a split longer than the buffer ends in '...': %s", buf);
    pt_plan before = p;
    tap_ok(pt_plan_split_parse("x", "1,a", &p) == -1 && same_plan(&p, &before),
           "a bad split leaves the plan unchanged: %s", pt_errmsg());
    char many[400] = "";
    for (int i = 0; i < PT_PP_SPLIT_MAX + 1; i++) strcat(many, i ? ",1" : "1");
    tap_ok(pt_plan_split_parse("x", many, &p) == -1 && strstr(pt_errmsg(), "more than 64 stages"),
           "a split of 65 stages refused: %s", pt_errmsg());

    /* random pipeline plans against the rules, written out independently */
    int agree = 1;
    for (int trial = 0; trial < 3000; trial++) {
        pt_plan_default(&p);
        p.pp = 1 + (int)rnd(8);
        p.dp = 1 + (int)rnd(4);
        p.microbatches = 1 + (int)rnd(16);
        p.schedule = (int)rnd(3);
        p.virtual_stages = 1 + (int)rnd(4);
        p.zero = (int)rnd(4);
        p.recompute = (int)rnd(3);
        int want_n = p.pp * p.virtual_stages, n = rnd(3) ? 0 : (rnd(2) ? want_n : 1 + (int)rnd(12));
        p.pp_split_n = n;
        for (int i = 0; i < n; i++) p.pp_split[i] = (int)rnd(5);
        int inter = p.schedule == PT_SCHED_INTERLEAVED;
        int ok = (inter ? p.pp >= 2 && p.virtual_stages >= 2 && p.microbatches % p.pp == 0
                        : p.virtual_stages == 1) &&
                 !(p.zero > 0 && p.dp == 1);
        if (n) {
            if (n != want_n) ok = 0;
            for (int i = 0; i < n; i++)
                if (p.pp_split[i] < 1) ok = 0;
        }
        int world = p.dp * p.pp;
        pt_error_clear();
        int rc = pt_plan_validate(&p, world);
        if ((rc == 0) != ok || (rc != 0 && (!strstr(pt_errmsg(), "valid") || strchr(pt_errmsg(), '\n')))) {
            agree = 0;
            tap_diag("pp=%d dp=%d m=%d %s v=%d zero=%d split_n=%d: rc=%d %s", p.pp, p.dp,
                     p.microbatches, pt_schedule_name(p.schedule), p.virtual_stages, p.zero, n, rc,
                     pt_errmsg());
        }
    }
    tap_ok(agree, "validate accepts a random pipeline/ZeRO plan exactly when the rules hold "
           "(3000 plans; every refusal one line with the valid values)");
}

/* The checks against the model: stages fit the layers, split sums, microbatches divide. */
static void test_check_model(void)
{
    pt_plan p;
    pt_plan_default(&p);
    p.pp = 8;
    tap_ok(pt_plan_check_model(&p, 12, 8) == 0, "pp=8 fits 12 layers");
    p.pp = 16;
    tap_ok(pt_plan_check_model(&p, 12, 8) == -1 &&
               strstr(pt_errmsg(), "pp=16 is larger than the layer count 12") &&
               strstr(pt_errmsg(), "(valid: pp 1..12)"),
           "pp=16 on 12 layers: %s", pt_errmsg());
    p.pp = 4;
    p.schedule = PT_SCHED_INTERLEAVED;
    p.virtual_stages = 4;
    p.microbatches = 4;
    tap_ok(pt_plan_check_model(&p, 12, 8) == -1 &&
               strstr(pt_errmsg(), "pp=4 x virtual_stages=4 = 16 stages, more than the 12 layers") &&
               strstr(pt_errmsg(), "pp <= 3 with virtual_stages=4"),
           "pp=4 v=4 on 12 layers: %s", pt_errmsg());
    p.virtual_stages = 3;
    tap_ok(pt_plan_check_model(&p, 12, 8) == 0, "pp=4 v=3 fits 12 layers");
    pt_plan_default(&p);
    p.pp = 4;
    pt_plan_split_parse("--pp-split", "3,3,2,2", &p);
    tap_ok(pt_plan_check_model(&p, 10, 0) == 0, "split 3,3,2,2 sums to 10 layers");
    tap_ok(pt_plan_check_model(&p, 12, 0) == -1 &&
               strstr(pt_errmsg(), "pp_split 3,3,2,2 sums to 10 blocks, but the model has 12 layers "
                      "(valid: 4 block counts >= 1 that sum to 12, or even)"),
           "split summing to 10 on 12 layers: %s", pt_errmsg());
    pt_plan_default(&p);
    p.microbatches = 3;
    tap_ok(pt_plan_check_model(&p, 12, 8) == -1 &&
               strstr(pt_errmsg(), "microbatches=3 does not divide the 8 sequences per data-parallel "
                      "rank (valid microbatches here: 1, 2, 4, 8)"),
           "m=3 with 8 sequences: %s", pt_errmsg());
    p.microbatches = 16;
    tap_ok(pt_plan_check_model(&p, 12, 8) == -1 && strstr(pt_errmsg(), "microbatches=16"),
           "more microbatches than sequences: %s", pt_errmsg());
    p.pp = 2;
    p.schedule = PT_SCHED_INTERLEAVED;
    p.virtual_stages = 2;
    p.microbatches = 6;
    tap_ok(pt_plan_check_model(&p, 12, 8) == -1 &&
               strstr(pt_errmsg(), "valid microbatches here: 2, 4, 8)"),
           "interleaved lists only multiples of pp: %s", pt_errmsg());
    tap_ok(pt_plan_check_model(&p, 0, 8) == -1 && strstr(pt_errmsg(), "layer count 0"),
           "layer count 0 refused: %s", pt_errmsg());

    /* random: accepted exactly when the rules hold */
    int agree = 1;
    for (int trial = 0; trial < 2000; trial++) {
        pt_plan_default(&p);
        p.pp = 1 + (int)rnd(8);
        p.virtual_stages = 1 + (int)rnd(3);
        p.microbatches = 1 + (int)rnd(12);
        int L = 1 + (int)rnd(24), B = (int)rnd(24);
        if (rnd(2)) {
            p.pp_split_n = p.pp * p.virtual_stages;
            for (int i = 0; i < p.pp_split_n; i++) p.pp_split[i] = 1 + (int)rnd(4);
        }
        long sum = 0;
        for (int i = 0; i < p.pp_split_n; i++) sum += p.pp_split[i];
        int ok = p.pp * p.virtual_stages <= L && (!p.pp_split_n || sum == L) &&
                 (B <= 0 || B % p.microbatches == 0);
        int rc = pt_plan_check_model(&p, L, B);
        if ((rc == 0) != ok) {
            agree = 0;
            tap_diag("pp=%d v=%d m=%d L=%d B=%d split_n=%d sum=%ld: rc=%d %s", p.pp,
                     p.virtual_stages, p.microbatches, L, B, p.pp_split_n, sum, rc, pt_errmsg());
        }
    }
    tap_ok(agree, "check_model accepts exactly the plans whose stages fit the layers and whose "
           "microbatches divide the batch (2000 random)");
}

int main(void)
{
    const char *seed_env = getenv("PTRAIN_TEST_SEED");
    uint64_t seed = seed_env ? strtoull(seed_env, NULL, 10)
                             : (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 16);
    rng_state = seed;
    tap_diag("seed %llu (set PTRAIN_TEST_SEED to repeat)", (unsigned long long)seed);
    test_env_round_trip();
    test_validation();
    test_rank();
    test_request_check();
    test_pipeline_misfits();
    test_check_model();
    test_coords();
    return tap_done();
}
