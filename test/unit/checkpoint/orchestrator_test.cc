// The orchestrator against the fake driver (test/fixtures/fake_cuda) through the real dlopen
// binding, real fake_cuda_app processes and the real /proc scan.
#include "checkpoint/orchestrator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>

#include "checkpoint/cuda_driver_api.h"
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

  Orchestrator make(CudaToggler* t = nullptr, bool use_toggler = true) {
    scanner = std::make_unique<ProcHolderScanner>(cfg.device_globs);
    probe = std::make_unique<NvmlGpuUsageProbe>(cfg.libnvml);
    return Orchestrator(cfg, lister, *scanner, use_toggler ? (t ? t : &toggler) : nullptr, probe.get(), log);
  }
  CheckpointRequest req(bool keep_running = true) {
    return {.container_id = "c1", .keep_running = keep_running, .diagnostic_path = diag_path};
  }
  SnapshotFn counting_snapshot() {
    return [this] { ++snapshots; };
  }
  // Runs a checkpoint expected to fail; returns its Error.
  Error checkpoint_error(const SnapshotFn& snap, bool keep_running = true) {
    auto o = make();
    try {
      o.checkpoint(req(keep_running), snap);
    } catch (const Error& e) {
      return e;
    }
    ADD_FAILURE() << "checkpoint did not fail";
    return Error(Code::Ok, "");
  }
  nlohmann::json diag_json() { return nlohmann::json::parse(slurp(diag_path)); }
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
  auto out = o.checkpoint(req(), [&] {
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
  auto out = o.checkpoint(req(false), counting_snapshot());
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
  o.checkpoint(req(), counting_snapshot());
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

TEST_F(OrchestratorTest, RestoreAfterRuntimeRestoreRelistsAndResumesCheckpointedOnes) {
  pid_t a = gpu.start_app(), b = gpu.start_app();
  pids = {a, b};
  make().checkpoint(req(false), counting_snapshot());
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
  auto out = make().checkpoint(req(), counting_snapshot());
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
  auto out = make().checkpoint(req(), counting_snapshot());
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
  auto out = make().checkpoint(req(), counting_snapshot());
  EXPECT_EQ(snapshots, 1);
  EXPECT_TRUE(out.toggled.empty());
  EXPECT_TRUE(gpu.calls().empty()) << "the driver is not even asked";
}

TEST_F(OrchestratorTest, CudaNoneLeavesEverythingToTheRuntime) {
  pids = {gpu.start_app({"--no-cuda"})};
  make(nullptr, false).checkpoint(req(), counting_snapshot());
  EXPECT_EQ(snapshots, 1);
  EXPECT_TRUE(gpu.calls().empty());
}

TEST_F(OrchestratorTest, UnusableDriverLibraryIsAClearRefusal) {
  pids = {gpu.start_app()};
  DriverApiToggler missing("/nonexistent/libcuda.so.1");
  auto o = make(&missing);
  try {
    o.checkpoint(req(), counting_snapshot());
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
  auto o = make();
  o.set_comm_probe(&comm);
  std::string msg;
  try {
    o.checkpoint(req(), counting_snapshot());
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
  auto o = make();
  o.set_comm_probe(&comm);
  auto out = o.checkpoint(req(), counting_snapshot());
  EXPECT_EQ(snapshots, 1);
  EXPECT_EQ(out.toggled.size(), 2u);
  EXPECT_TRUE(out.warnings.empty());
}

TEST_F(OrchestratorTest, OverrideCheckpointsNcclRanksWithAWarning) {
  pid_t r0 = gpu.start_app();
  pids = {r0};
  gpu.nvml(std::to_string(r0) + " 0\n");
  FakeComm comm;
  comm.findings[r0] = {.evidence = {"nccl-unix @/tmp/nccl-socket-0-ab"}, .nccl = true};
  cfg.allow_unrestorable = true;
  auto o = make();
  o.set_comm_probe(&comm);
  auto out = o.checkpoint(req(), counting_snapshot());
  EXPECT_EQ(snapshots, 1);
  ASSERT_EQ(out.warnings.size(), 1u);
  EXPECT_TRUE(has(out.warnings[0], P(r0) + " looks like a rank of a collective (NCCL)")) << out.warnings[0];
  EXPECT_TRUE(has(o.inspect("c1").diagnostic.processes.at(0).hint, "rank of a collective"));
}
