#!/usr/bin/env bash
# A real single-node Slurm cluster (slurmctld + slurmd + munge) and OpenMPI on this Debian machine,
# for CI, the demo and anyone who wants to try the Slurm path locally.
#
#   slurm/local_cluster.sh up       install what is missing, write the config, start the daemons
#   slurm/local_cluster.sh down     cancel jobs, stop the daemons this script started
#   slurm/local_cluster.sh status   is it up? (exit 0 if the node is usable)
#
# Needs root (apt-get and daemons). Config, state, spool and logs live in
# ${DDLBENCH_CACHE:-$HOME/.cache/ddlbench}/slurm, never in the checkout. Idempotent: `up` on a
# running cluster returns at once. Pitfalls behind each step: see docs/slurm.md.
set -euo pipefail

CACHE=${DDLBENCH_CACHE:-$HOME/.cache/ddlbench}
STATE=$CACHE/slurm
CONF=$STATE/slurm.conf
HOST=$(hostname -s)
# more CPUs than cores (SlurmdParameters=config_overrides) so 4-task tests fit on a 2-core machine
CPUS=${DDLBENCH_SLURM_CPUS:-8}
PARTITION=${DDLBENCH_SLURM_PARTITION:-local}
PACKAGES=(munge slurm-client slurmctld slurmd openmpi-bin libopenmpi-dev)
MUNGE_PID=/run/munge/munged.pid

log() { echo "[local_cluster] $*" >&2; }
die() { echo "local_cluster: error: $*" >&2; exit 1; }
trap 'echo "local_cluster: error: \"$BASH_COMMAND\" failed (line $LINENO); logs in $STATE/log" >&2' ERR

# a pid file whose process runs (a killed daemon may linger as a zombie if nothing reaps it: dead)
alive() {
    local pid
    [[ -f $1 ]] && pid=$(cat "$1") && [[ -r /proc/$pid/stat ]] || return 1
    [[ $(sed 's/^.*) //' "/proc/$pid/stat" | cut -d' ' -f1) != Z ]]
}

# ask only a controller that runs: sinfo retries an absent one for ~20 s
node_state() {
    alive "$STATE/slurmctld.pid" || return 0
    SLURM_CONF=$CONF timeout 5 sinfo -h -n "$HOST" -o %T 2>/dev/null | head -n1 || true
}

