/* SPDX-License-Identifier: MIT */
/* ptrain topology: the node model (hwloc), link classes, islands, and the
 * persisted bandwidth results of the probes.
 *
 * The model is a plain C structure so that it can be built from the running
 * machine or an hwloc XML file (pt_topo_load_hwloc), or read back from a
 * cached JSON or XML file (pt_topo_load_file) without MPI, CUDA or any
 * measurement: this is what the SPANK plugin links.  Measurements that need
 * MPI live in topo/probe_mpi.h (linked only into ptrain-topo).
 *
 * Units everywhere: bandwidth in GB/s (1e9 bytes per second), latency in
 * microseconds (us), sizes in bytes.  In hwloc XML the bandwidths are kept as
 * user distances (HWLOC_DISTANCES_KIND_FROM_USER |
 * HWLOC_DISTANCES_KIND_MEANS_BANDWIDTH) whose integer values are MB/s
 * (1e6 bytes per second), because hwloc distances are 64-bit integers.
 *
 * Link classes follow `nvidia-smi topo -m` (NVIDIA driver documentation,
 * also NCCL's src/graph/topo.h PATH_* levels).
 */
#ifndef PTRAIN_TOPO_H
#define PTRAIN_TOPO_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Environment variable naming an hwloc XML (or ptrain JSON/XML cache) file
 * that replaces the running machine, for tests and for admins. */
#define PT_TOPO_ENV "PTRAIN_TOPOLOGY"

/* hwloc distances names used for persisted measurements (values in MB/s). */
#define PT_TOPO_DIST_GPU      "PtrainGPUBandwidth"      /* GPU PCI devices, P2P on */
#define PT_TOPO_DIST_GPU_NOP2P "PtrainGPUBandwidthNoP2P" /* GPU PCI devices, P2P off */
#define PT_TOPO_DIST_NUMA     "PtrainNUMABandwidth"     /* NUMA nodes: row = CPU side, column = memory */
/* Name hwloc's NVML backend gives its NVLink matrix (MB/s, sum over links). */
#define PT_TOPO_DIST_NVLINK   "NVLinkBandwidth"
/* Per-link NVLink bandwidth (one direction, GB/s) used to turn a recorded or
 * measured bandwidth into a link count NV# (NVLink 2, 3 and 4 are 25 GB/s). */
#define PT_TOPO_NVLINK_GBPS 25.0
/* Largest NVLink count a GPU pair may record (NV1..NV64; an H100 SXM has 18). */
#define PT_TOPO_MAX_NVLINKS 64

/* Path class between two PCI devices, ordered from far to near, as defined
 * by `nvidia-smi topo -m`. */
typedef enum pt_link_class {
    PT_LINK_UNKNOWN = 0,
    PT_LINK_SYS = 1,   /* PCIe + SMP interconnect between NUMA nodes (QPI/UPI/xGMI) */
    PT_LINK_NODE = 2,  /* PCIe + interconnect between host bridges inside a NUMA node */
    PT_LINK_PHB = 3,   /* PCIe + a PCIe host bridge (typically the CPU) */
    PT_LINK_PXB = 4,   /* multiple PCIe bridges, no host bridge */
    PT_LINK_PIX = 5,   /* at most a single PCIe bridge (one switch) */
    PT_LINK_NV = 6,    /* a bonded set of NVLinks (count in gg_nvlinks) */
    PT_LINK_SELF = 7,  /* "X": the device itself */
} pt_link_class;

/* Short name ("SYS", "NODE", "PHB", "PXB", "PIX", "NV", "X", "?"). */
const char *pt_link_class_name(pt_link_class c);

/* A NUMA node (hwloc NUMANode) with its memory and local CPUs. */
typedef struct pt_topo_numa {
    int os_index;          /* OS (physical) NUMA node number */
    int package;           /* logical index of its package, -1 if none */
    uint64_t memory;       /* local memory, bytes */
    int ncores, npus;      /* cores and PUs local to it */
    char cpus[128];        /* local PUs, OS indices as a list ("0-15,64-79") */
    double membw_gbps;     /* measured copy bandwidth of its own memory (GB/s), 0 = not measured */
} pt_topo_numa;

