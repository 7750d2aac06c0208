/* SPDX-License-Identifier: MIT */
/* ptrain-run's memory check before anything is allocated (bin/run/run.h). */
#define _GNU_SOURCE
#include "run.h"
#include "core/hostmem.h"
#include "plan/cost.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- memory -------------------------------------------------------------
 * Before anything is allocated, the plan's predicted peak per rank (the
 * cost model's arena high-water mark, pt_cost.mem_peak: parameters,
 * gradients, AdamW state and activations as lib/train and lib/model lay
 * them out, within 0.5% of the measured arena, tests/plan) is compared
 * with the memory this rank may use (lib/core/hostmem.h: the one check,
 * which ptrain-ckpt convert and sample make too), so that an absurd size
 * is refused in one line instead of being killed by the kernel after
 * minutes of swapping or paging. */

static double gib(double b) { return pt_gib(b); }

/* The plan's arena peak per rank (bytes), 0 with pt_errmsg() set when the cost
 * model refuses the plan (left to the runtime's own checks). */
static double plan_peak(const run_setup *s, const pt_plan *p, long batch)
{
    const pt_gpt_config *c = &s->cfg;
    pt_model_shape m = *c;
    pt_cost cost;
    if (batch > INT_MAX || pt_cost_eval(&m, (int)batch, p, NULL, NULL, &cost) < 0) return 0;
    return cost.mem_peak;
}

/* The memory check (run.h). */
int run_check_memory(run_setup *s, int world, const run_nodes *nodes)
{
    (void)world;
    const pt_plan *p = &s->plan;
    const run_opts *o = &s->o;
    s->mem_need = plan_peak(s, p, o->batch);
    if (s->mem_need <= 0) return 0;
    int local = nodes && nodes->tpn && nodes->node >= 0 ? nodes->tpn[nodes->node] : 1;
    /* the one host-memory check (lib/core/hostmem.h), with this run's
     * words; the changes that would fit are priced against its room */
    char detail[400];
    snprintf(detail, sizeof detail, " per rank (parameters, gradients, AdamW state and activations of --model %s L=%d "
             "C=%d T=%d, --batch %ld, dp=%d tp=%d pp=%d)", o->model, s->cfg.n_layer, s->cfg.n_embd, s->cfg.seq_len,
             o->batch, p->dp, p->tp, p->pp);
    pt_mem_room room;
    int rc = pt_mem_check(s->mem_need, local, "the plan", detail, "this rank", &room);
    s->mem_avail = room.bytes > 0 ? room.bytes : 0;
    if (!rc) return 0;
    const double avail = room.bytes;
    char refusal[PT_ERROR_LEN];
    snprintf(refusal, sizeof refusal, "%s", pt_errmsg());
    /* what would fit, one change at a time, in the order a user would try them */
    char fits[400] = "";
    size_t off = 0;
    int n = 0;
    pt_plan q;
    if (p->dp > 1 && p->zero < 3) {
        q = *p;
        q.zero = 3;
        double need = plan_peak(s, &q, o->batch);
        if (need > 0 && need <= avail)
            off += (size_t)snprintf(fits + off, sizeof fits - off, "%s--zero 3 (%.2f GiB)", n++ ? ", " : "", gib(need));
    }
    if (p->recompute != PT_RECOMPUTE_BLOCK && off < sizeof fits) {
        q = *p;
        q.recompute = PT_RECOMPUTE_BLOCK;
        double need = plan_peak(s, &q, o->batch);
        if (need > 0 && need <= avail)
            off += (size_t)snprintf(fits + off, sizeof fits - off, "%s--recompute block (%.2f GiB)", n++ ? ", " : "",
                                    gib(need));
    }
    long per_dp = o->batch / p->dp;
    for (long mb = (long)p->microbatches * 2; mb <= per_dp && off < sizeof fits; mb *= 2) {
        if (per_dp % mb) continue;
        q = *p;
        q.microbatches = (int)mb;
        double need = plan_peak(s, &q, o->batch);
        if (need > 0 && need <= avail) {
            off += (size_t)snprintf(fits + off, sizeof fits - off, "%s--microbatches %ld (%.2f GiB)", n++ ? ", " : "",
                                    mb, gib(need));
            break;
        }
    }
    for (long b = o->batch / 2; b >= p->dp && off < sizeof fits; b /= 2) {
        long bb = b / p->dp * p->dp;
        if (bb < p->dp || (bb / p->dp) % p->microbatches) continue;
        double need = plan_peak(s, p, bb);
        if (need > 0 && need <= avail) {
            off += (size_t)snprintf(fits + off, sizeof fits - off, "%s--batch %ld (%.2f GiB)", n++ ? ", " : "", bb,
                                    gib(need));
            break;
        }
    }
    return pt_fail(PT_EINVAL, "%s; %s%s", refusal,
                   n ? "would fit: " : "no single change of --zero, --recompute, --microbatches or --batch fits: "
                       "use more ranks (tp, pp) or a smaller model",
                   fits);
}
