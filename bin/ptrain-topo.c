/* SPDX-License-Identifier: MIT */
/* ptrain-topo: the node model, link classes, islands and bandwidth probes.
 * --energy: what the machine can measure and which clocks can be set.
 * See ptrain-topo(1). */
#define _POSIX_C_SOURCE 200809L
#include "config.h"
#include "backend/blas.h"
#include "bin/tool_util.h"
#include "core/core.h"
#include "core/cpu.h"
#include "core/file.h"
#include "topo/topo.h"
#include "topo/topo_plan.h"
#include "topo/probe_gpu.h"
#include "topo/probe_mpi.h"
#include "energy/probe.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


static void usage(FILE *f)
{
    fprintf(f,
            "usage: ptrain-topo [--topology FILE | --load FILE] [--probe | --probe-quick]\n"
            "                   [--json | --xml | --gres] [--save FILE] [--strict]\n"
            "  --topology FILE  hwloc XML instead of this machine (also $" PT_TOPO_ENV ")\n"
            "  --load FILE      cached model (ptrain JSON or hwloc XML from --save)\n"
            "  --probe          measure host memory, GPU and MPI bandwidth (srun/mpirun for MPI)\n"
            "  --probe-quick    the same with small messages and few iterations\n"
            "  --json, --xml    print the model as JSON / hwloc XML instead of the report\n"
            "  --gres           print Slurm gres.conf lines for the GPUs\n"
            "  --save FILE      write the model (JSON, or XML if FILE ends in .xml) atomically\n"
            "  --strict         exit 1 when there are warnings\n"
            "  --energy         what this machine can measure (NVML's GPU energy counters, RAPL) and\n"
            "                   which clocks this user can set (NVML, cpufreq), for ptrain-run's energy\n"
            "  --help, --version  this text; the version\n"
            "exit: 0 fine, 1 warnings with --strict, 2 bad input, 3 probe or write failure\n");
}

static const char *nic_kind(int k) { return k == PT_NIC_IB ? "InfiniBand" : k == PT_NIC_ROCE ? "RoCE" : "Ethernet"; }

static void cell(char *b, size_t n, int cls, int nv, double gbps)
{
    char c[16];
    if (cls == PT_LINK_NV) snprintf(c, sizeof c, "NV%d", nv);
    else snprintf(c, sizeof c, "%s", pt_link_class_name((pt_link_class)cls));
    if (gbps > 0) snprintf(b, n, "%s %.0f", c, gbps);
    else snprintf(b, n, "%s", c);
}

/* The host: packages, cores, CPU and BLAS, GEMM rates, the NUMA nodes and
 * their measured copy bandwidths. */
static void report_host(const pt_topo *t)
{
    printf("Node %s (%s)\n", t->hostname[0] ? t->hostname : "?", t->source);
    printf("  %d package%s, %d NUMA node%s, %d cores, %d PUs%s%s\n", t->npackages, t->npackages == 1 ? "" : "s",
           t->nnuma, t->nnuma == 1 ? "" : "s", t->ncores, t->npus, t->cpu_model[0] ? "; " : "", t->cpu_model);
    if (t->cpu_bf16_known)
        printf("  CPU bf16 instructions: %s%s\n", pt_bf16_isa_name(t->cpu_bf16),
               t->cpu_bf16 == PT_BF16_ISA_AMX ? "" : " (a bf16 GEMM runs fp32 sgemm on converted tiles: slower than fp32)");
    printf("  BLAS (this host): %s\n", pt_blas_summary());
    if (t->gemm_gflops > 0) printf("  sgemm, one core: %.1f GFLOP/s (measured)\n", t->gemm_gflops);
    if (t->gemm_gflops_bf16 > 0) printf("  bf16 GEMM, one core: %.1f GFLOP/s (measured)\n", t->gemm_gflops_bf16);
    if (t->gemm_n_half > 0)
        printf("  sgemm over rows n: %.1f n / (n + %.1f) GFLOP/s (Hockney fit)\n", t->gemm_rinf_gflops, t->gemm_n_half);
    printf("\n  NUMA  Package  Memory(GiB)  Cores  PUs  CPUs              Copy GB/s\n");
    for (int i = 0; i < t->nnuma; i++) {
        const pt_topo_numa *n = &t->numa[i];
        char bw[32] = "-";
        if (n->membw_gbps > 0) snprintf(bw, sizeof bw, "%.1f", n->membw_gbps);
        printf("  %-4d  %-7d  %11.1f  %5d  %3d  %-16s  %s\n", n->os_index, n->package, n->memory / 1073741824.0,
               n->ncores, n->npus, n->cpus, bw);
    }
    int anyx = 0;
    for (int i = 0; i < t->nnuma * t->nnuma; i++) anyx |= (i / t->nnuma != i % t->nnuma) && t->numa_gbps[i] > 0;
    if (anyx) {
        printf("\n  Copy GB/s, CPUs of row NUMA node over memory of column NUMA node:\n        ");
        for (int j = 0; j < t->nnuma; j++) printf("%8d", t->numa[j].os_index);
        printf("\n");
        for (int i = 0; i < t->nnuma; i++) {
            printf("  %4d  ", t->numa[i].os_index);
            for (int j = 0; j < t->nnuma; j++) printf("%8.1f", t->numa_gbps[i * t->nnuma + j]);
            printf("\n");
        }
    }
}

