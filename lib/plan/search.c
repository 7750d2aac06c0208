/* SPDX-License-Identifier: MIT */
/* The planner: search over every plan for a job, placement links, the
 * uneven stage split and the explanation.  See search.h for the contract.
 *
 * libc + libm only (linked into the SPANK plugin).  Deterministic: no
 * clock, no randomness, every loop in a fixed order, ties broken by the
 * rules in pt_plan_search's comment. */
#include "plan/search.h"

#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- placement links --------------------------------------------------- */

/* Where rank r sits: its node and its island inside the node, for ranks
 * numbered node by node (pt_plan_rank).  Uniform clusters need no table;
 * others use prefix sums (binary search).  Mixed clusters take each
 * node's island size from its kind. */
typedef struct rank_map {
    int nnodes, uniform, tpn, island;
    const int *tpn_of;
    const pt_cluster *c;
    long long *start; /* [nnodes + 1] first rank of each node, NULL if uniform */
} rank_map;

static int node_island(const pt_cluster *c, int n)
{
    if (c->nkinds > 0 && c->kinds && c->kind_of && c->kind_of[n] >= 0 && c->kind_of[n] < c->nkinds)
        return c->kinds[c->kind_of[n]].island_ranks;
    return c->island_ranks;
}

static int map_init(rank_map *m, const pt_cluster *c)
{
    memset(m, 0, sizeof *m);
    m->nnodes = c->nnodes;
    m->tpn_of = c->tasks_per_node;
    m->c = c;
    m->island = c->island_ranks;
    m->uniform = c->nkinds <= 1 || !c->kinds || !c->kind_of;
    m->tpn = c->tasks_per_node[0];
    if (m->uniform && c->nkinds == 1 && c->kinds) m->island = c->kinds[0].island_ranks;
    for (int i = 1; i < c->nnodes; i++)
        if (c->tasks_per_node[i] != m->tpn) m->uniform = 0;
    if (m->uniform) return 0;
    m->start = malloc(sizeof *m->start * (size_t)(c->nnodes + 1));
    if (!m->start) return -1;
    m->start[0] = 0;
    for (int i = 0; i < c->nnodes; i++) m->start[i + 1] = m->start[i] + c->tasks_per_node[i];
    return 0;
}

static void map_where(const rank_map *m, long long r, int *node, int *isl)
{
    int n, local, tpn, island;
    if (m->uniform) {
        n = (int)(r / m->tpn);
        local = (int)(r % m->tpn);
        tpn = m->tpn;
        island = m->island;
    } else {
        int lo = 0, hi = m->nnodes - 1;
        while (lo < hi) { /* last node whose start <= r */
            int mid = (lo + hi + 1) / 2;
            if (m->start[mid] <= r) lo = mid;
            else hi = mid - 1;
        }
        n = lo;
        local = (int)(r - m->start[lo]);
        tpn = m->tpn_of[lo];
        island = node_island(m->c, lo);
    }
    *node = n;
    *isl = (island <= 0 || island >= tpn) ? 0 : local / island;
}

/* The link class between ranks a and b. */
static int link_between(const rank_map *m, long long a, long long b)
{
    int na, ia, nb, ib;
    map_where(m, a, &na, &ia);
    map_where(m, b, &nb, &ib);
    return na != nb ? PT_NET_INTER : ia != ib ? PT_NET_NODE : PT_NET_ISLAND;
}

/* The communicators whose link the cost model of plan p needs (the
 * layouts' groups that carry traffic; the sync masks of every layout's
 * parameters), as bits of PT_SUB_*. */
static unsigned long needed_subs(const pt_plan *p)
{
    unsigned long need = 1ul << PT_SUB_SP | 1ul << PT_SUB_PP | 1ul << PT_SUB_EMBED | 1ul << PT_SUB_DP;
    if (p->mode == PT_MODE_2D || p->mode == PT_MODE_2P5D) {
        need |= 1ul << PT_SUB_TP_MASK(2) | 1ul << PT_SUB_TP_MASK(4) | 1ul << PT_SUB_TP_MASK(6);
        need |= 1ul << PT_SUB_SYNC_MASK(1) | 1ul << PT_SUB_SYNC_MASK(3);
    } else if (p->mode == PT_MODE_3D) {
        need |= 1ul << PT_SUB_TP_MASK(1) | 1ul << PT_SUB_TP_MASK(2) | 1ul << PT_SUB_TP_MASK(4);
        need |= 1ul << PT_SUB_SYNC_MASK(0) | 1ul << PT_SUB_SYNC_MASK(3) | 1ul << PT_SUB_SYNC_MASK(5);
    } else {
        need |= 1ul << PT_SUB_TP | 1ul << PT_SUB_SYNC_MASK(0);
    }
    return need;
}

int pt_place_where(const pt_cluster *c, const pt_plan *p, pt_cost_where *w, int *pp_next, unsigned flags)
{
    memset(w, 0, sizeof *w);
    for (int s = 0; s < PT_SUB_N; s++) w->sub_link[s] = PT_NET_ISLAND;
    if (!c || !p || c->nnodes < 1 || !c->tasks_per_node || p->dp < 1 || p->pp < 1 || p->tp < 1 || p->sp < 1)
        return -1;
    int dims[3];
    if (pt_plan_tp_dims(p, dims) < 0 || memchr(p->tp_order, '\0', sizeof p->tp_order) == NULL ||
        strlen(p->tp_order) != 3)
        return -1;
    for (int i = 0; i < 3; i++)
        if (p->tp_order[i] < '0' || p->tp_order[i] > '2') return -1;
    const int pp = p->pp;
    if (pp_next) {
        for (int r = 0; r < pp; r++) pp_next[r] = PT_NET_ISLAND;
        w->pp_next = pp_next;
    }
    long long world = (long long)p->dp * p->pp * p->tp * p->sp, tasks = 0;
    for (int i = 0; i < c->nnodes; i++) tasks += c->tasks_per_node[i] > 0 ? c->tasks_per_node[i] : 0;
    rank_map m;
    if (world != tasks || map_init(&m, c) < 0) {
        /* Not a plan of this cluster (or no memory): the safe answer is
         * that every group crosses the network. */
        for (int s = 0; s < PT_SUB_N; s++) w->sub_link[s] = PT_NET_INTER;
        if (pp_next)
            for (int r = 0; r < pp; r++) pp_next[r] = PT_NET_INTER;
        return world != tasks ? 1 : -1;
    }
    /* Stride of each axis in the rank order (right-most fastest); the T
     * axis holds tp*sp ranks, tp fastest inside it, its tp part laid out
     * in tp_order (right-most fastest). */
    long long stride[3] = {0, 0, 0}, acc = 1; /* D, P, T */
    for (int i = 2; i >= 0; i--) {
        char a = p->rank_order[i];
        int idx = a == 'D' ? 0 : a == 'P' ? 1 : 2;
        stride[idx] = acc;
        acc *= idx == 0 ? p->dp : idx == 1 ? p->pp : (long long)p->tp * p->sp;
    }
    const long long sD = stride[0], sP = stride[1], sT = stride[2], sS = stride[2] * p->tp;
    long long ts[3]; /* stride of tp axis a inside the block's tp part */
    long long tacc = 1;
    for (int i = 2; i >= 0; i--) {
        const int a = p->tp_order[i] - '0';
        ts[a] = tacc;
        tacc *= dims[a];
    }
    unsigned long need = (flags & PT_PLACE_ALL) ? ~0ul : needed_subs(p);
    /* the communicators of one rank: size > 1 only */
    for (int s = 0; s < PT_SUB_N; s++) {
        long long size = 0;
        if (s == PT_SUB_TP) size = p->tp;
        else if (s < PT_SUB_SYNC) {
            const int mask = s - PT_SUB_TP_AXES + 1;
            size = 1;
            for (int a = 0; a < 3; a++)
                if (mask & (1 << a)) size *= dims[a];
        } else if (s < PT_SUB_SP) {
            const int mask = s - PT_SUB_SYNC;
            size = (long long)p->dp * p->sp;
            for (int a = 0; a < 3; a++)
                if (mask & (1 << a)) size *= dims[a];
        } else if (s == PT_SUB_SP) size = p->sp;
        else if (s == PT_SUB_PP || s == PT_SUB_EMBED) size = pp;
        else size = p->dp;
        if (size <= 1) need &= ~(1ul << s);
    }
    for (long long r = 0; r < world; r++) {
        const int d = (int)(r / sD % p->dp), pr = (int)(r / sP % pp);
        const long long pos = r / sT % ((long long)p->tp * p->sp), tpos = pos % p->tp, sc = pos / p->tp;
        long long off[3]; /* rank offset of this rank's coordinate on each tp axis */
        for (int a = 0; a < 3; a++) off[a] = tpos / ts[a] % dims[a] * ts[a] * sT;
        int node, isl;
        map_where(&m, r, &node, &isl);
        for (int s = 0; s < PT_SUB_N; s++) {
            if (!(need & (1ul << s)) || w->sub_link[s] == PT_NET_INTER) continue;
            long long lead;
            if (s == PT_SUB_TP) lead = r - tpos * sT;
            else if (s < PT_SUB_SYNC) {
                const int mask = s - PT_SUB_TP_AXES + 1;
                lead = r;
                for (int a = 0; a < 3; a++)
                    if (mask & (1 << a)) lead -= off[a];
            } else if (s < PT_SUB_SP) {
                const int mask = s - PT_SUB_SYNC;
                lead = r - d * sD - sc * sS;
                for (int a = 0; a < 3; a++)
                    if (mask & (1 << a)) lead -= off[a];
            } else if (s == PT_SUB_SP) lead = r - sc * sS;
            else if (s == PT_SUB_PP) lead = r - pr * sP;
            else if (s == PT_SUB_EMBED) {
                if (pr != pp - 1) continue; /* first and last stage */
                lead = r - (long long)(pp - 1) * sP;
            } else lead = r - d * sD;
            if (lead == r) continue;
            int n2, i2;
            map_where(&m, lead, &n2, &i2);
            const int l = n2 != node ? PT_NET_INTER : i2 != isl ? PT_NET_NODE : PT_NET_ISLAND;
            if (l > w->sub_link[s]) w->sub_link[s] = l;
        }
        if (pp_next && pp > 1 && pp_next[pr] != PT_NET_INTER) {
            const long long other = r + ((long long)((pr + 1) % pp) - pr) * sP;
            const int l = link_between(&m, r, other);
            if (l > pp_next[pr]) pp_next[pr] = l;
        }
    }
    free(m.start);
    return 0;
}

