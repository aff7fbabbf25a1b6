#!/usr/bin/env bash
# Issue 23: CRIU < 4.2 cannot dump inet sockets on kernels >= 6.16 (SO_PASSCRED is refused there).
# With a CRIU that reports 4.1.1 (a wrapper named by runtime.criu_path, otherwise the real CRIU), a
# container holding a TCP listener and a fake CUDA process is refused before any CUDA toggle, with
# both versions and the fix in the error and in checkpoint-diagnostic.json, and keeps running; the
# same container checkpoints with the real CRIU. Then a restore that CRIU fails (the wrapper fails
# `restore` after writing CRIU-style Error lines) quotes CRIU's restore.log in its error.
# Usage: criu_kernel.sh [1.6|1.7|2|2.3]
set -euo pipefail
source "$(dirname "$0")/lib/shim-env.sh"
source "$(dirname "$0")/lib/fake-cuda.sh"
real_criu=$(command -v criu || true)
[[ -x $real_criu ]] || nv_skip "no CRIU installed (scripts/build-criu.sh)"
"$real_criu" --version | grep -q '^Version: 4\.[2-9]' || nv_skip "the real CRIU is not >= 4.2: $("$real_criu" --version | head -1)"
kernel=$(uname -r)
IFS=. read -r kmaj kmin _ <<<"$kernel"
((kmaj > 6 || (kmaj == 6 && kmin >= 16))) || nv_skip "kernel $kernel < 6.16: CRIU 4.1 dumps inet sockets there"
nv_fake_cuda

kit=$(mktemp -d /tmp/nvproxy-criu-kernel.XXXXXX)
nv_defer rm -rf "$kit"
# mode file: old (reports 4.1.1), real (reports itself), failrestore (restore fails CRIU-style).
echo old >"$kit/mode"
cat >"$kit/criu" <<EOS
#!/bin/sh
mode=\$(cat "$kit/mode")
if [ "\$1" = --version ] && [ "\$mode" = old ]; then echo "Version: 4.1.1"; exit 0; fi
if [ "\$1" = swrk ] && [ "\$mode" = failrestore ]; then
  # Where runc reads CRIU's log: its --work-path (runc is the parent).
  w=\$(tr '\\0' '\\n' </proc/\$PPID/cmdline | sed -n '/^--work-path\$/{n;p;}')
  printf '(00.01) Restoring\\n(00.42) Error (criu/cr-restore.c:1234): nvproxy-test: restore refused by the wrapper\\n' >"\$w/restore.log"
  exit 1
