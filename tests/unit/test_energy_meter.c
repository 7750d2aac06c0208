/* SPDX-License-Identifier: MIT */
/* lib/energy against fake trees and a fake NVML (there is no GPU, RAPL or
 * cpufreq on the build machine):
 *  - pt_energy_counter_delta: increments, RAPL wrap-around, NVML resets;
 *    a RAPL counter without a range that goes back counts 0 J;
 *  - RAPL: the zones summed (packages and DRAM, not core/uncore/psys/mmio),
 *    fresh random increments and a wrap read back to the microjoule,
 *    shares, counters this user cannot read (as nobody, when run as root);
 *  - cpufreq: scaling_setspeed (userspace governor) and scaling_max_freq,
 *    rounding to the offered clocks (1.7e308 MHz: the top one), the allowed
 *    range, restore on close, no cpufreq, files not writable; allowed
 *    ranges: plain decimals only;
 *  - NVML through tests/energy/fake_nvml.so ($PTRAIN_NVML_LIBRARY): the
 *    counter by index, bus id and UUID, a reset, a denied counter, a
 *    library that is not there; clocks: refused without root and with the
 *    restriction, application clocks once it is lifted, locked clocks as
 *    root, every change undone on close; the restriction itself;
 *  - the dry controller and its log; the node probe's report;
 *  - profiles and plans: random round trips, and bad files refused; a
 *    sparse file over the 64 MiB limit refused from its size, before a
 *    byte is read (under an address-space limit, so that reading it whole
 *    fails rather than takes the machine's memory). */
#define _GNU_SOURCE
#include "energy/clock.h"
#include "energy/meter.h"
#include "energy/nvml.h"
#include "energy/probe.h"
#include "energy/profile.h"
#include "core/core.h"
#include "contract/plan.h"
#include "tests/tap.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static uint64_t rng;
static uint64_t rnd64(void)
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return rng >> 11;
}
static double rndu(void) { return (double)(rnd64() >> 11) / 4503599627370496.0; }

static char root[512];

static void put(const char *rel, const char *text)
{
    char p[1024], parent[1024];
    snprintf(p, sizeof p, "%s%s", root, rel);
    snprintf(parent, sizeof parent, "%s", p);
    *strrchr(parent, '/') = '\0';
    char cmd[2200];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", parent);
    if (system(cmd) != 0) tap_diag("mkdir %s failed", parent);
    FILE *f = fopen(p, "w");
    if (!f) {
        tap_diag("cannot write %s: %s", p, strerror(errno));
        return;
    }
    fputs(text, f);
    fclose(f);
    chmod(p, 0644);
}

static void putu(const char *rel, unsigned long long v)
{
    char t[32];
    snprintf(t, sizeof t, "%llu\n", v);
    put(rel, t);
}

static unsigned long long getu(const char *rel)
{
    char p[1024];
    snprintf(p, sizeof p, "%s%s", root, rel);
    FILE *f = fopen(p, "r");
    unsigned long long v = 0;
    if (f) {
        if (fscanf(f, "%llu", &v) != 1) v = 0;
        fclose(f);
    }
    return v;
}

static void rm_tree(const char *dir)
{
    char cmd[1100];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) tap_diag("cannot remove %s", dir);
}

/* Run fn as user nobody in a child (when this test runs as root, so that
 * file modes bite); its exit status is the number of failed checks, its
 * output goes through as diagnostics.  -1 when it cannot switch. */
static int as_nobody(int (*fn)(void))
{
    if (geteuid() != 0) return fn();
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        if (setgroups(0, NULL) != 0 || setgid(65534) != 0 || setuid(65534) != 0) _exit(255);
        _exit(fn());
    }
    int st = 0;
    waitpid(pid, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) == 255) return -1;
    return WEXITSTATUS(st);
}

/* ---- the counter arithmetic --------------------------------------------- */
static void test_delta(void)
{
    int ok = 1;
    for (int i = 0; i < 1000; i++) {
        uint64_t range = 1000000 + rnd64() % 1000000000000ull, last = rnd64() % (range + 1);
        uint64_t d = rnd64() % (range + 1), now = last + d <= range ? last + d : last + d - range;
        uint64_t got = pt_energy_counter_delta(last, now, range);
        if (got != d) {
            ok = 0;
            tap_diag("range %llu last %llu now %llu: %llu, want %llu", (unsigned long long)range,
                     (unsigned long long)last, (unsigned long long)now, (unsigned long long)got, (unsigned long long)d);
            break;
        }
    }
    tap_ok(ok, "counter delta: 1000 random increments within one range, wrapping or not, read back exactly");
    tap_ok(pt_energy_counter_delta(262143328850ull - 5, 10, 262143328850ull) == 15,
           "a RAPL counter 5 uJ below its range that reads 10 next advanced 15 uJ");
    tap_ok(pt_energy_counter_delta(5000, 1200, 0) == 1200, "an NVML counter that goes backwards was reset: 1200 mJ since");
}

/* ---- RAPL --------------------------------------------------------------- */
#define PC "/sys/class/powercap/"
static unsigned long long range0 = 262143328850ull, range1 = 65712999613ull;

static void rapl_tree(unsigned long long p0, unsigned long long d0, unsigned long long p1)
{
    put(PC "intel-rapl:0/name", "package-0\n");
    putu(PC "intel-rapl:0/energy_uj", p0);
    putu(PC "intel-rapl:0/max_energy_range_uj", range0);
    put(PC "intel-rapl:0:0/name", "core\n");
    putu(PC "intel-rapl:0:0/energy_uj", 17);
    put(PC "intel-rapl:0:1/name", "dram\n");
    putu(PC "intel-rapl:0:1/energy_uj", d0);
    putu(PC "intel-rapl:0:1/max_energy_range_uj", range1);
    put(PC "intel-rapl:1/name", "package-1\n");
    putu(PC "intel-rapl:1/energy_uj", p1);
    putu(PC "intel-rapl:1/max_energy_range_uj", range0);
    put(PC "intel-rapl:1:0/name", "uncore\n");
    putu(PC "intel-rapl:1:0/energy_uj", 3);
    put(PC "intel-rapl:2/name", "psys\n");
    putu(PC "intel-rapl:2/energy_uj", 99);
    put(PC "intel-rapl-mmio:0/name", "package-0\n");
    putu(PC "intel-rapl-mmio:0/energy_uj", 12345);
}

