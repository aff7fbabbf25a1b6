#!/bin/bash
# Why: e2e tests need containerd 1.7, gVisor's runsc, docker 26 and runc 1.1.15, which Debian 12 lacks. Debian 13
# (trixie) ships them, and their binaries need only glibc 2.34, so they run on Debian 12 as they are;
# runc needs glibc 2.38, so it gets Debian 13's libc6 and libseccomp2 beside it (patchelf sets its
# interpreter and library path; its `runc init` re-exec runs the same patched binary).
# This fetches the .debs through a PRIVATE apt setup (own sources list, lists and cache dirs; the
# system's apt config is untouched) and unpacks each with `dpkg -x` into $NV_TRIXIE_DEST/<pkg>/,
# then writes $NV_TRIXIE_DEST/env.sh (NVPROXY_* paths) and checks each binary runs (`--version`).
# Usage: bash scripts/fetch-trixie.sh [--check]   (--check: exit 0 if all is in place, silently)
# Sourcing this file only defines the nv_trixie_* helpers (debian-orig.sh and fetch-containerd2.sh
# use nv_trixie_mirror).
set -euo pipefail

NV_TRIXIE_APT=${NV_TRIXIE_APT:-/var/tmp/nvproxy-apt-trixie}
NV_TRIXIE_DEST=${NV_TRIXIE_DEST:-/opt/nvproxy-deps/trixie}
NV_TRIXIE_PKGS=(containerd runsc docker.io docker-cli runc libc6 libseccomp2)
NV_TRIXIE_OPTS=()

