/* SPDX-License-Identifier: MIT */
/* Clock controllers (see clock.h). */
#define _GNU_SOURCE
#include "energy/clock.h"
#include "energy/nvml.h"
#include "energy/sysfs.h"
#include "core/core.h"
#include "core/file.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

enum { MAX_FREQS = 64, MAX_CPUS = 1024 };
enum { CF_SETSPEED = 1, CF_MAXFREQ = 2 };
/* cpufreq's frequencies are the kernel's unsigned int kHz: a larger one in
 * a file is not a frequency (and its kHz would not fit pt_clock_set's
 * llround) */
#define CF_MAX_KHZ 4294967295ull

struct pt_clock {
    int kind;
    int nf;
    double f[MAX_FREQS];     /* offered clocks, MHz ascending */
    double cur;              /* last set, 0 = default */
    long changes;
    char what[200];          /* for describe */
    /* nvml */
    pt_nvml *nvml;
    pt_nvml_dev dev;
    unsigned mem_mhz;
    int how;                 /* PT_NVML_LOCKED / PT_NVML_APPLICATION once set */
    /* cpufreq */
    int method;
    int ncpu;
    char (*dir)[256];        /* [ncpu] cpufreq directories */
    unsigned long long *orig; /* [ncpu] original setspeed / max_freq (kHz) */
    char (*rpath)[300];      /* [ncpu] the file written, and */
    char (*rval)[24];        /* [ncpu] its original text: for pt_clock_restore_emergency */
    int slot;                /* its place in `armed`, -1 none */
    /* dry */
    int log_fd;
};

/* ---- the ending process's restore (pt_clock_restore_emergency) ---------
 * Every open cpufreq controller is in `armed`, with the files it writes and
 * their original text prepared at open, so that a signal handler can write
 * them back with open/write/close alone.  Two threads may meet:
 *  - a thread writing a clock (cf_write_all) while another runs the
 *    restore: the writer publishes its thread id in `busy_tid` and then
 *    looks at `dying`; the restore sets `dying` and then waits while
 *    `busy_tid` names another thread.  Both are sequentially consistent, so
 *    either the writer sees `dying` and writes nothing, or the restore sees
 *    it busy and writes after it;
 *  - pt_clock_close freeing a controller the restore reads: close empties
 *    its slot and then looks at `dying`; when set, the restore may be using
 *    it, and it is not freed (the process is ending). */
enum { MAX_ARMED = 16 };
static pt_clock *_Atomic armed[MAX_ARMED];
static atomic_int dying;
static atomic_long busy_tid;

static long this_tid(void) { return (long)syscall(SYS_gettid); }

static void arm(pt_clock *c)
{
    c->slot = -1;
    for (int i = 0; i < MAX_ARMED; i++) {
        pt_clock *none = NULL;
        if (atomic_compare_exchange_strong(&armed[i], &none, c)) {
            c->slot = i;
            return;
        }
    }
}

/* Take c out of `armed`: 1 when it may be freed. */
static int disarm(pt_clock *c)
{
    if (c->slot < 0) return 1;
    atomic_store(&armed[c->slot], NULL);
    c->slot = -1;
    return !atomic_load(&dying);
}

/* write(2) of text to an existing file, async-signal-safe: 0 or -1.  No
 * O_TRUNC: the text is written over the start and the file then cut to
 * it, so that a process killed in between (SIGKILL after SIGTERM, from a
 * launcher) leaves the old value or the new one with a stale tail, never
 * an empty file.  sysfs ignores both the offset and the truncate; the
 * difference is for a copy of it in regular files (PTRAIN_SYSFS_ROOT). */
static int raw_write(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) return -1;
    size_t n = 0;
    while (text[n]) n++;
    ssize_t w;
    do w = write(fd, text, n);
    while (w < 0 && errno == EINTR);
    int rc = w == (ssize_t)n ? 0 : -1;
    struct stat st;
    if (rc == 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > (off_t)n) {
        /* sysfs (whose files say 4096 bytes) took the write: a cut it
         * refuses is not a failure */
        int cut = ftruncate(fd, (off_t)n);
        (void)cut;
    }
    if (close(fd) != 0) rc = -1;
    return rc;
}

