/* SPDX-License-Identifier: MIT */
/* ptrain topology: node model from hwloc, link classes, persisted
 * measurements in hwloc XML, islands, warnings and gres.conf lines. */
#define _POSIX_C_SOURCE 200809L
#include "topo/topo.h"
#include "core/file.h"
#include "core/core.h"
#include "core/cpu.h"
#include "topo/topo_priv.h"

#include <hwloc.h>
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

/* NVLink count of a measured or recorded bandwidth (GB/s): at least 1 when
 * positive, at most PT_TOPO_MAX_NVLINKS (a corrupt cache must not overflow
 * the count); 0 for non-positive or not-a-number. */
static int nvlinks_of_gbps(double gbps)
{
    if (!(gbps > 0)) return 0;
    double l = gbps / PT_TOPO_NVLINK_GBPS;
    if (!(l < PT_TOPO_MAX_NVLINKS)) return PT_TOPO_MAX_NVLINKS;
    long r = lround(l);
    return r < 1 ? 1 : (int)r;
}

const char *pt_topo_coll_name(int k)
{
    static const char *n[PT_TOPO_COLL_N] = {"allreduce", "reduce_scatter", "allgather", "broadcast", "reduce", "p2p"};
    return k >= 0 && k < PT_TOPO_COLL_N ? n[k] : "?";
}

const char *pt_topo_class_name(int c)
{
    return c == PT_TOPO_CLASS_NODE ? "node" : c == PT_TOPO_CLASS_NETWORK ? "network" : "?";
}

const char *pt_link_class_name(pt_link_class c)
{
    switch (c) {
    case PT_LINK_SYS: return "SYS";
    case PT_LINK_NODE: return "NODE";
    case PT_LINK_PHB: return "PHB";
    case PT_LINK_PXB: return "PXB";
    case PT_LINK_PIX: return "PIX";
    case PT_LINK_NV: return "NV";
    case PT_LINK_SELF: return "X";
    default: return "?";
    }
}

void pt_topo_free(pt_topo *t)
{
    if (!t) return;
    free(t->numa); free(t->gpu); free(t->nic);
    free(t->gg_class); free(t->gg_nvlinks); free(t->gn_class); free(t->nn_class);
    free(t->gg_gbps); free(t->gg_gbps_nop2p); free(t->numa_gbps);
    if (t->hw) hwloc_topology_destroy((hwloc_topology_t)t->hw);
    memset(t, 0, sizeof *t);
}

/* ---- hwloc helpers ------------------------------------------------------- */
static void busid_of(hwloc_obj_t pci, char *out, size_t len)
{
    snprintf(out, len, "%04x:%02x:%02x.%01x", pci->attr->pcidev.domain,
             pci->attr->pcidev.bus, pci->attr->pcidev.dev, pci->attr->pcidev.func);
}

static hwloc_obj_t pci_ancestor(hwloc_obj_t o)
{
    while (o && o->type != HWLOC_OBJ_PCI_DEVICE) o = o->parent;
    return o;
}

static int is_hostbridge(hwloc_obj_t o)
{
    return o->type == HWLOC_OBJ_BRIDGE && o->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_HOST;
}

/* Common ancestor that also works for I/O objects (whose depths are
 * virtual, so hwloc_get_common_ancestor_obj does not apply). */
static hwloc_obj_t common_ancestor(hwloc_obj_t a, hwloc_obj_t b)
{
    for (hwloc_obj_t x = a; x; x = x->parent)
        for (hwloc_obj_t y = b; y; y = y->parent)
            if (x == y) return x;
    return NULL;
}

/* Objects on the way from o (exclusive) up to c (inclusive). */
static int hops(hwloc_obj_t o, hwloc_obj_t c)
{
    int n = 0;
    for (hwloc_obj_t x = o; x && x != c; x = x->parent) n++;
    return n;
}

/* Path class between two PCI devices, nvidia-smi topo -m definitions.  A
 * PCIe switch appears in hwloc as an upstream-port bridge above
 * downstream-port bridges, so two devices on one switch are two hops from
 * their common bridge: PIX ("a single PCIe bridge"); deeper is PXB. */
static pt_link_class pci_path(hwloc_topology_t h, hwloc_obj_t a, hwloc_obj_t b)
{
    if (a == b) return PT_LINK_SELF;
    hwloc_obj_t c = common_ancestor(a, b);
    if (!c) return PT_LINK_UNKNOWN;
    if (c->type == HWLOC_OBJ_BRIDGE || c->type == HWLOC_OBJ_PCI_DEVICE) {
        if (is_hostbridge(c)) return PT_LINK_PHB;
        return (hops(a, c) <= 2 && hops(b, c) <= 2) ? PT_LINK_PIX : PT_LINK_PXB;
    }
    hwloc_obj_t na = hwloc_get_non_io_ancestor_obj(h, a);
    hwloc_obj_t nb = hwloc_get_non_io_ancestor_obj(h, b);
    if (na && nb && na->nodeset && nb->nodeset && hwloc_bitmap_isequal(na->nodeset, nb->nodeset) &&
        hwloc_bitmap_weight(na->nodeset) == 1)
        return PT_LINK_NODE;
    return PT_LINK_SYS;
}

static const char *info_get(hwloc_obj_t o, const char *name)
{
    const char *v = NULL;
    for (unsigned i = 0; i < o->infos_count; i++)   /* the last one wins */
        if (!strcmp(o->infos[i].name, name)) v = o->infos[i].value;
    return v;
}

static double info_double(hwloc_obj_t o, const char *name)
{
    const char *v = info_get(o, name);
    return v ? strtod(v, NULL) : 0.0;
}

/* The Ptrain* info attributes of a collective fit: PtrainNetColl<cls>Bytes0
 * and 1, PtrainNetColl<cls>Ranks (the link classes' fits: cls "Node",
 * "Network"), PtrainNetColl<cls><Kind>LatencyUs, BusGBps, Us0 and Us1. */
static const char *const coll_kind_key[PT_TOPO_COLL_N] = {"Allreduce", "ReduceScatter", "Allgather", "Broadcast",
                                                         "Reduce", "P2p"};
static const char *const coll_class_key[PT_TOPO_CLASS_N] = {"Node", "Network"};

/* Read one collective fit back (nranks NULL: the all-ranks fit, no Ranks
 * key); every field 0 when absent (files from before). */
static void coll_info_read(hwloc_obj_t root, const char *cls, int *nranks, size_t bytes[2], double time_us[][2],
                           double *lat_us, double *busbw)
{
    char key[80];
    if (nranks) {
        snprintf(key, sizeof key, "PtrainNetColl%sRanks", cls);
        *nranks = (int)info_double(root, key);
        if (*nranks < 2) { *nranks = 0; return; }
    }
    for (int s = 0; s < 2; s++) {
        snprintf(key, sizeof key, "PtrainNetColl%sBytes%d", cls, s);
        bytes[s] = (size_t)info_double(root, key);
    }
    for (int k = 0; k < PT_TOPO_COLL_N && bytes[0] > 0; k++) {
        snprintf(key, sizeof key, "PtrainNetColl%s%sLatencyUs", cls, coll_kind_key[k]);
        lat_us[k] = info_double(root, key);
        snprintf(key, sizeof key, "PtrainNetColl%s%sBusGBps", cls, coll_kind_key[k]);
        busbw[k] = info_double(root, key);
        for (int s = 0; s < 2; s++) {
            snprintf(key, sizeof key, "PtrainNetColl%s%sUs%d", cls, coll_kind_key[k], s);
            time_us[k][s] = info_double(root, key);
        }
    }
}

static void copy_str(char *dst, size_t len, const char *src)
{
    snprintf(dst, len, "%s", src ? src : "");
}

