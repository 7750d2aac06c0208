/* SPDX-License-Identifier: MIT */
/* Helpers of the ptrain SPANK plugin that need no Slurm; see spank_util.h. */
#include "spank/spank_util.h"
#include "core/core.h"
#include "core/file.h"
#include "plan/cost.h"
#include "energy/nvml.h"
#include "plan/planner.h"

#include <ctype.h>
#include <errno.h>
#include <libconfig.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_COUNT (1 << 20)


/* Decimal digits at *p into *v (1..MAX_COUNT); advances *p. */
static int take_count(const char **p, long *v)
{
    const char *s = *p;
    if (!isdigit((unsigned char)*s)) return -1;
    long x = 0;
    while (isdigit((unsigned char)*s)) {
        x = x * 10 + (*s - '0');
        if (x > MAX_COUNT) return -1;
        s++;
    }
    *p = s;
    *v = x;
    return 0;
}

int pt_spank_parse_tasks_per_node(const char *s, int *out, int cap, int *nnodes, pt_error *err)
{
    if (!s || !*s)
        return pt_errprintf(err, "empty tasks-per-node list (valid: e.g. \"2(x3),1\")");
    const char *p = s;
    int n = 0;
    for (;;) {
        long count, reps = 1;
        if (take_count(&p, &count) < 0 || count < 1) goto bad;
        if (*p == '(') {
            if (p[1] != 'x') goto bad;
            p += 2;
            if (take_count(&p, &reps) < 0 || reps < 1 || *p != ')') goto bad;
            p++;
        }
        if (reps > cap - n)
            return pt_errprintf(err, "tasks-per-node list '%s' names more than %d nodes", s,
                             cap);
        for (long i = 0; i < reps; i++) out[n++] = (int)count;
        if (*p == '\0') break;
        if (*p != ',') goto bad;
        p++;
    }
    *nnodes = n;
    return 0;
bad:
    return pt_errprintf(err, "malformed tasks-per-node list '%s' at offset %d (valid: "
                     "comma-separated N or N(xR) with N, R >= 1, e.g. \"2(x3),1\")", s,
                     (int)(p - s));
}

int pt_spank_hostlist_expand(const char *list, char *names, size_t len, int cap, int *n, pt_error *err)
{
    *n = 0;
    if (!list || !*list) return pt_errprintf(err, "empty host list");
    const char *p = list;
    while (*p) {
        /* one item: prefix [ranges] suffix, up to the next ',' outside brackets */
        const char *open = NULL, *close = NULL, *end = p;
        while (*end && *end != ',') {
            if (*end == '[') {
                if (open) return pt_errprintf(err, "more than one '[' in a name of host list '%s'", list);
                open = end;
                close = strchr(end, ']');
                if (!close) return pt_errprintf(err, "unbalanced '[' in host list '%s'", list);
                end = close + 1;
                continue;
            }
            if (*end == ']') return pt_errprintf(err, "unbalanced ']' in host list '%s'", list);
            end++;
        }
        if (end == p) return pt_errprintf(err, "empty name in host list '%s'", list);
        if (!open) {
            if ((size_t)(end - p) >= len) return pt_errprintf(err, "host name in '%s' is longer than %zu bytes", list, len - 1);
            if (*n >= cap) return pt_errprintf(err, "host list '%s' has more than %d names", list, cap);
            snprintf(names + (size_t)*n * len, len, "%.*s", (int)(end - p), p);
            (*n)++;
        } else {
            const size_t plen = (size_t)(open - p), slen = (size_t)(end - close - 1);
            if (close == open + 1) return pt_errprintf(err, "empty range '[]' in host list '%s'", list);
            for (const char *r = open + 1; r < close;) {
                /* a range "lo" or "lo-hi", digits only, width of lo kept */
                const char *d = r;
                while (d < close && isdigit((unsigned char)*d)) d++;
                const int width = (int)(d - r);
                if (width == 0 || width > 9) return pt_errprintf(err, "empty or non-numeric range in host list '%s'", list);
                long lo = strtol(r, NULL, 10), hi = lo;
                if (*d == '-') {
                    const char *h = ++d;
                    while (d < close && isdigit((unsigned char)*d)) d++;
                    if (d == h || d - h > 9) return pt_errprintf(err, "empty or non-numeric range in host list '%s'", list);
                    hi = strtol(h, NULL, 10);
                }
                if (d < close && *d != ',') return pt_errprintf(err, "malformed range in host list '%s'", list);
                if (hi < lo || hi - lo >= 65536)
                    return pt_errprintf(err, "range %ld-%ld in host list '%s' is reversed or longer than 65536 names", lo, hi,
                                        list);
                for (long v = lo; v <= hi; v++) {
                    if (*n >= cap) return pt_errprintf(err, "host list '%s' has more than %d names", list, cap);
                    char num[16];
                    snprintf(num, sizeof num, "%0*ld", width, v);
                    if (plen + strlen(num) + slen >= len)
                        return pt_errprintf(err, "host name in '%s' is longer than %zu bytes", list, len - 1);
                    snprintf(names + (size_t)*n * len, len, "%.*s%s%.*s", (int)plen, p, num, (int)slen, close + 1);
                    (*n)++;
                }
                r = d < close ? d + 1 : d;
            }
        }
        p = *end ? end + 1 : end;
        if (*end && !*p) return pt_errprintf(err, "empty name at the end of host list '%s'", list);
    }
    return 0;
}

int pt_spank_hostlist_has(const char *list, const char *name, pt_error *err)
{
    enum { CAP = 4096, LEN = 256 };
    char *names = malloc((size_t)CAP * LEN);
    if (!names) return pt_errprintf(err, "out of memory expanding host list '%s'", list ? list : "");
    int n = 0, found = 0;
    if (pt_spank_hostlist_expand(list, names, LEN, CAP, &n, err) < 0) {
        free(names);
        return -1;
    }
    for (int i = 0; i < n && !found; i++) found = strcmp(names + (size_t)i * LEN, name) == 0;
    free(names);
    return found;
}

static int cmp_name(const void *a, const void *b) { return strcmp(a, b); }

int pt_spank_node_kinds(const pt_spank_conf *c, const char *nodelist, int nnodes, int *kind_of, pt_error *err)
{
    enum { LEN = 256, PATTERN_CAP = 65536 };
    for (int i = 0; i < nnodes; i++) kind_of[i] = -1;
    if (!c || c->n_node_models == 0) return 0;
    char *nodes = malloc((size_t)(nnodes > 0 ? nnodes : 1) * LEN), *pat = malloc((size_t)PATTERN_CAP * LEN);
    int n = 0, rc = 0;
    if (!nodes || !pat) {
        rc = pt_errprintf(err, "out of memory matching %d nodes to node_models", nnodes);
        goto out;
    }
    if (pt_spank_hostlist_expand(nodelist, nodes, LEN, nnodes, &n, err) < 0) {
        rc = -1;
        goto out;
    }
    if (n != nnodes) {
        rc = pt_errprintf(err, "the step's node list '%.200s' names %d nodes, the step has %d", nodelist, n, nnodes);
        goto out;
    }
    for (int m = 0; m < c->n_node_models; m++) {
        int np = 0;
        if (pt_spank_hostlist_expand(c->node_model[m].hosts, pat, LEN, PATTERN_CAP, &np, err) < 0) {
            rc = -1;
            goto out;
        }
        qsort(pat, (size_t)np, LEN, cmp_name);
        for (int i = 0; i < nnodes; i++)
            if (kind_of[i] < 0 && bsearch(nodes + (size_t)i * LEN, pat, (size_t)np, LEN, cmp_name)) kind_of[i] = m;
    }
out:
    free(nodes);
    free(pat);
    return rc;
}

