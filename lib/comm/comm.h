/* SPDX-License-Identifier: MIT */
/* Collectives and point-to-point on a process group, with byte counters.
 *
 * A pt_comm wraps one MPI communicator (a dp, tp or world group).  Every
 * call counts, per collective kind, the number of calls, the payload bytes
 * handed to it and the bytes this rank sends under the bandwidth-optimal
 * (ring) algorithm that nccl-tests uses to define bus bandwidth:
 *
 *   allreduce       n bytes in/out          sends 2(p-1)/p * n
 *   reduce_scatter  n bytes in, n/p out     sends  (p-1)/p * n
 *   allgather       n/p in, n bytes out     sends  (p-1)/p * n
 *   broadcast       n bytes                 sends  (p-1)/p * n  (pipelined)
 *   reduce          n bytes in, n at root   sends  (p-1)/p * n  (pipelined)
 *   send / recv     n bytes                 sends  n / 0
 *
 * Summed over the p ranks of a group, an allreduce of S bytes therefore
 * counts 2(p-1)S, which is the unit of the Colossal-AI paper's Table 1
 * (Bian et al. 2021, "Colossal-AI", section 3) and lets tests compare the
 * counters with the per-layer formulas exactly.  The counters model the
 * algorithm; what MPI actually does on the wire may differ.
 *
 * A group of size 1 performs no communication and counts nothing.
 * All functions return PT_OK or PT_ECOMM (message via pt_errmsg()).
 *
 * Element types.  The float functions move fp32; the _t variants take a
 * pt_dtype (lib/core: fp32, bf16, fp64) and count n times its size, so a
 * bf16 tensor moves and counts 2 bytes per element.  A bf16 sum adds
 * each pair of elements in fp32 and rounds the result to bf16 (a user
 * MPI_Op on 16-bit elements; a ring over p ranks rounds p-1 times): the
 * tensor-parallel and pipeline traffic of bf16 activations.  Gradients
 * are reduced in fp32 (the float functions).
 *
 * Device buffers.  After pt_comm_device_enable (collective over the group)
 * every call below (the _t variants too) also takes buffers in GPU memory
 * (lib/backend/cuda's pt_cuda_mem): a call whose buffer is device memory
 * runs on the group's device path, one on host memory stays on MPI, so the host scalars
 * (losses, norms) and the device tensors share one API.  Each kind of
 * buffer has its transport, picked once per group (lib/comm/comm_priv.h:
 * mpi_host, mpi_staged, nccl), not per call.  The device path
 * is chosen per group: NCCL (NVIDIA Collective Communications Library,
 * the same collectives on the communication stream) when every member has
 * a GPU of its own and the build has NCCL; otherwise staging through host
 * memory over the same MPI calls (several ranks on one GPU, e.g. a
 * one-GPU test machine: NCCL refuses two ranks on one device).  Both count
 * bytes exactly as the host path does.  Order: a device call runs after
 * the work already queued on the compute stream, and the compute stream's
 * later work waits for it (unless pt_comm_device_overlap).
 */
#ifndef PTRAIN_COMM_H
#define PTRAIN_COMM_H
#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "core/core.h"

enum pt_coll {
    PT_COLL_ALLREDUCE,
    PT_COLL_REDUCE_SCATTER,
    PT_COLL_ALLGATHER,
    PT_COLL_BROADCAST,
    PT_COLL_REDUCE,
    PT_COLL_SEND,
    PT_COLL_RECV,
    PT_COLL_N
};

typedef struct pt_comm_stats {
    uint64_t calls[PT_COLL_N];
    uint64_t payload_bytes[PT_COLL_N]; /* n as defined above */
    uint64_t sent_bytes[PT_COLL_N];    /* modelled bytes this rank sends */
} pt_comm_stats;

/* Bytes per MPI call of a large allreduce, reduce-scatter or reduce: a
 * longer one is split into calls of at most this much, in order.  Open
 * MPI's allreduce, reduce-scatter and reduce allocate a temporary buffer
 * of the message's size on every call, and glibc serves one of 32 MiB or
 * more (M_MMAP_THRESHOLD's ceiling) with a fresh mmap, whose page faults
 * every call pays: bench/bench-coll measured an allreduce of 51 MiB at 160
 * ms in one call and 12 ms with the threshold raised, a reduce 280 ms
 * against 12 ms at 16 MiB (Open MPI 4.1.4, 2 ranks, shared memory).  Buckets
 * of a few MiB are what PyTorch DDP (25 MiB) and NCCL's pipelining do too.
 * The counters count the logical call: one call of the whole n. */
