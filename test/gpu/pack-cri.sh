#!/bin/bash
# Here: fills .carry-cri/ (ignored through .git/info/exclude) with what test/gpu/run-annotation-restore.sh
# needs on the GPU machine besides .carry and .carry-travel: containerd 2.4, crictl and runc 1.4 (the
# shared deps' tarballs as they are) and the sandbox image, the GPU image sleeping (made here, where jq is:
# the e2e tests' own recipe, test/e2e/lib/cri.sh). After test/gpu/pack.sh.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
c=$repo/.carry-cri
grep -qx '/.carry-cri/' "$repo/.git/info/exclude" 2>/dev/null || echo '/.carry-cri/' >>"$repo/.git/info/exclude"
rm -rf "$c" && mkdir -p "$c"
# runc 1.4.3 too: containerd 2.3's and 2.4's CRI sandboxes do not start under runc 1.1 (measured on
# the H200: "can't get final child's PID from pipe: EOF" at RunPodSandbox).
cp "$(ls "$repo"/../shared/deps/containerd-2.4*-linux-amd64.tar.xz | head -1)" "$(ls "$repo"/../shared/deps/crictl-*-linux-amd64.tar.xz | head -1)" \
  "$(ls "$repo"/../shared/deps/runc-1.4*-linux-amd64.tar.xz | head -1)" "$c/"
# shellcheck disable=SC1090 # the one function, from the e2e library
source <(sed -n '/^_nv_cri_pause_image() {/,/^}/p' "$repo/test/e2e/lib/cri.sh")
NV_CRI_DIR=$c NV_IMAGE_TAR=$repo/.carry/gpu-image.tar NV_CRI_PAUSE=docker.io/local/pause:nvproxy-gpu _nv_cri_pause_image "$c/pause.tar"
du -sh "$c"