/* One line per GPU and per NIC. */
static void report_devices(const pt_topo *t)
{
    printf("\n  GPUs: %d   NICs: %d\n", t->ngpus, t->nnics);
    for (int i = 0; i < t->ngpus; i++) {
        const pt_topo_gpu *g = &t->gpu[i];
        printf("  GPU%d  %s  %s  PCIe %.2f GB/s  /dev/nvidia%d%s%s", i, g->pci.busid, g->model[0] ? g->model : "NVIDIA GPU",
               g->pci.link_gbps, g->minor, g->osdevs[0] ? "  " : "", g->osdevs);
        if (g->h2d_gbps > 0) printf("  H2D %.1f GB/s D2H %.1f GB/s", g->h2d_gbps, g->d2h_gbps);
        printf("\n");
    }
    for (int i = 0; i < t->nnics; i++) {
        const pt_topo_nic *n = &t->nic[i];
        printf("  NIC%d  %s  %s (%s%s%s)%s%s  PCIe %.2f GB/s  NUMA %s  CPUs %s\n", i, n->pci.busid, n->name,
               nic_kind(n->kind), n->netdev[0] && strcmp(n->netdev, n->name) ? ", " : "",
               n->netdev[0] && strcmp(n->netdev, n->name) ? n->netdev : "", n->model[0] ? "  " : "", n->model,
               n->pci.link_gbps,
               n->pci.numas[0] ? n->pci.numas : "N/A", n->pci.cpus[0] ? n->pci.cpus : "N/A");
    }
}

/* The nvidia-smi style matrix of GPU and NIC links (with measured GPU
 * copy rates when there are some) and its legends; ngpus > 0. */
static void report_matrix(const pt_topo *t)
{
    int measured = 0;
    for (int i = 0; i < t->ngpus * t->ngpus; i++) measured |= t->gg_gbps[i] > 0;
    int w = measured ? 10 : 6;
    printf("\n  %-6s", "");
    for (int j = 0; j < t->ngpus; j++) { char h[16]; snprintf(h, sizeof h, "GPU%d", j); printf("%-*s", w, h); }
    for (int j = 0; j < t->nnics; j++) { char h[16]; snprintf(h, sizeof h, "NIC%d", j); printf("%-6s", h); }
    printf("%-18s%-14s\n", "CPU Affinity", "NUMA Affinity");
    char c[32];
    for (int i = 0; i < t->ngpus; i++) {
        printf("  GPU%-3d", i);
        for (int j = 0; j < t->ngpus; j++) {
            cell(c, sizeof c, t->gg_class[i * t->ngpus + j], t->gg_nvlinks[i * t->ngpus + j],
                 i == j ? 0 : t->gg_gbps[i * t->ngpus + j]);
            printf("%-*s", w, c);
        }
        for (int j = 0; j < t->nnics; j++) printf("%-6s", pt_link_class_name((pt_link_class)t->gn_class[i * t->nnics + j]));
        printf("%-18s%-14s\n", t->gpu[i].pci.cpus[0] ? t->gpu[i].pci.cpus : "N/A",
               t->gpu[i].pci.numas[0] ? t->gpu[i].pci.numas : "N/A");
    }
    for (int i = 0; i < t->nnics; i++) {
        printf("  NIC%-3d", i);
        for (int j = 0; j < t->ngpus; j++) printf("%-*s", w, pt_link_class_name((pt_link_class)t->gn_class[j * t->nnics + i]));
        for (int j = 0; j < t->nnics; j++) printf("%-6s", pt_link_class_name((pt_link_class)t->nn_class[i * t->nnics + j]));
        printf("\n");
    }
    printf("\n  Legend:\n"
           "    X    = Self\n"
           "    SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)\n"
           "    NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node\n"
           "    PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)\n"
           "    PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)\n"
           "    PIX  = Connection traversing at most a single PCIe bridge\n"
           "    NV#  = Connection traversing a bonded set of # NVLinks\n");
    if (measured) printf("    a number after the class: measured GPU(row) -> GPU(column) copy GB/s, P2P on\n");
    if (t->nnics) {
        printf("  NIC Legend:\n");
        for (int i = 0; i < t->nnics; i++) printf("    NIC%d: %s\n", i, t->nic[i].name);
    }
}

