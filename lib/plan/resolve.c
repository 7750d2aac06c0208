/* SPDX-License-Identifier: MIT */
/* pt_plan_resolve: a request into a plan, once, for the plugin and for
 * ptrain-run (see resolve.h).  Moved here from the SPANK plugin's
 * plan_request so that both resolve through the same code. */
#include "plan/resolve.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What a request pins that can be judged from the step's size and the
 * model alone, named as lim's front end spells it (the search's own refusal
 * covers the layouts' shapes): each pinned group size divides the ranks,
 * their product too, an explicit stage split covers the model's layers,
 * and a pinned ZeRO stage leaves data-parallel ranks to shard over. */
static int request_fits(int ntasks, const pt_plan *req, const pt_model_shape *m, const pt_plan_limits *lim)
{
    const struct { const char *name; int v; } pins[] = {
        {"tp", req->tp}, {"sp", req->sp}, {"pp", req->pp}};
    char valid[256];
    long long prod = 1;
    for (size_t i = 0; i < sizeof pins / sizeof pins[0]; i++) {
        if (pins[i].v <= 0) continue;
        if (ntasks % pins[i].v) {
            /* every divisor of the task count: the 1d sizes of the mode table */
            pt_plan_list_tp(PT_MODE_1D, 1, ntasks, ntasks, valid, sizeof valid);
            char f[48];
            return pt_fail(PT_EINVAL, "%s=%d does not divide the %d tasks of the step "
                           "(valid %s here: %s)", pt_plan_flag(lim, pins[i].name, f, sizeof f), pins[i].v,
                           ntasks, pins[i].name, valid);
        }
        prod *= pins[i].v;
    }
    if (prod > 1 && ntasks % prod) {
        char ft[48], fs[48], fp[48];
        return pt_fail(PT_EINVAL, "%s=%d x %s=%d x %s=%d = %lld does "
                       "not divide the %d tasks of the step", pt_plan_flag(lim, "tp", ft, sizeof ft),
                       req->tp > 0 ? req->tp : 1, pt_plan_flag(lim, "sp", fs, sizeof fs),
                       req->sp > 0 ? req->sp : 1, pt_plan_flag(lim, "pp", fp, sizeof fp),
                       req->pp > 0 ? req->pp : 1, prod, ntasks);
    }
    if (req->pp_split_n > 0) {
        pt_plan q = *req;
        q.pp = req->pp > 0 ? req->pp : 1;
        q.microbatches = 1;
        if (pt_plan_check_model(&q, m->n_layer, 0) < 0) return -1;
    }
    if (req->zero > 0 && prod == ntasks && req->sp <= 1)
        return pt_fail(PT_EINVAL, "zero=%d with dp=1 sp=1: ZeRO shards the optimizer state over "
                       "the data-parallel ranks and this plan has one, so there is nothing "
                       "to shard (valid: zero=0, or dp*sp >= 2)", req->zero);
    return 0;
}

