/* SPDX-License-Identifier: MIT */
/* The administrator's settings of the plugin: the checks of the whole, the
 * ptrain.conf reader (libconfig) and the plugstack parser, each key read
 * as the one table (conf_keys.c) says; see spank_util.h. */
#include "spank/conf_keys.h"
#include "core/core.h"
#include "core/file.h"
#include "energy/clock.h"

#include <ctype.h>
#include <errno.h>
#include <libconfig.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_COUNT (1 << 20)
/* every precision (pt_precision), every schedule (pt_schedule) */
#define ALL_PRECISIONS ((1u << PT_PREC_FP32) | (1u << PT_PREC_BF16))
#define ALL_SCHEDULES ((1u << PT_SCHED_1F1B) | (1u << PT_SCHED_GPIPE) | (1u << PT_SCHED_INTERLEAVED))

static const pt_spank_key *key_named(const char *name) { return pt_spank_key_find(name, strlen(name), 1); }

/* ---- the checks of the whole ------------------------------------------- */
static int check_rate(const char *key, double v)
{
    const pt_spank_key *k = key_named(key);
    if (!isfinite(v) || v < 0 || v > k->max)
        return pt_fail(PT_EINVAL, "invalid %s %g (valid: a number > 0 and <= %g; %s)", key, v, k->max, k->unit);
    return 0;
}

static int check_int(const char *key, int v)
{
    const pt_spank_key *k = key_named(key);
    if (v < k->lo || v > k->hi) return pt_fail(PT_EINVAL, "invalid %s %d (valid: %d..%d)", key, v, k->lo, k->hi);
    return 0;
}

/* "invalid KEY N (valid: ...)" of an ENUM key holding a value out of its
 * list; quote: the values quoted, as the ptrain.conf messages do. */
static int bad_enum(const char *key, int v, int quote)
{
    const pt_spank_key *k = key_named(key);
    char q[160];
    return pt_fail(PT_EINVAL, "invalid %s %d (valid: %s)", key, v,
                   quote ? pt_spank_quote_list(k->valid, q, sizeof q) : k->valid);
}

