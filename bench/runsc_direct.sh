#!/bin/bash
# Issue 56 item 5: runsc's restore of a pages file from a cold page cache, buffered against
# O_DIRECT (`runsc restore --direct`, which the shim passes where pages.img is mostly not cached:
# checkpoint.runsc_direct_restore), and from a warm cache buffered, side by side in one run. One
# bench/page_hold process of MIB MiB, every page written and checked after each restore, in a
# runsc sandbox whose root is the host's / (read-only), with a tmpfs /tmp where it notes that it is
# ready and what it found (read with runsc exec). Prints RESULT lines and a table.
# Usage (root): bench/runsc_direct.sh   MIB=2048 RUNS=3 RUNSC=runsc HOLD=build/bench/page_hold DIR=/var/tmp
set -euo pipefail
HERE=$(cd "$(dirname "$0")/.." && pwd)
MIB=${MIB:-2048} RUNS=${RUNS:-3} RUNSC=${RUNSC:-runsc} DIR=${DIR:-/var/tmp}
HOLD=${HOLD:-$HERE/build/bench/page_hold}
[[ -x $HOLD ]] || { echo "no page_hold at $HOLD" >&2; exit 1; }
W=$(mktemp -d "$DIR/nvproxy-runsc-direct.XXXXXX")
G=(--root="$W/root" --network=none --ignore-cgroups)
ID=rsd$$
cleanup() {
  "$RUNSC" "${G[@]}" delete -force "$ID" >/dev/null 2>&1 || true
  umount "$W/root/null-netns" 2>/dev/null || true
  rm -rf "$W"
}
trap cleanup EXIT
now() { date +%s.%N; }
dt() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.2f", b-a}'; }
mkdir -p "$W/b"
(cd "$W/b" && "$RUNSC" spec -- "$HOLD" "$MIB" /tmp 0)
python3 - "$W/b/config.json" <<'PY'
import json, sys
p = sys.argv[1]
c = json.load(open(p))
c["root"] = {"path": "/", "readonly": True}
c["process"]["terminal"] = False
c["mounts"].append({"destination": "/tmp", "type": "tmpfs", "source": "tmpfs"})
json.dump(c, open(p, "w"))
PY
in_sandbox() { "$RUNSC" "${G[@]}" exec "$ID" "$@" 2>/dev/null; }
ready() { [[ -n $(in_sandbox /bin/ls /tmp) ]]; }
verified() { in_sandbox /bin/sh -c 'cat /tmp/*.verify' | grep -q '^bad'; }
wait_for() { for _ in $(seq 1200); do "$@" && return 0; sleep 0.05; done; echo "timed out: $*" >&2; exit 1; }
checkpoint() {
  rm -rf "$W/img"
  (cd "$W/b" && "$RUNSC" "${G[@]}" run -detach "$ID" </dev/null >"$W/run.log" 2>&1) || { cat "$W/run.log" >&2; exit 1; }
  wait_for ready
  "$RUNSC" "${G[@]}" checkpoint --exclude-committed-zero-pages -image-path "$W/img" "$ID" >/dev/null
  "$RUNSC" "${G[@]}" delete -force "$ID" >/dev/null 2>&1 || true
  [[ -f $W/img/pages.img ]] || { echo "this runsc keeps no pages.img apart" >&2; exit 77; }
}
# restore cold|warm FLAGS...: seconds; checks the restored memory, then ends the sandbox.
restore() {
  local t0 t mode=$1
  shift
  [[ $mode == cold ]] && { sync; echo 3 >/proc/sys/vm/drop_caches; }
  [[ $mode == warm ]] && cat "$W/img/pages.img" >/dev/null
  t0=$(now)
  (cd "$W/b" && "$RUNSC" "${G[@]}" restore "$@" -detach -image-path "$W/img" "$ID" </dev/null >/dev/null 2>&1)
  t=$(dt "$t0" "$(now)")
  in_sandbox /bin/sh -c 'rm -f /tmp/*.verify'
  "$RUNSC" "${G[@]}" kill "$ID" USR1
  wait_for verified
  in_sandbox /bin/sh -c 'cat /tmp/*.verify' | grep -q '^bad 0$' ||
    { echo "restore $mode $*: wrong memory: $(in_sandbox /bin/sh -c 'cat /tmp/*.verify')" >&2; exit 1; }
  "$RUNSC" "${G[@]}" delete -force "$ID" >/dev/null 2>&1 || true
  echo "$t"
}
rows=()
for run in $(seq "$RUNS"); do
  checkpoint
  cb=$(restore cold)
  cd_=$(restore cold --direct)
  wb=$(restore warm)
  wd=$(restore warm --direct)
  rows+=("$cb $cd_ $wb $wd")
  echo "RESULT run=$run mib=$MIB cold_buffered_s=$cb cold_direct_s=$cd_ warm_buffered_s=$wb warm_direct_s=$wd"
done
median() { sort -n | awk '{v[NR]=$1} END{print v[int((NR+1)/2)]}'; }
col() { printf '%s\n' "${rows[@]}" | awk -v c="$1" '{print $c}' | median; }
echo
echo "| runsc restore of ${MIB} MiB | cold cache s | warm cache s |"
echo "| --- | ---: | ---: |"
echo "| buffered | $(col 1) | $(col 3) |"
echo "| --direct | $(col 2) | $(col 4) |"
echo "(medians of $RUNS runs; memory checked after each restore)"
echo "RESULT cold_direct_speedup=$(awk -v a="$(col 1)" -v b="$(col 2)" 'BEGIN{printf "%.2f", a/b}')"
