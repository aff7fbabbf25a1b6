#!/bin/bash
# Here: fills .carry-runsc/ (ignored through .git/info/exclude) with what test/gpu/run-runsc.sh needs on
# the GPU machine besides .carry/kit (containerd 1.7 from test/gpu/pack.sh):
#   .carry-runsc/bin/    the shim, nvproxy-cuda-helper and nvproxy-sandbox-agent (stripped)
#   .carry-runsc/runsc.tar.xz   the current runsc (the shared deps' tarball: the carry limit is 64 MiB)
#   .carry-runsc/gpu-image.tar   the skeleton image (test/gpu/make-gpu-image.sh)
# Usage: test/gpu/pack-runsc.sh BUILD_DIR
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:?usage: pack-runsc.sh BUILD_DIR}
c=$repo/.carry-runsc
grep -qx '/.carry-runsc/' "$repo/.git/info/exclude" 2>/dev/null || echo '/.carry-runsc/' >>"$repo/.git/info/exclude"
[[ -r /opt/nvproxy-deps/shared/env.sh ]] && source /opt/nvproxy-deps/shared/env.sh
runsc=${NVPROXY_SHARED_RUNSC_BIN_DIR:?run scripts/fetch-shared-deps.sh}/runsc
rm -rf "$c" && mkdir -p "$c/bin"
for b in containerd-shim-nvproxy-v1 nvproxy-cuda-helper nvproxy-sandbox-agent; do
  install -m 0755 "$build/shim/$b" "$c/bin/$b"
  strip "$c/bin/$b"
done
tarball=$(ls "$repo"/../shared/deps/runsc-*-linux-amd64.tar.xz 2>/dev/null | head -1 || true)
if [[ -n $tarball ]]; then
  cp "$tarball" "$c/runsc.tar.xz"
else
  tar -C "$(dirname "$(dirname "$runsc")")" -cJf "$c/runsc.tar.xz" bin/runsc
fi
bash "$repo/test/gpu/make-gpu-image.sh" "$c/gpu-image.tar" >/dev/null
[[ -s $repo/.carry/kit/kit.tar.xz ]] || echo "pack-runsc: .carry/kit/kit.tar.xz missing (test/gpu/pack.sh)" >&2
du -sh "$c"/* "$repo/.carry/kit" | sed 's|'"$repo"'/||'
