#!/usr/bin/env bash
# Issue 45: the driver stages device memory in the process's own memory (the fake app does so with
# --stage-mib while checkpointed), charged to the container's memory cgroup. Cases:
#   lift      a container limited below what it will stage, inside a "pod" cgroup with a limit of
#             its own: checkpointed (task kept running) with both limits lifted for the staging
#             and put back after; then restored (the restore lifts too), state continued
#   refuse    checkpoint.staging_memory: refuse: refused with the figures, nothing toggled
#   host      a host without room (a MemAvailable file of the test's): refused before any toggle
#   shared    two checkpoints that each fit the host but not together: one is refused, naming the
#             other (the host-wide account)
#             (issue 60) the same image with its record's GPU facts taken out (an image that bills
#             nothing): CRIU is killed at the limit during the restore and the error says so first
#   oom       device memory NVML does not report: nothing is lifted, the kernel kills the
#             workload mid-checkpoint, and the error says so (not a timeout guess)
#   crash     the shim killed while the limits are lifted: the shim's delete puts them back
# Usage: staging_memory.sh [1.6|1.7|2.3]
set -euo pipefail
source "$(dirname "$0")/lib/shim-env.sh"
source "$(dirname "$0")/lib/fake-cuda.sh"
nv_fake_cuda
MEMINFO=$FAKE/meminfo
ACCOUNT=$FAKE/staging.json
STORE=$(mktemp -d /tmp/nvproxy-staging-store.XXXXXX)
nv_defer rm -rf "$STORE"
NV_SHIM_EXTRA="$NV_FAKE_CHECKPOINT
  image_store: $STORE
  staging_margin_mib: 64
  host_meminfo: $MEMINFO
  staging_account: $ACCOUNT"
export NV_SHIM_EXTRA
# The host's real figure until a case plays another.
grep MemAvailable /proc/meminfo >"$MEMINFO"
nv_start_with_shim --containerd "${1:-1.6}"
MOUNTS=("${NV_FAKE_MOUNTS[@]}")
STAGE_MIB=192
LIMIT=$((96 << 20))

if [[ -e /sys/fs/cgroup/cgroup.controllers ]]; then
  CG_ROOT=/sys/fs/cgroup LIMIT_FILE=memory.max
else
  CG_ROOT=/sys/fs/cgroup/memory LIMIT_FILE=memory.limit_in_bytes
fi
POD=/nvtest-pod-$$
mkdir -p "$CG_ROOT$POD"
[[ -e /sys/fs/cgroup/cgroup.controllers ]] && echo +memory >"$CG_ROOT/cgroup.subtree_control" 2>/dev/null || true
nv_defer rmdir "$CG_ROOT$POD"
POD_LIMIT=$((160 << 20))
echo "$POD_LIMIT" >"$CG_ROOT$POD/$LIMIT_FILE"
limit_of() { cat "$CG_ROOT$1/$LIMIT_FILE"; }

