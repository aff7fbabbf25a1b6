#!/bin/bash
# Runs every test tier that runs without a GPU: installs what the tests need (idempotent), builds,
# checks formatting and clang-tidy, runs a clang ASan+UBSan build's unit tests, libFuzzer targets
# (bounded) and core e2e tests with the sanitized shim, then every unit and e2e test (real
# containerd 1.6/1.7, runc, crun, runsc, CRIU, dockerd) through CTest.
# Usage: sudo scripts/test.sh                 (what .ci/run calls)
#        NVPROXY_TEST_FAST=1 scripts/test.sh  skips the sanitizer stage
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/install-deps.sh
bash scripts/prepare-host.sh

jobs=$(nproc)
echo "== build"
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$jobs"

echo "== lint"
bash scripts/lint.sh build

if [[ -z ${NVPROXY_TEST_FAST:-} ]]; then
  echo "== ASan+UBSan (clang): unit tests, fuzzers, core e2e with the sanitized shim"
  CC=clang CXX=clang++ cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DNVPROXY_SANITIZE=ON \
    -DNVPROXY_BUILD_FUZZERS=ON -DNVPROXY_BUILD_BENCH=OFF >/dev/null
  cmake --build build-asan -j"$jobs"
  asan_logs=$(mktemp -d /tmp/nvproxy-asan.XXXXXX)
  # The shim is a daemon with no stderr: sanitizer reports go to files, checked below.
  export ASAN_OPTIONS="detect_leaks=1:log_path=$asan_logs/asan" UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:log_path=$asan_logs/ubsan"
  ctest --test-dir build-asan --output-on-failure --no-tests=error -L 'unit|fuzz' -j"$jobs"
  ctest --test-dir build-asan --output-on-failure --no-tests=error -j1 \
    -R '^e2e_(lifecycle_runc_ctd16|operations_runc_ctd16|checkpoint_gpu_fake_runc_ctd16|tty_oom_runc_ctd16|gpu_layer_runc_ctd16)$'
  if compgen -G "$asan_logs/*" >/dev/null; then
    head -50 "$asan_logs"/* >&2
    echo "sanitizer reports in $asan_logs" >&2
    exit 1
  fi
  unset ASAN_OPTIONS UBSAN_OPTIONS
fi

# Last, so that its summary is the closing line CI reads.
echo "== tests (unit + e2e)"
ctest --test-dir build --output-on-failure --no-tests=error -j1
