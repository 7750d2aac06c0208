/* SPDX-License-Identifier: MIT */
/* Pipeline schedules as action lists and the stage split (see schedule.h). */
#include "contract/schedule.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"

const char *pt_pp_op_name(int op)
{
    static const char *n[] = {"fwd", "bwd", "send_act", "recv_act", "send_grad", "recv_grad"};
    return op >= 0 && op <= PT_PP_RECV_GRAD ? n[op] : "?";
}

const char *pt_pp_schedule_name(int kind)
{
    switch (kind) {
    case PT_SCHED_GPIPE: return "gpipe";
    case PT_SCHED_1F1B: return "1f1b";
    case PT_SCHED_INTERLEAVED: return "interleaved";
    default: return "?";
    }
}

int pt_pp_schedule_check(int kind, int pp, int m, int v)
{
    if (kind != PT_SCHED_GPIPE && kind != PT_SCHED_1F1B && kind != PT_SCHED_INTERLEAVED)
        return pt_fail(PT_EINVAL, "pipeline schedule %d unknown: use gpipe, 1f1b or interleaved", kind);
    if (pp < 1) return pt_fail(PT_EINVAL, "pp %d: the pipeline needs pp >= 1", pp);
    if (m < 1) return pt_fail(PT_EINVAL, "microbatches %d: use 1 or more", m);
    if (v < 1) return pt_fail(PT_EINVAL, "virtual stages %d: use 1 or more", v);
    if (v > 1 && kind != PT_SCHED_INTERLEAVED)
        return pt_fail(PT_EINVAL, "virtual stages %d with the %s schedule: use 1, or --schedule interleaved", v,
                       pt_pp_schedule_name(kind));
    if (v > 1 && pp == 1)
        return pt_fail(PT_EINVAL, "virtual stages %d with pp 1: interleaving needs pp >= 2 (or use virtual stages 1)", v);
    if ((long)pp * v > PT_PP_SPLIT_MAX)
        return pt_fail(PT_EINVAL, "pp %d x virtual stages %d = %ld virtual stages: at most %d", pp, v, (long)pp * v,
                       PT_PP_SPLIT_MAX);
    if (kind == PT_SCHED_INTERLEAVED && m % pp)
        return pt_fail(PT_EINVAL, "microbatches %d with the interleaved schedule: use a multiple of pp %d (e.g. %d)", m,
                       pp, (m / pp + 1) * pp);
    return PT_OK;
}

double pt_pp_bubble_formula(int kind, int pp, int m, int v)
{
    if (kind != PT_SCHED_INTERLEAVED) v = 1;
    return (double)(pp - 1) / ((double)v * m + pp - 1);
}

/* One compute step of a rank's order. */
typedef struct step { int bwd, mb, chunk; } step;

/* Rank r's compute order (2 m v steps) for the schedule. */
static void compute_order(int kind, int pp, int r, int m, int v, step *o)
{
    int n = 0;
    const int total = m * v;
    if (kind == PT_SCHED_GPIPE) {
        for (int i = 0; i < m; i++) o[n++] = (step){0, i, 0};
        for (int i = 0; i < m; i++) o[n++] = (step){1, i, 0};
        return;
    }
    /* Megatron-LM's unit k -> (microbatch, chunk); v = 1 is plain 1F1B */
    const int warm = pt_pp_warmup(kind, pp, r, m, v);
#define UNIT_MB(k) (((k) / (pp * v)) * pp + (k) % pp)
#define UNIT_CHUNK(k) (((k) % (pp * v)) / pp)
    for (int k = 0; k < warm; k++) o[n++] = (step){0, UNIT_MB(k), UNIT_CHUNK(k)};
    for (int k = 0; k < total - warm; k++) {
        o[n++] = (step){0, UNIT_MB(warm + k), UNIT_CHUNK(warm + k)};
        o[n++] = (step){1, UNIT_MB(k), v - 1 - UNIT_CHUNK(k)};
    }
    for (int k = total - warm; k < total; k++) o[n++] = (step){1, UNIT_MB(k), v - 1 - UNIT_CHUNK(k)};
#undef UNIT_MB
#undef UNIT_CHUNK
}

/* growable action list */
typedef struct alist { pt_pp_action *a; int n, cap; } alist;

static int push(alist *l, int op, int mb, int chunk, int peer)
{
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 64;
        pt_pp_action *na = realloc(l->a, sizeof *na * (size_t)cap);
        if (!na) return pt_fail(PT_ENOMEM, "out of memory for a pipeline schedule of %d actions", cap);
        l->a = na;
        l->cap = cap;
    }
    l->a[l->n++] = (pt_pp_action){op, mb, chunk, peer, -1, -1};
    return PT_OK;
}

