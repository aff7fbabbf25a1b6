#!/usr/bin/env bash
# Issue 17 on a machine without a GPU: the GPU checkpoint of a container under the current runsc
# (gVisor), through containerd and our shim, with the fake driver INSIDE the sandbox. The device layer
# gives the container its "GPU" from a CDI spec (kind nvidia.com/gpu, asked for with
# NVIDIA_VISIBLE_DEVICES=0): a fake device file at /dev/fakegpu0 and the fake libcuda / libnvidia-ml
# bound at their real names with the soname links made by our createContainer hook, which runsc runs
# in its gofer. runsc gets no --nvproxy (there is no driver to proxy); everything else is the path of
# a real GPU container: the shim lists, scans and toggles through nvproxy-sandbox-agent, run with
# `runsc exec` from /.nvproxy, which loads the container's libcuda.so.1 by its soname. Cases:
#   layer    the soname links exist in the sandbox and the agent's tools are mounted
#   refuse   a child holds the device without CUDA: refused naming its SANDBOX pid and the device,
#            checkpoint-diagnostic.json in the bundle, `diagnose` says the same, the container keeps running
#   cuda     a CUDA parent and child: all locked before any checkpoint, runsc checkpoint (--rw), resumed;
#            the restored container gets CUDA back in both and their work continues; on the restored
#            container exec, pause/resume, a checkpoint whose toggle fails (rolled back, both keep
#            working) and a second checkpoint work as on a fresh one; a restore whose CUDA restore
#            fails names the sandbox pid and the driver's answer
#   fork     a CUDA parent with 2 forked workers holding its device fd and mapping: the workers drop
#            them in place (the agent, ptrace) before runsc's checkpoint; both count on, their fd is
#            /dev/null, checkpoint and restore succeed
#   jobs     a job runner starting a CUDA child every 500 ms, each living 1 s: three checkpoints in a row
#            succeed, workers that end meanwhile left out, ones that start taken in
# Usage: runsc_gpu_fake.sh [1.6|1.7|2.3]   (77: the current runsc is not unpacked here)
set -euo pipefail
source "$(dirname "$0")/lib/shim-env.sh"
[[ -r /opt/nvproxy-deps/shared/env.sh ]] && source /opt/nvproxy-deps/shared/env.sh
RUNSC=${NVPROXY_SHARED_RUNSC_BIN_DIR:-}/runsc
[[ -x $RUNSC ]] || nv_skip "current runsc not unpacked (scripts/fetch-shared-deps.sh)"
export NV_RUNTIME=runsc NV_RUNSC_BIN=$RUNSC
source "$(dirname "$0")/lib/fake-cuda.sh"
nv_fake_cuda_sandbox
NV_SHIM_EXTRA=$NV_FAKE_SANDBOX_CONFIG
export NV_SHIM_EXTRA
nv_start_with_shim --containerd "${1:-1.7}"

MOUNTS=(--mount "type=bind,src=$FAKE/cuda,dst=/fakecuda,options=rbind:rw"
  --mount "type=bind,src=$FAKE/bin,dst=/fake,options=rbind:ro")
GPU=(--env NVIDIA_VISIBLE_DEVICES=0 --env NVPROXY_FAKE_CUDA_DIR=/fakecuda)
bundle() { nv_bundle "$1"; }
# Every ctr call that could hang gets a deadline (a hang is the failure, not a stuck test).
ctr_t() { timeout "${CTR_DEADLINE:-90}" ctr -a "$NV_SOCK" -n "$NV_NAMESPACE" "$@"; }
stopped() { nv_wait_for -t 20 bash -c "[[ \$(ctr -a $NV_SOCK -n $NV_NAMESPACE task ls | awk '\$1==\"$1\"{print \$3}') == STOPPED ]]"; }

