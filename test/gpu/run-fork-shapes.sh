#!/bin/bash
# PyTorch's fork shapes (issue 25) on the GPU machine (H200, no network), from the repo root, after test/gpu/pack.sh (which
# carries the CRIU release plugin in .carry/bin/criu-plugins). Through ctr -> containerd 1.7 (the
# kit's) -> our shim -> runc -> CRIU 4.2.1 (the kit's), PyTorch's fork shapes
# (workloads/fork_workload.py), each: ctr c checkpoint --task --rw, kill, ctr c restore --live --rw;
# the parent keeps computing with its device data intact, the forked workers keep producing, and no
# process holds a GPU device file but the CUDA parent:
#   dataloader   DataLoader(num_workers=2, pin_memory=True, persistent_workers=True), fork
#   compile      a torch.compile'd function with inductor's default compile workers (exec'd)
#   compile-fork the same with TORCHINDUCTOR_WORKER_START=fork (compile workers forked from the parent)
#   pool         multiprocessing.Pool(4) (fork) of CPU workers in a CUDA parent
#   off          dataloader with checkpoint.release_inherited: false: refused, nothing toggled
# Prints "RESULT PASS|FAIL name: detail"; containerd-25.log.gz and diagnostics25.json to $OUT.
# RUNTIME=runsc: the same through the current runsc with nvproxy (.carry/runsc.tar.xz): there the
# workers drop their inherited files in place (the sandbox agent) before runsc's own checkpoint.
# Run: set -o pipefail; timeout 560 bash test/gpu/run-fork-shapes.sh 2>&1 | tee $OUT/run25.log
set -uo pipefail
REPO=$(pwd)
PACK=${PACK:-$REPO/.carry}
OUTD=${OUT:-/tmp/nvgpu-out}
CASES=${CASES:-dataloader compile compile-fork pool off}
mkdir -p "$OUTD"
RUNTIME=${RUNTIME:-runc}
W=/var/tmp/nvgpu25
source "$REPO/test/gpu/lib/kit-containerd.sh"
kit_install
if [[ $RUNTIME == runsc ]]; then
  mkdir -p /opt/runsc && tar -C /opt/runsc -xJf "$PACK/runsc.tar.xz"
  log "runsc: $(/opt/runsc/bin/runsc --version | head -1)"
fi
PY=/opt/torch/.venv/bin/python3
log "kernel $(uname -r); criu: $(/opt/kit/bin/criu --version | head -1); runc: $(/opt/kit/root/usr/sbin/runc --version | head -1); plugin: $(ls "$PACK/bin/criu-plugins")"

rm -rf "$W" /var/tmp/nvgpu23 /var/tmp/nvgpu16 /var/tmp/nvgpu-runsc; mkdir -p "$W"
SOCK=$W/containerd.sock
CFG=$W/shim.yaml
write_cfg() {  # RELEASE(true|false)
  local rt="{binary: /opt/kit/root/usr/sbin/runc, root: /run/containerd/nvproxy-gpu25, criu_path: /opt/kit/bin/criu}"
  [[ $RUNTIME == runsc ]] && rt="{binary: /opt/runsc/bin/runsc, root: /run/containerd/nvproxy-gpu25-runsc, extra_args: [\"--network=none\", \"--ignore-cgroups\"]}"
  kit_shim_config "$CFG" "$rt" "release_inherited: $1"
}
write_cfg true
kit_start "$W" "$CFG" || { log "containerd or the image import failed"; exit 1; }
teardown() {
  kit_teardown 25
  tar -C "$H" -czf "$OUTD/workloads25.tar.gz" . 2>/dev/null
  printf '%s\n' "${RESULTS[@]}"
}
trap teardown EXIT

