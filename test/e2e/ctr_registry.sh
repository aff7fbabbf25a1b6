#!/usr/bin/env bash
# Issue 35, item 2: a `ctr` user's checkpoint to another node through a registry. Node A and node B
# are two containerd instances of the same version, each with its own root, state, socket and image
# store; a registry of the test's own (Debian's docker-registry on loopback) between them:
#   A  `ctr c checkpoint --task --rw` with the store on, then `image push --ctr NAME REF`: the memory
#      is pushed from A's store entry (REF's tag + ".data") and REF gets containerd's checkpoint
#      image as a few KB, its CRIU blob referring to the data by digest
#   B  (this script again, in a process of its own) `image pull --ctr REF` imports containerd's
#      checkpoint image; `ctr c restore --live --rw` on B pulls the data into B's store (its record
#      checked first) and the shell's counter goes on from the checkpoint. A's entry is gone by then.
# The same under runc and runsc (NV_RUNTIME).
# Usage: ctr_registry.sh [1.7|2.3]
set -euo pipefail
source "$(dirname "$0")/lib/shim-env.sh"
source "$(dirname "$0")/lib/registry.sh"
SHIM=$NVPROXY_SHIM_DIR/containerd-shim-nvproxy-v1
VER=${1:-2.3}

store_entries() { find "$1" -name .complete 2>/dev/null | wc -l; }
# The files that hold the process's memory: CRIU's page files, or gVisor's state file.
memory_files() {
  if [[ $NV_RUNTIME == runsc ]]; then find "$1" -name 'checkpoint.img' -o -name 'pages.img'; else find "$1" -name 'pages-*.img'; fi
}

if [[ ${NV_CTR_REGISTRY_NODE:-A} == B ]]; then
  REF=$2 NAME=$3 AT=$4
  STORE_B=$(mktemp -d /tmp/nvproxy-store-b.XXXXXX)
  nv_defer rm -rf "$STORE_B"
  NV_SHIM_EXTRA="checkpoint:
  image_store: $STORE_B
  registry_tls_verify: false
  registry_timeout_s: 60"
  export NV_SHIM_EXTRA
  nv_start_with_shim --containerd "$VER"
  nv_log "node B: containerd $NV_SOCK, store $STORE_B"
  printf 'checkpoint:\n  registry_timeout_s: 60\n' >"$NV_DIR/pull.yaml"
  out=$("$SHIM" image pull --ctr "$REF" --address "$NV_SOCK" --namespace "$NV_NAMESPACE" --store "$STORE_B" \
    --tls-verify=false --config "$NV_DIR/pull.yaml" 2>&1) || nv_fail "image pull --ctr: $out"
  nv_log "$out"
  nv_assert_contains "$out" "imported containerd's checkpoint image $NAME" "the pull"
  nv_assert_contains "$out" "record: container c1" "the record, read before anything else"
  # Read whole before grep looks: grep -q leaving early would end ctr by SIGPIPE (pipefail).
  images=$(nv_ctr images ls -q)
  grep -qx "$NAME" <<<"$images" || nv_fail "containerd on B has no image $NAME: $images"
  nv_assert_eq 1 "$(store_entries "$STORE_B")" "B's store entries before the restore (the archive only)"
  [[ -z $(memory_files "$STORE_B") ]] || nv_fail "the memory moved before the restore"

  nv_ctr c restore --live --rw c1 "$NAME" </dev/null
  nv_assert_eq RUNNING "$(nv_task_status c1)" "the container restored on B"
  nv_assert_eq 2 "$(store_entries "$STORE_B")" "B's store entries after the restore"
  [[ -n $(memory_files "$STORE_B/registry") ]] || nv_fail "the process's memory is not in B's store"
  grep -q "pulled\|registry" "$NV_DIR/containerd.log" || nv_fail "B's shim did not log the pull"
  nv_wait_for -t 10 nv_counter_above c1 0 || nv_fail "cannot read the restored counter"
  after=$(nv_counter c1)
  ((after >= AT)) || nv_fail "the restored loop did not go on from the checkpoint: at $AT, now $after"
  nv_wait_for -t 10 nv_counter_above c1 "$after" || nv_fail "the restored loop does not run on B"
  nv_log "node B: restored, the counter went on from $AT to $(nv_counter c1)"
  echo "PASS node B"
  exit 0
