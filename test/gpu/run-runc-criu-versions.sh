#!/bin/bash
# runc and CRIU versions (issue 23) on the GPU machine (H200, kernel 6.18, no network), from the repo root, after
# test/gpu/pack.sh and test/gpu/pack-runc-criu-versions.sh. Through ctr -> containerd 1.7 (the kit's) -> our
# shim -> runc, with the sglang shape and an HTTP front end (workloads/shapes_workload.py, HTTP_PORT):
#   runc143   runc 1.4.3 (no global --criu) with runtime.criu_path naming CRIU 4.2.1 off PATH:
#             ctr c checkpoint --task --rw, kill, ctr c restore --live --rw; progress, device data and
#             the HTTP answers continue
#   criu411   the same shape with runtime.criu_path naming Debian 13's CRIU 4.1.1: refused before any
#             CUDA toggle (CRIU < 4.2 cannot dump inet sockets on kernel >= 6.16), still running
# Prints "RESULT PASS|FAIL|INFO name: detail"; containerd23.log.gz and diagnostics23.json to $OUT.
# Run: set -o pipefail; timeout 560 bash test/gpu/run-runc-criu-versions.sh 2>&1 | tee $OUT/run23.log
set -uo pipefail
REPO=$(pwd)
PACK=${PACK:-$REPO/.carry}
OUTD=${OUT:-/tmp/nvgpu-out}
CASES=${CASES:-runc143 criu411}
mkdir -p "$OUTD"
W=/var/tmp/nvgpu23
source "$(dirname "${BASH_SOURCE[0]}")/lib/report.sh"
source "$(dirname "${BASH_SOURCE[0]}")/lib/containerd.sh"
want() { [[ " $CASES " == *" $1 "* ]]; }

mkdir -p /opt/kit/bin /opt/c411 && tar -C /opt/kit -xJf "$PACK/kit/kit.tar.xz"
# Neither CRIU is on PATH: only runtime.criu_path can find them.
printf '#!/bin/sh\nLD_LIBRARY_PATH=/opt/kit/root/usr/lib/x86_64-linux-gnu exec /opt/kit/root/usr/sbin/criu "$@"\n' >/opt/kit/bin/criu-4.2
printf '#!/bin/sh\nLD_LIBRARY_PATH=%s/criu411/root/usr/lib/x86_64-linux-gnu exec %s/criu411/root/usr/sbin/criu "$@"\n' "$PACK" "$PACK" >/opt/c411/criu
chmod +x /opt/kit/bin/criu-4.2 /opt/c411/criu
mv /opt/kit/root/usr/sbin/criu /opt/kit/root/usr/sbin/criu.real 2>/dev/null && sed -i 's|sbin/criu "|sbin/criu.real "|' /opt/kit/bin/criu-4.2
RUNC143=$PACK/runc143/runc; CTDDIR=/opt/kit/root/usr/bin
PY=/opt/torch/.venv/bin/python3
SHIMDIR=$PACK/bin
export PATH=$SHIMDIR:$CTDDIR:$PATH:/usr/local/nvidia/bin
command -v criu && log "WARNING: a criu on PATH: $(command -v criu)"
log "kernel $(uname -r); runc143: $($RUNC143 --version | head -1); criu 4.2: $(/opt/kit/bin/criu-4.2 --version | head -1); criu old: $(/opt/c411/criu --version | head -1); containerd: $($CTDDIR/containerd --version)"

rm -rf "$W" /var/tmp/nvgpu-runsc /var/tmp/nvgpu16; mkdir -p "$W"  # earlier runs' images fill the 64 GB disk
SOCK=$W/containerd.sock
CFG=$W/shim.yaml
write_cfg() {  # RUNTIME CRIU
  cat >"$CFG" <<EOF
runtime:
  binary: $1
  root: /run/containerd/nvproxy-gpu23
  criu_path: $2
log_level: debug
gpu:
  driver_root: /
checkpoint:
  libcuda: /usr/local/nvidia/lib64/libcuda.so.1
  libnvml: /usr/local/nvidia/lib64/libnvidia-ml.so.1
  content_store: $W/root
EOF
}
write_cfg "$RUNC143" /opt/kit/bin/criu-4.2
CTR() { timeout "${TMO:-180}" "$CTDDIR/ctr" -a "$SOCK" -n gpu "$@"; }
IMAGE=docker.io/library/nvproxy-gpu:test
ctd_start "$W" "$CFG" "$PACK/gpu-image.tar" native || { log "image import failed"; exit 1; }
teardown() {
  ctd_kill_tasks
  kill "$CTDPID" 2>/dev/null; sleep 1
  gzip -c "$W/containerd.log" >"$OUTD/containerd23.log.gz" 2>/dev/null
  printf '%s\n' "${RESULTS[@]}"
}
trap teardown EXIT

