/* SPDX-License-Identifier: MIT */
/* The "cuda" backend (ops.h's pt_cuda_backend), one table for every build:
 * its hooks call only cuda.h, which device.c answers with the backend and
 * none.c without (the ops tables are ops.c's, built from the family fills; NULL without the
 * backend).  So the registry (lib/backend/backend.c) calls into this file,
 * this file into device.c or none.c, and neither of those back: no two
 * files call into each other. */
#include "config.h"
#include "backend/ops.h"
#include "backend/cuda/cuda.h"
#ifdef HAVE_CUDA
#include "backend/cuda/ops_cuda.h"
#endif

/* ---- the hooks that read the same in every build ---- */

int pt_cuda_backend_available(char *why, size_t len)
{
    if (len) why[0] = 0;
    const int n = pt_cuda_device_count(why, len); /* without the backend: 0, why says so */
    return !pt_cuda_built() ? -1 : n > 0;
}

int pt_cuda_backend_status(const char **msg)
{
    *msg = pt_cuda_ops_errmsg();
    return pt_cuda_ops_status();
}

const pt_backend_dev pt_cuda_backend_dev = {
    .is_device_ptr = pt_cuda_is_device_ptr,
    .to_host = pt_cuda_comm_to_host,
    .to_device = pt_cuda_comm_to_device,
    .copy = pt_cuda_copy_d2d,
    .host_alloc = pt_cuda_host_alloc,
    .host_free = pt_cuda_host_free,
    .comm_after_compute = pt_cuda_comm_after_compute,
    .compute_after_comm = pt_cuda_compute_after_comm,
    .device_uuid = pt_cuda_device_uuid,
    .comm_stream = pt_cuda_comm_stream,
};

/* ---- the table ---- */

const pt_backend pt_cuda_backend = {
    .name = "cuda",
#ifdef HAVE_CUDA
    .ops = &pt_cuda_ops_f32,
    .ops_bf16 = &pt_cuda_ops_bf16,
#else
    .ops = NULL,
    .ops_bf16 = NULL,
#endif
    .set_threads = pt_cuda_set_threads,
    .mem = &pt_cuda_mem,
    .available = pt_cuda_backend_available,
    .init = pt_cuda_init,
    .prepare = pt_cuda_prepare,
    .describe = pt_cuda_versions,
    .status = pt_cuda_backend_status,
    .dev = &pt_cuda_backend_dev,
};
