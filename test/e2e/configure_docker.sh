#!/usr/bin/env bash
# Issue 58: `containerd-shim-nvproxy-v1 configure docker` adds runtimes.nvproxy and nvproxy-exit to
# a daemon.json that has settings of its own, keeps them, writes nvproxy-exit's shim config, and
# Docker 26 then runs containers through both: `docker run --runtime nvproxy`, and a
# `docker checkpoint create` through nvproxy-exit that stops the container. A second configure is a
# no-op; --dry-run writes nothing; a malformed daemon.json is refused with its line and column.
# Usage: configure_docker.sh [1.7|1.6]
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/lib/harness.sh"
source "$HERE/lib/docker.sh"
ctd=${1:-1.7}
SHIM=${NVPROXY_SHIM_DIR:?NVPROXY_SHIM_DIR is not set (ctest sets it)}/containerd-shim-nvproxy-v1
nv_docker_prepare
command -v criu >/dev/null || nv_skip "no criu for docker checkpoint (scripts/build-criu.sh)"

shim_cfg=$(mktemp /tmp/nvproxy-cfgdocker.XXXXXX.yaml)
nv_defer rm -f "$shim_cfg"
nv_harness_start --containerd "$ctd"
printf 'runtime:\n  binary: %s\n  root: %s\nlog_level: debug\n' "$(command -v runc)" "$NV_DIR/runc-root" >"$shim_cfg"

J=$NV_DIR/daemon.json
EXIT_CFG=$NV_DIR/exit.yaml
# Settings of the operator's that must survive, in their order.
printf '{\n  "log-level": "info",\n  "runtimes": {"plain-runc": {"path": "%s"}},\n  "max-concurrent-downloads": 2\n}\n' \
  "$(command -v runc)" >"$J"
orig=$(sha256sum "$J" | cut -d' ' -f1)
configure() { "$SHIM" configure docker --config "$J" --shim-config "$shim_cfg" --exit-config "$EXIT_CFG" "$@"; }

out=$(configure --experimental --dry-run)
nv_assert_contains "$out" '"runtimeType": "io.containerd.nvproxy.v1"' "dry run's diff"
nv_assert_eq "$orig" "$(sha256sum "$J" | cut -d' ' -f1)" "daemon.json after --dry-run"
[[ ! -e $EXIT_CFG ]] || nv_fail "--dry-run wrote $EXIT_CFG"

out=$(configure --experimental)
nv_log "$out"
nv_assert_contains "$out" "the original is $J.nvproxy-orig" "configure's report"
nv_assert_eq "$orig" "$(sha256sum "$J.nvproxy-orig" | cut -d' ' -f1)" "the original kept beside it"
nv_assert_eq "log-level runtimes max-concurrent-downloads experimental" "$(jq -r 'keys_unsorted | join(" ")' "$J")" "daemon.json's keys"
nv_assert_eq "plain-runc nvproxy nvproxy-exit" "$(jq -r '.runtimes | keys_unsorted | join(" ")' "$J")" "its runtimes"
nv_assert_eq "$shim_cfg" "$(jq -r '.runtimes.nvproxy.options.ConfigPath' "$J")" "nvproxy's shim config"
nv_assert_eq "$EXIT_CFG" "$(jq -r '.runtimes["nvproxy-exit"].options.ConfigPath' "$J")" "nvproxy-exit's shim config"
grep -q "exit_without_options: true" "$EXIT_CFG" || nv_fail "$EXIT_CFG: $(cat "$EXIT_CFG")"
grep -q "root: $NV_DIR/runc-root" "$EXIT_CFG" || nv_fail "$EXIT_CFG lacks the base config's settings: $(cat "$EXIT_CFG")"

configured=$(sha256sum "$J" | cut -d' ' -f1)
out=$(configure --experimental)
nv_assert_contains "$out" "nothing to change" "second configure"
nv_assert_eq "$configured" "$(sha256sum "$J" | cut -d' ' -f1)" "daemon.json after the second configure"

printf '{\n  "a": 1,\n  "b": ,\n}\n' >"$NV_DIR/bad.json"
set +e
err=$("$SHIM" configure docker --config "$NV_DIR/bad.json" 2>&1 >/dev/null)
rc=$?
set -e
nv_assert_eq 1 "$rc" "configure docker of a malformed daemon.json"
nv_assert_contains "$err" "$NV_DIR/bad.json:3:" "line of the error"
[[ ! -e $NV_DIR/bad.json.nvproxy-orig ]] || nv_fail "a backup of the malformed file was made"

nv_docker_start "$J"
runtimes=$("$DOCKER" info --format '{{json .Runtimes}}' | jq -r 'keys | join(" ")')
for r in nvproxy nvproxy-exit plain-runc; do [[ " $runtimes " == *" $r "* ]] || nv_fail "docker info lacks $r: $runtimes"; done
nv_docker_load
out=$("$DOCKER" run --rm --runtime nvproxy --network none "$NV_DOCKER_IMG" echo hello)
nv_assert_eq hello "$out" "docker run --runtime nvproxy"

nv_log "nvproxy-exit: docker checkpoint create stops the container (its shim config, written by configure)"
c=$("$DOCKER" run -d --runtime nvproxy-exit --network none "$NV_DOCKER_IMG" sleep 1000)
running() { [[ $("$DOCKER" inspect -f '{{.State.Status}}' "$c") == running ]]; }
exited() { [[ $("$DOCKER" inspect -f '{{.State.Status}}' "$c") == exited ]]; }
nv_wait_for -t 30 running || nv_fail "container $c not running"
"$DOCKER" checkpoint create "$c" cp1 >/dev/null
nv_wait_for -t 30 exited || nv_fail "container still $("$DOCKER" inspect -f '{{.State.Status}}' "$c") after docker checkpoint create"
nv_log "PASS"
