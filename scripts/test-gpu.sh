#!/bin/bash
# SPDX-License-Identifier: MIT
# The CUDA backend on a GPU machine, in one run that fits in 20 minutes on
# one H100: build with CUDA, run every tests/gpu program (the
# kernel tests also under compute-sanitizer when it is installed), then the
# pieces later work adds, each a real invocation that reports SKIP "not
# built yet" until its piece exists:
#   gpt-fwd-bwd   tests/gpu/test_gpt: the GPT forward/backward on the GPU
#                 against the CPU run
#   layouts       ptrain-run --device cuda: every layout on several ranks
#                 sharing the GPU against the single-process GPU run
#   ckpt          a checkpoint saved on the GPU, resumed on the GPU (bit-equal
#                 to the straight run) and on the CPU
#   attention-cudnn  a bf16 run with cuDNN's attention against the flash kernels
#   demo-200      200 steps on the demo corpus (data/kjv) whose validation
#                 curve overlays the CPU run's (2% at every validation)
#   bench         bench-step --device cuda: GPT-2 124M, B=16, T=1024; Llama 3.2 1B, B=2, T=8192
# and print one summary table.  Exit status 1 when anything failed, 77 when
# nothing failed but there is no GPU (everything on one skipped), else 0.
#
#   usage: bash scripts/test-gpu.sh
#   env:   BUILD (default _build/gpu), JOBS (default: all cores),
#          CUDA_DIR (configure --with-cuda=DIR; default: configure's search),
#          SKIP_BUILD=1 (reuse BUILD as it is), SKIP_MEMCHECK=1 (no
#          compute-sanitizer runs: a quicker rerun while fixing),
#          PTRAIN_DEPS_DEBS (default _deps: see "dependencies" below),
#          PTRAIN_DEPS_FORCE (modules to take from the .deb files even when
#          installed, to test that path: "libconfig jansson")
#
# A GPU machine is often not a ptrain build machine: the one this script was
# written for (Ubuntu 24.04, CUDA 13, NCCL 2.28, Open MPI 4.1) has no
# libconfig or jansson headers (configure requires them) and no Slurm
# headers (configure then builds without the SPANK plugin, which this script
# does not need), and it may have no network and no autotools.  So:
#   - dependencies: the pkg-config modules configure requires that are
#     missing are taken from .deb files in PTRAIN_DEPS_DEBS, unpacked with
#     dpkg-deb -x into BUILD/deps (no root, nothing installed), their .pc
#     files pointed there and the libraries found through an rpath.  Fetch
#     the .deb files where apt works:
#         mkdir -p _deps && cd _deps && apt-get download libconfig-dev \
#             libconfig9 libjansson-dev libjansson4
#     (Debian 12's and Ubuntu 24.04's both work); without them, and when
#     apt-get download works here, the script fetches them itself.
#   - autotools: without autoreconf, run the script from an unpacked
#     `make dist` tarball (its configure is generated already).
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top" || exit 1
build=${BUILD:-_build/gpu}
jobs=${JOBS:-$(nproc 2>/dev/null || echo 4)}
logs=$build/test-gpu
t_start=$(date +%s)
# GPU machines often run everything as root: Open MPI then needs these,
# for mpirun and for the tests/gpu programs that call MPI_Init alone
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
rows=()
failed=0
# row NAME RESULT SECONDS NOTE: one line of the summary table
row() {
    rows+=("$(printf '%-34s %-5s %6s  %s' "$1" "$2" "$3" "$4")")
    [ "$2" = FAIL ] && failed=1
    printf 'test-gpu: %-34s %-5s %6s s  %s\n' "$1" "$2" "$3" "$4"
}
summary() {
    echo
    echo "==== scripts/test-gpu.sh summary ($(date -u '+%Y-%m-%d %H:%M UTC'), $(( $(date +%s) - t_start )) s) ===="
    [ -n "${gpu_line:-}" ] && echo "$gpu_line"
    printf '%-34s %-5s %6s  %s\n' "step" "result" "secs" "note"
    printf '%s\n' "${rows[@]}"
    [ $(( $(date +%s) - t_start )) -le 1200 ] || echo "warning: longer than the 20 minutes this script must fit in"
}
now() { date +%s; }