int pt_spank_first_host(const char *list, char *out, size_t outlen, pt_error *err)
{
    if (!list || !*list) return pt_errprintf(err, "empty host list");
    const char *p = list;
    size_t k = 0;
    while (*p && *p != ',' && *p != '[') {
        if (k + 1 >= outlen) goto too_long;
        out[k++] = *p++;
    }
    if (*p == '[') {
        /* First range of the bracket: "001-003,7" -> "001". */
        const char *q = p + 1;
        const char *close = strchr(q, ']');
        if (!close) return pt_errprintf(err, "unbalanced '[' in host list '%s'", list);
        size_t digits = 0;
        while (q + digits < close && isdigit((unsigned char)q[digits])) digits++;
        if (digits == 0)
            return pt_errprintf(err, "empty or non-numeric range in host list '%s'", list);
        char after = q[digits];
        if (after != '-' && after != ',' && after != ']')
            return pt_errprintf(err, "malformed range in host list '%s'", list);
        if (k + digits >= outlen) goto too_long;
        memcpy(out + k, q, digits);
        k += digits;
        /* A suffix after the bracket ("n[1-2]-ib") belongs to the name. */
        p = close + 1;
        while (*p && *p != ',' && *p != '[') {
            if (k + 1 >= outlen) goto too_long;
            out[k++] = *p++;
        }
    }
    if (k == 0) return pt_errprintf(err, "host list '%s' starts with an empty name", list);
    out[k] = '\0';
    return 0;
too_long:
    return pt_errprintf(err, "first host name in '%s' is longer than %zu bytes", list,
                     outlen ? outlen - 1 : 0);
}

int pt_spank_master_port(uint32_t job_id, uint32_t step_id, int base, int count)
{
    if (count < 1) count = 1;
    uint64_t slot = ((uint64_t)job_id * 64u + (step_id % 64u)) % (uint64_t)count;
    return base + (int)slot;
}

/* every precision (pt_precision) */
#define ALL_PRECISIONS ((1u << PT_PREC_FP32) | (1u << PT_PREC_BF16))

void pt_spank_conf_default(pt_spank_conf *c)
{
    c->default_mode = PT_MODE_OFF;
    c->max_tp = 64;
    c->allowed_modes = (1u << PT_MODE_OFF) | (1u << PT_MODE_AUTO) | (1u << PT_MODE_1D) |
                       (1u << PT_MODE_2D) | (1u << PT_MODE_2P5D) | (1u << PT_MODE_3D);
    c->master_port_base = 29500;
    c->master_port_count = 1000;
    c->max_pp = 64;
    c->default_zero = 0;
    c->max_zero = 3;
    c->default_schedule = PT_SCHED_1F1B;
    c->allowed_schedules = (1u << PT_SCHED_1F1B) | (1u << PT_SCHED_GPIPE) |
                           (1u << PT_SCHED_INTERLEAVED);
    c->default_recompute = PT_RECOMPUTE_NONE;
    c->default_precision = PT_PREC_FP32;
    c->allowed_precisions = ALL_PRECISIONS;
    c->topology[0] = '\0';
    c->inter_node_gbps = 0;
    c->inter_node_lat_us = 0;
    c->gemm_gflops = 0;
    c->gemm_gflops_bf16 = 0;
    c->bind = PT_SPANK_BIND_AUTO;
    c->energy = PT_SPANK_ENERGY_PLAN;
    c->gpu_clock_mhz[0] = c->gpu_clock_mhz[1] = 0;
    c->cpu_clock_mhz[0] = c->cpu_clock_mhz[1] = 0;
    c->n_node_models = 0;
    c->mixed_nodes = PT_MIXED_ADAPT;
}

/* "HOSTLIST=PATH" into the next node_models entry of c. */
static int add_node_model(const char *what, const char *v, pt_spank_conf *c, pt_error *err)
{
    const char *eq = v ? strchr(v, '=') : NULL;
    if (!eq || eq == v || !eq[1])
        return pt_errprintf(err, "%s '%s' is not HOSTLIST=PATH (valid: e.g. \"gpu[01-16]=/etc/ptrain/h100.json\")",
                            what, v ? v : "");
    if (c->n_node_models >= PT_SPANK_NODE_MODELS)
        return pt_errprintf(err, "%s: more than %d node models (valid: at most %d)", what, PT_SPANK_NODE_MODELS,
                            PT_SPANK_NODE_MODELS);
    const size_t hl = (size_t)(eq - v);
    if (hl >= sizeof c->node_model[0].hosts || strlen(eq + 1) >= sizeof c->node_model[0].path)
        return pt_errprintf(err, "%s '%.80s...' is too long (valid: a host list of at most %zu bytes, a path of at most "
                            "%zu)", what, v, sizeof c->node_model[0].hosts - 1, sizeof c->node_model[0].path - 1);
    char hosts[512];
    snprintf(hosts, sizeof hosts, "%.*s", (int)hl, v);
    pt_error inner;
    if (pt_spank_hostlist_has(hosts, "", &inner) < 0) return pt_errprintf(err, "%s: %s", what, inner.text);
    snprintf(c->node_model[c->n_node_models].hosts, sizeof c->node_model[0].hosts, "%s", hosts);
    snprintf(c->node_model[c->n_node_models].path, sizeof c->node_model[0].path, "%s", eq + 1);
    c->n_node_models++;
    return 0;
}

static int parse_mixed(const char *what, const char *v, int *out, pt_error *err)
{
    if (v && strcmp(v, "adapt") == 0) *out = PT_MIXED_ADAPT;
    else if (v && strcmp(v, "refuse") == 0) *out = PT_MIXED_REFUSE;
    else return pt_errprintf(err, "invalid %s '%s' (valid: adapt, refuse)", what, v ? v : "");
    return 0;
}

const char *pt_spank_bind_name(int b) { return b == PT_SPANK_BIND_NONE ? "none" : "auto"; }

static int parse_bind(const char *what, const char *v, int *out, pt_error *err)
{
    if (strcmp(v, "none") == 0) *out = PT_SPANK_BIND_NONE;
    else if (strcmp(v, "auto") == 0) *out = PT_SPANK_BIND_AUTO;
    else return pt_errprintf(err, "invalid %s '%s' (valid: none, auto)", what, v);
    return 0;
}

/* The valid range of a rate override (0 = not set). */
static double rate_max(const char *key)
{
    return strcmp(key, "inter_node_lat_us") == 0 ? 1e7 : 1e9;
}

static int check_rate(const char *key, double v, pt_error *err)
{
    if (!isfinite(v) || v < 0 || v > rate_max(key))
        return pt_errprintf(err, "invalid %s %g (valid: a number > 0 and <= %g; %s)", key, v,
                            rate_max(key),
                            strcmp(key, "inter_node_lat_us") == 0 ? "microseconds" :
                            strncmp(key, "gemm_gflops", 11) == 0 ? "GFLOP/s of one rank" :
                            "GB/s of one rank");
    return 0;
}

