#!/usr/bin/env bash
# Issue 58: `containerd-shim-nvproxy-v1 configure containerd` wires the runtime into the config the
# containerd of each version reads, then that containerd runs it:
#   default   the config `containerd config default` writes (made private to this test: root,
#             state, sockets, imports), configured (the version asked of that containerd), the
#             original kept beside it; restarted; a pod and a container through crictl with the
#             handler, a container through `ctr run --runtime`; a second configure is a no-op
#   minimal   a hand-written config without a runtimes table: the runc entry CRI needs is added
#             (1.x), pods of both handlers run
#   drop-in   2.x: the entry goes to the imports directory, the main file untouched, and works;
#             1.x: refused with the reason, nothing written
#   refusals  a malformed config is refused with its line and column, nothing written; --dry-run
#             prints the diff and writes nothing
# Usage: configure_containerd.sh 1.6|1.7|2.3|2.4
set -euo pipefail
source "$(dirname "$0")/lib/cri.sh"
VER=${1:?usage: configure_containerd.sh 1.6|1.7|2.3|2.4}
SHIM=${NVPROXY_SHIM_DIR:?NVPROXY_SHIM_DIR is not set (ctest sets it)}/containerd-shim-nvproxy-v1
PY=/usr/bin/python3 # Debian's, with python3-toml (scripts/install-deps.sh)
"$PY" -c 'import toml' 2>/dev/null || nv_skip "python3-toml missing (scripts/install-deps.sh)"

if [[ -z ${NVPROXY_SHARED_CRICTL_BIN_DIR:-} && -r $NV_SHARED_ENV ]]; then
  # shellcheck disable=SC1090
  source "$NV_SHARED_ENV"
fi
NV_CRICTL_BIN=${NVPROXY_SHARED_CRICTL_BIN_DIR:-}/crictl
[[ -x $NV_CRICTL_BIN ]] || nv_skip "crictl not unpacked (scripts/fetch-shared-deps.sh)"
if [[ -n ${NVPROXY_SHARED_RUNC_BIN_DIR:-} && -x $NVPROXY_SHARED_RUNC_BIN_DIR/runc ]]; then
  PATH=$NVPROXY_SHARED_RUNC_BIN_DIR:$PATH # containerd 2.3's CRI sandboxes need a recent runc
