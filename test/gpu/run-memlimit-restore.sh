#!/bin/bash
# Issue 60 on the GPU machine (cgroup v2), from the repo root after test/gpu/pack.sh (.carry/kit,
# .carry/bin with the shim, the agent and bench/gpu_hold, .carry/runsc.tar.xz, .carry/gpu-image.tar):
# an image taken under a memory limit is restored under the same limit. Through ctr -> containerd 1.7
# (the kit's) -> our shim (image store on) -> runc 1.1 + CRIU 4.2.1 (the kit's), or the current runsc
# with nvproxy and cgroups applied (no --ignore-cgroups). One process (gpu_hold) holds HOLD_GIB (10)
# of written device memory under LIMIT_GIB (6), in two shapes:
#   ctr   the limit on the container (`ctr run --memory-limit`)
#   pod   the limit on its parent "pod" cgroup (/sys/fs/cgroup/nvgpu60-pod-ID, memory.max), the
#         container's own cgroup unlimited (`ctr run --cgroup /nvgpu60-pod-ID/ID`): Kubernetes' shape
# Each: `ctr c checkpoint --task --rw` (kept running: the lift and put-back in the shim's log, the
# limit read back), kill, `ctr c restore --live --rw` (the restore's lift), SIGTERM: gpu_hold checks
# its whole buffer ("data OK"); memory.max of the limited cgroup read back as LIMIT; oom_kill of the
# container's cgroup and of its parent (the pod's, or the namespace's /gpu) in memory.events, before
# and after; memory.current of the parent sampled (its peak); the record's sandbox figures (runsc).
# Cases (CASES, default all four, runsc first): runsc-ctr runsc-pod runc-ctr runc-pod. A case not
# started DEADLINE (default 560) s after the start minus its estimate is skipped (RESULT INFO).
# Prints "[ts] ..." and "RESULT PASS|FAIL|INFO ..." lines; containerd-60.log.gz (with the shim's
# log) and runsc-logs-60.tgz (runsc's own logs, info level) to $OUT.
# Run: set -o pipefail; timeout 580 bash test/gpu/run-memlimit-restore.sh 2>&1 | tee $OUT/run60.log
set -uo pipefail
REPO=$(pwd)
PACK=${PACK:-$REPO/.carry}
OUTD=${OUT:-/tmp/nvgpu-out}
LIMIT_GIB=${LIMIT_GIB:-6} HOLD_GIB=${HOLD_GIB:-10} DEADLINE=${DEADLINE:-560}
CASES=${CASES:-runsc-ctr runsc-pod runc-ctr runc-pod}
mkdir -p "$OUTD"
W=/var/tmp/nvgpu60
source "$REPO/test/gpu/lib/kit-containerd.sh"
kit_install
if [[ $CASES == *runsc* ]]; then
  mkdir -p /opt/runsc && tar -C /opt/runsc -xJf "$PACK/runsc.tar.xz" || { log "runsc did not unpack"; exit 1; }
