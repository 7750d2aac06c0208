#!/bin/sh
# SPDX-License-Identifier: MIT
# Start-up agreement and watchdog of ptrain-run under mpirun: a rank whose PTRAIN_* value is bad, or whose valid plan,
# model or options differ from the others', makes EVERY rank exit (status
# 2) with one line naming the rank and the field; no rank hangs in a
# collective.  A rank killed or stopped mid-run ends the job within 30 s,
# named by mpirun, the heartbeat or the watchdog.  Flags that used to be truncated or
# refused inconsistently (--rank-order, cluster/spread, --heads) and
# pipeline/ZeRO settings that do not fit
# the model, batch or world (--pp, --microbatches, --schedule, --pp-split,
# --zero) get one clear line.  The per-rank differences come from mpirun's MPMD syntax
# (-np 1 A : -np 1 env X=Y A).
. "$top_srcdir/tests/lib.sh"
need_run
need_mpirun
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ptrain-startup.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
fresh_seed
diag "data seed $seed"
R="$run --model test --data synthetic:$seed --steps 2 --batch 4 --val-every 0"

# expect DESC STATUS PATTERN NP... : run with a 180 s guard; the job must end
# (not hang), with STATUS, printing exactly one "ptrain-run: error" line
# that matches PATTERN.  (The guard only tells a hang from an end: 4 ASan
# ranks took 75-96 s to start and refuse on a 2-core machine at load 17,
# with or without the heartbeat.)
expect() {
    desc=$1; want_rc=$2; pat=$3; shift 3
    rc=0
    # (leak checks off for MPI processes, as ptrain_mpirun does)
    ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
        timeout 180 "${MPIRUN:-mpirun}" --allow-run-as-root --oversubscribe --bind-to none "$@" \
        >"$tmp/out" 2>&1 || rc=$?
    n=$(grep -c "ptrain-run: error" "$tmp/out")
    line=$(grep -m1 "ptrain-run: error" "$tmp/out" | cut -c1-220)
    if [ "$rc" -eq 124 ]; then
        not_ok "$desc: the job hung (killed after 180 s)"
    elif [ "$rc" -eq "$want_rc" ] && [ "$n" -eq 1 ] && grep "ptrain-run: error" "$tmp/out" | grep -q -- "$pat"; then
        ok "$desc: every rank exits $rc; $line"
    else
        not_ok "$desc: expected status $want_rc and one line matching '$pat' (status $rc, $n lines)"
        sed 's/^/# /' "$tmp/out" | tail -8
    fi
}

# case 1: one rank's bad value
expect "PTRAIN_TP=abc on rank 1 of 2" 2 "rank 1: invalid PTRAIN_TP='abc'.*start-up failed on rank 1 of 2" \
    -np 1 $R : -np 1 env PTRAIN_TP=abc $R
expect "PTRAIN_MODE=bogus on rank 1 of 2" 2 "rank 1: PTRAIN_MODE: invalid mode 'bogus'" \
    -np 1 $R : -np 1 env PTRAIN_MODE=bogus $R
expect "PTRAIN_TP=abc on ranks 1 and 3 of 4" 2 "rank 1: .*start-up failed on ranks 1, 3 of 4" \
    -np 1 $R : -np 1 env PTRAIN_TP=abc $R : -np 1 $R : -np 1 env PTRAIN_TP=abc $R
expect "missing data directory on rank 0 only" 2 "rank 0: data: data set $tmp/nowhere: No such file or directory" \
    -np 1 "$run" --model test --data "$tmp/nowhere" --steps 1 --batch 4 : -np 1 $R

# case 2: valid but different plans, models, options
expect "PTRAIN_SP=2 on rank 1 of 2" 2 "ranks disagree at start-up: plan dp: rank 1 has 1, rank 0 has 2; plan sp: rank 1 has 2, rank 0 has 1" \
    -np 1 $R : -np 1 env PTRAIN_SP=2 $R
expect "PTRAIN_PP=2 on rank 1 of 2" 2 "ranks disagree at start-up: plan dp: rank 1 has 1, rank 0 has 2; plan pp: rank 1 has 2, rank 0 has 1" \
    -np 1 $R : -np 1 env PTRAIN_PP=2 $R
