/* SPDX-License-Identifier: MIT */
/* cuDNN's fused flash attention for the bf16 table (attention_cudnn.h):
 * the selection (PTRAIN_ATTENTION), the rule of where it applies, the map
 * of ptrain's layout onto cuDNN's (b, h, s, d) tensors, and the forward
 * and backward as cuDNN backend operation graphs, planned once per shape.
 *
 * The graphs are the ones NVIDIA's cudnn-frontend (v1 graph API,
 * include/cudnn_frontend/node/scaled_dot_product_flash_attention.h:
 * CompositeSDPANode and CompositeSDPABackwardNode, with the causal mask of
 * utils/attn_score_modifiers.h and diagonal_band_mask.h and the softmax
 * of node/softmax.h) builds for causal SDPA with Stats, no dropout, no
 * bias, NH query heads and NKV key/value heads (grouped-query attention,
 * Ainslie et al. 2023, section 2.2: K and V are tensors of NKV heads, the
 * matmuls broadcast them over the NH/NKV query heads of a group; the
 * backward computes dK, dV per query head into virtual bf16 [B, NH, T, HS]
 * tensors and reduces them (ADD) onto the NKV heads, as the frontend's
 * dK_fullhead / dV_fullhead), written here against cudnn_graph.h in C
 * (nothing copied; the node order, data types and virtual-tensor shapes
 * follow the frontend's, since cuDNN's fused attention engines recognise
 * that pattern).  The scale 1/sqrt(HS), -inf and 1 are by-value fp32
 * scalars; intermediates are fp32 except the probabilities that feed a
 * matmul (bf16, as the frontend's); compute types fp32.
 *
 *   forward:  S = Q K^T (fp32); S *= scale; causal: row = index(axis 2),
 *             col = index(axis 3), keep = row >= col, S = keep ? S : -inf;
 *             m = rowmax S; E = exp(S - m); l = rowsum E;
 *             Stats = m + log l (fp32 [B, NH, T, 1]: ptrain's lse);
 *             P = E / l (bf16); O = P V
 *   backward: Dsum = rowsum(dO * O) * 1 (fp32 [B, NH, T, 1], a buffer the
 *             caller gives: the frontend's softmax_sum);
 *             S = (Q K^T) scale - Stats, masked as above; E = exp S (= P);
 *             dV = P^T dO (a reshape of E to its transpose, bf16);
 *             dP = dO V^T; dS = (dP - Dsum) * E * scale;
 *             dK = dS^T Q (a reshape of dS, bf16);
 *             dQacc = dS K (fp32 [B, NH, T, HS], a caller buffer: the
 *             frontend's dQ_accum, zeroed here before each run);
 *             dQ = identity(dQacc) (bf16)
 *   (FlashAttention-2, Dao 2023, algorithm 1 and section 3.1 - the same
 *   algorithm as attention.cu's kernels, on tensor cores.)
 *
 * cuDNN writes out, lse, dq, dk, dv; ops.h's backward ADDS into dq, dk, dv,
 * so the backward writes them into a stream-ordered scratch and adds it
 * (pt_cuda_add2d: one bf16 rounding more than the flash kernels' single
 * one).  The whole-sequence call's dq, dk, dv are the three column blocks
 * of one dqkv (dk = dq + C, dv = dq + 2C, ldq = ldkv): then the scratch is
 * one [B, T, C + 2*NKV*HS] and one add2d covers it ("packed").
 *
 * Plans: per (direction, B, NH, NKV, T, HS, ldq, ldkv, packed), built on first
 * use (heuristics mode A, then the fallback list; the first engine
 * configuration that finalizes; runtime-compiled engines take seconds
 * once), kept with every descriptor they were built from until
 * pt_cuda_attention_cudnn_release.  A shape cuDNN cannot plan is kept as
 * such, logged once (level 1) and left to the flash kernels.  The
 * workspace and scratch come from cudaMallocAsync / cudaFreeAsync on the
 * compute stream, like attention.cu's D.  One mutex serialises the cache,
 * the handle and the launches.
 *
 * fp32: cuDNN's fused flash SDPA takes fp16 / bf16 only; the fp32 table
 * keeps the flash kernels (converting to bf16 would give up the precision
 * that table stands for). */
#include "config.h"

#include "backend/cuda/attention_cudnn.h"
#include "backend/cuda/cuda_priv.h"
#include "backend/cuda/ops_cuda.h"
#include "core/core.h"

#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef HAVE_CUDNN
#include <cudnn.h>
#endif

/* ---- selection ----------------------------------------------------------- */

int pt_attn_impl_parse(const char *s)
{
    if (!s || !*s || strcmp(s, "cudnn") == 0) return PT_ATTN_CUDNN;
    if (strcmp(s, "flash") == 0) return PT_ATTN_FLASH;
    return -1;
}

const char *pt_attn_impl_name(int impl) { return impl == PT_ATTN_CUDNN ? "cudnn" : "flash"; }

static pthread_once_t impl_once = PTHREAD_ONCE_INIT;
static int impl_sel = PT_ATTN_CUDNN;

static int impl_allowed(int impl)
{
#ifdef HAVE_CUDNN
    return impl;
#else
    (void)impl;
    return PT_ATTN_FLASH;
#endif
}

static void impl_read(void)
{
    const char *s = getenv("PTRAIN_ATTENTION");
    int v = pt_attn_impl_parse(s);
    if (v < 0) {
        pt_log(0, "PTRAIN_ATTENTION=%s is not valid (valid: cudnn, flash); using flash", s);
        v = PT_ATTN_FLASH;
    }
    /* unset: cudnn where the build has it, quietly flash where not */
    if (v == PT_ATTN_CUDNN && impl_allowed(v) != v && s && *s)
        pt_log(0, "PTRAIN_ATTENTION=cudnn: this build has no cuDNN; using flash");
    impl_sel = impl_allowed(v);
}

