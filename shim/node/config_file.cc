#include "shim/node/config_file.h"

#include <sys/stat.h>

#include <cerrno>
#include <system_error>

#include "common/error.h"
#include "common/fs.h"

namespace nvproxy::node {

namespace fs = std::filesystem;

std::optional<std::string> read_config_text(const fs::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return std::nullopt;
    throw sys_error(path.string());
  }
  return read_file(path, 4u << 20);
}

fs::path backup_path(const fs::path& path) {
  fs::path p = path.string() + ".nvproxy-orig";
  for (int n = 2; fs::exists(fs::symlink_status(p)); ++n) p = path.string() + ".nvproxy-orig." + std::to_string(n);
  return p;
}

fs::path replace_config(const fs::path& link, const std::string& text) {
  // A config that is a symbolic link (to a file a configuration manager keeps) is written through.
  const fs::path path = fs::is_symlink(link) ? fs::canonical(link) : link;
  struct stat st {};
  fs::path backup;
  unsigned mode = 0644;
  if (::stat(path.c_str(), &st) == 0) {
    mode = st.st_mode & 07777;
    backup = backup_path(path);
    write_file_atomic(backup, read_file(path, 4u << 20), mode);
  } else if (errno != ENOENT) {
    throw sys_error(path.string());
  } else {
    std::error_code ec;
    fs::create_directories(path.parent_path(), ec);
    if (ec) throw Error(Code::Internal, "cannot create " + path.parent_path().string() + ": " + ec.message());
  }
  write_file_atomic(path, text, mode);
  return backup;
}

}  // namespace nvproxy::node
