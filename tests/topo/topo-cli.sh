#!/bin/sh
# SPDX-License-Identifier: MIT
# ptrain-topo on the fixtures: report, --json/--xml/--save/--load round
# trips, --gres, --strict, environment override, exit 2 on bad input.
. "$top_srcdir/tests/lib.sh"
T="$top_builddir/ptrain-topo"
F="$top_srcdir/tests/topo"
[ -x "$T" ] || skip_all "ptrain-topo not built"
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT INT TERM

"$T" --topology "$F/pairs8-nvlink.xml" > "$tmp/report" 2>&1
check "report exits 0" [ $? -eq 0 ]
check "report has the nvidia-smi style matrix" grep -q '^  GPU0  X  *NV7 18[45]  *NODE 1[45]' "$tmp/report"
check "report has the legend" grep -q 'PIX  = Connection traversing at most a single PCIe bridge' "$tmp/report"
check "report lists 4 islands" grep -q 'Islands of GPUs (4;' "$tmp/report"

# JSON -> load -> JSON is the same; XML save -> load -> JSON is the same
"$T" --topology "$F/dgx8-nvswitch.xml" --json > "$tmp/a.json"
check "--json is valid JSON with 8 GPUs" python3 -c "import json,sys; d=json.load(open('$tmp/a.json')); sys.exit(len(d['gpus'])!=8 or d['gpu_links'][0][1]!='NV12')"
"$T" --topology "$F/dgx8-nvswitch.xml" --save "$tmp/c.json" >/dev/null
"$T" --load "$tmp/c.json" --json > "$tmp/b.json"
check "--save/--load JSON round trip" cmp -s "$tmp/a.json" "$tmp/b.json"
"$T" --topology "$F/dgx8-nvswitch.xml" --save "$tmp/c.xml" >/dev/null
"$T" --load "$tmp/c.xml" --json | sed 's|"source": ".*"|"source": "x"|' > "$tmp/d.json"
sed 's|"source": ".*"|"source": "x"|' "$tmp/a.json" > "$tmp/a2.json"
check "--save/--load XML round trip" cmp -s "$tmp/a2.json" "$tmp/d.json"
check "saved XML loads in lstopo" sh -c "lstopo-no-graphics --input '$tmp/c.xml' >/dev/null 2>&1 || ! command -v lstopo-no-graphics >/dev/null"
check "saved XML carries the bandwidths as user distances" grep -q 'name="PtrainGPUBandwidth"' "$tmp/c.xml"
"$T" --topology "$F/dgx8-nvswitch.xml" --xml > "$tmp/e.xml"
check "--xml prints hwloc XML" grep -q '<topology version="2.0">' "$tmp/e.xml"
PTRAIN_TOPOLOGY="$F/gpu4-pcie.xml" "$T" --json > "$tmp/f.json"
check "\$PTRAIN_TOPOLOGY overrides the machine" python3 -c "import json,sys; sys.exit(len(json.load(open('$tmp/f.json'))['gpus'])!=4)"

# gres
"$T" --topology "$F/gpu4-pcie.xml" --gres > "$tmp/gres"
check "--gres prints one line per GPU" [ "$(grep -c '^Name=gpu File=/dev/nvidia[0-3] Cores=0-19$' "$tmp/gres")" -eq 4 ]

# strict
"$T" --topology "$F/gpu4-pcie.xml" --strict > /dev/null 2>&1
check "--strict exits 1 on warnings (degraded link)" [ $? -eq 1 ]
"$T" --topology "$F/dgx8-nvswitch.xml" --strict > /dev/null 2>&1
check "--strict exits 0 without warnings" [ $? -eq 0 ]

# bad input: exit 2, one line on stderr
bad() {
    desc=$1; shift
    "$@" > /dev/null 2> "$tmp/err"; rc=$?
    if [ $rc -eq 2 ] && [ "$(wc -l < "$tmp/err")" -eq 1 ]; then ok "$desc"; else not_ok "$desc (rc $rc)"; sed 's/^/# /' "$tmp/err"; fi
}
printf '<topology version="2.0"><object type="Machine"' > "$tmp/trunc.xml"
printf '{"schema": "ptrain-topo/1", "hostname": 3}' > "$tmp/bad.json"
printf 'hello' > "$tmp/junk"
bad "unreadable topology file" "$T" --topology "$tmp/none.xml"
bad "malformed XML" "$T" --topology "$tmp/trunc.xml"
bad "malformed XML via --load" "$T" --load "$tmp/trunc.xml"
bad "JSON with a wrong field type" "$T" --load "$tmp/bad.json"
bad "neither JSON nor XML" "$T" --load "$tmp/junk"
bad "truncated JSON" sh -c "head -c 200 '$tmp/a.json' > '$tmp/t.json'; exec '$T' --load '$tmp/t.json'"
bad "unknown option" "$T" --frobnicate
bad "--xml from a JSON cache" "$T" --load "$tmp/c.json" --xml
bad "--probe with --topology" "$T" --probe --topology "$F/cpu2s.xml"

# NIC model names without hwloc's PCI names: the PCI ID database
# (PTRAIN_PCI_IDS; the fixture's HCAs are 15b3:101b), else the id itself
PTRAIN_PCI_IDS="$F/pci.ids.sample" "$T" --topology "$F/dgx8-nvswitch.xml" > "$tmp/nic" 2>&1
check "the report names the fixture's HCA 15b3:101b 'MT28908 Family [ConnectX-6]'" \
    grep -q '^  NIC1  0000:05:00.0  mlx5_0 (InfiniBand, ib0)  MT28908 Family \[ConnectX-6\]  PCIe' "$tmp/nic"
