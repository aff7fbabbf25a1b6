#!/usr/bin/env bash
# One checkpoint restored into N replicas at once against one restore (issue 35, item 4), through
# containerd, our shim, the runtime and the image store. The process is fake_cuda_app holding S MiB
# of written memory, without CUDA (what a real process's device memory becomes in its image; the
# fake driver's files are per process and would collide between replicas); its files are in the
# container's /tmp, so each replica checks its own memory: every page is read back after the
# restore (a full round of its check, DIR/PID.checked) and none differs (DIR/PID.corrupt).
# Per size: the restore of one, of N at once (x one), and whether every replica's data checked.
# Prints a markdown table (stdout; also $BENCH_OUT). Real driver: test/gpu (GPU machine).
#
# Usage: sudo bench/fan_out.sh
#   BENCH_CONTAINERD=1.6|1.7|2.3 (1.6)  BENCH_SIZES_MIB=256,1024  BENCH_REPLICAS=3  NV_RUNTIME=runc|runsc
#   NVPROXY_SHIM_DIR, NVPROXY_FIXTURES_DIR: default build/shim, build/test/fixtures
set -euo pipefail
BENCH_DIR=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$BENCH_DIR/.." && pwd)
: "${NVPROXY_SHIM_DIR:=$REPO/build/shim}"
: "${NVPROXY_FIXTURES_DIR:=$REPO/build/test/fixtures}"
export NVPROXY_SHIM_DIR NVPROXY_FIXTURES_DIR
export NV_RUNTIME=${NV_RUNTIME:-runc}
source "$REPO/test/e2e/lib/shim-env.sh"
FIX=$NVPROXY_FIXTURES_DIR
[[ -x $FIX/fake_cuda_app ]] || nv_fail "no fake_cuda_app in $FIX (build the tests)"
IFS=, read -r -a SIZES <<<"${BENCH_SIZES_MIB:-256,1024}"
N=${BENCH_REPLICAS:-3}

STORE=$(mktemp -d /var/tmp/nvproxy-bench-store.XXXXXX)
nv_defer rm -rf "$STORE"
NV_SHIM_EXTRA="checkpoint:
  image_store: $STORE"
export NV_SHIM_EXTRA
nv_start_with_shim --containerd "${BENCH_CONTAINERD:-1.6}"
BIN=$(mktemp -d /tmp/nvproxy-bench-bin.XXXXXX)
nv_defer rm -rf "$BIN"
cp "$FIX/fake_cuda_app" "$BIN/"
MOUNTS=(--mount "type=bind,src=$BIN,dst=/fake,options=rbind:ro")

in_ctr() { nv_ctr task exec --exec-id "b$RANDOM" "$1" sh -c "$2" 2>/dev/null || true; }
checked() { in_ctr "$1" 'cat /tmp/1.checked 2>/dev/null || echo 0'; }
checked_above() { (($(checked "$1") > $2)); }
stop_rm() {
  nv_ctr task kill -s KILL "$1" >/dev/null 2>&1 || true
  nv_wait_for -t 60 bash -c "[[ \$(ctr -a $NV_SOCK -n $NV_NAMESPACE task ls | awk '\$1==\"$1\"{print \$3}') != RUNNING ]]" || true
  nv_ctr task rm -f "$1" >/dev/null 2>&1 || true
  nv_ctr c rm "$1" >/dev/null 2>&1 || true
}
# restore_at_once NAME...: restores each from the image at the same time; prints the ms until all returned.
restore_at_once() {
  local t0 pids=() n
  t0=$(date +%s%N)
  for n in "$@"; do
    nv_ctr c restore --live --rw "$n" fan/ref:1 </dev/null >"$NV_DIR/$n.out" 2>&1 &
    pids+=($!)
  done
  for n in "${pids[@]}"; do wait "$n" || nv_fail "a restore failed: $(cat "$NV_DIR"/*.out)"; done
  echo $((($(date +%s%N) - t0) / 1000000))
}
# data_ok NAME AT: a full round of the memory check after the restore, and no page differed.
data_ok() {
  nv_wait_for -t 600 checked_above "$1" "$2" || { echo "no full check"; return; }
  [[ -z $(in_ctr "$1" 'cat /tmp/1.corrupt 2>/dev/null') ]] && echo yes || echo "corrupt at $(in_ctr "$1" 'cat /tmp/1.corrupt')"
}
secs() { awk -v m="$1" 'BEGIN {printf "%.1f", m / 1000}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (b > 0) printf "%.2fx", a / b; else print "-"}'; }

rows=()
for mib in "${SIZES[@]}"; do
  nv_ctr run -d --runtime $NV_RT "${MOUNTS[@]}" "$NV_IMAGE" origin /fake/fake_cuda_app --dir /tmp --device /etc/hostname \
    --no-cuda --hold-mib "$mib"
  nv_wait_for -t 600 checked_above origin 0 || nv_fail "the app holding $mib MiB did not check its memory once"
  nv_ctr c checkpoint --task --rw origin fan/ref:1
  at=$(checked origin)
  stop_rm origin
  sync
  one_ms=$(restore_at_once one)
  one_ok=$(data_ok one "$at")
  stop_rm one
  names=()
  for k in $(seq 1 "$N"); do names+=("fan$k"); done
  sync
  fan_ms=$(restore_at_once "${names[@]}")
  fan_ok=yes
  for n in "${names[@]}"; do
    r=$(data_ok "$n" "$at")
    [[ $r == yes ]] || fan_ok="$n: $r"
  done
  for n in "${names[@]}"; do stop_rm "$n"; done
  nv_ctr image rm fan/ref:1 >/dev/null 2>&1 || true
  "$NVPROXY_SHIM_DIR/containerd-shim-nvproxy-v1" image prune --older-than 0 --store "$STORE" >/dev/null
  rows+=("| $NV_CONTAINERD_VERSION | $NV_RUNTIME | $(awk -v m="$mib" 'BEGIN {printf "%.2f", m / 1024}') | $N | $(secs "$one_ms") | $(secs "$fan_ms") ($(ratio "$fan_ms" "$one_ms")) | $one_ok / $fan_ok |")
  nv_log "${rows[-1]}"
done

table="| containerd | runtime | GiB per process | replicas | restore of one s | N at once s (x one) | data checked (one / all N) |
| --- | --- | ---: | ---: | ---: | ---: | --- |"
for r in "${rows[@]}"; do table+=$'\n'"$r"; done
echo "$table"
[[ -z ${BENCH_OUT:-} ]] || echo "$table" >"$BENCH_OUT"
