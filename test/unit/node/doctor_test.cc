#include <gtest/gtest.h>

#include <unistd.h>

#include <fstream>

#include "checkpoint/facts/gpu_facts.h"
#include "common/scratch_dir.h"
#include "shim/node/doctor.h"

namespace nvproxy::node {
namespace {

TEST(Doctor, FindsTheCheckpointApiInTheFakeDriver) {
  const std::vector<std::string> api = {"cuCheckpointProcessLock", "cuCheckpointProcessCheckpoint", "cuCheckpointProcessRestore",
                                        "cuCheckpointProcessUnlock", "cuCheckpointProcessGetState"};
  EXPECT_TRUE(missing_symbols(FAKE_LIBCUDA_PATH, api).empty());
  EXPECT_EQ(missing_symbols(FAKE_LIBCUDA_PATH, {"cuCheckpointProcessNoSuch"}).size(), 1u);
  EXPECT_EQ(missing_symbols("/nonexistent/libcuda.so.1", api).size(), api.size());
}

// The checks' sizes are the restore preflight's (checkpoint::format_bytes), in the same form.
TEST(Doctor, HumanBytes) {
  EXPECT_EQ(checkpoint::format_bytes(512), "512 B");
  EXPECT_EQ(checkpoint::format_bytes(1536), "1.5 KiB");
  EXPECT_EQ(checkpoint::format_bytes(141ull << 30), "141.0 GiB");
}

Check find(const std::vector<Check>& cs, const std::string& name) {
  for (const auto& c : cs)
    if (c.name == name) return c;
  ADD_FAILURE() << "no check " << name;
  return {};
}

void put(const std::filesystem::path& p, const std::string& text) {
  std::filesystem::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

TEST(Doctor, HostChecksAgainstTheGpusMemory) {
  ScratchDir dir(std::filesystem::temp_directory_path() / ("node-doctor-" + std::to_string(::getpid())));
  const auto proc = dir.path() / "proc", sys = dir.path() / "sys";
  put(proc / "meminfo", "MemTotal:       67108864 kB\nMemFree: 1 kB\nMemAvailable:   33554432 kB\n");  // 64 GiB, 32 available
  put(proc / "sys/vm/dirty_bytes", "0\n");
  put(proc / "sys/vm/dirty_ratio", "20\n");
  put(sys / "kernel/mm/transparent_hugepage/enabled", "always [madvise] never\n");
  put(sys / "fs/cgroup/cgroup.controllers", "cpuset cpu io memory pids\n");
  DirectWaiter w;
  ProcessRunner runner(w);
  DoctorContext ctx{.runner = runner, .proc = proc, .sys = sys};
  ctx.cfg.checkpoint.content_store = dir.path().string();
  GpuFacts gpus{.driver_version = "580.1", .gpus = {{.name = "H200", .uuid = "GPU-1", .memory_bytes = 141ull << 30}}};
  std::vector<Check> out;
  host_checks(ctx, gpus, out);
  EXPECT_EQ(find(out, "cgroups").status, Status::Ok);
  EXPECT_EQ(find(out, "io_uring").detail.find("seccomp"), std::string::npos) << "containerd's version unknown";
  EXPECT_EQ(find(out, "transparent huge pages").status, Status::Warn);
  EXPECT_EQ(find(out, "vm.dirty").status, Status::Warn) << find(out, "vm.dirty").detail;
  const Check ram = find(out, "host memory");
  EXPECT_EQ(ram.status, Status::Fail) << ram.detail;
  EXPECT_TRUE(ram.needed);
  EXPECT_EQ(doctor_exit_code(out), 1);

  // A small GPU on a big host: memory fits; THP always is fine.
  put(sys / "kernel/mm/transparent_hugepage/enabled", "[always] madvise never\n");
  put(proc / "sys/vm/dirty_bytes", "68719476736\n");
  GpuFacts small{.driver_version = "580.1", .gpus = {{.name = "T4", .uuid = "GPU-2", .memory_bytes = 16ull << 30}}};
  out.clear();
  host_checks(ctx, small, out);
  EXPECT_EQ(find(out, "transparent huge pages").status, Status::Ok);
  EXPECT_EQ(find(out, "vm.dirty").status, Status::Ok);
  EXPECT_EQ(find(out, "host memory").status, Status::Ok);

  // What containerd's default seccomp profile does about io_uring, by its version.
  ctx.containerd = Version{2, 1, 0};
  out.clear();
  host_checks(ctx, small, out);
  EXPECT_NE(find(out, "io_uring").detail.find("seccomp profile denies io_uring"), std::string::npos)
      << find(out, "io_uring").detail;
  ctx.containerd = Version{1, 7, 24};
  out.clear();
  host_checks(ctx, small, out);
  EXPECT_NE(find(out, "io_uring").detail.find("1.x's RuntimeDefault seccomp profile allows"), std::string::npos);
}

TEST(Doctor, ExitCodeCountsOnlyNeededFailures) {
  std::vector<Check> cs = {{.name = "a", .status = Status::Warn}, {.name = "b", .status = Status::Fail, .needed = false}};
  EXPECT_EQ(doctor_exit_code(cs), 0);
  cs.push_back({.name = "c", .status = Status::Fail});
  EXPECT_EQ(doctor_exit_code(cs), 1);
}

}  // namespace
}  // namespace nvproxy::node
