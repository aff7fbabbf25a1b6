#!/bin/bash
# On the GPU machine (2x H200, Ubuntu 24.04, no network), from the repo root, after test/gpu/pack.sh
# filled .carry/ here: installs the kit into /opt/kit, starts a private containerd 1.7 with our shim
# (runc + CRIU from the kit), and drives every case through containerd + shim + runc + CRIU:
#   issue4        NVIDIA_VISIBLE_DEVICES=all alone: nvidia-smi -L and a CUDA program inside
#   signals       read-only measurement of what tells NCCL ranks from independent processes
#   refuse-holder a non-CUDA holder of /dev/nvidiactl: refused with the table, rolled back, continues
#   refuse-p2p1   one process on both GPUs: refused by the NVML preflight before any toggle
#   refuse-nccl   NCCL ranks (live communicator): refused by the comm probe before any toggle
#   ckpt-cuda     CUDA parent + child: checkpoint (toggle, CRIU dump, resume), restore, data intact
#   ckpt-indep2   two processes, one GPU each: same, data intact in both
#   refuse-nccl-legacy     NCCL ranks with NCCL_CUMEM_ENABLE=0 (legacy CUDA IPC)
#   refuse-nccl-destroyed  NCCL ranks after destroy_process_group
#   stuck-p2p1    allow_unrestorable on p2p1: what the shim says when the driver cannot bring it back
# Prints "RESULT PASS|FAIL|INFO name: detail" lines; logs go to $OUT (or /tmp/nvgpu-out): signals.txt,
# diagnostics.json (each refusal's checkpoint-diagnostic.json), containerd.log.gz (with the shim's log).
# Run: set -o pipefail; timeout 570 bash test/gpu/run-all.sh 2>&1 | tee $OUT/run.log
# DRY=1: the same flow on a machine without a GPU (local runc/criu/containerd 1.7, stub workloads).
set -uo pipefail
REPO=$(pwd)
OUTD=${OUT:-/tmp/nvgpu-out}
mkdir -p "$OUTD"
DRY=${DRY:-0}
W=/var/tmp/nvgpu
source "$(dirname "${BASH_SOURCE[0]}")/lib/report.sh"
source "$(dirname "${BASH_SOURCE[0]}")/lib/containerd.sh"

# ---------------- binaries ----------------
if [[ $DRY == 1 ]]; then
  RUNC=$(command -v runc); CRIU=$(command -v criu)
  source /opt/nvproxy-deps/trixie/env.sh; CTDDIR=$NVPROXY_CONTAINERD17_BIN_DIR
  PY=/usr/bin/python3
else
  mkdir -p /opt/kit/bin && tar -C /opt/kit -xJf .carry/kit/kit.tar.xz
  printf '#!/bin/sh\nLD_LIBRARY_PATH=/opt/kit/root/usr/lib/x86_64-linux-gnu exec /opt/kit/root/usr/sbin/criu "$@"\n' >/opt/kit/bin/criu
  chmod +x /opt/kit/bin/criu
  RUNC=/opt/kit/root/usr/sbin/runc; CRIU=/opt/kit/bin/criu; CTDDIR=/opt/kit/root/usr/bin
  PY=/opt/torch/.venv/bin/python3
fi
SHIMDIR=$REPO/.carry/bin
SHIM=$SHIMDIR/containerd-shim-nvproxy-v1
export PATH=$SHIMDIR:$CTDDIR:/opt/kit/bin:$PATH:/usr/local/nvidia/bin
log "runc: $($RUNC --version | head -1); criu: $($CRIU --version | head -1); containerd: $($CTDDIR/containerd --version)"
log "criu check: $($CRIU check 2>&1 | tail -1)"
uname -r; nvidia-smi -L 2>/dev/null

