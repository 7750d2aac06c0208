/* SPDX-License-Identifier: MIT */
/* The node model as the planner sees it: see topo_plan.h. */
#include "topo/topo_plan.h"
#include "core/core.h"
#include "core/cpu.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "NVIDIA H100 80GB HBM3" -> 80e9; 0 when the name carries no "<n>GB". */
static double gpu_mem_from_model(const char *model)
{
    for (const char *s = model; *s; s++) {
        if (!isdigit((unsigned char)*s) || (s > model && isdigit((unsigned char)s[-1]))) continue;
        char *end;
        long v = strtol(s, &end, 10);
        if (v > 0 && v < 100000 && (end[0] == 'G' || end[0] == 'g') && (end[1] == 'B' || end[1] == 'b'))
            return (double)v * 1e9;
    }
    return 0;
}

/* Peak rates of one GPU from NVIDIA's data sheets (GFLOP/s): fp32 on the
 * CUDA cores, and dense bf16 on the tensor cores (the sheets print bf16
 * with 2:4 sparsity, twice the dense rate).  One row per board, so both
 * rates of a GPU come from the same board: an H100 or H200 is told apart
 * by its form factor (SXM, NVL, PCIe), whose clocks and SM counts differ.
 * Sources: NVIDIA H100 Tensor Core GPU data sheet (H100 SXM: fp32 67
 * TFLOP/s, bf16 1979 sparse; H100 NVL: 60, 1671; H100 PCIe: 51 -- 51.2 in
 * the Hopper architecture whitepaper --, 1513), NVIDIA H200 data sheet
 * (H200 SXM: 67, 1979; H200 NVL: 60, 1671), NVIDIA A100 data sheet (19.5,
 * 312 dense), NVIDIA L40S data sheet (91.6, 733 sparse), NVIDIA V100 data
 * sheet (SXM2 15.7; no bf16).  A GPU not in the table: the A100's fp32
 * peak and no bf16 rate. */
typedef struct gpu_peak {
    const char *board;   /* "H100 SXM" */
    double fp32, bf16;   /* GFLOP/s; bf16 0: none */
} gpu_peak;

static gpu_peak gpu_peak_of(const char *mdl)
{
    static const gpu_peak h200_sxm = {"H200 SXM", 67000, 989000}, h200_nvl = {"H200 NVL", 60000, 835000},
                          h100_sxm = {"H100 SXM", 67000, 989000}, h100_nvl = {"H100 NVL", 60000, 835000},
                          h100_pcie = {"H100 PCIe", 51200, 756000}, a100 = {"A100", 19500, 312000},
                          l40s = {"L40S", 91600, 362000}, v100 = {"V100", 15700, 0},
                          other = {NULL, 19500, 0};
    /* GH200's Hopper is the H200 SXM's part; an H100 named by NVML ("NVIDIA
     * H100 80GB HBM3") or the PCI ID database ("GH100 [H100 SXM5 80GB]")
     * is the SXM board when it says SXM or HBM3 (the PCIe board has HBM2e,
     * the NVL board says NVL), else the PCIe one, the lowest */
    if (strstr(mdl, "H200")) return strstr(mdl, "NVL") ? h200_nvl : h200_sxm;
    if (strstr(mdl, "H100")) {
        if (strstr(mdl, "NVL")) return h100_nvl;
        return strstr(mdl, "SXM") || strstr(mdl, "HBM3") ? h100_sxm : h100_pcie;
    }
    if (strstr(mdl, "A100")) return a100;
    if (strstr(mdl, "L40S")) return l40s;
    if (strstr(mdl, "V100")) return v100;
    return other;
}

/* What the phases of pt_topo_plan_hw share: the model, the request, the
 * outputs, and how the ranks spread over the node's devices. */
typedef struct plan_ctx {
    const pt_topo *t;
    int tpn;                       /* tasks per node */
    const pt_topo_hw_override *ov; /* never NULL */
    pt_hw *hw;
    char *note;
    size_t note_len;
    int gpu;                       /* the node has GPUs: the devices are GPUs, else NUMA nodes */
    int ndev, kind;                /* devices of the node and their PT_DEV_* */
    int used, per_dev;             /* devices the ranks use, ranks per device */
    int order[64];                 /* the devices in island order */
    int isize;                     /* devices per island when every island has the same, else 0 */
} plan_ctx;

/* The devices in island order and the islands' size in ranks along it
 * (*island_ranks; 0 when the islands differ in size or the node is one). */
