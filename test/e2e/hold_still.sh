#!/usr/bin/env bash
# Issue 33: a checkpoint never kills the workload. With the fake driver (test/fixtures/fake_cuda):
#   touch    a CUDA process with a second thread that dies (SIGSEGV) if it ever runs while the
#            process's CUDA state is checkpointed, as JAX's threads do: checkpointed (container kept
#            running) with checkpoint.hold_still, it is alive and works on; the report shows the hold
#   restore  that container killed and restored from its image: CRIU leaves the processes stopped,
#            the shim holds them while their CUDA state comes back, so the thread never runs while
#            checkpointed here either
#   nohold   the same container with hold_still: false dies in its checkpoint: the fixture is what
#            it claims to be, and the hold is what keeps it alive
#   jobs     a job runner (a CUDA parent starting a short-lived CUDA child every 150 ms, each
#            living 300 ms): checkpoints in a row all succeed, the container running and working
# Usage: hold_still.sh [1.6|2.3]
set -euo pipefail
source "$(dirname "$0")/lib/shim-env.sh"
source "$(dirname "$0")/lib/fake-cuda.sh"
nv_fake_cuda
NV_SHIM_EXTRA=$NV_FAKE_CHECKPOINT
export NV_SHIM_EXTRA
nv_start_with_shim --containerd "${1:-1.6}"

MOUNTS=("${NV_FAKE_MOUNTS[@]}")
APP=(/fake/fake_cuda_app --dir /fakecuda --device /dev/fakegpu0 --map)
# The fake driver names its files by the pid in the container: each case's pid 1 is the same name,
# so what the previous (ended) container left goes first.
fresh_fake_state() { rm -f "$FAKE"/cuda/[0-9]*.*; }
# The driver's checkpoint and restore take this long: the CUDA state stays checkpointed through
# the runtime's snapshot and beyond, long enough for a running thread to see it.
echo 300 >"$FAKE/cuda/delay_ms"

nv_log "case touch: a thread that must not run while the process is checkpointed, held still"
nv_ctr run -d --runtime $NV_RT "${MOUNTS[@]}" "$NV_IMAGE" touch "${APP[@]}" --touch-thread
cp=$(nv_container_pid "$(nv_task_pid touch)")
nv_wait_for -t 10 test -e "$FAKE/cuda/$cp.ready" || nv_fail "the fake CUDA app did not start"
nv_wait_for -t 30 nv_fake_counted_past "$cp" 100 || nv_fail "process $cp does not count: $(nv_fake_counter "$cp")"
nv_ctr c checkpoint --task --rw touch touchref
[[ ! -e $FAKE/cuda/$cp.faulted ]] || nv_fail "a thread of $cp ran while its CUDA state was checkpointed"
nv_assert_eq RUNNING "$(nv_task_status touch)" "the container after its checkpoint"
diag=$NV_STATE_DIR/io.containerd.runtime.v2.task/$NV_NAMESPACE/touch/checkpoint-diagnostic.json
nv_assert_eq done "$(jq -r .verdict "$diag")" "the checkpoint's report"
jq -e '.phases.hold_ms' "$diag" >/dev/null || nv_fail "no hold phase in the report: $(jq -c .phases "$diag")"
grep -q 'checkpoint touch: hold .*(1 process held still)' "$NV_DIR/containerd.log" || nv_fail "the shim's log shows no hold"
a=$(nv_fake_counter "$cp")
nv_wait_for -t 10 nv_fake_counted_past "$cp" "$a" || nv_fail "process $cp does not work after the checkpoint"
nv_assert_eq running "$(cat "$FAKE/cuda/$cp.state")" "CUDA state after the checkpoint"
nv_ctr task kill -s KILL touch
nv_wait_for -t 10 nv_task_stopped touch

