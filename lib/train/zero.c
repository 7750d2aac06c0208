/* SPDX-License-Identifier: MIT */
/* ZeRO stages 1-3 as pt_train strategies (Rajbhandari et al. 2020,
 * section 5): three tables of train.h's hooks over one implementation that
 * reads the table's zero_stage; the layout of units and own slices is
 * described in train.h, "ZeRO".  It uses lib/train only through
 * strategy.h.  Structure after llm.c's llmc/zero.cuh (shard offset per tensor,
 * reduce-scatter in place of the allreduce), with padding to the group size
 * and per-piece gathering for stage 3 (FSDP-style units). */
#include "train/strategy.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define TRY(x) do { int rc_ = (x); if (rc_) return rc_; } while (0)

/* piece keys: the model's hook pieces (-1 embedding, 0..L-1 blocks, L head)
 * and the tied token embedding, which embedding and head share */
#define PIECE_TIED (-2)

typedef struct pt_zero_unit {
    pt_comm *comm;   /* the bucket's sync group (N = comm->size, own slice = comm->rank) */
    size_t off;      /* first float in the padded full layout */
    size_t n, npad;  /* real floats; padded to a multiple of N */
    size_t s;        /* own slice: npad / N floats */
    size_t own;      /* first float of the own slice in the own-slice layout */
    int p0, np;      /* its parameters: z->order[p0 .. p0+np) */
    int lo, hi;      /* first and last piece using it, in forward order */
    pt_comm *tied;   /* non-NULL: the gradient is also summed over this group (pp's tied wte) */
    void *full;      /* stage 3: gathered work copy [npad] (ACT) while refs > 0 */
    float *gfull;    /* stage 2/3: the full gradient [npad] while the backward produces it */
    int refs;        /* stage 3: uses in progress of full */
} pt_zero_unit;

struct pt_zero {
    int stage;
    int mixed;       /* the work copy is not the master (bf16): the master keeps only own slices */
    pt_dtype act;    /* the work copy's element type */
    int nunits;
    pt_zero_unit *units;
    int *order;      /* [nparams] parameter indices in layout order */
    int *unit_of;    /* [nparams] */
    size_t *poff;    /* [nparams] first float in the padded full layout */
    char *counted;   /* [nparams] counted in the norm (some rank of its group is norm owner) */
    size_t npad;     /* floats of the padded full layout */
    size_t nown;     /* floats of the own-slice layout */
    size_t smax;     /* largest own slice (scratch size) */
    float *absent;   /* [16] NaN: where data/grad/work of a piece not gathered point
                        (pt_gpt_bind_views refuses NULL); a read gives NaN (as fp32,
                        and as bf16 under mixed precision) */
};

static int piece_of(const pt_param *p, int L, int untied)
{
    if (p->cls == PT_P_WTE && untied) return strcmp(p->name, "lm_head.w") == 0 ? L : -1; /* embedding, head */
    if (p->cls == PT_P_WTE) return PIECE_TIED;
    if (p->cls == PT_P_WPE) return -1;
    if (p->name[0] == 'h') return atoi(p->name + 1);
    return L; /* lnf.w, lnf.b */
}

static pt_comm *tied_of(const pt_param *p)
{
    return p->tied && p->tied->size > 1 ? p->tied : NULL;
}

/* the strategy's state (pt_train.impl) */
static struct pt_zero *zero_of(const pt_train *t) { return t->impl; }

/* own slice of unit u in the full layout's coordinates: [u->off + r s, +s) */
static size_t own_lo(const pt_zero_unit *u) { return u->off + (size_t)u->comm->rank * u->s; }

/* own gradient / master parameter slices of unit u ([s] floats each) */
static float *own_grad(const pt_train *t, const pt_zero_unit *u)
{
    return zero_of(t)->stage == 1 ? t->grads_memory + own_lo(u) : t->grads_memory + u->own;
}
static float *own_param(const pt_train *t, const pt_zero_unit *u)
{
    const struct pt_zero *z = zero_of(t);
    return z->stage == 3 || z->mixed ? t->params_memory + u->own : t->params_memory + own_lo(u);
}
/* own slice of the work copy ([s] ACT elements; own_param under fp32) */
static void *own_work(const pt_train *t, const pt_zero_unit *u)
{
    const struct pt_zero *z = zero_of(t);
    return pt_elem(t->work_memory, z->stage == 3 ? u->own : own_lo(u), z->act);
}