int pt_cuda_attention_impl(void)
{
    pthread_once(&impl_once, impl_read);
    return impl_sel;
}

void pt_cuda_attention_set_impl(int impl)
{
    pthread_once(&impl_once, impl_read);
    impl_sel = impl_allowed(impl == PT_ATTN_CUDNN ? PT_ATTN_CUDNN : PT_ATTN_FLASH);
}

/* ---- where it applies, the layout ---------------------------------------- */

const char *pt_attn_cudnn_rule(const pt_attn_dims *d, int merge)
{
    if (!d) return "no dimensions";
    if (merge) return "merge 1 (a ring step's merge)";
    if (d->q0 != 0 || d->k0 != 0) return "q0 or k0 is not 0 (a ring step)";
    if (d->Tq != d->Tk || d->Tq < 1) return "Tq != Tk or no rows (not the whole sequence)";
    if (d->B < 1 || d->NH < 1) return "B or NH < 1";
    if (d->NKV < 0 || d->NKV > d->NH || (d->NKV > 0 && d->NH % d->NKV)) return "NKV is neither 0 nor a divisor of NH";
    if (d->HS < 8 || d->HS > PT_SDPA_MAX_HS || d->HS % 8 != 0) return "HS is not a multiple of 8 in 8..128";
    const long long C = (long long)d->NH * d->HS, KVC = (long long)pt_attn_nkv(d) * d->HS;
    if (d->ldq < C || d->ldkv < KVC) return "ldq < NH*HS or ldkv < NKV*HS";
    if (d->ldq % 8 != 0 || d->ldkv % 8 != 0) return "ldq or ldkv is not a multiple of 8 elements (16 bytes)";
    return NULL;
}

int pt_attn_ptrs_aligned(const void *const *p, int n)
{
    for (int i = 0; i < n; i++)
        if (!p[i] || (uintptr_t)p[i] % 16 != 0) return 0;
    return 1;
}

int pt_cuda_attention_cudnn_wants(const pt_attn_dims *d, int merge, const void *const *p, int n)
{
    return pt_cuda_attention_impl() == PT_ATTN_CUDNN && !pt_attn_cudnn_rule(d, merge) && pt_attn_ptrs_aligned(p, n);
}

static void set4(int64_t *a, int64_t x0, int64_t x1, int64_t x2, int64_t x3)
{
    a[0] = x0, a[1] = x1, a[2] = x2, a[3] = x3;
}

void pt_sdpa_layout_of(const pt_attn_dims *d, int lds, pt_sdpa_layout *l)
{
    const int64_t B = d->B, H = d->NH, Hk = pt_attn_nkv(d), T = d->Tq, D = d->HS, C = H * D, lq = d->ldq,
                  lk = d->ldkv;
    const int64_t ldk = lds == C ? Hk * D : lds; /* separate scratches: dk, dv rows of NKV*HS */
    set4(l->q_dim, B, H, T, D), set4(l->q_str, T * lq, D, lq, 1);
    set4(l->kt_dim, B, Hk, D, T), set4(l->kt_str, T * lk, D, 1, lk);
    set4(l->k_dim, B, Hk, T, D), set4(l->k_str, T * lk, D, lk, 1);
    set4(l->v_dim, B, Hk, T, D), set4(l->v_str, T * lk, D, lk, 1);
    set4(l->vt_dim, B, Hk, D, T), set4(l->vt_str, T * lk, D, 1, lk);
    set4(l->o_dim, B, H, T, D), set4(l->o_str, T * C, D, C, 1);
    set4(l->g_dim, B, H, T, D), set4(l->g_str, T * lds, D, lds, 1);
    set4(l->gk_dim, B, Hk, T, D), set4(l->gk_str, T * ldk, D, ldk, 1);
    set4(l->fh_dim, B, H, T, D), set4(l->fh_str, H * T * D, T * D, D, 1);
    set4(l->stats_dim, B, H, T, 1), set4(l->stats_str, H * T, T, 1, 1);
    set4(l->s_dim, B, H, T, T), set4(l->s_str, H * T * T, T * T, T, 1);
    set4(l->st_dim, B, H, T, T), set4(l->st_str, H * T * T, T * T, 1, T);
}

#ifndef HAVE_CUDNN

int pt_sdpa_ops_check(const pt_attn_dims *d, int bwd, int lds, int *nops)
{
    (void)d, (void)bwd, (void)lds;
    if (nops) *nops = 0;
    return pt_fail(PT_EUNSUPP, "ptrain was built without cuDNN");
}
int pt_cuda_attention_cudnn_fwd(void *out, void *lse, const void *q, const void *k, const void *v,
                                const pt_attn_dims *d)
{
    (void)out, (void)lse, (void)q, (void)k, (void)v, (void)d;
    return PT_ATTN_FALLBACK;
}
int pt_cuda_attention_cudnn_bwd(void *dq, void *dk, void *dv, const void *dout, const void *q, const void *k,
                                const void *v, const void *out, const void *lse, const pt_attn_dims *d)
{
    (void)dq, (void)dk, (void)dv, (void)dout, (void)q, (void)k, (void)v, (void)out, (void)lse, (void)d;
    return PT_ATTN_FALLBACK;
}
long pt_cuda_attention_cudnn_runs(void) { return 0; }
const char *pt_cuda_attention_cudnn_fallback(void) { return "ptrain was built without cuDNN"; }
void pt_cuda_attention_cudnn_release(void) {}

#else /* HAVE_CUDNN */

/* ---- graph construction -------------------------------------------------- */

