#!/bin/bash
# What CRIU's --skip-zero-pages (scripts/criu-skip-zero-pages.patch) costs and saves, CRIU alone: one
# process (the static fake_cuda_app without CUDA) holding DATA MiB of written pages and ZERO MiB of
# present zero pages (what the driver stages for a pool nothing wrote) is dumped and restored RUNS
# times with and without the option, into DIR (default /dev/shm: no disk in the numbers). Per run:
# the dump's wall time, CRIU's own "Memory dump time" and "Memory write time" (--display-stats; their
# difference is finding and splicing the pages, where the zero scan runs), the image and the restore's
# wall time. Prints one markdown row per run and each column's median per mode.
# Usage: bench/criu_zero_pages.sh [DATA_MIB [ZERO_MIB [RUNS]]]   (root; CRIU=path APP=fake_cuda_app DIR=dir)
set -euo pipefail
DATA=${1:-2048} ZERO=${2:-0} RUNS=${3:-3}
HERE=$(cd "$(dirname "$0")/.." && pwd)
source "$HERE/test/e2e/lib/harness.sh" # nv_close_inherited_fds
CRIU=${CRIU:-criu}
APP=${APP:-$HERE/build/test/fixtures/fake_cuda_app}
DIR=${DIR:-/dev/shm}
[[ -x $APP ]] || { echo "no fake_cuda_app at $APP (build the fixtures or set APP)" >&2; exit 1; }
"$CRIU" --help 2>&1 | grep -q -- '^ *--skip-zero-pages' || { echo "$CRIU has no --skip-zero-pages (scripts/build-criu.sh builds it)" >&2; exit 77; }
W=$(mktemp -d "$DIR/nvproxy-zp-bench.XXXXXX")
trap 'pkill -KILL -f "fake_cuda_app --no-cuda --device /dev/null --dir $W/app" 2>/dev/null; rm -rf "$W"' EXIT
now() { date +%s.%N; }
dt() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.2f", b-a}'; }
stat_us() { awk -v k="$1" -F': ' '$1==k{print $2+0}' "$W/stats"; }
rows=()
one() {  # MODE(skip|keep)
  local opt=() pid t0 t1 dump rs img
  [[ $1 == skip ]] && opt=(--skip-zero-pages)
  rm -rf "$W/app" "$W/img"; mkdir -p "$W/app" "$W/img"
  # Only its own fds (CRIU refuses to restore a file whose size changed, as CTest's log does).
  (nv_close_inherited_fds; exec setsid "$APP" --no-cuda --device /dev/null --dir "$W/app" --hold-mib "$DATA" --zero-mib "$ZERO") \
    </dev/null >/dev/null 2>&1 &
  pid=$!
  disown "$pid"
  for _ in $(seq 1200); do [[ -e $W/app/$pid.ready ]] && break; sleep 0.1; done
  [[ -e $W/app/$pid.ready ]] || { echo "the app did not get ready" >&2; exit 1; }
  t0=$(now)
  "$CRIU" dump -t "$pid" -D "$W/img" --shell-job -o dump.log --display-stats "${opt[@]}" >"$W/stats" 2>&1 ||
    { tail -5 "$W/img/dump.log" >&2; exit 1; }
  t1=$(now); dump=$(dt "$t0" "$t1")
  img=$(du -sm "$W/img" | cut -f1)
  local md mw; md=$(stat_us "Memory dump time"); mw=$(stat_us "Memory write time")
  t0=$(now)
  "$CRIU" restore -D "$W/img" --shell-job -d -o restore.log >/dev/null 2>&1 || { tail -5 "$W/img/restore.log" >&2; exit 1; }
  t1=$(now); rs=$(dt "$t0" "$t1")
  kill -KILL "$pid" 2>/dev/null || true
  for _ in $(seq 100); do [[ -e /proc/$pid ]] || break; sleep 0.1; done
  rows+=("| $DATA | $ZERO | $1 | $dump | $(awk -v a="$md" 'BEGIN{printf "%.2f", a/1e6}') | $(awk -v a="$mw" 'BEGIN{printf "%.2f", a/1e6}') | $(awk -v a="$md" -v b="$mw" 'BEGIN{printf "%.2f", (a-b)/1e6}') | $img | $rs |")
  echo "${rows[-1]}"
}
echo "| data MiB | zero MiB | zero pages | dump s | CRIU memory dump s | of it write s | find + splice s | image MiB | restore s |"
echo "| ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |"
for _ in $(seq "$RUNS"); do one skip; one keep; done
median() { sort -n | awk '{v[NR]=$1} END{print v[int((NR+1)/2)]}'; }
for m in skip keep; do
  col() { printf '%s\n' "${rows[@]}" | awk -F'|' -v m=" $m " -v c="$1" '$4==m{print $c+0}' | median; }
  echo "median $m: dump $(col 5) s, find + splice $(col 8) s, image $(col 9) MiB, restore $(col 10) s ($RUNS runs)"
done
