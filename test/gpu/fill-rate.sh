#!/bin/bash
# Where three checkpoints at once meet the machine: the rate of writing GIB GiB of fresh pages, by
# one writer and by three side by side, into tmpfs, into ext4's page cache, and to the disk itself
# (O_DIRECT), with the dirty-page limits in force. Places CRIU's dump rate (run-large-memory.sh) against
# the machine's. Run on the GPU machine: GIB=12 bash test/gpu/fill-rate.sh | tee $OUT/fill.txt
set -uo pipefail
GIB=${GIB:-12}
DIR=${DIR:-/var/tmp/nvfill}
mkdir -p "$DIR" /dev/shm/nvfill
now() { date +%s.%N; }
rate() { awk -v b="$1" -v t0="$2" -v t1="$3" 'BEGIN{printf "%.2f s, %.2f GB/s", t1-t0, b/(t1-t0)/1e9}'; }
# fill TARGET_DIR N [dd flags]: N writers of GIB GiB each at once; prints the aggregate rate.
fill() {
  local dir=$1 n=$2 t0 t1 i
  shift 2
  sync; echo 3 >/proc/sys/vm/drop_caches
  t0=$(now)
  for ((i = 0; i < n; i++)); do dd if=/dev/zero of="$dir/f$i" bs=4M count=$((GIB * 256)) "$@" status=none & done
  wait
  t1=$(now)
  echo "$dir x$n ${*:-(page cache)}: $((n * GIB)) GiB in $(rate $((n * GIB * 1073741824)) "$t0" "$t1")"
  rm -f "$dir"/f*
}
echo "# $(uname -r), $(nproc) CPUs, $(free -g | awk '/Mem:/{print $2}') GiB, dirty_ratio $(cat /proc/sys/vm/dirty_ratio)," \
  "dirty_background_ratio $(cat /proc/sys/vm/dirty_background_ratio), $(df -h "$DIR" | awk 'NR==2{print $1, $2}')"
fill /dev/shm/nvfill 1
fill /dev/shm/nvfill 3
fill "$DIR" 1
fill "$DIR" 3
fill "$DIR" 1 oflag=direct
fill "$DIR" 3 oflag=direct
rm -rf "$DIR" /dev/shm/nvfill
