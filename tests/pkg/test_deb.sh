#!/bin/bash
# The Debian packages as an admin gets them: build them from a copy of the
# source tree with `dpkg-buildpackage -b -us -uc` (debian/rules runs the
# unit tests of the packaged build), check what each package holds, unpack
# them into a clean root (dpkg -x: nothing is installed on this machine),
# then start a throw-away local Slurm whose plugstack line and ptrain.conf
# are the packaged ones and run a training job through the packaged plugin
# and the packaged ptrain-run.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/slurm/slurm_lib.sh"
for b in dpkg-buildpackage dpkg-checkbuilddeps dh dpkg-deb; do
    command -v "$b" >/dev/null 2>&1 || skip_all "$b not installed (apt-get install dpkg-dev debhelper)"
done
[ -f "$top_srcdir/debian/control" ] || skip_all "no debian/ directory in $top_srcdir"
# never recurse: the packaged build runs tests of its own
[ -z "${PTRAIN_DEB_TEST:-}" ] || skip_all "inside the package build of another test_deb.sh"
export PTRAIN_DEB_TEST=1
# the outer make's flags (TESTS=..., jobserver) must not reach the package's make
unset MAKEFLAGS MFLAGS MAKELEVEL MAKEOVERRIDES
slurm_need
slurm_mpi
work=$(mktemp -d /tmp/ptrain-deb.XXXXXX) || skip_all "mktemp failed"
cleanup_deb() { slurm_down; [ "${KEEP_DEB_TEST_DIR:-0}" = 1 ] && echo "# kept $work" >&2 || rm -rf "$work"; }
trap cleanup_deb EXIT

# 1. a clean copy of the sources (no build trees, no VCS), then the build
mkdir -p "$work/src"
tar -C "$top_srcdir" --exclude=./.git --exclude='./_build*' --exclude='./build*' \
    --exclude='./obj-*' --exclude=./third_party --exclude=./data --exclude=./run \
    --exclude='./debian/tmp' --exclude='./debian/.debhelper' -cf - . | tar -C "$work/src" -xf -
if ! (cd "$work/src" && dpkg-checkbuilddeps) >"$work/deps.log" 2>&1; then
    skip_all "build dependencies missing: $(tail -n 1 "$work/deps.log")"
fi
(cd "$work/src" && DEB_BUILD_OPTIONS="parallel=2" dpkg-buildpackage -b -us -uc) >"$work/build.log" 2>&1
rc=$?
check "dpkg-buildpackage -b -us -uc succeeds" [ $rc -eq 0 ]
[ $rc -eq 0 ] || { diag "$(tail -n 20 "$work/build.log" | tr '\n' ' ')"; done_testing; exit 1; }
check "the packaged build ran its unit tests" grep -q 'PASS: tests/unit/test_ops' "$work/build.log"

arch=$(dpkg --print-architecture)
triplet=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
deb() { ls "$work"/"$1"_*_"$arch".deb 2>/dev/null | head -n 1; }
for p in ptrain libptrain-dev ptrain-slurm-plugin; do
    check "package $p was built" [ -n "$(deb $p)" ]
done
has() { dpkg-deb -c "$(deb "$1")" | awk '{print $6}' | grep -qx "./$2"; }
for f in usr/bin/ptrain-run usr/bin/ptrain-data usr/bin/ptrain-topo usr/bin/ptrain-plan \
         "usr/lib/$triplet/libptrain.so.0" "usr/lib/$triplet/libptrain_topo.so.0" \
         usr/share/man/man1/ptrain-run.1.gz usr/share/man/man7/ptrain-layouts.7.gz \
         usr/share/ptrain/ptrain.conf.example; do
    check "ptrain holds /$f" has ptrain "$f"
done
for f in "usr/lib/$triplet/slurm-wlm/ptrain.so" etc/slurm/plugstack.conf.d/ptrain.conf \
         etc/slurm/ptrain.conf usr/share/man/man8/ptrain_spank.8.gz; do
    check "ptrain-slurm-plugin holds /$f" has ptrain-slurm-plugin "$f"
done
for f in usr/include/ptrain/lib/core/core.h "usr/lib/$triplet/pkgconfig/ptrain.pc" \
         "usr/lib/$triplet/libptrain.so"; do
    check "libptrain-dev holds /$f" has libptrain-dev "$f"
