#include "oci/cgroup_metrics.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <vector>

#include "common/error.h"
#include "common/unique_fd.h"
#include "proto/cgroups_v1.pb.h"
#include "proto/cgroups_v2.pb.h"

namespace nvproxy::oci {

namespace fs = std::filesystem;
namespace cg1 = io::containerd::cgroups::v1;
namespace cg2 = io::containerd::cgroups::v2;

namespace {

// A cgroup file that does not exist: the controller's part of the statistics ends there.
struct Missing {};

std::optional<std::string> read_if_exists(const fs::path& p) {
  UniqueFd fd(::open(p.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) {
    if (errno == ENOENT) return std::nullopt;
    throw Error(Code::Unknown, "open " + p.string() + ": " + std::strerror(errno));
  }
  std::string out;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      if (errno == ENOENT || errno == ENODEV) return std::nullopt;  // the cgroup went away meanwhile
      throw Error(Code::Unknown, "read " + p.string() + ": " + std::strerror(errno));
    }
    if (n == 0) return out;
    out.append(buf, static_cast<size_t>(n));
  }
}

std::string read_or_missing(const fs::path& p) {
  auto s = read_if_exists(p);
  if (!s) throw Missing{};
  return *s;
}

std::string trim(std::string_view s) {
  auto b = s.find_first_not_of(" \t\n");
  if (b == std::string_view::npos) return {};
  auto e = s.find_last_not_of(" \t\n");
  return std::string(s.substr(b, e - b + 1));
}

std::vector<std::string> fields(std::string_view s) {
  std::vector<std::string> out;
  std::istringstream in{std::string(s)};
  std::string f;
  while (in >> f) out.push_back(f);
  return out;
}

// Every piece between separators, empty ones included (a last empty piece after a final "\n" too).
std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t at; (at = s.find(sep, start)) != std::string::npos; start = at + 1) out.push_back(s.substr(start, at - start));
  out.push_back(s.substr(start));
  return out;
}

std::vector<std::string> lines(std::string_view s) {
  std::vector<std::string> out;
  std::istringstream in{std::string(s)};
  std::string l;
  while (std::getline(in, l)) out.push_back(l);
  return out;
}

