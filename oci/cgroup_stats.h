// Resource statistics read straight from a process's cgroup, in the shape of runc's
// `events --stats` "data" object, for runtimes without that command (crun).
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <nlohmann/json.hpp>

namespace nvproxy::oci {

// cgroup v1 (per-controller hierarchies) and v2 (unified). Missing files read as absent fields.
nlohmann::json stats_from_cgroup(pid_t pid, const std::filesystem::path& proc_root = "/proc",
                                 const std::filesystem::path& cgroup_root = "/sys/fs/cgroup");

}  // namespace nvproxy::oci
