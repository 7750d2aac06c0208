/* SPDX-License-Identifier: MIT */
/* Pipeline schedules as action lists, and the stage split (lib/contract:
 * the planner's energy frontier and the runtime both use them).  Pure
 * functions: no MPI, no backend; the executor (lib/pipeline/pipeline.h)
 * walks the list.
 *
 * A pipeline of pp ranks holds S = pp * v virtual stages (v model chunks
 * per rank; v = 1 except for the interleaved schedule).  Chunk c of pp
 * rank r holds virtual stage s = c * pp + r (Narayanan et al. 2021,
 * "Efficient Large-Scale Language Model Training on GPU Clusters Using
 * Megatron-LM", sec. 2.2): the activation of microbatch i leaves stage s
 * for stage s + 1 on rank (r + 1) % pp, and its gradient comes back.
 *
 * Schedules (the order of each rank's forward/backward steps):
 *   GPipe (Huang et al. 2019, sec. 2.3): all m forwards, then all m
 *     backwards; every microbatch is in flight at once (m activation sets).
 *   1F1B = PipeDream-Flush (Narayanan et al. 2021, sec. 2.1): rank r
 *     runs min(pp - r - 1, m) warm-up forwards, then alternates one
 *     forward and one backward, then the remaining backwards (cool-down):
 *     at most pp - r microbatches in flight.  Same bubble as GPipe,
 *     (pp-1)/(m+pp-1) of the step.
 *   Interleaved 1F1B (sec. 2.2): the same over m * v chunk steps in
 *     Megatron-LM's order (forward chunk ((k mod pp*v) / pp) of microbatch
 *     (k / (pp*v)) * pp + k mod pp; warm-up 2(pp - r - 1) + (v - 1) pp
 *     chunk steps, all of them when m == pp); needs m % pp == 0; bubble
 *     (pp-1)/(v m + pp - 1).
 *
 * Communication.  The lists pair every send with its receive so that
 * blocking point-to-point (pt_send/pt_recv, which may wait for the
 * receiver) cannot deadlock: they are built by running all ranks in unit
 * time rounds (a rank computes its next step as soon as its input has
 * arrived), and the messages of each round are exchanged in one global
 * order (by sender rank) that every rank follows.  The first unfinished
 * message in that order always has both ends waiting on it, so every
 * message completes.  A receive happens in the round its message is sent,
 * possibly before the step that consumes it.  So a microbatch holds two
 * things on a rank: the model's activation slot (pt_gpt_use_slot), from
 * its first forward to its last backward (`nslots` of them: pp - r under
 * 1F1B, m under GPipe), and a boundary buffer set (received activation and
 * gradient per chunk), from its first action (often the receive of its
 * input) to its last (the backward of chunk 0 or the gradient send after
 * it), `nbufs` of them.
 */
#ifndef PTRAIN_CONTRACT_SCHEDULE_H
#define PTRAIN_CONTRACT_SCHEDULE_H
#include "contract/plan.h"

/* One step of a rank's list. */
typedef enum pt_pp_op {
    PT_PP_FWD,       /* forward of chunk `chunk` on microbatch `mb` (the last stage also runs the head) */
    PT_PP_BWD,       /* backward of chunk `chunk` on microbatch `mb` (the first stage also the embedding) */
    PT_PP_SEND_ACT,  /* send chunk `chunk`'s output activation of `mb` to pp rank `peer` */
    PT_PP_RECV_ACT,  /* receive the input activation of `mb` for chunk `chunk` from `peer` */
    PT_PP_SEND_GRAD, /* send d loss / d(input of chunk `chunk`) of `mb` to `peer` */
    PT_PP_RECV_GRAD, /* receive d loss / d(output of chunk `chunk`) of `mb` from `peer` */
} pt_pp_op;

