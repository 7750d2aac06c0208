/* SPDX-License-Identifier: MIT */
/* The host-memory check (hostmem.h); moved here from ptrain-run's
 * bin/run/memory.c so that ptrain-run, ptrain-ckpt convert and sample
 * share it. */
#define _GNU_SOURCE /* fopen "e", sysconf */
#include "core/hostmem.h"
#include "core/core.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

/* A number from the first line of a sysfs/procfs file: bytes, or -1
 * ("max", unreadable, absent). */
static double read_bytes(const char *path)
{
    FILE *f = fopen(path, "re");
    if (!f) return -1;
    char buf[64] = "";
    double v = -1;
    if (fgets(buf, sizeof buf, f) && strncmp(buf, "max", 3) != 0) {
        char *end;
        unsigned long long x = strtoull(buf, &end, 10);
        if (end != buf && x > 0 && x < (1ull << 62)) v = (double)x;
    }
    fclose(f);
    return v;
}

/* The smallest memory limit of this process's control groups (cgroup v2
 * memory.max from its own group up to the root, or v1's
 * memory.limit_in_bytes) minus what the group already uses; -1 if none.
 * Under Slurm with task/cgroup that is the job's or step's limit on this
 * node, shared by its tasks. */
static double cgroup_room(void)
{
    FILE *f = fopen("/proc/self/cgroup", "re");
    if (!f) return -1;
    char line[4096];
    double best = -1;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2) continue;
        *c2 = '\0';
        const char *ctrl = c1 + 1, *path = c2 + 1;
        int v2 = line[0] == '0' && *ctrl == '\0';
        int v1 = !v2 && strstr(ctrl, "memory") != NULL;
        if (!v2 && !v1) continue;
        char dir[4096];
        snprintf(dir, sizeof dir, "%s", path);
        for (;;) { /* this group and every ancestor */
            char p[4400];
            double lim, used;
            if (v2) {
                snprintf(p, sizeof p, "/sys/fs/cgroup%s/memory.max", dir);
                lim = read_bytes(p);
                snprintf(p, sizeof p, "/sys/fs/cgroup%s/memory.current", dir);
                used = read_bytes(p);
            } else {
                snprintf(p, sizeof p, "/sys/fs/cgroup/memory%s/memory.limit_in_bytes", dir);
                lim = read_bytes(p);
                if (lim >= 9e18) lim = -1; /* v1's "unlimited" */
                snprintf(p, sizeof p, "/sys/fs/cgroup/memory%s/memory.usage_in_bytes", dir);
                used = read_bytes(p);
            }
            if (lim > 0) {
                double room = lim - (used > 0 ? used : 0);
                if (room < 0) room = 0;
                if (best < 0 || room < best) best = room;
            }
            char *slash = strrchr(dir, '/');
            if (!slash || dir[0] == '\0' || strcmp(dir, "/") == 0) break;
            if (slash == dir) dir[1] = '\0';
            else *slash = '\0';
            if (strcmp(dir, "/") == 0) { /* the root group has no limit file */
                break;
            }
        }
    }
    fclose(f);
    return best;
}

/* MemAvailable of /proc/meminfo (bytes), -1 if unknown. */
static double mem_available(void)
{
    FILE *f = fopen("/proc/meminfo", "re");
    if (!f) return -1;
    char line[256];
    double v = -1;
    while (fgets(line, sizeof line, f)) {
        unsigned long long kb;
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) {
            v = (double)kb * 1024.0;
            break;
        }
    }
    fclose(f);
    return v;
}

/* Address-space room under RLIMIT_AS / RLIMIT_DATA (ulimit -v, -d), -1 if
 * unlimited: the limit minus what the process maps already. */
static double rlimit_room(void)
{
    double best = -1;
    int which[2] = {RLIMIT_AS, RLIMIT_DATA};
    double vsize = -1;
    FILE *f = fopen("/proc/self/statm", "re");
    if (f) {
        unsigned long long pages;
        if (fscanf(f, "%llu", &pages) == 1) vsize = (double)pages * (double)sysconf(_SC_PAGESIZE);
        fclose(f);
    }
    for (int i = 0; i < 2; i++) {
        struct rlimit rl;
        if (getrlimit(which[i], &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) continue;
        double room = (double)rl.rlim_cur - (vsize > 0 ? vsize : 0);
        if (room < 0) room = 0;
        if (best < 0 || room < best) best = room;
    }
    return best;
}

void pt_mem_room_get(int local, pt_mem_room *r)
{
    if (local < 1) local = 1;
    const double node = mem_available(), cg = cgroup_room(), rl = rlimit_room();
    const char *what = "MemAvailable";
    double shared = node;
    if (cg >= 0 && (shared < 0 || cg < shared)) {
        shared = cg;
        what = "the control group's memory limit";
    }
    r->bytes = shared >= 0 ? shared / local : -1;
    r->whence[0] = '\0';
    if (shared >= 0)
        snprintf(r->whence, sizeof r->whence, "%s %.2f GiB shared by %d rank%s on this node", what, pt_gib(shared),
                 local, local == 1 ? "" : "s");
    if (rl >= 0 && (r->bytes < 0 || rl < r->bytes)) {
        r->bytes = rl;
        snprintf(r->whence, sizeof r->whence, "the address-space limit (ulimit -v / -d) leaves %.2f GiB", pt_gib(rl));
    }
}

int pt_mem_check(double need, int local, const char *what, const char *detail, const char *who, pt_mem_room *room)
{
    pt_mem_room r;
    pt_mem_room_get(local, &r);
    if (room) *room = r;
    if (r.bytes < 0 || need <= r.bytes) return PT_OK;
    return pt_fail(PT_ENOMEM, "%s needs %.2f GiB%s, but %s may use %.2f GiB (%s)", what, pt_gib(need),
                   detail ? detail : "", who, pt_gib(r.bytes), r.whence);
}
