#!/usr/bin/env bash
# shellcheck disable=SC2016 # jq filters read $ENV.X: the shell must not expand them
# Issue 18: the Kubernetes path. containerd's CRI plugin with the runtime handler `nvproxy` bound to
# our shim, configured from the docs/install.md blocks, driven by the real crictl:
#   pod      runp, two containers served by one shim, exec (output, exit code), logs, stats, a stop
#            that delivers SIGTERM, rm, stopp/rmp ending the shim
#   cdi      CDI devices applied by CRI itself (cdi.k8s.io annotation, CDI devices field): the GPU
#            layer recognises the edits already in the spec and adds none twice
#   ckpt     2.3: `crictl checkpoint` of a running fake-CUDA container (lock all, checkpoint all,
#            resume; it keeps running), a refused checkpoint's error through CRI, then a restore by
#            creating a container from the archive: CUDA restored and unlocked, work continues.
#            1.7: CRI answers Unimplemented (printed).
#   registry NV_IMAGE_STORE=1 NV_REGISTRY_FLOW=1: the image goes from node A's store through a
#            registry (`image push --rewrite`, docker-registry on loopback) to node B: a second
#            containerd with its own root, state and store (this script again, in a process of its
#            own, A's container and store entries gone). A blob altered in the registry is refused
#            at B's restore, then B's restore pulls the image into B's store.
#            NV_REGISTRY_FLOW=image: Kubernetes' flow, the archive made a checkpoint image
#            (`image push --kube`), pulled by B's crictl and named by the restored container's spec.
#            The pod and cdi cases run in the plain cri test of the same version only (not with
#            NV_IMAGE_STORE or NV_REGISTRY_FLOW).
# Usage: cri.sh 1.7|2.3
set -euo pipefail
source "$(dirname "$0")/lib/cri.sh"
source "$(dirname "$0")/lib/fake-cuda.sh"
source "$(dirname "$0")/lib/registry.sh"
VER=${1:?usage: cri.sh 1.7|2.3}
FIX=${NVPROXY_FIXTURES_DIR:?NVPROXY_FIXTURES_DIR (build/test/fixtures) is not set}
[[ -x $FIX/fake_cuda_app && -f $FIX/libcuda.so && -f $FIX/libnvidia-ml.so ]] || nv_fail "fixtures missing in $FIX"

NODE=${NV_CRI_NODE:-A}
# A fake GPU host for CDI (as gpu_layer.sh) and the fake CUDA driver (as checkpoint_gpu_fake.sh).
# Node B runs on the same machine: it has the same GPU (A's fake host), nothing else of A's.
if [[ $NODE == B ]]; then
  F=${NV_B_FAKE:?}
else
  F=$(mktemp -d /tmp/nvproxy-crigpu.XXXXXX)
  nv_defer rm -rf "$F"
  mkdir -p "$F/dev" "$F/proc/gpus/0000:3b:00.0" "$F/driver/lib" "$F/cuda" "$F/bin"
  mknod "$F/dev/nvidia0" c 195 0
  mknod "$F/dev/nvidiactl" c 195 255
  printf 'Model: \t\t NVIDIA H200\nGPU UUID: \t GPU-11111111-2222-3333-4444-555555555555\nDevice Minor: \t 0\n' \
    >"$F/proc/gpus/0000:3b:00.0/information"
  echo "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.0  Release Build" >"$F/proc/version"
  echo "fake libcuda 580.0" >"$F/driver/lib/libcuda.so.580.0"
  touch "$F/fakegpu0"
  cp "$FIX/fake_cuda_app" "$F/bin/"
fi
FAKE=$F # lib/fake-cuda.sh's helpers read the fake driver's files under $FAKE
export NVPROXY_FAKE_CUDA_DIR=$F/cuda # read by the fake libcuda inside nvproxy-cuda-helper
export NV_CRI_SHIM_EXTRA="gpu:
  dev_root: $F/dev
  driver_root: $F/driver
  proc_driver_root: $F/proc
  cdi_spec_dirs: [CRI_CDI_DIR]
