/* SPDX-License-Identifier: MIT */
/* ptrain topology: GPU bandwidth probe (CUDA runtime, no NVML). */
#ifndef PTRAIN_TOPO_PROBE_GPU_H
#define PTRAIN_TOPO_PROBE_GPU_H

#include "topo/topo.h"

/* Measure, for every CUDA device matched to a model GPU by PCI bus id:
 * GPU i -> GPU j copies with cudaMemcpyPeer, peer access enabled
 * (gg_gbps) and disabled (gg_gbps_nop2p), and host <-> GPU copies from
 * pinned memory (h2d_gbps, d2h_gbps); GB/s = bytes / best time of `reps`
 * copies of `bytes` bytes (cudaEvent timing; nvbandwidth's and
 * p2pBandwidthLatencyTest's unidirectional definition).
 * Built without CUDA: sets gpu_probe = PT_TOPO_GPU_PROBE_NOCUDA and returns
 * PT_OK.  No visible GPU: PT_TOPO_GPU_PROBE_NOGPU, PT_OK.  Returns
 * PT_EINVAL for bad sizes, PT_EIO for a CUDA error (message names it). */
int pt_probe_gpu(pt_topo *t, size_t bytes, int reps);

#endif
