/* SPDX-License-Identifier: MIT */
/* Helpers of the SPANK plugin (spank/spank_util.c), without Slurm:
 * tasks-per-node expansion against an independent expander on random
 * lists, host-list heads, the port formula, ptrain.conf and plugstack
 * arguments, the cpufreq settings recorded before a step and written back
 * after it. */
#define _POSIX_C_SOURCE 200809L
#include "spank/spank_util.h"
#include "tests/tap.h"
#include "topo/topo.h"

#include <hwloc.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

static uint64_t rng;
static unsigned rnd(unsigned n)
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (unsigned)((rng >> 33) % n);
}

static void test_tasks_per_node(void)
{
    int all_ok = 1;
    for (int trial = 0; trial < 500; trial++) {
        /* Build a random compressed list and its expansion side by side. */
        char text[512] = "";
        int want[256], nwant = 0;
        int items = 1 + (int)rnd(6);
        for (int i = 0; i < items; i++) {
            int count = 1 + (int)rnd(9), reps = 1 + (int)rnd(5);
            char item[32];
            if (reps == 1 && rnd(2)) snprintf(item, sizeof item, "%s%d", i ? "," : "", count);
            else snprintf(item, sizeof item, "%s%d(x%d)", i ? "," : "", count, reps);
            strcat(text, item);
            for (int r = 0; r < reps; r++) want[nwant++] = count;
        }
        int got[256], n = -1;
        if (pt_spank_parse_tasks_per_node(text, got, 256, &n) != 0 ||
            n != nwant || memcmp(got, want, sizeof(int) * (size_t)n) != 0) {
            all_ok = 0;
            tap_diag("'%s': n=%d want %d err=%s", text, n, nwant, pt_errmsg());
        }
    }
    tap_ok(all_ok, "tasks-per-node lists expand like an independent expander (500 random lists)");

    int out[8], n;
    tap_ok(pt_spank_parse_tasks_per_node("2(x3),1", out, 8, &n) == 0 && n == 4 &&
               out[0] == 2 && out[2] == 2 && out[3] == 1,
           "\"2(x3),1\" -> 2,2,2,1");
    const char *bad[] = {"", "0", "2(x0)", "2(3)", "2(x3", "2,,1", "a", "2,", "-1", "2(x3)x",
                         "99999999"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        pt_error_clear();
        int rc = pt_spank_parse_tasks_per_node(bad[i], out, 8, &n);
        tap_ok(rc == -1 && (bad[i][0] == '\0' || strstr(pt_errmsg(), bad[i])), "'%s' refused: %s", bad[i],
               pt_errmsg());
    }
    tap_ok(pt_spank_parse_tasks_per_node("1(x9)", out, 8, &n) == -1 &&
               strstr(pt_errmsg(), "more than 8"),
           "more nodes than the buffer holds refused: %s", pt_errmsg());
}

