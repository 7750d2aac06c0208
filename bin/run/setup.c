/* SPDX-License-Identifier: MIT */
/* ptrain-run's set-up: what every rank resolves alone before the first
 * collective -- model config, plan (defaults < PTRAIN_* < flags, or
 * planned here under --mode auto), data, memory (bin/run/run.h).  Nothing
 * here communicates; a failure returns one line, and the start-up
 * agreement makes every rank leave with status 2. */
#define _GNU_SOURCE
#include "run.h"
#include "backend/gemm_bf16.h"
#include "ckpt/ckpt.h"
#include "plan/cost.h"
#include "plan/planner.h"
#include "plan/resolve.h"
#include "topo/topo.h"
#include "topo/topo_plan.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

/* The divisors of n as "1, 2, 4" into buf. */
static void divisors(int n, char *buf, size_t len)
{
    size_t off = 0;
    buf[0] = '\0';
    for (int d = 1; d <= n && off < len; d++)
        if (n % d == 0) off += (size_t)snprintf(buf + off, len - off, "%s%d", off ? ", " : "", d);
}

/* The planner's rates of this job's nodes (run.h), for the energy
 * profile that is modelled rather than measured. */
int run_node_hw(const run_opts *o, const run_nodes *nodes, pt_hw *hw, int *island_ranks, char *source, size_t len)
{
    int maxt = 1;
    for (int i = 0; i < nodes->nnodes; i++)
        if (nodes->tpn[i] > maxt) maxt = nodes->tpn[i];
    pt_topo t;
    memset(&t, 0, sizeof t);
    int loaded = 0, count = 0;
    char path[4096];
    /* the first kind's model (--topology FILE:COUNT names one per kind) */
    if (o->topology && pt_topo_plan_arg_parse("--topology", o->topology, path, sizeof path, &count) < 0) return -1;
    if (o->topology) {
        if (pt_topo_load_file(&t, path) != PT_OK)
            return pt_fail(PT_EINVAL, "cannot load the node model %s: %s (valid: a ptrain-topo --save JSON or hwloc XML file)",
                      path, pt_errmsg());
        loaded = 1;
        snprintf(source, len, "%.290s", path);
    } else if (pt_topo_load_hwloc(&t, NULL) == PT_OK) {
        loaded = 1;
        snprintf(source, len, "hwloc (this node)");
    } else {
        pt_topo_free(&t);
        memset(&t, 0, sizeof t);
        snprintf(source, len, "defaults");
    }
    int rc = pt_topo_plan_hw(loaded ? &t : NULL, maxt, NULL, hw, island_ranks, NULL, 0);
    if (loaded) pt_topo_free(&t);
    if (rc < 0) return pt_fail(PT_EINVAL, "node model %s: %s", source, pt_errmsg());
    return 0;
}

/* --mode auto under plain mpirun (no plugin plan): the cluster is the
 * job's nodes (nodes->tpn) with the rates of the node model (--topology /
 * PTRAIN_TOPOLOGY, else this node's hwloc model, else pt_topo_plan_hw's
 * estimates for a one-NUMA-node machine: pt_topo_plan_load), or of each
 * kind's model for --topology FILE:COUNT given once per kind of node (the
 * counts, in node order, add up to the job's nodes: mixed nodes, planned
 * as ptrain-plan and the plugin's node_models plan them), and the planning
 * handle (lib/plan/planner.h) plans the request r exactly as the plugin
 * and ptrain-plan do.  Every rank computes it; the start-up agreement
 * compares the plans. */
