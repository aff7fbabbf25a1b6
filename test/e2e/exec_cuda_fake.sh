#!/usr/bin/env bash
# Issue 16, item 4, without a GPU (test/fixtures/fake_cuda stands in for the driver): runc restores
# the init's process tree, so a CUDA process started with `ctr task exec` beside a CUDA init is not
# brought back by a restore.
#   refuse   the checkpoint is refused before any toggle, naming the exec'd process; both keep working
#   allowed  with checkpoint.allow_lost_cuda_processes the checkpoint goes on and its report names the
#            process; the restore brings back the init's CUDA process and succeeds without the other
#   missing  a restore whose recorded CUDA process is not there in the checkpointed state (here: the
#            driver reports it running) fails instead of reporting success
# Usage: exec_cuda_fake.sh [1.6|1.7|2|2.3]
set -euo pipefail
source "$(dirname "$0")/lib/shim-env.sh"
source "$(dirname "$0")/lib/fake-cuda.sh"
nv_fake_cuda
shim_extra() { echo "$NV_FAKE_CHECKPOINT$1"; }
NV_SHIM_EXTRA=$(shim_extra "")
export NV_SHIM_EXTRA
nv_start_with_shim --containerd "${1:-1.6}"

MOUNTS=("${NV_FAKE_MOUNTS[@]}")
APP=(/fake/fake_cuda_app --dir /fakecuda --device /dev/fakegpu0 --map)
ready_count() { ls "$FAKE/cuda" | grep -c '\.ready$' || true; }
ready_at_least() { (($(ready_count) >= $1)); }
task_stopped() { [[ $(nv_task_status "$1") == STOPPED ]]; }
init_pid() { nv_ctr task ls | awk -v id="$1" '$1==id{print $2}'; }
other_pid() { nv_ctr task ps "$1" | awk 'NR>1{print $1}' | grep -vx "$(init_pid "$1")"; }
# start ID: a CUDA init and a CUDA process exec'd beside it.
start() {
  rm -f "$FAKE"/cuda/*
  nv_ctr run -d --runtime $NV_RT "${MOUNTS[@]}" "$NV_IMAGE" "$1" "${APP[@]}"
  nv_wait_for -t 10 ready_at_least 1 || nv_fail "fake CUDA init did not start"
  nv_ctr task exec -d --exec-id cuda-exec "$1" "${APP[@]}"
  nv_wait_for -t 10 ready_at_least 2 || nv_fail "exec'd fake CUDA app did not start: $(ls "$FAKE/cuda")"
}
stop_and_remove() {
  nv_ctr task kill -a -s KILL "$1"
  nv_wait_for -t 10 task_stopped "$1" || nv_fail "$1 did not stop"
  nv_ctr task rm "$1" >/dev/null
  nv_ctr c rm "$1"
}

nv_log "case refuse: a CUDA process exec'd beside a CUDA init"
start ex1
exec_host=$(other_pid ex1)
set +e
err=$(nv_ctr c checkpoint --task --rw ex1 ex1ref 2>&1)
rc=$?
set -e
echo "$err" >&2
((rc != 0)) || nv_fail "the checkpoint of a container with an exec'd CUDA process succeeded"
nv_assert_contains "$err" "outside the init's process tree" "the refusal says why"
nv_assert_contains "$err" "pid $exec_host (fake_cuda_app) runs beside the init" "the refusal names the exec'd process"
nv_assert_contains "$err" "allow_lost_cuda_processes" "the refusal names the override"
diag=$(nv_bundle ex1)/checkpoint-diagnostic.json
jq -e --argjson p "$exec_host" '.verdict == "refused" and any(.not_restored[]; .pid == $p and .cuda)' "$diag" >/dev/null ||
  nv_fail "diagnostic JSON does not name pid $exec_host: $(cat "$diag")"
if grep -qE ' (lock|checkpoint) ' "$FAKE/cuda/calls.log" 2>/dev/null; then
  nv_fail "processes were toggled before the refusal: $(cat "$FAKE/cuda/calls.log")"
fi
for c in $(nv_fake_cuda_pids); do nv_fake_advancing "$c" || nv_fail "process $c stopped working after the refusal"; done
stop_and_remove ex1

nv_log "case allowed: checkpoint.allow_lost_cuda_processes"
NV_SHIM_EXTRA=$(shim_extra $'\n  allow_lost_cuda_processes: true') nv_shim_config_write "$NVPROXY_SHIM_CONFIG"
start ex2
exec_host=$(other_pid ex2)
init_cpid=1  # the init is pid 1 in the container's pid namespace (the fake driver's files go by it)
[[ -e $FAKE/cuda/$init_cpid.cuda ]] || nv_fail "no fake CUDA state for the init: $(ls "$FAKE/cuda")"
nv_ctr c checkpoint --task --rw ex2 ex2ref
diag=$(nv_bundle ex2)/checkpoint-diagnostic.json
jq -e --argjson p "$exec_host" '.verdict == "done" and (.toggled | length) == 2 and any(.not_restored[]; .pid == $p and .cuda)' \
  "$diag" >/dev/null || nv_fail "the report does not name the lost process $exec_host: $(cat "$diag")"
stop_and_remove ex2
# The image holds the init CUDA-checkpointed (the fake driver's state lives outside the image).
printf checkpointed >"$FAKE/cuda/$init_cpid.state"
touch "$FAKE/cuda/$init_cpid.closed"
: >"$FAKE/cuda/calls.log"
nv_ctr c restore --live --rw ex2 ex2ref </dev/null
nv_assert_eq RUNNING "$(nv_task_status ex2)" "restored container state"
nv_assert_eq 1 "$(awk '$2=="restore" && $5==0' "$FAKE/cuda/calls.log" | wc -l)" "CUDA restores after the runtime restore"
nv_assert_eq running "$(cat "$FAKE/cuda/$init_cpid.state")" "the init's CUDA state after restore"
nv_fake_advancing "$init_cpid" || nv_fail "the restored init does not work"
nv_assert_eq 1 "$(nv_ctr task ps ex2 | awk 'NR>1' | wc -l)" "processes after the restore (the exec'd one is not in the image)"
nv_ctr task kill -a -s KILL ex2
nv_wait_for -t 10 task_stopped ex2 || nv_fail "ex2 did not stop"
nv_ctr task rm ex2 >/dev/null
nv_ctr c rm ex2

nv_log "case missing: the recorded CUDA process is not there checkpointed after the restore"
# Same image; this time the driver reports the init running after the runtime's restore, as if its
# CUDA state had not been in the image.
echo running >"$FAKE/cuda/$init_cpid.state"
rm -f "$FAKE/cuda/$init_cpid.closed"
set +e
err=$(nv_ctr c restore --live --rw ex2 ex2ref </dev/null 2>&1)
rc=$?
set -e
echo "$err" >&2
((rc != 0)) || nv_fail "the restore reported success while the recorded CUDA process is missing"
nv_assert_contains "$err" "the checkpoint recorded 1 process with CUDA state, 1 of them is missing" "the restore says why"
nv_assert_contains "$err" "container pids $init_cpid (fake_cuda_app)" "the restore names the missing process"
# The task did not start, so nothing of it may keep running: the restored container is removed.
nv_assert_contains "$err" "removed the restored container" "the restore says what became of the container"
in_cgroup() { grep -l "/$NV_NAMESPACE/ex2\$" /proc/[0-9]*/cgroup 2>/dev/null | grep -v self || true; }
no_process_left() { [[ -z $(in_cgroup) ]]; }
nv_wait_for -t 10 no_process_left || nv_fail "processes of the failed restore are still running: $(in_cgroup)"
echo "PASS exec_cuda_fake ($NV_RUNTIME, containerd $NV_CONTAINERD_VERSION)"
