#include "gpu/cdi_registry.h"

#include <gtest/gtest.h>

#include "common/error.h"
#include "gpu_test_util.h"

namespace nvproxy::gpu {
namespace {

using namespace testing;

TEST(CdiRegistry, BadFilesAreCollectedNotFatal) {
  TempDir d;
  fs::copy_file(fixture("valid/nvidia.yaml"), d.path / "nvidia.yaml");
  fs::copy_file(fixture("bad/bad-kind.yaml"), d.path / "bad-kind.yaml");
  fs::copy_file(fixture("bad/bad-yaml.yaml"), d.path / "bad-yaml.yml");
  write(d.path / "README.txt", "not a spec");
  auto reg = CdiRegistry::load({d.path.string(), (d.path / "missing").string()});
  EXPECT_EQ(reg.specs().size(), 1u);
  EXPECT_EQ(reg.errors().size(), 2u);
  EXPECT_TRUE(reg.can_resolve("nvidia.com/gpu=0"));
  EXPECT_FALSE(reg.can_resolve("nvidia.com/gpu=7"));
}

TEST(CdiRegistry, ResolvesDeviceWithTopLevelEditsOnce) {
  TempDir d;
  fs::copy_file(fixture("valid/nvidia.yaml"), d.path / "nvidia.yaml");
  auto reg = CdiRegistry::load({d.path.string()});
  auto r = reg.resolve({"nvidia.com/gpu=0", "nvidia.com/gpu=1", std::string("nvidia.com/gpu=") + kUuidA});
  EXPECT_EQ(r.devices,
            (std::vector<std::string>{"nvidia.com/gpu=0", "nvidia.com/gpu=1", std::string("nvidia.com/gpu=") + kUuidA}));
  // 3 control nodes + nvidia0 + nvidia1 (the UUID's nvidia0 again is an exact repeat, merged)
  EXPECT_EQ(r.edits.device_nodes.size(), 5u);
  EXPECT_EQ(r.edits.mounts.size(), 4u);
  EXPECT_EQ(r.edits.hooks.size(), 2u);
}

TEST(CdiRegistry, AllWithoutExplicitDeviceExpands) {
  TempDir d;
  write(d.path / "acme.yaml",
        "cdiVersion: 0.5.0\nkind: acme.com/gpu\ndevices:\n"
        "- {name: a, containerEdits: {deviceNodes: [{path: /dev/acme0, type: c, major: 250, minor: 0}]}}\n"
        "- {name: b, containerEdits: {deviceNodes: [{path: /dev/acme1, type: c, major: 250, minor: 1}]}}\n");
  auto reg = CdiRegistry::load({d.path.string()});
  auto r = reg.resolve({"acme.com/gpu=all"});
  EXPECT_EQ(r.devices, (std::vector<std::string>{"acme.com/gpu=a", "acme.com/gpu=b"}));
  EXPECT_EQ(r.edits.device_nodes.size(), 2u);
}

TEST(CdiRegistry, ConflictingEnvBetweenDevicesNamesBothOrigins) {
  TempDir d;
  fs::copy_file(fixture("valid/example-fpga.json"), d.path / "fpga.json");
  auto reg = CdiRegistry::load({d.path.string()});
  try {
    (void)reg.resolve({"example.com/fpga=card0", "example.com/fpga=card1"});
    FAIL() << "expected a conflict";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_EQ(e.code(), Code::FailedPrecondition);
    EXPECT_NE(m.find("env FPGA_CARD"), std::string::npos) << m;
    EXPECT_NE(m.find("fpga.json: devices[0].containerEdits.env[0]"), std::string::npos) << m;
    EXPECT_NE(m.find("fpga.json: devices[1].containerEdits.env[0]"), std::string::npos) << m;
  }
}

TEST(CdiRegistry, SameDeviceInTwoFilesOfOneDirIsAConflict) {
  auto reg = CdiRegistry::load({fixture("conflict")});
  EXPECT_TRUE(reg.errors().empty());
  EXPECT_NO_THROW((void)reg.resolve({"acme.com/gpu=y"}));
  try {
    (void)reg.resolve({"acme.com/gpu=x"});
    FAIL();
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("a.yaml: devices[0].name"), std::string::npos) << m;
    EXPECT_NE(m.find("b.yaml: devices[1].name"), std::string::npos) << m;
  }
}

TEST(CdiRegistry, LaterDirOverridesEarlier) {
  TempDir etc, run;
  write(etc.path / "a.yaml", "cdiVersion: 0.5.0\nkind: a.com/b\ndevices:\n- name: x\n  containerEdits:\n    env: [WHO=etc]\n");
  write(run.path / "a.yaml", "cdiVersion: 0.5.0\nkind: a.com/b\ndevices:\n- name: x\n  containerEdits:\n    env: [WHO=run]\n");
  auto reg = CdiRegistry::load({etc.path.string(), run.path.string()});
  auto r = reg.resolve({"a.com/b=x"});
  ASSERT_EQ(r.edits.env.size(), 1u);
  EXPECT_EQ(r.edits.env[0].value, "run");
}

TEST(CdiRegistry, UnresolvedDeviceListsBadFiles) {
  TempDir d;
  fs::copy_file(fixture("bad/missing-version.yaml"), d.path / "acme.yaml");
  auto reg = CdiRegistry::load({d.path.string()});
  try {
    (void)reg.resolve({"acme.com/gpu=a"});
    FAIL();
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_EQ(e.code(), Code::NotFound);
    EXPECT_NE(m.find("acme.com/gpu=a not found"), std::string::npos) << m;
    EXPECT_NE(m.find("acme.yaml: cdiVersion"), std::string::npos) << m;
  }
  EXPECT_THROW((void)reg.resolve({"not-a-name"}), Error);
}

}  // namespace
}  // namespace nvproxy::gpu
