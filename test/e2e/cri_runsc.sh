#!/usr/bin/env bash
# shellcheck disable=SC2016 # jq filters read $ENV.X: the shell must not expand them
# Issue 23: the Kubernetes path under the current runsc (gVisor) on containerd 2.3, through the CRI
# plugin configured from the docs/install.md blocks and driven by crictl, with the fake CUDA driver
# INSIDE the sandbox (as runsc_gpu_fake.sh: CDI spec kind nvidia.com/gpu, NVIDIA_VISIBLE_DEVICES=0):
#   pod      the pod's sandbox is runsc's; a CUDA parent and child in a container of it
#   ckpt     `crictl checkpoint` (ContainerCheckpoint): every process locked before any checkpoint,
#            runsc checkpoint, resumed; the container keeps working; the archive carries the image
#            and the rootfs diff, runsc's filestore in it
#   restore  CreateContainer from the archive into the running pod: runsc restores a checkpoint only
#            as a whole sandbox ("sandbox is not being restored, cannot restore subcontainer"), so the
#            shim refuses it at the task's create with an error that says so, before runsc runs; the
#            pod and its other containers keep running
# Usage: cri_runsc.sh 2.3   (77: no crictl, containerd 2.3 or current runsc here)
set -euo pipefail
export NV_RUNTIME=runsc NV_RUNSC=current
source "$(dirname "$0")/lib/cri.sh"
VER=${1:-2.3}
[[ $VER == 2.* ]] || nv_fail "cri_runsc.sh covers containerd 2.3's ContainerCheckpoint, not $VER"
source "$(dirname "$0")/lib/fake-cuda.sh"
nv_fake_cuda_sandbox
export NV_CRI_SHIM_EXTRA=$NV_FAKE_SANDBOX_CONFIG
nv_cri_start "$VER"
RUNSC=$(awk '$1=="binary:"{print $2; exit}' "$NV_CRI_SHIM_CONFIG")
nv_log "runsc: $("$RUNSC" --version | head -1)"

cuda_ready() { (($(find "$FAKE/cuda" -name '*.ready' | wc -l) >= $1)); }
export CUDA_MOUNTS
CUDA_MOUNTS=$(jq -n --arg f "$FAKE" '[{container_path: "/fakecuda", host_path: ($f + "/cuda")},
  {container_path: "/fake", host_path: ($f + "/bin"), readonly: true}]')
GPU_CTR='.mounts = ($ENV.CUDA_MOUNTS | fromjson)
  | .envs = [{key: "NVIDIA_VISIBLE_DEVICES", value: "0"}, {key: "NVPROXY_FAKE_CUDA_DIR", value: "/fakecuda"}]'

# ---------------------------------------------------------------------------------------------
nv_log "pod: a runsc sandbox with a CUDA parent and child in one container, a plain worker beside it"
POD=$(nv_cri_pod ck)
pause_pid=$(nv_crictl inspectp -o json "$POD" | jq -r .info.pid)
[[ $(tr '\0' ' ' <"/proc/$pause_pid/cmdline") == runsc-sandbox* ]] || nv_fail "the pod's sandbox is not runsc's: $(tr '\0' ' ' <"/proc/$pause_pid/cmdline")"
K=$(nv_cri_ctr ck "$POD" cuda "$GPU_CTR | .command = [\"/fake/fake_cuda_app\", \"--dir\", \"/fakecuda\", \"--device\", \"/dev/fakegpu0\", \"--map\", \"--children\", \"1\"]")
W=$(nv_cri_ctr ck "$POD" worker '.command = ["sh", "-c", "i=0; while :; do i=$((i+1)); echo $i >/tmp/n; sleep 0.1; done"]')
nv_crictl start "$K" "$W" >/dev/null
nv_wait_for -t 20 cuda_ready 2 || nv_fail "fake CUDA app did not start: $(ls "$FAKE/cuda")"
mapfile -t cp < <(nv_fake_cuda_pids)
nv_assert_eq 2 "${#cp[@]}" "CUDA processes in the sandbox"

nv_log "ckpt: crictl checkpoint (ContainerCheckpoint) of the CUDA container"
export ARCHIVE=$NV_CRI_DIR/cuda-checkpoint.tar
nv_crictl checkpoint --export="$ARCHIVE" "$K" >/dev/null
log=$FAKE/cuda/calls.log
cat "$log" >&2
nv_fake_locked_then_checkpointed "$log" 2
for c in "${cp[@]}"; do
  grep -q "^$c lock " "$log" || nv_fail "no lock of sandbox pid $c: $(cat "$log")"
  nv_assert_eq running "$(cat "$FAKE/cuda/$c.state")" "CUDA state of $c after ContainerCheckpoint"
  nv_fake_advancing "$c" || nv_fail "process $c does not work after the checkpoint"
done
nv_assert_eq CONTAINER_RUNNING "$(nv_cri_state "$K")" "container after ContainerCheckpoint"
listing=$(tar -tf "$ARCHIVE")
for f in config.dump spec.dump rootfs-diff.tar checkpoint/checkpoint.img checkpoint/nvproxy-cuda.json; do
  grep -qxF "$f" <<<"$listing" || nv_fail "the archive has no $f: $listing"
done
tar -xOf "$ARCHIVE" rootfs-diff.tar >"$NV_CRI_DIR/rootfs-diff"
diff_listing=$(tar -tf "$NV_CRI_DIR/rootfs-diff") # compressed: tar tells how from the file
grep -q '^\.gvisor\.filestore\.' <<<"$diff_listing" || nv_fail "the archive's rootfs diff has no runsc filestore: $diff_listing"
nv_log "the archive: $(stat -c %s "$ARCHIVE") bytes; its rootfs diff: $(grep -c . <<<"$diff_listing") entries ($(tr '\n' ' ' <<<"$diff_listing"))"

nv_log "restore: CreateContainer from the archive into the running pod is refused, saying why"
RS=$(nv_cri_ctr ck "$POD" cuda-restored "$GPU_CTR | .image.image = \$ENV.ARCHIVE")
set +e
err=$(nv_crictl start "$RS" 2>&1)
rc=$?
set -e
echo "$err" >&2
((rc != 0)) || nv_fail "the restore of one container into a running runsc pod sandbox started"
nv_assert_contains "$err" "runsc restores a checkpoint only as a whole sandbox" "the error says why"
nv_assert_contains "$err" "$POD" "the error names the pod's sandbox"
if grep -F "$RS" "$NV_DIR/containerd.log" | grep -q ' restore --detach '; then nv_fail "runsc restore ran for $RS before the refusal"; fi
nv_assert_eq ok "$(nv_crictl exec "$W" echo ok)" "the pod's other container works after the refusal"
nv_assert_eq SANDBOX_READY "$(nv_crictl inspectp -o json "$POD" | jq -r .status.state)" "pod state after the refusal"
nv_crictl rm -f "$RS" >/dev/null
echo "PASS cri_runsc ($NV_RUNTIME, containerd $NV_CONTAINERD_VERSION)"
