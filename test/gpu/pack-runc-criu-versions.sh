#!/bin/bash
# Here (Debian 12): adds to .carry/ what test/gpu/run-runc-criu-versions.sh needs beyond test/gpu/pack.sh's:
#   .carry/runc143/runc      runc 1.4.3 (scripts/fetch-shared-deps.sh unpacks it)
#   .carry/criu411/root      Debian 13's CRIU 4.1.1 with its libraries (from the kit's download cache)
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
c=$repo/.carry
source /opt/nvproxy-deps/shared/env.sh
mkdir -p "$c/runc143"
install -m 0755 "$NVPROXY_SHARED_RUNC_BIN_DIR/runc" "$c/runc143/runc"
rm -rf "$c/criu411"; mkdir -p "$c/criu411/root"
for p in criu libcompel1 libprotobuf-c1 libnet1 libnl-3-200 libnftables1 libnftnl11 libjansson4 libmnl0 libxtables12 libbsd0 libmd0; do
  dpkg -x "$(ls /var/tmp/trixie-apt/dl/${p}_*.deb | tail -1)" "$c/criu411/root"
done
rm -rf "$c/criu411/root/usr/share"
du -sh "$c/runc143" "$c/criu411"
