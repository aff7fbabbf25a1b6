#!/bin/bash
# Why: checkpoint e2e tests need a crun that can `crun checkpoint` / `crun restore`. Debian 12's
# /usr/bin/crun (1.8.1) is built without CRIU and refuses containerd 2.x's OCI spec version; it
# stays as it is (other tests use it). This builds crun $CRUN_VERSION (Debian 13's, so its pin holds
# for trixie's lifetime) from the upstream tarball that trixie's source index names for
# crun=$CRUN_DEB_VERSION (a deb-src trixie line in a PRIVATE apt setup on the machine's own Debian
# mirror; the system's apt config is untouched), checked against the pinned SHA256. crun dlopen()s
# libcriu.so.2 at run time, so libcriu comes from the project's CRIU 4.2.1 tree that
# scripts/build-criu.sh leaves in /var/tmp/nvproxy-criu-build/src (built there with CRIU's own
# `make lib/c/libcriu.so` if missing) and sits beside crun in $CRUN_DIR, found through crun's rpath:
# no system library is added or replaced, and nothing lands on PATH. libcriu starts `criu swrk`
# by execlp("criu"): PATH must find /usr/local/sbin/criu (it does in root's default PATH).
# Skips all of it when $CRUN_DIR/crun is already $CRUN_VERSION with +CRIU and its libcriu. No
# fallback to another version: if trixie's index cannot be read or no longer has 1.21-1, it stops.
# Usage: bash scripts/build-crun.sh [--check]   (--check: exit 0 if that crun is installed, silently)
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR
source "$HERE/debian-orig.sh" # nv_install_missing, nv_fetch_orig

CRUN_DIR=${CRUN_DIR:-/usr/local/lib/nvproxy-crun}
CRUN_BIN=$CRUN_DIR/crun
CRUN_WORK=${CRUN_WORK:-/var/tmp/nvproxy-crun-build}
CRUN_APT=${CRUN_APT:-/var/tmp/nvproxy-apt-trixie-src}
CRIU_SRC=${CRIU_SRC:-/var/tmp/nvproxy-criu-build/src}
CRIU_VERSION=4.2.1
CRUN_VERSION=1.21
CRUN_DEB_VERSION=1.21-1
CRUN_ORIG=crun_1.21.orig.tar.gz
CRUN_ORIG_SHA256=4bfb700e764a4804a4de3ecf07753f4c391005356d60356df65d80ae0914c486
# Debian 12's packages for crun's configure (yajl: OCI JSON; libsystemd: the systemd cgroup
# manager) and for libcriu (protobuf-c).
BUILD_DEPS=(build-essential pkg-config gperf python3 libyajl-dev libcap-dev libseccomp-dev
  libsystemd-dev libprotobuf-c-dev)

# Prints the installed version (e.g. 1.21), or nothing.
installed_version() {
  [[ -x $CRUN_BIN ]] || return 0
  "$CRUN_BIN" --version 2>/dev/null | awk '/^crun version/ {print $3}'
}

# +CRIU is compiled in; the libcriu beside it is what crun loads at run time.
has_criu() {
  "$CRUN_BIN" --version 2>/dev/null | grep -q -- '+CRIU' && [[ -e $CRUN_DIR/libcriu.so.2 ]]
}

is_current() { [[ $(installed_version) == "$CRUN_VERSION" ]] && has_criu; }

install_missing() { nv_install_missing build-crun "$CRUN_WORK/apt.log" "$@"; }
fetch_orig() {
  nv_fetch_orig build-crun trixie crun "$CRUN_DEB_VERSION" "$CRUN_ORIG" "$CRUN_ORIG_SHA256" "$CRUN_WORK" "$CRUN_APT"
}

