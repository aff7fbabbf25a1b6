#!/bin/bash
# Issue 59 on the GPU machine: a gVisor GPU pod moved to another node through Kubernetes' own calls.
# Node A, a containerd 2.4 with CRI and the shim as the RuntimeClass handler `nvproxy` over runsc
# with nvproxy, runs a pod of two containers: "llm", the sglang shape (workloads/shapes_workload.py
# sglang: a CUDA parent with its HTTP front end on the sandbox's 127.0.0.1:18201, two spawn CUDA
# workers with busy matmuls, a tokenizer fed through mp.Queue) and "client", a CPU sidecar asking
# that front end every 0.5 s over the sandbox's loopback (workloads/http_client.py). `crictl
# checkpoint` of llm checkpoints the pod whole (CUDA toggled in every process, one `runsc
# checkpoint` of the sandbox) and the pod keeps running; `containerd-shim-nvproxy-v1 image push
# --kube` sends the image to a docker-registry on loopback. Node A is then removed (its pods,
# containerd, store). Node B, a second containerd 2.4 with its own root, state, store and socket,
# runs the same pod annotated restore.nvproxy.io/llm and restore.nvproxy.io/client (the pushed
# image): RunPodSandbox, CreateContainer and StartContainer as for any pod. Checked on B: the front
# end answers with A's device checksum, every process goes on from its checkpointed iteration (the
# parent, both workers, the tokenizer, the sidecar's count), device data intact.
# GPU2=1 (default): a third container, "gpu2", a plain CUDA process holding 512 MiB on the device
# (shapes_workload.py single), so that the pod has two GPU containers: the checkpoint is one attempt
# over both (every CUDA lock, in either container, before any checkpoint: checked in the shim's
# log), and B restores it with the others. GPU2=0: the pod of two containers, as before.
# Prints "RESULT PASS|FAIL name: detail" and one "FIGURES" line (crictl checkpoint s, push s, B's
# restore s from RunPodSandbox to the last container started); logs to $OUT: both containerd logs
# (with the shim's), runsc's logs, the image's record, the checkpoint's report.
#
# DRY=1: the same flow on a machine without a GPU (the CPU VM): the fake CUDA driver in the sandbox
# (test/e2e/lib/fake-cuda.sh; its app with two children stands for the three CUDA processes, and
# the shim toggles them), workloads/dry_torch standing in for PyTorch, the host's python3, this
# machine's criu. Needs build/test/fixtures.
# Needs (from the repo root): .carry-pod-runsc (test/gpu/pack-pod-runsc.sh), .carry-travel
# (test/gpu/pack-travel.sh). test/gpu/README.md has the call.
# Run: set -o pipefail; timeout 420 bash test/gpu/run-pod-runsc.sh 2>&1 | tee $OUT/pod-runsc.log
# Knobs: NVPROXY=on|auto (the shim's gpu.nvproxy; default on: a pod's sandbox is booted by its pause
# container, which asks for no GPU, and runsc sets nvproxy up for the sandbox at its boot only),
# CKPT_OF=llm|client (the container crictl checkpoint names), RUNSC_DEBUG=0|1 (runsc's debug logs),
# SHM_COPY=0|1|both (default 0; both: without, then with where that failed): the pod's /dev/shm
# files copied by this script from A's pod to B's before B's containers are restored. The shim
# makes a runsc pod's /dev/shm a tmpfs inside the sandbox (docs/install.md), which runsc's image
# holds; before that it was a bind of CRI's shm directory through runsc's gofer, whose files
# (multiprocessing's sem.mp-*) stayed on node A, and B's restore failed in runsc ("failed to walk
# "sem.mp-..." in mount "llm:/dev/shm""). The copy (taken after the checkpoint while A runs on) is
# kept to compare with a shim of before; A's directory is then empty.
set -uo pipefail
REPO=$(pwd)
DRY=${DRY:-0}
CARRY=${CARRY:-$REPO/.carry-pod-runsc}
OUTD=${OUT:-/tmp/nvgpu-pod-runsc}
W=${W:-/var/tmp/nvgpu-pod-runsc}
PORT=18201
REG=127.0.0.1:${REG_PORT:-5125}
CKPT_OF=${CKPT_OF:-llm}
GPU2=${GPU2:-1}
mkdir -p "$OUTD"
source "$REPO/test/gpu/lib/kit-containerd.sh" # kit_install, kit_shim_config; log, result, now, dt
source "$REPO/test/gpu/lib/progress.sh"       # iter, ready, advancing, intact
source "$REPO/test/gpu/lib/travel.sh"         # travel_registry
source "$REPO/test/gpu/lib/cri-node.sh"       # cri_node_install, cri_node, CRI, cri_stop_node
source "$REPO/test/e2e/lib/harness.sh"        # nv_wait_for (deadlines), nv_defer (the dry run's fake driver), the sweeps
ADVANCE_S=15

