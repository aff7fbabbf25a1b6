// CRIU against the kernel (criu_kernel_check.h): the version decision, the inet socket scan of
// real /proc with real sockets, and the Orchestrator refusing before any CUDA toggle.
#include "checkpoint/preflight/criu_kernel_check.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "checkpoint/driver/cuda_driver_api.h"
#include "checkpoint/orchestrator/orchestrator.h"
#include "checkpoint/process/inet_sockets.h"
#include "common/unique_fd.h"
#include "fake_gpu.h"

using namespace nvproxy;
using namespace nvproxy::checkpoint;
using namespace nvproxy::checkpoint::testing;

TEST(CriuKernel, OnlyOldCriuOnNewKernels) {
  auto c = criu_kernel_conflict("4.1.1", "6.18.44-fc-v1045");
  ASSERT_TRUE(c);
  EXPECT_NE(c->find("CRIU 4.1.1"), std::string::npos) << *c;
  EXPECT_NE(c->find("kernel 6.18.44-fc-v1045"), std::string::npos) << *c;
  EXPECT_NE(c->find("install CRIU >= 4.2"), std::string::npos) << *c;
  EXPECT_TRUE(criu_kernel_conflict("4.1", "6.16.0"));
  EXPECT_TRUE(criu_kernel_conflict("3.17.1", "7.0.1"));
  EXPECT_FALSE(criu_kernel_conflict("4.2.1", "6.18.44")) << "CRIU 4.2 reads the option only where it exists";
  EXPECT_FALSE(criu_kernel_conflict("4.2", "6.18.44"));
  EXPECT_FALSE(criu_kernel_conflict("4.1.1", "6.15.9")) << "kernels before 6.16 answer SO_PASSCRED";
  EXPECT_FALSE(criu_kernel_conflict("4.1.1", "6.1.0-28-amd64"));
  EXPECT_FALSE(criu_kernel_conflict("", "6.18.0")) << "an unknown CRIU is not refused (its dump will tell)";
  EXPECT_FALSE(criu_kernel_conflict("4.1.1", ""));
  EXPECT_NE(kernel_release(), "");
}

TEST(InetSockets, Addresses) {
  EXPECT_EQ(inet_address("0100007F:1F90", false), "127.0.0.1:8080");
  EXPECT_EQ(inet_address("00000000:0050", false), "0.0.0.0:80");
  EXPECT_EQ(inet_address("00000000000000000000000000000000:1F90", true), "[::]:8080");
}

namespace {
// A TCP listener on 127.0.0.1 (any port) held by this test process.
UniqueFd listener(int& port) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  EXPECT_EQ(::listen(fd.get(), 1), 0);
  socklen_t len = sizeof a;
  ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&a), &len);
  port = ntohs(a.sin_port);
  return fd;
}
}  // namespace

