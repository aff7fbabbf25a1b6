#include "gpu/spec_edits.h"

#include <gtest/gtest.h>

#include "common/error.h"
#include "gpu/container_edits.h"
#include "gpu_test_util.h"

namespace nvproxy::gpu {
namespace {

using namespace testing;

ContainerEdits sample() {
  ContainerEdits e;
  e.env.push_back({"NVIDIA_VISIBLE_DEVICES", "void", "t"});
  DeviceNode n;
  n.path = "/dev/nvidia0";
  n.type = "c";
  n.major = 195;
  n.minor = 0;
  n.file_mode = 0666;
  n.origin = "t";
  e.device_nodes.push_back(n);
  e.mounts.push_back({"/h/libcuda.so.580.0", "/usr/lib/libcuda.so.580.0", "bind", {"ro", "nosuid", "nodev", "bind"}, "t"});
  e.hooks.push_back({"createContainer", "/usr/bin/x", {"x", "y"}, {}, std::nullopt, "t"});
  e.additional_gids = {44};
  return e;
}

TEST(SpecEdits, AppliesEverything) {
  auto spec = base_spec({"NVIDIA_VISIBLE_DEVICES=0"});
  std::vector<std::string> w;
  EXPECT_EQ(apply_edits(spec, sample(), w), 6u);  // env (replaced), node, cgroup rule, mount, hook, gid
  EXPECT_EQ(spec["process"]["env"][1], "NVIDIA_VISIBLE_DEVICES=void");
  EXPECT_EQ(spec["process"]["env"].size(), 2u);
  ASSERT_EQ(spec["linux"]["devices"].size(), 1u);
  EXPECT_EQ(spec["linux"]["devices"][0]["major"], 195);
  EXPECT_EQ(spec["linux"]["devices"][0]["fileMode"], 0666);
  const auto& rules = spec["linux"]["resources"]["devices"];
  ASSERT_EQ(rules.size(), 2u);
  EXPECT_EQ(rules[1], nlohmann::json({{"allow", true}, {"type", "c"}, {"major", 195}, {"minor", 0}, {"access", "rwm"}}));
  EXPECT_EQ(count_where(spec["mounts"], "destination", "/usr/lib/libcuda.so.580.0"), 1u);
  EXPECT_EQ(spec["hooks"]["createContainer"][0]["args"], nlohmann::json({"x", "y"}));
  EXPECT_EQ(spec["process"]["user"]["additionalGids"], nlohmann::json({44}));
  EXPECT_TRUE(w.empty());
}

TEST(SpecEdits, SecondApplyAddsNothing) {
  auto spec = base_spec();
  std::vector<std::string> w;
  apply_edits(spec, sample(), w);
  auto before = spec;
  EXPECT_EQ(apply_edits(spec, sample(), w), 0u);
  EXPECT_EQ(spec, before);
}

TEST(SpecEdits, RecognisesWhatCriAlreadyApplied) {
  // containerd's CDI injection writes the node and mount in its own way (other key order, an
  // existing broader cgroup rule): we must not add a second copy.
  auto spec = base_spec({"NVIDIA_VISIBLE_DEVICES=void"});
  spec["linux"]["devices"] = {{{"type", "c"}, {"path", "/dev/nvidia0"}, {"major", 195}, {"minor", 0}}};
  spec["linux"]["resources"]["devices"].push_back(
      {{"allow", true}, {"type", "c"}, {"major", 195}, {"minor", 0}, {"access", "rwm"}});
  spec["mounts"].push_back({{"source", "/h/libcuda.so.580.0"}, {"destination", "/usr/lib/libcuda.so.580.0"}, {"type", "bind"}});
  std::vector<std::string> w;
  EXPECT_EQ(apply_edits(spec, sample(), w), 2u);  // hook + gid; env/node/rule/mount were there
  EXPECT_EQ(spec["linux"]["devices"].size(), 1u);
  EXPECT_EQ(spec["linux"]["resources"]["devices"].size(), 2u);
  EXPECT_EQ(count_where(spec["mounts"], "destination", "/usr/lib/libcuda.so.580.0"), 1u);
  EXPECT_EQ(spec["process"]["env"].size(), 2u);
  EXPECT_TRUE(w.empty());
}

TEST(SpecEdits, ForeignMountAtSameDestinationIsKeptWithWarning) {
  auto spec = base_spec();
  spec["mounts"].push_back({{"source", "/other"}, {"destination", "/usr/lib/libcuda.so.580.0"}, {"type", "bind"}});
  std::vector<std::string> w;
  apply_edits(spec, sample(), w);
  EXPECT_EQ(count_where(spec["mounts"], "destination", "/usr/lib/libcuda.so.580.0"), 1u);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NE(w[0].find("/other"), std::string::npos);
}

TEST(SpecEdits, WrongShapeNamesField) {
  auto spec = base_spec();
  spec["mounts"] = "nope";
  std::vector<std::string> w;
  try {
    apply_edits(spec, sample(), w);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("config.json: mounts: must be an array"), std::string::npos) << e.what();
  }
}

TEST(ContainerEdits, FillHostInfoStatsNodeUnderDevRoot) {
  FakeHost h;
  ContainerEdits e;
  DeviceNode n;
  n.path = "/dev/nvidia-uvm";
  n.origin = "spec.yaml: containerEdits.deviceNodes[1]";
  e.device_nodes.push_back(n);
  std::vector<std::string> w;
  fill_host_info(e, h.dev.string(), w);
  EXPECT_EQ(e.device_nodes[0].type, "c");
  EXPECT_EQ(e.device_nodes[0].major, 238);
  EXPECT_EQ(e.device_nodes[0].minor, 0);
  e.device_nodes[0] = n;
  e.device_nodes[0].path = "/dev/nvidia9";
  try {
    fill_host_info(e, h.dev.string(), w);
    FAIL();
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("spec.yaml: containerEdits.deviceNodes[1]"), std::string::npos) << err.what();
  }
}

