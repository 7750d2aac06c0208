/* SPDX-License-Identifier: MIT */
/* pt_topo_plan_hw: what the planner reads from a node model (islands in
 * ranks, link bandwidths, memory and GEMM rate per rank, overrides), on
 * the fixtures whose shapes gen-fixtures.py gives; the optional
 * gemm_gflops survives a JSON round trip and reaches the plan's rate. */
#define _POSIX_C_SOURCE 200809L
#include "tests/tap.h"
#include "core/core.h"
#include "core/cpu.h"
#include "topo/topo.h"
#include "topo/topo_plan.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static char dir[1024];

static int load(pt_topo *t, const char *name)
{
    char p[1200];
    snprintf(p, sizeof p, "%s/tests/topo/%s", dir, name);
    int rc = pt_topo_load_hwloc(t, p);
    if (rc) tap_diag("load %s: %s", name, pt_errmsg());
    return rc;
}

static int near(double a, double b) { return fabs(a - b) <= 1e-9 * fabs(b); }

int main(void)
{
    const char *s = getenv("top_srcdir");
    snprintf(dir, sizeof dir, "%s", s ? s : ".");
    pt_topo t;
    pt_hw hw;
    int isl;
    char note[1024];

    if (!load(&t, "pairs8-nvlink.xml")) {
        int rc = pt_topo_plan_hw(&t, 8, NULL, &hw, &isl, note, sizeof note);
        tap_ok(rc == 0 && isl == 2 && hw.gbps[PT_NET_ISLAND] > 4 * hw.gbps[PT_NET_NODE],
               "pairs8: islands of 2 ranks (NVLink pairs), island %.1f GB/s >> node %.1f GB/s", hw.gbps[0], hw.gbps[1]);
        rc = pt_topo_plan_hw(&t, 16, NULL, &hw, &isl, note, sizeof note);
        tap_ok(rc == 0 && isl == 4 && near(hw.mem_bytes, 40e9),
               "pairs8, 16 tasks: 2 ranks per GPU, islands of 4 ranks, half an 80 GB GPU each (%g)", hw.mem_bytes);
        pt_topo_free(&t);
    } else {
        tap_ok(0, "pairs8 loads");
        tap_ok(0, "pairs8 loads");
    }
    /* NVLink pairs between GPUs i and i+4: not contiguous in PCI order; in
     * island order (0,4,1,5,...) they are islands of 2 ranks at 184 GB/s */
    if (!load(&t, "pairs8-strided.xml")) {
        int order[8], n = pt_topo_device_order(&t, order, 8);
        static const int want[8] = {0, 4, 1, 5, 2, 6, 3, 7};
        int rc = pt_topo_plan_hw(&t, 8, NULL, &hw, &isl, note, sizeof note);
        tap_ok(n == 8 && !memcmp(order, want, sizeof want) && rc == 0 && isl == 2 &&
                   hw.gbps[PT_NET_ISLAND] > 100 && hw.gbps[PT_NET_NODE] < 20,
               "pairs8-strided: devices in island order 0,4,1,5,...; islands of 2 ranks, island %.1f GB/s, node %.1f",
               hw.gbps[0], hw.gbps[1]);
        pt_topo_free(&t);
    } else {
        tap_ok(0, "pairs8-strided loads");
    }
    if (!load(&t, "dgx8-nvswitch.xml")) {
        int rc = pt_topo_plan_hw(&t, 8, NULL, &hw, &isl, note, sizeof note);
        tap_ok(rc == 0 && isl == 0 && near(hw.mem_bytes, 80e9) && hw.gbps[PT_NET_ISLAND] == hw.gbps[PT_NET_NODE],
               "dgx8: NVSwitch makes the node one island, 80 GB per rank from the GPU's name");
        /* 4 InfiniBand HCAs: 50 GB/s per node, shared by 8 tasks */
        tap_ok(near(hw.gbps[PT_NET_INTER], 50.0 / 8), "dgx8: network 50 GB/s per node / 8 tasks (%g)",
               hw.gbps[PT_NET_INTER]);
        tap_ok(strstr(note, "estimate") && strstr(note, "measured") && !strchr(note + strlen(note) - 1, '\n'),
               "dgx8: the note says what is measured and what is an estimate");
        pt_topo_hw_override ov = {100, 10, 5, 0};
        rc = pt_topo_plan_hw(&t, 8, &ov, &hw, &isl, note, sizeof note);
        tap_ok(rc == 0 && near(hw.gbps[PT_NET_INTER], 100.0 / 8) && near(hw.mem_bytes, 10e9) && hw.gemm_gflops == 5 &&
                   strstr(note, "override"),
               "dgx8: overrides replace network, memory and GEMM rate");
        pt_topo_free(&t);
    } else {
        for (int i = 0; i < 4; i++) tap_ok(0, "dgx8 loads");
    }
    if (!load(&t, "cpu2s.xml")) {
        int rc = pt_topo_plan_hw(&t, 2, NULL, &hw, &isl, note, sizeof note);
        double host = 0;
        for (int i = 0; i < t.nnuma; i++) host += (double)t.numa[i].memory;
        tap_ok(rc == 0 && near(hw.gemm_gflops, 32.0 * t.ncores / 2) && near(hw.mem_bytes, host / 2),
               "cpu2s: 2 tasks get half the cores (32 GFLOP/s each, estimate) and half the host memory");
        /* the measured per-core rate survives JSON and replaces the estimate */
        t.gemm_gflops = 123.5;
        char *js = NULL;
        pt_topo u;
        int ok = pt_topo_to_json(&t, &js) == PT_OK && strstr(js, "\"gemm_gflops\"") &&
                 pt_topo_from_json(&u, js, "test") == PT_OK;
        if (ok) {
            ok = u.gemm_gflops == 123.5 && pt_topo_plan_hw(&u, 4, NULL, &hw, &isl, note, sizeof note) == 0 &&
                 near(hw.gemm_gflops, 123.5 * u.ncores / 4) && strstr(note, "measured 123.5 per core");
            pt_topo_free(&u);
        }
        free(js);
        tap_ok(ok, "cpu2s: gemm_gflops round-trips through JSON and scales by the cores per rank");
        t.gemm_gflops = 0;
        js = NULL;
        ok = pt_topo_to_json(&t, &js) == PT_OK && !strstr(js, "gemm_gflops");
        free(js);
        tap_ok(ok, "cpu2s: no gemm_gflops in the JSON when it was not measured");
        rc = pt_topo_plan_hw(&t, 4 * t.ncores, NULL, &hw, &isl, note, sizeof note);
        tap_ok(rc == 0 && hw.ranks_per_core == 4 && near(hw.gemm_gflops, 32) && strstr(note, "4 ranks per core"),
               "cpu2s, 4 tasks per core: one core's rate, ranks_per_core 4");
        rc = pt_topo_plan_hw(&t, 0, NULL, &hw, &isl, note, sizeof note);
        tap_ok(rc < 0 && strstr(pt_errmsg(), "tasks per node 0"), "0 tasks per node refused: %s", pt_errmsg());
        pt_topo_free(&t);
    } else {
        for (int i = 0; i < 5; i++) tap_ok(0, "cpu2s loads");
    }
    /* no node model (t NULL): one NUMA node of one core, no GPU, every
     * figure an estimate; the same as that model built by hand */
    {
        pt_topo_numa one;
        pt_topo bare;
        memset(&one, 0, sizeof one);
        memset(&bare, 0, sizeof bare);
        one.ncores = one.npus = 1;
        bare.nnuma = 1;
        bare.ncores = bare.npus = 1;
        bare.numa = &one;
        pt_hw h0, h1;
        int i0 = -1, i1 = -2;
        char n0[1024], n1[1024];
        int r0 = pt_topo_plan_hw(NULL, 3, NULL, &h0, &i0, n0, sizeof n0);
        int r1 = pt_topo_plan_hw(&bare, 3, NULL, &h1, &i1, n1, sizeof n1);
        tap_ok(r0 == 0 && r1 == 0 && memcmp(&h0, &h1, sizeof h0) == 0 && i0 == i1 && strcmp(n0, n1) == 0 &&
                   h0.ranks_per_core == 3 && near(h0.gemm_gflops, 32) && strstr(n0, "estimate"),
               "no node model: the estimates of one NUMA node of one core (3 tasks: ranks_per_core %g, %g GFLOP/s)",
               h0.ranks_per_core, h0.gemm_gflops);
    }
    /* a JSON gemm_gflops that is not a rate is refused with its name */
    if (!load(&t, "build-machine.xml")) {
        char *js = NULL;
        int ok = pt_topo_to_json(&t, &js) == PT_OK;
        if (ok) {
            char *bad = malloc(strlen(js) + 64);
            char *end = strrchr(js, '}');
            *end = '\0';
            sprintf(bad, "%s, \"gemm_gflops\": \"fast\"}", js);
            pt_topo u;
            ok = pt_topo_from_json(&u, bad, "bad.json") != PT_OK && strstr(pt_errmsg(), "gemm_gflops");
            if (!ok) tap_diag("got: %s", pt_errmsg());
            free(bad);
        }
        free(js);
        tap_ok(ok, "JSON: a gemm_gflops that is not a number is refused naming the field");
        /* the Hockney fit and the ring-step latency survive JSON and reach
         * pt_hw: gemm_gflops = r_inf x cores per rank, gemm_n_half, and
         * the ring step as the alpha of the node's links */
        t.gemm_gflops = 80;
        t.gemm_rinf_gflops = 100;
        t.gemm_n_half = 48;
        t.net.measured = 1;
        t.net.nranks = 4;
        t.net.nnodes = 1;
        t.net.intra_lat_us = 30;
        t.net.intra_gbps = 1;
        t.net.ring_lat_us = 120;
        t.net.ring_gbps = 0.4;
        t.net.fit_bytes = 4 << 20;
        t.net.fit_time_us = 9000;
        js = NULL;
        pt_topo u;
        ok = pt_topo_to_json(&t, &js) == PT_OK && strstr(js, "\"gemm_fit\"") && strstr(js, "ring_step_latency_us") &&
             strstr(js, "\"ring_gbps\"") && pt_topo_from_json(&u, js, "test") == PT_OK;
        if (ok) {
            ok = u.gemm_rinf_gflops == 100 && u.gemm_n_half == 48 && u.net.ring_lat_us == 120 &&
                 u.net.ring_gbps == 0.4 && u.net.fit_bytes == 4 << 20 && u.net.fit_time_us == 9000 &&
                 pt_topo_plan_hw(&u, 1, NULL, &hw, &isl, note, sizeof note) == 0 &&
                 near(hw.gemm_gflops, 100.0 * u.ncores) && hw.gemm_n_half == 48 && near(hw.lat_s[PT_NET_NODE], 120e-6) &&
                 near(hw.lat_s[PT_NET_ISLAND], 120e-6) && near(hw.gbps[PT_NET_ISLAND], 0.4) &&
                 near(hw.gbps[PT_NET_NODE], 0.4) && strstr(note, "Hockney") && strstr(note, "ring step") &&
                 strstr(note, "allreduce fit");
            if (!ok) tap_diag("note: %s", note);
            pt_topo_free(&u);
        }
        free(js);
        tap_ok(ok, "JSON: gemm_fit, ring_step_latency_us and ring_gbps round-trip and become gemm_gflops = r_inf, "
               "gemm_n_half and the node links' alpha and beta (the ring's 0.4 GB/s below the ping-pong's 1)");
        /* a ring faster than the ping-pong leaves the ping-pong's figure */
        t.net.ring_gbps = 3;
        ok = pt_topo_plan_hw(&t, 1, NULL, &hw, &isl, note, sizeof note) == 0 && near(hw.gbps[PT_NET_NODE], 1);
        tap_ok(ok, "ring_gbps above the ping-pong bandwidth: the node links keep the ping-pong's (%g GB/s)",
               hw.gbps[PT_NET_NODE]);
        /* the probe spanned two nodes: the ring bounds the network, not the
         * node; an admin's inter_gbps wins over it */
        t.net.nnodes = 2;
        t.net.inter_gbps = 2;
        t.net.inter_lat_us = 40;
        t.net.ring_gbps = 0.25;
        ok = pt_topo_plan_hw(&t, 2, NULL, &hw, &isl, note, sizeof note) == 0 &&
             near(hw.gbps[PT_NET_INTER], 0.25) && near(hw.gbps[PT_NET_NODE], 1);
        pt_topo_hw_override ovn = {8, 0, 0, 0};
        ok = ok && pt_topo_plan_hw(&t, 2, &ovn, &hw, &isl, note, sizeof note) == 0 &&
             near(hw.gbps[PT_NET_INTER], 4);
        tap_ok(ok, "ring_gbps of a two-node probe bounds the network per rank (0.25 GB/s, not 2/2), not the node; "
               "an inter_gbps override wins (8/2 = %g GB/s)", hw.gbps[PT_NET_INTER]);
        t.net.nnodes = 1;
        t.net.inter_gbps = t.net.inter_lat_us = 0;
        t.net.ring_gbps = 0.4;
        /* the busy delay: the pair allreduce busy less idle, on shared
         * cores only, within [0, 100 ms] */
        t.net.pair_bytes = 128 << 10;
        t.net.pair_us = 500;
        t.net.pair_busy_us = 800;
        const int over = 2 * (t.ncores > 0 ? t.ncores : 1);
        ok = pt_topo_plan_hw(&t, over, NULL, &hw, &isl, note, sizeof note) == 0 && near(hw.busy_delay_s, 300e-6) &&
             strstr(note, "busy cores");
        double d_shared = hw.busy_delay_s;
        ok = ok && pt_topo_plan_hw(&t, 1, NULL, &hw, &isl, note, sizeof note) == 0 && hw.busy_delay_s == 0;
        t.net.pair_busy_us = 500e3;
        ok = ok && pt_topo_plan_hw(&t, over, NULL, &hw, &isl, note, sizeof note) == 0 && hw.busy_delay_s == 0.1;
        t.net.pair_busy_us = 400;
        ok = ok && pt_topo_plan_hw(&t, over, NULL, &hw, &isl, note, sizeof note) == 0 && hw.busy_delay_s == 0;
        tap_ok(ok, "busy_delay: pair allreduce 800 us busy - 500 us idle = %g us at 2 ranks per core, 0 with a core "
               "per rank, at most 100 ms (a 1000x file), 0 when busy is faster", d_shared * 1e6);
        t.net.pair_busy_us = 800;
        js = NULL;
        ok = pt_topo_to_json(&t, &js) == PT_OK && strstr(js, "\"pair_busy_allreduce_time_us\"") &&
             pt_topo_from_json(&u, js, "pair.json") == PT_OK;
        if (ok) {
            ok = u.net.pair_bytes == 128 << 10 && u.net.pair_us == 500 && u.net.pair_busy_us == 800;
            pt_topo_free(&u);
        }
        free(js);
        tap_ok(ok, "JSON: the pair allreduce times round-trip");
        /* and through hwloc XML (Ptrain* info attributes) */
        char path[] = "/tmp/ptrain-topo-plan-XXXXXX";
        int fd = mkstemp(path);
        char *x = NULL;
        ok = fd >= 0 && pt_topo_to_xml(&t, &x) == PT_OK && write(fd, x, strlen(x)) == (ssize_t)strlen(x);
        if (fd >= 0) close(fd);
        if (ok && pt_topo_load_hwloc(&u, path) == PT_OK) {
            ok = u.gemm_gflops == 80 && u.gemm_rinf_gflops == 100 && u.gemm_n_half == 48 && u.net.ring_lat_us == 120 &&
                 u.net.ring_gbps == 0.4 && u.net.fit_bytes == 4 << 20 && u.net.fit_time_us == 9000 &&
                 u.net.pair_bytes == 128 << 10 && u.net.pair_us == 500 && u.net.pair_busy_us == 800;
            pt_topo_free(&u);
        } else {
            ok = 0;
        }
        free(x);
        unlink(path);
        tap_ok(ok, "XML: gemm_gflops, gemm_fit, the ring step's latency and bandwidth and the pair allreduces "
               "round-trip");
        /* each collective kind's fit: round-trips through JSON and XML and
         * becomes pt_hw's per-kind alpha and busbw on the links the probe
         * spanned (one node of CPU ranks: island and node), the class's
         * figures (0) elsewhere; each figure marked measured or estimate */
        {
            pt_topo v = t;
            v.net.coll_bytes[0] = 256 << 10;
            v.net.coll_bytes[1] = 2 << 20;
            for (int k = 0; k < PT_TOPO_COLL_N; k++) {
                v.net.coll_busbw[k] = 0.125 * (k + 1); /* exact in %.9g and JSON */
                v.net.coll_lat_us[k] = 10.0 * (k + 1);
                v.net.coll_time_us[k][0] = 100.0 + k;
                v.net.coll_time_us[k][1] = 900.0 + k;
            }
            v.net.coll_busbw[4] = 0; /* a kind the probe could not fit */
            int same = 1;
            js = NULL;
            ok = pt_topo_to_json(&v, &js) == PT_OK && strstr(js, "\"collectives\"") &&
                 pt_topo_from_json(&u, js, "coll.json") == PT_OK;
            if (ok) {
                same = u.net.coll_bytes[0] == 256 << 10 && u.net.coll_bytes[1] == 2 << 20;
                for (int k = 0; k < PT_TOPO_COLL_N; k++)
                    same &= u.net.coll_busbw[k] == v.net.coll_busbw[k] && u.net.coll_lat_us[k] == v.net.coll_lat_us[k] &&
                            u.net.coll_time_us[k][1] == v.net.coll_time_us[k][1];
                pt_topo_free(&u);
            }
            free(js);
            char xp[] = "/tmp/ptrain-topo-coll-XXXXXX";
            fd = mkstemp(xp);
            x = NULL;
            int xok = fd >= 0 && pt_topo_to_xml(&v, &x) == PT_OK && write(fd, x, strlen(x)) == (ssize_t)strlen(x);
            if (fd >= 0) close(fd);
            if (xok && pt_topo_load_hwloc(&u, xp) == PT_OK) {
                for (int k = 0; k < PT_TOPO_COLL_N; k++)
                    xok &= u.net.coll_busbw[k] == v.net.coll_busbw[k] && u.net.coll_lat_us[k] == v.net.coll_lat_us[k] &&
                           u.net.coll_time_us[k][0] == v.net.coll_time_us[k][0];
                xok &= u.net.coll_bytes[1] == 2 << 20;
                pt_topo_free(&u);
            } else {
                xok = 0;
            }
            free(x);
            unlink(xp);
            tap_ok(ok && same && xok, "JSON and XML: each collective kind's alpha, busbw and times round-trip");
            ok = pt_topo_plan_hw(&v, 1, NULL, &hw, &isl, note, sizeof note) == 0;
            for (int k = 0; ok && k < PT_KIND_N; k++) {
                const double want = k == 4 ? 0 : 0.125 * (k + 1);
                ok = near(hw.coll_gbps[k][PT_NET_ISLAND] + 1, want + 1) && near(hw.coll_gbps[k][PT_NET_NODE] + 1, want + 1) &&
                     hw.coll_gbps[k][PT_NET_INTER] == 0 &&
                     near(hw.coll_lat_s[k][PT_NET_NODE] + 1, (k == 4 ? 0 : 10e-6 * (k + 1)) + 1);
            }
            ok = ok && strstr(note, "collectives on the intra-node links (measured") && strstr(note, "allgather 0.375 GB/s");
            if (!ok) tap_diag("note: %s", note);
            tap_ok(ok, "per-kind fit -> pt_hw.coll_gbps / coll_lat_s on the island and node links of a one-node probe "
                       "(allgather %g GB/s), none on the network, none for the kind not fitted", hw.coll_gbps[2][PT_NET_NODE]);
            v.net.nnodes = 2;
            v.net.inter_gbps = 2;
            ok = pt_topo_plan_hw(&v, 2, NULL, &hw, &isl, note, sizeof note) == 0 &&
                 near(hw.coll_gbps[2][PT_NET_INTER], 0.375) && hw.coll_gbps[2][PT_NET_NODE] == 0;
            pt_topo_hw_override ovn = {8, 0, 0, 0};
            ok = ok && pt_topo_plan_hw(&v, 2, &ovn, &hw, &isl, note, sizeof note) == 0 &&
                 hw.coll_gbps[2][PT_NET_INTER] == 0 && near(hw.coll_lat_s[2][PT_NET_INTER], 30e-6);
            tap_ok(ok, "per-kind fit of a two-node probe: the network's kinds, not the node's; an inter_gbps override "
                       "wins over their bandwidth, not their alpha");
            v.net.measured = 0;
            ok = pt_topo_plan_hw(&v, 1, NULL, &hw, &isl, note, sizeof note) == 0 && hw.coll_gbps[0][PT_NET_NODE] == 0 &&
                 strstr(note, "collectives: every kind at its link class's bandwidth and latency (estimate");
            tap_ok(ok, "no probe: every kind at its class's figures, marked estimate");
            /* per link class: the node's fit on the island and node links,
             * the network's on the network, each its own figures, not the
             * all-ranks fit; through JSON and XML; absent classes absent */
            v.net.measured = 1;
            v.net.nranks = 4;
            for (int c = 0; c < PT_TOPO_CLASS_N; c++) {
                pt_topo_coll_fit *f = &v.net.coll_class[c];
                f->nranks = 2;
                f->bytes[0] = 256 << 10;
                f->bytes[1] = 2 << 20;
                for (int k = 0; k < PT_TOPO_COLL_N; k++) {
                    f->busbw[k] = (c ? 0.0625 : 0.25) * (k + 1); /* exact in %.9g and JSON */
                    f->lat_us[k] = (c ? 40.0 : 5.0) * (k + 1);
                    f->time_us[k][0] = 200.0 + k + 10 * c;
                    f->time_us[k][1] = 1900.0 + k + 10 * c;
                }
            }
            v.net.coll_class[PT_TOPO_CLASS_NETWORK].busbw[1] = 0; /* a kind not fitted between nodes */
            js = NULL;
            same = 0;
            ok = pt_topo_to_json(&v, &js) == PT_OK && strstr(js, "\"collectives_by_class\"") &&
                 pt_topo_from_json(&u, js, "class.json") == PT_OK;
            if (ok) {
                same = 1;
                for (int c = 0; c < PT_TOPO_CLASS_N; c++) {
                    const pt_topo_coll_fit *a = &u.net.coll_class[c], *b = &v.net.coll_class[c];
                    same &= a->nranks == 2 && a->bytes[0] == b->bytes[0] && a->bytes[1] == b->bytes[1];
                    for (int k = 0; k < PT_TOPO_COLL_N; k++)
                        same &= a->busbw[k] == b->busbw[k] && a->lat_us[k] == b->lat_us[k] &&
                                a->time_us[k][0] == b->time_us[k][0] && a->time_us[k][1] == b->time_us[k][1];
                }
                pt_topo_free(&u);
            }
            /* a class with one rank is refused, naming the field */
            char *bad = js ? strstr(js, "\"collectives_by_class\"") : NULL;
            bad = bad ? strstr(bad, "\"ranks\": 2") : NULL;
            if (bad) bad[9] = '1';
            int refused = bad && pt_topo_from_json(&u, js, "class.json") == PT_EFORMAT && strstr(pt_errmsg(), "ranks");
            free(js);
            char cp[] = "/tmp/ptrain-topo-class-XXXXXX";
            fd = mkstemp(cp);
            x = NULL;
            xok = fd >= 0 && pt_topo_to_xml(&v, &x) == PT_OK && write(fd, x, strlen(x)) == (ssize_t)strlen(x);
            if (fd >= 0) close(fd);
            if (xok && pt_topo_load_hwloc(&u, cp) == PT_OK) {
                for (int c = 0; c < PT_TOPO_CLASS_N; c++)
                    for (int k = 0; k < PT_TOPO_COLL_N; k++)
                        xok &= u.net.coll_class[c].nranks == 2 && u.net.coll_class[c].busbw[k] == v.net.coll_class[c].busbw[k] &&
                               u.net.coll_class[c].lat_us[k] == v.net.coll_class[c].lat_us[k] &&
                               u.net.coll_class[c].time_us[k][1] == v.net.coll_class[c].time_us[k][1] &&
                               u.net.coll_class[c].bytes[1] == 2 << 20;
                pt_topo_free(&u);
            } else {
                xok = 0;
            }
            free(x);
            unlink(cp);
            if (!(ok && same && xok && refused))
                tap_diag("json %d, same %d, xml %d, refused %d (%s)", ok, same, xok, refused, pt_errmsg());
            tap_ok(ok && same && xok && refused, "JSON and XML: each link class's per-kind fit round-trips; a class "
                   "of 1 rank is refused naming 'ranks'");
            ok = pt_topo_plan_hw(&v, 2, NULL, &hw, &isl, note, sizeof note) == 0;
            for (int k = 0; ok && k < PT_KIND_N; k++) {
                const double wnet = k == 1 ? 0 : 0.0625 * (k + 1);
                ok = near(hw.coll_gbps[k][PT_NET_ISLAND], 0.25 * (k + 1)) && near(hw.coll_gbps[k][PT_NET_NODE], 0.25 * (k + 1)) &&
                     near(hw.coll_gbps[k][PT_NET_INTER] + 1, wnet + 1) && near(hw.coll_lat_s[k][PT_NET_NODE], 5e-6 * (k + 1)) &&
                     near(hw.coll_lat_s[k][PT_NET_INTER] + 1, (k == 1 ? 0 : 40e-6 * (k + 1)) + 1);
            }
            ok = ok && strstr(note, "collectives on the intra-node links (measured: busbw and alpha per step of each "
                              "kind at 2 ranks): allreduce 0.25 GB/s 5 us") &&
                 strstr(note, "collectives on the network links (measured: busbw and alpha per step of each kind at 2 "
                        "ranks): allreduce 0.0625 GB/s 40 us, allgather") &&
                 strstr(note, "other links and kinds at the class's figures (estimate)");
            if (!ok) tap_diag("note: %s", note);
            tap_ok(ok, "per-class fit -> pt_hw: the node's on the island and node links (allgather %g GB/s), the "
                   "network's on the network (%g GB/s), not the all-ranks fit; the kind not fitted at the class's figure",
                   hw.coll_gbps[2][PT_NET_NODE], hw.coll_gbps[2][PT_NET_INTER]);
            /* one node: a node class, no network class: the network keeps the class's figures */
            v.net.nnodes = 1;
            memset(&v.net.coll_class[PT_TOPO_CLASS_NETWORK], 0, sizeof v.net.coll_class[0]);
            js = NULL;
            ok = pt_topo_to_json(&v, &js) == PT_OK && !strstr(js, "\"network\":") &&
                 pt_topo_from_json(&u, js, "node.json") == PT_OK;
            if (ok) {
                ok = u.net.coll_class[PT_TOPO_CLASS_NETWORK].nranks == 0 && u.net.coll_class[PT_TOPO_CLASS_NODE].nranks == 2 &&
                     pt_topo_plan_hw(&u, 2, NULL, &hw, &isl, note, sizeof note) == 0 &&
                     near(hw.coll_gbps[2][PT_NET_NODE], 0.75) && hw.coll_gbps[2][PT_NET_INTER] == 0 &&
                     hw.coll_lat_s[2][PT_NET_INTER] == 0 && !strstr(note, "network links (measured");
                pt_topo_free(&u);
            }
            free(js);
            tap_ok(ok, "one node: the node class only, the network at its class's figures (estimate)");
            /* GPU nodes: the node class's host-memory fit is not the GPUs'
             * links; the network's fit still prices the network */
            {
                pt_topo g;
                if (load(&g, "dgx8-nvswitch.xml") == 0) {
                    g.net = v.net;
                    g.net.nnodes = 2;
                    g.net.coll_class[PT_TOPO_CLASS_NETWORK] = g.net.coll_class[PT_TOPO_CLASS_NODE];
                    for (int k = 0; k < PT_TOPO_COLL_N; k++) g.net.coll_class[PT_TOPO_CLASS_NETWORK].busbw[k] = 0.5;
                    ok = pt_topo_plan_hw(&g, 8, NULL, &hw, &isl, note, sizeof note) == 0 &&
                         hw.coll_gbps[2][PT_NET_NODE] == 0 && hw.coll_gbps[2][PT_NET_ISLAND] == 0 &&
                         hw.coll_lat_s[2][PT_NET_NODE] == 0 && near(hw.coll_gbps[2][PT_NET_INTER], 0.5) &&
                         !strstr(note, "intra-node links (measured");
                    if (!ok) tap_diag("note: %s", note);
                    pt_topo_free(&g);
                } else {
                    ok = 0;
                }
                tap_ok(ok, "GPU node: the node class's fit stays off the GPUs' links, the network class prices the network");
            }
            /* a file from before (no collectives_by_class) loads with no
             * class measured, and the all-ranks fit stands where it ran */
            memset(v.net.coll_class, 0, sizeof v.net.coll_class);
            v.net.nnodes = 2;
            js = NULL;
            ok = pt_topo_to_json(&v, &js) == PT_OK && !strstr(js, "collectives_by_class") &&
                 pt_topo_from_json(&u, js, "old.json") == PT_OK;
            if (ok) {
                ok = u.net.coll_class[0].nranks == 0 && u.net.coll_class[1].nranks == 0 &&
                     pt_topo_plan_hw(&u, 2, NULL, &hw, &isl, note, sizeof note) == 0 &&
                     near(hw.coll_gbps[2][PT_NET_INTER], 0.375) && hw.coll_gbps[2][PT_NET_NODE] == 0 &&
                     strstr(note, "at 4 ranks, the probe's all-ranks fit");
                pt_topo_free(&u);
            }
            free(js);
            tap_ok(ok, "a file without collectives_by_class loads (no class measured) and plans with the all-ranks fit "
                   "on the network, as before");
        }
        /* a file from before (no gemm_fit, no ring step) loads and plans
         * with the one-size rate and the ping-pong latency */
        t.gemm_rinf_gflops = t.gemm_n_half = 0;
        t.net.ring_lat_us = t.net.ring_gbps = 0;
        js = NULL;
        ok = pt_topo_to_json(&t, &js) == PT_OK && !strstr(js, "gemm_fit") && !strstr(js, "ring_step") &&
             !strstr(js, "ring_gbps") &&
             pt_topo_from_json(&u, js, "old.json") == PT_OK;
        if (ok) {
            ok = pt_topo_plan_hw(&u, 1, NULL, &hw, &isl, note, sizeof note) == 0 && hw.gemm_n_half == 0 &&
                 near(hw.gemm_gflops, 80.0 * u.ncores) && near(hw.lat_s[PT_NET_NODE], 30e-6) &&
                 near(hw.gbps[PT_NET_NODE], 1);
            pt_topo_free(&u);
        }
        free(js);
        tap_ok(ok, "JSON without gemm_fit and ring_step_latency_us (older files) loads: one-size rate, ping-pong alpha");
        pt_topo_free(&t);
    } else {
        for (int i = 0; i < 4; i++) tap_ok(0, "build-machine loads");
    }
    /* the fit: exact Hockney points give back r_inf and n_1/2 */
    {
        double rows[4] = {16, 64, 256, 1024}, g[4], rinf = 0, nh = 0;
        for (int i = 0; i < 4; i++) g[i] = 150.0 * rows[i] / (rows[i] + 40.0);
        int rc = pt_topo_gemm_fit(rows, g, 4, &rinf, &nh);
        tap_ok(rc == 0 && fabs(rinf - 150) < 1e-9 && fabs(nh - 40) < 1e-9,
               "gemm fit: exact points give r_inf 150, n_1/2 40 (%.6g, %.6g)", rinf, nh);
        double flat[2] = {90, 110}, r2[2] = {64, 1024};
        rc = pt_topo_gemm_fit(r2, flat, 2, &rinf, &nh);
        tap_ok(rc == 0 && nh > 10 && nh < 20 && rinf > 110 && rinf < 113,
               "gemm fit: two points, the larger faster: r_inf above the larger's rate (%.4g, n_1/2 %.4g)", rinf, nh);
        double slow[2] = {110, 90};
        rc = pt_topo_gemm_fit(r2, slow, 2, &rinf, &nh);
        tap_ok(rc == 0 && nh == 0 && near(rinf, 100), "gemm fit: larger sizes slower: the mean rate, n_1/2 0 (%.4g)", rinf);
        double same[2] = {64, 64};
        tap_ok(pt_topo_gemm_fit(same, g, 2, &rinf, &nh) < 0 && strstr(pt_errmsg(), "64 rows"),
               "gemm fit: one size refused: %s", pt_errmsg());
        tap_ok(pt_topo_gemm_fit(rows, g, 1, &rinf, &nh) < 0 && strstr(pt_errmsg(), "1 point"),
               "gemm fit: one point refused: %s", pt_errmsg());
        g[2] = -1;
        tap_ok(pt_topo_gemm_fit(rows, g, 4, &rinf, &nh) < 0 && strstr(pt_errmsg(), "point 2"),
               "gemm fit: a negative rate refused: %s", pt_errmsg());
    }
    /* the one loader: a path, a bad path (an error, or a warning and the
     * hwloc fallback), and the cluster builder over two node models */
    {
        char path[1200], notes[1024] = "";
        int from = -1;
        pt_topo a, b;
        snprintf(path, sizeof path, "%s/tests/topo/dgx8-nvswitch.xml", dir);
        int ok = pt_topo_plan_load(path, "--topology", 0, &a, &from, NULL, 0) == 0 && from == PT_TOPO_FROM_PATH &&
                 a.ngpus == 8;
        snprintf(path, sizeof path, "%s/tests/topo/no-such-model.json", dir);
        pt_topo x;
        ok = ok && pt_topo_plan_load(path, "--topology", 0, &x, &from, NULL, 0) < 0 && strstr(pt_errmsg(), "no-such-model") &&
             from == PT_TOPO_FROM_NONE;
        tap_ok(ok, "loader: a model file loads (8 GPUs); a missing one is one line: %s", pt_errmsg());
        unsetenv("PTRAIN_TOPOLOGY");
        int rc = pt_topo_plan_load(path, "topology", PT_TOPO_LOAD_FALLBACK | PT_TOPO_LOAD_ESTIMATES | PT_TOPO_LOAD_WARN, &x,
                                   &from, notes, sizeof notes);
        tap_ok(rc == 0 && (from == PT_TOPO_FROM_HWLOC || from == PT_TOPO_FROM_NONE) &&
                   strstr(notes, "ptrain: warning: cannot load the node model topology=") &&
                   strstr(notes, "planning from this node's hwloc model"),
               "loader with fallback: a warning, then this node's hwloc model (%s)", notes);
        if (from != PT_TOPO_FROM_NONE) pt_topo_free(&x);
        snprintf(path, sizeof path, "%s/tests/topo/gpu4-pcie.xml", dir);
        ok = ok && pt_topo_plan_load(path, NULL, 0, &b, &from, NULL, 0) == 0;
        const pt_topo *models[2] = {&a, &b};
        const char *names[2] = {"dgx8", "gpu4"};
        int kind_of[3] = {0, 1, 1}, tasks[3] = {8, 4, 4};
        pt_plan_machine m;
        ok = ok && pt_plan_machine_build(&m, 2, models, names, kind_of, tasks, 3, NULL, 7) == 0;
        pt_hw ha, hb;
        int ia, ib;
        pt_topo_plan_hw(&a, 8, NULL, &ha, &ia, NULL, 0);
        pt_topo_plan_hw(&b, 4, NULL, &hb, &ib, NULL, 0);
        ok = ok && m.cluster.nkinds == 2 && m.cluster.nnodes == 3 && m.cluster.kind_of[2] == 1 &&
             near(m.cluster.kinds[0].hw.gbps[PT_NET_NODE], ha.gbps[PT_NET_NODE]) &&
             near(m.cluster.hw.gbps[PT_NET_NODE], hb.gbps[PT_NET_NODE] < ha.gbps[PT_NET_NODE] ? hb.gbps[PT_NET_NODE]
                                                                                             : ha.gbps[PT_NET_NODE]) &&
             near(m.cluster.hw.lat_s[PT_NET_INTER], 7e-6) && strstr(m.note, "[gpu4] intra-node");
        tap_ok(ok, "machine: two node models are two kinds, each at its own rates, hw the slowest figures (node link "
                   "%g GB/s), the notes per kind", m.cluster.hw.gbps[PT_NET_NODE]);
        pt_plan_machine_free(&m);
        int one[2] = {0, 0}, t2[2] = {8, 8};
        ok = pt_plan_machine_build(&m, 2, models, names, one, t2, 2, NULL, 0) == 0 && m.cluster.nkinds == 0 &&
             near(m.cluster.hw.gbps[PT_NET_NODE], ha.gbps[PT_NET_NODE]) && m.cluster.island_ranks == ia &&
             !strstr(m.note, "[dgx8]");
        tap_ok(ok, "machine: nodes of one kind are the cluster of identical nodes (no kinds)");
        pt_plan_machine_free(&m);
        int badk[1] = {3};
        tap_ok(pt_plan_machine_build(&m, 2, models, names, badk, t2, 1, NULL, 0) < 0 && strstr(pt_errmsg(), "kind 3"),
               "machine: a node of an unknown kind refused: %s", pt_errmsg());
        pt_topo_free(&a);
        pt_topo_free(&b);
    }
    /* FILE[:COUNT], as ptrain-plan and ptrain-run read --topology */
    {
        char path[32];
        int count = -1;
        int ok = pt_topo_plan_arg_parse("--topology", "a.xml:12", path, sizeof path, &count) == 0 &&
                 !strcmp(path, "a.xml") && count == 12;
        ok = ok && pt_topo_plan_arg_parse("--topology", "b.json", path, sizeof path, &count) == 0 &&
             !strcmp(path, "b.json") && count == 0;
        ok = ok && pt_topo_plan_arg_parse("--topology", "c:d.xml", path, sizeof path, &count) == 0 &&
             !strcmp(path, "c:d.xml") && count == 0;
        ok = ok && pt_topo_plan_arg_parse("--topology", "c:d.xml:3", path, sizeof path, &count) == 0 &&
             !strcmp(path, "c:d.xml") && count == 3;
        ok = ok && pt_topo_plan_arg_parse("--topology", "e.xml:", path, sizeof path, &count) == 0 &&
             !strcmp(path, "e.xml:") && count == 0;
        tap_ok(ok, "topology argument: FILE:COUNT splits at the last ':' before digits, a ':' of the path stays");
        const char *bad[] = {"a.xml:0", ":3", "a.xml:1048577", "a.xml:99999999999999999999"};
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
            tap_ok(pt_topo_plan_arg_parse("--topology", bad[i], path, sizeof path, &count) < 0 &&
                       strstr(pt_errmsg(), bad[i]) && strstr(pt_errmsg(), "COUNT nodes 1..1048576"),
                   "topology argument '%s' refused in one line: %s", bad[i], pt_errmsg());
        tap_ok(pt_topo_plan_arg_parse("--topology", "a-path-longer-than-the-buffer.xml:2", path, sizeof path, &count) < 0 && strstr(pt_errmsg(), "longer than 31 bytes"),
               "topology argument: a path too long for the buffer refused: %s", pt_errmsg());
    }
    /* the bf16 GEMM rate: one core's measured gemm_gflops_bf16 (a fresh
     * random figure) round-trips through JSON and XML and becomes the
     * rank's rate like gemm_gflops; a file without it (older) loads, with
     * bf16 at the fp32 rate; GPUs take their data sheet's dense bf16 peak */
    if (!load(&t, "cpu2s.xml")) {
        srand((unsigned)time(NULL));
        const double gb = 200 + rand() % 100000 / 100.0;
        char nb[4096];
        pt_topo u;
        char *js = NULL;
        int ok = pt_topo_to_json(&t, &js) == PT_OK && !strstr(js, "gemm_gflops_bf16") &&
                 pt_topo_from_json(&u, js, "old.json") == PT_OK;
        if (ok) {
            ok = u.gemm_gflops_bf16 == 0 && pt_topo_plan_hw(&u, 2, NULL, &hw, &isl, nb, sizeof nb) == 0 &&
                 hw.gemm_gflops_bf16 == 0 && strstr(nb, "gemm bf16: at the fp32 rate (not measured");
            pt_topo_free(&u);
        }
        free(js);
        tap_ok(ok, "cpu2s: a model without gemm_gflops_bf16 (an older file) loads; bf16 at the fp32 rate, noted");
        t.gemm_gflops_bf16 = gb;
        js = NULL;
        ok = pt_topo_to_json(&t, &js) == PT_OK && strstr(js, "\"gemm_gflops_bf16\"") &&
             pt_topo_from_json(&u, js, "new.json") == PT_OK;
        if (ok) {
            ok = near(u.gemm_gflops_bf16, gb) && pt_topo_plan_hw(&u, 2, NULL, &hw, &isl, nb, sizeof nb) == 0 &&
                 near(hw.gemm_gflops_bf16, gb * u.ncores / 2) && strstr(nb, "gemm bf16:") && strstr(nb, "measured");
            /* more tasks than cores: one core's rate */
            ok = ok && pt_topo_plan_hw(&u, 3 * u.ncores, NULL, &hw, &isl, nb, sizeof nb) == 0 &&
                 near(hw.gemm_gflops_bf16, gb);
            /* against the sgemm's Hockney fit: scaled by r_inf / the one-size sgemm rate */
            u.gemm_gflops = 80, u.gemm_rinf_gflops = 100, u.gemm_n_half = 48;
            ok = ok && pt_topo_plan_hw(&u, 1, NULL, &hw, &isl, nb, sizeof nb) == 0 &&
                 hw.gemm_n_half == 48 && near(hw.gemm_gflops_bf16, gb * 100 / 80 * u.ncores);
            pt_topo_hw_override ob = {0, 0, 0, 7.5};
            ok = ok && pt_topo_plan_hw(&u, 2, &ob, &hw, &isl, nb, sizeof nb) == 0 &&
                 hw.gemm_gflops_bf16 == 7.5 && strstr(nb, "gemm bf16: 7.5 GFLOP/s per rank (override)");
            pt_topo_free(&u);
        }
        free(js);
        tap_ok(ok, "cpu2s: gemm_gflops_bf16 %.2f round-trips through JSON and scales by the cores per rank (and by "
               "r_inf / sgemm under the Hockney fit); an override wins", gb);
        /* through hwloc XML too */
        char path[] = "/tmp/ptrain-topo-bf16-XXXXXX";
        int fd = mkstemp(path);
        char *x = NULL;
        ok = fd >= 0 && pt_topo_to_xml(&t, &x) == PT_OK && write(fd, x, strlen(x)) == (ssize_t)strlen(x);
        if (fd >= 0) close(fd);
        if (ok && pt_topo_load_hwloc(&u, path) == PT_OK) {
            ok = near(u.gemm_gflops_bf16, gb); /* the text holds the decimal; gb may be an ulp off it */
            pt_topo_free(&u);
        } else {
            ok = 0;
        }
        free(x);
        unlink(path);
        tap_ok(ok, "XML: gemm_gflops_bf16 round-trips");
        /* a value that is not a rate is refused naming the field */
        t.gemm_gflops_bf16 = 0;
        js = NULL;
        ok = pt_topo_to_json(&t, &js) == PT_OK;
        if (ok) {
            char *bad = malloc(strlen(js) + 64), *end = strrchr(js, '}');
            *end = '\0';
            sprintf(bad, "%s, \"gemm_gflops_bf16\": -3}", js);
            ok = pt_topo_from_json(&u, bad, "bad.json") != PT_OK && strstr(pt_errmsg(), "gemm_gflops_bf16") &&
                 strstr(pt_errmsg(), "0..1e9");
            free(bad);
        }
        free(js);
        tap_ok(ok, "JSON: a negative gemm_gflops_bf16 is refused naming the field: %s", pt_errmsg());
        pt_topo_free(&t);
    } else {
        for (int i = 0; i < 4; i++) tap_ok(0, "cpu2s loads");
    }
    if (!load(&t, "dgx8-nvswitch.xml")) {
        /* both rates of one board (NVIDIA's data sheets): an H100 SXM is
         * not priced at the PCIe board's fp32 rate */
        static const struct { const char *model; double peak, fp32; } gpus[] = {
            {"GA100 [A100 SXM4 80GB]", 312000, 19500}, {"NVIDIA H100 80GB HBM3", 989000, 67000},
            {"NVIDIA GH100 [H100 SXM5 80GB]", 989000, 67000}, {"NVIDIA H100 PCIe", 756000, 51200},
            {"NVIDIA H100 NVL", 835000, 60000}, {"NVIDIA H200", 989000, 67000}, {"NVIDIA H200 NVL", 835000, 60000},
            {"NVIDIA GH200 480GB", 989000, 67000}, {"NVIDIA L40S", 362000, 91600},
            {"Tesla V100-SXM2-32GB", 0, 15700}, {"Some GPU", 0, 19500}};
        char nb[4096], name[96];
        snprintf(name, sizeof name, "%s", t.gpu[0].model);
        int ok = 1;
        for (size_t i = 0; i < sizeof gpus / sizeof gpus[0]; i++) {
            for (int g = 0; g < t.ngpus; g++) snprintf(t.gpu[g].model, sizeof t.gpu[g].model, "%s", gpus[i].model);
            for (int per = 1; per <= 2; per++) {
                int rc = pt_topo_plan_hw(&t, 8 * per, NULL, &hw, &isl, nb, sizeof nb);
                int good = rc == 0 && near(hw.gemm_gflops_bf16 + 1, gpus[i].peak / per + 1) &&
                           near(hw.gemm_gflops, gpus[i].fp32 / per) &&
                           strstr(nb, gpus[i].peak > 0 ? "gemm bf16:" : "gemm bf16: at the fp32 rate") &&
                           (gpus[i].peak == 0 || strstr(nb, "estimate"));
                if (!good)
                    tap_diag("%s, %d per GPU: bf16 %g, fp32 %g GFLOP/s", gpus[i].model, per, hw.gemm_gflops_bf16,
                             hw.gemm_gflops);
                ok &= good;
            }
        }
        for (int g = 0; g < t.ngpus; g++) snprintf(t.gpu[g].model, sizeof t.gpu[g].model, "%s", name);
        tap_ok(ok, "GPUs: the dense bf16 and the fp32 peak of the same board's data sheet per GPU, shared by its "
               "ranks (A100 312/19.5, H100 SXM 989/67, NVL 835/60, PCIe 756/51.2, H200 989/67, L40S 362/91.6 "
               "TFLOP/s; V100 and unknown GPUs bf16 at the fp32 rate)");
        pt_topo_free(&t);
    } else {
        tap_ok(0, "dgx8 loads");
    }
    /* the CPU's bf16 class: this machine's from cpuid; a fixture from another
     * machine without it is unknown; it round-trips through JSON and hwloc
     * XML; an unmeasured bf16 GEMM rate is then 0.9 x the fp32 one where the
     * CPU has no AMX-BF16 (its bf16 GEMM is sgemm on converted tiles), else
     * (AMX, or unknown) the fp32 one */
    if (!load(&t, "cpu2s.xml")) {
        pt_topo here;
        int ok = !t.cpu_bf16_known;
        if (pt_topo_load_hwloc(&here, NULL) == PT_OK) {
            ok &= here.cpu_bf16_known && here.cpu_bf16 == pt_cpu_bf16_class();
            pt_topo_free(&here);
        }
        tap_ok(ok, "cpu_bf16: this machine's is its cpuid class (%s), a fixture's without one is unknown",
               pt_bf16_isa_name(pt_cpu_bf16_class()));
        t.gemm_gflops = 50;
        for (int k = PT_BF16_ISA_NONE; k <= PT_BF16_ISA_AMX; k++) {
            t.cpu_bf16_known = 1, t.cpu_bf16 = k;
            char *js = NULL, *xml = NULL, path[] = "/tmp/ptrain-test-topo-XXXXXX";
            pt_topo u, v;
            ok = pt_topo_to_json(&t, &js) == PT_OK && pt_topo_from_json(&u, js, "test") == PT_OK;
            int xok = pt_topo_to_xml(&t, &xml) == PT_OK;
            const int fd = xok ? mkstemp(path) : -1;
            xok = fd >= 0 && write(fd, xml, strlen(xml)) == (ssize_t)strlen(xml);
            if (fd >= 0) close(fd);
            xok = xok && pt_topo_load_hwloc(&v, path) == PT_OK;
            if (fd >= 0) unlink(path);
            if (ok) {
                ok = u.cpu_bf16_known && u.cpu_bf16 == k && pt_topo_plan_hw(&u, 1, NULL, &hw, &isl, note, sizeof note) == 0;
                ok = ok && (k == PT_BF16_ISA_AMX ? hw.gemm_gflops_bf16 == 0 && strstr(note, "gemm bf16: at the fp32 rate")
                                                 : near(hw.gemm_gflops_bf16, 0.9 * hw.gemm_gflops) &&
                                                       strstr(note, "0.9 x the fp32 rate"));
                if (!ok) tap_diag("note: %s", note);
                pt_topo_free(&u);
            }
            if (xok) {
                xok = v.cpu_bf16_known && v.cpu_bf16 == k;
                pt_topo_free(&v);
            }
            free(js), free(xml);
            tap_ok(ok && xok, "cpu_bf16 %s round-trips through JSON and XML; an unmeasured bf16 rate is %s",
                   pt_bf16_isa_name(k), k == PT_BF16_ISA_AMX ? "the fp32 one" : "0.9 x the fp32 one");
        }
        t.cpu_bf16_known = 0;
        char *js = NULL;
        ok = pt_topo_to_json(&t, &js) == PT_OK && !strstr(js, "cpu_bf16") &&
             pt_topo_plan_hw(&t, 1, NULL, &hw, &isl, note, sizeof note) == 0 && hw.gemm_gflops_bf16 == 0;
        /* a bad class in a file: one line naming the key */
        if (ok) {
            char *bad = malloc(strlen(js) + 64), *brace = strrchr(js, '}');
            pt_topo u;
            if (bad && brace) {
                snprintf(bad, strlen(js) + 64, "%.*s, \"cpu_bf16\": \"avx3\"}", (int)(brace - js), js);
                ok = pt_topo_from_json(&u, bad, "bad.json") != PT_OK && strstr(pt_errmsg(), "cpu_bf16") &&
                     !strchr(pt_errmsg(), '\n');
                tap_diag("%s", pt_errmsg());
            }
            free(bad);
        }
        free(js);
        tap_ok(ok, "cpu_bf16 unknown: not written, the bf16 rate is the fp32 one; \"avx3\" is refused in one line");
        pt_topo_free(&t);
    } else {
        tap_ok(0, "cpu2s loads");
    }
    return tap_done();
}
