// Server and client over a real unix socket in a temp dir.
#include <dirent.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <future>
#include <thread>

#include "common/error.h"
#include "common/log.h"
#include "common/ttrpc/client.h"
#include "common/ttrpc/frame.h"
#include "common/ttrpc/server.h"
#include "ttrpc.pb.h"

namespace nvproxy::ttrpc {
namespace {

using namespace std::chrono_literals;

int fd_count() {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
    (void)e;
    ++n;
  }
  return n;
}

Code call_code(Client& c, const std::string& svc, const std::string& m, const std::string& p = "", std::string* msg = nullptr) {
  try {
    c.call(svc, m, p);
  } catch (const Error& e) {
    if (msg) *msg = e.what();
    return e.code();
  }
  return Code::Ok;
}

// A socket speaking raw frames, to send what a well-behaved client never would.
class RawConn {
 public:
  explicit RawConn(const std::string& path) : fd_(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strncpy(a.sun_path, path.c_str(), sizeof(a.sun_path) - 1);
    if (::connect(fd_.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) throw sys_error("connect");
  }
  void send(std::string_view b) {
    while (!b.empty()) {
      ssize_t n = ::send(fd_.get(), b.data(), b.size(), MSG_NOSIGNAL);
      if (n <= 0) throw sys_error("send");
      b.remove_prefix(static_cast<std::size_t>(n));
    }
  }
  void send_request(std::uint32_t id, const std::string& svc, const std::string& method, const std::string& payload) {
    ::ttrpc::Request r;
    r.set_service(svc);
    r.set_method(method);
    r.set_payload(payload);
    send(encode_frame(id, FrameType::Request, r.SerializeAsString()));
  }
  // Next response frame, decoded.
  std::pair<FrameHeader, ::ttrpc::Response> recv_response() {
    std::vector<FrameParser::Event> ev;
    char buf[65536];
    while (ev.empty()) {
      ssize_t n = ::recv(fd_.get(), buf, sizeof(buf), 0);
      if (n <= 0) throw Error(Code::Unavailable, "raw conn closed");
      parser_.feed({buf, static_cast<std::size_t>(n)}, ev);
    }
    EXPECT_EQ(ev.size(), 1u);
    ::ttrpc::Response r;
    EXPECT_TRUE(r.ParseFromString(ev[0].payload));
    return {ev[0].header, r};
  }
  void close() { fd_.reset(); }

 private:
  UniqueFd fd_;
  FrameParser parser_;
};

class TtrpcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fds_before_ = fd_count();
    char tmpl[] = "/tmp/ttrpc-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/s.sock";
    start_server({});
  }

  void start_server(ServerOptions opts) {
    server_ = std::make_unique<Server>(log_, opts);
    server_->register_method("test.Svc", "Echo", [](const CallContext&, const std::string& p) { return p; });
    server_->register_method("test.Svc", "Fail", [](const CallContext&, const std::string& p) -> std::string {
      throw Error(Code::NotFound, "container \"" + p + "\" not found");
    });
    server_->register_method("test.Svc", "Boom",
                             [](const CallContext&, const std::string&) -> std::string { throw std::runtime_error("kaboom"); });
    struct NotAnException {};
    server_->register_method("test.Svc", "Odd",
                             [](const CallContext&, const std::string&) -> std::string { throw NotAnException{}; });
    server_->register_method("test.Svc", "Block", [this](const CallContext&, const std::string&) {
      ++blocked_;
      gate_.wait();
      return std::string("unblocked");
    });
    server_->register_method("test.Svc", "Meta", [](const CallContext& ctx, const std::string&) {
      std::string out = ctx.get(kNamespaceKey).value_or("<none>");
      out += "|" + std::to_string(ctx.metadata.count("k"));
      out += "|" + std::to_string(ctx.timeout ? ctx.timeout->count() : -1);
      out += "|" + ctx.service + "/" + ctx.method;
      return out;
    });
    server_->register_method("test.Svc", "Shutdown", [this](const CallContext&, const std::string&) {
      server_->shutdown();
      return std::string("bye");
    });
    server_->listen(path_);
    run_done_ = std::async(std::launch::async, [this] { server_->run(2); });
  }

