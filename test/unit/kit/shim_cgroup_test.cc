// shim_cgroup against a fake cgroup tree: a unified host, a v1 host with co-mount symlinks, and
// refusals (missing cgroup, relative or escaping paths).
#include "shim/kit/shim_cgroup.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "common/error.h"
#include "common/fs.h"

namespace nvproxy::shim {
namespace {

namespace fs = std::filesystem;

struct TempDir {
  fs::path p;
  TempDir() {
    std::string t = (fs::temp_directory_path() / "shim-cgroup-XXXXXX").string();
    p = ::mkdtemp(t.data());
  }
  ~TempDir() { fs::remove_all(p); }
};

void touch(const fs::path& f) {
  fs::create_directories(f.parent_path());
  std::ofstream(f).flush();
}

TEST(ShimCgroup, UnifiedWritesThePidIntoCgroupProcs) {
  TempDir t;
  touch(t.p / "cgroup.controllers");
  touch(t.p / "pods/p1/cgroup.procs");
  join_shim_cgroup(4242, "/pods/p1", t.p);
  EXPECT_EQ(read_file(t.p / "pods/p1/cgroup.procs"), "4242");
}

TEST(ShimCgroup, V1JoinsEveryHierarchyThatHasThePathOnce) {
  TempDir t;
  for (auto h : {"memory", "cpu,cpuacct", "pids"}) touch(t.p / h / "cgroup.procs");
  touch(t.p / "memory/pods/p1/cgroup.procs");
  touch(t.p / "cpu,cpuacct/pods/p1/cgroup.procs");
  fs::create_directory_symlink("cpu,cpuacct", t.p / "cpu");
  join_shim_cgroup(7, "/pods/p1", t.p);
  EXPECT_EQ(read_file(t.p / "memory/pods/p1/cgroup.procs"), "7");
  EXPECT_EQ(read_file(t.p / "cpu,cpuacct/pods/p1/cgroup.procs"), "7");
}

TEST(ShimCgroup, RefusesMissingRelativeAndEscapingPaths) {
  TempDir t;
  touch(t.p / "cgroup.controllers");
  try {
    join_shim_cgroup(7, "/nope", t.p);
    FAIL() << "joined a cgroup that does not exist";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::NotFound);
    EXPECT_NE(std::string(e.what()).find("/nope"), std::string::npos);
  }
  EXPECT_THROW(join_shim_cgroup(7, "pods", t.p), Error);
  EXPECT_THROW(join_shim_cgroup(7, "/../etc", t.p), Error);
}

}  // namespace
}  // namespace nvproxy::shim
