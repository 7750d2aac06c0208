/* SPDX-License-Identifier: MIT */
/* AdamW and the learning-rate schedule (see adamw.h). */
#include "optim/adamw.h"
#include <math.h>

void pt_adamw_default(pt_adamw_cfg *c)
{
    c->beta1 = 0.9f;
    c->beta2 = 0.95f;
    c->eps = 1e-8f;
    c->weight_decay = 0.1f;
    c->grad_clip = 1.0f;
}

void pt_adamw_update(const pt_ops *ops, float *p, void *work, const float *g, float *m, float *v, size_t n, float lr,
                     float wd, const pt_adamw_cfg *c, int t)
{
    const float b1 = c->beta1, b2 = c->beta2;
    const float bc1 = 1.0f - powf(b1, (float)t), bc2 = 1.0f - powf(b2, (float)t);
    ops->adamw(p, work, g, m, v, n, lr, b1, b2, c->eps, wd, bc1, bc2);
}

float pt_lr_schedule(int step, int warmup, int total, float lr_max, float lr_min)
{
    if (warmup > 0 && step < warmup) return lr_max * (float)(step + 1) / (float)warmup;
    int span = total - warmup - 1;
    if (span <= 0) return lr_max;
    double progress = (double)(step - warmup) / span;
    if (progress > 1) progress = 1;
    return lr_min + (float)(0.5 * (1.0 + cos(3.14159265358979323846 * progress))) * (lr_max - lr_min);
}
