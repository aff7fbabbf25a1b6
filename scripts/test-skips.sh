#!/bin/bash
# Why: a skipped test must never be silent. CTest marks a test that exits 77 as skipped and shows
# nothing of its output; this names every skipped test of the last CTest run with the reason it
# printed (nv_skip's "SKIP: ..." line, or the line after GoogleTest's "...: Skipped"; from CTest's
# LastTest.log).
# Usage: scripts/test-skips.sh BUILD_DIR CTEST_OUTPUT   prints "  NAME: REASON" lines; exit 0
set -euo pipefail
build=$1 out=$2
last="$build/Testing/Temporary/LastTest.log"
mapfile -t skipped < <(grep -E '\*\*\*Skipped|Not Run' "$out" | sed -E 's/.*Test +#[0-9]+: ([^ ]+) .*/\1/' | sort -u)
((${#skipped[@]})) || exit 0
echo "${#skipped[@]} tests skipped:"
for t in "${skipped[@]}"; do
  reason=""
  [[ -r $last ]] && reason=$(awk -v t="$t" '
    /^[0-9]+\/[0-9]+ Test: / { cur = $3; gtest = 0 }
    cur == t && /^SKIP: / { sub(/^SKIP: /, ""); print; exit }
    cur == t && gtest && NF { print; exit }
    cur == t && /: Skipped$/ { gtest = 1 }' "$last")
  echo "  $t: ${reason:-no reason printed (see $last)}"
done
