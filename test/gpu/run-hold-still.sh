#!/bin/bash
# Holding the container still (issue 33) on the GPU machine (H200, no network), from the repo root, after test/gpu/pack.sh: through
# ctr -> containerd 1.7 (the kit's) -> our shim -> runc -> CRIU 4.2.1 (the kit's), `ctr c checkpoint
# --task --rw` with the task left running:
#   jax         a jit'd JAX training step (workloads/jax_workload.py), checkpointed with the container
#               held still (checkpoint.hold_still, the default): it must live on, step on and keep its
#               device data; then killed and restored from the image
#   jax-nohold  the same with hold_still: false (0.5.1's behaviour): the JAX process died then
#   jobs        a PyTorch job runner starting a short-lived CUDA child (spawn) every 0.7 s
#               (workloads/job_runner.py): three checkpoints in a row must succeed, jobs go on
#   nccl1       single-GPU torch.distributed (NCCL, world size 1; workloads/nccl_one_rank.py): as
#               started, refused before any toggle if libuv holds an io_uring; with USE_LIBUV=0 and
#               UV_USE_IO_URING=0 and tcp-established (its TCPStore's connection to itself)
#               checkpointed (not refused as a collective), killed, restored
#   jax-refused the JAX workload with hold_still: false and no override: refused before any toggle,
#               naming XLA's library (what runsc gets, where nothing holds the sandbox still)
#   netns       a CUDA container with a network namespace of its own on this machine without
#               iptables-restore: refused before any toggle, naming it
#   jax-arena   the JAX workload with its default arena (75 % of the GPU, about 105 GiB, almost all
#               unused) through the shim's image store on this 64 GB disk (issue 36): as allocated it
#               cannot fit; counted as written once the driver has staged it, with CRIU leaving the zero
#               pages out, it is checkpointed, restored and steps on with its device data
# RUNTIME=runsc: the same cases through the current runsc with nvproxy (.carry/runsc.tar.xz), where
# nothing holds the sandbox's threads still: jax-refused is refused there with hold_still on, and
# jobs shows processes that come and go inside the sandbox.
# Prints "RESULT PASS|FAIL name: detail"; the containerd log and the reports go to $OUT.
# Run: set -o pipefail; timeout 540 bash test/gpu/run-hold-still.sh 2>&1 | tee $OUT/hold.log
set -uo pipefail
REPO=$(pwd)
PACK=${PACK:-$REPO/.carry}
OUTD=${OUT:-/tmp/nvgpu-out}
CASES=${CASES:-jobs jax jax-nohold nccl1 netns}
RUNTIME=${RUNTIME:-runc}
mkdir -p "$OUTD"
W=/var/tmp/nvgpu-hold
source "$REPO/test/gpu/lib/kit-containerd.sh"
kit_install
RT="{binary: /opt/kit/root/usr/sbin/runc, root: /run/containerd/nvproxy-gpuhold, criu_path: /opt/kit/bin/criu}"
if [[ $RUNTIME == runsc ]]; then
  mkdir -p /opt/runsc && tar -C /opt/runsc -xJf "$PACK/runsc.tar.xz"
  log "runsc: $(/opt/runsc/bin/runsc --version | head -1)"
  RT="{binary: /opt/runsc/bin/runsc, root: /run/containerd/nvproxy-gpuhold-runsc, extra_args: [\"--network=none\", \"--ignore-cgroups\"]}"
  NET=${NET-}
fi
# JAX: whichever Python of the machine imports it (its directory is bound into the containers).
PYJ=""
for p in /opt/*/.venv/bin/python3 /opt/*/bin/python3 /usr/bin/python3 /usr/local/bin/python3; do
  [[ -x $p ]] && "$p" -c 'import jax' 2>/dev/null && { PYJ=$p; break; }
