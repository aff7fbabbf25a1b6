#include "gpu/discovery.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "common/error.h"
#include "gpu_test_util.h"

namespace nvproxy::gpu {
namespace {

using namespace testing;

GpuRequest request(std::vector<std::string> visible, std::set<std::string> caps = {"compute", "utility"}) {
  GpuRequest r;
  for (auto& v : visible) (v == "all" ? (void)(r.visible_all = true) : r.visible.push_back(v));
  r.capabilities = std::move(caps);
  r.requested = true;
  return r;
}

std::vector<std::string> node_paths(const ContainerEdits& e) {
  std::vector<std::string> out;
  for (const auto& n : e.device_nodes) out.push_back(n.path);
  return out;
}

const MountEdit* mount_at(const ContainerEdits& e, const std::string& dest) {
  for (const auto& m : e.mounts)
    if (m.container_path == dest) return &m;
  return nullptr;
}

TEST(Discovery, ReadsGpusInPciOrder) {
  FakeHost h;
  auto gpus = read_host_gpus(h.proc.string(), h.dev.string());
  ASSERT_EQ(gpus.size(), 2u);
  EXPECT_EQ(gpus[0].bus_id, "0000:3b:00.0");
  EXPECT_EQ(gpus[0].minor, 1u);
  EXPECT_EQ(gpus[0].uuid, kUuidA);
  EXPECT_EQ(gpus[1].minor, 0u);
  EXPECT_EQ(read_driver_version(h.proc.string()), "580.0");
}

TEST(Discovery, FallsBackToDevNodesWithoutProc) {
  FakeHost h;
  auto gpus = read_host_gpus((h.tmp.path / "noproc").string(), h.dev.string());
  ASSERT_EQ(gpus.size(), 2u);
  EXPECT_EQ(gpus[0].minor, 0u);
  EXPECT_TRUE(gpus[0].uuid.empty());
}

TEST(Discovery, IndexMapsToMinorAndControlNodesComeAlong) {
  FakeHost h;
  auto d = discover(request({"0"}), h.config());
  auto paths = node_paths(d.edits);
  EXPECT_EQ(paths, (std::vector<std::string>{"/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset",
                                             "/dev/nvidia-caps/nvidia-cap1", "/dev/nvidia-caps/nvidia-cap2", "/dev/nvidia1"}));
  EXPECT_EQ(d.devices, std::vector<std::string>{kUuidA});
  EXPECT_EQ(d.edits.device_nodes.back().host_path, (h.dev / "nvidia1").string());
}

TEST(Discovery, UuidAndAll) {
  FakeHost h;
  auto d = discover(request({kUuidB}), h.config());
  EXPECT_EQ(node_paths(d.edits).back(), "/dev/nvidia0");
  d = discover(request({"all"}), h.config());
  EXPECT_EQ(d.devices, (std::vector<std::string>{kUuidA, kUuidB}));
}

TEST(Discovery, UnknownGpuIsNotFound) {
  FakeHost h;
  try {
    discover(request({"5"}), h.config());
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::NotFound);
    EXPECT_NE(std::string(e.what()).find("\"5\""), std::string::npos);
  }
  EXPECT_THROW(discover(request({"GPU-deadbeef"}), h.config()), Error);
}

TEST(Discovery, NoDriverIsFailedPrecondition) {
  FakeHost h;
  fs::remove(h.dev / "nvidiactl");
  try {
    discover(request({"0"}), h.config());
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::FailedPrecondition);
    EXPECT_NE(std::string(e.what()).find("nvidiactl"), std::string::npos);
  }
}

TEST(Discovery, MountsRealFilesOnlyWithSonameLinks) {
  FakeHost h;
  auto d = discover(request({"0"}), h.config());
  const std::string lib = "/usr/lib/x86_64-linux-gnu/";
  const MountEdit* cuda = mount_at(d.edits, lib + "libcuda.so.580.0");
  ASSERT_NE(cuda, nullptr);
  EXPECT_EQ(cuda->host_path, (h.driver / "usr/lib/x86_64-linux-gnu/libcuda.so.580.0").string());
  EXPECT_EQ(cuda->options, (std::vector<std::string>{"ro", "nosuid", "nodev", "bind"}));
  EXPECT_EQ(mount_at(d.edits, lib + "libcuda.so.535.1"), nullptr) << "version from /proc must win";
  EXPECT_EQ(mount_at(d.edits, lib + "libcuda.so.1"), nullptr) << "a symlink must never be bound";
  EXPECT_NE(mount_at(d.edits, lib + "libnvidia-ml.so.580.0"), nullptr);
  EXPECT_NE(mount_at(d.edits, lib + "libnvidia-ptxjitcompiler.so.580.0"), nullptr);
  EXPECT_EQ(mount_at(d.edits, lib + "libnvcuvid.so.580.0"), nullptr) << "video capability not requested";
  for (const auto& m : d.edits.mounts) {
    EXPECT_FALSE(fs::is_symlink(m.host_path)) << m.host_path;
    EXPECT_TRUE(std::find(m.options.begin(), m.options.end(), "rbind") == m.options.end());
  }
  auto has_link = [&](const std::string& p, const std::string& t) {
    return std::any_of(d.edits.symlinks.begin(), d.edits.symlinks.end(),
                       [&](const SymlinkEdit& s) { return s.path == p && s.target == t; });
  };
  EXPECT_TRUE(has_link(lib + "libcuda.so.1", "libcuda.so.580.0"));
  EXPECT_TRUE(has_link(lib + "libcuda.so", "libcuda.so.580.0"));
  EXPECT_TRUE(has_link("/usr/local/nvidia/lib64/libcuda.so.1", lib + "libcuda.so.580.0"));
  // tools: nvidia-smi is a link in the driver root; the real file is bound, the link recreated
  EXPECT_NE(mount_at(d.edits, "/usr/lib/nvidia/nvidia-smi"), nullptr);
  EXPECT_TRUE(has_link("/usr/bin/nvidia-smi", "/usr/lib/nvidia/nvidia-smi"));
  EXPECT_NE(mount_at(d.edits, "/usr/bin/nvidia-debugdump"), nullptr);
}

