/* SPDX-License-Identifier: MIT */
/* cuDNN's fused attention (lib/backend/cuda/attention_cudnn.c) on the CPU,
 * in every CUDA build (no GPU needed):
 *   - PTRAIN_ATTENTION's values (cudnn, flash, empty = cudnn; anything else
 *     refused), the override the tests use;
 *   - the rule of where cuDNN applies: the whole sequence (merge 0, q0 = k0
 *     = 0, Tq = Tk), HS a multiple of 8 up to 128, 16-byte rows and
 *     pointers; each refusal on its own;
 *   - the layout map: for random shapes, every element (b, h, t, c) that
 *     cuDNN's dims and strides address is the element ptrain's layout puts
 *     there (q, k, v rows of ldq / ldkv with head h at column h*HS, out
 *     [B, T, NH*HS], lse [B, NH, T], the backward's gradient scratch),
 *     also with NKV < NH KV heads (GQA: k, v and their gradients of NKV
 *     heads, the per-query-head dK, dV before the group sum);
 *   - with cuDNN: every tensor and operation descriptor of the forward
 *     and backward graphs finalizes (cuDNN checks them on the host), and
 *     the graphs have the frontend's number of operations.
 * What needs a device (the operation graph, the plans, the numbers) is
 * tests/gpu/test_attention's. */
#define _POSIX_C_SOURCE 200809L
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/attention_cudnn.h"
#include "backend/ops.h"
#include "core/core.h"
#include "tests/tap.h"

static uint64_t rs = 88172645463325252ULL;
static int rnd(int lo, int hi) /* [lo, hi] */
{
    rs ^= rs << 13, rs ^= rs >> 7, rs ^= rs << 17;
    return lo + (int)(rs % (uint64_t)(hi - lo + 1));
}

static void selection(void)
{
    tap_ok(pt_attn_impl_parse(NULL) == PT_ATTN_CUDNN && pt_attn_impl_parse("") == PT_ATTN_CUDNN,
           "PTRAIN_ATTENTION unset or empty: cudnn");
    tap_ok(pt_attn_impl_parse("flash") == PT_ATTN_FLASH, "PTRAIN_ATTENTION=flash");
    tap_ok(pt_attn_impl_parse("cudnn") == PT_ATTN_CUDNN, "PTRAIN_ATTENTION=cudnn");
    tap_ok(pt_attn_impl_parse("CUDNN") < 0 && pt_attn_impl_parse("cudnn ") < 0 && pt_attn_impl_parse("fla") < 0,
           "PTRAIN_ATTENTION=CUDNN, \"cudnn \", fla are refused");
    tap_ok(strcmp(pt_attn_impl_name(PT_ATTN_CUDNN), "cudnn") == 0 &&
               strcmp(pt_attn_impl_name(PT_ATTN_FLASH), "flash") == 0,
           "the selection's names");
    const char *env = getenv("PTRAIN_ATTENTION");
    const int want = !env || !*env || strcmp(env, "cudnn") == 0
#ifdef HAVE_CUDNN
                         ? PT_ATTN_CUDNN
#else
                         ? PT_ATTN_FLASH
#endif
                         : PT_ATTN_FLASH;
    tap_ok(pt_cuda_attention_impl() == want, "the selection follows PTRAIN_ATTENTION (%s): %s", env ? env : "unset",
           pt_attn_impl_name(pt_cuda_attention_impl()));
    pt_cuda_attention_set_impl(PT_ATTN_CUDNN);
#ifdef HAVE_CUDNN
    tap_ok(pt_cuda_attention_impl() == PT_ATTN_CUDNN, "the override selects cudnn");
#else
    tap_ok(pt_cuda_attention_impl() == PT_ATTN_FLASH, "without cuDNN the override keeps flash");
#endif
    pt_cuda_attention_set_impl(PT_ATTN_FLASH);
    tap_ok(pt_cuda_attention_impl() == PT_ATTN_FLASH, "the override selects flash");
}

