#!/usr/bin/env bash
# Issue 4 acceptance on a machine without a GPU: the device layer through containerd + our shim +
# runc, against a fake host (device nodes made with mknod and NVIDIA's majors, a fake
# /proc/driver/nvidia, a fake driver root) and a CDI spec. Inside the container the nodes, mounts
# and env must appear exactly as requested. test/gpu/ runs the same layer against the real driver.
# Usage: gpu_layer.sh [1.6|1.7]
set -euo pipefail
source "$(dirname "$0")/lib/shim-env.sh"

F=$(mktemp -d /tmp/nvproxy-gpuhost.XXXXXX)
nv_defer rm -rf "$F"
mknod "$F/nvidia0" c 195 0 && mkdir -p "$F/dev/nvidia-caps" && mv "$F/nvidia0" "$F/dev/"
mknod "$F/dev/nvidiactl" c 195 255
mknod "$F/dev/nvidia-uvm" c 238 0
mknod "$F/dev/nvidia-uvm-tools" c 238 1
mkdir -p "$F/proc/gpus/0000:3b:00.0" "$F/cdi"
printf 'Model: \t\t NVIDIA H200\nGPU UUID: \t GPU-11111111-2222-3333-4444-555555555555\nDevice Minor: \t 0\n' \
  >"$F/proc/gpus/0000:3b:00.0/information"
echo "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.0  Release Build" >"$F/proc/version"
lib=$F/driver/usr/lib/x86_64-linux-gnu
mkdir -p "$lib" "$F/driver/usr/bin"
echo "fake libcuda 580.0" >"$lib/libcuda.so.580.0"
ln -s libcuda.so.580.0 "$lib/libcuda.so.1"
echo "fake libnvidia-ml 580.0" >"$lib/libnvidia-ml.so.580.0"
ln -s libnvidia-ml.so.580.0 "$lib/libnvidia-ml.so.1"
printf '#!/bin/sh\necho fake nvidia-smi\n' >"$F/driver/usr/bin/nvidia-smi" && chmod +x "$F/driver/usr/bin/nvidia-smi"
cat >"$F/cdi/vendor.yaml" <<YAML
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
    - hostPath: $lib/libcuda.so.580.0
      containerPath: /opt/example/libexample.so
      options: [ro, nosuid, nodev, bind]
YAML
export NV_SHIM_EXTRA="gpu:
  dev_root: $F/dev
  driver_root: $F/driver
  proc_driver_root: $F/proc
  cdi_spec_dirs: [$F/cdi]"
nv_start_with_shim --containerd "${1:-1.6}"
in_ctr() { local id=$1; shift; nv_ctr run --rm --runtime $NV_RT "$@" "$NV_IMAGE" "$id" sh -c "$CMD"; }

nv_log "NVIDIA_VISIBLE_DEVICES=0: discovery injects nodes, libraries, tools"
CMD='ls -l /dev/nvidia0 /dev/nvidiactl /dev/nvidia-uvm; cat /usr/lib/x86_64-linux-gnu/libcuda.so.1; ls -l /usr/lib/x86_64-linux-gnu/ | grep libcuda; nvidia-smi; env | grep ^NVIDIA'
out=$(in_ctr g0 --env NVIDIA_VISIBLE_DEVICES=0)
echo "$out" >&2
grep -Eq '^c.* 195, +0 .*/dev/nvidia0$' <<<"$out" || nv_fail "/dev/nvidia0 is not char 195, 0"
grep -Eq '^c.* 195, +255 .*/dev/nvidiactl$' <<<"$out" || nv_fail "/dev/nvidiactl is not char 195, 255"
grep -Eq '^c.* 238, +0 .*/dev/nvidia-uvm$' <<<"$out" || nv_fail "/dev/nvidia-uvm is not char 238, 0"
nv_assert_contains "$out" "fake libcuda 580.0" "libcuda.so.1 reaches the driver's library"
nv_assert_contains "$out" "fake nvidia-smi" "nvidia-smi is mounted"
nv_assert_contains "$out" "NVIDIA_VISIBLE_DEVICES=0" "env kept"
# Only the requested GPU's node: a second GPU would be /dev/nvidia1 (not on this fake host either).
ann=$(nv_ctr run --rm --runtime $NV_RT --env NVIDIA_VISIBLE_DEVICES=0 "$NV_IMAGE" g0b sh -c 'ls /dev | grep -c nvidia0' || true)
nv_assert_eq 1 "$ann" "one nvidia0 node"

nv_log "NVIDIA_VISIBLE_DEVICES=none and unset: no GPU nodes"
CMD='ls /dev | grep -c nvidia || true'
nv_assert_eq 0 "$(in_ctr gnone --env NVIDIA_VISIBLE_DEVICES=none)" "nodes with NVIDIA_VISIBLE_DEVICES=none"
nv_assert_eq 0 "$(in_ctr gunset)" "nodes without a request"

nv_log "CDI device through the cdi.k8s.io annotation"
CMD='ls -l /dev/examplegpu0; cat /opt/example/libexample.so; echo EXAMPLE_GPU=$EXAMPLE_GPU; grep -c " /opt/example/libexample.so " /proc/self/mountinfo'
out=$(in_ctr gcdi --annotation cdi.k8s.io/test=example.com/gpu=gpu0)
echo "$out" >&2
grep -Eq '^c.* 195, +0 .*/dev/examplegpu0$' <<<"$out" || nv_fail "CDI node /dev/examplegpu0 is not char 195, 0"
nv_assert_contains "$out" "fake libcuda 580.0" "CDI mount"
nv_assert_contains "$out" "EXAMPLE_GPU=gpu0" "CDI env"

nv_log "a bad CDI file is named and does not hide the good one"
printf 'cdiVersion: "0.6.0"\nkind: broken\ndevices: []\n' >"$F/cdi/broken.yaml"
out=$(in_ctr gcdi2 --annotation cdi.k8s.io/test=example.com/gpu=gpu0)
nv_assert_contains "$out" "EXAMPLE_GPU=gpu0" "the good spec still resolves"
set +e
err=$(in_ctr gcdi3 --annotation cdi.k8s.io/test=example.com/gpu=nosuch 2>&1)
rc=$?
set -e
((rc != 0)) || nv_fail "an unknown CDI device was accepted"
nv_assert_contains "$err" "nosuch" "the error names the device"
nv_assert_contains "$err" "broken.yaml" "the error names the bad CDI file"
echo "PASS gpu_layer ($NV_RUNTIME, containerd $NV_CONTAINERD_VERSION)"
