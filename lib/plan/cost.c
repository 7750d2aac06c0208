/* SPDX-License-Identifier: MIT */
/* The cost model of a plan (see cost.h for the formulas and sources).
 *
 * The byte counts are not closed-form approximations: the model walks the
 * same calls the library makes for one optimizer step (lib/model's block,
 * embedding and head pieces through the layout's linears, LayerNorms and
 * cross-entropy; lib/parallel/seq.c's ring attention; lib/pipeline's
 * boundary sends; lib/train's buckets and lib/train/zero.c's units) and
 * adds comm.h's ring-model bytes of each call with the same integer
 * arithmetic, rank by rank along the pipeline, then takes the maximum over
 * ranks per group as ptrain-run's step_stats does.  libc + libm only. */
#include "plan/cost.h"
#include "backend/ops.h"
#include "core/core.h"
#include "shape/shape.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(PT_COST_CLASSIFIER_VBLOCK == PT_CLASSIFIER_VBLOCK,
               "lib/plan/cost.h's classifier block must be lib/backend/ops.h's");

const char *pt_cost_group_name(int g)
{
    static const char *n[PT_GRP_N] = {"dp", "tp", "pp", "sp", "sync"};
    return g >= 0 && g < PT_GRP_N ? n[g] : "?";
}

const char *pt_cost_link_name(int l)
{
    static const char *n[PT_NET_N] = {"island", "node", "network"};
    return l >= 0 && l < PT_NET_N ? n[l] : "?";
}

/* ---- geometry (the layouts' geometry(), lib/parallel, from lib/shape) ---- */

/* The layout's local sizes for a dp-group (micro)batch of B sequences, or
 * -1 with the layout's own one-line reasons (heads, width, batch). */
static int geometry(const pt_model_shape *m, const pt_plan *p, long long B, pt_shape *g)
{
    memset(g, 0, sizeof *g);
    pt_shape_in in = {.C = m->n_embd, .NH = m->n_head, .V = m->vocab, .T = m->seq_len, .B = B, .mode = (int)p->mode,
                      .tp = p->tp, .sp = p->sp, .family = m->family, .NKV = pt_model_kv_heads(m),
                      .F = pt_model_ffn(m)};
    if (pt_plan_tp_dims(p, in.dims) < 0) return -1;
    return pt_shape_of(&in, g) < 0 ? PT_EINVAL : 0;
}

/* ---- per-call ring bytes (lib/comm/comm_mpi.c, integer arithmetic) ------- */

const char *pt_cost_kind_name(int k)
{
    static const char *n[PT_KIND_N] = {"allreduce", "reduce_scatter", "allgather", "broadcast", "reduce", "p2p"};
    return k >= 0 && k < PT_KIND_N ? n[k] : "?";
}

double pt_cost_busfactor(int k, int p)
{
    if (p <= 1) return 0;
    switch (k) {
    case PT_KIND_ALLREDUCE: return 2.0 * (p - 1) / p;
    case PT_KIND_REDUCE_SCATTER:
    case PT_KIND_ALLGATHER: return (double)(p - 1) / p;
    case PT_KIND_BROADCAST:
    case PT_KIND_REDUCE:
    case PT_KIND_P2P: return 1;
    default: return 0;
    }
}

double pt_cost_kind_steps(int k, int p)
{
    if (p <= 1 || k < 0 || k >= PT_KIND_N) return 0;
    if (k == PT_KIND_P2P) return 1;
    return (k == PT_KIND_ALLREDUCE ? 2.0 : 1.0) * (p - 1);
}

const char *pt_cost_sub_name(int s)
{
    static const char *n[PT_SUB_N] = {"tp", "tpx--", "tp-x-", "tpxx-", "tp--x", "tpx-x", "tp-xx", "tpxxx",
                                      "sync---", "syncx--", "sync-x-", "syncxx-", "sync--x", "syncx-x", "sync-xx",
                                      "syncxxx", "sp", "pp", "embed", "dp"};
    return s >= 0 && s < PT_SUB_N ? n[s] : "?";
}

int pt_cost_sub_group(int s)
{
    if (s < 0 || s >= PT_SUB_N) return -1;
    if (s < PT_SUB_SYNC) return PT_GRP_TP;
    if (s < PT_SUB_SP) return PT_GRP_SYNC;
    if (s == PT_SUB_SP) return PT_GRP_SP;
    if (s == PT_SUB_DP) return PT_GRP_DP;
    return PT_GRP_PP;
}

void pt_cost_sub_role(const pt_plan *p, int s, char *buf, size_t n)
{
    static const char *axes2[3] = {"depth", "columns", "rows"}, *axes3[3] = {"I (weights)", "J", "K"};
    const int kind = p ? pt_shape_kind(p->mode) : PT_MODE_1D;
    const char *mode = p ? pt_mode_name(p->mode) : "1d";
    if (!buf || !n) return;
    if (s == PT_SUB_TP) {
        snprintf(buf, n, "1d tp group");
    } else if (s > PT_SUB_TP && s < PT_SUB_SYNC) {
        int mask = s - PT_SUB_TP_AXES + 1, one = mask == 1 ? 0 : mask == 2 ? 1 : mask == 4 ? 2 : -1;
        if (one >= 0 && kind != PT_MODE_1D)
            snprintf(buf, n, "%s %s", mode, kind == PT_MODE_3D ? axes3[one] : axes2[one]);
        else if (mask == 6 && kind == PT_MODE_2D)
            snprintf(buf, n, "%s slice", mode);
        else
            snprintf(buf, n, "tp axes %s", pt_cost_sub_name(s) + 2);
    } else if (s >= PT_SUB_SYNC && s < PT_SUB_SP) {
        int mask = s - PT_SUB_SYNC;
        char ax[64] = "";
        size_t k = 0;
        for (int a = 0; a < 3 && k < sizeof ax; a++)
            if (mask & (1 << a))
                k += (size_t)snprintf(ax + k, sizeof ax - k, " x %s",
                                      kind == PT_MODE_3D ? (a == 0 ? "I" : a == 1 ? "J" : "K") : axes2[a]);
        snprintf(buf, n, "sync over dp x sp%s", ax);
    } else if (s == PT_SUB_SP) {
        snprintf(buf, n, "sp ring");
    } else if (s == PT_SUB_PP) {
        snprintf(buf, n, "pp neighbours");
    } else if (s == PT_SUB_EMBED) {
        snprintf(buf, n, "embed (first and last stage)");
    } else {
        snprintf(buf, n, "%s", s == PT_SUB_DP ? "dp" : "?");
    }
}

/* What one piece of a step sends, per communicator and collective kind:
 * the counters' bytes (comm.h's ring model), the calls, the latency terms
 * (pt_cost_kind_steps) and the bus bytes (the call's buffer times
 * pt_cost_busfactor: what the time's bandwidth term divides). */
typedef struct kacc {
    double bytes, calls, steps, bus;
} kacc;
typedef struct traffic {
    kacc k[PT_SUB_N][PT_KIND_N];
} traffic;

/* `times` calls of kind k of n elements of es bytes (the full buffer: the
 * gathered output of an allgather, the input of a reduce-scatter) over the
 * p ranks of communicator sub.  What moves in the run's activation type
 * (es = ea: 4 for fp32, 2 for bf16; lib/comm's _t calls) and what stays
 * fp32 (statistics, gradients: 4) follows the layouts call by call. */
static void coll(traffic *t, int sub, int k, long long n, long long p, double times, int es)
{
    if (p <= 1 || n <= 0 || times == 0) return;
    kacc *a = &t->k[sub][k];
    const int factor = k == PT_KIND_ALLREDUCE ? PT_RING_ALLREDUCE : 1; /* the rest move the buffer once */
    a->bytes += times * (double)pt_ring_bytes((uint64_t)n * (uint64_t)es, p, factor);
    a->calls += times;
    a->steps += times * pt_cost_kind_steps(k, (int)p); /* Thakur et al. 2005: ring steps */
    a->bus += times * (double)es * (double)n * pt_cost_busfactor(k, (int)p);
}
#define AR(t, s, n, p, x, es) coll(t, s, PT_KIND_ALLREDUCE, n, p, x, es)
#define AG(t, s, n, p, x, es) coll(t, s, PT_KIND_ALLGATHER, n, p, x, es)
#define RS(t, s, n, p, x, es) coll(t, s, PT_KIND_REDUCE_SCATTER, n, p, x, es)
#define BC(t, s, n, p, x, es) coll(t, s, PT_KIND_BROADCAST, n, p, x, es)
#define RD(t, s, n, p, x, es) coll(t, s, PT_KIND_REDUCE, n, p, x, es)
/* `times` point-to-point sends of n elements of es bytes on communicator sub */
static void sendb(traffic *t, int sub, long long n, double times, int es)
{
    if (n <= 0 || times == 0) return;
    kacc *a = &t->k[sub][PT_KIND_P2P];
    a->bytes += times * (double)es * (double)n;
    a->calls += times;
    a->steps += times;
    a->bus += times * (double)es * (double)n;
}

/* bytes of one activation element under plan p (ops->act of lib/backend) */
static int act_bytes(const pt_plan *p) { return p->precision == PT_PREC_BF16 ? 2 : 4; }

