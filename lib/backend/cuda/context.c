/* SPDX-License-Identifier: MIT */
/* The CUDA backend's context, below every other file of it: the one-line
 * error helpers and the process's two streams (cuda_priv.h).  device.c
 * creates the streams in pt_cuda_init and destroys them in
 * pt_cuda_shutdown; gemm.c, attention_cudnn.c, the ops and the kernels'
 * launchers use both without calling back into device.c, which starts and
 * releases them. */
#include "config.h"
#include "backend/cuda/cuda_priv.h"
#include "core/core.h"

#ifdef HAVE_CUDNN
#include <cudnn.h>
#endif
#include <stdarg.h>
#include <stdio.h>

/* ---- errors -------------------------------------------------------------- */

/* "CALL" formatted, then ": " and the library's text: one pt_fail line */
static int vfail(int code, const char *what, const char *fmt, va_list ap)
{
    char call[256];
    vsnprintf(call, sizeof call, fmt, ap);
    return pt_fail(code, "%s: %s", call, what);
}

int pt_cuda_fail(cudaError_t e, const char *call, ...)
{
    char what[300];
    snprintf(what, sizeof what, "%s (%s)", cudaGetErrorString(e), cudaGetErrorName(e));
    (void)cudaGetLastError(); /* a non-sticky error would otherwise greet the next call */
    int code = e == cudaErrorMemoryAllocation ? PT_ENOMEM
             : (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver) ? PT_EUNSUPP
                                                                             : PT_EIO;
    va_list ap;
    va_start(ap, call);
    int rc = vfail(code, what, call, ap);
    va_end(ap);
    return rc;
}

int pt_cublas_fail(cublasStatus_t s, const char *call, ...)
{
    char what[300];
    snprintf(what, sizeof what, "%s (%s)", cublasLtGetStatusString(s), cublasLtGetStatusName(s));
    int code = s == CUBLAS_STATUS_ALLOC_FAILED ? PT_ENOMEM : s == CUBLAS_STATUS_NOT_SUPPORTED ? PT_EUNSUPP : PT_EIO;
    va_list ap;
    va_start(ap, call);
    int rc = vfail(code, what, call, ap);
    va_end(ap);
    return rc;
}

#ifdef HAVE_CUDNN
int pt_cudnn_fail(int status, const char *call, ...)
{
    cudnnStatus_t s = (cudnnStatus_t)status;
    char what[300];
    snprintf(what, sizeof what, "%s (cuDNN status %d)", cudnnGetErrorString(s), status);
    /* cuDNN 9 groups its codes by thousands: 3xxx NOT_SUPPORTED*, 4xxx
     * INTERNAL_ERROR*, 5xxx EXECUTION_FAILED* (cudnn_graph.h) */
    int code = (s == CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED ||
                s == CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED) ? PT_ENOMEM
             : status / 1000 == 3 ? PT_EUNSUPP
                                  : PT_EIO;
    va_list ap;
    va_start(ap, call);
    int rc = vfail(code, what, call, ap);
    va_end(ap);
    return rc;
}
#endif

/* ---- the process's two streams ------------------------------------------ */

static cudaStream_t compute_stream, comm_stream;

cudaStream_t pt_cuda_stream_compute(void) { return compute_stream; }
cudaStream_t pt_cuda_stream_comm(void) { return comm_stream; }

int pt_cuda_streams_create(int dev)
{
    /* the communication stream gets the highest priority, so a collective
     * that overlaps the backward is not starved by its kernels (as
     * PyTorch's NCCL streams and llm.c's) */
    int lo = 0, hi = 0;
    cudaError_t e = cudaDeviceGetStreamPriorityRange(&lo, &hi);
    if (e == cudaSuccess) e = cudaStreamCreateWithPriority(&compute_stream, cudaStreamNonBlocking, lo);
    if (e == cudaSuccess) e = cudaStreamCreateWithPriority(&comm_stream, cudaStreamNonBlocking, hi);
    if (e == cudaSuccess) return PT_OK;
    int rc = pt_cuda_fail(e, "creating the compute and communication streams on device %d", dev);
    pt_cuda_streams_destroy();
    return rc;
}

void pt_cuda_streams_destroy(void)
{
    if (compute_stream) cudaStreamDestroy(compute_stream);
    if (comm_stream) cudaStreamDestroy(comm_stream);
    compute_stream = comm_stream = NULL;
    (void)cudaGetLastError();
}