/* What every PCI device of the model carries. */
typedef struct pt_topo_pci {
    char busid[16];        /* "dddd:bb:dd.f" */
    unsigned vendor, device, class_id;
    double link_gbps;      /* PCIe link speed from hwloc (GB/s), 0 = unknown */
    int numa;              /* OS index of its NUMA node, -1 when not exactly one */
    char numas[32];        /* all local NUMA nodes as a list ("0" or "0-1") */
    char cpus[128];        /* local PUs, OS indices as a list */
    char cores[128];       /* local cores, hwloc logical indices (Slurm's gres.conf Cores=) */
} pt_topo_pci;

/* An NVIDIA GPU, found from its PCI device (class 0x0300/0x0302, vendor
 * 0x10de), never through NVML; its CUDA/NVML/OpenCL OS devices are aliases. */
typedef struct pt_topo_gpu {
    pt_topo_pci pci;
    char model[96];        /* "NVIDIA H100 80GB HBM3": an OS device's GPUModel (CUDA, NVML or
                              OpenCL, also one hwloc could not attach under the PCI device),
                              else the PCI ID database's device name ("NVIDIA GH100 [H100
                              SXM5 80GB]"), else "NVIDIA GPU [10de:DDDD]" */
    char osdevs[64];       /* OS device names, comma separated ("cuda0,nvml0") */
    int minor;             /* N of /dev/nvidiaN */
    double h2d_gbps, d2h_gbps; /* measured host<->GPU copy bandwidth (GB/s), 0 = not measured */
} pt_topo_gpu;

enum { PT_NIC_ETH = 0, PT_NIC_IB = 1, PT_NIC_ROCE = 2 };

/* A network adapter: InfiniBand/RoCE HCA (OpenFabrics OS device) or an
 * Ethernet port (Network OS device), one per PCI function. */
typedef struct pt_topo_nic {
    pt_topo_pci pci;
    char name[32];         /* "mlx5_0" for HCAs, else the netdev name */
    char netdev[32];       /* "ib0"/"eth0", "" if none */
    char model[96];        /* "MT28908 Family [ConnectX-6]": hwloc's PCIDevice name, else the
                            * PCI ID database's (pt_topo_pci_name), else "[15b3:101b]" */
    int kind;              /* PT_NIC_* */
} pt_topo_nic;

/* Collective kinds the MPI probe times one by one (the order and names of
 * lib/plan/cost.h's PT_KIND_*: allreduce, reduce_scatter, allgather,
 * broadcast, reduce, p2p). */
#define PT_TOPO_COLL_N 6
/* "allreduce", "reduce_scatter", "allgather", "broadcast", "reduce", "p2p"; "?" */
const char *pt_topo_coll_name(int k);

/* Link classes the MPI probe fits each collective kind on, apart from its
 * all-ranks fit: the ranks of one node (host memory, MPI's shared-memory
 * transport) and one rank per node (the network); lib/plan/cost.h's
 * PT_NET_NODE and PT_NET_INTER. */
enum { PT_TOPO_CLASS_NODE = 0, PT_TOPO_CLASS_NETWORK = 1, PT_TOPO_CLASS_N = 2 };
/* "node", "network" (the JSON keys); "?" */
const char *pt_topo_class_name(int c);

/* Each collective kind timed at two sizes over the ranks of one link
 * class and fitted to t(b) = steps_k(p) alpha + b busfactor_k(p) / busbw
 * (as pt_topo_net's all-ranks coll_* fields); nranks 0 = the class was
 * not measured (1 rank per node: no node class; 1 node: no network
 * class; a file from before: "collectives_by_class" is optional). */
