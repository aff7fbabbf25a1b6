// Create's GPU step under runsc (shim/task/gpu_setup.h): gpu.nvproxy decides which containers get
// --nvproxy. runsc sets nvproxy up only when it boots a sandbox, from its root container's flags:
// with `on`, a container that asks for no GPU (a CRI pod's pause container) gets it too.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "common/log.h"
#include "oci/spec.h"
#include "shim/task/gpu_setup.h"

namespace nvproxy::shim {
namespace {

namespace fs = std::filesystem;

oci::Spec pause_spec() {
  return oci::Spec::parse(R"({"ociVersion": "1.0.2", "root": {"path": "rootfs"}, "process": {"args": ["/pause"], "cwd": "/"},
      "annotations": {"io.kubernetes.cri.container-type": "sandbox"}})",
                          "config.json");
}

std::vector<std::string> flags_of(const std::string& binary, const std::string& nvproxy) {
  ShimConfig cfg;
  cfg.runtime.binary = binary;
  cfg.gpu.nvproxy = nvproxy;
  Logger log{-1};
  oci::Spec spec = pause_spec();
  const fs::path bundle = fs::temp_directory_path() / "nvproxy-gpu-setup-test";
  GpuSetup g = prepare_gpu("pause1", bundle, cfg, spec, "/bin/true", log);
  EXPECT_FALSE(g.gpu);
  return g.runtime_global;
}

TEST(GpuSetup, NvproxyOnIsEveryRunscContainersThePodsPauseContainerToo) {
  EXPECT_EQ(flags_of("/usr/local/bin/runsc", "on"), std::vector<std::string>{"--nvproxy"});
}

TEST(GpuSetup, AContainerThatAsksForNoGpuGetsNoNvproxyOtherwise) {
  EXPECT_TRUE(flags_of("/usr/local/bin/runsc", "auto").empty());
  EXPECT_TRUE(flags_of("/usr/local/bin/runsc", "off").empty());
  EXPECT_TRUE(flags_of("runc", "on").empty());  // a runsc flag only
}

}  // namespace
}  // namespace nvproxy::shim
