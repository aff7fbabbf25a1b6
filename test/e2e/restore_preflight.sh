#!/usr/bin/env bash
# Issue 15 item 3 on a machine without a GPU: the restore preflight through containerd, our shim,
# runc and CRIU, with the fake driver (as checkpoint_gpu_fake.sh uses it) and the fake NVML playing
# first the checkpointing host, then others. A fake-CUDA container (parent and child, 4.7 GiB each
# on an "NVIDIA H200", driver 580.159.04) is checkpointed; its restore is then refused on a host with
#   model    another GPU model ("NVIDIA A100-SXM4-80GB")
#   memory   too little free device memory (2 GiB for the 9.4 GiB recorded)
#   nvml     no NVML (checkpoint.libnvml names a missing library)
# each time before anything runs: ctr's error names the process, the GPU, what was recorded and what
# this host has, the bundle's checkpoint-diagnostic.json says the same, runc never restored (its
# `list` under the shim's root is empty), no process of the container exists and the fake driver saw
# no CUDA restore. Then a host with another H200 (another UUID): the restore goes ahead onto it,
# and the fake driver gets the GPU pair in its restore args (cuda-checkpoint's --device-map). Last
# the matching host: the restore works and the work continues.
# Usage: restore_preflight.sh [1.6|1.7|2]
set -euo pipefail
source "$(dirname "$0")/lib/shim-env.sh"
source "$(dirname "$0")/lib/fake-cuda.sh"
nv_fake_cuda
NV_SHIM_EXTRA=$NV_FAKE_CHECKPOINT
export NV_SHIM_EXTRA
nv_start_with_shim --containerd "${1:-1.6}"

# The fake NVML's host (fake_cuda_protocol.h): files in the fake driver's directory.
host() {  # MODEL DRIVER [FREE_MIB]
  echo "$1" >"$FAKE/cuda/nvml_model"
  echo "$2" >"$FAKE/cuda/nvml_driver"
  echo 143771 >"$FAKE/cuda/nvml_mem_total_mib"
  if [[ -n ${3:-} ]]; then echo "$3" >"$FAKE/cuda/nvml_mem_free_mib"; else rm -f "$FAKE/cuda/nvml_mem_free_mib"; fi
}
host "NVIDIA H200" 580.159.04
# GPU UUIDs as NVML gives them (hex), so that the driver can be handed pairs of them.
GPU0=GPU-00000000-0000-0000-0000-0000000a0000
echo GPU-00000000-0000-0000-0000-0000000a >"$FAKE/cuda/nvml_uuid_prefix"

# A container-specific --dir, so that its processes are told apart from any other fake app.
CDIR=/fakecuda-$$
MOUNTS=(--mount "type=bind,src=$FAKE/fakegpu0,dst=/dev/fakegpu0,options=rbind:rw"
  --mount "type=bind,src=$FAKE/cuda,dst=$CDIR,options=rbind:rw"
  --mount "type=bind,src=$FAKE/bin,dst=/fake,options=rbind:ro")
RUNC_ROOT=/run/containerd/nvproxy-$NV_RUNTIME/$NV_NAMESPACE
log=$FAKE/cuda/calls.log
app_pids() { pgrep -f "fake_cuda_app --dir $CDIR" || true; }
no_apps() { [[ -z $(app_pids) ]]; }
gone() {
  nv_ctr task kill -s KILL "$1" 2>/dev/null || true
  nv_wait_for -t 10 bash -c "[[ \$(ctr -a $NV_SOCK -n $NV_NAMESPACE task ls | awk '\$1==\"$1\"{print \$3}') != RUNNING ]]"
  nv_ctr task rm "$1" >/dev/null 2>&1 || true
  nv_ctr c rm "$1" 2>/dev/null || true
}

nv_log "checkpoint a fake-CUDA container on the H200 host"
nv_ctr run -d --runtime $NV_RT "${MOUNTS[@]}" "$NV_IMAGE" pf /fake/fake_cuda_app --dir $CDIR --device /dev/fakegpu0 --map --children 1
nv_wait_for -t 10 bash -c "[[ \$(ls $FAKE/cuda | grep -c '\.ready$') -ge 2 ]]" || nv_fail "fake CUDA app did not start: $(ls "$FAKE/cuda")"
mapfile -t cp < <(nv_fake_cuda_pids)
nv_assert_eq 2 "${#cp[@]}" "CUDA processes in the container"
# NVML's view: both processes hold 4813 MiB (4.7 GiB) on GPU 0.
for p in $(nv_ctr task ps pf | awk 'NR>1{print $1}'); do echo "$p 0 4813"; done >"$FAKE/cuda/nvml"
nv_assert_eq 2 "$(wc -l <"$FAKE/cuda/nvml")" "host pids of the container"
# Read before the checkpoint: the image is taken later, so the restored count is at least this;
# a loop that started afresh would be far below it.
nv_wait_for -t 30 nv_fake_counted_past "${cp[0]}" 300 || nv_fail "process ${cp[0]} does not count: $(nv_fake_counter "${cp[0]}")"
before=$(nv_fake_counter "${cp[0]}")
nv_ctr c checkpoint --task --rw pf pfref
nv_assert_eq 2 "$(awk '$2=="checkpoint" && $5==0' "$log" | wc -l)" "CUDA checkpoints"
gone pf
[[ -z $(app_pids) ]] || nv_fail "the original container's processes outlived it: $(app_pids)"
# The image carries the processes in the checkpointed CUDA state (see checkpoint_gpu_fake.sh).
nv_fake_as_checkpointed "${cp[@]}"
: >"$FAKE/cuda/nvml"  # nothing holds GPU memory now

