/* SPDX-License-Identifier: MIT */
/* The time-energy frontier of a pipeline iteration (see energy.h). */
#include "plan/energy.h"
#include "contract/schedule.h"

#include "core/core.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- the DAG ----------------------------------------------------------- */

void pt_energy_dag_free(pt_energy_dag *d)
{
    if (!d) return;
    free(d->in);
    free(d->e);
    memset(d, 0, sizeof *d);
}

int pt_energy_dag_build(int kind, int pp, int m, int v, double p2p_s, pt_energy_dag *d)
{
    memset(d, 0, sizeof *d);
    if (pt_pp_schedule_check(kind, pp, m, v) != PT_OK) return PT_EINVAL;
    if (!(p2p_s >= 0) || !isfinite(p2p_s)) return pt_fail(PT_EINVAL, "p2p delay %g s: use a time >= 0", p2p_s);
    const int S = pp * v;
    d->pp = pp;
    d->m = m;
    d->v = v;
    d->kind = kind;
    d->n = 2 * m * S;
    d->ntypes = 2 * S;
    /* instruction of (stage, mb, bwd): index ((bwd * S) + stage) * m + mb */
    d->in = calloc((size_t)d->n, sizeof *d->in);
    /* edges: at most n per rank order, plus 2 m S data dependencies */
    size_t cap = (size_t)d->n + 2u * (size_t)m * (size_t)S + 4;
    d->e = calloc(cap, sizeof *d->e);
    if (!d->in || !d->e) {
        pt_energy_dag_free(d);
        return pt_fail(PT_ENOMEM, "out of memory for the iteration DAG of %d instructions", 2 * m * S);
    }
#define IDX(stage, mb, bwd) ((((bwd) * S) + (stage)) * m + (mb))
    for (int b = 0; b < 2; b++)
        for (int s = 0; s < S; s++)
            for (int i = 0; i < m; i++) {
                pt_energy_instr *x = &d->in[IDX(s, i, b)];
                x->stage = s;
                x->rank = s % pp;
                x->chunk = s / pp;
                x->mb = i;
                x->bwd = b;
                x->type = (x->rank * v + x->chunk) * 2 + b;
            }
    /* each rank's order */
    for (int r = 0; r < pp; r++) {
        pt_pp_schedule sc;
        if (pt_pp_schedule_build(&sc, kind, pp, r, m, v) != PT_OK) {
            pt_energy_dag_free(d);
            return PT_EINVAL;
        }
        int prev = -1;
        for (int k = 0; k < sc.n; k++) {
            const pt_pp_action *a = &sc.a[k];
            if (a->op != PT_PP_FWD && a->op != PT_PP_BWD) continue;
            int cur = IDX(a->chunk * pp + r, a->mb, a->op == PT_PP_BWD);
            if (prev >= 0) d->e[d->nedges++] = (pt_energy_edge){prev, cur, 0};
            prev = cur;
        }
        pt_pp_schedule_free(&sc);
    }
    /* data dependencies */
    for (int i = 0; i < m; i++) {
        for (int s = 0; s + 1 < S; s++) {
            double dl = (s % pp) != ((s + 1) % pp) ? p2p_s : 0;
            d->e[d->nedges++] = (pt_energy_edge){IDX(s, i, 0), IDX(s + 1, i, 0), dl};
            d->e[d->nedges++] = (pt_energy_edge){IDX(s + 1, i, 1), IDX(s, i, 1), dl};
        }
        d->e[d->nedges++] = (pt_energy_edge){IDX(S - 1, i, 0), IDX(S - 1, i, 1), 0};
    }
#undef IDX
    return 0;
}

/* ---- profiles ---------------------------------------------------------- */

void pt_energy_profile_free(pt_energy_profile *p)
{
    if (!p) return;
    if (p->choice)
        for (int t = 0; t < p->ntypes; t++) free(p->choice[t]);
    free(p->choice);
    free(p->nchoices);
    memset(p, 0, sizeof *p);
}

const pt_energy_power_model *pt_energy_power_model_named(const char *name)
{
    /* An H100 SXM-like part: 700 W board power at the top clock under a
     * dense GEMM, ~100 W near idle; a transformer step's kernels are
     * partly memory-bound (mem_share).  A CPU rank: a share of a server
     * socket (Zen 4 / Sapphire Rapids class, ~10-20 W per core). */
    static const pt_energy_power_model gpu = {810, 1980, 14, 120, 580, 100, 0.25};
    static const pt_energy_power_model cpu = {1500, 3500, 9, 6, 14, 5, 0.35};
    if (!name) return NULL;
    if (!strcmp(name, "gpu")) return &gpu;
    if (!strcmp(name, "cpu")) return &cpu;
    return NULL;
}

int pt_energy_profile_model(const pt_energy_power_model *pm, int ntypes, const double *type_time_s,
                            pt_energy_profile *out)
{
    memset(out, 0, sizeof *out);
    if (!pm || !(pm->f_min_mhz > 0) || !(pm->f_max_mhz >= pm->f_min_mhz) || pm->nfreq < 2 || pm->nfreq > 1000 ||
        !(pm->static_w >= 0) || !(pm->dynamic_w >= 0) || !(pm->idle_w >= 0) || !(pm->mem_share >= 0) ||
        !(pm->mem_share < 1))
        return pt_fail(PT_EINVAL, "power model: clocks %g-%g MHz x %d, %g + %g W, idle %g W, memory share %g is not "
                       "valid (valid: 0 < f_min <= f_max, 2..1000 clocks, watts >= 0, share in [0, 1))",
                       pm ? pm->f_min_mhz : 0, pm ? pm->f_max_mhz : 0, pm ? pm->nfreq : 0,
                       pm ? pm->static_w : 0, pm ? pm->dynamic_w : 0, pm ? pm->idle_w : 0,
                       pm ? pm->mem_share : 0);
    if (ntypes < 1) return pt_fail(PT_EINVAL, "power model: %d instruction types (valid: >= 1)", ntypes);
    out->ntypes = ntypes;
    out->nchoices = calloc((size_t)ntypes, sizeof *out->nchoices);
    out->choice = calloc((size_t)ntypes, sizeof *out->choice);
    if (!out->nchoices || !out->choice) {
        pt_energy_profile_free(out);
        return pt_fail(PT_ENOMEM, "out of memory for a profile of %d types", ntypes);
    }
    out->idle_w = pm->idle_w;
    out->modelled = 1;
    for (int t = 0; t < ntypes; t++) {
        double t0 = type_time_s[t];
        if (!(t0 > 0) || !isfinite(t0)) {
            pt_energy_profile_free(out);
            return pt_fail(PT_EINVAL, "power model: instruction type %d takes %g s (valid: a time > 0)", t, t0);
        }
        out->choice[t] = calloc((size_t)pm->nfreq, sizeof **out->choice);
        if (!out->choice[t]) {
            pt_energy_profile_free(out);
            return pt_fail(PT_ENOMEM, "out of memory for a profile of %d types", ntypes);
        }
        out->nchoices[t] = pm->nfreq;
        for (int k = 0; k < pm->nfreq; k++) {
            double f = pm->f_min_mhz + (pm->f_max_mhz - pm->f_min_mhz) * k / (pm->nfreq - 1);
            double r = f / pm->f_max_mhz;
            double time = t0 * (pm->mem_share + (1 - pm->mem_share) / r);
            double watts = pm->static_w + pm->dynamic_w * r * r * r;
            out->choice[t][k] = (pt_energy_choice){f, time, watts * time};
        }
    }
    return 0;
}

