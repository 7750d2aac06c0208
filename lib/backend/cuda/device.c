/* SPDX-License-Identifier: MIT */
/* The CUDA backend's core (cuda.h): device choice, the streams' events,
 * the device arena memory, copies, versions, the "cuda" backend's own
 * hooks (its table: cuda_backend.c).  The error helpers and the two
 * streams are context.c's, below this file and the GEMM and attention
 * files it starts and releases.
 * Host C against the CUDA runtime API; the kernels are the .cu files. */
#include "config.h"
#include "backend/cuda/attention_cudnn.h"
#include "backend/cuda/cuda_priv.h"
#include "backend/cuda/host.h"
#include "backend/ops.h"
#include "core/core.h"

#ifdef HAVE_CUDNN
#include <cudnn.h>
#endif
#ifdef HAVE_NCCL
#include <nccl.h>
#endif
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the process's device ------------------------------------------------ */

static struct {
    int ready;
    int dev;
    struct cudaDeviceProp props;
    cudaEvent_t compute_done, comm_done; /* recorded to order one stream after the other */
    int threads;
    pthread_mutex_t lock; /* the block table: arenas may allocate from more than one thread */
    pt_ptrmap blocks;
    size_t live;
} G = {.dev = -1, .lock = PTHREAD_MUTEX_INITIALIZER};

int pt_cuda_built(void) { return 1; }

int pt_cuda_device_count(char *why, size_t len)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        snprintf(why, len, "no CUDA device visible (cudaGetDeviceCount: %s (%s))", cudaGetErrorString(e),
                 cudaGetErrorName(e));
        (void)cudaGetLastError();
        return 0;
    }
    if (n < 1) {
        const char *vis = getenv("CUDA_VISIBLE_DEVICES");
        snprintf(why, len, "no CUDA device visible (cudaGetDeviceCount found none; CUDA_VISIBLE_DEVICES=%s)",
                 vis ? vis : "(unset)");
        return 0;
    }
    if (len) why[0] = '\0';
    return n;
}

const struct cudaDeviceProp *pt_cuda_props(void) { return G.ready ? &G.props : NULL; }
int pt_cuda_device(void) { return G.ready ? G.dev : -1; }

static void release(void)
{
    if (G.compute_done) cudaEventDestroy(G.compute_done);
    if (G.comm_done) cudaEventDestroy(G.comm_done);
    G.compute_done = G.comm_done = NULL;
    pt_cuda_streams_destroy();
    (void)cudaGetLastError();
}

int pt_cuda_init(void)
{
    if (G.ready) return PT_OK;
    char why[300];
    int n = pt_cuda_device_count(why, sizeof why);
    if (n < 1) return pt_fail(PT_EUNSUPP, "%s", why);
    int local, rc = pt_cuda_local_rank(&local);
    if (rc != PT_OK) return rc;
    int dev = pt_cuda_pick_device(n, local);
    cudaError_t e = cudaSetDevice(dev);
    if (e != cudaSuccess) return pt_cuda_fail(e, "cudaSetDevice(%d) (local rank %d of a node with %d visible devices)", dev, local, n);
    e = cudaGetDeviceProperties(&G.props, dev);
    if (e != cudaSuccess) return pt_cuda_fail(e, "cudaGetDeviceProperties(%d)", dev);
    rc = pt_cuda_streams_create(dev);
    if (rc != PT_OK) return rc;
    e = cudaEventCreateWithFlags(&G.compute_done, cudaEventDisableTiming);
    if (e == cudaSuccess) e = cudaEventCreateWithFlags(&G.comm_done, cudaEventDisableTiming);
    if (e != cudaSuccess) {
        rc = pt_cuda_fail(e, "creating the compute and communication streams' events on device %d", dev);
        release();
        return rc;
    }
    /* kernels' scratch comes from cudaMallocAsync on the compute stream:
     * keep what the pool holds between steps instead of returning it to
     * the driver at every synchronisation (CUDA Programming Guide, "Stream
     * Ordered Memory Allocator", cudaMemPoolAttrReleaseThreshold) */
    cudaMemPool_t pool;
    if (cudaDeviceGetDefaultMemPool(&pool, dev) == cudaSuccess) {
        uint64_t keep = UINT64_MAX;
        (void)cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep);
    }
    (void)cudaGetLastError();
    G.dev = dev;
    G.ready = 1;
    rc = pt_cuda_gemm_init();
    if (rc != PT_OK) {
        G.ready = 0;
        G.dev = -1;
        release();
        return rc;
    }
    pt_log(2, "cuda: device %d (%s, sm_%d%d) for local rank %d of %d visible", dev, G.props.name, G.props.major,
           G.props.minor, local, n);
    return PT_OK;
}