# ---------------- containerd + shim config ----------------
rm -rf "$W"; mkdir -p "$W"
SOCK=$W/containerd.sock
CFG=$W/shim.yaml
write_cfg() {  # $1: extra checkpoint lines
  {
    echo "runtime:"
    echo "  binary: $RUNC"
    echo "  root: /run/containerd/nvproxy-gpu"
    echo "  criu_path: $CRIU"
    echo "log_level: debug"
    if [[ $DRY == 1 ]]; then
      [[ -n ${FAKEDRV:-} ]] && printf 'gpu:\n  driver_root: %s\n  dev_root: %s/dev\n  proc_driver_root: %s/proc\n' "$FAKEDRV" "$FAKEDRV" "$FAKEDRV"
      echo "checkpoint:"
      echo "  cuda: none"
    else
      echo "gpu:"
      echo "  driver_root: /"
      echo "checkpoint:"
      echo "  libcuda: /usr/local/nvidia/lib64/libcuda.so.1"
      echo "  libnvml: /usr/local/nvidia/lib64/libnvidia-ml.so.1"
      echo "  lock_timeout_ms: 10000"
      [[ -n ${1:-} ]] && echo "$1"
    fi
  } >"$CFG"
}
write_cfg
CTR() { timeout "${TMO:-180}" "$CTDDIR/ctr" -a "$SOCK" -n gpu "$@"; }
IMAGE=docker.io/library/nvproxy-gpu:test
ctd_start "$W" "$CFG" .carry/gpu-image.tar || { log "image import failed"; exit 1; }
log "containerd up (snapshotter $SNAP)"

teardown() {
  log "teardown"
  ctd_kill_tasks
  for c in $(CTR c ls -q 2>/dev/null); do TMO=20 CTR c rm "$c" >/dev/null 2>&1; done
  kill "$CTDPID" 2>/dev/null; sleep 1
  gzip -c "$W/containerd.log" >"$OUTD/containerd.log.gz" 2>/dev/null
  printf '%s\n' "${RESULTS[@]}"
}
trap teardown EXIT

# ---------------- mounts: the host's /usr/* (not /usr/local) and /opt/torch, read-only ----------------
BINDS=()
bind_ro() { BINDS+=(--mount "type=bind,src=$1,dst=$1,options=bind:ro"); }
for d in /usr/*; do
  [[ $d == /usr/local || -L $d || ! -d $d ]] && continue
  bind_ro "$d"
done
# every mount point below them is its own bind (runc then declares it to CRIU as external)
while read -r mp; do
  case $mp in /usr/local|/usr/local/*) continue ;; /usr/*|/opt/torch/*) [[ -e $mp && ! -L $mp ]] && bind_ro "$mp" ;; esac
done < <(awk '{print $5}' /proc/self/mountinfo | sort -u)
if [[ $DRY != 1 ]]; then
  [[ -d /opt/torch ]] && bind_ro /opt/torch
  pyreal=$(readlink -f "$PY"); pyhome=$(dirname "$(dirname "$pyreal")")
  log "python: $PY -> $pyreal"
  case $pyreal in /usr/*|/opt/torch/*) ;; *) bind_ro "$pyhome" ;; esac
fi
printf '%s\n' "${BINDS[@]}" | grep -v -- --mount | sed 's/^/  mount /'
ENVS=(--env NCCL_NVLS_ENABLE=0 --env TORCH_SYMM_MEM_DISABLE_MULTICAST=1 --env NVSHMEM_DISABLE_NVLS=1 --env HOME=/tmp --env PYTHONUNBUFFERED=1)
[[ $DRY == 1 ]] || ENVS+=(--env NVIDIA_VISIBLE_DEVICES=all)
RT=io.containerd.nvproxy.v1

# start_wl NAME HOSTDIR CONTAINERDIR SCRIPT ARGS... [env via EXTRA_ENV array]
start_wl() {
  local name=$1 hd=$2 cd=$3 script=$4; shift 4
  mkdir -p "$hd"; rm -f "$hd"/*
  local cmd="exec $PY /probe/$script $*"
  [[ $DRY == 1 ]] && cmd="exec $PY /probe/dry_workload.py ${DRYKIND:-plain}"
  CTR run -d --runtime $RT --net-host "${BINDS[@]}" --mount "type=bind,src=$hd,dst=$cd,options=rbind:rw" \
    "${ENVS[@]}" "${EXTRA_ENV[@]}" $IMAGE "$name" sh -c "$cmd >/log/$name.log 2>&1" >/dev/null \
    || log "start of $name failed"
}
iter() { local v; v=$(cut -d' ' -f1 "$1" 2>/dev/null); [[ $v =~ ^[0-9]+$ ]] || { sleep 0.1; v=$(cut -d' ' -f1 "$1" 2>/dev/null); }; [[ $v =~ ^[0-9]+$ ]] && echo "$v" || echo 0; }
okflag() { awk '{print $NF}' "$1" 2>/dev/null; }
ready() { local f; for f in "$@"; do [[ -s $f ]] || return 1; done; }
wait_ready() {  # SECS FILES...
  local t=$1; shift
  for _ in $(seq $((t * 2))); do ready "$@" && return 0; sleep 0.5; done
  return 1
}
advancing() {  # all files advance within 3 s
  local f a=() i=0
  for f in "$@"; do a+=("$(iter "$f")"); done
  sleep 3
  for f in "$@"; do (($(iter "$f") > ${a[i]})) || return 1; i=$((i + 1)); done
}
task_status() { CTR task ls | awk -v id="$1" '$1==id{print $3}'; }
pids_of() { CTR task ps "$1" | awk 'NR>1{print $1}' | paste -sd, -; }
wl_log() { local f; f=$(find "$W/state" -path "*/$1/rootfs/log/$1.log" 2>/dev/null | head -1); [[ -n $f ]] && tail -n "${2:-15}" "$f"; }
shimlog() { grep -E "$1" "$W/containerd.log" | grep -v 'msg="runtime: ' | sed -E 's/^.*msg="//; s/" namespace=.*$//; s/\\n/\n    /g; s/\\"/"/g' | tail -n "${2:-20}"; }

