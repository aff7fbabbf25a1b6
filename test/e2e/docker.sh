#!/usr/bin/env bash
# Issue "Packages and ecosystem" acceptance: Docker 26 runs containers through our shim, configured
# by the documented daemon.json (runtimes.nvproxy.runtimeType = io.containerd.nvproxy.v1) and
# `docker run --runtime nvproxy`. dockerd (Debian 13's, unpacked) runs with a private data-root,
# exec-root, pidfile, socket and cgroup parent, no iptables/bridge/ip-forward changes, on top of
# the harness's private containerd (--containerd; dockerd starts no containerd of its own).
# Usage: docker.sh [1.7|1.6]
#   NVPROXY_SHIM_DIR  dir of the shim under test (ctest sets it); unset: the installed one on PATH
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/lib/harness.sh"
ctd=${1:-1.7}

# shellcheck disable=SC1090
[[ -r ${NV_TRIXIE_ENV:-/opt/nvproxy-deps/trixie/env.sh} ]] && source "${NV_TRIXIE_ENV:-/opt/nvproxy-deps/trixie/env.sh}"
DOCKERD=${NVPROXY_DOCKERD:-}
DOCKER=${NVPROXY_DOCKER:-}
[[ -x $DOCKERD && -x $DOCKER ]] || nv_fail "dockerd/docker 26 not found (NVPROXY_DOCKERD, NVPROXY_DOCKER): run scripts/fetch-trixie.sh"
"$DOCKERD" --version | grep -q 'version 2[6-9]\.' || nv_fail "need dockerd >= 26 for runtimeType: $("$DOCKERD" --version)"
SNIPPET=$NV_REPO_DIR/packaging/docker-daemon.json
[[ -f $SNIPPET ]] || nv_fail "no $SNIPPET"

# The shim's config: runc with its state under this test's dir (written once NV_DIR exists; the
# shim reads it at create time through the environment it inherits from containerd).
shim_cfg=$(mktemp /tmp/nvproxy-docker-config.XXXXXX.yaml)
nv_defer rm -f "$shim_cfg"
export NVPROXY_SHIM_CONFIG=$shim_cfg
run_docker_existed=0
[[ -e /run/docker ]] && run_docker_existed=1

nv_harness_start --containerd "$ctd"
printf 'runtime:\n  binary: %s\n  root: %s\nlog_level: debug\n' "$(command -v runc)" "$NV_DIR/runc-root" >"$shim_cfg"

