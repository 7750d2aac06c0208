/* SPDX-License-Identifier: MIT */
/* AdamW with decoupled weight decay (Loshchilov & Hutter 2019, Algorithm
 * 2), global-norm gradient clipping (Pascanu et al. 2013) and a linear
 * warmup + cosine learning-rate schedule (Loshchilov & Hutter 2017, SGDR;
 * as used for GPT-3, Brown et al. 2020 appendix B). */
#ifndef PTRAIN_ADAMW_H
#define PTRAIN_ADAMW_H
#include "backend/ops.h"
#include <stddef.h>

typedef struct pt_adamw_cfg {
    float beta1, beta2, eps;   /* default 0.9, 0.95, 1e-8 */
    float weight_decay;        /* decoupled; applied to tensors marked decay (default 0.1) */
    float grad_clip;           /* max global L2 norm; <= 0 disables (default 1.0) */
} pt_adamw_cfg;

void pt_adamw_default(pt_adamw_cfg *c);

/* One AdamW update of n parameters p with gradient g and moments m, v
 * (all [n] floats of the backend's memory), at step t >= 1 (bias
 * correction), learning rate lr and weight decay wd (0 for biases and
 * norms), computed by the backend's ops->adamw:
 *   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2
 *   p -= lr * ( m/(1-b1^t) / (sqrt(v/(1-b2^t)) + eps) + wd * p )
 * work: NULL (or p), or [n] ops->act elements that get the updated p in
 * the same pass (the bf16 weight copy of mixed precision). */
void pt_adamw_update(const pt_ops *ops, float *p, void *work, const float *g, float *m, float *v, size_t n, float lr,
                     float wd, const pt_adamw_cfg *c, int t);

/* Learning rate at `step` (0-based) of `total`: linear warmup from
 * lr_max/warmup to lr_max over `warmup` steps, then cosine decay to lr_min
 * at the last step. */
float pt_lr_schedule(int step, int warmup, int total, float lr_max, float lr_min);

#endif
