#!/bin/bash
# Workload shapes (issue 16) on the GPU machine (H200, no network), from the repo root, after test/gpu/pack.sh (or
# PACK=DIR: the shim, helper, kit and image from DIR instead of .carry). Through ctr -> containerd
# 1.7 -> our shim -> runc -> CRIU (the kit's), workloads shaped like what people run
# (workloads/shapes_workload.py):
#   measure   read-only: fds, device maps (sizes), fd flags, NVML of an IPC exporter/importer, a
#             managed-memory process, a plain CUDA process and the sglang shape (signals16.txt)
#   sglang    CUDA parent + 2 spawn CUDA workers + CPU tokenizer, mp.Queue: checkpoint + restore
#   ipc       CUDA tensor shared parent -> child (torch.multiprocessing): what the checkpoint does
#   managed   cuMemAllocManaged 1 GiB: what the checkpoint does, the table's rows
#   exec      a CUDA process exec'd beside a CUDA init: refused before any toggle, naming it
#   big       one process with GiB of device memory (BIG_GIB, default 20): `ctr c checkpoint` (the
#             space check with containerd's copy), then `ctr task checkpoint --image-path` (no copy)
#   bench     sglang shape: `ctr c checkpoint` vs `ctr task checkpoint --image-path`, end to end and
#             the shim's share (its report's phases)
# Prints "RESULT PASS|FAIL|INFO name: detail"; files to $OUT: signals16.txt, diagnostics16.json,
# containerd16.log.gz. Run: set -o pipefail; timeout 330 bash test/gpu/run-shapes.sh 2>&1 | tee $OUT/run16.log
set -uo pipefail
REPO=$(pwd)
PACK=${PACK:-$REPO/.carry}
OUTD=${OUT:-/tmp/nvgpu-out}
CASES=${CASES:-measure sglang ipc managed exec big bench}
BIG_GIB=${BIG_GIB:-20}
mkdir -p "$OUTD"
W=/var/tmp/nvgpu16
source "$(dirname "${BASH_SOURCE[0]}")/lib/report.sh"
source "$(dirname "${BASH_SOURCE[0]}")/lib/containerd.sh"
LAST_ERR=""
want() { [[ " $CASES " == *" $1 "* ]]; }

mkdir -p /opt/kit/bin && tar -C /opt/kit -xJf "$PACK/kit/kit.tar.xz"
printf '#!/bin/sh\nLD_LIBRARY_PATH=/opt/kit/root/usr/lib/x86_64-linux-gnu exec /opt/kit/root/usr/sbin/criu "$@"\n' >/opt/kit/bin/criu
chmod +x /opt/kit/bin/criu
RUNC=/opt/kit/root/usr/sbin/runc; CRIU=/opt/kit/bin/criu; CTDDIR=/opt/kit/root/usr/bin
PY=/opt/torch/.venv/bin/python3
SHIMDIR=$PACK/bin
SHIM=$SHIMDIR/containerd-shim-nvproxy-v1
export PATH=$SHIMDIR:$CTDDIR:/opt/kit/bin:$PATH:/usr/local/nvidia/bin
log "runc: $($RUNC --version | head -1); criu: $($CRIU --version | head -1); containerd: $($CTDDIR/containerd --version)"
nvidia-smi -L; nvidia-smi --query-gpu=driver_version,memory.total,memory.used --format=csv,noheader; df -h /var/tmp /tmp | sed 's/^/  /'

rm -rf "$W"; mkdir -p "$W"
SOCK=$W/containerd.sock
CFG=$W/shim.yaml
write_cfg() {
  cat >"$CFG" <<EOF
runtime:
  binary: $RUNC
  root: /run/containerd/nvproxy-gpu16
  criu_path: $CRIU
log_level: debug
gpu:
  driver_root: /
checkpoint:
  libcuda: /usr/local/nvidia/lib64/libcuda.so.1
  libnvml: /usr/local/nvidia/lib64/libnvidia-ml.so.1
  lock_timeout_ms: 10000
  content_store: $W/root
${1:-}
EOF
}
# STORE=yes: checkpoint.image_store (one copy on disk); PAGE_IO as in run-large-memory.sh (off: main's
# CRIU options before the page I/O work; s28; gate8; on: the defaults).
EXTRA=""
[[ ${STORE:-no} == yes ]] && EXTRA+="  image_store: $W/store"$'\n'"  image_store_keep: 1"$'\n'
case ${PAGE_IO:-on} in
  off) EXTRA+="  page_writers: 0"$'\n'"  page_readers: 0"$'\n'"  restore_huge_pages: false"$'\n' ;;
  s28) EXTRA+="  page_writers: 8"$'\n'"  write_after_cuda_resume: false"$'\n' ;;
  gate8) EXTRA+="  page_writers: 8"$'\n' ;;
