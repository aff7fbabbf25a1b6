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
  // Reports now an OOM the kernel has signalled for this container that the watcher's thread has
  // not handled yet. The init's exit calls it before the exit goes out: a delete right after the
  // exit removes the cgroup, and with it the signal, if that thread was slow to run.
  virtual void poll(const std::string& container_id) = 0;
};

}  // namespace nvproxy::shim