/* dst += scale * src, every communicator and kind */
static void traffic_add(traffic *dst, const traffic *src, double scale)
{
    if (scale == 0) return;
    for (int s = 0; s < PT_SUB_N; s++)
        for (int k = 0; k < PT_KIND_N; k++) {
            const kacc *a = &src->k[s][k];
            if (a->calls == 0) continue;
            kacc *b = &dst->k[s][k];
            b->bytes += scale * a->bytes, b->calls += scale * a->calls;
            b->steps += scale * a->steps, b->bus += scale * a->bus;
        }
}

/* The layouts' communicators (lib/parallel/tp2d.c, tp3d.c): 2d/2.5d rows
 * (j varying, tp_sub[AX_COL]), columns (i varying) and the slice; 3d I, J,
 * K; LayerNorm's norm group (2d rows, 3d J). */
#define ROW2 PT_SUB_TP_MASK(4)
#define COL2 PT_SUB_TP_MASK(2)
#define SLICE2 PT_SUB_TP_MASK(6)
#define I3 PT_SUB_TP_MASK(1)
#define J3 PT_SUB_TP_MASK(2)
#define K3 PT_SUB_TP_MASK(4)

/* ---- tensor-parallel traffic of one piece's forward / backward ----------- */

/* LayerNorm over the norm group (tp_common.c): forward 2 allreduces of [N],
 * backward one of [2N]; 1d rows are whole (no call). */
static void ln_fwd(traffic *t, const pt_shape *g, long long N)
{
    if (g->mode != PT_MODE_1D) AR(t, g->mode == PT_MODE_2D ? ROW2 : J3, N, g->q, 2, 4); /* fp32 statistics */
}
static void ln_bwd(traffic *t, const pt_shape *g, long long N)
{
    if (g->mode != PT_MODE_1D) AR(t, g->mode == PT_MODE_2D ? ROW2 : J3, 2 * N, g->q, 1, 4);
}

/* linear roles: 0 column (residual -> inner), 1 row (inner -> residual);
 * activations and weight copies move in ea bytes, dW partials in fp32 */
static void lin_fwd(traffic *t, const pt_shape *g, long long N, long long in, long long out, long long il, long long ol,
                    int row, int ea)
{
    const long long q = g->q;
    switch (g->mode) {
    case PT_MODE_1D: /* row: allreduce of Y [N, out] */
        if (row) AR(t, PT_SUB_TP, N * out, q, 1, ea);
        break;
    case PT_MODE_2D: /* SUMMA: q broadcasts of X along the row, of W down the column */
        BC(t, ROW2, N * il, q, (double)q, ea);
        BC(t, COL2, ol * il, q, (double)q, ea);
        break;
    default: { /* 3d: AG X over gx, AG W over I, RS Y over gy (column: K, J; row: J, K) */
        const int gx = row ? J3 : K3, gy = row ? K3 : J3;
        AG(t, gx, q * N * il, q, 1, ea);
        AG(t, I3, ol * il, q, 1, ea);
        RS(t, gy, q * N * ol, q, 1, ea);
        break;
    }
    }
    (void)in;
}
static void lin_bwd(traffic *t, const pt_shape *g, long long N, long long in, long long out, long long il, long long ol,
                    int row, int ea)
{
    const long long q = g->q;
    switch (g->mode) {
    case PT_MODE_1D: /* column: allreduce of dX [N, in] */
        if (!row) AR(t, PT_SUB_TP, N * in, q, 1, ea);
        break;
    case PT_MODE_2D: /* dX: bcast W down the column, reduce dX along the row; dW: bcast X
                      * along the row, reduce dW (fp32) down the column; q times each */
        BC(t, ROW2, N * il, q, (double)q, ea);
        RD(t, ROW2, N * il, q, (double)q, ea);
        BC(t, COL2, ol * il, q, (double)q, ea);
        RD(t, COL2, ol * il, q, (double)q, 4);
        break;
    default: { /* AG W (I), AG dY (gy), RS dX (gx), AG X (gx), RS dW (I, fp32) */
        const int gx = row ? J3 : K3, gy = row ? K3 : J3;
        AG(t, I3, ol * il, q, 1, ea);
        RS(t, I3, ol * il, q, 1, 4);
        AG(t, gy, q * N * ol, q, 1, ea);
        RS(t, gx, q * N * il, q, 1, ea);
        AG(t, gx, q * N * il, q, 1, ea);
        break;
    }
    }
    (void)out;
}

/* The widths of a block's column linears, whole and held: the attention
 * input's (GPT-2 one qkv [3C]; Llama q [C] and kv [2 KV HS], two linears on
 * the same input, each with its own dX allreduce in 1d, as lib/model runs
 * them) and the MLP input's (GPT-2 fc [4C]; Llama gate | up [2I], one
 * weight). */
typedef struct blk_widths {
    int natt;                                /* column linears on the attention input: 1 or 2 */
    long long att[2], attl[2];               /* their output widths, whole and held */
    long long fc, fcl, mlp, mlpl;            /* fc's output, fcproj's input */
} blk_widths;
static blk_widths widths_of(const pt_shape *g, const pt_model_shape *m)
{
    const long long C = m->n_embd, I = pt_model_ffn(m), KV = (long long)pt_model_kv_heads(m) * (C / m->n_head);
    blk_widths w;
    if (m->family == PT_FAMILY_LLAMA) {
        w.natt = 2;
        w.att[0] = C, w.attl[0] = g->Cl, w.att[1] = 2 * KV, w.attl[1] = 2 * g->KVl;
        w.fc = 2 * I, w.fcl = 2 * g->Fl;
    } else {
        w.natt = 1;
        w.att[0] = w.att[1] = 3 * C, w.attl[0] = w.attl[1] = 3 * g->Cl;
        w.fc = 4 * C, w.fcl = g->Fl;
    }
    w.mlp = I, w.mlpl = g->Fl;
    return w;
}

/* A block's forward (both norms and the linears: GPT-2 qkv, proj, fc,
 * fcproj; Llama q, kv, proj (o), fc (gate | up), fcproj (down)). */
static void block_tp_fwd(traffic *t, const pt_shape *g, const pt_model_shape *m, long long N, int ea)
{
    const long long C = m->n_embd;
    const blk_widths w = widths_of(g, m);
    ln_fwd(t, g, N);
    for (int a = 0; a < w.natt; a++) lin_fwd(t, g, N, C, w.att[a], g->Cr, w.attl[a], 0, ea);
    lin_fwd(t, g, N, C, C, g->Cl, g->Cr, 1, ea);
    ln_fwd(t, g, N);
    lin_fwd(t, g, N, C, w.fc, g->Cr, w.fcl, 0, ea);
    lin_fwd(t, g, N, w.mlp, C, w.mlpl, g->Cr, 1, ea);
}
static void block_tp_bwd(traffic *t, const pt_shape *g, const pt_model_shape *m, long long N, int ea)
{
    const long long C = m->n_embd;
    const blk_widths w = widths_of(g, m);
    lin_bwd(t, g, N, w.mlp, C, w.mlpl, g->Cr, 1, ea);
    lin_bwd(t, g, N, C, w.fc, g->Cr, w.fcl, 0, ea);
    ln_bwd(t, g, N);
    lin_bwd(t, g, N, C, C, g->Cl, g->Cr, 1, ea);
    for (int a = w.natt - 1; a >= 0; a--) lin_bwd(t, g, N, C, w.att[a], g->Cr, w.attl[a], 0, ea);
    ln_bwd(t, g, N);
}

/* The parts of a piece's traffic: its forward's calls, its backward's, or
 * both (a pipeline instruction is one of them, lib/plan/energy.h). */
enum { PART_FWD = 1, PART_BWD = 2, PART_BOTH = 3 };

/* Embedding forward + backward (wte and the output in ea bytes, dW fp32),
 * the parts of `part`. */
static void embed_tp(traffic *t, const pt_shape *g, long long N, int ea, int part)
{
    const long long q = g->q;
    const double f = part & PART_FWD ? 1 : 0, b = part & PART_BWD ? 1 : 0;
    switch (g->mode) {
    case PT_MODE_1D: AR(t, PT_SUB_TP, N * g->Cr, q, f, ea); break; /* forward allreduce of the output */
    case PT_MODE_2D: /* q bcasts down the column forward, q reduces (fp32) backward */
        BC(t, COL2, g->Vp / q * g->Cr, q, f * (double)q, ea);
        RD(t, COL2, g->Vp / q * g->Cr, q, b * (double)q, 4);
        break;
    default: /* fwd AG wte over I, RS over K; bwd AG over K, RS (fp32) over I */
        AG(t, I3, g->Vp / q * g->Cr, q, f, ea);
        RS(t, I3, g->Vp / q * g->Cr, q, b, 4);
        RS(t, K3, q * N * g->Cr, q, f, ea);
        AG(t, K3, q * N * g->Cr, q, b, ea);
        break;
    }
}

/* Final LayerNorm, tied head and cross-entropy (the fused classifier,
 * tp_common.c), forward + backward, the parts of `part`: activations and the
 * gathered wte in ea bytes, the statistics and dW in fp32.  The forward
 * gathers the head's operands and reduces the row statistics; the
 * backward gathers them again (the fused classifier computes the logits
 * again) and reduces dX and dW. */
