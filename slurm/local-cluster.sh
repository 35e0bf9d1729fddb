#!/usr/bin/env bash
# A real single-node SLURM cluster on this machine (Debian's slurm-wlm + munge), for trying the SLURM path on a
# laptop or workstation and for the test suite's `slurm` tests. Needs root and apt (Debian/Ubuntu).
#   bash slurm/local-cluster.sh start    # install if missing, configure, start munged/slurmctld/slurmd, wait ready
#   bash slurm/local-cluster.sh status   # sinfo; exit 0 when the node is idle or mixed
#   bash slurm/local-cluster.sh stop
# One partition `local` (CPUs and memory of this machine, no GPUs): GPU stages run there with the `cpu` profile.
set -euo pipefail
cmd=${1:-start}
conf=/etc/slurm/slurm.conf
host=$(hostname -s)
# the last line of the config this script writes: a config without it (an older version's) is written again
version="# harness-local config 2"

install() {
  command -v slurmctld >/dev/null && command -v munged >/dev/null && return
  [ "$(id -u)" = 0 ] || { echo "error: installing slurm-wlm and munge needs root (or install them yourself)" >&2; exit 2; }
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm munge) >/dev/null
}

configure() {
  local cpus mem
  cpus=$(nproc)
  mem=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 * 8 / 10 ))   # 80% of RAM, in MB
  mkdir -p /etc/slurm
  # Plugins that work without cgroups or systemd (measured: ../shared/ENVIRONMENT.md); DefMemPerCPU lets array
  # tasks share the node (without it a job with no --mem takes all of RealMemory and tasks run one at a time).
  cat > "$conf" <<CONF
ClusterName=harness-local
SlurmctldHost=$host
SlurmUser=slurm
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=/run/slurm/slurmctld.pid
SlurmdPidFile=/run/slurm/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=1000
ReturnToService=2
MpiDefault=none
SchedulerType=sched/backfill
SlurmctldTimeout=30
SlurmdTimeout=30
KillWait=5
MinJobAge=300
# A requeued job may start again cred_expire seconds later (default 120 s: the test suite's requeue waited two
# minutes on an idle node; one node launches a job within a second), when a backfill pass sees it (every 30 s by
# default; every 2 s costs nothing with a handful of jobs)
AuthInfo=cred_expire=10
SchedulerParameters=bf_interval=2
NodeName=$host CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=local Nodes=$host Default=YES MaxTime=INFINITE State=UP
$version
CONF
}

start() {
  install
  local reconfigure=0
  if ! { [ -f "$conf" ] && grep -qx "$version" "$conf"; }; then
    [ -f "$conf" ] && grep -q "ClusterName=harness-local" "$conf" && reconfigure=1   # an older version's config
    configure
  fi
  # state and run-time folders (/run is emptied at boot, so made on every start)
  mkdir -p /var/spool/slurmctld /var/spool/slurmd /var/log/slurm /run/slurm
  chown slurm:slurm /var/spool/slurmctld /var/log/slurm /run/slurm 2>/dev/null || true
  [ -f /etc/munge/munge.key ] || mungekey --create >/dev/null 2>&1 || true
  mkdir -p /run/munge && chown munge:munge /run/munge
  if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
    runuser -u munge -- /usr/sbin/munged && touch /run/slurm/munged.ours   # `stop` stops only a munged it started
  fi
  if [ $reconfigure = 1 ] && [ -s /run/slurm/slurmctld.pid ]; then   # read at start (cred_expire too): restart it;
    kill "$(cat /run/slurm/slurmctld.pid)" 2>/dev/null || true         # queued and running jobs are kept
    for _ in $(seq 30); do pgrep -x slurmctld >/dev/null || break; sleep 0.5; done
  fi
  pgrep -x slurmctld >/dev/null || slurmctld
  pgrep -x slurmd >/dev/null || slurmd
  for _ in $(seq 60); do
    if status >/dev/null 2>&1; then
      [ $reconfigure = 0 ] || scontrol reconfigure   # a running slurmd reads the new config too
      status; return 0
    fi
    scontrol update nodename="$host" state=resume >/dev/null 2>&1 || true
    sleep 1
  done
  echo "error: the SLURM node did not become ready in 60 s; see /var/log/slurm/" >&2
  exit 1
}

status() {
  # a node that is up: idle, mixed or allocated, without a flag such as `*` (not responding) or `~` (powered off)
  sinfo -h -N -o "%N %T" 2>/dev/null | grep -Eq " (idle|mixed|allocated)$" && sinfo -N -o "%N %P %T %C %m"
}

stop() {
  # the daemons this script started, by their PID files (slurm.conf above); running jobs are killed with them.
  # munged too when `start` started it (a munged that was already running serves others and is left alone).
  local f pids=()
  for f in /run/slurm/slurmd.pid /run/slurm/slurmctld.pid; do
    [ -s "$f" ] && pids+=("$(cat "$f")")
  done
  [ -f /run/slurm/munged.ours ] && [ -s /run/munge/munged.pid ] && pids+=("$(cat /run/munge/munged.pid)")
  [ ${#pids[@]} -gt 0 ] && kill "${pids[@]}" 2>/dev/null || true
  for _ in $(seq 30); do   # gone before returning, so a `start` right after starts afresh
    local alive=0
    for f in "${pids[@]}"; do kill -0 "$f" 2>/dev/null && alive=1; done
    [ $alive = 0 ] && break
    sleep 0.5
  done
  rm -f /run/slurm/munged.ours
  echo "stopped: slurmctld, slurmd$([ ${#pids[@]} -gt 2 ] && echo ', munged')"
}

case "$cmd" in
  start) start ;;
  status) status ;;
  stop) stop ;;
  *) echo "usage: $0 start|status|stop" >&2; exit 2 ;;
esac