static void test_rapl(void)
{
    unsigned long long p0 = rnd64() % range0, d0 = rnd64() % range1, p1 = rnd64() % range0;
    rapl_tree(p0, d0, p1);
    pt_meter *m = NULL;
    char note[1024];
    unsigned kinds;
    int automatic;
    tap_ok(pt_meter_parse("rapl", &kinds, &automatic) == PT_OK && kinds == PT_METER_RAPL && !automatic,
           "\"rapl\" parses");
    pt_meter_open(&m, kinds, 0, NULL, note, sizeof note);
    int n = pt_meter_ncounters(m);
    char desc[400];
    pt_meter_describe(m, desc, sizeof desc);
    tap_ok(n == 3 && !strcmp(pt_meter_counter_at(m, 0)->name, "package-0") &&
               !strcmp(pt_meter_counter_at(m, 1)->name, "dram (package-0)") &&
               !strcmp(pt_meter_counter_at(m, 2)->name, "package-1"),
           "RAPL: package-0, its dram and package-1 are summed; core, uncore, psys and the mmio copy are not (%s)",
           desc);
    tap_ok(fabs(pt_meter_counter_at(m, 0)->range_j - range0 * 1e-6) < 1e-9, "package-0's range is %.6f J",
           pt_meter_counter_at(m, 0)->range_j);
    /* random increments, one of them across the wrap */
    double want = 0, got = 0;
    int ok = 1;
    for (int i = 0; i < 20; i++) {
        unsigned long long a = rnd64() % 50000000ull, b = rnd64() % 5000000ull, c = rnd64() % 50000000ull;
        if (i == 7) a = range0 - p0 + rnd64() % 1000; /* wraps */
        p0 = (p0 + a) % range0;
        d0 = (d0 + b) % range1;
        p1 = (p1 + c) % range0;
        putu(PC "intel-rapl:0/energy_uj", p0);
        putu(PC "intel-rapl:0:1/energy_uj", d0);
        putu(PC "intel-rapl:1/energy_uj", p1);
        want += (double)(a + b + c) * 1e-6;
        if (pt_meter_read(m, &got) != PT_OK || fabs(got - want) > 1e-6 * (1 + want)) {
            ok = 0;
            tap_diag("reading %d: %.6f J, want %.6f J (%s)", i, got, want, pt_errmsg());
            break;
        }
    }
    tap_ok(ok, "20 random increments of the three counters (one wrapping past its range) read back: %.6f J", got);
    /* half of package-1 is this rank's */
    pt_meter_set_share(m, 2, 0.5);
    unsigned long long c = 1000000 + rnd64() % 1000000;
    p1 = (p1 + c) % range0;
    putu(PC "intel-rapl:1/energy_uj", p1);
    double before = got;
    pt_meter_read(m, &got);
    tap_ok(got >= before, "a share set later never makes the reading go back (%.6f -> %.6f J)", before, got);
    pt_meter_close(m);
    /* a fresh meter with the share from the start: exactly half the increment */
    pt_meter_open(&m, kinds, 0, NULL, note, sizeof note);
    pt_meter_set_share(m, 2, 0.5);
    c = 1000000 + rnd64() % 1000000;
    p1 = (p1 + c) % range0;
    putu(PC "intel-rapl:1/energy_uj", p1);
    pt_meter_read(m, &got);
    tap_ok(fabs(got - 0.5 * c * 1e-6) < 1e-9, "share 1/2 of package-1: %.6f J of an increment of %.6f J", got, c * 1e-6);
    pt_meter_close(m);
    /* a counter that disappears mid-run: PT_EIO, one line naming it */
    pt_meter_open(&m, kinds, 0, NULL, note, sizeof note);
    char p[1024];
    snprintf(p, sizeof p, "%s" PC "intel-rapl:1/energy_uj", root);
    unlink(p);
    int rc = pt_meter_read(m, &got);
    tap_ok(rc == PT_EIO && strstr(pt_errmsg(), "package-1"), "a counter that cannot be read any more: %s", pt_errmsg());
    pt_meter_close(m);
    putu(PC "intel-rapl:1/energy_uj", p1);
    /* a package without max_energy_range_uj whose counter goes backwards (a
     * wrap of a range not known, or a reset): the energy of that interval is
     * not known and counts nothing, never the counter's whole value */
    char keep[sizeof root];
    snprintf(keep, sizeof keep, "%s", root);
    if (snprintf(root, sizeof root, "%.500s-norange", keep) >= (int)sizeof root) /* a tree of its own: the others' stays */
        tap_diag("path too long: %s", keep);
    mkdir(root, 0755);
    setenv("PTRAIN_SYSFS_ROOT", root, 1);
    unsigned long long hi = 500000000000ull + rnd64() % 500000000000ull, back = rnd64() % 1000000ull;
    put(PC "intel-rapl:0/name", "package-0\n");
    putu(PC "intel-rapl:0/energy_uj", hi);
    pt_meter *q = NULL;
    pt_meter_open(&q, PT_METER_RAPL, 0, NULL, note, sizeof note);
    putu(PC "intel-rapl:0/energy_uj", back);
    double j1 = -1, j2 = -1;
    rc = pt_meter_read(q, &j1);
    unsigned long long inc = 1000 + rnd64() % 1000000ull;
    putu(PC "intel-rapl:0/energy_uj", back + inc);
    pt_meter_read(q, &j2);
    tap_ok(pt_meter_ncounters(q) == 1 && rc == PT_OK && j1 == 0 && fabs(j2 - inc * 1e-6) < 1e-9,
           "a RAPL counter without a range going back from %llu to %llu uJ counts 0 J (%.6f J), not its value; the "
           "next increment of %llu uJ counts (%.6f J)", hi, back, j1, inc, j2);
    pt_meter_close(q);
    rm_tree(root);
    snprintf(root, sizeof root, "%s", keep);
    setenv("PTRAIN_SYSFS_ROOT", root, 1);
}

static int rapl_denied_child(void)
{
    pt_meter *m = NULL;
    char note[1024];
    pt_meter_open(&m, PT_METER_RAPL, 0, NULL, note, sizeof note);
    int bad = pt_meter_ncounters(m) != 0 || !strstr(note, "not readable by this user");
    if (bad) printf("# as nobody: %d counters, note '%s'\n", pt_meter_ncounters(m), note);
    double j = -1;
    bad += pt_meter_read(m, &j) != PT_OK || j != 0;
    pt_meter_close(m);
    /* auto says so too: readable counters are what auto is about */
    pt_meter_open(&m, PT_METER_RAPL | PT_METER_NVML, 1, NULL, note, sizeof note);
    bad += pt_meter_ncounters(m) != 0 || !strstr(note, "not readable by this user");
    pt_meter_close(m);
    return bad;
}

static void test_rapl_denied(void)
{
    char p[1024];
    const char *z[] = {"intel-rapl:0", "intel-rapl:0:1", "intel-rapl:1"};
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s" PC "%s/energy_uj", root, z[i]);
        chmod(p, 0400);
    }
    int r = as_nobody(rapl_denied_child);
    if (r < 0) tap_ok(1, "# SKIP cannot switch to user nobody");
    else tap_ok(r == 0, "RAPL counters readable by root only: no counter, one note saying so, the meter reads 0");
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s" PC "%s/energy_uj", root, z[i]);
        chmod(p, 0644);
    }
}