static double *rate_field(pt_spank_conf *c, const char *key)
{
    if (strcmp(key, "inter_node_gbps") == 0) return &c->inter_node_gbps;
    if (strcmp(key, "inter_node_lat_us") == 0) return &c->inter_node_lat_us;
    if (strcmp(key, "gemm_gflops") == 0) return &c->gemm_gflops;
    if (strcmp(key, "gemm_gflops_bf16") == 0) return &c->gemm_gflops_bf16;
    return NULL;
}

static int parse_rate_text(const char *key, const char *v, double *out, pt_error *err)
{
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (!*v || *end || errno || !(x > 0) || x > rate_max(key))
        return pt_errprintf(err, "invalid %s='%s' (valid: a number > 0 and <= %g)", key, v,
                            rate_max(key));
    *out = x;
    return 0;
}

static int set_topology(const char *what, const char *v, pt_spank_conf *c, pt_error *err)
{
    if (!v || !*v)
        return pt_errprintf(err, "%s needs a path (ptrain-topo --probe --save output)", what);
    if (strlen(v) >= sizeof c->topology)
        return pt_errprintf(err, "%s path is longer than %zu bytes", what, sizeof c->topology - 1);
    snprintf(c->topology, sizeof c->topology, "%s", v);
    return 0;
}

/* The administrator's limits of c as the request builder takes them. */
static pt_plan_limits conf_limits_of(const pt_spank_conf *c)
{
    pt_plan_limits lim;
    pt_plan_limits_default(&lim);
    lim.max_tp = c->max_tp;
    lim.modes = c->allowed_modes;
    lim.max_pp = c->max_pp;
    lim.max_zero = c->max_zero;
    lim.schedules = c->allowed_schedules;
    lim.precisions = c->allowed_precisions;
    lim.default_zero = c->default_zero;
    lim.mixed = c->mixed_nodes;
    return lim;
}

/* One value through lib/plan's request builder (pt_plan_request_set, the
 * one the plugin, ptrain-run and ptrain-plan share), its message prefixed
 * "ptrain: ". */
static int request_value(const pt_spank_conf *c, const char *key, const char *what, const char *text,
                         pt_plan_request *r, pt_error *err)
{
    pt_plan_limits lim;
    if (c) lim = conf_limits_of(c);
    pt_error inner;
    if (pt_plan_request_set(r, c ? &lim : NULL, key, what, text ? text : "", &inner) < 0)
        return pt_errprintf(err, "ptrain: %s", inner.text);
    return 0;
}

int pt_spank_parse_model_opt(const char *what, const char *text, pt_error *err)
{
    pt_plan_request r;
    pt_plan_request_init(&r, PT_MODE_OFF);
    return request_value(NULL, "model", what, text, &r, err);
}

int pt_spank_parse_batch_opt(const char *what, const char *text, int *out, pt_error *err)
{
    pt_plan_request r;
    pt_plan_request_init(&r, PT_MODE_OFF);
    if (request_value(NULL, "batch", what, text, &r, err) < 0) return -1;
    *out = r.global_batch;
    return 0;
}

#define ALL_SCHEDULES ((1u << PT_SCHED_1F1B) | (1u << PT_SCHED_GPIPE) | (1u << PT_SCHED_INTERLEAVED))

int pt_spank_conf_check(const pt_spank_conf *c, pt_error *err)
{
    if (c->mixed_nodes != PT_MIXED_ADAPT && c->mixed_nodes != PT_MIXED_REFUSE)
        return pt_errprintf(err, "invalid mixed_nodes %d (valid: adapt, refuse)", c->mixed_nodes);
    if (c->n_node_models < 0 || c->n_node_models > PT_SPANK_NODE_MODELS)
        return pt_errprintf(err, "invalid node_models count %d (valid: 0..%d)", c->n_node_models, PT_SPANK_NODE_MODELS);
    if ((int)c->default_mode < PT_MODE_OFF || (int)c->default_mode > PT_MODE_3D)
        return pt_errprintf(err, "invalid default_mode %d (valid: off, auto, 1d, 2d, "
                            "2.5d, 3d)", (int)c->default_mode);
    if (c->default_mode != PT_MODE_OFF && !(c->allowed_modes & (1u << c->default_mode)))
        return pt_errprintf(err, "default_mode '%s' is not in allowed_modes",
                         pt_mode_name(c->default_mode));
    /* auto chooses among the allowed layouts (pt_plan_resolve's search):
     * allowing or defaulting to auto with no layout allowed would make
     * every such step fail, so refuse the configuration */
    const unsigned layouts = (1u << PT_MODE_1D) | (1u << PT_MODE_2D) | (1u << PT_MODE_2P5D) |
                             (1u << PT_MODE_3D);
    if (((c->allowed_modes & (1u << PT_MODE_AUTO)) || c->default_mode == PT_MODE_AUTO) &&
        !(c->allowed_modes & layouts))
        return pt_errprintf(err, "allowed_modes has \"auto\" but no layout for it to choose: no auto "
                            "request could run (valid: add \"1d\", \"2d\", \"2.5d\" or \"3d\" to "
                            "allowed_modes, or drop \"auto\" from it and from default_mode)");
    if (c->max_tp < 1 || c->max_tp > MAX_COUNT)
        return pt_errprintf(err, "invalid max_tp %d (valid: 1..%d)", c->max_tp, MAX_COUNT);
    if (c->max_pp < 1 || c->max_pp > MAX_COUNT)
        return pt_errprintf(err, "invalid max_pp %d (valid: 1..%d)", c->max_pp, MAX_COUNT);
    if (c->max_zero < 0 || c->max_zero > 3)
        return pt_errprintf(err, "invalid max_zero %d (valid ZeRO stages: 0..3)", c->max_zero);
    if (c->default_zero < 0 || c->default_zero > c->max_zero)
        return pt_errprintf(err, "invalid default_zero %d (valid: 0..max_zero=%d)",
                            c->default_zero, c->max_zero);
    if (!(c->allowed_schedules & ALL_SCHEDULES) || (c->allowed_schedules & ~ALL_SCHEDULES))
        return pt_errprintf(err, "allowed_schedules allows no schedule (valid: a list of "
                            "\"gpipe\", \"1f1b\", \"interleaved\" with at least one)");
    if (c->default_schedule == PT_SCHED_INTERLEAVED)
        return pt_errprintf(err, "default_schedule \"interleaved\" cannot be a default: it needs "
                            "virtual stages and microbatches chosen per job, so steps without "
                            "them would fail (valid: \"1f1b\" or \"gpipe\")");
    if (c->default_schedule != PT_SCHED_1F1B && c->default_schedule != PT_SCHED_GPIPE)
        return pt_errprintf(err, "invalid default_schedule %d (valid: \"1f1b\", \"gpipe\")",
                            c->default_schedule);
    if (!(c->allowed_schedules & (1u << c->default_schedule)))
        return pt_errprintf(err, "default_schedule '%s' is not in allowed_schedules",
                            pt_schedule_name(c->default_schedule));
    if (c->default_recompute < PT_RECOMPUTE_NONE || c->default_recompute > PT_RECOMPUTE_ATTENTION)
        return pt_errprintf(err, "invalid default_recompute %d (valid: none, block, attention)",
                            c->default_recompute);
    if (!(c->allowed_precisions & ALL_PRECISIONS) || (c->allowed_precisions & ~ALL_PRECISIONS))
        return pt_errprintf(err, "allowed_precisions allows no precision (valid: a list of \"fp32\", "
                            "\"bf16\" with at least one)");
    if (c->default_precision != PT_PREC_FP32 && c->default_precision != PT_PREC_BF16)
        return pt_errprintf(err, "invalid default_precision %d (valid: \"fp32\", \"bf16\")",
                            c->default_precision);
    if (!(c->allowed_precisions & (1u << c->default_precision)))
        return pt_errprintf(err, "default_precision '%s' is not in allowed_precisions",
                            pt_precision_name(c->default_precision));
    if (check_rate("inter_node_gbps", c->inter_node_gbps, err) < 0 ||
        check_rate("inter_node_lat_us", c->inter_node_lat_us, err) < 0 ||
        check_rate("gemm_gflops", c->gemm_gflops, err) < 0 ||
        check_rate("gemm_gflops_bf16", c->gemm_gflops_bf16, err) < 0)
        return -1;
    if (c->bind != PT_SPANK_BIND_NONE && c->bind != PT_SPANK_BIND_AUTO)
        return pt_errprintf(err, "invalid bind %d (valid: none, auto)", c->bind);
    if (c->energy < PT_SPANK_ENERGY_OFF || c->energy > PT_SPANK_ENERGY_APPLY)
        return pt_errprintf(err, "invalid energy %d (valid: off, report, plan, apply)", c->energy);
    for (int k = 0; k < 2; k++) {
        const double *r = k ? c->cpu_clock_mhz : c->gpu_clock_mhz;
        if (!(r[0] == 0 && r[1] == 0) && !(r[0] > 0 && r[1] >= r[0] && r[1] <= 1e6))
            return pt_errprintf(err, "invalid %s [%g, %g] (valid: [min, max] MHz with 0 < min <= max <= 1e6)",
                                k ? "cpu_clock_mhz" : "gpu_clock_mhz", r[0], r[1]);
    }
    if (memchr(c->topology, '\0', sizeof c->topology) == NULL)
        return pt_errprintf(err, "topology path is not terminated");
    if (c->master_port_base < 1024 || c->master_port_base > 65535)
        return pt_errprintf(err, "invalid master_port_base %d (valid: 1024..65535)",
                         c->master_port_base);
    if (c->master_port_count < 1 || (long long)c->master_port_base + c->master_port_count - 1 > 65535)
        return pt_errprintf(err, "invalid master_port_count %d with master_port_base %d "
                         "(valid: 1..%d)", c->master_port_count, c->master_port_base,
                         65536 - c->master_port_base);
    return 0;
}

