// Moving a process's CUDA state (the driver's checkpoint API): RUNNING -lock-> LOCKED -checkpoint->
// CHECKPOINTED -restore-> LOCKED -unlock-> RUNNING. Implementations: the driver API through dlopen
// (cuda_driver_api.h, used inside nvproxy-cuda-helper), the shim's client of that helper
// (cuda_helper_client.h) and the cuda-checkpoint binary (cuda_checkpoint_bin.h).
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"

namespace nvproxy::checkpoint {

enum class CudaState { Running = 0, Locked = 1, Checkpointed = 2, Failed = 3 };
std::string_view state_name(CudaState s);  // running | locked | checkpointed | failed

// A toggle the driver refused. driver_code is the CUresult (-1 when unknown, e.g. the binary
// failed without saying), driver_name e.g. "CUDA_ERROR_NOT_SUPPORTED".
class CudaError : public Error {
 public:
  CudaError(pid_t pid, std::string op, int driver_code, std::string driver_name, std::string detail = "");
  pid_t pid() const { return pid_; }
  const std::string& op() const { return op_; }
  int driver_code() const { return driver_code_; }
  const std::string& driver_name() const { return driver_name_; }
  const std::string& detail() const { return detail_; }
  // "CUDA_ERROR_NOT_SUPPORTED (801)", plus detail if any: what the driver answered.
  std::string answer() const;

 private:
  pid_t pid_;
  std::string op_;
  int driver_code_;
  std::string driver_name_, detail_;
};

// CUresult values the orchestrator looks at.
inline constexpr int kCudaNotInitialized = 3;
inline constexpr int kCudaOperatingSystem = 304;  // what a process answers while it ends
inline constexpr int kCudaTimeout = 909;

// The answers of a process on its way out: 304 from one still ending, 3 from one whose exit has
// already torn its CUDA down. Only these earn the wait for the process to be gone.
inline bool answers_as_ending(int driver_code) {
  return driver_code == kCudaOperatingSystem || driver_code == kCudaNotInitialized;
}

// A restore onto other GPUs: each GPU the process was checkpointed on ("GPU-<uuid>"), paired with
// the GPU it comes back on. The driver (R580) wants every checkpointed GPU paired, moved or not.
struct GpuPair {
  std::string from, to;
  bool operator==(const GpuPair&) const = default;
};
using DeviceMap = std::vector<GpuPair>;
std::string device_map_text(const DeviceMap& m);  // "GPU-a=GPU-b,GPU-b=GPU-a" (cuda-checkpoint's --device-map)

class CudaToggler {
 public:
  virtual ~CudaToggler() = default;
  virtual std::string describe() = 0;  // for logs: "driver API (libcuda.so.1)"
  // All throw CudaError when the driver refuses, Error when the API cannot be reached at all.
  // get_state failing means "not a CUDA process" (the driver answers NOT_INITIALIZED for those).
  virtual CudaState get_state(pid_t pid) = 0;
  virtual void lock(pid_t pid, unsigned timeout_ms) = 0;
  virtual void checkpoint(pid_t pid) = 0;
  // Back onto the GPUs it was checkpointed on (an empty map), or onto those `map` names. Throws
  // Error(Unimplemented) where the toggler cannot remap.
  virtual void restore(pid_t pid, const DeviceMap& map) = 0;
  virtual void unlock(pid_t pid) = 0;
};

}  // namespace nvproxy::checkpoint
