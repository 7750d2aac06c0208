/* SPDX-License-Identifier: MIT */
/* The CUDA backend's core, as seen from code without CUDA headers
 * (lib/backend, bench and the tests): device choice, the device arena
 * memory, copies, the two streams' ordering, the versions line, and the
 * "cuda" backend's table (ops.h's pt_cuda_backend).  Only lib/backend, bench
 * and the tests include it: everything else takes the table.
 *
 * Built with the CUDA backend (configure: HAVE_CUDA) these are device.c;
 * without it, none.c answers every call with PT_EUNSUPP and "ptrain was
 * built without the CUDA backend", so callers need no #ifdef.
 *
 * One device per process (pt_cuda_init picks it: host.h's
 * pt_cuda_pick_device over the devices CUDA_VISIBLE_DEVICES leaves, by
 * the node-local rank).  Two streams: compute (the ops, the GEMMs) and
 * communication (lib/comm's device collectives); work on one waits for
 * the other only through events (pt_cuda_comm_after_compute,
 * pt_cuda_compute_after_comm).
 *
 * Errors: pt_fail with one line naming the call and the library's error
 * name and string ("cudaMalloc(16777216 bytes): out of memory
 * (cudaErrorMemoryAllocation)"): PT_ENOMEM for out-of-memory, PT_EUNSUPP
 * for no device or no CUDA build, PT_EIO for any other CUDA, cuBLAS or
 * cuDNN failure (as topo's GPU probe), PT_ECOMM for NCCL (lib/comm).
 */
#ifndef PTRAIN_CUDA_H
#define PTRAIN_CUDA_H
#include "core/core.h"
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* 1 when this build has the CUDA backend (HAVE_CUDA), else 0. */
int pt_cuda_built(void);
/* The number of CUDA devices this process sees (after
 * CUDA_VISIBLE_DEVICES): > 0, or 0 with the reason as one line in why
 * (len bytes; "ptrain was built without the CUDA backend", "no CUDA device
 * visible (cudaGetDeviceCount: CUDA driver version is insufficient ...
 * (cudaErrorInsufficientDriver))").  Initialises nothing else. */
int pt_cuda_device_count(char *why, size_t len);

/* Select this process's device, create its two streams, their events and
 * the cuBLASLt handle with its workspace (lib/backend/cuda/gemm.c).
 * Idempotent; not thread-safe (call it from the main thread before any
 * other pt_cuda_* use).  PT_OK; PT_EUNSUPP with the reason when there is no
 * device or no CUDA build; PT_EINVAL for a bad local-rank variable
 * (host.h); PT_EIO / PT_ENOMEM from the runtime. */
int pt_cuda_init(void);
/* The device pt_cuda_init chose (-1 before). */
int pt_cuda_device(void);
/* Release what pt_cuda_init created (streams, events, handle, workspace);
 * blocks of pt_cuda_mem still live stay allocated. */
void pt_cuda_shutdown(void);

/* The device arena memory (core.h's pt_arena_mem, device PT_DEV_CUDA):
 * alloc = cudaMalloc (256-byte aligned) of `bytes`, zeroed on the compute
 * stream (cudaMemsetAsync: ordered before every later op on it, and before
 * a device collective, which waits for the compute stream), its size kept
 * in a host table (host.h's pt_ptrmap) so free returns it: the same
 * accounting as the host arena's.  alloc returns NULL when cudaMalloc
 * fails (the reason is logged) or pt_cuda_init has not run; free of a block
 * it does not know returns 0 and logs it.  Every alloc and free may block
 * (cudaMalloc, cudaFree synchronise the device). */
extern const pt_arena_mem pt_cuda_mem;
/* Bytes in live pt_cuda_mem blocks (what the arenas on the device hold). */
size_t pt_cuda_mem_live(void);

/* Copies of `bytes` bytes, stream-ordered on the compute stream and
 * synchronous for the host (they return when the data has arrived):
 * host -> device, device -> host, device -> device.  The host side may be
 * any host memory (pageable or pinned).  PT_OK or PT_EIO. */
int pt_cuda_to_device(void *dst, const void *src, size_t bytes);
int pt_cuda_to_host(void *dst, const void *src, size_t bytes);
int pt_cuda_copy_d2d(void *dst, const void *src, size_t bytes);
/* Wait until all work queued on both streams has finished. PT_OK or PT_EIO. */
int pt_cuda_sync(void);

