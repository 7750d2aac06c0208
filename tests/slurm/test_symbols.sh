#!/bin/sh
# SPDX-License-Identifier: MIT
# The plugin exports only Slurm's entry points and identification symbols:
# nothing of lib/plan, libconfig glue or helpers leaks into slurmstepd's
# symbol namespace.
. "$top_srcdir/tests/lib.sh"
so="$top_builddir/spank/.libs/ptrain.so"
[ -f "$so" ] || skip_all "SPANK plugin not built (configure found no slurm/spank.h)"
command -v nm >/dev/null 2>&1 || skip_all "nm not installed"

syms=$(nm -D --defined-only "$so" | awk '{print $3}' | sort)
diag "exported: $(echo $syms)"
bad=$(echo "$syms" | grep -v -E '^(slurm_spank_[a-z_]+|plugin_name|plugin_type|plugin_version|spank_plugin_version)$')
check "no symbol beyond slurm_spank_* and the plugin identifiers" [ -z "$bad" ]
[ -z "$bad" ] || diag "unexpected: $(echo $bad)"
for s in plugin_name plugin_type plugin_version spank_plugin_version slurm_spank_init \
         slurm_spank_init_post_opt slurm_spank_local_user_init slurm_spank_user_init \
         slurm_spank_task_init slurm_spank_exit; do
    check "exports $s" sh -c "echo '$syms' | grep -qx '$s'"
done
leak=$(echo "$syms" | grep -E '^pt_' || true)
check "lib/plan functions are not exported" [ -z "$leak" ]
undef=$(nm -D --undefined-only "$so" | awk '{print $2}' | grep -E '^(MPI_|cblas_|pt_)' || true)
check "no MPI, BLAS or libptrain references" [ -z "$undef" ]
done_testing
