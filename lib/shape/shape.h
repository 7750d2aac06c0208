/* SPDX-License-Identifier: MIT */
/* The one home of each tensor-parallel layout's geometry and of the ring
 * model's byte count, shared by the runtime (lib/parallel's tp1d.c, tp2d.c,
 * tp3d.c geometry hooks; lib/comm's counters) and the planner
 * (lib/plan/cost.c), so the cost model cannot drift from what the layouts
 * hold and send.  libc only: the planner and the SPANK plugin link it
 * without MPI or BLAS.
 *
 * Local sizes of a GPT model (width C, NH heads, vocabulary V, sequence
 * length T) for a data-parallel group's (micro)batch of B sequences, per
 * rank (ptrain-layouts(7), lib/parallel/layout.h's table):
 *
 *   layout  ranks    Bl        Cr    NHl    Cl     Fl      Vp (padded V)       Vl
 *   1d      tp       B         C     NH/tp  C/tp   4C/tp   multiple of tp      Vp/tp
 *   2d      q*q      B/q       C/q   NH/q   C/q    4C/q    multiple of q       Vp/q
 *   2.5d    d*q*q    B/(dq)    C/q   NH/q   C/q    4C/q    multiple of q       Vp/q
 *   3d      l*l*l    B/l^2     C/l   NH/l   C/l    4C/l    multiple of l^2     Vp/l
 *
 * A Llama shape (grouped-query attention, SwiGLU MLP; lib/contract/model.h)
 * adds NKV KV heads and the MLP width I in 4C's place: 1d holds NKV/tp KV
 * heads (KVl = NKVl * C/NH K or V columns) and Fl = I/tp of the gate and
 * of the up projection each (its fc output is [N, 2 Fl]); the 2d/2.5d/3d
 * layouts are not built for Llama (pt_shape_2d / _3d refuse it).
 *
 * 1d: Megatron-LM (Shoeybi et al. 2019, section 3); 2d: SUMMA as in Optimus
 * (Xu et al. 2021, section 3; van de Geijn & Watts 1997); 2.5d: Tesseract
 * (Wang et al. 2021, section 3); 3d: Bian et al. 2021, "Maximizing
 * Parallelism in Distributed Training for Huge Neural Networks", section 3,
 * the layout of Colossal-AI's parallel_3d.  Sizes are elements (Bl
 * sequences, Tl positions, the rest columns / heads / vocabulary ids).
 */
#ifndef PTRAIN_SHAPE_H
#define PTRAIN_SHAPE_H

#include <stdint.h>

#include "contract/model.h"
#include "contract/plan.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a geometry needs: the model's sizes, the plan's tensor-parallel
 * shape and the batch. */
typedef struct pt_shape_in {
    long long C, NH, V; /* n_embd, n_head, vocabulary (real ids) */
    long long T;        /* sequence length; Tl = T / sp (a caller that holds T / sp already passes sp = 1) */
    long long B;        /* sequences per data-parallel group and microbatch */
    int mode;           /* the plan's pt_mode (names the layout in messages: 2d or 2.5d) */
    int tp;             /* tensor-parallel ranks (1d splits over tp) */
    int dims[3];        /* pt_plan_tp_dims: {1, 1, tp} (1d), {d, q, q} (2d, 2.5d), {l, l, l} (3d) */
    int sp;             /* sequence-parallel ways (>= 1) */
    /* Llama (all 0 for GPT-2, which is the shape a zeroed tail gives): */
    int family;         /* pt_model_family (lib/contract/model.h): PT_FAMILY_GPT2 0, PT_FAMILY_LLAMA 1 */
    long long NKV;      /* KV heads (0: NH) */
    long long F;        /* MLP width I (0: 4 C) */
} pt_shape_in;

/* One rank's local sizes (the table above).  The runtime's pt_geom adds
 * what only a built grid knows (which rank owns the loss, the LayerNorm
 * group). */
typedef struct pt_shape {
    int mode;          /* the layout family: PT_MODE_1D (also off), PT_MODE_2D (also 2.5d), PT_MODE_3D */
    int dims[3];       /* as given */
    int q;             /* 1d tp, 2d / 2.5d grid side q, 3d side l */
    long long B, V;    /* as given */
    long long Bl;      /* sequences held on each side */
    long long Tl;      /* positions held (T / sp) */
    long long Cr;      /* residual width held */
    long long NHl, Cl, Fl; /* inner side: heads, NHl * head size, MLP width (F / q) */
    long long NKVl, KVl;   /* KV heads held and their K (or V) columns NKVl * C/NH
                            * (= NHl, Cl without grouped-query attention) */
    int family;            /* as given: PT_FAMILY_LLAMA's fc is [N, 2 Fl] (gate | up) */
    long long Vp, Vl;  /* padded vocabulary, vocabulary ids held */
} pt_shape;

/* The layout family of a plan mode: PT_MODE_1D for off and 1d, PT_MODE_2D
 * for 2d and 2.5d, PT_MODE_3D for 3d. */
int pt_shape_kind(int mode);

/* The local sizes of one layout family into *s (zeroed first).  Each
 * returns 0, or on a model or batch the layout cannot split a negative
 * PT_E* code through pt_fail (lib/core/core.h) with one line naming the
 * value and the valid ones (read it with pt_errmsg()):
 *   PT_EINVAL  1d: tp does not divide n_head (Llama: also n_kv_head and
 *              the MLP width I);
 *              2d/2.5d: q does not divide n_head; d*q does not divide B;
 *              3d: l does not divide n_head or l*l n_embd; l*l does not divide B;
 *              2d/2.5d/3d: a Llama shape (not built for it yet; valid: off, 1d);
 *              any: tp, a grid side or sp below 1.
 * pt_shape_1d takes the split from in->tp, 2d from dims {d, q, q}, 3d from
 * dims {l, l, l}; none checks that dims match the mode (pt_plan_tp_dims
 * does). */
int pt_shape_1d(const pt_shape_in *in, pt_shape *s);
int pt_shape_2d(const pt_shape_in *in, pt_shape *s);
int pt_shape_3d(const pt_shape_in *in, pt_shape *s);
/* The family of in->mode (pt_shape_kind). */
int pt_shape_of(const pt_shape_in *in, pt_shape *s);

/* Factors of pt_ring_bytes: an allreduce is a reduce-scatter then an
 * allgather. */
enum { PT_RING_ALLREDUCE = 2, PT_RING_REDUCE_SCATTER = 1, PT_RING_ALLGATHER = 1 };

/* Bytes one rank sends in a ring collective over p ranks on a buffer of
 * `bytes` bytes (the full buffer: an allgather's gathered output, a
 * reduce-scatter's input): factor * (p - 1) * bytes / p, truncated, in
 * unsigned 64-bit arithmetic; 0 when p <= 1.  factor: PT_RING_ALLREDUCE
 * (2) or PT_RING_REDUCE_SCATTER / PT_RING_ALLGATHER (1); broadcast and
 * reduce are counted at 1 too (comm.h's table).  The ring algorithm whose
 * volume nccl-tests uses to define bus bandwidth (nccl-tests
 * doc/PERFORMANCE.md; Patarasuk & Yuan 2009). */
static inline uint64_t pt_ring_bytes(uint64_t bytes, long long p, int factor)
{
    if (p <= 1) return 0;
    return (uint64_t)factor * (uint64_t)(p - 1) * bytes / (uint64_t)p;
}

#ifdef __cplusplus
}
#endif
#endif
