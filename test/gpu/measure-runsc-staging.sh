#!/bin/bash
# Issue 45 under runsc: where the driver's staging of device memory lands when the CUDA process
# runs in a gVisor sandbox (nvproxy), what a memory limit does to it, and the shim's bill of it. From the repo root after test/gpu/pack.sh (.carry/runsc.tar.xz, .carry/bin/gpu_hold).
# Through ctr -> containerd 1.7 (the kit's) -> our shim -> the current runsc with --nvproxy, cgroups
# applied (no --ignore-cgroups), a container limited to LIMIT_GIB:
#   fits   HOLD_SMALL GiB (0: skipped) of written device memory: NVML's pid for it (sentry?), the sandbox's cgroup,
#          its memory.current sampled through `ctr c checkpoint --task --rw`, memory.peak, OOM events
#   over   HOLD_BIG GiB: the same; the shim bills the sandbox as one (the sentry's device memory
#          against its cgroup) and lifts the limit: RESULT lift-runsc (running, limit read back);
#          then kill and restore: RESULT restore-runsc (gpu_hold's "data OK", or what runsc said)
# Measured without the bill (0.6.0): the sentry was OOM-killed mid-checkpoint, the sandbox with it.
# Prints "MEASURE ..." and "RESULT ..." lines; containerd-45r.log.gz to $OUT.
# Run: set -o pipefail; timeout 400 bash test/gpu/measure-runsc-staging.sh 2>&1 | tee $OUT/measure45r.log
set -uo pipefail
REPO=$(pwd)
PACK=${PACK:-$REPO/.carry}
OUTD=${OUT:-/tmp/nvgpu-out}
LIMIT_GIB=${LIMIT_GIB:-6} HOLD_SMALL=${HOLD_SMALL:-3} HOLD_BIG=${HOLD_BIG:-10}
mkdir -p "$OUTD"
W=/var/tmp/nvgpu45r
source "$REPO/test/gpu/lib/kit-containerd.sh"
kit_install
mkdir -p /opt/runsc && tar -C /opt/runsc -xJf "$PACK/runsc.tar.xz"
rm -rf "$W"; mkdir -p "$W/tools"
cp "$PACK/bin/gpu_hold" "$W/tools/"
CFG=$W/shim.yaml
kit_shim_config "$CFG" "{binary: /opt/runsc/bin/runsc, root: /run/containerd/nvproxy-gpu45r, extra_args: [\"--network=none\"]}"
kit_start "$W" "$CFG" || { log "containerd or the image import failed"; exit 1; }
trap 'kit_teardown 45r; printf "%s\n" "${RESULTS[@]}"' EXIT
log "runsc $(/opt/runsc/bin/runsc --version | head -1); kernel $(uname -r); cgroup $(stat -fc %T /sys/fs/cgroup)"
measure() { echo "MEASURE $*"; }

task_pid() { CTR task ls | awk -v i="$1" '$1==i{print $2}'; }
status_of() { CTR task ls | awk -v i="$1" '$1==i{print $3}'; }
cg_of() { echo "/sys/fs/cgroup$(awk -F: '$1=="0"{print $3}' "/proc/$1/cgroup")"; }
# Every host process of the sandbox: the task's pid and everything in its cgroup.
sandbox_procs() { cat "$1/cgroup.procs" 2>/dev/null | while read -r p; do echo "$p:$(cat /proc/$p/comm 2>/dev/null)"; done | tr '\n' ' '; }

