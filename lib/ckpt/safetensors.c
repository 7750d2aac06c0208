/* SPDX-License-Identifier: MIT */
/* Reading safetensors files (see safetensors.h). */
#define _GNU_SOURCE
#include "ckpt/safetensors.h"
#include "core/core.h"
#include "core/file.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const struct { const char *name; unsigned bytes; } dtypes[PT_ST_NDTYPES] = {
    [PT_ST_BOOL] = { "BOOL", 1 }, [PT_ST_U8] = { "U8", 1 },     [PT_ST_I8] = { "I8", 1 },
    [PT_ST_F8_E5M2] = { "F8_E5M2", 1 }, [PT_ST_F8_E4M3] = { "F8_E4M3", 1 }, [PT_ST_I16] = { "I16", 2 },
    [PT_ST_U16] = { "U16", 2 }, [PT_ST_F16] = { "F16", 2 },    [PT_ST_BF16] = { "BF16", 2 },
    [PT_ST_I32] = { "I32", 4 }, [PT_ST_U32] = { "U32", 4 },    [PT_ST_F32] = { "F32", 4 },
    [PT_ST_F64] = { "F64", 8 }, [PT_ST_I64] = { "I64", 8 },    [PT_ST_U64] = { "U64", 8 },
};

const char *pt_st_dtype_name(int d) { return d >= 0 && d < PT_ST_NDTYPES ? dtypes[d].name : "?"; }

void pt_st_close(pt_safetensors *st)
{
    if (!st) return;
    if (st->fd >= 0 && st->path) close(st->fd);
    for (int i = 0; i < st->n; i++) free(st->t[i].name);
    free(st->t);
    free(st->path);
    memset(st, 0, sizeof *st);
    st->fd = -1;
}

