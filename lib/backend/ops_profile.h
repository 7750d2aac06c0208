/* SPDX-License-Identifier: MIT */
/* Where a training step's time goes, op family by op family: an ops table
 * whose every entry times the call it forwards to another table (the
 * backend's), and adds the op's arithmetic (FLOPs) and the bytes it reads
 * and writes to its family.  bench-step's profiled pass swaps it in for
 * one step and prints ms, share of the step and GFLOP/s or GB/s per
 * family (as PyTorch's profiler groups by op, at the granularity of
 * ptrain's ops table).
 *
 * Timing: wall clock (pt_now) around each call; for a device whose ops
 * return before the work is done, the sync function given (e.g.
 * pt_cuda_sync) runs before and after each call, which serialises the
 * step: a profiled step is slower than a plain one, and only its shares
 * are meant to be read.  FLOPs count multiply-adds as two (PaLM's count);
 * bytes are each operand read once and each result written once (a lower
 * bound of the traffic).  The families:
 *   gemm         matmul_fwd/bwd (epilogues included), gemm_batched
 *   attention    attention_fwd/bwd (flash), the materialised reference, causal softmax
 *   classifier   classifier_fwd/bwd, classifier_rows_fwd/bwd, the xent pieces
 *   layernorm    layernorm_*, rmsnorm_* (whole rows and in pieces)
 *   elementwise  gelu, add, bias, epilogue_fwd/bwd, rope, swiglu
 *   embedding    embedding_fwd/bwd, posemb_fwd/bwd
 *   optimizer    adamw
 *   memory       zero, fill, copy, convert, copy2d, add2d, axpy, scale, sum, sumsq
 * One profile is active per process at a time (the wrappers find it
 * through a process-wide pointer): not thread-safe; the ops are called
 * from one thread. */
#ifndef PTRAIN_OPS_PROFILE_H
#define PTRAIN_OPS_PROFILE_H
#include "backend/ops.h"

enum {
    PT_OPF_GEMM,
    PT_OPF_ATTENTION,
    PT_OPF_CLASSIFIER,
    PT_OPF_LAYERNORM,
    PT_OPF_ELEMENTWISE,
    PT_OPF_EMBEDDING,
    PT_OPF_OPTIMIZER,
    PT_OPF_MEMORY,
    PT_OPF_N
};

/* One family's totals since pt_ops_profile_start: seconds, FLOPs, bytes, calls. */
typedef struct pt_op_family_stats {
    double seconds, flops, bytes;
    long calls;
} pt_op_family_stats;

typedef struct pt_ops_profile {
    pt_ops table;        /* the wrapping table (what pt_ops_profile_start returns) */
    const pt_ops *inner; /* the table every call goes to */
    void (*sync)(void);  /* NULL for a synchronous backend (the CPU's) */
    pt_op_family_stats fam[PT_OPF_N];
} pt_ops_profile;

/* Make prof the active profile around inner: zeroes its totals and returns
 * &prof->table, a table with inner's name and dtypes whose entries time
 * and forward each call (entries NULL in inner stay NULL).  sync: called
 * before and after each call (NULL: none).  Replaces any active profile.
 * Never fails. */
const pt_ops *pt_ops_profile_start(pt_ops_profile *prof, const pt_ops *inner, void (*sync)(void));
/* No profile active; a call through a wrapping table after this aborts
 * with a message (it has nowhere to count). */
void pt_ops_profile_stop(void);
/* "gemm", "attention", ... (above); "?" out of range. */
const char *pt_op_family_name(int f);
/* 1 when family f is rated by its FLOPs (GFLOP/s: gemm, attention,
 * classifier), 0 by its bytes (GB/s). */
int pt_op_family_compute(int f);

#endif