void pt_place_links(const pt_cluster *c, const pt_plan *p, int link[PT_GRP_N])
{
    for (int g = 0; g < PT_GRP_N; g++) link[g] = PT_NET_ISLAND;
    pt_cost_where w;
    pt_plan q;
    if (!p) return;
    q = *p;
    if (memchr(q.tp_order, '\0', sizeof q.tp_order) == NULL || strlen(q.tp_order) != 3) memcpy(q.tp_order, "012", 4);
    int dims[3];
    if (pt_plan_tp_dims(&q, dims) < 0) { /* not a grid of its mode: price tp as one 1d group */
        q.mode = PT_MODE_1D;
        q.tp_depth = 1;
    }
    if (pt_place_where(c, &q, &w, NULL, 0) < 0 && (!c || !p || c->nnodes < 1 || !c->tasks_per_node))
        return;
    for (int s = 0; s < PT_SUB_N; s++) {
        const int g = pt_cost_sub_group(s);
        if (w.sub_link[s] > link[g]) link[g] = w.sub_link[s];
    }
    /* groups of size 1 span nothing */
    if (p->dp == 1) link[PT_GRP_DP] = PT_NET_ISLAND;
    if (p->tp == 1) link[PT_GRP_TP] = PT_NET_ISLAND;
    if (p->pp == 1) link[PT_GRP_PP] = PT_NET_ISLAND;
    if (p->sp == 1) link[PT_GRP_SP] = PT_NET_ISLAND;
}

/* ---- stage split ------------------------------------------------------- */

int pt_plan_split_dhondt(const double *speed, const double *extra, int k, int n, int *split)
{
    if (!speed || !split) return pt_fail(PT_EINVAL, "D'Hondt split: no speeds or output given");
    if (k < 1 || k > n)
        return pt_fail(PT_EINVAL, "D'Hondt split: %d stages for %d layers (valid: 1..%d stages)", k, n, n > 0 ? n : 0);
    for (int s = 0; s < k; s++)
        if (!(speed[s] > 0) || isinf(speed[s]) || (extra && (!(extra[s] >= 0) || isinf(extra[s]))))
            return pt_fail(PT_EINVAL, "D'Hondt split: stage %d has speed %g, extra work %g (valid: speed > 0, extra >= 0, "
                           "finite)", s, speed[s], extra ? extra[s] : 0);
    for (int s = 0; s < k; s++) split[s] = 1; /* every stage holds a layer */
    for (int seat = k; seat < n; seat++) {
        int best = 0;
        double bq = -1;
        for (int s = 0; s < k; s++) { /* the highest average; ties: the earlier stage */
            const double q = speed[s] / ((double)split[s] + (extra ? extra[s] : 0) + 1.0);
            if (q > bq) bq = q, best = s;
        }
        split[best]++;
    }
    return 0;
}

int pt_plan_split_layers(const double *cost, int n, int k, int *split)
{
    if (!cost || !split) return pt_fail(PT_EINVAL, "stage split: no costs or output given");
    if (k < 1 || k > n)
        return pt_fail(PT_EINVAL, "stage split: %d stages for %d layers (valid: 1..%d stages)", k,
                       n, n > 0 ? n : 0);
    for (int i = 0; i < n; i++)
        if (!(cost[i] >= 0) || isinf(cost[i]))
            return pt_fail(PT_EINVAL, "stage split: layer %d has cost %g (valid: finite, >= 0)", i,
                           cost[i]);
    double *pre = malloc(sizeof *pre * (size_t)(n + 1));
    /* best[j][i]: the least largest stage cost of layers [0, i) in j stages */
    double *best = malloc(sizeof *best * (size_t)(k + 1) * (size_t)(n + 1));
    if (!pre || !best) {
        free(pre);
        free(best);
        return pt_fail(PT_ENOMEM, "stage split: out of memory (%d layers, %d stages)", n, k);
    }
    pre[0] = 0;
    for (int i = 0; i < n; i++) pre[i + 1] = pre[i] + cost[i];
#define B(j, i) best[(size_t)(j) * (size_t)(n + 1) + (size_t)(i)]
    for (int i = 0; i <= n; i++) B(0, i) = i == 0 ? 0 : INFINITY;
    for (int j = 1; j <= k; j++)
        for (int i = 0; i <= n; i++) {
            double v = INFINITY;
            for (int s = j - 1; s < i; s++) { /* the last stage is [s, i) */
                double w = fmax(B(j - 1, s), pre[i] - pre[s]);
                if (w < v) v = w;
            }
            B(j, i) = v;
        }
    /* Second pass: among the splits whose every stage is <= the optimum,
     * the one with the least sum of squared stage costs (the most even
     * one: the min-max alone leaves the other stages free, e.g. 5,5,1,1).
     * Equality within a relative 1e-12 absorbs the rounding of the prefix
     * sums. */
    double opt = B(k, n), tol = 1e-12 * (pre[n] > 0 ? pre[n] : 1);
    for (int i2 = 0; i2 <= n; i2++) B(0, i2) = i2 == 0 ? 0 : INFINITY;
    for (int j = 1; j <= k; j++)
        for (int i2 = 0; i2 <= n; i2++) {
            double v = INFINITY;
            for (int s = i2 - 1; s >= j - 1; s--) {
                double w = pre[i2] - pre[s];
                if (w > opt + tol) break;
                double q = B(j - 1, s) + w * w;
                if (q < v) v = q;
            }
            B(j, i2) = v;
        }
    /* Walk back: each stage from the end is the shortest that keeps the
     * least sum of squares (so earlier stages are the larger ones on
     * ties). */
    double qtol = 1e-12 * (pre[n] * pre[n] > 0 ? pre[n] * pre[n] : 1);
    int i = n;
    for (int j = k; j >= 1; j--) {
        int pick = j - 1;
        double target = B(j, i);
        for (int s = i - 1; s >= j - 1; s--) {
            double w = pre[i] - pre[s];
            if (w > opt + tol) break;
            if (B(j - 1, s) + w * w <= target + qtol) {
                pick = s;
                break;
            }
        }
        split[j - 1] = i - pick;
        i = pick;
    }
#undef B
    free(pre);
    free(best);
    return 0;
}

void pt_plan_layer_costs(const pt_model_shape *m, double *cost)
{
    double C = m->n_embd, T = m->seq_len, V = m->vocab;
    double block = 2.0 * T * pt_cost_block_matmul_params(m) + 4.0 * T * T * C;
    for (int i = 0; i < m->n_layer; i++) cost[i] = block;
    if (m->n_layer > 0) cost[m->n_layer - 1] += 2.0 * T * C * V;
}

/* ---- search ------------------------------------------------------------ */


/* The result list: best first, at most 1 + PT_SEARCH_RUNNERS entries,
 * one per layout key (mode, tp shape, dp, pp, sp, ZeRO stage), so that
 * the runners-up are other layouts, not the winner with another
 * microbatch count. */