/* Mode text accepted for default_mode: off, auto, 1d, 2d, 2.5d, 3d. */
static int parse_admin_mode(const char *s, pt_mode *m, pt_error *err)
{
    if (pt_mode_parse(s, m, err) < 0) return -1;
    return 0;
}

static int parse_int_text(const char *key, const char *v, int *out, pt_error *err)
{
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (!*v || *end || errno || x < INT_MIN || x > INT_MAX)
        return pt_errprintf(err, "invalid %s='%s' (valid: an integer)", key, v);
    *out = (int)x;
    return 0;
}

/* libconfig 1.5 silently truncates an integer literal beyond 32 bits
 * without an L suffix (max_tp = 4294967304 reads as 8).  Re-read the
 * literal of setting `name` on line `line` of the text and return 0 when
 * it equals v, -1 when it does not (or overflows 64 bits); 0 when it
 * cannot be found (then libconfig's value stands). */
static int literal_matches(const char *text, int line, const char *name, long long v)
{
    const char *p = text;
    for (int l = 1; l < line && p; l++) {
        p = strchr(p, '\n');
        if (p) p++;
    }
    if (!p) return 0;
    const char *eol = strchr(p, '\n');
    size_t nl = strlen(name);
    for (const char *q = p; (q = strstr(q, name)) && (!eol || q < eol); q += nl) {
        if (q > p && (isalnum((unsigned char)q[-1]) || q[-1] == '_')) continue;
        const char *r = q + nl;
        while (*r == ' ' || *r == '\t') r++;
        if (*r != '=' && *r != ':') continue;
        r++;
        while (*r == ' ' || *r == '\t') r++;
        char *end;
        errno = 0;
        long long x = strtoll(r, &end, 0);
        if (end == r) return 0;
        if (errno == ERANGE || x != v) return -1;
        return 0;
    }
    return 0;
}