# ---- dependencies --------------------------------------------------------------------------------
mkdir -p "$build"
build_abs=$(cd "$build" && pwd)
logs=$build_abs/test-gpu
mkdir -p "$logs"
# deb_packages MODULE: the Debian/Ubuntu packages that provide a pkg-config
# module configure requires (the -dev package and its runtime library)
deb_packages() {
    case $1 in
    libconfig) echo "libconfig-dev libconfig9" ;;
    jansson) echo "libjansson-dev libjansson4" ;;
    hwloc) echo "libhwloc-dev libhwloc15" ;;
    libpcre2-8) echo "libpcre2-dev libpcre2-8-0 libpcre2-16-0 libpcre2-32-0 libpcre2-posix3" ;;
    esac
}
# missing_modules [ROOT]: the modules configure requires that pkg-config
# cannot find; with ROOT, also those of PTRAIN_DEPS_FORCE (a test of this
# path on a machine that has them: "libconfig jansson") not taken from ROOT
missing_modules() {
    local m
    for m in hwloc libconfig libpcre2-8 jansson; do
        case " ${PTRAIN_DEPS_FORCE:-} " in
        *" $m "*)
            if [ -z "${1:-}" ]; then echo "$m"; continue; fi
            case $(pkg-config --variable=prefix "$m" 2>/dev/null) in "$1"/*) ;; *) echo "$m"; continue ;; esac ;;
        esac
        pkg-config --exists "$m" 2>/dev/null || echo "$m"
    done
}
t=$(now)
if [ "${SKIP_BUILD:-0}" != 1 ] && ! command -v pkg-config >/dev/null; then
    row dependencies FAIL 0 "no pkg-config (configure needs it: apt-get install pkg-config)"
    summary
    exit 1
fi
missing=$([ "${SKIP_BUILD:-0}" = 1 ] || missing_modules | tr '\n' ' ')
missing=${missing% }
deps_note="all found by pkg-config"
if [ -n "$missing" ]; then
    debs=${PTRAIN_DEPS_DEBS:-$top/_deps}
    pkgs=$(for m in $missing; do deb_packages "$m"; done | tr '\n' ' ')
    if ! ls "$debs"/*.deb >/dev/null 2>&1 && command -v apt-get >/dev/null; then
        mkdir -p "$debs"
        # shellcheck disable=SC2086
        ( cd "$debs" && apt-get download $pkgs ) >"$logs/apt-download.log" 2>&1 || true
    fi
    root=$build_abs/deps
    rm -rf "$root"
    mkdir -p "$root"
    for deb in "$debs"/*.deb; do
        [ -f "$deb" ] || continue
        dpkg-deb -x "$deb" "$root" 2>>"$logs/deps.log" || echo "cannot unpack $deb" >>"$logs/deps.log"
    done
    # their .pc files say prefix=/usr: point them at the unpacked tree
    pcdirs=
    for d in "$root"/usr/lib/*/pkgconfig "$root"/usr/lib/pkgconfig "$root"/usr/share/pkgconfig; do
        [ -d "$d" ] || continue
        sed -i "s|^prefix=/usr\$|prefix=$root/usr|" "$d"/*.pc 2>/dev/null
        pcdirs=$pcdirs${pcdirs:+:}$d
    done
    export PKG_CONFIG_PATH=$pcdirs${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
    libdirs=
    for d in "$root"/usr/lib/* "$root"/usr/lib; do
        ls "$d"/*.so* >/dev/null 2>&1 && libdirs="$libdirs -Wl,-rpath,$d"
    done
    export LDFLAGS="${LDFLAGS:-}$libdirs"
    still=$(missing_modules "$root" | tr '\n' ' ')
    still=${still% }
    if [ -n "$still" ]; then
        row dependencies FAIL $(( $(now) - t )) "configure needs pkg-config modules: $still; apt-get install them, or put the .deb files of [${pkgs% }] in $debs (apt-get download where apt works)"
        summary
        exit 1
    fi
    deps_note="$missing from .deb files in $debs, unpacked into $root"
fi
[ "${SKIP_BUILD:-0}" = 1 ] || row dependencies PASS $(( $(now) - t )) "$deps_note"

# ---- build ---------------------------------------------------------------------------------
t=$(now)
if [ "${SKIP_BUILD:-0}" != 1 ]; then
    if [ ! -x configure ] && ! command -v autoreconf >/dev/null; then
        row build FAIL 0 "no configure and no autoreconf: run this from an unpacked 'make dist' tarball, or install autoconf, automake and libtool"
        summary
        exit 1
    fi
    if { [ -x configure ] && [ configure -nt configure.ac ]; } || autoreconf -fi >"$logs/autoreconf.log" 2>&1; then
        rel=$(realpath --relative-to="$build_abs" "$top")
        ( cd "$build_abs" && "$rel/configure" -q --with-cuda${CUDA_DIR:+=$CUDA_DIR} && make -j"$jobs" && make -j"$jobs" check TESTS= ) >"$logs/build.log" 2>&1
        rc=$?
    else
        rc=1
    fi
    if [ $rc -ne 0 ]; then
        row build FAIL $(( $(now) - t )) "see $logs/build.log: $(grep -m1 -iE 'error' "$logs/build.log" | cut -c1-100)"
        summary
        exit 1
    fi
    row build PASS $(( $(now) - t )) "configure --with-cuda, make -j$jobs all and the check programs ($(grep -c '^#define HAVE_\(CUDA\|CUDNN\|NCCL\) 1' "$build_abs/config.h") of CUDA/cuDNN/NCCL)"
fi
grep -q '^#define HAVE_CUDA 1' "$build_abs/config.h" 2>/dev/null || {
    row build FAIL 0 "$build has no CUDA backend (config.h: HAVE_CUDA): configure found no nvcc"
    summary
    exit 1
}
mk() { env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s --no-print-directory -C "$build_abs" "$@"; }
[ -x "$build_abs/tests/gpu/test_comm_gpu" ] || {
    row build FAIL 0 "$build has no tests/gpu programs (make check TESTS= builds them; SKIP_BUILD=1 needs them built)"
    summary
    exit 1
}
# the GPU, as the backend sees it (or why there is none: then everything skips)
gpu_why=$("$build_abs/tests/gpu/test_comm_gpu" --probe 2>&1)
have_gpu=$?
gpu_line="versions: $("$build_abs/libtool" --mode=execute "$build_abs/tests/unit/test_cuda_lib" 2>/dev/null |
    sed -n 's/^ok [0-9]* - versions: //p')"
[ "$gpu_line" = "versions: " ] && gpu_line="no GPU: $gpu_why"

# ---- tests/gpu ---------------------------------------------------------------------------------
# tap_result LOG: "PASS n ok" / "FAIL ..." / "SKIP reason" from a TAP log of make check
tap_result() {
    local log=$1 trs=${1%.log}.trs
    local pass fail skip
    pass=$(grep -c ':test-result: PASS' "$trs" 2>/dev/null)
    fail=$(grep -c -E ':test-result: (FAIL|XPASS|ERROR)' "$trs" 2>/dev/null)
    skip=$(grep -c ':test-result: SKIP' "$trs" 2>/dev/null)
    if [ "${fail:-0}" -gt 0 ] || [ ! -f "$trs" ]; then
        echo "FAIL ${fail:-?} failed, ${pass:-0} passed: $(grep -m1 '^not ok' "$log" | cut -c1-90)"
    elif [ "${pass:-0}" -eq 0 ] && [ "${skip:-0}" -gt 0 ]; then
        echo "SKIP $(sed -n 's/^1\.\.0 # SKIP //p' "$log" | head -1 | cut -c1-100)"
    else
        echo "PASS ${pass} checks$( [ "${skip:-0}" -gt 0 ] && echo ", $skip skipped")"
    fi
}
# run_check NAME TEST: the test through make check (its TAP driver and environment)
run_check() {
    local name=$1 test=$2 t res
    t=$(now)
    timeout 900 env -u MAKEFLAGS make -C "$build_abs" -s check TESTS="$test" >"$logs/$name.out" 2>&1
    res=$(tap_result "$build_abs/${test%.sh}.log")
    row "$name" "${res%% *}" $(( $(now) - t )) "${res#* }"
    # the timing lines of the dev/cuda pattern, into the table too
    local line
    while IFS= read -r line; do
        rows+=("    ${line#\# }")
        echo "    ${line#\# }"
    done < <(grep -h '^# timing' "$build_abs/${test%.sh}.log" 2>/dev/null)
}
later="tests/gpu/test_gpt" # run below, as their own step
for test in $(mk print-gpu-tests); do
    case " $later " in *" $test "*) continue ;; esac
    run_check "$(basename "${test%.sh}")" "$test"
done
# ---- the pieces later work adds ---------------------------------------------------------------------
# gpt-fwd-bwd: its test program, once tests/gpu has it
if [ -x "$build_abs/tests/gpu/test_gpt" ]; then
    run_check gpt-fwd-bwd tests/gpu/test_gpt
else
    row gpt-fwd-bwd SKIP 0 "not built yet (tests/gpu/test_gpt: the GPT forward/backward on the GPU against the CPU run)"
fi

run="$build_abs/ptrain-run"
mpirun=$(command -v mpirun || true)
prun() { "$mpirun" --allow-run-as-root --oversubscribe --bind-to none "$@"; }
# Whether ptrain-run trains on the GPU yet: one step of the test model
wired=0
if [ "$have_gpu" -ne 0 ]; then
    wired_why=$gpu_why
elif [ -z "$mpirun" ]; then
    wired_why="mpirun not found"
else
    prun -np 1 "$run" --device cuda --model test --data synthetic --steps 1 >"$logs/probe-run.log" 2>&1
    if grep -q 'ops are not wired yet' "$logs/probe-run.log"; then
        wired_why="not built yet (ptrain-run --device cuda: the CUDA ops are not wired into the table)"
    elif grep -q '^done:' "$logs/probe-run.log"; then
        wired=1
    else
        wired_why="ptrain-run --device cuda failed: $(grep -m1 'error' "$logs/probe-run.log" | cut -c1-100)"
        row ptrain-run-cuda FAIL 0 "$wired_why"
    fi
fi

# loss LOG STEP: the loss printed for a step
loss_at() { sed -n "s/^step *$2\/[0-9]* | loss \([0-9.]*\).*/\1/p" "$1" | head -1; }
# layouts: several ranks sharing the GPU (lib/comm stages their collectives)
# against the single-process GPU run, the test model, 3 steps
if [ "$wired" -eq 1 ]; then
    t=$(now)
    common=(--device cuda --model test --data synthetic:7 --steps 3 --batch 8 --val-every 0 --seed 11)
    # the reference: one rank, the same model (a row's --layers N included)
    ref_for() {
        local layers
        layers=$(sed -n 's/.*--layers \([0-9]*\).*/\1/p' <<<"$1")
        local log="$logs/layout-ref${layers:+-L$layers}.log"
        [ -f "$log" ] || prun -np 1 "$run" "${common[@]}" ${layers:+--layers "$layers"} >"$log" 2>&1 </dev/null
        loss_at "$log" 3
    }
    rm -f "$logs"/layout-ref*.log
    ref=$(ref_for "")
    bad="" n=0
    while read -r np flags; do
        [ -z "$np" ] && continue
        n=$((n + 1))
        r=$(ref_for "$flags")
        # shellcheck disable=SC2086
        # </dev/null: mpirun forwards its stdin to rank 0, which would
        # swallow the rest of this list (on the H200 only the first ran)
        prun -np "$np" "$run" "${common[@]}" $flags >"$logs/layout-$n.log" 2>&1 </dev/null
        got=$(loss_at "$logs/layout-$n.log" 3)
        awk -v a="$got" -v b="$r" 'BEGIN { exit !(a != "" && b != "" && (a - b) ^ 2 <= (1e-3 * b) ^ 2) }' ||
            bad="$bad [np=$np $flags: ${got:-$(grep -m1 -i 'error' "$logs/layout-$n.log" | cut -c1-120)} vs $r]"
    done <<'EOF'
