#!/usr/bin/env bash
# Issue 15: nothing the shim starts during a checkpoint may run unbounded. The runtime is a wrapper
# (test/fixtures/hang_runtime) that runs the real runc/runsc for everything but `checkpoint`, where
# it freezes the container as CRIU does and hangs with a child in its process group. With
# checkpoint.snapshot_timeout_ms small, `ctr task checkpoint` must fail within seconds saying that
# the snapshot ran out of time, the wrapper and its child must be gone (the whole process group
# killed), the container thawed and RUNNING, its work going on, and (runc, fake CUDA driver as in
# checkpoint_gpu_fake.sh) the CUDA processes rolled back to running.
# Usage: checkpoint_deadline.sh [1.6|1.7|2]   (NV_RUNTIME=runc|runsc)
set -euo pipefail
source "$(dirname "$0")/lib/shim-env.sh"
source "$(dirname "$0")/lib/fake-cuda.sh"
FIX=${NVPROXY_FIXTURES_DIR:?NVPROXY_FIXTURES_DIR (build/test/fixtures) is not set}
[[ -x $FIX/fake_cuda_app && -f $FIX/libcuda.so && -f $FIX/libnvidia-ml.so ]] || nv_fail "fixtures missing in $FIX"
WRAPPER=$NV_REPO_DIR/test/fixtures/hang_runtime/hang-checkpoint-runtime.sh
TIMEOUT_MS=3000

FAKE=$(mktemp -d /tmp/nvproxy-deadline.XXXXXX)
nv_defer rm -rf "$FAKE"
mkdir -p "$FAKE/cuda" "$FAKE/bin" "$FAKE/wrap" "$FAKE/state"
touch "$FAKE/fakegpu0"
cp "$FIX/fake_cuda_app" "$FAKE/bin/"
export NVPROXY_FAKE_CUDA_DIR=$FAKE/cuda  # read by the fake libcuda inside the shim
export NV_HANG_STATE_DIR=$FAKE/state     # read by the wrapper (the shim's environment is containerd's)
NV_SHIM_EXTRA="checkpoint:
  libcuda: $FIX/libcuda.so
  libnvml: $FIX/libnvidia-ml.so
  lock_timeout_ms: 5000
  snapshot_timeout_ms: $TIMEOUT_MS
  device_globs: [\"/dev/nvidia*\", \"/dev/fakegpu*\"]"
export NV_SHIM_EXTRA

# The shim's config names the wrapper, installed under the runtime's own name; the wrapper runs the
# runtime the config would have named.
eval "$(declare -f nv_shim_config_write | sed '1s/^nv_shim_config_write/_nv_real_config_write/')"
nv_shim_config_write() {
  _nv_real_config_write "$1"
  NV_HANG_REAL_RUNTIME=$(awk '$1=="binary:"{print $2; exit}' "$1")
  [[ -x $NV_HANG_REAL_RUNTIME ]] || nv_fail "no runtime binary in the config: $(cat "$1")"
  export NV_HANG_REAL_RUNTIME
  ln -sf "$WRAPPER" "$FAKE/wrap/$NV_RUNTIME"
  sed -i "s#^  binary: .*#  binary: $FAKE/wrap/$NV_RUNTIME#" "$1"
}
case $NV_RUNTIME in
  runc | runsc) ;;
  *) nv_skip "checkpoint_deadline covers runc and runsc, not $NV_RUNTIME" ;;
esac
nv_start_with_shim --containerd "${1:-1.6}"

MOUNTS=(--mount "type=bind,src=$FAKE/fakegpu0,dst=/dev/fakegpu0,options=rbind:rw"
  --mount "type=bind,src=$FAKE/cuda,dst=/fakecuda,options=rbind:rw"
  --mount "type=bind,src=$FAKE/bin,dst=/fake,options=rbind:ro")
state_of() { cat "$FAKE/cuda/$1.state"; }
cuda_cpids() { ls "$FAKE/cuda" | sed -n 's/^\([0-9]*\)\.cuda$/\1/p' | sort -n; }
gone() { [[ ! -e /proc/$1 ]]; }
runtime_status() { "$NV_HANG_REAL_RUNTIME" --root "$(nv_runtime_root "$1")" state "$1" | jq -r .status; }

