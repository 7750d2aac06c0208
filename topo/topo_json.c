/* SPDX-License-Identifier: MIT */
/* ptrain topology: JSON form of the node model (jansson), cache files. */
#define _POSIX_C_SOURCE 200809L
#include "topo/topo.h"
#include "core/file.h"
#include "core/core.h"
#include "core/cpu.h"
#include "topo/topo_priv.h"

#include <jansson.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SCHEMA "ptrain-topo/1"

static const char *nic_kind_name(int k) { return k == PT_NIC_IB ? "ib" : k == PT_NIC_ROCE ? "roce" : "eth"; }

static const char *probe_name(int s)
{
    switch (s) {
    case PT_TOPO_GPU_PROBE_DONE: return "measured";
    case PT_TOPO_GPU_PROBE_NOCUDA: return "no-cuda";
    case PT_TOPO_GPU_PROBE_NOGPU: return "no-gpu";
    default: return "not-run";
    }
}

static json_t *pci_json(const pt_topo_pci *p)
{
    return json_pack("{s:s, s:I, s:I, s:I, s:f, s:i, s:s, s:s, s:s}", "busid", p->busid,
                     "vendor", (json_int_t)p->vendor, "device", (json_int_t)p->device,
                     "class", (json_int_t)p->class_id, "link_gbps", p->link_gbps, "numa", p->numa,
                     "numas", p->numas, "cpus", p->cpus, "cores", p->cores);
}

static json_t *matrix_d(const double *m, int r, int c)
{
    json_t *a = json_array();
    for (int i = 0; i < r; i++) {
        json_t *row = json_array();
        for (int j = 0; j < c; j++) json_array_append_new(row, json_real(m[i * c + j]));
        json_array_append_new(a, row);
    }
    return a;
}

static json_t *class_json(int cls, int nvlinks)
{
    char b[16];
    if (cls == PT_LINK_NV) snprintf(b, sizeof b, "NV%d", nvlinks);
    else snprintf(b, sizeof b, "%s", pt_link_class_name((pt_link_class)cls));
    return json_string(b);
}

/* One collective fit as JSON: {"ranks": *nranks (when given), "bytes":
 * [b0, b1], "<kind>": {"latency_us", "busbw_gbps", "time_us": [t0, t1]}}. */
static json_t *coll_json(const int *nranks, const size_t bytes[2], const double time_us[][2], const double *lat_us,
                         const double *busbw)
{
    json_t *co = json_object();
    if (nranks) json_object_set_new(co, "ranks", json_integer(*nranks));
    json_object_set_new(co, "bytes", json_pack("[I, I]", (json_int_t)bytes[0], (json_int_t)bytes[1]));
    for (int k = 0; k < PT_TOPO_COLL_N; k++)
        json_object_set_new(co, pt_topo_coll_name(k),
                            json_pack("{s:f, s:f, s:[f, f]}", "latency_us", lat_us[k], "busbw_gbps", busbw[k],
                                      "time_us", time_us[k][0], time_us[k][1]));
    return co;
}

/* The device lists into root: "numa", "gpus" and "nics". */
static void devices_json(json_t *root, const pt_topo *t)
{
    json_t *a = json_array();
    for (int i = 0; i < t->nnuma; i++) {
        const pt_topo_numa *n = &t->numa[i];
        json_array_append_new(a, json_pack("{s:i, s:i, s:I, s:i, s:i, s:s, s:f}", "os_index", n->os_index,
                                           "package", n->package, "memory", (json_int_t)n->memory,
                                           "cores", n->ncores, "pus", n->npus, "cpus", n->cpus,
                                           "membw_gbps", n->membw_gbps));
    }
    json_object_set_new(root, "numa", a);
    a = json_array();
    for (int i = 0; i < t->ngpus; i++) {
        const pt_topo_gpu *g = &t->gpu[i];
        json_t *o = json_pack("{s:o, s:s, s:s, s:i, s:f, s:f}", "pci", pci_json(&g->pci), "model", g->model,
                              "osdevs", g->osdevs, "minor", g->minor, "h2d_gbps", g->h2d_gbps,
                              "d2h_gbps", g->d2h_gbps);
        json_array_append_new(a, o);
    }
    json_object_set_new(root, "gpus", a);
    a = json_array();
    for (int i = 0; i < t->nnics; i++) {
        const pt_topo_nic *n = &t->nic[i];
        json_array_append_new(a, json_pack("{s:o, s:s, s:s, s:s, s:s}", "pci", pci_json(&n->pci), "name", n->name,
                                           "netdev", n->netdev, "model", n->model, "kind", nic_kind_name(n->kind)));
    }
    json_object_set_new(root, "nics", a);
}

