#!/bin/bash
# Why: checks the e2e harness itself, without our shim: a private containerd (1.6 and 1.7) runs a
# runc container from the offline image and prints "hello"; also checks that assertions can fail
# and that teardown leaves no task, shim, mount or temp dir behind.
# Usage: test/e2e/lib/selftest-runc.sh [1.6|1.7]   (no argument: both, one after the other)
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

if (($# == 0)); then
  for v in 1.6 1.7; do "$0" "$v"; done
  exit 0
fi

# shellcheck source-path=SCRIPTDIR
source "$HERE/harness.sh"

check_assertions_fail() {
  (nv_assert_eq a b "expected failure") 2>/dev/null && nv_fail "nv_assert_eq did not fail"
  (nv_assert_contains "abc" "x" "expected failure") 2>/dev/null && nv_fail "nv_assert_contains did not fail"
  ! nv_wait_for -t 1 false 2>/dev/null || nv_fail "nv_wait_for did not time out"
  nv_assert_eq a a "eq"
  nv_assert_contains "hello world" "lo w" "contains"
}

check_assertions_fail
nv_harness_start --containerd "$1"
out=$(nv_ctr run --rm --runtime io.containerd.runc.v2 "$NV_IMAGE" t1 echo hello)
echo "$out"
nv_assert_eq hello "$out" "runc container output"

# a task left running on purpose: teardown must remove it and its shim
nv_ctr run -d --runtime io.containerd.runc.v2 "$NV_IMAGE" t2 sleep 1000 >/dev/null
t2_running() { nv_ctr tasks ls | grep -q '^t2 .*RUNNING'; }
nv_wait_for -t 10 t2_running
echo "selftest ($NV_CONTAINERD_VERSION): ok"
