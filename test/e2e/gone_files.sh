#!/usr/bin/env bash
# Issue 62: a file that a process held open on a bind mount at a leave-running checkpoint and that is
# gone at the restore. The race python_mp used to lose by chance, made on purpose: a shell appends to
# /out/held.log through one fd for its life; the checkpoint is taken, the original is killed and the
# file renamed away. The restore is refused before the runtime starts, naming the process, the file,
# its bind mount and that it was open for writing; nothing of the container runs and the image is as
# it was. The image's record lists the file (`diagnose --image` shows it and says it is gone). Put
# back, the same image restores and the shell goes on appending.
# Under runsc the image is gVisor's own: what can be checked are the bind mounts' sources, so there
# the mount's directory is renamed away.
# Usage: gone_files.sh [1.6|1.7|2|2.3]
set -euo pipefail
source "$(dirname "$0")/lib/shim-env.sh"
case $NV_RUNTIME in runc | crun | runsc) ;; *) nv_skip "$NV_RUNTIME does not checkpoint" ;; esac

STORE=$(mktemp -d /tmp/nvproxy-gone-store.XXXXXX)
WORK=$(mktemp -d /tmp/nvproxy-gone.XXXXXX)
nv_defer rm -rf "$STORE" "$WORK"
NV_SHIM_EXTRA="checkpoint:
  image_store: $STORE"
export NV_SHIM_EXTRA
nv_start_with_shim --containerd "${1:-1.6}"
SHIM=$NVPROXY_SHIM_DIR/containerd-shim-nvproxy-v1
OUT=$WORK/out
mkdir -p "$OUT"

lines() { if [[ -f $OUT/held.log ]]; then wc -l <"$OUT/held.log"; else echo 0; fi; }
lines_above() { (($(lines) > $1)); }
runtime_ids() {
  local bin
  bin=$(awk '$1=="binary:"{print $2; exit}' "$NVPROXY_SHIM_CONFIG")
  [[ -d $(nv_runtime_root gf) ]] || return 0
  "$bin" --root "$(nv_runtime_root gf)" list -q 2>/dev/null || true
}
nv_ctr run -d --runtime $NV_RT --mount "type=bind,src=$OUT,dst=/out,options=rbind:rw" "$NV_IMAGE" gf \
  sh -c 'exec 3>>/out/held.log; i=0; while :; do i=$((i+1)); echo $i >&3; sleep 0.05; done'
nv_wait_for -t 30 lines_above 10 || nv_fail "the writer does not write: $(lines) lines"

nv_log "leave-running checkpoint; the image's record lists the held file"
nv_ctr c checkpoint --task --rw gf gfref
entry=$(find "$STORE" -mindepth 3 -maxdepth 3 -type d | head -1)
[[ -n $entry ]] || nv_fail "no store entry in $STORE"
rec=$entry/nvproxy-cuda.json
if [[ $NV_RUNTIME == runsc ]]; then
  jq -e --arg s "$OUT" '.host_files | any(.path == "/out" and .host_path == $s)' "$rec" >/dev/null ||
    nv_fail "the record does not list the bind mount: $(cat "$rec")"
  gone_path=$OUT
  needles=("the bind mount $OUT -> /out; it is gone on this node")
else
  jq -e --arg h "$OUT/held.log" '.host_files | any(.path == "/out/held.log" and .host_path == $h and .writing and .pid == 1 and .fd == 3)' \
    "$rec" >/dev/null || nv_fail "the record does not list /out/held.log: $(cat "$rec")"
  gone_path=$OUT/held.log
  needles=("pid 1 (sh) held /out/held.log on the bind mount $OUT -> /out open for writing at the checkpoint; it is gone on this node")
