#!/usr/bin/env bash
# Issue 7: N (default 500) create/start/exec/kill/delete cycles through containerd, all served by
# one shim (the containers share a sandbox id), must leave the shim and containerd with no growth
# in fds or threads, no zombie children, and memory growth under a stated bound. The cycles run in
# LANES (default 2) side by side: a cycle mostly waits on containerd and runc, and on a loaded
# 2-core machine one lane took 2.3 s a cycle (1175 s for 500).
# Usage: leak_cycles.sh [1.6|1.7] [CYCLES] [LANES]
set -euo pipefail
source "$(dirname "$0")/lib/shim-env.sh"
cycles=${2:-500}
lanes=${3:-2}
nv_start_with_shim --containerd "${1:-1.6}"
POD=(--annotation io.kubernetes.cri.sandbox-id=leakpod)

# An anchor keeps the pod's shim alive between cycles.
nv_ctr run -d --runtime $NV_RT "${POD[@]}" "$NV_IMAGE" anchor sleep 100000
shim=$(nv_shim_pids)
[[ $(wc -w <<<"$shim") == 1 ]] || nv_fail "expected one shim, got [$shim]"
ctd=$NV_CONTAINERD_PID

sample() {  # PID -> "fds threads rss_kib zombies"
  local fds thr rss zom
  fds=$(ls /proc/"$1"/fd | wc -l)
  thr=$(ls /proc/"$1"/task | wc -l)
  rss=$(awk '/^VmRSS/{print $2}' /proc/"$1"/status)
  zom=$(ps -o stat= --ppid "$1" | grep -c '^Z' || true)
  echo "$fds $thr $rss $zom"
}
cycle() {
  local id=leak$1
  nv_ctr run -d --runtime $NV_RT "${POD[@]}" "$NV_IMAGE" "$id" sleep 1000 >/dev/null
  local out rc=0
  out=$(nv_ctr task exec --exec-id e "$id" echo ok 2>"$NV_DIR/exec-$id.err") || rc=$?
  [[ $rc == 0 && $out == ok ]] || nv_fail "cycle $1: exec gave [$out], exit status $rc, stderr [$(cat "$NV_DIR/exec-$id.err")]"
  nv_ctr task kill -s KILL "$id"
  nv_wait_for -t 10 nv_task_stopped "$id" || nv_fail "cycle $1: task did not stop"
  nv_ctr task rm "$id" >/dev/null
  nv_ctr c rm "$id"
}

for i in $(seq 1 20); do cycle "w$i"; done  # warm-up: allocator pools, thread pool, connections
read -r s_fd s_thr s_rss s_zom <<<"$(sample "$shim")"
read -r c_fd c_thr c_rss _ <<<"$(sample "$ctd")"
nv_log "after warm-up: shim fds=$s_fd threads=$s_thr rss=${s_rss}KiB; containerd fds=$c_fd threads=$c_thr rss=${c_rss}KiB"
start=$(date +%s)
lane() {  # lane L runs cycles L, L+LANES, ... (a failing cycle fails its lane)
  local i
  for ((i = $1; i <= cycles; i += lanes)); do
    cycle "$i"
    if ((i % 100 == 0)); then nv_log "cycle $i: shim $(sample "$shim") containerd $(sample "$ctd")"; fi
  done
}
pids=()
for ((l = 1; l <= lanes; l++)); do
  lane "$l" &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || nv_fail "a lane of cycles failed (above)"; done
secs=$(($(date +%s) - start))
read -r e_fd e_thr e_rss e_zom <<<"$(sample "$shim")"
read -r d_fd d_thr d_rss _ <<<"$(sample "$ctd")"
nv_log "after $cycles cycles ($secs s): shim fds=$e_fd threads=$e_thr rss=${e_rss}KiB zombies=$e_zom; containerd fds=$d_fd threads=$d_thr rss=${d_rss}KiB"
((e_fd <= s_fd)) || nv_fail "shim fds grew: $s_fd -> $e_fd"
((e_thr <= s_thr + 2)) || nv_fail "shim threads grew: $s_thr -> $e_thr"
((e_zom == 0)) || nv_fail "shim has $e_zom zombie children"
((e_rss - s_rss <= 2048)) || nv_fail "shim RSS grew by $((e_rss - s_rss)) KiB (bound 2048)"
((d_fd <= c_fd + 5)) || nv_fail "containerd fds grew: $c_fd -> $d_fd"
((d_rss - c_rss <= 32768)) || nv_fail "containerd RSS grew by $((d_rss - c_rss)) KiB (bound 32768)"
echo "PASS leak_cycles: $cycles cycles in $secs s; shim fds $s_fd->$e_fd threads $s_thr->$e_thr rss ${s_rss}->${e_rss} KiB"
