#include <fstream>
#include <optional>
#include <vector>

#include "cgroup/files.h"
#include "cgroup/paths.h"
#include "checkpoint/staging/memory_limits.h"
#include "common/error.h"
#include "common/fs.h"
#include "common/number.h"
#include "common/text.h"

namespace nvproxy::checkpoint {

namespace fs = std::filesystem;

namespace {

std::uint64_t read_number(const fs::path& p) {
  std::string t = read_file(p);
  if (auto v = parse_number<std::uint64_t>(trim(t))) return *v;
  throw Error(Code::Internal, "unexpected content " + quote_value(t) + " in " + p.string());
}

// A value of a "KEY VALUE" file (memory.stat, memory.events, memory.oom_control, /proc/vmstat);
// 0 when the key or the file is missing.
std::uint64_t kv_value(const fs::path& file, const std::string& key) {
  auto kv = cgroup::read_cgroup_kv(file);
  auto it = kv.find(key);
  return it == kv.end() ? 0 : it->second;
}

// What is charged to a cgroup now, and how much of it is inactive page cache (on v1 the
// hierarchy's, as the limit is: use_hierarchy).
struct Charge {
  std::uint64_t usage = 0, reclaimable = 0;
};
Charge charge_of(const fs::path& dir, bool unified) {
  return {.usage = read_number(dir / (unified ? "memory.current" : "memory.usage_in_bytes")),
          .reclaimable = kv_value(dir / "memory.stat", unified ? "inactive_file" : "total_inactive_file")};
}

}  // namespace

bool HostMemoryProbe::v2() const {
  return fs::exists(cgroup_root_ / "cgroup.controllers");
}

std::pair<fs::path, fs::path> HostMemoryProbe::dir_of(pid_t pid, bool unified) {
  auto paths = cgroup::cgroup_paths_of(pid, proc_root_);
  if (!paths) throw Error(Code::NotFound, "pid " + std::to_string(pid) + " is gone: its memory cgroup cannot be read");
  if (unified) {
    if (!paths->unified) throw Error(Code::NotFound, "pid " + std::to_string(pid) + " is in no cgroup v2");
    return {join_within(cgroup_root_, fs::path(*paths->unified).relative_path()), cgroup_root_};
  }
  auto d = cgroup::v1_cgroup_dir(*paths, "memory", cgroup_root_);
  if (!d) throw Error(Code::NotFound, "pid " + std::to_string(pid) + " is in no memory cgroup");
  fs::path top = cgroup_root_ / "memory";
  if (!path_within(top, *d)) top = d->parent_path();  // a co-mounted hierarchy: its own top
  return {*d, top};
}

std::vector<MemoryLimit> HostMemoryProbe::limits_of(pid_t pid) {
  bool unified = v2();
  auto [dir, top] = dir_of(pid, unified);
  return limits_from(dir, top, unified);
}

fs::path HostMemoryProbe::memory_cgroup(pid_t pid) {
  try {
    return dir_of(pid, v2()).first;
  } catch (const std::exception&) {
    return {};
  }
}

std::vector<MemoryLimit> HostMemoryProbe::limits_from(const fs::path& dir, const fs::path& top, bool unified) {
  std::vector<MemoryLimit> out;
  for (fs::path d = dir; path_within(top, d) && d != top; d = d.parent_path()) {
    std::error_code ec;
    if (!fs::is_directory(d, ec)) continue;  // the cgroup a restore is about to create
    std::optional<Charge> charge;            // read once per cgroup, for its first limit
    for (const char* file :
         unified ? std::vector<const char*>{"memory.max", "memory.high"} : std::vector<const char*>{"memory.limit_in_bytes"}) {
      if (!fs::exists(d / file)) continue;
      std::uint64_t limit = parse_limit(read_file(d / file), (d / file).string());
      if (limit == kNoLimit) continue;
      if (!charge) charge = charge_of(d, unified);
      MemoryLimit m{.cgroup = d, .file = file, .limit = limit, .usage = charge->usage, .reclaimable = charge->reclaimable};
      if (!unified && fs::exists(d / "memory.memsw.limit_in_bytes")) {
        m.swap_file = "memory.memsw.limit_in_bytes";
        m.swap_limit = parse_limit(read_file(d / m.swap_file), (d / m.swap_file).string());
      }
      out.push_back(std::move(m));
    }
  }
  return out;
}

std::vector<MemoryLimit> HostMemoryProbe::limits_above(const std::string& cgroups_path, fs::path& dir, std::string& file) {
  bool unified = v2();
  fs::path top = unified ? cgroup_root_ : cgroup_root_ / "memory";
  dir = join_within(top, cgroup_relative_path(cgroups_path).relative_path());
  file = unified ? "memory.max" : "memory.limit_in_bytes";
  return limits_from(dir, top, unified);
}

std::uint64_t HostMemoryProbe::host_available() {
  std::ifstream in(meminfo_);
  if (!in) throw Error(Code::Internal, "cannot read " + meminfo_.string());
  for (std::string key; in >> key;) {
    std::uint64_t kb = 0;
    in >> kb;
    if (key == "MemAvailable:") return kb * 1024;
    in.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
  }
  throw Error(Code::Internal, "no MemAvailable in " + meminfo_.string());
}

std::uint64_t HostMemoryProbe::used(const fs::path& cgroup) {
  std::error_code ec;
  if (!fs::is_directory(cgroup, ec)) throw Error(Code::NotFound, "cgroup " + cgroup.string() + " is gone");
  Charge c = charge_of(cgroup, v2());
  return c.usage > c.reclaimable ? c.usage - c.reclaimable : 0;
}

void HostMemoryProbe::write_limit(const fs::path& file, std::uint64_t value) {
  if (!fs::exists(file)) throw Error(Code::NotFound, file.string() + " is gone (the cgroup was removed)");
  write_existing_file(file, value == kNoLimit ? (v2() ? "max" : "-1") : std::to_string(value));
}

std::uint64_t HostMemoryProbe::oom_kills(const fs::path& cgroup) {
  std::error_code ec;
  if (!fs::is_directory(cgroup, ec)) throw Error(Code::NotFound, "memory cgroup " + cgroup.string() + " is gone");
  for (const char* f : {"memory.events", "memory.oom_control"})
    if (fs::exists(cgroup / f, ec)) return kv_value(cgroup / f, "oom_kill");
  return 0;
}

std::uint64_t HostMemoryProbe::host_oom_kills() {
  return kv_value(proc_root_ / "vmstat", "oom_kill");
}

}  // namespace nvproxy::checkpoint
