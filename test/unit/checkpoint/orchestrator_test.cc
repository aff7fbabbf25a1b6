// The orchestrator against the fake driver (test/fixtures/fake_cuda) through the real dlopen
// binding, real fake_cuda_app processes and the real /proc scan.
#include "checkpoint/orchestrator/orchestrator.h"

#include <sys/mman.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <signal.h>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include <fcntl.h>

#include "checkpoint/driver/cuda_driver_api.h"
#include "common/fs.h"
#include "fake_gpu.h"

using namespace nvproxy;
using namespace nvproxy::checkpoint;
using namespace nvproxy::checkpoint::testing;

namespace {

class OrchestratorTest : public ::testing::Test {
 protected:
  FakeGpu gpu;
  CheckpointConfig cfg = gpu.config();
  std::vector<pid_t> pids;
  std::atomic<int> list_calls{0};
  FunctionLister lister{[this] {
    ++list_calls;
    return pids;
  }};
  std::unique_ptr<ProcHolderScanner> scanner;
  DriverApiToggler toggler{FAKE_LIBCUDA_PATH};
  std::unique_ptr<NvmlGpuUsageProbe> probe;
  Logger log{-1};
  fs::path diag_path = gpu.dir() / "checkpoint-diagnostic.json";
  int snapshots = 0;

  // with: the tools beyond the lister, the scanner, the toggler and the GPU probe.
  Orchestrator make(CudaToggler* t = nullptr, bool use_toggler = true, const std::function<void(OrchestratorTools&)>& with = {}) {
    scanner = std::make_unique<ProcHolderScanner>(cfg.device_globs);
    probe = std::make_unique<NvmlGpuUsageProbe>(cfg.libnvml);
    OrchestratorTools tools{
        .lister = &lister, .scanner = scanner.get(), .toggler = use_toggler ? (t ? t : &toggler) : nullptr, .probe = probe.get()};
    if (with) with(tools);
    return Orchestrator(cfg, tools, log);
  }
  Orchestrator make_with(const std::function<void(OrchestratorTools&)>& with, CudaToggler* t = nullptr) {
    return make(t, true, with);
  }
  CheckpointRequest req(bool keep_running = true) {
    return {.container_id = "c1", .keep_running = keep_running, .diagnostic_path = diag_path};
  }
  SnapshotFn counting_snapshot() {
    return [this] { ++snapshots; };
  }
  // Runs a checkpoint expected to fail; returns its Error.
  Error checkpoint_error(const SnapshotFn& snap, bool keep_running = true) {
    return checkpoint_error(ReleasingSnapshotFn([&](const ReleasePlan&) { snap(); }), keep_running);
  }
  Error checkpoint_error(const ReleasingSnapshotFn& snap, bool keep_running = true) {
    auto o = make();
    try {
      o.checkpoint_around(req(keep_running), snap);
    } catch (const Error& e) {
      return e;
    }
    ADD_FAILURE() << "checkpoint did not fail";
    return Error(Code::Ok, "");
  }
  nlohmann::json diag_json() { return nlohmann::json::parse(slurp(diag_path)); }
  // An orchestrator that tells inherited files apart (kcmp), with the release available ("") or not.
  KcmpFileIdentity files;
  Orchestrator make_releasing(const std::string& unavailable = "") {
    auto o = make_with([&](OrchestratorTools& ot) {
      ot.files = &files;
      ot.release_unavailable = unavailable;
    });
    return o;
  }
  // Runs a checkpoint expected to be refused; returns its message (nothing snapshotted).
  std::string refusal(Orchestrator& o) {
    try {
      o.checkpoint_around(req(), counting_snapshot());
    } catch (const Error& e) {
      EXPECT_EQ(snapshots, 0);
      return e.what();
    }
    ADD_FAILURE() << "the checkpoint was not refused";
    return "";
  }
  std::vector<Holder> holders() { return ProcHolderScanner(cfg.device_globs).scan(pids); }
  static bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }
};

std::string P(pid_t p) {
  return "pid " + std::to_string(p);
}

}  // namespace