esac
write_cfg "$EXTRA"
log "shim config: STORE=${STORE:-no} PAGE_IO=${PAGE_IO:-on}"
CTR() { timeout "${TMO:-180}" "$CTDDIR/ctr" -a "$SOCK" -n gpu "$@"; }
IMAGE=docker.io/library/nvproxy-gpu:test
ctd_start "$W" "$CFG" "$PACK/gpu-image.tar" || { log "image import failed"; exit 1; }
log "containerd up (snapshotter $SNAP)"
teardown() {
  log "teardown"
  ctd_kill_tasks
  kill "$CTDPID" 2>/dev/null; sleep 1
  gzip -c "$W/containerd.log" >"$OUTD/containerd16.log.gz" 2>/dev/null
  printf '%s\n' "${RESULTS[@]}"
}
trap teardown EXIT

BINDS=()
bind_ro() { BINDS+=(--mount "type=bind,src=$1,dst=$1,options=bind:ro"); }
for d in /usr/*; do [[ $d == /usr/local || -L $d || ! -d $d ]] || bind_ro "$d"; done
while read -r mp; do
  case $mp in /usr/local|/usr/local/*) continue ;; /usr/*|/opt/torch/*) [[ -e $mp && ! -L $mp ]] && bind_ro "$mp" ;; esac
done < <(awk '{print $5}' /proc/self/mountinfo | sort -u)
[[ -d /opt/torch ]] && bind_ro /opt/torch
pyreal=$(readlink -f "$PY"); case $pyreal in /usr/*|/opt/torch/*) ;; *) bind_ro "$(dirname "$(dirname "$pyreal")")" ;; esac
ENVS=(--env NVIDIA_VISIBLE_DEVICES=all --env HOME=/tmp --env PYTHONUNBUFFERED=1)
RT=io.containerd.nvproxy.v1
H=$W/host
start_wl() {  # NAME ARGS...  (progress in $H/NAME)
  local name=$1; shift
  mkdir -p "$H/$name"
  CTR run -d --runtime $RT --net-host "${BINDS[@]}" --mount "type=bind,src=$H/$name,dst=/out,options=rbind:rw" \
    "${ENVS[@]}" $IMAGE "$name" sh -c "exec $PY /probe/shapes_workload.py $* >/log/$name.log 2>&1" >/dev/null || log "start of $name failed"
}
source "$(dirname "${BASH_SOURCE[0]}")/lib/progress.sh"
ADVANCE_S=6  # every file advances within 6 s
okflag() { awk '{print $NF}' "$1" 2>/dev/null; }
wait_ready() { local t=$1; shift; for _ in $(seq $((t * 4))); do ready "$@" && return 0; sleep 0.25; done; return 1; }
task_status() { CTR task ls | awk -v id="$1" '$1==id{print $3}'; }
pids_of() { CTR task ps "$1" | awk 'NR>1{print $1}' | paste -sd, -; }
wl_log() { local f; f=$(find "$W/state" -path "*/$1/rootfs/log/$1.log" 2>/dev/null | head -1); [[ -n $f ]] && tail -n "${2:-15}" "$f"; }
bundle() { echo "$W/state/io.containerd.runtime.v2.task/gpu/$1"; }
report() {  # the shim's checkpoint-diagnostic.json of container $1, summarised
  local r; r=$(bundle "$1")/checkpoint-diagnostic.json
  { echo "// $1 $2"; cat "$r" 2>/dev/null; echo; } >>"$OUTD/diagnostics16.json"
  [[ -r $r ]] && $PY -c 'import json,sys; r=json.load(open(sys.argv[1])); ph=r.get("phases",{}); print("  report: %s, %s; toggled %s; shim total %.2f s; %s" % (r["verdict"], r["reason"][:300], r.get("toggled"), sum(ph.values())/1000, ", ".join("%s %.0f ms" % (k[:-3], v) for k, v in ph.items())))' "$r"
}
files() { local n=$1; shift; for r in "$@"; do printf '%s ' "$H/$n/$r.txt"; done; }