typedef struct pt_topo_coll_fit {
    int nranks;                          /* p: ranks of the communicator timed (0 = not measured) */
    size_t bytes[2];                     /* the two buffer sizes, bytes */
    double time_us[PT_TOPO_COLL_N][2];   /* time per call at each size (us, slowest rank) */
    double lat_us[PT_TOPO_COLL_N];       /* alpha of one step (us), 0 = kind not fitted */
    double busbw[PT_TOPO_COLL_N];        /* bus bandwidth (GB/s), 0 = kind not fitted */
} pt_topo_coll_fit;

/* Results of the MPI probe (topo/probe_mpi.h); measured == 0 when absent. */
typedef struct pt_topo_net {
    int measured;
    int nranks, nnodes;
    size_t msg_bytes;         /* ping-pong bandwidth message size, bytes */
    double intra_lat_us, intra_gbps;  /* inside a node (0 = no pair there) */
    double inter_lat_us, inter_gbps;  /* across nodes (0 = single node) */
    size_t ar_bytes;          /* allreduce message size, bytes */
    double ar_time_us, ar_algbw, ar_busbw; /* nccl-tests definitions, GB/s */
    size_t fit_bytes;         /* the second allreduce size of the alpha-beta fit, bytes (0 = none) */
    double fit_time_us;       /* its time per call (us) */
    double ring_lat_us;       /* alpha of one ring step (us): the fit through the two allreduce
                               * sizes of t(n) = 2(p-1) alpha + 2(p-1)/p n beta (Thakur et al.
                               * 2005, sec. 4), or without it (ar_time_us - 2(p-1)/p ar_bytes /
                               * intra_gbps) / (2(p-1)); at least the ping-pong latency of the
                               * slowest pair measured; 0 = not measured (one rank, or a file
                               * from before: "ring_step_latency_us" is optional) */
    double ring_gbps;         /* 1/beta of that fit: the bandwidth of one rank in a ring step
                               * while every rank sends (GB/s); 0 = not measured */
    size_t pair_bytes;        /* the allreduce inside pairs of ranks, bytes (0 = not measured) */
    double pair_us;           /* its time (us) with every rank in a pair, communicating */
    double pair_busy_us;      /* its time (us) with half the pairs, the other ranks computing */
    /* each collective kind timed over all the probe's ranks at two sizes
     * (coll_bytes, the call's whole buffer) and fitted to t(b) =
     * steps_k(p) alpha + b busfactor_k(p) / busbw (nccl-tests' bus
     * bandwidth; lib/plan/cost.h's pt_cost_busfactor and
     * pt_cost_kind_steps): 0 = not measured (one rank, a file from before:
     * "collectives" is optional) */
    size_t coll_bytes[2];     /* the two buffer sizes, bytes */
    double coll_time_us[PT_TOPO_COLL_N][2]; /* time per call at each size (us, slowest rank) */
    double coll_lat_us[PT_TOPO_COLL_N];     /* alpha of one step (us) */
    double coll_busbw[PT_TOPO_COLL_N];      /* bus bandwidth (GB/s) */
    /* the same per link class: [PT_TOPO_CLASS_NODE] over the ranks of one
     * node (rank 0's; every node with >= 2 ranks runs its calls at the
     * same time), [PT_TOPO_CLASS_NETWORK] over the first rank of each
     * node; alpha at least that class's ping-pong latency */
    pt_topo_coll_fit coll_class[PT_TOPO_CLASS_N];
    char nodes[256];          /* node names, comma separated, in node order */
} pt_topo_net;

/* The node model.  Matrices are row-major; gpu x gpu is [ngpus, ngpus],
 * gpu x nic is [ngpus, nnics], numa x numa is [nnuma, nnuma]. */
