// File operations inside a container rootfs that cannot be steered outside it by the image's own
// symlinks (openat2 RESOLVE_IN_ROOT): the hook runs as root on an untrusted rootfs.
#pragma once

#include <sys/stat.h>

#include <optional>
#include <string>

#include "common/unique_fd.h"

namespace nvproxy::hooks {

class RootDir {
 public:
  explicit RootDir(const std::string& rootfs);  // throws Error naming rootfs
  [[nodiscard]] const std::string& path() const { return path_; }

  // stat(2) of `p` (absolute, in the container), following links inside the root; nullopt if absent.
  [[nodiscard]] std::optional<struct stat> stat(const std::string& p) const;
  // mkdir -p inside the root.
  void mkdirs(const std::string& dir, mode_t mode = 0755) const;
  // Creates link `p` -> `target`. Returns false (and leaves it alone) when `p` exists as something
  // other than that very link; true when the link is there afterwards.
  bool symlink(const std::string& p, const std::string& target) const;
  // Replaces the content of regular file `p` (never follows a final symlink).
  void write_file(const std::string& p, const std::string& data, mode_t mode = 0644) const;

 private:
  UniqueFd open_in_root(const std::string& p, int flags, mode_t mode = 0) const;  // -1 + errno on failure
  std::string path_;
  UniqueFd fd_;
};

}  // namespace nvproxy::hooks
