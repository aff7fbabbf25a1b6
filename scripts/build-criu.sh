#!/bin/bash
# Why: Debian 12's CRIU 3.17 fails on recent kernels ("Unexpected rt vDSO area bounds") and newer
# Debian criu binaries need a newer glibc, so checkpoint e2e tests need a CRIU built here. The
# version is pinned to 4.2.1, with the project's patches: --skip-zero-pages
# (scripts/criu-skip-zero-pages.patch: zero pages of private memory stay out of the image) and
# --page-writers / --page-readers / --restore-huge-pages (scripts/criu-page-io.patch: each task's
# pages written by writer processes while the next task is dumped; read in by several threads at
# restore; huge pages asked for in restored memory). CRIU 4.1.1 (Debian 13's) hangs in every dump on AMD EPYC machines
# with AVX-512 (kernel 6.18), with containerd's own runc shim too, while 4.2.1 built the same way
# checkpoints the same container in half a second. This takes the upstream tarball that Debian
# unstable's source index names for criu=$CRIU_DEB_VERSION (a deb-src sid line in a PRIVATE apt
# setup on the machine's own Debian mirror; the system's apt config is untouched), checks it
# against the pinned SHA256, builds `make criu` against Debian 12's build deps and installs the
# binary to /usr/local/sbin/criu. Skips all of it when that binary is already 4.2.1 with the
# patch; any other build there (4.1.1, or 4.2.1 without the patch, from earlier runs) is replaced. No fallback to another
# version: if unstable's index cannot be read or no longer has 4.2.1-1, it stops and says so.
# Usage: bash scripts/build-criu.sh [--check]   (--check: exit 0 if the patched 4.2.1 is installed, silently)
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR
source "$HERE/debian-orig.sh" # nv_install_missing, nv_fetch_orig

CRIU_BIN=${CRIU_BIN:-/usr/local/sbin/criu}
# CRIU's plugin header, for the shim's CRIU plugin (checkpoint/criu_plugin/criu_release_plugin.c), as CRIU's own
# `make install` would put it.
CRIU_HEADER=${CRIU_HEADER:-/usr/local/include/criu/criu-plugin.h}
CRIU_WORK=${CRIU_WORK:-/var/tmp/nvproxy-criu-build}
CRIU_APT=${CRIU_APT:-/var/tmp/nvproxy-apt-sid-src}
CRIU_VERSION=4.2.1
CRIU_DEB_VERSION=4.2.1-1
CRIU_ORIG=criu_4.2.1.orig.tar.xz
CRIU_ORIG_SHA256=29ec0ee09e296479fe7048c80980e8ef1d0684d0b0204c2b101dfea19f6725b9
# The patches, in order. CRIU_PATCHES="criu-skip-zero-pages.patch" with another CRIU_BIN builds the
# CRIU of before the page I/O patch, for bench/page_io.sh's side-by-side runs.
read -r -a CRIU_PATCHES <<<"${CRIU_PATCHES:-criu-skip-zero-pages.patch criu-page-io.patch}"
BUILD_DEPS=(build-essential pkg-config libbsd-dev libcap-dev libgnutls28-dev libnet1-dev
  libnftables-dev libnl-3-dev libprotobuf-c-dev libprotobuf-dev protobuf-c-compiler
  protobuf-compiler python3-protobuf uuid-dev libaio-dev patch)

# Prints the installed version (e.g. 4.2.1), or nothing.
installed_version() {
  [[ -x $CRIU_BIN ]] || return 0
  "$CRIU_BIN" --version 2>/dev/null | awk '/^Version:/ {print $2}'
}

# Each patch's options show in CRIU's help: a 4.2.1 without one is rebuilt.
has_patch() {
  local help
  help=$("$CRIU_BIN" --help 2>&1) || true
  grep -q -- '--skip-zero-pages' <<<"$help" || return 1
  [[ " ${CRIU_PATCHES[*]} " != *" criu-page-io.patch "* ]] && return 0
  grep -q -- '--page-writers' <<<"$help" && grep -q -- '--page-readers' <<<"$help" && grep -q -- '--resumed-fifo' <<<"$help" && grep -q -- '--write-gate' <<<"$help" &&
    grep -q -- '--restore-huge-pages' <<<"$help"
}

