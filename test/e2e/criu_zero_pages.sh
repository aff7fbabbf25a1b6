#!/usr/bin/env bash
# Issue 36: the project's CRIU patch (scripts/criu-skip-zero-pages.patch) against a process tree,
# CRIU alone. A parent and its forked child share a private region whose quarters are zeros in both,
# zeros in the child only (data in the parent, which the restore maps into the child first), the
# child's own data, and shared data (test/fixtures/zero_pages_tree.c). Dumped with
# --skip-zero-pages, CRIU counts the zero pages it left out, the page files hold no more than the
# data, and after the restore both processes read every byte of the region as before.
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
PAGES=4096 # 16 MiB: a quarter is 1024 pages
mkdir -p "$W/run" "$W/img"
(nv_close_inherited_fds; exec setsid "$APP" "$W/run" $PAGES) </dev/null >"$W/app.log" 2>&1 &
disown
ready() { [[ -s $W/run/parent.pid && -s $W/run/child.pid ]]; }
nv_wait_for -t 20 ready || nv_fail "the tree did not start: $(cat "$W/app.log")"
parent=$(cat "$W/run/parent.pid") child=$(cat "$W/run/child.pid")
nv_defer kill -KILL "$parent" "$child"
checked() {  # the result files answer a SIGUSR1 sent after they were removed
  rm -f "$W/run/parent.result" "$W/run/child.result"
  kill -USR1 "$parent" "$child"
  nv_wait_for -t 20 bash -c "[[ -s $W/run/parent.result && -s $W/run/child.result ]]" || nv_fail "no answer to the check"
  nv_assert_eq ok "$(cat "$W/run/parent.result")" "$1: the parent's region"
  nv_assert_eq ok "$(cat "$W/run/child.result")" "$1: the child's region"
}
checked "before the dump"
"$CRIU" dump -t "$parent" -D "$W/img" -o dump.log -v4 --skip-zero-pages || nv_fail "dump: $(grep Error "$W/img/dump.log" | head -3)"
nv_wait_for -t 20 bash -c "[[ ! -e /proc/$parent && ! -e /proc/$child ]]" || nv_fail "the dumped tree is still there"
# Left out: the parent's quarter of zeros, the child's two (one shared with the parent, one its own).
left=$(awk '/Zero pages left out:/{s+=$(NF-2)} END{print s+0}' "$W/img/dump.log")
nv_log "zero pages left out: $left (expected at least $((3 * PAGES / 4)))"
((left >= 3 * PAGES / 4)) || nv_fail "CRIU left out $left zero pages: $(grep 'Zero pages left' "$W/img/dump.log")"
bytes=$(find "$W/img" -name 'pages-*.img' -printf '%s\n' | awk '{s+=$1} END{print s+0}')
# Data: the parent's 3 quarters and the child's q2 (its q3 is the parent's too, but CRIU dumps each
# process's present pages), 5 quarters of 4 MiB, plus what else the processes hold.
((bytes < 6 * PAGES * 4096 / 4 + 4 * 1048576)) || nv_fail "the page files hold $bytes bytes: zero pages were dumped"
"$CRIU" restore -D "$W/img" -d -o restore.log -v4 || nv_fail "restore: $(grep Error "$W/img/restore.log" | head -3)"
checked "after the restore"
echo "PASS criu_zero_pages"
