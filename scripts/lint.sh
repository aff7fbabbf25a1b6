#!/bin/bash
# Style gates: scripts run as programs are executable (scripts/check-modes.sh), clang-format (the
# repo's .clang-format) must leave sources unchanged, and clang-tidy (the repo's .clang-tidy) must
# report nothing on our own translation units.
# Usage: scripts/lint.sh BUILD_DIR   (needs compile_commands.json there)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
build=${1:-build}
mapfile -t srcs < <(git ls-files '*.cc' '*.h' | grep -v '^test/fixtures/fake_cuda/')
fail=0
bash scripts/check-modes.sh || fail=1
if ! clang-format --dry-run --Werror "${srcs[@]}" 2>/tmp/nvproxy-format.log; then
  head -40 /tmp/nvproxy-format.log >&2
  echo "lint: clang-format found unformatted files (run: clang-format -i \$(git ls-files '*.cc' '*.h'))" >&2
  fail=1
fi
mapfile -t units < <(git ls-files 'common/*.cc' 'cgroup/*.cc' 'oci/*.cc' 'gpu/*.cc' 'checkpoint/*.cc' 'hooks/*.cc' 'shim/*/*.cc' 'common/ttrpc/*.cc')
if ! printf '%s\n' "${units[@]}" | xargs -P "$(nproc)" -n 8 clang-tidy -p "$build" --quiet >/tmp/nvproxy-tidy.log 2>&1; then
  grep -E 'warning:|error:' /tmp/nvproxy-tidy.log | head -40 >&2
  echo "lint: clang-tidy reported problems (full log /tmp/nvproxy-tidy.log)" >&2
  fail=1
fi
exit $fail
