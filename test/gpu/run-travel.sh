#!/bin/bash
# A GPU checkpoint to another node through a registry (issues 35 and 47) on the GPU machine, from the
# repo root, after test/gpu/pack.sh and test/gpu/pack-travel.sh (docker-registry in .carry-travel).
# Nodes A and B are two containerd 1.7 (the kit's), one after the other, each with its own root,
# state and image store; a registry (docker-registry) on loopback between. The shim moves the
# images itself (chunks, STREAMS at once):
#   A  the sglang shape with its HTTP front end (workloads/shapes_workload.py: a CUDA parent, two
#      spawn CUDA workers, a tokenizer) checkpointed by `ctr c checkpoint --task --rw`, restored
#      here once (the local restore, timed); served a while, then checkpointed again (what periodic
#      checkpoints of a server are); `cp` of the first image's files beside the registry's disk (the
#      push's yardstick); `image push --ctr` of the first, then of the second (only what changed)
#   B  A's store emptied and A's containerd gone: `image pull --ctr`, `ctr c restore --live --rw`
#      (which pulls the memory into B's store): the front end answers, every process goes on and
#      its device data is intact; checkpointed there and pushed into a repository of its own (a
#      replica's: the chunks it shares with A's image are mounted, not sent); then the second image
#      pulled beside the first (only what changed)
# Prints "RESULT PASS|FAIL name: detail" and a timing table; logs to $OUT.
# Run: set -o pipefail; timeout 580 bash test/gpu/run-travel.sh 2>&1 | tee $OUT/travel.log
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
REF=127.0.0.1:5123/ckpt/llm:v1 REF2=127.0.0.1:5123/ckpt/llm:v2
STREAMS=${STREAMS:-16}  # the shim's defaults (checkpoint/config.h)
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
  registry_streams: $STREAMS
  registry_chunk_mib: ${CHUNK_MIB:-16}
  registry_compression: ${COMPRESS:-none}
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
  s_=$s e_=$e
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
LOCAL_S=$(dt "$s_" "$e_")
if ((RC == 0)) && advancing $(files) && intact $(files); then result PASS local-restore "http [$(http)]"; else result FAIL local-restore "rc=$RC"; fi
# The push's yardstick: the first image's files copied onto the registry's disk, synced.
entry=$(find "$W/a/store" -name 'pages-*.img' -size +100M -printf '%T@ %h\n' | sort -n | head -1 | cut -d' ' -f2)
[[ -d $entry ]] || { log "no image of the first checkpoint in $W/a/store"; find "$W/a/store" -maxdepth 3 | head; exit 1; }
BYTES=$(du -sb "$entry" | cut -f1)
sync
timed "A: cp -r of the first image's files to the registry's disk, synced ($((BYTES >> 20)) MiB)" bash -c "cp -r '$entry' '$W/registry/cp' && sync"
CP_S=$(dt "$s_" "$e_")
rm -rf "$W/registry/cp"
push() {  # NAME REF
  "$SHIM" image push --ctr "$1" "$2" --address "$SOCK" --namespace gpu --store "$W/a/store" --config "$W/a/shim.yaml" --streams "$STREAMS"
}
timed "A: image push --ctr ckpt/llm:1, $STREAMS streams" push ckpt/llm:1 "$REF"
PUSH_S=$(dt "$s_" "$e_")
((RC == 0)) && result PASS push "$(echo "$OUTPUT" | grep '^pushed' | head -1)" || result FAIL push "$OUTPUT"
reg1=$(du -sb "$W/registry" | cut -f1)
# The restored server serves a while (its front end asked, its workers fed), then is checkpointed
# again: the second image of one server, what periodic checkpoints push. containerd 1.7 leaves the
# CRIU layer out of a container's second checkpoint while the first image holds the same spec: the
# first goes once pushed (what the shim's refusal tells users).
CTR images rm --sync ckpt/llm:1 >/dev/null
for _ in $(seq 20); do http >/dev/null; sleep 0.25; done
timed "A: second ctr c checkpoint --task --rw (after serving)" CTR c checkpoint --task --rw llm ckpt/llm:2
stop_task
timed "A: image push --ctr ckpt/llm:2 (the second checkpoint)" push ckpt/llm:2 "$REF2"
reg2=$(du -sb "$W/registry" | cut -f1)
sent=$(echo "$OUTPUT" | sed -n 's/^pushed .*bytes (\([0-9]*\) sent.*/\1/p' | head -1)
total=$(echo "$OUTPUT" | sed -n 's/^pushed .* chunks, \([0-9]*\) bytes.*/\1/p' | head -1)
if ((RC == 0)) && [[ -n $sent && -n $total ]] && ((total > 0)); then
  pct=$(awk -v a="$sent" -v b="$total" 'BEGIN{printf "%.2f", 100*a/b}')
  ROWS+=("| the second push sent $sent of $total bytes ($pct %), the registry grew $(((reg2 - reg1) >> 20)) MiB | |")
  awk -v p="$pct" 'BEGIN{exit !(p < 5)}' && result PASS second-push "$pct % of the image sent" || result FAIL second-push "$pct % of the image sent"
else
  result FAIL second-push "rc=$RC $OUTPUT"
fi
log "registry holds $(du -sh "$W/registry" | cut -f1)"
# What the second push would send at other largest-chunk sizes, and the floor (pages of the second
# image found nowhere in the first), per file: bench/chunk_reuse on the two images in A's store.
entry2=$(find "$W/a/store" -name 'pages-*.img' -size +100M -printf '%T@ %h\n' | sort -n | tail -1 | cut -d' ' -f2)
if [[ -x $PACK/bin/chunk_reuse && -d $entry2 && $entry2 != "$entry" ]]; then
  log "bench/chunk_reuse $entry $entry2"
  timeout 240 "$PACK/bin/chunk_reuse" "$entry" "$entry2" --sizes-mib "${REUSE_SIZES:-64,32,16,8}" 2>&1 | sed 's/^/  | /'