int pt_spank_conf_check(const pt_spank_conf *c)
{
    if (c->mixed_nodes != PT_MIXED_ADAPT && c->mixed_nodes != PT_MIXED_REFUSE)
        return bad_enum("mixed_nodes", c->mixed_nodes, 0);
    if (c->n_node_models < 0 || c->n_node_models > PT_SPANK_NODE_MODELS)
        return pt_fail(PT_EINVAL, "invalid node_models count %d (valid: 0..%d)", c->n_node_models, PT_SPANK_NODE_MODELS);
    if ((int)c->default_mode < PT_MODE_OFF || (int)c->default_mode > PT_MODE_3D)
        return bad_enum("default_mode", (int)c->default_mode, 0);
    if (c->default_mode != PT_MODE_OFF && !(c->allowed_modes & (1u << c->default_mode)))
        return pt_fail(PT_EINVAL, "default_mode '%s' is not in allowed_modes",
                         pt_mode_name(c->default_mode));
    /* auto chooses among the allowed layouts (pt_plan_resolve's search):
     * allowing or defaulting to auto with no layout allowed would make
     * every such step fail, so refuse the configuration */
    const unsigned layouts = (1u << PT_MODE_1D) | (1u << PT_MODE_2D) | (1u << PT_MODE_2P5D) |
                             (1u << PT_MODE_3D);
    if (((c->allowed_modes & (1u << PT_MODE_AUTO)) || c->default_mode == PT_MODE_AUTO) &&
        !(c->allowed_modes & layouts))
        return pt_fail(PT_EINVAL, "allowed_modes has \"auto\" but no layout for it to choose: no auto "
                       "request could run (valid: add \"1d\", \"2d\", \"2.5d\" or \"3d\" to "
                       "allowed_modes, or drop \"auto\" from it and from default_mode)");
    if (check_int("max_tp", c->max_tp) < 0 || check_int("max_pp", c->max_pp) < 0) return -1;
    if (c->max_zero < 0 || c->max_zero > 3)
        return pt_fail(PT_EINVAL, "invalid max_zero %d (valid ZeRO stages: 0..3)", c->max_zero);
    if (c->default_zero < 0 || c->default_zero > c->max_zero)
        return pt_fail(PT_EINVAL, "invalid default_zero %d (valid: 0..max_zero=%d)",
                       c->default_zero, c->max_zero);
    if (!(c->allowed_schedules & ALL_SCHEDULES) || (c->allowed_schedules & ~ALL_SCHEDULES))
        return pt_fail(PT_EINVAL, "allowed_schedules allows no schedule (valid: a list of "
                       "\"gpipe\", \"1f1b\", \"interleaved\" with at least one)");
    if (c->default_schedule == PT_SCHED_INTERLEAVED)
        return pt_fail(PT_EINVAL, "default_schedule \"interleaved\" cannot be a default: it needs "
                       "virtual stages and microbatches chosen per job, so steps without "
                       "them would fail (valid: \"1f1b\" or \"gpipe\")");
    if (c->default_schedule != PT_SCHED_1F1B && c->default_schedule != PT_SCHED_GPIPE)
        return bad_enum("default_schedule", c->default_schedule, 1);
    if (!(c->allowed_schedules & (1u << c->default_schedule)))
        return pt_fail(PT_EINVAL, "default_schedule '%s' is not in allowed_schedules",
                       pt_schedule_name(c->default_schedule));
    if (c->default_recompute < PT_RECOMPUTE_NONE || c->default_recompute > PT_RECOMPUTE_ATTENTION)
        return bad_enum("default_recompute", c->default_recompute, 0);
    if (!(c->allowed_precisions & ALL_PRECISIONS) || (c->allowed_precisions & ~ALL_PRECISIONS))
        return pt_fail(PT_EINVAL, "allowed_precisions allows no precision (valid: a list of \"fp32\", "
                       "\"bf16\" with at least one)");
    if (c->default_precision != PT_PREC_FP32 && c->default_precision != PT_PREC_BF16)
        return bad_enum("default_precision", c->default_precision, 1);
    if (!(c->allowed_precisions & (1u << c->default_precision)))
        return pt_fail(PT_EINVAL, "default_precision '%s' is not in allowed_precisions",
                       pt_precision_name(c->default_precision));
    if (check_rate("inter_node_gbps", c->inter_node_gbps) < 0 ||
        check_rate("inter_node_lat_us", c->inter_node_lat_us) < 0 ||
        check_rate("gemm_gflops", c->gemm_gflops) < 0 ||
        check_rate("gemm_gflops_bf16", c->gemm_gflops_bf16) < 0)
        return -1;
    if (c->bind != PT_SPANK_BIND_NONE && c->bind != PT_SPANK_BIND_AUTO) return bad_enum("bind", c->bind, 0);
    if (c->energy < PT_SPANK_ENERGY_OFF || c->energy > PT_SPANK_ENERGY_APPLY)
        return bad_enum("energy", c->energy, 0);
    for (int k = 0; k < 2; k++) {
        const double *r = k ? c->cpu_clock_mhz : c->gpu_clock_mhz;
        if (!(r[0] == 0 && r[1] == 0) && !(r[0] > 0 && r[1] >= r[0] && r[1] <= 1e6))
            return pt_fail(PT_EINVAL, "invalid %s [%g, %g] (valid: [min, max] MHz with 0 < min <= max <= 1e6)",
                           k ? "cpu_clock_mhz" : "gpu_clock_mhz", r[0], r[1]);
    }
    if (memchr(c->topology, '\0', sizeof c->topology) == NULL)
        return pt_fail(PT_EINVAL, "topology path is not terminated");
    if (check_int("master_port_base", c->master_port_base) < 0) return -1;
    if (c->master_port_count < 1 || (long long)c->master_port_base + c->master_port_count - 1 > 65535)
        return pt_fail(PT_EINVAL, "invalid master_port_count %d with master_port_base %d "
                         "(valid: 1..%d)", c->master_port_count, c->master_port_base,
                         65536 - c->master_port_base);
    return 0;
}

