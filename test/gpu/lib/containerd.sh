# shellcheck shell=bash
# The GPU runs' private containerd: one way to start it and to end its tasks.
#   ctd_start W CFG TAR [SNAPSHOTTER]  containerd from $CTDDIR with root, state, socket and log under
#       W and the shim's config CFG; the snapshotter is overlayfs where W can hold an overlay mount,
#       else native (or the one given); imports the image tarball TAR. Sets SOCK, SNAP, CTDPID.
#       The caller defines CTR (ctr with a deadline on $SOCK). Fails when the import fails.
#   ctd_kill_tasks                     SIGKILL to every task, then its removal (bounded)

ctd_start() {
  local w=$1 cfg=$2 tar=$3 _
  SOCK=$w/containerd.sock
  SNAP=${4:-}
  if [[ -z $SNAP ]]; then
    SNAP=native
    mkdir -p "$w/ovl"/{l,u,w,m}
    if mount -t overlay overlay -o "lowerdir=$w/ovl/l,upperdir=$w/ovl/u,workdir=$w/ovl/w" "$w/ovl/m" 2>/dev/null; then
      umount "$w/ovl/m"
      SNAP=overlayfs
    fi
  fi
  cat >"$w/config.toml" <<EOT
version = 2
root = "$w/root"
state = "$w/state"
disabled_plugins = ["io.containerd.grpc.v1.cri", "io.containerd.nri.v1.nri"]
[grpc]
  address = "$SOCK"
[ttrpc]
  address = "$SOCK.ttrpc"
[debug]
  level = "info"
EOT
  NVPROXY_SHIM_CONFIG=$cfg setsid "$CTDDIR/containerd" --config "$w/config.toml" </dev/null >"$w/containerd.log" 2>&1 &
  CTDPID=$!  # shellcheck disable=SC2034 # for the caller
  for _ in $(seq 50); do CTR version >/dev/null 2>&1 && break; sleep 0.2; done
  CTR images import --local --snapshotter "$SNAP" "$tar" >/dev/null
}

ctd_kill_tasks() {
  local t
  for t in $(CTR task ls -q 2>/dev/null); do TMO=10 CTR task kill -a -s KILL "$t" >/dev/null 2>&1; done
  sleep 2
  for t in $(CTR task ls -q 2>/dev/null); do TMO=20 CTR task rm -f "$t" >/dev/null 2>&1; done
}
