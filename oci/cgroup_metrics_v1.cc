// The statistics of a cgroup v1 container, as containerd's cgroups library reads them (Stat with
// IgnoreNotExist).

#include <algorithm>
#include <limits>
#include <map>
#include <set>
#include <vector>

#include "common/error.h"
#include "oci/cgroup_metrics_parts.h"

namespace nvproxy::oci {

namespace fs = std::filesystem;
namespace cg1 = io::containerd::cgroups::v1;

namespace {

using namespace ::nvproxy::cgroup;

void v1_pids(const fs::path& d, cg1::Metrics& m) {
  uint64_t current = read_u64(d / "pids.current");
  std::string max = trim(read_or_missing(d / "pids.max"));
  uint64_t limit = max == "max" ? 0 : parse_u64(max, d / "pids.max");
  m.mutable_pids()->set_current(current);
  m.mutable_pids()->set_limit(limit);
}

void v1_cpu(const fs::path& d, cg1::Metrics& m) {
  auto* t = m.mutable_cpu()->mutable_throttling();
  for (const auto& [k, v] : read_kv(d / "cpu.stat")) {
    if (k == "nr_periods") t->set_periods(v);
    if (k == "nr_throttled") t->set_throttled_periods(v);
    if (k == "throttled_time") t->set_throttled_time(v);
  }
}

void v1_cpuacct(const fs::path& d, cg1::Metrics& m) {
  constexpr uint64_t kNsPerTick = 1'000'000'000 / 100;  // USER_HZ, as the cgroups library counts it
  auto stat_file = d / "cpuacct.stat";
  auto f = fields(read_or_missing(stat_file));
  if (f.size() != 4 || f[0] != "user" || f[2] != "system")
    throw Error(Code::Unknown, stat_file.string() + ": expected \"user N system N\"");
  auto strict = [&](const std::string& s, const fs::path& file) {
    auto v = strict_u64(s);
    if (!v) throw Error(Code::Unknown, file.string() + ": \"" + s + "\" is not a number");
    return *v;
  };
  uint64_t user = strict(f[1], stat_file) * kNsPerTick, kernel = strict(f[3], stat_file) * kNsPerTick;
  uint64_t total = read_u64(d / "cpuacct.usage");
  std::vector<uint64_t> per_cpu;
  for (const auto& v : fields(read_or_missing(d / "cpuacct.usage_percpu")))
    per_cpu.push_back(strict(v, d / "cpuacct.usage_percpu"));
  auto* u = m.mutable_cpu()->mutable_usage();
  u->set_total(total);
  u->set_user(user);
  u->set_kernel(kernel);
  u->clear_per_cpu();
  for (uint64_t v : per_cpu) u->add_per_cpu(v);
}

void v1_memory_stat(const std::map<std::string, uint64_t>& raw, cg1::MemoryStat& s) {
  auto get = [&](const char* k) {
    auto it = raw.find(k);
    return it == raw.end() ? 0 : it->second;
  };
  s.set_cache(get("cache"));
  s.set_rss(get("rss"));
  s.set_rss_huge(get("rss_huge"));
  s.set_mapped_file(get("mapped_file"));
  s.set_dirty(get("dirty"));
  s.set_writeback(get("writeback"));
  s.set_pg_pg_in(get("pgpgin"));
  s.set_pg_pg_out(get("pgpgout"));
  s.set_pg_fault(get("pgfault"));
  s.set_pg_maj_fault(get("pgmajfault"));
  s.set_inactive_anon(get("inactive_anon"));
  s.set_active_anon(get("active_anon"));
  s.set_inactive_file(get("inactive_file"));
  s.set_active_file(get("active_file"));
  s.set_unevictable(get("unevictable"));
  s.set_hierarchical_memory_limit(get("hierarchical_memory_limit"));
  s.set_hierarchical_swap_limit(get("hierarchical_memsw_limit"));
  s.set_total_cache(get("total_cache"));
  s.set_total_rss(get("total_rss"));
  s.set_total_rss_huge(get("total_rss_huge"));
  s.set_total_mapped_file(get("total_mapped_file"));
  s.set_total_dirty(get("total_dirty"));
  s.set_total_writeback(get("total_writeback"));
  s.set_total_pg_pg_in(get("total_pgpgin"));
  s.set_total_pg_pg_out(get("total_pgpgout"));
  s.set_total_pg_fault(get("total_pgfault"));
  s.set_total_pg_maj_fault(get("total_pgmajfault"));
  s.set_total_inactive_anon(get("total_inactive_anon"));
  s.set_total_active_anon(get("total_active_anon"));
  s.set_total_inactive_file(get("total_inactive_file"));
  s.set_total_active_file(get("total_active_file"));
  s.set_total_unevictable(get("total_unevictable"));
}

void v1_memory(const fs::path& d, cg1::Metrics& m) {
  auto raw = read_kv(d / "memory.stat");
  auto* s = m.mutable_memory();
  s->mutable_usage();
  s->mutable_swap();
  s->mutable_kernel();
  s->mutable_kernel_tcp();
  v1_memory_stat(raw, *s);
  auto oom = read_kv(d / "memory.oom_control");
  auto* o = m.mutable_memory_oom_control();
  o->set_oom_kill_disable(oom["oom_kill_disable"]);
  o->set_under_oom(oom["under_oom"]);
  o->set_oom_kill(oom["oom_kill"]);
  const std::pair<const char*, cg1::MemoryEntry*> entries[] = {
      {"memory.", s->mutable_usage()},
      {"memory.memsw.", s->mutable_swap()},
      {"memory.kmem.", s->mutable_kernel()},
      {"memory.kmem.tcp.", s->mutable_kernel_tcp()},
  };
  for (const auto& [prefix, e] : entries) {
    std::string p = prefix;
    e->set_usage(read_u64(d / (p + "usage_in_bytes")));
    e->set_max(read_u64(d / (p + "max_usage_in_bytes")));
    e->set_failcnt(read_u64(d / (p + "failcnt")));
    e->set_limit(read_u64(d / (p + "limit_in_bytes")));
  }
}

// major:minor -> "/dev/NAME" from /proc/partitions (the first name of a device wins).
std::map<std::pair<uint64_t, uint64_t>, std::string> partitions(const fs::path& file) {
  std::map<std::pair<uint64_t, uint64_t>, std::string> out;
  auto ls = lines(read_or_missing(file));
  for (size_t i = 2; i < ls.size(); ++i) {
    auto f = fields(ls[i]);
    if (f.size() < 4) continue;
    auto major = strict_u64(f[0]), minor = strict_u64(f[1]);
    if (!major || !minor) throw Error(Code::Unknown, file.string() + ": line \"" + ls[i] + "\" has no device number");
    out.emplace(std::make_pair(*major, *minor), "/dev/" + f[3]);
  }
  return out;
}

using BlkioEntries = google::protobuf::RepeatedPtrField<cg1::BlkIOEntry>;

void blkio_entries(const fs::path& file, const std::map<std::pair<uint64_t, uint64_t>, std::string>& devices, BlkioEntries& out) {
  for (const auto& l : lines(read_or_missing(file))) {
    std::string spaced = l;
    std::replace(spaced.begin(), spaced.end(), ':', ' ');
    auto f = fields(spaced);
    if (f.size() == 2 && f[0] == "Total") continue;
    if (f.size() < 3) throw Error(Code::Unknown, file.string() + ": invalid line \"" + l + "\"");
    auto major = strict_u64(f[0]), minor = strict_u64(f[1]);
    auto value = strict_u64(f.size() == 4 ? f[3] : f[2]);
    if (!major || !minor || !value) throw Error(Code::Unknown, file.string() + ": invalid line \"" + l + "\"");
    auto* e = out.Add();
    auto dev = devices.find({*major, *minor});
    if (dev != devices.end()) e->set_device(dev->second);
    e->set_major(*major);
    e->set_minor(*minor);
    if (f.size() == 4) e->set_op(f[2]);
    e->set_value(*value);
  }
}

void v1_blkio(const fs::path& d, const CgroupHost& host, cg1::Metrics& m) {
  auto* b = m.mutable_blkio();
  std::vector<std::pair<const char*, BlkioEntries*>> files;
  if (fs::exists(fs::symlink_status(d / "blkio.io_serviced_recursive"))) {
    // The CFQ scheduler's statistics, where the kernel has them.
    files = {{"sectors_recursive", b->mutable_sectors_recursive()},
             {"io_service_bytes_recursive", b->mutable_io_service_bytes_recursive()},
             {"io_serviced_recursive", b->mutable_io_serviced_recursive()},
             {"io_queued_recursive", b->mutable_io_queued_recursive()},
             {"io_service_time_recursive", b->mutable_io_service_time_recursive()},
             {"io_wait_time_recursive", b->mutable_io_wait_time_recursive()},
             {"io_merged_recursive", b->mutable_io_merged_recursive()},
             {"time_recursive", b->mutable_io_time_recursive()}};
  }
  auto devices = partitions(host.proc_root / "partitions");
  int n = 0;
  for (const auto& [name, entries] : files) {
    blkio_entries(d / (std::string("blkio.") + name), devices, *entries);
    n += entries->size();
  }
  if (n > 0) return;
  // Devices without CFQ: the throttle layer's counters.
  blkio_entries(d / "blkio.throttle.io_serviced", devices, *b->mutable_io_serviced_recursive());
  blkio_entries(d / "blkio.throttle.io_service_bytes", devices, *b->mutable_io_service_bytes_recursive());
}

void v1_rdma(const fs::path& d, cg1::Metrics& m) {
  auto current = split(read_or_missing(d / "rdma.current"), '\n');
  auto max = split(read_or_missing(d / "rdma.max"), '\n');
  if (current.size() != max.size()) return;  // a device went away between the reads
  rdma_entries(current, *m.mutable_rdma()->mutable_current());
  rdma_entries(max, *m.mutable_rdma()->mutable_limit());
}

void v1_hugetlb(const fs::path& d, const CgroupHost& host, cg1::Metrics& m) {
  std::vector<std::string> sizes;
  std::error_code ec;
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(host.hugepages, ec)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  for (const auto& n : names)
    if (auto s = page_size_name(n)) sizes.push_back(*s);
  for (const auto& size : sizes) {
    auto p = "hugetlb." + size + ".";
    uint64_t usage = read_u64(d / (p + "usage_in_bytes"));
    uint64_t max = read_u64(d / (p + "max_usage_in_bytes"));
    uint64_t failcnt = read_u64(d / (p + "failcnt"));
    auto* h = m.add_hugetlb();
    h->set_pagesize(size);
    h->set_usage(usage);
    h->set_max(max);
    h->set_failcnt(failcnt);
  }
}

}  // namespace

cg1::Metrics v1_metrics(const cgroup::CgroupPaths& paths, const CgroupHost& host) {
  cg1::Metrics m;
  m.mutable_cpu()->mutable_usage();
  m.mutable_cpu()->mutable_throttling();
  auto run = [&](const char* name, auto&& fill) {
    auto d = oci::v1_cgroup_dir(paths, name, host.cgroup_root);
    if (d) controller([&] { fill(*d); });
  };
  run("pids", [&](const fs::path& d) { v1_pids(d, m); });
  run("cpu", [&](const fs::path& d) { v1_cpu(d, m); });
  run("cpuacct", [&](const fs::path& d) { v1_cpuacct(d, m); });
  run("memory", [&](const fs::path& d) { v1_memory(d, m); });
  run("blkio", [&](const fs::path& d) { v1_blkio(d, host, m); });
  run("rdma", [&](const fs::path& d) { v1_rdma(d, m); });
  run("hugetlb", [&](const fs::path& d) { v1_hugetlb(d, host, m); });
  return m;
}

}  // namespace nvproxy::oci
