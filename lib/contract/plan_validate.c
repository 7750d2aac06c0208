/* SPDX-License-Identifier: MIT */
/* Validation of plans and requests: a plan's internal consistency and its
 * fit to a world (pt_plan_validate), to a model and batch
 * (pt_plan_check_model), and a request's checks that need no geometry
 * (pt_plan_request_check, the plugin's srun side).  Sources: pipeline
 * rules after Narayanan et al. 2021 (sec. 2.1-2.2), ZeRO after
 * Rajbhandari et al. 2020 (sec. 5), sequence parallelism after Li et al.
 * 2021.  libc only. */
#include "contract/plan_priv.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

int pt_pp_warmup(int schedule, int pp, int r, int m, int v)
{
    const int total = m * v;
    if (schedule == PT_SCHED_1F1B) return pp - r - 1 < m ? pp - r - 1 : m;
    if (schedule != PT_SCHED_INTERLEAVED || m == pp) return total;
    int warm = 2 * (pp - r - 1) + (v - 1) * pp;
    return warm > total ? total : warm;
}


/* "m1, m2, m3" of the multiples of step nearest above and below m (for
 * interleaved microbatch counts). */
static void multiples_text(int m, int step, char *buf, size_t len)
{
    pt_plan_i_strlist s;
    pt_plan_i_sl_init(&s, buf, len);
    int lo = m / step * step;
    if (lo >= step) pt_plan_i_sl_add(&s, "%d", lo);
    for (int k = lo + step; s.count < 3; k += step) pt_plan_i_sl_add(&s, "%d", k);
}


/* The pipeline settings that need neither the world nor the model:
 * schedule, virtual stages, the number of split entries.  pp, v and m
 * are the plan's (a request passes 1 for "not given"). */
static int pipeline_check(const pt_plan *p, int pp, int v, int m)
{
    if (p->schedule < 0 || p->schedule >= N_SCHEDS)
        return pt_fail(PT_EINVAL, "invalid schedule value %d (valid: gpipe, 1f1b, interleaved)",
                       p->schedule);
    if (v < 1 || v > PT_VIRTUAL_STAGES_MAX)
        return pt_fail(PT_EINVAL, "invalid virtual_stages=%d (valid: 1..%d model chunks per "
                       "pipeline rank)", v, PT_VIRTUAL_STAGES_MAX);
    if (p->schedule == PT_SCHED_INTERLEAVED) {
        if (pp < 2)
            return pt_fail(PT_EINVAL, "schedule=interleaved with pp=%d: interleaving needs a "
                           "pipeline (valid: pp >= 2, or schedule gpipe or 1f1b)", pp);
        if (v < 2)
            return pt_fail(PT_EINVAL, "schedule=interleaved with virtual_stages=%d: interleaving "
                           "needs at least 2 model chunks per rank (valid: virtual_stages "
                           "2..%d, or schedule 1f1b)", v, PT_VIRTUAL_STAGES_MAX);
        if (m % pp) {
            char list[64];
            multiples_text(m, pp, list, sizeof list);
            return pt_fail(PT_EINVAL, "schedule=interleaved with pp=%d needs microbatches a "
                           "multiple of pp, microbatches=%d is not (Narayanan et al. 2021, "
                           "sec. 2.2; valid microbatches: %s, ...)", pp, m, list);
        }
    } else if (v != 1) {
        return pt_fail(PT_EINVAL, "virtual_stages=%d with schedule=%s: virtual stages are for the "
                       "interleaved schedule (valid: schedule=interleaved, or "
                       "virtual_stages=1)", v, pt_schedule_name(p->schedule));
    }
    if (p->pp_split_n < 0 || p->pp_split_n > PT_PP_SPLIT_MAX)
        return pt_fail(PT_EINVAL, "invalid pp_split_n=%d (valid: 0 for an even split, or "
                       "1..%d entries)", p->pp_split_n, PT_PP_SPLIT_MAX);
    if (p->pp_split_n) {
        long long need = (long long)pp * v;
        char txt[PT_PP_SPLIT_MAX * 6];
        pt_plan_split_format(p, txt, sizeof txt);
        if (p->pp_split_n != need)
            return pt_fail(PT_EINVAL, "pp_split %s has %d entries, but pp=%d x virtual_stages=%d "
                           "makes %lld stages (valid: %lld comma-separated block counts, "
                           "or even)", txt, p->pp_split_n, pp, v, need, need);
        for (int i = 0; i < p->pp_split_n; i++)
            if (p->pp_split[i] < 1)
                return pt_fail(PT_EINVAL, "pp_split %s: stage %d has %d blocks (valid: at least "
                               "1 block per stage)", txt, i, p->pp_split[i]);
    }
    return 0;
}

