#include "hooks/hook_main.h"

#include <gtest/gtest.h>

#include <sstream>

#include "../gpu/gpu_test_util.h"
#include "common/fs.h"
#include "gpu/record.h"

namespace nvproxy::hooks {
namespace {

using namespace gpu::testing;
using nlohmann::json;

// A bundle whose rootfs looks like it does when runc runs createContainer hooks: driver files
// mounted (here: copied) in place, device nodes made in /dev.
class GpuSetupHook : public ::testing::Test {
 protected:
  TempDir tmp;
  fs::path bundle = tmp.path / "bundle", rootfs = bundle / "rootfs", ldconfig_log = tmp.path / "ldconfig.args";
  fs::path fake_ldconfig = tmp.path / "fake-ldconfig";
  json record;

  void SetUp() override {
    fs::create_directories(rootfs / "etc");
    make_char(rootfs / "dev/nvidiactl", 195, 255);
    make_char(rootfs / "dev/nvidia0", 195, 0);
    write(rootfs / "usr/lib/x86_64-linux-gnu/libcuda.so.580.0", "cuda");
    json config = base_spec();
    write(bundle / "config.json", config.dump());
    write(fake_ldconfig, "#!/bin/sh\necho \"$@\" > " + ldconfig_log.string() + "\n");
    fs::permissions(fake_ldconfig, fs::perms::owner_all);
    record = {{"version", 1},
              {"mode", "legacy"},
              {"nodes",
               {{{"path", "/dev/nvidiactl"}, {"type", "c"}, {"major", 195}, {"minor", 255}},
                {{"path", "/dev/nvidia0"}, {"type", "c"}, {"major", 195}, {"minor", 0}}}},
              {"symlinks",
               {{{"path", "/usr/lib/x86_64-linux-gnu/libcuda.so.1"}, {"target", "libcuda.so.580.0"}},
                {{"path", "/usr/bin/nvidia-smi"}, {"target", "/usr/lib/nvidia/nvidia-smi"}}}},
              {"ldDirs", {"/usr/lib/x86_64-linux-gnu"}}};
  }

  std::string state(bool with_annotations = true) const {
    json s = {{"ociVersion", "1.1.0"}, {"id", "ctr-gpu-1"}, {"status", "creating"}, {"pid", 4242}, {"bundle", bundle.string()}};
    if (with_annotations) s["annotations"] = {{gpu::kRecordAnnotation, record.dump()}};
    return s.dump();
  }

