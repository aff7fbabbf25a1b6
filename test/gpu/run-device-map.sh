#!/bin/bash
# Restore with GPU pairs on the one-GPU machine: the driver's restore arguments with a pair (the
# H200 onto itself, as the shim passes every checkpointed GPU when one moved) through the shim's
# own path (nvproxy-cuda-toggle -> nvproxy-cuda-helper over ttrpc -> libcuda). A PyTorch process on
# the host keeps a tensor on the GPU; it is locked, checkpointed, restored with the pair and
# unlocked, and its data must be intact. The moves between two GPUs need two (issue 19, x2).
# Run from the repo root after test/gpu/pack.sh: timeout 200 bash test/gpu/run-device-map.sh
set -uo pipefail
B=$(pwd)/.carry/bin
PY=${PY:-/opt/torch/.venv/bin/python3}
LIB=/usr/local/nvidia/lib64
[[ -x $PY ]] || PY=python3
T=("$B/nvproxy-cuda-toggle" --helper "$B/nvproxy-cuda-helper" --libcuda "$LIB/libcuda.so.1" --libnvml "$LIB/libnvidia-ml.so.1")
UUID=$(nvidia-smi --query-gpu=uuid --format=csv,noheader | head -1)
echo "GPU 0: $UUID"
D=$(mktemp -d)
# Writes the tensor's checksum once a second; "ok" while it matches what it was filled with.
"$PY" -c '
import torch, time, sys
x = torch.arange(1 << 26, device="cuda", dtype=torch.float32)
want = float(x.double().sum())
print("ready", flush=True)
while True:
    got = float(x.double().sum())
    print("ok" if got == want else "BAD %s != %s" % (got, want), flush=True)
    time.sleep(0.2)
' >"$D/out" 2>&1 &
P=$!
for _ in $(seq 100); do grep -q ready "$D/out" && break; sleep 0.2; done
grep -q ready "$D/out" || { echo "RESULT FAIL devmap1: the workload did not start: $(cat "$D/out")"; exit 1; }
step() {
  local s e rc
  s=$(date +%s%N)
  "${T[@]}" --pid "$P" "$@"
  rc=$?
  e=$(date +%s%N)
  echo "step $*: rc=$rc $(((e - s) / 1000000)) ms"
  return $rc
}
ok=1
step state && step lock && step checkpoint && step state || ok=0
lines_ckpt=$(wc -l <"$D/out")
if ((ok)); then step restore --device-map "$UUID=$UUID" || ok=0; fi
((ok)) && { step unlock || ok=0; }
step state
n0=$(grep -c '^ok' "$D/out")
for _ in $(seq 50); do (($(grep -c '^ok' "$D/out") > n0 + 3)) && break; sleep 0.2; done
n1=$(grep -c '^ok' "$D/out")
kill "$P" 2>/dev/null
tail -3 "$D/out"
if ((ok)) && ((n1 > n0 + 3)) && ! grep -q BAD "$D/out"; then
  echo "RESULT PASS devmap1: lock, checkpoint, restore with the pair $UUID=$UUID and unlock through nvproxy-cuda-helper; the tensor's checksum is intact after ($n0 -> $n1 checks, $lines_ckpt lines before)"
else
  echo "RESULT FAIL devmap1: ok=$ok checks $n0 -> $n1; $(grep BAD "$D/out" | head -1)"
fi
