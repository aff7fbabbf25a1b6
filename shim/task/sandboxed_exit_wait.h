// The end of a gVisor pod container's own process, heard through `runsc wait ID`.
//
// A container of a runsc pod has no process of the shim's: its processes live in the pod's
// sandbox, whose process the pod's sandbox container reports. runc's containers end through the
// shim's reaper; these end only where runsc says so. Without this a container that exits by
// itself (an init container, a job) stays running for containerd, and a kubelet never starts the
// containers after an init container. runsc wait answers once with the container's exit
// ({"id": ..., "exitStatus": N}, N as containerd counts: 128+signal when killed).
//
// The wait lasts as long as the container: the destructor (the container's delete, or the shim's
// end) kills `runsc wait` and joins, and nothing is reported then.
#pragma once

#include <sys/types.h>

#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/log.h"
#include "common/process.h"

namespace nvproxy::shim {

// containerd's exit code from runsc wait's answer; nullopt for one it cannot read.
std::optional<int> runsc_wait_exit_code(const std::string& answer);

class SandboxedExitWait {
 public:
  // Starts `argv` (runsc's global flags, then wait ID) and calls `ended` with containerd's exit
  // code, on its own thread, once runsc answers. An answer it cannot read, or a runsc that failed,
  // is logged and not reported (the kill path's check of runsc's state still ends the container).
  SandboxedExitWait(ProcessRunner& runner, Logger& log, std::string id, std::vector<std::string> argv,
                    std::function<void(int exit_code)> ended);
  SandboxedExitWait(const SandboxedExitWait&) = delete;
  SandboxedExitWait& operator=(const SandboxedExitWait&) = delete;
  ~SandboxedExitWait();

  // Whether runsc wait still runs (false once it ended and its answer was taken, or not).
  [[nodiscard]] bool waiting();

 private:
  void wait(int out);

  ProcessRunner& runner_;
  Logger& log_;
  const std::string id_;
  std::function<void(int)> ended_;
  std::mutex mu_;
  pid_t pid_ = 0;          // runsc wait (its group's leader), guarded by mu_
  bool stopping_ = false;  // the destructor runs: nothing is reported any more
  bool done_ = false;      // the wait's thread has nothing more to do
  std::thread thread_;
};

}  // namespace nvproxy::shim
