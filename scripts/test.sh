#!/bin/bash
# Runs every test tier that runs without a GPU: installs what the tests need (idempotent), builds,
# checks formatting and clang-tidy, then runs unit and e2e tests (real containerd 1.6/1.7, runc,
# crun, runsc, CRIU) through CTest, and the unit tests again under ASan+UBSan.
# Usage: sudo scripts/test.sh            (what .ci/run calls)
#        NVPROXY_TEST_FAST=1 scripts/test.sh   skips the sanitizer build
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

echo "== tests (unit + e2e)"
ctest --test-dir build --output-on-failure --no-tests=error -j1

if [[ -z ${NVPROXY_TEST_FAST:-} ]]; then
  echo "== unit tests under ASan+UBSan"
  cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DNVPROXY_SANITIZE=ON -DNVPROXY_BUILD_BENCH=OFF >/dev/null
  cmake --build build-asan -j"$jobs"
  ASAN_OPTIONS=detect_leaks=1 ctest --test-dir build-asan --output-on-failure --no-tests=error -L unit -j"$jobs"
fi
