// Which processes belong to a container. The orchestrator asks a ProcessLister (supplied by the shim)
// each time it needs the list, because pids change: after a CRIU restore every host pid is new.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "common/process.h"

namespace nvproxy::checkpoint {

class ProcessLister {
 public:
  virtual ~ProcessLister() = default;
  // Host pids of every process in the container, sorted, no duplicates. Throws Error.
  virtual std::vector<pid_t> list() = 0;
};

// A fixed list, or whatever a function returns (tests, the runsc path, the diagnose --pid option).
class FunctionLister final : public ProcessLister {
 public:
  explicit FunctionLister(std::function<std::vector<pid_t>()> fn) : fn_(std::move(fn)) {}
  explicit FunctionLister(std::vector<pid_t> pids) : fn_([pids] { return pids; }) {}
  std::vector<pid_t> list() override;

 private:
  std::function<std::vector<pid_t>()> fn_;
};

// cgroup.procs of a cgroup directory and of every cgroup below it (cgroup v2; v1 works the same
// for one hierarchy).
std::vector<pid_t> cgroup_pids(const std::filesystem::path& cgroup_dir);

class CgroupLister final : public ProcessLister {
 public:
  explicit CgroupLister(std::filesystem::path cgroup_dir) : dir_(std::move(cgroup_dir)) {}
  std::vector<pid_t> list() override { return cgroup_pids(dir_); }

 private:
  std::filesystem::path dir_;
};

// The cgroup directory of a process, from PROC/PID/cgroup: the unified ("0::") line under
// cgroup_root, else (cgroup v1) the freezer hierarchy, which runc populates for every container.
std::filesystem::path cgroup_of_pid(pid_t pid, const std::filesystem::path& proc_root = "/proc",
                                    const std::filesystem::path& cgroup_root = "/sys/fs/cgroup");

}  // namespace nvproxy::checkpoint
