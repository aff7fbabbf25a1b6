# shellcheck shell=bash
# Why: every e2e test needs a containerd of its own, isolated from the system's and from other
# tests, with our shim on its PATH and a test image inside. Source this from a `set -euo pipefail`
# test script, then call `nv_harness_start [--containerd 1.6|1.7|2|2.3|2.4] [--cri FN]`; an EXIT trap tears
# it all down (tasks, containerd, stray shims of this containerd, mounts, cgroups, the temp dir).
#   --cri FN           keep the CRI plugin on (config version 3 on containerd 2.x, drop-ins imported from
#                      $NV_DIR/conf.d) and append what FN prints to the config (lib/cri.sh)
#   NVPROXY_SHIM_DIR   dir holding containerd-shim-nvproxy-v1 (prepended to containerd's PATH)
#   NV_KEEP=1          keep the temp dir after the test;  NV_SNAPSHOTTER=native  force a snapshotter
# API: nv_harness_start, nv_ctr ARGS..., nv_defer CMD..., nv_fail MSG, nv_assert_eq EXP ACT MSG,
#      nv_assert_contains HAYSTACK NEEDLE MSG, nv_wait_for [-t SECS] CMD..., nv_log MSG,
#      nv_sweep_root BINARY ROOT (teardown also sweeps ROOT/NS), nv_pids_with_arg ARG,
#      nv_run_deferred, nv_close_inherited_fds
# Exported: NV_REPO_DIR (repo root);  after start: NV_IMAGE NV_DIR NV_SOCK NV_NAMESPACE NV_CTR NV_CONTAINERD_BIN
#                       NV_CONTAINERD_VERSION NV_SNAPSHOTTER NV_STATE_DIR

[[ -n ${_NV_HARNESS_LOADED:-} ]] && return 0
_NV_HARNESS_LOADED=1

NV_LIB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export NV_REPO_DIR
NV_REPO_DIR=$(cd "$NV_LIB_DIR/../../.." && pwd)
export NV_IMAGE=${NV_IMAGE:-docker.io/library/busybox:nvproxy-test}
NV_IMAGE_TAR=${NV_IMAGE_TAR:-/var/tmp/nvproxy-test-image.tar}
NV_TRIXIE_ENV=${NV_TRIXIE_ENV:-/opt/nvproxy-deps/trixie/env.sh}
NV_CONTAINERD2_ENV=${NV_CONTAINERD2_ENV:-/opt/nvproxy-deps/containerd2/env.sh}
NV_SHARED_ENV=${NV_SHARED_ENV:-/opt/nvproxy-deps/shared/env.sh}  # scripts/fetch-shared-deps.sh
NV_SKIP_CODE=77  # CTest's SKIP_RETURN_CODE for the e2e tests
NV_WAIT_TIMEOUT=${NV_WAIT_TIMEOUT:-30}
NV_SHIM_NAME=containerd-shim-nvproxy-v1
NV_DIR="" NV_STATE_DIR="" NV_SOCK="" NV_NAMESPACE="" NV_CTR="" NV_CONTAINERD_PID="" _NV_CRI_FN=""
_NV_DEFERRED=()

# ---------- assertions and small helpers ----------

nv_log() { echo "[nv $(date +%T)] $*" >&2; }

nv_fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# Ends the test as skipped (CTest reports it so): a component it needs is not on this machine.
nv_skip() {
  echo "SKIP: $*" >&2
  exit "$NV_SKIP_CODE"
}

nv_assert_eq() {
  [[ $1 == "$2" ]] || nv_fail "${3:-values differ}: expected [$1], got [$2]"
}

nv_assert_contains() {
  [[ $1 == *"$2"* ]] || nv_fail "${3:-text not found}: [$2] not in [$1]"
}

# nv_wait_for [-t SECS] CMD...: polls CMD every 0.2 s until it succeeds; returns 1 on timeout.
nv_wait_for() {
  local timeout=$NV_WAIT_TIMEOUT
  if [[ ${1:-} == -t ]]; then timeout=$2; shift 2; fi
  local deadline=$(($(date +%s%N) / 1000000 + timeout * 1000))
  until "$@"; do
    if (($(date +%s%N) / 1000000 >= deadline)); then
      echo "nv_wait_for: timed out after ${timeout}s: $*" >&2
      return 1
    fi
    sleep 0.2
  done
}

