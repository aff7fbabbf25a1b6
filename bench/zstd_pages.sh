#!/usr/bin/env bash
# Issue 47: what zstd at a fast level would buy a checkpoint's page file on its way through a
# registry. Two page files: CRIU's dump of a CPU-heavy Python process (a tokenizer's vocabulary,
# request logs, a cache of parsed JSON, a list of floats: SIZE MiB of heap) and random pages of the
# same size (staged device memory: weights and activations, which do not compress). For each:
# zstd levels 1 and 3 on one thread, the ratio and the MB/s of compressing and decompressing.
# Prints a markdown table; nothing is asserted.
# Usage: sudo bench/zstd_pages.sh   (needs criu, zstd and python3)
set -euo pipefail
for b in criu zstd python3; do command -v "$b" >/dev/null || { echo "$b is not installed" >&2; exit 2; }; done
work=$(mktemp -d /var/tmp/nvproxy-bench-zstd.XXXXXX)
pid=
cleanup() { [[ -n $pid ]] && kill "$pid" 2>/dev/null; rm -rf "$work"; }
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