/* The islands of GPUs (or NUMA nodes) and their slowest links. */
static void report_islands(const pt_topo *t)
{
    pt_topo_islands isl;
    if (pt_topo_islands_find(t, &isl) != PT_OK) return;
    printf("\n  Islands of %s (%d; links >= %.1f GB/s inside):\n", isl.kind == PT_DEV_GPU ? "GPUs" : "NUMA nodes",
           isl.nislands, isl.threshold_gbps);
    for (int k = 0; k < isl.nislands; k++) {
        int dev[64], n = 0;
        for (int d = 0; d < isl.ndev; d++) if (isl.island_of[d] == k) dev[n++] = d;
        printf("    island %d: {", k);
        for (int x = 0; x < n; x++)
            printf("%s%s%d", x ? "," : "", isl.kind == PT_DEV_GPU ? "GPU" : "NUMA", isl.kind == PT_DEV_GPU ? dev[x] : t->numa[dev[x]].os_index);
        int a, b, src;
        double g = pt_topo_slowest_link(t, isl.kind, dev, n, &a, &b, &src);
        if (n > 1) printf("}  slowest link %.1f GB/s (%s)\n", g, src == PT_BW_MEASURED ? "measured" : "estimated");
        else printf("}\n");
    }
    if (isl.ndev > 1) {
        int all[64];
        for (int d = 0; d < isl.ndev; d++) all[d] = d;
        int src;
        double g = pt_topo_slowest_link(t, isl.kind, all, isl.ndev, NULL, NULL, &src);
        printf("    slowest link of the node: %.1f GB/s (%s)\n", g, src == PT_BW_MEASURED ? "measured" : "estimated");
    }
}

/* The MPI probe's per-kind fits per link class: one column per class
 * measured, when one was. */
static void report_coll_classes(const pt_topo_net *n)
{
    const pt_topo_coll_fit *cf = n->coll_class;
    if (!(cf[PT_TOPO_CLASS_NODE].nranks > 0 || cf[PT_TOPO_CLASS_NETWORK].nranks > 0)) return;
    printf("    per link class: alpha per step and busbw of each kind (measured)\n");
    for (int k = -1; k < PT_TOPO_COLL_N; k++) {
        char row[160];
        int len = snprintf(row, sizeof row, "      %-14s", k < 0 ? "" : pt_topo_coll_name(k));
        for (int l = 0; l < PT_TOPO_CLASS_N; l++) {
            char v[48] = "";
            if (k < 0 && cf[l].nranks > 0)
                snprintf(v, sizeof v, "%s, %d ranks", pt_topo_class_name(l), cf[l].nranks);
            else if (k < 0)
                snprintf(v, sizeof v, "%s: not measured", pt_topo_class_name(l));
            else if (cf[l].nranks > 0 && cf[l].busbw[k] > 0)
                snprintf(v, sizeof v, "%8.2f us %9.3f GB/s", cf[l].lat_us[k], cf[l].busbw[k]);
            else if (cf[l].nranks > 0)
                snprintf(v, sizeof v, "not fitted");
            len += snprintf(row + len, sizeof row - (size_t)len, "  %-26s", v);
        }
        while (len > 0 && row[len - 1] == ' ') row[--len] = '\0';
        printf("%s\n", row);
    }
}

/* The MPI probe's results, when it ran: ping-pongs, the allreduce and its
 * ring fit, the pair allreduces and each collective kind's fit. */
