/* SPDX-License-Identifier: MIT */
/* The profiling ops table (lib/backend/ops_profile.h).
 *
 *  1. Every entry of pt_ops is wrapped exactly where the inner table has
 *     one (a new op added to pt_ops but not to the profiler fails here), for
 *     each CPU table; name and dtypes are the inner table's.
 *  2. A call through the wrapper is the inner call: matmul, the chunked
 *     classifier, AdamW on fresh random inputs give the same bytes.
 *  3. Each call is counted once in its family with the FLOPs of its shape
 *     (2 N C OC for a matmul, 2 R C W + 4 R C W for the chunked classifier),
 *     and positive time.
 * Fresh random inputs each run (PTRAIN_TEST_SEED reproduces). */
#include "backend/ops_profile.h"
#include "tests/unit/ops_util.h"

#include <stddef.h>

typedef void (*any_fn)(void);

static float *fdup_(const double *d, size_t n)
{
    float *f = xcalloc(n, sizeof(float));
    for (size_t i = 0; i < n; i++) f[i] = (float)d[i];
    return f;
}

/* the function-pointer slots of pt_ops: from the first entry to the end */
static int slots(const pt_ops *o, any_fn *out, int max)
{
    const size_t first = offsetof(pt_ops, embedding_fwd), n = (sizeof(pt_ops) - first) / sizeof(any_fn);
    int k = 0;
    for (size_t i = 0; i < n && k < max; i++) memcpy(&out[k++], (const char *)o + first + i * sizeof(any_fn), sizeof(any_fn));
    return k;
}

static void test_wrapped(void)
{
    const pt_ops *tabs[3] = {&pt_cpu_ops_f32, &pt_cpu_ops_bf16, &pt_cpu_ops_f64};
    for (int t = 0; t < 3; t++) {
        pt_ops_profile prof;
        const pt_ops *w = pt_ops_profile_start(&prof, tabs[t], NULL);
        any_fn a[128], b[128];
        const int n = slots(tabs[t], a, 128), m = slots(w, b, 128);
        int same = n == m && n > 40, set = 0;
        for (int i = 0; i < n && same; i++) {
            same &= (a[i] != NULL) == (b[i] != NULL) && (a[i] == NULL || a[i] != b[i]);
            set += a[i] != NULL;
        }
        tap_ok(same && w->act == tabs[t]->act && w->acc == tabs[t]->acc && !strcmp(w->name, tabs[t]->name),
               "%s table: each of its %d entries wrapped, the %d NULL ones left NULL, name and dtypes kept",
               tabs[t]->name, set, n - set);
        pt_ops_profile_stop();
    }
}