# refused CASE NEEDLE...: the restore fails with every NEEDLE in its error, and nothing ran.
refused() {
  local what=$1 err rc diag
  shift
  : >"$log"
  set +e
  err=$(nv_ctr c restore --live --rw pf pfref </dev/null 2>&1)
  rc=$?
  set -e
  ((rc != 0)) || nv_fail "$what: the restore succeeded on a host that cannot give the CUDA processes back"
  echo "$err" >&2
  nv_assert_contains "$err" "restore of \"pf\" refused: " "$what: the error says the restore was refused"
  local n
  for n in "$@"; do nv_assert_contains "$err" "$n" "$what: the error names it"; done
  diag=$(nv_bundle pf)/checkpoint-diagnostic.json
  [[ -s $diag ]] || nv_fail "$what: no $diag"
  jq -e '.operation == "restore" and .verdict == "refused"' "$diag" >/dev/null || nv_fail "$what: diagnostic: $(cat "$diag")"
  for n in "$@"; do nv_assert_contains "$(jq -r .text "$diag")" "$n" "$what: the diagnostic names it"; done
  # Nothing was started: runc never restored, no process of the container, no CUDA restore.
  nv_assert_eq "" "$(runc --root "$RUNC_ROOT" list -q 2>/dev/null)" "$what: containers runc knows"
  nv_assert_eq "" "$(app_pids)" "$what: processes of the container"
  nv_assert_eq 0 "$(grep -c . "$log" || true)" "$what: fake driver calls"
  for c in "${cp[@]}"; do nv_assert_eq checkpointed "$(nv_fake_state "$c")" "$what: CUDA state of $c"; done
  gone pf
}

nv_log "case model: the host has an A100"
host "NVIDIA A100-SXM4-80GB" 580.159.04
refused model "pid ${cp[0]} (fake_cuda_app) with 4.7 GiB and pid ${cp[1]} (fake_cuda_app) with 4.7 GiB" \
  "were checkpointed on \"NVIDIA H200\" ($GPU0)" "this host's GPU 0 is \"NVIDIA A100-SXM4-80GB\""

nv_log "case memory: the H200 has 2 GiB free"
host "NVIDIA H200" 580.159.04 2048
refused memory "(9.4 GiB in all)" "this host's GPU 0 \"NVIDIA H200\" ($GPU0) has 2.0 GiB free"

nv_log "case nvml: the host's NVML cannot be loaded"
host "NVIDIA H200" 580.159.04
sed -i "s#libnvml: .*#libnvml: /nonexistent/libnvidia-ml.so.1#" "$NVPROXY_SHIM_CONFIG"  # read at each Create
refused nvml "this host cannot check its GPUs" "/nonexistent/libnvidia-ml.so.1"
sed -i "s#libnvml: .*#libnvml: $FIX/libnvidia-ml.so#" "$NVPROXY_SHIM_CONFIG"

# restored: the restore works, CUDA comes back in every process and the work continues.
restored() {
  local what=$1 c
  nv_assert_eq RUNNING "$(nv_task_status pf)" "$what: restored container state"
  nv_fake_resumed "$what" "${cp[@]}"
}

nv_log "case moved: this host's H200 has another UUID; the restore maps the GPU"
echo GPU-00000000-0000-0000-0000-0000000b >"$FAKE/cuda/nvml_uuid_prefix"
: >"$log"
nv_ctr c restore --live --rw pf pfref </dev/null
restored moved
# Both processes restored with the pair (recorded GPU -> this host's), as the driver's args carry it.
nv_assert_eq 2 "$(awk '$2=="restore" && $6=="pairs=000000000000000000000000000a0000>000000000000000000000000000b0000"' "$log" | wc -l)" \
  "CUDA restores with the GPU pair"
grep -q "onto other GPUs: $GPU0=GPU-00000000-0000-0000-0000-0000000b0000" "$NV_DIR/containerd.log" ||
  nv_fail "the restore preflight did not log the device map"
gone pf
nv_wait_for -t 10 no_apps || nv_fail "moved: processes outlived the container: $(app_pids)"
nv_fake_as_checkpointed "${cp[@]}"
echo GPU-00000000-0000-0000-0000-0000000a >"$FAKE/cuda/nvml_uuid_prefix"

nv_log "case match: the checkpointing host's GPUs, the restore works"
: >"$log"
nv_ctr c restore --live --rw pf pfref </dev/null
restored match
grep -q pairs= "$log" && nv_fail "match: the same GPU was restored with a device map"
after=$(nv_fake_counter "${cp[0]}")
((after >= before)) || nv_fail "work did not continue from the checkpoint: before=$before after=$after"
grep -q 'can give back 2 CUDA processes' "$NV_DIR/containerd.log" || nv_fail "the preflight did not log its check"
gone pf
echo "PASS restore_preflight ($NV_RUNTIME, containerd $NV_CONTAINERD_VERSION)"