# ---------------- workloads (in parallel: torch takes a while to import) ----------------
# big: the disk is filled (fallocate) so that one copy of its image fits and containerd's second
# copy does not: FILL_LEFT_GIB (default 35) free for a BIG_GIB (20) process, whose image is ~23 GiB.
FILL_LEFT_GIB=${FILL_LEFT_GIB:-35}
FREE_GIB=$(df -B1G --output=avail "$W" | tail -1 | tr -d ' ')
same_fs=no; [[ $(stat -c %d /tmp) == $(stat -c %d "$W") ]] && same_fs=yes
log "free on $W: $FREE_GIB GiB (/tmp on the same filesystem: $same_fs); big workload: $BIG_GIB GiB"
WAITS=()  # "CONTAINER FILES..."
want sglang || want bench || want measure && { start_wl sglang sglang; WAITS+=("sglang $(files sglang parent worker0 worker1 tokenizer)"); }
want ipc || want measure && { start_wl ipc ipc; WAITS+=("ipc $(files ipc parent child)"); }
want managed || want measure && { start_wl managed managed; WAITS+=("managed $(files managed managed)"); }
want measure && { start_wl plain single plain 512; WAITS+=("plain $(files plain plain)"); }
if want exec; then
  start_wl exec single init 512
  CTR task exec -d --exec-id cuda-exec exec sh -c "exec $PY /probe/shapes_workload.py single execd 512 >/log/execd.log 2>&1" || log "exec failed"
  WAITS+=("exec $(files exec init execd)")
