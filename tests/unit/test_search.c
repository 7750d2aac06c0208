/* SPDX-License-Identifier: MIT */
/* lib/plan/search.c: the min-max stage split against brute force on
 * random costs, the placement links against a brute-force walk over every
 * group, the search's rules (pins, named modes, memory, determinism) and
 * its time at 4096 ranks (printed, never asserted).  Random inputs (seed
 * printed; PTRAIN_TEST_SEED repeats a run). */
#define _POSIX_C_SOURCE 200809L
#include "plan/search.h"
#include "tests/tap.h"
#include "tests/unit/plan_cluster.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint64_t rng_state;
static unsigned rnd(unsigned n)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (unsigned)((rng_state >> 33) % n);
}
static double rndu(void) { return (rnd(1u << 30) + 0.5) / (double)(1u << 30); }

/* ---- split ---- */
static double stage_max(const double *c, const int *split, int k)
{
    double worst = 0;
    int at = 0;
    for (int j = 0; j < k; j++) {
        double s = 0;
        for (int i = 0; i < split[j]; i++) s += c[at++];
        if (s > worst) worst = s;
    }
    return worst;
}

static double stage_sumsq(const double *c, const int *split, int k)
{
    double q = 0;
    int at = 0;
    for (int j = 0; j < k; j++) {
        double s = 0;
        for (int i = 0; i < split[j]; i++) s += c[at++];
        q += s * s;
    }
    return q;
}

/* Over every composition of n into k parts: the least largest stage
 * (*mx), and the least sum of squares among those reaching it (*sq). */
static void brute_split(const double *c, int n, int k, int *cur, int j, int used, double *mx, double *sq)
{
    if (j == k - 1) {
        cur[j] = n - used;
        if (cur[j] < 1) return;
        double m = stage_max(c, cur, k), q = stage_sumsq(c, cur, k);
        if (m < *mx * (1 - 1e-12)) {
            *mx = m;
            *sq = q;
        } else if (m <= *mx * (1 + 1e-12) && q < *sq) {
            *sq = q;
        }
        return;
    }
    for (int s = 1; used + s <= n - (k - 1 - j); s++) {
        cur[j] = s;
        brute_split(c, n, k, cur, j + 1, used + s, mx, sq);
    }
}

static void test_split(void)
{
    int ok = 1, valid = 1, even = 1, trials = 0;
    for (int t = 0; t < 300; t++) {
        int n = 1 + (int)rnd(12), k = 1 + (int)rnd((unsigned)n);
        double c[12];
        for (int i = 0; i < n; i++) c[i] = rnd(4) ? rndu() : 5 * rndu(); /* some heavy layers */
        int split[12], cur[12];
        if (pt_plan_split_layers(c, n, k, split) < 0) {
            valid = 0;
            tap_diag("n=%d k=%d refused: %s", n, k, pt_errmsg());
            continue;
        }
        int sum = 0;
        for (int j = 0; j < k; j++) {
            if (split[j] < 1) valid = 0;
            sum += split[j];
        }
        if (sum != n) valid = 0;
        double want = INFINITY, wantq = INFINITY;
        brute_split(c, n, k, cur, 0, 0, &want, &wantq);
        double got = stage_max(c, split, k), gotq = stage_sumsq(c, split, k);
        if (fabs(got - want) > 1e-9 * want) {
            ok = 0;
            tap_diag("n=%d k=%d: dp max stage %.12g, brute force %.12g", n, k, got, want);
        }
        if (fabs(gotq - wantq) > 1e-9 * wantq) {
            even = 0;
            tap_diag("n=%d k=%d: dp sum of squares %.12g, brute force %.12g", n, k, gotq, wantq);
        }
        trials++;
    }
    tap_ok(valid, "split: k counts >= 1 that sum to n (%d random cases)", trials);
    tap_ok(ok, "split: largest stage equals the brute-force optimum over every composition");
    tap_ok(even, "split: among those, the least sum of squared stage costs (brute force)");

    /* ties keep earlier stages larger: equal costs, 7 layers in 3 stages */
    double eq[7] = {1, 1, 1, 1, 1, 1, 1};
    int s3[3] = {0, 0, 0};
    int rc3 = pt_plan_split_layers(eq, 7, 3, s3);
    tap_ok(rc3 == 0 && s3[0] == 3 && s3[1] == 2 && s3[2] == 2,
           "split: 7 equal layers in 3 stages is 3,2,2 (got %d,%d,%d)", s3[0], s3[1], s3[2]);
    /* a heavy head moves layers to the earlier stages */
    pt_model_shape gm = {12, 12, 768, 1024, 50257, .family = PT_FAMILY_GPT2};
    double lc[12];
    pt_plan_layer_costs(&gm, lc);
    int s4[4] = {0, 0, 0, 0};
    int rc4 = pt_plan_split_layers(lc, 12, 4, s4);
    tap_ok(rc4 == 0 && s4[3] < 3 && s4[0] >= 3 && s4[2] >= 3,
           "split: GPT-2 124M in 4 stages gives the head's stage fewer blocks (%d,%d,%d,%d)", s4[0],
           s4[1], s4[2], s4[3]);
    int s1[1];
    tap_ok(pt_plan_split_layers(eq, 7, 8, s1) < 0 && strstr(pt_errmsg(), "8 stages for 7 layers"),
           "split: more stages than layers refused: %s", pt_errmsg());
    double bad[2] = {1, NAN};
    tap_ok(pt_plan_split_layers(bad, 2, 1, s1) < 0 && strstr(pt_errmsg(), "layer 1"),
           "split: a NaN cost refused: %s", pt_errmsg());
}

/* ---- placement links ---- */
static void brute_links(const pt_cluster *c, const pt_plan *p, int link[PT_GRP_N])
{
    int world = p->dp * p->pp * p->tp * p->sp;
    int *node = malloc(sizeof(int) * (size_t)world), *isl = malloc(sizeof(int) * (size_t)world);
    int *co = malloc(sizeof(int) * 4 * (size_t)world);
    int r = 0;
    for (int n = 0; n < c->nnodes; n++)
        for (int l = 0; l < c->tasks_per_node[n]; l++, r++) {
            node[r] = n;
            int I = c->island_ranks;
            isl[r] = (I <= 0 || I >= c->tasks_per_node[n]) ? 0 : l / I;
        }
    for (r = 0; r < world; r++) pt_plan_coords(p, r, &co[4 * r], &co[4 * r + 1], &co[4 * r + 2], &co[4 * r + 3]);
    /* axes that stay fixed within each group: d, p, t, s */
    static const int fixed[PT_GRP_N][4] = {
        {0, 1, 1, 1}, /* dp: p, t, s fixed */
        {1, 1, 0, 1}, /* tp */
        {1, 0, 1, 1}, /* pp */
        {1, 1, 1, 0}, /* sp */
        {0, 1, 1, 0}, /* sync: dp x sp (1d's parameters are replicated on no tp axis) */
    };
    for (int g = 0; g < PT_GRP_N; g++) {
        link[g] = PT_NET_ISLAND;
        for (int a = 0; a < world; a++)
            for (int b = a + 1; b < world; b++) {
                int same = 1;
                for (int ax = 0; ax < 4; ax++)
                    if (fixed[g][ax] && co[4 * a + ax] != co[4 * b + ax]) same = 0;
                if (!same) continue;
                int l = node[a] != node[b] ? PT_NET_INTER : isl[a] != isl[b] ? PT_NET_NODE : PT_NET_ISLAND;
                if (l > link[g]) link[g] = l;
            }
    }
    free(node);
    free(isl);
    free(co);
}