/* ---- per-type cost curves in whole units --------------------------------
 * For a type: its choices in units (time rounded up), the energy less the
 * idle power it displaces, E'(u) = E - idle_w * u * tau, on the lower convex
 * hull, non-increasing from the fastest duration umin to the cheapest umax.
 * cost[u - umin] for every integer u in [umin, umax]; pick[u - umin] the
 * slowest choice whose rounded time is <= u. */
typedef struct curve {
    int umin, umax;
    double *cost;
    int *pick;
    int *vert;   /* the hull's vertices (units), ascending: the slope changes there */
    int nvert;
} curve;

static void curves_free(curve *c, int n)
{
    if (!c) return;
    for (int i = 0; i < n; i++) {
        free(c[i].cost);
        free(c[i].pick);
        free(c[i].vert);
    }
    free(c);
}

static int choice_units(double t, double tau)
{
    double u = ceil(t / tau - 1e-9);
    return u < 1 ? 1 : u > 1e8 ? 100000000 : (int)u;
}

static int curve_build(const pt_energy_choice *ch, int nc, double idle_w, double tau, curve *c)
{
    /* points (u, E') sorted by u; per u the least E' */
    int *u = malloc(sizeof(int) * (size_t)nc), *ord = malloc(sizeof(int) * (size_t)nc);
    double *e = malloc(sizeof(double) * (size_t)nc);
    if (!u || !ord || !e) {
        free(u);
        free(ord);
        free(e);
        return pt_fail(PT_ENOMEM, "out of memory for an energy curve");
    }
    for (int k = 0; k < nc; k++) {
        u[k] = choice_units(ch[k].time_s, tau);
        e[k] = ch[k].energy_j - idle_w * u[k] * tau;
        ord[k] = k;
    }
    for (int a = 1; a < nc; a++) /* insertion sort by units (nc is small) */
        for (int b = a; b > 0 && u[ord[b]] < u[ord[b - 1]]; b--) {
            int t = ord[b];
            ord[b] = ord[b - 1];
            ord[b - 1] = t;
        }
    /* lower convex hull over distinct units (monotone chain) */
    int *hu = malloc(sizeof(int) * (size_t)nc);
    double *he = malloc(sizeof(double) * (size_t)nc);
    int nh = 0;
    if (!hu || !he) {
        free(u), free(ord), free(e), free(hu), free(he);
        return pt_fail(PT_ENOMEM, "out of memory for an energy curve");
    }
    for (int a = 0; a < nc; a++) {
        int k = ord[a];
        if (nh > 0 && hu[nh - 1] == u[k]) {
            if (e[k] < he[nh - 1]) he[nh - 1] = e[k];
            else continue;
            nh--; /* re-insert the improved point so the hull stays convex */
        }
        while (nh >= 2) {
            /* drop the middle point when it lies on or above the chord */
            double x1 = hu[nh - 2], y1 = he[nh - 2], x2 = hu[nh - 1], y2 = he[nh - 1];
            double cross = (x2 - x1) * (e[k] - y1) - (y2 - y1) * (u[k] - x1);
            if (cross <= 0) nh--;
            else break;
        }
        hu[nh] = u[k];
        he[nh] = e[k];
        nh++;
    }
    /* keep the non-increasing part: beyond the hull's minimum a longer
     * duration costs energy and saves nothing */
    int last = 0;
    for (int a = 1; a < nh; a++)
        if (he[a] < he[last] - 1e-15 * fabs(he[last])) last = a;
    nh = last + 1;
    c->umin = hu[0];
    c->umax = hu[nh - 1];
    c->vert = malloc(sizeof(int) * (size_t)nh);
    if (!c->vert) {
        free(u), free(ord), free(e), free(hu), free(he);
        return pt_fail(PT_ENOMEM, "out of memory for an energy curve");
    }
    memcpy(c->vert, hu, sizeof(int) * (size_t)nh);
    c->nvert = nh;
    int w = c->umax - c->umin + 1;
    c->cost = malloc(sizeof(double) * (size_t)w);
    c->pick = malloc(sizeof(int) * (size_t)w);
    if (!c->cost || !c->pick) {
        free(u), free(ord), free(e), free(hu), free(he);
        return pt_fail(PT_ENOMEM, "out of memory for an energy curve of %d units (use a larger time unit)", w);
    }
    for (int a = 0; a + 1 < nh || (a == 0 && nh == 1); a++) {
        int x0 = hu[a], x1 = nh == 1 ? hu[a] : hu[a + 1];
        for (int x = x0; x <= x1; x++) {
            double y = x1 == x0 ? he[a] : he[a] + (he[a + 1] - he[a]) * (x - x0) / (double)(x1 - x0);
            c->cost[x - c->umin] = y;
        }
        if (nh == 1) break;
    }
    for (int x = c->umin; x <= c->umax; x++) { /* the slowest choice that fits x units */
        int best = -1;
        for (int k = 0; k < nc; k++)
            if (u[k] <= x && (best < 0 || ch[k].time_s > ch[best].time_s ||
                              (ch[k].time_s == ch[best].time_s && ch[k].energy_j < ch[best].energy_j)))
                best = k;
        c->pick[x - c->umin] = best;
    }
    free(u), free(ord), free(e), free(hu), free(he);
    return 0;
}