TEST_F(OrchestratorTest, LocksAllThenCheckpointsAllThenSnapshotsAndResumes) {
  pid_t a = gpu.start_app({"--children", "1"});
  pid_t child = gpu.children(a).at(0);
  pid_t b = gpu.start_app({}, "nvidiactl");
  pids = {a, child, b};
  gpu.delay_ms(30);
  auto o = make();
  auto out = o.checkpoint_around(req(), [&] {
    ++snapshots;
    // What the runtime sees: every CUDA process checkpointed, no device open anywhere.
    for (pid_t p : pids) EXPECT_EQ(gpu.state(p), "checkpointed") << p;
    EXPECT_TRUE(holders().empty());
  });
  EXPECT_EQ(snapshots, 1);
  std::vector<pid_t> want{a, child, b};
  std::sort(want.begin(), want.end());
  EXPECT_EQ(out.toggled, want);

  auto locks = gpu.calls("lock"), ckpts = gpu.calls("checkpoint");
  ASSERT_EQ(locks.size(), 3u);
  ASSERT_EQ(ckpts.size(), 3u);
  long long last_lock_end = 0, first_ckpt_start = LLONG_MAX;
  for (const auto& c : locks) {
    last_lock_end = std::max(last_lock_end, c.end);
    EXPECT_EQ(c.rc, 0);
  }
  for (const auto& c : ckpts) {
    first_ckpt_start = std::min(first_ckpt_start, c.start);
    EXPECT_EQ(c.rc, 0);
  }
  EXPECT_LE(last_lock_end, first_ckpt_start) << "every lock must finish before any checkpoint starts";
  for (const auto& c : locks) EXPECT_TRUE(has(c.extra, "timeout=1234")) << c.extra;

  // Resumed: restore + unlock each, devices open again, work continues.
  EXPECT_EQ(gpu.calls("restore").size(), 3u);
  EXPECT_EQ(gpu.calls("unlock").size(), 3u);
  for (pid_t p : pids) EXPECT_EQ(gpu.state(p), "running");
  EXPECT_EQ(holders().size(), 3u);
  // Work continues: wait for the counter to move, with a deadline.
  long before = gpu.counter(a);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (gpu.counter(a) <= before && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_GT(gpu.counter(a), before) << "the resumed process did no work within 10 s";

  std::vector<std::string> names;
  for (const auto& ph : out.phases) names.push_back(ph.name);
  EXPECT_EQ(names,
            (std::vector<std::string>{"scan", "classify", "preflight", "lock", "checkpoint", "verify", "snapshot", "resume"}));
  // The report of a success: verdict, the toggled pids and every phase's time, for tools to read.
  auto report = diag_json();
  EXPECT_EQ(report["verdict"], "done");
  EXPECT_EQ(report["toggled"].size(), 3u);
  EXPECT_TRUE(report["phases"].contains("snapshot_ms"));
  EXPECT_TRUE(report["phases"].contains("resume_ms"));
}

TEST_F(OrchestratorTest, ParallelCheckpointsOverlap) {
  for (int i = 0; i < 3; ++i) pids.push_back(gpu.start_app());
  gpu.delay_ms(300);
  auto o = make();
  auto out = o.checkpoint_around(req(false), counting_snapshot());
  auto ck = gpu.calls("checkpoint");
  ASSERT_EQ(ck.size(), 3u);
  long long max_start = 0, min_end = LLONG_MAX;
  for (const auto& c : ck) max_start = std::max(max_start, c.start), min_end = std::min(min_end, c.end);
  EXPECT_LT(max_start, min_end) << "all three checkpoints must run at the same time";
  auto phase = std::find_if(out.phases.begin(), out.phases.end(), [](auto& p) { return p.name == "checkpoint"; });
  ASSERT_NE(phase, out.phases.end());
  EXPECT_LT(phase->ms, 800) << "3 x 300 ms in parallel";
  // keep_running=false: the runtime stops the task, nothing is resumed.
  EXPECT_TRUE(gpu.calls("restore").empty());
  for (pid_t p : pids) EXPECT_EQ(gpu.state(p), "checkpointed");
}

TEST_F(OrchestratorTest, SequentialModeCheckpointsOneAfterAnother) {
  for (int i = 0; i < 3; ++i) pids.push_back(gpu.start_app());
  gpu.delay_ms(60);
  cfg.parallelism = 1;
  auto o = make();
  o.checkpoint_around(req(), counting_snapshot());
  auto ck = gpu.calls("checkpoint");
  ASSERT_EQ(ck.size(), 3u);
  std::sort(ck.begin(), ck.end(), [](auto& x, auto& y) { return x.start < y.start; });
  for (size_t i = 1; i < ck.size(); ++i) EXPECT_LE(ck[i - 1].end, ck[i].start) << "no overlap with parallelism 1";
  // Locks still all before the first checkpoint.
  for (const auto& l : gpu.calls("lock")) EXPECT_LE(l.end, ck[0].start);
  for (pid_t p : pids) EXPECT_EQ(gpu.state(p), "running");
}

TEST_F(OrchestratorTest, OneCheckpointFailureOfManyRollsBackEveryone) {
  for (int i = 0; i < 4; ++i) pids.push_back(gpu.start_app());
  gpu.fail("checkpoint any\n");
  Error e = checkpoint_error(counting_snapshot());
  EXPECT_EQ(e.code(), Code::FailedPrecondition);
  EXPECT_EQ(snapshots, 0);
  auto ck = gpu.calls("checkpoint");
  ASSERT_EQ(ck.size(), 4u);
  auto failed = std::find_if(ck.begin(), ck.end(), [](auto& c) { return c.rc != 0; });
  ASSERT_NE(failed, ck.end());
  std::string msg = e.what();
  EXPECT_TRUE(has(msg, "checkpoint of container \"c1\" failed: CUDA checkpoint failed in 1 process")) << msg;
  EXPECT_TRUE(has(msg, "CUDA checkpoint of " + P(failed->pid) + " failed: CUDA_ERROR_UNKNOWN (999)")) << msg;
  EXPECT_TRUE(has(msg, "rolled back: pid ")) << msg;
  EXPECT_FALSE(has(msg, "STUCK")) << msg;
  for (pid_t p : pids) EXPECT_EQ(gpu.state(p), "running") << p;
  EXPECT_EQ(gpu.calls("restore").size(), 3u) << "the three checkpointed ones are restored";
  EXPECT_EQ(gpu.calls("unlock").size(), 4u) << "all four are unlocked";
  EXPECT_EQ(holders().size(), 4u);
  auto j = diag_json();
  EXPECT_EQ(j["rolled_back"].size(), 4u);
  EXPECT_EQ(j["processes"][0]["pid"], failed->pid);
  EXPECT_TRUE(j["phases"].contains("rollback_ms"));
}

TEST_F(OrchestratorTest, NonCudaHolderIsRefusedBeforeAnythingIsToggled) {
  pid_t cuda = gpu.start_app();
  pid_t nvml = gpu.start_app({"--no-cuda"}, "nvidiactl");
  pids = {cuda, nvml};
  Error e = checkpoint_error(counting_snapshot());
  EXPECT_EQ(e.code(), Code::FailedPrecondition);
  std::string msg = e.what();
  EXPECT_TRUE(has(msg, "checkpoint of container \"c1\" refused: 1 process holds GPU devices")) << msg;
  EXPECT_TRUE(has(msg, std::to_string(nvml))) << msg;
  EXPECT_TRUE(has(msg, gpu.device("nvidiactl"))) << msg;
  EXPECT_TRUE(has(msg, "(no CUDA)")) << msg;
  EXPECT_TRUE(has(msg, "hint: " + P(nvml) + " is not a CUDA process (NVML user?)")) << msg;
  EXPECT_EQ(snapshots, 0);
  EXPECT_TRUE(gpu.calls("lock").empty()) << "nothing may be toggled";
  EXPECT_EQ(gpu.state(cuda), "running");
  auto j = diag_json();
  EXPECT_EQ(j["container"], "c1");
  ASSERT_EQ(j["processes"].size(), 1u);
  EXPECT_EQ(j["processes"][0]["pid"], nvml);
  EXPECT_EQ(j["processes"][0]["holders"][0]["path"], gpu.device("nvidiactl"));
  EXPECT_EQ(j["processes"][0]["cuda_state"], "(no CUDA)");
}

TEST_F(OrchestratorTest, ForkedChildWithoutExecGetsItsOwnHint) {
  pid_t app = gpu.start_app({"--fork-holder"});
  pid_t child = gpu.children(app).at(0);
  pids = {app, child};
  std::string msg = checkpoint_error(counting_snapshot()).what();
  EXPECT_TRUE(has(msg, P(child) + " was forked from CUDA process " + std::to_string(app) + " without exec")) << msg;
}

TEST_F(OrchestratorTest, VerifyCatchesACudaProcessThatKeepsItsDevice) {
  pid_t ok = gpu.start_app();
  pid_t sticky = gpu.start_app({"--keep-open"});
  pids = {ok, sticky};
  Error e = checkpoint_error(counting_snapshot());
  std::string msg = e.what();
  EXPECT_EQ(e.code(), Code::FailedPrecondition);
  EXPECT_TRUE(has(msg, "refused: 1 process still holds GPU devices after CUDA toggle")) << msg;
  EXPECT_TRUE(has(msg, P(sticky) + " is CUDA-checkpointed but still holds " + gpu.device())) << msg;
  EXPECT_EQ(snapshots, 0);
  EXPECT_EQ(gpu.state(ok), "running");
  EXPECT_EQ(gpu.state(sticky), "running");
  EXPECT_EQ(diag_json()["rolled_back"].size(), 2u);
}

TEST_F(OrchestratorTest, SnapshotFailureRollsBackAndKeepsItsCode) {
  pids = {gpu.start_app(), gpu.start_app()};
  Error e = checkpoint_error([] { throw Error(Code::Unavailable, "runc checkpoint: criu failed: type NOTIFY"); });
  EXPECT_EQ(e.code(), Code::Unavailable);
  std::string msg = e.what();
  EXPECT_TRUE(has(msg, "the runtime's checkpoint failed: runc checkpoint: criu failed: type NOTIFY")) << msg;
  EXPECT_TRUE(has(msg, "rolled back")) << msg;
  for (pid_t p : pids) EXPECT_EQ(gpu.state(p), "running");
  EXPECT_EQ(diag_json()["verdict"], "failed");
  EXPECT_EQ(holders().size(), 2u);
}

TEST_F(OrchestratorTest, RestoreOntoOtherGpusRestoresEveryProcessWithTheMap) {
  pid_t a = gpu.start_app(), b = gpu.start_app();
  pids = {a, b};
  make().checkpoint_around(req(false), counting_snapshot());
  const DeviceMap map{{"GPU-00000000-0000-0000-0000-000000000000", "GPU-00000000-0000-0000-0000-000000000001"}};
  auto out = make().restore_after_runtime_restore("c1", diag_path, {}, map);
  EXPECT_EQ(out.resumed.size(), 2u);
  auto restores = gpu.calls("restore");
  ASSERT_EQ(restores.size(), 2u);
  for (const auto& r : restores)
    EXPECT_EQ(r.extra, "pairs=00000000000000000000000000000000>00000000000000000000000000000001") << "pid " << r.pid;
}

TEST_F(OrchestratorTest, RestoreAfterRuntimeRestoreRelistsAndResumesCheckpointedOnes) {
  pid_t a = gpu.start_app(), b = gpu.start_app();
  pids = {a, b};
  make().checkpoint_around(req(false), counting_snapshot());
  ASSERT_EQ(gpu.state(a), "checkpointed");
  EXPECT_TRUE(holders().empty());
  // After the runtime's restore the lister answers the new pid set (here: one more, non-CUDA).
  pid_t other = gpu.start_app({"--no-cuda"}, "nvidia1");
  pids = {a, b, other};
  int calls_before = list_calls;
  auto out = make().restore_after_runtime_restore("c1", diag_path);
  EXPECT_GT(list_calls, calls_before) << "pids must be listed again";
  EXPECT_EQ(out.resumed, (std::vector<pid_t>{std::min(a, b), std::max(a, b)}));
  EXPECT_EQ(gpu.state(a), "running");
  EXPECT_EQ(gpu.state(b), "running");
  EXPECT_EQ(holders().size(), 3u);
  EXPECT_EQ(gpu.calls("restore").size(), 2u);
  // Nothing checkpointed: nothing to do.
  EXPECT_TRUE(make().restore_after_runtime_restore("c1").resumed.empty());
}

TEST_F(OrchestratorTest, PreflightRefusesAMultiGpuProcessWithNothingToggled) {
  pid_t multi = gpu.start_app(), single = gpu.start_app();
  pids = {multi, single};
  gpu.nvml(std::to_string(multi) + " 0\n" + std::to_string(multi) + " 1\n" + std::to_string(single) + " 0\n");
  Error e = checkpoint_error(counting_snapshot());
  EXPECT_EQ(e.code(), Code::FailedPrecondition);
  std::string msg = e.what();
  EXPECT_TRUE(has(msg, "refused: 1 process has CUDA contexts on several GPUs")) << msg;
  EXPECT_TRUE(has(msg, P(multi) + " has CUDA contexts on 2 GPUs (GPU-fake-0000, GPU-fake-0001)")) << msg;
  EXPECT_TRUE(has(msg, "allow_unrestorable")) << msg;
  EXPECT_FALSE(has(msg, "hint: " + P(single))) << msg;
  EXPECT_TRUE(gpu.calls("lock").empty());
  EXPECT_EQ(diag_json()["processes"][0]["gpus"].size(), 2u);
}

TEST_F(OrchestratorTest, OverrideCheckpointsAMultiGpuProcessWithAWarning) {
  pid_t multi = gpu.start_app();
  pids = {multi};
  gpu.nvml(std::to_string(multi) + " 0\n" + std::to_string(multi) + " 1\n");
  cfg.allow_unrestorable = true;
  auto out = make().checkpoint_around(req(), counting_snapshot());
  EXPECT_EQ(snapshots, 1);
  EXPECT_EQ(out.toggled, std::vector<pid_t>{multi});
  ASSERT_EQ(out.warnings.size(), 1u);
  EXPECT_TRUE(has(out.warnings[0], P(multi) + " has CUDA contexts on 2 GPUs")) << out.warnings[0];
}

TEST_F(OrchestratorTest, PreflightWithoutNvmlRefusesUnlessOverridden) {
  pids = {gpu.start_app()};
  cfg.libnvml = "/nonexistent/libnvidia-ml.so.1";
  std::string msg = checkpoint_error(counting_snapshot()).what();
  EXPECT_TRUE(has(msg, "cannot tell which GPUs")) << msg;
  EXPECT_TRUE(has(msg, "/nonexistent/libnvidia-ml.so.1")) << msg;
  EXPECT_TRUE(gpu.calls("lock").empty());
  cfg.allow_unrestorable = true;
  auto out = make().checkpoint_around(req(), counting_snapshot());
  EXPECT_EQ(out.warnings.size(), 1u);
  EXPECT_EQ(snapshots, 1);
}

TEST_F(OrchestratorTest, StuckAfterAFailedRestoreIsReportedNotClaimedRolledBack) {
  pid_t unrestorable = gpu.start_app(), failing = gpu.start_app();
  pids = {unrestorable, failing};
  gpu.mark(unrestorable, "unrestorable");
  gpu.fail("checkpoint " + std::to_string(failing) + "\n");
  Error e = checkpoint_error(counting_snapshot());
  std::string msg = e.what();
  EXPECT_TRUE(has(msg, "STUCK: " + P(unrestorable) + " is left checkpointed: restore answered CUDA_ERROR_NOT_SUPPORTED (801)"))
      << msg;
  EXPECT_TRUE(has(msg, "rolled back: " + P(failing) + " CUDA-running again")) << msg;
  EXPECT_FALSE(has(msg, "rolled back: " + P(unrestorable))) << msg;
  EXPECT_EQ(gpu.state(unrestorable), "checkpointed");
  EXPECT_EQ(gpu.state(failing), "running");
  auto j = diag_json();
  ASSERT_EQ(j["stuck"].size(), 1u);
  EXPECT_EQ(j["stuck"][0]["pid"], unrestorable);
  EXPECT_EQ(j["stuck"][0]["state"], "checkpointed");
  EXPECT_EQ(j["rolled_back"], nlohmann::json::array({failing}));
}

TEST_F(OrchestratorTest, StuckOnResumeAfterASuccessfulSnapshotIsAnError) {
  pid_t a = gpu.start_app();
  pids = {a};
  gpu.mark(a, "unrestorable");
  Error e = checkpoint_error(counting_snapshot());
  EXPECT_EQ(snapshots, 1);
  EXPECT_EQ(e.code(), Code::Internal);
  std::string msg = e.what();
  EXPECT_TRUE(has(msg, "the checkpoint was written, but CUDA could not be resumed in 1 process")) << msg;
  EXPECT_TRUE(has(msg, "STUCK: " + P(a))) << msg;
}

TEST_F(OrchestratorTest, LockTimeoutNamesTheSettingAndUnlocksTheOthers) {
  pid_t slow = gpu.start_app(), other = gpu.start_app();
  pids = {slow, other};
  gpu.fail("lock " + std::to_string(slow) + " 909\n");
  std::string msg = checkpoint_error(counting_snapshot()).what();
  EXPECT_TRUE(has(msg, "CUDA lock failed in 1 process")) << msg;
  EXPECT_TRUE(has(msg, "CUDA_ERROR_TIMEOUT (909)")) << msg;
  EXPECT_TRUE(has(msg, "lock_timeout_ms=1234")) << msg;
  EXPECT_TRUE(gpu.calls("checkpoint").empty());
  EXPECT_EQ(gpu.state(other), "running");
  EXPECT_EQ(gpu.state(slow), "running");
}

TEST_F(OrchestratorTest, NoHoldersMeansJustTheSnapshot) {
  pids = {::getpid()};
  auto out = make().checkpoint_around(req(), counting_snapshot());
  EXPECT_EQ(snapshots, 1);
  EXPECT_TRUE(out.toggled.empty());
  EXPECT_TRUE(gpu.calls().empty()) << "the driver is not even asked";
}

TEST_F(OrchestratorTest, CudaNoneLeavesEverythingToTheRuntime) {
  pids = {gpu.start_app({"--no-cuda"})};
  make(nullptr, false).checkpoint_around(req(), counting_snapshot());
  EXPECT_EQ(snapshots, 1);
  EXPECT_TRUE(gpu.calls().empty());
}

TEST_F(OrchestratorTest, UnusableDriverLibraryIsAClearRefusal) {
  pids = {gpu.start_app()};
  DriverApiToggler missing("/nonexistent/libcuda.so.1");
  auto o = make(&missing);
  try {
    o.checkpoint_around(req(), counting_snapshot());
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::FailedPrecondition);
    EXPECT_TRUE(has(e.what(), "/nonexistent/libcuda.so.1")) << e.what();
    EXPECT_TRUE(has(e.what(), "container \"c1\"")) << e.what();
  }
  EXPECT_EQ(snapshots, 0);
}

TEST_F(OrchestratorTest, RestorePathWithAnUnusableDriverNamesTheContainer) {
  pids = {gpu.start_app()};
  DriverApiToggler missing("/nonexistent/libcuda.so.1");
  auto o = make(&missing);
  try {
    o.restore_after_runtime_restore("c7");
    FAIL();
  } catch (const Error& e) {
    EXPECT_TRUE(has(e.what(), "restore of container \"c7\"")) << e.what();
    EXPECT_TRUE(has(e.what(), "/nonexistent/libcuda.so.1")) << e.what();
  }
}

namespace {
struct FakeComm final : CommProbe {
  std::map<pid_t, CommFinding> findings;
  std::vector<pid_t> asked;
  std::map<pid_t, CommFinding> scan(const std::vector<pid_t>& pids) override {
    asked = pids;
    return findings;
  }
};
}  // namespace

