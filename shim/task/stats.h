// Task.Stats: the runtime's statistics in the metrics types containerd (and `ctr task metrics`)
// decode: io.containerd.cgroups.v1.Metrics on cgroup v1 hosts, v2.Metrics on unified hosts.
#pragma once

#include "proto/wkt.pb.h"

#include <nlohmann/json.hpp>

namespace nvproxy::shim {

// `data` is the "data" object of `RUNTIME events --stats` (runc's and crun's libcontainer shape).
wkt::Any metrics_from_runtime_stats(const nlohmann::json& data, bool cgroup_v2);
// True when /sys/fs/cgroup is the unified (v2) hierarchy.
bool host_uses_cgroup_v2();

}  // namespace nvproxy::shim