ID=deadline
ROOT=$(nv_runtime_root $ID)
if [[ $NV_RUNTIME == runc ]]; then
  # Two CUDA processes (parent and child) on the fake driver; their work counters are the files
  # /fakecuda/PID.counter.
  nv_ctr run -d --runtime $NV_RT "${MOUNTS[@]}" "$NV_IMAGE" $ID /fake/fake_cuda_app --dir /fakecuda --device /dev/fakegpu0 --map --children 1
  nv_wait_for -t 10 bash -c "[[ \$(ls $FAKE/cuda | grep -c '\.ready$') -ge 2 ]]" || nv_fail "fake CUDA app did not start: $(ls "$FAKE/cuda")"
  mapfile -t cp < <(cuda_cpids)
  nv_assert_eq 2 "${#cp[@]}" "CUDA processes in the container"
  counters=()
  for c in "${cp[@]}"; do counters+=("$c"); done
else
  # runsc: CUDA is not toggled inside the sandbox (refused for GPU containers), so a plain worker.
  # It replaces its counter by a rename: `echo >file` truncates first, and a read in between got
  # nothing (CI: "((: 7 > : syntax error")).
  nv_ctr run -d --runtime $NV_RT "${MOUNTS[@]}" "$NV_IMAGE" $ID sh -c 'i=0; while :; do i=$((i+1)); echo $i >/fakecuda/work.new; mv /fakecuda/work.new /fakecuda/work.counter; sleep 0.05; done'
  nv_wait_for -t 20 nv_fake_counted_past work 0 || nv_fail "the worker does not count"
  cp=()
  counters=(work)
fi

nv_log "checkpoint with a runtime that hangs in checkpoint (snapshot_timeout_ms=$TIMEOUT_MS)"
start=$(date +%s%N)
set +e
err=$(nv_ctr task checkpoint $ID 2>&1)
rc=$?
set -e
took_ms=$((($(date +%s%N) - start) / 1000000))
echo "$err" >&2
((rc != 0)) || nv_fail "the checkpoint with a hung runtime succeeded"
((took_ms < TIMEOUT_MS + 20000)) || nv_fail "the checkpoint failed only after $took_ms ms (deadline $TIMEOUT_MS ms)"
((took_ms >= TIMEOUT_MS)) || nv_fail "the checkpoint failed after $took_ms ms, before the deadline: not the deadline"
nv_assert_contains "$err" "snapshot ($NV_RUNTIME checkpoint) did not finish within $TIMEOUT_MS ms" "error names the phase and deadline"
if [[ $NV_RUNTIME == runc ]]; then
  nv_assert_contains "$err" "killed runc and CRIU (pgid " "error says what was killed"
  nv_assert_contains "$err" "container thawed" "error says the container was thawed"
  nv_assert_contains "$err" "CUDA restored in pids " "error says CUDA was rolled back"
else
  nv_assert_contains "$err" "killed runsc (pgid " "error says what was killed"
fi
[[ $err == *DeadlineExceeded* || $err == *"deadline exceeded"* ]] || nv_fail "the status code is not DeadlineExceeded: $err"

# The wrapper (runc's stand-in) and its child (CRIU's) were killed together, and nothing else of
# the runtime is left.
wrapper=$(cat "$FAKE/state/wrapper.pid")
criu=$(cat "$FAKE/state/criu.pid")
nv_wait_for -t 10 gone "$wrapper" || nv_fail "the hung runtime (pid $wrapper) is still there"
nv_wait_for -t 10 gone "$criu" || nv_fail "the runtime's child (pid $criu) survived: the process group was not killed"
if pgrep -f "$FAKE/wrap/" >/dev/null; then nv_fail "runtime processes left: $(pgrep -af "$FAKE/wrap/")"; fi

