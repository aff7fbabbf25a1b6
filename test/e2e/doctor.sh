#!/usr/bin/env bash
# Issue 58: `containerd-shim-nvproxy-v1 doctor` on this machine (no GPU):
#   no driver    the GPU checks fail and say so, exit 1
#   fake driver  the fixtures' driver (proc files, libcuda with cuCheckpointProcess*, an nvidia-smi
#                answering for one GPU): no needed check fails, exit 0, and a containerd config
#                wired by `configure containerd` is seen
#   each failable check made to fail once, naming its remedy: CRIU missing (runtime.criu_path, and
#   PATH without it), iptables-restore missing, too little disk at the image store (a 1 MiB tmpfs);
#   a CRIU of the project's earlier build (without its page I/O) warned about
# Every run is timed: doctor answers in seconds.
set -euo pipefail
source "$(dirname "$0")/lib/harness.sh"
trap 'set +e; nv_run_deferred' EXIT
SHIM=${NVPROXY_SHIM_DIR:?NVPROXY_SHIM_DIR is not set (ctest sets it)}/containerd-shim-nvproxy-v1
FIX=${NVPROXY_FIXTURES_DIR:?NVPROXY_FIXTURES_DIR is not set}
[[ -f $FIX/libcuda.so ]] || nv_fail "fixtures missing in $FIX"
command -v criu >/dev/null || nv_skip "no criu (scripts/build-criu.sh)"
command -v iptables-restore >/dev/null || nv_skip "no iptables-restore (scripts/install-deps.sh)"
T=$(mktemp -d /tmp/nvproxy-doctor.XXXXXX)
nv_defer rm -rf "$T"

# doctor ARGS...: its JSON in $T/out.json, its exit code in RC; fails a run that takes over 20 s.
# DOCTOR_PATH: the PATH it runs with.
doctor() {
  local t0=$SECONDS
  set +e
  env PATH="${DOCTOR_PATH:-$PATH}" "$SHIM" doctor --json --containerd-config "$T/containerd.toml" "$@" >"$T/out.json" 2>"$T/err"
  RC=$?
  set -e
  ((SECONDS - t0 <= 20)) || nv_fail "doctor took $((SECONDS - t0)) s"
  jq -e . "$T/out.json" >/dev/null || nv_fail "doctor --json printed no JSON: $(cat "$T/out.json" "$T/err")"
}
check() { jq -r --arg n "$1" '.checks[] | select(.name == $n) | .'"$2" "$T/out.json"; }
expect() { # expect NAME STATUS [REMEDY_PART]
  local got
  got=$(check "$1" status)
  [[ $got == "$2" ]] || nv_fail "check $1: expected $2, got [$got]: $(check "$1" detail)"
  if [[ -n ${3:-} ]]; then nv_assert_contains "$(check "$1" remedy)" "$3" "remedy of $1"; fi
}

# cfg [fake] [RUNTIME_LINES] [CHECKPOINT_LINES]: the shim's config (fake: the fake driver's keys).
cfg() {
  printf 'runtime:\n  binary: %s\n%s' "$(command -v runc)" "${2:-}"
  printf 'checkpoint:\n  content_store: %s\n%s' "$T" "${3:-}"
  if [[ ${1:-} == fake ]]; then printf '  libcuda: %s\ngpu:\n  proc_driver_root: %s\n' "$FIX/libcuda.so" "$F/proc"; fi
}

nv_log "no driver: exit 1, the GPU checks say why"
cfg >"$T/plain.yaml"
: >"$T/containerd.toml"
doctor --config "$T/plain.yaml"
nv_assert_eq 1 "$RC" "doctor's exit code without a driver"
nv_assert_eq false "$(jq -r .ok "$T/out.json")" ".ok"
expect "nvidia driver" fail "install the NVIDIA driver"
expect "gpus" fail
expect "runtime" ok
expect "criu" ok
expect "iptables-restore" ok
expect "containerd CRI runtime" warn "configure containerd"
"$SHIM" doctor --config "$T/plain.yaml" --containerd-config "$T/containerd.toml" >"$T/out.txt" || true
grep -qE '^fail +nvidia driver' "$T/out.txt" || nv_fail "text output: $(cat "$T/out.txt")"
grep -q -- '-> install the NVIDIA driver' "$T/out.txt" || nv_fail "no remedy line: $(cat "$T/out.txt")"