2 --dp 2
2 --tp 2
4 --mode 2d --tp 4
2 --sp 2
2 --pp 2 --microbatches 2
4 --pp 2 --microbatches 4 --schedule interleaved --virtual-stages 2 --layers 4
2 --dp 2 --zero 1
2 --dp 2 --zero 2
2 --dp 2 --zero 3
2 --dp 2 --recompute block
4 --tp 2 --sp 2
EOF
    if [ -n "$ref" ] && [ -z "$bad" ]; then row layouts PASS $(( $(now) - t )) "$n layouts equal the 1-rank GPU run at step 3 (loss $ref)"
    else row layouts FAIL $(( $(now) - t )) "reference ${ref:-missing};$bad"; fi
else
    row layouts SKIP 0 "$wired_why"
fi

# ckpt: save on the GPU at step 2, resume to step 4 on the GPU (bit-equal to
# the straight run) and on the CPU (within 1e-3); bf16 with cuDNN attention
# (PTRAIN_ATTENTION=cudnn) against the flash kernels (within 2e-2)
if [ "$wired" -eq 1 ]; then
    t=$(now)
    ck=(--device cuda --model test --data synthetic:7 --batch 8 --val-every 0 --seed 13)
    rm -rf "$logs/ckpt" "$logs/ckpt2"
    prun -np 1 "$run" "${ck[@]}" --steps 4 --save-dir "$logs/ckpt" --save-every 2 >"$logs/ckpt-save.log" 2>&1 </dev/null
    prun -np 1 "$run" "${ck[@]}" --steps 4 --save-dir "$logs/ckpt2" --resume "$logs/ckpt/step-00000002" >"$logs/ckpt-resume-gpu.log" 2>&1 </dev/null
    prun -np 1 "$run" "${ck[@]}" --device cpu --threads 1 --steps 4 --resume "$logs/ckpt/step-00000002" >"$logs/ckpt-resume-cpu.log" 2>&1 </dev/null
    a=$(loss_at "$logs/ckpt-save.log" 4) b=$(loss_at "$logs/ckpt-resume-gpu.log" 4) c=$(loss_at "$logs/ckpt-resume-cpu.log" 4)
    if [ -n "$a" ] && [ "$a" = "$b" ] && awk -v a="$a" -v c="$c" 'BEGIN { exit !(c != "" && (a - c) ^ 2 <= (1e-3 * a) ^ 2) }'; then
        row ckpt PASS $(( $(now) - t )) "step 4: straight $a, resumed on GPU $b, on CPU $c"
    else
        row ckpt FAIL $(( $(now) - t )) "step 4: straight ${a:-missing}, resumed on GPU ${b:-missing}, on CPU ${c:-missing} ($logs/ckpt-*.log)"
    fi
    t=$(now)
    cu=(--device cuda --model tiny --data synthetic:7 --batch 4 --steps 3 --val-every 0 --seed 17 --precision bf16)
    if ! grep -q '^#define HAVE_CUDNN 1' "$build_abs/config.h"; then
        row attention-cudnn SKIP 0 "built without cuDNN"
    else
        PTRAIN_ATTENTION=flash prun -x PTRAIN_ATTENTION -np 1 "$run" "${cu[@]}" >"$logs/attn-flash.log" 2>&1 </dev/null
        PTRAIN_ATTENTION=cudnn prun -x PTRAIN_ATTENTION -np 1 "$run" "${cu[@]}" >"$logs/attn-cudnn.log" 2>&1 </dev/null
        a=$(loss_at "$logs/attn-flash.log" 3) b=$(loss_at "$logs/attn-cudnn.log" 3)
        if awk -v a="$a" -v b="$b" 'BEGIN { exit !(a != "" && b != "" && (a - b) ^ 2 <= (2e-2 * a) ^ 2) }'; then
            row attention-cudnn PASS $(( $(now) - t )) "bf16 step 3 loss: cudnn $b, flash $a"
        else
            row attention-cudnn FAIL $(( $(now) - t )) "bf16 step 3 loss: cudnn ${b:-missing} ($(grep -m1 -i error "$logs/attn-cudnn.log" | cut -c1-80)), flash ${a:-missing}"
        fi
    fi
