/* lib/plan: environment round trip, validation messages, automatic
 * planning against a brute-force expectation, coordinates and placement.
 * Geometries are drawn at random (seed printed; PTRAIN_TEST_SEED repeats a
 * run). */
#define _POSIX_C_SOURCE 200809L
#include "plan/plan.h"
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
    "PTRAIN_ZERO", "PTRAIN_MICROBATCHES", "PTRAIN_CKPT_ACT", "PTRAIN_OFFLOAD",
    "PTRAIN_RANK_ORDER", "PTRAIN_PLAN",
};
#define N_VARS (sizeof plan_vars / sizeof plan_vars[0])

static void clear_env(void)
{
    for (size_t i = 0; i < N_VARS; i++) unsetenv(plan_vars[i]);
}

struct seen { int count[N_VARS]; char plan_line[200]; };
static int set_env_cb(const char *name, const char *value, void *arg)
{
    struct seen *s = arg;
    for (size_t i = 0; i < N_VARS; i++)
        if (strcmp(plan_vars[i], name) == 0) s->count[i]++;
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
           a->microbatches == b->microbatches && a->ckpt_act == b->ckpt_act &&
           a->offload == b->offload && strcmp(a->rank_order, b->rank_order) == 0;
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
        p.ckpt_act = (int)rnd(2);
        p.offload = (int)rnd(2);
        random_order(p.rank_order);
        clear_env();
        struct seen s;
        memset(&s, 0, sizeof s);
        if (pt_plan_export(&p, set_env_cb, &s) != 0) ok_all = 0;
        for (size_t i = 0; i < N_VARS; i++)
            if (s.count[i] != 1) each_once = 0;
        pt_plan q;
        pt_plan_default(&q);
        char err[256] = "";
        int rc = pt_plan_from_env(&q, err, sizeof err);
        if (rc != 1 || !same_plan(&p, &q)) {
            ok_all = 0;
            tap_diag("trial %d: rc=%d err=%s", trial, rc, err);
        }
        char line[200];
        pt_plan_summary(&p, line, sizeof line);
        if (strcmp(line, s.plan_line) != 0) ok_all = 0;
    }
    tap_ok(ok_all, "export -> from_env round trip restores every field (50 random plans)");
    tap_ok(each_once, "export sets each of the %zu PTRAIN_* variables exactly once", N_VARS);

    int calls = 0;
    pt_plan p;
    pt_plan_default(&p);
    tap_ok(pt_plan_export(&p, failing_cb, &calls) == 42 && calls == 3,
           "export stops at and returns the first non-zero set() result");

    clear_env();
    pt_plan q;
    pt_plan_default(&q);
    pt_plan before = q;
    tap_ok(pt_plan_from_env(&q, NULL, 0) == 0 && same_plan(&q, &before),
           "from_env with no PTRAIN_* variables returns 0 and changes nothing");
    setenv("PTRAIN_TP", "4", 1);
    tap_ok(pt_plan_from_env(&q, NULL, 0) == 1 && q.tp == 4 && q.dp == 1,
           "from_env overlays only the variables present");
    setenv("PTRAIN_RANK_ORDER", "spread", 1);
    tap_ok(pt_plan_from_env(&q, NULL, 0) == 1 && strcmp(q.rank_order, "TPD") == 0,
           "PTRAIN_RANK_ORDER=spread means TPD");
    setenv("PTRAIN_RANK_ORDER", "tdp", 1);
    tap_ok(pt_plan_from_env(&q, NULL, 0) == 1 && strcmp(q.rank_order, "TDP") == 0,
           "PTRAIN_RANK_ORDER accepts lower case");
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
    char err[256] = "";
    int rc = pt_plan_from_env(&q, err, sizeof err);
    tap_ok(rc == -1 && strstr(err, value) && strstr(err, "valid") && same_plan(&q, &before) &&
               !strchr(err, '\n'),
           "%s='%s' refused: %s", var, value, err);
    clear_env();
}

