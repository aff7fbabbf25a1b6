# shellcheck shell=bash
# The GPU runs' private containerd 1.7 (the kit's), for scripts sourced from the repo root on the GPU
# machine: kit_install unpacks the kit (containerd, runc, CRIU 4.2.1 as /opt/kit/bin/criu) and puts
# the shim and the kit on PATH; kit_start W CFG starts it with its root and state under W and the shim's config
# CFG, defines CTR (ctr with a deadline, namespace gpu), imports the GPU image ($IMAGE); kit_teardown
# kills every task and containerd, and keeps its log as $OUTD/containerd-$1.log.gz; BINDS holds the
# host's /usr and /opt/torch as read-only binds; log, result (RESULTS), now and dt as the other
# runs have them. Needs PACK and OUTD.
IMAGE=docker.io/library/nvproxy-gpu:test
CTDDIR=/opt/kit/root/usr/bin
source "$(dirname "${BASH_SOURCE[0]}")/report.sh"

kit_install() {
  mkdir -p /opt/kit/bin && tar -C /opt/kit -xJf "$PACK/kit/kit.tar.xz"
  printf '#!/bin/sh\nLD_LIBRARY_PATH=/opt/kit/root/usr/lib/x86_64-linux-gnu exec /opt/kit/root/usr/sbin/criu.real "$@"\n' >/opt/kit/bin/criu
  mv /opt/kit/root/usr/sbin/criu /opt/kit/root/usr/sbin/criu.real 2>/dev/null
  chmod +x /opt/kit/bin/criu
  export PATH=$PACK/bin:$CTDDIR:$PATH:/usr/local/nvidia/bin
}

kit_start() {  # W CFG
  W_KIT=$1
  SOCK=$1/containerd.sock
  cat >"$1/config.toml" <<EOT
version = 2
root = "$1/root"
state = "$1/state"
disabled_plugins = ["io.containerd.grpc.v1.cri", "io.containerd.nri.v1.nri"]
[grpc]
  address = "$SOCK"
[ttrpc]
  address = "$SOCK.ttrpc"
EOT
  NVPROXY_SHIM_CONFIG=$2 setsid "$CTDDIR/containerd" --config "$1/config.toml" </dev/null >"$1/containerd.log" 2>&1 &
  CTDPID=$!
  for _ in $(seq 50); do CTR version >/dev/null 2>&1 && break; sleep 0.2; done
  CTR images import --local --snapshotter native "$PACK/gpu-image.tar" >/dev/null
}

CTR() { timeout "${TMO:-240}" "$CTDDIR/ctr" -a "$SOCK" -n gpu "$@"; }

kit_teardown() {  # NAME
  local t
  for t in $(CTR task ls -q 2>/dev/null); do TMO=10 CTR task kill -a -s KILL "$t" >/dev/null 2>&1; done
  sleep 2
  for t in $(CTR task ls -q 2>/dev/null); do TMO=20 CTR task rm -f "$t" >/dev/null 2>&1; done
  kill "$CTDPID" 2>/dev/null
  sleep 1
  gzip -c "$W_KIT/containerd.log" >"$OUTD/containerd-$1.log.gz" 2>/dev/null
}

BINDS=()
for _d in /usr/* /opt/torch; do
  [[ $_d == /usr/local || -L $_d || ! -d $_d ]] || BINDS+=(--mount "type=bind,src=$_d,dst=$_d,options=bind:ro")
done