static void rule(void)
{
    const int NH = 12, HS = 64, C = NH * HS, T = 1024;
    const pt_attn_dims whole = {16, NH, HS, T, T, 0, 0, 3 * C, 3 * C, NH};
    tap_ok(pt_attn_cudnn_rule(&whole, 0) == NULL, "GPT-2 124M's whole-sequence attention applies");
    tap_ok(pt_attn_cudnn_rule(&whole, 1) != NULL, "merge 1 stays on flash: %s", pt_attn_cudnn_rule(&whole, 1));
    pt_attn_dims d = whole;
    d.q0 = d.k0 = 512;
    tap_ok(pt_attn_cudnn_rule(&d, 0) != NULL, "a ring step (q0 = k0 = 512) stays on flash: %s",
           pt_attn_cudnn_rule(&d, 0));
    d = whole, d.Tk = 512;
    tap_ok(pt_attn_cudnn_rule(&d, 0) != NULL, "Tq != Tk stays on flash");
    d = whole, d.Tq = d.Tk = 0;
    tap_ok(pt_attn_cudnn_rule(&d, 0) != NULL, "T = 0 stays on flash");
    const int hs_ok[] = {8, 16, 64, 80, 128}, hs_no[] = {4, 20, 65, 136, 256};
    for (int i = 0; i < 5; i++) {
        d = (pt_attn_dims){2, 3, hs_ok[i], 77, 77, 0, 0, 3 * 3 * hs_ok[i], 3 * 3 * hs_ok[i], 3};
        tap_ok(pt_attn_cudnn_rule(&d, 0) == NULL, "HS %d applies", hs_ok[i]);
        d = (pt_attn_dims){2, 3, hs_no[i], 77, 77, 0, 0, 3 * 3 * hs_no[i] + 8, 3 * 3 * hs_no[i] + 8, 3};
        d.ldq = d.ldkv = (d.ldq + 7) / 8 * 8;
        tap_ok(pt_attn_cudnn_rule(&d, 0) != NULL, "HS %d stays on flash: %s", hs_no[i], pt_attn_cudnn_rule(&d, 0));
    }
    d = whole, d.ldq = 3 * C + 4;
    tap_ok(pt_attn_cudnn_rule(&d, 0) != NULL, "ldq not a multiple of 8 stays on flash");
    d = whole, d.ldkv = C - 8;
    tap_ok(pt_attn_cudnn_rule(&d, 0) != NULL, "ldkv < NH*HS stays on flash");
    d = whole, d.NKV = 4, d.ldq = d.ldkv = C + 2 * 4 * HS;
    tap_ok(pt_attn_cudnn_rule(&d, 0) == NULL, "GQA (NH 12, NKV 4, packed rows of C + 2*NKV*HS) applies");
    d.ldkv = 4 * HS - 8;
    tap_ok(pt_attn_cudnn_rule(&d, 0) != NULL, "GQA with ldkv < NKV*HS stays on flash: %s", pt_attn_cudnn_rule(&d, 0));
    d = whole, d.NKV = 5;
    tap_ok(pt_attn_cudnn_rule(&d, 0) != NULL, "NKV 5 (not a divisor of NH 12) stays on flash: %s",
           pt_attn_cudnn_rule(&d, 0));
    tap_ok(pt_attn_cudnn_rule(NULL, 0) != NULL, "no dimensions stay on flash");
    _Alignas(16) static char buf[64];
    const void *al[3] = {buf, buf + 16, buf + 48}, *un[3] = {buf, buf + 8, buf + 48}, *nul[2] = {buf, NULL};
    tap_ok(pt_attn_ptrs_aligned(al, 3), "16-byte aligned pointers apply");
    tap_ok(!pt_attn_ptrs_aligned(un, 3), "a pointer 8 bytes off stays on flash");
    tap_ok(!pt_attn_ptrs_aligned(nul, 2), "a NULL pointer stays on flash");
    pt_cuda_attention_set_impl(PT_ATTN_FLASH);
    tap_ok(!pt_cuda_attention_cudnn_wants(&whole, 0, al, 3), "flash selected: never cuDNN");
#ifdef HAVE_CUDNN
    pt_cuda_attention_set_impl(PT_ATTN_CUDNN);
    tap_ok(pt_cuda_attention_cudnn_wants(&whole, 0, al, 3) && !pt_cuda_attention_cudnn_wants(&whole, 1, al, 3) &&
               !pt_cuda_attention_cudnn_wants(&whole, 0, un, 3),
           "cudnn selected: cuDNN where the rule and the alignment hold, else flash");
    pt_cuda_attention_set_impl(PT_ATTN_FLASH);
#endif
}