static int cmp_begin(const void *a, const void *b)
{
    const pt_st_tensor *x = *(const pt_st_tensor *const *)a, *y = *(const pt_st_tensor *const *)b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

/* One tensor entry of the header; PT_EFORMAT naming it otherwise. */
static int parse_entry(const char *path, const char *name, json_t *v, uint64_t data_len, pt_st_tensor *t)
{
    json_t *jd = json_object_get(v, "dtype"), *js = json_object_get(v, "shape"), *jo = json_object_get(v, "data_offsets");
    if (!json_is_object(v) || !json_is_string(jd) || !json_is_array(js) || !json_is_array(jo) || json_array_size(jo) != 2)
        return pt_fail(PT_EFORMAT, "safetensors file %s: tensor '%.200s' is not {\"dtype\": D, \"shape\": [...], "
                                   "\"data_offsets\": [BEGIN, END]}", path, name);
    const char *d = json_string_value(jd);
    t->dtype = -1;
    for (int k = 0; k < PT_ST_NDTYPES; k++)
        if (!strcmp(d, dtypes[k].name)) t->dtype = k;
    if (t->dtype < 0)
        return pt_fail(PT_EFORMAT, "safetensors file %s: tensor '%.200s' has dtype '%.40s', not one of BOOL, U8, I8, "
                                   "F8_E5M2, F8_E4M3, I16, U16, F16, BF16, I32, U32, F32, F64, I64, U64", path, name, d);
    size_t nd = json_array_size(js);
    if (nd > PT_ST_MAX_DIMS)
        return pt_fail(PT_EFORMAT, "safetensors file %s: tensor '%.200s' has %zu dimensions (at most %d)", path, name,
                       nd, PT_ST_MAX_DIMS);
    t->ndim = (int)nd;
    /* the element count and bytes, each step below 2^62: no overflow */
    uint64_t numel = 1;
    for (size_t k = 0; k < nd; k++) {
        json_t *x = json_array_get(js, k);
        if (!json_is_integer(x) || json_integer_value(x) < 0 || json_integer_value(x) >= ((json_int_t)1 << 40))
            return pt_fail(PT_EFORMAT, "safetensors file %s: tensor '%.200s': dimension %zu is not an integer in "
                                       "[0, 2^40)", path, name, k);
        t->shape[k] = (int64_t)json_integer_value(x);
        if (t->shape[k] && numel > (((uint64_t)1 << 62) / dtypes[t->dtype].bytes) / (uint64_t)t->shape[k])
            return pt_fail(PT_EFORMAT, "safetensors file %s: tensor '%.200s': its shape holds 2^62 bytes or more", path,
                           name);
        numel *= (uint64_t)t->shape[k];
    }
    t->numel = numel;
    json_t *b = json_array_get(jo, 0), *e = json_array_get(jo, 1);
    if (!json_is_integer(b) || !json_is_integer(e) || json_integer_value(b) < 0 || json_integer_value(e) < 0)
        return pt_fail(PT_EFORMAT, "safetensors file %s: tensor '%.200s': data_offsets are not two non-negative "
                                   "integers", path, name);
    t->begin = (uint64_t)json_integer_value(b);
    t->end = (uint64_t)json_integer_value(e);
    if (t->begin > t->end || t->end > data_len)
        return pt_fail(PT_EFORMAT, "safetensors file %s: tensor '%.200s': data_offsets [%llu, %llu] are not a range "
                                   "inside the %llu bytes of data", path, name, (unsigned long long)t->begin,
                       (unsigned long long)t->end, (unsigned long long)data_len);
    uint64_t bytes = numel * dtypes[t->dtype].bytes;
    if (t->end - t->begin != bytes)
        return pt_fail(PT_EFORMAT, "safetensors file %s: tensor '%.200s': %llu bytes at data_offsets [%llu, %llu], its "
                                   "dtype %s and %llu elements need %llu", path, name,
                       (unsigned long long)(t->end - t->begin), (unsigned long long)t->begin,
                       (unsigned long long)t->end, d, (unsigned long long)numel, (unsigned long long)bytes);
    return PT_OK;
}

static int is_little_endian(void)
{
    const uint16_t one = 1;
    return *(const unsigned char *)&one == 1;
}

int pt_st_open(pt_safetensors *st, const char *path)
{
    if (!st || !path) return pt_fail(PT_EINVAL, "pt_st_open: NULL argument");
    memset(st, 0, sizeof *st);
    st->fd = -1;
    if (!is_little_endian()) return pt_fail(PT_EUNSUPP, "%s: safetensors data are little-endian; this host is big-endian", path);
    int fd = pt_open_regular(path, "safetensors file");
    if (fd < 0) return fd;
    st->fd = fd;
    if (!(st->path = strdup(path))) {
        close(fd);
        st->fd = -1;
        return pt_fail(PT_ENOMEM, "out of memory");
    }
    int rc = PT_OK;
    struct stat sb;
    unsigned char h8[8];
    char *hdr = NULL;
    json_t *root = NULL;
    pt_st_tensor **order = NULL;
    if (fstat(fd, &sb) != 0) {
        rc = pt_fail(PT_EIO, "cannot stat %s: %s", path, strerror(errno));
        goto out;
    }
    st->size = (uint64_t)sb.st_size;
    if (st->size < 8) {
        rc = pt_fail(PT_EFORMAT, "safetensors file %s: %llu bytes, shorter than its 8-byte header length", path,
                     (unsigned long long)st->size);
        goto out;
    }
    if (pread(fd, h8, 8, 0) != 8) {
        rc = pt_fail(PT_EIO, "cannot read %s: %s", path, strerror(errno ? errno : EIO));
        goto out;
    }
    uint64_t n = 0;
    for (int i = 0; i < 8; i++) n |= (uint64_t)h8[i] << (8 * i);
    if (n > st->size - 8 || n > PT_ST_MAX_HEADER || n < 2) {
        rc = pt_fail(PT_EFORMAT, "safetensors file %s: header length %llu does not fit (the file has %llu bytes after "
                                 "the length; a header holds 2 to %llu)", path, (unsigned long long)n,
                     (unsigned long long)(st->size - 8), PT_ST_MAX_HEADER);
        goto out;
    }
    st->data = 8 + n;
    const uint64_t data_len = st->size - st->data;
    hdr = malloc((size_t)n);
    if (!hdr) {
        rc = pt_fail(PT_ENOMEM, "out of memory for the %llu-byte header of %s", (unsigned long long)n, path);
        goto out;
    }
    for (uint64_t got = 0; got < n;) {
        ssize_t r = pread(fd, hdr + got, (size_t)(n - got), (off_t)(8 + got));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            rc = pt_fail(PT_EIO, "cannot read the header of %s: %s", path, r < 0 ? strerror(errno) : "the file shrank");
            goto out;
        }
        got += (uint64_t)r;
    }
    if (hdr[0] != '{') {
        rc = pt_fail(PT_EFORMAT, "safetensors file %s: its header does not start with '{'", path);
        goto out;
    }
    json_error_t je;
    root = json_loadb(hdr, (size_t)n, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        rc = pt_fail(PT_EFORMAT, "safetensors file %s: header (byte %d) is not valid JSON: %s", path, je.position, je.text);
        goto out;
    }
    if (!json_is_object(root)) {
        rc = pt_fail(PT_EFORMAT, "safetensors file %s: header is not a JSON object", path);
        goto out;
    }
    size_t cap = json_object_size(root);
    st->t = calloc(cap ? cap : 1, sizeof *st->t);
    order = calloc(cap ? cap : 1, sizeof *order);
    if (!st->t || !order) {
        rc = pt_fail(PT_ENOMEM, "out of memory");
        goto out;
    }
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v) {
        if (!strcmp(key, "__metadata__")) {
            if (!json_is_object(v)) {
                rc = pt_fail(PT_EFORMAT, "safetensors file %s: __metadata__ is not an object", path);
                goto out;
            }
            continue;
        }
        pt_st_tensor *t = &st->t[st->n];
        if ((rc = parse_entry(path, key, v, data_len, t))) goto out;
        if (!(t->name = strdup(key))) {
            rc = pt_fail(PT_ENOMEM, "out of memory");
            goto out;
        }
        order[st->n] = t;
        st->n++;
    }
    /* the byte ranges tile the data: no gap, no overlap, to its end */
    qsort(order, (size_t)st->n, sizeof *order, cmp_begin);
    uint64_t at = 0;
    for (int i = 0; i < st->n; i++) {
        if (order[i]->begin != at) {
            rc = pt_fail(PT_EFORMAT, "safetensors file %s: tensor '%.200s' starts at data byte %llu, where %s ends at "
                                     "%llu (%s)", path, order[i]->name, (unsigned long long)order[i]->begin,
                         i ? order[i - 1]->name : "the start", (unsigned long long)at,
                         order[i]->begin < at ? "overlapping data" : "a gap");
            goto out;
        }
        at = order[i]->end;
    }
    if (at != data_len) {
        rc = pt_fail(PT_EFORMAT, "safetensors file %s: the tensors hold %llu bytes of data, the file %llu", path,
                     (unsigned long long)at, (unsigned long long)data_len);
        goto out;
    }
