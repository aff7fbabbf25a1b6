#!/usr/bin/env bash
# shellcheck disable=SC2016 # jq filters read $ENV.X: the shell must not expand them
# Issue 48: Kubernetes after containerd 2.4 (which removed CRI's restore-by-create): a pod restored
# from a checkpoint image by annotation (restore.nvproxy.io/<container name>), through CRI and the
# real crictl, containerd configured from docs/install.md's blocks (pod_annotations included).
#   node A   a fake-CUDA container (parent and child) and a plain counter, each having written a
#            file into its writable layer, checkpointed through CRI (crictl checkpoint) into the
#            shim's store, each made a checkpoint image (`image push --kube`) in a registry on
#            loopback.
#   node B   a second containerd of the same version (its own root, state and store):
#            refusals at the task's create (CRI's StartContainer), each with its reason and nothing
#            left running: restore by
#            annotation off in the shim's config, a tag, a host path, a repository not allowed,
#            a capability the new container does not grant, a blob altered in the registry;
#            then a pod whose CUDA container is restored (CUDA back in both processes, the work
#            going on from the checkpoint, the writable layer's file there) beside a sidecar that
#            starts fresh; then the counter fanned out into three pods, one store entry; then
#            ctr run --annotation (no CRI): read from ctr's spec, refused before CRIU as the
#            container lacks CRI's mounts.
# Usage: cri_annotation.sh 2.4|2.3
set -euo pipefail
source "$(dirname "$0")/lib/cri.sh"
source "$(dirname "$0")/lib/fake-cuda.sh"
source "$(dirname "$0")/lib/registry.sh"
VER=${1:?usage: cri_annotation.sh 2.4|2.3}
NODE=${NV_CRI_NODE:-A}

nv_fake_cuda "${NV_B_FAKE:-}"
nv_cri_node_config "$NV_FAKE_CHECKPOINT" nvproxy-annstore
nv_cri_start "$VER"

CUDA_MOUNTS=$(jq -n --arg f "$FAKE" '[
  {container_path: "/dev/fakegpu0", host_path: ($f + "/fakegpu0")},
  {container_path: "/fakecuda", host_path: ($f + "/cuda")},
  {container_path: "/fake", host_path: ($f + "/bin"), readonly: true}]')
export CUDA_MOUNTS
# The containers as both nodes create them (node B: the same image, command and mounts).
export CUDA_CMD='echo written-on-a >/written; echo shm-on-a >/dev/shm/nvproxy-marker; exec /fake/fake_cuda_app --dir /fakecuda --device /dev/fakegpu0 --map --children 1'
export COUNT_CMD='echo counter-on-a >/written; i=0; while :; do i=$((i+1)); echo $i >/tmp/c.new; mv /tmp/c.new /tmp/counter; sleep 0.1; done'
cuda_ctr() { nv_cri_ctr "$1" "$2" cuda '.mounts = ($ENV.CUDA_MOUNTS | fromjson) | .command = ["sh", "-c", $ENV.CUDA_CMD]'; }
count_ctr() { nv_cri_ctr "$1" "$2" counter "${3:-.} | .command = [\"sh\", \"-c\", \$ENV.COUNT_CMD]"; }
counter_of() { nv_crictl exec "$1" cat /tmp/counter 2>/dev/null || echo 0; }
counter_past() { (($(counter_of "$1") > $2)); }
cuda_ready() { (($(find "$FAKE/cuda" -name '*.ready' | wc -l) >= $1)); }