nv_log "case restore: the same process restored from its image, held until its CUDA state is back"
nv_ctr task rm touch >/dev/null
nv_ctr c rm touch
# The image holds the process CUDA-checkpointed (as the fake driver's files must say: no newline).
printf checkpointed >"$FAKE/cuda/$cp.state"
touch "$FAKE/cuda/$cp.closed"
rm -f "$FAKE/cuda/$cp.faulted"
nv_ctr c restore --live --rw touch touchref </dev/null
nv_assert_eq RUNNING "$(nv_task_status touch)" "the restored container"
[[ ! -e $FAKE/cuda/$cp.faulted ]] || nv_fail "a thread of $cp ran after the runtime's restore while its CUDA state was checkpointed"
nv_assert_eq running "$(cat "$FAKE/cuda/$cp.state")" "CUDA state after the restore"
grep -q 'restore touch: hold .*(1 process held still)' "$NV_DIR/containerd.log" || nv_fail "the shim's log shows no hold at the restore"
a=$(nv_fake_counter "$cp")
nv_wait_for -t 10 nv_fake_counted_past "$cp" "$a" || nv_fail "process $cp does not work after the restore"
nv_ctr task kill -s KILL touch
nv_wait_for -t 10 nv_task_stopped touch

nv_log "case nohold: the same with checkpoint.hold_still: false dies"
fresh_fake_state
alt=$NV_DIR/nohold.yaml
cp "$NVPROXY_SHIM_CONFIG" "$alt"
sed -i 's/^checkpoint:$/checkpoint:\n  hold_still: false/' "$alt"
grep -q 'hold_still: false' "$alt" || nv_fail "could not write $alt"
nv_ctr run -d --runtime $NV_RT --runtime-config-path "$alt" "${MOUNTS[@]}" "$NV_IMAGE" nohold "${APP[@]}" --touch-thread
cp=$(nv_container_pid "$(nv_task_pid nohold)")
nv_wait_for -t 10 test -e "$FAKE/cuda/$cp.ready" || nv_fail "the fake CUDA app did not start"
set +e
out=$(nv_ctr c checkpoint --task --rw nohold noholdref 2>&1)
set -e
echo "$out" >&2
nv_wait_for -t 10 test -e "$FAKE/cuda/$cp.faulted" || nv_fail "without the hold the touch thread never saw its process checkpointed"
nv_wait_for -t 10 nv_task_stopped nohold || nv_fail "without the hold the process lives on: $(nv_task_status nohold)"

nv_log "case jobs: a job runner's short-lived CUDA children"
fresh_fake_state
nv_ctr run -d --runtime $NV_RT "${MOUNTS[@]}" "$NV_IMAGE" jobs "${APP[@]}" --job-every 150 --job-life 300
jp=$(nv_container_pid "$(nv_task_pid jobs)")
nv_wait_for -t 10 test -e "$FAKE/cuda/$jp.ready" || nv_fail "the job runner did not start"
jobs_started() { (($(cat "$FAKE/cuda/$jp.jobs" 2>/dev/null || echo 0) > $1)); }
echo 50 >"$FAKE/cuda/delay_ms"
for i in 1 2 3 4 5; do
  nv_wait_for -t 10 jobs_started $((i * 3)) || nv_fail "the job runner starts no jobs"
  out=$(nv_ctr c checkpoint --task --rw jobs "jobsref$i" 2>&1) || nv_fail "checkpoint $i of the job runner failed: $out"
  nv_assert_eq RUNNING "$(nv_task_status jobs)" "the job runner after checkpoint $i"
done
grep -q 'ended before its CUDA\|held still' "$NV_DIR/containerd.log" || nv_fail "no hold in the shim's log"
done_jobs=$(cat "$FAKE/cuda/$jp.jobs")
nv_wait_for -t 10 jobs_started "$done_jobs" || nv_fail "the job runner starts no jobs after the checkpoints"
echo "PASS hold_still (containerd $NV_CONTAINERD_VERSION)"