/* ---- ptrain.conf (libconfig) ------------------------------------------- */
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

/* Setting s of file `path` (its text: text), key k, into *c. */
static int set_setting(const pt_spank_key *k, config_setting_t *s, const char *path, const char *text,
                       pt_spank_conf *c)
{
    const char *name = k->name;
    const int line = config_setting_source_line(s), type = config_setting_type(s);
    const int is_list = type == CONFIG_TYPE_ARRAY || type == CONFIG_TYPE_LIST;
    void *f = pt_spank_key_field(c, k);
    switch (k->type) {
    case PT_SPANK_KEY_ENUM:
    case PT_SPANK_KEY_PATH: {
        const char *v = type == CONFIG_TYPE_STRING ? config_setting_get_string(s) : NULL;
        char q[160];
        if (k->file_msg && (!v || k->parse(name, v, f) < 0))
            return pt_fail(PT_EINVAL, "%s:%d: %s", path, line, k->file_msg);
        if (!v)
            return pt_fail(PT_EINVAL, "%s:%d: %s must be a string (valid: %s)", path, line, name,
                           k->type == PT_SPANK_KEY_ENUM ? pt_spank_quote_list(k->valid, q, sizeof q) : k->valid);
        if (!k->file_msg && (k->type == PT_SPANK_KEY_PATH ? pt_spank_set_topology(name, v, c)
                                                          : k->parse(name, v, f)) < 0)
            return pt_fail(PT_EINVAL, "%s:%d: %s", path, line, pt_errmsg());
        return 0;
    }
    case PT_SPANK_KEY_INT: {
        if (type != CONFIG_TYPE_INT && type != CONFIG_TYPE_INT64)
            return pt_fail(PT_EINVAL, "%s:%d: %s must be an integer", path, line, name);
        /* read 64 bits: a value beyond int (4294967304) must not wrap
         * into a valid one (8) */
        long long v64 = config_setting_get_int64(s);
        if (v64 < INT_MIN || v64 > INT_MAX || literal_matches(text, line, name, v64) < 0)
            return pt_fail(PT_EINVAL, "%s:%d: %s is out of range (valid: %d..%d)", path, line, name, k->lo, k->hi);
        *(int *)f = (int)v64;
        return 0;
    }
    case PT_SPANK_KEY_RATE: {
        if (type != CONFIG_TYPE_INT && type != CONFIG_TYPE_INT64 && type != CONFIG_TYPE_FLOAT)
            return pt_fail(PT_EINVAL, "%s:%d: %s must be a number", path, line, name);
        double v = type == CONFIG_TYPE_FLOAT ? config_setting_get_float(s) : (double)config_setting_get_int64(s);
        if (!(v > 0) || !isfinite(v) || v > k->max)
            return pt_fail(PT_EINVAL, "%s:%d: %s = %g is out of range (valid: a number > 0 and <= %g)", path, line,
                           name, v, k->max);
        *(double *)f = v;
        return 0;
    }
    case PT_SPANK_KEY_LIST:
    case PT_SPANK_KEY_HOSTMAP: {
        if (!is_list) return pt_fail(PT_EINVAL, "%s:%d: %s must be %s", path, line, name, k->file_form);
        unsigned mask = k->base;
        if (k->type == PT_SPANK_KEY_HOSTMAP) c->n_node_models = 0;
        int m = config_setting_length(s);
        for (int j = 0; j < m; j++) {
            const char *txt = config_setting_get_string(config_setting_get_elem(s, (unsigned)j));
            int x;
            if (!txt) return pt_fail(PT_EINVAL, "%s:%d: %s element %d is not a string", path, line, name, j);
            if ((k->type == PT_SPANK_KEY_HOSTMAP ? pt_spank_add_node_model(k->item, txt, c)
                                                 : k->parse(k->item, txt, &x)) < 0)
                return pt_fail(PT_EINVAL, "%s:%d: %s", path, line, pt_errmsg());
            if (k->type == PT_SPANK_KEY_LIST) mask |= 1u << x;
        }
        if (k->type == PT_SPANK_KEY_LIST) *(unsigned *)f = mask;
        return 0;
    }
    case PT_SPANK_KEY_RANGE: {
        double *r = f;
        int ok = is_list && config_setting_length(s) == 2;
        for (int j = 0; ok && j < 2; j++) {
            config_setting_t *e = config_setting_get_elem(s, (unsigned)j);
            int t = config_setting_type(e);
            if (t == CONFIG_TYPE_FLOAT) r[j] = config_setting_get_float(e);
            else if (t == CONFIG_TYPE_INT || t == CONFIG_TYPE_INT64) r[j] = (double)config_setting_get_int64(e);
            else ok = 0;
        }
        if (!ok || !(r[0] >= 1 && r[1] >= r[0] && r[1] <= PT_CLOCK_MAX_MHZ))
            return pt_fail(PT_EINVAL, "%s:%d: %s must be [min, max], MHz with 1 <= min <= max <= %.0f (the clocks "
                           "energy plans may use)", path, line, name, PT_CLOCK_MAX_MHZ);
        return 0;
    }
    default: return pt_fail(PT_EINVAL, "%s:%d: %s cannot be set in a file", path, line, name);
    }
}