unmount_under() { awk -v w="$1/" 'index($2, w) == 1 {print $2}' /proc/mounts | sort -r | xargs -r -n1 umount -l 2>/dev/null; }
sweep() {  # DIR: the mounts left under it (a node's pods), then DIR
  unmount_under "$1"
  rm -rf "$1"
}
sweep "$W" # what an earlier run left
mkdir -p "$W/host" "$W/runsc-logs"
H=$W/host
PACK=$W/pack
mkdir -p "$PACK/bin" && tar -C "$PACK" -xJf "$CARRY/bin.tar.xz" && ln -s "$CARRY/kit" "$PACK/kit" || { log "no $CARRY/bin.tar.xz: test/gpu/pack-pod-runsc.sh"; exit 1; }
SHIM=$PACK/bin/containerd-shim-nvproxy-v1
mkdir -p "$W/runsc" && tar -C "$W/runsc" -xJf "$CARRY/runsc.tar.xz" || exit 1
RUNSC=$(find "$W/runsc" -name runsc -type f | head -1)
cri_node_install "$CARRY" || { log "containerd 2.4 or crictl missing in $CARRY"; exit 1; }
PAUSE=docker.io/local/pause:nvproxy-gpu
IMAGE=docker.io/library/nvproxy-gpu:test
if [[ $DRY == 1 ]]; then
  # This machine's criu (CRI's checkpoint asks for one); the kit's is for Ubuntu's /opt/kit.
  export PATH=$PACK/bin:$PATH
  NODE_PATH=$PACK/bin
  PY=/usr/bin/python3
  [[ -r /opt/nvproxy-deps/shared/env.sh ]] && source /opt/nvproxy-deps/shared/env.sh
  export NVPROXY_SHIM_DIR=$PACK/bin NVPROXY_FIXTURES_DIR=${NVPROXY_FIXTURES_DIR:-$REPO/build/test/fixtures}
  source "$REPO/test/e2e/lib/fake-cuda.sh"
  nv_fake_cuda_sandbox
  # The libraries where the image's /usr/local is (the host's /usr/lib comes in read-only, and a
  # file cannot be bound into it): the device layer's record gives the sandbox agent that directory.
  sed -i 's|containerPath: /usr/lib/x86_64-linux-gnu/|containerPath: /usr/local/fakecuda/|' "$FAKE/cdi/fake-gpu.yaml"
  GPU_YAML="gpu: {mode: cdi, cdi_spec_dirs: [$FAKE/cdi], nvproxy: \"off\"}"
  GPU_ENV='{"key": "NVIDIA_VISIBLE_DEVICES", "value": "0"}, {"key": "NVPROXY_FAKE_CUDA_DIR", "value": "/fakecuda"}, {"key": "PYTHONPATH", "value": "/probe/dry_torch"}'
  GPU_MOUNTS=", {\"container_path\": \"/fakecuda\", \"host_path\": \"$FAKE/cuda\"}, {\"container_path\": \"/fake\", \"host_path\": \"$FAKE/bin\", \"readonly\": true}"
  LLM_CMD="/fake/fake_cuda_app --dir /fakecuda --device /dev/fakegpu0 --map --children 2 & exec $PY /probe/shapes_workload.py sglang >/tmp/llm.log 2>&1"
  mkdir -p "$FAKE/cuda2" && chmod 777 "$FAKE/cuda2"
  GPU2_ENV='{"key": "NVIDIA_VISIBLE_DEVICES", "value": "0"}, {"key": "NVPROXY_FAKE_CUDA_DIR", "value": "/fakecuda2"}, {"key": "PYTHONPATH", "value": "/probe/dry_torch"}'
  GPU2_MOUNTS=", {\"container_path\": \"/fakecuda2\", \"host_path\": \"$FAKE/cuda2\"}, {\"container_path\": \"/fake\", \"host_path\": \"$FAKE/bin\", \"readonly\": true}"
  GPU2_CMD="/fake/fake_cuda_app --dir /fakecuda2 --device /dev/fakegpu0 --map & exec $PY /probe/shapes_workload.py single gpu2 512 >/tmp/gpu2.log 2>&1"
  EXTRA_CKPT=("lock_timeout_ms: 5000" 'device_globs: ["/dev/nvidia*", "/dev/fakegpu*"]')
  trap 'set +e; nv_run_deferred' EXIT
  SHM_COPY=${SHM_COPY:-0}
