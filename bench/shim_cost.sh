#!/usr/bin/env bash
# What one shim costs: containerd-shim-nvproxy-v1 (io.containerd.nvproxy.v1) against containerd's own
# containerd-shim-runc-v2 (io.containerd.runc.v2), side by side in ONE run, on the same private
# containerd (test/e2e/lib/harness.sh), the same runc, the same image and snapshotter.
#
#   (a) memory: N detached `sleep` containers per runtime; every shim process (the parent of the
#       container's init) is sampled: VmRSS (/proc/PID/status) and Pss (/proc/PID/smaps_rollup);
#       median per container over the containers and over the samples.
#   (b) `ctr run --rm IMAGE ID true` latency, RUNS each, interleaved (ABBA order); median and p90.
#   (c) BURST containers started at once (`ctr run -d` in parallel): wall time until all are RUNNING,
#       then all removed at once (`ctr task rm -f` + `ctr c rm`): wall time until all are gone.
# Prints a markdown table (stdout; also $BENCH_OUT when set) with ratios ours / runc shim.
#
# Usage: sudo bench/shim_cost.sh            (root; containerd 1.6, runc, containerd-shim-runc-v2)
#   BENCH_CONTAINERD=1.7  containerd 1.7 (Debian 13's, scripts/fetch-trixie.sh) and its own runc shim
#   NVPROXY_SHIM_DIR   dir of containerd-shim-nvproxy-v1 (default: build-bench/shim, then build/shim)
#   BENCH_N=10 BENCH_RUNS=30 BENCH_BURST=50 BENCH_BURST_ROUNDS=2 BENCH_SAMPLES=3 BENCH_OUT=FILE
# shellcheck disable=SC2154 # rss_ours, thr_runc, ...: set through declare "NAME_$rt=..."
set -euo pipefail
BENCH_DIR=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$BENCH_DIR/.." && pwd)
source "$REPO/test/e2e/lib/harness.sh"

N=${BENCH_N:-10}
RUNS=${BENCH_RUNS:-30}
BURST=${BENCH_BURST:-50}
BURST_ROUNDS=${BENCH_BURST_ROUNDS:-2}
SAMPLES=${BENCH_SAMPLES:-3}
OURS=io.containerd.nvproxy.v1
RUNC=io.containerd.runc.v2

if [[ -z ${NVPROXY_SHIM_DIR:-} ]]; then
  for d in "$REPO/build-bench/shim" "$REPO/build/shim"; do
    if [[ -x $d/containerd-shim-nvproxy-v1 ]]; then NVPROXY_SHIM_DIR=$d; break; fi
  done
fi
[[ -n ${NVPROXY_SHIM_DIR:-} ]] || nv_fail "no containerd-shim-nvproxy-v1 built (cmake --build build-bench --target bench_tools)"
export NVPROXY_SHIM_DIR
CTRD=${BENCH_CONTAINERD:-1.6}
RUNC_BIN=$(command -v runc) || nv_fail "runc not installed"

# Our shim's configuration: the packaged defaults (log_level info), runc from PATH like the runc shim.
OUR_ROOT=/run/containerd/nvproxy-bench
cfg=$(mktemp /tmp/nvproxy-bench-config.XXXXXX.yaml)
cat >"$cfg" <<EOF
runtime: {binary: $RUNC_BIN, root: $OUR_ROOT}
log_level: info
EOF
export NVPROXY_SHIM_CONFIG=$cfg

