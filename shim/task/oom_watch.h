// Watching a container's memory cgroup for OOM kills (OomWatcher), behind an interface so that
// the task layer runs in tests without cgroups.
#pragma once

#include <sys/types.h>

#include <string>

namespace nvproxy::shim {

class OomWatch {
 public:
  virtual ~OomWatch() = default;
  virtual void add(const std::string& container_id, pid_t init_pid) = 0;
  virtual void remove(const std::string& container_id) = 0;
};

}  // namespace nvproxy::shim
