#include "oci/cgroup_metrics.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdint>
#include <fstream>

#include "common/error.h"
#include "proto/cgroups_v1.pb.h"
#include "proto/cgroups_v2.pb.h"

using namespace nvproxy::oci;

static const char* kRuncStats = R"({
  "cpu": {"usage": {"total": 5000000, "percpu": [3000000, 2000000], "kernel": 1000000, "user": 4000000},
          "throttling": {"periods": 7}},
  "memory": {"usage": {"limit": 67108864, "usage": 1048576, "max": 2097152, "failcnt": 1}, "cache": 4096,
             "raw": {"rss": 8192, "anon": 12288, "file": 4096}},
  "pids": {"current": 3, "limit": 100}
})";

TEST(Stats, V1MetricsFromRuntimeStats) {
  auto any = metrics_from_runtime_stats(nlohmann::json::parse(kRuncStats), false);
  EXPECT_EQ(any.type_url(), "io.containerd.cgroups.v1.Metrics");
  io::containerd::cgroups::v1::Metrics m;
  ASSERT_TRUE(m.ParseFromString(any.value()));
  EXPECT_EQ(m.pids().current(), 3U);
  EXPECT_EQ(m.pids().limit(), 100U);
  EXPECT_EQ(m.cpu().usage().total(), 5000000U);
  EXPECT_EQ(m.cpu().usage().per_cpu_size(), 2);
  EXPECT_EQ(m.cpu().throttling().periods(), 7U);
  EXPECT_EQ(m.memory().usage().usage(), 1048576U);
  EXPECT_EQ(m.memory().usage().limit(), 67108864U);
  EXPECT_EQ(m.memory().cache(), 4096U);
  EXPECT_EQ(m.memory().rss(), 8192U);
}

TEST(Stats, V2MetricsFromRuntimeStats) {
  auto any = metrics_from_runtime_stats(nlohmann::json::parse(kRuncStats), true);
  EXPECT_EQ(any.type_url(), "io.containerd.cgroups.v2.Metrics");
  io::containerd::cgroups::v2::Metrics m;
  ASSERT_TRUE(m.ParseFromString(any.value()));
  EXPECT_EQ(m.cpu().usage_usec(), 5000U);
  EXPECT_EQ(m.memory().usage(), 1048576U);
  EXPECT_EQ(m.memory().usage_limit(), 67108864U);
  EXPECT_EQ(m.memory().anon(), 12288U);
  EXPECT_EQ(m.pids().current(), 3U);
}

TEST(Stats, MissingFieldsAreZeroNotErrors) {
  auto any = metrics_from_runtime_stats(nlohmann::json::object(), false);
  io::containerd::cgroups::v1::Metrics m;
  ASSERT_TRUE(m.ParseFromString(any.value()));
  EXPECT_EQ(m.pids().current(), 0U);
}

namespace {

namespace fs = std::filesystem;
namespace cg1 = io::containerd::cgroups::v1;
namespace cg2 = io::containerd::cgroups::v2;

// A fake host: cgroup mount, /proc (partitions) and huge page sizes under one temp dir.
class FakeHost {
 public:
  FakeHost() {
    std::string tmpl = (fs::temp_directory_path() / "nvproxy-stats-XXXXXX").string();
    root_ = ::mkdtemp(tmpl.data());
    host_ = {root_ / "cg", root_ / "proc", root_ / "hugepages"};
  }
  ~FakeHost() { fs::remove_all(root_); }
  FakeHost(const FakeHost&) = delete;
  FakeHost& operator=(const FakeHost&) = delete;

  void put(const fs::path& rel, const std::string& s) const {
    fs::create_directories((root_ / rel).parent_path());
    std::ofstream(root_ / rel) << s;
  }
  void remove(const fs::path& rel) const { fs::remove_all(root_ / rel); }
  [[nodiscard]] const CgroupHost& host() const { return host_; }