if command -v jq >/dev/null 2>&1; then
    PTRAIN_PCI_IDS="$F/pci.ids.sample" "$T" --topology "$F/dgx8-nvswitch.xml" --save "$tmp/nic.json" >/dev/null
    check "--json carries the NIC model, and --load keeps it" \
        sh -c "jq -e '.nics[1].model == \"MT28908 Family [ConnectX-6]\"' '$tmp/nic.json' >/dev/null &&
            PTRAIN_PCI_IDS=/nonexistent '$T' --load '$tmp/nic.json' --json | jq -e '.nics[1].model == \"MT28908 Family [ConnectX-6]\"' >/dev/null"
    jq 'del(.nics[].model)' "$tmp/nic.json" > "$tmp/old.json"
    check "a cache from before NIC models still loads" sh -c "'$T' --load '$tmp/old.json' >/dev/null"
fi
check "a NIC whose PCI device carries hwloc's PCIDevice name keeps that name" \
    grep -q '^  NIC0  0000:01:01.0  eno1 (Ethernet)  Ethernet Controller X710 for 10GbE SFP+  PCIe' "$tmp/nic"
# an id no database knows (the fixture's HCAs made 15b3:fff0)
sed 's/\[15b3:101b\]/[15b3:fff0]/' "$F/dgx8-nvswitch.xml" > "$tmp/unknown.xml"
"$T" --topology "$tmp/unknown.xml" > "$tmp/nic2" 2>&1
check "a NIC no database names shows its PCI id [15b3:fff0]" grep -q '^  NIC1 .* \[15b3:fff0\]  PCIe' "$tmp/nic2"

# every field --json writes is documented in ptrain-topo(1)'s JSON SCHEMA
if command -v jq >/dev/null 2>&1; then
    sed -n '/^\.SH JSON SCHEMA/,/^\.SH /p' "$top_srcdir/man/ptrain-topo.1" > "$tmp/schema"
    keys=$(jq -r '[keys[], (.numa[0], .gpus[0], .nics[0], .gpus[0].pci, .gpu_probe, .islands | keys[])] | unique | .[]' "$tmp/nic.json")
    undoc=
    for k in $keys; do grep -q "\b$k\b" "$tmp/schema" || undoc="$undoc $k"; done
    check "ptrain-topo(1) documents every JSON field${undoc:+ (missing:$undoc)}" [ -n "$keys" -a -z "$undoc" ]
fi

# --energy: what this machine can measure and set, here from fake sysfs trees
# (PTRAIN_SYSFS_ROOT) and the stand-in NVML; nothing is set
fake="$top_builddir/tests/energy/.libs/fake_nvml.so"
er=$tmp/energy
mkdir -p "$er/sys/class/powercap/intel-rapl:0" "$er/sys/class/powercap/intel-rapl:0:0" "$er/nvml" \
    "$er/sys/devices/system/cpu/cpu0/cpufreq"
echo package-0 >"$er/sys/class/powercap/intel-rapl:0/name"
echo 123456 >"$er/sys/class/powercap/intel-rapl:0/energy_uj"
echo 262143328850 >"$er/sys/class/powercap/intel-rapl:0/max_energy_range_uj"
echo core >"$er/sys/class/powercap/intel-rapl:0:0/name"
echo 17 >"$er/sys/class/powercap/intel-rapl:0:0/energy_uj"
echo schedutil >"$er/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"
echo 2400000 >"$er/sys/devices/system/cpu/cpu0/cpufreq/scaling_max_freq"
echo 4242 >"$er/nvml/energy.0"
rc=0
PTRAIN_SYSFS_ROOT="$er" PTRAIN_NVML_LIBRARY="$fake" FAKE_NVML_DIR="$er/nvml" "$T" --energy >"$tmp/en" 2>&1 || rc=$?
check "--energy lists the GPU's counter, the RAPL package (core not summed) and cpufreq (status $rc)" \
    sh -c "[ $rc -eq 0 ] && grep -q '^    GPU0 0000:07:00.0 Fake GPU 0: energy counter readable (4.242 J' '$tmp/en' &&
        grep -q '^    intel-rapl:0 package-0: readable (range 262143.3 J)\$' '$tmp/en' &&
        grep -q '^    intel-rapl:0:0 core: readable (range 0.0 J) (not summed' '$tmp/en' &&
        grep -q '^  cpufreq ($er/sys/devices/system/cpu): 1 of' '$tmp/en' &&
        grep -q 'ptrain-run --energy auto: nvml (the rank.s GPU) + rapl' '$tmp/en'"
check "... and changed nothing (the stand-in NVML logged no set)" sh -c "! grep -q 'locked\|app\|restriction' '$er/nvml/log'"
rc=0
PTRAIN_SYSFS_ROOT="$er/none" PTRAIN_NVML_LIBRARY="$er/none.so" "$T" --energy >"$tmp/en2" 2>&1 || rc=$?
check "--energy where nothing can be measured or set says so (status $rc)" \
    sh -c "[ $rc -eq 0 ] && grep -q '^  NVML: none (cannot load' '$tmp/en2' && grep -q '^  RAPL: none' '$tmp/en2' &&
        grep -q 'auto: none (energy reported as null); --energy-clock auto: none settable: runs at the default clocks' '$tmp/en2'"
rc=0
"$T" --energy --json >"$tmp/en3" 2>&1 || rc=$?
check "--energy with another option: one line, status 2 ($rc)" \
    sh -c "[ $rc -eq 2 ] && [ \$(wc -l <'$tmp/en3') -eq 1 ] && grep -q 'it takes no other option' '$tmp/en3'"

done_testing
