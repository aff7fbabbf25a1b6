// The CUDA driver's checkpoint API, loaded with dlopen so the shim runs (and checkpoints non-GPU
// containers) on machines without a driver. The library is loaded on first use. Like the verified
// reference (shared/gpu-reference/gpu_orchestrate.py) it never calls cuInit: the checkpoint calls
// work from a process that has no CUDA context of its own, and creating one would cost GPU memory.
#pragma once

#include <mutex>
#include <optional>

#include "checkpoint/shared/cuda_toggler.h"

namespace nvproxy::checkpoint {

class DriverApiToggler final : public CudaToggler {
 public:
  explicit DriverApiToggler(std::string libcuda = "libcuda.so.1");
  ~DriverApiToggler() override;
  DriverApiToggler(const DriverApiToggler&) = delete;
  DriverApiToggler& operator=(const DriverApiToggler&) = delete;

  std::string describe() override;
  CudaState get_state(pid_t pid) override;
  void lock(pid_t pid, unsigned timeout_ms) override;
  void checkpoint(pid_t pid) override;
  // A map fills the restore args' GPU pairs (CUcheckpointRestoreArgs.gpuPairs); throws
  // Error(InvalidArgument) for a UUID that is not "GPU-" and 32 hex digits.
  void restore(pid_t pid, const DeviceMap& map) override;
  void unlock(pid_t pid) override;
  // cuDriverGetVersion, e.g. 12080; throws Error if the library is unusable.
  int driver_version();
  // cuCheckpointProcessGetRestoreThreadId; nullopt where the driver lacks it. Throws CudaError.
  std::optional<int> restore_thread_id(pid_t pid);

  struct Api;

 private:
  const Api& api();  // loads once; throws Error(FailedPrecondition) naming the library
  void check(int rc, pid_t pid, const char* op);
  std::string lib_;
  std::once_flag once_;
  std::unique_ptr<Api> api_;
  std::string load_error_;
};

}  // namespace nvproxy::checkpoint