 private:
  fs::path root_;
  CgroupHost host_;
};

// A running container's v1 cgroup as a 5.x kernel without CFQ shows it.
void fill_v1(const FakeHost& h) {
  h.put("proc/partitions", "major minor  #blocks  name\n\n 254        0  268435456 vda\n 254        1  1024 vda1\n");
  fs::create_directories(h.host().hugepages / "hugepages-2048kB");
  fs::create_directories(h.host().hugepages / "hugepages-1048576kB");
  h.put("cg/pids/c1/pids.current", "3\n");
  h.put("cg/pids/c1/pids.max", "max\n");
  h.put("cg/cpu/c1/cpu.stat", "nr_periods 7\nnr_throttled 2\nthrottled_time 900\n");
  h.put("cg/cpuacct/c1/cpuacct.stat", "user 12\nsystem 3\n");
  h.put("cg/cpuacct/c1/cpuacct.usage", "5000000\n");
  h.put("cg/cpuacct/c1/cpuacct.usage_percpu", "3000000 2000000 \n");
  h.put("cg/memory/c1/memory.stat",
        "cache 4096\nrss 8192\nrss_huge 0\nmapped_file 1\ndirty 2\npgfault 99\ntotal_rss 8192\n"
        "hierarchical_memory_limit 67108864\nhierarchical_memsw_limit 134217728\ntotal_unevictable 5\n");
  h.put("cg/memory/c1/memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n");
  for (const std::string p : {"", "memsw.", "kmem.", "kmem.tcp."}) {
    h.put("cg/memory/c1/memory." + p + "usage_in_bytes", "1048576\n");
    h.put("cg/memory/c1/memory." + p + "max_usage_in_bytes", "2097152\n");
    h.put("cg/memory/c1/memory." + p + "failcnt", "1\n");
    h.put("cg/memory/c1/memory." + p + "limit_in_bytes", "67108864\n");
  }
  h.put("cg/blkio/c1/blkio.throttle.io_serviced", "254:0 Read 10\n254:0 Write 4\n254:0 Total 14\nTotal 14\n");
  h.put("cg/blkio/c1/blkio.throttle.io_service_bytes", "254:0 Read 40960\n254:0 Write 0\nTotal 40960\n");
  for (const std::string size : {"2MB", "1GB"}) {
    h.put("cg/hugetlb/c1/hugetlb." + size + ".usage_in_bytes", "0\n");
    h.put("cg/hugetlb/c1/hugetlb." + size + ".max_usage_in_bytes", size == "2MB" ? "2097152\n" : "0\n");
    h.put("cg/hugetlb/c1/hugetlb." + size + ".failcnt", "0\n");
  }
}

const char* kV1ProcCgroup =
    "10:hugetlb:/c1\n9:name=systemd:/c1\n8:pids:/c1\n7:blkio:/c1\n4:memory:/c1\n2:cpuacct:/c1\n1:cpu:/c1\n0::/\n";

cg1::Metrics v1_of(const FakeHost& h, const char* proc_cgroup = kV1ProcCgroup) {
  auto any = metrics_from_cgroup(nvproxy::cgroup::parse_proc_cgroup(proc_cgroup), false, h.host());
  EXPECT_EQ(any.type_url(), "io.containerd.cgroups.v1.Metrics");
  cg1::Metrics m;
  EXPECT_TRUE(m.ParseFromString(any.value()));
  return m;
}

}  // namespace

