# shellcheck shell=bash
# The GPU workloads' progress files ("ITERATION ... INTACT" per line, rewritten as they go):
#   iter FILE          its iteration (0 while unreadable)
#   ready FILE...      every file has been written
#   advancing FILE...  every file's iteration goes up within ADVANCE_S seconds (default 8)
#   intact FILE...     no file says its device data is False
iter() { local v; v=$(cut -d' ' -f1 "$1" 2>/dev/null); [[ $v =~ ^[0-9]+$ ]] && echo "$v" || echo 0; }
ready() { local f; for f in "$@"; do [[ -s $f ]] || return 1; done; }
advancing() {
  local f a=() i=0 end=$(($(date +%s) + ${ADVANCE_S:-8}))
  for f in "$@"; do a+=("$(iter "$f")"); done
  for f in "$@"; do
    until (($(iter "$f") > a[i])); do (($(date +%s) < end)) || return 1; sleep 0.2; done
    i=$((i + 1))
  done
}
intact() { ! grep -qh False "$@"; }
