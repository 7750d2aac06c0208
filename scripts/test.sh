#!/bin/bash
# SPDX-License-Identifier: MIT
# The whole test suite on a fresh Debian 12 machine: install dependencies,
# build out of tree, `make check` (unit, MPI layouts, tokenizer, topology,
# plugin under a throw-away local Slurm), then the unit and MPI tests again
# under AddressSanitizer + UndefinedBehaviorSanitizer.
#   usage: bash scripts/test.sh        (QUICK=1 skips the sanitizer pass)
# CUDA: configure builds the CUDA backend wherever it finds nvcc (CI has
# CUDA 13 in /usr/local/cuda but no GPU), so the backend compiles and links
# with warnings as errors in both passes and in distcheck; its tests/gpu
# programs report SKIP with the reason.  The sanitizer pass keeps CUDA: the
# CUDA runtime, cuBLASLt, cuDNN and NCCL load and fail cleanly under
# ASan/UBSan/LSan without a GPU (the .cu objects' host code is not
# instrumented: nvcc compiles it).  On a GPU machine ASan's shadow gap
# collides with the driver's mappings: run an ASan build there with
# ASAN_OPTIONS=protect_shadow_gap=0 (scripts/test-gpu.sh runs the release
# build).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
# phase NAME: print how long the phase that ends here took (wall seconds; a
# record for whoever trims CI's time, never a check)
t_phase=$(date +%s)
phase() { local now; now=$(date +%s); echo "ci: $1: $((now - t_phase)) s"; t_phase=$now; }
bash scripts/deps.sh
export PTRAIN_BPE_DIR=${PTRAIN_BPE_DIR:-$(bash scripts/get-tokenizer.sh)}
[ -x configure ] && [ configure -nt configure.ac ] || autoreconf -fi >/dev/null 2>&1 || autoreconf -fi
phase "dependencies and autoreconf"

