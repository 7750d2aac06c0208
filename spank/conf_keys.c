/* SPDX-License-Identifier: MIT */
/* The administrator's settings of the plugin (plugstack arguments and
 * ptrain.conf): ONE table of keys, pt_spank_keys, that the defaults, the
 * libconfig reader and the plugstack parser (conf.c), their messages and
 * the key list of ptrain_spank(8) come from (tests/slurm/test_spank_keys
 * holds the man page and share/'s examples to it).  This file holds the
 * table and the values in plugstack syntax; see spank_util.h. */
#include "spank/conf_keys.h"
#include "core/core.h"

#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_COUNT (1 << 20)

/* ENUM keys are read through an int (pt_mode default_mode included). */
_Static_assert(sizeof(pt_mode) == sizeof(int), "pt_mode is read as an int");

/* ---- the readers the table names ---------------------------------------- */
/* A mode (pt_mode_parse), its message prefixed with what. */
static int parse_mode(const char *what, const char *v, int *out)
{
    pt_mode m;
    if (pt_mode_parse(v, &m) < 0) return pt_fail(PT_EINVAL, "%s: %s", what, pt_errmsg());
    *out = (int)m;
    return 0;
}

static int parse_mixed(const char *what, const char *v, int *out)
{
    if (v && strcmp(v, "adapt") == 0) *out = PT_MIXED_ADAPT;
    else if (v && strcmp(v, "refuse") == 0) *out = PT_MIXED_REFUSE;
    else return pt_fail(PT_EINVAL, "invalid %s '%s' (valid: adapt, refuse)", what, v ? v : "");
    return 0;
}

const char *pt_spank_bind_name(int b) { return b == PT_SPANK_BIND_NONE ? "none" : "auto"; }

static int parse_bind(const char *what, const char *v, int *out)
{
    if (strcmp(v, "none") == 0) *out = PT_SPANK_BIND_NONE;
    else if (strcmp(v, "auto") == 0) *out = PT_SPANK_BIND_AUTO;
    else return pt_fail(PT_EINVAL, "invalid %s '%s' (valid: none, auto)", what, v);
    return 0;
}

static int parse_energy(const char *what, const char *v, int *out)
{
    return pt_spank_parse_energy_opt(NULL, what, v, out);
}

/* ---- the table ----------------------------------------------------------- */
#define AT(f) offsetof(pt_spank_conf, f)
#define MODES PT_MODE_NAMES(", ")