static int plan_auto(const run_opts *o, const run_nodes *nodes, const pt_plan_request *r, pt_plan *p, run_auto *A)
{
    const int nkinds = o->ntopologies > 0 ? o->ntopologies : 1;
    char(*path)[4096] = calloc((size_t)nkinds, sizeof *path);
    int count[RUN_MAX_TOPOLOGIES] = {0}, counted = 0, sum = 0;
    if (!path) return pt_fail(PT_ENOMEM, "--mode auto: out of memory for the node models");
    for (int k = 0; k < o->ntopologies; k++) {
        if (pt_topo_plan_arg_parse("--topology", o->topologies[k], path[k], sizeof path[k], &count[k]) < 0) {
            free(path);
            return -1;
        }
        counted += count[k] > 0;
        sum += count[k];
    }
    if (nkinds > 1 && counted < nkinds) {
        free(path);
        return pt_fail(PT_EINVAL, "--mode auto: with %d --topology options each needs its node count (valid: FILE:COUNT "
                       "in node order, e.g. --topology a.xml:4 --topology b.xml:2)", nkinds);
    }
    if (counted && sum != nodes->nnodes) {
        free(path);
        return pt_fail(PT_EINVAL, "--mode auto: the --topology counts add up to %d node%s, but the job runs on %d "
                       "(valid: counts that add up to %d, in node order)", sum, sum == 1 ? "" : "s",
                       nodes->nnodes, nodes->nnodes);
    }
    pt_topo t[RUN_MAX_TOPOLOGIES];
    const pt_topo *models[RUN_MAX_TOPOLOGIES];
    char names[RUN_MAX_TOPOLOGIES][256];
    const char *namep[RUN_MAX_TOPOLOGIES];
    int from = PT_TOPO_FROM_NONE;
    for (int k = 0; k < nkinds; k++) {
        const char *pk = o->ntopologies ? path[k] : NULL;
        if (pt_topo_plan_load(pk, "--topology", PT_TOPO_LOAD_ESTIMATES, &t[k], &from, NULL, 0) < 0) {
            for (int j = 0; j < k; j++)
                if (models[j]) pt_topo_free(&t[j]);
            pt_fail(PT_EINVAL, "--mode auto: cannot load the node model %s: %s (valid: a ptrain-topo --save JSON or hwloc "
                    "XML file)", pk ? pk : "of this node", pt_errmsg());
            free(path);
            return -1;
        }
        models[k] = from != PT_TOPO_FROM_NONE ? &t[k] : NULL;
        /* as ptrain-plan names each kind */
        snprintf(names[k], sizeof names[k], "%.255s", models[k] ? t[k].source : "defaults");
        namep[k] = names[k];
    }
    char source[300];
    if (nkinds > 1) {
        size_t off = 0;
        for (int k = 0; k < nkinds && off < sizeof source; k++)
            off += (size_t)snprintf(source + off, sizeof source - off, "%s%s:%d", k ? ", " : "", path[k], count[k]);
    } else if (from == PT_TOPO_FROM_PATH) snprintf(source, sizeof source, "%.290s", path[0]);
    else if (from == PT_TOPO_FROM_HWLOC) snprintf(source, sizeof source, "hwloc (this node)");
    else snprintf(source, sizeof source, "defaults");
    free(path);
    /* each node's kind, in node order (one kind: NULL, every node kind 0) */
    int *kind_of = NULL;
    if (nkinds > 1) {
        kind_of = malloc(sizeof(int) * (size_t)nodes->nnodes);
        if (!kind_of) {
            for (int k = 0; k < nkinds; k++) pt_topo_free(&t[k]);
            return pt_fail(PT_ENOMEM, "--mode auto: out of memory for the node list");
        }
        for (int i = 0, k = 0, left = count[0]; i < nodes->nnodes; i++) {
            while (left == 0 && k + 1 < nkinds) left = count[++k];
            kind_of[i] = k;
            left--;
        }
    }
    pt_plan_machine mach;
    int rc = pt_plan_machine_build(&mach, nkinds, models, nkinds > 1 ? namep : NULL, kind_of, nodes->tpn,
                                   nodes->nnodes, NULL, 0);
    for (int k = 0; k < nkinds; k++)
        if (models[k]) pt_topo_free(&t[k]);
    free(kind_of);
    if (rc < 0) return pt_fail(PT_EINVAL, "--mode auto: node model %s: %s", source, pt_errmsg());
    pt_plan_limits lim;
    pt_plan_limits_default(&lim);
    lim.flag_prefix = "--"; /* the planner's messages name our flags */
    pt_planner *pl = pt_planner_new(&mach.cluster, &lim);
    if (!pl || pt_planner_set_request(pl, r) < 0 || pt_planner_run(pl) < 0) {
        pt_planner_free(pl);
        pt_plan_machine_free(&mach);
        return pt_fail(PT_EINVAL, "--mode auto: %s", pt_errmsg());
    }
    *p = *pt_planner_plan(pl);
    A->res = *pt_planner_result(pl);
    snprintf(A->notes, sizeof A->notes, "%s", pt_planner_notes(pl));
    pt_planner_free(pl);
    pt_plan_machine_free(&mach);
    A->on = 1;
    A->m = r->model;
    size_t off = (size_t)snprintf(A->machine, sizeof A->machine, "%d node%s x ", nodes->nnodes, nodes->nnodes == 1 ? "" : "s");
    int uniform = 1;
    for (int i = 1; i < nodes->nnodes; i++) uniform &= nodes->tpn[i] == nodes->tpn[0];
    if (uniform) off += (size_t)snprintf(A->machine + off, sizeof A->machine - off, "%d tasks", nodes->tpn[0]);
    else
        for (int i = 0; i < nodes->nnodes && off < sizeof A->machine; i++)
            off += (size_t)snprintf(A->machine + off, sizeof A->machine - off, "%s%d", i ? "," : "(", nodes->tpn[i]);
    if (!uniform && off < sizeof A->machine) off += (size_t)snprintf(A->machine + off, sizeof A->machine - off, ") tasks");
    if (off < sizeof A->machine) snprintf(A->machine + off, sizeof A->machine - off, ", node model %s", source);
    return 0;
}