nv_log "fake driver: exit 0"
F=$T/fake
mkdir -p "$F/proc/gpus/0000:3b:00.0" "$F/bin"
printf 'Model: \t\t NVIDIA H200\nGPU UUID: \t GPU-11111111-2222-3333-4444-555555555555\nDevice Minor: \t 0\n' \
  >"$F/proc/gpus/0000:3b:00.0/information"
echo "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.95.05  Release Build" >"$F/proc/version"
printf '#!/bin/sh\necho "GPU-11111111-2222-3333-4444-555555555555, NVIDIA H200, 512"\n' >"$F/bin/nvidia-smi"
chmod +x "$F/bin/nvidia-smi"
cfg fake >"$T/fake.yaml"
PATH=$F/bin:$PATH "$SHIM" configure containerd --config "$T/containerd.toml" --containerd-version 1.6 >/dev/null
DOCTOR_PATH=$F/bin:$PATH doctor --config "$T/fake.yaml"
nv_assert_eq 0 "$RC" "doctor's exit code with the fake driver: $(jq -c '[.checks[] | select(.status == "fail")]' "$T/out.json")"
expect "nvidia driver" ok
expect "libcuda checkpoint API" ok
expect "gpus" ok
nv_assert_contains "$(check gpus detail)" "NVIDIA H200 GPU-11111111-2222-3333-4444-555555555555 512.0 MiB" "the GPU"
expect "containerd CRI runtime" ok
# A runtime entry naming a shim config that is not there: failed, with the remedy, but not a check
# a GPU checkpoint needs (ctr and Docker do not go through CRI): the exit code stays 0.
"$SHIM" configure containerd --config "$T/containerd-missing.toml" --containerd-version 1.6 \
  --shim-config "$T/missing.yaml" >/dev/null
DOCTOR_PATH=$F/bin:$PATH doctor --config "$T/fake.yaml" --containerd-config "$T/containerd-missing.toml"
nv_assert_eq 0 "$RC" "doctor's exit code with a CRI runtime whose shim config is missing"
expect "containerd CRI runtime" fail "create the shim config"

nv_log "CRIU missing: runtime.criu_path"
cfg fake "  criu_path: $T/no/criu
" >"$T/nocriu.yaml"
DOCTOR_PATH=$F/bin:$PATH doctor --config "$T/nocriu.yaml"
nv_assert_eq 1 "$RC" "exit code without CRIU"
expect criu fail "build-criu.sh"

nv_log "CRIU of the project's earlier build: its help without the page I/O options, a warning"
mkdir -p "$T/oldcriu"
printf '#!/bin/sh\n[ "$1" = --help ] || exec %s "$@"\n%s --help | grep -vE -- "--page-(writers|readers)"\n' \
  "$(command -v criu)" "$(command -v criu)" >"$T/oldcriu/criu"
chmod +x "$T/oldcriu/criu"
cfg fake "  criu_path: $T/oldcriu/criu
" >"$T/oldcriu.yaml"
DOCTOR_PATH=$F/bin:$PATH doctor --config "$T/oldcriu.yaml"
expect criu warn "rebuilds it with the page I/O patch"
nv_assert_contains "$(check criu detail)" "without its page I/O" "detail of criu"

nv_log "CRIU and iptables-restore missing from PATH"
mkdir -p "$T/path"
for p in containerd runc ldconfig nvidia-smi; do
  src=$(PATH=$F/bin:$PATH command -v "$p") && ln -s "$src" "$T/path/$p"
done
DOCTOR_PATH=$T/path doctor --config "$T/fake.yaml"
nv_assert_eq 1 "$RC" "exit code without criu and iptables-restore in PATH"
expect criu fail "build-criu.sh"
expect iptables-restore fail "install iptables"
ln -s "$(command -v criu)" "$T/path/criu"
DOCTOR_PATH=$T/path doctor --config "$T/fake.yaml"
expect criu ok
expect iptables-restore fail "install iptables"

nv_log "too little disk at the image store"
mkdir -p "$T/small"
mount -t tmpfs -o size=1m tmpfs "$T/small"
nv_defer umount "$T/small"
cfg fake "" "  image_store: $T/small/images
" >"$T/small.yaml"
DOCTOR_PATH=$F/bin:$PATH doctor --config "$T/small.yaml"
nv_assert_eq 1 "$RC" "exit code with a full store"
expect "image store" fail "free space at $T/small/images"
nv_log "PASS"
