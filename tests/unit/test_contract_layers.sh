#!/bin/sh
# SPDX-License-Identifier: MIT
# The runtime contract apart from the planner (issue 27): lib/contract (the
# plan, PTRAIN_*, validation, placement, the model presets) includes nothing
# of lib/plan, and the runtime (lib/core, backend, comm, shape, parallel,
# model, pipeline, optim, train, ckpt, data) includes contract/ headers, never
# plan/ ones: the planner (cost model, search, resolve, energy frontier) is
# for spank/, ptrain-run's --mode auto and ptrain-plan.  test_plan links only
# libptrain_contract and the core, so a call into the planner fails its link.
. "$top_srcdir/tests/lib.sh"
cd "$top_srcdir" || exit 1
inc='^[[:space:]]*#[[:space:]]*include[[:space:]]*"plan/'
src() { grep -rnE --include='*.c' --include='*.h' --include='*.cu' --include='*.inc' "$inc" "$@" 2>/dev/null; }
first() { printf '%s\n' "$1" | grep -c .; printf '%s\n' "$1" | head -n 3 | cut -c1-120 | tr '\n' ' '; }
hits=$(src lib/contract)
check "lib/contract includes no lib/plan header ($(first "$hits" | tr '\n' ':'))" [ -z "$hits" ]
dirs=
for d in lib/core lib/backend lib/comm lib/shape lib/parallel lib/model lib/pipeline lib/optim lib/train lib/ckpt \
    lib/data; do
    [ -d "$d" ] && dirs="$dirs $d"
done
hits=$(src $dirs)
check "the runtime ($dirs) includes no lib/plan header ($(first "$hits" | tr '\n' ':'))" [ -z "$hits" ]
moved() { [ -f "lib/contract/$1" ] && [ ! -e "lib/plan/$1" ]; }
# the contract's files are where its headers say they are
for f in plan.h plan_priv.h plan_env.c plan_modes.c plan_validate.c plan_place.c model.h model.c settings.h settings.c \
    schedule.h schedule.c; do
    check "lib/contract/$f exists and lib/plan/$f does not" moved "$f"
done
check "the model presets are lib/contract/model.c's, not the cost model's" \
    sh -c '! grep -q "pt_model_preset\\|pt_model_shape_parse" lib/plan/cost.c && grep -q "^int pt_model_preset(" lib/contract/model.c'
done_testing