else
  kit_install # the kit's CRIU as /opt/kit/bin/criu; the shim on PATH
  NODE_PATH=$PACK/bin:/opt/kit/bin
  PY=/opt/torch/.venv/bin/python3
  GPU_YAML="gpu: {driver_root: /, nvproxy: \"${NVPROXY:-on}\"}"
  GPU_ENV='{"key": "NVIDIA_VISIBLE_DEVICES", "value": "all"}'
  GPU_MOUNTS=""
  LLM_CMD="exec $PY /probe/shapes_workload.py sglang >/tmp/llm.log 2>&1"
  GPU2_ENV=$GPU_ENV GPU2_MOUNTS=""
  GPU2_CMD="exec $PY /probe/shapes_workload.py single gpu2 512 >/tmp/gpu2.log 2>&1"
  EXTRA_CKPT=("lock_timeout_ms: 10000")
  SHM_COPY=${SHM_COPY:-0}
  uname -r
  nvidia-smi -L
  nvidia-smi --query-gpu=driver_version --format=csv,noheader
fi
log "runsc: $("$RUNSC" --version | head -1); crictl $("$CRICTL" --version | awk '{print $3}'); $("$PY" --version)"
travel_registry "$W" "${REG#*:}"

# shim_yaml NODE LINE...: the shim's config of a node: runsc with its root, the GPU lines, a store
# of the node's own, the registry without TLS, then each LINE (checkpoint: keys).
shim_yaml() {
  local d=$W/$1 dbg=""
  shift
  mkdir -p "$d/store" "$W/runsc-logs/${d##*/}"
  [[ ${RUNSC_DEBUG:-1} == 1 ]] && dbg=", \"--debug\", \"--debug-log=$W/runsc-logs/${d##*/}/\""
  CONTENT_ROOT=$d/root kit_shim_config "$d/shim.yaml" \
    "{binary: $RUNSC, root: /run/containerd/nvproxy-pod-runsc-${d##*/}, extra_args: [\"--network=none\", \"--ignore-cgroups\", \"--panic-log=$W/runsc-logs/${d##*/}/panic.log\"$dbg]}" \
    "image_store: $d/store" "registry_tls_verify: false" "registry_timeout_s: 300" "${EXTRA_CKPT[@]}" "$@"
  sed -i "s|^gpu: .*|$GPU_YAML|" "$d/shim.yaml"
}
pod_json() {  # NAME [IMAGE]: a pod in the host's network (no CNI); with IMAGE, restored from it
  local ann=""
  local more=""
  ((GPU2)) && more=", \"restore.nvproxy.io/gpu2\": \"${2:-}\""
  [[ -n ${2:-} ]] && ann=", \"annotations\": {\"restore.nvproxy.io/llm\": \"$2\", \"restore.nvproxy.io/client\": \"$2\"$more}"
  mkdir -p "$W/logs/$1"
  printf '{"metadata": {"name": "%s", "namespace": "default", "uid": "uid-%s"}, "log_directory": "%s", "linux": {"security_context": {"namespace_options": {"network": 2}}}%s}\n' \
    "$1" "$1" "$W/logs/$1" "$ann" >"$W/pod-$1.json"
}
# The host's /usr (the dirs the image has for it; not /usr/local, where the shim binds the driver)
# and /opt/torch, read-only, as in run-runsc.sh: the host's Python and PyTorch.
CRI_BINDS=""
for p in /usr/bin /usr/sbin /usr/lib /usr/lib64 /usr/libexec /usr/share /usr/include /opt/torch; do
  [[ -d $p && ! -L $p ]] && CRI_BINDS+=", {\"container_path\": \"$p\", \"host_path\": \"$p\", \"readonly\": true}"
