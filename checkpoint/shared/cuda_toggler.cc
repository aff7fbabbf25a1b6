#include "checkpoint/shared/cuda_toggler.h"

namespace nvproxy::checkpoint {

std::string_view state_name(CudaState s) {
  switch (s) {
    case CudaState::Running: return "running";
    case CudaState::Locked: return "locked";
    case CudaState::Checkpointed: return "checkpointed";
    case CudaState::Failed: return "failed";
  }
  return "unknown";
}

namespace {
Code code_for(int driver_code) {
  if (driver_code == kCudaTimeout) return Code::DeadlineExceeded;
  return Code::FailedPrecondition;
}
std::string answer_text(int code, const std::string& name, const std::string& detail) {
  std::string s = name.empty() ? "error" : name;
  if (code >= 0) s += " (" + std::to_string(code) + ")";
  if (!detail.empty()) s += ": " + detail;
  return s;
}
}  // namespace

CudaError::CudaError(pid_t pid, std::string op, int driver_code, std::string driver_name, std::string detail)
    : Error(code_for(driver_code),
            "CUDA " + op + " of pid " + std::to_string(pid) + " failed: " + answer_text(driver_code, driver_name, detail)),
      pid_(pid),
      op_(std::move(op)),
      driver_code_(driver_code),
      driver_name_(std::move(driver_name)),
      detail_(std::move(detail)) {}

std::string CudaError::answer() const {
  return answer_text(driver_code_, driver_name_, detail_);
}

std::string device_map_text(const DeviceMap& m) {
  std::string out;
  for (const auto& p : m) out += (out.empty() ? "" : ",") + p.from + "=" + p.to;
  return out;
}

}  // namespace nvproxy::checkpoint
