/* SPDX-License-Identifier: MIT */
/* lib/shape: each layout family's local sizes on random valid shapes
 * against the table of ptrain-layouts(7) written out here independently
 * (the padded vocabulary found by counting up, the batch split by
 * multiplying back), every refusal's code and exact one-line text, the
 * mode -> family map, and pt_ring_bytes against the ring's steps summed
 * one by one.  Shapes are drawn at random (seed printed;
 * PTRAIN_TEST_SEED repeats a run). */
#define _POSIX_C_SOURCE 200809L
#include "shape/shape.h"

#include "core/core.h"
#include "tests/tap.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static pt_rng rng; /* lib/core's generator */
static long long rnd(long long n) { return (long long)(pt_rng_u64(&rng) % (uint64_t)n); } /* [0, n) */

/* the smallest multiple of m that is >= v, by counting */
static long long pad_up(long long v, long long m)
{
    long long r = v;
    while (r % m) r++;
    return r;
}

/* a random model and batch whose split by (heads q, width cw, batch bw) is
 * valid: n_head a multiple of q, n_embd a multiple of n_head and cw, B a
 * multiple of bw, T a multiple of sp */
static pt_shape_in random_in(int mode, int tp, int d0, int d1, int d2, long long q, long long cw, long long bw)
{
    pt_shape_in in;
    memset(&in, 0, sizeof in);
    in.mode = mode, in.tp = tp, in.dims[0] = d0, in.dims[1] = d1, in.dims[2] = d2;
    in.NH = q * (1 + rnd(6));
    long long hs = 1 + rnd(16);
    while ((in.NH * hs) % cw) hs++;
    in.C = in.NH * hs;
    in.V = 2 + rnd(60000);
    in.sp = 1 + (int)rnd(4);
    in.T = in.sp * (1 + rnd(64));
    in.B = bw * (1 + rnd(8));
    return in;
}

static int same(const pt_shape *s, int mode, int q, long long Bl, long long Tl, long long Cr, long long NHl,
                long long Cl, long long Fl, long long Vp, long long Vl)
{
    return s->mode == mode && s->q == q && s->Bl == Bl && s->Tl == Tl && s->Cr == Cr && s->NHl == NHl && s->Cl == Cl &&
           s->Fl == Fl && s->Vp == Vp && s->Vl == Vl;
}

/* fn refuses in with PT_EINVAL and exactly the one line want */
static void refused(int (*fn)(const pt_shape_in *, pt_shape *), const pt_shape_in *in, const char *want,
                    const char *what)
{
    pt_shape s;
    pt_fail(PT_OK, "%s", "");
    int rc = fn(in, &s);
    tap_ok(rc == PT_EINVAL && strcmp(pt_errmsg(), want) == 0 && !strchr(pt_errmsg(), '\n'), "%s: refused (%d) '%s'",
           what, rc, pt_errmsg());
    if (strcmp(pt_errmsg(), want) != 0) tap_diag("want '%s'", want);
}

