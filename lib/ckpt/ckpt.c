/* SPDX-License-Identifier: MIT */
/* Checkpoints: see ckpt.h for the layout on disk and the protocol. */
#define _GNU_SOURCE /* O_NOFOLLOW, O_DIRECTORY, fdopendir, openat, gethostname under -std=c11 */
#include "ckpt/ckpt.h"

#include "core/file.h"
#include "data/shard.h"
#include "parallel/layout.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define CKPT_FORMAT "ptrain-checkpoint"
#define CKPT_VERSION 1
#define MSG_LEN 480

/* out = a/b; PT_EINVAL when it does not fit n bytes */
static int join(char *out, size_t n, const char *a, const char *b)
{
    int k = snprintf(out, n, "%s/%s", a, b);
    if (k < 0 || (size_t)k >= n) return pt_fail(PT_EINVAL, "checkpoint path %s/%s is longer than %zu bytes", a, b, n - 1);
    return PT_OK;
}

/* ---- agreement ------------------------------------------------------------
 * Every rank contributes its status; when any failed, the first failing
 * rank's message goes to every rank (one float per character: exact), so
 * rank 0 can print the real reason in one line; prefixed "rank R: " when
 * not every rank failed. */
static int agree(pt_comm *w, int rc)
{
    double *f = calloc((size_t)w->size, sizeof *f);
    if (!f) return pt_fail(PT_ENOMEM, "out of memory for a checkpoint agreement of %d ranks", w->size);
    f[w->rank] = rc ? (double)rc : 0;
    int crc = pt_allreduce_sum_f64(w, f, (size_t)w->size);
    int first = -1, code = PT_OK, nfail = 0;
    for (int r = 0; r < w->size && !crc; r++)
        if (f[r] != 0) {
            if (first < 0) { first = r; code = (int)f[r]; }
            nfail++;
        }
    free(f);
    if (crc) return crc;
    if (first < 0) return PT_OK;
    float buf[MSG_LEN];
    if (w->rank == first) {
        const char *m = pt_errmsg();
        size_t i = 0;
        for (; i + 1 < MSG_LEN && m[i]; i++) buf[i] = (float)(unsigned char)m[i];
        for (; i < MSG_LEN; i++) buf[i] = 0;
    }
    crc = pt_broadcast(w, buf, MSG_LEN, first);
    if (crc) return crc;
    char text[MSG_LEN];
    for (int i = 0; i < MSG_LEN; i++) text[i] = (char)(int)buf[i];
    text[MSG_LEN - 1] = 0;
    /* when only some ranks failed, the message names the one it comes from
     * (its file, its memory), so a caller printing on rank 0 does not
     * blame rank 0 */
    if (nfail < w->size) pt_fail(code, "rank %d: %s", first, text);
    else if (w->rank != first) pt_fail(code, "%s", text);
    return code;
}

/* ---- writing ---------------------------------------------------------------- */

static int write_file(const char *path, const void *data, size_t n)
{
    pt_atomic_file f;
    int rc = pt_atomic_open(&f, path);
    if (rc) return rc;
    if (pt_write_all(f.fd, data, n)) {
        int e = errno;
        pt_atomic_abort(&f);
        return pt_fail(PT_EIO, "checkpoint file %s: write of %zu bytes failed: %s", path, n, strerror(e));
    }
    return pt_atomic_commit(&f, 1);
}

static int owned_total(pt_train *t, size_t *floats)
{
    *floats = 0;
    for (int i = 0; i < t->model->nparams; i++) {
        int64_t lo, hi;
        float *d, *m, *v;
        int rc = pt_train_owned_state(t, i, &lo, &hi, &d, &m, &v);
        if (rc) return rc;
        *floats += (size_t)(hi - lo);
    }
    return PT_OK;
}

/* this rank's file and its description */
static int write_rank(const char *sdir, pt_train *t)
{
    const pt_pctx *c = t->model->ctx;
    size_t own;
    int rc = owned_total(t, &own);
    if (rc) return rc;
    size_t bytes = 3 * own * sizeof(float);
    char *buf = malloc(bytes ? bytes : 1);
    json_t *tens = json_array();
    if (!buf || !tens) {
        free(buf);
        json_decref(tens);
        return pt_fail(PT_ENOMEM, "out of memory for a checkpoint rank file of %zu bytes", bytes);
    }
    size_t off = 0;
    for (int i = 0; i < t->model->nparams; i++) {
        const pt_param *p = &t->model->params[i];
        int64_t lo, hi;
        float *d, *m, *v;
        pt_train_owned_state(t, i, &lo, &hi, &d, &m, &v);
        size_t k = (size_t)(hi - lo) * sizeof(float);
        json_array_append_new(tens, json_pack("{s:s, s:i, s:I, s:I, s:I, s:I, s:I, s:I}", "name", p->name, "index",
                                              p->index, "rows", (json_int_t)p->rows, "cols", (json_int_t)p->cols,
                                              "local_numel", (json_int_t)p->shard.numel, "lo", (json_int_t)lo,
                                              "hi", (json_int_t)hi, "offset", (json_int_t)off));
        /* the owned data may live on the backend's device: copy2d reads either */
        const pt_ops *ops = t->model->ops;
        ops->copy2d(buf + off, k, d, k, k, 1);
        ops->copy2d(buf + off + k, k, m, k, k, 1);
        ops->copy2d(buf + off + 2 * k, k, v, k, k, 1);
        off += 3 * k;
    }
    char name[64], jname[64], path[4200], jpath[4200];
    snprintf(name, sizeof name, "rank-%05d.bin", c->rank);
    snprintf(jname, sizeof jname, "rank-%05d.json", c->rank);
    if (join(path, sizeof path, sdir, name) || join(jpath, sizeof jpath, sdir, jname)) {
        free(buf);
        json_decref(tens);
        return PT_EINVAL;
    }
    char sum[20];
    snprintf(sum, sizeof sum, "%016" PRIx64, pt_fnv1a64(buf, bytes));
    json_t *desc = json_pack("{s:s, s:i, s:{s:i, s:i, s:i, s:i}, s:I, s:s, s:o}", "name", name, "rank", c->rank,
                             "coords", "dp", c->dp_rank, "pp", c->pp_rank, "tp", c->tp_rank, "sp", c->sp_rank,
                             "bytes", (json_int_t)bytes, "fnv1a64", sum, "tensors", tens);
    char *js = desc ? json_dumps(desc, JSON_COMPACT) : NULL;
    json_decref(desc);
    if (!js) {
        free(buf);
        return pt_fail(PT_ENOMEM, "out of memory for a checkpoint rank description");
    }
    rc = write_file(path, buf, bytes);
    if (!rc) rc = write_file(jpath, js, strlen(js));
    free(buf);
    free(js);
    return rc;
}

int pt_ckpt_step_name(const char *s, long *step)
{
    const size_t n = strlen(s);
    if (strncmp(s, "step-", 5) != 0 || n < 13 || n > 14 || (n == 14 && s[5] == '0')) return 0;
    for (size_t i = 5; i < n; i++)
        if (s[i] < '0' || s[i] > '9') return 0;
    long v = strtol(s + 5, NULL, 10);
    if (v > PT_CKPT_MAX_STEP) return 0;
    *step = v;
    return 1;
}

int pt_ckpt_pointer_parse(const char *text, size_t len, char name[16], long *step)
{
    size_t k = 0; /* the first line: "step-00000002" (14 bytes from step 10^8) */
    while (k < len && text[k] != '\n') k++;
    if (k < 13 || k > 15) return 0;
    memcpy(name, text, k);
    name[k] = 0;
    return pt_ckpt_step_name(name, step);
}

static int cmp_desc(const void *a, const void *b)
{
    long x = *(const long *)a, y = *(const long *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* step-* checkpoints of dir, newest first (malloc'ed; *n = 0 when none).
 * For resuming: a step-* symbolic link to a checkpoint is listed (reading
 * an archived checkpoint linked back in is what its link asks for). */
static long *list_steps(const char *dir, int *n)
{
    *n = 0;
    DIR *d = opendir(dir);
    if (!d) return NULL;
    long *v = NULL;
    int cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        long s;
        if (!pt_ckpt_step_name(e->d_name, &s)) continue;
        if (*n == cap) {
            cap = cap ? 2 * cap : 16;
            long *nv = realloc(v, sizeof *v * (size_t)cap);
            if (!nv) break;
            v = nv;
        }
        v[(*n)++] = s;
    }
    closedir(d);
    if (v) qsort(v, (size_t)*n, sizeof *v, cmp_desc);
    return v;
}

/* Remove checkpoint directory `name` inside the directory open as dfd:
 * its manifest first, so that a directory half removed is never taken as
 * valid, then every other entry (one level: a checkpoint holds files
 * only), then itself.  Never follows a symbolic link: `name` is opened
 * O_NOFOLLOW|O_DIRECTORY (a link or a file there fails with ELOOP or
 * ENOTDIR and nothing is removed), its entries are unlinked relative to
 * that descriptor (an entry that is a link loses the link, never its
 * target).  0, or -1 with errno when `name` is not a real directory. */
static int remove_ckpt_at(int dfd, const char *name)
{
    int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return -1;
    (void)unlinkat(fd, "manifest.json", 0);
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return -1;
    }
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) (void)unlinkat(dirfd(d), e->d_name, 0);
    closedir(d);
    (void)unlinkat(dfd, name, AT_REMOVEDIR);
    return 0;
}

/* what is at dfd/name, without following a link: 'd' a directory, 'l' a
 * symbolic link, 'o' something else, 0 nothing */
static char entry_kind(int dfd, const char *name)
{
    struct stat sb;
    if (fstatat(dfd, name, &sb, AT_SYMLINK_NOFOLLOW)) return 0;
    return S_ISDIR(sb.st_mode) ? 'd' : S_ISLNK(sb.st_mode) ? 'l' : 'o';
}

/* Publish a written checkpoint: the temporary directory tname (path tdir)
 * of directory dir (open as dfd) becomes sname (path sdir), replacing an
 * earlier save of the same step only now; the directory is synced and
 * `latest` names it.  PT_OK, or PT_EIO with one line naming the path. */