/* parameter i's elements inside the own slice of its unit: [a, b) in the
 * parameter's local index; returns b - a */
static int64_t own_range(const struct pt_zero *z, const pt_train *t, int i, int64_t *a, int64_t *b)
{
    const pt_zero_unit *u = &z->units[z->unit_of[i]];
    const int64_t p0 = (int64_t)z->poff[i], numel = t->model->params[i].shard.numel;
    const int64_t s0 = (int64_t)own_lo(u), s1 = s0 + (int64_t)u->s;
    *a = (s0 > p0 ? s0 : p0) - p0;
    *b = (s1 < p0 + numel ? s1 : p0 + numel) - p0;
    if (*b <= *a) *a = *b = 0; /* the own slice does not meet this parameter */
    return *b - *a;
}

/* ---- layout --------------------------------------------------------------- */

/* the free_state hook: also after a partial zero_create */
static void zero_free(pt_train *t)
{
    struct pt_zero *z = zero_of(t);
    if (z) {
        for (int k = 0; k < z->nunits; k++) {
            pt_arena_free(t->arena, z->units[k].full);
            pt_arena_free(t->arena, z->units[k].gfull);
        }
        if (t->model && t->model->param_hook_arg == t) {
            t->model->param_hook = NULL;
            t->model->param_hook_arg = NULL;
        }
        pt_arena_free(t->arena, z->absent);
        if (t->work_memory != t->params_memory) pt_arena_free(t->arena, t->work_memory);
        t->work_memory = NULL;
        free(z->units);
        free(z->order);
        free(z->unit_of);
        free(z->poff);
        free(z->counted);
        free(z);
        t->impl = NULL;
    }
    pt_arena_free(t->arena, t->v_memory);
    pt_arena_free(t->arena, t->m_memory);
    pt_arena_free(t->arena, t->grads_memory);
    pt_arena_free(t->arena, t->params_memory);
}

/* Point unit u's parameters at full-layout buffers (offsets from u->off):
 * which & 1 the work copy `work` (ACT; under fp32 also data, the same
 * memory), which & 2 the gradient, which & 4 the master `data`; NULL
 * points at the absent marker. */
static void set_param_ptrs(pt_train *t, const pt_zero_unit *u, void *work, float *grad, float *data, int which)
{
    struct pt_zero *z = zero_of(t);
    for (int j = u->p0; j < u->p0 + u->np; j++) {
        int i = z->order[j];
        pt_param *p = &t->model->params[i];
        const size_t k = z->poff[i] - u->off;
        if (which & 1) {
            p->work = work ? pt_elem(work, k, z->act) : (void *)z->absent;
            if (!z->mixed) p->data = p->work;
        }
        if (which & 2) p->grad = grad ? grad + k : z->absent;
        if (which & 4) p->data = data ? data + k : z->absent;
    }
}

static int zero_hook(void *arg, pt_gpt *m, int piece, int phase);

