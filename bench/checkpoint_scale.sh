#!/usr/bin/env bash
# Checkpoints at size, through containerd's own paths (issue 26): one CUDA process (the fake driver's
# fake_cuda_app holding S MiB of written memory, which is what a real process's device memory becomes
# in its image) checkpointed and restored through containerd, our shim, runc and CRIU, for each size
# and each path:
#   content-store   `ctr c checkpoint --task`: containerd packs the image into its content store
#                   (and unpacks it again for `ctr c restore`)
#   image-store     the same command with checkpoint.image_store: containerd keeps a reference
#   image-path      `ctr task checkpoint --image-path DIR` (containerd 2.x honours it for any
#                   runtime; restore not timed: ctr restores from its content store only)
# Per run: end to end of the client's command, the shim's own phases from its report (CUDA
# checkpoint, CRIU dump = snapshot, resume), the image's size, and the peak disk use while the
# command ran (the sum over the filesystems of containerd's root, the store and /tmp, sampled every
# 50 ms, above what was used before), as a multiple of the image.
# Prints a markdown table (stdout; also $BENCH_OUT). Real driver: test/gpu (GPU machine).
#
# Usage: sudo bench/checkpoint_scale.sh
#   BENCH_CONTAINERD=1.6|1.7|2.3   (default 1.6)   BENCH_SIZES_MIB=1024,4096   BENCH_PATHS=content-store,image-store
#   BENCH_ZERO_MIB=0   the process also holds this much of present zero pages (a preallocated pool
#                      the driver staged, issue 36); BENCH_SKIP_ZERO=true|false (checkpoint.skip_zero_pages)
#   NVPROXY_SHIM_DIR, NVPROXY_FIXTURES_DIR: default build/shim, build/test/fixtures
set -euo pipefail
BENCH_DIR=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$BENCH_DIR/.." && pwd)
: "${NVPROXY_SHIM_DIR:=$REPO/build/shim}"
: "${NVPROXY_FIXTURES_DIR:=$REPO/build/test/fixtures}"
export NVPROXY_SHIM_DIR NVPROXY_FIXTURES_DIR
export NV_RUNTIME=runc
source "$REPO/test/e2e/lib/shim-env.sh"
source "$REPO/test/e2e/lib/fake-cuda.sh"
nv_fake_cuda
CTRD=${BENCH_CONTAINERD:-1.6}
IFS=, read -r -a SIZES <<<"${BENCH_SIZES_MIB:-1024,4096}"
default_paths=content-store,image-store
[[ $CTRD == 2* ]] && default_paths+=,image-path
IFS=, read -r -a PATHS <<<"${BENCH_PATHS:-$default_paths}"