TEST(Discovery, CapabilitiesDecideLibraries) {
  FakeHost h;
  auto d = discover(request({"0"}, {"utility"}), h.config());
  EXPECT_EQ(mount_at(d.edits, "/usr/lib/x86_64-linux-gnu/libcuda.so.580.0"), nullptr);
  EXPECT_NE(mount_at(d.edits, "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.580.0"), nullptr);
  d = discover(request({"0"}, {"video"}), h.config());
  EXPECT_NE(mount_at(d.edits, "/usr/lib/x86_64-linux-gnu/libnvcuvid.so.580.0"), nullptr);
}

TEST(Discovery, MissingLibcudaForComputeFails) {
  FakeHost h;
  for (const char* f : {"libcuda.so.580.0", "libcuda.so.535.1"}) fs::remove(h.driver / "usr/lib/x86_64-linux-gnu" / f);
  try {
    discover(request({"0"}), h.config());
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("libcuda.so.*"), std::string::npos) << e.what();
  }
}

TEST(Discovery, ResolveInRootKeepsAbsoluteLinksInside) {
  FakeHost h;
  auto r = resolve_in_root(h.driver, "/usr/local/nvidia/lib64/libcuda.so.1");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->string(), "/usr/lib/x86_64-linux-gnu/libcuda.so.580.0");
  link(h.driver / "loop", "loop");
  EXPECT_FALSE(resolve_in_root(h.driver, "/loop"));
  EXPECT_FALSE(resolve_in_root(h.driver, "/nope"));
}

// The GPU machine's layout: tools only in /usr/local/nvidia/bin, which no image has on PATH.
TEST(Discovery, ToolOffPathGetsAUsrBinLink) {
  FakeHost h;
  fs::path bin = h.driver / "usr/local/nvidia/bin";
  fs::create_directories(bin);
  std::ofstream(bin / "nvidia-cuda-mps-control") << "#!/bin/sh\n";
  auto d = discover(request({"0"}), h.config());
  EXPECT_NE(mount_at(d.edits, "/usr/local/nvidia/bin/nvidia-cuda-mps-control"), nullptr);
  EXPECT_TRUE(std::any_of(d.edits.symlinks.begin(), d.edits.symlinks.end(), [](const SymlinkEdit& s) {
    return s.path == "/usr/bin/nvidia-cuda-mps-control" && s.target == "/usr/local/nvidia/bin/nvidia-cuda-mps-control";
  }));
  // a tool found in /usr/bin itself gets no extra link
  EXPECT_TRUE(std::none_of(d.edits.symlinks.begin(), d.edits.symlinks.end(),
                           [](const SymlinkEdit& s) { return s.path == "/usr/bin/nvidia-debugdump"; }));
}

// The GPU machine: /usr/bin/nvidia-smi is a wrapper script exec'ing /usr/local/nvidia/bin/nvidia-smi.
TEST(Discovery, WrapperScriptYieldsToTheRealTool) {
  FakeHost h;
  fs::path bin = h.driver / "usr/local/nvidia/bin";
  fs::create_directories(bin);
  fs::remove(h.driver / "usr/bin/nvidia-smi");
  std::ofstream(h.driver / "usr/bin/nvidia-smi") << "#!/bin/sh\nexec /usr/local/nvidia/bin/nvidia-smi \"$@\"\n";
  std::ofstream(bin / "nvidia-smi") << "\x7f"
                                    << "ELF";
  auto d = discover(request({"0"}), h.config());
  EXPECT_NE(mount_at(d.edits, "/usr/local/nvidia/bin/nvidia-smi"), nullptr);
  EXPECT_EQ(mount_at(d.edits, "/usr/bin/nvidia-smi"), nullptr);
  EXPECT_TRUE(std::any_of(d.edits.symlinks.begin(), d.edits.symlinks.end(), [](const SymlinkEdit& s) {
    return s.path == "/usr/bin/nvidia-smi" && s.target == "/usr/local/nvidia/bin/nvidia-smi";
  }));
}

}  // namespace
}  // namespace nvproxy::gpu
