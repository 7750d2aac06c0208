#!/bin/bash
# SPDX-License-Identifier: MIT
# Build and run ptrain's libFuzzer targets (tests/fuzz/fuzz_*.c) with
# clang -fsanitize=fuzzer,address,undefined.
#   usage: scripts/fuzz.sh [SECONDS] [TARGET...]
#     SECONDS  budget per target (default 20; 0 = only replay the seed corpus
#              and the regression inputs); FUZZ_RUNS=N replaces it with N
#              inputs from seed 1 (deterministic: what CI runs)
#     TARGET   shard safetensors bpe topo_json topo_xml plan_env spank_opts
#              spank_conf energy_json energy_sysfs ckpt_manifest hf_config
#              llmc corpus topo_arg (default: all; tests/fuzz/README says
#              what each reads)
# Each target first replays tests/fuzz/regress/<target>/ (inputs that once
# crashed) and its seed corpus tests/fuzz/corpus/<target>/, then fuzzes with
# a working corpus under _build/fuzz/corpus/<target> (kept between runs).
# A crash leaves _build/fuzz/crash-<target>-*; copy it to
# tests/fuzz/regress/<target>/ once fixed.  Prints executions and coverage
# per target.  Needs clang and its libFuzzer runtime (Debian 12: clang-14,
# libclang-rt-14-dev; scripts/deps.sh installs them).  bpe and corpus need
# GPT-2's tokenizer: $PTRAIN_BPE_DIR, else scripts/get-tokenizer.sh's
# directory; without either they are skipped (one line each), not failed.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
secs=${1:-20}
shift || true
all="shard safetensors bpe topo_json topo_xml plan_env spank_opts spank_conf energy_json energy_sysfs ckpt_manifest hf_config llmc corpus topo_arg"
targets=${*:-$all}
CC=${FUZZ_CC:-$(command -v clang-14 || command -v clang || true)}
[ -n "$CC" ] || { echo "fuzz: clang not found (apt-get install clang-14 libclang-rt-14-dev)"; exit 1; }
out=${FUZZ_BUILD:-$top/_build/fuzz}
mkdir -p "$out/include"
# the tools' sources (bin/) include configure's config.h; what they use of
# it the targets do not reach, so this one stands in (no configure run)
printf '/* scripts/fuzz.sh: in place of configure'"'"'s config.h */\n#define PACKAGE_VERSION "fuzz"\n' >"$out/include/config.h"
cflags="-g -O1 -std=c11 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
        -fno-omit-frame-pointer -I$top/lib -I$top -I$top/tests/fuzz -I$out/include"
pc() { pkg-config "$@"; }
core="$top/lib/core/error.c $top/lib/core/core.c $top/lib/core/file.c $top/lib/core/cpu.c"
plan="$top/lib/contract/plan_env.c $top/lib/contract/plan_modes.c $top/lib/contract/plan_validate.c
      $top/lib/contract/plan_place.c $top/lib/contract/model.c $top/lib/contract/settings.c
      $top/lib/contract/schedule.c"
declare -A src libs
src[shard]="$core $top/lib/data/shard.c"; libs[shard]="$(pc --cflags --libs jansson) -lm"
src[safetensors]="$core $top/lib/ckpt/safetensors.c"; libs[safetensors]="$(pc --cflags --libs jansson) -lm"
src[bpe]="$core $top/lib/data/bpe.c"; libs[bpe]="$(pc --cflags --libs libpcre2-8 jansson) -lm"
topo_src="$core $top/topo/topo.c $top/topo/topo_json.c $top/topo/topo_membw.c"
topo_libs="$(pc --cflags --libs hwloc jansson) -fopenmp -lm"
src[topo_json]=$topo_src; libs[topo_json]=$topo_libs
src[topo_xml]=$topo_src; libs[topo_xml]=$topo_libs
src[plan_env]="$core $plan"; libs[plan_env]="-lm"
# the plugin's helpers plan and bind with the node model (lib/plan, topo/)
# (and NVML's loader for the energy restriction, lib/energy/nvml.c; its
# sysfs and clock helpers, which the plugin's cpufreq handling takes up
# with issue 34's energy branch: linked already, so that merge builds)
src[spank_opts]="$topo_src $plan $top/lib/shape/shape.c $top/lib/plan/cost.c $top/lib/plan/search.c
                 $top/lib/plan/planner.c $top/lib/plan/resolve.c $top/spank/hostlist.c $top/spank/conf_keys.c
                 $top/spank/conf.c $top/spank/request.c $top/spank/bind.c $top/spank/energy_util.c
                 $top/topo/topo_plan.c $top/lib/energy/nvml.c $top/lib/energy/sysfs.c $top/lib/energy/clock.c"