static void report_net(const pt_topo_net *n)
{
    if (!n->measured) return;
    printf("\n  MPI probe: %d ranks on %d node%s (%s)\n", n->nranks, n->nnodes, n->nnodes == 1 ? "" : "s", n->nodes);
    if (n->intra_gbps > 0)
        printf("    inside a node : latency %.2f us, bandwidth %.2f GB/s (%zu-byte messages)\n", n->intra_lat_us, n->intra_gbps, n->msg_bytes);
    if (n->inter_gbps > 0)
        printf("    across nodes  : latency %.2f us, bandwidth %.2f GB/s (%zu-byte messages)\n", n->inter_lat_us, n->inter_gbps, n->msg_bytes);
    printf("    allreduce     : %zu bytes in %.1f us, algbw %.3f GB/s, busbw %.3f GB/s\n", n->ar_bytes, n->ar_time_us, n->ar_algbw, n->ar_busbw);
    if (n->ring_gbps > 0)
        printf("    ring step     : latency %.2f us, %.3f GB/s per rank (fit through the allreduce at %zu "
               "and %zu bytes: %.1f us)\n", n->ring_lat_us, n->ring_gbps, n->ar_bytes, n->fit_bytes, n->fit_time_us);
    else if (n->ring_lat_us > 0) printf("    ring step     : latency %.2f us (from the allreduce)\n", n->ring_lat_us);
    if (n->pair_us > 0 && n->pair_busy_us > 0)
        printf("    pair allreduce: %zu bytes in %.1f us with every rank in a pair, %.1f us while half the ranks "
               "compute (+%.1f us)\n", n->pair_bytes, n->pair_us, n->pair_busy_us, n->pair_busy_us - n->pair_us);
    if (n->coll_bytes[0] > 0) {
        printf("    collectives   : each kind at %zu and %zu bytes, t = steps alpha + bytes busfactor / busbw\n",
               n->coll_bytes[0], n->coll_bytes[1]);
        for (int k = 0; k < PT_TOPO_COLL_N; k++) {
            if (n->coll_busbw[k] > 0)
                printf("      %-14s: alpha %.2f us per step, busbw %.3f GB/s (%.1f and %.1f us)\n", pt_topo_coll_name(k),
                       n->coll_lat_us[k], n->coll_busbw[k], n->coll_time_us[k][0], n->coll_time_us[k][1]);
            else
                printf("      %-14s: not fitted: %.1f us and %.1f us (no growth with the size)\n", pt_topo_coll_name(k),
                       n->coll_time_us[k][0], n->coll_time_us[k][1]);
        }
    }
    /* the same per link class: one column per class measured */
    report_coll_classes(n);
}

/* The human-readable report of the node model on standard output. */
static void report(const pt_topo *t)
{
    report_host(t);
    report_devices(t);
    if (t->ngpus > 0) report_matrix(t);
    report_islands(t);
    if (t->gpu_probe) printf("\n  GPU probe: %s\n", t->gpu_probe_note);
    report_net(&t->net);

    char wbuf[8192];
    int nw = pt_topo_warnings(t, wbuf, sizeof wbuf);
    printf("\n  Warnings: %d\n", nw);
    for (char *line = strtok(wbuf, "\n"); line; line = strtok(NULL, "\n")) printf("    %s\n", line);
}

/* The command line. */
typedef struct cli {
    const char *topology, *load, *save;
    int out;      /* 'j' --json, 'x' --xml, 'g' --gres, 0 the report */
    int probe, quick, strict, energy;
} cli;

/* Parse the options into a: -1 to go on, else the exit status (--help,
 * --version, or PT_EXIT_INPUT after one line on stderr). */