nv_log "case layer: soname links by the hook inside runsc, the agent's tools mounted"
out=$(ctr_t run --rm --runtime $NV_RT "${GPU[@]}" "$NV_IMAGE" layer sh -c "ls -l $L/ /dev/fakegpu0 /.nvproxy/; cat /etc/ld.so.conf.d/nvproxy.conf")
echo "$out" >&2
grep -Eq "libcuda\.so\.1 -> libcuda\.so\.999\.1" <<<"$out" || nv_fail "no libcuda.so.1 soname link in the sandbox"
grep -Eq "libnvidia-ml\.so\.1 -> libnvidia-ml\.so\.999\.1" <<<"$out" || nv_fail "no libnvidia-ml.so.1 soname link in the sandbox"
nv_assert_contains "$out" "nvproxy-sandbox-agent" "the agent is mounted at /.nvproxy"
nv_assert_contains "$out" "$L" "ld.so.conf.d names the driver library dir"

nv_log "case refuse: a child holds the device without CUDA"
ctr_t run -d --runtime $NV_RT "${GPU[@]}" "${MOUNTS[@]}" "$NV_IMAGE" refuse \
  sh -c 'sh -c "echo \$\$ >/fakecuda/holder.pid; exec sleep 1000" 3</dev/fakegpu0 & exec sleep 1000'
nv_wait_for -t 20 test -s "$FAKE/cuda/holder.pid" || nv_fail "the holder did not start"
holder=$(cat "$FAKE/cuda/holder.pid")
set +e
err=$(ctr_t task checkpoint refuse 2>&1)
rc=$?
set -e
((rc != 0 && rc != 124)) || nv_fail "checkpoint with a device holder: rc=$rc (124: hung): $err"
echo "$err" >&2
nv_assert_contains "$err" "pid $holder" "error names the holder's sandbox pid"
nv_assert_contains "$err" "/dev/fakegpu0" "error names the device"
nv_assert_contains "$err" "no CUDA" "error says the holder is not a CUDA process"
diag=$(bundle refuse)/checkpoint-diagnostic.json
[[ -s $diag ]] || nv_fail "no $diag"
jq -e --argjson p "$holder" '.processes[] | select(.pid == $p) | tostring | contains("/dev/fakegpu0")' "$diag" >/dev/null ||
  nv_fail "diagnostic JSON lacks sandbox pid $holder holding /dev/fakegpu0: $(cat "$diag")"
nv_assert_eq RUNNING "$(nv_task_status refuse)" "container state after the refused checkpoint"
# diagnose (read-only) sees the same from inside the sandbox.
set +e
dg=$(timeout 60 "$NVPROXY_SHIM_DIR/containerd-shim-nvproxy-v1" diagnose --id refuse --namespace "$NV_NAMESPACE" \
  --bundle "$(bundle refuse)" --device-glob '/dev/fakegpu*' 2>&1)
rc=$?
set -e
echo "$dg" >&2
nv_assert_eq 3 "$rc" "diagnose's exit status (3: a checkpoint would be refused)"
grep -Eq "^$holder +sleep +\(no CUDA\) .*/dev/fakegpu0" <<<"$dg" || nv_fail "diagnose does not name sandbox pid $holder holding /dev/fakegpu0"
nv_assert_eq ok "$(ctr_t task exec --exec-id after refuse echo ok)" "container works after the refusal"
ctr_t task kill -s KILL refuse
stopped refuse
ctr_t task rm refuse >/dev/null
ctr_t c rm refuse

nv_log "case jax: a CUDA process that maps JAX's XLA, which nothing can hold still in the sandbox"
# Issue 33: such a process dies while its CUDA state is checkpointed unless held still (runc, crun);
# under runsc it is refused before any toggle, naming the library.
mkdir -p "$FAKE/jaxlib"
head -c 4096 /dev/zero >"$FAKE/jaxlib/xla_extension.so"
: >"$FAKE/cuda/calls.log"
ctr_t run -d --runtime $NV_RT "${GPU[@]}" "${MOUNTS[@]}" --mount "type=bind,src=$FAKE/jaxlib,dst=/site/jaxlib,options=rbind:ro" \
  "$NV_IMAGE" jax /fake/fake_cuda_app --device /dev/fakegpu0 --map --map-lib /site/jaxlib/xla_extension.so
