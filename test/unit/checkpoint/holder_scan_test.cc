#include "checkpoint/shared/holder_scan.h"

#include <gtest/gtest.h>

#include "fake_gpu.h"

using namespace nvproxy;
using namespace nvproxy::checkpoint;
using namespace nvproxy::checkpoint::testing;

namespace {

// A /proc look-alike: PID/{comm,cmdline,status,maps,fd/N -> target}.
struct FakeProc {
  fs::path root = make_temp_dir();
  ~FakeProc() { fs::remove_all(root); }
  void add(pid_t pid, const std::string& comm, const std::string& cmdline, std::vector<std::pair<int, std::string>> fds,
           const std::string& maps, pid_t ppid = 1) {
    fs::path d = root / std::to_string(pid);
    fs::create_directories(d / "fd");
    spit(d / "comm", comm + "\n");
    std::ofstream(d / "cmdline", std::ios::binary) << cmdline;
    spit(d / "status", "Name:\t" + comm + "\nPPid:\t" + std::to_string(ppid) + "\n");
    spit(d / "maps", maps);
    for (const auto& [fd, target] : fds) fs::create_symlink(target, d / "fd" / std::to_string(fd));
  }
};

}  // namespace

TEST(HolderScan, FakeProcTree) {
  FakeProc p;
  p.add(44, "python3", std::string("python3\0-m\0sglang\0", 19),
        {{0, "/dev/null"}, {17, "/dev/nvidiactl"}, {18, "/dev/nvidia0"}, {3, "/tmp/x"}},
        "7f0000000000-7f0000001000 rw-s 00000000 00:05 12 /dev/nvidia0\n"
        "7f0000001000-7f0000002000 rw-s 00000000 00:05 12 /dev/nvidia0\n"
        "7f0000002000-7f0000003000 r-xp 00000000 08:01 99 /usr/lib/x86_64-linux-gnu/libcuda.so.580.159.04\n"
        "7f0000003000-7f0000004000 r-xp 00000000 08:01 98 /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1\n"
        "7f0000004000-7f0000005000 rw-s 00000000 00:05 13 /dev/nvidia-uvm (deleted)\n"
        "7ffd00000000-7ffd00001000 rw-p 00000000 00:00 0 [stack]\n");
  p.add(91, "nvidia-smi",
        std::string("nvidia-smi\0-l\0"
                    "1\0",
                    16),
        {{3, "/dev/nvidia0"}}, "");
  p.add(50, "sh", "sh", {{0, "/dev/null"}}, "7f0000002000-7f0000003000 r-xp 00000000 08:01 99 /usr/lib/libnvidia-ml.so.1\n");

  ProcHolderScanner s({"/dev/nvidia*"}, p.root);
  auto hs = s.scan({91, 44, 50, 12345 /* gone */});
  ASSERT_EQ(hs.size(), 5u);
  EXPECT_EQ(hs[0].pid, 44);
  EXPECT_EQ(hs[0].kind, HolderKind::Fd);
  EXPECT_EQ(hs[0].fd, 17);
  EXPECT_EQ(hs[0].path, "/dev/nvidiactl");
  EXPECT_EQ(hs[0].name, "python3");
  EXPECT_EQ(hs[0].cmdline, "python3 -m sglang");
  EXPECT_EQ(hs[1].fd, 18);
  // Mappings: one per device; libraries are not holders; " (deleted)" is stripped.
  EXPECT_EQ(hs[2].kind, HolderKind::Mapping);
  EXPECT_EQ(hs[2].path, "/dev/nvidia0");
  EXPECT_EQ(hs[3].kind, HolderKind::Mapping);
  EXPECT_EQ(hs[3].path, "/dev/nvidia-uvm");
  EXPECT_EQ(hs[4].pid, 91);
  EXPECT_EQ(hs[4].cmdline, "nvidia-smi -l 1");

  auto info = s.info(44);
  ASSERT_TRUE(info);
  EXPECT_TRUE(info->maps_libcuda);
  EXPECT_TRUE(info->maps_libnvml);
  EXPECT_EQ(info->ppid, 1);
  EXPECT_FALSE(s.info(12345));
  auto sh = s.info(50);
  EXPECT_FALSE(sh->maps_libcuda);
  EXPECT_TRUE(sh->maps_libnvml);
}