/* A matrix of link classes (r x c; nvlinks NULL: no NV#) as rows of strings. */
static json_t *matrix_class(const unsigned char *cls, const int *nvlinks, int r, int c)
{
    json_t *a = json_array();
    for (int i = 0; i < r; i++) {
        json_t *row = json_array();
        for (int j = 0; j < c; j++)
            json_array_append_new(row, class_json(cls[i * c + j], nvlinks ? nvlinks[i * c + j] : 0));
        json_array_append_new(a, row);
    }
    return a;
}

/* The MPI probe's results as "net": an object with the optional fields
 * that were measured, or null when the probe did not run. */
static json_t *net_json(const pt_topo_net *n)
{
    if (!n->measured) return json_null();
    json_t *o = json_pack("{s:i, s:i, s:s, s:I, s:f, s:f, s:f, s:f, s:I, s:f, s:f, s:f}",
                          "ranks", n->nranks, "nodes", n->nnodes, "node_names", n->nodes,
                          "msg_bytes", (json_int_t)n->msg_bytes,
                          "intra_latency_us", n->intra_lat_us, "intra_gbps", n->intra_gbps,
                          "inter_latency_us", n->inter_lat_us, "inter_gbps", n->inter_gbps,
                          "allreduce_bytes", (json_int_t)n->ar_bytes,
                          "allreduce_time_us", n->ar_time_us,
                          "allreduce_algbw_gbps", n->ar_algbw,
                          "allreduce_busbw_gbps", n->ar_busbw);
    if (n->ring_lat_us > 0) json_object_set_new(o, "ring_step_latency_us", json_real(n->ring_lat_us));
    if (n->ring_gbps > 0) {
        json_object_set_new(o, "ring_gbps", json_real(n->ring_gbps));
        json_object_set_new(o, "fit_allreduce_bytes", json_integer((json_int_t)n->fit_bytes));
        json_object_set_new(o, "fit_allreduce_time_us", json_real(n->fit_time_us));
    }
    if (n->pair_us > 0 && n->pair_busy_us > 0) {
        json_object_set_new(o, "pair_allreduce_bytes", json_integer((json_int_t)n->pair_bytes));
        json_object_set_new(o, "pair_allreduce_time_us", json_real(n->pair_us));
        json_object_set_new(o, "pair_busy_allreduce_time_us", json_real(n->pair_busy_us));
    }
    if (n->coll_bytes[0] > 0)
        json_object_set_new(o, "collectives", coll_json(NULL, n->coll_bytes, n->coll_time_us, n->coll_lat_us,
                                                        n->coll_busbw));
    if (n->coll_class[0].nranks > 0 || n->coll_class[1].nranks > 0) {
        /* the same per link class, only the classes measured:
         * "collectives_by_class": {"node": {"ranks": p, "bytes", "<kind>"...}, "network": {...}} */
        json_t *cc = json_object();
        for (int l = 0; l < PT_TOPO_CLASS_N; l++) {
            const pt_topo_coll_fit *f = &n->coll_class[l];
            if (f->nranks > 0)
                json_object_set_new(cc, pt_topo_class_name(l), coll_json(&f->nranks, f->bytes, f->time_us, f->lat_us,
                                                                         f->busbw));
        }
        json_object_set_new(o, "collectives_by_class", cc);
    }
    return o;
}

/* The optional CPU figures into root (those measured or known): one
 * core's sgemm and bf16 GEMM rates, the CPU's bf16 class, the Hockney fit. */
static void gemm_json(json_t *root, const pt_topo *t)
{
    if (t->gemm_gflops > 0) json_object_set_new(root, "gemm_gflops", json_real(t->gemm_gflops));
    if (t->gemm_gflops_bf16 > 0) json_object_set_new(root, "gemm_gflops_bf16", json_real(t->gemm_gflops_bf16));
    if (t->cpu_bf16_known) json_object_set_new(root, "cpu_bf16", json_string(pt_bf16_isa_name(t->cpu_bf16)));
    if (t->gemm_rinf_gflops > 0 && t->gemm_n_half > 0)
        json_object_set_new(root, "gemm_fit", json_pack("{s:f, s:f}", "r_inf_gflops", t->gemm_rinf_gflops,
                                                        "n_half_rows", t->gemm_n_half));
}

/* The islands into root as "islands" (derived, for readers; ignored when
 * loading), when pt_topo_islands_find finds them. */
