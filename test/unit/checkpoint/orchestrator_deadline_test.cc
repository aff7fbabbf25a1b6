// A snapshot that runs out of time (the runtime's checkpoint killed at its deadline): CUDA is rolled
// back as for any snapshot failure, the error keeps code DeadlineExceeded and says which phase ran
// out of time and what was done, and the diagnostic JSON records the deadline.
#include <gtest/gtest.h>

#include "checkpoint/driver/cuda_driver_api.h"
#include "checkpoint/orchestrator/orchestrator.h"
#include "common/process.h"
#include "fake_gpu.h"

using namespace nvproxy;
using namespace nvproxy::checkpoint;
using namespace nvproxy::checkpoint::testing;
using namespace std::chrono_literals;

namespace {

class OrchestratorDeadlineTest : public ::testing::Test {
 protected:
  FakeGpu gpu;
  CheckpointConfig cfg = gpu.config();
  std::vector<pid_t> pids;
  FunctionLister lister{[this] { return pids; }};
  ProcHolderScanner scanner{cfg.device_globs};
  DriverApiToggler toggler{FAKE_LIBCUDA_PATH};
  Logger log{-1};
  fs::path diag_path = gpu.dir() / "checkpoint-diagnostic.json";

  Error checkpoint_error(const SnapshotFn& snap, bool use_toggler = true) {
    Orchestrator o(cfg, {.lister = &lister, .scanner = &scanner, .toggler = use_toggler ? &toggler : nullptr}, log);
    try {
      o.checkpoint_around({.container_id = "c1", .keep_running = true, .diagnostic_path = diag_path}, snap);
    } catch (const Error& e) {
      return e;
    }
    ADD_FAILURE() << "checkpoint did not fail";
    return Error(Code::Ok, "");
  }
  nlohmann::json diag_json() { return nlohmann::json::parse(slurp(diag_path)); }
  static bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }
};

DeadlineError killed_runc() {
  return DeadlineError("runc checkpoint", "container \"c1\"", 3000ms, 4242, "killed runc and CRIU (pgid 4242)")
      .with("container thawed");
}

}  // namespace

TEST_F(OrchestratorDeadlineTest, SnapshotOutOfTimeRollsCudaBackAndSaysWhichPhase) {
  pid_t a = gpu.start_app(), b = gpu.start_app();
  pids = {a, b};
  std::vector<std::string> states_in_snapshot;
  Error e = checkpoint_error([&] {
    for (pid_t p : pids) states_in_snapshot.push_back(gpu.state(p));
    throw killed_runc();
  });
  EXPECT_EQ(states_in_snapshot, (std::vector<std::string>{"checkpointed", "checkpointed"}));
  EXPECT_EQ(e.code(), Code::DeadlineExceeded);
  std::string msg = e.what();
  std::string pid_list = std::to_string(std::min(a, b)) + "," + std::to_string(std::max(a, b));
  EXPECT_TRUE(has(msg,
                  "snapshot (runc checkpoint) did not finish within 3000 ms; killed runc and CRIU (pgid 4242); "
                  "container thawed; CUDA restored in pids " +
                      pid_list))
      << msg;
  for (pid_t p : pids) EXPECT_EQ(gpu.state(p), "running") << p;
  auto j = diag_json();
  EXPECT_EQ(j["verdict"], "failed");
  EXPECT_EQ(j["rolled_back"].size(), 2u);
  EXPECT_EQ(j["deadline"]["phase"], "snapshot");
  EXPECT_EQ(j["deadline"]["command"], "runc checkpoint");
  EXPECT_EQ(j["deadline"]["timeout_ms"], 3000);
  EXPECT_EQ(j["deadline"]["killed_pgid"], 4242);
}

TEST_F(OrchestratorDeadlineTest, APlainDeadlineExceededErrorIsRolledBackToo) {
  pids = {gpu.start_app()};
  Error e = checkpoint_error([] { throw Error(Code::DeadlineExceeded, "runc checkpoint took too long"); });
  EXPECT_EQ(e.code(), Code::DeadlineExceeded);
  std::string msg = e.what();
  EXPECT_TRUE(has(
      msg, "snapshot did not finish in time: runc checkpoint took too long; CUDA restored in pids " + std::to_string(pids[0])))
      << msg;
  EXPECT_EQ(gpu.state(pids[0]), "running");
  EXPECT_EQ(diag_json()["deadline"]["phase"], "snapshot");
}

TEST_F(OrchestratorDeadlineTest, WithoutCudaProcessesTheDeadlineIsStillRecorded) {
  pids = {::getpid()};
  Error e = checkpoint_error([] { throw killed_runc(); });
  EXPECT_EQ(e.code(), Code::DeadlineExceeded);
  EXPECT_TRUE(has(e.what(),
                  "snapshot (runc checkpoint) did not finish within 3000 ms; killed runc and CRIU (pgid 4242); "
                  "container thawed; no CUDA process was toggled"))
      << e.what();
  EXPECT_EQ(diag_json()["deadline"]["timeout_ms"], 3000);
  EXPECT_TRUE(gpu.calls().empty());
}

TEST_F(OrchestratorDeadlineTest, OtherSnapshotErrorsWithoutHoldersPassThroughUnchanged) {
  pids = {::getpid()};
  Error e = checkpoint_error([] { throw Error(Code::Unavailable, "criu failed"); }, false);
  EXPECT_EQ(e.code(), Code::Unavailable);
  EXPECT_STREQ(e.what(), "criu failed");
}