int pt_spank_conf_load(const char *path, pt_spank_conf *c, pt_error *err)
{
    config_t cfg;
    config_init(&cfg);
    pt_spank_conf tmp = *c;
    int rc = -1;
    /* read it ourselves: a regular file only (a FIFO must not block
     * slurmstepd), and the text is needed to check integer literals */
    char *text = NULL;
    size_t tlen = 0;
    if (pt_read_regular(path, "configuration file", &text, &tlen) != 0) {
        pt_errprintf(err, "%s: cannot read: %s", path, pt_errmsg());
        goto out;
    }
    if (strlen(text) != tlen) {
        pt_errprintf(err, "%s: a NUL byte in the configuration text", path);
        goto out;
    }
    if (config_read_string(&cfg, text) != CONFIG_TRUE) {
        pt_errprintf(err, "%s:%d: %s", path, config_error_line(&cfg), config_error_text(&cfg));
        goto out;
    }
    config_setting_t *root = config_root_setting(&cfg);
    int n = config_setting_length(root);
    for (int i = 0; i < n; i++) {
        config_setting_t *s = config_setting_get_elem(root, (unsigned)i);
        const char *name = config_setting_name(s);
        int line = config_setting_source_line(s);
        int type = config_setting_type(s);
        if (!name) continue;
        if (strcmp(name, "default_mode") == 0) {
            if (type != CONFIG_TYPE_STRING) {
                pt_errprintf(err, "%s:%d: default_mode must be a string (valid: \"off\", "
                          "\"auto\", \"1d\", \"2d\", \"2.5d\", \"3d\")", path, line);
                goto out;
            }
            pt_error inner;
            if (parse_admin_mode(config_setting_get_string(s), &tmp.default_mode, &inner) < 0) {
                pt_errprintf(err, "%s:%d: default_mode: %s", path, line, inner.text);
                goto out;
            }
        } else if (strcmp(name, "default_schedule") == 0 ||
                   strcmp(name, "default_recompute") == 0 || strcmp(name, "default_precision") == 0) {
            int sched = strcmp(name, "default_schedule") == 0, prec = strcmp(name, "default_precision") == 0;
            if (type != CONFIG_TYPE_STRING) {
                pt_errprintf(err, "%s:%d: %s must be a string (valid: %s)", path, line, name,
                             sched ? "\"1f1b\", \"gpipe\""
                             : prec ? "\"fp32\", \"bf16\"" : "\"none\", \"block\", \"attention\"");
                goto out;
            }
            pt_error inner;
            const char *v = config_setting_get_string(s);
            int rc2 = sched  ? pt_schedule_parse(name, v, &tmp.default_schedule, &inner)
                      : prec ? pt_precision_parse(name, v, &tmp.default_precision, &inner)
                             : pt_recompute_parse(name, v, &tmp.default_recompute, &inner);
            if (rc2 < 0) {
                pt_errprintf(err, "%s:%d: %s", path, line, inner.text);
                goto out;
            }
        } else if (strcmp(name, "allowed_schedules") == 0) {
            if (type != CONFIG_TYPE_ARRAY && type != CONFIG_TYPE_LIST) {
                pt_errprintf(err, "%s:%d: allowed_schedules must be a list of schedule strings, "
                             "e.g. [\"1f1b\", \"gpipe\"]", path, line);
                goto out;
            }
            unsigned mask = 0;
            int m = config_setting_length(s);
            for (int j = 0; j < m; j++) {
                const char *txt = config_setting_get_string(config_setting_get_elem(s, (unsigned)j));
                int sc;
                pt_error inner;
                if (!txt) {
                    pt_errprintf(err, "%s:%d: allowed_schedules element %d is not a string",
                                 path, line, j);
                    goto out;
                }
                if (pt_schedule_parse("allowed_schedules entry", txt, &sc, &inner) < 0) {
                    pt_errprintf(err, "%s:%d: %s", path, line, inner.text);
                    goto out;
                }
                mask |= 1u << sc;
            }
            tmp.allowed_schedules = mask;
        } else if (strcmp(name, "allowed_precisions") == 0) {
            if (type != CONFIG_TYPE_ARRAY && type != CONFIG_TYPE_LIST) {
                pt_errprintf(err, "%s:%d: allowed_precisions must be a list of precision strings, "
                             "e.g. [\"fp32\", \"bf16\"]", path, line);
                goto out;
            }
            unsigned mask = 0;
            int m = config_setting_length(s);
            for (int j = 0; j < m; j++) {
                const char *txt = config_setting_get_string(config_setting_get_elem(s, (unsigned)j));
                int pr;
                pt_error inner;
                if (!txt) {
                    pt_errprintf(err, "%s:%d: allowed_precisions element %d is not a string",
                                 path, line, j);
                    goto out;
                }
                if (pt_precision_parse("allowed_precisions entry", txt, &pr, &inner) < 0) {
                    pt_errprintf(err, "%s:%d: %s", path, line, inner.text);
                    goto out;
                }
                mask |= 1u << pr;
            }
            tmp.allowed_precisions = mask;
        } else if (strcmp(name, "max_tp") == 0 || strcmp(name, "master_port_base") == 0 ||
                   strcmp(name, "master_port_count") == 0 || strcmp(name, "max_pp") == 0 ||
                   strcmp(name, "default_zero") == 0 || strcmp(name, "max_zero") == 0) {
            if (type != CONFIG_TYPE_INT && type != CONFIG_TYPE_INT64) {
                pt_errprintf(err, "%s:%d: %s must be an integer", path, line, name);
                goto out;
            }
            /* read 64 bits: a value beyond int (4294967304) must not wrap
             * into a valid one (8) */
            long long v64 = config_setting_get_int64(s);
            if (v64 < INT_MIN || v64 > INT_MAX || literal_matches(text, line, name, v64) < 0) {
                pt_errprintf(err, "%s:%d: %s is out of range (valid: %s)", path, line, name,
                             strcmp(name, "max_tp") == 0 || strcmp(name, "max_pp") == 0 ? "1..1048576"
                             : strcmp(name, "master_port_base") == 0 ? "1024..65535"
                             : strcmp(name, "master_port_count") == 0 ? "1..64512" : "0..3");
                goto out;
            }
            int v = (int)v64;
            if (strcmp(name, "max_tp") == 0) tmp.max_tp = v;
            else if (strcmp(name, "master_port_base") == 0) tmp.master_port_base = v;
            else if (strcmp(name, "max_pp") == 0) tmp.max_pp = v;
            else if (strcmp(name, "default_zero") == 0) tmp.default_zero = v;
            else if (strcmp(name, "max_zero") == 0) tmp.max_zero = v;
            else tmp.master_port_count = v;
        } else if (strcmp(name, "topology") == 0 || strcmp(name, "bind") == 0) {
            int topo = strcmp(name, "topology") == 0;
            if (type != CONFIG_TYPE_STRING) {
                pt_errprintf(err, "%s:%d: %s must be a string (valid: %s)", path, line, name,
                             topo ? "the path of a cached node model" : "\"none\", \"auto\"");
                goto out;
            }
            pt_error inner;
            const char *v = config_setting_get_string(s);
            int rc2 = topo ? set_topology("topology", v, &tmp, &inner)
                           : parse_bind("bind", v, &tmp.bind, &inner);
            if (rc2 < 0) {
                pt_errprintf(err, "%s:%d: %s", path, line, inner.text);
                goto out;
            }
        } else if (rate_field(&tmp, name)) {
            if (type != CONFIG_TYPE_INT && type != CONFIG_TYPE_INT64 && type != CONFIG_TYPE_FLOAT) {
                pt_errprintf(err, "%s:%d: %s must be a number", path, line, name);
                goto out;
            }
            double v = type == CONFIG_TYPE_FLOAT ? config_setting_get_float(s)
                                                 : (double)config_setting_get_int64(s);
            if (!(v > 0) || !isfinite(v) || v > rate_max(name)) {
                pt_errprintf(err, "%s:%d: %s = %g is out of range (valid: a number > 0 and <= %g)",
                             path, line, name, v, rate_max(name));
                goto out;
            }
            *rate_field(&tmp, name) = v;
        } else if (strcmp(name, "node_models") == 0) {
            if (type != CONFIG_TYPE_ARRAY && type != CONFIG_TYPE_LIST) {
                pt_errprintf(err, "%s:%d: node_models must be a list of \"HOSTLIST=PATH\" strings, e.g. "
                             "[\"gpu[01-16]=/etc/ptrain/h100.json\"]", path, line);
                goto out;
            }
            tmp.n_node_models = 0;
            int m = config_setting_length(s);
            for (int j = 0; j < m; j++) {
                const char *txt = config_setting_get_string(config_setting_get_elem(s, (unsigned)j));
                pt_error inner;
                if (!txt) {
                    pt_errprintf(err, "%s:%d: node_models element %d is not a string", path, line, j);
                    goto out;
                }
                if (add_node_model("node_models entry", txt, &tmp, &inner) < 0) {
                    pt_errprintf(err, "%s:%d: %s", path, line, inner.text);
                    goto out;
                }
            }
        } else if (strcmp(name, "mixed_nodes") == 0) {
            pt_error inner;
            if (type != CONFIG_TYPE_STRING ||
                parse_mixed("mixed_nodes", config_setting_get_string(s), &tmp.mixed_nodes, &inner) < 0) {
                pt_errprintf(err, "%s:%d: mixed_nodes must be \"adapt\" or \"refuse\"", path, line);
                goto out;
            }
        } else if (strcmp(name, "allowed_modes") == 0) {
            if (type != CONFIG_TYPE_ARRAY && type != CONFIG_TYPE_LIST) {
                pt_errprintf(err, "%s:%d: allowed_modes must be a list of mode strings, e.g. "
                          "[\"auto\", \"1d\"]", path, line);
                goto out;
            }
            unsigned mask = 1u << PT_MODE_OFF;
            int m = config_setting_length(s);
            for (int j = 0; j < m; j++) {
                config_setting_t *e = config_setting_get_elem(s, (unsigned)j);
                const char *txt = config_setting_get_string(e);
                pt_mode mode;
                pt_error inner;
                if (!txt) {
                    pt_errprintf(err, "%s:%d: allowed_modes element %d is not a string",
                              path, line, j);
                    goto out;
                }
                if (pt_mode_parse(txt, &mode, &inner) < 0) {
                    pt_errprintf(err, "%s:%d: allowed_modes: %s", path, line, inner.text);
                    goto out;
                }
                mask |= 1u << mode;
            }
            tmp.allowed_modes = mask;
        } else if (strcmp(name, "energy") == 0) {
            pt_error inner;
            const char *v = type == CONFIG_TYPE_STRING ? config_setting_get_string(s) : NULL;
            if (!v || pt_spank_parse_energy_opt(NULL, "energy", v, &tmp.energy, &inner) < 0) {
                pt_errprintf(err, "%s:%d: energy must be one of \"off\", \"report\", \"plan\", \"apply\" (the "
                             "highest --ptrain-energy users may ask for)", path, line);
                goto out;
            }
        } else if (strcmp(name, "gpu_clock_mhz") == 0 || strcmp(name, "cpu_clock_mhz") == 0) {
            double *r = name[0] == 'g' ? tmp.gpu_clock_mhz : tmp.cpu_clock_mhz;
            int ok = (type == CONFIG_TYPE_ARRAY || type == CONFIG_TYPE_LIST) && config_setting_length(s) == 2;
            for (int j = 0; ok && j < 2; j++) {
                config_setting_t *e = config_setting_get_elem(s, (unsigned)j);
                int t = config_setting_type(e);
                if (t == CONFIG_TYPE_FLOAT) r[j] = config_setting_get_float(e);
                else if (t == CONFIG_TYPE_INT || t == CONFIG_TYPE_INT64) r[j] = (double)config_setting_get_int64(e);
                else ok = 0;
            }
            if (!ok || !(r[0] > 0 && r[1] >= r[0] && r[1] <= 1e6)) {
                pt_errprintf(err, "%s:%d: %s must be [min, max], MHz with 0 < min <= max <= 1e6 (the clocks energy "
                             "plans may use)", path, line, name);
                goto out;
            }
        } else {
            pt_errprintf(err, "%s:%d: unknown setting '%s' (valid: default_mode, max_tp, "
                      "allowed_modes, master_port_base, master_port_count, max_pp, default_zero, "
                      "max_zero, default_schedule, allowed_schedules, default_recompute, default_precision, "
                      "allowed_precisions, topology, "
                      "inter_node_gbps, inter_node_lat_us, gemm_gflops, gemm_gflops_bf16, bind, energy, gpu_clock_mhz, "
                      "cpu_clock_mhz, node_models, mixed_nodes)", path, line, name);
            goto out;
        }
    }
    pt_error inner;
    if (pt_spank_conf_check(&tmp, &inner) < 0) {
        pt_errprintf(err, "%s: %s", path, inner.text);
        goto out;
    }
    *c = tmp;
    rc = 0;
out:
    config_destroy(&cfg);
    free(text);
    return rc;
}

