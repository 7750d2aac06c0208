/* SPDX-License-Identifier: MIT */
/* Each tensor-parallel layout's local sizes, for the runtime and the
 * planner alike (see shape.h for the table and the sources).  libc only. */
#include "shape/shape.h"

#include "core/core.h"

#include <stdio.h>
#include <string.h>

int pt_shape_kind(int mode)
{
    if (mode == PT_MODE_2D || mode == PT_MODE_2P5D) return PT_MODE_2D;
    if (mode == PT_MODE_3D) return PT_MODE_3D;
    return PT_MODE_1D;
}

/* The sizes every layout takes from its input as given; refuses a split
 * (ways: q, or d for 2.5d's depth) or sp below 1, which would divide by
 * zero. */
static int start(const pt_shape_in *in, int kind, int q, int ways, pt_shape *s)
{
    memset(s, 0, sizeof *s);
    if (q < 1 || ways < 1 || in->sp < 1)
        return pt_fail(PT_EINVAL, "tensor-parallel split %d x %d with sp=%d (tp=%d, dims %dx%dx%d; valid: every "
                       "size >= 1)", ways, q, in->sp, in->tp, in->dims[0], in->dims[1], in->dims[2]);
    s->mode = kind;
    memcpy(s->dims, in->dims, sizeof s->dims);
    s->q = q;
    s->B = in->B;
    s->V = in->V;
    s->Tl = in->T / in->sp;
    s->family = in->family;
    return PT_OK;
}

/* KV heads and MLP width of in: NKV and F, or GPT-2's NH and 4 C where 0. */
static long long kv_heads(const pt_shape_in *in) { return in->NKV > 0 ? in->NKV : in->NH; }
static long long ffn(const pt_shape_in *in) { return in->F > 0 ? in->F : 4 * in->C; }

/* The one line refusing a layout not built for Llama. */
static int no_llama(const pt_shape_in *in, const char *mode)
{
    return pt_fail(PT_EINVAL, "mode %s is not built for llama models yet (tp=%d; valid modes for llama: off, 1d)", mode,
                   in->tp);
}

/* The split sizes of a layout whose inner side splits q ways and whose
 * batch splits `ways` ways; the vocabulary is padded to a multiple of
 * vpad and split q ways. */
static void split(const pt_shape_in *in, long long q, long long ways, long long vpad, pt_shape *s)
{
    s->Bl = in->B / ways;
    s->NHl = in->NH / q;
    s->Cl = in->C / q;
    s->Fl = ffn(in) / q;
    s->NKVl = kv_heads(in) / q;
    s->KVl = in->NH > 0 ? s->NKVl * (in->C / in->NH) : 0;
    s->Vp = (in->V + vpad - 1) / vpad * vpad;
    s->Vl = s->Vp / q;
}

int pt_shape_1d(const pt_shape_in *in, pt_shape *s)
{
    const int tp = in->tp;
    int rc = start(in, PT_MODE_1D, tp, 1, s);
    if (rc) return rc;
    if (in->NH % tp)
        return pt_fail(PT_EINVAL, "tp=%d does not divide n_head=%lld (valid tp for this model: divisors of %lld)", tp,
                       in->NH, in->NH);
    if (kv_heads(in) % tp)
        return pt_fail(PT_EINVAL, "tp=%d does not divide n_kv_head=%lld (valid tp for this model: divisors of %lld)",
                       tp, kv_heads(in), kv_heads(in));
    if (ffn(in) % tp)
        return pt_fail(PT_EINVAL, "tp=%d does not divide the MLP width ffn=%lld (valid tp for this model: divisors of "
                       "%lld)", tp, ffn(in), ffn(in));
    split(in, tp, 1, tp, s);
    s->Cr = in->C; /* rows are whole: the residual stream is replicated */
    return PT_OK;
}

int pt_shape_2d(const pt_shape_in *in, pt_shape *s)
{
    const int d = in->dims[0], q = in->dims[1];
    const char *mode = d > 1 || in->mode == PT_MODE_2P5D ? "2.5d" : "2d";
    int rc = start(in, PT_MODE_2D, q, d, s);
    if (rc) return rc;
    if (in->family == PT_FAMILY_LLAMA) return no_llama(in, mode);
    if (in->NH % q) {
        char valid[160];
        size_t off = 0;
        valid[0] = '\0';
        for (long long v = 1; v <= in->NH && off < sizeof valid - 24; v++)
            if (in->NH % v == 0) off += (size_t)snprintf(valid + off, sizeof valid - off, "%s%lld", off ? ", " : "", v);
        return pt_fail(PT_EINVAL, "mode %s with q=%d (tp=%d) needs n_head=%lld divisible by q (valid q for this "
                       "model: %s)", mode, q, in->tp, in->NH, valid);
    }
    const long long ways = (long long)d * q;
    if (in->B % ways)
        return pt_fail(PT_EINVAL, "mode %s splits the batch %lld ways (depth %d x q %d): B=%lld sequences per "
                       "data-parallel group and microbatch do not divide (valid B: multiples of %lld)", mode, ways, d,
                       q, in->B, ways);
    split(in, q, ways, q, s);
    s->Cr = in->C / q;
    return PT_OK;
}

int pt_shape_3d(const pt_shape_in *in, pt_shape *s)
{
    const int l = in->dims[0];
    int rc = start(in, PT_MODE_3D, l, 1, s);
    if (rc) return rc;
    if (in->family == PT_FAMILY_LLAMA) return no_llama(in, "3d");
    const long long ll = (long long)l * l;
    if (in->NH % l || in->C % ll) {
        char valid[160];
        size_t off = 0;
        valid[0] = '\0';
        for (long long v = 1; v <= in->NH && off < sizeof valid - 24; v++)
            if (in->NH % v == 0 && in->C % (v * v) == 0)
                off += (size_t)snprintf(valid + off, sizeof valid - off, "%s%lld (tp=%lld)", off ? ", " : "", v,
                                        v * v * v);
        return pt_fail(PT_EINVAL, "mode 3d with l=%d (tp=%d) needs n_head=%lld divisible by l and n_embd=%lld by "
                       "l*l=%lld (valid l for this model: %s)", l, in->tp, in->NH, in->C, ll, valid);
    }
    if (in->B % ll)
        return pt_fail(PT_EINVAL, "mode 3d splits the batch l*l=%lld ways: B=%lld sequences per data-parallel group "
                       "and microbatch do not divide (valid B: multiples of %lld)", ll, in->B, ll);
    split(in, l, ll, ll, s);
    s->Cr = in->C / l;
    return PT_OK;
}

int pt_shape_of(const pt_shape_in *in, pt_shape *s)
{
    switch (pt_shape_kind(in->mode)) {
    case PT_MODE_2D: return pt_shape_2d(in, s);
    case PT_MODE_3D: return pt_shape_3d(in, s);
    default: return pt_shape_1d(in, s);
    }
}
