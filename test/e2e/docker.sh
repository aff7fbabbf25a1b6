#!/usr/bin/env bash
# Issue "Packages and ecosystem" acceptance: Docker 26 runs containers through our shim, configured
# by the documented daemon.json (runtimes.nvproxy.runtimeType = io.containerd.nvproxy.v1) and
# `docker run --runtime nvproxy`. dockerd (Debian 13's, unpacked) runs with a private data-root,
# exec-root, pidfile, socket and cgroup parent on top of the harness's private containerd
# (lib/docker.sh).
# Usage: docker.sh [1.7|1.6]
#   NVPROXY_SHIM_DIR  dir of the shim under test (ctest sets it); unset: the installed one on PATH
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/lib/harness.sh"
source "$HERE/lib/docker.sh"
ctd=${1:-1.7}
nv_docker_prepare
SNIPPET=$NV_REPO_DIR/packaging/docker-daemon.json
[[ -f $SNIPPET ]] || nv_fail "no $SNIPPET"

# The shim's config: runc with its state under this test's dir (written once NV_DIR exists; the
# shim reads it at create time through the environment it inherits from containerd).
shim_cfg=$(mktemp /tmp/nvproxy-docker-config.XXXXXX.yaml)
nv_defer rm -f "$shim_cfg"
export NVPROXY_SHIM_CONFIG=$shim_cfg

nv_harness_start --containerd "$ctd"
printf 'runtime:\n  binary: %s\n  root: %s\nlog_level: debug\n' "$(command -v runc)" "$NV_DIR/runc-root" >"$shim_cfg"

nv_docker_start "$SNIPPET"

# docker info lists the runtime by name only; containerd's record below shows its runtimeType.
runtimes=$("$DOCKER" info --format '{{json .Runtimes}}' | jq -r 'keys | join(" ")')
[[ " $runtimes " == *" nvproxy "* ]] || nv_fail "docker info lacks runtime nvproxy: $runtimes"

nv_docker_load
IMG=$NV_DOCKER_IMG

nv_log "docker run --rm --runtime nvproxy"
out=$("$DOCKER" run --rm --runtime nvproxy --network none "$IMG" echo hello)
nv_assert_eq "hello" "$out" "docker run output"

set +e
"$DOCKER" run --rm --runtime nvproxy --network none "$IMG" sh -c 'exit 3'
rc=$?
set -e
nv_assert_eq 3 "$rc" "docker run exit code"

nv_log "detached: containerd runs it with io.containerd.nvproxy.v1 and our shim binary; docker exec"
cid=$("$DOCKER" run -d --runtime nvproxy --network none "$IMG" sleep 1000)
info=$("$NV_CTR" -a "$NV_SOCK" -n moby containers info "$cid")
nv_assert_contains "$info" '"Name": "io.containerd.nvproxy.v1"' "containerd's runtime of the docker container"
shim_pid=$(nv_docker_shims | head -n1)
[[ -n $shim_pid ]] || nv_fail "no nvproxy shim for namespace moby"
want_bin=$(PATH=$_NV_DAEMON_PATH command -v containerd-shim-nvproxy-v1)
nv_assert_eq "$(readlink -f "$want_bin")" "$(readlink /proc/"$shim_pid"/exe)" "the shim binary"
[[ -f $NV_DIR/runc-root/moby/$cid/state.json ]] || nv_fail "runc state not under the shim config's root ($NV_DIR/runc-root/moby)"
out=$("$DOCKER" exec "$cid" cat /etc/hostname)
nv_assert_eq "${cid:0:12}" "$out" "docker exec output (the container's hostname)"
nv_assert_eq running "$("$DOCKER" inspect -f '{{.State.Status}}' "$cid")" "docker inspect status"
"$DOCKER" kill "$cid" >/dev/null
"$DOCKER" rm "$cid" >/dev/null
no_moby_shims() { ! nv_docker_shims >/dev/null; }
nv_wait_for -t 15 no_moby_shims || nv_fail "nvproxy shims left after docker rm"

nv_log "runtimes.nvproxy.options.ConfigPath reaches the shim (daemon.json reloaded with SIGHUP)"
wrapper=$NV_DIR/runc-wrapper
cat >"$wrapper" <<EOF
#!/bin/sh
echo "\$*" >>"$NV_DIR/runc-wrapper.log"
exec $(command -v runc) "\$@"
EOF
chmod 0755 "$wrapper"
printf 'runtime:\n  binary: %s\n  root: %s\n' "$wrapper" "$NV_DIR/runc-root" >"$NV_DIR/alt-config.yaml"
cat >"$NV_DD/daemon.json" <<EOF
{
  "runtimes": {
    "nvproxy": {
      "runtimeType": "io.containerd.nvproxy.v1",
      "options": {"ConfigPath": "$NV_DIR/alt-config.yaml"}
    }
  }
}
EOF
nv_docker_reload
out=$("$DOCKER" run --rm --runtime nvproxy --network none "$IMG" echo via-config-path)
nv_assert_eq "via-config-path" "$out" "docker run with options.ConfigPath"
grep -q ' create ' "$NV_DIR/runc-wrapper.log" 2>/dev/null \
  || nv_fail "the runtime.binary of options.ConfigPath was not used (docker did not pass ConfigPath)"

nv_docker_stop
echo "PASS docker (dockerd $("$DOCKERD" --version | awk '{print $3}' | tr -d ,), containerd $NV_CONTAINERD_VERSION)"