expect "PTRAIN_SCHEDULE=gpipe on rank 1 of 2" 2 "plan schedule: rank 1 has gpipe, rank 0 has 1f1b" \
    -np 1 $R --pp 2 : -np 1 env PTRAIN_SCHEDULE=gpipe $R --pp 2
expect "PTRAIN_ZERO=1 on rank 1 of 2" 2 "plan zero: rank 1 has 1, rank 0 has 0" \
    -np 1 $R : -np 1 env PTRAIN_ZERO=1 $R
expect "PTRAIN_RECOMPUTE=attention on rank 1 of 2" 2 "plan recompute: rank 1 has attention, rank 0 has none" \
    -np 1 $R : -np 1 env PTRAIN_RECOMPUTE=attention $R
# PTRAIN_CKPT_ACT, PTRAIN_RECOMPUTE's old name, is still read; both naming
# two modes are refused naming both
expect "PTRAIN_CKPT_ACT=attention on rank 1 of 2" 2 "plan recompute: rank 1 has attention, rank 0 has none" \
    -np 1 $R : -np 1 env PTRAIN_CKPT_ACT=attention $R
expect "PTRAIN_RECOMPUTE=block and PTRAIN_CKPT_ACT=attention everywhere" 2 \
    "PTRAIN_RECOMPUTE=block and PTRAIN_CKPT_ACT=attention differ (PTRAIN_CKPT_ACT is the old name of PTRAIN_RECOMPUTE" \
    -np 2 env PTRAIN_RECOMPUTE=block PTRAIN_CKPT_ACT=attention $R
expect "PTRAIN_PRECISION=bf16 on rank 1 of 2" 2 "plan precision: rank 1 has bf16, rank 0 has fp32" \
    -np 1 $R : -np 1 env PTRAIN_PRECISION=bf16 $R
expect "--precision bf16 on rank 0 of 2" 2 "plan precision: rank 1 has fp32, rank 0 has bf16" \
    -np 1 $R --precision bf16 : -np 1 $R
expect "PTRAIN_PRECISION=fp16 on rank 1 of 2" 2 "rank 1: invalid PTRAIN_PRECISION 'fp16' (valid: fp32, bf16)" \
    -np 1 $R : -np 1 env PTRAIN_PRECISION=fp16 $R
expect "PTRAIN_PP_SPLIT=1,1 on rank 1 of 2" 2 "plan pp_split: rank 1 has 1,1, rank 0 has even" \
    -np 1 $R --pp 2 : -np 1 env PTRAIN_PP_SPLIT=1,1 $R --pp 2
expect "PTRAIN_RANK_ORDER=TPD on one of 4" 2 "plan rank order: rank 3 has TPD, rank 0 has DPT" \
    -np 3 $R --tp 2 : -np 1 env PTRAIN_RANK_ORDER=TPD $R --tp 2
expect "--layers 3 on rank 1" 2 "model layers: rank 1 has 3, rank 0 has 2" \
    -np 1 $R : -np 1 $R --layers 3
expect "--lr on rank 2 of 3" 2 "training options.*rank 2 has hash" \
    -np 2 $R --batch 6 : -np 1 $R --batch 6 --lr 0.01
expect "different synthetic data on rank 1" 2 "data train checksum: rank 1 has" \
    -np 1 $R : -np 1 "$run" --model test --data synthetic:$((seed + 1)) --steps 2 --batch 4 --val-every 0

# the agreed runs still train
rc=0
ptrain_mpirun -np 2 $R >"$tmp/out" 2>&1 || rc=$?
check "2 ranks with the same plan train (status $rc) and print the agreed start-up hash" \
    sh -c "[ $rc -eq 0 ] && grep -q 'agreed by every rank, start-up hash [0-9a-f]\{16\}' '$tmp/out' && grep -q '^done:' '$tmp/out'"