static int parse_args(int argc, char **argv, cli *a)
{
    static const struct option opts[] = {
        { "topology", required_argument, 0, 't' }, { "load", required_argument, 0, 'l' },
        { "json", no_argument, 0, 'j' }, { "xml", no_argument, 0, 'x' }, { "gres", no_argument, 0, 'g' },
        { "probe", no_argument, 0, 'p' }, { "probe-quick", no_argument, 0, 'q' },
        { "save", required_argument, 0, 's' }, { "strict", no_argument, 0, 'S' },
        { "energy", no_argument, 0, 'E' },
        { "help", no_argument, 0, 'h' }, { "version", no_argument, 0, 'V' }, { 0, 0, 0, 0 } };
    int c;
    memset(a, 0, sizeof *a);
    opterr = 0;
    while ((c = getopt_long(argc, argv, "hV", opts, NULL)) != -1) {
        switch (c) {
        case 't': a->topology = optarg; break;
        case 'l': a->load = optarg; break;
        case 'j': case 'x': case 'g':
            if (a->out && a->out != c) { fprintf(stderr, "ptrain-topo: --json, --xml and --gres exclude each other\n"); return PT_EXIT_INPUT; }
            a->out = c; break;
        case 'p': a->probe = 1; break;
        case 'q': a->probe = a->quick = 1; break;
        case 's': a->save = optarg; break;
        case 'S': a->strict = 1; break;
        case 'E': a->energy = 1; break;
        case 'h': usage(stdout); return 0;
        case 'V': printf("ptrain-topo (ptrain) %s\n", PACKAGE_VERSION); return 0;
        default:
            fprintf(stderr, "ptrain-topo: unknown or incomplete option '%s' (see --help)\n", argv[optind - 1]);
            return PT_EXIT_INPUT;
        }
    }
    if (optind < argc) { fprintf(stderr, "ptrain-topo: unexpected argument '%s' (see --help)\n", argv[optind]); return PT_EXIT_INPUT; }
    if (a->topology && a->load) { fprintf(stderr, "ptrain-topo: --topology and --load exclude each other\n"); return PT_EXIT_INPUT; }
    return -1;
}

/* --energy: this machine's energy sources and clocks (lib/energy/probe.h);
 * nothing else.  Returns the exit status. */
static int energy_report(const cli *a)
{
    if (a->topology || a->load || a->probe || a->save || a->out || a->strict) {
        fprintf(stderr, "ptrain-topo: --energy reports this machine's energy sources and clocks; it takes no "
                        "other option\n");
        return PT_EXIT_INPUT;
    }
    char buf[16384];
    pt_energy_probe(buf, sizeof buf);
    printf("Energy of this machine (what this user can measure and set; nothing is changed):\n%s", buf);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "ptrain-topo: cannot write standard output\n");
        return PT_EXIT_FAIL;
    }
    return 0;
}

/* One core's sgemm and bf16 GEMM rates and the sgemm's Hockney fit over
 * a GEMM's rows into t, for ptrain-plan and the plugin's planner. */
static void probe_gemm(pt_topo *t, int quick)
{
    double g = pt_blas_sgemm_gflops(quick ? 256 : 1024, quick ? 2 : 5);
    if (g > 0) t->gemm_gflops = g;
    /* the same for bf16 operands through pt_gemm_bf16 (on a CPU
     * without bf16 instructions: its fp32 fallback's rate) */
    double gb = pt_blas_bf16_gemm_gflops(quick ? 256 : 1024, quick ? 2 : 5);
    if (gb > 0) t->gemm_gflops_bf16 = gb;
    /* and over the rows of a GEMM (a microbatch's rows), k = n
     * fixed: Hockney's r_inf and n_1/2 (pt_topo_gemm_fit) */
    static const int rows[5] = {16, 64, 256, 1024, 4096};
    const int kn = quick ? 256 : 768, npt = quick ? 4 : 5;
    double nr[5], gr[5];
    int ok = 0;
    for (int i = 0; i < npt; i++) {
        double gi = pt_blas_sgemm_mkn_gflops(rows[i], kn, kn, quick ? 4 : 4 + 4096 / rows[i]);
        if (gi > 0) nr[ok] = rows[i], gr[ok++] = gi;
    }
    if (ok >= 2) pt_topo_gemm_fit(nr, gr, ok, &t->gemm_rinf_gflops, &t->gemm_n_half);
}

/* --probe: MPI over every rank, then on rank 0 host memory, the GPUs and
 * the GEMM rates.  A failure is fatal: one line and MPI_Abort. */
static void probe_machine(pt_topo *t, int rank, int quick)
{
    pt_probe_mpi_opts po = pt_probe_mpi_defaults(quick);
    int rc = pt_probe_mpi(t, MPI_COMM_WORLD, &po);
    if (!rc && rank == 0) rc = pt_topo_probe_membw(t, quick ? (size_t)8 << 20 : (size_t)256 << 20, quick ? 2 : 5);
    if (!rc && rank == 0) rc = pt_probe_gpu(t, quick ? (size_t)8 << 20 : (size_t)256 << 20, quick ? 2 : 10);
    if (!rc && rank == 0) probe_gemm(t, quick);
    if (rc) {
        fprintf(stderr, "ptrain-topo: rank %d: %s\n", rank, pt_errmsg());
        pt_topo_free(t);
        MPI_Abort(MPI_COMM_WORLD, PT_EXIT_FAIL);
    }
}

