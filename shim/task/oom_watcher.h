// OOM events for containers (containerd's TaskOOM), from the memory cgroup of each container's
// init process. One thread waits in epoll on:
//  - cgroup v1: an eventfd registered through cgroup.event_control for memory.oom_control (the
//    kernel signals it on every OOM in the cgroup, and once more when the cgroup is removed);
//  - cgroup v2 (unified, /sys/fs/cgroup/cgroup.controllers exists): inotify on memory.events,
//    reporting when its `oom` or `oom_kill` counter grows.
// A cgroup that disappears (the runtime deleted the container) is dropped without a report.
//
// Wiring: add(id, init_pid) once Create (or a restore at Start) knows the init pid; poll(id) at the
// init's exit, before the exit is published; remove(id) at Delete of the init process. Do not
// remove at the init's exit: an OOM kill is what makes it exit, and its event may still be on its
// way.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/unique_fd.h"
#include "shim/task/oom_watch.h"

namespace nvproxy {
class Logger;
}

namespace nvproxy::shim {

class OomWatcher final : public OomWatch {
 public:
  // Where to look; tests point these at fakes.
  struct Paths {
    std::filesystem::path proc = "/proc";
    std::filesystem::path cgroup_root = "/sys/fs/cgroup";
  };
  // on_oom runs on the watcher's thread, possibly more than once for one OOM (the kernel may
  // signal repeatedly). Throws Error only if epoll or the thread cannot be set up.
  OomWatcher(Logger& log, std::function<void(const std::string& container_id)> on_oom, Paths paths);
  OomWatcher(Logger& log, std::function<void(const std::string& container_id)> on_oom)
      : OomWatcher(log, std::move(on_oom), Paths{}) {}
  ~OomWatcher() override;
  OomWatcher(const OomWatcher&) = delete;
  OomWatcher& operator=(const OomWatcher&) = delete;

  // Starts watching (replacing an earlier registration of the same id). Failures (the pid is
  // gone, no memory cgroup) are logged with the container id, never thrown.
  void add(const std::string& container_id, pid_t init_pid) override;
  // After it returns, on_oom is not called for this id (unless added again). Must not be called
  // while holding a lock that on_oom takes: it waits for a delivery in progress.
  void remove(const std::string& container_id) override;
  void poll(const std::string& container_id) override;
  [[nodiscard]] size_t watched();  // registrations still live (for tests and debugging)

 private:
  struct Entry {
    std::string id;
    bool v2 = false;
    std::filesystem::path dir;       // the container's memory cgroup
    UniqueFd fd;                     // v1: eventfd; v2: inotify
    uint64_t oom = 0, oom_kill = 0;  // v2 counters last seen
  };
  enum class Seen { Nothing, Oom, Gone };

  Entry open_entry(const std::string& id, pid_t pid) const;
  Seen check(Entry& e) const;
  void drop_locked(const std::string& container_id);  // mu_ held
  // mu_ held: true when the entry saw an OOM; an entry whose cgroup is gone is dropped.
  bool examine_locked(std::map<uint64_t, Entry>::iterator it);
  // deliver_mu_ held: runs on_oom for each (token, id) still registered.
  void deliver_locked(const std::vector<std::pair<uint64_t, std::string>>& fired);
  void run();

  Logger& log_;
  std::function<void(const std::string&)> on_oom_;
  Paths paths_;
  UniqueFd epoll_, stop_;
  std::mutex mu_;                      // entries_, next_token_
  std::map<uint64_t, Entry> entries_;  // by epoll token; 0 is stop_
  uint64_t next_token_ = 1;
  // Taken before mu_, from taking a signal until on_oom has run: remove() and poll() wait it out.
  std::mutex deliver_mu_;
  std::atomic<std::thread::id> delivering_;  // the thread running on_oom (remove() from there must not wait)
  std::thread thread_;
};

}  // namespace nvproxy::shim
