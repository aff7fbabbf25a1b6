// The shim's own socket (shim/address.h): a path socket, mode 0600, in a 0700 directory, never
// abstract; its name is a hash, so hostile namespaces or ids cannot steer it elsewhere.
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "common/error.h"
#include "common/log.h"
#include "common/ttrpc/server.h"
#include "shim/kit/address.h"

namespace nvproxy::shim {
namespace {

namespace fs = std::filesystem;

struct TempDir {
  fs::path path;
  TempDir() {
    char t[] = "/tmp/nvproxy-sock-XXXXXX";
    if (!::mkdtemp(t)) throw std::runtime_error("mkdtemp");
    path = t;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

struct stat stat_of(const fs::path& p) {
  struct stat st {};
  EXPECT_EQ(::lstat(p.c_str(), &st), 0) << p;
  return st;
}

// Restores the umask a test loosened.
struct Umask {
  mode_t old;
  explicit Umask(mode_t m) : old(::umask(m)) {}
  ~Umask() { ::umask(old); }
};

Code listen_code(const std::string& path) {
  try {
    listen_unix(path);
  } catch (const Error& e) {
    return e.code();
  }
  return Code::Ok;
}

TEST(ShimSocket, AbstractAndEmptyNamesAreRefused) {
  EXPECT_EQ(listen_code("@containerd-shim/abc"), Code::InvalidArgument);
  EXPECT_EQ(listen_code("@"), Code::InvalidArgument);
  EXPECT_EQ(listen_code(""), Code::InvalidArgument);
  try {
    listen_unix("@x");
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("abstract"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(can_connect("@x"));
}

TEST(ShimSocket, PathLongerThanSunPathIsRefusedNotTruncated) {
  TempDir t;
  const std::size_t max = sizeof(sockaddr_un{}.sun_path) - 1;  // 107: room for the NUL
  std::string base = t.path.string() + "/";
  std::string fits = base + std::string(max - base.size(), 's');
  std::string too_long = fits + "x";
  ASSERT_EQ(fits.size(), max);
  EXPECT_EQ(listen_code(too_long), Code::InvalidArgument);
  EXPECT_FALSE(fs::exists(fs::path(too_long).parent_path() / std::string(max - base.size(), 's')))
      << "a truncated name must not have been bound";
  EXPECT_EQ(listen_code(std::string(4096, 'a')), Code::InvalidArgument);
  {
    UniqueFd fd = listen_unix(fits);
    EXPECT_TRUE(fd);
    EXPECT_TRUE(S_ISSOCK(stat_of(fits).st_mode));
  }
}

TEST(ShimSocket, SocketIs0600InA0700DirectoryWhateverTheUmask) {
  TempDir t;
  Umask loose(0);
  std::string path = socket_path("unix:///run/containerd/containerd.sock.ttrpc", "k8s.io", "sandbox1", (t.path / "s").string());
  UniqueFd fd = listen_unix(path);
  ASSERT_TRUE(fd);
  auto sock = stat_of(path);
  EXPECT_TRUE(S_ISSOCK(sock.st_mode));
  EXPECT_EQ(sock.st_mode & 07777, 0600u) << std::oct << (sock.st_mode & 07777);
  auto dir = stat_of(t.path / "s");
  EXPECT_TRUE(S_ISDIR(dir.st_mode));
  EXPECT_EQ(dir.st_mode & 07777, 0700u) << std::oct << (dir.st_mode & 07777);
  EXPECT_TRUE(can_connect(path));
  // It really is the path socket: the abstract name of the same text reaches nothing.
  EXPECT_FALSE(can_connect("@" + path));
}

TEST(ShimSocket, TightensAnExistingLooseDirectory) {
  TempDir t;
  fs::path d = t.path / "s";
  fs::create_directories(d);
  ::chmod(d.c_str(), 0777);
  UniqueFd fd = listen_unix((d / "x").string());
  EXPECT_EQ(stat_of(d).st_mode & 07777, 0700u);
}

TEST(ShimSocket, StaleFileIsNotSilentlyReplaced) {
  TempDir t;
  std::string path = (t.path / "s" / "sock").string();
  fs::create_directories(t.path / "s");
  std::ofstream(path) << "not a socket";
  EXPECT_THROW(listen_unix(path), Error);
  EXPECT_TRUE(fs::is_regular_file(path));
}

TEST(ShimSocket, NameIsAHashSoHostileIdsCannotSteerIt) {
  TempDir t;
  std::string dir = (t.path / "s").string();
  for (auto [ns, id] : std::vector<std::pair<std::string, std::string>>{
           {"../../etc", "x"}, {"k8s.io", "../../../../tmp/pwn"}, {"a/b", "c/d"}, {"@", "\n"}, {std::string(300, 'n'), "i"}}) {
    std::string p = socket_path("unix:///run/containerd/containerd.sock.ttrpc", ns, id, dir);
    EXPECT_EQ(fs::path(p).parent_path(), dir) << ns << " " << id;
    std::string name = fs::path(p).filename();
    EXPECT_EQ(name.size(), 40u) << name;
    EXPECT_EQ(name.find_first_not_of("0123456789abcdef"), std::string::npos) << name;
  }
  // Deterministic and distinct per namespace and group.
  EXPECT_EQ(socket_path("a", "ns", "g", dir), socket_path("a", "ns", "g", dir));
  EXPECT_NE(socket_path("a", "ns", "g", dir), socket_path("a", "ns2", "g", dir));
  EXPECT_NE(socket_path("a", "ns", "g", dir), socket_path("a", "ns", "g2", dir));
  // The default location fits sun_path with room to spare.
  EXPECT_LT(socket_path("unix:///run/containerd/containerd.sock.ttrpc", "k8s.io", "x").size(), 100u);
  EXPECT_EQ(socket_path("a", "b", "c").rfind(std::string(kSocketDir) + "/", 0), 0u);
}

TEST(ShimSocket, TtrpcServerListenAlsoLeaves0600) {
  TempDir t;
  Umask loose(0);
  Logger log(-1);
  ttrpc::Server s(log);
  std::string path = (t.path / "srv.sock").string();
  s.listen(path);
  EXPECT_EQ(stat_of(path).st_mode & 07777, 0600u);
}

}  // namespace
}  // namespace nvproxy::shim
