#!/usr/bin/env bash
# Issue 16, item 7: on a host whose CUDA driver cannot be loaded (checkpoint.libcuda names no
# library), a container with a process holding a configured GPU device is refused like any other
# refusal: the table names the pid, the device and its fds, and checkpoint-diagnostic.json is written;
# the container keeps running. Usage: checkpoint_nodriver.sh [1.6|1.7|2|2.3]
set -euo pipefail
source "$(dirname "$0")/lib/shim-env.sh"
source "$(dirname "$0")/lib/fake-cuda.sh"
FIX=${NVPROXY_FIXTURES_DIR:?NVPROXY_FIXTURES_DIR (build/test/fixtures) is not set}
[[ -x $FIX/fake_cuda_app ]] || nv_fail "fixtures missing in $FIX"

FAKE=$(mktemp -d /tmp/nvproxy-nodriver.XXXXXX)
nv_defer rm -rf "$FAKE"
mkdir -p "$FAKE/cuda" "$FAKE/bin"
touch "$FAKE/fakegpu0"
cp "$FIX/fake_cuda_app" "$FAKE/bin/"
export NVPROXY_FAKE_CUDA_DIR=$FAKE/cuda
NV_SHIM_EXTRA="checkpoint:
  libcuda: $FAKE/no-such-libcuda.so.1
  libnvml: $FAKE/no-such-libnvidia-ml.so.1
  device_globs: [\"/dev/nvidia*\", \"/dev/fakegpu*\"]"
export NV_SHIM_EXTRA
nv_start_with_shim --containerd "${1:-1.6}"

ready() { ls "$FAKE/cuda" | grep -q '\.ready$'; }

nv_ctr run -d --runtime $NV_RT --mount "type=bind,src=$FAKE/fakegpu0,dst=/dev/fakegpu0,options=rbind:rw" \
  --mount "type=bind,src=$FAKE/cuda,dst=/fakecuda,options=rbind:rw" --mount "type=bind,src=$FAKE/bin,dst=/fake,options=rbind:ro" \
  "$NV_IMAGE" nd /fake/fake_cuda_app --dir /fakecuda --device /dev/fakegpu0 --map
nv_wait_for -t 10 ready || nv_fail "the fake CUDA app did not start"
host_pid=$(nv_ctr task ls | awk '$1=="nd"{print $2}')
fds=$(find "/proc/$host_pid/fd" -lname /dev/fakegpu0 -printf '%f\n' | sort -n | paste -sd,)
[[ -n $fds ]] || nv_fail "the app holds no fd on /dev/fakegpu0"
set +e
err=$(nv_ctr task checkpoint nd 2>&1)
rc=$?
set -e
echo "$err" >&2
((rc != 0)) || nv_fail "the checkpoint succeeded without a CUDA driver"
nv_assert_contains "$err" "1 process holds GPU devices, but their CUDA state cannot be read" "the refusal says why"
nv_assert_contains "$err" "no-such-libcuda.so.1" "the refusal carries the cause from below"
nv_assert_contains "$err" "PID " "the refusal carries the table"
nv_assert_contains "$err" "pid $host_pid (fake_cuda_app) holds /dev/fakegpu0 (fd $fds" "the refusal names the pid, device and fds"
diag=$(nv_bundle nd)/checkpoint-diagnostic.json
jq -e --argjson p "$host_pid" '.verdict == "refused" and any(.processes[]; .pid == $p and any(.holders[]; .path == "/dev/fakegpu0" and has("fd")))' \
  "$diag" >/dev/null || nv_fail "checkpoint-diagnostic.json does not name pid $host_pid and its device: $(cat "$diag" 2>&1)"
nv_assert_eq RUNNING "$(nv_task_status nd)" "container state after the refusal"
c=$(ls "$FAKE/cuda" | sed -n 's/^\([0-9]*\)\.ready$/\1/p' | head -1)
a=$(nv_fake_counter "$c")
nv_wait_for -t 5 nv_fake_counted_past "$c" "$a" || nv_fail "the app stopped working after the refusal"
nv_ctr task kill -s KILL nd
echo "PASS checkpoint_nodriver ($NV_RUNTIME, containerd $NV_CONTAINERD_VERSION)"
