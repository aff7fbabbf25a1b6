#!/usr/bin/env bash
# Issue 57: the registry is spoken by nvproxy-image-transfer, which the shim runs under
# checkpoint.image_transfer_timeout_s. A container created with a restore annotation (ctr
# --annotation restore.nvproxy.io/<id>=REF) makes the shim pull: here through a stand-in program
# that hangs with a child in its process group. The create must fail within seconds, naming the
# image, the container and the deadline; the program and its child must be gone; no task is left
# and nothing of the restore stays in the bundle. Then with a program that is not there: the create
# fails naming the path and the setting. No registry is needed: the program is never a real one.
# Usage: image_transfer_deadline.sh [1.6|1.7|2]   (NV_RUNTIME=runc)
set -euo pipefail
source "$(dirname "$0")/lib/shim-env.sh"
VER=${1:-1.6}
REF=reg.example:5000/ckpt/app@sha256:$(printf 'a%.0s' $(seq 64))

WORK=$(mktemp -d /tmp/nvproxy-transfer-deadline.XXXXXX)
nv_defer rm -rf "$WORK"
cat >"$WORK/hang-transfer" <<EOF
#!/bin/sh
# Stands in for nvproxy-image-transfer: records its arguments and pids, then hangs with a child.
echo "\$@" >>"$WORK/args"
echo \$\$ >>"$WORK/pids"
sleep 600 &
echo \$! >>"$WORK/pids"
wait
EOF
chmod 0755 "$WORK/hang-transfer"
NV_SHIM_EXTRA="checkpoint:
  image_store: $WORK/store
  annotation_restore: true
  annotation_registries: [reg.example:5000/ckpt]
  image_transfer: $WORK/hang-transfer
  image_transfer_timeout_s: 2"
export NV_SHIM_EXTRA
nv_start_with_shim --containerd "$VER"

# create_refused ID: `ctr run` of ID with the annotation must fail; its output in $OUT.
create_refused() {
  local start=$SECONDS
  if OUT=$(nv_ctr run -d --runtime $NV_RT --annotation "restore.nvproxy.io/$1=$REF" "$NV_IMAGE" "$1" sleep 600 2>&1); then
    nv_fail "ctr run of $1 succeeded: $OUT"
  fi
  ELAPSED=$((SECONDS - start))
  nv_log "$1 refused after ${ELAPSED}s: $OUT"
  [[ -z $(nv_task_status "$1") ]] || nv_fail "a task of $1 is left: $(nv_ctr task ls)"
  [[ ! -e $(nv_bundle "$1")/restore-by-annotation ]] || nv_fail "the restore's files stayed in $1's bundle"
  nv_ctr c rm "$1" >/dev/null 2>&1 || true
}

nv_log "a transfer program that hangs: killed at the 2 s deadline, the create fails"
create_refused hang1
((ELAPSED < 30)) || nv_fail "the create took ${ELAPSED}s, the deadline is 2 s"
nv_assert_contains "$OUT" "create of container \"hang1\" from $REF" "the container and the image are named"
nv_assert_contains "$OUT" "nvproxy-image-transfer fetch-kube of the image $REF did not finish within 2000 ms" "the deadline is named"
nv_assert_contains "$(cat "$WORK/args")" "fetch-kube $REF" "the program was asked for the image"
for pid in $(cat "$WORK/pids"); do
  nv_wait_for -t 10 bash -c "! kill -0 $pid 2>/dev/null" || nv_fail "pid $pid of the hanging program outlived the deadline"
done

nv_log "a transfer program that is not there: the create fails naming it"
nv_set_checkpoint_key image_transfer "$WORK/nowhere/nvproxy-image-transfer"
create_refused gone1
nv_assert_contains "$OUT" "create of container \"gone1\" from $REF" "the container and the image are named"
nv_assert_contains "$OUT" "$WORK/nowhere/nvproxy-image-transfer cannot be found" "the missing program is named"
nv_assert_contains "$OUT" "checkpoint.image_transfer" "the setting is named"

# The shim still serves containers without the annotation.
nv_ctr run -d --runtime $NV_RT "$NV_IMAGE" plain sleep 600
nv_assert_eq RUNNING "$(nv_task_status plain)" "a container without the annotation"
nv_stop_rm plain
echo PASS
