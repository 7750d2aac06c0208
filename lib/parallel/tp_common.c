/* SPDX-License-Identifier: MIT */
/* Pieces every layout (tp1d.c, tp2d.c, tp3d.c) shares: a geometry hook's
 * sizes, scratch buffers, block slicing of full tensors, LayerNorm and the
 * vocab-parallel classifier over a group.  Below the layouts and the mode
 * -> layout table (layout.c), which it never calls.  See layout.h. */
#include "parallel/layout.h"
#include "shape/shape.h"

#include <string.h>

int pt_geom_shape(const pt_pctx *c, int (*fn)(const pt_shape_in *, pt_shape *), int B, int T, int C, int NH, int V,
                  pt_geom *g)
{
    /* T is already the length held: sp 1 */
    const pt_shape_in in = {.C = C, .NH = NH, .V = V, .T = T, .B = B, .mode = (int)c->plan.mode, .tp = c->plan.tp,
                            .dims = {c->tp_dims[0], c->tp_dims[1], c->tp_dims[2]}, .sp = 1};
    pt_shape s;
    int rc = fn(&in, &s);
    if (rc) return rc;
    memset(g, 0, sizeof *g);
    g->B = B;
    g->T = T;
    g->V = V;
    g->Bl = (int)s.Bl;
    g->Cr = (int)s.Cr;
    g->NHl = (int)s.NHl;
    g->Cl = (int)s.Cl;
    g->Fl = (int)s.Fl;
    g->Vp = (int)s.Vp;
    g->Vl = (int)s.Vl;
    return PT_OK;
}

float *pt_scratch(pt_arena *a, size_t n, const char *what)
{
    float *p = pt_arena_alloc(a, (n ? n : 1) * sizeof(float));
    if (!p) pt_fail(PT_ENOMEM, "out of memory for %zu floats of %s scratch (%s)", n, what, pt_errmsg());
    return p;
}

void *pt_scratch_t(pt_arena *a, size_t n, pt_dtype t, const char *what)
{
    void *p = pt_arena_alloc(a, (n ? n : 1) * pt_dtype_size(t));
    if (!p) pt_fail(PT_ENOMEM, "out of memory for %zu %s elements of %s scratch (%s)", n, pt_dtype_name(t), what,
                    pt_errmsg());
    return p;
}

int64_t pt_block_row(int64_t rows, int parts, int blk, int stacked, int64_t r)
{
    if (stacked < 2) return (int64_t)blk * (rows / parts) + r;
    int64_t part = rows / stacked, piece = part / parts;
    int64_t t = r / piece, o = r % piece;
    return t * part + (int64_t)blk * piece + o;
}

int pt_pclass_stacked(pt_pclass cls)
{
    return cls == PT_P_QKV_W || cls == PT_P_QKV_B ? 3 : cls == PT_P_COL2_W || cls == PT_P_COL2_B ? 2 : 1;
}

void pt_block_copy(const pt_ops *ops, const float *full, float *local, int64_t rows, int64_t cols, int rparts,
                   int rblk, int qkv, int rsubparts, int rsub, int cparts, int cblk)
{
    int64_t nblk = rows / rparts, nsub = nblk / rsubparts, cl = cols / cparts;
    /* one 2-D copy per run of consecutive full rows (one run, or one per stacked block) */
    for (int64_t r = 0; r < nsub;) {
        int64_t fr = pt_block_row(rows, rparts, rblk, qkv, (int64_t)rsub * nsub + r), run = 1;
        while (r + run < nsub && pt_block_row(rows, rparts, rblk, qkv, (int64_t)rsub * nsub + r + run) == fr + run) run++;
        ops->copy2d(local + r * cl, sizeof(float) * (size_t)cl, full + fr * cols + (int64_t)cblk * cl,
                    sizeof(float) * (size_t)cols, sizeof(float) * (size_t)cl, (size_t)run);
        r += run;
    }
}

