#include <gtest/gtest.h>
#include <sys/stat.h>

#include "checkpoint/driver/cuda_driver_api.h"
#include "checkpoint/programs/cuda_checkpoint_bin.h"
#include "checkpoint/shared/gpu_usage.h"
#include "fake_gpu.h"

using namespace nvproxy;
using namespace nvproxy::checkpoint;
using namespace nvproxy::checkpoint::testing;

TEST(DriverApiToggler, FullCycleAgainstFakeDriver) {
  FakeGpu gpu;
  pid_t app = gpu.start_app();
  DriverApiToggler t(FAKE_LIBCUDA_PATH);
  EXPECT_EQ(t.driver_version(), 12080);
  EXPECT_EQ(t.get_state(app), CudaState::Running);
  t.lock(app, 777);
  EXPECT_EQ(t.get_state(app), CudaState::Locked);
  t.checkpoint(app);
  EXPECT_EQ(t.get_state(app), CudaState::Checkpointed);
  EXPECT_TRUE(fs::exists(gpu.file(app, "closed")));
  t.restore(app, {});
  EXPECT_EQ(t.get_state(app), CudaState::Locked);
  t.unlock(app);
  EXPECT_EQ(gpu.state(app), "running");
  EXPECT_EQ(t.restore_thread_id(app), app);
  auto locks = gpu.calls("lock");
  ASSERT_EQ(locks.size(), 1u);
  EXPECT_NE(locks[0].extra.find("timeout=777"), std::string::npos) << "the lock args must carry the timeout";
}

TEST(DriverApiToggler, ErrorsCarryPidCodeAndName) {
  FakeGpu gpu;
  pid_t holder = gpu.start_app({"--no-cuda"});
  DriverApiToggler t(FAKE_LIBCUDA_PATH);
  try {
    t.get_state(holder);
    FAIL();
  } catch (const CudaError& e) {
    EXPECT_EQ(e.pid(), holder);
    EXPECT_EQ(e.driver_code(), 3);
    EXPECT_EQ(e.driver_name(), "CUDA_ERROR_NOT_INITIALIZED");
    EXPECT_NE(std::string(e.what()).find("pid " + std::to_string(holder)), std::string::npos);
  }
  pid_t app = gpu.start_app();
  gpu.fail("lock " + std::to_string(app) + " 909\n");
  try {
    t.lock(app, 10);
    FAIL();
  } catch (const CudaError& e) {
    EXPECT_EQ(e.code(), Code::DeadlineExceeded);
    EXPECT_EQ(e.answer(), "CUDA_ERROR_TIMEOUT (909)");
  }
  // Illegal transitions are the driver's to refuse.
  try {
    t.unlock(app);
    FAIL();
  } catch (const CudaError& e) {
    EXPECT_EQ(e.driver_code(), 401);
    EXPECT_EQ(e.op(), "unlock");
  }
}

TEST(DriverApiToggler, MissingLibraryIsAClearError) {
  DriverApiToggler t("/nonexistent/libcuda.so.1");
  try {
    t.get_state(1);
    FAIL();
  } catch (const CudaError&) {
    FAIL() << "not a driver answer";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::FailedPrecondition);
    EXPECT_NE(std::string(e.what()).find("/nonexistent/libcuda.so.1"), std::string::npos);
  }
  // A library without the checkpoint API (an old driver): names what is missing.
  DriverApiToggler old(FAKE_LIBNVML_PATH);
  try {
    old.lock(1, 1);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cuCheckpointProcessLock"), std::string::npos) << e.what();
  }
}