/* The restore runs once per process: 0 not yet, 1 running (restorer_tid),
 * 2 done.  A second call (the launcher's SIGTERM after a heartbeat's
 * MPI_Abort, whose caller restored first) would write the same text again
 * while a SIGKILL may follow at any moment. */
static atomic_int restore_state;
static atomic_long restorer_tid;

int pt_clock_restore_emergency(void)
{
    int saved = errno, failed = 0;
    atomic_store(&dying, 1);
    long me = this_tid(), b;
    struct timespec ms = {0, 1000000};
    int none = 0;
    if (!atomic_compare_exchange_strong(&restore_state, &none, 1)) {
        /* another thread restores: it finishes first (a second at most);
         * this thread interrupted its own restore: nothing to wait for */
        for (int i = 0; i < 1000 && atomic_load(&restore_state) == 1 && atomic_load(&restorer_tid) != me; i++)
            nanosleep(&ms, NULL);
        errno = saved;
        return 0;
    }
    atomic_store(&restorer_tid, me);
    /* a thread writing a clock finishes first (a second at most) */
    for (int i = 0; i < 1000 && (b = atomic_load(&busy_tid)) != 0 && b != me; i++) nanosleep(&ms, NULL);
    for (int k = 0; k < MAX_ARMED; k++) {
        pt_clock *c = atomic_load(&armed[k]);
        if (!c) continue;
        for (int i = 0; i < c->ncpu; i++)
            if (raw_write(c->rpath[i], c->rval[i]) != 0) failed++;
    }
    atomic_store(&restore_state, 2);
    errno = saved;
    return failed;
}

int pt_clock_parse(const char *spec, int *kind, const char **log)
{
    *kind = PT_CLOCK_NONE;
    *log = NULL;
    if (!spec) spec = "";
    if (!strcmp(spec, "auto")) return PT_OK;
    if (!strcmp(spec, "nvml")) *kind = PT_CLOCK_NVML;
    else if (!strcmp(spec, "cpufreq")) *kind = PT_CLOCK_CPUFREQ;
    else if (!strcmp(spec, "dry")) *kind = PT_CLOCK_DRY;
    else if (!strncmp(spec, "dry:", 4) && spec[4]) {
        *kind = PT_CLOCK_DRY;
        *log = spec + 4;
    } else
        return pt_fail(PT_EINVAL, "clock controller '%s' is not valid (valid: auto, nvml, cpufreq, dry, dry:FILE)",
                       spec);
    return PT_OK;
}

/* A plain decimal at *s ("2400", "1100.5"): its value, *s past it; -1 when
 * there is none (a sign, an exponent, hex, inf, nan or a space are not). */
static double plain_decimal(const char **s)
{
    const char *p = *s;
    double v = 0, scale = 1;
    int digits = 0, dot = 0;
    for (;; p++) {
        if (*p >= '0' && *p <= '9') {
            if (digits < 18) { /* more digits than a double holds change nothing but the size */
                if (dot) v += (scale /= 10) * (*p - '0');
                else v = v * 10 + (*p - '0');
            } else if (!dot) {
                v *= 10;
            }
            digits++;
        } else if (*p == '.' && !dot) {
            dot = 1;
        } else {
            break;
        }
    }
    if (!digits || p[-1] == '.') return -1;
    *s = p;
    return v;
}

