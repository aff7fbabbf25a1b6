#!/usr/bin/env bash
# Issue 2/3 acceptance: the container lifecycle through our shim under a real containerd, with
# runc (or NV_RUNTIME) underneath. Usage: lifecycle.sh [1.6|1.7]
set -euo pipefail
source "$(dirname "$0")/lib/shim-env.sh"
nv_start_with_shim --containerd "${1:-1.6}"

# The shim sockets of this test's containers (read from their bundles while they run): other
# containerds on the host have theirs in the same directory.
task_socket() { sed 's|^unix://||' "$NV_STATE_DIR/io.containerd.runtime.v2.task/$NV_NAMESPACE/$1/address"; }

nv_log "run --rm echo hello"
out=$(nv_ctr run --rm --runtime $NV_RT "$NV_IMAGE" t-echo echo hello)
nv_assert_eq "hello" "$out" "ctr run --rm echo output"

nv_log "stdin reaches the container and its end arrives (CloseIO)"
# ctr asks for CloseIO only once the task exists (as containerd's runc shim needs too): feed stdin
# through a FIFO and end it after the task runs.
mkfifo "$NV_DIR/stdin-feed"
nv_ctr run --rm --runtime $NV_RT "$NV_IMAGE" t-stdin cat <"$NV_DIR/stdin-feed" >"$NV_DIR/stdin-out" &
run_pid=$!
exec {feed}>"$NV_DIR/stdin-feed"
task_running() { nv_ctr task ls | awk '$1=="t-stdin"{print $3}' | grep -qx RUNNING; }
nv_wait_for -t 20 task_running || nv_fail "t-stdin never ran: $(nv_ctr task ls)"
echo piped >&"$feed"
exec {feed}>&-
wait "$run_pid" || nv_fail "ctr run with stdin failed"
nv_assert_eq "piped" "$(cat "$NV_DIR/stdin-out")" "stdin through ctr run"

nv_log "exit code passes through"
set +e
nv_ctr run --rm --runtime $NV_RT "$NV_IMAGE" t-exit sh -c 'exit 3'
rc=$?
set -e
nv_assert_eq 3 "$rc" "ctr run exit code"

nv_log "events of a run"
# A plain command (not a shell function) so the background job is ctr itself, without our traps.
timeout 60 "$NV_CTR" -a "$NV_SOCK" -n "$NV_NAMESPACE" events >"$NV_DIR/events.txt" 2>&1 &
events_pid=$!
# The subscription is live once an event published after it comes back through it: label the
# image (an /images/update event) until one arrives.
probe=0
events_live() {
  probe=$((probe + 1))
  nv_ctr images label "$NV_IMAGE" "nvproxy.probe=$probe" >/dev/null
  nv_wait_for -t 2 grep -q '/images/update' "$NV_DIR/events.txt" 2>/dev/null
}
nv_wait_for -t 30 events_live || nv_fail "ctr events never delivered a probe event"
nv_ctr run --rm --runtime $NV_RT "$NV_IMAGE" t-ev true
nv_wait_for -t 10 grep -q '/tasks/delete' "$NV_DIR/events.txt" || true
kill $events_pid 2>/dev/null || true
wait $events_pid 2>/dev/null || true
for topic in /tasks/create /tasks/start /tasks/exit /tasks/delete; do
  grep -q "$topic" "$NV_DIR/events.txt" || nv_fail "ctr events lacks $topic: $(cat "$NV_DIR/events.txt")"
done

nv_log "detached container: task ls, ps, exec"
nv_ctr run -d --runtime $NV_RT "$NV_IMAGE" t-long sleep 1000
nv_wait_for nv_ctr task ls
line=$(nv_ctr task ls | awk '$1=="t-long"')
status=$(awk '{print $3}' <<<"$line")
pid=$(awk '{print $2}' <<<"$line")
nv_assert_eq RUNNING "$status" "task ls status"
if [[ $NV_RUNTIME != runsc ]]; then
  # The pid containerd reports is the container's init, a host process running sleep.
  nv_assert_contains "$(tr '\0' ' ' </proc/"$pid"/cmdline)" "sleep 1000" "pid $pid is the container's init"
