/* SPDX-License-Identifier: MIT */
/* Internal to lib/train: what an implementation of pt_train_strategy
 * (train.h) may use besides the public pt_train API (defined in bucket.c,
 * below the strategies and train.c), and the tables the strategy lookup
 * (pt_train_strategy_zero, train.c) chooses from.  train.c calls strategies
 * only through their tables; allreduce.c and zero.c use only this header. */
#ifndef PTRAIN_TRAIN_STRATEGY_H
#define PTRAIN_TRAIN_STRATEGY_H
#include "train/train.h"

/* Buckets (train.h, pt_train_bucket) are built the same way by every
 * strategy: parameters grouped by the group their gradient is summed over
 * (pt_param.shard.sync), groups in order of first appearance, so each
 * group is one range of the flat buffers.  pt_train_bucket_next finds the
 * first parameter at or after *i whose group has no bucket yet, sets *i to
 * it and appends that group's bucket with comm and off set (the caller
 * walks the group's parameters with pt_train_next_in_group and sets n).
 * *b receives the bucket, or NULL when every group has one.  Errors:
 * PT_EINVAL (more than PT_TRAIN_MAX_BUCKETS groups). */
int pt_train_bucket_next(pt_train *t, int *i, size_t off, pt_train_bucket **b);
/* The first parameter at or after j whose gradient is summed over sc, or
 * -1 when none. */
int pt_train_next_in_group(const pt_gpt *m, int j, const pt_comm *sc);

/* The ZeRO stages 1, 2, 3 (zero.c), in stage order; stage 0 is
 * pt_train_allreduce (allreduce.c). */
extern const pt_train_strategy pt_train_zero_stages[3];

#endif