static void fill_pci(hwloc_topology_t h, hwloc_obj_t pci, pt_topo_pci *p)
{
    busid_of(pci, p->busid, sizeof p->busid);
    p->vendor = pci->attr->pcidev.vendor_id;
    p->device = pci->attr->pcidev.device_id;
    p->class_id = pci->attr->pcidev.class_id;
    p->link_gbps = pci->attr->pcidev.linkspeed;
    hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(h, pci);
    p->numa = -1;
    p->numas[0] = p->cpus[0] = p->cores[0] = 0;
    if (!anc) return;
    if (anc->nodeset) {
        hwloc_bitmap_list_snprintf(p->numas, sizeof p->numas, anc->nodeset);
        if (hwloc_bitmap_weight(anc->nodeset) == 1) p->numa = hwloc_bitmap_first(anc->nodeset);
    }
    if (anc->cpuset) {
        hwloc_bitmap_list_snprintf(p->cpus, sizeof p->cpus, anc->cpuset);
        hwloc_bitmap_t cores = hwloc_bitmap_alloc();
        hwloc_obj_t core = NULL;
        while ((core = hwloc_get_next_obj_inside_cpuset_by_type(h, anc->cpuset, HWLOC_OBJ_CORE, core)))
            hwloc_bitmap_set(cores, core->logical_index);
        hwloc_bitmap_list_snprintf(p->cores, sizeof p->cores, cores);
        hwloc_bitmap_free(cores);
    }
}

int pt_topo_pci_name(unsigned vendor, unsigned device, char *name, size_t len)
{
    const char *env = getenv("PTRAIN_PCI_IDS");
    const char *paths[] = {env, "/usr/share/misc/pci.ids", "/usr/share/hwdata/pci.ids"};
    for (size_t k = 0; k < sizeof paths / sizeof paths[0]; k++) {
        if (!paths[k] || !paths[k][0]) continue;
        FILE *f = fopen(paths[k], "re");
        if (!f) continue;
        /* "VVVV  vendor" lines, then "\tDDDD  device" lines of that vendor */
        char line[512];
        int in_vendor = 0, found = 0;
        while (!found && fgets(line, sizeof line, f)) {
            if (line[0] == '#' || line[0] == '\n') continue;
            unsigned id;
            char *end;
            if (line[0] != '\t') {
                if (in_vendor) break;
                id = (unsigned)strtoul(line, &end, 16);
                in_vendor = end == line + 4 && id == vendor;
                continue;
            }
            if (!in_vendor || line[1] == '\t') continue;
            id = (unsigned)strtoul(line + 1, &end, 16);
            if (end != line + 5 || id != device) continue;
            while (*end == ' ') end++;
            end[strcspn(end, "\r\n")] = 0;
            if (*end) {
                snprintf(name, len, "%s", end);
                found = 1;
            }
        }
        fclose(f);
        if (found) return 1;
        if (paths[k] == env) continue; /* an explicit database that lacks the id: try the system's */
    }
    return 0;
}

/* Name every GPU.  An OS device under the GPU's PCI device already gave
 * its GPUModel.  hwloc attaches OpenCL (and sometimes CUDA) OS devices
 * beside the PCI device, or higher, when it cannot read their PCI bus id
 * (seen on an H100 VM: "opencl0d0" with GPUModel "NVIDIA H100 80GB HBM3"
 * outside the PCI tree): those are matched to the unnamed GPUs in order
 * when their count equals the GPUs' or when they all name the same model.
 * Then the PCI ID database, then "NVIDIA GPU [10de:DDDD]". */
static void name_gpus(hwloc_topology_t h, pt_topo *t)
{
    const char *loose[64];
    int nloose = 0, same = 1;
    hwloc_obj_t o = NULL;
    while ((o = hwloc_get_next_osdev(h, o))) {
        if (o->attr->osdev.type != HWLOC_OBJ_OSDEV_GPU && o->attr->osdev.type != HWLOC_OBJ_OSDEV_COPROC) continue;
        if (pci_ancestor(o)) continue;
        const char *m = info_get(o, "GPUModel");
        if (!m || strncmp(m, "NVIDIA", 6) || nloose == (int)(sizeof loose / sizeof loose[0])) continue;
        if (nloose && strcmp(m, loose[0])) same = 0;
        loose[nloose++] = m;
    }
    int unnamed = 0;
    for (int i = 0; i < t->ngpus; i++) unnamed += !t->gpu[i].osdevs[0] || !t->gpu[i].model[0];
    for (int i = 0, k = 0; i < t->ngpus; i++) {
        pt_topo_gpu *g = &t->gpu[i];
        if (g->osdevs[0] && g->model[0]) continue;
        if (nloose && (nloose == unnamed || same)) {
            copy_str(g->model, sizeof g->model, loose[same ? 0 : k++]);
            continue;
        }
        if (g->model[0]) { /* hwloc's PCIDevice name (libpciaccess builds): "GA100 [A100 SXM4 80GB]" */
            if (strncmp(g->model, "NVIDIA", 6)) {
                char dev[sizeof g->model];
                copy_str(dev, sizeof dev, g->model);
                snprintf(g->model, sizeof g->model, "NVIDIA %.88s", dev);
            }
            continue;
        }
        char dev[80];
        if (pt_topo_pci_name(g->pci.vendor, g->pci.device, dev, sizeof dev))
            snprintf(g->model, sizeof g->model, "NVIDIA %s", dev);
        else
            snprintf(g->model, sizeof g->model, "NVIDIA GPU [%04x:%04x]", g->pci.vendor, g->pci.device);
    }
}

static int cmp_gpu(const void *a, const void *b)
{
    return strcmp(((const pt_topo_gpu *)a)->pci.busid, ((const pt_topo_gpu *)b)->pci.busid);
}
static int cmp_nic(const void *a, const void *b)
{
    return strcmp(((const pt_topo_nic *)a)->pci.busid, ((const pt_topo_nic *)b)->pci.busid);
}

static hwloc_obj_t find_pci(hwloc_topology_t h, const char *busid)
{
    hwloc_obj_t o = NULL;
    char b[16];
    while ((o = hwloc_get_next_pcidev(h, o))) {
        busid_of(o, b, sizeof b);
        if (!strcmp(b, busid)) return o;
    }
    return NULL;
}

static int gpu_index_of(const pt_topo *t, hwloc_obj_t o)
{
    hwloc_obj_t p = pci_ancestor(o);
    if (!p) return -1;
    char b[16];
    busid_of(p, b, sizeof b);
    for (int i = 0; i < t->ngpus; i++)
        if (!strcmp(t->gpu[i].pci.busid, b)) return i;
    return -1;
}

static int numa_index_of(const pt_topo *t, hwloc_obj_t o)
{
    if (o->type != HWLOC_OBJ_NUMANODE) return -1;
    for (int i = 0; i < t->nnuma; i++)
        if (t->numa[i].os_index == (int)o->os_index) return i;
    return -1;
}

/* Minor number of /dev/nvidiaN: the driver's record when this is the
 * running machine, else the position in PCI bus order (the driver's usual
 * assignment). */
static int gpu_minor(const char *busid, int fallback, int thissystem)
{
    if (!thissystem) return fallback;
    char path[128], line[256];
    snprintf(path, sizeof path, "/proc/driver/nvidia/gpus/%s/information", busid);
    FILE *f = fopen(path, "r");
    if (!f) return fallback;
    int minor = fallback;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "Device Minor:", 13)) minor = atoi(line + 13);
    fclose(f);
    return minor;
}

