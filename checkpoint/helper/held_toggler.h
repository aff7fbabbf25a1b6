// The driver's calls on a process held still (thread_hold.h): each call that needs the process's
// restore thread lets that thread alone run for its length. nvproxy-cuda-helper answers the shim's
// toggles through this; a process that is not held is toggled as it is.
#pragma once

#include <functional>
#include <map>
#include <mutex>

#include "checkpoint/helper/thread_hold.h"
#include "checkpoint/shared/cuda_toggler.h"

namespace nvproxy::checkpoint {

class HeldToggler final : public CudaToggler {
 public:
  // restore_tid_of: the driver's restore thread of a pid (0: none, not a CUDA process).
  HeldToggler(CudaToggler& inner, ThreadHold& hold, std::function<pid_t(pid_t)> restore_tid_of)
      : inner_(inner), hold_(hold), restore_tid_of_(std::move(restore_tid_of)) {}
  std::string describe() override { return inner_.describe(); }
  CudaState get_state(pid_t pid) override;
  // The lock comes before the hold (it waits for the process's own CUDA work to drain, which needs
  // its threads). The restore thread is asked for first, while the process still runs.
  void lock(pid_t pid, unsigned timeout_ms) override;
  void checkpoint(pid_t pid) override;
  void restore(pid_t pid, const DeviceMap& map) override;
  void unlock(pid_t pid) override;
  // The restore thread as asked before the lock, else asked now; 0 when the driver names none.
  pid_t restore_tid(pid_t pid);

 private:
  CudaToggler& inner_;
  ThreadHold& hold_;
  std::function<pid_t(pid_t)> restore_tid_of_;
  std::mutex mu_;
  std::map<pid_t, pid_t> restore_tids_;
};

}  // namespace nvproxy::checkpoint