/* Stream order: the communication stream waits for the work queued so far
 * on the compute stream (an event recorded there), and the other way
 * round.  PT_OK or PT_EIO. */
int pt_cuda_comm_after_compute(void);
int pt_cuda_compute_after_comm(void);
/* Copies on the communication stream, ordered after the compute stream's
 * work queued so far, synchronous for the host (lib/comm's staging through
 * host memory).  PT_OK or PT_EIO. */
int pt_cuda_comm_to_host(void *dst, const void *src, size_t bytes);
int pt_cuda_comm_to_device(void *dst, const void *src, size_t bytes);

/* Whether p points into device memory (cudaPointerGetAttributes: device or
 * managed memory); 0 for host memory, NULL, or without the backend. */
int pt_cuda_is_device_ptr(const void *p);
/* Pinned host memory (cudaMallocHost) for staging, bytes; NULL on failure
 * (pt_fail says why).  pt_cuda_host_free(NULL) is a no-op. */
void *pt_cuda_host_alloc(size_t bytes);
void pt_cuda_host_free(void *p);
/* The 16-byte UUID of this process's device (cudaDeviceProp.uuid): what
 * lib/comm compares to learn whether two ranks share a GPU.  PT_OK,
 * PT_EUNSUPP before pt_cuda_init or without the backend. */
int pt_cuda_device_uuid(unsigned char uuid[16]);

/* The run header's line (host.h's pt_cuda_info_format): GPU name, compute
 * capability and memory, driver, CUDA runtime, cuBLASLt, cuDNN and NCCL
 * versions, into buf (len bytes).  Without a device the GPU part says why;
 * without the backend the whole line says "not built".  Does not
 * initialise the backend (the device named is pt_cuda_init's when it ran,
 * else device 0). */
void pt_cuda_versions(char *buf, size_t len);

/* The CUDA ops table's first failure (ops_cuda.h: its entries return
 * nothing, so a launch error, cuBLASLt status or bad argument is recorded
 * and logged once): its code, PT_OK when none (and without the backend),
 * and its one line ("" when none).  ptrain-run checks it after each step. */
int pt_cuda_ops_status(void);
const char *pt_cuda_ops_errmsg(void);

/* The communication stream (a cudaStream_t, as NCCL takes it) for code
 * without CUDA headers; NULL before pt_cuda_init and without the backend. */
void *pt_cuda_comm_stream(void);

/* The "cuda" backend's hooks that differ by build: set_threads (the
 * host-side threads the backend may use; nothing without it) and prepare
 * (PT_OK: every choice is taken at init; PT_EUNSUPP without the backend). */
struct pt_prec_policy; /* backend/ops.h */
void pt_cuda_set_threads(int n);
int pt_cuda_prepare(const struct pt_prec_policy *p);

/* The "cuda" backend's hooks that read the same in every build (they call
 * only the functions above, which none.c answers without the backend),
 * written once in lib/backend/cuda/cuda_backend.c: available (1 a device, 0 none
 * visible, -1 not built; the reason in why), status (pt_cuda_ops_status
 * and its line), and dev (the copies, staging memory, stream order,
 * device UUID and communication stream above). */
int pt_cuda_backend_available(char *why, size_t len);
int pt_cuda_backend_status(const char **msg);
extern const struct pt_backend_dev pt_cuda_backend_dev;

/* The "cuda" backend is ops.h's pt_cuda_backend (lib/backend/backend.c's
 * registry; pt_backend_get("cuda") initialises it), one table for every
 * build in lib/backend/cuda/cuda_backend.c: name "cuda", mem &pt_cuda_mem,
 * ops &pt_cuda_ops_f32 and ops_bf16 &pt_cuda_ops_bf16 (ops_cuda.h; NULL
 * without the backend), init pt_cuda_init, prepare pt_cuda_prepare,
 * set_threads pt_cuda_set_threads, describe pt_cuda_versions, status
 * pt_cuda_ops_status, dev the copies and streams above.  Code outside
 * lib/backend reaches the GPU through that table only. */

#ifdef __cplusplus
}
#endif
#endif
