#!/usr/bin/env bash
# Issue 47: a checkpoint image through a registry on loopback (Debian's docker-registry), beside
# `cp` of the same bytes into the registry's disk. One image of SIZE MiB: a page file of random
# pages (what staged device memory looks like to a registry: not compressible) and a few small
# files. Rows: cp; image push with 1 stream and with N; the same image pushed again (what a second
# checkpoint of an unchanged server sends); the page file with 8 MiB of new pages inserted in its
# middle pushed (content-defined chunks: only the chunks around the change); image pull into an
# empty store with 1 stream and with N; a pull into a store holding the first image (chunks copied
# locally). Prints a markdown table; no timing is asserted.
# Usage: sudo BENCH_SIZE_MIB=2048 BENCH_STREAMS=8 bench/registry_travel.sh [BUILD_DIR]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../build}
shim=$build/shim/containerd-shim-nvproxy-v1
size=${BENCH_SIZE_MIB:-2048} streams=${BENCH_STREAMS:-8}
[[ -x $shim ]] || { echo "no shim in $build (cmake --build)" >&2; exit 2; }
command -v docker-registry >/dev/null || { echo "docker-registry is not installed" >&2; exit 2; }
work=$(mktemp -d /var/tmp/nvproxy-bench-travel.XXXXXX)
regpid=
cleanup() { [[ -n $regpid ]] && kill "$regpid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
source "$here/lib/registry.sh"
bench_registry_start "$work"
mkdir -p "$work/image"
head -c $((size << 20)) /dev/urandom >"$work/image/pages-1.img"
for f in inventory core-1 mm-1 pagemap-1; do head -c 4096 /dev/urandom >"$work/image/$f.img"; done
sync
cfg=$work/cfg.yaml
printf 'checkpoint:\n  registry_tls_verify: false\n' >"$cfg"
now() { date +%s.%N; }
rows=()
row() {  # WHAT SECONDS BYTES_MOVED
  rows+=("| $1 | $(printf '%.2f' "$2") | $(awk -v b="$3" -v s="$2" 'BEGIN{printf "%.0f", b/s/1e6}') | $(awk -v b="$3" 'BEGIN{printf "%.0f", b/1048576}') |")
}
timed() { local t0; t0=$(now); "$@" >"$work/out" 2>&1 || { cat "$work/out" >&2; exit 1; }; T=$(awk -v a="$t0" -v b="$(now)" 'BEGIN{print b-a}'); }
field() { sed -n "s/.*[(,] *\([0-9]*\) $1.*/\1/p" "$work/out" | head -1; }
bytes=$(du -sb "$work/image" | cut -f1)

mkdir -p "$work/cp"
timed bash -c "cp -r '$work/image' '$work/cp/' && sync"
row "cp of the image into the registry's filesystem" "$T" "$bytes"
push() { timed "$shim" image push "$work/image" "$reg/bench/img:$1" --config "$cfg" --tls-verify=false --streams "$2"; }
push s1 1
row "image push, 1 stream" "$T" "$(field sent)"
bench_registry_restart
push sN "$streams"
row "image push, $streams streams" "$T" "$(field sent)"
first=$(sed -n 's/^pushed .*: \([^ ]*@sha256:[0-9a-f]*\)$/\1/p' "$work/out")
push again "$streams"
row "the same image pushed again ($(field sent) bytes sent)" "$T" "$bytes"
python3 - "$work/image/pages-1.img" <<'PY'
import os, sys
p = sys.argv[1]
data = open(p, 'rb').read()
mid = (len(data) // 2) // 4096 * 4096
open(p, 'wb').write(data[:mid] + os.urandom(8 << 20) + data[mid:])
PY
push changed "$streams"
row "8 MiB of new pages in the middle, pushed ($(field sent) bytes sent)" "$T" "$(du -sb "$work/image" | cut -f1)"
second=$(sed -n 's/^pushed .*: \([^ ]*@sha256:[0-9a-f]*\)$/\1/p' "$work/out")
sync; echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || true
pull() { timed "$shim" image pull "$1" --store "$2" --config "$cfg" --tls-verify=false --streams "$3"; }
pull "$first" "$work/store1" 1
row "image pull into an empty store, 1 stream" "$T" "$(field fetched)"
pull "$first" "$work/storeN" "$streams"
row "image pull into an empty store, $streams streams" "$T" "$(field fetched)"
pull "$second" "$work/storeN" "$streams"
row "the changed image pulled where the first is ($(field fetched) fetched, $(field 'from earlier pulls') copied)" "$T" "$bytes"
echo "registry_travel: $size MiB image, $(nproc) CPUs, $(uname -r), $(date -u +%F)"
echo "| step | s | MB/s | MiB |"
echo "| --- | ---: | ---: | ---: |"
printf '%s\n' "${rows[@]}"
