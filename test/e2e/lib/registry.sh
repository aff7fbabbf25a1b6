# An OCI registry of the test's own (Debian's docker-registry) on a loopback port, plain HTTP, its
# storage and log under $NV_DIR; stopped when the test ends. Source after lib/harness.sh.
#   nv_registry_start     sets NV_REGISTRY (127.0.0.1:PORT), NV_REGISTRY_DIR (its storage),
#                         NV_REGISTRY_LOG
#   nv_registry_blob D    the file in which the registry keeps the blob of digest D (sha256:...)

nv_registry_start() {
  command -v docker-registry >/dev/null || nv_skip "docker-registry not installed (scripts/install-deps.sh)"
  command -v skopeo >/dev/null || nv_skip "skopeo not installed (scripts/install-deps.sh)"
  NV_REGISTRY_DIR=$NV_DIR/registry
  NV_REGISTRY_LOG=$NV_DIR/registry.log
  mkdir -p "$NV_REGISTRY_DIR"
  local try port pid
  for try in 1 2 3 4 5; do
    port=$((20000 + RANDOM % 30000))
    cat >"$NV_DIR/registry.yml" <<YAML
version: 0.1
log:
  level: info
storage:
  filesystem:
    rootdirectory: $NV_REGISTRY_DIR
http:
  addr: 127.0.0.1:$port
YAML
    docker-registry serve "$NV_DIR/registry.yml" >"$NV_REGISTRY_LOG" 2>&1 &
    pid=$!
    nv_defer kill "$pid"
    if nv_wait_for -t 10 _nv_registry_up "$port" "$pid"; then
      NV_REGISTRY=127.0.0.1:$port
      nv_log "registry on $NV_REGISTRY (docker-registry, storage $NV_REGISTRY_DIR)"
      return 0
    fi
    kill "$pid" 2>/dev/null || true
  done
  nv_fail "docker-registry did not start: $(tail -n 5 "$NV_REGISTRY_LOG")"
}

_nv_registry_up() {
  kill -0 "$2" 2>/dev/null && ss -ltn "sport = :$1" | grep -q LISTEN
}

nv_registry_blob() {
  local hex=${1#sha256:}
  echo "$NV_REGISTRY_DIR/docker/registry/v2/blobs/sha256/${hex:0:2}/$hex/data"
}