int pt_spank_conf_load(const char *path, pt_spank_conf *c)
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
        pt_fail(PT_EINVAL, "%s: cannot read: %s", path, pt_errmsg());
        goto out;
    }
    if (strlen(text) != tlen) {
        pt_fail(PT_EINVAL, "%s: a NUL byte in the configuration text", path);
        goto out;
    }
    if (config_read_string(&cfg, text) != CONFIG_TRUE) {
        pt_fail(PT_EINVAL, "%s:%d: %s", path, config_error_line(&cfg), config_error_text(&cfg));
        goto out;
    }
    config_setting_t *root = config_root_setting(&cfg);
    int n = config_setting_length(root);
    for (int i = 0; i < n; i++) {
        config_setting_t *s = config_setting_get_elem(root, (unsigned)i);
        const char *name = config_setting_name(s);
        if (!name) continue;
        const pt_spank_key *k = key_named(name);
        if (!k) {
            char keys[512];
            pt_fail(PT_EINVAL, "%s:%d: unknown setting '%s' (valid: %s)", path, config_setting_source_line(s), name,
                    pt_spank_key_list(1, keys, sizeof keys));
            goto out;
        }
        if (set_setting(k, s, path, text, &tmp) < 0) goto out;
    }
    if (pt_spank_conf_check(&tmp) < 0) {
        pt_fail(PT_EINVAL, "%s: %s", path, pt_errmsg());
        goto out;
    }
    *c = tmp;
    rc = 0;
out:
    config_destroy(&cfg);
    free(text);
    return rc;
}

/* ---- plugstack arguments ------------------------------------------------ */
int pt_spank_conf_arg(const char *arg, pt_spank_conf *c)
{
    char keys[512];
    const char *eq = strchr(arg, '=');
    if (!eq)
        return pt_fail(PT_EINVAL, "plugstack argument '%s' is not key=value (valid keys: %s)", arg,
                       pt_spank_key_list(0, keys, sizeof keys));
    const char *v = eq + 1;
    const pt_spank_key *k = pt_spank_key_find(arg, (size_t)(eq - arg), 0);
    if (!k)
        return pt_fail(PT_EINVAL, "unknown plugstack argument '%s' (valid keys: %s)", arg,
                       pt_spank_key_list(0, keys, sizeof keys));
    if (k->type == PT_SPANK_KEY_CONFIG) {
        if (!*v) return pt_fail(PT_EINVAL, "plugstack argument config= needs a path");
        return pt_spank_conf_load(v, c);
    }
    pt_spank_conf tmp = *c;
    if (pt_spank_key_set(k, v, &tmp) < 0) return -1;
    if (pt_spank_conf_check(&tmp) < 0)
        return pt_fail(PT_EINVAL, "plugstack argument '%s': %s", arg, pt_errmsg());
    *c = tmp;
    return 0;
}
