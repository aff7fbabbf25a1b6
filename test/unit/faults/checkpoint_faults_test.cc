// Fault injection into the checkpoint orchestrator: every step fails in turn (lock, checkpoint,
// verify, the runtime's snapshot, resume, the restore after a runtime restore), for each process of
// a container in turn. Whatever fails, the outcome must be honest and complete:
//   - a process the orchestrator calls rolled back / resumed is CUDA-running (state file) and its
//     work continues (its counter advances);
//   - a process it calls stuck is really not running, in the state it names;
//   - every process it toggled is in exactly one of the two lists; the others were never touched;
//   - stuck happens exactly when the injected fault makes a process unrecoverable (its restore or
//     unlock keeps failing, or the driver refuses to restore it), never otherwise.
// The fake driver's protocol: test/fixtures/fake_cuda/fake_cuda_protocol.h ("fail" file: OP TARGET RC).
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <set>
#include <stdexcept>

#include "checkpoint/driver/cuda_driver_api.h"
#include "checkpoint/orchestrator/orchestrator.h"
#include "checkpoint/programs/cuda_helper_client.h"
#include "test/unit/checkpoint/fake_gpu.h"

using namespace nvproxy;
using namespace nvproxy::checkpoint;
using namespace nvproxy::checkpoint::testing;

namespace {

constexpr int kN = 3;  // processes per container

struct Verdict {
  bool threw = false;
  Code code = Code::Ok;
  std::string message;
  std::vector<pid_t> running;          // rolled back / resumed, as reported
  std::map<pid_t, std::string> stuck;  // pid -> state, as reported
};

class CheckpointFaults : public ::testing::Test {
 protected:
  FakeGpu gpu;
  CheckpointConfig cfg = gpu.config();
  std::vector<pid_t> pids;
  std::function<std::vector<pid_t>()> list_fn = [this] { return pids; };
  FunctionLister lister{[this] { return list_fn(); }};
  std::unique_ptr<ProcHolderScanner> scanner;
  DriverApiToggler toggler{FAKE_LIBCUDA_PATH};
  CudaToggler* active = &toggler;  // what the orchestrator calls (a test may wrap toggler)
  std::unique_ptr<NvmlGpuUsageProbe> probe;
  Logger log{-1};
  fs::path diag_path = gpu.dir() / "checkpoint-diagnostic.json";
  int snapshots = 0;

  void start(int n = kN, std::vector<std::string> extra_for_k = {}, int k = -1) {
    for (int i = 0; i < n; ++i) pids.push_back(gpu.start_app(i == k ? extra_for_k : std::vector<std::string>{}));
  }
  Orchestrator make() {
    scanner = std::make_unique<ProcHolderScanner>(cfg.device_globs);
    probe = std::make_unique<NvmlGpuUsageProbe>(cfg.libnvml);
    return Orchestrator(cfg, {.lister = &lister, .scanner = scanner.get(), .toggler = active, .probe = probe.get()}, log);
  }

  // Runs a checkpoint; collects what it reported (the exception's diagnostic JSON, or the outcome).
  Verdict checkpoint(const SnapshotFn& snap, bool keep_running = true) {
    Verdict v;
    auto o = make();
    try {
      auto out = o.checkpoint_around({.container_id = "c1", .keep_running = keep_running, .diagnostic_path = diag_path}, snap);
      if (keep_running) v.running = out.toggled;
    } catch (const Error& e) {
      v.threw = true;
      v.code = e.code();
      v.message = e.what();
      read_diag(v);
    }
    return v;
  }
  Verdict restore_after_runtime_restore() {
    Verdict v;
    auto o = make();
    try {
      v.running = o.restore_after_runtime_restore("c1", diag_path).resumed;
    } catch (const Error& e) {
      v.threw = true;
      v.code = e.code();
      v.message = e.what();
      read_diag(v);
    }
    return v;
  }
  void read_diag(Verdict& v) {
    if (!fs::exists(diag_path)) return;
    auto j = nlohmann::json::parse(slurp(diag_path));
    if (j.contains("rolled_back"))
      for (const auto& p : j["rolled_back"]) v.running.push_back(p.get<pid_t>());
    if (j.contains("stuck"))
      for (const auto& s : j["stuck"]) v.stuck[s["pid"].get<pid_t>()] = s["state"].get<std::string>();
  }

