/* SPDX-License-Identifier: MIT */
/* GPT-2-style model over a parallel layout (see gpt.h). */
#include "model/gpt.h"
#include "parallel/seq.h"
#include "contract/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The presets live in lib/contract/model.c (libc only, so the SPANK plugin
 * parses --ptrain-model without libptrain); this is their lib/model face. */
const char *pt_gpt_preset_names(void) { return pt_model_preset_names(); }

int pt_gpt_preset(const char *name, pt_gpt_config *cfg)
{
    if (pt_model_preset(name, cfg) == 0) return PT_OK;
    return pt_fail(PT_EINVAL, "unknown model '%s'; valid: %s", name, pt_gpt_preset_names());
}

int pt_gpt_check_tp(const pt_gpt_config *c, int tp)
{
    if (c->n_layer < 1 || c->n_head < 1 || c->n_embd < 1 || c->seq_len < 1 || c->vocab < 2)
        return pt_fail(PT_EINVAL, "model config L=%d H=%d C=%d T=%d V=%d: every size must be >= 1 (V >= 2)",
                       c->n_layer, c->n_head, c->n_embd, c->seq_len, c->vocab);
    if (c->n_embd % c->n_head)
        return pt_fail(PT_EINVAL, "n_embd=%d is not a multiple of n_head=%d", c->n_embd, c->n_head);
    if (c->family != PT_FAMILY_GPT2 && c->family != PT_FAMILY_LLAMA)
        return pt_fail(PT_EINVAL, "model family %d (valid: %d gpt2, %d llama)", c->family, PT_FAMILY_GPT2,
                       PT_FAMILY_LLAMA);
    if (c->family == PT_FAMILY_LLAMA) {
        const int kv = pt_model_kv_heads(c), I = pt_model_ffn(c);
        if (kv < 1 || c->n_head % kv || (c->n_embd / c->n_head) % 2)
            return pt_fail(PT_EINVAL, "llama model H=%d KV=%d C=%d: KV heads must divide the heads and the head "
                           "size C/H must be even (RoPE pairs)", c->n_head, kv, c->n_embd);
        if (tp > 1 && (kv % tp || I % tp)) {
            char valid[128];
            pt_list_divisors(valid, sizeof valid, kv);
            return pt_fail(PT_EINVAL, "tp=%d does not divide the model's %d KV heads and MLP width %d; valid tp "
                           "for this model: the divisors of %d that divide %d (%s)", tp, kv, I, kv, I, valid);
        }
    }
    if (tp < 1 || c->n_head % tp) {
        char valid[128];
        pt_list_divisors(valid, sizeof valid, c->n_head);
        return pt_fail(PT_EINVAL, "tp=%d does not divide n_head=%d; valid tp for this model: %s", tp, c->n_head, valid);
    }
    return PT_OK;
}

int64_t pt_gpt_num_params(const pt_gpt_config *c) { return (int64_t)pt_model_num_params(c); }

double pt_gpt_flops_per_token(const pt_gpt_config *c, int T) { return pt_model_flops_per_token(c, T); }

/* ---- parameters ---------------------------------------------------------- */

void pt_gpt_param_init_full(const pt_param *p, int index, uint64_t seed, float *full)
{
    int64_t n = p->rows * p->cols;
    if (p->init_std == 0) {
        for (int64_t i = 0; i < n; i++) full[i] = p->init_value;
        return;
    }
    pt_rng r;
    pt_rng_seed(&r, seed, (uint64_t)index + 1);
    int64_t ninit = p->init_rows * p->cols;
    for (int64_t i = 0; i < n; i++) full[i] = i < ninit ? (float)(pt_rng_normal(&r) * p->init_std) : 0.0f;
}

typedef struct {
    pt_param *v;
    int n, cap;
} plist;

static pt_param *add_param(plist *l, const char *name, int64_t rows, int64_t cols, pt_pclass cls,
                           int decay, float std, float value)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 64;
        pt_param *nv = realloc(l->v, sizeof(pt_param) * (size_t)l->cap);
        if (!nv) return NULL;
        l->v = nv;
    }
    pt_param *p = &l->v[l->n++];
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "%s", name);
    p->rows = rows;
    p->cols = cols;
    p->cls = cls;
    p->decay = decay;
    p->init_std = std;
    p->init_value = value;
    p->init_rows = rows;
    return p;
}

/* What every plan needs of a model, batch and length: a valid config,
 * 1 <= T <= seq_len, B >= 1, T split evenly over sp; *lo gets the plan's
 * layout. */
static int check_common(const pt_gpt_config *cfg, const pt_plan *p, int B, int T, const pt_layout **lo)
{
    int rc = pt_gpt_check_tp(cfg, 1);
    if (rc) return rc;
    if (B < 1 || T < 1 || T > cfg->seq_len)
        return pt_fail(PT_EINVAL, "batch B=%d, T=%d: need B >= 1 and 1 <= T <= seq_len=%d", B, T, cfg->seq_len);
    if (T % p->sp) {
        char valid[96];
        pt_list_divisors(valid, sizeof valid, T);
        return pt_fail(PT_EINVAL, "sequence length T=%d is not a multiple of sp=%d (valid sp for T=%d: %s)",
                       T, p->sp, T, valid);
    }
    if (cfg->family == PT_FAMILY_LLAMA && p->mode != PT_MODE_OFF && p->mode != PT_MODE_1D)
        return pt_fail(PT_EUNSUPP, "mode %s: the llama family runs on the %s layouts only so far",
                       pt_mode_name(p->mode), PT_LLAMA_MODE_NAMES(" and "));
    if (cfg->family == PT_FAMILY_LLAMA && p->tp > 1 && (rc = pt_gpt_check_tp(cfg, p->tp))) return rc; /* 1d */
    *lo = pt_layout_for(p->mode);
    return *lo ? PT_OK : PT_EUNSUPP;
}

int pt_gpt_check_plan(const pt_gpt_config *cfg, const pt_plan *p, int B, int T)
{
    const pt_layout *lo;
    int rc = check_common(cfg, p, B, T, &lo);
    if (rc) return rc;
    /* the layout's geometry on a grid that is not built: rank 0's view (the
     * sizes are the same on every rank) */
    pt_pctx c;
    memset(&c, 0, sizeof c);
    c.plan = *p;
    if (pt_plan_tp_dims(p, c.tp_dims)) return PT_EINVAL;
    pt_geom g;
    return lo->geometry(&c, B, T / p->sp, cfg->n_embd, cfg->n_head, cfg->vocab, &g);
}

/* Register an arena block of the model's activations (freed by pt_gpt_free). */
static void *track(pt_gpt *m, size_t bytes, int *rc)
{
    if (*rc) return NULL;
    if (m->nallocs == m->cap_allocs) {
        int cap = m->cap_allocs ? 2 * m->cap_allocs : 64;
        void **nv = realloc(m->allocs, sizeof(void *) * (size_t)cap);
        if (!nv) { *rc = PT_ENOMEM; return NULL; }
        m->allocs = nv;
        m->cap_allocs = cap;
    }
    void *p = pt_arena_alloc(m->arena, bytes);
    if (!p) { *rc = PT_ENOMEM; return NULL; }
    m->allocs[m->nallocs++] = p;
    return p;
}

static float *falloc(pt_gpt *m, size_t n, int *rc) { return track(m, n * sizeof(float), rc); }
/* n activation elements (ACT, m->ea bytes each) */
static void *aalloc(pt_gpt *m, size_t n, int *rc) { return track(m, n * m->ea, rc); }

/* Does the stage run block l? */
static int stage_has_block(const pt_gpt_stage *st, int l)
{
    for (int c = 0; c < st->nchunks; c++)
        if (l >= st->l0[c] && l < st->l1[c]) return 1;
    return 0;
}