int pt_clock_parse_range(const char *text, double r[2])
{
    const char *p = text ? text : "";
    double a = plain_decimal(&p), b = -1;
    if (a >= 0 && *p == '-') {
        p++;
        b = plain_decimal(&p);
    }
    if (a < 1 || b < a || *p || b > PT_CLOCK_MAX_MHZ)
        return pt_fail(PT_EINVAL, "'%s' is not a clock range (valid: " PT_CLOCK_RANGE_VALID ")", text ? text : "");
    r[0] = a, r[1] = b;
    return PT_OK;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Keep the clocks in [lo, hi] (0 = open), sorted, unique. */
static int filter_range(pt_clock *c, const double *f, int n, double lo, double hi)
{
    double tmp[MAX_FREQS];
    int k = 0;
    for (int i = 0; i < n && k < MAX_FREQS; i++)
        if (f[i] > 0 && (lo <= 0 || f[i] >= lo - 1e-9) && (hi <= 0 || f[i] <= hi + 1e-9)) tmp[k++] = f[i];
    qsort(tmp, (size_t)k, sizeof *tmp, cmp_double);
    c->nf = 0;
    for (int i = 0; i < k; i++)
        if (!c->nf || tmp[i] != c->f[c->nf - 1]) c->f[c->nf++] = tmp[i];
    if (!c->nf) {
        double a = INFINITY, b = 0;
        for (int i = 0; i < n; i++) a = fmin(a, f[i]), b = fmax(b, f[i]);
        return pt_fail(PT_EINVAL, "no clock of %s lies in the allowed range %g-%g MHz (it offers %g-%g MHz)", c->what,
                       lo, hi, n ? a : 0, b);
    }
    return PT_OK;
}

/* ---- nvml --------------------------------------------------------------- */
static int nvml_list(pt_clock *c, const char *gpu, double *f, int *n)
{
    int rc = pt_nvml_open(&c->nvml);
    if (rc) return rc;
    char bus[64];
    rc = pt_nvml_device(c->nvml, gpu, &c->dev, bus, sizeof bus);
    if (rc) return rc;
    unsigned g[MAX_FREQS];
    int k = 0;
    rc = pt_nvml_clocks(c->nvml, c->dev, &c->mem_mhz, g, MAX_FREQS, &k);
    if (rc) return rc;
    for (int i = 0; i < k; i++) f[i] = g[i];
    *n = k;
    snprintf(c->what, sizeof c->what, "GPU %.60s", bus);
    return PT_OK;
}

static int nvml_open(pt_clock *c, const char *gpu, double lo, double hi)
{
    double f[MAX_FREQS];
    int n = 0, rc = nvml_list(c, gpu, f, &n);
    if (rc) return rc == PT_EINVAL ? rc : pt_fail(PT_EUNSUPP, "%s", pt_errmsg());
    if ((rc = filter_range(c, f, n, lo, hi))) return rc;
    /* can this user set it?  the top offered clock, then back */
    rc = pt_nvml_set_clock(c->nvml, c->dev, (unsigned)c->f[c->nf - 1], c->mem_mhz, &c->how);
    if (rc) return pt_fail(PT_EUNSUPP, "cannot set the clocks of %s: %s", c->what, pt_errmsg());
    pt_nvml_reset_clock(c->nvml, c->dev, c->how);
    return PT_OK;
}

/* ---- cpufreq ------------------------------------------------------------ */
/* attr of cpufreq directory i */
static int cf_path(const pt_clock *c, int i, const char *attr, char *buf, size_t len)
{
    return snprintf(buf, len, "%s/%s", c->dir[i], attr) < (int)len ? 0 : -1;
}

/* The cpufreq directories of cpus (those that have one). */
static int cf_dirs(pt_clock *c, const int *cpus, int ncpus)
{
    c->dir = calloc((size_t)(ncpus > 0 ? ncpus : 1), sizeof *c->dir);
    c->orig = calloc((size_t)(ncpus > 0 ? ncpus : 1), sizeof *c->orig);
    c->rpath = calloc((size_t)(ncpus > 0 ? ncpus : 1), sizeof *c->rpath);
    c->rval = calloc((size_t)(ncpus > 0 ? ncpus : 1), sizeof *c->rval);
    if (!c->dir || !c->orig || !c->rpath || !c->rval) return pt_fail(PT_ENOMEM, "cpufreq: out of memory");
    for (int i = 0; i < ncpus && i < MAX_CPUS; i++) {
        char rel[96], dir[256], gov[64];
        snprintf(rel, sizeof rel, "/sys/devices/system/cpu/cpu%d/cpufreq", cpus[i]);
        if (pt_sysfs_path(dir, sizeof dir, rel) < 0) continue;
        char p[300];
        snprintf(p, sizeof p, "%s/scaling_governor", dir);
        if (pt_sysfs_read(p, gov, sizeof gov) != 0) continue;
        snprintf(c->dir[c->ncpu++], sizeof c->dir[0], "%s", dir);
    }
    if (!c->ncpu) {
        char root[256];
        pt_sysfs_path(root, sizeof root, "/sys/devices/system/cpu");
        return pt_fail(PT_EUNSUPP, "cpufreq: none of this rank's %d CPUs has a cpufreq policy under %s (no "
                       "frequency scaling here: a VM or a disabled driver)", ncpus, root);
    }
    if (c->ncpu == 1) snprintf(c->what, sizeof c->what, "CPU %d", cpus[0]);
    else snprintf(c->what, sizeof c->what, "%d CPUs", c->ncpu);
    return PT_OK;
}

static int cf_list(pt_clock *c, double *f, int *n)
{
    char p[300], text[1024];
    *n = 0;
    if (cf_path(c, 0, "scaling_available_frequencies", p, sizeof p) == 0 && pt_sysfs_read(p, text, sizeof text) == 0) {
        char *s = text, *end;
        while (*n < MAX_FREQS) {
            while (*s == ' ' || *s == '\t' || *s == '\n') s++;
            if (*s < '0' || *s > '9') break; /* strtoull would take "-5" as 2^64 - 5 */
            errno = 0;
            unsigned long long khz = strtoull(s, &end, 10);
            if (errno || khz > CF_MAX_KHZ) break;
            if (khz > 0) f[(*n)++] = (double)khz / 1000.0;
            s = end;
        }
        if (*n) return PT_OK;
    }
    uint64_t lo = 0, hi = 0;
    char q[300];
    if (cf_path(c, 0, "cpuinfo_min_freq", p, sizeof p) || cf_path(c, 0, "cpuinfo_max_freq", q, sizeof q) ||
        pt_sysfs_read_u64(p, &lo) || pt_sysfs_read_u64(q, &hi) || !lo || hi < lo || hi > CF_MAX_KHZ)
        return pt_fail(PT_EUNSUPP, "cpufreq: %s lists no frequencies (no scaling_available_frequencies, no "
                       "cpuinfo_min_freq/cpuinfo_max_freq)", c->dir[0]);
    for (int i = 0; i < 8; i++) f[i] = ((double)lo + (double)(hi - lo) * i / 7) / 1000.0;
    *n = hi > lo ? 8 : 1;
    return PT_OK;
}

static int cf_write_all(pt_clock *c, const char *attr, const unsigned long long *khz_each, unsigned long long khz)
{
    /* the process is ending and its clocks were put back: nothing more */
    atomic_store(&busy_tid, this_tid());
    if (atomic_load(&dying)) {
        atomic_store(&busy_tid, 0);
        return PT_OK;
    }
    int rc = PT_OK;
    for (int i = 0; i < c->ncpu && rc == PT_OK; i++) {
        char p[300], v[32];
        if (cf_path(c, i, attr, p, sizeof p)) {
            rc = pt_fail(PT_EIO, "cpufreq: path too long");
            break;
        }
        snprintf(v, sizeof v, "%llu", khz_each ? khz_each[i] : khz);
        int e = pt_sysfs_write(p, v);
        if (e == -EACCES || e == -EPERM || e == -EROFS)
            rc = pt_fail(PT_EUNSUPP, "cpufreq: cannot write %s: %s (root only unless an administrator opened it)", p,
                         strerror(-e));
        else if (e) rc = pt_fail(PT_EIO, "cpufreq: cannot write %s: %s", p, strerror(-e));
    }
    atomic_store(&busy_tid, 0);
    return rc;
}

static const char *cf_attr(const pt_clock *c)
{
    return c->method == CF_SETSPEED ? "scaling_setspeed" : "scaling_max_freq";
}

static int cf_open(pt_clock *c, const int *cpus, int ncpus, double lo, double hi)
{
    int rc = cf_dirs(c, cpus, ncpus);
    if (rc) return rc;
    char p[300], gov[64] = "";
    cf_path(c, 0, "scaling_governor", p, sizeof p);
    pt_sysfs_read(p, gov, sizeof gov);
    c->method = !strcmp(gov, "userspace") ? CF_SETSPEED : CF_MAXFREQ;
    for (int i = 0; i < c->ncpu; i++) {
        uint64_t v = 0;
        cf_path(c, i, c->method == CF_SETSPEED ? "scaling_setspeed" : "scaling_max_freq", p, sizeof p);
        if (pt_sysfs_read_u64(p, &v) != 0 && c->method == CF_SETSPEED) {
            cf_path(c, i, "scaling_cur_freq", p, sizeof p);
            if (pt_sysfs_read_u64(p, &v) != 0) v = 0;
        }
        if (!v) return pt_fail(PT_EUNSUPP, "cpufreq: cannot read %s", p);
        c->orig[i] = v;
    }
    double f[MAX_FREQS];
    int n = 0;
    if ((rc = cf_list(c, f, &n))) return rc;
    if ((rc = filter_range(c, f, n, lo, hi))) return rc;
    /* can this user set it?  write the values found back */
    if ((rc = cf_write_all(c, cf_attr(c), c->orig, 0))) return rc;
    /* what pt_clock_restore_emergency writes, ready before the first change */
    for (int i = 0; i < c->ncpu; i++) {
        if (cf_path(c, i, cf_attr(c), c->rpath[i], sizeof c->rpath[i]))
            return pt_fail(PT_EIO, "cpufreq: path too long");
        snprintf(c->rval[i], sizeof c->rval[i], "%llu", c->orig[i]);
    }
    arm(c);
    return PT_OK;
}

/* ---- dry ---------------------------------------------------------------- */
static int dry_open(pt_clock *c, const char *gpu, const int *cpus, int ncpus, double lo, double hi, const char *log)
{
    double f[MAX_FREQS];
    int n = 0;
    pt_clock probe;
    memset(&probe, 0, sizeof probe);
    /* the clocks the device would offer, when they can be read */
    if (gpu && *gpu && nvml_list(&probe, gpu, f, &n) == PT_OK && n > 0) {
        snprintf(c->what, sizeof c->what, "%s", probe.what);
    } else if (ncpus > 0 && cf_dirs(&probe, cpus, ncpus) == PT_OK && cf_list(&probe, f, &n) == PT_OK && n > 0) {
        snprintf(c->what, sizeof c->what, "%s", probe.what);
    } else {
        double a = lo > 0 ? lo : 1000, b = hi > 0 ? hi : (lo > 0 ? lo : 3000);
        if (b < a) b = a;
        n = b > a ? 8 : 1;
        for (int i = 0; i < n; i++) f[i] = n > 1 ? a + (b - a) * i / (n - 1) : a;
        snprintf(c->what, sizeof c->what, "no device clocks read (%g-%g MHz assumed)", a, b);
    }
    pt_nvml_close(probe.nvml);
    free(probe.dir);
    free(probe.orig);
    free(probe.rpath);
    free(probe.rval);
    int rc = filter_range(c, f, n, lo, hi);
    if (rc) return rc;
    c->log_fd = -1;
    if (log) {
        c->log_fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0644);
        struct stat st;
        if (c->log_fd < 0) return pt_fail(PT_EIO, "dry clock log %s: %s", log, strerror(errno));
        if (fstat(c->log_fd, &st) != 0 || !S_ISREG(st.st_mode))
            return pt_fail(PT_EIO, "dry clock log %s is not a regular file", log);
    }
    return PT_OK;
}