fi

STORE_A=$(mktemp -d /tmp/nvproxy-store-a.XXXXXX)
nv_defer rm -rf "$STORE_A"
NV_SHIM_EXTRA="checkpoint:
  image_store: $STORE_A"
export NV_SHIM_EXTRA
nv_start_with_shim --containerd "$VER"
nv_registry_start
nv_log "node A: containerd $NV_SOCK, store $STORE_A"

nv_ctr run -d --runtime $NV_RT "$NV_IMAGE" c1 sh -c 'big=$(head -c 2000000 /dev/urandom | od -An -tx1 | tr -d " \n"); i=0
  while :; do i=$((i+1)); echo $i >/tmp/counter.new; mv /tmp/counter.new /tmp/counter; sleep 0.1; done'
nv_wait_for -t 30 nv_counter_above c1 9 || nv_fail "the counter does not advance"
# Read before the checkpoint: the task runs on after it, so a count read afterwards can be past
# the image's (the restore then read as going back: "at 12, now 11").
at=$(nv_counter c1)
nv_ctr c checkpoint --task --rw c1 ckpt/c1:1
REF=$NV_REGISTRY/ckpt/c1:v1
printf 'checkpoint:\n  registry_timeout_s: 60\n' >"$NV_DIR/push.yaml"
out=$("$SHIM" image push --ctr ckpt/c1:1 "$REF" --address "$NV_SOCK" --namespace "$NV_NAMESPACE" --store "$STORE_A" \
  --tls-verify=false --config "$NV_DIR/push.yaml" 2>&1) || nv_fail "image push --ctr: $out"
nv_log "$out"
nv_assert_contains "$out" "$NV_REGISTRY/ckpt/c1@sha256:" "what was pushed"
nv_assert_contains "$out" "containerd's checkpoint image ckpt/c1:1: $NV_REGISTRY/ckpt/c1@sha256:" "the archive"
# The memory went from A's entry by hard links; nothing of the push is left in A's store.
[[ -z $(find "$STORE_A" -path '*/.outgoing/*' -o -name '.ctr-push-*') ]] || nv_fail "the push left files in A's store"
# Pushing a name containerd does not have is a clear error.
set +e
err=$("$SHIM" image push --ctr ckpt/none:1 "$REF" --address "$NV_SOCK" --namespace "$NV_NAMESPACE" --store "$STORE_A" \
  --tls-verify=false --config "$NV_DIR/push.yaml" 2>&1)
rc=$?
set -e
((rc != 0)) || nv_fail "a push of an image containerd does not have succeeded"
nv_assert_contains "$err" "has no image ckpt/none:1" "the error"

nv_ctr task kill -s KILL c1
nv_wait_for -t 20 bash -c "[[ \$(ctr -a $NV_SOCK -n $NV_NAMESPACE task ls | awk '\$1==\"c1\"{print \$3}') == STOPPED ]]" ||
  nv_fail "c1 did not stop on A"
rm -rf "${STORE_A:?}"/*  # B must not find anything of A's
nv_log "node B: a second containerd, restoring from $REF"
env -u NV_DIR -u NV_SOCK -u NV_STATE_DIR -u NV_NAMESPACE NV_CTR_REGISTRY_NODE=B \
  bash "$0" "$VER" "$REF" ckpt/c1:1 "$at" || nv_fail "node B failed"
echo "PASS ctr_registry (containerd $NV_CONTAINERD_VERSION)"
