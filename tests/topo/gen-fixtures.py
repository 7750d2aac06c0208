#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Write the hwloc v2 XML fixtures of tests/topo/ from the machine shapes
below (run from tests/topo/; check each with `lstopo --input FILE`).

Each shape is written out explicitly: packages, NUMA nodes (optionally two
per package under Groups, like Intel SNC2 / AMD NPS2), cores x SMT, and PCI
trees of host bridges, PCIe switches (an upstream-port bridge above
downstream-port bridges, as hwloc shows them), GPUs with their CUDA/NVML
OS devices and NICs with OpenFabrics/network OS devices.  Bandwidths a
fixture "should carry" are written as distances: PtrainGPUBandwidth /
PtrainNUMABandwidth (user, MB/s) and NVLinkBandwidth (as hwloc's NVML
backend records it, MB/s summed over links).
"""
import random


class W:
    def __init__(self):
        self.gp = 0
        self.lines = []
        self.bus = 0

    def next_gp(self):
        self.gp += 1
        return self.gp

    def emit(self, depth, s):
        self.lines.append("  " * depth + s)


def mask(bits):
    v = 0
    for b in bits:
        v |= 1 << b
    words = []
    while True:
        words.append(v & 0xFFFFFFFF)
        v >>= 32
        if v == 0:
            break
    return ",".join("0x%08x" % w for w in reversed(words))


def sets(pus, numas):
    c, n = mask(pus), mask(numas)
    return 'cpuset="%s" complete_cpuset="%s" nodeset="%s" complete_nodeset="%s"' % (c, c, n, n)


def pci_attrs(busid, cls, ven, dev, speed):
    return 'pci_busid="%s" pci_type="%04x [%04x:%04x] [%04x:0000] 01" pci_link_speed="%f"' % (
        busid, cls, ven, dev, ven, speed)


def write_io(w, d, node, gpus, nics, bus=0, devno=0):
    """node: ('hb', [children]) | ('sw', speed, [children]) | ('gpu', speed) | ('nic', kind, speed).
    bus/devno: where the node sits (its parent's secondary bus, device number)."""
    kind = node[0]

    def sub(children, d2):
        saved, w.lines = w.lines, []
        w.bus += 1
        sec = w.bus
        for i, ch in enumerate(children):
            write_io(w, d2, ch, gpus, nics, sec, i)
        body, w.lines = w.lines, saved
        return sec, body

    busid = "0000:%02x:%02x.0" % (bus, devno)
    if kind == "hb":
        gp = w.next_gp()
        sec, body = sub(node[1], d + 1)
        w.emit(d, '<object type="Bridge" gp_index="%d" bridge_type="0-1" depth="0" bridge_pci="0000:[%02x-%02x]">'
               % (gp, sec, w.bus))
        w.lines += body
        w.emit(d, "</object>")
    elif kind == "sw":
        # upstream port on the parent bus, downstream ports on its secondary bus
        gp = w.next_gp()
        depth = node[3] if len(node) > 3 else 1
        sec, body = sub([("port", node[1], ch) for ch in node[2]], d + 1)
        w.emit(d, '<object type="Bridge" gp_index="%d" bridge_type="1-1" depth="%d" bridge_pci="0000:[%02x-%02x]" %s>'
               % (gp, depth, sec, w.bus, pci_attrs(busid, 0x0604, 0x1000, 0xc030, node[1])))
        w.lines += body
        w.emit(d, "</object>")
    elif kind == "port":
        gp = w.next_gp()
        sec, body = sub([node[2]], d + 1)
        w.emit(d, '<object type="Bridge" gp_index="%d" bridge_type="1-1" depth="1" bridge_pci="0000:[%02x-%02x]" %s>'
               % (gp, sec, w.bus, pci_attrs(busid, 0x0604, 0x1000, 0xc030, node[1])))
        w.lines += body
        w.emit(d, "</object>")
    elif kind == "gpu":
        i = len(gpus)
        gp = w.next_gp()
        w.emit(d, '<object type="PCIDev" gp_index="%d" %s>' % (gp, pci_attrs(busid, 0x0302, 0x10de, 0x20b2, node[1])))
        w.emit(d + 1, '<info name="PCIVendor" value="NVIDIA Corporation"/>')
        w.emit(d + 1, '<info name="PCIDevice" value="GA100 [A100 SXM4 80GB]"/>')
        w.emit(d + 1, '<object type="OSDev" gp_index="%d" name="cuda%d" subtype="CUDA" osdev_type="5">' % (w.next_gp(), i))
        w.emit(d + 2, '<info name="Backend" value="CUDA"/>')
        w.emit(d + 2, '<info name="GPUModel" value="NVIDIA A100-SXM4-80GB"/>')
        w.emit(d + 1, "</object>")
        gp_nvml = w.next_gp()
        gpus.append((busid, gp, gp_nvml))
        w.emit(d + 1, '<object type="OSDev" gp_index="%d" name="nvml%d" subtype="NVML" osdev_type="1">' % (gp_nvml, i))
        w.emit(d + 2, '<info name="Backend" value="NVML"/>')
        w.emit(d + 2, '<info name="GPUModel" value="NVIDIA A100-SXM4-80GB"/>')
        w.emit(d + 1, "</object>")
        w.emit(d, "</object>")
    elif kind == "vmgpu":
        # a GPU as hwloc saw it in an H100 VM: the PCI device without any
        # OS device under it (no CUDA/NVML backend, bus id unknown to OpenCL)
        gp = w.next_gp()
        w.emit(d, '<object type="PCIDev" gp_index="%d" %s/>' % (gp, pci_attrs(busid, 0x0302, 0x10de, node[2], node[1])))
        gpus.append((busid, gp, None))
    elif kind == "opencl":
        # hwloc's OpenCL OS device attached beside the PCI device
        i = sum(1 for l in w.lines if 'subtype="OpenCL"' in l)
        w.emit(d, '<object type="OSDev" gp_index="%d" name="opencl0d%d" subtype="OpenCL" osdev_type="5">' % (w.next_gp(), i))
        w.emit(d + 1, '<info name="Backend" value="OpenCL"/>')
        w.emit(d + 1, '<info name="GPUVendor" value="NVIDIA Corporation"/>')
        w.emit(d + 1, '<info name="GPUModel" value="%s"/>' % node[1])
        w.emit(d, "</object>")
    elif kind == "nic":
        nk, speed = node[1], node[2]
        if nk == "eth":
            name = "eno%d" % (sum(1 for n in nics if n == "eth") + 1)
            nics.append("eth")
            w.emit(d, '<object type="PCIDev" gp_index="%d" %s>' % (w.next_gp(), pci_attrs(busid, 0x0200, 0x8086, 0x1572, speed)))
            w.emit(d + 1, '<object type="OSDev" gp_index="%d" name="%s" osdev_type="2"/>' % (w.next_gp(), name))
        else:
            k = sum(1 for n in nics if n != "eth")
            nics.append(nk)
            cls = 0x0207 if nk == "ib" else 0x0200
            w.emit(d, '<object type="PCIDev" gp_index="%d" %s>' % (w.next_gp(), pci_attrs(busid, cls, 0x15b3, 0x101b, speed)))
            w.emit(d + 1, '<object type="OSDev" gp_index="%d" name="%s%d" osdev_type="2"/>'
                   % (w.next_gp(), "ib" if nk == "ib" else "ens", k))
            w.emit(d + 1, '<object type="OSDev" gp_index="%d" name="mlx5_%d" subtype="OpenFabrics" osdev_type="3">' % (w.next_gp(), k))
            w.emit(d + 2, '<info name="Port1LinkLayer" value="%s"/>' % ("InfiniBand" if nk == "ib" else "Ethernet"))
            w.emit(d + 1, "</object>")
        w.emit(d, "</object>")


def machine(path, host, cpu, npkg, numa_per_pkg, cores, smt, mem, io, dists):
    """mem: list of bytes per NUMA node; io: list per package of host-bridge trees."""
    w = W()
    total = npkg * numa_per_pkg * cores
    gpus, nics = [], []
    allpus = list(range(total * smt))
    w.emit(0, '<?xml version="1.0" encoding="UTF-8"?>')
    w.emit(0, '<!DOCTYPE topology SYSTEM "hwloc2.dtd">')
    w.emit(0, '<topology version="2.0">')
    w.emit(1, '<object type="Machine" os_index="0" %s gp_index="%d">' % (sets(allpus, range(npkg * numa_per_pkg)), w.next_gp()))
    w.emit(2, '<info name="HostName" value="%s"/>' % host)
    w.emit(2, '<info name="Architecture" value="x86_64"/>')
    core_id = 0
    for p in range(npkg):
        numas = list(range(p * numa_per_pkg, (p + 1) * numa_per_pkg))
        ppus = [t * total + c for t in range(smt) for c in range(p * numa_per_pkg * cores, (p + 1) * numa_per_pkg * cores)]
        w.emit(2, '<object type="Package" os_index="%d" %s gp_index="%d">' % (p, sets(ppus, numas), w.next_gp()))
        w.emit(3, '<info name="CPUModel" value="%s"/>' % cpu)
        for n in numas:
            npus = [t * total + c for t in range(smt) for c in range(n * cores, (n + 1) * cores)]
            d = 3
            if numa_per_pkg > 1:
                w.emit(3, '<object type="Group" %s gp_index="%d" kind="1000" subkind="0">' % (sets(npus, [n]), w.next_gp()))
                d = 4
            w.emit(d, '<object type="NUMANode" os_index="%d" %s gp_index="%d" local_memory="%d"/>'
                   % (n, sets(npus, [n]), w.next_gp(), mem[n]))
            for c in range(n * cores, (n + 1) * cores):
                w.emit(d, '<object type="Core" os_index="%d" %s gp_index="%d">'
                       % (c, sets([t * total + c for t in range(smt)], [n]), w.next_gp()))
                for t in range(smt):
                    w.emit(d + 1, '<object type="PU" os_index="%d" %s gp_index="%d"/>' % (t * total + c, sets([t * total + c], [n]), w.next_gp()))
                w.emit(d, "</object>")
                core_id += 1
            if numa_per_pkg > 1:
                w.emit(3, "</object>")
        for hb in io[p]:
            write_io(w, 3, hb, gpus, nics)
        w.emit(2, "</object>")
    w.emit(1, "</object>")
    for name, kind, objs, values in dists(gpus):
        idx = " ".join(str(o) for o in objs) + " "
        vals = " ".join(str(int(v)) for v in values) + " "
        typ = {"gpu": "PCIDev", "nvml": "OSDev", "numa": "NUMANode"}[kind]
        indexing = "os" if kind == "numa" else "gp"
        w.emit(1, '<distances2 type="%s" nbobjs="%d" kind="%d" name="%s" indexing="%s">' % (typ, len(objs), 10 if name.startswith("Ptrain") else 9, name, indexing))
        w.emit(2, '<indexes length="%d">%s</indexes>' % (len(idx), idx))
        w.emit(2, '<u64values length="%d">%s</u64values>' % (len(vals), vals))
        w.emit(1, "</distances2>")
    w.emit(0, "</topology>")
    with open(path, "w") as f:
        f.write("\n".join(w.lines) + "\n")


def matrix(n, f):
    return [0 if i == j else f(i, j) for i in range(n) for j in range(n)]


GiB = 1 << 30
rnd = random.Random(20240601)

# 1. DGX-A100-like: 2 sockets, 8 GPUs all linked through NVSwitch (NV12),
#    4 InfiniBand HCAs, one per PCIe switch (2 GPUs + 1 HCA per switch),
#    and an Ethernet port straight on the first host bridge.
G4, G3 = 31.507692, 15.753846
sw = lambda: ("sw", G4, [("gpu", G4), ("gpu", G4), ("nic", "ib", G4)])
machine("dgx8-nvswitch.xml", "dgx-a100", "AMD EPYC 7742 64-Core Processor", 2, 1, 32, 2, [512 * GiB, 512 * GiB],
        [[("hb", [sw(), ("nic", "eth", G3)]), ("hb", [sw()])], [("hb", [sw()]), ("hb", [sw()])]],
        lambda g: [("PtrainGPUBandwidth", "gpu", [x[1] for x in g], matrix(8, lambda i, j: rnd.randint(228000, 236000))),
                   ("NVLinkBandwidth", "nvml", [x[2] for x in g], matrix(8, lambda i, j: 300000)),
                   ("PtrainNUMABandwidth", "numa", [0, 1], [150000, 60000, 61000, 149000])])

# 2. 8 GPUs where only the pairs (0,1) (2,3) (4,5) (6,7) are NVLinked
#    (184 GB/s measured) and everything else goes over PCIe Gen3 (~15 GB/s);
#    each pair shares a switch; 2 HCAs.  No NVLink record: NV# comes from
#    the measured matrix.
swp = lambda nic: ("sw", G3, [("gpu", G3), ("gpu", G3)] + ([("nic", "ib", G3)] if nic else []))
pair_bw = lambda i, j: rnd.randint(183000, 185000) if i // 2 == j // 2 else rnd.randint(14500, 15500)
machine("pairs8-nvlink.xml", "pairs8", "Intel(R) Xeon(R) Gold 6248 CPU @ 2.50GHz", 2, 1, 20, 2, [384 * GiB, 384 * GiB],
        [[("hb", [swp(True)]), ("hb", [swp(False)])], [("hb", [swp(True)]), ("hb", [swp(False)])]],
        lambda g: [("PtrainGPUBandwidth", "gpu", [x[1] for x in g], matrix(8, pair_bw))])

# 3. 4 PCIe GPUs behind cascaded switches (GPU0,1 on one leaf switch, GPU2,3
#    on another, both under a root switch), GPU3's link trained at x8;
#    a RoCE NIC on a second host bridge.
bw4 = {(0, 1): 24500, (0, 2): 20100, (1, 2): 19900, (0, 3): 12100, (1, 3): 12000, (2, 3): 12200}
machine("gpu4-pcie.xml", "gpu4", "Intel(R) Xeon(R) Silver 4316 CPU @ 2.30GHz", 1, 1, 20, 2, [256 * GiB],
        [[("hb", [("sw", G4, [("sw", G4, [("gpu", G4), ("gpu", G4)]), ("sw", G4, [("gpu", G4), ("gpu", G3)])])]),
          ("hb", [("nic", "roce", G4)])]],
        lambda g: [("PtrainGPUBandwidth", "gpu", [x[1] for x in g],
                    matrix(4, lambda i, j: bw4[(min(i, j), max(i, j))]))])

# 4. CPU-only, 2 sockets with 2 NUMA nodes each (SNC2); node 3 has half the
#    memory of the others; an IB HCA on socket 0, Ethernet on socket 1.
numa_bw = lambda i, j: (110000 if i == j else 90000 if i // 2 == j // 2 else 40000) + rnd.randint(-500, 500)
machine("cpu2s.xml", "cpu2s", "Intel(R) Xeon(R) Platinum 8380 CPU @ 2.30GHz", 2, 2, 10, 2,
        [128 * GiB, 128 * GiB, 128 * GiB, 64 * GiB],
        [[("hb", [("nic", "ib", G4)])], [("hb", [("nic", "eth", G3)])]],
        lambda g: [("PtrainNUMABandwidth", "numa", [0, 1, 2, 3], [numa_bw(i, j) for i in range(4) for j in range(4)])])

# 5. One H100 in a VM as hwloc 2.9 showed it: the GPU's PCI device has no OS
#    device, hwloc's OpenCL device (with the GPU's name) sits beside it under
#    the host bridge, and the one NUMA node reports 4.6 GiB of a 125 GiB
#    machine.
machine("h100-vm.xml", "h100-vm", "Intel(R) Xeon(R) Platinum 8480+", 1, 1, 16, 1, [int(4.6 * GiB)],
        [[("hb", [("vmgpu", G4 * 2, 0x2330), ("opencl", "NVIDIA H100 80GB HBM3")])]],
        lambda g: [])

# 6. pairs8's machine with its NVLink bridges between GPUs i and i+4 (the
#    two sockets' GPUs joined pairwise): the islands {0,4} {1,5} {2,6}
#    {3,7} are not contiguous in PCI order, so the planner and the plugin's
#    binding lay tasks out in island order (0,4,1,5,...) to keep an NVLink
#    pair on consecutive ranks.
strided_bw = lambda i, j: rnd.randint(183000, 185000) if i % 4 == j % 4 else rnd.randint(14500, 15500)
machine("pairs8-strided.xml", "pairs8s", "Intel(R) Xeon(R) Gold 6248 CPU @ 2.50GHz", 2, 1, 20, 2,
        [384 * GiB, 384 * GiB],
        [[("hb", [swp(True)]), ("hb", [swp(False)])], [("hb", [swp(True)]), ("hb", [swp(False)])]],
        lambda g: [("PtrainGPUBandwidth", "gpu", [x[1] for x in g], matrix(8, strided_bw))])