/* The tensors' unique ids: the variant pack's names for the buffers */
enum {
    UID_Q = 1, UID_K, UID_V, UID_O, UID_STATS, UID_SCALE, UID_NEGINF, UID_DO, UID_DQ, UID_DK, UID_DV,
    UID_DSUM, /* backward: rowsum(dO * O), fp32 [B, NH, T] */
    UID_DQACC, /* backward: dQ in fp32 [B, NH, T, HS] */
    UID_ONE,
    UID_VIRTUAL = 100 /* and up: the intermediates */
};

#define MAX_DESC 192
#define MAX_OPS 32

/* Every descriptor a graph made (freed in reverse), its operations, and
 * the first failure (pt_cudnn_fail's code; later calls do nothing). */
typedef struct graph {
    cudnnBackendDescriptor_t desc[MAX_DESC];
    int n;
    cudnnBackendDescriptor_t ops[MAX_OPS];
    int nops;
    int64_t next_uid;
    int rc;
} graph;

static void graph_init(graph *g)
{
    memset(g, 0, sizeof *g);
    g->next_uid = UID_VIRTUAL;
}

static void graph_free(graph *g)
{
    while (g->n > 0) cudnnBackendDestroyDescriptor(g->desc[--g->n]);
    g->nops = 0;
}

static cudnnBackendDescriptor_t mk(graph *g, cudnnBackendDescriptorType_t t, const char *what)
{
    if (g->rc != PT_OK) return NULL;
    if (g->n == MAX_DESC) {
        g->rc = pt_fail(PT_EIO, "%s: more than %d cuDNN descriptors in one graph", what, MAX_DESC);
        return NULL;
    }
    cudnnBackendDescriptor_t d = NULL;
    cudnnStatus_t s = cudnnBackendCreateDescriptor(t, &d);
    if (s != CUDNN_STATUS_SUCCESS) {
        g->rc = pt_cudnn_fail((int)s, "cudnnBackendCreateDescriptor(%s, type %d)", what, (int)t);
        return NULL;
    }
    g->desc[g->n++] = d;
    return d;
}

static void set(graph *g, cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t a, cudnnBackendAttributeType_t t,
                int64_t n, const void *v, const char *what)
{
    if (g->rc != PT_OK) return;
    cudnnStatus_t s = cudnnBackendSetAttribute(d, a, t, n, v);
    if (s != CUDNN_STATUS_SUCCESS)
        g->rc = pt_cudnn_fail((int)s, "cudnnBackendSetAttribute(%s, attribute %d)", what, (int)a);
}

static void fin(graph *g, cudnnBackendDescriptor_t d, const char *what)
{
    if (g->rc != PT_OK) return;
    cudnnStatus_t s = cudnnBackendFinalize(d);
    if (s != CUDNN_STATUS_SUCCESS) g->rc = pt_cudnn_fail((int)s, "cudnnBackendFinalize(%s)", what);
}

static void add_op(graph *g, cudnnBackendDescriptor_t op, const char *what)
{
    if (g->rc != PT_OK) return;
    if (g->nops == MAX_OPS) {
        g->rc = pt_fail(PT_EIO, "%s: more than %d operations in one graph", what, MAX_OPS);
        return;
    }
    g->ops[g->nops++] = op;
}

/* A tensor: uid (0: the next virtual id), type, 4-d dims and strides;
 * virt: an intermediate no buffer holds; byval: a host scalar */
static cudnnBackendDescriptor_t tensor(graph *g, int64_t uid, cudnnDataType_t dt, const int64_t *dim,
                                       const int64_t *str, bool virt, bool byval, const char *what)
{
    cudnnBackendDescriptor_t t = mk(g, CUDNN_BACKEND_TENSOR_DESCRIPTOR, what);
    if (!uid) uid = g->next_uid++;
    const int64_t align = 16;
    set(g, t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt, what);
    set(g, t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dim, what);
    set(g, t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, str, what);
    set(g, t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid, what);
    set(g, t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align, what);
    set(g, t, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &virt, what);
    if (byval) set(g, t, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &byval, what);
    fin(g, t, what);
    return t;
}

static cudnnBackendDescriptor_t vt(graph *g, cudnnDataType_t dt, const int64_t *dim, const int64_t *str,
                                   const char *what)
{
    return tensor(g, 0, dt, dim, str, true, false, what);
}

/* y = mode(x, b, t) elementwise (b, t NULL where the mode has fewer
 * inputs); prec the compute type; axis: GEN_INDEX's dimension, else -1 */
static void pw(graph *g, cudnnPointwiseMode_t mode, cudnnDataType_t prec, int64_t axis, cudnnBackendDescriptor_t x,
               cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t t, cudnnBackendDescriptor_t y, const char *what)
{
    cudnnBackendDescriptor_t p = mk(g, CUDNN_BACKEND_POINTWISE_DESCRIPTOR, what);
    set(g, p, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode, what);
    set(g, p, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec, what);
    if (axis >= 0) set(g, p, CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis, what);
    fin(g, p, what);
    cudnnBackendDescriptor_t op = mk(g, CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, what);
    const float one = 1.0f;
    set(g, op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &p, what);
    set(g, op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x, what);
    if (b) set(g, op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b, what);
    if (t) set(g, op, CUDNN_ATTR_OPERATION_POINTWISE_TDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &t, what);
    set(g, op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y, what);
    set(g, op, CUDNN_ATTR_OPERATION_POINTWISE_ALPHA1, CUDNN_TYPE_FLOAT, 1, &one, what);
    set(g, op, CUDNN_ATTR_OPERATION_POINTWISE_ALPHA2, CUDNN_TYPE_FLOAT, 1, &one, what);
    fin(g, op, what);
    add_op(g, op, what);
}

