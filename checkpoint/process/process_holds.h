// The driver's API names a process by its number. A checkpoint finds its processes by number (the
// runtime's `ps`) and toggles them by number up to seconds later: a process that ends meanwhile,
// its number taken by a new one, would be toggled in its place. So each process is held from the
// scan to the resume, and every driver call first asks whether it is still the process found.
// Host pids only: inside a gVisor sandbox the numbers are the sandbox's (no holds there).
#pragma once

#include <sys/types.h>

#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "common/unique_fd.h"

namespace nvproxy::checkpoint {

class ProcessHolds {
 public:
  virtual ~ProcessHolds() = default;
  // Holds every pid not yet held; a pid already gone is held as gone.
  virtual void hold(const std::vector<pid_t>& pids) = 0;
  // Empty: still the process that was held, or never held. Else one sentence: why not.
  virtual std::string gone(pid_t pid) = 0;
};

// A pidfd per process (pidfd_open, Linux >= 5.3): it becomes readable when that very process
// exits, whatever gets its number afterwards. Without pidfd_open, the process's start time
// (PROC/PID/stat field 22) is compared instead.
class PidfdHolds final : public ProcessHolds {
 public:
  explicit PidfdHolds(std::string proc_root = "/proc") : proc_(std::move(proc_root)) {}
  void hold(const std::vector<pid_t>& pids) override;
  std::string gone(pid_t pid) override;

 private:
  struct Held {
    UniqueFd pidfd;
    unsigned long long start = 0;  // clock ticks after boot; 0: the process was gone when held
  };
  std::string proc_;
  std::mutex mu_;
  std::map<pid_t, Held> held_;
};

// Field 22 of PROC/PID/stat (after the parenthesised comm, which may hold spaces); 0 when gone.
unsigned long long process_start_time(pid_t pid, const std::string& proc_root = "/proc");

}  // namespace nvproxy::checkpoint
