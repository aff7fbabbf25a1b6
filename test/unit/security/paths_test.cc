// Paths that come from specs, CDI files or container images must not lead outside their root:
// join_within (bundle-relative paths), gpu::resolve_in_root (driver files under a driver root),
// hooks::RootDir (the OCI hook writing into an untrusted image rootfs as root).
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "common/error.h"
#include "common/fs.h"
#include "gpu/discovery.h"
#include "hooks/rootfs_ops.h"

namespace nvproxy {
namespace {

namespace fs = std::filesystem;

struct TempDir {
  fs::path path;
  TempDir() {
    std::string t = (fs::temp_directory_path() / "nvproxy-sec-XXXXXX").string();
    if (!::mkdtemp(t.data())) throw std::runtime_error("mkdtemp");
    path = t;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

void write(const fs::path& p, const std::string& s) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << s;
}
std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// ---- join_within ----------------------------------------------------------------------------

TEST(JoinWithin, EscapesAreRefused) {
  const fs::path root = "/run/containerd/io.containerd.runtime.v2.task/default/c1";
  for (const std::string& rel :
       std::vector<std::string>{"..", "../", "../c2", "../../../../etc/shadow", "a/../../c2", "./../c2", "a/b/../../../x",
                                "/../c2", "/a/../../c2", "rootfs/../../c2", "..../../../c2", "a/./../../"}) {
    EXPECT_THROW(join_within(root, rel), Error) << rel;
    try {
      join_within(root, rel);
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Code::InvalidArgument) << rel;
    }
  }
}

TEST(JoinWithin, InsidePathsResolveUnderTheRoot) {
  const fs::path root = "/b/c1";
  EXPECT_EQ(join_within(root, "rootfs"), "/b/c1/rootfs");
  EXPECT_EQ(join_within(root, "/rootfs"), "/b/c1/rootfs") << "absolute means root-relative";
  EXPECT_EQ(join_within(root, "a/../rootfs"), "/b/c1/rootfs");
  EXPECT_EQ(join_within(root, "....//x"), "/b/c1/..../x") << "'....' is a name, not a climb";
  EXPECT_EQ(join_within(root, "rootfs/"), "/b/c1/rootfs/");
}

TEST(JoinWithin, SiblingWithACommonPrefixIsOutside) {
  EXPECT_FALSE(path_within("/b/c1", "/b/c10/x"));
  EXPECT_THROW(join_within("/b/c1", "../c10"), Error);
  EXPECT_FALSE(path_within("/b/c1/", "/b/c10"));
  EXPECT_TRUE(path_within("/b/c1/", "/b/c1/x"));
}

// ---- gpu::resolve_in_root -------------------------------------------------------------------

TEST(ResolveInRoot, LinksCannotClimbOutOfTheDriverRoot) {
  TempDir t;
  fs::path root = t.path / "driver-root";
  write(root / "usr/lib/libcuda.so.580", "cuda");
  write(t.path / "host-secret", "secret");
  fs::create_directories(root / "usr/lib64");
  // Relative climbs, absolute targets and ".." inside absolute targets all stop at the root.
  fs::create_symlink("../../../../../../../../host-secret", root / "usr/lib/rel-climb");
  fs::create_symlink("/../../../../host-secret", root / "usr/lib/abs-climb");
  fs::create_symlink(t.path / "host-secret", root / "usr/lib/abs-host");  // host path: means root/<that path>
  fs::create_symlink("/usr/lib/libcuda.so.580", root / "usr/lib64/libcuda.so.1");

  for (const char* name : {"rel-climb", "abs-climb"}) {
    auto r = gpu::resolve_in_root(root, fs::path("/usr/lib") / name);
    // "host-secret" exists only outside the root: resolution inside it finds nothing.
    EXPECT_FALSE(r.has_value()) << name << " -> " << r->string();
  }
  EXPECT_FALSE(gpu::resolve_in_root(root, "/usr/lib/abs-host").has_value());
  // The same links resolve to in-root files when such files exist there.
  write(root / "host-secret", "in-root decoy");
  auto r = gpu::resolve_in_root(root, "/usr/lib/rel-climb");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(*r, "/host-secret");
  EXPECT_EQ(slurp(root / r->relative_path()), "in-root decoy");
  auto abs = gpu::resolve_in_root(root, "/usr/lib/abs-climb");
  ASSERT_TRUE(abs.has_value());
  EXPECT_EQ(*abs, "/host-secret");
  EXPECT_EQ(*gpu::resolve_in_root(root, "/usr/lib64/libcuda.so.1"), "/usr/lib/libcuda.so.580");
  EXPECT_EQ(*gpu::resolve_in_root(root, "/../../usr/lib/libcuda.so.580"), "/usr/lib/libcuda.so.580");
}

TEST(ResolveInRoot, LoopsAndLongChainsEnd) {
  TempDir t;
  fs::path root = t.path;
  fs::create_symlink("b", root / "a");
  fs::create_symlink("a", root / "b");
  fs::create_symlink("self/x", root / "self");
  EXPECT_FALSE(gpu::resolve_in_root(root, "/a").has_value());
  EXPECT_FALSE(gpu::resolve_in_root(root, "/self").has_value());
  // A chain longer than the hop limit (40, like the kernel's) ends too.
  write(root / "end", "x");
  fs::create_symlink("end", root / "l0");
  for (int i = 1; i <= 60; ++i) fs::create_symlink("l" + std::to_string(i - 1), root / ("l" + std::to_string(i)));
  EXPECT_TRUE(gpu::resolve_in_root(root, "/l30").has_value());
  EXPECT_FALSE(gpu::resolve_in_root(root, "/l60").has_value());
}

// ---- hooks::RootDir ---------------------------------------------------------------------------

class HostileRootfs : public ::testing::Test {
 protected:
  TempDir t;
  fs::path rootfs = t.path / "rootfs", outside = t.path / "outside";
  void SetUp() override {
    fs::create_directories(rootfs);
    fs::create_directories(outside);
    write(outside / "victim.conf", "host file");
  }
  bool outside_untouched() { return slurp(outside / "victim.conf") == "host file" && fs::exists(outside / "victim.conf"); }
  std::size_t outside_entries() {
    std::size_t n = 0;
    for (auto it = fs::recursive_directory_iterator(outside); it != fs::recursive_directory_iterator(); ++it) ++n;
    return n;
  }
};

// The hook's steps on a rootfs whose /etc is the image's link: refusing is fine, escaping is not.
void hook_steps(const hooks::RootDir& root) {
  root.mkdirs("/etc/ld.so.conf.d");
  root.write_file("/etc/ld.so.conf.d/nvproxy.conf", "/usr/lib/x86_64-linux-gnu\n");
  root.symlink("/etc/libcuda.so.1", "libcuda.so.580");
}

TEST_F(HostileRootfs, AbsoluteDirectoryLinkStaysInside) {
  // The image makes /etc a link to a host directory (absolute), hoping the hook follows it.
  fs::create_symlink(outside, rootfs / "etc");
  hooks::RootDir root(rootfs.string());
  // The link's target does not exist inside the rootfs: the hook's steps fail, outside untouched.
  EXPECT_THROW(hook_steps(root), Error);
  EXPECT_TRUE(outside_untouched());
  EXPECT_EQ(outside_entries(), 1u) << "nothing created outside the rootfs";
  // Once it exists inside, everything lands at ROOTFS/<link target>.
  fs::create_directories(rootfs / outside.relative_path());
  hook_steps(root);
  EXPECT_TRUE(outside_untouched());
  EXPECT_EQ(outside_entries(), 1u);
  EXPECT_TRUE(fs::exists(rootfs / outside.relative_path() / "ld.so.conf.d/nvproxy.conf"));
}

TEST_F(HostileRootfs, RelativeClimbingLinkStaysInside) {
  fs::create_symlink("../../../../../../../../" + outside.relative_path().string(), rootfs / "etc");
  hooks::RootDir root(rootfs.string());
  EXPECT_THROW(hook_steps(root), Error);
  EXPECT_TRUE(outside_untouched());
  EXPECT_EQ(outside_entries(), 1u);
  fs::create_directories(rootfs / outside.relative_path());
  hook_steps(root);
  EXPECT_TRUE(outside_untouched());
  EXPECT_EQ(outside_entries(), 1u);
  EXPECT_TRUE(fs::is_symlink(rootfs / outside.relative_path() / "libcuda.so.1"));
}

TEST_F(HostileRootfs, FinalSymlinkIsNeverWrittenThrough) {
  fs::create_directories(rootfs / "etc/ld.so.conf.d");
  fs::create_symlink(outside / "victim.conf", rootfs / "etc/ld.so.conf.d/nvproxy.conf");
  hooks::RootDir root(rootfs.string());
  EXPECT_THROW(root.write_file("/etc/ld.so.conf.d/nvproxy.conf", "pwned"), Error);
  EXPECT_TRUE(outside_untouched());
}

TEST_F(HostileRootfs, DotDotInHookPathsIsClampedAtTheRoot) {
  hooks::RootDir root(rootfs.string());
  std::string climb = "/../../../../" + outside.relative_path().string();
  root.mkdirs(climb + "/new");
  root.write_file(climb + "/victim.conf", "pwned");
  EXPECT_TRUE(outside_untouched());
  EXPECT_EQ(outside_entries(), 1u);
  EXPECT_EQ(slurp(rootfs / outside.relative_path() / "victim.conf"), "pwned");
  auto st = root.stat(climb + "/victim.conf");
  ASSERT_TRUE(st.has_value());
  EXPECT_TRUE(S_ISREG(st->st_mode));
}

TEST_F(HostileRootfs, StatDoesNotReportHostFilesThroughLinks) {
  fs::create_symlink(outside / "victim.conf", rootfs / "probe");
  hooks::RootDir root(rootfs.string());
  EXPECT_FALSE(root.stat("/probe").has_value()) << "the link's target does not exist inside the rootfs";
}

// Runs fn in a child; true when it finished within `limit` (a blocking open would not).
template <typename Fn>
bool finishes_within(std::chrono::milliseconds limit, Fn fn) {
  pid_t pid = ::fork();
  if (pid == 0) {
    try {
      fn();
    } catch (...) {
    }
    ::_exit(0);
  }
  auto deadline = std::chrono::steady_clock::now() + limit;
  int st = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    if (::waitpid(pid, &st, WNOHANG) == pid) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, &st, 0);
  return false;
}

// Pending a fix in hooks/rootfs_ops.cc RootDir::write_file (docs/reliability.md, "findings"): the
// image decides what its /etc/ld.so.conf.d/nvproxy.conf is. A FIFO there makes the root hook block
// forever in open(2); a device node there is opened and written as root (a block device: the host
// disk). write_file must open non-blocking, fstat, and refuse anything but a regular file.
TEST_F(HostileRootfs, FifoPlantedByTheImageDoesNotHangTheHook) {
  fs::create_directories(rootfs / "etc/ld.so.conf.d");
  ASSERT_EQ(::mkfifo((rootfs / "etc/ld.so.conf.d/nvproxy.conf").c_str(), 0644), 0);
  hooks::RootDir root(rootfs.string());
  bool finished = finishes_within(std::chrono::seconds(3), [&] { root.write_file("/etc/ld.so.conf.d/nvproxy.conf", "x\n"); });
  ASSERT_TRUE(finished) << "write_file blocked on the image's FIFO";
  EXPECT_THROW(root.write_file("/etc/ld.so.conf.d/nvproxy.conf", "x\n"), Error);
}

TEST_F(HostileRootfs, DeviceNodePlantedByTheImageIsNotWritten) {
  if (::geteuid() != 0) GTEST_SKIP() << "mknod needs root";
  fs::create_directories(rootfs / "etc/ld.so.conf.d");
  // 1:3 is /dev/null: harmless stand-in for a disk.
  ASSERT_EQ(::mknod((rootfs / "etc/ld.so.conf.d/nvproxy.conf").c_str(), S_IFCHR | 0644, makedev(1, 3)), 0);
  hooks::RootDir root(rootfs.string());
  EXPECT_THROW(root.write_file("/etc/ld.so.conf.d/nvproxy.conf", "x\n"), Error);
}

}  // namespace
}  // namespace nvproxy