static void head_tp(traffic *t, const pt_shape *g, long long N, int ea, int part)
{
    const long long q = g->q;
    const double f = part & PART_FWD ? 1 : 0, b = part & PART_BWD ? 1 : 0;
    if (f) ln_fwd(t, g, N);
    if (b) ln_bwd(t, g, N);
    switch (g->mode) {
    case PT_MODE_1D: {
        /* the training step's chunked classifier (pt_classifier_step): the row max and the
         * (sum of exp, target logit) pairs merged chunk by chunk, R rows at a time */
        const long long R = pt_classifier_chunk_rows((int)N, g->Vl), full = N / R, rest = N % R;
        AR(t, PT_SUB_TP, R, q, f * (double)full, 4);     /* row max */
        AR(t, PT_SUB_TP, 2 * R, q, f * (double)full, 4); /* sum of exp, target logit */
        if (rest) {
            AR(t, PT_SUB_TP, rest, q, f, 4);
            AR(t, PT_SUB_TP, 2 * rest, q, f, 4);
        }
        AR(t, PT_SUB_TP, N * g->Cr, q, b, ea); /* dX */
        break;
    }
    case PT_MODE_2D: { /* tp2d.c: gathers of X along the row and of the transposed vocabulary
                        * block down the column, forward and backward; RS of dX and dW */
        const long long Vb = g->Vp / q, nw = Vb * g->Cr;
        if (q > 1) { /* transpose swaps: forward, backward (ea), dW back (fp32; off-diagonal) */
            sendb(t, SLICE2, nw, f + b, ea);
            sendb(t, SLICE2, nw, b, 4);
        }
        AG(t, ROW2, q * N * g->Cr, q, f + b, ea);
        RS(t, ROW2, q * N * g->Cr, q, b, ea);
        AG(t, COL2, q * nw, q, f + b, ea);
        RS(t, COL2, q * nw, q, b, 4);
        AR(t, ROW2, N, q, f, 4);
        AR(t, ROW2, 2 * N, q, f, 4);
        break;
    }
    default: { /* tp3d.c: X gathered over K and exchanged over J (l-1 sends in each gather,
                * forward and backward, and back with dX); wte gathered over I and J; RS of dX
                * over K, of dW over J and I */
        const long long nx = N * g->Cr, nw = g->Vl * g->Cr;
        AG(t, K3, q * nx, q, f + b, ea);
        RS(t, K3, q * nx, q, b, ea);
        if (q > 1) sendb(t, J3, nx, (f + 2 * b) * (double)(q - 1), ea);
        AG(t, I3, nw, q, f + b, ea);
        RS(t, I3, nw, q, b, 4);
        AG(t, J3, q * nw, q, f + b, ea);
        RS(t, J3, q * nw, q, b, 4);
        AR(t, K3, N, q, f, 4);
        AR(t, K3, 2 * N, q, f, 4);
        break;
    }
    }
}

/* ---- parameters, buckets and ZeRO units of one pipeline rank ------------- */

enum { C_WTE, C_WPE, C_NORM, C_QKV_W, C_QKV_B, C_PROJ_W, C_PROJ_B, C_FC_W, C_FC_B, C_FCPROJ_W, C_FCPROJ_B };

/* shard size and sync mask (bit a = tp axis a) of a parameter class per
 * layout (the layouts' param()) */
static void shard_of(const pt_shape *g, int cls, long long rows, long long cols, long long *numel, int *mask)
{
    const long long q = g->q, n = rows * cols;
    const int weight = cls == C_WTE || cls == C_QKV_W || cls == C_PROJ_W || cls == C_FC_W || cls == C_FCPROJ_W;
    switch (g->mode) {
    case PT_MODE_1D:
        *mask = 0;
        *numel = (weight || cls == C_QKV_B || cls == C_FC_B) ? n / q : n;
        break;
    case PT_MODE_2D:
        if (weight) *numel = n / (q * q), *mask = 1;
        else *numel = n / q, *mask = 1 | 2;
        break;
    default:
        if (weight) *numel = n / (q * q * q), *mask = 0;
        else if (cls == C_QKV_B || cls == C_FC_B) *numel = n / q, *mask = 1 | 2;
        else *numel = n / q, *mask = 1 | 4;
        break;
    }
}

typedef struct stage_state {
    double nfloats;        /* local parameters */
    traffic sync;          /* per step: the sync groups' calls and the embed group's (pp's
                            * tied wte sum) */
    /* bytes per rank of the state buffers (lib/train): params = the fp32
     * master plus, under bf16, its work copy; grads and AdamW m + v fp32 */
    double zero_params, zero_grads, zero_optim;
    double zero_init_extra; /* bytes of the ZeRO initialisation's full-size temporaries */
    double smax;           /* largest own slice (elements): ZeRO's sync / regather scratch */
    double other2, other3; /* max over units other than wte of the bytes of a unit's full gradient and
                            * slice (stage 2) and also its gathered work copy (stage 3) */
    double wte_pad, wte_s; /* padded tied wte unit and its slice (elements), 0 without a tied wte */
    double head_pad;       /* padded unit holding an untied head (lnf + lm_head; elements), else 0 */
} stage_state;

#define MAXP 4096

/* The shard class of a parameter role of the contract's list (lib/contract/model.h):
 * the head (untied lm_head) is sharded as wte; Llama's q, kv and their biases as
 * GPT-2's qkv (column linears), norms with or without bias alike. */
static int class_of(int role)
{
    switch (role) {
    case PT_ROLE_WTE:
    case PT_ROLE_HEAD: return C_WTE;
    case PT_ROLE_WPE: return C_WPE;
    case PT_ROLE_QKV_W:
    case PT_ROLE_Q_W:
    case PT_ROLE_KV_W: return C_QKV_W;
    case PT_ROLE_QKV_B:
    case PT_ROLE_Q_B:
    case PT_ROLE_KV_B: return C_QKV_B;
    case PT_ROLE_PROJ_W: return C_PROJ_W;
    case PT_ROLE_PROJ_B: return C_PROJ_B;
    case PT_ROLE_FC_W: return C_FC_W;
    case PT_ROLE_FC_B: return C_FC_B;
    case PT_ROLE_FCPROJ_W: return C_FCPROJ_W;
    case PT_ROLE_FCPROJ_B: return C_FCPROJ_B;
    default: return C_NORM;
    }
}

/* Walk the stage's parameter list (pt_model_param_info's order, which
 * lib/model builds its parameters in) into buckets by sync group
 * (lib/train/train.c, allreduce.c) and units by piece (lib/train/zero.c):
 * wte (piece -2) on the first stage, and on the last while tied; wpe (-1)
 * on the first; block l's on the stage holding it; the final norm and an
 * untied head (piece L) on the last.  wte and lm_head have the padded
 * vocabulary's rows (Vp). */
