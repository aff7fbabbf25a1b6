#!/usr/bin/env bash
# Issue 47: what zstd at a fast level would buy a checkpoint's page file on its way through a
# registry. Two page files: CRIU's dump of a CPU-heavy Python process (a tokenizer's vocabulary,
# request logs, a cache of parsed JSON, a list of floats: SIZE MiB of heap) and random pages of the
# same size (staged device memory: weights and activations, which do not compress). For each:
# zstd levels 1 and 3 on one thread, the ratio and the MB/s of compressing and decompressing.
# Then, with a shim (BUILD_DIR), the Python image itself through Debian's docker-registry on
# loopback: `image push` without and with --compress zstd (8 streams), what the registry stores,
# and `image pull` of each into an empty store; with BENCH_LINK_MBIT=N again over loopback held to
# N Mbit/s (tc's token bucket on lo, removed at exit): what a link slower than the CPUs does.
# Prints markdown tables; nothing is asserted.
# Usage: sudo bench/zstd_pages.sh [BUILD_DIR]   (needs criu, zstd and python3; docker-registry with BUILD_DIR)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
shim=${1:+$1/shim/containerd-shim-nvproxy-v1}
for b in criu zstd python3; do command -v "$b" >/dev/null || { echo "$b is not installed" >&2; exit 2; }; done
work=$(mktemp -d /var/tmp/nvproxy-bench-zstd.XXXXXX)
pid= regpid=
cleanup() {
  [[ -n $pid ]] && kill "$pid" 2>/dev/null
  [[ -n $regpid ]] && kill "$regpid" 2>/dev/null
  [[ -n ${BENCH_LINK_MBIT:-} ]] && tc qdisc del dev lo root 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
cat >"$work/heap.py" <<'PY'
import json, random, sys, time
random.seed(1)
words = [''.join(random.choice('etaoinshrdlucmfwypvbgkjqxz') for _ in range(random.randint(3, 10))) for _ in range(50000)]
vocab = {w: i for i, w in enumerate(words)}
logs = [' '.join(random.choices(words, k=20)) for _ in range(1500000)]
cache = [json.loads(json.dumps({'id': i, 'score': random.random(), 'tags': random.choices(words, k=5)})) for i in range(400000)]
nums = [random.random() for _ in range(5000000)]
print('ready', flush=True)
while True:
    time.sleep(1)
PY
setsid python3 "$work/heap.py" >"$work/heap.log" 2>&1 </dev/null &
pid=$!
for _ in $(seq 300); do grep -q ready "$work/heap.log" && break; sleep 0.2; done
grep -q ready "$work/heap.log" || { echo "the Python heap did not build" >&2; exit 1; }
mkdir "$work/img"
criu dump -t "$pid" -D "$work/img" --leave-running --shell-job -o dump.log
pages=$(ls -S "$work"/img/pages-*.img | head -1)
size=$(stat -c %s "$pages")
head -c "$size" /dev/urandom >"$work/random.img"
now() { date +%s.%N; }
rows=()
for what in "$pages" "$work/random.img"; do
  name="CRIU pages of the Python heap"
  [[ $what == "$work/random.img" ]] && name="random pages (device memory)"
  for level in 1 3; do
    t0=$(now)
    zstd -"$level" -T1 -q -f "$what" -o "$work/z"
    t1=$(now)
    zstd -d -q -f "$work/z" -o /dev/null
    t2=$(now)
    z=$(stat -c %s "$work/z")
    rows+=("| $name | $level | $((size >> 20)) | $((z >> 20)) | $(awk -v a="$size" -v b="$z" 'BEGIN{printf "%.2f", a/b}') | $(awk -v s="$size" -v a="$t0" -v b="$t1" 'BEGIN{printf "%.0f", s/(b-a)/1e6}') | $(awk -v s="$size" -v a="$t1" -v b="$t2" 'BEGIN{printf "%.0f", s/(b-a)/1e6}') |")
  done
done
echo "zstd_pages: $(zstd --version | head -1 | tr -d '*'), $(nproc) CPUs, $(uname -r), $(date -u +%F)"
echo "| page file | level | MiB | MiB compressed | ratio | compress MB/s (1 thread) | decompress MB/s |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"
printf '%s\n' "${rows[@]}"
[[ -n $shim ]] || exit 0

# The image through a registry, as is and compressed.
source "$here/lib/registry.sh"
bench_registry_start "$work"
cfg=$work/cfg.yaml
printf 'checkpoint:\n  registry_tls_verify: false\n' >"$cfg"
bytes=$(du -sb "$work/img" | cut -f1)
rows=()
links=(loopback)
[[ -n ${BENCH_LINK_MBIT:-} ]] && links+=("${BENCH_LINK_MBIT}")
for link in "${links[@]}"; do
if [[ $link != loopback ]]; then
  tc qdisc replace dev lo root tbf rate "${link}mbit" burst 1mb latency 50ms
fi
for c in none zstd; do
  t0=$(now)
  out=$("$shim" image push "$work/img" "$reg/bench/py:$c" --config "$cfg" --streams 8 --compress "$c" 2>&1)
  t1=$(now)
  ref=$(sed -n 's/^pushed .*: \([^ ]*@sha256:[0-9a-f]*\)$/\1/p' <<<"$out")
  stored=$(du -sb "$work/registry" | cut -f1)
  sync; echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || true
  t2=$(now)
  "$shim" image pull "$ref" --store "$work/store-$link-$c" --config "$cfg" --streams 8 >/dev/null 2>&1
  t3=$(now)
  cmp "$work/img/$(basename "$pages")" "$(find "$work/store-$link-$c" -name "$(basename "$pages")")" || { echo "pulled pages differ ($c)" >&2; exit 1; }
  rows+=("| $link | $c | $((bytes >> 20)) | $((stored >> 20)) | $(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.2f", b-a}') | $(awk -v a="$t2" -v b="$t3" 'BEGIN{printf "%.2f", b-a}') |")
  bench_registry_restart
done
done
echo
echo "| link (Mbit/s) | compression | image MiB | the registry stores MiB | image push s | image pull s |"
echo "| --- | --- | ---: | ---: | ---: | ---: |"
printf '%s\n' "${rows[@]}"