# ---------------------------------------------------------------------------------------------
node_b() {
  local before=$NV_B_BEFORE at=$NV_B_COUNT_AT cuda_img=$NV_B_CUDA_IMAGE count_img=$NV_B_COUNT_IMAGE
  local -a cp
  read -ra cp <<<"$NV_B_CUDA_PIDS"
  nv_log "node B: containerd $NV_CONTAINERD_VERSION on $NV_SOCK, store $STORE, registry $NV_REGISTRY"

  # refuse NAME WANT [POD_JQ] [CTR_JQ]: a pod annotated with NAME's restore, whose counter's task
  # create (CRI creates the task at StartContainer) is refused with WANT in the error; nothing of
  # it runs and B's store holds no image.
  refuse() {
    local name=$1 want=$2 podjq=${3:-.} ctrjq=${4:-.} pod id err
    pod=$(nv_cri_pod "$name" "$podjq")
    id=$(count_ctr "$name" "$pod" "$ctrjq")
    if err=$(nv_crictl start "$id" 2>&1); then
      nv_fail "$name: the restore was not refused; the spec's annotations: $(jq -c .annotations "$(nv_cri_bundle "$id")/config.json")"
    fi
    nv_assert_contains "$err" "$want" "$name: the refusal's reason"
    [[ $(nv_cri_state "$id") != CONTAINER_RUNNING ]] || nv_fail "$name: the refused container runs"
    # Chunks that arrived whole wait in .incoming-DIGEST for the next pull: no image is made of them.
    [[ -z $(find "$STORE" -name '*.img' -not -path '*/.incoming-*/*') ]] ||
      nv_fail "$name: B's store holds an image: $(find "$STORE" -name '*.img' -not -path '*/.incoming-*/*')"
    nv_crictl rmp -f "$pod" >/dev/null
    nv_log "refused ($name): ${err##*desc = }"
  }
  ann() { printf '.annotations = {"restore.nvproxy.io/counter": "%s"}' "$1"; }

  nv_log "node B: refusals at create"
  local shim_cfg=$NV_CRI_SHIM_CONFIG
  # The shim reads its configuration at every create: this create sees restore by annotation off.
  sed -i 's/^  annotation_restore: true$/  annotation_restore: false/' "$shim_cfg"
  refuse off "checkpoint.annotation_restore is off" "$(ann "$count_img")"
  sed -i 's/^  annotation_restore: false$/  annotation_restore: true/' "$shim_cfg"
  refuse tag "pinned by digest" "$(ann "$NV_REGISTRY/ckpt/counter:v1")"
  refuse path "never a host path" "$(ann "$STORE/registry")"
  local other=${count_img/\/ckpt\//\/elsewhere\/}
  refuse repo "is not in checkpoint.annotation_registries" "$(ann "$other")"
  refuse caps "which this container's spec does not grant" "$(ann "$count_img")" \
    '.linux.security_context.capabilities.drop_capabilities = ["CHOWN"]'
  # A chunk of the memory altered in the registry: its digest, checked as it arrives, refuses it.
  nv_registry_alter_pages "$NV_B_COUNT_DATA"
  refuse altered "the bytes that arrived are" "$(ann "$count_img")"
  nv_registry_unalter

  nv_log "node B: a pod whose CUDA container is restored by annotation, beside a sidecar that starts fresh"
  nv_fake_as_checkpointed "${cp[@]}"
  local log=$FAKE/cuda/calls.log
  : >"$log"
  local pod r side
  pod=$(nv_cri_pod llm "$(printf '.annotations = {"restore.nvproxy.io/cuda": "%s"}' "$cuda_img")")
  r=$(cuda_ctr llm "$pod")
  side=$(nv_cri_ctr llm "$pod" sidecar '.command = ["sh", "-c", "echo sidecar-fresh; ls /written 2>&1; exec sleep 1000"]')
  nv_crictl start "$r" "$side" >/dev/null
  nv_assert_eq CONTAINER_RUNNING "$(nv_cri_state "$r")" "the restored container"
  nv_assert_eq CONTAINER_RUNNING "$(nv_cri_state "$side")" "the sidecar"
  cat "$log" >&2
  nv_fake_resumed "restore by annotation" "${cp[@]}"
  local after
  after=$(nv_fake_counter "${cp[0]}")
  ((after >= before)) || nv_fail "the work did not go on from the checkpoint: before=$before after=$after"
  nv_assert_contains "$(tr '\0' ' ' <"/proc/$(nv_cri_pid "$r")/cmdline")" /fake/fake_cuda_app "the restored init"
  nv_assert_eq written-on-a "$(nv_crictl exec "$r" cat /written)" "the writable layer's file from node A"
  nv_assert_eq shm-on-a "$(nv_crictl exec "$r" cat /dev/shm/nvproxy-marker)" "the pod's /dev/shm file from node A"
  nv_wait_for -t 10 nv_cri_logs_have "$side" sidecar-fresh || nv_fail "the sidecar did not start fresh: $(nv_crictl logs "$side" 2>&1)"
  nv_assert_contains "$(nv_crictl logs "$side" 2>&1)" "No such file" "the sidecar's rootfs has no restored file"
  nv_crictl rmp -f "$pod" >/dev/null

  nv_log "node B: the counter fanned out into three pods from one image"
  local -a ids=()
  local i id
  for i in 1 2 3; do
    pod=$(nv_cri_pod "fan$i" "$(ann "$count_img")")
    id=$(count_ctr "fan$i" "$pod")
    ids+=("$id")
  done
  nv_crictl start "${ids[@]}" >/dev/null
  for id in "${ids[@]}"; do
    nv_assert_eq CONTAINER_RUNNING "$(nv_cri_state "$id")" "replica $id"
    nv_wait_for -t 20 counter_past "$id" "$at" || nv_fail "replica $id does not count on from $at: $(counter_of "$id")"
    nv_assert_eq counter-on-a "$(nv_crictl exec "$id" cat /written)" "replica $id's writable layer"
  done
  nv_assert_eq 2 "$(find "$STORE/registry" -name .complete | wc -l)" "pulled images in B's store (CUDA, counter)"

  nv_log "node B: ctr, no CRI: an annotation read from ctr run's spec; a container without CRI's mounts is refused before CRIU"
  local kctr=("$NV_CTR" -a "$NV_SOCK" -n "$NV_CRI_NS") err
  if err=$("${kctr[@]}" run -d --runtime io.containerd.nvproxy.v1 --runtime-config-path "$shim_cfg" \
    --annotation "restore.nvproxy.io/by-ctr=$count_img" "$NV_IMAGE" by-ctr sh -c "$COUNT_CMD" 2>&1); then
    nv_fail "ctr run of a container without the checkpointed one's mounts was not refused"
  fi
  nv_assert_contains "$err" "this container's spec does not: CRIU puts every mount back" "ctr's refusal"
  nv_assert_contains "$err" "/etc/hosts" "ctr's refusal names CRI's mounts"
  nv_log "refused (ctr): ${err##*refused: }"
  "${kctr[@]}" c rm by-ctr >/dev/null 2>&1 || true
  echo "PASS node B (containerd $NV_CONTAINERD_VERSION)"
}

if [[ $NODE == B ]]; then
  node_b
  exit 0
fi

# ---------------------------------------------------------------------------------------------
nv_log "node A: a fake-CUDA container and a counter, checkpointed through CRI into the store"
POD=$(nv_cri_pod a)
K=$(cuda_ctr a "$POD")
C=$(count_ctr a "$POD")
nv_crictl start "$K" "$C" >/dev/null
nv_wait_for -t 10 cuda_ready 2 || nv_fail "the fake CUDA app did not start: $(ls "$FAKE/cuda")"
mapfile -t cp < <(nv_fake_cuda_pids)
nv_assert_eq 2 "${#cp[@]}" "CUDA processes in the container"
nv_wait_for -t 30 nv_fake_counted_past "${cp[0]}" 300 || nv_fail "process ${cp[0]} does not count"
before=$(nv_fake_counter "${cp[0]}")
nv_crictl checkpoint --export="$NV_CRI_DIR/cuda.tar" "$K" >/dev/null
nv_wait_for -t 20 counter_past "$C" 20 || nv_fail "the counter does not count: $(counter_of "$C")"
at=$(counter_of "$C")
nv_crictl checkpoint --export="$NV_CRI_DIR/counter.tar" "$C" >/dev/null
for a in cuda counter; do
  # grep reads the whole list: with -q it could leave while tar still writes, and pipefail would
  # take tar's SIGPIPE for a missing file.
  tar -tf "$NV_CRI_DIR/$a.tar" | grep -x rootfs-diff.tar >/dev/null || nv_fail "CRI's archive of $a has no rootfs-diff.tar"
done

nv_registry_start
SHIM=$NVPROXY_SHIM_DIR/containerd-shim-nvproxy-v1
printf 'checkpoint:\n  registry_timeout_s: 60\n' >"$NV_DIR/push.yaml"
push() {  # ARCHIVE REFERENCE -> "DATA IMAGE"
  local out data img
  out=$("$SHIM" image push --kube "$1" "$2" --tls-verify=false --store "$STORE" --config "$NV_DIR/push.yaml" 2>&1) \
    || nv_fail "image push --kube $1: $out"
  nv_log "$out"
  data=$(awk '/^pushed /{print $NF}' <<<"$out")
  img=$(awk '/^checkpoint image of container /{print $NF}' <<<"$out")
  [[ $img == "$NV_REGISTRY/ckpt/"*"@sha256:"* && -n $data ]] || nv_fail "no pinned checkpoint image in: $out"
  echo "$data $img"
}
read -r cuda_data cuda_img <<<"$(push "$NV_CRI_DIR/cuda.tar" "$NV_REGISTRY/ckpt/cuda:v1")"
read -r count_data count_img <<<"$(push "$NV_CRI_DIR/counter.tar" "$NV_REGISTRY/ckpt/counter:v1")"
nv_crictl rmp -f "$POD" >/dev/null
rm -rf "${STORE:?}"/*
nv_log "node B: a second containerd $VER restoring from $cuda_img and $count_img"
env -u NV_DIR -u NV_SOCK -u NV_STATE_DIR -u NV_NAMESPACE NV_CRI_NODE=B NV_B_FAKE="$FAKE" NV_B_CUDA_PIDS="${cp[*]}" \
  NV_B_BEFORE="$before" NV_B_COUNT_AT="$at" NV_B_REGISTRY="$NV_REGISTRY" NV_B_REGISTRY_DIR="$NV_REGISTRY_DIR" \
  NV_B_CUDA_IMAGE="$cuda_img" NV_B_COUNT_IMAGE="$count_img" NV_B_COUNT_DATA="$count_data" NV_B_CUDA_DATA="$cuda_data" \
  bash "$0" "$VER" || nv_fail "node B failed"
echo "PASS cri_annotation (containerd $NV_CONTAINERD_VERSION, node A to node B through $NV_REGISTRY)"
