#!/usr/bin/env bash
# Issue 5 acceptance: `ctr` checkpoint of a busybox container through our shim, with runc + CRIU
# (or NV_RUNTIME=runsc, whose checkpoint needs no CRIU), restores to a running container whose
# state continued: a shell loop's counter, kept in the process's memory, goes on from where it was.
# Usage: checkpoint_restore.sh [1.6|1.7]
set -euo pipefail
source "$(dirname "$0")/lib/shim-env.sh"
nv_start_with_shim --containerd "${1:-1.6}"

# The loop replaces the counter file by a rename: `echo $i >/tmp/counter` truncates it before it
# writes, and a read in between (more likely under runsc, and right after its restore) saw nothing.
# The reader's "." shows that the exec's whole output arrived.
counter() {
  local out
  out=$(nv_ctr task exec --exec-id "c$RANDOM" "$1" sh -c 'cat /tmp/counter; echo .') || return
  [[ $out == *. ]] || nv_fail "exec output of container $1 is incomplete: [$out]"
  out=${out%.}
  [[ $out =~ ^[0-9]+$'\n'?$ ]] || nv_fail "container $1's counter reads [$out]"
  echo "${out%$'\n'}"
}
counter_positive() { [[ $(counter "$1" 2>/dev/null || echo 0) -gt 0 ]]; }

# A bigger /dev/shm than containerd's own 64 MiB, as LLM servers are given: a second mount at
# /dev/shm, which runsc cannot restore beside the first (the shim drops the hidden one).
shm_kib=262144
nv_ctr run -d --runtime $NV_RT --mount "type=tmpfs,src=tmpfs,dst=/dev/shm,options=nosuid:nodev:size=${shm_kib}k" \
  "$NV_IMAGE" ck sh -c 'i=0; while :; do i=$((i+1)); echo $i >/tmp/counter.new; mv /tmp/counter.new /tmp/counter; sleep 0.1; done'
counter_above() { [[ $(counter "$1" 2>/dev/null || echo 0) -gt $2 ]]; }
nv_wait_for -t 20 counter_positive ck || nv_fail "counter never started"
# df's 1K-blocks of /dev/shm: the user's mount is the one the container sees.
shm_size() { nv_ctr task exec --exec-id "shm$RANDOM" "$1" df -k /dev/shm | awk 'NR==2{print $2}'; }
nv_assert_eq "$shm_kib" "$(shm_size ck)" "/dev/shm's size (KiB) in the container"
if [[ $NV_RUNTIME == runsc ]]; then
  grep -qF 'runsc: dropped mount' "$NV_DIR/containerd.log" \
    || nv_fail "the shim did not log the /dev/shm mount it dropped for runsc (containerd.log)"
fi
# Far from where a loop started afresh would be.
nv_wait_for -t 30 counter_above ck 29 || nv_fail "counter does not advance: $(counter ck)"

# --rw: the rw layer goes with the checkpoint. Under runsc that layer holds runsc's own overlay file
# (.gvisor.filestore.ck, the container's writes), which the shim removes before runsc restores.
nv_log "checkpoint with the rw layer (container keeps running)"
# Read before the checkpoint: the image is taken later, so the restored count is at least this.
before=$(counter ck)
nv_ctr c checkpoint --task --rw ck ckref
nv_log "counter before checkpoint: $before"
st=$(nv_ctr task ls | awk '$1=="ck"{print $3}')
nv_assert_eq RUNNING "$st" "container state after a leave-running checkpoint"

nv_log "remove the original, restore from the checkpoint"
nv_ctr task kill -s KILL ck
nv_wait_for -t 10 bash -c "ctr -a $NV_SOCK -n $NV_NAMESPACE task ls | awk '\$1==\"ck\"{print \$3}' | grep -qx STOPPED"
nv_ctr task rm ck >/dev/null
nv_ctr c rm ck
nv_ctr c restore --live --rw ck ckref </dev/null
if [[ $NV_RUNTIME == runsc ]]; then
  grep -qF 'removed the stale runsc filestore' "$NV_DIR/containerd.log" \
    || nv_fail "the restored rw layer brought no runsc filestore, or the shim did not remove it (containerd.log)"
fi
st=$(nv_ctr task ls | awk '$1=="ck"{print $3}')
nv_assert_eq RUNNING "$st" "restored container state"
after=$(counter ck)
nv_log "counter right after restore: $after"
nv_assert_eq "$shm_kib" "$(shm_size ck)" "/dev/shm's size (KiB) in the restored container"
nv_wait_for -t 10 counter_above ck "$after" || nv_fail "restored loop is not running: stays at $after"
later=$(counter ck)
nv_log "counter later: $later"
# The checkpoint was taken after `before` was read, so the restored loop resumes at or above it;
# a loop that started afresh would be back near 1.
((before >= 20)) || nv_fail "counter too low before the checkpoint: $before"
((after >= before)) || nv_fail "state did not continue: before=$before after=$after"
((later > after)) || nv_fail "restored loop is not running: $after then $later"
nv_ctr task kill -s KILL ck
echo "PASS checkpoint_restore ($NV_RUNTIME, containerd $NV_CONTAINERD_VERSION)"