TEST(ContainerEdits, SymlinkMountBecomesRealFilePlusLinkAndRbindBecomesBind) {
  TempDir d;
  write(d.path / "libfoo.so.1.2", "x");
  link(d.path / "libfoo.so.1", "libfoo.so.1.2");
  ContainerEdits e;
  e.mounts.push_back({(d.path / "libfoo.so.1").string(), "/usr/lib/libfoo.so.1", "", {"ro", "rbind"}, "s.yaml: mounts[0]"});
  std::vector<std::string> w;
  fill_host_info(e, "/dev", w);
  EXPECT_EQ(e.mounts[0].host_path, (d.path / "libfoo.so.1.2").string());
  EXPECT_EQ(e.mounts[0].container_path, "/usr/lib/libfoo.so.1.2");
  EXPECT_EQ(e.mounts[0].options, (std::vector<std::string>{"ro", "bind"}));
  EXPECT_EQ(e.mounts[0].type, "bind");
  ASSERT_EQ(e.symlinks.size(), 1u);
  EXPECT_EQ(e.symlinks[0].path, "/usr/lib/libfoo.so.1");
  EXPECT_EQ(e.symlinks[0].target, "libfoo.so.1.2");
  EXPECT_EQ(w.size(), 1u);  // the rbind rewrite is reported
}

TEST(ContainerEdits, MergeConflictsNameBothOrigins) {
  ContainerEdits a, b;
  a.mounts.push_back({"/h/a", "/x", "bind", {}, "a.yaml: containerEdits.mounts[0]"});
  b.mounts.push_back({"/h/b", "/x", "bind", {}, "b.yaml: devices[0].containerEdits.mounts[0]"});
  try {
    merge_edits(a, b);
    FAIL();
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("a.yaml: containerEdits.mounts[0]"), std::string::npos) << m;
    EXPECT_NE(m.find("b.yaml: devices[0].containerEdits.mounts[0]"), std::string::npos) << m;
  }
  ContainerEdits c = a;
  merge_edits(c, a);  // exact repeats merge silently
  EXPECT_EQ(c.mounts.size(), 1u);
}

}  // namespace
}  // namespace nvproxy::gpu
