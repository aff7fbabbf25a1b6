#include "shim/kit/reaper.h"

#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <vector>

#include "common/error.h"

namespace nvproxy::shim {

void Reaper::block_sigchld() {
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, SIGCHLD);
  pthread_sigmask(SIG_BLOCK, &s, nullptr);
}

Reaper::Reaper(ExitFn on_exit) : on_exit_(std::move(on_exit)) {
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, SIGCHLD);
  sigfd_.reset(::signalfd(-1, &s, SFD_CLOEXEC | SFD_NONBLOCK));
  if (!sigfd_) throw sys_error("signalfd for SIGCHLD");
  stopfd_.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!stopfd_) throw sys_error("eventfd");
  thread_ = std::thread([this] { loop(); });
}

Reaper::~Reaper() {
  uint64_t one = 1;
  (void)::write(stopfd_.get(), &one, sizeof one);
  if (thread_.joinable()) thread_.join();
}

pid_t Reaper::spawn(const std::function<pid_t()>& fork_fn) {
  // Holding the lock across fork and registration means the reaper cannot mistake this child's
  // exit for a container process's: it blocks on the lock until the pid is registered.
  std::lock_guard lk(mu_);
  pid_t pid = fork_fn();
  ours_[pid] = std::nullopt;
  return pid;
}

int Reaper::wait(pid_t pid) {
  std::unique_lock lk(mu_);
  auto it = ours_.find(pid);
  if (it == ours_.end())
    throw Error(Code::Internal, "reaper: wait for pid " + std::to_string(pid) + " that was not spawned through it");
  cv_.wait(lk, [&] { return ours_[pid].has_value(); });
  int status = *ours_[pid];
  ours_.erase(pid);
  return status;
}

std::optional<int> Reaper::try_wait(pid_t pid) {
  std::lock_guard lk(mu_);
  auto it = ours_.find(pid);
  if (it == ours_.end() || !it->second) return std::nullopt;
  int status = *it->second;
  ours_.erase(it);
  return status;
}

void Reaper::reap_all() {
  std::vector<std::pair<pid_t, int>> others;
  {
    std::lock_guard lk(mu_);
    while (true) {
      int status = 0;
      pid_t pid = ::waitpid(-1, &status, WNOHANG);
      if (pid <= 0) break;
      auto it = ours_.find(pid);
      if (it != ours_.end())
        it->second = status;
      else
        others.emplace_back(pid, status);
    }
  }
  cv_.notify_all();
  for (auto [pid, status] : others) on_exit_(pid, status);
}

void Reaper::loop() {
  reap_all();  // children that exited before the signalfd existed
  pollfd fds[2] = {{sigfd_.get(), POLLIN, 0}, {stopfd_.get(), POLLIN, 0}};
  while (true) {
    int r = ::poll(fds, 2, -1);
    if (r < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[1].revents) return;
    if (fds[0].revents) {
      signalfd_siginfo si;
      while (::read(sigfd_.get(), &si, sizeof si) == sizeof si) {
      }
      reap_all();
    }
  }
}

}  // namespace nvproxy::shim
