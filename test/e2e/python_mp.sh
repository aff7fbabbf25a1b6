#!/usr/bin/env bash
# Issue 16, item 1: a Python multiprocessing workload ('spawn', one worker fed through an mp.Queue)
# checkpoints and restores through containerd, our shim, runc and CRIU with the shim's default
# checkpoint.criu_options, and its work continues. No GPU needed: the failure is CRIU's, on the
# POSIX semaphores of mp.Queue ("Can't create link remap for /dev/shm/sem.X").
#   control  checkpoint.criu_options: [] (what the runc shim does): the checkpoint fails, the error
#            quotes CRIU and names the option, the container keeps working
#   default  the checkpoint succeeds, the container keeps working; a restore from the image resumes
#            both processes (same pids) where the checkpoint left them, and the queue goes on
# The container is busybox with the host's Python bound in read-only (/usr/bin, /usr/lib, the ELF
# loader at /lib64). The workload cannot race its checkpoint: the only file it holds open across
# one is written in place, never renamed (python_mp_workload.py), so every restore finds it.
# Usage: python_mp.sh [1.6|1.7|2|2.3]
set -euo pipefail
source "$(dirname "$0")/lib/shim-env.sh"

PY=/usr/bin/python3
[[ -x $PY ]] || nv_skip "no $PY on this host"
"$PY" -c 'import multiprocessing' 2>/dev/null || nv_skip "$PY has no multiprocessing"
LOADER=$(readlink -f /lib64/ld-linux-x86-64.so.2 2>/dev/null || true)
[[ -f $LOADER ]] || nv_skip "no x86-64 ELF loader at /lib64"
case $NV_RUNTIME in runc | crun) ;; *) nv_skip "$NV_RUNTIME does not checkpoint with CRIU" ;; esac

nv_start_with_shim --containerd "${1:-1.6}"
WORK=$(mktemp -d /tmp/nvproxy-pymp.XXXXXX)
nv_defer rm -rf "$WORK"
mkdir -p "$WORK/app"
cp "$(dirname "$0")/python_mp_workload.py" "$WORK/app/"

# set_criu_options YAML-LIST: the config that the next container's shim reads at Create.
set_criu_options() {
  NV_SHIM_EXTRA="checkpoint:
  criu_options: $1" nv_shim_config_write "$NVPROXY_SHIM_CONFIG"
}
# run_mp ID: the workload in a fresh container, writing to $WORK/ID.
run_mp() {
  mkdir -p "$WORK/$1"
  nv_ctr run -d --runtime $NV_RT \
    --mount "type=bind,src=/usr/bin,dst=/usr/bin,options=rbind:ro" \
    --mount "type=bind,src=/usr/lib,dst=/usr/lib,options=rbind:ro" \
    --mount "type=bind,src=$LOADER,dst=/lib64/ld-linux-x86-64.so.2,options=bind:ro" \
    --mount "type=bind,src=$WORK/app,dst=/app,options=rbind:ro" \
    --mount "type=bind,src=$WORK/$1,dst=/out,options=rbind:rw" \
    "$NV_IMAGE" "$1" /usr/bin/python3 /app/python_mp_workload.py /out
}
# progress ID: "ITEM SEEN WORKER_PID" of the worker's last write (0 0 0 before the first). The
# worker overwrites one record in place (python_mp_workload.py says why); a read that met it half
# written fails its sum and is read again (a record takes microseconds to write).
progress() {
  local a b c s tries
  for ((tries = 0; tries < 1000; tries++)); do
    read -r a b c s 2>/dev/null <"$WORK/$1/progress" || break
    if [[ $a =~ ^[0-9]+$ && $b =~ ^[0-9]+$ && $c =~ ^[0-9]+$ && $s =~ ^[0-9]+$ ]] && ((a + b + c == s)); then
      echo "$a $b $c"
      return
    fi
  done
  echo "0 0 0"
}
item() { progress "$1" | awk '{print $1}'; }
item_at_least() { (($(item "$1") >= $2)); }
item_other_than() { [[ $(item "$1") != "$2" ]]; }
advances() { local a; a=$(item "$1"); nv_wait_for -t 10 item_at_least "$1" $((a + 5)); }

nv_log "control: no CRIU options, as containerd's runc shim: CRIU cannot dump the queue's semaphores"
set_criu_options "[]"
run_mp ctl
nv_wait_for -t 30 item_at_least ctl 20 || nv_fail "the workload did not start: $(progress ctl); $(nv_ctr task ls)"
set +e
err=$(nv_ctr c checkpoint --task --rw ctl ctlref 2>&1)
rc=$?
set -e
echo "$err" >&2
((rc != 0)) || nv_fail "the control checkpoint succeeded: the test no longer shows what the option fixes"
nv_assert_contains "$err" "link remap" "the error quotes CRIU's own line"
nv_assert_contains "$err" "checkpoint.criu_options" "the error names the option that fixes it"
nv_assert_eq RUNNING "$(nv_task_status ctl)" "container state after the failed checkpoint"
advances ctl || nv_fail "the workload stopped after the failed checkpoint: $(progress ctl)"
nv_stop_rm ctl

nv_log "default: the shim's CRIU options"
NV_SHIM_EXTRA="" nv_shim_config_write "$NVPROXY_SHIM_CONFIG"
run_mp mp
nv_wait_for -t 30 item_at_least mp 20 || nv_fail "the workload did not start: $(progress mp)"
read -r parent worker <"$WORK/mp/parent"
before=$(item mp)
nv_ctr c checkpoint --task --rw mp mpref
conf=$(nv_bundle mp)/criu-work/nvproxy-criu.conf
grep -qx link-remap "$conf" || nv_fail "CRIU was not given link-remap: $(cat "$conf" 2>&1)"
nv_assert_eq RUNNING "$(nv_task_status mp)" "container state after a leave-running checkpoint"
advances mp || nv_fail "the workload stopped after the checkpoint: $(progress mp)"
nv_stop_rm mp
last=$(item mp)
nv_log "checkpoint taken at item >= $before; the original got to $last before it was killed"

nv_ctr c restore --live --rw mp mpref </dev/null
nv_assert_eq RUNNING "$(nv_task_status mp)" "restored container state"
# The restored worker writes again: items from where the checkpoint was, not from 1.
nv_wait_for -t 30 item_other_than mp "$last" || nv_fail "the restored workload does not write: $(progress mp)"
read -r got seen wpid <<<"$(progress mp)"
nv_log "restored: item $got (seen $seen) from worker $wpid"
((got >= before)) || nv_fail "the restored work started afresh: item $got, the checkpoint was at $before or later"
nv_assert_eq "$got" "$seen" "every item of the queue reached the worker once"
nv_assert_eq "$worker" "$wpid" "the worker is the checkpointed one (its pid in the container)"
advances mp || nv_fail "the restored workload does not go on: $(progress mp)"
read -r got2 seen2 _ <<<"$(progress mp)"
nv_assert_eq "$got2" "$seen2" "the queue still delivers every item once"
nv_ctr task kill -s KILL mp
nv_wait_for -t 20 nv_task_stopped mp || nv_fail "restored mp did not stop"
echo "PASS python_mp ($NV_RUNTIME, containerd $NV_CONTAINERD_VERSION; parent $parent, worker $worker)"
