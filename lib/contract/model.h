/* SPDX-License-Identifier: MIT */
/* The model shape a plan is made for and the named presets: part of the
 * runtime contract (lib/contract), libc only, so the SPANK plugin, the
 * planner (lib/plan/cost.h) and lib/model share one table. */
#ifndef PTRAIN_CONTRACT_MODEL_H
#define PTRAIN_CONTRACT_MODEL_H

/* The model families ptrain knows.
 *   gpt2   GPT-2 (Radford et al. 2019): LayerNorm with bias, learned
 *          positions, GELU MLP [4C], biases everywhere, head tied to wte.
 *   llama  Llama (Touvron et al. 2023; Llama 3, Dubey et al. 2024) as
 *          Hugging Face's LlamaForCausalLM computes it: RMSNorm (fp32,
 *          eps norm_eps), rotary position embeddings in the rotate-half
 *          layout (Su et al. 2021; theta rope_theta, Llama 3.1's frequency
 *          scaling when rope_factor > 0), SwiGLU MLP down(silu(gate x) * up x)
 *          of width ffn (Shazeer 2020), grouped-query attention with
 *          n_kv_head KV heads (Ainslie et al. 2023; query head h reads KV
 *          head h / (n_head / n_kv_head)), no biases but optional q/k/v ones
 *          (Qwen2), a head tied to wte or not. */
typedef enum pt_model_family { PT_FAMILY_GPT2 = 0, PT_FAMILY_LLAMA = 1 } pt_model_family;

/* The model shape a plan is made for: the same fields and presets as
 * lib/model's pt_gpt_config (pt_gpt_preset delegates to this table).
 * The fields after vocab are 0 for GPT-2 (a zeroed tail is GPT-2's shape);
 * read them through the accessors below, which give each family's
 * defaults. */
typedef struct pt_model_shape {
    int n_layer, n_head, n_embd; /* L, heads, C */
    int seq_len;                 /* T of every training sequence (GPT-2: rows of wpe) */
    int vocab;                   /* V (50257 for GPT-2's BPE, 128256 for Llama 3's) */
    int family;                  /* pt_model_family */
    int n_kv_head;               /* KV heads, dividing n_head (0: n_head) */
    int ffn;                     /* MLP width I (0: 4C) */
    int untied;                  /* 1: the head is its own [V, C] weight (lm_head) */
    int qkv_bias;                /* llama: q/k/v projections have biases (Qwen2) */
    float norm_eps;              /* RMSNorm epsilon (0: 1e-5); GPT-2's LayerNorm uses 1e-5 */
    float rope_theta;            /* RoPE base (0: 10000) */
    /* Llama 3.1 RoPE frequency scaling (rope_scaling.rope_type "llama3"):
     * factor, low_freq_factor, high_freq_factor,
     * original_max_position_embeddings; rope_factor 0: none */
    float rope_factor, rope_low_freq, rope_high_freq;
    int rope_orig_ctx;
} pt_model_shape;

/* The family's name ("gpt2", "llama"), or "?" outside the enum. */
const char *pt_model_family_name(int family);
/* KV heads: n_kv_head, or n_head where it is 0. */
int pt_model_kv_heads(const pt_model_shape *m);
/* MLP width I: ffn, or 4 C where it is 0. */
int pt_model_ffn(const pt_model_shape *m);
/* RMSNorm / LayerNorm epsilon: norm_eps, or 1e-5 where it is 0. */
double pt_model_norm_eps(const pt_model_shape *m);
/* RoPE base: rope_theta, or 10000 where it is 0. */
double pt_model_rope_theta(const pt_model_shape *m);
/* 1 when the head reads its own weight (llama with untied), else 0 (tied to wte). */
int pt_model_untied(const pt_model_shape *m);

/* A preset name, "L,H,C,T,V" (GPT-2: five positive integers, C % H ==
 * 0), or "llama:L,H,KV,C,I,T,V[,untied][,qkv-bias][,theta=X]" (C % H == 0,
 * H % KV == 0, (C/H) even; theta a positive number).  0, or -1 with
 * "invalid <what> '<s>' (valid: a preset NAMES, L,H,C,T,V or
 * llama:L,H,KV,C,I,T,V[,untied][,qkv-bias][,theta=X])". */
int pt_model_shape_parse(const char *what, const char *s, pt_model_shape *m);
/* The spelling pt_model_shape_parse takes back to the same shape (a preset's
 * name where the shape is one, exactly; else the L,H,C,T,V or llama: form,
 * with theta when it is not 10000 and the Llama 3.1 scaling only through a
 * preset).  Returns the length snprintf would (truncated at n). */
