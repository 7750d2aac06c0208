/* SPDX-License-Identifier: MIT */
/* libFuzzer target: a checkpoint's manifest.json (lib/ckpt/ckpt.c:
 * pt_ckpt_manifest_read = parse, format line and checksum, then
 * pt_ckpt_manifest_check) and its directory's `latest` pointer
 * (ptrain-ckpt's ckpt_resolve, bin/ckpt/manifest.c).
 *
 * Each input is read three ways:
 *   - as DIR/step-00000001/manifest.json: accepted, or refused in one line;
 *   - parsed here and checked with pt_ckpt_manifest_check: every problem is
 *     one line naming the checkpoint, counted once; a manifest the check
 *     passes gives ptrain-ckpt a valid model (ckpt_manifest_config);
 *   - re-written with a correct checksum member (last in the object, as
 *     the writer puts it): then the reader must accept it exactly when it
 *     has the format line and the check finds no problem.
 * Its first line is also DIR/latest for ckpt_resolve.
 * lib/ckpt/ckpt.c's save and load paths (MPI, the model) are not reached:
 * their symbols are stubs that abort.  The check asks pt_layout_for
 * whether the plan's mode has a tensor-parallel layout: that is the real
 * lib/parallel/layout.c (linked by scripts/fuzz.sh), with the three
 * layouts it points to as empty tables here (the check only compares the
 * pointer with NULL; the helpers the layouts share are tp_common.c's, not
 * linked). */
#include "fuzz_util.h"
#include "ckpt/ckpt.h"
#include "ckpt_tool.h"
#include "comm/comm.h"
#include "core/core.h"
#include "parallel/layout.h"
#include "train/train.h"

#include <jansson.h>

/* ---- what ckpt.c links against but the manifest code never calls ---- */
#define UNREACHED(name)                                                                                                \
    do {                                                                                                               \
        fprintf(stderr, "fuzz_ckpt_manifest: %s called\n", name);                                                     \
        abort();                                                                                                       \
    } while (0)
int pt_allreduce_sum_f64(pt_comm *c, double *buf, size_t n) { (void)c, (void)buf, (void)n; UNREACHED("pt_allreduce_sum_f64"); }
int pt_broadcast(pt_comm *c, float *buf, size_t n, int root) { (void)c, (void)buf, (void)n, (void)root; UNREACHED("pt_broadcast"); }
/* lib/parallel/tp1d.c, tp2d.c, tp3d.c (the model's code): pt_layout_for's
 * answers; no member is called */
const pt_layout pt_layout_1d = {.name = "1d"}, pt_layout_2d = {.name = "2d"}, pt_layout_3d = {.name = "3d"};
int pt_train_owned_state(pt_train *t, int i, int64_t *lo, int64_t *hi, float **data, float **m, float **v)
{
    (void)t, (void)i, (void)lo, (void)hi, (void)data, (void)m, (void)v;
    UNREACHED("pt_train_owned_state");
}
int pt_train_state_loaded(pt_train *t) { (void)t; UNREACHED("pt_train_state_loaded"); }

static char top[300], step[320], mpath[340], latest[340];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    snprintf(top, sizeof top, "%s/save", fuzz_dir());
    snprintf(step, sizeof step, "%s/step-00000001", top);
    snprintf(mpath, sizeof mpath, "%s/manifest.json", step);
    snprintf(latest, sizeof latest, "%s/latest", top);
    if (mkdir(top, 0755) != 0 || mkdir(step, 0755) != 0) abort();
    return 0;
}

typedef struct seen {
    int n;
} seen;

static void report(void *arg, const char *msg)
{
    seen *s = arg;
    fuzz_check_msg(msg);
    char want[400];
    snprintf(want, sizeof want, "checkpoint %.200s: ", step);
    if (strncmp(msg, want, strlen(want)) != 0) {
        fprintf(stderr, "problem without the checkpoint's name: %s\n", msg);
        abort();
    }
    s->n++;
}

static uint64_t fnv1a64(const char *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)p[i]) * 0x100000001b3ULL;
    return h;
}

/* man written with a correct checksum member, last (the writer's layout) */
static void with_checksum(json_t *man, int problems)
{
    json_object_del(man, PT_CKPT_MANIFEST_SUM);
    json_object_set_new(man, PT_CKPT_MANIFEST_SUM, json_string("0000000000000000"));
    char *text = json_dumps(man, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
    if (!text) return; /* a string jansson cannot write back: nothing to try */
    static const char key[] = "\"" PT_CKPT_MANIFEST_SUM "\": \"0000000000000000\"";
    char *at = NULL;
    for (char *p = strstr(text, key); p; p = strstr(p + 1, key)) at = p;
    if (!at) abort();
    size_t len = strlen(text);
    char sum[17];
    snprintf(sum, sizeof sum, "%016llx", (unsigned long long)fnv1a64(text, len));
    memcpy(at + sizeof key - 1 - 17, sum, 16);
    fuzz_write(mpath, text, len);
    free(text);
    const char *fmt = json_string_value(json_object_get(man, "format"));
    json_t *ver = json_object_get(man, "version");
    int valid = fmt && !strcmp(fmt, "ptrain-checkpoint") && json_is_integer(ver) && json_integer_value(ver) == 1 &&
                problems == 0;
    json_t *back = NULL;
    pt_error_clear();
    int rc = pt_ckpt_manifest_read(step, &back);
    if ((rc == PT_OK) != valid) {
        fprintf(stderr, "with a correct checksum: %s, the check found %d problems: %s\n",
                rc == PT_OK ? "accepted" : "refused", problems, rc ? pt_errmsg() : "");
        abort();
    }
    json_decref(back);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* 1. the file as it is */
    fuzz_write(mpath, data, size);
    json_t *man = NULL;
    pt_error_clear();
    if (pt_ckpt_manifest_read(step, &man) == PT_OK) {
        seen s = {0};
        if (!man || pt_ckpt_manifest_check(step, man, report, &s) != 0 || s.n) abort();
        json_decref(man);
    } else {
        fuzz_check_msg(pt_errmsg());
        if (man) abort();
    }
    /* 2. the consistency check on whatever parses */
    json_error_t je;
    man = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, &je);
    if (man) {
        seen s = {0};
        int problems = pt_ckpt_manifest_check(step, man, report, &s);
        if (problems != s.n || problems < 0) abort();
        pt_ckpt_manifest_check(step, man, NULL, NULL); /* no reporter: fine too */
        if (problems == 0) {
            pt_gpt_config cfg;
            if (ckpt_manifest_config(man, &cfg) != PT_OK) {
                fprintf(stderr, "the check passes a model ptrain-ckpt refuses: %s\n", pt_errmsg());
                abort();
            }
        }
        /* 3. with a correct checksum */
        if (json_is_object(man)) with_checksum(man, problems);
        json_decref(man);
    }
    /* the latest pointer: its first line (at most 64 bytes) */
    size_t n = 0;
    while (n < size && n < 64 && data[n] != '\n') n++;
    fuzz_write(latest, data, n < size ? n + 1 : n);
    char out[600];
    pt_error_clear();
    if (ckpt_resolve(top, out, sizeof out) == PT_OK) {
        /* top itself (no manifest there) or top/step-NNNNNNNN */
        size_t tl = strlen(top);
        if (strncmp(out, top, tl) || (out[tl] && (strlen(out) != tl + 14 || strncmp(out + tl, "/step-", 6)))) abort();
    } else {
        fuzz_check_msg(pt_errmsg());
    }
    return 0;
}