// A restore onto other GPUs hands the driver every pair as two 16-byte UUIDs
// (CUcheckpointRestoreArgs.gpuPairs); the fake driver logs them in hex.
TEST(DriverApiToggler, RestoreOntoOtherGpusPassesThePairs) {
  FakeGpu gpu;
  pid_t app = gpu.start_app();
  DriverApiToggler t(FAKE_LIBCUDA_PATH);
  t.lock(app, 1000);
  t.checkpoint(app);
  const DeviceMap map{{"GPU-00000000-0000-0000-0000-0000000000a1", "GPU-79f8d0a3-1c4e-ffff-0000-123456789abc"},
                      {"GPU-00000000-0000-0000-0000-0000000000b2", "GPU-00000000-0000-0000-0000-0000000000b2"}};
  try {
    t.restore(app, {{"GPU-fake-0000", "GPU-00000000-0000-0000-0000-000000000001"}});
    FAIL();
  } catch (const CudaError&) {
    FAIL() << "a malformed UUID reached the driver";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("GPU-fake-0000"), std::string::npos) << e.what();
  }
  t.restore(app, map);
  t.unlock(app);
  EXPECT_EQ(gpu.state(app), "running");
  auto restores = gpu.calls("restore");
  ASSERT_EQ(restores.size(), 1u);
  EXPECT_EQ(restores[0].extra,
            "pairs=000000000000000000000000000000a1>79f8d0a31c4effff0000123456789abc,"
            "000000000000000000000000000000b2>000000000000000000000000000000b2");
}

TEST(CudaCheckpointBinToggler, RunsTheBinaryWithTheRightArguments) {
  fs::path d = make_temp_dir();
  fs::path bin = d / "cuda-checkpoint";
  // Records its arguments; answers like the real binary.
  spit(bin, "#!/bin/sh\necho \"$@\" >> " + (d / "args").string() +
                "\ncase \"$*\" in\n"
                "  *--get-state*--pid\\ 7) echo locked ;;\n"
                "  *--get-state*) echo 'Could not get state: CUDA_ERROR_NOT_INITIALIZED error 3' >&2; exit 1 ;;\n"
                "  *restore*) echo 'restore failed with error code 801' >&2; exit 1 ;;\n"
                "esac\n");
  ::chmod(bin.c_str(), 0755);
  DirectWaiter w;
  ProcessRunner r(w);
  CudaCheckpointBinToggler t(r, bin.string());
  EXPECT_EQ(t.get_state(7), CudaState::Locked);
  t.lock(7, 500);
  t.checkpoint(7);
  t.unlock(7);
  try {
    t.get_state(8);
    FAIL();
  } catch (const CudaError& e) {
    EXPECT_EQ(e.driver_code(), 3);
    EXPECT_EQ(e.driver_name(), "CUDA_ERROR_NOT_INITIALIZED");
  }
  try {
    t.restore(7, {});
    FAIL();
  } catch (const CudaError& e) {
    EXPECT_EQ(e.driver_code(), 801);
    EXPECT_EQ(e.pid(), 7);
  }
  EXPECT_THROW(t.restore(7, {{"GPU-a", "GPU-b"}, {"GPU-b", "GPU-a"}}), CudaError);
  EXPECT_EQ(slurp(d / "args"),
            "--get-state --pid 7\n--action lock --timeout 500 --pid 7\n--action checkpoint --pid 7\n"
            "--action unlock --pid 7\n--get-state --pid 8\n--action restore --pid 7\n"
            "--action restore --device-map GPU-a=GPU-b,GPU-b=GPU-a --pid 7");
  fs::remove_all(d);
}

TEST(NvmlGpuUsageProbe, ReadsContextsPerGpu) {
  FakeGpu gpu;
  gpu.nvml("100 0\n100 1\n200 1\n");
  NvmlGpuUsageProbe p(FAKE_LIBNVML_PATH);
  auto m = p.gpus_by_pid();
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[100], (std::set<std::string>{"GPU-fake-0000", "GPU-fake-0001"}));
  EXPECT_EQ(m[200], (std::set<std::string>{"GPU-fake-0001"}));
  // Many processes: the buffer grows.
  std::string lines;
  for (int i = 1; i <= 40; ++i) lines += std::to_string(1000 + i) + " 0\n";
  gpu.nvml(lines);
  EXPECT_EQ(p.gpus_by_pid().size(), 40u);
  EXPECT_THROW(NvmlGpuUsageProbe("/nonexistent/libnvidia-ml.so.1").gpus_by_pid(), Error);
}