TEST(Stats, V1CgroupEveryController) {
  FakeHost h;
  fill_v1(h);
  auto m = v1_of(h);
  EXPECT_EQ(m.pids().current(), 3U);
  EXPECT_EQ(m.pids().limit(), 0U);  // "max"
  EXPECT_EQ(m.cpu().throttling().periods(), 7U);
  EXPECT_EQ(m.cpu().throttling().throttled_periods(), 2U);
  EXPECT_EQ(m.cpu().throttling().throttled_time(), 900U);
  EXPECT_EQ(m.cpu().usage().total(), 5000000U);
  EXPECT_EQ(m.cpu().usage().user(), 120000000U);  // ticks of 10 ms
  EXPECT_EQ(m.cpu().usage().kernel(), 30000000U);
  ASSERT_EQ(m.cpu().usage().per_cpu_size(), 2);
  EXPECT_EQ(m.cpu().usage().per_cpu(1), 2000000U);
  const auto& mem = m.memory();
  EXPECT_EQ(mem.cache(), 4096U);
  EXPECT_EQ(mem.rss(), 8192U);
  EXPECT_EQ(mem.mapped_file(), 1U);
  EXPECT_EQ(mem.dirty(), 2U);
  EXPECT_EQ(mem.pg_fault(), 99U);
  EXPECT_EQ(mem.total_rss(), 8192U);
  EXPECT_EQ(mem.hierarchical_memory_limit(), 67108864U);
  EXPECT_EQ(mem.hierarchical_swap_limit(), 134217728U);
  EXPECT_EQ(mem.total_unevictable(), 5U);
  for (const auto* e : {&mem.usage(), &mem.swap(), &mem.kernel(), &mem.kernel_tcp()}) {
    EXPECT_EQ(e->usage(), 1048576U);
    EXPECT_EQ(e->max(), 2097152U);
    EXPECT_EQ(e->failcnt(), 1U);
    EXPECT_EQ(e->limit(), 67108864U);
  }
  ASSERT_TRUE(m.has_memory_oom_control());
  EXPECT_EQ(m.memory_oom_control().oom_kill(), 1U);
  ASSERT_TRUE(m.has_blkio());
  ASSERT_EQ(m.blkio().io_serviced_recursive_size(), 3);
  EXPECT_EQ(m.blkio().io_serviced_recursive(0).device(), "/dev/vda");
  EXPECT_EQ(m.blkio().io_serviced_recursive(0).major(), 254U);
  EXPECT_EQ(m.blkio().io_serviced_recursive(0).op(), "Read");
  EXPECT_EQ(m.blkio().io_serviced_recursive(0).value(), 10U);
  ASSERT_EQ(m.blkio().io_service_bytes_recursive_size(), 2);
  EXPECT_EQ(m.blkio().io_service_bytes_recursive(0).value(), 40960U);
  EXPECT_EQ(m.blkio().sectors_recursive_size(), 0);
  ASSERT_EQ(m.hugetlb_size(), 2);  // in the order of the host's page size directories
  EXPECT_EQ(m.hugetlb(0).pagesize(), "1GB");
  EXPECT_EQ(m.hugetlb(1).pagesize(), "2MB");
  EXPECT_EQ(m.hugetlb(1).max(), 2097152U);
  EXPECT_FALSE(m.has_rdma());
}

TEST(Stats, V1CfqStatisticsWhenTheKernelHasThem) {
  FakeHost h;
  fill_v1(h);
  for (const std::string f : {"sectors_recursive", "io_service_bytes_recursive", "io_serviced_recursive", "io_queued_recursive",
                              "io_service_time_recursive", "io_wait_time_recursive", "io_merged_recursive", "time_recursive"})
    h.put("cg/blkio/c1/blkio." + f, f == "sectors_recursive" || f == "time_recursive" ? "254:1 77\n" : "254:1 Sync 5\nTotal 5\n");
  auto m = v1_of(h);
  ASSERT_EQ(m.blkio().sectors_recursive_size(), 1);
  EXPECT_EQ(m.blkio().sectors_recursive(0).device(), "/dev/vda1");
  EXPECT_EQ(m.blkio().sectors_recursive(0).op(), "");
  EXPECT_EQ(m.blkio().sectors_recursive(0).value(), 77U);
  ASSERT_EQ(m.blkio().io_serviced_recursive_size(), 1);  // not the throttle layer's
  EXPECT_EQ(m.blkio().io_serviced_recursive(0).op(), "Sync");
  EXPECT_EQ(m.blkio().io_time_recursive_size(), 1);
}

