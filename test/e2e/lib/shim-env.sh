# shellcheck shell=bash
# Shared set-up for e2e tests of our shim: picks the backing runtime (NV_RUNTIME=runc|crun|runsc)
# and writes the shim config that containerd's shims inherit through NVPROXY_SHIM_CONFIG.
#   NV_RUNTIME       runc (default), crun or runsc
#   NV_RUNSC         current: runsc from the shared deps instead of Debian's (NV_RUNSC_BIN: a given one)
#   NV_SHIM_EXTRA    extra YAML appended to the config (e.g. a checkpoint: section)
#   NV_RUNTIME_EXTRA extra YAML lines of the runtime: section (e.g. "  criu_path: /x/criu")
#   NV_RUNC_BIN      the runc to run (default: runc in PATH)
#   NV_CRUN          criu: the crun built with CRIU (scripts/build-crun.sh; Debian 12's has no
#                    checkpoint) instead of Debian's
source "$(dirname "${BASH_SOURCE[0]}")/harness.sh"

NV_RUNTIME=${NV_RUNTIME:-runc}
NV_RT=io.containerd.nvproxy.v1

# nv_shim_config_write FILE: the config for $NV_RUNTIME.
nv_shim_config_write() {
  local bin root extra=""
  case $NV_RUNTIME in
    runc)
      bin=${NV_RUNC_BIN:-$(command -v runc)}
      [[ -x $bin ]] || nv_skip "runc $bin not on this machine (scripts/fetch-shared-deps.sh)"
      ;;
    crun)
      bin=$(command -v crun)
      if [[ ${NV_CRUN:-} == criu ]]; then
        bin=/usr/local/lib/nvproxy-crun/crun
        [[ -x $bin ]] || nv_skip "no crun with CRIU at $bin (scripts/build-crun.sh)"
      fi
      ;;
    runsc)
      [[ -r /opt/nvproxy-deps/trixie/env.sh ]] && source /opt/nvproxy-deps/trixie/env.sh
      # NV_RUNSC=current: the current runsc from the shared deps (skipped when not unpacked).
      if [[ ${NV_RUNSC:-} == current && -z ${NV_RUNSC_BIN:-} ]]; then
        # shellcheck disable=SC1090
        [[ -r $NV_SHARED_ENV ]] && source "$NV_SHARED_ENV"
        NV_RUNSC_BIN=${NVPROXY_SHARED_RUNSC_BIN_DIR:-}/runsc
        [[ -x $NV_RUNSC_BIN ]] || nv_skip "current runsc not unpacked (scripts/fetch-shared-deps.sh)"
      fi
      # NV_RUNSC_BIN: a given runsc (the current one from the shared deps), else Debian's.
      bin=${NV_RUNSC_BIN:-${NVPROXY_RUNSC:-}}
      [[ -x $bin ]] || nv_fail "runsc not found (run scripts/install-deps.sh)"
      # gVisor bug 10704: kernels >= 6.11 need --network=none with runsc 2024-07-29.
      # NV_RUNSC_CGROUPS=1: runsc applies the container's cgroup (memory limits), as in production.
      extra='  extra_args: ["--network=none", "--ignore-cgroups"]'
      [[ -n ${NV_RUNSC_CGROUPS:-} ]] && extra='  extra_args: ["--network=none"]'
      ;;
    *) nv_fail "unknown NV_RUNTIME=$NV_RUNTIME" ;;
  esac
  [[ -n $bin ]] || nv_fail "$NV_RUNTIME not installed"
  root=/run/containerd/nvproxy-$NV_RUNTIME
  {
    echo "runtime:"
    echo "  binary: $bin"
    echo "  root: $root"
    if [[ -n $extra ]]; then echo "$extra"; fi
    if [[ -n ${NV_RUNTIME_EXTRA:-} ]]; then echo "$NV_RUNTIME_EXTRA"; fi
    echo "log_level: debug"
    if [[ -n ${NV_SHIM_EXTRA:-} ]]; then echo "$NV_SHIM_EXTRA"; fi
  } >"$1"
}

# nv_sweep_config_root FILE: the harness's teardown sweeps the runtime root FILE names (for this
# test's namespaces) with the runtime FILE names.
nv_sweep_config_root() {
  local bin root
  bin=$(awk '$1=="binary:"{print $2; exit}' "$1")
  root=$(awk '$1=="root:"{print $2; exit}' "$1")
  [[ -n $bin && -n $root ]] || nv_fail "no runtime binary or root in $1"
  nv_sweep_root "$bin" "$root"
}