typedef struct top_list {
    pt_candidate c[1 + PT_SEARCH_RUNNERS];
    int n;
} top_list;

static double slow_bytes(const pt_candidate *c, int cls)
{
    double b = 0;
    for (int s = 0; s < PT_SUB_N; s++)
        if (c->cost.sub_link[s] == cls) b += c->cost.sub_bytes[s];
    return b;
}

/* <0 when a ranks before b: t_step, then fewer bytes on the network, then
 * on the node links, then smaller pp, smaller tp, then the summary text. */
static int cand_cmp(const pt_candidate *a, const pt_candidate *b)
{
    if (a->cost.t_step != b->cost.t_step) return a->cost.t_step < b->cost.t_step ? -1 : 1;
    for (int cls = PT_NET_INTER; cls >= PT_NET_NODE; cls--) {
        double x = slow_bytes(a, cls), y = slow_bytes(b, cls);
        if (x != y) return x < y ? -1 : 1;
    }
    if (a->plan.pp != b->plan.pp) return a->plan.pp < b->plan.pp ? -1 : 1;
    if (a->plan.tp != b->plan.tp) return a->plan.tp < b->plan.tp ? -1 : 1;
    char sa[640], sb[640];
    pt_plan_summary(&a->plan, sa, sizeof sa);
    pt_plan_summary(&b->plan, sb, sizeof sb);
    return strcmp(sa, sb);
}

/* Where the plans of one grid, rank order and tp order run: each
 * communicator's link (and each pipeline neighbour's, each stage's rates
 * on mixed nodes), and per group the slowest link of the communicators the
 * layout sends on (the explanation's columns). */
typedef struct placement {
    pt_cost_where w;
    int link[PT_GRP_N];
    pt_hw *stage_buf;  /* [pp] storage for w.stage_hw (mixed nodes); w.stage_hw NULL when the
                        * stages run at the same rates */
} placement;

static int same_key(const pt_plan *a, const pt_plan *b)
{
    return a->mode == b->mode && a->tp == b->tp && a->tp_depth == b->tp_depth && a->dp == b->dp &&
           a->pp == b->pp && a->sp == b->sp && a->zero == b->zero;
}

static void top_add(top_list *t, const pt_candidate *c)
{
    int cap = 1 + PT_SEARCH_RUNNERS;
    for (int i = 0; i < t->n; i++)
        if (same_key(&t->c[i].plan, &c->plan)) {
            if (cand_cmp(c, &t->c[i]) >= 0) return;
            memmove(&t->c[i], &t->c[i + 1], sizeof t->c[0] * (size_t)(t->n - i - 1));
            t->n--;
            break;
        }
    int pos = t->n;
    while (pos > 0 && cand_cmp(c, &t->c[pos - 1]) < 0) pos--;
    if (pos >= cap) return;
    int move = (t->n < cap ? t->n : cap - 1) - pos;
    if (move > 0) memmove(&t->c[pos + 1], &t->c[pos], sizeof t->c[0] * (size_t)move);
    t->c[pos] = *c;
    if (t->n < cap) t->n++;
}

typedef struct search_ctx {
    const pt_cluster *c;
    pt_hw hw;               /* the rates of the synchronous groups (pt_cluster_slowest) */
    const pt_model_shape *m;
    int global_batch, world;
    top_list top;
    long nconsidered, nfit, nprobed;
    double least_mem;       /* the least mem_total of an evaluated plan (bytes) */
    pt_candidate least;     /* the plan that needs it */
    int have_least;
    pt_errsave last_err;    /* pt_cost_eval's last refusal (pt_error_save) */
    int have_err;
    double round_best;      /* the least t_step of the plans kept since it was reset */
    double *layer_cost;     /* [n_layer] relative FLOPs per layer (pt_plan_layer_costs) */
    int split_state[PT_PP_SPLIT_MAX + 1]; /* per stage count k: 0 unknown, 1 even, 2 uneven, -1 none */
    int split[PT_PP_SPLIT_MAX + 1][PT_PP_SPLIT_MAX]; /* the min-max split into k stages */
} search_ctx;

/* The min-max split of the layers into k stages (cached per k): 1 when it
 * is the even split, 2 when uneven (in *out), -1 when there is none. */
static int split_for(search_ctx *x, int k, const int **out)
{
    if (x->split_state[k] == 0) {
        int L = x->m->n_layer;
        if (pt_plan_split_layers(x->layer_cost, L, k, x->split[k]) < 0) {
            x->split_state[k] = -1;
        } else {
            int even = L % k == 0;
            for (int i = 0; even && i < k; i++)
                if (x->split[k][i] != L / k) even = 0;
            x->split_state[k] = even ? 1 : 2;
        }
    }
    *out = x->split[k];
    return x->split_state[k];
}

/* The stage splits a pipeline plan is tried with, each a copy of base:
 * the user's (req->pp_split), else the even one (when k stages divide L
 * layers) and the min-max one (split_for, when it differs from even).
 * Returns how many were written into out[2]. */
static int split_variants(search_ctx *x, const pt_plan *base, const pt_plan *req, const placement *pl, int L, int k,
                          pt_plan out[3])
{
    int n = 0;
    if (req->pp_split_n > 0) {
        out[n] = *base;
        out[n].pp_split_n = req->pp_split_n;
        memcpy(out[n].pp_split, req->pp_split, sizeof req->pp_split);
        return n + 1;
    }
    if (L % k == 0) {
        out[n] = *base;
        out[n++].pp_split_n = 0;
    }
    const int *sp_;
    if (k > 1 && split_for(x, k, &sp_) == 2) {
        out[n] = *base;
        out[n].pp_split_n = k;
        memcpy(out[n].pp_split, sp_, sizeof(int) * (size_t)k);
        n++;
    }
    /* stages on nodes of different speeds (mixed nodes): layers in
     * proportion to each stage's GEMM rate by D'Hondt's method, the head's
     * work held by the last stage (SageMaker's allocation, Karakus et al.
     * 2021, sec. 3.3) */
    if (k > 1 && pl && pl->w.stage_hw && k <= PT_PP_SPLIT_MAX) {
        double speed[PT_PP_SPLIT_MAX], extra[PT_PP_SPLIT_MAX];
        const int pp = base->pp;
        for (int vs = 0; vs < k; vs++) {
            speed[vs] = pt_hw_gemm_gflops(&pl->w.stage_hw[vs % pp], base->precision);
            extra[vs] = 0;
        }
        /* the head, in blocks: the last layer's cost beyond a block */
        if (x->layer_cost[0] > 0) extra[k - 1] = (x->layer_cost[L - 1] - x->layer_cost[0]) / x->layer_cost[0];
        int split[PT_PP_SPLIT_MAX];
        if (pt_plan_split_dhondt(speed, extra, k, L, split) == 0) {
            int dup = 0;
            for (int i = 0; i < n && !dup; i++) {
                int same = 1;
                for (int j = 0; j < k && same; j++)
                    same = (out[i].pp_split_n ? out[i].pp_split[j] : L / k) == split[j];
                dup = same;
            }
            if (!dup) {
                out[n] = *base;
                out[n].pp_split_n = k;
                memcpy(out[n].pp_split, split, sizeof(int) * (size_t)k);
                n++;
            }
        }
    }
    return n;
}


/* Evaluate one concrete plan: keeps it when it fits.  Returns 1 when it
 * fits memory, 0 when it does not, -1 when the plan is invalid or the
 * model refuses it. */
static int consider(search_ctx *x, const pt_plan *p, const placement *pl)
{
    int bpd = x->global_batch / p->dp;
    if (pt_plan_validate(p, x->world) < 0 || pt_plan_check_model(p, x->m->n_layer, bpd) < 0)
        return -1;
    pt_candidate cand;
    memset(&cand, 0, sizeof cand);
    cand.plan = *p;
    memcpy(cand.link, pl->link, sizeof cand.link);
    x->nconsidered++;
    if (pt_cost_eval_at(x->m, x->global_batch, p, &x->hw, &pl->w, &cand.cost) < 0) {
        pt_error_save(&x->last_err);
        x->have_err = 1;
        return -1;
    }
    if (!x->have_least || cand.cost.mem_peak < x->least_mem) {
        x->least_mem = cand.cost.mem_peak;
        x->least = cand;
        x->have_least = 1;
    }
    if (x->hw.mem_bytes > 0 && cand.cost.mem_peak > x->hw.mem_bytes) return 0;
    x->nfit++;
    if (cand.cost.t_step < x->round_best) x->round_best = cand.cost.t_step;
    top_add(&x->top, &cand);
    return 1;
}