nv_wait_for -t 20 bash -c "ls $FAKE/cuda/*.ready >/dev/null 2>&1" || nv_fail "the JAX stand-in did not start"
set +e
err=$(ctr_t task checkpoint jax 2>&1)
rc=$?
set -e
echo "$err" >&2
((rc != 0 && rc != 124)) || nv_fail "checkpoint of an unheld JAX process: rc=$rc (124: hung): $err"
nv_assert_contains "$err" "runs threads that touch device memory while CUDA-checkpointed" "the refusal"
nv_assert_contains "$err" "maps /site/jaxlib/xla_extension.so (JAX's XLA)" "the refusal names the library"
if awk '$2=="lock"' "$FAKE/cuda/calls.log" | grep -q .; then nv_fail "CUDA was locked before the refusal"; fi
nv_assert_eq RUNNING "$(nv_task_status jax)" "container state after the refusal"
ctr_t task kill -s KILL jax
stopped jax
ctr_t task rm jax >/dev/null
ctr_t c rm jax
rm -f "$FAKE"/cuda/[0-9]*.*

nv_log "case cuda: CUDA parent + child in the sandbox, checkpoint, restore, operations on the restored one"
rm -f "$FAKE"/cuda/*
ctr_t run -d --runtime $NV_RT "${GPU[@]}" "${MOUNTS[@]}" "$NV_IMAGE" cuda \
  /fake/fake_cuda_app --dir /fakecuda --device /dev/fakegpu0 --map --children 1
nv_wait_for -t 20 bash -c "[[ \$(ls $FAKE/cuda | grep -c '\.ready$') -ge 2 ]]" || nv_fail "fake CUDA app did not start: $(ls "$FAKE/cuda")"
mapfile -t cp < <(nv_fake_cuda_pids)
nv_assert_eq 2 "${#cp[@]}" "CUDA processes in the sandbox"
# The counter is in the app's memory (and mirrored to a file outside the image): the restored app
# goes on from where the snapshot caught it, at least from here; a fresh start would begin at 1.
# Its .ready comes before its first count: wait for that (a single read raced on a loaded host).
nv_wait_for -t 10 bash -c "(( \$(cat $FAKE/cuda/${cp[0]}.counter 2>/dev/null || echo 0) > 0 ))" ||
  nv_fail "the fake CUDA app does not count"
pre=$(nv_fake_counter "${cp[0]}")
ctr_t c checkpoint --task --rw cuda cudaref
log=$FAKE/cuda/calls.log
last_lock_end=$(awk '$2=="lock"{print $4}' "$log" | sort -n | tail -1)
first_ckpt_start=$(awk '$2=="checkpoint"{print $3}' "$log" | sort -n | head -1)
nv_assert_eq 2 "$(awk '$2=="lock" && $5==0' "$log" | wc -l)" "successful locks"
nv_assert_eq 2 "$(awk '$2=="checkpoint" && $5==0' "$log" | wc -l)" "successful checkpoints"
((last_lock_end <= first_ckpt_start)) || nv_fail "a checkpoint started before all locks ended: $(cat "$log")"
# The driver was called with the sandbox pids (the fake library logs the pid it was given).
for c in "${cp[@]}"; do
  grep -q "^$c lock " "$log" || nv_fail "no lock of sandbox pid $c: $(cat "$log")"
  nv_assert_eq running "$(nv_fake_state "$c")" "CUDA state of $c after a leave-running checkpoint"
  nv_fake_advancing "$c" || nv_fail "process $c does not work after the checkpoint"
done
jq -e '.verdict == "done"' "$(bundle cuda)/checkpoint-diagnostic.json" >/dev/null || nv_fail "checkpoint report: $(cat "$(bundle cuda)/checkpoint-diagnostic.json")"
nv_assert_eq RUNNING "$(nv_task_status cuda)" "container state after checkpoint"
ctr_t task kill -s KILL cuda
stopped cuda
ctr_t task rm cuda >/dev/null
ctr_t c rm cuda
# The image holds the processes in the checkpointed CUDA state; the fake driver's state lives in
# files outside the image, so put them where the image left them.
for c in "${cp[@]}"; do
  printf checkpointed >"$FAKE/cuda/$c.state"
  touch "$FAKE/cuda/$c.closed"
  rm -f "$FAKE/cuda/$c.counter"  # the next value written comes from the restored app
done
: >"$log"
ctr_t c restore --live --rw cuda cudaref </dev/null
nv_assert_eq RUNNING "$(nv_task_status cuda)" "restored container state"
nv_fake_resumed "runsc restore" "${cp[@]}"
after=$(nv_fake_counter "${cp[0]}")
((after >= pre)) || nv_fail "work did not continue from the checkpoint: $pre before it, $after after the restore"

nv_log "restored container: exec, pause/resume"
nv_assert_eq ok "$(CTR_DEADLINE=30 ctr_t task exec --exec-id r1 cuda echo ok)" "exec into the restored container"
ctr_t task pause cuda
nv_assert_eq PAUSED "$(nv_task_status cuda)" "restored container paused"
ctr_t task resume cuda
nv_assert_eq RUNNING "$(nv_task_status cuda)" "restored container resumed"
nv_fake_advancing "${cp[0]}" || nv_fail "work stopped after pause/resume"

nv_log "restored container: a checkpoint whose CUDA toggle fails is rolled back"
: >"$log"
echo "checkpoint ${cp[1]} 999" >"$FAKE/cuda/fail"
set +e
err=$(ctr_t task checkpoint cuda 2>&1)
rc=$?
set -e
rm -f "$FAKE/cuda/fail"
((rc != 0 && rc != 124)) || nv_fail "a checkpoint with a failing toggle: rc=$rc (124: hung): $err"
echo "$err" >&2
nv_assert_contains "$err" "${cp[1]}" "error names the pid whose toggle failed"
nv_assert_contains "$err" "CUDA_ERROR_UNKNOWN" "error carries the driver's answer"
nv_assert_eq RUNNING "$(nv_task_status cuda)" "container state after the rollback"
for c in "${cp[@]}"; do
  nv_assert_eq running "$(nv_fake_state "$c")" "CUDA state of $c after the rollback"
  nv_fake_advancing "$c" || nv_fail "process $c does not work after the rollback"
done
((${#cp[@]} == 2 && $(awk '$2=="unlock" && $5==0' "$log" | wc -l) == 2)) || nv_fail "rollback did not unlock both: $(cat "$log")"

nv_log "restored container: checkpoint again, then kill"
ctr_t c checkpoint --task cuda cudaref2
for c in "${cp[@]}"; do
  nv_assert_eq running "$(nv_fake_state "$c")" "CUDA state of $c after the second checkpoint"
  nv_fake_advancing "$c" || nv_fail "process $c does not work after the second checkpoint"
done
ctr_t task kill -s KILL cuda
stopped cuda
ctr_t task rm cuda >/dev/null
ctr_t c rm cuda

nv_log "a restore whose CUDA restore fails names the sandbox pid and the driver's answer"
for c in "${cp[@]}"; do
  printf checkpointed >"$FAKE/cuda/$c.state"
  touch "$FAKE/cuda/$c.closed"
done
touch "$FAKE/cuda/${cp[1]}.unrestorable"
set +e
err=$(ctr_t c restore --live cuda cudaref </dev/null 2>&1)
rc=$?
set -e
echo "$err" >&2
((rc != 0 && rc != 124)) || nv_fail "a restore whose CUDA restore fails: rc=$rc (124: hung): $err"
nv_assert_contains "$err" "${cp[1]}" "the failed restore names the sandbox pid"
nv_assert_contains "$err" "CUDA_ERROR_NOT_SUPPORTED" "the failed restore carries the driver's answer"
ctr_t task kill -s KILL cuda >/dev/null 2>&1 || true
ctr_t task rm -f cuda >/dev/null 2>&1 || true
nv_log "case fork: a CUDA parent's 2 forked workers drop their inherited device files in place, checkpoint, restore"
rm -f "$FAKE"/cuda/*
ctr_t run -d --runtime $NV_RT "${GPU[@]}" "${MOUNTS[@]}" "$NV_IMAGE" fork \
  /fake/fake_cuda_app --dir /fakecuda --device /dev/fakegpu0 --map --fork-workers 2
nv_wait_for -t 20 bash -c "[[ \$(ls $FAKE/cuda | grep -c '\.ready$') -ge 3 ]]" || nv_fail "fork app did not start: $(ls "$FAKE/cuda")"
parent=$(nv_fake_cuda_pids)
mapfile -t workers < <(ls "$FAKE/cuda" | sed -n 's/^\([0-9]*\)\.fd$/\1/p' | sort -n)
nv_assert_eq 2 "${#workers[@]}" "forked workers in the sandbox"
in_sandbox_fd() { CTR_DEADLINE=30 ctr_t task exec --exec-id "fd$1$RANDOM" fork ls -l "/proc/$1/fd/$(cat "$FAKE/cuda/$1.fd")"; }
for w in "${workers[@]}"; do nv_assert_contains "$(in_sandbox_fd "$w")" "/dev/fakegpu0" "worker $w holds the inherited device"; done
ctr_t c checkpoint --task --rw fork forkref
rep=$(bundle fork)/checkpoint-diagnostic.json
jq -e '.verdict == "done" and (.released.processes | length) == 2' "$rep" >/dev/null || nv_fail "checkpoint report: $(cat "$rep")"
for w in "${workers[@]}"; do
  nv_assert_contains "$(in_sandbox_fd "$w")" "/dev/null" "worker $w's inherited fd after the drop"
  nv_fake_advancing "$w" || nv_fail "worker $w does not work after the drop and the checkpoint"
done
nv_fake_advancing "$parent" || nv_fail "the CUDA parent does not work after the checkpoint"
ctr_t task kill -s KILL fork
stopped fork
ctr_t task rm fork >/dev/null
ctr_t c rm fork
printf checkpointed >"$FAKE/cuda/$parent.state"
touch "$FAKE/cuda/$parent.closed"
ctr_t c restore --live --rw fork forkref </dev/null
nv_assert_eq RUNNING "$(nv_task_status fork)" "restored container state"
nv_assert_eq running "$(nv_fake_state "$parent")" "CUDA state of the parent after the restore"
nv_fake_advancing "$parent" || nv_fail "the CUDA parent does not work after the restore"
for w in "${workers[@]}"; do
  nv_fake_advancing "$w" || nv_fail "worker $w does not work after the restore"
  nv_assert_contains "$(in_sandbox_fd "$w")" "/dev/null" "worker $w's inherited fd after the restore"
done
ctr_t task kill -s KILL fork >/dev/null 2>&1 || true
stopped fork
ctr_t task rm -f fork >/dev/null 2>&1 || true

nv_log "case jobs: a job runner's short-lived CUDA children in the sandbox, where nothing holds them still"
# Issue 33, item 2: workers end between the scan and their toggle, and new ones start during the
# checkpoint; each checkpoint leaves out the ones that ended and takes in the ones that started.
rm -f "$FAKE"/cuda/*
ctr_t run -d --runtime $NV_RT "${GPU[@]}" "${MOUNTS[@]}" "$NV_IMAGE" jobs \
  /fake/fake_cuda_app --dir /fakecuda --device /dev/fakegpu0 --map --job-every 500 --job-life 1000
nv_wait_for -t 20 test -e "$FAKE/cuda/1.ready" || nv_fail "the job runner did not start: $(ls "$FAKE/cuda")"
jobs_started() { (($(cat "$FAKE/cuda/1.jobs" 2>/dev/null || echo 0) > $1)); }
echo 50 >"$FAKE/cuda/delay_ms"
for i in 1 2 3; do
  nv_wait_for -t 30 jobs_started $((i * 3)) || nv_fail "the job runner starts no jobs"
  out=$(ctr_t c checkpoint --task --rw jobs "jobsref$i" 2>&1) || nv_fail "checkpoint $i of the job runner failed: $out"
  nv_assert_eq RUNNING "$(nv_task_status jobs)" "the job runner after checkpoint $i"
done
rm -f "$FAKE/cuda/delay_ms"
done_jobs=$(cat "$FAKE/cuda/1.jobs")
nv_wait_for -t 10 jobs_started "$done_jobs" || nv_fail "the job runner starts no jobs after the checkpoints"
ctr_t task kill -s KILL jobs
stopped jobs
ctr_t task rm jobs >/dev/null
ctr_t c rm jobs

echo "PASS runsc_gpu_fake ($RUNSC, containerd $NV_CONTAINERD_VERSION)"