# ---------------- workloads start (they take a while to import torch) ----------------
H=$W/host
# The cases that need two GPUs (a process on both, one per GPU, NCCL ranks) run only where there are two.
NGPU=2
[[ $DRY == 1 ]] || NGPU=$(nvidia-smi -L | grep -c '^GPU ')
MULTI=0; ((NGPU >= 2)) && MULTI=1
((MULTI)) || log "$NGPU GPU: the two-GPU cases (p2p1, indep2, NCCL, stuck-p2p1) are skipped"
EXTRA_ENV=()
DRYKIND=with-holder start_wl wl-refuse "$H/refuse" /out gpu_workload.py with-holder
DRYKIND=plain start_wl wl-ok "$H/ok" /out gpu_workload.py plain
if ((MULTI)); then
DRYKIND=indep2 start_wl mg-indep2 "$H/indep2" /tmp/mg multigpu_workload.py indep2
DRYKIND=p2p1 start_wl mg-p2p1 "$H/p2p1" /tmp/mg multigpu_workload.py p2p1
# NCCL's shared-memory segments outgrow ctr's 64 MiB /dev/shm (NCCL_CUMEM_ENABLE=0 failed with ENOSPC)
SHM1G=(--mount "type=tmpfs,src=shm,dst=/dev/shm,options=nosuid:nodev:noexec:mode=1777:size=1073741824")
EXTRA_ENV=("${SHM1G[@]}" --env NCCL_TEST_PORT=29511)
DRYKIND=nccl start_wl nccl-live "$H/nccl" /tmp/nccl nccl_workload.py
EXTRA_ENV=("${SHM1G[@]}" --env NCCL_TEST_PORT=29521 --env DESTROY_PG=1)
DRYKIND=nccl start_wl nccl-destroyed "$H/nccld" /tmp/nccl nccl_workload.py
# NCCL's legacy IPC path (cudaIpc* instead of cuMem handles): another shape of the same signals
EXTRA_ENV=("${SHM1G[@]}" --env NCCL_TEST_PORT=29531 --env NCCL_CUMEM_ENABLE=0)
DRYKIND=nccl start_wl nccl-legacy "$H/nccll" /tmp/nccl nccl_workload.py
fi
EXTRA_ENV=()
log "workload containers started: $(CTR task ls | awk 'NR>1{print $1"="$3}' | paste -sd' ')"

# ---------------- issue 4 ----------------
# The image's own busybox /usr/bin; only the host's libraries (libc for nvidia-smi and vecadd) come in.
LIBBINDS=()
for d in /usr/lib /usr/lib64; do [[ -d $d && ! -L $d ]] && LIBBINDS+=(--mount "type=bind,src=$d,dst=$d,options=bind:ro"); done
I4CMD='echo "$ ls /dev/nvidia*"; ls /dev/nvidia*; echo "$ cat /etc/ld.so.conf.d/nvproxy.conf"; cat /etc/ld.so.conf.d/nvproxy.conf; echo "$ readlink /usr/bin/nvidia-smi"; readlink /usr/bin/nvidia-smi; echo "$ nvidia-smi -L"; nvidia-smi -L; echo "nvidia-smi rc=$?"'