static void islands_json(json_t *root, const pt_topo *t)
{
    pt_topo_islands isl;
    if (pt_topo_islands_find(t, &isl) != PT_OK) return;
    json_t *list = json_array();
    for (int k = 0; k < isl.nislands; k++) {
        json_t *m = json_array();
        for (int d = 0; d < isl.ndev; d++)
            if (isl.island_of[d] == k) json_array_append_new(m, json_integer(d));
        json_array_append_new(list, m);
    }
    json_object_set_new(root, "islands", json_pack("{s:s, s:f, s:o}", "kind",
                                                   isl.kind == PT_DEV_GPU ? "gpu" : "numa",
                                                   "threshold_gbps", isl.threshold_gbps, "members", list));
}

int pt_topo_to_json(const pt_topo *t, char **out)
{
    *out = NULL;
    json_t *root = json_object();
    json_object_set_new(root, "schema", json_string(SCHEMA));
    json_object_set_new(root, "hostname", json_string(t->hostname));
    json_object_set_new(root, "cpu_model", json_string(t->cpu_model));
    json_object_set_new(root, "source", json_string(t->source));
    json_object_set_new(root, "packages", json_integer(t->npackages));
    json_object_set_new(root, "cores", json_integer(t->ncores));
    json_object_set_new(root, "pus", json_integer(t->npus));
    json_object_set_new(root, "os_memory", json_integer((json_int_t)t->os_memory));
    devices_json(root, t);
    json_object_set_new(root, "gpu_links", matrix_class(t->gg_class, t->gg_nvlinks, t->ngpus, t->ngpus));
    json_object_set_new(root, "gpu_nic_links", matrix_class(t->gn_class, NULL, t->ngpus, t->nnics));
    json_object_set_new(root, "nic_links", matrix_class(t->nn_class, NULL, t->nnics, t->nnics));
    json_object_set_new(root, "gpu_gbps", matrix_d(t->gg_gbps, t->ngpus, t->ngpus));
    json_object_set_new(root, "gpu_gbps_nop2p", matrix_d(t->gg_gbps_nop2p, t->ngpus, t->ngpus));
    json_object_set_new(root, "numa_gbps", matrix_d(t->numa_gbps, t->nnuma, t->nnuma));
    json_object_set_new(root, "gpu_probe", json_pack("{s:s, s:s}", "status", probe_name(t->gpu_probe),
                                                     "note", t->gpu_probe_note));
    json_object_set_new(root, "net", net_json(&t->net));
    gemm_json(root, t);
    islands_json(root, t);
    char *text = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(12));
    json_decref(root);
    size_t len = text ? strlen(text) : 0;
    *out = text ? malloc(len + 2) : NULL;
    if (*out) { memcpy(*out, text, len); (*out)[len] = '\n'; (*out)[len + 1] = 0; }   /* a text file ends in a newline */
    free(text);
    if (!*out) return pt_fail(PT_ENOMEM, "cannot encode the topology as JSON");
    return PT_OK;
}

/* ---- parsing --------------------------------------------------------------- */
typedef struct jctx { const char *what; int rc; } jctx;

static int jerr(jctx *c, const char *field, const char *why)
{
    if (c->rc == PT_OK) c->rc = pt_fail(PT_EFORMAT, "%s: field '%s' %s", c->what, field, why);
    return c->rc;
}

static json_t *jget(jctx *c, json_t *o, const char *k, int type)
{
    json_t *v = json_object_get(o, k);
    if (!v) { jerr(c, k, "is missing"); return NULL; }
    int good = type == JSON_REAL ? json_is_number(v) : (int)json_typeof(v) == type;
    if (!good) { jerr(c, k, type == JSON_STRING ? "must be a string" : type == JSON_INTEGER ? "must be an integer" :
                            type == JSON_REAL ? "must be a number" : type == JSON_ARRAY ? "must be an array" :
                            "must be an object"); return NULL; }
    return v;
}

static void jstr(jctx *c, json_t *o, const char *k, char *dst, size_t len)
{
    json_t *v = jget(c, o, k, JSON_STRING);
    if (!v) return;
    if (strlen(json_string_value(v)) >= len) { jerr(c, k, "is too long"); return; }
    snprintf(dst, len, "%s", json_string_value(v));
}

static long long jint(jctx *c, json_t *o, const char *k, long long lo, long long hi)
{
    json_t *v = jget(c, o, k, JSON_INTEGER);
    if (!v) return 0;
    long long x = json_integer_value(v);
    if (x < lo || x > hi) { jerr(c, k, "is out of range"); return 0; }
    return x;
}

static double jnum(jctx *c, json_t *o, const char *k)
{
    json_t *v = jget(c, o, k, JSON_REAL);
    if (!v) return 0;
    double x = json_number_value(v);
    if (!(x >= 0) || x > 1e12) { jerr(c, k, "must be a non-negative number"); return 0; }
    return x;
}