typedef struct pt_topo {
    char hostname[64];
    char cpu_model[96];
    char source[256];       /* where it came from: "this machine" or a file name */
    int npackages, nnuma, ncores, npus;
    uint64_t os_memory;     /* total memory the OS reports (bytes), 0 = unknown (read from a file) */
    int ngpus, nnics;
    pt_topo_numa *numa;     /* [nnuma] */
    pt_topo_gpu *gpu;       /* [ngpus], ordered by PCI bus id (nvidia-smi order) */
    pt_topo_nic *nic;       /* [nnics], ordered by PCI bus id */
    unsigned char *gg_class; /* [ngpus, ngpus] pt_link_class */
    int *gg_nvlinks;        /* [ngpus, ngpus] NVLink count (0 = none) */
    unsigned char *gn_class; /* [ngpus, nnics] pt_link_class */
    unsigned char *nn_class; /* [nnics, nnics] pt_link_class */
    double *gg_gbps;        /* [ngpus, ngpus] GPU i -> GPU j copy bandwidth, P2P on (GB/s), 0 = none */
    double *gg_gbps_nop2p;  /* [ngpus, ngpus] same with P2P off (GB/s), 0 = none */
    double *numa_gbps;      /* [nnuma, nnuma] CPUs of i copying memory of j (GB/s), 0 = none */
    int gpu_probe;          /* PT_TOPO_GPU_PROBE_* */
    char gpu_probe_note[160]; /* one line on why the GPU probe is absent */
    pt_topo_net net;
    double gemm_gflops;     /* measured fp32 sgemm rate of one core (GFLOP/s; ptrain-topo --probe,
                               JSON "gemm_gflops", optional), 0 = not measured */
    double gemm_gflops_bf16; /* measured bf16 GEMM rate of one core (GFLOP/s; ptrain-topo --probe through
                               pt_gemm_bf16, at the size of gemm_gflops; JSON "gemm_gflops_bf16",
                               optional), 0 = not measured */
    int cpu_bf16_known;     /* 1: cpu_bf16 holds the CPU's bf16 class (this machine's cpuid when built from
                               hwloc here; a file's "cpu_bf16" / hwloc info PtrainCpuBf16), 0: unknown */
    int cpu_bf16;           /* PT_BF16_ISA_* (core/cpu.h): none, avx512_bf16, amx_bf16 */
    /* Hockney fit of one core's sgemm rate over the rows n of a GEMM:
     * rate(n) = gemm_rinf_gflops n / (n + gemm_n_half) (pt_topo_gemm_fit;
     * JSON "gemm_fit": {"r_inf_gflops", "n_half_rows"}, optional);
     * 0 = not measured */
    double gemm_rinf_gflops; /* r_inf (GFLOP/s) */
    double gemm_n_half;      /* n_1/2 (rows) */
    void *hw;               /* hwloc_topology_t when built from hwloc, else NULL */
} pt_topo;

enum {
    PT_TOPO_GPU_PROBE_NONE = 0,     /* not run */
    PT_TOPO_GPU_PROBE_DONE = 1,     /* matrices measured */
    PT_TOPO_GPU_PROBE_NOCUDA = -1,  /* built without CUDA */
    PT_TOPO_GPU_PROBE_NOGPU = -2,   /* CUDA present, no GPU visible */
};

/* Build the model with hwloc, keeping PCI and OS devices
 * (HWLOC_TYPE_FILTER_KEEP_IMPORTANT).  `xmlfile` NULL means: the file named
 * by $PTRAIN_TOPOLOGY if set, else the running machine.  Persisted
 * measurements found in the XML (PtrainGPUBandwidth, PtrainNUMABandwidth,
 * NVLinkBandwidth distances, Ptrain* info attributes) are read back.
 * A file is imported by hwloc first in a forked child process (hwloc 2.9
 * crashes on some malformed XML), so a crash, abort or hang of hwloc's
 * import is the error "hwloc cannot import this XML (...)", never a crash
 * of the caller.
 * Returns PT_OK, PT_EIO (unreadable file), PT_EFORMAT (not hwloc XML, or
 * XML hwloc cannot import), PT_ENOMEM.  Free with pt_topo_free(). */