/* Give microbatches the lowest free index over the actions k with
 * live(a_k) set, each from its first such action to its last; writes the
 * index through field() and returns the most in use at once (>= 1), or -1
 * out of memory. */
static int assign(pt_pp_schedule *s, int compute_only, int buf)
{
    int *last = malloc(sizeof(int) * (size_t)s->m), *id = malloc(sizeof(int) * (size_t)s->m);
    char *used = calloc((size_t)s->m + 1, 1);
    int inuse = 0, peak = 1;
    if (!last || !id || !used) {
        peak = -1;
        goto done;
    }
    for (int i = 0; i < s->m; i++) last[i] = -1, id[i] = -1;
    for (int k = 0; k < s->n; k++)
        if (!compute_only || s->a[k].op <= PT_PP_BWD) last[s->a[k].mb] = k;
    for (int k = 0; k < s->n; k++) {
        pt_pp_action *a = &s->a[k];
        if (compute_only && a->op > PT_PP_BWD) continue;
        if (id[a->mb] < 0) {
            int j = 0;
            while (used[j]) j++;
            used[j] = 1;
            id[a->mb] = j;
            if (++inuse > peak) peak = inuse;
        }
        if (buf) a->buf = id[a->mb];
        else a->slot = id[a->mb];
        if (last[a->mb] == k) {
            used[id[a->mb]] = 0;
            inuse--;
        }
    }
done:
    free(last), free(id), free(used);
    return peak;
}

static int assign_slots(pt_pp_schedule *s)
{
    s->nslots = assign(s, 1, 0);
    s->nbufs = assign(s, 0, 1);
    if (s->nslots < 0 || s->nbufs < 0) return pt_fail(PT_ENOMEM, "out of memory for pipeline slots");
    return PT_OK;
}

int pt_pp_schedule_build(pt_pp_schedule *s, int kind, int pp, int rank, int m, int v)
{
    memset(s, 0, sizeof *s);
    int rc = pt_pp_schedule_check(kind, pp, m, v);
    if (rc) return rc;
    if (rank < 0 || rank >= pp) return pt_fail(PT_EINVAL, "pp rank %d outside 0..%d", rank, pp - 1);
    const int S = pp * v, nsteps = 2 * m * v;
    step *order = malloc(sizeof(step) * (size_t)nsteps * (size_t)pp);
    int *pos = calloc((size_t)pp, sizeof(int));
    /* per rank, microbatch and chunk: 1 fwd done, 2 act arrived, 4 grad arrived */
    unsigned char *st = calloc((size_t)pp * (size_t)m * (size_t)v, 1);
    alist *lists = calloc((size_t)pp, sizeof(alist));
    typedef struct msg { int grad, src, dst, mb, schunk, dchunk; } msg;
    msg *out = malloc(sizeof(msg) * (size_t)pp);
    if (!order || !pos || !st || !lists || !out) {
        rc = pt_fail(PT_ENOMEM, "out of memory for a pipeline schedule (pp %d, m %d, v %d)", pp, m, v);
        goto done;
    }
    for (int r = 0; r < pp; r++) compute_order(kind, pp, r, m, v, order + (size_t)r * nsteps);
#define ST(r, i, c) st[((size_t)(r) * m + (i)) * v + (c)]
    int finished = 0, rounds = 0;
    while (finished < pp) {
        int nmsg = 0, progress = 0;
        for (int r = 0; r < pp; r++) { /* compute phase */
            if (pos[r] == nsteps) continue;
            const step *x = &order[(size_t)r * nsteps + pos[r]];
            const int vs = x->chunk * pp + r;
            int ready = x->bwd ? (ST(r, x->mb, x->chunk) & 1) && (vs == S - 1 || (ST(r, x->mb, x->chunk) & 4))
                               : vs == 0 || (ST(r, x->mb, x->chunk) & 2);
            if (!ready) continue;
            if ((rc = push(&lists[r], x->bwd ? PT_PP_BWD : PT_PP_FWD, x->mb, x->chunk, -1))) goto done;
            if (!x->bwd) ST(r, x->mb, x->chunk) |= 1;
            if (!x->bwd && vs < S - 1)
                out[nmsg++] = (msg){0, r, (vs + 1) % pp, x->mb, x->chunk, (vs + 1) / pp};
            if (x->bwd && vs > 0)
                out[nmsg++] = (msg){1, r, (vs - 1) % pp, x->mb, x->chunk, (vs - 1) / pp};
            if (++pos[r] == nsteps) finished++;
            progress = 1;
        }
        if (!progress) {
            rc = pt_fail(PT_EINVAL, "internal: the %s schedule (pp %d, m %d, v %d) deadlocks at round %d",
                         pt_pp_schedule_name(kind), pp, m, v, rounds);
            goto done;
        }
        rounds++;
        for (int k = 0; k < nmsg; k++) { /* communication phase, in sender order */
            const msg *g = &out[k];
            if ((rc = push(&lists[g->src], g->grad ? PT_PP_SEND_GRAD : PT_PP_SEND_ACT, g->mb, g->schunk, g->dst)))
                goto done;
            if ((rc = push(&lists[g->dst], g->grad ? PT_PP_RECV_GRAD : PT_PP_RECV_ACT, g->mb, g->dchunk, g->src)))
                goto done;
            ST(g->dst, g->mb, g->dchunk) |= g->grad ? 4 : 2;
        }
    }
#undef ST
    s->kind = kind, s->pp = pp, s->rank = rank, s->m = m, s->v = v;
    s->a = lists[rank].a;
    s->n = lists[rank].n;
    lists[rank].a = NULL;
    s->rounds = rounds;
    rc = assign_slots(s);
done:
    if (lists)
        for (int r = 0; r < pp; r++) free(lists[r].a);
    free(lists), free(order), free(pos), free(st), free(out);
    if (rc) pt_pp_schedule_free(s);
    return rc;
}

