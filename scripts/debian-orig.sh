# shellcheck shell=bash
# Sourced by build-criu.sh and build-crun.sh: what building a pinned upstream release here takes.
#   nv_install_missing TAG LOG PKG...   installs the Debian 12 packages that are missing
#                                        (apt-get update only if some are)
#   nv_fetch_orig TAG SUITE PACKAGE DEB_VERSION ORIG SHA256 WORK APTDIR
#                                        leaves WORK/ORIG, the upstream tarball that SUITE's source
#                                        index names for PACKAGE=DEB_VERSION, checked against SHA256
# The source index is read through a PRIVATE apt setup in APTDIR (one deb-src line for SUITE on the
# machine's own Debian mirror, from nv_trixie_mirror); the system's apt config is untouched. apt
# checks the index's signature, this the pinned name and hash. No fallback to another version.
HERE_ORIG=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR
source "$HERE_ORIG/fetch-trixie.sh" # for nv_trixie_mirror

nv_install_missing() {
  local tag=$1 log=$2 p missing=()
  shift 2
  for p in "$@"; do
    [[ $(dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null) == "ii " ]] || missing+=("$p")
  done
  ((${#missing[@]})) || return 0
  export DEBIAN_FRONTEND=noninteractive
  echo "$tag: installing build deps: ${missing[*]}"
  if ! { apt-get -q -o DPkg::Lock::Timeout=900 update \
    && apt-get -q -y -o DPkg::Lock::Timeout=900 -o Dpkg::Use-Pty=0 install --no-install-recommends \
      "${missing[@]}"; } </dev/null >"$log" 2>&1; then
    tail -n 20 "$log" >&2
    echo "$tag: installing build deps failed (log: $log)" >&2
    return 1
  fi
}

_nv_orig_ok() { echo "$2  $1" | sha256sum --quiet -c - >/dev/null 2>&1; }

# Prints the tarball's URI from SUITE's source index.
_nv_orig_uri() {
  local tag=$1 suite=$2 pkg=$3 debv=$4 orig=$5 sha=$6 work=$7 apt=$8 mirror opts log line d uri name got
  mirror=$(nv_trixie_mirror) || return 1
  mkdir -p "$apt"/{lists/partial,cache/archives/partial}
  printf 'deb-src %s %s main\n' "$mirror" "$suite" >"$apt/sources.list"
  opts=(-o "Dir::Etc::SourceList=$apt/sources.list" -o Dir::Etc::SourceParts=/dev/null
    -o "Dir::State::Lists=$apt/lists" -o "Dir::Cache=$apt/cache"
    -o APT::Sandbox::User=root -o Acquire::Languages=none -o APT::Update::Error-Mode=any)
  log=$work/apt-$suite.log
  if ! apt-get "${opts[@]}" -qq update </dev/null >"$log" 2>&1; then
    sed 's/^/  /' "$log" >&2
    echo "$tag: cannot read Debian $suite's source index (deb-src $mirror $suite main);" \
      "$pkg $debv comes only from there (no fallback to another version)" >&2
    return 1
  fi
  # apt leaves out files that already sit in the current directory: ask from an empty one.
  d=$(mktemp -d)
  line=$(cd "$d" && apt-get "${opts[@]}" -qq source --print-uris "$pkg=$debv" 2>"$log" \
    | grep -F "' $orig " | head -n1) || true
  rmdir "$d"
  if [[ -z $line ]]; then
    sed 's/^/  /' "$log" >&2
    echo "$tag: Debian $suite's source index has no $pkg $debv ($orig) any more; update the pin" \
      "in scripts/$tag.sh after checking the new version" >&2
    return 1
  fi
  read -r uri name _ got <<<"$line"
  if [[ $name != "$orig" || $got != "SHA256:$sha" ]]; then
    echo "$tag: $suite's index names $name $got, not the pinned $orig SHA256:$sha" >&2
    return 1
  fi
  echo "${uri//\'/}"
}

nv_fetch_orig() {
  local tag=$1 orig=$5 sha=$6 work=$7 uri
  if [[ -s $work/$orig ]] && _nv_orig_ok "$work/$orig" "$sha"; then
    echo "$tag: source $work/$orig (SHA256 as pinned, already here)"
    return 0
  fi
  rm -f "${work:?}/$orig"
  uri=$(_nv_orig_uri "$@") || return 1
  echo "$tag: fetching $uri (SHA256:$sha)"
  /usr/lib/apt/apt-helper -o APT::Sandbox::User=root download-file "$uri" "$work/$orig" "SHA256:$sha" >/dev/null
  _nv_orig_ok "$work/$orig" "$sha" || { echo "$tag: $work/$orig does not match the pinned SHA256" >&2; return 1; }
}