fi
rm -rf "$W"; mkdir -p "$W/tools" "$W/store" "$W/runsc-logs"
cp "$PACK/bin/gpu_hold" "$W/tools/"
STORE=$W/store
CFG=$W/shim.yaml
LIMIT=$((LIMIT_GIB << 30))
CG=/sys/fs/cgroup
write_cfg() {  # runc|runsc
  local rt
  if [[ $1 == runsc ]]; then
    rt="{binary: /opt/runsc/bin/runsc, root: /run/containerd/nvproxy-gpu60r, extra_args: [\"--network=none\", \"--debug-log=$W/runsc-logs/\"]}"
  else
    rt="{binary: /opt/kit/root/usr/sbin/runc, root: /run/containerd/nvproxy-gpu60, criu_path: /opt/kit/bin/criu}"
  fi
  kit_shim_config "$CFG" "$rt" "image_store: $STORE" "image_store_keep: 1"
}
write_cfg runc
kit_start "$W" "$CFG" || { log "containerd or the image import failed"; exit 1; }
teardown() {
  kit_teardown 60
  tar -C "$W" -czf "$OUTD/runsc-logs-60.tgz" runsc-logs 2>/dev/null
  rmdir "$CG"/nvgpu60-pod-*/* "$CG"/nvgpu60-pod-* 2>/dev/null
  printf "%s\n" "${RESULTS[@]}"
}
trap teardown EXIT
log "kernel $(uname -r); cgroup $(stat -fc %T $CG); MemAvailable $(awk '/MemAvailable/{print $2}' /proc/meminfo) kB; disk free $(df -h /var/tmp | awk 'NR==2{print $4}')"
log "GPU: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | head -1)"
[[ $CASES != *runsc* ]] || log "runsc: $(/opt/runsc/bin/runsc --version | head -1)"
log "cases: $CASES; $HOLD_GIB GiB of written device memory under a $LIMIT_GIB GiB limit ($LIMIT)"
[[ $(stat -fc %T $CG) == cgroup2fs ]] || { log "not cgroup v2: this run reads memory.max and memory.events"; exit 1; }
grep -qw memory $CG/cgroup.subtree_control || echo +memory >$CG/cgroup.subtree_control

task_pid() { CTR task ls | awk -v i="$1" '$1==i{print $2}'; }
status_of() { CTR task ls | awk -v i="$1" '$1==i{print $3}'; }
cg_of() { local p; p=$(task_pid "$1"); [[ -n $p ]] && echo "$CG$(awk -F: '$1=="0"{print $3}' "/proc/$p/cgroup" 2>/dev/null)"; }
oomk() { awk '$1=="oom_kill"{print $2}' "$1/memory.events" 2>/dev/null || true; }
events() { tr '\n' ' ' <"$1/memory.events" 2>/dev/null; }
mib() { echo $(($1 >> 20)); }
# sample DIR FILE: memory.current of DIR every 0.1 s into FILE, in the background (at most 400 s);
# SAMPLER is its pid. peak FILE: the largest, in MiB.
sample() { timeout 400 bash -c 'while :; do cat "$1/memory.current" 2>/dev/null; sleep 0.1; done' _ "$1" >"$2" 2>/dev/null & SAMPLER=$!; }
peak() { kill "$SAMPLER" 2>/dev/null; wait "$SAMPLER" 2>/dev/null; mib "$(sort -n "$1" | tail -1)"; }
shim_lines() {  # ID WORDS: the shim's log lines naming ID with WORDS (ERE)
  grep -F "$1" "$W/containerd.log" | grep -E "$2" | sed 's/.*msg="//; s/" namespace=.*//; s/" runtime=.*//' | cut -c1-900
}
wait_status() {  # ID STATUS SECONDS
  local _
  for _ in $(seq $(($3 * 5))); do [[ $(status_of "$1") == "$2" ]] && return 0; sleep 0.2; done
  return 1
}
stop() {
  TMO=60 CTR task kill -a -s KILL "$1" >/dev/null 2>&1
  wait_status "$1" STOPPED 20 || [[ -z $(status_of "$1") ]] || log "$1: not stopped 20 s after SIGKILL ($(status_of "$1"))"
  TMO=60 CTR task rm -f "$1" >/dev/null 2>&1
  TMO=60 CTR c rm "$1" >/dev/null 2>&1
}