/* Whole-model parameter index (pt_model_param_info): block l's j-th
 * parameter, or with l = L the j-th after the blocks. */
#define PIDX_BLOCK(l, j) (m->npre + m->npb * (l) + (j))

static int check_stage(const pt_gpt_stage *st, int L)
{
    if (st->nchunks < 1 || st->nchunks > PT_GPT_MAX_CHUNKS)
        return pt_fail(PT_EINVAL, "stage with %d model chunks (valid: 1..%d)", st->nchunks, PT_GPT_MAX_CHUNKS);
    for (int c = 0; c < st->nchunks; c++)
        if (st->l0[c] < 0 || st->l1[c] < st->l0[c] || st->l1[c] > L)
            return pt_fail(PT_EINVAL, "stage chunk %d: block range [%d, %d) is not inside [0, %d)", c, st->l0[c],
                           st->l1[c], L);
    if (st->nslots < 1 || st->microbatches < 1)
        return pt_fail(PT_EINVAL, "stage with %d activation slots and %d microbatches (valid: >= 1 each)",
                       st->nslots, st->microbatches);
    return PT_OK;
}

/* Entry i of the model's parameter list (pt_model_param_info) as a
 * pt_param: its class for the layout, decay and initial value.  GPT-2
 * (Radford et al. 2019): weights normal(0, 0.02), the residual projections
 * 0.02/sqrt(2L), LayerNorm 1/0, biases 0.  Llama (Hugging Face's
 * LlamaPreTrainedModel._init_weights): every weight normal(0, 0.02),
 * RMSNorm 1, biases 0.  wte and lm_head get the layout's padded
 * vocabulary rows (zero past V).  NULL when out of memory. */
static pt_param *add_model_param(plist *pl, const pt_gpt_config *cfg, int i, const pt_geom *g)
{
    static const pt_pclass gpt2_cls[] = {
        [PT_ROLE_WTE] = PT_P_WTE, [PT_ROLE_WPE] = PT_P_WPE, [PT_ROLE_NORM_W] = PT_P_NORM,
        [PT_ROLE_NORM_B] = PT_P_NORM, [PT_ROLE_QKV_W] = PT_P_QKV_W, [PT_ROLE_QKV_B] = PT_P_QKV_B,
        [PT_ROLE_Q_W] = PT_P_FC_W, [PT_ROLE_Q_B] = PT_P_FC_B, [PT_ROLE_KV_W] = PT_P_COL2_W,
        [PT_ROLE_KV_B] = PT_P_COL2_B, [PT_ROLE_PROJ_W] = PT_P_PROJ_W, [PT_ROLE_PROJ_B] = PT_P_PROJ_B,
        [PT_ROLE_FC_W] = PT_P_FC_W, [PT_ROLE_FC_B] = PT_P_FC_B, [PT_ROLE_FCPROJ_W] = PT_P_FCPROJ_W,
        [PT_ROLE_FCPROJ_B] = PT_P_FCPROJ_B, [PT_ROLE_HEAD] = PT_P_WTE,
    };
    pt_param_info pi;
    pt_model_param_info(cfg, i, &pi);
    const int llama = cfg->family == PT_FAMILY_LLAMA;
    pt_pclass cls = gpt2_cls[pi.role];
    if (llama && pi.role == PT_ROLE_FC_W) cls = PT_P_COL2_W; /* gate|up */
    const int vocab = pi.role == PT_ROLE_WTE || pi.role == PT_ROLE_HEAD;
    const int is_w = pi.cols > 1; /* matrices decay, vectors do not */
    float sd = 0.02f, val = 0;
    if (!is_w) sd = 0, val = pi.role == PT_ROLE_NORM_W ? 1.0f : 0.0f;
    else if (!llama && (pi.role == PT_ROLE_PROJ_W || pi.role == PT_ROLE_FCPROJ_W))
        sd = 0.02f / sqrtf(2.0f * (float)cfg->n_layer);
    pt_param *p = add_param(pl, pi.name, vocab ? g->Vp : pi.rows, pi.cols, cls, is_w, sd, val);
    if (p && vocab) p->init_rows = pi.rows;
    return p;
}

int pt_gpt_create(pt_gpt *m, const pt_gpt_config *cfg, pt_pctx *ctx, const pt_backend *be,
                  pt_arena *arena, int B, int T, uint64_t seed)
{
    pt_gpt_stage st = {.nchunks = 1, .l0 = {0}, .l1 = {cfg->n_layer}, .first = 1, .last = 1, .nslots = 1,
                       .microbatches = 1};
    return pt_gpt_create_stage(m, cfg, ctx, be, arena, B, T, seed, &st);
}

/* floats of a block's attention row log-sum-exp [Bl, NHl, Tl] */
static size_t lse_floats(const pt_gpt *m) { return (size_t)m->g.Bl * m->g.NHl * m->Tl; }

size_t pt_gpt_block_act_bytes(const pt_gpt *m, int rc)
{
    const pt_geom *g = &m->g;
    const size_t N = (size_t)g->Bl * m->Tl, Cr = (size_t)g->Cr, Cl = (size_t)g->Cl, Fl = (size_t)g->Fl, e = m->ea;
    if (rc == PT_RECOMPUTE_BLOCK) return e * N * Cr; /* the block output (next block's input) */
    if (m->llama) {
        /* ln1, ln2, res2, res3 [N, Cr]; q|k|v [N, Cl + 2 KVl]; gate|up [N, 2 Il] and SwiGLU [N, Il]
         * (ACT); 2 fp32 rstd [N] */
        const size_t keptl = e * (4 * N * Cr + N * (size_t)m->QKVl + 3 * N * (size_t)m->Il) + 4 * (2 * N);
        return rc == PT_RECOMPUTE_ATTENTION ? keptl : keptl + e * N * Cl + 4 * lse_floats(m);
    }
    /* ln1, ln2, res2, res3 [N, Cr]; qkv [N, 3Cl]; fch, gelu [N, Fl] (ACT); 4 fp32 row statistics [N] */
    const size_t kept = e * (4 * N * Cr + 3 * N * Cl + 2 * N * Fl) + 4 * (4 * N);
    /* attention: the output [N, Cl] (ACT) and lse (fp32), which recompute=attention re-creates */
    return rc == PT_RECOMPUTE_ATTENTION ? kept : kept + e * N * Cl + 4 * lse_floats(m);
}

/* Llama's RoPE table [T, HS/2, 2] (cos, sin of every position the model
 * sees, pt_rope_table: theta and Llama 3.1's scaling from the config),
 * computed on the host and copied into an arena block. */
static float *rope_table(pt_gpt *m, int *rc)
{
    const size_t n = (size_t)m->T * (size_t)m->HS;
    float *host = malloc(n * sizeof(float));
    float *cs = falloc(m, n, rc);
    if (!host || !cs) {
        free(host);
        if (!*rc) *rc = PT_ENOMEM;
        return NULL;
    }
    const pt_gpt_config *c = &m->cfg;
    *rc = pt_rope_table(host, m->T, m->HS, pt_model_rope_theta(c), c->rope_factor, c->rope_low_freq,
                        c->rope_high_freq, c->rope_orig_ctx);
    if (!*rc) m->ops->copy2d(cs, 0, host, 0, n * sizeof(float), 1);
    free(host);
    return *rc ? NULL : cs;
}

/* Activations of block l in slot layer ly: own buffers, or the shared
 * scratch set sc for what recompute re-creates in the backward. */