/* Microbatch counts worth trying for b sequences per dp rank and pp
 * stages: 1 without a pipeline (no accumulation), then the smallest
 * divisor of b at or above pp, 2pp, 4pp, 8pp (the bubble (pp-1)/m
 * halves each time), and b itself (microbatches of one sequence, the
 * least activation memory).  At most 6, ascending. */
static int microbatch_set(int b, int pp, int *out)
{
    int n = 0;
    if (b < 1) return 0;
    if (pp == 1) out[n++] = 1;
    for (int want = pp; want <= 8 * pp; want *= 2) {
        int d = want;
        while (d <= b && b % d) d++;
        if (d <= b && (n == 0 || out[n - 1] < d)) out[n++] = d;
    }
    if (n == 0 || out[n - 1] < b) out[n++] = b;
    return n;
}

/* The pipeline part of a plan (schedule, virtual stages, split,
 * microbatches, recompute) for a fixed grid; every fitting variant goes
 * to consider(). */
static void pipeline_variants(search_ctx *x, pt_plan *p, const placement *link, const pt_plan *req,
                              const pt_plan_limits *lim)
{
    int L = x->m->n_layer, bpd = x->global_batch / p->dp;
    int mbs[8], nmb;
    if (req->microbatches > 0) {
        mbs[0] = req->microbatches;
        nmb = 1;
    } else {
        nmb = microbatch_set(bpd, p->pp, mbs);
    }
    unsigned scheds = lim ? lim->schedules : ~0u;
    for (int sched = 0; sched < 3; sched++) {
        if (!(scheds & (1u << sched))) continue;
        if (req->schedule != PT_SCHED_1F1B && sched != req->schedule) continue; /* pinned */
        if (p->pp == 1 && sched != PT_SCHED_1F1B) continue; /* no pipeline: one schedule */
        /* GPipe has 1F1B's bubble and holds more microbatches' activations
         * (Narayanan et al. 2021, sec. 2.1): only when 1F1B is not allowed */
        if (sched == PT_SCHED_GPIPE && req->schedule != PT_SCHED_GPIPE && (scheds & (1u << PT_SCHED_1F1B)))
            continue;
        int vlo = 1, vhi = 1;
        if (sched == PT_SCHED_INTERLEAVED) {
            vlo = req->virtual_stages > 1 ? req->virtual_stages : 2;
            vhi = req->virtual_stages > 1 ? req->virtual_stages : PT_VIRTUAL_STAGES_MAX;
        } else if (req->virtual_stages > 1) {
            continue;
        }
        double prev_best = INFINITY;
        for (int v = vlo; v <= vhi; v++) {
            int k = p->pp * v;
            if (k > L || k > PT_PP_SPLIT_MAX) break;
            /* beyond v = 2, only the v that split the layers evenly */
            if (v > 2 && L % k) continue;
            x->round_best = INFINITY;
            /* splits: the user's, else even (when it divides) and the
             * min-max split of the per-layer FLOPs when it differs */
            pt_plan base = *p;
            base.schedule = sched;
            base.virtual_stages = v;
            pt_plan splits[3];
            const int nsplit = split_variants(x, &base, req, link, L, k, splits);
            static const int rc_order[3] = {PT_RECOMPUTE_NONE, PT_RECOMPUTE_ATTENTION, PT_RECOMPUTE_BLOCK};
            for (int si = 0; si < nsplit; si++) {
                if (p->pp == 1) {
                    for (int mi = 0; mi < nmb; mi++) {
                        pt_plan q = splits[si];
                        q.microbatches = mbs[mi];
                        if (bpd % q.microbatches) continue;
                        if (req->recompute != PT_RECOMPUTE_NONE) {
                            q.recompute = req->recompute;
                            consider(x, &q, link);
                            continue;
                        }
                        /* recompute only when the plan does not fit
                         * without; without a pipeline more microbatches
                         * only add messages: the first count that fits
                         * without recompute is the last one tried */
                        int f = 0;
                        for (int ri = 0; ri < 3 && f == 0; ri++) {
                            q.recompute = rc_order[ri];
                            f = consider(x, &q, link);
                            if (f == 1 && ri == 0) mi = nmb;
                        }
                    }
                    continue;
                }
                /* with a pipeline: from the most microbatches down.
                 * Activation memory does not grow with more, smaller
                 * microbatches, so a recompute mode that does not fit
                 * here fits no smaller count: later counts start at the
                 * next heavier mode, and stop when none is left. */
                int floor_rc = 0;
                for (int mi = nmb - 1; mi >= 0 && floor_rc < 3; mi--) {
                    pt_plan q = splits[si];
                    q.microbatches = mbs[mi];
                    if (sched == PT_SCHED_INTERLEAVED && q.microbatches % q.pp) continue;
                    if (bpd % q.microbatches) continue;
                    if (req->recompute != PT_RECOMPUTE_NONE) {
                        q.recompute = req->recompute;
                        consider(x, &q, link);
                        continue;
                    }
                    for (int ri = floor_rc; ri < 3; ri++) {
                        q.recompute = rc_order[ri];
                        int f = consider(x, &q, link);
                        if (f != 0) break;  /* fits, or the model refuses this count */
                        floor_rc = ri + 1;  /* does not fit: nor at fewer microbatches */
                    }
                }
            }
            /* interleaving: the bubble shrinks as 1/v while the stage-to-
             * stage sends grow as v and more chunks are in flight, so the
             * step time is unimodal in v: stop at the first v that is no
             * better than the one before (or fits nothing) */
            if (sched == PT_SCHED_INTERLEAVED && req->virtual_stages <= 1) {
                if (!(x->round_best < prev_best)) break;
                prev_best = x->round_best;
            }
        }
    }
}

/* Whether any pipeline variant of grid p can fit memory: evaluates the
 * most frugal one (the largest microbatch count, so the smallest
 * microbatches; 1F1B, which holds at most pp microbatches in flight,
 * unless another schedule is pinned; block recompute unless recompute is
 * pinned), for each stage split the variants use (their peaks differ).  Activation memory only grows from there, and parameters,
 * gradients and optimizer state do not depend on the pipeline settings,
 * so when this one does not fit, none does; when the model accepts no
 * microbatch count (heads, width or batch do not divide as the layout
 * needs), no variant would be accepted either.  0: skip the grid; 1:
 * search it (also when the probe cannot be built). */
static int grid_may_fit(search_ctx *x, const pt_plan *p, const placement *pl, const pt_plan *req,
                        const pt_plan_limits *lim)
{
    int L = x->m->n_layer, bpd = x->global_batch / p->dp;
    unsigned scheds = lim ? lim->schedules : ~0u;
    pt_plan q = *p;
    q.schedule = req->schedule != PT_SCHED_1F1B ? req->schedule
                 : (scheds & (1u << PT_SCHED_1F1B)) || p->pp == 1 ? PT_SCHED_1F1B
                 : (scheds & (1u << PT_SCHED_GPIPE)) ? PT_SCHED_GPIPE
                                                      : PT_SCHED_INTERLEAVED;
    q.virtual_stages = q.schedule == PT_SCHED_INTERLEAVED ? (req->virtual_stages > 1 ? req->virtual_stages : 2) : 1;
    int k = q.pp * q.virtual_stages;
    if (k > L || k > PT_PP_SPLIT_MAX) return 1;
    /* the splits the variants use: the user's, else the even one (when
     * it divides) and the min-max one (when it differs); their peaks
     * differ, so each is probed */
    pt_plan splits[3];
    const int nsplit = split_variants(x, &q, req, pl, L, k, splits);
    if (nsplit == 0) return 1;
    /* from the most microbatches down: the first the model accepts (2d
     * and 3d need microbatches of several sequences) */
    int mbs[8], nmb;
    if (req->microbatches > 0) {
        mbs[0] = req->microbatches;
        nmb = 1;
    } else {
        nmb = microbatch_set(bpd, p->pp, mbs);
    }
    for (int si = 0; si < nsplit; si++) {
        q = splits[si];
        q.recompute = req->recompute != PT_RECOMPUTE_NONE ? req->recompute : PT_RECOMPUTE_BLOCK;
        for (int i = nmb - 1; i >= 0; i--) {
            q.microbatches = mbs[i];
            if (q.schedule == PT_SCHED_INTERLEAVED && q.microbatches % q.pp) continue;
            if (pt_plan_validate(&q, x->world) < 0 || pt_plan_check_model(&q, L, bpd) < 0) continue;
            pt_cost cost;
            x->nprobed++;
            if (pt_cost_eval_at(x->m, x->global_batch, &q, &x->hw, &pl->w, &cost) < 0) {
                pt_error_save(&x->last_err);
                x->have_err = 1;
                continue;
            }
            if (!x->have_least || cost.mem_peak < x->least_mem) {
                x->least_mem = cost.mem_peak;
                memset(&x->least, 0, sizeof x->least);
                x->least.plan = q;
                x->least.cost = cost;
                x->have_least = 1;
            }
            if (x->hw.mem_bytes <= 0 || cost.mem_peak <= x->hw.mem_bytes) return 1;
            break; /* this split does not fit; the next may */
        }
    }
    return 0; /* the model accepts none: no variant would be */
}

