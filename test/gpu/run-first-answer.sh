#!/bin/bash
# Issue 56 item 4 on the GPU machine: how long after `ctr c restore` returns the LLM-server shape
# answers again. The sglang shape (workloads/shapes_workload.py: a CUDA parent with an HTTP front
# end, two spawned CUDA workers, a CPU tokenizer) through ctr -> containerd 1.7 -> our shim -> runc
# -> the kit's CRIU, with the image store: checkpoint (leave running), kill, restore. A poller started
# before the restore asks GET / every 10 ms and notes its first answer; each worker's progress file
# says when it iterates again; the restored processes' threads (state, wchan, comm) are sampled
# every 100 ms for 6 s after the restore returned (threads.txt), to show what they wait in.
# Prints RESULT lines; containerd-fa.log.gz, threads.txt, diagnostics-fa.json to $OUT.
# Run: set -o pipefail; timeout 400 bash test/gpu/run-first-answer.sh 2>&1 | tee $OUT/first-answer.log
set -uo pipefail
REPO=$(pwd)
PACK=${PACK:-$REPO/.carry}
OUTD=${OUT:-/tmp/nvgpu-out}
mkdir -p "$OUTD"
W=/var/tmp/nvgpufa
source "$REPO/test/gpu/lib/kit-containerd.sh"
source "$REPO/test/gpu/lib/progress.sh"
kit_install
rm -rf "$W" /var/tmp/nvgpu26; mkdir -p "$W/store" "$W/h"
CFG=$W/shim.yaml
kit_shim_config "$CFG" "{binary: /opt/kit/root/usr/sbin/runc, root: /run/containerd/nvproxy-gpufa, criu_path: /opt/kit/bin/criu}" \
  "image_store: $W/store" "image_store_keep: 1"
kit_start "$W" "$CFG" || { log "containerd or the image import failed"; exit 1; }
trap 'kit_teardown fa; printf "%s\n" "${RESULTS[@]}"' EXIT
PY=/opt/torch/.venv/bin/python3
PORT=18301
F=""; for r in parent worker0 worker1 tokenizer; do F+="$W/h/$r.txt "; done
CTR run -d --snapshotter native --runtime io.containerd.nvproxy.v1 --net-host "${BINDS[@]}" \
  --mount "type=bind,src=$W/h,dst=/out,options=rbind:rw" --env NVIDIA_VISIBLE_DEVICES=all --env HOME=/tmp \
  --env PYTHONUNBUFFERED=1 --env HTTP_PORT=$PORT $IMAGE llm sh -c "exec $PY /probe/shapes_workload.py sglang >/out/llm.log 2>&1" >/dev/null ||
  { result FAIL start "ctr run failed"; exit 1; }
# shellcheck disable=SC2086
for _ in $(seq 600); do ready $F && break; sleep 0.25; done
ask() { "$PY" -c 'import sys,urllib.request; print(urllib.request.urlopen("http://127.0.0.1:%s/" % sys.argv[1], timeout=5).read().decode().strip())' "$PORT" 2>&1; }
log "ready: http [$(ask)]"
# shellcheck disable=SC2086
advancing $F || log "not progressing before the checkpoint"
s=$(now); CTR c checkpoint --task llm llmref >"$W/ck.out" 2>&1; rc=$?; log "checkpoint rc=$rc in $(dt "$s" "$(now)") s $(cat "$W/ck.out")"
((rc == 0)) || { result FAIL checkpoint "rc=$rc"; exit 1; }
TMO=60 CTR task kill -a -s KILL llm >/dev/null
for _ in $(seq 100); do [[ $(CTR task ls | awk '$1=="llm"{print $3}') == STOPPED ]] && break; sleep 0.2; done
CTR task rm llm >/dev/null; CTR c rm llm >/dev/null
# The poller: wall-clock time of its first answer, to $W/first.
"$PY" - "$PORT" "$W/first" <<'PYEOF' &
import sys, time, urllib.request
port, out = sys.argv[1], sys.argv[2]
while True:
    try:
        body = urllib.request.urlopen("http://127.0.0.1:%s/" % port, timeout=30).read().decode().strip()
        open(out, "w").write("%.3f %s\n" % (time.time(), body))
        break
    except Exception:
        time.sleep(0.01)
PYEOF
poller=$!
# Iterations at the restore's return, then when each file first moves.
s=$(now); CTR c restore --live llm llmref </dev/null >"$W/rs.out" 2>&1; rrc=$?; e=$(now)
log "restore rc=$rrc in $(dt "$s" "$e") s $(cat "$W/rs.out")"
declare -A base moved
for f in $F; do base[$f]=$(iter "$f"); done
pids=$(CTR task ps llm | awk 'NR>1 {print $1}')
end=$(($(date +%s) + 6))
while (($(date +%s) < end)); do
  t=$(dt "$e" "$(now)")
  for f in $F; do [[ -z ${moved[$f]:-} ]] && (($(iter "$f") > base[$f])) && moved[$f]=$t; done
  for p in $pids; do
    for tdir in /proc/"$p"/task/*; do
      [[ -r $tdir/stat ]] || continue
      printf '%s %s %s %s %s\n' "$t" "$p" "$(cat "$tdir/comm" 2>/dev/null)" "$(awk '{print $3}' "$tdir/stat" 2>/dev/null)" "$(cat "$tdir/wchan" 2>/dev/null)"
    done
  done >>"$OUTD/threads.txt"
  sleep 0.1
done
for _ in $(seq 300); do [[ -s $W/first ]] && break; sleep 0.1; done
kill "$poller" 2>/dev/null
read -r ft body <"$W/first" 2>/dev/null || ft=""
fa=$([[ -n $ft ]] && awk -v a="$ft" -v b="$e" 'BEGIN{printf "%.3f", a-b}' || echo none)
moves=$(for f in $F; do printf '%s=%s ' "$(basename "$f" .txt)" "${moved[$f]:-none}"; done)
log "first answer ${fa} s after the restore returned [$body]; first iteration after the return: $moves"
grep -o 'restore of \\"llm\\" done in[^"]*' "$W_KIT/containerd.log" | tail -1
result INFO first-answer "restore $(dt "$s" "$e") s; first HTTP answer $fa s after it returned; iterations moved at $moves"
{ cat "$W/state/io.containerd.runtime.v2.task/gpu/llm/checkpoint-diagnostic.json" 2>/dev/null; } >"$OUTD/diagnostics-fa.json"