static int zero_create(pt_train *t)
{
    pt_gpt *m = t->model;
    const int np = m->nparams, L = m->cfg.n_layer;
    struct pt_zero *z = calloc(1, sizeof *z);
    if (!z) return pt_fail(PT_ENOMEM, "out of memory for the ZeRO registry");
    t->impl = z;
    z->stage = t->strategy->zero_stage;
    z->act = t->ops->act;
    z->mixed = z->act != PT_F32;
    z->units = calloc((size_t)np + 1, sizeof *z->units);
    z->order = calloc((size_t)np + 1, sizeof *z->order);
    z->unit_of = calloc((size_t)np + 1, sizeof *z->unit_of);
    z->poff = calloc((size_t)np + 1, sizeof *z->poff);
    z->counted = calloc((size_t)np + 1, 1);
    float *owner = calloc((size_t)np + 1, sizeof *owner);
    if (!z->units || !z->order || !z->unit_of || !z->poff || !z->counted || !owner) {
        free(owner);
        return pt_fail(PT_ENOMEM, "out of memory for the ZeRO registry of %d parameters", np);
    }
    /* which pieces use the tied embedding on this rank (pp: first / last stage) */
    const int untied = pt_model_untied(&m->cfg), has_embed = m->stage.first;
    int has_head = 0;
    for (int i = 0; i < np; i++) has_head |= piece_of(&m->params[i], L, untied) == L;
    /* buckets by sync group (as the allreduce layout), units by piece within */
    size_t off = 0, own = 0;
    int nord = 0, rc;
    pt_train_bucket *b;
    for (int i = 0; !(rc = pt_train_bucket_next(t, &i, off, &b)) && b; i++) {
        pt_comm *sc = b->comm;
        pt_zero_unit *u = NULL;
        int key = 0;
        for (int j = i, next; j >= 0; j = next) {
            pt_param *p = &m->params[j];
            owner[j] = (float)p->shard.norm_owner;
            int kj = piece_of(p, L, untied);
            if (!u || kj != key) {
                u = &z->units[z->nunits++];
                key = kj;
                u->comm = sc;
                u->off = off;
                u->p0 = nord;
                u->lo = key == PIECE_TIED ? (has_embed ? -1 : L) : key;
                u->hi = key == PIECE_TIED ? (has_head ? L : -1) : key;
            }
            u->tied = u->tied ? u->tied : tied_of(p);
            z->order[nord++] = j;
            z->unit_of[j] = (int)(u - z->units);
            z->poff[j] = off + u->n;
            u->n += (size_t)p->shard.numel;
            u->np++;
            /* close the unit when the next parameter of this group starts another piece */
            next = pt_train_next_in_group(m, j + 1, sc);
            if (next < 0 || piece_of(&m->params[next], L, untied) != key) {
                const size_t N = (size_t)sc->size;
                u->npad = (u->n + N - 1) / N * N;
                u->s = u->npad / N;
                u->own = own;
                own += u->s;
                off += u->npad;
                if (u->s > z->smax) z->smax = u->s;
            }
        }
        b->n = off - b->off;
        /* the norm owner of each shard is one rank of its sync group: the
         * group's max says whether the shard counts at all (pp's second
         * copy of the tied embedding does not) */
        if ((rc = pt_allreduce_max(sc, owner, (size_t)np))) break;
        for (int j = i; j >= 0; j = pt_train_next_in_group(m, j + 1, sc)) z->counted[j] = owner[j] > 0;
    }
    if (rc) {
        free(owner);
        return rc;
    }
    free(owner);
    z->npad = off;
    z->nown = own;

    /* state: stage 1 full params + full grads, stage 2 full params, stage 3
     * own slices only; m and v always own slices.  Mixed precision: the
     * fp32 master only in own slices, the work copy where fp32 keeps the
     * params (full in stages 1 and 2, own slices in stage 3) */
    const size_t nwork = z->stage == 3 ? own : off, nparam = z->mixed ? own : nwork;
    const size_t ngrad = z->stage == 1 ? off : own;
    t->params_memory = pt_arena_alloc(t->arena, (nparam ? nparam : 1) * sizeof(float));
    t->grads_memory = pt_arena_alloc(t->arena, (ngrad ? ngrad : 1) * sizeof(float));
    t->m_memory = pt_arena_alloc(t->arena, (own ? own : 1) * sizeof(float));
    t->v_memory = pt_arena_alloc(t->arena, (own ? own : 1) * sizeof(float));
    t->work_memory = z->mixed ? pt_arena_alloc(t->arena, (nwork ? nwork : 1) * pt_dtype_size(z->act)) : t->params_memory;
    t->grads_n = ngrad;
    if (!t->params_memory || !t->grads_memory || !t->m_memory || !t->v_memory || !t->work_memory)
        return pt_fail(PT_ENOMEM, "out of memory for ZeRO-%d state (%zu + %zu + 2 x %zu floats, %zu %s)", z->stage,
                       nparam, ngrad, own, z->mixed ? nwork : 0, pt_dtype_name(z->act));
    /* initial values: through full-size buffers (temporary where the stage
     * keeps only slices), the model writes every parameter: the master
     * (pfull), the work copy (wfull; pfull under fp32) and the gradient */
    const int sliced = z->stage == 3 || z->mixed;
    float *pfull = sliced ? pt_arena_alloc(t->arena, (off ? off : 1) * sizeof(float)) : t->params_memory;
    void *wfull = !z->mixed ? pfull
                  : z->stage == 3 ? pt_arena_alloc(t->arena, (off ? off : 1) * pt_dtype_size(z->act)) : t->work_memory;
    float *gfull = z->stage == 1 ? t->grads_memory : pt_arena_alloc(t->arena, (off ? off : 1) * sizeof(float));
    if (!pfull || !wfull || !gfull) {
        if (pfull && pfull != t->params_memory) pt_arena_free(t->arena, pfull);
        if (wfull && wfull != (void *)pfull && wfull != t->work_memory) pt_arena_free(t->arena, wfull);
        if (gfull != t->grads_memory) pt_arena_free(t->arena, gfull);
        return pt_fail(PT_ENOMEM, "out of memory for ZeRO-%d initial values (%zu floats)", z->stage, off);
    }
    for (int k = 0; k < z->nunits; k++) {
        const pt_zero_unit *u = &z->units[k];
        set_param_ptrs(t, u, pt_elem(wfull, u->off, z->act), gfull + u->off, pfull + u->off, 7);
    }
    rc = pt_gpt_bind_params(m);
    if (!rc && sliced)
        for (int k = 0; k < z->nunits; k++) {
            const pt_zero_unit *u = &z->units[k];
            t->ops->copy(t->params_memory + u->own, pfull + own_lo(u), u->s, PT_F32);
            if (z->mixed && z->stage == 3) /* the work copy's own slice too */
                t->ops->copy(own_work(t, u), pt_elem(wfull, own_lo(u), z->act), u->s, z->act);
        }
    if (wfull != (void *)pfull && wfull != t->work_memory) pt_arena_free(t->arena, wfull);
    if (pfull != t->params_memory) pt_arena_free(t->arena, pfull);
    if (gfull != t->grads_memory) pt_arena_free(t->arena, gfull);
    if (rc) return rc;
    if (z->stage >= 2 || z->mixed) {
        z->absent = pt_arena_alloc(t->arena, 16 * sizeof(float));
        if (!z->absent) return pt_fail(PT_ENOMEM, "out of memory for ZeRO's absent-piece marker");
        /* NaN as fp32 and, for a bf16 work copy, as each bf16 half */
        t->ops->fill(z->absent, NAN, z->mixed ? 32 : 16, z->mixed ? z->act : PT_F32);
    }
    if (z->mixed) /* the master is the registry's (own slices) from here */
        for (int k = 0; k < z->nunits; k++) set_param_ptrs(t, &z->units[k], NULL, NULL, NULL, 4);
    if (z->stage < 3) /* the work copy stays whole */
        for (int k = 0; k < z->nunits; k++)
            set_param_ptrs(t, &z->units[k], pt_elem(t->work_memory, z->units[k].off, z->act), NULL, NULL, 1);
    if (z->stage >= 2) {
        /* parameters (stage 3) and gradients exist only while the hook holds them */
        for (int k = 0; k < z->nunits; k++) set_param_ptrs(t, &z->units[k], NULL, NULL, NULL, z->stage == 3 ? 3 : 2);
        m->param_hook = zero_hook;
        m->param_hook_arg = t;
        rc = pt_gpt_bind_views(m);
    }
    return rc;
}

