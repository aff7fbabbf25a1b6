#!/bin/sh
# Interop check against Go's github.com/containerd/ttrpc, both directions:
# Go client -> our Server, our Client -> Go server. Usage: run_interop.sh CC_PEER GO_PEER_SRC WORKDIR
set -eu
cc_peer=$1 go_src=$2 work=$3
mkdir -p "$work/src/goside" "$work/cache"
cp "$go_src" "$work/src/goside/main.go"
(cd "$work/src/goside" && GO111MODULE=off GOPATH="$work:/usr/share/gocode" GOCACHE="$work/cache" GOFLAGS= \
  go build -o "$work/go_peer" .)
sock_cc="$work/cc.sock" sock_go="$work/go.sock"
rm -f "$sock_cc" "$sock_go"
"$cc_peer" server "$sock_cc" & cc_pid=$!
"$work/go_peer" server "$sock_go" & go_pid=$!
trap 'kill $cc_pid $go_pid 2>/dev/null || true' EXIT
for _ in $(seq 50); do [ -S "$sock_cc" ] && [ -S "$sock_go" ] && break; sleep 0.1; done
"$work/go_peer" client "$sock_cc"
"$cc_peer" client "$sock_go"