/* One collective fit: {"ranks": p (when nranks is given), "bytes": [b0,
 * b1], "<kind>": {"latency_us", "busbw_gbps", "time_us": [t0, t1]}} into
 * the fields given (nranks may be NULL: no "ranks" key). */
static void coll_parse(jctx *c, json_t *co, int *nranks, size_t bytes[2], double time_us[][2], double *lat_us,
                       double *busbw)
{
    if (nranks) *nranks = (int)jint(c, co, "ranks", 2, 1 << 24);
    json_t *b = c->rc ? NULL : jget(c, co, "bytes", JSON_ARRAY);
    if (b && (json_array_size(b) != 2 || !json_is_integer(json_array_get(b, 0)) ||
              !json_is_integer(json_array_get(b, 1)) || json_integer_value(json_array_get(b, 0)) < 4 ||
              json_integer_value(json_array_get(b, 1)) < 4 ||
              json_integer_value(json_array_get(b, 0)) > ((long long)1 << 40) ||
              json_integer_value(json_array_get(b, 1)) > ((long long)1 << 40)))
        jerr(c, "bytes", "must be two buffer sizes in bytes");
    else if (b)
        for (int s = 0; s < 2; s++) bytes[s] = (size_t)json_integer_value(json_array_get(b, s));
    for (int k = 0; k < PT_TOPO_COLL_N && !c->rc; k++) {
        json_t *o = jget(c, co, pt_topo_coll_name(k), JSON_OBJECT);
        if (!o) break;
        lat_us[k] = jnum(c, o, "latency_us");
        busbw[k] = jnum(c, o, "busbw_gbps");
        json_t *ts = jget(c, o, "time_us", JSON_ARRAY);
        if (ts && (json_array_size(ts) != 2 || !json_is_number(json_array_get(ts, 0)) ||
                   !json_is_number(json_array_get(ts, 1)) || !(json_number_value(json_array_get(ts, 0)) >= 0) ||
                   !(json_number_value(json_array_get(ts, 1)) >= 0)))
            jerr(c, "time_us", "must be two non-negative times in us");
        else if (ts)
            for (int s = 0; s < 2; s++) time_us[k][s] = json_number_value(json_array_get(ts, s));
    }
}

static void jpci(jctx *c, json_t *o, pt_topo_pci *p)
{
    json_t *v = jget(c, o, "pci", JSON_OBJECT);
    if (!v) return;
    jstr(c, v, "busid", p->busid, sizeof p->busid);
    p->vendor = (unsigned)jint(c, v, "vendor", 0, 0xffff);
    p->device = (unsigned)jint(c, v, "device", 0, 0xffff);
    p->class_id = (unsigned)jint(c, v, "class", 0, 0xffff);
    p->link_gbps = jnum(c, v, "link_gbps");
    p->numa = (int)jint(c, v, "numa", -1, 1 << 20);
    jstr(c, v, "numas", p->numas, sizeof p->numas);
    jstr(c, v, "cpus", p->cpus, sizeof p->cpus);
    jstr(c, v, "cores", p->cores, sizeof p->cores);
}

static json_t *jmatrix(jctx *c, json_t *o, const char *k, int r, int cols)
{
    json_t *a = jget(c, o, k, JSON_ARRAY);
    if (!a) return NULL;
    if ((int)json_array_size(a) != r) { jerr(c, k, "has the wrong number of rows"); return NULL; }
    for (int i = 0; i < r; i++) {
        json_t *row = json_array_get(a, (size_t)i);
        if (!json_is_array(row) || (int)json_array_size(row) != cols) { jerr(c, k, "has a row of the wrong length"); return NULL; }
    }
    return a;
}

static void jmatrix_d(jctx *c, json_t *o, const char *k, double *m, int r, int cols)
{
    json_t *a = jmatrix(c, o, k, r, cols);
    if (!a) return;
    for (int i = 0; i < r; i++)
        for (int j = 0; j < cols; j++) {
            json_t *v = json_array_get(json_array_get(a, (size_t)i), (size_t)j);
            if (!json_is_number(v) || json_number_value(v) < 0) { jerr(c, k, "holds a value that is not a non-negative number"); return; }
            m[i * cols + j] = json_number_value(v);
        }
}