# nv_ctr ARGS...: ctr (of the running daemon's version) against the private socket and namespace.
nv_ctr() {
  [[ -n $NV_SOCK ]] || nv_fail "nv_ctr: call nv_harness_start first"
  "$NV_CTR" -a "$NV_SOCK" -n "$NV_NAMESPACE" "$@"
}

# nv_defer CMD...: runs CMD at exit, before the harness's own teardown (last deferred runs first).
nv_defer() { _NV_DEFERRED+=("$(printf '%q ' "$@")"); }
# Runs what nv_defer registered, the last first. The teardown does; a test that starts no
# containerd makes `set +e; nv_run_deferred` its EXIT trap.
nv_run_deferred() {
  local i
  for ((i = ${#_NV_DEFERRED[@]} - 1; i >= 0; i--)); do eval "${_NV_DEFERRED[i]}"; done
}
# Closes every fd above 2 of the calling (sub)shell, for a process CRIU will dump and restore: a
# file it inherited from the caller (CTest's log) changes size before the restore, and CRIU refuses
# to restore a file whose size changed. Use: (nv_close_inherited_fds; exec CMD...) </dev/null ... &
nv_close_inherited_fds() {
  local f fd
  for f in "/proc/$BASHPID/fd/"*; do
    fd=${f##*/}
    ((fd > 2)) && eval "exec $fd>&-"
  done
  return 0
}

# ---------- start ----------

# nv_harness_start [--containerd 1.6|1.7|2|2.3|2.4]   (2: Debian unstable's 2.1; 2.3, 2.4: the prebuilt ones)
nv_harness_start() {
  local ver=1.6
  while (($#)); do
    case $1 in
      --containerd) ver=${2:?--containerd needs 1.6 or 1.7}; shift 2 ;;
      --containerd=*) ver=${1#*=}; shift ;;
      --cri) _NV_CRI_FN=${2:?--cri needs a function}; shift 2 ;;
      *) nv_fail "nv_harness_start: unknown argument $1" ;;
    esac
  done
  [[ $(id -u) == 0 ]] || nv_fail "the e2e harness needs root"
  [[ -z $NV_DIR ]] || nv_fail "nv_harness_start: already started ($NV_DIR)"
  _nv_pick_binaries "$ver"
  NV_DIR=$(mktemp -d /tmp/nvproxy-e2e.XXXXXX)
  trap _nv_cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  NV_SOCK=$NV_DIR/containerd.sock
  NV_STATE_DIR=$NV_DIR/state
  NV_NAMESPACE=nvtest-$(tr '[:upper:]' '[:lower:]' <<<"${NV_DIR##*.}")
  export NV_DIR NV_SOCK NV_STATE_DIR NV_NAMESPACE NV_CTR NV_CONTAINERD_BIN NV_CONTAINERD_VERSION
  _nv_pick_snapshotter
  _nv_write_config
  _nv_start_daemon
  _nv_import_image
  nv_log "containerd $NV_CONTAINERD_VERSION ready: $NV_SOCK ns=$NV_NAMESPACE snapshotter=$NV_SNAPSHOTTER"
}

_nv_pick_binaries() {
  local bindir
  case $1 in
    1.6)
      bindir=$(dirname "$(command -v containerd || echo /usr/bin/containerd)")
      ;;
    1.7)
      if [[ -z ${NVPROXY_CONTAINERD17_BIN_DIR:-} && -r $NV_TRIXIE_ENV ]]; then
        # shellcheck disable=SC1090
        source "$NV_TRIXIE_ENV"
      fi
      bindir=${NVPROXY_CONTAINERD17_BIN_DIR:-}
      [[ -n $bindir ]] || nv_fail "containerd 1.7 not found: run scripts/fetch-trixie.sh"
      ;;
    2)
      if [[ -z ${NVPROXY_CONTAINERD2_BIN_DIR:-} && -r $NV_CONTAINERD2_ENV ]]; then
        # shellcheck disable=SC1090
        source "$NV_CONTAINERD2_ENV"
      fi
      bindir=${NVPROXY_CONTAINERD2_BIN_DIR:-}
      # Debian unstable's containerd may be out of reach (network) or no longer run on Debian 12:
      # the test is then reported skipped with the reason, not passed.
      [[ -n $bindir ]] || nv_skip "containerd 2 not fetched (scripts/fetch-containerd2.sh failed or was not run)"
      ;;
    2.3)
      if [[ -z ${NVPROXY_CONTAINERD23_BIN_DIR:-} && -r $NV_SHARED_ENV ]]; then
        # shellcheck disable=SC1090
        source "$NV_SHARED_ENV"
      fi
      bindir=${NVPROXY_CONTAINERD23_BIN_DIR:-}
      # Prebuilt tarballs from the deps directory next to the checkout; absent on some machines.
      [[ -n $bindir ]] || nv_skip "containerd 2.3 not unpacked (no deps directory for scripts/fetch-shared-deps.sh, or it was not run)"
      ;;
    2.4)
      if [[ -z ${NVPROXY_CONTAINERD24_BIN_DIR:-} && -r $NV_SHARED_ENV ]]; then
        # shellcheck disable=SC1090
        source "$NV_SHARED_ENV"
      fi
      bindir=${NVPROXY_CONTAINERD24_BIN_DIR:-}
      [[ -n $bindir ]] || nv_skip "containerd 2.4 not unpacked (no deps directory for scripts/fetch-shared-deps.sh, or it was not run)"
      ;;
    *) nv_fail "nv_harness_start: --containerd must be 1.6, 1.7, 2, 2.3 or 2.4, not $1" ;;
  esac
  NV_CONTAINERD_BIN=$bindir/containerd
  NV_CTR=$bindir/ctr
  [[ -x $NV_CONTAINERD_BIN && -x $NV_CTR ]] || nv_fail "no containerd/ctr in $bindir"
  NV_CONTAINERD_VERSION=$("$NV_CONTAINERD_BIN" --version | awk '{print $3}')
  NV_CONTAINERD_VERSION=${NV_CONTAINERD_VERSION#v}  # upstream builds print v2.3.4, Debian's 2.1.9
  [[ $NV_CONTAINERD_VERSION == "$1".* ]] \
    || nv_fail "$NV_CONTAINERD_BIN is $NV_CONTAINERD_VERSION, wanted $1"
  _NV_DAEMON_PATH=$bindir:$PATH
  if [[ -n ${NVPROXY_SHIM_DIR:-} ]]; then
    [[ -x $NVPROXY_SHIM_DIR/$NV_SHIM_NAME ]] || nv_fail "no $NV_SHIM_NAME in NVPROXY_SHIM_DIR=$NVPROXY_SHIM_DIR"
    _NV_DAEMON_PATH=$NVPROXY_SHIM_DIR:$_NV_DAEMON_PATH
  fi
}

