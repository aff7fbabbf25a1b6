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

TEST(CgroupStats, ParsesProcCgroup) {
  auto p = oci::parse_proc_cgroup("12:cpu,cpuacct:/default/c1\n9:name=systemd:/s\n4:memory:/m:odd\n0::/u/c1\nbroken\n");
  ASSERT_EQ(p.v1.size(), 4U);
  EXPECT_EQ(p.v1["cpu"].hierarchy, "cpu,cpuacct");
  EXPECT_EQ(p.v1["cpuacct"].path, "/default/c1");
  EXPECT_EQ(p.v1["name=systemd"].path, "/s");
  EXPECT_EQ(p.v1["memory"].path, "/m:odd");  // a path may hold ':'
  EXPECT_EQ(p.unified, "/u/c1");
  EXPECT_FALSE(oci::parse_proc_cgroup("4:memory:/m\n").unified);
}

TEST(CgroupStats, V1DirectoryOfAController) {
  auto root = std::filesystem::temp_directory_path() / ("nvproxy-cgdir-" + std::to_string(::getpid()));
  std::filesystem::create_directories(root / "cpu,cpuacct");
  std::filesystem::create_directories(root / "memory");
  auto p = oci::parse_proc_cgroup("2:cpu,cpuacct:/c1\n4:memory:/c1\n");
  EXPECT_EQ(oci::v1_cgroup_dir(p, "memory", root), root / "memory/c1");
  EXPECT_EQ(oci::v1_cgroup_dir(p, "cpuacct", root), root / "cpu,cpuacct/c1");  // no symlink of its own
  std::filesystem::create_directories(root / "cpuacct");
  EXPECT_EQ(oci::v1_cgroup_dir(p, "cpuacct", root), root / "cpuacct/c1");
  EXPECT_FALSE(oci::v1_cgroup_dir(p, "pids", root));
  std::filesystem::remove_all(root);
}

TEST(CgroupStats, PathsOfAProcess) {
  auto self = oci::cgroup_paths_of(::getpid());
  ASSERT_TRUE(self);
  EXPECT_TRUE(self->unified || !self->v1.empty());
  auto root = std::filesystem::temp_directory_path() / ("nvproxy-cgproc-" + std::to_string(::getpid()));
  EXPECT_FALSE(oci::cgroup_paths_of(12345, root));
}
