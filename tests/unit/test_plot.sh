#!/bin/sh
# ptrain-plot and what it hands to gnuplot and writes:
#  - labels and titles from file names, from the metrics' header (plan,
#    model) and from --title, and the temporary directory ($TMPDIR), are
#    never gnuplot commands: a newline in any of them followed by
#    system("touch MARKER") used to end the title '...' line and run the
#    command (the old code ran it for a file name, --title and $TMPDIR);
#    the labels still appear on the chart (control characters as spaces);
#  - the output replaces only a regular file: a FIFO (gnuplot blocked on
#    it), a symbolic link (gnuplot wrote through it), a dangling link, a
#    directory or a character device is refused in one line, status 2, and
#    left as it was;
#  - a metrics file whose name starts with '-' is a file, not an option;
#  - every key stays inside the picture: the keys sit right of the plots in
#    a picture 900 pixels wide, so "validation loss" was cut to
#    "validation lo" (the demo's plot) and long run names lost their ends;
#    now the picture is as wide as its longest key needs;
#  - energy in the metrics gets a panel (joules per step, tokens per joule),
#    null energy none.
# The metrics are fresh random curves every run.
. "$top_srcdir/tests/lib.sh"
need_jq
command -v gnuplot >/dev/null 2>&1 || skip_all "gnuplot not installed (apt-get install gnuplot-nox)"
plot="$top_builddir/ptrain-plot"
[ -f "$plot" ] || { echo "Bail out! $plot not built"; exit 1; }
w=$(mktemp -d "${TMPDIR:-/tmp}/ptrain-plot.XXXXXX")
trap 'rm -rf "$w"' EXIT INT TERM
cd "$w" || exit 1
# metrics FILE PLAN MODEL: a header, 30 training steps and 3 validations
metrics() {
    jq -cn --arg plan "$2" --arg model "$3" --argjson params "$(od -An -N2 -tu2 /dev/urandom | tr -d ' ')000" \
        '{type: "header", model: $model, params: $params, plan: $plan}' >"$1"
    awk -v s="$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')" 'BEGIN {
        srand(s)
        loss = 10 + rand()
        for (i = 1; i <= 30; i++) {
            loss -= rand() * 0.2
            printf "{\"type\":\"train\",\"step\":%d,\"loss\":%.4f,\"lr\":%.6f,\"norm\":%.3f,\"tok_s\":%d}\n", i, loss, 1e-3 * (1 - i / 40), 1 + rand(), 1000 + int(rand() * 500)
            if (i % 10 == 0) printf "{\"type\":\"val\",\"step\":%d,\"val_loss\":%.4f}\n", i, loss + rand() * 0.1
        }
    }' >>"$1"
}
nl='
'
export M1="$w/MARKER-name" M2="$w/MARKER-plan" M3="$w/MARKER-model" M4="$w/MARKER-title" M5="$w/MARKER-tmpdir" \
    M6="$w/MARKER-backquote"
# the markers made since the last call (removed: each check sees its own)
markers() { for m in "$M1" "$M2" "$M3" "$M4" "$M5" "$M6"; do [ ! -e "$m" ] || printf '%s ' "${m##*/}"; rm -f "$m"; done; }

# 1. a hostile file name, two plans (labelled by file), then by plan, title by model
h1="b${nl}system(\"touch \$M1\")${nl}x.jsonl"
h6='c `touch $M6` @x.jsonl'
metrics "$h1" "dp=1" "gpt"
metrics "$h6" "dp=2" "gpt"
rc=0
"$plot" --label file -o one.svg "$h1" "$h6" >out 2>&1 || rc=$?
check "a file named b<newline>system(\"touch \$M1\")<newline>x.jsonl (and one with backquotes and @): exit 0 ($(head -c 120 out))" \
    [ "$rc" -eq 0 ]
made=$(markers)
check "... nothing was executed (markers made: $made)" [ -z "$made" ]
check "... the labels are on the chart, the newlines as spaces" \
    sh -c "grep -qF 'b system(\"touch \$M1\") x train' one.svg && grep -qF 'c \`touch \$M6\` @x train' one.svg"