done
PYT=/opt/torch/.venv/bin/python3
log "kernel $(uname -r); criu $(/opt/kit/bin/criu --version | head -1); JAX python: ${PYJ:-none} $("${PYJ:-true}" -c 'import jax; print(jax.__version__)' 2>/dev/null)"
case $PYJ in /opt/*) d=$(echo "$PYJ" | cut -d/ -f1-3); [[ $d == /opt/torch ]] || BINDS+=(--mount "type=bind,src=$d,dst=$d,options=bind:ro") ;; esac
rm -rf "$W"; mkdir -p "$W"
CFG=$W/shim.yaml
write_cfg() {  # HOLD(true|false) [CHECKPOINT_LINE]
  cat >"$CFG" <<EOT
runtime: $RT
log_level: debug
gpu:
  driver_root: /
checkpoint:
  libcuda: /usr/local/nvidia/lib64/libcuda.so.1
  libnvml: /usr/local/nvidia/lib64/libnvidia-ml.so.1
  content_store: $W/root
  hold_still: $1
${2:-}
EOT
}
write_cfg true
kit_start "$W" "$CFG" || { log "containerd or the image import failed"; exit 1; }
trap 'kit_teardown hold; printf "%s\n" "${RESULTS[@]}"' EXIT
H=$W/host
start() {  # NAME PY SCRIPT [ENV=V...]
  local id=$1 py=$2 script=$3; shift 3
  local envs=(); for e in "$@"; do envs+=(--env "$e"); done
  mkdir -p "$H/$id"
  CTR run -d --snapshotter native --runtime io.containerd.nvproxy.v1 ${NET---net-host} "${BINDS[@]}" \
    --mount "type=bind,src=$REPO/test/gpu/workloads,dst=/probe,options=rbind:ro" \
    --mount "type=bind,src=$H/$id,dst=/out,options=rbind:rw" --env NVIDIA_VISIBLE_DEVICES=all --env HOME=/tmp \
    --env PYTHONUNBUFFERED=1 "${envs[@]}" $IMAGE "$id" sh -c "exec $py /probe/$script >/out/workload.log 2>&1" >/dev/null ||
    log "start of $id failed"
}
# A checkpoint that takes longer than WATCH s gets every thread of the container and of the shim's
# helpers dumped to $OUTD/stalls.txt (state, wchan, kernel stack, tracer): what it waits on.
WATCH=${WATCH:-30}
dump_threads() {  # TAG PID...
  local p t
  for p in "${@:2}"; do
    for t in /proc/$p/task/*; do
      echo "== $1 pid $p tid ${t##*/} $(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | cut -c1-80)"
      grep -E '^(State|TracerPid|SigBlk)' "$t/status" 2>/dev/null | tr '\n' ' '; echo " wchan=$(cat "$t/wchan" 2>/dev/null) syscall=$(cut -d' ' -f1 "$t/syscall" 2>/dev/null)"
      sed 's/^/    /' "$t/stack" 2>/dev/null | head -12
    done
  done
}
watched_checkpoint() {  # ID REF: runs ctr c checkpoint --task --rw; sets err and rc
  local id=$1 ref=$2 pid n=0
  CTR c checkpoint --task --rw "$id" "$ref" >"$W/ck.out" 2>&1 &
  pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    sleep 0.5; n=$((n + 1))
    if ((n == WATCH * 2)); then
      log "$id: checkpoint still running after $WATCH s: dumping threads to stalls.txt"
      { echo "#### $id $ref at $(now)"
        dump_threads container $(cat "/sys/fs/cgroup/gpu/$id/cgroup.procs" 2>/dev/null || find /sys/fs/cgroup -path "*gpu*$id*" -name cgroup.procs -exec cat {} + 2>/dev/null)
        dump_threads helper $(pgrep -f nvproxy-cuda-helper)
        dump_threads shim $(pgrep -f containerd-shim-nvproxy-v1)
      } >>"$OUTD/stalls.txt" 2>&1
    fi
  done
  wait "$pid"; rc=$?
  err=$(cat "$W/ck.out")
}
field() { cut -d' ' -f"$2" "$1" 2>/dev/null; }
num() { local v; v=$(field "$1" "$2"); [[ $v =~ ^[0-9]+$ ]] && echo "$v" || echo 0; }
wait_until() { local end=$(($(date +%s) + $1)); shift; until "$@"; do (($(date +%s) < end)) || return 1; sleep 0.5; done; }
past() { (($(num "$1" "$2") > $3)); }
status() { CTR task ls | awk -v id="$1" '$1==id{print $3}'; }
report() { { echo "// $1"; cat "$W/state/io.containerd.runtime.v2.task/gpu/$1/checkpoint-diagnostic.json" 2>/dev/null; echo; } >>"$OUTD/hold-reports.json"; }
JAXENV=(XLA_PYTHON_CLIENT_MEM_FRACTION=0.04)
# XLA looks for libdevice (and ptxas) under a CUDA directory; in pip installs that is the nvidia
# wheels' directory, which it does not find by itself inside the container (its first run failed).
if [[ -n $PYJ ]]; then
  # The CUDA toolkit under /usr/local is not among the host's /usr binds: bind what XLA reads.
  for d in /usr/local/cuda /usr/local/cuda-*; do
    [[ -d $d ]] || continue
    r=$(readlink -f "$d")
    BINDS+=(--mount "type=bind,src=$r,dst=$r,options=rbind:ro")
    [[ $r == "$d" ]] || BINDS+=(--mount "type=bind,src=$r,dst=$d,options=rbind:ro")
  done
  libdevice=$(find /usr/local/cuda*/nvvm/libdevice "$(dirname "$(dirname "$PYJ")")/lib" -name libdevice.10.bc 2>/dev/null | head -1)
  log "libdevice: ${libdevice:-none found}; /usr/local: $(ls -d /usr/local/cuda* 2>/dev/null | tr '\n' ' ')"
  if [[ -n $libdevice ]]; then
    cudadir=$(dirname "$(dirname "$(dirname "$(readlink -f "$libdevice")")")")
    JAXENV+=("XLA_FLAGS=--xla_gpu_cuda_data_dir=$cudadir")
    [[ -x $cudadir/bin/ptxas ]] && JAXENV+=("PATH=$cudadir/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
  fi
  log "JAX env: ${JAXENV[*]}; outside a container: $(env "${JAXENV[@]}" "$PYJ" -c 'import jax, jax.numpy as j; print(jax.devices(), float(jax.jit(lambda a: (a @ a).sum())(j.ones((64, 64)))))' 2>&1 | tail -1)"
fi

jax_case() {  # NAME HOLD [CHECKPOINT_LINES [JAX_ENV...]]
  local id=$1 f s e err rc at env=("${JAXENV[@]}")
  ((${#} > 3)) && env=("${@:4}")
  # Without the hold the shim refuses JAX before any toggle; allow_unrestorable shows why.
  if [[ $2 == true ]]; then write_cfg true "${3:-}"; else write_cfg false '  allow_unrestorable: true'; fi
  start "$id" "$PYJ" jax_workload.py "${env[@]}"
  f=$H/$id/jax.txt
  wait_until 180 past "$f" 1 100 || { result FAIL "$id" "did not start: $(grep -iE 'error|libdevice|ptxas' "$H/$id/workload.log" | tail -4)"; return; }
  s=$(now); err=$(CTR c checkpoint --task --rw "$id" "ckpt-$id" 2>&1); rc=$?; e=$(now)
  report "$id"
  at=$(num "$f" 1)
  log "$id: checkpoint rc=$rc in $(dt "$s" "$e") s, step $at, status $(status "$id")"
  [[ -d $W/store ]] && log "$id: image store $(du -sh --apparent-size "$W/store" | cut -f1) apparent, $(du -sh "$W/store" | cut -f1) on disk; disk free $(df -h /var/tmp | awk 'NR==2{print $4}')"
  [[ -n $err ]] && echo "$err" | sed 's/^/  | /'
  if wait_until 30 past "$f" 1 "$((at + 100))" && [[ $(status "$id") == RUNNING && $(field "$f" 3) == True ]]; then
    result "$([[ $2 == true ]] && echo PASS || echo FAIL)" "$id" "hold_still=$2: checkpoint rc=$rc $(dt "$s" "$e") s, alive and stepping ($at -> $(num "$f" 1)), device data intact"
  else
    result "$([[ $2 == true ]] && echo FAIL || echo PASS)" "$id" "hold_still=$2: checkpoint rc=$rc, status $(status "$id"), step $(num "$f" 1) (at checkpoint $at); workload: $(tail -2 "$H/$id/workload.log" | tr '\n' ' ')"
  fi
  [[ $2 == true && $rc == 0 ]] || { TMO=30 CTR task kill -a -s KILL "$id" >/dev/null 2>&1; return; }
  TMO=30 CTR task kill -a -s KILL "$id" >/dev/null
  wait_until 20 bash -c "[[ \$($CTDDIR/ctr -a $SOCK -n gpu task ls | awk '\$1==\"$id\"{print \$3}') == STOPPED ]]"
  CTR task rm "$id" >/dev/null; CTR c rm "$id" >/dev/null
  at=$(num "$f" 1)
  s=$(now); err=$(CTR c restore --live --rw "$id" "ckpt-$id" </dev/null 2>&1); rc=$?; e=$(now)
  log "$id: restore rc=$rc in $(dt "$s" "$e") s; status $(status "$id")"
  [[ -n $err ]] && echo "$err" | sed 's/^/  | /'
  if ((rc == 0)) && wait_until 30 past "$f" 1 "$((at + 100))" && [[ $(field "$f" 3) == True ]]; then
    result PASS "$id-restore" "restored in $(dt "$s" "$e") s, stepping on from the image ($(num "$f" 1)), device data intact"
  else
    result FAIL "$id-restore" "restore rc=$rc, status $(status "$id"), step $(num "$f" 1); workload: $(tail -2 "$H/$id/workload.log" | tr '\n' ' ')"
  fi
  TMO=30 CTR task kill -a -s KILL "$id" >/dev/null 2>&1
}

nccl1_case() {
  local id f s e err rc at ok
  write_cfg true
  start nccl1-uring "$PYT" nccl_one_rank.py NCCL1_PORT=29533
  f=$H/nccl1-uring/nccl1.txt
  if wait_until 120 past "$f" 1 20; then
    err=$(CTR c checkpoint --task --rw nccl1-uring ckpt-nccl1u 2>&1); rc=$?
    report nccl1-uring
    log "nccl1 as started: checkpoint rc=$rc, status $(status nccl1-uring)"; echo "$err" | sed 's/^/  | /'
    at=$(num "$f" 1)
    if ((rc != 0)) && [[ $err == *io_uring* ]] && wait_until 30 past "$f" 1 "$((at + 20))"; then
      result PASS nccl1-uring "refused before any toggle for its io_uring, running on ($at -> $(num "$f" 1))"
    elif ((rc == 0)); then
      result PASS nccl1-uring "no io_uring here: checkpointed (rc 0)"
    else
      result FAIL nccl1-uring "rc=$rc: $(echo "$err" | head -2 | tr '\n' ' ')"
    fi
  else
    result FAIL nccl1-uring "did not start: $(tail -3 "$H/nccl1-uring/workload.log")"
  fi
  TMO=30 CTR task kill -a -s KILL nccl1-uring >/dev/null 2>&1
  # Its TCPStore is connected to itself: CRIU dumps that with tcp-established, and locks the
  # connection with iptables-restore, which this machine lacks: refused before any toggle, naming it.
  write_cfg true '  criu_options: [link-remap, "ghost-limit 1G", tcp-established]'
  start nccl1-lock "$PYT" nccl_one_rank.py NCCL1_PORT=29536 USE_LIBUV=0 UV_USE_IO_URING=0
  f=$H/nccl1-lock/nccl1.txt
  if wait_until 120 past "$f" 1 20; then
    err=$(CTR c checkpoint --task --rw nccl1-lock ckpt-nccl1l 2>&1); rc=$?
    log "nccl1 with tcp-established: checkpoint rc=$rc"; echo "$err" | sed 's/^/  | /'
    if command -v iptables-restore >/dev/null; then result PASS nccl1-lock "iptables-restore is here (rc=$rc)"
    elif ((rc != 0)) && [[ $err == *iptables-restore* && $err == *refused* ]]; then result PASS nccl1-lock "refused before any toggle naming iptables-restore"
    else result FAIL nccl1-lock "rc=$rc: $(echo "$err" | head -2 | tr '\n' ' ')"; fi
  else
    result FAIL nccl1-lock "did not start"
  fi
  TMO=30 CTR task kill -a -s KILL nccl1-lock >/dev/null 2>&1
  id=nccl1
  write_cfg true '  criu_options: [link-remap, "ghost-limit 1G", tcp-established, "network-lock skip"]'
  start $id "$PYT" nccl_one_rank.py NCCL1_PORT=29534 USE_LIBUV=0 UV_USE_IO_URING=0
  f=$H/$id/nccl1.txt
  wait_until 120 past "$f" 1 20 || { result FAIL $id "did not start: $(tail -3 "$H/$id/workload.log")"; return; }
  s=$(now); err=$(CTR c checkpoint --task --rw $id ckpt-$id 2>&1); rc=$?; e=$(now)
  report $id
  at=$(num "$f" 1)
  log "$id: checkpoint rc=$rc in $(dt "$s" "$e") s, at $at, status $(status $id)"; [[ -n $err ]] && echo "$err" | sed 's/^/  | /'
  ok=0
  ((rc == 0)) && wait_until 30 past "$f" 1 "$((at + 20))" && [[ $(field "$f" 2) == True ]] && ok=1
  ((ok)) || { result FAIL $id "checkpoint rc=$rc, $(cat "$f"), status $(status $id); $(tail -2 "$H/$id/workload.log" | tr '\n' ' ')"; TMO=30 CTR task kill -a -s KILL $id >/dev/null 2>&1; return; }
  result PASS $id "one rank checkpointed in $(dt "$s" "$e") s, all_reduce goes on ($at -> $(num "$f" 1)), data intact"
  TMO=30 CTR task kill -a -s KILL $id >/dev/null
  wait_until 20 bash -c "[[ \$($CTDDIR/ctr -a $SOCK -n gpu task ls | awk '\$1==\"$id\"{print \$3}') == STOPPED ]]"
  CTR task rm $id >/dev/null; CTR c rm $id >/dev/null
  at=$(num "$f" 1)
  s=$(now); err=$(CTR c restore --live --rw $id ckpt-$id </dev/null 2>&1); rc=$?; e=$(now)
  log "$id: restore rc=$rc in $(dt "$s" "$e") s; status $(status $id)"; [[ -n $err ]] && echo "$err" | sed 's/^/  | /'
  if ((rc == 0)) && wait_until 30 past "$f" 1 "$((at + 20))" && [[ $(field "$f" 2) == True ]]; then
    result PASS $id-restore "restored in $(dt "$s" "$e") s, all_reduce goes on from the image ($(num "$f" 1)), data intact"
  else
    result FAIL $id-restore "restore rc=$rc, status $(status $id), $(cat "$f"); $(tail -2 "$H/$id/workload.log" | tr '\n' ' ')"
  fi
  TMO=30 CTR task kill -a -s KILL $id >/dev/null 2>&1
}

# Without the hold (hold_still: false here; runsc always), JAX is refused before any toggle.
jax_refused_case() {
  local err rc f at
  if [[ $RUNTIME == runsc ]]; then write_cfg true; else write_cfg false; fi
  start jax-refused "$PYJ" jax_workload.py "${JAXENV[@]}"
  f=$H/jax-refused/jax.txt
  wait_until 180 past "$f" 1 100 || { result FAIL jax-refused "did not start"; return; }
  err=$(CTR c checkpoint --task --rw jax-refused ckpt-jaxr 2>&1); rc=$?
  report jax-refused
  at=$(num "$f" 1)
  log "jax-refused: checkpoint rc=$rc"; echo "$err" | sed 's/^/  | /'
  if ((rc != 0)) && [[ $err == *"JAX's XLA"* ]] && wait_until 30 past "$f" 1 "$((at + 100))" && [[ $(field "$f" 3) == True ]]; then
    result PASS jax-refused "refused before any toggle naming $(grep -o 'maps [^ ]*' <<<"$err" | head -1); stepping on ($at -> $(num "$f" 1))"
  else
    result FAIL jax-refused "rc=$rc, status $(status jax-refused): $(echo "$err" | head -2 | tr '\n' ' ')"
  fi
  TMO=30 CTR task kill -a -s KILL jax-refused >/dev/null 2>&1
}

netns_case() {
  local err rc f at
  write_cfg true
  NET="" start netns "$PYT" nccl_one_rank.py NCCL1_PORT=29535 USE_LIBUV=0 UV_USE_IO_URING=0
  f=$H/netns/nccl1.txt
  wait_until 120 past "$f" 1 20 || { result FAIL netns "did not start: $(tail -3 "$H/netns/workload.log")"; return; }
  err=$(CTR c checkpoint --task --rw netns ckpt-netns 2>&1); rc=$?
  report netns
  at=$(num "$f" 1)
  log "netns: checkpoint rc=$rc (iptables-restore here: $(command -v iptables-restore || echo none))"; echo "$err" | sed 's/^/  | /'
  if command -v iptables-restore >/dev/null; then
    result "$([[ $rc == 0 ]] && echo PASS || echo FAIL)" netns "iptables-restore is here: checkpoint rc=$rc"
  elif ((rc != 0)) && [[ $err == *iptables-restore* ]] && wait_until 30 past "$f" 1 "$((at + 20))"; then
    result PASS netns "refused before any toggle naming iptables-restore; running on ($at -> $(num "$f" 1))"
  else
    result FAIL netns "rc=$rc, status $(status netns): $(echo "$err" | head -2 | tr '\n' ' ')"
  fi
  TMO=30 CTR task kill -a -s KILL netns >/dev/null 2>&1
}

for c in $CASES; do
  case $c in
    nccl1) nccl1_case ;;
    jax-refused) [[ -n $PYJ ]] && jax_refused_case || result FAIL jax-refused "no Python with JAX here" ;;
    netns) netns_case ;;
    jax) [[ -n $PYJ ]] && jax_case jax true || result FAIL jax "no Python with JAX here" ;;
    jax-nohold) [[ -n $PYJ ]] && jax_case jax-nohold false || result FAIL jax-nohold "no Python with JAX here" ;;
    jax-arena)
      # JAX's default arena: every JAX setting but the memory fraction.
      arena=(XLA_PYTHON_CLIENT_PREALLOCATE=true)
      for e in "${JAXENV[@]}"; do [[ $e == XLA_PYTHON_CLIENT_MEM_FRACTION=* ]] || arena+=("$e"); done
      mkdir -p "$W/store"
      [[ -n $PYJ ]] && jax_case jax-arena true "  image_store: $W/store
  image_store_keep: 1
  skip_zero_pages: true
  toggle_timeout_ms: 300000" "${arena[@]}" || result FAIL jax-arena "no Python with JAX here" ;;
    jobs)
      # A stalled CUDA toggle is bounded at 60 s here (10 min by default): rolled back, reported.
      write_cfg true '  toggle_timeout_ms: 60000'
      start jobs "$PYT" job_runner.py
      f=$H/jobs/jobs.txt
      wait_until 180 past "$f" 2 2 || { result FAIL jobs "did not start: $(tail -3 "$H/jobs/workload.log")"; continue; }
      ok=1 times=""
      for i in 1 2 3; do
        s=$(now); watched_checkpoint jobs "ckpt-jobs$i"; e=$(now)
        report jobs
        times+=" $(dt "$s" "$e")"
        log "jobs: checkpoint $i rc=$rc in $(dt "$s" "$e") s, jobs $(cat "$f"), status $(status jobs)"
        [[ -n $err ]] && echo "$err" | sed 's/^/  | /'
        ((rc == 0)) && [[ $(status jobs) == RUNNING ]] || ok=0
      done
      n=$(num "$f" 1)
      wait_until 30 past "$f" 2 "$n" || ok=0
      [[ $(field "$f" 3) == True ]] || ok=0
      if ((ok)); then result PASS jobs "3 checkpoints in a row (s:$times), jobs go on ($(cat "$f")), parent's device data intact"
      else result FAIL jobs "checkpoints (s:$times); jobs $(cat "$f"); status $(status jobs)"; fi
      TMO=30 CTR task kill -a -s KILL jobs >/dev/null 2>&1
      ;;
  esac
done