static void plan_islands(plan_ctx *p, int *island_ranks)
{
    const pt_topo *t = p->t;
    const int ndev = p->ndev, used = p->used;
    pt_topo_islands isl;
    int have_isl = pt_topo_islands_find(t, &isl) == 0;
    /* the devices in island order (pt_topo_device_order: consecutive
     * ranks fill an island first, as the plugin binds them), and the
     * islands' size along it when every island has the same */
    int nord = ndev <= 64 ? pt_topo_device_order(t, p->order, 64) : -1;
    if (nord != ndev)
        for (int d = 0; d < ndev && d < 64; d++) p->order[d] = d;
    p->isize = 0;
    if (have_isl && isl.nislands > 1 && ndev <= 64 && nord == ndev) {
        int size = 0, ok = 1;
        for (int d = 0; d < ndev && ok; d++) {
            int len = 1;
            while (d + len < ndev && isl.island_of[p->order[d + len]] == isl.island_of[p->order[d]]) len++;
            if (size && len != size) ok = 0;
            size = len;
            d += len - 1;
        }
        if (ok && size < used) p->isize = size;
    }
    if (p->isize && p->tpn % ndev == 0) *island_ranks = p->isize * p->per_dev;
    else if (p->isize && p->tpn < ndev) *island_ranks = p->isize;
}

/* The island and node bandwidths inside the node: the slowest GPU links,
 * or for CPU nodes and ranks sharing a device memory copies through MPI. */
static void plan_intra(const plan_ctx *p, int island_ranks)
{
    const pt_topo *t = p->t;
    const int tpn = p->tpn, gpu = p->gpu, used = p->used;
    pt_hw *hw = p->hw;
    /* island and node links between devices */
    double isl_gbps = 0, node_gbps = 0;
    int isl_src = PT_BW_ESTIMATED, node_src = PT_BW_ESTIMATED;
    if (gpu && used > 1) {
        int dev[64];
        for (int d = 0; d < used && d < 64; d++) dev[d] = p->order[d];
        node_gbps = pt_topo_slowest_link(t, p->kind, dev, used < 64 ? used : 64, NULL, NULL, &node_src);
        int width = island_ranks ? p->isize : used;
        isl_gbps = pt_topo_slowest_link(t, p->kind, dev, width < 64 ? width : 64, NULL, NULL, &isl_src);
        if (isl_gbps < node_gbps) isl_gbps = node_gbps;
    }
    /* CPU nodes and ranks sharing a device: memory copies through MPI */
    double cpu_isl = 0, cpu_node = 0;
    const char *cpu_src = "estimate";
    if (t->net.measured && t->net.intra_gbps > 0) {
        cpu_isl = cpu_node = t->net.intra_gbps;
        cpu_src = "measured (MPI ping-pong inside a node)";
    } else {
        double diag = INFINITY, cross = INFINITY;
        for (int i = 0; i < t->nnuma; i++)
            for (int j = 0; j < t->nnuma; j++) {
                double v = t->numa_gbps ? t->numa_gbps[i * t->nnuma + j] : 0;
                if (i == j && t->numa[i].membw_gbps > 0) v = t->numa[i].membw_gbps;
                if (v <= 0) continue;
                if (i == j && v < diag) diag = v;
                if (i != j && v < cross) cross = v;
            }
        int per_numa = (tpn + t->nnuma - 1) / t->nnuma;
        if (isfinite(diag)) {
            cpu_isl = diag / per_numa;
            cpu_node = isfinite(cross) ? cross / per_numa : cpu_isl;
            cpu_src = "measured STREAM copy bandwidth / tasks per NUMA node";
        } else {
            cpu_isl = 10.0;
            cpu_node = 5.0;
            cpu_src = "estimate (no measurement)";
        }
    }
    if (t->nnuma == 1) cpu_node = cpu_isl; /* one NUMA node: no slower link inside */
    if (!gpu && island_ranks == 0 && t->nnuma > 1 && tpn > 1) cpu_isl = cpu_node; /* one island over NUMA nodes */
    if (!gpu || used <= 1) {
        hw->gbps[PT_NET_ISLAND] = cpu_isl;
        hw->gbps[PT_NET_NODE] = cpu_node;
        pt_notef(p->note, p->note_len, "intra-node: island %.3g GB/s, node %.3g GB/s per rank, %s", cpu_isl,
                 cpu_node, cpu_src);
    } else {
        hw->gbps[PT_NET_ISLAND] = isl_gbps;
        hw->gbps[PT_NET_NODE] = node_gbps;
        pt_notef(p->note, p->note_len, "intra-node: island %.3g GB/s (%s), node %.3g GB/s (%s), slowest GPU "
                 "links%s", isl_gbps, isl_src == PT_BW_MEASURED ? "measured" : "estimate from the link class",
                 node_gbps, node_src == PT_BW_MEASURED ? "measured" : "estimate from the link class",
                 p->per_dev > 1 ? "; ranks sharing a GPU count as one device" : "");
    }
    if (hw->gbps[PT_NET_NODE] <= 0) hw->gbps[PT_NET_NODE] = hw->gbps[PT_NET_ISLAND];
}

