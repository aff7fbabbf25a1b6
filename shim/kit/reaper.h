// The shim is a child subreaper: container processes (and everything they orphan) end up as its
// children. The reaper owns SIGCHLD: it reaps every child with waitpid(-1), hands the status of a
// program the shim ran itself (runc, ...) to the thread waiting for it, and reports all other exits
// (container init, execs, orphans) to a callback.
#pragma once

#include <sys/types.h>

#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "common/process.h"
#include "common/unique_fd.h"

namespace nvproxy::shim {

class Reaper final : public ChildWaiter {
 public:
  using ExitFn = std::function<void(pid_t pid, int status)>;
  // SIGCHLD must already be blocked in every thread (block_sigchld() before any thread starts).
  explicit Reaper(ExitFn on_exit);
  ~Reaper() override;
  Reaper(const Reaper&) = delete;
  Reaper& operator=(const Reaper&) = delete;

  static void block_sigchld();

  pid_t spawn(const std::function<pid_t()>& fork_fn) override;
  int wait(pid_t pid) override;
  std::optional<int> try_wait(pid_t pid) override;

 private:
  void loop();
  void reap_all();

  ExitFn on_exit_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<pid_t, std::optional<int>> ours_;  // children we spawned, with their status once reaped
  UniqueFd sigfd_;
  UniqueFd stopfd_;
  std::thread thread_;
};

}  // namespace nvproxy::shim
