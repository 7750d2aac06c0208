/* SPDX-License-Identifier: MIT */
/* The energy plan (bin/plan_energy.c: ptrain-plan --energy, ptrain-run's
 * energy levels) prices its instructions with the cost model's terms for
 * the plan's precision: a bf16 plan's instructions at the bf16 GEMM rate
 * (Hockney's n_1/2 included), its boundary sends in 2-byte activations,
 * the tp calls inside its instructions -- equal to lib/plan/cost.c's own
 * numbers for the same plan (pt_cost_eval: t_compute, t_comm, the pp
 * sends), and to the FLOPs of cost.h's formula at the bf16 rate.  Fresh
 * random model sizes and rates every run. */
#include "bin/plan_energy.h"
#include "plan/cost.h"
#include "plan/energy.h"
#include "core/core.h"
#include "../tap.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static pt_rng rng; /* lib/core's generator */
static double urand(void) { return pt_rng_uniform(&rng); } /* [0, 1) */
static int irand(int lo, int hi) { return lo + (int)(urand() * (hi - lo + 1)); }
static int close_to(double a, double b, double rel) { return fabs(a - b) <= rel * fmax(fabs(a), fabs(b)) + 1e-300; }

static pt_plan plan_of(int pp, int tp, int m, int schedule, int v, int prec)
{
    pt_plan p;
    pt_plan_default(&p);
    p.pp = pp, p.tp = tp, p.microbatches = m, p.schedule = schedule, p.virtual_stages = v, p.precision = prec;
    return p;
}

