#!/bin/bash
# Runs every test tier that runs without a GPU: installs what the tests need (idempotent), builds,
# then runs every unit and e2e test (real containerd 1.6/1.7/2.1/2.3, runc, crun, runsc, CRIU,
# dockerd) through CTest, and beside them the lint (clang-format, clang-tidy) and the clang
# ASan+UBSan tier (scripts/test-asan.sh: unit tests, libFuzzer targets, core e2e tests with the
# sanitized shim). The e2e tests mostly wait on containerd, CRIU and sandboxes, so the compilers
# take the CPU they leave idle (niced, so a test's deadlines are not theirs to spend).
# Usage: sudo scripts/test.sh                 (what .ci/run calls)
#        NVPROXY_TEST_FAST=1 scripts/test.sh  skips the lint and the sanitizer tier
#        NVPROXY_TEST_JOBS=N                  tests CTest runs at once (default 4)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
start=$(date +%s)
stamp() { echo "[$(($(date +%s) - start)) s] $*"; }

bash scripts/install-deps.sh
bash scripts/prepare-host.sh

jobs=$(nproc)
stamp "== build"
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$jobs"

checks_pid="" checks_log=""
if [[ -z ${NVPROXY_TEST_FAST:-} ]]; then
  checks_log=$(mktemp /tmp/nvproxy-checks.XXXXXX)
  stamp "== lint and the ASan+UBSan build, beside the tests (log: $checks_log)"
  # The compilers only: niced from their first instruction. The sanitized shim's e2e tests come
  # after, at normal priority, as their deadlines are real.
  nice -n 19 bash -c 'rc=0
    echo "== lint"; bash scripts/lint.sh build || rc=1
    echo "== ASan+UBSan (clang): build, unit tests, fuzzers"; bash scripts/test-asan.sh build || rc=1
    exit $rc' </dev/null >"$checks_log" 2>&1 &
  checks_pid=$!
fi

stamp "== tests (unit + e2e), ${NVPROXY_TEST_JOBS:-4} at a time"
tests_log=$(mktemp /tmp/nvproxy-tests.XXXXXX)
set +e
ctest --test-dir build --output-on-failure --no-tests=error -j"${NVPROXY_TEST_JOBS:-4}" 2>&1 | tee "$tests_log"
tests_rc=${PIPESTATUS[0]}
checks_rc=0
if [[ -n $checks_pid ]]; then
  stamp "== waiting for the lint and the ASan+UBSan build"
  wait "$checks_pid"
  checks_rc=$?
  cat "$checks_log"
  if ((checks_rc == 0)); then
    stamp "== ASan+UBSan: core e2e with the sanitized shim"
    bash scripts/test-asan.sh e2e </dev/null || checks_rc=$?
  fi
  ((checks_rc == 0)) || echo "FAILED: the lint or the ASan+UBSan tier (above; log $checks_log)"
fi
set -e
stamp "== done"
# Every skip named with its reason, the end of each failed test's output, then (last, so that it is the closing line CI reads) the summary.
bash scripts/test-skips.sh build "$tests_log"
bash scripts/test-failures.sh build "$tests_log"
grep -E '^[0-9]+% tests passed|^The following tests FAILED|^[[:space:]]+[0-9]+ - ' "$tests_log" || true
if ((tests_rc != 0 || checks_rc != 0)); then exit 1; fi
