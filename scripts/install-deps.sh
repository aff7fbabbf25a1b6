#!/bin/bash
# Why: one command brings a fresh Debian 12 machine to the point where the shim builds and every
# test tier runs: Debian 12 build and test packages, Debian 13's containerd 1.7 / runsc / docker 26
# (scripts/fetch-trixie.sh), Debian unstable's containerd 2 (scripts/fetch-containerd2.sh; its tests
# skip without it), CRIU >= 4 (scripts/build-criu.sh) and a crun with CRIU (scripts/build-crun.sh;
# its tests skip without it). Idempotent; `apt-get update`
# runs only when a package is missing; prints one line when everything is already there.
# Safe without a terminal (CI=true, no stdin). Usage: sudo scripts/install-deps.sh
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

BUILD_PKGS=(build-essential cmake pkg-config libboost-dev libboost-program-options-dev
  protobuf-compiler libprotobuf-dev nlohmann-json3-dev libyaml-cpp-dev libtomlplusplus-dev libssl-dev libzstd-dev libgtest-dev libgmock-dev
  clang clang-tidy clang-format libclang-rt-14-dev)
TEST_PKGS=(containerd runc crun busybox-static iptables jq rpm util-linux procps psmisc file man-db gdb
  patchelf  # points Debian 13's runc at Debian 13's libc (scripts/fetch-trixie.sh)
  python3  # the Python multiprocessing checkpoint (e2e python_mp)
  golang-go golang-github-containerd-ttrpc-dev  # the ttrpc interop test against Go's ttrpc
  golang-github-containerd-containerd-dev  # containerd's Go client for test/conformance
  skopeo docker-registry  # checkpoints through a registry (e2e cri_registry)
  python3-toml)  # e2e configure_containerd makes containerd's default config private to the test

# Prints the packages of "$@" that are not installed.
missing_pkgs() {
  local p
  for p in "$@"; do
    [[ $(dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null) == "ii " ]] || echo "$p"
  done
}

APT_LOG=/var/tmp/nvproxy-install-deps.log

# apt-get without a terminal; waits for the dpkg/apt locks instead of failing when another apt-get
# runs; its chatter goes to $APT_LOG, shown only when it fails.
apt_quiet() {
  if ! DEBIAN_FRONTEND=noninteractive apt-get -q -y -o DPkg::Lock::Timeout=900 -o Dpkg::Use-Pty=0 \
    "$@" </dev/null >>"$APT_LOG" 2>&1; then
    tail -n 20 "$APT_LOG" >&2
    echo "install-deps: apt-get $* failed (log: $APT_LOG)" >&2
    return 1
  fi
}

install_pkgs() {
  local missing
  mapfile -t missing < <(missing_pkgs "$@")
  ((${#missing[@]})) || return 0
  echo "install-deps: installing ${missing[*]}"
  apt_quiet update
  apt_quiet install --no-install-recommends "${missing[@]}"
  mapfile -t missing < <(missing_pkgs "$@")
  ((${#missing[@]} == 0)) || { echo "install-deps: still missing: ${missing[*]}" >&2; return 1; }
}

main() {
  [[ $(id -u) == 0 ]] || { echo "install-deps: run as root" >&2; return 1; }
  local all=("${BUILD_PKGS[@]}" "${TEST_PKGS[@]}")
  # Silent when in place. Not fatal: without the deps directory next to the checkout (containerd
  # 2.3's prebuilt tarballs), the containerd 2.3 tests skip and say why.
  "$HERE/fetch-shared-deps.sh" || echo "install-deps: no prebuilt deps (containerd 2.3); its tests will be skipped" >&2
  if [[ -z $(missing_pkgs "${all[@]}") ]] && "$HERE/fetch-trixie.sh" --check \
    && "$HERE/fetch-containerd2.sh" --check && "$HERE/build-criu.sh" --check && "$HERE/build-crun.sh" --check; then
    echo "install-deps: all dependencies already installed"
    return 0
  fi
  install_pkgs "${all[@]}"
  "$HERE/fetch-trixie.sh"
  # Not fatal: unstable moves on; the containerd 2 tests then skip and say why.
  "$HERE/fetch-containerd2.sh" || echo "install-deps: containerd 2 unavailable; its e2e tests will be skipped" >&2
  "$HERE/build-criu.sh"
  # Not fatal: the crun checkpoint tests then skip and say why (Debian 12's crun has no checkpoint).
  "$HERE/build-crun.sh" || echo "install-deps: no crun with CRIU; its checkpoint tests will be skipped" >&2
  echo "install-deps: done"
}

main "$@"
