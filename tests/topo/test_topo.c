/* SPDX-License-Identifier: MIT */
/* The node model of every fixture (counts, locality, path classes), islands,
 * slowest links, JSON and XML round trips, gres lines, malformed input.
 * Expected values come from the machine shapes in gen-fixtures.py. */
#define _POSIX_C_SOURCE 200809L
#include "tests/tap.h"
#include "core/core.h"
#include "core/file.h"
#include "topo/topo.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[1024];

static int load(pt_topo *t, const char *name)
{
    char p[1200];
    snprintf(p, sizeof p, "%s/tests/topo/%s", dir, name);
    int rc = pt_topo_load_hwloc(t, p);
    if (rc) tap_diag("load %s: %s", name, pt_errmsg());
    return rc;
}

static const char *cls(const pt_topo *t, int i, int j) { return pt_link_class_name((pt_link_class)t->gg_class[i * t->ngpus + j]); }
static const char *gn(const pt_topo *t, int i, int j) { return pt_link_class_name((pt_link_class)t->gn_class[i * t->nnics + j]); }

/* JSON(t) == JSON(from_json(JSON(t))) and XML(t) reloaded gives the same JSON. */
static void round_trips(pt_topo *t, const char *name)
{
    char *j1 = NULL, *j2 = NULL, *x = NULL;
    pt_topo u, v;
    int ok = pt_topo_to_json(t, &j1) == PT_OK && pt_topo_from_json(&u, j1, "mem") == PT_OK;
    ok = ok && pt_topo_to_json(&u, &j2) == PT_OK && !strcmp(j1, j2);
    tap_ok(ok, "%s: JSON round trip is exact", name);
    if (ok) pt_topo_free(&u);
    free(j2); j2 = NULL;
    char path[] = "/tmp/ptrain-topo-test-XXXXXX";
    int fd = mkstemp(path);
    ok = fd >= 0 && pt_topo_to_xml(t, &x) == PT_OK && write(fd, x, strlen(x)) == (ssize_t)strlen(x);
    if (fd >= 0) close(fd);
    ok = ok && pt_topo_load_hwloc(&v, path) == PT_OK;
    if (ok) {
        snprintf(v.source, sizeof v.source, "%s", t->source);   /* the file name differs by design */
        ok = pt_topo_to_json(&v, &j2) == PT_OK && !strcmp(j1, j2);
        if (!ok) tap_diag("XML round trip differs");
        pt_topo_free(&v);
    }
    tap_ok(ok, "%s: XML round trip keeps model and measurements", name);
    unlink(path);
    free(j1); free(j2); free(x);
}

static int island_is(const pt_topo_islands *is, const int *members, int n)
{
    int id = is->island_of[members[0]], cnt = 0;
    for (int k = 0; k < n; k++) if (is->island_of[members[k]] != id) return 0;
    for (int d = 0; d < is->ndev; d++) cnt += is->island_of[d] == id;
    return cnt == n;
}