/* The request of --mode auto (lib/plan/planner.h's builder): the flags
 * given, pinned; the PTRAIN_* variables for what no flag gives (unless
 * re-planning over a plugin plan: its variables are its choice, not the
 * user's pins); the model and batch this run trains. */
static int auto_request(const run_opts *o, const pt_gpt_config *cfg, int from_env, pt_plan_request *r)
{
    pt_plan_request_init(r, PT_MODE_AUTO);
    r->pinned |= PT_PIN_MODE;
    pt_plan *q = &r->plan;
#define PIN(cond, field, value, bit) \
    do {                             \
        if (cond) {                  \
            q->field = (value);      \
            r->pinned |= (bit);      \
        }                            \
    } while (0)
    PIN(o->tp, tp, (int)o->tp, PT_PIN_TP);
    PIN(o->tp_depth, tp_depth, (int)o->tp_depth, PT_PIN_TP_DEPTH);
    PIN(o->sp, sp, (int)o->sp, PT_PIN_SP);
    PIN(o->pp, pp, (int)o->pp, PT_PIN_PP);
    PIN(o->microbatches, microbatches, (int)o->microbatches, PT_PIN_MICROBATCHES);
    PIN(o->virtual_stages, virtual_stages, (int)o->virtual_stages, PT_PIN_VIRTUAL_STAGES);
    PIN(o->schedule >= 0, schedule, o->schedule, PT_PIN_SCHEDULE);
    PIN(o->zero >= 0, zero, o->zero, PT_PIN_ZERO);
    PIN(o->recompute >= 0, recompute, o->recompute, PT_PIN_RECOMPUTE);
    PIN(o->precision >= 0, precision, o->precision, PT_PIN_PRECISION);
#undef PIN
    if (o->pp_split) {
        if (pt_plan_split_parse("--pp-split", o->pp_split, q) < 0) return -1;
        r->pinned |= PT_PIN_SPLIT;
    }
    if (o->rank_order) memcpy(q->rank_order, o->rank_order, sizeof q->rank_order), r->pinned |= PT_PIN_RANK_ORDER;
    if (o->tp_order) memcpy(q->tp_order, o->tp_order, sizeof q->tp_order), r->pinned |= PT_PIN_TP_ORDER;
    /* the model and batch this run trains (already from PTRAIN_MODEL and
     * PTRAIN_BATCH when no flag gave them) */
    snprintf(r->model_name, sizeof r->model_name, "%.63s", o->model);
    r->model = (pt_model_shape){cfg->n_layer, cfg->n_head, cfg->n_embd, cfg->seq_len, cfg->vocab};
    if (o->batch > INT_MAX) return pt_fail(PT_EINVAL, "--batch %ld is too large (valid: at most %d)", o->batch, INT_MAX);
    r->global_batch = (int)o->batch;
    r->pinned |= PT_PIN_MODEL | PT_PIN_BATCH;
    if (from_env && pt_plan_request_env(r, NULL, pt_plan_getenv, NULL) < 0) return -1;
    return 0;
}

/* Resolve the plan: defaults < PTRAIN_* environment < flags.  When dp is
 * not given it is world / (tp * pp * sp).  A plan that does not fit the
 * world is refused listing the tp (or sp) values that would (pt_plan_list_tp,
 * pt_plan_validate).  Mode auto (--mode auto, or PTRAIN_MODE=auto) is
 * planned here by the planning handle, the sizes given by flags or PTRAIN_*
 * variables pinned, exactly as the plugin plans it; --mode auto beside a
 * plugin plan re-plans from the flags alone (the plugin's variables are its
 * choice, not the user's pins).  A plugin plan never says auto (it exports
 * the mode it chose), so PTRAIN_MODE=auto is always the user's request. */