static void test_first_host(void)
{
    const struct { const char *list, *want; } cases[] = {
        {"n[1-3,7],x", "n1"}, {"n1", "n1"}, {"a,b", "a"}, {"gpu[010-012]", "gpu010"},
        {"n[7,1-3]", "n7"}, {"rack1-n[04-05]-ib", "rack1-n04-ib"}, {"node[2]", "node2"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char out[64] = "";
        int rc = pt_spank_first_host(cases[i].list, out, sizeof out);
        tap_ok(rc == 0 && strcmp(out, cases[i].want) == 0, "first host of '%s' is '%s' (got '%s')",
               cases[i].list, cases[i].want, out);
    }
    const char *bad[] = {"", "n[1-3", "n[]", "n[a-b]", ",n1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char out[64];
        pt_error_clear();
        tap_ok(pt_spank_first_host(bad[i], out, sizeof out) == -1 && pt_errmsg()[0],
               "host list '%s' refused: %s", bad[i], pt_errmsg());
    }
    char small[4];
    tap_ok(pt_spank_first_host("longname", small, sizeof small) == -1,
           "a name longer than the buffer is refused: %s", pt_errmsg());
}

/* Every name of a host list (the node_models' lists, the step's nodes),
 * against an independent expansion of the same ranges. */
static void test_hostlist(void)
{
    const struct { const char *list, *want; } cases[] = {
        {"n[1-3,7],x", "n1 n2 n3 n7 x"}, {"n1", "n1"}, {"a,b", "a b"}, {"gpu[010-012]", "gpu010 gpu011 gpu012"},
        {"n[7,1-2]", "n7 n1 n2"}, {"rack1-n[04-05]-ib", "rack1-n04-ib rack1-n05-ib"}, {"node[2]", "node2"},
        {"a[1-2],b[9-10]", "a1 a2 b9 b10"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char names[16][64], got[512] = "";
        int n = 0;
        int rc = pt_spank_hostlist_expand(cases[i].list, &names[0][0], 64, 16, &n);
        for (int k = 0; rc == 0 && k < n; k++) {
            size_t l = strlen(got);
            snprintf(got + l, sizeof got - l, "%s%.63s", k ? " " : "", names[k]);
        }
        tap_ok(rc == 0 && strcmp(got, cases[i].want) == 0, "host list '%s' is '%s' (got '%s'%s%s)", cases[i].list,
               cases[i].want, got, rc ? ": " : "", rc ? pt_errmsg() : "");
    }
    /* a random range: every name once, zero padding kept */
    int lo = (int)rnd(50), hi = lo + (int)rnd(60), width = 1 + (int)rnd(4), ok = 1, n = 0;
    char list[64], (*names)[32] = malloc(128 * sizeof *names);
    snprintf(list, sizeof list, "h[%0*d-%0*d]", width, lo, width, hi);
    ok = names && pt_spank_hostlist_expand(list, &names[0][0], 32, 128, &n) == 0 && n == hi - lo + 1;
    for (int k = 0; ok && k < n; k++) {
        char want[32];
        snprintf(want, sizeof want, "h%0*d", width, lo + k);
        ok = strcmp(names[k], want) == 0;
    }
    tap_ok(ok, "host list %s: %d names in order, padded", list, n);
    free(names);
    const char *bad[] = {"", "n[1-3", "n[]", "n[a-b]", ",n1", "n1,", "n[3-1]", "n]1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char names2[4][64];
        int m;
        pt_error_clear();
        tap_ok(pt_spank_hostlist_expand(bad[i], &names2[0][0], 64, 4, &m) == -1 && pt_errmsg()[0],
               "host list '%s' refused: %s", bad[i], pt_errmsg());
    }
    char few[2][64];
    tap_ok(pt_spank_hostlist_expand("n[1-3]", &few[0][0], 64, 2, &n) == -1 && strstr(pt_errmsg(), "more than 2"),
           "more names than the buffer holds refused: %s", pt_errmsg());
    tap_ok(pt_spank_hostlist_has("gpu[01-16],cpu1", "gpu07") == 1 &&
               pt_spank_hostlist_has("gpu[01-16],cpu1", "gpu7") == 0 &&
               pt_spank_hostlist_has("gpu[01-16],cpu1", "cpu1") == 1 && pt_spank_hostlist_has("x[", "x") == -1,
           "host list membership: gpu07 in gpu[01-16], gpu7 not, cpu1 in; a bad list refused");
}

static void test_port(void)
{
    int in_range = 1, steps_differ = 1, jobs_differ = 1;
    for (int t = 0; t < 1000; t++) {
        uint32_t job = (uint32_t)rnd(4000000000u), step = rnd(64);
        int base = 1024 + (int)rnd(60000), count = 1 + (int)rnd(65536 - base);
        int p = pt_spank_master_port(job, step, base, count);
        if (p < base || p > base + count - 1 || p > 65535) in_range = 0;
        if (count >= 128) {
            int q = pt_spank_master_port(job, (step + 1) % 64, base, count);
            if (q == p) steps_differ = 0;
        }
        if (count >= 1000) {
            uint32_t j2 = job + 1;
            if (pt_spank_master_port(j2, step, base, count) == p) jobs_differ = 0;
        }
    }
    tap_ok(in_range, "master port always inside [base, base+count-1]");
    tap_ok(steps_differ, "two steps of one job get different ports");
    tap_ok(jobs_differ, "neighbouring jobs get different ports");
    tap_ok(pt_spank_master_port(7, 3, 29500, 1000) == 29500 + (7 * 64 + 3) % 1000,
           "port formula base + (job*64 + step%%64) %% count");
}

static char tmpdir[] = "/tmp/ptrain-conf-XXXXXX";
static const char *write_conf(const char *name, const char *text)
{
    static char path[256];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
    return path;
}

static void test_conf_mixed(void);

static void test_conf(void)
{
    if (!mkdtemp(tmpdir)) {
        tap_ok(0, "mkdtemp");
        return;
    }
    pt_spank_conf c, d;
    pt_spank_conf_default(&c);
    tap_ok(pt_spank_conf_check(&c) == 0 && c.default_mode == PT_MODE_OFF &&
               c.allowed_modes == ((1u << PT_MODE_OFF) | (1u << PT_MODE_AUTO) |
                                   (1u << PT_MODE_1D) | (1u << PT_MODE_2D) |
                                   (1u << PT_MODE_2P5D) | (1u << PT_MODE_3D)),
           "defaults are valid, default_mode is off and every mode is allowed");
    int max_tp = 2 + (int)rnd(30), base = 2000 + (int)rnd(50000);
    char text[512];
    snprintf(text, sizeof text,
             "# site settings\ndefault_mode = \"auto\";\nmax_tp = %d;\nallowed_modes = [\"auto\", "
             "\"1d\"];\nmaster_port_base = %d;\nmaster_port_count = 100;\n", max_tp, base);
    const char *p = write_conf("good.conf", text);
    pt_spank_conf_default(&c);
    pt_error_clear();
    tap_ok(pt_spank_conf_load(p, &c) == 0 && c.default_mode == PT_MODE_AUTO &&
               c.max_tp == max_tp && c.master_port_base == base && c.master_port_count == 100 &&
               c.allowed_modes == ((1u << PT_MODE_OFF) | (1u << PT_MODE_AUTO) | (1u << PT_MODE_1D)),
           "a valid ptrain.conf is read (max_tp=%d base=%d): %s", max_tp, base, pt_errmsg());

    snprintf(text, sizeof text, "allowed_modes = [\"auto\", \"1d\", \"2d\", \"2.5d\", "
             "\"3d\"];\ndefault_mode = \"2.5d\";\n");
    p = write_conf("grids.conf", text);
    pt_spank_conf_default(&c);
    pt_error_clear();
    tap_ok(pt_spank_conf_load(p, &c) == 0 && c.default_mode == PT_MODE_2P5D &&
               c.allowed_modes == ((1u << PT_MODE_OFF) | (1u << PT_MODE_AUTO) |
                                   (1u << PT_MODE_1D) | (1u << PT_MODE_2D) |
                                   (1u << PT_MODE_2P5D) | (1u << PT_MODE_3D)),
           "allowed_modes may allow 2d, 2.5d, 3d, and default_mode may be one of them: %s", pt_errmsg());
    p = write_conf("only3d.conf", "allowed_modes = [\"3d\"];\ndefault_mode = \"3d\";\n");
    pt_spank_conf_default(&c);
    tap_ok(pt_spank_conf_load(p, &c) == 0 && c.default_mode == PT_MODE_3D &&
               c.allowed_modes == ((1u << PT_MODE_OFF) | (1u << PT_MODE_3D)),
           "allowed_modes = [\"3d\"] allows only 3d (and off)");
    p = write_conf("auto2d.conf", "allowed_modes = [\"auto\", \"2d\"];\ndefault_mode = \"auto\";\n");
    pt_spank_conf_default(&c);
    tap_ok(pt_spank_conf_load(p, &c) == 0 && c.default_mode == PT_MODE_AUTO,
           "allowed_modes = [\"auto\", \"2d\"] with default auto loads (auto searches the allowed "
           "layouts, it no longer needs 1d): %s", pt_errmsg());

    const struct { const char *text, *must; } bad[] = {
        {"allowed_modes = [\"auto\", \"1d\"];\ndefault_mode = \"2d\";\n",
         "'2d' is not in allowed_modes"},
        {"default_mode = \"fast\";\n", "'fast'"},
        {"max_tp = 0;\n", "max_tp 0"},
        {"max_tp = \"4\";\n", "max_tp must be an integer"},
        {"master_port_base = 80;\n", "master_port_base 80"},
        {"master_port_base = 65000;\nmaster_port_count = 1000;\n", "master_port_count 1000"},
        {"allowed_modes = [\"auto\", \"4d\"];\n", "'4d'"},
        {"allowed_modes = [\"1d\"];\ndefault_mode = \"auto\";\n", "not in allowed_modes"},
        {"max_tpp = 3;\n", "unknown setting 'max_tpp'"},
        {"max_tp = 3\nmax_tp = ;\n", "bad.conf:2"},
        /* once accepted, then every srun failed */
        {"default_mode = \"auto\";\nallowed_modes = [\"auto\"];\n", "has \"auto\" but no layout"},
        {"allowed_modes = [\"auto\", \"off\"];\n", "has \"auto\" but no layout"},
        /* once an overflow (UBSan) and a silent wrap-around */
        {"master_port_count = 2147483647;\n", "master_port_count 2147483647"},
        {"master_port_base = 2147483647;\n", "master_port_base 2147483647"},
        {"max_tp = 4294967304;\n", "max_tp is out of range"},
        {"master_port_count = -9223372036854775807;\n", "out of range"},
        /* pipeline / ZeRO settings that could never run */
        {"default_schedule = \"interleaved\";\n", "\"interleaved\" cannot be a default"},
        {"allowed_schedules = [\"gpipe\"];\n", "default_schedule '1f1b' is not in allowed_schedules"},
        {"allowed_schedules = [];\n", "allowed_schedules allows no schedule"},
        {"allowed_schedules = [\"zb-h1\"];\n", "'zb-h1'"},
        {"default_schedule = \"fast\";\n", "'fast'"},
        {"max_zero = 1;\ndefault_zero = 2;\n", "invalid default_zero 2 (valid: 0..max_zero=1)"},
        {"max_zero = 4;\n", "invalid max_zero 4"},
        {"default_zero = -1;\n", "invalid default_zero -1"},
        {"max_pp = 0;\n", "invalid max_pp 0"},
        {"max_pp = \"2\";\n", "max_pp must be an integer"},
        {"default_recompute = \"full\";\n", "'full'"},
        {"default_recompute = 1;\n", "default_recompute must be a string"},
        {"default_precision = \"fp16\";\n", "invalid default_precision 'fp16' (valid: fp32, bf16)"},
        {"default_precision = 1;\n", "default_precision must be a string"},
        {"allowed_precisions = [\"bf16\"];\n", "default_precision 'fp32' is not in allowed_precisions"},
        {"allowed_precisions = [];\n", "allowed_precisions allows no precision"},
        {"allowed_precisions = [\"fp8\"];\n", "'fp8'"},
        {"allowed_precisions = \"bf16\";\n", "allowed_precisions must be a list"},
        /* the planner's settings */
        {"topology = \"\";\n", "topology needs a path"},
        {"topology = 3;\n", "topology must be a string"},
        {"inter_node_gbps = 0;\n", "inter_node_gbps = 0 is out of range (valid: a number > 0 and <= 1e+09)"},
        {"inter_node_gbps = -2.5;\n", "inter_node_gbps = -2.5 is out of range"},
        {"inter_node_lat_us = 1e9;\n", "inter_node_lat_us = 1e+09 is out of range (valid: a number > 0 and <= 1e+07)"},
        {"gemm_gflops = \"fast\";\n", "gemm_gflops must be a number"},
        {"gemm_gflops_bf16 = 0;\n", "gemm_gflops_bf16 = 0 is out of range (valid: a number > 0 and <= 1e+09)"},
        {"bind = \"cores\";\n", "invalid bind 'cores' (valid: none, auto)"},
        {"bind = 1;\n", "bind must be a string"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        p = write_conf("bad.conf", bad[i].text);
        pt_spank_conf_default(&c);
        d = c;
        pt_error_clear();
        int rc = pt_spank_conf_load(p, &c);
        tap_ok(rc == -1 && strstr(pt_errmsg(), bad[i].must) && strstr(pt_errmsg(), "bad.conf") &&
                   !strchr(pt_errmsg(), '\n') && memcmp(&c, &d, sizeof c) == 0,
               "bad ptrain.conf refused, settings unchanged: %s", pt_errmsg());
    }
    pt_spank_conf_default(&c);
    tap_ok(c.max_pp == 64 && c.default_zero == 0 && c.max_zero == 3 &&
               c.default_schedule == PT_SCHED_1F1B && c.default_recompute == PT_RECOMPUTE_NONE &&
               c.allowed_schedules == ((1u << PT_SCHED_1F1B) | (1u << PT_SCHED_GPIPE) |
                                       (1u << PT_SCHED_INTERLEAVED)) &&
               c.default_precision == PT_PREC_FP32 &&
               c.allowed_precisions == ((1u << PT_PREC_FP32) | (1u << PT_PREC_BF16)),
           "pipeline defaults: max_pp 64, zero 0 of max 3, 1f1b, every schedule allowed, no recompute, "
           "fp32 of fp32 and bf16");
    int max_pp = 2 + (int)rnd(60), dz = (int)rnd(3);
    snprintf(text, sizeof text,
             "max_pp = %d;\ndefault_zero = %d;\nmax_zero = %d;\ndefault_schedule = \"gpipe\";\n"
             "allowed_schedules = [\"gpipe\", \"interleaved\"];\ndefault_recompute = \"block\";\n"
             "default_precision = \"bf16\";\nallowed_precisions = [\"bf16\"];\n",
             max_pp, dz, dz + 1);
    p = write_conf("pipe.conf", text);
    pt_error_clear();
    tap_ok(pt_spank_conf_load(p, &c) == 0 && c.max_pp == max_pp && c.default_zero == dz &&
               c.max_zero == dz + 1 && c.default_schedule == PT_SCHED_GPIPE &&
               c.allowed_schedules == ((1u << PT_SCHED_GPIPE) | (1u << PT_SCHED_INTERLEAVED)) &&
               c.default_recompute == PT_RECOMPUTE_BLOCK && c.default_precision == PT_PREC_BF16 &&
               c.allowed_precisions == (1u << PT_PREC_BF16),
           "pipeline settings are read (max_pp=%d default_zero=%d, bf16 only): %s", max_pp, dz, pt_errmsg());
    /* the planner's settings: a cached node model, rate overrides, binding */
    double gb = 1 + rnd(400) / 4.0, lat = 0.5 + rnd(100), gf = 10 + rnd(100000), gfb = 10 + rnd(1000000) / 8.0;
    snprintf(text, sizeof text,
             "topology = \"/var/cache/ptrain/node.json\";\ninter_node_gbps = %.2f;\n"
             "inter_node_lat_us = %.1f;\ngemm_gflops = %d;\ngemm_gflops_bf16 = %.3f;\nbind = \"none\";\n", gb, lat,
             (int)gf, gfb);
    p = write_conf("plan.conf", text);
    pt_spank_conf_default(&c);
    tap_ok(c.bind == PT_SPANK_BIND_AUTO && c.topology[0] == '\0' && c.inter_node_gbps == 0 &&
               c.gemm_gflops == 0 && c.gemm_gflops_bf16 == 0 && c.inter_node_lat_us == 0,
           "planner defaults: bind auto, no topology file, no rate overrides");
    pt_error_clear();
    tap_ok(pt_spank_conf_load(p, &c) == 0 &&
               strcmp(c.topology, "/var/cache/ptrain/node.json") == 0 &&
               c.inter_node_gbps > gb - 0.01 && c.inter_node_gbps < gb + 0.01 &&
               c.inter_node_lat_us > lat - 0.01 && c.inter_node_lat_us < lat + 0.01 &&
               c.gemm_gflops == (int)gf && c.gemm_gflops_bf16 == gfb && c.bind == PT_SPANK_BIND_NONE,
           "planner settings are read (inter_node_gbps=%.2f lat=%.1f gemm=%d gemm_bf16=%.3f, integer or float): %s",
           gb, lat, (int)gf, gfb, pt_errmsg());
    pt_spank_conf_default(&c);
    tap_ok(pt_spank_conf_arg("topology=/x/t.xml", &c) == 0 && strcmp(c.topology, "/x/t.xml") == 0 &&
               pt_spank_conf_arg("inter_node_gbps=12.5", &c) == 0 && c.inter_node_gbps == 12.5 &&
               pt_spank_conf_arg("inter_node_lat_us=3", &c) == 0 && c.inter_node_lat_us == 3 &&
               pt_spank_conf_arg("gemm_gflops=900", &c) == 0 && c.gemm_gflops == 900 &&
               pt_spank_conf_arg("gemm_gflops_bf16=2700.5", &c) == 0 && c.gemm_gflops_bf16 == 2700.5 &&
               pt_spank_conf_arg("bind=none", &c) == 0 && c.bind == PT_SPANK_BIND_NONE,
           "plugstack topology=, inter_node_gbps=, inter_node_lat_us=, gemm_gflops=, gemm_gflops_bf16=, bind=: %s",
           pt_errmsg());
    const struct { const char *arg, *must; } badplan[] = {
        {"topology=", "topology= needs a path"},
        {"inter_node_gbps=fast", "invalid inter_node_gbps='fast' (valid: a number > 0 and <= 1e+09)"},
        {"inter_node_gbps=0", "invalid inter_node_gbps='0'"},
        {"gemm_gflops=nan", "invalid gemm_gflops='nan'"},
        {"gemm_gflops_bf16=-4", "invalid gemm_gflops_bf16='-4' (valid: a number > 0 and <= 1e+09)"},
        {"inter_node_lat_us=-1", "invalid inter_node_lat_us='-1'"},
        {"bind=cores", "invalid plugstack bind 'cores' (valid: none, auto)"},
    };
    for (size_t i = 0; i < sizeof badplan / sizeof badplan[0]; i++) {
        pt_spank_conf before = c;
        pt_error_clear();
        tap_ok(pt_spank_conf_arg(badplan[i].arg, &c) == -1 && strstr(pt_errmsg(), badplan[i].must) &&
                   !strchr(pt_errmsg(), '\n') && memcmp(&before, &c, sizeof c) == 0,
               "plugstack %s refused, settings unchanged: %s", badplan[i].arg, pt_errmsg());
    }
    /* --ptrain-model / --ptrain-batch values */
    int bt;
    tap_ok(pt_spank_parse_model_opt("--ptrain-model", "tiny") == 0 &&
               pt_spank_parse_model_opt("--ptrain-model", "2,4,64,32,50257") == 0 &&
               pt_spank_parse_batch_opt("--ptrain-batch", "16", &bt) == 0 && bt == 16,
           "--ptrain-model=tiny, --ptrain-model=2,4,64,32,50257, --ptrain-batch=16 accepted: %s", pt_errmsg());
    tap_ok(pt_spank_parse_model_opt("--ptrain-model", "huge") == -1 && strstr(pt_errmsg(), "'huge'") &&
               strstr(pt_errmsg(), "tiny") && !strchr(pt_errmsg(), '\n'),
           "--ptrain-model=huge refused naming the presets: %s", pt_errmsg());
    tap_ok(pt_spank_parse_model_opt("--ptrain-model", "2,3,64,32,100") == -1 && !strchr(pt_errmsg(), '\n'),
           "--ptrain-model=2,3,64,32,100 (C %% H != 0) refused: %s", pt_errmsg());
    tap_ok(pt_spank_parse_batch_opt("--ptrain-batch", "0", &bt) == -1 &&
               strstr(pt_errmsg(), "--ptrain-batch='0' is invalid (valid: the global batch"),
           "--ptrain-batch=0 refused: %s", pt_errmsg());
    tap_ok(pt_spank_parse_batch_opt("PTRAIN_BATCH", "8x", &bt) == -1 && strstr(pt_errmsg(), "PTRAIN_BATCH='8x'"),
           "PTRAIN_BATCH=8x refused: %s", pt_errmsg());

    const char *top = getenv("top_srcdir");
    if (top) {
        char ex[1024];
        snprintf(ex, sizeof ex, "%s/share/ptrain.conf.example", top);
        pt_spank_conf_default(&c);
        pt_error_clear();
        tap_ok(pt_spank_conf_load(ex, &c) == 0 && c.max_tp == 8 && c.max_pp == 64 &&
                   c.default_schedule == PT_SCHED_1F1B,
               "share/ptrain.conf.example loads: %s", pt_errmsg());
    } else {
        tap_diag("top_srcdir not set: share/ptrain.conf.example not checked");
    }
    pt_spank_conf_default(&c);
    tap_ok(pt_spank_conf_load("/nonexistent/ptrain.conf", &c) == -1 &&
               strstr(pt_errmsg(), "/nonexistent/ptrain.conf"),
           "missing file refused: %s", pt_errmsg());

    pt_spank_conf_default(&c);
    tap_ok(pt_spank_conf_arg("default_mode=1d", &c) == 0 &&
               c.default_mode == PT_MODE_1D,
           "plugstack default_mode=1d");
    tap_ok(pt_spank_conf_arg("max_tp=4", &c) == 0 && c.max_tp == 4,
           "plugstack max_tp=4");
    snprintf(text, sizeof text, "config=%s", write_conf("c.conf", "max_tp = 7;\n"));
    tap_ok(pt_spank_conf_arg(text, &c) == 0 && c.max_tp == 7,
           "plugstack config= loads the file");
    const char *badargs[] = {"default_mode=2.5e", "default_mode=x", "max_tp=-1", "max_tp=two",
                             "verbose", "colour=blue", "config=", "master_port_count=2147483647",
                             "max_tp=4294967304", "master_port_base=99999999999999999999",
                             "max_pp=0", "max_zero=5", "default_zero=3x", "default_schedule=interleaved",
                             "allowed_schedules=gpipe,", "allowed_schedules=interleaved",
                             "default_recompute=all", "default_precision=fp16", "allowed_precisions=bf16",
                             "allowed_precisions=fp32,", "allowed_precisions="};
    for (size_t i = 0; i < sizeof badargs / sizeof badargs[0]; i++) {
        d = c;
        pt_error_clear();
        tap_ok(pt_spank_conf_arg(badargs[i], &c) == -1 && pt_errmsg()[0] &&
                   memcmp(&c, &d, sizeof c) == 0,
               "plugstack argument '%s' refused: %s", badargs[i], pt_errmsg());
    }
    /* the plugin's option values (--ptrain-mode, --ptrain-tp ...) */
    pt_spank_conf_default(&c);
    c.allowed_modes = (1u << PT_MODE_OFF) | (1u << PT_MODE_1D);
    c.max_tp = 4;
    pt_mode m = PT_MODE_OFF;
    int v = 0;
    tap_ok(pt_spank_parse_mode_opt(&c, "--ptrain-mode", "1d", &m) == 0 && m == PT_MODE_1D &&
               pt_spank_parse_mode_opt(&c, "--ptrain-mode", "off", &m) == 0 && m == PT_MODE_OFF,
           "option: allowed modes and off are accepted");
    tap_ok(pt_spank_parse_mode_opt(&c, "--ptrain-mode", "2d", &m) == -1 &&
               strstr(pt_errmsg(), "--ptrain-mode=2d is not allowed"),
           "option: a mode outside allowed_modes is refused: %s", pt_errmsg());
    tap_ok(pt_spank_parse_size_opt(&c, "--ptrain-tp", "4", 1, &v) == 0 && v == 4,
           "option: --ptrain-tp=4 within max_tp");
    const char *badsizes[] = {"5", "0", "-1", " 2", "2 ", "+2", "0x2", "99999999999999999999", ""};
    for (size_t i = 0; i < sizeof badsizes / sizeof badsizes[0]; i++) {
        pt_error_clear();
        tap_ok(pt_spank_parse_size_opt(&c, "--ptrain-tp", badsizes[i], 1, &v) == -1 &&
                   pt_errmsg()[0] && !strchr(pt_errmsg(), '\n'),
               "option: --ptrain-tp='%s' refused: %s", badsizes[i], pt_errmsg());
    }

    pt_spank_conf_default(&c);
    tap_ok(pt_spank_conf_arg("allowed_schedules=1f1b,interleaved", &c) == 0 &&
               c.allowed_schedules == ((1u << PT_SCHED_1F1B) | (1u << PT_SCHED_INTERLEAVED)) &&
               pt_spank_conf_arg("max_pp=8", &c) == 0 && c.max_pp == 8 &&
               pt_spank_conf_arg("default_zero=1", &c) == 0 && c.default_zero == 1 &&
               pt_spank_conf_arg("default_recompute=attention", &c) == 0 &&
               c.default_recompute == PT_RECOMPUTE_ATTENTION &&
               pt_spank_conf_arg("default_precision=bf16", &c) == 0 && c.default_precision == PT_PREC_BF16 &&
               pt_spank_conf_arg("allowed_precisions=bf16", &c) == 0 &&
               c.allowed_precisions == (1u << PT_PREC_BF16),
           "plugstack allowed_schedules=1f1b,interleaved max_pp=8 default_zero=1 "
           "default_recompute=attention default_precision=bf16 allowed_precisions=bf16: %s", pt_errmsg());

    /* the pipeline/ZeRO option values (--ptrain-pp, --ptrain-zero ...) */
    c.max_zero = 2;
    pt_plan req;
    pt_plan_default(&req);
    int pp = 1 + (int)rnd(8), mb = 1 + (int)rnd(64);
    char num[16], num2[16];
    snprintf(num, sizeof num, "%d", pp);
    snprintf(num2, sizeof num2, "%d", mb);
    tap_ok(pt_spank_parse_pipe_opt(&c, "pp", "--ptrain-pp", num, &req) == 0 && req.pp == pp &&
               pt_spank_parse_pipe_opt(&c, "microbatches", "--ptrain-microbatches", num2, &req) == 0 &&
               req.microbatches == mb &&
               pt_spank_parse_pipe_opt(&c, "zero", "--ptrain-zero", "2", &req) == 0 && req.zero == 2 &&
               pt_spank_parse_pipe_opt(&c, "schedule", "--ptrain-schedule", "interleaved", &req) == 0 &&
               req.schedule == PT_SCHED_INTERLEAVED &&
               pt_spank_parse_pipe_opt(&c, "virtual-stages", "--ptrain-virtual-stages", "2", &req) == 0 &&
               req.virtual_stages == 2 &&
               pt_spank_parse_pipe_opt(&c, "recompute", "--ptrain-recompute", "attention", &req) == 0 &&
               req.recompute == PT_RECOMPUTE_ATTENTION &&
               pt_spank_parse_pipe_opt(&c, "recompute", "PTRAIN_RECOMPUTE", "1", &req) == 0 &&
               req.recompute == PT_RECOMPUTE_BLOCK &&
               pt_spank_parse_pipe_opt(&c, "precision", "--ptrain-precision", "bf16", &req) == 0 &&
               req.precision == PT_PREC_BF16 &&
               pt_spank_parse_pipe_opt(&c, "pp-split", "--ptrain-pp-split", "3,3,2,2", &req) == 0 &&
               req.pp_split_n == 4 && req.pp_split[3] == 2,
           "option: --ptrain-pp=%d --ptrain-microbatches=%d --ptrain-zero=2 --ptrain-schedule=interleaved "
           "--ptrain-virtual-stages=2 --ptrain-recompute=attention --ptrain-precision=bf16 "
           "--ptrain-pp-split=3,3,2,2 read: %s",
           pp, mb, pt_errmsg());
    const struct { const char *key, *text, *must; } badpipe[] = {
        {"pp", "9", "--ptrain-pp=9 exceeds this cluster's max_pp=8 (valid: 1..8)"},
        {"pp", "0", "--ptrain-pp='0' is invalid"},
        {"microbatches", "x", "--ptrain-microbatches='x' is invalid"},
        {"zero", "3", "--ptrain-zero=3 exceeds this cluster's max_zero=2 (valid: 0..2)"},
        {"zero", "4", "--ptrain-zero='4' is invalid (valid ZeRO stages: 0, 1, 2, 3)"},
        {"zero", "01", "--ptrain-zero='01' is invalid"},
        {"schedule", "gpipe", "--ptrain-schedule=gpipe is not allowed on this cluster"},
        {"schedule", "pipedream", "invalid --ptrain-schedule 'pipedream' (valid: gpipe, 1f1b, interleaved)"},
        {"virtual-stages", "17", "--ptrain-virtual-stages=17 is invalid (valid: 1..16"},
        {"recompute", "full", "invalid --ptrain-recompute 'full' (valid: none, block, attention"},
        {"precision", "fp32", "--ptrain-precision=fp32 is not allowed on this cluster (allowed_precisions"},
        {"precision", "fp16", "invalid --ptrain-precision 'fp16' (valid: fp32, bf16)"},
        {"pp-split", "3,,2", "invalid --ptrain-pp-split '3,,2'"},
        {"colour", "blue", "unknown pipeline option 'colour'"},
    };
    for (size_t i = 0; i < sizeof badpipe / sizeof badpipe[0]; i++) {
        char what[48];
        snprintf(what, sizeof what, "--ptrain-%s", badpipe[i].key);
        pt_plan before = req;
        pt_error_clear();
        tap_ok(pt_spank_parse_pipe_opt(&c, badpipe[i].key, what, badpipe[i].text, &req) == -1 &&
                   strstr(pt_errmsg(), badpipe[i].must) && !strchr(pt_errmsg(), '\n') &&
                   memcmp(&before, &req, sizeof req) == 0,
               "option: %s='%s' refused: %s", what, badpipe[i].text, pt_errmsg());
    }

    test_conf_mixed();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) tap_diag("could not remove %s", tmpdir);
}

/* Binding (pt_spank_bind_compute) on every topology fixture and task
 * count, against properties computed here from the model itself: the
 * GPU of task i is GPU i while tasks <= GPUs; every CPU set lies inside
 * the task's locality (its GPU's local CPUs, else its NUMA node's) and is
 * not empty; tasks sharing a locality get disjoint sets that cover it
 * when they are no more than its cores; the NIC is an HCA with the
 * nearest PCI path to the GPU. */
/* node_models and mixed_nodes: the settings for clusters of mixed nodes */
static void test_conf_mixed(void)
{
    pt_spank_conf c;
    pt_spank_conf_default(&c);
    tap_ok(c.n_node_models == 0 && c.mixed_nodes == PT_MIXED_ADAPT, "defaults: no node_models, mixed_nodes adapt");
    const char *p = write_conf("mixed.conf", "node_models = [\"gpu[01-04]=/etc/ptrain/h100.json\", "
                               "\"cpu[1-2]=/etc/ptrain/cpu.xml\"];\nmixed_nodes = \"refuse\";\n");
    int ok = pt_spank_conf_load(p, &c) == 0 && c.n_node_models == 2 && c.mixed_nodes == PT_MIXED_REFUSE &&
             !strcmp(c.node_model[0].hosts, "gpu[01-04]") && !strcmp(c.node_model[1].path, "/etc/ptrain/cpu.xml");
    tap_ok(ok, "node_models and mixed_nodes load (%s)", ok ? "2 models, refuse" : pt_errmsg());
    pt_spank_conf_default(&c);
    ok = pt_spank_conf_arg("node_model=n[1-2]=/a.json", &c) == 0 && pt_spank_conf_arg("mixed_nodes=refuse", &c) == 0 &&
         c.n_node_models == 1 && !strcmp(c.node_model[0].hosts, "n[1-2]") && c.mixed_nodes == PT_MIXED_REFUSE;
    tap_ok(ok, "plugstack node_model= adds one, mixed_nodes= sets the policy");
    const struct { const char *text, *want; } bad[] = {
        {"node_models = [\"gpu[01-04]\"];\n", "is not HOSTLIST=PATH"},
        {"node_models = [\"gpu[04-01]=/x.json\"];\n", "reversed"},
        {"node_models = \"gpu1=/x.json\";\n", "must be a list"},
        {"mixed_nodes = \"sometimes\";\n", "mixed_nodes must be \"adapt\" or \"refuse\""},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        pt_spank_conf_default(&c);
        const char *q = write_conf("badmixed.conf", bad[i].text);
        tap_ok(pt_spank_conf_load(q, &c) < 0 && strstr(pt_errmsg(), bad[i].want) && c.n_node_models == 0,
               "refused: %s", pt_errmsg());
    }
    tap_ok(pt_spank_conf_arg("mixed_nodes=maybe", &c) < 0 && strstr(pt_errmsg(), "valid: adapt, refuse"),
           "plugstack mixed_nodes=maybe refused: %s", pt_errmsg());
    /* each step node's model: the first host list that holds it */
    pt_spank_conf_default(&c);
    pt_spank_conf_arg("node_model=gpu[01-04]=/a.json", &c);
    pt_spank_conf_arg("node_model=gpu[03-08]=/b.json", &c);
    int kind[6];
    ok = pt_spank_node_kinds(&c, "gpu[02-05],cpu1,gpu07", 6, kind) == 0 && kind[0] == 0 && kind[1] == 0 &&
         kind[2] == 0 && kind[3] == 1 && kind[4] == -1 && kind[5] == 1;
    tap_ok(ok, "node kinds of gpu[02-05],cpu1,gpu07: 0 0 0 1 -1 1 (the first list wins, cpu1 in none)");
    tap_ok(pt_spank_node_kinds(&c, "gpu[01-02]", 3, kind) < 0 && strstr(pt_errmsg(), "names 2 nodes, the step has 3"),
           "a node list of another length refused: %s", pt_errmsg());
}

static void test_binding(void)
{
    const char *top = getenv("top_srcdir");
    if (!top) {
        tap_diag("top_srcdir not set: binding fixtures not checked");
        return;
    }
    static const char *fixtures[] = {"dgx8-nvswitch.xml", "pairs8-nvlink.xml", "pairs8-strided.xml", "gpu4-pcie.xml",
                                     "cpu2s.xml", "build-machine.xml", "h100-vm.xml"};
    for (size_t f = 0; f < sizeof fixtures / sizeof fixtures[0]; f++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/tests/topo/%s", top, fixtures[f]);
        pt_topo t;
        memset(&t, 0, sizeof t);
        if (pt_topo_load_hwloc(&t, path) != 0) {
            tap_ok(0, "%s loads", fixtures[f]);
            continue;
        }
        hwloc_topology_t m = t.hw;
        int ncores = hwloc_get_nbobjs_by_type(m, HWLOC_OBJ_CORE);
        /* the GPUs in island order: each island (pt_topo_islands_find)
         * after the one of a lower GPU, its GPUs ascending */
        int ord[64], no = 0;
        pt_topo_islands isl;
        if (t.ngpus > 0 && t.ngpus <= 64 && pt_topo_islands_find(&t, &isl) == 0) {
            for (int d = 0; d < t.ngpus; d++) {
                int first = 1;
                for (int e = 0; e < d; e++) first &= isl.island_of[e] != isl.island_of[d];
                if (!first) continue;
                for (int e = d; e < t.ngpus; e++)
                    if (isl.island_of[e] == isl.island_of[d]) ord[no++] = e;
            }
        }
#define TASK_GPU(j) (t.ngpus > 0 && n <= t.ngpus ? (no == t.ngpus ? ord[j] : (j)) : -1)
        const int counts[] = {1, 2, 3, 4, 8, 16, ncores + 1};
        for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++) {
            int n = counts[ci];
            pt_spank_binding b[80];
            int ok = n <= 80, gpu_ok = 1, inside = 1, disjoint = 1, cover = 1, nic_ok = 1;
            char why[256] = "";
            for (int i = 0; ok && i < n; i++)
                if (pt_spank_bind_compute(&t, m, NULL, i, n, &b[i]) < 0) {
                    ok = 0;
                    snprintf(why, sizeof why, "%.200s", pt_errmsg());
                }
            for (int i = 0; ok && i < n; i++) {
                int want_gpu = TASK_GPU(i);
                if (b[i].gpu != want_gpu) gpu_ok = 0;
                const char *loc = want_gpu >= 0 ? t.gpu[want_gpu].pci.cpus
                                  : t.nnuma ? t.numa[(long long)i * t.nnuma / n].cpus : "";
                hwloc_bitmap_t a = hwloc_bitmap_alloc(), l = hwloc_bitmap_alloc();
                hwloc_bitmap_list_sscanf(a, b[i].cpus);
                hwloc_bitmap_list_sscanf(l, loc);
                if (hwloc_bitmap_iszero(a) || !hwloc_bitmap_isincluded(a, l)) {
                    inside = 0;
                    snprintf(why, sizeof why, "task %d of %d: cpus %s not inside %s", i, n, b[i].cpus, loc);
                }
                /* tasks sharing this locality */
                int share = 0;
                for (int j = 0; j < n; j++) {
                    int gj = TASK_GPU(j);
                    const char *lj = gj >= 0 ? t.gpu[gj].pci.cpus
                                     : t.nnuma ? t.numa[(long long)j * t.nnuma / n].cpus : "";
                    share += strcmp(lj, loc) == 0;
                }
                int fits = share <= hwloc_get_nbobjs_inside_cpuset_by_type(m, l, HWLOC_OBJ_CORE);
                hwloc_bitmap_t uni = hwloc_bitmap_alloc();
                for (int j = 0; j < n; j++) {
                    int gj = TASK_GPU(j);
                    const char *lj = gj >= 0 ? t.gpu[gj].pci.cpus
                                     : t.nnuma ? t.numa[(long long)j * t.nnuma / n].cpus : "";
                    if (strcmp(lj, loc) != 0) continue;
                    hwloc_bitmap_t bj = hwloc_bitmap_alloc();
                    hwloc_bitmap_list_sscanf(bj, b[j].cpus);
                    if (j != i && hwloc_bitmap_intersects(a, bj) && fits) disjoint = 0;
                    hwloc_bitmap_or(uni, uni, bj);
                    hwloc_bitmap_free(bj);
                }
                hwloc_bitmap_and(l, l, hwloc_topology_get_allowed_cpuset(m));
                if (fits && !hwloc_bitmap_isequal(uni, l))
                    cover = 0;
                hwloc_bitmap_free(uni);
                hwloc_bitmap_free(a);
                hwloc_bitmap_free(l);
                if (b[i].gpu >= 0) {
                    int best = -1;
                    for (int k = 0; k < t.nnics; k++)
                        if ((t.nic[k].kind == PT_NIC_IB || t.nic[k].kind == PT_NIC_ROCE) &&
                            t.gn_class[b[i].gpu * t.nnics + k] > best)
                            best = t.gn_class[b[i].gpu * t.nnics + k];
                    if (best < 0 ? b[i].nic != -1
                                 : b[i].nic < 0 || t.gn_class[b[i].gpu * t.nnics + b[i].nic] != best)
                        nic_ok = 0;
                }
            }
            tap_ok(ok && gpu_ok && inside && disjoint && cover && nic_ok,
                   "binding %s, %d tasks: gpu %s, cpus inside the locality %s, disjoint %s, cover %s, "
                   "nearest HCA %s (task 0: gpu %d nic %d cpus %s near %s) %s", fixtures[f], n,
                   gpu_ok ? "ok" : "WRONG", inside ? "ok" : "NO", disjoint ? "ok" : "NO",
                   cover ? "ok" : "NO", nic_ok ? "ok" : "NO", b[0].gpu, b[0].nic, b[0].cpus,
                   b[0].where, why);
        }
#undef TASK_GPU
        pt_topo_free(&t);
    }
    /* NVLink pairs {0,4} {1,5} {2,6} {3,7}: tasks 0..7 on GPUs 0,4,1,5,2,6,3,7,
     * so ranks 2k and 2k+1 share a pair as the planner's islands of 2 ranks
     * assume */
    {
        char path[1024];
        snprintf(path, sizeof path, "%s/tests/topo/pairs8-strided.xml", top);
        pt_topo t;
        int got[8], ok = pt_topo_load_hwloc(&t, path) == 0, loaded = ok;
        for (int i = 0; ok && i < 8; i++) {
            pt_spank_binding bb;
            ok = pt_spank_bind_compute(&t, t.hw, NULL, i, 8, &bb) == 0;
            got[i] = bb.gpu;
        }
        static const int want[8] = {0, 4, 1, 5, 2, 6, 3, 7};
        tap_ok(ok && !memcmp(got, want, sizeof want), "pairs8-strided: tasks 0..7 bound to GPUs 0,4,1,5,2,6,3,7 "
               "(NVLink pairs on consecutive tasks)");
        if (loaded) pt_topo_free(&t);
    }
    pt_spank_binding b;
    pt_topo none;
    memset(&none, 0, sizeof none);
    tap_ok(pt_spank_bind_compute(&none, NULL, "0-3", 5, 4, &b) == -1 && strstr(pt_errmsg(), "out of range"),
           "binding: task 5 of 4 refused: %s", pt_errmsg());
    tap_ok(pt_spank_bind_compute(&none, NULL, "0-3", 1, 2, &b) == 0 && strcmp(b.cpus, "2-3") == 0 &&
               b.gpu == -1 && b.nic == -1,
           "binding without a model: task 1 of 2 gets the second half of the allowed CPUs 0-3 (%s)", b.cpus);
    tap_ok(pt_spank_bind_compute(&none, NULL, "0-1", 3, 4, &b) == 0 && strcmp(b.cpus, "1") == 0,
           "binding: 4 tasks on 2 CPUs share them two by two (task 3: %s)", b.cpus);
}

/* --ptrain-energy and its ptrain.conf limits; the NVML restriction the
 * plugin lifts and restores, against tests/energy/fake_nvml.so. */
static void fake_put(const char *dir, const char *name, const char *text)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static void fake_get(const char *dir, const char *name, char *out, size_t len)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "r");
    out[0] = '\0';
    if (f) {
        size_t n = fread(out, 1, len - 1, f);
        out[n] = '\0';
        fclose(f);
    }
    if (!strcmp(name, "log")) unlink(p);
    for (char *c = out; *c; c++)
        if (*c == '\n') *c = ';';
}