/* ---- cpufreq ------------------------------------------------------------ */
#define CPU "/sys/devices/system/cpu/"
static void cpu_tree(int ncpu, const char *gov, int with_avail)
{
    for (int c = 0; c < ncpu; c++) {
        char rel[256];
#define A(attr, text) snprintf(rel, sizeof rel, CPU "cpu%d/cpufreq/" attr, c), put(rel, text)
        A("scaling_governor", gov);
        A("scaling_driver", "acpi-cpufreq\n");
        A("scaling_setspeed", !strcmp(gov, "userspace\n") ? "2000000\n" : "<unsupported>\n");
        A("scaling_cur_freq", "2000000\n");
        A("scaling_max_freq", "2400000\n");
        A("cpuinfo_min_freq", "800000\n");
        A("cpuinfo_max_freq", "2400000\n");
        if (with_avail) A("scaling_available_frequencies", "2400000 2000000 1600000 1200000 800000 \n");
        else {
            char p[1200];
            snprintf(p, sizeof p, "%s" CPU "cpu%d/cpufreq/scaling_available_frequencies", root, c);
            unlink(p);
        }
#undef A
    }
}

static void test_cpufreq(void)
{
    char rel[256];
    cpu_tree(4, "userspace\n", 1);
    int cpus[2] = {1, 3};
    pt_clock *c = NULL;
    int rc = pt_clock_open(&c, PT_CLOCK_CPUFREQ, NULL, cpus, 2, 0, 0, NULL);
    const double *f = NULL;
    int n = rc ? 0 : pt_clock_freqs(c, &f);
    char d[300] = "";
    pt_clock_describe(c, d, sizeof d);
    tap_ok(rc == PT_OK && n == 5 && f[0] == 800 && f[4] == 2400 && strstr(d, "scaling_setspeed"),
           "cpufreq, userspace governor: 5 clocks offered, set through scaling_setspeed (%s)", d);
    if (rc) return;
    /* random targets: each goes to the nearest offered clock, on every CPU of the rank */
    int ok = 1;
    long changes = 0;
    double last = 0;
    for (int i = 0; i < 30 && ok; i++) {
        double want = 700 + rndu() * 1900, best = f[0];
        for (int k = 1; k < n; k++)
            if (fabs(f[k] - want) < fabs(best - want)) best = f[k];
        if (best != last) changes++;
        last = best;
        rc = pt_clock_set(c, want);
        unsigned long long k1, k3, k0;
        snprintf(rel, sizeof rel, CPU "cpu1/cpufreq/scaling_setspeed");
        k1 = getu(rel);
        snprintf(rel, sizeof rel, CPU "cpu3/cpufreq/scaling_setspeed");
        k3 = getu(rel);
        snprintf(rel, sizeof rel, CPU "cpu0/cpufreq/scaling_setspeed");
        k0 = getu(rel);
        if (rc || k1 != (unsigned long long)(best * 1000) || k3 != k1 || k0 != 2000000 || pt_clock_current(c) != best) {
            ok = 0;
            tap_diag("set %.1f MHz: cpu1 %llu cpu3 %llu cpu0 %llu kHz, want %.0f (%s)", want, k1, k3, k0, best,
                     rc ? pt_errmsg() : "");
        }
    }
    tap_ok(ok, "30 random clocks: the nearest offered one written to the rank's CPUs 1 and 3 only (cpu0 untouched)");
    tap_ok(pt_clock_changes(c) == changes, "a clock already set is not written again (%ld changes, want %ld)",
           pt_clock_changes(c), changes);
    pt_clock_close(c);
    snprintf(rel, sizeof rel, CPU "cpu1/cpufreq/scaling_setspeed");
    unsigned long long back = getu(rel);
    tap_ok(back == 2000000, "closing writes the speed found at open back (%llu kHz)", back);

    /* another governor: scaling_max_freq, the allowed range, the 8-step list without available frequencies */
    cpu_tree(4, "schedutil\n", 0);
    rc = pt_clock_open(&c, PT_CLOCK_CPUFREQ, NULL, cpus, 2, 1000, 2000, NULL);
    n = rc ? 0 : pt_clock_freqs(c, &f);
    pt_clock_describe(c, d, sizeof d);
    int inrange = n > 0;
    for (int k = 0; k < n; k++) inrange &= f[k] >= 1000 && f[k] <= 2000;
    tap_ok(rc == PT_OK && inrange && n == 5 && strstr(d, "scaling_max_freq"),
           "cpufreq, schedutil without a frequency list: 800-2400 MHz in 8 steps, 5 inside the allowed 1000-2000 "
           "MHz, set through scaling_max_freq (%s)", d);
    if (!rc) {
        pt_clock_set(c, 5000);
        snprintf(rel, sizeof rel, CPU "cpu3/cpufreq/scaling_max_freq");
        unsigned long long top = getu(rel);
        tap_ok(top == (unsigned long long)llround(f[n - 1] * 1000), "a clock above the range is the range's top (%llu kHz)",
               top);
        pt_clock_set(c, f[0]);
        pt_clock_set(c, 1.7e308);
        top = getu(rel);
        tap_ok(top == (unsigned long long)llround(f[n - 1] * 1000), "1.7e308 MHz is the range's top too (%llu kHz), "
               "not its bottom", top);
        pt_clock_close(c);
        tap_ok(getu(rel) == 2400000, "closing restores scaling_max_freq (%llu kHz)", getu(rel));
    }
    rc = pt_clock_open(&c, PT_CLOCK_CPUFREQ, NULL, cpus, 2, 3000, 4000, NULL);
    tap_ok(rc == PT_EINVAL && strstr(pt_errmsg(), "allowed range 3000-4000"), "no clock in the allowed range: %s",
           pt_errmsg());
    int none[1] = {77};
    rc = pt_clock_open(&c, PT_CLOCK_CPUFREQ, NULL, none, 1, 0, 0, NULL);
    tap_ok(rc == PT_EUNSUPP && strstr(pt_errmsg(), "no frequency scaling"), "CPUs without cpufreq: %s", pt_errmsg());
}

/* In a child (the restore ends a process: nothing is written after it):
 * two controllers on CPUs {0, 1} (scaling_setspeed) and {2, 3}
 * (scaling_max_freq, another governor), random clocks set, then
 * pt_clock_restore_emergency as a handler would call it. */
