#!/bin/bash
# Issue 56: CRIU's page I/O, today's main against the project's page I/O patch
# (scripts/criu-page-io.patch), side by side in one run, CRIU alone. The same patched CRIU runs
# both ways: without the patch's options it does what main's CRIU does (every change is behind
# them); with them, --page-writers 8 on dump, --restore-huge-pages --page-readers 8 on restore. Shapes (process
# trees of bench/page_hold, every page written and different, none zero):
#   one   one process of BIG MiB: dump, restore from a warm page cache, restore from a cold one
#         (caches dropped), against `cat` of its pages image (warm) and `dd` with O_DIRECT (cold)
#   three three processes of SMALL MiB each, against one of SMALL MiB: the dump
# Every restore is checked: each process reads its memory back against its pattern.
# Prints RESULT lines per run, a markdown table of the medians, and one RESULT line per goal
# (restore_warm_speedup, restore_cold_vs_read: against dd O_DIRECT, dump_speedup, dump_three_vs_one).
#   stop  a leave-running dump of BIG MiB: how long the process stayed frozen (page-io: --resumed-fifo)
# Usage: sudo bench/page_io.sh   BIG=4096 SMALL=1300 RUNS=3 DIR=/var/tmp CRIU=criu HOLD=build/bench/page_hold
set -euo pipefail
HERE=$(cd "$(dirname "$0")/.." && pwd)
source "$HERE/test/e2e/lib/harness.sh" # nv_close_inherited_fds
BIG=${BIG:-4096} SMALL=${SMALL:-1300} RUNS=${RUNS:-3}
CRIU=${CRIU:-criu}
HOLD=${HOLD:-$HERE/build/bench/page_hold}
DIR=${DIR:-/var/tmp}
[[ -x $HOLD ]] || { echo "no page_hold at $HOLD (cmake --build BUILD --target page_hold, or set HOLD)" >&2; exit 1; }
help=$("$CRIU" --help 2>&1 || true)
grep -q -- '^ *--page-writers' <<<"$help" || { echo "$CRIU has no --page-writers (scripts/build-criu.sh builds it)" >&2; exit 77; }
W=$(mktemp -d "$DIR/nvproxy-page-io.XXXXXX")
cleanup() { pkill -KILL -f "^$HOLD " 2>/dev/null || true; rm -rf "$W"; }
trap cleanup EXIT
now() { date +%s.%N; }
dt() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.2f", b-a}'; }
pids() { pgrep -f "^$HOLD " || true; }
# Until every process of the tree is gone, zombies too (a restore needs their pids).
gone() {
  local p
  for p in "$@"; do
    for _ in $(seq 600); do [[ -e /proc/$p ]] || break; sleep 0.05; done
    [[ ! -e /proc/$p ]] || { echo "process $p did not go" >&2; exit 1; }
  done
}

