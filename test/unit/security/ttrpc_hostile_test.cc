// Hostile ttrpc clients against the real Server over a unix socket, and the real Task service
// behind it (register_task_service + a TaskService with no container; no daemon needed).
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <future>
#include <map>
#include <thread>
#include <vector>

#include "alloc_probe.h"
#include "common/error.h"
#include "common/log.h"
#include "common/process.h"
#include "common/ttrpc/client.h"
#include "common/ttrpc/frame.h"
#include "common/ttrpc/server.h"
#include "proto/shim_task.pb.h"
#include "shim/kit/events.h"
#include "shim/task/gpu_checkpoint.h"
#include "shim/task/task_rpc.h"
#include "shim/task/task_service.h"
#include "ttrpc.pb.h"

namespace nvproxy {
namespace {

using namespace std::chrono_literals;
using namespace nvproxy::ttrpc;
namespace fs = std::filesystem;
namespace task = containerd::task::v2;

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
  void send_header(std::uint32_t len, std::uint32_t id) {
    auto h = encode_header({.length = len, .stream_id = id, .type = 1});
    send({reinterpret_cast<const char*>(h.data()), h.size()});
  }
  std::string request(std::uint32_t id, const std::string& svc, const std::string& method, const std::string& payload) {
    ::ttrpc::Request r;
    r.set_service(svc);
    r.set_method(method);
    r.set_payload(payload);
    return encode_frame(id, FrameType::Request, r.SerializeAsString());
  }
  // Next response, or nullopt on EOF / after `wait`.
  std::optional<::ttrpc::Response> recv_response(std::chrono::milliseconds wait = 5000ms) {
    auto until = std::chrono::steady_clock::now() + wait;
    while (pending_.empty()) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
      if (left.count() <= 0) return std::nullopt;
      pollfd p{fd_.get(), POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
      char buf[65536];
      ssize_t n = ::recv(fd_.get(), buf, sizeof buf, 0);
      if (n <= 0) return std::nullopt;
      parser_.feed({buf, static_cast<std::size_t>(n)}, pending_);
    }
    ::ttrpc::Response r;
    EXPECT_TRUE(r.ParseFromString(pending_.front().payload));
    pending_.erase(pending_.begin());
    return r;
  }
  void close() { fd_.reset(); }

 private:
  UniqueFd fd_;
  FrameParser parser_;
  std::vector<FrameParser::Event> pending_;
};

Code call_code(Client& c, const std::string& svc, const std::string& m, const std::string& p = "", std::string* msg = nullptr) {
  try {
    c.call(svc, m, p);
  } catch (const Error& e) {
    if (msg) *msg = e.what();
    return e.code();
  }
  return Code::Ok;
}

// ---- the parser alone ---------------------------------------------------------------------------

TEST(FrameLimits, FourGiBHeaderIsRefusedWithoutAllocating) {
  FrameParser p;
  std::vector<FrameParser::Event> ev;
  auto h = encode_header({.length = 0xFFFFFFFFu, .stream_id = 1, .type = 1});
  std::string chunk(64 * 1024, 'z');
  security_test::arm_alloc_probe();
  p.feed({reinterpret_cast<const char*>(h.data()), h.size()}, ev);
  for (int i = 0; i < 64; ++i) p.feed(chunk, ev);  // 4 MiB of the claimed 4 GiB arrive
  std::size_t largest = security_test::disarm_alloc_probe();
  EXPECT_TRUE(ev.empty()) << "nothing to report until the whole claimed payload has been skipped";
  EXPECT_LE(p.buffered(), 64u) << "the parser buffered the payload";
  EXPECT_LT(largest, 256u * 1024) << "largest allocation while skipping: " << largest;
  EXPECT_FALSE(p.idle());
}

TEST(FrameLimits, JustOverTheLimitIsOversizedAndTheNextFrameParses) {
  FrameParser p(1024);
  std::vector<FrameParser::Event> ev;
  auto h = encode_header({.length = 1025, .stream_id = 7, .type = 1});
  p.feed({reinterpret_cast<const char*>(h.data()), h.size()}, ev);
  p.feed(std::string(1025, 'a') + encode_frame(9, FrameType::Request, "ok"), ev);
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].kind, FrameParser::Event::Kind::Oversized);
  EXPECT_EQ(ev[0].header.stream_id, 7u);
  EXPECT_EQ(ev[1].kind, FrameParser::Event::Kind::Frame);
  EXPECT_EQ(ev[1].payload, "ok");
  EXPECT_LE(p.buffered(), 1024u);
}

// ---- a real server --------------------------------------------------------------------------------