done
ctr_json() {  # NAME ENV MOUNTS CMD: a container of the pod, the same on both nodes
  cat <<EOT
{"metadata": {"name": "$1"}, "image": {"image": "$IMAGE"}, "log_path": "$1.log",
 "command": ["sh", "-c", "$4"],
 "envs": [{"key": "HOME", "value": "/tmp"}, {"key": "PYTHONUNBUFFERED", "value": "1"}, {"key": "HTTP_PORT", "value": "$PORT"}$2],
 "mounts": [{"container_path": "/probe", "host_path": "$REPO/test/gpu/workloads", "readonly": true},
            {"container_path": "/out", "host_path": "$H"}$CRI_BINDS$3],
 "linux": {"security_context": {"namespace_options": {"pid": 1}}}}
EOT
}
ctr_json llm ", $GPU_ENV" "$GPU_MOUNTS" "$LLM_CMD" >"$W/llm.json"
ctr_json client "" "" "exec $PY /probe/http_client.py $PORT" >"$W/client.json"
ctr_json gpu2 ", $GPU2_ENV" "$GPU2_MOUNTS" "$GPU2_CMD" >"$W/gpu2.json"
FILES=("$H/parent.txt" "$H/worker0.txt" "$H/worker1.txt" "$H/tokenizer.txt" "$H/client.txt")
((GPU2)) && FILES+=("$H/gpu2.txt")
NCTR=$((2 + GPU2))
iters() { local f; for f in "${FILES[@]}"; do iter "$f"; done | paste -sd/; }
# The front end's answer "ITER S0 S", asked inside the sandbox (the pod's loopback is the sandbox's).
http() { TMO=30 CRI exec "$1" "$PY" -c "import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:$PORT/', timeout=5).read().decode().strip())" 2>&1; }
running() { (($(CRI ps -q --state running --pod "$1" 2>/dev/null | wc -l) == NCTR)); }
# create_gpu2 POD POD_JSON: the second GPU container, created and started (GPU2=1), its id in GPU2_ID.
create_gpu2() {
  GPU2_ID=""
  ((GPU2)) || return 0
  GPU2_ID=$(CRI create "$1" "$W/gpu2.json" "$2") && CRI start "$GPU2_ID" >/dev/null
}
# One attempt over both GPU containers: in the shim's log, every CUDA lock before any checkpoint.
locks_first() {  # CONTAINERD_LOG
  awk '/CUDA locked in container/ {l++; if (c) bad=1} /CUDA checkpointed in container/ {c++} END {
    printf "%d locks, %d checkpoints%s", l, c, (bad ? ", a lock after a checkpoint" : ""); exit (bad || !l || !c) }' "$1"
}
past() {  # every progress file's iteration is at least the one of $1 (a/b/c/d/e), in order
  local -a a
  local i=0 f
  IFS=/ read -ra a <<<"$1"
  for f in "${FILES[@]}"; do (($(iter "$f") >= a[i])) || return 1; i=$((i + 1)); done
}
pod_shm() {  # NODE CONTAINER: the host directory bound at /dev/shm in the container's spec
  "$PY" -c 'import json,sys; print(next((m["source"] for m in json.load(open(sys.argv[1]))["mounts"] if m["destination"] == "/dev/shm"), ""))' \
    "$W/$1/state/io.containerd.runtime.v2.task/k8s.io/$2/config.json" 2>/dev/null
}
report() {  # the shim's checkpoint-diagnostic.json of container $1 on node $2: verdict, phases
  local r=$W/$2/state/io.containerd.runtime.v2.task/k8s.io/$1/checkpoint-diagnostic.json
  [[ -r $r ]] || return 0
  cp "$r" "$OUTD/checkpoint-diagnostic.json"
  "$PY" -c 'import json,sys; r=json.load(open(sys.argv[1])); print("  report: %s; toggled %s; %s" % (r.get("verdict"), r.get("toggled"), ", ".join("%s %.0f ms" % (k, v) for k, v in (r.get("phases") or {}).items())))' "$r"
}
NODE=""
stop_node() {  # NAME: cri_stop_node, then what runsc left in the node's runtime root
  STOP_TMO=${STOP_TMO:-30} cri_stop_node "$1"
  _nv_sweep_root "$RUNSC" "/run/containerd/nvproxy-pod-runsc-$1/k8s.io"
  rm -rf "/run/containerd/nvproxy-pod-runsc-$1"
  NODE=""
}
FIG_CKPT=- FIG_PUSH=- FIG_RESTORE=- FIG_IMAGE=-
teardown() {
  [[ -n $NODE ]] && stop_node "$NODE"
  kill "$REGPID" 2>/dev/null
  unmount_under "$W"
  # The device tool brings back files of 16 MiB at most: the last 2 MB of each debug log.
  find "$W/runsc-logs" -type f -size +2M -exec sh -c 'tail -c 2000000 "$1" >"$1.t" && mv "$1.t" "$1"' _ {} \; 2>/dev/null
  tar -C "$W" -czf "$OUTD/runsc-logs.tgz" runsc-logs 2>/dev/null
  [[ $DRY == 1 ]] && { set +e; nv_run_deferred; }
  printf '%s\n' "${RESULTS[@]}"
  echo "FIGURES checkpoint_s=$FIG_CKPT push_s=$FIG_PUSH restore_b_s=$FIG_RESTORE image=$FIG_IMAGE"
}
trap teardown EXIT
fail_exit() { result FAIL "$1" "$2"; exit 1; }

