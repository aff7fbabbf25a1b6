#!/bin/bash
# Why: Debian 12's CRIU 3.17 fails on recent kernels ("Unexpected rt vDSO area bounds") and Debian
# 13's criu binary needs glibc 2.38, so checkpoint e2e tests need CRIU >= 4 built here. This takes
# the upstream tarball that Debian 13's source index names (deb-src trixie in the private apt list
# of fetch-trixie.sh), checks its SHA256, builds `make criu` against Debian 12's build deps and
# installs the binary to /usr/local/sbin/criu. Skips all of it when that binary is already >= 4.
# Usage: scripts/build-criu.sh [--check]   (--check: exit 0 if installed and >= 4, silently)
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR
source "$HERE/fetch-trixie.sh"

CRIU_BIN=${CRIU_BIN:-/usr/local/sbin/criu}
CRIU_WORK=${CRIU_WORK:-/var/tmp/nvproxy-criu-build}
CRIU_MIN_MAJOR=4
BUILD_DEPS=(build-essential pkg-config libbsd-dev libcap-dev libgnutls28-dev libnet1-dev
  libnftables-dev libnl-3-dev libprotobuf-c-dev libprotobuf-dev protobuf-c-compiler
  protobuf-compiler python3-protobuf uuid-dev libaio-dev)

# Prints the installed version (e.g. 4.1.1), or nothing.
installed_version() {
  [[ -x $CRIU_BIN ]] || return 0
  "$CRIU_BIN" --version 2>/dev/null | awk '/^Version:/ {print $2}'
}

is_current() {
  local v
  v=$(installed_version)
  [[ -n $v && ${v%%.*} -ge $CRIU_MIN_MAJOR ]]
}

# Installs the Debian 12 packages in "$@" that are missing (apt-get update only if some are).
install_missing() {
  local p missing=()
  for p in "$@"; do
    [[ $(dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null) == "ii " ]] || missing+=("$p")
  done
  ((${#missing[@]})) || return 0
  export DEBIAN_FRONTEND=noninteractive
  echo "build-criu: installing build deps: ${missing[*]}"
  local log=$CRIU_WORK/apt.log
  if ! { apt-get -q -o DPkg::Lock::Timeout=900 update \
    && apt-get -q -y -o DPkg::Lock::Timeout=900 -o Dpkg::Use-Pty=0 install --no-install-recommends \
      "${missing[@]}"; } </dev/null >"$log" 2>&1; then
    tail -n 20 "$log" >&2
    echo "build-criu: installing build deps failed (log: $log)" >&2
    return 1
  fi
}

# The orig tarball's line of `apt-get source --print-uris criu`, run in an empty dir (apt leaves out
# files that already sit in the current directory).
orig_line() {
  local d
  d=$(mktemp -d)
  (cd "$d" && nv_trixie_apt_get -qq source --print-uris criu 2>/dev/null) \
    | grep -E "\.orig\.tar\.[a-z0-9]+' " | head -n1 || true
  rmdir "$d"
}

# Sets ORIG_URI ORIG_FILE ORIG_SHA256 from `apt-get source --print-uris criu` on trixie.
find_orig() {
  local line
  nv_trixie_update
  line=$(orig_line)
  if [[ -z $line ]]; then
    nv_trixie_update force
    line=$(orig_line)
  fi
  [[ -n $line ]] || { echo "build-criu: no criu orig tarball in trixie's source index" >&2; return 1; }
  read -r ORIG_URI ORIG_FILE _ ORIG_SHA256 <<<"$line"
  ORIG_URI=${ORIG_URI//\'/}
  [[ $ORIG_SHA256 == SHA256:* ]] || { echo "build-criu: no SHA256 in: $line" >&2; return 1; }
}

fetch_orig() {
  [[ -s $CRIU_WORK/$ORIG_FILE ]] \
    && echo "${ORIG_SHA256#SHA256:}  $CRIU_WORK/$ORIG_FILE" | sha256sum --quiet -c - 2>/dev/null && return 0
  rm -f "$CRIU_WORK/$ORIG_FILE"
  /usr/lib/apt/apt-helper -o APT::Sandbox::User=root download-file "$ORIG_URI" "$CRIU_WORK/$ORIG_FILE" "$ORIG_SHA256" >/dev/null
}

build() {
  local src=$CRIU_WORK/src
  rm -rf "$src"
  mkdir -p "$src"
  tar -C "$src" --strip-components=1 -xf "$CRIU_WORK/$ORIG_FILE"
  echo "build-criu: make -j$(nproc) criu in $src (log: $CRIU_WORK/build.log)"
  if ! make -C "$src" -j"$(nproc)" criu >"$CRIU_WORK/build.log" 2>&1; then
    tail -n 30 "$CRIU_WORK/build.log" >&2
    echo "build-criu: build failed (full log: $CRIU_WORK/build.log)" >&2
    return 1
  fi
  install -D -m 0755 "$src/criu/criu" "$CRIU_BIN"
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
    echo "build-criu: $CRIU_BIN $(installed_version) already installed"
    return 0
  fi
  mkdir -p "$CRIU_WORK"
  exec 8>"$CRIU_WORK/.lock"
  flock 8
  local t0=$SECONDS
  install_missing "${BUILD_DEPS[@]}"
  find_orig
  echo "build-criu: source $ORIG_FILE ($ORIG_SHA256)"
  fetch_orig
  build
  echo "build-criu: installed $CRIU_BIN $(installed_version) in $((SECONDS - t0)) s"
  check_verdict
}

main "$@"