/* ---- the controller ----------------------------------------------------- */
static void clock_free(pt_clock *c)
{
    if (!disarm(c)) return; /* the ending process's restore may read it */
    pt_nvml_close(c->nvml);
    if (c->log_fd >= 0) close(c->log_fd);
    free(c->dir);
    free(c->orig);
    free(c->rpath);
    free(c->rval);
    free(c);
}

int pt_clock_open(pt_clock **out, int kind, const char *gpu, const int *cpus, int ncpus, double lo_mhz,
                  double hi_mhz, const char *dry_log)
{
    *out = NULL;
    pt_clock *c = calloc(1, sizeof *c);
    if (!c) return pt_fail(PT_ENOMEM, "clock controller: out of memory");
    c->log_fd = -1;
    c->slot = -1;
    int rc;
    if (kind == PT_CLOCK_NONE) { /* auto: the GPU when NVML can clock it, else the CPUs */
        rc = PT_EUNSUPP;
        char why[PT_ERROR_LEN] = "";
        if (gpu && *gpu) {
            c->kind = PT_CLOCK_NVML;
            rc = nvml_open(c, gpu, lo_mhz, hi_mhz);
            if (rc) {
                snprintf(why, sizeof why, "%s", pt_errmsg());
                pt_nvml_close(c->nvml);
                c->nvml = NULL;
            }
        }
        if (rc == PT_EUNSUPP) {
            c->kind = PT_CLOCK_CPUFREQ;
            rc = cf_open(c, cpus, ncpus, lo_mhz, hi_mhz);
            if (rc && why[0]) pt_fail(rc, "%s; %s", why, pt_errmsg());
        }
    } else {
        c->kind = kind;
        if (kind == PT_CLOCK_NVML) {
            rc = gpu && *gpu ? nvml_open(c, gpu, lo_mhz, hi_mhz)
                             : pt_fail(PT_EUNSUPP, "nvml clocks: no GPU named for this rank (CUDA_VISIBLE_DEVICES or "
                                       "PTRAIN_ENERGY_GPU)");
        } else if (kind == PT_CLOCK_CPUFREQ) rc = cf_open(c, cpus, ncpus, lo_mhz, hi_mhz);
        else if (kind == PT_CLOCK_DRY) rc = dry_open(c, gpu, cpus, ncpus, lo_mhz, hi_mhz, dry_log);
        else rc = pt_fail(PT_EINVAL, "clock controller kind %d unknown", kind);
    }
    if (rc) {
        clock_free(c);
        return rc;
    }
    *out = c;
    return PT_OK;
}