fi
kit_teardown travel-a
rm -rf "$W/a"

# ---------------- node B ----------------
mkdir -p "$W/b/store"; write_cfg "$W/b" "$W/b/store"
kit_start "$W/b" "$W/b/shim.yaml" || { log "node B did not start"; exit 1; }
# The registry's files stay in the page cache, as after any recent push (and as the local restore
# read A's image): B's pull then runs at the pace of B's side, not of one disk read and written at
# once. DROP_CACHES=1 drops them (one disk serving the registry and taking B's pull).
[[ ${DROP_CACHES:-0} == 1 ]] && { sync; echo 1 >/proc/sys/vm/drop_caches; }
timed "B: image pull --ctr (the archive)" "$SHIM" image pull --ctr "$REF" --address "$SOCK" --namespace gpu --store "$W/b/store" \
  --config "$W/b/shim.yaml"
PULL_S=$(dt "$s_" "$e_")
((RC == 0)) && result PASS pull "$(echo "$OUTPUT" | tr '\n' ' ')" || result FAIL pull "$OUTPUT"
# A's processes ran on past the first checkpoint (served, checkpointed again): their progress files
# say more than B's processes, restored from the first checkpoint, will. B's write them anew.
rm -f $(files)
timed "B: ctr c restore --live --rw (pulls the memory, $STREAMS streams)" CTR c restore --live --rw llm ckpt/llm:1
B_S=$(dt "$s_" "$e_")
if ((RC == 0)) && advancing $(files) && intact $(files) && (($(iter "$H/parent.txt") >= at)); then
  result PASS travel "restored on B from $REF: http [$(http)], every process on, device data intact; B's store $(du -sh "$W/b/store" | cut -f1)"
else
  result FAIL travel "rc=$RC status $(CTR task ls | awk '$1=="llm"{print $3}') $(tail -3 "$H/parent.txt" 2>/dev/null)"
fi
grep -o "pulling [^\"]* from [^\"]*" "$W/b/containerd.log" | tail -2 | sed "s/^/  | /"
# The restored server as a replica with a repository of its own: checkpointed on B and pushed into
# ckpt/llm-b; B pulled ckpt/llm, so the chunks its image shares with that one are mounted (the
# registry links them), not sent. SKIP_REPLICA=1 leaves it out.
if ((RC == 0)) && [[ ${SKIP_REPLICA:-0} != 1 ]]; then
  CTR images rm --sync ckpt/llm:1 >/dev/null
  timed "B: ctr c checkpoint --task --rw (the restored replica)" CTR c checkpoint --task --rw llm ckpt/llm:b
  timed "B: image push --ctr ckpt/llm:b into ckpt/llm-b (its own repository)" "$SHIM" image push --ctr ckpt/llm:b \
    127.0.0.1:5123/ckpt/llm-b:v1 --address "$SOCK" --namespace gpu --store "$W/b/store" --config "$W/b/shim.yaml" --streams "$STREAMS"
  sent=$(echo "$OUTPUT" | sed -n 's/^pushed .*bytes (\([0-9]*\) sent.*/\1/p' | head -1)
  mounted=$(echo "$OUTPUT" | sed -n 's/^pushed .*, \([0-9]*\) mounted from other repositories.*/\1/p' | head -1)
  total=$(echo "$OUTPUT" | sed -n 's/^pushed .* chunks, \([0-9]*\) bytes.*/\1/p' | head -1)
  if ((RC == 0)) && [[ -n $sent && -n $mounted && -n $total ]] && ((total > 0)); then
    pct=$(awk -v a="$sent" -v b="$total" 'BEGIN{printf "%.2f", 100*a/b}')
    ROWS+=("| the replica's push into ckpt/llm-b sent $sent of $total bytes ($pct %), mounted $mounted | |")
    awk -v p="$pct" -v m="$mounted" 'BEGIN{exit !(p < 5 && m > 0)}' && result PASS replica-push "$pct % sent, $((mounted >> 20)) MiB mounted" ||
      result FAIL replica-push "$pct % sent, $mounted bytes mounted"
  else
    result FAIL replica-push "rc=$RC $OUTPUT"
  fi
  # Pushed: B's own image goes (the machine's disk holds the registry and two pulled images, not a third).
  CTR images rm --sync ckpt/llm:b >/dev/null
  rm -rf "$W/b/store/gpu"
fi
stop_task
timed "B: image pull of the second image beside the first" "$SHIM" image pull "$REF2.data" --store "$W/b/store" --config "$W/b/shim.yaml"
((RC == 0)) && result PASS second-pull "$(echo "$OUTPUT" | grep '^pulled' | head -1)" || result FAIL second-pull "$OUTPUT"
ROWS+=("| push: $((BYTES >> 20)) MiB in $PUSH_S s against cp's $CP_S s | $(awk -v p="$PUSH_S" -v c="$CP_S" 'BEGIN{printf "%.2fx of cp", c/p}') |")
ROWS+=("| B's pull and restore: $(awk -v a="$PULL_S" -v b="$B_S" 'BEGIN{printf "%.1f", a+b}') s against the local restore's $LOCAL_S s | $(awk -v a="$PULL_S" -v b="$B_S" -v l="$LOCAL_S" 'BEGIN{printf "%.2fx", (a+b)/l}') |")