run_case() {  # ID GIB
  local id=$1 gib=$2
  mkdir -p "$W/h/$id"
  if ! CTR run -d --snapshotter native --runtime io.containerd.nvproxy.v1 "${BINDS[@]}" --memory-limit $((LIMIT_GIB << 30)) \
    --mount "type=bind,src=$W/tools,dst=/tools,options=rbind:ro" --mount "type=bind,src=$W/h/$id,dst=/out,options=rbind:rw" \
    --env NVIDIA_VISIBLE_DEVICES=all $IMAGE "$id" sh -c "/tools/gpu_hold hold $gib /out/ready1 >/out/log1 2>&1 & wait" >"$W/$id.run" 2>&1; then
    measure "$id: start failed: $(tail -c 600 "$W/$id.run")"; return
  fi
  for _ in $(seq 300); do [[ -e $W/h/$id/ready1 ]] && break; sleep 0.5; done
  [[ -e $W/h/$id/ready1 ]] || { measure "$id: gpu_hold never ready: $(tail -c 400 "$W/h/$id/log1")"; return; }
  local pid cg
  pid=$(task_pid "$id"); cg=$(cg_of "$pid")
  measure "$id: task pid $pid ($(cat /proc/$pid/comm)); cgroup $cg; memory.max $(cat "$cg/memory.max"); current $(cat "$cg/memory.current")"
  measure "$id: cgroup procs: $(sandbox_procs "$cg")"
  measure "$id: NVML compute apps: $(nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader | tr '\n' ';')"
  for p in $(nvidia-smi --query-compute-apps=pid --format=csv,noheader); do
    measure "$id: NVML pid $p is $(cat /proc/$p/comm 2>/dev/null) in $(awk -F: '$1=="0"{print $3}' /proc/$p/cgroup 2>/dev/null); rss $(awk '/VmRSS/{print $2}' /proc/$p/status 2>/dev/null) kB"
  done
  local before_events peak=0
  before_events=$(tr '\n' ' ' <"$cg/memory.events")
  ( while :; do cat "$cg/memory.current" 2>/dev/null || break; sleep 0.1; done >"$W/$id.samples" ) &
  local sampler=$! t0
  t0=$(now)
  CTR c checkpoint --task --rw "$id" "${id}ref" >"$W/$id.ck" 2>&1
  local rc=$?
  kill "$sampler" 2>/dev/null
  peak=$(sort -n "$W/$id.samples" | tail -1)
  measure "$id: checkpoint rc $rc in $(dt "$t0" "$(now)") s: $(tr '\n' ' ' <"$W/$id.ck" | cut -c1-700)"
  measure "$id: memory.current peak sampled $((peak >> 20)) MiB; memory.peak $(( $(cat "$cg/memory.peak" 2>/dev/null || echo 0) >> 20 )) MiB; limit $((LIMIT_GIB << 10)) MiB"
  measure "$id: memory.events before: $before_events; after: $(tr '\n' ' ' <"$cg/memory.events" 2>/dev/null)"
  measure "$id: status after $(status_of "$id"); gpu_hold log: $(tail -c 300 "$W/h/$id/log1" | tr '\n' ' ')"
  measure "$id: host OOM lines: $(dmesg 2>/dev/null | grep -iE 'oom|killed process' | tail -3 | tr '\n' ' ')"
  grep -E 'staging|stage|memory' "$W/containerd.log" | grep -i "$id" | sed 's/.*msg="//; s/" namespace.*//' | tail -5 | while read -r l; do measure "$id: shim: $l"; done
  if [[ $id == over ]]; then
    [[ $rc == 0 && $(status_of "$id") == RUNNING && $(cat "$cg/memory.max") == $((LIMIT_GIB << 30)) ]] &&
      grep -q "memory limits lifted" "$W/containerd.log" && grep -q "memory limits put back" "$W/containerd.log" &&
      result PASS lift-runsc "$gib GiB under a $LIMIT_GIB GiB sandbox: checkpointed, running, limit read back" ||
      result FAIL lift-runsc "rc $rc, status $(status_of "$id"), memory.max $(cat "$cg/memory.max" 2>/dev/null)"
    restore_case "$id"
    return
  fi
  TMO=60 CTR task kill -a -s KILL "$id" >/dev/null 2>&1
  for _ in $(seq 100); do [[ $(status_of "$id") == STOPPED || -z $(status_of "$id") ]] && break; sleep 0.2; done
  CTR task rm -f "$id" >/dev/null 2>&1; CTR c rm "$id" >/dev/null 2>&1
}

stop_case() {
  TMO=60 CTR task kill -a -s KILL "$1" >/dev/null 2>&1
  for _ in $(seq 100); do [[ $(status_of "$1") == STOPPED || -z $(status_of "$1") ]] && break; sleep 0.2; done
  CTR task rm -f "$1" >/dev/null 2>&1
}
# The checkpoint of ID (its image ${ID}ref) restored into a sandbox with the same limit.
restore_case() {
  local id=$1 t0 cg
  stop_case "$id"; CTR c rm "$id" >/dev/null 2>&1
  t0=$(now)
  if CTR c restore --live --rw "$id" "${id}ref" </dev/null >"$W/$id.rs" 2>&1; then
    cg=$(cg_of "$(task_pid "$id")")
    measure "$id: restore in $(dt "$t0" "$(now)") s; status $(status_of "$id"); memory.max $(cat "$cg/memory.max"); peak $(( $(cat "$cg/memory.peak" 2>/dev/null || echo 0) >> 20 )) MiB; events $(tr '\n' ' ' <"$cg/memory.events")"
    # SIGTERM to gpu_hold alone (its pid in the sandbox is in ready1): a kill --all takes the init
    # too under runsc (measured: exit 143), and the sandbox with it, before gpu_hold has checked.
    TMO=60 CTR task exec --exec-id term "$id" sh -c 'kill -TERM "$(cat /out/ready1)"' >/dev/null 2>&1
    for _ in $(seq 300); do [[ $(status_of "$id") == STOPPED ]] && break; sleep 0.2; done
    # The init (sh) then exits with gpu_hold's status from its wait: 0 only when the whole buffer
    # read back as written. ctr's task rm warns of any other exit code.
    local data rm_out
    data=$(grep -o 'data [A-Z]*' "$W/h/$id/log1" | tail -1)
    rm_out=$(CTR task rm "$id" 2>&1)
    measure "$id: after SIGTERM: status $(status_of "$id"); log1: ${data:-no data line}; task rm: ${rm_out:-no warning}"
    if [[ $data == "data OK" ]] || [[ -z $data && -z $rm_out ]]; then
      result PASS restore-runsc "${data:-exit 0: the check of the whole buffer by gpu_hold passed}; limit lifted and put back"
    else
      result FAIL restore-runsc "${data:-no data line}; task rm: $rm_out"
    fi
  else
    result FAIL restore-runsc "$(tail -c 600 "$W/$id.rs" | tr '\n' ' ')"
    measure "$id: host OOM lines: $(dmesg 2>/dev/null | grep -iE 'killed process' | tail -2 | tr '\n' ' ')"
  fi
  stop_case "$id"; CTR c rm "$id" >/dev/null 2>&1
}

((HOLD_SMALL > 0)) && run_case fits "$HOLD_SMALL"
run_case over "$HOLD_BIG"
