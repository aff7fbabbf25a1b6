#!/bin/bash
# Here (Debian 12, with network for apt): fills .carry/ (git-ignored) with what test/gpu/run-all.sh needs
# on the GPU machine (Ubuntu 24.04, no network):
#   .carry/bin/containerd-shim-nvproxy-v1   our shim, RPATH $ORIGIN/../lib (so the shim, and runc's
#                                           OCI hook that execs the same binary, find their libraries
#                                           whatever environment they are started with)
#   .carry/lib/                             Debian 12 libraries Ubuntu 24.04 lacks (protobuf, yaml-cpp, boost)
#   .carry/kit/kit.tar.xz                   containerd 1.7, ctr, runc, CRIU + libs (../shared/tools/gpu-kit.sh)
#   .carry/gpu-image.tar                    the skeleton image (test/gpu/make-gpu-image.sh)
# Usage: test/gpu/pack.sh [--no-kit]   (builds the shim target first)
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
c=$repo/.carry
cmake --build "$repo/build" --target containerd-shim-nvproxy-v1 -j"$(nproc)" >/dev/null
mkdir -p "$c/bin" "$c/lib"
shim=$repo/build/shim/containerd-shim-nvproxy-v1
install -m 0755 "$shim" "$c/bin/containerd-shim-nvproxy-v1"
strip "$c/bin/containerd-shim-nvproxy-v1"
patchelf --set-rpath '$ORIGIN/../lib' "$c/bin/containerd-shim-nvproxy-v1"
for so in libprotobuf.so.32 libyaml-cpp.so.0.7 libboost_program_options.so.1.74.0; do
  cp -L "$(ldd "$shim" | awk -v s="$so" '$1==s{print $3}')" "$c/lib/$so"
done
if [[ ${1:-} != --no-kit || ! -s $c/kit/kit.tar.xz ]]; then
  [[ -s $c/kit/kit.tar.xz ]] || bash "$repo/../shared/tools/gpu-kit.sh" "$c/kit"
fi
bash "$repo/test/gpu/make-gpu-image.sh" "$c/gpu-image.tar" >/dev/null
du -sh "$c"/* | sed 's|'"$repo"'/||'