/* ---- max-flow with lower bounds (Dinic) --------------------------------- */

#define FLOW_INF 1e300

typedef struct fedge {
    int to, rev;
    double cap;
} fedge;

typedef struct flownet {
    int n;
    int *head, *next; /* adjacency: edge lists */
    fedge *e;
    int ne, cap;
    int *level, *it, *queue;
} flownet;

static int fn_init(flownet *f, int n, int edges)
{
    memset(f, 0, sizeof *f);
    f->n = n;
    f->cap = 2 * edges + 4;
    f->head = malloc(sizeof(int) * (size_t)n);
    f->next = malloc(sizeof(int) * (size_t)f->cap);
    f->e = malloc(sizeof(fedge) * (size_t)f->cap);
    f->level = malloc(sizeof(int) * (size_t)n);
    f->it = malloc(sizeof(int) * (size_t)n);
    f->queue = malloc(sizeof(int) * (size_t)n);
    if (!f->head || !f->next || !f->e || !f->level || !f->it || !f->queue) return -1;
    for (int i = 0; i < n; i++) f->head[i] = -1;
    return 0;
}

static void fn_free(flownet *f)
{
    free(f->head), free(f->next), free(f->e), free(f->level), free(f->it), free(f->queue);
    memset(f, 0, sizeof *f);
}

/* u -> v with capacity c; returns the forward edge's index */
static int fn_add(flownet *f, int u, int v, double c)
{
    int a = f->ne++, b = f->ne++;
    f->e[a] = (fedge){v, b, c};
    f->e[b] = (fedge){u, a, 0};
    f->next[a] = f->head[u];
    f->head[u] = a;
    f->next[b] = f->head[v];
    f->head[v] = b;
    return a;
}

static int fn_bfs(flownet *f, int s, int t)
{
    for (int i = 0; i < f->n; i++) f->level[i] = -1;
    int qh = 0, qt = 0;
    f->queue[qt++] = s;
    f->level[s] = 0;
    while (qh < qt) {
        int u = f->queue[qh++];
        for (int a = f->head[u]; a >= 0; a = f->next[a])
            if (f->e[a].cap > 1e-12 && f->level[f->e[a].to] < 0) {
                f->level[f->e[a].to] = f->level[u] + 1;
                f->queue[qt++] = f->e[a].to;
            }
    }
    return f->level[t] >= 0;
}

static double fn_dfs(flownet *f, int u, int t, double pushed)
{
    if (u == t) return pushed;
    for (; f->it[u] >= 0; f->it[u] = f->next[f->it[u]]) {
        int a = f->it[u];
        fedge *x = &f->e[a];
        if (x->cap > 1e-12 && f->level[x->to] == f->level[u] + 1) {
            double d = fn_dfs(f, x->to, t, pushed < x->cap ? pushed : x->cap);
            if (d > 0) {
                if (x->cap < FLOW_INF) x->cap -= d;
                if (f->e[x->rev].cap < FLOW_INF) f->e[x->rev].cap += d;
                return d;
            }
        }
    }
    return 0;
}

static double fn_maxflow(flownet *f, int s, int t)
{
    double total = 0;
    while (fn_bfs(f, s, t)) {
        for (int i = 0; i < f->n; i++) f->it[i] = f->head[i];
        double d;
        while ((d = fn_dfs(f, s, t, FLOW_INF)) > 0) {
            total += d;
            if (total >= FLOW_INF / 2) return FLOW_INF;
        }
    }
    return total;
}

/* ---- the frontier ------------------------------------------------------ */

/* The activity-on-arc graph: node 0 source, 1 sink, 2 + 2 i / 2 + 2 i + 1
 * the start and end of instruction i.  Arcs: one per instruction
 * (adjustable) and one per dependency and source/sink link (fixed). */
typedef struct arc {
    int u, v;
    int d;        /* duration in units */
    int type;     /* the instruction's curve, -1 for a fixed arc */
} arc;

typedef struct aoa {
    int nn, na;
    arc *a;
    int *order;   /* nodes in topological order */
    int *es, *lf; /* earliest start, latest finish per node (units) */
} aoa;

static void aoa_free(aoa *g)
{
    free(g->a), free(g->order), free(g->es), free(g->lf);
    memset(g, 0, sizeof *g);
}

static int aoa_build(const pt_energy_dag *dag, double tau, aoa *g)
{
    memset(g, 0, sizeof *g);
    int n = dag->n;
    g->nn = 2 * n + 2;
    int *indeg = calloc((size_t)n, sizeof(int)), *outdeg = calloc((size_t)n, sizeof(int));
    g->a = malloc(sizeof(arc) * (size_t)(n + dag->nedges + 2 * n));
    g->order = malloc(sizeof(int) * (size_t)g->nn);
    g->es = malloc(sizeof(int) * (size_t)g->nn);
    g->lf = malloc(sizeof(int) * (size_t)g->nn);
    if (!indeg || !outdeg || !g->a || !g->order || !g->es || !g->lf) {
        free(indeg), free(outdeg);
        aoa_free(g);
        return -1;
    }
    for (int i = 0; i < n; i++) g->a[g->na++] = (arc){2 + 2 * i, 3 + 2 * i, 0, i};
    for (int k = 0; k < dag->nedges; k++) {
        const pt_energy_edge *e = &dag->e[k];
        g->a[g->na++] = (arc){3 + 2 * e->from, 2 + 2 * e->to, (int)ceil(e->delay_s / tau - 1e-9), -1};
        outdeg[e->from]++;
        indeg[e->to]++;
    }
    for (int i = 0; i < n; i++) {
        if (!indeg[i]) g->a[g->na++] = (arc){0, 2 + 2 * i, 0, -1};
        if (!outdeg[i]) g->a[g->na++] = (arc){3 + 2 * i, 1, 0, -1};
    }
    free(indeg), free(outdeg);
    /* topological order (Kahn) */
    int *deg = calloc((size_t)g->nn, sizeof(int)), *first = malloc(sizeof(int) * (size_t)g->nn),
        *nxt = malloc(sizeof(int) * (size_t)g->na);
    if (!deg || !first || !nxt) {
        free(deg), free(first), free(nxt);
        aoa_free(g);
        return -1;
    }
    for (int v = 0; v < g->nn; v++) first[v] = -1;
    for (int k = 0; k < g->na; k++) {
        deg[g->a[k].v]++;
        nxt[k] = first[g->a[k].u];
        first[g->a[k].u] = k;
    }
    int qh = 0, qt = 0;
    for (int v = 0; v < g->nn; v++)
        if (!deg[v]) g->order[qt++] = v;
    while (qh < qt) {
        int u = g->order[qh++];
        for (int k = first[u]; k >= 0; k = nxt[k])
            if (--deg[g->a[k].v] == 0) g->order[qt++] = g->a[k].v;
    }
    free(deg), free(first), free(nxt);
    if (qt != g->nn) { /* a cycle: the schedule's order contradicts its data */
        aoa_free(g);
        return -2;
    }
    return 0;
}

