/* SPDX-License-Identifier: MIT */
/* The checkpoint manifest check (lib/ckpt/ckpt.c, pt_ckpt_manifest_check)
 * on the fuzz target's inputs (tests/fuzz/fuzz_ckpt_manifest.c): the
 * sound manifests of the seed corpus pass, and every problem is reported
 * as one line naming the checkpoint, also when the manifest's strings (a
 * tensor name, a checksum) hold newlines -- ptrain-ckpt verify prints the
 * lines as they come, so a crafted manifest could otherwise print lines
 * of its own (found by fuzz_ckpt_manifest). */
#define _GNU_SOURCE
#include "ckpt/ckpt.h"
#include "core/core.h"
#include "tests/tap.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

typedef struct lines {
    int n, bad;
    char first_bad[PT_ERROR_LEN + 256];
} lines;

static void report(void *arg, const char *msg)
{
    lines *l = arg;
    l->n++;
    if (strncmp(msg, "checkpoint CK: ", 15) || strchr(msg, '\n') || strchr(msg, '\r')) {
        if (!l->bad++) snprintf(l->first_bad, sizeof l->first_bad, "%s", msg);
    }
}

/* the problems pt_ckpt_manifest_check reports for file (under tests/fuzz/) */
static int check(const char *file, lines *l)
{
    const char *top = getenv("top_srcdir");
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/fuzz/%s", top ? top : ".", file);
    json_error_t je;
    json_t *man = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    memset(l, 0, sizeof *l);
    if (!man) {
        tap_diag("%s: %s", path, je.text);
        return -1;
    }
    int n = pt_ckpt_manifest_check("CK", man, report, l);
    json_decref(man);
    return n;
}

int main(void)
{
    lines l;
    int n = check("corpus/ckpt_manifest/manifest-dp1.json", &l);
    tap_ok(n == 0 && l.n == 0, "a sound manifest (dp=1): no problem (%d)", n);
    n = check("corpus/ckpt_manifest/manifest-dp2.json", &l);
    tap_ok(n == 0 && l.n == 0, "a sound manifest (dp=2): no problem (%d)", n);
    n = check("corpus/ckpt_manifest/near-file-bytes.json", &l);
    tap_ok(n == 1 && l.n == 1 && !l.bad, "a rank file 12 bytes too long: one problem, one line (%d)", n);
    n = check("regress/ckpt_manifest/names-with-newlines.json", &l);
    tap_ok(n >= 2 && l.n == n && !l.bad,
           "a tensor name and a checksum holding newlines: %d problems, each one line naming the checkpoint%s%s", n,
           l.bad ? "; not so: " : "", l.bad ? l.first_bad : "");
    n = check("regress/ckpt_manifest/problem-with-newline-as-found.json", &l);
    tap_ok(n >= 1 && l.n == n && !l.bad, "the fuzzer's input: %d problems, each one line%s%s", n,
           l.bad ? "; not so: " : "", l.bad ? l.first_bad : "");
    return tap_done();
}
