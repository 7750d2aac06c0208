/* SPDX-License-Identifier: MIT */
/* Slurm's compressed lists, read without Slurm: per-node task counts, host
 * lists, the node kinds of a step (ptrain.conf node_models) and the
 * rendezvous port; see spank_util.h. */
#include "spank/spank_util.h"
#include "core/core.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_COUNT (1 << 20)

/* Decimal digits at *p into *v (1..MAX_COUNT); advances *p. */
static int take_count(const char **p, long *v)
{
    const char *s = *p;
    if (!isdigit((unsigned char)*s)) return -1;
    long x = 0;
    while (isdigit((unsigned char)*s)) {
        x = x * 10 + (*s - '0');
        if (x > MAX_COUNT) return -1;
        s++;
    }
    *p = s;
    *v = x;
    return 0;
}

int pt_spank_parse_tasks_per_node(const char *s, int *out, int cap, int *nnodes)
{
    if (!s || !*s)
        return pt_fail(PT_EINVAL, "empty tasks-per-node list (valid: e.g. \"2(x3),1\")");
    const char *p = s;
    int n = 0;
    for (;;) {
        long count, reps = 1;
        if (take_count(&p, &count) < 0 || count < 1) goto bad;
        if (*p == '(') {
            if (p[1] != 'x') goto bad;
            p += 2;
            if (take_count(&p, &reps) < 0 || reps < 1 || *p != ')') goto bad;
            p++;
        }
        if (reps > cap - n)
            return pt_fail(PT_EINVAL, "tasks-per-node list '%s' names more than %d nodes", s,
                             cap);
        for (long i = 0; i < reps; i++) out[n++] = (int)count;
        if (*p == '\0') break;
        if (*p != ',') goto bad;
        p++;
    }
    *nnodes = n;
    return 0;
bad:
    return pt_fail(PT_EINVAL, "malformed tasks-per-node list '%s' at offset %d (valid: "
                     "comma-separated N or N(xR) with N, R >= 1, e.g. \"2(x3),1\")", s,
                     (int)(p - s));
}

int pt_spank_hostlist_expand(const char *list, char *names, size_t len, int cap, int *n)
{
    *n = 0;
    if (!list || !*list) return pt_fail(PT_EINVAL, "empty host list");
    const char *p = list;
    while (*p) {
        /* one item: prefix [ranges] suffix, up to the next ',' outside brackets */
        const char *open = NULL, *close = NULL, *end = p;
        while (*end && *end != ',') {
            if (*end == '[') {
                if (open) return pt_fail(PT_EINVAL, "more than one '[' in a name of host list '%s'", list);
                open = end;
                close = strchr(end, ']');
                if (!close) return pt_fail(PT_EINVAL, "unbalanced '[' in host list '%s'", list);
                end = close + 1;
                continue;
            }
            if (*end == ']') return pt_fail(PT_EINVAL, "unbalanced ']' in host list '%s'", list);
            end++;
        }
        if (end == p) return pt_fail(PT_EINVAL, "empty name in host list '%s'", list);
        if (!open) {
            if ((size_t)(end - p) >= len) return pt_fail(PT_EINVAL, "host name in '%s' is longer than %zu bytes", list, len - 1);
            if (*n >= cap) return pt_fail(PT_EINVAL, "host list '%s' has more than %d names", list, cap);
            snprintf(names + (size_t)*n * len, len, "%.*s", (int)(end - p), p);
            (*n)++;
        } else {
            const size_t plen = (size_t)(open - p), slen = (size_t)(end - close - 1);
            if (close == open + 1) return pt_fail(PT_EINVAL, "empty range '[]' in host list '%s'", list);
            for (const char *r = open + 1; r < close;) {
                /* a range "lo" or "lo-hi", digits only, width of lo kept */
                const char *d = r;
                while (d < close && isdigit((unsigned char)*d)) d++;
                const int width = (int)(d - r);
                if (width == 0 || width > 9) return pt_fail(PT_EINVAL, "empty or non-numeric range in host list '%s'", list);
                long lo = strtol(r, NULL, 10), hi = lo;
                if (*d == '-') {
                    const char *h = ++d;
                    while (d < close && isdigit((unsigned char)*d)) d++;
                    if (d == h || d - h > 9) return pt_fail(PT_EINVAL, "empty or non-numeric range in host list '%s'", list);
                    hi = strtol(h, NULL, 10);
                }
                if (d < close && *d != ',') return pt_fail(PT_EINVAL, "malformed range in host list '%s'", list);
                if (hi < lo || hi - lo >= 65536)
                    return pt_fail(PT_EINVAL, "range %ld-%ld in host list '%s' is reversed or longer than 65536 names", lo, hi,
                                   list);
                for (long v = lo; v <= hi; v++) {
                    if (*n >= cap) return pt_fail(PT_EINVAL, "host list '%s' has more than %d names", list, cap);
                    char num[16];
                    snprintf(num, sizeof num, "%0*ld", width, v);
                    if (plen + strlen(num) + slen >= len)
                        return pt_fail(PT_EINVAL, "host name in '%s' is longer than %zu bytes", list, len - 1);
                    snprintf(names + (size_t)*n * len, len, "%.*s%s%.*s", (int)plen, p, num, (int)slen, close + 1);
                    (*n)++;
                }
                r = d < close ? d + 1 : d;
            }
        }
        p = *end ? end + 1 : end;
        if (*end && !*p) return pt_fail(PT_EINVAL, "empty name at the end of host list '%s'", list);
    }
    return 0;
}

