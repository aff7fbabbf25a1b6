#include "oci/cgroup_stats.h"

#include <gtest/gtest.h>

#include <fstream>

#include "common/error.h"

using namespace nvproxy;

namespace {
void put(const std::filesystem::path& p, const std::string& s) {
  std::filesystem::create_directories(p.parent_path());
  std::ofstream(p) << s;
}
}  // namespace

TEST(CgroupStats, V1FromFakeTree) {
  auto root = std::filesystem::temp_directory_path() / ("nvproxy-cg-" + std::to_string(::getpid()));
  put(root / "proc/42/cgroup", "5:pids:/c1\n4:memory:/c1\n2:cpu,cpuacct:/c1\n0::/\n");
  put(root / "cg/pids/c1/pids.current", "4\n");
  put(root / "cg/pids/c1/pids.max", "max\n");
  put(root / "cg/memory/c1/memory.usage_in_bytes", "123456\n");
  put(root / "cg/memory/c1/memory.limit_in_bytes", "67108864\n");
  put(root / "cg/memory/c1/memory.stat", "cache 10\nrss 20\n");
  put(root / "cg/cpu,cpuacct/c1/cpuacct.usage", "999\n");
  auto d = oci::stats_from_cgroup(42, root / "proc", root / "cg");
  EXPECT_EQ(d["pids"]["current"], 4);
  EXPECT_FALSE(d["pids"].contains("limit"));  // "max": no limit
  EXPECT_EQ(d["memory"]["usage"]["usage"], 123456);
  EXPECT_EQ(d["memory"]["usage"]["limit"], 67108864);
  EXPECT_EQ(d["memory"]["cache"], 10);
  EXPECT_EQ(d["memory"]["raw"]["rss"], 20);
  EXPECT_EQ(d["cpu"]["usage"]["total"], 999);
  EXPECT_THROW(oci::stats_from_cgroup(43, root / "proc", root / "cg"), Error);
  std::filesystem::remove_all(root);
}