int pt_topo_load_hwloc(pt_topo *t, const char *xmlfile);

/* Load a cached model: ptrain JSON (first non-blank byte '{') or hwloc XML
 * ('<'); the file is read only up to that byte (at most 64 KiB of blanks)
 * before the format is known, so another file is refused without being
 * read whole.  No measurement, no MPI.  Returns PT_OK, PT_EIO, PT_EFORMAT (with a
 * one-line message naming the file and what is wrong), PT_ENOMEM. */
int pt_topo_load_file(pt_topo *t, const char *path);

/* Release everything held by `t` (safe on a zeroed or partly built model). */
void pt_topo_free(pt_topo *t);

/* Device name of PCI vendor:device from the PCI ID database (the pci.ids
 * file of Debian's `pci.ids` package: $PTRAIN_PCI_IDS, else
 * /usr/share/misc/pci.ids, /usr/share/hwdata/pci.ids) into name [len]
 * (e.g. 10de:2330 -> "GH100 [H100 SXM5 80GB]").  Returns 1 when found, 0
 * otherwise (no database, or no such id). */
int pt_topo_pci_name(unsigned vendor, unsigned device, char *name, size_t len);

/* Serialize to JSON (schema "ptrain-topo/1", see ptrain-topo(1)).  `*out` is
 * malloc'ed, NUL terminated.  Returns PT_OK or PT_ENOMEM. */
int pt_topo_to_json(const pt_topo *t, char **out);
/* Parse JSON made by pt_topo_to_json(); `what` names the input in errors.
 * Returns PT_OK, PT_EFORMAT, PT_ENOMEM. */
int pt_topo_from_json(pt_topo *t, const char *text, const char *what);

/* Export as hwloc v2 XML carrying the measured bandwidths as user distances
 * (MB/s) and the other results as Ptrain* info attributes.  Needs a model
 * built from hwloc (t->hw): PT_EUNSUPP otherwise.  `*out` is malloc'ed. */
int pt_topo_to_xml(const pt_topo *t, char **out);

/* Save as JSON, or as XML when `path` ends in ".xml", atomically (temporary
 * file, fsync, rename).  Returns PT_OK, PT_EIO, PT_EUNSUPP, PT_ENOMEM. */
int pt_topo_save(const pt_topo *t, const char *path);

/* Recompute NV# classes from gg_gbps where no NVLink count was recorded: a
 * pair whose P2P bandwidth exceeds 1.5x what its PCIe links allow is NVLink
 * with round(GB/s / PT_TOPO_NVLINK_GBPS) links (at least 1).  Called after
 * loading and after the GPU probe. */
void pt_topo_update_nvlinks(pt_topo *t);

/* ---- bandwidth between devices and islands ------------------------------ */
enum { PT_DEV_GPU = 0, PT_DEV_NUMA = 1 };
enum { PT_BW_ESTIMATED = 0, PT_BW_MEASURED = 1 };

/* Bandwidth (GB/s) of the link between devices i and j of `kind`, taken as
 * the minimum of both directions.  Measured (or recorded) values win; else an
 * estimate from the link class: NV# = #*25, PIX/PXB = the slower PCIe link,
 * PHB = 0.8x, NODE = 0.6x, SYS = 0.4x of it (PCIe unknown: 15.75 GB/s, Gen3
 * x16); NUMA nodes: 1.0 inside a package, 0.5 across (relative units).
 * `*source` (may be NULL) gets PT_BW_MEASURED or PT_BW_ESTIMATED.
 * Returns 0 for bad indices. */
double pt_topo_link_gbps(const pt_topo *t, int kind, int i, int j, int *source);

/* Devices grouped into islands of high mutual bandwidth. */
typedef struct pt_topo_islands {
    int kind;              /* PT_DEV_GPU, or PT_DEV_NUMA on a node without GPUs */
    int ndev;              /* number of devices */
    int nislands;
    int island_of[64];     /* [ndev] island index of each device */
    double threshold_gbps; /* links >= this are "inside an island" */
} pt_topo_islands;