const pt_spank_key pt_spank_keys[] = {
    {.arg = "config", .type = PT_SPANK_KEY_CONFIG, .valid = "a path",
     .doc = "Read the settings below from a libconfig file (see share/ptrain/ptrain.conf.example)."},
    {.name = "default_mode", .arg = "default_mode", .type = PT_SPANK_KEY_ENUM, .offset = AT(default_mode),
     .parse = parse_mode, .valid = MODES, .def = "off",
     .doc = "Mode of steps that give neither --ptrain-mode nor PTRAIN_MODE; it must be in allowed_modes."},
    {.name = "max_tp", .arg = "max_tp", .type = PT_SPANK_KEY_INT, .offset = AT(max_tp), .lo = 1, .hi = MAX_COUNT,
     .def = "64", .doc = "Largest tensor-parallel size the planner may choose or a user may pin."},
    {.name = "allowed_modes", .type = PT_SPANK_KEY_LIST, .offset = AT(allowed_modes), .parse = parse_mode,
     .valid = MODES, .def = PT_MODE_NAMES(","), .base = 1u << PT_MODE_OFF, .item = "allowed_modes",
     .file_form = "a list of mode strings, e.g. [\"auto\", \"1d\"]",
     .doc = "Modes users may request and auto may choose among; off is always allowed."},
    {.name = "master_port_base", .arg = "master_port_base", .type = PT_SPANK_KEY_INT, .offset = AT(master_port_base),
     .lo = 1024, .hi = 65535, .def = "29500", .doc = "First port of the MASTER_PORT range."},
    {.name = "master_port_count", .arg = "master_port_count", .type = PT_SPANK_KEY_INT,
     .offset = AT(master_port_count), .lo = 1, .hi = 65536 - 1024, .def = "1000",
     .doc = "Number of ports of the MASTER_PORT range, which must end at or below 65535."},
    {.name = "max_pp", .arg = "max_pp", .type = PT_SPANK_KEY_INT, .offset = AT(max_pp), .lo = 1, .hi = MAX_COUNT,
     .def = "64", .doc = "Largest pipeline-parallel size users may ask for."},
    {.name = "default_zero", .arg = "default_zero", .type = PT_SPANK_KEY_INT, .offset = AT(default_zero), .lo = 0,
     .hi = 3, .def = "0", .doc = "ZeRO stage of steps that ask for none; at most max_zero."},
    {.name = "max_zero", .arg = "max_zero", .type = PT_SPANK_KEY_INT, .offset = AT(max_zero), .lo = 0, .hi = 3,
     .def = "3", .doc = "Highest ZeRO stage users may ask for."},
    {.name = "default_schedule", .arg = "default_schedule", .type = PT_SPANK_KEY_ENUM, .offset = AT(default_schedule),
     .parse = pt_schedule_parse, .valid = "1f1b, gpipe", .def = "1f1b",
     .doc = "Pipeline schedule of steps that ask for none; it must be in allowed_schedules."},
    {.name = "allowed_schedules", .arg = "allowed_schedules", .type = PT_SPANK_KEY_LIST,
     .offset = AT(allowed_schedules), .parse = pt_schedule_parse, .valid = "gpipe, 1f1b, interleaved",
     .def = "gpipe,1f1b,interleaved", .item = "allowed_schedules entry",
     .file_form = "a list of schedule strings, e.g. [\"1f1b\", \"gpipe\"]",
     .doc = "Pipeline schedules users may ask for; an empty list is refused."},
    {.name = "default_recompute", .arg = "default_recompute", .type = PT_SPANK_KEY_ENUM,
     .offset = AT(default_recompute), .parse = pt_recompute_parse, .valid = "none, block, attention", .def = "none",
     .doc = "Activation recomputation of steps that ask for none."},
    {.name = "default_precision", .arg = "default_precision", .type = PT_SPANK_KEY_ENUM,
     .offset = AT(default_precision), .parse = pt_precision_parse, .valid = "fp32, bf16", .def = "fp32",
     .doc = "Training precision of steps that ask for none; it must be in allowed_precisions."},
    {.name = "allowed_precisions", .arg = "allowed_precisions", .type = PT_SPANK_KEY_LIST,
     .offset = AT(allowed_precisions), .parse = pt_precision_parse, .valid = "fp32, bf16", .def = "fp32,bf16",
     .item = "allowed_precisions entry", .file_form = "a list of precision strings, e.g. [\"fp32\", \"bf16\"]",
     .doc = "Training precisions users may ask for; an empty list is refused."},
    {.name = "topology", .arg = "topology", .type = PT_SPANK_KEY_PATH, .offset = AT(topology),
     .valid = "the path of a cached node model", .def_doc = "none", .arg_what = "plugstack argument topology=",
     .doc = "The cached node model every node plans from (see PLANNING)."},
    {.name = "inter_node_gbps", .arg = "inter_node_gbps", .type = PT_SPANK_KEY_RATE, .offset = AT(inter_node_gbps),
     .max = 1e9, .unit = "GB/s of one rank", .def_doc = "the model's",
     .doc = "Network bandwidth of one node in GB/s, shared by its tasks."},
    {.name = "inter_node_lat_us", .arg = "inter_node_lat_us", .type = PT_SPANK_KEY_RATE,
     .offset = AT(inter_node_lat_us), .max = 1e7, .unit = "microseconds", .def_doc = "the model's",
     .doc = "Latency of one message across nodes in microseconds."},
    {.name = "gemm_gflops", .arg = "gemm_gflops", .type = PT_SPANK_KEY_RATE, .offset = AT(gemm_gflops), .max = 1e9,
     .unit = "GFLOP/s of one rank", .def_doc = "the model's", .doc = "fp32 GEMM rate of one rank in GFLOP/s."},
    {.name = "gemm_gflops_bf16", .arg = "gemm_gflops_bf16", .type = PT_SPANK_KEY_RATE,
     .offset = AT(gemm_gflops_bf16), .max = 1e9, .unit = "GFLOP/s of one rank", .def_doc = "the model's",
     .doc = "bf16 GEMM rate of one rank in GFLOP/s, the rate of bf16 plans."},
    {.name = "bind", .arg = "bind", .type = PT_SPANK_KEY_ENUM, .offset = AT(bind), .parse = parse_bind,
     .valid = "none, auto", .def = "auto", .doc = "Per-task binding (see BINDING)."},
    {.name = "energy", .arg = "energy", .type = PT_SPANK_KEY_ENUM, .offset = AT(energy), .parse = parse_energy,
     .valid = "off, report, plan, apply", .def = "plan",
     .file_msg = "energy must be one of \"off\", \"report\", \"plan\", \"apply\" (the highest --ptrain-energy users "
                 "may ask for)",
     .doc = "The highest --ptrain-energy users may ask for."},
    {.name = "gpu_clock_mhz", .arg = "gpu_clock_mhz", .type = PT_SPANK_KEY_RANGE, .offset = AT(gpu_clock_mhz),
     .def_doc = "any", .arg_form = "MIN-MAX", .doc = "The GPU clocks energy plans may use."},
    {.name = "cpu_clock_mhz", .arg = "cpu_clock_mhz", .type = PT_SPANK_KEY_RANGE, .offset = AT(cpu_clock_mhz),
     .def_doc = "any", .arg_form = "MIN-MAX", .doc = "The CPU clocks energy plans may use."},
    {.name = "node_models", .arg = "node_model", .type = PT_SPANK_KEY_HOSTMAP, .def_doc = "none",
     .item = "node_models entry", .arg_form = "node_model=HOSTLIST=PATH, repeatable",
     .file_form = "a list of \"HOSTLIST=PATH\" strings, e.g. [\"gpu[01-16]=/etc/ptrain/h100.json\"]",
     .doc = "The node model of the nodes of each Slurm host list, for clusters of mixed nodes."},
    {.name = "mixed_nodes", .arg = "mixed_nodes", .type = PT_SPANK_KEY_ENUM, .offset = AT(mixed_nodes),
     .parse = parse_mixed, .valid = "adapt, refuse", .def = "adapt",
     .file_msg = "mixed_nodes must be \"adapt\" or \"refuse\"",
     .doc = "Whether a step over nodes of several kinds is planned (adapt) or refused."},
};
const int pt_spank_nkeys = (int)(sizeof pt_spank_keys / sizeof pt_spank_keys[0]);