checkpoint:
  libcuda: $FIX/libcuda.so
  libnvml: $FIX/libnvidia-ml.so
  lock_timeout_ms: 5000
  device_globs: [\"/dev/nvidia*\", \"/dev/fakegpu*\"]"
# NV_IMAGE_STORE=1: the shim writes checkpoint images into its own store, and CRI's archive carries
# the reference (issue 26).
if [[ $NODE == B ]]; then
  STORE=$(mktemp -d /var/tmp/nvproxy-cristore-b.XXXXXX)
  nv_defer rm -rf "$STORE"
  NV_CRI_SHIM_EXTRA+="
  image_store: $STORE
  registry_tls_verify: false
  registry_timeout_s: 60"
elif [[ -n ${NV_IMAGE_STORE:-} ]]; then
  STORE=$(mktemp -d /var/tmp/nvproxy-cristore.XXXXXX)
  nv_defer rm -rf "$STORE"
  NV_CRI_SHIM_EXTRA+="
  image_store: $STORE"
fi
nv_cri_start "$VER"
sed -i "s|CRI_CDI_DIR|$NV_CRI_DIR/cdi|" "$NV_CRI_SHIM_CONFIG" # the same directory as CRI's cdi_spec_dirs
cat >"$NV_CRI_DIR/cdi/vendor.yaml" <<YAML
cdiVersion: "0.6.0"
kind: example.com/gpu
devices:
  - name: gpu0
    containerEdits:
      deviceNodes:
        - path: /dev/examplegpu0
          hostPath: $F/dev/nvidia0
      env: ["EXAMPLE_GPU=gpu0"]
containerEdits:
  mounts:
    - hostPath: $F/driver/lib/libcuda.so.580.0
      containerPath: /opt/example/libexample.so
      options: [ro, nosuid, nodev, bind]
YAML

shim_of() { awk '/^PPid:/{print $2}' "/proc/$1/status"; }
is_our_shim() { [[ $(readlink "/proc/$1/exe") == */containerd-shim-nvproxy-v1 ]]; }
state_is() { [[ $(nv_cri_state "$1") == "$2" ]]; }
no_shim_for() { ! pgrep -f "containerd-shim-nvproxy-v1 .*-id $1 .*-address $NV_SOCK" >/dev/null; }
mem_known() {
  local v
  v=$(nv_crictl stats -o json --id "$1" | jq -r '.stats[0].memory.workingSetBytes.value // 0')
  ((v > 0))
}

# ---------------------------------------------------------------------------------------------
# pod: runp, two containers in one shim, exec, logs, stats, stop, rm.
case_pod() {
  nv_log "pod: runp with handler $NV_CRI_HANDLER, two containers, one shim"
  POD=$(nv_cri_pod two)
  nv_assert_eq SANDBOX_READY "$(nv_crictl inspectp -o json "$POD" | jq -r .status.state)" "pod state"
  pause_pid=$(nv_crictl inspectp -o json "$POD" | jq -r .info.pid)
  shim=$(shim_of "$pause_pid")
  is_our_shim "$shim" || nv_fail "the pause container's parent $shim is not our shim: $(tr '\0' ' ' <"/proc/$shim/cmdline")"
  C1=$(nv_cri_ctr two "$POD" c1 '.command = ["sh", "-c", "trap \"echo got-term; exit 0\" TERM; echo hello-c1; while :; do sleep 0.1; done"]')
  C2=$(nv_cri_ctr two "$POD" c2 '.command = ["sh", "-c", "echo hello-c2; exec sleep 1000"]')
  nv_crictl start "$C1" "$C2" >/dev/null
  nv_assert_eq CONTAINER_RUNNING "$(nv_cri_state "$C1")" "c1 state"
  nv_assert_eq CONTAINER_RUNNING "$(nv_cri_state "$C2")" "c2 state"
  nv_assert_eq "$shim" "$(shim_of "$(nv_cri_pid "$C1")")" "c1 is served by the pod's shim"
  nv_assert_eq "$shim" "$(shim_of "$(nv_cri_pid "$C2")")" "c2 is served by the pod's shim"
  nv_assert_eq 1 "$(nv_shim_pids | wc -l)" "shims of this containerd"

  nv_log "exec, logs, stats"
  nv_assert_eq exec-ok "$(nv_crictl exec "$C1" echo exec-ok)" "crictl exec output"
  set +e
  err=$(nv_crictl exec "$C2" sh -c 'exit 3' 2>&1)
  rc=$?
  set -e
  ((rc != 0)) || nv_fail "crictl exec of 'exit 3' succeeded"
  nv_assert_contains "$err" "command terminated with exit code 3" "crictl exec's exit code"
  nv_assert_eq "$(readlink "/proc/$(nv_cri_pid "$C2")/ns/pid")" "$(nv_crictl exec "$C2" readlink /proc/self/ns/pid)" \
    "exec joins c2's PID namespace"
  nv_wait_for -t 10 nv_cri_logs_have "$C1" hello-c1 || nv_fail "crictl logs c1: $(nv_crictl logs "$C1" 2>&1)"
  nv_wait_for -t 10 nv_cri_logs_have "$C2" hello-c2 || nv_fail "crictl logs c2: $(nv_crictl logs "$C2" 2>&1)"
  nv_wait_for -t 30 mem_known "$C1" || nv_fail "crictl stats has no memory for c1: $(nv_crictl stats -o json --id "$C1")"
  nv_crictl stats --id "$C1" >&2

  nv_log "stop delivers SIGTERM, rm; the other container keeps running"
  nv_crictl stop -t 20 "$C1" >/dev/null
  nv_assert_eq CONTAINER_EXITED "$(nv_cri_state "$C1")" "c1 after stop"
  nv_assert_eq 0 "$(nv_crictl inspect -o json "$C1" | jq -r .status.exitCode)" "c1's exit code (its TERM trap)"
  nv_wait_for -t 10 nv_cri_logs_have "$C1" got-term || nv_fail "c1 did not get SIGTERM: $(nv_crictl logs "$C1" 2>&1)"
  nv_crictl rm "$C1" >/dev/null
  if nv_crictl ps -a -q | grep -qx "$C1"; then nv_fail "c1 still listed after rm"; fi
  nv_assert_eq still "$(nv_crictl exec "$C2" echo still)" "c2 after c1's removal"
  nv_crictl stopp "$POD" >/dev/null
  nv_assert_eq CONTAINER_EXITED "$(nv_cri_state "$C2")" "c2 after stopp"
  nv_crictl rmp "$POD" >/dev/null
  nv_wait_for -t 20 no_shim_for "$POD" || nv_fail "the pod's shim still runs after rmp: $(nv_shim_pids)"
}

# ---------------------------------------------------------------------------------------------
# cdi: devices applied by CRI, recognised by the GPU layer.
case_cdi() {
  nv_log "cdi: devices applied by CRI (annotation and CDI devices field), recognised by the GPU layer"
  POD=$(nv_cri_pod gpu)
  export SHOW='ls -l /dev/examplegpu0; cat /opt/example/libexample.so; echo EXAMPLE_GPU=$EXAMPLE_GPU; echo mounts=$(grep -c " /opt/example/libexample.so " /proc/self/mountinfo); echo end-of-gpu; exec sleep 1000'
  GA=$(nv_cri_ctr gpu "$POD" gann '.annotations = {"cdi.k8s.io/test": "example.com/gpu=gpu0"} | .command = ["sh", "-c", $ENV.SHOW]')
  GF=$(nv_cri_ctr gpu "$POD" gfield '.CDI_devices = [{name: "example.com/gpu=gpu0"}] | .command = ["sh", "-c", $ENV.SHOW]')
  nv_crictl start "$GA" "$GF" >/dev/null
  for c in "$GA" "$GF"; do
    nv_wait_for -t 10 nv_cri_logs_have "$c" end-of-gpu || nv_fail "GPU container $c: $(nv_crictl logs "$c" 2>&1)"
    out=$(nv_crictl logs "$c" 2>&1)
    echo "$out" >&2
    grep -Eq '^c.* 195, +0 .*/dev/examplegpu0$' <<<"$out" || nv_fail "CDI node /dev/examplegpu0 is not char 195, 0"
    nv_assert_contains "$out" "fake libcuda 580.0" "CDI mount"
    nv_assert_contains "$out" "EXAMPLE_GPU=gpu0" "CDI env"
    nv_assert_contains "$out" "mounts=1" "the CDI mount is there once"
    spec=$(nv_cri_bundle "$c")/config.json
    nv_assert_eq 1 "$(jq '[.linux.devices[] | select(.path == "/dev/examplegpu0")] | length' "$spec")" "device entries in $spec"
    nv_assert_eq 1 "$(jq '[.mounts[] | select(.destination == "/opt/example/libexample.so")] | length' "$spec")" "mount entries"
    nv_assert_eq 1 "$(jq '[.process.env[] | select(startswith("EXAMPLE_GPU="))] | length' "$spec")" "env entries"
    nv_assert_eq 1 "$(jq '[.linux.resources.devices[] | select(.major == 195 and .minor == 0)] | length' "$spec")" "cgroup rules"
  done
  # The annotation reaches the shim (container_annotations): its layer resolved the device and found
  # every edit already made; the device-field container carries no request for the shim.
  rec=$(jq -r '.annotations["nvproxy.containerd.io/gpu"] // empty' "$(nv_cri_bundle "$GA")/config.json")
  [[ -n $rec ]] || nv_fail "no GPU record in the annotation container's spec: the shim did not see cdi.k8s.io"
  nv_assert_eq '["example.com/gpu=gpu0"]' "$(jq -c .devices <<<"$rec")" "devices the shim resolved"
  nv_crictl rmp -f "$POD" >/dev/null
}

cuda_ready() { (($(find "$F/cuda" -name '*.ready' | wc -l) >= $1)); }
CUDA_MOUNTS=$(jq -n --arg f "$F" '[
  {container_path: "/dev/fakegpu0", host_path: ($f + "/fakegpu0")},
  {container_path: "/fakecuda", host_path: ($f + "/cuda")},
  {container_path: "/fake", host_path: ($f + "/bin"), readonly: true}]')
export CUDA_MOUNTS

# restore_and_check POD: the container created from $ARCHIVE (an archive, or a checkpoint image's
# reference) in POD; CUDA comes back in every recorded process and the work goes on from $before.
restore_and_check() {
  local pod=$1
  # As in checkpoint_gpu_fake.sh: the image holds the processes in the checkpointed CUDA state.
  nv_fake_as_checkpointed "${cp[@]}"
  : >"$log"
  RS=$(nv_cri_ctr ck "$pod" cuda-restored '.image.image = $ENV.ARCHIVE | .mounts = ($ENV.CUDA_MOUNTS | fromjson)')
  nv_crictl start "$RS" >/dev/null
  nv_assert_eq CONTAINER_RUNNING "$(nv_cri_state "$RS")" "restored container"
  nv_assert_eq true "$(nv_crictl inspect -o json "$RS" | jq -r '.status.annotations.restored')" "CRI marks it restored"
  cat "$log" >&2
  nv_fake_resumed "CRI restore" "${cp[@]}"
  after=$(nv_fake_counter "${cp[0]}")
  ((after >= before)) || nv_fail "work did not continue from the checkpoint: before=$before after=$after"
  nv_assert_contains "$(tr '\0' ' ' <"/proc/$(nv_cri_pid "$RS")/cmdline")" /fake/fake_cuda_app "the restored init"
  nv_assert_eq "$(shim_of "$(nv_crictl inspectp -o json "$pod" | jq -r .info.pid)")" "$(shim_of "$(nv_cri_pid "$RS")")" \
    "the restored container is served by the pod's shim"
}

# Node B: a containerd of its own (root, state, socket, store), the same GPU. It gets the archive
# or the checkpoint image's name, the registry and what A read; A's store entries are gone.
node_b() {
  read -ra cp <<<"$NV_B_CUDA_PIDS"
  before=$NV_B_BEFORE pinned=$NV_B_PINNED log=$F/cuda/calls.log
  NV_REGISTRY=$NV_B_REGISTRY NV_REGISTRY_DIR=$NV_B_REGISTRY_DIR
  if [[ $NV_REGISTRY_FLOW == image ]]; then
    export ARCHIVE=$NV_B_IMAGE
    nv_crictl pull "$ARCHIVE" >/dev/null || nv_fail "crictl pull $ARCHIVE on node B failed"
    nv_log "node B: CRI pulled the checkpoint image: $(nv_crictl images | grep ckpt/cuda || true)"
  else
    export ARCHIVE=$NV_CRI_DIR/from-a.tar # the archive carried over to B
    cp "$NV_B_ARCHIVE" "$ARCHIVE"
  fi
  nv_log "node B: containerd $NV_CONTAINERD_VERSION on $NV_SOCK, store $STORE"
  POD=$(nv_cri_pod ck)

  nv_log "node B: a blob altered in the registry: the restore is refused and B's store keeps nothing"
  nv_registry_alter_pages "$pinned"
  BAD=$(nv_cri_ctr ck "$POD" cuda-bad '.image.image = $ENV.ARCHIVE | .mounts = ($ENV.CUDA_MOUNTS | fromjson)')
  if err=$(nv_crictl start "$BAD" 2>&1); then nv_fail "a restore from an altered blob started"; fi
  nv_assert_contains "$err" "the bytes that arrived are" "the refused restore's error"
  nv_crictl rm -f "$BAD" >/dev/null 2>&1 || true
  # Chunks that arrived whole wait in .incoming-DIGEST for the next pull; no entry is made of them.
  [[ -z $(find "$STORE" -name '*.img' -not -path '*/.incoming-*/*') && -z $(find "$STORE" -name .complete) ]] ||
    nv_fail "B's store kept a half-pulled image: $(find "$STORE")"
  nv_registry_unalter

  nv_log "node B: restore by CreateContainer; the image lands in B's store, CUDA comes back, the work goes on"
  restore_and_check "$POD"
  nv_assert_eq 1 "$(find "$STORE/registry" -name .complete | wc -l)" "pulled images in B's store"
  [[ -n $(find "$STORE/registry" -name inventory.img) ]] || nv_fail "CRIU's image is not in B's store"
  nv_assert_eq 0 "$(find "$NV_B_STORE_A" -name '*.img' | wc -l)" "files left in A's store"
  echo "PASS node B ($NV_RUNTIME, containerd $NV_CONTAINERD_VERSION)"
}

if [[ $NODE == B ]]; then
  node_b
  exit 0
fi
# The store and registry variants share these with the plain test of their version: not again.
if [[ -z ${NV_IMAGE_STORE:-} && -z ${NV_REGISTRY_FLOW:-} ]]; then
  case_pod
  case_cdi
fi

# ---------------------------------------------------------------------------------------------
if [[ $VER == 1.* ]]; then
  nv_log "ckpt: containerd $NV_CONTAINERD_VERSION's CRI has no CheckpointContainer"
  POD=$(nv_cri_pod ck)
  C=$(nv_cri_ctr ck "$POD" sleeper '.command = ["sleep", "1000"]')
  nv_crictl start "$C" >/dev/null
  set +e
  err=$(nv_crictl checkpoint --export="$NV_CRI_DIR/c.tar" "$C" 2>&1)
  rc=$?
  set -e
  echo "crictl checkpoint on containerd $NV_CONTAINERD_VERSION: $err" >&2
  ((rc != 0)) || nv_fail "crictl checkpoint succeeded on containerd $NV_CONTAINERD_VERSION"
  nv_assert_contains "$err" "code = Unimplemented desc = method CheckpointContainer not implemented" "CRI's answer"
  nv_assert_eq CONTAINER_RUNNING "$(nv_cri_state "$C")" "container after the refused checkpoint"
  echo "PASS cri ($NV_RUNTIME, containerd $NV_CONTAINERD_VERSION)"
  exit 0
fi


nv_log "ckpt: a device holder without CUDA is refused through CRI, the container keeps running"
POD=$(nv_cri_pod ck)
R=$(nv_cri_ctr ck "$POD" refuse '.mounts = ($ENV.CUDA_MOUNTS | fromjson) | .command = ["sh", "-c", "sleep 1000 3</dev/fakegpu0 & exec sleep 1000"]')
nv_crictl start "$R" >/dev/null
holder_started() { [[ -n $(pgrep -P "$(nv_cri_pid "$R")" sleep) ]]; }
nv_wait_for -t 10 holder_started || nv_fail "the holder child did not start"
child=$(pgrep -P "$(nv_cri_pid "$R")" sleep)
set +e
err=$(nv_crictl checkpoint --export="$NV_CRI_DIR/refuse.tar" "$R" 2>&1)
rc=$?
set -e
echo "$err" >&2
((rc != 0)) || nv_fail "crictl checkpoint of a container with a device holder succeeded"
nv_assert_contains "$err" "/dev/fakegpu0" "the CRI error names the device"
nv_assert_contains "$err" "no CUDA" "the CRI error says the holder is not a CUDA process"
[[ -s $(nv_cri_bundle "$R")/checkpoint-diagnostic.json ]] || nv_fail "no checkpoint-diagnostic.json"
jq -e --argjson p "$child" '.processes[] | select(.pid == $p)' "$(nv_cri_bundle "$R")/checkpoint-diagnostic.json" >/dev/null \
  || nv_fail "the diagnostic does not name holder pid $child"
nv_assert_eq CONTAINER_RUNNING "$(nv_cri_state "$R")" "container after the refusal"
nv_assert_eq ok "$(nv_crictl exec "$R" echo ok)" "container works after the refusal"
nv_crictl rm -f "$R" >/dev/null

nv_log "ckpt: crictl checkpoint of a fake-CUDA parent and child (ContainerCheckpoint)"
K=$(nv_cri_ctr ck "$POD" cuda '.mounts = ($ENV.CUDA_MOUNTS | fromjson)
  | .command = ["/fake/fake_cuda_app", "--dir", "/fakecuda", "--device", "/dev/fakegpu0", "--map", "--children", "1"]')
nv_crictl start "$K" >/dev/null
nv_wait_for -t 10 cuda_ready 2 || nv_fail "fake CUDA app did not start: $(ls "$F/cuda")"
mapfile -t cp < <(find "$F/cuda" -name '*.cuda' -printf '%f\n' | sed 's/\.cuda$//' | sort -n)
nv_assert_eq 2 "${#cp[@]}" "CUDA processes in the container"
export ARCHIVE=$NV_CRI_DIR/cuda-checkpoint.tar
# Read before the checkpoint: the image is taken later, so the restored count is at least this;
# a loop that started afresh would be far below it.
nv_wait_for -t 30 nv_fake_counted_past "${cp[0]}" 300 || nv_fail "process ${cp[0]} does not count: $(nv_fake_counter "${cp[0]}")"
before=$(nv_fake_counter "${cp[0]}")
nv_crictl checkpoint --export="$ARCHIVE" "$K" >/dev/null
log=$F/cuda/calls.log
cat "$log" >&2
nv_fake_locked_then_checkpointed "$log" 2
for c in "${cp[@]}"; do
  nv_assert_eq running "$(cat "$F/cuda/$c.state")" "CUDA state of $c after ContainerCheckpoint"
  nv_fake_advancing "$c" || nv_fail "process $c does not work after the checkpoint"
done
nv_assert_eq CONTAINER_RUNNING "$(nv_cri_state "$K")" "container after ContainerCheckpoint"
listing=$(tar -tf "$ARCHIVE")
if [[ -n ${NV_IMAGE_STORE:-} ]]; then
  # The image is in the store; the archive carries the reference (and the record), not CRIU's files.
  want=(config.dump spec.dump status.dump checkpoint/nvproxy-image-ref.json checkpoint/nvproxy-cuda.json)
  if grep -qE '^checkpoint/(inventory|pages-[0-9]+)\.img$' <<<"$listing"; then nv_fail "CRIU's image is in the archive: $listing"; fi
  [[ -n $(find "$STORE" -name inventory.img) ]] || nv_fail "no image in the store $STORE"
else
  want=(config.dump spec.dump status.dump checkpoint/inventory.img checkpoint/nvproxy-cuda.json)
fi
for f in "${want[@]}"; do
  grep -qxF "$f" <<<"$listing" || nv_fail "the archive has no $f: $listing"
done
# CRI names CRIU's work directory only for io.containerd.runc.* runtimes (documented difference).
for f in dump.log stats-dump; do
  if grep -qxF "$f" <<<"$listing"; then nv_log "note: the archive has $f"; else nv_log "note: no $f in the archive (CRI gives CRIU's work path to runc runtimes only)"; fi
done

if [[ -n ${NV_REGISTRY_FLOW:-} ]]; then
  # Node A pushes the image from its store to a registry and the archive gets the registry's
  # reference instead of the store's; node B restores from that archive (node_b below).
  nv_registry_start
  SHIM=$NVPROXY_SHIM_DIR/containerd-shim-nvproxy-v1
  # The registry's deadline in seconds, not the default hour: a hung transfer fails the test quickly.
  printf 'checkpoint:\n  registry_timeout_s: 60\n' >"$NV_DIR/push.yaml"
  if [[ $NV_REGISTRY_FLOW == image ]]; then
    # Kubernetes' flow: the archive becomes a checkpoint image (one layer, the container's name in
    # org.criu.checkpoint.container.name), pulled by CRI and named by the new container's spec.
    out=$("$SHIM" image push --kube "$ARCHIVE" "$NV_REGISTRY/ckpt/cuda:v1" --tls-verify=false --store "$STORE" \
      --config "$NV_DIR/push.yaml" 2>&1) || nv_fail "image push --kube: $out"
    nv_log "$out"
    pinned=$(awk '/^pushed /{print $NF}' <<<"$out")
    [[ $pinned == "$NV_REGISTRY/ckpt/cuda@sha256:"* ]] || nv_fail "no data reference in: $out"
    IMG=$(awk '/^checkpoint image of container /{print $NF}' <<<"$out")
    [[ $IMG == "$NV_REGISTRY/ckpt/cuda@sha256:"* ]] || nv_fail "no checkpoint image in: $out"
    nv_assert_contains "$out" "checkpoint image of container cuda " "the image names the container"
    manifest=$(skopeo inspect --raw --tls-verify=false "docker://$IMG")
    nv_assert_eq cuda "$(jq -r '.annotations."org.criu.checkpoint.container.name"' <<<"$manifest")" "the image's annotation"
    layer=$(nv_registry_blob "$(jq -r '.layers[0].digest' <<<"$manifest")")
    listing=$(tar -tf "$layer")
    grep -qx './checkpoint/nvproxy-image-ref.json' <<<"$listing" || nv_fail "the layer has no reference: $listing"
    if grep -q 'pages-' <<<"$listing"; then nv_fail "CRIU's pages are in the checkpoint image's layer: $listing"; fi
    nv_log "checkpoint image for node B: $IMG, its layer $(du -k "$layer" | cut -f1) KiB"
    [[ -z $(find "$STORE" -path '*/.outgoing/*' -type f -o -name '.kube-push-*') ]] || nv_fail "the push left files in the store"
    export ARCHIVE=$IMG
  else
    X=$NV_CRI_DIR/archive-x
    mkdir -p "$X"
    tar -C "$X" -xf "$ARCHIVE"
    out=$("$SHIM" image push "$X/checkpoint" "$NV_REGISTRY/ckpt/cuda:v1" --rewrite --tls-verify=false --store "$STORE" \
      --config "$NV_DIR/push.yaml" 2>&1) \
      || nv_fail "image push: $out"
    nv_log "$out"
    pinned=$(jq -r .registry "$X/checkpoint/nvproxy-image-ref.json")
    [[ $pinned == "$NV_REGISTRY/ckpt/cuda@sha256:"* ]] || nv_fail "the archive does not refer to the registry: $pinned"
    nv_assert_eq "nvproxy-cuda.json nvproxy-image-ref.json" "$(ls "$X/checkpoint" | sort | xargs)" "what the rewritten archive's checkpoint/ holds"
    [[ -z $(find "$STORE" -path '*/.outgoing/*' -type f) ]] || nv_fail "the push left its layout in the store"
    export ARCHIVE=$NV_CRI_DIR/cuda-checkpoint-registry.tar
    tar -C "$X" -cf "$ARCHIVE" .
    nv_log "archive for node B: $(du -k "$ARCHIVE" | cut -f1) KiB"
  fi
  # A's container and store entries gone; node B is this script again with a containerd of its own.
  nv_crictl stop -t 0 "$K" >/dev/null
  nv_crictl rm "$K" >/dev/null
  rm -rf "${STORE:?}"/*
  nv_log "node B: a second containerd $VER, restoring from ${IMG:-$ARCHIVE}"
  env -u NV_DIR -u NV_SOCK -u NV_STATE_DIR -u NV_NAMESPACE NV_CRI_NODE=B NV_B_FAKE="$F" NV_B_CUDA_PIDS="${cp[*]}" \
    NV_B_BEFORE="$before" NV_B_PINNED="$pinned" NV_B_REGISTRY="$NV_REGISTRY" NV_B_REGISTRY_DIR="$NV_REGISTRY_DIR" \
    NV_B_IMAGE="${IMG:-}" NV_B_ARCHIVE="$ARCHIVE" NV_B_STORE_A="$STORE" bash "$0" "$VER" || nv_fail "node B failed"
  echo "PASS cri ($NV_RUNTIME, containerd $NV_CONTAINERD_VERSION, node A to node B through $NV_REGISTRY)"
  exit 0
fi

nv_log "ckpt: restore by CreateContainer from the archive; CUDA comes back and the work continues"
nv_crictl stop -t 0 "$K" >/dev/null
nv_crictl rm "$K" >/dev/null
log=$F/cuda/calls.log
restore_and_check "$POD"
echo "PASS cri ($NV_RUNTIME, containerd $NV_CONTAINERD_VERSION)"