# ---------------- node A ----------------
shim_yaml a
NODE=a
cri_node a "$W/a/shim.yaml" "$CARRY/gpu-image.tar" "$CARRY/pause.tar" || fail_exit node-a "containerd did not start"
pod_json a
s=$(now)
P=$(CRI runp --runtime nvproxy "$W/pod-a.json") && LLM=$(CRI create "$P" "$W/llm.json" "$W/pod-a.json") &&
  CLIENT=$(CRI create "$P" "$W/client.json" "$W/pod-a.json") && CRI start "$LLM" "$CLIENT" >/dev/null &&
  create_gpu2 "$P" "$W/pod-a.json" ||
  fail_exit start-a "$(grep -E 'level=error' "$W/a/containerd.log" | tail -3)"
log "A: pod $P started in $(dt "$s" "$(now)") s: llm $LLM, client $CLIENT${GPU2_ID:+, gpu2 $GPU2_ID}"
if ! nv_wait_for -t "${READY_S:-240}" ready "${FILES[@]}"; then
  CRI exec "$LLM" cat /tmp/llm.log 2>&1 | tail -20
  fail_exit ready-a "not every process wrote its progress: $(ls "$H")"
fi
if [[ $DRY == 1 ]]; then
  cuda_ready() { (($(find "$FAKE/cuda" -name '*.ready' | wc -l) >= 3)); }
  nv_wait_for -t 30 cuda_ready || fail_exit ready-a "the fake CUDA app did not start: $(ls "$FAKE/cuda")"
  mapfile -t CUDA_PIDS < <(nv_fake_cuda_pids)
  CUDA2_PIDS=()
  if ((GPU2)); then
    cuda2_ready() { find "$FAKE/cuda2" -name '*.ready' | grep -q .; }
    nv_wait_for -t 30 cuda2_ready || fail_exit ready-a "gpu2's fake CUDA app did not start: $(ls "$FAKE/cuda2")"
    mapfile -t CUDA2_PIDS < <(find "$FAKE/cuda2" -maxdepth 1 -name '*.cuda' -printf '%f\n' | sed 's/\.cuda$//')
  fi
  log "A: fake CUDA processes (sandbox pids) ${CUDA_PIDS[*]}${CUDA2_PIDS:+; in gpu2 ${CUDA2_PIDS[*]}}"