static void validate_bad(const pt_plan *p, int world, const char *must_contain, const char *what)
{
    char err[256] = "";
    int rc = pt_plan_validate(p, world, err, sizeof err);
    tap_ok(rc == -1 && strstr(err, must_contain) != NULL && !strchr(err, '\n'),
           "validate refuses %s: %s", what, err);
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
    env_bad("PTRAIN_OFFLOAD", "yes");
    env_bad("PTRAIN_MICROBATCHES", "0");
    env_bad("PTRAIN_RANK_ORDER", "DPP");
    env_bad("PTRAIN_RANK_ORDER", "DPTX");

    pt_mode m;
    char err[256];
    tap_ok(pt_mode_parse("2.5d", &m, err, sizeof err) == 0 && m == PT_MODE_2P5D &&
               strcmp(pt_mode_name(m), "2.5d") == 0,
           "mode names round trip (2.5d)");
    int names_ok = 1;
    for (int i = PT_MODE_OFF; i <= PT_MODE_3D; i++)
        if (pt_mode_parse(pt_mode_name((pt_mode)i), &m, err, sizeof err) != 0 || (int)m != i)
            names_ok = 0;
    tap_ok(names_ok, "every mode name parses back to its mode");

    pt_plan p;
    pt_plan_default(&p);
    p.dp = 2;
    p.tp = 2;
    tap_ok(pt_plan_validate(&p, 4, err, sizeof err) == 0, "1d dp=2 tp=2 valid on 4 ranks");
    tap_ok(pt_plan_validate(&p, 0, err, sizeof err) == 0, "world_size 0 skips the world check");
    validate_bad(&p, 6, "6", "a plan that does not cover the world (names the world size)");
    p.mode = PT_MODE_OFF;
    tap_ok(pt_plan_validate(&p, 4, err, sizeof err) == 0, "mode off is accepted");

    const struct { pt_mode m; const char *name; } unsupported[] = {
        {PT_MODE_2D, "--ptrain-mode=2d is not yet supported"},
        {PT_MODE_2P5D, "--ptrain-mode=2.5d is not yet supported"},
        {PT_MODE_3D, "--ptrain-mode=3d is not yet supported"},
    };
    for (size_t i = 0; i < 3; i++) {
        pt_plan_default(&p);
        p.mode = unsupported[i].m;
        validate_bad(&p, 1, unsupported[i].name, unsupported[i].name + 14);
    }
    pt_plan_default(&p);
    p.mode = PT_MODE_AUTO;
    validate_bad(&p, 1, "auto", "unresolved mode auto");
    pt_plan_default(&p);
    p.pp = 2;
    validate_bad(&p, 2, "pp=2 is not yet supported", "pp=2");
    pt_plan_default(&p);
    p.sp = 3;
    validate_bad(&p, 3, "sp=3 is not yet supported", "sp=3");
    pt_plan_default(&p);
    p.zero = 2;
    validate_bad(&p, 1, "zero=2 is not yet supported", "zero=2");
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

/* Brute force: the largest t in 1..max_tp (== pinned when pinned) dividing every node's count. */
static int expected_tp(int nnodes, const int *tpn, int max_tp, int pinned)
{
    int best = 0;
    int hi = 0;
    for (int i = 0; i < nnodes; i++) hi = tpn[i] > hi ? tpn[i] : hi;
    for (int t = 1; t <= hi && t <= max_tp; t++) {
        if (pinned > 0 && t != pinned) continue;
        int divides = 1;
        for (int i = 0; i < nnodes; i++)
            if (tpn[i] % t) divides = 0;
        if (divides) best = t;
    }
    return best; /* 0 = no valid tp */
}

static void test_auto(void)
{
    int agree = 1, cases = 0, errors_named = 1, rank_ok = 1, groups_on_node = 1, pinned_cases = 0;
    int uniform_cases = 0, nonuniform_cases = 0;
    for (int trial = 0; trial < 3000; trial++) {
        int tpn[16];
        int nnodes = 1 + (int)rnd(16);
        int uniform = rnd(2);
        int base = 1 + (int)rnd(12);
        int ntasks = 0;
        for (int i = 0; i < nnodes; i++) {
            tpn[i] = uniform ? base : base * (1 + (int)rnd(3)) + (rnd(4) == 0 ? (int)rnd(3) : 0);
            if (tpn[i] < 1) tpn[i] = 1;
            ntasks += tpn[i];
        }
        int nonuni = 0;
        for (int i = 1; i < nnodes; i++) nonuni |= tpn[i] != tpn[0];
        pt_job_geometry g = {nnodes, ntasks, tpn};
        pt_plan_limits lim = {1 + (int)rnd(16), ~0u};
        pt_plan req;
        pt_plan_default(&req);
        req.mode = rnd(2) ? PT_MODE_AUTO : PT_MODE_1D;
        req.tp = rnd(3) == 0 ? 1 + (int)rnd(12) : 0;
        int want = expected_tp(nnodes, tpn, lim.max_tp, req.tp);
        pt_plan out;
        char err[256] = "";
        int rc = pt_plan_auto(&g, &lim, &req, &out, err, sizeof err);
        cases++;
        uniform_cases += !nonuni;
        nonuniform_cases += nonuni;
        pinned_cases += req.tp > 0;
        if (want == 0) {
            /* Only a pinned tp can be impossible (tp=1 always divides). */
            char pinned[32];
            snprintf(pinned, sizeof pinned, "--ptrain-tp=%d", req.tp);
            if (rc != -1 || req.tp == 0 || !strstr(err, pinned) || !strstr(err, "valid")) {
                agree = 0;
                errors_named = 0;
                tap_diag("trial %d: expected refusal of tp=%d, got rc=%d err=%s", trial, req.tp,
                         rc, err);
            }
            continue;
        }
        if (rc != 0 || out.mode != PT_MODE_1D || out.tp != want || out.dp * out.tp != ntasks ||
            out.pp != 1 || out.sp != 1 || pt_plan_validate(&out, ntasks, NULL, 0) != 0) {
            agree = 0;
            tap_diag("trial %d: nnodes=%d max_tp=%d pinned=%d want tp=%d got rc=%d tp=%d dp=%d "
                     "err=%s", trial, nnodes, lim.max_tp, req.tp, want, rc, out.tp, out.dp, err);
            continue;
        }
        /* Placement: ranks form a permutation of 0..ntasks-1 and every
         * tensor group (same dp_rank and pp_rank) sits on one node. */
        int *node_of_rank = malloc(sizeof(int) * (size_t)ntasks);
        int *hit = calloc((size_t)ntasks, sizeof(int));
        for (int n = 0; n < nnodes; n++)
            for (int l = 0; l < tpn[n]; l++) {
                int r = pt_plan_rank(&g, n, l);
                if (r < 0 || r >= ntasks || hit[r]++) rank_ok = 0;
                else node_of_rank[r] = n;
            }
        if (rank_ok) {
            int ngroups = out.dp * out.pp;
            int *group_node = malloc(sizeof(int) * (size_t)ngroups);
            for (int i = 0; i < ngroups; i++) group_node[i] = -1;
            for (int r = 0; r < ntasks; r++) {
                int d, pp, t;
                if (pt_plan_coords(&out, r, &d, &pp, &t) != 0) { groups_on_node = 0; break; }
                int gi = d * out.pp + pp;
                if (group_node[gi] < 0) group_node[gi] = node_of_rank[r];
                else if (group_node[gi] != node_of_rank[r]) groups_on_node = 0;
            }
            free(group_node);
        }
        free(node_of_rank);
        free(hit);
    }
    tap_ok(agree, "auto agrees with brute force on %d random geometries (%d uniform, %d "
           "non-uniform, %d with pinned tp)", cases, uniform_cases, nonuniform_cases,
           pinned_cases);
    tap_ok(errors_named, "impossible pinned tp is refused naming the value and the valid ones");
    tap_ok(rank_ok, "pt_plan_rank is a permutation of 0..ntasks-1 on every geometry");
    tap_ok(groups_on_node, "every tensor-parallel group lies on one node");

    /* Fixed cases from the field: 2 nodes x 2 tasks, 2x4 capped, 2+1 tasks. */
    int two2[] = {2, 2}, two4[] = {4, 4}, mixed[] = {4, 2, 6}, odd[] = {2, 2, 1};
    pt_job_geometry g = {2, 4, two2};
    pt_plan_limits lim = {64, ~0u};
    pt_plan req, out;
    pt_plan_default(&req);
    req.mode = PT_MODE_AUTO;
    req.tp = 0;
    char err[256];
    tap_ok(pt_plan_auto(&g, &lim, &req, &out, err, sizeof err) == 0 && out.dp == 2 && out.tp == 2,
           "2 nodes x 2 tasks -> dp=2 tp=2");
    g = (pt_job_geometry){2, 8, two4};
    lim.max_tp = 3;
    tap_ok(pt_plan_auto(&g, &lim, &req, &out, err, sizeof err) == 0 && out.tp == 2 && out.dp == 4,
           "2 x 4 tasks with max_tp=3 -> tp=2 dp=4");
    g = (pt_job_geometry){3, 12, mixed};
    lim.max_tp = 64;
    tap_ok(pt_plan_auto(&g, &lim, &req, &out, err, sizeof err) == 0 && out.tp == 2 && out.dp == 6,
           "tasks 4,2,6 -> tp=2 dp=6");
    g = (pt_job_geometry){3, 5, odd};
    req.tp = 2;
    tap_ok(pt_plan_auto(&g, &lim, &req, &out, err, sizeof err) == -1 &&
               strstr(err, "--ptrain-tp=2") && strstr(err, "valid: 1"),
           "tasks 2,2,1 with --ptrain-tp=2 refused: %s", err);
    g = (pt_job_geometry){2, 4, two2};
    req.tp = 3;
    tap_ok(pt_plan_auto(&g, &lim, &req, &out, err, sizeof err) == -1 &&
               strstr(err, "--ptrain-tp=3") && strstr(err, "valid: 1, 2"),
           "2 x 2 tasks with --ptrain-tp=3 refused listing 1, 2: %s", err);
    req.tp = 2;
    lim.max_tp = 1;
    tap_ok(pt_plan_auto(&g, &lim, &req, &out, err, sizeof err) == -1 && strstr(err, "max_tp=1"),
           "--ptrain-tp=2 above max_tp=1 refused: %s", err);
    lim.max_tp = 64;
    req.tp = 0;
    req.mode = PT_MODE_2D;
    tap_ok(pt_plan_auto(&g, &lim, &req, &out, err, sizeof err) == -1 &&
               strstr(err, "--ptrain-mode=2d is not yet supported"),
           "auto with mode 2d refused: %s", err);
    req.mode = PT_MODE_1D;
    lim.modes = (1u << PT_MODE_AUTO) | (1u << PT_MODE_OFF);
    tap_ok(pt_plan_auto(&g, &lim, &req, &out, err, sizeof err) == -1 &&
               strstr(err, "not allowed"),
           "mode 1d outside allowed_modes refused: %s", err);
    req.mode = PT_MODE_OFF;
    tap_ok(pt_plan_auto(&g, &lim, &req, &out, err, sizeof err) == 0 && out.mode == PT_MODE_OFF,
           "mode off resolves to off");
    int bad_sum[] = {2, 1};
    g = (pt_job_geometry){2, 4, bad_sum};
    req.mode = PT_MODE_AUTO;
    lim.modes = ~0u;
    tap_ok(pt_plan_auto(&g, &lim, &req, &out, err, sizeof err) == -1 && strstr(err, "3"),
           "per-node counts not adding up to ntasks refused: %s", err);
    g = (pt_job_geometry){2, 4, two2};
    tap_ok(pt_plan_rank(&g, 2, 0) == -1 && pt_plan_rank(&g, 0, 2) == -1 &&
               pt_plan_rank(&g, -1, 0) == -1 && pt_plan_rank(&g, 1, 1) == 3,
           "pt_plan_rank refuses out-of-range node/task and numbers node by node");
}

static void test_coords(void)
{
    static const char *perms[] = {"DPT", "DTP", "PDT", "PTD", "TDP", "TPD"};
    int bijection = 1, fastest = 1, out_of_range = 1;
    for (int trial = 0; trial < 60; trial++) {
        pt_plan p;
        pt_plan_default(&p);
        p.dp = 1 + (int)rnd(5);
        p.pp = 1 + (int)rnd(4);
        p.tp = 1 + (int)rnd(6);
        for (int o = 0; o < 6; o++) {
            memcpy(p.rank_order, perms[o], 4);
            int world = p.dp * p.pp * p.tp;
            char *seen = calloc((size_t)world, 1);
            for (int r = 0; r < world; r++) {
                int d = -1, pp = -1, t = -1;
                if (pt_plan_coords(&p, r, &d, &pp, &t) != 0 || d < 0 || d >= p.dp || pp < 0 ||
                    pp >= p.pp || t < 0 || t >= p.tp) {
                    bijection = 0;
                    continue;
                }
                int key = (d * p.pp + pp) * p.tp + t;
                if (seen[key]++) bijection = 0;
                /* Independent decoding: the right-most letter is the fastest axis. */
                int axis_size[3], axis_coord[3];
                for (int i = 0; i < 3; i++) {
                    char a = perms[o][i];
                    axis_size[i] = a == 'D' ? p.dp : a == 'P' ? p.pp : p.tp;
                    axis_coord[i] = a == 'D' ? d : a == 'P' ? pp : t;
                }
                int recomposed = (axis_coord[0] * axis_size[1] + axis_coord[1]) * axis_size[2] +
                                 axis_coord[2];
                if (recomposed != r) fastest = 0;
            }
            free(seen);
            if (pt_plan_coords(&p, world, NULL, NULL, NULL) != -1 ||
                pt_plan_coords(&p, -1, NULL, NULL, NULL) != -1)
                out_of_range = 0;
        }
    }
    tap_ok(bijection, "coordinates are a bijection between ranks and the dp x pp x tp grid for "
           "every rank order");
    tap_ok(fastest, "the right-most letter of rank_order varies fastest");
    tap_ok(out_of_range, "ranks outside the grid are refused");
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
    test_auto();
    test_coords();
    return tap_done();
}