static int publish(int dfd, const char *dir, const char *tname, const char *tdir, const char *sname, const char *sdir)
{
    int rc = PT_OK;
    const char k = entry_kind(dfd, sname);
    if (k && (k != 'd' || remove_ckpt_at(dfd, sname)))
        rc = pt_fail(PT_EIO, "checkpoint %s is not a checkpoint directory: not saved over (move it out of %s)", sdir, dir);
    else if (renameat(dfd, tname, dfd, sname))
        rc = pt_fail(PT_EIO, "checkpoint %s cannot be renamed to %s: %s", tdir, sdir, strerror(errno));
    if (!rc && fsync(dfd)) rc = pt_fail(PT_EIO, "checkpoint directory %s: fsync failed: %s", dir, strerror(errno));
    if (!rc) {
        char lp[4200], name[48];
        snprintf(lp, sizeof lp, "%s/latest", dir);
        snprintf(name, sizeof name, "%s\n", sname);
        rc = write_file(lp, name, strlen(name));
    }
    return rc;
}

/* --keep: remove all but the newest `keep` real step-* directories of the
 * directory open as dfd (named dir in messages), never `current`.  A step-*
 * that is not a real directory is not counted and not removed: one warning
 * line (pt_log) when it is older than the ones kept. */
static void prune(int dfd, const char *dir, int keep, long current)
{
    int fd = dup(dfd);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0) close(fd);
        return;
    }
    long *v = NULL;
    int n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        long s;
        if (!pt_ckpt_step_name(e->d_name, &s)) continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            long *nv = realloc(v, sizeof *v * (size_t)cap);
            if (!nv) break;
            v = nv;
        }
        v[n++] = s;
    }
    closedir(d);
    if (v) qsort(v, (size_t)n, sizeof *v, cmp_desc);
    int kept = 0;
    for (int i = 0; i < n; i++) {
        char name[32];
        snprintf(name, sizeof name, "step-%08ld", v[i]);
        const char k = entry_kind(dfd, name);
        if (k != 'd') {
            if (k && kept >= keep)
                pt_log(1, "warning: %s/%s is %s, not a checkpoint directory: --keep leaves it alone", dir, name,
                       k == 'l' ? "a symbolic link" : "not a directory");
            continue;
        }
        if (kept++ < keep || v[i] == current) continue;
        (void)remove_ckpt_at(dfd, name);
    }
    free(v);
}

/* open directory dir (a user-named path: a link to a directory is followed) */
static int open_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return pt_fail(PT_EIO, "checkpoint directory %s cannot be opened: %s", dir, strerror(errno));
    return fd;
}

static json_t *plan_json(const pt_plan *plan, int world)
{
    char summary[640];
    pt_plan_summary(plan, summary, sizeof summary);
    return json_pack("{s:s, s:i, s:s, s:i, s:i, s:i, s:i, s:i, s:i}", "summary", summary, "world", world, "mode",
                     pt_mode_name(plan->mode), "tp_depth", plan->tp_depth, "dp", plan->dp, "tp", plan->tp, "pp",
                     plan->pp, "sp", plan->sp, "zero", plan->zero);
}

static const char *jstr(json_t *o, const char *k);
static long long jint(json_t *o, const char *k);
static json_t *cfg_json(const pt_gpt_config *cfg) { return pt_ckpt_model_json(cfg); }

json_t *pt_ckpt_model_json(const pt_model_shape *m)
{
    char spec[160];
    pt_model_shape_format(m, spec, sizeof spec);
    json_t *o = json_pack("{s:i, s:i, s:i, s:i, s:i, s:s, s:s}", "n_layer", m->n_layer, "n_head", m->n_head, "n_embd",
                          m->n_embd, "seq_len", m->seq_len, "vocab", m->vocab, "family",
                          pt_model_family_name(m->family), "spec", spec);
    if (o && m->family == PT_FAMILY_LLAMA) {
        json_t *x = json_pack("{s:i, s:i, s:b, s:b, s:f, s:f, s:f, s:f, s:f, s:i}", "n_kv_head", pt_model_kv_heads(m),
                              "ffn", pt_model_ffn(m), "untied", m->untied != 0, "qkv_bias", m->qkv_bias != 0,
                              "norm_eps", pt_model_norm_eps(m) == 1e-5 ? 1e-5 : (double)m->norm_eps, "rope_theta",
                              (double)(float)pt_model_rope_theta(m), "rope_factor", (double)m->rope_factor,
                              "rope_low_freq", (double)m->rope_low_freq, "rope_high_freq", (double)m->rope_high_freq,
                              "rope_orig_ctx", m->rope_orig_ctx);
        if (!x || json_object_update(o, x)) {
            json_decref(o);
            o = NULL;
        }
        json_decref(x);
    }
    return o;
}

/* o's member k as an int in [lo, hi] into *v; 0 when absent and may be */
static int shape_int(json_t *o, const char *k, long long lo, long long hi, int optional, int *v)
{
    json_t *x = json_object_get(o, k);
    if (!x && optional) return *v = 0, 1;
    if (!json_is_integer(x) || json_integer_value(x) < lo || json_integer_value(x) > hi) return 0;
    *v = (int)json_integer_value(x);
    return 1;
}

static int shape_float(json_t *o, const char *k, double lo, double hi, float *v)
{
    json_t *x = json_object_get(o, k);
    if (!x) return *v = 0, 1;
    if (!json_is_number(x) || !(json_number_value(x) >= lo && json_number_value(x) <= hi)) return 0;
    *v = (float)json_number_value(x);
    return 1;
}

int pt_ckpt_model_shape(json_t *mc, pt_model_shape *m)
{
    memset(m, 0, sizeof *m);
    json_t *fam = json_object_get(mc, "family");
    if (!shape_int(mc, "n_layer", 1, INT32_MAX, 0, &m->n_layer) || !shape_int(mc, "n_head", 1, INT32_MAX, 0, &m->n_head) ||
        !shape_int(mc, "n_embd", 1, INT32_MAX, 0, &m->n_embd) || !shape_int(mc, "seq_len", 1, INT32_MAX, 0, &m->seq_len) ||
        !shape_int(mc, "vocab", 1, INT32_MAX, 0, &m->vocab) || m->n_embd % m->n_head)
        return pt_fail(PT_EFORMAT, "manifest model L=%lld H=%lld C=%lld T=%lld V=%lld is not a valid model shape "
                       "(each an integer in [1, %d], C a multiple of H)", jint(mc, "n_layer"), jint(mc, "n_head"),
                       jint(mc, "n_embd"), jint(mc, "seq_len"), jint(mc, "vocab"), INT32_MAX);
    if (!fam || (json_is_string(fam) && !strcmp(json_string_value(fam), "gpt2"))) return PT_OK; /* older manifests: GPT-2 */
    if (!json_is_string(fam) || strcmp(json_string_value(fam), "llama"))
        return pt_fail(PT_EFORMAT, "manifest model family %s%.40s%s is not valid (valid: \"gpt2\", \"llama\")",
                       json_is_string(fam) ? "\"" : "", json_is_string(fam) ? json_string_value(fam) : "(not a string)",
                       json_is_string(fam) ? "\"" : "");
    m->family = PT_FAMILY_LLAMA;
    json_t *ut = json_object_get(mc, "untied"), *qb = json_object_get(mc, "qkv_bias");
    if (!shape_int(mc, "n_kv_head", 1, m->n_head, 0, &m->n_kv_head) || m->n_head % m->n_kv_head ||
        !shape_int(mc, "ffn", 1, INT32_MAX, 0, &m->ffn) || (m->n_embd / m->n_head) % 2 ||
        (ut && !json_is_boolean(ut)) || (qb && !json_is_boolean(qb)) ||
        !shape_float(mc, "norm_eps", 1e-30, 1, &m->norm_eps) || !shape_float(mc, "rope_theta", 1e-30, 1e12, &m->rope_theta) ||
        !shape_float(mc, "rope_factor", 0, 1e6, &m->rope_factor) || !shape_float(mc, "rope_low_freq", 0, 1e6, &m->rope_low_freq) ||
        !shape_float(mc, "rope_high_freq", 0, 1e6, &m->rope_high_freq) ||
        !shape_int(mc, "rope_orig_ctx", 0, INT32_MAX, 1, &m->rope_orig_ctx))
        return pt_fail(PT_EFORMAT, "manifest llama model %s is not valid (valid: n_kv_head dividing n_head, ffn >= 1, an even "
                       "head size, untied and qkv_bias booleans, norm_eps in (0, 1], rope_theta > 0, rope_* >= 0)",
                       jstr(mc, "spec"));
    m->untied = json_is_true(ut);
    m->qkv_bias = json_is_true(qb);
    return PT_OK;
}

/* The position of the 16 hex digits of the manifest's checksum member in
 * text[0, len): after the last '"manifest_fnv1a64"' (a key: inside a JSON
 * string its quotes would be escaped), optional white space, ':', white
 * space, '"'; -1 when there is no such member. */
static long sum_digits(const char *text, size_t len)
{
    static const char key[] = "\"" PT_CKPT_MANIFEST_SUM "\"";
    const size_t kl = sizeof key - 1;
    long found = -1;
    for (size_t i = 0; i + kl <= len; i++)
        if (text[i] == '"' && !memcmp(text + i, key, kl)) found = (long)i;
    if (found < 0) return -1;
    size_t i = (size_t)found + kl;
    while (i < len && (text[i] == ' ' || text[i] == '\t' || text[i] == '\r' || text[i] == '\n')) i++;
    if (i >= len || text[i++] != ':') return -1;
    while (i < len && (text[i] == ' ' || text[i] == '\t' || text[i] == '\r' || text[i] == '\n')) i++;
    if (i >= len || text[i++] != '"' || len - i < 17) return -1;
    for (size_t j = 0; j < 16; j++)
        if (!strchr("0123456789abcdef", text[i + j]) || !text[i + j]) return -1;
    return text[i + 16] == '"' ? (long)i : -1;
}