int main(void)
{
    uint64_t seed = (uint64_t)time(NULL) ^ ((uint64_t)clock() << 20);
    if (getenv("PTRAIN_TEST_SEED")) seed = strtoull(getenv("PTRAIN_TEST_SEED"), NULL, 10);
    pt_rng_seed(&rng, seed, 0);
    printf("# seed %llu (PTRAIN_TEST_SEED repeats this run)\n", (unsigned long long)seed);
    const int rounds = 2000;
    pt_shape s;

    /* ---- 1d: Bl = B, Cr = C, inner / tp, V padded to a multiple of tp ---- */
    int ok = 1;
    for (int r = 0; r < rounds && ok; r++) {
        const int tp = 1 + (int)rnd(16);
        pt_shape_in in = random_in(rnd(2) ? PT_MODE_1D : PT_MODE_OFF, tp, 1, 1, tp, tp, 1, 1);
        const long long Vp = pad_up(in.V, tp);
        ok = pt_shape_1d(&in, &s) == PT_OK && pt_shape_of(&in, &s) == PT_OK &&
             same(&s, PT_MODE_1D, tp, in.B, in.T / in.sp, in.C, in.NH / tp, in.C / tp, 4 * in.C / tp, Vp, Vp / tp) &&
             s.B == in.B && s.V == in.V && s.Vl * tp == s.Vp && s.Vp - in.V < tp;
        if (!ok) tap_diag("1d tp=%d NH=%lld C=%lld V=%lld B=%lld", tp, in.NH, in.C, in.V, in.B);
    }
    tap_ok(ok, "1d: %d random shapes match the table (off plans as 1d)", rounds);

    /* ---- 2d / 2.5d: q*q (times depth d) ranks ---- */
    ok = 1;
    for (int r = 0; r < rounds && ok; r++) {
        const int q = 1 + (int)rnd(4), d = rnd(2) ? 1 : 1 + (int)rnd(4);
        const int mode = d > 1 || rnd(2) ? PT_MODE_2P5D : PT_MODE_2D;
        pt_shape_in in = random_in(mode, d * q * q, d, q, q, q, q, (long long)d * q);
        const long long Vp = pad_up(in.V, q);
        ok = pt_shape_2d(&in, &s) == PT_OK && pt_shape_of(&in, &s) == PT_OK &&
             same(&s, PT_MODE_2D, q, in.B / (d * q), in.T / in.sp, in.C / q, in.NH / q, in.C / q, 4 * in.C / q, Vp,
                  Vp / q) &&
             s.Bl * d * q == in.B && s.dims[0] == d && s.dims[1] == q && s.dims[2] == q;
        if (!ok) tap_diag("2d d=%d q=%d NH=%lld C=%lld V=%lld B=%lld", d, q, in.NH, in.C, in.V, in.B);
    }
    tap_ok(ok, "2d / 2.5d: %d random shapes match the table", rounds);

    /* ---- 3d: l*l*l ranks, batch / l^2, V padded to a multiple of l^2 ---- */
    ok = 1;
    for (int r = 0; r < rounds && ok; r++) {
        const int l = 1 + (int)rnd(4);
        pt_shape_in in = random_in(PT_MODE_3D, l * l * l, l, l, l, l, (long long)l * l, (long long)l * l);
        const long long Vp = pad_up(in.V, (long long)l * l);
        ok = pt_shape_3d(&in, &s) == PT_OK && pt_shape_of(&in, &s) == PT_OK &&
             same(&s, PT_MODE_3D, l, in.B / (l * l), in.T / in.sp, in.C / l, in.NH / l, in.C / l, 4 * in.C / l, Vp,
                  Vp / l) &&
             s.Vl * l == s.Vp && s.Vp - in.V < l * l;
        if (!ok) tap_diag("3d l=%d NH=%lld C=%lld V=%lld B=%lld", l, in.NH, in.C, in.V, in.B);
    }
    tap_ok(ok, "3d: %d random shapes match the table", rounds);

    tap_ok(pt_shape_kind(PT_MODE_OFF) == PT_MODE_1D && pt_shape_kind(PT_MODE_1D) == PT_MODE_1D &&
               pt_shape_kind(PT_MODE_2D) == PT_MODE_2D && pt_shape_kind(PT_MODE_2P5D) == PT_MODE_2D &&
               pt_shape_kind(PT_MODE_3D) == PT_MODE_3D,
           "families: off and 1d -> 1d, 2d and 2.5d -> 2d, 3d -> 3d");

    /* ---- the refusals, one line each ---- */
    char want[512];
    {
        const int tp = 3 + 2 * (int)rnd(3); /* 3, 5 or 7 */
        pt_shape_in in = random_in(PT_MODE_1D, tp, 1, 1, tp, 1, 1, 1);
        in.NH = tp * (1 + rnd(4)) + 1 + rnd(tp - 1);
        snprintf(want, sizeof want, "tp=%d does not divide n_head=%lld (valid tp for this model: divisors of %lld)",
                 tp, in.NH, in.NH);
        refused(pt_shape_1d, &in, want, "1d: tp does not divide n_head");
        refused(pt_shape_of, &in, want, "1d through pt_shape_of");
    }
    {
        pt_shape_in in = random_in(PT_MODE_2D, 9, 1, 3, 3, 1, 1, 3);
        in.NH = 8, in.C = 8 * (1 + rnd(8));
        refused(pt_shape_2d, &in, "mode 2d with q=3 (tp=9) needs n_head=8 divisible by q (valid q for this model: "
                "1, 2, 4, 8)", "2d: q does not divide n_head (lists the divisors)");
        in.mode = PT_MODE_2P5D, in.dims[0] = 2, in.tp = 18;
        refused(pt_shape_of, &in, "mode 2.5d with q=3 (tp=18) needs n_head=8 divisible by q (valid q for this model: "
                "1, 2, 4, 8)", "2.5d: the same, named 2.5d");
    }
    {
        const int d = 1 + (int)rnd(3), q = 2;
        pt_shape_in in = random_in(d > 1 ? PT_MODE_2P5D : PT_MODE_2D, d * 4, d, q, q, q, q, 1);
        in.B = (long long)d * q * rnd(5) + 1 + rnd(d * q - 1);
        snprintf(want, sizeof want, "mode %s splits the batch %d ways (depth %d x q %d): B=%lld sequences per "
                 "data-parallel group and microbatch do not divide (valid B: multiples of %d)", d > 1 ? "2.5d" : "2d",
                 d * q, d, q, in.B, d * q);
        refused(pt_shape_2d, &in, want, "2d / 2.5d: d*q does not divide B");
    }
    {
        pt_shape_in in = random_in(PT_MODE_3D, 8, 2, 2, 2, 1, 1, 4);
        in.NH = 6, in.C = 6 * 3; /* l=2 divides NH, l*l=4 not C: valid l are 1 and 3 */
        refused(pt_shape_3d, &in, "mode 3d with l=2 (tp=8) needs n_head=6 divisible by l and n_embd=18 by l*l=4 "
                "(valid l for this model: 1 (tp=1), 3 (tp=27))", "3d: l*l does not divide n_embd");
        in.NH = 9, in.C = 36;
        refused(pt_shape_of, &in, "mode 3d with l=2 (tp=8) needs n_head=9 divisible by l and n_embd=36 by l*l=4 "
                "(valid l for this model: 1 (tp=1), 3 (tp=27))", "3d: l does not divide n_head");
        in.NH = 4, in.C = 32, in.B = 4 * rnd(5) + 1 + rnd(3);
        snprintf(want, sizeof want, "mode 3d splits the batch l*l=4 ways: B=%lld sequences per data-parallel group "
                 "and microbatch do not divide (valid B: multiples of 4)", in.B);
        refused(pt_shape_3d, &in, want, "3d: l*l does not divide B");
    }
    {
        pt_shape_in in = random_in(PT_MODE_1D, 2, 1, 1, 2, 2, 1, 1);
        in.sp = 0;
        refused(pt_shape_1d, &in, "tensor-parallel split 1 x 2 with sp=0 (tp=2, dims 1x1x2; valid: every size >= 1)",
                "sp=0 refused, not divided by");
        in.sp = 1, in.tp = 0, in.dims[2] = 0;
        refused(pt_shape_1d, &in, "tensor-parallel split 1 x 0 with sp=1 (tp=0, dims 1x1x0; valid: every size >= 1)",
                "1d tp=0 refused");
        in.mode = PT_MODE_2P5D, in.tp = 4, in.dims[0] = 0, in.dims[1] = in.dims[2] = 2;
        refused(pt_shape_of, &in, "tensor-parallel split 0 x 2 with sp=1 (tp=4, dims 0x2x2; valid: every size >= 1)",
                "2.5d depth 0 refused");
        in.mode = PT_MODE_3D, in.dims[0] = in.dims[1] = in.dims[2] = 0;
        refused(pt_shape_3d, &in, "tensor-parallel split 1 x 0 with sp=1 (tp=4, dims 0x0x0; valid: every size >= 1)",
                "3d l=0 refused");
    }

    /* ---- pt_ring_bytes: (p-1) steps of bytes/p each, twice for an
     * allreduce, the remainder's share truncated ---- */
    ok = pt_ring_bytes(12345, 1, 2) == 0 && pt_ring_bytes(12345, 0, 1) == 0 && pt_ring_bytes(12345, -3, 2) == 0;
    for (int r = 0; r < rounds && ok; r++) {
        const uint64_t bytes = (uint64_t)rnd(1ll << 40);
        const long long p = 2 + rnd(4095);
        const int factor = rnd(2) ? PT_RING_ALLREDUCE : PT_RING_ALLGATHER;
        uint64_t steps = 0;
        for (long long i = 0; i < (p - 1) * factor; i++) steps += bytes / (uint64_t)p;
        const uint64_t rem = (uint64_t)factor * (uint64_t)(p - 1) * (bytes % (uint64_t)p) / (uint64_t)p;
        ok = pt_ring_bytes(bytes, p, factor) == steps + rem;
        if (!ok) tap_diag("bytes=%llu p=%lld factor=%d", (unsigned long long)bytes, p, factor);
    }
    tap_ok(ok, "ring bytes: factor (p-1)/p of the buffer on %d random calls, 0 on groups of one", rounds);
    tap_ok(PT_RING_ALLREDUCE == 2 && PT_RING_REDUCE_SCATTER == 1 && PT_RING_ALLGATHER == 1,
           "factors: allreduce 2, reduce-scatter and allgather 1");

    /* ---- Llama (grouped-query attention, MLP width I): 1d holds NKV/tp KV
     * heads of C/NH columns and I/tp of the MLP; GPT-2's zeroed tail is
     * NKV = NH, I = 4C ---- */
    ok = 1;
    for (int r = 0; r < rounds && ok; r++) {
        const int tp = 1 + (int)rnd(8);
        pt_shape_in in = random_in(PT_MODE_1D, tp, 1, 1, tp, tp, 1, 1);
        const long long grp = 1 + rnd(4), hs = in.C / in.NH;
        in.family = PT_FAMILY_LLAMA;
        in.NKV = in.NH, in.NH *= grp, in.C = in.NH * hs; /* NKV a multiple of tp, NH of NKV */
        in.F = tp * (1 + rnd(4096));
        ok = pt_shape_1d(&in, &s) == PT_OK && s.NHl == in.NH / tp && s.NKVl == in.NKV / tp &&
             s.KVl == in.NKV / tp * hs && s.Cl == in.C / tp && s.Fl == in.F / tp && s.Cr == in.C &&
             s.family == PT_FAMILY_LLAMA;
        if (!ok) tap_diag("llama 1d tp=%d NH=%lld NKV=%lld C=%lld F=%lld: NKVl %lld KVl %lld Fl %lld", tp, in.NH,
                          in.NKV, in.C, in.F, s.NKVl, s.KVl, s.Fl);
        in.family = PT_FAMILY_GPT2, in.NKV = 0, in.F = 0;
        ok = ok && pt_shape_1d(&in, &s) == PT_OK && s.NKVl == s.NHl && s.KVl == s.Cl && s.Fl == 4 * in.C / tp;
    }
    tap_ok(ok, "llama 1d: KV heads and MLP width split tp ways; GPT-2's zeroed tail is NKV = NH, I = 4C (%d shapes)",
           rounds);
    {
        pt_shape_in in = {.C = 64, .NH = 4, .NKV = 2, .F = 192, .V = 97, .T = 8, .B = 2, .mode = PT_MODE_1D, .tp = 4,
                          .dims = {1, 1, 4}, .sp = 1, .family = PT_FAMILY_LLAMA};
        refused(pt_shape_1d, &in, "tp=4 does not divide n_kv_head=2 (valid tp for this model: divisors of 2)",
                "llama 1d tp=4 with 2 KV heads");
        in.NKV = 4, in.F = 190;
        refused(pt_shape_1d, &in, "tp=4 does not divide the MLP width ffn=190 (valid tp for this model: divisors of 190)",
                "llama 1d tp=4 with I=190");
        in.F = 192, in.mode = PT_MODE_2D, in.dims[0] = 1, in.dims[1] = in.dims[2] = 2;
        refused(pt_shape_2d, &in, "mode 2d is not built for llama models yet (tp=4; valid modes for llama: off, 1d)",
                "llama 2d");
        in.mode = PT_MODE_2P5D, in.tp = 8, in.dims[0] = 2;
        refused(pt_shape_2d, &in, "mode 2.5d is not built for llama models yet (tp=8; valid modes for llama: off, 1d)",
                "llama 2.5d");
        in.mode = PT_MODE_3D, in.dims[0] = 2;
        refused(pt_shape_3d, &in, "mode 3d is not built for llama models yet (tp=8; valid modes for llama: off, 1d)",
                "llama 3d");
    }
    return tap_done();
}