# The Debian mirror the machine's own apt sources use: the first non-security URI of a deb822
# stanza (/etc/apt/sources.list.d/*.sources) or one-line entry (sources.list, *.list) for this
# release's codename. Those sources are the only place packages come from: with none, it fails.
nv_trixie_mirror() {
  local codename m="" f
  codename=$(. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}")
  if [[ -n $codename ]]; then
    for f in /etc/apt/sources.list.d/*.sources; do
      [[ -r $f && -z $m ]] || continue
      m=$(awk -v c="$codename" '
        function flush() {
          if (!done && ok && uri != "" && uri !~ /security/) { print uri; done = 1 }
          ok = 0; uri = ""
        }
        /^[ \t]*$/ { flush(); next }
        /^URIs:/ { uri = $2 }
        /^Suites:/ { for (i = 2; i <= NF; i++) if ($i == c) ok = 1 }
        END { flush() }' "$f")
    done
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
      [[ -r $f && -z $m ]] || continue
      m=$(awk -v c="$codename" '$1 ~ /^deb(-src)?$/ && $0 !~ /security/ {
          for (i = 2; i < NF; i++) if ($i ~ /^[a-z+]+:\/\//) { if ($(i + 1) == c) { print $i; exit } break }
        }' "$f")
    done
  fi
  if [[ -z $m ]]; then
    echo "nvproxy: no Debian mirror in this machine's apt sources (a 'deb' entry for" \
      "'${codename:-this release}' in /etc/apt/sources.list.d/*.sources or /etc/apt/sources.list);" \
      "packages come only from the machine's own apt sources: add your mirror there, e.g. the line" \
      "'deb http://YOUR-MIRROR/debian ${codename:-bookworm} main' in /etc/apt/sources.list, then retry" >&2
    return 1
  fi
  echo "$m"
}

# Writes the private sources list and sets NV_TRIXIE_OPTS (apt options that select it).
nv_trixie_setup() {
  local mirror
  mirror=$(nv_trixie_mirror) || return 1
  mkdir -p "$NV_TRIXIE_APT"/{lists/partial,cache/archives/partial,dl}
  printf 'deb %s trixie main\n' "$mirror" >"$NV_TRIXIE_APT/sources.list.new"
  if ! cmp -s "$NV_TRIXIE_APT/sources.list.new" "$NV_TRIXIE_APT/sources.list"; then
    mv "$NV_TRIXIE_APT/sources.list.new" "$NV_TRIXIE_APT/sources.list"
    rm -f "$NV_TRIXIE_APT/lists/"*_dists_*
  else
    rm -f "$NV_TRIXIE_APT/sources.list.new"
  fi
  NV_TRIXIE_OPTS=(
    -o "Dir::Etc::SourceList=$NV_TRIXIE_APT/sources.list" -o Dir::Etc::SourceParts=/dev/null
    -o "Dir::State::Lists=$NV_TRIXIE_APT/lists" -o "Dir::Cache=$NV_TRIXIE_APT/cache"
    -o APT::Sandbox::User=root
  )
}

# Runs `apt-get update` on the private list, only when its indexes are missing (or when forced).
nv_trixie_update() {
  local force=${1:-}
  nv_trixie_setup
  if [[ -z $force ]] && compgen -G "$NV_TRIXIE_APT/lists/*_trixie_main_binary-*_Packages*" >/dev/null; then
    return 0
  fi
  apt-get "${NV_TRIXIE_OPTS[@]}" -qq update
}

nv_trixie_apt_get() { apt-get "${NV_TRIXIE_OPTS[@]}" "$@"; }
nv_trixie_apt_cache() { apt-cache "${NV_TRIXIE_OPTS[@]}" "$@"; }

# ---- main (only when executed) ----

# binary to verify, relative to NV_TRIXIE_DEST, and the flag that prints its version
verify_list() {
  cat <<'EOF'
containerd/usr/bin/containerd --version
containerd/usr/bin/ctr --version
containerd/usr/bin/containerd-shim-runc-v2 -v
runsc/usr/bin/runsc --version
docker.io/usr/sbin/dockerd --version
docker-cli/usr/bin/docker --version
runc/usr/sbin/runc --version
EOF
}

unpacked() { [[ -s $NV_TRIXIE_DEST/$1/.nvproxy-deb ]]; }

# runc from Debian 13 against Debian 13's ld.so, libc and libseccomp (unpacked beside it).
relink_runc() {
  local d=$NV_TRIXIE_DEST lib=usr/lib/x86_64-linux-gnu bin=$NV_TRIXIE_DEST/runc/usr/sbin/runc
  [[ -s $d/runc/.nvproxy-relinked ]] && return 0
  command -v patchelf >/dev/null || { echo "fetch-trixie: patchelf is missing (apt-get install patchelf)" >&2; return 1; }
  patchelf --set-interpreter "$d/libc6/$lib/ld-linux-x86-64.so.2" --set-rpath "$d/libc6/$lib:$d/libseccomp2/$lib" "$bin"
  echo "$d/libc6 $d/libseccomp2" >"$d/runc/.nvproxy-relinked"
}

all_in_place() {
  local p bin flag
  for p in "${NV_TRIXIE_PKGS[@]}"; do unpacked "$p" || return 1; done
  [[ -s $NV_TRIXIE_DEST/env.sh && -s $NV_TRIXIE_DEST/runc/.nvproxy-relinked ]] || return 1
  while read -r bin flag; do
    "$NV_TRIXIE_DEST/$bin" "$flag" >/dev/null 2>&1 || return 1
  done < <(verify_list)
}

# Downloads PKG's .deb into the private dl dir (refreshing the lists once if the index is stale).
download() {
  local p=$1
  (cd "$NV_TRIXIE_APT/dl" && nv_trixie_apt_get -qq download "$p") && return 0
  echo "fetch-trixie: download of $p failed; refreshing the trixie index" >&2
  nv_trixie_update force
  (cd "$NV_TRIXIE_APT/dl" && nv_trixie_apt_get -qq download "$p")
}

unpack() {
  local p=$1 ver deb tmp
  ver=$(nv_trixie_apt_cache show --no-all-versions "$p" | awk '/^Version:/ && !v {v = $2} END {print v}')
  [[ -n $ver ]] || { echo "fetch-trixie: $p not found in trixie" >&2; return 1; }
  deb="$NV_TRIXIE_APT/dl/${p}_${ver//:/%3a}_$(dpkg --print-architecture).deb"
  [[ -s $deb ]] || download "$p"
  [[ -s $deb ]] || { echo "fetch-trixie: expected $deb after download" >&2; return 1; }
  tmp="$NV_TRIXIE_DEST/.$p.tmp"
  rm -rf "$tmp"
  dpkg -x "$deb" "$tmp"
  echo "$p $ver $(basename "$deb")" >"$tmp/.nvproxy-deb"
  rm -rf "${NV_TRIXIE_DEST:?}/$p"
  mv "$tmp" "$NV_TRIXIE_DEST/$p"
  echo "fetch-trixie: unpacked $p $ver into $NV_TRIXIE_DEST/$p"
}

write_env() {
  local d=$NV_TRIXIE_DEST p
  {
    echo "# Written by scripts/fetch-trixie.sh: Debian 13 binaries unpacked for Debian 12 (source this)."
    for p in "${NV_TRIXIE_PKGS[@]}"; do echo "#   $(cut -d' ' -f1,2 "$d/$p/.nvproxy-deb")"; done
    echo "export NVPROXY_TRIXIE_DIR=$d"
    echo "export NVPROXY_CONTAINERD17_BIN_DIR=$d/containerd/usr/bin"
    echo "export NVPROXY_CONTAINERD17=$d/containerd/usr/bin/containerd"
    echo "export NVPROXY_CTR17=$d/containerd/usr/bin/ctr"
    echo "export NVPROXY_RUNSC=$d/runsc/usr/bin/runsc"
    echo "export NVPROXY_DOCKERD_DIR=$d/docker.io/usr/sbin"
    echo "export NVPROXY_DOCKERD=$d/docker.io/usr/sbin/dockerd"
    echo "export NVPROXY_DOCKER=$d/docker-cli/usr/bin/docker"
    echo "export NVPROXY_RUNC_TRIXIE=$d/runc/usr/sbin/runc"
  } >"$d/env.sh.tmp"
  mv "$d/env.sh.tmp" "$d/env.sh"
}

verify() {
  local bin flag out bad=0
  while read -r bin flag; do
    if out=$("$NV_TRIXIE_DEST/$bin" "$flag" 2>&1); then
      echo "fetch-trixie: ok $bin: $(sed -n '/[0-9]\.[0-9]/{s/^ *//;p;q}' <<<"$out")"
    else
      echo "fetch-trixie: FAILED $bin $flag: $out" >&2
      bad=1
    fi
  done < <(verify_list)
  return $bad
}

main() {
  if [[ ${1:-} == --check ]]; then all_in_place; return; fi
  [[ $(id -u) == 0 ]] || { echo "fetch-trixie: run as root" >&2; return 1; }
  if all_in_place; then
    echo "fetch-trixie: Debian 13 binaries already in $NV_TRIXIE_DEST (source $NV_TRIXIE_DEST/env.sh)"
    return 0
  fi
  mkdir -p "$NV_TRIXIE_DEST" "$NV_TRIXIE_APT"
  exec 9>"$NV_TRIXIE_APT/.fetch.lock"
  flock 9
  local p
  nv_trixie_update
  for p in "${NV_TRIXIE_PKGS[@]}"; do unpacked "$p" || unpack "$p"; done
  relink_runc
  write_env
  verify
  echo "fetch-trixie: done; source $NV_TRIXIE_DEST/env.sh"
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
  main "$@"
fi
