/* SPDX-License-Identifier: MIT */
/* Internal to lib/train: the ZeRO pieces that train.c's generic entry
 * points dispatch to when t->zero is set (see train.h, "ZeRO"). */
#ifndef PTRAIN_TRAIN_ZERO_H
#define PTRAIN_TRAIN_ZERO_H
#include "train/train.h"

/* Zero the full-size gradients still in flight (stage 2/3 units whose
 * reduce-scatter waits for pt_train_sync, e.g. the tied embedding). */
void pt_zero_zero_inflight(pt_train *t);
/* Global gradient norm over the own slices (train.h, pt_train_grad_norm). */
int pt_zero_grad_norm(pt_train *t, double *norm);
/* train.h, pt_train_owned, under ZeRO. */
int pt_zero_owned(const pt_train *t, int i, int64_t *lo, int64_t *hi, const float **data, const float **grad);

/* train.h, pt_train_owned_state and pt_train_state_loaded, under ZeRO. */
int pt_zero_owned_state(pt_train *t, int i, int64_t *lo, int64_t *hi, float **data, float **m, float **v);
int pt_zero_regather(pt_train *t);

/* Buckets (train.h, pt_train_bucket) are built the same way by the
 * allreduce registry (train.c) and ZeRO (zero.c): parameters grouped by
 * the group their gradient is summed over (pt_param.shard.sync), groups in
 * order of first appearance, so each group is one range of the flat
 * buffers.  pt_train_bucket_next finds the first parameter at or after *i
 * whose group has no bucket yet, sets *i to it and appends that group's
 * bucket with comm and off set (the caller walks the group's parameters
 * with pt_train_next_in_group and sets n).  *b receives the bucket, or
 * NULL when every group has one.  Errors: PT_EINVAL (more than
 * PT_TRAIN_MAX_BUCKETS groups). */
int pt_train_bucket_next(pt_train *t, int *i, size_t off, pt_train_bucket **b);
/* The first parameter at or after j whose gradient is summed over sc, or
 * -1 when none. */
int pt_train_next_in_group(const pt_gpt *m, int j, const pt_comm *sc);

#endif