static void jmatrix_class(jctx *c, json_t *o, const char *k, unsigned char *cls, int *nv, int r, int cols)
{
    json_t *a = jmatrix(c, o, k, r, cols);
    if (!a) return;
    for (int i = 0; i < r; i++)
        for (int j = 0; j < cols; j++) {
            json_t *v = json_array_get(json_array_get(a, (size_t)i), (size_t)j);
            const char *s = json_is_string(v) ? json_string_value(v) : "";
            int found = -1;
            for (int x = PT_LINK_SYS; x <= PT_LINK_SELF; x++)
                if (x != PT_LINK_NV && !strcmp(s, pt_link_class_name((pt_link_class)x))) found = x;
            if (found < 0 && nv && !strncmp(s, "NV", 2) && isdigit((unsigned char)s[2])) {
                char *end;
                errno = 0;
                long links = strtol(s + 2, &end, 10);
                if (errno || *end || links < 1 || links > PT_TOPO_MAX_NVLINKS) {
                    char why[160];
                    snprintf(why, sizeof why, "holds '%.40s': an NVLink count must be 1..%d (NV1..NV%d)", s,
                             PT_TOPO_MAX_NVLINKS, PT_TOPO_MAX_NVLINKS);
                    jerr(c, k, why);
                    return;
                }
                found = PT_LINK_NV;
                nv[i * cols + j] = (int)links;
            }
            if (found < 0) { jerr(c, k, "holds an unknown link class (valid: X, NV#, PIX, PXB, PHB, NODE, SYS)"); return; }
            cls[i * cols + j] = (unsigned char)found;
        }
}

/* The top level: an object of SCHEMA, its scalar fields, and its numa,
 * gpus and nics arrays into *numa, *gpus and *nics (unchecked after an
 * error). */
static void parse_head(jctx *c, json_t *root, pt_topo *t, json_t **numa, json_t **gpus, json_t **nics)
{
    if (!json_is_object(root)) jerr(c, "(top level)", "must be an object");
    json_t *v = c->rc ? NULL : jget(c, root, "schema", JSON_STRING);
    if (v && strcmp(json_string_value(v), SCHEMA)) jerr(c, "schema", "is not \"" SCHEMA "\"");
    if (c->rc) return;
    jstr(c, root, "hostname", t->hostname, sizeof t->hostname);
    jstr(c, root, "cpu_model", t->cpu_model, sizeof t->cpu_model);
    jstr(c, root, "source", t->source, sizeof t->source);
    t->npackages = (int)jint(c, root, "packages", 0, 1 << 20);
    t->ncores = (int)jint(c, root, "cores", 0, 1 << 24);
    t->npus = (int)jint(c, root, "pus", 1, 1 << 24);
    if (json_object_get(root, "os_memory")) /* absent in caches written before it existed */
        t->os_memory = (uint64_t)jint(c, root, "os_memory", 0, (json_int_t)1 << 60);
    *numa = jget(c, root, "numa", JSON_ARRAY);
    *gpus = jget(c, root, "gpus", JSON_ARRAY);
    *nics = jget(c, root, "nics", JSON_ARRAY);
}

/* The NUMA nodes of array numa into t->numa (t->nnuma of them), each
 * os_index once. */
static void parse_numa(jctx *c, json_t *numa, pt_topo *t)
{
    for (int i = 0; !c->rc && i < t->nnuma; i++) {
        json_t *o = json_array_get(numa, (size_t)i);
        if (!json_is_object(o)) { jerr(c, "numa", "must hold objects"); break; }
        pt_topo_numa *n = &t->numa[i];
        n->os_index = (int)jint(c, o, "os_index", 0, 1 << 20);
        n->package = (int)jint(c, o, "package", -1, 1 << 20);
        n->memory = (uint64_t)jint(c, o, "memory", 0, (long long)1 << 60);
        n->ncores = (int)jint(c, o, "cores", 0, 1 << 24);
        n->npus = (int)jint(c, o, "pus", 0, 1 << 24);
        jstr(c, o, "cpus", n->cpus, sizeof n->cpus);
        n->membw_gbps = jnum(c, o, "membw_gbps");
        for (int k = 0; !c->rc && k < i; k++)
            if (t->numa[k].os_index == n->os_index) {
                char why[96];
                snprintf(why, sizeof why, "lists os_index %d twice (entries %d and %d)", n->os_index, k, i);
                jerr(c, "numa", why);
            }
    }
}

/* The GPUs of array gpus into t->gpu (t->ngpus of them). */
static void parse_gpus(jctx *c, json_t *gpus, pt_topo *t)
{
    for (int i = 0; !c->rc && i < t->ngpus; i++) {
        json_t *o = json_array_get(gpus, (size_t)i);
        if (!json_is_object(o)) { jerr(c, "gpus", "must hold objects"); break; }
        pt_topo_gpu *g = &t->gpu[i];
        jpci(c, o, &g->pci);
        jstr(c, o, "model", g->model, sizeof g->model);
        jstr(c, o, "osdevs", g->osdevs, sizeof g->osdevs);
        g->minor = (int)jint(c, o, "minor", 0, 1 << 20);
        g->h2d_gbps = jnum(c, o, "h2d_gbps");
        g->d2h_gbps = jnum(c, o, "d2h_gbps");
    }
}

