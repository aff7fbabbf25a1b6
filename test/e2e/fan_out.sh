#!/usr/bin/env bash
# Issue 35, item 4: one checkpoint restored into several containers at once (replicas started from
# a warm process), with the image store on. A shell holds 4 MB of random hex in memory and, as it
# counts, writes its count and the checksum of that memory; it is checkpointed once, then
# NV_FAN_OUT (3) containers are restored from the one image at the same time. Each must run, go on
# counting from the checkpoint and hold the very same memory; the store keeps the one entry (no
# copy per replica); each replica is in its own network namespace (ctr's default), where the
# abstract unix sockets of a process restored into the host's would collide.
# Prints how long one restore and the fan-out took (not asserted: bench/ measures).
# Usage: fan_out.sh [1.6|1.7|2.3]   (NV_RUNTIME=runc|runsc)
set -euo pipefail
source "$(dirname "$0")/lib/shim-env.sh"
STORE=$(mktemp -d /tmp/nvproxy-store.XXXXXX)
nv_defer rm -rf "$STORE"
NV_SHIM_EXTRA="checkpoint:
  image_store: $STORE"
export NV_SHIM_EXTRA
nv_start_with_shim --containerd "${1:-1.6}"
N=${NV_FAN_OUT:-3}

entries() { find "$STORE" -name .complete -o -mindepth 3 -maxdepth 3 -type d | grep -v '\.complete$' | sort; }
# "COUNT MD5" of the memory, as the replica's own loop last wrote it.
sum_of() { nv_ctr task exec --exec-id "s$RANDOM" "$1" cat /tmp/sum 2>/dev/null || true; }
sum_count_above() {
  local s
  s=$(sum_of "$1")
  [[ -n $s ]] && ((${s%% *} > $2))
}

nv_ctr run -d --runtime $NV_RT "$NV_IMAGE" origin sh -c 'big=$(head -c 2000000 /dev/urandom | od -An -tx1 | tr -d " \n"); i=0
  while :; do i=$((i+1)); echo $i >/tmp/counter.new; mv /tmp/counter.new /tmp/counter
    if [ $((i % 5)) = 0 ]; then echo "$i $(echo "$big" | md5sum | cut -c1-32)" >/tmp/sum.new; mv /tmp/sum.new /tmp/sum; fi
    sleep 0.1; done'
nv_wait_for -t 30 sum_count_above origin 4 || nv_fail "the origin does not write its checksum"
want=$(sum_of origin)
want=${want#* }
nv_ctr c checkpoint --task --rw origin fan/origin:1
at=$(nv_counter origin)
nv_stop_rm origin
mapfile -t es < <(entries)
nv_assert_eq 1 "${#es[@]}" "store entries after the checkpoint"

# The time of one restore, then of N at once.
t0=$(date +%s%N)
timeout 120 "$NV_CTR" -a "$NV_SOCK" -n "$NV_NAMESPACE" c restore --live --rw one fan/origin:1 </dev/null
one_ms=$((($(date +%s%N) - t0) / 1000000))
nv_wait_for -t 10 sum_count_above one "$at" || nv_fail "the single restore does not go on"
nv_stop_rm one

t0=$(date +%s%N)
pids=()
for k in $(seq 1 "$N"); do
  # Bounded: a hung restore fails the test in two minutes, not at CTest's timeout.
  timeout 120 "$NV_CTR" -a "$NV_SOCK" -n "$NV_NAMESPACE" c restore --live --rw "fan$k" fan/origin:1 </dev/null \
    >"$NV_DIR/fan$k.out" 2>&1 &
  pids+=($!)
done
for k in $(seq 1 "$N"); do
  wait "${pids[$((k - 1))]}" || nv_fail "the restore of replica fan$k failed: $(cat "$NV_DIR/fan$k.out")"
done
fan_ms=$((($(date +%s%N) - t0) / 1000000))
for k in $(seq 1 "$N"); do
  nv_assert_eq RUNNING "$(nv_task_status "fan$k")" "replica fan$k"
  nv_wait_for -t 15 sum_count_above "fan$k" "$at" || nv_fail "replica fan$k does not go on from the checkpoint ($at): $(sum_of "fan$k")"
  got=$(sum_of "fan$k")
  nv_assert_eq "$want" "${got#* }" "the memory of replica fan$k"
done
ns=$(for k in $(seq 1 "$N"); do readlink "/proc/$(nv_task_pid "fan$k")/ns/net"; done | sort -u | wc -l)
nv_assert_eq "$N" "$ns" "network namespaces of the replicas"
# Each replica in a cgroup of its own, named after it (ctr hands over the image's spec, whose
# cgroupsPath names the origin): shared, one replica's `kill --all` would end them all.
if [[ $NV_RUNTIME != runsc ]]; then
  for k in $(seq 1 "$N"); do
    cg=$(cat "/proc/$(nv_task_pid "fan$k")/cgroup")
    [[ $cg == *"/fan$k"* && $cg != *"/origin"* ]] || nv_fail "replica fan$k is not in a cgroup of its own: $cg"
  done
fi
nv_stop_rm fan1
for k in $(seq 2 "$N"); do
  nv_assert_eq RUNNING "$(nv_task_status "fan$k")" "replica fan$k after fan1 was killed and removed"
done
mapfile -t after < <(entries)
nv_assert_eq "${es[*]}" "${after[*]}" "store entries after the fan-out (one entry read by all)"
nv_log "restore of one: ${one_ms} ms; of $N at once: ${fan_ms} ms (containerd $NV_CONTAINERD_VERSION, $NV_RUNTIME)"
for k in $(seq 2 "$N"); do nv_stop_rm "fan$k"; done
echo "PASS fan_out ($NV_RUNTIME, containerd $NV_CONTAINERD_VERSION, $N replicas)"
