#!/bin/bash
# The main job, end to end on a fresh Debian 12 machine (as root): installs what is needed, builds,
# starts a private containerd, runs a container through our shim, then shows the GPU-aware
# checkpoint: a refusal with its diagnostic (a child holds a GPU device without CUDA), and a
# checkpoint + restore of CUDA processes. Without a GPU the driver is played by the test fixtures
# (a fake libcuda loaded by the shim's nvproxy-cuda-helper, a fake CUDA app in the container);
# test/gpu/ runs the same flow on a real H200. Usage: bash scripts/demo.sh (as root)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
repo=$PWD
build=${NVPROXY_BUILD_DIR:-build}

bash scripts/install-deps.sh
bash scripts/prepare-host.sh
echo "== building"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j"$(nproc)" --target containerd-shim-nvproxy-v1 fake_libcuda fake_libnvml fake_cuda_app >/dev/null
# The CRIU plugin that releases forked workers' device files (built when CRIU's header is there).
cmake --build "$build" -j"$(nproc)" --target nvproxy_criu_release >/dev/null 2>&1 || true

export NVPROXY_SHIM_DIR=$repo/$build/shim
FIX=$repo/$build/test/fixtures
source test/e2e/lib/shim-env.sh

FAKE=$(mktemp -d /tmp/nvproxy-demo.XXXXXX)
nv_defer rm -rf "$FAKE"
mkdir -p "$FAKE/cuda" "$FAKE/bin"
touch "$FAKE/nvidia0"
cp "$FIX/fake_cuda_app" "$FAKE/bin/"
export NVPROXY_FAKE_CUDA_DIR=$FAKE/cuda
# The forked-workers part needs a character device that CRIU cannot dump by itself, as the GPU's: a
# misc device of this machine stands for it.
DEV=
for d in /dev/loop-control /dev/btrfs-control /dev/vga_arbiter /dev/cpu_dma_latency; do
  if [[ -c $d ]]; then DEV=$d; break; fi
done
export NV_SHIM_EXTRA="checkpoint:
  libcuda: $FIX/libcuda.so
  libnvml: $FIX/libnvidia-ml.so
  device_globs: [\"/dev/nvidia*\"${DEV:+, \"$DEV\"}]"
nv_start_with_shim --containerd 1.6
say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
run() { printf '$ %s\n' "$*"; "$@"; }
ctr() { "$NV_CTR" -a "$NV_SOCK" -n "$NV_NAMESPACE" "$@"; }
GPU=(--mount "type=bind,src=$FAKE/nvidia0,dst=/dev/nvidia0,options=rbind:rw"
  --mount "type=bind,src=$FAKE/cuda,dst=/fakecuda,options=rbind:rw"
  --mount "type=bind,src=$FAKE/bin,dst=/fake,options=rbind:ro")

say "a container through containerd-shim-nvproxy-v1 (runtime io.containerd.nvproxy.v1, runc underneath)"
run ctr run --rm --runtime io.containerd.nvproxy.v1 "$NV_IMAGE" hello echo "hello from a container run by our shim"

say "checkpoint refused: the server's child keeps /dev/nvidia0 open without CUDA (like nvidia-smi)"
run ctr run -d --runtime io.containerd.nvproxy.v1 "${GPU[@]}" "$NV_IMAGE" llm \
  /fake/fake_cuda_app --dir /fakecuda --device /dev/nvidia0 --map --children 1 --fork-holder
sleep 1
run ctr task ps llm
if ctr task checkpoint llm; then echo "unexpected: checkpoint succeeded" >&2; exit 1; fi
echo "(the same table is in the bundle as checkpoint-diagnostic.json)"
run ctr task ls
run ctr task kill -s KILL llm
sleep 1; ctr task rm llm >/dev/null; ctr c rm llm

say "checkpoint of a CUDA parent and child: lock all, checkpoint all in parallel, verify, CRIU dump, resume"
rm -f "$FAKE"/cuda/*
run ctr run -d --runtime io.containerd.nvproxy.v1 "${GPU[@]}" "$NV_IMAGE" llm \
  /fake/fake_cuda_app --dir /fakecuda --device /dev/nvidia0 --map --children 1
sleep 1
run ctr c checkpoint --task --rw llm llm-checkpoint
echo "driver calls made for the shim by nvproxy-cuda-helper (host pid, operation, rc):"
awk '{print "  " $1, $2, "rc=" $5}' "$FAKE/cuda/calls.log"
run ctr task ls
echo "shim log: $(grep -o 'checkpoint of \\"llm\\" done[^"]*' "$NV_DIR/containerd.log" | tail -1)"

say "restore from the checkpoint image: CRIU restore, then CUDA brought back in every process"
ctr task kill -s KILL llm; sleep 1; ctr task rm llm >/dev/null; ctr c rm llm
for s in "$FAKE"/cuda/*.state; do printf checkpointed >"$s"; touch "${s%.state}.closed"; done
: >"$FAKE/cuda/calls.log"
run ctr c restore --live --rw llm llm-checkpoint </dev/null
run ctr task ls
awk '{print "  " $1, $2, "rc=" $5}' "$FAKE/cuda/calls.log"
ctr task kill -s KILL llm
sleep 1; ctr task rm llm >/dev/null; ctr c rm llm

if [[ -n $DEV && -f $NVPROXY_SHIM_DIR/criu-plugins/nvproxy_criu_release.so ]]; then
  say "forked workers (as PyTorch's DataLoader forks them) hold the CUDA parent's device files: released from the image"
  rm -f "$FAKE"/cuda/*
  W=(--device "$DEV" --mount "type=bind,src=$FAKE/cuda,dst=/fakecuda,options=rbind:rw"
    --mount "type=bind,src=$FAKE/bin,dst=/fake,options=rbind:ro")
  run ctr run -d --runtime io.containerd.nvproxy.v1 "${W[@]}" "$NV_IMAGE" train \
    /fake/fake_cuda_app --dir /fakecuda --device "$DEV" --fork-workers 2
  sleep 1
  run ctr task ps train
  run ctr c checkpoint --task --rw train train-checkpoint
  echo "shim log: $(grep -o 'pid [0-9]* ([a-z_]*) holds only the GPU device files[^"]*' "$NV_DIR/containerd.log" | tail -2)"
  ctr task kill -s KILL train; sleep 1; ctr task rm train >/dev/null; ctr c rm train
  for s in "$FAKE"/cuda/*.state; do printf checkpointed >"$s"; touch "${s%.state}.closed"; done
  run ctr c restore --live --rw train train-checkpoint </dev/null
  sleep 1
  echo "after the restore, each worker's inherited fd:"
  for w in $(cat "$FAKE"/cuda/*.children); do
    for p in $(ctr task ps train | awk 'NR>1{print $1}'); do
      [[ $(awk '/^NSpid:/{print $NF}' "/proc/$p/status") == "$w" ]] &&
        echo "  worker $w (host pid $p): fd $(cat "$FAKE/cuda/$w.fd") -> $(readlink "/proc/$p/fd/$(cat "$FAKE/cuda/$w.fd")"), counting: $(cat "$FAKE/cuda/$w.counter")"
    done
  done
  ctr task kill -s KILL train
fi
say "demo done"
