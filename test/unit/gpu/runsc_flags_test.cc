#include "gpu/runsc_flags.h"

#include <gtest/gtest.h>

#include "common/error.h"
#include "gpu_test_util.h"

namespace nvproxy::gpu {
namespace {

using testing::base_spec;
using Flags = std::vector<std::string>;

TEST(RunscFlags, OnlyForGpuContainers) {
  GpuConfig cfg;
  EXPECT_EQ(runsc_flags(base_spec(), cfg), Flags{});
  EXPECT_EQ(runsc_flags(base_spec({"NVIDIA_VISIBLE_DEVICES=void"}), cfg), Flags{});
  EXPECT_EQ(runsc_flags(base_spec({"NVIDIA_VISIBLE_DEVICES=0"}), cfg), Flags{"--nvproxy"});
  cfg.nvproxy_driver_version = "550.54.15";
  EXPECT_EQ(runsc_flags(base_spec({"NVIDIA_VISIBLE_DEVICES=all"}), cfg),
            (Flags{"--nvproxy", "--nvproxy-driver-version=550.54.15"}));
}

TEST(RunscFlags, CriInjectedDevicesCount) {
  auto spec = base_spec({"NVIDIA_VISIBLE_DEVICES=void"});
  spec["linux"]["devices"] = {{{"path", "/dev/nvidiactl"}, {"type", "c"}, {"major", 195}, {"minor", 255}}};
  EXPECT_EQ(runsc_flags(spec, GpuConfig{}), Flags{"--nvproxy"});
}

TEST(RunscFlags, RecordCounts) {
  auto spec = base_spec();
  spec["annotations"] = {{"nvproxy.containerd.io/gpu", R"({"nodes":[{"path":"/dev/nvidia0"}],"request":{}})"}};
  EXPECT_EQ(runsc_flags(spec, GpuConfig{}), Flags{"--nvproxy"});
}

TEST(RunscFlags, OnAndOff) {
  GpuConfig cfg;
  cfg.nvproxy = "off";
  EXPECT_EQ(runsc_flags(base_spec({"NVIDIA_VISIBLE_DEVICES=0"}), cfg), Flags{});
  cfg.nvproxy = "on";
  EXPECT_EQ(runsc_flags(base_spec(), cfg), Flags{"--nvproxy"});
  cfg.nvproxy = "maybe";
  EXPECT_THROW(runsc_flags(base_spec(), cfg), Error);
}

}  // namespace
}  // namespace nvproxy::gpu