/* rank 0: merge the rank descriptions into manifest.json */
static int write_manifest(const char *sdir, int world, const pt_plan *plan, const pt_gpt_config *cfg,
                          const pt_ckpt_meta *meta, json_t *extra)
{
    json_t *files = json_array(), *tensors = json_object();
    int rc = PT_OK;
    for (int r = 0; r < world && !rc; r++) {
        char p[4200], jname[64], *txt = NULL;
        size_t len;
        snprintf(jname, sizeof jname, "rank-%05d.json", r);
        if ((rc = join(p, sizeof p, sdir, jname))) break;
        rc = pt_read_regular(p, "checkpoint rank description", &txt, &len);
        if (rc) break;
        json_error_t je;
        json_t *d = json_loads(txt, 0, &je);
        free(txt);
        if (!d) { rc = pt_fail(PT_EFORMAT, "checkpoint rank description %s: %s", p, je.text); break; }
        size_t k;
        json_t *x;
        json_array_foreach(json_object_get(d, "tensors"), k, x) {
            char key[16];
            snprintf(key, sizeof key, "%d", (int)json_integer_value(json_object_get(x, "index")));
            if (!json_object_get(tensors, key))
                json_object_set_new(tensors, key,
                                    json_pack("{s:O, s:O, s:O, s:O}", "name", json_object_get(x, "name"), "index",
                                              json_object_get(x, "index"), "rows", json_object_get(x, "rows"),
                                              "cols", json_object_get(x, "cols")));
        }
        json_array_append_new(files, d);
    }
    if (rc) {
        json_decref(files);
        json_decref(tensors);
        return rc;
    }
    json_t *tl = json_array();
    for (int i = 0; i < (int)json_object_size(tensors) + 4096 && json_array_size(tl) < json_object_size(tensors); i++) {
        char key[16];
        snprintf(key, sizeof key, "%d", i);
        json_t *x = json_object_get(tensors, key);
        if (x) json_array_append(tl, x);
    }
    json_decref(tensors);
    json_t *man = json_pack("{s:s, s:i, s:I, s:i, s:o, s:o, s:{s:s, s:I}, s:{s:f, s:f, s:I, s:I}, s:{s:I, s:s}, s:o, s:o}",
                            "format", CKPT_FORMAT, "version", CKPT_VERSION, "step", (json_int_t)meta->step,
                            "adam_step", meta->adam_step, "model", cfg_json(cfg), "plan", plan_json(plan, world),
                            "data", "spec", meta->data, "position_step", (json_int_t)meta->step,
                            "lr_schedule", "lr", (double)meta->lr, "min_lr", (double)meta->min_lr, "warmup",
                            (json_int_t)meta->warmup, "total_steps", (json_int_t)meta->total_steps,
                            "rng", "init_seed", (json_int_t)meta->seed, "note", "no RNG stream advances during training",
                            "tensors", tl, "files", files);
    if (man) json_object_set_new(man, "model_name", json_string(meta->model));
    if (man)
        json_object_set_new(man, "optimizer", json_pack("{s:s, s:f, s:f, s:f, s:f, s:f}", "name", "adamw", "beta1",
                                                        (double)meta->beta1, "beta2", (double)meta->beta2, "eps",
                                                        (double)meta->adam_eps, "weight_decay",
                                                        (double)meta->weight_decay, "grad_clip",
                                                        (double)meta->grad_clip));
    if (man && extra && json_object_update(man, extra)) {
        json_decref(man);
        man = NULL;
    }
    /* the checksum member last, 16 '0' digits while the file's FNV-1a 64 is taken */
    if (man) json_object_set_new(man, PT_CKPT_MANIFEST_SUM, json_string("0000000000000000"));
    char *js = man ? json_dumps(man, JSON_INDENT(1)) : NULL;
    json_decref(man);
    if (!js) return pt_fail(PT_ENOMEM, "out of memory for a checkpoint manifest");
    const size_t jl = strlen(js);
    const long at = sum_digits(js, jl);
    if (at < 0) {
        free(js);
        return pt_fail(PT_ENOMEM, "checkpoint manifest: its checksum member was not written");
    }
    char sum[20];
    snprintf(sum, sizeof sum, "%016" PRIx64, pt_fnv1a64(js, jl));
    memcpy(js + at, sum, 16);
    char p[4200];
    rc = join(p, sizeof p, sdir, "manifest.json");
    if (!rc) rc = write_file(p, js, strlen(js));
    free(js);
    return rc;
}

/* 48 bits naming this save's temporary directory, drawn on rank 0 from
 * its host name, pid and clock and sent to every rank (three floats of 16
 * bits: exact) */
static int save_tag(pt_comm *w, unsigned long long *tag)
{
    float f[3] = {0, 0, 0};
    if (w->rank == 0) {
        char host[256] = "";
        struct timespec ts = {0, 0};
        (void)gethostname(host, sizeof host - 1);
        (void)clock_gettime(CLOCK_REALTIME, &ts);
        char seed[400];
        int k = snprintf(seed, sizeof seed, "%s %ld %lld %ld", host, (long)getpid(), (long long)ts.tv_sec, ts.tv_nsec);
        const uint64_t h = pt_fnv1a64(seed, (size_t)(k > 0 ? k : 0));
        for (int i = 0; i < 3; i++) f[i] = (float)(h >> (16 * i) & 0xffff);
    }
    int rc = pt_broadcast(w, f, 3, 0);
    *tag = 0;
    for (int i = 0; i < 3; i++) *tag |= (unsigned long long)f[i] << (16 * i);
    return rc;
}

int pt_ckpt_save(const char *dir, pt_train *t, const pt_plan *plan, const pt_gpt_config *cfg,
                 const pt_ckpt_meta *meta, int keep, char *saved, size_t n)
{
    return pt_ckpt_save_extra(dir, t, plan, cfg, meta, NULL, keep, saved, n);
}

int pt_ckpt_save_extra(const char *dir, pt_train *t, const pt_plan *plan, const pt_gpt_config *cfg,
                       const pt_ckpt_meta *meta, json_t *extra, int keep, char *saved, size_t n)
{
    pt_comm *w = &t->model->ctx->world;
    if (strlen(dir) > 4000) return pt_fail(PT_EINVAL, "checkpoint directory name of %zu bytes is too long (at most 4000)", strlen(dir));
    /* Every file goes into a temporary directory that becomes step-N only
     * when it is complete (manifest written): a save that fails (disk
     * full, unwritable, a rank lost) leaves every earlier checkpoint, one
     * of the same step included, as it was, and removes its own files.
     * The temporary's name is this save's own (save_tag): another job
     * saving into the same directory despite the lock never shares it.
     * Rank 0 does every directory operation, relative to a descriptor of
     * dir, never through a link. */
    unsigned long long tag;
    int rc = save_tag(w, &tag);
    if (rc) return rc;
    char sname[32], tname[64], sdir[4200], tdir[4200];
    snprintf(sname, sizeof sname, "step-%08ld", meta->step);
    snprintf(tname, sizeof tname, ".step-%08ld.tmp.%012llx", meta->step, tag);
    snprintf(sdir, sizeof sdir, "%s/%s", dir, sname);
    snprintf(tdir, sizeof tdir, "%s/%s", dir, tname);
    int dfd = -1;
    if (w->rank == 0) {
        char k;
        if (mkdir(dir, 0755) && errno != EEXIST)
            rc = pt_fail(PT_EIO, "checkpoint directory %s cannot be created: %s", dir, strerror(errno));
        else if ((dfd = open_dir(dir)) < 0)
            rc = dfd;
        else if ((k = entry_kind(dfd, sname)) && k != 'd')
            rc = pt_fail(PT_EIO, "checkpoint %s is %s, not a checkpoint directory: not saved over (move it out of %s)",
                         sdir, k == 'l' ? "a symbolic link" : "not a directory", dir);
        else if (mkdirat(dfd, tname, 0755))
            rc = pt_fail(PT_EIO, "checkpoint directory %s cannot be created: %s", tdir, strerror(errno));
    }
    rc = agree(w, rc);
    if (!rc) rc = agree(w, write_rank(tdir, t));
    if (!rc && w->rank == 0) {
        rc = write_manifest(tdir, t->model->ctx->world_size, plan, cfg, meta, extra);
        if (!rc) rc = publish(dfd, dir, tname, tdir, sname, sdir);
        if (!rc && keep > 0) prune(dfd, dir, keep, meta->step);
    }
    rc = agree(w, rc);
    if (rc && dfd >= 0) (void)remove_ckpt_at(dfd, tname);
    if (dfd >= 0) close(dfd);
    rc = agree(w, rc);
    if (!rc && saved && n) snprintf(saved, n, "%s", sdir);
    return rc;
}

/* ---- a checkpoint written without a model ------------------------------------ */

#define FNV_PRIME 0x100000001b3ULL
static uint64_t fnv_more(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * FNV_PRIME;
    return h;
}

/* rank 0's file of a one-rank save: per tensor its weights from fill, then
 * zero m and v; its description into *desc */
static int write_rank_stream(const char *tdir, const pt_model_shape *m, pt_ckpt_fill_fn fill, void *arg, json_t **desc)
{
    enum { BLOCK = 1 << 20 };
    char path[4200];
    if (join(path, sizeof path, tdir, "rank-00000.bin")) return PT_EINVAL;
    float *buf = malloc(sizeof(float) * BLOCK), *zero = calloc(BLOCK, sizeof(float));
    json_t *tens = json_array();
    pt_atomic_file f;
    int rc = !buf || !zero || !tens ? pt_fail(PT_ENOMEM, "out of memory for a checkpoint block") : pt_atomic_open(&f, path);
    if (rc) {
        free(buf);
        free(zero);
        json_decref(tens);
        return rc;
    }
    uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a 64 offset basis */
    int64_t off = 0;
    const int np = pt_model_param_count(m);
    for (int i = 0; i < np && !rc; i++) {
        pt_param_info pi;
        pt_model_param_info(m, i, &pi);
        const int64_t n = pi.rows * pi.cols;
        json_array_append_new(tens, json_pack("{s:s, s:i, s:I, s:I, s:I, s:I, s:I, s:I}", "name", pi.name, "index", i,
                                              "rows", (json_int_t)pi.rows, "cols", (json_int_t)pi.cols, "local_numel",
                                              (json_int_t)n, "lo", (json_int_t)0, "hi", (json_int_t)n, "offset",
                                              (json_int_t)off));
        for (int64_t a = 0; a < n && !rc; a += BLOCK) {
            const size_t k = (size_t)(n - a < BLOCK ? n - a : BLOCK);
            if ((rc = fill(arg, i, a, (int64_t)k, buf))) break;
            h = fnv_more(h, buf, k * sizeof(float));
            if (pt_write_all(f.fd, buf, k * sizeof(float)))
                rc = pt_fail(PT_EIO, "checkpoint file %s: write failed: %s", path, strerror(errno));
        }
        for (int mv = 0; mv < 2 && !rc; mv++) /* AdamW m, v: zero */
            for (int64_t a = 0; a < n && !rc; a += BLOCK) {
                const size_t k = (size_t)(n - a < BLOCK ? n - a : BLOCK);
                h = fnv_more(h, zero, k * sizeof(float));
                if (pt_write_all(f.fd, zero, k * sizeof(float)))
                    rc = pt_fail(PT_EIO, "checkpoint file %s: write failed: %s", path, strerror(errno));
            }
        off += 12 * n;
    }
    free(buf);
    free(zero);
    if (rc) {
        pt_atomic_abort(&f);
        json_decref(tens);
        return rc;
    }
    if ((rc = pt_atomic_commit(&f, 1))) {
        json_decref(tens);
        return rc;
    }
    char sum[20];
    snprintf(sum, sizeof sum, "%016" PRIx64, h);
    *desc = json_pack("{s:s, s:i, s:{s:i, s:i, s:i, s:i}, s:I, s:s, s:o}", "name", "rank-00000.bin", "rank", 0,
                      "coords", "dp", 0, "pp", 0, "tp", 0, "sp", 0, "bytes", (json_int_t)off, "fnv1a64", sum,
                      "tensors", tens);
    return *desc ? PT_OK : pt_fail(PT_ENOMEM, "out of memory for a checkpoint rank description");
}

