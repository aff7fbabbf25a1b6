#!/bin/bash
# Issue 56 on the GPU machine, side by side in one call: test/gpu/run-large-memory.sh with the kit's
# CRIU (scripts/criu-page-io.patch built in) first without its page I/O options (PAGE_IO=off:
# checkpoint.page_writers 0, page_readers 0, restore_huge_pages false, what main did), then with them, on the same
# RUNS and DROP (DROP=no: restores from a warm page cache; yes: cold). With CRIU_ALONE=yes,
# bench/page_io.sh follows (CRIU alone, no CUDA: BIG MiB and three SMALL MiB processes, both ways).
# MODES: the PAGE_IO modes in order (default "off on"; run-large-memory.sh names the others).
# Usage (repo root, after test/gpu/pack.sh):
#   RUNS="image-store:24:1" DROP=no timeout 590 bash test/gpu/run-page-io.sh 2>&1 | tee $OUT/page-io.log
set -uo pipefail
REPO=$(pwd)
for mode in ${MODES:-off on}; do
  echo "=== PAGE_IO=$mode RUNS=${RUNS:-} DROP=${DROP:-yes}"
  PAGE_IO=$mode bash "$REPO/test/gpu/run-large-memory.sh"
  # each mode's containerd log and diagnostics kept apart (run-large-memory.sh writes the same names)
  for f in "${OUT:-/tmp/nvgpu-out}"/containerd-26.log.gz "${OUT:-/tmp/nvgpu-out}"/diagnostics26.json; do
    [[ -e $f ]] && mv "$f" "${f%%.*}-$mode.${f#*.}"
  done
done
if [[ ${CRIU_ALONE:-no} == yes ]]; then
  echo "=== CRIU alone (bench/page_io.sh)"
  CRIU=/opt/kit/bin/criu HOLD=$REPO/.carry/bin/page_hold BIG=${BIG:-24576} SMALL=${SMALL:-12288} RUNS=1 \
    bash "$REPO/bench/page_io.sh"
fi
