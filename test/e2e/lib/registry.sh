# An OCI registry of the test's own (Debian's docker-registry) on a loopback port, plain HTTP, its
# storage and log under $NV_DIR; stopped when the test ends. Source after lib/harness.sh.
#   nv_registry_start     sets NV_REGISTRY (127.0.0.1:PORT), NV_REGISTRY_DIR (its storage),
#                         NV_REGISTRY_LOG
#   nv_registry_blob D    the file in which the registry keeps the blob of digest D (sha256:...)
#   nv_registry_alter_pages REF   one byte changed in the first pages- blob of the pushed image REF
#                         (the original kept); nv_registry_unalter puts it back

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

# The first pages layer picked by jq itself: `jq | head -1` under pipefail failed the caller
# silently whenever head closed the pipe before jq had written every chunk's digest (SIGPIPE).
nv_registry_alter_pages() {
  local pages
  pages=$(skopeo inspect --raw --tls-verify=false "docker://$1" \
    | jq -r 'first(.layers[] | select(.annotations."org.opencontainers.image.title" | test("^pages-"))) | .digest')
  _NV_ALTERED=$(nv_registry_blob "$pages")
  [[ -f $_NV_ALTERED ]] || nv_fail "no blob $pages of $1 in the registry's storage"
  cp "$_NV_ALTERED" "$NV_DIR/altered-blob.saved"
  printf 'X' | dd of="$_NV_ALTERED" bs=1 seek=64 conv=notrunc status=none
}
nv_registry_unalter() { cp "$NV_DIR/altered-blob.saved" "$_NV_ALTERED"; }
