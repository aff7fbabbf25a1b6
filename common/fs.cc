#include "common/fs.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/error.h"
#include "common/unique_fd.h"

namespace nvproxy {

std::string_view file_kind(unsigned mode) {
  switch (mode & S_IFMT) {
    case S_IFREG: return "a regular file";
    case S_IFDIR: return "a directory";
    case S_IFIFO: return "a FIFO";
    case S_IFCHR: return "a character device";
    case S_IFBLK: return "a block device";
    case S_IFSOCK: return "a socket";
    case S_IFLNK: return "a symbolic link";
    default: return "not a regular file";
  }
}

std::string read_file(const std::filesystem::path& p, std::size_t max_bytes) {
  // O_NONBLOCK: opening a FIFO without a writer would block forever; fstat below refuses it anyway.
  UniqueFd fd(::open(p.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY));
  if (!fd) throw sys_error("open " + p.string());
  struct stat st {};
  if (::fstat(fd.get(), &st) < 0) throw sys_error("stat " + p.string());
  if (!S_ISREG(st.st_mode))
    throw Error(Code::InvalidArgument,
                "read " + p.string() + ": is " + std::string(file_kind(st.st_mode)) + ", not a regular file");
  auto too_large = [&](std::uint64_t size, bool at_least) {
    return Error(Code::InvalidArgument, "read " + p.string() + ": " + (at_least ? "more than " : "") + std::to_string(size) +
                                            " bytes exceeds the bound of " + std::to_string(max_bytes) + " bytes");
  };
  if (static_cast<std::uint64_t>(st.st_size) > max_bytes) throw too_large(static_cast<std::uint64_t>(st.st_size), false);
  std::string out;
  out.reserve(static_cast<std::size_t>(st.st_size));
  char buf[65536];
  while (true) {  // to the end, not st_size: /proc and /sys files say 0 or 4096 whatever they hold
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw sys_error("read " + p.string());
    }
    if (n == 0) break;
    if (out.size() + static_cast<std::size_t>(n) > max_bytes) throw too_large(max_bytes, true);
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

UniqueFd open_devnull(int flags) {
  UniqueFd fd(::open("/dev/null", flags | O_CLOEXEC));
  if (!fd) throw sys_error("open /dev/null");
  return fd;
}

void make_pipe(UniqueFd& read_end, UniqueFd& write_end, const std::string& what) {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) < 0) throw sys_error("pipe2 for " + what);
  read_end.reset(p[0]);
  write_end.reset(p[1]);
}

bool write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

bool write_all_at(int fd, std::string_view data, std::uint64_t offset) {
  while (!data.empty()) {
    ssize_t n = ::pwrite(fd, data.data(), data.size(), static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data.remove_prefix(static_cast<size_t>(n));
    offset += static_cast<std::uint64_t>(n);
  }
  return true;
}

long read_at(int fd, char* buf, std::size_t n, std::uint64_t offset) {
  for (;;) {
    ssize_t got = ::pread(fd, buf, n, static_cast<off_t>(offset));
    if (got >= 0 || errno != EINTR) return static_cast<long>(got);
  }
}

long read_full_at(int fd, char* buf, std::size_t n, std::uint64_t offset) {
  std::size_t got = 0;
  while (got < n) {
    const long r = read_at(fd, buf + got, n - got, offset + got);
    if (r < 0) return -1;
    if (r == 0) break;
    got += static_cast<std::size_t>(r);
  }
  return static_cast<long>(got);
}

void write_existing_file(const std::filesystem::path& p, std::string_view data) {
  UniqueFd fd(::open(p.c_str(), O_WRONLY | O_CLOEXEC));
  if (!fd) throw sys_error("open " + p.string());
  if (!write_all(fd.get(), data)) throw sys_error("write " + p.string());
}

void write_file_atomic(const std::filesystem::path& p, std::string_view data, unsigned mode) {
  std::filesystem::path tmp = p;
  tmp += ".tmp." + std::to_string(::getpid());
  {
    UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode));
    if (!fd) throw sys_error("create " + tmp.string());
    if (!write_all(fd.get(), data)) {
      int e = errno;
      ::unlink(tmp.c_str());
      throw sys_error("write " + tmp.string(), e);
    }
    ::fchmod(fd.get(), mode);
  }
  if (::rename(tmp.c_str(), p.c_str()) < 0) {
    int e = errno;
    ::unlink(tmp.c_str());
    throw sys_error("rename to " + p.string(), e);
  }
}

bool path_within(const std::filesystem::path& root, const std::filesystem::path& p) {
  auto r = root.lexically_normal();
  auto q = p.lexically_normal();
  auto rit = r.begin();
  auto qit = q.begin();
  for (; rit != r.end(); ++rit, ++qit) {
    if (rit->empty()) continue;  // trailing slash
    if (qit == q.end() || *rit != *qit) return false;
  }
  return true;
}

std::filesystem::path join_within(const std::filesystem::path& root, const std::filesystem::path& rel) {
  std::filesystem::path r = rel.is_absolute() ? rel.relative_path() : rel;
  std::filesystem::path full = (root / r).lexically_normal();
  if (!path_within(root, full)) throw Error(Code::InvalidArgument, "path \"" + rel.string() + "\" escapes " + root.string());
  return full;
}

}  // namespace nvproxy