TEST_F(OrchestratorTest, PreflightRefusesNcclRanksWithNothingToggled) {
  pid_t r0 = gpu.start_app(), r1 = gpu.start_app();
  pids = {r0, r1};
  gpu.nvml(std::to_string(r0) + " 0\n" + std::to_string(r1) + " 1\n");
  FakeComm comm;
  comm.findings[r0] = {.evidence = {"tcp-peer 127.0.0.1:29511 <-> 127.0.0.1:40000 (pid " + std::to_string(r1) + ")"},
                       .tcp_peers = {r1}};
  comm.findings[r1] = {.evidence = {"nccl-shm /dev/shm/nccl-Ab12"}, .tcp_peers = {r0}, .nccl = true};
  auto o = make_with([&](OrchestratorTools& ot) { ot.comm = &comm; });
  std::string msg;
  try {
    o.checkpoint_around(req(), counting_snapshot());
    ADD_FAILURE() << "checkpoint of NCCL ranks succeeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::FailedPrecondition);
    msg = e.what();
  }
  EXPECT_TRUE(has(msg, "refused: 2 processes are ranks of a collective (NCCL) across GPUs")) << msg;
  EXPECT_TRUE(has(msg, P(r1) + " is a rank of a collective (NCCL) with other CUDA processes (nccl-shm /dev/shm/nccl-Ab12)"))
      << msg;
  EXPECT_TRUE(has(msg, "allow_unrestorable")) << msg;
  EXPECT_TRUE(gpu.calls("lock").empty());
  EXPECT_EQ(snapshots, 0);
  EXPECT_EQ(diag_json()["processes"].size(), 2u);
  for (pid_t p : pids) EXPECT_EQ(gpu.state(p), "running");
}

TEST_F(OrchestratorTest, TcpLinkOnOneGpuIsNotACollective) {
  pid_t a = gpu.start_app(), b = gpu.start_app();
  pids = {a, b};
  gpu.nvml(std::to_string(a) + " 0\n" + std::to_string(b) + " 0\n");
  FakeComm comm;
  comm.findings[a] = {.evidence = {"tcp-peer x"}, .tcp_peers = {b}};
  comm.findings[b] = {.evidence = {"tcp-peer y"}, .tcp_peers = {a}};
  auto o = make_with([&](OrchestratorTools& ot) { ot.comm = &comm; });
  auto out = o.checkpoint_around(req(), counting_snapshot());
  EXPECT_EQ(snapshots, 1);
  EXPECT_EQ(out.toggled.size(), 2u);
  EXPECT_TRUE(out.warnings.empty());
}

TEST_F(OrchestratorTest, OverrideCheckpointsNcclRanksWithAWarning) {
  pid_t r0 = gpu.start_app();
  pids = {r0};
  gpu.nvml(std::to_string(r0) + " 0\n");
  FakeComm comm;
  comm.findings[r0] = {.evidence = {"nccl-unix @/tmp/nccl-socket-0-ab", "tcp-remote 10.0.0.2:29500"},
                       .nccl = true,
                       .maybe_alone = false,
                       .remote_tcp = {"10.0.0.2:29500"}};
  cfg.allow_unrestorable = true;
  auto o = make_with([&](OrchestratorTools& ot) { ot.comm = &comm; });
  auto out = o.checkpoint_around(req(), counting_snapshot());
  EXPECT_EQ(snapshots, 1);
  ASSERT_EQ(out.warnings.size(), 1u);
  EXPECT_TRUE(has(out.warnings[0], P(r0) + " looks like a rank of a collective (NCCL)")) << out.warnings[0];
  EXPECT_TRUE(has(o.inspect("c1").diagnostic.processes.at(0).hint, "rank of a collective"));
}

// Issue 33: NCCL's signals in a group of one (single-GPU torchrun) are no collective to refuse.
TEST_F(OrchestratorTest, TheOnlyRankOfItsGroupIsCheckpointedAsAPlainCudaProcess) {
  pid_t r0 = gpu.start_app();
  pids = {r0};
  gpu.nvml(std::to_string(r0) + " 0\n");
  FakeComm comm;
  comm.findings[r0] = {.evidence = {"nccl-unix @/tmp/nccl-socket-0-ab"}, .nccl = true};
  auto o = make_with([&](OrchestratorTools& ot) { ot.comm = &comm; });
  auto out = o.checkpoint_around(req(), counting_snapshot());
  EXPECT_EQ(snapshots, 1);
  EXPECT_EQ(out.toggled, std::vector<pid_t>{r0});
  EXPECT_TRUE(out.warnings.empty());
  EXPECT_FALSE(o.inspect("c1").would_refuse);
}

// Issue 16, item 7: a host without a usable CUDA driver refuses with the table (pid, device, fds)
// and writes checkpoint-diagnostic.json, as every other refusal.
TEST_F(OrchestratorTest, UnusableDriverRefusalCarriesTheTableAndTheJson) {
  pid_t a = gpu.start_app();
  pids = {a};
  DriverApiToggler missing("/nonexistent/libcuda.so.1");
  auto o = make(&missing);
  try {
    o.checkpoint_around(req(), counting_snapshot());
    FAIL();
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_TRUE(has(m, "refused: 1 process holds GPU devices, but their CUDA state cannot be read")) << m;
    EXPECT_TRUE(has(m, "\nPID ")) << "a table: " << m;
    EXPECT_TRUE(has(m, gpu.device())) << m;
    EXPECT_TRUE(has(m, P(a) + " (fake_cuda_app) holds " + gpu.device() + " (fd ")) << m;
  }
  auto j = diag_json();
  EXPECT_EQ(j["verdict"], "refused");
  ASSERT_EQ(j["processes"].size(), 1u);
  EXPECT_EQ(j["processes"][0]["pid"], a);
  EXPECT_EQ(j["processes"][0]["cuda_state"], "(unknown)");
  EXPECT_EQ(j["processes"][0]["holders"][0]["path"], gpu.device());
  EXPECT_TRUE(j["processes"][0]["holders"][0].contains("fd"));
  // diagnose's view says the same, with the table (a process beside it without devices is no
  // reason to fail: without a driver nothing can be asked about it).
  pids = {a, ::getpid()};
  auto ins = make(&missing).inspect("c1");
  EXPECT_TRUE(ins.would_refuse);
  EXPECT_TRUE(has(ins.diagnostic.reason, "CUDA state cannot be read")) << ins.diagnostic.reason;
  ASSERT_EQ(ins.diagnostic.processes.size(), 1u);
  EXPECT_EQ(ins.diagnostic.processes[0].cuda_state, "(unknown)");
  EXPECT_TRUE(has(render_text(ins.diagnostic), gpu.device())) << render_text(ins.diagnostic);
  EXPECT_EQ(snapshots, 0);
}

// Issue 16, item 4: runc restores the init's process tree; a CUDA process beside it (exec) would be
// lost. The checkpoint refuses before any toggle unless allowed, and then names it.
TEST_F(OrchestratorTest, CudaProcessOutsideTheInitTreeIsRefusedUnlessAllowed) {
  pid_t init = gpu.start_app({"--children", "1"});
  pid_t child = gpu.children(init).at(0);
  pid_t exec = gpu.start_app();  // not a descendant of init: what `ctr task exec` starts
  pids = {init, child, exec};
  auto r = req();
  r.init_pid = init;
  try {
    make().checkpoint_around(r, counting_snapshot());
    FAIL() << "an exec'd CUDA process did not refuse the checkpoint";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_EQ(e.code(), Code::FailedPrecondition);
    EXPECT_TRUE(has(m, "refused: 1 process with CUDA state is outside the init's process tree")) << m;
    EXPECT_TRUE(has(m, P(exec) + " (fake_cuda_app) runs beside the init")) << m;
    EXPECT_TRUE(has(m, "allow_lost_cuda_processes")) << m;
    EXPECT_FALSE(has(m, P(child) + " (")) << "the child is in the tree: " << m;
  }
  EXPECT_TRUE(gpu.calls("lock").empty()) << "refused before any toggle";
  EXPECT_EQ(diag_json()["not_restored"][0]["pid"], exec);
  EXPECT_EQ(snapshots, 0);
  // diagnose decides the same (one decide()), and names the same process.
  auto ins = make().inspect(r);
  EXPECT_TRUE(ins.would_refuse);
  EXPECT_TRUE(has(ins.diagnostic.reason, "a checkpoint would be refused: 1 process with CUDA state is outside"))
      << ins.diagnostic.reason;
  EXPECT_EQ(ins.diagnostic.details["not_restored"][0]["pid"], exec);
  auto row =
      std::find_if(ins.diagnostic.processes.begin(), ins.diagnostic.processes.end(), [&](auto& p) { return p.pid == exec; });
  ASSERT_NE(row, ins.diagnostic.processes.end());
  EXPECT_TRUE(has(row->hint, "runs beside the init")) << row->hint;

  cfg.allow_lost_cuda_processes = true;
  auto out = make().checkpoint_around(r, counting_snapshot());
  EXPECT_EQ(snapshots, 1);
  EXPECT_EQ(out.lost, std::vector<pid_t>{exec});
  EXPECT_EQ(out.toggled.size(), 3u);
  ASSERT_FALSE(out.warnings.empty());
  EXPECT_TRUE(has(out.warnings.back(), std::to_string(exec) + " (fake_cuda_app, CUDA)")) << out.warnings.back();
  EXPECT_EQ(diag_json()["verdict"], "done");
  EXPECT_EQ(diag_json()["not_restored"][0]["cuda"], true);
}

// ... and a restore never reports success while a recorded CUDA process is missing.
TEST_F(OrchestratorTest, RestoreFailsWhileARecordedCudaProcessIsMissing) {
  pid_t a = gpu.start_app(), b = gpu.start_app();
  pids = {a, b};
  make().checkpoint_around(req(false), counting_snapshot());
  ASSERT_EQ(gpu.state(a), "checkpointed");
  pids = {a};  // b did not come back with the runtime's restore
  std::vector<ExpectedProcess> expected{{a, "fake_cuda_app"}, {b, "fake_cuda_app"}};
  try {
    make().restore_after_runtime_restore("c1", diag_path, expected);
    FAIL() << "the restore succeeded without pid " << b;
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_EQ(e.code(), Code::FailedPrecondition);
    EXPECT_TRUE(has(m, "the checkpoint recorded 2 processes with CUDA state, 1 of them is missing")) << m;
    EXPECT_TRUE(has(m, std::to_string(b) + " (fake_cuda_app)")) << m;
  }
  EXPECT_EQ(gpu.state(a), "running") << "the one that is there is still brought back";
  EXPECT_EQ(diag_json()["missing"][0]["pid"], b);
  // All there: success.
  pids = {a, b};
  EXPECT_NO_THROW(make().restore_after_runtime_restore("c1", diag_path, {{b, "fake_cuda_app"}}));
}

namespace {
struct FakeSpace final : SpaceProbe {
  std::map<std::string, FsSpace> fs;  // by path
  std::uint64_t per_process = 0;
  FsSpace space(const std::filesystem::path& dir) override {
    auto it = fs.find(dir.string());
    if (it == fs.end()) throw Error(Code::NotFound, "no filesystem for " + dir.string());
    return it->second;
  }
  std::uint64_t process_bytes(pid_t) override { return per_process + (is_staged() ? staged : 0); }
  std::uint64_t dirty = 0;
  std::uint64_t dirty_threshold() override { return dirty; }
  std::string thp;
  std::string huge_pages() override { return thp; }
  // Issue 36: once the driver has staged device memory, a process's memory is what it was plus
  // `staged`, of which `zeros` are zero pages (nullopt: they cannot be counted).
  const FakeGpu* gpu = nullptr;
  std::uint64_t staged = 0;
  std::optional<std::uint64_t> zeros;
  int zero_asks = 0;
  bool asked_before_staging = false;
  std::uint64_t zero_bytes(pid_t) override {
    ++zero_asks;
    if (!is_staged()) asked_before_staging = true;
    if (!zeros) throw Error(Code::PermissionDenied, "the pagemap shows no page frames");
    return *zeros;
  }
  [[nodiscard]] bool is_staged() const { return gpu && gpu->calls("checkpoint").size() > gpu->calls("restore").size(); }
};
constexpr std::uint64_t GiB = 1ULL << 30;
}  // namespace

