#include "checkpoint/helper/held_toggler.h"

namespace nvproxy::checkpoint {

CudaState HeldToggler::get_state(pid_t pid) {
  CudaState s = CudaState::Failed;
  hold_.with_restore_thread(pid, [&] { s = inner_.get_state(pid); });
  return s;
}

pid_t HeldToggler::restore_tid(pid_t pid) {
  {
    std::lock_guard lk(mu_);
    if (auto it = restore_tids_.find(pid); it != restore_tids_.end()) return it->second;
  }
  pid_t tid = restore_tid_of_(pid);
  std::lock_guard lk(mu_);
  restore_tids_[pid] = tid;
  return tid;
}

void HeldToggler::lock(pid_t pid, unsigned timeout_ms) {
  {
    std::lock_guard lk(mu_);
    restore_tids_.erase(pid);  // a pid seen before may be another process now
  }
  restore_tid(pid);
  hold_.with_restore_thread(pid, [&] { inner_.lock(pid, timeout_ms); });
}

void HeldToggler::checkpoint(pid_t pid) {
  hold_.with_restore_thread(pid, [&] { inner_.checkpoint(pid); });
}

void HeldToggler::restore(pid_t pid, const DeviceMap& map) {
  hold_.with_restore_thread(pid, [&] { inner_.restore(pid, map); });
}

void HeldToggler::unlock(pid_t pid) {
  hold_.with_restore_thread(pid, [&] { inner_.unlock(pid); });
}

}  // namespace nvproxy::checkpoint