int pt_clock_kind(const pt_clock *c) { return c ? c->kind : PT_CLOCK_NONE; }

int pt_clock_freqs(const pt_clock *c, const double **mhz)
{
    *mhz = c->f;
    return c->nf;
}

double pt_clock_current(const pt_clock *c) { return c ? c->cur : 0; }

long pt_clock_changes(const pt_clock *c) { return c ? c->changes : 0; }

int pt_clock_set(pt_clock *c, double mhz)
{
    if (!c || !(mhz > 0)) return PT_OK;
    /* the nearest offered clock; at or beyond an end that end (a huge mhz
     * would make every distance the same and pick the lowest) */
    int best = mhz >= c->f[c->nf - 1] ? c->nf - 1 : 0;
    for (int i = 1; i < c->nf && mhz > c->f[0] && mhz < c->f[c->nf - 1]; i++)
        if (fabs(c->f[i] - mhz) < fabs(c->f[best] - mhz)) best = i;
    double f = c->f[best];
    if (f == c->cur) return PT_OK;
    int rc = PT_OK;
    if (c->kind == PT_CLOCK_NVML) {
        rc = pt_nvml_set_clock(c->nvml, c->dev, (unsigned)llround(f), c->mem_mhz, &c->how);
    } else if (c->kind == PT_CLOCK_CPUFREQ) {
        rc = cf_write_all(c, cf_attr(c), NULL, (unsigned long long)llround(f * 1000));
    } else if (c->kind == PT_CLOCK_DRY && c->log_fd >= 0) {
        char line[48];
        int n = snprintf(line, sizeof line, "%.0f\n", f);
        if (pt_write_all(c->log_fd, line, (size_t)n) != 0) rc = pt_fail(PT_EIO, "dry clock log: %s", strerror(errno));
    }
    if (rc) return rc;
    c->cur = f;
    c->changes++;
    return PT_OK;
}