static void alloc_block(pt_gpt *m, pt_gpt_layer *ly, const pt_gpt_layer *sc, int mode, int *rc)
{
    const pt_geom *g = &m->g;
    const size_t N = (size_t)g->Bl * m->Tl, Cr = (size_t)g->Cr, Cl = (size_t)g->Cl;
    /* fc's output and the activation's: GELU [N, Fl] each; SwiGLU gate|up [N, 2 Il] -> [N, Il] */
    const size_t Fl = m->llama ? 2 * (size_t)m->Il : (size_t)g->Fl, Fa = m->llama ? (size_t)m->Il : Fl;
    const int means = !m->llama; /* LayerNorm keeps row means, RMSNorm only rstd */
    ly->res3 = aalloc(m, N * Cr, rc);
    if (mode == PT_RECOMPUTE_BLOCK) {
        ly->ln1 = sc->ln1; ly->ln1_mean = sc->ln1_mean; ly->ln1_rstd = sc->ln1_rstd; ly->qkv_out = sc->qkv_out;
        ly->lse = sc->lse; ly->atty = sc->atty; ly->res2 = sc->res2; ly->ln2 = sc->ln2; ly->ln2_mean = sc->ln2_mean;
        ly->ln2_rstd = sc->ln2_rstd; ly->fch = sc->fch; ly->fch_gelu = sc->fch_gelu;
        return;
    }
    ly->ln1 = aalloc(m, N * Cr, rc);
    ly->ln1_mean = means ? falloc(m, N, rc) : NULL;
    ly->ln1_rstd = falloc(m, N, rc);
    ly->qkv_out = aalloc(m, N * (size_t)m->QKVl, rc);
    ly->lse = mode == PT_RECOMPUTE_ATTENTION ? sc->lse : falloc(m, lse_floats(m), rc);
    ly->atty = mode == PT_RECOMPUTE_ATTENTION ? sc->atty : aalloc(m, N * Cl, rc);
    ly->res2 = aalloc(m, N * Cr, rc);
    ly->ln2 = aalloc(m, N * Cr, rc);
    ly->ln2_mean = means ? falloc(m, N, rc) : NULL;
    ly->ln2_rstd = falloc(m, N, rc);
    ly->fch = aalloc(m, N * Fl, rc);
    ly->fch_gelu = aalloc(m, N * Fa, rc);
}

int pt_gpt_create_stage(pt_gpt *m, const pt_gpt_config *cfg, pt_pctx *ctx, const pt_backend *be,
                        pt_arena *arena, int B, int T, uint64_t seed, const pt_gpt_stage *st)
{
    memset(m, 0, sizeof *m);
    const pt_layout *lo;
    int rc = check_common(cfg, &ctx->plan, B, T, &lo);
    if (rc) return rc;
    if ((rc = check_stage(st, cfg->n_layer))) return rc;
    const int mode = ctx->plan.recompute;
    if (mode < PT_RECOMPUTE_NONE || mode > PT_RECOMPUTE_ATTENTION)
        return pt_fail(PT_EINVAL, "recompute mode %d (valid: 0 none, 1 block, 2 attention)", mode);
    rc = lo->geometry(ctx, B, T / ctx->plan.sp, cfg->n_embd, cfg->n_head, cfg->vocab, &m->g);
    if (rc) return rc;
    const pt_device bdev = be->mem ? be->mem->device : PT_DEV_CPU;
    if (pt_arena_device(arena) != bdev)
        return pt_fail(PT_EINVAL, "arena holds %s memory but backend '%s' computes on %s memory "
                       "(pt_arena_init with the backend's mem)", pt_device_name(pt_arena_device(arena)), be->name,
                       pt_device_name(bdev));
    const pt_dtype act = ctx->plan.precision == PT_PREC_BF16 ? PT_BF16 : PT_F32;
    const pt_ops *ops = pt_backend_ops(be, act);
    if (!ops) return PT_EUNSUPP;
    m->layout = lo;
    m->cfg = *cfg;
    m->ctx = ctx;
    m->be = be;
    m->ops = ops;
    m->act = act;
    m->ea = pt_dtype_size(act);
    m->arena = arena;
    m->B = B;
    m->T = T;
    m->Tl = T / ctx->plan.sp;
    m->t0 = ctx->sp_rank * m->Tl;
    m->stage = *st;
    const int C = cfg->n_embd, L = cfg->n_layer;
    m->C = C;
    m->HS = C / cfg->n_head;
    const pt_geom *g = &m->g;

    m->llama = cfg->family == PT_FAMILY_LLAMA;
    const int tp = ctx->plan.tp;
    m->KVl = m->llama ? pt_model_kv_heads(cfg) * m->HS / tp : g->Cl;
    m->Il = m->llama ? pt_model_ffn(cfg) / tp : g->Fl;
    m->QKVl = g->Cl + 2 * m->KVl;
    m->npre = pt_model_pre_params(cfg);
    m->npb = pt_model_block_params(cfg);
    m->nall = pt_model_param_count(cfg);

    /* parameter list of the whole model (pt_model_param_info); the order
     * fixes each parameter's RNG stream (its index), then only the stage's
     * are kept */
    plist pl = {0};
    for (int i = 0; i < m->nall; i++)
        if (!add_model_param(&pl, cfg, i, g)) break;
    m->pidx = malloc(sizeof(int) * (size_t)m->nall);
    if (pl.n < m->nall || !m->pidx) {
        free(pl.v);
        free(m->pidx);
        m->pidx = NULL;
        return pt_fail(PT_ENOMEM, "out of memory building the parameter list");
    }
    const int untied = pt_model_untied(cfg);
    const int tied = ctx->plan.pp > 1 && st->first != st->last && !untied;
    int n = 0;
    size_t total = 0;
    for (int i = 0; i < m->nall; i++) {
        const int blk = i < m->npre ? -1 : i < PIDX_BLOCK(L, 0) ? (i - m->npre) / m->npb : L;
        const int keep = i == 0 ? (st->first || (st->last && !untied))
                       : blk < 0 ? st->first
                       : blk < L ? stage_has_block(st, blk)
                       : st->last;
        m->pidx[i] = keep ? n : -1;
        if (!keep) continue;
        pt_param *p = &pl.v[n];
        *p = pl.v[i];
        p->index = i;
        lo->param(ctx, p->cls, p->rows, p->cols, &p->shard);
        if (i == 0 && tied) {
            p->tied = &ctx->embed;
            if (!st->first) p->shard.norm_owner = 0; /* counted once, on the first stage */
        }
        total += (size_t)p->shard.numel;
        n++;
    }
    m->params = pl.v;
    m->nparams = n;
    m->nfloats = total;
    m->seed = seed;

    /* activations: per slot, the stage's blocks (all saved, or what the
     * recompute mode keeps) and the embedding output; one shared scratch
     * set for recompute; the head side and the backward scratch once
     * (parameters and gradients live in the registry, lib/train) */
    m->nslots = st->nslots;
    m->slots = calloc((size_t)m->nslots, sizeof *m->slots);
    if (!m->slots) { pt_gpt_free(m); return pt_fail(PT_ENOMEM, "out of memory"); }
    const size_t N = (size_t)g->Bl * m->Tl, Cr = (size_t)g->Cr, Cl = (size_t)g->Cl, Fl = (size_t)g->Fl;
    pt_gpt_layer sc = {0}; /* recompute's shared scratch */
    if (mode == PT_RECOMPUTE_BLOCK)
        alloc_block(m, &sc, NULL, PT_RECOMPUTE_NONE, &rc);
    else if (mode == PT_RECOMPUTE_ATTENTION) {
        sc.atty = aalloc(m, N * Cl, &rc);
        sc.lse = falloc(m, lse_floats(m), &rc);
    }
    const size_t Nall = (size_t)B * m->Tl;
    for (int k = 0; !rc && k < m->nslots; k++) {
        pt_gpt_slot *s = &m->slots[k];
        s->layers = calloc((size_t)L, sizeof *s->layers);
        if (!s->layers) { rc = PT_ENOMEM; break; }
        for (int l = 0; l < L; l++)
            if (stage_has_block(st, l)) alloc_block(m, &s->layers[l], &sc, mode, &rc);
        s->tok = track(m, Nall * sizeof(int32_t), &rc);
        s->tgt = track(m, Nall * sizeof(int32_t), &rc);
        if (st->first) s->enc = aalloc(m, N * Cr, &rc);
    }
    /* llama: the q and k|v GEMMs write [N, Cl] and [N, 2 KVl] temporaries (GPT-2: none) */
    const size_t KV2 = m->llama ? 2 * (size_t)m->KVl : 0, Cmax = Cr > Cl ? (Cr > KV2 ? Cr : KV2) : (Cl > KV2 ? Cl : KV2);
    if (st->last) {
        m->lnf = aalloc(m, N * Cr, &rc);
        m->lnf_mean = falloc(m, N, &rc);
        m->lnf_rstd = falloc(m, N, &rc);
        m->losses = falloc(m, N, &rc);
        m->stats = falloc(m, 3 * N, &rc);
        m->dloss = falloc(m, N, &rc);
    }
    m->dres = aalloc(m, N * Cr, &rc);
    m->dtmp = aalloc(m, N * Cmax, &rc);
    m->dqkv = aalloc(m, N * (size_t)m->QKVl, &rc);
    m->datty = aalloc(m, N * (Cl > KV2 ? Cl : KV2), &rc);
    m->dfch = aalloc(m, N * (m->llama ? 3 * (size_t)m->Il : Fl), &rc); /* llama: d gate|up, d swiglu */
    if (m->llama) {
        m->dtmp2 = aalloc(m, N * Cr, &rc);
        m->rope_cs = rc ? NULL : rope_table(m, &rc);
    }
    if (rc) {
        pt_gpt_free(m);
        return pt_fail(PT_ENOMEM, "out of memory allocating activations for B=%d T=%d (%s)", B, T, pt_errmsg());
    }
    return pt_gpt_use_slot(m, 0);
}