static int stage_params(const pt_model_shape *m, const pt_plan *p, const pt_shape *g, int first, int last,
                        const char *has_block, int m_micro, stage_state *s)
{
    const int L = m->n_layer, untied = pt_model_untied(m), np = pt_model_param_count(m);
    struct { long long numel; int mask, piece; } *pl = malloc(sizeof *pl * (size_t)(np > 0 ? np : 1));
    if (!pl) return -1;
    int n = 0;
    for (int i = 0; i < np; i++) {
        pt_param_info pi;
        if (pt_model_param_info(m, i, &pi) < 0) continue;
        int piece = pi.block, hold;
        if (pi.role == PT_ROLE_WTE) piece = -2, hold = first || (last && !untied);
        else if (pi.role == PT_ROLE_WPE) piece = -1, hold = first;
        else if (pi.block >= 0 && pi.block < L) hold = has_block[pi.block];
        else piece = L, hold = last;
        if (!hold) continue;
        const long long rows = pi.role == PT_ROLE_WTE || pi.role == PT_ROLE_HEAD ? g->Vp : pi.rows;
        shard_of(g, class_of(pi.role), rows, pi.cols, &pl[n].numel, &pl[n].mask);
        pl[n].piece = piece;
        n++;
    }
    memset(s, 0, sizeof *s);
    /* wte exists only on the ends: tied over ctx->embed (an untied head
     * is its own parameter: wte's gradient sums with nothing) */
    const int tied = p->pp > 1 && !untied;
    const int ea = act_bytes(p), mixed = ea != 4; /* a bf16 work copy beside the fp32 master */
    int seen[8] = {0};
    for (int i = 0; i < n; i++) {
        s->nfloats += (double)pl[i].numel;
        const int mask = pl[i].mask;
        if (seen[mask]) continue;
        seen[mask] = 1;
        long long N = (long long)p->dp * p->sp;
        for (int a = 0; a < 3; a++)
            if (mask & (1 << a)) N *= g->dims[a];
        /* the bucket: every parameter with this mask, from i on */
        long long bn = 0;
        for (int j = i; j < n; j++)
            if (pl[j].mask == mask) bn += pl[j].numel;
        if (p->zero == 0) {
            AR(&s->sync, PT_SUB_SYNC_MASK(mask), bn, N, 1, 4);
            s->zero_params += (4.0 + (mixed ? ea : 0)) * (double)bn, s->zero_grads += 4.0 * (double)bn;
            s->zero_optim += 8.0 * (double)bn;
            continue;
        }
        /* units: consecutive parameters of one piece within the bucket */
        for (int j = i; j < n;) {
            if (pl[j].mask != mask) { j++; continue; }
            const int piece = pl[j].piece;
            long long un = 0;
            int k = j;
            for (; k < n; k++) {
                if (pl[k].mask != mask) continue;
                if (pl[k].piece != piece) break;
                un += pl[k].numel;
            }
            const long long npad = (un + N - 1) / N * N, sl = npad / N;
            const int is_tied = tied && piece == -2;
            const int sg = PT_SUB_SYNC_MASK(mask);
            double rs = p->zero == 1 || is_tied ? 1 : m_micro; /* reduce-scatters per step (fp32) */
            RS(&s->sync, sg, npad, N, rs, 4);
            /* the work copy's gathers (ACT) */
            /* before forward and backward; once for the units the head uses last where the 1D
             * layout runs the head's forward and backward as one piece (lib/model's
             * pt_gpt_head_fused: the gathered copy is kept between them) */
            const int head_last = g->mode == PT_MODE_1D && last && (piece == L || (piece == -2 && !untied));
            if (p->zero == 3) AG(&s->sync, sg, npad, N, (head_last ? 1.0 : 2.0) * m_micro, ea);
            else AG(&s->sync, sg, npad, N, 1, ea); /* after the update */
            if (is_tied) AR(&s->sync, PT_SUB_EMBED, npad, 2, 1, 4);
            if (piece == -2 && !untied) s->wte_pad = (double)npad, s->wte_s = (double)sl;
            else { /* an untied wte is a unit as any other */
                if (untied && piece == L && (double)npad > s->head_pad) s->head_pad = (double)npad;
                const double g2 = 4.0 * (double)(npad + sl), g3 = g2 + (double)ea * (double)npad;
                if (g2 > s->other2) s->other2 = g2;
                if (g3 > s->other3) s->other3 = g3;
            }
            if ((double)sl > s->smax) s->smax = (double)sl;
            /* zero.c: the work copy whole in stages 1-2, sliced in 3; the
             * fp32 master sliced from stage 1 on under bf16 (the same buffer
             * as the work copy under fp32) */
            const double work = (double)ea * (p->zero == 3 ? (double)sl : (double)npad);
            s->zero_params += mixed ? work + 4.0 * (double)sl : work;
            s->zero_grads += 4.0 * (p->zero == 1 ? (double)npad : (double)sl);
            s->zero_optim += 8.0 * (double)sl;
            /* the initialisation's full-size master, work copy and gradient
             * where the stage keeps no full one */
            if (mixed || p->zero == 3) s->zero_init_extra += 4.0 * (double)npad;
            if (mixed && p->zero == 3) s->zero_init_extra += (double)ea * (double)npad;
            if (p->zero >= 2) s->zero_init_extra += 4.0 * (double)npad;
            /* skip to the next parameter of this bucket with another piece */
            j = k;
        }
    }
    if (p->zero == 0 && tied && (first || last)) {
        /* pt_train_sync_tied: one allreduce of wte's shard over the embed group */
        long long wn;
        int mk;
        shard_of(g, C_WTE, g->Vp, m->n_embd, &wn, &mk);
        AR(&s->sync, PT_SUB_EMBED, wn, 2, 1, 4);
    }
    free(pl);
    return 0;
}

/* ---- pipeline: activation slots of a rank (lib/contract/schedule.c) ------ */

/* Most microbatches between their first forward and last backward on pp
 * rank r: the compute order alone decides it (schedule.c's assign over
 * compute actions). */
static int pipeline_slots(int kind, int pp, int r, int m, int v)
{
    if (kind == PT_SCHED_GPIPE) return m;
    const int total = m * v;
    const int warm = pt_pp_warmup(kind, pp, r, m, v);
    /* 1F1B (v = 1, each forward opens a microbatch, each backward closes
     * one): warm forwards, then one forward and one backward in turn, so
     * the walk below peaks at warm + 1, or at m when the warm-up holds
     * every forward.  The closed form keeps the planner's search fast
     * (the walk is O(m) per rank and evaluation); interleaved walks. */
    if (kind == PT_SCHED_1F1B) return warm < m ? warm + 1 : m;
    /* walk the order: forwards open a microbatch at its first chunk,
     * backwards close it at its last (chunk 0) */
    int live = 0, peak = 1;
    int stack_seen[2 * 256];
    int *fwd_seen = stack_seen, *bwd_seen = stack_seen + 256;
    if (m <= 256) {
        memset(stack_seen, 0, sizeof(int) * 2 * (size_t)256);
    } else {
        fwd_seen = calloc((size_t)m, sizeof(int)), bwd_seen = calloc((size_t)m, sizeof(int));
        if (!fwd_seen || !bwd_seen) {
            free(fwd_seen), free(bwd_seen);
            return m;
        }
    }
#define UNIT_MB(k) (((k) / (pp * v)) * pp + (k) % pp)
    int kf = 0, kb = 0;
    for (int step = 0; step < 2 * total; step++) {
        int fwd;
        if (step < warm) fwd = 1;
        else if (step >= warm + 2 * (total - warm)) fwd = 0;
        else fwd = (step - warm) % 2 == 0;
        if (fwd) {
            int mb = UNIT_MB(kf);
            kf++;
            if (fwd_seen[mb]++ == 0 && ++live > peak) peak = live;
            if (kf == total) break; /* no forward left: live only falls from here */
        } else {
            int mb = UNIT_MB(kb);
            kb++;
            if (++bwd_seen[mb] == v) live--;
        }
    }
#undef UNIT_MB
    if (fwd_seen != stack_seen) free(fwd_seen), free(bwd_seen);
    return peak;
}

/* ---- the public functions -------------------------------------------------- */

/* bytes of one block's kept activations (lib/model's pt_gpt_block_act_bytes):
 * ea per activation element, 4 per fp32 statistic.  GPT-2: ln1, res2, ln2,
 * res3 [N, Cr], qkv [N, 3Cl], fc and GELU [N, Fl], the LayerNorms' mean and
 * rstd; Llama: the same four [N, Cr], q [N, Cl], kv [N, 2 KVl], fc (gate |
 * up) [N, 2 Fl] and SwiGLU [N, Fl], the RMSNorms' two rstd.  Both: the
 * attention output [N, Cl] and its log-sum-exp, unless recomputed. */
static double block_act(const pt_shape *g, int r, int ea)
{
    const double N = (double)g->Bl * (double)g->Tl, Cr = (double)g->Cr, Cl = (double)g->Cl, Fl = (double)g->Fl;
    const double lse = (double)g->Bl * (double)g->NHl * (double)g->Tl; /* flash attention's row log-sum-exp */
    if (r == PT_RECOMPUTE_BLOCK) return ea * N * Cr;
    const double kept = g->family == PT_FAMILY_LLAMA
                            ? ea * (4 * N * Cr + N * Cl + 2 * N * (double)g->KVl + 3 * N * Fl) + 4 * (2 * N)
                            : ea * (4 * N * Cr + 3 * N * Cl + 2 * N * Fl) + 4 * (4 * N);
    return r == PT_RECOMPUTE_ATTENTION ? kept : kept + ea * N * Cl + 4 * lse;
}

double pt_cost_block_act_bytes(const pt_model_shape *m, const pt_plan *p, int b, int r)
{
    pt_shape g;
    pt_errsave keep; /* a query: a refused geometry is 0 bytes, not a message */
    pt_error_save(&keep);
    int bad = !m || !p || b < 1 || p->sp < 1 || geometry(m, p, b, &g) < 0;
    pt_error_restore(&keep);
    return bad ? 0 : block_act(&g, r, act_bytes(p));
}

static int check_shape(const pt_model_shape *m)
{
    if (!m) return pt_fail(PT_EINVAL, "no model shape given");
    if (m->n_layer < 1 || m->n_head < 1 || m->n_embd < 1 || m->seq_len < 1 || m->vocab < 2)
        return pt_fail(PT_EINVAL, "model L=%d H=%d C=%d T=%d V=%d: every size must be >= 1 (V >= 2)", m->n_layer,
                       m->n_head, m->n_embd, m->seq_len, m->vocab);
    if (m->n_embd % m->n_head)
        return pt_fail(PT_EINVAL, "model n_embd=%d is not a multiple of n_head=%d", m->n_embd, m->n_head);
    if (m->family != PT_FAMILY_GPT2 && m->family != PT_FAMILY_LLAMA)
        return pt_fail(PT_EINVAL, "model family %d (valid: 0 gpt2, 1 llama)", m->family);
    if (m->family == PT_FAMILY_LLAMA) {
        const int kv = pt_model_kv_heads(m);
        if (kv < 1 || m->n_head % kv || pt_model_ffn(m) < 1)
            return pt_fail(PT_EINVAL, "llama model n_kv_head=%d, ffn=%d: the KV heads must divide n_head=%d and the "
                           "MLP width be >= 1", kv, pt_model_ffn(m), m->n_head);
    }
    return 0;
}

/* The per-kind alpha (s per step) and bus bandwidth (bytes/s, 0 =
 * unknown) of link class l: the node model's per-kind figure, else the
 * class's. */
static double kind_alpha(const pt_hw *h, int k, int l)
{
    return h->coll_lat_s[k][l] > 0 ? h->coll_lat_s[k][l] : h->lat_s[l];
}
static double kind_bw(const pt_hw *h, int k, int l)
{
    const double g = h->coll_gbps[k][l] > 0 ? h->coll_gbps[k][l] : h->gbps[l];
    return g > 0 ? g * 1e9 : 0;
}

