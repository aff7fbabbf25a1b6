// A gVisor pod's GPU containers toggled in one attempt (checkpoint/sandbox/sandbox_pod_tools.h): fakes stand
// in for each container's agent, each numbering its processes from 1 as a container of a sandbox
// does; one Orchestrator runs over the composites, as PodSandboxAssembly assembles it.
#include "checkpoint/sandbox/sandbox_pod_tools.h"

#include <gtest/gtest.h>

#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "checkpoint/image/image_record.h"
#include "checkpoint/orchestrator/orchestrator.h"
#include "checkpoint/session/session.h"
#include "common/fs.h"

using namespace nvproxy;
using namespace nvproxy::checkpoint;

namespace {

// Every toggle of every container, in order: "OP NAME PID".
struct CallLog {
  std::mutex mu;
  std::vector<std::string> calls;
  void add(const std::string& c) {
    std::lock_guard lk(mu);
    calls.push_back(c);
  }
  // The index of the first call starting with `prefix`, or calls.size().
  std::size_t first(const std::string& prefix) {
    for (std::size_t i = 0; i < calls.size(); ++i)
      if (calls[i].starts_with(prefix)) return i;
    return calls.size();
  }
  std::size_t last(const std::string& prefix) {
    std::size_t at = calls.size();
    for (std::size_t i = 0; i < calls.size(); ++i)
      if (calls[i].starts_with(prefix)) at = i;
    return at;
  }
};

// One container of the sandbox: its processes 1..n each hold the GPU and run CUDA.
class FakeContainer {
 public:
  FakeContainer(std::string name, int n, CallLog& log) : name_(std::move(name)), log_(log) {
    for (int p = 1; p <= n; ++p) state_[p] = CudaState::Running;
  }
  std::string fail_checkpoint_of;  // "PID": that pid's checkpoint fails
  std::map<pid_t, CudaState> state_;

  struct Lister final : ProcessLister {
    explicit Lister(FakeContainer& c) : c(c) {}
    std::vector<pid_t> list() override {
      std::vector<pid_t> out;
      for (const auto& [p, _] : c.state_) out.push_back(p);
      return out;
    }
    FakeContainer& c;
  } lister{*this};
  struct Scanner final : HolderScanner {
    explicit Scanner(FakeContainer& c) : c(c) {}
    std::vector<Holder> scan(const std::vector<pid_t>& pids) override {
      std::vector<Holder> out;
      for (pid_t p : pids)
        if (c.state_.contains(p) && c.state_[p] != CudaState::Checkpointed)
          out.push_back({.pid = p, .name = "app", .cmdline = "app", .kind = HolderKind::Fd, .fd = 3, .path = "/dev/nvidia0"});
      return out;
    }
    std::optional<ProcInfo> info(pid_t p) override {
      if (!c.state_.contains(p)) return std::nullopt;
      return ProcInfo{.pid = p, .ppid = p == 1 ? 0 : 1, .name = "app", .cmdline = "app", .maps_libcuda = true};
    }
    FakeContainer& c;
  } scanner{*this};
  struct Toggler final : CudaToggler {
    explicit Toggler(FakeContainer& c) : c(c) {}
    std::string describe() override { return "fake"; }
    CudaState get_state(pid_t p) override { return c.state_.at(p); }
    void lock(pid_t p, unsigned) override { set(p, "lock", CudaState::Locked); }
    void checkpoint(pid_t p) override {
      if (c.fail_checkpoint_of == std::to_string(p)) {
        c.log_.add("checkpoint-failed " + c.name_ + " " + std::to_string(p));
        throw CudaError(p, "checkpoint", 999, "CUDA_ERROR_UNKNOWN");
      }
      set(p, "checkpoint", CudaState::Checkpointed);
    }
    void restore(pid_t p, const DeviceMap&) override { set(p, "restore", CudaState::Locked); }
    void unlock(pid_t p) override { set(p, "unlock", CudaState::Running); }
    void set(pid_t p, const std::string& op, CudaState s) {
      c.log_.add(op + " " + c.name_ + " " + std::to_string(p));
      std::lock_guard lk(mu);
      c.state_.at(p) = s;
    }
    FakeContainer& c;
    std::mutex mu;
  } toggler{*this};

  PodMemberTools seams() { return {.name = name_, .lister = &lister, .scanner = &scanner, .toggler = &toggler}; }