void pt_cuda_shutdown(void)
{
    if (!G.ready) return;
    cudaDeviceSynchronize();
    pt_cuda_attention_cudnn_release(); /* its plans and handle (PTRAIN_ATTENTION, default cudnn) */
    pt_cuda_gemm_shutdown();
    release();
    G.ready = 0;
    G.dev = -1;
}

/* ---- device arena memory --------------------------------------------------- */

static void *cuda_alloc(size_t bytes)
{
    if (!G.ready) {
        pt_log(0, "cuda memory: allocation of %zu bytes before pt_cuda_init", bytes);
        return NULL;
    }
    void *p = NULL;
    const size_t n = bytes ? bytes : 1; /* a distinct block even for 0 bytes, as the host arena's */
    cudaError_t e = cudaMalloc(&p, n);
    if (e != cudaSuccess) {
        /* out of memory is what the arena reports; anything else is a broken
         * device, said here since the arena's message cannot carry it */
        pt_log(e == cudaErrorMemoryAllocation ? 2 : 0, "cudaMalloc(%zu bytes): %s (%s)", n, cudaGetErrorString(e),
               cudaGetErrorName(e));
        (void)cudaGetLastError();
        return NULL;
    }
    e = cudaMemsetAsync(p, 0, n, pt_cuda_stream_compute());
    if (e != cudaSuccess) {
        pt_log(0, "cudaMemsetAsync(%zu bytes): %s (%s)", n, cudaGetErrorString(e), cudaGetErrorName(e));
        (void)cudaGetLastError();
        cudaFree(p);
        return NULL;
    }
    pthread_mutex_lock(&G.lock);
    int rc = pt_ptrmap_put(&G.blocks, p, bytes);
    if (rc == PT_OK) G.live += bytes;
    pthread_mutex_unlock(&G.lock);
    if (rc != PT_OK) {
        pt_log(0, "cuda memory: %s", pt_errmsg());
        cudaFree(p);
        return NULL;
    }
    return p;
}

static size_t cuda_free(void *p)
{
    size_t bytes = 0;
    pthread_mutex_lock(&G.lock);
    int found = pt_ptrmap_take(&G.blocks, p, &bytes);
    if (found) G.live -= bytes;
    pthread_mutex_unlock(&G.lock);
    if (!found) {
        pt_log(0, "cuda memory: free of %p, which pt_cuda_mem did not allocate (ignored)", p);
        return 0;
    }
    cudaError_t e = cudaFree(p);
    if (e != cudaSuccess) {
        pt_log(0, "cudaFree(%p, %zu bytes): %s (%s)", p, bytes, cudaGetErrorString(e), cudaGetErrorName(e));
        (void)cudaGetLastError();
    }
    return bytes;
}

const pt_arena_mem pt_cuda_mem = {PT_DEV_CUDA, cuda_alloc, cuda_free};

size_t pt_cuda_mem_live(void)
{
    pthread_mutex_lock(&G.lock);
    size_t n = G.live;
    pthread_mutex_unlock(&G.lock);
    return n;
}

/* ---- copies and stream order ------------------------------------------------ */

static int need_init(const char *what)
{
    return G.ready ? PT_OK : pt_fail(PT_EUNSUPP, "%s before pt_cuda_init (no device selected)", what);
}

static int copy_on(cudaStream_t s, void *dst, const void *src, size_t bytes, const char *what)
{
    if (!bytes) return PT_OK;
    int rc = need_init(what);
    if (rc != PT_OK) return rc;
    cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s);
    if (e == cudaSuccess) e = cudaStreamSynchronize(s);
    return e == cudaSuccess ? PT_OK : pt_cuda_fail(e, "%s of %zu bytes (cudaMemcpyAsync %p -> %p)", what, bytes, src, dst);
}

int pt_cuda_to_device(void *dst, const void *src, size_t bytes)
{
    return copy_on(pt_cuda_stream_compute(), dst, src, bytes, "host-to-device copy");
}

int pt_cuda_to_host(void *dst, const void *src, size_t bytes)
{
    return copy_on(pt_cuda_stream_compute(), dst, src, bytes, "device-to-host copy");
}

int pt_cuda_copy_d2d(void *dst, const void *src, size_t bytes)
{
    return copy_on(pt_cuda_stream_compute(), dst, src, bytes, "device-to-device copy");
}

int pt_cuda_sync(void)
{
    int rc = need_init("pt_cuda_sync");
    if (rc != PT_OK) return rc;
    PT_CUDA_TRY(cudaStreamSynchronize(pt_cuda_stream_compute()));
    PT_CUDA_TRY(cudaStreamSynchronize(pt_cuda_stream_comm()));
    return PT_OK;
}

int pt_cuda_comm_after_compute(void)
{
    int rc = need_init("ordering the communication stream");
    if (rc != PT_OK) return rc;
    PT_CUDA_TRY(cudaEventRecord(G.compute_done, pt_cuda_stream_compute()));
    PT_CUDA_TRY(cudaStreamWaitEvent(pt_cuda_stream_comm(), G.compute_done, 0));
    return PT_OK;
}