/* c = a b (batched over the first two dims), fp32 compute */
static void matmul(graph *g, cudnnBackendDescriptor_t a, cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t c,
                   const char *what)
{
    cudnnBackendDescriptor_t m = mk(g, CUDNN_BACKEND_MATMUL_DESCRIPTOR, what);
    const cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
    set(g, m, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f32, what);
    fin(g, m, what);
    cudnnBackendDescriptor_t op = mk(g, CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, what);
    set(g, op, CUDNN_ATTR_OPERATION_MATMUL_ADESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &a, what);
    set(g, op, CUDNN_ATTR_OPERATION_MATMUL_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b, what);
    set(g, op, CUDNN_ATTR_OPERATION_MATMUL_CDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &c, what);
    set(g, op, CUDNN_ATTR_OPERATION_MATMUL_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &m, what);
    fin(g, op, what);
    add_op(g, op, what);
}

/* y = reduce(x) over the dims where y is 1, fp32 compute */
static void reduce(graph *g, cudnnReduceTensorOp_t how, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y,
                   const char *what)
{
    cudnnBackendDescriptor_t r = mk(g, CUDNN_BACKEND_REDUCTION_DESCRIPTOR, what);
    const cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
    set(g, r, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f32, what);
    set(g, r, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &how, what);
    fin(g, r, what);
    cudnnBackendDescriptor_t op = mk(g, CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR, what);
    set(g, op, CUDNN_ATTR_OPERATION_REDUCTION_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &r, what);
    set(g, op, CUDNN_ATTR_OPERATION_REDUCTION_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x, what);
    set(g, op, CUDNN_ATTR_OPERATION_REDUCTION_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y, what);
    fin(g, op, what);
    add_op(g, op, what);
}

/* y = x seen through y's dims and strides (the transposes) */
static void reshape(graph *g, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y, const char *what)
{
    cudnnBackendDescriptor_t op = mk(g, CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR, what);
    set(g, op, CUDNN_ATTR_OPERATION_RESHAPE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x, what);
    set(g, op, CUDNN_ATTR_OPERATION_RESHAPE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y, what);
    fin(g, op, what);
    add_op(g, op, what);
}

static const int64_t ONE4[4] = {1, 1, 1, 1};

/* the causal mask (the frontend's top-left diagonal band, right bound 0):
 * returns s where row >= col, -inf elsewhere */
static cudnnBackendDescriptor_t causal(graph *g, const pt_sdpa_layout *L, cudnnBackendDescriptor_t s,
                                       cudnnBackendDescriptor_t ninf)
{
    cudnnBackendDescriptor_t row = vt(g, CUDNN_DATA_INT32, L->s_dim, L->s_str, "causal row index");
    cudnnBackendDescriptor_t col = vt(g, CUDNN_DATA_INT32, L->s_dim, L->s_str, "causal column index");
    cudnnBackendDescriptor_t keep = vt(g, CUDNN_DATA_BOOLEAN, L->s_dim, L->s_str, "causal row >= column");
    cudnnBackendDescriptor_t out = vt(g, CUDNN_DATA_FLOAT, L->s_dim, L->s_str, "causal masked scores");
    pw(g, CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_FLOAT, 2, s, NULL, NULL, row, "causal: gen_index axis 2");
    pw(g, CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_FLOAT, 3, s, NULL, NULL, col, "causal: gen_index axis 3");
    pw(g, CUDNN_POINTWISE_CMP_GE, CUDNN_DATA_BOOLEAN, -1, row, col, NULL, keep, "causal: row >= col");
    pw(g, CUDNN_POINTWISE_BINARY_SELECT, CUDNN_DATA_FLOAT, -1, s, ninf, keep, out, "causal: select");
    return out;
}

/* The forward's tensors and operations (no handle needed) */
static void fwd_ops(graph *g, const pt_sdpa_layout *L)
{
    const cudnnDataType_t bf = CUDNN_DATA_BFLOAT16, f32 = CUDNN_DATA_FLOAT;
    cudnnBackendDescriptor_t Q = tensor(g, UID_Q, bf, L->q_dim, L->q_str, false, false, "Q");
    cudnnBackendDescriptor_t K = tensor(g, UID_K, bf, L->kt_dim, L->kt_str, false, false, "K^T");
    cudnnBackendDescriptor_t V = tensor(g, UID_V, bf, L->v_dim, L->v_str, false, false, "V");
    cudnnBackendDescriptor_t O = tensor(g, UID_O, bf, L->o_dim, L->o_str, false, false, "O");
    cudnnBackendDescriptor_t St = tensor(g, UID_STATS, f32, L->stats_dim, L->stats_str, false, false, "Stats");
    cudnnBackendDescriptor_t sc = tensor(g, UID_SCALE, f32, ONE4, ONE4, false, true, "scale");
    cudnnBackendDescriptor_t ninf = tensor(g, UID_NEGINF, f32, ONE4, ONE4, false, true, "-inf");

    cudnnBackendDescriptor_t s0 = vt(g, f32, L->s_dim, L->s_str, "Q K^T");
    matmul(g, Q, K, s0, "bmm1 Q K^T");
    cudnnBackendDescriptor_t s1 = vt(g, f32, L->s_dim, L->s_str, "scaled scores");
    pw(g, CUDNN_POINTWISE_MUL, f32, -1, s0, sc, NULL, s1, "attn_scale");
    cudnnBackendDescriptor_t s2 = causal(g, L, s1, ninf);
    cudnnBackendDescriptor_t mx = vt(g, f32, L->stats_dim, L->stats_str, "row max");
    reduce(g, CUDNN_REDUCE_TENSOR_MAX, s2, mx, "softmax max");
    cudnnBackendDescriptor_t s3 = vt(g, f32, L->s_dim, L->s_str, "scores - max");
    pw(g, CUDNN_POINTWISE_SUB, f32, -1, s2, mx, NULL, s3, "softmax sub");
    cudnnBackendDescriptor_t e = vt(g, f32, L->s_dim, L->s_str, "exp");
    pw(g, CUDNN_POINTWISE_EXP, f32, -1, s3, NULL, NULL, e, "softmax exp");
    cudnnBackendDescriptor_t sum = vt(g, f32, L->stats_dim, L->stats_str, "row sum");
    reduce(g, CUDNN_REDUCE_TENSOR_ADD, e, sum, "softmax sum");
    cudnnBackendDescriptor_t lg = vt(g, f32, L->stats_dim, L->stats_str, "log row sum");
    pw(g, CUDNN_POINTWISE_LOG, f32, -1, sum, NULL, NULL, lg, "softmax log");
    pw(g, CUDNN_POINTWISE_ADD, f32, -1, mx, lg, NULL, St, "softmax stats = max + log sum");
    cudnnBackendDescriptor_t P = vt(g, bf, L->s_dim, L->s_str, "P");
    pw(g, CUDNN_POINTWISE_DIV, f32, -1, e, sum, NULL, P, "softmax div");
    matmul(g, P, V, O, "bmm2 P V");
}

