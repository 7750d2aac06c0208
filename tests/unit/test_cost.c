/* SPDX-License-Identifier: MIT */
/* lib/plan/cost.c: the cost model against lib/model on random shapes and
 * plans (parameter count, FLOPs, activation floats, which plans fit), and
 * hand-checked cases (bubble, ZeRO division, the 1d byte formula, presets
 * and their messages).  Shapes and plans are drawn at random (seed
 * printed; PTRAIN_TEST_SEED repeats a run). */
#define _POSIX_C_SOURCE 200809L
#include "model/gpt.h"
#include "plan/cost.h"
#include "shape/shape.h"
#include "tests/tap.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint64_t rng_state;
static int rnd(int n) /* uniform-ish in [0, n) */
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (int)((rng_state >> 33) % (uint64_t)n);
}

static const int link_node[PT_GRP_N] = {PT_NET_NODE, PT_NET_NODE, PT_NET_NODE, PT_NET_NODE, PT_NET_NODE};
static const pt_hw hw = {.gemm_gflops = 50, .lat_s = {1e-6, 2e-6, 1e-5}, .gbps = {100, 20, 5}};

static pt_gpt_config cfg_of(const pt_model_shape *m)
{
    return (pt_gpt_config){m->n_layer, m->n_head, m->n_embd, m->seq_len, m->vocab, .family = PT_FAMILY_GPT2};
}

/* lib/model's activation bytes of one block for plan p at microbatch b:
 * the layout's geometry on a grid that is not built (as pt_gpt_check_plan),
 * at the plan's precision. */
static int model_block_act(const pt_model_shape *ms, const pt_plan *p, int b, int r, size_t *out)
{
    pt_pctx c;
    memset(&c, 0, sizeof c);
    c.plan = *p;
    if (pt_plan_tp_dims(p, c.tp_dims) < 0) return -1;
    const pt_layout *lo = pt_layout_for(p->mode);
    pt_gpt m;
    memset(&m, 0, sizeof m);
    if (!lo || lo->geometry(&c, b, ms->seq_len / p->sp, ms->n_embd, ms->n_head, ms->vocab, &m.g)) return -1;
    m.T = ms->seq_len;
    m.Tl = ms->seq_len / p->sp;
    m.ea = p->precision == PT_PREC_BF16 ? 2 : 4;
    *out = pt_gpt_block_act_bytes(&m, r);
    return 0;
}

/* a random plan of a random mode with small sizes */
static void random_plan(pt_plan *p)
{
    pt_plan_default(p);
    static const pt_mode modes[] = {PT_MODE_1D, PT_MODE_2D, PT_MODE_2P5D, PT_MODE_3D};
    p->mode = modes[rnd(4)];
    switch (p->mode) {
    case PT_MODE_1D: p->tp = 1 + rnd(4); break;
    case PT_MODE_2D: { int q = 1 + rnd(3); p->tp = q * q; break; }
    case PT_MODE_2P5D: { int q = 1 + rnd(2); p->tp_depth = 1 + rnd(3); p->tp = p->tp_depth * q * q; break; }
    default: { int l = 1 + rnd(2); p->tp = l * l * l; break; }
    }
    p->dp = 1 + rnd(3);
    if (rnd(3) == 0) p->sp = 1 + rnd(4); /* with every tp shape: ring attention on the rank's heads */
    p->pp = 1 + rnd(3);
    p->microbatches = 1 + rnd(4);
    p->schedule = rnd(2) ? PT_SCHED_1F1B : PT_SCHED_GPIPE;
    if (p->pp > 1 && rnd(3) == 0) {
        p->schedule = PT_SCHED_INTERLEAVED;
        p->virtual_stages = 2;
        p->microbatches = p->pp * (1 + rnd(2));
    }
    p->recompute = rnd(3);
    if (p->dp * p->sp > 1) p->zero = rnd(4);
    p->precision = rnd(2) ? PT_PREC_BF16 : PT_PREC_FP32;
}