int main(void)
{
    const char *s = getenv("top_srcdir");
    snprintf(dir, sizeof dir, "%s", s ? s : ".");
    pt_topo t;
    pt_topo_islands is;
    char buf[8192];

    /* ---- DGX-A100-like --------------------------------------------------- */
    if (!load(&t, "dgx8-nvswitch.xml")) {
        tap_ok(t.npackages == 2 && t.nnuma == 2 && t.ncores == 64 && t.npus == 128, "dgx8: 2 packages, 2 NUMA, 64 cores, 128 PUs");
        tap_ok(t.ngpus == 8 && t.nnics == 5, "dgx8: 8 GPUs (CUDA+NVML aliases deduplicated), 5 NICs (got %d, %d)", t.ngpus, t.nnics);
        int hca = 0;
        for (int i = 0; i < t.nnics; i++) hca += t.nic[i].kind == PT_NIC_IB;
        tap_ok(hca == 4, "dgx8: 4 InfiniBand HCAs");
        int loc = 1;
        for (int g = 0; g < 8; g++) loc &= t.gpu[g].pci.numa == g / 4 && !strcmp(t.gpu[g].pci.cores, g < 4 ? "0-31" : "32-63");
        tap_ok(loc, "dgx8: GPUs 0-3 local to NUMA 0 (cores 0-31), 4-7 to NUMA 1");
        tap_ok(!strcmp(t.gpu[4].pci.cpus, "32-63,96-127"), "dgx8: GPU4 CPU affinity 32-63,96-127 (%s)", t.gpu[4].pci.cpus);
        int nv = 1;
        for (int i = 0; i < 8; i++) for (int j = 0; j < 8; j++)
            nv &= i == j ? !strcmp(cls(&t, i, j), "X") : !strcmp(cls(&t, i, j), "NV") && t.gg_nvlinks[i * 8 + j] == 12;
        tap_ok(nv, "dgx8: every GPU pair is NV12 (recorded NVLinkBandwidth)");
        /* NIC order by bus: eno1, mlx5_0..3 */
        tap_ok(!strcmp(t.nic[0].name, "eno1") && !strcmp(t.nic[1].name, "mlx5_0") && !strcmp(t.nic[1].netdev, "ib0"),
               "dgx8: NIC names (HCA keeps its netdev)");
        tap_ok(!strcmp(gn(&t, 0, 1), "PIX") && !strcmp(gn(&t, 0, 2), "NODE") && !strcmp(gn(&t, 0, 3), "SYS") &&
               !strcmp(gn(&t, 0, 0), "PHB") && !strcmp(gn(&t, 7, 4), "PIX") && !strcmp(gn(&t, 7, 0), "SYS"),
               "dgx8: GPU-NIC classes PIX (same switch), NODE, SYS, PHB (same host bridge)");
        tap_ok(t.gg_gbps[0 * 8 + 1] >= 228 && t.gg_gbps[0 * 8 + 1] <= 236 && t.numa[0].membw_gbps == 150.0 &&
               t.numa_gbps[1] == 60.0, "dgx8: carried bandwidths read back (GPU 228-236 GB/s, NUMA 150/60 GB/s)");
        tap_ok(pt_topo_islands_find(&t, &is) == PT_OK && is.kind == PT_DEV_GPU && is.nislands == 1,
               "dgx8: one island of 8 GPUs");
        int all[8] = { 0, 1, 2, 3, 4, 5, 6, 7 }, a, b, src;
        double lo = 1e9;
        for (int i = 0; i < 8; i++) for (int j = 0; j < 8; j++) if (i != j) {
            double x = fmin(t.gg_gbps[i * 8 + j], t.gg_gbps[j * 8 + i]);
            if (x < lo) lo = x;
        }
        tap_ok(pt_topo_slowest_link(&t, PT_DEV_GPU, all, 8, &a, &b, &src) == lo && src == PT_BW_MEASURED,
               "dgx8: slowest link is the minimum of the carried matrix (%.3f)", lo);
        tap_ok(pt_topo_warnings(&t, buf, sizeof buf) == 0, "dgx8: no warnings");
        pt_topo_gres(&t, buf, sizeof buf);
        tap_ok(!strncmp(buf, "Name=gpu File=/dev/nvidia0 Cores=0-31 Links=-1,12,12,12,12,12,12,12\n", 67) &&
               strstr(buf, "Name=gpu File=/dev/nvidia7 Cores=32-63 Links=12,12,12,12,12,12,12,-1\n") != NULL,
               "dgx8: gres.conf lines with Cores= and Links=");
        round_trips(&t, "dgx8");
        pt_topo_free(&t);
    }

    /* ---- NVLink pairs ---------------------------------------------------------- */
    if (!load(&t, "pairs8-nvlink.xml")) {
        tap_ok(t.ngpus == 8 && t.nnics == 2 && t.nnuma == 2 && t.ncores == 40, "pairs8: 8 GPUs, 2 HCAs, 2 NUMA, 40 cores");
        int ok = 1;
        for (int i = 0; i < 8; i++) for (int j = 0; j < 8; j++) {
            if (i == j) continue;
            const char *want = i / 2 == j / 2 ? "NV" : i / 4 != j / 4 ? "SYS" : "NODE";
            ok &= !strcmp(cls(&t, i, j), want);
            if (i / 2 == j / 2) ok &= t.gg_nvlinks[i * 8 + j] == (int)lround(t.gg_gbps[i * 8 + j] / 25.0);
        }
        tap_ok(ok, "pairs8: NV# from the measured 184 GB/s for pairs, NODE inside a socket, SYS across");
        tap_ok(t.gg_nvlinks[1] == 7, "pairs8: 184 GB/s is NV7 (%d)", t.gg_nvlinks[1]);
        tap_ok(pt_topo_islands_find(&t, &is) == PT_OK && is.nislands == 4, "pairs8: 4 islands");
        int p01[] = { 0, 1 }, p23[] = { 2, 3 }, p45[] = { 4, 5 }, p67[] = { 6, 7 };
        tap_ok(island_is(&is, p01, 2) && island_is(&is, p23, 2) && island_is(&is, p45, 2) && island_is(&is, p67, 2),
               "pairs8: islands are the NVLink pairs");
        int set[] = { 0, 1, 2 }, a, b;
        double g = pt_topo_slowest_link(&t, PT_DEV_GPU, set, 3, &a, &b, NULL);
        tap_ok(g < 16 && g > 14 && (a == 0 || a == 1) && b == 2, "pairs8: slowest link in {0,1,2} is PCIe (%.1f GB/s, %d-%d)", g, a, b);
        g = pt_topo_slowest_link(&t, PT_DEV_GPU, p01, 2, NULL, NULL, NULL);
        tap_ok(g > 183 && g < 186, "pairs8: slowest link in {0,1} is the NVLink (%.1f)", g);
        int bad[] = { 0, 9 };
        tap_ok(pt_topo_slowest_link(&t, PT_DEV_GPU, bad, 2, NULL, NULL, NULL) < 0, "pairs8: out-of-range device rejected");
        round_trips(&t, "pairs8");
        pt_topo_free(&t);
    }

    /* ---- 4 PCIe GPUs --------------------------------------------------------------- */
    if (!load(&t, "gpu4-pcie.xml")) {
        tap_ok(t.ngpus == 4 && t.nnics == 1 && t.nic[0].kind == PT_NIC_ROCE, "gpu4: 4 GPUs, one RoCE NIC");
        tap_ok(!strcmp(cls(&t, 0, 1), "PIX") && !strcmp(cls(&t, 2, 3), "PIX") && !strcmp(cls(&t, 0, 2), "PXB") &&
               !strcmp(cls(&t, 1, 3), "PXB") && !strcmp(gn(&t, 0, 0), "NODE"),
               "gpu4: PIX on a leaf switch, PXB across the cascade, NODE to the NIC");
        tap_ok(fabs(t.gpu[3].pci.link_gbps - 15.753846) < 1e-3 && fabs(t.gpu[0].pci.link_gbps - 31.507692) < 1e-3,
               "gpu4: PCIe link speeds (GPU3 at x8)");
        int nw = pt_topo_warnings(&t, buf, sizeof buf);
        tap_ok(nw == 1 && strstr(buf, "degraded PCIe link: GPU3") != NULL, "gpu4: one warning, GPU3 degraded link (%d)", nw);
        tap_ok(pt_topo_islands_find(&t, &is) == PT_OK && is.nislands == 2, "gpu4: 2 islands");
        int i012[] = { 0, 1, 2 }, i3[] = { 3 };
        tap_ok(island_is(&is, i012, 3) && island_is(&is, i3, 1), "gpu4: {0,1,2} and the degraded {3}");
        round_trips(&t, "gpu4");
        pt_topo_free(&t);
    }

    /* ---- CPU only -------------------------------------------------------------------- */
    if (!load(&t, "cpu2s.xml")) {
        tap_ok(t.ngpus == 0 && t.nnics == 2 && t.nnuma == 4 && t.npackages == 2 && t.ncores == 40 && t.npus == 80,
               "cpu2s: no GPU, 2 NICs, 4 NUMA nodes on 2 packages, 40 cores, 80 PUs");
        tap_ok(t.numa[2].package == 1 && t.numa[3].memory == 64ull << 30 && t.numa[1].ncores == 10 && !strcmp(t.numa[1].cpus, "10-19,50-59"),
               "cpu2s: NUMA locality and memory");
        /* host bridges hang off the packages: local to both SNC halves */
        tap_ok(t.nic[0].pci.numa == -1 && !strcmp(t.nic[0].pci.numas, "0-1") && !strcmp(t.nic[1].pci.numas, "2-3") &&
               t.nic[0].kind == PT_NIC_IB && t.nic[1].kind == PT_NIC_ETH,
               "cpu2s: NIC locality is the package's NUMA nodes (HCA 0-1, Ethernet 2-3)");
        int nw = pt_topo_warnings(&t, buf, sizeof buf);
        tap_ok(nw == 1 && strstr(buf, "unbalanced NUMA: node 3 has 64.0 GiB") != NULL, "cpu2s: unbalanced memory warned");
        tap_ok(pt_topo_islands_find(&t, &is) == PT_OK && is.kind == PT_DEV_NUMA && is.nislands == 2,
               "cpu2s: 2 islands of NUMA nodes");
        int s0[] = { 0, 1 }, s1[] = { 2, 3 };
        tap_ok(island_is(&is, s0, 2) && island_is(&is, s1, 2), "cpu2s: islands are the sockets");
        pt_topo_gres(&t, buf, sizeof buf);
        tap_ok(buf[0] == 0, "cpu2s: no gres lines without GPUs");
        round_trips(&t, "cpu2s");
        pt_topo_free(&t);
    }

    /* ---- the build machine as recorded --------------------------------------------------- */
    if (!load(&t, "build-machine.xml")) {
        tap_ok(t.npackages == 1 && t.nnuma == 1 && t.ncores == 2 && t.npus == 2 && t.ngpus == 0 && t.nnics == 1 &&
               !strcmp(t.nic[0].name, "eth0") && !strcmp(t.hostname, "vm"), "build machine: 1 package, 2 cores, eth0");
        tap_ok(pt_topo_islands_find(&t, &is) == PT_OK && is.nislands == 1, "build machine: one island");
        round_trips(&t, "build machine");
        pt_topo_free(&t);
    }

    /* ---- an H100 VM: GPU named without NVML or an OS device under it; NUMA memory ---- */
    if (!load(&t, "h100-vm.xml")) {
        tap_ok(t.ngpus == 1 && !strcmp(t.gpu[0].pci.busid, "0000:01:00.0"), "h100-vm: 1 GPU at 0000:01:00.0");
        tap_ok(t.ngpus == 1 && !strcmp(t.gpu[0].model, "NVIDIA H100 80GB HBM3"),
               "h100-vm: the GPU takes the name of hwloc's OpenCL device beside it (%s)", t.ngpus ? t.gpu[0].model : "-");
        tap_ok(t.os_memory == 0 && pt_topo_warnings(&t, buf, sizeof buf) == 0,
               "h100-vm: loaded from a file, no OS memory to compare with, no warning");
        t.os_memory = 125ull << 30; /* what the OS of that VM reported */
        int nw = pt_topo_warnings(&t, buf, sizeof buf);
        tap_ok(nw == 1 && strstr(buf, "4.6 GiB") && strstr(buf, "125.0 GiB") && strstr(buf, "unreliable"),
               "h100-vm: NUMA memory (4.6 GiB) far below the OS total (125 GiB) is one warning (%s)", buf);
        round_trips(&t, "h100-vm (with the OS total)");
        pt_topo_free(&t);
    }
    {
        char ids[1200], name[96];
        snprintf(ids, sizeof ids, "%s/tests/topo/pci.ids.sample", dir);
        setenv("PTRAIN_PCI_IDS", ids, 1);
        int found = pt_topo_pci_name(0x10de, 0x2330, name, sizeof name);
        tap_ok(found && !strcmp(name, "GH100 [H100 SXM5 80GB]"), "PCI ID database: 10de:2330 is '%s'", found ? name : "-");
        found = pt_topo_pci_name(0x15b3, 0x101b, name, sizeof name);
        tap_ok(found && !strcmp(name, "MT28908 Family [ConnectX-6]"), "PCI ID database: a later vendor's device (%s)",
               found ? name : "-");
        setenv("PTRAIN_PCI_IDS", "/nonexistent/pci.ids", 1);
        tap_ok(pt_topo_pci_name(0x10de, 0xfffe, name, sizeof name) == 0, "PCI ID database: an unknown id is not found");
        /* the same VM without hwloc's OpenCL device: the name comes from the database */
        char xml[1200], *text = NULL, tmp[] = "/tmp/ptrain-topo-vm-XXXXXX";
        size_t n = 0;
        snprintf(xml, sizeof xml, "%s/tests/topo/h100-vm.xml", dir);
        int ok = pt_read_file(xml, &text, &n) == PT_OK;
        char *a = ok ? strstr(text, "<object type=\"OSDev\"") : NULL, *b = a ? strstr(a, "</object>") : NULL;
        int fd = mkstemp(tmp);
        if (a && b && fd >= 0) {
            memmove(a, b + strlen("</object>"), strlen(b + strlen("</object>")) + 1);
            ok = write(fd, text, strlen(text)) == (ssize_t)strlen(text);
        } else ok = 0;
        if (fd >= 0) close(fd);
        setenv("PTRAIN_PCI_IDS", ids, 1);
        ok = ok && pt_topo_load_hwloc(&t, tmp) == PT_OK;
        tap_ok(ok && t.ngpus == 1 && !strcmp(t.gpu[0].model, "NVIDIA GH100 [H100 SXM5 80GB]"),
               "h100-vm without its OpenCL device: named from the PCI ID database (%s)", ok && t.ngpus ? t.gpu[0].model : "-");
        if (ok) pt_topo_free(&t);
        unsetenv("PTRAIN_PCI_IDS");
        unlink(tmp);
        free(text);
    }

    /* ---- bad input --------------------------------------------------------------------------- */
    tap_ok(pt_topo_load_hwloc(&t, "/nonexistent/x.xml") == PT_EIO && strchr(pt_errmsg(), '\n') == NULL,
           "missing file: PT_EIO, one line (%s)", pt_errmsg());
    tap_ok(pt_topo_from_json(&t, "{\"schema\": 1}", "x.json") == PT_EFORMAT && strstr(pt_errmsg(), "schema"),
           "JSON with a bad schema field: PT_EFORMAT naming it (%s)", pt_errmsg());
    tap_ok(pt_topo_from_json(&t, "{ nope", "y.json") == PT_EFORMAT, "malformed JSON: PT_EFORMAT (%s)", pt_errmsg());
    if (!load(&t, "gpu4-pcie.xml")) {
        char *j = NULL;
        pt_topo_to_json(&t, &j);
        char *p = strstr(j, "\"PXB\"");
        if (p) memcpy(p, "\"PQR\"", 5);
        pt_topo u;
        tap_ok(pt_topo_from_json(&u, j, "z.json") == PT_EFORMAT && strstr(pt_errmsg(), "gpu_links"),
               "unknown link class rejected (%s)", pt_errmsg());
        free(j);
        pt_topo_free(&t);
    }
    return tap_done();
}