/* The backward's tensors and operations (no handle needed) */
static void bwd_ops(graph *g, const pt_sdpa_layout *L)
{
    const cudnnDataType_t bf = CUDNN_DATA_BFLOAT16, f32 = CUDNN_DATA_FLOAT;
    cudnnBackendDescriptor_t Q = tensor(g, UID_Q, bf, L->q_dim, L->q_str, false, false, "Q");
    cudnnBackendDescriptor_t K = tensor(g, UID_K, bf, L->kt_dim, L->kt_str, false, false, "K^T");
    cudnnBackendDescriptor_t V = tensor(g, UID_V, bf, L->vt_dim, L->vt_str, false, false, "V^T");
    cudnnBackendDescriptor_t O = tensor(g, UID_O, bf, L->o_dim, L->o_str, false, false, "O");
    cudnnBackendDescriptor_t St = tensor(g, UID_STATS, f32, L->stats_dim, L->stats_str, false, false, "Stats");
    cudnnBackendDescriptor_t dO = tensor(g, UID_DO, bf, L->o_dim, L->o_str, false, false, "dO");
    cudnnBackendDescriptor_t dQ = tensor(g, UID_DQ, bf, L->g_dim, L->g_str, false, false, "dQ");
    cudnnBackendDescriptor_t dK = tensor(g, UID_DK, bf, L->gk_dim, L->gk_str, false, false, "dK");
    cudnnBackendDescriptor_t dV = tensor(g, UID_DV, bf, L->gk_dim, L->gk_str, false, false, "dV");
    const bool gqa = L->gk_dim[1] != L->g_dim[1]; /* fewer KV heads: dK, dV per query head, then summed */
    const int64_t B = L->q_dim[0], H = L->q_dim[1], T = L->q_dim[2], D = L->q_dim[3];
    int64_t acc_str[4], dod_str[4];
    set4(acc_str, H * T * D, T * D, D, 1);
    set4(dod_str, H * T * D, T * D, H * D, 1); /* the frontend's (a virtual tensor's strides do not matter) */
    cudnnBackendDescriptor_t dsum = tensor(g, UID_DSUM, f32, L->stats_dim, L->stats_str, false, false, "rowsum(dO*O)");
    cudnnBackendDescriptor_t dqacc = tensor(g, UID_DQACC, f32, L->q_dim, acc_str, false, false, "dQ accumulator");
    cudnnBackendDescriptor_t sc = tensor(g, UID_SCALE, f32, ONE4, ONE4, false, true, "scale");
    cudnnBackendDescriptor_t ninf = tensor(g, UID_NEGINF, f32, ONE4, ONE4, false, true, "-inf");
    cudnnBackendDescriptor_t one = tensor(g, UID_ONE, f32, ONE4, ONE4, false, true, "1");
    (void)B;

    /* Dsum = rowsum(dO * O) */
    cudnnBackendDescriptor_t doo = vt(g, f32, L->o_dim, dod_str, "dO * O");
    pw(g, CUDNN_POINTWISE_MUL, f32, -1, dO, O, NULL, doo, "mul dO O");
    cudnnBackendDescriptor_t red = vt(g, f32, L->stats_dim, L->stats_str, "rowsum dO * O");
    reduce(g, CUDNN_REDUCE_TENSOR_ADD, doo, red, "reduce dO * O");
    pw(g, CUDNN_POINTWISE_MUL, f32, -1, red, one, NULL, dsum, "rowsum * 1");
    /* P = exp(S scale - Stats), masked */
    cudnnBackendDescriptor_t s0 = vt(g, f32, L->s_dim, L->s_str, "Q K^T");
    matmul(g, Q, K, s0, "matmul Q K^T");
    cudnnBackendDescriptor_t s1 = vt(g, f32, L->s_dim, L->s_str, "scaled scores");
    pw(g, CUDNN_POINTWISE_MUL, f32, -1, s0, sc, NULL, s1, "attn_scale");
    cudnnBackendDescriptor_t s2 = vt(g, f32, L->s_dim, L->s_str, "scores - Stats");
    pw(g, CUDNN_POINTWISE_SUB, f32, -1, s1, St, NULL, s2, "sub Stats");
    cudnnBackendDescriptor_t s3 = causal(g, L, s2, ninf);
    cudnnBackendDescriptor_t e = vt(g, f32, L->s_dim, L->s_str, "P = exp");
    pw(g, CUDNN_POINTWISE_EXP, f32, -1, s3, NULL, NULL, e, "exp");
    /* dV = P^T dO */
    cudnnBackendDescriptor_t pT = vt(g, bf, L->st_dim, L->st_str, "P^T");
    reshape(g, e, pT, "reshape P^T");
    if (gqa) {
        cudnnBackendDescriptor_t dVf = vt(g, bf, L->fh_dim, L->fh_str, "dV per query head");
        matmul(g, pT, dO, dVf, "matmul P^T dO");
        reduce(g, CUDNN_REDUCE_TENSOR_ADD, dVf, dV, "reduce dV over the query heads of a KV head");
    } else
        matmul(g, pT, dO, dV, "matmul P^T dO");
    /* dS = (dO V^T - Dsum) P scale */
    cudnnBackendDescriptor_t dp = vt(g, f32, L->s_dim, L->s_str, "dO V^T");
    matmul(g, dO, V, dp, "matmul dO V^T");
    cudnnBackendDescriptor_t t1 = vt(g, f32, L->s_dim, L->s_str, "dP - Dsum");
    pw(g, CUDNN_POINTWISE_SUB, f32, -1, dp, dsum, NULL, t1, "sub dP Dsum");
    cudnnBackendDescriptor_t t2 = vt(g, f32, L->s_dim, L->s_str, "(dP - Dsum) P");
    pw(g, CUDNN_POINTWISE_MUL, f32, -1, t1, e, NULL, t2, "mul P");
    cudnnBackendDescriptor_t ds = vt(g, f32, L->s_dim, L->s_str, "dS");
    pw(g, CUDNN_POINTWISE_MUL, f32, -1, t2, sc, NULL, ds, "mul dS scale");
    /* dK = dS^T Q */
    cudnnBackendDescriptor_t dsT = vt(g, bf, L->st_dim, L->st_str, "dS^T");
    reshape(g, ds, dsT, "reshape dS^T");
    if (gqa) {
        cudnnBackendDescriptor_t dKf = vt(g, bf, L->fh_dim, L->fh_str, "dK per query head");
        matmul(g, dsT, Q, dKf, "matmul dS^T Q");
        reduce(g, CUDNN_REDUCE_TENSOR_ADD, dKf, dK, "reduce dK over the query heads of a KV head");
    } else
        matmul(g, dsT, Q, dK, "matmul dS^T Q");
    /* dQ = dS K (K^T seen back as K) */
    cudnnBackendDescriptor_t Kr = vt(g, bf, L->k_dim, L->k_str, "K");
    reshape(g, K, Kr, "reshape K");
    matmul(g, ds, Kr, dqacc, "matmul dS K");
    pw(g, CUDNN_POINTWISE_IDENTITY, f32, -1, dqacc, NULL, NULL, dQ, "identity dQ");
}

