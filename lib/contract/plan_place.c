/* SPDX-License-Identifier: MIT */
/* Placement: where a task's rank sits in the plan's process grid.  The
 * rank order is a permutation of D, P, T, right-most fastest, after
 * SageMaker's placement_strategy (Karakus et al. 2021, sec. 3.3); ranks
 * are numbered node by node ("cluster").  See plan.h and
 * ptrain-layouts(7).  libc only. */
#include "contract/plan_priv.h"

#include <limits.h>
#include <string.h>

/* 1 if s (exactly 3 chars) is a permutation of D, P, T. */
int pt_plan_i_order_is_perm(const char *s)
{
    if (strlen(s) != 3) return 0;
    int seen = 0;
    for (int i = 0; i < 3; i++) {
        switch (s[i]) {
        case 'D': seen |= 1; break;
        case 'P': seen |= 2; break;
        case 'T': seen |= 4; break;
        default: return 0;
        }
    }
    return seen == 7;
}


int pt_plan_i_tp_order_is_perm(const char *s)
{
    if (strlen(s) != 3) return 0;
    int seen = 0;
    for (int i = 0; i < 3; i++) {
        if (s[i] < '0' || s[i] > '2') return 0;
        seen |= 1 << (s[i] - '0');
    }
    return seen == 7;
}

int pt_plan_rank(const pt_job_geometry *g, int node_index, int local_task)
{
    if (!g || !g->tasks_per_node || node_index < 0 || node_index >= g->nnodes || local_task < 0)
        return -1;
    if (local_task >= g->tasks_per_node[node_index]) return -1;
    long long r = 0;
    for (int i = 0; i < node_index; i++) {
        if (g->tasks_per_node[i] < 0) return -1;
        r += g->tasks_per_node[i];
    }
    r += local_task;
    if (r >= g->ntasks || r > INT_MAX) return -1;
    return (int)r;
}

int pt_plan_coords(const pt_plan *p, int rank, int *dp_rank, int *pp_rank, int *tp_rank, int *sp_rank)
{
    if (!p || p->dp < 1 || p->pp < 1 || p->tp < 1 || p->sp < 1) return -1;
    if (memchr(p->rank_order, '\0', sizeof p->rank_order) == NULL || !pt_plan_i_order_is_perm(p->rank_order))
        return -1;
    if (memchr(p->tp_order, '\0', sizeof p->tp_order) == NULL || !pt_plan_i_tp_order_is_perm(p->tp_order))
        return -1;
    int dims[3];
    if (pt_plan_tp_dims(p, dims) < 0) return -1;
    long long world = (long long)p->dp * p->pp * p->tp * p->sp;
    if (rank < 0 || rank >= world) return -1;
    /* The T axis holds tp*sp ranks, tp varying fastest inside it. */
    long long rem = rank;
    int c[3] = {0, 0, 0}; /* D, P, T */
    for (int i = 2; i >= 0; i--) {
        char a = p->rank_order[i];
        long long size = a == 'D' ? p->dp : a == 'P' ? p->pp : (long long)p->tp * p->sp;
        int idx = a == 'D' ? 0 : a == 'P' ? 1 : 2;
        c[idx] = (int)(rem % size);
        rem /= size;
    }
    if (dp_rank) *dp_rank = c[0];
    if (pp_rank) *pp_rank = c[1];
    if (tp_rank) { /* the block's tp position in tp_order, as the canonical index */
        int pos = c[2] % p->tp, coord[3];
        for (int i = 2; i >= 0; i--) {
            const int a = p->tp_order[i] - '0';
            coord[a] = pos % dims[a];
            pos /= dims[a];
        }
        *tp_rank = (coord[0] * dims[1] + coord[1]) * dims[2] + coord[2];
    }
    if (sp_rank) *sp_rank = c[2] / p->tp;
    return 0;
}
