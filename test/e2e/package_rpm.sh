#!/usr/bin/env bash
# Issue "Packages and ecosystem" acceptance: the .rpm's metadata (files, requires from autoreq,
# weak dependencies, scripts, provides, %config(noreplace), changelog) and an install into an
# alternate root (rpm --root), where the files land and the config behaves as %config(noreplace).
# Usage: package_rpm.sh
#   NVPROXY_RPM        the .rpm to test (default: built here with cpack from NVPROXY_BUILD_DIR)
#   NVPROXY_BUILD_DIR  configured build tree (default: the parent of $NVPROXY_SHIM_DIR, else build/)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
PKG=containerd-shim-nvproxy
CONF=/etc/containerd-shim-nvproxy/config.yaml

fail() {
  echo "FAIL: $*" >&2
  exit 1
}
log() { echo "[rpm $(date +%T)] $*" >&2; }
assert_eq() { [[ $1 == "$2" ]] || fail "$3: expected [$1], got [$2]"; }
assert_contains() { [[ $1 == *"$2"* ]] || fail "$3: [$2] not in [$1]"; }

for t in rpm readelf file; do command -v $t >/dev/null || fail "$t missing (scripts/install-deps.sh)"; done
build_dir=${NVPROXY_BUILD_DIR:-}
if [[ -z $build_dir && -n ${NVPROXY_SHIM_DIR:-} ]]; then build_dir=$(dirname "$NVPROXY_SHIM_DIR"); fi
build_dir=${build_dir:-$REPO/build}

work=$(mktemp -d /tmp/nvproxy-pkgrpm.XXXXXX)
trap 'rm -rf --one-file-system "$work"' EXIT