/* A tensor-parallel shape: mode, tp and 2.5d depth. */
typedef struct tp_shape {
    pt_mode mode;
    int tp, depth;
} tp_shape;

/* Every tp shape of the allowed modes that divides n and is <= cap,
 * respecting req's pins.  tp = 1 is one shape (mode 1d, or the named mode
 * when tp = 1 is pinned). */
static int tp_shapes(const pt_plan *req, unsigned modes, int n, int cap, tp_shape *out, int max)
{
    int k = 0;
    pt_mode named = req->mode == PT_MODE_AUTO ? PT_MODE_OFF : req->mode;
    for (int t = 1; t <= n && t <= cap; t++) {
        if (n % t) continue;
        if (req->tp > 0 && t != req->tp) continue;
        if (t == 1) {
            if (named != PT_MODE_OFF && req->tp != 1) continue; /* a named mode is never tp = 1 */
            if (req->tp_depth > 1) continue;
            /* auto: labelled 1d, or the first allowed mode when the
             * admin does not allow 1d (every mode's grid has tp = 1) */
            pt_mode lab = named;
            if (lab == PT_MODE_OFF) {
                lab = PT_MODE_1D;
                if (!(modes & (1u << PT_MODE_1D)))
                    for (int mo = PT_MODE_2D; mo <= PT_MODE_3D; mo++)
                        if (modes & (1u << mo)) {
                            lab = (pt_mode)mo;
                            break;
                        }
            }
            if (k < max) out[k++] = (tp_shape){lab, 1, 1};
            continue;
        }
        for (int mo = PT_MODE_1D; mo <= PT_MODE_3D; mo++) {
            if (named != PT_MODE_OFF && mo != (int)named) continue;
            if (named == PT_MODE_OFF && !(modes & (1u << mo))) continue;
            if (mo == PT_MODE_1D && req->tp_depth <= 1 && k < max) out[k++] = (tp_shape){PT_MODE_1D, t, 1};
            if (mo == PT_MODE_2D && req->tp_depth <= 1 && pt_isqrt_exact(t) && k < max)
                out[k++] = (tp_shape){PT_MODE_2D, t, 1};
            if (mo == PT_MODE_3D && req->tp_depth <= 1 && pt_icbrt_exact(t) && k < max)
                out[k++] = (tp_shape){PT_MODE_3D, t, 1};
            if (mo == PT_MODE_2P5D)
                for (int d = 1; d <= t; d++) {
                    if (t % d || !pt_isqrt_exact(t / d)) continue;
                    if (req->tp_depth > 0 && d != req->tp_depth) continue;
                    /* depth 1 is 2d and q = 1 is 1d with replicated
                     * weights: 2.5d proper only, unless pinned */
                    if (req->tp_depth <= 0 && named != PT_MODE_2P5D && (d == 1 || d == t)) continue;
                    /* a named 2.5d never means q = 1 (every weight whole
                     * on every rank: data parallelism under another
                     * name) unless that depth is pinned */
                    if (req->tp_depth <= 0 && d == t) continue;
                    if (k < max) out[k++] = (tp_shape){PT_MODE_2P5D, t, d};
                }
        }
    }
    return k;
}

#define MAX_SHAPES 4096

/* On a cluster of mixed nodes: each pp rank's rates, the slowest of the
 * kinds its ranks sit on, into out [p->pp].  Returns 1 when the stages'
 * rates differ (out is then each stage's), 0 when they are alike (or the
 * cluster has one kind), -1 on bad input. */
static int stage_rates(const pt_cluster *c, const pt_plan *p, pt_hw *out)
{
    if (c->nkinds <= 1 || !c->kinds || !c->kind_of) return 0;
    rank_map m;
    if (map_init(&m, c) < 0) return -1;
    long long sP = 1, acc = 1;
    for (int i = 2; i >= 0; i--) {
        const char a = p->rank_order[i];
        if (a == 'P') sP = acc;
        acc *= a == 'D' ? p->dp : a == 'P' ? p->pp : (long long)p->tp * p->sp;
    }
    const long long world = acc;
    char *seen = calloc((size_t)p->pp, 1);
    if (!seen) {
        free(m.start);
        return -1;
    }
    for (long long r = 0; r < world; r++) {
        int node, isl, pr = (int)(r / sP % p->pp);
        map_where(&m, r, &node, &isl);
        const int k = c->kind_of[node];
        if (k < 0 || k >= c->nkinds) continue;
        if (!seen[pr]) out[pr] = c->kinds[k].hw, seen[pr] = 1;
        else pt_hw_take_slower(&out[pr], &c->kinds[k].hw);
    }
    int differ = 0;
    for (int r = 1; r < p->pp; r++)
        if (memcmp(&out[r], &out[0], sizeof out[0])) differ = 1;
    free(seen);
    free(m.start);
    return differ;
}

/* The tp orders worth pricing for plan p: the request's pin, else one per
 * distinct layout of the tp grid's axes of size > 1 inside the T block
 * (1d: one; 2d: rows or columns innermost; 2.5d and 3d: the six orders of
 * three axes, fewer when one has size 1).  Returns the count written
 * into out. */
static int tp_orders(const pt_plan *p, const pt_plan *req, char out[6][4])
{
    static const char *all[6] = {"012", "021", "102", "120", "201", "210"};
    if (req->tp_order[0]) {
        memcpy(out[0], req->tp_order, 4);
        return 1;
    }
    int dims[3];
    if (p->tp == 1 || p->mode == PT_MODE_1D || pt_plan_tp_dims(p, dims) < 0) {
        memcpy(out[0], "012", 4);
        return 1;
    }
    int n = 0;
    char key[6][4];
    for (int i = 0; i < 6; i++) {
        char k[4] = "";
        int kl = 0;
        for (int j = 0; j < 3; j++)
            if (dims[all[i][j] - '0'] > 1) k[kl++] = all[i][j];
        k[kl] = '\0';
        int dup = 0;
        for (int j = 0; j < n; j++) dup |= strcmp(key[j], k) == 0;
        if (dup) continue;
        memcpy(key[n], k, 4);
        memcpy(out[n++], all[i], 4);
    }
    return n;
}

/* The placement of plan p (its rank order and tp order) on cluster c:
 * each communicator's link, each pipeline neighbour's (into pp_next
 * [p->pp]), and the group links of the explanation.  -1 when p cannot be
 * placed (its tp is not of its mode's shape). */
static int place_plan(const pt_cluster *c, const pt_plan *p, placement *pl, int *pp_next)
{
    if (pt_place_where(c, p, &pl->w, pp_next, 0) < 0) return -1;
    if (pl->stage_buf && stage_rates(c, p, pl->stage_buf) == 1) pl->w.stage_hw = pl->stage_buf;
    for (int g = 0; g < PT_GRP_N; g++) pl->link[g] = PT_NET_ISLAND;
    for (int s = 0; s < PT_SUB_N; s++) {
        const int g = pt_cost_sub_group(s);
        if (pl->w.sub_link[s] > pl->link[g]) pl->link[g] = pl->w.sub_link[s];
    }
    if (p->pp > 1 && pp_next)
        for (int r = 0; r < p->pp; r++)
            if (pp_next[r] > pl->link[PT_GRP_PP]) pl->link[PT_GRP_PP] = pp_next[r];
    return 0;
}

static int same_place(const placement *a, const placement *b, int pp)
{
    if (memcmp(a->w.sub_link, b->w.sub_link, sizeof a->w.sub_link)) return 0;
    if (!a->w.stage_hw != !b->w.stage_hw ||
        (a->w.stage_hw && memcmp(a->w.stage_hw, b->w.stage_hw, sizeof(pt_hw) * (size_t)pp)))
        return 0;
    if (pp > 1 && a->w.pp_next && b->w.pp_next && memcmp(a->w.pp_next, b->w.pp_next, sizeof(int) * (size_t)pp)) return 0;
    return 1;
}

static void why_line(const pt_search_result *r, const pt_hw *hw, char *buf, size_t n);

/* Mixed nodes: which kind limits the step (the least GEMM rate: every
 * synchronous group runs at its pace), and, when the winner's stages sit on
 * kinds of different speeds, its D'Hondt split. */