int pt_cuda_compute_after_comm(void)
{
    int rc = need_init("ordering the compute stream");
    if (rc != PT_OK) return rc;
    PT_CUDA_TRY(cudaEventRecord(G.comm_done, pt_cuda_stream_comm()));
    PT_CUDA_TRY(cudaStreamWaitEvent(pt_cuda_stream_compute(), G.comm_done, 0));
    return PT_OK;
}

int pt_cuda_comm_to_host(void *dst, const void *src, size_t bytes)
{
    int rc = pt_cuda_comm_after_compute();
    return rc != PT_OK ? rc : copy_on(pt_cuda_stream_comm(), dst, src, bytes, "staging copy device-to-host");
}

int pt_cuda_comm_to_device(void *dst, const void *src, size_t bytes)
{
    /* after the compute stream's queued work, which may still read dst */
    int rc = pt_cuda_comm_after_compute();
    return rc != PT_OK ? rc : copy_on(pt_cuda_stream_comm(), dst, src, bytes, "staging copy host-to-device");
}

int pt_cuda_is_device_ptr(const void *p)
{
    if (!p) return 0;
    struct cudaPointerAttributes a;
    cudaError_t e = cudaPointerGetAttributes(&a, p);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
}

void *pt_cuda_host_alloc(size_t bytes)
{
    void *p = NULL;
    cudaError_t e = cudaMallocHost(&p, bytes ? bytes : 1);
    if (e != cudaSuccess) {
        pt_cuda_fail(e, "cudaMallocHost(%zu bytes) (pinned staging memory)", bytes);
        return NULL;
    }
    return p;
}

void pt_cuda_host_free(void *p)
{
    if (p && cudaFreeHost(p) != cudaSuccess) (void)cudaGetLastError();
}

int pt_cuda_device_uuid(unsigned char uuid[16])
{
    int rc = need_init("the device's UUID");
    if (rc != PT_OK) return rc;
    memcpy(uuid, G.props.uuid.bytes, 16);
    return PT_OK;
}

/* ---- versions ---------------------------------------------------------------- */

void pt_cuda_versions(char *buf, size_t len)
{
    pt_cuda_info v;
    memset(&v, 0, sizeof v);
    struct cudaDeviceProp p;
    const struct cudaDeviceProp *pp = G.ready ? &G.props : NULL;
    if (!pp && pt_cuda_device_count(v.why, sizeof v.why) > 0) {
        cudaError_t e = cudaGetDeviceProperties(&p, 0);
        if (e == cudaSuccess) {
            pp = &p;
        } else {
            snprintf(v.why, sizeof v.why, "cudaGetDeviceProperties(0): %s", cudaGetErrorString(e));
            (void)cudaGetLastError();
        }
    }
    if (pp) {
        snprintf(v.gpu, sizeof v.gpu, "%s", pp->name);
        v.sm = pp->major * 10 + pp->minor;
        v.mem_bytes = (double)pp->totalGlobalMem;
    }
    /* the kernel driver's version: NVML would need one more library for one
     * string; the driver's proc file has it (absent without the driver) */
    FILE *f = fopen("/proc/driver/nvidia/version", "re");
    if (f) {
        char text[1024];
        size_t n = fread(text, 1, sizeof text - 1, f);
        text[n] = '\0';
        fclose(f);
        pt_cuda_parse_driver(text, v.driver, sizeof v.driver);
    }
    if (cudaDriverGetVersion(&v.driver_api) != cudaSuccess) v.driver_api = 0;
    if (cudaRuntimeGetVersion(&v.runtime) != cudaSuccess) v.runtime = 0;
    (void)cudaGetLastError();
    v.cublaslt = (long)cublasLtGetVersion();
#ifdef HAVE_CUDNN
    v.cudnn = (long)cudnnGetVersion();
#endif
#ifdef HAVE_NCCL
    if (ncclGetVersion(&v.nccl) != ncclSuccess) v.nccl = 0;
#endif
    pt_cuda_info_format(&v, buf, len);
}

/* ---- the "cuda" backend's own hooks (its table is cuda_backend.c's) -------------- */

void pt_cuda_set_threads(int n)
{
    /* the GPU's parallelism is its own; n is what host-side work may use */
    G.threads = n < 1 ? 1 : n;
}

/* bf16 and fp32 tables take every choice at init (cuBLASLt's heuristics per shape) */
/* a policy without a table is refused by the lookup (pt_backend_ops_for) */
int pt_cuda_prepare(const pt_prec_policy *p)
{
    (void)p;
    return PT_OK;
}

void *pt_cuda_comm_stream(void) { return (void *)pt_cuda_stream_comm(); }
