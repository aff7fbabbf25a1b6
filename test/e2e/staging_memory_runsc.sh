#!/usr/bin/env bash
# Issue 45 under runsc: in a gVisor sandbox the driver stages every CUDA process's device memory
# in the sentry's memory (nvproxy's clients' memory is its memory file), charged to the sandbox's
# memory cgroup, and NVML on the host sees the sentry's host pid holding the sandbox's device memory
# (measured on an H100: test/gpu/measure-runsc-staging.sh). The fake driver inside the sandbox
# stages with --stage-mib; the host's fake NVML (the shim's nvproxy-cuda-helper) is told the
# sentry's device memory. runsc applies the container's cgroup (no --ignore-cgroups here). Cases:
#   lift     a sandbox limited below what it will stage: checkpointed (task kept running) with its
#            cgroup's limit lifted for the staging and put back after, the app counting on; then
#            restored (runsc brings the staged bytes back in the new sentry's memory: the restore
#            lifts the sandbox's limit through its spec too), state continued
#   refuse   checkpoint.staging_memory: refuse: refused before any toggle with the figures, the
#            sandbox named, running
#   unknown  NVML does not know the sentry: the staging is not billed (a warning), the kernel kills
#            the sandbox mid-checkpoint, the error names the OOM kill, the shim reports the exit
#   held     (issue 60) the app also holds $HOLD_MIB MiB of written memory of its own: the restore
#            needs that besides the staging (the checkpoint recorded the sandbox's charge), once with
#            the limit on the container and once on its "pod" cgroup only; restored with its data,
#            the limits read back, oom_kill unchanged. Then the same image with its record's figures
#            taken out (an image of an older shim: nothing billed): the kernel kills the sandbox
#            during the restore and the error says so first, with the cgroup and what was billed
# Usage: staging_memory_runsc.sh [1.6|1.7|2.3]   (77: the current runsc is not unpacked here)
set -euo pipefail
source "$(dirname "$0")/lib/shim-env.sh"
[[ -r /opt/nvproxy-deps/shared/env.sh ]] && source /opt/nvproxy-deps/shared/env.sh
RUNSC=${NVPROXY_SHARED_RUNSC_BIN_DIR:-}/runsc
[[ -x $RUNSC ]] || nv_skip "current runsc not unpacked (scripts/fetch-shared-deps.sh)"
export NV_RUNTIME=runsc NV_RUNSC_BIN=$RUNSC NV_RUNSC_CGROUPS=1
source "$(dirname "$0")/lib/fake-cuda.sh"
nv_fake_cuda_sandbox
# The host's side: the shim's helper loads the fake NVML, which reads HOSTNVML/nvml.
HOSTNVML=$FAKE/host
mkdir -p "$HOSTNVML"
export NVPROXY_FAKE_CUDA_DIR=$HOSTNVML
MEMINFO=$FAKE/meminfo
STORE=$(mktemp -d /tmp/nvproxy-staging-store.XXXXXX)
nv_defer rm -rf "$STORE"
grep MemAvailable /proc/meminfo >"$MEMINFO"
NV_SHIM_EXTRA="$NV_FAKE_SANDBOX_CONFIG
  libcuda: $FIX/libcuda.so
  libnvml: $FIX/libnvidia-ml.so
  staging_margin_mib: 64
  host_meminfo: $MEMINFO
  staging_account: $FAKE/staging.json
  image_store: $STORE"
export NV_SHIM_EXTRA
# The margin covers the sentry's own memory and the page cache of reading the image during
# runsc's restore (the sandbox peaked at 29 MiB over the staged bytes here).
nv_start_with_shim --containerd "${1:-1.7}"

if [[ -e /sys/fs/cgroup/cgroup.controllers ]]; then
  CG_ROOT=/sys/fs/cgroup LIMIT_FILE=memory.max
else
  CG_ROOT=/sys/fs/cgroup/memory LIMIT_FILE=memory.limit_in_bytes
fi
STAGE_MIB=256
LIMIT=$((192 << 20))
MOUNTS=(--mount "type=bind,src=$FAKE/cuda,dst=/fakecuda,options=rbind:rw"
  --mount "type=bind,src=$FAKE/bin,dst=/fake,options=rbind:ro")
