#!/bin/bash
# Why: e2e tests need a container image, and no registry is reachable. This builds one OFFLINE from
# Debian's busybox-static: a single-layer rootfs (/bin/busybox, a symlink per applet, /etc/passwd,
# /etc/group, /tmp, /proc, /sys, /dev), written by hand as an OCI image layout tarball (oci-layout,
# index.json, blobs/sha256/{config,manifest,layer.tar.gz}) plus a docker-style manifest.json, so both
# `ctr images import` and `docker load` take it. The output is reproducible (fixed mtimes, owners).
# Usage: make-image.sh OUT.tar [REF]   (REF default: docker.io/library/busybox:nvproxy-test)
# Import: ctr -a SOCK -n NS images import --snapshotter SNAP OUT.tar  (the name comes from index.json)
set -euo pipefail

BUSYBOX=${BUSYBOX:-/bin/busybox}
EPOCH=1970-01-01T00:00:00Z

die() { echo "make-image: $*" >&2; exit 1; }

# OCI architecture of this machine.
oci_arch() {
  case $(dpkg --print-architecture) in
    amd64) echo amd64 ;; arm64) echo arm64 ;; ppc64el) echo ppc64le ;; s390x) echo s390x ;;
    i386) echo 386 ;; *) die "unsupported architecture $(dpkg --print-architecture)" ;;
  esac
}

# Applet paths relative to / (bin/sh, usr/bin/awk, ...); plain `--list` goes to bin/.
applets() {
  if "$BUSYBOX" --list-full >/dev/null 2>&1; then
    "$BUSYBOX" --list-full
  else
    "$BUSYBOX" --list | sed 's|^|bin/|'
  fi
}

make_rootfs() {
  local root=$1 a
  mkdir -p "$root"/{bin,sbin,usr/bin,usr/sbin,etc,root,tmp,proc,sys,dev,run,var/tmp}
  chmod 1777 "$root/tmp" "$root/var/tmp"
  chmod 0700 "$root/root"
  install -m 0755 "$BUSYBOX" "$root/bin/busybox"
  while read -r a; do
    [[ -n $a && $a != bin/busybox && ! -e $root/$a && ! -L $root/$a ]] || continue
    mkdir -p "$root/$(dirname "$a")"
    ln -s /bin/busybox "$root/$a"
  done < <(applets)
  printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' \
    >"$root/etc/passwd"
  printf 'root:x:0:\nnogroup:x:65534:\n' >"$root/etc/group"
  echo nvproxy-test >"$root/etc/hostname"
}

sha() { sha256sum "$1" | cut -d' ' -f1; }
size() { stat -c %s "$1"; }

# Moves FILE into blobs/sha256/<digest> under LAYOUT and prints the digest (hex).
add_blob() {
  local layout=$1 file=$2 d
  d=$(sha "$file")
  mv "$file" "$layout/blobs/sha256/$d"
  echo "$d"
}

# Reproducible tar of DIR's contents, member names without a leading "./".
det_tar() {
  local entries
  mapfile -t entries < <(cd "$1" && LC_ALL=C ls -A)
  tar -C "$1" --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner --format=gnu -cf - \
    "${entries[@]}"
}

main() {
  local out=${1:?usage: make-image.sh OUT.tar [REF]} ref=${2:-docker.io/library/busybox:nvproxy-test}
  [[ -x $BUSYBOX ]] || die "$BUSYBOX missing (apt-get install busybox-static)"
  command -v jq >/dev/null || die "jq missing (apt-get install jq)"
  local tag=latest last=${ref##*/}
  [[ $last == *:* ]] && tag=${last##*:}
  local w arch bbver
  w=$(mktemp -d /var/tmp/nvproxy-make-image.XXXXXX)
  # shellcheck disable=SC2064  # expand now: $w is local
  trap "rm -rf '$w'" EXIT
  arch=$(oci_arch)
  bbver=$(dpkg-query -W -f='${Version}' busybox-static 2>/dev/null || echo unknown)
  local lay=$w/layout
  mkdir -p "$lay/blobs/sha256"

  make_rootfs "$w/rootfs"
  det_tar "$w/rootfs" >"$w/layer.tar"
  local diff_id layer layer_size
  diff_id=$(sha "$w/layer.tar")
  gzip -n -6 "$w/layer.tar"
  layer_size=$(size "$w/layer.tar.gz")
  layer=$(add_blob "$lay" "$w/layer.tar.gz")

  jq -cn --arg arch "$arch" --arg diff "sha256:$diff_id" --arg t "$EPOCH" --arg bb "$bbver" '{
      created: $t, architecture: $arch, os: "linux",
      config: {Env: ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
               Cmd: ["sh"], WorkingDir: "/"},
      rootfs: {type: "layers", diff_ids: [$diff]},
      history: [{created: $t, created_by: ("make-image.sh: Debian busybox-static " + $bb)}]
    }' | tr -d '\n' >"$w/config.json"
  local config config_size
  config_size=$(size "$w/config.json")
  config=$(add_blob "$lay" "$w/config.json")

  jq -cn --arg c "sha256:$config" --argjson cs "$config_size" \
    --arg l "sha256:$layer" --argjson ls "$layer_size" '{
      schemaVersion: 2, mediaType: "application/vnd.oci.image.manifest.v1+json",
      config: {mediaType: "application/vnd.oci.image.config.v1+json", digest: $c, size: $cs},
      layers: [{mediaType: "application/vnd.oci.image.layer.v1.tar+gzip", digest: $l, size: $ls}]
    }' | tr -d '\n' >"$w/manifest.json"
  local manifest manifest_size
  manifest_size=$(size "$w/manifest.json")
  manifest=$(add_blob "$lay" "$w/manifest.json")

  echo '{"imageLayoutVersion":"1.0.0"}' | tr -d '\n' >"$lay/oci-layout"
  jq -cn --arg m "sha256:$manifest" --argjson ms "$manifest_size" --arg ref "$ref" --arg tag "$tag" \
    --arg arch "$arch" '{
      schemaVersion: 2, mediaType: "application/vnd.oci.image.index.v1+json",
      manifests: [{mediaType: "application/vnd.oci.image.manifest.v1+json", digest: $m, size: $ms,
        platform: {architecture: $arch, os: "linux"},
        annotations: {"io.containerd.image.name": $ref, "org.opencontainers.image.ref.name": $tag}}]
    }' >"$lay/index.json"
  jq -cn --arg c "blobs/sha256/$config" --arg l "blobs/sha256/$layer" --arg ref "$ref" \
    '[{Config: $c, RepoTags: [$ref], Layers: [$l]}]' >"$lay/manifest.json"

  mkdir -p "$(dirname "$out")"
  det_tar "$lay" >"$out.tmp.$$"
  mv "$out.tmp.$$" "$out"
  echo "make-image: wrote $out ($ref, manifest sha256:$manifest)"
}

main "$@"
