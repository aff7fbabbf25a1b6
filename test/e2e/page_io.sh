#!/usr/bin/env bash
# Issue 56: the project's CRIU page I/O (scripts/criu-page-io.patch) through containerd, the shim
# and the runtime. A container of three processes, each holding 544 MiB of written memory and a
# 128 MiB pool of present zero pages (a pool the driver staged and nothing wrote: CRIU leaves it
# out), their shell and a small process started first (under 64 MiB: CRIU copies them itself), is
# checkpointed with the image store, leaving it running (the writers are still writing when CRIU
# goes on to the container's mounts, which a CRIU with writer threads could not setns() into):
#   - CRIU's dump log shows a writer for each of the first two big processes, and the last one,
#     which nothing overlaps, shared between two writers where there are two CPUs (one per
#     256 MiB, at most the CPUs); the writers' reports read;
#   - the container runs on and every process's memory is intact;
#   - restored from the image, every process's memory is intact again, and (on a host whose
#     transparent huge pages are left to madvise) the restore asked for huge pages and got them,
#     and the pools, none of whose pages are in the image, ask for them too; each big process's
#     pages were read in by as many threads as there are CPUs (at most 8).
# With page writers the three are CUDA processes of the fake driver and the checkpoint leaves them
# running early (CRIU's --resumed-fifo): CRIU resumes them once its writers hold their pages, and the
# shim resumes CUDA then, while the pages are still being written (the log's resume phase comes
# before write_after_resume, and every CUDA process was restored by the driver before the image's end);
# the held pages are written once the shim says CUDA is back (CRIU's --write-gate).
# Then restored again from a cold page cache (caches dropped): every process's memory intact, each
# read in by its own thread (CRIU starts readers only where the image is mostly cached).
# The same with checkpoint.page_writers: 0 and page_readers: 0: what CRIU does alone.
# Usage: page_io.sh [1.6|1.7|2.3]
set -euo pipefail
source "$(dirname "$0")/lib/shim-env.sh"
source "$(dirname "$0")/lib/fake-cuda.sh"
criu --help 2>&1 | grep -q -- '^ *--page-writers' || nv_skip "this CRIU has no --page-writers (scripts/build-criu.sh builds it)"
nv_fake_cuda
STORE=$(mktemp -d /var/tmp/nvproxy-page-io-store.XXXXXX)
nv_defer rm -rf "$STORE"
NV_SHIM_EXTRA="$NV_FAKE_CHECKPOINT
  image_store: $STORE"