/* offset (elements) of (b, h, s, e) under 4-d strides */
static int64_t off(const int64_t *str, int64_t b, int64_t h, int64_t s, int64_t e)
{
    return b * str[0] + h * str[1] + s * str[2] + e * str[3];
}

static void layout(void)
{
    for (int rep = 0; rep < 20; rep++) {
        /* NKV: every divisor of NH turns up (GQA; NKV = NH is MHA) */
        const int B = rnd(1, 3), NH = rnd(1, 4) * (rep % 2 ? 2 : 1), HS = 8 * rnd(1, 16), T = rnd(1, 40), C = NH * HS;
        int NKV = rnd(1, NH);
        while (NH % NKV) NKV--;
        const int KVC = NKV * HS, rep_kv = NH / NKV;
        const int ldq = C + 8 * rnd(0, 2 * NH * HS / 8), ldkv = rnd(0, 1) ? 2 * KVC : KVC + 8 * rnd(0, 3);
        const int lds = rnd(0, 1) ? C + 2 * KVC : C, ldk = lds == C ? KVC : lds;
        const pt_attn_dims d = {B, NH, HS, T, T, 0, 0, ldq, ldkv, NKV};
        pt_sdpa_layout L;
        pt_sdpa_layout_of(&d, lds, &L);
        int bad = 0, dims = 1;
        const int64_t want_bhtd[4] = {B, NH, T, HS}, want_st[4] = {B, NH, T, 1}, want_s[4] = {B, NH, T, T};
        const int64_t want_kv[4] = {B, NKV, T, HS}, want_kvt[4] = {B, NKV, HS, T};
        for (int i = 0; i < 4; i++) {
            dims &= L.q_dim[i] == want_bhtd[i] && L.k_dim[i] == want_kv[i] && L.v_dim[i] == want_kv[i] &&
                    L.o_dim[i] == want_bhtd[i] && L.g_dim[i] == want_bhtd[i] && L.gk_dim[i] == want_kv[i] &&
                    L.fh_dim[i] == want_bhtd[i];
            dims &= L.kt_dim[i] == want_kvt[i] && L.vt_dim[i] == want_kvt[i] && L.stats_dim[i] == want_st[i];
            dims &= L.s_dim[i] == want_s[i] && L.st_dim[i] == want_s[i];
        }
        for (int b = 0; b < B; b++)
            for (int h = 0; h < NH; h++)
                for (int t = 0; t < T; t++) {
                    const int64_t row = (int64_t)b * T + t;
                    bad += off(L.stats_str, b, h, t, 0) != ((int64_t)b * NH + h) * T + t;
                    for (int c = 0; c < HS; c++) {
                        const int64_t col = (int64_t)h * HS + c;
                        bad += off(L.q_str, b, h, t, c) != row * ldq + col;
                        bad += off(L.o_str, b, h, t, c) != row * C + col;
                        bad += off(L.g_str, b, h, t, c) != row * lds + col;
                        bad += off(L.fh_str, b, h, t, c) != (((int64_t)b * NH + h) * T + t) * HS + c;
                        if (h >= NKV) continue;
                        const int64_t kcol = (int64_t)h * HS + c; /* KV head h */
                        bad += off(L.k_str, b, h, t, c) != row * ldkv + kcol;
                        bad += off(L.kt_str, b, h, c, t) != row * ldkv + kcol; /* K^T (c, t) is K (t, c) */
                        bad += off(L.v_str, b, h, t, c) != row * ldkv + kcol;
                        bad += off(L.vt_str, b, h, c, t) != row * ldkv + kcol;
                        bad += off(L.gk_str, b, h, t, c) != row * ldk + kcol;
                    }
                    for (int j = 0; j < T; j++)
                        bad += off(L.st_str, b, h, j, t) != off(L.s_str, b, h, t, j); /* S^T (j, t) is S (t, j) */
                }
        tap_ok(dims && !bad,
               "layout B=%d NH=%d NKV=%d (groups of %d) HS=%d T=%d ldq=%d ldkv=%d lds=%d: dims %s, %d elements "
               "misplaced",
               B, NH, NKV, rep_kv, HS, T, ldq, ldkv, lds, dims ? "right" : "WRONG", bad);
    }
}