static void build_ops(graph *g, const pt_attn_dims *d, int bwd, int lds)
{
    pt_sdpa_layout L;
    pt_sdpa_layout_of(d, lds, &L);
    graph_init(g);
    if (bwd) bwd_ops(g, &L);
    else fwd_ops(g, &L);
}

int pt_sdpa_ops_check(const pt_attn_dims *d, int bwd, int lds, int *nops)
{
    const char *why = pt_attn_cudnn_rule(d, 0);
    if (why) return pt_fail(PT_EINVAL, "the cuDNN SDPA graph does not take this shape: %s", why);
    graph *g = malloc(sizeof *g);
    if (!g) return pt_fail(PT_ENOMEM, "no memory for a cuDNN graph (%zu bytes)", sizeof *g);
    build_ops(g, d, bwd, lds);
    int rc = g->rc;
    if (nops) *nops = g->nops;
    graph_free(g);
    free(g);
    return rc;
}

/* ---- plans ------------------------------------------------------------------ */

typedef struct plan {
    struct plan *next;
    int bwd, B, NH, NKV, T, HS, ldq, ldkv, lds;
    int ok; /* 0: cuDNN has no plan for it (the flash kernels run) */
    graph g;
    cudnnBackendDescriptor_t exec; /* the execution plan (not in g) */
    int64_t ws;                    /* its workspace, bytes */
} plan;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static plan *plans;
static cudnnHandle_t handle;
static long runs;
static char fallback_msg[512];

/* The operation graph, heuristics and the first engine configuration
 * that finalizes, into p->exec; PT_OK or the failure (pt_fail) */