p2="dp=2'${nl}system(\"touch \$M2\")${nl}#"
m3="gpt${nl}system(\"touch \$M3\")${nl}#"
metrics plan-a.jsonl "$p2" "$m3"
metrics plan-b.jsonl "tp=2" "$m3"
rc=0
"$plot" -o two.svg plan-a.jsonl plan-b.jsonl >out 2>&1 || rc=$?
made=$(markers)
check "a plan and a model with newlines and system() in the header: exit 0, nothing executed ($made)" \
    [ "$rc$made" = 0 ]
check "... the plan labels the curves, whole (newlines as spaces)" grep -qF "dp=2' system(\"touch \$M2\") # train" two.svg
metrics single.jsonl "$p2" "$m3"
"$plot" -o three.svg single.jsonl >/dev/null 2>&1
made=$(markers)
check "... one file: the title (model and plan) executes nothing ($made) and is on the chart" \
    sh -c "[ -z '$made' ] && grep -qF 'gpt system(\"touch \$M3\") #' three.svg"
rc=0
"$plot" --title "t'${nl}system(\"touch \$M4\")${nl}'" -o four.svg single.jsonl >out 2>&1 || rc=$?
made=$(markers)
check "--title with a quote, newlines and system(): exit 0, nothing executed ($made)" [ "$rc$made" = 0 ]
mkdir "$w/tmp'${nl}system(\"touch \$M5\")${nl}'"
rc=0
TMPDIR="$w/tmp'${nl}system(\"touch \$M5\")${nl}'" "$plot" -o five.svg single.jsonl >out 2>&1 || rc=$?
made=$(markers)
check "\$TMPDIR with a quote, newlines and system(): exit 0, nothing executed ($made), plot written ($(head -c 100 out))" \
    sh -c "[ '$rc$made' = 0 ] && [ -s five.svg ]"

# 2. the output: regular files only, never through a link
refuse() { # desc pattern command...: status 2, one line matching, within 60 s
    desc=$1 pat=$2; shift 2
    rc=0
    timeout 60 "$@" >r.out 2>&1 || rc=$?
    if [ "$rc" -eq 2 ] && [ "$(grep -c . r.out)" -eq 1 ] && grep -qF -- "$pat" r.out; then
        ok "$desc: $(cut -c1-150 r.out)"
    else
        not_ok "$desc: expected status 2 and one line with '$pat' (status $rc$([ "$rc" -ne 124 ] || echo ": blocked, killed after 60 s"))"
        sed 's/^/# /' r.out | head -3
    fi
}
od -An -N8 -tx8 /dev/urandom >victim
cp victim victim.orig
mkfifo fifo.svg
refuse "-o FIFO" "output fifo.svg is a FIFO, not a regular file: refusing to replace it" "$plot" -o fifo.svg single.jsonl
check "... still a FIFO" test -p fifo.svg
ln -s victim link.svg
refuse "-o LINK (to a regular file)" "output link.svg is a symbolic link, not a regular file" "$plot" -o link.svg single.jsonl
check "... still a link to victim, victim unchanged" sh -c '[ -L link.svg ] && [ "$(readlink link.svg)" = victim ] && cmp -s victim victim.orig'
ln -s nowhere.svg dangling.svg
refuse "-o DANGLING-LINK" "output dangling.svg is a symbolic link" "$plot" -o dangling.svg single.jsonl
check "... its target was not created" test ! -e nowhere.svg
mkdir dir.svg
refuse "-o DIR" "output dir.svg is a directory, not a regular file" "$plot" -o dir.svg single.jsonl
if mknod null.svg c 1 3 2>/dev/null; then
    refuse "-o CHAR-DEVICE (mknod c 1 3, as /dev/null)" "output null.svg is a character device" "$plot" -o null.svg single.jsonl
    check "... still a character device" test -c null.svg
else
    ok "-o CHAR-DEVICE # SKIP cannot create a character device here (needs root with CAP_MKNOD)"
fi
echo old >plain.png
(umask 022; "$plot" -o plain.png single.jsonl >/dev/null 2>&1)
check "an existing regular file is replaced by the PNG, mode 644 under umask 022, no temporary left" \
    sh -c '[ "$(head -c 4 plain.png | od -An -c | tr -d " ")" = "211PNG" ] && [ "$(stat -c %a plain.png)" = 644 ] && ! ls -A | grep -q "^\.ptrain-plot"'