/* Every communicator's slowest link (and each pipeline neighbour pair's)
 * by a walk over all rank pairs, from pt_plan_coords and the canonical tp
 * coordinates alone. */
static void brute_where(const pt_cluster *c, const pt_plan *p, int sub[PT_SUB_N], int *pp_next)
{
    int world = p->dp * p->pp * p->tp * p->sp, dims[3];
    pt_plan_tp_dims(p, dims);
    int *node = malloc(sizeof(int) * (size_t)world), *isl = malloc(sizeof(int) * (size_t)world);
    int *co = malloc(sizeof(int) * 7 * (size_t)world); /* d, p, s, c0, c1, c2, t */
    int r = 0;
    for (int n = 0; n < c->nnodes; n++)
        for (int l = 0; l < c->tasks_per_node[n]; l++, r++) {
            node[r] = n;
            int I = c->island_ranks;
            isl[r] = (I <= 0 || I >= c->tasks_per_node[n]) ? 0 : l / I;
        }
    for (r = 0; r < world; r++) {
        int *x = &co[7 * r], t;
        pt_plan_coords(p, r, &x[0], &x[1], &t, &x[2]);
        x[3] = t / (dims[1] * dims[2]), x[4] = t / dims[2] % dims[1], x[5] = t % dims[2], x[6] = t;
    }
    for (int k = 0; k < PT_SUB_N; k++) {
        /* the coordinates (d, p, s, c0, c1, c2) free inside one group */
        int fr[6] = {0, 0, 0, 0, 0, 0};
        if (k == PT_SUB_TP) fr[3] = fr[4] = fr[5] = 1;
        else if (k < PT_SUB_SYNC) {
            for (int a = 0; a < 3; a++) fr[3 + a] = ((k - PT_SUB_TP_AXES + 1) >> a) & 1;
        } else if (k < PT_SUB_SP) {
            fr[0] = fr[2] = 1;
            for (int a = 0; a < 3; a++) fr[3 + a] = ((k - PT_SUB_SYNC) >> a) & 1;
        } else if (k == PT_SUB_SP) fr[2] = 1;
        else if (k == PT_SUB_PP || k == PT_SUB_EMBED) fr[1] = 1;
        else fr[0] = 1;
        sub[k] = PT_NET_ISLAND;
        for (int a = 0; a < world; a++)
            for (int b = a + 1; b < world; b++) {
                int same = 1;
                for (int x = 0; x < 6; x++)
                    if (!fr[x] && co[7 * a + x] != co[7 * b + x]) same = 0;
                if (!same) continue;
                if (k == PT_SUB_EMBED) { /* the first and the last stage */
                    int pa = co[7 * a + 1], pb = co[7 * b + 1];
                    if (!((pa == 0 && pb == p->pp - 1) || (pb == 0 && pa == p->pp - 1))) continue;
                }
                int l = node[a] != node[b] ? PT_NET_INTER : isl[a] != isl[b] ? PT_NET_NODE : PT_NET_ISLAND;
                if (l > sub[k]) sub[k] = l;
            }
    }
    for (int q = 0; q < p->pp; q++) pp_next[q] = PT_NET_ISLAND;
    for (int a = 0; a < world && p->pp > 1; a++)
        for (int b = 0; b < world; b++) {
            int pa = co[7 * a + 1], pb = co[7 * b + 1];
            if (pb != (pa + 1) % p->pp || co[7 * a] != co[7 * b] || co[7 * a + 2] != co[7 * b + 2] ||
                co[7 * a + 6] != co[7 * b + 6])
                continue;
            int l = node[a] != node[b] ? PT_NET_INTER : isl[a] != isl[b] ? PT_NET_NODE : PT_NET_ISLAND;
            if (l > pp_next[pa]) pp_next[pa] = l;
        }
    free(node);
    free(isl);
    free(co);
}