int pt_plan_validate(const pt_plan *p, int world_size)
{
    if (!p) return pt_fail(PT_EINVAL, "no plan given");
    if ((int)p->mode < 0 || (int)p->mode >= N_MODES)
        return pt_fail(PT_EINVAL, "invalid mode value %d (valid: %s)", (int)p->mode,
                         PT_PLAN_MODE_NAMES(", "));
    if (p->mode == PT_MODE_AUTO)
        return pt_fail(PT_EINVAL,
                         "mode auto is a request, not a plan: resolve it first (concrete modes: %s)",
                         PT_PLAN_MODE_NAMES(", "));
    struct { const char *name; int v; } sizes[] = {
        {"dp", p->dp}, {"pp", p->pp}, {"tp", p->tp}, {"tp_depth", p->tp_depth},
        {"sp", p->sp}, {"microbatches", p->microbatches},
    };
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        if (sizes[i].v < 1 || sizes[i].v > SIZE_MAX_VALUE)
            return pt_fail(PT_EINVAL, "invalid %s=%d (valid: 1..%d)", sizes[i].name,
                             sizes[i].v, SIZE_MAX_VALUE);
    }
    if (p->zero < 0 || p->zero > 3)
        return pt_fail(PT_EINVAL, "invalid zero=%d (valid ZeRO stages: 0, 1, 2, 3)", p->zero);
    if (p->recompute < 0 || p->recompute >= N_RECOMPUTE)
        return pt_fail(PT_EINVAL, "invalid recompute=%d (valid recompute modes: 0 none, 1 block, "
                       "2 attention)", p->recompute);
    if (p->precision < 0 || p->precision >= N_PRECISIONS)
        return pt_fail(PT_EINVAL, "invalid precision=%d (valid: 0 fp32, 1 bf16)", p->precision);
    if (memchr(p->rank_order, '\0', sizeof p->rank_order) == NULL || !pt_plan_i_order_is_perm(p->rank_order))
        return pt_fail(PT_EINVAL,
                         "invalid rank order '%.4s' (valid: a permutation of D, P, T such as DPT)",
                         p->rank_order);
    if (memchr(p->tp_order, '\0', sizeof p->tp_order) == NULL || !pt_plan_i_tp_order_is_perm(p->tp_order))
        return pt_fail(PT_EINVAL, "invalid tp order '%.4s' (valid: a permutation of 0, 1, 2 such as 012)",
                       p->tp_order);
    if (pipeline_check(p, p->pp, p->virtual_stages, p->microbatches) < 0) return -1;
    /* The ranks a tensor group must divide: the world less pp and sp
     * (the whole world when those do not divide it). */
    int tp_room = world_size;
    if (world_size > 0 && world_size % ((long long)p->pp * p->sp) == 0)
        tp_room = world_size / (p->pp * p->sp);
    char valid[256], shape[32];
    if (p->tp_depth != 1 && p->mode != PT_MODE_2P5D)
        return pt_plan_tp_dims(p, NULL); /* depth outside 2.5d */
    if (world_size > 0 && !pt_plan_i_tp_has_shape(p->mode, p->tp_depth, p->tp)) {
        pt_plan_i_valid_tp_text(p->mode, p->tp_depth, tp_room, INT_MAX, valid, sizeof valid);
        return pt_fail(PT_EINVAL, "mode %s with %d ranks: tp=%d is not %s (%s)",
                       pt_mode_name(p->mode), world_size, p->tp,
                       pt_plan_i_shape_text(p->mode, p->tp_depth, shape, sizeof shape), valid);
    }
    if (pt_plan_tp_dims(p, NULL) < 0) return -1;

    if (world_size > 0) {
        long long prod = (long long)p->dp * p->pp * p->tp * p->sp;
        if (prod != world_size) {
            if (p->sp > 1) {
                /* the sp sizes the world less pp and tp leaves (less pp alone, or the
                 * whole world, when those do not divide it) */
                char list[200];
                int sp_room = world_size % p->pp ? world_size : world_size / p->pp;
                if (sp_room % p->tp == 0) sp_room /= p->tp;
                pt_plan_list_tp(PT_MODE_1D, 1, sp_room, INT_MAX, list, sizeof list);
                snprintf(valid, sizeof valid, "valid sp here: %s", list);
            } else {
                pt_plan_i_valid_tp_text(p->mode, p->tp_depth, tp_room, INT_MAX, valid, sizeof valid);
            }
            return pt_fail(PT_EINVAL,
                             "plan dp=%d pp=%d tp=%d sp=%d covers %lld ranks, but the world has "
                             "%d (valid: dp*pp*tp*sp = %d; mode %s, %s)",
                             p->dp, p->pp, p->tp, p->sp, prod, world_size, world_size,
                             pt_mode_name(p->mode), valid);
        }
    }
    if (p->zero > 0 && (long long)p->dp * p->sp == 1)
        return pt_fail(PT_EINVAL, "zero=%d with dp=%d sp=%d: ZeRO shards the optimizer state over "
                       "the data-parallel ranks and this plan has one, so there is nothing "
                       "to shard (valid: zero=0, or dp*sp >= 2)", p->zero, p->dp, p->sp);
    return 0;
}