const pt_spank_key *pt_spank_key_find(const char *name, size_t len, int file)
{
    for (int i = 0; name && i < pt_spank_nkeys; i++) {
        const char *k = file ? pt_spank_keys[i].name : pt_spank_keys[i].arg;
        if (k && strlen(k) == len && strncmp(name, k, len) == 0) return &pt_spank_keys[i];
    }
    return NULL;
}


/* The keys of ptrain.conf (file) or of the plugstack line, comma-separated
 * in table order, for the messages that name them. */
const char *pt_spank_key_list(int file, char *out, size_t len)
{
    out[0] = '\0';
    size_t n = 0;
    for (int i = 0; i < pt_spank_nkeys; i++) {
        const char *k = file ? pt_spank_keys[i].name : pt_spank_keys[i].arg;
        if (k && n < len) n += (size_t)snprintf(out + n, len - n, "%s%s", n ? ", " : "", k);
    }
    return out;
}

/* "a, b" -> "\"a\", \"b\"", as the ptrain.conf messages quote the values. */
const char *pt_spank_quote_list(const char *list, char *out, size_t len)
{
    size_t n = 0;
    out[0] = '\0';
    for (const char *p = list; *p && n < len;) {
        size_t w = strcspn(p, ",");
        n += (size_t)snprintf(out + n, len - n, "%s\"%.*s\"", n ? ", " : "", (int)w, p);
        p += w;
        while (*p == ',' || *p == ' ') p++;
    }
    return out;
}

