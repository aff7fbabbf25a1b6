// The statistics of a cgroup v2 container, as containerd's cgroups library reads them (the v2
// manager's Stat).

#include <algorithm>
#include <limits>
#include <map>
#include <set>
#include <vector>

#include "common/error.h"
#include "oci/cgroup_metrics_parts.h"

namespace nvproxy::oci {

namespace fs = std::filesystem;
namespace cg2 = io::containerd::cgroups::v2;

namespace {

using namespace ::nvproxy::cgroup;

// A v2 "KEY VALUE" file: numbers, and the words ("max") apart.
struct V2Values {
  std::map<std::string, uint64_t> num;
  std::set<std::string> max;
  [[nodiscard]] uint64_t get(const std::string& k) const {
    auto it = num.find(k);
    return it == num.end() ? 0 : it->second;
  }
};

void v2_put(V2Values& out, const std::string& k, const std::string& v) {
  out.num.erase(k);
  out.max.erase(k);
  if (auto n = cgroup_u64(v))
    out.num[k] = *n;
  else if (v == "max")
    out.max.insert(k);
}

bool v2_read_kv(const fs::path& p, V2Values& out) {
  return read_kv_lines(p, [&](const std::string& k, const std::string& v) { v2_put(out, k, v); });
}

uint64_t v2_single(const fs::path& p) {
  auto text = read_if_exists(p);
  if (!text) return 0;
  auto s = trim(*text);
  if (s == "max") return std::numeric_limits<uint64_t>::max();
  return cgroup_u64(s).value_or(0);
}

void v2_io(const fs::path& d, cg2::IOStat& io) {
  auto text = read_if_exists(d / "io.stat");
  if (!text) return;
  for (const auto& l : split(*text, '\n')) {
    auto parts = split(l, ' ');
    if (parts.size() < 2) continue;
    auto colon = parts[0].find(':');
    if (colon == std::string::npos || parts[0].find(':', colon + 1) != std::string::npos) continue;
    auto major = strict_u64(parts[0].substr(0, colon)), minor = strict_u64(parts[0].substr(colon + 1));
    if (!major || !minor) return;
    auto* e = io.add_usage();
    e->set_major(*major);
    e->set_minor(*minor);
    for (size_t i = 1; i < parts.size(); ++i) {
      auto eq = parts[i].find('=');
      if (eq == std::string::npos || parts[i].find('=', eq + 1) != std::string::npos) continue;
      auto k = parts[i].substr(0, eq);
      auto v = strict_u64(parts[i].substr(eq + 1));
      if (!v) continue;
      if (k == "rbytes") e->set_rbytes(*v);
      if (k == "wbytes") e->set_wbytes(*v);
      if (k == "rios") e->set_rios(*v);
      if (k == "wios") e->set_wios(*v);
    }
  }
}

void v2_hugetlb(const fs::path& d, cg2::Metrics& m) {
  std::map<std::string, cg2::HugeTlbStat> by_size;
  std::error_code ec;
  for (const auto& ent : fs::directory_iterator(d, ec)) {
    auto name = ent.path().filename().string();
    if (name.find("hugetlb") == std::string::npos || !(name.ends_with("max") || name.ends_with("current"))) continue;
    auto dot = split(name, '.');
    if (dot.size() < 3) continue;
    auto text = read_if_exists(d / name);
    if (!text) continue;
    auto s = trim(*text);
    std::optional<uint64_t> v = s == "max" ? std::numeric_limits<uint64_t>::max() : strict_u64(s);
    if (!v) continue;
    auto& h = by_size[dot[1]];
    h.set_pagesize(dot[1]);
    if (dot[2] == "max") h.set_max(*v);
    if (dot[2] == "current") h.set_current(*v);
  }
  for (auto& [size, h] : by_size) *m.add_hugetlb() = std::move(h);
}

}  // namespace

cg2::Metrics v2_metrics(const cgroup::CgroupPaths& paths, const CgroupHost& host) {
  if (!paths.unified) throw Error(Code::NotFound, "the container's process is in no cgroup v2 group");
  fs::path d = host.cgroup_root / fs::path(*paths.unified).relative_path();
  auto controllers = read_if_exists(d / "cgroup.controllers");
  if (!controllers) throw Error(Code::Unknown, "open " + (d / "cgroup.controllers").string() + ": no such file or directory");
  V2Values out;
  for (const auto& c : fields(*controllers))
    if (c == "cpu" || c == "memory") v2_read_kv(d / (c + ".stat"), out);
  for (const char* name : {"pids.current", "pids.max"}) {
    auto text = read_if_exists(d / name);
    if (text) v2_put(out, name, trim(*text));
  }
  V2Values events;
  v2_read_kv(d / "memory.events", events);
  cg2::Metrics m;
  auto pid_value = [&](const char* k) { return out.max.count(k) ? std::numeric_limits<uint64_t>::max() : out.get(k); };
  m.mutable_pids()->set_current(pid_value("pids.current"));
  m.mutable_pids()->set_limit(pid_value("pids.max"));
  auto* cpu = m.mutable_cpu();
  cpu->set_usage_usec(out.get("usage_usec"));
  cpu->set_user_usec(out.get("user_usec"));
  cpu->set_system_usec(out.get("system_usec"));
  cpu->set_nr_periods(out.get("nr_periods"));
  cpu->set_nr_throttled(out.get("nr_throttled"));
  cpu->set_throttled_usec(out.get("throttled_usec"));
  auto* mem = m.mutable_memory();
  mem->set_anon(out.get("anon"));
  mem->set_file(out.get("file"));
  mem->set_kernel_stack(out.get("kernel_stack"));
  mem->set_slab(out.get("slab"));
  mem->set_sock(out.get("sock"));
  mem->set_shmem(out.get("shmem"));
  mem->set_file_mapped(out.get("file_mapped"));
  mem->set_file_dirty(out.get("file_dirty"));
  mem->set_file_writeback(out.get("file_writeback"));
  mem->set_anon_thp(out.get("anon_thp"));
  mem->set_inactive_anon(out.get("inactive_anon"));
  mem->set_active_anon(out.get("active_anon"));
  mem->set_inactive_file(out.get("inactive_file"));
  mem->set_active_file(out.get("active_file"));
  mem->set_unevictable(out.get("unevictable"));
  mem->set_slab_reclaimable(out.get("slab_reclaimable"));
  mem->set_slab_unreclaimable(out.get("slab_unreclaimable"));
  mem->set_pgfault(out.get("pgfault"));
  mem->set_pgmajfault(out.get("pgmajfault"));
  mem->set_workingset_refault(out.get("workingset_refault"));
  mem->set_workingset_activate(out.get("workingset_activate"));
  mem->set_workingset_nodereclaim(out.get("workingset_nodereclaim"));
  mem->set_pgrefill(out.get("pgrefill"));
  mem->set_pgscan(out.get("pgscan"));
  mem->set_pgsteal(out.get("pgsteal"));
  mem->set_pgactivate(out.get("pgactivate"));
  mem->set_pgdeactivate(out.get("pgdeactivate"));
  mem->set_pglazyfree(out.get("pglazyfree"));
  mem->set_pglazyfreed(out.get("pglazyfreed"));
  mem->set_thp_fault_alloc(out.get("thp_fault_alloc"));
  mem->set_thp_collapse_alloc(out.get("thp_collapse_alloc"));
  mem->set_usage(v2_single(d / "memory.current"));
  mem->set_usage_limit(v2_single(d / "memory.max"));
  mem->set_swap_usage(v2_single(d / "memory.swap.current"));
  mem->set_swap_limit(v2_single(d / "memory.swap.max"));
  if (!events.num.empty() || !events.max.empty()) {
    auto* e = m.mutable_memory_events();
    e->set_low(events.get("low"));
    e->set_high(events.get("high"));
    e->set_max(events.get("max"));
    e->set_oom(events.get("oom"));
    e->set_oom_kill(events.get("oom_kill"));
  }
  v2_io(d, *m.mutable_io());
  for (const auto& [file, entries] : {std::make_pair("rdma.current", m.mutable_rdma()->mutable_current()),
                                      std::make_pair("rdma.max", m.mutable_rdma()->mutable_limit())}) {
    if (auto text = read_if_exists(d / file)) rdma_entries(split(*text, '\n'), *entries);
  }
  v2_hugetlb(d, m);
  return m;
}

}  // namespace nvproxy::oci
