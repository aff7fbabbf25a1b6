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
#include "oci/cgroup_metrics_parts.h"
#include "proto/cgroups_v1.pb.h"
#include "proto/cgroups_v2.pb.h"

namespace nvproxy::oci {

namespace fs = std::filesystem;
namespace cg1 = io::containerd::cgroups::v1;
namespace cg2 = io::containerd::cgroups::v2;

namespace {

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

wkt::Any metrics_from_cgroup(const cgroup::CgroupPaths& paths, bool cgroup_v2, const CgroupHost& host) {
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
