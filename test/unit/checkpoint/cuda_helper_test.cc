// The shim's CUDA path through nvproxy-cuda-helper: the real helper program (built beside the
// shim) loading the fake driver, the client's handling of a helper that fails or dies, and the
// helper's ttrpc service in-process.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <future>
#include <thread>

#include "checkpoint/helper/cuda_helper_service.h"
#include "checkpoint/programs/cuda_helper_client.h"
#include "checkpoint/shared/cuda_helper_wire.h"
#include "common/ttrpc/client.h"
#include "fake_gpu.h"

using namespace nvproxy;
using namespace nvproxy::checkpoint;
using namespace nvproxy::checkpoint::testing;

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
  t.toggler->restore(app, {});
  t.toggler->unlock(app);
  EXPECT_EQ(gpu.state(app), "running");
  auto locks = gpu.calls("lock");
  ASSERT_EQ(locks.size(), 1u);
  EXPECT_NE(locks[0].extra.find("timeout=4321"), std::string::npos) << "the timeout crosses the pipe";
  EXPECT_EQ(t.helper->pid(), helper) << "one helper serves every call";
}

TEST(CudaHelper, TheDeviceMapCrossesToTheDriver) {
  FakeGpu gpu;
  pid_t app = gpu.start_app();
  DirectWaiter w;
  ProcessRunner r(w);
  CudaTools t = tools_for(gpu, r);
  t.toggler->lock(app, 1000);
  t.toggler->checkpoint(app);
  t.toggler->restore(app, {{"GPU-00000000-0000-0000-0000-0000000000a1", "GPU-00000000-0000-0000-0000-0000000000c3"}});
  t.toggler->unlock(app);
  auto restores = gpu.calls("restore");
  ASSERT_EQ(restores.size(), 1u);
  EXPECT_EQ(restores[0].extra, "pairs=000000000000000000000000000000a1>000000000000000000000000000000c3");
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

TEST(CudaHelper, AToggleThatOutlivesItsDeadlineFailsAndTheHelperServesOn) {
  FakeGpu gpu;
  pid_t app = gpu.start_app();
  DirectWaiter w;
  ProcessRunner r(w);
  CheckpointConfig cfg = gpu.config();
  cfg.cuda_helper = CUDA_HELPER_PATH;
  cfg.toggle_timeout_ms = 100;
  CudaTools t = make_cuda_tools(cfg, r);
  t.toggler->lock(app, 1000);
  gpu.delay_ms(1500);  // the driver takes longer than the deadline
  try {
    t.toggler->checkpoint(app);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::DeadlineExceeded) << e.what();
    EXPECT_NE(std::string(e.what()).find("Checkpoint"), std::string::npos) << e.what();
  }
  gpu.delay_ms(0);
  // The driver's call finished in the helper; the same helper answers the next call.
  pid_t helper = t.helper->pid();
  EXPECT_NE(t.toggler->get_state(app), CudaState::Running);
  EXPECT_EQ(t.helper->pid(), helper);
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
    EXPECT_NE(std::string(e.what()).find("cannot be found"), std::string::npos) << e.what();
  }
}

TEST(CudaHelper, AHelperThatDiesFailsItsCallsAndIsReplaced) {
  FakeGpu gpu;
  pid_t app = gpu.start_app();
  fs::path d = make_temp_dir();
  // The first start reads a little of the first request and dies; a second start is the real helper.
  std::string prog = script(d, "if [ -e " + (d / "died").string() + " ]; then exec " + CUDA_HELPER_PATH + " \"$@\"; fi\n" +
                                   "touch " + (d / "died").string() + "; dd bs=1 count=4 of=/dev/null 2>/dev/null; exit 7\n");
  DirectWaiter w;
  ProcessRunner r(w);
  CheckpointConfig cfg = gpu.config();
  cfg.cuda_helper = prog;
  CudaTools t = make_cuda_tools(cfg, r);
  try {
    t.toggler->get_state(app);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::Unavailable);
    EXPECT_NE(std::string(e.what()).find("nvproxy-cuda-helper (pid "), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("exit status 7"), std::string::npos) << e.what();
  }
  EXPECT_EQ(t.toggler->get_state(app), CudaState::Running) << "a fresh helper serves the next call";
  fs::remove_all(d);
}