static void test_links(void)
{
    {
        static const char *orders[] = {"DPT", "DTP", "PDT", "PTD", "TDP", "TPD"};
        static const char *tpo[] = {"012", "021", "102", "120", "201", "210"};
        int ok = 1, n = 0, bad = 0, kinds[4] = {0, 0, 0, 0};
        for (int t = 0; t < 300; t++) {
            /* a grid of a random layout: tp of its mode's shape, dp, pp, sp */
            int kind = (int)rnd(4), q = 1 + (int)rnd(2), d = 1 + (int)rnd(3), tp;
            pt_plan p;
            pt_plan_default(&p);
            p.mode = kind == 0 ? PT_MODE_1D : kind == 1 ? PT_MODE_2D : kind == 2 ? PT_MODE_2P5D : PT_MODE_3D;
            tp = kind == 0 ? 1 + (int)rnd(4) : kind == 1 ? q * q : kind == 2 ? d * q * q : q * q * q;
            p.tp = tp;
            p.tp_depth = kind == 2 ? d : 1;
            p.dp = 1 + (int)rnd(3);
            p.pp = 1 + (int)rnd(3);
            p.sp = p.dp * p.pp * tp <= 54 ? 1 + (int)rnd(2) : 1; /* sp x any tp; world <= 108 */
            memcpy(p.rank_order, orders[rnd(6)], 4);
            memcpy(p.tp_order, tpo[rnd(6)], 4);
            int world = p.dp * p.pp * p.tp * p.sp;
            /* nodes of random sizes summing to the world */
            int tpn[128], nnodes = 0, left = world, base = 1 + (int)rnd(8), uniform = rnd(2);
            while (left > 0 && nnodes < 128) { /* world <= 108 */
                int k = uniform ? base : 1 + (int)rnd(8);
                if (k > left) k = left;
                tpn[nnodes++] = k;
                left -= k;
            }
            pt_cluster c;
            memset(&c, 0, sizeof c);
            c.nnodes = nnodes;
            c.tasks_per_node = tpn;
            c.island_ranks = (int)rnd(5);
            pt_cost_where w;
            int got_next[8], want_next[8], want[PT_SUB_N];
            if (pt_place_where(&c, &p, &w, got_next, PT_PLACE_ALL) != 0) {
                ok = 0;
                continue;
            }
            brute_where(&c, &p, want, want_next);
            kinds[kind]++;
            if (memcmp(w.sub_link, want, sizeof want) || memcmp(got_next, want_next, sizeof(int) * (size_t)p.pp)) {
                ok = 0;
                if (bad++ < 5) {
                    char g[64] = "", h[64] = "";
                    for (int k = 0; k < PT_SUB_N; k++) g[k] = (char)('0' + w.sub_link[k]), h[k] = (char)('0' + want[k]);
                    tap_diag("%s tp=%d dp=%d pp=%d sp=%d %s/%s on %d nodes, island %d: got %s want %s", pt_mode_name(p.mode),
                             p.tp, p.dp, p.pp, p.sp, p.rank_order, p.tp_order, nnodes, c.island_ranks, g, h);
                }
            }
            n++;
        }
        tap_ok(ok, "links: every communicator's slowest link (tp, the tp axis groups, each sync group, sp, pp, embed, dp) "
                   "and each pipeline neighbour's equal a brute-force walk over all rank pairs (%d random plans: "
                   "1d %d, 2d %d, 2.5d %d, 3d %d; every rank and tp order)", n, kinds[0], kinds[1], kinds[2], kinds[3]);
    }
    static const char *orders[] = {"DPT", "DTP", "PDT", "PTD", "TDP", "TPD"};
    int ok = 1, n = 0;
    for (int t = 0; t < 400; t++) {
        int nnodes = 1 + (int)rnd(4), tpn[4];
        int uniform = rnd(2), base = 1 + (int)rnd(8);
        int world = 0;
        for (int i = 0; i < nnodes; i++) {
            tpn[i] = uniform ? base : 1 + (int)rnd(8);
            world += tpn[i];
        }
        pt_cluster c;
        memset(&c, 0, sizeof c);
        c.nnodes = nnodes;
        c.tasks_per_node = tpn;
        c.island_ranks = (int)rnd(5);
        /* a random factorisation of world into dp, pp, tp, sp */
        int f[4] = {1, 1, 1, 1}, rest = world;
        for (int a = 0; a < 3; a++) {
            int d;
            do d = 1 + (int)rnd((unsigned)rest); while (rest % d);
            f[a] = d;
            rest /= d;
        }
        f[3] = rest;
        pt_plan p;
        pt_plan_default(&p);
        p.dp = f[0];
        p.pp = f[1];
        p.tp = f[2];
        p.sp = f[3];
        memcpy(p.rank_order, orders[rnd(6)], 4);
        int got[PT_GRP_N], want[PT_GRP_N];
        pt_place_links(&c, &p, got);
        brute_links(&c, &p, want);
        if (memcmp(got, want, sizeof got)) {
            ok = 0;
            if (n++ < 5)
                tap_diag("nodes=%d tpn0=%d island=%d dp=%d pp=%d tp=%d sp=%d %s: got %d%d%d%d%d want %d%d%d%d%d",
                         nnodes, tpn[0], c.island_ranks, p.dp, p.pp, p.tp, p.sp, p.rank_order, got[0],
                         got[1], got[2], got[3], got[4], want[0], want[1], want[2], want[3], want[4]);
        }
    }
    tap_ok(ok, "links: every group's slowest link equals a brute-force walk over all rank pairs "
               "(400 random clusters, plans and rank orders)");

    /* 2 nodes x 8, islands of 4: tp=4 inside an island, tp=8 over the node,
     * tp=16 over the network */
    int tpn[2] = {8, 8};
    pt_cluster c;
    memset(&c, 0, sizeof c);
    c.nnodes = 2;
    c.tasks_per_node = tpn;
    c.island_ranks = 4;
    pt_plan p;
    pt_plan_default(&p);
    int l[PT_GRP_N];
    p.tp = 4; p.dp = 4;
    pt_place_links(&c, &p, l);
    int a = l[PT_GRP_TP] == PT_NET_ISLAND && l[PT_GRP_DP] == PT_NET_INTER;
    p.tp = 8; p.dp = 2;
    pt_place_links(&c, &p, l);
    int b = l[PT_GRP_TP] == PT_NET_NODE;
    p.tp = 16; p.dp = 1;
    pt_place_links(&c, &p, l);
    tap_ok(a && b && l[PT_GRP_TP] == PT_NET_INTER && l[PT_GRP_DP] == PT_NET_ISLAND,
           "links: tp=4/8/16 on 2 nodes x 8 with islands of 4 span island/node/network");
}

/* ---- search ---- */
static pt_plan_limits all_limits(void)
{
    pt_plan_limits lim = {1 << 20, ~0u, 1 << 20, 3, ~0u, 0, PT_MIXED_ADAPT, 0, "--ptrain-"};
    return lim;
}

static pt_cluster make_cluster(int nnodes, int tpn, int island, int *buf)
{
    return plan_test_cluster(nnodes, tpn, island, 50000, 25, buf);
}

static void request(pt_plan *req)
{
    pt_plan_default(req);
    req->rank_order[0] = '\0';
    req->tp_order[0] = '\0';
    req->mode = PT_MODE_AUTO;
    req->dp = req->pp = req->tp = req->sp = 0;
    req->tp_depth = 0;
    req->microbatches = 0;
    req->virtual_stages = 0;
}

/* Llama shapes: the search proposes the layouts built for them (off, 1d)
 * only, each with tp dividing the heads, the KV heads and the MLP width,
 * and refuses a named 2d/2.5d/3d in one line. */
static void test_llama(void)
{
    pt_plan_limits lim = all_limits();
    int tpn[64];
    pt_cluster c = make_cluster(2, 8, 0, tpn); /* 16 ranks: 2d 4 and 16, 2.5d 8, 3d 8 would all divide */
    pt_model_shape m;
    pt_model_preset("llama-small", &m); /* H8 KV4 C256 I768 */
    pt_plan req;
    request(&req);
    pt_search_result r;
    int rc = pt_plan_search(&c, &m, 64, &lim, &req, &r), only1d = rc == 0;
    for (int j = -1; rc == 0 && j < r.nrunners; j++) {
        const pt_plan *p = j < 0 ? &r.best.plan : &r.runner[j].plan;
        if (p->mode != PT_MODE_1D || m.n_head % p->tp || pt_model_kv_heads(&m) % p->tp || pt_model_ffn(&m) % p->tp) {
            only1d = 0;
            char s[640];
            pt_plan_summary(p, s, sizeof s);
            tap_diag("llama plan: %s", s);
        }
    }
    tap_ok(only1d, "search: a llama shape gets 1d plans only, tp dividing H, KV and I (%s)", rc ? pt_errmsg() : r.why);
    static const pt_mode named[] = {PT_MODE_2D, PT_MODE_2P5D, PT_MODE_3D};
    int refused = 1;
    for (int i = 0; i < 3; i++) {
        request(&req);
        req.mode = named[i];
        rc = pt_plan_search(&c, &m, 64, &lim, &req, &r);
        char want[160];
        snprintf(want, sizeof want, "--ptrain-mode=%s is not built for llama models yet (valid for llama: auto, off, 1d)",
                 pt_mode_name(named[i]));
        if (rc == 0 || strcmp(pt_errmsg(), want)) {
            refused = 0;
            tap_diag("mode %s: %s", pt_mode_name(named[i]), rc ? pt_errmsg() : "planned");
        }
    }
    tap_ok(refused, "search: --ptrain-mode=2d, 2.5d, 3d refused for llama in one line naming the valid modes");
}

