/* SPDX-License-Identifier: MIT */
/* What the strategies (allreduce.c, zero.c) share, below them and train.c:
 * the buckets of gradient sync groups (strategy.h) and the tied
 * parameters' second sum (pt_train_sync_tied, train.h).  train.c reaches the
 * strategies only through their tables and they reach these helpers here,
 * so no two files of lib/train call into each other. */
#include "train/strategy.h"

#define TRY(x) do { int rc_ = (x); if (rc_) return rc_; } while (0)

int pt_train_next_in_group(const pt_gpt *m, int j, const pt_comm *sc)
{
    for (; j < m->nparams; j++)
        if (m->params[j].shard.sync == sc) return j;
    return -1;
}

int pt_train_bucket_next(pt_train *t, int *i, size_t off, pt_train_bucket **b)
{
    const pt_gpt *m = t->model;
    *b = NULL;
    for (; *i < m->nparams; ++*i) {
        pt_comm *sc = m->params[*i].shard.sync;
        int known = 0;
        for (int k = 0; k < t->nbuckets; k++) known |= t->buckets[k].comm == sc;
        if (known) continue;
        if (t->nbuckets == PT_TRAIN_MAX_BUCKETS)
            return pt_fail(PT_EINVAL, "parameters use more than %d gradient sync groups", PT_TRAIN_MAX_BUCKETS);
        *b = &t->buckets[t->nbuckets++];
        (*b)->comm = sc;
        (*b)->off = off;
        return PT_OK;
    }
    return PT_OK;
}

int pt_train_sync_tied(pt_train *t)
{
    const pt_gpt *m = t->model;
    for (int i = 0; i < m->nparams; i++) {
        const pt_param *p = &m->params[i];
        if (p->tied && p->tied->size > 1) TRY(pt_allreduce_sum(p->tied, p->grad, (size_t)p->shard.numel));
    }
    return PT_OK;
}
