// A gVisor pod's sandbox restored whole gets runsc's nvproxy flags under gpu.nvproxy: auto where
// the image's pod had GPU containers, and only then.
#include "shim/task/pod_restore_nvproxy.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

#include "checkpoint/image/image_record.h"
#include "common/scratch_dir.h"

namespace nvproxy::shim {
namespace {

class PodRestoreNvproxy : public ::testing::Test {
 protected:
  void SetUp() override {
    std::filesystem::create_directories(bundle());
    std::filesystem::create_directories(image());
    std::ofstream(bundle() / "config.json") << R"({"ociVersion":"1.0.2","process":{"args":["/pause"]},
      "annotations":{"io.kubernetes.cri.container-type":"sandbox","io.kubernetes.cri.sandbox-id":"sb"}})";
    s.id = "sb";
    s.bundle = bundle();
    s.pod_restore = PodRestoreSetup{.sandbox = "sb", .name = {}, .names = {"counter", "cuda"}};
    s.runtime_global = {"--network=none"};
  }
  void write_record(int cuda_gpus) {
    checkpoint::ImageRecord r;
    r.container = "w1";
    r.runtime = "runsc";
    r.pod = checkpoint::PodRecord{
        .sandbox_id = "sb",
        .containers = {
            {.id = "sb", .sandbox = true}, {.name = "counter", .id = "w1"}, {.name = "cuda", .id = "k1", .gpus = cuda_gpus}}};
    checkpoint::write_image_record(image(), r);
  }
  std::filesystem::path bundle() const { return dir.path() / "bundle"; }
  std::filesystem::path image() const { return dir.path() / "image"; }

  ScratchDir dir{std::filesystem::temp_directory_path() / ("nvproxy-podnv-" + std::to_string(::getpid()))};
  Logger log{-1};
  ContainerSetup s;
};

TEST_F(PodRestoreNvproxy, AnImageOfGpuContainersBootsTheSandboxWithNvproxyUnderAuto) {
  write_record(1);
  auto flags = pod_sandbox_restore_flags(s, image(), log);
  ASSERT_EQ(flags.size(), 2u);
  EXPECT_EQ(flags[0], "--network=none");
  EXPECT_EQ(flags[1], "--nvproxy");
  s.config.gpu.nvproxy_driver_version = "580.159.04";
  flags = pod_sandbox_restore_flags(s, image(), log);
  EXPECT_NE(std::find(flags.begin(), flags.end(), "--nvproxy-driver-version=580.159.04"), flags.end());
}

TEST_F(PodRestoreNvproxy, NothingAddedWhereTheImageHadNoGpuOrTheConfigDecides) {
  write_record(0);
  EXPECT_EQ(pod_sandbox_restore_flags(s, image(), log), s.runtime_global) << "no GPU container in the image";
  write_record(1);
  s.config.gpu.nvproxy = "off";
  EXPECT_EQ(pod_sandbox_restore_flags(s, image(), log), s.runtime_global) << "gpu.nvproxy: off";
  s.config.gpu.nvproxy = "auto";
  s.runtime_global = {"--nvproxy"};
  EXPECT_EQ(pod_sandbox_restore_flags(s, image(), log), s.runtime_global) << "already there (on)";
  s.runtime_global = {};
  s.pod_restore->name = "cuda";
  EXPECT_TRUE(pod_sandbox_restore_flags(s, image(), log).empty()) << "a container of the pod, not its sandbox";
  s.pod_restore.reset();
  EXPECT_TRUE(pod_sandbox_restore_flags(s, image(), log).empty()) << "no pod restore";
}

TEST_F(PodRestoreNvproxy, AnUnreadableRecordAddsNothing) {
  std::ofstream(image() / "nvproxy-cuda.json") << "{ not json";
  EXPECT_EQ(pod_sandbox_restore_flags(s, image(), log), s.runtime_global);
}

}  // namespace
}  // namespace nvproxy::shim