static int resolve_plan(const run_opts *o, const pt_gpt_config *cfg, int world, const run_nodes *nodes, pt_plan *p,
                        const char **source, run_auto *A)
{
    /* the request: sizes 0 and zero -1 = not given, rank order "" = not given */
    pt_plan_default(p);
    p->dp = p->pp = p->tp = p->tp_depth = p->sp = p->microbatches = p->virtual_stages = 0;
    p->zero = -1;
    p->schedule = -1;
    p->rank_order[0] = '\0';
    p->tp_order[0] = '\0';
    pt_mode flag_mode = PT_MODE_OFF;
    if (o->mode && pt_mode_parse(o->mode, &flag_mode)) return pt_fail(PT_EINVAL, "--mode: %s", pt_errmsg());
    const char *plugin_plan = getenv("PTRAIN_PLAN");
    int replan = o->mode && flag_mode == PT_MODE_AUTO && plugin_plan;
    const char *env_mode = getenv("PTRAIN_MODE");
    pt_mode em = PT_MODE_OFF;
    const int env_auto = !replan && !o->mode && env_mode && pt_mode_parse(env_mode, &em) == 0 && em == PT_MODE_AUTO;
    if ((o->mode && flag_mode == PT_MODE_AUTO) || env_auto) {
        pt_plan_request r;
        if (auto_request(o, cfg, !replan, &r) < 0) return -1;
        if (plan_auto(o, nodes, &r, p, A) < 0) return -1;
        /* what the planner does not choose: dp follows (an order the user
         * gave was the search's pin, so the plan was priced with it) */
        if (o->dp && p->dp != o->dp)
            return pt_fail(PT_EINVAL, "--mode auto planned dp=%d (%s), not --dp %ld: pin --tp, --pp and --sp instead of --dp",
                      p->dp, A->machine, o->dp);
        *source = replan ? "auto, re-planned over the plugin's plan" : "auto";
        return pt_plan_validate(p, world) ? -1 : 0;
    }
    int from_env = pt_plan_from_env(p);
    if (from_env < 0) return -1;
    *source = from_env ? (getenv("SLURM_JOB_ID") ? "slurm" : "env") : "flags";
    if (o->mode) p->mode = flag_mode;
    if (o->tp) p->tp = (int)o->tp;
    if (o->tp_depth) p->tp_depth = (int)o->tp_depth;
    if (o->sp) p->sp = (int)o->sp;
    if (o->dp) p->dp = (int)o->dp;
    if (o->pp) p->pp = (int)o->pp;
    if (o->microbatches) p->microbatches = (int)o->microbatches;
    if (o->virtual_stages) p->virtual_stages = (int)o->virtual_stages;
    if (o->schedule >= 0) p->schedule = o->schedule;
    if (o->zero >= 0) p->zero = o->zero;
    if (o->recompute >= 0) p->recompute = o->recompute;
    if (o->precision >= 0) p->precision = o->precision;
    if (o->pp_split && pt_plan_split_parse("--pp-split", o->pp_split, p) < 0) return -1;
    if (o->rank_order) memcpy(p->rank_order, o->rank_order, sizeof p->rank_order);
    if (o->tp_order) memcpy(p->tp_order, o->tp_order, sizeof p->tp_order);
    /* not planned here: the sizes not given are the defaults */
    pt_plan d;
    pt_plan_default(&d);
    if (!p->pp) p->pp = d.pp;
    if (!p->tp) p->tp = d.tp;
    if (!p->tp_depth) p->tp_depth = d.tp_depth;
    if (!p->sp) p->sp = d.sp;
    if (!p->microbatches) p->microbatches = d.microbatches;
    if (!p->virtual_stages) p->virtual_stages = d.virtual_stages;
    if (p->zero < 0) p->zero = d.zero;
    if (p->schedule < 0) p->schedule = d.schedule;
    if (!p->rank_order[0]) memcpy(p->rank_order, d.rank_order, sizeof p->rank_order);
    if (!p->tp_order[0]) memcpy(p->tp_order, d.tp_order, sizeof p->tp_order);
    /* off: nothing was planned, run the sizes given with 1d layers */
    if (p->mode == PT_MODE_OFF) p->mode = PT_MODE_1D;
    long long inner = (long long)p->tp * p->pp * p->sp;
    if (!o->dp && (p->dp == 0 || o->tp || o->sp || o->tp_depth || o->pp)) {
        if (inner < 1 || world % inner) {
            char valid[256];
            if (p->pp < 1 || world % p->pp) { /* the pipeline alone does not fit: say so, not tp */
                divisors(world, valid, sizeof valid);
                return pt_fail(PT_EINVAL, "--mode %s with %d ranks: pp=%d does not divide the world (valid pp here: "
                               "%s)", pt_mode_name(p->mode), world, p->pp, valid);
            }
            if (p->sp > 1) {
                int n = world % ((long long)p->tp * p->pp) ? world : world / (p->tp * p->pp);
                pt_plan_list_tp(PT_MODE_1D, 1, n, world, valid, sizeof valid);
                return pt_fail(PT_EINVAL, "--mode %s with %d ranks: sp=%d does not divide the world (with tp=%d, "
                          "pp=%d; valid sp here: %s)", pt_mode_name(p->mode), world, p->sp, p->tp,
                          p->pp, valid);
            }
            int n = world % p->pp ? world : world / p->pp;
            int k = pt_plan_list_tp(p->mode, p->mode == PT_MODE_2P5D ? p->tp_depth : 1, n, world,
                                    valid, sizeof valid);
            return pt_fail(PT_EINVAL, "--mode %s with %d ranks: tp=%d does not divide the world (with pp=%d, "
                      "sp=%d; valid tp%s here: %s)", pt_mode_name(p->mode), world, p->tp, p->pp,
                      p->sp, p->mode == PT_MODE_2P5D ? " for this tp_depth" : "",
                      k ? valid : "none");
        }
        p->dp = (int)(world / inner);
    }
    return pt_plan_validate(p, world) ? -1 : 0;
}

