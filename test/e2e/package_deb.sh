#!/usr/bin/env bash
# Issue "Packages and ecosystem" acceptance: the .deb installs the shim where containerd finds it,
# with its config as a conffile, and a private containerd (1.6 or 1.7) whose config holds only the
# packaged CRI snippet runs containers through the *installed* binary; remove/purge leave nothing.
# Usage: package_deb.sh [1.6|1.7]
#   NVPROXY_DEB        the .deb to test (default: built here with cpack from NVPROXY_BUILD_DIR)
#   NVPROXY_BUILD_DIR  configured build tree (default: the parent of $NVPROXY_SHIM_DIR, else build/)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ctd=${1:-1.6}
PKG=containerd-shim-nvproxy
BIN=/usr/bin/containerd-shim-nvproxy-v1
CONF=/etc/containerd-shim-nvproxy/config.yaml
SNIPPET=/usr/share/containerd-shim-nvproxy/containerd-config.toml
build_dir=${NVPROXY_BUILD_DIR:-}
if [[ -z $build_dir && -n ${NVPROXY_SHIM_DIR:-} ]]; then build_dir=$(dirname "$NVPROXY_SHIM_DIR"); fi
# The point of this test is the installed binary: containerd must not find one from the build tree.
unset NVPROXY_SHIM_DIR NVPROXY_SHIM_CONFIG
source "$HERE/lib/harness.sh"
build_dir=${build_dir:-$NV_REPO_DIR/build}

[[ $(id -u) == 0 ]] || nv_fail "needs root (dpkg -i)"
command -v dpkg-deb >/dev/null || nv_fail "dpkg-deb missing"

# ---------- the machine must not have the package or a stray shim binary ----------
if dpkg-query -W -f='${db:Status-Abbrev}' "$PKG" 2>/dev/null | grep -q '^[a-z][a-z]'; then
  nv_fail "$PKG is already installed or has config files left ($(dpkg-query -W -f='${db:Status-Abbrev}' "$PKG")):" \
    "this test installs and purges it; run 'dpkg --purge $PKG' first"
fi
[[ ! -e /etc/containerd-shim-nvproxy ]] || nv_fail "/etc/containerd-shim-nvproxy exists without the package: move it away first"
if found=$(command -v containerd-shim-nvproxy-v1); then
  nv_fail "a containerd-shim-nvproxy-v1 is already on PATH ($found): containerd might run it instead of the packaged one"
fi

workdir=$(mktemp -d /tmp/nvproxy-pkgdeb.XXXXXX)
purge_pkg() {
  if dpkg-query -W "$PKG" >/dev/null 2>&1; then dpkg --purge "$PKG" >/dev/null 2>&1 || true; fi
  rm -rf "$workdir"
}
trap purge_pkg EXIT # replaced by the harness's trap once it starts; nv_defer below keeps the purge
nv_defer purge_pkg