libs[spank_opts]="$(pc --cflags --libs libconfig) $topo_libs -ldl"
src[spank_conf]=${src[spank_opts]}; libs[spank_conf]=${libs[spank_opts]}
src[energy_json]="$core $plan $top/lib/energy/profile.c $top/lib/plan/energy.c"
libs[energy_json]="$(pc --cflags --libs jansson) -lm"
src[energy_sysfs]="$core $top/lib/energy/sysfs.c $top/lib/energy/meter.c $top/lib/energy/clock.c
                   $top/lib/energy/probe.c $top/lib/energy/nvml.c"
libs[energy_sysfs]="-ldl -lm"
# (the manifest check asks lib/parallel/layout.c's pt_layout_for whether a
# mode has a layout; the layouts themselves are empty tables in the target)
src[ckpt_manifest]="$core $plan $top/lib/ckpt/ckpt.c $top/lib/data/shard.c $top/bin/ckpt/manifest.c
                    $top/lib/parallel/layout.c"
libs[ckpt_manifest]="$(pc --cflags --libs jansson) -lm"
# (fuzz_hf_config.c includes bin/ckpt/hf_read.c, for its static reader)
src[hf_config]="$core $plan $top/lib/ckpt/safetensors.c $top/bin/ckpt/safetensors.c"
libs[hf_config]=${libs[ckpt_manifest]}
# (fuzz_llmc.c includes bin/ckpt/llmc.c; the model it builds is a stub)
src[llmc]="$core $top/lib/contract/model.c"; libs[llmc]=${libs[ckpt_manifest]}
# (fuzz_corpus.c includes lib/data/prepare.c, for its static streaming
# reader; it encodes with GPT-2's tokenizer, as that reader cuts by it)
src[corpus]="$core $top/lib/data/corpus.c $top/lib/data/bpe.c $top/lib/data/shard.c"
libs[corpus]="$(pc --cflags --libs libpcre2-8 jansson) -pthread -lm"
src[topo_arg]="$topo_src $plan $top/lib/shape/shape.c $top/lib/plan/cost.c $top/lib/plan/search.c
               $top/lib/plan/planner.c $top/lib/plan/resolve.c $top/topo/topo_plan.c"
libs[topo_arg]=$topo_libs

# The targets that need GPT-2's tokenizer files
needs_tokenizer="bpe corpus"
# They find them in $PTRAIN_BPE_DIR when set (CI's
# scripts/test.sh sets it), else the directory scripts/get-tokenizer.sh
# prints (it installs the files with npm the first time).  Without them
# the target is skipped with a line saying why, not failed: a machine
# without npm or network still runs every other target.
bpe_dir() {
    local d=${PTRAIN_BPE_DIR:-}
    if [ -z "$d" ]; then
        d=$(timeout 300 bash "$top/scripts/get-tokenizer.sh" 2>"$out/get-tokenizer.log") ||
            { echo "scripts/get-tokenizer.sh failed: $(tail -n 1 "$out/get-tokenizer.log")"; return 1; }
    fi
    if [ ! -f "$d/encoder.json" ] || [ ! -f "$d/vocab.bpe" ]; then
        echo "no encoder.json and vocab.bpe in '$d'${PTRAIN_BPE_DIR:+ (PTRAIN_BPE_DIR)}"
        return 1
    fi
    echo "$d"
}