/* Time of communicator s's calls in t on link class l with rates h. */
static double sub_time(const traffic *t, int s, const pt_hw *h, int l)
{
    double x = 0;
    if (l < 0 || l >= PT_NET_N) l = PT_NET_INTER;
    for (int k = 0; k < PT_KIND_N; k++) {
        const kacc *a = &t->k[s][k];
        if (a->calls == 0) continue;
        const double bw = kind_bw(h, k, l);
        x += a->steps * kind_alpha(h, k, l) + (bw > 0 ? a->bus / bw : 0);
    }
    return x;
}

/* The GEMM rate (FLOP/s) of h for precision prec at gemm_rows rows per
 * call (Hockney's r_inf, n_1/2): bf16 at gemm_gflops_bf16 when known, else
 * at gemm_gflops; 0 when unknown. */
static double gemm_rate(const pt_hw *h, int prec, double gemm_rows)
{
    if (!h) return 0;
    const double r = prec == PT_PREC_BF16 && h->gemm_gflops_bf16 > 0 ? h->gemm_gflops_bf16 : h->gemm_gflops;
    if (r <= 0) return 0;
    return h->gemm_n_half > 0 ? r * 1e9 * gemm_rows / (gemm_rows + h->gemm_n_half) : r * 1e9;
}

/* A concrete plan checked against model m and global_batch, and what the
 * model's walks need of it: pt_cost_eval_at's checks, the layout's
 * geometry on a microbatch, the stage split. */
typedef struct frame {
    int B, mb, micro;   /* sequences per dp group, microbatches, sequences per microbatch */
    int v, pp, S;       /* chunks per pp rank (1 unless interleaved), pp ranks, virtual stages */
    pt_shape g;
    long long N;        /* local rows of a microbatch: Bl Tl */
    int l0[PT_PP_SPLIT_MAX], l1[PT_PP_SPLIT_MAX]; /* virtual stage s holds blocks [l0, l1) */
} frame;

static int frame_of(const pt_model_shape *m, int global_batch, const pt_plan *p, frame *f)
{
    memset(f, 0, sizeof *f);
    if (check_shape(m) < 0) return -1;
    if (!p) return pt_fail(PT_EINVAL, "no plan given");
    if (pt_plan_validate(p, 0) < 0) return -1;
    if (global_batch < 1 || global_batch % p->dp) {
        return pt_fail(PT_EINVAL, "global batch %d does not split over dp=%d (valid: a multiple of %d)", global_batch,
                       p->dp, p->dp);
    }
    f->B = global_batch / p->dp, f->mb = p->microbatches;
    f->v = p->schedule == PT_SCHED_INTERLEAVED ? p->virtual_stages : 1, f->pp = p->pp, f->S = f->pp * f->v;
    if (pt_plan_check_model(p, m->n_layer, f->B) < 0) return -1;
    if (m->seq_len % p->sp)
        return pt_fail(PT_EINVAL, "sequence length T=%d is not a multiple of sp=%d (valid sp: divisors of %d)",
                       m->seq_len, p->sp, m->seq_len);
    f->micro = f->B / f->mb;
    if (geometry(m, p, f->micro, &f->g) < 0) return -1;
    f->N = f->g.Bl * f->g.Tl;
    /* stage split (schedule.c's pt_pp_split_layers) */
    const int L = m->n_layer, S = f->S;
    for (int s = 0, at = 0; s < S; s++) {
        f->l0[s] = at;
        at += p->pp_split_n ? p->pp_split[s] : L / S + (s < L % S);
        f->l1[s] = at;
    }
    return 0;
}

/* FLOPs of one microbatch's pieces on one rank (matmuls only, PaLM
 * appendix B: 2 per multiply-add; backward twice the forward), divided
 * over tp x sp.  Flash attention's backward computes the scores Q K^T
 * again (2 T C per token); the fused classifier's backward the logits
 * (one head forward), except in the 1D layout, whose training step holds
 * a chunk's logits from the forward to the backward (pt_classifier_step);
 * block recompute adds a block forward, attention recompute the scores. */
typedef struct piece_flops {
    double blk_fwd;  /* one block's forward */
    double blk;      /* one block's forward + backward (+ recompute) */
    double head_fwd; /* the head's forward; its backward is head_bwd head_fwd */
    double head_bwd; /* 2 (1D: the chunked classifier) or 3 */
} piece_flops;

double pt_cost_block_matmul_params(const pt_model_shape *m)
{
    if (!m || m->n_head < 1) return 0;
    const double C = m->n_embd, KV = (double)pt_model_kv_heads(m) * (double)(m->n_embd / m->n_head),
                 I = pt_model_ffn(m);
    if (m->family == PT_FAMILY_LLAMA) return 2 * C * C + 2 * C * KV + 3 * C * I; /* q, o; k, v; gate, up, down */
    return 12 * C * C; /* qkv 3C^2, proj C^2, fc and fcproj 4C^2 each */
}

static piece_flops flops_of(const pt_model_shape *m, const pt_plan *p, int micro)
{
    const double C = m->n_embd, T = m->seq_len;
    const double tokens = (double)micro * T, split = (double)p->tp * (double)p->sp;
    piece_flops f;
    f.blk_fwd = (2.0 * pt_cost_block_matmul_params(m) + 4.0 * T * C) * tokens / split;
    f.head_fwd = 2.0 * C * m->vocab * tokens / split;
    f.head_bwd = pt_shape_kind(p->mode) == PT_MODE_1D ? 2 : 3;
    f.blk = 3 * f.blk_fwd + 2.0 * T * C * tokens / split;
    if (p->recompute == PT_RECOMPUTE_BLOCK) f.blk += f.blk_fwd;
    if (p->recompute == PT_RECOMPUTE_ATTENTION) f.blk += 2.0 * T * C * tokens / split;
    return f;
}

int pt_cost_eval(const pt_model_shape *m, int global_batch, const pt_plan *p, const pt_hw *hw,
                 const int link[PT_GRP_N], pt_cost *out)
{
    pt_cost_where w;
    memset(&w, 0, sizeof w);
    for (int s = 0; s < PT_SUB_N; s++) {
        const int l = link ? link[pt_cost_sub_group(s)] : PT_NET_NODE;
        w.sub_link[s] = l >= 0 && l < PT_NET_N ? l : PT_NET_INTER;
    }
    return pt_cost_eval_at(m, global_batch, p, hw, &w, out);
}

/* The scratch of pt_cost_eval_at: the pieces' traffic of one microbatch,
 * a rank's sums, its stage's state (large: on the heap). */
typedef struct eval_scratch {
    traffic blk_tp, blk_tp_re, emb, head, att_sp, rank;
    stage_state st, st_mid;
} eval_scratch;

/* What pt_cost_eval_at's walk over the pp ranks shares. */
typedef struct eval_ctx {
    const pt_model_shape *m;
    const pt_plan *p;
    const pt_hw *hw;          /* NULL: no times */
    const pt_cost_where *w;   /* where every communicator runs */
    frame fr;
    int ea;                   /* bytes per activation element */
    double blk_flops, head_flops; /* one microbatch's block and head (forward + backward) */
    double gemm_rows, rate;   /* rows of one GEMM call; hw's GEMM rate at them */
    double nact;              /* elements of one boundary activation: Bl Tl Cr */
    eval_scratch *x;
} eval_ctx;

/* One pp rank: its blocks, its sends between stages, its stage's state. */
typedef struct rank_view {
    int r, first, last;
    int nblk, n_next, n_prev; /* blocks held; activations sent on, gradients sent back per microbatch */
    const stage_state *st;
} rank_view;

/* The traffic of one microbatch's pieces: a block (and its recompute), the
 * embedding, the head and ring attention. */
static void eval_pieces(const eval_ctx *cx)
{
    const pt_plan *p = cx->p;
    const pt_shape g = cx->fr.g;
    const long long N = cx->fr.N;
    const int ea = cx->ea;
    eval_scratch *x = cx->x;
    block_tp_fwd(&x->blk_tp, &g, cx->m, N, ea);
    block_tp_bwd(&x->blk_tp, &g, cx->m, N, ea);
    if (p->recompute == PT_RECOMPUTE_BLOCK) block_tp_fwd(&x->blk_tp_re, &g, cx->m, N, ea);
    embed_tp(&x->emb, &g, N, ea, PART_BOTH);
    head_tp(&x->head, &g, N, ea, PART_BOTH);
    if (p->sp > 1) { /* ring attention (seq.c): forward 2(sp-1) blocks, backward 2(2(sp-1)+1), in ACT */
        const long long blk = g.Bl * g.Tl * g.KVl; /* a K or V block: KV heads (GQA) */
        const double fw = 2.0 * (p->sp - 1), bw = 2.0 * (2.0 * (p->sp - 1) + 1);
        const double re = p->recompute != PT_RECOMPUTE_NONE ? fw : 0;
        sendb(&x->att_sp, PT_SUB_SP, blk, fw + bw + re, ea);
    }
}

/* The pieces' FLOPs and the GEMM rate at this plan's GEMM size (Hockney's
 * r_inf, n_1/2 over the rows of one call: 3d multiplies the input gathered
 * over l). */
