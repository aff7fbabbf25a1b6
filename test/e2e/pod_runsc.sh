#!/usr/bin/env bash
# shellcheck disable=SC2016 # jq filters read $ENV.X: the shell must not expand them
# Issue 59: a gVisor pod checkpointed whole on node A and restored as a pod on node B, through CRI
# (crictl) and the real runsc, containerd configured from docs/install.md's blocks, the fake CUDA
# driver inside the sandbox.
#   node A   a runsc pod of three containers: "cuda" (a fake-CUDA parent and child), "cuda2" (one
#            more fake-CUDA process, its driver state apart, its output sent to a file as the GPU
#            run's workload does) and "counter" (a CPU sidecar counting in memory and on its
#            stdout), each having written a file into its writable layer; the counter also wrote a
#            file into the pod's /dev/shm and keeps it open (as multiprocessing keeps its sem.mp-*
#            files), which the CUDA container sees; an init container ran first and ended (it wrote
#            into /dev/shm too), which the checkpoint deletes from the sandbox and leaves out of
#            the image, so that node B's pod neither names it nor waits for it. `crictl checkpoint` of the
#            SIDECAR: runsc saves the whole sandbox, and the shim toggles CUDA in both GPU
#            containers in one attempt: every lock, in either container, before any checkpoint
#            (the fake driver's calls and the shim's log of its toggles say so), one runsc
#            checkpoint; all keep running. Then a checkpoint in which cuda2's process fails its
#            CUDA checkpoint: refused naming the process with its container and pid there, CUDA
#            rolled back in both containers (after every lock, before any snapshot), all running.
#            And a pod sharing one PID namespace (shareProcessNamespace) with two GPU containers on
#            one driver state: checkpointed from its first GPU container, which sees them all
#            (every lock before any checkpoint, all three processes in its record), all running.
#            The image (one store entry, its record naming the pod) goes to a registry on loopback
#            with `image push --kube`.
#   node B   a second containerd of the same version, its own root, state and store. Refused at the
#            pod's create (RunPodSandbox), each with its reason and nothing of the pod left: a
#            container of the image the pod does not name, a container the image does not hold,
#            restore by annotation off, the pod under runc (another runtime); refused at the container's create, the pod's sandbox ended: the CUDA container
#            asking for no GPU. A pod whose restore fails in runsc after its sandbox and two of its
#            containers were restored (the last one's command changed: runsc's spec validation),
#            removed through CRI (crictl rmp) with nothing of it left running. Then the pod
#            restored: RunPodSandbox, CreateContainer and StartContainer as for any pod; the three
#            processes' CUDA back, every counter past its checkpointed value, the files of node A
#            there, the pod's /dev/shm file too (in runsc's image: the shim makes a runsc pod's
#            /dev/shm a tmpfs inside the sandbox) and still open in the counter, the counter's
#            counts past the checkpoint in its CRI log. Then the same image into a second pod
#            (fan-out), one store entry. Both restored pods stopped (crictl stopp, under crictl's
#            60 s deadline) and removed through CRI, nothing of them left: the sandbox of a restore
#            holds the output pipes cuda2's restored process does not use until the pod's end.
# Usage: pod_runsc.sh 2.4|2.3   (NV_RUNSC_DEBUG=1: runsc's debug logs on node B, their errors shown
# when a restore fails)
set -euo pipefail
export NV_RUNTIME=runsc NV_RUNSC=current
source "$(dirname "$0")/lib/cri.sh"
source "$(dirname "$0")/lib/fake-cuda.sh"
source "$(dirname "$0")/lib/registry.sh"
VER=${1:?usage: pod_runsc.sh 2.4|2.3}
NODE=${NV_CRI_NODE:-A}

nv_fake_cuda_sandbox "${NV_B_FAKE:-}"  # node B: node A's fake driver (the same GPU)
nv_cri_node_config "$NV_FAKE_SANDBOX_CONFIG" nvproxy-podstore
nv_cri_start "$VER"
RUNSC=$(awk '$1=="binary:"{print $2; exit}' "$NV_CRI_SHIM_CONFIG")
RUNSC_LOGS=$NV_DIR/runsc-logs
if [[ $NODE == B ]]; then
  # A sandbox that dies while it restores says why in its panic log (and, asked, its debug logs).
  mkdir -p "$RUNSC_LOGS"
  flags="\"--panic-log=$RUNSC_LOGS/panic.log\""
  [[ -z ${NV_RUNSC_DEBUG:-} ]] || flags+=", \"--debug\", \"--debug-log=$RUNSC_LOGS/\""
  sed -i "s|^  extra_args: \[\(.*\)\]$|  extra_args: [\1, $flags]|" "$NV_CRI_SHIM_CONFIG"