/* ---- gradient reduction ------------------------------------------------------ */

/* Stage 2/3: the full gradient of unit u leaves the backward: sum over the
 * tied group (if any), reduce-scatter over the unit's group, accumulate the
 * own slice, free the full buffer. */
static int reduce_unit(pt_train *t, pt_zero_unit *u)
{
    if (!u->gfull) return PT_OK;
    if (u->tied) TRY(pt_allreduce_sum(u->tied, u->gfull, u->npad));
    float *scratch = pt_arena_alloc(t->arena, u->s * sizeof(float));
    if (!scratch) return pt_fail(PT_ENOMEM, "out of memory for a ZeRO reduce-scatter slice of %zu floats", u->s);
    int rc = pt_reduce_scatter_sum(u->comm, u->gfull, scratch, u->npad);
    if (!rc) t->ops->axpy(own_grad(t, u), 1.0, scratch, u->s, PT_F32);
    pt_arena_free(t->arena, scratch);
    pt_arena_free(t->arena, u->gfull);
    u->gfull = NULL;
    set_param_ptrs(t, u, NULL, NULL, NULL, 2);
    return rc;
}

/* Stage 3: gather unit u's work copy (first use) / free it (last). */
static int acquire(pt_train *t, pt_zero_unit *u)
{
    const pt_dtype at = zero_of(t)->act;
    if (u->refs++ > 0) return PT_OK;
    u->full = pt_arena_alloc(t->arena, u->npad * pt_dtype_size(at));
    if (!u->full)
        return pt_fail(PT_ENOMEM, "out of memory for ZeRO-3 gathered parameters (%zu %s elements)", u->npad,
                       pt_dtype_name(at));
    TRY(pt_allgather_t(u->comm, own_work(t, u), u->full, u->npad, at));
    set_param_ptrs(t, u, u->full, NULL, NULL, 1);
    return PT_OK;
}

