#!/usr/bin/env bash
# The README's "Install from packages" commands, run as written from the checkout's root: they must
# name no version (a user copies them after any release) and install the package the build made.
# Then the installed shim answers -v with the project's version, and the package is purged.
# Usage: readme_install.sh    (root; the build tree is the checkout's build/, as in the README)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/lib/harness.sh"
PKG=containerd-shim-nvproxy
BIN=/usr/bin/containerd-shim-nvproxy-v1

[[ $(id -u) == 0 ]] || nv_fail "needs root (apt install)"
cd "$NV_REPO_DIR"
[[ -f build/CMakeCache.txt ]] || nv_skip "no build tree at $NV_REPO_DIR/build (the README's commands build there)"
if dpkg-query -W -f='${db:Status-Abbrev}' "$PKG" 2>/dev/null | grep -q '^[a-z][a-z]'; then
  nv_fail "$PKG is already installed: this test installs and purges it; run 'dpkg --purge $PKG' first"
fi

# The indented lines of the section, comments and all: bash runs them as a user pastes them.
commands=$(awk '/^## /{on=($0=="## Install from packages")} on && /^    [^ ]/{sub(/^    /,""); print}' README.md)
[[ -n $commands ]] || nv_fail "README.md has no commands under '## Install from packages'"
nv_log "README's install commands:"$'\n'"$commands"
if grep -nE '[0-9]+\.[0-9]+\.[0-9]+' <<<"$commands"; then
  nv_fail "the README's install commands name a version: they break at the next release"
fi

log=$(mktemp /tmp/nvproxy-readme-install.XXXXXX)
cleanup() {
  dpkg --purge "$PKG" >/dev/null 2>&1 || true
  rm -f "$log"
}
trap cleanup EXIT
DEBIAN_FRONTEND=noninteractive bash -euo pipefail -c "$commands" </dev/null >"$log" 2>&1 || {
  tail -n 30 "$log" >&2
  nv_fail "the README's install commands failed as written"
}

project_version=$(sed -nE 's/^project\(containerd-shim-nvproxy VERSION ([0-9.]+).*/\1/p' CMakeLists.txt)
nv_assert_eq "ii " "$(dpkg-query -W -f='${db:Status-Abbrev}' "$PKG")" "package status after the README's install"
nv_assert_eq "$project_version-1" "$(dpkg-query -W -f='${Version}' "$PKG")" "the installed package's version"
nv_assert_contains "$("$BIN" -v)" "Version:  $project_version" "$BIN -v"
echo "PASS readme_install ($PKG $project_version-1)"
