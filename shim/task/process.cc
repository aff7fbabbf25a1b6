#include "shim/task/process.h"

namespace nvproxy::shim {

pid_t Process::pid() const {
  std::lock_guard lk(mu_);
  return pid_;
}

void Process::set_pid(pid_t pid) {
  std::lock_guard lk(mu_);
  pid_ = pid;
}

std::optional<ExitInfo> Process::exit() const {
  std::lock_guard lk(mu_);
  return exit_;
}

void Process::set_exit(ExitInfo e) {
  {
    std::lock_guard lk(mu_);
    if (exit_) return;
    exit_ = e;
  }
  cv_.notify_all();
}

ExitInfo Process::wait() const {
  std::unique_lock lk(mu_);
  ++waiters_;
  cv_.wait(lk, [&] { return exit_.has_value(); });
  --waiters_;
  return *exit_;
}

int Process::waiters() const {
  std::lock_guard lk(mu_);
  return waiters_;
}

void Process::close_stdin() {
  if (io_) io_->close_stdin();
  if (console_) console_->close_stdin();
}

void Process::resize(unsigned width, unsigned height) {
  // Without a terminal there is nothing to resize; containerd's runc shim answers OK too.
  if (console_) console_->resize(width, height);
}

void Process::finish_io(std::chrono::milliseconds timeout) {
  if (io_) io_->wait_output(timeout);
  if (console_) console_->wait_output(timeout);
}

}  // namespace nvproxy::shim
