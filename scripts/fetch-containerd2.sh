#!/bin/bash
# Why: current clusters run containerd 2.x, and Debian 12 and 13 ship only 1.6 and 1.7. Debian
# unstable's containerd 2.1 needs glibc 2.34 only, so its binaries run on Debian 12 as they are.
# Fetches the .deb through a PRIVATE apt setup for unstable (own sources list, lists and cache; the
# system's apt config is untouched; apt checks the archive's signatures and hashes), the pinned
# version when the archive still has it, else the version unstable has now, unpacks it with
# `dpkg -x` into $NV_CTD2_DEST/containerd/ and writes $NV_CTD2_DEST/env.sh
# (NVPROXY_CONTAINERD2_BIN_DIR). The e2e tests for containerd 2 skip, saying why, without it.
# Usage: bash scripts/fetch-containerd2.sh [--check]   (--check: exit 0 if it is in place, silently)
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR
source "$HERE/fetch-trixie.sh" # for nv_trixie_mirror

NV_CTD2_VERSION=${NV_CTD2_VERSION:-2.1.9+ds1-5}  # the version the e2e tests were written against
NV_CTD2_APT=${NV_CTD2_APT:-/var/tmp/nvproxy-apt-sid}
NV_CTD2_DEST=${NV_CTD2_DEST:-/opt/nvproxy-deps/containerd2}
BIN=$NV_CTD2_DEST/containerd/usr/bin

in_place() {
  [[ -s $NV_CTD2_DEST/env.sh ]] && "$BIN/containerd" --version 2>/dev/null | grep -q ' v\?2\.' \
    && "$BIN/ctr" --version >/dev/null 2>&1 && "$BIN/containerd-shim-runc-v2" -v >/dev/null 2>&1
}

if [[ ${1:-} == --check ]]; then in_place; exit; fi
[[ $(id -u) == 0 ]] || { echo "fetch-containerd2: run as root" >&2; exit 1; }
if in_place; then echo "fetch-containerd2: in place: $("$BIN/containerd" --version)"; exit 0; fi

mirror=$(nv_trixie_mirror) || exit 1 # the machine's own Debian mirror (with none, it says how to add one)
mkdir -p "$NV_CTD2_APT"/{lists/partial,cache/archives/partial,dl}
printf 'deb %s sid main\n' "$mirror" >"$NV_CTD2_APT/sources.list"
opts=(-o "Dir::Etc::SourceList=$NV_CTD2_APT/sources.list" -o Dir::Etc::SourceParts=/dev/null
  -o "Dir::State::Lists=$NV_CTD2_APT/lists" -o "Dir::Cache=$NV_CTD2_APT/cache"
  -o APT::Sandbox::User=root -o Acquire::Languages=none)
apt-get "${opts[@]}" -qq update
cd "$NV_CTD2_APT/dl"
rm -f containerd_*.deb
if ! apt-get "${opts[@]}" -qq download "containerd=$NV_CTD2_VERSION" 2>/dev/null; then
  echo "fetch-containerd2: $NV_CTD2_VERSION has left unstable; taking the version it has now" >&2
  apt-get "${opts[@]}" -qq download containerd
fi
deb=$(ls containerd_*.deb)
tmp=$NV_CTD2_DEST/.containerd.tmp
rm -rf "$tmp" && mkdir -p "$NV_CTD2_DEST"
dpkg -x "$deb" "$tmp"
rm -rf "$NV_CTD2_DEST/containerd" && mv "$tmp" "$NV_CTD2_DEST/containerd"
{
  echo "# Written by scripts/fetch-containerd2.sh from $deb (source this)."
  echo "export NVPROXY_CONTAINERD2_BIN_DIR=$BIN"
} >"$NV_CTD2_DEST/env.sh"
in_place || { echo "fetch-containerd2: $deb does not run here: $("$BIN/containerd" --version 2>&1 | head -1)" >&2; exit 1; }
echo "fetch-containerd2: unpacked $deb: $("$BIN/containerd" --version)"