fi
advancing "${FILES[@]}" || fail_exit ready-a "not every process is progressing: $(iters)"
# Far enough that a process started afresh on B could not have counted as far when B is checked.
iter_past() { (($(iter "$H/parent.txt") >= $1)); }
nv_wait_for -t 60 iter_past "${MIN_ITER:-20}" || fail_exit ready-a "the parent's iteration $(iter "$H/parent.txt") after 60 s"
answer_a=$(http "$LLM")
log "A: ready, iterations $(iters) (parent/worker0/worker1/tokenizer/client), http [$answer_a]"
[[ $answer_a =~ ^[0-9]+\ ([0-9]+)\ ([0-9]+)$ && ${BASH_REMATCH[1]} == "${BASH_REMATCH[2]}" ]] ||
  fail_exit http-a "the front end's answer [$answer_a] is not ITER S0 S with S == S0"
sum_a=${answer_a##* }

TARGET=$LLM
[[ $CKPT_OF == client ]] && TARGET=$CLIENT
at=$(iters)
s=$(now)
if TMO=400 CRI checkpoint --export="$W/pod.tar" "$TARGET" >"$W/ckpt.out" 2>&1; then
  e=$(now)
  FIG_CKPT=$(dt "$s" "$e")
  report "$LLM" a
  answer=$(http "$LLM")
  if [[ ${answer##* } == "$sum_a" ]] && advancing "${FILES[@]}" && intact "${FILES[@]}" && running "$P"; then
    result PASS checkpoint-a "crictl checkpoint of $CKPT_OF (the pod whole) in $FIG_CKPT s, archive $(du -h "$W/pod.tar" | cut -f1), store $(du -sh "$W/a/store" | cut -f1); the pod runs on: http [$answer], iterations $at -> $(iters)"
  else
    result FAIL checkpoint-a "after the checkpoint: http [$answer], iterations $at -> $(iters), running $(CRI ps -q --state running --pod "$P" | wc -l) of $NCTR"
  fi
  if ((GPU2)); then
    if order=$(locks_first "$W/a/containerd.log"); then
      result PASS one-attempt "the pod's two GPU containers toggled as one: $order, every lock before any checkpoint"
    else
      result FAIL one-attempt "$order"
    fi
  fi
else
  CRI exec "$LLM" cat /tmp/llm.log 2>&1 | tail -5
  fail_exit checkpoint-a "$(tail -3 "$W/ckpt.out")"
fi
shm_a=$(pod_shm a "$LLM")
log "A: the pod's /dev/shm is $shm_a: $(ls "$shm_a" 2>/dev/null | tr '\n' ' ')"
[[ $SHM_COPY != 0 && -d $shm_a ]] && mkdir -p "$W/shm-a" && cp -a "$shm_a/." "$W/shm-a/"
if [[ $DRY == 1 ]]; then
  for p in "${CUDA_PIDS[@]}"; do
    [[ $(nv_fake_state "$p") == running ]] && nv_fake_advancing "$p" || fail_exit checkpoint-a "fake CUDA process $p: $(nv_fake_state "$p"), not working"
  done
  locks=$(awk '$2=="lock" && $5==0' "$FAKE/cuda/calls.log" | wc -l)
  ((locks == 3)) || fail_exit checkpoint-a "$locks successful CUDA locks in the fake driver's log, not 3"
fi
tar -xOf "$W/pod.tar" checkpoint/nvproxy-cuda.json >"$OUTD/nvproxy-cuda.json" 2>/dev/null
# The image's own record names the pod; each further GPU container's processes are in its own
# record (pod-cuda/NAME/ in the store's entry): llm's three and gpu2's one in all.
mapfile -t more_recs < <(find "$W/a/store" -path '*/pod-cuda/*/nvproxy-cuda.json' 2>/dev/null)
rec=$("$PY" -c 'import json,sys; r=json.load(open(sys.argv[1])); p=r.get("pod") or {}
n=sum(json.load(open(f)).get("cuda_processes") or 0 for f in sys.argv[1:])
print(",".join(sorted(c["name"] for c in p.get("containers", []) if not c.get("sandbox"))), n,
      ",".join("%s:%s" % (c["name"], c.get("gpus")) for c in p.get("containers", []) if not c.get("sandbox")))' "$OUTD/nvproxy-cuda.json" "${more_recs[@]}" 2>&1)
want="client,llm 3 "
((GPU2)) && want="client,gpu2,llm 4 "
if [[ $rec == "$want"* ]]; then
  result PASS record "the image's records name the pod (${want%% *}) and ${want#* } CUDA processes; GPUs per container ${rec##* }"
else
  result FAIL record "the image's record: [$rec]"
fi

s=$(now)
out=$("$SHIM" image push --kube "$W/pod.tar" "$REG/ckpt/llm-pod:v1" --tls-verify=false --store "$W/a/store" --config "$W/a/shim.yaml" 2>&1)
rc=$?
FIG_PUSH=$(dt "$s" "$(now)")
IMG=$(awk '/^checkpoint image of container /{print $NF}' <<<"$out")
if ((rc == 0)) && [[ $IMG == "$REG/ckpt/"*@sha256:* ]]; then
  FIG_IMAGE=$(du -sh "$W/registry" | cut -f1)
  result PASS push "image push --kube in $FIG_PUSH s ($FIG_IMAGE in the registry): $(tr '\n' ' ' <<<"$out" | cut -c1-400)"
else
  fail_exit push "rc=$rc: $out"
fi
stop_node a
sweep "$W/a" # A's store and content: node B is another machine (and the disk holds one image beside the registry's)

# ---------------- node B ----------------
shim_yaml b "annotation_restore: true" "annotation_registries: [\"$REG/ckpt\"]"
NODE=b
cri_node b "$W/b/shim.yaml" "$CARRY/gpu-image.tar" "$CARRY/pause.tar" || fail_exit node-b "containerd did not start"
# restore_b NAME COPY: the pod NAME on B, annotated with the image: RunPodSandbox, CreateContainer and
# StartContainer of both containers, timed; with COPY=1 A's /dev/shm files put into the new pod's
# first (SHM_COPY). Then the checks. Returns 1 when anything failed.
restore_b() {
  local name=$1 copy=$2 what="pod-restore-b" s t1 e rc ok=1 why="" answer_b client_sum err
  [[ $copy == 1 ]] && what+="-shm-copied"
  # What A's processes (or an earlier attempt) wrote goes: what B's write shows where they went on from.
  rm -f "$H"/*.txt "$H"/client.err
  if [[ $DRY == 1 ]]; then
    nv_fake_as_checkpointed "${CUDA_PIDS[@]}" # the fake driver's state as the image holds it
    : >"$FAKE/cuda/calls.log"
    for p in "${CUDA2_PIDS[@]}"; do printf checkpointed >"$FAKE/cuda2/$p.state" && touch "$FAKE/cuda2/$p.closed"; done
  fi
  pod_json "$name" "$IMG"
  : >"$W/b-err"
  s=$(now)
  P=$(CRI runp --runtime nvproxy "$W/pod-$name.json" 2>>"$W/b-err") && t1=$(now) &&
    { [[ $copy != 1 ]] || cp -a "$W/shm-a/." "$(pod_shm b "$P")/"; } &&
    LLM=$(CRI create "$P" "$W/llm.json" "$W/pod-$name.json" 2>>"$W/b-err") &&
    CLIENT=$(CRI create "$P" "$W/client.json" "$W/pod-$name.json" 2>>"$W/b-err") &&
    CRI start "$LLM" >/dev/null 2>>"$W/b-err" && CRI start "$CLIENT" >/dev/null 2>>"$W/b-err" &&
    create_gpu2 "$P" "$W/pod-$name.json" 2>>"$W/b-err"
  rc=$?
  e=$(now)
  if ((rc != 0)); then
    [[ -s $W/runsc-logs/b/panic.log ]] && tail -30 "$W/runsc-logs/b/panic.log" | cut -c1-300
    err=$(grep -v '^time=' "$W/b-err" | tail -2)
    [[ $err == *'failed to walk'*'/dev/shm'* ]] &&
      err="the pod's /dev/shm files are in no image (a shim that binds CRI's sandbox shm under runsc as it is; SHM_COPY=1 copies them): $err"
    result FAIL "$what" "rc=$rc after $(dt "$s" "$e") s: $err"
    # Not waited for: after a failed restore CRI cannot stop such a pod (the report says why); the
    # teardown ends what is left.
    [[ -n ${P:-} ]] && ! err=$(TMO=20 CRI rmp -f "$P" 2>&1) && log "B: pod $P not removed: $(tail -1 <<<"$err" | cut -c1-300)"
    return 1
  fi
  FIG_RESTORE=$(dt "$s" "$e")
  log "B ($name): RunPodSandbox (pull, checks, the sandbox's restore) $(dt "$s" "$t1") s, its containers created and started $(dt "$t1" "$e") s: $FIG_RESTORE s"
  nv_wait_for -t 60 ready "${FILES[@]}" || { ok=0; why+="not every process wrote its progress ($(ls "$H")); "; }
  past "$at" || { ok=0; why+="iterations $(iters) below the checkpointed $at; "; }
  advancing "${FILES[@]}" || { ok=0; why+="not every process is progressing ($(iters)); "; }
  intact "${FILES[@]}" || { ok=0; why+="device data changed: $(cat "$H"/parent.txt "$H"/worker*.txt | tr '\n' ' '); "; }
  running "$P" || { ok=0; why+="$(CRI ps -q --state running --pod "$P" | wc -l) of $NCTR containers running; "; }
  answer_b=$(http "$LLM")
  [[ ${answer_b##* } == "$sum_a" ]] || { ok=0; why+="http [$answer_b], A's checksum $sum_a; "; }
  client_sum=$(awk '{print $NF}' "$H/client.txt" 2>/dev/null)
  [[ $client_sum == "$sum_a" ]] || { ok=0; why+="the sidecar's last answer [$(cat "$H/client.txt" 2>/dev/null)]; "; }
  if [[ $DRY == 1 ]] && ! err=$( (nv_fake_resumed "B's restore" "${CUDA_PIDS[@]}") 2>&1); then
    ok=0
    why+="fake CUDA: ${err##*FAIL: }; "
  fi
  for p in "${CUDA2_PIDS[@]}"; do
    [[ $(cat "$FAKE/cuda2/$p.state" 2>/dev/null) == running ]] || { ok=0; why+="gpu2's fake CUDA state of $p: $(cat "$FAKE/cuda2/$p.state" 2>/dev/null); "; }
  done
  if ((ok)); then
    result PASS "$what" "B restored the pod from $IMG in $FIG_RESTORE s: http [$answer_b] with A's checksum $sum_a, iterations checkpointed at $at -> $(iters), the sidecar on ($(cut -d' ' -f1 "$H/client.txt") answers), device data intact"
    return 0
  fi
  CRI exec "$LLM" cat /tmp/llm.log 2>&1 | tail -10
  result FAIL "$what" "$why"
  return 1
}
# SHM_COPY=both: as the shim does it, then, where that failed, with the copy.
case $SHM_COPY in
  0) restore_b b 0 ;;
  1) restore_b b 1 ;;
  *) restore_b b 0 || restore_b b2 1 ;;
esac