/* The network's bandwidth per rank: per node, shared by the node's tasks. */
static void plan_network(const plan_ctx *p)
{
    const pt_topo *t = p->t;
    double inter;
    const char *inter_src;
    if (p->ov->inter_gbps > 0) {
        inter = p->ov->inter_gbps;
        inter_src = "override";
    } else if (t->net.measured && t->net.inter_gbps > 0) {
        inter = t->net.inter_gbps;
        inter_src = "measured (MPI ping-pong between nodes)";
    } else {
        int fast = 0;
        for (int i = 0; i < t->nnics; i++)
            if (t->nic[i].kind == PT_NIC_IB || t->nic[i].kind == PT_NIC_ROCE) fast++;
        inter = fast ? 12.5 * fast : 1.25;
        inter_src = fast ? "estimate: 12.5 GB/s per InfiniBand/RoCE adapter" : "estimate: 10 Gb/s Ethernet";
    }
    p->hw->gbps[PT_NET_INTER] = inter / p->tpn;
    pt_notef(p->note, p->note_len, "network: %.3g GB/s per node (%s), %.3g GB/s per rank", inter, inter_src,
             p->hw->gbps[PT_NET_INTER]);
}

/* Each link class's latency (ping-pong, then the probe's ring step), and
 * the ring step's bandwidth as a bound on the links the ring spanned. */
static void plan_latency(const plan_ctx *p)
{
    const pt_topo *t = p->t;
    pt_hw *hw = p->hw;
    if (t->net.measured && t->net.intra_lat_us > 0) {
        hw->lat_s[PT_NET_ISLAND] = hw->lat_s[PT_NET_NODE] = t->net.intra_lat_us * 1e-6;
    } else {
        hw->lat_s[PT_NET_ISLAND] = 2e-6;
        hw->lat_s[PT_NET_NODE] = 3e-6;
    }
    hw->lat_s[PT_NET_INTER] = t->net.measured && t->net.inter_lat_us > 0 ? t->net.inter_lat_us * 1e-6 : 5e-6;
    /* the ring-step latency of the probe's allreduce: what a step of the
     * collectives costs (the ranks' contention and the library's per-step
     * work included), on the links the probe's ring spanned */
    const char *lat_src = t->net.measured ? "measured ping-pong" : "estimate";
    if (t->net.measured && t->net.ring_lat_us > 0) {
        const double a = t->net.ring_lat_us * 1e-6;
        if (t->net.nnodes > 1) {
            if (a > hw->lat_s[PT_NET_INTER]) hw->lat_s[PT_NET_INTER] = a;
            lat_src = "measured: network from the allreduce's ring step, node from ping-pong";
        } else {
            for (int l = PT_NET_ISLAND; l <= PT_NET_NODE; l++)
                if (a > hw->lat_s[l]) hw->lat_s[l] = a;
            lat_src = "measured: node from the allreduce's ring step, network estimate";
        }
    }
    /* the ring-step bandwidth of the probe's fit: what one rank gets while
     * every rank of the ring sends at once, on the links the ring spanned
     * (the network between nodes; inside one node the memory copies of CPU
     * ranks, not a GPU's links, which the host-memory probe does not use) */
    if (t->net.measured && t->net.ring_gbps > 0) {
        const int l0 = t->net.nnodes > 1 ? PT_NET_INTER : PT_NET_ISLAND;
        const int l1 = t->net.nnodes > 1 ? (p->ov->inter_gbps > 0 ? -1 : PT_NET_INTER)
                                         : (!p->gpu || p->used <= 1) ? PT_NET_NODE : -1;
        for (int l = l0; l <= l1; l++)
            if (hw->gbps[l] <= 0 || t->net.ring_gbps < hw->gbps[l]) hw->gbps[l] = t->net.ring_gbps;
        if (l1 >= l0)
            pt_notef(p->note, p->note_len, "%s: at most %.3g GB/s per rank, a ring step's while every rank sends "
                     "(the probe's allreduce fit)", l0 == PT_NET_INTER ? "network" : "intra-node", t->net.ring_gbps);
    }
    pt_notef(p->note, p->note_len, "latency: %.3g us island, %.3g us node, %.3g us network (%s)",
             hw->lat_s[0] * 1e6, hw->lat_s[1] * 1e6, hw->lat_s[2] * 1e6, lat_src);
}

/* Each collective kind's own alpha and bus bandwidth, fitted by the
 * probe per link class: the ranks of one node on the CPU ranks' island
 * and node links (not a GPU's links, which the host-memory probe does not
 * use), one rank per node on the network (its bandwidth not when the
 * admin gave the network's); a class without its own fit (a file from
 * before) takes the all-ranks fit where the probe's ranks spanned it (the
 * network between nodes, else the node); elsewhere every kind takes the
 * class's figures above (0). */
