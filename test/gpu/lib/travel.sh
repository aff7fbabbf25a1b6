# shellcheck shell=bash
# The GPU runs' registry on loopback: travel_registry W PORT unpacks .carry-travel (test/gpu/pack-travel.sh:
# Debian's docker-registry) under W/travel, puts wrappers on PATH,
# starts docker-registry on 127.0.0.1:PORT with its storage in W/registry and waits for it. Sets
# REGPID (the caller kills it). Needs REPO and W.
travel_registry() {
  local w=$1 port=$2 b
  mkdir -p "$w/travel/bin" "$w/registry"
  tar -C "$w/travel" -xJf "$REPO/.carry-travel/travel.tar.xz"
  for b in docker-registry; do
    printf '#!/bin/sh\nLD_LIBRARY_PATH=%s/lib/x86_64-linux-gnu exec %s/usr/bin/%s "$@"\n' "$w/travel" "$w/travel" "$b" >"$w/travel/bin/$b"
    chmod +x "$w/travel/bin/$b"
  done
  export PATH=$w/travel/bin:$PATH
  cat >"$w/registry.yml" <<EOT
version: 0.1
storage: {filesystem: {rootdirectory: $w/registry}}
http: {addr: 127.0.0.1:$port}
EOT
  docker-registry serve "$w/registry.yml" >"$w/registry.log" 2>&1 &
  REGPID=$!
  for _ in $(seq 50); do (echo >/dev/tcp/127.0.0.1/"$port") 2>/dev/null && break; sleep 0.2; done
}