// Issue 26, item 4: an image larger than the kernel's dirty-page threshold is dumped at the disk's
// rate; the checkpoint goes ahead and the diagnostic says why it will be slow and what to set.
TEST_F(OrchestratorTest, AnImageOverTheDirtyThresholdIsWarnedAboutNotRefused) {
  pid_t a = gpu.start_app();
  pids = {a};
  FakeSpace space;
  space.per_process = 1 * GiB;
  space.dirty = 10 * GiB;
  space.fs["/img"] = {.available = 60 * GiB, .device = 8, .at = "/img"};
  space.fs["/dev/shm/img"] = {.available = 60 * GiB, .device = 9, .at = "/dev/shm", .writeback = false};
  auto r = req();
  r.image_path = "/img";
  r.device_bytes[a] = 11 * GiB;
  auto o = make_with([&](OrchestratorTools& ot) { ot.space = &space; });
  o.checkpoint_around(r, counting_snapshot());
  EXPECT_EQ(snapshots, 1);
  auto j = diag_json();
  EXPECT_EQ(j["space"]["dirty_threshold_bytes"], 10 * GiB);
  std::string w = j["warnings"].dump();
  EXPECT_TRUE(has(w, "the checkpoint image (12.0 GiB) is larger than the kernel's dirty-page threshold (10.0 GiB")) << w;
  EXPECT_TRUE(has(w, "vm.dirty_bytes")) << w;
  // Under it, or in memory (tmpfs has no writeback): no warning.
  r.device_bytes[a] = 8 * GiB;
  o.checkpoint_around(r, counting_snapshot());
  EXPECT_FALSE(has(diag_json()["warnings"].dump(), "dirty-page threshold")) << diag_json()["warnings"];
  r.device_bytes[a] = 11 * GiB;
  r.image_path = "/dev/shm/img";
  o.checkpoint_around(r, counting_snapshot());
  EXPECT_FALSE(has(diag_json()["warnings"].dump(), "dirty-page threshold")) << diag_json()["warnings"];
  EXPECT_EQ(snapshots, 3);
}

// The driver stages device memory in 4 KiB pages unless transparent huge pages are "always": a
// warning names the setting when much device memory is staged; the checkpoint goes ahead.
TEST_F(OrchestratorTest, MuchDeviceMemoryInSmallPagesIsWarnedAbout) {
  pid_t a = gpu.start_app();
  pids = {a};
  FakeSpace space;
  space.per_process = 1 * GiB;
  space.thp = "madvise";
  space.fs["/img"] = {.available = 60 * GiB, .device = 8, .at = "/img"};
  auto r = req();
  r.image_path = "/img";
  r.device_bytes[a] = 21 * GiB;
  auto o = make_with([&](OrchestratorTools& ot) { ot.space = &space; });
  o.checkpoint_around(r, counting_snapshot());
  EXPECT_EQ(snapshots, 1);
  auto j = diag_json();
  EXPECT_EQ(j["space"]["transparent_hugepage"], "madvise");
  std::string w = j["warnings"].dump();
  EXPECT_TRUE(has(w, "the driver stages 21.0 GiB of device memory")) << w;
  EXPECT_TRUE(has(w, "transparent huge pages are \\\"madvise\\\" on this host")) << w;
  // "always", or little device memory, or an unknown mode: no warning.
  space.thp = "always";
  o.checkpoint_around(r, counting_snapshot());
  EXPECT_FALSE(has(diag_json()["warnings"].dump(), "transparent huge pages")) << diag_json()["warnings"];
  space.thp = "never";
  r.device_bytes[a] = 3 * GiB;
  o.checkpoint_around(r, counting_snapshot());
  EXPECT_FALSE(has(diag_json()["warnings"].dump(), "transparent huge pages")) << diag_json()["warnings"];
  EXPECT_EQ(diag_json()["space"]["transparent_hugepage"], "never");
  space.thp.clear();
  r.device_bytes[a] = 21 * GiB;
  o.checkpoint_around(r, counting_snapshot());
  EXPECT_FALSE(has(diag_json()["warnings"].dump(), "transparent huge pages")) << diag_json()["warnings"];
  EXPECT_FALSE(diag_json()["space"].contains("transparent_hugepage"));
  EXPECT_EQ(snapshots, 4);
}

// Issue 16, item 5: the image must fit before anything is toggled; twice when containerd copies it
// into its content store on the same filesystem.
TEST_F(OrchestratorTest, CheckpointThatCannotFitIsRefusedWithTheNumbers) {
  pid_t a = gpu.start_app();
  pids = {a};
  FakeSpace space;
  space.per_process = 3 * GiB;
  space.fs["/tmp/ctrd-checkpoint123"] = {.available = 60 * GiB, .device = 7, .at = "/tmp"};
  space.fs["/var/lib/containerd"] = {.available = 60 * GiB, .device = 7, .at = "/var/lib/containerd"};
  space.fs["/img"] = {.available = 60 * GiB, .device = 8, .at = "/img"};
  auto r = req();
  r.image_path = "/tmp/ctrd-checkpoint123";
  r.content_store = "/var/lib/containerd";
  r.device_bytes[a] = 49 * GiB;
  auto o = make_with([&](OrchestratorTools& ot) { ot.space = &space; });
  try {
    o.checkpoint_around(r, counting_snapshot());
    FAIL() << "52 GiB twice fit in 60 GiB";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_TRUE(has(m, "refused: the checkpoint image needs about 52.0 GiB (device memory 49.0 GiB + process memory 3.0 GiB)"))
        << m;
    EXPECT_TRUE(has(m, "104.0 GiB, but only 60.0 GiB are free")) << m;
    EXPECT_TRUE(has(m, "--image-path")) << m;
    EXPECT_TRUE(has(m, P(a) + " (fake_cuda_app): device memory 49.0 GiB, process memory 3.0 GiB")) << m;
  }
  EXPECT_TRUE(gpu.calls("lock").empty()) << "refused before any toggle";
  auto j = diag_json();
  EXPECT_EQ(j["space"]["image_bytes"], 52 * GiB);
  EXPECT_EQ(j["space"]["same_filesystem"], true);
  EXPECT_EQ(j["space"]["path"], "containerd's content store copy");
  EXPECT_EQ(j["space"]["copies"], 2);
  // diagnose, asked about the same image path, says the same.
  auto ins = o.inspect(r);
  EXPECT_TRUE(ins.would_refuse);
  EXPECT_TRUE(has(ins.diagnostic.reason, "a checkpoint would be refused: the checkpoint image needs about 52.0 GiB"))
      << ins.diagnostic.reason;
  EXPECT_EQ(ins.diagnostic.details["space"]["image_bytes"], 52 * GiB);

  // Without containerd's copy (a path of the user's) it fits.
  r.image_path = "/img";
  r.content_store.clear();
  o.checkpoint_around(r, counting_snapshot());
  EXPECT_EQ(snapshots, 1);
  // One filesystem each: each must hold one copy.
  space.fs["/img"].available = 10 * GiB;
  r.content_store = "/var/lib/containerd";
  try {
    o.checkpoint_around(r, counting_snapshot());
    FAIL();
  } catch (const Error& e) {
    EXPECT_TRUE(has(e.what(), "only 10.0 GiB free at /img")) << e.what();
    EXPECT_FALSE(has(e.what(), "free in containerd's content store")) << e.what();
  }
  // Issue 26: an entry of the shim's image store is written once, and the report says which path.
  cfg.image_store = "/store";
  space.fs["/store/ns/c1/20261202T000000Z-1"] = {.available = 60 * GiB, .device = 9, .at = "/store"};
  r.image_path = "/store/ns/c1/20261202T000000Z-1";
  r.content_store.clear();
  auto stored = make_with([&](OrchestratorTools& ot) { ot.space = &space; });
  stored.checkpoint_around(r, counting_snapshot());
  EXPECT_EQ(snapshots, 2);
  EXPECT_EQ(diag_json()["space"]["path"], "image store");
  EXPECT_EQ(diag_json()["space"]["copies"], 1);
  cfg.image_store.clear();
  r.image_path = "/img";
  r.content_store = "/var/lib/containerd";
  // checkpoint.check_space: false turns it off.
  cfg.check_space = false;
  auto off = make_with([&](OrchestratorTools& ot) { ot.space = &space; });
  off.checkpoint_around(r, counting_snapshot());
  EXPECT_EQ(snapshots, 3);
}

TEST(SpaceCheck, ContainerdTempDirAndHostProbe) {
  EXPECT_TRUE(containerd_copies_image("/tmp/ctrd-checkpoint582929476"));  // containerd 1.7 on the H200
  EXPECT_TRUE(containerd_copies_image("/run/user/0/ctrd-checkpoint2349871"));
  EXPECT_TRUE(containerd_copies_image("/tmp/ctd-checkpoint2124932333"));  // containerd 1.6 here
  EXPECT_FALSE(containerd_copies_image("/var/lib/ckpt/my-image"));
  HostSpaceProbe probe;
  auto s = probe.space("/tmp/does/not/exist/yet");
  EXPECT_EQ(s.at, "/tmp");
  EXPECT_GT(s.available, 0u);
  EXPECT_GT(probe.process_bytes(::getpid()), 0u);
  EXPECT_EQ(probe.process_bytes(0x7ffffff0), 0u);
  EXPECT_GT(probe.dirty_threshold(), 0u);
  EXPECT_FALSE(probe.space("/dev/shm").writeback) << "tmpfs";
  // nr_dirty_threshold counts pages.
  auto dir = make_temp_dir();
  spit(dir / "vmstat", "nr_dirty 12\nnr_writeback 0\nnr_dirty_threshold 300\nnr_dirty_background_threshold 150\n");
  EXPECT_EQ(HostSpaceProbe(dir).dirty_threshold(), 300u * static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE)));
  spit(dir / "vmstat", "nr_dirty 12\n");
  EXPECT_EQ(HostSpaceProbe(dir).dirty_threshold(), 0u) << "unknown";
  // The transparent huge page mode: the bracketed word.
  EXPECT_EQ(HostSpaceProbe(dir, dir).huge_pages(), "") << "no such file";
  fs::create_directories(dir / "kernel/mm/transparent_hugepage");
  spit(dir / "kernel/mm/transparent_hugepage/enabled", "always [madvise] never\n");
  EXPECT_EQ(HostSpaceProbe(dir, dir).huge_pages(), "madvise");
  spit(dir / "kernel/mm/transparent_hugepage/enabled", "[always] madvise never\n");
  EXPECT_EQ(HostSpaceProbe(dir, dir).huge_pages(), "always");
  EXPECT_EQ(selected_word("always madvise never"), "");
  EXPECT_EQ(selected_word("always [madvise never"), "");
  if (fs::exists("/sys/kernel/mm/transparent_hugepage/enabled")) {
    EXPECT_NE(probe.huge_pages(), "") << "this host's";
  }
  fs::remove_all(dir);
}

namespace {
// The real /proc scan, with what the H200 showed for CUDA IPC and managed memory laid over some pids.
struct MapsOverlay final : HolderScanner {
  ProcHolderScanner real;
  std::map<pid_t, std::string> ipc;
  std::map<pid_t, std::uint64_t> managed;
  explicit MapsOverlay(std::vector<std::string> globs) : real(std::move(globs)) {}
  std::vector<Holder> scan(const std::vector<pid_t>& pids) override { return real.scan(pids); }
  std::optional<ProcInfo> info(pid_t pid) override {
    auto pi = real.info(pid);
    if (pi && ipc.count(pid)) pi->cuda_ipc_file = ipc[pid];
    if (pi && managed.count(pid)) pi->uvm_managed_bytes = managed[pid];
    return pi;
  }
};
}  // namespace