fi
exec "$real_criu" "\$@"
EOS
chmod 0755 "$kit/criu"
NV_RUNTIME_EXTRA="  criu_path: $kit/criu"
NV_SHIM_EXTRA="checkpoint:
  libcuda: $FIX/libcuda.so
  libnvml: $FIX/libnvidia-ml.so
  lock_timeout_ms: 5000
  device_globs: [\"/dev/nvidia*\", \"/dev/fakegpu*\"]"
export NV_RUNTIME_EXTRA NV_SHIM_EXTRA
nv_start_with_shim --containerd "${1:-1.6}"

MOUNTS=("${NV_FAKE_MOUNTS[@]}")
# httpd listens on 8080 (0x1F90), IPv4 or IPv6.
listening() { nv_ctr task exec --exec-id "l$RANDOM" web sh -c 'cat /proc/net/tcp /proc/net/tcp6 | grep -q ":1F90 [0-9A-F]*:0000 0A"'; }

nv_ctr run -d --runtime $NV_RT "${MOUNTS[@]}" "$NV_IMAGE" web \
  sh -c 'httpd -f -p 8080 & exec /fake/fake_cuda_app --dir /fakecuda --device /dev/fakegpu0'
nv_wait_for -t 10 bash -c "ls $FAKE/cuda | grep -q '\.ready$'" || nv_fail "fake CUDA app did not start"
nv_wait_for -t 10 listening || nv_fail "httpd does not listen on 8080"
cpid=$(ls "$FAKE/cuda" | sed -n 's/^\([0-9]*\)\.cuda$/\1/p' | head -1)

nv_log "CRIU 4.1.1 (criu_path) on kernel $kernel with a TCP listener: refused before any toggle"
set +e
err=$(nv_ctr task checkpoint web 2>&1)
rc=$?
set -e
((rc != 0)) || nv_fail "the checkpoint with CRIU 4.1.1 and a TCP listener succeeded"
echo "$err" >&2
nv_assert_contains "$err" "CRIU 4.1.1 cannot checkpoint inet sockets on kernel $kernel" "error names both versions"
nv_assert_contains "$err" "install CRIU >= 4.2" "error gives the fix"
nv_assert_contains "$err" ":8080 (listening)" "error names the socket"
# containerd's client appends the class word; it completes the last line "status", not a sentence.
nv_assert_contains "$err" $'\nstatus: failed precondition' "the report ends as sentences"
diag=$(nv_bundle web)/checkpoint-diagnostic.json
jq -e '.verdict == "refused" and .criu.version == "4.1.1" and .criu.kernel == "'"$kernel"'"
       and (.criu.inet_sockets | length) >= 1 and (.criu.fix | test("CRIU >= 4.2"))' "$diag" >/dev/null ||
  nv_fail "checkpoint-diagnostic.json lacks the CRIU refusal: $(cat "$diag")"
if grep -qE ' (lock|checkpoint) ' "$FAKE/cuda/calls.log" 2>/dev/null; then
  nv_fail "CUDA was toggled although the refusal was certain: $(cat "$FAKE/cuda/calls.log")"
fi
nv_assert_eq RUNNING "$(nv_task_status web)" "container state after the refusal"
nv_assert_eq running "$(nv_fake_state "$cpid")" "CUDA state after the refusal"
nv_fake_advancing "$cpid" || nv_fail "the CUDA process stopped working after the refusal"
nv_wait_for -t 5 listening || nv_fail "httpd stopped listening after the refusal"

nv_log "the real CRIU ($("$real_criu" --version | head -1)) checkpoints the same container"
echo real >"$kit/mode"
# The shim learnt the CRIU version once; a new shim (a new container) asks again.
nv_ctr task kill -s KILL web
nv_wait_for -t 10 bash -c "[[ \$(ctr -a $NV_SOCK -n $NV_NAMESPACE task ls | awk '\$1==\"web\"{print \$3}') == STOPPED ]]"
nv_ctr task rm web >/dev/null
nv_ctr c rm web
rm -f "$FAKE"/cuda/*
nv_ctr run -d --runtime $NV_RT "${MOUNTS[@]}" "$NV_IMAGE" web \
  sh -c 'httpd -f -p 8080 & exec /fake/fake_cuda_app --dir /fakecuda --device /dev/fakegpu0'
nv_wait_for -t 10 bash -c "ls $FAKE/cuda | grep -q '\.ready$'" || nv_fail "fake CUDA app did not start"
nv_wait_for -t 10 listening || nv_fail "httpd does not listen on 8080"
cpid=$(ls "$FAKE/cuda" | sed -n 's/^\([0-9]*\)\.cuda$/\1/p' | head -1)
nv_ctr c checkpoint --task --rw web webref
nv_assert_eq 1 "$(awk '$2=="checkpoint" && $5==0' "$FAKE/cuda/calls.log" | wc -l)" "CUDA checkpoints with CRIU 4.2"
nv_assert_eq RUNNING "$(nv_task_status web)" "container state after the checkpoint"
nv_assert_eq running "$(nv_fake_state "$cpid")" "CUDA state after a leave-running checkpoint"

nv_log "a restore that CRIU fails quotes CRIU's restore.log"
nv_ctr task kill -s KILL web
nv_wait_for -t 10 bash -c "[[ \$(ctr -a $NV_SOCK -n $NV_NAMESPACE task ls | awk '\$1==\"web\"{print \$3}') == STOPPED ]]"
nv_ctr task rm web >/dev/null
nv_ctr c rm web
echo failrestore >"$kit/mode"
set +e
err=$(nv_ctr c restore --live --rw web webref </dev/null 2>&1)
rc=$?
set -e
((rc != 0)) || nv_fail "the restore with a failing CRIU succeeded"
echo "$err" >&2
nv_assert_contains "$err" "restore of container \"web\" failed" "error names the restore"
nv_assert_contains "$err" "restore.log):" "error names CRIU's log"
nv_assert_contains "$err" "nvproxy-test: restore refused by the wrapper" "error quotes CRIU's Error line"
echo "PASS criu_kernel (containerd $NV_CONTAINERD_VERSION)"
