#!/usr/bin/env bash
# Issue 36: the project's CRIU patch (scripts/criu-skip-zero-pages.patch) against a process tree,
# CRIU alone. A parent and its forked child share a private region whose quarters are zeros in both,
# zeros in the child only (data in the parent, which the restore maps into the child first), the
# child's own data, and shared data (test/fixtures/zero_pages_tree.c). Dumped with
# --skip-zero-pages, CRIU counts the zero pages it left out, the page files hold no more than the
# data, and after the restore both processes read every byte of the region as before.
# Then the same with the page I/O patch's options (scripts/criu-page-io.patch), where CRIU has them:
# --page-writers on the dump (the parent's pages written by a writer process, the child's
# the usual way), --restore-huge-pages on the restore; the same checks, and the dump log names the
# writer.
# Usage: criu_zero_pages.sh
set -euo pipefail
source "$(dirname "$0")/lib/harness.sh"
# No containerd here (nv_harness_start is not called): the deferred cleanups run at exit all the same.
trap 'set +e; nv_run_deferred' EXIT
CRIU=$(command -v criu || true)
[[ -x $CRIU ]] || nv_skip "no CRIU installed (scripts/build-criu.sh)"
"$CRIU" --help 2>&1 | grep -q -- '^ *--skip-zero-pages' || nv_skip "this CRIU has no --skip-zero-pages (scripts/build-criu.sh builds it)"
APP=${NVPROXY_FIXTURES_DIR:?}/zero_pages_tree
W=$(mktemp -d /tmp/nvproxy-criu-zero.XXXXXX)
nv_defer rm -rf "$W"
PAGES=32768 # 128 MiB, a quarter 32 MiB: the parent's 96 MiB of data are past the 64 MiB under which CRIU copies a task itself
one() {  # MODE: plain | page-io
  local dump_opt=() restore_opt=() run=$W/$1
  [[ $1 == page-io ]] && dump_opt=(--page-writers 2) restore_opt=(--restore-huge-pages)
  mkdir -p "$run/run" "$run/img"
  (nv_close_inherited_fds; exec setsid "$APP" "$run/run" $PAGES) </dev/null >"$run/app.log" 2>&1 &
  disown
  ready() { [[ -s $run/run/parent.pid && -s $run/run/child.pid ]]; }
  nv_wait_for -t 20 ready || nv_fail "$1: the tree did not start: $(cat "$run/app.log")"
  parent=$(cat "$run/run/parent.pid") child=$(cat "$run/run/child.pid")
  nv_defer kill -KILL "$parent" "$child"
  checked() {  # the result files answer a SIGUSR1 sent after they were removed
    rm -f "$run/run/parent.result" "$run/run/child.result"
    kill -USR1 "$parent" "$child"
    nv_wait_for -t 20 bash -c "[[ -s $run/run/parent.result && -s $run/run/child.result ]]" || nv_fail "no answer to the check"
    nv_assert_eq ok "$(cat "$run/run/parent.result")" "$1: the parent's region"
    nv_assert_eq ok "$(cat "$run/run/child.result")" "$1: the child's region"
  }
  checked "$1, before the dump"
  "$CRIU" dump -t "$parent" -D "$run/img" -o dump.log -v4 --skip-zero-pages "${dump_opt[@]}" ||
    nv_fail "$1: dump: $(grep Error "$run/img/dump.log" | head -3)"
  nv_wait_for -t 20 bash -c "[[ ! -e /proc/$parent && ! -e /proc/$child ]]" || nv_fail "$1: the dumped tree is still there"
  # Left out: the parent's quarter of zeros, the child's two (one shared with the parent, one its own).
  left=$(awk '/Zero pages left out:/{s+=$(NF-2)} END{print s+0}' "$run/img/dump.log")
  nv_log "$1: zero pages left out: $left (expected at least $((3 * PAGES / 4)))"
  ((left >= 3 * PAGES / 4)) || nv_fail "$1: CRIU left out $left zero pages: $(grep 'Zero pages left' "$run/img/dump.log")"
  bytes=$(find "$run/img" -name 'pages-*.img' -printf '%s\n' | awk '{s+=$1} END{print s+0}')
  # Data: the parent's 3 quarters and the child's q2 (its q3 is the parent's too, but CRIU dumps each
  # process's present pages), 5 quarters of 4 MiB, plus what else the processes hold.
  ((bytes < 6 * PAGES * 4096 / 4 + 4 * 1048576)) || nv_fail "$1: the page files hold $bytes bytes: zero pages were dumped"
  if [[ $1 == page-io ]]; then
    grep -q "page writer [0-9]* writes .* of task $parent" "$run/img/dump.log" ||
      nv_fail "page-io: no writer wrote the parent's pages: $(grep -i 'page writer' "$run/img/dump.log" | head -3)"
    grep -q "page writer(s) done" "$run/img/dump.log" || nv_fail "page-io: the dump did not join its writers"
  fi
  "$CRIU" restore -D "$run/img" -d -o restore.log -v4 "${restore_opt[@]}" ||
    nv_fail "$1: restore: $(grep Error "$run/img/restore.log" | head -3)"
  checked "$1, after the restore"
}
one plain
if "$CRIU" --help 2>&1 | grep -q -- '^ *--page-writers'; then one page-io; else nv_log "this CRIU has no --page-writers: page-io not run"; fi
echo "PASS criu_zero_pages"