// Issue 16, item 3: what the driver cannot bring back is refused before any toggle, one row per
// process and device: CUDA IPC exporters and importers, managed memory.
TEST_F(OrchestratorTest, CudaIpcAndManagedMemoryAreRefusedBeforeAnyToggle) {
  pid_t exporter = gpu.start_app(), importer = gpu.start_app(), plain = gpu.start_app();
  pids = {exporter, importer, plain};
  MapsOverlay maps(cfg.device_globs);
  maps.ipc[exporter] = maps.ipc[importer] = "/dev/shm/cuda.shm.0.1.1";
  Orchestrator o(cfg, {.lister = &lister, .scanner = &maps, .toggler = &toggler}, log);
  try {
    o.checkpoint_around(req(), counting_snapshot());
    FAIL() << "CUDA IPC was not refused";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_TRUE(has(m, "refused: 2 processes share GPU memory through CUDA IPC")) << m;
    EXPECT_TRUE(has(m, P(exporter) + " (fake_cuda_app) maps /dev/shm/cuda.shm.0.1.1")) << m;
    EXPECT_TRUE(has(m, P(importer) + " (fake_cuda_app) maps /dev/shm/cuda.shm.0.1.1")) << m;
    EXPECT_FALSE(has(m, P(plain) + " (")) << m;
  }
  EXPECT_TRUE(gpu.calls("lock").empty()) << "refused before any toggle";
  EXPECT_EQ(diag_json()["processes"].size(), 2u);

  maps.ipc.clear();
  maps.managed[plain] = 1ULL << 30;
  try {
    o.checkpoint_around(req(), counting_snapshot());
    FAIL() << "managed memory was not refused";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_TRUE(has(m, "refused: 1 process holds managed memory (cudaMallocManaged)")) << m;
    EXPECT_TRUE(has(m, P(plain) + " (fake_cuda_app) holds 1.0 GiB of managed memory")) << m;
  }
  EXPECT_TRUE(gpu.calls("lock").empty());
  EXPECT_EQ(snapshots, 0);

  // diagnose says the same; allow_unrestorable turns both into warnings.
  EXPECT_TRUE(o.inspect("c1").would_refuse);
  maps.ipc[importer] = "/dev/shm/cuda.shm.0.1.1";
  cfg.allow_unrestorable = true;
  Orchestrator forced(cfg, {.lister = &lister, .scanner = &maps, .toggler = &toggler}, log);
  auto out = forced.checkpoint_around(req(), counting_snapshot());
  EXPECT_EQ(snapshots, 1);
  std::string all;
  for (const auto& w : out.warnings) all += w + "\n";
  EXPECT_TRUE(has(all, P(importer) + " shares GPU memory through CUDA IPC; checkpointing anyway")) << all;
  EXPECT_TRUE(has(all, P(plain) + " holds managed memory; checkpointing anyway")) << all;
}

namespace {
// Holds that say one pid ended after the scan (its number taken by another process).
struct OneGone final : ProcessHolds {
  pid_t gone_pid = 0;
  bool end_it = false;  // and the process really ends, at the first question about it
  std::vector<pid_t> held;
  void hold(const std::vector<pid_t>& pids) override { held.insert(held.end(), pids.begin(), pids.end()); }
  std::string gone(pid_t pid) override {
    if (pid != gone_pid) return "";
    if (end_it) {
      end_it = false;
      ::kill(pid, SIGKILL);
      // Its files are closed once it is a zombie (or reaped): wait for that, with a deadline.
      for (int i = 0; i < 5000 && process_state(pid) != 'Z' && process_state(pid) != 0; ++i) ::usleep(1000);
    }
    return "pid " + std::to_string(pid) + " ended after the scan";
  }
  static char process_state(pid_t pid) {
    std::string stat;
    try {
      stat = read_file("/proc/" + std::to_string(pid) + "/stat");
    } catch (const Error&) {
      return 0;
    }
    auto close = stat.rfind(')');
    return close == std::string::npos || close + 2 >= stat.size() ? 0 : stat[close + 2];
  }
};
}  // namespace

// Issue 24: a pid is toggled only while it is the process the scan found.
// A job runner's worker that ends between the scan and its lock is neither toggled (its number may
// be another process's) nor a failure: the checkpoint goes on with the others.
TEST_F(OrchestratorTest, APidThatEndedAfterTheScanIsNeverToggledAndLeftOut) {
  pid_t a = gpu.start_app(), b = gpu.start_app();
  pids = {a, b};
  OneGone holds;
  holds.gone_pid = b;
  holds.end_it = true;
  UniqueFd logfd(::memfd_create("orchestrator-log", MFD_CLOEXEC));
  ASSERT_TRUE(logfd);
  log.set_fd(logfd.get());
  auto o = make_with([&](OrchestratorTools& ot) { ot.holds = &holds; });
  CheckpointOutcome out = o.checkpoint_around(req(), counting_snapshot());
  log.set_fd(-1);
  std::string logged(8192, '\0');
  logged.resize(static_cast<std::size_t>(std::max<ssize_t>(0, ::pread(logfd.get(), logged.data(), logged.size(), 0))));
  EXPECT_EQ(out.toggled, std::vector<pid_t>{a}) << "only the process still there";
  EXPECT_EQ(holds.held, pids) << "held from the scan on";
  for (const auto& c : gpu.calls())
    if (c.op != "get-state") {
      EXPECT_NE(c.pid, b) << c.op << ": a pid no longer held was toggled";
    }
  EXPECT_EQ(gpu.state(a), "running") << "the other one is resumed";
  EXPECT_EQ(snapshots, 1);
  EXPECT_TRUE(has(logged, "pid " + std::to_string(b) + " ended before its CUDA lock")) << logged;
}

namespace {
// Forwards every call to the fake driver's toggler; the tests' variants override one of them.
struct ForwardingToggler : CudaToggler {
  CudaToggler& real;
  explicit ForwardingToggler(CudaToggler& r) : real(r) {}
  std::string describe() override { return real.describe(); }
  CudaState get_state(pid_t pid) override { return real.get_state(pid); }
  void lock(pid_t pid, unsigned timeout_ms) override { real.lock(pid, timeout_ms); }
  void checkpoint(pid_t pid) override { real.checkpoint(pid); }
  void restore(pid_t pid, const DeviceMap& map) override { real.restore(pid, map); }
  void unlock(pid_t pid) override { real.unlock(pid); }
};
}  // namespace

namespace {
// A toggler whose lock of one pid fails as a worker whose exit has already torn CUDA down answers
// (NOT_INITIALIZED), the process itself gone only a moment later.
struct TornDownOnLock final : ForwardingToggler {
  pid_t ending = 0;
  std::thread ender;
  using ForwardingToggler::ForwardingToggler;
  ~TornDownOnLock() override {
    if (ender.joinable()) ender.join();
  }
  void lock(pid_t pid, unsigned timeout_ms) override {
    if (pid != ending) return real.lock(pid, timeout_ms);
    ender = std::thread([pid] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));  // its exit still under way
      ::kill(pid, SIGKILL);
    });
    throw CudaError(pid, "lock", kCudaNotInitialized, "CUDA_ERROR_NOT_INITIALIZED");
  }
};
}  // namespace

// Issue 32 (a CI flake): a job runner's worker whose lock answers NOT_INITIALIZED while it ends is
// waited for like one answering OPERATING_SYSTEM, and left out once gone; not a failed checkpoint.
TEST_F(OrchestratorTest, AWorkerWhoseLockFindsCudaTornDownIsLeftOutOnceItEnds) {
  pid_t a = gpu.start_app(), b = gpu.start_app();
  pids = {a, b};
  TornDownOnLock t(toggler);
  t.ending = b;
  PidfdHolds holds;  // what tells under runc that a process has ended
  auto o = make_with([&](OrchestratorTools& ot) { ot.holds = &holds; }, &t);
  CheckpointOutcome out = o.checkpoint_around(req(), counting_snapshot());
  EXPECT_EQ(out.toggled, std::vector<pid_t>{a});
  EXPECT_EQ(snapshots, 1);
  EXPECT_EQ(gpu.state(a), "running");
}

TEST(PidfdHolds, TellsAnEndedProcessFromALiveOne) {
  DirectWaiter waiter;
  ProcessRunner runner(waiter);
  pid_t live = runner.start({.argv = {"/bin/sleep", "100"}});
  pid_t ends = runner.start({.argv = {"/bin/sleep", "100"}});
  PidfdHolds holds;
  holds.hold({live, ends});
  EXPECT_EQ(holds.gone(live), "");
  EXPECT_EQ(holds.gone(12345678), "") << "never held: nothing to tell";
  ::kill(ends, SIGKILL);
  runner.wait(ends);  // reaped: its number is free for another process
  EXPECT_TRUE(holds.gone(ends).starts_with("pid " + std::to_string(ends) + " ended after the scan")) << holds.gone(ends);
  EXPECT_EQ(holds.gone(live), "");
  EXPECT_GT(process_start_time(live), 0u);
  EXPECT_EQ(process_start_time(ends), 0u);
  ::kill(live, SIGKILL);
  runner.wait(live);
}

// Issue 25, item 1: a forked child's device files are told apart by their open file descriptions.
TEST_F(OrchestratorTest, ForkedWorkersHoldTheirParentsOpenFilesAnOpenerItsOwn) {
  pid_t app = gpu.start_app({"--map", "--fork-workers", "2", "--fork-opener"});
  std::vector<pid_t> kids = gpu.children(app);
  ASSERT_EQ(kids.size(), 3u);
  pid_t opener = kids[0], w1 = kids[1], w2 = kids[2];
  pids = {app, opener, w1, w2};
  auto o = make_with([&](OrchestratorTools& ot) { ot.files = &files; });
  try {
    o.checkpoint_around(req(), counting_snapshot());
    FAIL() << "forked holders did not refuse the checkpoint";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_TRUE(has(m, "refused: 3 processes hold GPU devices that the CUDA toggle cannot release")) << m;
    for (pid_t w : {w1, w2})
      EXPECT_TRUE(has(m, P(w) + " (fake_cuda_app) was forked from CUDA process " + std::to_string(app) +
                             " and holds its GPU device files (fd "))
          << m;
    EXPECT_TRUE(has(m, "and 1 device mappings) without a CUDA context of its own")) << m;
    EXPECT_TRUE(
        has(m, P(opener) + " (fake_cuda_app) holds GPU device files that are none of its CUDA ancestor's open files (fd "))
        << m;
  }
  auto j = diag_json();
  std::map<pid_t, nlohmann::json> by;
  for (const auto& p : j["processes"]) by[p["pid"].get<pid_t>()] = p;
  EXPECT_EQ(by[w1]["inherited"]["from"], app);
  EXPECT_EQ(by[w1]["inherited"]["own_fds"].size(), 0u);
  EXPECT_EQ(by[w1]["inherited"]["fds"].size(), 1u);
  EXPECT_FALSE(by[opener].contains("inherited")) << by[opener];
  EXPECT_TRUE(gpu.calls("lock").empty()) << "refused before any toggle";
  EXPECT_EQ(gpu.state(app), "running");
}

// Issue 25, item 2: workers holding only their CUDA parent's device files (a character device here,
// as the GPU's are) are released from the image: the checkpoint goes ahead, the snapshot gets the
// plan (their pids, fds and the device number for the CRIU plugin), and the parent alone is toggled.
TEST_F(OrchestratorTest, ForkedWorkersWithOnlyInheritedFilesAreReleasedFromTheImage) {
  cfg.device_globs.push_back("/dev/full");
  pid_t app = gpu.start_app({"--fork-workers", "2", "--device", "/dev/full"});
  std::vector<pid_t> kids = gpu.children(app);
  ASSERT_EQ(kids.size(), 2u);
  pids = {app, kids[0], kids[1]};
  auto o = make_releasing();
  ReleasePlan seen;
  auto out = o.checkpoint_around(req(), ReleasingSnapshotFn([&](const ReleasePlan& plan) {
                                   ++snapshots;
                                   seen = plan;
                                   // The workers still hold the device: CRIU leaves their copies out.
                                   EXPECT_EQ(holders().size(), 2u);
                                   EXPECT_EQ(gpu.state(app), "checkpointed");
                                 }));
  EXPECT_EQ(snapshots, 1);
  EXPECT_EQ(out.toggled, std::vector<pid_t>{app});
  ASSERT_EQ(seen.processes.size(), 2u);
  EXPECT_EQ(seen.devices_text(), "1:7") << "/dev/full, for the plugin's $NVPROXY_CRIU_RELEASE";
  for (const auto& r : seen.processes) {
    EXPECT_EQ(r.from, app);
    EXPECT_EQ(r.fds.size(), 1u);
  }
  ASSERT_EQ(out.released.size(), 2u);
  auto j = diag_json();
  EXPECT_EQ(j["verdict"], "done");
  EXPECT_EQ(j["released"]["devices"], "1:7");
  EXPECT_EQ(j["released"]["processes"].size(), 2u);
  EXPECT_TRUE(has(j["reason"].get<std::string>(), "inherited from them left out of the image")) << j["reason"];
  EXPECT_EQ(gpu.state(app), "running") << "resumed";
}

