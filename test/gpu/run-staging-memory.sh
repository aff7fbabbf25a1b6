#!/bin/bash
# Issue 45 on the GPU machine (H200, cgroup v2), from the repo root after test/gpu/pack.sh (which
# carries bench/gpu_hold as .carry/bin/gpu_hold): the driver stages device memory in the process's
# own memory, charged to the container's memory cgroup. Through ctr -> containerd 1.7 (the kit's)
# -> our shim -> runc -> CRIU 4.2.1 (the kit's):
#   lift     a container limited to LIMIT_GIB (6) whose one process holds HOLD_GIB (10) of written
#            device memory: `ctr c checkpoint --task --rw` (the task keeps running), the log's lift
#            and put-back, memory.max read back; then kill, restore (the restore lifts through the
#            spec), SIGTERM: gpu_hold checks its whole buffer ("data OK")
#   refuse   the same with checkpoint.staging_memory: refuse: refused before any toggle, running
#   host     a JAX-sized hold above the host's RAM is refused in milliseconds, running (HOST=yes;
#            HOST_GIB default 130)
# Prints "RESULT ..." lines; containerd-45.log.gz and diagnostics45.json to $OUT.
# Run: set -o pipefail; timeout 590 bash test/gpu/run-staging-memory.sh 2>&1 | tee $OUT/run45.log
set -uo pipefail
REPO=$(pwd)
PACK=${PACK:-$REPO/.carry}
OUTD=${OUT:-/tmp/nvgpu-out}
LIMIT_GIB=${LIMIT_GIB:-6} HOLD_GIB=${HOLD_GIB:-10} HOST=${HOST:-yes} HOST_GIB=${HOST_GIB:-130}
mkdir -p "$OUTD"
W=/var/tmp/nvgpu45
source "$REPO/test/gpu/lib/kit-containerd.sh"
kit_install
rm -rf "$W"; mkdir -p "$W/tools"
cp "$PACK/bin/gpu_hold" "$W/tools/"
CFG=$W/shim.yaml
write_cfg() {  # MODE
  kit_shim_config "$CFG" "{binary: /opt/kit/root/usr/sbin/runc, root: /run/containerd/nvproxy-gpu45, criu_path: /opt/kit/bin/criu}" \
    "staging_memory: $1"
}
write_cfg lift
kit_start "$W" "$CFG" || { log "containerd or the image import failed"; exit 1; }
trap 'kit_teardown 45; printf "%s\n" "${RESULTS[@]}"' EXIT
log "kernel $(uname -r); cgroup $(stat -fc %T /sys/fs/cgroup); MemAvailable $(awk '/MemAvailable/{print $2}' /proc/meminfo) kB"

start() {  # ID LIMIT_BYTES GIB
  mkdir -p "$W/h/$1"
  CTR run -d --snapshotter native --runtime io.containerd.nvproxy.v1 --net-host "${BINDS[@]}" ${2:+--memory-limit $2} \
    --mount "type=bind,src=$W/tools,dst=/tools,options=rbind:ro" --mount "type=bind,src=$W/h/$1,dst=/out,options=rbind:rw" \
    --env NVIDIA_VISIBLE_DEVICES=all $IMAGE "$1" sh -c "/tools/gpu_hold hold $3 /out/ready1 >/out/log1 2>&1 & wait" >/dev/null ||
    { log "$1: start failed"; return 1; }
  for _ in $(seq 600); do [[ -e $W/h/$1/ready1 ]] && return 0; sleep 0.5; done
  log "$1: gpu_hold never ready: $(cat "$W/h/$1/log1")"; return 1
}
status_of() { CTR task ls | awk -v i="$1" '$1==i{print $3}'; }
memmax() { cat "/sys/fs/cgroup$(awk -F: '$1=="0"{print $3}' "/proc/$(CTR task ls | awk -v i="$1" '$1==i{print $2}')/cgroup")/memory.max"; }
stop() {
  TMO=60 CTR task kill -a -s KILL "$1" >/dev/null 2>&1
  for _ in $(seq 100); do [[ $(status_of "$1") == STOPPED ]] && break; sleep 0.2; done
  CTR task rm -f "$1" >/dev/null 2>&1; CTR c rm "$1" >/dev/null 2>&1
}
diag() { { echo "// $1"; cat "$W/state/io.containerd.runtime.v2.task/gpu/$1/checkpoint-diagnostic.json"; echo; } >>"$OUTD/diagnostics45.json" 2>/dev/null; }
LIMIT=$((LIMIT_GIB << 30))

