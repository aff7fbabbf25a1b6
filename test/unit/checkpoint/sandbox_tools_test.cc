// The sandbox seams (checkpoint/sandbox/sandbox_tools.h) against the real nvproxy-sandbox-agent and the fake
// driver. A stub "runsc" stands in for `runsc exec`: it records its arguments and runs the agent
// here, with libcuda.so.1 resolving to the fake libcuda, so the whole chain (argv, JSON answers,
// driver refusals, deadlines) runs without gVisor.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <thread>

#include "checkpoint/sandbox/sandbox_assembly.h"
#include "checkpoint/sandbox/sandbox_tools.h"
#include "checkpoint/session/session.h"
#include "fake_gpu.h"

using namespace nvproxy;
using namespace nvproxy::checkpoint;
using namespace nvproxy::checkpoint::testing;

namespace {

class SandboxTools : public ::testing::Test {
 protected:
  FakeGpu gpu;
  fs::path dir = make_temp_dir();
  fs::path stub = dir / "runsc", args_log = dir / "runsc.args";
  DirectWaiter waiter;
  ProcessRunner runner{waiter};
  Logger log{-1};

  void SetUp() override {
    fs::create_directories(dir / "lib");
    fs::create_symlink(FAKE_LIBCUDA_PATH, dir / "lib/libcuda.so.1");
    write_stub("");
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  // `before`: shell run before the agent (e.g. a sleep, or an exit that plays a runsc failure).
  void write_stub(const std::string& before) {
    spit(stub, "#!/bin/sh\necho \"$@\" >>" + args_log.string() + "\n" + before +
                   "\n# up to the agent: exec --user=0:0 [FLAGS] ID /.nvproxy/ld.so --library-path LP /.nvproxy/AGENT\n"
                   "while [ \"$1\" != /.nvproxy/nvproxy-sandbox-agent ]; do shift; done\nshift\n"
                   "LD_LIBRARY_PATH=" +
                   (dir / "lib").string() + " exec " + SANDBOX_AGENT_PATH + " \"$@\"\n");
    ::chmod(stub.c_str(), 0755);
  }
  SandboxTarget target(std::chrono::milliseconds timeout = std::chrono::seconds(20)) const {
    return {.runsc = {stub.string(), "--root=/run/x"},
            .container_id = "c1",
            .lib_dirs = {"/usr/local/nvidia/lib64"},
            .timeout = timeout};
  }
  // The sandbox seams of SandboxAssembly with the pids fixed (the host has hundreds the agent would list).
  struct Seams {
    Seams(SandboxTools& t, std::vector<pid_t> pids)
        : agent(t.runner, t.target()),
          lister(std::move(pids)),
          scanner(agent, t.gpu.config().device_globs),
          toggler(agent, std::chrono::seconds(20)),
          all(agent),
          probe(all, scanner),
          comm(scanner),
          orch(t.gpu.config(), {.lister = &lister, .scanner = &scanner, .toggler = &toggler, .probe = &probe, .comm = &comm},
               t.log) {}
    SandboxAgent agent;
    FunctionLister lister;
    SandboxHolderScanner scanner;
    SandboxCudaToggler toggler;
    SandboxLister all;
    SandboxGpuProbe probe;
    SandboxCommProbe comm;
    Orchestrator orch;
  };
};

}  // namespace

TEST_F(SandboxTools, AgentRunsThroughRunscExecWithItsOwnLoader) {
  SandboxAgent a(runner, target());
  auto argv = a.argv({"list"});
  std::vector<std::string> want{stub.string(),
                                "--root=/run/x",
                                "exec",
                                "--user=0:0",
                                "c1",
                                "/.nvproxy/ld.so",
                                "--library-path",
                                "/.nvproxy/lib:/usr/local/nvidia/lib64",
                                "/.nvproxy/nvproxy-sandbox-agent",
                                "list"};
  EXPECT_EQ(argv, want);
  SandboxLister l(a);
  auto pids = l.list();
  EXPECT_NE(std::find(pids.begin(), pids.end(), ::getpid()), pids.end()) << "the agent lists every process but itself";
  EXPECT_TRUE(std::is_sorted(pids.begin(), pids.end()));
  EXPECT_NE(slurp(args_log).find("exec --user=0:0 c1 /.nvproxy/ld.so"), std::string::npos) << slurp(args_log);
}

TEST_F(SandboxTools, ScanAndTogglesAnswerFromInside) {
  pid_t app = gpu.start_app({"--map"});
  pid_t holder = gpu.start_app({"--no-cuda"});
  SandboxAgent a(runner, target());
  SandboxHolderScanner s(a, {gpu.glob()});
  auto holders = s.scan({app, holder});
  bool app_fd = false, app_map = false, holder_fd = false;
  for (const auto& h : holders) {
    EXPECT_EQ(h.path, gpu.device());
    app_fd |= h.pid == app && h.kind == HolderKind::Fd;
    app_map |= h.pid == app && h.kind == HolderKind::Mapping;
    holder_fd |= h.pid == holder && h.kind == HolderKind::Fd;
  }
  EXPECT_TRUE(app_fd && app_map && holder_fd) << holders.size() << " holders";
  auto info = s.info(app);
  ASSERT_TRUE(info);
  EXPECT_EQ(info->ppid, ::getpid());
  EXPECT_EQ(info->name, "fake_cuda_app");

  SandboxCudaToggler t(a, std::chrono::seconds(20));
  EXPECT_EQ(t.get_state(app), CudaState::Running);
  t.lock(app, 777);
  EXPECT_EQ(gpu.state(app), "locked");
  t.checkpoint(app);
  EXPECT_EQ(t.get_state(app), CudaState::Checkpointed);
  t.restore(app, {});
  t.unlock(app);
  EXPECT_EQ(gpu.state(app), "running");
  ASSERT_EQ(gpu.calls("lock").size(), 1u);
  EXPECT_NE(gpu.calls("lock")[0].extra.find("timeout=777"), std::string::npos);
  try {
    t.get_state(holder);
    FAIL() << "a process without CUDA has no CUDA state";
  } catch (const CudaError& e) {
    EXPECT_EQ(e.pid(), holder);
    EXPECT_EQ(e.driver_code(), 3);
    EXPECT_EQ(e.driver_name(), "CUDA_ERROR_NOT_INITIALIZED");
  }
  gpu.fail("lock " + std::to_string(app) + " 801");
  try {
    t.lock(app, 100);
    FAIL() << "the injected lock failure was not reported";
  } catch (const CudaError& e) {
    EXPECT_EQ(e.driver_name(), "CUDA_ERROR_NOT_SUPPORTED");
    EXPECT_EQ(e.op(), "lock");
  }
}

// The same orchestrator as under runc: a non-CUDA holder is refused before anything is toggled,
// and the refusal names its (sandbox) pid and device.
TEST_F(SandboxTools, KitRefusesANonCudaHolderBeforeAnyToggle) {
  pid_t app = gpu.start_app();
  pid_t holder = gpu.start_app({"--no-cuda"});
  Seams k(*this, {app, holder});
  bool snapshot = false;
  try {
    k.orch.checkpoint_around({.container_id = "c1"}, [&] { snapshot = true; });
    FAIL() << "checkpoint with a non-CUDA holder went ahead";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_EQ(e.code(), Code::FailedPrecondition);
    EXPECT_NE(m.find(std::to_string(holder)), std::string::npos) << m;
    EXPECT_NE(m.find(gpu.device()), std::string::npos) << m;
  }
  EXPECT_FALSE(snapshot);
  EXPECT_TRUE(gpu.calls("lock").empty());
  EXPECT_EQ(gpu.state(app), "running");
}

TEST_F(SandboxTools, KitCheckpointsAndRestoresThroughTheAgent) {
  pid_t app = gpu.start_app({"--map", "--children", "1"});
  pid_t child = gpu.children(app).at(0);
  Seams k(*this, {app, child});
  bool snapshot = false;
  auto out = k.orch.checkpoint_around({.container_id = "c1", .keep_running = false}, [&] {
    snapshot = true;
    EXPECT_EQ(gpu.state(app), "checkpointed");
    EXPECT_EQ(gpu.state(child), "checkpointed");
  });
  EXPECT_TRUE(snapshot);
  EXPECT_EQ(out.toggled, (std::vector<pid_t>{app, child}));
  auto back = k.orch.restore_after_runtime_restore("c1");
  EXPECT_EQ(back.resumed, (std::vector<pid_t>{app, child}));
  EXPECT_EQ(gpu.state(app), "running");
  EXPECT_EQ(gpu.state(child), "running");
}

TEST_F(SandboxTools, AHungExecIsKilledAtItsDeadline) {
  write_stub("sleep 30");
  SandboxAgent a(runner, target(std::chrono::milliseconds(300)));
  auto t0 = std::chrono::steady_clock::now();
  try {
    a.call({"list"});
    FAIL() << "a hung runsc exec returned";
  } catch (const DeadlineError& e) {
    EXPECT_EQ(e.code(), Code::DeadlineExceeded);
    EXPECT_NE(std::string(e.what()).find("container \"c1\""), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
}

TEST_F(SandboxTools, ARunscFailureNamesContainerAndCause) {
  write_stub("echo 'container \"c1\" not found' >&2; exit 1");
  SandboxAgent a(runner, target());
  try {
    a.call({"list"});
    FAIL() << "a failed runsc exec returned";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("in container \"c1\" (runsc exec)"), std::string::npos) << m;
    EXPECT_NE(m.find("not found"), std::string::npos) << m;
  }
}

// The CUDA runtime's IPC file, as the process maps it, reaches the orchestrator's IPC refusal.
TEST_F(SandboxTools, ScanCarriesTheCudaIpcFile) {
  fs::path shm = "/dev/shm/cuda.shm.nvproxy-test-" + std::to_string(::getpid());
  spit(shm, std::string(4096, 'x'));
  int fd = ::open(shm.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  void* m = ::mmap(nullptr, 4096, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  ASSERT_NE(m, MAP_FAILED);
  SandboxAgent a(runner, target());
  SandboxHolderScanner s(a, {gpu.glob()});
  s.scan({::getpid()});
  auto info = s.info(::getpid());
  ::munmap(m, 4096);
  fs::remove(shm);
  ASSERT_TRUE(info);
  EXPECT_EQ(info->cuda_ipc_file, shm.string());
}

// gVisor has no kcmp: the agent's `shared` tells a forked worker's inherited fd from the parent's
// open files, through runsc exec with CAP_SYS_PTRACE.
TEST_F(SandboxTools, FileIdentityAsksTheAgentOncePerPair) {
  pid_t app = gpu.start_app({"--fork-workers", "1"});
  pid_t w = gpu.children(app).at(0);
  std::map<pid_t, int> fd;
  for (const auto& h : ProcHolderScanner({gpu.glob()}).scan({app, w}))
    if (h.kind == HolderKind::Fd) fd[h.pid] = h.fd;
  ASSERT_EQ(fd.size(), 2u);
  SandboxAgent a(runner, target());
  SandboxFileIdentity files(a, {gpu.glob()});
  EXPECT_TRUE(files.same_file(w, fd[w], app, fd[app]));
  EXPECT_FALSE(files.same_file(w, fd[w] + 100, app, fd[app]));
  EXPECT_EQ(files.unknown_because(w, app), "");
  std::string args = slurp(args_log);
  EXPECT_EQ(std::count(args.begin(), args.end(), '\n'), 0) << "one runsc exec for the pair: " << args;
  EXPECT_NE(args.find("--cap=CAP_SYS_PTRACE c1"), std::string::npos) << args;
}

// An answer that cannot be had counts as "not the same", and the cause is kept for the refusal.
TEST_F(SandboxTools, FileIdentityKeepsTheAgentsError) {
  write_stub("echo 'exec: operation not permitted' >&2; exit 128");
  SandboxAgent a(runner, target());
  SandboxFileIdentity files(a, {gpu.glob()});
  EXPECT_FALSE(files.same_file(41, 3, 40, 3));
  std::string why = files.unknown_because(41, 40);
  EXPECT_NE(why.find("operation not permitted"), std::string::npos) << why;
  EXPECT_NE(why.find("container \"c1\""), std::string::npos) << why;
  EXPECT_EQ(files.unknown_because(40, 41), "") << "another pair was not asked";
}

// The agent's own answer to a bad request: exit 2, the argument named.
TEST_F(SandboxTools, AgentNamesABadArgument) {
  SandboxAgent a(runner, target());
  for (const auto& [args, want] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"drop", "1", "--fd", "x"}, "not a fd: \"x\""},
           {{"drop", "0"}, "not a pid: \"0\""},
           {{"shared", "1"}, "usage: shared PID OTHER"},
           {{"scan", "--glob", "/dev/x", "12a"}, "not a pid: \"12a\""}}) {
    try {
      a.call(args);
      FAIL() << args[0] << ": a bad request was answered";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  }
}

namespace {

// runsc as the session sees it: the snapshot is counted (runsc checkpoint is not run here).
class SandboxRuntime final : public SessionRuntime {
 public:
  std::vector<pid_t> ps() override { return {}; }
  pid_t init_pid() override { return 1; }
  std::string status() override { return "running"; }
  void pause() override {}
  void resume() override {}
  void snapshot(const std::filesystem::path&, const ReleasePlan& plan) override {
    ++snapshots;
    left_to_snapshot = plan.devices_text();
  }
  void restore(const std::filesystem::path&, bool, const std::string&) override {}
  std::string remove() override { return "delete"; }
  std::optional<Criu> criu() override { return std::nullopt; }
  Identity identity() override { return {"runsc", "release-20260817.0"}; }
  int snapshots = 0;
  std::string left_to_snapshot;
};

}  // namespace

// The sandbox variant's one assembly answers `diagnose` (the session's inspect) as a checkpoint
// does: a forked DataLoader-shaped worker that holds only its CUDA parent's device files is
// released in place, not called a blocker (an assembly of its own once made diagnose refuse it).
TEST_F(SandboxTools, AssemblyDiagnosesAForkedWorkerAsTheCheckpointTreatsIt) {
  pid_t app = gpu.start_app({"--fork-workers", "1"});
  pid_t worker = gpu.children(app).at(0);
  // The sandbox's process list is the container's two processes (the host has hundreds).
  write_stub("case \"$*\" in *nvproxy-sandbox-agent\\ list) echo '{\"pids\":[" + std::to_string(app) + "," +
             std::to_string(worker) + "]}'; exit 0;; esac");
  CheckpointConfig cfg = gpu.config();
  SandboxAssembly tools(cfg, target(), runner, log);
  SandboxRuntime rt;
  CheckpointSession s({.id = "c1", .bundle = dir}, rt, tools, log);

  Inspection ins = s.inspect(dir / "image");
  EXPECT_FALSE(ins.would_refuse) << render_text(ins.diagnostic);
  EXPECT_EQ(ins.sandbox, "runsc");
  EXPECT_TRUE(gpu.calls("lock").empty()) << "diagnose toggles nothing";

  s.checkpoint({.leave_running = true, .image_path = dir / "image"});
  EXPECT_EQ(rt.snapshots, 1);
  EXPECT_EQ(rt.left_to_snapshot, "") << "the worker dropped its files in place before runsc's snapshot";
  EXPECT_EQ(gpu.state(app), "running");
  const long before = gpu.counter(worker);
  bool counts = false;
  for (auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5); !counts && std::chrono::steady_clock::now() < end;
       std::this_thread::sleep_for(std::chrono::milliseconds(10)))
    counts = gpu.counter(worker) > before;
  EXPECT_TRUE(counts) << "the worker keeps running";
}