if [[ $DRY == 1 && -n ${FAKEDRV:-} ]]; then
  out=$(CTR run --rm --runtime $RT --net-host "${LIBBINDS[@]}" --env NVIDIA_VISIBLE_DEVICES=all $IMAGE issue4 sh -c "$I4CMD" 2>&1); rc=$?
  echo "$out" | sed 's/^/  | /'; result INFO issue4-fake "rc=$rc"
fi
if [[ $DRY != 1 ]]; then
  mkdir -p "$H/vec"
  NVCC=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null)
  s=$(now)
  "$NVCC" -O2 -o "$H/vec/vecadd" test/gpu/workloads/vecadd.cu 2>&1 | tail -3
  log "nvcc built vecadd in $(dt "$s" "$(now)") s"
  s=$(now)
  out=$(CTR run --rm --runtime $RT --net-host "${LIBBINDS[@]}" --mount "type=bind,src=$H/vec,dst=/vec,options=rbind:ro" \
    --env NVIDIA_VISIBLE_DEVICES=all $IMAGE issue4 sh -c "$I4CMD"'; echo "$ /vec/vecadd"; /vec/vecadd; echo "vecadd rc=$?"' 2>&1)
  rc=$?
  echo "$out" | sed 's/^/  | /'
  if ((rc == 0)) && grep -q "^nvidia-smi rc=0" <<<"$out" && grep -q "^GPU 0: NVIDIA H200 (UUID: GPU-" <<<"$out" \
    && grep -q "^GPU 0: NVIDIA H200, .*correct" <<<"$out" && grep -q "^vecadd rc=0" <<<"$out"; then
    result PASS issue4 "nvidia-smi -L listed $(grep -c '(UUID: GPU-' <<<"$out") GPUs and vecadd computed correctly on $(grep -c ', .*: correct' <<<"$out") with only NVIDIA_VISIBLE_DEVICES=all ($(dt "$s" "$(now)") s)"
  else
    result FAIL issue4 "rc=$rc"
  fi
fi

# ---------------- wait for the workloads ----------------
# each container: ready (its progress files exist) or stopped (its log is shown below)
WANT=("wl-refuse $H/refuse/parent.txt $H/refuse/child.txt" "wl-ok $H/ok/parent.txt $H/ok/child.txt")
MULTI_WL=()
((MULTI)) && MULTI_WL=(mg-indep2 mg-p2p1 nccl-live nccl-destroyed nccl-legacy) && WANT+=(
  "mg-indep2 $H/indep2/rank0.txt $H/indep2/rank1.txt" "mg-p2p1 $H/p2p1/p2p.txt" "nccl-live $H/nccl/rank0.txt $H/nccl/rank1.txt"
  "nccl-destroyed $H/nccld/rank0.txt $H/nccld/rank1.txt" "nccl-legacy $H/nccll/rank0.txt $H/nccll/rank1.txt")
