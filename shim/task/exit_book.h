// Matching the reaper's exits to the processes they belong to. A process's pid is known only once
// the runtime's create/exec/restore has written its pid file, and the process may exit before
// that: while any start is in flight, exits of unknown pids are kept, and handed over when the pid
// is claimed. One lock covers the pid index and the kept exits, so an exit can never fall between
// "not known yet" and "claimed".
#pragma once

#include <sys/types.h>

#include <functional>
#include <map>
#include <mutex>
#include <optional>

namespace nvproxy::shim {

class ExitBook {
 public:
  using Target = std::function<void(int wait_status)>;

  // Held while a runtime command that starts a process runs (RAII).
  class Starting {
   public:
    explicit Starting(ExitBook& b);
    ~Starting();
    Starting(const Starting&) = delete;
    Starting& operator=(const Starting&) = delete;

   private:
    ExitBook& b_;
  };

  // Registers the owner of `pid`. Returns the exit that arrived before the pid was known (the owner
  // must record it; the target is then not kept).
  std::optional<int> claim(pid_t pid, Target target);
  void forget(pid_t pid);
  // From the reaper: calls the pid's target (outside the lock), or keeps the exit while a start is
  // in flight; other exits (orphans of the container) are dropped.
  void on_exit(pid_t pid, int wait_status);

 private:
  std::mutex mu_;
  int starting_ = 0;
  std::map<pid_t, Target> targets_;
  std::map<pid_t, int> early_;
};

}  // namespace nvproxy::shim