static int plan_finish(plan *p)
{
    graph *g = &p->g;
    cudnnBackendDescriptor_t og = mk(g, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, "operation graph");
    set(g, og, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, g->nops, g->ops, "operation graph");
    set(g, og, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle, "operation graph");
    fin(g, og, "operation graph");
    if (g->rc != PT_OK) return g->rc;
    const cudnnBackendHeurMode_t modes[2] = {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK};
    cudnnStatus_t last = CUDNN_STATUS_NOT_SUPPORTED;
    int tried = 0;
    for (int m = 0; m < 2; m++) {
        cudnnBackendDescriptor_t h = mk(g, CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, "engine heuristics");
        set(g, h, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &og, "engine heuristics");
        set(g, h, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &modes[m], "engine heuristics");
        fin(g, h, "engine heuristics");
        if (g->rc != PT_OK) return g->rc;
        int64_t count = 0;
        cudnnStatus_t s = cudnnBackendGetAttribute(h, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0,
                                                   &count, NULL);
        if (s != CUDNN_STATUS_SUCCESS)
            return pt_cudnn_fail((int)s, "cudnnBackendGetAttribute(engine heuristics mode %d: count)", (int)modes[m]);
        if (count > 16) count = 16;
        cudnnBackendDescriptor_t cfg[16];
        for (int64_t i = 0; i < count; i++) cfg[i] = mk(g, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, "engine config");
        if (g->rc != PT_OK) return g->rc;
        int64_t got = 0;
        if (count > 0) {
            s = cudnnBackendGetAttribute(h, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &got,
                                         cfg);
            if (s != CUDNN_STATUS_SUCCESS)
                return pt_cudnn_fail((int)s, "cudnnBackendGetAttribute(engine heuristics mode %d: %lld configs)",
                                     (int)modes[m], (long long)count);
        }
        for (int64_t i = 0; i < got && i < count; i++) {
            cudnnBackendDescriptor_t e = NULL;
            s = cudnnBackendCreateDescriptor(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &e);
            if (s != CUDNN_STATUS_SUCCESS) return pt_cudnn_fail((int)s, "cudnnBackendCreateDescriptor(execution plan)");
            s = cudnnBackendSetAttribute(e, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
            if (s == CUDNN_STATUS_SUCCESS)
                s = cudnnBackendSetAttribute(e, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                             1, &cfg[i]);
            if (s == CUDNN_STATUS_SUCCESS) s = cudnnBackendFinalize(e);
            tried++;
            if (s == CUDNN_STATUS_SUCCESS) {
                int64_t ws = 0, n = 0;
                s = cudnnBackendGetAttribute(e, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &n, &ws);
                if (s != CUDNN_STATUS_SUCCESS) {
                    cudnnBackendDestroyDescriptor(e);
                    return pt_cudnn_fail((int)s, "cudnnBackendGetAttribute(execution plan workspace size)");
                }
                p->exec = e;
                p->ws = ws < 0 ? 0 : ws;
                return PT_OK;
            }
            last = s;
            cudnnBackendDestroyDescriptor(e);
        }
    }
    return pt_cudnn_fail((int)last, "no cuDNN engine configuration finalizes (%d tried, heuristics A and fallback)",
                         tried);
}

/* The cached plan of the shape, built on first use (NULL: no memory);
 * lock held */
static plan *plan_get(int bwd, const pt_attn_dims *d, int lds)
{
    for (plan *p = plans; p; p = p->next)
        if (p->bwd == bwd && p->B == d->B && p->NH == d->NH && p->NKV == pt_attn_nkv(d) && p->T == d->Tq &&
            p->HS == d->HS && p->ldq == d->ldq && p->ldkv == d->ldkv && p->lds == lds)
            return p;
    plan *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->bwd = bwd, p->B = d->B, p->NH = d->NH, p->NKV = pt_attn_nkv(d), p->T = d->Tq, p->HS = d->HS, p->ldq = d->ldq,
    p->ldkv = d->ldkv;
    p->lds = lds;
    int rc = PT_OK;
    if (!handle) {
        cudnnStatus_t s = cudnnCreate(&handle);
        if (s != CUDNN_STATUS_SUCCESS) {
            handle = NULL;
            rc = pt_cudnn_fail((int)s, "cudnnCreate");
        }
    }
    if (rc == PT_OK) {
        build_ops(&p->g, d, bwd, lds);
        rc = p->g.rc;
    }
    if (rc == PT_OK) rc = plan_finish(p);
    p->ok = rc == PT_OK;
    if (!p->ok) {
        snprintf(fallback_msg, sizeof fallback_msg, "%s", pt_errmsg());
        pt_log(1, "attention: cuDNN has no %s plan for B=%d NH=%d NKV=%d T=%d HS=%d ldq=%d ldkv=%d (%s); the flash "
               "kernels run it",
               bwd ? "backward" : "forward", d->B, d->NH, pt_attn_nkv(d), d->Tq, d->HS, d->ldq, d->ldkv, fallback_msg);
        cudaGetLastError(); /* nothing of this is a later kernel's error */
        if (p->exec) cudnnBackendDestroyDescriptor(p->exec);
        p->exec = NULL;
        graph_free(&p->g);
    }
    p->next = plans;
    plans = p;
    return p;
}

/* Run p's plan on the compute stream with the n buffers (uids[i] ->
 * ptrs[i]) and a workspace; lock held */
static int execute(const plan *p, int n, const int64_t *uids, void **ptrs, void *ws)
{
    cudnnStatus_t s = cudnnSetStream(handle, pt_cuda_stream_compute());
    if (s != CUDNN_STATUS_SUCCESS) return pt_cudnn_fail((int)s, "cudnnSetStream");
    cudnnBackendDescriptor_t vp = NULL;
    s = cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &vp);
    if (s != CUDNN_STATUS_SUCCESS) return pt_cudnn_fail((int)s, "cudnnBackendCreateDescriptor(variant pack)");
    s = cudnnBackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, n, uids);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, n, ptrs);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws);
    if (s == CUDNN_STATUS_SUCCESS) s = cudnnBackendFinalize(vp);
    int rc = PT_OK;
    if (s != CUDNN_STATUS_SUCCESS) rc = pt_cudnn_fail((int)s, "variant pack of %d buffers", n);
    else {
        s = cudnnBackendExecute(handle, p->exec, vp);
        if (s != CUDNN_STATUS_SUCCESS)
            rc = pt_cudnn_fail((int)s, "cudnnBackendExecute(SDPA %s, B=%d NH=%d T=%d HS=%d)",
                               p->bwd ? "backward" : "forward", p->B, p->NH, p->T, p->HS);
    }
    cudnnBackendDestroyDescriptor(vp);
    return rc;
}

static size_t round256(size_t n) { return (n + 255) / 256 * 256; }