fi
ps_out=$(nv_ctr task ps t-long)
if [[ $NV_RUNTIME == runsc ]]; then
  # runsc lists the sandbox's own pids: init is pid 1 there.
  nv_assert_eq 1 "$(awk 'NR>1{print $1}' <<<"$ps_out" | head -1)" "task ps lists the sandbox's init"
else
  nv_assert_contains "$ps_out" "$pid" "task ps lists init"
fi

out=$(nv_ctr task exec --exec-id e1 t-long cat /etc/hostname)
nv_assert_eq "nvproxy-test" "$out" "exec output"
set +e
nv_ctr task exec --exec-id e2 t-long sh -c 'exit 5'
rc=$?
set -e
nv_assert_eq 5 "$rc" "exec exit code"

nv_log "kill -> STOPPED, then rm leaves nothing behind"
long_socket=$(task_socket t-long)
[[ -S $long_socket ]] || nv_fail "no shim socket at $long_socket"
shim_pids=$(nv_shim_pids)
[[ -n $shim_pids ]] || nv_fail "no shim process found for the running container"
# sleep as pid 1 ignores SIGTERM (no handler), as under the runc shim: use KILL.
nv_ctr task kill -s KILL t-long
nv_wait_for -t 10 bash -c "ctr -a $NV_SOCK -n $NV_NAMESPACE task ls | awk '\$1==\"t-long\"{print \$3}' | grep -qx STOPPED" ||
  nv_fail "task not STOPPED after kill: $(nv_ctr task ls)"
nv_ctr task rm t-long
nv_ctr c rm t-long
nv_wait_for -t 10 bash -c "! kill -0 $shim_pids 2>/dev/null" || nv_fail "shim $shim_pids still running after task rm"
grep -q "$NV_DIR.*t-long" /proc/mounts && nv_fail "a mount of t-long is left: $(grep t-long /proc/mounts)"
[[ -e $long_socket ]] && nv_fail "shim socket left behind: $long_socket"

nv_log "10 containers at once"
# Two-digit names: runsc resolves ids by prefix, so t-par1 would be ambiguous next to t-par10.
pids=()
for i in $(seq -w 1 10); do
  nv_ctr run -d --runtime $NV_RT "$NV_IMAGE" "t-par$i" sleep 1000 &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || nv_fail "a concurrent ctr run failed"; done
running=$(nv_ctr task ls | awk '$1 ~ /^t-par/ && $3=="RUNNING"' | wc -l)
nv_assert_eq 10 "$running" "concurrent containers running"
par_sockets=()
for i in $(seq -w 1 10); do par_sockets+=("$(task_socket "t-par$i")"); done
pids=()
for i in $(seq -w 1 10); do
  (nv_ctr task kill -s KILL "t-par$i" && nv_wait_for -t 10 bash -c "ctr -a $NV_SOCK -n $NV_NAMESPACE task ls | awk '\$1==\"t-par$i\"{print \$3}' | grep -qx STOPPED" &&
    nv_ctr task rm "t-par$i" >/dev/null && nv_ctr c rm "t-par$i") &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || nv_fail "a concurrent cleanup failed"; done
left=$(nv_ctr c ls -q | grep -c t-par || true)
nv_assert_eq 0 "$left" "containers left after parallel cleanup"
no_shims() { [[ -z $(nv_shim_pids) ]]; }
nv_wait_for -t 10 no_shims ||
  nv_fail "shims left: $(nv_shim_pids)"
for sock in "${par_sockets[@]}"; do
  [[ -e $sock ]] && nv_fail "shim socket left behind after parallel run: $sock"
done
echo "PASS lifecycle ($NV_RUNTIME, containerd $NV_CONTAINERD_VERSION)"
