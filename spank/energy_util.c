/* SPDX-License-Identifier: MIT */
/* Energy of the plugin without Slurm: the --ptrain-energy levels, the clock
 * ranges of ptrain.conf, and NVML's application-clock restriction that
 * --ptrain-energy=apply lifts for a task's own GPU; see spank_util.h. */
#include "spank/spank_util.h"
#include "core/core.h"
#include "energy/clock.h"
#include "energy/nvml.h"
#include "energy/sysfs.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *const energy_names[] = {"off", "report", "plan", "apply"};

const char *pt_spank_energy_name(int level)
{
    return level >= PT_SPANK_ENERGY_OFF && level <= PT_SPANK_ENERGY_APPLY ? energy_names[level] : "?";
}

int pt_spank_parse_energy_opt(const pt_spank_conf *c, const char *what, const char *text, int *out)
{
    int lv = -1;
    for (int i = 0; i <= PT_SPANK_ENERGY_APPLY; i++)
        if (text && strcmp(text, energy_names[i]) == 0) lv = i;
    if (lv < 0)
        return pt_fail(PT_EINVAL, "ptrain: %s='%s' is invalid (valid: off, report, plan, apply)", what,
                       text ? text : "");
    if (c && lv > c->energy) {
        char allowed[64] = "";
        for (int i = 0; i <= c->energy; i++)
            pt_notef(allowed, sizeof allowed, "%s", energy_names[i]);
        for (char *p = allowed; *p; p++)
            if (*p == '\n') *p = ',';
        return pt_fail(PT_EINVAL, "ptrain: %s=%s is not allowed on this cluster (allowed: %s; energy in "
                       "ptrain.conf)", what, text, allowed);
    }
    *out = lv;
    return 0;
}

int pt_spank_parse_clock_range(const char *what, const char *text, double r[2])
{
    /* ptrain-run's parser: what the plugin passes on, ptrain-run takes */
    if (pt_clock_parse_range(text, r) != PT_OK)
        return pt_fail(PT_EINVAL, "%s='%s' is invalid (valid: " PT_CLOCK_RANGE_VALID ")", what, text ? text : "");
    return 0;
}

int pt_spank_nvml_unrestrict(const char *busid, int *was)
{
    *was = 0;
    pt_nvml *n = NULL;
    pt_nvml_dev dev;
    int restricted = 1;
    if (pt_nvml_open(&n) != PT_OK || pt_nvml_device(n, busid, &dev, NULL, 0) != PT_OK ||
        pt_nvml_get_restriction(n, dev, &restricted) != PT_OK ||
        (restricted && pt_nvml_set_restriction(n, dev, 0) != PT_OK)) {
        pt_fail(PT_EINVAL, "cannot lift the application-clock restriction of GPU %s: %s", busid, pt_errmsg());
        pt_nvml_close(n);
        return -1;
    }
    *was = restricted;
    pt_nvml_close(n);
    return 0;
}

int pt_spank_nvml_restore(const char *busid, int was)
{
    pt_nvml *n = NULL;
    pt_nvml_dev dev;
    if (pt_nvml_open(&n) != PT_OK || pt_nvml_device(n, busid, &dev, NULL, 0) != PT_OK) {
        pt_fail(PT_EINVAL, "cannot restore the clocks of GPU %s: %s", busid, pt_errmsg());
        pt_nvml_close(n);
        return -1;
    }
    int rc = 0;
    /* each step is tried; the first failure is the one reported */
    if (pt_nvml_reset_clock(n, dev, PT_NVML_APPLICATION) != PT_OK)
        rc = pt_fail(PT_EINVAL, "GPU %s: %s", busid, pt_errmsg());
    if (pt_nvml_reset_clock(n, dev, PT_NVML_LOCKED) != PT_OK && !rc)
        rc = pt_fail(PT_EINVAL, "GPU %s: %s", busid, pt_errmsg());
    if (was && pt_nvml_set_restriction(n, dev, 1) != PT_OK && !rc)
        rc = pt_fail(PT_EINVAL, "cannot restrict the application clocks of GPU %s again: %s", busid, pt_errmsg());
    pt_nvml_close(n);
    return rc;
}