int pt_cuda_attention_cudnn_fwd(void *out, void *lse, const void *q, const void *k, const void *v,
                                const pt_attn_dims *d)
{
    const char *why = pt_attn_cudnn_rule(d, 0);
    if (why) return pt_fail(PT_EINVAL, "attention on cuDNN: the shape does not apply: %s", why);
    pthread_mutex_lock(&lock);
    plan *p = plan_get(0, d, 0);
    int rc = !p ? pt_fail(PT_ENOMEM, "no memory for a cuDNN plan") : p->ok ? PT_OK : PT_ATTN_FALLBACK;
    if (rc == PT_OK) {
        cudaStream_t st = pt_cuda_stream_compute();
        void *ws = NULL;
        cudaError_t e = p->ws > 0 ? cudaMallocAsync(&ws, (size_t)p->ws, st) : cudaSuccess;
        if (e != cudaSuccess) rc = pt_cuda_fail(e, "cudaMallocAsync(%lld bytes of cuDNN workspace)", (long long)p->ws);
        if (rc == PT_OK) {
            float scale = 1.0f / sqrtf((float)d->HS), ninf = -INFINITY;
            const int64_t uids[7] = {UID_Q, UID_K, UID_V, UID_O, UID_STATS, UID_SCALE, UID_NEGINF};
            void *ptrs[7] = {(void *)q, (void *)k, (void *)v, out, lse, &scale, &ninf};
            rc = execute(p, 7, uids, ptrs, ws);
            if (ws) {
                e = cudaFreeAsync(ws, st);
                if (rc == PT_OK && e != cudaSuccess) rc = pt_cuda_fail(e, "cudaFreeAsync(cuDNN workspace)");
            }
        }
        if (rc == PT_OK) runs++;
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

int pt_cuda_attention_cudnn_bwd(void *dq, void *dk, void *dv, const void *dout, const void *q, const void *k,
                                const void *v, const void *out, const void *lse, const pt_attn_dims *d)
{
    const char *why = pt_attn_cudnn_rule(d, 0);
    if (why) return pt_fail(PT_EINVAL, "attention on cuDNN: the shape does not apply: %s", why);
    const size_t C = (size_t)d->NH * d->HS, KVC = (size_t)pt_attn_nkv(d) * d->HS, rows = (size_t)d->B * d->Tq;
    const size_t W = C + 2 * KVC; /* a packed row: q | k | v */
    const int packed = d->ldq == d->ldkv && (size_t)d->ldq >= W && (char *)dk == (char *)dq + 2 * C &&
                       (char *)dv == (char *)dq + 2 * (C + KVC);
    const int lds = packed ? (int)W : (int)C;
    pthread_mutex_lock(&lock);
    plan *p = plan_get(1, d, lds);
    int rc = !p ? pt_fail(PT_ENOMEM, "no memory for a cuDNN plan") : p->ok ? PT_OK : PT_ATTN_FALLBACK;
    if (rc == PT_OK) {
        /* one block: workspace | Dsum fp32 [B, NH, T] | dQ accumulator fp32 [B, NH, T, HS] | dq, dk, dv bf16 */
        const size_t nws = round256((size_t)p->ws), nsum = round256(rows * d->NH * sizeof(float));
        const size_t nacc = round256(rows * C * sizeof(float)), ng = round256(rows * W * 2);
        cudaStream_t st = pt_cuda_stream_compute();
        char *buf = NULL;
        cudaError_t e = cudaMallocAsync((void **)&buf, nws + nsum + nacc + ng, st);
        if (e != cudaSuccess)
            rc = pt_cuda_fail(e, "cudaMallocAsync(%zu bytes of cuDNN workspace and scratch)", nws + nsum + nacc + ng);
        if (rc == PT_OK) {
            char *sum = buf + nws, *acc = sum + nsum, *g = acc + nacc;
            char *gq = g, *gk = packed ? g + 2 * C : g + rows * C * 2;
            char *gv = packed ? g + 2 * (C + KVC) : gk + rows * KVC * 2;
            float scale = 1.0f / sqrtf((float)d->HS), ninf = -INFINITY, one = 1.0f;
            e = cudaMemsetAsync(acc, 0, rows * C * sizeof(float), st); /* cuDNN < 9.6 needed it; harmless */
            if (e != cudaSuccess) rc = pt_cuda_fail(e, "cudaMemsetAsync(dQ accumulator)");
            const int64_t uids[14] = {UID_Q,  UID_K,  UID_V,  UID_O,    UID_STATS, UID_DO,    UID_DQ,
                                      UID_DK, UID_DV, UID_DSUM, UID_DQACC, UID_SCALE, UID_NEGINF, UID_ONE};
            void *ptrs[14] = {(void *)q, (void *)k, (void *)v, (void *)out, (void *)lse, (void *)dout, gq,
                              gk,        gv,        sum,       acc,         &scale,      &ninf,        &one};
            if (rc == PT_OK) rc = execute(p, 14, uids, ptrs, p->ws > 0 ? buf : NULL);
            if (rc == PT_OK) {
                /* ops.h: the backward adds */
                if (packed) pt_cuda_add2d(dq, (size_t)d->ldq, gq, W, rows, W, PT_BF16);
                else {
                    pt_cuda_add2d(dq, (size_t)d->ldq, gq, C, rows, C, PT_BF16);
                    pt_cuda_add2d(dk, (size_t)d->ldkv, gk, KVC, rows, KVC, PT_BF16);
                    pt_cuda_add2d(dv, (size_t)d->ldkv, gv, KVC, rows, KVC, PT_BF16);
                }
            }
            e = cudaFreeAsync(buf, st); /* stream-ordered: after the adds */
            if (rc == PT_OK && e != cudaSuccess) rc = pt_cuda_fail(e, "cudaFreeAsync(cuDNN scratch)");
        }
        if (rc == PT_OK) runs++;
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

long pt_cuda_attention_cudnn_runs(void)
{
    pthread_mutex_lock(&lock);
    long n = runs;
    pthread_mutex_unlock(&lock);
    return n;
}

const char *pt_cuda_attention_cudnn_fallback(void) { return fallback_msg; }

void pt_cuda_attention_cudnn_release(void)
{
    pthread_mutex_lock(&lock);
    while (plans) {
        plan *p = plans;
        plans = p->next;
        if (p->exec) cudnnBackendDestroyDescriptor(p->exec);
        graph_free(&p->g);
        free(p);
    }
    if (handle) cudnnDestroy(handle);
    handle = NULL;
    pthread_mutex_unlock(&lock);
}

#endif /* HAVE_CUDNN */
