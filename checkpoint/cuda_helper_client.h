// The shim's side of nvproxy-cuda-helper (cuda_helper_protocol.h): a CudaToggler and a
// GpuUsageProbe whose calls the helper program makes with the real driver. The helper is started
// on the first call (a checkpoint of a container without GPU holders never starts it) and ends
// with the CudaHelper; if it dies, the calls in flight fail with an Error naming it and the next
// call starts a fresh one (so a rollback after a helper crash still reaches the driver).
#pragma once

#include <sys/types.h>

#include <condition_variable>
#include <cstdint>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "checkpoint/config.h"
#include "checkpoint/cuda_toggler.h"
#include "checkpoint/gpu_usage.h"
#include "common/process.h"
#include "common/unique_fd.h"

namespace nvproxy::checkpoint {

// Where the helper is looked for when the config names none: beside the running binary, then in
// ../libexec/containerd-shim-nvproxy/ (the packaged layout: /usr/bin + /usr/libexec).
std::string default_cuda_helper_path();

class CudaHelper {
 public:
  // argv: the helper program and its arguments. runner: starts it and reaps it (the shim's reaper).
  CudaHelper(ProcessRunner& runner, std::vector<std::string> argv);
  ~CudaHelper();  // closes the helper's stdin and waits for it (SIGKILL after 10 s)
  CudaHelper(const CudaHelper&) = delete;
  CudaHelper& operator=(const CudaHelper&) = delete;

  // Sends {"op": op, ...args}; returns the answer's "result" or throws the Error the helper sent
  // back (CudaError kept as CudaError). Thread-safe; calls run concurrently in the helper.
  nlohmann::json call(const std::string& op, nlohmann::json args = nlohmann::json::object());
  pid_t pid();  // the running helper's pid, 0 when none runs

 private:
  struct Instance;
  std::shared_ptr<Instance> running();                    // starts one if none runs
  void read_loop(const std::shared_ptr<Instance>& inst);  // the thread's lambda holds a copy
  void stop(const std::shared_ptr<Instance>& inst);

  ProcessRunner& runner_;
  std::vector<std::string> argv_;
  std::mutex mu_;
  std::shared_ptr<Instance> inst_;
  std::vector<std::shared_ptr<Instance>> dead_;  // ended helpers whose reader threads are joined at the end
  std::uint64_t next_id_ = 1;
};

class HelperToggler final : public CudaToggler {
 public:
  explicit HelperToggler(std::shared_ptr<CudaHelper> helper) : helper_(std::move(helper)) {}
  std::string describe() override;
  CudaState get_state(pid_t pid) override;
  void lock(pid_t pid, unsigned timeout_ms) override;
  void checkpoint(pid_t pid) override;
  void restore(pid_t pid) override;
  void unlock(pid_t pid) override;

 private:
  std::shared_ptr<CudaHelper> helper_;
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

}  // namespace nvproxy::checkpoint
