#!/bin/bash
# Restore by annotation on the GPU machine (issue 48): the LLM server shape (workloads/
# shapes_workload.py sglang: a CUDA parent with its HTTP front end, two spawn CUDA workers, a
# tokenizer) checkpointed through CRI (crictl checkpoint) on node A, a containerd 2.4 with CRI,
# made a checkpoint image (`image push --kube`) in a registry on loopback; node B, a second
# containerd 2.4 with its own root, state and store, runs a pod annotated
# restore.nvproxy.io/llm=<image>: the server answers on HTTP with the same device checksum, every
# process goes on, device data intact.
# Needs, from the repo root: .carry/bin and .carry/gpu-image.tar (test/gpu/pack.sh), the kit's CRIU
# 4.2.1 (.carry/kit/kit.tar.xz: the kit without containerd 1.7 fits the carry), .carry-travel
# (test/gpu/pack-travel.sh: docker-registry) and CRI_CARRY (test/gpu/pack-cri.sh: containerd 2.4,
# crictl, runc 1.4 for CRI's sandboxes, the sandbox image). test/gpu/README.md has the call.
# Prints "RESULT PASS|FAIL name: detail"; logs to $OUT.
# Run: timeout 500 bash test/gpu/run-annotation-restore.sh 2>&1 | tee $OUT/annotation.log
set -uo pipefail
REPO=$(pwd)
PACK=${PACK:-$REPO/.carry}
CRI_CARRY=${CRI_CARRY:-/var/tmp/nvgpu-cri-carry}
OUTD=${OUT:-/tmp/nvgpu-annotation}
mkdir -p "$OUTD"
W=/var/tmp/nvgpu-annotation
source "$REPO/test/gpu/lib/kit-containerd.sh"
source "$REPO/test/gpu/lib/progress.sh"
kit_install
rm -rf "$W"; mkdir -p "$W/cri" "$W/host"
source "$REPO/test/gpu/lib/travel.sh"
travel_registry "$W" 5124
mkdir -p "$W/runc"
tar -C "$W/cri" -xJf "$CRI_CARRY"/containerd-2.4*.tar.xz && tar -C "$W/cri" -xJf "$CRI_CARRY"/crictl-*.tar.xz &&
  tar -C "$W/runc" -xJf "$CRI_CARRY"/runc-1.4*.tar.xz
RUNC=$W/runc/bin/runc
CTD24=$(dirname "$(find "$W/cri" -name containerd -type f | head -1)")
CRICTL=$(find "$W/cri" -name crictl -type f | head -1)
REG=127.0.0.1:5124
PY=/opt/torch/.venv/bin/python3
SHIM=$PACK/bin/containerd-shim-nvproxy-v1
H=$W/host
files() { local r; for r in parent worker0 worker1 tokenizer; do printf '%s ' "$H/$r.txt"; done; }
ADVANCE_S=10
http() { "$PY" -c 'import urllib.request; print(urllib.request.urlopen("http://127.0.0.1:18201/", timeout=5).read().decode().strip())' 2>&1; }
# The device checksum the front end reports (its last field); the iteration before it moves on.
checksum() { http | awk '{print $NF}'; }

