#!/usr/bin/env bash
# Issue 3 acceptance: pause/resume, metrics, Update of the memory limit (through our own ttrpc
# client: ctr has no `task update`), containerd restart with running tasks, kill -9 of the shim,
# and pod grouping (containers with one io.kubernetes.cri.sandbox-id share a shim). Under a crun
# without CRIU, a checkpoint is refused up front.
# Usage: operations.sh [1.6|1.7]
set -euo pipefail
source "$(dirname "$0")/lib/shim-env.sh"
CLIENT=${NVPROXY_SHIM_CLIENT:?NVPROXY_SHIM_CLIENT (build/test/tools/nvproxy-shim-client) is not set}
nv_start_with_shim --containerd "${1:-1.6}"
run_sleeper() { nv_ctr run -d --runtime $NV_RT "$@" "$NV_IMAGE" "${@: -1}" sleep 1000 >/dev/null; }

nv_log "pause and resume"
# Two processes for the whole test: a shell waiting on one long sleep. (A loop of short sleeps has
# moments with the shell alone, and pids.current below once sampled one of them.)
nv_ctr run -d --runtime $NV_RT "$NV_IMAGE" ops sh -c 'sleep 100000 & wait'
# The task runs as soon as ctr returns, its shell not yet forked: wait for the sleep to exist (a
# pause right away froze the lone shell, and pids.current then read 1 under load).
two_processes() { (($(nv_ctr task ps ops 2>/dev/null | awk 'NR>1' | wc -l) >= 2)); }
nv_wait_for -t 10 two_processes || nv_fail "the shell did not start its sleep: $(nv_ctr task ps ops 2>&1)"
nv_ctr task pause ops
nv_assert_eq PAUSED "$(nv_task_status ops)" "state after pause"
nv_ctr task resume ops
nv_assert_eq RUNNING "$(nv_task_status ops)" "state after resume"

# Debian 12's crun has no checkpoint command (built without CRIU): refused before anything else,
# with the reason, and the task runs on.
crun_bin=$(awk '$1=="binary:"{print $2; exit}' "$NVPROXY_SHIM_CONFIG")
if [[ $NV_RUNTIME == crun ]] && ! "$crun_bin" --version | grep -q -- '+CRIU'; then
  nv_log "checkpoint under a crun without CRIU ($crun_bin)"
  set +e
  err=$(nv_ctr c checkpoint --task ops opsref 2>&1)
  rc=$?
  set -e
  ((rc != 0)) || nv_fail "a crun without CRIU checkpointed"
  [[ $err == *"refused: crun "*" is built without CRIU"* ]] || nv_fail "the refusal does not say why: $err"
  nv_assert_eq RUNNING "$(nv_task_status ops)" "state after the refused checkpoint"
fi

nv_log "metrics"
m=$(nv_ctr task metrics ops)
echo "$m" >&2
if [[ -e /sys/fs/cgroup/cgroup.controllers ]]; then
  usage=$(awk '$1=="memory.usage"{print $2}' <<<"$m")
else
  usage=$(awk '$1=="memory.usage_in_bytes"{print $2}' <<<"$m")
fi
pids=$(awk '$1=="pids.current"{print $2}' <<<"$m")
[[ $usage =~ ^[0-9]+$ ]] && ((usage > 0)) || nv_fail "no memory usage in ctr task metrics"
[[ $pids =~ ^[0-9]+$ ]] && ((pids >= 2)) || nv_fail "pids.current should count the shell and its sleep, got [$pids]"

nv_log "Update: memory limit reaches the container's cgroup"
sock=$(cat "$(nv_bundle ops)/address")
if [[ $NV_RUNTIME == runsc ]]; then
  # runsc has no update command: the shim must say so plainly.
  set +e
  err=$("$CLIENT" "$sock" "$NV_NAMESPACE" update ops '{"memory":{"limit":67108864}}' 2>&1)
  rc=$?
  set -e
  ((rc != 0)) || nv_fail "update under runsc claimed success"
  nv_assert_contains "$err" "Unimplemented" "update under runsc"
