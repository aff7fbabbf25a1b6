#!/usr/bin/env bash
# Issue 23 item 7: Docker's own checkpoint workflow through our shim (dockerd 26 with the packaged
# daemon.json plus experimental mode, lib/docker.sh): `docker checkpoint create` that stops the
# container and one with --leave-running, `docker start --checkpoint` restoring each (a counter kept
# in the process's memory goes on from its checkpointed value: not a fresh start, not the old
# process), `docker checkpoint ls` and `rm`.
# Docker 26 sends a checkpoint no options for a runtimeType other than io.containerd.runc.v2: its
# default (stop) and --leave-running look the same to the shim, which keeps the task running unless
# the container's shim config sets checkpoint.exit_without_options. The runtime `nvproxy-exit`
# (daemon.json options.ConfigPath to such a config) gives the stopping one. Docker's own `runc`
# runtime (io.containerd.runc.v2), served here by our shim through a containerd-shim-runc-v2 link on
# containerd's PATH, is the one docker sends options to: containerd.runc.v1.CheckpointOptions.
# Usage: docker_checkpoint.sh [1.7|1.6]
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/lib/harness.sh"
source "$HERE/lib/docker.sh"
ctd=${1:-1.7}
nv_docker_prepare
command -v criu >/dev/null || nv_skip "criu not installed"
SNIPPET=$NV_REPO_DIR/packaging/docker-daemon.json
[[ -f $SNIPPET ]] || nv_fail "no $SNIPPET"

