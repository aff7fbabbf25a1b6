#include "checkpoint/file_identity.h"

#include <linux/kcmp.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace nvproxy::checkpoint {

bool KcmpFileIdentity::same_file(pid_t pid_a, int fd_a, pid_t pid_b, int fd_b) {
  // 0: equal; 1 or 2: an order between different files; -1: an error (gone, EPERM, EBADF).
  return ::syscall(SYS_kcmp, pid_a, pid_b, KCMP_FILE, static_cast<unsigned long>(fd_a), static_cast<unsigned long>(fd_b)) == 0;
}

}  // namespace nvproxy::checkpoint