typedef struct pt_pp_action {
    int op;    /* a pt_pp_op */
    int mb;    /* microbatch 0..m-1 */
    int chunk; /* this rank's model chunk 0..v-1 the action belongs to */
    int peer;  /* pp rank of the other end (sends/receives), -1 for compute */
    int slot;  /* model activation slot of mb (compute actions), 0..nslots-1; -1 for sends/receives */
    int buf;   /* boundary buffer set of mb (every action), 0..nbufs-1 */
} pt_pp_action;

typedef struct pt_pp_schedule {
    int kind;             /* a pt_schedule */
    int pp, rank, m, v;   /* pipeline size, this pp rank, microbatches, chunks per rank */
    int n;                /* actions in the list */
    pt_pp_action *a;      /* [n] this rank's actions in order (malloc'd) */
    int nslots;           /* model activation slots: most microbatches between their first forward
                           * and their last backward on this rank (>= 1) */
    int nbufs;            /* boundary buffer sets: most microbatches between their first action
                           * (often the receive of their input) and their last (>= nslots) */
    int rounds;           /* unit-time rounds of the whole pipeline (each chunk step 1 unit) */
} pt_pp_schedule;

/* Check a schedule request: pp >= 1, m >= 1, v >= 1, v > 1 only with the
 * interleaved schedule, interleaved needs m % pp == 0, pp * v <=
 * PT_PP_SPLIT_MAX.  PT_EINVAL with one line naming the value and the
 * values that fit. */
int pt_pp_schedule_check(int kind, int pp, int m, int v);

/* Build pp rank `rank`'s action list for `kind` (a pt_schedule) with m
 * microbatches and v chunks per rank (all ranks are simulated together;
 * cost O(pp * m * v) rounds).  Free with pt_pp_schedule_free.
 * Errors: those of pt_pp_schedule_check, PT_EINVAL for rank outside
 * 0..pp-1, PT_ENOMEM. */
int pt_pp_schedule_build(pt_pp_schedule *s, int kind, int pp, int rank, int m, int v);
void pt_pp_schedule_free(pt_pp_schedule *s);

/* The analytic bubble fraction of a schedule (idle share of each rank's
 * step when every chunk step takes the same time): (pp-1)/(m+pp-1) for
 * GPipe and 1F1B, (pp-1)/(v m + pp-1) for interleaved (Narayanan et al.
 * 2021, sec. 2.1 and 2.2). */
double pt_pp_bubble_formula(int kind, int pp, int m, int v);

/* Name of a pt_pp_op ("fwd", "send_act", ...) and of a schedule
 * ("gpipe", "1f1b", "interleaved"). */
const char *pt_pp_op_name(int op);
const char *pt_pp_schedule_name(int kind);

/* ---- stage split -------------------------------------------------------- */

/* Block ranges of the S = pp * v virtual stages: stage s holds blocks
 * [l0[s], l1[s]), contiguous and in order (l0[0] = 0, l1[S-1] = n_layer). */
typedef struct pt_pp_split {
    int nstages;                 /* S = pp * v */
    int l0[PT_PP_SPLIT_MAX];
    int l1[PT_PP_SPLIT_MAX];
} pt_pp_split;

/* Split n_layer blocks over pp * v virtual stages.  counts NULL or ncounts
 * 0: even split, n_layer / S blocks per stage and one more for the first
 * n_layer % S stages.  Otherwise counts[s] blocks for stage s (pipeline
 * order, as plan.pp_split / --pp-split).  Errors (PT_EINVAL, one line
 * naming the value and what fits): pp * v > n_layer, ncounts != pp * v,
 * a stage with fewer than 1 block, counts not summing to n_layer. */
int pt_pp_split_layers(int n_layer, int pp, int v, const int *counts, int ncounts, pt_pp_split *out);

/* The block range of chunk c on pp rank r: virtual stage c * pp + r. */
void pt_pp_split_chunk(const pt_pp_split *sp, int pp, int r, int c, int *l0, int *l1);

/* Microbatch size: B sequences of the dp group split into m microbatches
 * of B / m sequences.  PT_EINVAL naming B and m and listing the m that
 * divide B when it does not divide. */
int pt_pp_microbatch(int B, int m, int *micro);

#endif