done
# the license (MIT; "Expat" in Debian's short names) in every package's copyright file
for p in ptrain libptrain-dev ptrain-slurm-plugin; do
    lic=$(dpkg-deb --fsys-tarfile "$(deb $p)" | tar -xOf - "./usr/share/doc/$p/copyright" 2>/dev/null |
          sed -n 's/^License: //p' | sort -u | tr '\n' ' ')
    check "$p's copyright file names the MIT (Expat) license ($lic)" [ "$lic" = "Expat " ]
done
check "no libtool archive is shipped" \
    sh -c "! for d in $work/*.deb; do dpkg-deb -c \$d; done | grep -q '\.la\$'"
conf=$(dpkg-deb --info "$(deb ptrain-slurm-plugin)" conffiles 2>/dev/null)
check "/etc/slurm/ptrain.conf is a conffile (an admin's edits survive upgrades)" \
    sh -c "echo '$conf' | grep -qx /etc/slurm/ptrain.conf"
dep=$(dpkg-deb -f "$(deb ptrain-slurm-plugin)" Depends)
check "the plugin package needs no MPI, BLAS or libptrain ($dep)" \
    sh -c "! echo '$dep' | grep -qiE 'mpi|blas|ptrain'"

# 2. unpack into a clean root and run from there
root=$work/root
for p in ptrain libptrain-dev ptrain-slurm-plugin; do dpkg -x "$(deb $p)" "$root"; done
export LD_LIBRARY_PATH="$root/usr/lib/$triplet${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
RUN=$root/usr/bin/ptrain-run
check "the packaged ptrain-run starts (--help)" sh -c "'$RUN' --help >/dev/null 2>&1"
check "the packaged ptrain-run uses the packaged libptrain" \
    sh -c "ldd '$RUN' | grep -q '$root/usr/lib/$triplet/libptrain.so.0'"

# 3. a local Slurm configured from the packaged plugstack snippet and ptrain.conf
line=$(grep -E '^[[:space:]]*(required|optional)' "$root/etc/slurm/plugstack.conf.d/ptrain.conf")
check "the plugstack snippet has one plugin line ($line)" [ "$(echo "$line" | wc -l)" -eq 1 ]
so=$(echo "$line" | awk '{print $2}')
args=$(echo "$line" | cut -d' ' -f3- | sed "s|/etc/slurm/|$root/etc/slurm/|g")
check "the snippet names the plugin installed in Slurm's PluginDir ($so)" [ -f "$root/usr/lib/$triplet/slurm-wlm/$so" ]
PTRAIN_SPANK_SO=$root/usr/lib/$triplet/slurm-wlm/$so
PTRAIN_SPANK_ARGS=$args slurm_up 2 4
trap cleanup_deb EXIT  # slurm_up set its own
D=$SLURM_TEST_DIR
srun -N1 -n1 env >"$D/env.out" 2>"$D/env.err"
rc=$?
check "a step without --ptrain-mode runs under the packaged config (exit $rc)" [ $rc -eq 0 ]
check "... and gets no plan from the plugin" sh -c "! grep -qE '^(PTRAIN_PLAN|PTRAIN_MODE|PTRAIN_DP|PTRAIN_TP|WORLD_SIZE|MASTER_PORT)=' '$D/env.out'"
[ $rc -eq 0 ] || diag "stderr: $(tail -n 3 "$D/env.err" | tr '\n' ' ')"
srun --mpi=pmix --ptrain-mode=auto --ptrain-model=test --ptrain-batch=4 -N2 --ntasks-per-node=2 "$RUN" \
    --data synthetic --steps 2 >"$D/t.out" 2>"$D/t.err"
rc=$?
check "srun --ptrain-mode=auto trains through the packaged plugin (exit 0)" [ $rc -eq 0 ]
plan=$(grep -m1 '^plan:' "$D/t.out" | sed 's/^plan: //; s/ (source:.*//')
# the packaged ptrain-plan, from the same node model (this machine's hwloc
# tree: the packaged ptrain.conf names no cached model), plans the same
want=$("$root/usr/bin/ptrain-plan" --nodes 2 --tasks-per-node 2 --model test --batch 4 2>&1 | sed -n 's/^plan: //p')
check "the packaged plugin's plan is the packaged ptrain-plan's ($plan)" sh -c '[ -n "$1" ] && [ "$1" = "$2" ]' _ "$plan" "$want"
[ "$plan" = "$want" ] || diag "ptrain-plan: $want"
check "two steps and a 'done:' line" sh -c "[ \$(grep -c '^step ' '$D/t.out') -eq 2 ] && grep -q '^done:' '$D/t.out'"
[ $rc -eq 0 ] || diag "stderr: $(tail -n 5 "$D/t.err" | tr '\n' ' ')"
done_testing