# Every source is compiled once per run, into $out/obj, with the include
# flags of them all (the headers of bin/ckpt name MPI types: MPI's headers,
# not its library): a source several targets link (lib/core, topo/,
# lib/contract) is not compiled again for each.  Nothing is kept from an
# earlier run, so no changed header is missed.
obj=$out/obj
rm -rf "$obj"
allflags="$(pc --cflags jansson hwloc libconfig libpcre2-8) $(pc --cflags mpi-c 2>/dev/null || true)
          -I$top/bin/ckpt -fopenmp"
object() { # SOURCE: compiled unless it was in this run; prints the object
    local o=$obj/${1#"$top"/}.o
    if [ ! -f "$o" ]; then
        mkdir -p "${o%/*}"
        # shellcheck disable=SC2086
        $CC $cflags $allflags -c -o "$o" "$1" || return 1
    fi
    echo "$o"
}

status=0
for t in $targets; do
    [ -n "${src[$t]+x}" ] || { echo "fuzz: unknown target '$t' (valid: $all)"; exit 2; }
    if [[ " $needs_tokenizer " == *" $t "* ]]; then
        if ! why=$(bpe_dir); then
            echo "fuzz: $t: SKIPPED, no GPT-2 tokenizer: $why (set PTRAIN_BPE_DIR to its directory)"
            continue
        fi
        export PTRAIN_BPE_DIR=$why
    fi
    bin=$out/fuzz_$t
    objs=()
    for s in "$top/tests/fuzz/fuzz_$t.c" ${src[$t]}; do
        o=$(object "$s")
        objs+=("$o")
    done
    # shellcheck disable=SC2086
    $CC $cflags -o "$bin" "${objs[@]}" ${libs[$t]}
    regress=$top/tests/fuzz/regress/$t seeds=$top/tests/fuzz/corpus/$t work=$out/corpus/$t
    mkdir -p "$work"
    export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
    export ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1
    export LSAN_OPTIONS=suppressions=$top/tests/fuzz/lsan.supp:print_suppressions=0
    # replay: every regression input and seed must pass, each within 60 s
    # (libFuzzer's default is 20 minutes: a hang found before would take
    # that long to fail)
    inputs=()
    for d in "$regress" "$seeds"; do
        [ -d "$d" ] && while IFS= read -r -d '' f; do inputs+=("$f"); done < <(find "$d" -type f -print0)
    done
    if [ ${#inputs[@]} -gt 0 ] && ! "$bin" -runs=0 -timeout=60 "${inputs[@]}" >"$out/$t.replay.log" 2>&1; then
        echo "fuzz: $t: a regression or seed input fails:"; tail -n 30 "$out/$t.replay.log"; status=1; continue
    fi
    echo "fuzz: $t: ${#inputs[@]} regression/seed inputs pass"
    [ "$secs" -gt 0 ] || continue
    log=$out/$t.log
    dict=(); [ -f "$top/tests/fuzz/$t.dict" ] && dict=(-dict="$top/tests/fuzz/$t.dict")
    # FUZZ_RUNS=N (CI): a fixed number of inputs from a fixed seed instead of
    # a time budget, so a run explores the same inputs on a slow or loaded
    # machine and cannot fail by chance; the timeout is generous for the same
    # reason.
    budget=(-max_total_time="$secs" -timeout=10)
    [ -n "${FUZZ_RUNS:-}" ] && budget=(-runs="$FUZZ_RUNS" -seed=1 -timeout=60)
    if "$bin" "${budget[@]}" -rss_limit_mb=2048 -max_len=65536 \
         -print_final_stats=1 -artifact_prefix="$out/crash-$t-" "${dict[@]}" \
         "$work" ${seeds:+$( [ -d "$seeds" ] && echo "$seeds")} >"$log" 2>&1; then
        execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
        cov=$(grep -oE 'cov: [0-9]+ ft: [0-9]+' "$log" | tail -n 1)
        echo "fuzz: $t: ${FUZZ_RUNS:+seed 1, }${FUZZ_RUNS:-${secs}s}${FUZZ_RUNS:+ runs}, ${execs:-?} executions, ${cov:-no coverage line}, corpus $(ls "$work" | wc -l) inputs"
    else
        echo "fuzz: $t: FINDING (see $log, input $out/crash-$t-*):"
        grep -E 'ERROR|SUMMARY|runtime error' "$log" | head -n 5
        status=1
    fi
done
exit $status
