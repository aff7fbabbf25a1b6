# shellcheck shell=bash
# What every GPU run prints, sourced by each: ts (seconds since the run began), log LINE, result
# PASS|FAIL|INFO NAME DETAIL (kept in RESULTS for the summary), now and dt A B (seconds between two
# `now`s, for phase times).
T0=$(date +%s.%N)
ts() { awk -v a="$T0" -v b="$(date +%s.%N)" 'BEGIN{printf "%6.1f", b-a}'; }
log() { echo "[$(ts)] $*"; }
RESULTS=()
result() { RESULTS+=("RESULT $1 $2: $3"); echo "RESULT $1 $2: $3"; }
now() { date +%s.%N; }
dt() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.2f", b-a}'; }
