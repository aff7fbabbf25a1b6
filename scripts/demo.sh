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

export NVPROXY_SHIM_DIR=$repo/$build/shim
FIX=$repo/$build/test/fixtures
source test/e2e/lib/shim-env.sh

FAKE=$(mktemp -d /tmp/nvproxy-demo.XXXXXX)
nv_defer rm -rf "$FAKE"
mkdir -p "$FAKE/cuda" "$FAKE/bin"
touch "$FAKE/nvidia0"
cp "$FIX/fake_cuda_app" "$FAKE/bin/"
export NVPROXY_FAKE_CUDA_DIR=$FAKE/cuda
export NV_SHIM_EXTRA="checkpoint:
  libcuda: $FIX/libcuda.so
  libnvml: $FIX/libnvidia-ml.so
  device_globs: [\"/dev/nvidia*\"]"
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
for s in "$FAKE"/cuda/*.state; do echo checkpointed >"$s"; touch "${s%.state}.closed"; done
: >"$FAKE/cuda/calls.log"
run ctr c restore --live --rw llm llm-checkpoint </dev/null
run ctr task ls
awk '{print "  " $1, $2, "rc=" $5}' "$FAKE/cuda/calls.log"
ctr task kill -s KILL llm
say "demo done"
