/* SPDX-License-Identifier: MIT */
/* Energy profiles and plans as JSON (see profile.h). */
#define _GNU_SOURCE
#include "energy/profile.h"
#include "energy/clock.h"
#include "core/core.h"
#include "core/file.h"
#include "contract/plan.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define PROFILE_FORMAT "ptrain-energy-profile"
#define PLAN_FORMAT "ptrain-energy-plan"
#define MAX_BYTES (64u << 20)

/* Serialise root (stolen) to path atomically. */
static int save_json(const char *path, json_t *root, const char *what)
{
    if (!root) return pt_fail(PT_ENOMEM, "%s %s: out of memory", what, path);
    char *text = json_dumps(root, JSON_INDENT(1) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10));
    json_decref(root);
    if (!text) return pt_fail(PT_ENOMEM, "%s %s: out of memory", what, path);
    pt_atomic_file f;
    int rc = pt_atomic_open(&f, path);
    if (rc == PT_OK) {
        size_t n = strlen(text);
        text[n] = '\n';
        if (pt_write_all(f.fd, text, n + 1) != 0) {
            pt_atomic_abort(&f);
            rc = pt_fail(PT_EIO, "cannot write the %s %s", what, path);
        } else {
            rc = pt_atomic_commit(&f, 1);
        }
    }
    free(text);
    return rc;
}

static void meta_json(json_t *o, const pt_energy_meta *m)
{
    json_object_set_new(o, "device", json_string(m->device[0] ? m->device : "unknown"));
    json_object_set_new(o, "basis", json_string(m->basis));
    json_object_set_new(o, "schedule", json_string(pt_schedule_name(m->schedule)));
    json_object_set_new(o, "pp", json_integer(m->pp));
    json_object_set_new(o, "virtual_stages", json_integer(m->v));
    json_object_set_new(o, "microbatches", json_integer(m->m));
    json_object_set_new(o, "plan", json_string(m->plan));
}

int pt_energy_profile_save(const char *path, const pt_energy_profile *pr, const pt_energy_meta *meta)
{
    json_t *root = json_object(), *types = json_array();
    if (!root || !types) {
        json_decref(root);
        json_decref(types);
        return pt_fail(PT_ENOMEM, "energy profile %s: out of memory", path);
    }
    json_object_set_new(root, "format", json_string(PROFILE_FORMAT));
    json_object_set_new(root, "version", json_integer(1));
    json_object_set_new(root, "modelled", json_boolean(pr->modelled));
    meta_json(root, meta);
    json_object_set_new(root, "idle_w", json_real(pr->idle_w));
    for (int t = 0; t < pr->ntypes; t++) {
        json_t *ch = json_array();
        for (int k = 0; k < pr->nchoices[t]; k++)
            json_array_append_new(ch, json_pack("{s:f, s:f, s:f}", "freq_mhz", pr->choice[t][k].freq_mhz, "time_s",
                                                pr->choice[t][k].time_s, "energy_j", pr->choice[t][k].energy_j));
        int v = meta->v > 0 ? meta->v : 1;
        json_array_append_new(types, json_pack("{s:i, s:i, s:i, s:b, s:o}", "type", t, "rank", t / 2 / v, "chunk",
                                               t / 2 % v, "bwd", t % 2, "choices", ch));
    }
    json_object_set_new(root, "types", types);
    return save_json(path, root, "energy profile");
}

/* Load a JSON object of the given format from a regular file. */
static int load_json(const char *path, const char *format, const char *what, json_t **out)
{
    *out = NULL;
    char *text = NULL;
    size_t len = 0;
    int rc = pt_read_regular_max(path, what, MAX_BYTES, &text, &len); /* the size checked first */
    if (rc) return rc;
    json_error_t je;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    free(text);
    if (!root) return pt_fail(PT_EFORMAT, "%s %s: not JSON: %s (line %d)", what, path, je.text, je.line);
    const char *f = json_string_value(json_object_get(root, "format"));
    json_t *ver = json_object_get(root, "version");
    if (!json_is_object(root) || !f || strcmp(f, format) != 0) {
        json_decref(root);
        return pt_fail(PT_EFORMAT, "%s %s: \"format\" is not \"%s\" (valid: a file written by %s)", what, path, format,
                       strcmp(format, PROFILE_FORMAT) == 0 ? "ptrain-run --profile-energy"
                                                           : "ptrain-plan --energy-plan-out");
    }
    if (!json_is_integer(ver) || json_integer_value(ver) != 1) {
        json_decref(root);
        return pt_fail(PT_EFORMAT, "%s %s: version is not 1 (valid: 1)", what, path);
    }
    *out = root;
    return PT_OK;
}

