# shellcheck shell=bash
# Sourced on the GPU machine: crun_install puts the carried crun with CRIU (test/gpu/pack.sh) where
# scripts/build-crun.sh installs it, and the libraries it and its libcriu load into /usr/local/lib
# (ldconfig), and prints the binary's path.
crun_install() {
  local from=${PACK:-$REPO/.carry}/crun dir=/usr/local/lib/nvproxy-crun f
  [[ -x $from/crun ]] || { echo "no $from/crun: build it with scripts/build-crun.sh, then test/gpu/pack.sh" >&2; return 1; }
  mkdir -p "$dir"
  cp "$from/crun" "$from/libcriu.so.2" "$dir/"
  for f in "$from"/lib*.so.*; do
    [[ $(basename "$f") == libcriu.so.2 ]] || cp "$f" /usr/local/lib/
  done
  ldconfig
  "$dir/crun" --version | grep -q -- '+CRIU' || { echo "$dir/crun does not run here: $("$dir/crun" --version 2>&1)" >&2; return 1; }
  echo "$dir/crun"
}
