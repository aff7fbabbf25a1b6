#!/bin/bash
# A GPU checkpoint to another node through a registry (issue 35) on the GPU machine, from the repo
# root, after test/gpu/pack.sh and test/gpu/pack-travel.sh (skopeo and docker-registry with their
# libraries in .carry-travel). Nodes A and B are two containerd 1.7 (the kit's), one after the other,
# each with its own root, state and image store; a registry (docker-registry) on loopback between:
#   A  the sglang shape with its HTTP front end (workloads/shapes_workload.py: a CUDA parent, two
#      spawn CUDA workers, a tokenizer) checkpointed by `ctr c checkpoint --task --rw`, restored
#      here once (the local restore, timed), then `image push --ctr` of that checkpoint
#   B  A's store emptied and A's containerd gone: `image pull --ctr`, `ctr c restore --live --rw`
#      (which pulls the memory into B's store): the front end answers, every process goes on and
#      its device data is intact
# Prints "RESULT PASS|FAIL name: detail" and a timing table; logs to $OUT.
# Run: set -o pipefail; timeout 500 bash test/gpu/run-travel.sh 2>&1 | tee $OUT/travel.log
set -uo pipefail
REPO=$(pwd)
PACK=${PACK:-$REPO/.carry}
OUTD=${OUT:-/tmp/nvgpu-travel}
mkdir -p "$OUTD"
W=/var/tmp/nvgpu-travel
source "$REPO/test/gpu/lib/kit-containerd.sh"
kit_install
rm -rf "$W"; mkdir -p "$W/host"
source "$REPO/test/gpu/lib/travel.sh"
travel_registry "$W" 5123
log "skopeo: $(skopeo --version 2>&1 | head -1)"
REF=127.0.0.1:5123/ckpt/llm:v1
PY=/opt/torch/.venv/bin/python3
SHIM=$PACK/bin/containerd-shim-nvproxy-v1
write_cfg() {  # DIR STORE
  cat >"$1/shim.yaml" <<EOT
runtime: {binary: /opt/kit/root/usr/sbin/runc, root: /run/containerd/nvproxy-travel-$(basename "$1"), criu_path: /opt/kit/bin/criu}
log_level: debug
gpu: {driver_root: /}
checkpoint:
  libcuda: /usr/local/nvidia/lib64/libcuda.so.1
  libnvml: /usr/local/nvidia/lib64/libnvidia-ml.so.1
  content_store: $1/root
  image_store: $2
  registry_tls_verify: false
  registry_timeout_s: 300
EOT
}
H=$W/host
files() { local r; for r in parent worker0 worker1 tokenizer; do printf '%s ' "$H/$r.txt"; done; }
source "$REPO/test/gpu/lib/progress.sh"
ADVANCE_S=10
http() { "$PY" -c 'import sys,urllib.request; print(urllib.request.urlopen("http://127.0.0.1:18200/", timeout=5).read().decode().strip())' 2>&1; }
stop_task() {
  TMO=30 CTR task kill -a -s KILL llm >/dev/null 2>&1
  for _ in $(seq 100); do [[ $(CTR task ls | awk '$1=="llm"{print $3}') == STOPPED ]] && break; sleep 0.2; done
  CTR task rm llm >/dev/null 2>&1; CTR c rm llm >/dev/null 2>&1
}
ROWS=("| step | s |" "| --- | ---: |")
timed() {  # NAME CMD...: runs it, adds a row; sets OUTPUT and RC
  local s e
  s=$(now); OUTPUT=$("${@:2}" 2>&1 </dev/null); RC=$?; e=$(now)
  ROWS+=("| $1 | $(dt "$s" "$e") |")
  log "$1: rc=$RC in $(dt "$s" "$e") s"; [[ -n $OUTPUT ]] && echo "$OUTPUT" | tail -5 | sed 's/^/  | /'
}

# ---------------- node A ----------------
mkdir -p "$W/a/store"; write_cfg "$W/a" "$W/a/store"
kit_start "$W/a" "$W/a/shim.yaml" || { log "node A did not start"; exit 1; }
trap 'kit_teardown travel; kill $REGPID 2>/dev/null; printf "%s\n" "${RESULTS[@]}" "${ROWS[@]}"' EXIT
CTR run -d --snapshotter native --runtime io.containerd.nvproxy.v1 --net-host "${BINDS[@]}" \
  --mount "type=bind,src=$REPO/test/gpu/workloads,dst=/probe,options=rbind:ro" --mount "type=bind,src=$H,dst=/out,options=rbind:rw" \
  --env NVIDIA_VISIBLE_DEVICES=all --env HOME=/tmp --env PYTHONUNBUFFERED=1 --env HTTP_PORT=18200 $IMAGE llm \
  sh -c "exec $PY /probe/shapes_workload.py sglang >/tmp/llm.log 2>&1" >/dev/null || log "start failed"
for _ in $(seq 600); do ready $(files) && break; sleep 0.25; done
log "A: ready, http [$(http)]"
# B must go on from the checkpoint's state: at least the parent's iteration read just before it.
at=$(iter "$H/parent.txt")
timed "A: ctr c checkpoint --task --rw" CTR c checkpoint --task --rw llm ckpt/llm:1
stop_task
timed "A: local restore (ctr c restore --live --rw)" CTR c restore --live --rw llm ckpt/llm:1
if ((RC == 0)) && advancing $(files) && intact $(files); then result PASS local-restore "http [$(http)]"; else result FAIL local-restore "rc=$RC"; fi
stop_task
timed "A: image push --ctr" "$SHIM" image push --ctr ckpt/llm:1 "$REF" --address "$SOCK" --namespace gpu --store "$W/a/store" \
  --config "$W/a/shim.yaml"
((RC == 0)) && result PASS push "$(echo "$OUTPUT" | head -1)" || result FAIL push "$OUTPUT"
log "registry holds $(du -sh "$W/registry" | cut -f1)"
kit_teardown travel-a
rm -rf "$W/a"

# ---------------- node B ----------------
mkdir -p "$W/b/store"; write_cfg "$W/b" "$W/b/store"
kit_start "$W/b" "$W/b/shim.yaml" || { log "node B did not start"; exit 1; }
timed "B: image pull --ctr (the archive)" "$SHIM" image pull --ctr "$REF" --address "$SOCK" --namespace gpu --store "$W/b/store" \
  --config "$W/b/shim.yaml"
((RC == 0)) && result PASS pull "$(echo "$OUTPUT" | tr '\n' ' ')" || result FAIL pull "$OUTPUT"
timed "B: ctr c restore --live --rw (pulls the memory)" CTR c restore --live --rw llm ckpt/llm:1
if ((RC == 0)) && advancing $(files) && intact $(files) && (($(iter "$H/parent.txt") >= at)); then
  result PASS travel "restored on B from $REF: http [$(http)], every process on, device data intact; B's store $(du -sh "$W/b/store" | cut -f1)"
else
  result FAIL travel "rc=$RC status $(CTR task ls | awk '$1=="llm"{print $3}') $(tail -3 "$H/parent.txt" 2>/dev/null)"
fi
stop_task