int pt_clock_reset(pt_clock *c)
{
    if (!c || c->cur == 0) return PT_OK;
    int rc = PT_OK;
    if (c->kind == PT_CLOCK_NVML) rc = pt_nvml_reset_clock(c->nvml, c->dev, c->how);
    else if (c->kind == PT_CLOCK_CPUFREQ) rc = cf_write_all(c, cf_attr(c), c->orig, 0);
    c->cur = 0;
    return rc;
}

void pt_clock_close(pt_clock *c)
{
    if (!c) return;
    pt_clock_reset(c);
    clock_free(c);
}

void pt_clock_describe(const pt_clock *c, char *buf, size_t len)
{
    if (!len) return;
    if (!c) {
        snprintf(buf, len, "none");
        return;
    }
    const char *how = "";
    if (c->kind == PT_CLOCK_NVML) how = c->how == PT_NVML_APPLICATION ? " (application clocks)" : " (locked clocks)";
    else if (c->kind == PT_CLOCK_CPUFREQ)
        how = c->method == CF_SETSPEED ? " (scaling_setspeed)" : " (scaling_max_freq)";
    snprintf(buf, len, "%s %s%s, %d clock%s %.0f-%.0f MHz",
             c->kind == PT_CLOCK_NVML ? "nvml" : c->kind == PT_CLOCK_CPUFREQ ? "cpufreq" : "dry", c->what, how, c->nf,
             c->nf == 1 ? "" : "s", c->f[0], c->f[c->nf - 1]);
}