# --pp that does not divide the world names pp, not tp
expect "--pp 3 on one rank" 2 "with 1 ranks: pp=3 does not divide the world (valid pp here: 1)" -np 1 $R --pp 3
expect "--pp 3 on two ranks" 2 "with 2 ranks: pp=3 does not divide the world (valid pp here: 1, 2)" -np 2 $R --pp 3
# case 2b: options that add collectives, given to some
# ranks only (a wrapper passing --metrics to rank 0, which writes it): one
# line naming the option, never a hang
expect "--metrics on rank 0 only" 2 "ranks disagree at start-up: --metrics: rank 1 has not given, rank 0 has given" \
    -np 1 $R --metrics "$tmp/m.jsonl" : -np 1 $R
expect "--save-dir on rank 1 only" 2 "ranks disagree at start-up: --save-dir: rank 1 has hash [0-9a-f]*, rank 0 has not given" \
    -np 1 $R : -np 1 $R --save-dir "$tmp/ck1"
expect "--save-every differs" 2 "ranks disagree at start-up: --save-every: rank 1 has 2, rank 0 has 1" \
    -np 1 $R --save-dir "$tmp/ck2" --save-every 1 : -np 1 $R --save-dir "$tmp/ck2" --save-every 2
expect "--resume on rank 1 only" 2 "ranks disagree at start-up: .*--resume: rank 1 has hash [0-9a-f]*, rank 0 has not given" \
    -np 1 $R --save-dir "$tmp/ck3" : -np 1 $R --save-dir "$tmp/ck3" --resume auto
# --help on one rank: rank 0 answers it once and every rank leaves with 0
# (at the agreement: a rank that left before MPI_Init would leave the
# others waiting in it)
rc=0
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
    timeout 180 "${MPIRUN:-mpirun}" --allow-run-as-root --oversubscribe --bind-to none -np 1 $R : -np 1 $R --help \
    >"$tmp/out" 2>&1 || rc=$?
check "--help on rank 1 only: status 0, the usage once, nothing trained (status $rc)" \
    sh -c "[ $rc -eq 0 ] && [ \$(grep -c '^usage: ptrain-run' '$tmp/out') -eq 1 ] && ! grep -q '^step' '$tmp/out'"
rc=0
"$run" --model test --help >"$tmp/help" 2>&1 || rc=$?
check "--help answers without MPI (status $rc, $(wc -l <"$tmp/help") lines)" \
    sh -c "[ $rc -eq 0 ] && grep -q '^usage: ptrain-run' '$tmp/help'"
rc=0
"$run" --version >"$tmp/ver" 2>&1 || rc=$?
check "--version alone (no launcher): answered without MPI (status $rc)" sh -c "[ $rc -eq 0 ] && grep -q '^ptrain-run (ptrain)' '$tmp/ver'"
rc=0
"$run" --data --help >"$tmp/dh" 2>&1 || rc=$?
check "'--data --help' is --data's argument, not a request for help (status $rc)" \
    sh -c "[ $rc -ne 0 ] && ! grep -q '^usage:' '$tmp/dh'"

# pipeline / ZeRO settings that do not fit (model test: 2 layers; --batch 4)
expect "PTRAIN_MICROBATCHES=4 with 2 sequences per dp rank" 2 "microbatches=4 does not divide the 2 sequences per data-parallel rank (valid microbatches here: 1, 2)" \
    -np 2 env PTRAIN_MICROBATCHES=4 $R
expect "--pp 4 with 2 layers" 2 "pp=4 is larger than the layer count 2: every pipeline stage holds at least one block (valid: pp 1..2)" \
    -np 4 $R --pp 4
expect "--pp-split 1,2 with 2 layers" 2 "pp_split 1,2 sums to 3 blocks, but the model has 2 layers" \
    -np 2 $R --pp 2 --pp-split 1,2
expect "--pp-split with the wrong number of stages" 2 "pp_split 2 has 1 entries, but pp=2 x virtual_stages=1 makes 2 stages" \
    -np 2 $R --pp 2 --pp-split 2
expect "--schedule interleaved without --virtual-stages" 2 "schedule=interleaved with virtual_stages=1" \
    -np 2 $R --pp 2 --schedule interleaved
expect "--virtual-stages 2 with 1f1b" 2 "virtual_stages=2 with schedule=1f1b: virtual stages are for the interleaved schedule" \
    -np 2 $R --pp 2 --virtual-stages 2