DD=$NV_DIR/docker
mkdir -p "$DD"/{data,exec,cli}
CG_PARENT=nvtest-docker-${NV_DIR##*.}
cp "$SNIPPET" "$DD/daemon.json"
export DOCKER_HOST=unix://$DD/docker.sock DOCKER_CONFIG=$DD/cli
storage=overlay2
[[ $NV_SNAPSHOTTER == overlayfs ]] || storage=vfs
dockerd_pid=""

stop_dockerd() {
  [[ -n $dockerd_pid ]] || return 0
  local ids=()
  mapfile -t ids < <(timeout 10 "$DOCKER" ps -aq 2>/dev/null || true)
  ((${#ids[@]} == 0)) || timeout 30 "$DOCKER" rm -f "${ids[@]}" >/dev/null 2>&1 || true
  kill -TERM "$dockerd_pid" 2>/dev/null || true
  for _ in $(seq 1 100); do kill -0 "$dockerd_pid" 2>/dev/null || break; sleep 0.2; done
  kill -KILL "$dockerd_pid" 2>/dev/null || true
  wait "$dockerd_pid" 2>/dev/null || true
  dockerd_pid=""
}
docker_cleanup() {
  local rc=$?
  stop_dockerd
  if ((rc != 0)) && [[ -s $DD/dockerd.log ]]; then
    echo "---- last lines of dockerd.log ----" >&2
    tail -n 25 "$DD/dockerd.log" >&2
  fi
  # The harness kills the tasks left in containerd's namespaces (moby included) after this.
  local d
  for d in /sys/fs/cgroup/"$CG_PARENT" /sys/fs/cgroup/*/"$CG_PARENT"; do
    [[ -d $d ]] && find "$d" -depth -type d -exec rmdir {} + 2>/dev/null
  done
  ((run_docker_existed)) || rm -rf /run/docker
  return 0
}
nv_defer docker_cleanup

nv_log "dockerd $("$DOCKERD" --version | awk '{print $3}' | tr -d ,) on containerd $NV_CONTAINERD_VERSION ($storage)"
# Not in the background of a shell function: dockerd must not inherit our traps.
PATH=$_NV_DAEMON_PATH setsid "$DOCKERD" --config-file "$DD/daemon.json" \
  --data-root "$DD/data" --exec-root "$DD/exec" --pidfile "$DD/docker.pid" -H "$DOCKER_HOST" \
  --containerd "$NV_SOCK" --iptables=false --ip-forward=false --ip-masq=false --bridge=none \
  --userland-proxy=false --cgroup-parent "/$CG_PARENT" --storage-driver "$storage" \
  </dev/null >"$DD/dockerd.log" 2>&1 &
dockerd_pid=$!
dockerd_ready() {
  kill -0 "$dockerd_pid" 2>/dev/null || { tail -n 20 "$DD/dockerd.log" >&2; nv_fail "dockerd exited during start (log above)"; }
  "$DOCKER" version >/dev/null 2>&1
}
nv_wait_for -t 60 dockerd_ready || nv_fail "dockerd did not answer on $DOCKER_HOST"
grep -q "containerd not running, starting managed containerd" "$DD/dockerd.log" \
  && nv_fail "dockerd started its own containerd instead of using $NV_SOCK"

# docker info lists the runtime by name only; containerd's record below shows its runtimeType.
runtimes=$("$DOCKER" info --format '{{json .Runtimes}}' | jq -r 'keys | join(" ")')
[[ " $runtimes " == *" nvproxy "* ]] || nv_fail "docker info lacks runtime nvproxy: $runtimes"

nv_log "docker load $NV_IMAGE_TAR"
load_out=$("$DOCKER" load -i "$NV_IMAGE_TAR")
IMG=${NV_IMAGE#docker.io/library/}
nv_assert_contains "$load_out" "$IMG" "docker load output"

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
shim_pid=$(pgrep -f "containerd-shim-nvproxy-v1 -namespace moby .*-address $NV_SOCK" | head -n1)
[[ -n $shim_pid ]] || nv_fail "no nvproxy shim for namespace moby"
want_bin=$(PATH=$_NV_DAEMON_PATH command -v containerd-shim-nvproxy-v1)
nv_assert_eq "$(readlink -f "$want_bin")" "$(readlink /proc/"$shim_pid"/exe)" "the shim binary"
[[ -f $NV_DIR/runc-root/moby/$cid/state.json ]] || nv_fail "runc state not under the shim config's root ($NV_DIR/runc-root/moby)"
out=$("$DOCKER" exec "$cid" cat /etc/hostname)
nv_assert_eq "${cid:0:12}" "$out" "docker exec output (the container's hostname)"
nv_assert_eq running "$("$DOCKER" inspect -f '{{.State.Status}}' "$cid")" "docker inspect status"
"$DOCKER" kill "$cid" >/dev/null
"$DOCKER" rm "$cid" >/dev/null
no_moby_shims() { ! pgrep -f "containerd-shim-nvproxy-v1 -namespace moby .*-address $NV_SOCK" >/dev/null; }
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
cat >"$DD/daemon.json" <<EOF
{
  "runtimes": {
    "nvproxy": {
      "runtimeType": "io.containerd.nvproxy.v1",
      "options": {"ConfigPath": "$NV_DIR/alt-config.yaml"}
    }
  }
}
EOF
kill -HUP "$dockerd_pid"
nv_wait_for -t 15 grep -q "Reloaded configuration" "$DD/dockerd.log" || nv_fail "dockerd did not reload daemon.json"
out=$("$DOCKER" run --rm --runtime nvproxy --network none "$IMG" echo via-config-path)
nv_assert_eq "via-config-path" "$out" "docker run with options.ConfigPath"
grep -q ' create ' "$NV_DIR/runc-wrapper.log" 2>/dev/null \
  || nv_fail "the runtime.binary of options.ConfigPath was not used (docker did not pass ConfigPath)"

stop_dockerd
echo "PASS docker (dockerd $("$DOCKERD" --version | awk '{print $3}' | tr -d ,), containerd $NV_CONTAINERD_VERSION)"