int pt_plan_check_model(const pt_plan *p, int n_layer, int batch_per_dp)
{
    if (!p) return pt_fail(PT_EINVAL, "no plan given");
    if (n_layer < 1) return pt_fail(PT_EINVAL, "invalid layer count %d (valid: >= 1)", n_layer);
    long long stages = (long long)p->pp * p->virtual_stages;
    if (stages > n_layer) {
        if (p->virtual_stages == 1)
            return pt_fail(PT_EINVAL, "pp=%d is larger than the layer count %d: every pipeline "
                           "stage holds at least one block (valid: pp 1..%d)", p->pp,
                           n_layer, n_layer);
        return pt_fail(PT_EINVAL, "pp=%d x virtual_stages=%d = %lld stages, more than the %d "
                       "layers: every stage holds at least one block (valid: pp * "
                       "virtual_stages <= %d; pp <= %d with virtual_stages=%d)", p->pp,
                       p->virtual_stages, stages, n_layer, n_layer,
                       n_layer / p->virtual_stages, p->virtual_stages);
    }
    if (p->pp_split_n > 0 && p->pp_split_n <= PT_PP_SPLIT_MAX) {
        long long sum = 0;
        for (int i = 0; i < p->pp_split_n; i++) sum += p->pp_split[i];
        if (sum != n_layer) {
            char txt[PT_PP_SPLIT_MAX * 6];
            pt_plan_split_format(p, txt, sizeof txt);
            return pt_fail(PT_EINVAL, "pp_split %s sums to %lld blocks, but the model has %d "
                           "layers (valid: %d block counts >= 1 that sum to %d, or even)",
                           txt, sum, n_layer, p->pp_split_n, n_layer);
        }
    }
    if (batch_per_dp > 0 && batch_per_dp % p->microbatches) {
        /* the microbatch counts that divide the batch (and, interleaved, are multiples of pp) */
        char list[200];
        pt_plan_i_strlist sl;
        pt_plan_i_sl_init(&sl, list, sizeof list);
        for (int k = 1; k <= batch_per_dp; k++)
            if (batch_per_dp % k == 0 && (p->schedule != PT_SCHED_INTERLEAVED || k % p->pp == 0))
                pt_plan_i_sl_add(&sl, "%d", k);
        return pt_fail(PT_EINVAL, "microbatches=%d does not divide the %d sequences per "
                       "data-parallel rank (valid microbatches here: %s)", p->microbatches,
                       batch_per_dp, sl.count ? list : "none");
    }
    return 0;
}

const char *pt_plan_flag(const pt_plan_limits *lim, const char *key, char *buf, size_t n)
{
    if (buf && n) snprintf(buf, n, "%s%s", lim && lim->flag_prefix ? lim->flag_prefix : "", key ? key : "");
    return buf;
}

