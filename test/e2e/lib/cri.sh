# shellcheck shell=bash
# Why: Kubernetes reaches the shim through containerd's CRI plugin, not ctr. This starts a private
# containerd (lib/harness.sh) with CRI on and the `nvproxy` runtime configured from the very blocks
# of docs/install.md that users copy (only ConfigPath is replaced by this test's shim config), and
# drives it with the real crictl. No network: pods use the host network (no CNI) and the sandbox
# image is a pause image made from the test image (a sleeping busybox).
#   nv_cri_start 1.7|2.3    containerd + CRI; sets NV_CRI_DIR, NV_CRI_HANDLER, NV_CRICTL_BIN
#   nv_crictl ARGS...       crictl against it (stdout only; its stderr goes to the test's)
#   nv_cri_doc_block NAME   the fenced block after "<!-- test/e2e/cri.sh reads this block: NAME -->"
#   nv_cri_pod NAME [JQ]    RunPodSandbox with the handler from the docs' RuntimeClass; prints the id
#   nv_cri_ctr POD NAME JQ  CreateContainer (busybox image; JQ: a jq filter that edits the config)
#   nv_cri_bundle ID        the task bundle of a CRI container
#   nv_cri_logs_have ID T   whether the container's log holds T
# Needs from the caller: NVPROXY_SHIM_DIR (ctest), NV_CRI_SHIM_EXTRA (extra YAML for the shim config);
# NV_CRI_DOC_BLOCKS (2.x): further docs/install.md blocks for containerd's conf.d.
source "$(dirname "${BASH_SOURCE[0]}")/shim-env.sh"

NV_CRI_DOC=$NV_REPO_DIR/docs/install.md
NV_CRI_NS=k8s.io # CRI's containerd namespace
NV_CRI_PAUSE=docker.io/local/pause:nvproxy-test
NV_CRI_DIR="" NV_CRI_HANDLER="" NV_CRICTL_BIN="" NV_CRI_SHIM_CONFIG=""

