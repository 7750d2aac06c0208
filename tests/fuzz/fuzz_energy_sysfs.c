/* SPDX-License-Identifier: MIT */
/* libFuzzer target: lib/energy's readers of sysfs -- the RAPL energy
 * counters (lib/energy/meter.c), the cpufreq clock controller
 * (lib/energy/clock.c) and the node report (lib/energy/probe.c) -- on a
 * fake tree under $PTRAIN_SYSFS_ROOT built from the input.
 *
 * The input is the contents of the files below, in this order, separated
 * by "\n--\n" (fewer parts: the rest are absent).  A part of exactly one
 * byte 0x01 makes that file absent, 0x02 a directory in its place, 0x03 a
 * FIFO (the readers must refuse what is not a regular file without
 * blocking).  The last parts are the energy counters' second readings.
 * Part 6 names a third RAPL zone "intel-rapl:<part>" (its characters up to
 * '/' or the 40th; none: no such zone) with the name and energy_uj of
 * parts 7 and 8.
 *
 * Checks: a meter reads >= 0 joules, non-decreasing, finite; a clock
 * controller that opens offers 1..64 clocks, ascending, each > 0, and
 * setting the lowest and the highest keeps within them; every refusal is
 * one line; the probe's report fits its buffer. */
#include "fuzz_util.h"
#include "core/core.h"
#include "energy/clock.h"
#include "energy/meter.h"
#include "energy/probe.h"
#include "energy/sysfs.h"

#include <errno.h>
#include <math.h>
#include <sys/stat.h>

#define RAPL "/sys/class/powercap/"
#define CPU0 "/sys/devices/system/cpu/cpu0/cpufreq/"

static const char *const files[] = {
    RAPL "intel-rapl:0/name",                 /* 0 */
    RAPL "intel-rapl:0/energy_uj",            /* 1 */
    RAPL "intel-rapl:0/max_energy_range_uj",  /* 2 */
    RAPL "intel-rapl:0:0/name",               /* 3 */
    RAPL "intel-rapl:0:0/energy_uj",          /* 4 */
    RAPL "intel-rapl:0:0/max_energy_range_uj",/* 5 */
    NULL,                                     /* 6: a third zone's name */
    NULL,                                     /* 7: its name file */
    NULL,                                     /* 8: its energy_uj */
    CPU0 "scaling_governor",                  /* 9 */
    CPU0 "scaling_available_frequencies",     /* 10 */
    CPU0 "cpuinfo_min_freq",                  /* 11 */
    CPU0 "cpuinfo_max_freq",                  /* 12 */
    CPU0 "scaling_setspeed",                  /* 13 */
    CPU0 "scaling_max_freq",                  /* 14 */
    CPU0 "scaling_cur_freq",                  /* 15 */
    CPU0 "scaling_driver",                    /* 16 */
};
enum { NFILES = sizeof files / sizeof files[0], NPARTS = NFILES + 3 }; /* + the second readings of 1, 4, 8 */

static char root[300];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    snprintf(root, sizeof root, "%s/sys-root", fuzz_dir());
    if (mkdir(root, 0755) != 0) abort();
    setenv(PT_SYSFS_ENV, root, 1);
    /* no NVML: the GPU sources and controllers are refused at once */
    setenv("PTRAIN_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1", 1);
    return 0;
}

/* mkdir -p of the directories above path (under root) */
static void mkdirs(const char *path)
{
    char p[512];
    snprintf(p, sizeof p, "%s", path);
    for (char *s = p + strlen(root) + 1; (s = strchr(s, '/')); s++) {
        *s = '\0';
        if (mkdir(p, 0755) != 0 && errno != EEXIST) {
            perror(p);
            abort();
        }
        *s = '/';
    }
}

/* remove path, file, FIFO or (empty) directory alike */
static void clear(const char *path)
{
    if (remove(path) != 0 && errno != ENOENT) {
        perror(path);
        abort();
    }
}