else
    row ckpt SKIP 0 "$wired_why"
    row attention-cudnn SKIP 0 "$wired_why"
fi

# demo-200: 200 steps on the demo corpus, GPU against CPU
if [ "$wired" -eq 1 ]; then
    data=${PTRAIN_DEMO_DATA:-data/kjv}
    if [ -f "$data/train.bin" ] && [ -f "$data/val.bin" ] && command -v jq >/dev/null; then
        t=$(now)
        demo=(--model tiny --data "$data" --steps 200 --batch 8 --val-every 50 --seed 5)
        # the CPU reference on one thread: on the 16-core H200 machine (Ubuntu's
        # pthreads OpenBLAS) 16 threads ran this model 12x slower than one
        prun -np 1 "$run" "${demo[@]}" --device cpu --threads 1 --metrics "$logs/demo-cpu.jsonl" >"$logs/demo-cpu.log" 2>&1
        prun -np 1 "$run" "${demo[@]}" --device cuda --metrics "$logs/demo-gpu.jsonl" >"$logs/demo-gpu.log" 2>&1
        c=$(jq -r 'select(.type == "val") | .val_loss' "$logs/demo-cpu.jsonl" 2>/dev/null | tr '\n' ' ')
        g=$(jq -r 'select(.type == "val") | .val_loss' "$logs/demo-gpu.jsonl" 2>/dev/null | tr '\n' ' ')
        if [ -n "$c" ] && awk -v c="$c" -v g="$g" 'BEGIN { n = split(c, a, " "); m = split(g, b, " "); if (n != m || n == 0) exit 1;
                for (i = 1; i <= n; i++) if ((a[i] - b[i]) ^ 2 > (0.02 * a[i]) ^ 2) exit 1; exit 0 }'; then
            row demo-200 PASS $(( $(now) - t )) "val loss gpu [$g] cpu [$c]"
        else
            row demo-200 FAIL $(( $(now) - t )) "val loss gpu [$g] cpu [$c] (2% at every validation)"
        fi
    else
        row demo-200 SKIP 0 "no demo corpus $data (scripts/get-corpus.sh and ptrain-data prepare, see scripts/demo.sh) or no jq"
    fi
