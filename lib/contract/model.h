/* SPDX-License-Identifier: MIT */
/* The model shape a plan is made for and the named presets: part of the
 * runtime contract (lib/contract), libc only, so the SPANK plugin, the
 * planner (lib/plan/cost.h) and lib/model share one table. */
#ifndef PTRAIN_CONTRACT_MODEL_H
#define PTRAIN_CONTRACT_MODEL_H

/* The model shape a plan is made for: the same fields and presets as
 * lib/model's pt_gpt_config (pt_gpt_preset delegates to this table). */
typedef struct pt_model_shape {
    int n_layer, n_head, n_embd; /* L, heads, C */
    int seq_len;                 /* T of every training sequence */
    int vocab;                   /* V (50257 for GPT-2's BPE) */
} pt_model_shape;

/* "test", "tiny", "small", "gpt2-124M", or "L,H,C,T,V" (five positive
 * integers, C % H == 0).  0, or -1 with "invalid <what> '<s>' (valid: a
 * preset test, tiny, small, gpt2-124M or L,H,C,T,V)". */
int pt_model_shape_parse(const char *what, const char *s, pt_model_shape *m);
/* "test, tiny, small, gpt2-124M" */
const char *pt_model_preset_names(void);
/* The preset called name into *m (m may be NULL): 0, or -1 (no message)
 * when there is none; lib/model's pt_gpt_preset delegates to it. */
int pt_model_preset(const char *name, pt_model_shape *m);

#endif