out:
    free(order);
    free(hdr);
    json_decref(root);
    if (rc) pt_st_close(st);
    return rc;
}

const pt_st_tensor *pt_st_find(const pt_safetensors *st, const char *name)
{
    for (int i = 0; st && name && i < st->n; i++)
        if (!strcmp(st->t[i].name, name)) return &st->t[i];
    return NULL;
}

/* IEEE 754 binary16 to binary32, exactly (every half is a float) */
static float half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0x1f) bits = sign | 0x7f800000u | (man << 13); /* infinity, NaN (payload kept) */
    else if (exp) bits = sign | ((exp + 112) << 23) | (man << 13);
    else if (!man) bits = sign;
    else { /* subnormal: man * 2^-24, normalised */
        uint32_t e = 113;
        while (!(man & 0x400)) {
            man <<= 1;
            e--;
        }
        bits = sign | (e << 23) | ((man & 0x3ff) << 13);
    }
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

int pt_st_read_f32(const pt_safetensors *st, const pt_st_tensor *t, float *dst)
{
    if (!t) return pt_fail(PT_EINVAL, "pt_st_read_f32: NULL argument");
    return pt_st_read_f32_at(st, t, 0, t->numel, dst);
}

int pt_st_read_f32_at(const pt_safetensors *st, const pt_st_tensor *t, uint64_t first, uint64_t count, float *dst)
{
    if (!st || !t || (!dst && count)) return pt_fail(PT_EINVAL, "pt_st_read_f32: NULL argument");
    if (first > t->numel || count > t->numel - first)
        return pt_fail(PT_EINVAL, "tensor '%.200s' of %s: elements [%llu, +%llu) outside its %llu", t->name, st->path,
                       (unsigned long long)first, (unsigned long long)count, (unsigned long long)t->numel);
    if (t->dtype != PT_ST_F32 && t->dtype != PT_ST_F16 && t->dtype != PT_ST_BF16)
        return pt_fail(PT_EUNSUPP, "safetensors file %s: tensor '%.200s' is %s; floating-point weights are read from "
                                   "F32, F16 or BF16", st->path, t->name, pt_st_dtype_name(t->dtype));
    const unsigned w = dtypes[t->dtype].bytes;
    unsigned char buf[1 << 16];
    uint64_t done = 0; /* elements */
    while (done < count) {
        uint64_t m = count - done < sizeof buf / w ? count - done : sizeof buf / w;
        size_t want = (size_t)(m * w), got = 0;
        while (got < want) {
            ssize_t r = pread(st->fd, buf + got, want - got, (off_t)(st->data + t->begin + (first + done) * w + got));
            if (r < 0 && errno == EINTR) continue;
            if (r <= 0)
                return pt_fail(PT_EIO, "cannot read tensor '%.200s' of %s: %s", t->name, st->path,
                               r < 0 ? strerror(errno) : "the file shrank");
            got += (size_t)r;
        }
        float *d = dst + done;
        if (t->dtype == PT_ST_F32) memcpy(d, buf, want); /* little-endian host */
        else
            for (uint64_t i = 0; i < m; i++) {
                uint16_t x = (uint16_t)(buf[2 * i] | buf[2 * i + 1] << 8);
                if (t->dtype == PT_ST_F16) d[i] = half_to_float(x);
                else {
                    uint32_t bits = (uint32_t)x << 16;
                    memcpy(&d[i], &bits, sizeof bits);
                }
            }
        done += m;
    }
    return PT_OK;
}