// diagnose decides as the checkpoint does: the workers are shown as released, nothing refused.
TEST_F(OrchestratorTest, DiagnoseShowsForkedWorkersAsReleased) {
  cfg.device_globs.push_back("/dev/full");
  pid_t app = gpu.start_app({"--fork-workers", "1", "--device", "/dev/full"});
  pid_t w = gpu.children(app).at(0);
  pids = {app, w};
  auto o = make_releasing();
  Inspection ins = o.inspect(req());
  EXPECT_FALSE(ins.would_refuse) << ins.diagnostic.reason;
  bool shown = false;
  for (const auto& r : ins.diagnostic.processes)
    if (r.pid == w) {
      shown = true;
      EXPECT_EQ(r.inherited_from, app);
      EXPECT_TRUE(has(r.hint, "a checkpoint leaves them out of the image")) << r.hint;
    }
  EXPECT_TRUE(shown) << "the released worker has no row";
  EXPECT_TRUE(gpu.calls("lock").empty()) << "diagnose toggles nothing";
}

// Without the release (no plugin, runsc, or checkpoint.release_inherited off) they are refused,
// and the hint says why the shim did not release them.
TEST_F(OrchestratorTest, ForkedWorkersAreRefusedWhereTheReleaseIsUnavailable) {
  cfg.device_globs.push_back("/dev/full");
  pid_t app = gpu.start_app({"--fork-workers", "1", "--device", "/dev/full"});
  pids = {app, gpu.children(app).at(0)};
  auto o = make_releasing("the shim's CRIU plugin is not in /nowhere (checkpoint.criu_plugin_dir)");
  std::string m = refusal(o);
  EXPECT_TRUE(has(m, "but not here: the shim's CRIU plugin is not in /nowhere")) << m;
  EXPECT_TRUE(gpu.calls("lock").empty()) << "refused before any toggle";
}

// A device file the plugin cannot name (not a character device) is not released either.
TEST_F(OrchestratorTest, ForkedWorkersOfAPlainFileAreNotReleased) {
  pid_t app = gpu.start_app({"--fork-workers", "1"});
  pids = {app, gpu.children(app).at(0)};
  auto o = make_releasing();
  std::string m = refusal(o);
  EXPECT_TRUE(has(m, "is no character device the plugin can name")) << m;
}

// Under runsc the children drop their files in place (ReleaseWay::InPlace): no device number is
// needed, the plan names the devices by path, and verify lets exactly those remain.
TEST_F(OrchestratorTest, InPlaceReleaseNeedsNoCharacterDeviceAndNamesThePaths) {
  pid_t app = gpu.start_app({"--fork-workers", "2"});
  std::vector<pid_t> kids = gpu.children(app);
  pids = {app, kids[0], kids[1]};
  auto o = make_with([&](OrchestratorTools& ot) {
    ot.files = &files;
    ot.release_unavailable = "";
    ot.release_way = ReleaseWay::InPlace;
  });
  ReleasePlan seen;
  auto out = o.checkpoint_around(req(), ReleasingSnapshotFn([&](const ReleasePlan& plan) {
                                   ++snapshots;
                                   seen = plan;
                                 }));
  EXPECT_EQ(snapshots, 1);
  EXPECT_EQ(out.toggled, std::vector<pid_t>{app});
  ASSERT_EQ(seen.processes.size(), 2u);
  EXPECT_TRUE(seen.devices.empty()) << "a plain file has no device number, and none is needed";
  for (const auto& r : seen.processes) {
    ASSERT_EQ(r.paths.size(), 1u);
    EXPECT_EQ(r.paths[0], gpu.device());
  }
}

// An identity that stops the process it asks about (the sandbox's) is never used on CUDA
// processes: a forked child with its own CUDA context is toggled, and the inherited fd the toggle
// leaves is caught by verify, which rolls everything back (no refusal up front, as on the host).
TEST_F(OrchestratorTest, AnIdentityThatStopsProcessesIsNotAskedAboutCudaProcesses) {
  struct Stopping : FileIdentity {
    int asked = 0;
    bool same_file(pid_t, int, pid_t, int) override {
      ++asked;
      return true;
    }
    [[nodiscard]] bool stops_processes() const override { return true; }
  } stopping;
  pid_t app = gpu.start_app({"--fork-cuda"});
  pid_t kid = gpu.children(app).at(0);
  pids = {app, kid};
  auto o = make_with([&](OrchestratorTools& ot) {
    ot.files = &stopping;
    ot.release_unavailable = "";
    ot.release_way = ReleaseWay::InPlace;
  });
  std::string m = refusal(o);
  EXPECT_EQ(stopping.asked, 0);
  EXPECT_TRUE(has(m, "still holds GPU devices after CUDA toggle")) << m;
  EXPECT_TRUE(has(m, "rolled back")) << m;
  EXPECT_EQ(gpu.state(app), "running");
  EXPECT_EQ(gpu.state(kid), "running");
}

// Issue 25, item 3: a child forked after its parent opened the GPU that made a CUDA context of its
// own is refused before anything is toggled, naming the parent and the shared fds.
TEST_F(OrchestratorTest, AForkedChildWithItsOwnCudaContextIsRefused) {
  pid_t app = gpu.start_app({"--fork-cuda"});
  pid_t kid = gpu.children(app).at(0);
  pids = {app, kid};
  auto o = make_releasing();
  std::string m = refusal(o);
  EXPECT_TRUE(has(m, P(kid) + " (fake_cuda_app) was forked from CUDA process " + std::to_string(app) +
                         " and holds its GPU device files (fd "))
      << m;
  EXPECT_TRUE(has(m, "beside a CUDA context of its own")) << m;
  EXPECT_TRUE(gpu.calls("lock").empty()) << "refused before any toggle";
}

// An identity that cannot answer (the sandbox agent failed) refuses the holder with its cause,
// not with a guess that the child opened the device itself.
TEST_F(OrchestratorTest, AnUnanswerableIdentityNamesItsCauseInTheRefusal) {
  struct Failing : FileIdentity {
    bool same_file(pid_t, int, pid_t, int) override { return false; }
    std::string unknown_because(pid_t, pid_t) override { return "agent shared: ptrace(PTRACE_SEIZE): Operation not permitted"; }
  } failing;
  pid_t app = gpu.start_app({"--fork-workers", "1"});
  pid_t w = gpu.children(app).at(0);
  pids = {app, w};
  auto o = make_with([&](OrchestratorTools& ot) { ot.files = &failing; });
  std::string m = refusal(o);
  EXPECT_TRUE(has(m, P(w) + " (fake_cuda_app) holds GPU device files (fd ")) << m;
  EXPECT_TRUE(has(m, "whether they are CUDA process " + std::to_string(app) +
                         "'s open files could not be told: agent shared: ptrace(PTRACE_SEIZE): Operation not permitted"))
      << m;
  EXPECT_FALSE(has(m, "opened by itself")) << m;
  EXPECT_TRUE(gpu.calls("lock").empty()) << "refused before any toggle";
}

