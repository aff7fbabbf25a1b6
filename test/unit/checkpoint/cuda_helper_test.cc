// The shim's CUDA path through nvproxy-cuda-helper: the real helper program (built beside the
// shim) loading the fake driver, and the client's handling of a helper that fails or dies.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <future>
#include <thread>

#include "checkpoint/cuda_helper_client.h"
#include "checkpoint/cuda_helper_server.h"
#include "fake_gpu.h"

using namespace nvproxy;
using namespace nvproxy::checkpoint;
using namespace nvproxy::checkpoint::testing;
using nlohmann::json;

namespace {

CudaTools tools_for(const FakeGpu& gpu, ProcessRunner& runner) {
  CheckpointConfig cfg = gpu.config();
  cfg.cuda_helper = CUDA_HELPER_PATH;
  return make_cuda_tools(cfg, runner);
}

// A helper stand-in written as a shell script (for failures the real helper cannot be made to show).
std::string script(const fs::path& dir, const std::string& body) {
  fs::path p = dir / "helper.sh";
  spit(p, "#!/bin/sh\n" + body);
  ::chmod(p.c_str(), 0755);
  return p.string();
}

}  // namespace

TEST(CudaHelper, FullCycleThroughTheHelperProgram) {
  FakeGpu gpu;
  pid_t app = gpu.start_app();
  DirectWaiter w;
  ProcessRunner r(w);
  CudaTools t = tools_for(gpu, r);
  EXPECT_EQ(t.helper->pid(), 0) << "the helper starts on first use only";
  EXPECT_NE(t.toggler->describe().find("nvproxy-cuda-helper"), std::string::npos);
  pid_t helper = t.helper->pid();
  ASSERT_GT(helper, 0);
  EXPECT_NE(helper, ::getpid());
  EXPECT_EQ(t.toggler->get_state(app), CudaState::Running);
  t.toggler->lock(app, 4321);
  EXPECT_EQ(t.toggler->get_state(app), CudaState::Locked);
  t.toggler->checkpoint(app);
  EXPECT_EQ(gpu.state(app), "checkpointed");
  t.toggler->restore(app);
  t.toggler->unlock(app);
  EXPECT_EQ(gpu.state(app), "running");
  auto locks = gpu.calls("lock");
  ASSERT_EQ(locks.size(), 1u);
  EXPECT_NE(locks[0].extra.find("timeout=4321"), std::string::npos) << "the timeout crosses the pipe";
  EXPECT_EQ(t.helper->pid(), helper) << "one helper serves every call";
}

TEST(CudaHelper, DriverErrorsArriveAsCudaErrors) {
  FakeGpu gpu;
  pid_t holder = gpu.start_app({"--no-cuda"});
  pid_t app = gpu.start_app();
  DirectWaiter w;
  ProcessRunner r(w);
  CudaTools t = tools_for(gpu, r);
  try {
    t.toggler->get_state(holder);
    FAIL();
  } catch (const CudaError& e) {
    EXPECT_EQ(e.pid(), holder);
    EXPECT_EQ(e.driver_code(), kCudaNotInitialized);
    EXPECT_EQ(e.driver_name(), "CUDA_ERROR_NOT_INITIALIZED");
    EXPECT_EQ(e.op(), "get-state");
  }
  gpu.fail("lock " + std::to_string(app) + " 909\n");
  try {
    t.toggler->lock(app, 10);
    FAIL();
  } catch (const CudaError& e) {
    EXPECT_EQ(e.code(), Code::DeadlineExceeded);
    EXPECT_EQ(e.answer(), "CUDA_ERROR_TIMEOUT (909)");
  }
}

TEST(CudaHelper, ParallelCallsAreServedConcurrently) {
  FakeGpu gpu;
  std::vector<pid_t> apps;
  for (int i = 0; i < 4; ++i) apps.push_back(gpu.start_app());
  gpu.delay_ms(300);
  DirectWaiter w;
  ProcessRunner r(w);
  CudaTools t = tools_for(gpu, r);
  for (pid_t p : apps) t.toggler->lock(p, 1000);
  std::vector<std::future<void>> f;  // the fake driver takes 300 ms per checkpoint
  for (pid_t p : apps) f.push_back(std::async(std::launch::async, [&, p] { t.toggler->checkpoint(p); }));
  for (auto& x : f) x.get();
  // All four checkpoints overlap in time: none began after another had ended.
  auto calls = gpu.calls("checkpoint");
  ASSERT_EQ(calls.size(), 4u);
  long long first_end = calls[0].end, last_start = calls[0].start;
  for (const auto& c : calls) {
    first_end = std::min(first_end, c.end);
    last_start = std::max(last_start, c.start);
  }
  EXPECT_LT(last_start, first_end) << "the helper serialised the calls";
}