# 3. the keys inside the picture (PNG decoded by gnuplot itself): the
# right-most pixel that is not background lies left of the edge, and there
# is key text right of the key's sample lines (x > 795 px), so the check
# sees the keys at all
edge() { # PNG -> "WIDTH RIGHTMOST-INK-X": ink = not white
    gnuplot -e "set table 'px.tab'; plot '$1' binary filetype=png with rgbimage" >/dev/null 2>&1 || { echo "-1 -1"; return; }
    awk '$1 ~ /^[0-9]+$/ { if ($1 + 1 > w) w = $1 + 1; if (($3 < 250 || $4 < 250 || $5 < 250) && $1 > x) x = $1 }
         END { print w + 0, x + 0 }' px.tab
}
"$plot" -o keys1.png single.jsonl >/dev/null 2>&1
set -- $(edge keys1.png)
check "one file: the keys (training loss, validation loss, gradient norm) end inside the picture (width $1, last ink at x $2)" \
    [ "$2" -gt 795 -a "$2" -lt $(($1 - 4)) ]
long="run-$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')-dp=16,tp=8,pp=4,sp=2,zero=3,1f1b,m=64,WWMM"
cp single.jsonl "$long.jsonl"
"$plot" --label file -o keys2.png single.jsonl "$long.jsonl" >/dev/null 2>&1
set -- $(edge keys2.png)
check "a ${#long}-character run name: its keys end inside the picture (width $1, last ink at x $2)" \
    [ "$2" -gt 795 -a "$2" -lt $(($1 - 4)) ]

# 4. energy (ptrain-run's energy_j, tok_per_j): a panel of joules per step, and
#    tokens per joule for one file; none without them (null: not measured)
awk -v s="$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')" 'BEGIN {
    srand(s)
    print "{\"type\":\"header\",\"model\":\"gpt\",\"params\":1000,\"plan\":\"dp=2\"}"
    for (i = 1; i <= 20; i++) {
        e = 5 + rand() * 3
        printf "{\"type\":\"train\",\"step\":%d,\"loss\":%.4f,\"lr\":0.001,\"norm\":1,\"tok_s\":1000,\"energy_j\":%.4f,\"tok_per_j\":%.4f}\n", i, 10 - i * 0.1, e, 128 / e
    }
}' >energy.jsonl
rc=0
"$plot" -o energy.svg energy.jsonl >out 2>&1 || rc=$?
check "metrics with energy: exit 0 ($rc), said, and the chart has joules per step and tokens per joule" \
    sh -c "[ $rc -eq 0 ] && grep -q ', energy)\$' out && grep -q 'joules per step' energy.svg && grep -q 'tokens per joule' energy.svg"
jq -c 'if .type == "train" then .energy_j = null | .tok_per_j = null else . end' energy.jsonl >null-energy.jsonl
rc=0
"$plot" -o noenergy.svg null-energy.jsonl >out 2>&1 || rc=$?
check "metrics whose energy is null (not measured): no energy panel ($rc)" \
    sh -c "[ $rc -eq 0 ] && ! grep -q 'energy)' out && ! grep -q 'joules per step' noenergy.svg"
rc=0
"$plot" -o two.svg energy.jsonl single.jsonl >out 2>&1 || rc=$?
check "two files, one with energy: the panel has that file's curve, no tokens-per-joule axis ($rc)" \
    sh -c "[ $rc -eq 0 ] && grep -q 'joules per step' two.svg && ! grep -q 'tokens per joule' two.svg"

"$plot" -o keys3.png energy.jsonl >/dev/null 2>&1
set -- $(edge keys3.png)
check "one file with energy: the keys (tokens per joule too) end inside the picture (width $1, last ink at x $2)" \
    [ "$2" -gt 795 -a "$2" -lt $(($1 - 4)) ]

# 5. a metrics file named like an option
metrics ./-m.jsonl "dp=1" "gpt"
rc=0
"$plot" -o dash.svg -- -m.jsonl >out 2>&1 || rc=$?
check "a metrics file named -m.jsonl is read as a file (status $rc: $(head -c 100 out))" sh -c "[ $rc -eq 0 ] && [ -s dash.svg ]"
done_testing