static void plan_collectives(const plan_ctx *p)
{
    const pt_topo_net *n = &p->t->net;
    const pt_topo_hw_override *ov = p->ov;
    pt_hw *hw = p->hw;
    const int host = !p->gpu || p->used <= 1;
    int nk = 0, skipped = 0;
    for (int c = 0; c < PT_TOPO_CLASS_N && n->measured; c++) {
        const pt_topo_coll_fit *cf = &n->coll_class[c];
        const double *busbw = cf->busbw, *lat = cf->lat_us;
        int np = cf->nranks;
        const char *what = "";
        if (np <= 0 && n->coll_bytes[0] > 0 && (c == PT_TOPO_CLASS_NETWORK) == (n->nnodes > 1)) {
            busbw = n->coll_busbw, lat = n->coll_lat_us, np = n->nranks; /* the all-ranks fit */
            what = ", the probe's all-ranks fit";
        } else if (np <= 0) {
            continue;
        }
        const int l0 = c == PT_TOPO_CLASS_NETWORK ? PT_NET_INTER : PT_NET_ISLAND;
        const int l1 = c == PT_TOPO_CLASS_NETWORK ? PT_NET_INTER : host ? PT_NET_NODE : -1;
        if (l1 < l0) { skipped = 1; continue; }
        char kinds[400] = "";
        size_t kl = 0;
        int any = 0;
        for (int k = 0; k < PT_KIND_N && k < PT_TOPO_COLL_N; k++) {
            if (!(busbw[k] > 0)) continue;
            for (int l = l0; l <= l1; l++) {
                if (l != PT_NET_INTER || ov->inter_gbps <= 0) hw->coll_gbps[k][l] = busbw[k];
                hw->coll_lat_s[k][l] = lat[k] * 1e-6;
            }
            if (kl < sizeof kinds)
                kl += (size_t)snprintf(kinds + kl, sizeof kinds - kl, "%s%s %.3g GB/s %.3g us", any ? ", " : "",
                                       pt_topo_coll_name(k), busbw[k], lat[k]);
            any = 1;
        }
        if (!any) continue;
        pt_notef(p->note, p->note_len, "collectives on the %s links (measured: busbw and alpha per step of each "
                 "kind at %d ranks%s%s): %s", c == PT_TOPO_CLASS_NETWORK ? "network" : "intra-node", np, what,
                 c == PT_TOPO_CLASS_NETWORK && ov->inter_gbps > 0 ? "; the bandwidth overridden" : "", kinds);
        nk++;
    }
    if (nk)
        pt_notef(p->note, p->note_len, "collectives: other links and kinds at the class's figures (estimate)");
    else
        pt_notef(p->note, p->note_len, "collectives: every kind at its link class's bandwidth and latency "
                 "(estimate; ptrain-topo --probe fits each kind%s)", skipped ? ", but the host-memory probe does "
                 "not use the GPUs' links" : "");
}

/* Memory per rank: the override, the GPU's from its model name, or the
 * host's shared by the node's tasks. */
static void plan_memory(const plan_ctx *p)
{
    const pt_topo *t = p->t;
    pt_hw *hw = p->hw;
    if (p->ov->mem_gb > 0) {
        hw->mem_bytes = p->ov->mem_gb * 1e9;
        pt_notef(p->note, p->note_len, "memory: %.3g GB per rank (override)", p->ov->mem_gb);
        return;
    }
    double gm = p->gpu ? gpu_mem_from_model(t->gpu[0].model) : 0;
    if (gm > 0) {
        hw->mem_bytes = gm / p->per_dev;
        pt_notef(p->note, p->note_len, "memory: %.3g GB per rank (%s / %d rank%s per GPU)",
                 hw->mem_bytes / 1e9, t->gpu[0].model, p->per_dev, p->per_dev > 1 ? "s" : "");
    } else {
        double host = 0;
        for (int i = 0; i < t->nnuma; i++) host += (double)t->numa[i].memory;
        if (host <= 0) host = (double)t->os_memory;
        hw->mem_bytes = host / p->tpn;
        pt_notef(p->note, p->note_len, "memory: %.3g GB per rank (host memory / %d tasks%s)",
                 hw->mem_bytes / 1e9, p->tpn, p->gpu ? "; the GPU model names no memory size" : "");
    }
}

/* The fp32 GEMM rate of one rank of a CPU node: the measured Hockney fit,
 * the measured one-size rate, or the estimate, times the cores per rank
 * (one core shared with more tasks than cores: ranks_per_core). */