static int emergency_child(void)
{
    char rel[256];
    int a[2] = {0, 1}, b[2] = {2, 3}, bad = 0;
    pt_clock *c1 = NULL, *c2 = NULL;
    if (pt_clock_open(&c1, PT_CLOCK_CPUFREQ, NULL, a, 2, 0, 0, NULL) ||
        pt_clock_open(&c2, PT_CLOCK_CPUFREQ, NULL, b, 2, 0, 0, NULL)) {
        printf("# open: %s\n", pt_errmsg());
        return 1;
    }
    pt_clock_set(c1, 800 + rndu() * 400);
    pt_clock_set(c2, 800 + rndu() * 400);
    int failed = pt_clock_restore_emergency();
    unsigned long long v[4];
    for (int i = 0; i < 4; i++) {
        snprintf(rel, sizeof rel, CPU "cpu%d/cpufreq/%s", i, i < 2 ? "scaling_setspeed" : "scaling_max_freq");
        v[i] = getu(rel);
    }
    if (failed || v[0] != 2000000 || v[1] != 2000000 || v[2] != 2400000 || v[3] != 2400000) {
        printf("# restored: %d failed; %llu %llu %llu %llu kHz\n", failed, v[0], v[1], v[2], v[3]);
        bad++;
    }
    /* nothing is written after it, and closing does not free what a handler may read */
    pt_clock_set(c1, 800);
    snprintf(rel, sizeof rel, CPU "cpu0/cpufreq/scaling_setspeed");
    if (getu(rel) != 2000000) {
        printf("# a set after the restore wrote %llu kHz\n", getu(rel));
        bad++;
    }
    /* a second restore (the launcher's SIGTERM after the heartbeat's abort
     * restored, with a SIGKILL to follow) writes nothing: the file another
     * writer changed since keeps its text */
    put(rel, "1700000");
    failed = pt_clock_restore_emergency();
    if (failed || getu(rel) != 1700000) {
        printf("# a second restore: %d failed, the file now %llu kHz (1700000 put there after the first)\n", failed,
               getu(rel));
        bad++;
    }
    pt_clock_close(c1);
    pt_clock_close(c2);
    return bad;
}

static void test_cpufreq_emergency(void)
{
    cpu_tree(4, "userspace\n", 1);
    char rel[256];
    for (int c = 2; c < 4; c++) { /* CPUs 2 and 3 under another governor: scaling_max_freq */
        snprintf(rel, sizeof rel, CPU "cpu%d/cpufreq/scaling_governor", c);
        put(rel, "schedutil\n");
    }
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) _exit(emergency_child());
    int st = 0;
    waitpid(pid, &st, 0);
    tap_ok(WIFEXITED(st) && WEXITSTATUS(st) == 0,
           "pt_clock_restore_emergency writes back the speed and the cap two controllers found at open, and nothing "
           "is written after it, nor by a second call (status %d)", st);
}

static int cpufreq_denied_child(void)
{
    int cpus[1] = {0};
    pt_clock *c = NULL;
    int rc = pt_clock_open(&c, PT_CLOCK_CPUFREQ, NULL, cpus, 1, 0, 0, NULL);
    if (rc != PT_EUNSUPP || !strstr(pt_errmsg(), "cannot write")) {
        printf("# as nobody: status %d: %s\n", rc, pt_errmsg());
        pt_clock_close(c);
        return 1;
    }
    /* auto without a GPU falls back to cpufreq and says why it cannot */
    rc = pt_clock_open(&c, PT_CLOCK_NONE, NULL, cpus, 1, 0, 0, NULL);
    return rc != PT_EUNSUPP;
}

static void test_cpufreq_denied(void)
{
    cpu_tree(1, "schedutil\n", 1);
    char p[1024];
    snprintf(p, sizeof p, "%s" CPU "cpu0/cpufreq/scaling_max_freq", root);
    chmod(p, 0444);
    int r = as_nobody(cpufreq_denied_child);
    if (r < 0) tap_ok(1, "# SKIP cannot switch to user nobody");
    else tap_ok(r == 0, "scaling_max_freq not writable by this user: PT_EUNSUPP, one line (so the run goes on at the "
                        "default clocks)");
    chmod(p, 0644);
}

/* Frequency files that hold no cpufreq frequency (tests/fuzz/regress/energy_sysfs/):
 * "-5" is not 2^64 - 5 kHz, and nothing above the kernel's unsigned int kHz
 * is offered, so every clock set is written as the kHz it names. */
static void test_cpufreq_bad_numbers(void)
{
    char rel[256];
    int cpus[1] = {0};
    static const struct { const char *avail, *max; int n; double top; } cases[] = {
        {"-5 800000", "2400000", 8, 2400},                /* a sign: the list ends there, min..max */
        {"800000 4294967296 1200000", "2400000", 1, 800}, /* above 2^32 - 1 kHz: the list ends there */
        {NULL, "18446744073709551615", 0, 0},             /* no list, a max no kernel writes: none */
    };
    for (int i = 0; i < 3; i++) {
        cpu_tree(1, "userspace\n", cases[i].avail != NULL);
        if (cases[i].avail) put(CPU "cpu0/cpufreq/scaling_available_frequencies", cases[i].avail);
        put(CPU "cpu0/cpufreq/cpuinfo_max_freq", cases[i].max);
        pt_clock *c = NULL;
        int rc = pt_clock_open(&c, PT_CLOCK_CPUFREQ, NULL, cpus, 1, 0, 0, NULL);
        const double *f = NULL;
        int n = rc ? 0 : pt_clock_freqs(c, &f);
        unsigned long long set = 0;
        if (!rc) {
            pt_clock_set(c, 1e9);
            snprintf(rel, sizeof rel, CPU "cpu0/cpufreq/scaling_setspeed");
            set = getu(rel);
        }
        if (cases[i].n)
            tap_ok(rc == PT_OK && n == cases[i].n && f[n - 1] == cases[i].top && set == (unsigned long long)(cases[i].top * 1000),
                   "cpufreq list '%.30s', max '%.24s': %d clocks up to %g MHz, the top written as %llu kHz (want %d up "
                   "to %g)", cases[i].avail, cases[i].max, n, n ? f[n - 1] : 0, set, cases[i].n, cases[i].top);
        else
            tap_ok(rc == PT_EUNSUPP && strstr(pt_errmsg(), "lists no frequencies"),
                   "cpufreq max '%.24s' without a list: no clocks (%s)", cases[i].max, rc ? pt_errmsg() : "opened");
        pt_clock_close(c);
    }
}