STORE=$(mktemp -d /var/tmp/nvproxy-bench-store.XXXXXX)
nv_defer rm -rf "$STORE"
write_config() {  # $1: the store, or empty
  NV_SHIM_EXTRA="checkpoint:
  libcuda: $FIX/libcuda.so
  libnvml: $FIX/libnvidia-ml.so
  device_globs: [\"/dev/nvidia*\", \"/dev/fakegpu*\"]
  skip_zero_pages: ${BENCH_SKIP_ZERO:-true}${1:+
  image_store: $1
  image_store_keep: 1}"
  export NV_SHIM_EXTRA
}
write_config ""
nv_start_with_shim --containerd "$CTRD"
MOUNTS=(--mount "type=bind,src=$FAKE/fakegpu0,dst=/dev/fakegpu0,options=rbind:rw"
  --mount "type=bind,src=$FAKE/cuda,dst=/fakecuda,options=rbind:rw"
  --mount "type=bind,src=$FAKE/bin,dst=/fake,options=rbind:ro")

# Bytes used on the distinct filesystems the image can land on.
used_bytes() {
  df -B1 --output=source,used "$NV_DIR/root" "$STORE" /tmp 2>/dev/null | awk 'NR>1 && !seen[$1]++ {s+=$2} END {printf "%.0f\n", s}'
}
# run_sampled OUTFILE CMD...: runs CMD, writing "seconds peak_bytes_above_start" to OUTFILE.
run_sampled() {
  local out=$1 base peak=0 u t0 pid
  shift
  base=$(used_bytes)
  t0=$(date +%s%N)
  "$@" >/dev/null 2>&1 &
  pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    u=$(used_bytes)
    ((u > peak)) && peak=$u
    sleep 0.05
  done
  wait "$pid" || nv_fail "failed: $*"
  u=$(used_bytes)
  ((u > peak)) && peak=$u
  echo "$(((($(date +%s%N) - t0) / 1000000))) $((peak > base ? peak - base : 0))" >"$out"
}
phase_ms() { jq -r --arg p "$2" '.phases[$p + "_ms"] // 0' "$1"; }
gib() { awk -v b="$1" 'BEGIN {printf "%.2f", b / 1073741824}'; }
secs() { awk -v m="$1" 'BEGIN {printf "%.1f", m / 1000}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (b > 0) printf "%.2fx", a / b; else print "-"}'; }
stop_rm() {
  nv_ctr task kill -s KILL "$1" >/dev/null 2>&1 || true
  nv_wait_for -t 60 bash -c "[[ \$(ctr -a $NV_SOCK -n $NV_NAMESPACE task ls | awk '\$1==\"$1\"{print \$3}') != RUNNING ]]" || true
  nv_ctr task rm -f "$1" >/dev/null 2>&1 || true
  nv_ctr c rm "$1" >/dev/null 2>&1 || true
}

rows=()
n=0
for path in "${PATHS[@]}"; do
  if [[ $path == image-store ]]; then write_config "$STORE"; else write_config ""; fi
  nv_shim_config_write "$NVPROXY_SHIM_CONFIG"
  for mib in "${SIZES[@]}"; do
    n=$((n + 1))
    id=scale$n
    rm -f "$FAKE"/cuda/*
    nv_ctr run -d --runtime $NV_RT "${MOUNTS[@]}" "$NV_IMAGE" $id /fake/fake_cuda_app --dir /fakecuda \
      --device /dev/fakegpu0 --hold-mib "$mib" --zero-mib "${BENCH_ZERO_MIB:-0}"
    nv_wait_for -t 300 bash -c "ls $FAKE/cuda | grep -q '\.ready$'" || nv_fail "the fake app holding $mib MiB did not start"
    bundle=$NV_STATE_DIR/io.containerd.runtime.v2.task/$NV_NAMESPACE/$id
    sync
    case $path in
      image-path)
        dir=/var/tmp/nvproxy-bench-img.$id
        rm -rf "$dir"
        run_sampled "$FAKE/ck" nv_ctr task checkpoint --image-path "$dir" $id
        image=$(du -sb "$dir" | awk '{print $1}')
        ;;
      *)
        c0=$(du -sb "$NV_DIR/root/io.containerd.content.v1.content" | awk '{print $1}')
        run_sampled "$FAKE/ck" nv_ctr c checkpoint --task $id ${id}ref
        image=$(($(du -sb "$NV_DIR/root/io.containerd.content.v1.content" | awk '{print $1}') - c0))
        [[ $path == image-store ]] && image=$(du -sb "$STORE" | awk '{print $1}')
        ;;
    esac
    # What the image's files take on disk (holes not counted): the store's and image-path's
    # entries can be sparse; containerd's content store holds a tar of them, which is not.
    case $path in
      image-path) on_disk=$(du -s --block-size=1 "$dir" | awk '{print $1}') ;;
      image-store) on_disk=$(du -s --block-size=1 "$STORE" | awk '{print $1}') ;;
      *) on_disk=$image ;;
    esac
    read -r ck_ms ck_peak <"$FAKE/ck"
    diag=$bundle/checkpoint-diagnostic.json
    snap=$(phase_ms "$diag" snapshot) cuda=$(phase_ms "$diag" checkpoint) resume=$(phase_ms "$diag" resume)
    own=$(jq -r '[.phases[]] | add' "$diag")
    stop_rm $id
    rs_ms=- rs_peak=0
    if [[ $path != image-path ]]; then
      printf checkpointed >"$FAKE/cuda/$(ls "$FAKE/cuda" | sed -n 's/\.cuda$//p' | head -1).state"
      sync
      run_sampled "$FAKE/rs" nv_ctr c restore --live $id ${id}ref
      read -r rs_ms rs_peak <"$FAKE/rs"
      stop_rm $id
      nv_ctr image rm ${id}ref >/dev/null 2>&1 || true
    else
      rm -rf "$dir"
    fi
    "$NVPROXY_SHIM_DIR/containerd-shim-nvproxy-v1" image prune --older-than 0 --store "$STORE" >/dev/null
    rows+=("| $NV_CONTAINERD_VERSION | $path | $(gib $((mib << 20))) | $(gib $((${BENCH_ZERO_MIB:-0} << 20))) | ${BENCH_SKIP_ZERO:-true} | $(secs "$ck_ms") | $(secs "$own") | $(secs "$snap") | $(secs "$cuda") / $(secs "$resume") | $(gib "$image") | $(gib "$on_disk") | $(gib "$ck_peak") ($(ratio "$ck_peak" "$image")) | $(secs "$rs_ms") | $(gib "$rs_peak") ($(ratio "$rs_peak" "$image")) |")
    nv_log "${rows[-1]}"
  done
done

table="| containerd | path | GiB written | GiB zero | skip_zero_pages | checkpoint end to end s | the shim's phases s | CRIU dump s | CUDA ckpt / resume s | image GiB | image on disk GiB | checkpoint peak disk GiB (x image) | restore end to end s | restore peak disk GiB (x image) |
| --- | --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
for r in "${rows[@]}"; do table+=$'\n'"$r"; done
echo "$table"
[[ -z ${BENCH_OUT:-} ]] || echo "$table" >"$BENCH_OUT"