# ---------- the package ----------
project_version=$(sed -nE 's/^project\(containerd-shim-nvproxy VERSION ([0-9.]+).*/\1/p' "$NV_REPO_DIR/CMakeLists.txt")
[[ -n $project_version ]] || nv_fail "cannot read the project version from CMakeLists.txt"
deb=${NVPROXY_DEB:-}
if [[ -z $deb ]]; then
  [[ -f $build_dir/CPackConfig.cmake ]] || nv_fail "no CPackConfig.cmake in $build_dir (configure the build first)"
  nv_log "cpack -G DEB from $build_dir"
  (cd "$build_dir" && cpack -G DEB -B "$workdir/out" >"$workdir/cpack.log" 2>&1) || {
    tail -n 30 "$workdir/cpack.log" >&2
    nv_fail "cpack -G DEB failed"
  }
  deb=$(ls "$workdir"/out/*.deb)
fi
[[ -f $deb ]] || nv_fail "no .deb at $deb"
nv_log "testing $deb"

field() { dpkg-deb -f "$deb" "$1"; }
nv_assert_eq "$PKG" "$(field Package)" "Package"
nv_assert_eq "$project_version-1" "$(field Version)" "Version follows the CMake project version"
nv_assert_eq amd64 "$(field Architecture)" "Architecture"
depends=$(field Depends)
# shlibdeps: the shim is static; nvproxy-cuda-helper links glibc alone (C++ libraries built in).
[[ $depends =~ (^|, )libc6\ \( ]] || nv_fail "Depends lacks a versioned libc6: $depends"
for lib in libstdc++6 libyaml-cpp0.7 libprotobuf32 libboost-program-options1.74.0; do
  [[ ! $depends =~ $lib ]] || nv_fail "Depends names $lib, which is linked in statically: $depends"
done
nv_assert_contains "$(field Recommends)" "runc" "Recommends"
nv_assert_contains "$(field Recommends)" "runsc" "Recommends"
nv_assert_contains "$(field Suggests)" "criu" "Suggests"
mkdir -p "$workdir/ctl"
dpkg-deb -e "$deb" "$workdir/ctl"
nv_assert_eq "$CONF" "$(cat "$workdir/ctl/conffiles")" "conffiles"
for s in preinst prerm postrm; do
  [[ ! -e $workdir/ctl/$s ]] || nv_fail "unexpected maintainer script $s (installing must not touch containerd or docker)"
done
# postinst only prints the commands that wire the node (issue 58).
cmp -s "$workdir/ctl/postinst" "$NV_REPO_DIR/packaging/postinst" || nv_fail "the .deb's postinst is not packaging/postinst"
contents=$(dpkg-deb -c "$deb" | awk '{print $1, $6}')
for f in ./usr/bin/containerd-shim-nvproxy-v1 ./usr/libexec/containerd-shim-nvproxy/nvproxy-cuda-helper \
  ./usr/libexec/containerd-shim-nvproxy/nvproxy-image-transfer \
  ./usr/libexec/containerd-shim-nvproxy/nvproxy-sandbox-agent ./etc/containerd-shim-nvproxy/config.yaml \
  ./usr/libexec/containerd-shim-nvproxy/criu-plugins/nvproxy_criu_release.so \
  ./usr/share/containerd-shim-nvproxy/containerd-config.toml ./usr/share/containerd-shim-nvproxy/docker-daemon.json \
  ./usr/share/man/man1/containerd-shim-nvproxy-v1.1.gz ./usr/share/doc/containerd-shim-nvproxy/copyright \
  ./usr/share/doc/containerd-shim-nvproxy/changelog.Debian.gz ./usr/share/doc/containerd-shim-nvproxy/LICENSE; do
  grep -q " $f\$" <<<"$contents" || nv_fail "$f missing from the .deb: $contents"
done
for doc in README.md docs/install.md docs/configuration.md docs/troubleshooting.md; do
  [[ ! -f $NV_REPO_DIR/$doc ]] || grep -q " ./usr/share/doc/containerd-shim-nvproxy/${doc##*/}\$" <<<"$contents" \
    || nv_fail "$doc is not in the .deb's doc dir"
done
grep -qE '^-rwxr-xr-x \./usr/bin/containerd-shim-nvproxy-v1$' <<<"$contents" || nv_fail "the binary is not 0755"
grep -qE '^-rwxr-xr-x \./usr/libexec/containerd-shim-nvproxy/nvproxy-cuda-helper$' <<<"$contents" \
  || nv_fail "the CUDA helper is not 0755"
grep -qE '^-rwxr-xr-x \./usr/libexec/containerd-shim-nvproxy/nvproxy-image-transfer$' <<<"$contents" \
  || nv_fail "nvproxy-image-transfer is not 0755"
grep -qE '^-rwxr-xr-x \./usr/libexec/containerd-shim-nvproxy/nvproxy-sandbox-agent$' <<<"$contents" \
  || nv_fail "the sandbox agent (runsc) is not 0755"
if grep -vE '^(d|-)' <<<"$contents" | grep -q .; then nv_fail "links or specials in the .deb: $contents"; fi

# ---------- install ----------
nv_log "dpkg -i"
dpkg -i "$deb" >"$workdir/dpkg.log" 2>&1 || { cat "$workdir/dpkg.log" >&2; nv_fail "dpkg -i failed"; }
for c in "configure containerd" "configure docker" doctor; do
  grep -q "containerd-shim-nvproxy-v1 $c" "$workdir/dpkg.log" || nv_fail "dpkg -i did not print '$c': $(cat "$workdir/dpkg.log")"