static int get_int(json_t *o, const char *key, int lo, int hi, int *v, const char *what, const char *path)
{
    json_t *j = json_object_get(o, key);
    if (!json_is_integer(j) || json_integer_value(j) < lo || json_integer_value(j) > hi)
        return pt_fail(PT_EFORMAT, "%s %s: \"%s\" is not an integer %d..%d", what, path, key, lo, hi);
    *v = (int)json_integer_value(j);
    return PT_OK;
}

/* A clock (MHz): > 0 and at most PT_CLOCK_MAX_MHZ. */
static int get_freq(json_t *o, double *v, const char *what, const char *path, const char *where)
{
    json_t *j = json_object_get(o, "freq_mhz");
    double x = json_is_number(j) ? json_number_value(j) : NAN;
    if (!(x > 0 && x <= PT_CLOCK_MAX_MHZ))
        return pt_fail(PT_EFORMAT, "%s %s: %s\"freq_mhz\" is not a number > 0 and <= %.0f (a clock in MHz)", what, path,
                       where, PT_CLOCK_MAX_MHZ);
    *v = x;
    return PT_OK;
}

static int get_num(json_t *o, const char *key, double lo, double *v, int strict, const char *what, const char *path,
                   const char *where)
{
    json_t *j = json_object_get(o, key);
    double x = json_is_number(j) ? json_number_value(j) : NAN;
    if (!isfinite(x) || (strict ? !(x > lo) : !(x >= lo)))
        return pt_fail(PT_EFORMAT, "%s %s: %s\"%s\" is not a number %s %g", what, path, where, key,
                       strict ? ">" : ">=", lo);
    *v = x;
    return PT_OK;
}

static int meta_load(json_t *root, pt_energy_meta *m, const char *what, const char *path)
{
    memset(m, 0, sizeof *m);
    const char *s = json_string_value(json_object_get(root, "schedule"));
    if (!s || pt_schedule_parse("\"schedule\"", s, &m->schedule) < 0)
        return pt_fail(PT_EFORMAT, "%s %s: \"schedule\" is not one of gpipe, 1f1b, interleaved", what, path);
    if (get_int(root, "pp", 1, PT_PP_SPLIT_MAX, &m->pp, what, path) ||
        get_int(root, "virtual_stages", 1, PT_PP_SPLIT_MAX, &m->v, what, path) ||
        get_int(root, "microbatches", 1, 1 << 20, &m->m, what, path))
        return PT_EFORMAT;
    if (m->pp * m->v > PT_PP_SPLIT_MAX)
        return pt_fail(PT_EFORMAT, "%s %s: pp %d x virtual_stages %d exceeds %d stages", what, path, m->pp, m->v,
                       PT_PP_SPLIT_MAX);
    const char *d = json_string_value(json_object_get(root, "device"));
    const char *b = json_string_value(json_object_get(root, "basis"));
    const char *p = json_string_value(json_object_get(root, "plan"));
    snprintf(m->device, sizeof m->device, "%s", d ? d : "");
    snprintf(m->basis, sizeof m->basis, "%s", b ? b : "");
    snprintf(m->plan, sizeof m->plan, "%s", p ? p : "");
    return PT_OK;
}