int pt_gpt_use_slot(pt_gpt *m, int k)
{
    if (k < 0 || k >= m->nslots)
        return pt_fail(PT_EINVAL, "activation slot %d outside 0..%d", k, m->nslots - 1);
    if (m->layers) m->slots[m->slot].head_in = m->head_in;
    pt_gpt_slot *s = &m->slots[k];
    m->slot = k;
    m->layers = s->layers;
    m->tok = s->tok;
    m->tgt = s->tgt;
    m->enc = s->enc;
    m->head_in = s->head_in;
    return PT_OK;
}

#define DATA(i) (m->pidx[i] < 0 ? NULL : (const void *)m->params[m->pidx[i]].work)
#define GRAD(i) (m->pidx[i] < 0 ? NULL : m->params[m->pidx[i]].grad)
/* a linear's views: weight at block index jw, bias at jb (-1: none) */
static pt_linear lin_view(const pt_gpt *m, int l, pt_linear_role role, int jw, int jb, int in, int out, int inl,
                          int outl)
{
    return (pt_linear){role, in, out, inl, outl, DATA(PIDX_BLOCK(l, jw)), jb < 0 ? NULL : DATA(PIDX_BLOCK(l, jb)),
                       GRAD(PIDX_BLOCK(l, jw)), jb < 0 ? NULL : GRAD(PIDX_BLOCK(l, jb))};
}

/* Block l's views, GPT-2 (list order: ln1 w b, qkv w b, proj w b, ln2 w b, fc w b, fcproj w b) */
static void bind_gpt2_block(pt_gpt *m, pt_gpt_layer *ly, int l)
{
    const pt_geom *g = &m->g;
    const int C = m->C;
    ly->ln1w = DATA(PIDX_BLOCK(l, 0)); ly->dln1w = GRAD(PIDX_BLOCK(l, 0));
    ly->ln1b = DATA(PIDX_BLOCK(l, 1)); ly->dln1b = GRAD(PIDX_BLOCK(l, 1));
    ly->qkv = lin_view(m, l, PT_LINEAR_COLUMN_QKV, 2, 3, C, 3 * C, g->Cr, 3 * g->Cl);
    ly->proj = lin_view(m, l, PT_LINEAR_ROW, 4, 5, C, C, g->Cl, g->Cr);
    ly->ln2w = DATA(PIDX_BLOCK(l, 6)); ly->dln2w = GRAD(PIDX_BLOCK(l, 6));
    ly->ln2b = DATA(PIDX_BLOCK(l, 7)); ly->dln2b = GRAD(PIDX_BLOCK(l, 7));
    ly->fc = lin_view(m, l, PT_LINEAR_COLUMN, 8, 9, C, 4 * C, g->Cr, g->Fl);
    ly->fcproj = lin_view(m, l, PT_LINEAR_ROW, 10, 11, 4 * C, C, g->Fl, g->Cr);
}

/* Block l's views, Llama (list order: ln1.w, q.w, (q.b), kv.w, (kv.b), proj.w, ln2.w, fc.w, fcproj.w) */
static void bind_llama_block(pt_gpt *m, pt_gpt_layer *ly, int l)
{
    const pt_geom *g = &m->g;
    const int C = m->C, b = m->cfg.qkv_bias ? 1 : 0, KVC = pt_model_kv_heads(&m->cfg) * m->HS;
    const int I = pt_model_ffn(&m->cfg), jkv = 2 + b, jp = 3 + 2 * b;
    ly->ln1w = DATA(PIDX_BLOCK(l, 0)); ly->dln1w = GRAD(PIDX_BLOCK(l, 0));
    ly->ln1b = NULL; ly->dln1b = NULL;
    ly->q = lin_view(m, l, PT_LINEAR_COLUMN, 1, b ? 2 : -1, C, C, g->Cr, g->Cl);
    ly->kv = lin_view(m, l, PT_LINEAR_COLUMN, jkv, b ? jkv + 1 : -1, C, 2 * KVC, g->Cr, 2 * m->KVl);
    ly->proj = lin_view(m, l, PT_LINEAR_ROW, jp, -1, C, C, g->Cl, g->Cr);
    ly->ln2w = DATA(PIDX_BLOCK(l, jp + 1)); ly->dln2w = GRAD(PIDX_BLOCK(l, jp + 1));
    ly->ln2b = NULL; ly->dln2b = NULL;
    ly->fc = lin_view(m, l, PT_LINEAR_COLUMN, jp + 2, -1, C, 2 * I, g->Cr, 2 * m->Il);
    ly->fcproj = lin_view(m, l, PT_LINEAR_ROW, jp + 3, -1, I, C, m->Il, g->Cr);
}

int pt_gpt_bind_views(pt_gpt *m)
{
    const int L = m->cfg.n_layer;
    m->wte = DATA(0); m->dwte = GRAD(0);
    m->wpe = m->llama ? NULL : DATA(1); m->dwpe = m->llama ? NULL : GRAD(1);
    m->lnfw = DATA(PIDX_BLOCK(L, 0)); m->dlnfw = GRAD(PIDX_BLOCK(L, 0));
    m->lnfb = m->llama ? NULL : DATA(PIDX_BLOCK(L, 1)); m->dlnfb = m->llama ? NULL : GRAD(PIDX_BLOCK(L, 1));
    const int untied = pt_model_untied(&m->cfg);
    m->whead = untied ? DATA(PIDX_BLOCK(L, 1)) : m->wte;
    m->dwhead = untied ? GRAD(PIDX_BLOCK(L, 1)) : m->dwte;
    for (int k = 0; k < m->nslots; k++)
        for (int l = 0; l < L; l++) {
            if (m->pidx[PIDX_BLOCK(l, 0)] < 0) continue;
            pt_gpt_layer *ly = &m->slots[k].layers[l];
            if (m->llama) bind_llama_block(m, ly, l);
            else bind_gpt2_block(m, ly, l);
        }
    m->bound = 1;
    return PT_OK;
}
#undef DATA
#undef GRAD