static int release(pt_train *t, pt_zero_unit *u)
{
    if (u->refs <= 0)
        return pt_fail(PT_EINVAL, "ZeRO-3: parameters of piece %d released without being gathered (hook order)", u->lo);
    if (--u->refs > 0) return PT_OK;
    pt_arena_free(t->arena, u->full);
    u->full = NULL;
    set_param_ptrs(t, u, NULL, NULL, NULL, 1);
    return PT_OK;
}

/* The model's param_hook (lib/model/gpt.h): around each piece's forward
 * and backward. */
static int zero_hook(void *arg, pt_gpt *m, int piece, int phase)
{
    pt_train *t = arg;
    struct pt_zero *z = zero_of(t);
    const int s3 = z->stage == 3;
    int changed = 0;
    for (int k = 0; k < z->nunits; k++) {
        pt_zero_unit *u = &z->units[k];
        switch (phase) {
        case PT_HOOK_FWD_PRE:
            if (s3 && u->lo == piece) {
                TRY(acquire(t, u));
                changed = 1;
            }
            break;
        case PT_HOOK_FWD_POST:
            if (s3 && u->hi == piece) {
                TRY(release(t, u));
                changed = 1;
            }
            break;
        case PT_HOOK_BWD_PRE:
            if (u->hi != piece) break;
            if (s3) TRY(acquire(t, u));
            if (!u->gfull) {
                u->gfull = pt_arena_alloc(t->arena, u->npad * sizeof(float)); /* zeroed */
                if (!u->gfull)
                    return pt_fail(PT_ENOMEM, "out of memory for a ZeRO gradient of %zu floats (piece %d)", u->npad, piece);
                set_param_ptrs(t, u, NULL, u->gfull, NULL, 2);
            }
            changed = 1;
            break;
        case PT_HOOK_BWD_POST:
            if (u->lo != piece) break;
            if (!u->gfull)
                return pt_fail(PT_EINVAL, "ZeRO-%d: backward of piece %d ended without PT_HOOK_BWD_PRE (each piece's "
                               "backward must be bracketed by BWD_PRE and BWD_POST)", z->stage, piece);
            if (!u->tied) TRY(reduce_unit(t, u)); /* tied: in pt_train_sync */
            if (s3) TRY(release(t, u));
            changed = 1;
            break;
        default:
            return pt_fail(PT_EINVAL, "ZeRO hook: unknown phase %d (valid: 0..3)", phase);
        }
    }
    return changed ? pt_gpt_bind_views(m) : PT_OK;
}

/* the flat gradients and the full-size ones still in flight (stage 2/3
 * units whose reduce-scatter waits for the sync, e.g. the tied embedding) */
static void zero_zero_grad(pt_train *t)
{
    struct pt_zero *z = zero_of(t);
    if (t->grads_memory) t->ops->zero(t->grads_memory, t->grads_n, PT_F32);
    for (int k = 0; k < z->nunits; k++)
        if (z->units[k].gfull) t->ops->zero(z->units[k].gfull, z->units[k].npad, PT_F32);
}