else
    row demo-200 SKIP 0 "$wired_why"
fi

# bench: GPT-2 124M, B=16, T=1024 on one GPU, bf16 then fp32
for prec in bf16 fp32; do
    if [ "$have_gpu" -eq 0 ] && [ -x "$build_abs/bench/bench-step" ]; then
        t=$(now)
        if timeout 300 "$build_abs/bench/bench-step" --device cuda --model gpt2-124M --batch 16 --steps 5 --precision $prec \
            >"$logs/bench-$prec.log" 2>&1; then
            row "bench $prec" PASS $(( $(now) - t )) "$(sed -n 's/^result: //p' "$logs/bench-$prec.log" | cut -c1-120)"
            while IFS= read -r line; do rows+=("    $line"); echo "    $line"; done < <(grep -E '^(cuBLASLt|mean|best step|peak memory)' "$logs/bench-$prec.log")
        elif grep -qiE 'unknown|unrecognized|invalid option|not valid' "$logs/bench-$prec.log"; then
            row "bench $prec" SKIP $(( $(now) - t )) "not built yet (bench-step --device cuda)"
        else
            row "bench $prec" FAIL $(( $(now) - t )) "$(grep -m1 -iE 'error|bench-step:' "$logs/bench-$prec.log" | cut -c1-100) ($logs/bench-$prec.log)"
        fi
    else
        row "bench $prec" SKIP 0 "${wired_why:-not built yet (bench-step --device cuda)}"
    fi