  bool counting(pid_t p) {
    long before = gpu.counter(p);
    for (int i = 0; i < 100; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      if (gpu.counter(p) > before) return true;
    }
    return false;
  }
  std::set<pid_t> toggled() {
    std::set<pid_t> out;
    for (const auto& c : gpu.calls()) {
      if (c.op == "lock" || c.op == "checkpoint") out.insert(c.pid);
    }
    return out;
  }

  // The invariants of the header comment. `want_stuck`: the pids the fault makes unrecoverable.
  void expect_honest(const Verdict& v, const std::set<pid_t>& want_stuck, const std::string& what) {
    SCOPED_TRACE(what + "\n" + v.message);
    std::set<pid_t> running(v.running.begin(), v.running.end());
    std::set<pid_t> stuck;
    for (const auto& [p, _] : v.stuck) stuck.insert(p);
    EXPECT_EQ(stuck, want_stuck) << "stuck exactly when unrecoverable";
    for (pid_t p : running) EXPECT_EQ(stuck.count(p), 0u) << "pid " << p << " both rolled back and stuck";
    for (pid_t p : toggled()) {
      EXPECT_TRUE(running.count(p) + stuck.count(p) == 1) << "toggled pid " << p << " is unaccounted for";
    }
    for (pid_t p : pids) {
      if (stuck.count(p)) {
        EXPECT_NE(gpu.state(p), "running") << "pid " << p << " reported stuck but running";
        EXPECT_EQ(gpu.state(p), v.stuck.at(p)) << "pid " << p << ": the stuck state named is the real one";
        EXPECT_NE(v.message.find("STUCK: pid " + std::to_string(p)), std::string::npos) << "the error names pid " << p;
      } else {
        EXPECT_EQ(gpu.state(p), "running") << "pid " << p;
        EXPECT_TRUE(counting(p)) << "pid " << p << " does not work any more";
      }
    }
    if (!stuck.empty()) {
      EXPECT_EQ(v.message.find("rolled back: pid " + std::to_string(*stuck.begin()) + " "), std::string::npos);
    }
  }
};

// ---- before the snapshot: every fault rolls everyone back -----------------------------------------

TEST_F(CheckpointFaults, LockOfEachOneFails) {
  for (int k = 0; k < kN; ++k) {
    SCOPED_TRACE("k=" + std::to_string(k));
    pids.clear();
    start();
    gpu.fail("lock " + std::to_string(pids[k]) + " 909\n");
    Verdict v = checkpoint([this] { ++snapshots; });
    EXPECT_TRUE(v.threw);
    EXPECT_EQ(v.code, Code::FailedPrecondition);
    EXPECT_EQ(snapshots, 0);
    EXPECT_TRUE(gpu.calls("checkpoint").empty()) << "no checkpoint after a failed lock";
    expect_honest(v, {}, "lock of pid " + std::to_string(pids[k]));
    gpu.fail("");
    fs::remove(gpu.dir() / "calls.log");
  }
}

TEST_F(CheckpointFaults, CheckpointOfEachOneFails) {
  for (int k = 0; k < kN; ++k) {
    SCOPED_TRACE("k=" + std::to_string(k));
    pids.clear();
    start();
    gpu.fail("checkpoint " + std::to_string(pids[k]) + "\n");
    Verdict v = checkpoint([this] { ++snapshots; });
    EXPECT_EQ(v.code, Code::FailedPrecondition);
    EXPECT_EQ(snapshots, 0);
    expect_honest(v, {}, "checkpoint of pid " + std::to_string(pids[k]));
    EXPECT_EQ(gpu.calls("restore").size(), static_cast<std::size_t>(kN - 1)) << "the others are restored";
    gpu.fail("");
    fs::remove(gpu.dir() / "calls.log");
  }
}

TEST_F(CheckpointFaults, GetStateOfOneFailsNothingIsToggled) {
  start();
  gpu.fail("get-state " + std::to_string(pids[1]) + "\n");
  Verdict v = checkpoint([this] { ++snapshots; });
  EXPECT_EQ(v.code, Code::FailedPrecondition);
  EXPECT_TRUE(gpu.calls("lock").empty());
  expect_honest(v, {}, "get-state");
}

TEST_F(CheckpointFaults, VerifyCatchesEachOneKeepingItsDevice) {
  for (int k = 0; k < kN; ++k) {
    SCOPED_TRACE("k=" + std::to_string(k));
    FakeGpu* g = &gpu;
    (void)g;
    pids.clear();
    start(kN, {"--keep-open"}, k);
    Verdict v = checkpoint([this] { ++snapshots; });
    EXPECT_EQ(v.code, Code::FailedPrecondition);
    EXPECT_EQ(snapshots, 0) << "the runtime never runs while a device is held";
    EXPECT_NE(v.message.find("still holds GPU devices after CUDA toggle"), std::string::npos) << v.message;
    expect_honest(v, {}, "verify, pid " + std::to_string(pids[k]));
    fs::remove(gpu.dir() / "calls.log");
  }
}

TEST_F(CheckpointFaults, ListerFailsAtVerify) {
  start();
  int calls = 0;
  list_fn = [&] {
    if (++calls == 2) throw Error(Code::Unavailable, "runc ps: container c1 is gone");
    return pids;
  };
  Verdict v = checkpoint([this] { ++snapshots; });
  EXPECT_EQ(v.code, Code::Unavailable);
  EXPECT_EQ(snapshots, 0);
  expect_honest(v, {}, "lister at verify");
}

TEST_F(CheckpointFaults, SnapshotFailsWithAnError) {
  start();
  Verdict v = checkpoint([] { throw Error(Code::Unavailable, "runc checkpoint: criu failed"); });
  EXPECT_EQ(v.code, Code::Unavailable);
  expect_honest(v, {}, "snapshot Error");
}

TEST_F(CheckpointFaults, SnapshotFailsWithAForeignException) {
  start();
  Verdict v = checkpoint([] { throw std::runtime_error("bad_alloc in the runtime driver"); });
  EXPECT_EQ(v.code, Code::Internal);
  expect_honest(v, {}, "snapshot std::exception");
}

TEST_F(CheckpointFaults, SnapshotFailsAndTheTaskMustStopAnyway) {
  start();
  Verdict v = checkpoint([] { throw Error(Code::Internal, "criu dump failed"); }, /*keep_running=*/false);
  EXPECT_TRUE(v.threw);
  expect_honest(v, {}, "snapshot with exit=true");
}

// ---- faults in the rollback itself -----------------------------------------------------------

TEST_F(CheckpointFaults, RestoreFailsDuringRollbackOnlyThatOneIsStuck) {
  for (int k = 0; k < kN; ++k) {
    SCOPED_TRACE("k=" + std::to_string(k));
    pids.clear();
    start();
    int other = (k + 1) % kN;
    gpu.fail("checkpoint " + std::to_string(pids[other]) + "\nrestore " + std::to_string(pids[k]) + "\n");
    Verdict v = checkpoint([this] { ++snapshots; });
    EXPECT_EQ(v.code, Code::FailedPrecondition);
    expect_honest(v, {pids[k]}, "rollback restore of pid " + std::to_string(pids[k]));
    EXPECT_EQ(gpu.state(pids[k]), "checkpointed");
    gpu.fail("");
    // What an operator would do: bring it back by hand once the driver recovers.
    Verdict again = restore_after_runtime_restore();
    EXPECT_FALSE(again.threw) << again.message;
    EXPECT_EQ(gpu.state(pids[k]), "running");
    EXPECT_TRUE(counting(pids[k]));
    fs::remove(gpu.dir() / "calls.log");
  }
}

TEST_F(CheckpointFaults, UnlockFailsDuringRollbackThatOneIsStuckLocked) {
  start();
  gpu.fail("lock " + std::to_string(pids[2]) + "\nunlock " + std::to_string(pids[0]) + "\n");
  Verdict v = checkpoint([this] { ++snapshots; });
  expect_honest(v, {pids[0]}, "rollback unlock");
  EXPECT_EQ(v.stuck.at(pids[0]), "locked");
}

// ---- after a successful snapshot: resume ---------------------------------------------------------

TEST_F(CheckpointFaults, ResumeRestoreOfEachOneFails) {
  for (int k = 0; k < kN; ++k) {
    SCOPED_TRACE("k=" + std::to_string(k));
    pids.clear();
    start();
    gpu.fail("restore " + std::to_string(pids[k]) + "\n");
    snapshots = 0;
    Verdict v = checkpoint([this] { ++snapshots; });
    EXPECT_EQ(snapshots, 1);
    EXPECT_EQ(v.code, Code::Internal) << "the checkpoint was written, but not everyone resumed";
    EXPECT_NE(v.message.find("the checkpoint was written"), std::string::npos) << v.message;
    expect_honest(v, {pids[k]}, "resume restore of pid " + std::to_string(pids[k]));
    gpu.fail("");
    fs::remove(gpu.dir() / "calls.log");
  }
}

TEST_F(CheckpointFaults, ResumeUnlockFails) {
  start();
  gpu.fail("unlock " + std::to_string(pids[1]) + "\n");
  Verdict v = checkpoint([this] { ++snapshots; });
  EXPECT_EQ(v.code, Code::Internal);
  expect_honest(v, {pids[1]}, "resume unlock");
  EXPECT_EQ(v.stuck.at(pids[1]), "locked");
}

TEST_F(CheckpointFaults, ResumeOfAnUnrestorableProcess) {
  start();
  gpu.mark(pids[2], "unrestorable");
  Verdict v = checkpoint([this] { ++snapshots; });
  expect_honest(v, {pids[2]}, "driver refuses restore (801)");
  EXPECT_EQ(v.stuck.at(pids[2]), "checkpointed");
}

// A one-shot driver error is recoverable by asking again (reliability F6): nobody is left stuck.
TEST_F(CheckpointFaults, TransientResumeFailureIsRetried) {
  for (const char* op : {"restore", "unlock"}) {
    SCOPED_TRACE(op);
    pids.clear();
    start();
    gpu.fail(std::string(op) + " any\n");  // the first call of op fails, once
    Verdict v = checkpoint([this] { ++snapshots; });
    EXPECT_FALSE(v.threw) << v.message;
    expect_honest(v, {}, std::string("one-shot ") + op + " failure");
    EXPECT_EQ(gpu.calls(op).size(), static_cast<size_t>(kN) + 1) << "one process asked twice";
    gpu.fail("");
    fs::remove(gpu.dir() / "calls.log");
    for (const char* f : {"fail.restore.claimed", "fail.unlock.claimed"}) fs::remove(gpu.dir() / f);
  }
}

// What the shim sees when nvproxy-cuda-helper dies in the middle of a call: an Error that is not a
// driver answer. The next call (a fresh helper) works, so asking once more brings the process back.
class HelperDiesOnce final : public CudaToggler {
 public:
  explicit HelperDiesOnce(CudaToggler& t, std::string op) : t_(t), op_(std::move(op)) {}
  std::string describe() override { return t_.describe(); }
  CudaState get_state(pid_t pid) override { return t_.get_state(pid); }
  void lock(pid_t pid, unsigned ms) override {
    maybe_die("lock");
    t_.lock(pid, ms);
  }
  void checkpoint(pid_t pid) override {
    maybe_die("checkpoint");
    t_.checkpoint(pid);
  }
  void restore(pid_t pid, const DeviceMap& map) override {
    maybe_die("restore");
    t_.restore(pid, map);
  }
  void unlock(pid_t pid) override {
    maybe_die("unlock");
    t_.unlock(pid);
  }