int pt_energy_profile_load(const char *path, pt_energy_profile *pr, pt_energy_meta *meta)
{
    static const char what[] = "energy profile";
    memset(pr, 0, sizeof *pr);
    json_t *root;
    int rc = load_json(path, PROFILE_FORMAT, what, &root);
    if (rc) return rc;
    json_t *types = json_object_get(root, "types");
    json_t *mod = json_object_get(root, "modelled");
    if ((rc = meta_load(root, meta, what, path))) goto out;
    if (!json_is_boolean(mod)) {
        rc = pt_fail(PT_EFORMAT, "%s %s: \"modelled\" is not true or false", what, path);
        goto out;
    }
    if ((rc = get_num(root, "idle_w", 0, &pr->idle_w, 0, what, path, ""))) goto out;
    int nt = 2 * meta->pp * meta->v;
    if (!json_is_array(types) || (int)json_array_size(types) != nt) {
        rc = pt_fail(PT_EFORMAT, "%s %s: \"types\" must list %d instruction types (2 x pp %d x virtual_stages %d), it "
                     "has %d", what, path, nt, meta->pp, meta->v,
                     json_is_array(types) ? (int)json_array_size(types) : 0);
        goto out;
    }
    pr->ntypes = nt;
    pr->modelled = json_is_true(mod);
    pr->nchoices = calloc((size_t)nt, sizeof *pr->nchoices);
    pr->choice = calloc((size_t)nt, sizeof *pr->choice);
    if (!pr->nchoices || !pr->choice) {
        rc = pt_fail(PT_ENOMEM, "%s %s: out of memory", what, path);
        goto out;
    }
    for (size_t i = 0; i < json_array_size(types); i++) {
        json_t *ty = json_array_get(types, i), *ch = json_object_get(ty, "choices");
        int t;
        if ((rc = get_int(ty, "type", 0, nt - 1, &t, what, path))) goto out;
        if (pr->choice[t]) {
            rc = pt_fail(PT_EFORMAT, "%s %s: type %d is given twice", what, path, t);
            goto out;
        }
        size_t nc = json_array_size(ch);
        if (!json_is_array(ch) || nc < 1 || nc > 4096) {
            rc = pt_fail(PT_EFORMAT, "%s %s: type %d: \"choices\" must hold 1..4096 clocks", what, path, t);
            goto out;
        }
        pr->choice[t] = calloc(nc, sizeof **pr->choice);
        if (!pr->choice[t]) {
            rc = pt_fail(PT_ENOMEM, "%s %s: out of memory", what, path);
            goto out;
        }
        pr->nchoices[t] = (int)nc;
        for (size_t k = 0; k < nc; k++) {
            json_t *c = json_array_get(ch, k);
            pt_energy_choice *x = &pr->choice[t][k];
            char where[48];
            snprintf(where, sizeof where, "type %d choice %zu: ", t, k);
            if ((rc = get_freq(c, &x->freq_mhz, what, path, where)) ||
                (rc = get_num(c, "time_s", 0, &x->time_s, 1, what, path, where)) ||
                (rc = get_num(c, "energy_j", 0, &x->energy_j, 0, what, path, where)))
                goto out;
        }
    }
out:
    json_decref(root);
    if (rc) pt_energy_profile_free(pr);
    return rc;
}

int pt_energy_plan_save(const char *path, const pt_energy_dag *dag, const pt_energy_profile *pr,
                        const pt_energy_point *pt, const pt_energy_frontier *f, const char *point,
                        const pt_energy_meta *meta)
{
    json_t *root = json_object(), *ins = json_array();
    if (!root || !ins) {
        json_decref(root);
        json_decref(ins);
        return pt_fail(PT_ENOMEM, "energy plan %s: out of memory", path);
    }
    json_object_set_new(root, "format", json_string(PLAN_FORMAT));
    json_object_set_new(root, "version", json_integer(1));
    json_object_set_new(root, "point", json_string(point));
    json_object_set_new(root, "modelled", json_boolean(pr->modelled));
    pt_energy_meta m = *meta;
    m.schedule = dag->kind, m.pp = dag->pp, m.v = dag->v, m.m = dag->m;
    meta_json(root, &m);
    json_object_set_new(root, "time_s", json_real(pt->time_s));
    json_object_set_new(root, "energy_j", json_real(pt->energy_j));
    const pt_energy_point *mc = f ? &f->max_clock : pt;
    json_object_set_new(root, "max_clock", json_pack("{s:f, s:f}", "time_s", mc->time_s, "energy_j", mc->energy_j));
    for (int i = 0; i < dag->n; i++) {
        const pt_energy_instr *x = &dag->in[i];
        json_array_append_new(ins, json_pack("{s:i, s:i, s:i, s:b, s:f}", "rank", x->rank, "chunk", x->chunk, "mb",
                                             x->mb, "bwd", x->bwd, "freq_mhz",
                                             pr->choice[x->type][pt->choice[i]].freq_mhz));
    }
    json_object_set_new(root, "instructions", ins);
    return save_json(path, root, "energy plan");
}