static void eval_rates(eval_ctx *cx)
{
    const pt_shape *g = &cx->fr.g;
    const piece_flops fl = flops_of(cx->m, cx->p, cx->fr.micro);
    cx->blk_flops = fl.blk, cx->head_flops = (1 + fl.head_bwd) * fl.head_fwd;
    cx->gemm_rows = (double)cx->fr.N * (g->mode == PT_MODE_3D ? (double)g->q : 1.0);
    cx->rate = gemm_rate(cx->hw, cx->p->precision, cx->gemm_rows);
    cx->nact = (double)g->Bl * g->Tl * g->Cr;
}

/* The links of c: each communicator's from w, the pipeline's the slowest
 * neighbour link it uses. */
static void eval_links(const eval_ctx *cx, pt_cost *c)
{
    const pt_cost_where *w = cx->w;
    const int pp = cx->fr.pp, v = cx->fr.v;
    for (int s = 0; s < PT_SUB_N; s++) c->sub_link[s] = w->sub_link[s];
    if (pp > 1 && w->pp_next) { /* the slowest neighbour link the pipeline uses */
        c->sub_link[PT_SUB_PP] = PT_NET_ISLAND;
        for (int r = 0; r < pp; r++)
            if ((r < pp - 1 || v > 1) && w->pp_next[r] > c->sub_link[PT_SUB_PP]) c->sub_link[PT_SUB_PP] = w->pp_next[r];
    }
}

/* Rank r's blocks (marked in has) and its sends between stages. */
static void rank_blocks(const eval_ctx *cx, int r, char *has, rank_view *rv)
{
    const int pp = cx->fr.pp, S = cx->fr.S;
    memset(has, 0, (size_t)cx->m->n_layer);
    memset(rv, 0, sizeof *rv);
    rv->r = r;
    for (int ch = 0; ch < cx->fr.v; ch++) {
        const int vs = ch * pp + r;
        for (int l = cx->fr.l0[vs]; l < cx->fr.l1[vs]; l++) has[l] = 1, rv->nblk++;
        rv->n_next += vs < S - 1; /* activations to virtual stage vs + 1, on rank (r + 1) mod pp */
        rv->n_prev += vs > 0;     /* gradients to virtual stage vs - 1, on rank (r - 1) mod pp */
    }
    rv->first = r == 0, rv->last = r == pp - 1;
}

/* Rank rv's stage state: a stage's parameters depend only on whether it
 * holds the embedding or the head and how many (identical) blocks it
 * holds, so a middle rank with the count of the one before (*mid_nblk)
 * reuses its state.  -1 when out of memory. */
static int rank_state(const eval_ctx *cx, rank_view *rv, const char *has, int *mid_nblk)
{
    eval_scratch *x = cx->x;
    const int middle = !rv->first && !rv->last;
    if (middle && rv->nblk == *mid_nblk) {
        x->st = x->st_mid;
    } else {
        if (stage_params(cx->m, cx->p, &cx->fr.g, rv->first, rv->last, has, cx->fr.mb, &x->st) < 0) return -1;
        if (middle) x->st_mid = x->st, *mid_nblk = rv->nblk;
    }
    rv->st = &x->st;
    return 0;
}

/* Rank rv's step: its pieces' traffic per communicator and kind (left in
 * the scratch's rank sums), its bytes, messages and latency steps folded
 * into c's maxima over the ranks. */
static void rank_traffic(const eval_ctx *cx, const rank_view *rv, pt_cost *c)
{
    eval_scratch *x = cx->x;
    traffic *rt = &x->rank;
    const int mb = cx->fr.mb, nblk = rv->nblk;
    memset(rt, 0, sizeof *rt);
    traffic_add(rt, &x->blk_tp, (double)mb * nblk);
    traffic_add(rt, &x->blk_tp_re, (double)mb * nblk);
    if (rv->first) traffic_add(rt, &x->emb, mb);
    if (rv->last) traffic_add(rt, &x->head, mb);
    traffic_add(rt, &x->att_sp, (double)mb * nblk);
    sendb(rt, PT_SUB_PP, (long long)cx->nact, (double)mb * (rv->n_next + rv->n_prev), cx->ea); /* activations, their gradients */
    traffic_add(rt, &rv->st->sync, 1);
    double bytes[PT_GRP_N] = {0}, msgs[PT_GRP_N] = {0}, steps[PT_GRP_N] = {0};
    for (int sb = 0; sb < PT_SUB_N; sb++) {
        const int gi = pt_cost_sub_group(sb);
        double sbytes = 0, scalls = 0;
        for (int k = 0; k < PT_KIND_N; k++) {
            const kacc *a = &rt->k[sb][k];
            sbytes += a->bytes, scalls += a->calls, steps[gi] += a->steps;
        }
        bytes[gi] += sbytes, msgs[gi] += scalls;
        if (sbytes > c->sub_bytes[sb]) c->sub_bytes[sb] = sbytes;
        if (scalls > c->sub_msgs[sb]) c->sub_msgs[sb] = scalls;
    }
    for (int k = 0; k < PT_GRP_N; k++) {
        if (bytes[k] > c->bytes[k]) c->bytes[k] = bytes[k];
        if (msgs[k] > c->msgs[k]) c->msgs[k] = msgs[k];
        if (steps[k] > c->lat_steps[k]) c->lat_steps[k] = steps[k];
    }
}

/* Rank rv's activations in the arena (lib/model/gpt.c pt_gpt_create_stage,
 * lib/pipeline buffers), in bytes: ea per activation element, 4 per fp32
 * one; nslots activation slots, nbufs boundary buffer sets. */
static double rank_act(const eval_ctx *cx, const rank_view *rv, int nslots, int nbufs)
{
    const pt_plan *p = cx->p;
    const pt_shape g = cx->fr.g;
    const int ea = cx->ea;
    const double Nf = (double)cx->fr.N, Cr = (double)g.Cr, Cl = (double)g.Cl, Fl = (double)g.Fl, e = ea;
    const double nlse = (double)g.Bl * g.NHl * g.Tl;
    double act = nslots * (rv->nblk * block_act(&g, p->recompute, ea) + 4 * 2.0 * cx->fr.micro * g.Tl /* tok, tgt (int32) */
                           + (rv->first ? e * Nf * Cr : 0));
    if (p->recompute == PT_RECOMPUTE_BLOCK) act += block_act(&g, PT_RECOMPUTE_NONE, ea);
    if (p->recompute == PT_RECOMPUTE_ATTENTION) act += e * Nf * Cl + 4 * nlse; /* the shared attention output and lse */
    const int llama = g.family == PT_FAMILY_LLAMA;
    /* lnf; its mean/rstd, losses, stats, dloss (fp32): no logits */
    if (rv->last) act += e * Nf * Cr + 4 * (2 * Nf + Nf + 3 * Nf + Nf);
    /* the backward's buffers (lib/model/gpt.c): dres [N, Cr], dtmp [N, max(Cr, Cl, 2 KVl)],
     * dqkv [N, Cl + 2 KVl], datty [N, max(Cl, 2 KVl)], dfch (Llama: d gate|up and d SwiGLU
     * [N, 3 Fl]), dtmp2 [N, Cr]; and the RoPE table [T, HS] (fp32) */
    if (llama) {
        const double KV2 = 2 * (double)g.KVl, HS = g.NHl > 0 ? Cl / (double)g.NHl : 0;
        act += e * (Nf * Cr + Nf * fmax(fmax(Cr, Cl), KV2) + Nf * (Cl + KV2) + Nf * fmax(Cl, KV2) + 3 * Nf * Fl +
                    Nf * Cr) +
               4 * (double)cx->m->seq_len * HS;
    } else
        act += e * (Nf * Cr + Nf * (Cr > Cl ? Cr : Cl) + 3 * Nf * Cl + Nf * Cl + Nf * Fl);
    act += e * 2.0 * nbufs * cx->fr.v * cx->nact;
    return act;
}

/* The largest scratch a piece takes while running: the blocks' (linears,
 * ring attention) in *scratch and the head's in *head (0 off the last
 * stage) apart, since ZeRO's units in flight differ between the two. */