/* ---- NVML --------------------------------------------------------------- */
static char nvdir[600];
static void nv_put(const char *name, const char *text)
{
    char p[900];
    snprintf(p, sizeof p, "%s/%s", nvdir, name);
    FILE *f = fopen(p, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}
static void nv_rm(const char *name)
{
    char p[900];
    snprintf(p, sizeof p, "%s/%s", nvdir, name);
    unlink(p);
}
/* The fake's call log since the last call (then emptied). */
static void nv_log(char *out, size_t len)
{
    char p[900];
    snprintf(p, sizeof p, "%s/log", nvdir);
    FILE *f = fopen(p, "r");
    out[0] = '\0';
    if (f) {
        size_t n = fread(out, 1, len - 1, f);
        out[n] = '\0';
        fclose(f);
    }
    unlink(p);
    for (char *c = out; *c; c++)
        if (*c == '\n') *c = ';';
}

static void test_nvml(const char *lib)
{
    char log[4096], note[1024], t[64];
    setenv(PT_NVML_ENV, lib, 1);
    nv_put("count", "2\n");
    unsigned long long e0 = rnd64() % 1000000000ull, e1 = rnd64() % 1000000000ull;
    snprintf(t, sizeof t, "%llu\n", e0);
    nv_put("energy.0", t);
    snprintf(t, sizeof t, "%llu\n", e1);
    nv_put("energy.1", t);
    pt_meter *m = NULL;
    const char *names[] = {"1", "0000:08:00.0", "00000000:08:00.0", "GPU-fake-1"};
    for (int k = 0; k < 4; k++) {
        pt_meter_open(&m, PT_METER_NVML, 0, names[k], note, sizeof note);
        const pt_meter_counter *c = pt_meter_counter_at(m, 0);
        unsigned long long d = rnd64() % 100000000ull;
        e1 += d;
        snprintf(t, sizeof t, "%llu\n", e1);
        nv_put("energy.1", t);
        double j = 0;
        int rc = pt_meter_read(m, &j);
        tap_ok(pt_meter_ncounters(m) == 1 && c && !strcmp(c->key, "nvml:0000:08:00.0") && rc == PT_OK &&
                   fabs(j - d * 1e-3) < 1e-6,
               "NVML device '%s': counter %s, %.3f J read for an increment of %.3f J", names[k], c ? c->key : "none",
               j, d * 1e-3);
        pt_meter_close(m);
    }
    nv_log(log, sizeof log);
    tap_ok(!strcmp(log, "init;shutdown;init;shutdown;init;shutdown;init;shutdown;"),
           "every NVML initialisation is shut down (%s)", log);
    /* a reset (driver reload): the energy since */
    pt_meter_open(&m, PT_METER_NVML, 0, "0", note, sizeof note);
    nv_put("energy.0", "250\n");
    double j = 0;
    pt_meter_read(m, &j);
    tap_ok(fabs(j - 0.25) < 1e-9, "a counter that goes back to 250 mJ (a driver reload) adds 0.250 J (%.3f)", j);
    pt_meter_close(m);
    nv_put("deny", "energy\n");
    pt_meter_open(&m, PT_METER_NVML, 0, "0", note, sizeof note);
    tap_ok(pt_meter_ncounters(m) == 0 && strstr(note, "Insufficient Permissions"),
           "a counter NVML refuses: no counter, one note (%s)", note);
    pt_meter_close(m);
    nv_rm("deny");
    pt_meter_open(&m, PT_METER_NVML, 0, "7", note, sizeof note);
    tap_ok(pt_meter_ncounters(m) == 0 && strstr(note, "no device '7'"), "a device NVML does not have: %s", note);
    pt_meter_close(m);
    pt_meter_open(&m, PT_METER_NVML, 0, "gpu0", note, sizeof note);
    tap_ok(pt_meter_ncounters(m) == 0 && strstr(note, "'gpu0' is not an index"), "a bad device name: %s", note);
    pt_meter_close(m);
    pt_meter_open(&m, PT_METER_NVML | PT_METER_RAPL, 1, NULL, note, sizeof note);
    tap_ok(pt_meter_ncounters(m) == 3, "auto with no GPU named: the RAPL counters only (%d)", pt_meter_ncounters(m));
    pt_meter_close(m);
    setenv(PT_NVML_ENV, "/nonexistent/libnvidia-ml.so.1", 1);
    pt_meter_open(&m, PT_METER_NVML, 1, "0", note, sizeof note);
    tap_ok(pt_meter_ncounters(m) == 0 && note[0] == '\0', "auto without an NVML library: silently none");
    pt_meter_close(m);
    pt_meter_open(&m, PT_METER_NVML, 0, "0", note, sizeof note);
    tap_ok(pt_meter_ncounters(m) == 0 && strstr(note, "cannot load /nonexistent/libnvidia-ml.so.1"),
           "nvml asked for without a library: one note (%s)", note);
    pt_meter_close(m);
    setenv(PT_NVML_ENV, lib, 1);
    nv_log(log, sizeof log);

    /* clocks: not root, restricted */
    pt_clock *c = NULL;
    int rc = pt_clock_open(&c, PT_CLOCK_NVML, "1", NULL, 0, 0, 0, NULL);
    tap_ok(rc == PT_EUNSUPP && strstr(pt_errmsg(), "neither locked clocks"),
           "NVML clocks as a user with the restriction on: refused in one line (%s)", pt_errmsg());
    nv_log(log, sizeof log);
    tap_ok(!strstr(log, "app") && !strstr(log, "locked"), "... and nothing was changed (%s)", log);
    /* the restriction lifted (what the plugin does): application clocks */
    nv_put("restricted.1", "0\n");
    rc = pt_clock_open(&c, PT_CLOCK_NONE, "1", NULL, 0, 1000, 0, NULL);
    const double *f;
    int n = rc ? 0 : pt_clock_freqs(c, &f);
    char d[300] = "";
    pt_clock_describe(c, d, sizeof d);
    tap_ok(rc == PT_OK && pt_clock_kind(c) == PT_CLOCK_NVML && n == 4 && f[0] == 1200 && strstr(d, "application"),
           "auto with the restriction lifted: NVML application clocks, 4 clocks >= 1000 MHz (%s)", d);
    if (!rc) {
        nv_log(log, sizeof log);
        pt_clock_set(c, 1490);
        pt_clock_set(c, 1510);
        pt_clock_set(c, 1790);
        nv_log(log, sizeof log);
        tap_ok(!strcmp(log, "app 1 2619 1500;app 1 2619 1800;"),
               "1490, 1510, 1790 MHz: two changes at the top memory clock (%s)", log);
        pt_clock_close(c);
        nv_log(log, sizeof log);
        tap_ok(!strcmp(log, "reset_app 1;shutdown;"), "closing resets the application clocks (%s)", log);
    }
    /* as root: locked clocks */
    nv_put("root", "1\n");
    rc = pt_clock_open(&c, PT_CLOCK_NVML, "0", NULL, 0, 0, 0, NULL);
    if (!rc) {
        pt_clock_set(c, 900);
        pt_clock_close(c);
    }
    nv_log(log, sizeof log);
    tap_ok(rc == PT_OK && !strcmp(log, "init;locked 0 1980 1980;reset_locked 0;locked 0 900 900;reset_locked 0;shutdown;"),
           "as root: locked clocks (a test write at the top clock, then 900 MHz), reset on close (%s)", log);
    /* the restriction, as the plugin handles it */
    pt_nvml *nv = NULL;
    pt_nvml_dev dev;
    int r = -1;
    rc = pt_nvml_open(&nv);
    if (!rc) rc = pt_nvml_device(nv, "0000:07:00.0", &dev, NULL, 0);
    if (!rc) rc = pt_nvml_get_restriction(nv, dev, &r);
    tap_ok(rc == PT_OK && r == 1, "GPU 0's application clocks are restricted (%d)", r);
    if (!rc) rc = pt_nvml_set_restriction(nv, dev, 0);
    if (!rc) rc = pt_nvml_get_restriction(nv, dev, &r);
    tap_ok(rc == PT_OK && r == 0, "root lifts it (%d)", r);
    nv_rm("root");
    rc = pt_nvml_set_restriction(nv, dev, 1);
    tap_ok(rc == PT_EUNSUPP && pt_nvml_denied(nv), "a user cannot set it back: %s", pt_errmsg());
    pt_nvml_close(nv);
    nv_put("restricted.0", "1\n");
    nv_log(log, sizeof log);
}

/* ---- dry ---------------------------------------------------------------- */
static void test_dry(const char *tmp)
{
    char log[700], link[700];
    snprintf(log, sizeof log, "%s/dry.log", tmp);
    snprintf(link, sizeof link, "%s/dry.link", tmp);
    int kind;
    const char *lp;
    char spec[800];
    snprintf(spec, sizeof spec, "dry:%s", log);
    tap_ok(pt_clock_parse(spec, &kind, &lp) == PT_OK && kind == PT_CLOCK_DRY && !strcmp(lp, log),
           "dry:FILE parses to the dry controller and its log");
    tap_ok(pt_clock_parse("turbo", &kind, &lp) == PT_EINVAL && strstr(pt_errmsg(), "'turbo'"), "a bad controller: %s",
           pt_errmsg());
    int none[1] = {77};
    pt_clock *c = NULL;
    int rc = pt_clock_open(&c, PT_CLOCK_DRY, NULL, none, 1, 1100, 1800, log);
    const double *f;
    int n = rc ? 0 : pt_clock_freqs(c, &f);
    tap_ok(rc == PT_OK && n == 8 && f[0] == 1100 && f[7] == 1800, "dry with nothing readable: 8 clocks over the range");
    if (!rc) {
        pt_clock_set(c, 1100);
        pt_clock_set(c, 1100);
        pt_clock_set(c, 1800);
        pt_clock_close(c);
    }
    FILE *fp = fopen(log, "r");
    char text[200] = "";
    if (fp) {
        size_t k = fread(text, 1, sizeof text - 1, fp);
        text[k] = '\0';
        fclose(fp);
    }
    tap_ok(!strcmp(text, "1100\n1800\n"), "the dry log holds each change once");
    if (symlink(log, link) == 0) {
        rc = pt_clock_open(&c, PT_CLOCK_DRY, NULL, none, 1, 0, 0, link);
        tap_ok(rc == PT_EIO, "a dry log that is a symbolic link is refused: %s", pt_errmsg());
    }
}

/* ---- the probe ---------------------------------------------------------- */
static void test_probe(const char *lib)
{
    setenv(PT_NVML_ENV, lib, 1);
    nv_put("count", "1\n");
    nv_put("energy.0", "123456\n");
    cpu_tree(2, "userspace\n", 1);
    char buf[8192];
    int n = pt_energy_probe(buf, sizeof buf);
    tap_ok(n == 4 && strstr(buf, "GPU0 0000:07:00.0 Fake GPU 0: energy counter readable (123.456 J") &&
               strstr(buf, "intel-rapl:0 package-0: readable") && strstr(buf, "intel-rapl:0:0 core: readable") &&
               strstr(buf, "(not summed") && strstr(buf, "scaling_setspeed: writable") &&
               strstr(buf, "--energy auto: nvml (the rank's GPU) + rapl"),
           "the probe lists the GPU's counter, the RAPL zones (core not summed) and cpufreq (%d sources)", n);
    if (n != 4) tap_diag("%s", buf);
}

/* ---- profiles and plans ------------------------------------------------- */
static void test_profiles(const char *tmp)
{
    char path[700], bad[700];
    snprintf(path, sizeof path, "%s/p.json", tmp);
    snprintf(bad, sizeof bad, "%s/bad.json", tmp);
    int pp = 2 + (int)(rnd64() % 3), v = 1, m = pp * (1 + (int)(rnd64() % 3));
    pt_energy_profile pr = {0}, back = {0};
    int nt = 2 * pp * v;
    pr.ntypes = nt;
    pr.nchoices = calloc((size_t)nt, sizeof *pr.nchoices);
    pr.choice = calloc((size_t)nt, sizeof *pr.choice);
    pr.idle_w = 5 + rndu() * 50;
    for (int t = 0; t < nt; t++) {
        pr.nchoices[t] = 2 + (int)(rnd64() % 6);
        pr.choice[t] = calloc((size_t)pr.nchoices[t], sizeof **pr.choice);
        for (int k = 0; k < pr.nchoices[t]; k++)
            pr.choice[t][k] = (pt_energy_choice){800 + 100 * k, 1e-3 + rndu() * 1e-2, rndu() * 5};
    }
    pt_energy_meta meta = {PT_SCHED_1F1B, pp, v, m, "cpu", "measured: test", "pp=2"}, mb;
    int rc = pt_energy_profile_save(path, &pr, &meta);
    if (!rc) rc = pt_energy_profile_load(path, &back, &mb);
    int same = !rc && back.ntypes == nt && fabs(back.idle_w - pr.idle_w) < 1e-9 * pr.idle_w && !back.modelled &&
               mb.pp == pp && mb.m == m && mb.schedule == PT_SCHED_1F1B && !strcmp(mb.device, "cpu");
    for (int t = 0; same && t < nt; t++) {
        same &= back.nchoices[t] == pr.nchoices[t];
        for (int k = 0; same && k < pr.nchoices[t]; k++)
            same &= fabs(back.choice[t][k].time_s - pr.choice[t][k].time_s) <= 1e-9 * pr.choice[t][k].time_s &&
                    fabs(back.choice[t][k].energy_j - pr.choice[t][k].energy_j) <= 1e-9 * (pr.choice[t][k].energy_j + 1e-12) &&
                    back.choice[t][k].freq_mhz == pr.choice[t][k].freq_mhz;
    }
    tap_ok(same, "a random profile (pp %d, %d types) is read back as written (%s)", pp, nt, rc ? pt_errmsg() : "");
    /* a plan of its intrinsic point */
    pt_energy_dag dag;
    pt_energy_frontier fr;
    rc = pt_energy_dag_build(PT_SCHED_1F1B, pp, m, v, 1e-4, &dag);
    if (!rc) rc = pt_energy_frontier_compute(&dag, &pr, 0, 0, &fr);
    pt_energy_plan plan = {0};
    char plan_path[700];
    snprintf(plan_path, sizeof plan_path, "%s/plan.json", tmp);
    if (!rc) rc = pt_energy_plan_save(plan_path, &dag, &pr, &fr.p[fr.intrinsic], &fr, "intrinsic", &meta);
    if (!rc) rc = pt_energy_plan_load(plan_path, &plan);
    int match = !rc && plan.n == dag.n && !strcmp(plan.point, "intrinsic") && plan.meta.m == m &&
                fabs(plan.time_s - fr.p[fr.intrinsic].time_s) < 1e-9 * plan.time_s;
    for (int i = 0; match && i < dag.n; i++) {
        const pt_energy_instr *x = &dag.in[i];
        int k = pt_energy_instr_index(pp, v, m, x->stage, x->mb, x->bwd);
        match &= k == i && plan.freq[k] == pr.choice[x->type][fr.p[fr.intrinsic].choice[i]].freq_mhz;
    }
    tap_ok(match, "the intrinsic point's plan is read back, every instruction's clock in place (%d instructions%s%s)",
           dag.n, rc ? ": " : "", rc ? pt_errmsg() : "");
    pt_energy_plan_free(&plan);
    if (!rc) pt_energy_frontier_free(&fr);
    pt_energy_dag_free(&dag);
    pt_energy_profile_free(&back);

    /* bad files: one line naming the problem */
    struct { const char *text, *must; } cases[] = {
        {"{\"format\": \"something\", \"version\": 1}", "\"format\" is not \"ptrain-energy-profile\""},
        {"{\"format\": \"ptrain-energy-profile\", \"version\": 2}", "version is not 1"},
        {"not json", "not JSON"},
        {"{\"format\": \"ptrain-energy-profile\", \"version\": 1, \"schedule\": \"1f1b\", \"pp\": 1, \"virtual_stages\": 1,"
         " \"microbatches\": 1, \"modelled\": false, \"idle_w\": 1, \"types\": []}", "must list 2 instruction types"},
        {"{\"format\": \"ptrain-energy-profile\", \"version\": 1, \"schedule\": \"1f1b\", \"pp\": 1, \"virtual_stages\": 1,"
         " \"microbatches\": 1, \"modelled\": false, \"idle_w\": 1, \"types\": [{\"type\": 0, \"choices\": [{\"freq_mhz\": 1,"
         " \"time_s\": 1, \"energy_j\": 1}]}, {\"type\": 0, \"choices\": [{\"freq_mhz\": 1, \"time_s\": 1, \"energy_j\": 1}]}]}",
         "type 0 is given twice"},
        {"{\"format\": \"ptrain-energy-profile\", \"version\": 1, \"schedule\": \"1f1b\", \"pp\": 1, \"virtual_stages\": 1,"
         " \"microbatches\": 1, \"modelled\": false, \"idle_w\": 1, \"types\": [{\"type\": 0, \"choices\": [{\"freq_mhz\": 1,"
         " \"time_s\": 1, \"energy_j\": -1}]}, {\"type\": 1, \"choices\": [{\"freq_mhz\": 1, \"time_s\": 1, \"energy_j\": 1}]}]}",
         "type 0 choice 0: \"energy_j\" is not a number >= 0"},
        {"{\"format\": \"ptrain-energy-profile\", \"version\": 1, \"schedule\": \"zigzag\"}", "\"schedule\" is not one of"},
        {"{\"format\": \"ptrain-energy-profile\", \"version\": 1, \"schedule\": \"1f1b\", \"pp\": 1, \"virtual_stages\": 1,"
         " \"microbatches\": 1, \"modelled\": false, \"idle_w\": 1, \"types\": [{\"type\": 0, \"choices\": [{\"freq_mhz\": 1,"
         " \"time_s\": 1, \"energy_j\": 1}]}, {\"type\": 1, \"choices\": [{\"freq_mhz\": 1.7e308, \"time_s\": 1, \"energy_j\": 1}]}]}",
         "type 1 choice 0: \"freq_mhz\" is not a number > 0 and <= 100000"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        FILE *fp = fopen(bad, "w");
        if (fp) {
            fputs(cases[i].text, fp);
            fclose(fp);
        }
        rc = pt_energy_profile_load(bad, &back, &mb);
        tap_ok(rc == PT_EFORMAT && strstr(pt_errmsg(), cases[i].must) && strstr(pt_errmsg(), bad),
               "bad profile %zu refused: %s", i, pt_errmsg());
    }
    /* a plan whose clock is 1.7e308 MHz (the nearest offered clock of that is
     * no clock: it picked the lowest): refused in one line */
    for (int huge = 0; huge < 2; huge++) {
        FILE *fp = fopen(bad, "w");
        if (!fp) break;
        double fz = huge ? 1.7e308 : 100000.5;
        fprintf(fp, "{\"format\": \"ptrain-energy-plan\", \"version\": 1, \"point\": \"intrinsic\", \"modelled\": true,"
                " \"schedule\": \"1f1b\", \"pp\": 1, \"virtual_stages\": 1, \"microbatches\": 1, \"time_s\": 1, "
                "\"energy_j\": 1, \"max_clock\": {\"time_s\": 1, \"energy_j\": 1}, \"instructions\": ["
                "{\"rank\": 0, \"chunk\": 0, \"mb\": 0, \"bwd\": false, \"freq_mhz\": 1500},"
                "{\"rank\": 0, \"chunk\": 0, \"mb\": 0, \"bwd\": true, \"freq_mhz\": %.17g}]}", fz);
        fclose(fp);
        pt_energy_plan pl;
        rc = pt_energy_plan_load(bad, &pl);
        tap_ok(rc == PT_EFORMAT && strstr(pt_errmsg(), "instruction 1: \"freq_mhz\" is not a number > 0 and <= 100000") &&
                   strstr(pt_errmsg(), bad),
               "a plan with a clock of %g MHz is refused: %s", fz, pt_errmsg());
        if (rc == PT_OK) pt_energy_plan_free(&pl);
    }
    /* the top allowed clock is read */
    FILE *fp = fopen(bad, "w");
    if (fp) {
        fputs("{\"format\": \"ptrain-energy-plan\", \"version\": 1, \"point\": \"intrinsic\", \"modelled\": true,"
              " \"schedule\": \"1f1b\", \"pp\": 1, \"virtual_stages\": 1, \"microbatches\": 1, \"time_s\": 1, "
              "\"energy_j\": 1, \"max_clock\": {\"time_s\": 1, \"energy_j\": 1}, \"instructions\": ["
              "{\"rank\": 0, \"chunk\": 0, \"mb\": 0, \"bwd\": false, \"freq_mhz\": 0.5},"
              "{\"rank\": 0, \"chunk\": 0, \"mb\": 0, \"bwd\": true, \"freq_mhz\": 100000}]}", fp);
        fclose(fp);
    }
    pt_energy_plan pl;
    rc = pt_energy_plan_load(bad, &pl);
    tap_ok(rc == PT_OK && pl.n == 2 && pl.freq[1] == 100000, "a plan with clocks of 0.5 and 100000 MHz is read (%s)",
           rc ? pt_errmsg() : "ok");
    if (rc == PT_OK) pt_energy_plan_free(&pl);
    char link[700];
    snprintf(link, sizeof link, "%s/link.json", tmp);
    if (symlink(path, link) == 0) {
        rc = pt_energy_profile_save(link, &pr, &meta);
        struct stat st;
        tap_ok(rc != PT_OK && lstat(link, &st) == 0 && S_ISLNK(st.st_mode), "a profile is not written through a "
               "symbolic link: %s", pt_errmsg());
    }
    pt_energy_profile_free(&pr);
}

/* ---- allowed clock ranges ----------------------------------------------- */
static void test_ranges(void)
{
    int ok = 1;
    for (int i = 0; i < 200 && ok; i++) {
        /* random plain decimals in 1..100000, up to 3 decimals */
        int da = (int)(rnd64() % 4), db = (int)(rnd64() % 4);
        double a = 1 + rndu() * 99999, b = a + rndu() * (100000 - a);
        char ta[40], tb[40], text[90];
        snprintf(ta, sizeof ta, "%.*f", da, a);
        snprintf(tb, sizeof tb, "%.*f", db, b);
        double wa = strtod(ta, NULL), wb = strtod(tb, NULL);
        if (wa < 1 || wb < wa || wb > 100000) continue; /* rounding crossed an end */
        snprintf(text, sizeof text, "%s-%s", ta, tb);
        double r[2] = {0, 0};
        int rc = pt_clock_parse_range(text, r);
        if (rc != PT_OK || fabs(r[0] - wa) > 1e-9 * wa || fabs(r[1] - wb) > 1e-9 * wb) {
            ok = 0;
            tap_diag("'%s': rc %d, %.17g-%.17g (%s)", text, rc, r[0], r[1], pt_errmsg());
        }
    }
    tap_ok(ok, "200 random plain-decimal ranges in 1..100000 MHz are read as strtod reads them");
    static const char *const bad[] = {"0x400-0x800", "1e-300-2000", "1100-1.98e3", "0.5-2000", "0-2000", "1100-100001",
                                      "2000-1100", " 1100-1980", "1100-1980 ", "+1100-1980", "1100--1980", "inf-inf",
                                      "nan-1", "1100-", "-1980", "1100.-1980", ".5-1980", "1100", "", "1100-1980-2000"};
    ok = 1;
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        double r[2] = {-7, -7};
        int rc = pt_clock_parse_range(bad[i], r);
        char want[80];
        snprintf(want, sizeof want, "'%s' is not a clock range (valid: MIN-MAX in MHz, plain decimals", bad[i]);
        if (rc != PT_EINVAL || !strstr(pt_errmsg(), want) || strchr(pt_errmsg(), '\n') || r[0] != -7) {
            ok = 0;
            tap_diag("'%s': rc %d: %s", bad[i], rc, pt_errmsg());
        }
    }
    tap_ok(ok, "hex, exponents, signs, spaces, inf, nan, 0.5, above 100000 and MAX < MIN are refused in one line, "
           "nothing stored");
}

/* ---- files over the loaders' limit -------------------------------------- */
enum { LIMIT = 64 << 20 };

/* In a child under a 2 GiB address-space limit (not under ASan, which
 * reserves terabytes): load path as a plan (plan 1) or a profile; the exit
 * status is 0 when it was refused with PT_EFORMAT and one line naming the
 * file, `size` and the limit, 2 when it was not refused, 3 for another error. */
static int big_child(const char *path, long long size, int plan)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
#ifndef __SANITIZE_ADDRESS__
        struct rlimit rl = {2ull << 30, 2ull << 30};
        setrlimit(RLIMIT_AS, &rl);
#endif
        int rc;
        if (plan) {
            pt_energy_plan p;
            rc = pt_energy_plan_load(path, &p);
        } else {
            pt_energy_profile pr;
            pt_energy_meta m;
            rc = pt_energy_profile_load(path, &pr, &m);
        }
        char sz[64], lim[64];
        snprintf(sz, sizeof sz, "%lld bytes", size);
        snprintf(lim, sizeof lim, "%d bytes", (int)LIMIT);
        printf("# %s: %s\n", plan ? "plan" : "profile", pt_errmsg());
        fflush(stdout);
        if (rc == PT_OK) _exit(2);
        _exit(rc == PT_EFORMAT && strstr(pt_errmsg(), path) && strstr(pt_errmsg(), sz) && strstr(pt_errmsg(), lim) &&
                      !strchr(pt_errmsg(), '\n')
                  ? 0
                  : 3);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void test_big_files(const char *tmp)
{
    char path[700];
    snprintf(path, sizeof path, "%s/big.json", tmp);
    /* 8 GiB of nothing, and one byte over the limit */
    long long sizes[2] = {8ll << 30, (long long)LIMIT + 1};
    for (int i = 0; i < 2; i++) {
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int made = fd >= 0 && ftruncate(fd, sizes[i]) == 0;
        if (fd >= 0) close(fd);
        if (!made) {
            tap_ok(0, "a sparse file of %lld bytes can be made in %s", sizes[i], tmp);
            continue;
        }
        int a = big_child(path, sizes[i], 1), b = big_child(path, sizes[i], 0);
        tap_ok(a == 0 && b == 0, "a plan and a profile of %lld bytes (limit %d) are refused from their size in one line "
               "naming the file, its size and the limit (status %d, %d)", sizes[i], (int)LIMIT, a, b);
    }
    /* exactly the limit is read (and is then not JSON) */
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
        if (ftruncate(fd, LIMIT) != 0) tap_diag("ftruncate: %s", strerror(errno));
        close(fd);
    }
    pt_energy_plan p;
    int rc = pt_energy_plan_load(path, &p);
    tap_ok(rc == PT_EFORMAT && strstr(pt_errmsg(), "not JSON"), "a plan of exactly %d bytes is read (%s)", (int)LIMIT,
           pt_errmsg());
    unlink(path);
}