static void test_energy(void)
{
    pt_spank_conf c;
    int lv = -1;
    if (mkdir(tmpdir, 0700) != 0) { /* test_conf's directory, removed at its end */
        tap_ok(0, "mkdir %s", tmpdir);
        return;
    }
    pt_spank_conf_default(&c);
    tap_ok(c.energy == PT_SPANK_ENERGY_PLAN && c.gpu_clock_mhz[1] == 0,
           "the default allows --ptrain-energy up to plan, any clock");
    const char *ok_levels[] = {"off", "report", "plan"};
    int all = 1;
    for (int i = 0; i < 3; i++) all &= pt_spank_parse_energy_opt(&c, "--ptrain-energy", ok_levels[i], &lv) == 0 &&
                                         lv == i;
    tap_ok(all, "--ptrain-energy=off, report, plan accepted by default");
    tap_ok(pt_spank_parse_energy_opt(&c, "--ptrain-energy", "apply", &lv) == -1 &&
               strstr(pt_errmsg(), "ptrain: --ptrain-energy=apply is not allowed on this cluster (allowed: off,report,plan;"),
           "--ptrain-energy=apply refused by default, naming what is allowed: %s", pt_errmsg());
    tap_ok(pt_spank_parse_energy_opt(&c, "PTRAIN_ENERGY", "max", &lv) == -1 &&
               strstr(pt_errmsg(), "PTRAIN_ENERGY='max' is invalid (valid: off, report, plan, apply)"),
           "PTRAIN_ENERGY=max refused: %s", pt_errmsg());
    /* random ranges through ptrain.conf and the plugstack arguments */
    double lo = 300 + (double)rnd(1000), hi = lo + (double)rnd(2000);
    char text[512];
    snprintf(text, sizeof text, "energy = \"apply\";\ngpu_clock_mhz = [%g, %g];\ncpu_clock_mhz = [%g.5, %g.0];\n", lo, hi,
             lo, hi + 1);
    tap_ok(pt_spank_conf_load(write_conf("e.conf", text), &c) == 0 && c.energy == PT_SPANK_ENERGY_APPLY &&
               c.gpu_clock_mhz[0] == lo && c.gpu_clock_mhz[1] == hi && c.cpu_clock_mhz[0] == lo + 0.5 &&
               c.cpu_clock_mhz[1] == hi + 1,
           "ptrain.conf energy = \"apply\", gpu_clock_mhz = [%g, %g], cpu_clock_mhz: loaded (%s)", lo, hi, pt_errmsg());
    tap_ok(pt_spank_parse_energy_opt(&c, "--ptrain-energy", "apply", &lv) == 0 && lv == PT_SPANK_ENERGY_APPLY,
           "... then --ptrain-energy=apply is allowed");
    const struct { const char *text, *must; } bad[] = {
        {"energy = \"max\";\n", "e.conf:1: energy must be one of"},
        {"energy = 3;\n", "e.conf:1: energy must be one of"},
        {"\ngpu_clock_mhz = [2000, 1000];\n", "e.conf:2: gpu_clock_mhz must be [min, max]"},
        {"cpu_clock_mhz = [1000];\n", "cpu_clock_mhz must be [min, max]"},
        {"gpu_clock_mhz = \"fast\";\n", "gpu_clock_mhz must be [min, max]"},
        {"gpu_clock_mhz = [0, 100];\n", "gpu_clock_mhz must be [min, max]"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        pt_spank_conf before = c;
        tap_ok(pt_spank_conf_load(write_conf("e.conf", bad[i].text), &c) == -1 && strstr(pt_errmsg(), bad[i].must) &&
                   c.energy == before.energy && c.gpu_clock_mhz[0] == before.gpu_clock_mhz[0],
               "ptrain.conf %.*s refused, nothing changed: %s", (int)strcspn(bad[i].text + (bad[i].text[0] == '\n'), "\n"),
               bad[i].text + (bad[i].text[0] == '\n'), pt_errmsg());
    }
    pt_spank_conf_default(&c);
    tap_ok(pt_spank_conf_arg("energy=report", &c) == 0 && c.energy == PT_SPANK_ENERGY_REPORT &&
               pt_spank_conf_arg("gpu_clock_mhz=1100-1980", &c) == 0 && c.gpu_clock_mhz[0] == 1100 &&
               c.gpu_clock_mhz[1] == 1980 && pt_spank_conf_arg("cpu_clock_mhz=1200-3000.5", &c) == 0 &&
               c.cpu_clock_mhz[1] == 3000.5,
           "plugstack energy=report gpu_clock_mhz=1100-1980 cpu_clock_mhz=1200-3000.5 (%s)", pt_errmsg());
    tap_ok(pt_spank_parse_energy_opt(&c, "--ptrain-energy", "plan", &lv) == -1 && strstr(pt_errmsg(), "allowed: off,report;"),
           "... then plan is refused: %s", pt_errmsg());
    tap_ok(pt_spank_conf_arg("gpu_clock_mhz=fast", &c) == -1 &&
               strstr(pt_errmsg(), "plugstack gpu_clock_mhz='fast' is invalid (valid: MIN-MAX in MHz") && c.gpu_clock_mhz[0] == 1100,
           "plugstack gpu_clock_mhz=fast refused: %s", pt_errmsg());
    /* strtod's other forms are not clock ranges: what the plugin passes on,
     * ptrain-run must take (PTRAIN_ENERGY_CPU_MHZ, plain decimals) */
    static const char *const odd[] = {"0x400-0x800", "1e-300-2000", "1100-1.98e3", "0.5-2000", "1100-100001",
                                      " 1100-1980", "inf-inf"};
    for (size_t i = 0; i < sizeof odd / sizeof *odd; i++) {
        char arg[64];
        snprintf(arg, sizeof arg, "cpu_clock_mhz=%s", odd[i]);
        tap_ok(pt_spank_conf_arg(arg, &c) == -1 && strstr(pt_errmsg(), "is invalid (valid: MIN-MAX in MHz, plain decimals") &&
                   c.cpu_clock_mhz[1] == 3000.5,
               "plugstack %s refused, nothing changed: %s", arg, pt_errmsg());
    }
    snprintf(text, sizeof text, "cpu_clock_mhz = [0.5, 2000.0];\n");
    tap_ok(pt_spank_conf_load(write_conf("e2.conf", text), &c) == -1 && strstr(pt_errmsg(), "1 <= min <= max <= 100000"),
           "ptrain.conf cpu_clock_mhz = [0.5, 2000.0] refused: %s", pt_errmsg());
    tap_ok(pt_spank_conf_arg("energy=all", &c) == -1 && strstr(pt_errmsg(), "'all' is invalid"),
           "plugstack energy=all refused: %s", pt_errmsg());

    /* the restriction, through the stand-in NVML */
    const char *bd = getenv("top_builddir");
    char lib[1024], nv[300], log[1024], st[64];
    snprintf(lib, sizeof lib, "%s/tests/energy/.libs/fake_nvml.so", bd ? bd : ".");
    if (access(lib, R_OK) != 0) {
        tap_ok(0, "the stand-in NVML %s is built", lib);
        return;
    }
    snprintf(nv, sizeof nv, "%s/nvml", tmpdir);
    mkdir(nv, 0755);
    setenv("PTRAIN_NVML_LIBRARY", lib, 1);
    setenv("FAKE_NVML_DIR", nv, 1);
    fake_put(nv, "count", "2\n");
    fake_put(nv, "root", "1\n");
    int was = -1;
    tap_ok(pt_spank_nvml_unrestrict("0000:08:00.0", &was) == 0 && was == 1,
           "as root: GPU 0000:08:00.0's restriction lifted (it was on): %s", pt_errmsg());
    fake_get(nv, "restricted.1", st, sizeof st);
    fake_get(nv, "log", log, sizeof log);
    char r0[64];
    fake_get(nv, "restricted.0", r0, sizeof r0);
    tap_ok(!strcmp(st, "0;") && !strcmp(log, "init;restriction 1 0;shutdown;") && r0[0] == '\0',
           "... that GPU's only (restricted.1 '%s', GPU 0 untouched; calls %s)", st, log);
    tap_ok(pt_spank_nvml_restore("0000:08:00.0", was) == 0, "restored at task exit: %s", pt_errmsg());
    fake_get(nv, "restricted.1", st, sizeof st);
    fake_get(nv, "log", log, sizeof log);
    tap_ok(!strcmp(st, "1;") && !strcmp(log, "init;reset_app 1;reset_locked 1;restriction 1 1;shutdown;"),
           "... clocks reset and the restriction back (%s)", log);
    fake_put(nv, "restricted.1", "0\n");
    tap_ok(pt_spank_nvml_unrestrict("0000:08:00.0", &was) == 0 && was == 0 &&
               pt_spank_nvml_restore("0000:08:00.0", was) == 0,
           "a GPU already unrestricted stays so");
    fake_get(nv, "log", log, sizeof log);
    tap_ok(!strstr(log, "restriction"), "... no restriction call either way (%s)", log);
    char p[512];
    snprintf(p, sizeof p, "%s/root", nv);
    unlink(p);
    fake_put(nv, "restricted.1", "1\n");
    tap_ok(pt_spank_nvml_unrestrict("0000:08:00.0", &was) == -1 &&
               strstr(pt_errmsg(), "cannot lift the application-clock restriction of GPU 0000:08:00.0") &&
               strstr(pt_errmsg(), "not permitted"),
           "not root: refused in one line: %s", pt_errmsg());
    tap_ok(pt_spank_nvml_unrestrict("0000:3b:00.0", &was) == -1 && strstr(pt_errmsg(), "no device '0000:3b:00.0'"),
           "a GPU NVML does not have: %s", pt_errmsg());
    setenv("PTRAIN_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1", 1);
    tap_ok(pt_spank_nvml_unrestrict("0000:08:00.0", &was) == -1 && strstr(pt_errmsg(), "cannot load") &&
               pt_spank_nvml_restore("0000:08:00.0", 1) == -1,
           "no NVML: both refuse in one line: %s", pt_errmsg());
    unsetenv("PTRAIN_NVML_LIBRARY");
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) tap_diag("could not remove %s", tmpdir);
}

