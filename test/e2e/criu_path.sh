#!/usr/bin/env bash
# Issue 23: runtime.criu_path reaches CRIU the way each runc version takes it (runc 1.1: its global
# --criu flag; runc >= 1.2 dropped it, 1.4 rejects it: PATH). CRIU is put where PATH does not find
# it, behind a wrapper that records its calls, so only criu_path can have found it; a busybox
# counter loop is checkpointed and restored, and its state continues. The shim's log shows the
# dialect it spoke.
# Usage: criu_path.sh CONTAINERD RUNC   (RUNC: 1.1.5 Debian 12, 1.1.15 Debian 13, 1.4.3 upstream)
set -euo pipefail
source "$(dirname "$0")/lib/shim-env.sh"
ctd=${1:-1.6}
want=${2:-1.1.5}
case $want in
  1.1.5) NV_RUNC_BIN=/usr/bin/runc ;;
  1.1.15)
    [[ -r /opt/nvproxy-deps/trixie/env.sh ]] && source /opt/nvproxy-deps/trixie/env.sh
    NV_RUNC_BIN=${NVPROXY_RUNC_TRIXIE:-/opt/nvproxy-deps/trixie/runc/usr/sbin/runc}
    ;;
  1.4.3) NV_RUNC_BIN=/opt/nvproxy-deps/shared/runc-1.4.3/bin/runc ;;
  *) nv_fail "unknown runc version $want" ;;
esac
[[ -x $NV_RUNC_BIN ]] || nv_skip "runc $want not installed ($NV_RUNC_BIN; scripts/install-deps.sh)"
have=$("$NV_RUNC_BIN" --version 2>/dev/null | sed -n 's/^runc version //p')
[[ $have == "$want"* ]] || nv_skip "$NV_RUNC_BIN is runc $have, not $want"
real_criu=$(command -v criu || true)
[[ -x $real_criu ]] || nv_skip "no CRIU installed (scripts/build-criu.sh)"
export NV_RUNC_BIN

# PATH without the directory holding CRIU: containerd, the shim and runc inherit it.
dir=$(dirname "$real_criu")
PATH=$(tr : '\n' <<<"$PATH" | grep -vx "$dir" | paste -sd:)
export PATH
! command -v criu >/dev/null || nv_skip "another criu is in PATH: $(command -v criu)"

kit=$(mktemp -d /tmp/nvproxy-criu-kit.XXXXXX)
nv_defer rm -rf "$kit"
# Not named criu: PATH alone could not find it even with its directory in PATH.
cat >"$kit/criu-under-test" <<EOS
#!/bin/sh
echo "\$1" >>"$kit/calls"
exec "$real_criu" "\$@"
EOS
chmod 0755 "$kit/criu-under-test"
NV_RUNTIME_EXTRA="  criu_path: $kit/criu-under-test"
export NV_RUNTIME_EXTRA
nv_start_with_shim --containerd "$ctd"

# The loop replaces its counter by a rename, so a read never sees it truncated.
nv_ctr run -d --runtime $NV_RT "$NV_IMAGE" cp sh -c 'i=0; while :; do i=$((i+1)); echo $i >/tmp/counter.new; mv /tmp/counter.new /tmp/counter; sleep 0.1; done'
nv_wait_for -t 30 nv_counter_above cp 19 || nv_fail "counter does not advance: $(nv_counter cp)"

nv_log "checkpoint with runc $want and runtime.criu_path (CRIU not in PATH)"
# Read before the checkpoint: the image is taken later, so the restored count is at least this.
before=$(nv_counter cp)
nv_ctr c checkpoint --task --rw cp cpref
grep -qx swrk "$kit/calls" || nv_fail "the checkpoint did not run CRIU through criu_path: $(cat "$kit/calls" 2>/dev/null)"
nv_assert_eq RUNNING "$(nv_task_status cp)" "container state after a leave-running checkpoint"
log=$NV_DIR/containerd.log
case $want in
  1.1.*)
    grep -q -- "--criu=$kit/criu-under-test checkpoint" "$log" || nv_fail "runc $want was not given --criu"
    grep -q "CRIU named with --criu" "$log" || nv_fail "the shim's probe did not log the dialect"
    ;;
  *)
    ! grep -q -- "--criu=" "$log" || nv_fail "runc $want was given --criu, which it rejects"
    grep -q "finds CRIU $kit/criu-under-test through PATH" "$log" || nv_fail "the shim did not hand CRIU over through PATH"
    ;;
esac

nv_log "restore"
nv_ctr task kill -s KILL cp
nv_wait_for -t 10 bash -c "[[ \$(ctr -a $NV_SOCK -n $NV_NAMESPACE task ls | awk '\$1==\"cp\"{print \$3}') == STOPPED ]]"
nv_ctr task rm cp >/dev/null
nv_ctr c rm cp
: >"$kit/calls"
nv_ctr c restore --live --rw cp cpref </dev/null
nv_assert_eq RUNNING "$(nv_task_status cp)" "restored container state"
grep -qx swrk "$kit/calls" || nv_fail "the restore did not run CRIU through criu_path"
# The first exec into a just-restored container can fail: wait for the counter to be read.
nv_wait_for -t 10 nv_counter_above cp 0 || nv_fail "cannot read the restored counter"
after=$(nv_counter cp)
((after >= before)) || nv_fail "state did not continue: before=$before after=$after"
nv_wait_for -t 10 nv_counter_above cp "$after" || nv_fail "restored loop is not running: stays at $after"
nv_ctr task kill -s KILL cp
echo "PASS criu_path (runc $want, containerd $NV_CONTAINERD_VERSION)"
