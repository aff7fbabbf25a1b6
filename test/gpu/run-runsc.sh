#!/bin/bash
# runsc with nvproxy (issue 17) on the GPU machine (H200, Ubuntu 24.04, no network), from the repo root, after
# test/gpu/pack.sh (.carry/kit) and test/gpu/pack-runsc.sh (.carry-runsc) here. Every case goes
# through ctr -> containerd 1.7 -> containerd-shim-nvproxy-v1 -> the current runsc with --nvproxy:
#   smi-torch      NVIDIA_VISIBLE_DEVICES=all alone: nvidia-smi -L and a PyTorch computation inside
#   refuse-holder  sglang-shaped (CUDA parent + 2 spawn CUDA workers) + a process holding
#                  /dev/nvidiactl without CUDA: refused with the table naming it by its sandbox pid,
#                  nothing toggled, the container keeps running and computing
#   nvml-only      the same shape with an NVML-only process (nvmlInit, nvmlDeviceGetCount each second):
#                  what the driver answers for it (measured: driver 580 checkpoints it like a CUDA
#                  process), and whether NVML still answers in it afterwards
#   ckpt-sglang    the same without the NVML process: checkpoint with --rw (toggles inside the sandbox, runsc
#                  checkpoint, resume), kill, restore, CUDA back in every process, device data intact
#                  in every process; exec into the restored container; times per phase
# Prints "RESULT PASS|FAIL|INFO name: detail"; logs to $OUT (or /tmp/nvgpu-runsc): containerd.log.gz
# (with the shim's log), reports.json (every checkpoint-diagnostic.json), runsc logs.
# Run: set -o pipefail; timeout 400 bash test/gpu/run-runsc.sh 2>&1 | tee $OUT/run.log
set -uo pipefail
REPO=$(pwd)
OUTD=${OUT:-/tmp/nvgpu-runsc}
mkdir -p "$OUTD"
W=/var/tmp/nvgpu-runsc
source "$(dirname "${BASH_SOURCE[0]}")/lib/report.sh"
source "$(dirname "${BASH_SOURCE[0]}")/lib/containerd.sh"

mkdir -p /opt/kit /opt/runsc && tar -C /opt/kit -xJf .carry/kit/kit.tar.xz && tar -C /opt/runsc -xJf .carry-runsc/runsc.tar.xz
RUNSC=/opt/runsc/bin/runsc
CTDDIR=/opt/kit/root/usr/bin
PY=/opt/torch/.venv/bin/python3
SHIMDIR=$REPO/.carry-runsc/bin
export PATH=$SHIMDIR:$CTDDIR:$PATH:/usr/local/nvidia/bin
log "runsc: $($RUNSC --version | head -1); containerd: $($CTDDIR/containerd --version)"
uname -r; nvidia-smi -L; nvidia-smi --query-gpu=driver_version --format=csv,noheader

rm -rf "$W"; mkdir -p "$W/runsc-logs"
SOCK=$W/containerd.sock
CFG=$W/shim.yaml
cat >"$CFG" <<EOF
runtime:
  binary: $RUNSC
  root: /run/containerd/nvproxy-runsc-gpu
  extra_args: ["--network=none", "--ignore-cgroups", "--debug-log=$W/runsc-logs/", "--debug"]
log_level: debug
gpu:
  driver_root: /
checkpoint:
  lock_timeout_ms: 10000
EOF
CTR() { timeout "${TMO:-180}" "$CTDDIR/ctr" -a "$SOCK" -n gpu "$@"; }
IMAGE=docker.io/library/nvproxy-gpu:test
ctd_start "$W" "$CFG" .carry-runsc/gpu-image.tar || { log "image import failed"; exit 1; }
log "containerd up (snapshotter $SNAP)"

teardown() {
  log "teardown"
  ctd_kill_tasks
  kill "$CTDPID" 2>/dev/null; sleep 1
  gzip -c "$W/containerd.log" >"$OUTD/containerd.log.gz" 2>/dev/null
  tar -C "$W" -czf "$OUTD/runsc-logs.tgz" runsc-logs 2>/dev/null
  printf '%s\n' "${RESULTS[@]}"
}
trap teardown EXIT