fi
NV_CRI_RUNC=$(command -v runc)
NV_CRI_DIR=$(mktemp -d /tmp/nvproxy-cfgctd.XXXXXX)
nv_defer rm -rf "$NV_CRI_DIR"
mkdir -p "$NV_CRI_DIR/logs"
NV_CRI_RUNTIME_ROOT=/run/containerd/nvproxy-cfgctd.${NV_CRI_DIR##*.}
unset NVPROXY_SHIM_CONFIG # only CRI's ConfigPath (written by configure) names the shim's config
NV_CRI_SHIM_CONFIG=$NV_CRI_DIR/shim.yaml
nv_shim_config_write "$NV_CRI_SHIM_CONFIG"
sed -i "s|^  root: .*|  root: $NV_CRI_RUNTIME_ROOT|" "$NV_CRI_SHIM_CONFIG"
NV_CRI_HANDLER=nvproxy

_none() { :; }
# The harness's containerd with CRI on; the images CRI needs imported; then it is stopped and
# restarted below on the configs under test.
nv_harness_start --containerd "$VER" --cri _none
nv_defer _nv_cri_teardown
_nv_cri_pause_image "$NV_CRI_DIR/pause.tar"
local_flag=()
[[ $NV_CONTAINERD_VERSION == 1.6.* ]] || local_flag=(--local)
for img in "$NV_IMAGE_TAR" "$NV_CRI_DIR/pause.tar"; do
  "$NV_CTR" -a "$NV_SOCK" -n "$NV_CRI_NS" images import "${local_flag[@]}" --snapshotter "$NV_SNAPSHOTTER" "$img" >/dev/null
done
BIN_DIR=$(dirname "$NV_CONTAINERD_BIN")
CFG=$NV_DIR/config.toml
V1=0
[[ $NV_CONTAINERD_VERSION == 1.* ]] && V1=1

# private_config IN OUT [VERSION]: IN (VERSION: its version where it has none) with what keeps this
# containerd apart from the host's (root, state, sockets, imports, NRI off) and this machine's CRI
# settings (pause image, snapshotter, oom score).
private_config() {
  IN=$1 OUT=$2 VERSION=${3:-} V1=$V1 NV_DIR=$NV_DIR NV_STATE_DIR=$NV_STATE_DIR NV_SOCK=$NV_SOCK SNAP=$NV_SNAPSHOTTER \
    PAUSE=$NV_CRI_PAUSE "$PY" - <<'PYEOF'
import os, toml
e = os.environ
d = toml.load(e["IN"]) if os.path.getsize(e["IN"]) else {}
if e["VERSION"]:
    d.setdefault("version", int(e["VERSION"]))
d["root"] = e["NV_DIR"] + "/root"
d["state"] = e["NV_STATE_DIR"]
d["disabled_plugins"] = ["io.containerd.nri.v1.nri"]
p = d.setdefault("plugins", {})
# Version 4 (containerd 2.3) has the servers among the plugins; earlier versions at the top.
if "io.containerd.server.v1.grpc" in p:
    p["io.containerd.server.v1.grpc"]["address"] = e["NV_SOCK"]
    p["io.containerd.server.v1.ttrpc"]["address"] = e["NV_SOCK"] + ".ttrpc"
    p["io.containerd.server.v1.debug"]["address"] = ""
else:
    d.setdefault("grpc", {})["address"] = e["NV_SOCK"]
    d.setdefault("ttrpc", {})["address"] = e["NV_SOCK"] + ".ttrpc"
p.setdefault("io.containerd.internal.v1.opt", {})["path"] = e["NV_DIR"] + "/opt"
if e["V1"] == "1":
    cri = p.setdefault("io.containerd.grpc.v1.cri", {})
    cri["sandbox_image"] = e["PAUSE"]
    cri["restrict_oom_score_adj"] = True
    cri.setdefault("containerd", {})["snapshotter"] = e["SNAP"]
else:
    d["imports"] = [e["NV_DIR"] + "/conf.d/*.toml"]
    img = p.setdefault("io.containerd.cri.v1.images", {})
    img["snapshotter"] = e["SNAP"]
    img.setdefault("pinned_images", {})["sandbox"] = e["PAUSE"]
    p.setdefault("io.containerd.cri.v1.runtime", {})["restrict_oom_score_adj"] = True
open(e["OUT"], "w").write(toml.dumps(d))
PYEOF
  ! grep -q /run/containerd/containerd.sock "$2" || nv_fail "$2 still names the host's containerd socket"
}

restart_containerd() {
  timeout 120 "$NV_CRICTL_BIN" --config /dev/null -r "unix://$NV_SOCK" --timeout 60s rmp -fa >/dev/null 2>&1 || true
  set +e # the harness's stop returns containerd's exit status (killed or not)
  _nv_stop_daemon
  set -e
  _nv_start_daemon
  nv_wait_for -t 30 _nv_cri_ready || nv_fail "CRI did not come up: $(tail -n 5 "$NV_DIR/containerd.log")"
}
_nv_cri_ready() { nv_crictl info >/dev/null 2>&1; }

configure() { PATH=$BIN_DIR:$PATH "$SHIM" configure containerd "$@"; }

# run_pod NAME HANDLER: a pod and a container in it through CRI; its output in its log.
run_pod() {
  local pod ctr
  NV_CRI_HANDLER=$2
  pod=$(nv_cri_pod "$1")
  ctr=$(nv_cri_ctr "$1" "$pod" "c-$1" '.command = ["sh", "-c", "echo configured-'"$1"'; sleep 1000"]')
  nv_crictl start "$ctr" >/dev/null
  nv_log "pod $1 ($2 handler): container $ctr started"
  nv_wait_for -t 30 nv_cri_logs_have "$ctr" "configured-$1" || nv_fail "pod $1 ($2): no output"
  if [[ $2 == nvproxy ]]; then
    nv_assert_contains "$("$NV_CTR" -a "$NV_SOCK" -n "$NV_CRI_NS" containers info "$ctr")" '"Name": "io.containerd.nvproxy.v1"' \
      "runtime of the CRI container"
  fi
  nv_crictl stopp "$pod" >/dev/null
  nv_crictl rmp "$pod" >/dev/null
}

ctr_run() {
  local out
  out=$(nv_ctr run --rm --runtime io.containerd.nvproxy.v1 "$NV_IMAGE" "ctr-$1" echo "ctr-$1")
  nv_assert_eq "ctr-$1" "$out" "ctr run --runtime io.containerd.nvproxy.v1"
}

hash_of() { sha256sum "$1" | cut -d' ' -f1; }

nv_log "default: the config containerd $NV_CONTAINERD_VERSION's config default writes"
"$NV_CONTAINERD_BIN" config default >"$NV_CRI_DIR/default.toml"
private_config "$NV_CRI_DIR/default.toml" "$CFG"
orig=$(hash_of "$CFG")
out=$(configure --config "$CFG" --dry-run --shim-config "$NV_CRI_SHIM_CONFIG")
nv_assert_contains "$out" "+runtime_type = \"io.containerd.nvproxy.v1\"" "dry run's diff"
nv_assert_contains "$out" "dry run: nothing written" "dry run"
nv_assert_eq "$orig" "$(hash_of "$CFG")" "the config after --dry-run"
[[ ! -e $CFG.nvproxy-orig ]] || nv_fail "--dry-run left a backup"
out=$(configure --config "$CFG" --shim-config "$NV_CRI_SHIM_CONFIG")
nv_log "$out"
[[ $out != *"version unknown"* ]] || nv_fail "configure did not ask containerd its version: $out"
nv_assert_contains "$out" "the original is $CFG.nvproxy-orig" "configure's report"
nv_assert_eq "$orig" "$(hash_of "$CFG.nvproxy-orig")" "the original kept beside it"
dump=$("$NV_CONTAINERD_BIN" --config "$CFG" config dump)
nv_assert_contains "$dump" "runtimes.nvproxy]" "containerd's own reading of the config"
restart_containerd
run_pod default nvproxy
run_pod default-runc runc
ctr_run default
configured=$(hash_of "$CFG")
out=$(configure --config "$CFG" --shim-config "$NV_CRI_SHIM_CONFIG")
nv_assert_contains "$out" "nothing to change" "second configure"
nv_assert_eq "$configured" "$(hash_of "$CFG")" "the config after the second configure"
[[ ! -e $CFG.nvproxy-orig.2 ]] || nv_fail "the second configure made another backup"

nv_log "minimal: a hand-written config without a runtimes table"
rm -f "$CFG".nvproxy-orig*
: >"$NV_CRI_DIR/empty.toml"
private_config "$NV_CRI_DIR/empty.toml" "$CFG" $((V1 ? 2 : 3))
out=$(configure --config "$CFG" --shim-config "$NV_CRI_SHIM_CONFIG")
if ((V1)); then nv_assert_contains "$out" "added the runc entry" "configure on a minimal 1.x config"; fi
restart_containerd
run_pod minimal nvproxy
run_pod minimal-runc runc
ctr_run minimal

nv_log "drop-in"
private_config "$NV_CRI_DIR/default.toml" "$CFG"
before=$(hash_of "$CFG")
if ((V1)); then
  set +e
  err=$(configure --config "$CFG" --drop-in --shim-config "$NV_CRI_SHIM_CONFIG" 2>&1 >/dev/null)
  rc=$?
  set -e
  nv_assert_eq 1 "$rc" "--drop-in on containerd 1.x"
  nv_assert_contains "$err" "replace a whole plugin section" "the reason"
  nv_assert_contains "$err" "nothing was written" "refusal"
  nv_assert_eq "$before" "$(hash_of "$CFG")" "the config after the refusal"
  [[ -z $(ls "$NV_DIR/conf.d" 2>/dev/null) ]] || nv_fail "a drop-in was written: $(ls "$NV_DIR/conf.d")"
else
  out=$(configure --config "$CFG" --drop-in --shim-config "$NV_CRI_SHIM_CONFIG")
  nv_assert_contains "$out" "wrote $NV_DIR/conf.d/nvproxy.toml" "--drop-in"
  nv_assert_eq "$before" "$(hash_of "$CFG")" "the main config (its imports have the directory)"
  restart_containerd
  run_pod dropin nvproxy
  out=$(configure --config "$CFG" --drop-in --shim-config "$NV_CRI_SHIM_CONFIG")
  nv_assert_contains "$out" "nothing to change" "second --drop-in"
fi

nv_log "malformed: refused with line and column, nothing written"
printf 'version = 2\nroot = "/x"\n[plugins\nfoo = 1\n' >"$CFG.bad"
before=$(hash_of "$CFG.bad")
set +e
err=$(configure --config "$CFG.bad" 2>&1 >/dev/null)
rc=$?
set -e
nv_assert_eq 1 "$rc" "configure of a malformed config"
nv_assert_contains "$err" "$CFG.bad:3:" "line of the error"
nv_assert_contains "$err" "nothing was written" "refusal"
nv_assert_eq "$before" "$(hash_of "$CFG.bad")" "the malformed config"
[[ ! -e $CFG.bad.nvproxy-orig ]] || nv_fail "a backup of the malformed config was made"
nv_log "PASS"
