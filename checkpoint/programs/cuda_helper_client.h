// The shim's side of nvproxy-cuda-helper (cuda_helper_wire.h): a CudaToggler and a GpuUsageProbe
// whose calls the helper program makes with the real driver, as ttrpc calls over a socketpair. The
// helper is started on the first call (a checkpoint of a container without GPU holders never
// starts it) and ends with the CudaHelper; if it dies, the calls in flight fail with an Error naming
// it and its exit, and the next call starts a fresh one (so a rollback after a helper crash still
// reaches the driver). Every call has a deadline: one that passes fails the call
// (DeadlineExceeded) so the orchestrator can roll back and report, while the driver's own call is
// left to finish in the helper (a toggle is never killed midway).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "checkpoint/config.h"
#include "checkpoint/process/container_hold.h"
#include "checkpoint/shared/cuda_toggler.h"
#include "checkpoint/shared/gpu_usage.h"
#include "common/process.h"
#include "common/unique_fd.h"

namespace nvproxy::ttrpc {
class Client;
}

namespace nvproxy::checkpoint {

// Where the helper is looked for when the config names none: beside the running binary, then in
// ../libexec/containerd-shim-nvproxy/ (the packaged layout: /usr/bin + /usr/libexec).
std::string default_cuda_helper_path();

class CudaHelper {
 public:
  // argv: the helper program and its arguments. runner: starts it and reaps it (the shim's reaper).
  CudaHelper(ProcessRunner& runner, std::vector<std::string> argv);
  ~CudaHelper();  // hangs up and waits for the helper to exit (SIGKILL after 10 s)
  CudaHelper(const CudaHelper&) = delete;
  CudaHelper& operator=(const CudaHelper&) = delete;

  // Calls method of the helper's service with a serialized request; returns the serialized answer.
  // Throws the CudaError the driver gave, Error(DeadlineExceeded) after timeout, Error(Unavailable)
  // naming the helper's exit when it died. Thread-safe; calls run concurrently in the helper.
  std::string call(const std::string& method, const std::string& request, std::chrono::milliseconds timeout);
  pid_t pid();  // the running helper's pid, 0 when none runs

 private:
  struct Instance;
  std::shared_ptr<Instance> running();  // starts one if none runs
  static void stop(const std::shared_ptr<Instance>& inst);
  // After a broken connection: throws Error(Unavailable) with how the helper ended once it has
  // (within seconds); returns if it has not.
  static void throw_ended(const std::shared_ptr<Instance>& inst, const std::string& method);

  ProcessRunner& runner_;
  std::vector<std::string> argv_;
  std::mutex mu_;
  std::shared_ptr<Instance> inst_;
  std::vector<std::shared_ptr<Instance>> dead_;  // ended helpers whose watcher threads are joined at the end
};

class HelperToggler final : public CudaToggler {
 public:
  // toggle_timeout: the deadline of a checkpoint or restore call (a lock's is its own timeout plus
  // a margin); the driver's time grows with the process's device memory.
  explicit HelperToggler(std::shared_ptr<CudaHelper> helper, std::chrono::milliseconds toggle_timeout = std::chrono::minutes(10))
      : helper_(std::move(helper)), toggle_timeout_(toggle_timeout) {}
  std::string describe() override;
  CudaState get_state(pid_t pid) override;
  void lock(pid_t pid, unsigned timeout_ms) override;
  void checkpoint(pid_t pid) override;
  void restore(pid_t pid, const DeviceMap& map) override;
  void unlock(pid_t pid) override;

 private:
  void transition(const char* method, pid_t pid, unsigned lock_timeout_ms, std::chrono::milliseconds deadline,
                  const DeviceMap& map = {});

  std::shared_ptr<CudaHelper> helper_;
  std::chrono::milliseconds toggle_timeout_;
};

// The helper holds the processes (it is their tracer, and lets a restore thread run for its own
// driver calls); freeze and thaw are the runtime's.
class HelperHold final : public ContainerHold {
 public:
  HelperHold(std::shared_ptr<CudaHelper> helper, std::function<void()> freeze, std::function<void()> thaw)
      : helper_(std::move(helper)), freeze_(std::move(freeze)), thaw_(std::move(thaw)) {}
  std::vector<pid_t> hold(const std::vector<pid_t>& pids) override { return call_hold(pids, Mode::Running); }
  std::vector<pid_t> hold_frozen(const std::vector<pid_t>& pids) override { return call_hold(pids, Mode::Frozen); }
  std::vector<pid_t> hold_stopped(const std::vector<pid_t>& pids) override { return call_hold(pids, Mode::Stopped); }
  void settle() override { call_hold({}, Mode::Settle); }
  void release() override;
  void release(const std::vector<pid_t>& pids) override;
  void freeze() override { freeze_(); }
  void thaw() override { thaw_(); }

 private:
  enum class Mode { Running, Frozen, Stopped, Settle };
  std::vector<pid_t> call_hold(const std::vector<pid_t>& pids, Mode mode);
  std::shared_ptr<CudaHelper> helper_;
  std::function<void()> freeze_, thaw_;
};

class HelperGpuUsageProbe final : public GpuUsageProbe {
 public:
  explicit HelperGpuUsageProbe(std::shared_ptr<CudaHelper> helper) : helper_(std::move(helper)) {}
  std::map<pid_t, std::set<std::string>> gpus_by_pid() override;
  GpuHostFacts host_facts() override;

 private:
  std::shared_ptr<CudaHelper> helper_;
};

// What a checkpoint needs from the GPU side, per the `checkpoint:` config: the toggler (cuda:
// driver-api through the helper, cuda-checkpoint the binary, none nullptr) and the multi-GPU probe,
// sharing one helper. Throws Error(InvalidArgument) for an unknown checkpoint.cuda.
struct CudaTools {
  std::shared_ptr<CudaHelper> helper;
  std::unique_ptr<CudaToggler> toggler;
  std::unique_ptr<GpuUsageProbe> probe;
};
CudaTools make_cuda_tools(const CheckpointConfig& cfg, ProcessRunner& runner);
// The helper alone (started on first use), with the configured program, libcuda and NVML.
std::shared_ptr<CudaHelper> make_cuda_helper(const CheckpointConfig& cfg, ProcessRunner& runner);

}  // namespace nvproxy::checkpoint
