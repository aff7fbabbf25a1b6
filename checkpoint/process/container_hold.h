// Holding a container still from the CUDA lock to the resume (the orchestrator's tool). While any
// of its processes is CUDA-checkpointed, none of its threads may run, but for a CUDA process's
// restore thread during the driver's own calls: a thread that touches device memory then (JAX's)
// kills its process. Two holds, one after the other: ptrace stops around the CUDA calls (the driver
// can be let in), the runtime's freeze around the runtime's snapshot (which must seize the
// processes itself). Implemented by nvproxy-cuda-helper's client (cuda_helper_client.h).
#pragma once

#include <sys/types.h>

#include <vector>

namespace nvproxy::checkpoint {

class ContainerHold {
 public:
  virtual ~ContainerHold() = default;
  // Stops every thread of each pid not held yet; returns the pids that had ended. Throws Error.
  virtual std::vector<pid_t> hold(const std::vector<pid_t>& pids) = 0;
  // The same for a frozen container: its threads stop once thawed; settle() then waits for them.
  virtual std::vector<pid_t> hold_frozen(const std::vector<pid_t>& pids) = 0;
  virtual void settle() = 0;
  // The same for processes a restore left stopped (SIGSTOP): held, then continued (SIGCONT) into
  // the hold. Whatever fails, none is left stopped.
  virtual std::vector<pid_t> hold_stopped(const std::vector<pid_t>& pids) = 0;
  // Lets every held thread go.
  virtual void release() = 0;
  // Lets these processes' threads go; the rest stay held.
  virtual void release(const std::vector<pid_t>& pids) = 0;
  // The runtime's pause and resume of the whole container (runc pause/resume).
  virtual void freeze() = 0;
  virtual void thaw() = 0;
};

}  // namespace nvproxy::checkpoint
