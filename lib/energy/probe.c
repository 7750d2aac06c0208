/* SPDX-License-Identifier: MIT */
/* What the node can measure and set (see probe.h). */
#define _GNU_SOURCE
#include "energy/probe.h"
#include "energy/meter.h"
#include "energy/nvml.h"
#include "energy/sysfs.h"
#include "core/core.h"

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct out {
    char *buf;
    size_t len, off;
} out;

static void say(out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(out *o, const char *fmt, ...)
{
    if (o->off + 1 >= o->len) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(o->buf + o->off, o->len - o->off, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    o->off += (size_t)n;
    if (o->off >= o->len) o->off = o->len - 1;
}

static int probe_nvml(out *o, int *settable)
{
    pt_nvml *n = NULL;
    if (pt_nvml_open(&n) != PT_OK) {
        const char *m = pt_errmsg();
        say(o, "  NVML: none (%s)\n", strncmp(m, "NVML: ", 6) ? m : m + 6);
        return 0;
    }
    int count = 0, readable = 0;
    pt_nvml_count(n, &count);
    say(o, "  NVML: %s, %d GPU%s\n", pt_nvml_library(n), count, count == 1 ? "" : "s");
    for (int i = 0; i < count && i < 64; i++) {
        char idx[16], bus[64], name[96];
        pt_nvml_dev dev;
        snprintf(idx, sizeof idx, "%d", i);
        if (pt_nvml_device(n, idx, &dev, bus, sizeof bus) != PT_OK) {
            say(o, "    GPU%d: %s\n", i, pt_errmsg());
            continue;
        }
        pt_nvml_name(n, dev, name, sizeof name);
        unsigned long long mj = 0;
        if (pt_nvml_energy_mj(n, dev, &mj) == PT_OK) {
            say(o, "    GPU%d %s %s: energy counter readable (%.3f J since the driver loaded)\n", i, bus,
                name[0] ? name : "?", (double)mj / 1e3);
            readable++;
        } else {
            say(o, "    GPU%d %s %s: no energy counter (%s)\n", i, bus, name[0] ? name : "?", pt_errmsg());
        }
        unsigned mem = 0, g[64];
        int k = 0;
        if (pt_nvml_clocks(n, dev, &mem, g, 64, &k) == PT_OK)
            say(o, "      clocks: %u-%u MHz (%d offered at memory clock %u MHz)\n", g[0], g[k - 1], k, mem);
        else
            say(o, "      clocks: not listed (%s)\n", pt_errmsg());
        int restricted = 1, have = pt_nvml_get_restriction(n, dev, &restricted) == PT_OK;
        int root = geteuid() == 0;
        say(o, "      locked clocks: %s; application clocks: %s\n",
            root ? "settable (root)" : "need root (this user is not)",
            !have ? "restriction unknown" : root || !restricted ? "settable by this user"
                                                                : "restricted to root (the SPANK plugin lifts it for a "
                                                                  "task's own GPU at energy level apply)");
        if (root || (have && !restricted)) (*settable)++;
    }
    pt_nvml_close(n);
    return readable;
}

static int probe_rapl(out *o)
{
    char dir[400];
    if (pt_sysfs_path(dir, sizeof dir, "/sys/class/powercap") < 0) return 0;
    DIR *d = opendir(dir);
    if (!d) {
        say(o, "  RAPL: none (%s: %s)\n", dir, strerror(errno));
        return 0;
    }
    char *zones[256];
    int nz = 0, readable = 0;
    struct dirent *e;
    while ((e = readdir(d)) && nz < 256)
        if (!strncmp(e->d_name, "intel-rapl:", 11) && (zones[nz] = strdup(e->d_name))) nz++;
    closedir(d);
    /* sorted, so that the report is stable */
    for (int i = 0; i < nz; i++)
        for (int j = i + 1; j < nz; j++)
            if (strcmp(zones[j], zones[i]) < 0) {
                char *t = zones[i];
                zones[i] = zones[j];
                zones[j] = t;
            }
    say(o, "  RAPL (%s): %d zone%s\n", dir, nz, nz == 1 ? "" : "s");
    for (int i = 0; i < nz; i++) {
        char p[600], name[64] = "?";
        uint64_t v = 0, range = 0;
        snprintf(p, sizeof p, "%s/%s/name", dir, zones[i]);
        pt_sysfs_read(p, name, sizeof name);
        snprintf(p, sizeof p, "%s/%s/max_energy_range_uj", dir, zones[i]);
        pt_sysfs_read_u64(p, &range);
        snprintf(p, sizeof p, "%s/%s/energy_uj", dir, zones[i]);
        int rc = pt_sysfs_read_u64(p, &v);
        int top = strchr(zones[i] + 11, ':') == NULL;
        int used = (top && !strncmp(name, "package", 7)) || (!top && !strcmp(name, "dram"));
        if (rc == 0) {
            say(o, "    %s %s: readable (range %.1f J)%s\n", zones[i], name, (double)range / 1e6,
                used ? "" : " (not summed: inside a package, or psys)");
            if (used) readable++;
        } else {
            say(o, "    %s %s: %s\n", zones[i], name,
                rc == -EACCES || rc == -EPERM ? "not readable by this user (root only since CVE-2020-8694)"
                                              : strerror(-rc));
        }
        free(zones[i]);
    }
    return readable;
}

static void probe_cpufreq(out *o, int *settable)
{
    char root[300];
    if (pt_sysfs_path(root, sizeof root, "/sys/devices/system/cpu") < 0) return;
    long ncpu = sysconf(_SC_NPROCESSORS_CONF);
    int with = 0, sets = 0, maxs = 0, first = -1;
    for (long c = 0; c < ncpu && c < 4096; c++) {
        char p[400], gov[64];
        snprintf(p, sizeof p, "%s/cpu%ld/cpufreq/scaling_governor", root, c);
        if (pt_sysfs_read(p, gov, sizeof gov) != 0) continue;
        with++;
        if (first < 0) first = (int)c;
        snprintf(p, sizeof p, "%s/cpu%ld/cpufreq/scaling_setspeed", root, c);
        if (!strcmp(gov, "userspace") && access(p, W_OK) == 0) sets++;
        snprintf(p, sizeof p, "%s/cpu%ld/cpufreq/scaling_max_freq", root, c);
        if (access(p, W_OK) == 0) maxs++;
    }
    if (!with) {
        say(o, "  cpufreq: none (no CPU of %ld has a policy under %s: a VM or a disabled driver)\n", ncpu, root);
        return;
    }
    char p[400], drv[64] = "?", gov[64] = "?", avail[512] = "";
    uint64_t lo = 0, hi = 0;
    snprintf(p, sizeof p, "%s/cpu%d/cpufreq/scaling_driver", root, first);
    if (pt_sysfs_read(p, drv, sizeof drv) != 0 || !drv[0]) snprintf(drv, sizeof drv, "?");
    snprintf(p, sizeof p, "%s/cpu%d/cpufreq/scaling_governor", root, first);
    if (pt_sysfs_read(p, gov, sizeof gov) != 0 || !gov[0]) snprintf(gov, sizeof gov, "?");
    snprintf(p, sizeof p, "%s/cpu%d/cpufreq/cpuinfo_min_freq", root, first);
    pt_sysfs_read_u64(p, &lo);
    snprintf(p, sizeof p, "%s/cpu%d/cpufreq/cpuinfo_max_freq", root, first);
    pt_sysfs_read_u64(p, &hi);
    snprintf(p, sizeof p, "%s/cpu%d/cpufreq/scaling_available_frequencies", root, first);
    pt_sysfs_read(p, avail, sizeof avail);
    say(o, "  cpufreq (%s): %d of %ld CPUs, driver %s, governor %s, %.0f-%.0f MHz%s%s%s\n", root, with, ncpu, drv, gov,
        (double)lo / 1e3, (double)hi / 1e3, avail[0] ? " (offered, kHz: " : "", avail, avail[0] ? ")" : "");
    say(o, "    scaling_setspeed: %s; scaling_max_freq: %s\n",
        sets ? "writable by this user (userspace governor)"
             : !strcmp(gov, "userspace") ? "not writable by this user" : "not used (the governor is not userspace)",
        maxs == with ? "writable by this user"
        : maxs       ? "writable on some CPUs"
                     : "not writable by this user (root only)");
    if (sets || maxs) (*settable)++;
}

int pt_energy_probe(char *buf, size_t len)
{
    out o = {buf, len, 0};
    if (len) buf[0] = '\0';
    int gpu_set = 0, cpu_set = 0;
    int nv = probe_nvml(&o, &gpu_set);
    int ra = probe_rapl(&o);
    probe_cpufreq(&o, &cpu_set);
    say(&o, "  ptrain-run --energy auto: %s%s%s; --energy-clock auto: %s\n", nv ? "nvml (the rank's GPU)" : "",
        nv && ra ? " + " : "", ra ? "rapl" : nv ? "" : "none (energy reported as null)",
        gpu_set ? "nvml (the rank's GPU)" : cpu_set ? "cpufreq (the rank's CPUs)"
                                                    : "none settable: runs at the default clocks");
    return nv + ra;
}