int pt_ckpt_write_model(const char *dir, const pt_model_shape *m, const pt_ckpt_meta *meta, json_t *extra,
                        pt_ckpt_fill_fn fill, void *arg, char *saved, size_t n)
{
    if (strlen(dir) > 4000) return pt_fail(PT_EINVAL, "checkpoint directory name of %zu bytes is too long (at most 4000)", strlen(dir));
    char sname[32], tname[64], sdir[4200], tdir[4200];
    struct timespec ts = {0, 0};
    (void)clock_gettime(CLOCK_REALTIME, &ts);
    snprintf(sname, sizeof sname, "step-%08ld", meta->step);
    snprintf(tname, sizeof tname, ".step-%08ld.tmp.%012llx", meta->step,
             (unsigned long long)((uint64_t)getpid() << 24 ^ (uint64_t)ts.tv_nsec) & 0xffffffffffffULL);
    snprintf(sdir, sizeof sdir, "%s/%s", dir, sname);
    snprintf(tdir, sizeof tdir, "%s/%s", dir, tname);
    int rc = PT_OK, dfd = -1;
    char k;
    if (mkdir(dir, 0755) && errno != EEXIST)
        return pt_fail(PT_EIO, "checkpoint directory %s cannot be created: %s", dir, strerror(errno));
    if ((dfd = open_dir(dir)) < 0) return dfd;
    if ((k = entry_kind(dfd, sname)) && k != 'd')
        rc = pt_fail(PT_EIO, "checkpoint %s is %s, not a checkpoint directory: not saved over (move it out of %s)",
                     sdir, k == 'l' ? "a symbolic link" : "not a directory", dir);
    else if (mkdirat(dfd, tname, 0755))
        rc = pt_fail(PT_EIO, "checkpoint directory %s cannot be created: %s", tdir, strerror(errno));
    if (rc) {
        close(dfd);
        return rc;
    }
    json_t *desc = NULL;
    rc = write_rank_stream(tdir, m, fill, arg, &desc);
    if (!rc) {
        char *js = json_dumps(desc, JSON_COMPACT), jp[4200];
        if (!js) rc = pt_fail(PT_ENOMEM, "out of memory for a checkpoint rank description");
        else if (!(rc = join(jp, sizeof jp, tdir, "rank-00000.json"))) rc = write_file(jp, js, strlen(js));
        free(js);
    }
    json_decref(desc);
    pt_plan plan;
    pt_plan_default(&plan);
    if (!rc) rc = write_manifest(tdir, 1, &plan, m, meta, extra);
    if (!rc) rc = publish(dfd, dir, tname, tdir, sname, sdir);
    if (rc) (void)remove_ckpt_at(dfd, tname);
    close(dfd);
    if (!rc && saved && n) snprintf(saved, n, "%s", sdir);
    return rc;
}

/* ---- loading ---------------------------------------------------------------- */

static const char *jstr(json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}
static long long jint(json_t *o, const char *k) { return json_integer_value(json_object_get(o, k)); }

static int is_hex16(const char *s)
{
    if (!s || strlen(s) != 16) return 0;
    for (int i = 0; i < 16; i++)
        if (!strchr("0123456789abcdef", s[i])) return 0;
    return 1;
}

int pt_ckpt_manifest_parse(const char *path, json_t **out)
{
    char p[4300], *txt = NULL;
    size_t len;
    struct stat sb;
    *out = NULL;
    if (strlen(path) > 4200) return pt_fail(PT_EINVAL, "checkpoint name of %zu bytes is too long (at most 4200)", strlen(path));
    if (stat(path, &sb) || !S_ISDIR(sb.st_mode)) return pt_fail(PT_EIO, "checkpoint %s: not a directory", path);
    snprintf(p, sizeof p, "%s/manifest.json", path);
    if (stat(p, &sb))
        return pt_fail(PT_EIO, "checkpoint %s: no manifest.json (an incomplete save, or not a checkpoint)", path);
    int rc = pt_read_regular(p, "checkpoint manifest", &txt, &len);
    if (rc) return rc;
    json_error_t je;
    json_t *man = json_loadb(txt, len, JSON_REJECT_DUPLICATES, &je);
    if (!man) {
        free(txt);
        return pt_fail(PT_EFORMAT, "checkpoint %s: manifest.json is not valid JSON (line %d: %s)", path, je.line, je.text);
    }
    if (!json_is_object(man) || strcmp(jstr(man, "format"), CKPT_FORMAT) || jint(man, "version") != CKPT_VERSION) {
        pt_fail(PT_EFORMAT, "checkpoint %s: manifest format '%s' version %lld (expected '%s' version %d)", path,
                jstr(man, "format"), jint(man, "version"), CKPT_FORMAT, CKPT_VERSION);
        free(txt);
        json_decref(man);
        return PT_EFORMAT;
    }
    json_t *sv = json_object_get(man, PT_CKPT_MANIFEST_SUM);
    if (sv) {
        /* FNV-1a 64 of the file with the member's 16 digits as '0's */
        const long at = sum_digits(txt, len);
        const char *want = json_string_value(sv);
        char sum[20] = "";
        if (at >= 0 && is_hex16(want) && !memcmp(txt + at, want, 16)) {
            memset(txt + at, '0', 16);
            snprintf(sum, sizeof sum, "%016" PRIx64, pt_fnv1a64(txt, len));
        }
        if (!want || strcmp(sum, want)) {
            rc = pt_fail(PT_EFORMAT, "checkpoint %s: manifest.json has checksum %s, its member " PT_CKPT_MANIFEST_SUM
                         " says %.20s (the manifest was edited or corrupted)", path, *sum ? sum : "(none: malformed member)",
                         want ? want : "(not a string)");
            free(txt);
            json_decref(man);
            return rc;
        }
    }
    free(txt);
    *out = man;
    return PT_OK;
}

/* ---- manifest consistency --------------------------------------------------- */

#define MAX_NUMEL (1LL << 40)  /* elements of one tensor */
#define MAX_WORLD (1LL << 24)  /* ranks of a plan */
#define MAX_BYTES (1LL << 62)  /* bytes of one rank file */

typedef struct checker {
    const char *path;
    void (*report)(void *, const char *);
    void *arg;
    int n;
} checker;

