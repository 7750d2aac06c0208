/* SPDX-License-Identifier: MIT */
/* ptrain-run's memory check before anything is allocated (bin/run/run.h). */
#define _GNU_SOURCE
#include "run.h"
#include "plan/cost.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

/* ---- memory -------------------------------------------------------------
 * Before anything is allocated, the plan's predicted peak per rank (the
 * cost model's arena high-water mark, pt_cost.mem_peak: parameters,
 * gradients, AdamW state and activations as lib/train and lib/model lay
 * them out, within 0.5% of the measured arena, tests/plan) is compared
 * with the memory this rank may use, so that an absurd size is refused
 * in one line instead of being killed by the kernel after minutes of
 * swapping or paging. */

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

static double gib(double b) { return b / (1024.0 * 1024.0 * 1024.0); }

/* The plan's arena peak per rank (bytes), 0 with pt_errmsg() set when the cost
 * model refuses the plan (left to the runtime's own checks). */
static double plan_peak(const run_setup *s, const pt_plan *p, long batch)
{
    const pt_gpt_config *c = &s->cfg;
    pt_model_shape m = *c;
    pt_cost cost;
    if (batch > INT_MAX || pt_cost_eval(&m, (int)batch, p, NULL, NULL, &cost) < 0) return 0;
    return cost.mem_peak;
}

/* The memory check (run.h). */
int run_check_memory(run_setup *s, int world, const run_nodes *nodes)
{
    (void)world;
    const pt_plan *p = &s->plan;
    const run_opts *o = &s->o;
    s->mem_need = plan_peak(s, p, o->batch);
    if (s->mem_need <= 0) return 0;
    int local = nodes && nodes->tpn && nodes->node >= 0 ? nodes->tpn[nodes->node] : 1;
    if (local < 1) local = 1;
    double node = mem_available(), cg = cgroup_room(), rl = rlimit_room();
    const char *what = "MemAvailable";
    double shared = node;
    if (cg >= 0 && (shared < 0 || cg < shared)) {
        shared = cg;
        what = "the control group's memory limit";
    }
    double avail = shared >= 0 ? shared / local : -1;
    char whence[200];
    if (shared >= 0)
        snprintf(whence, sizeof whence, "%s %.2f GiB shared by %d rank%s on this node", what, gib(shared), local,
                 local == 1 ? "" : "s");
    if (rl >= 0 && (avail < 0 || rl < avail)) {
        avail = rl;
        snprintf(whence, sizeof whence, "the address-space limit (ulimit -v / -d) leaves %.2f GiB", gib(rl));
    }
    s->mem_avail = avail > 0 ? avail : 0;
    if (avail < 0 || s->mem_need <= avail) return 0;
    /* what would fit, one change at a time, in the order a user would try them */
    char fits[400] = "";
    size_t off = 0;
    int n = 0;
    pt_plan q;
    if (p->dp > 1 && p->zero < 3) {
        q = *p;
        q.zero = 3;
        double need = plan_peak(s, &q, o->batch);
        if (need > 0 && need <= avail)
            off += (size_t)snprintf(fits + off, sizeof fits - off, "%s--zero 3 (%.2f GiB)", n++ ? ", " : "", gib(need));
    }
    if (p->recompute != PT_RECOMPUTE_BLOCK && off < sizeof fits) {
        q = *p;
        q.recompute = PT_RECOMPUTE_BLOCK;
        double need = plan_peak(s, &q, o->batch);
        if (need > 0 && need <= avail)
            off += (size_t)snprintf(fits + off, sizeof fits - off, "%s--recompute block (%.2f GiB)", n++ ? ", " : "",
                                    gib(need));
    }
    long per_dp = o->batch / p->dp;
    for (long mb = (long)p->microbatches * 2; mb <= per_dp && off < sizeof fits; mb *= 2) {
        if (per_dp % mb) continue;
        q = *p;
        q.microbatches = (int)mb;
        double need = plan_peak(s, &q, o->batch);
        if (need > 0 && need <= avail) {
            off += (size_t)snprintf(fits + off, sizeof fits - off, "%s--microbatches %ld (%.2f GiB)", n++ ? ", " : "",
                                    mb, gib(need));
            break;
        }
    }
    for (long b = o->batch / 2; b >= p->dp && off < sizeof fits; b /= 2) {
        long bb = b / p->dp * p->dp;
        if (bb < p->dp || (bb / p->dp) % p->microbatches) continue;
        double need = plan_peak(s, p, bb);
        if (need > 0 && need <= avail) {
            off += (size_t)snprintf(fits + off, sizeof fits - off, "%s--batch %ld (%.2f GiB)", n++ ? ", " : "", bb,
                                    gib(need));
            break;
        }
    }
    return pt_fail(PT_EINVAL, "the plan needs %.2f GiB per rank (parameters, gradients, AdamW state and activations "
                   "of --model %s L=%d C=%d T=%d, --batch %ld, dp=%d tp=%d pp=%d), but this rank may use "
                   "%.2f GiB (%s); %s%s", gib(s->mem_need), o->model, s->cfg.n_layer, s->cfg.n_embd,
                   s->cfg.seq_len, o->batch, p->dp, p->tp, p->pp, gib(avail), whence,
                   n ? "would fit: " : "no single change of --zero, --recompute, --microbatches or --batch fits: "
                       "use more ranks (tp, pp) or a smaller model",
                   fits);
}