#define PT_COMM_CHUNK_BYTES ((size_t)8 << 20)

typedef struct pt_comm {
    MPI_Comm comm;
    int rank, size;
    char name[16];   /* "world", "dp", "tp", ... */
    int owned;       /* 1 if pt_comm_free must MPI_Comm_free it */
    size_t chunk_bytes; /* bytes per MPI call of a chunked collective; 0 (what
                         * wrap and split set) = PT_COMM_CHUNK_BYTES; tests
                         * set a small one to cross chunk edges cheaply */
    pt_comm_stats stats;
    struct pt_comm_dev *dev; /* the device path (pt_comm_device_enable); NULL: host buffers only */
} pt_comm;

/* Wrap an existing communicator (not freed by pt_comm_free). */
int pt_comm_wrap(pt_comm *c, MPI_Comm comm, const char *name);
/* MPI_Comm_split(parent, color, key) into a new owned group. */
int pt_comm_split(pt_comm *c, const pt_comm *parent, int color, int key, const char *name);
void pt_comm_free(pt_comm *c);

/* The nodes under group c: ranks that share memory (MPI-3
 * MPI_Comm_split_type with MPI_COMM_TYPE_SHARED) and, when every rank has
 * $SLURM_NODEID, the same node id (the fake nodes of a test Slurm share
 * one host), form one node, nodes ordered by their lowest rank in c.  Writes the node count to *nnodes, the
 * ranks of each node into tasks_per_node[0 .. *nnodes - 1] (room for
 * c->size entries) and, when node is not NULL, this rank's node index.
 * Collective over c; every rank gets the same answer (the job geometry the
 * planner needs under plain mpirun, lib/plan/resolve.h).  No bytes are
 * counted: it is set-up, not training traffic.  PT_OK or PT_ECOMM. */
int pt_comm_nodes(const pt_comm *c, int *tasks_per_node, int *nnodes, int *node);

/* In-place sum / max over the group of n floats. */
int pt_allreduce_sum(pt_comm *c, float *buf, size_t n);
/* The same for n elements of type t (PT_EINVAL for another value). */
int pt_allreduce_sum_t(pt_comm *c, void *buf, size_t n, pt_dtype t);
int pt_allreduce_max(pt_comm *c, float *buf, size_t n);
/* In-place sum of n doubles (losses, norms; counted like floats of 8 bytes). */
int pt_allreduce_sum_f64(pt_comm *c, double *buf, size_t n);
/* in [n] -> out [n/p]: rank r receives the sum of block r.  n % p == 0
 * (else PT_EINVAL); in and out must not overlap.  Runs MPI_Reduce_scatter
 * with p equal counts (ZeRO's gradient shards, Rajbhandari et al. 2020,
 * sec. 5): Open MPI's MPI_Reduce_scatter_block defaults to a reduce to one
 * root plus a linear scatter (open-mpi/ompi#5156), 6-11x slower from
 * 4 MiB up (bench/bench-coll measures both); in chunks (PT_COMM_CHUNK_BYTES,
 * staged through a buffer of one chunk that is malloc'd per call: PT_ENOMEM
 * when it cannot be had). */
int pt_reduce_scatter_sum(pt_comm *c, const float *in, float *out, size_t n);
int pt_reduce_scatter_sum_t(pt_comm *c, const void *in, void *out, size_t n, pt_dtype t);
/* in [n/p] -> out [n] concatenated in rank order. n % p == 0. */
int pt_allgather(pt_comm *c, const float *in, float *out, size_t n);
int pt_allgather_t(pt_comm *c, const void *in, void *out, size_t n, pt_dtype t);
/* n floats from `root` to all. */
int pt_broadcast(pt_comm *c, float *buf, size_t n, int root);
int pt_broadcast_t(pt_comm *c, void *buf, size_t n, int root, pt_dtype t);
/* In-place sum of n floats to `root` (other ranks' buf is left unchanged). */
int pt_reduce_sum(pt_comm *c, float *buf, size_t n, int root);
int pt_reduce_sum_t(pt_comm *c, void *buf, size_t n, int root, pt_dtype t);
int pt_send(pt_comm *c, const float *buf, size_t n, int dst, int tag);
int pt_send_t(pt_comm *c, const void *buf, size_t n, int dst, int tag, pt_dtype t);
/* Send n floats to dst while receiving n floats from src (counted as a
 * send and a recv); sbuf and rbuf must not overlap. */
