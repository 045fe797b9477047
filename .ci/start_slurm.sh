#!/usr/bin/env bash
# Start a one-host Slurm cluster (Debian's slurmctld + slurmd + munge, Slurm 22.05) for CI and the
# real-Slurm tests (tests/test_slurm_cluster.py); installs the packages first when absent.
#
#   .ci/start_slurm.sh          # prints "slurm: up (...)" once `sinfo` shows the node idle
#
# Root only (it writes /etc/slurm/slurm.conf and starts daemons). State, spool, pid and log files
# live in $VPN_SLURM_DIR (default /tmp/vpn_slurm). Daemons this folder's pid files name are left
# alone while the configuration is unchanged, those not running (e.g. a killed slurmd) are
# started; a slurmctld or slurmd that they do not name (left by an earlier run of another clone or
# another $VPN_SLURM_DIR, or whose pid file was deleted) is stopped first, each named on stderr:
# it held the ports and the node with another state folder (a requeue then failed with "Job
# credential revoked"). An /etc/slurm/slurm.conf that this script did not write (a real
# cluster's) is never replaced: that cluster is used when it answers.
# Exit status: 0 up; 77 cannot be done here (not root, no apt-get), with the reason on stderr;
# anything else: failed (the daemons' logs are in $VPN_SLURM_DIR/log).
set -euo pipefail
DIR=${VPN_SLURM_DIR:-/tmp/vpn_slurm}
CONF=/etc/slurm/slurm.conf
MARK='# written by vpn_plugin .ci/start_slurm.sh'
PARTITION=debug

say() { echo "slurm: $*" >&2; }

if [ "$(id -u)" -ne 0 ]; then
    say "not root: a Slurm cluster cannot be started here (needs root to install and run the daemons)"
    exit 77
fi

node_state() { sinfo -h -N -o '%t' 2>/dev/null | head -1; }
usable() { case "$(node_state)" in idle|mix|alloc|comp) return 0 ;; *) return 1 ;; esac; }

if [ -e "$CONF" ] && ! grep -qF "$MARK" "$CONF"; then
    if usable; then
        say "a cluster configured elsewhere answers ($(sinfo -h -o '%P %D %t' | head -1)); using it"
        exit 0
    fi
    say "$CONF exists and was not written by this script (a real cluster's?); not replacing it"
    exit 1
fi

mkdir -p "$DIR"
exec 9>"$DIR/.start.lock"   # one start at a time (two test sessions may race)
flock 9

if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null \
        || ! command -v sbatch >/dev/null || ! command -v munged >/dev/null; then
    if ! command -v apt-get >/dev/null; then
        say "Slurm is not installed and there is no apt-get to install it"
        exit 77
    fi
    say "installing slurmctld slurmd slurm-client munge"
    apt-get update -q >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q slurmctld slurmd slurm-client munge >/dev/null
fi

# munge: the key owned by munge, munged run as munge
mkdir -p /etc/munge /run/munge /var/lib/munge /var/log/munge
if [ ! -s /etc/munge/munge.key ]; then
    dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
fi
chown munge:munge /etc/munge /etc/munge/munge.key /run/munge /var/lib/munge /var/log/munge
chmod 700 /etc/munge
chmod 400 /etc/munge/munge.key
if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
    runuser -u munge -- /usr/sbin/munged 9>&-
    for _ in $(seq 50); do munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && break; sleep 0.1; done
fi

# the daemon of a pid file runs (a zombie left unreaped by this container's init does not count)
running() { [ -s "$1" ] && grep -qs '^State:[[:space:]]*[^Z[:space:]]' "/proc/$(cat "$1")/status"; }

HOST=$(hostname -s)
CPUS=$(getconf _NPROCESSORS_ONLN)  # not nproc: it answers OMP_NUM_THREADS when that is set
MEMORY=$(awk '/MemTotal/ {print int($2 / 1024 * 0.9)}' /proc/meminfo)
mkdir -p "$DIR/state" "$DIR/spool" "$DIR/log" /etc/slurm
cat > "$DIR/slurm.conf" <<EOF
$MARK
ClusterName=vpn
SlurmctldHost=$HOST
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SwitchType=switch/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
ReturnToService=2
KillWait=5
DefMemPerCPU=2048
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
NodeName=$HOST CPUs=$CPUS RealMemory=$MEMORY State=UNKNOWN
PartitionName=$PARTITION Nodes=$HOST Default=YES MaxTime=2:00:00 State=UP
PartitionName=long Nodes=$HOST MaxTime=2-00:00:00 State=UP
EOF

# every slurmctld / slurmd daemon running now (/proc: a zombie does not count, nor a daemon's
# own short-lived fork, whose parent has the same name)
daemon_pids() {
    local status parent
    for status in /proc/[0-9]*/status; do
        grep -qsx "Name:[[:space:]]*$1" "$status" || continue
        grep -qs '^State:[[:space:]]*[^Z[:space:]]' "$status" || continue
        parent=$(awk '/^PPid:/ {print $2}' "$status" 2>/dev/null)
        grep -qsx "Name:[[:space:]]*$1" "/proc/$parent/status" && continue
        basename "$(dirname "$status")"
    done
    return 0
}

# daemons this folder's pid files do not name: stopped (TERM, then KILL after 10 s)
for daemon in slurmctld slurmd; do
    ours=$(cat "$DIR/$daemon.pid" 2>/dev/null || true)
    for pid in $(daemon_pids "$daemon"); do
        [ "$pid" = "$ours" ] && running "$DIR/$daemon.pid" && continue
        say "stopping $daemon (pid $pid): not started from $DIR (an earlier run's, of another clone or folder)"
        kill "$pid" 2>/dev/null || continue
        for _ in $(seq 100); do
            grep -qs '^State:[[:space:]]*[^Z[:space:]]' "/proc/$pid/status" || break
            sleep 0.1
        done
        if grep -qs '^State:[[:space:]]*[^Z[:space:]]' "/proc/$pid/status"; then
            kill -KILL "$pid" 2>/dev/null || true
            sleep 0.5
        fi
    done
done

if ! cmp -s "$DIR/slurm.conf" "$CONF"; then
    # a changed configuration: the daemons this script started read it anew
    for daemon in slurmctld slurmd; do
        pid_file="$DIR/$daemon.pid"
        if running "$pid_file" && kill "$(cat "$pid_file")" 2>/dev/null; then
            for _ in $(seq 50); do running "$pid_file" || break; sleep 0.1; done
        fi
    done
    cp "$DIR/slurm.conf" "$CONF"
fi

running "$DIR/slurmctld.pid" || slurmctld 9>&-
running "$DIR/slurmd.pid" || slurmd 9>&-
for _ in $(seq 150); do
    state=$(node_state)
    if usable; then
        say "up ($(sinfo -h -o '%P %D %t' | head -1), logs in $DIR/log)"
        exit 0
    fi
    if [ "$state" = down ] || [ "$state" = 'down*' ] || [ "$state" = drain ]; then
        scontrol update nodename="$HOST" state=resume 2>/dev/null || true
    fi
    sleep 0.2
done
say "the node did not become idle in 30 s (state: $(node_state)); see $DIR/log"
exit 1
