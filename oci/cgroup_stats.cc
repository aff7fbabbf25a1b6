#include "oci/cgroup_stats.h"

#include <fstream>
#include <map>
#include <sstream>

#include "common/error.h"

namespace nvproxy::oci {

namespace {

std::optional<uint64_t> read_u64(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::string s;
  if (!(in >> s)) return std::nullopt;
  if (s == "max") return std::nullopt;
  try {
    return std::stoull(s);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::map<std::string, uint64_t> read_kv(const std::filesystem::path& p) {
  std::map<std::string, uint64_t> out;
  std::ifstream in(p);
  std::string k;
  uint64_t v;
  while (in >> k >> v) out[k] = v;
  return out;
}

void put(nlohmann::json& j, const char* key, std::optional<uint64_t> v) {
  if (v) j[key] = *v;
}

}  // namespace

nlohmann::json stats_from_cgroup(pid_t pid, const std::filesystem::path& proc_root, const std::filesystem::path& cgroup_root) {
  std::ifstream in(proc_root / std::to_string(pid) / "cgroup");
  if (!in) throw Error(Code::NotFound, "cgroup of pid " + std::to_string(pid) + ": no such process");
  std::map<std::string, std::string> paths;  // controller -> path; "" key for the unified hierarchy
  std::string line;
  while (std::getline(in, line)) {
    auto a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    std::string ctrls = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    if (ctrls.empty()) paths[""] = path;
    std::stringstream ss(ctrls);
    std::string c;
    while (std::getline(ss, c, ',')) paths[c] = path;
  }
  nlohmann::json d = nlohmann::json::object();
  bool v2 = std::filesystem::exists(cgroup_root / "cgroup.controllers");
  if (v2) {
    auto dir = cgroup_root / std::filesystem::path(paths[""]).relative_path();
    put(d["pids"], "current", read_u64(dir / "pids.current"));
    put(d["pids"], "limit", read_u64(dir / "pids.max"));
    put(d["memory"]["usage"], "usage", read_u64(dir / "memory.current"));
    put(d["memory"]["usage"], "limit", read_u64(dir / "memory.max"));
    auto st = read_kv(dir / "memory.stat");
    d["memory"]["raw"] = {{"anon", st["anon"]}, {"file", st["file"]}};
    auto cpu = read_kv(dir / "cpu.stat");
    d["cpu"]["usage"] = {
        {"total", cpu["usage_usec"] * 1000}, {"user", cpu["user_usec"] * 1000}, {"kernel", cpu["system_usec"] * 1000}};
    return d;
  }
  auto v1 = [&](const std::string& ctrl) { return cgroup_root / ctrl / std::filesystem::path(paths[ctrl]).relative_path(); };
  put(d["pids"], "current", read_u64(v1("pids") / "pids.current"));
  put(d["pids"], "limit", read_u64(v1("pids") / "pids.max"));
  auto mem = v1("memory");
  put(d["memory"]["usage"], "usage", read_u64(mem / "memory.usage_in_bytes"));
  put(d["memory"]["usage"], "limit", read_u64(mem / "memory.limit_in_bytes"));
  put(d["memory"]["usage"], "max", read_u64(mem / "memory.max_usage_in_bytes"));
  put(d["memory"]["usage"], "failcnt", read_u64(mem / "memory.failcnt"));
  auto st = read_kv(mem / "memory.stat");
  d["memory"]["cache"] = st["cache"];
  d["memory"]["raw"] = {{"rss", st["rss"]}, {"rss_huge", st["rss_huge"]}, {"mapped_file", st["mapped_file"]}};
  // cpuacct is mounted on its own on some hosts and co-mounted as "cpu,cpuacct" on others.
  auto acct = v1("cpuacct");
  if (!std::filesystem::exists(acct))
    acct = cgroup_root / "cpu,cpuacct" / std::filesystem::path(paths["cpuacct"]).relative_path();
  put(d["cpu"]["usage"], "total", read_u64(acct / "cpuacct.usage"));
  put(d["cpu"]["usage"], "user", read_u64(acct / "cpuacct.usage_user"));
  put(d["cpu"]["usage"], "kernel", read_u64(acct / "cpuacct.usage_sys"));
  return d;
}

}  // namespace nvproxy::oci
