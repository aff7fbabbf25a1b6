#!/usr/bin/env bash
# Issue 25 on a machine without a GPU: forked children that hold their CUDA parent's device files
# (PyTorch's DataLoader workers, inductor's compile workers, a fork pool) are checkpointed through
# containerd, our shim, runc and CRIU with the shim's CRIU plugin. The device is a real character
# device that CRIU cannot dump by itself (a misc device such as /dev/loop-control), so the dump
# fails without the plugin; the fake driver stands in for CUDA as in checkpoint_gpu_fake.sh. Cases:
#   release    CUDA parent + 2 forked workers: checkpoint (the image leaves the workers' device fds
#              out), kill, restore: CUDA back in the parent, the workers count on, their inherited
#              fds are /dev/null, no process holds the device but the parent's own reopened fd
#   off        checkpoint.release_inherited: false: the same container is refused, nothing toggled
#   forkcuda   a child forked after the device was opened that made a CUDA context of its own:
#              refused naming the parent and the shared fds, nothing toggled
# Usage: fork_release.sh [1.6|1.7|2]
set -euo pipefail
source "$(dirname "$0")/lib/shim-env.sh"
source "$(dirname "$0")/lib/fake-cuda.sh"
nv_fake_cuda

# A character device the container may open and CRIU cannot dump without a plugin (misc devices
# other than tun and autofs).
DEV=
for d in /dev/loop-control /dev/btrfs-control /dev/vga_arbiter /dev/cpu_dma_latency /dev/hwrng; do
  if [[ -c $d ]]; then DEV=$d; break; fi
