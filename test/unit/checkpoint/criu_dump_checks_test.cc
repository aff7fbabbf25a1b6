// The CRIU dump checks: io_uring found in a real process (this one) and in a fake /proc, the
// network lock's program looked for in a given PATH.
#include "checkpoint/preflight/criu_dump_checks.h"

#include <arpa/inet.h>
#include <linux/io_uring.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "common/fs.h"

using namespace nvproxy;
using namespace nvproxy::checkpoint;
namespace fs = std::filesystem;

namespace {

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

class FakeProc : public ::testing::Test {
 protected:
  fs::path root = fs::temp_directory_path() / ("nvproxy-criu-checks-" + std::to_string(::getpid()));
  void SetUp() override { fs::create_directories(root / "self/ns"); }
  void TearDown() override { fs::remove_all(root); }
  void process(pid_t pid, const std::string& comm) {
    fs::create_directories(root / std::to_string(pid) / "fd");
    fs::create_directories(root / std::to_string(pid) / "ns");
    std::ofstream(root / std::to_string(pid) / "comm") << comm << "\n";
    std::ofstream(root / std::to_string(pid) / "maps") << "";
  }
  void net_ns(pid_t pid, bool own) {
    std::ofstream(root / "self/ns/net") << "host";
    if (own)
      std::ofstream(root / std::to_string(pid) / "ns/net") << "own";
    else
      fs::create_hard_link(root / "self/ns/net", root / std::to_string(pid) / "ns/net");
  }
  fs::path bin(const std::string& dir, const std::string& name) {
    fs::create_directories(root / dir);
    fs::path p = root / dir / name;
    std::ofstream(p) << "#!/bin/sh\n";
    fs::permissions(p, fs::perms::owner_all);
    return p;
  }
};

}  // namespace

TEST(IoUring, AnInstanceOfARealProcessIsFound) {
  io_uring_params params{};
  int fd = static_cast<int>(::syscall(__NR_io_uring_setup, 4, &params));
  if (fd < 0) GTEST_SKIP() << "io_uring is not available here: " << std::strerror(errno);
  auto users = io_uring_users({::getpid()});
  ::close(fd);
  ASSERT_EQ(users.size(), 1u);
  EXPECT_EQ(users[0].fds, std::vector<int>{fd});
  EXPECT_TRUE(io_uring_users({::getpid()}).empty()) << "closed and never mapped: nothing left";
}

TEST_F(FakeProc, IoUringFdsAndRingMappingsRefuseNamingThePid) {
  process(41, "python3");
  process(42, "sleep");
  fs::create_symlink("anon_inode:[io_uring]", root / "41/fd/12");
  fs::create_symlink("/dev/null", root / "41/fd/0");
  std::ofstream(root / "41/maps") << "7f00-7f10 rw-s 00000000 00:0f 1234 anon_inode:[io_uring]\n"
                                  << "7f20-7f30 rw-s 10000000 00:0f 1234 anon_inode:[io_uring]\n";
  IoUringCheck check(root);
  auto p = check.check({41, 42});
  ASSERT_TRUE(p);
  EXPECT_EQ(p->key, "io_uring");
  EXPECT_TRUE(has(p->reason, "1 process uses io_uring, which CRIU cannot dump")) << p->reason;
  ASSERT_EQ(p->hints.count(41), 1u);
  EXPECT_EQ(p->hints.count(42), 0u);
  EXPECT_TRUE(has(p->hints[41], "pid 41 (python3) holds an io_uring instance on fd 12 (2 ring mappings)")) << p->hints[41];
  EXPECT_TRUE(has(p->hints[41], "UV_USE_IO_URING=0")) << p->hints[41];
  EXPECT_FALSE(check.check({42}));
}

TEST_F(FakeProc, AnOwnNetworkNamespaceNeedsIptablesRestoreInPath) {
  process(7, "server");
  net_ns(7, true);
  fs::create_directories(root / "empty");
  auto p = NetworkLockCheck({"link-remap"}, (root / "empty").string(), false, root).check({7});
  ASSERT_TRUE(p);
  EXPECT_EQ(p->key, "network_lock");
  EXPECT_TRUE(has(p->reason, "no iptables-restore is in PATH")) << p->reason;
  EXPECT_TRUE(has(p->reason, "\"network-lock skip\"")) << p->reason;
  EXPECT_TRUE(has(p->hints[7], "pid 7 (server) runs in a network namespace of its own")) << p->hints[7];

  bin("nft", "nft");
  p = NetworkLockCheck({}, (root / "empty").string() + ":" + (root / "nft").string(), false, root).check({7});
  ASSERT_TRUE(p);
  EXPECT_TRUE(has(p->reason, "\"network-lock nftables\"")) << p->reason;

  bin("ipt", "iptables-restore");
  EXPECT_FALSE(NetworkLockCheck({}, (root / "ipt").string(), false, root).check({7})) << "iptables-restore is there";
  EXPECT_FALSE(NetworkLockCheck({"network-lock skip"}, (root / "empty").string(), false, root).check({7}))
      << "the operator chose the method";
}

TEST_F(FakeProc, TheHostNetworkNeedsNoLock) {
  process(7, "server");
  net_ns(7, false);
  EXPECT_FALSE(NetworkLockCheck({}, "", false, root).check({7}));
}

// A real established connection of this process (loopback): refused unless tcp-established is asked.
TEST(TcpEstablished, AConnectionOfARealProcessIsRefusedWithoutTheOption) {
  int l = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(l, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(l, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(l, 1), 0);
  socklen_t len = sizeof a;
  ASSERT_EQ(::getsockname(l, reinterpret_cast<sockaddr*>(&a), &len), 0);
  EXPECT_FALSE(TcpEstablishedCheck(false).check({::getpid()})) << "a listener alone needs no option";
  int c = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_EQ(::connect(c, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  int s = ::accept4(l, nullptr, nullptr, SOCK_CLOEXEC);
  ASSERT_GE(s, 0);
  auto p = TcpEstablishedCheck(false).check({::getpid()});
  auto allowed = TcpEstablishedCheck(true).check({::getpid()});
  // Dumped (tcp-established) on the host's network, each is locked with iptables-restore.
  auto lock = NetworkLockCheck({}, "/nonexistent", true).check({::getpid()});
  auto no_tcp = NetworkLockCheck({}, "/nonexistent", false).check({::getpid()});
  ::close(s);
  ::close(c);
  ::close(l);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->key, "tcp");
  EXPECT_TRUE(has(p->reason, "2 established TCP connections and CRIU is not asked to keep them")) << p->reason;
  EXPECT_TRUE(has(p->reason, "tcp-established")) << p->reason;
  EXPECT_TRUE(has(p->hints[::getpid()], "has an established TCP connection: tcp 127.0.0.1:")) << p->hints[::getpid()];
  EXPECT_FALSE(allowed);
  ASSERT_TRUE(lock);
  EXPECT_TRUE(has(lock->reason, "CRIU locks each established TCP connection it dumps (tcp-established)")) << lock->reason;
  EXPECT_FALSE(no_tcp) << "this test runs on the host's network: nothing to lock without tcp-established";
  EXPECT_TRUE(has_criu_option({"link-remap", "--tcp-established"}, "tcp-established"));
  EXPECT_FALSE(has_criu_option({"link-remap"}, "tcp-established"));
}
