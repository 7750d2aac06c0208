/* SPDX-License-Identifier: MIT */
/* Energy sources (see meter.h). */
#define _GNU_SOURCE
#include "energy/meter.h"
#include "energy/nvml.h"
#include "energy/sysfs.h"
#include "core/core.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_COUNTERS = 64 };

typedef struct counter {
    pt_meter_counter pub;
    char path[320];        /* RAPL: energy_uj */
    pt_nvml_dev dev;       /* NVML */
    uint64_t range;        /* raw units (uJ; 0 for NVML) */
    double unit_j;         /* joules per raw unit */
    uint64_t last;         /* raw reading last time */
    double total_j;        /* energy since open, unweighted */
} counter;

struct pt_meter {
    int n;
    counter c[MAX_COUNTERS];
    pt_nvml *nvml;
    double last_j;
};

uint64_t pt_energy_counter_delta(uint64_t last, uint64_t now, uint64_t range)
{
    if (now >= last) return now - last;
    if (range > 0 && last <= range) return range - last + now;
    return now; /* a reset: the energy since it */
}

int pt_meter_parse(const char *spec, unsigned *kinds, int *automatic)
{
    *kinds = 0;
    *automatic = 0;
    if (!spec || !*spec) return pt_fail(PT_EINVAL, "energy source '': valid: auto, none, nvml, rapl, nvml,rapl");
    if (!strcmp(spec, "auto")) {
        *kinds = PT_METER_NVML | PT_METER_RAPL;
        *automatic = 1;
        return PT_OK;
    }
    if (!strcmp(spec, "none")) return PT_OK;
    const char *p = spec;
    while (*p) {
        size_t n = strcspn(p, ",");
        if (n == 4 && !strncmp(p, "nvml", 4)) *kinds |= PT_METER_NVML;
        else if (n == 4 && !strncmp(p, "rapl", 4)) *kinds |= PT_METER_RAPL;
        else return pt_fail(PT_EINVAL, "energy source '%s' is not valid (valid: auto, none, or a list of nvml, rapl)",
                            spec);
        p += n;
        if (*p == ',') {
            p++;
            if (!*p) return pt_fail(PT_EINVAL, "energy source '%s' ends with a comma (valid: auto, none, nvml, "
                                    "rapl, nvml,rapl)", spec);
        }
    }
    return PT_OK;
}

