#include "checkpoint/process/process_holds.h"

#include <poll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace nvproxy::checkpoint {

unsigned long long process_start_time(pid_t pid, const std::string& proc_root) {
  std::ifstream in(proc_root + "/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line)) return 0;
  auto close = line.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream rest(line.substr(close + 1));
  std::string field;
  // After ")" come field 3 (state) and on; the start time is field 22.
  for (int i = 3; i <= 22; ++i)
    if (!(rest >> field)) return 0;
  return std::strtoull(field.c_str(), nullptr, 10);
}

void PidfdHolds::hold(const std::vector<pid_t>& pids) {
  std::lock_guard lk(mu_);
  for (pid_t pid : pids) {
    if (held_.count(pid)) continue;
    Held h;
    // The start time first: a pidfd opened after the process's number was reused would hold the
    // wrong one, and the start time read before it shows that.
    h.start = process_start_time(pid, proc_);
    if (h.start != 0) h.pidfd = UniqueFd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
    if (h.pidfd && process_start_time(pid, proc_) != h.start) h.start = 0;  // replaced in between
    held_.emplace(pid, std::move(h));
  }
}

std::string PidfdHolds::gone(pid_t pid) {
  std::lock_guard lk(mu_);
  auto it = held_.find(pid);
  if (it == held_.end()) return "";
  const Held& h = it->second;
  const std::string ended = "pid " + std::to_string(pid) + " ended after the scan";
  if (h.start == 0) return ended + " (gone when it was held)";
  if (h.pidfd) {
    pollfd p{.fd = h.pidfd.get(), .events = POLLIN, .revents = 0};
    if (::poll(&p, 1, 0) > 0) return ended + "; its number may belong to another process now";
    return "";
  }
  if (process_start_time(pid, proc_) != h.start) return ended + "; its number belongs to another process now";
  return "";
}

}  // namespace nvproxy::checkpoint