int pt_gpt_bind_params(pt_gpt *m)
{
    for (int i = 0; i < m->nparams; i++)
        if (!m->params[i].data || !m->params[i].grad || !m->params[i].work)
            return pt_fail(PT_EINVAL, "parameter %s has no storage: bind every parameter's data, work and grad first",
                           m->params[i].name);
    int rc = pt_gpt_bind_views(m);
    if (rc) return rc;
    /* initial values: each full tensor from its own RNG stream (host), then
     * this rank's shard copied into the parameter */
    float *full = NULL;
    size_t full_cap = 0;
    for (int i = 0; i < m->nparams; i++) {
        pt_param *p = &m->params[i];
        size_t need = (size_t)(p->rows * p->cols);
        if (need > full_cap) {
            free(full);
            full = malloc(need * sizeof(float));
            full_cap = need;
            if (!full) return pt_fail(PT_ENOMEM, "out of memory initialising %s (%zu bytes)", p->name, need * sizeof(float));
        }
        pt_gpt_param_init_full(p, p->index, m->seed, full);
        m->layout->param_slice(m->ops, m->ctx, p->cls, full, p->data, p->rows, p->cols);
        if (p->work != (void *)p->data) m->ops->convert(p->work, m->act, p->data, PT_F32, (size_t)p->shard.numel);
    }
    free(full);
    return PT_OK;
}

void pt_gpt_free(pt_gpt *m)
{
    if (!m->arena) return;
    for (int i = m->nallocs - 1; i >= 0; i--) pt_arena_free(m->arena, m->allocs[i]);
    free(m->allocs);
    if (m->slots)
        for (int k = 0; k < m->nslots; k++) free(m->slots[k].layers);
    free(m->slots);
    free(m->pidx);
    free(m->params);
    memset(m, 0, sizeof *m);
}

/* ---- forward / backward ------------------------------------------------------ */

#define TRY(x) do { int rc_ = (x); if (rc_) return rc_; } while (0)

static int hook(pt_gpt *m, int piece, int phase)
{
    return m->param_hook ? m->param_hook(m->param_hook_arg, m, piece, phase) : PT_OK;
}

/* The block's attention on its qkv: flash attention (ops.h) over the local
 * sequence, or round the sp ring (seq.h); keeps atty and lse. */
static int attn_fwd(pt_gpt *m, pt_gpt_layer *ly)
{
    const pt_geom *g = &m->g;
    if (m->ctx->sp.size > 1)
        return pt_ring_attention_fwd(&m->ctx->sp, m->arena, m->ops, ly->atty, ly->lse, ly->qkv_out, g->Bl, m->Tl, g->NHl, m->HS,
                                     m->KVl / m->HS);
    /* q|k|v packed per row: k at Cl, v at Cl + KVl (GPT-2: KVl = Cl) */
    const size_t Cl = (size_t)g->Cl, KVl = (size_t)m->KVl;
    const pt_attn_dims d = {g->Bl, g->NHl, m->HS, m->Tl, m->Tl, 0, 0, m->QKVl, m->QKVl, .NKV = m->KVl / m->HS};
    m->ops->attention_fwd(ly->atty, ly->lse, ly->qkv_out, pt_elem(ly->qkv_out, Cl, m->act),
                          pt_elem(ly->qkv_out, Cl + KVl, m->act), &d, 0);
    return PT_OK;
}

static int attn_bwd(pt_gpt *m, pt_gpt_layer *ly)
{
    const pt_geom *g = &m->g;
    if (m->ctx->sp.size > 1)
        return pt_ring_attention_bwd(&m->ctx->sp, m->arena, m->ops, m->dqkv, m->datty, ly->qkv_out, ly->atty, ly->lse,
                                     g->Bl, m->Tl, g->NHl, m->HS, m->KVl / m->HS);
    const size_t Cl = (size_t)g->Cl, KVl = (size_t)m->KVl;
    const pt_dtype t = m->act;
    const pt_attn_dims d = {g->Bl, g->NHl, m->HS, m->Tl, m->Tl, 0, 0, m->QKVl, m->QKVl, .NKV = m->KVl / m->HS};
    m->ops->attention_bwd(m->dqkv, pt_elem(m->dqkv, Cl, t), pt_elem(m->dqkv, Cl + KVl, t), m->datty, ly->qkv_out,
                          pt_elem(ly->qkv_out, Cl, t), pt_elem(ly->qkv_out, Cl + KVl, t), ly->atty, ly->lse, &d);
    return PT_OK;
}

/* The block's norm: LayerNorm (GPT-2, mean and rstd kept) or RMSNorm
 * (Llama, rstd kept; mean unused), over the layout's norm group. */
static int norm_fwd(pt_gpt *m, void *out, float *mean, float *rstd, const void *x, const void *w, const void *b)
{
    const pt_geom *g = &m->g;
    const int N = g->Bl * m->Tl;
    if (m->llama)
        return pt_rmsnorm_fwd(g->norm, m->ops, m->arena, out, rstd, x, w, N, g->Cr, m->C,
                              pt_model_norm_eps(&m->cfg));
    return pt_layernorm_fwd(g->norm, m->ops, m->arena, out, mean, rstd, x, w, b, N, g->Cr, m->C);
}

/* dx += d norm(x) / dx applied to dy; dw (and db) accumulate. */
static int norm_bwd(pt_gpt *m, void *dx, float *dw, float *db, const void *dy, const void *x, const void *w,
                    const float *mean, const float *rstd)
{
    const pt_geom *g = &m->g;
    const int N = g->Bl * m->Tl;
    if (m->llama) return pt_rmsnorm_bwd(g->norm, m->ops, m->arena, dx, dw, dy, x, w, rstd, N, g->Cr, m->C);
    return pt_layernorm_bwd(g->norm, m->ops, m->arena, dx, dw, db, dy, x, w, mean, rstd, N, g->Cr, m->C);
}

/* RoPE on the q and k columns of packed rows qkv [N, QKVl] (forward), or
 * its transpose on their gradients (dir 0): positions t0 .. t0+Tl-1. */
static void rope(pt_gpt *m, void *qkv, int fwd)
{
    const pt_geom *g = &m->g;
    void *k = pt_elem(qkv, (size_t)g->Cl, m->act);
    if (fwd) {
        m->ops->rope_fwd(qkv, m->rope_cs, g->Bl, m->Tl, m->t0, g->NHl, m->HS, m->QKVl);
        m->ops->rope_fwd(k, m->rope_cs, g->Bl, m->Tl, m->t0, m->KVl / m->HS, m->HS, m->QKVl);
    } else {
        m->ops->rope_bwd(qkv, m->rope_cs, g->Bl, m->Tl, m->t0, g->NHl, m->HS, m->QKVl);
        m->ops->rope_bwd(k, m->rope_cs, g->Bl, m->Tl, m->t0, m->KVl / m->HS, m->HS, m->QKVl);
    }
}

static int check_bound(const pt_gpt *m)
{
    return m->bound ? PT_OK
                    : pt_fail(PT_EINVAL, "model parameters are not bound: create a pt_train (lib/train) or call "
                                         "pt_gpt_bind_params first");
}

static int check_range(const pt_gpt *m, int l0, int l1, const char *what)
{
    if (l0 < 0 || l1 < l0 || l1 > m->cfg.n_layer)
        return pt_fail(PT_EINVAL, "%s: block range [%d, %d) is not inside [0, %d)", what, l0, l1, m->cfg.n_layer);
    for (int l = l0; l < l1; l++)
        if (!stage_has_block(&m->stage, l))
            return pt_fail(PT_EINVAL, "%s: block %d is not on this pipeline stage", what, l);
    return PT_OK;
}