static void plan_gemm_cpu(const plan_ctx *p)
{
    const pt_topo *t = p->t;
    const int tpn = p->tpn;
    pt_hw *hw = p->hw;
    int cores = t->ncores > 0 ? t->ncores : 1;
    double per_rank = (double)cores / tpn;
    if (per_rank < 1) {
        /* more tasks than cores: gemm_gflops is one core's rate and
         * ranks_per_core tells the cost model how many share it */
        hw->ranks_per_core = (double)tpn / cores;
        per_rank = 1;
        pt_notef(p->note, p->note_len, "cores: %d tasks on %d cores, %.3g ranks per core", tpn, cores,
                 hw->ranks_per_core);
    }
    char share[64] = "";
    if (hw->ranks_per_core > 1)
        snprintf(share, sizeof share, ", one core's rate shared by %.3g ranks", hw->ranks_per_core);
    if (t->gemm_rinf_gflops > 0 && t->gemm_n_half > 0) {
        hw->gemm_gflops = t->gemm_rinf_gflops * per_rank;
        hw->gemm_n_half = t->gemm_n_half;
        pt_notef(p->note, p->note_len, "gemm: %.4g GFLOP/s per %s at large sizes, half of it at %.4g rows per "
                 "GEMM (measured Hockney fit: r_inf %.4g per core x %.3g cores%s)", hw->gemm_gflops,
                 hw->ranks_per_core > 1 ? "core" : "rank", hw->gemm_n_half, t->gemm_rinf_gflops, per_rank, share);
    } else if (t->gemm_gflops > 0) {
        hw->gemm_gflops = t->gemm_gflops * per_rank;
        pt_notef(p->note, p->note_len, "gemm: %.4g GFLOP/s per %s (measured %.4g per core x %.3g cores%s)",
                 hw->gemm_gflops, hw->ranks_per_core > 1 ? "core" : "rank", t->gemm_gflops, per_rank, share);
    } else {
        hw->gemm_gflops = 32.0 * per_rank;
        pt_notef(p->note, p->note_len, "gemm: %.4g GFLOP/s per %s (estimate: 32 GFLOP/s per core x %.3g cores%s; "
                 "ptrain-topo --probe measures it)", hw->gemm_gflops, hw->ranks_per_core > 1 ? "core" : "rank",
                 per_rank, share);
    }
}

/* The fp32 GEMM rate of one rank: the override, a GPU's data-sheet peak
 * shared by its ranks, or the CPU node's (plan_gemm_cpu). */
static void plan_gemm(const plan_ctx *p)
{
    pt_hw *hw = p->hw;
    if (p->ov->gemm_gflops > 0) {
        hw->gemm_gflops = p->ov->gemm_gflops;
        pt_notef(p->note, p->note_len, "gemm: %.4g GFLOP/s per rank (override)", hw->gemm_gflops);
    } else if (p->gpu) {
        /* the fp32 (CUDA-core) peak of the GPU's data sheet (gpu_peak_of) */
        const gpu_peak pk = gpu_peak_of(p->t->gpu[0].model);
        hw->gemm_gflops = pk.fp32 / p->per_dev;
        if (pk.board)
            pt_notef(p->note, p->note_len, "gemm: %.4g GFLOP/s per rank (estimate: %.0f GFLOP/s per GPU, the %s's "
                     "fp32 peak)", hw->gemm_gflops, pk.fp32, pk.board);
        else
            pt_notef(p->note, p->note_len, "gemm: %.4g GFLOP/s per rank (estimate: %.0f GFLOP/s per GPU, an A100's "
                     "peak, for GPUs not in the table)", hw->gemm_gflops, pk.fp32);
    } else {
        plan_gemm_cpu(p);
    }
}

/* The bf16 GEMM rate of one rank (0: unknown, bf16 plans compute at
 * gemm_gflops); its note line begins "gemm bf16:".  After plan_gemm. */
