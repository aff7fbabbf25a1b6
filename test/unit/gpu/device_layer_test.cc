#include "gpu/device_layer.h"

#include <gtest/gtest.h>

#include "common/error.h"
#include "gpu/record.h"
#include "gpu_test_util.h"

namespace nvproxy::gpu {
namespace {

using namespace testing;
using nlohmann::json;

const json* device(const json& spec, const std::string& path) {
  for (const auto& d : spec["linux"]["devices"])
    if (d["path"] == path) return &d;
  return nullptr;
}

json record_of(const json& spec) {
  return json::parse(spec["annotations"][kRecordAnnotation].get<std::string>());
}

class DeviceLayer : public ::testing::Test {
 protected:
  FakeHost host;
  Logger log{-1};
};

TEST_F(DeviceLayer, NoRequestLeavesSpecUntouched) {
  host.add_cdi("valid/nvidia.yaml");
  for (auto env : std::vector<std::vector<std::string>>{
           {}, {"NVIDIA_VISIBLE_DEVICES=none"}, {"NVIDIA_VISIBLE_DEVICES=void"}, {"NVIDIA_VISIBLE_DEVICES="}}) {
    json spec = base_spec(env), before = spec;
    auto r = apply_device_layer(spec, host.config(), log);
    EXPECT_FALSE(r.gpu_requested);
    EXPECT_EQ(spec, before);
  }
}

TEST_F(DeviceLayer, ModeOffLeavesSpecUntouched) {
  json spec = base_spec({"NVIDIA_VISIBLE_DEVICES=all"}), before = spec;
  GpuConfig cfg = host.config();
  cfg.mode = "off";
  EXPECT_FALSE(apply_device_layer(spec, cfg, log).gpu_requested);
  EXPECT_EQ(spec, before);
}

TEST_F(DeviceLayer, CdiByIndexWithHostMajorMinor) {
  host.add_cdi("valid/nvidia.yaml");
  json spec = base_spec({"NVIDIA_VISIBLE_DEVICES=1"});
  auto r = apply_device_layer(spec, host.config(), log);
  EXPECT_TRUE(r.gpu_requested);
  EXPECT_EQ(r.mode, "cdi");
  EXPECT_EQ(r.devices, std::vector<std::string>{"nvidia.com/gpu=1"});
  const json* n1 = device(spec, "/dev/nvidia1");
  ASSERT_NE(n1, nullptr);
  EXPECT_EQ((*n1)["major"], 195);
  EXPECT_EQ((*n1)["minor"], 1);
  EXPECT_EQ((*device(spec, "/dev/nvidiactl"))["minor"], 255);
  EXPECT_EQ((*device(spec, "/dev/nvidia-uvm"))["major"], 238);
  EXPECT_EQ(device(spec, "/dev/nvidia0"), nullptr);
  EXPECT_EQ(count_where(spec["linux"]["resources"]["devices"], "minor", 1), 2u);  // nvidia1 and uvm-tools
  EXPECT_EQ(count_where(spec["mounts"], "destination", "/usr/lib/x86_64-linux-gnu/libcuda.so.580.159.04"), 1u);
  EXPECT_EQ(spec["hooks"]["createContainer"].size(), 2u);
  EXPECT_EQ(spec["process"]["env"].back(), "NVIDIA_VISIBLE_DEVICES=void");
  json rec = record_of(spec);
  EXPECT_EQ(rec["mode"], "cdi");
  EXPECT_EQ(rec["devices"], json({"nvidia.com/gpu=1"}));
  EXPECT_EQ(rec["nodes"].size(), 4u);
  EXPECT_EQ(count_where(rec["nodes"], "path", "/dev/nvidia1"), 1u);
  EXPECT_EQ(rec["ldDirs"], json({"/usr/lib/x86_64-linux-gnu"}));
  EXPECT_FALSE(rec.contains("hook"));
}

TEST_F(DeviceLayer, ApplyingTwiceAddsNothing) {
  host.add_cdi("valid/nvidia.yaml");
  GpuConfig cfg = host.config();
  cfg.hook_binary = "/usr/bin/containerd-shim-nvproxy-v1";
  json spec = base_spec({"NVIDIA_VISIBLE_DEVICES=all"});
  auto first = apply_device_layer(spec, cfg, log);
  EXPECT_GT(first.added, 0u);
  json once = spec;
  // The first apply set NVIDIA_VISIBLE_DEVICES=void (CDI env): the record keeps the request.
  auto second = apply_device_layer(spec, cfg, log);
  EXPECT_TRUE(second.gpu_requested);
  EXPECT_EQ(second.added, 0u);
  EXPECT_EQ(spec, once);
}

TEST_F(DeviceLayer, RecognisesEditsCriAlreadyApplied) {
  host.add_cdi("valid/nvidia.yaml");
  json spec = base_spec({"NVIDIA_VISIBLE_DEVICES=0"});
  apply_device_layer(spec, host.config(), log);
  // What containerd's CRI hands the shim: CDI edits applied, a CDI annotation, no record of ours.
  spec["annotations"].erase(kRecordAnnotation);
  spec["annotations"]["cdi.k8s.io/nvidia-device-plugin_0"] = "nvidia.com/gpu=0";
  json cri = spec;
  auto r = apply_device_layer(spec, host.config(), log);
  EXPECT_EQ(r.added, 0u);
  spec["annotations"].erase(kRecordAnnotation);
  EXPECT_EQ(spec, cri);
}

TEST_F(DeviceLayer, HookAddedWithOurBinary) {
  host.add_cdi("valid/nvidia.yaml");
  GpuConfig cfg = host.config();
  cfg.hook_binary = "/usr/bin/containerd-shim-nvproxy-v1";
  json spec = base_spec({"NVIDIA_VISIBLE_DEVICES=0"});
  apply_device_layer(spec, cfg, log);
  const json& hooks = spec["hooks"]["createContainer"];
  ASSERT_EQ(hooks.size(), 3u);
  EXPECT_EQ(hooks[2]["path"], cfg.hook_binary);
  EXPECT_EQ(hooks[2]["args"], json({cfg.hook_binary, "hook", "gpu-setup"}));
  EXPECT_EQ(record_of(spec)["hook"], "gpu-setup");
  EXPECT_FALSE(spec["hooks"].contains("createRuntime"));
}

TEST_F(DeviceLayer, HookUnderRunscGetsRunscMode) {
  host.add_cdi("valid/nvidia.yaml");
  GpuConfig cfg = host.config();
  cfg.hook_binary = "/usr/bin/containerd-shim-nvproxy-v1";
  cfg.runtime = "runsc";
  json spec = base_spec({"NVIDIA_VISIBLE_DEVICES=0"});
  apply_device_layer(spec, cfg, log);
  const json& hooks = spec["hooks"]["createContainer"];
  ASSERT_EQ(hooks.size(), 3u);
  EXPECT_EQ(hooks[2]["args"], json({cfg.hook_binary, "hook", "gpu-setup", "--runsc"}));
}

TEST_F(DeviceLayer, AutoFallsBackToDiscoveryWithoutSpec) {
  json spec = base_spec({"NVIDIA_VISIBLE_DEVICES=" + std::string(kUuidB)});
  auto r = apply_device_layer(spec, host.config(), log);
  EXPECT_EQ(r.mode, "legacy");
  EXPECT_EQ(r.devices, std::vector<std::string>{kUuidB});
  EXPECT_EQ((*device(spec, "/dev/nvidia0"))["major"], 195);
  EXPECT_EQ(device(spec, "/dev/nvidia1"), nullptr);
  EXPECT_EQ(count_where(spec["mounts"], "destination", "/usr/lib/x86_64-linux-gnu/libcuda.so.580.0"), 1u);
  EXPECT_EQ(count_where(spec["mounts"], "destination", "/usr/lib/x86_64-linux-gnu/libcuda.so.1"), 0u);
  json rec = record_of(spec);
  EXPECT_EQ(rec["mode"], "legacy");
  EXPECT_EQ(count_where(rec["symlinks"], "path", "/usr/lib/x86_64-linux-gnu/libcuda.so.1"), 1u);
  EXPECT_EQ(rec["request"]["capabilities"], json({"compute", "utility"}));
  // legacy is idempotent as well
  json once = spec;
  EXPECT_EQ(apply_device_layer(spec, host.config(), log).added, 0u);
  EXPECT_EQ(spec, once);
}

TEST_F(DeviceLayer, CdiModeFailsWhenNoSpecMatchesAndListsBadFiles) {
  host.add_cdi("bad/bad-kind.yaml");
  GpuConfig cfg = host.config();
  cfg.mode = "cdi";
  json spec = base_spec({"NVIDIA_VISIBLE_DEVICES=0"});
  try {
    apply_device_layer(spec, cfg, log);
    FAIL();
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_EQ(e.code(), Code::NotFound);
    EXPECT_NE(m.find("nvidia.com/gpu=0"), std::string::npos) << m;
    EXPECT_NE(m.find("bad-kind.yaml: kind"), std::string::npos) << m;
  }
}

TEST_F(DeviceLayer, GoodSpecStillWorksBesideBadOnes) {
  host.add_cdi("valid/nvidia.yaml");
  host.add_cdi("bad/bad-yaml.yaml");
  host.add_cdi("bad/duplicate-device.yaml");
  json spec = base_spec();
  spec["annotations"] = {{"cdi.k8s.io/gpu", "nvidia.com/gpu=" + std::string(kUuidA)}};
  auto r = apply_device_layer(spec, host.config(), log);
  EXPECT_EQ(r.mode, "cdi");
  EXPECT_NE(device(spec, "/dev/nvidia0"), nullptr);
}

TEST_F(DeviceLayer, LegacyModeRefusesCdiNames) {
  GpuConfig cfg = host.config();
  cfg.mode = "legacy";
  json spec = base_spec();
  spec["annotations"] = {{"cdi.k8s.io/gpu", "nvidia.com/gpu=0"}};
  EXPECT_THROW(apply_device_layer(spec, cfg, log), Error);
}

TEST_F(DeviceLayer, ConflictBetweenSpecsNamesFileAndField) {
  write(host.cdi / "a.yaml",
        "cdiVersion: 0.5.0\nkind: a.com/x\ndevices:\n- name: d\n  containerEdits:\n    mounts:\n"
        "    - {hostPath: /opt/a/lib.so, containerPath: /usr/lib/lib.so}\n");
  write(host.cdi / "b.yaml",
        "cdiVersion: 0.5.0\nkind: b.com/x\ndevices:\n- name: d\n  containerEdits:\n    mounts:\n"
        "    - {hostPath: /opt/b/lib.so, containerPath: /usr/lib/lib.so}\n");
  json spec = base_spec();
  spec["annotations"] = {{"cdi.k8s.io/a", "a.com/x=d,b.com/x=d"}};
  try {
    apply_device_layer(spec, host.config(), log);
    FAIL();
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("a.yaml: devices[0].containerEdits.mounts[0]"), std::string::npos) << m;
    EXPECT_NE(m.find("b.yaml: devices[0].containerEdits.mounts[0]"), std::string::npos) << m;
  }
}

TEST_F(DeviceLayer, BadConfigIsRejected) {
  GpuConfig cfg = host.config();
  cfg.mode = "magic";
  json spec = base_spec({"NVIDIA_VISIBLE_DEVICES=0"});
  EXPECT_THROW(apply_device_layer(spec, cfg, log), Error);
}

TEST_F(DeviceLayer, DescribeDoesNotChangeSpec) {
  host.add_cdi("valid/nvidia.yaml");
  json spec = base_spec({"NVIDIA_VISIBLE_DEVICES=0"}), before = spec;
  std::string text = describe_edits(spec, host.config(), false);
  EXPECT_EQ(spec, before);
  EXPECT_NE(text.find("device /dev/nvidia0 c 195:0"), std::string::npos) << text;
  EXPECT_NE(text.find("mode: cdi"), std::string::npos) << text;
  json j = json::parse(describe_edits(spec, host.config(), true));
  EXPECT_EQ(j["devices"], json({"nvidia.com/gpu=0"}));
  EXPECT_EQ(j["runscFlags"], json({"--nvproxy"}));
  EXPECT_TRUE(j["spec"]["annotations"].contains(kRecordAnnotation));
}

}  // namespace
}  // namespace nvproxy::gpu