TEST(Stats, V1MissingFilesEndOnlyTheirController) {
  FakeHost h;
  fill_v1(h);
  h.remove("cg/memory/c1/memory.memsw.usage_in_bytes");  // no swap accounting
  h.remove("cg/pids/c1");
  h.remove("cg/hugetlb/c1/hugetlb.2MB.failcnt");
  auto m = v1_of(h);
  EXPECT_FALSE(m.has_pids());
  EXPECT_EQ(m.memory().usage().usage(), 1048576U);
  EXPECT_TRUE(m.memory().has_swap());  // present, as containerd's library sets it before reading
  EXPECT_EQ(m.memory().swap().usage(), 0U);
  EXPECT_TRUE(m.memory().has_kernel_tcp());
  EXPECT_EQ(m.memory().kernel().usage(), 0U);
  ASSERT_EQ(m.hugetlb_size(), 1);
  EXPECT_EQ(m.hugetlb(0).pagesize(), "1GB");
  EXPECT_TRUE(m.has_memory_oom_control());
}

TEST(Stats, V1GoneCgroupLeavesOnlyEmptyCpu) {
  FakeHost h;
  auto m = v1_of(h);
  EXPECT_TRUE(m.has_cpu());
  EXPECT_TRUE(m.cpu().has_usage());
  EXPECT_TRUE(m.cpu().has_throttling());
  EXPECT_FALSE(m.has_memory());
  EXPECT_FALSE(m.has_pids());
  EXPECT_TRUE(m.has_blkio());  // set before its files are read
  EXPECT_EQ(m.hugetlb_size(), 0);
}

TEST(Stats, V1ControllerTheProcessIsNotInIsSkipped) {
  FakeHost h;
  fill_v1(h);
  auto m = v1_of(h, "4:memory:/c1\n0::/\n");
  EXPECT_TRUE(m.has_memory());
  EXPECT_FALSE(m.has_pids());
  EXPECT_FALSE(m.has_blkio());
  EXPECT_EQ(m.hugetlb_size(), 0);
  EXPECT_EQ(m.cpu().usage().total(), 0U);
}

TEST(Stats, V1UnparsableFileFails) {
  FakeHost h;
  fill_v1(h);
  h.put("cg/memory/c1/memory.stat", "cache 4096\nbroken\n");
  EXPECT_THROW(v1_of(h), nvproxy::Error);
}

