#include "gpu/device_request.h"

#include <gtest/gtest.h>

#include "common/error.h"
#include "gpu_test_util.h"

namespace nvproxy::gpu {
namespace {

using testing::base_spec;

TEST(DeviceRequest, UnsetMeansNoRequest) {
  auto r = parse_request(base_spec());
  EXPECT_FALSE(r.requested);
  EXPECT_EQ(r.capabilities, (std::set<std::string>{"compute", "utility"}));
}

TEST(DeviceRequest, VoidNoneEmptyRequestNothing) {
  for (const char* v : {"void", "none", ""}) {
    auto r = parse_request(base_spec({std::string("NVIDIA_VISIBLE_DEVICES=") + v}));
    EXPECT_FALSE(r.requested) << v;
    EXPECT_TRUE(r.visible.empty()) << v;
  }
}

TEST(DeviceRequest, AllIndicesUuidsAndCdiNames) {
  auto r = parse_request(base_spec({"NVIDIA_VISIBLE_DEVICES=all"}));
  EXPECT_TRUE(r.requested);
  EXPECT_TRUE(r.visible_all);
  r = parse_request(base_spec({"NVIDIA_VISIBLE_DEVICES=0, 1,GPU-abcdef12-3456,0,nvidia.com/gpu=2"}));
  EXPECT_EQ(r.visible, (std::vector<std::string>{"0", "1", "GPU-abcdef12-3456"}));
  EXPECT_EQ(r.cdi_names, std::vector<std::string>{"nvidia.com/gpu=2"});
}

TEST(DeviceRequest, LastEnvWins) {
  auto r = parse_request(base_spec({"NVIDIA_VISIBLE_DEVICES=0", "NVIDIA_VISIBLE_DEVICES=void"}));
  EXPECT_FALSE(r.requested);
}

TEST(DeviceRequest, BadEntryNamesTheEnv) {
  try {
    parse_request(base_spec({"NVIDIA_VISIBLE_DEVICES=0,gpu-zero"}));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("NVIDIA_VISIBLE_DEVICES: entry \"gpu-zero\""), std::string::npos) << e.what();
  }
}

TEST(DeviceRequest, CdiAnnotations) {
  auto s = base_spec();
  s["annotations"] = {{"cdi.k8s.io/nvidia-device-plugin_uuid", "nvidia.com/gpu=0,nvidia.com/gpu=1"},
                      {"nvidia.cdi.k8s.io/gpu", "nvidia.com/gpu=1"},
                      {"io.kubernetes.cri.container-name", "x=y"}};
  auto r = parse_request(s);
  EXPECT_TRUE(r.requested);
  EXPECT_EQ(r.cdi_names, (std::vector<std::string>{"nvidia.com/gpu=0", "nvidia.com/gpu=1"}));
  s["annotations"]["cdi.k8s.io/bad"] = "gpu0";
  try {
    parse_request(s);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("annotations[\"cdi.k8s.io/bad\"]"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(is_cdi_annotation("cdi.k8s.io/x"));
  EXPECT_TRUE(is_cdi_annotation("nvidia.cdi.k8s.io/x"));
  EXPECT_FALSE(is_cdi_annotation("xcdi.k8s.io/x"));
  EXPECT_FALSE(is_cdi_annotation("cdi.k8s.io/"));
}

TEST(DeviceRequest, Capabilities) {
  auto r = parse_request(base_spec({"NVIDIA_VISIBLE_DEVICES=0", "NVIDIA_DRIVER_CAPABILITIES=video,utility,bogus"}));
  EXPECT_EQ(r.capabilities, (std::set<std::string>{"utility", "video"}));
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_NE(r.warnings[0].find("bogus"), std::string::npos);
  r = parse_request(base_spec({"NVIDIA_DRIVER_CAPABILITIES=all"}));
  EXPECT_EQ(r.capabilities, known_capabilities());
}

}  // namespace
}  // namespace nvproxy::gpu