/* The NICs of array nics into t->nic (t->nnics of them). */
static void parse_nics(jctx *c, json_t *nics, pt_topo *t)
{
    for (int i = 0; !c->rc && i < t->nnics; i++) {
        json_t *o = json_array_get(nics, (size_t)i);
        if (!json_is_object(o)) { jerr(c, "nics", "must hold objects"); break; }
        pt_topo_nic *n = &t->nic[i];
        jpci(c, o, &n->pci);
        jstr(c, o, "name", n->name, sizeof n->name);
        jstr(c, o, "netdev", n->netdev, sizeof n->netdev);
        if (json_object_get(o, "model")) /* absent in caches from before NIC models */
            jstr(c, o, "model", n->model, sizeof n->model);
        char kind[8] = "";
        jstr(c, o, "kind", kind, sizeof kind);
        if (!strcmp(kind, "ib")) n->kind = PT_NIC_IB;
        else if (!strcmp(kind, "roce")) n->kind = PT_NIC_ROCE;
        else if (!strcmp(kind, "eth")) n->kind = PT_NIC_ETH;
        else jerr(c, "kind", "must be ib, roce or eth");
    }
}

/* The link class and bandwidth matrices between the devices. */
static void parse_links(jctx *c, json_t *root, pt_topo *t)
{
    if (c->rc) return;
    jmatrix_class(c, root, "gpu_links", t->gg_class, t->gg_nvlinks, t->ngpus, t->ngpus);
    jmatrix_class(c, root, "gpu_nic_links", t->gn_class, NULL, t->ngpus, t->nnics);
    jmatrix_class(c, root, "nic_links", t->nn_class, NULL, t->nnics, t->nnics);
    jmatrix_d(c, root, "gpu_gbps", t->gg_gbps, t->ngpus, t->ngpus);
    jmatrix_d(c, root, "gpu_gbps_nop2p", t->gg_gbps_nop2p, t->ngpus, t->ngpus);
    jmatrix_d(c, root, "numa_gbps", t->numa_gbps, t->nnuma, t->nnuma);
}

/* "gpu_probe": {"status", "note"}. */
static void parse_gpu_probe(jctx *c, json_t *root, pt_topo *t)
{
    json_t *gp = c->rc ? NULL : jget(c, root, "gpu_probe", JSON_OBJECT);
    if (!gp) return;
    char s[16] = "";
    jstr(c, gp, "status", s, sizeof s);
    jstr(c, gp, "note", t->gpu_probe_note, sizeof t->gpu_probe_note);
    int found = 0;
    for (int k = -2; k <= 1; k++)
        if (!strcmp(s, probe_name(k))) { t->gpu_probe = k; found = 1; }
    if (!c->rc && !found) jerr(c, "status", "must be measured, not-run, no-cuda or no-gpu");
}

/* The MPI probe's object "net" into n (measured), its optional fields
 * (files from before them load without them) included. */
