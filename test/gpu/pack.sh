#!/bin/bash
# Here (Debian 12, with network for apt): fills .carry/ (git-ignored) with what test/gpu/run-all.sh needs
# on the GPU machine (Ubuntu 24.04, no network):
#   .carry/bin/containerd-shim-nvproxy-v1   our shim (static) and, beside it, nvproxy-cuda-helper
#                                           (glibc only), where the shim looks for it
#   .carry/kit/kit.tar.xz                   containerd 1.7, ctr, runc, CRIU + libs (the workplace's gpu-kit tool)
#   .carry/gpu-image.tar                    the skeleton image (test/gpu/make-gpu-image.sh)
#   .carry/runsc.tar.xz                     the current runsc (the shared deps'), for RUNTIME=runsc
#   .carry/crun/                            crun 1.21 with CRIU (scripts/build-crun.sh), when built here
#   (nvproxy-sandbox-agent, bench/gpu_hold, bench/chunk_reuse, the fake_cuda_app fixture and the CRIU release plugin go to
#   .carry/bin as well)
# Usage: test/gpu/pack.sh [--no-kit]   (builds the shim target first)
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
c=$repo/.carry
cmake --build "$repo/build" --target containerd-shim-nvproxy-v1 nvproxy-cuda-helper nvproxy-sandbox-agent nvproxy_criu_release gpu_hold chunk_reuse page_hold -j"$(nproc)" >/dev/null
rm -rf "$c/bin" "$c/lib"
mkdir -p "$c/bin"
for b in containerd-shim-nvproxy-v1 nvproxy-cuda-helper nvproxy-sandbox-agent; do
  install -m 0755 "$repo/build/shim/$b" "$c/bin/$b"
  strip "$c/bin/$b"
done
# bench/gpu_hold for run-large-memory.sh; the CRIU release plugin, where the shim looks for it.
install -m 0755 "$repo/build/bench/gpu_hold" "$c/bin/gpu_hold"
# bench/page_hold for bench/page_io.sh (CRIU alone, the page I/O patch with and without its options).
install -m 0755 "$repo/build/bench/page_hold" "$c/bin/page_hold"
# bench/chunk_reuse (static) for run-travel.sh: what a second push sends per chunk size.
install -m 0755 "$repo/build/bench/chunk_reuse" "$c/bin/chunk_reuse"
strip "$c/bin/chunk_reuse"
# The static fake_cuda_app (without CUDA) for bench/criu_zero_pages.sh.
install -m 0755 "$repo/build/test/fixtures/fake_cuda_app" "$c/bin/fake_cuda_app"
install -D -m 0644 "$repo/build/shim/criu-plugins/nvproxy_criu_release.so" "$c/bin/criu-plugins/nvproxy_criu_release.so"
if [[ ${1:-} != --no-kit || ! -s $c/kit/kit.tar.xz ]]; then
  [[ -s $c/kit/kit.tar.xz ]] || bash "$repo/../shared/tools/gpu-kit.sh" "$c/kit"
fi
# crun with CRIU (scripts/build-crun.sh), when built here, with the libraries the GPU machine lacks
# (crun's yajl, libcriu's protobuf-c): test/gpu/lib/crun.sh installs them there.
rm -rf "$c/crun"
if [[ -x /usr/local/lib/nvproxy-crun/crun ]]; then
  mkdir -p "$c/crun"
  cp /usr/local/lib/nvproxy-crun/{crun,libcriu.so.2} "$(readlink -f /lib/x86_64-linux-gnu/libyajl.so.2)" \
    "$(readlink -f /lib/x86_64-linux-gnu/libprotobuf-c.so.1)" "$c/crun/"
fi
# The current runsc (the shared deps' tarball) for RUNTIME=runsc in run-fork-shapes.sh.
cp "$(ls "$repo"/../shared/deps/runsc-*-linux-amd64.tar.xz | head -1)" "$c/runsc.tar.xz"
bash "$repo/test/gpu/make-gpu-image.sh" "$c/gpu-image.tar" >/dev/null
du -sh "$c"/* | sed 's|'"$repo"'/||'