/* Earliest starts and latest finishes; returns the makespan (units). */
static int aoa_times(aoa *g)
{
    for (int v = 0; v < g->nn; v++) g->es[v] = 0;
    /* relax in topological order: arcs sorted by their tail's position */
    int *pos = malloc(sizeof(int) * (size_t)g->nn);
    if (!pos) return -1;
    for (int i = 0; i < g->nn; i++) pos[g->order[i]] = i;
    /* simple O(V + E) passes over the arcs ordered by tail position */
    int *by = malloc(sizeof(int) * (size_t)g->na), *cnt = calloc((size_t)g->nn + 1, sizeof(int));
    if (!by || !cnt) {
        free(pos), free(by), free(cnt);
        return -1;
    }
    for (int k = 0; k < g->na; k++) cnt[pos[g->a[k].u] + 1]++;
    for (int i = 0; i < g->nn; i++) cnt[i + 1] += cnt[i];
    for (int k = 0; k < g->na; k++) by[cnt[pos[g->a[k].u]]++] = k;
    for (int j = 0; j < g->na; j++) {
        const arc *x = &g->a[by[j]];
        if (g->es[x->u] + x->d > g->es[x->v]) g->es[x->v] = g->es[x->u] + x->d;
    }
    int T = g->es[1];
    for (int v = 0; v < g->nn; v++) g->lf[v] = T;
    for (int j = g->na - 1; j >= 0; j--) {
        const arc *x = &g->a[by[j]];
        if (g->lf[x->v] - x->d < g->lf[x->u]) g->lf[x->u] = g->lf[x->v] - x->d;
    }
    free(pos), free(by), free(cnt);
    return T;
}

void pt_energy_evaluate(const pt_energy_dag *dag, const pt_energy_profile *pr, const int *choice, double *time_s,
                        double *energy_j)
{
    /* longest path in seconds over the instruction DAG (topological by
     * Kahn on the instruction graph) */
    int n = dag->n;
    double *fin = calloc((size_t)n, sizeof(double)), *start = calloc((size_t)n, sizeof(double));
    int *deg = calloc((size_t)n, sizeof(int)), *first = malloc(sizeof(int) * (size_t)n),
        *nxt = malloc(sizeof(int) * (size_t)(dag->nedges + 1)), *q = malloc(sizeof(int) * (size_t)n);
    double busy_total = 0, e = 0, T = 0;
    if (!fin || !start || !deg || !first || !nxt || !q) {
        *time_s = NAN;
        *energy_j = NAN;
        goto out;
    }
    for (int i = 0; i < n; i++) first[i] = -1;
    for (int k = 0; k < dag->nedges; k++) {
        deg[dag->e[k].to]++;
        nxt[k] = first[dag->e[k].from];
        first[dag->e[k].from] = k;
    }
    int qh = 0, qt = 0;
    for (int i = 0; i < n; i++)
        if (!deg[i]) q[qt++] = i;
    while (qh < qt) {
        int i = q[qh++];
        const pt_energy_choice *c = &pr->choice[dag->in[i].type][choice[i]];
        fin[i] = start[i] + c->time_s;
        busy_total += c->time_s;
        e += c->energy_j;
        if (fin[i] > T) T = fin[i];
        for (int k = first[i]; k >= 0; k = nxt[k]) {
            int j = dag->e[k].to;
            double s = fin[i] + dag->e[k].delay_s;
            if (s > start[j]) start[j] = s;
            if (--deg[j] == 0) q[qt++] = j;
        }
    }
    /* every rank (device) draws idle power for the rest of the iteration */
    *time_s = T;
    *energy_j = e + pr->idle_w * ((double)dag->pp * T - busy_total);
out:
    free(fin), free(start), free(deg), free(first), free(nxt), free(q);
}

void pt_energy_frontier_free(pt_energy_frontier *f)
{
    if (!f) return;
    for (int i = 0; i < f->npoints; i++) free(f->p[i].choice);
    free(f->p);
    free(f->max_clock.choice);
    free(f->min_energy.choice);
    memset(f, 0, sizeof *f);
}

int pt_energy_frontier_at(const pt_energy_frontier *f, double max_time_s)
{
    int best = -1;
    for (int i = 0; i < f->npoints; i++)
        if (f->p[i].time_s <= max_time_s * (1 + 1e-12) && (best < 0 || f->p[i].energy_j < f->p[best].energy_j))
            best = i;
    return best;
}

/* Append a point (choices of the current durations), realised. */
static int push_point(pt_energy_frontier *f, int *capp, const pt_energy_dag *dag, const pt_energy_profile *pr,
                      const curve *cv, const aoa *g)
{
    if (f->npoints == *capp) {
        int nc = *capp ? 2 * *capp : 64;
        pt_energy_point *p = realloc(f->p, sizeof *p * (size_t)nc);
        if (!p) return -1;
        f->p = p;
        *capp = nc;
    }
    int *ch = malloc(sizeof(int) * (size_t)dag->n);
    if (!ch) return -1;
    for (int i = 0; i < dag->n; i++) {
        const curve *c = &cv[dag->in[i].type];
        ch[i] = c->pick[g->a[i].d - c->umin];
    }
    pt_energy_point *pt = &f->p[f->npoints++];
    pt->choice = ch;
    pt_energy_evaluate(dag, pr, ch, &pt->time_s, &pt->energy_j);
    return 0;
}

