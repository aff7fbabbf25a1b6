#include "hooks/rootfs_ops.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <vector>

#include "common/error.h"

namespace nvproxy::hooks {

namespace fs = std::filesystem;

RootDir::RootDir(const std::string& rootfs) : path_(rootfs), fd_(::open(rootfs.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC)) {
  if (!fd_) throw sys_error("open rootfs " + rootfs);
}

UniqueFd RootDir::open_in_root(const std::string& p, int flags, mode_t mode) const {
  std::string rel = fs::path(p).relative_path().string();
  if (rel.empty()) rel = ".";
  struct open_how how {};
  how.flags = static_cast<uint64_t>(flags | O_CLOEXEC);
  how.mode = (flags & O_CREAT) ? mode : 0;
  how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
  long fd = ::syscall(SYS_openat2, fd_.get(), rel.c_str(), &how, sizeof how);
  return UniqueFd(static_cast<int>(fd));
}

std::optional<struct stat> RootDir::stat(const std::string& p) const {
  UniqueFd fd = open_in_root(p, O_PATH);
  if (!fd) return std::nullopt;
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return std::nullopt;
  return st;
}

void RootDir::mkdirs(const std::string& dir, mode_t mode) const {
  fs::path cur = "/";
  for (const auto& c : fs::path(dir).relative_path()) {
    UniqueFd parent = open_in_root(cur.string(), O_PATH | O_DIRECTORY);
    if (!parent) throw sys_error("open " + cur.string() + " in rootfs " + path_);
    if (::mkdirat(parent.get(), c.c_str(), mode) != 0 && errno != EEXIST)
      throw sys_error("mkdir " + (cur / c).string() + " in rootfs " + path_);
    cur /= c;
  }
}

bool RootDir::symlink(const std::string& p, const std::string& target) const {
  fs::path link(p);
  mkdirs(link.parent_path().string());
  UniqueFd parent = open_in_root(link.parent_path().string(), O_PATH | O_DIRECTORY);
  if (!parent) throw sys_error("open " + link.parent_path().string() + " in rootfs " + path_);
  std::vector<char> buf(4096);
  ssize_t n = ::readlinkat(parent.get(), link.filename().c_str(), buf.data(), buf.size());
  if (n >= 0) return std::string(buf.data(), static_cast<size_t>(n)) == target;
  if (errno != ENOENT && errno != EINVAL) throw sys_error("readlink " + p + " in rootfs " + path_);
  if (errno == EINVAL) return false;  // exists and is not a link: the image's own file wins
  if (::symlinkat(target.c_str(), parent.get(), link.filename().c_str()) != 0) {
    if (errno == EEXIST) return false;
    throw sys_error("symlink " + p + " in rootfs " + path_);
  }
  return true;
}

void RootDir::write_file(const std::string& p, const std::string& data, mode_t mode) const {
  // The image decides what is at `p`: never block on its FIFO, never write into its device node.
  UniqueFd fd = open_in_root(p, O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY, mode);
  if (!fd) throw sys_error("create " + p + " in rootfs " + path_);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) throw sys_error("stat " + p + " in rootfs " + path_);
  if (!S_ISREG(st.st_mode)) throw Error(Code::FailedPrecondition, p + " in rootfs " + path_ + " is not a regular file");
  if (::ftruncate(fd.get(), 0) != 0) throw sys_error("truncate " + p + " in rootfs " + path_);
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::write(fd.get(), data.data() + off, data.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw sys_error("write " + p + " in rootfs " + path_);
    off += static_cast<size_t>(n);
  }
}

}  // namespace nvproxy::hooks