static void plan_gemm_bf16(const plan_ctx *p)
{
    const pt_topo *t = p->t;
    pt_hw *hw = p->hw;
    if (p->ov->gemm_gflops_bf16 > 0) {
        hw->gemm_gflops_bf16 = p->ov->gemm_gflops_bf16;
        pt_notef(p->note, p->note_len, "gemm bf16: %.4g GFLOP/s per rank (override)", hw->gemm_gflops_bf16);
    } else if (p->gpu) {
        /* the dense bf16 tensor-core peak of the same board's data sheet
         * (gpu_peak_of); the V100 has no bf16 */
        const char *mdl = t->gpu[0].model;
        const gpu_peak pk = gpu_peak_of(mdl);
        if (pk.bf16 > 0) {
            hw->gemm_gflops_bf16 = pk.bf16 / p->per_dev;
            pt_notef(p->note, p->note_len, "gemm bf16: %.4g GFLOP/s per rank (estimate: %.0f GFLOP/s per GPU, the "
                     "%s's dense bf16 peak)", hw->gemm_gflops_bf16, pk.bf16, pk.board);
        } else {
            pt_notef(p->note, p->note_len, "gemm bf16: at the fp32 rate (%s: no bf16 figure%s)",
                     mdl[0] ? mdl : "the GPU", strstr(mdl, "V100") ? "; the V100 has no bf16" : " in the table");
        }
    } else if (t->gemm_gflops_bf16 > 0) {
        /* one core's measured rate x the cores per rank, as gemm_gflops;
         * against the sgemm's Hockney fit, scaled by r_inf over the sgemm
         * rate measured at the bf16 measurement's size (bf16 keeps the
         * measured ratio to fp32, and n_1/2 applies to both) */
        const int cores = t->ncores > 0 ? t->ncores : 1;
        const double per_rank = hw->ranks_per_core > 1 ? 1 : (double)cores / p->tpn;
        const int fit = hw->gemm_n_half > 0 && t->gemm_gflops > 0;
        const double scale = fit ? t->gemm_rinf_gflops / t->gemm_gflops : 1;
        hw->gemm_gflops_bf16 = t->gemm_gflops_bf16 * scale * per_rank;
        pt_notef(p->note, p->note_len, "gemm bf16: %.4g GFLOP/s per %s%s (measured %.4g per core x %.3g cores%s)",
                 hw->gemm_gflops_bf16, hw->ranks_per_core > 1 ? "core" : "rank", fit ? " at large sizes" : "",
                 t->gemm_gflops_bf16, per_rank, fit ? ", x the sgemm's r_inf / its one-size rate" : "");
    } else if (t->cpu_bf16_known && t->cpu_bf16 != PT_BF16_ISA_AMX) {
        /* no bf16 GEMM instructions the bf16 GEMM uses (lib/backend/gemm_bf16.c's rule: AVX512_BF16
         * dot products measured slower than fp32 sgemm, so both run sgemm on converted tiles, 0.85
         * to 0.95 of the fp32 rate in bench-gemm-bf16): a bf16 plan never prices faster than fp32 */
        hw->gemm_gflops_bf16 = PT_BF16_SGEMM_RATIO * hw->gemm_gflops;
        pt_notef(p->note, p->note_len, "gemm bf16: %.4g GFLOP/s per %s (estimate: %.2g x the fp32 rate: a %s CPU's "
                 "bf16 GEMM is fp32 sgemm on converted tiles; ptrain-topo --probe measures it)",
                 hw->gemm_gflops_bf16, hw->ranks_per_core > 1 ? "core" : "rank", PT_BF16_SGEMM_RATIO,
                 t->cpu_bf16 == PT_BF16_ISA_NONE ? "no-bf16" : pt_bf16_isa_name(t->cpu_bf16));
    } else {
        pt_notef(p->note, p->note_len, "gemm bf16: at the fp32 rate (not measured; ptrain-topo --probe measures it)");
    }
}

/* Collectives between other ranks' compute on time-shared cores: the
 * probe's pair allreduce while half the ranks compute less the same with
 * every rank communicating (at least 0, at most 100 ms against a
 * hand-edited file).  After plan_gemm (ranks_per_core). */
static void plan_busy_delay(const plan_ctx *p)
{
    const pt_topo_net *n = &p->t->net;
    pt_hw *hw = p->hw;
    if (hw->ranks_per_core > 1 && n->measured && n->pair_us > 0 && n->pair_busy_us > 0) {
        double d = (n->pair_busy_us - n->pair_us) * 1e-6;
        hw->busy_delay_s = d < 0 ? 0 : d > 0.1 ? 0.1 : d;
        pt_notef(p->note, p->note_len, "busy cores: each pipeline send waits %.4g us more while "
                 "other ranks compute (the probe's pair allreduce at %d ranks, %.4g us busy, %.4g us idle)",
                 hw->busy_delay_s * 1e6, n->nranks, n->pair_busy_us, n->pair_us);
    }
}

int pt_topo_plan_hw(const pt_topo *t, int tpn, const pt_topo_hw_override *ov, pt_hw *hw, int *island_ranks,
                    char *note, size_t note_len)
{
    static const pt_topo_hw_override none = {0, 0, 0, 0};
    if (!ov) ov = &none;
    if (!hw || !island_ranks) return pt_fail(PT_EINVAL, "node model: no output given");
    /* no node model: one NUMA node of one core, no GPU; every figure an estimate */
    pt_topo_numa one_numa;
    pt_topo bare;
    if (!t) {
        memset(&one_numa, 0, sizeof one_numa);
        memset(&bare, 0, sizeof bare);
        one_numa.ncores = one_numa.npus = 1;
        bare.nnuma = 1;
        bare.ncores = bare.npus = 1;
        bare.numa = &one_numa;
        t = &bare;
    }
    if (tpn < 1) return pt_fail(PT_EINVAL, "invalid tasks per node %d (valid: >= 1)", tpn);
    if (t->nnuma < 1) return pt_fail(PT_EINVAL, "node model %s has no NUMA node", t->source);
    if (note && note_len) note[0] = '\0';
    memset(hw, 0, sizeof *hw);
    *island_ranks = 0;

    plan_ctx p = { .t = t, .tpn = tpn, .ov = ov, .hw = hw, .note = note, .note_len = note_len };
    p.gpu = t->ngpus > 0;
    p.ndev = p.gpu ? t->ngpus : t->nnuma;
    p.kind = p.gpu ? PT_DEV_GPU : PT_DEV_NUMA;
    /* ranks per device: tpn / ndev consecutive ranks per device; fewer
     * tasks than devices use the first tpn devices, one each */
    p.used = tpn < p.ndev ? tpn : p.ndev;
    p.per_dev = tpn >= p.ndev ? tpn / p.ndev : 1;
    plan_islands(&p, island_ranks);
    plan_intra(&p, *island_ranks);
    plan_network(&p);
    plan_latency(&p);
    plan_collectives(&p);
    plan_memory(&p);
    plan_gemm(&p);
    plan_gemm_bf16(&p);
    plan_busy_delay(&p);
    return 0;
}