static void rank_scratch(const eval_ctx *cx, int last, double *scratch_out, double *head_out)
{
    const pt_plan *p = cx->p;
    const pt_shape g = cx->fr.g;
    const int ea = cx->ea;
    const double Nf = (double)cx->fr.N, Cr = (double)g.Cr, Fl = (double)g.Fl, e = ea;
    double scratch = 0, head = 0, x;
    /* the fused classifier's work (lib/backend/ops.h pt_classifier_work_elems, fp32): the
     * block of logits [N, min(VBLOCK, Vl)], and under bf16 the backward's dX accumulator
     * [N, C of the head's rows] */
    const double vb = (double)(g.Vl < PT_COST_CLASSIFIER_VBLOCK ? g.Vl : PT_COST_CLASSIFIER_VBLOCK);
    const double mixed = ea != 4 ? 1 : 0;
    if (g.mode == PT_MODE_1D) {
        /* the training step's chunked classifier (lib/parallel's pt_classifier_step, ops.h):
         * R rows' logits held whole, dX's partials per vocabulary slice, the chunk's
         * statistics, and over a tp group the local row max while they are merged */
        const int R = pt_classifier_chunk_rows((int)Nf, g.Vl);
        head = 4 * ((double)R * g.Vl + (double)pt_classifier_rows_work_elems(R, (int)Cr, g.Vl) + 3.0 * R +
                    (p->tp > 1 ? R : 0));
    } else if (g.mode == PT_MODE_2D) { /* SUMMA takes its scratch also at q = 1 */
        /* head backward (2d and 3d alike): the rows' and the vocabulary block's full
         * width [q][N][C/q] and [q][Vl][C/q] (ACT) and their gradients (dX ACT, dW
         * fp32), + the classifier's work */
        head = e * (2 * g.q * Nf * Cr + g.q * (double)g.Vl * Cr) + 4 * g.q * (double)g.Vl * Cr +
               4 * (Nf * vb + mixed * g.q * Nf * Cr);
        /* then, the operands returned, the dW pieces beside their reduced block dW^T (fp32):
         * the larger at q = 1 under bf16, where the operands are half their fp32 size */
        head = fmax(head, 4 * (g.q + 1) * (double)g.Vl * Cr);
        x = e * Nf * Fl + 4 * Fl * Cr; /* largest linear's SUMMA scratch: X (ACT) and the dW partial */
        if (x > scratch) scratch = x;
    } else if (g.mode == PT_MODE_3D) {
        const double l = g.q, lN = l * Nf;
        head = e * (2 * l * Nf * Cr + l * (double)g.Vl * Cr) + 4 * l * (double)g.Vl * Cr +
               4 * (Nf * vb + mixed * l * Nf * Cr); /* head backward */
        head = fmax(head, 4 * (l + 1) * (double)g.Vl * Cr); /* then the dW pieces beside the dW block (fp32) */
        /* MLP linear backward: Xg, dYg (ACT), Wg (sized for the fp32 dW partial), dW piece */
        x = e * (lN * Fl + lN * Cr) + 4 * (Fl * Cr + Fl * Cr / l);
        if (x > scratch) scratch = x;
    }
    if (!last) head = 0;
    if (p->sp > 1) {
        x = e * 8 * (double)g.Bl * g.Tl * (double)g.KVl; /* ring attention backward: K, V, dK, dV and the next
                                                         * ones (KV width: GQA's KV heads) */
        if (x > scratch) scratch = x;
    }
    *scratch_out = scratch, *head_out = head;
}

/* ZeRO buffers alive during the step besides the state (zero.c): stage 1
 * the sync/regather slice; stage 2 a unit's full gradient and its
 * reduce-scatter slice, beside wte's full gradient, which lives from the
 * head's backward (pp = 1) or the first microbatch (pp > 1, tied: reduced
 * in the sync) to its reduce; stage 3 also the gathered parameters of the
 * unit (and of wte while its gradient is made, pp = 1 holds both through
 * the blocks' backward).  During the head's backward (*head): wte's full
 * gradient (stage 2), and its gathered parameters (stage 3); the final
 * LayerNorm's unit beside them is [2C] floats, left out.  (Bytes:
 * gradients and slices fp32, gathered work copies ea.) */
static void zero_buffers(const eval_ctx *cx, const stage_state *stp, double *live, double *head)
{
    const pt_plan *p = cx->p;
    const int pp = cx->fr.pp;
    const double e = cx->ea;
    double zero_live = 0, zero_head = 0;
    const double W = stp->wte_pad;
    if (p->zero == 1) zero_live = 4 * stp->smax;
    else if (p->zero == 2) zero_live = 4 * W + fmax(stp->other2, 4 * stp->wte_s), zero_head = 4 * W;
    else if (p->zero == 3) {
        zero_live = pp == 1 ? (4 + e) * W + fmax(stp->other3, 4 * stp->wte_s)
                            : 4 * W + fmax(stp->other3, fmax(e * W, 4 * stp->wte_s));
        zero_head = (4 + e) * W;
    }
    /* an untied head: its unit's full gradient (stage 2) and gathered
     * parameters (stage 3) in flight during the head's backward */
    if (stp->head_pad > 0 && p->zero >= 2) zero_head += (p->zero == 3 ? 4 + e : 4) * stp->head_pad;
    *live = zero_live, *head = zero_head;
}

/* Rank rv's memory (bytes): the training state, the arena's activations,
 * the pieces' scratch and ZeRO's buffers; c's memory figures become this
 * rank's when its peak is the largest so far (*best_mem). */
static void rank_memory(const eval_ctx *cx, const rank_view *rv, pt_cost *c, double *best_mem)
{
    const pt_plan *p = cx->p;
    const stage_state *stp = rv->st;
    const int mb = cx->fr.mb;
    const double e = cx->ea;
    const int nslots = pipeline_slots(p->schedule, cx->fr.pp, rv->r, mb, cx->fr.v);
    int nbufs = nslots + (rv->r > 0 ? 1 : 0);
    if (nbufs > mb) nbufs = mb;
    const double act = rank_act(cx, rv, nslots, nbufs);
    double scratch, head, zero_live, zero_head;
    rank_scratch(cx, rv->last, &scratch, &head);
    zero_buffers(cx, stp, &zero_live, &zero_head);
    const double state = stp->zero_params + stp->zero_grads + stp->zero_optim;
    /* stage 1's slice is taken in the sync, after the pieces' scratch is
     * returned; stage 2/3's units are in flight while the pieces run */
    const double extra = p->zero == 1 ? fmax(fmax(scratch, head), zero_live)
                                      : fmax(scratch + zero_live, head + zero_head);
    const double mem_total = state + act + extra;
    const double act_model = act - e * 2.0 * nbufs * cx->fr.v * cx->nact; /* allocated before the state */
    const double mem_init = act_model + state + stp->zero_init_extra;
    const double peak = mem_total > mem_init ? mem_total : mem_init;
    if (peak > *best_mem) {
        *best_mem = peak;
        c->mem_params = stp->zero_params;
        c->mem_grads = stp->zero_grads;
        c->mem_optim = stp->zero_optim;
        c->mem_act = act + extra;
        c->mem_total = mem_total;
        c->mem_peak = peak;
    }
}

/* Time of rank rv's pipeline sends: to the next stage and to the previous
 * one, each on the link between the two, and the busy delay they wait. */
static double pp_send_time(const eval_ctx *cx, const rank_view *rv)
{
    const pt_cost_where *w = cx->w;
    const pt_hw *hw = cx->hw;
    const int pp = cx->fr.pp, mb = cx->fr.mb, r = rv->r;
    const int ln = w->pp_next ? w->pp_next[r] : w->sub_link[PT_SUB_PP];
    const int lp = w->pp_next ? w->pp_next[(r + pp - 1) % pp] : w->sub_link[PT_SUB_PP];
    double tpp = 0;
    for (int d = 0; d < 2; d++) {
        const int l = d ? lp : ln, cnt = d ? rv->n_prev : rv->n_next;
        if (!cnt) continue;
        const double bw = kind_bw(hw, PT_KIND_P2P, l < 0 || l >= PT_NET_N ? PT_NET_INTER : l);
        tpp += (double)mb * cnt * (kind_alpha(hw, PT_KIND_P2P, l < 0 || l >= PT_NET_N ? PT_NET_INTER : l)
                                   + (bw > 0 ? (double)cx->ea * cx->nact / bw : 0));
    }
    if (hw->busy_delay_s > 0 && rv->n_next + rv->n_prev > 0) {
        /* a stage's receive waited through the sender's compute
         * and gave its core away: each send waits the delay at
         * the probe's half of the ranks outside the pair, none
         * with every rank in it, linear between */
        const pt_plan *p = cx->p;
        const double world = (double)p->dp * pp * p->tp * p->sp;
        const double outside = fmin(1.0, 2.0 * (1.0 - 2.0 / world));
        tpp += (double)mb * (rv->n_next + rv->n_prev) * hw->busy_delay_s * outside;
    }
    return tpp;
}

/* Time of rank rv (hw given): compute at its stage's GEMM rate, each
 * communicator's calls at their kind's alpha-beta on the link it spans;
 * the stage's own groups (tp, sp) at its stage's rates, the groups between
 * stages (pp, embed, sync, dp) at hw's.  Folded into c's maxima over the
 * ranks; the compute time also summed in *tc_sum. */
static void rank_time(const eval_ctx *cx, const rank_view *rv, double flops, pt_cost *c, double *tc_sum)
{
    const pt_cost_where *w = cx->w;
    const pt_hw *hw = cx->hw;
    const pt_hw *sh = w->stage_hw ? &w->stage_hw[rv->r] : hw;
    const double so = sh->ranks_per_core > 1 ? sh->ranks_per_core : 1;
    const double srate = sh == hw ? cx->rate : gemm_rate(sh, cx->p->precision, cx->gemm_rows);
    double tc = srate > 0 ? flops * so / srate : 0, tg[PT_GRP_N] = {0};
    for (int sb = 0; sb < PT_SUB_N; sb++) {
        if (sb == PT_SUB_PP) continue;
        const int inside = sb < PT_SUB_SYNC || sb == PT_SUB_SP;
        const double t = sub_time(&cx->x->rank, sb, inside ? sh : hw, w->sub_link[sb]);
        tg[pt_cost_sub_group(sb)] += t;
        if (t > c->sub_t[sb]) c->sub_t[sb] = t;
    }
    const double tpp = pp_send_time(cx, rv);
    if (tpp > c->sub_t[PT_SUB_PP]) c->sub_t[PT_SUB_PP] = tpp;
    tg[PT_GRP_PP] += tpp;
    if (tc > c->t_compute) c->t_compute = tc;
    *tc_sum += srate > 0 ? flops * so / srate : 0;
    for (int k = 0; k < PT_GRP_N; k++)
        if (tg[k] > c->t_comm[k]) c->t_comm[k] = tg[k];
}

