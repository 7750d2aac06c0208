#!/bin/bash
# SPDX-License-Identifier: MIT
# local-slurm.sh: a throw-away Slurm cluster on this one machine, for tests
# and demos.  munged, slurmctld and N slurmd ("fake nodes" n1..nN, all on
# 127.0.0.1, through Slurm's MULTIPLE_SLURMD) run with every file private
# to DIR: state, spool, logs, pid files, the munge key and socket,
# slurm.conf and plugstack.conf.  Nothing under /etc/slurm or a system
# munge is read or touched; ports are picked free at start.
#
#   local-slurm.sh up DIR [NNODES=2] [CPUS_PER_NODE=4]
#   local-slurm.sh down DIR
#   local-slurm.sh status DIR
#
# After `up`, `. DIR/env.sh` exports SLURM_CONF (and the Open MPI loopback
# settings fake nodes need), so srun/sbatch/squeue/sinfo talk to this cluster.
#
# Environment read by `up`:
#   PTRAIN_SPANK_PLUGIN   plugin path for plugstack.conf (default: ptrain.so,
#                         found in Slurm's PluginDir); "none" loads no plugin
#   PTRAIN_SPANK_ARGS     plugstack arguments, e.g. "config=/x/ptrain.conf"
#   PTRAIN_SPANK_OPTIONAL set to 1 to load the plugin as `optional`, not `required`
#   LOCAL_SLURM_HWLOC_XML_<node>  start that node's slurmd with HWLOC_XMLFILE=<value>
#                         (e.g. LOCAL_SLURM_HWLOC_XML_n2=/x/8gpu.xml)
#   LOCAL_SLURM_EXTRA_CONF lines appended to slurm.conf
#
# Exit status: 0 ok, 1 failure (message on stderr, logs under DIR/log),
# 2 usage error, 3 Slurm or munge packages missing.
set -u

prog=local-slurm.sh
die() { echo "$prog: $*" >&2; exit 1; }
usage() {
    echo "usage: $prog up DIR [NNODES=2] [CPUS_PER_NODE=4] | down DIR | status DIR" >&2
    exit 2
}

# Resolve the daemons; sbin is often outside a user's PATH.
find_bin() {
    local b
    for b in "$(command -v "$1" 2>/dev/null)" "/usr/sbin/$1" "/usr/bin/$1" "/usr/local/sbin/$1"; do
        [ -n "$b" ] && [ -x "$b" ] && { echo "$b"; return 0; }
    done
    return 1
}

need_packages() {
    local missing="" b
    for b in slurmctld slurmd srun sbatch sinfo squeue scancel munged mungekey; do
        find_bin "$b" >/dev/null || missing="$missing $b"
    done
    if [ -n "$missing" ]; then
        echo "$prog: missing programs:$missing (Debian: apt-get install --no-install-recommends slurmctld slurmd slurm-client munge libpmix-dev)" >&2
        exit 3
    fi
}

# alive PID NAME: the process exists, is not a zombie, and runs NAME.
alive() {
    local pid=$1 name=$2 stat
    case $pid in '' | *[!0-9]*) return 1 ;; esac
    [ -r "/proc/$pid/stat" ] || return 1
    stat=$(cat "/proc/$pid/stat" 2>/dev/null) || return 1
    # state is the field after the ")" closing the command name
    stat=${stat##*) }
    [ "${stat%% *}" = Z ] && return 1
    tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- "$name"
}

pidfiles() { # every pid file of DIR with the daemon name it must run
    local d=$1 f
    for f in "$d"/run/slurmd-*.pid; do [ -e "$f" ] && echo "$f slurmd"; done
    [ -e "$d/run/slurmctld.pid" ] && echo "$d/run/slurmctld.pid slurmctld"
    [ -e "$d/run/munged.pid" ] && echo "$d/run/munged.pid munged"
}

# stop_pid FILE NAME: TERM, wait up to 10 s, then KILL; only if FILE's pid runs NAME.
stop_pid() {
    local f=$1 name=$2 pid i
    pid=$(cat "$f" 2>/dev/null)
    if alive "$pid" "$name"; then
        kill -TERM "$pid" 2>/dev/null
        for i in $(seq 100); do alive "$pid" "$name" || break; sleep 0.1; done
        if alive "$pid" "$name"; then
            echo "$prog: $name (pid $pid) ignored SIGTERM; sending SIGKILL" >&2
            kill -KILL "$pid" 2>/dev/null
            for i in $(seq 50); do alive "$pid" "$name" || break; sleep 0.1; done
        fi
    fi
    rm -f "$f"
}

