/* The CUDA backend's host-side logic (see host.h): no CUDA header here. */
#include "backend/cuda/host.h"
#include "core/core.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int pt_cuda_local_rank(int *out)
{
    static const char *const vars[] = {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID",
                                       "MPI_LOCALRANKID"};
    *out = 0;
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (!v || !*v) continue;
        long n;
        if (pt_parse_int(vars[i], v, 0, (1L << 20) - 1, &n) != PT_OK)
            return pt_fail(PT_EINVAL, "%s (the task's rank on its node, which picks its GPU)", pt_errmsg());
        *out = (int)n;
        return PT_OK;
    }
    return PT_OK;
}

int pt_cuda_pick_device(int ndev, int local)
{
    if (ndev < 1 || local < 0) return -1;
    return local % ndev;
}

/* ---- pointer -> size ---------------------------------------------------- */

static size_t slot_of(uintptr_t k, size_t cap)
{
    /* Fibonacci hashing (Knuth, TAOCP vol. 3, 6.4): blocks are 256-byte
     * aligned, so the low bits carry nothing; the multiply spreads the rest */
    uint64_t h = (uint64_t)k * UINT64_C(0x9E3779B97F4A7C15);
    return (size_t)(h >> 32) & (cap - 1);
}

static int grow(pt_ptrmap *m)
{
    size_t ncap = m->cap ? m->cap * 2 : 64;
    uintptr_t *nk = calloc(ncap, sizeof *nk);
    size_t *nv = calloc(ncap, sizeof *nv);
    if (!nk || !nv) {
        free(nk);
        free(nv);
        return PT_ENOMEM;
    }
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->key[i]) continue;
        size_t j = slot_of(m->key[i], ncap);
        while (nk[j]) j = (j + 1) & (ncap - 1);
        nk[j] = m->key[i];
        nv[j] = m->val[i];
    }
    free(m->key);
    free(m->val);
    m->key = nk;
    m->val = nv;
    m->cap = ncap;
    return PT_OK;
}

int pt_ptrmap_put(pt_ptrmap *m, const void *p, size_t bytes)
{
    uintptr_t k = (uintptr_t)p;
    if (!k) return pt_fail(PT_EINVAL, "device block table: a NULL block");
    /* at most half full: probes stay short */
    if ((m->n + 1) * 2 > m->cap && grow(m) != PT_OK)
        return pt_fail(PT_ENOMEM, "device block table: out of host memory for %zu entries", m->n + 1);
    size_t j = slot_of(k, m->cap);
    while (m->key[j]) {
        if (m->key[j] == k) return pt_fail(PT_EINVAL, "device block table: block %p is already recorded", p);
        j = (j + 1) & (m->cap - 1);
    }
    m->key[j] = k;
    m->val[j] = bytes;
    m->n++;
    return PT_OK;
}

int pt_ptrmap_take(pt_ptrmap *m, const void *p, size_t *bytes)
{
    uintptr_t k = (uintptr_t)p;
    if (!m->cap || !k) return 0;
    size_t mask = m->cap - 1, i = slot_of(k, m->cap);
    while (m->key[i] && m->key[i] != k) i = (i + 1) & mask;
    if (!m->key[i]) return 0;
    *bytes = m->val[i];
    m->key[i] = 0;
    m->n--;
    /* backward shift (algorithm R): move later entries of the run into the
     * hole when their home slot does not lie cyclically in (hole, j] */
    for (size_t j = (i + 1) & mask; m->key[j]; j = (j + 1) & mask) {
        size_t home = slot_of(m->key[j], m->cap);
        int between = i <= j ? (i < home && home <= j) : (i < home || home <= j);
        if (between) continue;
        m->key[i] = m->key[j];
        m->val[i] = m->val[j];
        m->key[j] = 0;
        i = j;
    }
    return 1;
}

void pt_ptrmap_clear(pt_ptrmap *m)
{
    free(m->key);
    free(m->val);
    memset(m, 0, sizeof *m);
}

