#include "checkpoint/process_list.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <system_error>

#include "common/error.h"
#include "common/fs.h"

namespace nvproxy::checkpoint {

namespace fs = std::filesystem;

namespace {
std::vector<pid_t> sorted_unique(std::vector<pid_t> v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

void read_procs(const fs::path& file, std::vector<pid_t>& out) {
  std::ifstream in(file);
  if (!in) return;  // a child cgroup removed while we walk it
  long pid;
  while (in >> pid)
    if (pid > 0) out.push_back(static_cast<pid_t>(pid));
}
}  // namespace

std::vector<pid_t> FunctionLister::list() {
  return sorted_unique(fn_());
}

std::vector<pid_t> cgroup_pids(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw Error(Code::NotFound, "cgroup " + dir.string() + " does not exist");
  std::vector<pid_t> pids;
  read_procs(dir / "cgroup.procs", pids);
  for (fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec), end; !ec && it != end;
       it.increment(ec)) {
    if (it->is_directory(ec)) read_procs(it->path() / "cgroup.procs", pids);
  }
  return sorted_unique(std::move(pids));
}

fs::path cgroup_of_pid(pid_t pid, const fs::path& proc_root, const fs::path& cgroup_root) {
  fs::path file = proc_root / std::to_string(pid) / "cgroup";
  std::string text = read_file(file);
  std::string unified, freezer;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    std::string line = text.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
    pos = nl == std::string::npos ? text.size() : nl + 1;
    // hierarchy-ID:controller-list:cgroup-path
    size_t c1 = line.find(':'), c2 = c1 == std::string::npos ? c1 : line.find(':', c1 + 1);
    if (c2 == std::string::npos) continue;
    std::string ctrls = line.substr(c1 + 1, c2 - c1 - 1), path = line.substr(c2 + 1);
    if (line.compare(0, c1, "0") == 0 && ctrls.empty())
      unified = path;
    else if (("," + ctrls + ",").find(",freezer,") != std::string::npos)
      freezer = path;
  }
  if (!freezer.empty()) return cgroup_root / "freezer" / fs::path(freezer).relative_path();
  if (!unified.empty()) return cgroup_root / fs::path(unified).relative_path();
  throw Error(Code::NotFound, "no cgroup v2 or freezer entry in " + file.string());
}

}  // namespace nvproxy::checkpoint
