// The configure commands end to end on files (the e2e tests run containerd and dockerd on them).
#include <gtest/gtest.h>
#include <unistd.h>

#include <sstream>

#include "common/fs.h"
#include "common/scratch_dir.h"
#include "shim/node/configure.h"

namespace nvproxy::node {
namespace {

namespace fs = std::filesystem;

struct Outcome {
  int rc;
  std::string out, err;
};

Outcome containerd(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  DirectWaiter w;
  ProcessRunner runner(w);
  int rc = configure_containerd(args, out, err, runner);
  return {rc, out.str(), err.str()};
}

fs::path scratch_path() {
  return fs::temp_directory_path() / ("node-configure-" + std::to_string(::getpid()));
}

TEST(ConfigureCmd, ContainerdDryRunThenWriteThenNothingToChange) {
  ScratchDir dir(scratch_path());
  const fs::path cfg = dir.path() / "config.toml";
  write_file_atomic(cfg, "# mine\nversion = 2\n");
  Outcome dry = containerd({"--config", cfg.string(), "--containerd-version", "1.7.24", "--dry-run"});
  EXPECT_EQ(dry.rc, 0) << dry.err;
  EXPECT_NE(dry.out.find("+runtime_type = \"io.containerd.nvproxy.v1\""), std::string::npos) << dry.out;
  EXPECT_NE(dry.out.find("comments are not carried over"), std::string::npos) << dry.out;
  EXPECT_EQ(read_file(cfg), "# mine\nversion = 2\n");
  EXPECT_FALSE(fs::exists(cfg.string() + ".nvproxy-orig"));

  Outcome wrote = containerd({"--config", cfg.string(), "--containerd-version", "v1.7.24"});
  EXPECT_EQ(wrote.rc, 0) << wrote.err;
  EXPECT_EQ(read_file(cfg.string() + ".nvproxy-orig"), "# mine\nversion = 2\n");
  const std::string configured = read_file(cfg);
  Outcome again = containerd({"--config", cfg.string(), "--containerd-version", "1.7.24"});
  EXPECT_EQ(again.rc, 0);
  EXPECT_NE(again.out.find("nothing to change"), std::string::npos) << again.out;
  EXPECT_EQ(read_file(cfg), configured);
  EXPECT_FALSE(fs::exists(cfg.string() + ".nvproxy-orig.2"));
}

TEST(ConfigureCmd, ContainerdRefusalsWriteNothing) {
  ScratchDir dir(scratch_path());
  const fs::path cfg = dir.path() / "config.toml";
  write_file_atomic(cfg, "version = 2\n[plugins\n");
  Outcome bad = containerd({"--config", cfg.string(), "--containerd-version", "1.6"});
  EXPECT_EQ(bad.rc, 1);
  EXPECT_NE(bad.err.find(cfg.string() + ":2:"), std::string::npos) << bad.err;
  EXPECT_NE(bad.err.find("nothing was written"), std::string::npos) << bad.err;
  EXPECT_FALSE(fs::exists(cfg.string() + ".nvproxy-orig"));

  write_file_atomic(cfg, "version = 2\n");
  Outcome dropin = containerd({"--config", cfg.string(), "--containerd-version", "1.7", "--drop-in"});
  EXPECT_EQ(dropin.rc, 1);
  EXPECT_FALSE(fs::exists(dir.path() / "conf.d"));
  EXPECT_EQ(containerd({"--config", cfg.string(), "--containerd-version", "3.0"}).rc, 1);
  EXPECT_EQ(containerd({"--config", cfg.string(), "--containerd-version", "1.7", "--shim-config", "rel.yaml"}).rc, 1);
  EXPECT_EQ(containerd({"--bogus"}).rc, 2);
}

TEST(ConfigureCmd, ContainerdDropInOn2WritesTheImportsDirectory) {
  ScratchDir dir(scratch_path());
  const fs::path cfg = dir.path() / "config.toml";
  write_file_atomic(cfg, "version = 3\n");
  Outcome r = containerd({"--config", cfg.string(), "--containerd-version", "2.3.4", "--drop-in"});
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(read_file(dir.path() / "conf.d" / "nvproxy.toml").find("io.containerd.cri.v1.runtime"), std::string::npos);
  EXPECT_NE(read_file(cfg).find((dir.path() / "conf.d" / "*.toml").string()), std::string::npos) << "the import added";
  EXPECT_NE(containerd({"--config", cfg.string(), "--containerd-version", "2.3.4", "--drop-in"}).out.find("nothing to change"),
            std::string::npos);
}

TEST(ConfigureCmd, KubernetesRuntimeClass) {
  std::ostringstream out, err;
  ASSERT_EQ(
      configure_kubernetes({"--runtime-name", "gpu", "--node-selector", "a=b,c=true", "--overhead-memory", "20Mi"}, out, err), 0)
      << err.str();
  const std::string y = out.str();
  EXPECT_NE(y.find("kind: RuntimeClass\nmetadata:\n  name: gpu\nhandler: gpu"), std::string::npos) << y;
  EXPECT_NE(y.find("overhead:\n  podFixed:\n    memory: 20Mi\n"), std::string::npos) << y;
  EXPECT_NE(y.find("    a: b\n    c: \"true\"\n"), std::string::npos) << y;
  std::ostringstream o2, e2;
  EXPECT_EQ(configure_kubernetes({"--runtime-name", "Bad_Name"}, o2, e2), 1);
}

}  // namespace
}  // namespace nvproxy::node