std::optional<uint64_t> strict_u64(std::string_view s) {
  uint64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || p != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

// An unsigned value as the cgroups library parses it: a negative number reads as 0.
std::optional<uint64_t> cgroup_u64(std::string_view s) {
  if (auto v = strict_u64(s)) return v;
  if (s.size() > 1 && s[0] == '-' && strict_u64(s.substr(1))) return 0;
  return std::nullopt;
}

uint64_t parse_u64(std::string_view s, const fs::path& file) {
  auto v = cgroup_u64(s);
  if (!v) throw Error(Code::Unknown, file.string() + ": \"" + std::string(s) + "\" is not a number");
  return *v;
}

uint64_t read_u64(const fs::path& p) {
  return parse_u64(trim(read_or_missing(p)), p);
}

// "KEY VALUE" lines, every line of them.
std::map<std::string, uint64_t> read_kv(const fs::path& p) {
  std::map<std::string, uint64_t> out;
  for (const auto& l : lines(read_or_missing(p))) {
    auto f = fields(l);
    if (f.size() != 2) throw Error(Code::Unknown, p.string() + ": line \"" + l + "\" is not \"KEY VALUE\"");
    out[f[0]] = parse_u64(f[1], p);
  }
  return out;
}

// Runs one controller's part; a missing file ends it and keeps what it filled so far.
template <class F>
void controller(F&& f) {
  try {
    f();
  } catch (const Missing&) {
  }
}

// cgroup v1 (containerd's cgroups library, Stat with IgnoreNotExist).

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

template <class Entry>
void rdma_entries(const std::vector<std::string>& ls, google::protobuf::RepeatedPtrField<Entry>& out) {
  for (const auto& l : ls) {
    auto f = fields(l);
    if (f.size() != 3) continue;
    auto* e = out.Add();
    e->set_device(f[0]);
    for (size_t i = 1; i < 3; ++i) {
      auto eq = f[i].find('=');
      if (eq == std::string::npos || f[i].find('=', eq + 1) != std::string::npos) continue;
      std::string k = f[i].substr(0, eq), v = f[i].substr(eq + 1);
      std::optional<uint64_t> n = v == "max" ? std::optional<uint64_t>(std::numeric_limits<uint32_t>::max()) : cgroup_u64(v);
      if (!n || *n > std::numeric_limits<uint32_t>::max()) continue;
      if (k == "hca_handle") e->set_hca_handles(static_cast<uint32_t>(*n));
      if (k == "hca_object") e->set_hca_objects(static_cast<uint32_t>(*n));
    }
  }
}

void v1_rdma(const fs::path& d, cg1::Metrics& m) {
  auto current = split(read_or_missing(d / "rdma.current"), '\n');
  auto max = split(read_or_missing(d / "rdma.max"), '\n');
  if (current.size() != max.size()) return;  // a device went away between the reads
  rdma_entries(current, *m.mutable_rdma()->mutable_current());
  rdma_entries(max, *m.mutable_rdma()->mutable_limit());
}

// "hugepages-2048kB" -> "2MB", as the cgroups library names page sizes.
std::optional<std::string> page_size_name(const std::string& dir_name) {
  auto dash = dir_name.find('-');
  if (dash == std::string::npos || dir_name.size() < dash + 4 || dir_name.substr(dir_name.size() - 2) != "kB")
    return std::nullopt;
  auto kb = strict_u64(std::string_view(dir_name).substr(dash + 1, dir_name.size() - dash - 3));
  if (!kb) return std::nullopt;
  static const char* const kUnits[] = {"B", "KB", "MB", "GB", "TB", "PB"};
  auto size = static_cast<double>(*kb) * 1024;
  size_t unit = 0;
  while (size >= 1024 && unit + 1 < std::size(kUnits)) {
    size /= 1024;
    ++unit;
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g%s", size, kUnits[unit]);
  return std::string(buf);
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

cg1::Metrics v1_metrics(const CgroupPaths& paths, const CgroupHost& host) {
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

// cgroup v2 (containerd's cgroups library, the v2 manager's Stat).

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
  auto text = read_if_exists(p);
  if (!text) return false;
  for (const auto& l : lines(*text)) {
    auto f = fields(l);
    if (f.size() != 2) throw Error(Code::Unknown, p.string() + ": line \"" + l + "\" is not \"KEY VALUE\"");
    v2_put(out, f[0], f[1]);
  }
  return true;
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

cg2::Metrics v2_metrics(const CgroupPaths& paths, const CgroupHost& host) {
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

uint64_t u64(const nlohmann::json& j, std::initializer_list<const char*> path) {
  const nlohmann::json* cur = &j;
  for (const char* k : path) {
    if (!cur->is_object() || !cur->contains(k)) return 0;
    cur = &(*cur)[k];
  }
  return cur->is_number_unsigned() || cur->is_number_integer() ? cur->get<uint64_t>() : 0;
}

void fill_entry(io::containerd::cgroups::v1::MemoryEntry* e, const nlohmann::json& m, const char* key) {
  e->set_limit(u64(m, {key, "limit"}));
  e->set_usage(u64(m, {key, "usage"}));
  e->set_max(u64(m, {key, "max"}));
  e->set_failcnt(u64(m, {key, "failcnt"}));
}

}  // namespace

std::map<std::string, uint64_t> read_cgroup_kv(const fs::path& file) {
  return read_kv(file);
}

wkt::Any metrics_from_cgroup(const CgroupPaths& paths, bool cgroup_v2, const CgroupHost& host) {
  wkt::Any any;
  if (cgroup_v2) {
    any.set_type_url("io.containerd.cgroups.v2.Metrics");
    any.set_value(v2_metrics(paths, host).SerializeAsString());
  } else {
    any.set_type_url("io.containerd.cgroups.v1.Metrics");
    any.set_value(v1_metrics(paths, host).SerializeAsString());
  }
  return any;
}

bool host_uses_cgroup_v2() {
  return std::filesystem::exists("/sys/fs/cgroup/cgroup.controllers");
}

wkt::Any metrics_from_runtime_stats(const nlohmann::json& d, bool cgroup_v2) {
  wkt::Any any;
  if (cgroup_v2) {
    io::containerd::cgroups::v2::Metrics m;
    m.mutable_pids()->set_current(u64(d, {"pids", "current"}));
    m.mutable_pids()->set_limit(u64(d, {"pids", "limit"}));
    m.mutable_cpu()->set_usage_usec(u64(d, {"cpu", "usage", "total"}) / 1000);
    m.mutable_cpu()->set_user_usec(u64(d, {"cpu", "usage", "user"}) / 1000);
    m.mutable_cpu()->set_system_usec(u64(d, {"cpu", "usage", "kernel"}) / 1000);
    m.mutable_cpu()->set_nr_periods(u64(d, {"cpu", "throttling", "periods"}));
    m.mutable_cpu()->set_nr_throttled(u64(d, {"cpu", "throttling", "throttledPeriods"}));
    m.mutable_cpu()->set_throttled_usec(u64(d, {"cpu", "throttling", "throttledTime"}) / 1000);
    m.mutable_memory()->set_usage(u64(d, {"memory", "usage", "usage"}));
    m.mutable_memory()->set_usage_limit(u64(d, {"memory", "usage", "limit"}));
    m.mutable_memory()->set_swap_usage(u64(d, {"memory", "swap", "usage"}));
    m.mutable_memory()->set_swap_limit(u64(d, {"memory", "swap", "limit"}));
    m.mutable_memory()->set_anon(u64(d, {"memory", "raw", "anon"}));
    m.mutable_memory()->set_file(u64(d, {"memory", "raw", "file"}));
    any.set_type_url("io.containerd.cgroups.v2.Metrics");
    any.set_value(m.SerializeAsString());
    return any;
  }
  io::containerd::cgroups::v1::Metrics m;
  m.mutable_pids()->set_current(u64(d, {"pids", "current"}));
  m.mutable_pids()->set_limit(u64(d, {"pids", "limit"}));
  auto* usage = m.mutable_cpu()->mutable_usage();
  usage->set_total(u64(d, {"cpu", "usage", "total"}));
  usage->set_kernel(u64(d, {"cpu", "usage", "kernel"}));
  usage->set_user(u64(d, {"cpu", "usage", "user"}));
  if (d.contains("cpu") && d["cpu"].contains("usage") && d["cpu"]["usage"].contains("percpu"))
    for (const auto& v : d["cpu"]["usage"]["percpu"]) usage->add_per_cpu(v.get<uint64_t>());
  m.mutable_cpu()->mutable_throttling()->set_periods(u64(d, {"cpu", "throttling", "periods"}));
  m.mutable_cpu()->mutable_throttling()->set_throttled_periods(u64(d, {"cpu", "throttling", "throttledPeriods"}));
  m.mutable_cpu()->mutable_throttling()->set_throttled_time(u64(d, {"cpu", "throttling", "throttledTime"}));
  const auto& mem = d.contains("memory") ? d["memory"] : nlohmann::json::object();
  m.mutable_memory()->set_cache(u64(d, {"memory", "cache"}));
  m.mutable_memory()->set_rss(u64(d, {"memory", "raw", "rss"}));
  m.mutable_memory()->set_rss_huge(u64(d, {"memory", "raw", "rss_huge"}));
  m.mutable_memory()->set_mapped_file(u64(d, {"memory", "raw", "mapped_file"}));
  fill_entry(m.mutable_memory()->mutable_usage(), mem, "usage");
  fill_entry(m.mutable_memory()->mutable_swap(), mem, "swap");
  fill_entry(m.mutable_memory()->mutable_kernel(), mem, "kernel");
  any.set_type_url("io.containerd.cgroups.v1.Metrics");
  any.set_value(m.SerializeAsString());
  return any;
}

}  // namespace nvproxy::oci