 private:
  void maybe_die(const std::string& op) {
    if (op == op_ && !died_.exchange(true))
      throw Error(Code::Unavailable, "nvproxy-cuda-helper (pid 4242) ended: killed by signal 11");
  }
  CudaToggler& t_;
  std::string op_;
  std::atomic<bool> died_{false};
};

TEST_F(CheckpointFaults, HelperDeathDuringResumeIsRetried) {
  for (const char* op : {"restore", "unlock"}) {
    SCOPED_TRACE(op);
    pids.clear();
    start();
    HelperDiesOnce flaky(toggler, op);
    active = &flaky;
    Verdict v = checkpoint([this] { ++snapshots; });
    EXPECT_FALSE(v.threw) << v.message;
    expect_honest(v, {}, std::string("helper died during ") + op);
    fs::remove(gpu.dir() / "calls.log");
  }
}

TEST_F(CheckpointFaults, HelperDeathDuringRollbackIsRetried) {
  start();
  gpu.fail("checkpoint " + std::to_string(pids[1]) + "\n");  // forces a rollback
  HelperDiesOnce flaky(toggler, "restore");
  active = &flaky;
  Verdict v = checkpoint([this] { ++snapshots; });
  EXPECT_TRUE(v.threw);
  EXPECT_EQ(snapshots, 0);
  expect_honest(v, {}, "helper died during rollback");
}

// The real helper program, killed while the runtime takes its snapshot: the resume starts a fresh
// one and brings every process back.
TEST_F(CheckpointFaults, HelperKilledDuringTheSnapshotIsReplaced) {
  start();
  cfg.cuda_helper = CUDA_HELPER_PATH;
  DirectWaiter w;
  ProcessRunner r(w);
  CudaTools cuda = make_cuda_tools(cfg, r);
  active = cuda.toggler.get();
  pid_t killed = 0;
  Verdict v = checkpoint([&] {
    killed = cuda.helper->pid();
    if (killed > 0) ::kill(killed, SIGKILL);
    ++snapshots;
  });
  EXPECT_FALSE(v.threw) << v.message;
  EXPECT_GT(killed, 0) << "the helper ran the lock and checkpoint";
  expect_honest(v, {}, "helper killed during the snapshot");
  EXPECT_GT(cuda.helper->pid(), 0);
  EXPECT_NE(cuda.helper->pid(), killed) << "a fresh helper resumed them";
}

// ---- the restore path after the runtime's restore (Create with a checkpoint) ----------------------

TEST_F(CheckpointFaults, RestoreAfterRuntimeRestoreOfEachOneFails) {
  for (int k = 0; k < kN; ++k) {
    SCOPED_TRACE("k=" + std::to_string(k));
    pids.clear();
    start();
    Verdict first = checkpoint([this] { ++snapshots; }, /*keep_running=*/false);
    ASSERT_FALSE(first.threw) << first.message;
    for (pid_t p : pids) ASSERT_EQ(gpu.state(p), "checkpointed");
    gpu.fail("restore " + std::to_string(pids[k]) + "\n");
    Verdict v = restore_after_runtime_restore();
    EXPECT_TRUE(v.threw);
    EXPECT_EQ(v.code, Code::FailedPrecondition);
    expect_honest(v, {pids[k]}, "runtime-restore path, pid " + std::to_string(pids[k]));
    // Once the driver recovers, a second pass resumes it: nothing is lost.
    gpu.fail("");
    Verdict again = restore_after_runtime_restore();
    EXPECT_FALSE(again.threw) << again.message;
    EXPECT_EQ(again.running, std::vector<pid_t>{pids[k]});
    for (pid_t p : pids) EXPECT_EQ(gpu.state(p), "running");
    fs::remove(gpu.dir() / "calls.log");
  }
}

// A process that dies while the runtime checkpoints (CRIU gave up, the OOM killer): it must not be
// claimed rolled back, and the others must still come back. The victim is our own child (not one of
// FakeGpu's) so the test can reap it: a zombie still has /proc/PID/status, and the fake driver would
// then treat it as alive.
TEST_F(CheckpointFaults, ProcessThatDiesDuringTheSnapshotIsNotClaimedRolledBack) {
  start(2);
  pid_t victim = ::fork();
  if (victim == 0) {
    ::execl(FAKE_CUDA_APP_PATH, FAKE_CUDA_APP_PATH, "--dir", gpu.dir().c_str(), "--device", gpu.device().c_str(),
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ASSERT_GT(victim, 0);
  for (int i = 0; i < 5000 && !fs::exists(gpu.file(victim, "ready")); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  ASSERT_TRUE(fs::exists(gpu.file(victim, "ready")));
  pids.push_back(victim);
  Verdict v = checkpoint([&] {
    ::kill(victim, SIGKILL);
    ::waitpid(victim, nullptr, 0);
    throw Error(Code::Internal, "criu: process vanished");
  });
  pids.pop_back();  // gone: the checks below are about the survivors
  EXPECT_TRUE(v.threw);
  EXPECT_EQ(std::count(v.running.begin(), v.running.end(), victim), 0) << "a dead process is not rolled back\n" << v.message;
  for (pid_t p : pids) {
    EXPECT_EQ(gpu.state(p), "running");
    EXPECT_TRUE(counting(p));
    EXPECT_EQ(std::count(v.running.begin(), v.running.end(), p), 1) << p;
  }
}

}  // namespace