done

# bench llama: Llama 3.2 1B (GQA 32:8, SwiGLU 8192, V 128256, T 8192), B=2, bf16
if [ "$have_gpu" -eq 0 ] && [ -x "$build_abs/bench/bench-step" ]; then
    t=$(now)
    if timeout 300 "$build_abs/bench/bench-step" --device cuda --model llama3.2-1b --batch 2 --steps 3 --precision bf16 \
        >"$logs/bench-llama.log" 2>&1; then
        row "bench llama3.2-1b bf16" PASS $(( $(now) - t )) "$(sed -n 's/^result: //p' "$logs/bench-llama.log" | cut -c1-120)"
        while IFS= read -r line; do rows+=("    $line"); echo "    $line"; done < <(grep -E '^(mean|best step|peak memory)' "$logs/bench-llama.log")
    else
        row "bench llama3.2-1b bf16" FAIL $(( $(now) - t )) "$(grep -m1 -iE 'error|bench-step:' "$logs/bench-llama.log" | cut -c1-100) ($logs/bench-llama.log)"
    fi
else
    row "bench llama3.2-1b bf16" SKIP 0 "${wired_why:-not built yet (bench-step --device cuda)}"
fi

# ---- last: the kernel tests under compute-sanitizer (the slowest step, so a short
# lease still sees everything above) ----
# the kernel tests (programs, not the MPI wrappers) under compute-sanitizer
cs=$(command -v compute-sanitizer || true)
[ -z "$cs" ] && for d in ${CUDA_DIR:-} /usr/local/cuda; do
    [ -x "$d/bin/compute-sanitizer" ] && cs=$d/bin/compute-sanitizer && break
