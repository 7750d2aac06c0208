#!/bin/bash
# SPDX-License-Identifier: MIT
# share/bash-completion/ptrain: sourced in a plain bash (no bash-completion
# package needed), its COMPREPLY for a few prefixes, its option lists
# against the tools' getopt tables and the plugin's --ptrain-* options,
# and srun's own completion kept for the other words.
. "$top_srcdir/tests/lib.sh"
comp=$top_srcdir/share/bash-completion/ptrain
# reply WORDS...: COMPREPLY (sorted, one line) for the command line WORDS,
# the last word being completed, in a fresh bash with the file sourced
reply() {
    bash --norc --noprofile -c '
        . "$1"; shift
        COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}
        spec=$(complete -p "$1") || exit 3
        f=${spec#* -F }; f=${f%% *}
        "$f" "$1" "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
        printf "%s\n" "${COMPREPLY[@]}" | sort | tr "\n" " "' _ "$comp" "$@"
}
check "the file parses" bash -n "$comp"
r=$(reply ptrain-run --pp)
check "ptrain-run --pp<TAB>: --pp --pp-split ($r)" [ "$r" = "--pp --pp-split " ]
r=$(reply ptrain-run --zero "")
check "ptrain-run --zero <TAB>: 0 1 2 3 ($r)" [ "$r" = "0 1 2 3 " ]
r=$(reply ptrain-run --precision "")
check "ptrain-run --precision <TAB>: bf16 fp32 ($r)" [ "$r" = "bf16 fp32 " ]
r=$(reply ptrain-run --schedule i)
check "ptrain-run --schedule i<TAB>: interleaved ($r)" [ "$r" = "interleaved " ]
r=$(reply ptrain-data pre)
check "ptrain-data pre<TAB>: prepare ($r)" [ "$r" = "prepare " ]
r=$(reply ptrain-data prepare --val)
check "ptrain-data prepare --val<TAB>: --val-file --val-fraction ($r)" [ "$r" = "--val-file --val-fraction " ]
r=$(reply ptrain-topo --pro)
check "ptrain-topo --pro<TAB>: --probe --probe-quick ($r)" [ "$r" = "--probe --probe-quick " ]
r=$(reply ptrain-plan --tp)
check "ptrain-plan --tp<TAB>: --tp --tp-depth --tp-order ($r)" [ "$r" = "--tp --tp-depth --tp-order " ]
r=$(reply ptrain-plan --mode 2)
check "ptrain-plan --mode 2<TAB>: 2.5d 2d ($r)" [ "$r" = "2.5d 2d " ]
r=$(reply ptrain-plan --prec)
check "ptrain-plan --prec<TAB>: --precision ($r)" [ "$r" = "--precision " ]
r=$(reply ptrain-plan --precision b)
check "ptrain-plan --precision b<TAB>: bf16 ($r)" [ "$r" = "bf16 " ]
r=$(reply ptrain-plan --gemm)
check "ptrain-plan --gemm<TAB>: --gemm-gflops --gemm-gflops-bf16 ($r)" [ "$r" = "--gemm-gflops --gemm-gflops-bf16 " ]
r=$(reply ptrain-plot --l)
check "ptrain-plot --l<TAB>: --label ($r)" [ "$r" = "--label " ]
r=$(reply ptrain-ckpt ver)
check "ptrain-ckpt ver<TAB>: verify ($r)" [ "$r" = "verify " ]
r=$(reply ptrain-ckpt convert --to s)
check "ptrain-ckpt convert --to s<TAB>: safetensors ($r)" [ "$r" = "safetensors " ]
r=$(reply srun -N 2 --ptrain-z)
check "srun --ptrain-z<TAB>: --ptrain-zero= ($r)" [ "$r" = "--ptrain-zero= " ]
r=$(reply srun --ptrain-mode=2)
check "srun --ptrain-mode=2<TAB>: 2d and 2.5d ($r)" [ "$r" = "--ptrain-mode=2.5d --ptrain-mode=2d " ]
# srun's own completion (a stand-in registered before the file is loaded)
# still answers the other words
r=$(bash --norc --noprofile -c '
    _fake_srun() { COMPREPLY=(--nodes= --ntasks=); }
    complete -F _fake_srun srun
    . "$1"
    COMP_WORDS=(srun --n); COMP_CWORD=1
    _ptrain_srun srun --n srun
    printf "%s\n" "${COMPREPLY[@]}" | sort | tr "\n" " "' _ "$comp")
check "srun --n<TAB> goes to srun's own completion ($r)" [ "$r" = "--nodes= --ntasks= " ]

# the lists mirror the sources: getopt tables, the plugin's option table,
# and the plan settings' table (lib/contract/settings.h: KEY VAR OFFERED
# ARG rows) for the options the plugin, ptrain-run and ptrain-plan make
# from its rows (ptrain-run's own --model and --batch are also rows)
table() {
    sed -n '/struct option [a-z_]*\[\] *= *{/,/\({ *0, *0, *0, *0 *}\|^ *};\)/p' "$1" |
        grep -o '{ *"[a-z0-9-]*"' | sed 's/{ *"//; s/"$/ /; s/^/--/' | sort | tr -d '\n'
}
rows=$("$top_builddir/tests/unit/test_settings" --dump 2>/dev/null)
[ -n "$rows" ] || rows="? ? 0 -"
# the rows offered to tool bit $1, as --KEY (ptrain-plan: but --batch, its own)
row_opts() { echo "$rows" | awk -v b="$1" 'int($3 / b) % 2 == 1 && $1 != "batch" { print "--" $1 }'; }
list() { bash --norc --noprofile -c ". '$comp'; printf '%s\n' \$$1" | sort | tr '\n' ' '; }
for t in run data topo ckpt plan; do
    src=$top_srcdir/bin/ptrain-$t.c
    case $t in run | data | ckpt | plan) src=$top_srcdir/bin/$t/options.c ;; esac
    want=$(table "$src")
    [ $t = run ] && want=$({ echo "$want" | tr ' ' '\n'; row_opts 2; } | grep . | sort -u | sed 's/$/ /' | tr -d '\n')
    [ $t = plan ] && want=$({ echo "$want" | tr ' ' '\n'; row_opts 4; } | grep . | sort | sed 's/$/ /' | tr -d '\n')
    have=$(list "_ptrain_${t}_opts")
    check "ptrain-$t: the completion lists exactly the getopt table's options" [ -n "$want" -a "$want" = "$have" ]
    [ "$want" = "$have" ] || diag "table: $want; completion: $have"