 private:
  std::string name_;
  CallLog& log_;
};

class SandboxPod : public ::testing::Test {
 public:  // PodTools below answers from them
  CallLog calls;
  FakeContainer cuda{"cuda", 2, calls}, cuda2{"cuda2", 1, calls};
  PodPids ids{{"cuda", "cuda2"}};
  std::vector<PodMemberTools> seams{cuda.seams(), cuda2.seams()};
  PodLister lister{ids, seams};
  PodHolderScanner scanner{ids, seams};
  Logger log{-1};
  PodCudaToggler toggler{ids, seams, "checkpoint of \"pod\"", log};
  CheckpointConfig cfg = [] {
    CheckpointConfig c;
    c.device_globs = {"/dev/nvidia*"};
    return c;
  }();
  Orchestrator orch{cfg, {.lister = &lister, .scanner = &scanner, .toggler = &toggler}, log};
};

}  // namespace

TEST(PodPidsTest, EachContainersPidsAreNumberedApartTheFirstKeepsItsOwn) {
  PodPids ids({"cuda", "cuda2", "cuda3"});
  EXPECT_EQ(ids.encode(0, 7), 7);
  EXPECT_EQ(ids.encode(2, 7), 2000007);
  EXPECT_EQ(ids.member(2000007), 2u);
  EXPECT_EQ(ids.local(2000007), 7);
  EXPECT_EQ(ids.whose(1000001), "pid 1 of container \"cuda2\"");
  EXPECT_EQ(ids.whose(5), "");
  EXPECT_THROW((void)ids.encode(1, PodPids::kStride), Error);
  EXPECT_EQ(ids.legend({1, 2}), "");
  EXPECT_EQ(ids.legend({2000003, 1, 1000001}),
            "the pod's GPU containers number their processes apart: 1000001 is pid 1 of container \"cuda2\", 2000003 is "
            "pid 3 of container \"cuda3\"; pids below 1000000 are container \"cuda\"'s");
}

TEST_F(SandboxPod, OneAttemptLocksEveryContainersProcessesBeforeAnyCheckpoint) {
  std::vector<std::string> at_snapshot;
  auto out = orch.checkpoint_around(CheckpointRequest{.container_id = "pod"}, [&] {
    std::lock_guard lk(calls.mu);
    at_snapshot = calls.calls;
  });
  std::vector<pid_t> want{1, 2, 1000001};
  EXPECT_EQ(out.toggled, want);
  ASSERT_EQ(at_snapshot.size(), 6u);
  for (const char* lock : {"lock cuda 1", "lock cuda 2", "lock cuda2 1"}) {
    auto at = std::find(at_snapshot.begin(), at_snapshot.end(), lock);
    ASSERT_NE(at, at_snapshot.end()) << lock;
    EXPECT_LT(static_cast<std::size_t>(at - at_snapshot.begin()), calls.first("checkpoint")) << lock << " after a checkpoint";
  }
  EXPECT_EQ(calls.last("lock"), 2u);
  EXPECT_EQ(calls.first("checkpoint"), 3u);
  for (auto* c : {&cuda, &cuda2})
    for (const auto& [p, s] : c->state_) EXPECT_EQ(s, CudaState::Running) << p;
}

TEST_F(SandboxPod, AFailedCheckpointInOneContainerRollsBackEveryContainerAndNamesIt) {
  cuda2.fail_checkpoint_of = "1";
  bool snapshot = false;
  try {
    orch.checkpoint_around(CheckpointRequest{.container_id = "pod"}, [&] { snapshot = true; });
    FAIL() << "the checkpoint went on";
  } catch (const Error& e) {
    const std::string text = e.what();
    EXPECT_NE(text.find("CUDA checkpoint failed in 1 process"), std::string::npos) << text;
    EXPECT_NE(text.find("1000001"), std::string::npos) << text;
    EXPECT_NE(text.find("container \"cuda2\" pid 1"), std::string::npos) << text;
    EXPECT_EQ(ids.legend(lister.listed({1000001, 1048576})),
              "the pod's GPU containers number their processes apart: 1000001 is pid 1 of container \"cuda2\"; pids below "
              "1000000 are container \"cuda\"'s");
  }
  EXPECT_FALSE(snapshot);
  EXPECT_EQ(calls.last("lock"), 2u) << "every container locked before any checkpoint";
  for (auto* c : {&cuda, &cuda2})
    for (const auto& [p, s] : c->state_) EXPECT_EQ(s, CudaState::Running) << p;
  EXPECT_LT(calls.first("unlock cuda 1"), calls.calls.size());
  EXPECT_LT(calls.first("unlock cuda 2"), calls.calls.size());
  EXPECT_LT(calls.first("unlock cuda2 1"), calls.calls.size());
}