done
[[ -n $DEV ]] || nv_fail "no misc character device to stand for the GPU on this machine"
config_extra() {
  NV_SHIM_EXTRA="checkpoint:
  libcuda: $FIX/libcuda.so
  libnvml: $FIX/libnvidia-ml.so
  lock_timeout_ms: 5000
  release_inherited: $1
  device_globs: [\"/dev/nvidia*\", \"$DEV\"]"
  export NV_SHIM_EXTRA
}
config_extra true
nv_start_with_shim --containerd "${1:-1.6}"

MOUNTS=(--device "$DEV"
  --mount "type=bind,src=$FAKE/cuda,dst=/fakecuda,options=rbind:rw"
  --mount "type=bind,src=$FAKE/bin,dst=/fake,options=rbind:ro")
bundle() { echo "$NV_STATE_DIR/io.containerd.runtime.v2.task/$NV_NAMESPACE/$1"; }
# The host pid of container pid $2 in container $1 (the last NSpid field is the container's).
host_pid() {
  local p
  for p in $(nv_ctr task ps "$1" | awk 'NR>1{print $1}'); do
    [[ $(awk '/^NSpid:/{print $NF}' "/proc/$p/status" 2>/dev/null) == "$2" ]] && { echo "$p"; return; }
  done
  return 1
}
# Host pids in container $1 holding $DEV.
holders_of_dev() {
  local p f
  for p in $(nv_ctr task ps "$1" | awk 'NR>1{print $1}'); do
    for f in /proc/$p/fd/*; do
      [[ $(readlink "$f" 2>/dev/null) == "$DEV" ]] && { echo "$p"; break; }
    done
  done
}
# start_app ID READY ARGS...: runs the fake app and waits for READY processes to be set up.
start_app() {
  rm -f "$FAKE"/cuda/*
  nv_ctr run -d --runtime $NV_RT "${MOUNTS[@]}" "$NV_IMAGE" "$1" /fake/fake_cuda_app --dir /fakecuda --device "$DEV" "${@:3}"
  nv_wait_for -t 20 bash -c "(( \$(ls $FAKE/cuda | grep -c '\.ready$') >= $2 ))" ||
    nv_fail "fake CUDA app $1 did not start: $(ls "$FAKE/cuda")"
}
expect_refusal() {
  local id=$1 err rc
  set +e
  err=$(nv_ctr task checkpoint "$id" 2>&1)
  rc=$?
  set -e
  echo "$err" >&2
  ((rc != 0)) || nv_fail "checkpoint of $id succeeded: it must be refused"
  REFUSAL=$err
}
stop_task() {
  nv_ctr task kill -s KILL "$1"
  nv_wait_for -t 20 bash -c "[[ \$(ctr -a $NV_SOCK -n $NV_NAMESPACE task ls | awk '\$1==\"$1\"{print \$3}') == STOPPED ]]" ||
    nv_fail "$1 did not stop"
  nv_ctr task rm "$1" >/dev/null
}

nv_log "case release: a CUDA parent and 2 workers forked after it opened $DEV"
start_app rel 3 --fork-workers 2
mapfile -t cp < <(nv_fake_cuda_pids)
nv_assert_eq 1 "${#cp[@]}" "CUDA processes (the parent only)"
parent=${cp[0]}
mapfile -t workers < <(sort -n "$FAKE/cuda/$parent.children")
nv_assert_eq 2 "${#workers[@]}" "forked workers"
declare -A wfd
for w in "${workers[@]}"; do
  wfd[$w]=$(cat "$FAKE/cuda/$w.fd")
  hp=$(host_pid rel "$w") || nv_fail "no host pid for worker $w"
  nv_assert_eq "$DEV" "$(readlink "/proc/$hp/fd/${wfd[$w]}")" "worker $w's inherited fd before the checkpoint"
done
nv_wait_for -t 30 nv_fake_counted_past "$parent" 300 || nv_fail "the parent does not count"
before=$(nv_fake_counter "$parent")
declare -A wbefore
for w in "${workers[@]}"; do wbefore[$w]=$(nv_fake_counter "$w"); done
nv_ctr c checkpoint --task --rw rel relref
diag=$(bundle rel)/checkpoint-diagnostic.json
jq -e '.verdict == "done"' "$diag" >/dev/null || nv_fail "the report is not done: $(cat "$diag")"
nv_assert_eq "$(printf '%s\n' "${workers[@]}" | sort -n | tr '\n' ' ')" \
  "$(jq -r '.released.processes[].pid' "$diag" | while read -r h; do awk '/^NSpid:/{print $NF}' "/proc/$h/status"; done | sort -n | tr '\n' ' ')" \
  "released processes (container pids) in the report"
nv_assert_eq 1 "$(awk '$2=="checkpoint" && $5==0 {print $1}' "$FAKE/cuda/calls.log" | sort -u | wc -l | tr -d ' ')" "processes CUDA-checkpointed"
nv_assert_eq RUNNING "$(nv_task_status rel)" "container after a leave-running checkpoint"
for w in "${workers[@]}"; do
  hp=$(host_pid rel "$w")
  nv_assert_eq "$DEV" "$(readlink "/proc/$hp/fd/${wfd[$w]}")" "worker $w keeps its device fd in the running container"
done
stop_task rel
nv_ctr c rm rel
printf checkpointed >"$FAKE/cuda/$parent.state"
touch "$FAKE/cuda/$parent.closed"
: >"$FAKE/cuda/calls.log"
nv_ctr c restore --live --rw rel relref </dev/null
nv_assert_eq RUNNING "$(nv_task_status rel)" "restored container"
nv_assert_eq running "$(cat "$FAKE/cuda/$parent.state")" "the parent's CUDA state after the restore"
nv_wait_for -t 10 nv_fake_counted_past "$parent" "$before" || nv_fail "the parent does not work on after the restore"
for w in "${workers[@]}"; do
  nv_wait_for -t 10 nv_fake_counted_past "$w" "${wbefore[$w]}" || nv_fail "worker $w does not work on after the restore: $(nv_fake_counter "$w")"
  hp=$(host_pid rel "$w") || nv_fail "worker $w is not in the restored container"
  nv_assert_eq /dev/null "$(readlink "/proc/$hp/fd/${wfd[$w]}")" "worker $w's released fd after the restore"
done
grep -qF 'rel\": 2 forked processes hold no GPU device' "$NV_DIR/containerd.log" ||
  nv_fail "the shim did not check the released processes after the restore"
hp_parent=$(host_pid rel "$parent")
nv_assert_eq "$hp_parent" "$(holders_of_dev rel | tr '\n' ' ' | sed 's/ $//')" "processes holding $DEV after the restore (the parent's own reopened fd)"
stop_task rel
nv_ctr c rm rel

nv_log "case off: checkpoint.release_inherited: false refuses the same container"
config_extra false
nv_shim_config_write "$NVPROXY_SHIM_CONFIG"
start_app off 3 --fork-workers 2
expect_refusal off
nv_assert_contains "$REFUSAL" "checkpoint.release_inherited is off" "the refusal says the release is off"
nv_assert_contains "$REFUSAL" "forked from CUDA process" "the refusal names the workers as forked"
if grep -qE ' (lock|checkpoint) ' "$FAKE/cuda/calls.log" 2>/dev/null; then nv_fail "CUDA was toggled before the refusal"; fi
nv_assert_eq RUNNING "$(nv_task_status off)" "container after the refusal"
stop_task off
nv_ctr c rm off
config_extra true
nv_shim_config_write "$NVPROXY_SHIM_CONFIG"

nv_log "case forkcuda: a forked child with a CUDA context of its own"
start_app forkcuda 2 --fork-cuda
mapfile -t cp < <(nv_fake_cuda_pids)
nv_assert_eq 2 "${#cp[@]}" "CUDA processes (parent and forked child)"
expect_refusal forkcuda
nv_assert_contains "$REFUSAL" "beside a CUDA context of its own" "the refusal names the forked CUDA child"
if grep -qE ' (lock|checkpoint) ' "$FAKE/cuda/calls.log" 2>/dev/null; then nv_fail "CUDA was toggled before the refusal"; fi
nv_assert_eq RUNNING "$(nv_task_status forkcuda)" "container after the refusal"
stop_task forkcuda
nv_ctr c rm forkcuda
echo "PASS fork_release (containerd $NV_CONTAINERD_VERSION)"