GPU=(--env NVIDIA_VISIBLE_DEVICES=0 --env NVPROXY_FAKE_CUDA_DIR=/fakecuda)
ctr_t() { timeout "${CTR_DEADLINE:-90}" ctr -a "$NV_SOCK" -n "$NV_NAMESPACE" "$@"; }
sandbox_pid() { ctr_t task ls | awk -v i="$1" '$1==i{print $2}'; }
# The memory cgroup runsc put the sandbox in (the sentry's), relative to the controller's root.
sandbox_cgroup() { awk -F: '$2 ~ /(^|,)memory(,|$)/ || $1 == "0" {print $3; exit}' "/proc/$(sandbox_pid "$1")/cgroup"; }
start() {  # NAME
  ctr_t run -d --runtime $NV_RT --memory-limit $LIMIT "${GPU[@]}" "${MOUNTS[@]}" "$NV_IMAGE" "$1" \
    /fake/fake_cuda_app --dir /fakecuda --device /dev/fakegpu0 --stage-mib $STAGE_MIB
  nv_wait_for -t 30 bash -c "ls $FAKE/cuda | grep -q '\.ready$'" || nv_fail "$1 did not start"
}
# The fake NVML: the sentry holds STAGE_MIB of device memory (the sandbox's, as the host sees it).
tell_nvml() { echo "$(sandbox_pid "$1") 0 $STAGE_MIB" >"$HOSTNVML/nvml"; }
stop() {
  ctr_t task kill -s KILL "$1" 2>/dev/null || true
  nv_wait_for -t 20 nv_task_stopped "$1" || true
  ctr_t task rm "$1" >/dev/null 2>&1 || true
  ctr_t c rm "$1" 2>/dev/null || true
  rm -f "$FAKE"/cuda/* "$HOSTNVML/nvml"
}

nv_log "case lift: a sandbox limited to $((LIMIT >> 20)) MiB staging $STAGE_MIB MiB"
start lift
cg=$(sandbox_cgroup lift)
[[ -n $cg && $cg != / ]] || nv_fail "runsc put the sandbox in no memory cgroup of its own ($cg)"
nv_assert_eq "$LIMIT" "$(cat "$CG_ROOT$cg/$LIMIT_FILE")" "the sandbox's limit as runsc set it"
pid=$(nv_fake_cuda_pids | head -1)
tell_nvml lift
nv_wait_for -t 30 nv_fake_counted_past "$pid" 50 || nv_fail "the app does not count"
pre=$(nv_fake_counter "$pid")
ctr_t c checkpoint --task --rw lift liftref
nv_assert_eq RUNNING "$(nv_task_status lift)" "lift after its checkpoint"
nv_fake_advancing "$pid" 10 || nv_fail "the app does not run on after the checkpoint"
nv_assert_eq "$LIMIT" "$(cat "$CG_ROOT$cg/$LIMIT_FILE")" "the sandbox's limit after the checkpoint"
grep -F 'memory limits lifted while device memory is staged' "$NV_DIR/containerd.log" | grep -qF "$cg/$LIMIT_FILE" \
  || nv_fail "the log does not say the sandbox's limit was lifted"
grep -qF 'memory limits put back after' "$NV_DIR/containerd.log" || nv_fail "the log does not say the limit was put back"
[[ ! -e $(nv_bundle lift)/nvproxy-lifted-limits.json ]] || nv_fail "the lift's record is left after the put-back"
nv_log "restore of lift: runsc brings the staged bytes back in the new sentry's memory, with the same limit"
ctr_t task kill -s KILL lift
nv_wait_for -t 20 nv_task_stopped lift || nv_fail "lift did not stop"
ctr_t task rm lift >/dev/null
ctr_t c rm lift
# The image holds the process CUDA-checkpointed: the fake driver's files say so again.
printf checkpointed >"$FAKE/cuda/$pid.state"
touch "$FAKE/cuda/$pid.closed"
rm -f "$FAKE/cuda/$pid.counter"
ctr_t c restore --live --rw lift liftref </dev/null
nv_assert_eq RUNNING "$(nv_task_status lift)" "lift after its restore"
nv_assert_eq running "$(nv_fake_state "$pid")" "the restored app's CUDA state"
nv_fake_advancing "$pid" 10 || nv_fail "the restored app does not count"
((pre <= $(nv_fake_counter "$pid"))) || nv_fail "state did not continue: $pre before, $(nv_fake_counter "$pid") after"
cg=$(sandbox_cgroup lift)
nv_assert_eq "$LIMIT" "$(cat "$CG_ROOT$cg/$LIMIT_FILE")" "the restored sandbox's limit"
grep -F 'restore of \"lift\": memory limits lifted' "$NV_DIR/containerd.log" | grep -qF "$cg/$LIMIT_FILE" \
  || nv_fail "the restore did not lift the sandbox's limit"
stop lift

nv_log "case refuse: checkpoint.staging_memory refuse"
nv_set_checkpoint_key staging_memory refuse
start refuse
nv_unset_checkpoint_key staging_memory
pid=$(nv_fake_cuda_pids | head -1)
tell_nvml refuse
set +e
err=$(ctr_t c checkpoint --task refuse refuseref 2>&1)
rc=$?
set -e
echo "$err" >&2
((rc != 0)) || nv_fail "a checkpoint staging $STAGE_MIB MiB under a $((LIMIT >> 20)) MiB limit was not refused"
nv_assert_contains "$err" "would cross the container's memory limit" "the refusal's reason"
nv_assert_contains "$err" "sandbox's memory" "the refusal names the sandbox's memory"
nv_assert_contains "$err" "nothing was toggled" "nothing toggled"
nv_assert_eq running "$(nv_fake_state "$pid")" "the app's CUDA state after the refusal"
nv_assert_eq RUNNING "$(nv_task_status refuse)" "refuse after the refusal"
nv_fake_advancing "$pid" 10 || nv_fail "the app does not run on after the refusal"
stop refuse

nv_log "case unknown: NVML does not know the sentry: not billed, the kernel kills the sandbox, the error says so"
start unknown
pid=$(nv_fake_cuda_pids | head -1)
nv_wait_for -t 30 nv_fake_counted_past "$pid" 20 || nv_fail "the app does not count"
set +e
err=$(ctr_t c checkpoint --task --rw unknown unknownref 2>&1)
rc=$?
set -e
echo "$err" >&2
((rc != 0)) || nv_fail "a sandbox staging $STAGE_MIB MiB under a $((LIMIT >> 20)) MiB limit checkpointed unbilled"
grep -F 'checkpoint unknown' "$NV_DIR/containerd.log" | grep -qF "is not billed" \
  || nv_fail "the checkpoint does not say the staging is not billed"
nv_assert_contains "$err" "OOM-killed" "the error names the kernel's OOM kill"
nv_wait_for -t 20 nv_task_stopped unknown || nv_fail "the killed sandbox's task is not reported stopped (the shim: $(nv_task_status unknown))"
stop unknown
HOLD_MIB=96
POD=/nvtest-sbxpod-$$
mkdir -p "$CG_ROOT$POD"
nv_defer rmdir "$CG_ROOT$POD"
oom_kills() {  # CGROUP: the kernel's count of OOM kills there (v2 memory.events, v1 memory.oom_control)
  if [[ -e $CG_ROOT$1/memory.events ]]; then awk '$1=="oom_kill"{print $2}' "$CG_ROOT$1/memory.events"
  else awk '$1=="oom_kill"{print $2}' "$CG_ROOT$1/memory.oom_control"; fi
}
# held NAME WHERE: WHERE is "container" (its own limit) or "pod" (the limit on its parent cgroup only).
held() {
  local name=$1 where=$2 limited pid pre cg entry err rc
  local args=(--memory-limit $LIMIT)
  if [[ $where == pod ]]; then
    echo $LIMIT >"$CG_ROOT$POD/$LIMIT_FILE"
    args=(--cgroup "$POD/$name")
  fi
  nv_log "case held ($where): the app holds $HOLD_MIB MiB of its own and stages $STAGE_MIB MiB under a $((LIMIT >> 20)) MiB limit"
  ctr_t run -d --runtime $NV_RT "${args[@]}" "${GPU[@]}" "${MOUNTS[@]}" "$NV_IMAGE" "$name" \
    /fake/fake_cuda_app --dir /fakecuda --device /dev/fakegpu0 --stage-mib $STAGE_MIB --hold-mib $HOLD_MIB
  nv_wait_for -t 30 bash -c "ls $FAKE/cuda | grep -q '\.ready$'" || nv_fail "$name did not start"
  cg=$(sandbox_cgroup "$name")
  if [[ $where == pod ]]; then limited=$POD; else limited=$cg; fi
  [[ $cg == "$POD"/* || $where != pod ]] || nv_fail "runsc did not put the sandbox below the pod: $cg"
  pid=$(nv_fake_cuda_pids | head -1)
  tell_nvml "$name"
  nv_wait_for -t 30 nv_fake_counted_past "$pid" 50 || nv_fail "the app does not count"
  pre=$(nv_fake_counter "$pid")
  ctr_t c checkpoint --task --rw "$name" "${name}ref"
  entry=$(find "$STORE/$NV_NAMESPACE/$name" -mindepth 1 -maxdepth 1 -type d | head -1)
  jq -e --argjson s $((STAGE_MIB << 20)) '.sandbox_memory_bytes > $s' "$entry/nvproxy-cuda.json" >/dev/null ||
    nv_fail "the record has no sandbox charge above the staging: $(cat "$entry/nvproxy-cuda.json")"
  ctr_t task kill -s KILL "$name"
  nv_wait_for -t 20 nv_task_stopped "$name" || nv_fail "$name did not stop"
  ctr_t task rm "$name" >/dev/null
  ctr_t c rm "$name"
  as_checkpointed() {
    printf checkpointed >"$FAKE/cuda/$pid.state"
    touch "$FAKE/cuda/$pid.closed"
    rm -f "$FAKE/cuda/$pid.counter"
  }
  as_checkpointed
  local kills_before
  kills_before=$(oom_kills "$limited" 2>/dev/null || echo 0)
  ctr_t c restore --live --rw "$name" "${name}ref" </dev/null
  nv_assert_eq RUNNING "$(nv_task_status "$name")" "$name after its restore"
  nv_assert_eq running "$(nv_fake_state "$pid")" "the restored app's CUDA state"
  nv_fake_advancing "$pid" 10 || nv_fail "the restored app does not count"
  ((pre <= $(nv_fake_counter "$pid"))) || nv_fail "state did not continue: $pre before, $(nv_fake_counter "$pid") after"
  [[ $where == pod ]] || limited=$(sandbox_cgroup "$name")
  nv_assert_eq "$LIMIT" "$(cat "$CG_ROOT$limited/$LIMIT_FILE")" "the $where limit after the restore"
  if [[ $where == pod ]]; then nv_assert_eq "$kills_before" "$(oom_kills "$limited")" "OOM kills under the pod during the restore"; fi
  grep -F "restore of \\\"$name\\\": memory limits lifted" "$NV_DIR/containerd.log" | grep -qF "$limited/$LIMIT_FILE" ||
    nv_fail "the restore did not lift the $where limit"
  ctr_t task kill -s KILL "$name"
  nv_wait_for -t 20 nv_task_stopped "$name" || nv_fail "$name did not stop"
  ctr_t task rm "$name" >/dev/null
  ctr_t c rm "$name"

  nv_log "the same image with the record's sandbox figures taken out: unbilled, killed, and said so"
  as_checkpointed
  jq 'del(.sandbox_memory_bytes, .sandbox_device_bytes)' "$entry/nvproxy-cuda.json" >"$entry/r.json"
  mv "$entry/r.json" "$entry/nvproxy-cuda.json"
  set +e
  err=$(ctr_t c restore --live --rw "$name" "${name}ref" </dev/null 2>&1)
  rc=$?
  set -e
  echo "$err" >&2
  ((rc != 0)) || nv_fail "an unbilled restore of $((STAGE_MIB + HOLD_MIB)) MiB under a $((LIMIT >> 20)) MiB limit succeeded"
  # Named from the cgroup's count where it is left to read (v2: its parents count it too), else from
  # the host's with the cgroup named gone (v1: runsc's failed restore removed the sandbox's cgroup).
  nv_assert_contains "$err" "the sandbox was OOM-killed during its restore: the kernel OOM-killed" "the error names the kill first"
  local parent=/$NV_NAMESPACE
  [[ $where != pod ]] || parent=$POD
  nv_assert_contains "$err" "$CG_ROOT$parent" "the error names the sandbox's cgroup or its parent"
  nv_assert_contains "$err" "the restore was billed nothing" "the error says what was billed"
  stop "$name"
  [[ $where != pod ]] || echo max >"$CG_ROOT$POD/$LIMIT_FILE" 2>/dev/null || echo -1 >"$CG_ROOT$POD/$LIMIT_FILE"
}
held heldc container
held heldp pod
echo "PASS staging_memory_runsc (containerd $NV_CONTAINERD_VERSION)"