project_version=$(sed -nE 's/^project\(containerd-shim-nvproxy VERSION ([0-9.]+).*/\1/p' "$REPO/CMakeLists.txt")
[[ -n $project_version ]] || fail "cannot read the project version from CMakeLists.txt"
rpmf=${NVPROXY_RPM:-}
if [[ -z $rpmf ]]; then
  [[ -f $build_dir/CPackConfig.cmake ]] || fail "no CPackConfig.cmake in $build_dir (configure the build first)"
  log "cpack -G RPM from $build_dir"
  (cd "$build_dir" && cpack -G RPM -B "$work/out" >"$work/cpack.log" 2>&1) || {
    tail -n 30 "$work/cpack.log" >&2
    fail "cpack -G RPM failed"
  }
  rpmf=$(ls "$work"/out/*.rpm)
fi
[[ -f $rpmf ]] || fail "no .rpm at $rpmf"
log "testing $rpmf"
q() { rpm -qp --nosignature "$@" "$rpmf" 2>/dev/null; }

# ---------- header ----------
assert_eq "$PKG $project_version 1 Apache-2.0 x86_64" \
  "$(q --qf '%{NAME} %{VERSION} %{RELEASE} %{LICENSE} %{ARCH}')" "name version release license arch"
assert_eq "(none)" "$(q --qf '%{PREFIXES}')" "the package is not relocatable"
assert_contains "$(q --qf '%{DESCRIPTION}')" "io.containerd.nvproxy.v1" "description"

# ---------- --list: exactly these paths ----------
expected="/etc/containerd-shim-nvproxy
/etc/containerd-shim-nvproxy/config.yaml
/usr/bin/containerd-shim-nvproxy-v1
/usr/libexec/containerd-shim-nvproxy
/usr/libexec/containerd-shim-nvproxy/criu-plugins
/usr/libexec/containerd-shim-nvproxy/criu-plugins/nvproxy_criu_release.so
/usr/libexec/containerd-shim-nvproxy/nvproxy-cuda-helper
/usr/libexec/containerd-shim-nvproxy/nvproxy-image-transfer
/usr/libexec/containerd-shim-nvproxy/nvproxy-sandbox-agent
/usr/share/containerd-shim-nvproxy
/usr/share/containerd-shim-nvproxy/containerd-config.toml
/usr/share/containerd-shim-nvproxy/docker-daemon.json
/usr/share/doc/containerd-shim-nvproxy
/usr/share/doc/containerd-shim-nvproxy/LICENSE
/usr/share/doc/containerd-shim-nvproxy/changelog.Debian.gz
/usr/share/doc/containerd-shim-nvproxy/copyright
/usr/share/man/man1/containerd-shim-nvproxy-v1.1.gz"
# Docs added later (README.md, docs/*.md) are allowed under the doc dir.
listed=$(q --list | grep -vE '^/usr/share/doc/containerd-shim-nvproxy/[A-Za-z-]+\.md$' | sort)
assert_eq "$(sort <<<"$expected")" "$listed" "rpm -qp --list"
for d in /etc /usr /usr/bin /usr/libexec /usr/share /usr/share/man /usr/share/man/man1 /usr/share/doc /usr/lib/.build-id; do
  if q --list | grep -qx "$d"; then fail "the package owns the system directory $d"; fi
done
# Modes and flags: the binary 0755, config %config(noreplace) ("cn"), the rest plain files.
flags=$(q --qf '[%{FILEMODES:perms} %{FILEFLAGS:fflags} %{FILENAMES}\n]')
grep -qx -- "-rwxr-xr-x  /usr/bin/containerd-shim-nvproxy-v1" <<<"$flags" || fail "binary mode/flags: $flags"
grep -qx -- "-rw-r--r-- cn $CONF" <<<"$flags" || fail "config.yaml is not %config(noreplace) 0644: $flags"
assert_eq "$CONF" "$(q --configfiles)" "rpm -qp --configfiles"

# ---------- --requires (the NEEDED check runs on the installed binary below) ----------
requires=$(q --requires)
# The shim is static; the helper links glibc alone (its C++ libraries are built in).
for so in libyaml-cpp.so libprotobuf libboost_program_options.so libstdc++.so; do
  if grep -q "$so" <<<"$requires"; then fail "Requires names $so, which is linked in statically: $requires"; fi
done
assert_contains "$requires" "libc.so.6(GLIBC_" "versioned glibc requirement"
# The one script (%post, issue 58) is /bin/sh's.
if grep -qE '^/bin/bash' <<<"$requires"; then fail "Requires bash, though the only script is sh's: $requires"; fi
assert_eq "runc" "$(q --recommends)" "rpm -qp --recommends"
assert_eq "criu" "$(q --suggests | sort | xargs)" "rpm -qp --suggests"

# ---------- --scripts, --provides, --changelog ----------
# %post only prints the commands that wire the node: no other script.
scripts=$(q --scripts)
assert_eq "postinstall scriptlet (using /bin/sh):" "$(grep -E 'scriptlet' <<<"$scripts")" "rpm -qp --scripts (installing must not touch containerd or docker)"
assert_contains "$scripts" "containerd-shim-nvproxy-v1 configure containerd" "%post"
assert_contains "$scripts" "containerd-shim-nvproxy-v1 doctor" "%post"
provides=$(q --provides)
assert_contains "$provides" "$PKG = $project_version-1" "Provides"
if grep -q '\.so' <<<"$provides"; then fail "Provides exports libraries (autoprov should be off): $provides"; fi
# sed reads the whole changelog: `head -n1` would end the pipe early and rpm die of SIGPIPE, which
# pipefail counts as a failure once the changelog outgrows one write.
newest=$(q --changelog | sed -n 1p)
grep -qE "^\* [A-Z][a-z]{2} [A-Z][a-z]{2} [0-9]{2} [0-9]{4} .* - $project_version-1\$" <<<"$newest" \
  || fail "newest %changelog entry is not $project_version-1: $newest"

# ---------- install into an alternate root ----------
root=$work/root
mkdir -p "$root"
rpm --root "$root" --initdb
# %post runs chrooted in the root with /bin/sh: a static busybox stands in.
mkdir -p "$root/bin" && cp /bin/busybox "$root/bin/sh"
log "rpm --root $root -i --nodeps --nosignature"
rpm --root "$root" -i --nodeps --nosignature "$rpmf" >"$work/i.out" 2>&1 || fail "rpm -i into $root failed: $(cat "$work/i.out")"
assert_contains "$(cat "$work/i.out")" "containerd-shim-nvproxy-v1 configure containerd" "rpm -i's output (%post)"
assert_eq "$PKG-$project_version-1.x86_64" "$(rpm --root "$root" -q "$PKG")" "rpm -q in the alternate root"
while read -r f; do
  [[ -e $root$f ]] || fail "$f not in $root after install"
done <<<"$expected"
[[ -x $root/usr/bin/containerd-shim-nvproxy-v1 ]] || fail "binary not executable in $root"
cmp -s "$root$CONF" "$REPO/packaging/config.yaml" || fail "$CONF differs from packaging/config.yaml"
assert_contains "$("$root/usr/bin/containerd-shim-nvproxy-v1" -v)" "Version:  $project_version" "installed binary -v"
verify=$(rpm --root "$root" -V --nodeps --nosignature "$PKG" 2>&1) || fail "rpm -V: $verify"

# The packaged binaries are stripped; the shim links nothing at run time, and autoreq named every
# library the helper links.
bin=$root/usr/bin/containerd-shim-nvproxy-v1
helper=$root/usr/libexec/containerd-shim-nvproxy/nvproxy-cuda-helper
agent=$root/usr/libexec/containerd-shim-nvproxy/nvproxy-sandbox-agent
transfer=$root/usr/libexec/containerd-shim-nvproxy/nvproxy-image-transfer
for b in "$bin" "$helper" "$agent" "$transfer"; do
  if file -b "$b" | grep -q 'not stripped'; then fail "the packaged $b is not stripped"; fi
done
file -b "$bin" | grep -q 'statically linked' || fail "the shim is not static: $(file -b "$bin")"
file -b "$transfer" | grep -q 'statically linked' || fail "nvproxy-image-transfer is not static: $(file -b "$transfer")"
mapfile -t needed < <(readelf -d "$helper" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
((${#needed[@]} >= 1)) || fail "readelf found no NEEDED entries in the helper"
for so in "${needed[@]}"; do
  grep -qxF "$so()(64bit)" <<<"$requires" || fail "Requires lacks $so()(64bit) (autoreq): $requires"
done

log "%config(noreplace): an edited config survives reinstall, is kept as .rpmsave on erase"
echo "# edited by package_rpm.sh" >>"$root$CONF"
rpm --root "$root" -U --replacepkgs --nodeps --nosignature "$rpmf" 2>"$work/u.err" || fail "reinstall: $(cat "$work/u.err")"
grep -q "edited by package_rpm.sh" "$root$CONF" || fail "reinstall replaced the edited config"
rpm --root "$root" -e --nodeps "$PKG" 2>"$work/e.err" || fail "rpm -e: $(cat "$work/e.err")"
if rpm --root "$root" -q "$PKG" >/dev/null 2>&1; then fail "$PKG still installed in $root after -e"; fi
[[ ! -e $root/usr/bin/containerd-shim-nvproxy-v1 ]] || fail "binary left after rpm -e"
grep -q "edited by package_rpm.sh" "$root$CONF.rpmsave" 2>/dev/null || fail "the edited config was not saved as .rpmsave"
echo "PASS package_rpm ($(basename "$rpmf"))"