static void parse_net_fields(jctx *c, json_t *net, pt_topo_net *n)
{
    n->measured = 1;
    n->nranks = (int)jint(c, net, "ranks", 1, 1 << 24);
    n->nnodes = (int)jint(c, net, "nodes", 1, 1 << 24);
    jstr(c, net, "node_names", n->nodes, sizeof n->nodes);
    n->msg_bytes = (size_t)jint(c, net, "msg_bytes", 0, (long long)1 << 40);
    n->intra_lat_us = jnum(c, net, "intra_latency_us");
    n->intra_gbps = jnum(c, net, "intra_gbps");
    n->inter_lat_us = jnum(c, net, "inter_latency_us");
    n->inter_gbps = jnum(c, net, "inter_gbps");
    n->ar_bytes = (size_t)jint(c, net, "allreduce_bytes", 0, (long long)1 << 40);
    n->ar_time_us = jnum(c, net, "allreduce_time_us");
    n->ar_algbw = jnum(c, net, "allreduce_algbw_gbps");
    n->ar_busbw = jnum(c, net, "allreduce_busbw_gbps");
    /* optional (files from before it was recorded load without it) */
    if (!c->rc && json_object_get(net, "ring_step_latency_us")) n->ring_lat_us = jnum(c, net, "ring_step_latency_us");
    if (!c->rc && json_object_get(net, "ring_gbps")) {
        n->ring_gbps = jnum(c, net, "ring_gbps");
        n->fit_bytes = (size_t)jint(c, net, "fit_allreduce_bytes", 0, (long long)1 << 40);
        n->fit_time_us = jnum(c, net, "fit_allreduce_time_us");
    }
    /* optional: each collective kind's fit (files before it have none) */
    json_t *co = c->rc ? NULL : json_object_get(net, "collectives");
    if (co && !json_is_object(co)) jerr(c, "collectives", "must be an object");
    else if (co) coll_parse(c, co, NULL, n->coll_bytes, n->coll_time_us, n->coll_lat_us, n->coll_busbw);
    /* optional: the same per link class (files before it have none; a
     * class absent = not measured) */
    json_t *cc = c->rc ? NULL : json_object_get(net, "collectives_by_class");
    if (cc && !json_is_object(cc)) jerr(c, "collectives_by_class", "must be an object");
    for (int l = 0; cc && l < PT_TOPO_CLASS_N && !c->rc; l++) {
        pt_topo_coll_fit *f = &n->coll_class[l];
        json_t *o = json_object_get(cc, pt_topo_class_name(l));
        if (o && !json_is_object(o)) jerr(c, pt_topo_class_name(l), "must be an object");
        else if (o) coll_parse(c, o, &f->nranks, f->bytes, f->time_us, f->lat_us, f->busbw);
    }
    if (!c->rc && json_object_get(net, "pair_allreduce_time_us")) {
        n->pair_bytes = (size_t)jint(c, net, "pair_allreduce_bytes", 0, (long long)1 << 40);
        n->pair_us = jnum(c, net, "pair_allreduce_time_us");
        n->pair_busy_us = jnum(c, net, "pair_busy_allreduce_time_us");
    }
}

/* "net": the MPI probe's object, or null when not measured. */
static void parse_net(jctx *c, json_t *root, pt_topo_net *n)
{
    json_t *net = c->rc ? NULL : json_object_get(root, "net");
    if (!c->rc && !net) jerr(c, "net", "is missing (null when not measured)");
    if (!c->rc && json_is_object(net)) parse_net_fields(c, net, n);
    else if (!c->rc && !json_is_null(net)) jerr(c, "net", "must be an object or null");
}

/* The optional CPU figures: one core's measured sgemm and bf16 GEMM
 * rates, the CPU's bf16 class and the Hockney fit of the sgemm rate
 * (older files lack them; null = absent). */
static void parse_gemm(jctx *c, json_t *root, pt_topo *t)
{
    /* optional: the measured sgemm rate of one core */
    json_t *gg = c->rc ? NULL : json_object_get(root, "gemm_gflops");
    if (gg && !json_is_null(gg)) {
        if (!json_is_number(gg) || !(json_number_value(gg) >= 0) || json_number_value(gg) > 1e9)
            jerr(c, "gemm_gflops", "must be a number of GFLOP/s (0..1e9)");
        else
            t->gemm_gflops = json_number_value(gg);
    }
    /* optional: the measured bf16 GEMM rate of one core (older files lack it) */
    json_t *gb = c->rc ? NULL : json_object_get(root, "gemm_gflops_bf16");
    if (gb && !json_is_null(gb)) {
        if (!json_is_number(gb) || !(json_number_value(gb) >= 0) || json_number_value(gb) > 1e9)
            jerr(c, "gemm_gflops_bf16", "must be a number of GFLOP/s (0..1e9)");
        else
            t->gemm_gflops_bf16 = json_number_value(gb);
    }
    /* optional: the CPU's bf16 class (older files lack it) */
    json_t *cb = c->rc ? NULL : json_object_get(root, "cpu_bf16");
    if (cb && !json_is_null(cb)) {
        const int k = json_is_string(cb) ? pt_bf16_isa_parse(json_string_value(cb)) : -1;
        if (k < 0) jerr(c, "cpu_bf16", "must be \"none\", \"avx512_bf16\" or \"amx_bf16\"");
        else t->cpu_bf16 = k, t->cpu_bf16_known = 1;
    }
    /* optional: the Hockney fit of the sgemm rate over the GEMM's rows */
    json_t *gf = c->rc ? NULL : json_object_get(root, "gemm_fit");
    if (gf && !json_is_null(gf)) {
        if (!json_is_object(gf)) jerr(c, "gemm_fit", "must be an object {\"r_inf_gflops\", \"n_half_rows\"} or null");
        else {
            t->gemm_rinf_gflops = jnum(c, gf, "r_inf_gflops");
            t->gemm_n_half = jnum(c, gf, "n_half_rows");
        }
    }
}