static void limit_line(const pt_cluster *c, const pt_model_shape *m, const pt_search_result *r, const pt_hw *slow,
                       char *buf, size_t n)
{
    buf[0] = '\0';
    if (c->nkinds <= 1 || !c->kinds || !c->kind_of) return;
    /* the kinds present, and which holds the least GEMM rate, network and
     * memory per rank (ties: the first) */
    int present = 0, kg = -1, kn = -1, km = -1;
    for (int k = 0; k < c->nkinds; k++) {
        int cnt = 0;
        for (int i = 0; i < c->nnodes; i++) cnt += c->kind_of[i] == k;
        if (!cnt) continue;
        present++;
        const pt_hw *h = &c->kinds[k].hw;
        if (kg < 0 || h->gemm_gflops < c->kinds[kg].hw.gemm_gflops) kg = k;
        if (kn < 0 || h->gbps[PT_NET_INTER] < c->kinds[kn].hw.gbps[PT_NET_INTER]) kn = k;
        if (km < 0 || (h->mem_bytes > 0 && h->mem_bytes < c->kinds[km].hw.mem_bytes)) km = k;
    }
    if (present < 2) return;
#define NAME(k) (c->kinds[k].name ? c->kinds[k].name : "?")
    /* "gpu4-pcie.xml for compute (19500 GFLOP/s per rank, dgx8-nvswitch.xml 51200)" */
    char g[200] = "", w[200] = "";
    size_t gl = (size_t)snprintf(g, sizeof g, "%s for compute (%.4g GFLOP/s per rank", NAME(kg), slow->gemm_gflops);
    size_t wl = (size_t)snprintf(w, sizeof w, "%s for the network (%.3g GB/s per rank", NAME(kn), slow->gbps[PT_NET_INTER]);
    for (int k = 0; k < c->nkinds; k++) {
        int cnt = 0;
        for (int i = 0; i < c->nnodes; i++) cnt += c->kind_of[i] == k;
        if (!cnt) continue;
        if (k != kg && gl < sizeof g)
            gl += (size_t)snprintf(g + gl, sizeof g - gl, ", %s %.4g", NAME(k), c->kinds[k].hw.gemm_gflops);
        if (k != kn && wl < sizeof w)
            wl += (size_t)snprintf(w + wl, sizeof w - wl, ", %s %.3g", NAME(k), c->kinds[k].hw.gbps[PT_NET_INTER]);
    }
    const pt_plan *b = &r->best.plan;
    int k = snprintf(buf, n, "limiting node: %s), %s), %s for memory (%.3g GB per rank): the step's synchronous groups "
                     "run at the slowest node's rates", g, w, NAME(km), slow->mem_bytes / 1e9);
#undef NAME
    if (b->pp > 1 && k > 0 && (size_t)k < n) {
        pt_hw *st = malloc(sizeof(pt_hw) * (size_t)b->pp);
        double *lc = malloc(sizeof(double) * (size_t)m->n_layer);
        if (st && lc && stage_rates(c, b, st) == 1) {
            char sp[200] = "", rt[200] = "";
            size_t a = 0;
            for (int s = 0; s < b->pp && a < sizeof rt; s++)
                a += (size_t)snprintf(rt + a, sizeof rt - a, "%s%.4g", s ? "," : "", pt_hw_gemm_gflops(&st[s], b->precision));
            pt_plan_split_format(b, sp, sizeof sp);
            /* is the winner's split D'Hondt's for these stage rates? */
            const int v = b->schedule == PT_SCHED_INTERLEAVED ? b->virtual_stages : 1, kk = b->pp * v;
            int dh[PT_PP_SPLIT_MAX], is_dh = 0;
            double speed[PT_PP_SPLIT_MAX], extra[PT_PP_SPLIT_MAX];
            pt_plan_layer_costs(m, lc);
            for (int vs = 0; vs < kk && kk <= PT_PP_SPLIT_MAX; vs++)
                speed[vs] = pt_hw_gemm_gflops(&st[vs % b->pp], b->precision), extra[vs] = 0;
            if (kk <= PT_PP_SPLIT_MAX && lc[0] > 0) extra[kk - 1] = (lc[m->n_layer - 1] - lc[0]) / lc[0];
            if (b->pp_split_n == kk && kk <= PT_PP_SPLIT_MAX &&
                pt_plan_split_dhondt(speed, extra, kk, m->n_layer, dh) == 0)
                is_dh = !memcmp(dh, b->pp_split, sizeof(int) * (size_t)kk);
            snprintf(buf + k, n - (size_t)k, "; its stages run at %s GFLOP/s per rank, layers split %s%s", rt, sp,
                     is_dh ? " (D'Hondt: in proportion to the stages' rates)" : "");
        }
        free(lc);
        free(st);
    }
}

/* Check pt_plan_search's arguments; *world the ranks of c. */
static int search_args(const pt_cluster *c, const pt_model_shape *m, int global_batch, const pt_plan_limits *lim,
                       const pt_plan *req, long long *world_out)
{
    if (c->nnodes < 1 || !c->tasks_per_node)
        return pt_fail(PT_EINVAL, "invalid node count %d (valid: >= 1)", c->nnodes);
    long long world = 0;
    for (int i = 0; i < c->nnodes; i++) {
        if (c->tasks_per_node[i] < 1)
            return pt_fail(PT_EINVAL, "node %d has %d tasks (valid: >= 1)", i, c->tasks_per_node[i]);
        world += c->tasks_per_node[i];
    }
    if (world > (1 << 20))
        return pt_fail(PT_EINVAL, "invalid world size %lld (valid: 1..%d ranks)", world, 1 << 20);
    if (m->n_layer < 1 || m->n_head < 1 || m->n_embd < 1 || m->seq_len < 1 || m->vocab < 1)
        return pt_fail(PT_EINVAL, "invalid model shape L=%d H=%d C=%d T=%d V=%d (valid: positive "
                       "integers)", m->n_layer, m->n_head, m->n_embd, m->seq_len, m->vocab);
    if (global_batch < 1)
        return pt_fail(PT_EINVAL, "invalid global batch %d (valid: >= 1 sequences)", global_batch);
    char flag[48];
    if (req->mode == PT_MODE_OFF)
        return pt_fail(PT_EINVAL, "%s=off plans nothing (valid for a search: %s)",
                       pt_plan_flag(lim, "mode", flag, sizeof flag), PT_SEARCH_MODE_NAMES(", "));
    if (pt_plan_request_check(req, lim) < 0) return -1;
    if (m->family == PT_FAMILY_LLAMA && (req->mode == PT_MODE_2D || req->mode == PT_MODE_2P5D || req->mode == PT_MODE_3D))
        return pt_fail(PT_EINVAL, "%s=%s is not built for llama models yet (valid for llama: auto, off, 1d)",
                       pt_plan_flag(lim, "mode", flag, sizeof flag), pt_mode_name(req->mode));
    if (req->rank_order[0]) {
        char pinned[4], s[5] = "";
        memcpy(s, req->rank_order, 4);
        if (pt_plan_order_parse(s, pinned) < 0) return -1;
        if (strcmp(pinned, s))
            return pt_fail(PT_EINVAL, "rank order '%s' of the request is not in its parsed form (valid: '%s')", s, pinned);
    }
    if (req->tp_order[0]) {
        char s[5] = "", tpo[4];
        memcpy(s, req->tp_order, 4);
        if (pt_plan_tp_order_parse("tp order", s, tpo) < 0) return -1;
    }
    *world_out = world;
    return 0;
}

/* What the walk over the grids holds fixed: the request, its limits and
 * the bounds they set. */
typedef struct grid_walk {
    const pt_plan *req;
    const pt_plan_limits *lim;
    int max_tp, max_pp, max_zero;
    unsigned modes;
} grid_walk;

/* Price plan p (its grid and rank order set) at each order of the tp
 * grid's axes, once per distinct placement, at each ZeRO stage allowed;
 * pp_next and stage_buf hold 6 placements' pp links and stage rates. */
static void search_placements(search_ctx *x, const grid_walk *gw, pt_plan *p, int *pp_next, pt_hw *stage_buf)
{
    const pt_plan *req = gw->req;
    const int pp = p->pp, dp_sp = p->dp * p->sp; /* the grid's, whatever the variants leave in p */
    char tpo[6][4];
    placement seen[6];
    int ntpo = tp_orders(p, req, tpo), nseen = 0;
    for (int ti = 0; ti < ntpo; ti++) {
        memcpy(p->tp_order, tpo[ti], 4);
        placement *pl = &seen[nseen];
        pl->stage_buf = stage_buf ? stage_buf + (size_t)nseen * (size_t)pp : NULL;
        if (place_plan(x->c, p, pl, pp_next + (size_t)nseen * (size_t)pp) < 0) continue;
        int dup = 0;
        for (int k = 0; k < nseen && !dup; k++) dup = same_place(&seen[k], pl, pp);
        if (dup) continue;
        nseen++;
        for (int z = 0; z <= gw->max_zero && z <= 3; z++) {
            if (req->zero > 0 && z != req->zero) continue;
            if (z > 0 && dp_sp == 1) continue;
            p->zero = z;
            if (grid_may_fit(x, p, pl, req, gw->lim)) pipeline_variants(x, p, pl, req, gw->lim);
        }
    }
}

