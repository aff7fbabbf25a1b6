#!/usr/bin/env bash
# GPU machine only: how the driver's checkpoint scales with the number of CUDA processes, the lever
# behind checkpoint.parallelism (bench/README.md section 4). No containerd, no shim: N plain
# host processes (bench/gpu_hold.c `hold`) each allocate G GiB on GPU 0 through the driver API and fill
# it; a helper that never calls cuInit (like the shim) locks, checkpoints, restores and unlocks them
# all, one after another (serial) and then all at once (parallel); each holder finally checks its
# whole buffer. Also host<->device copy bandwidth for comparison (pinned and pageable).
#
# Usage (on the GPU machine): bench/gpu_scaling.sh
#   GPU_HOLD=PATH          the gpu_hold binary (default: build-bench/bench/gpu_hold, build/bench/gpu_hold,
#                          else compiled here with cc from bench/gpu_hold.c)
#   NVPROXY_LIBCUDA=PATH   libcuda.so.1 (default /usr/local/nvidia/lib64/libcuda.so.1 when present)
#   SCALE_N="1 2 4 8"  SCALE_G="1 8"   process counts and GiB per process
# Needs GPU memory N*G GiB and about as much free host memory (the driver keeps checkpointed GPU
# memory in the process's host memory). 8 x 8 GiB: ~3-4 minutes in all.
set -euo pipefail
BENCH_DIR=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$BENCH_DIR/.." && pwd)
SCALE_N=${SCALE_N:-1 2 4 8}
SCALE_G=${SCALE_G:-1 8}

if [[ -z ${NVPROXY_LIBCUDA:-} && -e /usr/local/nvidia/lib64/libcuda.so.1 ]]; then
  export NVPROXY_LIBCUDA=/usr/local/nvidia/lib64/libcuda.so.1
fi
if [[ -z ${GPU_HOLD:-} ]]; then
  for c in "$REPO/build-bench/bench/gpu_hold" "$REPO/build/bench/gpu_hold"; do
    if [[ -x $c ]]; then GPU_HOLD=$c; break; fi
  done
fi
WORK=$(mktemp -d /tmp/gpu-scaling.XXXXXX)
HOLDERS=()
cleanup() {
  local p
  for p in "${HOLDERS[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT
if [[ -z ${GPU_HOLD:-} ]]; then
  cc -O2 -o "$WORK/gpu_hold" "$BENCH_DIR/gpu_hold.c" -ldl -lpthread
  GPU_HOLD=$WORK/gpu_hold
fi
log() { echo "[gpu_scaling $(date +%T)] $*" >&2; }
ms_field() { tr ' ' '\n' <<<"$1" | awk -F= -v k="$2" '$1 == k {printf "%.2f", $2 / 1000}'; }

command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | head -1 | sed 's/^/GPU: /' >&2
log "gpu_hold $GPU_HOLD, libcuda ${NVPROXY_LIBCUDA:-libcuda.so.1}"

# start_holders N G: N holders of G GiB each, ready
start_holders() {
  local i deadline
  HOLDERS=()
  for i in $(seq "$1"); do
    "$GPU_HOLD" hold "$2" "$WORK/ready.$i" >"$WORK/hold.$i.out" 2>&1 &
    HOLDERS+=($!)
  done
  deadline=$((SECONDS + 120))
  for i in $(seq "$1"); do
    until [[ -s $WORK/ready.$i ]]; do
      ((SECONDS < deadline)) || { cat "$WORK"/hold.*.out >&2; echo "holders not ready" >&2; exit 1; }
      kill -0 "${HOLDERS[i - 1]}" 2>/dev/null || { cat "$WORK/hold.$i.out" >&2; exit 1; }
      sleep 0.1
    done
  done
}
# stop_holders: DATA=OK when every holder found its data intact (not in a subshell: it waits)
stop_holders() {
  local p ok=OK
  for p in "${HOLDERS[@]}"; do kill -TERM "$p"; done
  for p in "${HOLDERS[@]}"; do wait "$p" || ok=BAD; done
  grep -qh "data BAD" "$WORK"/hold.*.out && ok=BAD
  rm -f "$WORK"/ready.* "$WORK"/hold.*.out
  HOLDERS=()
  DATA=$ok
}

ROWS=()
for g in $SCALE_G; do
  for n in $SCALE_N; do
    log "N=$n x G=$g GiB: starting holders"
    start_holders "$n" "$g"
    ser=$("$GPU_HOLD" toggle serial "${HOLDERS[@]}")
    log "  serial:   $ser"
    par=$("$GPU_HOLD" toggle parallel "${HOLDERS[@]}")
    log "  parallel: $par"
    stop_holders
    sc=$(ms_field "$ser" checkpoint_ms) pc=$(ms_field "$par" checkpoint_ms)
    sr=$(ms_field "$ser" restore_ms) pr=$(ms_field "$par" restore_ms)
    su=$(awk -v a="$sc" -v b="$pc" 'BEGIN {printf "%.1fx", a / b}')
    ru=$(awk -v a="$sr" -v b="$pr" 'BEGIN {printf "%.1fx", a / b}')
    per=$(awk -v t="$pc" -v n="$n" -v g="$g" 'BEGIN {printf "%.2f", n * g / t}')
    ROWS+=("| $g | $n | $sc | $pc | $su | $sr | $pr | $ru | $per | $DATA |")
  done
done
log "copy bandwidth (4 GiB)"
bw=$("$GPU_HOLD" bw 4)

echo "driver-API checkpoint scaling, $(date -u +%F), $(nproc) CPUs, $(free -g | awk '/^Mem:/{print $2}') GiB RAM"
echo
echo "| GiB per process | processes | checkpoint serial s | checkpoint parallel s | speed-up | restore serial s | restore parallel s | speed-up | parallel checkpoint GiB/s | data after |"
echo "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"
printf '%s\n' "${ROWS[@]}"
echo
echo "copy bandwidth, one process, 4 GiB: $bw"
