# shellcheck shell=bash
# A node of the GPU runs' two-node flows (issues 48 and 59): a private containerd 2.4 with CRI, the
# shim as the RuntimeClass handler `nvproxy`, driven with crictl. Sourced from the repo root on the
# GPU machine, or on the CPU VM for a dry run.
#   cri_node_install CARRY   containerd 2.4 and crictl from CARRY (the shared deps' tarballs, as
#                            test/gpu/pack-cri.sh and pack-pod-runsc.sh carry them) unpacked under
#                            $W/cri; sets CTD24 (containerd's bin dir) and CRICTL
#   cri_node NAME SHIM_YAML TAR...   containerd under $W/NAME (root, state, socket, log) with CRI:
#                            the handler nvproxy (runtime type io.containerd.nvproxy.v1, ConfigPath
#                            SHIM_YAML, the pod's restore.nvproxy.io/* annotations passed into the
#                            sandbox's spec), the sandbox image $PAUSE pinned, the native snapshotter,
#                            every TAR imported into k8s.io; containerd's PATH starts with $NODE_PATH
#                            (the shim's dir; the criu that CRI's checkpoint asks for). Sets SOCK, CTDPID
#   CRI ARGS...              crictl against $SOCK under a deadline (TMO, default 300 s)
#   cri_stop_node NAME       every pod removed (STOP_TMO s at most, default 60), containerd ended
#                            (waited for), the shims it left (a pod CRI could not remove) killed, its
#                            log kept as $OUTD/containerd-NAME.log.gz
# Needs W, OUTD, PAUSE, NODE_PATH; log (lib/report.sh), nv_wait_for and nv_pids_with_arg
# (test/e2e/lib/harness.sh).

cri_node_install() {
  local carry=$1
  mkdir -p "$W/cri"
  tar -C "$W/cri" -xJf "$(ls "$carry"/containerd-2.4*.tar.xz | head -1)" &&
    tar -C "$W/cri" -xJf "$(ls "$carry"/crictl-*.tar.xz | head -1)" || return 1
  CTD24=$(dirname "$(find "$W/cri" -name containerd -type f | head -1)")
  CRICTL=$(find "$W/cri" -name crictl -type f | head -1)
}

CRI() { timeout "${TMO:-300}" "$CRICTL" --config /dev/null -r "unix://$SOCK" -i "unix://$SOCK" --timeout "$((${TMO:-300} - 10))s" "$@"; }
_cri_up() { CRI version >/dev/null 2>&1; }
_cri_images() { (($(CRI images -q 2>/dev/null | wc -l) >= $1)); }
_cri_gone() { ! kill -0 "$1" 2>/dev/null; }

cri_node() {
  local name=$1 d=$W/$1 cfg=$2 t
  shift 2
  mkdir -p "$d"
  SOCK=$d/containerd.sock
  cat >"$d/config.toml" <<EOT
version = 3
root = "$d/root"
state = "$d/state"
disabled_plugins = ["io.containerd.nri.v1.nri"]
[grpc]
  address = "$SOCK"
[ttrpc]
  address = "$SOCK.ttrpc"
[plugins."io.containerd.cri.v1.images"]
  snapshotter = "native"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = "$PAUSE"
# runc cannot lower a sandbox's oom_score_adj below the shell's on these machines (measured).
[plugins."io.containerd.cri.v1.runtime"]
  restrict_oom_score_adj = true
[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.nvproxy]
  runtime_type = "io.containerd.nvproxy.v1"
  pod_annotations = ["restore.nvproxy.io/*"]
  [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.nvproxy.options]
    ConfigPath = "$cfg"
EOT
  PATH=$NODE_PATH:$CTD24:$PATH setsid "$CTD24/containerd" --config "$d/config.toml" </dev/null >"$d/containerd.log" 2>&1 &
  CTDPID=$!
  nv_wait_for -t 30 _cri_up || { log "node $name: CRI does not answer: $(tail -3 "$d/containerd.log")"; return 1; }
  for t in "$@"; do
    timeout 120 "$CTD24/ctr" -a "$SOCK" -n k8s.io images import --local --snapshotter native "$t" >/dev/null || return 1
  done
  nv_wait_for -t 30 _cri_images "$#" || { log "node $name: CRI lists $(CRI images -q | wc -l) of $# images"; return 1; }
  log "node $name: containerd $("$CTD24/containerd" --version | awk '{print $3}') with CRI on $SOCK"
}

cri_stop_node() {
  local p
  TMO=${STOP_TMO:-60} CRI rmp -fa >/dev/null 2>&1
  kill "$CTDPID" 2>/dev/null
  nv_wait_for -t 20 _cri_gone "$CTDPID" || kill -9 "$CTDPID" 2>/dev/null
  # A shim is started with its containerd's socket as an argument.
  for p in $(nv_pids_with_arg "$W/$1/containerd.sock"); do
    log "node $1: shim $p of a pod CRI did not remove, killed"
    kill -9 "$p" 2>/dev/null
  done
  gzip -c "$W/$1/containerd.log" >"$OUTD/containerd-$1.log.gz" 2>/dev/null
}
