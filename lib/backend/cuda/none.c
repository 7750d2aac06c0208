/* SPDX-License-Identifier: MIT */
/* cuda.h in a build without the CUDA backend (configure found no nvcc, or
 * --without-cuda): every call says so, so callers need no #ifdef. */
#include "backend/cuda/cuda.h"
#include "backend/ops.h"
#include "core/core.h"

#include <stdio.h>
#include <string.h>

static const char not_built[] = "ptrain was built without the CUDA backend (configure found no nvcc; "
                                "rebuild with --with-cuda=DIR)";

static int no(void) { return pt_fail(PT_EUNSUPP, "%s", not_built); }

int pt_cuda_built(void) { return 0; }

int pt_cuda_device_count(char *why, size_t len)
{
    snprintf(why, len, "%s", not_built);
    return 0;
}

int pt_cuda_init(void) { return no(); }
int pt_cuda_device(void) { return -1; }
void pt_cuda_shutdown(void) {}

static void *none_alloc(size_t bytes)
{
    (void)bytes;
    no();
    return NULL;
}
static size_t none_free(void *p)
{
    (void)p;
    return 0;
}
const pt_arena_mem pt_cuda_mem = {PT_DEV_CUDA, none_alloc, none_free};
size_t pt_cuda_mem_live(void) { return 0; }

int pt_cuda_to_device(void *dst, const void *src, size_t bytes) { (void)dst, (void)src, (void)bytes; return no(); }
int pt_cuda_to_host(void *dst, const void *src, size_t bytes) { (void)dst, (void)src, (void)bytes; return no(); }
int pt_cuda_copy_d2d(void *dst, const void *src, size_t bytes) { (void)dst, (void)src, (void)bytes; return no(); }
int pt_cuda_sync(void) { return no(); }
int pt_cuda_comm_after_compute(void) { return no(); }
int pt_cuda_compute_after_comm(void) { return no(); }
int pt_cuda_comm_to_host(void *dst, const void *src, size_t bytes) { (void)dst, (void)src, (void)bytes; return no(); }
int pt_cuda_comm_to_device(void *dst, const void *src, size_t bytes) { (void)dst, (void)src, (void)bytes; return no(); }
int pt_cuda_is_device_ptr(const void *p) { (void)p; return 0; }
void *pt_cuda_host_alloc(size_t bytes)
{
    (void)bytes;
    no();
    return NULL;
}
void pt_cuda_host_free(void *p) { (void)p; }
int pt_cuda_device_uuid(unsigned char uuid[16])
{
    memset(uuid, 0, 16);
    return no();
}

void pt_cuda_versions(char *buf, size_t len) { snprintf(buf, len, "CUDA backend not built"); }
void *pt_cuda_comm_stream(void) { return NULL; }


int pt_cuda_ops_status(void) { return PT_OK; }
const char *pt_cuda_ops_errmsg(void) { return ""; }

/* ---- the "cuda" backend's own hooks (its table, cuda_backend.c, says it is not built) ---- */

int pt_cuda_prepare(const pt_prec_policy *p)
{
    (void)p;
    return no();
}
void pt_cuda_set_threads(int n) { (void)n; }