H=$W/host
start_wl() {  # NAME SHAPE [ENV=VALUE]
  mkdir -p "$H/$1"
  local extra=(); [[ -n ${3:-} ]] && extra=(--env "$3")
  local net=(--net-host); [[ $RUNTIME == runsc ]] && net=()
  CTR run -d --snapshotter native --runtime io.containerd.nvproxy.v1 "${net[@]}" "${BINDS[@]}" \
    --mount "type=bind,src=$H/$1,dst=/out,options=rbind:rw" --env NVIDIA_VISIBLE_DEVICES=all --env HOME=/tmp \
    --env PYTHONUNBUFFERED=1 "${extra[@]}" $IMAGE "$1" sh -c "exec $PY /probe/fork_workload.py $2 >/out/workload.log 2>&1" >/dev/null ||
    log "start of $1 failed"
}
iter() { local v; v=$(cut -d' ' -f1 "$1" 2>/dev/null); [[ $v =~ ^[0-9]+$ ]] && echo "$v" || echo 0; }
workers() { ls "$H/$1" | grep -c '^worker-.*\.txt$'; }
# The newest modification time among the workers' progress files (epoch seconds).
workers_newest() { stat -c %Y "$H/$1"/worker-*.txt 2>/dev/null | sort -n | tail -1; }
wait_until() {  # SECONDS CMD...
  local end=$(($(date +%s) + $1)); shift
  until "$@"; do (($(date +%s) < end)) || return 1; sleep 0.5; done
}
parent_past() { (($(iter "$H/$1/parent.txt") > $2)); }
workers_since() { (($(workers_newest "$1") > $2)); }
intact() { grep -q ' True' "$H/$1/parent.txt"; }
task_status() { CTR task ls | awk -v id="$1" '$1==id{print $3}'; }
pids_of() { CTR task ps "$1" | awk 'NR>1{print $1}'; }
# Pids in container $1 holding a /dev/nvidia* fd (host pids; under runsc the sandbox's, seen inside).
gpu_holders() {
  local p f
  if [[ $RUNTIME == runsc ]]; then
    CTR task exec --exec-id "h$RANDOM" "$1" sh -c 'for p in /proc/[0-9]*; do ls -l $p/fd 2>/dev/null | grep -q " /dev/nvidia" && echo ${p#/proc/}; done; true'
    return
  fi
  for p in $(pids_of "$1"); do
    for f in /proc/$p/fd/*; do [[ $(readlink "$f" 2>/dev/null) == /dev/nvidia* ]] && { echo "$p"; break; }; done
  done
}
report() { local r="$W/state/io.containerd.runtime.v2.task/gpu/$1/checkpoint-diagnostic.json"; { echo "// $1 $2"; cat "$r" 2>/dev/null; echo; } >>"$OUTD/diagnostics25.json"; }

run_case() {  # NAME SHAPE [ENV=VALUE]
  local id=$1 shape=$2 s e err rc rrc at released parent_host holders t_restore
  start_wl "$id" "$shape" "${3:-}"
  # inductor's compile workers report nothing of their own: for them the processes are counted.
  local want_files=1; [[ $shape == compile ]] && want_files=0
  wait_until 240 bash -c "[[ -s $H/$id/parent.txt ]] && (( $want_files == 0 || \$(ls $H/$id | grep -c '^worker-') >= 1 ))" ||
    { result FAIL "$id" "did not start: $(tail -5 "$W/containerd.log"; tail -5 "$H/$id/workload.log" 2>/dev/null)"; return; }
  wait_until 60 parent_past "$id" 3
  local nbefore; nbefore=$(pids_of "$id" | wc -l)
  log "$id: running, $nbefore processes, $(workers "$id") workers reporting, parent at $(iter "$H/$id/parent.txt"); GPU holders $(gpu_holders "$id" | paste -sd,)"
  s=$(now); err=$(CTR c checkpoint --task --rw "$id" "ckpt-$id" 2>&1); rc=$?; e=$(now)
  local ck; ck=$(dt "$s" "$e")
  report "$id" checkpoint
  at=$(iter "$H/$id/parent.txt")
  released=$("$PY" -c 'import json,sys; print(len(json.load(open(sys.argv[1])).get("released", {}).get("processes", [])))' \
    "$W/state/io.containerd.runtime.v2.task/gpu/$id/checkpoint-diagnostic.json" 2>/dev/null)
  log "$id: checkpoint rc=$rc in $(dt "$s" "$e") s, released ${released:-0} processes, parent at $at"
  [[ -n $err ]] && echo "$err" | sed 's/^/  | /'
  TMO=30 CTR task kill -a -s KILL "$id" >/dev/null
  wait_until 20 bash -c "[[ \$($CTDDIR/ctr -a $SOCK -n gpu task ls | awk '\$1==\"$id\"{print \$3}') == STOPPED ]]"
  CTR task rm "$id" >/dev/null; CTR c rm "$id" >/dev/null
  t_restore=$(date +%s)
  s=$(now); err=$(CTR c restore --live --rw "$id" "ckpt-$id" </dev/null 2>&1); rrc=$?; e=$(now)
  log "$id: restore rc=$rrc in $(dt "$s" "$e") s; status $(task_status "$id")"
  [[ -n $err ]] && echo "$err" | sed 's/^/  | /'
  local ok=1
  wait_until 30 parent_past "$id" "$at" || { ok=0; log "$id: the parent does not go on"; }
  if ((want_files)); then
    wait_until 30 workers_since "$id" "$t_restore" || { ok=0; log "$id: no worker produced after the restore"; }
  else
    (($(pids_of "$id" | wc -l) >= nbefore)) || { ok=0; log "$id: $(pids_of "$id" | wc -l) processes after the restore, $nbefore before"; }
  fi
  intact "$id" || { ok=0; log "$id: device data not intact: $(cat "$H/$id/parent.txt")"; }
  holders=$(gpu_holders "$id" | paste -sd,)
  parent_host=$(CTR task ls | awk -v id="$id" '$1==id{print $2}')
  # Only CUDA processes may hold the GPU: the parent (it may be the init's child under sh -c exec).
  local n_holders; n_holders=$(gpu_holders "$id" | wc -l)
  ((n_holders == 1)) || { ok=0; log "$id: GPU device holders after the restore: $holders (init $parent_host)"; }
  local nulls=0 p
  if [[ $RUNTIME == runsc ]]; then
    nulls=$(CTR task exec --exec-id "n$RANDOM" "$id" sh -c "for p in /proc/[0-9]*; do [ \${p#/proc/} = $holders ] || ls -l \$p/fd 2>/dev/null; done" | grep -c ' /dev/null$')
  else
    for p in $(pids_of "$id"); do [[ $p == "$holders" ]] && continue; nulls=$((nulls + $(ls -l /proc/$p/fd 2>/dev/null | grep -c ' /dev/null$'))); done
  fi
  log "$id: after the restore parent at $(iter "$H/$id/parent.txt"), GPU holders [$holders], /dev/null fds in the others: $nulls"
  # inductor's default compile workers are exec'd (subprocess): nothing of theirs to release.
  local need=1; [[ $id == compile ]] && need=0
  ((rc == 0 && rrc == 0 && ${released:-0} >= need)) || ok=0
  if ((ok)); then result PASS "$id" "$shape: checkpoint $ck s, restore $(dt "$s" "$e") s, released $released forked processes, restored; parent on, workers producing, data intact, only the parent holds the GPU"
  else result FAIL "$id" "$shape: rc=$rc restore rc=$rrc released=${released:-0}"; fi
  TMO=30 CTR task kill -a -s KILL "$id" >/dev/null 2>&1
}

for c in $CASES; do
  case $c in
    dataloader | compile | pool) run_case "$c" "$c" ;;
    compile-fork) run_case "$c" compile TORCHINDUCTOR_WORKER_START=fork ;;
    off)
      write_cfg false
      start_wl off dataloader
      wait_until 240 bash -c "[[ -s $H/off/parent.txt ]]" || { result FAIL off "did not start"; continue; }
      s=$(now); err=$(CTR c checkpoint --task --rw off ckpt-off 2>&1); rc=$?; e=$(now)
      echo "$err" | sed 's/^/  | /'; report off refused
      if ((rc != 0)) && [[ $err == *"release_inherited is off"* && $(task_status off) == RUNNING ]] && intact off; then
        result PASS off "refused in $(dt "$s" "$e") s naming the workers and the key; still running"
      else result FAIL off "rc=$rc status $(task_status off)"; fi
      write_cfg true
      ;;
  esac
done
