#!/usr/bin/env bash
# Issue 36, item 3: the space check counts what will be written, not what is allocated. The shim's
# image store is a 48 MiB tmpfs; a CUDA process (the fake driver) holds 8 MiB of data and 96 MiB of
# present zero pages (what the driver stages for a pool nothing wrote):
#   fits     as allocated (about 105 MiB) the image does not fit, but CRIU leaves zero pages out
#            (--skip-zero-pages): counted again after the CUDA checkpoint it fits, the checkpoint is
#            taken, and the restored process reads every page as it was;
#   refused  64 MiB of data: refused after that count, CUDA rolled back, the container running on;
#   full     the same with checkpoint.check_space off: CRIU runs out of space in the store, and the
#            failed dump is rolled back the same way (its partial image removed), the container
#            running on.
# Usage: zero_pages_space.sh [1.6|1.7|2.3]
set -euo pipefail
source "$(dirname "$0")/lib/shim-env.sh"
source "$(dirname "$0")/lib/fake-cuda.sh"
criu --help 2>&1 | grep -q -- '^ *--skip-zero-pages' || nv_skip "this CRIU has no --skip-zero-pages (scripts/build-criu.sh builds it)"
nv_fake_cuda
STORE=$(mktemp -d /tmp/nvproxy-small-store.XXXXXX)
nv_defer rm -rf "$STORE"
mount -t tmpfs -o size=48m nvproxy-small-store "$STORE"
nv_defer umount -l "$STORE"
NV_SHIM_EXTRA="$NV_FAKE_CHECKPOINT
  image_store: $STORE"
export NV_SHIM_EXTRA
nv_start_with_shim --containerd "${1:-2.3}"
MOUNTS=("${NV_FAKE_MOUNTS[@]}")
diag() { echo "$NV_STATE_DIR/io.containerd.runtime.v2.task/$NV_NAMESPACE/$1/checkpoint-diagnostic.json"; }
# The app's files in the fake driver's directory: $P.* (P: its pid as the fake driver names it).
rounds() { cat "$FAKE/cuda/$P.checked" 2>/dev/null || echo 0; }
app_pid() { P=$(nv_fake_cuda_pids | head -1); [[ -n $P ]]; }
start_app() {  # NAME DATA_MIB ZERO_MIB: the fake CUDA app, registered and checking its memory
  rm -f "$FAKE"/cuda/*
  nv_ctr run -d --runtime $NV_RT "${MOUNTS[@]}" "$NV_IMAGE" "$1" \
    /fake/fake_cuda_app --dir /fakecuda --device /dev/fakegpu0 --map --hold-mib "$2" --zero-mib "$3"
  nv_wait_for -t 30 app_pid || nv_fail "the fake app did not register with the fake driver"
  nv_wait_for -t 30 rounds_past 0 || nv_fail "the fake app never checked its memory: $(ls "$FAKE/cuda")"
}
checkpoint_fails() {  # NAME WHY: the checkpoint must fail (WHY: the message if it does not); its output in err
  local rc
  set +e
  err=$(nv_ctr c checkpoint --task --rw "$1" "${1}ref" 2>&1)
  rc=$?
  set -e
  ((rc != 0)) || nv_fail "$2"
}
runs_on() {  # NAME AFTER: CUDA back, the task running, the app's work going on, its memory intact
  nv_assert_eq running "$(cat "$FAKE/cuda/$P.state")" "the fake driver's CUDA state after $2"
  nv_assert_eq RUNNING "$(nv_task_status "$1")" "container state after $2"
  local r0
  r0=$(rounds)
  nv_wait_for -t 30 rounds_past "$r0" || nv_fail "the app does not go on after $2"
  [[ ! -e $FAKE/cuda/$P.corrupt ]] || nv_fail "the app's memory changed at $(cat "$FAKE/cuda/$P.corrupt")"
}
rounds_past() { (($(rounds) > $1)); }

nv_log "case fits: 8 MiB of data and 96 MiB of zero pages into 48 MiB"
start_app zs 8 96
nv_ctr c checkpoint --task --rw zs zsref || nv_fail "the checkpoint that fits without its zero pages failed"
d=$(diag zs)
jq -e '.space.counted_as_written == "after the CUDA checkpoint"' "$d" >/dev/null ||
  nv_fail "the space was not counted again after the CUDA checkpoint: $(jq -c .space "$d")"
zero=$(jq '.space.as_written.zero_bytes' "$d")
written=$(jq '.space.as_written.image_bytes' "$d")
nv_log "counted as written: $written bytes, zero pages $zero bytes"
((zero >= 90 * 1048576)) || nv_fail "$zero bytes of zero pages counted, not the 96 MiB"
((written < 40 * 1048576)) || nv_fail "$written bytes to write counted"
used=$(df -B1 --output=used "$STORE" | tail -1)
((used < 40 * 1048576)) || nv_fail "the store holds $used bytes: the zero pages were written"
nv_stop_rm zs
# The image holds the process in the checkpointed CUDA state: the fake driver's files say so, as
# checkpoint_gpu_fake.sh sets them (no newline: CRIU checks the size of a file the app holds open).
printf checkpointed >"$FAKE/cuda/$P.state"
touch "$FAKE/cuda/$P.closed"
rm -f "$FAKE/cuda/$P.checked" "$FAKE/cuda/$P.corrupt"
nv_ctr c restore --live --rw zs zsref </dev/null
nv_wait_for -t 30 rounds_past 1 || nv_fail "the restored app does not check its memory (rounds $(rounds))"
[[ ! -e $FAKE/cuda/$P.corrupt ]] || nv_fail "the restored memory differs at $(cat "$FAKE/cuda/$P.corrupt")"
nv_assert_eq running "$(cat "$FAKE/cuda/$P.state")" "the fake driver's CUDA state after the restore"
nv_stop_rm zs
nv_ctr image rm zsref >/dev/null 2>&1 || true
"$NVPROXY_SHIM_DIR/containerd-shim-nvproxy-v1" image prune --older-than 0 --store "$STORE"

nv_log "case refused: 64 MiB of data do not fit, even without the zero pages"
start_app zb 64 8
checkpoint_fails zb "64 MiB of data were checkpointed into 48 MiB"
nv_assert_contains "$err" "does not fit even without its zero pages" "the refusal says what was counted"
nv_assert_contains "$err" "CUDA restored in pids" "the refusal says CUDA was rolled back"
nv_assert_eq refused "$(jq -r .verdict "$(diag zb)")" "the diagnostic's verdict"
runs_on zb "the refusal"
nv_stop_rm zb

nv_log "case full: no space check, CRIU runs out of space while it dumps"
# The shim reads its configuration when it starts, for each container.
echo "  check_space: false" >>"$NVPROXY_SHIM_CONFIG"
start_app zf 64 8
checkpoint_fails zf "64 MiB of data were dumped into 48 MiB"
echo "$err" >&2
nv_assert_contains "$err" "No space left on device" "the failure quotes CRIU's own error"
used=$(df -B1 --output=used "$STORE" | tail -1)
((used < 4 * 1048576)) || nv_fail "the failed dump's $used bytes are still in the store"
runs_on zf "the failed dump"
nv_stop_rm zf
echo "PASS zero_pages_space (containerd $NV_CONTAINERD_VERSION)"