/* Read persisted measurements (distances + infos) back into the model. */
static void read_measurements(pt_topo *t, hwloc_topology_t h)
{
    const char *names[3] = { PT_TOPO_DIST_GPU, PT_TOPO_DIST_GPU_NOP2P, PT_TOPO_DIST_NUMA };
    double *dst[3] = { t->gg_gbps, t->gg_gbps_nop2p, t->numa_gbps };
    for (int k = 0; k < 3; k++) {
        struct hwloc_distances_s *d[4];
        unsigned nr = 4;
        if (hwloc_distances_get_by_name(h, names[k], &nr, d, 0) < 0) continue;
        for (unsigned r = 0; r < nr && r < 4; r++) {
            unsigned n = d[r]->nbobjs;
            for (unsigned i = 0; i < n; i++)
                for (unsigned j = 0; j < n; j++) {
                    int a = k < 2 ? gpu_index_of(t, d[r]->objs[i]) : numa_index_of(t, d[r]->objs[i]);
                    int b = k < 2 ? gpu_index_of(t, d[r]->objs[j]) : numa_index_of(t, d[r]->objs[j]);
                    int dim = k < 2 ? t->ngpus : t->nnuma;
                    if (a < 0 || b < 0 || !dst[k]) continue;
                    dst[k][a * dim + b] = d[r]->values[i * n + j] / 1e3;
                }
            hwloc_distances_release(h, d[r]);
        }
    }
    for (int i = 0; i < t->nnuma; i++) {
        hwloc_obj_t o = hwloc_get_numanode_obj_by_os_index(h, (unsigned)t->numa[i].os_index);
        double *diag = &t->numa_gbps[i * t->nnuma + i];
        if (*diag == 0 && o) *diag = info_double(o, "PtrainCopyGBps");
        t->numa[i].membw_gbps = *diag;
    }

    /* NVLink counts recorded by hwloc's NVML backend (MB/s summed over the
     * links).  Objects that are not GPUs (NVSwitches) relay: a GPU pair
     * that shares a switch gets the smaller of its two links to it. */
    struct hwloc_distances_s *d[4];
    unsigned nr = 4;
    if (hwloc_distances_get_by_name(h, PT_TOPO_DIST_NVLINK, &nr, d, 0) == 0) {
        for (unsigned r = 0; r < nr && r < 4; r++) {
            unsigned n = d[r]->nbobjs;
            int *map = malloc(n * sizeof *map);
            if (map) {
                for (unsigned i = 0; i < n; i++) map[i] = gpu_index_of(t, d[r]->objs[i]);
                for (unsigned i = 0; i < n; i++)
                    for (unsigned j = 0; j < n; j++) {
                        if (map[i] < 0 || map[j] < 0 || i == j) continue;
                        double mbs = (double)d[r]->values[i * n + j];
                        for (unsigned s = 0; s < n; s++)
                            if (map[s] < 0) {
                                double a = (double)d[r]->values[i * n + s], b = (double)d[r]->values[j * n + s];
                                mbs += a < b ? a : b;
                            }
                        int links = nvlinks_of_gbps(mbs / 1e3);
                        t->gg_nvlinks[map[i] * t->ngpus + map[j]] = links;
                    }
                free(map);
            }
            hwloc_distances_release(h, d[r]);
        }
    }

    hwloc_obj_t root = hwloc_get_root_obj(h);
    const char *v = info_get(root, "PtrainGPUProbe");
    if (v) t->gpu_probe = atoi(v);
    copy_str(t->gpu_probe_note, sizeof t->gpu_probe_note, info_get(root, "PtrainGPUProbeNote"));
    v = info_get(root, "PtrainOSMemory"); /* saved from the machine that was probed */
    if (v && !t->os_memory) t->os_memory = strtoull(v, NULL, 10);
    for (int g = 0; g < t->ngpus; g++) {
        hwloc_obj_t p = find_pci(h, t->gpu[g].pci.busid);
        if (!p) continue;
        t->gpu[g].h2d_gbps = info_double(p, "PtrainH2DGBps");
        t->gpu[g].d2h_gbps = info_double(p, "PtrainD2HGBps");
    }
    pt_topo_net *n = &t->net;
    n->measured = (int)info_double(root, "PtrainNetMeasured");
    if (n->measured) {
        n->nranks = (int)info_double(root, "PtrainNetRanks");
        n->nnodes = (int)info_double(root, "PtrainNetNodes");
        n->msg_bytes = (size_t)info_double(root, "PtrainNetMsgBytes");
        n->intra_lat_us = info_double(root, "PtrainNetIntraLatencyUs");
        n->intra_gbps = info_double(root, "PtrainNetIntraGBps");
        n->inter_lat_us = info_double(root, "PtrainNetInterLatencyUs");
        n->inter_gbps = info_double(root, "PtrainNetInterGBps");
        n->ar_bytes = (size_t)info_double(root, "PtrainNetAllreduceBytes");
        n->ar_time_us = info_double(root, "PtrainNetAllreduceUs");
        n->ar_algbw = info_double(root, "PtrainNetAllreduceAlgbw");
        n->ar_busbw = info_double(root, "PtrainNetAllreduceBusbw");
        n->ring_lat_us = info_double(root, "PtrainNetRingStepLatencyUs"); /* 0 when absent (older files) */
        n->ring_gbps = info_double(root, "PtrainNetRingGBps");
        n->fit_bytes = (size_t)info_double(root, "PtrainNetFitAllreduceBytes");
        n->fit_time_us = info_double(root, "PtrainNetFitAllreduceUs");
        n->pair_bytes = (size_t)info_double(root, "PtrainNetPairAllreduceBytes");
        n->pair_us = info_double(root, "PtrainNetPairAllreduceUs");
        n->pair_busy_us = info_double(root, "PtrainNetPairBusyAllreduceUs");
        copy_str(n->nodes, sizeof n->nodes, info_get(root, "PtrainNetNodeNames"));
        /* 0 when absent (older files) */
        coll_info_read(root, "", NULL, n->coll_bytes, n->coll_time_us, n->coll_lat_us, n->coll_busbw);
        for (int l = 0; l < PT_TOPO_CLASS_N; l++) {
            pt_topo_coll_fit *f = &n->coll_class[l];
            coll_info_read(root, coll_class_key[l], &f->nranks, f->bytes, f->time_us, f->lat_us, f->busbw);
        }
    }
    /* the sgemm rate and its Hockney fit (0 when absent) */
    t->gemm_gflops = info_double(root, "PtrainGemmGFlops");
    t->gemm_gflops_bf16 = info_double(root, "PtrainGemmBf16GFlops");
    const int bf16 = pt_bf16_isa_parse(info_get(root, "PtrainCpuBf16")); /* absent in older files */
    if (bf16 >= 0) t->cpu_bf16 = bf16, t->cpu_bf16_known = 1;
    t->gemm_rinf_gflops = info_double(root, "PtrainGemmRinfGFlops");
    t->gemm_n_half = info_double(root, "PtrainGemmNHalfRows");
}

void pt_topo_update_nvlinks(pt_topo *t)
{
    int n = t->ngpus;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            if (i == j) { t->gg_class[i * n + j] = PT_LINK_SELF; continue; }
            int links = t->gg_nvlinks[i * n + j];
            double bw = t->gg_gbps ? t->gg_gbps[i * n + j] : 0;
            if (!links && bw > 0) {
                double li = t->gpu[i].pci.link_gbps, lj = t->gpu[j].pci.link_gbps;
                double pcie = li > 0 && lj > 0 ? (li < lj ? li : lj) : 31.5;
                if (bw > 1.5 * pcie) {
                    links = nvlinks_of_gbps(bw);
                    t->gg_nvlinks[i * n + j] = links;
                }
            }
            if (links) t->gg_class[i * n + j] = PT_LINK_NV;
        }
}

int pt_topo_alloc_matrices_(pt_topo *t)
{
    size_t g = (size_t)t->ngpus, n = (size_t)t->nnics, m = (size_t)t->nnuma;
    t->gg_class = calloc(g * g + 1, 1);
    t->gg_nvlinks = calloc(g * g + 1, sizeof(int));
    t->gn_class = calloc(g * n + 1, 1);
    t->nn_class = calloc(n * n + 1, 1);
    t->gg_gbps = calloc(g * g + 1, sizeof(double));
    t->gg_gbps_nop2p = calloc(g * g + 1, sizeof(double));
    t->numa_gbps = calloc(m * m + 1, sizeof(double));
    if (!t->gg_class || !t->gg_nvlinks || !t->gn_class || !t->nn_class || !t->gg_gbps || !t->gg_gbps_nop2p || !t->numa_gbps)
        return pt_fail(PT_ENOMEM, "topology: out of memory");
    return PT_OK;
}