int pt_plan_resolve(const pt_cluster *c, const pt_model_shape *m, int global_batch,
                    const pt_plan_limits *lim, const pt_plan *req, int zero_pinned, int default_zero,
                    pt_plan *out, pt_search_result *res, char *notes, size_t notes_len)
{
    if (notes && notes_len) notes[0] = '\0';
    if (!c || !m || !lim || !req || !out)
        return pt_fail(PT_EINVAL, "pt_plan_resolve: missing argument (cluster, model, limits, request "
                       "and plan are required)");
    if (c->nnodes < 1 || !c->tasks_per_node)
        return pt_fail(PT_EINVAL, "invalid job geometry: %d nodes (valid: >= 1 node with its task "
                       "counts)", c->nnodes);
    long long ntasks = 0;
    for (int i = 0; i < c->nnodes; i++) {
        if (c->tasks_per_node[i] < 1)
            return pt_fail(PT_EINVAL, "invalid job geometry: node %d has %d tasks (valid: >= 1)", i,
                           c->tasks_per_node[i]);
        ntasks += c->tasks_per_node[i];
    }
    if (ntasks > (1 << 24))
        return pt_fail(PT_EINVAL, "invalid job geometry: %lld tasks (valid: at most %d)", ntasks, 1 << 24);
    if (default_zero < 0 || default_zero > lim->max_zero)
        return pt_fail(PT_EINVAL, "invalid default ZeRO stage %d (valid: 0..max_zero=%d)", default_zero,
                       lim->max_zero);
    if (request_fits((int)ntasks, req, m, lim) < 0) return -1;

    pt_search_result *r = res ? res : malloc(sizeof *r);
    if (!r) return pt_fail(PT_ENOMEM, "pt_plan_resolve: out of memory");
    pt_plan_limits l = *lim;
    pt_plan q = *req;
    q.dp = 0;
    int rc = -1;
    /* the search reads zero 0 as "choose": a ZeRO stage 0 the user gave is
     * a pin, so forbid ZeRO instead */
    if (zero_pinned && req->zero == 0) l.max_zero = 0;
    if (!zero_pinned) q.zero = 0;
    if (!zero_pinned && default_zero > 0) {
        q.zero = default_zero;
        rc = pt_plan_search(c, m, global_batch, &l, &q, r);
        if (rc < 0) { /* no plan takes it (nothing to shard): no ZeRO */
            q.zero = 0;
            l.max_zero = 0;
        }
    }
    if (rc < 0) rc = pt_plan_search(c, m, global_batch, &l, &q, r);
    if (rc < 0) {
        if (!res) free(r);
        return -1;
    }
    *out = r->best.plan;
    /* a pinned layout that crosses a slower link: honoured, with a warning */
    const pt_candidate *b = &r->best;
    if ((req->mode != PT_MODE_AUTO || req->tp > 0) && b->plan.tp > 1 &&
        b->link[PT_GRP_TP] > PT_NET_NODE - (c->island_ranks > 0 ? 1 : 0)) {
        int k = b->link[PT_GRP_TP];
        /* which of the layout's tp communicators cross it, and which stay
         * on faster links (2d rows on an island while the columns cross) */
        char on[400] = "", off[400] = "";
        size_t lo = 0, lf = 0;
        for (int s = PT_SUB_TP; s < PT_SUB_SYNC; s++) {
            if (b->cost.sub_bytes[s] <= 0) continue;
            char role[96];
            pt_cost_sub_role(&b->plan, s, role, sizeof role);
            if (b->cost.sub_link[s] == k && lo < sizeof on)
                lo += (size_t)snprintf(on + lo, sizeof on - lo, "%s%s %.3g ms", lo ? ", " : "", role,
                                       b->cost.sub_t[s] * 1e3);
            else if (b->cost.sub_link[s] != k && lf < sizeof off)
                lf += (size_t)snprintf(off + lf, sizeof off - lf, "%s%s %.3g ms on the %s link", lf ? ", " : "", role,
                                       b->cost.sub_t[s] * 1e3, pt_cost_link_name(b->cost.sub_link[s]));
        }
        pt_notef(notes, notes_len,
                 "ptrain: warning: tp=%d (%s) spans the %s link (%.3g GB/s per rank, %.3g us; "
                 "inside a node %.3g GB/s): predicted tp communication %.3g ms of a %.3g ms step%s%s%s%s",
                 b->plan.tp, pt_mode_name(b->plan.mode), pt_cost_link_name(k), c->hw.gbps[k],
                 c->hw.lat_s[k] * 1e6, c->hw.gbps[PT_NET_NODE], b->cost.t_comm[PT_GRP_TP] * 1e3,
                 b->cost.t_step * 1e3, lf ? "; on it: " : "", lf ? on : "", lf ? "; " : "", off);
    }
    if (!res) free(r);
    return 0;
}
