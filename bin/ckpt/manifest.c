/* SPDX-License-Identifier: MIT */
/* ptrain-ckpt: a checkpoint's directory and its manifest (ckpt_tool.h). */
#define _GNU_SOURCE
#include "config.h"
#include "ckpt_tool.h"
#include "ckpt/ckpt.h"
#include "core/file.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int ckpt_is_dir(const char *p)
{
    struct stat sb;
    return !stat(p, &sb) && S_ISDIR(sb.st_mode);
}

/* The checkpoint directory named by arg: arg itself when it holds
 * manifest.json or has no `latest`, else the step-NNNNNNNN that arg/latest
 * names.  PT_EIO (not a directory, unreadable pointer), PT_EFORMAT (a
 * pointer that names no step directory). */
int ckpt_dst_open(const char *dst, int *lockfd)
{
    *lockfd = -1;
    int rc = pt_ckpt_dir_check(dst);
    if (!rc && (rc = pt_ckpt_dir_lock(dst, NULL, lockfd)) == PT_EUNSUPP) {
        fprintf(stderr, "ptrain-ckpt: warning: %s\n", pt_errmsg());
        rc = PT_OK;
    }
    return rc;
}

int ckpt_resolve(const char *arg, char *out, size_t n)
{
    char p[4200];
    if (strlen(arg) > 4000) return pt_fail(PT_EINVAL, "checkpoint name of %zu bytes is too long (at most 4000)", strlen(arg));
    if (!ckpt_is_dir(arg)) return pt_fail(PT_EIO, "checkpoint %s: not a directory", arg);
    snprintf(p, sizeof p, "%s/manifest.json", arg);
    if (!access(p, F_OK)) return snprintf(out, n, "%s", arg), PT_OK;
    snprintf(p, sizeof p, "%s/latest", arg);
    if (access(p, F_OK)) return snprintf(out, n, "%s", arg), PT_OK;
    char *txt = NULL;
    size_t len;
    int rc = pt_read_regular(p, "checkpoint pointer", &txt, &len);
    if (rc) return rc;
    /* its first line names the step directory, read as lib/ckpt reads it */
    char name[16];
    long step;
    const int good = pt_ckpt_pointer_parse(txt, len, name, &step);
    free(txt);
    if (!good) return pt_fail(PT_EFORMAT, "checkpoint pointer %s does not name a step-NNNNNNNN directory", p);
    snprintf(out, n, "%s/%s", arg, name);
    return PT_OK;
}

int ckpt_manifest_config(json_t *man, pt_gpt_config *cfg)
{
    return pt_ckpt_model_shape(json_object_get(man, "model"), cfg);
}

double ckpt_load_bytes(json_t *man)
{
    double total = 0, most = 0, file = 0;
    size_t k;
    json_t *x;
    json_array_foreach(json_object_get(man, "tensors"), k, x) {
        const double n = (double)jint(x, "rows") * (double)jint(x, "cols");
        total += n;
        if (n > most) most = n;
    }
    json_array_foreach(json_object_get(man, "files"), k, x) if ((double)jint(x, "bytes") > file) file = (double)jint(x, "bytes");
    /* saved under the holder's own plan (one rank, the default plan): its
     * rank file, read whole */
    pt_plan d;
    char sum[640];
    pt_plan_default(&d);
    pt_plan_summary(&d, sum, sizeof sum);
    json_t *mp = json_object_get(man, "plan");
    if (jint(mp, "world") == 1 && !strcmp(jstr(mp, "summary"), sum)) return 12 * total;
    /* resharded (lib/ckpt's reshard): the full tensors' data, m and v and
     * their coverage, the cut owned slices again, the index and slice
     * tensors and the temporaries of the largest tensor, one rank file */
    return 25 * total + 24 * most + file;
}

/* a manifest saved before manifests had a checksum: accepted, said once on stderr */
void ckpt_old_manifest_warning(const char *path, json_t *man)
{
    if (!json_object_get(man, PT_CKPT_MANIFEST_SUM))
        fprintf(stderr, "ptrain-ckpt: warning: checkpoint %s: manifest.json has no checksum (saved by an older ptrain); "
                        "accepted after its consistency checks\n", path);
}