class HostileClients : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/nvproxy-sec-ttrpc-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/s";
    server_ = std::make_unique<Server>(log_);
    server_->register_method("t.Svc", "Echo", [](const CallContext&, const std::string& p) { return p; });
    server_->register_method("t.Svc", "Slow", [this](const CallContext&, const std::string& p) {
      ++slow_started_;
      std::this_thread::sleep_for(300ms);
      ++slow_done_;
      return p;
    });
    svc_ = std::make_unique<shim::TaskService>(shim::ServiceDeps{
        .ns = "default",
        .self_binary = "/nonexistent",
        .log = log_,
        .runner = runner_,
        .events = events_,
        .checkpoints = hooks_,
        .make_runtime = [this](const oci::RuntimeConfig& rc,
                               const std::filesystem::path& f) { return std::make_unique<oci::Runtime>(rc, runner_, log_, f); },
        .load_config = [](const std::string& path) { return shim::load_config(path); },
        .shutdown = [] {}});
    shim::register_task_service(*server_, *svc_);
    server_->listen(path_);
    done_ = std::async(std::launch::async, [this] { server_->run(1); });
  }
  void TearDown() override {
    server_->shutdown();
    EXPECT_EQ(done_.wait_for(10s), std::future_status::ready);
    server_.reset();
    fs::remove_all(dir_);
  }
  bool wait_connections(std::size_t n) {
    auto until = std::chrono::steady_clock::now() + 5s;
    while (server_->connection_count() != n && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(1ms);
    return server_->connection_count() == n;
  }
  Code task_call(Client& c, const std::string& method, const google::protobuf::MessageLite& req, std::string* msg = nullptr) {
    return call_code(c, shim::kTaskServiceName, method, req.SerializeAsString(), msg);
  }

  Logger log_{-1};
  DirectWaiter waiter_;
  ProcessRunner runner_{waiter_};
  shim::EventPublisher events_{"", "default", log_};
  shim::GpuCheckpointHooks hooks_{log_, runner_};
  std::unique_ptr<shim::TaskService> svc_;
  std::string dir_, path_;
  std::unique_ptr<Server> server_;
  std::future<void> done_;
  std::atomic<int> slow_started_{0}, slow_done_{0};
};

TEST_F(HostileClients, FourGiBHeaderDoesNotAllocateAndOthersAreServed) {
  RawConn evil(path_);
  std::string chunk(1 << 20, 'z');
  security_test::arm_alloc_probe();
  evil.send_header(0xFFFFFFFFu, 1);
  for (int i = 0; i < 8; ++i) evil.send(chunk);  // 8 MiB of the claimed 4 GiB
  auto good = Client::connect(path_);
  EXPECT_EQ(good->call("t.Svc", "Echo", "still served"), "still served");
  std::size_t largest = security_test::disarm_alloc_probe();
  EXPECT_LT(largest, 1u << 20) << "the server allocated " << largest << " bytes for a frame it must refuse";
  EXPECT_FALSE(evil.recv_response(100ms).has_value()) << "no answer before the claimed bytes have been skipped";
  EXPECT_EQ(server_->connection_count(), 2u) << "the evil connection is kept, skipping (like Go's ttrpc)";
}

TEST_F(HostileClients, OversizedFrameIsAnsweredResourceExhaustedAndTheConnectionKept) {
  RawConn raw(path_);
  raw.send_header(kMaxMessageSize + 1, 1);
  raw.send(std::string(kMaxMessageSize + 1, 'x'));
  auto r = raw.recv_response();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status().code(), static_cast<int>(Code::ResourceExhausted));
  raw.send(raw.request(3, "t.Svc", "Echo", "after"));
  auto r2 = raw.recv_response();
  ASSERT_TRUE(r2.has_value());
  EXPECT_EQ(r2->payload(), "after");
}

TEST_F(HostileClients, UnknownMethodsAndServicesAreUnimplemented) {
  auto c = Client::connect(path_);
  std::string msg;
  EXPECT_EQ(call_code(*c, shim::kTaskServiceName, "Frobnicate", "", &msg), Code::Unimplemented);
  EXPECT_EQ(call_code(*c, shim::kTaskServiceName, "", "", &msg), Code::Unimplemented);
  EXPECT_EQ(call_code(*c, shim::kTaskServiceName, "create", "", &msg), Code::Unimplemented) << "names are case-sensitive";
  EXPECT_EQ(call_code(*c, "containerd.task.v3.Task", "Create", "", &msg), Code::Unimplemented);
  EXPECT_EQ(call_code(*c, std::string("containerd.task.v2.Task\0x", 25), "Create", "", &msg), Code::Unimplemented);
  EXPECT_EQ(call_code(*c, "grpc.health.v1.Health", "Check", "", &msg), Code::Unimplemented);
  EXPECT_EQ(c->call("t.Svc", "Echo", "ok"), "ok");
}

TEST_F(HostileClients, ClientThatDisconnectsMidFrameDoesNotHurtOthers) {
  auto good = Client::connect(path_);
  for (int i = 0; i < 20; ++i) {
    RawConn bad(path_);
    std::string f = bad.request(1, "t.Svc", "Echo", std::string(1000, 'q'));
    bad.send(std::string_view(f).substr(0, 5 + i * 40));  // a header or a payload cut short
    bad.close();
  }
  EXPECT_EQ(good->call("t.Svc", "Echo", "fine"), "fine");
  EXPECT_TRUE(wait_connections(1)) << server_->connection_count();
}