/* file rel (under root) as part (p, n): absent, a directory, a FIFO or a file */
static void put(const char *rel, const uint8_t *p, size_t n, int present)
{
    char path[512];
    snprintf(path, sizeof path, "%s%s", root, rel);
    clear(path);
    if (!present || (n == 1 && p[0] == 1)) return;
    mkdirs(path);
    if (n == 1 && p[0] == 2) {
        if (mkdir(path, 0755) != 0) abort();
    } else if (n == 1 && p[0] == 3) {
        if (mkfifo(path, 0644) != 0) abort();
    } else {
        fuzz_write(path, p, n);
    }
}

/* the input's parts */
typedef struct part {
    const uint8_t *p;
    size_t n;
} part;

static int split(const uint8_t *data, size_t size, part *out, int max)
{
    static const char sep[] = "\n--\n";
    int k = 0;
    size_t at = 0;
    while (k < max) {
        const uint8_t *s = data + at, *e = memmem(s, size - at, sep, 4);
        size_t n = e ? (size_t)(e - s) : size - at;
        out[k++] = (part){s, n};
        if (!e) break;
        at += n + 4;
    }
    return k;
}

/* cpu0's attr holds the clock mhz in kHz (what the controller set is what
 * it says it set) */
static void written(const char *attr, double mhz)
{
    char path[512], text[64];
    snprintf(path, sizeof path, "%s" CPU0 "%s", root, attr);
    uint64_t khz = 0;
    if (pt_sysfs_read(path, text, sizeof text) != 0 || pt_sysfs_read_u64(path, &khz) != 0 ||
        fabs((double)khz - mhz * 1000) > 0.5 + 1e-12 * mhz * 1000) {
        fprintf(stderr, "clock %.17g MHz set as '%s' kHz in %s\n", mhz, text, attr);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    part pt[NPARTS];
    int np = split(data, size, pt, NPARTS);
    /* the third zone: its directory name from part 6 */
    char zone[64] = "";
    if (np > 6) {
        size_t n = 0;
        while (n < pt[6].n && n < 40 && pt[6].p[n] != '/' && pt[6].p[n] != '\0') n++;
        if (n) snprintf(zone, sizeof zone, "intel-rapl:%.*s", (int)n, (const char *)pt[6].p);
        if (!strcmp(zone, "intel-rapl:.") || !strcmp(zone, "intel-rapl:..")) zone[0] = '\0';
    }
    /* a fresh tree: every file written or removed, the extra zone's directory removed */
    char extra[512];
    static char last_zone[64];
    if (last_zone[0]) {
        static const char *const leaf[] = {"name", "energy_uj"};
        for (int i = 0; i < 2; i++) {
            snprintf(extra, sizeof extra, "%s" RAPL "%s/%s", root, last_zone, leaf[i]);
            clear(extra);
        }
        snprintf(extra, sizeof extra, "%s" RAPL "%s", root, last_zone);
        /* (it may be one of the fixed zones, "intel-rapl:0": then it stays) */
        if (rmdir(extra) != 0 && errno != ENOENT && errno != ENOTEMPTY && errno != EEXIST) clear(extra);
        last_zone[0] = '\0';
    }
    for (int i = 0; i < NFILES; i++)
        if (files[i]) put(files[i], i < np ? pt[i].p : NULL, i < np ? pt[i].n : 0, i < np);
    if (zone[0] && !strchr(zone + 11, '/')) {
        snprintf(extra, sizeof extra, RAPL "%s/name", zone);
        put(extra, np > 7 ? pt[7].p : NULL, np > 7 ? pt[7].n : 0, np > 7);
        snprintf(extra, sizeof extra, RAPL "%s/energy_uj", zone);
        put(extra, np > 8 ? pt[8].p : NULL, np > 8 ? pt[8].n : 0, np > 8);
        snprintf(last_zone, sizeof last_zone, "%s", zone);
        /* the zone's directory exists even with neither file */
        snprintf(extra, sizeof extra, "%s" RAPL "%s", root, zone);
        mkdirs(extra);
        if (mkdir(extra, 0755) != 0 && errno != EEXIST) abort();
    }

    /* the meter: RAPL named, and auto (RAPL and the absent NVML) */
    pt_error_clear();
    unsigned kinds;
    int automatic;
    if (pt_meter_parse("rapl", &kinds, &automatic) != PT_OK) abort();
    char note[2048];
    pt_meter *m = NULL;
    if (pt_meter_open(&m, kinds, automatic, NULL, note, sizeof note) != PT_OK) abort(); /* PT_ENOMEM only */
    double j0 = -1, j1 = -1;
    if (pt_meter_read(m, &j0) != PT_OK) fuzz_check_msg(pt_errmsg());
    if (!(j0 >= 0) || !isfinite(j0)) abort();
    for (int i = 0; i < pt_meter_ncounters(m); i++) {
        const pt_meter_counter *c = pt_meter_counter_at(m, i);
        if (!c || c->kind != PT_METER_RAPL || !(c->range_j >= 0) || c->share != 1) abort();
        if (i % 2) pt_meter_set_share(m, i, 0.5);
    }
    /* the second readings of the counters */
    static const int again[3] = {1, 4, 8};
    for (int k = 0; k < 3; k++) {
        int i = NFILES + k;
        if (again[k] < 8) put(files[again[k]], i < np ? pt[i].p : NULL, i < np ? pt[i].n : 0, i < np);
        else if (last_zone[0]) {
            snprintf(extra, sizeof extra, RAPL "%s/energy_uj", last_zone);
            put(extra, i < np ? pt[i].p : NULL, i < np ? pt[i].n : 0, i < np);
        }
    }
    if (pt_meter_read(m, &j1) != PT_OK) fuzz_check_msg(pt_errmsg());
    if (!(j1 >= j0) || !isfinite(j1)) abort();
    char desc[1024];
    pt_meter_describe(m, desc, sizeof desc);
    pt_meter_close(m);
    if (pt_meter_open(&m, PT_METER_NVML | PT_METER_RAPL, 1, "0", note, sizeof note) != PT_OK) abort();
    pt_meter_close(m);

    /* the cpufreq controller on CPU 0, open and within [lo, hi] */
    int cpus[1] = {0};
    static const double range[3][2] = {{0, 0}, {1000, 2000}, {3000, 0}};
    for (int r = 0; r < 3; r++) {
        pt_clock *c = NULL;
        pt_error_clear();
        int rc = pt_clock_open(&c, PT_CLOCK_CPUFREQ, NULL, cpus, 1, range[r][0], range[r][1], NULL);
        if (rc != PT_OK) {
            fuzz_check_msg(pt_errmsg());
            if (c) abort();
            continue;
        }
        const double *f;
        int nf = pt_clock_freqs(c, &f);
        if (nf < 1 || nf > 64) abort();
        for (int i = 0; i < nf; i++)
            if (!(f[i] > 0) || (i && !(f[i] > f[i - 1])) || (range[r][0] > 0 && f[i] < range[r][0] - 1e-6) ||
                (range[r][1] > 0 && f[i] > range[r][1] + 1e-6))
                abort();
        pt_clock_describe(c, desc, sizeof desc);
        const char *attr = strstr(desc, "(scaling_setspeed)") ? "scaling_setspeed" : "scaling_max_freq";
        if (pt_clock_set(c, f[0] / 2) != PT_OK || pt_clock_current(c) != f[0]) abort();
        written(attr, f[0]);
        if (pt_clock_set(c, f[nf - 1] * 2) != PT_OK || pt_clock_current(c) != f[nf - 1]) abort();
        written(attr, f[nf - 1]);
        if (pt_clock_reset(c) != PT_OK) abort();
        pt_clock_close(c);
    }
    /* the dry controller reads the same list (it sets nothing) */
    pt_clock *c = NULL;
    if (pt_clock_open(&c, PT_CLOCK_DRY, NULL, cpus, 1, 0, 0, NULL) != PT_OK) fuzz_check_msg(pt_errmsg());
    pt_clock_close(c);

    /* ptrain-topo --energy's report */
    char report[8192];
    pt_energy_probe(report, sizeof report);
    if (strlen(report) >= sizeof report) abort();
    return 0;
}