cmd_status() {
    local d=$1 n=0 up=0 f name pid
    [ -f "$d/slurm.conf" ] || { echo "no cluster under $d"; return 1; }
    while read -r f name; do
        n=$((n+1)); pid=$(cat "$f" 2>/dev/null)
        if alive "$pid" "$name"; then up=$((up+1)); echo "$name $(basename "$f" .pid) pid $pid running"
        else echo "$name $(basename "$f" .pid) not running"; fi
    done < <(pidfiles "$d")
    if [ "$n" -gt 0 ] && [ "$up" -eq "$n" ]; then
        (. "$d/env.sh" && "$(find_bin sinfo)" -N -o '%N %T %c' 2>/dev/null)
        return 0
    fi
    [ "$n" -eq 0 ] && echo "no daemons running under $d"
    return 1
}

cmd_down() {
    local d=$1 f name
    [ -d "$d" ] || return 0
    if [ -f "$d/env.sh" ] && [ -e "$d/run/slurmctld.pid" ] &&
       alive "$(cat "$d/run/slurmctld.pid")" slurmctld; then
        # Cancel what is left so slurmstepd processes end with their jobs.
        (. "$d/env.sh"
         jobs=$("$(find_bin squeue)" -h -o %i 2>/dev/null)
         if [ -n "$jobs" ]; then
             "$(find_bin scancel)" $jobs 2>/dev/null
             for _ in $(seq 50); do
                 [ -z "$("$(find_bin squeue)" -h -o %i 2>/dev/null)" ] && break; sleep 0.1
             done
         fi)
    fi
    # Nodes first, then the controller, then munge (reverse start order).
    while read -r f name; do stop_pid "$f" "$name"; done < <(pidfiles "$d")
    return 0
}

# A base port with NEEDED consecutive ports free (not listening) on this machine.
pick_ports() {
    local needed=$1 base p busy try
    local listening
    listening=$(ss -Htan 2>/dev/null | awk '{print $4}' | sed 's/.*://' | sort -u)
    for try in $(seq 200); do
        base=$(( 20000 + (RANDOM * 32768 + RANDOM) % 30000 ))
        busy=0
        for p in $(seq "$base" $((base + needed - 1))); do
            if grep -qx "$p" <<<"$listening"; then busy=1; break; fi
        done
        [ $busy -eq 0 ] && { echo "$base"; return 0; }
    done
    return 1
}

cmd_up() {
    local d=$1 nn=$2 cpus=$3 i
    case $nn in '' | *[!0-9]* | 0) die "NNODES must be a positive integer, got '$nn'" ;; esac
    case $cpus in '' | *[!0-9]* | 0) die "CPUS_PER_NODE must be a positive integer, got '$cpus'" ;; esac
    [ "$nn" -le 64 ] || die "NNODES=$nn is too many for one machine (valid: 1..64)"
    need_packages
    mkdir -p "$d" || die "cannot create $d"
    d=$(cd "$d" && pwd)
    if cmd_status "$d" >/dev/null 2>&1; then
        echo "$prog: cluster under $d already running"
        return 0
    fi
    cmd_down "$d" # leftovers of a half-started cluster
    local host slurmctld slurmd munged mungekey sinfo
    host=$(hostname -s)
    slurmctld=$(find_bin slurmctld); slurmd=$(find_bin slurmd)
    munged=$(find_bin munged); mungekey=$(find_bin mungekey); sinfo=$(find_bin sinfo)

    mkdir -p "$d"/{state,run,log,munge,spool,tmp} || die "cannot create folders under $d"
    chmod 755 "$d" "$d/munge"
    chmod 700 "$d/state"
    for i in $(seq "$nn"); do mkdir -p "$d/spool/n$i" "$d/tmp/n$i"; done

    # munge: private key and socket
    rm -f "$d/munge/munge.key"
    "$mungekey" -c -k "$d/munge/munge.key" >"$d/log/mungekey.log" 2>&1 ||
        die "mungekey failed: $(cat "$d/log/mungekey.log")"
    chmod 600 "$d/munge/munge.key"
    "$munged" --socket="$d/munge/munge.socket" --key-file="$d/munge/munge.key" \
        --pid-file="$d/run/munged.pid" --log-file="$d/log/munged.log" \
        --seed-file="$d/munge/munge.seed" --force >>"$d/log/munged.log" 2>&1 ||
        die "munged failed to start (see $d/log/munged.log)"

    local base
    base=$(pick_ports $((nn + 1))) || die "no $((nn + 1)) free consecutive TCP ports found"
    local plugin=${PTRAIN_SPANK_PLUGIN:-ptrain.so}
    local user; user=$(id -un)

    cat >"$d/slurm.conf" <<EOF