static void problem(checker *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void problem(checker *c, const char *fmt, ...)
{
    char m[PT_ERROR_LEN], line[PT_ERROR_LEN + 256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m, sizeof m, fmt, ap);
    va_end(ap);
    snprintf(line, sizeof line, "checkpoint %.200s: %s", c->path, m);
    for (char *s = line; *s; s++) /* one line, as pt_fail's: names and strings are the file's */
        if (*s == '\n' || *s == '\r') *s = ' ';
    if (c->report) c->report(c->arg, line);
    c->n++;
}

/* o[k] is an integer in [lo, hi]: 1 and *v, else 0 (missing, another type, out of range) */
static int int_in(json_t *o, const char *k, long long lo, long long hi, long long *v)
{
    json_t *x = json_object_get(o, k);
    if (!json_is_integer(x)) return 0;
    const long long y = json_integer_value(x);
    if (y < lo || y > hi) return 0;
    *v = y;
    return 1;
}

/* o[k] for a message: its JSON text (an integer, or what stands there), at most 24 bytes */
static const char *shown(json_t *o, const char *k, char *buf, size_t n)
{
    json_t *x = json_object_get(o, k);
    char *t = x ? json_dumps(x, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
    snprintf(buf, n, "%.24s", t ? t : "(missing)");
    free(t);
    return buf;
}

/* o[k] is a number (integer or real) whose float value is in [lo, hi]: 1 and *v, else 0 */
static int float_in(json_t *o, const char *k, float lo, float hi, float *v)
{
    json_t *x = json_object_get(o, k);
    if (!json_is_number(x)) return 0;
    const double d = json_number_value(x);
    if (!(d >= -3.4e38 && d <= 3.4e38)) return 0; /* outside float: not converted */
    const float f = (float)d;
    if (!(f >= lo && f <= hi)) return 0;
    *v = f;
    return 1;
}

/* the run state besides the tensors (pt_ckpt_meta): every number a resume
 * reads, checked for type and range; one problem per bad member, naming
 * it, its value and what would be valid */
static void check_run_state(checker *c, json_t *man)
{
    char b1[32];
    long long step = -1, v;
    float f;
    if (!int_in(man, "step", 0, PT_CKPT_MAX_STEP, &step)) {
        problem(c, "manifest step %s is not valid (valid: an integer in [0, %lld], ptrain-run's --steps range)",
                shown(man, "step", b1, sizeof b1), (long long)PT_CKPT_MAX_STEP);
        step = -1;
    }
    /* AdamW's t: its bias correction divides by 1 - beta^t, which t = 0
     * after the increment of a step would make 0; t advances with step
     * (a converted model starts both at 0), so t <= step */
    const long long amax = step >= 0 ? step : PT_CKPT_MAX_STEP;
    if (!int_in(man, "adam_step", 0, amax, &v))
        problem(c, "manifest adam_step %s is not valid (valid: an integer in [0, %lld], at most the manifest's step: "
                "AdamW takes one step per optimizer step)", shown(man, "adam_step", b1, sizeof b1), amax);
    if (step >= 0) {
        json_t *dj = json_object_get(man, "data");
        if (!json_is_object(dj) || !json_is_string(json_object_get(dj, "spec")))
            problem(c, "manifest data is not an object with a string spec (the --data it was trained on)");
        else if (!int_in(dj, "position_step", step, step, &v))
            problem(c, "manifest data.position_step %s is not valid (valid: the manifest's step, %lld)",
                    shown(dj, "position_step", b1, sizeof b1), step);
    }
    json_t *ls = json_object_get(man, "lr_schedule");
    static const char *const lrk[2] = {"lr", "min_lr"}, *const stk[2] = {"warmup", "total_steps"};
    for (int i = 0; i < 2; i++) {
        if (!float_in(ls, lrk[i], 0, PT_CKPT_MAX_LR, &f))
            problem(c, "manifest lr_schedule.%s %s is not valid (valid: a number in [0, %g], ptrain-run's --lr range)",
                    lrk[i], shown(ls, lrk[i], b1, sizeof b1), (double)PT_CKPT_MAX_LR);
        if (!int_in(ls, stk[i], 0, PT_CKPT_MAX_STEP, &v))
            problem(c, "manifest lr_schedule.%s %s is not valid (valid: an integer in [0, %lld])", stk[i],
                    shown(ls, stk[i], b1, sizeof b1), (long long)PT_CKPT_MAX_STEP);
    }
    json_t *rj = json_object_get(man, "rng");
    if (!int_in(rj, "init_seed", 0, INT32_MAX, &v))
        problem(c, "manifest rng.init_seed %s is not valid (valid: an integer in [0, %d], ptrain-run's --seed range)",
                shown(rj, "init_seed", b1, sizeof b1), INT32_MAX);
    if (!json_is_string(json_object_get(man, "model_name")))
        problem(c, "manifest model_name %s is not valid (valid: a string, the model preset's name)",
                shown(man, "model_name", b1, sizeof b1));
    /* AdamW's settings: absent in checkpoints of older ptrain; 0 where
     * not recorded (a converted model) */
    json_t *oj = json_object_get(man, "optimizer");
    static const struct { const char *k; float hi; } ok[] = {
        {"beta1", 0.999999f}, {"beta2", 0.999999f}, {"eps", 1.0f}, {"weight_decay", 10.0f}, {"grad_clip", 1e6f}};
    if (oj && !json_is_object(oj)) problem(c, "manifest optimizer is not an object");
    for (size_t i = 0; oj && json_is_object(oj) && i < sizeof ok / sizeof ok[0]; i++)
        if (!float_in(oj, ok[i].k, 0, ok[i].hi, &f))
            problem(c, "manifest optimizer.%s %s is not valid (valid: a number in [0, %g], ptrain-run's range)",
                    ok[i].k, shown(oj, ok[i].k, b1, sizeof b1), (double)ok[i].hi);
}

int pt_ckpt_manifest_check(const char *path, json_t *man, void (*report)(void *arg, const char *msg), void *arg)
{
    checker c = {path, report, arg, 0};
    char b1[32], b2[32], b3[32], b4[32], b5[32];
    /* model */
    json_t *mc = json_object_get(man, "model");
    long long L = 0, H = 0, C = 0, T = 0, V = 0;
    if (!int_in(mc, "n_layer", 1, INT32_MAX, &L) || !int_in(mc, "n_head", 1, INT32_MAX, &H) ||
        !int_in(mc, "n_embd", 1, INT32_MAX, &C) || !int_in(mc, "seq_len", 1, INT32_MAX, &T) ||
        !int_in(mc, "vocab", 1, INT32_MAX, &V) || C % H) {
        problem(&c, "manifest model L=%s H=%s C=%s T=%s V=%s is not a valid GPT-2 config (each an integer in [1, %d], "
                "C a multiple of H)", shown(mc, "n_layer", b1, sizeof b1), shown(mc, "n_head", b2, sizeof b2),
                shown(mc, "n_embd", b3, sizeof b3), shown(mc, "seq_len", b4, sizeof b4),
                shown(mc, "vocab", b5, sizeof b5), INT32_MAX);
        L = 0;
    }
    pt_model_shape shape;
    long long count = 0;
    if (L) {
        pt_errsave es;
        pt_error_save(&es);
        if (pt_ckpt_model_shape(mc, &shape)) {
            problem(&c, "%s", pt_errmsg());
            L = 0;
        } else
            count = pt_model_param_count(&shape);
        pt_error_restore(&es);
    }
    check_run_state(&c, man);
    /* plan */
    json_t *mp = json_object_get(man, "plan");
    long long world = 0, g[4] = {0, 0, 0, 0};
    static const char *const gn[4] = {"dp", "pp", "tp", "sp"};
    int plan_ok = int_in(mp, "world", 1, MAX_WORLD, &world);
    for (int i = 0; i < 4 && plan_ok; i++) plan_ok = int_in(mp, gn[i], 1, world, &g[i]);
    if (plan_ok) {
        long long prod = 1;
        for (int i = 0; i < 4 && prod <= world; i++) prod *= g[i]; /* each factor <= 2^24: no overflow */
        plan_ok = prod == world;
    }
    if (!plan_ok) {
        problem(&c, "manifest plan world=%s dp=%s pp=%s tp=%s sp=%s is not valid (world in [1, %lld], dp pp tp sp >= 1 "
                "with product world)", shown(mp, "world", b1, sizeof b1), shown(mp, "dp", b2, sizeof b2),
                shown(mp, "pp", b3, sizeof b3), shown(mp, "tp", b4, sizeof b4), shown(mp, "sp", b5, sizeof b5),
                MAX_WORLD);
        world = 0;
    }
    pt_mode mode;
    long long depth, zero;
    pt_errsave es;
    pt_error_save(&es); /* pt_mode_parse's message is not this check's */
    const int mode_ok = json_is_string(json_object_get(mp, "mode")) && !pt_mode_parse(jstr(mp, "mode"), &mode) &&
                        pt_layout_for(mode);
    pt_error_restore(&es);
    if (!mode_ok)
        problem(&c, "manifest plan mode %s is not valid (valid: a tensor-parallel layout, one of %s)",
                shown(mp, "mode", b1, sizeof b1), PT_LAYOUT_MODE_NAMES(", "));
    if (world && !int_in(mp, "tp_depth", 1, g[2], &depth))
        problem(&c, "manifest plan tp_depth %s is not valid (valid: an integer in [1, tp = %lld])",
                shown(mp, "tp_depth", b1, sizeof b1), g[2]);
    if (!int_in(mp, "zero", 0, 3, &zero))
        problem(&c, "manifest plan zero %s is not valid (valid: a ZeRO stage, an integer in [0, 3])",
                shown(mp, "zero", b1, sizeof b1));
    /* tensor list */
    json_t *tens = json_object_get(man, "tensors"), *files = json_object_get(man, "files");
    const size_t nt = json_array_size(tens);
    if (!json_is_array(tens) || nt == 0) problem(&c, "the manifest lists no tensors");
    else if (L && (long long)nt != count)
        problem(&c, "the manifest lists %zu tensors, the model L=%lld has %lld", nt, L, count);
    long long *numel = calloc(nt ? nt : 1, sizeof *numel); /* 0: unknown */
    unsigned char *seen = calloc(nt ? nt : 1, 1);
    if (!numel || !seen) {
        free(numel);
        free(seen);
        problem(&c, "out of memory checking a manifest of %zu tensors", nt);
        return c.n;
    }
    size_t k, j;
    json_t *x, *f;
    json_array_foreach(tens, k, x) {
        long long idx, rows, cols;
        if (!int_in(x, "index", (long long)k, (long long)k, &idx) || !int_in(x, "rows", 1, INT32_MAX, &rows) ||
            !int_in(x, "cols", 1, INT32_MAX, &cols) || rows * cols > MAX_NUMEL || !json_is_string(json_object_get(x, "name")))
            problem(&c, "manifest tensor %zu (%.64s) has index %s, shape [%s, %s] (valid: index %zu, a name, rows and "
                    "cols >= 1, at most 2^40 elements)", k, jstr(x, "name"), shown(x, "index", b1, sizeof b1),
                    shown(x, "rows", b2, sizeof b2), shown(x, "cols", b3, sizeof b3), k);
        else
            numel[k] = rows * cols;
    }
    /* rank files */
    if (!json_is_array(files) || json_array_size(files) == 0) problem(&c, "the manifest lists no rank files");
    else if (world && (long long)json_array_size(files) != world)
        problem(&c, "the manifest lists %zu rank files, its plan has world %lld", json_array_size(files), world);
    int files_ok = json_is_array(files);
    json_array_foreach(files, k, f) {
        const char *name = jstr(f, "name");
        long long rank, bytes = 0, co;
        if (!*name || strchr(name, '/') || name[0] == '.' || strlen(name) > 200) {
            problem(&c, "rank file entry %zu has the name '%.64s' (valid: a file name in the checkpoint, without '/', "
                    "not starting with '.')", k, name);
            files_ok = 0;
            continue;
        }
        if (!int_in(f, "rank", (long long)k, (long long)k, &rank))
            problem(&c, "rank file entry %zu (%s) says rank %s", k, name, shown(f, "rank", b1, sizeof b1));
        if (!is_hex16(jstr(f, "fnv1a64")))
            problem(&c, "%s: checksum '%.24s' is not 16 hex digits", name, jstr(f, "fnv1a64"));
        json_t *cj = json_object_get(f, "coords");
        for (int i = 0; i < 4 && world; i++)
            if (!int_in(cj, gn[i], 0, g[i] - 1, &co))
                problem(&c, "%s: grid coordinate %s=%s is outside the plan's [0, %lld)", name, gn[i],
                        shown(cj, gn[i], b1, sizeof b1), g[i]);
        if (!int_in(f, "bytes", 0, MAX_BYTES, &bytes)) {
            problem(&c, "%s: size %s bytes is not an integer in [0, 2^62]", name, shown(f, "bytes", b1, sizeof b1));
            files_ok = 0;
            continue;
        }
        /* the slices fill the file exactly, in order, each inside its tensor's shard */
        json_t *ft = json_object_get(f, "tensors");
        long long used = 0;
        int ok = json_is_array(ft);
        if (!ok) problem(&c, "%s: no tensor list", name);
        json_array_foreach(ft, j, x) {
            long long idx, lo, hi, ln, off;
            if (!int_in(x, "index", 0, (long long)nt - 1, &idx) || strcmp(jstr(json_array_get(tens, (size_t)idx), "name"), jstr(x, "name"))) {
                problem(&c, "%s: tensor '%.64s' (index %s) is not in the manifest's tensor list", name, jstr(x, "name"),
                        shown(x, "index", b1, sizeof b1));
                ok = 0;
                break;
            }
            seen[idx] = 1;
            if (!numel[idx]) { ok = 0; break; } /* reported with the tensor list */
            if (!int_in(x, "local_numel", 0, numel[idx], &ln) || !int_in(x, "lo", 0, ln, &lo) ||
                !int_in(x, "hi", lo, ln, &hi) || !int_in(x, "offset", used, used, &off)) {
                problem(&c, "%s: tensor %s has slice [%s, %s) of %s local elements at offset %s (valid: 0 <= lo <= hi "
                        "<= local elements <= %lld, offset %lld)", name, jstr(x, "name"), shown(x, "lo", b1, sizeof b1),
                        shown(x, "hi", b2, sizeof b2), shown(x, "local_numel", b3, sizeof b3),
                        shown(x, "offset", b4, sizeof b4), numel[idx], used);
                ok = 0;
                break;
            }
            if (12 * (hi - lo) > bytes - used) { /* hi - lo <= 2^40: no overflow */
                problem(&c, "%s: its tensors' slices take more than the %lld bytes the manifest gives the file", name, bytes);
                ok = 0;
                break;
            }
            used += 12 * (hi - lo);
        }
        if (ok && used != bytes)
            problem(&c, "%s: its tensors' slices take %lld bytes, the manifest says the file has %lld", name, used, bytes);
        if (!ok) files_ok = 0;
    }
    for (size_t i = 0; files_ok && i < nt; i++)
        if (!seen[i]) problem(&c, "tensor %.64s is in no rank file", jstr(json_array_get(tens, i), "name"));
    free(numel);
    free(seen);
    return c.n;
}

int pt_ckpt_rank_file_finite(const char *path, json_t *file, const void *buf, size_t len)
{
    static const char *const what[3] = {"weight", "AdamW m", "AdamW v"};
    const char *b = buf;
    size_t k;
    json_t *x;
    json_array_foreach(json_object_get(file, "tensors"), k, x) {
        const long long lo = jint(x, "lo"), hi = jint(x, "hi"), off = jint(x, "offset");
        if (lo < 0 || hi < lo || off < 0 || (unsigned long long)off > len ||
            (unsigned long long)(hi - lo) > (len - (size_t)off) / 12)
            return pt_fail(PT_EFORMAT, "checkpoint %s: %s: tensor %.64s has slice [%lld, %lld) at offset %lld outside "
                           "its %zu bytes", path, jstr(file, "name"), jstr(x, "name"), lo, hi, off, len);
        const size_t n = (size_t)(hi - lo);
        for (int w = 0; w < 3; w++) {
            const char *p = b + off + (size_t)w * 4 * n;
            for (size_t e = 0; e < n; e++) {
                float f;
                memcpy(&f, p + 4 * e, sizeof f);
                if (isfinite(f) && (w < 2 || f >= 0)) continue;
                return pt_fail(PT_EFORMAT, "checkpoint %s: %s: %s element %lld of tensor %.64s (in the saving rank's "
                               "shard) is %g (valid: a finite number%s): the checkpoint cannot be trained from",
                               path, jstr(file, "name"), what[w], lo + (long long)e, jstr(x, "name"), (double)f,
                               w == 2 ? " >= 0" : "");
            }
        }
    }
    return PT_OK;
}

static void first_problem(void *arg, const char *msg)
{
    char *first = arg;
    if (!*first) snprintf(first, PT_ERROR_LEN, "%s", msg);
}

int pt_ckpt_manifest_read(const char *path, json_t **out)
{
    json_t *man;
    *out = NULL;
    int rc = pt_ckpt_manifest_parse(path, &man);
    if (rc) return rc;
    char first[PT_ERROR_LEN] = "";
    if (pt_ckpt_manifest_check(path, man, first_problem, first)) {
        json_decref(man);
        return pt_fail(PT_EFORMAT, "%s", first);
    }
    *out = man;
    return PT_OK;
}

typedef struct staged {
    char *buf;     /* this rank's file */
    json_t *file;  /* its manifest entry */
    json_t *man;
    float **own;   /* resharding: [nparams] this rank's owned [data | m | v], 3 (hi - lo) floats */
} staged;

static int reshard(const char *path, pt_train *t, staged *st);

/* every check that needs no communication; fills st on success */
static int stage(const char *path, pt_train *t, const pt_plan *plan, const pt_gpt_config *cfg, staged *st)
{
    const pt_pctx *c = t->model->ctx;
    char p[4200];
    size_t len;
    memset(st, 0, sizeof *st);
    int rc = pt_ckpt_manifest_read(path, &st->man);
    if (rc) return rc;
    json_t *man = st->man;
    json_t *mc = json_object_get(man, "model");
    pt_model_shape saved;
    if ((rc = pt_ckpt_model_shape(mc, &saved))) return pt_fail(rc, "checkpoint %s: %s", path, pt_errmsg());
    pt_model_shape mine_n = *cfg;
    pt_model_shape_normalise(&saved);
    pt_model_shape_normalise(&mine_n);
    int same = !memcmp(&saved, &mine_n, sizeof saved);
    if (!same && saved.family != cfg->family)
        return pt_fail(PT_EINVAL, "checkpoint %s: saved for a %s model (%s), this run builds a %s model", path,
                       pt_model_family_name(saved.family), jstr(mc, "spec"), pt_model_family_name(cfg->family));
    if (!same && saved.family == PT_FAMILY_LLAMA) {
        char mine[160];
        pt_model_shape_format(cfg, mine, sizeof mine);
        return pt_fail(PT_EINVAL, "checkpoint %s: saved for model %s, this run has %s", path, jstr(mc, "spec"), mine);
    }
    if (!same)
        return pt_fail(PT_EINVAL, "checkpoint %s: saved for model L=%lld H=%lld C=%lld T=%lld V=%lld, this run has L=%d H=%d C=%d T=%d V=%d",
                       path, jint(mc, "n_layer"), jint(mc, "n_head"), jint(mc, "n_embd"), jint(mc, "seq_len"),
                       jint(mc, "vocab"), cfg->n_layer, cfg->n_head, cfg->n_embd, cfg->seq_len, cfg->vocab);
    json_t *mp = json_object_get(man, "plan"), *pl = plan_json(plan, c->world_size);
    same = json_equal(mp, pl);
    json_decref(pl);
    if (!same) return reshard(path, t, st);
    size_t k;
    json_t *f;
    json_array_foreach(json_object_get(man, "files"), k, f) if (jint(f, "rank") == c->rank) st->file = f;
    if (!st->file) return pt_fail(PT_EFORMAT, "checkpoint %s: the manifest lists no file of rank %d", path, c->rank);
    snprintf(p, sizeof p, "%s/%s", path, jstr(st->file, "name"));
    if (strchr(jstr(st->file, "name"), '/'))
        return pt_fail(PT_EFORMAT, "checkpoint %s: file name '%s' has a '/'", path, jstr(st->file, "name"));
    rc = pt_read_regular(p, "checkpoint rank file", &st->buf, &len);
    if (rc) return rc;
    const long long want = jint(st->file, "bytes");
    if ((long long)len != want)
        return pt_fail(PT_EFORMAT, "checkpoint %s: %s has %zu bytes, the manifest says %lld (truncated or replaced)",
                       path, jstr(st->file, "name"), len, want);
    char sum[20];
    snprintf(sum, sizeof sum, "%016" PRIx64, pt_fnv1a64(st->buf, len));
    if (strcmp(sum, jstr(st->file, "fnv1a64")))
        return pt_fail(PT_EFORMAT, "checkpoint %s: %s has checksum %s, the manifest says %s (corrupted)", path,
                       jstr(st->file, "name"), sum, jstr(st->file, "fnv1a64"));
    if ((rc = pt_ckpt_rank_file_finite(path, st->file, st->buf, len))) return rc;
    json_t *tl = json_object_get(st->file, "tensors");
    if ((int)json_array_size(tl) != t->model->nparams)
        return pt_fail(PT_EFORMAT, "checkpoint %s: %s holds %zu tensors, rank %d has %d", path, jstr(st->file, "name"),
                       json_array_size(tl), c->rank, t->model->nparams);
    for (int i = 0; i < t->model->nparams; i++) {
        json_t *x = json_array_get(tl, (size_t)i);
        const pt_param *pp = &t->model->params[i];
        int64_t lo, hi;
        float *d, *m, *v;
        pt_train_owned_state(t, i, &lo, &hi, &d, &m, &v);
        long long off = jint(x, "offset");
        /* pt_ckpt_manifest_check bounds offsets already; again without overflow, as this rank's slice */
        if (jint(x, "index") != pp->index || jint(x, "lo") != lo || jint(x, "hi") != hi || off < 0 || off > want ||
            12 * (hi - lo) > want - off)
            return pt_fail(PT_EFORMAT, "checkpoint %s: tensor %d of %s (%s) does not match this rank's %s [%lld, %lld)",
                           path, i, jstr(st->file, "name"), jstr(x, "name"), pp->name, (long long)lo, (long long)hi);
    }
    return PT_OK;
}

static void unstage(staged *st, int nparams)
{
    if (st->own)
        for (int i = 0; i < nparams; i++) free(st->own[i]);
    free(st->own);
    free(st->buf);
    json_decref(st->man);
    memset(st, 0, sizeof *st);
}

/* ---- resharding ----------------------------------------------------------
 * Loading under another plan (same model): every rank rebuilds the full
 * tensors of its own parameters (data, m, v) from the rank files that hold
 * them, then cuts its shard out with its own layout's param_slice, as at
 * initialisation.  Which full elements a saved shard holds is learnt by
 * slicing an index tensor with the SAVING rank's layout and coordinates (a
 * pt_pctx with only plan, tp_rank, tp_dims and tp_coord set: all that
 * param_slice reads); the index is split in two floats, idx / 4096 and
 * idx % 4096, each exact in fp32 for tensors under 2^36 elements.  The
 * vocabulary padding of wte (rows >= V, always zero) may differ between tp
 * sizes: the common rows are copied, the rest is zero.  Every element of
 * every needed tensor must be covered by some file (else PT_EFORMAT).
 * Memory: 3 full tensors of this rank's parameters plus 2 index tensors of
 * the largest one at a time; every rank reads and checksums every file that
 * holds one of its parameters. */

static int saved_ctx(json_t *mp, json_t *file, pt_pctx *fc, const pt_layout **lo)
{
    memset(fc, 0, sizeof *fc);
    pt_plan_default(&fc->plan);
    if (pt_mode_parse(jstr(mp, "mode"), &fc->plan.mode))
        return pt_fail(PT_EFORMAT, "manifest plan mode '%s' is not valid", jstr(mp, "mode"));
    fc->plan.dp = (int)jint(mp, "dp");
    fc->plan.tp = (int)jint(mp, "tp");
    fc->plan.pp = (int)jint(mp, "pp");
    fc->plan.sp = (int)jint(mp, "sp");
    fc->plan.tp_depth = (int)jint(mp, "tp_depth");
    if (fc->plan.tp < 1 || fc->plan.tp_depth < 1)
        return pt_fail(PT_EFORMAT, "manifest plan tp=%d tp_depth=%d is not valid", fc->plan.tp, fc->plan.tp_depth);
    if (pt_plan_tp_dims(&fc->plan, fc->tp_dims))
        return pt_fail(PT_EFORMAT, "manifest plan: %s", pt_errmsg());
    json_t *co = json_object_get(file, "coords");
    fc->tp_rank = (int)jint(co, "tp");
    if (fc->tp_rank < 0 || fc->tp_rank >= fc->plan.tp)
        return pt_fail(PT_EFORMAT, "manifest: file %s has tp coordinate %d outside [0, %d)", jstr(file, "name"),
                       fc->tp_rank, fc->plan.tp);
    fc->tp_coord[0] = fc->tp_rank / (fc->tp_dims[1] * fc->tp_dims[2]);
    fc->tp_coord[1] = fc->tp_rank / fc->tp_dims[2] % fc->tp_dims[1];
    fc->tp_coord[2] = fc->tp_rank % fc->tp_dims[2];
    *lo = pt_layout_for(fc->plan.mode);
    return *lo ? PT_OK : PT_EFORMAT;
}

static int reshard(const char *path, pt_train *t, staged *st)
{
    pt_gpt *mo = t->model;
    const int np = mo->nparams;
    json_t *mp = json_object_get(st->man, "plan");
    /* full shapes as saved, by index */
    json_t *tens = json_object_get(st->man, "tensors");
    int64_t *nsaved = calloc((size_t)np, sizeof *nsaved);
    float **full = calloc((size_t)np, sizeof *full);  /* [3 * nsaved] data | m | v */
    char **cov = calloc((size_t)np, sizeof *cov);      /* [nsaved] covered */
    st->own = calloc((size_t)np, sizeof *st->own);
    float *ih = NULL, *il = NULL, *sh = NULL, *sl = NULL;
    char *buf = NULL;
    int rc = nsaved && full && cov && st->own ? PT_OK : pt_fail(PT_ENOMEM, "out of memory for resharding");
    int64_t maxn = 0;
    for (int i = 0; i < np && !rc; i++) {
        const pt_param *p = &mo->params[i];
        size_t k;
        json_t *x;
        json_array_foreach(tens, k, x) if (jint(x, "index") == p->index) {
            nsaved[i] = jint(x, "rows") * jint(x, "cols");
            if (jint(x, "cols") != p->cols || (p->cls != PT_P_WTE && jint(x, "rows") != p->rows))
                rc = pt_fail(PT_EFORMAT, "checkpoint %s: tensor %s is [%lld, %lld], this model's is [%lld, %lld]", path,
                             p->name, jint(x, "rows"), jint(x, "cols"), (long long)p->rows, (long long)p->cols);
        }
        if (!rc && nsaved[i] <= 0) rc = pt_fail(PT_EFORMAT, "checkpoint %s: the manifest has no tensor %s (index %d)", path, p->name, p->index);
        if (!rc && nsaved[i] > 1LL << 36) /* the index tensors' two floats */
            rc = pt_fail(PT_EFORMAT, "checkpoint %s: tensor %s has %lld elements, resharding takes at most 2^36", path,
                         p->name, (long long)nsaved[i]);
        if (rc) break;
        if (nsaved[i] > maxn) maxn = nsaved[i];
        full[i] = calloc((size_t)(3 * nsaved[i]), sizeof(float));
        cov[i] = calloc((size_t)nsaved[i], 1);
        if (!full[i] || !cov[i]) rc = pt_fail(PT_ENOMEM, "out of memory for the full tensor %s (%lld floats)", p->name, (long long)nsaved[i]);
    }
    if (!rc) {
        ih = malloc(sizeof(float) * (size_t)maxn);
        il = malloc(sizeof(float) * (size_t)maxn);
        sh = malloc(sizeof(float) * (size_t)maxn);
        sl = malloc(sizeof(float) * (size_t)maxn);
        if (!ih || !il || !sh || !sl) rc = pt_fail(PT_ENOMEM, "out of memory for resharding index tensors");
        for (int64_t g = 0; !rc && g < maxn; g++) {
            ih[g] = (float)(g >> 12);
            il[g] = (float)(g & 4095);
        }
    }
    size_t kf;
    json_t *f;
    json_array_foreach(json_object_get(st->man, "files"), kf, f) {
        if (rc) break;
        json_t *ftl = json_object_get(f, "tensors");
        int needed = 0;
        size_t k;
        json_t *x;
        json_array_foreach(ftl, k, x) for (int i = 0; i < np; i++) if (jint(x, "index") == mo->params[i].index) needed = 1;
        if (!needed) continue;
        pt_pctx fc;
        const pt_layout *slo = NULL;
        if ((rc = saved_ctx(mp, f, &fc, &slo))) break;
        char p[4200];
        size_t len;
        if (strchr(jstr(f, "name"), '/')) { rc = pt_fail(PT_EFORMAT, "checkpoint %s: file name '%s' has a '/'", path, jstr(f, "name")); break; }
        if ((rc = join(p, sizeof p, path, jstr(f, "name")))) break;
        free(buf);
        buf = NULL;
        if ((rc = pt_read_regular(p, "checkpoint rank file", &buf, &len))) break;
        if ((long long)len != jint(f, "bytes")) {
            rc = pt_fail(PT_EFORMAT, "checkpoint %s: %s has %zu bytes, the manifest says %lld (truncated or replaced)", path,
                         jstr(f, "name"), len, jint(f, "bytes"));
            break;
        }
        char sum[20];
        snprintf(sum, sizeof sum, "%016" PRIx64, pt_fnv1a64(buf, len));
        if (strcmp(sum, jstr(f, "fnv1a64"))) {
            rc = pt_fail(PT_EFORMAT, "checkpoint %s: %s has checksum %s, the manifest says %s (corrupted)", path,
                         jstr(f, "name"), sum, jstr(f, "fnv1a64"));
            break;
        }
        if ((rc = pt_ckpt_rank_file_finite(path, f, buf, len))) break;
        json_array_foreach(ftl, k, x) {
            int i = 0;
            while (i < np && mo->params[i].index != jint(x, "index")) i++;
            if (i == np) continue;
            const pt_param *pa = &mo->params[i];
            const int64_t L = jint(x, "local_numel"), lo = jint(x, "lo"), hi = jint(x, "hi"), off = jint(x, "offset");
            const int64_t rows = nsaved[i] / pa->cols;
            if (L < 0 || L > nsaved[i] || lo < 0 || hi < lo || hi > L || off < 0 || off > (int64_t)len ||
                12 * (hi - lo) > (int64_t)len - off) {
                rc = pt_fail(PT_EFORMAT, "checkpoint %s: tensor %s of %s has a bad slice", path, pa->name, jstr(f, "name"));
                break;
            }
            /* elements a bad local_numel claims beyond the saved shard stay out of range (2^24 << 12 >= 2^36) */
            for (int64_t e = 0; e < L; e++) sh[e] = sl[e] = 16777216.0f;
            slo->param_slice(mo->ops, &fc, pa->cls, ih, sh, rows, pa->cols);
            slo->param_slice(mo->ops, &fc, pa->cls, il, sl, rows, pa->cols);
            const float *src = (const float *)(buf + off);
            const int64_t n = hi - lo;
            for (int64_t e = lo; e < hi; e++) {
                const int64_t g = ((int64_t)sh[e] << 12) + (int64_t)sl[e];
                if (g < 0 || g >= nsaved[i]) { rc = pt_fail(PT_EFORMAT, "checkpoint %s: slice of %s out of range", path, pa->name); break; }
                full[i][g] = src[e - lo];
                full[i][nsaved[i] + g] = src[n + e - lo];
                full[i][2 * nsaved[i] + g] = src[2 * n + e - lo];
                cov[i][g] = 1;
            }
            if (rc) break;
        }
    }
    /* every element found; cut this rank's owned slices with its own layout */
    for (int i = 0; i < np && !rc; i++) {
        pt_param *pa = &mo->params[i];
        for (int64_t g = 0; g < nsaved[i]; g++)
            if (!cov[i][g]) {
                rc = pt_fail(PT_EFORMAT, "checkpoint %s: element %lld of %s is in no rank file", path, (long long)g, pa->name);
                break;
            }
        if (rc) break;
        const int64_t nl = pa->rows * pa->cols, nc = nl < nsaved[i] ? nl : nsaved[i];
        int64_t lo, hi;
        float *d, *m, *v;
        pt_train_owned_state(t, i, &lo, &hi, &d, &m, &v);
        float *fl = calloc((size_t)nl, sizeof(float)), *loc = malloc(sizeof(float) * (size_t)(pa->shard.numel ? pa->shard.numel : 1));
        st->own[i] = malloc(sizeof(float) * (size_t)(3 * (hi - lo) + 1));
        if (!fl || !loc || !st->own[i]) rc = pt_fail(PT_ENOMEM, "out of memory resharding %s", pa->name);
        for (int w = 0; w < 3 && !rc; w++) {
            memcpy(fl, full[i] + w * nsaved[i], sizeof(float) * (size_t)nc); /* wte: the common rows; padding stays 0 */
            mo->layout->param_slice(mo->ops, mo->ctx, pa->cls, fl, loc, pa->rows, pa->cols);
            memcpy(st->own[i] + w * (hi - lo), loc + lo, sizeof(float) * (size_t)(hi - lo));
        }
        free(fl);
        free(loc);
    }
    for (int i = 0; i < np; i++) {
        if (full) free(full[i]);
        if (cov) free(cov[i]);
    }
    free(full);
    free(cov);
    free(nsaved);
    free(ih);
    free(il);
    free(sh);
    free(sl);
    free(buf);
    return rc;
}

int pt_ckpt_load(const char *path, pt_train *t, const pt_plan *plan, const pt_gpt_config *cfg, pt_ckpt_meta *meta)
{
    staged st;
    int rc = stage(path, t, plan, cfg, &st);
    rc = agree(&t->model->ctx->world, rc);
    if (rc) {
        unstage(&st, t->model->nparams);
        return rc;
    }
    json_t *tl = json_object_get(st.file, "tensors");
    for (int i = 0; i < t->model->nparams; i++) {
        int64_t lo, hi;
        float *d, *m, *v;
        pt_train_owned_state(t, i, &lo, &hi, &d, &m, &v);
        size_t k = (size_t)(hi - lo) * sizeof(float);
        const char *src = st.own ? (const char *)st.own[i] : st.buf + jint(json_array_get(tl, (size_t)i), "offset");
        const pt_ops *ops = t->model->ops; /* the state may live on the backend's device */
        ops->copy2d(d, k, src, k, k, 1);
        ops->copy2d(m, k, src + k, k, k, 1);
        ops->copy2d(v, k, src + 2 * k, k, k, 1);
    }
    json_t *man = st.man;
    memset(meta, 0, sizeof *meta);
    meta->step = (long)jint(man, "step");
    meta->adam_step = (int)jint(man, "adam_step");
    json_t *ls = json_object_get(man, "lr_schedule");
    meta->lr = (float)json_number_value(json_object_get(ls, "lr")); /* range-checked (check_run_state) */
    meta->min_lr = (float)json_number_value(json_object_get(ls, "min_lr"));
    meta->warmup = (long)jint(ls, "warmup");
    meta->total_steps = (long)jint(ls, "total_steps");
    meta->seed = (long)jint(json_object_get(man, "rng"), "init_seed");
    json_t *oj = json_object_get(man, "optimizer"); /* absent in checkpoints of older ptrain */
    meta->beta1 = (float)json_number_value(json_object_get(oj, "beta1"));
    meta->beta2 = (float)json_number_value(json_object_get(oj, "beta2"));
    meta->adam_eps = (float)json_number_value(json_object_get(oj, "eps"));
    meta->weight_decay = (float)json_number_value(json_object_get(oj, "weight_decay"));
    meta->grad_clip = (float)json_number_value(json_object_get(oj, "grad_clip"));
    snprintf(meta->model, sizeof meta->model, "%s", jstr(man, "model_name"));
    snprintf(meta->data, sizeof meta->data, "%s", jstr(json_object_get(man, "data"), "spec"));
    t->step = meta->adam_step;
    if (t->model->ctx->rank == 0 && !json_object_get(man, PT_CKPT_MANIFEST_SUM))
        pt_log(1, "warning: checkpoint %s: manifest.json has no checksum (saved by an older ptrain); loaded after "
                  "its consistency checks", path);
    unstage(&st, t->model->nparams);
    return agree(&t->model->ctx->world, pt_train_state_loaded(t));
}

/* the target of dir/latest as a step number, or -1 */
static long latest_step(const char *dir)
{
    char p[4200], *txt = NULL;
    size_t len;
    snprintf(p, sizeof p, "%s/latest", dir);
    if (access(p, F_OK)) return -1;
    if (pt_read_regular(p, "checkpoint pointer", &txt, &len)) return -1;
    long s = -1;
    char name[16];
    if (!pt_ckpt_pointer_parse(txt, len, name, &s)) s = -1;
    free(txt);
    return s;
}

int pt_ckpt_resume(const char *spec, const char *save_dir, pt_train *t, const pt_plan *plan,
                   const pt_gpt_config *cfg, pt_ckpt_meta *meta, int *loaded, char *which, size_t n,
                   void (*warn)(const char *msg))
{
    char p[4200];
    *loaded = 0;
    if (strlen(spec) > 4000 || (save_dir && strlen(save_dir) > 4000))
        return pt_fail(PT_EINVAL, "checkpoint directory name is too long (at most 4000 bytes)");
    if (strcmp(spec, "auto") != 0) {
        long s = latest_step(spec);
        if (s >= 0) snprintf(p, sizeof p, "%s/step-%08ld", spec, s);
        else snprintf(p, sizeof p, "%s", spec);
        int rc = pt_ckpt_load(p, t, plan, cfg, meta);
        if (!rc) {
            *loaded = 1;
            if (which && n) snprintf(which, n, "%s", p);
        }
        return rc;
    }
    if (!save_dir) return pt_fail(PT_EINVAL, "--resume auto needs --save-dir (where to look for checkpoints)");
    int ns;
    long *steps = list_steps(save_dir, &ns);
    long first = latest_step(save_dir);
    /* the pointer's target first, then every step directory newest first */
    for (int i = -1; i < ns; i++) {
        long s = i < 0 ? first : steps[i];
        if (s < 0 || (i >= 0 && s == first)) continue;
        snprintf(p, sizeof p, "%s/step-%08ld", save_dir, s);
        int rc = pt_ckpt_load(p, t, plan, cfg, meta);
        if (!rc) {
            *loaded = 1;
            if (which && n) snprintf(which, n, "%s", p);
            break;
        }
        if (rc == PT_ENOMEM) { free(steps); return rc; }
        if (warn) warn(pt_errmsg());
    }
    free(steps);
    return PT_OK;
}

/* ---- the save directory ------------------------------------------------------ */

int pt_ckpt_dir_check(const char *dir)
{
    struct stat sb;
    if (strlen(dir) > 4000) return pt_fail(PT_EINVAL, "checkpoint directory name of %zu bytes is too long (at most 4000)", strlen(dir));
    if (!*dir) return pt_fail(PT_EINVAL, "checkpoint directory '' is not valid (valid: a directory name)");
    if (mkdir(dir, 0755) && errno != EEXIST)
        return pt_fail(PT_EIO, "checkpoint directory %s cannot be created: %s", dir, strerror(errno));
    if (stat(dir, &sb)) return pt_fail(PT_EIO, "checkpoint directory %s cannot be used: %s", dir, strerror(errno));
    if (!S_ISDIR(sb.st_mode))
        return pt_fail(PT_EIO, "checkpoint directory %s is %s, not a directory", dir,
                       S_ISREG(sb.st_mode) ? "a regular file" : "a special file");
    /* its checkpoint pointer, replaced at every save: what that save
     * would refuse (a symbolic link, a directory, ...) is refused now,
     * before any training step */
    char lp[4100];
    snprintf(lp, sizeof lp, "%s/latest", dir);
    if (pt_output_check(lp)) return pt_fail(PT_EIO, "checkpoint directory %s: %s", dir, pt_errmsg());
    int dfd = open_dir(dir);
    if (dfd < 0) return dfd;
    char host[256] = "", name[400];
    (void)gethostname(host, sizeof host - 1);
    for (char *c = host; *c; c++)
        if (*c == '/') *c = '_';
    int fd = -1, e = 0;
    for (int i = 0; i < 100 && fd < 0; i++) {
        snprintf(name, sizeof name, ".ptrain-probe.%s.%ld.%d", host, (long)getpid(), i);
        fd = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        e = errno;
        if (fd < 0 && e != EEXIST) break;
    }
    int rc = PT_OK;
    if (fd < 0) rc = pt_fail(PT_EIO, "checkpoint directory %s is not writable (a probe file cannot be created: %s)", dir, strerror(e));
    else {
        if (pt_write_all(fd, "probe\n", 6) || fsync(fd)) {
            e = errno;
            rc = pt_fail(PT_EIO, "checkpoint directory %s is not writable (writing a probe file failed: %s)", dir, strerror(e));
        }
        if (close(fd) && !rc) rc = pt_fail(PT_EIO, "checkpoint directory %s is not writable (closing a probe file failed: %s)", dir, strerror(errno));
        if (unlinkat(dfd, name, 0) && !rc)
            rc = pt_fail(PT_EIO, "checkpoint directory %s: its probe file %s cannot be removed: %s", dir, name, strerror(errno));
    }
    close(dfd);
    return rc;
}

int pt_ckpt_dir_lock(const char *dir, const char *job, int *fdp)
{
    *fdp = -1;
    if (strlen(dir) > 4000) return pt_fail(PT_EINVAL, "checkpoint directory name of %zu bytes is too long (at most 4000)", strlen(dir));
    int dfd = open_dir(dir);
    if (dfd < 0) return dfd;
    int fd = openat(dfd, ".ptrain-lock", O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
    struct stat sb;
    int rc = PT_OK;
    if (fd < 0)
        rc = pt_fail(PT_EIO, "lock file %s/.ptrain-lock cannot be opened: %s", dir,
                     errno == ELOOP ? "it is a symbolic link" : strerror(errno));
    else if (fstat(fd, &sb) || !S_ISREG(sb.st_mode))
        rc = pt_fail(PT_EIO, "lock file %s/.ptrain-lock is not a regular file", dir);
    else if (flock(fd, LOCK_EX | LOCK_NB)) {
        const int e = errno;
        if (e == EWOULDBLOCK || e == EAGAIN) {
            /* the holder's line (it may be being written: then empty) */
            char who[160] = "";
            ssize_t got = pread(fd, who, sizeof who - 1, 0);
            who[got > 0 ? got : 0] = 0;
            for (char *c = who; *c; c++)
                if (*c == '\n') { *c = 0; break; } else if ((unsigned char)*c < ' ' || *c == 127) *c = '?';
            rc = pt_fail(PT_EIO, "checkpoint directory %s is in use by another job (%s; lock file %s/.ptrain-lock): "
                         "two jobs must not share a --save-dir", dir, *who ? who : "its holder is starting", dir);
        } else {
            rc = pt_fail(PT_EUNSUPP, "checkpoint directory %s: the file system does not support locks (flock: %s), so "
                         "two jobs sharing it are not kept apart", dir, strerror(e));
        }
    } else {
        char host[256] = "", line[512];
        (void)gethostname(host, sizeof host - 1);
        int n = snprintf(line, sizeof line, "job %.64s host %.200s pid %ld\n", job && *job ? job : "-", host, (long)getpid());
        if (ftruncate(fd, 0) || pwrite(fd, line, (size_t)n, 0) != (ssize_t)n)
            rc = pt_fail(PT_EIO, "lock file %s/.ptrain-lock cannot be written: %s", dir, strerror(errno));
    }
    if (!rc) {
        /* temporaries of saves that were killed: no save can be under way */
        int cfd = dup(dfd);
        DIR *d = cfd >= 0 ? fdopendir(cfd) : NULL;
        if (!d && cfd >= 0) close(cfd);
        struct dirent *e;
        while (d && (e = readdir(d)))
            if (!strncmp(e->d_name, ".step-", 6) && strstr(e->d_name, ".tmp") && entry_kind(dfd, e->d_name) == 'd')
                (void)remove_ckpt_at(dfd, e->d_name);
        if (d) closedir(d);
    }
    close(dfd);
    if (rc && fd >= 0) close(fd);
    else *fdp = fd;
    return rc;
}
