#include "cgroup/paths.h"

#include <fstream>
#include <sstream>

namespace nvproxy::cgroup {

CgroupPaths parse_proc_cgroup(std::string_view text) {
  CgroupPaths out;
  std::istringstream in{std::string(text)};
  std::string line;
  while (std::getline(in, line)) {
    auto a = line.find(':');
    auto b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    std::string id = line.substr(0, a), ctrls = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    if (ctrls.empty()) {
      if (id == "0") out.unified = path;
      continue;
    }
    std::stringstream ss(ctrls);
    std::string c;
    while (std::getline(ss, c, ','))
      if (!c.empty()) out.v1[c] = {ctrls, path};
  }
  return out;
}

std::optional<CgroupPaths> cgroup_paths_of(pid_t pid, const std::filesystem::path& proc_root) {
  std::ifstream in(proc_root / std::to_string(pid) / "cgroup");
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_proc_cgroup(ss.str());
}

std::optional<std::filesystem::path> v1_cgroup_dir(const CgroupPaths& paths, const std::string& controller,
                                                   const std::filesystem::path& cgroup_root) {
  auto it = paths.v1.find(controller);
  if (it == paths.v1.end()) return std::nullopt;
  auto rel = std::filesystem::path(it->second.path).relative_path();
  std::error_code ec;
  if (std::filesystem::exists(cgroup_root / controller, ec) || it->second.hierarchy == controller)
    return cgroup_root / controller / rel;
  return cgroup_root / it->second.hierarchy / rel;
}

}  // namespace nvproxy::cgroup
