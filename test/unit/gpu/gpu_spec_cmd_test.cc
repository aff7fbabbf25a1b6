#include "gpu/gpu_spec_cmd.h"

#include <gtest/gtest.h>

#include <sstream>

#include "common/fs.h"
#include "gpu_test_util.h"

namespace nvproxy::gpu {
namespace {

using namespace testing;

struct CmdResult {
  int rc;
  std::string out, err;
};

CmdResult run(std::vector<std::string> args) {
  std::ostringstream out, err;
  int rc = gpu_spec_main(args, out, err);
  return {rc, out.str(), err.str()};
}

class GpuSpecCmd : public ::testing::Test {
 protected:
  FakeHost host;
  TempDir bundle;
  std::vector<std::string> roots() const {
    return {"--cdi-spec-dir", host.cdi.string(),    "--dev-root",         host.dev.string(),
            "--driver-root",  host.driver.string(), "--proc-driver-root", host.proc.string()};
  }
  void SetUp() override { write(bundle.path / "config.json", base_spec({"NVIDIA_VISIBLE_DEVICES=0"}).dump()); }
};

TEST_F(GpuSpecCmd, JsonOutputAndBundleUnchanged) {
  host.add_cdi("valid/nvidia.yaml");
  std::string before = read_file(bundle.path / "config.json");
  auto args = roots();
  args.insert(args.begin(), {"gpu-spec", "--bundle", bundle.path.string(), "--json"});
  CmdResult r = run(args);
  ASSERT_EQ(r.rc, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["mode"], "cdi");
  EXPECT_EQ(j["devices"], nlohmann::json({"nvidia.com/gpu=0"}));
  EXPECT_EQ(read_file(bundle.path / "config.json"), before);
}

TEST_F(GpuSpecCmd, TextOutputLegacyFromConfigFile) {
  write(bundle.path / "shim.yaml",
        "log_level: info\ngpu:\n  mode: legacy\n  dev_root: " + host.dev.string() + "\n  driver_root: " + host.driver.string() +
            "\n  proc_driver_root: " + host.proc.string() + "\n  hook_binary: /usr/bin/containerd-shim-nvproxy-v1\n");
  CmdResult r = run({"--spec", (bundle.path / "config.json").string(), "--config", (bundle.path / "shim.yaml").string()});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("mode: legacy"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("device /dev/nvidia1 c 195:1"), std::string::npos) << r.out;  // index 0 = minor 1
  EXPECT_NE(r.out.find("symlink /usr/lib/x86_64-linux-gnu/libcuda.so.1 -> libcuda.so.580.0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("hook createContainer /usr/bin/containerd-shim-nvproxy-v1"), std::string::npos) << r.out;
}

TEST_F(GpuSpecCmd, UsageAndErrors) {
  EXPECT_EQ(run({}).rc, 2);
  EXPECT_EQ(run({"--bundle", "a", "--spec", "b"}).rc, 2);
  EXPECT_EQ(run({"--bogus"}).rc, 2);
  CmdResult r = run({"--bundle", (bundle.path / "nope").string()});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("error: "), std::string::npos);
  auto args = roots();
  args.insert(args.end(), {"--spec", (bundle.path / "config.json").string(), "--mode", "cdi"});
  r = run(args);
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("nvidia.com/gpu=0 not found"), std::string::npos) << r.err;
  write(bundle.path / "bad.yaml", "gpu:\n  mode: sometimes\n");
  r = run({"--spec", (bundle.path / "config.json").string(), "--config", (bundle.path / "bad.yaml").string()});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("bad.yaml: gpu.mode"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace nvproxy::gpu