  void TearDown() override {
    release();
    if (server_) {
      server_->shutdown();
      EXPECT_EQ(run_done_.wait_for(10s), std::future_status::ready);
      server_.reset();
    }
    std::filesystem::remove_all(dir_);
    EXPECT_EQ(fd_count(), fds_before_) << "fd leak";
  }

  void release() {
    if (!released_) {
      released_ = true;
      open_gate_.set_value();
    }
  }

  void wait_blocked(int n) {
    auto until = std::chrono::steady_clock::now() + 5s;
    while (blocked_.load() < n && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(1ms);
    ASSERT_GE(blocked_.load(), n);
  }

  bool wait_connections(std::size_t n) {
    auto until = std::chrono::steady_clock::now() + 5s;
    while (server_->connection_count() != n && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(1ms);
    }
    return server_->connection_count() == n;
  }

  Logger log_{-1};
  int fds_before_ = 0;
  std::string dir_, path_;
  std::unique_ptr<Server> server_;
  std::future<void> run_done_;
  std::promise<void> open_gate_;
  std::shared_future<void> gate_ = open_gate_.get_future().share();
  bool released_ = false;
  std::atomic<int> blocked_{0};
};

TEST_F(TtrpcTest, Echo) {
  auto c = Client::connect(path_);
  EXPECT_EQ(c->call("test.Svc", "Echo", "hello"), "hello");
  EXPECT_EQ(c->call("test.Svc", "Echo", ""), "");
  std::string big(3 << 20, 'b');
  EXPECT_EQ(c->call("test.Svc", "Echo", big), big);
}

TEST_F(TtrpcTest, UnixPrefixAccepted) {
  auto c = Client::connect("unix://" + path_);
  EXPECT_EQ(c->call("test.Svc", "Echo", "x"), "x");
}

TEST_F(TtrpcTest, StatusErrorsKeepCodeAndMessage) {
  auto c = Client::connect(path_);
  std::string msg;
  EXPECT_EQ(call_code(*c, "test.Svc", "Fail", "abc", &msg), Code::NotFound);
  EXPECT_EQ(msg, "container \"abc\" not found");
  // A standard exception that escaped a handler: Internal, named by the method (never Unknown).
  EXPECT_EQ(call_code(*c, "test.Svc", "Boom", "", &msg), Code::Internal);
  EXPECT_EQ(msg, "test.Svc/Boom: kaboom");
  // Something that is no std::exception: the answer names its type, to look for.
  EXPECT_EQ(call_code(*c, "test.Svc", "Odd", "", &msg), Code::Unknown);
  EXPECT_NE(msg.find("non-standard exception of type "), std::string::npos) << msg;
  EXPECT_NE(msg.find("NotAnException"), std::string::npos) << msg;
  EXPECT_EQ(c->call("test.Svc", "Echo", "still fine"), "still fine");
  // A multi-line report ends with "status", which containerd's appended class word completes.
  EXPECT_EQ(call_code(*c, "test.Svc", "Fail", "a\nrolled back: pid 7 CUDA-running again; the container keeps running\n", &msg),
            Code::NotFound);
  EXPECT_EQ(msg, "container \"a\nrolled back: pid 7 CUDA-running again; the container keeps running\n\" not found\nstatus");
}

TEST_F(TtrpcTest, UnknownServiceOrMethodIsUnimplemented) {
  auto c = Client::connect(path_);
  std::string msg;
  EXPECT_EQ(call_code(*c, "no.Such", "Echo", "", &msg), Code::Unimplemented);
  EXPECT_EQ(msg, "service no.Such");
  EXPECT_EQ(call_code(*c, "test.Svc", "Nope", "", &msg), Code::Unimplemented);
  EXPECT_EQ(msg, "method Nope");
}

TEST_F(TtrpcTest, OversizedRequestIsRefusedAndConnectionKept) {
  RawConn raw(path_);
  const std::uint32_t len = kMaxMessageSize + 100;
  auto h = encode_header({.length = len, .stream_id = 1, .type = 1});
  raw.send({reinterpret_cast<const char*>(h.data()), h.size()});
  raw.send(std::string(len, 'j'));
  auto [hdr, resp] = raw.recv_response();
  EXPECT_EQ(hdr.stream_id, 1u);
  EXPECT_EQ(hdr.type, static_cast<std::uint8_t>(FrameType::Response));
  EXPECT_EQ(resp.status().code(), static_cast<int>(Code::ResourceExhausted));
  raw.send_request(3, "test.Svc", "Echo", "after");
  auto [hdr2, resp2] = raw.recv_response();
  EXPECT_EQ(hdr2.stream_id, 3u);
  EXPECT_EQ(resp2.status().code(), 0);
  EXPECT_EQ(resp2.payload(), "after");
}

TEST_F(TtrpcTest, ClientRefusesOversizedRequestLocally) {
  auto c = Client::connect(path_);
  EXPECT_EQ(call_code(*c, "test.Svc", "Echo", std::string(kMaxMessageSize + 1, 'a')), Code::ResourceExhausted);
  EXPECT_EQ(c->call("test.Svc", "Echo", "ok"), "ok");
}

TEST_F(TtrpcTest, OversizedResponseBecomesResourceExhausted) {
  server_->register_method("test.Svc", "Huge",
                           [](const CallContext&, const std::string&) { return std::string(kMaxMessageSize + 1, 'h'); });
  auto c = Client::connect(path_);
  EXPECT_EQ(call_code(*c, "test.Svc", "Huge"), Code::ResourceExhausted);
  EXPECT_EQ(c->call("test.Svc", "Echo", "ok"), "ok");
}

TEST_F(TtrpcTest, EvenStreamIdAndGarbageAreRejectedPerStream) {
  RawConn raw(path_);
  raw.send_request(2, "test.Svc", "Echo", "x");
  auto [h1, r1] = raw.recv_response();
  EXPECT_EQ(h1.stream_id, 2u);
  EXPECT_EQ(r1.status().code(), static_cast<int>(Code::InvalidArgument));
  raw.send(encode_frame(5, FrameType::Request, "\xff\xff\xff"));
  auto [h2, r2] = raw.recv_response();
  EXPECT_EQ(h2.stream_id, 5u);
  EXPECT_EQ(r2.status().code(), static_cast<int>(Code::InvalidArgument));
  // Data frames and unknown types are ignored; the next request still gets its answer.
  raw.send(encode_frame(7, FrameType::Data, "d"));
  auto h = encode_header({.length = 0, .stream_id = 9, .type = 0x42});
  raw.send({reinterpret_cast<const char*>(h.data()), h.size()});
  raw.send_request(11, "test.Svc", "Echo", "y");
  auto [h3, r3] = raw.recv_response();
  EXPECT_EQ(h3.stream_id, 11u);
  EXPECT_EQ(r3.payload(), "y");
}

TEST_F(TtrpcTest, BlockedHandlerDoesNotBlockOthers) {
  auto c = Client::connect(path_);
  auto other = Client::connect(path_);
  auto blocked = std::async(std::launch::async, [&] { return c->call("test.Svc", "Block", ""); });
  auto blocked2 = std::async(std::launch::async, [&] { return other->call("test.Svc", "Block", ""); });
  wait_blocked(2);
  EXPECT_EQ(c->call("test.Svc", "Echo", "same conn"), "same conn");
  EXPECT_EQ(other->call("test.Svc", "Echo", "other conn"), "other conn");
  EXPECT_EQ(blocked.wait_for(0s), std::future_status::timeout);
  release();
  EXPECT_EQ(blocked.get(), "unblocked");
  EXPECT_EQ(blocked2.get(), "unblocked");
}

TEST_F(TtrpcTest, ConcurrentCallsOnOneClient) {
  auto c = Client::connect(path_);
  std::vector<std::thread> ts;
  std::atomic<int> bad{0};
  for (int t = 0; t < 8; ++t) {
    ts.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        std::string p = std::to_string(t) + ":" + std::to_string(i);
        if (c->call("test.Svc", "Echo", p) != p) ++bad;
      }
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(bad.load(), 0);
}

TEST_F(TtrpcTest, ClientDisconnectMidRequestDoesNotHurtServer) {
  {
    RawConn raw(path_);
    raw.send_request(1, "test.Svc", "Block", "");
    wait_blocked(1);
    raw.close();
  }
  {
    RawConn trunc(path_);  // EOF in the middle of a header
    trunc.send(std::string("\0\0\0", 3));
  }
  {
    RawConn trunc(path_);  // EOF in the middle of a payload
    trunc.send(encode_frame(1, FrameType::Request, "0123456789").substr(0, 14));
  }
  EXPECT_TRUE(wait_connections(0));
  release();  // the handler answers a closed connection
  auto c = Client::connect(path_);
  EXPECT_EQ(c->call("test.Svc", "Echo", "alive"), "alive");
}

TEST_F(TtrpcTest, MetadataAndTimeoutPassThrough) {
  auto c = Client::connect(path_);
  Metadata md{{std::string(kNamespaceKey), "k8s.io"}, {"k", "1"}, {"k", "2"}};
  EXPECT_EQ(c->call("test.Svc", "Meta", "", md, 5s), "k8s.io|2|5000000000|test.Svc/Meta");
  EXPECT_EQ(c->call("test.Svc", "Meta", ""), "<none>|0|-1|test.Svc/Meta");
}

TEST_F(TtrpcTest, ClientTimeoutThenLateAnswerIgnored) {
  auto c = Client::connect(path_);
  std::string msg;
  try {
    c->call("test.Svc", "Block", "", {}, 50ms);
    FAIL() << "no timeout";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::DeadlineExceeded);
    EXPECT_NE(std::string(e.what()).find("test.Svc/Block"), std::string::npos);
  }
  release();
  EXPECT_EQ(c->call("test.Svc", "Echo", "next"), "next");
}

