#include "shim/kit/shim_cgroup.h"

#include "common/error.h"
#include "common/fs.h"

namespace nvproxy::shim {

void join_shim_cgroup(pid_t pid, const std::string& cgroup, const std::filesystem::path& root) {
  if (cgroup.empty() || cgroup.front() != '/')
    throw Error(Code::InvalidArgument, "shim_cgroup \"" + cgroup + "\" is not an absolute cgroup path");
  std::filesystem::path rel = std::filesystem::path(cgroup).relative_path();
  for (const auto& part : rel)
    if (part == "..") throw Error(Code::InvalidArgument, "shim_cgroup \"" + cgroup + "\" leaves the cgroup tree");
  auto join = [&](const std::filesystem::path& dir) {
    auto procs = dir / "cgroup.procs";
    try {
      write_existing_file(procs, std::to_string(pid));
    } catch (const Error& e) {
      throw Error(e.code(), "join shim_cgroup \"" + cgroup + "\": " + e.what());
    }
  };
  std::error_code ec;
  if (std::filesystem::exists(root / "cgroup.controllers", ec)) {
    if (!std::filesystem::is_directory(root / rel, ec))
      throw Error(Code::NotFound, "shim_cgroup \"" + cgroup + "\" does not exist under " + root.string());
    join(root / rel);
    return;
  }
  int joined = 0;
  for (const auto& h : std::filesystem::directory_iterator(root, ec)) {
    // v1 hierarchies are directories (named after their controllers); the co-mount symlinks
    // (cpu -> cpu,cpuacct) would join twice; "unified" is a hybrid host's v2 tree.
    if (h.is_symlink() || !h.is_directory() || !std::filesystem::exists(h.path() / "cgroup.procs", ec)) continue;
    if (!std::filesystem::is_directory(h.path() / rel, ec)) continue;
    join(h.path() / rel);
    ++joined;
  }
  if (joined == 0)
    throw Error(Code::NotFound, "shim_cgroup \"" + cgroup + "\" does not exist in any hierarchy under " + root.string());
}

}  // namespace nvproxy::shim