done
nv_assert_eq "ii " "$(dpkg-query -W -f='${db:Status-Abbrev}' "$PKG")" "package status after install"
[[ -x $BIN ]] || nv_fail "$BIN not installed"
if file -b "$BIN" | grep -q 'not stripped'; then nv_fail "$BIN is not stripped: $(file -b "$BIN")"; fi
nv_assert_eq "$BIN" "$(command -v containerd-shim-nvproxy-v1)" "the shim on PATH"
ver_out=$("$BIN" -v)
nv_assert_contains "$ver_out" "Version:  $project_version" "$BIN -v"
nv_assert_contains "$ver_out" "io.containerd.nvproxy.v1" "$BIN -v"
[[ -f $CONF ]] || nv_fail "$CONF not installed"
# The installed shim finds its CUDA helper in /usr/libexec: `diagnose` of a process holding a
# "device" asks the driver for its CUDA state, through the helper (no driver here: it says so).
: >"$workdir/fakedev0"
sleep 60 3<"$workdir/fakedev0" &
holder=$!
diag=$("$BIN" diagnose --id pkg --pid "$holder" --device-glob "$workdir/fakedev*" --libcuda /nonexistent/libcuda.so.1 2>&1 || true)
kill "$holder"
nv_assert_contains "$diag" 'cannot load the CUDA driver library "/nonexistent/libcuda.so.1"' "diagnose through the installed helper"
conffiles=$(dpkg-query -W -f='${Conffiles}' "$PKG")
nv_assert_contains "$conffiles" "$CONF $(md5sum <"$CONF" | cut -d' ' -f1)" "dpkg's conffile record"
man_path=$(man -w containerd-shim-nvproxy-v1 2>/dev/null) || nv_fail "man -w containerd-shim-nvproxy-v1 finds nothing"
nv_assert_eq /usr/share/man/man1/containerd-shim-nvproxy-v1.1.gz "$man_path" "man page path"
zcat "$man_path" | grep -q "^\.TH CONTAINERD-SHIM-NVPROXY-V1 1 .*\"containerd-shim-nvproxy $project_version\"" \
  || nv_fail "man page .TH lacks version $project_version"
man_warn=$(MANWIDTH=80 man --warnings -l "$man_path" 2>&1 >/dev/null || true)
[[ -z $man_warn ]] || nv_fail "groff warnings in the man page: $man_warn"
zcat /usr/share/doc/$PKG/changelog.Debian.gz | sed -n 1p | grep -q "^$PKG ($project_version-1)" \
  || nv_fail "changelog.Debian.gz's newest entry is not $project_version-1"
nv_assert_eq io.containerd.nvproxy.v1 "$(jq -r .runtimes.nvproxy.runtimeType /usr/share/containerd-shim-nvproxy/docker-daemon.json)" \
  "docker-daemon.json's runtimes.nvproxy.runtimeType"

# ---------- the snippet as containerd's CRI plugin reads it ----------
_nv_pick_binaries "$ctd" # sets NV_CONTAINERD_BIN for this version (no daemon yet)
{
  echo 'version = 2'
  echo "root = \"$workdir/dump-root\""
  echo "state = \"$workdir/dump-state\""
  cat "$SNIPPET"
} >"$workdir/cri.toml"
dump=$("$NV_CONTAINERD_BIN" --config "$workdir/cri.toml" config dump 2>&1) || nv_fail "containerd $ctd rejects the snippet: $dump"
section=$(awk '/^ *\[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvproxy\]/{on=1} on&&/^ *\[plugins/&&!/runtimes.nvproxy/{on=0} on' <<<"$dump")
nv_assert_contains "$section" 'runtime_type = "io.containerd.nvproxy.v1"' "CRI's view of the snippet"
nv_assert_contains "$section" 'ConfigPath = "/etc/containerd-shim-nvproxy/config.yaml"' "CRI's view of the snippet"
nv_assert_contains "$section" 'container_annotations = ["cdi.k8s.io/*"]' "CRI's view of the snippet"
nv_assert_contains "$section" 'pod_annotations = []' "CRI's view of the snippet"

# ---------- a private containerd whose config is the harness's plus only the snippet ----------
eval "_nv_write_config_base() $(declare -f _nv_write_config | tail -n +2)"
_nv_write_config() {
  _nv_write_config_base
  printf '\n# ---- %s (packaged snippet) ----\n' "$SNIPPET" >>"$NV_DIR/config.toml"
  cat "$SNIPPET" >>"$NV_DIR/config.toml"
}
nv_harness_start --containerd "$ctd"
grep -q 'runtime_type = "io.containerd.nvproxy.v1"' "$NV_DIR/config.toml" || nv_fail "snippet not in the daemon's config"
pid_path=$(tr '\0' '\n' </proc/"$(pgrep -f "containerd --config $NV_DIR/config.toml" | head -n1)"/environ | sed -n 's/^PATH=//p')
nv_assert_eq "$BIN" "$(PATH=$pid_path command -v containerd-shim-nvproxy-v1)" "the shim containerd finds on its PATH"

nv_log "ctr run --rm --runtime io.containerd.nvproxy.v1 (installed shim, packaged config)"
out=$(nv_ctr run --rm --runtime io.containerd.nvproxy.v1 "$NV_IMAGE" pkg-echo echo hi)
nv_assert_eq "hi" "$out" "ctr run output"