int pt_model_shape_format(const pt_model_shape *m, char *buf, int n);
/* The shape with a Llama's defaults written out (KV heads, MLP width,
 * eps, theta; untied and qkv_bias as 0/1), so that two spellings of one
 * model compare and hash equal (a GPT-2 shape is left as it is). */
void pt_model_shape_normalise(pt_model_shape *m);
/* "test, tiny, small, gpt2-124M, llama-test, ..." */
const char *pt_model_preset_names(void);
/* The preset called name into *m (m may be NULL): 0, or -1 (no message)
 * when there is none; lib/model's pt_gpt_preset delegates to it. */
int pt_model_preset(const char *name, pt_model_shape *m);
/* Parameters of the shape (unique, no vocabulary padding): GPT-2's
 * embeddings, LayerNorms, biases and tied head; Llama's embedding,
 * RMSNorm weights, q [C, C], k and v [KV*HS, C] each (with biases when
 * qkv_bias), o [C, C], gate and up [I, C] each, down [C, I], and the
 * untied head [V, C]. */
long long pt_model_num_params(const pt_model_shape *m);
/* Training FLOPs per token at length T (forward + backward): 6 N_matmul +
 * 12 L T C (Kaplan et al. 2020; PaLM, Chowdhery et al. 2022, app. B), N_matmul
 * the weights every token multiplies: GPT-2 12 L C^2 + C V; Llama L (2 C^2
 * + 2 C KV HS + 3 C I) + C V. */
double pt_model_flops_per_token(const pt_model_shape *m, int T);

/* ---- the whole model's parameter list ------------------------------------
 * One list for lib/model, checkpoints and converters: entry i (0 <=
 * i < pt_model_param_count) is the parameter with RNG stream i.
 *   gpt2   0 wte [V, C], 1 wpe [T, C], per block l (12): h<l>.ln1.w, .ln1.b
 *          [C], .qkv.w [3C, C] (rows q|k|v), .qkv.b [3C], .proj.w [C, C],
 *          .proj.b, .ln2.w, .ln2.b [C], .fc.w [4C, C], .fc.b [4C],
 *          .fcproj.w [C, 4C], .fcproj.b [C]; then lnf.w, lnf.b [C].
 *   llama  0 wte [V, C], per block l (7, 9 with qkv_bias): h<l>.ln1.w [C],
 *          .q.w [C, C] (HF q_proj), (.q.b [C]), .kv.w [2 KV HS, C] (rows:
 *          k_proj's then v_proj's), (.kv.b [2 KV HS]), .proj.w [C, C]
 *          (o_proj), .ln2.w [C], .fc.w [2I, C] (rows: gate_proj's then
 *          up_proj's), .fcproj.w [C, I] (down_proj); then lnf.w [C] and,
 *          untied, lm_head.w [V, C].
 * Vectors have cols 1.  (The model pads wte's and lm_head's rows to the
 * layout's vocabulary; the list gives the real V.) */
typedef enum pt_param_role {
    PT_ROLE_WTE, PT_ROLE_WPE, PT_ROLE_NORM_W, PT_ROLE_NORM_B, PT_ROLE_QKV_W, PT_ROLE_QKV_B, PT_ROLE_Q_W,
    PT_ROLE_Q_B, PT_ROLE_KV_W, PT_ROLE_KV_B, PT_ROLE_PROJ_W, PT_ROLE_PROJ_B, PT_ROLE_FC_W, PT_ROLE_FC_B,
    PT_ROLE_FCPROJ_W, PT_ROLE_FCPROJ_B, PT_ROLE_HEAD
} pt_param_role;
typedef struct pt_param_info {
    char name[24];       /* "h3.kv.w" */
    long long rows, cols;
    int role;            /* pt_param_role */
    int block;           /* l for a block's parameter, -1 before the blocks, n_layer after */
} pt_param_info;
/* Parameters per block: gpt2 12; llama 7, or 9 with qkv_bias. */
int pt_model_block_params(const pt_model_shape *m);
/* Parameters before the first block: gpt2 2 (wte, wpe), llama 1 (wte). */
int pt_model_pre_params(const pt_model_shape *m);
/* All parameters: pre + L * block + (gpt2 2, llama 1 or 2 untied). */
int pt_model_param_count(const pt_model_shape *m);
/* Entry i of the list into *out: 0, or -1 for i outside [0, count). */
int pt_model_param_info(const pt_model_shape *m, int i, pt_param_info *out);

#endif
