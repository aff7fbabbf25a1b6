// The writable layer's changes put back on a new container's rootfs: files, whiteouts, CRI-O's
// deleted.files, and removals that would leave the rootfs.
#include "shim/task/rootfs_diff.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "common/error.h"
#include "common/fs.h"

namespace nvproxy::shim {
namespace {

namespace fs = std::filesystem;

class RootfsDiff : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string t = (fs::temp_directory_path() / "rootfs-diff-XXXXXX").string();
    dir_ = ::mkdtemp(t.data());
    fs::create_directories(rootfs() / "etc" / "app");
    fs::create_directories(archive());
    std::ofstream(rootfs() / "etc" / "keep") << "image";
    std::ofstream(rootfs() / "etc" / "gone") << "image";
    std::ofstream(rootfs() / "etc" / "app" / "old") << "image";
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path rootfs() const { return dir_ / "rootfs"; }
  fs::path archive() const { return dir_ / "archive"; }
  // The diff as containerd writes it: LAYER's files, tarred from inside it.
  void make_diff(const std::function<void(const fs::path&)>& fill, const std::string& flags = "-cf") {
    const fs::path layer = dir_ / "layer";
    fs::create_directories(layer);
    fill(layer);
    ASSERT_EQ(
        std::system(("tar " + flags + " " + (archive() / "rootfs-diff.tar").string() + " -C " + layer.string() + " .").c_str()),
        0);
  }
  RootfsDiffResult apply() { return apply_rootfs_diff(archive(), rootfs(), runner_, "test: "); }

  fs::path dir_;
  DirectWaiter waiter_;
  ProcessRunner runner_{waiter_};
};

TEST_F(RootfsDiff, FilesLandAndWhiteoutsRemoveWhatTheyName) {
  make_diff([](const fs::path& l) {
    fs::create_directories(l / "etc" / "app");
    std::ofstream(l / "written") << "from node A";
    std::ofstream(l / "etc" / ".wh.gone");
    std::ofstream(l / "etc" / "app" / ".wh..wh..opq");
    std::ofstream(l / "etc" / "app" / "new") << "node A";
  });
  auto r = apply();
  EXPECT_EQ(read_file(rootfs() / "written"), "from node A");
  EXPECT_FALSE(fs::exists(rootfs() / "etc" / "gone"));
  EXPECT_TRUE(fs::exists(rootfs() / "etc" / "keep"));
  EXPECT_FALSE(fs::exists(rootfs() / "etc" / "app" / "old")) << "an opaque directory keeps nothing of the image's";
  EXPECT_EQ(read_file(rootfs() / "etc" / "app" / "new"), "node A");
  EXPECT_FALSE(fs::exists(rootfs() / "etc" / ".wh.gone"));
  EXPECT_EQ(r.removed, 2u);
}

TEST_F(RootfsDiff, AGzippedDiffAndDeletedFilesAreTakenToo) {
  make_diff([](const fs::path& l) { std::ofstream(l / "written") << "z"; }, "-czf");
  write_file_atomic(archive() / "deleted.files", R"(["/etc/gone", "etc/not-there"])");
  auto r = apply();
  EXPECT_EQ(read_file(rootfs() / "written"), "z");
  EXPECT_FALSE(fs::exists(rootfs() / "etc" / "gone"));
  EXPECT_EQ(r.removed, 1u);
}

TEST_F(RootfsDiff, ARemovalThatWouldLeaveTheRootfsIsRefused) {
  const fs::path outside = dir_ / "outside";
  fs::create_directories(outside);
  std::ofstream(outside / "precious") << "host";
  fs::create_directory_symlink(outside, rootfs() / "link");
  write_file_atomic(archive() / "deleted.files", R"(["/link/precious"])");
  EXPECT_THROW(apply(), Error);
  write_file_atomic(archive() / "deleted.files", R"(["/etc/../../outside/precious"])");
  EXPECT_THROW(apply(), Error);
  EXPECT_TRUE(fs::exists(outside / "precious"));
}

TEST_F(RootfsDiff, NothingToPutBackIsNoError) {
  auto r = apply();
  EXPECT_EQ(r.entries, 0u);
  EXPECT_EQ(r.removed, 0u);
}

}  // namespace
}  // namespace nvproxy::shim
