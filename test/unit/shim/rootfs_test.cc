#include "shim/task/rootfs.h"

#include <gtest/gtest.h>
#include <sys/mount.h>

#include <fstream>

using namespace nvproxy::shim;

TEST(MountOptions, FlagsAndData) {
  auto a = parse_mount_options({"ro", "nosuid", "lowerdir=/l", "upperdir=/u"}, "overlay");
  EXPECT_TRUE(a.flags & MS_RDONLY);
  EXPECT_TRUE(a.flags & MS_NOSUID);
  EXPECT_EQ(a.data, "lowerdir=/l,upperdir=/u");
  EXPECT_FALSE(a.read_only_remount);
  auto b = parse_mount_options({"rbind", "ro"}, "bind");
  EXPECT_TRUE(b.flags & MS_BIND);
  EXPECT_TRUE(b.flags & MS_REC);
  EXPECT_TRUE(b.read_only_remount);  // a bind ignores MS_RDONLY on the first mount(2)
  auto c = parse_mount_options({"ro", "rw"}, "tmpfs");
  EXPECT_FALSE(c.flags & MS_RDONLY);  // later options win, as in mount(8)
}

TEST(Rootfs, BindMountAndUnmountAll) {
  auto dir = std::filesystem::temp_directory_path() / ("nvproxy-rootfs-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir / "src");
  std::ofstream(dir / "src" / "f") << "x";
  mount_rootfs({{"bind", (dir / "src").string(), "", {"rbind", "ro"}}}, dir / "rootfs");
  EXPECT_TRUE(std::filesystem::exists(dir / "rootfs" / "f"));
  EXPECT_FALSE(std::ofstream(dir / "rootfs" / "g").is_open());  // read-only
  unmount_all(dir / "rootfs");
  EXPECT_FALSE(std::filesystem::exists(dir / "rootfs" / "f"));
  std::filesystem::remove_all(dir);
}

TEST(Rootfs, FailedMountLeavesNothingMounted) {
  auto dir = std::filesystem::temp_directory_path() / ("nvproxy-rootfs2-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir / "src");
  EXPECT_ANY_THROW(mount_rootfs({{"bind", (dir / "src").string(), "", {"rbind"}}, {"nosuchfs", "none", "", {}}}, dir / "rootfs"));
  std::ifstream mi("/proc/self/mountinfo");
  std::string all((std::istreambuf_iterator<char>(mi)), std::istreambuf_iterator<char>());
  EXPECT_EQ(all.find((dir / "rootfs").string()), std::string::npos);
  std::filesystem::remove_all(dir);
}