TEST_F(HostileClients, ClientThatDisconnectsWhileItsRequestRunsDoesNotHurtOthers) {
  auto good = Client::connect(path_);
  {
    RawConn bad(path_);
    bad.send(bad.request(1, "t.Svc", "Slow", "lost"));
    auto until = std::chrono::steady_clock::now() + 5s;
    while (slow_started_ == 0 && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(1ms);
    ASSERT_EQ(slow_started_, 1);
  }  // gone before its answer
  EXPECT_EQ(good->call("t.Svc", "Echo", "meanwhile"), "meanwhile") << "served while the orphan's handler runs";
  auto until = std::chrono::steady_clock::now() + 5s;
  while (slow_done_ == 0 && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(1ms);
  EXPECT_EQ(slow_done_, 1);
  std::this_thread::sleep_for(50ms);  // its answer goes nowhere
  EXPECT_EQ(good->call("t.Svc", "Slow", "mine"), "mine");
  EXPECT_TRUE(wait_connections(1));
}

TEST_F(HostileClients, ManyAbandonedConnectionsAreAllReaped) {
  for (int i = 0; i < 200; ++i) RawConn(path_).close();
  auto good = Client::connect(path_);
  EXPECT_EQ(good->call("t.Svc", "Echo", "x"), "x");
  EXPECT_TRUE(wait_connections(1)) << server_->connection_count();
}

TEST_F(HostileClients, GarbagePayloadsAreInvalidArgumentPerStream) {
  RawConn raw(path_);
  raw.send(encode_frame(1, FrameType::Request, std::string("\xff\xff\xff\xff", 4)));
  raw.send(raw.request(3, shim::kTaskServiceName, "Create", std::string("\x0a\xff\xff\xff\xff\x0f", 6)));
  raw.send(raw.request(5, "t.Svc", "Echo", "ok"));
  std::map<int, int> codes;
  for (int i = 0; i < 3; ++i) {
    auto r = raw.recv_response();
    ASSERT_TRUE(r.has_value());
    codes[r->status().code()]++;
  }
  EXPECT_EQ(codes[static_cast<int>(Code::InvalidArgument)], 2);
  EXPECT_EQ(codes[0], 1);
}

// ---- the Task service: ids are checked before anything touches the disk -----------------------------

TEST_F(HostileClients, CreateRefusesHostileIdsBeforeTouchingTheBundle) {
  fs::path bundle = fs::path(dir_) / "bundle";
  fs::create_directories(bundle);
  auto c = Client::connect(path_);
  for (const std::string& id : std::vector<std::string>{"", "..", "../../etc", "a/b", "-rf", "a\nb", std::string(77, 'a'),
                                                        std::string("a\0b", 3), "$(reboot)"}) {
    task::CreateTaskRequest r;
    r.set_id(id);
    r.set_bundle(bundle.string());
    std::string msg;
    Code code = task_call(*c, "Create", r, &msg);
    EXPECT_EQ(code, Code::InvalidArgument) << "id " << id << ": " << msg;
    EXPECT_NE(msg.find("container id"), std::string::npos) << msg;
  }
  EXPECT_TRUE(fs::is_empty(bundle)) << "nothing written into the bundle";
  EXPECT_EQ(fs::directory_iterator(dir_) != fs::directory_iterator(), true);
}

TEST_F(HostileClients, CreateRefusesARelativeBundle) {
  auto c = Client::connect(path_);
  task::CreateTaskRequest r;
  r.set_id("c1");
  r.set_bundle("../../../etc");
  std::string msg;
  EXPECT_EQ(task_call(*c, "Create", r, &msg), Code::InvalidArgument) << msg;
}

TEST_F(HostileClients, EveryMethodAnswersHostileIdsWithAStatusNotACrash) {
  auto c = Client::connect(path_);
  for (const std::string& id : std::vector<std::string>{"..", "../x", "", std::string(5000, 'a'), "a\tb"}) {
    task::StateRequest st;
    st.set_id(id);
    EXPECT_EQ(task_call(*c, "State", st), Code::NotFound) << id;
    task::KillRequest k;
    k.set_id(id);
    k.set_exec_id(id);
    k.set_signal(9);
    EXPECT_EQ(task_call(*c, "Kill", k), Code::NotFound) << id;
    task::ExecProcessRequest e;
    e.set_id(id);
    e.set_exec_id("../../x");
    EXPECT_EQ(task_call(*c, "Exec", e), Code::NotFound) << id;
    task::DeleteRequest d;
    d.set_id(id);
    EXPECT_EQ(task_call(*c, "Delete", d), Code::NotFound) << id;
    task::CheckpointTaskRequest ck;
    ck.set_id(id);
    ck.set_path("/../../etc");
    EXPECT_EQ(task_call(*c, "Checkpoint", ck), Code::NotFound) << id;
  }
  // Strings that are not UTF-8 do not even decode (proto3 string fields).
  task::StateRequest bad;
  bad.set_id("\xff\xfe");
  EXPECT_EQ(task_call(*c, "State", bad), Code::InvalidArgument);
  EXPECT_EQ(c->call("t.Svc", "Echo", "alive"), "alive");
}

}  // namespace
}  // namespace nvproxy
