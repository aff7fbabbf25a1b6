#!/bin/bash
# Here (Debian 12): fills .carry-pod-runsc/ (ignored through .git/info/exclude) with what
# test/gpu/run-pod-runsc.sh needs on the GPU machine besides .carry-travel (test/gpu/pack-travel.sh:
# docker-registry), and nothing else, so that both stay under the carry's 64 MiB:
#   bin.tar.xz           the shim, nvproxy-cuda-helper, nvproxy-sandbox-agent and, where the build
#                        has it, nvproxy-image-transfer (stripped, xz: 12 MiB become 4)
#   runsc.tar.xz         the current runsc (the shared deps' tarball)
#   containerd-2.4*.tar.xz, crictl-*.tar.xz   the shared deps' tarballs as they are
#   kit/kit.tar.xz       the kit's CRIU alone, with its libraries (from .carry/kit/kit.tar.xz, which
#                        test/gpu/pack.sh makes): containerd's CRI checkpoint asks for criu on PATH
#                        even when the runtime is runsc. No containerd 1.7, no runc: a runsc pod
#                        needs neither
#   gpu-image.tar, pause.tar   the skeleton image (make-gpu-image.sh) and CRI's sandbox image made of it
#                        (the e2e tests' recipe, as test/gpu/pack-cri.sh makes it)
# Prints the carry's size: the repository's files the device machine gets plus both folders.
# Usage: test/gpu/pack-pod-runsc.sh [--no-build]   (--no-build: the binaries build/ has, as they are)
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
build=$repo/build
c=$repo/.carry-pod-runsc
deps=$repo/../shared/deps
grep -qx '/.carry-pod-runsc/' "$repo/.git/info/exclude" 2>/dev/null || echo '/.carry-pod-runsc/' >>"$repo/.git/info/exclude"
kit=$repo/.carry/kit/kit.tar.xz
[[ -s $kit ]] || { echo "pack-pod-runsc: $kit missing: run test/gpu/pack.sh first (its kit's CRIU)" >&2; exit 1; }
progs=(containerd-shim-nvproxy-v1 nvproxy-cuda-helper nvproxy-sandbox-agent)
# nvproxy-image-transfer (the registry client as a program of its own, issue 57) where the build has it.
targets=$(cmake --build "$build" --target help 2>/dev/null || true)
if grep -q 'nvproxy-image-transfer' <<<"$targets"; then progs+=(nvproxy-image-transfer); fi
[[ ${1:-} == --no-build ]] || cmake --build "$build" --target "${progs[@]}" -j"$(nproc)" >/dev/null

rm -rf "$c" && mkdir -p "$c/kit"
w=$(mktemp -d /var/tmp/pack-pod-runsc.XXXXXX)
trap 'rm -rf "$w"' EXIT
mkdir -p "$w/bin"
for b in "${progs[@]}"; do
  f=$build/shim/$b
  [[ -x $f ]] || f=$(find "$build" -name "$b" -type f -perm -u+x -not -path '*/CMakeFiles/*' | head -1)
  if [[ -z $f && $b == nvproxy-image-transfer && ${1:-} == --no-build ]]; then
    echo "pack-pod-runsc: $b is not built in $build: left out (a shim built before it needs none)" >&2
    continue
  fi
  [[ -n $f ]] || { echo "pack-pod-runsc: $b is not built in $build" >&2; exit 1; }
  install -m 0755 "$f" "$w/bin/$b"
  strip "$w/bin/$b"
done
tar -C "$w" -cf - bin | xz -9 -T2 >"$c/bin.tar.xz"
cp "$(ls "$deps"/runsc-*-linux-amd64.tar.xz | head -1)" "$c/runsc.tar.xz"
cp "$(ls "$deps"/containerd-2.4*-linux-amd64.tar.xz | head -1)" "$(ls "$deps"/crictl-*-linux-amd64.tar.xz | head -1)" "$c/"
mkdir -p "$w/kit"
tar -C "$w/kit" -xJf "$kit" --wildcards 'root/usr/sbin/criu' 'root/usr/lib/x86_64-linux-gnu/lib*' 'root/etc/libnl-3*'
LD_LIBRARY_PATH=$w/kit/root/usr/lib/x86_64-linux-gnu "$w/kit/root/usr/sbin/criu" --version >/dev/null ||
  { echo "pack-pod-runsc: the kit's criu does not run with the libraries taken" >&2; exit 1; }
tar -C "$w/kit" -cf - root | xz -9 -T2 >"$c/kit/kit.tar.xz"
chmod 0644 "$c"/*.tar.xz
bash "$repo/test/gpu/make-gpu-image.sh" "$c/gpu-image.tar" >/dev/null
# shellcheck disable=SC1090 # the one function, from the e2e library
source <(sed -n '/^_nv_cri_pause_image() {/,/^}/p' "$repo/test/e2e/lib/cri.sh")
NV_CRI_DIR=$w NV_IMAGE_TAR=$c/gpu-image.tar NV_CRI_PAUSE=docker.io/local/pause:nvproxy-gpu _nv_cri_pause_image "$c/pause.tar"
[[ -s $repo/.carry-travel/travel.tar.xz ]] || bash "$repo/test/gpu/pack-travel.sh" >/dev/null
du -sh "$c"/* "$repo/.carry-travel" | sed 's|'"$repo"'/||'
# The repository's files as the device machine gets them: tracked, and untracked but not ignored.
files=$(cd "$repo" && { git ls-files -z; git ls-files -z -o --exclude-standard; } | xargs -0 -r stat -c %s -- 2>/dev/null | awk '{s += $1} END {print s + 0}')
carried=$(du -sb "$c" "$repo/.carry-travel" | awk '{s += $1} END {print s}')
awk -v f="$files" -v c="$carried" 'BEGIN {
  printf "carry: repository files %.1f MiB + .carry-pod-runsc and .carry-travel %.1f MiB = %.1f MiB (limit 64)\n", f / 1048576, c / 1048576, (f + c) / 1048576
  if (f + c > 60 * 1048576) { print "pack-pod-runsc: over 60 MiB" > "/dev/stderr"; exit 1 }
}'