/* In-memory random shard for tests and benchmarks (--data synthetic[:SEED]). */
static uint16_t *synthetic_shard(pt_shard *s, const char *spec, int vocab, long ntok)
{
    long seed = 1;
    const char *colon = strchr(spec, ':');
    if (colon && pt_parse_int("--data synthetic:SEED", colon + 1, 0, 0x7fffffffL, &seed)) {
        return NULL;
    }
    uint16_t *t = malloc(sizeof(uint16_t) * (size_t)ntok);
    if (!t) {
        pt_fail(PT_ENOMEM, "synthetic data: out of memory");
        return NULL;
    }
    pt_rng r;
    pt_rng_seed(&r, (uint64_t)seed, 7);
    for (long i = 0; i < ntok; i++) t[i] = (uint16_t)(pt_rng_u64(&r) % (uint64_t)vocab);
    memset(s, 0, sizeof *s);
    s->tokens = t;
    s->ntokens = (uint64_t)ntok;
    s->vocab_size = (uint32_t)vocab;
    s->eot_id = (uint32_t)(vocab - 1);
    return t;
}

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
    pt_model_shape m = {c->n_layer, c->n_head, c->n_embd, c->seq_len, c->vocab};
    pt_cost cost;
    if (batch > INT_MAX || pt_cost_eval(&m, (int)batch, p, NULL, NULL, &cost) < 0) return 0;
    return cost.mem_peak;
}

static int check_memory(run_setup *s, int world, const run_nodes *nodes)
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

/* Divisors of n in [1, cap] as "1, 2, 4" into buf. */
static void divisors_text(int n, int cap, char *buf, size_t len)
{
    size_t off = 0;
    buf[0] = '\0';
    for (int d = 1; d <= n && d <= cap && off < len; d++)
        if (n % d == 0) off += (size_t)snprintf(buf + off, len - off, "%s%d", off ? ", " : "", d);
}