TEST(CudaHelper, GpuUsageComesFromNvmlInTheHelper) {
  FakeGpu gpu;
  gpu.nvml("100 0\n100 1\n200 1\n");
  DirectWaiter w;
  ProcessRunner r(w);
  CudaTools t = tools_for(gpu, r);
  auto m = t.probe->gpus_by_pid();
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[100], (std::set<std::string>{"GPU-fake-0000", "GPU-fake-0001"}));
  EXPECT_EQ(m[200], (std::set<std::string>{"GPU-fake-0001"}));
  CheckpointConfig cfg = gpu.config();
  cfg.cuda_helper = CUDA_HELPER_PATH;
  cfg.libnvml = "/nonexistent/libnvidia-ml.so.1";
  CudaTools bad = make_cuda_tools(cfg, r);
  try {
    bad.probe->gpus_by_pid();
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::FailedPrecondition);
    EXPECT_NE(std::string(e.what()).find("/nonexistent/libnvidia-ml.so.1"), std::string::npos) << e.what();
  }
}

TEST(CudaHelper, MissingHelperIsAClearError) {
  DirectWaiter w;
  ProcessRunner r(w);
  CheckpointConfig cfg;
  cfg.cuda_helper = "/nonexistent/nvproxy-cuda-helper";
  CudaTools t = make_cuda_tools(cfg, r);
  try {
    t.toggler->get_state(1);
    FAIL();
  } catch (const CudaError&) {
    FAIL() << "not a driver answer";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::FailedPrecondition);
    EXPECT_NE(std::string(e.what()).find("/nonexistent/nvproxy-cuda-helper"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("does not exist or is not executable"), std::string::npos) << e.what();
  }
}

TEST(CudaHelper, AHelperThatDiesFailsItsCallsAndIsReplaced) {
  fs::path d = make_temp_dir();
  // Dies on its first request, after leaving a mark; a second start answers properly.
  std::string prog = script(d, "if [ -e " + (d / "died").string() +
                                   " ]; then\n"
                                   "  read -r req; echo '{\"id\":2,\"ok\":true,\"result\":0}'\n"
                                   "else touch " +
                                   (d / "died").string() + "; read -r req; exit 7; fi\n");
  DirectWaiter w;
  ProcessRunner r(w);
  auto helper = std::make_shared<CudaHelper>(r, std::vector<std::string>{prog});
  HelperToggler t(helper);
  try {
    t.get_state(42);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::Unavailable);
    EXPECT_NE(std::string(e.what()).find("nvproxy-cuda-helper (pid "), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("exit status 7"), std::string::npos) << e.what();
  }
  EXPECT_EQ(t.get_state(42), CudaState::Running) << "a fresh helper serves the next call";
  fs::remove_all(d);
}

TEST(CudaHelper, GarbageAnswersAreErrorsNotCrashes) {
  fs::path d = make_temp_dir();
  // Answers id 1 with a state out of range and an error that is not one, then hangs up.
  std::string prog = script(d,
                            "read -r a; echo 'not json'; echo '{\"id\":1,\"ok\":true,\"result\":99}'\n"
                            "read -r b; echo '{\"id\":2,\"ok\":false,\"error\":{\"cuda\":{\"pid\":\"x\"}}}'\n");
  DirectWaiter w;
  ProcessRunner r(w);
  auto helper = std::make_shared<CudaHelper>(r, std::vector<std::string>{prog});
  HelperToggler t(helper);
  try {
    t.get_state(5);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::Internal);
    EXPECT_NE(std::string(e.what()).find("unknown CUDA state 99"), std::string::npos) << e.what();
  }
  try {
    t.lock(5, 1);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::Internal);
    EXPECT_NE(std::string(e.what()).find("malformed error"), std::string::npos) << e.what();
  }
  fs::remove_all(d);
}

TEST(CudaHelperServer, RefusesBadRequestsPlainly) {
  FakeGpu gpu;
  DirectWaiter w;
  ProcessRunner r(w);
  CudaTools t = tools_for(gpu, r);  // any toggler and probe: the requests never reach them
  auto code_of = [&](const json& req) {
    json resp = handle_helper_request(req, *t.toggler, *t.probe);
    EXPECT_FALSE(resp["ok"].get<bool>()) << resp;
    return resp["error"]["code"].get<int>();
  };
  EXPECT_EQ(code_of(json::array()), static_cast<int>(Code::InvalidArgument));
  EXPECT_EQ(code_of({{"id", 1}, {"op", "format-disk"}}), static_cast<int>(Code::Unimplemented));
  EXPECT_EQ(code_of({{"id", 1}, {"op", "lock"}}), static_cast<int>(Code::InvalidArgument));
  EXPECT_EQ(code_of({{"id", 1}, {"op", "lock"}, {"pid", -3}}), static_cast<int>(Code::InvalidArgument));
  EXPECT_EQ(code_of({{"id", 1}, {"op", "lock"}, {"pid", "12"}}), static_cast<int>(Code::InvalidArgument));
  EXPECT_EQ(code_of({{"id", 1}, {"op", "unlock"}, {"pid", 1LL << 40}}), static_cast<int>(Code::InvalidArgument));
  EXPECT_EQ(t.helper->pid(), 0) << "nothing reached the driver";
}