/* Price the grid of tp shape sh with sp, pp and dp at its placements:
 * DPT (cluster), and PDT (pipeline across the slower links, dp inside)
 * when both axes are > 1.  -1 when out of memory. */
static int search_grid(search_ctx *x, const grid_walk *gw, const tp_shape *sh, int sp, int pp, int dp)
{
    static const char *orders[2] = {"DPT", "PDT"};
    const pt_plan *req = gw->req;
    const int mixed = x->c->nkinds > 1;
    int *pp_next = malloc(sizeof(int) * 6 * (size_t)pp);
    pt_hw *stage_buf = mixed ? malloc(sizeof(pt_hw) * 6 * (size_t)pp) : NULL;
    if (!pp_next || (mixed && !stage_buf)) {
        free(pp_next);
        free(stage_buf);
        return -1;
    }
    for (int oi = 0; oi < 2; oi++) {
        if (oi == 1 && (dp == 1 || pp == 1 || req->rank_order[0])) continue;
        pt_plan p;
        pt_plan_default(&p);
        p.mode = sh->mode;
        p.tp = sh->tp;
        p.tp_depth = sh->depth;
        p.sp = sp;
        p.pp = pp;
        p.dp = dp;
        p.precision = req->precision; /* the user's, never searched: it prices every term */
        memcpy(p.rank_order, req->rank_order[0] ? req->rank_order : orders[oi], 4);
        search_placements(x, gw, &p, pp_next, stage_buf);
    }
    free(pp_next);
    free(stage_buf);
    return 0;
}

/* Walk every dp x pp x tp x sp grid of the world's ranks over the tp
 * shapes that the pins and the batch allow, counted in *ngrids.  -1 when
 * out of memory. */
static int search_grids(search_ctx *x, const grid_walk *gw, const tp_shape *shapes, int nshapes, int *ngrids)
{
    const pt_plan *req = gw->req;
    const pt_model_shape *m = x->m;
    for (int si = 0; si < nshapes; si++) {
        const tp_shape *sh = &shapes[si];
        int rest = x->world / sh->tp;
        for (int sp = 1; sp <= rest; sp++) {
            if (rest % sp) continue;
            if (req->sp > 0 && sp != req->sp) continue;
            if (sp > 1 && m->seq_len % sp) continue;
            int rest2 = rest / sp;
            for (int pp = 1; pp <= rest2 && pp <= gw->max_pp && pp <= m->n_layer; pp++) {
                if (rest2 % pp) continue;
                if (req->pp > 0 && pp != req->pp) continue;
                int dp = rest2 / pp;
                if (x->global_batch % dp) continue;
                (*ngrids)++;
                if (search_grid(x, gw, sh, sp, pp, dp) < 0) return -1;
            }
        }
    }
    return 0;
}

/* The one-line refusal when no plan was kept: no tp shape, no grid, none
 * that fits the memory, or the last refusal. */
static int search_refusal(const search_ctx *x, const grid_walk *gw, int nshapes, int ngrids)
{
    const pt_cluster *c = x->c;
    const pt_plan *req = gw->req;
    const pt_plan_limits *lim = gw->lim;
    const int W = x->world, max_tp = gw->max_tp;
    char flag[48], place[96];
    if (c->nnodes == 1)
        snprintf(place, sizeof place, "1 node x %d tasks", c->tasks_per_node[0]);
    else
        snprintf(place, sizeof place, "%d nodes x %d tasks", c->nnodes, c->tasks_per_node[0]);
    char what[64], valid[200];
    snprintf(what, sizeof what, "%s=%s", pt_plan_flag(lim, "mode", flag, sizeof flag), pt_mode_name(req->mode));
    if (nshapes == 0) {
        int k = pt_plan_list_tp(req->mode == PT_MODE_AUTO ? PT_MODE_1D : req->mode,
                                req->mode == PT_MODE_2P5D ? req->tp_depth : 1, W, max_tp, valid,
                                sizeof valid);
        const char *shape = req->mode == PT_MODE_2D     ? "q*q"
                            : req->mode == PT_MODE_2P5D ? "depth*q*q"
                            : req->mode == PT_MODE_3D   ? "l*l*l"
                                                        : "a divisor";
        return pt_fail(PT_EINVAL, "%s%s: no tensor-parallel group of shape %s > 1 divides %d ranks "
                       "(%s)%s (valid tp here: %s; or pin %s=1)", what,
                       req->tp > 0 ? " with the pinned tp" : "", shape, W, place,
                       max_tp < W ? " within max_tp" : "", k ? valid : "none",
                       pt_plan_flag(lim, "tp", flag, sizeof flag));
    }
    if (ngrids == 0)
        return pt_fail(PT_EINVAL, "%s: no dp x pp x tp x sp grid of %d ranks (%s) divides the "
                       "global batch %d and the model's %d layers / T=%d with the pins "
                       "given", what, W, place, x->global_batch, x->m->n_layer, x->m->seq_len);
    if (x->have_least) {
        char s[640];
        pt_plan_summary(&x->least.plan, s, sizeof s);
        return pt_fail(PT_EINVAL, "%s: no plan fits %.3g GB per rank on %s; the least memory "
                       "any plan needs is %.3g GB (%s)", what, x->hw.mem_bytes / 1e9, place,
                       x->least_mem / 1e9, s);
    }
    if (x->have_err)
        return pt_fail(PT_EINVAL, "%s: no plan fits the model on %s (last refusal: %s)", what,
                       place, x->last_err.text);
    return pt_fail(PT_EINVAL, "%s: no plan of %d ranks (%s) passes validation for this "
                   "model and batch (%d sequences)", what, W, place, x->global_batch);
}

int pt_plan_search(const pt_cluster *c, const pt_model_shape *m, int global_batch, const pt_plan_limits *lim,
                   const pt_plan *req, pt_search_result *out)
{
    if (!c || !m || !req || !out) return pt_fail(PT_EINVAL, "plan search: no cluster, model, request or output given");
    long long world = 0;
    int rc = search_args(c, m, global_batch, lim, req, &world);
    if (rc < 0) return rc;
    grid_walk gw;
    gw.req = req, gw.lim = lim;
    gw.max_tp = lim && lim->max_tp > 0 ? lim->max_tp : INT_MAX;
    gw.max_pp = lim && lim->max_pp > 0 ? lim->max_pp : INT_MAX;
    gw.max_zero = lim ? lim->max_zero : 3;
    gw.modes = lim ? lim->modes : ~0u;
    if (m->family == PT_FAMILY_LLAMA) gw.modes &= 1u << PT_MODE_1D; /* 2d/2.5d/3d: not built for llama */
    int W = (int)world;

    search_ctx x;
    memset(&x, 0, sizeof x);
    x.c = c;
    pt_cluster_slowest(c, &x.hw, NULL);
    x.m = m;
    x.global_batch = global_batch;
    x.world = W;
    x.layer_cost = malloc(sizeof(double) * (size_t)m->n_layer);
    tp_shape *shapes = malloc(sizeof *shapes * MAX_SHAPES);
    if (!x.layer_cost || !shapes) {
        free(x.layer_cost);
        free(shapes);
        return pt_fail(PT_ENOMEM, "plan search: out of memory");
    }
    pt_plan_layer_costs(m, x.layer_cost);
    int nshapes = tp_shapes(req, gw.modes, W, gw.max_tp, shapes, MAX_SHAPES);
    int ngrids = 0;
    rc = search_grids(&x, &gw, shapes, nshapes, &ngrids);
    free(x.layer_cost);
    free(shapes);
    if (rc < 0) return pt_fail(PT_ENOMEM, "plan search: out of memory");
    if (x.top.n == 0) return search_refusal(&x, &gw, nshapes, ngrids);
    memset(out, 0, sizeof *out);
    out->best = x.top.c[0];
    out->nrunners = x.top.n - 1;
    for (int i = 1; i < x.top.n; i++) out->runner[i - 1] = x.top.c[i];
    out->nconsidered = x.nconsidered + x.nprobed;
    out->nfit = x.nfit;
    why_line(out, &x.hw, out->why, sizeof out->why);
    limit_line(c, m, out, &x.hw, out->limit, sizeof out->limit);
    return 0;
}

/* ---- explanation ------------------------------------------------------- */