static int build_model(pt_topo *t, hwloc_topology_t h)
{
    hwloc_obj_t root = hwloc_get_root_obj(h);
    copy_str(t->hostname, sizeof t->hostname, info_get(root, "HostName"));
    if (!t->hostname[0] && hwloc_topology_is_thissystem(h)) gethostname(t->hostname, sizeof t->hostname - 1);
    if (hwloc_topology_is_thissystem(h)) t->cpu_bf16 = pt_cpu_bf16_class(), t->cpu_bf16_known = 1;
    hwloc_obj_t pkg0 = hwloc_get_obj_by_type(h, HWLOC_OBJ_PACKAGE, 0);
    copy_str(t->cpu_model, sizeof t->cpu_model, pkg0 ? info_get(pkg0, "CPUModel") : NULL);
    t->npackages = hwloc_get_nbobjs_by_type(h, HWLOC_OBJ_PACKAGE);
    t->nnuma = hwloc_get_nbobjs_by_type(h, HWLOC_OBJ_NUMANODE);
    t->ncores = hwloc_get_nbobjs_by_type(h, HWLOC_OBJ_CORE);
    t->npus = hwloc_get_nbobjs_by_type(h, HWLOC_OBJ_PU);
    if (t->nnuma < 1 || t->npus < 1) return pt_fail(PT_EFORMAT, "topology %s: no NUMA node or PU", t->source);

    t->numa = calloc((size_t)t->nnuma, sizeof *t->numa);
    if (!t->numa) return pt_fail(PT_ENOMEM, "topology: out of memory");
    for (int i = 0; i < t->nnuma; i++) {
        hwloc_obj_t o = hwloc_get_obj_by_type(h, HWLOC_OBJ_NUMANODE, (unsigned)i);
        pt_topo_numa *nm = &t->numa[i];
        nm->os_index = (int)o->os_index;
        nm->memory = o->attr->numanode.local_memory;
        hwloc_obj_t pk = hwloc_get_ancestor_obj_by_type(h, HWLOC_OBJ_PACKAGE, o);
        nm->package = pk ? (int)pk->logical_index : -1;
        nm->ncores = hwloc_get_nbobjs_inside_cpuset_by_type(h, o->cpuset, HWLOC_OBJ_CORE);
        nm->npus = hwloc_get_nbobjs_inside_cpuset_by_type(h, o->cpuset, HWLOC_OBJ_PU);
        hwloc_bitmap_list_snprintf(nm->cpus, sizeof nm->cpus, o->cpuset);
    }

    /* GPUs and NICs, one per PCI function. */
    int cap = 0;
    hwloc_obj_t o = NULL;
    while ((o = hwloc_get_next_pcidev(h, o))) cap++;
    t->gpu = calloc((size_t)cap + 1, sizeof *t->gpu);
    t->nic = calloc((size_t)cap + 1, sizeof *t->nic);
    if (!t->gpu || !t->nic) return pt_fail(PT_ENOMEM, "topology: out of memory");
    o = NULL;
    while ((o = hwloc_get_next_pcidev(h, o))) {
        unsigned cls = o->attr->pcidev.class_id;
        if (o->attr->pcidev.vendor_id != 0x10de || (cls != 0x0300 && cls != 0x0302)) continue;
        char b[16];
        busid_of(o, b, sizeof b);
        int dup = 0;
        for (int i = 0; i < t->ngpus; i++) dup |= !strcmp(t->gpu[i].pci.busid, b);
        if (dup) continue;
        pt_topo_gpu *g = &t->gpu[t->ngpus++];
        fill_pci(h, o, &g->pci);
        copy_str(g->model, sizeof g->model, info_get(o, "PCIDevice"));
    }
    o = NULL;
    while ((o = hwloc_get_next_osdev(h, o))) {
        hwloc_obj_t p = pci_ancestor(o);
        if (!p || !o->name) continue; /* an XML OS device may lack a name (found by fuzz_topo_xml) */
        char b[16];
        busid_of(p, b, sizeof b);
        if (o->attr->osdev.type == HWLOC_OBJ_OSDEV_GPU || o->attr->osdev.type == HWLOC_OBJ_OSDEV_COPROC) {
            for (int i = 0; i < t->ngpus; i++) {
                pt_topo_gpu *g = &t->gpu[i];
                if (strcmp(g->pci.busid, b)) continue;
                size_t l = strlen(g->osdevs);
                if (l + strlen(o->name) + 2 < sizeof g->osdevs)
                    snprintf(g->osdevs + l, sizeof g->osdevs - l, "%s%s", l ? "," : "", o->name);
                const char *m = info_get(o, "GPUModel");
                if (m) copy_str(g->model, sizeof g->model, m);
            }
            continue;
        }
        if (o->attr->osdev.type != HWLOC_OBJ_OSDEV_OPENFABRICS && o->attr->osdev.type != HWLOC_OBJ_OSDEV_NETWORK)
            continue;
        pt_topo_nic *n = NULL;
        for (int i = 0; i < t->nnics; i++)
            if (!strcmp(t->nic[i].pci.busid, b)) n = &t->nic[i];
        if (!n) {
            n = &t->nic[t->nnics++];
            fill_pci(h, p, &n->pci);
            n->kind = p->attr->pcidev.class_id == 0x0207 ? PT_NIC_IB : PT_NIC_ETH;
            /* the model, as for GPUs: hwloc's name (libpciaccess builds), else pci.ids */
            const char *dev = info_get(p, "PCIDevice");
            if (dev && *dev) copy_str(n->model, sizeof n->model, dev);
            else if (!pt_topo_pci_name(n->pci.vendor, n->pci.device, n->model, sizeof n->model))
                snprintf(n->model, sizeof n->model, "[%04x:%04x]", n->pci.vendor, n->pci.device);
        }
        if (o->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS) {
            copy_str(n->name, sizeof n->name, o->name);
            const char *ll = info_get(o, "Port1LinkLayer");
            n->kind = ll && !strcmp(ll, "Ethernet") ? PT_NIC_ROCE : PT_NIC_IB;
        } else {
            copy_str(n->netdev, sizeof n->netdev, o->name);
            if (!n->name[0]) copy_str(n->name, sizeof n->name, o->name);
        }
    }
    qsort(t->gpu, (size_t)t->ngpus, sizeof *t->gpu, cmp_gpu);
    qsort(t->nic, (size_t)t->nnics, sizeof *t->nic, cmp_nic);
    name_gpus(h, t);
    int thissystem = hwloc_topology_is_thissystem(h);
    if (thissystem) {
        long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
        if (pages > 0 && psize > 0) t->os_memory = (uint64_t)pages * (uint64_t)psize;
    }
    for (int i = 0; i < t->ngpus; i++) t->gpu[i].minor = gpu_minor(t->gpu[i].pci.busid, i, thissystem);

    int rc = pt_topo_alloc_matrices_(t);
    if (rc) return rc;
    for (int i = 0; i < t->ngpus; i++) {
        hwloc_obj_t a = find_pci(h, t->gpu[i].pci.busid);
        for (int j = 0; j < t->ngpus; j++)
            t->gg_class[i * t->ngpus + j] = (unsigned char)pci_path(h, a, find_pci(h, t->gpu[j].pci.busid));
        for (int j = 0; j < t->nnics; j++)
            t->gn_class[i * t->nnics + j] = (unsigned char)pci_path(h, a, find_pci(h, t->nic[j].pci.busid));
    }
    for (int i = 0; i < t->nnics; i++) {
        hwloc_obj_t a = find_pci(h, t->nic[i].pci.busid);
        for (int j = 0; j < t->nnics; j++)
            t->nn_class[i * t->nnics + j] = (unsigned char)pci_path(h, a, find_pci(h, t->nic[j].pci.busid));
    }
    read_measurements(t, h);
    pt_topo_update_nvlinks(t);
    return PT_OK;
}

