// A runsc filestore that came with a checkpoint's rootfs diff is removed before runsc runs; nothing
// else at the top of the rootfs is touched.
#include "shim/task/runsc_filestore.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>

#include "common/error.h"

namespace nvproxy::shim {
namespace {

namespace fs = std::filesystem;

class RunscFilestore : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string t = (fs::temp_directory_path() / "nvproxy-filestore-XXXXXX").string();
    ASSERT_NE(::mkdtemp(t.data()), nullptr);
    root_ = t;
  }
  void TearDown() override { fs::remove_all(root_); }
  void touch(const fs::path& p) { std::ofstream(p) << "x"; }
  fs::path root_;
};

TEST_F(RunscFilestore, RemovesOnlyRegularFilestoreFilesAtTheTop) {
  touch(root_ / ".gvisor.filestore.ck");
  touch(root_ / ".gvisor.filestore.other-sandbox");
  touch(root_ / "gvisor.filestore.ck");  // no leading dot: not runsc's
  touch(root_ / ".gvisor.filestore");    // no sandbox id: not runsc's
  fs::create_directories(root_ / ".gvisor.filestore.dir");
  fs::create_directories(root_ / "tmp");
  touch(root_ / "tmp" / ".gvisor.filestore.ck");  // not at the top: a mount's own, or the user's
  fs::create_symlink("/etc/passwd", root_ / ".gvisor.filestore.link");

  auto removed = remove_stale_filestores(root_);
  std::sort(removed.begin(), removed.end());
  EXPECT_EQ(removed, (std::vector<std::string>{".gvisor.filestore.ck", ".gvisor.filestore.other-sandbox"}));
  EXPECT_FALSE(fs::exists(root_ / ".gvisor.filestore.ck"));
  EXPECT_FALSE(fs::exists(root_ / ".gvisor.filestore.other-sandbox"));
  EXPECT_TRUE(fs::exists(root_ / "gvisor.filestore.ck"));
  EXPECT_TRUE(fs::exists(root_ / ".gvisor.filestore"));
  EXPECT_TRUE(fs::is_directory(root_ / ".gvisor.filestore.dir"));
  EXPECT_TRUE(fs::exists(root_ / "tmp" / ".gvisor.filestore.ck"));
  EXPECT_TRUE(fs::is_symlink(root_ / ".gvisor.filestore.link"));
  EXPECT_TRUE(fs::exists("/etc/passwd"));
}

TEST_F(RunscFilestore, NothingToRemove) {
  touch(root_ / "bin");
  EXPECT_TRUE(remove_stale_filestores(root_).empty());
  EXPECT_TRUE(fs::exists(root_ / "bin"));
}

TEST_F(RunscFilestore, AMissingRootfsIsAnErrorNamingIt) {
  try {
    remove_stale_filestores(root_ / "absent");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find((root_ / "absent").string()), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace nvproxy::shim