static int check_end(const pt_gpt *m, int have, const char *what)
{
    return have ? PT_OK : pt_fail(PT_EINVAL, "%s: this pipeline stage does not hold it", what);
}

int pt_gpt_set_batch(pt_gpt *m, const int32_t *inputs, const int32_t *targets)
{
    const int B = m->B, T = m->T, Tl = m->Tl, V = m->cfg.vocab;
    for (int i = 0; i < B * T; i++) { /* host-side validation of the caller's host token ids */
        if (inputs[i] < 0 || inputs[i] >= V || targets[i] < 0 || targets[i] >= V)
            return pt_fail(PT_EINVAL, "token id %d at position %d is outside the vocabulary 0..%d",
                           (inputs[i] < 0 || inputs[i] >= V) ? inputs[i] : targets[i], i, V - 1);
    }
    /* this rank's positions t0 .. t0+Tl-1 of every sequence */
    const size_t row = sizeof(int32_t) * (size_t)Tl, pitch = sizeof(int32_t) * (size_t)T;
    m->ops->copy2d(m->tok, row, inputs + m->t0, pitch, row, (size_t)B);
    m->ops->copy2d(m->tgt, row, targets + m->t0, pitch, row, (size_t)B);
    return PT_OK;
}

int pt_gpt_embed_forward(pt_gpt *m, void **x_out)
{
    TRY(check_bound(m));
    TRY(check_end(m, m->stage.first, "embedding forward"));
    const pt_geom *g = &m->g;
    const pt_lenv e = {m->ctx, m->ops, m->arena};
    TRY(hook(m, -1, PT_HOOK_FWD_PRE));
    TRY(m->layout->embed_fwd(&e, g, m->enc, m->tok, m->wte));
    if (!m->llama) /* Llama's positions enter through RoPE */
        m->ops->posemb_fwd(m->enc, pt_elem(m->wpe, (size_t)m->t0 * g->Cr, m->act), g->Bl, m->Tl, g->Cr);
    *x_out = m->enc;
    return hook(m, -1, PT_HOOK_FWD_POST);
}

/* Llama block l's forward on x (kept as ly->in); output in ly->res3:
 *   h = x + proj(attn(rope(q(n1)), rope(k(n1)), v(n1))), n1 = rmsnorm(x)
 *   out = h + down(silu(gate(n2)) * up(n2)),           n2 = rmsnorm(h)
 * (HF LlamaDecoderLayer).  q and k|v are two column linears whose outputs
 * are packed into the rows of qkv_out, so attention, recompute and the sp
 * ring read one buffer as for GPT-2. */
static int llama_block_fwd(pt_gpt *m, int l, const void *x)
{
    const pt_geom *g = &m->g;
    const int Cr = g->Cr, N = g->Bl * m->Tl;
    const size_t ea = m->ea, Cl = (size_t)g->Cl, KV2 = 2 * (size_t)m->KVl, ld = (size_t)m->QKVl * ea;
    const pt_ops *ops = m->ops;
    const pt_layout *lo = m->layout;
    const pt_lenv e = {m->ctx, ops, m->arena};
    pt_gpt_layer *ly = &m->layers[l];
    ly->in = x;
    TRY(norm_fwd(m, ly->ln1, ly->ln1_mean, ly->ln1_rstd, x, ly->ln1w, ly->ln1b));
    TRY(lo->linear_fwd(&e, &ly->q, m->dtmp, NULL, ly->ln1, N, PT_EPI_DEFAULT));
    ops->copy2d(ly->qkv_out, ld, m->dtmp, Cl * ea, Cl * ea, (size_t)N);
    TRY(lo->linear_fwd(&e, &ly->kv, m->dtmp, NULL, ly->ln1, N, PT_EPI_DEFAULT));
    ops->copy2d(pt_elem(ly->qkv_out, Cl, m->act), ld, m->dtmp, KV2 * ea, KV2 * ea, (size_t)N);
    rope(m, ly->qkv_out, 1);
    TRY(attn_fwd(m, ly));
    TRY(lo->linear_fwd(&e, &ly->proj, m->dtmp, NULL, ly->atty, N, PT_EPI_DEFAULT));
    ops->add_fwd(ly->res2, x, m->dtmp, (size_t)N * Cr);
    TRY(norm_fwd(m, ly->ln2, ly->ln2_mean, ly->ln2_rstd, ly->res2, ly->ln2w, ly->ln2b));
    TRY(lo->linear_fwd(&e, &ly->fc, ly->fch, NULL, ly->ln2, N, PT_EPI_DEFAULT));
    ops->swiglu_fwd(ly->fch_gelu, ly->fch, N, m->Il);
    TRY(lo->linear_fwd(&e, &ly->fcproj, m->dtmp, NULL, ly->fch_gelu, N, PT_EPI_DEFAULT));
    ops->add_fwd(ly->res3, ly->res2, m->dtmp, (size_t)N * Cr);
    return PT_OK;
}

/* Block l's forward on x (kept as ly->in); output in ly->res3. */
static int block_fwd(pt_gpt *m, int l, const void *x)
{
    if (m->llama) return llama_block_fwd(m, l, x);
    const pt_geom *g = &m->g;
    const int Cr = g->Cr, C = m->C, N = g->Bl * m->Tl;
    const pt_ops *ops = m->ops;
    const pt_layout *lo = m->layout;
    const pt_lenv e = {m->ctx, ops, m->arena};
    pt_gpt_layer *ly = &m->layers[l];
    ly->in = x;
    TRY(pt_layernorm_fwd(g->norm, ops, m->arena, ly->ln1, ly->ln1_mean, ly->ln1_rstd, x, ly->ln1w, ly->ln1b, N, Cr, C));
    TRY(lo->linear_fwd(&e, &ly->qkv, ly->qkv_out, NULL, ly->ln1, N, PT_EPI_DEFAULT));
    TRY(attn_fwd(m, ly));
    TRY(lo->linear_fwd(&e, &ly->proj, m->dtmp, NULL, ly->atty, N, PT_EPI_DEFAULT));
    ops->add_fwd(ly->res2, x, m->dtmp, (size_t)N * Cr);
    TRY(pt_layernorm_fwd(g->norm, ops, m->arena, ly->ln2, ly->ln2_mean, ly->ln2_rstd, ly->res2, ly->ln2w, ly->ln2b, N, Cr, C));
    /* fc with its bias and GELU as the GEMM's epilogue (GELU_AUX_BIAS: fch keeps the pre-GELU values) */
    TRY(lo->linear_fwd(&e, &ly->fc, ly->fch_gelu, ly->fch, ly->ln2, N, PT_EPI_GELU));
    TRY(lo->linear_fwd(&e, &ly->fcproj, m->dtmp, NULL, ly->fch_gelu, N, PT_EPI_DEFAULT));
    ops->add_fwd(ly->res3, ly->res2, m->dtmp, (size_t)N * Cr);
    return PT_OK;
}

int pt_gpt_blocks_forward(pt_gpt *m, int l0, int l1, const void *x_in, void **x_out)
{
    TRY(check_bound(m));
    TRY(check_range(m, l0, l1, "forward"));
    const void *x = x_in;
    for (int l = l0; l < l1; l++) {
        TRY(hook(m, l, PT_HOOK_FWD_PRE));
        TRY(block_fwd(m, l, x));
        TRY(hook(m, l, PT_HOOK_FWD_POST));
        x = m->layers[l].res3;
    }
    *x_out = (void *)x;
    return PT_OK;
}