expect "--zero 1 with dp=1" 2 "zero=1 with dp=1 sp=1: .*nothing to shard (valid: zero=0, or dp\\*sp >= 2)" \
    -np 2 $R --tp 2 --zero 1
expect "--zero 4" 2 "--zero: '4'" -np 2 $R --zero 4
expect "--schedule zb" 2 "invalid --schedule 'zb' (valid: gpipe, 1f1b, interleaved)" -np 2 $R --schedule zb
expect "--recompute full" 2 "invalid --recompute 'full' (valid: none, block, attention" -np 2 $R --recompute full
expect "--rank-order DPTDPTDPT is refused, not truncated" 2 "--rank-order: invalid rank order 'DPTDPTDPT'" \
    -np 2 $R --rank-order DPTDPTDPT
# case 8: a plan beyond the memory a rank may use is refused at start-up
# (it used to allocate until the kernel killed it, or,
# under an address-space limit, fail in the model's allocation), in one
# line with the numbers and what would fit.  The address-space limit
# applies to the ranks only; ASan reserves terabytes of address space, so a
# sanitizer build skips that case.  4.5 GB: a build with the CUDA backend
# maps its libraries (cuBLASLt, cuDNN, NCCL: about 1 GB of address space)
# before it allocates anything, which left no batch that fits under 3 GB.
bin=$top_builddir/.libs/ptrain-run; [ -f "$bin" ] || bin=$run
if grep -qa __asan_init "$bin" || ! command -v prlimit >/dev/null 2>&1; then
    ok "a plan beyond the address-space limit # SKIP ASan build or no prlimit (RLIMIT_AS unusable)"
else
    expect "activations beyond a 4.5 GB address space on every rank" 2 \
        "the plan needs [0-9.]* GiB per rank .*, but this rank may use [0-9.]* GiB (the address-space limit (ulimit -v / -d) leaves [0-9.]* GiB); would fit: .*--batch [0-9]* ([0-9.]* GiB)" \
        -np 2 prlimit --as=4500000000 "$run" --model test --embd 1024 --heads 8 --layers 4 --seq-len 1024 \
        --batch 256 --data synthetic:$seed --steps 1
fi
# sizes no machine holds: refused in one line within seconds, never killed
expect "--batch 1048576 is refused for memory" 2 "the plan needs [0-9.]* GiB per rank .*--batch 1048576" \
    -np 1 $R --batch 1048576
expect "--layers 4096 --embd 1024 is refused for memory" 2 "the plan needs [0-9.]* GiB per rank .*L=4096 C=1024" \
    -np 1 $R --layers 4096 --embd 1024 --heads 8
expect "--embd 1048576 --heads 1 is refused for memory" 2 "the plan needs [0-9.]* GiB per rank .*C=1048576" \
    -np 1 $R --embd 1048576 --heads 1
for order in cluster spread; do
    want=DPT; [ $order = spread ] && want=TPD
    rc=0
    ptrain_mpirun -np 2 $R --rank-order $order --dry-run >"$tmp/flag" 2>&1 || rc=$?
    rc2=0
    PTRAIN_RANK_ORDER=$order ptrain_mpirun -np 2 $R --dry-run >"$tmp/env" 2>&1 || rc2=$?
    check "--rank-order $order and PTRAIN_RANK_ORDER=$order both mean $want" \
        sh -c "[ $rc -eq 0 ] && [ $rc2 -eq 0 ] && grep -q 'order=$want' '$tmp/flag' && grep -q 'order=$want' '$tmp/env'"
done
expect "--heads 3 with --embd 64" 2 "--heads 3 does not divide the embedding width 64 (valid --heads for --embd 64: 1, 2, 4, 8, 16, 32, 64)" \
    -np 2 $R --heads 3
expect "--heads 2 --tp 4 lists a non-empty set of tp" 2 "with 4 ranks use --tp one of: 1, 2\$" \
    -np 4 $R --heads 2 --tp 4