TEST_F(TtrpcTest, ShutdownFromInsideHandler) {
  auto c = Client::connect(path_);
  EXPECT_EQ(c->call("test.Svc", "Shutdown", ""), "bye");
  EXPECT_EQ(run_done_.wait_for(5s), std::future_status::ready);
  EXPECT_EQ(call_code(*c, "test.Svc", "Echo"), Code::Unavailable);
  EXPECT_THROW(Client::connect(path_)->call("test.Svc", "Echo", ""), Error);
}

TEST_F(TtrpcTest, ShutdownWaitsForInFlightHandler) {
  auto c = Client::connect(path_);
  auto blocked = std::async(std::launch::async, [&] { return c->call("test.Svc", "Block", ""); });
  wait_blocked(1);
  server_->shutdown();
  EXPECT_EQ(run_done_.wait_for(200ms), std::future_status::timeout);
  release();
  EXPECT_EQ(blocked.get(), "unblocked");
  EXPECT_EQ(run_done_.wait_for(5s), std::future_status::ready);
}

TEST_F(TtrpcTest, ShutdownGraceIsBounded) {
  server_->shutdown();
  ASSERT_EQ(run_done_.wait_for(5s), std::future_status::ready);
  server_.reset();
  start_server({.shutdown_grace = 100ms});
  auto c = Client::connect(path_);
  auto blocked = std::async(std::launch::async, [&] {
    try {
      c->call("test.Svc", "Block", "");
    } catch (const Error& e) {
      return e.code();
    }
    return Code::Ok;
  });
  wait_blocked(1);
  server_->shutdown();
  EXPECT_EQ(run_done_.wait_for(5s), std::future_status::ready);
  EXPECT_EQ(blocked.get(), Code::Unavailable);  // the server closed the connection
}

