/* SPDX-License-Identifier: MIT */
/* ptrain-run's metrics log (--metrics FILE, rank 0): JSON Lines, one
 * object per line, built with jansson so every line is valid JSON (NaN and
 * infinities become null), written whole with one write(2) and checked
 * (bin/run/run.h).  The records:
 *   {"type":"header", model, plan, sizes, "tokens_per_step", "steps", ...}
 *   {"type":"train","step":N,"loss":..,"lr":..,"norm":..,"step_ms":..,"tok_s":..,"elapsed_s":..,
 *    "gflops_per_rank":..,["mfu":..,]"peak_mib":..,"sent_bytes":{"dp":..,"tp":..,"pp":..,"sp":..,"sync":..,"world":..},
 *    "sent_bytes_comm":{"tp":..,"tpx--":..,..,"sync---":..,..,"sp":..,"pp":..,"embed":..,"dp":..}}
 *   {"type":"val","step":N,"val_loss":..,"elapsed_s":..}
 *   {"type":"done", ...the summary line's numbers}
 * A full disk or an I/O error is reported in one line; the file is cut back
 * to its last whole record (no torn line) and no further record is
 * written; the run goes on (its checkpoints are what matter) and exits
 * with status 1. */
#define _GNU_SOURCE
#include "run.h"
#include "core/file.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct run_metrics {
    int fd;
    char *path;
    off_t good;  /* bytes of whole records written */
    int failed;  /* a write failed: no more records */
};

run_metrics *run_metrics_open(const char *path)
{
    if (pt_output_check(path) != PT_OK) {
        pt_fail(PT_EINVAL, "the metrics file %s", pt_errmsg()); /* "PATH is a symbolic link, ..." */
        return NULL;
    }
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0644);
    if (fd < 0) {
        pt_fail(PT_EINVAL, "cannot write the metrics file %s: %s", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
        close(fd);
        pt_fail(PT_EINVAL, "the metrics file %s is not a regular file", path);
        return NULL;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    run_metrics *m = calloc(1, sizeof *m);
    if (!m || !(m->path = strdup(path))) {
        free(m);
        close(fd);
        pt_fail(PT_ENOMEM, "the metrics file %s: out of memory", path);
        return NULL;
    }
    m->fd = fd;
    return m;
}

json_t *run_json_num(double v)
{
    return isfinite(v) ? json_real(v) : json_null();
}

void run_metrics_write(run_metrics *m, json_t *rec)
{
    if (!rec) return;
    if (!m || m->failed) {
        json_decref(rec);
        return;
    }
    char *text = json_dumps(rec, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(rec);
    const char *why = NULL;
    int e = 0;
    if (!text) why = "out of memory";
    else {
        size_t n = strlen(text);
        text[n] = '\n'; /* json_dumps' NUL becomes the line's end */
        if (pt_write_all(m->fd, text, n + 1) == 0) m->good += (off_t)(n + 1);
        else {
            e = errno;
            why = strerror(e);
        }
        free(text);
    }
    if (!why) return;
    m->failed = 1;
    int cut = ftruncate(m->fd, m->good); /* no torn line */
    fprintf(stderr, "ptrain-run: error: cannot write the metrics file %s: %s; it ends with its last whole record "
            "(%lld bytes%s), training goes on and the run exits with status 1\n", m->path, why, (long long)m->good,
            cut == 0 ? "" : ", and it could not be cut back to it");
    fflush(stderr);
}

int run_metrics_failed(const run_metrics *m) { return m && m->failed; }

int run_metrics_close(run_metrics *m)
{
    if (!m) return 0;
    int rc = m->failed ? -1 : 0;
    if (fsync(m->fd) != 0 && errno != EINVAL && !m->failed) {
        fprintf(stderr, "ptrain-run: error: the metrics file %s: %s\n", m->path, strerror(errno));
        rc = -1;
    }
    if (close(m->fd) != 0 && !m->failed) {
        fprintf(stderr, "ptrain-run: error: closing the metrics file %s: %s\n", m->path, strerror(errno));
        rc = -1;
    }
    free(m->path);
    free(m);
    return rc;
}