fi
# start ID...: StartContainer; on failure runsc's panic log and the end of its debug log, if any.
start() {
  local err
  err=$(nv_crictl start "$@" 2>&1) && return 0
  if [[ -s $RUNSC_LOGS/panic.log ]]; then
    echo "---- runsc's panic log ----" >&2
    tail -60 "$RUNSC_LOGS/panic.log" | cut -c1-400 >&2
  fi
  if [[ -n ${NV_RUNSC_DEBUG:-} ]]; then
    local boot
    boot=$(find "$RUNSC_LOGS" -name '*boot*' -printf '%T@ %p\n' | sort -n | tail -1 | cut -d' ' -f2)
    echo "---- $boot ----" >&2
    grep -v 'config.go' "$boot" | tail -60 | cut -c1-400 >&2
  fi
  nv_fail "StartContainer $*: $err"
}

# The containers as both nodes create them: the same image, commands, mounts and environment.
export CUDA_CMD='echo cuda-on-a >/written; exec /fake/fake_cuda_app --dir /fakecuda --device /dev/fakegpu0 --map --children 1'
# The counter also writes each count to its stdout: a restored container's output reaches CRI's
# log after the restore (the shim ends a container's output only once the container has ended).
export COUNT_CMD='echo counter-on-a >/written; echo shm-on-a >/dev/shm/pod-note; exec 3</dev/shm/pod-note; i=0; while :; do i=$((i+1)); echo $i >/tmp/c.new; mv /tmp/c.new /tmp/counter; echo count $i; sleep 0.1; done'
# cuda2 sends its output elsewhere, so its restored process holds no end of its output pipes.
export CUDA2_CMD='echo cuda2-on-a >/written; exec /fake/fake_cuda_app --dir /fakecuda --device /dev/fakegpu0 --map >/tmp/cuda2.log 2>&1'
gpu_ctr() {  # NAME CMD_VAR POD_NAME POD_ID [CUDA_STATE_DIR] [JQ]
  local state=${5:-$FAKE/$1}
  CUDA_MOUNTS=$(jq -n --arg f "$FAKE" --arg s "$state" '[{container_path: "/fakecuda", host_path: $s},
    {container_path: "/fake", host_path: ($f + "/bin"), readonly: true}]')
  export CUDA_MOUNTS
  nv_cri_ctr "$3" "$4" "$1" '.mounts = ($ENV.CUDA_MOUNTS | fromjson)
    | .envs = [{key: "NVIDIA_VISIBLE_DEVICES", value: "0"}, {key: "NVPROXY_FAKE_CUDA_DIR", value: "/fakecuda"}]
    | .command = ["sh", "-c", $ENV.'"$2"'] | '"${6:-.}"
}
# A pod (and its containers) sharing one PID namespace: shareProcessNamespace.
SHARED_PID='.linux.security_context.namespace_options.pid = 0'
cuda_ctr() { gpu_ctr cuda CUDA_CMD "$@"; }   # POD_NAME POD_ID [CUDA_STATE_DIR] [JQ]
cuda2_ctr() { gpu_ctr cuda2 CUDA2_CMD "$@"; }
count_ctr() { nv_cri_ctr "$1" "$2" counter '.command = ["sh", "-c", $ENV.COUNT_CMD]'; }
counter_of() { nv_crictl exec "$1" cat /tmp/counter 2>/dev/null || echo 0; }
counter_past() { (($(counter_of "$1") > $2)); }
# Whether container $1's log (CRI's, from its stdout) holds a count past $2.
logged_past() { (($(nv_crictl logs "$1" 2>/dev/null | awk '$1 == "count" { n = $2 } END { print n + 0 }') > $2)); }
cuda_ready() { (($(find "$FAKE/${2:-cuda}" -name '*.ready' | wc -l) >= $1)); }
# The one CUDA process of cuda2 (its own driver state dir).
cuda2_pid() { find "$FAKE/cuda2" -maxdepth 1 -name '*.cuda' -printf '%f\n' | sed 's/\.cuda$//'; }
# The fake driver's view of sandbox pid $2 in state dir $1.
counter_in() { cat "$1/$2.counter" 2>/dev/null || echo 0; }
counted_past_in() { (($(counter_in "$1" "$2") > $3)); }
pod_removed() { nv_crictl rmp -f "$1" >/dev/null 2>&1; }
# The shim's log lines of the pod's CUDA toggles (PodCudaToggler), in order: "OP NAME PID" each.
pod_toggles() {
  grep -o 'CUDA [a-z]* in container \\"[a-z0-9]*\\" pid [0-9]*' "$NV_DIR/containerd.log" |
    sed 's/^CUDA \([a-z]*\) in container \\"\([a-z0-9]*\)\\" pid \([0-9]*\)$/\1 \2 \3/'
}
# Whether the shim's log holds $1 reports of the pod's checkpoint (done or failed) as one attempt.
pod_toggles_logged() {
  (($(grep -cE 'GPU containers cuda, cuda2\)( done|: the pod.s GPU containers number)' "$NV_DIR/containerd.log") >= $1))
}
# pod_locks_first LOCK CKPT N_CUDA N_CUDA2 [FROM]: the toggles the shim logged (from its line FROM
# of them on) lock N_CUDA processes of cuda and N_CUDA2 of cuda2 before the first checkpoint of
# either, and none after it.
pod_locks_first() {
  local t
  t=$(pod_toggles | tail -n +"${5:-1}")
  echo "$t" >&2
  local first_ckpt
  first_ckpt=$(awk -v op="$2" '$1 == op { print NR; exit }' <<<"$t")
  [[ -n $first_ckpt ]] || nv_fail "the shim logged no CUDA $2"
  nv_assert_eq "$3" "$(head -n "$first_ckpt" <<<"$t" | awk -v op="$1" '$1 == op && $2 == "cuda"' | wc -l)" "cuda's locks before the first checkpoint"
  nv_assert_eq "$4" "$(head -n "$first_ckpt" <<<"$t" | awk -v op="$1" '$1 == op && $2 == "cuda2"' | wc -l)" "cuda2's locks before the first checkpoint"
  nv_assert_eq 0 "$(tail -n +"$first_ckpt" <<<"$t" | awk -v op="$1" '$1 == op' | wc -l)" "locks after the first checkpoint"
}
# No process (runsc's sandbox and gofers, the shim) names the pod's sandbox id $1 any more.
pod_processes_gone() { ! pgrep -f -- "$1" >/dev/null; }
# runsc's status of container $2 of the pod whose sandbox is $1.
runsc_status() { "$RUNSC" --root "$NV_CRI_RUNTIME_ROOT/$NV_CRI_NS/$1" state "$2" 2>&1 | jq -r .status 2>/dev/null; }
runsc_status_is() { [[ $(runsc_status "$2" "$3") == "$1" ]]; }
# Whether the pod's sandbox (runsc's root container $1 in the pod's runsc root) is gone.
sandbox_gone() {
  local st
  st=$("$RUNSC" --root "$NV_CRI_RUNTIME_ROOT/$NV_CRI_NS/$1" state "$1" 2>/dev/null | jq -r .status) || return 0
  [[ $st != running && $st != created ]]
}