void pt_energy_plan_free(pt_energy_plan *p)
{
    if (!p) return;
    free(p->freq);
    memset(p, 0, sizeof *p);
}

int pt_energy_plan_load(const char *path, pt_energy_plan *out)
{
    static const char what[] = "energy plan";
    memset(out, 0, sizeof *out);
    json_t *root;
    int rc = load_json(path, PLAN_FORMAT, what, &root);
    if (rc) return rc;
    json_t *ins = json_object_get(root, "instructions"), *mc = json_object_get(root, "max_clock");
    const char *pt = json_string_value(json_object_get(root, "point"));
    pt_energy_meta *m = &out->meta;
    if ((rc = meta_load(root, m, what, path))) goto out;
    snprintf(out->point, sizeof out->point, "%s", pt ? pt : "?");
    out->modelled = json_is_true(json_object_get(root, "modelled"));
    if ((rc = get_num(root, "time_s", 0, &out->time_s, 1, what, path, "")) ||
        (rc = get_num(root, "energy_j", 0, &out->energy_j, 0, what, path, "")) ||
        (rc = get_num(mc, "time_s", 0, &out->max_time_s, 1, what, path, "max_clock: ")) ||
        (rc = get_num(mc, "energy_j", 0, &out->max_energy_j, 0, what, path, "max_clock: ")))
        goto out;
    long long n = 2LL * m->pp * m->v * m->m;
    if (n > (1 << 24)) {
        rc = pt_fail(PT_EFORMAT, "%s %s: %lld instructions is too many", what, path, n);
        goto out;
    }
    if (!json_is_array(ins) || (long long)json_array_size(ins) != n) {
        rc = pt_fail(PT_EFORMAT, "%s %s: \"instructions\" must list %lld (2 x pp %d x virtual_stages %d x "
                     "microbatches %d), it has %d", what, path, n, m->pp, m->v, m->m,
                     json_is_array(ins) ? (int)json_array_size(ins) : 0);
        goto out;
    }
    out->n = (int)n;
    out->freq = calloc((size_t)n, sizeof *out->freq);
    if (!out->freq) {
        rc = pt_fail(PT_ENOMEM, "%s %s: out of memory", what, path);
        goto out;
    }
    for (size_t i = 0; i < json_array_size(ins); i++) {
        json_t *x = json_array_get(ins, i), *bj = json_object_get(x, "bwd");
        int rank, chunk, mb;
        double f;
        char where[48];
        snprintf(where, sizeof where, "instruction %zu: ", i);
        if ((rc = get_int(x, "rank", 0, m->pp - 1, &rank, what, path)) ||
            (rc = get_int(x, "chunk", 0, m->v - 1, &chunk, what, path)) ||
            (rc = get_int(x, "mb", 0, m->m - 1, &mb, what, path)) ||
            (rc = get_freq(x, &f, what, path, where)))
            goto out;
        if (!json_is_boolean(bj)) {
            rc = pt_fail(PT_EFORMAT, "%s %s: instruction %zu: \"bwd\" is not true or false", what, path, i);
            goto out;
        }
        int k = pt_energy_instr_index(m->pp, m->v, m->m, chunk * m->pp + rank, mb, json_is_true(bj));
        if (out->freq[k] > 0) {
            rc = pt_fail(PT_EFORMAT, "%s %s: instruction rank %d chunk %d mb %d %s is given twice", what, path, rank,
                         chunk, mb, json_is_true(bj) ? "backward" : "forward");
            goto out;
        }
        out->freq[k] = f;
    }
out:
    json_decref(root);
    if (rc) pt_energy_plan_free(out);
    return rc;
}