done
for test in $(mk print-gpu-tests); do
    case $test in *.sh) continue ;; esac
    case " $later " in *" $test "*) continue ;; esac
    name="$(basename "$test") (memcheck)"
    if [ "$have_gpu" -ne 0 ]; then row "$name" SKIP 0 "$gpu_why"; continue; fi
    if [ "${SKIP_MEMCHECK:-0}" = 1 ]; then row "$name" SKIP 0 "SKIP_MEMCHECK=1"; continue; fi
    if [ -z "$cs" ]; then row "$name" SKIP 0 "compute-sanitizer not installed"; continue; fi
    t=$(now)
    PTRAIN_GPU_QUICK=1 timeout 900 "$build_abs/libtool" --mode=execute "$cs" --tool memcheck --error-exitcode 99 \
        "$build_abs/$test" >"$logs/$(basename "$test").memcheck.log" 2>&1
    rc=$?
    errs=$(sed -n 's/^========= ERROR SUMMARY: \([0-9]*\) error.*/\1/p' "$logs/$(basename "$test").memcheck.log" | tail -1)
    nok=$(grep -c '^not ok' "$logs/$(basename "$test").memcheck.log")
    if [ $rc -eq 0 ] && [ "$nok" -eq 0 ]; then row "$name" PASS $(( $(now) - t )) "${errs:-0} errors"
    else row "$name" FAIL $(( $(now) - t )) "status $rc, ${errs:-?} sanitizer errors, $nok checks failed ($logs)"; fi
done

summary
# no GPU: nothing was tested, which must not read as a pass
[ "$failed" -eq 0 ] && [ "$have_gpu" -ne 0 ] && { echo "test-gpu: no GPU, so nothing ran on one (exit 77)"; exit 77; }
exit $failed