/* "2d tp=4 dp=2 pp=2" and the settings that are not defaults. */
static void label(const pt_plan *p, char *buf, size_t n)
{
    int k = 0;
#define ADD(...)                                                                                   \
    do {                                                                                           \
        if ((size_t)k < n) k += snprintf(buf + k, n - (size_t)k, __VA_ARGS__);                     \
    } while (0)
    if (p->mode == PT_MODE_2P5D)
        ADD("2.5d tp=%d(d%d)", p->tp, p->tp_depth);
    else
        ADD("%s tp=%d", pt_mode_name(p->mode), p->tp);
    ADD(" dp=%d pp=%d", p->dp, p->pp);
    if (p->sp > 1) ADD(" sp=%d", p->sp);
    if (p->zero) ADD(" z%d", p->zero);
    if (p->pp > 1 || p->microbatches > 1) ADD(" m=%d", p->microbatches);
    if (p->pp > 1) {
        if (p->schedule == PT_SCHED_INTERLEAVED)
            ADD(" il%d", p->virtual_stages);
        else
            ADD(" %s", pt_schedule_name(p->schedule));
        if (p->pp_split_n) ADD(" split");
    }
    if (p->recompute) ADD(" rc=%s", pt_recompute_name(p->recompute));
    if (strcmp(p->rank_order, "DPT")) ADD(" %s", p->rank_order);
    if (p->tp > 1 && strcmp(p->tp_order, "012")) ADD(" tpo=%s", p->tp_order);
#undef ADD
}

static const char *short_link(int l)
{
    return l == PT_NET_ISLAND ? "isl" : l == PT_NET_NODE ? "node" : "net";
}

static void why_text(const pt_search_result *r, const pt_hw *hw, char *buf, size_t n);

/* why_text into out [n], cut at n - 1 bytes */
static void why_line(const pt_search_result *r, const pt_hw *hw, char *out, size_t n)
{
    char tmp[1024];
    why_text(r, hw, tmp, sizeof tmp);
    size_t l = strlen(tmp);
    if (l >= n) l = n - 1;
    memcpy(out, tmp, l);
    out[l] = '\0';
}

static void why_text(const pt_search_result *r, const pt_hw *hw, char *buf, size_t n)
{
    const pt_candidate *b = &r->best;
    char lb[128];
    label(&b->plan, lb, sizeof lb);
    if (r->nrunners == 0) {
        snprintf(buf, n, "%s is the only layout that fits%s (%ld of %ld plans fit)", lb,
                 hw->mem_bytes > 0 ? " memory and the model" : " the model", r->nfit, r->nconsidered);
        return;
    }
    /* the rival: the best plan of another grid (mode, tp shape, dp, pp,
     * sp); a runner-up that differs only in its ZeRO stage says less */
    const pt_candidate *o = &r->runner[0];
    for (int i = 0; i < r->nrunners; i++) {
        const pt_plan *a = &r->runner[i].plan, *w = &b->plan;
        if (a->mode != w->mode || a->tp != w->tp || a->tp_depth != w->tp_depth || a->dp != w->dp ||
            a->pp != w->pp || a->sp != w->sp) {
            o = &r->runner[i];
            break;
        }
    }
    char lo[128];
    label(&o->plan, lo, sizeof lo);
    /* the part of the step where the winner gains most over the runner-up */
    const char *part = "compute";
    double gain = o->cost.t_compute - b->cost.t_compute;
    char gname[48];
    for (int g = 0; g < PT_GRP_N; g++) {
        double d = o->cost.t_comm[g] - b->cost.t_comm[g];
        if (d > gain) {
            gain = d;
            snprintf(gname, sizeof gname, "%s communication (%s)", pt_cost_group_name(g),
                     pt_cost_link_name(o->link[g]));
            part = gname;
        }
    }
    if (o->cost.t_bubble - b->cost.t_bubble > gain) {
        gain = o->cost.t_bubble - b->cost.t_bubble;
        part = "pipeline bubble";
    }
    if (b->cost.t_step < o->cost.t_step)
        snprintf(buf, n, "%s wins: %.4g ms vs %.4g ms for %s, which loses %.4g ms on %s", lb,
                 b->cost.t_step * 1e3, o->cost.t_step * 1e3, lo, gain * 1e3, part);
    else
        snprintf(buf, n, "%s ties %s at %.4g ms and wins the tie-break (fewer bytes on slower "
                 "links, then smaller pp, smaller tp)", lb, lo, b->cost.t_step * 1e3);
}

static void put(char *buf, size_t n, size_t *k, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void put(char *buf, size_t n, size_t *k, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char tmp[1024];
    int w = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (w < 0) return;
    if (buf && *k < n) snprintf(buf + *k, n - *k, "%s", tmp);
    *k += (size_t)w;
}

static void row(char *buf, size_t n, size_t *k, const char *mark, const pt_candidate *c)
{
    char lb[128];
    label(&c->plan, lb, sizeof lb);
    put(buf, n, k, "%-2s%-52s %9.3f %9.3f", mark, lb, c->cost.t_step * 1e3, c->cost.t_compute * 1e3);
    for (int g = 0; g < PT_GRP_N; g++) {
        if (c->cost.t_comm[g] > 0 || c->cost.bytes[g] > 0)
            put(buf, n, k, " %8.3f%-5s", c->cost.t_comm[g] * 1e3, short_link(c->link[g]));
        else
            put(buf, n, k, " %8s%-5s", "-", "");
    }
    put(buf, n, k, " %8.3f %8.3f\n", c->cost.t_bubble * 1e3, c->cost.mem_peak / 1e9);
}

size_t pt_plan_explain(const pt_search_result *r, const pt_model_shape *m, int global_batch, char *buf,
                       size_t n)
{
    size_t k = 0;
    if (buf && n) buf[0] = '\0';
    if (!r || !m) return 0;
    const pt_plan *b = &r->best.plan;
    put(buf, n, &k, "model L=%d H=%d C=%d T=%d V=%d", m->n_layer, m->n_head, m->n_embd, m->seq_len, m->vocab);
    if (m->family == PT_FAMILY_LLAMA) /* GPT-2's line stays as it was */
        put(buf, n, &k, " llama KV=%d I=%d%s, %.4g B parameters", pt_model_kv_heads(m), pt_model_ffn(m),
            pt_model_untied(m) ? " untied" : "", (double)pt_model_num_params(m) / 1e9);
    put(buf, n, &k, ", global batch %d sequences, %d ranks\n", global_batch, b->dp * b->pp * b->tp * b->sp);
    put(buf, n, &k, "plans evaluated %ld, fitting %ld; times in ms per step, memory in GB per rank\n",
        r->nconsidered, r->nfit);
    put(buf, n, &k, "  %-52s %9s %9s", "layout", "t_step", "compute");
    for (int g = 0; g < PT_GRP_N; g++) put(buf, n, &k, " %8s%-5s", pt_cost_group_name(g), "");
    put(buf, n, &k, " %8s %8s\n", "bubble", "mem");
    row(buf, n, &k, "*", &r->best);
    for (int i = 0; i < r->nrunners; i++) row(buf, n, &k, "", &r->runner[i]);
    char s[640];
    pt_plan_summary(b, s, sizeof s);
    put(buf, n, &k, "plan: %s\n", s);
    const pt_cost *c = &r->best.cost;
    put(buf, n, &k, "memory: params %.3f + grads %.3f + optimizer %.3f + activations %.3f = %.3f GB per rank\n",
        c->mem_params / 1e9, c->mem_grads / 1e9, c->mem_optim / 1e9, c->mem_act / 1e9,
        c->mem_total / 1e9);
    if (c->mem_peak > c->mem_total)
        put(buf, n, &k, "memory peak: %.3f GB per rank at start-up (ZeRO initialises through full-size "
            "temporaries)\n", c->mem_peak / 1e9);
    /* where the winner's traffic runs: each communicator with its time
     * and the link class it spans */
    int first = 1;
    for (int s = 0; s < PT_SUB_N; s++) {
        if (c->sub_bytes[s] <= 0 && c->sub_t[s] <= 0) continue;
        char role[96];
        pt_cost_sub_role(b, s, role, sizeof role);
        put(buf, n, &k, "%s%s %.3f ms %s", first ? "communicators: " : ", ", role, c->sub_t[s] * 1e3,
            short_link(c->sub_link[s]));
        first = 0;
    }
    if (!first) put(buf, n, &k, "\n");
    if (r->limit[0]) put(buf, n, &k, "%s\n", r->limit);
    put(buf, n, &k, "why: %s\n", r->why);
    if (buf && n >= 4 && k >= n) memcpy(buf + n - 4, "...", 4); /* cut: end in "..." */
    return k;
}