static int cmp_point(const void *a, const void *b)
{
    const pt_energy_point *x = a, *y = b;
    if (x->time_s != y->time_s) return x->time_s < y->time_s ? -1 : 1;
    return x->energy_j < y->energy_j ? -1 : x->energy_j > y->energy_j;
}

/* Keep the Pareto points: ordered by time, each strictly cheaper than every
 * faster one. */
static void pareto(pt_energy_frontier *f)
{
    qsort(f->p, (size_t)f->npoints, sizeof *f->p, cmp_point);
    int k = 0;
    for (int i = 0; i < f->npoints; i++) {
        if (k > 0 && f->p[i].energy_j >= f->p[k - 1].energy_j * (1 - 1e-12)) {
            free(f->p[i].choice);
            continue;
        }
        f->p[k++] = f->p[i];
    }
    f->npoints = k;
}

/* An arc on a longest path: no total float. */
static int critical(const aoa *g, const arc *x) { return g->lf[x->v] - g->es[x->u] - x->d == 0; }

/* One Phillips-Dessouky step on the critical subgraph: find the min cut;
 * 1 = found (dir[arc]: +1 shorten, -1 lengthen, 0 neither; shortening
 * and lengthening by one unit makes the makespan one unit shorter at the
 * least energy), 0 = no finite cut, -1 = out of memory, -2 = infeasible
 * (should not happen). */
static int pd_step(aoa *g, const curve *cv, const pt_energy_dag *dag, signed char *dir)
{
    int nn = g->nn, S = 0, T = 1, SS = nn, TT = nn + 1;
    int ncrit = 0;
    for (int k = 0; k < g->na; k++) ncrit += critical(g, &g->a[k]);
    flownet f;
    int *eidx = malloc(sizeof(int) * (size_t)g->na);
    double *lo = calloc((size_t)g->na, sizeof(double)), *hi = malloc(sizeof(double) * (size_t)g->na);
    double *excess = calloc((size_t)nn, sizeof(double));
    if (!eidx || !lo || !hi || !excess || fn_init(&f, nn + 2, ncrit + nn + 2) < 0) {
        free(eidx), free(lo), free(hi), free(excess);
        fn_free(&f);
        return -1;
    }
    for (int k = 0; k < g->na; k++) {
        eidx[k] = -1;
        const arc *x = &g->a[k];
        int crit = critical(g, x);
        if (!crit) continue;
        double up = FLOW_INF, low = 0;
        if (x->type >= 0) {
            const curve *c = &cv[dag->in[x->type].type];
            int d = x->d;
            if (d > c->umin) up = c->cost[d - 1 - c->umin] - c->cost[d - c->umin];
            if (d < c->umax) low = c->cost[d - c->umin] - c->cost[d + 1 - c->umin];
            if (up < 0) up = 0;
            if (low < 0) low = 0;
            if (up < FLOW_INF && low > up) low = up; /* convexity, against rounding */
        }
        lo[k] = low;
        hi[k] = up;
        eidx[k] = fn_add(&f, x->u, x->v, up >= FLOW_INF ? FLOW_INF : up - low);
        excess[x->v] += low;
        excess[x->u] -= low;
    }
    int back = fn_add(&f, T, S, FLOW_INF);
    double need = 0;
    for (int v = 0; v < nn; v++) {
        if (excess[v] > 1e-15) {
            fn_add(&f, SS, v, excess[v]);
            need += excess[v];
        } else if (excess[v] < -1e-15)
            fn_add(&f, v, TT, -excess[v]);
    }
    int rc = 0;
    double got = need > 0 ? fn_maxflow(&f, SS, TT) : 0;
    if (got < need * (1 - 1e-9) - 1e-12) rc = -2;
    if (!rc) {
        /* drop the circulation's back edge and the auxiliary terminals, then
         * maximise the s-t flow in the residual */
        f.e[back].cap = 0;
        f.e[f.e[back].rev].cap = 0;
        for (int a = f.head[SS]; a >= 0; a = f.next[a]) f.e[a].cap = 0, f.e[f.e[a].rev].cap = 0;
        for (int a = f.head[TT]; a >= 0; a = f.next[a]) f.e[a].cap = 0, f.e[f.e[a].rev].cap = 0;
        double add = fn_maxflow(&f, S, T);
        if (add >= FLOW_INF / 2) rc = 0;
        else {
            /* the cut: nodes reachable from S in the residual */
            fn_bfs(&f, S, T);
            double value = 0;
            int forward_inf = 0;
            for (int k = 0; k < g->na; k++) {
                if (eidx[k] < 0) continue;
                int su = f.level[g->a[k].u] >= 0, sv = f.level[g->a[k].v] >= 0;
                if (su && !sv) {
                    if (hi[k] >= FLOW_INF) forward_inf = 1;
                    else value += hi[k];
                } else if (!su && sv)
                    value -= lo[k];
            }
            if (forward_inf) rc = 0;
            else {
                (void)value;
                for (int k = 0; k < g->na; k++) {
                    dir[k] = 0;
                    if (eidx[k] < 0) continue;
                    int su = f.level[g->a[k].u] >= 0, sv = f.level[g->a[k].v] >= 0;
                    if (su && !sv) dir[k] = 1;       /* shorten */
                    else if (!su && sv) dir[k] = -1; /* lengthen */
                }
                rc = 1;
            }
        }
    }
    free(eidx), free(lo), free(hi), free(excess);
    fn_free(&f);
    return rc;
}

/* Start times and latest finishes of an assignment (seconds), for the
 * repair below: slack[i] = lf - es - duration. */
