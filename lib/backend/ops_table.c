/* SPDX-License-Identifier: MIT */
/* The op list's generic code (ops.h): the precision policies, the op
 * families' names, building a table from its family fills and checking it
 * against PT_OPS, and the backend's lookup of a table by policy. */
#include "backend/ops.h"
#include "core/core.h"

#include <stdio.h>
#include <string.h>

/* ---- precision policies --------------------------------------------------------- */

const pt_prec_policy pt_prec_policies[] = {
    {"fp32", PT_F32, PT_F32, PT_F32, PT_SCALE_NONE, 0},
    {"bf16", PT_BF16, PT_BF16, PT_F32, PT_SCALE_NONE, 0},
    /* fp8 (later): {"fp8", PT_BF16, <e4m3/e5m2>, PT_F32, PT_SCALE_DELAYED, 16} */
    {NULL, 0, 0, 0, PT_SCALE_NONE, 0},
};

/* "fp32, bf16" into buf */
static const char *valid_names(char *buf, size_t len)
{
    size_t k = 0;
    buf[0] = '\0';
    for (int i = 0; pt_prec_policies[i].name && k < len; i++)
        k += (size_t)snprintf(buf + k, len - k, "%s%s", i ? ", " : "", pt_prec_policies[i].name);
    return buf;
}

const pt_prec_policy *pt_prec_policy_find(const char *name)
{
    for (int i = 0; name && pt_prec_policies[i].name; i++)
        if (!strcmp(pt_prec_policies[i].name, name)) return &pt_prec_policies[i];
    char v[64];
    pt_fail(PT_EUNSUPP, "precision '%s' is not implemented (valid: %s)", name ? name : "(null)",
            valid_names(v, sizeof v));
    return NULL;
}

const pt_prec_policy *pt_prec_policy_for(pt_dtype act)
{
    for (int i = 0; pt_prec_policies[i].name; i++)
        if (pt_prec_policies[i].act == act) return &pt_prec_policies[i];
    char v[64];
    pt_fail(PT_EUNSUPP, "no precision has %s activations (valid: %s)", pt_dtype_name(act), valid_names(v, sizeof v));
    return NULL;
}

/* ---- op families and the table check ------------------------------------------ */

static const char *const fam_ids[PT_FAM_N] = {
    [PT_FAM_EMBED] = "embed", [PT_FAM_ELTWISE] = "eltwise",     [PT_FAM_NORM] = "norm", [PT_FAM_GEMM] = "gemm",
    [PT_FAM_ATTENTION] = "attention", [PT_FAM_XENT] = "xent", [PT_FAM_MEM] = "mem",   [PT_FAM_ADAMW] = "adamw",
};

const char *pt_op_family_id(int f) { return f >= 0 && f < PT_FAM_N ? fam_ids[f] : "?"; }

#define PT_NEED_REQ 1
#define PT_NEED_OPT 0
int pt_ops_check(const pt_ops *o, const char *backend)
{
#define CHECK(op, ret, args, fam, role, need)                                                                         \
    if (PT_NEED_##need && !o->op)                                                                                    \
        return pt_fail(PT_EUNSUPP, "backend '%s', table '%s': op '%s' (family %s) has no kernel", backend,          \
                       o->name ? o->name : "?", #op, pt_op_family_id(PT_FAM_##fam));
    PT_OPS(CHECK)
#undef CHECK
    return PT_OK;
}

int pt_ops_build(pt_ops *o, const char *backend, const char *name, const pt_prec_policy *p,
                 const pt_ops_fill_fn fills[PT_FAM_N], unsigned families)
{
    *o = (pt_ops){.name = name, .act = p->act, .acc = p->acc};
    for (int f = 0; f < PT_FAM_N; f++) {
        if (!(families & (1u << f)) || !fills[f]) continue;
        const int rc = fills[f](o, p);
        if (rc != PT_OK) return rc;
    }
    const int rc = pt_ops_check(o, backend);
    if (rc == PT_OK) o->prec = p;
    return rc;
}

/* ---- the backend's lookup ------------------------------------------------------- */

static int same_policy(const pt_prec_policy *a, const pt_prec_policy *b)
{
    return a == b || (a && b && a->act == b->act && a->gemm == b->gemm && a->acc == b->acc &&
                      a->scaling == b->scaling && a->amax_history == b->amax_history);
}

const pt_ops *pt_backend_ops_for(const pt_backend *be, const pt_prec_policy *p)
{
    const pt_ops *const t[2] = {be->ops, be->ops_bf16};
    char valid[64] = "";
    size_t k = 0;
    for (int i = 0; i < 2; i++) {
        if (!t[i] || !t[i]->prec) continue; /* not built here, or its build failed (said at load) */
        if (same_policy(t[i]->prec, p)) return t[i];
        if (k < sizeof valid)
            k += (size_t)snprintf(valid + k, sizeof valid - k, "%s%s", k ? ", " : "", t[i]->prec->name);
    }
    pt_fail(PT_EUNSUPP, "backend '%s' has no table for precision '%s' (valid: %s)", be->name,
            p && p->name ? p->name : "?", k ? valid : "none");
    return NULL;
}