# nv_start_with_shim [--containerd 1.6|1.7]: config + private containerd with our shim on PATH.
nv_start_with_shim() {
  [[ -n ${NVPROXY_SHIM_DIR:-} ]] || nv_fail "NVPROXY_SHIM_DIR is not set (ctest sets it)"
  local cfg
  cfg=$(mktemp /tmp/nvproxy-shim-config.XXXXXX.yaml)
  nv_defer rm -f "$cfg"
  nv_shim_config_write "$cfg"
  export NVPROXY_SHIM_CONFIG=$cfg
  nv_sweep_config_root "$cfg"
  nv_harness_start "$@"
}

# Processes of our shim started by this test's containerd.
nv_shim_pids() { pgrep -f "containerd-shim-nvproxy-v1 .*-address $NV_SOCK" || true; }
# nv_cuda_helper_pids: this test's nvproxy-cuda-helper processes (children of its shims; other
# tests running beside it have their own), as "PID ARGS" lines.
nv_cuda_helper_pids() {
  local shim
  for shim in $(nv_shim_pids); do pgrep -a -P "$shim" -f "^[^ ]*nvproxy-cuda-helper( |$)" || true; done
}

# nv_containerd_restart: stops containerd (not the shims) and starts it again on the same state.
nv_containerd_restart() {
  kill -TERM "$NV_CONTAINERD_PID"
  local i
  for i in $(seq 50); do kill -0 "$NV_CONTAINERD_PID" 2>/dev/null || break; sleep 0.1; done
  mv "$NV_DIR/containerd.log" "$NV_DIR/containerd.log.1"
  _nv_start_daemon
}

# nv_task_status ID: RUNNING, STOPPED, PAUSED ... or empty when containerd has no such task.
# nv_set_checkpoint_key KEY VALUE / nv_unset_checkpoint_key KEY: one key of the shim's checkpoint:
# section, for the containers created next (the shim reads its configuration at each create).
nv_set_checkpoint_key() {
  sed -i "/^  $1: /d" "$NVPROXY_SHIM_CONFIG" && sed -i "s|^checkpoint:\$|checkpoint:\n  $1: $2|" "$NVPROXY_SHIM_CONFIG"
}
nv_unset_checkpoint_key() { sed -i "/^  $1: /d" "$NVPROXY_SHIM_CONFIG"; }
nv_task_status() { nv_ctr task ls 2>/dev/null | awk -v id="$1" '$1==id{print $3}'; }
nv_task_stopped() { [[ $(nv_task_status "$1") == STOPPED ]]; }
# nv_stop_rm ID: kills the task, waits (20 s at most) until it has stopped, removes it and its container.
nv_stop_rm() {
  nv_ctr task kill -s KILL "$1"
  nv_wait_for -t 20 nv_task_stopped "$1" || nv_fail "$1 did not stop"
  nv_ctr task rm "$1" >/dev/null
  nv_ctr c rm "$1"
}
# The count of a container's shell loop that writes /tmp/counter (replaced by a rename, never
# empty), read through exec; 0 while unreadable.
nv_counter() { nv_ctr task exec --exec-id "c$RANDOM" "$1" cat /tmp/counter 2>/dev/null || echo 0; }
nv_counter_above() { (($(nv_counter "$1") > $2)); }
# nv_runtime_root ID: the --root the shim gives container ID (shim/task/runsc_root.h): the config's
# root per namespace, and under runsc a root per sandbox below it (ctr's containers: their own id).
nv_runtime_root() {
  local root
  root=$(awk '$1=="root:"{print $2; exit}' "$NVPROXY_SHIM_CONFIG")/$NV_NAMESPACE
  if [[ $NV_RUNTIME == runsc ]]; then echo "$root/$1"; else echo "$root"; fi
}
nv_bundle() { echo "$NV_STATE_DIR/io.containerd.runtime.v2.task/$NV_NAMESPACE/$1"; }
# The init's host pid of a running task, and a host pid's pid in its container (the fake driver
# names its files by the latter).
nv_task_pid() { nv_ctr task ls 2>/dev/null | awk -v id="$1" '$1==id{print $2}'; }
nv_container_pid() { awk '/^NSpid:/{print $NF}' "/proc/$1/status"; }