static double schedule_slack(const pt_energy_dag *dag, const pt_energy_profile *pr, const int *choice, double *slack)
{
    int n = dag->n;
    double *es = calloc((size_t)n, sizeof(double)), *lf = malloc(sizeof(double) * (size_t)n),
           *dur = malloc(sizeof(double) * (size_t)n);
    int *deg = calloc((size_t)n, sizeof(int)), *q = malloc(sizeof(int) * (size_t)n),
        *first = malloc(sizeof(int) * (size_t)n), *nxt = malloc(sizeof(int) * (size_t)(dag->nedges + 1));
    double T = NAN;
    if (!es || !lf || !dur || !deg || !q || !first || !nxt) goto out;
    for (int i = 0; i < n; i++) {
        dur[i] = pr->choice[dag->in[i].type][choice[i]].time_s;
        first[i] = -1;
    }
    for (int k = 0; k < dag->nedges; k++) {
        deg[dag->e[k].to]++;
        nxt[k] = first[dag->e[k].from];
        first[dag->e[k].from] = k;
    }
    int qh = 0, qt = 0;
    for (int i = 0; i < n; i++)
        if (!deg[i]) q[qt++] = i;
    while (qh < qt) {
        int i = q[qh++];
        for (int k = first[i]; k >= 0; k = nxt[k]) {
            int j = dag->e[k].to;
            double st = es[i] + dur[i] + dag->e[k].delay_s;
            if (st > es[j]) es[j] = st;
            if (--deg[j] == 0) q[qt++] = j;
        }
    }
    T = 0;
    for (int i = 0; i < n; i++) T = fmax(T, es[i] + dur[i]);
    for (int i = 0; i < n; i++) lf[i] = T;
    for (int a = n - 1; a >= 0; a--) { /* reverse topological order */
        int i = q[a];
        for (int k = first[i]; k >= 0; k = nxt[k]) {
            int j = dag->e[k].to;
            double f = lf[j] - dur[j] - dag->e[k].delay_s;
            if (f < lf[i]) lf[i] = f;
        }
    }
    for (int i = 0; i < n; i++) slack[i] = lf[i] - es[i] - dur[i];
out:
    free(es), free(lf), free(dur), free(deg), free(q), free(first), free(nxt);
    return T;
}

/* Make the fastest frontier point no slower than max clock: from it,
 * repeatedly move the critical instruction whose next faster clock costs
 * the least energy per second saved to that clock.  Ends at max clock's
 * time at worst (every critical instruction at its fastest clock).  Adds
 * the result as a point; -1 out of memory. */
static int repair_intrinsic(const pt_energy_dag *dag, const pt_energy_profile *pr, pt_energy_frontier *f)
{
    int n = dag->n, start = -1;
    for (int i = 0; i < f->npoints; i++)
        if (f->p[i].choice != NULL && (start < 0 || f->p[i].time_s < f->p[start].time_s)) start = i;
    if (start < 0 || f->p[start].time_s <= f->max_clock.time_s * (1 + 1e-12)) return 0;
    int *ch = malloc(sizeof(int) * (size_t)n);
    double *slack = malloc(sizeof(double) * (size_t)n);
    if (!ch || !slack) {
        free(ch), free(slack);
        return -1;
    }
    memcpy(ch, f->p[start].choice, sizeof(int) * (size_t)n);
    for (int guard = 0; guard < 1000000; guard++) {
        double T = schedule_slack(dag, pr, ch, slack);
        if (!(T == T)) break;
        if (T <= f->max_clock.time_s * (1 + 1e-12)) break;
        int best = -1, best_k = -1;
        double best_rate = INFINITY;
        double eps = 1e-12 * T;
        for (int i = 0; i < n; i++) {
            if (slack[i] > eps) continue;
            const pt_energy_choice *c = pr->choice[dag->in[i].type];
            int nc = pr->nchoices[dag->in[i].type], cur = ch[i], k_next = -1;
            for (int k = 0; k < nc; k++) /* the next faster clock */
                if (c[k].time_s < c[cur].time_s && (k_next < 0 || c[k].time_s > c[k_next].time_s)) k_next = k;
            if (k_next < 0) continue;
            double dt = c[cur].time_s - c[k_next].time_s;
            double de = (c[k_next].energy_j - pr->idle_w * c[k_next].time_s) - (c[cur].energy_j - pr->idle_w * c[cur].time_s);
            double rate = de / dt;
            if (rate < best_rate) best_rate = rate, best = i, best_k = k_next;
        }
        if (best < 0) break; /* every critical instruction at its fastest: T is max clock's */
        ch[best] = best_k;
    }
    free(slack);
    /* append the repaired assignment */
    pt_energy_point *p = realloc(f->p, sizeof *p * (size_t)(f->npoints + 1));
    if (!p) {
        free(ch);
        return -1;
    }
    f->p = p;
    f->p[f->npoints].choice = ch;
    pt_energy_evaluate(dag, pr, ch, &f->p[f->npoints].time_s, &f->p[f->npoints].energy_j);
    f->npoints++;
    return 0;
}

/* Check that profile pr covers dag's instruction types with finite,
 * positive clocks no wider apart than PT_ENERGY_MAX_SPREAD. */
static int profile_check(const pt_energy_dag *dag, const pt_energy_profile *pr)
{
    if (pr->ntypes < dag->ntypes)
        return pt_fail(PT_EINVAL, "energy profile: %d instruction types, the schedule has %d (pp x virtual stages x "
                       "forward/backward)", pr->ntypes, dag->ntypes);
    for (int t = 0; t < dag->ntypes; t++) {
        if (pr->nchoices[t] < 1) return pt_fail(PT_EINVAL, "energy profile: type %d has no clock", t);
        for (int k = 0; k < pr->nchoices[t]; k++) {
            const pt_energy_choice *c = &pr->choice[t][k];
            if (!(c->time_s > 0) || !isfinite(c->time_s) || !(c->energy_j >= 0) || !isfinite(c->energy_j))
                return pt_fail(PT_EINVAL, "energy profile: type %d clock %d has time %g s and energy %g J (valid: "
                               "time > 0, energy >= 0)", t, k, c->time_s, c->energy_j);
        }
        int fast = 0, slow = 0;
        for (int k = 1; k < pr->nchoices[t]; k++) {
            if (pr->choice[t][k].time_s < pr->choice[t][fast].time_s) fast = k;
            if (pr->choice[t][k].time_s > pr->choice[t][slow].time_s) slow = k;
        }
        const double tf = pr->choice[t][fast].time_s, ts = pr->choice[t][slow].time_s;
        if (ts > PT_ENERGY_MAX_SPREAD * tf)
            return pt_fail(PT_EINVAL, "energy profile: type %d (rank %d chunk %d %s) clock %d takes %g s, %.3g times "
                           "its clock %d's %g s (valid: a type's slowest clock at most %d times its fastest; no "
                           "device's clocks span that much: a broken measurement?)", t, t / 2 / dag->v, t / 2 % dag->v,
                           t % 2 ? "backward" : "forward", slow, ts, ts / tf, fast, tf, PT_ENERGY_MAX_SPREAD);
    }
    if (!(pr->idle_w >= 0)) return pt_fail(PT_EINVAL, "energy profile: idle power %g W (valid: >= 0)", pr->idle_w);
    return 0;
}