int pt_plan_request_check(const pt_plan *req, const pt_plan_limits *lim)
{
    if (!req) return pt_fail(PT_EINVAL, "no request given");
    unsigned modes = lim ? lim->modes : ~0u;
    char f[48], g[48]; /* settings as this front end spells them (pt_plan_flag) */
#define FLAG(key) pt_plan_flag(lim, key, f, sizeof f)
    if ((int)req->mode < 0 || (int)req->mode >= N_MODES)
        return pt_fail(PT_EINVAL, "invalid mode value %d (valid: %s)", (int)req->mode,
                       PT_MODE_NAMES(", "));
    if (req->mode != PT_MODE_OFF && !(modes & (1u << req->mode)))
        return pt_fail(PT_EINVAL, "%s=%s is not allowed by the administrator "
                         "(allowed_modes in ptrain.conf)", FLAG("mode"), pt_mode_name(req->mode));
    if (req->tp < 0 || req->tp > SIZE_MAX_VALUE)
        return pt_fail(PT_EINVAL, "invalid %s=%d (valid: 1..%d)", FLAG("tp"), req->tp,
                       SIZE_MAX_VALUE);
    if (req->tp_depth < 0 || req->tp_depth > SIZE_MAX_VALUE)
        return pt_fail(PT_EINVAL, "invalid %s=%d (valid: 1..%d)", FLAG("tp-depth"),
                       req->tp_depth, SIZE_MAX_VALUE);
    if (req->sp < 0 || req->sp > SIZE_MAX_VALUE)
        return pt_fail(PT_EINVAL, "invalid %s=%d (valid: 1..%d)", FLAG("sp"), req->sp,
                       SIZE_MAX_VALUE);
    if (req->pp < 0 || req->pp > SIZE_MAX_VALUE)
        return pt_fail(PT_EINVAL, "invalid %s=%d (valid: 1..%d)", FLAG("pp"), req->pp, SIZE_MAX_VALUE);
    if (req->microbatches < 0 || req->microbatches > SIZE_MAX_VALUE)
        return pt_fail(PT_EINVAL, "invalid %s=%d (valid: 1..%d)", FLAG("microbatches"),
                       req->microbatches, SIZE_MAX_VALUE);
    if (req->zero < 0 || req->zero > 3)
        return pt_fail(PT_EINVAL, "invalid %s=%d (valid ZeRO stages: 0, 1, 2, 3)", FLAG("zero"),
                       req->zero);
    if (req->recompute < 0 || req->recompute >= N_RECOMPUTE)
        return pt_fail(PT_EINVAL, "invalid %s value %d (valid: none, block, "
                       "attention)", FLAG("recompute"), req->recompute);
    if (req->precision < 0 || req->precision >= N_PRECISIONS)
        return pt_fail(PT_EINVAL, "invalid %s value %d (valid: fp32, bf16)", FLAG("precision"), req->precision);
    if (req->mode == PT_MODE_OFF) return 0; /* nothing planned: sizes are ignored */
    if (lim && lim->precisions && !(lim->precisions & (1u << req->precision)))
        return pt_fail(PT_EINVAL, "%s=%s is not allowed by the administrator "
                       "(allowed_precisions in ptrain.conf)", FLAG("precision"),
                       pt_precision_name(req->precision));
    int max_pp = lim ? lim->max_pp : SIZE_MAX_VALUE, max_zero = lim ? lim->max_zero : 3;
    unsigned scheds = lim ? lim->schedules : ~0u;
    int pp = req->pp > 0 ? req->pp : 1;
    if (pp > max_pp)
        return pt_fail(PT_EINVAL, "%s=%d exceeds the administrator's max_pp=%d (valid: "
                       "1..%d; max_pp in ptrain.conf)", FLAG("pp"), pp, max_pp, max_pp);
    if (req->zero > max_zero)
        return pt_fail(PT_EINVAL, "%s=%d exceeds the administrator's max_zero=%d "
                       "(valid: 0..%d; max_zero in ptrain.conf)", FLAG("zero"), req->zero, max_zero,
                       max_zero);
    if (req->schedule >= 0 && req->schedule < N_SCHEDS && !(scheds & (1u << req->schedule))) {
        pt_plan_i_strlist sl;
        char ok[64];
        pt_plan_i_sl_init(&sl, ok, sizeof ok);
        for (int i = 0; i < N_SCHEDS; i++)
            if (scheds & (1u << i)) pt_plan_i_sl_add(&sl, "%s", pt_schedule_name(i));
        return pt_fail(PT_EINVAL, "%s=%s is not allowed by the administrator "
                       "(allowed_schedules in ptrain.conf: %s)", FLAG("schedule"),
                       pt_schedule_name(req->schedule), sl.count ? ok : "none");
    }
    if (pipeline_check(req, pp, req->virtual_stages > 0 ? req->virtual_stages : 1,
                       req->microbatches > 0 ? req->microbatches : 1) < 0)
        return -1;
    if (req->tp_depth > 1 && req->mode != PT_MODE_2P5D)
        return pt_fail(PT_EINVAL, "%s=%d is for %s=2.5d, but the "
                       "mode is %s (valid: %s=2.5d, or no %s)", FLAG("tp-depth"),
                       req->tp_depth, pt_plan_flag(lim, "mode", g, sizeof g), pt_mode_name(req->mode), g, f);
    if (req->tp > 0 && !pt_plan_i_tp_has_shape(req->mode, req->tp_depth, req->tp)) {
        pt_plan_i_strlist s;
        char valid[160], shape[32];
        pt_plan_i_sl_init(&s, valid, sizeof valid);
        for (int t = 1; s.count < 6 && t <= SIZE_MAX_VALUE; t++)
            if (pt_plan_i_tp_has_shape(req->mode, req->tp_depth, t)) pt_plan_i_sl_add(&s, "%d", t);
        return pt_fail(PT_EINVAL, "%s=%d is not %s for %s=%s (valid "
                       "tp of that shape: %s, ...)", FLAG("tp"), req->tp,
                       pt_plan_i_shape_text(req->mode, req->tp_depth, shape, sizeof shape),
                       pt_plan_flag(lim, "mode", g, sizeof g), pt_mode_name(req->mode), valid);
    }
#undef FLAG
    return 0;
}
