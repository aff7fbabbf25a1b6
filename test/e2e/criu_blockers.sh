#!/usr/bin/env bash
# Issue 33, item 3: what CRIU cannot dump is refused before anything is toggled, naming the process,
# the object and what to do, and the container runs on. With the fake driver (runc or crun):
#   io_uring   a CUDA process that keeps an io_uring instance open (libuv does it by itself:
#              PyTorch's TCPStore): refused, nothing locked, the pid and the fix in the error and
#              in the report; still running and working. Without the preflight CRIU failed only after
#              the toggles ("Unknown shit 600", rolled back).
# Usage: criu_blockers.sh [1.6|2.3]
set -euo pipefail
source "$(dirname "$0")/lib/shim-env.sh"
source "$(dirname "$0")/lib/fake-cuda.sh"
nv_fake_cuda
NV_SHIM_EXTRA=$NV_FAKE_CHECKPOINT
export NV_SHIM_EXTRA
nv_start_with_shim --containerd "${1:-2.3}"


nv_log "case io_uring: a CUDA process with an io_uring instance"
nv_ctr run -d --runtime $NV_RT "${NV_FAKE_MOUNTS[@]}" "$NV_IMAGE" ring \
  /fake/fake_cuda_app --dir /fakecuda --device /dev/fakegpu0 --map --io-uring
host=$(nv_task_pid ring)
cp=$(nv_container_pid "$host")
nv_wait_for -t 10 test -e "$FAKE/cuda/$cp.ready" || nv_fail "the fake CUDA app did not start"
ring_fd=$(cat "$FAKE/cuda/$cp.io_uring")
[[ $(readlink "/proc/$host/fd/$ring_fd") == 'anon_inode:[io_uring]' ]] || nv_fail "fd $ring_fd of $host is no io_uring"
: >"$FAKE/cuda/calls.log"
set +e
out=$(nv_ctr c checkpoint --task --rw ring ringref 2>&1)
rc=$?
set -e
echo "$out" >&2
((rc != 0)) || nv_fail "the checkpoint of a process with an io_uring instance was not refused"
nv_assert_contains "$out" "1 process uses io_uring, which CRIU cannot dump" "the refusal"
nv_assert_contains "$out" "pid $host (fake_cuda_app) holds an io_uring instance on fd $ring_fd" "the refusal's process row"
nv_assert_contains "$out" "UV_USE_IO_URING=0" "the refusal's fix"
if awk '$2=="lock"' "$FAKE/cuda/calls.log" | grep -q .; then nv_fail "CUDA was locked before the refusal: $(cat "$FAKE/cuda/calls.log")"; fi
diag=$NV_STATE_DIR/io.containerd.runtime.v2.task/$NV_NAMESPACE/ring/checkpoint-diagnostic.json
nv_assert_eq refused "$(jq -r .verdict "$diag")" "the report's verdict"
nv_assert_eq "$ring_fd" "$(jq -r '.io_uring.processes[0].fds[0]' "$diag")" "the report's io_uring fd"
nv_assert_eq RUNNING "$(nv_task_status ring)" "the container after the refusal"
nv_assert_eq running "$(cat "$FAKE/cuda/$cp.state")" "CUDA state after the refusal"
a=$(nv_fake_counter "$cp")
nv_wait_for -t 10 nv_fake_counted_past "$cp" "$a" || nv_fail "process $cp does not work after the refusal"
echo "PASS criu_blockers (containerd $NV_CONTAINERD_VERSION, $NV_RUNTIME)"
