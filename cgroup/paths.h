// Where a process's cgroups are (from /proc/PID/cgroup) and where a controller's directory is: asked
// by oci/'s statistics (cgroup_metrics.h), the task layer and checkpoint/'s memory limits alike.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace nvproxy::cgroup {

// A process's place in the cgroup hierarchies, as /proc/PID/cgroup lists it.
struct CgroupPaths {
  struct V1 {
    std::string hierarchy;  // the line's controller list, e.g. "cpu,cpuacct" or "name=systemd"
    std::string path;       // e.g. "/default/c1"
  };
  std::map<std::string, V1> v1;        // controller ("memory", "cpuacct", "name=systemd") -> its hierarchy and path
  std::optional<std::string> unified;  // the "0::PATH" line's path (cgroup v2)

  bool operator==(const CgroupPaths&) const = default;
};

// Parses the text of /proc/PID/cgroup; lines that are not "ID:CONTROLLERS:PATH" are skipped.
CgroupPaths parse_proc_cgroup(std::string_view text);
// The cgroups of `pid`; nullopt when the process (or its /proc entry) is gone.
std::optional<CgroupPaths> cgroup_paths_of(pid_t pid, const std::filesystem::path& proc_root = "/proc");
// The directory of a v1 controller's cgroup under `cgroup_root`: ROOT/CONTROLLER/PATH as
// containerd's cgroups library looks for it, or ROOT/HIERARCHY/PATH where the controller has no
// directory of its own (a co-mounted "cpu,cpuacct" without the usual symlinks). nullopt when the
// process is in no cgroup of that controller.
std::optional<std::filesystem::path> v1_cgroup_dir(const CgroupPaths& paths, const std::string& controller,
                                                   const std::filesystem::path& cgroup_root = "/sys/fs/cgroup");

}  // namespace nvproxy::cgroup