# start MIB KIDS: a tree of 1 + KIDS processes, ready.
start() {
  rm -rf "$W/st" "$W/img"
  mkdir -p "$W/st" "$W/img"
  (nv_close_inherited_fds; exec setsid "$HOLD" "$1" "$W/st" "$2") </dev/null >/dev/null 2>&1 &
  disown $!
  for _ in $(seq 1200); do (($(find "$W/st" -name '[0-9]*' ! -name '*.verify' | wc -l) == $2 + 1)) && return 0; sleep 0.05; done
  echo "page_hold did not get ready" >&2
  exit 1
}
# dump MODE: seconds on stdout; the tree is gone after it.
dump() {
  local opt=() t0 root tree
  [[ $1 == page-io ]] && opt=(--page-writers 8)
  tree=$(pids)
  root=$(sort -n <<<"$tree" | head -n1)
  t0=$(now)
  "$CRIU" dump -t "$root" -D "$W/img" --shell-job -o dump.log --skip-zero-pages "${opt[@]}" >/dev/null 2>&1 ||
    { tail -5 "$W/img/dump.log" >&2; exit 1; }
  dt "$t0" "$(now)"
  # shellcheck disable=SC2086
  gone $tree
}
# restore MODE NPROC: seconds on stdout; checks every process's memory, then kills the tree.
restore() {
  local opt=() t0 t tree
  [[ $1 == page-io ]] && opt=(--restore-huge-pages --page-readers 8)
  t0=$(now)
  "$CRIU" restore -D "$W/img" --shell-job -d -o restore.log "${opt[@]}" >/dev/null 2>&1 ||
    { tail -5 "$W/img/restore.log" >&2; exit 1; }
  t=$(dt "$t0" "$(now)")
  rm -f "$W"/st/*.verify
  pkill -USR1 -f "^$HOLD "
  for _ in $(seq 1200); do (($(find "$W/st" -name '*.verify' | wc -l) == $2)) && break; sleep 0.05; done
  (($(find "$W/st" -name '*.verify' | wc -l) == $2)) || { echo "restored processes did not check their memory" >&2; exit 1; }
  if grep -qv '^bad 0$' "$W"/st/*.verify; then echo "restore ($1) brought back wrong memory: $(cat "$W"/st/*.verify)" >&2; exit 1; fi
  for p in $(pids); do awk '/^AnonHugePages/ {print $2}' "/proc/$p/smaps_rollup"; done | awk '{s+=$1} END {printf "%d\n", s/1024}' >"$W/huge"
  tree=$(pids)
  pkill -KILL -f "^$HOLD "
  # shellcheck disable=SC2086
  gone $tree
  echo "$t"
}
# stop MODE: seconds the tree stayed frozen in a leave-running dump (--leave-running, as the shim's
# checkpoint that leaves a container running): main resumes it at the dump's end; page-io, with
# --resumed-fifo, once the writers hold its pages (the FIFO's byte), before they are written.
stop() {
  local opt=() t0 t1 root tree
  tree=$(pids)
  root=$(sort -n <<<"$tree" | head -n1)
  rm -f "$W/resumed" "$W/resumed.at"
  if [[ $1 == page-io ]]; then
    mkfifo "$W/resumed"
    opt=(--page-writers 8 --resumed-fifo "$W/resumed")
    (read -r -n1 _ <"$W/resumed" && now >"$W/resumed.at") &
  fi
  t0=$(now)
  "$CRIU" dump -t "$root" -D "$W/img" --shell-job -o dump.log --skip-zero-pages --leave-running "${opt[@]}" >/dev/null 2>&1 ||
    { tail -5 "$W/img/dump.log" >&2; exit 1; }
  t1=$(now)
  if [[ $1 == page-io ]]; then
    for _ in $(seq 100); do [[ -s $W/resumed.at ]] && break; sleep 0.02; done
    if [[ ! -s $W/resumed.at ]]; then
      echo x 1<>"$W/resumed"  # read-write: never blocks; lets the reader go
      wait
      echo "CRIU did not tell the FIFO that the tree ran again: $(tail -3 "$W/img/dump.log")" >&2
      exit 1
    fi
  fi
  wait
  [[ -s $W/resumed.at ]] && t1=$(cat "$W/resumed.at")
  dt "$t0" "$t1"
  pkill -KILL -f "^$HOLD "
  # shellcheck disable=SC2086
  gone $tree
}
drop() { sync; echo 3 >/proc/sys/vm/drop_caches; }
warm() { cat "$W"/img/pages-*.img >/dev/null; }

rows=()
for run in $(seq "$RUNS"); do
  for mode in main page-io; do
    start "$BIG" 0
    d=$(dump "$mode")
    warm
    rw=$(restore "$mode" 1)
    hw=$(cat "$W/huge")
    drop
    rc=$(restore "$mode" 1)
    t0=$(now); warm; cat_s=$(dt "$t0" "$(now)")
    drop
    t0=$(now); dd if="$(ls "$W"/img/pages-*.img)" of=/dev/null bs=4M iflag=direct status=none; dd_s=$(dt "$t0" "$(now)")
    start "$SMALL" 2
    d3=$(dump "$mode")
    r3=$(restore "$mode" 3)
    start "$SMALL" 0
    d1=$(dump "$mode")
    start "$BIG" 0
    st=$(stop "$mode")
    rows+=("$mode $d $rw $rc $cat_s $dd_s $d3 $d1 $hw $st")
    echo "RESULT run=$run mode=$mode big_mib=$BIG dump_s=$d restore_warm_s=$rw restore_cold_s=$rc cat_warm_s=$cat_s dd_direct_s=$dd_s three_small_dump_s=$d3 one_small_dump_s=$d1 three_small_restore_s=$r3 huge_mib_after_warm_restore=$hw leave_running_stop_s=$st"
  done
done

median() { sort -n | awk '{v[NR]=$1} END{print v[int((NR+1)/2)]}'; }
col() { printf '%s\n' "${rows[@]}" | awk -v m="$1" -v c="$2" '$1==m {print $c}' | median; }
echo
echo "| CRIU | dump ${BIG} MiB s | restore warm s | restore cold s | cat warm s | dd O_DIRECT s | dump 3 x ${SMALL} MiB s | dump 1 x ${SMALL} MiB s | 3 x / 1 x | leave-running stop ${BIG} MiB s |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
for m in main page-io; do
  echo "| $m | $(col $m 2) | $(col $m 3) | $(col $m 4) | $(col $m 5) | $(col $m 6) | $(col $m 7) | $(col $m 8) | $(awk -v a="$(col $m 7)" -v b="$(col $m 8)" 'BEGIN{printf "%.2f", a/b}') | $(col $m 10) |"
done
echo "(medians of $RUNS runs; restores checked page by page)"
# One line per goal of issue 56, from the medians: the change against main, and against a plain read.
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.2f", a/b}'; }
echo "RESULT restore_warm_speedup=$(ratio "$(col main 3)" "$(col page-io 3)")"
echo "RESULT restore_cold_vs_read=$(ratio "$(col page-io 4)" "$(col page-io 6)")"
echo "RESULT dump_speedup=$(ratio "$(col main 2)" "$(col page-io 2)")"
echo "RESULT dump_three_vs_one=$(ratio "$(col page-io 7)" "$(col page-io 8)")"
echo "RESULT leave_running_stop_vs_main=$(ratio "$(col page-io 10)" "$(col main 10)")"