void pt_pp_schedule_free(pt_pp_schedule *s)
{
    free(s->a);
    memset(s, 0, sizeof *s);
}

/* ---- stage split ---------------------------------------------------------- */

int pt_pp_split_layers(int n_layer, int pp, int v, const int *counts, int ncounts, pt_pp_split *out)
{
    memset(out, 0, sizeof *out);
    if (pp < 1 || v < 1) return pt_fail(PT_EINVAL, "pp %d, virtual stages %d: both must be >= 1", pp, v);
    const long S = (long)pp * v;
    if (S > PT_PP_SPLIT_MAX)
        return pt_fail(PT_EINVAL, "pp %d x virtual stages %d = %ld stages: at most %d", pp, v, S, PT_PP_SPLIT_MAX);
    if (S > n_layer)
        return pt_fail(PT_EINVAL, "pp %d x virtual stages %d = %ld stages for %d blocks (n_layer): every stage needs a block, use pp x v <= %d",
                       pp, v, S, n_layer, n_layer);
    out->nstages = (int)S;
    if (!counts || ncounts == 0) {
        int at = 0;
        for (int s = 0; s < S; s++) {
            out->l0[s] = at;
            at += n_layer / (int)S + (s < n_layer % S);
            out->l1[s] = at;
        }
        return PT_OK;
    }
    if (ncounts != S)
        return pt_fail(PT_EINVAL, "stage split has %d entries; pp %d x virtual stages %d needs %ld (blocks per stage, summing to %d)",
                       ncounts, pp, v, S, n_layer);
    int at = 0;
    for (int s = 0; s < S; s++) {
        if (counts[s] < 1)
            return pt_fail(PT_EINVAL, "stage split entry %d is %d blocks: every stage needs 1 to %ld blocks", s,
                           counts[s], n_layer - S + 1);
        if (counts[s] > n_layer)
            return pt_fail(PT_EINVAL, "stage split entry %d is %d blocks: more than n_layer %d", s, counts[s], n_layer);
        out->l0[s] = at;
        at += counts[s];
        out->l1[s] = at;
    }
    if (at != n_layer)
        return pt_fail(PT_EINVAL, "stage split sums to %d blocks: the model has n_layer %d (entries must sum to %d)", at,
                       n_layer, n_layer);
    return PT_OK;
}

void pt_pp_split_chunk(const pt_pp_split *sp, int pp, int r, int c, int *l0, int *l1)
{
    *l0 = sp->l0[c * pp + r];
    *l1 = sp->l1[c * pp + r];
}

int pt_pp_microbatch(int B, int m, int *micro)
{
    if (m < 1) return pt_fail(PT_EINVAL, "microbatches %d: use 1 or more", m);
    if (B < 1 || B % m) {
        char buf[160] = "";
        size_t len = 0;
        for (int d = 1; d <= B && len + 16 < sizeof buf; d++)
            if (B % d == 0) len += (size_t)snprintf(buf + len, sizeof buf - len, "%s%d", len ? ", " : "", d);
        return pt_fail(PT_EINVAL, "batch of %d sequences per dp group does not split into %d microbatches: use %s", B, m,
                       B >= 1 ? buf : "a batch >= 1");
    }
    *micro = B / m;
    return PT_OK;
}