int pt_spank_conf_arg(const char *arg, pt_spank_conf *c, pt_error *err)
{
    const char *eq = strchr(arg, '=');
    if (!eq)
        return pt_errprintf(err, "plugstack argument '%s' is not key=value (valid keys: "
                         "config, default_mode, max_tp, master_port_base, master_port_count, "
                         "max_pp, default_zero, max_zero, default_schedule, allowed_schedules, "
                         "default_recompute, default_precision, allowed_precisions, topology, "
                         "inter_node_gbps, inter_node_lat_us, gemm_gflops, gemm_gflops_bf16, "
                         "bind, energy, gpu_clock_mhz, cpu_clock_mhz, node_model, mixed_nodes)", arg);
    size_t klen = (size_t)(eq - arg);
    const char *v = eq + 1;
    pt_spank_conf tmp = *c;
#define KEY(k) (klen == strlen(k) && strncmp(arg, k, klen) == 0)
    if (KEY("config")) {
        if (!*v) return pt_errprintf(err, "plugstack argument config= needs a path");
        return pt_spank_conf_load(v, c, err);
    } else if (KEY("default_mode")) {
        pt_error inner;
        if (parse_admin_mode(v, &tmp.default_mode, &inner) < 0)
            return pt_errprintf(err, "plugstack default_mode: %s", inner.text);
    } else if (KEY("max_tp")) {
        if (parse_int_text("max_tp", v, &tmp.max_tp, err) < 0) return -1;
    } else if (KEY("master_port_base")) {
        if (parse_int_text("master_port_base", v, &tmp.master_port_base, err) < 0)
            return -1;
    } else if (KEY("master_port_count")) {
        if (parse_int_text("master_port_count", v, &tmp.master_port_count, err) < 0)
            return -1;
    } else if (KEY("max_pp")) {
        if (parse_int_text("max_pp", v, &tmp.max_pp, err) < 0) return -1;
    } else if (KEY("default_zero")) {
        if (parse_int_text("default_zero", v, &tmp.default_zero, err) < 0) return -1;
    } else if (KEY("max_zero")) {
        if (parse_int_text("max_zero", v, &tmp.max_zero, err) < 0) return -1;
    } else if (KEY("default_schedule")) {
        if (pt_schedule_parse("plugstack default_schedule", v, &tmp.default_schedule, err) < 0)
            return -1;
    } else if (KEY("default_recompute")) {
        if (pt_recompute_parse("plugstack default_recompute", v, &tmp.default_recompute, err) < 0)
            return -1;
    } else if (KEY("default_precision")) {
        if (pt_precision_parse("plugstack default_precision", v, &tmp.default_precision, err) < 0)
            return -1;
    } else if (KEY("allowed_precisions")) {
        /* comma-separated: allowed_precisions=fp32,bf16 */
        unsigned mask = 0;
        char item[32];
        const char *q = v;
        for (;;) {
            size_t n = strcspn(q, ",");
            int pr;
            if (n >= sizeof item) n = sizeof item - 1;
            memcpy(item, q, n);
            item[n] = '\0';
            if (pt_precision_parse("plugstack allowed_precisions entry", item, &pr, err) < 0) return -1;
            mask |= 1u << pr;
            q += strcspn(q, ",");
            if (!*q) break;
            q++;
        }
        tmp.allowed_precisions = mask;
    } else if (KEY("topology")) {
        if (set_topology("plugstack argument topology=", v, &tmp, err) < 0) return -1;
    } else if (KEY("bind")) {
        if (parse_bind("plugstack bind", v, &tmp.bind, err) < 0) return -1;
    } else if (KEY("node_model")) {
        if (add_node_model("plugstack node_model", v, &tmp, err) < 0) return -1;
    } else if (KEY("mixed_nodes")) {
        if (parse_mixed("plugstack mixed_nodes", v, &tmp.mixed_nodes, err) < 0) return -1;
    } else if (KEY("inter_node_gbps") || KEY("inter_node_lat_us") || KEY("gemm_gflops") || KEY("gemm_gflops_bf16")) {
        char key[32];
        snprintf(key, sizeof key, "%.*s", (int)klen, arg);
        if (parse_rate_text(key, v, rate_field(&tmp, key), err) < 0) return -1;
    } else if (KEY("allowed_schedules")) {
        /* comma-separated: allowed_schedules=1f1b,gpipe */
        unsigned mask = 0;
        char item[32];
        const char *q = v;
        for (;;) {
            size_t n = strcspn(q, ",");
            int sc;
            if (n >= sizeof item) n = sizeof item - 1;
            memcpy(item, q, n);
            item[n] = '\0';
            if (pt_schedule_parse("plugstack allowed_schedules entry", item, &sc, err) < 0)
                return -1;
            mask |= 1u << sc;
            q += strcspn(q, ",");
            if (!*q) break;
            q++;
        }
        tmp.allowed_schedules = mask;
    } else if (KEY("energy")) {
        if (pt_spank_parse_energy_opt(NULL, "plugstack energy", v, &tmp.energy, err) < 0) return -1;
    } else if (KEY("gpu_clock_mhz") || KEY("cpu_clock_mhz")) {
        if (pt_spank_parse_clock_range(arg[0] == 'g' ? "plugstack gpu_clock_mhz" : "plugstack cpu_clock_mhz", v,
                                       arg[0] == 'g' ? tmp.gpu_clock_mhz : tmp.cpu_clock_mhz, err) < 0)
            return -1;
    } else {
        return pt_errprintf(err, "unknown plugstack argument '%s' (valid keys: config, "
                         "default_mode, max_tp, master_port_base, master_port_count, max_pp, "
                         "default_zero, max_zero, default_schedule, allowed_schedules, "
                         "default_recompute, default_precision, allowed_precisions, topology, "
                         "inter_node_gbps, inter_node_lat_us, gemm_gflops, gemm_gflops_bf16, "
                         "bind, energy, gpu_clock_mhz, cpu_clock_mhz, node_model, mixed_nodes)", arg);
    }
#undef KEY
    pt_error inner;
    if (pt_spank_conf_check(&tmp, &inner) < 0)
        return pt_errprintf(err, "plugstack argument '%s': %s", arg, inner.text);
    *c = tmp;
    return 0;
}