/* ---- cpufreq settings a killed task left ------------------------------- */
static const char *const cf_attr[2] = {"scaling_max_freq", "scaling_setspeed"};

/* attribute k of CPU cpu, under $PTRAIN_SYSFS_ROOT: 0, or -1 when too long */
static int cf_file(char *buf, size_t len, int cpu, int k)
{
    char rel[128];
    snprintf(rel, sizeof rel, "/sys/devices/system/cpu/cpu%d/cpufreq/%s", cpu, cf_attr[k]);
    return pt_sysfs_path(buf, len, rel);
}

int pt_spank_cpufreq_save(pt_spank_cpufreq *s, const int *cpus, int ncpus)
{
    for (int i = 0; i < ncpus; i++) {
        int known = cpus[i] < 0;
        for (int j = 0; j < s->n && !known; j++) known = s->cpu[j].cpu == cpus[i];
        if (known) continue;
        pt_spank_cpufreq_cpu c = {cpus[i], 0, 0};
        char p[512];
        uint64_t v;
        /* scaling_setspeed reads "<unsupported>" but under the userspace governor: not a number, not kept */
        if (cf_file(p, sizeof p, c.cpu, 0) == 0 && pt_sysfs_read_u64(p, &v) == 0) c.max_khz = v;
        if (cf_file(p, sizeof p, c.cpu, 1) == 0 && pt_sysfs_read_u64(p, &v) == 0) c.set_khz = v;
        if (!c.max_khz && !c.set_khz) continue;
        if (s->n == s->cap) {
            int cap = s->cap ? 2 * s->cap : 16;
            pt_spank_cpufreq_cpu *m = realloc(s->cpu, sizeof *m * (size_t)cap);
            if (!m) return pt_fail(PT_ENOMEM, "cannot record the cpufreq settings of CPU %d: out of memory", c.cpu);
            s->cpu = m;
            s->cap = cap;
        }
        s->cpu[s->n++] = c;
    }
    return 0;
}

/* May uid (groups gid, gids) write a file of st? */
static int may_write(const struct stat *st, unsigned uid, unsigned gid, const unsigned *gids, int ngids)
{
    if (uid == 0) return 1;
    if (st->st_uid == uid) return (st->st_mode & S_IWUSR) != 0;
    int group = st->st_gid == gid;
    for (int i = 0; i < ngids && !group; i++) group = st->st_gid == gids[i];
    if (group) return (st->st_mode & S_IWGRP) != 0;
    return (st->st_mode & S_IWOTH) != 0;
}

int pt_spank_cpufreq_restore(const pt_spank_cpufreq *s, unsigned uid, unsigned gid, const unsigned *gids, int ngids,
                             int *restored, char *note, size_t len)
{
    int rc = 0, n = 0;
    size_t off = 0;
    if (note && len) note[0] = '\0';
    for (int i = 0; s && i < s->n; i++) {
        const pt_spank_cpufreq_cpu *c = &s->cpu[i];
        for (int k = 0; k < 2; k++) {
            unsigned long long want = k ? c->set_khz : c->max_khz;
            char p[512], text[32];
            uint64_t now;
            struct stat st;
            if (!want || cf_file(p, sizeof p, c->cpu, k) != 0 || pt_sysfs_read_u64(p, &now) != 0 || now == want ||
                stat(p, &st) != 0 || !may_write(&st, uid, gid, gids, ngids))
                continue;
            snprintf(text, sizeof text, "%llu", want);
            int e = pt_sysfs_write(p, text);
            if (e) {
                if (!rc) rc = pt_fail(PT_EIO, "cannot write %s back to %s: %s", text, p, strerror(-e));
                continue;
            }
            n++;
            if (note && off < len) {
                int w = snprintf(note + off, len - off, "%sCPU %d %s %llu -> %llu kHz", off ? ", " : "", c->cpu,
                                 cf_attr[k], (unsigned long long)now, want);
                off = w < 0 ? len : off + (size_t)w;
            }
        }
    }
    if (restored) *restored = n;
    return rc ? -1 : 0;
}

void pt_spank_cpufreq_free(pt_spank_cpufreq *s)
{
    if (!s) return;
    free(s->cpu);
    s->cpu = NULL;
    s->n = s->cap = 0;
}
