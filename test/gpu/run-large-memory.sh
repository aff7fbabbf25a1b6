#!/bin/bash
# Large device memory (issue 26) on the GPU machine (H200, 64 GB disk, no network), from the repo root, after
# test/gpu/pack.sh (which also carries bench/gpu_hold as .carry/bin/gpu_hold). Through ctr ->
# containerd 1.7 (the kit's) -> our shim -> runc -> CRIU 4.2.1 (the kit's), one process holding G GiB
# on the GPU (gpu_hold: allocates, fills, checks the whole buffer at SIGTERM), for each size and path:
#   content-store   `ctr c checkpoint --task` / `ctr c restore`: containerd copies the image
#   image-store     the same with checkpoint.image_store: containerd keeps a reference
# and `three`: three 12 GiB processes in one container through the store (the rate against one's).
# Per run: end to end, the shim's phases (CUDA checkpoint + CRIU dump = the driver + CRIU floor),
# the image, peak disk (sampled every 0.2 s) and the restore; after the restore the data is checked.
# Prints "RESULT ..." lines and a markdown table; containerd-26.log.gz and diagnostics26.json to $OUT.
# Run: set -o pipefail; SIZES="12 24 40" timeout 590 bash test/gpu/run-large-memory.sh 2>&1 | tee $OUT/run26.log
# PAGE_IO=off: the kit's CRIU without its page I/O options (checkpoint.page_writers 0, page_readers 0,
# restore_huge_pages false), which is what main did before them: test/gpu/run-page-io.sh runs both.
# PAGE_IO=s28: session 28's defaults (8 writers, pages written while CUDA resumes); gate8: 8 writers
# with the write gate; on: today's defaults.
set -uo pipefail
REPO=$(pwd)
PACK=${PACK:-$REPO/.carry}
OUTD=${OUT:-/tmp/nvgpu-out}
SIZES=${SIZES:-12 24 40}
PATHS=${PATHS:-image-store content-store}
THREE=${THREE:-yes}
mkdir -p "$OUTD"
W=/var/tmp/nvgpu26
source "$REPO/test/gpu/lib/kit-containerd.sh"
kit_install
rm -rf "$W" /var/tmp/nvgpu23 /var/tmp/nvgpu16 /var/tmp/nvgpu25 /var/tmp/nvgpu-runsc; mkdir -p "$W/tools"
# STORE: the image store (e.g. a tmpfs, to tell the disk from CRIU); DROP=no keeps the page cache
# before the restore (the image read from memory).
STORE=${STORE:-$W/store}; DROP=${DROP:-yes}
# HOLD_ENV: VAR=VALUE words set for gpu_hold (e.g. GLIBC_TUNABLES=glibc.malloc.hugetlb=1).
rm -rf "$STORE"; mkdir -p "$STORE"
cp "$PACK/bin/gpu_hold" "$W/tools/"
CFG=$W/shim.yaml
# RUNTIME=crun: the carried crun with CRIU (test/gpu/lib/crun.sh) instead of the kit's runc.
RUNTIME_BIN=/opt/kit/root/usr/sbin/runc
if [[ ${RUNTIME:-runc} == crun ]]; then
  source "$REPO/test/gpu/lib/crun.sh"
  RUNTIME_BIN=$(crun_install) || exit 1
fi
PAGE_IO_LINES=()
case ${PAGE_IO:-on} in
  off) PAGE_IO_LINES=("page_writers: 0" "page_readers: 0" "restore_huge_pages: false") ;;
  s28) PAGE_IO_LINES=("page_writers: 8" "write_after_cuda_resume: false") ;;  # session 28's defaults
  gate8) PAGE_IO_LINES=("page_writers: 8") ;;                                # the write gate alone
esac
write_cfg() {  # STORE (empty: none) [SKIP_ZERO_PAGES(true|false)] [MORE checkpoint: LINES, indented]
  kit_shim_config "$CFG" "{binary: $RUNTIME_BIN, root: /run/containerd/nvproxy-gpu26, criu_path: /opt/kit/bin/criu}" \
    ${1:+"image_store: $1" "image_store_keep: 1"} "skip_zero_pages: ${2:-true}" "${PAGE_IO_LINES[@]}"
  [[ -z ${3:-} ]] || echo "$3" >>"$CFG"
}
write_cfg ""
kit_start "$W" "$CFG" || { log "containerd or the image import failed"; exit 1; }
trap 'kit_teardown 26; printf "%s\n" "${RESULTS[@]}"; printf "%s\n" "${ROWS[@]}"' EXIT
log "store $STORE, page cache dropped before the restore: $DROP"
log "kernel $(uname -r); disk free $(df -h /var/tmp | awk 'NR==2{print $4}'); criu $(/opt/kit/bin/criu --version | head -1)"

