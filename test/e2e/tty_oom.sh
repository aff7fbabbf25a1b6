#!/usr/bin/env bash
# Issue 3: `ctr run -t` and `ctr task exec -t` through a pty (driven by script(1) as the terminal,
# whose size the shim must pass on: ResizePty), and a memory-hog container gets an OOM event.
# Usage: tty_oom.sh [1.6|1.7]
set -euo pipefail
source "$(dirname "$0")/lib/shim-env.sh"
nv_start_with_shim --containerd "${1:-1.6}"
CTR="$NV_CTR -a $NV_SOCK -n $NV_NAMESPACE"

nv_log "ctr run -t: a terminal of the client's size"
# ctr sends the size (ResizePty) only after Start: the container waits a moment before reading it.
out=$(script -qec "stty cols 91 rows 37; $CTR run -t --rm --runtime $NV_RT $NV_IMAGE tty1 sh -c 'tty; sleep 1; stty size'" /dev/null </dev/null | tr -d '\r')
echo "$out" >&2
nv_assert_contains "$out" "/dev/pts/" "the container's stdin is a pty"
nv_assert_contains "$out" "37 91" "the pty has the client's size (ResizePty)"

nv_log "ctr task exec -t"
nv_ctr run -d --runtime $NV_RT "$NV_IMAGE" ttyexec sleep 1000
out=$(script -qec "stty cols 120 rows 40; $CTR task exec -t --exec-id x1 ttyexec sh -c 'tty; sleep 1; stty size'" /dev/null </dev/null | tr -d '\r')
echo "$out" >&2
nv_assert_contains "$out" "/dev/pts/" "the exec's stdin is a pty"
nv_assert_contains "$out" "40 120" "the exec's pty has the client's size"
nv_ctr task kill -s KILL ttyexec

nv_log "OOM event for a memory hog"
timeout 60 $CTR events >"$NV_DIR/events.txt" 2>&1 &
events_pid=$!
# Subscribed once an event of ours shows up: a container created and removed for that.
probe_seen() {
  nv_ctr c rm evprobe >/dev/null 2>&1 || true
  nv_ctr c create --runtime $NV_RT "$NV_IMAGE" evprobe true >/dev/null
  nv_ctr c rm evprobe >/dev/null
  grep -q evprobe "$NV_DIR/events.txt"
}
nv_wait_for -t 10 probe_seen || nv_fail "ctr events shows nothing: $(cat "$NV_DIR/events.txt")"
set +e
nv_ctr run --rm --runtime $NV_RT --memory-limit 33554432 "$NV_IMAGE" hog sh -c 'a=$(head -c 268435456 /dev/zero | tr "\0" a); echo survived'
rc=$?
set -e
oom_seen() { grep -q '/tasks/oom' "$NV_DIR/events.txt"; }
nv_wait_for -t 10 oom_seen || nv_fail "no /tasks/oom event (container exit $rc): $(cat "$NV_DIR/events.txt")"
kill $events_pid 2>/dev/null || true
((rc != 0)) || nv_fail "the memory hog was not killed"
grep '/tasks/oom' "$NV_DIR/events.txt" >&2
echo "PASS tty_oom ($NV_RUNTIME, containerd $NV_CONTAINERD_VERSION)"
