// The two halves of metrics_from_cgroup (cgroup_metrics.h): containerd's v1 and v2 Metrics.
#pragma once

#include "oci/cgroup_metrics.h"
#include "proto/cgroups_v1.pb.h"
#include "proto/cgroups_v2.pb.h"

namespace nvproxy::oci {

io::containerd::cgroups::v1::Metrics v1_metrics(const CgroupPaths& paths, const CgroupHost& host);
io::containerd::cgroups::v2::Metrics v2_metrics(const CgroupPaths& paths, const CgroupHost& host);

}  // namespace nvproxy::oci