TEST(KcmpFileIdentity, SameOpenFileOnlyWhenInherited) {
  auto dir = make_temp_dir();
  spit(dir / "dev", "x");
  int fd = ::open((dir / "dev").c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  DirectWaiter waiter;
  ProcessRunner runner(waiter);
  // fd 3 of the first child is our own open file; the second opens the same path itself.
  pid_t inherits = runner.start({.argv = {"/bin/sleep", "100"}, .extra_fds = {fd}});
  pid_t opens = runner.start({.argv = {"/bin/sh", "-c", "exec 3<\"$0\"; exec sleep 100", (dir / "dev").string()}});
  KcmpFileIdentity files;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  // Until both are sleep: before its exec the shell still has our fd, and before the first child's
  // exec its fd 3 may not be ours yet (a flake under load).
  auto settled = [&] {
    std::error_code ec, ec2;
    return fs::read_symlink("/proc/" + std::to_string(opens) + "/exe", ec).filename() == "sleep" &&
           fs::read_symlink("/proc/" + std::to_string(inherits) + "/exe", ec2).filename() == "sleep";
  };
  while (!settled() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_TRUE(settled());
  EXPECT_TRUE(files.same_file(inherits, 3, ::getpid(), fd));
  EXPECT_FALSE(files.same_file(opens, 3, ::getpid(), fd));
  EXPECT_EQ(files.unknown_because(inherits, ::getpid()), "");
  EXPECT_FALSE(files.same_file(inherits, 99, ::getpid(), fd)) << "no such fd: cannot be told, not the same";
  std::string why = files.unknown_because(inherits, ::getpid());
  EXPECT_NE(why.find("fd 99"), std::string::npos) << why;
  EXPECT_NE(why.find("Bad file descriptor"), std::string::npos) << why;
  for (pid_t p : {inherits, opens}) {
    ::kill(p, SIGKILL);
    runner.wait(p);
  }
  ::close(fd);
  fs::remove_all(dir);
}

namespace {

// Records the hold's calls; stops nothing (the fake app's threads make no device access the
// driver took away). Which pids were let go, and in which order, is what the tests look at.
struct RecordingHold final : ContainerHold {
  std::vector<std::string> calls;
  std::vector<pid_t> hold(const std::vector<pid_t>& p) override {
    calls.push_back("hold " + join(p));
    return {};
  }
  std::vector<pid_t> hold_frozen(const std::vector<pid_t>& p) override {
    calls.push_back("hold_frozen " + join(p));
    return {};
  }
  std::vector<pid_t> hold_stopped(const std::vector<pid_t>& p) override {
    calls.push_back("hold_stopped " + join(p));
    for (pid_t x : p) ::kill(x, SIGCONT);  // as the real one does (after seizing)
    return {};
  }
  void settle() override { calls.push_back("settle"); }
  void release() override { calls.push_back("release"); }
  void release(const std::vector<pid_t>& p) override { calls.push_back("release " + join(p)); }
  void freeze() override { calls.push_back("freeze"); }
  void thaw() override { calls.push_back("thaw"); }
  static std::string join(const std::vector<pid_t>& p) {
    std::string s;
    for (pid_t x : p) s += (s.empty() ? "" : ",") + std::to_string(x);
    return s;
  }
};

// The driver toggler, with a hook on the first lock: a job runner's next worker starts then.
struct StartsAWorkerOnLock final : ForwardingToggler {
  std::function<void()> on_first_lock;
  pid_t worker = 0;
  using ForwardingToggler::ForwardingToggler;
  // On the first lock a fake CUDA worker starts and joins the container's list.
  void start_worker(FakeGpu& gpu, std::vector<pid_t>& listed) {
    on_first_lock = [this, &gpu, &listed] {
      worker = gpu.start_app();
      listed.push_back(worker);
    };
  }
  void lock(pid_t pid, unsigned timeout_ms) override {
    real.lock(pid, timeout_ms);
    if (auto f = std::exchange(on_first_lock, nullptr)) f();
  }
};

}  // namespace

// Issue 33, item 2: a worker that opens the GPU while the others are being locked is not a reason
// to start again (a job runner starts one every few hundred ms): it is let run alone until its
// CUDA init is done, locked, held again and checkpointed with the rest.
TEST_F(OrchestratorTest, AWorkerStartedDuringTheLockIsTakenInWhileTheRestIsHeld) {
  pid_t a = gpu.start_app();
  pids = {a};
  StartsAWorkerOnLock t(toggler);
  t.start_worker(gpu, pids);
  const pid_t& worker = t.worker;
  RecordingHold hold;
  auto o = make_with([&](OrchestratorTools& ot) { ot.hold = &hold; }, &t);
  CheckpointOutcome out = o.checkpoint_around(req(), counting_snapshot());
  ASSERT_GT(worker, 0);
  EXPECT_EQ(out.toggled, (std::vector<pid_t>{a, worker}));
  EXPECT_EQ(snapshots, 1);
  EXPECT_EQ(gpu.calls("lock").size(), 2u) << "one attempt: each locked once";
  EXPECT_EQ(gpu.state(a), "running");
  EXPECT_EQ(gpu.state(worker), "running");
  auto released = std::find(hold.calls.begin(), hold.calls.end(), "release " + std::to_string(worker));
  ASSERT_NE(released, hold.calls.end()) << "the newcomer alone was let run";
  EXPECT_NE(std::find(released, hold.calls.end(), "hold " + std::to_string(worker)), hold.calls.end())
      << "and held again before the checkpoint";
  EXPECT_TRUE(diag_json()["phases"].contains("newcomers_ms")) << diag_json()["phases"];
}

// A newcomer that holds the devices without becoming a CUDA process is for decide() to judge: the
// attempt starts again, and the scan that sees it refuses it before anything is toggled.
TEST_F(OrchestratorTest, ANewcomerWithoutCudaStartsTheAttemptAgainAndIsRefused) {
  pid_t a = gpu.start_app();
  pids = {a};
  pid_t nvml = 0;
  StartsAWorkerOnLock t(toggler);
  t.on_first_lock = [&] {
    nvml = gpu.start_app({"--no-cuda"}, "nvidiactl");
    pids.push_back(nvml);
  };
  RecordingHold hold;
  auto o = make_with([&](OrchestratorTools& ot) { ot.hold = &hold; }, &t);
  std::string msg = refusal(o);
  EXPECT_TRUE(has(msg, "refused: 1 process holds GPU devices")) << msg;
  EXPECT_TRUE(has(msg, P(nvml))) << msg;
  EXPECT_EQ(gpu.state(a), "running") << "the first attempt's lock undone";
  EXPECT_EQ(gpu.calls("lock").size(), 1u) << "nothing toggled by the attempts that saw it";
}

namespace {
template <class F>
bool wait_until(F done, std::chrono::milliseconds limit = std::chrono::seconds(5)) {
  auto end = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}
char proc_state(pid_t pid) {
  std::string s = slurp("/proc/" + std::to_string(pid) + "/stat");
  auto close = s.rfind(')');
  return close == std::string::npos || close + 2 >= s.size() ? '?' : s[close + 2];
}
}  // namespace

// Issue 33: a restore left stopped by the runtime (CRIU's leave-stopped) is held for the CUDA
// restore and let go after it; the processes run again whatever the hold did.
TEST_F(OrchestratorTest, ARestoreLeftStoppedIsHeldForItsCudaRestoreThenLetGo) {
  pid_t a = gpu.start_app();
  pids = {a};
  make().checkpoint_around(req(false), counting_snapshot());
  ASSERT_EQ(gpu.state(a), "checkpointed");
  ASSERT_EQ(::kill(a, SIGSTOP), 0);
  ASSERT_TRUE(wait_until([&] { return proc_state(a) == 'T'; }));
  RecordingHold hold;
  auto o = make_with([&](OrchestratorTools& ot) { ot.hold = &hold; });
  auto out = o.restore_after_runtime_restore("c1", diag_path, {}, {}, {}, true);
  EXPECT_EQ(out.resumed, std::vector<pid_t>{a});
  EXPECT_EQ(hold.calls, (std::vector<std::string>{"hold_stopped " + std::to_string(a), "release"}));
  EXPECT_EQ(gpu.state(a), "running");
  EXPECT_TRUE(wait_until([&] { return proc_state(a) != 'T'; })) << "pid " << a << " left stopped";

  // Without a hold (or when it fails) the processes are continued, not left stopped.
  make().checkpoint_around(req(false), counting_snapshot());
  ASSERT_EQ(::kill(a, SIGSTOP), 0);
  ASSERT_TRUE(wait_until([&] { return proc_state(a) == 'T'; }));
  make().restore_after_runtime_restore("c1", diag_path, {}, {}, {}, true);
  EXPECT_TRUE(wait_until([&] { return proc_state(a) != 'T'; })) << "pid " << a << " left stopped";
  EXPECT_EQ(gpu.state(a), "running");
}

// Issue 33: a CUDA process that maps JAX's XLA runs threads on device memory while checkpointed;
// where nothing holds it still (runsc, or hold_still off) it is refused before any toggle, naming
// the library; held, it is checkpointed.
TEST_F(OrchestratorTest, AJaxProcessIsRefusedWhereNothingHoldsItStill) {
  fs::path lib = gpu.dir() / "site-packages/jaxlib/xla_extension.so";
  fs::create_directories(lib.parent_path());
  { std::ofstream(lib) << std::string(4096, '\0'); }
  EXPECT_TRUE(runs_device_threads(lib.string()));
  EXPECT_FALSE(runs_device_threads("/opt/torch/lib/libtorch_cuda.so"));
  pid_t a = gpu.start_app({"--map-lib", lib.string()});
  pids = {a};
  auto o = make_with([&](OrchestratorTools& ot) { ot.hold_unavailable = "runsc cannot"; });
  std::string msg = refusal(o);
  EXPECT_TRUE(has(msg, "refused: 1 process runs threads that touch device memory while CUDA-checkpointed")) << msg;
  EXPECT_TRUE(has(msg, P(a) + " (fake_cuda_app) maps " + lib.string() + " (JAX's XLA)")) << msg;
  EXPECT_TRUE(has(msg, "runsc cannot")) << msg;
  EXPECT_TRUE(gpu.calls("lock").empty());

  RecordingHold hold;
  auto held = make_with([&](OrchestratorTools& ot) { ot.hold = &hold; });
  auto out = held.checkpoint_around(req(), counting_snapshot());
  EXPECT_EQ(out.toggled, std::vector<pid_t>{a});
}

namespace {
// A toggler whose checkpoint of one pid fails as that process ends (a job runner's worker under
// runsc answers CUDA_ERROR_OPERATING_SYSTEM while it exits).
struct EndsOnCheckpoint final : ForwardingToggler {
  pid_t ending = 0;
  std::function<void(pid_t)> end;
  using ForwardingToggler::ForwardingToggler;
  void checkpoint(pid_t pid) override {
    if (pid != ending) return real.checkpoint(pid);
    end(pid);
    throw CudaError(pid, "checkpoint", 304, "CUDA_ERROR_OPERATING_SYSTEM");
  }
};
}  // namespace

// Issue 33, item 2, where nothing holds the container (a gVisor sandbox's pids): a worker whose
// checkpoint fails because it is ending (OPERATING_SYSTEM) makes the attempt start again, and the
// next scan no longer finds it; nothing calls it stuck.
TEST_F(OrchestratorTest, WithoutAHoldAWorkerThatEndsDuringItsCheckpointIsLeftOut) {
  pid_t a = gpu.start_app(), b = gpu.start_app();
  std::mutex mu;
  std::vector<pid_t> listed{a, b};
  FunctionLister sandbox_list([&] {
    std::lock_guard lk(mu);
    return listed;
  });
  EndsOnCheckpoint t(toggler);
  t.ending = b;
  t.end = [&](pid_t pid) {
    ::kill(pid, SIGKILL);
    std::lock_guard lk(mu);
    std::erase(listed, pid);
  };
  UniqueFd logfd(::memfd_create("orchestrator-log", MFD_CLOEXEC));
  ASSERT_TRUE(logfd);
  log.set_fd(logfd.get());
  auto o = make_with([&](OrchestratorTools& ot) { ot.lister = &sandbox_list; }, &t);
  CheckpointOutcome out = o.checkpoint_around(req(), counting_snapshot());
  log.set_fd(-1);
  std::string logged(8192, '\0');
  logged.resize(static_cast<std::size_t>(std::max<ssize_t>(0, ::pread(logfd.get(), logged.data(), logged.size(), 0))));
  EXPECT_EQ(out.toggled, std::vector<pid_t>{a});
  EXPECT_EQ(snapshots, 1);
  EXPECT_EQ(gpu.state(a), "running");
  EXPECT_TRUE(has(logged, "pids " + std::to_string(b) + " answered their CUDA checkpoint as ending processes do")) << logged;
}

namespace {
// A toggler that ends one process when its CUDA state is asked for: a job runner's worker that
// held the device at the scan and is gone by the time the classification reaches it.
struct EndsOnGetState final : ForwardingToggler {
  pid_t ending = 0;
  std::function<void(pid_t)> end;
  using ForwardingToggler::ForwardingToggler;
  CudaState get_state(pid_t pid) override {
    if (pid == ending) end(pid);
    return real.get_state(pid);
  }
};
}  // namespace

// Issue 32 (a CI flake under load): in a sandbox a scan and its classification take seconds; a
// holder without CUDA that has ended by then is no blocker: it is left out and the
// checkpoint goes on. One that stays without CUDA is refused once kStartingGrace has passed.
TEST_F(OrchestratorTest, WithoutAHoldAHolderWithoutCudaThatEndedIsLeftOutNotRefused) {
  pid_t a = gpu.start_app(), w = gpu.start_app({"--no-cuda"}, "nvidiactl");
  std::mutex mu;
  std::vector<pid_t> listed{a, w};
  FunctionLister sandbox_list([&] {
    std::lock_guard lk(mu);
    return listed;
  });
  EndsOnGetState t(toggler);
  t.ending = w;
  t.end = [&](pid_t pid) {
    ::kill(pid, SIGKILL);
    std::lock_guard lk(mu);
    std::erase(listed, pid);
  };
  auto o = make_with([&](OrchestratorTools& ot) { ot.lister = &sandbox_list; }, &t);
  CheckpointOutcome out = o.checkpoint_around(req(), counting_snapshot());
  EXPECT_EQ(out.toggled, std::vector<pid_t>{a});
  EXPECT_EQ(snapshots, 1);

  pid_t nvml = gpu.start_app({"--no-cuda"}, "nvidiactl");
  listed = {a, nvml};
  snapshots = 0;
  auto started = std::chrono::steady_clock::now();
  std::string msg = refusal(o);
  EXPECT_TRUE(has(msg, P(nvml))) << msg;
  EXPECT_GE(std::chrono::steady_clock::now() - started, std::chrono::milliseconds(2000)) << "refused only after the grace";
}

// The same worker still listed (alive and failing): that is a failure, rolled back, and it is the
// one process reported stuck if it stays locked.
TEST_F(OrchestratorTest, WithoutAHoldAWorkerThatFailsAndStaysIsAFailure) {
  pid_t a = gpu.start_app(), b = gpu.start_app();
  pids = {a, b};
  EndsOnCheckpoint t(toggler);
  t.ending = b;
  t.end = [](pid_t) {};
  auto o = make(&t);
  try {
    o.checkpoint_around(req(), counting_snapshot());
    ADD_FAILURE() << "the checkpoint succeeded";
  } catch (const Error& e) {
    EXPECT_TRUE(has(e.what(), "CUDA checkpoint failed in 1 process")) << e.what();
    EXPECT_TRUE(has(e.what(), "CUDA_ERROR_OPERATING_SYSTEM (304)")) << e.what();
  }
  EXPECT_EQ(snapshots, 0);
  EXPECT_EQ(gpu.state(a), "running");
  EXPECT_EQ(gpu.state(b), "running") << "rolled back: it was only locked";
}

// Issue 33, item 2, where nothing holds the container: a CUDA worker that starts during the
// checkpoint is found by the verify, locked and checkpointed while the rest runs on, and resumed
// with the others; the runtime snapshots only after that.
TEST_F(OrchestratorTest, WithoutAHoldAWorkerStartedDuringTheCheckpointIsTakenInBeforeTheSnapshot) {
  pid_t a = gpu.start_app();
  pids = {a};
  StartsAWorkerOnLock t(toggler);
  t.start_worker(gpu, pids);
  const pid_t& worker = t.worker;
  auto o = make(&t);
  std::vector<std::string> states_at_snapshot;
  CheckpointOutcome out = o.checkpoint_around(req(), [&] {
    ++snapshots;
    states_at_snapshot = {gpu.state(a), gpu.state(worker)};
  });
  ASSERT_GT(worker, 0);
  EXPECT_EQ(out.toggled, (std::vector<pid_t>{a, worker}));
  EXPECT_EQ(snapshots, 1);
  EXPECT_EQ(states_at_snapshot, (std::vector<std::string>{"checkpointed", "checkpointed"}));
  EXPECT_EQ(gpu.state(a), "running");
  EXPECT_EQ(gpu.state(worker), "running");
  EXPECT_TRUE(diag_json()["phases"].contains("newcomers_ms")) << diag_json()["phases"];
}

namespace {
// A worker starts on the first lock; asked to lock, it answers as one whose exit has torn CUDA
// down (NOT_INITIALIZED) and is gone.
struct NewcomerEndsOnLock final : ForwardingToggler {
  std::function<void()> on_first_lock;
  pid_t worker = 0;
  std::function<void(pid_t)> end;
  using ForwardingToggler::ForwardingToggler;
  void lock(pid_t pid, unsigned timeout_ms) override {
    if (pid == worker) {
      end(pid);
      throw CudaError(pid, "lock", kCudaNotInitialized, "CUDA_ERROR_NOT_INITIALIZED");
    }
    real.lock(pid, timeout_ms);
    if (auto f = std::exchange(on_first_lock, nullptr)) f();
  }
};
}  // namespace

// Issue 32 (a CI flake): where nothing holds the container, a newcomer whose lock finds its CUDA
// torn down and which then ends is not taken in and not a failure; the snapshot goes on.
TEST_F(OrchestratorTest, WithoutAHoldANewcomerThatEndsAtItsLockIsLeftOut) {
  pid_t a = gpu.start_app();
  pids = {a};
  NewcomerEndsOnLock t(toggler);
  t.on_first_lock = [&] {
    t.worker = gpu.start_app();
    pids.push_back(t.worker);
  };
  t.end = [&](pid_t pid) {
    ::kill(pid, SIGKILL);
    std::erase(pids, pid);
  };
  auto o = make(&t);
  CheckpointOutcome out = o.checkpoint_around(req(), counting_snapshot());
  ASSERT_GT(t.worker, 0);
  EXPECT_EQ(out.toggled, std::vector<pid_t>{a});
  EXPECT_EQ(snapshots, 1);
  EXPECT_EQ(gpu.calls("lock").size(), 1u) << "one attempt";
  EXPECT_EQ(gpu.state(a), "running");
}

// Where nothing holds the container, a CUDA worker can start between the verify and the runtime's
// own pause, and the runtime's snapshot then fails on its device mappings (runsc: "Can't save pma
// ... nvproxy.frontendFDMemmapFile"): the attempt is made again from a scan that sees it.
TEST_F(OrchestratorTest, WithoutAHoldASnapshotFailedByAWorkerStartedAfterTheVerifyIsMadeAgain) {
  pid_t a = gpu.start_app();
  pids = {a};
  pid_t worker = 0;
  auto o = make();
  CheckpointOutcome out = o.checkpoint_around(req(), [&] {
    if (++snapshots > 1) return;
    worker = gpu.start_app();
    pids.push_back(worker);
    throw Error(Code::Internal, "encoding error: Can't save pma with non-MemoryFile of type *nvproxy.frontendFDMemmapFile");
  });
  ASSERT_GT(worker, 0);
  EXPECT_EQ(snapshots, 2);
  EXPECT_EQ(out.toggled, (std::vector<pid_t>{a, worker}));
  EXPECT_EQ(gpu.state(a), "running");
  EXPECT_EQ(gpu.state(worker), "running");
}

namespace {
// A scanner whose first scan does not see one pid's devices yet (a worker that was listed while it
// imported its libraries, and opened the GPU a moment later).
struct LateOpener final : HolderScanner {
  HolderScanner& real;
  pid_t late = 0;
  int scans = 0;
  explicit LateOpener(HolderScanner& r) : real(r) {}
  std::vector<Holder> scan(const std::vector<pid_t>& pids) override {
    std::vector<Holder> hs = real.scan(pids);
    if (scans++ == 0) std::erase_if(hs, [&](const Holder& h) { return h.pid == late; });
    return hs;
  }
  std::optional<ProcInfo> info(pid_t pid) override { return real.info(pid); }
};
}  // namespace

// Issue 33, item 2: a process listed at the scan without GPU devices that opens them before the
// snapshot is a newcomer like one started later: taken in, not refused as "not toggled" (measured
// on the H200 under runc and runsc with a job runner).
TEST_F(OrchestratorTest, AProcessListedAtTheScanThatOpensTheGpuLaterIsTakenIn) {
  for (bool held : {true, false}) {
    SCOPED_TRACE(held ? "held (runc)" : "unheld (runsc)");
    pid_t a = gpu.start_app(), worker = gpu.start_app();
    pids = {a, worker};
    ProcHolderScanner real(cfg.device_globs);
    LateOpener late(real);
    late.late = worker;
    RecordingHold hold;
    snapshots = 0;
    auto o = make_with([&](OrchestratorTools& ot) {
      ot.scanner = &late;
      if (held) ot.hold = &hold;
    });
    CheckpointOutcome out = o.checkpoint_around(req(), counting_snapshot());
    EXPECT_EQ(out.toggled, (std::vector<pid_t>{a, worker}));
    EXPECT_EQ(snapshots, 1);
    EXPECT_EQ(gpu.state(worker), "running");
  }
}

// Issue 36, item 3: where the dump leaves zero pages out, an image that does not fit as allocated is
// counted again once the driver has staged device memory (a 20 GiB pool nothing wrote), and only
// what will be written must fit; when even that does not fit, CUDA is rolled back and the snapshot
// never runs.
TEST_F(OrchestratorTest, AnImageThatFitsWithoutItsZeroPagesIsCountedAgainAfterStaging) {
  pid_t a = gpu.start_app();
  pids = {a};
  FakeSpace space;
  space.gpu = &gpu;
  space.per_process = 1 * GiB;
  space.staged = 21 * GiB;
  space.zeros = 20 * GiB;
  space.fs["/img"] = {.available = 10 * GiB, .device = 8, .at = "/img"};
  auto r = req();
  r.image_path = "/img";
  r.device_bytes[a] = 21 * GiB;
  auto o = make_with([&](OrchestratorTools& ot) { ot.space = &space; });
  // A dump that writes its zero pages: refused before any toggle, as before.
  EXPECT_THROW(o.checkpoint_around(r, counting_snapshot()), Error);
  EXPECT_TRUE(gpu.calls("lock").empty());
  EXPECT_EQ(space.zero_asks, 0);

  r.zero_pages_left_out = true;
  o.checkpoint_around(r, counting_snapshot());
  EXPECT_EQ(snapshots, 1);
  EXPECT_FALSE(space.asked_before_staging) << "zero pages are counted once device memory is host memory";
  auto j = diag_json();
  EXPECT_EQ(j["space"]["counted_as_written"], "after the CUDA checkpoint");
  EXPECT_EQ(j["space"]["as_written"]["staged_bytes"], 22 * GiB);
  EXPECT_EQ(j["space"]["as_written"]["zero_bytes"], 20 * GiB);
  EXPECT_EQ(j["space"]["as_written"]["image_bytes"], 2 * GiB);

  // 15 GiB to write in 10 GiB: refused after the CUDA checkpoint, every process restored.
  space.zeros = 7 * GiB;
  auto restores = gpu.calls("restore").size();
  try {
    o.checkpoint_around(r, counting_snapshot());
    FAIL() << "15 GiB fit in 10 GiB";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_TRUE(has(m,
                    "refused: the checkpoint image does not fit even without its zero pages: 15.0 GiB to write of "
                    "22.0 GiB staged (7.0 GiB of zero pages left out)"))
        << m;
    EXPECT_TRUE(has(m, "only 10.0 GiB are free there")) << m;
    EXPECT_TRUE(has(m, "CUDA restored in pids " + std::to_string(a))) << m;
    EXPECT_TRUE(has(m, P(a) + " (fake_cuda_app): memory with device memory staged 22.0 GiB, of it zero pages 7.0 GiB")) << m;
  }
  EXPECT_EQ(snapshots, 1);
  EXPECT_EQ(gpu.calls("restore").size(), restores + 1);
  EXPECT_EQ(diag_json()["verdict"], "refused");

  // Zero pages that cannot be counted count as data.
  space.zeros.reset();
  EXPECT_THROW(o.checkpoint_around(r, counting_snapshot()), Error);
  EXPECT_EQ(snapshots, 1);
  EXPECT_TRUE(has(diag_json()["space"]["as_written"]["uncounted"].dump(), "no page frames")) << diag_json()["space"];
}

namespace {
// A sandbox killed whole after its CUDA checkpoint (the kernel's OOM killer taking the sentry): the
// process is gone, the driver cannot be asked for it any more, and the sandbox cannot be listed.
struct SandboxDiesOnCheckpoint final : ForwardingToggler {
  std::atomic<bool> dead{false};
  using ForwardingToggler::ForwardingToggler;
  void checkpoint(pid_t pid) override {
    real.checkpoint(pid);
    dead = true;
  }
  void restore(pid_t pid, const DeviceMap& map) override {
    if (dead) throw CudaError(pid, "restore", 999, "CUDA_ERROR_UNKNOWN");
    real.restore(pid, map);
  }
  void unlock(pid_t pid) override {
    if (dead) throw CudaError(pid, "unlock", 999, "CUDA_ERROR_UNKNOWN");
    real.unlock(pid);
  }
};
}  // namespace

// The listing of a sandbox that died fails from the verify on, in the rollback too: the checkpoint
// fails with an Error naming what is stuck; nothing escapes the attempt's guards (a throw from
// their destructor would end the shim, and containerd would lose the task).
TEST_F(OrchestratorTest, ASandboxThatDiesMidCheckpointFailsTheCheckpointAndNothingElse) {
  pid_t a = gpu.start_app();
  SandboxDiesOnCheckpoint t(toggler);
  FunctionLister sandbox_list([&] {
    if (t.dead) throw Error(Code::FailedPrecondition, "cannot execute in container \"c1\" in state stopped");
    return std::vector<pid_t>{a};
  });
  auto o = make_with([&](OrchestratorTools& ot) { ot.lister = &sandbox_list; }, &t);
  try {
    o.checkpoint_around(req(), counting_snapshot());
    FAIL() << "the checkpoint of a dead sandbox succeeded";
  } catch (const Error& e) {
    EXPECT_TRUE(has(e.what(), "in state stopped")) << e.what();
    EXPECT_TRUE(has(e.what(), "STUCK") || has(e.what(), "could NOT")) << e.what();
  }
  EXPECT_EQ(snapshots, 0);
}

// The project's CRIU runs a leave-running dump's processes again before it has written their pages
// (--resumed-fifo): the snapshot's plan carries the call, and CUDA is resumed inside it, once.
TEST_F(OrchestratorTest, EarlyResumeBringsCudaBackWhileTheRuntimeStillWrites) {
  pids = {gpu.start_app(), gpu.start_app()};
  auto o = make();
  auto out = o.checkpoint_around(req(), ReleasingSnapshotFn([&](const ReleasePlan& plan) {
                                   ++snapshots;
                                   ASSERT_TRUE(plan.on_resumed);
                                   for (pid_t p : pids) EXPECT_EQ(gpu.state(p), "checkpointed") << p;
                                   plan.on_resumed();  // CRIU's byte: the processes run again
                                   for (pid_t p : pids) EXPECT_EQ(gpu.state(p), "running") << p;
                                 }));
  EXPECT_EQ(snapshots, 1);
  EXPECT_EQ(gpu.calls("restore").size(), 2u);
  EXPECT_EQ(gpu.calls("unlock").size(), 2u);
  EXPECT_EQ(out.toggled.size(), 2u);
  std::vector<std::string> names;
  for (const auto& ph : out.phases) names.push_back(ph.name);
  EXPECT_EQ(names, (std::vector<std::string>{"scan", "classify", "preflight", "lock", "checkpoint", "verify", "snapshot",
                                             "resume", "write_after_resume"}));
  EXPECT_EQ(diag_json()["verdict"], "done");
}

TEST_F(OrchestratorTest, RuntimeFailureAfterAnEarlyResumeLeavesCudaRunning) {
  pids = {gpu.start_app(), gpu.start_app()};
  Error e = checkpoint_error(ReleasingSnapshotFn([&](const ReleasePlan& plan) {
    plan.on_resumed();
    throw Error(Code::Unavailable, "runc checkpoint: criu failed: page writer: No space left on device");
  }));
  EXPECT_EQ(e.code(), Code::Unavailable);
  EXPECT_TRUE(has(e.what(), "No space left on device")) << e.what();
  for (pid_t p : pids) EXPECT_EQ(gpu.state(p), "running");
  EXPECT_EQ(gpu.calls("restore").size(), 2u) << "CUDA resumed once, not rolled back again";
  EXPECT_EQ(holders().size(), 2u);
}

TEST_F(OrchestratorTest, NoEarlyResumeWhenTheTaskExits) {
  pids = {gpu.start_app()};
  auto o = make();
  o.checkpoint_around(req(false), ReleasingSnapshotFn([&](const ReleasePlan& plan) { EXPECT_FALSE(plan.on_resumed); }));
}