  int run(const std::vector<std::string>& args, const std::string& stdin_text, std::string* err_out = nullptr) const {
    std::istringstream in(stdin_text);
    std::ostringstream err;
    int rc = hook_main(args, in, err);
    if (err_out) *err_out = err.str();
    return rc;
  }
};

TEST_F(GpuSetupHook, CreatesLinksConfAndRunsLdconfig) {
  std::string err;
  ASSERT_EQ(run({"hook", "gpu-setup", "--ldconfig", fake_ldconfig.string()}, state(), &err), 0) << err;
  EXPECT_EQ(fs::read_symlink(rootfs / "usr/lib/x86_64-linux-gnu/libcuda.so.1"), "libcuda.so.580.0");
  EXPECT_EQ(fs::read_symlink(rootfs / "usr/bin/nvidia-smi"), "/usr/lib/nvidia/nvidia-smi");
  EXPECT_NE(read_file(rootfs / "etc/ld.so.conf.d/nvproxy.conf").find("/usr/lib/x86_64-linux-gnu\n"), std::string::npos);
  EXPECT_EQ(read_file(ldconfig_log), "-r " + rootfs.string() + " /usr/lib/x86_64-linux-gnu\n");
  // a second run (hooks can be retried) is fine
  EXPECT_EQ(run({"gpu-setup", "--ldconfig", fake_ldconfig.string()}, state(), &err), 0) << err;
}

TEST_F(GpuSetupHook, RecordFromConfigWhenStateHasNoAnnotations) {
  json config = base_spec();
  config["annotations"] = {{gpu::kRecordAnnotation, record.dump()}};
  write(bundle / "config.json", config.dump());
  std::string err;
  ASSERT_EQ(run({"gpu-setup", "--no-ldconfig"}, state(false), &err), 0) << err;
  EXPECT_TRUE(fs::is_symlink(rootfs / "usr/lib/x86_64-linux-gnu/libcuda.so.1"));
  EXPECT_FALSE(fs::exists(ldconfig_log));
}

TEST_F(GpuSetupHook, MissingDeviceNodeFailsNamingContainer) {
  fs::remove(rootfs / "dev/nvidia0");
  std::string err;
  EXPECT_EQ(run({"gpu-setup", "--no-ldconfig"}, state(), &err), 1);
  EXPECT_NE(err.find("container \"ctr-gpu-1\""), std::string::npos) << err;
  EXPECT_NE(err.find("/dev/nvidia0"), std::string::npos) << err;
}

// Under runsc the hook runs in the gofer, where only the files nvproxy passes through exist
// (nvidiactl, nvidia-uvm, nvidiaN): the rest of the record (uvm-tools, modeset, caps) made the hook
// fail there and the container never started.
TEST_F(GpuSetupHook, RunscChecksOnlyTheNodesNvproxyPassesThrough) {
  record["nodes"].push_back({{"path", "/dev/nvidia-uvm-tools"}, {"type", "c"}, {"major", 238}, {"minor", 1}});
  record["nodes"].push_back({{"path", "/dev/nvidia-modeset"}, {"type", "c"}, {"major", 195}, {"minor", 254}});
  record["nodes"].push_back({{"path", "/dev/nvidia-caps/nvidia-cap1"}, {"type", "c"}, {"major", 511}, {"minor", 1}});
  std::string err;
  EXPECT_EQ(run({"gpu-setup", "--no-ldconfig"}, state(), &err), 1) << "runc mode must still check every node";
  EXPECT_NE(err.find("/dev/nvidia-uvm-tools"), std::string::npos) << err;
  ASSERT_EQ(run({"gpu-setup", "--no-ldconfig", "--runsc"}, state(), &err), 0) << err;
  EXPECT_EQ(fs::read_symlink(rootfs / "usr/lib/x86_64-linux-gnu/libcuda.so.1"), "libcuda.so.580.0");
  EXPECT_NE(read_file(rootfs / "etc/ld.so.conf.d/nvproxy.conf").find("/usr/lib/x86_64-linux-gnu\n"), std::string::npos);
  // a node runsc does pass through is still checked
  fs::remove(rootfs / "dev/nvidia0");
  EXPECT_EQ(run({"gpu-setup", "--no-ldconfig", "--runsc"}, state(), &err), 1);
  EXPECT_NE(err.find("/dev/nvidia0"), std::string::npos) << err;
}

TEST_F(GpuSetupHook, WrongMinorFails) {
  fs::remove(rootfs / "dev/nvidia0");
  make_char(rootfs / "dev/nvidia0", 195, 3);
  std::string err;
  EXPECT_EQ(run({"gpu-setup", "--no-ldconfig"}, state(), &err), 1);
  EXPECT_NE(err.find("expected 195:0"), std::string::npos) << err;
}

TEST_F(GpuSetupHook, ImageSymlinksCannotEscapeRootfs) {
  // A hostile image: /usr/lib/x86_64-linux-gnu points at an absolute host path.
  TempDir outside;
  fs::remove_all(rootfs / "usr/lib/x86_64-linux-gnu");
  link(rootfs / "usr/lib/x86_64-linux-gnu", outside.path.string());
  std::string err;
  ASSERT_EQ(run({"gpu-setup", "--no-ldconfig"}, state(), &err), 0) << err;
  EXPECT_FALSE(fs::exists(fs::symlink_status(outside.path / "libcuda.so.1")));
  // RESOLVE_IN_ROOT resolved the image's link inside the rootfs, where that dir does not exist:
  // the soname link is skipped with a warning, the container still starts.
  EXPECT_NE(err.find("libcuda.so.1"), std::string::npos) << err;
  EXPECT_TRUE(fs::is_symlink(rootfs / "usr/bin/nvidia-smi"));
  // With the target dir present inside the rootfs, the link lands there, not on the host.
  fs::create_directories(rootfs / outside.path.relative_path());
  ASSERT_EQ(run({"gpu-setup", "--no-ldconfig"}, state(), &err), 0) << err;
  EXPECT_FALSE(fs::exists(fs::symlink_status(outside.path / "libcuda.so.1")));
  EXPECT_TRUE(fs::is_symlink(rootfs / outside.path.relative_path() / "libcuda.so.1"));
}

TEST_F(GpuSetupHook, ExistingImageFileIsNotReplaced) {
  write(rootfs / "usr/lib/x86_64-linux-gnu/libcuda.so.1", "image's own");
  std::string err;
  ASSERT_EQ(run({"gpu-setup", "--no-ldconfig"}, state(), &err), 0) << err;
  EXPECT_EQ(read_file(rootfs / "usr/lib/x86_64-linux-gnu/libcuda.so.1"), "image's own");
  EXPECT_NE(err.find("warning"), std::string::npos);
}

TEST_F(GpuSetupHook, NoRecordDoesNothing) {
  std::string err;
  json s = json::parse(state(false));
  EXPECT_EQ(run({"gpu-setup"}, s.dump(), &err), 0) << err;
  EXPECT_FALSE(fs::exists(rootfs / "etc/ld.so.conf.d"));
}

TEST_F(GpuSetupHook, BadInput) {
  std::string err;
  EXPECT_EQ(run({"hook"}, state(), &err), 2);
  EXPECT_EQ(run({"other"}, state(), &err), 2);
  EXPECT_EQ(run({"gpu-setup", "--what"}, state(), &err), 2);
  EXPECT_EQ(run({"gpu-setup"}, "{not json", &err), 1);
  EXPECT_EQ(run({"gpu-setup"}, "{}", &err), 1);
  EXPECT_NE(err.find("no container id"), std::string::npos);
}

TEST_F(GpuSetupHook, RealLdconfigBuildsCacheInRootfs) {
  if (!fs::exists("/sbin/ldconfig")) GTEST_SKIP() << "no /sbin/ldconfig";
  auto libz = fs::path("/lib/x86_64-linux-gnu/libz.so.1");
  if (!fs::exists(libz)) GTEST_SKIP() << "no libz to use as a stand-in driver library";
  fs::path dir = rootfs / "usr/local/nvidia/lib64";
  fs::create_directories(dir);
  fs::copy_file(fs::canonical(libz), dir / fs::canonical(libz).filename());
  record["ldDirs"] = {"/usr/local/nvidia/lib64"};
  record["symlinks"] = json::array();
  std::string err;
  ASSERT_EQ(run({"gpu-setup"}, state(), &err), 0) << err;
  EXPECT_TRUE(fs::exists(rootfs / "etc/ld.so.cache"));
  EXPECT_TRUE(fs::is_symlink(dir / "libz.so.1")) << "ldconfig makes soname links in the named dir";
}

}  // namespace
}  // namespace nvproxy::hooks