nv_log "detached: the shim process is $BIN and uses /etc's config (runc under /run/containerd/runc/NS)"
nv_ctr run -d --runtime io.containerd.nvproxy.v1 "$NV_IMAGE" pkg-long sleep 1000
shim_pid=$(pgrep -f "containerd-shim-nvproxy-v1 .*-address $NV_SOCK" | head -n1)
[[ -n $shim_pid ]] || nv_fail "no shim process for pkg-long"
nv_assert_eq "$BIN" "$(readlink /proc/"$shim_pid"/exe)" "/proc/$shim_pid/exe of the shim"
[[ -f /run/containerd/runc/$NV_NAMESPACE/pkg-long/state.json ]] \
  || nv_fail "runc state not under /run/containerd/runc/$NV_NAMESPACE: the default config.yaml was not used"
grep -q "shim $project_version serving on" "$NV_DIR/containerd.log" || nv_fail "containerd.log lacks the shim's start line"
nv_ctr task kill -s KILL pkg-long
nv_wait_for -t 10 bash -c "'$NV_CTR' -a '$NV_SOCK' -n '$NV_NAMESPACE' task ls | awk '\$1==\"pkg-long\"{print \$3}' | grep -qx STOPPED" \
  || nv_fail "pkg-long not STOPPED"
nv_ctr task rm pkg-long >/dev/null
nv_ctr c rm pkg-long

nv_log "ctr run --runtime-config-path (runtimeoptions ConfigPath) wins over /etc's config"
wrapper=$NV_DIR/runc-wrapper
cat >"$wrapper" <<EOF
#!/bin/sh
echo "\$*" >>"$NV_DIR/runc-wrapper.log"
exec $(command -v runc) "\$@"
EOF
chmod 0755 "$wrapper"
printf 'runtime:\n  binary: %s\nlog_level: debug\n' "$wrapper" >"$NV_DIR/alt-config.yaml"
out=$(nv_ctr run --rm --runtime io.containerd.nvproxy.v1 --runtime-config-path "$NV_DIR/alt-config.yaml" \
  "$NV_IMAGE" pkg-alt echo via-config-path)
nv_assert_eq "via-config-path" "$out" "ctr run --runtime-config-path output"
grep -q ' create .*pkg-alt' "$NV_DIR/runc-wrapper.log" 2>/dev/null \
  || nv_fail "runtime.binary of --runtime-config-path was not used: $(cat "$NV_DIR/runc-wrapper.log" 2>/dev/null)"

# ---------- remove keeps the conffile; reinstall keeps the admin's edit; purge leaves nothing ----------
echo "# edited by package_deb.sh" >>"$CONF"
nv_log "dpkg -r"
dpkg -r "$PKG" >"$workdir/dpkg.log" 2>&1 || { cat "$workdir/dpkg.log" >&2; nv_fail "dpkg -r failed"; }
nv_assert_eq "rc " "$(dpkg-query -W -f='${db:Status-Abbrev}' "$PKG")" "status after remove"
[[ ! -e $BIN ]] || nv_fail "$BIN left after dpkg -r"
[[ ! -e /usr/share/containerd-shim-nvproxy ]] || nv_fail "/usr/share/containerd-shim-nvproxy left after dpkg -r"
grep -q "edited by package_deb.sh" "$CONF" || nv_fail "dpkg -r did not keep the edited conffile"
dpkg -i "$deb" >"$workdir/dpkg.log" 2>&1 </dev/null || { cat "$workdir/dpkg.log" >&2; nv_fail "reinstall failed"; }
grep -q "edited by package_deb.sh" "$CONF" || nv_fail "reinstalling replaced the edited conffile"
nv_log "dpkg --purge"
dpkg --purge "$PKG" >"$workdir/dpkg.log" 2>&1 || { cat "$workdir/dpkg.log" >&2; nv_fail "dpkg --purge failed"; }
if dpkg-query -W "$PKG" >/dev/null 2>&1; then nv_fail "$PKG still known to dpkg after purge"; fi
for p in "$BIN" /etc/containerd-shim-nvproxy /usr/share/containerd-shim-nvproxy /usr/share/doc/$PKG \
  /usr/share/man/man1/containerd-shim-nvproxy-v1.1.gz; do
  [[ ! -e $p ]] || nv_fail "$p left after purge"
done
echo "PASS package_deb (containerd $NV_CONTAINERD_VERSION, $(basename "$deb"))"