/* Final LN, head and per-row losses on x_in; *sum = this rank's summed token losses. */
static int head_fwd_local(pt_gpt *m, const void *x_in, double *sum)
{
    const pt_geom *g = &m->g;
    const int N = g->Bl * m->Tl;
    const pt_lenv e = {m->ctx, m->ops, m->arena};
    m->head_in = x_in;
    TRY(norm_fwd(m, m->lnf, m->lnf_mean, m->lnf_rstd, x_in, m->lnfw, m->lnfb));
    TRY(m->layout->head_fwd(&e, g, m->losses, m->stats, m->lnf, m->whead, m->tgt));
    *sum = g->loss_owner ? m->ops->sum(m->losses, (size_t)N, PT_F32) : 0;
    return PT_OK;
}

/* Tokens the step's mean loss is over: m microbatches of B sequences per dp group. */
static double loss_tokens(const pt_gpt *m)
{
    return (double)m->stage.microbatches * m->B * m->ctx->plan.dp * m->T;
}

int pt_gpt_head_forward(pt_gpt *m, const void *x_in, float *loss)
{
    TRY(check_bound(m));
    TRY(check_end(m, m->stage.last, "head forward"));
    double sum;
    TRY(hook(m, m->cfg.n_layer, PT_HOOK_FWD_PRE));
    TRY(head_fwd_local(m, x_in, &sum));
    TRY(hook(m, m->cfg.n_layer, PT_HOOK_FWD_POST));
    TRY(pt_allreduce_sum_f64(&m->ctx->world, &sum, 1));
    *loss = (float)(sum / loss_tokens(m));
    return PT_OK;
}

int pt_gpt_forward(pt_gpt *m, const int32_t *inputs, const int32_t *targets, float *loss)
{
    void *x;
    TRY(pt_gpt_set_batch(m, inputs, targets));
    TRY(pt_gpt_embed_forward(m, &x));
    TRY(pt_gpt_blocks_forward(m, 0, m->cfg.n_layer, x, &x));
    return pt_gpt_head_forward(m, x, loss);
}

static int head_bwd(pt_gpt *m, void *dx)
{
    const pt_geom *g = &m->g;
    const int N = g->Bl * m->Tl;
    const pt_ops *ops = m->ops;
    const pt_lenv e = {m->ctx, ops, m->arena};
    /* d(mean loss)/d(loss of a row): 1 over the global token count */
    ops->fill(m->dloss, (float)(1.0 / loss_tokens(m)), (size_t)N, PT_F32);
    TRY(m->layout->head_bwd(&e, g, m->dtmp, m->dwhead, m->stats, m->lnf, m->whead, m->tgt, m->dloss));
    ops->zero(dx, (size_t)N * g->Cr, m->act);
    return norm_bwd(m, dx, m->dlnfw, m->dlnfb, m->dtmp, m->head_in, m->lnfw, m->lnf_mean, m->lnf_rstd);
}

int pt_gpt_head_backward(pt_gpt *m, void *dx)
{
    TRY(check_bound(m));
    TRY(check_end(m, m->stage.last, "head backward"));
    TRY(hook(m, m->cfg.n_layer, PT_HOOK_BWD_PRE));
    TRY(head_bwd(m, dx));
    return hook(m, m->cfg.n_layer, PT_HOOK_BWD_POST);
}

int pt_gpt_logits(pt_gpt *m, int row, float *out)
{
    TRY(check_bound(m));
    TRY(check_end(m, m->stage.last, "logits"));
    const pt_geom *g = &m->g;
    const int N = g->Bl * m->Tl;
    if (m->ctx->plan.mode != PT_MODE_OFF && m->ctx->plan.mode != PT_MODE_1D)
        return pt_fail(PT_EUNSUPP, "logits of a row: the %s layout's head rows hold part of the width; valid: %s or %s",
                       pt_mode_name(m->ctx->plan.mode), pt_mode_name(PT_MODE_OFF), pt_mode_name(PT_MODE_1D));
    if (m->param_hook) /* ZeRO-3 keeps wte gathered only inside the pieces that use it */
        return pt_fail(PT_EUNSUPP, "logits of a row: not under ZeRO (its hook may have released the head's "
                       "parameters); valid: zero=0");
    if (row < 0 || row >= N || !m->head_in)
        return pt_fail(PT_EINVAL, "logits of row %d: %s", row,
                       m->head_in ? "outside the head's rows" : "no head forward has run");
    void *l = pt_scratch_t(m->arena, (size_t)g->Vl, m->act, "logits row");
    if (!l) return PT_ENOMEM;
    m->ops->matmul_fwd(l, NULL, pt_elem(m->lnf, (size_t)row * g->Cr, m->act), m->whead, NULL, 0.0, 1, g->Cr, g->Vl,
                       PT_EPI_DEFAULT);
    m->ops->convert(out, PT_F32, l, m->act, (size_t)g->Vl);
    pt_arena_free(m->arena, l);
    return PT_OK;
}

/* The head's forward and backward in one pass (the layout's head_step:
 * the logits computed once): final LN, head + cross-entropy + its
 * backward, the LN's backward.  The head's parameters and gradients must
 * both be bound around the classifier, so the ZeRO hooks run FWD_PRE,
 * BWD_PRE before it and FWD_POST after it (ZeRO-3 gathers the piece twice
 * and releases it once there, the gradient buffer is allocated by
 * BWD_PRE), BWD_POST at the end. */
static int head_step_fused(pt_gpt *m, const void *x_in, void *dx, double *sum)
{
    const pt_geom *g = &m->g;
    const int N = g->Bl * m->Tl, L = m->cfg.n_layer;
    const pt_ops *ops = m->ops;
    const pt_lenv e = {m->ctx, ops, m->arena};
    TRY(hook(m, L, PT_HOOK_FWD_PRE));
    TRY(hook(m, L, PT_HOOK_BWD_PRE));
    m->head_in = x_in;
    TRY(norm_fwd(m, m->lnf, m->lnf_mean, m->lnf_rstd, x_in, m->lnfw, m->lnfb));
    ops->fill(m->dloss, (float)(1.0 / loss_tokens(m)), (size_t)N, PT_F32);
    TRY(m->layout->head_step(&e, g, m->losses, m->stats, m->dtmp, m->dwhead, m->lnf, m->whead, m->tgt, m->dloss));
    *sum = g->loss_owner ? ops->sum(m->losses, (size_t)N, PT_F32) : 0;
    TRY(hook(m, L, PT_HOOK_FWD_POST));
    ops->zero(dx, (size_t)N * g->Cr, m->act);
    TRY(norm_bwd(m, dx, m->dlnfw, m->dlnfb, m->dtmp, m->head_in, m->lnfw, m->lnf_mean, m->lnf_rstd));
    return hook(m, L, PT_HOOK_BWD_POST);
}

int pt_gpt_head_fused(const pt_gpt *m)
{
    return m->layout && m->layout->head_step && m->ops && m->ops->classifier_rows_fwd && m->ops->classifier_rows_bwd;
}

int pt_gpt_head_step(pt_gpt *m, const void *x_in, void *dx, double *loss_sum)
{
    TRY(check_bound(m));
    TRY(check_end(m, m->stage.last, "head step"));
    const int L = m->cfg.n_layer;
    double sum;
    if (pt_gpt_head_fused(m)) {
        TRY(head_step_fused(m, x_in, dx, &sum));
    } else {
        TRY(hook(m, L, PT_HOOK_FWD_PRE));
        TRY(head_fwd_local(m, x_in, &sum));
        TRY(hook(m, L, PT_HOOK_FWD_POST));
        TRY(hook(m, L, PT_HOOK_BWD_PRE));
        TRY(head_bwd(m, dx));
        TRY(hook(m, L, PT_HOOK_BWD_POST));
    }
    *loss_sum += sum;
    return PT_OK;
}

/* GPT-2 block l's backward: dx holds d(block output) and leaves holding
 * d(block input); the block's activations are there (recompute ran). */