TEST(CudaHelper, GarbageAnswersAreErrorsNotCrashes) {
  fs::path d = make_temp_dir();
  // Reads the request's frame header, answers its stream (1) with a frame whose body is no
  // Response, then hangs up.
  std::string prog = script(d,
                            "dd bs=1 count=10 of=/dev/null 2>/dev/null\n"
                            "printf '\\000\\000\\000\\003\\000\\000\\000\\001\\002\\000\\377\\377\\377' >&0\n"
                            "dd bs=1 count=1 of=/dev/null 2>/dev/null\n");
  DirectWaiter w;
  ProcessRunner r(w);
  auto helper = std::make_shared<CudaHelper>(r, std::vector<std::string>{prog});
  HelperToggler t(helper);
  try {
    t.get_state(5);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::Internal) << e.what();
    EXPECT_NE(std::string(e.what()).find("malformed response"), std::string::npos) << e.what();
  }
  fs::remove_all(d);
}

TEST(CudaHelperWire, UnknownStatesAndMalformedFailuresAreInternalErrors) {
  EXPECT_EQ(helper_wire::state_from_wire(2), CudaState::Checkpointed);
  try {
    helper_wire::state_from_wire(99);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::Internal);
    EXPECT_NE(std::string(e.what()).find("unknown CUDA state 99"), std::string::npos) << e.what();
  }
  try {
    helper_wire::rethrow(ttrpc::StatusError(Code::Aborted, "x", {{helper_wire::kCudaFailureType, "\xff\xff"}}));
    FAIL();
  } catch (const CudaError&) {
    FAIL() << "garbage became a driver answer";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::Internal);
    EXPECT_NE(std::string(e.what()).find("malformed CUDA failure"), std::string::npos) << e.what();
  }
}

TEST(CudaHelperWire, HostFactsSurviveTheWire) {
  GpuHostFacts f;
  f.driver_version = "580.159.04";
  f.devices.push_back(
      {.index = 1, .uuid = "GPU-b", .name = "NVIDIA H200", .memory_total = 3, .memory_free = 2, .memory_used = 1});
  f.processes[42] = {{.uuid = "GPU-b", .used_bytes = 7}, {.uuid = "GPU-c", .used_bytes = std::nullopt}};
  GpuHostFacts back = helper_wire::from_wire(helper_wire::to_wire(f));
  EXPECT_EQ(to_json(back), to_json(f));
  EXPECT_FALSE(back.processes[42][1].used_bytes.has_value()) << "\"NVML cannot say\" is not zero bytes";
}

// The helper's service in-process, as the helper program serves it, over a socketpair.
TEST(CudaHelperService, RefusesBadRequestsPlainly) {
  FakeGpu gpu;
  DirectWaiter w;
  ProcessRunner r(w);
  CudaTools t = tools_for(gpu, r);  // any toggler and probe: the requests never reach them
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  Logger log(-1);
  ttrpc::Server server(log, {.require_same_user = false, .stop_when_disconnected = true});
  register_cuda_helper_service(server, *t.toggler, *t.probe);
  server.serve_connection(UniqueFd(sv[1]));
  auto ran = std::async(std::launch::async, [&] { server.run(); });
  auto client = ttrpc::Client::adopt(UniqueFd(sv[0]), "helper");
  auto code_of = [&](const std::string& method, const std::string& payload) {
    try {
      client->call(helper_wire::kService, method, payload);
    } catch (const Error& e) {
      return e.code();
    }
    return Code::Ok;
  };
  nvproxy::cuda::v1::ProcessRequest neg;
  neg.set_pid(-3);
  EXPECT_EQ(code_of("FormatDisk", ""), Code::Unimplemented);
  EXPECT_EQ(code_of("Lock", neg.SerializeAsString()), Code::InvalidArgument);
  EXPECT_EQ(code_of("Lock", ""), Code::InvalidArgument) << "pid 0";
  EXPECT_EQ(code_of("Unlock", "\xff\xff"), Code::InvalidArgument) << "not a ProcessRequest";
  EXPECT_EQ(t.helper->pid(), 0) << "nothing reached the driver";
  client->close();
  EXPECT_EQ(ran.wait_for(std::chrono::seconds(10)), std::future_status::ready);
}
