// The CRIU release plugin (checkpoint/criu_plugin/criu_release_plugin.c) loaded as CRIU loads it (dlopen, its
// CR_PLUGIN_DESC) and driven hook by hook, with this program standing in for CRIU's one export
// (criu_get_image_dir). The fd path also runs under real CRIU in e2e fork_release; the mapping path
// needs a device with mmap (the GPU's), so here is where its placeholder is checked: an empty memfd
// that maps at the address and faults on access.
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

extern "C" {
#include <criu/criu-plugin.h>
}
#include <filesystem>
#include <string>

#include "common/criu_release.h"
#include "common/fs.h"

namespace fs = std::filesystem;

namespace {
int g_image_dir = -1;
}

// CRIU's export: the image directory as a service fd.
extern "C" int criu_get_image_dir(void) {
  return g_image_dir;
}

namespace {

class CriuReleasePlugin : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("nvproxy-plugin-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    g_image_dir = ::open(dir_.c_str(), O_DIRECTORY | O_RDONLY | O_CLOEXEC);
    ASSERT_GE(g_image_dir, 0);
    handle_ = ::dlopen(CRIU_RELEASE_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(handle_, nullptr) << ::dlerror();
    desc_ = static_cast<cr_plugin_desc_t*>(::dlsym(handle_, "CR_PLUGIN_DESC"));
    ASSERT_NE(desc_, nullptr);
  }
  void TearDown() override {
    if (handle_) ::dlclose(handle_);
    ::close(g_image_dir);
    ::unsetenv(NVPROXY_RELEASE_ENV);
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  template <typename Fn>
  Fn* hook(int h) {
    return reinterpret_cast<Fn*>(desc_->hooks[h]);
  }

  fs::path dir_;
  void* handle_ = nullptr;
  cr_plugin_desc_t* desc_ = nullptr;
};

TEST_F(CriuReleasePlugin, DumpsOnlyTheNamedDevicesAndRestoresPlaceholders) {
  EXPECT_EQ(desc_->version, CRIU_PLUGIN_VERSION);
  ::setenv(NVPROXY_RELEASE_ENV, "1:7", 1);  // /dev/full
  ASSERT_EQ(desc_->init(CR_PLUGIN_STAGE__DUMP), 0);
  int full = ::open("/dev/full", O_RDWR | O_CLOEXEC), zero = ::open("/dev/zero", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(full, 0);
  ASSERT_GE(zero, 0);
  auto* dump_file = hook<CR_PLUGIN_HOOK__DUMP_EXT_FILE_t>(CR_PLUGIN_HOOK__DUMP_EXT_FILE);
  auto* device_vma = hook<CR_PLUGIN_HOOK__HANDLE_DEVICE_VMA_t>(CR_PLUGIN_HOOK__HANDLE_DEVICE_VMA);
  EXPECT_EQ(dump_file(zero, 11), -ENOTSUP) << "a device not named is CRIU's business";
  EXPECT_FALSE(fs::exists(dir_ / NVPROXY_RELEASED_RECORD_FILE)) << "nothing released yet";
  EXPECT_EQ(dump_file(full, 12), 0);
  struct stat st {};
  ASSERT_EQ(::fstat(full, &st), 0);
  EXPECT_EQ(device_vma(full, &st), 0);
  ASSERT_EQ(::fstat(zero, &st), 0);
  EXPECT_EQ(device_vma(zero, &st), -ENOTSUP);
  EXPECT_EQ(nvproxy::read_file(dir_ / NVPROXY_RELEASED_RECORD_FILE), "fd 12 1:7\nvma 0 1:7\n");
  ::close(full);
  ::close(zero);

  // Restore (CRIU's restoring process: no environment needed, the image says it).
  ::unsetenv(NVPROXY_RELEASE_ENV);
  ASSERT_EQ(desc_->init(CR_PLUGIN_STAGE__RESTORE), 0);
  int fd = hook<CR_PLUGIN_HOOK__RESTORE_EXT_FILE_t>(CR_PLUGIN_HOOK__RESTORE_EXT_FILE)(12);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(fs::read_symlink("/proc/self/fd/" + std::to_string(fd)), "/dev/null");
  ::close(fd);

  std::uint64_t pgoff = 12345;
  int map_fd = -1;
  auto* update = hook<CR_PLUGIN_HOOK__UPDATE_VMA_MAP_t>(CR_PLUGIN_HOOK__UPDATE_VMA_MAP);
  ASSERT_EQ(update("/dev/nvidia0", 0x200000000ULL, 0x7000, &pgoff, &map_fd), 1);
  EXPECT_EQ(pgoff, 0u);
  ASSERT_GE(map_fd, 0);
  // CRIU maps the range over it (shared, as device mappings are): the reservation holds, and a
  // touch faults instead of reaching a GPU.
  const size_t len = 1 << 20;
  void* p = ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, map_fd, 0);
  ASSERT_NE(p, MAP_FAILED);
  EXPECT_NE(fs::read_symlink("/proc/self/fd/" + std::to_string(map_fd)).string().find("memfd:nvproxy-released-gpu-mapping"),
            std::string::npos);
  // Reading it faults: through the kernel (a pipe's write copies from it), without a signal that
  // a sanitizer's handler would take: EFAULT, as a SIGBUS would be in user space.
  int pfd[2];
  ASSERT_EQ(::pipe(pfd), 0);
  errno = 0;
  EXPECT_EQ(::write(pfd[1], p, 1), -1);
  EXPECT_EQ(errno, EFAULT);
  ::close(pfd[0]);
  ::close(pfd[1]);
  ::munmap(p, len);
  ::close(map_fd);
}

// An image the shim released nothing from: the plugin claims nothing on restore either.
TEST_F(CriuReleasePlugin, ClaimsNothingInAnImageWithoutItsRecord) {
  ASSERT_EQ(desc_->init(CR_PLUGIN_STAGE__RESTORE), 0);
  EXPECT_EQ(hook<CR_PLUGIN_HOOK__RESTORE_EXT_FILE_t>(CR_PLUGIN_HOOK__RESTORE_EXT_FILE)(3), -ENOTSUP);
  std::uint64_t pgoff = 0;
  int fd = -1;
  EXPECT_EQ(hook<CR_PLUGIN_HOOK__UPDATE_VMA_MAP_t>(CR_PLUGIN_HOOK__UPDATE_VMA_MAP)("/dev/dri/card0", 0, 0, &pgoff, &fd),
            -ENOTSUP);
  // And a dump without $NVPROXY_CRIU_RELEASE releases nothing.
  ASSERT_EQ(desc_->init(CR_PLUGIN_STAGE__DUMP), 0);
  int full = ::open("/dev/full", O_RDWR | O_CLOEXEC);
  EXPECT_EQ(hook<CR_PLUGIN_HOOK__DUMP_EXT_FILE_t>(CR_PLUGIN_HOOK__DUMP_EXT_FILE)(full, 1), -ENOTSUP);
  ::close(full);
}

}  // namespace
