#include "checkpoint/process_list.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include "common/error.h"
#include "fake_gpu.h"

using namespace nvproxy;
using namespace nvproxy::checkpoint;
using namespace nvproxy::checkpoint::testing;

TEST(ProcessList, CgroupIsRecursive) {
  fs::path d = make_temp_dir();
  fs::create_directories(d / "sub" / "deeper");
  spit(d / "cgroup.procs", "10\n3\n");
  spit(d / "sub" / "cgroup.procs", "7\n");
  spit(d / "sub" / "deeper" / "cgroup.procs", "3\n99\n");
  EXPECT_EQ(cgroup_pids(d), (std::vector<pid_t>{3, 7, 10, 99}));
  EXPECT_EQ(CgroupLister(d / "sub").list(), (std::vector<pid_t>{3, 7, 99}));
  EXPECT_THROW(cgroup_pids(d / "missing"), Error);
  fs::remove_all(d);
}

TEST(ProcessList, CgroupOfPid) {
  fs::path proc = make_temp_dir();
  fs::create_directories(proc / "42");
  fs::create_directories(proc / "43");
  spit(proc / "42" / "cgroup", "0::/system.slice/containerd.service/k8s/abc\n");
  spit(proc / "43" / "cgroup", "12:pids:/default/c1\n4:cpu,freezer:/default/c1\n0::/init.scope\n");
  EXPECT_EQ(cgroup_of_pid(42, proc, "/sys/fs/cgroup"), fs::path("/sys/fs/cgroup/system.slice/containerd.service/k8s/abc"));
  EXPECT_EQ(cgroup_of_pid(43, proc, "/sys/fs/cgroup"), fs::path("/sys/fs/cgroup/freezer/default/c1"));
  EXPECT_THROW(cgroup_of_pid(44, proc), Error);
  // This test process has a real cgroup.
  EXPECT_FALSE(cgroup_of_pid(::getpid()).empty());
  fs::remove_all(proc);
}
