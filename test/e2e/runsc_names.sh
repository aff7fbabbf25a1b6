#!/usr/bin/env bash
# Issue 44: runsc looks a container up by prefix ("id \"web\" is ambiguous" beside "web2" in one
# --root), so names such as web / web2 / web-canary failed under runsc: create, ps, pause, kill,
# checkpoint. The shim gives every sandbox a runsc root of its own. Here `web` is created last,
# beside `web2` and `web-canary`, and every verb runs on it; then its root is gone after delete.
# Usage: runsc_names.sh [1.6|1.7|2.3]
set -euo pipefail
source "$(dirname "$0")/lib/shim-env.sh"
[[ $NV_RUNTIME == runsc ]] || nv_skip "runsc only (NV_RUNTIME=$NV_RUNTIME)"
nv_start_with_shim --containerd "${1:-1.6}"
root=$(awk '$1=="root:"{print $2; exit}' "$NVPROXY_SHIM_CONFIG")/$NV_NAMESPACE
runsc_bin=$(awk '$1=="binary:"{print $2; exit}' "$NVPROXY_SHIM_CONFIG")

loop='i=0; while :; do i=$((i+1)); echo $i >/tmp/c.new; mv /tmp/c.new /tmp/c; sleep 0.1; done'
for name in web2 web-canary web; do
  nv_ctr run -d --runtime $NV_RT "$NV_IMAGE" "$name" sh -c "$loop"
  nv_assert_eq RUNNING "$(nv_task_status "$name")" "$name after run"
done
# One root per sandbox, each holding its own container only.
for name in web2 web-canary web; do
  listed=$("$runsc_bin" --root "$root/$name" list | awk 'NR>1{print $1}')
  nv_assert_eq "$name" "$listed" "runsc list in $root/$name"
done

counter() {
  local out
  out=$(nv_ctr task exec --exec-id "c$RANDOM" "$1" sh -c 'cat /tmp/c; echo .') || return
  out=${out%.}
  echo "${out%$'\n'}"
}
counter_above() { [[ $(counter "$1" 2>/dev/null || echo 0) -gt $2 ]]; }
nv_wait_for -t 20 counter_above web 5 || nv_fail "web's loop never ran: $(counter web)"

nv_log "exec and ps"
nv_assert_eq hello "$(nv_ctr task exec --exec-id hi web echo hello)" "exec in web"
# The loop's shell and its sleep: between two sleeps the shell is alone, so ps is asked again.
ps_lists_two() { (($(nv_ctr task ps web | awk 'NR>1' | wc -l) >= 2)); }
nv_wait_for -t 10 ps_lists_two || nv_fail "ctr task ps web: $(nv_ctr task ps web 2>&1)"

nv_log "pause and resume"
nv_ctr task pause web
nv_assert_eq PAUSED "$(nv_task_status web)" "web after pause"
nv_assert_eq RUNNING "$(nv_task_status web2)" "web2 while web is paused"
nv_ctr task resume web
nv_assert_eq RUNNING "$(nv_task_status web)" "web after resume"

nv_log "checkpoint (leave running) and restore"
before=$(counter web)
nv_ctr c checkpoint --task web webref
nv_assert_eq RUNNING "$(nv_task_status web)" "web after a leave-running checkpoint"
nv_ctr task kill -s KILL web
nv_wait_for -t 10 nv_task_stopped web
nv_ctr task rm web >/dev/null
nv_ctr c rm web
[[ ! -e $root/web ]] || nv_fail "web's runsc root is left after its delete: $(ls -la "$root/web" 2>&1)"
nv_ctr c restore --live web webref </dev/null
nv_assert_eq RUNNING "$(nv_task_status web)" "web after restore"
after=$(counter web)
((after >= before)) || nv_fail "web's state did not continue: before=$before after=$after"
nv_wait_for -t 10 counter_above web "$after" || nv_fail "restored web does not run"

nv_log "kill and delete of web; its neighbours run on"
nv_ctr task kill -s KILL web
nv_wait_for -t 10 nv_task_stopped web
nv_ctr task rm web >/dev/null
nv_ctr c rm web
[[ ! -e $root/web ]] || nv_fail "web's runsc root is left after its delete"
for name in web2 web-canary; do
  nv_assert_eq RUNNING "$(nv_task_status "$name")" "$name after web's delete"
  nv_ctr task kill -s KILL "$name"
  nv_wait_for -t 10 nv_task_stopped "$name"
  nv_ctr task rm "$name" >/dev/null
  nv_ctr c rm "$name"
done
echo "PASS runsc_names (containerd $NV_CONTAINERD_VERSION)"
