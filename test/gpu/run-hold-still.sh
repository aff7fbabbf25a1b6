#!/bin/bash
# Issue 33 on the GPU machine (H200, no network), from the repo root, after test/gpu/pack.sh: through
# ctr -> containerd 1.7 (the kit's) -> our shim -> runc -> CRIU 4.2.1 (the kit's), `ctr c checkpoint
# --task --rw` with the task left running:
#   jax         a jit'd JAX training step (workloads/jax_workload.py), checkpointed with the container
#               held still (checkpoint.hold_still, the default): it must live on, step on and keep its
#               device data; then killed and restored from the image
#   jax-nohold  the same with hold_still: false (0.5.1's behaviour): the JAX process died then
#   jobs        a PyTorch job runner starting a short-lived CUDA child (spawn) every 0.7 s
#               (workloads/job_runner.py): three checkpoints in a row must succeed, jobs go on
# Prints "RESULT PASS|FAIL name: detail"; the containerd log and the reports go to $OUT.
# Run: set -o pipefail; timeout 540 bash test/gpu/run-hold-still.sh 2>&1 | tee $OUT/hold.log
set -uo pipefail
REPO=$(pwd)
PACK=${PACK:-$REPO/.carry}
OUTD=${OUT:-/tmp/nvgpu-out}
CASES=${CASES:-jax jax-nohold jobs}
mkdir -p "$OUTD"
W=/var/tmp/nvgpu-hold
source "$REPO/test/gpu/lib/kit-containerd.sh"
kit_install
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
write_cfg() {  # HOLD(true|false)
  cat >"$CFG" <<EOT
runtime: {binary: /opt/kit/root/usr/sbin/runc, root: /run/containerd/nvproxy-gpuhold, criu_path: /opt/kit/bin/criu}
log_level: debug
gpu:
  driver_root: /
checkpoint:
  libcuda: /usr/local/nvidia/lib64/libcuda.so.1
  libnvml: /usr/local/nvidia/lib64/libnvidia-ml.so.1
  content_store: $W/root
  hold_still: $1
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
  CTR run -d --snapshotter native --runtime io.containerd.nvproxy.v1 --net-host "${BINDS[@]}" \
    --mount "type=bind,src=$REPO/test/gpu/workloads,dst=/probe,options=rbind:ro" \
    --mount "type=bind,src=$H/$id,dst=/out,options=rbind:rw" --env NVIDIA_VISIBLE_DEVICES=all --env HOME=/tmp \
    --env PYTHONUNBUFFERED=1 "${envs[@]}" $IMAGE "$id" sh -c "exec $py /probe/$script >/out/workload.log 2>&1" >/dev/null ||
    log "start of $id failed"
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
  libdevice=$(find "$(dirname "$(dirname "$PYJ")")/lib" -path '*nvvm/libdevice/libdevice.10.bc' 2>/dev/null | head -1)
  if [[ -n $libdevice ]]; then
    cudadir=$(dirname "$(dirname "$(dirname "$libdevice")")")
    JAXENV+=("XLA_FLAGS=--xla_gpu_cuda_data_dir=$cudadir")
    [[ -x $cudadir/bin/ptxas ]] && JAXENV+=("PATH=$cudadir/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
  fi
  log "JAX env: ${JAXENV[*]}; outside a container: $(env "${JAXENV[@]}" "$PYJ" -c 'import jax, jax.numpy as j; print(jax.devices(), float(jax.jit(lambda a: (a @ a).sum())(j.ones((64, 64)))))' 2>&1 | tail -1)"
fi

jax_case() {  # NAME HOLD
  local id=$1 f s e err rc at
  write_cfg "$2"
  start "$id" "$PYJ" jax_workload.py "${JAXENV[@]}"
  f=$H/$id/jax.txt
  wait_until 180 past "$f" 1 100 || { result FAIL "$id" "did not start: $(tail -3 "$H/$id/workload.log")"; return; }
  s=$(now); err=$(CTR c checkpoint --task --rw "$id" "ckpt-$id" 2>&1); rc=$?; e=$(now)
  report "$id"
  at=$(num "$f" 1)
  log "$id: checkpoint rc=$rc in $(dt "$s" "$e") s, step $at, status $(status "$id")"
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

for c in $CASES; do
  case $c in
    jax) [[ -n $PYJ ]] && jax_case jax true || result FAIL jax "no Python with JAX here" ;;
    jax-nohold) [[ -n $PYJ ]] && jax_case jax-nohold false || result FAIL jax-nohold "no Python with JAX here" ;;
    jobs)
      write_cfg true
      start jobs "$PYT" job_runner.py
      f=$H/jobs/jobs.txt
      wait_until 180 past "$f" 2 2 || { result FAIL jobs "did not start: $(tail -3 "$H/jobs/workload.log")"; continue; }
      ok=1 times=""
      for i in 1 2 3; do
        s=$(now); err=$(CTR c checkpoint --task --rw jobs "ckpt-jobs$i" 2>&1); rc=$?; e=$(now)
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
