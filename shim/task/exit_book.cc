#include "shim/task/exit_book.h"

namespace nvproxy::shim {

ExitBook::Starting::Starting(ExitBook& b) : b_(b) {
  std::lock_guard lk(b_.mu_);
  ++b_.starting_;
}

ExitBook::Starting::~Starting() {
  std::lock_guard lk(b_.mu_);
  // Once nothing is starting, a kept exit can belong to no one any more (an orphan's).
  if (--b_.starting_ == 0) b_.early_.clear();
}

std::optional<int> ExitBook::claim(pid_t pid, Target target) {
  std::lock_guard lk(mu_);
  if (auto it = early_.find(pid); it != early_.end()) {
    int status = it->second;
    early_.erase(it);
    return status;
  }
  targets_[pid] = std::move(target);
  return std::nullopt;
}

void ExitBook::forget(pid_t pid) {
  std::lock_guard lk(mu_);
  targets_.erase(pid);
}

void ExitBook::on_exit(pid_t pid, int wait_status) {
  Target t;
  {
    std::lock_guard lk(mu_);
    auto it = targets_.find(pid);
    if (it == targets_.end()) {
      if (starting_ > 0) early_[pid] = wait_status;
      return;
    }
    t = std::move(it->second);
    targets_.erase(it);
  }
  t(wait_status);
}

}  // namespace nvproxy::shim