# one RUNTIME SHAPE: one case, as described above.
one() {
  local rt=$1 shape=$2 id=$3 t0 ck rs cg parent limited pod="" rc ok why data rec c
  write_cfg "$rt"
  local args=(--memory-limit "$LIMIT")
  if [[ $shape == pod ]]; then
    pod=/nvgpu60-pod-$id
    mkdir -p "$CG$pod"
    for c in memory pids cpu; do echo "+$c" >"$CG$pod/cgroup.subtree_control" 2>/dev/null; done
    echo "$LIMIT" >"$CG$pod/memory.max" || { result FAIL "$id" "cannot set $CG$pod/memory.max"; return; }
    args=(--cgroup "$pod/$id")
  fi
  local net=(--net-host)
  [[ $rt == runsc ]] && net=()
  mkdir -p "$W/h/$id"
  log "$id: start ($rt, limit on the ${shape/ctr/container}: ${args[*]})"
  t0=$(now)
  if ! CTR run -d --snapshotter native --runtime io.containerd.nvproxy.v1 "${net[@]}" "${BINDS[@]}" "${args[@]}" \
    --mount "type=bind,src=$W/tools,dst=/tools,options=rbind:ro" --mount "type=bind,src=$W/h/$id,dst=/out,options=rbind:rw" \
    --env NVIDIA_VISIBLE_DEVICES=all $IMAGE "$id" sh -c "/tools/gpu_hold hold $HOLD_GIB /out/ready1 >/out/log1 2>&1 & wait" >"$W/$id.run" 2>&1; then
    result FAIL "$id" "start: $(tail -c 600 "$W/$id.run" | tr '\n' ' ')"; stop "$id"; return
  fi
  local _
  for _ in $(seq 240); do [[ -s $W/h/$id/ready1 || -z $(status_of "$id") || $(status_of "$id") == STOPPED ]] && break; sleep 0.5; done
  if [[ ! -s $W/h/$id/ready1 ]]; then
    result FAIL "$id" "gpu_hold never ready ($(status_of "$id")): $(tail -c 400 "$W/h/$id/log1" 2>/dev/null | tr '\n' ' ')"; stop "$id"; return
  fi
  cg=$(cg_of "$id"); parent=$(dirname "$cg")
  limited=$cg; [[ $shape == pod ]] && limited=$CG$pod
  [[ $shape != pod || $cg == "$CG$pod"/* ]] || log "$id: WARNING the container's cgroup $cg is not below the pod $CG$pod"
  local k0c k0p
  k0c=$(oomk "$cg"); k0p=$(oomk "$parent")
  log "$id: ready in $(dt "$t0" "$(now)") s; cgroup $cg (memory.max $(cat "$cg/memory.max"), current $(mib "$(cat "$cg/memory.current")") MiB); parent $parent (memory.max $(cat "$parent/memory.max")); oom_kill $k0c / $k0p"

  sample "$parent" "$W/$id.ck.samples"
  t0=$(now)
  CTR c checkpoint --task --rw "$id" "${id}ref" >"$W/$id.ck" 2>&1
  rc=$?
  ck=$(dt "$t0" "$(now)")
  local ckpeak
  ckpeak=$(peak "$W/$id.ck.samples")
  log "$id: checkpoint rc $rc in $ck s; status $(status_of "$id"); memory.max $(cat "$limited/memory.max"); parent's peak $ckpeak MiB; events $(events "$cg") / parent $(events "$parent")"
  [[ $rc == 0 ]] || log "$id: checkpoint said: $(tail -c 1200 "$W/$id.ck" | tr '\n' ' ')"
  shim_lines "$id" 'memory limits (lifted|put back|not put back)|is not billed|OOM' | while read -r l; do log "  shim: $l"; done
  rec=$(find "$STORE/gpu/$id" -name nvproxy-cuda.json 2>/dev/null | head -1)
  [[ -n $rec ]] && log "$id: record $(grep -oE '"(runtime|sandbox_memory_bytes|sandbox_device_bytes|used_bytes)": *("[a-z]*"|[0-9]+)' "$rec" | tr '\n' ' ')"
  { echo "// $id"; cat "$W/state/io.containerd.runtime.v2.task/gpu/$id/checkpoint-diagnostic.json"; echo; } >>"$OUTD/diagnostics60.json" 2>/dev/null
  ok=1; why=""
  [[ $rc == 0 ]] || { ok=0; why+="rc $rc; "; }
  [[ $(status_of "$id") == RUNNING ]] || { ok=0; why+="status $(status_of "$id"); "; }
  [[ $(cat "$limited/memory.max") == "$LIMIT" ]] || { ok=0; why+="memory.max $(cat "$limited/memory.max"); "; }
  shim_lines "$id" 'memory limits lifted' | grep -qv 'restore of' || { ok=0; why+="no lift in the log; "; }
  shim_lines "$id" 'memory limits put back' | grep -qv 'restore of' || { ok=0; why+="no put-back in the log; "; }
  [[ $(oomk "$cg") == "$k0c" && $(oomk "$parent") == "$k0p" ]] || { ok=0; why+="oom_kill $(oomk "$cg") / $(oomk "$parent"); "; }
  if ((ok)); then
    result PASS "$id-checkpoint" "$ck s, kept running, memory.max $(cat "$limited/memory.max") read back, oom_kill $(oomk "$cg") / $(oomk "$parent"), parent's peak $ckpeak MiB"
  else
    result FAIL "$id-checkpoint" "$why$(tail -c 400 "$W/$id.ck" | tr '\n' ' ')"
  fi
  stop "$id"
  if [[ $rc != 0 ]]; then
    [[ -z $pod ]] || rmdir "$CG$pod" 2>/dev/null
    return
  fi

  # The restore: the container's cgroup is new (its kills count from 0); the parent's from now, or
  # from 0 where it is gone too (runsc removes the namespace's /gpu it made with the sandbox's).
  k0p=$(oomk "$parent")
  [[ -n $k0p ]] || { log "$id: $parent is gone with the container: its kills count from 0"; k0p=0; }
  sample "$parent" "$W/$id.rs.samples"
  t0=$(now)
  CTR c restore --live --rw "$id" "${id}ref" </dev/null >"$W/$id.rs" 2>&1
  rc=$?
  rs=$(dt "$t0" "$(now)")
  local rspeak
  rspeak=$(peak "$W/$id.rs.samples")
  cg=$(cg_of "$id")
  [[ $shape == pod ]] || limited=$cg
  log "$id: restore rc $rc in $rs s; status $(status_of "$id"); cgroup ${cg:-gone}; memory.max $(cat "$limited/memory.max" 2>/dev/null) (container's $(cat "$cg/memory.max" 2>/dev/null)); parent's peak $rspeak MiB; events ${cg:+$(events "$cg")} / parent $(events "$parent")"
  shim_lines "$id" 'restore of' | while read -r l; do log "  shim: $l"; done
  if [[ $rc != 0 ]]; then
    log "$id: restore said: $(tail -c 2000 "$W/$id.rs" | tr '\n' ' ')"
    log "$id: host OOM lines: $(dmesg 2>/dev/null | grep -iE 'oom-kill|killed process|memory cgroup out of memory' | tail -4 | tr '\n' ' ')"
    shim_lines "$id" 'level=(warn|error)' | tail -8 | while read -r l; do log "  shim: $l"; done
    result FAIL "$id-restore" "in $rs s, oom_kill under the parent $k0p -> $(oomk "$parent"): $(tail -c 700 "$W/$id.rs" | tr '\n' ' ')"
    stop "$id"; [[ -z $pod ]] || rmdir "$CG$pod"/* "$CG$pod" 2>/dev/null
    CTR image rm "${id}ref" >/dev/null 2>&1
    "$PACK/bin/containerd-shim-nvproxy-v1" image prune --older-than 0 --store "$STORE" >/dev/null 2>&1
    return
  fi
  local maxafter kc kp
  maxafter=$(cat "$limited/memory.max"); kc=$(oomk "$cg"); kp=$(oomk "$parent")
  # SIGTERM to gpu_hold: it checks its whole buffer and says "data OK". Under runc every process
  # gets it (the init, sh, has no handler); under runsc a kill --all takes the sandbox before
  # gpu_hold has checked (measured), so gpu_hold alone, from an exec (its pid is in ready1).
  if [[ $rt == runsc ]]; then
    TMO=60 CTR task exec --exec-id term "$id" sh -c 'kill -TERM "$(cat /out/ready1)"' >/dev/null 2>&1
  else
    TMO=60 CTR task kill -a -s TERM "$id" >/dev/null 2>&1
  fi
  for _ in $(seq 300); do grep -q 'data ' "$W/h/$id/log1" 2>/dev/null && break; sleep 0.2; done
  data=$(grep -o 'data [A-Z]*' "$W/h/$id/log1" | tail -1)
  ok=1; why=""
  [[ $data == "data OK" ]] || { ok=0; why+="${data:-no data line} ($(tail -c 200 "$W/h/$id/log1" | tr '\n' ' ')); "; }
  [[ $maxafter == "$LIMIT" ]] || { ok=0; why+="memory.max $maxafter; "; }
  [[ $kc == 0 && $kp == "$k0p" ]] || { ok=0; why+="oom_kill $kc / $k0p -> $kp; "; }
  shim_lines "$id" 'restore of.*memory limits lifted' | grep -q . || { ok=0; why+="no restore lift in the log; "; }
  if ((ok)); then
    result PASS "$id-restore" "$rs s, $data, memory.max $maxafter read back ($limited), oom_kill $kc / $kp, parent's peak $rspeak MiB"
  else
    result FAIL "$id-restore" "in $rs s: $why${data:+($data)}"
  fi
  stop "$id"
  [[ -z $pod ]] || rmdir "$CG$pod"/* "$CG$pod" 2>/dev/null
  CTR image rm "${id}ref" >/dev/null 2>&1
  "$PACK/bin/containerd-shim-nvproxy-v1" image prune --older-than 0 --store "$STORE" >/dev/null 2>&1
  log "$id: done; disk free $(df -h /var/tmp | awk 'NR==2{print $4}')"
}

for c in $CASES; do
  rt=${c%-*}; shape=${c#*-}
  case $rt:$shape in runc:ctr | runc:pod | runsc:ctr | runsc:pod) ;; *) result FAIL "$c" "unknown case"; continue ;; esac
  est=90; [[ $rt == runsc ]] && est=150
  el=$(dt "$T0" "$(now)")
  if awk -v e="$el" -v n="$est" -v d="$DEADLINE" 'BEGIN{exit !(e + n > d)}'; then
    result INFO "$c" "skipped: $el s gone, about $est s needed, deadline $DEADLINE s"; continue
  fi
  one "$rt" "$shape" "$c"
done