int pt_topo_from_json(pt_topo *t, const char *text, const char *what)
{
    memset(t, 0, sizeof *t);
    json_error_t je;
    json_t *root = json_loads(text, JSON_REJECT_DUPLICATES, &je);
    if (!root) return pt_fail(PT_EFORMAT, "%s: not JSON (line %d: %s)", what, je.line, je.text);
    jctx c = { what, PT_OK };
    json_t *numa = NULL, *gpus = NULL, *nics = NULL;
    parse_head(&c, root, t, &numa, &gpus, &nics);
    if (!c.rc) {
        t->nnuma = (int)json_array_size(numa);
        t->ngpus = (int)json_array_size(gpus);
        t->nnics = (int)json_array_size(nics);
        if (t->nnuma < 1) jerr(&c, "numa", "must list at least one NUMA node");
    }
    if (!c.rc) {
        t->numa = calloc((size_t)t->nnuma, sizeof *t->numa);
        t->gpu = calloc((size_t)t->ngpus + 1, sizeof *t->gpu);
        t->nic = calloc((size_t)t->nnics + 1, sizeof *t->nic);
        if (!t->numa || !t->gpu || !t->nic || pt_topo_alloc_matrices_(t) != PT_OK)
            c.rc = pt_fail(PT_ENOMEM, "%s: out of memory", what);
    }
    parse_numa(&c, numa, t);
    parse_gpus(&c, gpus, t);
    parse_nics(&c, nics, t);
    parse_links(&c, root, t);
    parse_gpu_probe(&c, root, t);
    parse_net(&c, root, &t->net);
    parse_gemm(&c, root, t);
    json_decref(root);
    if (c.rc) { pt_topo_free(t); return c.rc; }
    return PT_OK;
}

/* ---- files -------------------------------------------------------------------- */
/* The first non-blank byte of fd (read up to it, at most 64 KiB of blanks):
 * the byte, -1 at end of file or past the blanks, PT_EIO on a read error. */
static int first_byte(int fd, const char *path)
{
    unsigned char b[4096];
    for (size_t seen = 0; seen < ((size_t)64 << 10);) {
        ssize_t got = read(fd, b, sizeof b);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) return pt_fail(PT_EIO, "error reading topology file %s: %s", path, strerror(errno));
        if (got == 0) return -1;
        for (ssize_t i = 0; i < got; i++)
            if (!isspace(b[i])) return b[i];
        seen += (size_t)got;
    }
    return -1;
}

int pt_topo_load_file(pt_topo *t, const char *path)
{
    memset(t, 0, sizeof *t);
    /* the format from the first non-blank byte, before anything else is
     * read: a file that is neither is refused without reading it whole */
    int fd = pt_open_regular(path, "topology file"); /* no FIFO blocks */
    if (fd < 0) return fd;
    int c = first_byte(fd, path);
    if (c == '<') {
        close(fd);
        return pt_topo_load_hwloc(t, path);
    }
    if (c != '{') {
        close(fd);
        return c == PT_EIO ? c : pt_fail(PT_EFORMAT, "'%s' is neither ptrain JSON ('{') nor hwloc XML ('<')", path);
    }
    char *buf = NULL;
    size_t len = 0;
    int rc = lseek(fd, 0, SEEK_SET) == 0 ? pt_read_fd(fd, "topology file", path, &buf, &len)
                                         : pt_fail(PT_EIO, "cannot read topology file %s: %s", path, strerror(errno));
    close(fd);
    if (rc) return rc;
    if (strlen(buf) != len) {
        free(buf);
        return pt_fail(PT_EFORMAT, "'%s': a NUL byte inside the JSON text", path);
    }
    rc = pt_topo_from_json(t, buf, path);
    free(buf);
    return rc;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

int pt_topo_save(const pt_topo *t, const char *path)
{
    char *text = NULL;
    int rc = ends_with(path, ".xml") ? pt_topo_to_xml(t, &text) : pt_topo_to_json(t, &text);
    if (rc) return rc;
    /* O_TMPFILE or an O_EXCL temporary next to path (core/file.h): a
     * planted symlink at a predictable name is never followed */
    pt_atomic_file f;
    rc = pt_atomic_open(&f, path);
    if (!rc) {
        if (pt_write_all(f.fd, text, strlen(text)) != 0) {
            rc = pt_fail(PT_EIO, "cannot write '%s': %s", path, strerror(errno));
            pt_atomic_abort(&f);
        } else {
            rc = pt_atomic_commit(&f, 1);
        }
    }
    free(text);
    return rc;
}