# node NAME [EXTRA]: containerd 2.4 with CRI under $W/NAME (pods in the host network, the GPU image
# as the sandbox image too), the shim's config with EXTRA checkpoint lines. Sets SOCK, CTDPID.
node() {
  local d=$W/$1
  mkdir -p "$d/store" "$d/logs"
  CONTENT_ROOT=$d/root kit_shim_config "$d/shim.yaml" "{binary: $RUNC, root: /run/containerd/nvproxy-ann-$1, criu_path: /opt/kit/bin/criu}" \
    "image_store: $d/store" "registry_tls_verify: false" "registry_timeout_s: 300" "${@:2}"
  SOCK=$d/containerd.sock
  cat >"$d/config.toml" <<EOT
version = 3
root = "$d/root"
state = "$d/state"
disabled_plugins = ["io.containerd.nri.v1.nri"]
[grpc]
  address = "$SOCK"
[ttrpc]
  address = "$SOCK.ttrpc"
[plugins."io.containerd.cri.v1.images"]
  snapshotter = "native"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = "$PAUSE"
# runc cannot lower a sandbox's oom_score_adj below the shell's in this VM (measured).
[plugins."io.containerd.cri.v1.runtime"]
  restrict_oom_score_adj = true
[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.nvproxy]
  runtime_type = "io.containerd.nvproxy.v1"
  pod_annotations = ["restore.nvproxy.io/*"]
  [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.nvproxy.options]
    ConfigPath = "$d/shim.yaml"
EOT
  # CRI's checkpoint asks for criu on PATH (the kit's 4.2.1).
  PATH=$PACK/bin:$CTD24:/opt/kit/bin:$PATH setsid "$CTD24/containerd" --config "$d/config.toml" </dev/null >"$d/containerd.log" 2>&1 &
  CTDPID=$!
  for _ in $(seq 100); do CRI version >/dev/null 2>&1 && break; sleep 0.2; done
  local t
  for t in "$PACK/gpu-image.tar" "$CRI_CARRY/pause.tar"; do
    timeout 120 "$CTD24/ctr" -a "$SOCK" -n k8s.io images import --local --snapshotter native "$t" >/dev/null
  done
  log "node $1: containerd $("$CTD24/containerd" --version | awk '{print $3}') with CRI on $SOCK"
}
# The sandbox image: the GPU image sleeping (test/gpu/pack-cri.sh made it).
PAUSE=docker.io/local/pause:nvproxy-gpu
CRI() { timeout "${TMO:-300}" "$CRICTL" --config /dev/null -r "unix://$SOCK" -i "unix://$SOCK" --timeout 280s "$@"; }
pod_json() {  # NAME [ANNOTATION VALUE]
  local ann=""
  [[ -n ${2:-} ]] && ann=", \"annotations\": {\"$2\": \"$3\"}"
  printf '{"metadata": {"name": "%s", "namespace": "default", "uid": "uid-%s"}, "linux": {"security_context": {"namespace_options": {"network": 2}}}%s}\n' \
    "$1" "$1" "$ann"
}
ctr_json() {  # the server container, the same on both nodes
  local p binds=""
  for p in /usr/bin /usr/lib /usr/lib64 /usr/share /opt/torch; do
    binds+=", {\"container_path\": \"$p\", \"host_path\": \"$p\", \"readonly\": true}"
  done
  cat <<EOT
{"metadata": {"name": "llm"}, "image": {"image": "$IMAGE"},
 "command": ["sh", "-c", "exec $PY /probe/shapes_workload.py sglang >/tmp/llm.log 2>&1"],
 "envs": [{"key": "NVIDIA_VISIBLE_DEVICES", "value": "all"}, {"key": "HOME", "value": "/tmp"},
          {"key": "PYTHONUNBUFFERED", "value": "1"}, {"key": "HTTP_PORT", "value": "18201"}],
 "mounts": [{"container_path": "/probe", "host_path": "$REPO/test/gpu/workloads", "readonly": true},
            {"container_path": "/out", "host_path": "$H"}$binds],
 "linux": {"security_context": {"namespace_options": {"pid": 1}}}}
EOT
}
stop_node() { CRI rmp -fa >/dev/null 2>&1; kill "$CTDPID" 2>/dev/null; sleep 1; gzip -c "$W/$1/containerd.log" >"$OUTD/containerd-ann-$1.log.gz"; }
trap 'kill $REGPID 2>/dev/null; printf "%s\n" "${RESULTS[@]}"' EXIT

# ---------------- node A ----------------
node a
pod_json a >"$W/pod-a.json"; ctr_json >"$W/llm.json"
P=$(CRI runp --runtime nvproxy "$W/pod-a.json") && C=$(CRI create "$P" "$W/llm.json" "$W/pod-a.json") && CRI start "$C" >/dev/null \
  || { result FAIL start-a "$(tail -3 "$W/a/containerd.log")"; exit 1; }
for _ in $(seq 600); do ready $(files) && break; sleep 0.25; done
sum_a=$(checksum)
at=$(iter "$H/parent.txt")
log "A: ready, http [$(http)]"
s=$(now)
if CRI checkpoint --export="$W/llm.tar" "$C" >"$W/ckpt.out" 2>&1; then
  result PASS checkpoint-a "crictl checkpoint in $(dt "$s" "$(now)") s, archive $(du -h "$W/llm.tar" | cut -f1), still answering [$(http)]"
else
  result FAIL checkpoint-a "$(tail -3 "$W/ckpt.out")"; exit 1
fi
out=$("$SHIM" image push --kube "$W/llm.tar" "$REG/ckpt/llm:v1" --tls-verify=false --store "$W/a/store" --config "$W/a/shim.yaml" 2>&1) \
  && result PASS push "$(echo "$out" | tr '\n' ' ')" || { result FAIL push "$out"; exit 1; }
IMG=$(awk '/^checkpoint image of container /{print $NF}' <<<"$out")
stop_node a
rm -rf "$W/a"

# ---------------- node B ----------------
node b "annotation_restore: true" "annotation_registries: [\"$REG/ckpt\"]"
pod_json b restore.nvproxy.io/llm "$IMG" >"$W/pod-b.json"
s=$(now)
P=$(CRI runp --runtime nvproxy "$W/pod-b.json") && C=$(CRI create "$P" "$W/llm.json" "$W/pod-b.json") && CRI start "$C" >"$W/start-b.out" 2>&1
rc=$?
log "B: create and start (pull, checks, restore) rc=$rc in $(dt "$s" "$(now)") s"
sum_b=$(checksum)
if ((rc == 0)) && advancing $(files) && intact $(files) && (($(iter "$H/parent.txt") >= at)) && [[ -n $sum_a && $sum_b == "$sum_a" ]]; then
  result PASS annotation-restore "B restored $IMG by annotation: http [$(http)], checksum as on A ($sum_a), every process on, device data intact"
else
  result FAIL annotation-restore "rc=$rc [$(tail -3 "$W/start-b.out")] checksum A [$sum_a] B [$sum_b] $(tail -2 "$H/parent.txt" 2>/dev/null)"
fi
stop_node b
