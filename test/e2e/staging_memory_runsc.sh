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
grep MemAvailable /proc/meminfo >"$MEMINFO"
NV_SHIM_EXTRA="$NV_FAKE_SANDBOX_CONFIG
  libcuda: $FIX/libcuda.so
  libnvml: $FIX/libnvidia-ml.so
  staging_margin_mib: 64
  host_meminfo: $MEMINFO
  staging_account: $FAKE/staging.json"
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
echo "PASS staging_memory_runsc (containerd $NV_CONTAINERD_VERSION)"