TEST_F(TtrpcTest, ConnectToNothingIsUnavailable) {
  try {
    Client::connect(dir_ + "/missing.sock");
    FAIL() << "connected";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::Unavailable);
    EXPECT_NE(std::string(e.what()).find("missing.sock"), std::string::npos);
  }
}

TEST_F(TtrpcTest, ServeAdoptsListeningSocket) {
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::string p = dir_ + "/own.sock";
  std::strncpy(a.sun_path, p.c_str(), sizeof(a.sun_path) - 1);
  ASSERT_EQ(::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  ASSERT_EQ(::listen(fd.get(), 16), 0);
  server_->serve(std::move(fd));
  auto c = Client::connect(p);
  EXPECT_EQ(c->call("test.Svc", "Echo", "adopted"), "adopted");
}

TEST_F(TtrpcTest, PeerOfAnotherUserIsRefused) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to switch to another uid";
  // Open the modes so that the refusal comes from the peer check, not from the file system.
  ASSERT_EQ(::chmod(dir_.c_str(), 0755), 0);
  ASSERT_EQ(::chmod(path_.c_str(), 0666), 0);
  ::ttrpc::Request r;
  r.set_service("test.Svc");
  r.set_method("Echo");
  std::string frame = encode_frame(1, FrameType::Request, r.SerializeAsString());
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // Child of a threaded process: plain system calls only, then _exit.
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(10);
    int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::memcpy(a.sun_path, path_.c_str(), path_.size());
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) ::_exit(11);
    (void)::send(fd, frame.data(), frame.size(), MSG_NOSIGNAL);
    char b;
    ::_exit(::recv(fd, &b, 1, 0) <= 0 ? 0 : 12);  // closed without an answer
  }
  int st = 0;
  ASSERT_EQ(::waitpid(pid, &st, 0), pid);
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 0);
  auto c = Client::connect(path_);
  EXPECT_EQ(c->call("test.Svc", "Echo", "me"), "me");
}