# The host's /usr/* (not /usr/local, where the shim binds the driver) and /opt/torch, read-only.
BINDS=()
bind_ro() { BINDS+=(--mount "type=bind,src=$1,dst=$1,options=rbind:ro"); }
for d in /usr/*; do
  [[ $d == /usr/local || -L $d || ! -d $d ]] && continue
  bind_ro "$d"
done
[[ -d /opt/torch ]] && bind_ro /opt/torch
ENVS=(--env NVIDIA_VISIBLE_DEVICES=all --env HOME=/tmp --env PYTHONUNBUFFERED=1)
RT=io.containerd.nvproxy.v1
task_status() { CTR task ls | awk -v id="$1" '$1==id{print $3}'; }
shimlog() { grep -E "$1" "$W/containerd.log" | grep -v 'msg="runtime: ' | sed -E 's/^.*msg="//; s/" namespace=.*$//; s/\\n/\n    /g; s/\\"/"/g' | tail -n "${2:-20}"; }
iter() { local v; v=$(cut -d' ' -f1 "$1" 2>/dev/null); [[ $v =~ ^[0-9]+$ ]] && echo "$v" || echo 0; }
okflag() { awk '{print $NF}' "$1" 2>/dev/null; }
ready() { local f; for f in "$@"; do [[ -s $f ]] || return 1; done; }
wait_ready() { local t=$1; shift; for _ in $(seq $((t * 2))); do ready "$@" && return 0; sleep 0.5; done; return 1; }
advancing() {
  local f a=() i=0
  for f in "$@"; do a+=("$(iter "$f")"); done
  sleep 3
  for f in "$@"; do (($(iter "$f") > ${a[i]})) || return 1; i=$((i + 1)); done
}
report() {  # the shim's checkpoint-diagnostic.json of container $1: verdict, toggled, phases
  local r="$W/state/io.containerd.runtime.v2.task/gpu/$1/checkpoint-diagnostic.json"
  [[ -r $r ]] || return
  { echo "// $1 $2"; cat "$r"; echo; } >>"$OUTD/reports.json"
  $PY -c 'import json,sys; r=json.load(open(sys.argv[1])); print("  report: %s, %s; toggled %s; %s" % (r.get("verdict"), r.get("reason"), r.get("toggled"), ", ".join("%s %.0f ms" % (k, v) for k, v in (r.get("phases") or {}).items())))' "$r"
}
H=$W/host
start_wl() {  # NAME ARGS...
  local name=$1; shift
  mkdir -p "$H/$name"
  CTR run -d --runtime $RT "${BINDS[@]}" --mount "type=bind,src=$H/$name,dst=/out,options=rbind:rw" \
    "${ENVS[@]}" $IMAGE "$name" sh -c "exec $PY /probe/runsc_sglang.py $* >/out/stdout.log 2>&1" >/dev/null || log "start of $name failed"
}

# The workloads import torch for a while: start them first.
start_wl sg-holder with-holder
start_wl sg-nvml with-nvml
start_wl sg-ok

# ---------------- nvidia-smi and PyTorch ----------------
s=$(now)
out=$(CTR run --rm --runtime $RT "${BINDS[@]}" "${ENVS[@]}" $IMAGE smi sh -c 'echo "$ ls /dev/nvidia*"; ls /dev/nvidia*; cat /etc/ld.so.conf.d/nvproxy.conf; ls -l /usr/local/nvidia/lib64/ | grep -E "libcuda.so|libnvidia-ml.so"; echo "$ nvidia-smi -L"; nvidia-smi -L; echo "nvidia-smi rc=$?"; '"$PY"' -c "import torch; x = torch.arange(1 << 20, device=\"cuda\", dtype=torch.float64); print(\"torch\", torch.__version__, torch.cuda.get_device_name(0), \"sum\", float(x.sum()), \"expect\", float((1 << 20) * ((1 << 20) - 1) / 2))"; echo "torch rc=$?"' 2>&1)
rc=$?
echo "$out" | sed 's/^/  | /'
if ((rc == 0)) && grep -q "^nvidia-smi rc=0" <<<"$out" && grep -q "^GPU 0: NVIDIA H200" <<<"$out" && grep -q "^torch rc=0" <<<"$out" &&
  awk '/^torch /{exit !($(NF-2) == $NF)}' <<<"$out"; then
  result PASS smi-torch "nvidia-smi -L and a PyTorch sum on the H200 inside runsc, only NVIDIA_VISIBLE_DEVICES=all ($(dt "$s" "$(now)") s)"
else
  result FAIL smi-torch "rc=$rc"
  shimlog 'smi' 10 | sed 's/^/  shim: /'
fi

# ---------------- wait for the workloads ----------------
wait_ready 240 "$H/sg-nvml/parent.txt" "$H/sg-nvml/worker0.txt" "$H/sg-nvml/worker1.txt" "$H/sg-nvml/nvml.txt" \
  "$H/sg-holder/parent.txt" "$H/sg-holder/worker0.txt" "$H/sg-holder/worker1.txt" "$H/sg-holder/holder.txt" \
  "$H/sg-ok/parent.txt" "$H/sg-ok/worker0.txt" "$H/sg-ok/worker1.txt" || log "workloads not all ready after 240 s"
for c in sg-holder sg-nvml sg-ok; do
  log "$c: $(task_status $c); $(for f in "$H/$c"/*.txt; do printf '%s=[%s] ' "$(basename "$f")" "$(tr -d '\n' <"$f")"; done)"
  [[ $(task_status $c) == RUNNING ]] || tail -20 "$H/$c/stdout.log"
done

# ---------------- a process holding the device without CUDA is refused ----------------
F=("$H/sg-holder/parent.txt" "$H/sg-holder/worker0.txt" "$H/sg-holder/worker1.txt")
hpid=$(awk '{print $1}' "$H/sg-holder/holder.txt" 2>/dev/null)
s=$(now)
err=$(CTR c checkpoint --task sg-holder ckpt-sg-holder 2>&1); rc=$?
e=$(now)
echo "$err" | sed 's/^/  | /'
report sg-holder refused
st=$(task_status sg-holder)
if ((rc != 0)) && grep -q "no CUDA" <<<"$err" && grep -Eq "^$hpid +" <<<"$err" && ! shimlog 'checkpoint sg-holder: lock ' 1 | grep -q lock &&
  [[ $st == RUNNING ]] && advancing "${F[@]}"; then
  result PASS refuse-holder "refused in $(dt "$s" "$e") s naming the non-CUDA holder (sandbox pid $hpid), nothing toggled; container $st, all 3 CUDA processes progressing"
else
  result FAIL refuse-holder "rc=$rc status=$st holder pid=$hpid"
fi

# ---------------- an NVML-only process: what the driver says ----------------
F=("$H/sg-nvml/parent.txt" "$H/sg-nvml/worker0.txt" "$H/sg-nvml/worker1.txt" "$H/sg-nvml/nvml.txt")
nvpid=$(awk '{print $2}' "$H/sg-nvml/nvml.txt" 2>/dev/null)
s=$(now)
err=$(CTR c checkpoint --task sg-nvml ckpt-sg-nvml 2>&1); rc=$?
e=$(now)
echo "$err" | sed 's/^/  | /'
report sg-nvml nvml-only
toggled=$(shimlog 'checkpoint sg-nvml: classify' 1)
sleep 2
nv=$(cat "$H/sg-nvml/nvml.txt" 2>/dev/null)
if advancing "${F[@]}"; then prog=yes; else prog=no; fi
result INFO nvml-only "checkpoint rc=$rc in $(dt "$s" "$e") s; NVML-only sandbox pid $nvpid; shim: $toggled; all progressing afterwards: $prog; NVML process now [$nv] (iteration pid rc)"

# ---------------- checkpoint + restore ----------------
F=("$H/sg-ok/parent.txt" "$H/sg-ok/worker0.txt" "$H/sg-ok/worker1.txt")
ok=1
s=$(now)
err=$(CTR c checkpoint --task --rw sg-ok ckpt-sg-ok 2>&1); rc=$?
e=$(now)
at_ckpt=$(for f in "${F[@]}"; do iter "$f"; done | paste -sd/)
log "ckpt-sglang: ctr c checkpoint rc=$rc in $(dt "$s" "$e") s; iterations right after: $at_ckpt"
[[ -n $err ]] && echo "$err" | sed 's/^/  | /'
report sg-ok checkpoint
shimlog 'checkpoint of \\"sg-ok' 4 | sed 's/^/  shim: /'
((rc == 0)) || ok=0
advancing "${F[@]}" || { ok=0; log "ckpt-sglang: not progressing after the checkpoint"; tail -5 "$H/sg-ok/stdout.log"; }
before=$(for f in "${F[@]}"; do iter "$f"; done | paste -sd/)
TMO=30 CTR task kill -s KILL sg-ok >/dev/null
for _ in $(seq 100); do [[ $(task_status sg-ok) == STOPPED ]] && break; sleep 0.2; done
CTR task rm sg-ok >/dev/null; CTR c rm sg-ok >/dev/null
s=$(now)
err=$(CTR c restore --live --rw sg-ok ckpt-sg-ok </dev/null 2>&1); rc=$?
e=$(now)
log "ckpt-sglang: ctr c restore rc=$rc in $(dt "$s" "$e") s; status $(task_status sg-ok)"
[[ -n $err ]] && echo "$err" | sed 's/^/  | /'
shimlog 'restore of \\"sg-ok' 6 | sed 's/^/  shim: /'
((rc == 0)) || ok=0
sleep 2
after=$(for f in "${F[@]}"; do iter "$f"; done | paste -sd/)
advancing "${F[@]}" || { ok=0; log "ckpt-sglang: not progressing after the restore"; tail -5 "$H/sg-ok/stdout.log"; }
after2=$(for f in "${F[@]}"; do iter "$f"; done | paste -sd/)
flags=$(for f in "${F[@]}"; do okflag "$f"; done | paste -sd/)
log "ckpt-sglang: iterations at checkpoint $at_ckpt, before kill $before, 2 s after restore $after, then $after2; data intact: $flags"
[[ $flags == True/True/True ]] || ok=0
s=$(now)
ex=$(TMO=60 CTR task exec --exec-id after sg-ok sh -c 'echo exec-ok' 2>&1); rc=$?
log "ckpt-sglang: exec into the restored container rc=$rc in $(dt "$s" "$(now)") s: $ex"
[[ $ex == exec-ok ]] || ok=0
if ((ok)); then result PASS ckpt-sglang "checkpoint+restore, continued from $at_ckpt (killed at $before) to $after2, data $flags, exec ok"
else result FAIL ckpt-sglang "after=$after2 flags=$flags"; fi

# ---------------- the restored container: pause/resume, checkpoint again ----------------
ok=1
TMO=30 CTR task pause sg-ok && [[ $(task_status sg-ok) == PAUSED ]] && TMO=30 CTR task resume sg-ok || ok=0
s=$(now)
err=$(CTR c checkpoint --task --rw sg-ok ckpt-sg-ok2 2>&1); rc=$?
e=$(now)
[[ -n $err ]] && echo "$err" | sed 's/^/  | /'
report sg-ok checkpoint-of-restored
((rc == 0)) || ok=0
advancing "${F[@]}" || ok=0
flags=$(for f in "${F[@]}"; do okflag "$f"; done | paste -sd/)
[[ $flags == True/True/True ]] || ok=0
if ((ok)); then result PASS restored-ops "pause/resume and a second checkpoint ($(dt "$s" "$e") s) of the restored container; all progressing, data $flags"
else result FAIL restored-ops "rc=$rc flags=$flags status=$(task_status sg-ok)"; fi