TEST(HolderScan, GlobsCrossSlashesAndAreConfigurable) {
  ProcHolderScanner s({"/dev/nvidia*", "/dev/dri/*"});
  EXPECT_TRUE(s.matches("/dev/nvidia-caps/nvidia-cap1"));
  EXPECT_TRUE(s.matches("/dev/dri/renderD128"));
  EXPECT_FALSE(s.matches("/usr/lib/libnvidia-ml.so.1"));
  EXPECT_FALSE(s.matches("/dev/null"));
}

TEST(HolderScan, RealProcessesHoldingATempDevice) {
  FakeGpu gpu;
  pid_t fd_only = gpu.start_app({"--no-cuda"});
  pid_t mapped = gpu.start_app({"--no-cuda", "--map"}, "nvidiactl");
  ProcHolderScanner s({gpu.glob()});
  auto hs = s.scan({mapped, fd_only, ::getpid()});
  ASSERT_EQ(hs.size(), 3u) << "the test process itself maps the fake libcuda? it must not count";
  EXPECT_EQ(hs[0].pid, std::min(fd_only, mapped));
  std::map<pid_t, std::vector<Holder>> by;
  for (const auto& h : hs) by[h.pid].push_back(h);
  ASSERT_EQ(by[fd_only].size(), 1u);
  EXPECT_EQ(by[fd_only][0].kind, HolderKind::Fd);
  EXPECT_EQ(by[fd_only][0].path, gpu.device());
  EXPECT_EQ(by[fd_only][0].name, "fake_cuda_app");
  EXPECT_NE(by[fd_only][0].cmdline.find("--no-cuda"), std::string::npos);
  ASSERT_EQ(by[mapped].size(), 2u);
  EXPECT_EQ(by[mapped][0].kind, HolderKind::Fd);
  EXPECT_EQ(by[mapped][1].kind, HolderKind::Mapping);
  EXPECT_EQ(by[mapped][1].path, gpu.device("nvidiactl"));
  // A glob that matches nothing finds nothing.
  EXPECT_TRUE(ProcHolderScanner({"/dev/nvidia*"}).scan({fd_only}).empty());
}

// Issue 16, what the H200 showed (driver 580): a CUDA IPC exporter and importer both map the CUDA
// runtime's /dev/shm/cuda.shm.*; a managed allocation adds a /dev/nvidia-uvm range of its size to the
// driver's own 2 MiB one; a plain CUDA process has neither.
TEST(HolderScan, CudaIpcAndManagedMemoryAsTheMapsShowThem) {
  FakeProc p;
  const std::string common =
      "7f0000000000-7f0000200000 rw-s 00000000 00:05 13 /dev/nvidia-uvm\n"
      "7f0000200000-7f0003a00000 rw-s 00000000 00:05 12 /dev/nvidiactl\n";
  p.add(10, "python3", "plain", {}, common);
  p.add(11, "python3", "exporter", {{30, "/dev/shm/cuda.shm.0.1.1"}},
        common +
            "7f1000000000-7f1000001000 rw-s 00000000 00:1a 7 /dev/shm/cuda.shm.0.1.1\n"
            "7f1000001000-7f1000002000 rw-s 00000000 00:1a 8 /dev/shm/torch_1_744172648_0\n");
  p.add(12, "python3", "importer", {}, common + "7f1000000000-7f1000001000 rw-s 00000000 00:1a 7 /dev/shm/cuda.shm.0.1.1\n");
  p.add(13, "python3", "managed", {}, common + "7f2000000000-7f2040000000 rw-s 00000000 00:05 13 /dev/nvidia-uvm\n");
  ProcHolderScanner s({"/dev/nvidia*"}, p.root);
  auto plain = s.info(10), exp = s.info(11), imp = s.info(12), man = s.info(13);
  ASSERT_TRUE(plain && exp && imp && man);
  EXPECT_EQ(plain->cuda_ipc_file, "");
  EXPECT_EQ(plain->uvm_managed_bytes, 0u);
  EXPECT_EQ(exp->cuda_ipc_file, "/dev/shm/cuda.shm.0.1.1");
  EXPECT_EQ(imp->cuda_ipc_file, "/dev/shm/cuda.shm.0.1.1");
  EXPECT_EQ(imp->uvm_managed_bytes, 0u);
  EXPECT_EQ(man->uvm_managed_bytes, 1ULL << 30);
  EXPECT_EQ(man->cuda_ipc_file, "");
}