# At exit (before the harness's own teardown): tasks gone first, then whatever runc state is left.
sweep_our_root() {
  local st root=$OUR_ROOT/$NV_NAMESPACE
  if [[ -n $NV_CONTAINERD_PID ]] && kill -0 "$NV_CONTAINERD_PID" 2>/dev/null; then _nv_kill_tasks "$NV_NAMESPACE"; fi
  [[ -d $root ]] || return 0
  for st in "$root"/*/state.json; do
    [[ -e $st ]] && "$RUNC_BIN" --root "$root" delete --force "$(basename "$(dirname "$st")")" >/dev/null 2>&1
  done
  rm -rf "$root"
}

nv_harness_start --containerd "$CTRD"
# The runc shim containerd will start: the one beside this containerd, else from PATH.
RUNC_SHIM=$(PATH=$_NV_DAEMON_PATH command -v containerd-shim-runc-v2) || nv_fail "containerd-shim-runc-v2 not found"
nv_defer rm -f "$cfg"
nv_defer sweep_our_root

now_ms() { echo $(($(date +%s%N) / 1000000)); }
# median / p90 of numbers on stdin (nearest rank)
stat_of() {
  sort -n | awk -v q="$1" '{v[NR]=$1} END {if (!NR) {print "nan"; exit}
    if (q == 50) {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2; exit}
    i = int(q / 100 * NR + 0.999999); if (i < 1) i = 1; print v[i]}'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (b == 0) print "n/a"; else printf "%.2f", a / b}'; }
task_pid() { nv_ctr task ls | awk -v id="$1" '$1==id{print $2}'; }
count_running() { nv_ctr task ls | awk -v p="$1" 'index($1, p) == 1 && $3 == "RUNNING"' | wc -l; }

# ---------- environment ----------
CTRD_VER=$("$NV_CONTAINERD_BIN" --version | awk '{print $3}')
RUNC_VER=$("$RUNC_BIN" --version | awk 'NR==1{print $3}')
OUR_VER=$("$NVPROXY_SHIM_DIR/containerd-shim-nvproxy-v1" -v 2>/dev/null | awk '/Version:/{print $2}' || true)
nv_log "containerd $CTRD_VER, runc $RUNC_VER, ours $OUR_VER ($NVPROXY_SHIM_DIR), runc shim $RUNC_SHIM, snapshotter $NV_SNAPSHOTTER"

# ---------- (a) memory ----------
nv_log "(a) memory: $N detached containers per runtime"
declare -A SHIM_OF
for i in $(seq -w 1 "$N"); do
  for rt in ours runc; do
    r=$OURS; [[ $rt == runc ]] && r=$RUNC
    nv_ctr run -d --runtime "$r" "$NV_IMAGE" "m-$rt-$i" sleep 100000 >/dev/null
  done
done
for i in $(seq -w 1 "$N"); do
  for rt in ours runc; do
    pid=$(task_pid "m-$rt-$i")
    [[ -n $pid && $pid != 0 ]] || nv_fail "no pid for m-$rt-$i"
    shim=$(awk '/^PPid:/{print $2}' "/proc/$pid/status")
    exe=$(tr '\0' '\n' <"/proc/$shim/cmdline" | head -n1)
    case $rt in
      ours) [[ ${exe##*/} == containerd-shim-nvproxy-v1 ]] || nv_fail "parent of m-$rt-$i is $exe" ;;
      runc) [[ ${exe##*/} == containerd-shim-runc-v2 ]] || nv_fail "parent of m-$rt-$i is $exe" ;;
    esac
    SHIM_OF[$rt-$i]=$shim
  done
done
# one shim process per container for both (no grouping without the CRI sandbox label)
for rt in ours runc; do
  u=$(for i in $(seq -w 1 "$N"); do echo "${SHIM_OF[$rt-$i]}"; done | sort -u | wc -l)
  [[ $u == "$N" ]] || nv_log "warning: $rt: $u distinct shim processes for $N containers"
done
sleep 2 # let both settle (Go's runtime finishes its start-up allocations)
declare -A RSS PSS PRIV THREADS ANON
for s in $(seq "$SAMPLES"); do
  for rt in ours runc; do
    for i in $(seq -w 1 "$N"); do
      p=${SHIM_OF[$rt-$i]}
      RSS[$rt]+="$(awk '/^VmRSS:/{print $2}' "/proc/$p/status") "
      ANON[$rt]+="$(awk '/^RssAnon:/{print $2}' "/proc/$p/status") "
      THREADS[$rt]+="$(awk '/^Threads:/{print $2}' "/proc/$p/status") "
      PSS[$rt]+="$(awk '/^Pss:/{print $2}' "/proc/$p/smaps_rollup") "
      PRIV[$rt]+="$(awk '/^Private_(Clean|Dirty):/{s+=$2} END{print s}' "/proc/$p/smaps_rollup") "
    done
  done
  ((s < SAMPLES)) && sleep 1
done
kb_med() { tr ' ' '\n' <<<"$1" | grep . | stat_of 50; }
for rt in ours runc; do
  declare "rss_$rt=$(kb_med "${RSS[$rt]}")" "pss_$rt=$(kb_med "${PSS[$rt]}")" \
    "priv_$rt=$(kb_med "${PRIV[$rt]}")" "thr_$rt=$(kb_med "${THREADS[$rt]}")" \
    "anon_$rt=$(kb_med "${ANON[$rt]}")"
done
nv_log "RSS kB ours=$rss_ours runc=$rss_runc; PSS kB ours=$pss_ours runc=$pss_runc; private kB ours=$priv_ours runc=$priv_runc"
for rt in ours runc; do
  for i in $(seq -w 1 "$N"); do nv_ctr task rm -f "m-$rt-$i" >/dev/null 2>&1 || true; nv_ctr c rm "m-$rt-$i" >/dev/null; done
done

# ---------- (b) ctr run --rm latency ----------
nv_log "(b) ctr run --rm true: $RUNS runs each, interleaved"
one_run() { # one_run RUNTIME ID -> ms
  local t0 t1
  t0=$(now_ms)
  nv_ctr run --rm --runtime "$1" "$NV_IMAGE" "$2" true >/dev/null
  t1=$(now_ms)
  echo $((t1 - t0))
}
one_run $OURS warm-ours >/dev/null
one_run $RUNC warm-runc >/dev/null
LAT_OURS=() LAT_RUNC=()
for i in $(seq "$RUNS"); do
  if ((i % 2)); then
    LAT_OURS+=("$(one_run $OURS "l-ours-$i")")
    LAT_RUNC+=("$(one_run $RUNC "l-runc-$i")")
  else
    LAT_RUNC+=("$(one_run $RUNC "l-runc-$i")")
    LAT_OURS+=("$(one_run $OURS "l-ours-$i")")
  fi
done
lat_med_ours=$(printf '%s\n' "${LAT_OURS[@]}" | stat_of 50)
lat_med_runc=$(printf '%s\n' "${LAT_RUNC[@]}" | stat_of 50)
lat_p90_ours=$(printf '%s\n' "${LAT_OURS[@]}" | stat_of 90)
lat_p90_runc=$(printf '%s\n' "${LAT_RUNC[@]}" | stat_of 90)
nv_log "latency ms ours: ${LAT_OURS[*]}"
nv_log "latency ms runc: ${LAT_RUNC[*]}"

# ---------- (c) burst ----------
burst() { # burst RUNTIME PREFIX -> "START_MS REMOVE_MS"
  local r=$1 p=$2 t0 t1 t2 i pids=()
  t0=$(now_ms)
  for i in $(seq -w 1 "$BURST"); do
    nv_ctr run -d --runtime "$r" "$NV_IMAGE" "$p$i" sleep 100000 >/dev/null &
    pids+=($!)
  done
  for i in "${pids[@]}"; do wait "$i" || nv_fail "a concurrent ctr run ($p) failed"; done
  # `ctr run -d` returns after Start; poll anyway so that "all RUNNING" is what containerd reports.
  until (($(count_running "$p") == BURST)); do
    (($(now_ms) - t0 < 120000)) || nv_fail "burst $p: only $(count_running "$p") of $BURST running"
    sleep 0.05
  done
  t1=$(now_ms)
  pids=()
  for i in $(seq -w 1 "$BURST"); do
    (nv_ctr task rm -f "$p$i" >/dev/null 2>&1 && nv_ctr c rm "$p$i" >/dev/null) &
    pids+=($!)
  done
  for i in "${pids[@]}"; do wait "$i" || nv_fail "a concurrent removal ($p) failed"; done
  t2=$(now_ms)
  left=$(nv_ctr c ls -q | grep -c "^$p" || true)
  ((left == 0)) || nv_fail "burst $p: $left containers left"
  echo "$((t1 - t0)) $((t2 - t1))"
}
nv_log "(c) $BURST containers at once, $BURST_ROUNDS round(s) per runtime"
B_START_OURS=() B_START_RUNC=() B_RM_OURS=() B_RM_RUNC=()
for round in $(seq "$BURST_ROUNDS"); do
  order=(ours runc)
  ((round % 2)) || order=(runc ours)
  for rt in "${order[@]}"; do
    r=$OURS; [[ $rt == runc ]] && r=$RUNC
    out=$(burst "$r" "b$round-$rt-") || exit 1
    read -r s d <<<"$out"
    nv_log "burst round $round $rt: all running after $s ms, removed in $d ms"
    if [[ $rt == ours ]]; then B_START_OURS+=("$s"); B_RM_OURS+=("$d"); else B_START_RUNC+=("$s"); B_RM_RUNC+=("$d"); fi
    sleep 1
  done
done
bs_ours=$(printf '%s\n' "${B_START_OURS[@]}" | stat_of 50)
bs_runc=$(printf '%s\n' "${B_START_RUNC[@]}" | stat_of 50)
br_ours=$(printf '%s\n' "${B_RM_OURS[@]}" | stat_of 50)
br_runc=$(printf '%s\n' "${B_RM_RUNC[@]}" | stat_of 50)

# ---------- report ----------
verdict() { awk -v x="$1" -v lim="$2" 'BEGIN {print (x != "n/a" && x <= lim) ? "yes" : "no"}'; }
mem_ratio_rss=$(ratio "$rss_ours" "$rss_runc")
mem_ratio_pss=$(ratio "$pss_ours" "$pss_runc")
lat_ratio=$(ratio "$lat_med_ours" "$lat_med_runc")
mib() { awk -v k="$1" 'BEGIN {printf "%.1f MiB", k / 1024}'; }
{
  echo "containerd $CTRD_VER ($RUNC_SHIM), runc $RUNC_VER, snapshotter $NV_SNAPSHOTTER; $(nproc) CPUs, $(free -h | awk '/^Mem:/{print $2}') RAM, kernel $(uname -r); $(date -u +%F)"
  echo
  echo "| metric | containerd-shim-nvproxy-v1 | containerd-shim-runc-v2 | ours / runc shim | target | met |"
  echo "| --- | ---: | ---: | ---: | --- | --- |"
  echo "| shim VmRSS per container (median, $N containers x $SAMPLES samples) | $(mib "$rss_ours") | $(mib "$rss_runc") | $mem_ratio_rss | <= 0.25 | $(verdict "$mem_ratio_rss" 0.25) |"
  echo "| shim PSS per container (smaps_rollup) | $(mib "$pss_ours") | $(mib "$pss_runc") | $mem_ratio_pss | <= 0.25 | $(verdict "$mem_ratio_pss" 0.25) |"
  echo "| shim RssAnon (heap, stacks: not shared with anything) | $(mib "$anon_ours") | $(mib "$anon_runc") | $(ratio "$anon_ours" "$anon_runc") | | |"
  echo "| shim private memory (Private_Clean + Private_Dirty) | $(mib "$priv_ours") | $(mib "$priv_runc") | $(ratio "$priv_ours" "$priv_runc") | | |"
  echo "| shim threads | $thr_ours | $thr_runc | | | |"
  echo "| \`ctr run --rm IMAGE ID true\` median ($RUNS runs, interleaved) | $lat_med_ours ms | $lat_med_runc ms | $lat_ratio | <= 1.00 (aim 0.90) | $(verdict "$lat_ratio" 1.00) (aim: $(verdict "$lat_ratio" 0.90)) |"
  echo "| \`ctr run --rm\` p90 | $lat_p90_ours ms | $lat_p90_runc ms | $(ratio "$lat_p90_ours" "$lat_p90_runc") | | |"
  echo "| $BURST containers at once: all RUNNING (median of $BURST_ROUNDS) | $bs_ours ms | $bs_runc ms | $(ratio "$bs_ours" "$bs_runc") | | |"
  echo "| $BURST containers removed at once (median of $BURST_ROUNDS) | $br_ours ms | $br_runc ms | $(ratio "$br_ours" "$br_runc") | | |"
} | tee ${BENCH_OUT:+"$BENCH_OUT"}