int main(void)
{
    const char *s = getenv("PTRAIN_TEST_SEED");
    rng = s ? strtoull(s, NULL, 10) : (uint64_t)time(NULL);
    tap_diag("seed %llu (PTRAIN_TEST_SEED reproduces)", (unsigned long long)rng);
    char tmp[] = "/tmp/ptrain-energy.XXXXXX";
    if (!mkdtemp(tmp)) {
        tap_skip_all("mkdtemp failed");
        return 0;
    }
    chmod(tmp, 0755);
    snprintf(root, sizeof root, "%s/root", tmp);
    snprintf(nvdir, sizeof nvdir, "%s/nvml", tmp);
    mkdir(root, 0755);
    mkdir(nvdir, 0755);
    setenv("PTRAIN_SYSFS_ROOT", root, 1);
    setenv("FAKE_NVML_DIR", nvdir, 1);
    const char *bd = getenv("top_builddir");
    char lib[1024];
    snprintf(lib, sizeof lib, "%s/tests/energy/.libs/fake_nvml.so", bd ? bd : ".");

    test_delta();
    test_rapl();
    test_rapl_denied();
    test_cpufreq();
    test_cpufreq_emergency();
    test_cpufreq_denied();
    test_cpufreq_bad_numbers();
    if (access(lib, R_OK) == 0) {
        test_nvml(lib);
        test_probe(lib);
    } else {
        tap_ok(0, "the fake NVML %s is built", lib);
    }
    test_dry(tmp);
    test_profiles(tmp);
    test_ranges();
    test_big_files(tmp);
    rm_tree(tmp);
    return tap_done();
}