# overlayfs when an overlay mount works in the temp dir, native otherwise (or $NV_SNAPSHOTTER).
_nv_pick_snapshotter() {
  if [[ -z ${NV_SNAPSHOTTER:-} ]]; then
    local p=$NV_DIR/overlay-probe
    mkdir -p "$p"/{l,u,w,m}
    if mount -t overlay overlay -o "lowerdir=$p/l,upperdir=$p/u,workdir=$p/w" "$p/m" 2>/dev/null; then
      umount "$p/m"
      NV_SNAPSHOTTER=overlayfs
    else
      NV_SNAPSHOTTER=native
    fi
    rm -rf "$p"
  fi
  export NV_SNAPSHOTTER CONTAINERD_SNAPSHOTTER=$NV_SNAPSHOTTER
}

_nv_write_config() {
  local version=2 cri='"io.containerd.grpc.v1.cri", ' imports=""
  if [[ -n $_NV_CRI_FN ]]; then
    cri=""
    [[ $NV_CONTAINERD_VERSION == 1.* ]] || version=3
    mkdir -p "$NV_DIR/conf.d"
    imports="imports = [\"$NV_DIR/conf.d/*.toml\"]"
  fi
  cat >"$NV_DIR/config.toml" <<EOF
# private containerd for one e2e test (test/e2e/lib/harness.sh)
version = $version
$imports
root = "$NV_DIR/root"
state = "$NV_STATE_DIR"
disabled_plugins = [${cri}"io.containerd.nri.v1.nri"]

[grpc]
  address = "$NV_SOCK"

[ttrpc]
  address = "$NV_SOCK.ttrpc"

[debug]
  level = "${NV_CONTAINERD_LOG_LEVEL:-info}"

[plugins."io.containerd.internal.v1.opt"]
  path = "$NV_DIR/opt"
EOF
  if [[ -n $_NV_CRI_FN ]]; then "$_NV_CRI_FN" >>"$NV_DIR/config.toml" || nv_fail "$_NV_CRI_FN failed"; fi
}