# Generated by $prog for a private test cluster; every path lives under $d.
ClusterName=ptrain-local
SlurmctldHost=$host
SlurmctldPort=$base
SlurmUser=$user
SlurmdUser=$user
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$d/munge/munge.socket
StateSaveLocation=$d/state
SlurmdSpoolDir=$d/spool/%n
SlurmctldPidFile=$d/run/slurmctld.pid
SlurmdPidFile=$d/run/slurmd-%n.pid
SlurmctldLogFile=$d/log/slurmctld.log
SlurmdLogFile=$d/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
PlugStackConfig=$d/plugstack.conf
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=pmix
SlurmdParameters=config_overrides
TmpFS=$d/tmp/%n
SchedulerType=sched/builtin
SchedulerParameters=batch_sched_delay=0
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MailProg=/bin/true
InactiveLimit=0
KillWait=5
MinJobAge=10
NodeName=n[1-$nn] NodeHostname=$host NodeAddr=127.0.0.1 Port=$((base + 1))-$((base + nn)) CPUs=$cpus RealMemory=1000 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
${LOCAL_SLURM_EXTRA_CONF:-}
EOF
    if [ "$plugin" = none ]; then
        echo "# no plugin (PTRAIN_SPANK_PLUGIN=none)" >"$d/plugstack.conf"
    else
        case $plugin in
        /*) [ -r "$plugin" ] || die "PTRAIN_SPANK_PLUGIN=$plugin does not exist" ;;
        esac
        local kind=required
        [ "${PTRAIN_SPANK_OPTIONAL:-0}" = 1 ] && kind=optional
        echo "$kind $plugin ${PTRAIN_SPANK_ARGS:-}" >"$d/plugstack.conf"
    fi

    cat >"$d/env.sh" <<EOF
# SPDX-License-Identifier: MIT
# Source this file to use the local cluster under $d.
export SLURM_CONF=$d/slurm.conf
export OMPI_MCA_btl=self,tcp
export OMPI_MCA_btl_tcp_if_include=lo
export OMPI_MCA_oob_tcp_if_include=lo
EOF
    export SLURM_CONF="$d/slurm.conf"

    "$slurmctld" -i -f "$d/slurm.conf" >>"$d/log/slurmctld.start.log" 2>&1 ||
        { cmd_down "$d"; die "slurmctld failed to start (see $d/log/slurmctld.log)"; }
    for i in $(seq "$nn"); do
        local xmlvar="LOCAL_SLURM_HWLOC_XML_n$i"
        if [ -n "${!xmlvar:-}" ]; then
            HWLOC_XMLFILE=${!xmlvar} "$slurmd" -N "n$i" -f "$d/slurm.conf" >>"$d/log/slurmd-n$i.start.log" 2>&1
        else
            "$slurmd" -N "n$i" -f "$d/slurm.conf" >>"$d/log/slurmd-n$i.start.log" 2>&1
        fi || { cmd_down "$d"; die "slurmd -N n$i failed to start (see $d/log/slurmd-n$i.log)"; }
    done
    local idle=0
    for i in $(seq 300); do
        idle=$("$sinfo" -h -N -t idle -o %N 2>/dev/null | sort -u | wc -l)
        [ "$idle" -ge "$nn" ] && break
        sleep 0.1
    done
    if [ "$idle" -lt "$nn" ]; then
        "$sinfo" -N >&2 2>/dev/null
        cmd_down "$d"
        die "only $idle of $nn nodes became idle within 30 s (logs: $d/log)"
    fi
    echo "$prog: $nn nodes up under $d (controller port $base); . $d/env.sh"
}

[ $# -ge 2 ] || usage
action=$1 dir=$2
case $action in
up) cmd_up "$dir" "${3:-2}" "${4:-4}" ;;
down) cmd_down "$dir" ;;
status) cmd_status "$dir" ;;
*) usage ;;
esac