BINDS=()
bind_ro() { BINDS+=(--mount "type=bind,src=$1,dst=$1,options=bind:ro"); }
for d in /usr/*; do [[ $d == /usr/local || -L $d || ! -d $d ]] || bind_ro "$d"; done
[[ -d /opt/torch ]] && bind_ro /opt/torch
H=$W/host
start_wl() {  # NAME PORT
  mkdir -p "$H/$1"
  CTR run -d --snapshotter native --runtime io.containerd.nvproxy.v1 --net-host "${BINDS[@]}" \
    --mount "type=bind,src=$H/$1,dst=/out,options=rbind:rw" --env NVIDIA_VISIBLE_DEVICES=all --env HOME=/tmp \
    --env PYTHONUNBUFFERED=1 --env HTTP_PORT="$2" $IMAGE "$1" sh -c "exec $PY /probe/shapes_workload.py sglang >/log/$1.log 2>&1" >/dev/null ||
    log "start of $1 failed"
}
source "$(dirname "${BASH_SOURCE[0]}")/lib/progress.sh"
files() { local r; for r in parent worker0 worker1 tokenizer; do printf '%s ' "$H/$1/$r.txt"; done; }
http() { "$PY" -c 'import sys,urllib.request; print(urllib.request.urlopen("http://127.0.0.1:%s/" % sys.argv[1], timeout=5).read().decode().strip())' "$1" 2>&1; }
task_status() { CTR task ls | awk -v id="$1" '$1==id{print $3}'; }
report() { local r="$W/state/io.containerd.runtime.v2.task/gpu/$1/checkpoint-diagnostic.json"; { echo "// $1 $2"; cat "$r" 2>/dev/null; echo; } >>"$OUTD/diagnostics23.json"; }

want runc143 && start_wl new 18123
if want criu411; then write_cfg "$RUNC143" /opt/c411/criu; start_wl old 18124; fi
for _ in $(seq 600); do { ! want runc143 || ready $(files new); } && { ! want criu411 || ready $(files old); } && break; sleep 0.25; done
log "ready: new http=[$(http 18123)] old http=[$(http 18124)]"

if want runc143; then
  F=$(files new)
  s=$(now); err=$(CTR c checkpoint --task --rw new ckpt-new 2>&1); rc=$?; e=$(now)
  at=$(for f in $F; do iter "$f"; done | paste -sd/)
  log "runc143: checkpoint rc=$rc in $(dt "$s" "$e") s; iterations $at; http [$(http 18123)]"; [[ -n $err ]] && echo "$err" | sed 's/^/  | /'
  report new checkpoint
  TMO=30 CTR task kill -a -s KILL new >/dev/null
  for _ in $(seq 50); do [[ $(task_status new) == STOPPED ]] && break; sleep 0.2; done
  CTR task rm new >/dev/null; CTR c rm new >/dev/null
  s=$(now); rerr=$(CTR c restore --live --rw new ckpt-new </dev/null 2>&1); rrc=$?; e=$(now)
  log "runc143: restore rc=$rrc in $(dt "$s" "$e") s; status $(task_status new)"; [[ -n $rerr ]] && echo "$rerr" | sed 's/^/  | /'
  ok=1; advancing $F || { ok=0; log "runc143: not progressing after the restore"; }
  h=$(http 18123); after=$(for f in $F; do iter "$f"; done | paste -sd/)
  log "runc143: after restore $after; http [$h]; data intact: $(intact $F && echo yes || echo no)"
  read -r hi hs0 hs <<<"$h"  # the front end's iteration, its tensor's checksum at start and now
  ((rc == 0 && rrc == 0)) && intact $F && [[ $hi =~ ^[0-9]+$ && -n $hs0 && $hs0 == "$hs" ]] || ok=0
  if ((ok)); then result PASS runc143 "runc 1.4.3 + criu_path: checkpointed at $at, restored, now $after, HTTP [$h]"
  else result FAIL runc143 "rc=$rc restore rc=$rrc after=$after http=[$h]"; fi
fi
if want criu411; then
  F=$(files old)
  s=$(now); err=$(CTR c checkpoint --task --rw old ckpt-old 2>&1); rc=$?; e=$(now)
  echo "$err" | sed 's/^/  | /'; report old criu411
  toggled=no; grep -q 'checkpoint old: lock \|"old".*lock' "$W/containerd.log" && toggled=yes
  if ((rc != 0)) && [[ $err == *4.1* && $err == *4.2* ]] && [[ $(task_status old) == RUNNING ]] && advancing $F && intact $F && [[ -n $(http 18124) ]]; then
    result PASS criu411 "refused in $(dt "$s" "$e") s naming both versions; lock seen in the log: $toggled; running, progressing, HTTP [$(http 18124)]"
  else result FAIL criu411 "rc=$rc in $(dt "$s" "$e") s; status $(task_status old); lock seen: $toggled"; fi
fi