int pt_topo_gemm_fit(const double *rows, const double *gflops, int k, double *r_inf, double *n_half)
{
    if (!rows || !gflops || !r_inf || !n_half) return pt_fail(PT_EINVAL, "gemm fit: no points or output given");
    if (k < 2) return pt_fail(PT_EINVAL, "gemm fit: %d point%s (valid: >= 2 sizes)", k, k == 1 ? "" : "s");
    double sx = 0, sy = 0, sxx = 0, sxy = 0, sg = 0;
    for (int i = 0; i < k; i++) {
        if (!(rows[i] > 0) || !isfinite(rows[i]) || !(gflops[i] > 0) || !isfinite(gflops[i]))
            return pt_fail(PT_EINVAL, "gemm fit: point %d (%g rows, %g GFLOP/s) (valid: positive, finite)", i,
                           rows[i], gflops[i]);
        const double x = 1.0 / rows[i], y = 1.0 / gflops[i];
        sx += x, sy += y, sxx += x * x, sxy += x * y, sg += gflops[i];
    }
    const double den = k * sxx - sx * sx;
    if (!(den > 1e-300 * (sxx > 0 ? sxx : 1)))
        return pt_fail(PT_EINVAL, "gemm fit: every point has %g rows (valid: >= 2 different sizes)", rows[0]);
    const double b = (k * sxy - sx * sy) / den, a = (sy - b * sx) / k;
    if (b <= 0 || a <= 0) { /* no measurable size effect: the mean rate */
        *r_inf = sg / k;
        *n_half = 0;
        return 0;
    }
    *r_inf = 1.0 / a;
    *n_half = b / a;
    return 0;
}

int pt_topo_plan_arg_parse(const char *what, const char *s, char *path, size_t path_len, int *count)
{
    const char *colon = strrchr(s, ':');
    size_t len = strlen(s);
    *count = 0;
    if (colon && colon[1]) {
        const char *d = colon + 1;
        while (*d >= '0' && *d <= '9') d++;
        if (!*d) {
            char *end;
            errno = 0;
            long v = strtol(colon + 1, &end, 10);
            if (errno || v < 1 || v > (1 << 20) || colon == s)
                return pt_fail(PT_EINVAL, "invalid %s '%s' (valid: FILE or FILE:COUNT, COUNT nodes 1..%d)", what, s,
                               1 << 20);
            *count = (int)v;
            len = (size_t)(colon - s);
        }
    }
    if (len >= path_len)
        return pt_fail(PT_EINVAL, "invalid %s: the path is longer than %zu bytes", what, path_len ? path_len - 1 : 0);
    memcpy(path, s, len);
    path[len] = '\0';
    return 0;
}

int pt_topo_plan_load(const char *path, const char *what, unsigned flags, pt_topo *t, int *from, char *notes,
                      size_t notes_len)
{
    memset(t, 0, sizeof *t);
    *from = PT_TOPO_FROM_NONE;
    if (path && *path) {
        if (pt_topo_load_file(t, path) == PT_OK) {
            *from = PT_TOPO_FROM_PATH;
            return 0;
        }
        if (!(flags & PT_TOPO_LOAD_FALLBACK)) {
            pt_topo_free(t);
            memset(t, 0, sizeof *t);
            return -1;
        }
        pt_notef(notes, notes_len, "ptrain: warning: cannot load the node model %s=%.600s (%.200s); planning from "
                 "this node's hwloc model", what ? what : "topology", path, pt_errmsg());
        pt_topo_free(t);
        memset(t, 0, sizeof *t);
    }
    if (pt_topo_load_hwloc(t, NULL) == PT_OK) {
        *from = PT_TOPO_FROM_HWLOC;
        return 0;
    }
    pt_errsave why; /* hwloc's message, kept across the cleanup */
    pt_error_save(&why);
    pt_topo_free(t);
    memset(t, 0, sizeof *t);
    pt_error_restore(&why);
    if (!(flags & PT_TOPO_LOAD_ESTIMATES)) return PT_EINVAL;
    if (flags & PT_TOPO_LOAD_WARN)
        pt_notef(notes, notes_len, "ptrain: warning: no node model (hwloc: %s); planning from ptrain.conf's rates "
                 "and defaults", pt_errmsg());
    return 0;
}