static void graphs(void)
{
#ifdef HAVE_CUDNN
    const pt_attn_dims shapes[] = {{16, 12, 64, 1024, 1024, 0, 0, 3 * 768, 3 * 768, 12},
                                   {2, 3, 64, 77, 77, 0, 0, 3 * 192, 3 * 192, 3},
                                   {1, 2, 16, 77, 77, 0, 0, 96, 96, 2},
                                   {2, 2, 80, 77, 77, 0, 0, 480, 320, 2},
                                   /* GQA: MQA, groups of 4 (packed), groups of 2 (split) */
                                   {2, 8, 64, 77, 77, 0, 0, 640, 640, 1},
                                   {1, 8, 128, 130, 130, 0, 0, 1536, 1536, 2},
                                   {2, 4, 80, 77, 77, 0, 0, 320, 320, 2}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const pt_attn_dims *d = &shapes[i];
        const int C = d->NH * d->HS, W = C + 2 * pt_attn_nkv(d) * d->HS, gqa = pt_attn_nkv(d) != d->NH;
        for (int bwd = 0; bwd < 2; bwd++) {
            int nops = -1;
            const int lds = bwd && d->ldq == W ? W : C;
            int rc = pt_sdpa_ops_check(d, bwd, lds, &nops);
            /* the frontend's: forward 14 (2 matmuls, scale, 4 of the mask, softmax with stats 7);
             * backward 22 (rowsum 3, 5 matmuls, 3 reshapes, scale, sub Stats, 4 of the mask, exp,
             * sub, 2 muls, identity), GQA's 24 (dK, dV each reduced over the group) */
            const int want = bwd ? (gqa ? 24 : 22) : 14;
            tap_ok(rc == PT_OK && nops == want,
                   "cuDNN finalizes the %s graph's descriptors for B=%d NH=%d NKV=%d HS=%d T=%d ldq=%d ldkv=%d: %d "
                   "ops (want %d)%s%s",
                   bwd ? "backward" : "forward", d->B, d->NH, pt_attn_nkv(d), d->HS, d->Tq, d->ldq, d->ldkv, nops,
                   want, rc ? ": " : "", rc ? pt_errmsg() : "");
        }
    }
    const pt_attn_dims ring = {2, 3, 64, 77, 77, 64, 0, 3 * 192, 3 * 192, 3};
    int nops = 0;
    tap_ok(pt_sdpa_ops_check(&ring, 0, 192, &nops) == PT_EINVAL && strstr(pt_errmsg(), "ring"),
           "a ring step's graph is refused: %s", pt_errmsg());
#else
    tap_diag("ptrain was built without cuDNN: the graph checks are left out");
#endif
}

int main(void)
{
    selection();
    rule();
    layout();
    graphs();
    return tap_done();
}