namespace {

// The runtime's verbs a pod's session asks: its snapshot writes nothing.
class PodRuntime final : public SessionRuntime {
 public:
  int snapshots = 0;
  std::vector<pid_t> ps() override { return {}; }
  pid_t init_pid() override { return 0; }
  std::string status() override { return "running"; }
  void pause() override {}
  void resume() override {}
  void snapshot(const std::filesystem::path&, const ReleasePlan&) override { ++snapshots; }
  void restore(const std::filesystem::path&, bool, const std::string&) override {}
  std::string remove() override { return ""; }
  std::optional<Criu> criu() override { return std::nullopt; }
  Identity identity() override { return {"runsc", "release-1"}; }
  std::string cannot_checkpoint() override { return ""; }
};

// PodSandboxAssembly's shape over the fake containers.
class PodTools final : public SessionTools {
 public:
  explicit PodTools(SandboxPod& t) : t_(t) {}
  Orchestrator& orchestrator() override { return t_.orch; }
  ProcessLister& lister() override { return t_.lister; }
  HolderScanner& scanner() override { return t_.scanner; }
  [[nodiscard]] bool toggles_cuda() const override { return true; }
  [[nodiscard]] bool host_view() const override { return false; }
  GpuUsageProbe* host_facts() override { return nullptr; }
  ProcessIdentity identify(pid_t pid) override { return {.host_pid = pid, .pid = t_.ids.local(pid), .name = "app"}; }
  pid_t container_pid(pid_t pid) override { return t_.ids.local(pid); }
  [[nodiscard]] std::string label() const override { return " (pod)"; }
  [[nodiscard]] std::string pod_member_of(pid_t pid) const override {
    return t_.ids.member(pid) == 0 ? "" : t_.ids.name(t_.ids.member(pid));
  }
  [[nodiscard]] std::vector<std::string> pod_members() const override { return {"cuda2"}; }
  [[nodiscard]] std::string pid_legend(const std::vector<pid_t>& pids) const override {
    return t_.ids.legend(t_.lister.listed(pids));
  }

 private:
  SandboxPod& t_;
};

}  // namespace

class SandboxPodSession : public SandboxPod {
 protected:
  std::filesystem::path dir = [] {
    char tmpl[] = "/tmp/nvproxy-pod-session.XXXXXX";
    return std::filesystem::path(::mkdtemp(tmpl));
  }();
  PodRuntime rt;
  PodTools tools{*this};
  PodRecord pod{
      .sandbox_id = "s",
      .containers = {
          {.id = "s", .sandbox = true}, {.name = "cuda", .id = "c1", .gpus = 1}, {.name = "cuda2", .id = "c2", .gpus = 1}}};
  CheckpointSession session{{.id = "c1", .bundle = dir, .pod = pod}, rt, tools, log};
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
};

TEST_F(SandboxPodSession, EachGpuContainersProcessesGoIntoItsOwnRecord) {
  std::filesystem::create_directories(dir / "image");
  session.checkpoint({.leave_running = true, .image_path = dir / "image"});
  EXPECT_EQ(rt.snapshots, 1);
  auto own = read_image_record(dir / "image");
  ASSERT_TRUE(own);
  EXPECT_EQ(own->container, "c1");
  EXPECT_EQ(own->cuda_pids, (std::vector<ImageProcess>{{1, "app"}, {2, "app"}}));
  ASSERT_TRUE(own->pod);
  auto theirs = read_image_record(dir / "image" / kPodCudaDir / "cuda2");
  ASSERT_TRUE(theirs);
  EXPECT_EQ(theirs->container, "c2");
  EXPECT_EQ(theirs->sandbox, "runsc");
  EXPECT_EQ(theirs->runtime, "runsc");
  EXPECT_EQ(theirs->cuda_pids, (std::vector<ImageProcess>{{1, "app"}}));
  EXPECT_FALSE(theirs->checkpoint_phases.empty());
}

TEST_F(SandboxPodSession, AFailureSaysWhoseEachPidIs) {
  cuda2.fail_checkpoint_of = "1";
  std::filesystem::create_directories(dir / "image");
  try {
    session.checkpoint({.leave_running = true, .image_path = dir / "image"});
    FAIL() << "the checkpoint went on";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("1000001 is pid 1 of container \"cuda2\""), std::string::npos) << e.what();
  }
  EXPECT_EQ(rt.snapshots, 0);
  auto j = nlohmann::json::parse(read_file(dir / kDiagnosticFile));
  EXPECT_EQ(j["verdict"], "failed");
  EXPECT_NE(j.value("pod_pids", "").find("1000001 is pid 1 of container \"cuda2\""), std::string::npos) << j.dump();
}
