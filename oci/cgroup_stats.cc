#include "oci/cgroup_stats.h"

#include <fstream>
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
  uint64_t v = 0;
  while (in >> k >> v) out[k] = v;
  return out;
}

void put(nlohmann::json& j, const char* key, std::optional<uint64_t> v) {
  if (v) j[key] = *v;
}

}  // namespace

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

nlohmann::json stats_from_cgroup(pid_t pid, const std::filesystem::path& proc_root, const std::filesystem::path& cgroup_root) {
  auto paths = cgroup_paths_of(pid, proc_root);
  if (!paths) throw Error(Code::NotFound, "cgroup of pid " + std::to_string(pid) + ": no such process");
  nlohmann::json d = nlohmann::json::object();
  if (std::filesystem::exists(cgroup_root / "cgroup.controllers")) {
    auto dir = cgroup_root / std::filesystem::path(paths->unified.value_or("/")).relative_path();
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
  auto v1 = [&](const std::string& ctrl) { return v1_cgroup_dir(*paths, ctrl, cgroup_root).value_or(cgroup_root / ctrl); };
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
  auto acct = v1("cpuacct");
  put(d["cpu"]["usage"], "total", read_u64(acct / "cpuacct.usage"));
  put(d["cpu"]["usage"], "user", read_u64(acct / "cpuacct.usage_user"));
  put(d["cpu"]["usage"], "kernel", read_u64(acct / "cpuacct.usage_sys"));
  return d;
}

}  // namespace nvproxy::oci