/* One RAPL zone directory: add its counter when its name is wanted. */
static void rapl_zone(pt_meter *m, const char *dir, const char *zone, const char *parent_name, char *note, size_t len,
                      int *denied)
{
    char path[400], name[64];
    if (snprintf(path, sizeof path, "%s/%s/name", dir, zone) >= (int)sizeof path) return;
    if (pt_sysfs_read(path, name, sizeof name) != 0) return;
    int top = strchr(strchr(zone, ':') + 1, ':') == NULL; /* intel-rapl:N, not intel-rapl:N:M */
    int want = (top && !strncmp(name, "package", 7)) || (!top && !strcmp(name, "dram"));
    if (!want || m->n >= MAX_COUNTERS) return;
    counter *c = &m->c[m->n];
    memset(c, 0, sizeof *c);
    if (snprintf(c->path, sizeof c->path, "%s/%s/energy_uj", dir, zone) >= (int)sizeof c->path) return;
    uint64_t v = 0, range = 0;
    int rc = pt_sysfs_read_u64(c->path, &v);
    if (rc == -EACCES || rc == -EPERM) {
        (*denied)++;
        return;
    }
    if (rc != 0) {
        pt_notef(note, len, "energy: RAPL %s: cannot read %s", zone, c->path);
        return;
    }
    if (snprintf(path, sizeof path, "%s/%s/max_energy_range_uj", dir, zone) >= (int)sizeof path ||
        pt_sysfs_read_u64(path, &range) != 0)
        range = 0;
    c->pub.kind = PT_METER_RAPL;
    if (top) snprintf(c->pub.name, sizeof c->pub.name, "%.40s", name);
    else snprintf(c->pub.name, sizeof c->pub.name, "dram (%.30s)", parent_name ? parent_name : "?");
    memcpy(c->pub.key, c->path, sizeof c->pub.key);
    c->range = range;
    c->unit_j = 1e-6;
    c->pub.range_j = (double)range * 1e-6;
    c->pub.share = 1;
    c->last = v;
    m->n++;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static void rapl_open(pt_meter *m, int automatic, char *note, size_t len)
{
    char dir[400];
    if (pt_sysfs_path(dir, sizeof dir, "/sys/class/powercap") < 0) return;
    DIR *d = opendir(dir);
    if (!d) {
        if (!automatic) pt_notef(note, len, "energy: no RAPL: %s cannot be read (%s)", dir, strerror(errno));
        return;
    }
    char *zones[256];
    int nz = 0;
    struct dirent *e;
    while ((e = readdir(d)) && nz < 256)
        if (!strncmp(e->d_name, "intel-rapl:", 11) && (zones[nz] = strdup(e->d_name))) nz++;
    closedir(d);
    qsort(zones, (size_t)nz, sizeof *zones, cmp_str);
    int before = m->n, denied = 0;
    for (int i = 0; i < nz; i++) {
        /* a dram subzone names its package */
        char parent[64] = "", pz[300], path[800];
        const char *second = strchr(zones[i] + 11, ':');
        if (second) {
            snprintf(pz, sizeof pz, "%.*s", (int)(second - zones[i]), zones[i]);
            snprintf(path, sizeof path, "%s/%s/name", dir, pz);
            if (pt_sysfs_read(path, parent, sizeof parent) != 0) snprintf(parent, sizeof parent, "%.60s", pz);
        }
        rapl_zone(m, dir, zones[i], parent, note, len, &denied);
    }
    for (int i = 0; i < nz; i++) free(zones[i]);
    if (denied && m->n == before)
        pt_notef(note, len, "energy: RAPL counters in %s are not readable by this user (energy_uj is root-only "
                 "since CVE-2020-8694; an administrator may grant read access): no CPU energy", dir);
    else if (m->n == before && !automatic)
        pt_notef(note, len, "energy: no RAPL package zone under %s", dir);
}

static void nvml_open(pt_meter *m, const char *gpu, int automatic, char *note, size_t len)
{
    if (!gpu || !*gpu) {
        if (!automatic)
            pt_notef(note, len, "energy: nvml: no GPU named for this rank (CUDA_VISIBLE_DEVICES or PTRAIN_ENERGY_GPU)");
        return;
    }
    pt_nvml *n = NULL;
    int rc = pt_nvml_open(&n);
    if (rc != PT_OK) {
        if (!automatic || rc != PT_EUNSUPP) pt_notef(note, len, "energy: %s", pt_errmsg());
        return;
    }
    counter *c = &m->c[m->n];
    memset(c, 0, sizeof *c);
    char bus[64];
    unsigned long long mj = 0;
    if (pt_nvml_device(n, gpu, &c->dev, bus, sizeof bus) != PT_OK || pt_nvml_energy_mj(n, c->dev, &mj) != PT_OK) {
        pt_notef(note, len, "energy: %s", pt_errmsg());
        pt_nvml_close(n);
        return;
    }
    c->pub.kind = PT_METER_NVML;
    snprintf(c->pub.name, sizeof c->pub.name, "GPU %.40s", bus);
    snprintf(c->pub.key, sizeof c->pub.key, "nvml:%s", bus);
    c->pub.share = 1;
    c->unit_j = 1e-3;
    c->last = mj;
    m->nvml = n;
    m->n++;
}

int pt_meter_open(pt_meter **out, unsigned kinds, int automatic, const char *gpu, char *note, size_t len)
{
    *out = NULL;
    if (note && len) note[0] = '\0';
    pt_meter *m = calloc(1, sizeof *m);
    if (!m) return pt_fail(PT_ENOMEM, "energy: out of memory for the meter");
    if (kinds & PT_METER_NVML) nvml_open(m, gpu, automatic, note, len);
    if (kinds & PT_METER_RAPL) rapl_open(m, automatic, note, len);
    *out = m;
    return PT_OK;
}

void pt_meter_close(pt_meter *m)
{
    if (!m) return;
    pt_nvml_close(m->nvml);
    free(m);
}

int pt_meter_ncounters(const pt_meter *m) { return m ? m->n : 0; }

const pt_meter_counter *pt_meter_counter_at(const pt_meter *m, int i)
{
    return m && i >= 0 && i < m->n ? &m->c[i].pub : NULL;
}

void pt_meter_set_share(pt_meter *m, int i, double share)
{
    if (m && i >= 0 && i < m->n && share > 0 && share <= 1) m->c[i].pub.share = share;
}

int pt_meter_read(pt_meter *m, double *joules)
{
    if (!m) {
        *joules = 0;
        return PT_OK;
    }
    int rc = PT_OK;
    double sum = 0;
    for (int i = 0; i < m->n; i++) {
        counter *c = &m->c[i];
        uint64_t now = 0;
        int ok;
        if (c->pub.kind == PT_METER_NVML) {
            unsigned long long mj = 0;
            ok = pt_nvml_energy_mj(m->nvml, c->dev, &mj) == PT_OK;
            now = mj;
        } else {
            int e = pt_sysfs_read_u64(c->path, &now);
            ok = e == 0;
            if (!ok) pt_fail(PT_EIO, "cannot read %s: %s", c->path, strerror(-e));
        }
        if (ok) {
            /* a RAPL counter that goes back with no range to tell a wrap (or
             * one beyond its range) wrapped or was reset by an amount not
             * known: that interval counts nothing.  Its value is the
             * energy since boot, not since the reset: taking it (as NVML's,
             * which restarts at 0 with the driver) added up to megajoules. */
            int unknown = c->pub.kind == PT_METER_RAPL && now < c->last && (!c->range || c->last > c->range);
            if (!unknown) c->total_j += (double)pt_energy_counter_delta(c->last, now, c->range) * c->unit_j;
            c->last = now;
        } else if (rc == PT_OK) {
            rc = pt_fail(PT_EIO, "energy: counter %s: %s", c->pub.name, pt_errmsg());
        }
        sum += c->pub.share * c->total_j;
    }
    /* never backwards (a share changed between readings) */
    if (sum < m->last_j) sum = m->last_j;
    m->last_j = sum;
    *joules = sum;
    return rc;
}

void pt_meter_describe(const pt_meter *m, char *buf, size_t len)
{
    if (!len) return;
    buf[0] = '\0';
    if (!m || m->n == 0) {
        snprintf(buf, len, "none");
        return;
    }
    size_t off = 0;
    int last_kind = 0;
    for (int i = 0; i < m->n && off < len; i++) {
        const pt_meter_counter *c = &m->c[i].pub;
        char share[32] = "";
        if (c->share < 1) snprintf(share, sizeof share, " (share %.3g)", c->share);
        if (c->kind != last_kind)
            off += (size_t)snprintf(buf + off, len - off, "%s%s %s%s", off ? " + " : "",
                                    c->kind == PT_METER_NVML ? "nvml" : "rapl", c->name, share);
        else off += (size_t)snprintf(buf + off, len - off, ", %s%s", c->name, share);
        last_kind = c->kind;
    }
}