int run_setup_rank(int argc, char **argv, int world, const run_nodes *nodes, run_setup *s)
{
    memset(s, 0, sizeof *s);
    run_opts *o = &s->o;
    if (run_parse_args(argc, argv, o) < 0) return -1;
    pt_gpt_config *cfg = &s->cfg;
    {   /* a preset name or L,H,C,T,V (the names of lib/plan/cost.h, shared with the plugin) */
        pt_model_shape ms;
        if (pt_model_shape_parse(o->model_what, o->model, &ms) < 0) return PT_EINVAL;
        *cfg = (pt_gpt_config){ms.n_layer, ms.n_head, ms.n_embd, ms.seq_len, ms.vocab};
    }
    if (o->layers) cfg->n_layer = o->layers;
    if (o->heads) cfg->n_head = o->heads;
    if (o->embd) cfg->n_embd = o->embd;
    if (o->seq_len) cfg->seq_len = o->seq_len;
    if (o->vocab) cfg->vocab = o->vocab;
    if (cfg->n_head < 1 || cfg->n_embd % cfg->n_head) {
        char valid[256];
        divisors_text(cfg->n_embd, 4096, valid, sizeof valid);
        return pt_fail(PT_EINVAL, "--heads %d does not divide the embedding width %d (valid --heads for --embd %d: %s)",
                  cfg->n_head, cfg->n_embd, cfg->n_embd, valid);
    }

    pt_plan *plan = &s->plan;
    if (resolve_plan(o, cfg, world, nodes, plan, &s->source, &s->aut) < 0) return -1;
    {   /* the model and batch the plugin's plan was made for (PTRAIN_MODEL,
         * PTRAIN_BATCH beside its PTRAIN_PLAN), for the start-up agreement */
        const char *pp = getenv("PTRAIN_PLAN"), *em = getenv("PTRAIN_MODEL"), *eb = getenv("PTRAIN_BATCH");
        char *end = NULL;
        if (pp && !s->aut.on && em && *em && eb && *eb &&
            pt_model_shape_parse("PTRAIN_MODEL", em, &s->plan_model) == 0) {
            s->plan_batch = strtol(eb, &end, 10);
            if (end && !*end && s->plan_batch > 0) {
                s->planned_for = 1;
                snprintf(s->plan_model_text, sizeof s->plan_model_text, "%.63s", em);
            }
        }
    }
    if (plan->mode == PT_MODE_1D && pt_gpt_check_tp(cfg, plan->tp)) {
        /* the 1d sizes that divide both the world and the heads: the mode
         * table's list over their greatest common divisor (1 always fits) */
        int g = world, h = cfg->n_head;
        while (h) {
            int t = g % h;
            g = h;
            h = t;
        }
        char valid[256];
        pt_plan_list_tp(PT_MODE_1D, 1, g, world, valid, sizeof valid);
        return pt_fail(PT_EINVAL, "%s; with %d ranks use --tp one of: %s", pt_errmsg(), world, valid);
    }
    if (o->batch % plan->dp)
        return pt_fail(PT_EINVAL, "--batch %ld is not a multiple of dp=%d (each data-parallel rank takes batch/dp sequences); try --batch %ld",
                  o->batch, plan->dp, (o->batch / plan->dp + 1) * plan->dp);
    {
        /* stages against the layers, the split's sum, microbatches against batch/dp */
        if (pt_plan_check_model(plan, cfg->n_layer, (int)(o->batch / plan->dp)) < 0)
            return pt_fail(PT_EINVAL, "%s (--batch %ld, dp=%d, --layers %d)", pt_errmsg(), o->batch, plan->dp, cfg->n_layer);
    }
    if (o->warmup < 0) o->warmup = o->steps / 10 < 100 ? o->steps / 10 : 100;
    if (o->min_lr < 0) o->min_lr = o->lr / 10;
    if (o->dry_run) return 0;
    /* bf16: the GEMM's choice (PTRAIN_BF16_GEMM or the ISA rule) now, so a
     * bad or unavailable choice is one start-up line, not an abort at the
     * first matmul */
    if (plan->precision == PT_PREC_BF16 && pt_gemm_bf16_select() != PT_OK)
        return pt_fail(PT_EINVAL, "--precision bf16: %s", pt_errmsg());
    /* where to train: before the memory check, which is the host's */
    if (run_resolve_device(o, &s->device, s->device_note, sizeof s->device_note) < 0) return -1;
    /* the MFU's peak: given, else the rate the planner prices one rank's
     * GEMMs at (the node model: a GPU's data-sheet peak, a CPU's measured
     * or estimated sgemm rate times its cores), so every train record has
     * an MFU and the header says against what */
    if (o->peak_gflops > 0) {
        snprintf(s->peak_source, sizeof s->peak_source, "%s", o->peak_what ? o->peak_what : "given");
    } else {
        pt_hw hw;
        int island = 0;
        char src[300];
        memset(&hw, 0, sizeof hw);
        /* in the run's precision: a bf16 run against the bf16 GEMM rate */
        const double rate = run_node_hw(o, nodes, &hw, &island, src, sizeof src) == 0
                                ? pt_hw_gemm_gflops(&hw, (int)s->plan.precision) : 0;
        if (rate > 0) {
            o->peak_gflops = rate;
            snprintf(s->peak_source, sizeof s->peak_source, "the node model's %s GEMM rate per rank (%.300s)",
                     s->plan.precision == PT_PREC_BF16 && hw.gemm_gflops_bf16 > 0 ? "bf16" : "fp32", src);
        }
    }
    if (check_memory(s, world, nodes) < 0) return -1;
    /* energy: the plan and profile files against this plan (bin/run/energy.c) */
    if (run_energy_setup(s, nodes) < 0) return -1;

    /* --save-dir (lib/ckpt): usable now rather than at the first save
     * (every rank writes its rank file there: each creates it when absent
     * and writes and removes a probe file), and this job's alone for the
     * run (rank 0 holds its lock; the descriptor stays open until exit) */
    if (o->save_dir) {
        static int save_lock = -1;
        if (pt_ckpt_dir_check(o->save_dir)) return pt_fail(PT_EINVAL, "--save-dir: %s", pt_errmsg());
        int rc = run_rank == 0 ? pt_ckpt_dir_lock(o->save_dir, getenv("SLURM_JOB_ID"), &save_lock) : PT_OK;
        if (rc == PT_EUNSUPP) fprintf(stderr, "ptrain-run: warning: %s\n", pt_errmsg());
        else if (rc) return pt_fail(PT_EINVAL, "--save-dir: %s", pt_errmsg());
    }

    /* data: opened here, so that a rank that cannot read it fails in the
     * start-up agreement and the data's identity is agreed on */
    const int T = cfg->seq_len;
    if (!o->data) return pt_fail(PT_EINVAL, "--data is required: a directory made by 'ptrain-data prepare', llm.c shards, nanogpt:DIR or 'synthetic'");
    if (strncmp(o->data, "synthetic", 9) == 0 && (o->data[9] == 0 || o->data[9] == ':')) {
        s->synth_train = synthetic_shard(&s->train, o->data, cfg->vocab, 1 << 20);
        if (!s->synth_train) return -1;
        s->synth_val = synthetic_shard(&s->val, o->data, cfg->vocab, 1 << 16);
        if (!s->synth_val) return -1;
        /* generated from (spec, vocab): their hash stands for the checksum */
        uint64_t h = pt_fnv1a64(o->data, strlen(o->data)) ^ (uint64_t)cfg->vocab;
        s->data_id[0] = s->train.ntokens;
        s->data_id[1] = h;
        s->data_id[2] = s->val.ntokens;
        s->data_id[3] = h + 1;
    } else {
        /* every format of lib/data (shard.h): ptrain-data prepare's set, llm.c
         * shards, nanogpt:DIR (ids checked against the model's vocabulary) */
        int rc = pt_dataset_open(o->data, (uint32_t)(cfg->vocab < 65536 ? cfg->vocab : 65536), &s->train, &s->val);
        if (rc) return pt_fail(PT_EINVAL, "data: %s", pt_errmsg());
        if (s->train.vocab_size > (uint32_t)cfg->vocab)
            return pt_fail(PT_EINVAL, "data vocabulary %u is larger than the model's %d (--vocab)", s->train.vocab_size, cfg->vocab);
        if (s->train.ntokens < (uint64_t)T + 2 || s->val.ntokens < (uint64_t)T + 2)
            return pt_fail(PT_EINVAL, "data in %s is too short for seq_len %d (train %llu, val %llu tokens)", o->data, T,
                      (unsigned long long)s->train.ntokens, (unsigned long long)s->val.ntokens);
        s->data_id[0] = s->train.ntokens;
        s->data_id[1] = s->train.checksum;
        s->data_id[2] = s->val.ntokens;
        s->data_id[3] = s->val.checksum;
    }
    return 0;
}

void run_setup_free(run_setup *s)
{
    run_energy_setup_free(s);
    if (s->synth_train || s->synth_val) {
        free(s->synth_train);
        free(s->synth_val);
    } else {
        pt_shard_close(&s->train);
        pt_shard_close(&s->val);
    }
    s->synth_train = s->synth_val = NULL;
}