/* The reference points: every instruction at its fastest clock (max
 * clock), and at its least energy net of idle power (min energy). */
static int reference_points(const pt_energy_dag *dag, const pt_energy_profile *pr, pt_energy_frontier *out)
{
    const int n = dag->n;
    out->max_clock.choice = malloc(sizeof(int) * (size_t)n);
    out->min_energy.choice = malloc(sizeof(int) * (size_t)n);
    if (!out->max_clock.choice || !out->min_energy.choice)
        return pt_fail(PT_ENOMEM, "out of memory for the energy frontier");
    for (int i = 0; i < n; i++) {
        int t = dag->in[i].type, fast = 0, cheap = 0;
        for (int k = 1; k < pr->nchoices[t]; k++) {
            const pt_energy_choice *c = pr->choice[t];
            if (c[k].time_s < c[fast].time_s || (c[k].time_s == c[fast].time_s && c[k].energy_j < c[fast].energy_j))
                fast = k;
            double ek = c[k].energy_j - pr->idle_w * c[k].time_s, eb = c[cheap].energy_j - pr->idle_w * c[cheap].time_s;
            if (ek < eb) cheap = k;
        }
        out->max_clock.choice[i] = fast;
        out->min_energy.choice[i] = cheap;
    }
    pt_energy_evaluate(dag, pr, out->max_clock.choice, &out->max_clock.time_s, &out->max_clock.energy_j);
    pt_energy_evaluate(dag, pr, out->min_energy.choice, &out->min_energy.time_s, &out->min_energy.energy_j);
    return 0;
}

/* The time unit (*tau): tau_s, or by default fine against one instruction
 * (the rounding of every instruction's time up to whole units is at most
 * one unit); the steps are as long as the hull's segments allow, not one
 * unit each.  No finer than 1/PT_ENERGY_MAX_UNITS of the slowest iteration
 * (every instruction at its slowest clock), which bounds every duration,
 * the curves and the integer times (a finer one overflowed them and took
 * ~1e9 one-unit steps). */
static int time_unit(const pt_energy_dag *dag, const pt_energy_profile *pr, double tau_s, double *tau_out)
{
    const int n = dag->n;
    int *slowest = malloc(sizeof(int) * (size_t)n);
    if (!slowest) return pt_fail(PT_ENOMEM, "out of memory for the energy frontier");
    double e_most = 0; /* no assignment's energy is more than e_most + idle_w pp t_slow */
    for (int i = 0; i < n; i++) {
        const int t = dag->in[i].type;
        double e = pr->choice[t][0].energy_j;
        slowest[i] = 0;
        for (int k = 1; k < pr->nchoices[t]; k++) {
            if (pr->choice[t][k].time_s > pr->choice[t][slowest[i]].time_s) slowest[i] = k;
            e = fmax(e, pr->choice[t][k].energy_j);
        }
        e_most += e;
    }
    double t_slow, e_slow;
    pt_energy_evaluate(dag, pr, slowest, &t_slow, &e_slow);
    free(slowest);
    e_most += pr->idle_w * dag->pp * t_slow;
    if (!isfinite(t_slow) || !isfinite(e_most)) /* every point's time and energy is finite below these */
        return pt_fail(PT_EINVAL, "energy profile: the slowest iteration takes %g s and an iteration up to %g J "
                       "(valid: finite sums of the profile's times and energies)", t_slow, e_most);
    const double coarsest = t_slow / PT_ENERGY_MAX_UNITS;
    double tau = tau_s;
    if (!(tau > 0)) {
        double fastest = INFINITY;
        for (int t = 0; t < dag->ntypes; t++)
            for (int k = 0; k < pr->nchoices[t]; k++) fastest = fmin(fastest, pr->choice[t][k].time_s);
        tau = fmax(fastest / 20, coarsest);
    } else if (tau < coarsest) {
        return pt_fail(PT_EINVAL, "energy frontier: time unit %g s cuts the slowest iteration (%g s, every instruction "
                       "at its slowest clock) into %.3g units (valid: a unit of at least %g s, at most %d units)",
                       tau_s, t_slow, t_slow / tau_s, coarsest, PT_ENERGY_MAX_UNITS);
    }
    if (!(tau > 0) || !isfinite(tau)) return pt_fail(PT_EINVAL, "energy frontier: time unit %g s (valid: > 0)", tau_s);
    *tau_out = tau;
    return 0;
}

/* The length of a step in directions dir: every changed instruction stays
 * on its segment of the hull (a linear energy change); at least 1. */
static int step_room(const aoa *g, const curve *cv, const pt_energy_dag *dag, const signed char *dir)
{
    int kmax = INT32_MAX;
    for (int a = 0; a < g->na; a++) {
        if (!dir[a] || g->a[a].type < 0) continue;
        const curve *c = &cv[dag->in[g->a[a].type].type];
        int d = g->a[a].d, room = 1;
        if (dir[a] > 0) { /* down to the next vertex below d */
            for (int v = c->nvert - 1; v >= 0; v--)
                if (c->vert[v] < d) { room = d - c->vert[v]; break; }
        } else {
            for (int v = 0; v < c->nvert; v++)
                if (c->vert[v] > d) { room = c->vert[v] - d; break; }
        }
        if (room < kmax) kmax = room;
    }
    if (kmax == INT32_MAX || kmax < 1) kmax = 1;
    return kmax;
}

/* Take a step of up to kmax units in directions dir from makespan T: a
 * longer step than the floats allow shows as a makespan that did not drop
 * by as much, and is halved.  The new makespan (aoa_times'). */