install_packages() {
    local missing=()
    for p in "${PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    ((${#missing[@]} == 0)) && return
    [[ $(id -u) == 0 ]] || die "installing ${missing[*]} needs root; run as root or install them first"
    command -v apt-get >/dev/null || die "no apt-get: this script supports Debian/Ubuntu; install ${missing[*]} by hand"
    log "installing ${missing[*]}"
    # OpenMPI (which brings libpmix2) must be in place BEFORE slurmd starts: its mpi/pmix plugin
    # loads libpmix once, at start; without it `srun --mpi=pmix` hangs and the node goes to 'comp'
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

write_config() {
    mkdir -p "$STATE"/{state,spool,log}
    cat >"$CONF" <<EOF
# written by slurm/local_cluster.sh: one node, CPU ranks, no accounting database
ClusterName=ddlbench
SlurmctldHost=$HOST(127.0.0.1)
SlurmUser=root
AuthType=auth/munge
CryptoType=crypto/munge
MpiDefault=pmix
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
SlurmdParameters=config_overrides
MailProg=/bin/true
StateSaveLocation=$STATE/state
SlurmdSpoolDir=$STATE/spool
SlurmctldPidFile=$STATE/slurmctld.pid
SlurmdPidFile=$STATE/slurmd.pid
SlurmctldLogFile=$STATE/log/slurmctld.log
SlurmdLogFile=$STATE/log/slurmd.log
# finished jobs stay visible to 'scontrol show job' for 10 minutes (tests and campaign status poll it)
MinJobAge=600
KillWait=5
InactiveLimit=0
NodeName=$HOST NodeAddr=127.0.0.1 CPUs=$CPUS State=UNKNOWN
PartitionName=$PARTITION Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
EOF
    # client commands (sbatch, srun inside jobs) look in /etc/slurm; link ours there unless a site
    # configuration already lives in that place
    mkdir -p /etc/slurm
    if [[ -L /etc/slurm/slurm.conf || ! -e /etc/slurm/slurm.conf ]]; then
        ln -sfn "$CONF" /etc/slurm/slurm.conf
    else
        log "/etc/slurm/slurm.conf is a real file: left alone; export SLURM_CONF=$CONF"
    fi
}

start_munge() {
    if [[ -S /run/munge/munge.socket.2 ]] && munge -n </dev/null >/dev/null 2>&1; then
        return
    fi
    mkdir -p /run/munge /var/lib/munge /var/log/munge
    chown munge:munge /run/munge /var/lib/munge /var/log/munge
    chmod 0755 /run/munge
    if [[ ! -s /etc/munge/munge.key ]]; then
        mkdir -p /etc/munge
        dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
        chown munge:munge /etc/munge/munge.key
        chmod 0400 /etc/munge/munge.key
    fi
    # no systemd here: run the daemon by hand, as its own user
    runuser -u munge -- /usr/sbin/munged --pid-file="$MUNGE_PID"
    touch "$STATE/munged.ours"
    for _ in $(seq 50); do munge -n </dev/null >/dev/null 2>&1 && return; sleep 0.1; done
    die "munged did not come up; see /var/log/munge/munged.log"
}

cmd_up() {
    local state
    state=$(node_state)
    if [[ $state == idle* || $state == mix* || $state == alloc* ]] && alive "$STATE/slurmd.pid"; then
        log "already up: node $HOST is $state (SLURM_CONF=$CONF)"
        return
    fi
    local t0=$SECONDS
    install_packages
    # another cluster's daemons (started from another DDLBENCH_CACHE) hold Slurm's ports: ours could not bind
    local other
    for daemon in slurmctld slurmd; do
        # a live process of that name whose pid is not in our pid file (a zombie, state Z, is no daemon)
        other=$({ ps -C "$daemon" -o pid=,stat= || true; } | awk -v ours="$(cat "$STATE/$daemon.pid" 2>/dev/null)" \
            '$2 !~ /^Z/ && $1 != ours {print $1; exit}')  # ps fails when none runs: the usual case
        [[ -z $other ]] || die "another $daemon (pid $other) runs on this machine, not started from $STATE; stop it first (make slurm-down with the CACHE that started it, or kill $other)"
    done
    write_config
    start_munge
    stop_daemon slurmd "$STATE/slurmd.pid"
    stop_daemon slurmctld "$STATE/slurmctld.pid"
    # -c: start from a clean state (no jobs or node states from an earlier bring-up)
    /usr/sbin/slurmctld -c -f "$CONF"
    /usr/sbin/slurmd -f "$CONF"
    for _ in $(seq 150); do
        case $(node_state) in
            idle*) log "up in $((SECONDS - t0)) s: node $HOST, $CPUS CPUs, partition $PARTITION (SLURM_CONF=$CONF)"; return ;;
        esac
        sleep 0.1
    done
    die "node $HOST is '$(node_state)' after 15 s, not idle; see $STATE/log/slurmctld.log and slurmd.log"
}

stop_daemon() {  # name pidfile: SIGTERM, wait, then SIGKILL the pid from the file (nothing else)
    local name=$1 pidfile=$2 pid
    alive "$pidfile" || { rm -f "$pidfile"; return 0; }
    pid=$(cat "$pidfile")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do alive "$pidfile" || break; sleep 0.1; done
    if alive "$pidfile"; then
        log "$name ($pid) ignored SIGTERM for 5 s: SIGKILL"
        kill -9 "$pid" 2>/dev/null || true
    fi
    rm -f "$pidfile"
}

cmd_down() {
    if alive "$STATE/slurmctld.pid"; then
        SLURM_CONF=$CONF scancel --full --quiet --partition="$PARTITION" 2>/dev/null || true
        for _ in $(seq 50); do
            [[ -z $(SLURM_CONF=$CONF squeue -h -o %i 2>/dev/null) ]] && break
            sleep 0.2
        done
    fi
    stop_daemon slurmd "$STATE/slurmd.pid"
    stop_daemon slurmctld "$STATE/slurmctld.pid"
    # munge may serve others on a real machine: stop it only if this script started it
    if [[ -f $STATE/munged.ours ]]; then
        stop_daemon munged "$MUNGE_PID"
        rm -f "$STATE/munged.ours"
    fi
    [[ -L /etc/slurm/slurm.conf && $(readlink /etc/slurm/slurm.conf) == "$CONF" ]] && rm -f /etc/slurm/slurm.conf
    log "down"
}

cmd_status() {
    local state
    state=$(node_state || true)
    if [[ -n $state ]] && alive "$STATE/slurmctld.pid" && alive "$STATE/slurmd.pid"; then
        echo "up: node $HOST $state, partition $PARTITION, SLURM_CONF=$CONF"
        return 0
    fi
    echo "down (run 'make slurm-up' or 'slurm/local_cluster.sh up')"
    return 1
}

case ${1:-} in
    up) cmd_up ;;
    down) cmd_down ;;
    status) cmd_status ;;
    *) echo "usage: $0 up|down|status" >&2; exit 2 ;;
esac