total_pass=0 total_fail=0 total_skip=0
summarize() { # $1 = build dir: add its test-suite.log counts
    local log=$1/test-suite.log
    [ -f "$log" ] || return 0
    local p f s x e
    p=$(sed -n '0,/^# PASS: */s/^# PASS: *//p' "$log"); f=$(sed -n '0,/^# FAIL: */s/^# FAIL: *//p' "$log")
    s=$(sed -n '0,/^# SKIP: */s/^# SKIP: *//p' "$log"); x=$(sed -n '0,/^# XPASS: */s/^# XPASS: *//p' "$log")
    e=$(sed -n '0,/^# ERROR: */s/^# ERROR: *//p' "$log")
    total_pass=$((total_pass + ${p:-0})); total_fail=$((total_fail + ${f:-0} + ${x:-0} + ${e:-0}))
    total_skip=$((total_skip + ${s:-0}))
}
show_failures() {
    local dir=$1
    echo "---- failing test logs ($dir) ----"
    local l
    for l in $(grep -lE '^(FAIL|ERROR)' "$dir"/tests/*/*.log 2>/dev/null || true); do
        echo "== $l"; tail -n 60 "$l"
    done
    return 0
}

status=0
mkdir -p _build/check
( cd _build/check && ../../configure -q && make -j2 >/dev/null && make -j2 check ) || { status=1; show_failures _build/check; }
summarize _build/check
# CI compiles the CUDA backend wherever nvcc is installed: a configure that
# quietly built without it is a failure here, not a CPU-only pass
if { command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ]; } &&
    ! grep -q '^#define HAVE_CUDA 1' _build/check/config.h 2>/dev/null; then
    echo "ci: nvcc is installed, but configure built no CUDA backend:" \
        "$(grep -m1 'CUDA backend:' _build/check/config.log 2>/dev/null | sed 's/^ *//')"
    status=1; total_fail=$((total_fail + 1))
fi
phase "build and make check"

# The op tests again on the code an AVX2-only CPU runs (issue 34: they
# passed on the AVX-512/AMX machines and failed on an AMD Zen 3):
# PTRAIN_MAX_CPU_ISA=avx2 makes ptrain's own row kernels take their AVX2
# copies and matches OpenBLAS's kernel set to AVX2 (Haswell, as
# OPENBLAS_CORETYPE asks too), and rules out bf16 instructions.  On an
# AVX2 machine it repeats the release run; on an AVX-512 one it is the only
# run of those paths.
avx2_tests="tests/unit/test_blas tests/unit/test_blas_nest tests/unit/test_gemm_grid tests/unit/test_gemm_bf16
    tests/unit/test_ops_elem tests/unit/test_ops_norm tests/unit/test_ops_gemm tests/unit/test_ops_attention
    tests/unit/test_ops_xent tests/unit/test_ops_tables tests/unit/test_ops_fused tests/unit/test_ops_bf16"
if [ -f _build/check/Makefile ]; then
    ( cd _build/check && PTRAIN_MAX_CPU_ISA=avx2 OPENBLAS_CORETYPE=Haswell make -j2 check TESTS="$(echo $avx2_tests)" ) ||
        { status=1; show_failures _build/check; }
    summarize _build/check
    phase "op tests on the AVX2 code paths (PTRAIN_MAX_CPU_ISA=avx2)"
fi

# Fuzz targets (tests/fuzz): regression inputs and seeds, then a short
# fixed budget each: FUZZ_RUNS inputs from a fixed seed (default 300), so CI
# cannot fail by chance; scripts/fuzz.sh SECONDS explores longer.
if command -v clang-14 >/dev/null 2>&1 || command -v clang >/dev/null 2>&1; then
    if FUZZ_RUNS=${FUZZ_RUNS:-300} bash scripts/fuzz.sh 20; then
        total_pass=$((total_pass + 1))
    else
        echo "---- fuzz targets: a finding (see _build/fuzz/*.log) ----"; status=1
        total_fail=$((total_fail + 1))
    fi
    phase "fuzz targets"
fi

# The CUDA kernels for sm_80, sm_90 and PTX take nvcc about 4 minutes of
# CPU a build (attention.cu alone 1-2); the release pass compiles all three
# (what ships and what scripts/test-gpu.sh runs), distcheck and the
# sanitizer pass only the PTX (the same front end, warnings as errors and
# host code, 40% of the time).
ptx_only="-gencode arch=compute_90,code=compute_90"

# The release tarball: make distcheck builds it out of tree from the
# tarball (CUDA kernels included, so a .cu missing from the tarball fails
# here), installs, uninstalls and cleans (with the unit tests only: the
# whole suite just ran above); -j2, as the builds above.
if [ "${QUICK:-0}" != 1 ]; then
    if ( cd _build/check && make -j2 distcheck DISTCHECK_CONFIGURE_FLAGS="CUDA_GENCODE='$ptx_only'" TESTS="tests/unit/test_error tests/unit/test_plan tests/unit/test_ops_elem \
           tests/unit/test_ops_norm tests/unit/test_ops_gemm tests/unit/test_ops_attention tests/unit/test_ops_xent \
           tests/unit/test_ops_tables tests/unit/test_cuda_host" \
           >distcheck.log 2>&1 ); then
        total_pass=$((total_pass + 1)); echo "distcheck: ok"
    else
        echo "---- make distcheck failed ----"; tail -n 40 _build/check/distcheck.log; status=1
        total_fail=$((total_fail + 1))
    fi
    phase "distcheck"
fi

# HWLOC_COMPONENTS=-pci: every instrumented process that loads hwloc (each
# MPI rank, through Open MPI; ptrain-run, -topo and -plan themselves) spent
# 8-10 s of CPU starting up: hwloc's libpciaccess component reads pci.ids
# growing its tables one realloc at a time, and ASan's realloc always copies
# (glibc's grows in place), so the read turns quadratic.  A 4-rank ptrain-run
# took 34 s instead of 4; that made most of this pass's 42 minutes.  Without
# the component hwloc's Linux backend still finds every PCI device (sysfs);
# only hwloc's PCIVendor/PCIDevice names go, for which ptrain-topo falls back
# to its own pci.ids lookup.  The release pass above keeps the default.
if [ "${QUICK:-0}" != 1 ]; then
    mkdir -p _build/sanitize
    san_tests=$(cd _build/check && make -s -f Makefile print-san-tests 2>/dev/null || true)
    ( cd _build/sanitize && ../../configure -q --enable-sanitizers --without-slurm CUDA_GENCODE="$ptx_only" && make -j2 >/dev/null &&
      ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:halt_on_error=1 \
      LSAN_OPTIONS="suppressions=$top/tests/lsan.supp:print_suppressions=0" \
      UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 PTRAIN_TEST_SUBSET=1 HWLOC_COMPONENTS=-pci \
      make -j2 check ${san_tests:+TESTS="$san_tests"} ) || { status=1; show_failures _build/sanitize; }
    summarize _build/sanitize
    phase "sanitizer build and check"
fi
echo "tests: $total_pass passed, $total_fail failed, $total_skip skipped"
exit $status