int pt_spank_hostlist_has(const char *list, const char *name)
{
    enum { CAP = 4096, LEN = 256 };
    char *names = malloc((size_t)CAP * LEN);
    if (!names) return pt_fail(PT_ENOMEM, "out of memory expanding host list '%s'", list ? list : "");
    int n = 0, found = 0;
    if (pt_spank_hostlist_expand(list, names, LEN, CAP, &n) < 0) {
        free(names);
        return -1;
    }
    for (int i = 0; i < n && !found; i++) found = strcmp(names + (size_t)i * LEN, name) == 0;
    free(names);
    return found;
}

static int cmp_name(const void *a, const void *b) { return strcmp(a, b); }

int pt_spank_node_kinds(const pt_spank_conf *c, const char *nodelist, int nnodes, int *kind_of)
{
    enum { LEN = 256, PATTERN_CAP = 65536 };
    for (int i = 0; i < nnodes; i++) kind_of[i] = -1;
    if (!c || c->n_node_models == 0) return 0;
    char *nodes = malloc((size_t)(nnodes > 0 ? nnodes : 1) * LEN), *pat = malloc((size_t)PATTERN_CAP * LEN);
    int n = 0, rc = 0;
    if (!nodes || !pat) {
        rc = pt_fail(PT_ENOMEM, "out of memory matching %d nodes to node_models", nnodes);
        goto out;
    }
    if (pt_spank_hostlist_expand(nodelist, nodes, LEN, nnodes, &n) < 0) {
        rc = -1;
        goto out;
    }
    if (n != nnodes) {
        rc = pt_fail(PT_EINVAL, "the step's node list '%.200s' names %d nodes, the step has %d", nodelist, n, nnodes);
        goto out;
    }
    for (int m = 0; m < c->n_node_models; m++) {
        int np = 0;
        if (pt_spank_hostlist_expand(c->node_model[m].hosts, pat, LEN, PATTERN_CAP, &np) < 0) {
            rc = -1;
            goto out;
        }
        qsort(pat, (size_t)np, LEN, cmp_name);
        for (int i = 0; i < nnodes; i++)
            if (kind_of[i] < 0 && bsearch(nodes + (size_t)i * LEN, pat, (size_t)np, LEN, cmp_name)) kind_of[i] = m;
    }
out:
    free(nodes);
    free(pat);
    return rc;
}

int pt_spank_first_host(const char *list, char *out, size_t outlen)
{
    if (!list || !*list) return pt_fail(PT_EINVAL, "empty host list");
    const char *p = list;
    size_t k = 0;
    while (*p && *p != ',' && *p != '[') {
        if (k + 1 >= outlen) goto too_long;
        out[k++] = *p++;
    }
    if (*p == '[') {
        /* First range of the bracket: "001-003,7" -> "001". */
        const char *q = p + 1;
        const char *close = strchr(q, ']');
        if (!close) return pt_fail(PT_EINVAL, "unbalanced '[' in host list '%s'", list);
        size_t digits = 0;
        while (q + digits < close && isdigit((unsigned char)q[digits])) digits++;
        if (digits == 0)
            return pt_fail(PT_EINVAL, "empty or non-numeric range in host list '%s'", list);
        char after = q[digits];
        if (after != '-' && after != ',' && after != ']')
            return pt_fail(PT_EINVAL, "malformed range in host list '%s'", list);
        if (k + digits >= outlen) goto too_long;
        memcpy(out + k, q, digits);
        k += digits;
        /* A suffix after the bracket ("n[1-2]-ib") belongs to the name. */
        p = close + 1;
        while (*p && *p != ',' && *p != '[') {
            if (k + 1 >= outlen) goto too_long;
            out[k++] = *p++;
        }
    }
    if (k == 0) return pt_fail(PT_EINVAL, "host list '%s' starts with an empty name", list);
    out[k] = '\0';
    return 0;
too_long:
    return pt_fail(PT_EINVAL, "first host name in '%s' is longer than %zu bytes", list,
                     outlen ? outlen - 1 : 0);
}

int pt_spank_master_port(uint32_t job_id, uint32_t step_id, int base, int count)
{
    if (count < 1) count = 1;
    uint64_t slot = ((uint64_t)job_id * 64u + (step_id % 64u)) % (uint64_t)count;
    return base + (int)slot;
}