static int zero_sync(pt_train *t)
{
    struct pt_zero *z = zero_of(t);
    if (z->stage >= 2) {
        /* what the hook left: tied units (and any unit whose backward ran
         * without the hook's BWD_POST) */
        for (int k = 0; k < z->nunits; k++) TRY(reduce_unit(t, &z->units[k]));
        return PT_OK;
    }
    float *scratch = pt_arena_alloc(t->arena, (z->smax ? z->smax : 1) * sizeof(float));
    if (!scratch) return pt_fail(PT_ENOMEM, "out of memory for a ZeRO reduce-scatter slice of %zu floats", z->smax);
    int rc = PT_OK;
    for (int k = 0; k < z->nunits && !rc; k++) {
        pt_zero_unit *u = &z->units[k];
        float *g = t->grads_memory + u->off;
        if (u->tied) rc = pt_allreduce_sum(u->tied, g, u->npad);
        if (!rc) rc = pt_reduce_scatter_sum(u->comm, g, scratch, u->npad);
        if (!rc) t->ops->copy(own_grad(t, u), scratch, u->s, PT_F32);
    }
    pt_arena_free(t->arena, scratch);
    return rc;
}

/* ---- norm, clip, AdamW on the own slices, allgather -------------------------- */

/* the own slices of the shards that count (the group's norm owner) */
static double zero_grad_sumsq(const pt_train *t)
{
    const struct pt_zero *z = zero_of(t);
    const pt_gpt *m = t->model;
    double s = 0;
    for (int i = 0; i < m->nparams; i++) {
        int64_t a, b;
        if (!z->counted[i] || own_range(z, t, i, &a, &b) == 0) continue;
        const pt_zero_unit *u = &z->units[z->unit_of[i]];
        s += t->ops->sumsq(own_grad(t, u) + (z->poff[i] + (size_t)a - own_lo(u)), (size_t)(b - a), PT_F32);
    }
    return s;
}

static int zero_regather(pt_train *t);

static int zero_update(pt_train *t, float lr, float clip)
{
    struct pt_zero *z = zero_of(t);
    const pt_gpt *m = t->model;
    if (clip != 1.0f)
        for (int k = 0; k < z->nunits; k++) t->ops->scale(own_grad(t, &z->units[k]), clip, z->units[k].s, PT_F32);
    for (int i = 0; i < m->nparams; i++) {
        int64_t a, b;
        if (own_range(z, t, i, &a, &b) == 0) continue;
        const pt_zero_unit *u = &z->units[z->unit_of[i]];
        const size_t x = z->poff[i] + (size_t)a - own_lo(u); /* index in the own slice */
        pt_adamw_update(t->ops, own_param(t, u) + x, z->mixed ? pt_elem(own_work(t, u), x, z->act) : NULL,
                        own_grad(t, u) + x, t->m_memory + u->own + x, t->v_memory + u->own + x, (size_t)(b - a), lr,
                        m->params[i].decay ? t->opt.weight_decay : 0.0f, &t->opt, t->step);
    }
    return zero_regather(t);
}

/* The work copy's own slices from the owned masters (mixed precision;
 * after a checkpoint load wrote the masters), for padding too (zeros). */
static void work_from_master(pt_train *t)
{
    struct pt_zero *z = zero_of(t);
    for (int k = 0; k < z->nunits; k++) {
        pt_zero_unit *u = &z->units[k];
        t->ops->convert(own_work(t, u), z->act, own_param(t, u), PT_F32, u->s);
    }
}

/* the update's allgather, and the state_loaded hook */
static int zero_regather(pt_train *t)
{
    struct pt_zero *z = zero_of(t);
    const pt_dtype at = z->act;
    if (z->stage == 3) { /* gathered piece by piece at the next forward */
        if (z->mixed) work_from_master(t);
        return PT_OK;
    }
    /* stages 1 and 2: the own slices (of the work copy) allgathered into
     * the whole copy; under fp32 the work copy is the master */
    void *scratch = pt_arena_alloc(t->arena, (z->smax ? z->smax : 1) * pt_dtype_size(at));
    if (!scratch)
        return pt_fail(PT_ENOMEM, "out of memory for a ZeRO allgather slice of %zu %s elements", z->smax,
                       pt_dtype_name(at));
    int rc = PT_OK;
    for (int k = 0; k < z->nunits && !rc; k++) {
        const pt_zero_unit *u = &z->units[k];
        if (z->mixed) t->ops->convert(scratch, at, own_param(t, u), PT_F32, u->s);
        else t->ops->copy(scratch, own_param(t, u), u->s, at);
        rc = pt_allgather_t(u->comm, scratch, pt_elem(t->work_memory, u->off, at), u->npad, at);
    }
    pt_arena_free(t->arena, scratch);
    return rc;
}