# ---------------------------------------------------------------------------------------------
node_b() {
  local before=$NV_B_BEFORE at=$NV_B_COUNT_AT img=$NV_B_IMAGE c2=$NV_B_CUDA2_PID
  local -a cp
  read -ra cp <<<"$NV_B_CUDA_PIDS"
  nv_log "node B: containerd $NV_CONTAINERD_VERSION on $NV_SOCK, store $STORE, registry $NV_REGISTRY"
  ann() {  # NAME...: the pod's annotations, every container naming the image
    local n out='.annotations = {'
    for n in "$@"; do out+="\"restore.nvproxy.io/$n\": \"$img\","; done
    echo "${out%,}}"
  }
  no_image_in_store() { [[ -z $(find "$STORE" -name '*.img' -not -path '*/.incoming-*/*') ]]; }

  nv_log "node B: pods that are not the image's, refused at RunPodSandbox"
  refuse_pod() {  # NAME WANT WHICH NAMES...: refused with WANT in the error, naming WHICH
    local name=$1 want=$2 which=$3 err
    shift 3
    if err=$(nv_cri_pod "$name" "$(ann "$@")" 2>&1); then nv_fail "$name: the pod's restore was not refused"; fi
    nv_assert_contains "$err" "$want" "$name: the refusal's reason"
    nv_assert_contains "$err" "$which" "$name: what the refusal names"
    [[ -z $(nv_crictl pods -q --name "^$name\$" --state ready) ]] || nv_fail "$name: a pod is ready"
    no_image_in_store || nv_fail "$name: B's store holds an image: $(find "$STORE" -name '*.img')"
    nv_log "refused ($name): ${err##*desc = }"
  }
  refuse_pod missing "that this pod does not name: runsc restores a sandbox only with every container it saved" \
    'counter\", \"cuda2' cuda
  refuse_pod extra "that the image does not hold: a container cannot start fresh inside a restored sandbox" metrics \
    cuda cuda2 counter metrics
  local shim_cfg=$NV_CRI_SHIM_CONFIG
  sed -i 's/^  annotation_restore: true$/  annotation_restore: false/' "$shim_cfg"
  refuse_pod off "checkpoint.annotation_restore is off" "create of pod sandbox" cuda cuda2 counter
  sed -i 's/^  annotation_restore: false$/  annotation_restore: true/' "$shim_cfg"
  # The same pod under runc (the shim reads its configuration at every create): another runtime.
  sed -i "s|^  binary: .*|  binary: $NV_CRI_RUNC|" "$shim_cfg"
  refuse_pod runc "which restores under runsc only, and this pod runs under $NV_CRI_RUNC" "a gVisor pod's image" \
    cuda cuda2 counter
  sed -i "s|^  binary: .*|  binary: $RUNSC|" "$shim_cfg"

  nv_log "node B: a container asking for another GPU count, refused at its create; the pod's sandbox ended"
  local pod id err
  pod=$(nv_cri_pod gpus "$(ann cuda cuda2 counter)")
  if id=$(cuda_ctr gpus "$pod" "" '.envs = [{key: "NVPROXY_FAKE_CUDA_DIR", value: "/fakecuda"}]' 2>&1); then
    if err=$(nv_crictl start "$id" 2>&1); then nv_fail "gpus: a container without its GPU was restored"; fi
  else
    err=$id
  fi
  nv_assert_contains "$err" "checkpointed with 1 GPU and asks for no GPU" "gpus: the refusal's reason"
  nv_wait_for -t 20 sandbox_gone "$pod" || nv_fail "gpus: the pod's sandbox still runs after the refusal"
  nv_log "refused (gpus): ${err##*desc = }"
  # CRI learns of the sandbox's end from its exit event: until then it answers the removal with
  # the sandbox container "deleted: cannot signal it".
  nv_wait_for -t 30 pod_removed "$pod" || nv_fail "gpus: the pod could not be removed: $(nv_crictl rmp -f "$pod" 2>&1)"

  nv_log "node B: a pod whose restore fails after its sandbox and two containers were restored, removed through CRI"
  cp -a "$FAKE/cuda" "$FAKE/cuda-bad"  # the driver state the image holds, apart from the pods below
  cp -a "$FAKE/cuda2" "$FAKE/cuda2-bad"
  local bk bk2 bc
  pod=$(nv_cri_pod bad "$(ann cuda cuda2 counter)")
  bk=$(cuda_ctr bad "$pod" "$FAKE/cuda-bad")
  bk2=$(cuda2_ctr bad "$pod" "$FAKE/cuda2-bad")
  bc=$(nv_cri_ctr bad "$pod" counter '.command = ["sh", "-c", ($ENV.COUNT_CMD + " ")]')
  start "$bk" "$bk2"
  if err=$(nv_crictl start "$bc" 2>&1); then nv_fail "bad: a container whose command changed was restored"; fi
  nv_assert_contains "$err" 'failed to validate restore spec' "bad: runsc's reason"
  nv_log "failed (bad): $(cut -c1-400 <<<"${err##*desc = }")"
  # The restored containers hold no process of their own; the shim ends the pod's sandbox, and
  # CRI stops and removes the pod.
  nv_wait_for -t 30 pod_removed "$pod" || nv_fail "bad: the pod could not be removed: $(nv_crictl rmp -f "$pod" 2>&1)"
  sandbox_gone "$pod" || nv_fail "bad: the pod's sandbox still runs after its removal"
  nv_wait_for -t 20 pod_processes_gone "$pod" || nv_fail "bad: processes of the pod are left: $(pgrep -af -- "$pod")"
  [[ -z $(nv_crictl ps -a -q --pod "$pod") ]] || nv_fail "bad: containers of the pod are left"

  nv_log "node B: the pod restored whole (RunPodSandbox, CreateContainer, StartContainer)"
  cp -a "$FAKE/cuda" "$FAKE/cuda-fan"  # the fan-out's own driver state, as the image holds it
  cp -a "$FAKE/cuda2" "$FAKE/cuda2-fan"
  local log=$FAKE/cuda/calls.log k k2 c
  : >"$log"
  : >"$FAKE/cuda2/calls.log"
  pod=$(nv_cri_pod llm "$(ann cuda cuda2 counter)")
  k=$(cuda_ctr llm "$pod")
  k2=$(cuda2_ctr llm "$pod")
  c=$(count_ctr llm "$pod")
  start "$k"
  start "$c"
  start "$k2"
  local x
  for x in "$k" "$k2" "$c"; do nv_assert_eq CONTAINER_RUNNING "$(nv_cri_state "$x")" "the restored container $x"; done
  cat "$log" "$FAKE/cuda2/calls.log" >&2
  nv_fake_resumed "pod restore" "${cp[@]}"
  nv_assert_eq 1 "$(awk '$2=="restore" && $5==0' "$FAKE/cuda2/calls.log" | wc -l)" "cuda2's CUDA restores"
  nv_assert_eq 1 "$(awk '$2=="unlock" && $5==0' "$FAKE/cuda2/calls.log" | wc -l)" "cuda2's CUDA unlocks"
  nv_assert_eq running "$(cat "$FAKE/cuda2/$c2.state")" "cuda2's CUDA state after the restore"
  local a2
  a2=$(counter_in "$FAKE/cuda2" "$c2")
  nv_wait_for -t 10 counted_past_in "$FAKE/cuda2" "$c2" "$a2" || nv_fail "cuda2's process does not work after the restore"
  local after
  after=$(nv_fake_counter "${cp[0]}")
  ((after >= before)) || nv_fail "the CUDA work did not go on from the checkpoint: before=$before after=$after"
  nv_wait_for -t 20 counter_past "$c" "$at" || nv_fail "the counter does not count on from $at: $(counter_of "$c")"
  nv_wait_for -t 20 logged_past "$c" "$at" || nv_fail "the restored counter's stdout holds no count past $at: $(nv_crictl logs "$c" 2>&1 | tail -3)"
  nv_assert_eq cuda-on-a "$(nv_crictl exec "$k" cat /written)" "the CUDA container's file from node A"
  nv_assert_eq cuda2-on-a "$(nv_crictl exec "$k2" cat /written)" "cuda2's file from node A"
  nv_assert_eq counter-on-a "$(nv_crictl exec "$c" cat /written)" "the counter's file from node A"
  nv_assert_eq shm-on-a "$(nv_crictl exec "$k" cat /dev/shm/pod-note)" "the pod's /dev/shm file from node A, seen from cuda"
  nv_assert_eq init-on-a "$(nv_crictl exec "$k" cat /dev/shm/init-note)" "the file node A's init container wrote"
  nv_assert_eq shm-on-a "$(nv_crictl exec "$c" cat /proc/1/fd/3)" "the /dev/shm file the counter holds open"
  nv_log "restored: CUDA back in ${cp[*]} (cuda) and $c2 (cuda2), the counter at $(counter_of "$c") (checkpointed at $at)"

  nv_log "node B: the same image restored into a second pod (fan-out)"
  local pod2 fk fk2 fc
  pod2=$(nv_cri_pod fan "$(ann cuda cuda2 counter)")
  fk=$(cuda_ctr fan "$pod2" "$FAKE/cuda-fan")
  fk2=$(cuda2_ctr fan "$pod2" "$FAKE/cuda2-fan")
  fc=$(count_ctr fan "$pod2")
  start "$fk" "$fk2" "$fc"
  nv_wait_for -t 20 counter_past "$fc" "$at" || nv_fail "the fan-out's counter does not count on from $at: $(counter_of "$fc")"
  nv_assert_eq running "$(cat "$FAKE/cuda2-fan/$c2.state")" "the fan-out's CUDA state of cuda2's $c2"
  for p in "${cp[@]}"; do
    nv_assert_eq running "$(cat "$FAKE/cuda-fan/$p.state")" "the fan-out's CUDA state of $p"
    a=$(counter_in "$FAKE/cuda-fan" "$p")
    nv_wait_for -t 10 counted_past_in "$FAKE/cuda-fan" "$p" "$a" || nv_fail "the fan-out's process $p does not work"
  done
  nv_assert_eq counter-on-a "$(nv_crictl exec "$fc" cat /written)" "the fan-out counter's file from node A"
  nv_assert_eq shm-on-a "$(nv_crictl exec "$fk" cat /dev/shm/pod-note)" "the fan-out pod's /dev/shm file"
  nv_assert_eq CONTAINER_RUNNING "$(nv_cri_state "$k")" "the first pod's CUDA container beside the fan-out"
  nv_assert_eq 1 "$(find "$STORE/registry" -name .complete | wc -l)" "pulled images in B's store (one for both pods)"
  # A restored pod ends as any pod: StopPodSandbox (under crictl's 60 s deadline) stops its
  # containers, whose output pipes the runsc sandbox of a restore holds open past their end, and
  # RemovePodSandbox removes it, nothing of it left running.
  nv_log "node B: the restored pods stopped and removed through CRI"
  local t0
  for x in "$pod" "$pod2"; do
    t0=$(date +%s%N)
    err=$(nv_crictl stopp "$x" 2>&1) || nv_fail "the restored pod $x could not be stopped: $err"
    nv_log "stopped the restored pod $x in $((($(date +%s%N) - t0) / 1000000)) ms"
    nv_wait_for -t 30 pod_removed "$x" || nv_fail "the restored pod $x could not be removed: $(nv_crictl rmp -f "$x" 2>&1)"
    nv_wait_for -t 20 pod_processes_gone "$x" || nv_fail "processes of the restored pod $x are left: $(pgrep -af -- "$x")"
    [[ -z $(nv_crictl ps -a -q --pod "$x") ]] || nv_fail "containers of the restored pod $x are left"
  done

  nv_log "node B: the pod sharing one PID namespace restored whole: CUDA back in its three processes"
  local sb sk sk2 p
  local -a spids
  read -ra spids <<<"$NV_B_SHARE_PIDS"
  : >"$FAKE/share/calls.log"
  sb=$(nv_cri_pod shareb ".annotations = {\"restore.nvproxy.io/cuda\": \"$NV_B_SHARE_IMAGE\",
    \"restore.nvproxy.io/cuda2\": \"$NV_B_SHARE_IMAGE\"} | $SHARED_PID")
  sk=$(gpu_ctr cuda CUDA_CMD shareb "$sb" "$FAKE/share" "$SHARED_PID")
  sk2=$(gpu_ctr cuda2 CUDA2_CMD shareb "$sb" "$FAKE/share" "$SHARED_PID")
  start "$sk" "$sk2"
  cat "$FAKE/share/calls.log" >&2
  nv_assert_eq "${#spids[@]}" "$(awk '$2=="restore" && $5==0' "$FAKE/share/calls.log" | wc -l)" "the shared pod's CUDA restores"
  nv_assert_eq "${#spids[@]}" "$(awk '$2=="unlock" && $5==0' "$FAKE/share/calls.log" | wc -l)" "the shared pod's CUDA unlocks"
  for p in "${spids[@]}"; do
    nv_assert_eq running "$(cat "$FAKE/share/$p.state")" "the shared pod's CUDA state of $p after the restore"
    a=$(counter_in "$FAKE/share" "$p")
    nv_wait_for -t 10 counted_past_in "$FAKE/share" "$p" "$a" || nv_fail "the shared pod's process $p does not work after the restore"
  done
  err=$(nv_crictl stopp "$sb" 2>&1) || nv_fail "the restored shared pod could not be stopped: $err"
  nv_wait_for -t 30 pod_removed "$sb" || nv_fail "the restored shared pod could not be removed: $(nv_crictl rmp -f "$sb" 2>&1)"
  echo "PASS node B (containerd $NV_CONTAINERD_VERSION)"
}

if [[ $NODE == B ]]; then
  node_b
  exit 0
fi

# ---------------------------------------------------------------------------------------------
nv_log "node A: runsc: $("$RUNSC" --version | head -1); a pod of two fake-CUDA containers and a counter"
mkdir -p "$FAKE/cuda2"
chmod 777 "$FAKE/cuda2"
POD=$(nv_cri_pod a)
# An init container, run to its end before the others start (as the kubelet runs one): its end
# reaches CRI (the shim's runsc wait), containerd deletes it from the sandbox, and the image leaves
# it out (runsc's restore would wait for it and fail on it), so that node B's pod neither names it
# nor waits for it.
I=$(nv_cri_ctr a "$POD" init '.command = ["sh", "-c", "echo init-on-a >/dev/shm/init-note"]')
nv_crictl start "$I" >/dev/null
# Its end reaches CRI (the shim's runsc wait): a kubelet starts the pod's containers only then.
cri_exited() { [[ $(nv_cri_state "$1") == CONTAINER_EXITED ]]; }
cri_exit_code() { nv_crictl inspect -o json "$1" | jq -r .status.exitCode; }
nv_wait_for -t 20 cri_exited "$I" || nv_fail "CRI does not see the init container's end: $(nv_cri_state "$I"), runsc: $(runsc_status "$POD" "$I")"
nv_assert_eq 0 "$(cri_exit_code "$I")" "the init container's exit code, as CRI reports it"
# A container that fails by itself: its code as well; removed, it is no part of what follows.
J=$(nv_cri_ctr a "$POD" job '.command = ["sh", "-c", "exit 3"]')
nv_crictl start "$J" >/dev/null
nv_wait_for -t 20 cri_exited "$J" || nv_fail "CRI does not see the job container's end: $(nv_cri_state "$J")"
nv_assert_eq 3 "$(cri_exit_code "$J")" "the job container's exit code, as CRI reports it"
nv_crictl rm "$J" >/dev/null || nv_fail "the ended job container could not be removed"
K=$(cuda_ctr a "$POD")
K2=$(cuda2_ctr a "$POD")
C=$(count_ctr a "$POD")
nv_crictl start "$K" "$K2" "$C" >/dev/null
nv_wait_for -t 20 cuda_ready 2 || nv_fail "the fake CUDA app did not start: $(ls "$FAKE/cuda")"
nv_wait_for -t 20 cuda_ready 1 cuda2 || nv_fail "cuda2's fake CUDA app did not start: $(ls "$FAKE/cuda2")"
c2=$(cuda2_pid)
mapfile -t cp < <(nv_fake_cuda_pids)
nv_assert_eq 2 "${#cp[@]}" "CUDA processes in the sandbox"
nv_wait_for -t 30 nv_fake_counted_past "${cp[0]}" 300 || nv_fail "process ${cp[0]} does not count"
nv_wait_for -t 20 counter_past "$C" 20 || nv_fail "the counter does not count: $(counter_of "$C")"
nv_assert_eq shm-on-a "$(nv_crictl exec "$K" cat /dev/shm/pod-note)" "the counter's /dev/shm file, seen from cuda (one /dev/shm per pod)"

nv_log "node A: crictl checkpoint of the sidecar saves the pod whole, CUDA toggled in its GPU containers"
nv_crictl checkpoint --export="$NV_CRI_DIR/pod.tar" "$C" >/dev/null
log=$FAKE/cuda/calls.log
cat "$log" >&2
nv_fake_locked_then_checkpointed "$log" 2
# One attempt over both GPU containers: the fake driver's calls of both (one sandbox, one clock)
# and the shim's log of its toggles show every lock, in either container, before any checkpoint.
cat "$log" "$FAKE/cuda2/calls.log" >"$NV_DIR/pod-calls.log"
nv_fake_locked_then_checkpointed "$NV_DIR/pod-calls.log" 3
nv_wait_for -t 20 pod_toggles_logged 1 || nv_fail "the shim's log does not say the pod's checkpoint is done"
pod_locks_first locked checkpointed 2 1
before=$(nv_fake_counter "${cp[0]}")
at=$(counter_of "$C")
for p in "${cp[@]}"; do
  nv_assert_eq running "$(nv_fake_state "$p")" "CUDA state of $p after the checkpoint"
  nv_fake_advancing "$p" || nv_fail "process $p does not work after the checkpoint"
done
log2=$FAKE/cuda2/calls.log
cat "$log2" >&2
nv_assert_eq 1 "$(awk '$2=="lock" && $5==0' "$log2" | wc -l)" "cuda2's successful locks"
nv_assert_eq 1 "$(awk '$2=="checkpoint" && $5==0' "$log2" | wc -l)" "cuda2's successful checkpoints"
nv_assert_eq running "$(cat "$FAKE/cuda2/$c2.state")" "cuda2's CUDA state after the checkpoint"
a2=$(counter_in "$FAKE/cuda2" "$c2")
nv_wait_for -t 10 counted_past_in "$FAKE/cuda2" "$c2" "$a2" || nv_fail "cuda2's process does not work after the checkpoint"
nv_wait_for -t 10 counter_past "$C" "$at" || nv_fail "the counter stopped after the checkpoint"
rec=$(tar -xOf "$NV_CRI_DIR/pod.tar" checkpoint/nvproxy-cuda.json)
nv_assert_eq "counter,cuda,cuda2" "$(jq -r '[.pod.containers[] | select(.sandbox | not) | .name] | join(",")' <<<"$rec")" "the pod in the image's record"
# The init container's end reached containerd, which deleted its task (runsc delete) as it does any
# ended container's: it is neither in the sandbox nor in the image (the checkpoint leaves out one
# still there, an end the shim did not hear: unit PodEnded).
runsc_status_is stopped "$POD" "$I" && nv_fail "the init container is still in the sandbox"
nv_assert_eq 1 "$(jq -r '.pod.containers[] | select(.name == "cuda") | .gpus' <<<"$rec")" "the CUDA container's GPUs in the record"
nv_assert_eq "$K" "$(jq -r .container <<<"$rec")" "the record's CUDA container"
nv_assert_eq 1 "$(find "$STORE" -name checkpoint.img | wc -l)" "runsc images in A's store"
nv_assert_eq 1 "$(find "$STORE" -path '*/pod-cuda/cuda2/nvproxy-cuda.json' -exec jq .cuda_processes {} \;)" "cuda2's record in the image"

nv_log "node A: cuda2's process fails its CUDA checkpoint: the pod's checkpoint fails naming it, every container runs on"
seen=$(pod_toggles | wc -l)
: >"$log"
: >"$FAKE/cuda2/calls.log"
echo "checkpoint $c2 999" >"$FAKE/cuda2/fail"
if err=$(nv_crictl checkpoint --export="$NV_CRI_DIR/failed.tar" "$C" 2>&1); then nv_fail "the checkpoint with a failing CUDA process succeeded"; fi
rm -f "$FAKE/cuda2/fail"
nv_log "failed: $(cut -c1-600 <<<"${err##*desc = }")"
nv_assert_contains "$err" "CUDA checkpoint failed in 1 process" "the failure's reason"
nv_assert_contains "$err" "$((1000000 + c2)) is pid $c2 of container" "the failure's process, with its container and pid"
nv_assert_contains "$err" "cuda2" "the failure names the container"
nv_wait_for -t 20 pod_toggles_logged 2 || nv_fail "the shim's log does not say the pod's checkpoint failed"
pod_locks_first locked checkpointed 2 1 "$((seen + 1))"
for x in "$K" "$K2" "$C"; do nv_assert_eq CONTAINER_RUNNING "$(nv_cri_state "$x")" "container $x after the failed checkpoint"; done
for p in "${cp[@]}"; do
  nv_assert_eq running "$(nv_fake_state "$p")" "CUDA state of $p after the failed checkpoint"
  nv_fake_advancing "$p" || nv_fail "process $p does not work after the failed checkpoint"
done
nv_assert_eq running "$(cat "$FAKE/cuda2/$c2.state")" "cuda2's CUDA state after the failed checkpoint"
a2=$(counter_in "$FAKE/cuda2" "$c2")
nv_wait_for -t 10 counted_past_in "$FAKE/cuda2" "$c2" "$a2" || nv_fail "cuda2's process does not work after the failed checkpoint"
nv_assert_eq 1 "$(find "$STORE" -name checkpoint.img | wc -l)" "runsc images in A's store after the failed checkpoint"

nv_log "node A: a pod sharing one PID namespace (shareProcessNamespace), two GPU containers on one driver"
mkdir -p "$FAKE/share"
chmod 777 "$FAKE/share"
SP=$(nv_cri_pod share "$SHARED_PID")
SK=$(gpu_ctr cuda CUDA_CMD share "$SP" "$FAKE/share" "$SHARED_PID")
SK2=$(gpu_ctr cuda2 CUDA2_CMD share "$SP" "$FAKE/share" "$SHARED_PID")
nv_crictl start "$SK" "$SK2" >/dev/null
nv_wait_for -t 20 cuda_ready 3 share || nv_fail "the shared pod's fake CUDA apps did not start: $(ls "$FAKE/share")"
nv_crictl checkpoint --export="$NV_CRI_DIR/share.tar" "$SK2" >/dev/null
cat "$FAKE/share/calls.log" >&2
nv_fake_locked_then_checkpointed "$FAKE/share/calls.log" 3
nv_assert_eq 3 "$(tar -xOf "$NV_CRI_DIR/share.tar" checkpoint/nvproxy-cuda.json | jq .cuda_processes)" "the shared pod's CUDA processes in the image's record"
mapfile -t sp < <(find "$FAKE/share" -maxdepth 1 -name '*.cuda' -printf '%f\n' | sed 's/\.cuda$//')
for p in "${sp[@]}"; do
  nv_assert_eq running "$(cat "$FAKE/share/$p.state")" "the shared pod's CUDA state of $p after the checkpoint"
  a=$(counter_in "$FAKE/share" "$p")
  nv_wait_for -t 10 counted_past_in "$FAKE/share" "$p" "$a" || nv_fail "the shared pod's process $p does not work after the checkpoint"
done
nv_crictl rmp -f "$SP" >/dev/null

nv_registry_start
SHIM=$NVPROXY_SHIM_DIR/containerd-shim-nvproxy-v1
printf 'checkpoint:\n  registry_timeout_s: 60\n' >"$NV_DIR/push.yaml"
t0=$(date +%s%N)
out=$("$SHIM" image push --kube "$NV_CRI_DIR/pod.tar" "$NV_REGISTRY/ckpt/pod:v1" --tls-verify=false --store "$STORE" \
  --config "$NV_DIR/push.yaml" 2>&1) || nv_fail "image push --kube: $out"
nv_log "$out"
nv_log "pushed in $((($(date +%s%N) - t0) / 1000000)) ms"
img=$(awk '/^checkpoint image of container /{print $NF}' <<<"$out")
[[ $img == "$NV_REGISTRY/ckpt/"*"@sha256:"* ]] || nv_fail "no pinned checkpoint image in: $out"
out=$("$SHIM" image push --kube "$NV_CRI_DIR/share.tar" "$NV_REGISTRY/ckpt/share:v1" --tls-verify=false --store "$STORE" \
  --config "$NV_DIR/push.yaml" 2>&1) || nv_fail "image push --kube of the shared pod: $out"
share_img=$(awk '/^checkpoint image of container /{print $NF}' <<<"$out")
[[ $share_img == "$NV_REGISTRY/ckpt/"*"@sha256:"* ]] || nv_fail "no pinned checkpoint image in: $out"
for p in "${sp[@]}"; do
  printf checkpointed >"$FAKE/share/$p.state"
  touch "$FAKE/share/$p.closed"
done
# The processes' state as the image holds it, for node B's fake driver (the same GPU).
nv_crictl rmp -f "$POD" >/dev/null
nv_fake_as_checkpointed "${cp[@]}"
printf checkpointed >"$FAKE/cuda2/$c2.state"
touch "$FAKE/cuda2/$c2.closed"
rm -rf "${STORE:?}"/*
nv_log "node B: a second containerd $VER restoring the pod from $img"
env -u NV_DIR -u NV_SOCK -u NV_STATE_DIR -u NV_NAMESPACE NV_CRI_NODE=B NV_B_FAKE="$FAKE" NV_B_CUDA_PIDS="${cp[*]}" \
  NV_B_BEFORE="$before" NV_B_COUNT_AT="$at" NV_B_REGISTRY="$NV_REGISTRY" NV_B_REGISTRY_DIR="$NV_REGISTRY_DIR" \
  NV_B_IMAGE="$img" NV_B_CUDA2_PID="$c2" NV_B_SHARE_IMAGE="$share_img" NV_B_SHARE_PIDS="${sp[*]}" bash "$0" "$VER" ||
  nv_fail "node B failed"
echo "PASS pod_runsc (containerd $NV_CONTAINERD_VERSION, node A to node B through $NV_REGISTRY)"