static void test_search(void)
{
    pt_plan_limits lim = all_limits();
    pt_model_shape gpt2 = {12, 12, 768, 1024, 50257, .family = PT_FAMILY_GPT2};
    int tpn[512];
    pt_cluster c = make_cluster(2, 8, 0, tpn);
    pt_plan req;
    request(&req);
    pt_search_result r, r2;
    int rc = pt_plan_search(&c, &gpt2, 64, &lim, &req, &r);
    tap_ok(rc == 0, "search: GPT-2 124M on 2 nodes x 8 plans (%s)", rc ? pt_errmsg() : r.why);
    if (rc == 0) {
        int fits = r.best.cost.mem_peak <= c.hw.mem_bytes, sorted = 1;
        const pt_candidate *prev = &r.best;
        for (int i = 0; i < r.nrunners; i++) {
            if (r.runner[i].cost.t_step < prev->cost.t_step) sorted = 0;
            if (r.runner[i].cost.mem_peak > c.hw.mem_bytes) fits = 0;
            prev = &r.runner[i];
        }
        tap_ok(fits && sorted && r.nfit > 0 && r.nconsidered >= r.nfit,
               "search: winner and %d runners fit memory, ordered by t_step (%ld of %ld fit)", r.nrunners,
               r.nfit, r.nconsidered);
        tap_ok(pt_plan_validate(&r.best.plan, 16) == 0, "search: the winner validates for 16 ranks");
        rc = pt_plan_search(&c, &gpt2, 64, &lim, &req, &r2);
        char a[4096], b[4096];
        pt_plan_explain(&r, &gpt2, 64, a, sizeof a);
        pt_plan_explain(&r2, &gpt2, 64, b, sizeof b);
        tap_ok(rc == 0 && strcmp(a, b) == 0, "search: a second run gives the same explanation");
        printf("%s", a);
        size_t need = pt_plan_explain(&r, &gpt2, 64, NULL, 0);
        char small[64];
        size_t need2 = pt_plan_explain(&r, &gpt2, 64, small, sizeof small);
        tap_ok(need == strlen(a) && need2 == need && strlen(small) == sizeof small - 1 &&
                   strcmp(small + sizeof small - 4, "...") == 0,
               "explain: returns the length needed, a short buffer ends in \"...\"");
        tap_ok(strstr(a, "why: ") && strstr(a, "t_step") && strstr(a, "bubble"),
               "explain: the table has t_step, bubble and the why line");
    } else {
        for (int i = 0; i < 5; i++) tap_ok(0, "search: skipped after failure");
    }

    /* pins are honoured; a named mode is never tp = 1 */
    static const pt_mode named[] = {PT_MODE_1D, PT_MODE_2D, PT_MODE_2P5D, PT_MODE_3D};
    int named_ok = 1;
    for (int i = 0; i < 4; i++) {
        request(&req);
        req.mode = named[i];
        pt_cluster c8 = make_cluster(2, 4, 0, tpn); /* 8 ranks: 1d, 2d 4, 2.5d 8 = 2*2*2, 3d 8 */
        if (pt_plan_search(&c8, &gpt2, 64, &lim, &req, &r) < 0 || r.best.plan.mode != named[i] ||
            r.best.plan.tp < 2) {
            named_ok = 0;
            tap_diag("mode %s: %s", pt_mode_name(named[i]), pt_errmsg());
        }
        for (int j = 0; j < r.nrunners; j++)
            if (r.runner[j].plan.mode != named[i] || r.runner[j].plan.tp < 2) named_ok = 0;
    }
    tap_ok(named_ok, "search: --ptrain-mode=1d/2d/2.5d/3d on 8 ranks plans that mode with tp > 1");
    request(&req);
    req.mode = PT_MODE_3D;
    pt_cluster c6 = make_cluster(3, 2, 0, tpn);
    rc = pt_plan_search(&c6, &gpt2, 60, &lim, &req, &r);
    tap_ok(rc < 0 && strstr(pt_errmsg(), "3d") && strstr(pt_errmsg(), "valid tp here") && !strchr(pt_errmsg(), '\n'),
           "search: 3d on 6 ranks refused in one line: %s", pt_errmsg());
    req.tp = 1;
    rc = pt_plan_search(&c6, &gpt2, 60, &lim, &req, &r);
    tap_ok(rc == 0 && r.best.plan.tp == 1, "search: 3d with tp=1 pinned plans tp=1");
    request(&req);
    req.pp = 2;
    req.zero = 1;
    c = make_cluster(2, 8, 0, tpn);
    rc = pt_plan_search(&c, &gpt2, 64, &lim, &req, &r);
    int pins = rc == 0 && r.best.plan.pp == 2 && r.best.plan.zero == 1;
    for (int j = 0; rc == 0 && j < r.nrunners; j++)
        if (r.runner[j].plan.pp != 2 || r.runner[j].plan.zero != 1) pins = 0;
    tap_ok(pins, "search: pinned pp=2 and zero=1 hold for the winner and every runner-up");
    /* a pinned rank order places every plan the search prices (the winner
     * and the runners-up), and one the search would not try (TDP) is
     * priced with its own links; an invalid one is refused */
    request(&req);
    req.pp = 2;
    memcpy(req.rank_order, "TDP", 4);
    rc = pt_plan_search(&c, &gpt2, 64, &lim, &req, &r);
    int ordered = rc == 0 && !strcmp(r.best.plan.rank_order, "TDP");
    for (int j = 0; rc == 0 && j < r.nrunners; j++)
        if (strcmp(r.runner[j].plan.rank_order, "TDP")) ordered = 0;
    if (ordered) {
        int link[PT_GRP_N];
        pt_place_links(&c, &r.best.plan, link);
        for (int g = 0; g < PT_GRP_N; g++)
            if (link[g] != r.best.link[g]) ordered = 0;
    }
    tap_ok(ordered, "search: pinned rank order TDP holds for the winner (%s) and every runner-up, priced on its links",
           rc == 0 ? r.best.plan.rank_order : pt_errmsg());
    memcpy(req.rank_order, "DDP", 4);
    rc = pt_plan_search(&c, &gpt2, 64, &lim, &req, &r);
    tap_ok(rc < 0 && strstr(pt_errmsg(), "DDP"), "search: rank order DDP refused: %s", rc < 0 ? pt_errmsg() : "planned");
    /* memory: a model that does not fit 1 GB per rank is refused, naming the least need */
    c = make_cluster(1, 2, 0, tpn);
    c.hw.mem_bytes = 1e8;
    request(&req);
    rc = pt_plan_search(&c, &gpt2, 8, &lim, &req, &r);
    tap_ok(rc < 0 && strstr(pt_errmsg(), "least memory"), "search: too little memory refused: %s", pt_errmsg());
    /* bad input */
    pt_model_shape bad = gpt2;
    bad.n_layer = 0;
    request(&req);
    c = make_cluster(1, 2, 0, tpn);
    tap_ok(pt_plan_search(&c, &bad, 8, &lim, &req, &r) < 0 && strstr(pt_errmsg(), "L=0"),
           "search: a zero-layer model refused: %s", pt_errmsg());
    tap_ok(pt_plan_search(&c, &gpt2, 0, &lim, &req, &r) < 0 && strstr(pt_errmsg(), "global batch 0"),
           "search: batch 0 refused: %s", pt_errmsg());

    /* --ptrain-mode=2d on 2 nodes x 2 tasks plans tp=4
     * across both nodes (it used to become dp=4 tp=1), and --ptrain-tp=4
     * there is honoured with its tp group on the network */
    c = make_cluster(2, 2, 0, tpn);
    request(&req);
    req.mode = PT_MODE_2D;
    rc = pt_plan_search(&c, &gpt2, 64, &lim, &req, &r);
    tap_ok(rc == 0 && r.best.plan.mode == PT_MODE_2D && r.best.plan.tp == 4 && r.best.link[PT_GRP_TP] == PT_NET_INTER,
           "search: 2d on 2 nodes x 2 tasks is tp=4 over the network, not tp=1 (%s)", rc ? pt_errmsg() : r.why);
    request(&req);
    req.tp = 4;
    rc = pt_plan_search(&c, &gpt2, 64, &lim, &req, &r);
    tap_ok(rc == 0 && r.best.plan.tp == 4 && r.best.link[PT_GRP_TP] == PT_NET_INTER,
           "search: tp=4 pinned on 2 nodes x 2 tasks is honoured (%s)", rc ? pt_errmsg() : r.why);
    /* auto where the admin allows auto over 2d and 3d only (allowed_modes
     * ["auto", "2d", "3d"]: auto itself must be allowed, as the plugin's
     * request check requires) */
    pt_plan_limits lim23 = all_limits();
    lim23.modes = (1u << PT_MODE_AUTO) | (1u << PT_MODE_2D) | (1u << PT_MODE_3D);
    c = make_cluster(2, 4, 0, tpn);
    request(&req);
    rc = pt_plan_search(&c, &gpt2, 64, &lim23, &req, &r);
    int only23 = rc == 0 && (r.best.plan.mode == PT_MODE_2D || r.best.plan.mode == PT_MODE_3D);
    for (int j = 0; rc == 0 && j < r.nrunners; j++)
        if (r.runner[j].plan.tp > 1 && r.runner[j].plan.mode != PT_MODE_2D && r.runner[j].plan.mode != PT_MODE_3D)
            only23 = 0;
    tap_ok(only23, "search: auto with only 2d and 3d allowed plans one of them (%s)", rc ? pt_errmsg() : r.why);
    lim23.modes = (1u << PT_MODE_2D) | (1u << PT_MODE_3D);
    rc = pt_plan_search(&c, &gpt2, 64, &lim23, &req, &r);
    tap_ok(rc == -1 && strstr(pt_errmsg(), "auto is not allowed"),
           "search: auto where allowed_modes leaves auto out is refused (%s)", rc ? pt_errmsg() : r.why);

    /* nodes with different task counts: 4 + 2 ranks */
    int uneven[2] = {4, 2};
    c = make_cluster(2, 4, 0, tpn);
    c.tasks_per_node = uneven;
    request(&req);
    rc = pt_plan_search(&c, &gpt2, 60, &lim, &req, &r);
    int linked = rc == 0, want[PT_GRP_N];
    if (rc == 0) {
        pt_place_links(&c, &r.best.plan, want);
        linked = memcmp(want, r.best.link, sizeof want) == 0 &&
                 r.best.plan.dp * r.best.plan.pp * r.best.plan.tp * r.best.plan.sp == 6;
    }
    tap_ok(linked, "search: 4 + 2 tasks on two nodes plan 6 ranks with the links of that placement (%s)",
           rc ? pt_errmsg() : r.why);

    /* 4096 ranks: time printed, never asserted */
    pt_model_shape big = {96, 96, 12288, 2048, 50257, .family = PT_FAMILY_GPT2}; /* GPT-3 175B */
    c = make_cluster(512, 8, 0, tpn);
    request(&req);
    struct timespec t0, t1, c0, c1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
    rc = pt_plan_search(&c, &big, 1536, &lim, &req, &r);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
    double cpu = (double)(c1.tv_sec - c0.tv_sec) + (c1.tv_nsec - c0.tv_nsec) * 1e-9;
    char s[640];
    if (rc == 0) pt_plan_summary(&r.best.plan, s, sizeof s);
    tap_ok(rc == 0, "search: GPT-3 175B on 512 nodes x 8 (4096 ranks) plans: %s", rc ? pt_errmsg() : s);
    tap_diag("4096-rank search: %.3f s wall, %.3f s CPU, %ld plans evaluated, %ld fit (a measurement, not a "
             "limit; the wall time includes other load on the machine)", secs, cpu, rc == 0 ? r.nconsidered : 0,
             rc == 0 ? r.nfit : 0);
    /* the same at a global batch of 4096 sequences: more dp and
     * microbatch choices, the largest search timed here */
    clock_gettime(CLOCK_MONOTONIC, &t0);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
    rc = pt_plan_search(&c, &big, 4096, &lim, &req, &r);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    secs = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
    cpu = (double)(c1.tv_sec - c0.tv_sec) + (c1.tv_nsec - c0.tv_nsec) * 1e-9;
    if (rc == 0) pt_plan_summary(&r.best.plan, s, sizeof s);
    tap_ok(rc == 0, "search: GPT-3 175B on 512 nodes x 8 at batch 4096 plans: %s", rc ? pt_errmsg() : s);
    tap_diag("4096-rank search at batch 4096: %.3f s wall, %.3f s CPU, %ld plans evaluated, %ld fit (a "
             "measurement, not a limit)", secs, cpu, rc == 0 ? r.nconsidered : 0, rc == 0 ? r.nfit : 0);
}