done
# {"ptrain-NAME", "ARG", ...} takes a value (--ptrain-NAME=), {"ptrain-NAME", NULL, ...} none
want=$({ grep -o '{"ptrain-[a-z0-9-]*", *\(NULL\|"\)' "$top_srcdir/spank/options.c" |
    sed 's/{"\(ptrain-[a-z0-9-]*\)", *NULL/--\1/; s/{"\(ptrain-[a-z0-9-]*\)", *"/--\1=/'
    echo "$rows" | awk 'int($3) % 2 == 1 { print "--ptrain-" $1 "=" }'; } | sort | tr '\n' ' ')
have=$(list _ptrain_srun_opts)
check "srun: the completion lists exactly the plugin's --ptrain-* options" [ -n "$want" -a "$want" = "$have" ]
[ "$want" = "$have" ] || diag "plugin: $want; completion: $have"
# the model names offered are the contract's presets, as ptrain-plan's refusal lists them
plan=$top_builddir/ptrain-plan
if [ -x "$plan" ]; then
    want=$(ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" "$plan" --model no-such-model 2>&1 |
        sed -n 's/.*valid: a preset \(.*\), L,H,C,T,V or llama:.*/\1/p' | tr -d ',' | tr ' ' '\n' | grep . | sort | tr '\n' ' ')
    have=$(reply ptrain-plan --model "")
    check "--model<TAB> offers exactly the presets ($have)" [ -n "$want" -a "$want" = "$have" ]
    [ "$want" = "$have" ] || diag "presets: $want; completion: $have"
else
    ok "# SKIP ptrain-plan not built: the model list is not checked"
fi
done_testing