int pt_layernorm_fwd(pt_comm *g, const pt_ops *ops, pt_arena *a, void *out, float *mean, float *rstd,
                     const void *x, const void *w, const void *b, int N, int Cl, int C)
{
    if (g->size == 1 && Cl == C) {
        ops->layernorm_fwd(out, mean, rstd, x, w, b, N, C);
        return PT_OK;
    }
    float *s = pt_scratch(a, (size_t)N, "layernorm");
    if (!s) return PT_ENOMEM;
    /* local row sums -> group sums -> mean and local squared deviations ->
     * group sums -> normalise (the arithmetic is the backend's, the sums
     * over the group are this layout's) */
    ops->layernorm_rowsum(s, x, N, Cl);
    int rc = pt_allreduce_sum(g, s, (size_t)N);
    if (!rc) {
        ops->layernorm_rowvar(mean, s, x, s, N, Cl, C);
        rc = pt_allreduce_sum(g, s, (size_t)N);
    }
    if (!rc) ops->layernorm_apply(out, rstd, x, mean, s, w, b, N, Cl, C);
    pt_arena_free(a, s);
    return rc;
}

int pt_layernorm_bwd(pt_comm *g, const pt_ops *ops, pt_arena *a, void *dx, float *dw, float *db,
                     const void *dy, const void *x, const void *w, const float *mean, const float *rstd,
                     int N, int Cl, int C)
{
    if (g->size == 1 && Cl == C) {
        ops->layernorm_bwd(dx, dw, db, dy, x, w, mean, rstd, N, C);
        return PT_OK;
    }
    /* s[2n] = sum_c dy*w, s[2n+1] = sum_c dy*w*xhat over the row's C columns */
    float *s = pt_scratch(a, 2 * (size_t)N, "layernorm");
    if (!s) return PT_ENOMEM;
    ops->layernorm_bwd_rowsums(s, dy, x, w, mean, rstd, N, Cl);
    int rc = pt_allreduce_sum(g, s, 2 * (size_t)N);
    if (!rc) ops->layernorm_bwd_apply(dx, dw, db, dy, x, w, mean, rstd, s, N, Cl, C);
    pt_arena_free(a, s);
    return rc;
}

int pt_rmsnorm_fwd(pt_comm *g, const pt_ops *ops, pt_arena *a, void *out, float *rstd, const void *x, const void *w,
                   int N, int Cl, int C, double eps)
{
    if (g->size == 1 && Cl == C) {
        ops->rmsnorm_fwd(out, rstd, x, w, N, C, eps);
        return PT_OK;
    }
    /* local sums of squares -> group sums -> normalise; rstd overwrites
     * the sums row by row (ops.h allows it) */
    ops->rmsnorm_rowsumsq(rstd, x, N, Cl);
    int rc = pt_allreduce_sum(g, rstd, (size_t)N);
    if (!rc) ops->rmsnorm_apply(out, rstd, x, rstd, w, N, Cl, C, eps);
    (void)a; /* no scratch: the sums live in rstd until apply replaces them */
    return rc;
}

int pt_rmsnorm_bwd(pt_comm *g, const pt_ops *ops, pt_arena *a, void *dx, float *dw, const void *dy, const void *x,
                   const void *w, const float *rstd, int N, int Cl, int C)
{
    if (g->size == 1 && Cl == C) {
        ops->rmsnorm_bwd(dx, dw, dy, x, w, rstd, N, C);
        return PT_OK;
    }
    /* s[n] = sum_c dy*w*xhat over the row's C columns */
    float *s = pt_scratch(a, (size_t)N, "rmsnorm");
    if (!s) return PT_ENOMEM;
    ops->rmsnorm_bwd_rowsums(s, dy, x, w, rstd, N, Cl);
    int rc = pt_allreduce_sum(g, s, (size_t)N);
    if (!rc) ops->rmsnorm_bwd_apply(dx, dw, dy, x, w, rstd, s, N, Cl, C);
    pt_arena_free(a, s);
    return rc;
}

int pt_classifier_vblock(int Vl) { return Vl < PT_CLASSIFIER_VBLOCK ? Vl : PT_CLASSIFIER_VBLOCK; }