int main(void)
{
    rng_state = (uint64_t)time(NULL) ^ ((uint64_t)clock() << 20);
    if (getenv("PTRAIN_TEST_SEED")) rng_state = strtoull(getenv("PTRAIN_TEST_SEED"), NULL, 10);
    printf("# seed %llu (PTRAIN_TEST_SEED repeats this run)\n", (unsigned long long)rng_state);

    /* ---- presets and the model-shape parser ---- */
    pt_model_shape s;
    pt_gpt_config gc;
    const char *names[] = {"test", "tiny", "small", "gpt2-124M"};
    int same = 1;
    for (int i = 0; i < 4; i++) {
        if (pt_model_shape_parse("--ptrain-model", names[i], &s) < 0 || pt_gpt_preset(names[i], &gc) != PT_OK ||
            memcmp(&gc, &(pt_gpt_config){s.n_layer, s.n_head, s.n_embd, s.seq_len, s.vocab, .family = PT_FAMILY_GPT2}, sizeof gc) != 0)
            same = 0;
    }
    tap_ok(same, "every preset parses and pt_gpt_preset gives the same shape");
    tap_ok(strcmp(pt_gpt_preset_names(), pt_model_preset_names()) == 0, "pt_gpt_preset_names delegates");
    tap_ok(pt_gpt_preset("huge", &gc) != PT_OK && strcmp(pt_errmsg(), "unknown model 'huge'; valid: test, tiny, small, gpt2-124M, llama-test, llama-tiny, llama-small, smollm2-135m, tinyllama-1.1b, llama3.2-1b, llama3.2-3b, llama3.1-8b") == 0,
           "pt_gpt_preset keeps its message: %s", pt_errmsg());
    tap_ok(pt_model_shape_parse("--ptrain-model", "3,4,64,32,97", &s) == 0 && s.n_layer == 3 && s.n_head == 4 &&
               s.n_embd == 64 && s.seq_len == 32 && s.vocab == 97,
           "L,H,C,T,V parses");
    const char *bad[] = {"huge", "3,4,64,32", "3,4,63,32,97", "3,4,64,32,97,1", "0,4,64,32,97", "3,4,64,32,1", "",
                         "3,4,64,32,97x", "-3,4,64,32,97"};
    int refused = 1;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char want[512];
        snprintf(want, sizeof want,
                 "invalid --ptrain-model '%s' (valid: a preset test, tiny, small, gpt2-124M, llama-test, llama-tiny, llama-small, smollm2-135m, tinyllama-1.1b, llama3.2-1b, llama3.2-3b, llama3.1-8b, L,H,C,T,V or llama:L,H,KV,C,I,T,V[,untied][,qkv-bias][,theta=X])", bad[i]);
        if (pt_model_shape_parse("--ptrain-model", bad[i], &s) != -1 || strcmp(pt_errmsg(), want) != 0) {
            refused = 0;
            tap_diag("'%s' gave: %s", bad[i], pt_errmsg());
        }
    }
    tap_ok(refused, "bad shapes are refused with one line naming the value and the valid forms");

    /* ---- agreement with lib/model on random shapes and plans ---- */
    int n_params_ok = 1, flops_ok = 1, act_ok = 1, fit_ok = 1, nfit = 0, nrefused = 0;
    for (int it = 0; it < 400; it++) {
        /* half the shapes friendly to tensor grids (heads and width powers
         * of two), half arbitrary, so both fitting and refused plans occur */
        pt_model_shape m = {1 + rnd(6), 1 + rnd(8), 0, 0, 2 + rnd(300), .family = PT_FAMILY_GPT2};
        m.n_embd = m.n_head * (1 + rnd(8)) * (1 + rnd(2));
        m.seq_len = 1 + rnd(24);
        if (rnd(2)) {
            m.n_head = 1 << rnd(4);
            m.n_embd = m.n_head * 4 * (1 + rnd(3));
            m.seq_len = 4 * (1 + rnd(6));
        }
        pt_gpt_config c = cfg_of(&m);
        pt_plan p;
        random_plan(&p);
        const int gb = rnd(2) ? p.dp * (1 + rnd(12)) : p.dp * p.microbatches * 4 * (1 + rnd(2));
        /* parameters: the sum of the shards on every rank of one tp group,
         * pp = 1, no ZeRO, 1d: C V tied + the rest = pt_gpt_num_params
         * (padding aside): mem_params / 4 at tp = 1 */
        pt_plan q1;
        pt_plan_default(&q1);
        pt_cost c1;
        if (pt_cost_eval(&m, 1, &q1, &hw, link_node, &c1) == 0) {
            if (fabs(c1.mem_params / 4 - (double)pt_gpt_num_params(&c)) > 0.5) {
                n_params_ok = 0;
                tap_diag("params: cost %.0f vs model %lld", c1.mem_params / 4, (long long)pt_gpt_num_params(&c));
            }
            /* FLOPs at tp = pp = 1 (the 1D layout), one sequence: pt_gpt_flops_per_token
             * * T (model FLOPs) + what the fused kernels compute again in the backward:
             * flash attention's scores (2 T C per token and block); not the classifier's
             * logits, which the training step's chunked classifier holds from its
             * forward to its backward (pt_classifier_step) */
            double want = (pt_gpt_flops_per_token(&c, m.seq_len) + 2.0 * m.seq_len * m.n_embd * m.n_layer) * m.seq_len;
            if (fabs(c1.flops - want) > 1e-9 * want) {
                flops_ok = 0;
                tap_diag("flops: cost %.6g vs model %.6g", c1.flops, want);
            }
        } else {
            n_params_ok = 0;
            tap_diag("the trivial plan was refused: %s", pt_errmsg());
        }
        /* which plans fit: the cost model refuses what lib/model refuses */
        pt_cost pc;
        int rc = pt_cost_eval(&m, gb, &p, &hw, link_node, &pc);
        int B = gb / p.dp, micro = B % p.microbatches ? 0 : B / p.microbatches;
        int model_ok = micro > 0 && pt_gpt_check_plan(&c, &p, micro, m.seq_len) == PT_OK &&
                       pt_plan_check_model(&p, m.n_layer, B) == 0;
        if ((rc == 0) != model_ok) {
            fit_ok = 0;
            char sum[640];
            pt_plan_summary(&p, sum, sizeof sum);
            tap_diag("fit disagrees for L%d H%d C%d T%d V%d batch %d %s: cost %s, model %s", m.n_layer, m.n_head,
                     m.n_embd, m.seq_len, m.vocab, gb, sum, rc ? pt_errmsg() : "fits", model_ok ? "fits" : pt_errmsg());
        }
        rc == 0 ? nfit++ : nrefused++;
        if (model_ok) {
            for (int r = 0; r < 3; r++) {
                size_t want = 0;
                double got = pt_cost_block_act_bytes(&m, &p, micro, r);
                if (model_block_act(&m, &p, micro, r, &want) < 0 || got != (double)want) {
                    act_ok = 0;
                    tap_diag("block act bytes (recompute %d, %s): cost %.0f vs model %zu", r,
                             pt_precision_name(p.precision), got, want);
                }
            }
        }
    }
    tap_ok(n_params_ok, "mem_params of the whole model at tp = pp = 1 is 4 x pt_gpt_num_params");
    tap_ok(flops_ok, "FLOPs at tp = pp = 1 are pt_gpt_flops_per_token x tokens + the flash backward's recomputed "
                     "scores (the 1D head's chunked classifier computes no logits twice)");
    tap_ok(fit_ok, "pt_cost_eval refuses exactly what pt_gpt_check_plan / pt_plan_check_model refuse (%d fit, %d refused)",
           nfit, nrefused);
    tap_ok(act_ok, "pt_cost_block_act_bytes equals pt_gpt_block_act_bytes for every layout, recompute mode and "
                   "precision");

    /* ---- the planner and the runtime refuse a layout split with the same
     * line (both from lib/shape): heads, width, batch, per family ---- */
    {
        static const struct {
            pt_mode mode;
            int tp, depth, H, C, B; /* H, C, B: 0 = drawn so that only this condition fails */
            const char *what;
        } cases[] = {
            {PT_MODE_1D, 3, 1, 0, 0, 4, "1d: tp does not divide n_head"},
            {PT_MODE_2D, 4, 1, 0, 0, 4, "2d: q does not divide n_head"},
            {PT_MODE_2D, 9, 1, 6, 36, 0, "2d: q does not divide B"},
            {PT_MODE_2P5D, 8, 2, 4, 32, 0, "2.5d: d*q does not divide B"},
            {PT_MODE_3D, 8, 1, 6, 18, 4, "3d: l*l does not divide n_embd"},
            {PT_MODE_3D, 8, 1, 0, 0, 4, "3d: l does not divide n_head"},
            {PT_MODE_3D, 8, 1, 4, 32, 0, "3d: l*l does not divide B"},
        };
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            pt_model_shape m = {1 + rnd(3), cases[i].H, cases[i].C, 4 * (1 + rnd(4)), 2 + rnd(300), .family = PT_FAMILY_GPT2};
            if (!m.n_head) { /* a head count the split does not divide, odd for 2d / 3d */
                const int q = cases[i].mode == PT_MODE_1D ? 3 : 2;
                do m.n_head = 1 + rnd(12); while (m.n_head % q == 0);
                m.n_embd = m.n_head * 4 * (1 + rnd(3));
            }
            pt_plan p;
            pt_plan_default(&p);
            p.mode = cases[i].mode, p.tp = cases[i].tp, p.tp_depth = cases[i].depth;
            const int ways = cases[i].mode == PT_MODE_2P5D ? 4 : cases[i].tp == 9 ? 3 : 4;
            const int B = cases[i].B ? cases[i].B : ways * rnd(4) + 1 + rnd(ways - 1);
            pt_gpt_config gc = cfg_of(&m);
            pt_cost pc;
            pt_error_clear();
            const int crc = pt_cost_eval(&m, B, &p, &hw, link_node, &pc);
            pt_errsave planner; /* the planner's line, before the runtime's overwrites it */
            pt_error_save(&planner);
            pt_error_clear();
            const int grc = pt_gpt_check_plan(&gc, &p, B, m.seq_len);
            tap_ok(crc == -1 && grc == PT_EINVAL && planner.text[0] && strcmp(planner.text, pt_errmsg()) == 0,
                   "%s (H%d C%d B%d): the planner and the runtime say the same: '%s'", cases[i].what, m.n_head,
                   m.n_embd, B, pt_errmsg());
            if (strcmp(planner.text, pt_errmsg()) != 0) tap_diag("planner: '%s'", planner.text);
        }
    }

    /* ---- hand-checked cases ---- */
    pt_model_shape tm = {4, 4, 64, 32, 97, .family = PT_FAMILY_GPT2};
    pt_plan p;
    pt_cost c;
    pt_plan_default(&p);
    p.pp = 4, p.microbatches = 8;
    pt_cost_eval(&tm, 8, &p, &hw, link_node, &c);
    tap_ok(fabs(c.bubble - 3.0 / 8) < 1e-12, "1f1b pp=4 m=8: bubble (pp-1)/m = 0.375 (%g)", c.bubble);
    p.schedule = PT_SCHED_INTERLEAVED, p.virtual_stages = 1, p.pp = 2, p.virtual_stages = 2;
    pt_cost_eval(&tm, 8, &p, &hw, link_node, &c);
    tap_ok(fabs(c.bubble - 1.0 / 16) < 1e-12, "interleaved pp=2 v=2 m=8: bubble (pp-1)/(v m) = 1/16 (%g)", c.bubble);
    pt_plan_default(&p);
    pt_cost_eval(&tm, 8, &p, &hw, link_node, &c);
    tap_ok(c.bubble == 0 && c.t_bubble == 0, "no pipeline, no bubble");

    /* ZeRO division: dp = 4, 1d tp = 1: every parameter is in one bucket
     * over 4 ranks, units padded to 4 */
    pt_plan_default(&p);
    p.dp = 4;
    pt_cost z[4];
    for (int k = 0; k < 4; k++) {
        p.zero = k;
        pt_cost_eval(&tm, 8, &p, &hw, link_node, &z[k]);
    }
    const double P = 4.0 * (double)pt_gpt_num_params(&(pt_gpt_config){4, 4, 64, 32, 97, .family = PT_FAMILY_GPT2});
    tap_ok(z[0].mem_params == P && z[0].mem_grads == P && z[0].mem_optim == 2 * P,
           "ZeRO 0: 4 + 4 + 8 bytes per parameter");
    /* padded units: within 4 floats per unit (units: wte, wpe, 4 blocks, lnf) */
    const double pad = 4.0 * 4 * 7;
    tap_ok(fabs(z[1].mem_optim - 2 * P / 4) <= pad && z[1].mem_params >= P && z[1].mem_grads >= P,
           "ZeRO 1: optimizer state / 4 (%.0f vs %.0f), parameters and gradients whole", z[1].mem_optim, 2 * P / 4);
    tap_ok(fabs(z[2].mem_grads - P / 4) <= pad / 4 && fabs(z[2].mem_optim - 2 * P / 4) <= pad && z[2].mem_params >= P,
           "ZeRO 2: gradients and optimizer state / 4, parameters whole");
    tap_ok(fabs(z[3].mem_params - P / 4) <= pad / 4 && fabs(z[3].mem_grads - P / 4) <= pad / 4,
           "ZeRO 3: parameters, gradients and optimizer state / 4");
    /* sync bytes: stage 0 one allreduce of all P/4 floats over 4 ranks:
     * 2 (4-1)/4 P bytes (integer division as comm_mpi.c) */
    unsigned long long Pb = (unsigned long long)P;
    tap_ok(z[0].bytes[PT_GRP_SYNC] == (double)(2ull * 3 * Pb / 4), "ZeRO 0 over dp=4: 2(p-1)/p x 4 Psi sync bytes (%.0f)",
           z[0].bytes[PT_GRP_SYNC]);
    /* ZeRO-3: two gathers and a reduce-scatter per unit, 1.5x ZeRO-1's bytes
     * (3 Psi vs 2 Psi, ZeRO sec. 7.2), but the units the 1D head uses last
     * (wte, the final LayerNorm) are gathered once: the head's forward and
     * backward are one piece (lib/model's pt_gpt_head_fused), so one gather
     * of their work copy, 3/4 x 4 bytes x their padded floats, less */
    pt_shape sh;
    const pt_shape_in si = {.mode = PT_MODE_1D, .tp = 1, .dims = {1, 1, 1}, .sp = 1, .B = 8, .T = 32, .C = 64, .NH = 4,
                            .V = 97};
    pt_shape_of(&si, &sh);
    const double wte_pad = (double)((sh.Vp * 64 + 3) / 4 * 4), lnf_pad = (2 * 64 + 3) / 4 * 4;
    const double head_once = 3.0 / 4 * 4 * (wte_pad + lnf_pad);
    tap_ok(fabs(z[3].bytes[PT_GRP_SYNC] - (1.5 * z[1].bytes[PT_GRP_SYNC] - head_once)) <= 16,
           "ZeRO 3 moves 1.5x ZeRO 1's bytes at one microbatch (3 Psi vs 2 Psi, ZeRO sec. 7.2) less one gather of the "
           "head's units (wte %.0f and lnf %.0f floats): %.0f = 1.5 x %.0f - %.0f", wte_pad, lnf_pad,
           z[3].bytes[PT_GRP_SYNC], z[1].bytes[PT_GRP_SYNC], head_once);
    tap_ok(z[0].bytes[PT_GRP_DP] == 0 && z[0].bytes[PT_GRP_TP] == 0, "plain dp: nothing on the dp and tp groups");

    /* 1d: 4L+2 allreduces of Sx = [B, T, C] plus the cross-entropy's [N] and [2N] */
    pt_plan_default(&p);
    p.tp = 2;
    pt_cost_eval(&tm, 4, &p, &hw, link_node, &c);
    const unsigned long long Nt = 4ull * 32, Sx = Nt * 64 * 4;
    const double want1d = (double)((4 * 4 + 2) * (2 * 1 * Sx / 2) + 2 * 1 * (Nt * 4) / 2 + 2 * 1 * (2 * Nt * 4) / 2);
    tap_ok(c.bytes[PT_GRP_TP] == want1d, "1d tp=2: (4L+2) x 2(p-1)/p Sx + the cross-entropy's (%.0f vs %.0f)",
           c.bytes[PT_GRP_TP], want1d);
    tap_ok(c.msgs[PT_GRP_TP] == 4 * 4 + 2 + 2, "1d tp=2: 4L+4 allreduce calls (%.0f)", c.msgs[PT_GRP_TP]);
    /* 1d tp=2 x sp=2 (4 ranks): the tp volume of Nt/2 local rows; the ring
     * over the sp group carries K/V blocks of the rank's NH/tp heads [B,
     * T/sp, C/tp] (2(sp-1) sends forward, 2(2sp-1) backward per block, seq.h);
     * one allreduce of all local floats over dp x sp = 2; every FLOP split 4 ways */
    {
        pt_cost c11, cts;
        pt_plan_default(&p);
        int ok = pt_cost_eval(&tm, 4, &p, &hw, link_node, &c11) == 0;
        p.tp = 2, p.sp = 2;
        ok = ok && pt_cost_eval(&tm, 4, &p, &hw, link_node, &cts) == 0;
        const unsigned long long Nl = 4ull * 16, Sxl = Nl * 64 * 4, S = Nl * 32 * 4;
        const double tp_want = (double)((4 * 4 + 2) * (2 * 1 * Sxl / 2) + 2 * 1 * (Nl * 4) / 2 + 2 * 1 * (2 * Nl * 4) / 2);
        const double sp_want = 4.0 * (2 * 1 + 2 * 3) * (double)S;
        const double sync_want = 2.0 * 1 * cts.mem_params / 2; /* fp32 master = every local float x 4 B */
        tap_ok(ok && cts.bytes[PT_GRP_TP] == tp_want && cts.bytes[PT_GRP_SP] == sp_want &&
                   cts.bytes[PT_GRP_SYNC] == sync_want && cts.sub_bytes[PT_SUB_SYNC_MASK(0)] == sync_want,
               "1d tp=2 sp=2: tp %.0f B (want %.0f), sp ring %.0f B (want L x 8 blocks of [B, T/sp, C/tp] = %.0f), "
               "sync over dp x sp %.0f B (want %.0f)%s%s", cts.bytes[PT_GRP_TP], tp_want, cts.bytes[PT_GRP_SP],
               sp_want, cts.bytes[PT_GRP_SYNC], sync_want, ok ? "" : ": ", ok ? "" : pt_errmsg());
        tap_ok(ok && fabs(cts.flops - c11.flops / 4) <= 1e-12 * c11.flops,
               "1d tp=2 sp=2: a quarter of the single rank's FLOPs (%.6g vs %.6g)", cts.flops, c11.flops);
    }

    /* refusals name the value */
    pt_plan_default(&p);
    p.tp = 3;
    tap_ok(pt_cost_eval(&tm, 4, &p, &hw, link_node, &c) == -1 && strstr(pt_errmsg(), "tp=3") != NULL,
           "tp=3 with 4 heads refused: %s", pt_errmsg());
    pt_plan_default(&p);
    p.dp = 3;
    tap_ok(pt_cost_eval(&tm, 4, &p, &hw, link_node, &c) == -1 && strstr(pt_errmsg(), "dp=3") != NULL,
           "batch 4 over dp=3 refused: %s", pt_errmsg());
    pt_plan_default(&p);
    p.pp = 5;
    tap_ok(pt_cost_eval(&tm, 4, &p, &hw, link_node, &c) == -1 && strstr(pt_errmsg(), "pp=5") != NULL,
           "pp=5 with 4 layers refused: %s", pt_errmsg());
    pt_plan_default(&p);
    p.microbatches = 3;
    tap_ok(pt_cost_eval(&tm, 4, &p, &hw, link_node, &c) == -1 && strstr(pt_errmsg(), "microbatches=3") != NULL,
           "4 sequences in 3 microbatches refused: %s", pt_errmsg());

    /* the time model: t_step = pipelined work x (1 + bubble) + sync */
    pt_plan_default(&p);
    p.pp = 2, p.dp = 2, p.microbatches = 4;
    pt_cost_eval(&tm, 8, &p, &hw, link_node, &c);
    double pipelined = c.t_compute + c.t_comm[PT_GRP_TP] + c.t_comm[PT_GRP_SP] + c.t_comm[PT_GRP_PP];
    tap_ok(fabs(c.t_step - (pipelined * (1 + c.bubble) + c.t_comm[PT_GRP_SYNC] + c.t_comm[PT_GRP_DP])) < 1e-15 &&
               c.t_compute > 0 && c.t_comm[PT_GRP_PP] > 0 && c.t_comm[PT_GRP_SYNC] > 0,
           "t_step = (compute + tp + sp + pp) (1 + bubble) + dp + sync (%.3g s)", c.t_step);
    tap_ok(fabs(c.t_compute - c.flops / 50e9) < 1e-15, "t_compute = flops / gemm rate");
    /* time-shared cores: 2 ranks per core halve each rank's rate; half
     * (1/ranks_per_core) of the bubble costs time, and compute is the mean
     * over pipeline ranks: the first stage has no head */
    pt_hw shared = hw;
    shared.ranks_per_core = 2;
    pt_cost cs;
    pt_cost_eval(&tm, 8, &p, &shared, link_node, &cs);
    const double pip = cs.t_compute + cs.t_comm[PT_GRP_TP] + cs.t_comm[PT_GRP_SP] + cs.t_comm[PT_GRP_PP];
    tap_ok(fabs(cs.t_bubble - 0.5 * cs.bubble * pip) < 1e-15 && cs.bubble == c.bubble && cs.t_compute < 2 * c.t_compute &&
               cs.t_compute > c.t_compute && cs.bytes[PT_GRP_PP] == c.bytes[PT_GRP_PP],
           "ranks_per_core 2: half the bubble time, compute between 1x and 2x the dedicated busiest rank's (%.3g vs %.3g s)",
           cs.t_compute, c.t_compute);
    shared.ranks_per_core = 4;
    pt_cost_eval(&tm, 8, &p, &shared, link_node, &cs);
    const double pip4 = cs.t_compute + cs.t_comm[PT_GRP_TP] + cs.t_comm[PT_GRP_SP] + cs.t_comm[PT_GRP_PP];
    tap_ok(fabs(cs.t_bubble - 0.25 * cs.bubble * pip4) < 1e-15 && cs.t_bubble > 0,
           "ranks_per_core 4: a quarter of the bubble time (%.3g s)", cs.t_bubble);
    /* the busy delay adds to each pipeline send and leaves tp, sp and the
     * step-end sync: a pp=2 x dp=2 plan has half the ranks outside each
     * send, so every send pays all of it; tp=2 x dp=2 pays none */
    {
        pt_plan pb;
        pt_hw busy = hw;
        busy.busy_delay_s = 1e-3;
        pt_cost c0, c1;
        int ok = 1;
        for (int v = 0; v < 2 && ok; v++) {
            pt_plan_default(&pb);
            pb.dp = 2;
            if (v == 0) pb.tp = 2;
            else pb.pp = 2, pb.microbatches = 2;
            ok = pt_cost_eval(&tm, 8, &pb, &hw, link_node, &c0) == 0 &&
                 pt_cost_eval(&tm, 8, &pb, &busy, link_node, &c1) == 0;
            const int grp = v == 0 ? PT_GRP_TP : PT_GRP_PP;
            ok = ok && c0.t_comm[grp] > 0 && c0.lat_steps[grp] > 0 && c0.t_comm[PT_GRP_SYNC] > 0;
            for (int g = 0; ok && g < PT_GRP_N; g++) {
                const double want = c0.t_comm[g] + (g == PT_GRP_PP ? c0.sub_msgs[PT_SUB_PP] * 1e-3 : 0);
                ok = fabs(c1.t_comm[g] - want) <= 1e-12 * (want + 1e-30) && c1.bytes[g] == c0.bytes[g];
            }
            ok = ok && c1.t_compute == c0.t_compute && (v == 0 ? c1.t_step == c0.t_step : c1.t_step > c0.t_step);
        }
        tap_ok(ok, "busy_delay 1 ms: pp=2 communication time + 1 ms per send, tp=2, sync and compute "
               "unchanged (pp=2: %g sends, %.4g vs %.4g s)", c0.sub_msgs[PT_SUB_PP], c1.t_step, c0.t_step);
        /* a pipeline of every rank (pp=2 of 2) has no rank outside its
         * sends to compute meanwhile: no delay */
        pt_plan_default(&pb);
        pb.pp = 2, pb.microbatches = 2;
        ok = pt_cost_eval(&tm, 8, &pb, &hw, link_node, &c0) == 0 &&
             pt_cost_eval(&tm, 8, &pb, &busy, link_node, &c1) == 0 && c0.t_comm[PT_GRP_PP] > 0 &&
             c1.t_comm[PT_GRP_PP] == c0.t_comm[PT_GRP_PP];
        tap_ok(ok, "busy_delay: none for pp=2 of 2 ranks (no rank outside)");
    }
    /* Hockney's GEMM rate: microbatches of one sequence are Bl Tl = 32
     * rows per GEMM, so n_1/2 = 32 rows halves the rate; bytes and FLOPs
     * do not change */
    pt_hw hock = hw;
    hock.gemm_n_half = 32;
    pt_cost ch;
    pt_cost_eval(&tm, 8, &p, &hock, link_node, &ch);
    tap_ok(fabs(ch.t_compute - 2 * c.t_compute) < 1e-15 && ch.flops == c.flops && ch.bytes[PT_GRP_PP] == c.bytes[PT_GRP_PP],
           "gemm_n_half = the 32 rows of a microbatch halves the GEMM rate (%.3g vs %.3g s)", ch.t_compute, c.t_compute);
    /* fewer, larger microbatches run faster: 2 sequences per microbatch
     * are 64 rows, rate 64 / (64 + 32) of r_inf */
    pt_plan p2 = p;
    p2.microbatches = 2;
    pt_cost c2, c2h;
    pt_cost_eval(&tm, 8, &p2, &hw, link_node, &c2);
    pt_cost_eval(&tm, 8, &p2, &hock, link_node, &c2h);
    tap_ok(fabs(c2h.t_compute - c2.t_compute * 96.0 / 64.0) < 1e-15,
           "gemm_n_half 32 at 64 rows per GEMM: t_compute x 96/64 (%.3g vs %.3g s)", c2h.t_compute, c2.t_compute);

    /* the bf16 GEMM rate: a bf16 plan computes at gemm_gflops_bf16 (its
     * FLOPs the same), at gemm_gflops when it is 0 (unknown); an fp32 plan
     * never uses it; n_1/2 applies to both */
    {
        pt_hw hb = hw;
        hb.gemm_gflops_bf16 = 300;
        pt_plan pb = p, pf = p;
        pb.precision = PT_PREC_BF16;
        pf.precision = PT_PREC_FP32;
        pt_cost cb, cb0, cf, cbh;
        int ok = pt_cost_eval(&tm, 8, &pb, &hb, link_node, &cb) == 0 &&
                 pt_cost_eval(&tm, 8, &pb, &hw, link_node, &cb0) == 0 &&
                 pt_cost_eval(&tm, 8, &pf, &hb, link_node, &cf) == 0;
        tap_ok(ok && cb.flops == cb0.flops && fabs(cb.t_compute - cb.flops / 300e9) <= 1e-12 * cb.t_compute &&
                   fabs(cb0.t_compute - cb0.flops / 50e9) <= 1e-12 * cb0.t_compute && cf.t_compute == c.t_compute &&
                   cf.t_step == c.t_step && cb.t_step < cb0.t_step,
               "bf16 plan: t_compute = flops / gemm_gflops_bf16 (%.4g s), / gemm_gflops when it is 0 (%.4g s); "
               "fp32 plans ignore it", cb.t_compute, cb0.t_compute);
        hb.gemm_n_half = 32;
        ok = pt_cost_eval(&tm, 8, &pb, &hb, link_node, &cbh) == 0;
        tap_ok(ok && fabs(cbh.t_compute - 2 * cb.t_compute) <= 1e-12 * cbh.t_compute,
               "bf16 plan: gemm_n_half 32 halves gemm_gflops_bf16 at 32 rows (%.4g vs %.4g s)", cbh.t_compute,
               cb.t_compute);
    }

    /* nccl-tests' bus bandwidth factors and the ring's latency steps */
    tap_ok(pt_cost_busfactor(PT_KIND_ALLREDUCE, 4) == 1.5 && pt_cost_busfactor(PT_KIND_ALLGATHER, 4) == 0.75 &&
               pt_cost_busfactor(PT_KIND_REDUCE_SCATTER, 4) == 0.75 && pt_cost_busfactor(PT_KIND_BROADCAST, 4) == 1 &&
               pt_cost_busfactor(PT_KIND_REDUCE, 4) == 1 && pt_cost_busfactor(PT_KIND_P2P, 2) == 1 &&
               pt_cost_busfactor(PT_KIND_ALLREDUCE, 1) == 0 && pt_cost_kind_steps(PT_KIND_ALLREDUCE, 4) == 6 &&
               pt_cost_kind_steps(PT_KIND_ALLGATHER, 4) == 3 && pt_cost_kind_steps(PT_KIND_P2P, 8) == 1,
           "busbw factors: allreduce 2(p-1)/p, allgather and reduce-scatter (p-1)/p, broadcast, reduce, p2p 1");
    /* 1d prices its allreduces at busbw: 2(p-1)/p b, the counters' bytes,
     * over the link's bandwidth, plus 2(p-1) alphas per call */
    {
        pt_plan q1;
        pt_plan_default(&q1);
        q1.tp = 4;
        pt_cost c1;
        int ok = pt_cost_eval(&tm, 8, &q1, &hw, link_node, &c1) == 0;
        const double want = c1.lat_steps[PT_GRP_TP] * hw.lat_s[PT_NET_NODE] + c1.bytes[PT_GRP_TP] / (hw.gbps[PT_NET_NODE] * 1e9);
        tap_ok(ok && fabs(c1.t_comm[PT_GRP_TP] - want) <= 1e-12 * want && c1.sub_bytes[PT_SUB_TP] == c1.bytes[PT_GRP_TP],
               "1d tp=4: t_comm = steps alpha + bytes / bw (%.4g vs %.4g s), all on the tp communicator",
               c1.t_comm[PT_GRP_TP], want);
        /* per-kind rates: allgathers 10x faster change 3d's time, not
         * 1d's allreduces */
        pt_hw fast = hw;
        for (int l = 0; l < PT_NET_N; l++) fast.coll_gbps[PT_KIND_ALLGATHER][l] = 10 * hw.gbps[l];
        pt_plan q3;
        pt_plan_default(&q3);
        q3.mode = PT_MODE_3D, q3.tp = 8;
        pt_cost a, b, d, e;
        ok = pt_cost_eval(&tm, 8, &q3, &hw, link_node, &a) == 0 && pt_cost_eval(&tm, 8, &q3, &fast, link_node, &b) == 0 &&
             pt_cost_eval(&tm, 8, &q1, &fast, link_node, &d) == 0;
        tap_ok(ok && b.t_comm[PT_GRP_TP] < a.t_comm[PT_GRP_TP] && d.t_comm[PT_GRP_TP] == c1.t_comm[PT_GRP_TP] &&
                   b.bytes[PT_GRP_TP] == a.bytes[PT_GRP_TP],
               "per-kind rates: allgathers 10x faster cut 3d's tp time (%.4g -> %.4g s), leave 1d's allreduces (%.4g s)",
               a.t_comm[PT_GRP_TP], b.t_comm[PT_GRP_TP], d.t_comm[PT_GRP_TP]);
        /* each communicator on its own link: 2d rows (tp--x) on the island,
         * the rest on the node; moving the columns (tp-x-) to the network
         * changes only their time */
        pt_plan q2;
        pt_plan_default(&q2);
        q2.mode = PT_MODE_2D, q2.tp = 4;
        pt_cost_where w;
        memset(&w, 0, sizeof w);
        for (int k = 0; k < PT_SUB_N; k++) w.sub_link[k] = PT_NET_NODE;
        w.sub_link[PT_SUB_TP_MASK(4)] = PT_NET_ISLAND;
        ok = pt_cost_eval_at(&tm, 8, &q2, &hw, &w, &a) == 0;
        w.sub_link[PT_SUB_TP_MASK(2)] = PT_NET_INTER;
        ok = ok && pt_cost_eval_at(&tm, 8, &q2, &hw, &w, &b) == 0 &&
             pt_cost_eval(&tm, 8, &q2, &hw, link_node, &e) == 0;
        double sum = 0;
        for (int k = 0; k < PT_SUB_SYNC; k++) sum += a.sub_t[k];
        tap_ok(ok && a.sub_bytes[PT_SUB_TP_MASK(4)] > 0 && a.sub_bytes[PT_SUB_TP_MASK(2)] > 0 &&
                   fabs(a.t_comm[PT_GRP_TP] - sum) <= 1e-12 * sum && a.sub_t[PT_SUB_TP_MASK(4)] < e.sub_t[PT_SUB_TP_MASK(4)] &&
                   a.sub_t[PT_SUB_TP_MASK(2)] == e.sub_t[PT_SUB_TP_MASK(2)] &&
                   b.sub_t[PT_SUB_TP_MASK(4)] == a.sub_t[PT_SUB_TP_MASK(4)] &&
                   b.sub_t[PT_SUB_TP_MASK(2)] > a.sub_t[PT_SUB_TP_MASK(2)] && b.sub_link[PT_SUB_TP_MASK(2)] == PT_NET_INTER,
               "2d: rows on the island (%.4g s, node %.4g s), columns on the node (%.4g s) then the network (%.4g s); "
               "tp time = the sum of its communicators'", a.sub_t[PT_SUB_TP_MASK(4)], e.sub_t[PT_SUB_TP_MASK(4)],
               a.sub_t[PT_SUB_TP_MASK(2)], b.sub_t[PT_SUB_TP_MASK(2)]);
        /* pipeline neighbours: stage 0 -> 1 across the network, the rest
         * (1 -> 0 of the interleaved wrap) on the island; per-stage rates:
         * stage 1 at half the GEMM rate takes twice stage 0's time */
        pt_plan qp;
        pt_plan_default(&qp);
        qp.pp = 2, qp.microbatches = 2;
        int nx[2] = {PT_NET_INTER, PT_NET_ISLAND};
        pt_hw st[2] = {hw, hw};
        st[1].gemm_gflops = hw.gemm_gflops / 2;
        for (int k = 0; k < PT_SUB_N; k++) w.sub_link[k] = PT_NET_ISLAND;
        w.pp_next = nx;
        ok = pt_cost_eval_at(&tm, 8, &qp, &hw, &w, &a) == 0;
        w.pp_next = NULL;
        w.sub_link[PT_SUB_PP] = PT_NET_INTER;
        ok = ok && pt_cost_eval_at(&tm, 8, &qp, &hw, &w, &b) == 0;
        w.stage_hw = st;
        ok = ok && pt_cost_eval_at(&tm, 8, &qp, &hw, &w, &d) == 0;
        const double send = 4.0 * 4 * 32 * 64; /* one [Bl=4, T=32, C=64] activation */
        tap_ok(ok && a.sub_link[PT_SUB_PP] == PT_NET_INTER &&
                   fabs(a.sub_t[PT_SUB_PP] - 2 * (hw.lat_s[PT_NET_INTER] + send / (hw.gbps[PT_NET_INTER] * 1e9))) < 1e-15 &&
                   b.sub_t[PT_SUB_PP] == a.sub_t[PT_SUB_PP] && d.t_compute > 1.99 * b.t_compute &&
                   d.t_compute < 2.01 * b.t_compute,
               "pp: each send on its neighbour link (%.4g s for 2 sends over the network); a stage at half the GEMM "
               "rate takes twice the time (%.4g vs %.4g s)", a.sub_t[PT_SUB_PP], d.t_compute, b.t_compute);
    }
    /* ---- Llama shapes (grouped-query attention, SwiGLU, untied heads) ----
     * references computed here from the shape and the contract's parameter
     * list (pt_model_param_info), not from the cost model's walk */
    {
        int lp_ok = 1, lf_ok = 1, lsh_ok = 1, lkv_ok = 1, lact_ok = 1, nl = 0;
        for (int it = 0; it < 60; it++) {
            pt_model_shape m = {0};
            m.family = PT_FAMILY_LLAMA;
            m.n_layer = 1 + rnd(4);
            const int kv = 4 * (1 + rnd(2)), grp = 1 + rnd(3), hs = 2 * (1 + rnd(4));
            m.n_kv_head = kv, m.n_head = kv * grp, m.n_embd = m.n_head * hs;
            m.ffn = 4 * (1 + rnd(40));
            m.seq_len = 4 * (1 + rnd(8));
            m.vocab = 2 + rnd(300);
            m.untied = rnd(2), m.qkv_bias = rnd(2);
            const double C = m.n_embd, T = m.seq_len, V = m.vocab, L = m.n_layer, KVw = (double)kv * hs,
                         I = m.ffn;
            pt_plan q1;
            pt_plan_default(&q1);
            pt_cost c1;
            if (pt_cost_eval(&m, 1, &q1, &hw, link_node, &c1) < 0) {
                lp_ok = 0;
                tap_diag("llama: the trivial plan was refused: %s", pt_errmsg());
                continue;
            }
            nl++;
            /* world 1: every parameter once, fp32 */
            if (c1.mem_params != 4.0 * (double)pt_model_num_params(&m)) {
                lp_ok = 0;
                tap_diag("llama params: cost %.0f bytes vs 4 x %lld", c1.mem_params, pt_model_num_params(&m));
            }
            /* FLOPs per token at world 1: the contract's 6 N + 12 L T C, and flash
             * attention's scores again in the backward (2 L T C); and from the GEMM
             * shapes directly: q, o C^2; k, v C KVw; gate, up, down C I; head C V */
            const double f_contract = pt_model_flops_per_token(&m, m.seq_len) + 2.0 * L * T * C;
            const double f_gemm = 6.0 * (L * (2 * C * C + 2 * C * KVw + 3 * C * I) + C * V) + 14.0 * L * T * C;
            if (fabs(c1.flops / T - f_contract) > 1e-9 * f_contract || fabs(c1.flops / T - f_gemm) > 1e-9 * f_gemm) {
                lf_ok = 0;
                tap_diag("llama flops/token: cost %.9g, contract %.9g, GEMMs %.9g", c1.flops / T, f_contract, f_gemm);
            }
            /* per-rank parameters at tp = 2, 4 (1d): the contract's list sharded as
             * the 1d layout shards it (weights and q/k/v biases / tp, wte and lm_head
             * over the vocabulary padded to a multiple of tp, norms whole) */
            for (int tp = 2; tp <= 4; tp += 2) {
                pt_plan qt;
                pt_plan_default(&qt);
                qt.mode = PT_MODE_1D, qt.tp = tp;
                pt_cost ct;
                double want = 0;
                for (int i = 0; i < pt_model_param_count(&m); i++) {
                    pt_param_info pi;
                    pt_model_param_info(&m, i, &pi);
                    long long rows = pi.rows;
                    if (pi.role == PT_ROLE_WTE || pi.role == PT_ROLE_HEAD) rows = (rows + tp - 1) / tp * tp;
                    const int split = pi.role != PT_ROLE_NORM_W && pi.role != PT_ROLE_NORM_B;
                    want += split ? (double)(rows * pi.cols / tp) : (double)(rows * pi.cols);
                }
                if (pt_cost_eval(&m, 1, &qt, &hw, link_node, &ct) < 0 || ct.mem_params != 4 * want) {
                    lsh_ok = 0;
                    tap_diag("llama tp=%d: cost %.0f bytes of parameters, shards %.0f x 4 (%s)", tp, ct.mem_params,
                             want, pt_errmsg());
                }
            }
            /* activations of a block (1d, tp 1, sp 1, b 2): the formula of the
             * Llama block's slots, fp32 and bf16, each recompute mode */
            for (int prec = 0; prec < 2; prec++) {
                pt_plan qa;
                pt_plan_default(&qa);
                qa.precision = prec ? PT_PREC_BF16 : PT_PREC_FP32;
                const double e = prec ? 2 : 4, N = 2 * T, Cl = C, KVl = KVw, Il = I;
                const double none = e * (4 * N * C + N * Cl + 2 * N * KVl + 3 * N * Il) + 4 * (2 * N) + e * N * Cl +
                                    4 * (2.0 * m.n_head * T);
                const double att = none - e * N * Cl - 4 * (2.0 * m.n_head * T), blk = e * N * C;
                if (pt_cost_block_act_bytes(&m, &qa, 2, PT_RECOMPUTE_NONE) != none ||
                    pt_cost_block_act_bytes(&m, &qa, 2, PT_RECOMPUTE_ATTENTION) != att ||
                    pt_cost_block_act_bytes(&m, &qa, 2, PT_RECOMPUTE_BLOCK) != blk) {
                    lact_ok = 0;
                    tap_diag("llama block activations: %.0f %.0f %.0f, want %.0f %.0f %.0f",
                             pt_cost_block_act_bytes(&m, &qa, 2, PT_RECOMPUTE_NONE),
                             pt_cost_block_act_bytes(&m, &qa, 2, PT_RECOMPUTE_ATTENTION),
                             pt_cost_block_act_bytes(&m, &qa, 2, PT_RECOMPUTE_BLOCK), none, att, blk);
                }
            }
            /* ring attention (sp = 2): K/V blocks of the KV heads, so the sp bytes
             * are n_head / n_kv_head times those of the same shape without GQA */
            pt_plan qs;
            pt_plan_default(&qs);
            qs.sp = 2;
            pt_model_shape mha = m;
            mha.n_kv_head = m.n_head;
            pt_cost cg, cm;
            if (pt_cost_eval(&m, 2, &qs, &hw, link_node, &cg) < 0 || pt_cost_eval(&mha, 2, &qs, &hw, link_node, &cm) < 0 ||
                cg.bytes[PT_GRP_SP] * grp != cm.bytes[PT_GRP_SP] || cg.bytes[PT_GRP_SP] <= 0 ||
                (grp > 1 && !(cg.bytes[PT_GRP_SP] < cm.bytes[PT_GRP_SP]))) {
                lkv_ok = 0;
                tap_diag("llama sp bytes: GQA %.0f x %d vs MHA %.0f", cg.bytes[PT_GRP_SP], grp, cm.bytes[PT_GRP_SP]);
            }
        }
        tap_ok(lp_ok && nl > 0, "llama: parameter bytes at world 1 = 4 x pt_model_num_params (%d shapes)", nl);
        tap_ok(lf_ok, "llama: FLOPs per token = pt_model_flops_per_token + flash attention's 2 L T C = the GEMM shapes'");
        tap_ok(lsh_ok, "llama: parameters per rank at tp=2, 4 = the contract's list sharded 1d");
        tap_ok(lact_ok, "llama: block activation bytes = the Llama slots (q, kv, gate|up, SwiGLU, two rstd)");
        tap_ok(lkv_ok, "llama: GQA's ring attention sends n_head/n_kv_head less than MHA");

        /* what the layouts refuse, in one line */
        pt_model_shape m;
        pt_model_preset("llama-test", &m);
        pt_plan q;
        pt_plan_default(&q);
        q.mode = PT_MODE_2D, q.tp = 4;
        int r2 = pt_cost_eval(&m, 8, &q, &hw, link_node, NULL);
        tap_ok(r2 < 0 && strstr(pt_errmsg(), "not built for llama") && strstr(pt_errmsg(), "valid modes for llama: off, 1d") &&
                   !strchr(pt_errmsg(), '\n'),
               "llama: 2d refused in one line: %s", pt_errmsg());
        q.mode = PT_MODE_3D, q.tp = 8;
        r2 = pt_cost_eval(&m, 8, &q, &hw, link_node, NULL);
        tap_ok(r2 < 0 && strstr(pt_errmsg(), "mode 3d is not built for llama"), "llama: 3d refused: %s", pt_errmsg());
        pt_model_shape g = m;
        g.n_kv_head = 2, g.n_head = 4, g.n_embd = 4 * (m.n_embd / m.n_head > 0 ? m.n_embd / m.n_head : 8);
        q.mode = PT_MODE_1D, q.tp = 4;
        r2 = pt_cost_eval(&g, 8, &q, &hw, link_node, NULL);
        tap_ok(r2 < 0 && strstr(pt_errmsg(), "n_kv_head=2") && strstr(pt_errmsg(), "divisors of 2"),
               "llama: 1d tp=4 with 2 KV heads refused: %s", pt_errmsg());
        /* the tied head's gradient sum over the first and last stage: none untied */
        pt_plan qp;
        pt_plan_default(&qp);
        qp.pp = 2, qp.microbatches = 2;
        pt_cost ct, cu;
        g = m;
        g.untied = 0;
        int okp = pt_cost_eval(&g, 4, &qp, &hw, link_node, &ct) == 0;
        g.untied = 1;
        okp = okp && pt_cost_eval(&g, 4, &qp, &hw, link_node, &cu) == 0;
        tap_ok(okp && ct.sub_bytes[PT_SUB_EMBED] > 0 && cu.sub_bytes[PT_SUB_EMBED] == 0 &&
                   cu.mem_params == ct.mem_params,
               "llama pp=2: tied wte summed over the embed group (%.0f bytes), untied none; the same bytes per "
               "rank (wte on the first stage, lm_head on the last)", ct.sub_bytes[PT_SUB_EMBED]);
    }
    return tap_done();
}
