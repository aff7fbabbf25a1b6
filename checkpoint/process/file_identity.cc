#include "checkpoint/process/file_identity.h"

#include <linux/kcmp.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace nvproxy::checkpoint {

bool KcmpFileIdentity::same_file(pid_t pid_a, int fd_a, pid_t pid_b, int fd_b) {
  // 0: equal; 1 or 2: an order between different files; -1: an error (gone, EPERM, EBADF).
  long r = ::syscall(SYS_kcmp, pid_a, pid_b, KCMP_FILE, static_cast<unsigned long>(fd_a), static_cast<unsigned long>(fd_b));
  if (r < 0) {
    int err = errno;
    std::lock_guard lk(mu_);
    errors_[{pid_a, pid_b}] = "kcmp(" + std::to_string(pid_a) + " fd " + std::to_string(fd_a) + ", " + std::to_string(pid_b) +
                              " fd " + std::to_string(fd_b) + "): " + std::strerror(err);
  }
  return r == 0;
}

std::string KcmpFileIdentity::unknown_because(pid_t pid_a, pid_t pid_b) {
  std::lock_guard lk(mu_);
  auto it = errors_.find({pid_a, pid_b});
  return it == errors_.end() ? std::string() : it->second;
}

}  // namespace nvproxy::checkpoint
