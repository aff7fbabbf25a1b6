#!/bin/bash
# Here: fills .carry-travel/ (ignored through .git/info/exclude) with what test/gpu/run-travel.sh needs
# on the GPU machine besides .carry: Debian's docker-registry (a static Go program).
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
c=$repo/.carry-travel
grep -qx '/.carry-travel/' "$repo/.git/info/exclude" 2>/dev/null || echo '/.carry-travel/' >>"$repo/.git/info/exclude"
rm -rf "$c" && mkdir -p "$c"
tar -C / -chJf "$c/travel.tar.xz" usr/bin/docker-registry
du -sh "$c"
