# shellcheck shell=bash
# Why: the docker tests run Docker 26's dockerd (Debian 13's, unpacked) on top of the harness's
# private containerd (--containerd: dockerd starts no containerd of its own), with everything of
# dockerd's own under the test's dir (data-root, exec-root, pidfile, socket, cgroup parent) and no
# iptables/bridge/ip-forward changes. Source it after lib/harness.sh.
# API: nv_docker_prepare            before nv_harness_start: finds dockerd/docker (fails without them)
#      nv_docker_start DAEMON_JSON  after nv_harness_start: dockerd with that daemon.json, ready
#      nv_docker_reload             SIGHUP: dockerd re-reads its daemon.json (waits for it)
#      nv_docker_stop               removes its containers, stops it (also run at exit)
#      nv_docker_load               loads the harness's image into it; sets NV_DOCKER_IMG
#      nv_docker_shims              pids of our shims serving docker's namespace (moby)
# Sets: DOCKERD DOCKER NV_DD (dockerd's dir: daemon.json, dockerd.log, data/) DOCKER_HOST DOCKER_CONFIG

[[ -n ${_NV_DOCKER_LOADED:-} ]] && return 0
_NV_DOCKER_LOADED=1

DOCKERD="" DOCKER="" NV_DD="" NV_DOCKER_IMG="" _NV_DOCKERD_PID="" _NV_DOCKER_CG="" _NV_RUN_DOCKER_EXISTED=0

nv_docker_prepare() {
  # shellcheck disable=SC1090
  [[ -r $NV_TRIXIE_ENV ]] && source "$NV_TRIXIE_ENV"
  DOCKERD=${NVPROXY_DOCKERD:-}
  DOCKER=${NVPROXY_DOCKER:-}
  [[ -x $DOCKERD && -x $DOCKER ]] || nv_fail "dockerd/docker 26 not found (NVPROXY_DOCKERD, NVPROXY_DOCKER): run scripts/fetch-trixie.sh"
  "$DOCKERD" --version | grep -q 'version 2[6-9]\.' || nv_fail "need dockerd >= 26 for runtimeType: $("$DOCKERD" --version)"
  [[ -e /run/docker ]] && _NV_RUN_DOCKER_EXISTED=1
  return 0
}

nv_docker_start() {
  local json=${1:?nv_docker_start needs a daemon.json}
  [[ -n $NV_DIR ]] || nv_fail "nv_docker_start: call nv_harness_start first"
  [[ -n $DOCKERD ]] || nv_fail "nv_docker_start: call nv_docker_prepare first"
  [[ -z $_NV_DOCKERD_PID ]] || nv_fail "nv_docker_start: dockerd already runs (pid $_NV_DOCKERD_PID)"
  NV_DD=$NV_DIR/docker
  mkdir -p "$NV_DD"/{data,exec,cli}
  [[ $json -ef $NV_DD/daemon.json ]] || cp "$json" "$NV_DD/daemon.json"
  export DOCKER_HOST=unix://$NV_DD/docker.sock DOCKER_CONFIG=$NV_DD/cli
  _NV_DOCKER_CG=nvtest-docker-${NV_DIR##*.}
  local storage=overlay2
  [[ $NV_SNAPSHOTTER == overlayfs ]] || storage=vfs
  if [[ -z ${_NV_DOCKER_DEFERRED:-} ]]; then
    nv_defer _nv_docker_cleanup
    _NV_DOCKER_DEFERRED=1
  fi
  nv_log "dockerd $("$DOCKERD" --version | awk '{print $3}' | tr -d ,) on containerd $NV_CONTAINERD_VERSION ($storage)"
  # Not in the background of a shell function's subshell: dockerd must not inherit our traps.
  PATH=$_NV_DAEMON_PATH setsid "$DOCKERD" --config-file "$NV_DD/daemon.json" \
    --data-root "$NV_DD/data" --exec-root "$NV_DD/exec" --pidfile "$NV_DD/docker.pid" -H "$DOCKER_HOST" \
    --containerd "$NV_SOCK" --iptables=false --ip-forward=false --ip-masq=false --bridge=none \
    --userland-proxy=false --cgroup-parent "/$_NV_DOCKER_CG" --storage-driver "$storage" \
    </dev/null >>"$NV_DD/dockerd.log" 2>&1 &
  _NV_DOCKERD_PID=$!
  nv_wait_for -t 60 _nv_dockerd_ready || nv_fail "dockerd did not answer on $DOCKER_HOST"
  grep -q "containerd not running, starting managed containerd" "$NV_DD/dockerd.log" \
    && nv_fail "dockerd started its own containerd instead of using $NV_SOCK"
  return 0
}

_nv_dockerd_ready() {
  kill -0 "$_NV_DOCKERD_PID" 2>/dev/null || {
    tail -n 20 "$NV_DD/dockerd.log" >&2
    nv_fail "dockerd exited during start (log above)"
  }
  "$DOCKER" version >/dev/null 2>&1
}

nv_docker_reload() {
  local before
  before=$(grep -c "Reloaded configuration" "$NV_DD/dockerd.log" || true)
  kill -HUP "$_NV_DOCKERD_PID"
  _nv_dockerd_reloaded() { (($(grep -c "Reloaded configuration" "$NV_DD/dockerd.log" || true) > before)); }
  nv_wait_for -t 15 _nv_dockerd_reloaded || nv_fail "dockerd did not reload $NV_DD/daemon.json"
}

nv_docker_stop() {
  [[ -n $_NV_DOCKERD_PID ]] || return 0
  local ids=() _
  mapfile -t ids < <(timeout 10 "$DOCKER" ps -aq 2>/dev/null || true)
  ((${#ids[@]} == 0)) || timeout 30 "$DOCKER" rm -f "${ids[@]}" >/dev/null 2>&1 || true
  kill -TERM "$_NV_DOCKERD_PID" 2>/dev/null || true
  for _ in $(seq 1 100); do kill -0 "$_NV_DOCKERD_PID" 2>/dev/null || break; sleep 0.2; done
  kill -KILL "$_NV_DOCKERD_PID" 2>/dev/null || true
  wait "$_NV_DOCKERD_PID" 2>/dev/null || true
  _NV_DOCKERD_PID=""
}

nv_docker_load() {
  nv_log "docker load $NV_IMAGE_TAR"
  local out
  out=$("$DOCKER" load -i "$NV_IMAGE_TAR")
  NV_DOCKER_IMG=${NV_IMAGE#docker.io/library/}
  nv_assert_contains "$out" "$NV_DOCKER_IMG" "docker load output"
}

nv_docker_shims() {
  pgrep -f "containerd-shim-nvproxy-v1 -namespace moby .*-address $NV_SOCK"
}

# Deferred: runs inside the harness's _nv_cleanup, whose local rc (the test's exit status) it reads.
_nv_docker_cleanup() {
  local d
  nv_docker_stop
  if ((${rc:-0} != 0)) && [[ -s $NV_DD/dockerd.log ]]; then
    echo "---- last lines of dockerd.log ----" >&2
    tail -n 25 "$NV_DD/dockerd.log" >&2
  fi
  # The harness kills the tasks left in containerd's namespaces (moby included) after this.
  for d in /sys/fs/cgroup/"$_NV_DOCKER_CG" /sys/fs/cgroup/*/"$_NV_DOCKER_CG"; do
    [[ -d $d ]] && find "$d" -depth -type d -exec rmdir {} + 2>/dev/null
  done
  ((_NV_RUN_DOCKER_EXISTED)) || rm -rf /run/docker
  return 0
}