diag=$(nv_bundle $ID)/checkpoint-diagnostic.json
[[ -s $diag ]] || nv_fail "no $diag"
jq -e --argjson t "$TIMEOUT_MS" '.deadline.phase == "snapshot" and .deadline.timeout_ms == $t and .deadline.killed_pgid > 0' "$diag" >/dev/null ||
  nv_fail "the diagnostic lacks the deadline: $(cat "$diag")"

nv_assert_eq RUNNING "$(nv_task_status $ID)" "container state after the failed checkpoint"
nv_assert_eq running "$(runtime_status $ID)" "the runtime's state (not paused/frozen)"
for f in "${counters[@]}"; do
  a=$(nv_fake_counter "$f")
  nv_wait_for -t 10 nv_fake_counted_past "$f" "$a" || nv_fail "no progress in $f.counter after the failed checkpoint (stuck at $a)"
done
for c in "${cp[@]}"; do nv_assert_eq running "$(state_of "$c")" "CUDA state of $c after the rollback"; done
nv_assert_eq ok "$(nv_ctr task exec --exec-id after $ID echo ok)" "the container still works"
helpers=$(nv_cuda_helper_pids)
[[ -z $helpers ]] || nv_fail "nvproxy-cuda-helper still runs: $helpers"

nv_log "delete: nothing of the container may be left"
nv_ctr task kill -s KILL $ID
nv_wait_for -t 20 bash -c "[[ \$(ctr -a $NV_SOCK -n $NV_NAMESPACE task ls | awk '\$1==\"$ID\"{print \$3}') == STOPPED ]]" ||
  nv_fail "the container did not stop after SIGKILL"
nv_ctr task rm $ID >/dev/null
nv_ctr c rm $ID
nv_assert_eq "" "$("$NV_HANG_REAL_RUNTIME" --root "$ROOT" list -q)" "containers left in the runtime root $ROOT"
# A runsc sandbox and gofer carry --root=ROOT (this test's own root: its namespace is in the path;
# under runsc the sandbox's own root below it).
mapfile -t left < <(nv_pids_with_arg "--root=$ROOT")
((${#left[@]} == 0)) || nv_fail "processes of container $ID left after its delete: $(ps -o pid,args -p "${left[*]}")"

# The runtime binary goes away under a running container (here: the wrapper; an upgrade or a
# cleanup that ran first elsewhere): SIGKILL still ends it, through its init's pid, and nothing of
# it keeps running after its delete (the runtime's state stays in the root: the runtime is gone).
nv_log "the runtime binary vanishes: SIGKILL still ends the container"
ID=gone
ROOT=$(nv_runtime_root $ID)
nv_ctr run -d --runtime $NV_RT "$NV_IMAGE" $ID sh -c 'while :; do sleep 0.1; done'
nv_wait_for -t 20 bash -c "[[ \$(ctr -a $NV_SOCK -n $NV_NAMESPACE task ls | awk '\$1==\"$ID\"{print \$3}') == RUNNING ]]" ||
  nv_fail "container $ID does not run"
init=$(nv_ctr task ls | awk -v id=$ID '$1==id{print $2}')
rm "$FAKE/wrap/$NV_RUNTIME"
nv_ctr task kill -s KILL $ID
nv_wait_for -t 20 gone "$init" || nv_fail "the init (pid $init) survived SIGKILL without its runtime"
nv_wait_for -t 20 bash -c "[[ \$(ctr -a $NV_SOCK -n $NV_NAMESPACE task ls | awk '\$1==\"$ID\"{print \$3}') == STOPPED ]]" ||
  nv_fail "container $ID is not STOPPED after SIGKILL"
nv_ctr task rm $ID >/dev/null
nv_ctr c rm $ID
no_root_procs() { [[ -z $(nv_pids_with_arg "--root=$ROOT") ]]; }
nv_wait_for -t 20 no_root_procs || nv_fail "processes of $ID left: $(ps -o pid,args -p "$(nv_pids_with_arg "--root=$ROOT" | tr '\n' ' ')")"
echo "PASS checkpoint_deadline ($NV_RUNTIME, containerd $NV_CONTAINERD_VERSION)"