int main(void)
{
    const uint64_t seed = 0x9e3779b97f4a7c15ull ^ (uint64_t)time(NULL);
    pt_rng_seed(&rng, seed, 0);
    tap_diag("seed %llu", (unsigned long long)seed);
    /* a model of random sizes: L a multiple of 4 (pp 2 x v 2), heads even (tp 2) */
    pt_model_shape m = {4 * irand(1, 4), 2 * irand(1, 4), 0, 16 * irand(1, 8), irand(500, 3000), .family = PT_FAMILY_GPT2};
    m.n_embd = m.n_head * 8 * irand(1, 8);
    const int batch = 4 * irand(1, 4);
    /* a machine of random rates: the bf16 GEMM 4-16x the fp32 one, a
     * Hockney n_1/2, the node's link */
    pt_hw hw;
    memset(&hw, 0, sizeof hw);
    hw.gemm_gflops = 1000 + 50000 * urand();
    hw.gemm_gflops_bf16 = hw.gemm_gflops * (4 + 12 * urand());
    hw.gemm_n_half = 10 + 500 * urand();
    for (int l = 0; l < PT_NET_N; l++) hw.lat_s[l] = 1e-6 + 1e-5 * urand(), hw.gbps[l] = 10 + 400 * urand();
    tap_diag("model L=%d H=%d C=%d T=%d V=%d, batch %d, fp32 %.0f bf16 %.0f GFLOP/s, n_1/2 %.0f", m.n_layer,
             m.n_head, m.n_embd, m.seq_len, m.vocab, batch, hw.gemm_gflops, hw.gemm_gflops_bf16, hw.gemm_n_half);

    /* 1. pp=2 x v=2 interleaved, tp=1: every instruction is compute; its
     * time is cost.h's FLOPs of that stage at the bf16 rate at n = the
     * microbatch's rows, and the pp sends move 2 bytes per element */
    {
        const int pp = 2, v = 2, S = pp * v, mb = 2;
        pt_plan p = plan_of(pp, 1, mb, PT_SCHED_INTERLEAVED, v, PT_PREC_BF16);
        double tt[2 * 4], p2p = -1;
        int rc = plan_energy_times(&m, batch, &p, &hw, tt, &p2p);
        tap_ok(rc == 0, "bf16 pp=2 v=2: the instruction times (%s)", rc ? pt_errmsg() : "ok");
        const double micro = (double)batch / mb, C = m.n_embd, T = m.seq_len, n = micro * T;
        const double rate = hw.gemm_gflops_bf16 * 1e9 * n / (n + hw.gemm_n_half);
        const double blk = (24 * C * C + 4 * T * C) * n, head = 2 * C * m.vocab * n;
        int ok = rc == 0;
        for (int s = 0; s < S && ok; s++) {
            const int t = ((s % pp) * v + s / pp) * 2, nblk = m.n_layer / S, last = s == S - 1;
            const double f = nblk * blk + (last ? head : 0);
            /* + flash's scores; the 1D head's chunked classifier computes its logits once: 2 heads */
            const double b = nblk * (2 * blk + 2 * T * C * n) + (last ? 2 * head : 0);
            if (!close_to(tt[t], f / rate, 1e-12) || !close_to(tt[t + 1], b / rate, 1e-12)) {
                tap_diag("stage %d: forward %.9g s, want %.9g; backward %.9g s, want %.9g", s, tt[t], f / rate,
                         tt[t + 1], b / rate);
                ok = 0;
            }
        }
        tap_ok(ok, "bf16: every instruction takes its stage's FLOPs at the bf16 GEMM rate (not the fp32 one)");
        const double want = hw.lat_s[PT_NET_NODE] + 2 * n * C / (hw.gbps[PT_NET_NODE] * 1e9);
        tap_ok(rc == 0 && close_to(p2p, want, 1e-12),
               "bf16: a boundary send moves 2-byte activations: %.9g s, want %.9g", p2p, want);
        /* against the cost model's own aggregate numbers */
        pt_cost c;
        rc = pt_cost_eval(&m, batch, &p, &hw, NULL, &c);
        double busiest = 0;
        for (int r = 0; r < pp; r++) {
            double x = 0;
            for (int ch = 0; ch < v; ch++) x += mb * (tt[(r * v + ch) * 2] + tt[(r * v + ch) * 2 + 1]);
            busiest = fmax(busiest, x);
        }
        tap_ok(rc == 0 && close_to(busiest, c.t_compute, 1e-12),
               "bf16: the busiest rank's instructions sum to the cost model's t_compute (%.9g s, %.9g s)", busiest,
               c.t_compute);
        /* every pp send of the cost model (both ranks send 3 per microbatch) */
        tap_ok(rc == 0 && close_to(c.sub_bytes[PT_SUB_PP] / c.sub_msgs[PT_SUB_PP], 2 * n * C, 1e-12) &&
                   close_to(c.sub_t[PT_SUB_PP] / c.sub_msgs[PT_SUB_PP], p2p, 1e-12),
               "bf16: one send's bytes and time are the cost model's per pp send (%.9g s)", p2p);

        /* the same plan in fp32: the fp32 rate, 4-byte sends */
        pt_plan p32 = p;
        p32.precision = PT_PREC_FP32;
        double t32[2 * 4], q32 = -1;
        rc = plan_energy_times(&m, batch, &p32, &hw, t32, &q32);
        const double rate32 = hw.gemm_gflops * 1e9 * n / (n + hw.gemm_n_half);
        tap_ok(rc == 0 && close_to(t32[0] / tt[0], rate / rate32, 1e-12) &&
                   close_to(t32[3] / tt[3], rate / rate32, 1e-12),
               "fp32 against bf16: the instruction times scale by the rates' ratio %.4g", rate / rate32);
        const double want32 = hw.lat_s[PT_NET_NODE] + 4 * n * C / (hw.gbps[PT_NET_NODE] * 1e9);
        tap_ok(rc == 0 && close_to(q32, want32, 1e-12), "fp32: a boundary send moves 4-byte activations");
    }

    /* 2. pp=1, 1d tp=2, bf16: an instruction holds its tp allreduces (in
     * bf16); m of them sum to the cost model's compute + tp time */
    {
        const int mb = 2;
        pt_plan p = plan_of(1, 2, mb, PT_SCHED_1F1B, 1, PT_PREC_BF16);
        double tt[2], p2p = -1;
        int rc = plan_energy_times(&m, batch, &p, &hw, tt, &p2p);
        pt_cost c;
        if (!rc) rc = pt_cost_eval(&m, batch, &p, &hw, NULL, &c);
        const double sum = mb * (tt[0] + tt[1]), want = rc ? 0 : c.t_compute + c.t_comm[PT_GRP_TP];
        tap_ok(rc == 0 && c.t_comm[PT_GRP_TP] > 0 && close_to(sum, want, 1e-12) && p2p == 0,
               "bf16 tp=2: the instructions sum to the cost model's t_compute + t_comm[tp] (%.9g s, %.9g s)", sum,
               want);
    }

    /* 3. the frontier of a bf16 plan: its profile's top clock is the
     * instruction time, the DAG's cross-rank edges the bf16 send; faster
     * than the fp32 plan's at max clock */
    {
        pt_plan p = plan_of(2, 1, 4, PT_SCHED_1F1B, 1, PT_PREC_BF16), p32 = p;
        p32.precision = PT_PREC_FP32;
        pt_energy_dag d, d32;
        pt_energy_profile pr, pr32;
        pt_energy_frontier f, f32;
        double tt[4], p2p;
        int rc = plan_energy_times(&m, batch, &p, &hw, tt, &p2p);
        const pt_energy_power_model *gpu = pt_energy_power_model_named("gpu");
        if (!rc) rc = plan_energy(&m, batch, &p, &hw, gpu, NULL, NULL, 0, &d, &pr, &f);
        int ok = rc == 0;
        for (int t = 0; t < 4 && ok; t++) {
            double top = 0;
            for (int k = 0; k < pr.nchoices[t]; k++)
                if (pr.choice[t][k].freq_mhz == gpu->f_max_mhz) top = pr.choice[t][k].time_s;
            ok &= close_to(top, tt[t], 1e-12);
        }
        for (int k = 0; k < d.nedges && ok; k++)
            if (d.in[d.e[k].from].rank != d.in[d.e[k].to].rank) ok &= d.e[k].delay_s == p2p;
        tap_ok(ok, "bf16 frontier: the profile's top clock takes the instruction times, the DAG's sends the bf16 send");
        int rc32 = plan_energy(&m, batch, &p32, &hw, gpu, NULL, NULL, 0, &d32, &pr32, &f32);
        tap_ok(rc == 0 && rc32 == 0 && f.max_clock.time_s < f32.max_clock.time_s &&
                   f.max_clock.energy_j < f32.max_clock.energy_j,
               "bf16 frontier: max clock %.6g ms, %.6g J; fp32 %.6g ms, %.6g J", f.max_clock.time_s * 1e3,
               f.max_clock.energy_j, f32.max_clock.time_s * 1e3, f32.max_clock.energy_j);
        if (!rc) pt_energy_frontier_free(&f), pt_energy_profile_free(&pr), pt_energy_dag_free(&d);
        if (!rc32) pt_energy_frontier_free(&f32), pt_energy_profile_free(&pr32), pt_energy_dag_free(&d32);
    }

    /* 4. a plan the cost model refuses is refused in one line */
    {
        pt_plan p = plan_of(1, 3, 1, PT_SCHED_1F1B, 1, PT_PREC_BF16);
        m.n_head = 4, m.n_embd = 64;
        double tt[2], p2p;
        int rc = plan_energy_times(&m, batch, &p, &hw, tt, &p2p);
        tap_ok(rc < 0 && strstr(pt_errmsg(), "tp=3") && !strchr(pt_errmsg(), '\n'), "tp=3 over 4 heads is refused: %s",
               rc < 0 ? pt_errmsg() : "(accepted)");
    }
    return tap_done();
}