int pt_classifier_fwd(pt_comm *g, const pt_ops *ops, pt_arena *a, float *losses, float *stats, const void *x,
                      const void *w, const int32_t *tgt, int v0, int vreal, int N, int C, int Vl, int ks)
{
    float *rowmax = stats, *sumexp = stats + N, *tl = stats + 2 * N;
    const int vb = pt_classifier_vblock(Vl);
    float *work = pt_scratch(a, pt_classifier_work_elems(ops, N, C, vb, 0), "classifier logits block");
    if (!work) return PT_ENOMEM;
    ops->classifier_fwd(stats, x, w, tgt, work, vb, v0, vreal, N, C, Vl, ks);
    pt_arena_free(a, work);
    /* this shard's statistics -> the group's: max of the row maxima, each
     * shard's sum of exp moved to that max, then the sums */
    float *local = g->size > 1 ? pt_scratch(a, (size_t)N, "classifier row max") : NULL;
    if (g->size > 1 && !local) return PT_ENOMEM;
    if (local) ops->copy(local, rowmax, (size_t)N, PT_F32);
    int rc = pt_allreduce_max(g, rowmax, (size_t)N);
    if (!rc && local) ops->xent_rescale(sumexp, local, rowmax, N);
    pt_arena_free(a, local);
    if (!rc) rc = pt_allreduce_sum(g, sumexp, 2 * (size_t)N); /* sumexp and target logit are adjacent */
    if (rc) return rc;
    ops->xent_loss(losses, rowmax, sumexp, tl, N);
    return PT_OK;
}

int pt_classifier_bwd(const pt_ops *ops, pt_arena *a, void *dx, float *dw, const float *stats, const void *x,
                      const void *w, const int32_t *tgt, const float *dloss, int v0, int vreal, int N, int C, int Vl,
                      int ks)
{
    const int vb = pt_classifier_vblock(Vl);
    float *work = pt_scratch(a, pt_classifier_work_elems(ops, N, C, vb, 1), "classifier logits block");
    if (!work) return PT_ENOMEM;
    ops->classifier_bwd(dx, dw, x, w, stats, tgt, dloss, work, vb, v0, vreal, N, C, Vl, ks);
    pt_arena_free(a, work);
    return PT_OK;
}

/* this shard's statistics of a chunk's R rows [3R] -> the group's (as pt_classifier_fwd) */
static int merge_stats(pt_comm *g, const pt_ops *ops, pt_arena *a, float *cs, int R)
{
    if (g->size == 1) return PT_OK;
    float *local = pt_scratch(a, (size_t)R, "classifier row max");
    if (!local) return PT_ENOMEM;
    ops->copy(local, cs, (size_t)R, PT_F32);
    int rc = pt_allreduce_max(g, cs, (size_t)R);
    if (!rc) ops->xent_rescale(cs + R, local, cs, R);
    pt_arena_free(a, local);
    return rc ? rc : pt_allreduce_sum(g, cs + R, 2 * (size_t)R); /* sumexp and target logit are adjacent */
}

int pt_classifier_step(pt_comm *g, const pt_ops *ops, pt_arena *a, float *losses, float *stats, void *dx, float *dw,
                       const void *x, const void *w, const int32_t *tgt, const float *dloss, int v0, int vreal, int N,
                       int C, int Vl)
{
    if (!ops->classifier_rows_fwd || !ops->classifier_rows_bwd)
        return pt_fail(PT_EUNSUPP, "the %s ops table has no chunked classifier (classifier_rows_fwd/bwd)", ops->name);
    const int R = pt_classifier_chunk_rows(N, Vl);
    float *logits = pt_scratch(a, (size_t)R * (size_t)Vl, "classifier chunk logits");
    float *work = logits ? pt_scratch(a, pt_classifier_rows_work_elems(R, C, Vl), "classifier dX partials") : NULL;
    float *cs = work ? pt_scratch(a, 3 * (size_t)R, "classifier chunk statistics") : NULL;
    int rc = cs ? PT_OK : PT_ENOMEM;
    for (int r0 = 0; r0 < N && !rc; r0 += R) {
        const int n = N - r0 < R ? N - r0 : R;
        const void *xr = pt_elem(x, (size_t)r0 * C, ops->act);
        /* the chunk's statistics are [3n]: rowmax, sumexp and target logit of its n rows */
        ops->classifier_rows_fwd(cs, logits, xr, w, tgt + r0, work, v0, vreal, n, C, Vl);
        rc = merge_stats(g, ops, a, cs, n);
        if (rc) break;
        ops->xent_loss(losses + r0, cs, cs + n, cs + 2 * (size_t)n, n);
        for (int k = 0; k < 3; k++) ops->copy(stats + (size_t)k * N + r0, cs + (size_t)k * n, (size_t)n, PT_F32);
        ops->classifier_rows_bwd(dx ? pt_elem(dx, (size_t)r0 * C, ops->act) : NULL, dw, xr, w, logits, cs, tgt + r0,
                                 dloss + r0, work, v0, vreal, n, C, Vl);
    }
    pt_arena_free(a, cs);
    pt_arena_free(a, work);
    pt_arena_free(a, logits);
    return rc;
}