TEST(InetSockets, FindsAListenerAndAUdpSocketButNoUnixSocket) {
  int port = 0;
  UniqueFd tcp = listener(port);
  UniqueFd udp(::socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  int pair[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
  UniqueFd u0(pair[0]), u1(pair[1]);
  auto found = inet_sockets({::getpid()});
  bool saw_tcp = false;
  for (const auto& s : found) {
    EXPECT_NE(s.fd, u0.get());
    EXPECT_NE(s.fd, u1.get());
    if (s.fd == tcp.get()) {
      saw_tcp = true;
      EXPECT_EQ(s.proto, "tcp");
      EXPECT_EQ(s.local, "127.0.0.1:" + std::to_string(port));
      EXPECT_TRUE(s.listening);
    }
  }
  EXPECT_TRUE(saw_tcp);
  // An unbound UDP socket is in no table until bound: bind it, then it is found.
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_addr = in6addr_loopback;
  ASSERT_EQ(::bind(udp.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  bool saw_udp = false;
  for (const auto& s : inet_sockets({::getpid()})) saw_udp |= s.fd == udp.get() && s.proto == "udp6";
  EXPECT_TRUE(saw_udp);
  EXPECT_TRUE(inet_sockets({999999999}).empty()) << "a gone process is skipped";
}

TEST(CriuKernel, CheckRefusesOnlyWithInetSockets) {
  int port = 0;
  UniqueFd tcp = listener(port);
  CriuKernelCheck old("/opt/criu-4.1/criu", "4.1.1", "6.18.44");
  auto p = old.check({::getpid()});
  ASSERT_TRUE(p);
  EXPECT_NE(p->reason.find("CRIU 4.1.1 cannot checkpoint inet sockets on kernel 6.18.44"), std::string::npos) << p->reason;
  EXPECT_NE(p->reason.find("install CRIU >= 4.2"), std::string::npos) << p->reason;
  EXPECT_EQ(p->key, "criu");
  EXPECT_EQ(p->details["version"], "4.1.1");
  EXPECT_EQ(p->details["kernel"], "6.18.44");
  EXPECT_EQ(p->details["binary"], "/opt/criu-4.1/criu");
  ASSERT_EQ(p->hints.count(::getpid()), 1u);
  EXPECT_NE(p->hints[::getpid()].find("tcp 127.0.0.1:" + std::to_string(port) + " (listening)"), std::string::npos);

  EXPECT_FALSE(CriuKernelCheck("criu", "4.2.1", "6.18.44").check({::getpid()}));
  EXPECT_FALSE(CriuKernelCheck("criu", "4.1.1", "6.12.0").check({::getpid()}));
  // A process without inet sockets: CRIU 4.1 dumps it.
  pid_t child = ::fork();
  if (child == 0) {
    for (int fd = 3; fd < 1024; ++fd) ::close(fd);
    ::pause();
    ::_exit(0);
  }
  // Wait for the child to have closed its fds (its fd directory shows 0-2 only), with a deadline.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  auto fds = [&] {
    int n = 0;
    std::error_code ec;
    for (auto it = fs::directory_iterator("/proc/" + std::to_string(child) + "/fd", ec); !ec && it != fs::directory_iterator();
         it.increment(ec))
      ++n;
    return n;
  };
  while (fds() > 3 && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_FALSE(old.check({child}));
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
}

namespace {
class Refuses final : public SnapshotCheck {
 public:
  std::vector<pid_t> asked;
  std::optional<SnapshotProblem> check(const std::vector<pid_t>& pids) override {
    asked = pids;
    SnapshotProblem p{.reason =
                          "the runtime's snapshot would fail: CRIU 4.1.1 cannot checkpoint inet sockets on kernel "
                          "6.18.44 (...): install CRIU >= 4.2",
                      .key = "criu",
                      .details = {{"version", "4.1.1"}, {"kernel", "6.18.44"}}};
    p.hints[pids.at(0)] = "pid " + std::to_string(pids.at(0)) + " holds an inet socket: tcp 0.0.0.0:8080 (listening) on fd 3";
    return p;
  }
};
}  // namespace

// The refusal comes before anything is toggled, names both versions and the fix, in the error and
// in checkpoint-diagnostic.json; the CUDA process keeps running.
TEST(CriuKernel, OrchestratorRefusesBeforeAnyToggle) {
  FakeGpu gpu;
  CheckpointConfig cfg = gpu.config();
  pid_t a = gpu.start_app({});
  std::vector<pid_t> pids{a};
  FunctionLister lister([&] { return pids; });
  ProcHolderScanner scanner(cfg.device_globs);
  DriverApiToggler toggler(FAKE_LIBCUDA_PATH);
  NvmlGpuUsageProbe probe(cfg.libnvml);
  Logger log(-1);
  Refuses check;
  Orchestrator o(cfg, {.lister = &lister, .scanner = &scanner, .toggler = &toggler, .probe = &probe, .snapshot_check = &check},
                 log);
  auto diag = gpu.dir() / "checkpoint-diagnostic.json";
  int snapshots = 0;
  try {
    o.checkpoint_around({.container_id = "web", .diagnostic_path = diag}, [&] { ++snapshots; });
    FAIL() << "not refused";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::FailedPrecondition);
    std::string m = e.what();
    EXPECT_NE(m.find("checkpoint of container \"web\" refused: the runtime's snapshot would fail: CRIU 4.1.1"), std::string::npos)
        << m;
    EXPECT_NE(m.find("install CRIU >= 4.2"), std::string::npos) << m;
    EXPECT_NE(m.find("holds an inet socket"), std::string::npos) << m;
  }
  EXPECT_EQ(check.asked, pids);
  EXPECT_EQ(snapshots, 0);
  EXPECT_TRUE(gpu.calls("lock").empty()) << "nothing may be toggled";
  EXPECT_EQ(gpu.state(a), "running");
  auto j = nlohmann::json::parse(slurp(diag));
  EXPECT_EQ(j["verdict"], "refused");
  EXPECT_EQ(j["criu"]["version"], "4.1.1");
  EXPECT_EQ(j["criu"]["kernel"], "6.18.44");
  EXPECT_NE(j["reason"].get<std::string>().find("install CRIU >= 4.2"), std::string::npos);

  // CUDA toggling off: refused all the same, before the snapshot.
  Orchestrator none(cfg, {.lister = &lister, .scanner = &scanner, .probe = &probe, .snapshot_check = &check}, log);
  EXPECT_THROW(none.checkpoint_around({.container_id = "web"}, [&] { ++snapshots; }), Error);
  EXPECT_EQ(snapshots, 0);
}