_nv_daemon_ready() {
  kill -0 "$NV_CONTAINERD_PID" 2>/dev/null || {
    tail -n 20 "$NV_DIR/containerd.log" >&2
    nv_fail "containerd exited during start (log above)"
  }
  nv_ctr version >/dev/null 2>&1
}

_nv_start_daemon() {
  PATH=$_NV_DAEMON_PATH setsid "$NV_CONTAINERD_BIN" --config "$NV_DIR/config.toml" \
    </dev/null >"$NV_DIR/containerd.log" 2>&1 &
  NV_CONTAINERD_PID=$!
  nv_wait_for -t 30 _nv_daemon_ready || nv_fail "containerd did not answer on $NV_SOCK"
}

# Builds the image tarball once (cached; rebuilt when make-image.sh changes or the ref differs).
_nv_image_fresh() {
  [[ -s $NV_IMAGE_TAR && $NV_IMAGE_TAR -nt $NV_LIB_DIR/make-image.sh ]] || return 1
  local name
  name=$(tar -xOf "$NV_IMAGE_TAR" index.json 2>/dev/null \
    | jq -r '.manifests[0].annotations["io.containerd.image.name"] // empty' 2>/dev/null)
  [[ $name == "$NV_IMAGE" ]]
}

_nv_ensure_image() {
  _nv_image_fresh && return 0
  (
    flock 9
    _nv_image_fresh || "$NV_LIB_DIR/make-image.sh" "$NV_IMAGE_TAR" "$NV_IMAGE" >&2
  ) 9>"$NV_IMAGE_TAR.lock"
}

_nv_import_image() {
  _nv_ensure_image || nv_fail "could not build $NV_IMAGE_TAR"
  local local_flag=()
  [[ $NV_CONTAINERD_VERSION == 1.6.* ]] || local_flag=(--local)
  nv_ctr images import "${local_flag[@]}" --snapshotter "$NV_SNAPSHOTTER" "$NV_IMAGE_TAR" >/dev/null \
    || nv_fail "ctr images import $NV_IMAGE_TAR failed"
  nv_ctr images ls -q | grep -qxF "$NV_IMAGE" || nv_fail "image $NV_IMAGE missing after import"
}

# ---------- teardown ----------

_nv_cleanup() {
  local rc=$?
  set +eu
  trap - EXIT INT TERM
  nv_run_deferred
  local namespaces=("$NV_NAMESPACE")
  if [[ -n $NV_CONTAINERD_PID ]] && kill -0 "$NV_CONTAINERD_PID" 2>/dev/null; then
    mapfile -t namespaces < <(_nv_ctr_t 5 "$NV_NAMESPACE" namespaces ls -q; echo "$NV_NAMESPACE")
    mapfile -t namespaces < <(printf '%s\n' "${namespaces[@]}" | sort -u)
    _nv_kill_tasks "${namespaces[@]}"
  fi
  _nv_stop_daemon
  _nv_kill_stray_shims
  _nv_sweep_runc "${namespaces[@]}"
  _nv_remove_shim_sockets
  _nv_unmount_all
  _nv_remove_cgroups "${namespaces[@]}"
  if ((rc != 0)) && [[ -s $NV_DIR/containerd.log ]]; then
    echo "---- last lines of containerd.log ($NV_DIR) ----" >&2
    tail -n 25 "$NV_DIR/containerd.log" >&2
  fi
  if [[ ${NV_KEEP:-0} == 1 ]]; then
    nv_log "kept $NV_DIR"
  elif [[ -n $NV_DIR && -d $NV_DIR ]]; then
    rm -rf --one-file-system "$NV_DIR"
  fi
  exit "$rc"
}