/* hwloc 2.9's XML import dereferences a missing cpuset or nodeset of a
 * normal or memory object (found by tests/fuzz/fuzz_topo_xml: a PU without
 * complete_cpuset crashes hwloc_topology_load).  hwloc writes all four sets
 * on every such object, and an os_index on every PU and NUMA node, so
 * require them before handing hwloc the text.
 * Returns 0, or -1 with a one-line reason in why. */
#define PT_TOPO_MAX_OS_INDEX ((1 << 20) - 1) /* PUs and NUMA nodes; Linux allows 8192 CPUs (MAXSMP) */
static int xml_sets_present(const char *xml, char *why, size_t len)
{
    static const char *const sets[] = {"cpuset", "complete_cpuset", "nodeset", "complete_nodeset"};
    static const char *const io_types[] = {"PCIDev", "OSDev", "Bridge", "Misc"};
    for (const char *p = strstr(xml, "<object"); p; p = strstr(p + 1, "<object")) {
        /* the tag up to its first '>' (hwloc escapes '>' inside values) */
        const char *end = strchr(p, '>');
        if (!end) end = p + strlen(p);
        char *tag = strndup(p, (size_t)(end - p));
        if (!tag) return 0; /* let hwloc fail on its own */
        const char *ty = strstr(tag, " type=\"");
        char type[32] = "";
        if (ty) sscanf(ty + 7, "%31[^\"]", type);
        int io = 0;
        for (size_t i = 0; i < sizeof io_types / sizeof io_types[0]; i++) io |= !strcmp(type, io_types[i]);
        if (!strcmp(type, "PU") || !strcmp(type, "NUMANode")) {
            /* hwloc sets bit os_index of a bitmap for these: a missing index
             * (read as 2^32-1) or a huge one makes it allocate and clear
             * 512 MB for 5 s (found by fuzz_topo_xml) */
            const char *v = strstr(tag, " os_index=\"");
            char *e = NULL;
            unsigned long idx = v && isdigit((unsigned char)v[11]) ? strtoul(v + 11, &e, 10) : 0;
            if (!e || *e != '"' || idx > PT_TOPO_MAX_OS_INDEX) {
                snprintf(why, len, "object of type '%s' at byte %zu has no os_index from 0 to %d",
                         type, (size_t)(p - xml), PT_TOPO_MAX_OS_INDEX);
                free(tag);
                return -1;
            }
        }
        for (size_t i = 0; !io && i < sizeof sets / sizeof sets[0]; i++) {
            char key[32];
            snprintf(key, sizeof key, " %s=\"", sets[i]);
            const char *v = strstr(tag, key);
            int ok = v != NULL;
            if (ok) {
                /* hwloc_bitmap_snprintf's alphabet: "0x0000000f,,0x00000100",
                 * "0xf...f,..." for an infinite set */
                v += strlen(key);
                const char *q = v;
                ok = q[0] == '0' && q[1] == 'x';
                while (ok && *q && *q != '"') {
                    if (!isxdigit((unsigned char)*q) && *q != 'x' && *q != ',' && *q != '.') ok = 0;
                    q++;
                }
                if (*q != '"') ok = 0;
                if (ok && q == v) ok = 0; /* empty value */
            }
            if (!ok) {
                snprintf(why, len, "object of type '%s' at byte %zu has no valid %s attribute",
                         type[0] ? type : "?", (size_t)(p - xml), sets[i]);
                free(tag);
                return -1;
            }
        }
        free(tag);
    }
    return 0;
}

/* hwloc 2.9's XML import trusts its input: besides the missing sets that
 * xml_sets_present refuses, an object inserted out of order (siblings whose
 * cpusets are not sorted; found by tests/fuzz/fuzz_topo_xml,
 * regress/topo_xml/hwloc-out-of-order.xml) makes it print "out-of-order
 * XML topology load" and then dereference NULL in
 * hwloc_bitmap_compare_first (lstopo --input crashes the same way, with
 * either XML backend once the XML is well formed).  Reproducing hwloc's
 * insertion rules to refuse every such file beforehand would be a second
 * copy of hwloc's importer, so the untrusted text is first imported, and
 * checked with hwloc_topology_check (which aborts on an inconsistent tree),
 * in a forked child process: a crash, abort or hang there becomes one line,
 * and the caller (a root-run ptrain-topo, or slurmstepd through the plugin)
 * never runs hwloc on a file it has not survived.  hwloc's XML import is
 * deterministic, so the caller's own import of the same bytes follows the
 * same path.  The child restores default signal dispositions (no handler of
 * the host process or of a sanitizer runs), writes no core file, discards
 * hwloc's stderr banners and is killed by SIGALRM after
 * PT_TOPO_XML_CHILD_S seconds.  glibc's fork() leaves malloc usable in the
 * child of a multithreaded process (slurmstepd).
 * Returns 0 (imported), 1 (hwloc refused it without crashing), or -1 with
 * a one-line reason in why. */
#define PT_TOPO_XML_CHILD_S 60
static int xml_import_isolated(const char *xml, size_t len, char *why, size_t whylen)
{
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(why, whylen, "cannot fork a process to import it safely: %s", strerror(errno));
        return -1;
    }
    if (pid == 0) {
        static const int sigs[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGALRM, SIGTERM};
        for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) signal(sigs[i], SIG_DFL);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        struct rlimit nocore = {0, 0};
        setrlimit(RLIMIT_CORE, &nocore);
        int null = open("/dev/null", O_WRONLY);
        if (null >= 0) dup2(null, STDERR_FILENO);
        alarm(PT_TOPO_XML_CHILD_S);
        hwloc_topology_t h;
        if (hwloc_topology_init(&h) < 0) _exit(4);
        hwloc_topology_set_io_types_filter(h, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
        if (hwloc_topology_set_xmlbuffer(h, xml, (int)len + 1) < 0 || hwloc_topology_load(h) < 0) _exit(3);
        hwloc_topology_check(h);
        _exit(0); /* no atexit handlers, no stdio flush of the parent's buffers */
    }
    int st = 0;
    pid_t w;
    while ((w = waitpid(pid, &st, 0)) < 0 && errno == EINTR) {}
    if (w < 0) {
        snprintf(why, whylen, "cannot wait for the process importing it: %s", strerror(errno));
        return -1;
    }
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0) return 0;
    if (WIFEXITED(st) && WEXITSTATUS(st) == 3) return 1;
    if (WIFSIGNALED(st) && WTERMSIG(st) == SIGALRM)
        snprintf(why, whylen, "its import did not finish within %d s", PT_TOPO_XML_CHILD_S);
    else if (WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT)
        snprintf(why, whylen, "the imported tree is inconsistent: hwloc aborted");
    else if (WIFSIGNALED(st))
        snprintf(why, whylen, "hwloc crashed with signal %d, %s", WTERMSIG(st), strsignal(WTERMSIG(st)));
    else
        snprintf(why, whylen, "the importing process failed with exit status %d", WEXITSTATUS(st));
    return -1;
}