# start NAME CGROUP [APP ARGS...]: a limited container of one fake CUDA process staging STAGE_MIB,
# ready (the test then tells NVML its device memory: tell_nvml).
start() {
  local name=$1 cg=$2
  shift 2
  nv_ctr run -d --runtime $NV_RT --memory-limit $LIMIT --cgroup "$cg" "${MOUNTS[@]}" "$NV_IMAGE" "$name" "$@"
  nv_wait_for -t 10 bash -c "ls $FAKE/cuda | grep -q '\.ready$'" || nv_fail "$name did not start"
}
app() { echo /fake/fake_cuda_app --dir /fakecuda --device /dev/fakegpu0 --stage-mib $STAGE_MIB; }
# tell_nvml HOSTPID: the fake NVML reports STAGE_MIB of device memory for it.
tell_nvml() { echo "$1 0 $STAGE_MIB" >>"$FAKE/cuda/nvml"; }
host_pid_of() { nv_ctr task ps "$1" | awk 'NR>1{print $1}' | sort -n | tail -1; }
stop() {
  nv_ctr task kill -s KILL "$1" 2>/dev/null || true
  nv_wait_for -t 10 nv_task_stopped "$1" || true
  nv_ctr task rm "$1" >/dev/null 2>&1 || true
  nv_ctr c rm "$1" 2>/dev/null || true
}
# Between cases: the fake driver's files of the last one (its state would pass for the next's).
reset_fake() { rm -f "$FAKE"/cuda/*; }
checkpoint_fails() {
  set +e
  ERR=$(nv_ctr c checkpoint --task "$@" 2>&1)
  local rc=$?
  set -e
  ((rc != 0)) || nv_fail "checkpoint $* succeeded"
  echo "$ERR" >&2
}
no_toggle() { [[ ! -s $FAKE/cuda/calls.log ]] || ! grep -qE ' (lock|checkpoint) ' "$FAKE/cuda/calls.log"; }

nv_log "case lift: limited container (96 MiB) in a pod (160 MiB), staging $STAGE_MIB MiB"
start lift "$POD/lift" $(app)
pid=$(nv_fake_cuda_pids | head -1)
tell_nvml "$(host_pid_of lift)"
nv_wait_for -t 30 nv_fake_counted_past "$pid" 100 || nv_fail "the app does not count"
before=$(nv_fake_counter "$pid")
nv_ctr c checkpoint --task --rw lift liftref
nv_assert_eq RUNNING "$(nv_task_status lift)" "lift after its checkpoint"
nv_fake_advancing "$pid" 10 || nv_fail "the app does not run on after the checkpoint"
nv_assert_eq "$LIMIT" "$(limit_of "$POD/lift")" "the container's limit after the checkpoint"
nv_assert_eq "$POD_LIMIT" "$(limit_of "$POD")" "the pod's limit after the checkpoint"
grep -F 'memory limits lifted while device memory is staged' "$NV_DIR/containerd.log" | grep -qF "$POD/lift/$LIMIT_FILE" \
  || nv_fail "the log does not say the container's limit was lifted"
grep -F 'memory limits lifted while device memory is staged' "$NV_DIR/containerd.log" | grep -qF "$POD/$LIMIT_FILE" \
  || nv_fail "the log does not say the pod's limit was lifted"
grep -qF 'memory limits put back after' "$NV_DIR/containerd.log" || nv_fail "the log does not say the limits were put back"
[[ ! -e $(nv_bundle lift)/nvproxy-lifted-limits.json ]] || nv_fail "the lift's record is left after the put-back"
[[ $(jq length "$ACCOUNT") == 0 ]] || nv_fail "the host account keeps an entry: $(cat "$ACCOUNT")"
nv_log "restore of lift: CRIU brings the staged pages back into a container with the same limit"
stop lift
# The image holds the process CUDA-checkpointed: the fake driver's files say so again (as the fake
# driver writes them, without a newline: CRIU checks the size of the file the app holds open).
printf checkpointed >"$FAKE/cuda/$pid.state"
touch "$FAKE/cuda/$pid.closed"
nv_ctr c restore --live --rw lift liftref </dev/null
nv_assert_eq RUNNING "$(nv_task_status lift)" "lift after restore"
nv_fake_advancing "$pid" 10 || nv_fail "the restored app does not count"
after=$(nv_fake_counter "$pid")
((after >= before)) || nv_fail "state did not continue: before $before, after $after"
nv_assert_eq "$LIMIT" "$(limit_of "$POD/lift")" "the restored container's limit"
nv_assert_eq "$POD_LIMIT" "$(limit_of "$POD")" "the pod's limit after the restore"
grep -F 'restore of \"lift\": memory limits lifted' "$NV_DIR/containerd.log" | grep -qF "$POD/lift/$LIMIT_FILE" \
  || nv_fail "the restore did not lift the container's limit"
stop lift
nv_log "restore of lift from an image that bills nothing: killed at the limit, and said so first"
entry=$(find "$STORE/$NV_NAMESPACE/lift" -mindepth 1 -maxdepth 1 -type d | head -1)
jq 'del(.gpu) | .gpu_error = "taken out by the test"' "$entry/nvproxy-cuda.json" >"$entry/r.json"
mv "$entry/r.json" "$entry/nvproxy-cuda.json"
printf checkpointed >"$FAKE/cuda/$pid.state"
touch "$FAKE/cuda/$pid.closed"
set +e
err=$(nv_ctr c restore --live --rw lift liftref </dev/null 2>&1)
rc=$?
set -e
echo "$err" >&2
((rc != 0)) || nv_fail "an unbilled restore of $STAGE_MIB MiB staged under a $((LIMIT >> 20)) MiB limit succeeded"
nv_assert_contains "$err" "the restore was OOM-killed: the kernel OOM-killed" "the error names the kill first"
nv_assert_contains "$err" "the restore was billed nothing" "the error says what was billed"
nv_assert_eq "$POD_LIMIT" "$(limit_of "$POD")" "the pod's limit after the failed restore"
stop lift
reset_fake

nv_log "case refuse: checkpoint.staging_memory refuse"
nv_set_checkpoint_key staging_memory refuse
start refuse "$POD/refuse" $(app)
nv_unset_checkpoint_key staging_memory
tell_nvml "$(host_pid_of refuse)"
rm -f "$FAKE/cuda/calls.log"
checkpoint_fails refuse refuseref
nv_assert_contains "$ERR" "would cross the container's memory limit" "the refusal's reason"
nv_assert_contains "$ERR" "$POD/refuse/$LIMIT_FILE" "the refusal names the limit"
nv_assert_contains "$ERR" "192.0 MiB" "the refusal names what is staged"
no_toggle || nv_fail "refuse toggled CUDA: $(cat "$FAKE/cuda/calls.log")"
nv_assert_eq RUNNING "$(nv_task_status refuse)" "refuse after the refusal"
jq -e '.staging.limits | length > 0' "$(nv_bundle refuse)/checkpoint-diagnostic.json" >/dev/null \
  || nv_fail "the diagnostic has no staging bill: $(cat "$(nv_bundle refuse)/checkpoint-diagnostic.json")"
# diagnose shows the bill: each process's staged bytes, the host's room, each limit's headroom.
dg=$(timeout 60 "$NVPROXY_SHIM_DIR/containerd-shim-nvproxy-v1" diagnose --id refuse --namespace "$NV_NAMESPACE" \
  --bundle "$(nv_bundle refuse)" --libcuda "$FIX/libcuda.so" --libnvml "$FIX/libnvidia-ml.so" \
  --device-glob '/dev/fakegpu*' 2>&1 || true)
echo "$dg" >&2
grep -qE "^staging: the driver stages 192.0 MiB .*host: [0-9.]+ [KMG]iB available" <<<"$dg" || nv_fail "diagnose shows no staging bill"
grep -qF "$POD/refuse/$LIMIT_FILE 96.0 MiB:" <<<"$dg" || nv_fail "diagnose does not show the container's limit and headroom"
stop refuse
reset_fake

nv_log "case host: a host with 200 MiB available"
echo "MemAvailable:     204800 kB" >"$MEMINFO"
start host "$POD/host" $(app)
tell_nvml "$(host_pid_of host)"
rm -f "$FAKE/cuda/calls.log"
checkpoint_fails host hostref
nv_assert_contains "$ERR" "would run the host out of memory" "the refusal's reason"
nv_assert_contains "$ERR" "200.0 MiB available" "the refusal names the host's memory"
no_toggle || nv_fail "host toggled CUDA: $(cat "$FAKE/cuda/calls.log")"
nv_assert_eq RUNNING "$(nv_task_status host)" "host after the refusal"
stop host
reset_fake

nv_log "case shared: room for one staging (256 MiB with its margin) on the host, two at once"
echo "MemAvailable:     409600 kB" >"$MEMINFO"
# Outside any pod and without a limit: the host is the only edge. The second app is pid 4 in its
# container (after two short-lived children) so that the two share the fake driver's directory.
nv_ctr run -d --runtime $NV_RT "${MOUNTS[@]}" "$NV_IMAGE" one $(app)
nv_ctr run -d --runtime $NV_RT "${MOUNTS[@]}" "$NV_IMAGE" two sh -c "/bin/true; /bin/true; $(app); true"
nv_wait_for -t 10 bash -c "[[ \$(ls $FAKE/cuda | grep -c '\.ready\$') -ge 2 ]]" || nv_fail "one and two did not start"
tell_nvml "$(host_pid_of one)"
tell_nvml "$(host_pid_of two)"
echo 3000 >"$FAKE/cuda/delay_ms"  # each checkpoint holds its reservation for seconds
rm -f "$FAKE/cuda/calls.log"
set +e
nv_ctr c checkpoint --task one oneref >"$FAKE/one.out" 2>&1 &
p1=$!
nv_ctr c checkpoint --task two tworef >"$FAKE/two.out" 2>&1 &
p2=$!
wait $p1
r1=$?
wait $p2
r2=$?
set -e
rm -f "$FAKE/cuda/delay_ms"
cat "$FAKE/one.out" "$FAKE/two.out" >&2
((r1 == 0 || r2 == 0)) || nv_fail "neither checkpoint went through"
((r1 != 0 || r2 != 0)) || nv_fail "both checkpoints went through: the host has room for one"
loser=two winner=one
((r1 != 0)) && loser=one winner=two
nv_assert_contains "$(cat "$FAKE/$loser.out")" "reserved" "the refusal names the reservation"
nv_assert_contains "$(cat "$FAKE/$loser.out")" "container \"$winner\"" "the refusal names the other checkpoint"
nv_assert_eq RUNNING "$(nv_task_status one)" "one after the checkpoints"
nv_assert_eq RUNNING "$(nv_task_status two)" "two after the checkpoints"
[[ $(jq length "$ACCOUNT") == 0 ]] || nv_fail "the host account keeps an entry: $(cat "$ACCOUNT")"
stop one
stop two
reset_fake
grep MemAvailable /proc/meminfo >"$MEMINFO"

nv_log "case oom: device memory NVML does not report is not billed; the kernel kills mid-checkpoint"
start oom "$POD/oom" $(app)
checkpoint_fails oom oomref
nv_assert_contains "$ERR" "OOM-killed" "the error names the kernel's kill"
nv_assert_contains "$ERR" "oom_kill 0 -> 1" "the error quotes the cgroup's count"
stop oom
reset_fake

nv_log "case crash: the shim killed while the limits are lifted; its delete puts them back"
start crash "$POD/crash" $(app)
tell_nvml "$(host_pid_of crash)"
echo 20000 >"$FAKE/cuda/delay_ms"
nv_ctr c checkpoint --task crash crashref >/dev/null 2>&1 &
ck=$!
pod_lifted() { (($(limit_of "$POD") > POD_LIMIT)); }
nv_wait_for -t 20 pod_lifted || nv_fail "the pod's limit was never lifted: $(limit_of "$POD")"
[[ -s $(nv_bundle crash)/nvproxy-lifted-limits.json ]] || nv_fail "no record of the lifted limits in the bundle"
shim=$(cat "$(nv_bundle crash)/shim.pid" 2>/dev/null || pgrep -f "containerd-shim-nvproxy-v1.*-id crash" | head -1)
[[ -n $shim ]] || nv_fail "no shim pid for crash"
kill -KILL "$shim"
wait $ck 2>/dev/null || true
rm -f "$FAKE/cuda/delay_ms"
pod_back() { [[ $(limit_of "$POD") == "$POD_LIMIT" ]]; }
nv_wait_for -t 30 pod_back || nv_fail "the pod's limit was not put back after the shim died: $(limit_of "$POD")"
# containerd logs the delete's words once that process has ended, after the limit is back.
nv_wait_for -t 30 grep -qF 'memory limit an earlier shim lifted put back' "$NV_DIR/containerd.log" ||
  nv_fail "the shim's delete did not say it put the limit back"
stop crash
echo "PASS staging_memory ($NV_RUNTIME, containerd $NV_CONTAINERD_VERSION)"