/* ---- versions ------------------------------------------------------------ */

void pt_cuda_version_text(char kind, long code, char *buf, size_t len)
{
    if (code <= 0) {
        snprintf(buf, len, "none");
        return;
    }
    long major, minor, patch = -1;
    switch (kind) {
    case 'c': /* 1000 major + 10 minor */
        major = code / 1000, minor = code % 1000 / 10;
        break;
    case 'd': /* cuDNN 9: 10000 major + 100 minor + patch; cuDNN 8: 1000 major + 100 minor + patch */
        if (code >= 90000) major = code / 10000, minor = code % 10000 / 100, patch = code % 100;
        else major = code / 1000, minor = code % 1000 / 100, patch = code % 100;
        break;
    case 'n': /* NCCL >= 2.9: 10000 major + 100 minor + patch; before, 1000 major + 100 minor + patch */
        if (code >= 10000) major = code / 10000, minor = code % 10000 / 100, patch = code % 100;
        else major = code / 1000, minor = code % 1000 / 100, patch = code % 100;
        break;
    default: /* 'b': cuBLASLt, 10000 major + 100 minor + patch */
        major = code / 10000, minor = code % 10000 / 100, patch = code % 100;
        break;
    }
    if (patch >= 0) snprintf(buf, len, "%ld.%ld.%ld", major, minor, patch);
    else snprintf(buf, len, "%ld.%ld", major, minor);
}

int pt_cuda_parse_driver(const char *text, char *out, size_t len)
{
    if (len) out[0] = '\0';
    const char *p = text ? strstr(text, "Kernel Module") : NULL;
    if (!p) return 0;
    p += strlen("Kernel Module");
    const char *eol = strchr(p, '\n');
    if (!eol) eol = p + strlen(p);
    while (p < eol) {
        while (p < eol && isspace((unsigned char)*p)) p++;
        const char *w = p;
        while (p < eol && !isspace((unsigned char)*p)) p++;
        size_t n = (size_t)(p - w), dots = 0, ok = n > 0 && isdigit((unsigned char)w[0]);
        for (size_t i = 0; ok && i < n; i++) {
            if (w[i] == '.') dots++;
            else if (!isdigit((unsigned char)w[i])) ok = 0;
        }
        if (ok && dots >= 1 && w[n - 1] != '.' && n < len) {
            memcpy(out, w, n);
            out[n] = '\0';
            return 1;
        }
    }
    return 0;
}

size_t pt_cuda_info_format(const pt_cuda_info *v, char *buf, size_t len)
{
    char gpu[400], drv[96], rt[16], bl[24], dn[24], nc[24], api[16];
    if (v->gpu[0])
        snprintf(gpu, sizeof gpu, "gpu %s (sm_%d, %.1f GiB)", v->gpu, v->sm, v->mem_bytes / (1024.0 * 1024.0 * 1024.0));
    else
        snprintf(gpu, sizeof gpu, "gpu none (%s)", v->why[0] ? v->why : "no CUDA device");
    pt_cuda_version_text('c', v->driver_api, api, sizeof api);
    if (v->driver[0]) snprintf(drv, sizeof drv, "driver %s (CUDA %s)", v->driver, api);
    else snprintf(drv, sizeof drv, "driver CUDA %s", api);
    pt_cuda_version_text('c', v->runtime, rt, sizeof rt);
    pt_cuda_version_text('b', v->cublaslt, bl, sizeof bl);
    if (v->cudnn) pt_cuda_version_text('d', v->cudnn, dn, sizeof dn);
    else snprintf(dn, sizeof dn, "not built");
    if (v->nccl) pt_cuda_version_text('n', v->nccl, nc, sizeof nc);
    else snprintf(nc, sizeof nc, "not built");
    int n = snprintf(buf, len, "%s, %s, CUDA runtime %s, cuBLASLt %s, cuDNN %s, NCCL %s", gpu, drv, rt, bl, dn, nc);
    return n < 0 ? 0 : (size_t)n;
}