used() { df -B1 --output=used /var/tmp | tail -1; }
phase() { "$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["phases"].get(sys.argv[2] + "_ms", 0) / 1000)' "$1" "$2" 2>/dev/null || echo 0; }
PY=python3
# sampled CMD...: runs it; sets SEC and PEAK (bytes above the start).
sampled() {
  local base peak=0 u t0 pid rc
  base=$(used); t0=$(now)
  "$@" >"$W/cmd.out" 2>&1 &
  pid=$!
  while kill -0 "$pid" 2>/dev/null; do u=$(used); ((u > peak)) && peak=$u; sleep 0.2; done
  wait "$pid"; rc=$?
  SEC=$(dt "$t0" "$(now)"); PEAK=$((peak > base ? peak - base : 0))
  ((rc == 0)) || { log "failed ($rc): $* :: $(tail -3 "$W/cmd.out")"; return 1; }
}
gib() { awk -v b="$1" 'BEGIN{printf "%.1f", b/1073741824}'; }
ROWS=("| path | GiB | checkpoint s | CUDA ckpt s | CRIU dump s | floor s (+ CUDA resume) | x floor | image GiB | peak disk x image | restore s | data |"
  "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
n=0
run_one() {  # PATH GIB PROCS (pool|pool-keep: PROCS is the never-written pool's GiB beside GIB written)
  local path=$1 g=$2 procs=$3 id rep img cmd i ok data pool=""
  n=$((n + 1)); id=s$n
  case $path in
    image-store) write_cfg "$STORE" ;;
    pool) write_cfg "$STORE" true; pool=$procs; procs=1 ;;
    pool-keep) write_cfg "$STORE" false; pool=$procs; procs=1 ;;
    *) write_cfg "" ;;
  esac
  cmd=""; for i in $(seq "$procs"); do cmd+="GPU_HOLD_POOL_GIB=${pool:-0} ${HOLD_ENV:-} /tools/gpu_hold hold $g /out/ready$i >/out/log$i 2>&1 & "; done
  mkdir -p "$W/h/$id"
  CTR run -d --snapshotter native --runtime io.containerd.nvproxy.v1 --net-host "${BINDS[@]}" \
    --mount "type=bind,src=$W/tools,dst=/tools,options=rbind:ro" --mount "type=bind,src=$W/h/$id,dst=/out,options=rbind:rw" \
    --env NVIDIA_VISIBLE_DEVICES=all $IMAGE $id sh -c "$cmd wait" >/dev/null || { log "$id: start failed"; return; }
  for _ in $(seq 600); do [[ $(ls "$W/h/$id" | grep -c '^ready') -ge $procs ]] && break; sleep 0.5; done
  sync; echo 3 >/proc/sys/vm/drop_caches
  if ! sampled CTR c checkpoint --task $id ${id}ref; then
    # The content store's path cannot hold two copies of 40 GiB on this disk: a refusal is the answer.
    if grep -q 'free' "$W/cmd.out" && [[ $(CTR task ls | awk -v i=$id '$1==i{print $3}') == RUNNING ]]; then
      result REFUSED "$id" "$path $g GiB x$procs in $SEC s, still running: $(tail -c 500 "$W/cmd.out" | tr '\n' ' ')"
    else result FAIL "$id" "$path $g GiB x$procs: checkpoint failed"; fi
    TMO=60 CTR task kill -a -s KILL $id >/dev/null; sleep 2; CTR task rm -f $id >/dev/null 2>&1; CTR c rm $id >/dev/null 2>&1
    return
  fi
  local ck=$SEC ckpeak=$PEAK
  rep=$W/state/io.containerd.runtime.v2.task/gpu/$id/checkpoint-diagnostic.json
  { echo "// $id $path $g x$procs"; cat "$rep"; echo; } >>"$OUTD/diagnostics26.json"
  local cuda snap res floor
  cuda=$(phase "$rep" checkpoint); snap=$(phase "$rep" snapshot); res=$(phase "$rep" resume)
  # The driver + CRIU chain: CUDA checkpoint, CRIU dump, and CUDA back in the container that runs on.
  floor=$(awk -v a="$cuda" -v b="$snap" -v c="$res" 'BEGIN{printf "%.2f", a+b+c}')
  local ondisk=""
  if [[ $path != content-store ]]; then
    img=$(du -sb "$STORE" | awk '{print $1}'); ondisk=" (on disk $(gib "$(du -s -B1 "$STORE" | awk '{print $1}')"))"
  else img=$((g * procs * 1073741824)); fi
  TMO=60 CTR task kill -a -s KILL $id >/dev/null
  for _ in $(seq 100); do [[ $(CTR task ls | awk -v i=$id '$1==i{print $3}') == STOPPED ]] && break; sleep 0.2; done
  CTR task rm $id >/dev/null; CTR c rm $id >/dev/null
  [[ $DROP == no ]] || { sync; echo 3 >/proc/sys/vm/drop_caches; }
  sampled CTR c restore --live $id ${id}ref </dev/null || { result FAIL "$id" "$path $g GiB x$procs: restore failed"; return; }
  local rs=$SEC
  TMO=60 CTR task kill -a -s TERM $id >/dev/null
  for _ in $(seq 300); do [[ $(cat "$W/h/$id"/log* 2>/dev/null | grep -c 'data ') -ge $procs ]] && break; sleep 0.2; done
  data=$(cat "$W/h/$id"/log* | grep -o 'data [A-Z]*' | sort | uniq -c | paste -sd' ')
  ok=1; [[ $data == *"data OK"* && $data != *BAD* ]] || ok=0
  [[ -n $pool ]] && data+=" $(grep -ho 'pool .*' "$W/h/$id"/log* | head -1)"
  ROWS+=("| $path${pool:+ +$pool GiB pool} x$procs | $g | $ck | $(printf %.2f "$cuda") | $(printf %.2f "$snap") | $floor | $(awk -v a="$ck" -v b="$floor" 'BEGIN{printf "%.2f", a/b}') | $(gib "$img")$ondisk | $(awk -v a="$ckpeak" -v b="$img" 'BEGIN{printf "%.2f", a/b}') | $rs | $data |")
  log "${ROWS[-1]}"
  ((ok)) && result PASS "$id" "$path $g GiB x$procs" || result FAIL "$id" "$path $g GiB x$procs: $data"
  CTR task rm -f $id >/dev/null 2>&1; CTR c rm $id >/dev/null 2>&1; CTR image rm ${id}ref >/dev/null 2>&1
  "$PACK/bin/containerd-shim-nvproxy-v1" image prune --older-than 0 --store "$STORE" >/dev/null
}
# par:GIB:N: N containers of one GIB process each, checkpointed at once and restored at once (each its
# own CRIU), through the store; their wall time against the same size's single run.
run_par() {  # GIB N
  local g=$1 k=$2 ids=() i id t0 t1 data rc=0
  write_cfg "$STORE"
  for i in $(seq "$k"); do
    n=$((n + 1)); id=s$n; ids+=("$id"); mkdir -p "$W/h/$id"
    CTR run -d --snapshotter native --runtime io.containerd.nvproxy.v1 --net-host "${BINDS[@]}" \
      --mount "type=bind,src=$W/tools,dst=/tools,options=rbind:ro" --mount "type=bind,src=$W/h/$id,dst=/out,options=rbind:rw" \
      --env NVIDIA_VISIBLE_DEVICES=all $IMAGE $id sh -c "/tools/gpu_hold hold $g /out/ready1 >/out/log1 2>&1 & wait" >/dev/null ||
      { log "$id: start failed"; return; }
  done
  for id in "${ids[@]}"; do for _ in $(seq 600); do [[ -e $W/h/$id/ready1 ]] && break; sleep 0.5; done; done
  sync; echo 3 >/proc/sys/vm/drop_caches
  t0=$(now)
  local pids=()
  for id in "${ids[@]}"; do CTR c checkpoint --task $id ${id}ref >"$W/$id.ck" 2>&1 & pids+=($!); done
  for i in "${pids[@]}"; do wait "$i" || rc=1; done
  t1=$(now)
  for id in "${ids[@]}"; do
    { echo "// $id par $g x$k"; cat "$W/state/io.containerd.runtime.v2.task/gpu/$id/checkpoint-diagnostic.json"; echo; } >>"$OUTD/diagnostics26.json"
    grep -q . "$W/$id.ck" && log "$id checkpoint: $(cat "$W/$id.ck")"
  done
  local ck; ck=$(dt "$t0" "$t1")
  for id in "${ids[@]}"; do TMO=60 CTR task kill -a -s KILL $id >/dev/null; done
  for id in "${ids[@]}"; do
    for _ in $(seq 100); do [[ $(CTR task ls | awk -v i=$id '$1==i{print $3}') == STOPPED ]] && break; sleep 0.2; done
    CTR task rm $id >/dev/null; CTR c rm $id >/dev/null
  done
  [[ $DROP == no ]] || { sync; echo 3 >/proc/sys/vm/drop_caches; }
  t0=$(now)
  pids=()
  for id in "${ids[@]}"; do CTR c restore --live $id ${id}ref </dev/null >"$W/$id.rs" 2>&1 & pids+=($!); done
  for i in "${pids[@]}"; do wait "$i" || rc=$((rc + 2)); done
  t1=$(now)
  local rs; rs=$(dt "$t0" "$t1")
  for id in "${ids[@]}"; do grep -q . "$W/$id.rs" && log "$id restore: $(cat "$W/$id.rs")"; done
  for id in "${ids[@]}"; do TMO=60 CTR task kill -a -s TERM $id >/dev/null; done
  for id in "${ids[@]}"; do for _ in $(seq 300); do grep -q 'data ' "$W/h/$id/log1" 2>/dev/null && break; sleep 0.2; done; done
  data=$(for id in "${ids[@]}"; do cat "$W/h/$id/log1" 2>/dev/null; done | grep -o 'data [A-Z]*' | sort | uniq -c | paste -sd' ')
  ROWS+=("| par x$k containers | $g | $ck | | | | | $(gib $(du -sb "$STORE" | awk '{print $1}')) | | $rs | $data |")
  log "${ROWS[-1]}"
  ((rc == 0)) && [[ $data == *"$k data OK"* ]] && result PASS "par$k" "$k containers of $g GiB at once: checkpoint $ck s, restore $rs s" ||
    result FAIL "par$k" "$k containers of $g GiB: rc=$rc $data"
  for id in "${ids[@]}"; do CTR task rm -f $id >/dev/null 2>&1; CTR c rm $id >/dev/null 2>&1; CTR image rm ${id}ref >/dev/null 2>&1; done
  "$PACK/bin/containerd-shim-nvproxy-v1" image prune --older-than 0 --store "$STORE" >/dev/null
}
# fan:GIB:N: one container of one GIB process checkpointed through the store, restored once (timed),
# then into N new containers at once from the same image (replicas, issue 35). Every replica shares the
# image's spec (the same /out bind), so each one's data check is its exit status
# (gpu_hold exits 0 only when its whole buffer reads back), taken by `ctr task rm`. Its output goes to
# /dev/null: a file written after the checkpoint would fail CRIU's size check in the next replica.
run_fan() {  # GIB N
  local g=$1 k=$2 id ids=() i t0 t1 one rs pids=() rc=0 ok=0 codes=""
  # Each replica in a network namespace of its own (ctr's default without --net-host): the abstract
  # unix socket libcuda binds would collide in a shared one. This machine has no iptables-restore,
  # so CRIU is told not to lock the network while it dumps (nothing listens on it here).
  write_cfg "$STORE" true '  criu_options: ["network-lock skip"]'
  n=$((n + 1)); id=s$n; mkdir -p "$W/h/$id"
  CTR run -d --snapshotter native --runtime io.containerd.nvproxy.v1 "${BINDS[@]}" \
    --mount "type=bind,src=$W/tools,dst=/tools,options=rbind:ro" --mount "type=bind,src=$W/h/$id,dst=/out,options=rbind:rw" \
    --env NVIDIA_VISIBLE_DEVICES=all $IMAGE $id sh -c "exec /tools/gpu_hold hold $g /out/ready1 >/dev/null 2>&1" >/dev/null ||
    { result FAIL "fan$k" "start failed"; return; }
  for _ in $(seq 600); do [[ -e $W/h/$id/ready1 ]] && break; sleep 0.5; done
  t0=$(now); CTR c checkpoint --task $id ${id}ref >"$W/$id.ck" 2>&1 || { result FAIL "fan$k" "checkpoint: $(cat "$W/$id.ck")"; return; }
  log "fan: checkpoint of $g GiB in $(dt "$t0" "$(now)") s, store $(gib $(du -sb "$STORE" | awk '{print $1}')) GiB"
  TMO=60 CTR task kill -a -s KILL $id >/dev/null
  for _ in $(seq 100); do [[ $(CTR task ls | awk -v i=$id '$1==i{print $3}') == STOPPED ]] && break; sleep 0.2; done
  CTR task rm $id >/dev/null 2>&1; CTR c rm $id >/dev/null
  fan_end() {  # ID: RUNNING, then SIGTERM and the exit status (0: data OK)
    [[ $(CTR task ls | awk -v i="$1" '$1==i{print $3}') == RUNNING ]] || return 99
    TMO=60 CTR task kill -s TERM "$1" >/dev/null
    for _ in $(seq 600); do [[ $(CTR task ls | awk -v i="$1" '$1==i{print $3}') == STOPPED ]] && break; sleep 0.2; done
    TMO=60 CTR task rm "$1" >/dev/null 2>&1; local c=$?; CTR c rm "$1" >/dev/null 2>&1; return $c
  }
  [[ $DROP == no ]] || { sync; echo 3 >/proc/sys/vm/drop_caches; }
  t0=$(now); CTR c restore --live ${id}one ${id}ref </dev/null >"$W/$id.one" 2>&1 || rc=1; t1=$(now); one=$(dt "$t0" "$t1")
  fan_end ${id}one && ok=$((ok + 1)) || codes+=" one:$?"
  [[ $DROP == no ]] || { sync; echo 3 >/proc/sys/vm/drop_caches; }
  for i in $(seq "$k"); do ids+=("${id}r$i"); done
  t0=$(now)
  for i in "${ids[@]}"; do CTR c restore --live $i ${id}ref </dev/null >"$W/$i.rs" 2>&1 & pids+=($!); done
  for i in "${pids[@]}"; do wait "$i" || rc=$((rc + 2)); done
  t1=$(now); rs=$(dt "$t0" "$t1")
  for i in "${ids[@]}"; do grep -q . "$W/$i.rs" && log "$i restore: $(cat "$W/$i.rs")"; done
  for i in "${ids[@]}"; do fan_end "$i" && ok=$((ok + 1)) || codes+=" $i:$?"; done
  ROWS+=("| fan: 1 then $k replicas | $g | | | | | | $(gib $(du -sb "$STORE" | awk '{print $1}')) | | one $one, $k at once $rs | $ok of $((k + 1)) OK$codes |")
  log "${ROWS[-1]}"
  ((rc == 0 && ok == k + 1)) && result PASS "fan$k" "$g GiB: one restore $one s, $k replicas at once $rs s, every replica's data OK" ||
    result FAIL "fan$k" "$g GiB: rc=$rc, $ok of $((k + 1)) data OK;$codes"
  CTR image rm ${id}ref >/dev/null 2>&1
  "$PACK/bin/containerd-shim-nvproxy-v1" image prune --older-than 0 --store "$STORE" >/dev/null
}
# RUNS: PATH:GIB:PROCS in order (default: every size on both paths, then one and three 12 GiB).
if [[ -z ${RUNS:-} ]]; then
  RUNS=""; for g in $SIZES; do for p in $PATHS; do RUNS+=" $p:$g:1"; done; done
  [[ $THREE == yes ]] && RUNS+=" image-store:12:1 image-store:12:3"
fi
for r in $RUNS; do
  IFS=: read -r p g k <<<"$r"
  case $p in par) run_par "$g" "$k" ;; fan) run_fan "$g" "$k" ;; *) run_one "$p" "$g" "$k" ;; esac
done