/* parameter i's own range [lo, hi) (own_range), and pointers at element lo
 * in its unit's own slices (own_param, own_grad, and m, v from u->own) */
static void zero_owned(const pt_train *t, int i, int64_t *lo, int64_t *hi, float **data, float **grad, float **m,
                       float **v)
{
    const struct pt_zero *z = zero_of(t);
    own_range(z, t, i, lo, hi);
    const pt_zero_unit *u = &z->units[z->unit_of[i]];
    const size_t x = z->poff[i] + (size_t)*lo - own_lo(u);
    *data = own_param(t, u) + x;
    *grad = own_grad(t, u) + x;
    *m = t->m_memory + u->own + x;
    *v = t->v_memory + u->own + x;
}

/* The three stages share every hook; zero_create reads the table's
 * zero_stage for what is sharded (1: optimizer state, 2: and gradients,
 * 3: and parameters). */
static double zero_sync_bytes(const pt_train *t)
{
    const struct pt_zero *z = zero_of(t);
    const int ea = (int)t->model->ea, fused = pt_gpt_head_fused(t->model), L = t->model->cfg.n_layer;
    double b = 0;
    for (int k = 0; k < z->nunits; k++) {
        const pt_zero_unit *u = &z->units[k];
        const int N = u->comm->size;
        b += pt_zero_comm_bytes(z->stage, (double)u->npad, N, ea);
        if (z->stage == 3 && fused && u->hi == L) b -= (double)(N - 1) / N * ea * (double)u->npad;
    }
    return b;
}

const pt_train_strategy pt_train_zero_stages[3] = {
    {.name = "zero1", .zero_stage = 1, .create = zero_create, .free_state = zero_free, .zero_grad = zero_zero_grad,
     .sync = zero_sync, .grad_sumsq = zero_grad_sumsq, .update = zero_update, .owned = zero_owned,
     .state_loaded = zero_regather, .sync_bytes = zero_sync_bytes},
    {.name = "zero2", .zero_stage = 2, .create = zero_create, .free_state = zero_free, .zero_grad = zero_zero_grad,
     .sync = zero_sync, .grad_sumsq = zero_grad_sumsq, .update = zero_update, .owned = zero_owned,
     .state_loaded = zero_regather, .sync_bytes = zero_sync_bytes},
    {.name = "zero3", .zero_stage = 3, .create = zero_create, .free_state = zero_free, .zero_grad = zero_zero_grad,
     .sync = zero_sync, .grad_sumsq = zero_grad_sumsq, .update = zero_update, .owned = zero_owned,
     .state_loaded = zero_regather, .sync_bytes = zero_sync_bytes},
};

double pt_zero_state_bytes(int stage, double psi, int N, int act_bytes)
{
    if (N < 1 || (act_bytes != 2 && act_bytes != 4)) return 0;
    if (act_bytes == 2)
        switch (stage) {
        case 0: return 18 * psi;
        case 1: return 6 * psi + 12 * psi / N;
        case 2: return 2 * psi + 16 * psi / N;
        case 3: return 18 * psi / N;
        default: return 0;
        }
    switch (stage) {
    case 0: return 16 * psi;
    case 1: return 8 * psi + 8 * psi / N;
    case 2: return 4 * psi + 12 * psi / N;
    case 3: return 16 * psi / N;
    default: return 0;
    }
}

double pt_zero_comm_bytes(int stage, double n, int N, int act_bytes)
{
    if (N < 1 || stage < 0 || stage > 3 || (act_bytes != 2 && act_bytes != 4)) return 0;
    if (stage == 0) return 2.0 * (N - 1) / N * 4 * n;
    return (double)(N - 1) / N * (4.0 + (stage == 3 ? 2.0 : 1.0) * act_bytes) * n;
}