nv_cri_doc_block() {
  local out
  out=$(awk -v m="<!-- test/e2e/cri.sh reads this block: $1 -->" '
    $0 == m { state = 1; next }
    state == 1 && /^```/ { state = 2; next }
    state == 2 && /^```/ { exit }
    state == 2 { print }' "$NV_CRI_DOC")
  [[ -n $out ]] || nv_fail "docs/install.md has no block marked '$1'"
  printf '%s\n' "$out"
}

# A docs block with the documented shim config path replaced by ours.
_nv_cri_doc_config() {
  local block
  block=$(nv_cri_doc_block "$1")
  nv_assert_contains "$block" 'ConfigPath = "/etc/containerd-shim-nvproxy/config.yaml"' "docs block $1"
  printf '%s\n' "${block//\/etc\/containerd-shim-nvproxy\/config.yaml/$NV_CRI_SHIM_CONFIG}"
}

# The environment of these machines (not for users): local pause image, snapshotter, oom_score_adj
# (runc cannot lower it here), CDI on with the test's spec directory. Printed into the main config by
# the harness; the docs blocks go into the main file (1.x: imports replace whole sections) or into
# conf.d drop-ins (2.x: merged key by key, as the docs tell users to do).
_nv_cri_containerd_config() {
  if [[ $NV_CONTAINERD_VERSION == 1.* ]]; then
    cat <<EOF

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$NV_CRI_PAUSE"
  restrict_oom_score_adj = true
  enable_cdi = true
  cdi_spec_dirs = ["$NV_CRI_DIR/cdi"]
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "$NV_SNAPSHOTTER"
  # As in the output of containerd config default: 1.x replaces the runtimes table with the config's,
  # and CRI does not load when the default runtime (runc) is missing from it (docs/install.md).
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"

# ---- docs/install.md, block ctd1-runtime ----
EOF
    _nv_cri_doc_config ctd1-runtime
  else
    cat <<EOF

[plugins."io.containerd.cri.v1.images"]
  snapshotter = "$NV_SNAPSHOTTER"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = "$NV_CRI_PAUSE"

[plugins."io.containerd.cri.v1.runtime"]
  restrict_oom_score_adj = true
  enable_cdi = true
  cdi_spec_dirs = ["$NV_CRI_DIR/cdi"]
EOF
    _nv_cri_doc_config ctd2-runtime >"$NV_DIR/conf.d/nvproxy.toml"
    nv_cri_doc_block ctd2-restore >"$NV_DIR/conf.d/nvproxy-restore.toml"
    # Further docs blocks a test asks for (NV_CRI_DOC_BLOCKS: names), each a drop-in of its own.
    local b
    for b in ${NV_CRI_DOC_BLOCKS:-}; do nv_cri_doc_block "$b" >"$NV_DIR/conf.d/$b.toml"; done
  fi
}

# The test image with Entrypoint sleep: CRI's pause container (SIGKILLed at StopPodSandbox).
_nv_cri_pause_image() {
  local out=$1 w m c cfg man
  w=$(mktemp -d "$NV_CRI_DIR/pause.XXXXXX")
  tar -C "$w" -xf "$NV_IMAGE_TAR"
  m=$(jq -r '.manifests[0].digest' "$w/index.json")
  m=${m#sha256:}
  c=$(jq -r '.config.digest' "$w/blobs/sha256/$m")
  c=${c#sha256:}
  jq -c '.config.Entrypoint = ["/bin/sleep"] | .config.Cmd = ["2147483647"]' "$w/blobs/sha256/$c" \
    | tr -d '\n' >"$w/config"
  cfg=$(sha256sum "$w/config" | cut -d' ' -f1)
  mv "$w/config" "$w/blobs/sha256/$cfg"
  jq -c --arg d "sha256:$cfg" --argjson s "$(stat -c %s "$w/blobs/sha256/$cfg")" \
    '.config.digest = $d | .config.size = $s' "$w/blobs/sha256/$m" | tr -d '\n' >"$w/manifest"
  man=$(sha256sum "$w/manifest" | cut -d' ' -f1)
  mv "$w/manifest" "$w/blobs/sha256/$man"
  rm -f "$w/blobs/sha256/$m" "$w/blobs/sha256/$c" "$w/manifest.json"
  jq --arg d "sha256:$man" --argjson s "$(stat -c %s "$w/blobs/sha256/$man")" --arg ref "$NV_CRI_PAUSE" \
    '.manifests[0] |= (.digest = $d | .size = $s
       | .annotations["io.containerd.image.name"] = $ref
       | .annotations["org.opencontainers.image.ref.name"] = ($ref | sub(".*:"; "")))' \
    "$w/index.json" >"$w/index.new"
  mv "$w/index.new" "$w/index.json"
  tar -C "$w" -cf "$out" oci-layout index.json blobs
  rm -rf "$w"
}

nv_crictl() {
  "$NV_CRICTL_BIN" --config /dev/null -r "unix://$NV_SOCK" -i "unix://$NV_SOCK" --timeout 60s "$@"
}

# Stops and removes every pod while containerd still runs (deferred; the harness does the rest).
_nv_cri_teardown() {
  timeout 120 "$NV_CRICTL_BIN" --config /dev/null -r "unix://$NV_SOCK" --timeout 60s rmp -fa >/dev/null 2>&1
  local bin
  bin=$(awk '$1=="binary:"{print $2; exit}' "$NV_CRI_SHIM_CONFIG")
  _nv_sweep_root "${bin:-$NV_CRI_RUNC}" "$NV_CRI_RUNTIME_ROOT/$NV_CRI_NS"
  rm -rf "$NV_CRI_RUNTIME_ROOT"
}

nv_cri_start() {
  local ver=${1:?nv_cri_start 1.7|2.3}
  [[ -n ${NVPROXY_SHIM_DIR:-} ]] || nv_fail "NVPROXY_SHIM_DIR is not set (ctest sets it)"
  if [[ -z ${NVPROXY_SHARED_CRICTL_BIN_DIR:-} && -r $NV_SHARED_ENV ]]; then
    # shellcheck disable=SC1090
    source "$NV_SHARED_ENV"
  fi
  NV_CRICTL_BIN=${NVPROXY_SHARED_CRICTL_BIN_DIR:-}/crictl
  [[ -x $NV_CRICTL_BIN ]] || nv_skip "crictl not unpacked (scripts/fetch-shared-deps.sh)"
  if [[ $ver == 1.7 && -z ${NVPROXY_CONTAINERD17_BIN_DIR:-} && ! -r $NV_TRIXIE_ENV ]]; then
    nv_skip "containerd 1.7 not unpacked (scripts/fetch-trixie.sh)"
  fi
  [[ $ver == 1.* ]] || command -v criu >/dev/null || nv_skip "no criu for CRI's checkpoint (scripts/build-criu.sh)"
  # containerd 2.3's CRI sandboxes need a recent runc (Debian 12's 1.1.5 cannot start them under
  # containerd's runc shim); the shared runc goes first on PATH when it is there.
  if [[ -n ${NVPROXY_SHARED_RUNC_BIN_DIR:-} && -x $NVPROXY_SHARED_RUNC_BIN_DIR/runc ]]; then
    PATH=$NVPROXY_SHARED_RUNC_BIN_DIR:$PATH
  fi
  NV_CRI_RUNC=$(command -v runc) || nv_fail "runc not installed"
  NV_CRI_DIR=$(mktemp -d /tmp/nvproxy-cri.XXXXXX)
  nv_defer rm -rf "$NV_CRI_DIR"
  mkdir -p "$NV_CRI_DIR/cdi" "$NV_CRI_DIR/logs"
  NV_CRI_RUNTIME_ROOT=/run/containerd/nvproxy-cri.${NV_CRI_DIR##*.}
  # Only ConfigPath from CRI's runtime options names the shim's config: if CRI did not pass it, the
  # shim would read defaults and the GPU and checkpoint cases would fail.
  unset NVPROXY_SHIM_CONFIG
  NV_CRI_SHIM_CONFIG=$NV_CRI_DIR/shim.yaml
  nv_shim_config_write "$NV_CRI_SHIM_CONFIG"
  sed -i "s|^  root: .*|  root: $NV_CRI_RUNTIME_ROOT|" "$NV_CRI_SHIM_CONFIG"
  if [[ -n ${NV_CRI_SHIM_EXTRA:-} ]]; then echo "$NV_CRI_SHIM_EXTRA" >>"$NV_CRI_SHIM_CONFIG"; fi
  local rc
  rc=$(nv_cri_doc_block k8s-runtimeclass)
  NV_CRI_HANDLER=$(awk '$1 == "handler:" {print $2; exit}' <<<"$rc")
  [[ -n $NV_CRI_HANDLER ]] || nv_fail "no handler in the docs' RuntimeClass"
  nv_assert_contains "$(nv_cri_doc_block ctd1-runtime)" "containerd.runtimes.$NV_CRI_HANDLER]" "1.x block names the handler"
  # The docs say the 1.x block is the packaged containerd-config.toml: the same settings.
  local pkg doc
  pkg=$(grep -Ev '^[[:space:]]*(#|$)' "$NV_REPO_DIR/packaging/containerd-config.toml")
  doc=$(nv_cri_doc_block ctd1-runtime | grep -Ev '^[[:space:]]*(#|$)')
  nv_assert_eq "$pkg" "$doc" "settings of packaging/containerd-config.toml vs docs/install.md block ctd1-runtime"
  nv_assert_contains "$(nv_cri_doc_block ctd2-runtime)" "containerd.runtimes.$NV_CRI_HANDLER]" "2.x block names the handler"

  nv_harness_start --containerd "$ver" --cri _nv_cri_containerd_config
  nv_defer _nv_cri_teardown
  _nv_cri_pause_image "$NV_CRI_DIR/pause.tar"
  local img
  for img in "$NV_IMAGE_TAR" "$NV_CRI_DIR/pause.tar"; do
    "$NV_CTR" -a "$NV_SOCK" -n "$NV_CRI_NS" images import --local --snapshotter "$NV_SNAPSHOTTER" "$img" >/dev/null \
      || nv_fail "ctr -n $NV_CRI_NS images import $img failed"
  done
  nv_wait_for -t 30 _nv_cri_has_images || nv_fail "CRI does not list the imported images: $(nv_crictl images 2>&1)"
  nv_log "CRI ready: containerd $NV_CONTAINERD_VERSION, crictl $("$NV_CRICTL_BIN" --version | awk '{print $3}'), runtime handler $NV_CRI_HANDLER, $("$NV_CRI_RUNC" --version | head -1)"
}

_nv_cri_has_images() {
  local l
  l=$(nv_crictl images -q 2>/dev/null | wc -l)
  ((l >= 2))
}

# nv_cri_pod NAME [JQ]: a pod in the host network (no CNI here), cgroups below /NV_NAMESPACE; JQ
# edits its config (annotations, ...).
# nv_cri_node_config FAKE_CONFIG STORE_PREFIX: a node of a two-node test (NODE=A|B): a store of its
# own, the shim's config (FAKE_CONFIG's lines, the store, the loopback registry without TLS) in
# NV_CRI_SHIM_EXTRA; node B also restores by annotation from $NV_B_REGISTRY/ckpt. Sets STORE.
nv_cri_node_config() {
  STORE=$(mktemp -d "/var/tmp/$2.XXXXXX")
  nv_defer rm -rf "$STORE"
  export NV_CRI_SHIM_EXTRA="$1
  image_store: $STORE
  registry_tls_verify: false
  registry_timeout_s: 60"
  if [[ $NODE == B ]]; then
    NV_REGISTRY=$NV_B_REGISTRY NV_REGISTRY_DIR=$NV_B_REGISTRY_DIR
    NV_CRI_SHIM_EXTRA+="
  annotation_restore: true
  annotation_registries: [\"$NV_REGISTRY/ckpt\"]"
    export NV_CRI_DOC_BLOCKS=ctd2-annotation-restore
  fi
}

nv_cri_pod() {
  jq -n --arg n "$1" --arg logs "$NV_CRI_DIR/logs/$1" --arg cg "/$NV_NAMESPACE/$1" '{
      metadata: {name: $n, namespace: "default", uid: ("uid-" + $n), attempt: 0},
      log_directory: $logs,
      linux: {cgroup_parent: $cg, security_context: {namespace_options: {network: 2}}}
    }' | jq "${2:-.}" >"$NV_CRI_DIR/pod-$1.json"
  mkdir -p "$NV_CRI_DIR/logs/$1"
  nv_crictl runp --runtime "$NV_CRI_HANDLER" "$NV_CRI_DIR/pod-$1.json"
}

# nv_cri_ctr POD_NAME POD_ID NAME [JQ]: creates a container as the kubelet would: its own PID
# namespace (pid: CONTAINER), logs in the pod's log directory.
nv_cri_ctr() {
  local podname=$1 pod=$2 name=$3 filter=${4:-.}
  jq -n --arg n "$name" --arg img "$NV_IMAGE" '{
      metadata: {name: $n, attempt: 0}, image: {image: $img}, log_path: ($n + ".log"),
      linux: {security_context: {namespace_options: {pid: 1}}}
    }' | jq "$filter" >"$NV_CRI_DIR/ctr-$name.json"
  nv_crictl create "$pod" "$NV_CRI_DIR/ctr-$name.json" "$NV_CRI_DIR/pod-$podname.json"
}

# nv_cri_logs_have ID TEXT: the container's log (crictl logs) holds TEXT.
nv_cri_logs_have() { nv_crictl logs "$1" 2>&1 | grep -qF -- "$2"; }
nv_cri_state() { nv_crictl inspect -o json "$1" 2>/dev/null | jq -r '.status.state'; }
nv_cri_bundle() { echo "$NV_STATE_DIR/io.containerd.runtime.v2.task/$NV_CRI_NS/$1"; }
# Host pid of a CRI container's init.
nv_cri_pid() { nv_crictl inspect -o json "$1" 2>/dev/null | jq -r '.info.pid'; }
