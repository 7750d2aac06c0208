/* The CUDA backend's host-side logic, in plain C (no CUDA header): which
 * device a rank takes, the device allocator's pointer -> size table, the
 * versions line of the run header.  Compiled into the CUDA backend and,
 * source by source, into tests/unit/test_cuda_host (every build, no GPU
 * needed), so each rule here is tested on the CPU.  Errors go through
 * pt_fail (lib/core/core.h) with one line naming the value and what is
 * valid. */
#ifndef PTRAIN_CUDA_HOST_H
#define PTRAIN_CUDA_HOST_H
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- device choice: one device per process ---------------------------- */
/* This process's rank among the tasks of its node, from the first of
 * LOCAL_RANK (the SPANK plugin, torchrun), OMPI_COMM_WORLD_LOCAL_RANK
 * (Open MPI's mpirun), SLURM_LOCALID (srun), MPI_LOCALRANKID (MPICH's
 * Hydra) that is set and not empty; 0 when none is.  Writes *out and
 * returns PT_OK, or PT_EINVAL (one line naming the variable and its value)
 * when that variable is not an integer in [0, 2^20). */
int pt_cuda_local_rank(int *out);
/* The device index (of the ndev >= 1 the process sees) that local rank
 * `local` uses: local mod ndev.  The plugin's binding leaves each task one
 * device (CUDA_VISIBLE_DEVICES=i, ndev 1: device 0); under plain mpirun on
 * a node of ndev GPUs, task i takes GPU i, and more tasks than GPUs share
 * them round-robin (lib/comm then stages their collectives through host
 * memory: NCCL needs one device per rank).  -1 when ndev < 1 or local < 0. */
int pt_cuda_pick_device(int ndev, int local);

/* ---- the device allocator's sizes -------------------------------------- */
/* Device memory has no header the host can read, so the allocator keeps
 * each live block's size here: an open-addressing hash table (linear
 * probing, backward-shift deletion: Knuth, TAOCP vol. 3, 6.4, algorithm R)
 * from the block's address to its size in bytes.  A zeroed struct is an
 * empty table.  Not thread-safe (the allocator holds a lock). */
typedef struct pt_ptrmap {
    uintptr_t *key; /* [cap], 0 = free slot (no block starts at address 0) */
    size_t *val;    /* [cap] bytes */
    size_t cap;     /* a power of two, or 0 */
    size_t n;       /* live entries */
} pt_ptrmap;
/* Record block p (not NULL, not present) of `bytes` bytes.  PT_OK, or
 * PT_ENOMEM when the table cannot grow (it is unchanged then), PT_EINVAL
 * for p NULL or already present. */
int pt_ptrmap_put(pt_ptrmap *m, const void *p, size_t bytes);
/* Remove p and write its size to *bytes: 1, or 0 when p is not a block
 * of the table (nothing changes). */
int pt_ptrmap_take(pt_ptrmap *m, const void *p, size_t *bytes);
/* Free the table's arrays (its blocks are the caller's). */
void pt_ptrmap_clear(pt_ptrmap *m);

/* ---- versions ------------------------------------------------------------ */
/* What the run header reports about the GPU and the libraries.  Version
 * codes as the libraries return them (0 = absent): CUDA's 1000*major +
 * 10*minor (cudaRuntimeGetVersion, cudaDriverGetVersion), cuBLASLt's
 * 10000*major + 100*minor + patch (cublasLtGetVersion), cuDNN 9's
 * 10000*major + 100*minor + patch (cuDNN 8's 1000*major + 100*minor +
 * patch; cudnnGetVersion), NCCL's 10000*major + 100*minor + patch
 * (1000*major + 100*minor + patch before 2.9; ncclGetVersion). */
typedef struct pt_cuda_info {
    char gpu[256];       /* device name; "" = no device (why says so) */
    int sm;              /* compute capability 10*major + minor (90 = sm_90) */
    double mem_bytes;    /* device memory, bytes */
    char driver[32];     /* the kernel driver, "580.65.06"; "" = unknown */
    int driver_api;      /* cudaDriverGetVersion */
    int runtime;         /* cudaRuntimeGetVersion */
    long cublaslt;       /* cublasLtGetVersion */
    long cudnn;          /* cudnnGetVersion; 0 = not built */
    int nccl;            /* ncclGetVersion; 0 = not built */
    char why[160];       /* when gpu is "": why there is none */
} pt_cuda_info;
/* One line, e.g. "gpu NVIDIA H100 80GB HBM3 (sm_90, 79.2 GiB), driver
 * 580.65.06 (CUDA 13.0), CUDA runtime 13.0, cuBLASLt 13.1.0, cuDNN 9.19.0,
 * NCCL 2.28.9", into buf (len bytes, truncated); absent pieces say "none"
 * or "not built".  Returns the length the whole line needs (snprintf's
 * convention). */
size_t pt_cuda_info_format(const pt_cuda_info *v, char *buf, size_t len);
/* The version number in the text of /proc/driver/nvidia/version (its
 * first line: "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.65.06
 * ..." or "... Open Kernel Module for x86_64  580.65.06 ...": the first
 * word after "Kernel Module" made of digits and dots with at least one
 * dot) into out (len bytes).  1 when found, else 0 and out "". */
int pt_cuda_parse_driver(const char *text, char *out, size_t len);
/* "major.minor[.patch]" of a version code (see pt_cuda_info) into buf:
 * kind 'c' CUDA, 'b' cuBLASLt, 'd' cuDNN, 'n' NCCL.  "none" for 0. */
void pt_cuda_version_text(char kind, long code, char *buf, size_t len);

#ifdef __cplusplus
}
#endif
#endif
