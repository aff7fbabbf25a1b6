#!/usr/bin/env bash
# Issue 5 acceptance on a machine without a GPU: the GPU-aware checkpoint through containerd, our
# shim, runc and CRIU, with the test fixtures standing in for the driver (fake libcuda and
# libnvidia-ml loaded by the shim, a static fake CUDA app in the container holding a fake device
# that matches a configured glob). The same orchestrator code runs against the real driver in
# test/gpu/. Cases:
#   refuse   a child holds the device without CUDA: checkpoint fails naming its pid and the path,
#            checkpoint-diagnostic.json is in the bundle, the container keeps running and working
#   cuda     a CUDA parent and child: all locked before any checkpoint, CRIU dump, CUDA resumed;
#            then restore from the image brings CUDA back in both, and their work continues
#   mixed    CUDA processes plus a non-CUDA holder: refused before any toggle, all keep running
# Usage: checkpoint_gpu_fake.sh [1.6|1.7]
set -euo pipefail
source "$(dirname "$0")/lib/shim-env.sh"
source "$(dirname "$0")/lib/fake-cuda.sh"
nv_fake_cuda
NV_SHIM_EXTRA=$NV_FAKE_CHECKPOINT
export NV_SHIM_EXTRA
nv_start_with_shim --containerd "${1:-1.6}"

MOUNTS=("${NV_FAKE_MOUNTS[@]}")
bundle() { echo "$NV_STATE_DIR/io.containerd.runtime.v2.task/$NV_NAMESPACE/$1"; }

nv_log "case refuse: a child holds the device without CUDA"
nv_ctr run -d --runtime $NV_RT "${MOUNTS[@]}" "$NV_IMAGE" refuse sh -c 'sleep 1000 3</dev/fakegpu0 & exec sleep 1000'
init=$(nv_ctr task ls | awk '$1=="refuse"{print $2}')
nv_wait_for -t 10 bash -c "[[ \$(ctr -a $NV_SOCK -n $NV_NAMESPACE task ps refuse | wc -l) -ge 3 ]]"
child=$(nv_ctr task ps refuse | awk 'NR>1{print $1}' | grep -vx "$init")
set +e
err=$(nv_ctr task checkpoint refuse 2>&1)
rc=$?
set -e
((rc != 0)) || nv_fail "checkpoint of a container with a device holder succeeded"
echo "$err" >&2
nv_assert_contains "$err" "$child" "error names the holder's pid"
nv_assert_contains "$err" "/dev/fakegpu0" "error names the device path"
nv_assert_contains "$err" "no CUDA" "error says the holder is not a CUDA process"
diag=$(bundle refuse)/checkpoint-diagnostic.json
[[ -s $diag ]] || nv_fail "no $diag"
jq -e --argjson p "$child" '.processes[] | select(.pid == $p)' "$diag" >/dev/null || nv_fail "diagnostic JSON lacks pid $child: $(cat "$diag")"
nv_assert_eq RUNNING "$(nv_task_status refuse)" "container state after the refused checkpoint"
nv_assert_eq ok "$(nv_ctr task exec --exec-id after refuse echo ok)" "container works after the refusal"
nv_ctr task kill -s KILL refuse

nv_log "case cuda: CUDA parent + child, checkpoint, then restore"
nv_ctr run -d --runtime $NV_RT "${MOUNTS[@]}" "$NV_IMAGE" cuda /fake/fake_cuda_app --dir /fakecuda --device /dev/fakegpu0 --map --children 1
nv_wait_for -t 10 bash -c "[[ \$(ls $FAKE/cuda | grep -c '\.ready$') -ge 2 ]]" || nv_fail "fake CUDA app did not start: $(ls "$FAKE/cuda")"
mapfile -t cp < <(nv_fake_cuda_pids)
nv_assert_eq 2 "${#cp[@]}" "CUDA processes in the container"
# Read before the checkpoint: the image is taken later, so the restored count is at least this;
# a loop that started afresh would be far below it.
nv_wait_for -t 30 nv_fake_counted_past "${cp[0]}" 300 || nv_fail "process ${cp[0]} does not count: $(nv_fake_counter "${cp[0]}")"
before=$(nv_fake_counter "${cp[0]}")
nv_ctr c checkpoint --task --rw cuda cudaref
log=$FAKE/cuda/calls.log
# Every lock finished before the first checkpoint started (DESIGN: lock all, then checkpoint all).
last_lock_end=$(awk '$2=="lock"{print $4}' "$log" | sort -n | tail -1)
first_ckpt_start=$(awk '$2=="checkpoint"{print $3}' "$log" | sort -n | head -1)
nv_assert_eq 2 "$(awk '$2=="lock" && $5==0' "$log" | wc -l)" "successful locks"
nv_assert_eq 2 "$(awk '$2=="checkpoint" && $5==0' "$log" | wc -l)" "successful checkpoints"
((last_lock_end <= first_ckpt_start)) || nv_fail "a checkpoint started before all locks ended: $(cat "$log")"
for c in "${cp[@]}"; do
  nv_assert_eq running "$(nv_fake_state "$c")" "CUDA state of $c after a leave-running checkpoint"
  nv_fake_advancing "$c" || nv_fail "process $c does not work after the checkpoint"