int pt_spank_parse_mode_opt(const pt_spank_conf *c, const char *what, const char *text,
                            pt_mode *out, pt_error *err)
{
    pt_plan_request r;
    pt_plan_request_init(&r, PT_MODE_OFF);
    if (request_value(c, "mode", what, text, &r, err) < 0) return -1;
    *out = r.plan.mode;
    return 0;
}

int pt_spank_parse_size_opt(const pt_spank_conf *c, const char *what, const char *text, int is_tp,
                            int *out, pt_error *err)
{
    pt_plan_request r;
    pt_plan_request_init(&r, PT_MODE_OFF);
    if (request_value(c, is_tp ? "tp" : "sp", what, text, &r, err) < 0) return -1;
    *out = is_tp ? r.plan.tp : r.plan.sp;
    return 0;
}

int pt_spank_parse_pipe_opt(const pt_spank_conf *c, const char *key, const char *what,
                            const char *text, pt_plan *req, pt_error *err)
{
    static const char *keys[] = {"pp", "microbatches", "virtual-stages", "zero", "schedule", "recompute", "precision",
                                 "pp-split"};
    int known = 0;
    for (size_t i = 0; key && i < sizeof keys / sizeof keys[0]; i++) known |= strcmp(key, keys[i]) == 0;
    if (!known)
        return pt_errprintf(err, "ptrain: unknown pipeline option '%s' (valid: pp, microbatches, "
                            "virtual-stages, zero, schedule, recompute, precision, pp-split)", key ? key : "");
    pt_plan_request r;
    pt_plan_request_init(&r, PT_MODE_OFF);
    r.plan = *req;
    if (request_value(c, key, what, text, &r, err) < 0) return -1;
    *req = r.plan;
    return 0;
}

/* ---- binding ------------------------------------------------------------ */
#include <hwloc.h>

#include "topo/topo.h"

/* The locality list of task l: its GPU's local CPUs, else its NUMA node's. */
static const char *task_locality(const pt_topo *t, int l, int ntasks, int *gpu, int *numa)
{
    *gpu = -1;
    *numa = -1;
    if (t->ngpus > 0 && ntasks <= t->ngpus) {
        /* the l-th GPU in island order (pt_topo_device_order): consecutive
         * tasks, and so a tensor group's consecutive ranks, fill an NVLink
         * island first, as the planner priced them */
        int order[64];
        *gpu = t->ngpus <= 64 && pt_topo_device_order(t, order, 64) == t->ngpus ? order[l] : l;
        if (t->gpu[*gpu].pci.cpus[0]) return t->gpu[*gpu].pci.cpus;
    }
    if (t->nnuma > 0) {
        *numa = (int)((long long)l * t->nnuma / ntasks);
        if (*gpu >= 0 && t->gpu[*gpu].pci.numa >= 0) *numa = -1;
        if (*numa >= 0) return t->numa[*numa].cpus;
    }
    return "";
}

/* Cores (or PUs without a machine) of set, in order: their cpusets. */
static int set_units(hwloc_topology_t m, hwloc_const_bitmap_t set, hwloc_bitmap_t *units, int cap)
{
    int n = 0;
    if (m) {
        int nc = hwloc_get_nbobjs_inside_cpuset_by_type(m, set, HWLOC_OBJ_CORE);
        for (int i = 0; i < nc && n < cap; i++) {
            hwloc_obj_t c = hwloc_get_obj_inside_cpuset_by_type(m, set, HWLOC_OBJ_CORE, (unsigned)i);
            units[n] = hwloc_bitmap_dup(c->cpuset);
            hwloc_bitmap_and(units[n], units[n], set);
            n++;
        }
        if (n > 0) return n;
    }
    int id;
    hwloc_bitmap_foreach_begin(id, set)
        if (n < cap) {
            units[n] = hwloc_bitmap_alloc();
            hwloc_bitmap_only(units[n], (unsigned)id);
            n++;
        }
    hwloc_bitmap_foreach_end();
    return n;
}

#define MAX_UNITS 4096

