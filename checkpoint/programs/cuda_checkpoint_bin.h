// The toggles through NVIDIA's cuda-checkpoint binary, for hosts that prefer it to the driver API:
//   cuda-checkpoint --get-state --pid P
//   cuda-checkpoint --action lock|checkpoint|restore|unlock --pid P [--timeout MS]
//   cuda-checkpoint --action restore --pid P --device-map OLD=NEW,...   (R580: onto other GPUs)
// No timeout is put on the command: killing a toggle midway leaves the driver out of sync; the
// lock timeout bounds it instead.
#pragma once

#include <string>
#include <vector>

#include "checkpoint/shared/cuda_toggler.h"
#include "common/process.h"

namespace nvproxy::checkpoint {

class CudaCheckpointBinToggler final : public CudaToggler {
 public:
  CudaCheckpointBinToggler(ProcessRunner& runner, std::string binary = "cuda-checkpoint")
      : runner_(runner), bin_(std::move(binary)) {}
  std::string describe() override { return "cuda-checkpoint binary (" + bin_ + ")"; }
  CudaState get_state(pid_t pid) override;
  void lock(pid_t pid, unsigned timeout_ms) override;
  void checkpoint(pid_t pid) override { action(pid, "checkpoint", {}); }
  void restore(pid_t pid, const DeviceMap& map) override {
    action(pid, "restore",
           map.empty() ? std::vector<std::string>{} : std::vector<std::string>{"--device-map", device_map_text(map)});
  }
  void unlock(pid_t pid) override { action(pid, "unlock", {}); }

 private:
  RunResult run(pid_t pid, const std::string& op, std::vector<std::string> args);
  void action(pid_t pid, const std::string& op, std::vector<std::string> extra);
  ProcessRunner& runner_;
  std::string bin_;
};

}  // namespace nvproxy::checkpoint
