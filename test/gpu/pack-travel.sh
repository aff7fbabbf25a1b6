#!/bin/bash
# Here: fills .carry-travel/ (ignored through .git/info/exclude) with what test/gpu/run-travel.sh needs
# on the GPU machine besides .carry: Debian's skopeo and docker-registry with skopeo's libraries.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
c=$repo/.carry-travel
grep -qx '/.carry-travel/' "$repo/.git/info/exclude" 2>/dev/null || echo '/.carry-travel/' >>"$repo/.git/info/exclude"
rm -rf "$c" && mkdir -p "$c"
libs=$(ldd /usr/bin/skopeo | awk '/=> \//{print $3}' | grep -E 'gpgme|assuan|gpg-error|devmapper' | sed 's|^/||')
tar -C / -chJf "$c/travel.tar.xz" usr/bin/skopeo usr/bin/docker-registry $libs
du -sh "$c"
