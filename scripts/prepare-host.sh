#!/bin/bash
# Host settings the e2e tests (and the demo) rely on; idempotent.
# - crun refuses hybrid cgroups while the cgroup2 hierarchy holds any controller ("cgroups in hybrid
#   mode not supported"). On hosts that mount cgroup v1 but leave an unused controller (often
#   hugetlb) on cgroup2, bind that controller to its own v1 hierarchy, as v1 hosts normally do.
set -euo pipefail
v2=/sys/fs/cgroup/unified
if [[ -r $v2/cgroup.controllers && -d /sys/fs/cgroup/memory ]]; then
  for c in $(cat "$v2/cgroup.controllers"); do
    [[ -z $(cat "$v2/cgroup.subtree_control") ]] || break  # in use on v2: leave it alone
    mkdir -p "/sys/fs/cgroup/$c"
    mountpoint -q "/sys/fs/cgroup/$c" || mount -t cgroup -o "$c" cgroup "/sys/fs/cgroup/$c"
  done
fi
