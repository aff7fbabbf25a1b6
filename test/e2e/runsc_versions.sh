#!/usr/bin/env bash
# Issue 35 item 3 (what another node can restore): the image records the runtime that wrote it, and a
# restore checks it before the runtime runs. A container checkpointed under Debian's runsc (2024)
# is restored on a "node" whose shim runs the current runsc (the shared deps): refused, naming both
# releases, nothing runs; the same image then restores under the runsc that wrote it.
# Usage: runsc_versions.sh [1.6]   (77 when the current runsc is not unpacked)
set -euo pipefail
export NV_RUNTIME=runsc
source "$(dirname "$0")/lib/shim-env.sh"
# shellcheck disable=SC1090
[[ -r $NV_SHARED_ENV ]] && source "$NV_SHARED_ENV"
current=${NVPROXY_SHARED_RUNSC_BIN_DIR:-}/runsc
[[ -x $current ]] || nv_skip "current runsc not unpacked (scripts/fetch-shared-deps.sh)"
nv_start_with_shim --containerd "${1:-1.6}"

status() { nv_ctr task ls | awk -v id="$1" '$1==id{print $3}'; }
stop_rm() {
  nv_ctr task kill -s KILL "$1" 2>/dev/null || true
  nv_wait_for -t 20 bash -c "[[ \$(ctr -a $NV_SOCK -n $NV_NAMESPACE task ls | awk '\$1==\"$1\"{print \$3}') != RUNNING ]]" ||
    nv_fail "$1 did not stop"
  nv_ctr task rm -f "$1" >/dev/null 2>&1 || true
  nv_ctr c rm "$1" >/dev/null 2>&1 || true
}

written_by=$("$NVPROXY_RUNSC" --version | awk 'NR==1{print $3}')
other=$("$current" --version | awk 'NR==1{print $3}')
other=${other%-go-*}  # as the shim reads it: the release, without the Go toolchain's suffix
[[ $written_by != "$other" ]] || nv_skip "Debian's and the shared runsc are one release ($other)"

nv_ctr run -d --runtime $NV_RT "$NV_IMAGE" vr sh -c 'i=0; while :; do i=$((i+1)); echo $i >/tmp/counter.new; mv /tmp/counter.new /tmp/counter; sleep 0.1; done'
nv_wait_for -t 30 nv_counter_above vr 9 || nv_fail "the counter does not advance"
nv_log "checkpoint under runsc $written_by"
nv_ctr c checkpoint --task --rw vr vrref
stop_rm vr

nv_log "restore where the shim runs runsc $other: refused before runsc runs"
NV_RUNSC_BIN=$current nv_shim_config_write "$NVPROXY_SHIM_CONFIG"
set +e
err=$(nv_ctr c restore --live --rw vr vrref </dev/null 2>&1)
rc=$?
set -e
((rc != 0)) || nv_fail "an image of runsc $written_by was restored by runsc $other"
nv_assert_contains "$err" "written by runsc $written_by and this host runs runsc $other" "the refusal names both releases"
[[ $(status vr) != RUNNING ]] || nv_fail "something of vr runs after the refusal"
stop_rm vr

nv_log "the same image under the runsc that wrote it"
unset NV_RUNSC_BIN
nv_shim_config_write "$NVPROXY_SHIM_CONFIG"
nv_ctr c restore --live --rw vr vrref </dev/null
nv_wait_for -t 20 nv_counter_above vr 9 || nv_fail "the restored loop does not go on: $(nv_counter vr)"
c=$(nv_counter vr)
nv_wait_for -t 10 nv_counter_above vr "$c" || nv_fail "the restored loop does not run"
stop_rm vr
echo "PASS runsc_versions (runsc $written_by -> $other refused; restored under $written_by)"