log "lift: $LIMIT_GIB GiB limit, $HOLD_GIB GiB of written device memory"
if start lift "$LIMIT" "$HOLD_GIB"; then
  t0=$(now)
  if CTR c checkpoint --task --rw lift liftref >"$W/lift.out" 2>&1; then
    log "checkpoint (leave running) in $(dt "$t0" "$(now)") s; status $(status_of lift); memory.max $(memmax lift)"
    diag lift
    grep -E 'memory limits (lifted|put back)' "$W/containerd.log" | sed 's/.*msg="//; s/" namespace.*//' | while read -r l; do log "  $l"; done
    ok=1
    [[ $(status_of lift) == RUNNING ]] || ok=0
    [[ $(memmax lift) == "$LIMIT" ]] || ok=0
    grep -q 'memory limits lifted' "$W/containerd.log" && grep -q 'memory limits put back' "$W/containerd.log" || ok=0
    ((ok)) && result PASS lift-checkpoint "$HOLD_GIB GiB under a $LIMIT_GIB GiB limit, kept running, limit read back" ||
      result FAIL lift-checkpoint "status $(status_of lift), memory.max $(memmax lift)"
    stop lift
    t0=$(now)
    if CTR c restore --live lift liftref </dev/null >"$W/lift.rs" 2>&1; then
      log "restore in $(dt "$t0" "$(now)") s; memory.max $(memmax lift)"
      restored_max=$(memmax lift)
      TMO=60 CTR task kill -a -s TERM lift >/dev/null
      for _ in $(seq 300); do grep -q 'data ' "$W/h/lift/log1" 2>/dev/null && break; sleep 0.2; done
      data=$(grep -o 'data [A-Z]*' "$W/h/lift/log1" | tail -1)
      [[ $data == "data OK" && $restored_max == "$LIMIT" ]] && result PASS lift-restore "$data, memory.max $restored_max" ||
        result FAIL lift-restore "${data:-no data line}, memory.max $restored_max"
    else
      result FAIL lift-restore "$(tail -c 800 "$W/lift.rs")"
    fi
  else
    diag lift
    result FAIL lift-checkpoint "$(tail -c 800 "$W/lift.out"); status $(status_of lift)"
  fi
  stop lift
fi

# refused ID LIMIT GIB WORDS: a container that must be refused before any toggle, with WORDS in
# the error, and keep running.
refused() {
  start "$1" "$2" "$3" || return
  local t0
  t0=$(now)
  if CTR c checkpoint --task "$1" "$1ref" >"$W/$1.out" 2>&1; then
    result FAIL "$1" "checkpointed $3 GiB although it must be refused"
  else
    log "refused in $(dt "$t0" "$(now)") s: $(tr '\n' ' ' <"$W/$1.out" | cut -c1-600)"
    [[ $(status_of "$1") == RUNNING ]] && grep -qF "$4" "$W/$1.out" &&
      result PASS "$1" "refused before any toggle ($4), running" || result FAIL "$1" "status $(status_of "$1")"
  fi
  diag "$1"
  stop "$1"
}

log "refuse: checkpoint.staging_memory refuse"
write_cfg refuse
refused refuse "$LIMIT" "$HOLD_GIB" "would cross the container's memory limit"
write_cfg lift

if [[ $HOST == yes ]]; then
  log "host: $HOST_GIB GiB of device memory on a host with $(awk '/MemAvailable/{printf "%.1f", $2/1048576}' /proc/meminfo) GiB available"
  refused host "" "$HOST_GIB" "would run the host out of memory"
fi
