// The CheckpointHooks the daemon uses: the GPU-aware checkpoint flow (shim/checkpoint_flow.h).
#pragma once

#include "shim/task/container.h"

namespace nvproxy::shim {

class GpuCheckpointHooks final : public CheckpointHooks {
 public:
  GpuCheckpointHooks(Logger& log, ProcessRunner& runner) : log_(log), runner_(runner) {}
  void checkpoint(Container& c, const oci::CheckpointFlags& flags, bool paused) override;
  // Refuses a restore this host's GPUs cannot give back (check_restore_host).
  void before_restore(Container& c, const std::filesystem::path& image) override;
  void after_restore(Container& c, const std::filesystem::path& image) override;

 private:
  Logger& log_;
  ProcessRunner& runner_;
};

}  // namespace nvproxy::shim
