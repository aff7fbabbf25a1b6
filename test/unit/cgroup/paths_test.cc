#include "cgroup/paths.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include "common/error.h"

using namespace nvproxy;

TEST(CgroupPaths, ParsesProcCgroup) {
  auto p = cgroup::parse_proc_cgroup("12:cpu,cpuacct:/default/c1\n9:name=systemd:/s\n4:memory:/m:odd\n0::/u/c1\nbroken\n");
  ASSERT_EQ(p.v1.size(), 4U);
  EXPECT_EQ(p.v1["cpu"].hierarchy, "cpu,cpuacct");
  EXPECT_EQ(p.v1["cpuacct"].path, "/default/c1");
  EXPECT_EQ(p.v1["name=systemd"].path, "/s");
  EXPECT_EQ(p.v1["memory"].path, "/m:odd");  // a path may hold ':'
  EXPECT_EQ(p.unified, "/u/c1");
  EXPECT_FALSE(cgroup::parse_proc_cgroup("4:memory:/m\n").unified);
}

TEST(CgroupPaths, V1DirectoryOfAController) {
  auto root = std::filesystem::temp_directory_path() / ("nvproxy-cgdir-" + std::to_string(::getpid()));
  std::filesystem::create_directories(root / "cpu,cpuacct");
  std::filesystem::create_directories(root / "memory");
  auto p = cgroup::parse_proc_cgroup("2:cpu,cpuacct:/c1\n4:memory:/c1\n");
  EXPECT_EQ(cgroup::v1_cgroup_dir(p, "memory", root), root / "memory/c1");
  EXPECT_EQ(cgroup::v1_cgroup_dir(p, "cpuacct", root), root / "cpu,cpuacct/c1");  // no symlink of its own
  std::filesystem::create_directories(root / "cpuacct");
  EXPECT_EQ(cgroup::v1_cgroup_dir(p, "cpuacct", root), root / "cpuacct/c1");
  EXPECT_FALSE(cgroup::v1_cgroup_dir(p, "pids", root));
  std::filesystem::remove_all(root);
}

TEST(CgroupPaths, PathsOfAProcess) {
  auto self = cgroup::cgroup_paths_of(::getpid());
  ASSERT_TRUE(self);
  EXPECT_TRUE(self->unified || !self->v1.empty());
  auto root = std::filesystem::temp_directory_path() / ("nvproxy-cgproc-" + std::to_string(::getpid()));
  EXPECT_FALSE(cgroup::cgroup_paths_of(12345, root));
}
