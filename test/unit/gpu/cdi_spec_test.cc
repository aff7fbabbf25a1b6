#include "gpu/cdi_spec.h"

#include <gtest/gtest.h>

#include "common/error.h"
#include "gpu_test_util.h"

namespace nvproxy::gpu {
namespace {

using testing::fixture;

std::string load_error(const std::string& rel) {
  try {
    load_cdi_spec(fixture(rel));
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::InvalidArgument) << e.what();
    return e.what();
  }
  ADD_FAILURE() << rel << " loaded without error";
  return "";
}

TEST(CdiSpec, LoadsNvidiaCtkShape) {
  CdiSpec s = load_cdi_spec(fixture("valid/nvidia.yaml"));
  EXPECT_EQ(s.version, "0.5.0");
  EXPECT_EQ(s.kind, "nvidia.com/gpu");
  ASSERT_EQ(s.devices.size(), 5u);
  EXPECT_EQ(s.devices[0].name, "0");  // quoted "0" stays a string
  ASSERT_NE(s.find(testing::kUuidA), nullptr);
  ASSERT_NE(s.find("all"), nullptr);
  EXPECT_EQ(s.find("all")->edits.device_nodes.size(), 2u);
  ASSERT_EQ(s.edits.device_nodes.size(), 3u);
  EXPECT_EQ(s.edits.device_nodes[0].path, "/dev/nvidiactl");
  EXPECT_FALSE(s.edits.device_nodes[0].major.has_value());
  ASSERT_EQ(s.edits.mounts.size(), 4u);
  EXPECT_EQ(s.edits.mounts[0].options, (std::vector<std::string>{"ro", "nosuid", "nodev", "bind"}));
  ASSERT_EQ(s.edits.hooks.size(), 2u);
  EXPECT_EQ(s.edits.hooks[1].hook_name, "createContainer");
  EXPECT_EQ(s.edits.hooks[1].args[2], "update-ldcache");
  ASSERT_EQ(s.edits.env.size(), 1u);
  EXPECT_EQ(s.edits.env[0].key, "NVIDIA_VISIBLE_DEVICES");
  EXPECT_EQ(s.edits.env[0].value, "void");
  EXPECT_NE(s.edits.mounts[2].origin.find("nvidia.yaml: containerEdits.mounts[2]"), std::string::npos);
}

TEST(CdiSpec, LoadsJsonForm) {
  CdiSpec s = load_cdi_spec(fixture("valid/example-fpga.json"));
  EXPECT_EQ(s.kind, "example.com/fpga");
  ASSERT_EQ(s.devices.size(), 2u);
  const auto& n = s.devices[0].edits.device_nodes.at(0);
  EXPECT_EQ(n.major, 240);
  EXPECT_EQ(n.minor, 0);
  EXPECT_EQ(n.file_mode, 0660u);
  EXPECT_EQ(n.permissions, "rw");
  EXPECT_EQ(s.edits.additional_gids, std::vector<uint32_t>{44});
}

TEST(CdiSpec, YamlOctalAndQuotedScalars) {
  CdiSpec s = parse_cdi_spec(
      "cdiVersion: 0.6.0\nkind: a.com/b\ndevices:\n- name: '007'\n  containerEdits:\n    deviceNodes:\n"
      "    - {path: /dev/x, type: c, major: 10, minor: 0x10, fileMode: 0640}\n",
      "inline.yaml");
  EXPECT_EQ(s.devices[0].name, "007");
  EXPECT_EQ(s.devices[0].edits.device_nodes[0].minor, 16);
  EXPECT_EQ(s.devices[0].edits.device_nodes[0].file_mode, 0640u);
}

TEST(CdiSpec, MissingVersionNamesFileAndField) {
  std::string m = load_error("bad/missing-version.yaml");
  EXPECT_NE(m.find("missing-version.yaml"), std::string::npos) << m;
  EXPECT_NE(m.find("cdiVersion"), std::string::npos) << m;
}

TEST(CdiSpec, UnknownVersion) {
  std::string m = load_error("bad/unknown-version.yaml");
  EXPECT_NE(m.find("cdiVersion: unknown version \"9.9.9\""), std::string::npos) << m;
}

TEST(CdiSpec, BadKind) {
  std::string m = load_error("bad/bad-kind.yaml");
  EXPECT_NE(m.find("bad-kind.yaml: kind:"), std::string::npos) << m;
}

TEST(CdiSpec, DuplicateDevice) {
  std::string m = load_error("bad/duplicate-device.yaml");
  EXPECT_NE(m.find("devices[1].name"), std::string::npos) << m;
  EXPECT_NE(m.find("duplicate"), std::string::npos) << m;
  EXPECT_NE(m.find("devices[0]"), std::string::npos) << m;
}

TEST(CdiSpec, BadYamlNamesLine) {
  std::string m = load_error("bad/bad-yaml.yaml");
  EXPECT_NE(m.find("bad-yaml.yaml: line"), std::string::npos) << m;
}

TEST(CdiSpec, RelativeContainerPath) {
  std::string m = load_error("bad/relative-mount.yaml");
  EXPECT_NE(m.find("devices[0].containerEdits.mounts[0].containerPath"), std::string::npos) << m;
}

TEST(CdiSpec, UnknownHookName) {
  std::string m = load_error("bad/bad-hook.yaml");
  EXPECT_NE(m.find("devices[0].containerEdits.hooks[0].hookName"), std::string::npos) << m;
}

TEST(CdiSpec, WrongTypesNameTheField) {
  try {
    parse_cdi_spec(
        "cdiVersion: 0.5.0\nkind: a.com/b\ndevices:\n- name: x\n  containerEdits:\n    deviceNodes:\n"
        "    - {path: /dev/x, major: abc}\n",
        "t.yaml");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("t.yaml: devices[0].containerEdits.deviceNodes[0].major: must be an integer"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(parse_cdi_spec("cdiVersion: 0.5.0\nkind: a.com/b\ndevices: []\n", "t.yaml"), Error);
  EXPECT_THROW(parse_cdi_spec("- just a list\n", "t.yaml"), Error);
  EXPECT_THROW(parse_cdi_spec("{\"cdiVersion\": \"0.5.0\",", "t.json"), Error);
}

TEST(CdiNames, QualifiedNames) {
  auto q = parse_qualified_name("nvidia.com/gpu=GPU-1234");
  ASSERT_TRUE(q);
  EXPECT_EQ(q->kind, "nvidia.com/gpu");
  EXPECT_EQ(q->name, "GPU-1234");
  EXPECT_TRUE(parse_qualified_name("nvidia.com/gpu=0:1"));  // MIG device names
  EXPECT_FALSE(parse_qualified_name("nvidia.com/gpu"));
  EXPECT_FALSE(parse_qualified_name("gpu=0"));
  EXPECT_FALSE(parse_qualified_name("nvidia.com/gpu="));
  EXPECT_FALSE(parse_qualified_name("nvidia.com/gpu=-x"));
  EXPECT_FALSE(parse_qualified_name("1vidia.com/gpu=0"));
  EXPECT_TRUE(valid_kind("vendor.com/class_x"));
  EXPECT_FALSE(valid_kind("vendor.com/cl.ass"));
  EXPECT_FALSE(valid_kind("vendor.com/a/b"));
}

}  // namespace
}  // namespace nvproxy::gpu