void pt_plan_machine_free(pt_plan_machine *m)
{
    if (!m) return;
    free(m->tasks);
    free(m->kind_of);
    free(m->kinds);
    free(m->names);
    free(m->island_of_kind);
    memset(m, 0, sizeof *m);
}

int pt_plan_machine_build(pt_plan_machine *m, int nkinds, const pt_topo *const *models, const char *const *names,
                          const int *kind_of, const int *tasks_per_node, int nnodes, const pt_topo_hw_override *ov,
                          double inter_lat_us)
{
    memset(m, 0, sizeof *m);
    if (nkinds < 1 || nkinds > 1024 || nnodes < 1 || nnodes > (1 << 20) || !tasks_per_node)
        return pt_fail(PT_EINVAL, "machine: %d node kinds, %d nodes (valid: 1..1024 kinds, 1..%d nodes with their "
                       "task counts)", nkinds, nnodes, 1 << 20);
    m->tasks = malloc(sizeof(int) * (size_t)nnodes);
    m->kind_of = malloc(sizeof(int) * (size_t)nnodes);
    m->kinds = calloc((size_t)nkinds, sizeof *m->kinds);
    m->names = calloc((size_t)nkinds, sizeof *m->names);
    m->island_of_kind = calloc((size_t)nkinds, sizeof(int));
    int *maxt = calloc((size_t)nkinds, sizeof(int));
    if (!m->tasks || !m->kind_of || !m->kinds || !m->names || !m->island_of_kind || !maxt) {
        free(maxt);
        pt_plan_machine_free(m);
        return pt_fail(PT_ENOMEM, "machine: out of memory for %d nodes", nnodes);
    }
    m->nkinds = nkinds;
    for (int i = 0; i < nnodes; i++) {
        const int k = kind_of ? kind_of[i] : 0;
        if (k < 0 || k >= nkinds || tasks_per_node[i] < 1) {
            free(maxt);
            pt_plan_machine_free(m);
            return pt_fail(PT_EINVAL, "machine: node %d has kind %d and %d tasks (valid: kinds 0..%d, >= 1 task)", i, k,
                           tasks_per_node[i], nkinds - 1);
        }
        m->tasks[i] = tasks_per_node[i];
        m->kind_of[i] = k;
        if (tasks_per_node[i] > maxt[k]) maxt[k] = tasks_per_node[i];
    }
    int present = 0, last = 0;
    for (int k = 0; k < nkinds; k++) {
        if (names && names[k]) snprintf(m->names[k], sizeof m->names[k], "%s", names[k]);
        else snprintf(m->names[k], sizeof m->names[k], "kind %d", k);
        m->kinds[k].name = m->names[k];
        present += maxt[k] > 0;
        if (maxt[k] > 0) last = k;
    }
    for (int k = 0; k < nkinds; k++) {
        const int tpn = maxt[k] > 0 ? maxt[k] : 1;
        char note[2048];
        if (pt_topo_plan_hw(models ? models[k] : NULL, tpn, ov, &m->kinds[k].hw, &m->kinds[k].island_ranks, note,
                            sizeof note) < 0) {
            free(maxt);
            int rc = pt_fail(PT_EINVAL, "node model %s: %s", m->names[k], pt_errmsg());
            pt_plan_machine_free(m);
            return rc;
        }
        if (inter_lat_us > 0) m->kinds[k].hw.lat_s[PT_NET_INTER] = inter_lat_us * 1e-6;
        m->island_of_kind[k] = m->kinds[k].island_ranks;
        if (maxt[k] > 0) {
            size_t l = strlen(m->note);
            for (char *line = note; *line && l < sizeof m->note;) {
                size_t len = strcspn(line, "\n");
                if (present > 1)
                    l += (size_t)snprintf(m->note + l, sizeof m->note - l, "[%s] %.*s\n", m->names[k], (int)len, line);
                else
                    l += (size_t)snprintf(m->note + l, sizeof m->note - l, "%.*s\n", (int)len, line);
                line += len;
                if (*line) line++;
            }
        }
    }
    free(maxt);
    pt_cluster *c = &m->cluster;
    memset(c, 0, sizeof *c);
    c->nnodes = nnodes;
    c->tasks_per_node = m->tasks;
    if (present == 1) { /* identical nodes: the cluster of one node model */
        c->hw = m->kinds[last].hw;
        c->island_ranks = m->kinds[last].island_ranks;
        return 0;
    }
    c->nkinds = nkinds;
    c->kinds = m->kinds;
    c->kind_of = m->kind_of;
    pt_cluster_slowest(c, &c->hw, NULL);
    c->island_ranks = 0;
    return 0;
}
