// Task.Stats: the container's statistics in the metrics types containerd (and `ctr task metrics`)
// decode: io.containerd.cgroups.v1.Metrics on cgroup v1 hosts, v2.Metrics on unified hosts.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "cgroup/paths.h"
#include "proto/wkt.pb.h"

namespace nvproxy::oci {

// Where the host keeps what the statistics read: the cgroup mount, /proc (partitions: the device
// names of v1 blkio entries) and the huge page sizes (v1 hugetlb).
struct CgroupHost {
  std::filesystem::path cgroup_root = "/sys/fs/cgroup";
  std::filesystem::path proc_root = "/proc";
  std::filesystem::path hugepages = "/sys/kernel/mm/hugepages";
};

// The statistics of the cgroup at `paths` (captured while the init ran), read as containerd's
// runc shim reads them with containerd's cgroups library: on v1 every controller the process is
// in, where a missing file ends that controller's part and keeps the rest (IgnoreNotExist); on
// v2 the unified cgroup's files. Throws NotFound without a unified path on v2, Unknown on a file
// that does not parse.
wkt::Any metrics_from_cgroup(const cgroup::CgroupPaths& paths, bool cgroup_v2, const CgroupHost& host = {});

// `data` is the "data" object of `RUNTIME events --stats` (runc's libcontainer shape), for a
// runtime whose cgroups are not the container's own (runsc: the sandbox's).
wkt::Any metrics_from_runtime_stats(const nlohmann::json& data, bool cgroup_v2);
// True when /sys/fs/cgroup is the unified (v2) hierarchy.
bool host_uses_cgroup_v2();

}  // namespace nvproxy::oci
