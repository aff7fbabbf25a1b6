#!/bin/bash
# Flake hunt: runs the README's test command (scripts/test.sh, as CI does) N times in a row on a
# clean worktree of HEAD while stress-ng keeps one core busy, and prints which tests failed in
# which run. A test that fails once here fails some CI submission.
# Usage: sudo scripts/soak.sh [RUNS] [LOG_DIR]     (default 3 runs, logs in /tmp/nvproxy-soak)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
runs=${1:-3}
logs=${2:-/tmp/nvproxy-soak}
mkdir -p "$logs"
command -v stress-ng >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -q stress-ng >/dev/null

# Beside this checkout, so that ../shared (the prebuilt containerd 2.3 and runsc) is found from it as
# from the checkout: a tree under /tmp skipped those tests.
tree=$(mktemp -d "$(dirname "$PWD")/nvproxy-soak-tree.XXXXXX")
git worktree add --detach "$tree" HEAD >/dev/null
stress_pid=""
cleanup() {
  [[ -n $stress_pid ]] && kill "$stress_pid" 2>/dev/null
  git worktree remove --force "$tree" >/dev/null 2>&1 || true
}
trap cleanup EXIT

# One CPU worker at full load, niced like a neighbour's batch job would not be: the tests' deadlines
# have to hold against it.
stress-ng --cpu 1 --cpu-load 100 --timeout 0 >/dev/null 2>&1 &
stress_pid=$!

echo "soak of $(git rev-parse --short HEAD): $runs runs, stress-ng --cpu 1 beside them, logs in $logs"
failed_runs=0
for ((i = 1; i <= runs; i++)); do
  start=$(date +%s)
  rc=0
  (cd "$tree" && CI=true bash scripts/test.sh </dev/null >"$logs/run$i.log" 2>&1) || rc=$?
  took=$(($(date +%s) - start))
  failures=$(grep -E '^[[:space:]]+[0-9]+ - |^FAILED' "$logs/run$i.log" | sed 's/^[[:space:]]*//' | tr '\n' ';' || true)
  echo "run $i: rc=$rc in ${took} s${failures:+; failed: $failures}"
  ((rc == 0)) || failed_runs=$((failed_runs + 1))
done
echo "$((runs - failed_runs)) of $runs runs passed"
((failed_runs == 0))
