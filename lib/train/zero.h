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

#endif
