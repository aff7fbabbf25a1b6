#!/bin/bash
# Why: CI shows only the head and the tail of the test command's output, and a failed test's own
# lines sit in the middle of thousands. This prints the end of each failed test's output (from
# CTest's LastTest.log) next to the summary, so the cause is where CI's reader looks.
# Usage: scripts/test-failures.sh BUILD_DIR CTEST_OUTPUT [LINES]   exit 0
set -euo pipefail
build=$1 out=$2 lines=${3:-25}
last="$build/Testing/Temporary/LastTest.log"
mapfile -t failed < <(sed -nE 's/^[[:space:]]+[0-9]+ - ([^ ]+) \((Failed|Timeout|.*Exception.*)\)$/\1/p' "$out" | sort -u)
((${#failed[@]})) && [[ -r $last ]] || exit 0
for t in "${failed[@]}"; do
  echo "---- the end of $t's output:"
  awk -v t="$t" '
    /^[0-9]+\/[0-9]+ Test: / { cur = $3; on = 0; next }
    cur == t && /^Output:$/ { on = 1; getline; next }
    cur == t && /^<end of output>$/ { on = 0 }
    cur == t && on' "$last" | tail -n "$lines"
done