static int step_take(aoa *g, const signed char *dir, int kmax, int T)
{
    for (int k = kmax;; k = k > 1 ? k / 2 : 1) {
        for (int a = 0; a < g->na; a++) g->a[a].d -= dir[a] * k;
        int T2 = aoa_times(g);
        if (T2 == T - k || k == 1) return T2;
        for (int a = 0; a < g->na; a++) g->a[a].d += dir[a] * k; /* undo, try half */
    }
}

/* Phillips-Dessouky's walk on g (at the cheapest durations) down to the
 * fastest cut, at most max_steps steps (0: no limit), appending the points
 * to out. */
static int frontier_steps(const pt_energy_dag *dag, const pt_energy_profile *pr, const curve *cv, aoa *g,
                          signed char *dir, int max_steps, pt_energy_frontier *out)
{
    int cap = 0, rc = 0;
    int limit = max_steps > 0 ? max_steps : INT32_MAX;
    int T = aoa_times(g), T_rec = INT32_MAX;
    /* record a point every ~1/1000 of the span (and at every end of a
     * step), so long runs of equal-slope steps do not flood the frontier */
    int gap = (int)((out->min_energy.time_s - out->max_clock.time_s) / out->tau_s / 1000);
    if (gap < 1) gap = 1;
    for (;;) {
        if (T < 0) {
            rc = pt_fail(PT_ENOMEM, "out of memory for the energy frontier");
            break;
        }
        if (T_rec - T >= gap) {
            if (push_point(out, &cap, dag, pr, cv, g) < 0) {
                rc = pt_fail(PT_ENOMEM, "out of memory for the energy frontier");
                break;
            }
            T_rec = T;
        }
        if (out->steps >= limit) break;
        int st = pd_step(g, cv, dag, dir);
        if (st == 0) break;
        if (st == -1) {
            rc = pt_fail(PT_ENOMEM, "out of memory for the energy frontier");
            break;
        }
        if (st == -2) {
            rc = pt_fail(PT_EINVAL, "energy frontier: no feasible cut at step %d (a profile that is not convex after "
                         "rounding to %g s units; use a smaller unit)", out->steps, out->tau_s);
            break;
        }
        T = step_take(g, dir, step_room(g, cv, dag, dir), T);
        out->steps++;
    }
    if (!rc && T_rec != T && push_point(out, &cap, dag, pr, cv, g) < 0)
        rc = pt_fail(PT_ENOMEM, "out of memory for the energy frontier");
    return rc;
}

/* The frontier's points at time unit out->tau_s: the per-type curves, the
 * activity-on-arc graph at the cheapest durations, then the walk.  A
 * PT_E* code, or -1 when a curve or the walk failed. */
static int frontier_walk(const pt_energy_dag *dag, const pt_energy_profile *pr, int max_steps, pt_energy_frontier *out)
{
    const double tau = out->tau_s;
    curve *cv = calloc((size_t)dag->ntypes, sizeof *cv);
    if (!cv) return pt_fail(PT_ENOMEM, "out of memory for the energy frontier");
    for (int t = 0; t < dag->ntypes; t++)
        if (curve_build(pr->choice[t], pr->nchoices[t], pr->idle_w, tau, &cv[t]) < 0) {
            curves_free(cv, dag->ntypes);
            return -1;
        }
    aoa g;
    int rc = aoa_build(dag, tau, &g);
    if (rc < 0) {
        curves_free(cv, dag->ntypes);
        return pt_fail(PT_EINVAL, rc == -2 ? "energy frontier: the schedule's order contradicts its dependencies (a "
                                            "cycle)" : "out of memory for the energy frontier");
    }
    for (int i = 0; i < dag->n; i++) g.a[i].d = cv[dag->in[i].type].umax; /* the cheapest durations */
    signed char *dir = malloc((size_t)g.na);
    if (!dir) {
        aoa_free(&g);
        curves_free(cv, dag->ntypes);
        return pt_fail(PT_ENOMEM, "out of memory for the energy frontier");
    }
    rc = frontier_steps(dag, pr, cv, &g, dir, max_steps, out) < 0 ? -1 : 0; /* -1 whatever the walk's error */
    free(dir);
    aoa_free(&g);
    curves_free(cv, dag->ntypes);
    return rc;
}

/* Append a copy of the max-clock point to out's points. */
static int add_max_clock(pt_energy_frontier *out, int n)
{
    pt_energy_point *grown = realloc(out->p, sizeof *grown * (size_t)(out->npoints + 1));
    if (!grown) return pt_fail(PT_ENOMEM, "out of memory for the energy frontier");
    out->p = grown;
    out->p[out->npoints] = out->max_clock;
    out->p[out->npoints].choice = malloc(sizeof(int) * (size_t)n);
    if (!out->p[out->npoints].choice) return pt_fail(PT_ENOMEM, "out of memory for the energy frontier");
    memcpy(out->p[out->npoints].choice, out->max_clock.choice, sizeof(int) * (size_t)n);
    out->npoints++;
    return 0;
}

int pt_energy_frontier_compute(const pt_energy_dag *dag, const pt_energy_profile *pr, double tau_s, int max_steps,
                               pt_energy_frontier *out)
{
    memset(out, 0, sizeof *out);
    if (!dag || dag->n < 1 || dag->v < 1 || !pr) return pt_fail(PT_EINVAL, "energy frontier: no instructions");
    int rc = profile_check(dag, pr);
    if (rc < 0) return rc;
    rc = reference_points(dag, pr, out);
    if (!rc) rc = time_unit(dag, pr, tau_s, &out->tau_s);
    if (!rc) rc = frontier_walk(dag, pr, max_steps, out);
    /* when rounding to units left the fastest cut point a little slower
     * than max clock, speed it up where it costs least until it is not;
     * then the max-clock point itself is a candidate too */
    if (!rc && repair_intrinsic(dag, pr, out) < 0) rc = pt_fail(PT_ENOMEM, "out of memory for the energy frontier");
    if (!rc) rc = add_max_clock(out, dag->n);
    if (rc < 0) {
        pt_energy_frontier_free(out);
        return rc;
    }
    pareto(out);
    /* the intrinsic point: the max-clock time (or less) at the least energy */
    out->intrinsic = pt_energy_frontier_at(out, out->max_clock.time_s);
    return 0;
}