int pt_spank_key_man(const pt_spank_key *k, char *buf, size_t len)
{
    char what[192];
    switch (k->type) {
    case PT_SPANK_KEY_INT: snprintf(what, sizeof what, "int %d..%d", k->lo, k->hi); break;
    case PT_SPANK_KEY_RATE: snprintf(what, sizeof what, "number > 0 and <= %g", k->max); break;
    case PT_SPANK_KEY_LIST: snprintf(what, sizeof what, "list of strings: %s", k->valid); break;
    case PT_SPANK_KEY_HOSTMAP:
        snprintf(what, sizeof what, "list of HOSTLIST=PATH strings, at most %d", PT_SPANK_NODE_MODELS);
        break;
    case PT_SPANK_KEY_RANGE: snprintf(what, sizeof what, "list [min, max] in MHz"); break;
    default: snprintf(what, sizeof what, "string: %s", k->valid); break;
    }
    char where[96] = "";
    if (!k->name) snprintf(where, sizeof where, "; plugstack argument only");
    else if (!k->arg) snprintf(where, sizeof where, "; ptrain.conf only");
    else if (k->arg_form) snprintf(where, sizeof where, "; plugstack: %s", k->arg_form);
    else if (k->type == PT_SPANK_KEY_LIST) snprintf(where, sizeof where, "; plugstack: comma-separated");
    const char *def = k->def_doc ? k->def_doc : k->def ? k->def : "none";
    int n = snprintf(buf, len, ".BR %s \" (%s%s; default %s)\"", k->name ? k->name : k->arg, what, where, def);
    return n < 0 || (size_t)n >= len ? -1 : 0;
}

/* ---- values in plugstack syntax (and the defaults) ---------------------- */
void *pt_spank_key_field(pt_spank_conf *c, const pt_spank_key *k) { return (char *)c + k->offset; }

/* "HOSTLIST=PATH" into the next node_models entry of c. */
int pt_spank_add_node_model(const char *what, const char *v, pt_spank_conf *c)
{
    const char *eq = v ? strchr(v, '=') : NULL;
    if (!eq || eq == v || !eq[1])
        return pt_fail(PT_EINVAL, "%s '%s' is not HOSTLIST=PATH (valid: e.g. \"gpu[01-16]=/etc/ptrain/h100.json\")",
                       what, v ? v : "");
    if (c->n_node_models >= PT_SPANK_NODE_MODELS)
        return pt_fail(PT_EINVAL, "%s: more than %d node models (valid: at most %d)", what, PT_SPANK_NODE_MODELS,
                       PT_SPANK_NODE_MODELS);
    const size_t hl = (size_t)(eq - v);
    if (hl >= sizeof c->node_model[0].hosts || strlen(eq + 1) >= sizeof c->node_model[0].path)
        return pt_fail(PT_EINVAL, "%s '%.80s...' is too long (valid: a host list of at most %zu bytes, a path of at most "
                       "%zu)", what, v, sizeof c->node_model[0].hosts - 1, sizeof c->node_model[0].path - 1);
    char hosts[512];
    snprintf(hosts, sizeof hosts, "%.*s", (int)hl, v);
    if (pt_spank_hostlist_has(hosts, "") < 0) return pt_fail(PT_EINVAL, "%s: %s", what, pt_errmsg());
    snprintf(c->node_model[c->n_node_models].hosts, sizeof c->node_model[0].hosts, "%s", hosts);
    snprintf(c->node_model[c->n_node_models].path, sizeof c->node_model[0].path, "%s", eq + 1);
    c->n_node_models++;
    return 0;
}