/* The step's time from the ranks' maxima in c: the pipelined part
 * (compute, tp, sp, pp) with its bubble, then the dp and sync sums. */
static void step_time(const eval_ctx *cx, pt_cost *c, double tc_sum)
{
    const pt_hw *hw = cx->hw;
    const int pp = cx->fr.pp, v = cx->fr.v, mb = cx->fr.mb;
    const double oversub = hw && hw->ranks_per_core > 1 ? hw->ranks_per_core : 1;
    if (pp > 1) c->bubble = (double)(pp - 1) / ((double)v * mb);
    if (oversub > 1 && cx->rate > 0) c->t_compute = tc_sum / pp;
    const double pipelined = c->t_compute + c->t_comm[PT_GRP_TP] + c->t_comm[PT_GRP_SP] + c->t_comm[PT_GRP_PP];
    /* time-shared cores: a waiting rank gives back only part of its share
     * (Open MPI's idle loop calls sched_yield, which CFS honours for the
     * rest of a slice, not for the wait): 1/ranks_per_core of the bubble
     * costs time, the rest goes to the ranks with work (an empirical fit,
     * see pt_hw.ranks_per_core) */
    c->t_bubble = c->bubble * pipelined * (oversub > 1 ? 1.0 / oversub : 1.0);
    c->t_step = pipelined + c->t_bubble + c->t_comm[PT_GRP_DP] + c->t_comm[PT_GRP_SYNC];
}

int pt_cost_eval_at(const pt_model_shape *m, int global_batch, const pt_plan *p, const pt_hw *hw,
                    const pt_cost_where *w, pt_cost *out)
{
    if (out) memset(out, 0, sizeof *out);
    eval_ctx cx;
    memset(&cx, 0, sizeof cx);
    if (frame_of(m, global_batch, p, &cx.fr) < 0) return -1;
    const int L = m->n_layer;
    char *has = malloc((size_t)L);
    if (!has) return pt_fail(PT_ENOMEM, "out of memory evaluating a plan of %d layers", L);

    pt_cost_where node_w;
    if (!w) { /* every communicator on the node's links */
        memset(&node_w, 0, sizeof node_w);
        for (int s = 0; s < PT_SUB_N; s++) node_w.sub_link[s] = PT_NET_NODE;
        w = &node_w;
    }
    cx.x = calloc(1, sizeof *cx.x);
    if (!cx.x) {
        free(has);
        return pt_fail(PT_ENOMEM, "out of memory evaluating a plan of %d layers", L);
    }
    cx.m = m, cx.p = p, cx.hw = hw, cx.w = w, cx.ea = act_bytes(p);
    eval_pieces(&cx);
    eval_rates(&cx);

    pt_cost c;
    memset(&c, 0, sizeof c);
    double best_mem = -1, tc_sum = 0;
    int mid_nblk = -1;
    eval_links(&cx, &c);
    for (int r = 0; r < cx.fr.pp; r++) {
        rank_view rv;
        rank_blocks(&cx, r, has, &rv);
        if (rank_state(&cx, &rv, has, &mid_nblk) < 0) {
            free(has);
            free(cx.x);
            return pt_fail(PT_ENOMEM, "out of memory evaluating a plan of %d layers", L);
        }
        rank_traffic(&cx, &rv, &c);
        const double flops = cx.fr.mb * (rv.nblk * cx.blk_flops + (rv.last ? cx.head_flops : 0));
        rank_memory(&cx, &rv, &c, &best_mem);
        if (flops > c.flops) c.flops = flops;
        if (hw) rank_time(&cx, &rv, flops, &c, &tc_sum);
    }
    free(has);
    free(cx.x);
    step_time(&cx, &c, tc_sum);
    if (out) *out = c;
    return 0;
}

int pt_cost_stages(const pt_model_shape *m, int global_batch, const pt_plan *p, const pt_hw *hw,
                   const pt_cost_where *w, pt_cost_stage *st, double *p2p_bytes, double *p2p_s)
{
    frame fr;
    if (frame_of(m, global_batch, p, &fr) < 0) return -1;
    if (!st) return pt_fail(PT_EINVAL, "no stage array given");
    const pt_shape *g = &fr.g;
    const int pp = fr.pp, S = fr.S, ea = act_bytes(p);
    const long long N = fr.N;
    pt_cost_where node_w;
    if (!w) {
        memset(&node_w, 0, sizeof node_w);
        for (int s = 0; s < PT_SUB_N; s++) node_w.sub_link[s] = PT_NET_NODE;
        w = &node_w;
    }
    /* each piece's calls for one microbatch, forward [0] and backward [1]
     * (the pieces' traffic is large: on the heap) */
    struct scratch {
        traffic blk[2], emb[2], head[2], att_sp[2], t;
    } *x = calloc(1, sizeof *x);
    if (!x) return pt_fail(PT_ENOMEM, "out of memory evaluating a plan of %d layers", m->n_layer);
    block_tp_fwd(&x->blk[0], g, m, N, ea);
    block_tp_bwd(&x->blk[1], g, m, N, ea);
    if (p->recompute == PT_RECOMPUTE_BLOCK) block_tp_fwd(&x->blk[1], g, m, N, ea);
    for (int d = 0; d < 2; d++) {
        embed_tp(&x->emb[d], g, N, ea, d ? PART_BWD : PART_FWD);
        head_tp(&x->head[d], g, N, ea, d ? PART_BWD : PART_FWD);
    }
    if (p->sp > 1) { /* ring attention, as pt_cost_eval_at: forward 2(sp-1) blocks, backward 2(2(sp-1)+1) + recompute */
        const long long blk = g->Bl * g->Tl * g->KVl; /* a K or V block: KV heads (GQA) */
        const double fw = 2.0 * (p->sp - 1), bw = 2.0 * (2.0 * (p->sp - 1) + 1);
        sendb(&x->att_sp[0], PT_SUB_SP, blk, fw, ea);
        sendb(&x->att_sp[1], PT_SUB_SP, blk, bw + (p->recompute != PT_RECOMPUTE_NONE ? fw : 0), ea);
    }
    const piece_flops fl = flops_of(m, p, fr.micro);
    const double gemm_rows = (double)N * (g->mode == PT_MODE_3D ? (double)g->q : 1.0);
    for (int s = 0; s < S; s++) {
        const int r = s % pp, nblk = fr.l1[s] - fr.l0[s], first = s == 0, last = s == S - 1;
        const pt_hw *sh = hw && w->stage_hw ? &w->stage_hw[r] : hw;
        const double so = sh && sh->ranks_per_core > 1 ? sh->ranks_per_core : 1;
        const double rate = gemm_rate(sh, p->precision, gemm_rows);
        memset(&st[s], 0, sizeof st[s]);
        st[s].flops[0] = nblk * fl.blk_fwd + (last ? fl.head_fwd : 0);
        st[s].flops[1] = nblk * (fl.blk - fl.blk_fwd) + (last ? fl.head_bwd * fl.head_fwd : 0);
        for (int d = 0; d < 2; d++) {
            st[s].compute_s[d] = rate > 0 ? st[s].flops[d] * so / rate : 0;
            if (!sh) continue;
            memset(&x->t, 0, sizeof x->t);
            traffic_add(&x->t, &x->blk[d], nblk);
            traffic_add(&x->t, &x->att_sp[d], nblk);
            if (first) traffic_add(&x->t, &x->emb[d], 1);
            if (last) traffic_add(&x->t, &x->head[d], 1);
            for (int sb = 0; sb < PT_SUB_N; sb++)
                if (sb < PT_SUB_SYNC || sb == PT_SUB_SP) st[s].comm_s[d] += sub_time(&x->t, sb, sh, w->sub_link[sb]);
        }
    }
    free(x);
    /* one boundary send of [N, Cr] on the slowest neighbour link the
     * pipeline uses, as pt_cost_eval_at prices each */
    const double nact = (double)g->Bl * g->Tl * g->Cr;
    int l = w->sub_link[PT_SUB_PP];
    if (pp > 1 && w->pp_next) {
        l = PT_NET_ISLAND;
        for (int r = 0; r < pp; r++)
            if ((r < pp - 1 || fr.v > 1) && w->pp_next[r] > l) l = w->pp_next[r];
    }
    if (l < 0 || l >= PT_NET_N) l = PT_NET_INTER;
    if (p2p_bytes) *p2p_bytes = pp > 1 ? (double)ea * nact : 0;
    if (p2p_s) {
        *p2p_s = 0;
        if (pp > 1 && hw) {
            const double bw = kind_bw(hw, PT_KIND_P2P, l);
            *p2p_s = kind_alpha(hw, PT_KIND_P2P, l) + (bw > 0 ? (double)ea * nact / bw : 0);
            if (hw->busy_delay_s > 0) {
                const double world = (double)p->dp * pp * p->tp * p->sp;
                *p2p_s += hw->busy_delay_s * fmin(1.0, 2.0 * (1.0 - 2.0 / world));
            }
        }
    }
    return 0;
}
