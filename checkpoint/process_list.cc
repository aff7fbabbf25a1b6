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

std::vector<pid_t> parse_pid_array_json(const std::string& text, const std::string& what) {
  try {
    auto j = nlohmann::json::parse(text);
    if (j.is_null()) return {};
    if (!j.is_array()) throw Error(Code::Internal, what + ": expected a JSON array of pids, got: " + text.substr(0, 200));
    std::vector<pid_t> pids;
    for (const auto& e : j) {
      if (!e.is_number_integer() || e.get<long>() <= 0) throw Error(Code::Internal, what + ": not a pid: " + e.dump());
      pids.push_back(static_cast<pid_t>(e.get<long>()));
    }
    return sorted_unique(std::move(pids));
  } catch (const nlohmann::json::exception& e) {
    throw Error(Code::Internal, what + ": invalid JSON (" + e.what() + "): " + text.substr(0, 200));
  }
}

std::vector<pid_t> RuntimePsLister::list() {
  std::vector<std::string> argv{runtime_};
  if (!root_.empty()) argv.insert(argv.end(), {"--root", root_});
  argv.insert(argv.end(), {"ps", "--format", "json", id_});
  // Bounded like every runtime call: a hung runtime fails the question, it does not hang the shim.
  RunResult r = runner_.run({.argv = argv, .timeout = std::chrono::seconds(30)});
  std::string what = runtime_ + " ps of container \"" + id_ + "\"";
  if (!r.ok()) throw Error(Code::FailedPrecondition, what + " failed: " + r.describe());
  return parse_pid_array_json(r.out, what);
}

pid_t runtime_init_pid(ProcessRunner& runner, const std::string& runtime, const std::string& root, const std::string& id) {
  std::vector<std::string> argv{runtime};
  if (!root.empty()) argv.insert(argv.end(), {"--root", root});
  argv.insert(argv.end(), {"state", id});
  RunResult r = runner.run({.argv = argv, .timeout = std::chrono::seconds(30)});
  std::string what = runtime + " state of container \"" + id + "\"";
  if (!r.ok()) throw Error(Code::FailedPrecondition, what + " failed: " + r.describe());
  auto j = nlohmann::json::parse(r.out, nullptr, false);
  if (!j.is_object() || !j.contains("pid") || !j["pid"].is_number_integer())
    throw Error(Code::Internal, what + ": no pid in " + r.out.substr(0, 200));
  return j["pid"].get<pid_t>();
}

}  // namespace nvproxy::checkpoint