int pt_sendrecv(pt_comm *c, const float *sbuf, int dst, float *rbuf, int src, size_t n, int tag);
int pt_sendrecv_t(pt_comm *c, const void *sbuf, int dst, void *rbuf, int src, size_t n, int tag, pt_dtype t);
int pt_recv(pt_comm *c, float *buf, size_t n, int src, int tag);
int pt_recv_t(pt_comm *c, void *buf, size_t n, int src, int tag, pt_dtype t);
int pt_barrier(pt_comm *c);

/* ---- device buffers ---- */
enum pt_comm_device_mode {
    PT_COMM_DEV_AUTO = 0,  /* NCCL when every member has its own GPU and the build has NCCL, else staged */
    PT_COMM_DEV_NCCL = 1,  /* NCCL or an error */
    PT_COMM_DEV_STAGED = 2 /* through host memory over MPI, whatever the GPUs */
};
/* Give group c a device path (see the top of this file); collective over
 * c, every member with the same mode.  Each member's device is
 * lib/backend/cuda's (pt_cuda_init runs here); the members compare their
 * GPUs' UUIDs (MPI_Allgather) and all choose the same path.  Groups with
 * the same members (the same ranks in the same order) share one NCCL
 * communicator: c takes the one such a group has when every member holds
 * it, else a new one is bootstrapped over c: rank 0's ncclGetUniqueId,
 * MPI_Bcast, ncclCommInitRank (NCCL's documented MPI example).  In mode
 * AUTO a group whose NCCL set-up fails everywhere falls back to staging
 * (with a warning).  PT_OK (also when already enabled), PT_EUNSUPP (no
 * device or no CUDA build on some member; mode NCCL where two members
 * share a GPU or NCCL is not built), PT_ECOMM.  Every member returns the
 * same status. */
int pt_comm_device_enable(pt_comm *c, int mode);
/* Release the device path (staging memory; c's reference to the NCCL
 * communicator, destroyed with the last group sharing it); c keeps
 * working on host buffers.  pt_comm_free calls it.  Not collective. */
void pt_comm_device_disable(pt_comm *c);
/* "nccl", "staged" or "host" (not enabled). */
const char *pt_comm_device_path(const pt_comm *c);
/* Group calls (ncclGroupStart / ncclGroupEnd): between them the device
 * sends and receives (pt_send, pt_recv, pt_sendrecv on device buffers) are
 * only queued and all run at pt_comm_group_end, so a rank may post sends
 * and receives to several peers in any order without deadlock; staged, they
 * become MPI_Isend / MPI_Irecv and one MPI_Waitall.  Collectives inside a
 * group run at once when staged (NCCL fuses them).  Groups do not nest.
 * PT_OK, PT_EINVAL (nested, or end without start), PT_ECOMM. */
int pt_comm_group_start(pt_comm *c);
int pt_comm_group_end(pt_comm *c);
/* on 1: device collectives no longer make the compute stream wait for them
 * (a gradient bucket reduced while the backward goes on); on 0 (the
 * default): they do.  pt_comm_device_wait makes the compute stream wait
 * for every device call issued so far.  PT_OK, PT_EINVAL (not enabled),
 * PT_EIO. */
int pt_comm_device_overlap(pt_comm *c, int on);
int pt_comm_device_wait(pt_comm *c);

/* Total modelled bytes sent by this rank over all kinds. */
uint64_t pt_comm_sent_total(const pt_comm *c);
void pt_comm_reset_stats(pt_comm *c);
const char *pt_coll_name(enum pt_coll k);

#endif
