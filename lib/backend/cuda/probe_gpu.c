/* SPDX-License-Identifier: MIT */
/* ptrain topology: the GPU bandwidth probe (topo/probe_gpu.h) with the CUDA
 * runtime, here with the rest of the code that includes CUDA headers
 * (tests/unit/test_backend_seam.sh); built into ptrain-topo only. */
#define _POSIX_C_SOURCE 200809L
#include "config.h"
#include "topo/probe_gpu.h"
#include "core/core.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#ifndef PTRAIN_HAVE_CUDA
int pt_probe_gpu(pt_topo *t, size_t bytes, int reps)
{
    (void)bytes; (void)reps;
    t->gpu_probe = PT_TOPO_GPU_PROBE_NOCUDA;
    snprintf(t->gpu_probe_note, sizeof t->gpu_probe_note, "ptrain was built without CUDA: no GPU bandwidth");
    return PT_OK;
}
#else
#include <cuda_runtime_api.h>

#define CK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
        rc = pt_fail(PT_EIO, "GPU probe: %s: %s", #call, cudaGetErrorString(e_)); goto out; } } while (0)

/* Best time (s) of reps copies issued by `fn` on the current device. */
static double best_of(int reps, int (*fn)(void *), void *arg)
{
    cudaEvent_t a, b;
    double best = 1e30;
    if (cudaEventCreate(&a) != cudaSuccess || cudaEventCreate(&b) != cudaSuccess) return -1;
    for (int r = 0; r < reps + 1; r++) {
        float ms = 0;
        cudaEventRecord(a, 0);
        if (fn(arg)) { best = -1; break; }
        cudaEventRecord(b, 0);
        cudaEventSynchronize(b);
        cudaEventElapsedTime(&ms, a, b);
        if (r > 0 && ms / 1e3 < best) best = ms / 1e3;
    }
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    return best;
}

typedef struct copy_arg { void *dst, *src; int ddev, sdev; size_t bytes; enum cudaMemcpyKind kind; } copy_arg;
static int do_peer(void *p) { copy_arg *c = p; return cudaMemcpyPeerAsync(c->dst, c->ddev, c->src, c->sdev, c->bytes, 0) != cudaSuccess; }
static int do_copy(void *p) { copy_arg *c = p; return cudaMemcpyAsync(c->dst, c->src, c->bytes, c->kind, 0) != cudaSuccess; }

int pt_probe_gpu(pt_topo *t, size_t bytes, int reps)
{
    if (bytes < 4096 || reps < 1) return pt_fail(PT_EINVAL, "GPU probe: %zu bytes x %d (need >= 4096 bytes, >= 1 rep)", bytes, reps);
    int ndev = 0, rc = PT_OK;
    cudaError_t e = cudaGetDeviceCount(&ndev);
    if (e != cudaSuccess || ndev == 0) {
        t->gpu_probe = PT_TOPO_GPU_PROBE_NOGPU;
        snprintf(t->gpu_probe_note, sizeof t->gpu_probe_note, "no CUDA GPU visible (%s)",
                 e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        return PT_OK;
    }
    int map[64];     /* CUDA device -> model GPU */
    void *buf[64] = { 0 };
    void *host = NULL;
    if (ndev > 64) ndev = 64;
    for (int d = 0; d < ndev; d++) {
        char bus[32];
        map[d] = -1;
        if (cudaDeviceGetPCIBusId(bus, sizeof bus, d) != cudaSuccess) continue;
        for (char *c = bus; *c; c++) *c = (char)tolower((unsigned char)*c);
        for (int g = 0; g < t->ngpus; g++)
            if (!strcmp(t->gpu[g].pci.busid, bus)) map[d] = g;
    }
    CK(cudaMallocHost(&host, bytes));
    memset(host, 0x3c, bytes);
    for (int d = 0; d < ndev; d++) { CK(cudaSetDevice(d)); CK(cudaMalloc(&buf[d], bytes)); }
    for (int d = 0; d < ndev; d++) {
        if (map[d] < 0) continue;
        CK(cudaSetDevice(d));
        copy_arg h2d = { buf[d], host, d, d, bytes, cudaMemcpyHostToDevice };
        copy_arg d2h = { host, buf[d], d, d, bytes, cudaMemcpyDeviceToHost };
        double th = best_of(reps, do_copy, &h2d), td = best_of(reps, do_copy, &d2h);
        if (th > 0) t->gpu[map[d]].h2d_gbps = bytes / th / 1e9;
        if (td > 0) t->gpu[map[d]].d2h_gbps = bytes / td / 1e9;
    }
    for (int p2p = 0; p2p < 2; p2p++)
        for (int s = 0; s < ndev; s++)
            for (int d = 0; d < ndev; d++) {
                if (s == d || map[s] < 0 || map[d] < 0) continue;
                int can = 0;
                cudaDeviceCanAccessPeer(&can, s, d);
                if (p2p && !can) continue;
                CK(cudaSetDevice(s));
                if (p2p) { e = cudaDeviceEnablePeerAccess(d, 0); if (e == cudaErrorPeerAccessAlreadyEnabled) cudaGetLastError(); }
                copy_arg c = { buf[d], buf[s], d, s, bytes, cudaMemcpyDefault };
                double ts = best_of(reps, do_peer, &c);
                if (p2p) { cudaDeviceDisablePeerAccess(d); cudaGetLastError(); }
                double *m = p2p ? t->gg_gbps : t->gg_gbps_nop2p;
                if (ts > 0) m[map[s] * t->ngpus + map[d]] = bytes / ts / 1e9;
            }
    /* Without P2P the "P2P on" matrix holds the staged numbers. */
    for (int i = 0; i < t->ngpus * t->ngpus; i++)
        if (t->gg_gbps[i] == 0) t->gg_gbps[i] = t->gg_gbps_nop2p[i];
    t->gpu_probe = PT_TOPO_GPU_PROBE_DONE;
    snprintf(t->gpu_probe_note, sizeof t->gpu_probe_note, "%d CUDA device(s), %zu-byte copies", ndev, bytes);
    pt_topo_update_nvlinks(t);
out:
    for (int d = 0; d < ndev; d++) if (buf[d]) { cudaSetDevice(d); cudaFree(buf[d]); }
    if (host) cudaFreeHost(host);
    return rc;
}
#endif