# libcriu from the project's CRIU tree, staged with its headers and a criu.pc (as CRIU's
# `make install-lib` lays them out) for crun's configure; only the .so is installed.
stage_libcriu() {
  local stage=$CRUN_WORK/criu-stage ver
  ver=$(sed -n 's/^#define CRIU_VERSION "\(.*\)"/\1/p' "$CRIU_SRC/criu/include/version.h" 2>/dev/null) || true
  if [[ $ver != "$CRIU_VERSION" ]]; then
    echo "build-crun: no CRIU $CRIU_VERSION source tree in $CRIU_SRC (found '${ver:-none}'); it is" \
      "scripts/build-criu.sh's: remove /usr/local/sbin/criu and run that script, then retry" >&2
    return 1
  fi
  if [[ ! -s $CRIU_SRC/lib/c/libcriu.so ]]; then
    echo "build-crun: make lib/c/libcriu.so in $CRIU_SRC (log: $CRUN_WORK/libcriu.log)"
    if ! make -C "$CRIU_SRC" -j"$(nproc)" lib/c/libcriu.so >"$CRUN_WORK/libcriu.log" 2>&1; then
      tail -n 30 "$CRUN_WORK/libcriu.log" >&2
      echo "build-crun: libcriu build failed (full log: $CRUN_WORK/libcriu.log)" >&2
      return 1
    fi
  fi
  rm -rf "$stage"
  mkdir -p "$stage/include/criu" "$stage/lib/pkgconfig"
  install -m 0644 "$CRIU_SRC"/{lib/c/criu.h,images/rpc.pb-c.h,criu/include/version.h} "$stage/include/criu/"
  install -m 0755 "$CRIU_SRC/lib/c/libcriu.so" "$stage/lib/libcriu.so.2"
  ln -s libcriu.so.2 "$stage/lib/libcriu.so"
  printf '%s\n' "libdir=$stage/lib" "includedir=$stage/include" "" "Name: CRIU" \
    "Description: RPC library for userspace checkpoint and restore" "Version: $CRIU_VERSION" \
    "Libs: -L\${libdir} -lcriu" "Cflags: -I\${includedir} -I\${includedir}/criu" \
    >"$stage/lib/pkgconfig/criu.pc"
}

build() {
  local src=$CRUN_WORK/src stage=$CRUN_WORK/criu-stage log=$CRUN_WORK/build.log
  rm -rf "$src"
  mkdir -p "$src"
  tar -C "$src" --strip-components=1 -xf "$CRUN_WORK/$CRUN_ORIG"
  echo "build-crun: configure && make -j$(nproc) in $src (log: $log)"
  # crun includes <criu/criu.h> without CRIU_CFLAGS, hence CPPFLAGS; the rpath lets its
  # dlopen("libcriu.so.2") find the private copy in $CRUN_DIR first.
  if ! (
    cd "$src" \
      && PKG_CONFIG_PATH=$stage/lib/pkgconfig CPPFLAGS="-I$stage/include" \
        LDFLAGS="-Wl,-rpath,$CRUN_DIR" ./configure --prefix=/usr/local --disable-silent-rules \
      && grep -q '^#define HAVE_CRIU 1' config.h \
      && make -j"$(nproc)"
  ) >"$log" 2>&1; then
    tail -n 30 "$log" >&2
    grep -q '^#define HAVE_CRIU 1' "$src/config.h" 2>/dev/null \
      || echo "build-crun: configure did not find CRIU (criu.pc in $stage/lib/pkgconfig)" >&2
    echo "build-crun: build failed (full log: $log)" >&2
    return 1
  fi
  install -D -m 0755 "$stage/lib/libcriu.so.2" "$CRUN_DIR/libcriu.so.2"
  install -D -m 0755 "$src/crun" "$CRUN_BIN"
  is_current || {
    echo "build-crun: $CRUN_BIN reports '$(installed_version)'$(has_criu || echo ' without +CRIU'), not $CRUN_VERSION +CRIU" >&2
    return 1
  }
}

main() {
  if [[ ${1:-} == --check ]]; then is_current; return; fi
  [[ $(id -u) == 0 ]] || { echo "build-crun: run as root" >&2; return 1; }
  if is_current; then
    echo "build-crun: $CRUN_BIN $CRUN_VERSION +CRIU already installed"
    return 0
  fi
  mkdir -p "$CRUN_WORK"
  exec 8>"$CRUN_WORK/.lock"
  flock 8
  is_current && return 0 # built meanwhile by another run
  local t0=$SECONDS
  install_missing "${BUILD_DEPS[@]}"
  fetch_orig
  stage_libcriu
  build
  echo "build-crun: installed $CRUN_BIN $(installed_version) +CRIU (libcriu $CRIU_VERSION beside it) in $((SECONDS - t0)) s"
}

main "$@"