# ctr with a time limit, in namespace NS: _nv_ctr_t SECS NS ARGS...
_nv_ctr_t() {
  local t=$1 ns=$2
  shift 2
  timeout "$t" "$NV_CTR" -a "$NV_SOCK" -n "$ns" "$@" 2>/dev/null
}

_nv_kill_tasks() {
  local ns t tasks
  for ns in "$@"; do
    mapfile -t tasks < <(_nv_ctr_t 5 "$ns" tasks ls -q)
    for t in "${tasks[@]}"; do _nv_ctr_t 5 "$ns" tasks kill -a -s SIGKILL "$t" >/dev/null; done
    for t in "${tasks[@]}"; do
      nv_wait_for -t 5 _nv_task_stopped "$ns" "$t" 2>/dev/null
      _nv_ctr_t 10 "$ns" tasks delete -f "$t" >/dev/null
    done
    mapfile -t tasks < <(_nv_ctr_t 5 "$ns" containers ls -q)
    for t in "${tasks[@]}"; do _nv_ctr_t 10 "$ns" containers delete "$t" >/dev/null; done
  done
}

_nv_task_stopped() {
  ! _nv_ctr_t 5 "$1" tasks ls | awk -v t="$2" '$1 == t && $3 != "STOPPED" {found = 1} END {exit !found}'
}

# SIGTERM, then SIGKILL after 10 s. No timer subshell: one killed while it still ran shell code ran
# the test's EXIT trap in the subshell (the whole cleanup, the test's directories removed under it),
# which made tests that restart containerd mid-run (configure_containerd) fail under load.
_nv_stop_daemon() {
  [[ -n $NV_CONTAINERD_PID ]] || return 0
  kill -TERM "$NV_CONTAINERD_PID" 2>/dev/null
  local i
  for ((i = 0; i < 100; i++)); do
    # gone, or a zombie (exited, not yet reaped by the wait below)
    [[ $(awk '{print $3}' "/proc/$NV_CONTAINERD_PID/stat" 2>/dev/null) =~ ^[^Z]$ ]] || break
    sleep 0.1
  done
  kill -KILL "$NV_CONTAINERD_PID" 2>/dev/null
  wait "$NV_CONTAINERD_PID" 2>/dev/null
  NV_CONTAINERD_PID=""
}