/* Rank 0: save the model when asked, then print it (report, JSON, XML or
 * gres lines) and flush.  Returns the exit status. */
static int output(const pt_topo *t, const cli *a)
{
    int status = 0, rc;
    char wbuf[8192];
    int nw = pt_topo_warnings(t, wbuf, sizeof wbuf);
    if (a->save && (rc = pt_topo_save(t, a->save)) != PT_OK) {
        fprintf(stderr, "ptrain-topo: %s\n", pt_errmsg());
        status = PT_EXIT_FAIL;
    }
    if (!status) {
        char *text = NULL;
        if (a->out == 'j' || a->out == 'x') {
            rc = a->out == 'j' ? pt_topo_to_json(t, &text) : pt_topo_to_xml(t, &text);
            if (rc) { fprintf(stderr, "ptrain-topo: %s\n", pt_errmsg()); status = rc == PT_EUNSUPP ? PT_EXIT_INPUT : PT_EXIT_FAIL; }
            else fputs(text, stdout);
            free(text);
        } else if (a->out == 'g') {
            size_t need = pt_topo_gres(t, NULL, 0) + 1;
            text = malloc(need);
            if (text) { pt_topo_gres(t, text, need); fputs(text, stdout); free(text); }
            if (t->ngpus == 0) fprintf(stderr, "ptrain-topo: no NVIDIA GPU in %s: no gres.conf lines\n", t->source);
        } else {
            report(t);
        }
    }
    if (!status && a->strict && nw > 0) status = PT_EXIT_FAIL;
    errno = 0;
    if ((fflush(stdout) != 0 || ferror(stdout)) && !status) {
        fprintf(stderr, "ptrain-topo: cannot write standard output%s%s\n", errno ? ": " : "", errno ? strerror(errno) : "");
        status = PT_EXIT_FAIL;
    }
    return status;
}

int main(int argc, char **argv)
{
    cli a;
    int rc = parse_args(argc, argv, &a);
    if (rc >= 0) return rc;
    if (a.energy) return energy_report(&a);
    if (a.probe && (a.topology || a.load)) {
        fprintf(stderr, "ptrain-topo: --probe measures this machine; it cannot be combined with --topology or --load\n");
        return PT_EXIT_INPUT;
    }
    if (a.probe && getenv(PT_TOPO_ENV) && *getenv(PT_TOPO_ENV)) {
        fprintf(stderr, "ptrain-topo: --probe measures this machine, but $%s names '%s'\n", PT_TOPO_ENV, getenv(PT_TOPO_ENV));
        return PT_EXIT_INPUT;
    }

    int rank = 0;
    if (a.probe) {
        pt_host_memory_keep(); /* measure MPI's collectives as ptrain-run's steps meet them */
        MPI_Init(&argc, &argv);
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    }
    /* a --save target that is not a regular file (a link, FIFO, device...)
     * is refused before the model is built or probed; pt_topo_save checks
     * again when it writes */
    if (a.save && rank == 0 && pt_output_check(a.save) != PT_OK) {
        fprintf(stderr, "ptrain-topo: --save: %s\n", pt_errmsg());
        if (a.probe) MPI_Abort(MPI_COMM_WORLD, PT_EXIT_INPUT);
        return PT_EXIT_INPUT;
    }
    pt_topo t;
    rc = a.load ? pt_topo_load_file(&t, a.load) : pt_topo_load_hwloc(&t, a.topology);
    if (rc) {
        fprintf(stderr, "ptrain-topo: %s\n", pt_errmsg());
        if (a.probe) MPI_Abort(MPI_COMM_WORLD, PT_EXIT_INPUT);
        return PT_EXIT_INPUT;
    }
    if (a.probe) probe_machine(&t, rank, a.quick);
    int status = rank == 0 ? output(&t, &a) : 0;
    pt_topo_free(&t);
    if (a.probe) {
        MPI_Bcast(&status, 1, MPI_INT, 0, MPI_COMM_WORLD);
        MPI_Finalize();
    }
    return status;
}