all_settled() {
  local w c
  for w in "${WANT[@]}"; do
    read -r c files <<<"$w"
    ready $files || [[ $(task_status "$c") == STOPPED ]] || return 1
  done
}
wait_for_all() { for _ in $(seq 300); do all_settled && return 0; sleep 0.5; done; return 1; }
wait_for_all || log "not all workloads ready after 150 s"
log "workloads: $(for f in $H/*/*.txt; do printf '%s=[%s] ' "${f#$H/}" "$(cat "$f" | tr -d '\n')"; done)"
for c in wl-refuse wl-ok "${MULTI_WL[@]}"; do
  [[ $(task_status $c) == RUNNING ]] || { log "$c is $(task_status $c); its log:"; wl_log $c 30; }
done
[[ $DRY == 1 ]] || nvidia-smi --query-compute-apps=pid,gpu_uuid,used_memory --format=csv

# ---------------- signals (read-only) ----------------
args=()
for c in "${MULTI_WL[@]}" wl-ok; do args+=("$c=$(pids_of $c)"); done
$PY test/gpu/measure.py "${args[@]}" 2>&1 | tee "$OUTD/signals.txt"
if [[ $DRY != 1 ]]; then
  for c in "${MULTI_WL[@]}"; do
    echo "--- diagnose $c (read-only)"
    "$SHIM" diagnose --pid $(pids_of $c | tr , ' ') --libcuda /usr/local/nvidia/lib64/libcuda.so.1 \
      --libnvml /usr/local/nvidia/lib64/libnvidia-ml.so.1 2>&1 | tee -a "$OUTD/signals.txt"
  done
fi

# ---------------- refusals ----------------
# refuse CASE CONTAINER EXPECT-TEXT PROGRESS-FILES...
refuse() {
  local case=$1 c=$2 expect=$3; shift 3
  local s e err rc
  s=$(now)
  err=$(CTR c checkpoint --task --rw "$c" "ckpt-$c" 2>&1); rc=$?
  e=$(now)
  echo "$err" | sed 's/^/  | /'
  shimlog "checkpoint $c:" 12 | sed 's/^/  shim: /'
  { echo "// $c"; cat "$W/state/io.containerd.runtime.v2.task/gpu/$c/checkpoint-diagnostic.json" 2>/dev/null; echo; } >>"$OUTD/diagnostics.json"
  local st; st=$(task_status "$c")
  if ((rc != 0)) && grep -q -- "$expect" <<<"$err" && [[ $st == RUNNING ]] && advancing "$@"; then
    local locked="no"; shimlog "checkpoint $c: lock " 1 | grep -q lock && locked="yes (rolled back)"
    result PASS "$case" "refused in $(dt "$s" "$e") s, toggled before refusal: $locked; container $st and progressing"
  else
    result FAIL "$case" "rc=$rc status=$st expect=[$expect]"
  fi
}
[[ $DRY == 1 ]] || {
  refuse refuse-holder wl-refuse "no CUDA" "$H/refuse/parent.txt" "$H/refuse/child.txt"
  log "after refusal: $(cat $H/refuse/parent.txt $H/refuse/child.txt | tr '\n' ' ')"
  if ((MULTI)); then
  refuse refuse-p2p1 mg-p2p1 "CUDA contexts on several GPUs" "$H/p2p1/p2p.txt"
  refuse refuse-nccl nccl-live "collective (NCCL)" "$H/nccl/rank0.txt" "$H/nccl/rank1.txt"
  touch "$H/nccl/ar"
  wait_ready 60 "$H/nccl/ar0.txt" "$H/nccl/ar1.txt" && log "nccl-live all_reduce after the refusal: $(cat $H/nccl/ar0.txt $H/nccl/ar1.txt | tr '\n' ' ')" \
    || { log "nccl-live all_reduce after the refusal did not finish"; wl_log nccl-live 20; }
  fi
}

# ---------------- checkpoint + restore ----------------
# ckpt CASE CONTAINER FILES...
ckpt() {
  local case=$1 c=$2; shift 2
  local s e rc err at_ckpt before after after2 ok=1 f
  s=$(now)
  err=$(CTR c checkpoint --task --rw "$c" "ckpt-$c" 2>&1); rc=$?
  e=$(now)
  at_ckpt=$(for f in "$@"; do iter "$f"; done | paste -sd/)
  log "$case: ctr c checkpoint rc=$rc in $(dt "$s" "$e") s; iterations right after: $at_ckpt"
  [[ -n $err ]] && echo "$err" | sed 's/^/  | /'
  # The shim's report of the checkpoint (verdict, CUDA processes, phase timings), read as JSON.
  local report="$W/state/io.containerd.runtime.v2.task/gpu/$c/checkpoint-diagnostic.json"
  if [[ -r $report ]]; then
    $PY -c 'import json,sys; r=json.load(open(sys.argv[1])); print("  report: %s, %s; toggled %s; %s" % (r["verdict"], r["reason"], r.get("toggled"), ", ".join("%s %.0f ms" % (k[:-3], v) for k, v in r["phases"].items())))' "$report"
  fi
  ((rc == 0)) || { result FAIL "$case" "checkpoint rc=$rc"; wl_log "$c"; return; }
  # The driver was loaded by nvproxy-cuda-helper, which is gone; the static shim never maps it.
  local tpid shim drv=no
  tpid=$(CTR task ls | awk -v c="$c" '$1==c{print $2}'); shim=$(awk '/^PPid:/{print $2}' "/proc/$tpid/status")
  grep -q 'libcuda\|libnvidia-ml' "/proc/$shim/maps" && drv=yes
  log "$case: shim pid $shim ($(readlink "/proc/$shim/exe")) after the checkpoint: maps a driver library: $drv;" \
    "helpers left: $(pgrep -c -f nvproxy-cuda-helper); shim VmRSS $(awk '/^VmRSS/{print $2, $3}' "/proc/$shim/status")"
  [[ $drv == no ]] || ok=0
  advancing "$@" || { ok=0; log "$case: not progressing after the checkpoint"; }
  before=$(for f in "$@"; do iter "$f"; done | paste -sd/)
  TMO=30 CTR task kill -s KILL "$c" >/dev/null
  for _ in $(seq 50); do [[ $(task_status "$c") == STOPPED ]] && break; sleep 0.2; done
  CTR task rm "$c" >/dev/null; CTR c rm "$c" >/dev/null
  s=$(now)
  err=$(CTR c restore --live --rw "$c" "ckpt-$c" </dev/null 2>&1); rc=$?
  e=$(now)
  log "$case: ctr c restore rc=$rc in $(dt "$s" "$e") s; status $(task_status "$c")"
  [[ -n $err ]] && echo "$err" | sed 's/^/  | /'
  shimlog "checkpoint $c: (scan|resume)|restore of \\\\\"$c" 4 | sed 's/^/  shim: /'
  sleep 2
  after=$(for f in "$@"; do iter "$f"; done | paste -sd/)
  advancing "$@" || { ok=0; log "$case: not progressing after the restore"; wl_log "$c"; }
  after2=$(for f in "$@"; do iter "$f"; done | paste -sd/)
  local flags; flags=$(for f in "$@"; do okflag "$f"; done | paste -sd/)
  log "$case: iterations at checkpoint $at_ckpt, before kill $before, 2 s after restore $after, then $after2; data intact: $flags"
  [[ $flags == *False* || -z $flags ]] && ok=0
  ((rc == 0)) && [[ $(task_status "$c") == RUNNING ]] || ok=0
  if ((ok)); then result PASS "$case" "checkpoint+restore, continued from $at_ckpt (killed at $before) to $after2, data $flags"
  else result FAIL "$case" "rc=$rc after=$after flags=$flags"; fi
}
ckpt ckpt-cuda wl-ok "$H/ok/parent.txt" "$H/ok/child.txt"
((MULTI)) && ckpt ckpt-indep2 mg-indep2 "$H/indep2/rank0.txt" "$H/indep2/rank1.txt"

[[ $DRY == 1 ]] && exit 0
((MULTI)) || exit 0
refuse refuse-nccl-legacy nccl-legacy "collective (NCCL)" "$H/nccll/rank0.txt" "$H/nccll/rank1.txt"
refuse refuse-nccl-destroyed nccl-destroyed "collective (NCCL)" "$H/nccld/rank0.txt" "$H/nccld/rank1.txt"
touch "$H/nccld/ar"
wait_ready 60 "$H/nccld/ar0.txt" "$H/nccld/ar1.txt" && log "nccl-destroyed re-init + all_reduce afterwards: $(cat $H/nccld/ar0.txt $H/nccld/ar1.txt | tr '\n' ' ')" \
  || { log "nccl-destroyed all_reduce afterwards did not finish"; wl_log nccl-destroyed 20; }

# ---------------- stuck: allow_unrestorable on p2p1 ----------------
if [[ ${SKIP_STUCK:-0} != 1 ]]; then
  write_cfg "  allow_unrestorable: true"
  start_wl mg-p2p1-force "$H/p2pf" /tmp/mg multigpu_workload.py p2p1
  write_cfg
  if wait_ready 120 "$H/p2pf/p2p.txt"; then
    s=$(now)
    err=$(CTR c checkpoint --task --rw mg-p2p1-force ckpt-p2pf 2>&1); rc=$?
    log "stuck-p2p1: checkpoint with allow_unrestorable rc=$rc in $(dt "$s" "$(now)") s"
    echo "$err" | sed 's/^/  | /'
    shimlog "checkpoint mg-p2p1-force:|of \"mg-p2p1-force\"" 14 | sed 's/^/  shim: /'
    a=$(iter "$H/p2pf/p2p.txt"); sleep 3; b=$(iter "$H/p2pf/p2p.txt")
    if grep -qi stuck <<<"$err"; then result INFO stuck-p2p1 "the shim reported the stuck process (progress $a -> $b)"
    else result INFO stuck-p2p1 "rc=$rc, no stuck report (progress $a -> $b)"; fi
  else
    log "mg-p2p1-force not ready"; wl_log mg-p2p1-force
  fi
fi
