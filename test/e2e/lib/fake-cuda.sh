# shellcheck shell=bash
# Why: the fake-driver e2e tests (runc) all stage the same thing: the fixtures checked, a temp dir
# with the fake driver's state dir (cuda/), a copy of fake_cuda_app to bind in (bin/) and a regular
# file standing for the device (fakegpu0). Source after lib/shim-env.sh, then call nv_fake_cuda.
# Sets FIX (the fixtures dir) and FAKE (removed at exit); exports NVPROXY_FAKE_CUDA_DIR, which the
# fake libcuda and NVML read wherever they are loaded (the shim's nvproxy-cuda-helper). Also sets
# NV_FAKE_CHECKPOINT (the shim's checkpoint: keys for the fake driver, for NV_SHIM_EXTRA) and
# NV_FAKE_MOUNTS (ctr run's mounts: the device at /dev/fakegpu0, the state dir at /fakecuda, the app
# in /fake).
# nv_fake_cuda DIR: the same driver as another process of the test made in DIR (a second node on
# this machine: the same GPU), left for that process to remove.
nv_fake_cuda() {
  FIX=${NVPROXY_FIXTURES_DIR:?NVPROXY_FIXTURES_DIR (build/test/fixtures) is not set}
  [[ -x $FIX/fake_cuda_app && -f $FIX/libcuda.so && -f $FIX/libnvidia-ml.so ]] || nv_fail "fixtures missing in $FIX"
  if [[ -n ${1:-} ]]; then
    FAKE=$1
  else
    FAKE=$(mktemp -d /tmp/nvproxy-fakecuda.XXXXXX)
    nv_defer rm -rf "$FAKE"
  fi
  mkdir -p "$FAKE/cuda" "$FAKE/bin"
  touch "$FAKE/fakegpu0"
  cp "$FIX/fake_cuda_app" "$FAKE/bin/"
  export NVPROXY_FAKE_CUDA_DIR=$FAKE/cuda
  NV_FAKE_CHECKPOINT="checkpoint:
  libcuda: $FIX/libcuda.so
  libnvml: $FIX/libnvidia-ml.so
  lock_timeout_ms: 5000
  device_globs: [\"/dev/nvidia*\", \"/dev/fakegpu*\"]"
  NV_FAKE_MOUNTS=(--mount "type=bind,src=$FAKE/fakegpu0,dst=/dev/fakegpu0,options=rbind:rw"
    --mount "type=bind,src=$FAKE/cuda,dst=/fakecuda,options=rbind:rw"
    --mount "type=bind,src=$FAKE/bin,dst=/fake,options=rbind:ro")
}

# The same for a gVisor sandbox (runsc), where the fake driver must be found inside: its libraries
# at their real names (versioned file, soname link) in FAKE/lib, a CDI spec in FAKE/cdi binding them
# and the device in, the state dir writable by the sandbox's user. Sets L (where the libraries land
# in the container) and NV_FAKE_SANDBOX_CONFIG (the shim's gpu and checkpoint keys for it). Nothing
# is exported: in the sandbox the app and the agent take the state dir from the container's env.
# nv_fake_cuda_sandbox DIR: the sandbox driver another process of the test made in DIR (a second
# node on this machine: the same GPU), left for that process to remove; only the config is set.
nv_fake_cuda_sandbox() {
  if [[ -n ${1:-} ]]; then
    FAKE=$1
    _nv_fake_sandbox_config
    return 0
  fi
  nv_fake_cuda
  unset NVPROXY_FAKE_CUDA_DIR
  [[ -x ${NVPROXY_SHIM_DIR:-}/nvproxy-sandbox-agent ]] || nv_fail "nvproxy-sandbox-agent missing beside the shim in ${NVPROXY_SHIM_DIR:-}"
  mkdir -p "$FAKE/lib" "$FAKE/cdi"
  chmod 777 "$FAKE/cuda"
  cp "$FIX/libcuda.so" "$FAKE/lib/libcuda.so.999.1" && ln -s libcuda.so.999.1 "$FAKE/lib/libcuda.so.1"
  cp "$FIX/libnvidia-ml.so" "$FAKE/lib/libnvidia-ml.so.999.1" && ln -s libnvidia-ml.so.999.1 "$FAKE/lib/libnvidia-ml.so.1"
  L=/usr/lib/x86_64-linux-gnu
  cat >"$FAKE/cdi/fake-gpu.yaml" <<YAML
cdiVersion: "0.6.0"
kind: nvidia.com/gpu
devices:
  - name: "0"
    containerEdits:
      mounts:
        - {hostPath: $FAKE/fakegpu0, containerPath: /dev/fakegpu0, options: [rw, bind]}
containerEdits:
  mounts:
    - {hostPath: $FAKE/lib/libcuda.so.1, containerPath: $L/libcuda.so.1, options: [ro, nosuid, nodev, bind]}
    - {hostPath: $FAKE/lib/libnvidia-ml.so.1, containerPath: $L/libnvidia-ml.so.1, options: [ro, nosuid, nodev, bind]}
YAML
  _nv_fake_sandbox_config
}

_nv_fake_sandbox_config() {
  NV_FAKE_SANDBOX_CONFIG="gpu:
  mode: cdi
  cdi_spec_dirs: [$FAKE/cdi]
  nvproxy: \"off\"
checkpoint:
  lock_timeout_ms: 5000
  device_globs: [\"/dev/nvidia*\", \"/dev/fakegpu*\"]"
}

# The fake driver's view of a container pid (what the fake app writes under $FAKE/cuda): its work
# counter, whether the counter passed N, its CUDA state, and the pids of every CUDA process.
nv_fake_counter() { cat "$FAKE/cuda/$1.counter" 2>/dev/null || echo 0; }
nv_fake_counted_past() { (($(nv_fake_counter "$1") > $2)); }
nv_fake_state() { cat "$FAKE/cuda/$1.state"; }
# nv_fake_as_checkpointed PID...: the fake driver's state as the image holds it (CUDA checkpointed,
# the device closed), before a restore brings the processes back in it.
nv_fake_as_checkpointed() {
  local c
  for c in "$@"; do
    printf checkpointed >"$FAKE/cuda/$c.state"
    touch "$FAKE/cuda/$c.closed"
  done
}
# nv_fake_resumed WHAT PID...: after a restore, the fake driver's log ($FAKE/cuda/calls.log, emptied
# before it) shows one successful CUDA restore and unlock per PID, each PID's CUDA state is running
# and its work goes on. WHAT prefixes each assertion.
nv_fake_resumed() {
  local what=$1 c log=$FAKE/cuda/calls.log
  shift
  nv_assert_eq "$#" "$(awk '$2=="restore" && $5==0' "$log" | wc -l)" "$what: CUDA restores after the runtime restore"
  nv_assert_eq "$#" "$(awk '$2=="unlock" && $5==0' "$log" | wc -l)" "$what: CUDA unlocks after the runtime restore"
  for c in "$@"; do
    nv_assert_eq running "$(nv_fake_state "$c")" "$what: CUDA state of $c after the restore"
    nv_fake_advancing "$c" || nv_fail "$what: process $c does not work after the restore"
  done
}
# nv_fake_locked_then_checkpointed LOG N: the fake driver's call log holds N successful locks and N
# successful checkpoints, and every lock ended before the first checkpoint began (lock all, then
# checkpoint all).
nv_fake_locked_then_checkpointed() {
  local log=$1 n=$2 last_lock_end first_ckpt_start
  nv_assert_eq "$n" "$(awk '$2=="lock" && $5==0' "$log" | wc -l)" "successful locks"
  nv_assert_eq "$n" "$(awk '$2=="checkpoint" && $5==0' "$log" | wc -l)" "successful checkpoints"
  last_lock_end=$(awk '$2=="lock"{print $4}' "$log" | sort -n | tail -1)
  first_ckpt_start=$(awk '$2=="checkpoint"{print $3}' "$log" | sort -n | head -1)
  ((last_lock_end <= first_ckpt_start)) || nv_fail "a checkpoint started before all locks ended"
}
nv_fake_cuda_pids() { find "$FAKE/cuda" -maxdepth 1 -name '*.cuda' -printf '%f\n' | sed 's/\.cuda$//' | sort -n; }
# Whether pid $1's work goes on: waits (up to ${2:-5} s) for its counter to pass its value now,
# rather than sleeping and then looking once.
nv_fake_advancing() {
  local a
  a=$(nv_fake_counter "$1")
  nv_wait_for -t "${2:-5}" nv_fake_counted_past "$1" "$a"
}
