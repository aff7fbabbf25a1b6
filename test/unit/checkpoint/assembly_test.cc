// The host variant's one assembly (host_assembly.h) answers `diagnose` (the session's inspect) and
// a checkpoint alike: a CRIU that cannot dump inet sockets on this kernel refuses both, with the
// same reason, before anything is toggled. (The sandbox variant's twin is in sandbox_tools_test.)
#include "checkpoint/session/host_assembly.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "checkpoint/session/session.h"
#include "common/error.h"
#include "fake_gpu.h"

using namespace nvproxy;
using namespace nvproxy::checkpoint;
using namespace nvproxy::checkpoint::testing;

namespace {

// runc with Debian 13's CRIU 4.1.1 as the runtime's CRIU.
class RuntimeWithCriu41 final : public SessionRuntime {
 public:
  explicit RuntimeWithCriu41(std::vector<pid_t> pids) : pids_(std::move(pids)) {}
  std::vector<pid_t> ps() override { return pids_; }
  pid_t init_pid() override { return pids_.front(); }
  std::string status() override { return "running"; }
  void pause() override {}
  void resume() override {}
  void snapshot(const std::filesystem::path&, const ReleasePlan&) override { ++snapshots; }
  void restore(const std::filesystem::path&, bool, const std::string&) override {}
  std::string remove() override { return "delete"; }
  std::optional<Criu> criu() override { return Criu{.binary = "/usr/sbin/criu", .version = "4.1.1"}; }
  Identity identity() override { return {"runc", "1.1.15"}; }
  int snapshots = 0;

 private:
  std::vector<pid_t> pids_;
};

// What follows "refused: " on the first line: the cause, worded the same by both.
std::string cause(const std::string& m) {
  auto at = m.find("refused: ");
  if (at == std::string::npos) return "(no refusal in: " + m + ")";
  std::string rest = m.substr(at + 9);
  return rest.substr(0, rest.find('\n'));
}

}  // namespace

TEST(HostAssembly, DiagnoseAndCheckpointRefuseAKernelCriuMismatchAlike) {
  FakeGpu gpu;
  CheckpointConfig cfg = gpu.config();
  cfg.cuda_helper = CUDA_HELPER_PATH;
  pid_t server = gpu.start_app({"--listen-tcp"});
  RuntimeWithCriu41 rt({server});
  DirectWaiter waiter;
  ProcessRunner runner(waiter);
  Logger log(-1);
  const char* path = std::getenv("PATH");
  HostAssembly tools(cfg, rt, true, runner, log, HostEnvironment{.kernel = "6.18.44", .path = path ? path : ""});
  CheckpointSession s({.id = "web", .bundle = gpu.dir()}, rt, tools, log);

  Inspection ins = s.inspect(gpu.dir() / "image");
  EXPECT_TRUE(ins.would_refuse);
  const std::string why = ins.diagnostic.reason;
  EXPECT_NE(why.find("CRIU 4.1.1"), std::string::npos) << why;
  EXPECT_NE(why.find("6.18.44"), std::string::npos) << why;

  try {
    s.checkpoint({.leave_running = true, .image_path = gpu.dir() / "image"});
    FAIL() << "the checkpoint went ahead";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::FailedPrecondition);
    EXPECT_EQ(cause(e.what()), cause(why));
  }
  EXPECT_EQ(rt.snapshots, 0);
  EXPECT_TRUE(gpu.calls("lock").empty()) << "nothing may be toggled";
  EXPECT_EQ(gpu.state(server), "running");
}