fi
want big && { start_wl big big "$BIG_GIB"; WAITS+=("big $(files big big)"); }
SG=$(files sglang parent worker0 worker1 tokenizer)
settled() {  # every container ready, or stopped (its log shown later)
  local w c fs
  for w in "${WAITS[@]}"; do
    read -r c fs <<<"$w"
    ready $fs || [[ $(task_status "$c") == STOPPED ]] || return 1
  done
}
for _ in $(seq 600); do settled && break; sleep 0.25; done
log "ready: $(for f in $H/*/*.txt; do printf '%s=[%s] ' "${f#$H/}" "$(tr -d '\n' <"$f")"; done)"
for w in "${WAITS[@]}"; do
  read -r c fs <<<"$w"
  ready $fs || { log "$c is not ready ($(task_status "$c")); its log:"; wl_log "$c" 20; }
done
nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader | paste -sd' '

if want measure; then
  args=()
  for c in ipc managed plain sglang; do args+=("$c=$(pids_of $c)"); done
  $PY test/gpu/measure.py "${args[@]}" 2>&1 | tee "$OUTD/signals16.txt"
  for c in ipc managed; do
    echo "--- diagnose $c (read-only)" | tee -a "$OUTD/signals16.txt"
    "$SHIM" diagnose --pid $(pids_of $c | tr , ' ') --libcuda /usr/local/nvidia/lib64/libcuda.so.1 \
      --libnvml /usr/local/nvidia/lib64/libnvidia-ml.so.1 2>&1 | tee -a "$OUTD/signals16.txt"
  done
fi

# ckpt CASE CONTAINER FILES...: ctr c checkpoint (leave running), kill, ctr c restore, data intact
ckpt() {
  local case=$1 c=$2; shift 2
  local s e rc err at before after ok=1
  s=$(now); err=$(CTR c checkpoint --task --rw "$c" "ckpt-$c" 2>&1); rc=$?; e=$(now)
  at=$(for f in "$@"; do iter "$f"; done | paste -sd/)
  log "$case: ctr c checkpoint rc=$rc in $(dt "$s" "$e") s (end to end); iterations right after: $at"
  [[ -n $err ]] && echo "$err" | sed 's/^/  | /'
  report "$c" checkpoint
  ((rc == 0)) || { result FAIL "$case" "checkpoint rc=$rc"; wl_log "$c"; return 1; }
  advancing "$@" || { ok=0; log "$case: not progressing after the checkpoint"; }
  before=$(for f in "$@"; do iter "$f"; done | paste -sd/)
  TMO=30 CTR task kill -a -s KILL "$c" >/dev/null
  for _ in $(seq 50); do [[ $(task_status "$c") == STOPPED ]] && break; sleep 0.2; done
  CTR task rm "$c" >/dev/null; CTR c rm "$c" >/dev/null
  s=$(now); err=$(CTR c restore --live --rw "$c" "ckpt-$c" </dev/null 2>&1); rc=$?; e=$(now)
  log "$case: ctr c restore rc=$rc in $(dt "$s" "$e") s; status $(task_status "$c")"
  [[ -n $err ]] && echo "$err" | sed 's/^/  | /'
  advancing "$@" || { ok=0; log "$case: not progressing after the restore"; wl_log "$c"; }
  after=$(for f in "$@"; do iter "$f"; done | paste -sd/)
  local flags; flags=$(for f in "$@"; do okflag "$f"; done | paste -sd/)
  log "$case: iterations at checkpoint $at, before kill $before, after restore $after; data intact: $flags"
  [[ $flags == *False* || -z $flags ]] && ok=0
  ((rc == 0)) && [[ $(task_status "$c") == RUNNING ]] || ok=0
  if ((ok)); then result PASS "$case" "checkpoint ($(dt "$s" "$e") s restore) continued from $at (killed at $before) to $after, data $flags"
  else result FAIL "$case" "rc=$rc after=$after flags=$flags"; fi
}
# attempt CASE CONTAINER EXPECT FILES...: a checkpoint expected to be refused before any toggle
attempt() {
  local case=$1 c=$2 expect=$3; shift 3
  local s e rc err st
  s=$(now); err=$(CTR c checkpoint --task --rw "$c" "ckpt-$c" 2>&1); rc=$?; e=$(now)
  echo "$err" | sed 's/^/  | /'
  LAST_ERR=$err
  report "$c" "$case"
  st=$(task_status "$c")
  local toggled=no; grep -q "checkpoint $c: lock " "$W/containerd.log" && toggled=yes
  if ((rc != 0)) && grep -q -- "$expect" <<<"$err" && [[ $st == RUNNING ]] && advancing "$@"; then
    result PASS "$case" "refused in $(dt "$s" "$e") s; toggled before: $toggled; $st and progressing"
  else
    local adv=no; advancing "$@" && adv=yes
    result INFO "$case" "rc=$rc in $(dt "$s" "$e") s, expected [$expect]; toggled: $toggled; status $st; progressing: $adv"
  fi
}

want sglang && ckpt sglang sglang $SG
want exec && attempt exec exec "outside the init's process tree" $(files exec init execd)
want ipc && attempt ipc ipc "share GPU memory through CUDA IPC" $(files ipc parent child)
want managed && attempt managed managed "holds managed memory" $(files managed managed)
want managed && log "managed: table rows (one per process and device): $(grep -cE '^[0-9]+ +' <<<"$LAST_ERR")"
if want big; then
  if [[ $same_fs == yes ]] && ((FREE_GIB > FILL_LEFT_GIB)); then
    fallocate -l "$((FREE_GIB - FILL_LEFT_GIB))G" "$W/fill" && log "big: filled the disk to $(df -B1G --output=avail "$W" | tail -1 | tr -d ' ') GiB free"
    attempt big-space big "containerd copies it into its content store" $(files big big)
  fi
  s=$(now); err=$(CTR task checkpoint --image-path "$W/img-big" big 2>&1); rc=$?; e=$(now)
  echo "$err" | sed 's/^/  | /'
  report big image-path
  log "big: ctr task checkpoint --image-path rc=$rc in $(dt "$s" "$e") s; image $(du -sh "$W/img-big" 2>/dev/null | cut -f1)"
  if ((rc == 0)) && advancing $(files big big); then result PASS big-image-path "$BIG_GIB GiB checkpointed in $(dt "$s" "$e") s, kept running"
  elif [[ $err == *ctrd-checkpoint* ]]; then
    # containerd 1.7 passes --image-path on only for io.containerd.runc.* runtimes: its temp dir again.
    result INFO big-image-path "containerd ignored --image-path for this runtime (its ctrd-checkpoint dir, then its content store): refused by the space check as above"
  else result FAIL big-image-path "rc=$rc"; fi
  rm -rf "$W/img-big" "$W/fill"
fi
if want bench && [[ $(task_status sglang) == RUNNING ]]; then
  s=$(now); err=$(CTR task checkpoint --image-path "$W/img-sg" sglang 2>&1); rc=$?; e=$(now)
  [[ -n $err ]] && echo "$err" | sed 's/^/  | /'
  report sglang bench-image-path
  log "bench: sglang shape, ctr task checkpoint --image-path rc=$rc in $(dt "$s" "$e") s end to end; image $(du -sh "$W/img-sg" 2>/dev/null | cut -f1); df $(df -B1G --output=avail "$W" | tail -1 | tr -d ' ') GiB free"
  advancing $SG && log "bench: sglang progressing after it" || log "bench: sglang NOT progressing after it"
  rm -rf "$W/img-sg"
fi
