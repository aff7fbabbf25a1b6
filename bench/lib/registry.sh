# Debian's docker-registry on loopback for the registry benchmarks, its storage under WORK.
#   bench_registry_start WORK   sets reg (host:port) and regpid; bench_registry_restart empties it
bench_registry_start() {
  bench_registry_work=$1
  local port=$((20000 + RANDOM % 30000))
  cat >"$bench_registry_work/registry.yml" <<YAML
version: 0.1
log: {level: error}
storage: {filesystem: {rootdirectory: $bench_registry_work/registry}}
http: {addr: 127.0.0.1:$port}
YAML
  docker-registry serve "$bench_registry_work/registry.yml" >"$bench_registry_work/registry.log" 2>&1 &
  regpid=$!
  reg=127.0.0.1:$port
  local _
  for _ in $(seq 100); do ss -ltn "sport = :$port" | grep -q LISTEN && return 0; sleep 0.1; done
  echo "docker-registry did not listen on $reg: $(tail -3 "$bench_registry_work/registry.log")" >&2
  return 1
}
# A registry holding nothing (a first push measured again).
bench_registry_restart() {
  kill "$regpid"; wait "$regpid" 2>/dev/null || true
  rm -rf "$bench_registry_work/registry"
  bench_registry_start "$bench_registry_work"
}
