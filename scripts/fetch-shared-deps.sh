#!/bin/bash
# Why: containerd 2.3 (and the runc, runsc and crictl built with it) reach test machines as prebuilt
# static tarballs in a deps directory next to the checkout, not through apt. This checks them against
# that directory's SHA256SUMS, unpacks each into $NV_SHARED_DEST/<name>/ (<name>: the tarball's name
# without -linux-amd64.tar.xz, e.g. containerd-2.3.4) and writes $NV_SHARED_DEST/env.sh:
#   NVPROXY_SHARED_DEPS_DIR        where they were unpacked
#   NVPROXY_CONTAINERD23_BIN_DIR   bin/ of containerd 2.3.x (containerd, ctr, containerd-shim-runc-v2)
#   NVPROXY_CONTAINERD24_BIN_DIR   bin/ of containerd 2.4.x (2.4.0-beta.0: CRI's restore-by-create removed)
#   NVPROXY_SHARED_<TOOL>_BIN_DIR  bin/ of every tarball (TOOL: CONTAINERD, RUNC, RUNSC, CRICTL)
# Idempotent: a tarball whose checksum matches the one recorded at its last unpack is not unpacked
# again. The deps directory: $NVPROXY_DEPS_DIR, else the "deps" folder that the test machines keep
# beside the checkout.
# Usage: scripts/fetch-shared-deps.sh [--check]   (--check: exit 0 when everything is in place)
# Exit 0: done (or in place); 1: a checksum or unpack failed; 3: no deps directory (nothing done).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
DEPS=${NVPROXY_DEPS_DIR:-$REPO/../shared/deps}
DEST=${NV_SHARED_DEST:-/opt/nvproxy-deps/shared}

log() { echo "fetch-shared-deps: $*" >&2; }

[[ -d $DEPS && -r $DEPS/SHA256SUMS ]] || { log "no deps directory with SHA256SUMS at $DEPS"; exit 3; }
DEPS=$(cd "$DEPS" && pwd)

# Lines "SUM  FILE" of SHA256SUMS for the tarballs.
mapfile -t entries < <(awk '$2 ~ /\.tar\.(xz|gz)$/ {print $1 " " $2}' "$DEPS/SHA256SUMS")
((${#entries[@]})) || { log "$DEPS/SHA256SUMS lists no tarball"; exit 1; }

name_of() {
  local n=${1%.tar.*}
  echo "${n%-linux-amd64}"
}

in_place() {
  local e sum file name
  for e in "${entries[@]}"; do
    read -r sum file <<<"$e"
    name=$(name_of "$file")
    [[ -r $DEST/$name/.sha256 && $(<"$DEST/$name/.sha256") == "$sum" ]] || return 1
  done
  # An env.sh older than this script lacks what it writes now (a variable added since).
  [[ -s $DEST/env.sh && $DEST/env.sh -nt ${BASH_SOURCE[0]} ]]
}

if [[ ${1:-} == --check ]]; then in_place; exit; fi
[[ $(id -u) == 0 ]] || { log "run as root"; exit 1; }

write_env() {
  local tmp=$DEST/.env.sh.tmp e sum file name tool bindir ver
  {
    echo "# Written by scripts/fetch-shared-deps.sh from $DEPS (source this)."
    echo "export NVPROXY_SHARED_DEPS_DIR=$DEST"
    for e in "${entries[@]}"; do
      read -r sum file <<<"$e"
      name=$(name_of "$file")
      bindir=$DEST/$name/bin
      tool=${name%%-*}
      tool=${tool^^}
      echo "export NVPROXY_SHARED_${tool//[^A-Z0-9]/_}_BIN_DIR=$bindir"
      if [[ $tool == CONTAINERD ]]; then
        ver=${name#containerd-}
        [[ $ver == 2.3.* ]] && echo "export NVPROXY_CONTAINERD23_BIN_DIR=$bindir"
        [[ $ver == 2.4.* ]] && echo "export NVPROXY_CONTAINERD24_BIN_DIR=$bindir"
      fi
    done
  } >"$tmp"
  mv "$tmp" "$DEST/env.sh"
}

in_place && exit 0  # silently: install-deps.sh calls this on every run

(cd "$DEPS" && sha256sum --quiet -c SHA256SUMS) \
  || { log "checksum mismatch in $DEPS (see above)"; exit 1; }
mkdir -p "$DEST"
for e in "${entries[@]}"; do
  read -r sum file <<<"$e"
  name=$(name_of "$file")
  if [[ -r $DEST/$name/.sha256 && $(<"$DEST/$name/.sha256") == "$sum" ]]; then continue; fi
  tmp=$DEST/.$name.tmp
  rm -rf "$tmp" && mkdir -p "$tmp"
  tar -C "$tmp" -xf "$DEPS/$file" || { log "could not unpack $file"; rm -rf "$tmp"; exit 1; }
  echo "$sum" >"$tmp/.sha256"
  rm -rf "${DEST:?}/$name" && mv "$tmp" "$DEST/$name"
  log "unpacked $file into $DEST/$name"
done
write_env
in_place || { log "unpacked, but the result does not check out"; exit 1; }
log "done: source $DEST/env.sh"
