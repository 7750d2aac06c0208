#!/bin/sh
# SPDX-License-Identifier: MIT
# ptrain-run --device cpu|cuda|auto (and PTRAIN_DEVICE, which the plugin
# sets to cuda when it binds a GPU): cpu trains and says so in the run
# header; auto and PTRAIN_DEVICE=cuda (the plugin's, for a bound GPU) train
# on the CPU when the build has no CUDA backend or the task sees no GPU,
# and the header's device line says which, so srun --ptrain-mode=auto keeps
# working on GPU nodes; with both they train on the GPU; --device cuda never
# trains on the CPU: without them it refuses in one line with exit status 2.  A rank that cannot use its device stops every
# rank through the start-up agreement.
. "$top_srcdir/tests/lib.sh"
need_run
need_mpirun
workdir
unset PTRAIN_DEVICE
fresh_seed
# run NAME NP ARGS...: a 1-step run; status in $rc, output in $wd/NAME
run_() {
    name=$1; np=$2; shift 2
    rc=0
    ptrain_mpirun -np "$np" "$@" --model test --data "synthetic:$seed" --steps 1 --batch 4 --val-every 0 \
        >"$wd/$name" 2>&1 || rc=$?
}
# one_error NAME: the output holds one line of ptrain-run's (mpirun may add its own notice)
one_error() { [ "$(grep -c 'ptrain-run' "$wd/$1")" -eq 1 ] && [ "$(grep -c '^ptrain-run: error: ' "$wd/$1")" -eq 1 ]; }

run_ cpu 2 "$run" --device cpu
check "--device cpu trains (status $rc) and the header says 'device: cpu (--device cpu)'" \
    sh -c "[ $rc -eq 0 ] && grep -q '^device: cpu (--device cpu)\$' '$wd/cpu' && grep -q '^done:' '$wd/cpu'"

run_ auto 1 "$run"
line=$(grep '^device:' "$wd/auto")
diag "auto: $line"
case $line in
*"this build has no CUDA backend"*) built=0; gpu=0 ;;
*"no CUDA device visible"*) built=1; gpu=0 ;;
*) built=1; gpu=1 ;;
esac
if [ "$gpu" = 1 ]; then
    check "--device auto (the default) trains on the GPU here and the header names it ($line)" \
        sh -c "[ $rc -eq 0 ] && grep -q '^device: cuda (--device auto): ' '$wd/auto' && grep -q '^done:' '$wd/auto'"
    run_ cuda 2 "$run" --device cuda
    check "--device cuda trains on the GPU (status $rc), 2 ranks sharing it" \
        sh -c "[ $rc -eq 0 ] && grep -q '^device: cuda (--device cuda): ' '$wd/cuda' && grep -q '^done:' '$wd/cuda'"
    PTRAIN_DEVICE=cuda run_ envcuda 2 "$run"
    check "PTRAIN_DEVICE=cuda (the plugin's, for a bound GPU) trains on the GPU (status $rc)" \
        sh -c "[ $rc -eq 0 ] && grep -q '^device: cuda (PTRAIN_DEVICE=cuda): ' '$wd/envcuda' && grep -q '^done:' '$wd/envcuda'"
else
    check "--device auto (the default) trains on the CPU here and the header says why ($line)" \
        sh -c "[ $rc -eq 0 ] && grep -q '^device: cpu (--device auto: .*training on the CPU' '$wd/auto' && grep -q '^done:' '$wd/auto'"
    # cuda: the reason this machine gives
    if [ "$built" = 0 ]; then why="this ptrain build has no CUDA backend"
    else why="no CUDA device visible"; fi
    run_ cuda 2 "$run" --device cuda
    check "--device cuda refuses with status 2 ($why), and how to train on the CPU" \
        sh -c "[ $rc -eq 2 ] && grep -q -- '--device cuda: .*$why.*give --device cpu' '$wd/cuda'"
    check "... in one line from rank 0 of 2" one_error cuda
    sed 's/^/# /' "$wd/cuda"
    PTRAIN_DEVICE=cuda run_ envcuda 2 "$run"
    check "PTRAIN_DEVICE=cuda (the plugin's, for a bound GPU) trains on the CPU, the header naming the variable and why (status $rc)" \
        sh -c "[ $rc -eq 0 ] && grep -q '^device: cpu (PTRAIN_DEVICE=cuda: .*training on the CPU' '$wd/envcuda' && grep -q '^done:' '$wd/envcuda'"
fi
PTRAIN_DEVICE=cuda run_ override 2 "$run" --device cpu
check "an explicit --device cpu overrides PTRAIN_DEVICE=cuda and trains (status $rc)" \
    sh -c "[ $rc -eq 0 ] && grep -q '^device: cpu (--device cpu)\$' '$wd/override'"

# bad values: one line naming the value and the valid ones
run_ badflag 1 "$run" --device gpu
check "--device gpu: status 2, one line naming the value and cpu, cuda, auto (status $rc)" \
    sh -c "[ $rc -eq 2 ] && grep -q \"error: --device 'gpu' is not valid (valid: cpu, cuda, auto)\" '$wd/badflag'"
PTRAIN_DEVICE=CUDA run_ badenv 1 "$run"
check "PTRAIN_DEVICE=CUDA: status 2, the variable named (status $rc)" \
    sh -c "[ $rc -eq 2 ] && grep -q \"error: PTRAIN_DEVICE 'CUDA' is not valid (valid: cpu, cuda, auto)\" '$wd/badenv'"

# one rank asks for cuda, the other for cpu: the agreement stops both
rc=0
ptrain_mpirun -np 1 "$run" --device cpu --model test --data "synthetic:$seed" --steps 1 --batch 4 : \
    -np 1 "$run" --device cuda --model test --data "synthetic:$seed" --steps 1 --batch 4 >"$wd/mixed" 2>&1 || rc=$?
check "rank 1 with --device cuda, rank 0 with cpu: both exit 2, rank 0 names rank 1's reason (status $rc)" \
    sh -c "[ $rc -eq 2 ] && grep -q 'error: rank 1: --device cuda' '$wd/mixed' && ! grep -q '^done:' '$wd/mixed'"
check "--help describes --device" sh -c "'$run' --help | grep -q -- '--device cpu|cuda|auto'"
done_testing