shim_bin=${NVPROXY_SHIM_DIR:+$NVPROXY_SHIM_DIR/}containerd-shim-nvproxy-v1
[[ $shim_bin == */* ]] || shim_bin=$(command -v "$shim_bin") || nv_fail "containerd-shim-nvproxy-v1 not found"
shims=$(mktemp -d /tmp/nvproxy-docker-shims.XXXXXX)
nv_defer rm -rf "$shims"
for name in containerd-shim-nvproxy-v1 containerd-shim-runc-v2; do ln -s "$(readlink -f "$shim_bin")" "$shims/$name"; done
export NVPROXY_SHIM_DIR=$shims

shim_cfg=$(mktemp /tmp/nvproxy-docker-config.XXXXXX.yaml)
nv_defer rm -f "$shim_cfg"
export NVPROXY_SHIM_CONFIG=$shim_cfg
nv_harness_start --containerd "$ctd"
printf 'runtime:\n  binary: %s\n  root: %s\nlog_level: debug\n' "$(command -v runc)" "$NV_DIR/runc-root" >"$shim_cfg"
exit_cfg=$NV_DIR/exit-config.yaml
{
  cat "$shim_cfg"
  printf 'checkpoint:\n  exit_without_options: true\n'
} >"$exit_cfg"

# The packaged runtime entry, experimental mode (docker's checkpoint commands need it) and a second
# runtime whose containers read exit_cfg.
jq --arg cfg "$exit_cfg" '. + {experimental: true}
  | .runtimes["nvproxy-exit"] = {runtimeType: .runtimes.nvproxy.runtimeType, options: {ConfigPath: $cfg}}' \
  "$SNIPPET" >"$NV_DIR/daemon.json"
nv_docker_start "$NV_DIR/daemon.json"
nv_assert_eq true "$("$DOCKER" version --format '{{.Server.Experimental}}')" "dockerd's experimental mode"
nv_docker_load

# /tmp/count is replaced whole (a rename), so a read never sees it truncated and empty (CI once
# read 0 there, right after a checkpoint).
LOOP='i=0; while :; do i=$((i+1)); echo $i >/tmp/count.new; mv /tmp/count.new /tmp/count; echo $i; sleep 0.1; done'
run_counter() { "$DOCKER" run -d --runtime "$1" --network none "$NV_DOCKER_IMG" sh -c "$LOOP"; }
count() {
  local v
  v=$("$DOCKER" exec "$1" cat /tmp/count 2>/dev/null) || v=0
  echo "${v:-0}"
}
count_above() { (($(count "$1") > $2)); }
status_is() { [[ $("$DOCKER" inspect -f '{{.State.Status}}' "$1") == "$2" ]]; }
logged() { "$DOCKER" logs "$1" 2>/dev/null; }
last_logged() {
  local v
  v=$(logged "$1" | tail -n 1)
  echo "${v:-0}"
}
logged_above() { (($(last_logged "$1") > $2)); }
# shim_log_has ID TEXT: the shim logged TEXT about container ID (containerd's log escapes quotes).
# (Not grep -q at the pipe's end: the first grep's SIGPIPE would fail the pipeline.)
shim_log_has() { grep -F "$1" "$NV_DIR/containerd.log" | grep -F "$2" >/dev/null; }
checkpoints() { "$DOCKER" checkpoint ls "$1" | tail -n +2 | sort | tr '\n' ' '; }  # below its header
# The counter's log, one value a line, is 1..N without a gap or a repeat.
consecutive() { logged "$1" | awk 'NR != $1 { bad = 1 } END { exit bad || NR < 2 }'; }
# The first value after which the log goes back (a restore from an older state); empty: none.
rewind_to() { logged "$1" | awk '!found && NR > 1 && $1 <= prev { print $1; found = 1 } { prev = $1 }'; }

# docker start --checkpoint C CP, again while it fails only with docker's own race: dockerd uploads
# the checkpoint dir to containerd's content store and refuses a blob that is already there, which
# the checkpoint's own copy (byte-identical: containerd tarred the same files) is until containerd's
# garbage collector removes it (moby/moby#42900; with no shim involved, any runtime).
start_from_checkpoint() {
  local out
  if out=$("$DOCKER" start --checkpoint "$2" "$1" 2>&1); then return 0; fi
  [[ $out == *"failed to upload checkpoint to containerd: commit failed: content "*"already exists"* ]] \
    || nv_fail "docker start --checkpoint $2 $1: $out"
  nv_log "docker start --checkpoint $2: containerd still holds the checkpoint's blob, again"
  return 1
}

# A second checkpoint of one container meets containerd's side of it: containerd stores the
# container's spec with each checkpoint and refuses the blob the previous one left (the same spec,
# the same digest) until its garbage collector removed that. Again while that is the failure (only
# for a checkpoint that leaves the container running: a stopping one would be lost by then).
checkpoint_again() {
  local out
  if out=$("$DOCKER" checkpoint create "$1" "$2" 2>&1); then return 0; fi
  [[ $out == *"Cannot checkpoint container"*"content sha256:"*"already exists"* ]] \
    || nv_fail "docker checkpoint create $1 $2: $out"
  nv_log "docker checkpoint create $2: containerd still holds the previous checkpoint's spec, again"
  return 1
}

# ---- checkpoint create (stop) + start --checkpoint ----
nv_log "runtime nvproxy-exit: docker checkpoint create stops the container"
a=$(run_counter nvproxy-exit)
nv_wait_for -t 30 count_above "$a" 20 || nv_fail "counter of $a does not advance: $(count "$a")"
"$DOCKER" checkpoint create "$a" cp1 >/dev/null
shim_log_has "$a" "requested with no options (checkpoint.exit_without_options): exit, the task stops" \
  || nv_fail "the shim did not log an exiting checkpoint request for $a"
nv_wait_for -t 30 status_is "$a" exited || nv_fail "container still $("$DOCKER" inspect -f '{{.State.Status}}' "$a") after docker checkpoint create"
at_checkpoint=$(last_logged "$a")
nv_log "stopped at $at_checkpoint"
nv_assert_eq "cp1 " "$(checkpoints "$a")" "docker checkpoint ls"
[[ -d $NV_DD/data/containers/$a/checkpoints/cp1 ]] || nv_fail "no checkpoint dir below the data-root"
nv_wait_for -t 30 start_from_checkpoint "$a" cp1 || nv_fail "docker start --checkpoint cp1 kept failing"
nv_wait_for -t 30 status_is "$a" running || nv_fail "container not running after docker start --checkpoint"
shim_log_has "$a" "restore --detach" || nv_fail "the shim ran no runtime restore for docker start --checkpoint"
nv_wait_for -t 30 logged_above "$a" $((at_checkpoint + 10)) || nv_fail "restored counter does not advance: $(last_logged "$a")"
# Stopped right after the dump and restored from it: the log goes on from the checkpointed value
# (a fresh start would print 1 again, a kept-running old process never stopped).
consecutive "$a" || nv_fail "log of $a is not 1..N after the restore (stopped at $at_checkpoint): $(logged "$a" | tr '\n' ' ')"

# ---- checkpoint create --leave-running + kill + start --checkpoint ----
nv_log "runtime nvproxy: docker checkpoint create --leave-running"
b=$(run_counter nvproxy)
nv_wait_for -t 30 count_above "$b" 20 || nv_fail "counter of $b does not advance: $(count "$b")"
before=$(count "$b")
"$DOCKER" checkpoint create --leave-running "$b" cp2 >/dev/null
shim_log_has "$b" "requested with no options: the task keeps running" \
  || nv_fail "the shim did not log a leave-running checkpoint request for $b"
nv_assert_eq running "$("$DOCKER" inspect -f '{{.State.Status}}' "$b")" "status after --leave-running"
after=$(count "$b")
nv_wait_for -t 30 count_above "$b" $((after + 10)) || nv_fail "counter of $b stopped after a --leave-running checkpoint"
# This runtime's containers read the default config: docker's default (stop) request arrives the
# same way and keeps it running too.
nv_wait_for -t 30 checkpoint_again "$b" cp3 || nv_fail "docker checkpoint create cp3 kept failing"
nv_assert_eq running "$("$DOCKER" inspect -f '{{.State.Status}}' "$b")" "status after a checkpoint without exit_without_options"
nv_assert_eq "cp2 cp3 " "$(checkpoints "$b")" "docker checkpoint ls"
"$DOCKER" kill "$b" >/dev/null
nv_wait_for -t 30 status_is "$b" exited || nv_fail "container not stopped by docker kill"
[[ -z $(rewind_to "$b") ]] || nv_fail "log of $b goes back before any restore"
nv_wait_for -t 30 start_from_checkpoint "$b" cp2 || nv_fail "docker start --checkpoint cp2 kept failing"
nv_wait_for -t 30 status_is "$b" running || nv_fail "container not running after docker start --checkpoint cp2"
has_rewind() { [[ -n $(rewind_to "$b") ]]; }
nv_wait_for -t 30 has_rewind || nv_fail "the log of $b never went back to cp2's value: $(logged "$b" | tail -n 5 | tr '\n' ' ')"
back=$(rewind_to "$b")
nv_log "cp2 taken at >= $before; the restored counter went on at $back"
# cp2 was taken after `before` was read and before `after`: a fresh start would print 1.
((back >= before && back <= after + 1)) || nv_fail "restored at $back, not from cp2 (taken between $before and $after)"
nv_wait_for -t 30 logged_above "$b" $((back + 10)) || nv_fail "restored counter of $b does not advance"

# ---- docker's runc runtime type: exit in containerd.runc.v1.CheckpointOptions ----
nv_log "runtime runc (io.containerd.runc.v2, our shim): docker sends containerd.runc.v1.CheckpointOptions{exit}"
c=$(run_counter runc)
shim_log_has "$c" "created container" || nv_fail "docker's runc runtime did not run our shim"
nv_wait_for -t 30 count_above "$c" 20 || nv_fail "counter of $c does not advance: $(count "$c")"
"$DOCKER" checkpoint create "$c" cp4 >/dev/null
shim_log_has "$c" "requested with options containerd.runc.v1.CheckpointOptions: exit, the task stops" \
  || nv_fail "docker did not send containerd.runc.v1.CheckpointOptions with exit for $c"
nv_wait_for -t 30 status_is "$c" exited || nv_fail "container $c still running after docker checkpoint create"
at_checkpoint=$(last_logged "$c")
nv_wait_for -t 30 start_from_checkpoint "$c" cp4 || nv_fail "docker start --checkpoint cp4 kept failing"
nv_wait_for -t 30 status_is "$c" running || nv_fail "container $c not running after docker start --checkpoint"
nv_wait_for -t 30 logged_above "$c" $((at_checkpoint + 10)) || nv_fail "restored counter of $c does not advance"
consecutive "$c" || nv_fail "log of $c is not 1..N after the restore (stopped at $at_checkpoint)"

# ---- checkpoint rm ----
"$DOCKER" checkpoint rm "$b" cp2
nv_assert_eq "cp3 " "$(checkpoints "$b")" "docker checkpoint ls after rm cp2"
[[ ! -e $NV_DD/data/containers/$b/checkpoints/cp2 ]] || nv_fail "checkpoint dir of cp2 left after docker checkpoint rm"
"$DOCKER" checkpoint rm "$b" cp3
"$DOCKER" checkpoint rm "$a" cp1
"$DOCKER" checkpoint rm "$c" cp4
nv_assert_eq "" "$(checkpoints "$b")$(checkpoints "$a")$(checkpoints "$c")" "docker checkpoint ls after rm of all"

"$DOCKER" rm -f "$a" "$b" "$c" >/dev/null
nv_docker_stop
echo "PASS docker_checkpoint (dockerd $("$DOCKERD" --version | awk '{print $3}' | tr -d ,), containerd $NV_CONTAINERD_VERSION)"