int pt_spank_set_topology(const char *what, const char *v, pt_spank_conf *c)
{
    if (!v || !*v)
        return pt_fail(PT_EINVAL, "%s needs a path (ptrain-topo --probe --save output)", what);
    if (strlen(v) >= sizeof c->topology)
        return pt_fail(PT_EINVAL, "%s path is longer than %zu bytes", what, sizeof c->topology - 1);
    snprintf(c->topology, sizeof c->topology, "%s", v);
    return 0;
}

static int parse_int_text(const char *key, const char *v, int *out)
{
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (!*v || *end || errno || x < INT_MIN || x > INT_MAX)
        return pt_fail(PT_EINVAL, "invalid %s='%s' (valid: an integer)", key, v);
    *out = (int)x;
    return 0;
}

static int parse_rate_text(const char *key, double max, const char *v, double *out)
{
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (!*v || *end || errno || !(x > 0) || x > max)
        return pt_fail(PT_EINVAL, "invalid %s='%s' (valid: a number > 0 and <= %g)", key, v, max);
    *out = x;
    return 0;
}

/* Key k's value v in plugstack syntax into *c (no range check of the whole:
 * pt_spank_conf_check does that).  The value is named as the plugstack
 * messages always named it. */
int pt_spank_key_set(const pt_spank_key *k, const char *v, pt_spank_conf *c)
{
    const char *key = k->arg ? k->arg : k->name;
    char what[96];
    if (k->arg_what) snprintf(what, sizeof what, "%s", k->arg_what);
    else if (k->type == PT_SPANK_KEY_INT || k->type == PT_SPANK_KEY_RATE) snprintf(what, sizeof what, "%s", key);
    else if (k->type == PT_SPANK_KEY_LIST) snprintf(what, sizeof what, "plugstack %s", k->item);
    else snprintf(what, sizeof what, "plugstack %s", key);
    void *f = pt_spank_key_field(c, k);
    switch (k->type) {
    case PT_SPANK_KEY_ENUM: return k->parse(what, v, f);
    case PT_SPANK_KEY_INT: return parse_int_text(what, v, f);
    case PT_SPANK_KEY_RATE: return parse_rate_text(what, k->max, v, f);
    case PT_SPANK_KEY_PATH: return pt_spank_set_topology(what, v, c);
    case PT_SPANK_KEY_HOSTMAP: return pt_spank_add_node_model(what, v, c);
    case PT_SPANK_KEY_RANGE: return pt_spank_parse_clock_range(what, v, f);
    case PT_SPANK_KEY_LIST: {
        /* comma-separated: allowed_schedules=1f1b,gpipe */
        unsigned mask = k->base;
        char item[32];
        const char *q = v;
        for (;;) {
            size_t n = strcspn(q, ",");
            int x;
            if (n >= sizeof item) n = sizeof item - 1;
            memcpy(item, q, n);
            item[n] = '\0';
            if (k->parse(what, item, &x) < 0) return -1;
            mask |= 1u << x;
            q += strcspn(q, ",");
            if (!*q) break;
            q++;
        }
        *(unsigned *)f = mask;
        return 0;
    }
    default: return pt_fail(PT_EINVAL, "%s cannot be set here", key);
    }
}

void pt_spank_conf_default(pt_spank_conf *c)
{
    memset(c, 0, sizeof *c);
    for (int i = 0; i < pt_spank_nkeys; i++)
        if (pt_spank_keys[i].def) pt_spank_key_set(&pt_spank_keys[i], pt_spank_keys[i].def, c);
}