/* ---- the search against exhaustive evaluation ---- */
static int bf_isq(int n) { for (int q = 1; q * q <= n; q++) if (q * q == n) return q; return 0; }
static int bf_icb(int n) { for (int l = 1; l * l * l <= n; l++) if (l * l * l == n) return l; return 0; }

/* The least t_step over every plan of the search's space (search.h:
 * shapes, sp, pp, dp, orders DPT/PDT, ZeRO, 1F1B and interleaved v = 2
 * and the even v, even and min-max splits, the microbatch set, every
 * recompute mode), evaluated one by one with no pruning. */
static double brute_best(const pt_cluster *c, const pt_model_shape *m, int gb, long *n_fit)
{
    int W = 0;
    for (int i = 0; i < c->nnodes; i++) W += c->tasks_per_node[i];
    double best = INFINITY;
    *n_fit = 0;
    double *lc = malloc(sizeof(double) * (size_t)m->n_layer);
    pt_plan_layer_costs(m, lc);
    for (int tp = 1; tp <= W; tp++) {
        if (W % tp) continue;
        /* shapes: (mode, depth) */
        int nsh = 0, smode[64], sdepth[64];
        if (tp == 1) { smode[nsh] = PT_MODE_1D; sdepth[nsh++] = 1; }
        else {
            smode[nsh] = PT_MODE_1D; sdepth[nsh++] = 1;
            if (bf_isq(tp)) { smode[nsh] = PT_MODE_2D; sdepth[nsh++] = 1; }
            if (bf_icb(tp)) { smode[nsh] = PT_MODE_3D; sdepth[nsh++] = 1; }
            for (int d = 2; d < tp; d++)
                if (tp % d == 0 && bf_isq(tp / d)) { smode[nsh] = PT_MODE_2P5D; sdepth[nsh++] = d; }
        }
        for (int si = 0; si < nsh; si++)
            for (int sp = 1; sp <= W / tp; sp++) {
                if ((W / tp) % sp || m->seq_len % sp) continue;
                for (int pp = 1; pp <= W / tp / sp && pp <= m->n_layer; pp++) {
                    if ((W / tp / sp) % pp) continue;
                    int dp = W / tp / sp / pp;
                    if (gb % dp) continue;
                    int b = gb / dp;
                    /* the microbatch set of search.c */
                    int mbs[8], nmb = 0;
                    if (pp == 1) mbs[nmb++] = 1;
                    for (int want = pp; want <= 8 * pp; want *= 2) {
                        int d = want;
                        while (d <= b && b % d) d++;
                        if (d <= b && (nmb == 0 || mbs[nmb - 1] < d)) mbs[nmb++] = d;
                    }
                    if (nmb == 0 || mbs[nmb - 1] < b) mbs[nmb++] = b;
                    for (int o = 0; o < 2; o++) {
                        if (o == 1 && (dp == 1 || pp == 1)) continue;
                        for (int z = 0; z <= 3; z++) {
                            if (z > 0 && dp * sp == 1) continue;
                            for (int sched = 0; sched < 3; sched += 2) { /* 1F1B, interleaved */
                                if (pp == 1 && sched) continue;
                                for (int v = sched ? 2 : 1; v <= (sched ? PT_VIRTUAL_STAGES_MAX : 1); v++) {
                                    int k = pp * v;
                                    if (k > m->n_layer || k > PT_PP_SPLIT_MAX) break;
                                    if (v > 2 && m->n_layer % k) continue;
                                    for (int split = 0; split < 2; split++) {
                                        pt_plan p;
                                        pt_plan_default(&p);
                                        p.mode = (pt_mode)smode[si];
                                        p.tp = tp; p.tp_depth = sdepth[si]; p.sp = sp; p.pp = pp; p.dp = dp;
                                        p.zero = z; p.schedule = sched; p.virtual_stages = v;
                                        memcpy(p.rank_order, o ? "PDT" : "DPT", 4);
                                        if (split == 0 && m->n_layer % k) continue;
                                        if (split == 1) {
                                            if (k == 1 || pt_plan_split_layers(lc, m->n_layer, k, p.pp_split) < 0) continue;
                                            p.pp_split_n = k;
                                        }
                                        for (int to = 0; to < 6; to++) {
                                        static const char *tpo[6] = {"012", "021", "102", "120", "201", "210"};
                                        memcpy(p.tp_order, tpo[to], 4);
                                        pt_cost_where w;
                                        int pp_next[64];
                                        if (pt_place_where(c, &p, &w, pp_next, 0) < 0) continue;
                                        for (int mi = 0; mi < nmb; mi++)
                                            for (int rc = 0; rc < 3; rc++) {
                                                p.microbatches = mbs[mi];
                                                p.recompute = rc;
                                                pt_cost cost;
                                                if (pt_plan_validate(&p, W) < 0 ||
                                                    pt_plan_check_model(&p, m->n_layer, b) < 0 ||
                                                    pt_cost_eval_at(m, gb, &p, &c->hw, &w, &cost) < 0)
                                                    continue;
                                                if (c->hw.mem_bytes > 0 && cost.mem_peak > c->hw.mem_bytes) continue;
                                                (*n_fit)++;
                                                if (cost.t_step < best) best = cost.t_step;
                                            }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
    }
    free(lc);
    return best;
}

static void test_exhaustive(void)
{
    pt_plan_limits lim = all_limits();
    int tpn[4], agree = 1, cases = 0;
    pt_model_shape models[2] = {{12, 4, 256, 128, 1024, .family = PT_FAMILY_GPT2}, {8, 8, 512, 256, 4096, .family = PT_FAMILY_GPT2}};
    for (int t = 0; t < 6; t++) {
        pt_cluster c = make_cluster(1 + (int)rnd(2), 4, (int)rnd(3), tpn);
        const pt_model_shape *m = &models[rnd(2)];
        int gb = 8 << rnd(3);
        long nf;
        /* a memory limit between the least and the most the plans need, so
         * recompute, ZeRO and the fit probe matter */
        pt_plan req;
        request(&req);
        pt_search_result r;
        c.hw.mem_bytes = 0;
        if (pt_plan_search(&c, m, gb, &lim, &req, &r) < 0) continue;
        double need = r.best.cost.mem_peak;
        c.hw.mem_bytes = need * (0.3 + 0.5 * rndu());
        double want = brute_best(&c, m, gb, &nf);
        int rc = pt_plan_search(&c, m, gb, &lim, &req, &r);
        int ok = (isinf(want) && rc < 0) || (rc == 0 && fabs(r.best.cost.t_step - want) <= 1e-12 * want);
        if (!ok) {
            agree = 0;
            tap_diag("case %d: %d nodes, L=%d, batch %d, mem %.3g GB: search %s %.6g, exhaustive %.6g (%ld fit)", t,
                     c.nnodes, m->n_layer, gb, c.hw.mem_bytes / 1e9, rc ? pt_errmsg() : "", rc ? 0 : r.best.cost.t_step,
                     want, nf);
        }
        cases++;
    }
    tap_ok(agree && cases > 0, "search: the winner's t_step equals the exhaustive minimum over the same space "
                               "under a memory limit (%d random clusters, models, batches)", cases);
}

/* ---- sequence x tensor parallelism ---- */

/* Ring attention runs on each rank's heads, so sp composes with every tp
 * shape: the search prices sp x tp grids (the communicators on the links
 * of their placement), and a long sequence that fits 80 GB only with both
 * plans both.  Pins of both are honoured. */
static void test_sp_tp(void)
{
    pt_plan_limits lim = all_limits();
    int tpn[8];
    pt_cluster c = make_cluster(1, 8, 0, tpn);
    pt_model_shape longseq = {24, 16, 2048, 65536, 50257, .family = PT_FAMILY_GPT2};
    pt_plan req;
    request(&req);
    pt_search_result r;
    int rc = pt_plan_search(&c, &longseq, 8, &lim, &req, &r);
    char s[640] = "";
    if (rc == 0) pt_plan_summary(&r.best.plan, s, sizeof s);
    const pt_plan *b = &r.best.plan;
    tap_ok(rc == 0 && b->tp > 1 && b->sp > 1 && r.best.cost.bytes[PT_GRP_TP] > 0 && r.best.cost.bytes[PT_GRP_SP] > 0,
           "search: L24 C2048 T=65536 on 1 node x 8 plans sp x tp: %s", rc ? pt_errmsg() : s);
    /* the winner's price is the cost model's on its own placement */
    int priced = 0;
    if (rc == 0) {
        pt_cost_where w;
        int pp_next[64];
        pt_cost cost;
        priced = pt_place_where(&c, b, &w, pp_next, 0) == 0 &&
                 pt_cost_eval_at(&longseq, 8, b, &c.hw, &w, &cost) == 0 &&
                 cost.t_step == r.best.cost.t_step && cost.mem_peak == r.best.cost.mem_peak &&
                 cost.mem_peak <= c.hw.mem_bytes;
    }
    tap_ok(priced, "search: the sp x tp winner's t_step and memory are pt_cost_eval_at's on its placement (%.4g s, "
           "%.3g GB)", rc ? 0 : r.best.cost.t_step, rc ? 0 : r.best.cost.mem_peak / 1e9);
    /* what the space without sp x tp offers is slower: sp only (tp = 1) and
     * tp only (sp = 1) */
    double t_best = rc == 0 ? r.best.cost.t_step : 0, t_tp1 = INFINITY, t_sp1 = INFINITY;
    pt_search_result r1;
    request(&req);
    req.tp = 1;
    if (pt_plan_search(&c, &longseq, 8, &lim, &req, &r1) == 0) t_tp1 = r1.best.cost.t_step;
    request(&req);
    req.sp = 1;
    if (pt_plan_search(&c, &longseq, 8, &lim, &req, &r1) == 0) t_sp1 = r1.best.cost.t_step;
    tap_ok(rc == 0 && t_best < t_tp1 && t_best < t_sp1,
           "search: sp x tp beats the best plan with tp=1 (%.4g s) and with sp=1 (%.4g s): %.4g s", t_tp1, t_sp1,
           t_best);
    /* pins: tp=2 sp=2 on 4 ranks, and 2d tp=4 with sp=2 on 8 */
    pt_model_shape gpt2 = {12, 12, 768, 1024, 50257, .family = PT_FAMILY_GPT2};
    int tpn4[1];
    pt_cluster c4 = make_cluster(1, 4, 0, tpn4);
    request(&req);
    req.tp = 2;
    req.sp = 2;
    rc = pt_plan_search(&c4, &gpt2, 64, &lim, &req, &r);
    int pins = rc == 0 && r.best.plan.tp == 2 && r.best.plan.sp == 2 && r.best.plan.dp == 1;
    for (int j = 0; rc == 0 && j < r.nrunners; j++)
        if (r.runner[j].plan.tp != 2 || r.runner[j].plan.sp != 2) pins = 0;
    tap_ok(pins, "search: pinned tp=2 sp=2 on 4 ranks holds for the winner and every runner-up%s%s", rc ? ": " : "",
           rc ? pt_errmsg() : "");
    request(&req);
    req.mode = PT_MODE_2D;
    req.sp = 2;
    rc = pt_plan_search(&c, &gpt2, 64, &lim, &req, &r);
    tap_ok(rc == 0 && r.best.plan.mode == PT_MODE_2D && r.best.plan.tp == 4 && r.best.plan.sp == 2,
           "search: --ptrain-mode=2d with sp=2 on 8 ranks plans 2d tp=4 sp=2%s%s", rc ? ": " : "", rc ? pt_errmsg() : "");
}

/* ---- mixed nodes: D'Hondt's stage sizes, the slowest rates, the explanation ---- */

/* the least makespan max_s (split_s + extra_s) / speed_s over every split
 * of n layers into k stages of >= 1 each, by enumeration */
static double brute_makespan(const double *speed, const double *extra, int k, int n, int s, int left, int *cur)
{
    if (s == k - 1) {
        cur[s] = left;
        double worst = 0;
        for (int i = 0; i < k; i++) {
            double t = (cur[i] + extra[i]) / speed[i];
            if (t > worst) worst = t;
        }
        return worst;
    }
    double best = INFINITY;
    for (int x = 1; x <= left - (k - 1 - s); x++) {
        cur[s] = x;
        double t = brute_makespan(speed, extra, k, n, s + 1, left - x, cur);
        if (t < best) best = t;
    }
    return best;
}

static void test_mixed(void)
{
    /* a hand-checked case: two stages alike, the second holding the head
     * worth 2 layers: 10 layers split 6,4 (6 and 4 + 2) */
    double sp2[2] = {1, 1}, ex2[2] = {0, 2};
    int sp[8];
    int rc = pt_plan_split_dhondt(sp2, ex2, 2, 10, sp);
    tap_ok(rc == 0 && sp[0] == 6 && sp[1] == 4, "D'Hondt: 10 layers, the last stage holding 2 layers of head: %d,%d "
           "(want 6,4)", sp[0], sp[1]);
    double sp3[2] = {2, 1};
    rc = pt_plan_split_dhondt(sp3, NULL, 2, 9, sp);
    tap_ok(rc == 0 && sp[0] == 6 && sp[1] == 3, "D'Hondt: a stage twice as fast gets twice the layers (9 -> %d,%d)",
           sp[0], sp[1]);
    /* D'Hondt as unit jobs on machines of different speeds, each to the
     * machine that finishes it first, is optimal: its makespan equals the
     * least over every split (random speeds, head work) */
    int ok = 1, n_ok = 0;
    for (int t = 0; t < 200; t++) {
        int k = 1 + (int)rnd(4), n = k + (int)rnd(9);
        double speed[4], extra[4], cur[4];
        int cu[4];
        for (int i = 0; i < k; i++) speed[i] = 0.5 + rndu() * 3, extra[i] = 0;
        extra[k - 1] = rnd(2) ? rndu() * 4 : 0;
        if (pt_plan_split_dhondt(speed, extra, k, n, sp) < 0) {
            ok = 0;
            continue;
        }
        double got = 0;
        int sum = 0, pos = 1;
        for (int i = 0; i < k; i++) {
            sum += sp[i];
            pos &= sp[i] >= 1;
            double x = (sp[i] + extra[i]) / speed[i];
            if (x > got) got = x;
        }
        (void)cur;
        double want = brute_makespan(speed, extra, k, n, 0, n, cu);
        if (sum != n || !pos || got > want * (1 + 1e-12)) {
            ok = 0;
            tap_diag("k=%d n=%d: D'Hondt makespan %.6g, least %.6g", k, n, got, want);
        } else {
            n_ok++;
        }
    }
    tap_ok(ok, "D'Hondt: every split covers the layers, >= 1 each, with the least makespan of all splits (%d random "
               "cases)", n_ok);
    tap_ok(pt_plan_split_dhondt(sp3, NULL, 3, 2, sp) < 0 && strstr(pt_errmsg(), "3 stages for 2 layers"),
           "D'Hondt: more stages than layers refused: %s", pt_errmsg());

    /* a cluster of two kinds, one twice as fast: every node alike at the
     * slow kind's rates gives the same pp=1 plan and time; a pinned pp=2
     * gives the fast kind's stage (node 0, stage 0 under DPT; the head is
     * on the slow last stage) more layers */
    int tpn[2] = {4, 4}, kind_of[2] = {1, 0};
    pt_node_kind kinds[2];
    memset(kinds, 0, sizeof kinds);
    pt_cluster slowc = make_cluster(2, 4, 0, tpn);
    kinds[0].name = "slow";
    kinds[0].hw = slowc.hw;
    kinds[1].name = "fast";
    kinds[1].hw = slowc.hw;
    kinds[1].hw.gemm_gflops *= 2;
    kinds[1].hw.gbps[PT_NET_INTER] *= 2;
    pt_cluster mixed = slowc;
    mixed.nkinds = 2;
    mixed.kinds = kinds;
    mixed.kind_of = kind_of;
    pt_cluster_slowest(&mixed, &mixed.hw, NULL);
    pt_plan_limits lim = all_limits();
    pt_plan req;
    request(&req);
    req.pp = 1;
    pt_search_result r1, r2;
    pt_model_shape gpt2 = {12, 12, 768, 1024, 50257, .family = PT_FAMILY_GPT2};
    int rc1 = pt_plan_search(&slowc, &gpt2, 64, &lim, &req, &r1);
    int rc2 = pt_plan_search(&mixed, &gpt2, 64, &lim, &req, &r2);
    tap_ok(rc1 == 0 && rc2 == 0 && r1.best.cost.t_step == r2.best.cost.t_step && !r1.limit[0] &&
               strstr(r2.limit, "limiting node: slow for compute") && strstr(r2.limit, "slow for the network"),
           "mixed nodes, pp=1: priced at the slowest node's rates (%.4g = %.4g s); the explanation names it: %s",
           rc1 ? 0 : r1.best.cost.t_step, rc2 ? 0 : r2.best.cost.t_step, rc2 ? pt_errmsg() : r2.limit);
    req.pp = 2;
    memcpy(req.rank_order, "DPT", 4);
    req.mode = PT_MODE_1D;
    req.tp = 4;
    rc2 = pt_plan_search(&mixed, &gpt2, 64, &lim, &req, &r2);
    const pt_plan *b = &r2.best.plan;
    tap_ok(rc2 == 0 && b->pp == 2 && b->pp_split_n == 2 && b->pp_split[0] > b->pp_split[1] + 1 &&
               strstr(r2.limit, "D'Hondt"),
           "mixed nodes, pp=2 over a slow and a fast node: the fast stage gets more layers (%d,%d), by D'Hondt: %s",
           rc2 ? 0 : b->pp_split[0], rc2 ? 0 : b->pp_split[1], rc2 ? pt_errmsg() : r2.limit);
    /* in bf16 the speeds are the bf16 rates: the slow kind's bf16 GEMMs 10x
     * its fp32 ones, the fast kind's unknown (its fp32 rate, 2x): the slow
     * kind's stage is now 5x faster and gets more layers, head and all */
    kinds[0].hw.gemm_gflops_bf16 = 10 * kinds[0].hw.gemm_gflops;
    pt_cluster_slowest(&mixed, &mixed.hw, NULL);
    req.precision = PT_PREC_BF16;
    rc2 = pt_plan_search(&mixed, &gpt2, 64, &lim, &req, &r2);
    tap_ok(rc2 == 0 && b->pp == 2 && b->pp_split_n == 2 && b->pp_split[1] > b->pp_split[0] + 1 &&
               strstr(r2.limit, "D'Hondt") && strstr(r2.limit, "run at 1e+05,5e+05 GFLOP/s"),
           "mixed nodes in bf16, pp=2: the stage of the kind with the faster bf16 GEMM gets more layers (%d,%d): %s",
           rc2 ? 0 : b->pp_split[0], rc2 ? 0 : b->pp_split[1], rc2 ? pt_errmsg() : r2.limit);
    req.precision = PT_PREC_FP32;

    /* the bf16 GEMM rate of the slower of two: the least of what each
     * side computes bf16 at (its gemm_gflops_bf16, else its gemm_gflops),
     * 0 while neither knows one */
    pt_hw h1, h2;
    memset(&h1, 0, sizeof h1);
    memset(&h2, 0, sizeof h2);
    const double g1 = 10 + rndu() * 100, g2 = 10 + rndu() * 100;
    h1.gemm_gflops = g1, h2.gemm_gflops = g2;
    pt_hw m = h1;
    pt_hw_take_slower(&m, &h2);
    int okb = m.gemm_gflops_bf16 == 0;
    h1.gemm_gflops_bf16 = 6 * g1;
    m = h1;
    pt_hw_take_slower(&m, &h2);
    const double lb = 6 * g1 < g2 ? 6 * g1 : g2; /* h2 computes bf16 at its fp32 rate */
    okb = okb && m.gemm_gflops_bf16 == lb;
    m = h2;
    pt_hw_take_slower(&m, &h1);
    okb = okb && m.gemm_gflops_bf16 == lb;
    h2.gemm_gflops_bf16 = 7 * g2;
    m = h1;
    pt_hw_take_slower(&m, &h2);
    okb = okb && m.gemm_gflops_bf16 == (6 * g1 < 7 * g2 ? 6 * g1 : 7 * g2) && m.gemm_gflops == (g1 < g2 ? g1 : g2);
    tap_ok(okb, "slower of two: the bf16 rate is the least of each side's bf16-or-fp32 rate (%.4g, %.4g GFLOP/s fp32)",
           g1, g2);

    /* a bf16 plan searched on a node whose bf16 GEMMs are 6x faster is
     * faster than the fp32 plan, and than bf16 at the fp32 rate */
    int tpn1[1] = {2};
    pt_cluster bc = make_cluster(1, 2, 0, tpn1);
    pt_plan rq;
    request(&rq);
    pt_search_result rf, rb0, rb;
    int rcf = pt_plan_search(&bc, &gpt2, 8, &lim, &rq, &rf);
    rq.precision = PT_PREC_BF16;
    int rcb0 = pt_plan_search(&bc, &gpt2, 8, &lim, &rq, &rb0);
    bc.hw.gemm_gflops_bf16 = 6 * bc.hw.gemm_gflops;
    int rcb = pt_plan_search(&bc, &gpt2, 8, &lim, &rq, &rb);
    tap_ok(rcf == 0 && rcb0 == 0 && rcb == 0 && rb.best.plan.precision == PT_PREC_BF16 &&
               rb.best.cost.t_compute < rb0.best.cost.t_compute / 5 && rb.best.cost.t_step < rf.best.cost.t_step,
           "bf16 search at 6x the fp32 GEMM rate: %.4g s per step (bf16 at the fp32 rate %.4g s, fp32 %.4g s)",
           rcb ? 0 : rb.best.cost.t_step, rcb0 ? 0 : rb0.best.cost.t_step, rcf ? 0 : rf.best.cost.t_step);
}

int main(void)
{
    const char *seed = getenv("PTRAIN_TEST_SEED");
    rng_state = seed ? strtoull(seed, NULL, 10) : (uint64_t)time(NULL);
    tap_diag("seed %llu (PTRAIN_TEST_SEED repeats it)", (unsigned long long)rng_state);
    test_split();
    test_links();
    test_search();
    test_llama();
    test_exhaustive();
    test_sp_tp();
    test_mixed();
    return tap_done();
}