TEST_F(TtrpcTest, ManyConnectionsComeAndGoWithoutLeaks) {
  for (int i = 0; i < 50; ++i) {
    auto c = Client::connect(path_);
    EXPECT_EQ(c->call("test.Svc", "Echo", std::to_string(i)), std::to_string(i));
  }
  EXPECT_TRUE(wait_connections(0));
  // TearDown checks the fd count once the server is gone.
}

}  // namespace
}  // namespace nvproxy::ttrpc

namespace nvproxy::ttrpc {
namespace {

// A server on one end of a socketpair, its client on the other (how the shim talks to its CUDA
// helper): details of a StatusError cross; the server ends once its only peer hangs up.
TEST(TtrpcSocketpair, DetailsCrossAndServerEndsWithItsPeer) {
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  Logger log(-1);
  Server server(log, {.require_same_user = false, .stop_when_disconnected = true});
  server.register_method("s", "fail", [](const CallContext&, const std::string&) -> std::string {
    throw StatusError(Code::DeadlineExceeded, "driver said no", {{"type.example/A", "one"}, {"type.example/B", "two"}});
  });
  server.register_method("s", "echo", [](const CallContext&, const std::string& p) { return p; });
  server.serve_connection(UniqueFd(sv[1]));
  auto ran = std::async(std::launch::async, [&] { server.run(); });
  auto client = Client::adopt(UniqueFd(sv[0]), "peer");
  EXPECT_EQ(client->call("s", "echo", "hi"), "hi");
  try {
    client->call("s", "fail", "");
    FAIL();
  } catch (const StatusError& e) {
    EXPECT_EQ(e.code(), Code::DeadlineExceeded);
    EXPECT_STREQ(e.what(), "driver said no");
    ASSERT_EQ(e.details().size(), 2u);
    ASSERT_NE(e.find("type.example/B"), nullptr);
    EXPECT_EQ(e.find("type.example/B")->value, "two");
    EXPECT_EQ(e.find("type.example/C"), nullptr);
  }
  client->close();
  ASSERT_EQ(ran.wait_for(10s), std::future_status::ready) << "the server outlived its only peer";
  try {
    client->call("s", "echo", "late");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::Unavailable);
    EXPECT_NE(std::string(e.what()).find("peer"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace nvproxy::ttrpc