# a peer that dies mid-run: the job ends within 30 s and names it
pid_of_rank() { # $1 = mpirun pid, $2 = rank
    for p in $(pgrep -x ptrain-run); do
        tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$2" || continue
        a=$p
        while [ "$a" -gt 1 ]; do
            [ "$a" = "$1" ] && { echo "$p"; return; }
            a=$(awk '{print $4}' "/proc/$a/stat" 2>/dev/null || echo 1)
        done
    done
}
peer_test() { # $1 = signal, $2 = description, $3 = pattern, then extra flags
    sig=$1; desc=$2; pat=$3; shift 3
    : >"$tmp/long"
    ptrain_mpirun -np 2 "$run" --model test --data synthetic:$seed --steps 1000000 --batch 4 --val-every 0 \
        "$@" >"$tmp/long" 2>&1 &
    mp=$!
    i=0
    while [ $i -lt 120 ] && ! grep -q '^step' "$tmp/long"; do sleep 0.5; i=$((i + 1)); done
    victim=$(pid_of_rank $mp 1)
    if [ -z "$victim" ]; then
        not_ok "$desc: rank 1 not found"; kill $mp 2>/dev/null; wait $mp 2>/dev/null; return
    fi
    start=$(date +%s)
    kill -s "$sig" "$victim"
    i=0
    while [ $i -lt 60 ] && kill -0 $mp 2>/dev/null; do sleep 0.5; i=$((i + 1)); done
    took=$(( $(date +%s) - start ))
    if kill -0 $mp 2>/dev/null; then
        not_ok "$desc: the job still runs 30 s after rank 1 was stopped"
        kill -9 "$victim" 2>/dev/null; kill $mp 2>/dev/null
    elif grep -q -- "$pat" "$tmp/long"; then
        ok "$desc: the job ended after ${took} s: $(grep -m1 -- "$pat" "$tmp/long" | cut -c1-160)"
    else
        not_ok "$desc: no line matching '$pat'"; tail -8 "$tmp/long" | sed 's/^/# /'
    fi
    kill -CONT "$victim" 2>/dev/null; kill -9 "$victim" 2>/dev/null
    wait $mp 2>/dev/null
}
peer_test KILL "rank 1 killed mid-run" "process rank 1 .* exited on signal 9"
peer_test STOP "rank 1 stopped mid-run, --watchdog 5" "rank 0: no progress for .* s after 'training step' (--watchdog 5)" --watchdog 5
# a stopped rank, long watchdog: the heartbeat (PTRAIN_HEARTBEAT, 15 s) names it
peer_test STOP "rank 1 stopped mid-run, default --watchdog" "rank 0: rank 1 (host .*) sent no heartbeat for [0-9]* s: it died or hangs"
expect "PTRAIN_HEARTBEAT=abc on rank 1 of 2" 2 "rank 1: invalid PTRAIN_HEARTBEAT='abc' (valid: 0 = off, or seconds from 3 to 3600)" \
    -np 1 $R : -np 1 env PTRAIN_HEARTBEAT=abc $R
# an allocation that fails on one rank only (the batch buffers, after the
# model: tests/mpi/fail_alloc.c fails malloc(Bl*T*4) once, in ptrain-run's own
# code): every rank exits 1 with rank 1's line (the agreement once ran on the
# failing rank alone, and the others waited for it)
fa=$top_builddir/tests/mpi/.libs/fail_alloc.so
exe=$top_builddir/.libs/ptrain-run; [ -f "$exe" ] || exe=$top_builddir/.libs/lt-ptrain-run; [ -f "$exe" ] || exe=$run
if [ ! -f "$fa" ]; then
    ok "malloc of the batch fails on rank 1 of 2 # SKIP tests/mpi/fail_alloc.la not built"
elif grep -qa __asan_init "$exe"; then
    ok "malloc of the batch fails on rank 1 of 2 # SKIP ASan build (it owns malloc)"
else
    # --batch 14 over dp=2: Bl*T*4 = 7*32*4 = 896 bytes
    R14="$run --model test --data synthetic:$seed --steps 2 --batch 14 --val-every 0"
    expect "malloc of the batch fails on rank 1 of 2" 1 "rank 1: batch: out of memory" \
        -np 1 $R14 : -np 1 env LD_PRELOAD="$fa" PTRAIN_TEST_FAIL_MALLOC=896 $R14
fi
done_testing