is_current() { [[ $(installed_version) == "$CRIU_VERSION" ]] && has_patch; }

install_missing() { nv_install_missing build-criu "$CRIU_WORK/apt.log" "$@"; }
fetch_orig() {
  nv_fetch_orig build-criu sid criu "$CRIU_DEB_VERSION" "$CRIU_ORIG" "$CRIU_ORIG_SHA256" "$CRIU_WORK" "$CRIU_APT"
}

# The plugin header alone, from the pinned tarball (a CRIU built before this script installed it).
install_header() {
  [[ -f $CRIU_HEADER ]] && return 0
  mkdir -p "$CRIU_WORK"
  fetch_orig
  local tmp
  tmp=$(mktemp)
  tar -xOf "$CRIU_WORK/$CRIU_ORIG" --wildcards '*/criu/include/criu-plugin.h' >"$tmp"
  install -D -m 0644 "$tmp" "$CRIU_HEADER"
  rm -f "$tmp"
  echo "build-criu: installed $CRIU_HEADER"
}

build() {
  local src=$CRIU_WORK/src
  rm -rf "$src"
  mkdir -p "$src"
  tar -C "$src" --strip-components=1 -xf "$CRIU_WORK/$CRIU_ORIG"
  local p
  for p in "${CRIU_PATCHES[@]}"; do
    echo "build-criu: applying $p"
    patch -s -p1 -d "$src" <"$HERE/$p"
  done
  echo "build-criu: make -j$(nproc) criu in $src (log: $CRIU_WORK/build.log)"
  if ! make -C "$src" -j"$(nproc)" criu >"$CRIU_WORK/build.log" 2>&1; then
    tail -n 30 "$CRIU_WORK/build.log" >&2
    echo "build-criu: build failed (full log: $CRIU_WORK/build.log)" >&2
    return 1
  fi
  install -D -m 0755 "$src/criu/criu" "$CRIU_BIN"
  install -D -m 0644 "$src/criu/include/criu-plugin.h" "$CRIU_HEADER"
  is_current || {
    echo "build-criu: $CRIU_BIN reports '$(installed_version)'$(has_patch || echo ' without the project patches'), not the patched $CRIU_VERSION" >&2
    return 1
  }
}

check_verdict() {
  local out line rc=0
  out=$("$CRIU_BIN" check 2>&1) || rc=$?
  while IFS= read -r line; do echo "build-criu: criu check: $line"; done <<<"$out"
  if ((rc == 0)); then
    echo "build-criu: criu check passed ($CRIU_BIN $(installed_version))"
  else
    echo "build-criu: criu check reported problems (rc=$rc); see above" >&2
  fi
}

main() {
  if [[ ${1:-} == --check ]]; then is_current; return; fi
  [[ $(id -u) == 0 ]] || { echo "build-criu: run as root" >&2; return 1; }
  if is_current; then
    install_header
    echo "build-criu: $CRIU_BIN $CRIU_VERSION already installed"
    return 0
  fi
  mkdir -p "$CRIU_WORK"
  exec 8>"$CRIU_WORK/.lock"
  flock 8
  is_current && return 0 # built meanwhile by another run
  local t0=$SECONDS old
  old=$(installed_version)
  [[ -z $old ]] || echo "build-criu: replacing $CRIU_BIN $old$(has_patch || echo ' (without the project patches)') with CRIU $CRIU_VERSION and its patches"
  install_missing "${BUILD_DEPS[@]}"
  fetch_orig
  build
  echo "build-criu: installed $CRIU_BIN $(installed_version) in $((SECONDS - t0)) s"
  check_verdict
}

main "$@"