static void test_forwarded(void)
{
    const pt_ops *F = &pt_cpu_ops_f32;
    pt_ops_profile prof;
    const pt_ops *Pw = pt_ops_profile_start(&prof, F, NULL);
    /* a matmul with the GELU epilogue and its backward */
    const int N = randint(40, 300), C = randint(8, 64), OC = randint(8, 96);
    double *d = dalloc((size_t)N * OC * 4 + (size_t)N * C + (size_t)OC * C + OC);
    randn(d, (size_t)N * OC * 4 + (size_t)N * C + (size_t)OC * C + OC, 1);
    float *x = fdup_(d, (size_t)N * C), *w = fdup_(d + (size_t)N * C, (size_t)OC * C),
          *b = fdup_(d + (size_t)N * C + (size_t)OC * C, (size_t)OC), *dy = fdup_(d + (size_t)N * C + OC * (C + 1), (size_t)N * OC);
    float *y1 = calloc((size_t)N * OC, 4), *y2 = calloc((size_t)N * OC, 4), *a1 = calloc((size_t)N * OC, 4),
          *a2 = calloc((size_t)N * OC, 4), *dx1 = calloc((size_t)N * C, 4), *dx2 = calloc((size_t)N * C, 4),
          *dw1 = calloc((size_t)OC * C, 4), *dw2 = calloc((size_t)OC * C, 4);
    F->matmul_fwd(y1, a1, x, w, b, 0, N, C, OC, PT_EPI_GELU);
    Pw->matmul_fwd(y2, a2, x, w, b, 0, N, C, OC, PT_EPI_GELU);
    F->matmul_bwd(dx1, dw1, NULL, dy, x, w, N, C, OC, PT_EPI_DEFAULT, NULL, NULL);
    Pw->matmul_bwd(dx2, dw2, NULL, dy, x, w, N, C, OC, PT_EPI_DEFAULT, NULL, NULL);
    const pt_op_family_stats *g = &prof.fam[PT_OPF_GEMM];
    tap_ok(!memcmp(y1, y2, 4 * (size_t)N * OC) && !memcmp(a1, a2, 4 * (size_t)N * OC) &&
               !memcmp(dx1, dx2, 4 * (size_t)N * C) && !memcmp(dw1, dw2, 4 * (size_t)OC * C),
           "matmul_fwd/bwd through the profiling table give the inner table's results bit for bit (N=%d C=%d OC=%d)", N,
           C, OC);
    tap_ok(g->calls == 2 && g->flops == 2.0 * N * C * OC + 4.0 * N * C * OC && g->seconds > 0,
           "gemm family: 2 calls, %.0f FLOPs = 2 N C OC (forward) + 4 N C OC (dX and dW), %.2e s", g->flops, g->seconds);
    /* the chunked classifier */
    const int R = randint(1, 60), Cc = randint(2, 16), V = randint(100, 900), vr = V - randint(0, 30);
    double *cd = dalloc((size_t)R * Cc + (size_t)V * Cc);
    randn(cd, (size_t)R * Cc + (size_t)V * Cc, 1);
    float *cx = fdup_(cd, (size_t)R * Cc), *cw = fdup_(cd + (size_t)R * Cc, (size_t)V * Cc);
    int32_t *tg = xcalloc((size_t)R, sizeof(int32_t));
    float *dl = calloc((size_t)R, 4);
    for (int n = 0; n < R; n++) tg[n] = randint(0, vr - 1), dl[n] = 1.0f / R;
    float *out[2][4];
    const pt_ops *tab[2] = {F, Pw};
    for (int k = 0; k < 2; k++) {
        float *st = calloc(3 * (size_t)R, 4), *lg = calloc((size_t)R * V, 4), *cdx = calloc((size_t)R * Cc, 4),
              *cdw = calloc((size_t)V * Cc, 4), *wk = calloc(pt_classifier_rows_work_elems(R, Cc, V), 4);
        tab[k]->classifier_rows_fwd(st, lg, cx, cw, tg, wk, 0, vr, R, Cc, V);
        tab[k]->classifier_rows_bwd(cdx, cdw, cx, cw, lg, st, tg, dl, wk, 0, vr, R, Cc, V);
        out[k][0] = st, out[k][1] = cdx, out[k][2] = cdw, out[k][3] = lg;
        free(wk);
    }
    const pt_op_family_stats *c = &prof.fam[PT_OPF_CLASSIFIER];
    tap_ok(!memcmp(out[0][0], out[1][0], 12 * (size_t)R) && !memcmp(out[0][1], out[1][1], 4 * (size_t)R * Cc) &&
               !memcmp(out[0][2], out[1][2], 4 * (size_t)V * Cc),
           "classifier_rows_fwd/bwd through the profiling table == the inner table's (R=%d C=%d V=%d)", R, Cc, V);
    tap_ok(c->calls == 2 && c->flops == 6.0 * R * Cc * vr && c->seconds > 0,
           "classifier family: 2 calls, %.0f FLOPs = 6 R C W (W=%d unpadded ids)", c->flops, vr);
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < 4; i++) free(out[k][i]);
    /* every other family untouched */
    int others = 1;
    for (int f = 0; f < PT_OPF_N; f++)
        if (f != PT_OPF_GEMM && f != PT_OPF_CLASSIFIER) others &= prof.fam[f].calls == 0 && prof.fam[f].seconds == 0;
    tap_ok(others && pt_op_family_compute(PT_OPF_GEMM) && !pt_op_family_compute(PT_OPF_MEMORY) &&
               !strcmp(pt_op_family_name(PT_OPF_CLASSIFIER), "classifier") && !strcmp(pt_op_family_name(99), "?"),
           "no other family counted; families named and rated (gemm by FLOPs, memory by bytes)");
    pt_ops_profile_stop();
    free(d), free(x), free(w), free(b), free(dy), free(y1), free(y2), free(a1), free(a2), free(dx1), free(dx2);
    free(dw1), free(dw2), free(cd), free(cx), free(cw), free(tg), free(dl);
}

int main(void)
{
    (void)D;
    pt_rng_seed(&rng, test_seed(), 0);
    pt_backend_get("cpu");
    test_wrapped();
    test_forwarded();
    return tap_done();
}