# Pids of shims started by THIS containerd: a containerd-shim-* whose `-address` argument or
# GRPC_ADDRESS / TTRPC_ADDRESS environment names our socket.
_nv_our_shims() {
  local d pid exe
  for d in /proc/[0-9]*; do
    pid=${d#/proc/}
    exe=$(tr '\0' '\n' 2>/dev/null <"$d/cmdline" | head -n1) || continue
    [[ ${exe##*/} == containerd-shim* ]] || continue
    if tr '\0' '\n' 2>/dev/null <"$d/cmdline" | grep -qxF "$NV_SOCK" \
      || tr '\0' '\n' 2>/dev/null <"$d/environ" \
      | grep -qxE "(GRPC_ADDRESS=|TTRPC_ADDRESS=)$(_nv_regex_quote "$NV_SOCK")(\.ttrpc)?"; then
      echo "$pid"
    fi
  done
}

_nv_regex_quote() { sed 's/[][\.*^$+?(){}|/]/\\&/g' <<<"$1"; }

_nv_kill_stray_shims() {
  [[ -n $NV_SOCK ]] || return 0
  local pids pid
  mapfile -t pids < <(_nv_our_shims)
  ((${#pids[@]})) || return 0
  nv_log "killing stray shims of this containerd: ${pids[*]}"
  for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null; done
  sleep 0.2
}

# Runtime roots besides runc's that this test's shim config names (lib/shim-env.sh): BINARY ROOT pairs.
# The shim keeps each namespace's containers in ROOT/NAMESPACE.
_NV_SWEEP_ROOTS=()
nv_sweep_root() { _NV_SWEEP_ROOTS+=("$1" "$2"); }

# Containers that a killed shim (or a failed delete) left behind in runc's per-namespace root and in
# the shim's runtime roots, for this test's namespaces only.
_nv_sweep_runc() {
  local ns i
  for ns in "$@"; do
    [[ $ns == nvtest-* ]] || continue # other names may be the system containerd's
    if command -v runc >/dev/null; then _nv_sweep_root runc "/run/containerd/runc/$ns"; fi
    for ((i = 0; i < ${#_NV_SWEEP_ROOTS[@]}; i += 2)); do
      _nv_sweep_root "${_NV_SWEEP_ROOTS[i]}" "${_NV_SWEEP_ROOTS[i + 1]}/$ns"
    done
  done
}

# _nv_sweep_root BINARY ROOT: `delete --force` of every container in ROOT, then SIGKILL to what still
# names ROOT in its arguments (runsc's sandbox and gofer carry --root=ROOT), then ROOT is removed.
_nv_sweep_root() {
  local bin=$1 root=$2 id pids sub
  [[ -d $root ]] || return 0
  # The shim gives each runsc sandbox a root of its own below the namespace's (shim/task/runsc_root.h).
  for sub in "$root"/*/; do [[ -d $sub ]] && _nv_sweep_root "$bin" "${sub%/}"; done
  while read -r id; do
    [[ -n $id ]] && timeout 30 "$bin" --root "$root" delete --force "$id" >/dev/null 2>&1
  done < <(timeout 10 "$bin" --root "$root" list -q 2>/dev/null)
  mapfile -t pids < <(nv_pids_with_arg "--root=$root")
  if ((${#pids[@]})); then
    nv_log "killing runtime processes left in $root: ${pids[*]}"
    kill -KILL "${pids[@]}" 2>/dev/null
  fi
  # runsc binds a network namespace file there (null-netns).
  findmnt -rn -o TARGET | awk -v p="$root/" 'index($0, p) == 1' | sort -r | while read -r m; do
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null
  done
  rm -rf --one-file-system "$root"
}

# nv_pids_with_arg ARG: pids of processes one of whose arguments is exactly ARG.
nv_pids_with_arg() {
  local d
  for d in /proc/[0-9]*; do
    tr '\0' '\n' 2>/dev/null <"$d/cmdline" | grep -qxF -- "$1" && echo "${d#/proc/}"
  done
  return 0
}

# Shim sockets live under /run/containerd/s whatever the state dir; bundles name them in `address`.
_nv_remove_shim_sockets() {
  local f a
  [[ -d $NV_STATE_DIR ]] || return 0
  while IFS= read -r f; do
    a=$(<"$f")
    a=${a#unix://}
    [[ $a == /run/containerd/s/* && -S $a ]] && rm -f "$a"
  done < <(find "$NV_STATE_DIR" -maxdepth 4 -name address -type f 2>/dev/null)
}

_nv_unmount_all() {
  [[ -n $NV_DIR ]] || return 0
  local m t
  for _ in 1 2 3; do
    mapfile -t m < <(findmnt -rn -o TARGET | awk -v p="$NV_DIR/" 'index($0, p) == 1 {print length, $0}' \
      | sort -rn | cut -d' ' -f2-)
    ((${#m[@]})) || return 0
    for t in "${m[@]}"; do umount "$t" 2>/dev/null || umount -l "$t" 2>/dev/null; done
  done
}

_nv_remove_cgroups() {
  local ns d
  for ns in "$@"; do
    [[ $ns == nvtest-* ]] || continue
    for d in /sys/fs/cgroup/"$ns" /sys/fs/cgroup/*/"$ns"; do
      [[ -d $d ]] && find "$d" -depth -type d -exec rmdir {} + 2>/dev/null
    done
  done
  return 0
}