int pt_topo_load_hwloc(pt_topo *t, const char *xmlfile)
{
    memset(t, 0, sizeof *t);
    if (!xmlfile) {
        const char *env = getenv(PT_TOPO_ENV);
        if (env && *env) xmlfile = env;
    }
    hwloc_topology_t h;
    if (hwloc_topology_init(&h) < 0) return pt_fail(PT_ENOMEM, "hwloc_topology_init failed");
    hwloc_topology_set_io_types_filter(h, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    copy_str(t->source, sizeof t->source, xmlfile ? xmlfile : "this machine");
    char *xml = NULL;
    if (xmlfile) {
        /* read it ourselves (a regular file only, FIFOs refused without
         * blocking) and hand hwloc the bytes: no second open to race */
        size_t len = 0;
        int rc = pt_read_regular(xmlfile, "topology file", &xml, &len);
        if (rc) {
            hwloc_topology_destroy(h);
            return rc;
        }
        char why[160];
        if (xml_sets_present(xml, why, sizeof why) < 0) {
            free(xml);
            hwloc_topology_destroy(h);
            return pt_fail(PT_EFORMAT, "topology file '%s' is not hwloc XML as hwloc writes it: %s", xmlfile, why);
        }
        if (len == 0 || len > INT_MAX - 1) {
            free(xml);
            hwloc_topology_destroy(h);
            return pt_fail(PT_EFORMAT, "topology file '%s' is not hwloc XML", xmlfile);
        }
        int imp = xml_import_isolated(xml, len, why, sizeof why);
        if (imp != 0) {
            free(xml);
            hwloc_topology_destroy(h);
            if (imp > 0) return pt_fail(PT_EFORMAT, "topology file '%s' is not valid hwloc XML", xmlfile);
            return pt_fail(PT_EFORMAT, "topology file '%s': hwloc cannot import this XML (%s)", xmlfile, why);
        }
        if (hwloc_topology_set_xmlbuffer(h, xml, (int)len + 1) < 0) {
            free(xml);
            hwloc_topology_destroy(h);
            return pt_fail(PT_EFORMAT, "topology file '%s' is not hwloc XML", xmlfile);
        }
    }
    /* Keep the user distances and infos a cache carries. */
    int loaded = hwloc_topology_load(h);
    free(xml); /* hwloc parsed it during load */
    if (loaded < 0) {
        hwloc_topology_destroy(h);
        if (xmlfile) return pt_fail(PT_EFORMAT, "topology file '%s' is not valid hwloc XML", xmlfile);
        return pt_fail(PT_EIO, "hwloc could not load this machine's topology");
    }
    t->hw = h;
    int rc = build_model(t, h);
    if (rc) pt_topo_free(t);
    return rc;
}

/* ---- XML export ------------------------------------------------------------- */
static int set_info(hwloc_obj_t o, const char *name, const char *value)
{
    for (unsigned i = 0; i < o->infos_count; i++)
        if (!strcmp(o->infos[i].name, name)) {
            char *v = strdup(value);
            if (!v) return -1;
            free(o->infos[i].value);   /* hwloc allocates info strings with malloc */
            o->infos[i].value = v;
            return 0;
        }
    return hwloc_obj_add_info(o, name, value);
}

static int set_info_d(hwloc_obj_t o, const char *name, double v)
{
    char buf[64];
    snprintf(buf, sizeof buf, "%.9g", v);
    return set_info(o, name, buf);
}

/* Write one collective fit (see coll_info_read; nranks 0: no Ranks key).
 * Returns non-zero when an attribute could not be set. */
static int coll_info_write(hwloc_obj_t root, const char *cls, int nranks, const size_t bytes[2],
                           const double time_us[][2], const double *lat_us, const double *busbw)
{
    char key[80];
    int bad = 0;
    if (nranks > 0) {
        snprintf(key, sizeof key, "PtrainNetColl%sRanks", cls);
        bad |= set_info_d(root, key, nranks);
    }
    for (int s = 0; s < 2; s++) {
        snprintf(key, sizeof key, "PtrainNetColl%sBytes%d", cls, s);
        bad |= set_info_d(root, key, (double)bytes[s]);
    }
    for (int k = 0; k < PT_TOPO_COLL_N; k++) {
        snprintf(key, sizeof key, "PtrainNetColl%s%sLatencyUs", cls, coll_kind_key[k]);
        bad |= set_info_d(root, key, lat_us[k]);
        snprintf(key, sizeof key, "PtrainNetColl%s%sBusGBps", cls, coll_kind_key[k]);
        bad |= set_info_d(root, key, busbw[k]);
        for (int s = 0; s < 2; s++) {
            snprintf(key, sizeof key, "PtrainNetColl%s%sUs%d", cls, coll_kind_key[k], s);
            bad |= set_info_d(root, key, time_us[k][s]);
        }
    }
    return bad;
}

static int put_distances(hwloc_topology_t h, const char *name, int n, hwloc_obj_t *objs, const double *gbps)
{
    struct hwloc_distances_s *d[4];
    unsigned nr = 4;
    if (hwloc_distances_get_by_name(h, name, &nr, d, 0) == 0)
        for (unsigned r = 0; r < nr && r < 4; r++) hwloc_distances_release_remove(h, d[r]);
    int any = 0;
    for (int i = 0; i < n * n; i++) any |= gbps[i] > 0;
    if (!any || n < 2) return 0;   /* hwloc needs 2 objects; diagonals also go to infos */
    hwloc_uint64_t *vals = malloc((size_t)n * (size_t)n * sizeof *vals);
    if (!vals) return -1;
    for (int i = 0; i < n * n; i++) vals[i] = (hwloc_uint64_t)llround(gbps[i] * 1e3);
    hwloc_distances_add_handle_t hd = hwloc_distances_add_create(
        h, name, HWLOC_DISTANCES_KIND_FROM_USER | HWLOC_DISTANCES_KIND_MEANS_BANDWIDTH, 0);
    int rc = -1;
    if (hd && hwloc_distances_add_values(h, hd, (unsigned)n, objs, vals, 0) == 0 &&
        hwloc_distances_add_commit(h, hd, 0) == 0)
        rc = 0;
    free(vals);
    return rc;
}

int pt_topo_to_xml(const pt_topo *t, char **out)
{
    *out = NULL;
    if (!t->hw) return pt_fail(PT_EUNSUPP, "XML output needs a model built by hwloc; '%s' was loaded from JSON", t->source);
    hwloc_topology_t h;
    if (hwloc_topology_dup(&h, (hwloc_topology_t)t->hw) < 0) return pt_fail(PT_ENOMEM, "hwloc_topology_dup failed");
    int rc = PT_OK, bad = 0;
    hwloc_obj_t *objs = calloc((size_t)(t->ngpus > t->nnuma ? t->ngpus : t->nnuma) + 1, sizeof *objs);
    if (!objs) { hwloc_topology_destroy(h); return pt_fail(PT_ENOMEM, "topology: out of memory"); }
    for (int i = 0; i < t->ngpus; i++) objs[i] = find_pci(h, t->gpu[i].pci.busid);
    bad |= put_distances(h, PT_TOPO_DIST_GPU, t->ngpus, objs, t->gg_gbps);
    bad |= put_distances(h, PT_TOPO_DIST_GPU_NOP2P, t->ngpus, objs, t->gg_gbps_nop2p);
    for (int i = 0; i < t->ngpus; i++) {
        if (t->gpu[i].h2d_gbps > 0) bad |= set_info_d(objs[i], "PtrainH2DGBps", t->gpu[i].h2d_gbps);
        if (t->gpu[i].d2h_gbps > 0) bad |= set_info_d(objs[i], "PtrainD2HGBps", t->gpu[i].d2h_gbps);
    }
    for (int i = 0; i < t->nnuma; i++) objs[i] = hwloc_get_numanode_obj_by_os_index(h, (unsigned)t->numa[i].os_index);
    bad |= put_distances(h, PT_TOPO_DIST_NUMA, t->nnuma, objs, t->numa_gbps);
    for (int i = 0; i < t->nnuma; i++)
        if (objs[i] && t->numa[i].membw_gbps > 0) bad |= set_info_d(objs[i], "PtrainCopyGBps", t->numa[i].membw_gbps);
    free(objs);
    hwloc_obj_t root = hwloc_get_root_obj(h);
    if (t->os_memory) {
        char mem[32];
        snprintf(mem, sizeof mem, "%" PRIu64, t->os_memory);
        bad |= set_info(root, "PtrainOSMemory", mem);
    }
    if (t->gpu_probe) {
        bad |= set_info_d(root, "PtrainGPUProbe", t->gpu_probe);
        if (t->gpu_probe_note[0]) bad |= set_info(root, "PtrainGPUProbeNote", t->gpu_probe_note);
    }
    const pt_topo_net *n = &t->net;
    if (n->measured) {
        bad |= set_info_d(root, "PtrainNetMeasured", 1);
        bad |= set_info_d(root, "PtrainNetRanks", n->nranks);
        bad |= set_info_d(root, "PtrainNetNodes", n->nnodes);
        bad |= set_info_d(root, "PtrainNetMsgBytes", (double)n->msg_bytes);
        bad |= set_info_d(root, "PtrainNetIntraLatencyUs", n->intra_lat_us);
        bad |= set_info_d(root, "PtrainNetIntraGBps", n->intra_gbps);
        bad |= set_info_d(root, "PtrainNetInterLatencyUs", n->inter_lat_us);
        bad |= set_info_d(root, "PtrainNetInterGBps", n->inter_gbps);
        bad |= set_info_d(root, "PtrainNetAllreduceBytes", (double)n->ar_bytes);
        bad |= set_info_d(root, "PtrainNetAllreduceUs", n->ar_time_us);
        bad |= set_info_d(root, "PtrainNetAllreduceAlgbw", n->ar_algbw);
        bad |= set_info_d(root, "PtrainNetAllreduceBusbw", n->ar_busbw);
        if (n->ring_lat_us > 0) bad |= set_info_d(root, "PtrainNetRingStepLatencyUs", n->ring_lat_us);
        if (n->ring_gbps > 0) {
            bad |= set_info_d(root, "PtrainNetRingGBps", n->ring_gbps);
            bad |= set_info_d(root, "PtrainNetFitAllreduceBytes", (double)n->fit_bytes);
            bad |= set_info_d(root, "PtrainNetFitAllreduceUs", n->fit_time_us);
        }
        if (n->coll_bytes[0] > 0)
            bad |= coll_info_write(root, "", 0, n->coll_bytes, n->coll_time_us, n->coll_lat_us, n->coll_busbw);
        for (int l = 0; l < PT_TOPO_CLASS_N; l++) {
            const pt_topo_coll_fit *f = &n->coll_class[l];
            if (f->nranks > 0)
                bad |= coll_info_write(root, coll_class_key[l], f->nranks, f->bytes, f->time_us, f->lat_us, f->busbw);
        }
        if (n->pair_us > 0 && n->pair_busy_us > 0) {
            bad |= set_info_d(root, "PtrainNetPairAllreduceBytes", (double)n->pair_bytes);
            bad |= set_info_d(root, "PtrainNetPairAllreduceUs", n->pair_us);
            bad |= set_info_d(root, "PtrainNetPairBusyAllreduceUs", n->pair_busy_us);
        }
        bad |= set_info(root, "PtrainNetNodeNames", n->nodes);
    }
    if (t->gemm_gflops > 0) bad |= set_info_d(root, "PtrainGemmGFlops", t->gemm_gflops);
    if (t->gemm_gflops_bf16 > 0) bad |= set_info_d(root, "PtrainGemmBf16GFlops", t->gemm_gflops_bf16);
    if (t->cpu_bf16_known) bad |= set_info(root, "PtrainCpuBf16", pt_bf16_isa_name(t->cpu_bf16));
    if (t->gemm_rinf_gflops > 0 && t->gemm_n_half > 0) {
        bad |= set_info_d(root, "PtrainGemmRinfGFlops", t->gemm_rinf_gflops);
        bad |= set_info_d(root, "PtrainGemmNHalfRows", t->gemm_n_half);
    }
    char *buf = NULL;
    int len = 0;
    if (bad) rc = pt_fail(PT_ENOMEM, "cannot attach measurements to the hwloc topology");
    else if (hwloc_topology_export_xmlbuffer(h, &buf, &len, 0) < 0 || !buf)
        rc = pt_fail(PT_EIO, "hwloc could not export the topology as XML");
    else {
        *out = malloc((size_t)len + 1);
        if (!*out) rc = pt_fail(PT_ENOMEM, "topology: out of memory");
        else { memcpy(*out, buf, (size_t)len); (*out)[len] = 0; }
        hwloc_free_xmlbuffer(h, buf);
    }
    hwloc_topology_destroy(h);
    return rc;
}

/* ---- bandwidth, islands ------------------------------------------------------ */
double pt_topo_link_gbps(const pt_topo *t, int kind, int i, int j, int *source)
{
    if (source) *source = PT_BW_ESTIMATED;
    if (kind == PT_DEV_GPU) {
        int n = t->ngpus;
        if (i < 0 || j < 0 || i >= n || j >= n) return 0;
        double a = t->gg_gbps[i * n + j], b = t->gg_gbps[j * n + i];
        if (a > 0 && b > 0) { if (source) *source = PT_BW_MEASURED; return a < b ? a : b; }
        if (a > 0 || b > 0) { if (source) *source = PT_BW_MEASURED; return a > 0 ? a : b; }
        double li = t->gpu[i].pci.link_gbps, lj = t->gpu[j].pci.link_gbps;
        double pcie = li > 0 && lj > 0 ? (li < lj ? li : lj) : (li > 0 ? li : (lj > 0 ? lj : 15.75));
        switch ((pt_link_class)t->gg_class[i * n + j]) {
        case PT_LINK_NV: return t->gg_nvlinks[i * n + j] * PT_TOPO_NVLINK_GBPS;
        case PT_LINK_PIX: case PT_LINK_PXB: return pcie;
        case PT_LINK_PHB: return 0.8 * pcie;
        case PT_LINK_NODE: return 0.6 * pcie;
        case PT_LINK_SELF: return 0;
        default: return 0.4 * pcie;
        }
    }
    int n = t->nnuma;
    if (i < 0 || j < 0 || i >= n || j >= n) return 0;
    double a = t->numa_gbps[i * n + j], b = t->numa_gbps[j * n + i];
    if (a > 0 && b > 0) { if (source) *source = PT_BW_MEASURED; return a < b ? a : b; }
    if (i == j) return 1.0;
    return t->numa[i].package == t->numa[j].package ? 1.0 : 0.5;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int pt_topo_islands_find(const pt_topo *t, pt_topo_islands *out)
{
    memset(out, 0, sizeof *out);
    out->kind = t->ngpus > 0 ? PT_DEV_GPU : PT_DEV_NUMA;
    int n = out->kind == PT_DEV_GPU ? t->ngpus : t->nnuma;
    if (n < 1) return pt_fail(PT_EINVAL, "islands: the model has no GPU and no NUMA node");
    if (n > 64) return pt_fail(PT_EINVAL, "islands: %d devices, at most 64 supported", n);
    out->ndev = n;
    double v[64 * 63 / 2 + 1];
    int m = 0;
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++) v[m++] = pt_topo_link_gbps(t, out->kind, i, j, NULL);
    double thr = 0;
    if (m > 0) {
        qsort(v, (size_t)m, sizeof *v, cmp_double);
        if (v[m - 1] > 1.5 * v[0]) {
            double best = 1.0;
            for (int k = 1; k < m; k++) {
                double r = v[k - 1] > 0 ? v[k] / v[k - 1] : INFINITY;
                if (r > best) { best = r; thr = v[k]; }
            }
        }
    }
    out->threshold_gbps = thr;
    for (int i = 0; i < n; i++) out->island_of[i] = -1;
    int members[64];
    for (int i = 0; i < n; i++) {
        if (out->island_of[i] >= 0) continue;
        int id = out->nislands++, cnt = 0;
        out->island_of[i] = id;
        members[cnt++] = i;
        for (int j = i + 1; j < n; j++) {
            if (out->island_of[j] >= 0) continue;
            int fits = 1;
            for (int k = 0; k < cnt && fits; k++)
                fits = pt_topo_link_gbps(t, out->kind, j, members[k], NULL) >= thr;
            if (fits) { out->island_of[j] = id; members[cnt++] = j; }
        }
    }
    return PT_OK;
}

int pt_topo_device_order(const pt_topo *t, int *order, int cap)
{
    const int n = t->ngpus > 0 ? t->ngpus : t->nnuma;
    if (n < 1 || !order || cap < n) return -1;
    pt_topo_islands isl;
    if (pt_topo_islands_find(t, &isl) != PT_OK) { /* too many devices: index order */
        for (int d = 0; d < n; d++) order[d] = d;
        return n;
    }
    int k = 0;
    for (int id = 0; id < isl.nislands; id++) /* island ids follow their lowest device */
        for (int d = 0; d < n; d++)
            if (isl.island_of[d] == id) order[k++] = d;
    return k;
}

double pt_topo_slowest_link(const pt_topo *t, int kind, const int *dev, int n, int *a, int *b, int *source)
{
    int nd = kind == PT_DEV_GPU ? t->ngpus : t->nnuma;
    if (n < 1) { pt_fail(PT_EINVAL, "slowest link: empty device set"); return -1; }
    for (int k = 0; k < n; k++)
        if (dev[k] < 0 || dev[k] >= nd) {
            pt_fail(PT_EINVAL, "slowest link: device %d out of range (0..%d)", dev[k], nd - 1);
            return -1;
        }
    double best = n == 1 ? 0 : INFINITY;
    int ba = dev[0], bb = dev[0], bs = PT_BW_ESTIMATED;
    for (int x = 0; x < n; x++)
        for (int y = x + 1; y < n; y++) {
            if (dev[x] == dev[y]) continue;
            int s;
            double g = pt_topo_link_gbps(t, kind, dev[x], dev[y], &s);
            if (g < best) { best = g; ba = dev[x]; bb = dev[y]; bs = s; }
        }
    if (isinf(best)) best = 0;
    if (a) *a = ba;
    if (b) *b = bb;
    if (source) *source = bs;
    return best;
}

/* ---- warnings, gres ------------------------------------------------------------ */
static int warn(char *buf, size_t len, size_t *used, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int warn(char *buf, size_t len, size_t *used, const char *fmt, ...)
{
    if (*used < len) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(buf + *used, len - *used, fmt, ap);
        va_end(ap);
        if (k > 0) *used += (size_t)k;
        if (*used < len) { buf[(*used)++] = '\n'; buf[*used < len ? *used : len - 1] = 0; }
        else buf[len - 1] = 0;
    }
    return 1;
}

static void degraded(const pt_topo_pci *p, const char *what, const pt_topo_pci *all, size_t stride, int n,
                     char *buf, size_t len, size_t *used, int *count)
{
    double best = 0;
    for (int i = 0; i < n; i++) {
        const pt_topo_pci *q = (const pt_topo_pci *)((const char *)all + stride * (size_t)i);
        if (q->vendor == p->vendor && q->device == p->device && q->link_gbps > best) best = q->link_gbps;
    }
    if (p->link_gbps > 0 && p->link_gbps < 0.99 * best)
        *count += warn(buf, len, used, "degraded PCIe link: %s (%s) runs at %.2f GB/s, %.2f GB/s for the same device elsewhere",
                       what, p->busid, p->link_gbps, best);
}

int pt_topo_warnings(const pt_topo *t, char *buf, size_t len)
{
    size_t used = 0;
    int count = 0;
    if (len) buf[0] = 0;
    for (int i = 0; i < t->ngpus; i++) {
        char what[32];
        snprintf(what, sizeof what, "GPU%d", i);
        degraded(&t->gpu[i].pci, what, &t->gpu[0].pci, sizeof t->gpu[0], t->ngpus, buf, len, &used, &count);
    }
    for (int i = 0; i < t->nnics; i++)
        degraded(&t->nic[i].pci, t->nic[i].name, &t->nic[0].pci, sizeof t->nic[0], t->nnics, buf, len, &used, &count);
    int hca = 0;
    for (int j = 0; j < t->nnics; j++) hca |= t->nic[j].kind != PT_NIC_ETH;
    for (int i = 0; i < t->ngpus && t->nnics > 0; i++) {
        int near = 0;
        for (int j = 0; j < t->nnics; j++)
            if ((!hca || t->nic[j].kind != PT_NIC_ETH) && t->gn_class[i * t->nnics + j] > PT_LINK_SYS) near = 1;
        if (!near)
            count += warn(buf, len, &used, "GPU%d (%s) is far from every %s: all paths cross the SMP interconnect (SYS)",
                          i, t->gpu[i].pci.busid, hca ? "InfiniBand/RoCE HCA" : "NIC");
    }
    uint64_t numa_total = 0;
    for (int i = 0; i < t->nnuma; i++) numa_total += t->numa[i].memory;
    if (t->os_memory && t->nnuma && (double)numa_total < 0.5 * (double)t->os_memory)
        count += warn(buf, len, &used,
                      "hwloc reports %.1f GiB of memory in %d NUMA node%s but the OS has %.1f GiB: the NUMA "
                      "memory figures are unreliable here (common in VMs)",
                      numa_total / 1073741824.0, t->nnuma, t->nnuma > 1 ? "s" : "", t->os_memory / 1073741824.0);
    if (t->nnuma > 1) {
        uint64_t mmax = 0;
        int cmax = 0;
        for (int i = 0; i < t->nnuma; i++) {
            if (t->numa[i].memory > mmax) mmax = t->numa[i].memory;
            if (t->numa[i].ncores > cmax) cmax = t->numa[i].ncores;
        }
        for (int i = 0; i < t->nnuma; i++) {
            if ((double)t->numa[i].memory < 0.8 * (double)mmax)
                count += warn(buf, len, &used, "unbalanced NUMA: node %d has %.1f GiB of memory, the largest has %.1f GiB",
                              t->numa[i].os_index, t->numa[i].memory / 1073741824.0, mmax / 1073741824.0);
            if (t->numa[i].ncores < 0.8 * cmax)
                count += warn(buf, len, &used, "unbalanced NUMA: node %d has %d cores, the largest has %d",
                              t->numa[i].os_index, t->numa[i].ncores, cmax);
        }
        if (t->ngpus >= t->nnuma) {
            int gmin = 1 << 30, gmax = 0;
            for (int i = 0; i < t->nnuma; i++) {
                if (!t->numa[i].ncores) continue;
                int c = 0;
                for (int g = 0; g < t->ngpus; g++) c += t->gpu[g].pci.numa == t->numa[i].os_index;
                if (c < gmin) gmin = c;
                if (c > gmax) gmax = c;
            }
            if (gmax - gmin > 1)
                count += warn(buf, len, &used, "unbalanced NUMA: GPUs per NUMA node range from %d to %d", gmin, gmax);
        }
        double bmax = 0;
        for (int i = 0; i < t->nnuma; i++) if (t->numa[i].membw_gbps > bmax) bmax = t->numa[i].membw_gbps;
        for (int i = 0; i < t->nnuma; i++)
            if (t->numa[i].membw_gbps > 0 && t->numa[i].membw_gbps < 0.75 * bmax)
                count += warn(buf, len, &used, "unbalanced NUMA: node %d copies at %.1f GB/s, the best node at %.1f GB/s",
                              t->numa[i].os_index, t->numa[i].membw_gbps, bmax);
    }
    return count;
}

size_t pt_topo_gres(const pt_topo *t, char *buf, size_t len)
{
    size_t used = 0;
    if (len) buf[0] = 0;
#define APPEND(...) do { int k_ = snprintf(used < len ? buf + used : NULL, used < len ? len - used : 0, __VA_ARGS__); \
                         if (k_ > 0) used += (size_t)k_; } while (0)
    for (int i = 0; i < t->ngpus; i++) {
        APPEND("Name=gpu File=/dev/nvidia%d", t->gpu[i].minor);
        if (t->gpu[i].pci.cores[0]) APPEND(" Cores=%s", t->gpu[i].pci.cores);
        int any = 0;
        for (int j = 0; j < t->ngpus; j++) any |= t->gg_nvlinks[i * t->ngpus + j] > 0;
        if (any) {
            APPEND(" Links=");
            for (int j = 0; j < t->ngpus; j++)
                APPEND("%s%d", j ? "," : "", i == j ? -1 : t->gg_nvlinks[i * t->ngpus + j]);
        }
        APPEND("\n");
    }
#undef APPEND
    return used;
}