fi
shown=$("$SHIM" diagnose --image "$entry") || nv_fail "diagnose --image: the files are all there, yet it says otherwise: $shown"
echo "$shown"
# Where the checkpoint's time went (issue 56): the log, the record and diagnose --image say it; with
# CRIU, its own split (frozen, memory dump, page write) and how long the shell was stopped.
done_line=$(grep -F 'checkpoint of \"gf\" done:' "$NV_DIR/containerd.log" | tail -1)
nv_assert_contains "$done_line" "snapshot=" "the checkpoint's phases in the log"
nv_assert_contains "$shown" "where the checkpoint's time went: " "diagnose --image shows the phases"
if [[ $NV_RUNTIME != runsc ]]; then
  nv_assert_contains "$done_line" "; CRIU: frozen " "CRIU's own split in the log"
  nv_assert_contains "$done_line" "the workload was stopped " "how long the workload was stopped"
  nv_assert_contains "$shown" "criu_frozen=" "diagnose --image shows CRIU's split"
  jq -e '.stopped_ms > 0 and (.checkpoint_phases | any(.name == "criu_memwrite"))' "$rec" >/dev/null ||
    nv_fail "the record lacks the phases: $(cat "$rec")"
fi
nv_assert_eq RUNNING "$(nv_task_status gf)" "container after the leave-running checkpoint"
nv_stop_rm gf
nv_ctr c rm gf 2>/dev/null || true
at_kill=$(lines)

nv_log "the held file renamed away: the restore is refused naming it"
mv "$gone_path" "$gone_path.away"
set +e
diag=$("$SHIM" diagnose --image "$entry")
drc=$?
set -e
echo "$diag"
nv_assert_eq 3 "$drc" "diagnose --image's exit status with the file gone"
nv_assert_contains "$diag" "it is gone on this node" "diagnose --image says the file is gone"
images_before=$(cd "$entry" && find . -type f -printf '%p %s\n' | sort | sha256sum)
set +e
err=$(nv_ctr c restore --live --rw gf gfref </dev/null 2>&1)
rc=$?
set -e
echo "$err" >&2
((rc != 0)) || nv_fail "the restore succeeded with the held file gone"
for n in "${needles[@]}" "put them back on this node or take the checkpoint again"; do
  nv_assert_contains "$err" "$n" "the refusal names it"
done
[[ $err == *CRIU* || $err == *"criu failed"* ]] && nv_fail "the runtime ran before the refusal: $err"
nv_assert_eq "" "$(runtime_ids)" "containers the runtime knows after the refusal"
# ctr keeps the task it created, never started: STOPPED, no process.
[[ $(nv_task_status gf) != RUNNING ]] || nv_fail "a task runs after the refusal: $(nv_ctr task ls)"
pgrep -f 'echo $i >&3' >/dev/null && nv_fail "a process of the container runs after the refusal: $(pgrep -af 'echo $i >&3')"
nv_ctr task rm gf >/dev/null 2>&1 || true
nv_assert_eq "$images_before" "$(cd "$entry" && find . -type f -printf '%p %s\n' | sort | sha256sum)" "the image after the refusal"
nv_ctr c rm gf 2>/dev/null || true

nv_log "put back: the same image restores and the writer goes on"
mv "$gone_path.away" "$gone_path"
nv_ctr c restore --live --rw gf gfref </dev/null
nv_assert_eq RUNNING "$(nv_task_status gf)" "restored container state"
nv_wait_for -t 30 lines_above "$at_kill" || nv_fail "the restored writer does not append: $(lines) lines, $at_kill at the kill"
grep -q "files on the container's bind mounts are there as the image needs them" "$NV_DIR/containerd.log" ||
  nv_fail "the restore did not log its check of the host files"
restored_line=$(grep -F 'restore of \"gf\" done in ' "$NV_DIR/containerd.log" | tail -1)
nv_assert_contains "$restored_line" "the runtime's restore " "the restore's phases in the log"
[[ $NV_RUNTIME == runsc ]] || nv_assert_contains "$restored_line" "(CRIU: restore " "CRIU's restore time in the log"
nv_stop_rm gf
echo "PASS gone_files ($NV_RUNTIME, containerd $NV_CONTAINERD_VERSION)"