static int gpt2_block_bwd(pt_gpt *m, pt_gpt_layer *ly, void *dx)
{
    const pt_geom *g = &m->g;
    const int N = g->Bl * m->Tl;
    const pt_ops *ops = m->ops;
    const pt_layout *lo = m->layout;
    const pt_lenv e = {m->ctx, ops, m->arena};
    /* res3 = res2 + fcproj(gelu(fc(ln2(res2)))) ; dx holds d res3.  fcproj's
     * dX carries fc's DGELU_BGRAD epilogue: dfch = d(fc's pre-GELU output),
     * fc's bias gradient with it; fc's own backward then skips its bias. */
    TRY(lo->linear_bwd(&e, &ly->fcproj, m->dfch, dx, ly->fch_gelu, N, PT_EPI_DGELU, ly->fch, ly->fc.db));
    pt_linear fc = ly->fc;
    fc.db = NULL;
    TRY(lo->linear_bwd(&e, &fc, m->dtmp, m->dfch, ly->ln2, N, PT_EPI_DEFAULT, NULL, NULL));
    TRY(norm_bwd(m, dx, ly->dln2w, ly->dln2b, m->dtmp, ly->res2, ly->ln2w, ly->ln2_mean, ly->ln2_rstd));
    /* res2 = in + proj(attn(qkv(ln1(in)))) ; dx now holds d res2 */
    if (m->ctx->plan.recompute == PT_RECOMPUTE_ATTENTION) TRY(attn_fwd(m, ly));
    TRY(lo->linear_bwd(&e, &ly->proj, m->datty, dx, ly->atty, N, PT_EPI_DEFAULT, NULL, NULL));
    ops->zero(m->dqkv, (size_t)N * m->QKVl, m->act);
    TRY(attn_bwd(m, ly));
    TRY(lo->linear_bwd(&e, &ly->qkv, m->dtmp, m->dqkv, ly->ln1, N, PT_EPI_DEFAULT, NULL, NULL));
    return norm_bwd(m, dx, ly->dln1w, ly->dln1b, m->dtmp, ly->in, ly->ln1w, ly->ln1_mean, ly->ln1_rstd);
}

/* Llama block l's backward (the transpose of llama_block_fwd): dx holds
 * d(block output) and leaves holding d(block input). */
static int llama_block_bwd(pt_gpt *m, pt_gpt_layer *ly, void *dx)
{
    const pt_geom *g = &m->g;
    const int N = g->Bl * m->Tl;
    const size_t ea = m->ea, Cl = (size_t)g->Cl, KV2 = 2 * (size_t)m->KVl, ld = (size_t)m->QKVl * ea;
    const pt_ops *ops = m->ops;
    const pt_layout *lo = m->layout;
    const pt_lenv e = {m->ctx, ops, m->arena};
    /* out = res2 + down(swiglu(fc(n2))): d swiglu output in dfch's last [N, Il], then d gate|up */
    void *dact = pt_elem(m->dfch, (size_t)N * 2 * m->Il, m->act);
    TRY(lo->linear_bwd(&e, &ly->fcproj, dact, dx, ly->fch_gelu, N, PT_EPI_DEFAULT, NULL, NULL));
    ops->swiglu_bwd(m->dfch, dact, ly->fch, N, m->Il);
    TRY(lo->linear_bwd(&e, &ly->fc, m->dtmp, m->dfch, ly->ln2, N, PT_EPI_DEFAULT, NULL, NULL));
    TRY(norm_bwd(m, dx, ly->dln2w, ly->dln2b, m->dtmp, ly->res2, ly->ln2w, ly->ln2_mean, ly->ln2_rstd));
    /* res2 = in + proj(attn(rope(q), rope(k), v)) ; dx now holds d res2 */
    if (m->ctx->plan.recompute == PT_RECOMPUTE_ATTENTION) TRY(attn_fwd(m, ly));
    TRY(lo->linear_bwd(&e, &ly->proj, m->datty, dx, ly->atty, N, PT_EPI_DEFAULT, NULL, NULL));
    ops->zero(m->dqkv, (size_t)N * m->QKVl, m->act);
    TRY(attn_bwd(m, ly));
    rope(m, m->dqkv, 0);
    /* d n1 = dq Wq + dkv Wkv: the two column linears' dX summed */
    ops->copy2d(m->datty, Cl * ea, m->dqkv, ld, Cl * ea, (size_t)N);
    TRY(lo->linear_bwd(&e, &ly->q, m->dtmp, m->datty, ly->ln1, N, PT_EPI_DEFAULT, NULL, NULL));
    ops->copy2d(m->datty, KV2 * ea, pt_elem(m->dqkv, Cl, m->act), ld, KV2 * ea, (size_t)N);
    TRY(lo->linear_bwd(&e, &ly->kv, m->dtmp2, m->datty, ly->ln1, N, PT_EPI_DEFAULT, NULL, NULL));
    ops->add_fwd(m->dtmp, m->dtmp, m->dtmp2, (size_t)N * g->Cr);
    return norm_bwd(m, dx, ly->dln1w, ly->dln1b, m->dtmp, ly->in, ly->ln1w, ly->ln1_mean, ly->ln1_rstd);
}

int pt_gpt_blocks_backward(pt_gpt *m, int l0, int l1, void *dx)
{
    TRY(check_bound(m));
    TRY(check_range(m, l0, l1, "backward"));
    for (int l = l1 - 1; l >= l0; l--) {
        pt_gpt_layer *ly = &m->layers[l];
        TRY(hook(m, l, PT_HOOK_BWD_PRE));
        /* recompute (Chen et al. 2016; Korthikanti et al. 2022 sec. 4):
         * the block's saved activations again from its kept input, or only
         * the attention's output and lse from the kept qkv (flash attention
         * recomputes its probabilities in its backward anyway) */
        if (m->ctx->plan.recompute == PT_RECOMPUTE_BLOCK) TRY(block_fwd(m, l, ly->in));
        TRY(m->llama ? llama_block_bwd(m, ly, dx) : gpt2_block_bwd(m, ly, dx));
        TRY(hook(m, l, PT_HOOK_BWD_POST));
    }
    return PT_OK;
}

int pt_gpt_embed_backward(pt_gpt *m, const void *dx)
{
    TRY(check_bound(m));
    TRY(check_end(m, m->stage.first, "embedding backward"));
    const pt_geom *g = &m->g;
    const pt_lenv e = {m->ctx, m->ops, m->arena};
    TRY(hook(m, -1, PT_HOOK_BWD_PRE));
    if (!m->llama) m->ops->posemb_bwd(m->dwpe + (size_t)m->t0 * g->Cr, dx, g->Bl, m->Tl, g->Cr);
    TRY(m->layout->embed_bwd(&e, g, m->dwte, dx, m->tok));
    return hook(m, -1, PT_HOOK_BWD_POST);
}

int pt_gpt_forward_backward(pt_gpt *m, const int32_t *inputs, const int32_t *targets, float *loss)
{
    void *x;
    double sum = 0;
    TRY(pt_gpt_set_batch(m, inputs, targets));
    TRY(pt_gpt_embed_forward(m, &x));
    TRY(pt_gpt_blocks_forward(m, 0, m->cfg.n_layer, x, &x));
    TRY(pt_gpt_head_step(m, x, m->dres, &sum));
    TRY(pt_allreduce_sum_f64(&m->ctx->world, &sum, 1));
    *loss = (float)(sum / loss_tokens(m));
    TRY(pt_gpt_blocks_backward(m, 0, m->cfg.n_layer, m->dres));
    return pt_gpt_embed_backward(m, m->dres);
}

int pt_gpt_backward(pt_gpt *m)
{
    TRY(pt_gpt_head_backward(m, m->dres));
    TRY(pt_gpt_blocks_backward(m, 0, m->cfg.n_layer, m->dres));
    return pt_gpt_embed_backward(m, m->dres);
}
