#!/bin/bash
# Why: a script committed without its executable bit fails only where it is run as a program, and
# install-deps.sh runs its helpers that way; a machine that already had the helper's result hides
# the slip (crun with CRIU was never built on fresh machines). Rules, on what git will check out:
#   1. a tracked file that starts with "#!" is a program: mode 100755;
#   2. a script that another script runs as a program ("$HERE/x.sh", scripts/x.sh at a command's
#      start) has a "#!" line (so rule 1 holds for it); a file only sourced has none.
# Usage: scripts/check-modes.sh   (part of scripts/lint.sh)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
fail=0
while read -r mode _ _ path; do
  [[ -f $path ]] || continue
  if [[ $(head -c2 "$path" | tr -d '\0') == '#!' && $mode != 100755 ]]; then
    echo "check-modes: $path starts with #! but is committed as $mode (git update-index --chmod=+x $path)" >&2
    fail=1
  fi
done < <(git ls-files -s)
# Scripts run as programs: a word ending in .sh at the start of a command (after ;, &&, ||, |, (,
# if/then/!, or a line's indentation), written as "$HERE/name.sh", "$dir/name.sh" or scripts/name.sh.
mapfile -t scripts < <(git ls-files '*.sh')
for s in "${scripts[@]}"; do
  dir=$(dirname "$s")
  while read -r called; do
    target="$dir/$called"
    [[ $called == scripts/* ]] && target=$called
    [[ -f $target ]] || continue
    if [[ $(head -c2 "$target") != '#!' || $(git ls-files -s "$target" | cut -c1-6) != 100755 ]]; then
      echo "check-modes: $s runs $target as a program, but it is not an executable script with #!" >&2
      fail=1
    fi
  done < <(grep -v '^[[:space:]]*#' "$s" | grep -oE '(^|[;&|(!]|then|do|if)[[:space:]]*"?\$[A-Za-z_{}]+"?/[A-Za-z0-9_.-]+\.sh|(^|[;&|(!]|then|do|if)[[:space:]]*scripts/[A-Za-z0-9_.-]+\.sh' \
    | grep -oE '[A-Za-z0-9_.-]+\.sh$|scripts/[A-Za-z0-9_.-]+\.sh$' | sort -u)
done
exit $fail
