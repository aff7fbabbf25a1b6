#!/bin/bash
# The sanitizer tier: a clang ASan+UBSan build (Debug) whose unit tests, libFuzzer targets (bounded)
# and core e2e tests (the sanitized shim under a real containerd) must pass with no sanitizer
# report. scripts/test.sh runs it beside the main test run.
# Usage: scripts/test-asan.sh [build|e2e|all]   (root, after scripts/install-deps.sh)
#   build: the build, its unit tests and fuzzers;  e2e: the core e2e tests of that build;  all: both
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
what=${1:-all}
jobs=$(nproc)
asan_logs=/tmp/nvproxy-asan-reports
# The shim is a daemon with no stderr: sanitizer reports go to files, checked at the end.
export ASAN_OPTIONS="detect_leaks=1:log_path=$asan_logs/asan" UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:log_path=$asan_logs/ubsan"
if [[ $what != e2e ]]; then
  rm -rf "$asan_logs"
  CC=clang CXX=clang++ cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DNVPROXY_SANITIZE=ON \
    -DNVPROXY_BUILD_FUZZERS=ON -DNVPROXY_BUILD_BENCH=OFF >/dev/null
  cmake --build build-asan -j"$jobs"
fi
mkdir -p "$asan_logs"
if [[ $what != e2e ]]; then
  ctest --test-dir build-asan --output-on-failure --no-tests=error -L 'unit|fuzz' -j"$jobs"
fi
if [[ $what != build ]]; then
  # Each e2e test has a containerd of its own (test/e2e/CMakeLists.txt): they run side by side.
  ctest --test-dir build-asan --output-on-failure --no-tests=error -j3 \
    -R '^e2e_(lifecycle_runc_ctd16|operations_runc_ctd16|checkpoint_gpu_fake_runc_ctd16|tty_oom_runc_ctd16|gpu_layer_runc_ctd16|staging_memory_runc_ctd16)$'
fi
if compgen -G "$asan_logs/*" >/dev/null; then
  head -50 "$asan_logs"/* >&2
  echo "sanitizer reports in $asan_logs" >&2
  exit 1
fi
echo "test-asan ($what): no sanitizer reports"
