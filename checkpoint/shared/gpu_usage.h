// Which GPUs each process has compute contexts on. The driver checkpoints a process with contexts
// on two GPUs (or an NCCL rank) but refuses to restore it (errors 1 and 801 measured on 2x H200),
// stranding the workload: the orchestrator asks this before toggling anything.
#pragma once

#include <sys/types.h>

#include <map>
#include <mutex>
#include <set>
#include <string>

#include "checkpoint/facts/gpu_facts.h"
#include "common/error.h"

namespace nvproxy::checkpoint {

class GpuUsageProbe {
 public:
  virtual ~GpuUsageProbe() = default;
  // Host pid -> GPU UUIDs it has compute contexts on (pids without contexts are absent).
  // Throws Error when the information cannot be had.
  virtual std::map<pid_t, std::set<std::string>> gpus_by_pid() = 0;
  // The driver version, every device (model, UUID, memory) and each process's device memory, for
  // the restore preflight (restore_preflight.h). Throws Error when NVML cannot be had.
  virtual GpuHostFacts host_facts() { throw Error(Code::Unimplemented, "this GPU probe cannot report host facts"); }
};

// Through NVML (dlopen, loaded on first use): nvmlDeviceGetComputeRunningProcesses_v3 per GPU;
// host_facts adds nvmlSystemGetDriverVersion, nvmlDeviceGetName and nvmlDeviceGetMemoryInfo.
class NvmlGpuUsageProbe final : public GpuUsageProbe {
 public:
  explicit NvmlGpuUsageProbe(std::string libnvml = "libnvidia-ml.so.1") : lib_(std::move(libnvml)) {}
  std::map<pid_t, std::set<std::string>> gpus_by_pid() override;
  GpuHostFacts host_facts() override;

 private:
  std::string lib_;
  std::mutex mu_;  // NVML init/shutdown are reference counted, but keep one query at a time
};

}  // namespace nvproxy::checkpoint