export NV_SHIM_EXTRA
nv_start_with_shim --containerd "${1:-1.7}"
MOUNTS=("${NV_FAKE_MOUNTS[@]}")
MIB=544
CPUS=$(nproc)
thp_madvise=false
grep -q '\[madvise\]' /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null && thp_madvise=true
work() { echo "$NV_STATE_DIR/io.containerd.runtime.v2.task/$NV_NAMESPACE/$1/criu-work"; }
three_apps() { (($(find "$FAKE/cuda" -maxdepth 1 -name '*.checked' | wc -l) == 3)); }
# Full rounds of every app's memory check, summed.
rounds() { cat "$FAKE"/cuda/*.checked 2>/dev/null | awk '{s+=$1} END {print s+0}'; }
rounds_past() { (($(rounds) > $1)); }
task_pids() { nv_ctr task ps "$1" | awk 'NR>1 {print $1}'; }
intact() {  # AFTER: the three apps go on checking their memory, none found a change
  local r0 f
  r0=$(rounds)
  nv_wait_for -t 60 rounds_past $((r0 + 3)) || nv_fail "the apps do not go on checking their memory after $1 (rounds $(rounds))"
  for f in "$FAKE"/cuda/*.corrupt; do [[ -e $f ]] && nv_fail "after $1: memory changed at $(cat "$f")"; done
  return 0
}
one() {  # NAME WRITERS
  local name=$1 log w
  rm -f "$FAKE"/cuda/*
  [[ $2 == default ]] || printf '  page_writers: %s\n  page_readers: %s\n' "$2" "$2" >>"$NVPROXY_SHIM_CONFIG"
  local app="/fake/fake_cuda_app --no-cuda --device /dev/null --dir /fakecuda --hold-mib $MIB --zero-mib 128"
  [[ $2 == 0 ]] || app="/fake/fake_cuda_app --device /dev/fakegpu0 --map --dir /fakecuda --hold-mib $MIB --zero-mib 128"
  nv_ctr run -d --runtime $NV_RT "${MOUNTS[@]}" "$NV_IMAGE" "$name" \
    sh -c "sleep 100000 & $app & $app & $app & wait"
  nv_wait_for -t 60 three_apps || nv_fail "$name: the three apps did not start checking their memory: $(ls "$FAKE/cuda")"
  intact "the start"
  nv_ctr c checkpoint --task --rw "$name" "${name}ref" || nv_fail "$name: the checkpoint failed"
  log=$(work "$name")/dump.log
  w=$(grep -c 'page writer [0-9]* writes' "$log" || true)
  if [[ $2 == 0 ]]; then
    nv_assert_eq 0 "$w" "$name: writers with page_writers: 0"
  else
    nv_assert_eq $((CPUS < 2 ? 2 : 4)) "$w" "$name: writers, one each for two big processes, two for the last on $CPUS CPUs ($(grep 'page writer' "$log" | head -8))"
    grep -q 'page writer(s) done' "$log" || nv_fail "$name: the dump did not read its writers' reports"
    nv_assert_eq "$w" "$(grep -c 'held in memory first' "$log" || true)" "$name: writers holding their pages before the resume"
    grep -q 'Tasks resumed before their pages are written' "$log" || nv_fail "$name: CRIU did not resume the tasks early"
    # --write-gate: the held pages waited for the shim's byte (CUDA back), not for a hang-up or the bound.
    grep -qE 'The write gate .* opened after [0-9]+ ms \(a byte\)' "$log" ||
      nv_fail "$name: CRIU's writes did not wait for the shim's CUDA resume: $(grep -i 'write gate' "$log")"
    local order
    order=$(grep -F "checkpoint $name:" "$NV_DIR/containerd.log" | grep -oE ": (snapshot|resume|write_after_resume) [0-9.]+ ms" |
      awk '{print $2}' | tr '\n' ' ')
    nv_assert_eq "snapshot resume write_after_resume " "$order" "$name: CUDA resumed while CRIU wrote the pages (the phases in the shim's log)"
    nv_fake_locked_then_checkpointed "$FAKE/cuda/calls.log" 3
  fi
  nv_assert_eq RUNNING "$(nv_task_status "$name")" "$name: the container after its checkpoint"
  intact "the checkpoint"
  local cuda=()
  [[ $2 == 0 ]] || mapfile -t cuda < <(nv_fake_cuda_pids)
  nv_stop_rm "$name"
  rm -f "$FAKE"/cuda/*.checked "$FAKE"/cuda/*.corrupt
  # The image holds them checkpointed; the fake driver's state files are outside it (checkpoint_gpu_fake.sh).
  ((${#cuda[@]} == 0)) || nv_fake_as_checkpointed "${cuda[@]}"
  nv_ctr c restore --live --rw "$name" "${name}ref" </dev/null || nv_fail "$name: the restore failed"
  nv_wait_for -t 60 three_apps || nv_fail "$name: the restored apps do not check their memory"
  intact "the restore"
  local readers
  readers=$(grep -c "KiB of pages read in by $((CPUS > 8 ? 8 : CPUS)) thread(s)" "$(work "$name")/restore.log" || true)
  if [[ $2 == 0 ]]; then
    nv_assert_eq 0 "$(grep -c 'KiB of pages read in by' "$(work "$name")/restore.log" || true)" "$name: readers with page_readers: 0"
  else
    nv_assert_eq $((CPUS < 2 ? 0 : 3)) "$readers" "$name: big processes read in by $CPUS threads each ($(grep 'read in by' "$(work "$name")/restore.log" | head -5))"
  fi
  if $thp_madvise; then
    grep -q 'Huge pages asked for in' "$(work "$name")/restore.log" ||
      nv_fail "$name: the restore did not ask for huge pages: $(grep -i huge "$(work "$name")/restore.log" | head -3)"
    local huge
    huge=$(for p in $(task_pids "$name"); do awk '/^AnonHugePages/ {print $2}' "/proc/$p/smaps_rollup" 2>/dev/null; done | awk '{s+=$1} END {print s+0}')
    nv_log "$name: AnonHugePages of the restored processes: $huge KiB"
    ((huge >= 3 * MIB * 1024 / 2)) || nv_fail "$name: only $huge KiB of huge pages after the restore"
    # Each app's data and its pool ask for huge pages (VmFlags "hg"), the pool from its zero pages.
    local asking
    asking=$(for p in $(task_pids "$name"); do grep -c '^VmFlags:.* hg' "/proc/$p/smaps" 2>/dev/null || true; done | awk '{s+=$1} END {print s+0}')
    ((asking >= 6)) || nv_fail "$name: $asking mappings ask for huge pages after the restore, not the 3 data regions and 3 pools"
  fi
  # Again from a cold cache: the image's page files dropped; each process read in by its own thread.
  nv_stop_rm "$name"
  rm -f "$FAKE"/cuda/*.checked "$FAKE"/cuda/*.corrupt
  ((${#cuda[@]} == 0)) || nv_fake_as_checkpointed "${cuda[@]}"
  sync
  echo 3 >/proc/sys/vm/drop_caches
  nv_ctr c restore --live --rw "$name" "${name}ref" </dev/null || nv_fail "$name: the restore from a cold cache failed"
  nv_wait_for -t 60 three_apps || nv_fail "$name: the apps restored from a cold cache do not check their memory"
  intact "the restore from a cold cache"
  if [[ $2 != 0 ]] && ((CPUS > 1)); then
    grep -q 'mostly not in the page cache: read in by one thread' "$(work "$name")/restore.log" ||
      nv_fail "$name: the cold restore did not read alone: $(grep -E 'read in by|page cache' "$(work "$name")/restore.log" | head -3)"
  fi
  nv_stop_rm "$name"
  nv_ctr image rm "${name}ref" >/dev/null 2>&1 || true
}
one pio default
one plain 0
echo "PASS page_io (containerd $NV_CONTAINERD_VERSION)"