done
nv_assert_eq RUNNING "$(nv_task_status cuda)" "container state after checkpoint"
# The driver was loaded by nvproxy-cuda-helper, never by the (static) shim, and the helper is gone.
shim=$(awk '/^PPid:/{print $2}' "/proc/$(nv_ctr task ls | awk '$1=="cuda"{print $2}')/status")
[[ $(readlink "/proc/$shim/exe") == */containerd-shim-nvproxy-v1 ]] || nv_fail "pid $shim is not our shim"
if grep -q 'libcuda\|libnvidia-ml' "/proc/$shim/maps"; then nv_fail "the shim maps a driver library itself"; fi
helpers=$(nv_cuda_helper_pids)
[[ -z $helpers ]] || nv_fail "nvproxy-cuda-helper still runs after the checkpoint: $helpers"
nv_ctr task kill -s KILL cuda
nv_wait_for -t 10 bash -c "[[ \$(ctr -a $NV_SOCK -n $NV_NAMESPACE task ls | awk '\$1==\"cuda\"{print \$3}') == STOPPED ]]"
nv_ctr task rm cuda >/dev/null
nv_ctr c rm cuda
# The checkpoint image carries the processes in the checkpointed CUDA state: the shim must bring
# them back after CRIU restores them (new host pids, same container pids). The state file is written
# as the fake driver writes it (no newline): CRIU's image may hold it open (the app reads it every
# millisecond) and refuses to restore a file whose size changed ("has bad size 13 (expect 12)").
nv_fake_as_checkpointed "${cp[@]}"
: >"$log"
nv_ctr c restore --live --rw cuda cudaref </dev/null
nv_assert_eq RUNNING "$(nv_task_status cuda)" "restored container state"
nv_fake_resumed "restore" "${cp[@]}"
after=$(nv_fake_counter "${cp[0]}")
((after >= before)) || nv_fail "work did not continue from the checkpoint: before=$before after=$after"
nv_ctr task kill -s KILL cuda
nv_wait_for -t 10 bash -c "[[ \$(ctr -a $NV_SOCK -n $NV_NAMESPACE task ls | awk '\$1==\"cuda\"{print \$3}') == STOPPED ]]"
nv_ctr task rm cuda >/dev/null

nv_log "case mixed: CUDA processes and a non-CUDA holder"
rm -f "$FAKE"/cuda/*
nv_ctr run -d --runtime $NV_RT "${MOUNTS[@]}" "$NV_IMAGE" mixed /fake/fake_cuda_app --dir /fakecuda --device /dev/fakegpu0 --map --fork-holder
# The app marks itself ready after its holder child has: both marks, and the holder holds the device.
nv_wait_for -t 10 bash -c "[[ \$(ls $FAKE/cuda | grep -c '\.ready$') -ge 2 ]]"
set +e
err=$(nv_ctr task checkpoint mixed 2>&1)
rc=$?
set -e
((rc != 0)) || nv_fail "checkpoint with a non-CUDA holder succeeded"
echo "$err" >&2
nv_assert_contains "$err" "/dev/fakegpu0" "error names the device"
if grep -qE ' (lock|checkpoint) ' "$FAKE/cuda/calls.log" 2>/dev/null; then
  nv_fail "processes were toggled although the refusal was certain: $(cat "$FAKE/cuda/calls.log")"
fi
for c in $(nv_fake_cuda_pids); do
  nv_assert_eq running "$(nv_fake_state "$c")" "CUDA state of $c after the refusal"
  nv_fake_advancing "$c" || nv_fail "process $c stopped working after the refusal"
done
nv_assert_eq RUNNING "$(nv_task_status mixed)" "container state after the refusal"
nv_ctr task kill -s KILL mixed
nv_wait_for -t 10 bash -c "[[ \$(ctr -a $NV_SOCK -n $NV_NAMESPACE task ls | awk '\$1==\"mixed\"{print \$3}') == STOPPED ]]"

nv_log "case workers: DataLoader-shaped children forked after the device was opened"
rm -f "$FAKE"/cuda/*
nv_ctr run -d --runtime $NV_RT "${MOUNTS[@]}" "$NV_IMAGE" workers /fake/fake_cuda_app --dir /fakecuda --device /dev/fakegpu0 --map --fork-workers 2
nv_wait_for -t 10 bash -c "[[ \$(ls $FAKE/cuda | grep -c '\.ready$') -ge 3 ]]" || nv_fail "fake CUDA app did not start: $(ls "$FAKE/cuda")"
app=$(nv_ctr task ls | awk '$1=="workers"{print $2}')
set +e
err=$(nv_ctr task checkpoint workers 2>&1)
rc=$?
set -e
((rc != 0)) || nv_fail "checkpoint with forked device holders succeeded"
echo "$err" >&2
nv_assert_contains "$err" "refused: 2 processes hold GPU devices" "the refusal counts the workers"
nv_assert_contains "$err" "was forked from CUDA process $app and holds its GPU device files" "the hint names the parent"
bundle=$NV_STATE_DIR/io.containerd.runtime.v2.task/$NV_NAMESPACE/workers
nv_assert_eq "$app $app" "$(jq -r '[.processes[].inherited.from] | map(tostring) | join(" ")' "$bundle/checkpoint-diagnostic.json")" \
  "checkpoint-diagnostic.json: each worker inherited from the app"
if grep -qE ' (lock|checkpoint) ' "$FAKE/cuda/calls.log" 2>/dev/null; then nv_fail "processes were toggled: $(cat "$FAKE/cuda/calls.log")"; fi
nv_assert_eq RUNNING "$(nv_task_status workers)" "container state after the refusal"
echo "PASS checkpoint_gpu_fake ($NV_RUNTIME, containerd $NV_CONTAINERD_VERSION)"