/* The cpufreq settings a task killed by SIGKILL left: recorded before,
 * written back after, on a fake tree (PTRAIN_SYSFS_ROOT) with random
 * CPUs and values. */
static unsigned long long cf_read(const char *root, int cpu, const char *attr)
{
    char p[512];
    snprintf(p, sizeof p, "%s/sys/devices/system/cpu/cpu%d/cpufreq/%s", root, cpu, attr);
    FILE *f = fopen(p, "r");
    unsigned long long v = 0;
    if (f) {
        if (fscanf(f, "%llu", &v) != 1) v = 0;
        fclose(f);
    }
    return v;
}

static void cf_write(const char *root, int cpu, const char *attr, const char *text, mode_t mode)
{
    char p[512];
    snprintf(p, sizeof p, "%s/sys/devices/system/cpu/cpu%d/cpufreq", root, cpu);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", p);
    if (system(cmd) != 0) tap_diag("cannot make %s", p);
    snprintf(p + strlen(p), sizeof p - strlen(p), "/%s", attr);
    FILE *f = fopen(p, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
    chmod(p, mode);
}

static void test_cpufreq(void)
{
    char root[] = "/tmp/ptrain-cpufreq.XXXXXX";
    if (!mkdtemp(root)) {
        tap_ok(0, "mkdtemp for a fake cpufreq tree");
        return;
    }
    setenv("PTRAIN_SYSFS_ROOT", root, 1);
    /* CPUs 0..n-1: even ones under userspace (a speed), odd ones not */
    int n = 4 + (int)rnd(8);
    unsigned long long mx[16], sp[16];
    char t[32];
    for (int c = 0; c < n; c++) {
        mx[c] = 1000000 + 100000 * rnd(20);
        sp[c] = c % 2 ? 0 : 800000 + 100000 * rnd(10);
        snprintf(t, sizeof t, "%llu\n", mx[c]);
        cf_write(root, c, "scaling_max_freq", t, 0644);
        snprintf(t, sizeof t, "%llu\n", sp[c]);
        cf_write(root, c, "scaling_setspeed", c % 2 ? "<unsupported>\n" : t, 0644);
    }
    pt_spank_cpufreq s = {0};
    int cpus[20], k = 0;
    for (int c = 0; c < n; c++) cpus[k++] = c;
    cpus[k++] = n + 3; /* no cpufreq: left out */
    cpus[k++] = 1;     /* given twice: recorded once */
    int rc = pt_spank_cpufreq_save(&s, cpus, k / 2);
    if (!rc) rc = pt_spank_cpufreq_save(&s, cpus + k / 2, k - k / 2); /* a second task's CPUs */
    tap_ok(rc == 0 && s.n == n, "%d CPUs with cpufreq recorded once each, over two tasks (%d)", n, s.n);
    /* a run's plan: random lower clocks on random CPUs */
    int changed = 0;
    unsigned long long now[16][2];
    for (int c = 0; c < n; c++) {
        now[c][0] = mx[c], now[c][1] = sp[c];
        if (c == 0 || rnd(2)) { /* CPU 0's cap always: the group check below */
            now[c][0] = mx[c] - 100000 * (1 + rnd(5));
            snprintf(t, sizeof t, "%llu", now[c][0]);
            cf_write(root, c, "scaling_max_freq", t, 0644);
            changed++;
        }
        if (sp[c] && rnd(2)) {
            now[c][1] = sp[c] + 100000 * (1 + rnd(5));
            snprintf(t, sizeof t, "%llu", now[c][1]);
            cf_write(root, c, "scaling_setspeed", t, 0644);
            changed++;
        }
    }
    /* the job's user (not root) may not write root's 0644 files: it did not change them, nothing is touched */
    int restored = -1;
    char note[2000];
    rc = pt_spank_cpufreq_restore(&s, 1000, 1000, NULL, 0, &restored, note, sizeof note);
    int same = 1;
    for (int c = 0; c < n; c++)
        same &= cf_read(root, c, "scaling_max_freq") == now[c][0] && (!sp[c] || cf_read(root, c, "scaling_setspeed") == now[c][1]);
    tap_ok(rc == 0 && restored == 0 && same, "files the job's user may not write are left alone (%d written)", restored);
    /* a file its group may write: that one is put back */
    char p[512];
    snprintf(p, sizeof p, "%s/sys/devices/system/cpu/cpu0/cpufreq/scaling_max_freq", root);
    chmod(p, 0664);
    unsigned g[2] = {7, (unsigned)getegid()};
    rc = pt_spank_cpufreq_restore(&s, 1000, 5, g, 2, &restored, note, sizeof note);
    tap_ok(rc == 0 && restored == 1 && cf_read(root, 0, "scaling_max_freq") == mx[0],
           "a file a supplementary group of the user may write is put back, only that one (%d: %s)", restored, note);
    changed--;
    /* root: every change, and only the changes */
    rc = pt_spank_cpufreq_restore(&s, 0, 0, NULL, 0, &restored, note, sizeof note);
    int back = 1;
    for (int c = 0; c < n; c++)
        back &= cf_read(root, c, "scaling_max_freq") == mx[c] && (!sp[c] || cf_read(root, c, "scaling_setspeed") == sp[c]);
    tap_ok(rc == 0 && restored == changed && back, "as root every changed setting is written back, %d of them (%d: %.200s)",
           changed, restored, note);
    rc = pt_spank_cpufreq_restore(&s, 0, 0, NULL, 0, &restored, note, sizeof note);
    tap_ok(rc == 0 && restored == 0 && !note[0], "a second restore writes nothing (%d)", restored);
    pt_spank_cpufreq_free(&s);
    unsetenv("PTRAIN_SYSFS_ROOT");
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    if (system(cmd) != 0) tap_diag("could not remove %s", root);
}

int main(void)
{
    const char *s = getenv("PTRAIN_TEST_SEED");
    uint64_t seed = s ? strtoull(s, NULL, 10) : (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 20);
    rng = seed;
    tap_diag("seed %llu", (unsigned long long)seed);
    test_tasks_per_node();
    test_first_host();
    test_hostlist();
    test_port();
    test_conf();
    test_binding();
    test_energy();
    test_cpufreq();
    return tap_done();
}
