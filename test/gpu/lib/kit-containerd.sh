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
source "$(dirname "${BASH_SOURCE[0]}")/containerd.sh"

kit_install() {
  mkdir -p /opt/kit/bin && tar -C /opt/kit -xJf "$PACK/kit/kit.tar.xz"
  printf '#!/bin/sh\nLD_LIBRARY_PATH=/opt/kit/root/usr/lib/x86_64-linux-gnu exec /opt/kit/root/usr/sbin/criu.real "$@"\n' >/opt/kit/bin/criu
  mv /opt/kit/root/usr/sbin/criu /opt/kit/root/usr/sbin/criu.real 2>/dev/null
  chmod +x /opt/kit/bin/criu
  export PATH=$PACK/bin:$CTDDIR:$PATH:/usr/local/nvidia/bin
}

kit_start() {  # W CFG
  W_KIT=$1
  ctd_start "$1" "$2" "$PACK/gpu-image.tar" native
}

# kit_shim_config FILE RUNTIME [LINE...]: the shim's config of the GPU runs: RUNTIME (the runtime:
# value, a YAML flow map), debug log, the host's driver root, libcuda and NVML where this machine has
# them, containerd's root (CONTENT_ROOT, else $W/root), then each LINE (a "key: value" of checkpoint:; empty ones skipped).
kit_shim_config() {
  local file=$1 rt=$2 l
  shift 2
  {
    printf 'runtime: %s\nlog_level: debug\ngpu: {driver_root: /}\ncheckpoint:\n' "$rt"
    printf '  libcuda: /usr/local/nvidia/lib64/libcuda.so.1\n  libnvml: /usr/local/nvidia/lib64/libnvidia-ml.so.1\n'
    printf '  content_store: %s\n' "${CONTENT_ROOT:-$W/root}"
    for l in "$@"; do [[ -n $l ]] && printf '  %s\n' "$l"; done
  } >"$file"
}

CTR() { timeout "${TMO:-240}" "$CTDDIR/ctr" -a "$SOCK" -n gpu "$@"; }

kit_teardown() {  # NAME
  local t
  ctd_kill_tasks
  kill "$CTDPID" 2>/dev/null
  sleep 1
  gzip -c "$W_KIT/containerd.log" >"$OUTD/containerd-$1.log.gz" 2>/dev/null
}

BINDS=()
for _d in /usr/* /opt/torch; do
  [[ $_d == /usr/local || -L $_d || ! -d $_d ]] || BINDS+=(--mount "type=bind,src=$_d,dst=$_d,options=bind:ro")
done
