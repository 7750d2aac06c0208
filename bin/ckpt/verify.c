/* SPDX-License-Identifier: MIT */
/* ptrain-ckpt verify: every rank file's size and checksum against the
 * manifest, its floats (finite weights and AdamW moments), and the
 * manifest's own consistency (ckpt_tool.h). */
#define _GNU_SOURCE
#include "config.h"
#include "ckpt_tool.h"
#include "ckpt/ckpt.h"
#include "core/file.h"
#include "data/shard.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int problems;
static void problem(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void problem(const char *fmt, ...)
{
    char line[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    for (char *s = line; *s; s++) /* one line per problem: names and checksums are the manifest's strings */
        if (*s == '\n' || *s == '\r') *s = ' ';
    puts(line);
    problems++;
}

static void report_problem(void *arg, const char *msg)
{
    (void)arg;
    problem("%s", msg);
}

int ckpt_verify(const char *arg)
{
    char path[4200];
    json_t *man = NULL;
    problems = 0;
    if (ckpt_resolve(arg, path, sizeof path) || pt_ckpt_manifest_parse(path, &man)) {
        problem("%s", pt_errmsg());
        return 1;
    }
    ckpt_old_manifest_warning(path, man);
    /* the manifest's consistency: the checks a resume and convert apply (lib/ckpt) */
    pt_ckpt_manifest_check(path, man, report_problem, NULL);
    /* each listed file against its size and checksum */
    json_t *files = json_object_get(man, "files");
    const size_t nt = json_array_size(json_object_get(man, "tensors"));
    unsigned long long total = 0;
    size_t k;
    json_t *f;
    json_array_foreach(files, k, f) {
        const char *name = jstr(f, "name");
        char p[4400];
        if (!*name || strchr(name, '/') || name[0] == '.') continue; /* reported above */
        snprintf(p, sizeof p, "%s/%s", path, name);
        const long long want = jint(f, "bytes");
        total += (unsigned long long)want;
        struct stat sb;
        if (stat(p, &sb)) {
            problem("checkpoint %s: %s is missing: %s", path, name, strerror(errno));
            continue;
        }
        if (!S_ISREG(sb.st_mode)) {
            problem("checkpoint %s: %s is not a regular file", path, name);
            continue;
        }
        if ((long long)sb.st_size != want) {
            problem("checkpoint %s: %s has %lld bytes, the manifest says %lld (truncated or replaced)", path, name,
                    (long long)sb.st_size, want);
            continue;
        }
        char *buf = NULL;
        size_t len;
        if (pt_read_regular(p, "checkpoint rank file", &buf, &len)) {
            problem("checkpoint %s: %s", path, pt_errmsg());
            continue;
        }
        char sum[20];
        snprintf(sum, sizeof sum, "%016" PRIx64, pt_fnv1a64(buf, len));
        if (strcmp(sum, jstr(f, "fnv1a64")))
            problem("checkpoint %s: %s has checksum %s, the manifest says %.20s (corrupted)", path, name, sum,
                    jstr(f, "fnv1a64"));
        /* a file the checksum vouches for may still hold NaN or infinities
         * (saved so by a run that diverged): the load refuses them, so does verify */
        else if (pt_ckpt_rank_file_finite(path, f, buf, len))
            problem("%s", pt_errmsg());
        free(buf);
    }
    if (!problems)
        printf("ok: %s: step %lld, %zu rank files, %llu bytes, %zu tensors; sizes and checksums match the manifest%s, "
               "every weight and AdamW moment is finite\n",
               path, jint(man, "step"), json_array_size(files), total, nt,
               json_object_get(man, PT_CKPT_MANIFEST_SUM) ? "" : " (which has no checksum of its own)");
    json_decref(man);
    return problems ? 1 : 0;
}