/* Islands: GPUs if any, else NUMA nodes.  Pairwise bandwidths (see
 * pt_topo_link_gbps) are sorted; when the fastest is more than 1.5x the
 * slowest, the threshold is the upper side of the largest ratio gap between
 * consecutive values, else everything is one island.  Devices are then
 * grouped greedily in index order into cliques whose every pair is at or
 * above the threshold (deterministic, so every node computes the same
 * islands).  Returns PT_OK, or PT_EINVAL when there are more than 64 devices
 * or none. */
int pt_topo_islands_find(const pt_topo *t, pt_topo_islands *out);

/* The devices of the islands' kind (GPUs when the model has any, else
 * NUMA nodes) in island order: the islands of pt_topo_islands_find in the
 * order of their lowest device, each island's devices ascending (e.g.
 * NVLink pairs {0,4} {1,5} {2,6} {3,7} give 0,4,1,5,2,6,3,7).  The order in
 * which a node's tasks are laid on its devices, so that consecutive ranks
 * fill an island first: pt_topo_plan_hw's islands and rates and the SPANK
 * plugin's binding (task i on device order[i]) share it.  Writes the
 * devices into order [cap] and returns their count (identity order when
 * the islands cannot be found: more than 64 devices), -1 when cap is too
 * small or the model has no device. */
int pt_topo_device_order(const pt_topo *t, int *order, int cap);

/* The slowest link inside a set of `n` devices of `kind` (indices `dev`):
 * its bandwidth in GB/s (minimum over all pairs; for one device, +inf is not
 * used: returns 0 and *a = *b = dev[0]).  `a`, `b`, `source` may be NULL.
 * Returns the bandwidth, or -1 with pt_fail(PT_EINVAL) for a bad index. */
double pt_topo_slowest_link(const pt_topo *t, int kind, const int *dev, int n,
                            int *a, int *b, int *source);

/* ---- host memory probe (no MPI) ------------------------------------------ */
/* Measure the STREAM copy bandwidth (Bytes = 2 * 8 * N per pass, as STREAM
 * counts copy; McCalpin, "STREAM", 1995) of each NUMA node's CPUs over
 * memory bound to each NUMA node (hwloc_alloc_membind), best of `reps`
 * passes over arrays of `bytes` bytes each, one OpenMP thread per local core
 * bound with hwloc_set_cpubind.  Fills numa_gbps and numa[].membw_gbps
 * (diagonal).  Needs a model of this machine: PT_EUNSUPP for one loaded from
 * a file.  Returns PT_OK, PT_EINVAL (bytes < 1 MiB or reps < 1), PT_ENOMEM. */
int pt_topo_probe_membw(pt_topo *t, size_t bytes, int reps);

/* ---- warnings -------------------------------------------------------------- */
/* Append one line per warning (degraded PCIe link: slower than the fastest
 * device with the same PCI id; GPU whose every NIC path is SYS; NUMA nodes
 * whose memory or core count differ by more than 20% from the largest, or
 * GPUs spread unevenly over NUMA nodes; measured memory bandwidth more than
 * 25% below the best NUMA node) to `buf` (size `len`, NUL terminated).
 * Returns the number of warnings. */
int pt_topo_warnings(const pt_topo *t, char *buf, size_t len);

/* Slurm gres.conf lines, one per GPU:
 * "Name=gpu File=/dev/nvidiaN Cores=<logical cores> [Links=...]" (Links=
 * only when NVLink counts are known: -1 for the GPU itself, as in
 * gres.conf(5)).  Written to `buf` (size `len`); returns the length needed. */
size_t pt_topo_gres(const pt_topo *t, char *buf, size_t len);

#ifdef __cplusplus
}
#endif
#endif