int pt_spank_bind_compute(const pt_topo *t, void *machine, const char *allowed, int local,
                          int ntasks, pt_spank_binding *out, pt_error *err)
{
    if (!t || ntasks < 1 || local < 0 || local >= ntasks)
        return pt_errprintf(err, "binding: task %d of %d is out of range (valid: 0..%d)", local,
                            ntasks, ntasks - 1);
    hwloc_topology_t m = machine;
    memset(out, 0, sizeof *out);
    out->gpu = out->nic = -1;
    int rc = -1;
    hwloc_bitmap_t allow = hwloc_bitmap_alloc(), loc = hwloc_bitmap_alloc(),
                   mine = hwloc_bitmap_alloc();
    hwloc_bitmap_t *units = calloc(MAX_UNITS, sizeof *units);
    int nunits = 0;
    if (!allow || !loc || !mine || !units) {
        pt_errprintf(err, "binding: out of memory");
        goto out;
    }
    if (allowed) {
        if (hwloc_bitmap_list_sscanf(allow, allowed) < 0) {
            pt_errprintf(err, "binding: cannot read the allowed CPU list '%s'", allowed);
            goto out;
        }
    } else if (m) {
        hwloc_bitmap_copy(allow, hwloc_topology_get_allowed_cpuset(m));
    } else {
        hwloc_bitmap_fill(allow);
    }
    int gpu, numa;
    const char *mylist = task_locality(t, local, ntasks, &gpu, &numa);
    out->gpu = gpu;
    if (hwloc_bitmap_list_sscanf(loc, mylist) < 0) {
        pt_errprintf(err, "binding: cannot read the CPU list '%s' of the node model", mylist);
        goto out;
    }
    hwloc_bitmap_and(loc, loc, allow);
    int k = 0, share = 0;
    if (hwloc_bitmap_iszero(loc)) {
        /* the locality is not on this machine (or the model has none): split
         * the whole allowed set among all tasks */
        hwloc_bitmap_copy(loc, allow);
        k = local;
        share = ntasks;
        snprintf(out->where, sizeof out->where, "node");
    } else {
        for (int j = 0; j < ntasks; j++) {
            int g2, n2;
            const char *other = task_locality(t, j, ntasks, &g2, &n2);
            if (strcmp(other, mylist) != 0) continue;
            if (j < local) k++;
            share++;
        }
        if (gpu >= 0) snprintf(out->where, sizeof out->where, "GPU %s", t->gpu[gpu].pci.busid);
        else if (numa >= 0) snprintf(out->where, sizeof out->where, "NUMA %d", t->numa[numa].os_index);
        else snprintf(out->where, sizeof out->where, "node");
    }
    if (hwloc_bitmap_iszero(loc)) { /* nothing allowed at all: leave the task as is */
        rc = 0;
        goto out;
    }
    nunits = set_units(m, loc, units, MAX_UNITS);
    if (nunits >= share) {
        long lo = (long)k * nunits / share, hi = (long)(k + 1) * nunits / share;
        for (long u = lo; u < hi; u++) hwloc_bitmap_or(mine, mine, units[u]);
    } else {
        hwloc_bitmap_copy(mine, units[(long)k * nunits / share]);
    }
    hwloc_bitmap_list_snprintf(out->cpus, sizeof out->cpus, mine);

    /* the nearest InfiniBand/RoCE HCA */
    int best = -1, best_class = -1;
    for (int i = 0; i < t->nnics; i++) {
        if (t->nic[i].kind != PT_NIC_IB && t->nic[i].kind != PT_NIC_ROCE) continue;
        int cls;
        if (gpu >= 0 && t->gn_class) cls = t->gn_class[gpu * t->nnics + i];
        else {
            int mynuma = gpu >= 0 ? t->gpu[gpu].pci.numa : numa >= 0 ? t->numa[numa].os_index : -1;
            cls = mynuma >= 0 && t->nic[i].pci.numa == mynuma ? PT_LINK_PHB : PT_LINK_SYS;
        }
        if (cls > best_class) {
            best_class = cls;
            best = i;
        }
    }
    out->nic = best;
    rc = 0;
out:
    for (int i = 0; i < nunits; i++) hwloc_bitmap_free(units[i]);
    free(units);
    if (allow) hwloc_bitmap_free(allow);
    if (loc) hwloc_bitmap_free(loc);
    if (mine) hwloc_bitmap_free(mine);
    return rc;
}

/* ---- energy ------------------------------------------------------------- */
static const char *const energy_names[] = {"off", "report", "plan", "apply"};

const char *pt_spank_energy_name(int level)
{
    return level >= PT_SPANK_ENERGY_OFF && level <= PT_SPANK_ENERGY_APPLY ? energy_names[level] : "?";
}

int pt_spank_parse_energy_opt(const pt_spank_conf *c, const char *what, const char *text, int *out,
                              pt_error *err)
{
    int lv = -1;
    for (int i = 0; i <= PT_SPANK_ENERGY_APPLY; i++)
        if (text && strcmp(text, energy_names[i]) == 0) lv = i;
    if (lv < 0)
        return pt_errprintf(err, "ptrain: %s='%s' is invalid (valid: off, report, plan, apply)", what,
                            text ? text : "");
    if (c && lv > c->energy) {
        char allowed[64] = "";
        for (int i = 0; i <= c->energy; i++)
            pt_notef(allowed, sizeof allowed, "%s", energy_names[i]);
        for (char *p = allowed; *p; p++)
            if (*p == '\n') *p = ',';
        return pt_errprintf(err, "ptrain: %s=%s is not allowed on this cluster (allowed: %s; energy in "
                            "ptrain.conf)", what, text, allowed);
    }
    *out = lv;
    return 0;
}

int pt_spank_parse_clock_range(const char *what, const char *text, double r[2], pt_error *err)
{
    char *end;
    errno = 0;
    double a = text ? strtod(text, &end) : 0;
    if (!text || end == text || *end != '-') goto bad;
    const char *q = end + 1;
    double b = strtod(q, &end);
    if (end == q || *end || errno || !(a > 0) || !(b >= a) || b > 1e6) goto bad;
    r[0] = a, r[1] = b;
    return 0;
bad:
    return pt_errprintf(err, "%s='%s' is invalid (valid: MIN-MAX in MHz, 0 < MIN <= MAX, e.g. 1100-1980)", what,
                        text ? text : "");
}

int pt_spank_nvml_unrestrict(const char *busid, int *was, pt_error *err)
{
    *was = 0;
    pt_nvml *n = NULL;
    pt_nvml_dev dev;
    int restricted = 1;
    if (pt_nvml_open(&n) != PT_OK || pt_nvml_device(n, busid, &dev, NULL, 0) != PT_OK ||
        pt_nvml_get_restriction(n, dev, &restricted) != PT_OK ||
        (restricted && pt_nvml_set_restriction(n, dev, 0) != PT_OK)) {
        pt_errprintf(err, "cannot lift the application-clock restriction of GPU %s: %s", busid, pt_errmsg());
        pt_nvml_close(n);
        return -1;
    }
    *was = restricted;
    pt_nvml_close(n);
    return 0;
}

int pt_spank_nvml_restore(const char *busid, int was, pt_error *err)
{
    pt_nvml *n = NULL;
    pt_nvml_dev dev;
    if (pt_nvml_open(&n) != PT_OK || pt_nvml_device(n, busid, &dev, NULL, 0) != PT_OK) {
        pt_errprintf(err, "cannot restore the clocks of GPU %s: %s", busid, pt_errmsg());
        pt_nvml_close(n);
        return -1;
    }
    int rc = 0;
    /* each step is tried; the first failure is the one reported */
    if (pt_nvml_reset_clock(n, dev, PT_NVML_APPLICATION) != PT_OK)
        rc = pt_errprintf(err, "GPU %s: %s", busid, pt_errmsg());
    if (pt_nvml_reset_clock(n, dev, PT_NVML_LOCKED) != PT_OK && !rc)
        rc = pt_errprintf(err, "GPU %s: %s", busid, pt_errmsg());
    if (was && pt_nvml_set_restriction(n, dev, 1) != PT_OK && !rc)
        rc = pt_errprintf(err, "cannot restrict the application clocks of GPU %s again: %s", busid, pt_errmsg());
    pt_nvml_close(n);
    return rc;
}
