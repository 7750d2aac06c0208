/* SPDX-License-Identifier: MIT */
/* The backend registry (ops.h: pt_backend_find, pt_backend_get,
 * pt_backend_ops, pt_backend_names): every backend this build knows, by
 * name.  A backend is a pt_backend instance in its own directory; adding
 * one is a row here. */
#include "backend/ops.h"
#include "backend/cuda/cuda.h"
#include "core/core.h"

#include <stdio.h>
#include <string.h>

static const pt_backend *const registry[] = {&pt_cpu_backend, &pt_cuda_backend};
enum { NREG = sizeof registry / sizeof registry[0] };

/* the backends whose ops run on host memory (the CPU tests' list) */
static const char *const host_names[] = {"cpu", NULL};

const char *const *pt_backend_names(void) { return host_names; }

const pt_backend *pt_backend_find(const char *name)
{
    if (!name) name = "cpu";
    for (int i = 0; i < NREG; i++)
        if (!strcmp(registry[i]->name, name)) return registry[i];
    char valid[128] = "";
    size_t k = 0;
    for (int i = 0; i < NREG && k < sizeof valid; i++)
        k += (size_t)snprintf(valid + k, sizeof valid - k, "%s%s", i ? ", " : "", registry[i]->name);
    pt_fail(PT_EUNSUPP, "backend '%s' is not known (valid: %s)", name, valid);
    return NULL;
}

const pt_backend *pt_backend_get(const char *name)
{
    const pt_backend *be = pt_backend_find(name);
    if (!be) return NULL;
    int rc = be->init ? be->init() : PT_OK;
    if (rc != PT_OK) {
        pt_fail(rc, "backend '%s': %s", be->name, pt_errmsg());
        return NULL;
    }
    return be;
}

const pt_ops *pt_backend_ops(const pt_backend *be, pt_dtype act)
{
    const pt_prec_policy *p = act == PT_F32 || act == PT_BF16 ? pt_prec_policy_for(act) : NULL;
    if (!p) {
        pt_fail(PT_EUNSUPP, "backend '%s' has no table for %s activations (valid: fp32%s)", be->name,
                pt_dtype_name(act), be->ops_bf16 ? ", bf16" : "");
        return NULL;
    }
    return pt_backend_ops_for(be, p);
}