TEST(Stats, V2Cgroup) {
  FakeHost h;
  h.put("cg/cgroup.controllers", "cpu io memory pids hugetlb rdma\n");
  h.put("cg/k/c1/cgroup.controllers", "cpu io memory pids hugetlb\n");
  h.put("cg/k/c1/cpu.stat",
        "usage_usec 5000\nuser_usec 4000\nsystem_usec 1000\nnr_periods 3\nnr_throttled 1\nthrottled_usec 9\n");
  h.put("cg/k/c1/memory.stat", "anon 12288\nfile 4096\nslab 7\npgfault 11\nthp_collapse_alloc 2\n");
  h.put("cg/k/c1/memory.current", "1048576\n");
  h.put("cg/k/c1/memory.max", "max\n");
  h.put("cg/k/c1/memory.swap.current", "0\n");
  h.put("cg/k/c1/memory.events", "low 0\nhigh 0\nmax 4\noom 1\noom_kill 1\n");
  h.put("cg/k/c1/pids.current", "2\n");
  h.put("cg/k/c1/pids.max", "max\n");
  h.put("cg/k/c1/io.stat", "254:0 rbytes=40960 wbytes=8192 rios=10 wios=2 dbytes=0 dios=0\n");
  h.put("cg/k/c1/hugetlb.2MB.current", "0\n");
  h.put("cg/k/c1/hugetlb.2MB.max", "max\n");
  h.put("cg/k/c1/hugetlb.2MB.rsvd.current", "0\n");
  h.put("cg/k/c1/rdma.current", "mlx4_0 hca_handle=2 hca_object=2000\n");
  h.put("cg/k/c1/rdma.max", "mlx4_0 hca_handle=max hca_object=max\n");
  auto any = metrics_from_cgroup(nvproxy::cgroup::parse_proc_cgroup("0::/k/c1\n"), true, h.host());
  EXPECT_EQ(any.type_url(), "io.containerd.cgroups.v2.Metrics");
  cg2::Metrics m;
  ASSERT_TRUE(m.ParseFromString(any.value()));
  EXPECT_EQ(m.pids().current(), 2U);
  EXPECT_EQ(m.pids().limit(), UINT64_MAX);
  EXPECT_EQ(m.cpu().usage_usec(), 5000U);
  EXPECT_EQ(m.cpu().system_usec(), 1000U);
  EXPECT_EQ(m.cpu().throttled_usec(), 9U);
  EXPECT_EQ(m.memory().anon(), 12288U);
  EXPECT_EQ(m.memory().slab(), 7U);
  EXPECT_EQ(m.memory().pgfault(), 11U);
  EXPECT_EQ(m.memory().thp_collapse_alloc(), 2U);
  EXPECT_EQ(m.memory().usage(), 1048576U);
  EXPECT_EQ(m.memory().usage_limit(), UINT64_MAX);
  EXPECT_EQ(m.memory().swap_limit(), 0U);  // no file
  ASSERT_TRUE(m.has_memory_events());
  EXPECT_EQ(m.memory_events().max(), 4U);
  EXPECT_EQ(m.memory_events().oom_kill(), 1U);
  ASSERT_EQ(m.io().usage_size(), 1);
  EXPECT_EQ(m.io().usage(0).major(), 254U);
  EXPECT_EQ(m.io().usage(0).rbytes(), 40960U);
  EXPECT_EQ(m.io().usage(0).wios(), 2U);
  ASSERT_EQ(m.hugetlb_size(), 1);
  EXPECT_EQ(m.hugetlb(0).pagesize(), "2MB");
  EXPECT_EQ(m.hugetlb(0).max(), UINT64_MAX);
  ASSERT_EQ(m.rdma().current_size(), 1);
  EXPECT_EQ(m.rdma().current(0).device(), "mlx4_0");
  EXPECT_EQ(m.rdma().current(0).hca_objects(), 2000U);
  EXPECT_EQ(m.rdma().limit(0).hca_handles(), UINT32_MAX);
}

TEST(Stats, V2WithoutControllersAndEvents) {
  FakeHost h;
  h.put("cg/cgroup.controllers", "cpu memory pids\n");
  h.put("cg/c1/cgroup.controllers", "\n");
  h.put("cg/c1/cpu.stat", "usage_usec 5000\n");  // not read: cpu is not enabled here
  auto any = metrics_from_cgroup(nvproxy::cgroup::parse_proc_cgroup("0::/c1\n"), true, h.host());
  cg2::Metrics m;
  ASSERT_TRUE(m.ParseFromString(any.value()));
  EXPECT_TRUE(m.has_cpu());
  EXPECT_EQ(m.cpu().usage_usec(), 0U);
  EXPECT_TRUE(m.has_memory());
  EXPECT_TRUE(m.has_pids());
  EXPECT_TRUE(m.has_io());
  EXPECT_TRUE(m.has_rdma());
  EXPECT_FALSE(m.has_memory_events());
}

TEST(Stats, V2GoneCgroupFails) {
  FakeHost h;
  h.put("cg/cgroup.controllers", "cpu\n");
  EXPECT_THROW(metrics_from_cgroup(nvproxy::cgroup::parse_proc_cgroup("0::/gone\n"), true, h.host()), nvproxy::Error);
  try {
    metrics_from_cgroup(nvproxy::cgroup::parse_proc_cgroup("1:cpu:/x\n"), true, h.host());
    ADD_FAILURE() << "no unified path must throw";
  } catch (const nvproxy::Error& e) {
    EXPECT_EQ(e.code(), nvproxy::Code::NotFound);
  }
}
