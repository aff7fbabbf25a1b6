// Whether two processes' fds share one open file description. fork copies descriptors, so a child
// that never opened a GPU device itself holds the very descriptions of its parent; a process that
// opened the device itself (nvidia-smi, a monitoring agent, a child that initialised CUDA) holds
// descriptions of its own. That tells the holders a CUDA toggle of the parent leaves behind by
// inheritance from the ones that use the device.
#pragma once

#include <sys/types.h>

#include <map>
#include <mutex>
#include <string>
#include <utility>

namespace nvproxy::checkpoint {

class FileIdentity {
 public:
  virtual ~FileIdentity() = default;
  // true: fd_a of pid_a and fd_b of pid_b are the same open file description. false when they are
  // not, or when it cannot be told (a process gone, no permission): then nothing counts as inherited.
  virtual bool same_file(pid_t pid_a, int fd_a, pid_t pid_b, int fd_b) = 0;
  // true: asking stops pid_a for a moment (ptrace), so it is not asked of CUDA processes.
  [[nodiscard]] virtual bool stops_processes() const { return false; }
  // Why a question about this pair could not be answered (empty: every one was), so that a
  // refusal built on a "false" names the cause instead of a guess.
  virtual std::string unknown_because(pid_t pid_a, pid_t pid_b) {
    (void)pid_a;
    (void)pid_b;
    return {};
  }
};

// kcmp(2) with KCMP_FILE (Linux >= 3.5, ptrace access to both processes: the shim runs as root).
class KcmpFileIdentity final : public FileIdentity {
 public:
  bool same_file(pid_t pid_a, int fd_a, pid_t pid_b, int fd_b) override;
  std::string unknown_because(pid_t pid_a, pid_t pid_b) override;

 private:
  std::mutex mu_;
  std::map<std::pair<pid_t, pid_t>, std::string> errors_;  // the last failed kcmp per pair
};

}  // namespace nvproxy::checkpoint
