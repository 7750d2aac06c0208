/* SPDX-License-Identifier: MIT */
/* Internals shared by the files of lib/contract's plan contract (plan_env.c,
 * plan_modes.c, plan_validate.c, plan_place.c).  Not installed, not for
 * other modules: they call the functions of plan.h. */
#ifndef PTRAIN_PLAN_PRIV_H
#define PTRAIN_PLAN_PRIV_H
#include <stddef.h>

#include "contract/plan.h"

/* Highest number that an int size may reach before products overflow. */
#define SIZE_MAX_VALUE (1 << 20)
#define N_MODES (PT_MODE_3D + 1) /* the rows of PT_MODE_ROWS */
#define N_SCHEDS 3    /* pt_schedule */
#define N_RECOMPUTE 3 /* pt_recompute */
#define N_PRECISIONS 2 /* pt_precision */

/* 1 if s (exactly 3 chars) is a permutation of D, P, T (plan_place.c). */
int pt_plan_i_order_is_perm(const char *s);
/* 1 if s (exactly 3 chars) is a permutation of 0, 1, 2 (plan_place.c). */
int pt_plan_i_tp_order_is_perm(const char *s);

/* A comma-separated list written into a fixed buffer; when it does not
 * fit it ends in "..." rather than in a cut number (plan_modes.c). */
typedef struct pt_plan_i_strlist {
    char *buf;
    size_t len, used;
    int count, full;
} pt_plan_i_strlist;
void pt_plan_i_sl_init(pt_plan_i_strlist *s, char *buf, size_t len);
void pt_plan_i_sl_add(pt_plan_i_strlist *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The mode table's shape rule (plan_modes.c): 1 if tp has the grid shape
 * of mode m: any size for off/auto/1d, q*q for 2d, depth*q*q for 2.5d
 * (depth >= 1; 0 = any depth), l*l*l for 3d. */
int pt_plan_i_tp_has_shape(pt_mode m, int depth, int tp);
/* "valid tp here: 1, 4" or, for 2.5d without a depth, "valid (tp_depth,
 * tp) here: (1, 1), (2, 2)": the tail of the fit errors, from
 * pt_plan_list_tp. */
void pt_plan_i_valid_tp_text(pt_mode m, int depth, int n, int cap, char *buf, size_t len);
/* What a tp of mode m must look like, for messages ("q*q", "2*q*q"). */
const char *pt_plan_i_shape_text(pt_mode m, int depth, char *buf, size_t len);

#endif
