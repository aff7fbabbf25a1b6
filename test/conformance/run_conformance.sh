#!/usr/bin/env bash
# Conformance of our shim against containerd's runc shim, through containerd's Go client: builds
# nvconformance (GOPATH mode against Debian's containerd 1.6 client sources), starts a private
# containerd of the given version with both shims available, and runs every scenario against each
# (docs/conformance.md). Exit 0: no difference outside the allow-list; 1: differences (table above);
# 77: a component is missing (skipped, with the reason).
# Usage: run_conformance.sh 1.6|1.7|2.3 [nvconformance flags: -run REGEX, -v, -runtime ours, ...]
#   NVPROXY_SHIM_DIR     dir of containerd-shim-nvproxy-v1 (required)
#   NVCONF_BUILD_DIR     where the Go build cache lives (default /var/tmp/nvconformance-build); the
#                        program itself is built into the run's temp dir
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=test/e2e/lib/harness.sh
source "$HERE/../e2e/lib/harness.sh"

ver=${1:?usage: run_conformance.sh 1.6|1.7|2.3 [flags]}
shift
[[ -n ${NVPROXY_SHIM_DIR:-} ]] || nv_fail "NVPROXY_SHIM_DIR is not set (ctest sets it)"
[[ -x $NVPROXY_SHIM_DIR/containerd-shim-nvproxy-v1 ]] || nv_fail "no containerd-shim-nvproxy-v1 in $NVPROXY_SHIM_DIR"
command -v go >/dev/null || nv_skip "no Go toolchain (golang-go; scripts/install-deps.sh)"
[[ -d /usr/share/gocode/src/github.com/containerd/containerd/cio ]] \
  || nv_skip "containerd's Go client sources missing (golang-github-containerd-containerd-dev; scripts/install-deps.sh)"
command -v runc >/dev/null || nv_skip "runc not installed"

# ---- both shims use runc with containerd's runc root (/run/containerd/runc/<ns>) ----
cfg=$(mktemp /tmp/nvconformance-shim.XXXXXX.yaml)
nv_defer rm -f "$cfg"
printf 'runtime:\n  binary: %s\n  root: /run/containerd/runc\nlog_level: debug\n' "$(command -v runc)" >"$cfg"
export NVPROXY_SHIM_CONFIG=$cfg

nv_harness_start --containerd "$ver"
work=$NV_DIR/conformance
mkdir -p "$work"

# ---- build (GOPATH mode: the sources are copied into a GOPATH of this run; the Go build cache
# is shared in the build dir, so concurrent runs by hand and by CTest do not trip over each other)
build=${NVCONF_BUILD_DIR:-/var/tmp/nvconformance-build}
src=$NV_DIR/gopath/src/nvconformance
bin=$NV_DIR/bin
mkdir -p "$src/logger" "$bin" "$build/gocache"
cp "$HERE"/*.go "$src/"
cp "$HERE"/logger/*.go "$src/logger/"
gobuild() { (cd "$src" && GO111MODULE=off GOPATH="$NV_DIR/gopath:/usr/share/gocode" GOCACHE="$build/gocache" GOFLAGS='' go build "$@"); }
gobuild -o "$bin/nvconformance" . || nv_fail "go build of nvconformance failed"
gobuild -o "$bin/nvconformance-logger" ./logger || nv_fail "go build of the logger failed"

# ---- containerd restarts on the program's request (scenario daemon_restart) ----
# The program writes the restart number it wants into $restarts.want and sends SIGUSR1 until
# $restarts holds that number; a repeated signal for a restart already done is ignored.
restarts=$work/restarts
echo 0 >"$restarts"
restart_wanted=0
restart_containerd() {
  local want done_n
  want=$(cat "$restarts.want" 2>/dev/null || echo 0)
  done_n=$(<"$restarts")
  ((want > done_n)) || return 0
  # SIGUSR1 ignored while containerd restarts (the program repeats it until the restart is done):
  # its trap run inside _nv_start_daemon's multi-line command substitution broke bash's parser
  # ("trap: line 2: unexpected EOF while looking for matching `)'") and ended this script.
  trap '' USR1
  nv_log "restarting containerd (restart $want)"
  kill -TERM "$NV_CONTAINERD_PID"
  wait "$NV_CONTAINERD_PID" 2>/dev/null || true
  mv "$NV_DIR/containerd.log" "$NV_DIR/containerd.log.$want"
  _nv_start_daemon
  echo "$want" >"$restarts"
  trap 'restart_wanted=1' USR1
}
trap 'restart_wanted=1' USR1

"$bin/nvconformance" -address "$NV_SOCK" -namespace "$NV_NAMESPACE" -image "$NV_IMAGE" \
  -image-tar "$NV_IMAGE_TAR" -snapshotter "$NV_SNAPSHOTTER" -state "$NV_STATE_DIR" \
  -logger "$bin/nvconformance-logger" -work "$work" -runc "$(command -v runc)" \
  -restart-pid $$ -restart-file "$restarts" "$@" &
prog=$!
rc=0
while :; do
  if ((restart_wanted)); then
    restart_wanted=0
    restart_containerd
  fi
  kill -0 "$prog" 2>/dev/null || { wait "$prog" || rc=$?; break; }
  # returns early (> 128) when SIGUSR1 arrives; the loop then restarts containerd
  wait "$prog" && { rc=0; break; } || rc=$?
  ((rc > 128)) && kill -0 "$prog" 2>/dev/null && continue
  break
done
trap - USR1
nv_log "containerd $NV_CONTAINERD_VERSION: nvconformance exited $rc"
if ((rc != 0)); then
  # The harness shows the last log's tail; a restart rotated the earlier ones, where a scenario
  # that differed may have left our shim's warnings and OOM reports.
  echo "---- our shim's warnings and OOM reports (all containerd logs of the run) ----" >&2
  grep -h 'runtime=io.containerd.nvproxy.v1' "$NV_DIR"/containerd.log* 2>/dev/null \
    | grep -E 'level=(warning|error)|OOM|out of memory' | tail -n 40 >&2 || true
fi
exit "$rc"