else
"$CLIENT" "$sock" "$NV_NAMESPACE" update ops '{"memory":{"limit":67108864}}'
pid=$(nv_ctr task ls | awk '$1=="ops"{print $2}')
if [[ -e /sys/fs/cgroup/cgroup.controllers ]]; then
  limit=$(cat "/sys/fs/cgroup$(awk -F: '$1=="0"{print $3}' /proc/"$pid"/cgroup)/memory.max")
else
  limit=$(cat "/sys/fs/cgroup/memory$(awk -F: '$2=="memory"{print $3}' /proc/"$pid"/cgroup)/memory.limit_in_bytes")
fi
nv_assert_eq 67108864 "$limit" "memory limit in the container's cgroup"
fi

nv_log "containerd restart: the running task stays reachable through the shim"
nv_containerd_restart
nv_assert_eq RUNNING "$(nv_task_status ops)" "task state after containerd restart"
nv_assert_eq again "$(nv_ctr task exec --exec-id again ops echo again)" "exec after containerd restart"
nv_ctr task kill -s KILL ops
nv_wait_for -t 10 nv_task_stopped ops
nv_ctr task rm ops >/dev/null
nv_ctr c rm ops

nv_log "pod grouping: two containers of one sandbox share a shim"
nv_ctr run -d --runtime $NV_RT --annotation io.kubernetes.cri.sandbox-id=podA "$NV_IMAGE" pod-a sleep 1000
nv_ctr run -d --runtime $NV_RT --annotation io.kubernetes.cri.sandbox-id=podA "$NV_IMAGE" pod-b sleep 1000
nv_assert_eq 1 "$(nv_shim_pids | wc -l)" "shim processes for two containers of one pod"
nv_assert_eq "$(cat "$(nv_bundle pod-a)/address")" "$(cat "$(nv_bundle pod-b)/address")" "shared shim address"
nv_ctr task kill -s KILL pod-a
nv_wait_for -t 10 nv_task_stopped pod-a
nv_ctr task rm pod-a >/dev/null
nv_assert_eq RUNNING "$(nv_task_status pod-b)" "the pod's other container after one was removed"
nv_assert_eq b "$(nv_ctr task exec --exec-id b pod-b echo b)" "exec in the remaining container"
nv_ctr task kill -s KILL pod-b
nv_wait_for -t 10 nv_task_stopped pod-b
nv_ctr task rm pod-b >/dev/null
nv_ctr c rm pod-a pod-b
no_shims() { [[ -z $(nv_shim_pids) ]]; }
nv_wait_for -t 10 no_shims || nv_fail "the pod's shim did not exit after its last container"

nv_log "kill -9 of the shim: containerd cleans up through 'delete'"
nv_ctr run -d --runtime $NV_RT "$NV_IMAGE" crash sleep 1000
init=$(nv_ctr task ls | awk '$1=="crash"{print $2}')
bundle=$(nv_bundle crash)
sock=$(sed 's|^unix://||' "$bundle/address")
shim=$(nv_shim_pids)
[[ -n $shim ]] || nv_fail "no shim for the crash container"
kill -9 $shim
gone() { [[ $(nv_task_status crash) != RUNNING ]]; }
nv_wait_for -t 20 gone || nv_fail "containerd still reports the task RUNNING after the shim died"
nv_ctr task rm crash >/dev/null 2>&1 || true
nv_ctr c rm crash
dead() { ! kill -0 "$init" 2>/dev/null; }
nv_wait_for -t 10 dead || nv_fail "container process $init survived its shim's death"
# containerd runs our `delete` in the background after it marks the task gone: allow it to finish.
no_sock() { [[ ! -e $sock ]]; }
no_bundle() { [[ ! -d $bundle ]]; }
nv_wait_for -t 10 no_sock || nv_fail "the dead shim's socket $sock is left"
nv_wait_for -t 10 no_bundle || nv_fail "bundle $bundle is left"
grep -q " $bundle/rootfs " /proc/mounts && nv_fail "rootfs mount of the crashed container is left"
echo "PASS operations ($NV_RUNTIME, containerd $NV_CONTAINERD_VERSION)"
